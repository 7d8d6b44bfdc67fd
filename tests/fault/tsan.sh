#!/bin/bash
# ThreadSanitizer on the shim's concurrency: the shim (client-lib/*.c), the
# protocol code (proto/*.c), the libcupti double and the workload are built
# here with -fsanitize=thread, straight with the compiler of this build
# (configure cannot build a second flavour inside make check), and the
# workload runs through the real daemon with several launching threads, a
# pool small enough that slots are declined and reused, and the daemon
# killed and restarted mid-run (the IO thread reconnects and reclaims slots
# while CUPTI's threads complete buffers).  Any race report fails the test.
# Skipped (77) when the compiler cannot build or run a TSan program.
. "$top_srcdir/tests/fault/fault-lib.sh"
# It builds its own ThreadSanitizer shim: the build without sanitizers runs it.
[ "${CUPTIMON_SANITIZERS:-no}" = yes ] && skip "it builds its own TSan shim, the same in every build"

CC_=${CUPTIMON_FAULT_CC:-cc}
CPPFLAGS_=${CUPTIMON_FAULT_CPPFLAGS:-}
LIBS_=${CUPTIMON_FAULT_LIBS:--ljson-c}
B=$T/tsan
mkdir -p "$B"
cat >"$B/probe.c" <<'C'
#include <pthread.h>
static int x;
static void *f(void *a) { __atomic_fetch_add(&x, 1, __ATOMIC_RELAXED); return a; }
int main(void) { pthread_t t; pthread_create(&t, 0, f, 0); pthread_join(t, 0); return 0; }
C
$CC_ -fsanitize=thread -o "$B/probe" "$B/probe.c" -pthread 2>"$B/probe.err" ||
    skip "$CC_ cannot build with -fsanitize=thread: $(head -1 "$B/probe.err")"
"$B/probe" >/dev/null 2>"$B/probe.err" || skip "a TSan program does not run here: $(head -1 "$B/probe.err")"

S=$top_srcdir
FLAGS="-fsanitize=thread -g -O1 -fno-omit-frame-pointer -pthread -fPIC -I$top_builddir -I$S/proto -I$S/client-lib $CPPFLAGS_"
t0=$(now_ms)
# The double keeps its libcupti-like name: the shim finds an already-loaded
# library by its "libcupti" prefix.
# shellcheck disable=SC2086
{
    $CC_ $FLAGS -shared -o "$B/libcupti-fake.so" "$S/tests/fakecupti/fakecupti.c" \
        "$S/tests/fakecupti/fakecupti-v2.c" &&
    $CC_ $FLAGS -fvisibility=hidden -shared -o "$B/libcuptimon.so" "$S"/client-lib/*.c "$S"/proto/*.c $LIBS_ -ldl &&
    $CC_ $FLAGS -I"$S/tests/fakecupti" -o "$B/workload" "$S/tests/fakecupti/workload.c" \
        "$S/tests/fakecupti/v2sub.c" \
        -L"$B" -Wl,-rpath,"$B" -lcupti-fake
} >"$B/build.log" 2>&1 || { cat "$B/build.log"; fail "the TSan build failed"; }
echo "tsan: built the shim, the double and the workload with -fsanitize=thread in $(($(now_ms) - t0)) ms"

export TSAN_OPTIONS="halt_on_error=0 exitcode=66 report_signal_unsafe=0 history_size=4"
start_daemon --flush-period 0.1
run_tsan() {
    CUDA_INJECTION64_PATH=$B/libcuptimon.so "$B/workload" "$@"
}
# 1: four launching threads, 4 slots of 64 KiB: slots go round fast, CUPTI
# gets declined, periodic flushes and releases race the completions.
CUPTIMON_POOL_SLOTS=4 CUPTIMON_SLOT_SIZE=64K run_tsan --kernels 60000 --threads 4 --streams 4 \
    --quiet --report "$T/t1.json" 2>"$T/tsan1.err" || true
# 1b: the same on CUPTI 13.3's v2 path (client-lib/v2.c), with a second
# subscriber in the process: the completion callbacks intern names with a
# lock-free table and note layouts under qlock, on CUPTI's threads.
FAKECUPTI_VERSION=130300 CUPTIMON_POOL_SLOTS=4 CUPTIMON_SLOT_SIZE=64K run_tsan --kernels 60000 \
    --threads 4 --streams 4 --quiet --v2-subscriber other --report "$T/t1b.json" \
    2>"$T/tsan1b.err" || true
# 2: the daemon is killed and restarted while two threads launch: the IO
# thread disconnects, reclaims the slots in flight and reconnects.
CUPTIMON_POOL_SLOTS=4 CUPTIMON_SLOT_SIZE=64K CUDA_INJECTION64_PATH=$B/libcuptimon.so \
    "$B/workload" --kernels 60000 --rate 30000 --threads 2 --quiet --report "$T/t2.json" \
    2>"$T/tsan2.err" &
w=$!
track "$w"
sleep 0.7
kill -KILL "$DPID"
wait "$DPID" 2>/dev/null || true
DPID=
sleep 0.3
start_daemon --flush-period 0.1
wait "$w" || true
stop_daemon
races=0
for f in "$T/tsan1.err" "$T/tsan1b.err" "$T/tsan2.err"; do
    n=$(grep -c "WARNING: ThreadSanitizer" "$f" || true)
    races=$((races + n))
    if [ "$n" -gt 0 ]; then
        echo "--- $f: $n report(s)"
        grep -A 30 "WARNING: ThreadSanitizer" "$f" | head -120
    fi
done
for r in t1 t1b t2; do
    [ -s "$T/$r.json" ] || { cat "$T/tsan1.err" "$T/tsan2.err" | tail -20; fail "run $r did not finish (no report)"; }
done
echo "tsan: run 1 recorded $(report_field "$T/t1.json" kernels_recorded) kernels" \
    "(declined $(report_field "$T/t1.json" requests_declined)), run 2 $(report_field "$T/t2.json" kernels_recorded)" \
    "across a daemon restart; $(($(now_ms) - t0)) ms in all"
[ "$races" = 0 ] || fail "ThreadSanitizer reported $races race(s) (above)"
echo "ok"
