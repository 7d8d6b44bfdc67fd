#!/bin/bash
# Every test, on a fresh machine: install what is missing, build from
# scratch, run the unit suites and the tests that need a build without
# sanitizers, the whole suite under ASan+UBSan, the unit suites under
# valgrind, a build and suite with no CUDA toolkit, a fuzz smoke, and
# distcheck.
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
    name_failures "$1" "$2"
}

# name_failures BUILD-DIR LABEL: each failed test of BUILD-DIR's last run,
# with why, into failures and check-failures.log.
name_failures() {
    # Name each failed test with the lines of its log that say why, so that
    # a CI run that keeps only the end of the output still tells.
    local trs t why
    while IFS= read -r trs; do
        grep -qE '^:test-result: (FAIL|ERROR|XPASS)' "$trs" || continue
        t=${trs%.trs}
        # pytest's summary names the failed tests; other logs say it in
        # their first FAIL/Error lines.
        why=$(grep -m 3 -E '^(FAILED|ERROR) [^ ]+::' "$t.log" 2>/dev/null)
        [ -n "$why" ] || why=$(grep -m 3 -E '^(FAIL|ERROR)[: ]|^E +|[A-Za-z]+Error|Sanitizer|failed' "$t.log" 2>/dev/null \
            | grep -v '^FAIL [^:]* (exit status')
        failures+=("$2: ${t#"$1"/}: $(echo "$why" | tr '\n' ' ' | cut -c1-400)")
        { echo "----- $2: $t.log (last 60 lines)"; tail -n 60 "$t.log"; } >>"$top/check-failures.log" 2>/dev/null
    done < <(find "$1" -name '*.trs' -newer "$1/config.status" | sort)
}

# stage NAME CMD...: a single pass/fail step.
stage() {
    local name=$1; shift
    echo "=== $name (at ${SECONDS} s)"
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$name"); fi
}

build() { # DIR CONFIGURE-ARGS...
    local dir=$1; shift
    rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" && "$top/configure" -q "$@" && make -s -j"$jobs"
    local rc=$?; cd "$top"; return $rc
}

# no_cuda_headers DIR: no product object of the build in DIR included a
# CUDA or CUPTI header (their dependency files list every header each
# object read; proto/cupti-abi.h is the project's own).
no_cuda_headers() {
    local deps hits
    deps=$(ls "$1"/{proto,archive,daemon,client-lib,cli}/.deps/*.P* 2>/dev/null)
    [ -n "$deps" ] || { echo "no dependency files under $1"; return 1; }
    hits=$(grep -lE '(^|[/ ])(cupti(_[a-z_]+)?|cuda(_runtime)?)\.h' $deps)
    [ -z "$hits" ] && return 0
    echo "product objects that include CUDA headers:"; echo "$hits"
    return 1
}

# exec_bits: the scripts people run by name (on the GPU machine, set-up,
# the demo) are executable in git: a clone keeps the mode git has.
exec_bits() {
    local bad
    bad=$(git ls-files -s 'tests/gpu/*.sh' 'bench/gpu/*.sh' 'scripts/*.sh' tests/demo.sh check.sh |
        awk '$1 != "100755" {print $4}')
    [ -z "$bad" ] && return 0
    echo "not executable in git (git update-index --chmod=+x):"; echo "$bad"
    return 1
}

stage "format (clang-format, .clang-format)" ./scripts/check-format.sh
stage "scripts run by name are executable" exec_bits

echo "=== build (gcc, -Werror) (at ${SECONDS} s)"
if build "$top/build-ci" --enable-werror; then
    # The unit suites and what only this build runs (tests/local.mk,
    # PLAIN_TESTS); every integration test runs in the ASan+UBSan build.
    (cd build-ci && make -s -j"$jobs" check-plain >/dev/null 2>&1)
    count_suite build-ci "make check-plain"
    stage "valgrind (unit suites)" make -s -C build-ci check-valgrind
    stage "product built without CUDA headers" no_cuda_headers build-ci
else
    failed=$((failed + 1)); failures+=("build")
fi

# A distribution's build: no CUDA toolkit (configure --without-cuda).  The
# product is the same; the tests that need CUPTI headers (the libcupti
# test double and everything run through it) are skipped, the rest pass.
echo "=== build (no CUDA toolkit) (at ${SECONDS} s)"
if build "$top/build-nocuda" --enable-werror --without-cuda; then
    # All but the tests whose verdict is the gcc build's (tests/local.mk,
    # check-nocuda): the same sources, the same daemon.
    (cd build-nocuda && make -s -j"$jobs" check-nocuda >/dev/null 2>&1)
    count_suite build-nocuda "make check-nocuda (no CUDA toolkit)"
else
    failed=$((failed + 1)); failures+=("build without CUDA")
fi

echo "=== build (ASan+UBSan) (at ${SECONDS} s)"
if build "$top/build-asan" --enable-werror --enable-sanitizers; then
    (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 make -s -j"$jobs" check >/dev/null 2>&1)
    count_suite build-asan "make check (ASan+UBSan)"
else
    failed=$((failed + 1)); failures+=("sanitizer build")
fi

if command -v clang >/dev/null; then
    echo "=== build (clang, libFuzzer) (at ${SECONDS} s)"
    if build "$top/build-fuzz" CC=clang --enable-fuzzing --enable-sanitizers; then
        stage "fuzz smoke" make -s -C build-fuzz fuzz-smoke FUZZ_SECONDS="${FUZZ_SECONDS:-15}"
    else
        failed=$((failed + 1)); failures+=("fuzz build")
    fi
fi

# distcheck's output is long: kept in a file, its end shown only on failure.
distcheck() {
    make -s -j"$jobs" -C build-ci distcheck-short DISTCHECK_CONFIGURE_FLAGS=--enable-werror >build-ci/distcheck.log 2>&1 \
        && { grep -A3 '^=====' build-ci/distcheck.log | tail -n 4; return 0; }
    tail -n 30 build-ci/distcheck.log
    grep -E '^(FAIL|ERROR|XPASS):' build-ci/distcheck.log | head -n 10
    # distcheck leaves its build behind when a test fails: say why.
    local sub
    for sub in build-ci/cuptimon-*/_build/sub; do
        [ -f "$sub/config.status" ] && name_failures "$sub" "distcheck"
    done
    return 1
}
stage "distcheck" distcheck

[ -s "$top/check-failures.log" ] && echo "(the failed tests' logs: check-failures.log)"
for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "(check.sh took ${SECONDS} s)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
