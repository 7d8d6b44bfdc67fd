#!/bin/bash
# Every test, on a fresh machine: install what is missing, build from
# scratch, run the unit and integration suites, the same again under
# ASan+UBSan, the unit suites under valgrind, a fuzz smoke, and distcheck.
# Ends with one line: "N passed, N failed".
set -u
cd "$(dirname "$0")"
top=$PWD
./scripts/install-deps.sh || { echo "0 passed, 1 failed"; exit 1; }
autoreconf -fi >/dev/null 2>&1 || { echo "autoreconf failed"; echo "0 passed, 1 failed"; exit 1; }
jobs=$(nproc)
passed=0
failed=0
failures=()
rm -f "$top/check-failures.log"

# count_suite DIR NAME: add the automake harness results of one build.
count_suite() {
    local log="$1/test-suite.log" p f e x
    if [ ! -f "$log" ]; then
        failed=$((failed + 1)); failures+=("$2: no test-suite.log"); return
    fi
    p=$(sed -n 's/^# PASS: *//p' "$log"); f=$(sed -n 's/^# FAIL: *//p' "$log")
    e=$(sed -n 's/^# ERROR: *//p' "$log"); x=$(sed -n 's/^# XPASS: *//p' "$log")
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0} + ${e:-0} + ${x:-0}))
    [ $(( ${f:-0} + ${e:-0} + ${x:-0} )) -eq 0 ] && return
    failures+=("$2: see $log")
    # Name each failed test with the lines of its log that say why, so that
    # a CI run that keeps only the end of the output still tells.
    local trs t
    while IFS= read -r trs; do
        grep -qE '^:test-result: (FAIL|ERROR|XPASS)' "$trs" || continue
        t=${trs%.trs}
        failures+=("$2: ${t#"$1"/}: $(grep -m 3 -E '^(FAIL|ERROR)[: ]|^E +|[A-Za-z]+Error|Sanitizer|failed' "$t.log" 2>/dev/null \
            | grep -v '^FAIL [^:]* (exit status' | tr '\n' ' ' | cut -c1-400)")
        { echo "----- $2: $t.log (last 60 lines)"; tail -n 60 "$t.log"; } >>"$top/check-failures.log" 2>/dev/null
    done < <(find "$1" -name '*.trs' -newer "$1/config.status" | sort)
}

# stage NAME CMD...: a single pass/fail step.
stage() {
    local name=$1; shift
    echo "=== $name"
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$name"); fi
}

build() { # DIR CONFIGURE-ARGS...
    local dir=$1; shift
    rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" && "$top/configure" -q "$@" && make -s -j"$jobs"
    local rc=$?; cd "$top"; return $rc
}

echo "=== build (gcc, -Werror)"
if build "$top/build-ci" --enable-werror; then
    (cd build-ci && make -s -j"$jobs" check >/dev/null 2>&1)
    count_suite build-ci "make check"
    stage "valgrind (unit suites)" make -s -C build-ci check-valgrind
else
    failed=$((failed + 1)); failures+=("build")
fi

echo "=== build (ASan+UBSan)"
if build "$top/build-asan" --enable-werror --enable-sanitizers; then
    (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 make -s -j"$jobs" check >/dev/null 2>&1)
    count_suite build-asan "make check (ASan+UBSan)"
else
    failed=$((failed + 1)); failures+=("sanitizer build")
fi

if command -v clang >/dev/null; then
    echo "=== build (clang, libFuzzer)"
    if build "$top/build-fuzz" CC=clang --enable-fuzzing --enable-sanitizers; then
        stage "fuzz smoke" make -s -C build-fuzz fuzz-smoke FUZZ_SECONDS="${FUZZ_SECONDS:-15}"
    else
        failed=$((failed + 1)); failures+=("fuzz build")
    fi
fi

# distcheck's output is long: kept in a file, its end shown only on failure.
distcheck() {
    make -s -C build-ci distcheck DISTCHECK_CONFIGURE_FLAGS=--enable-werror >build-ci/distcheck.log 2>&1 \
        && { grep -A3 '^=====' build-ci/distcheck.log | tail -n 4; return 0; }
    tail -n 30 build-ci/distcheck.log
    grep -E '^(FAIL|ERROR|XPASS):' build-ci/distcheck.log | head -n 10
    return 1
}
stage "distcheck" distcheck

[ -s "$top/check-failures.log" ] && echo "(the failed tests' logs: check-failures.log)"
for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
