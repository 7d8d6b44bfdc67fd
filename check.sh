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
    [ $(( ${f:-0} + ${e:-0} + ${x:-0} )) -eq 0 ] || failures+=("$2: see $log")
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

stage "distcheck" make -s -C build-ci distcheck DISTCHECK_CONFIGURE_FLAGS=--enable-werror

for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
