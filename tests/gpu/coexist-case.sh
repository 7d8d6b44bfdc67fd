#!/bin/bash
# torch.profiler in the middle of a PyTorch loop, with cuptimon on the same
# process (issues 10 and 17), on a real GPU, in the ways it is commonly used
# (torch-loop.py --variant):
#   manual    profile(activities=[CPU, CUDA]) entered and left twice;
#   schedule  schedule(wait=1, warmup=1, active=2, repeat=3) with an
#             on_trace_ready that exports each cycle's trace;
#   cudaonly  manual, activities=[CUDA];
#   shapes    manual, record_shapes=True, with_stack=True.
# Every variant runs the same plan of synchronized steps, each between two
# CLOCK_REALTIME marks, so each runs three times:
#   ref       no shim: the reference torch.profiler traces;
#   preload   the shim preloaded (LD_PRELOAD);
#   inject    the shim injected only (CUDA_INJECTION64_PATH): it routes the
#             job's CUPTI imports to itself and shares CUPTI as preloaded;
# and once for all of them, noprof: the plan under the injected shim with no
# profiler, every GPU event of the run for cuptimon's side.
# coexist-check.py then checks, per variant and cycle: every GPU event of the
# profiler's trace inside the cycle's active steps (ref too); preload's and
# inject's the same per step, kind and name as ref's; each one's start
# within the stated bounds of cuptimon's record of the same correlation id;
# cuptimon's archive complete (as noprof's, per step) and in the active steps
# what ref's trace holds; the daemon never saw CUPTI taken.
#
# usage: OUT=DIR tests/gpu/coexist-case.sh BUILD_DIR
#   writes OUT/coexist-report.txt (ends with RESULT PASS or RESULT FAIL);
#   exits 0 on PASS, 1 on FAIL.
# environment:
#   COEXIST_VARIANTS="manual schedule cudaonly shapes"   (default: all four)
#   COEXIST_STEPS=S    steps per phase (default 3; the plan is
#                      max(5S, 2S+12) steps)
#   COEXIST_STEP_SLACK_NS, COEXIST_MEDIAN_NS, COEXIST_P99_NS, COEXIST_MAX_NS:
#                      the checks' bounds (coexist-check.py --help)
#   COEXIST_KEEP=1     keep the work directory (traces, archive, logs)
#   PYTHON             the python with torch
set -u
B=$(cd "$1" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-coexist-out}; mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python3}
STEPS=${COEXIST_STEPS:-3}
VARIANTS=${COEXIST_VARIANTS:-manual schedule cudaonly shapes}
for v in $VARIANTS; do
    case $v in
        manual | schedule | cudaonly | shapes) ;;
        *) echo "coexist-case: COEXIST_VARIANTS: unknown variant '$v' (known: manual schedule cudaonly shapes)" >&2
           exit 2 ;;
    esac
done
W=$(mktemp -d /tmp/cuptimon-gpucoex.XXXXXX)
P=$W/p.sock C=$W/c.sock
SHIM=$B/client-lib/.libs/libcuptimon.so
REPORT=$OUT/coexist-report.txt
ctl() { "$B/cli/cuptimonctl" --control-socket "$C" "$@"; }
now_ms() { date +%s%3N; }
T0=$(now_ms)
"$B/daemon/cuptimond" --socket "$P" --control-socket "$C" --output-dir "$W/out" 2>"$W/d.log" &
dpid=$!
cleanup() {
    kill "$dpid" 2>/dev/null
    if [ "${COEXIST_KEEP:-0}" = 1 ]; then echo "coexist-case: work directory kept: $W" >&2; else rm -rf "$W"; fi
}
trap cleanup EXIT
for _ in $(seq 100); do ctl status >/dev/null 2>&1 && break; sleep 0.1; done
: >"$REPORT"
{
    echo "coexist-case: variants: $VARIANTS; $STEPS steps per phase; python $PY"
    echo "build: $B"
} >>"$REPORT"

# run NAME VARIANT ENV...: torch-loop.py's plan as NAME (a dir under $W).
run() {
    local name=$1 variant=$2; shift 2
    local d=$W/$name
    mkdir -p "$d"
    local args=(--steps "$STEPS" --profile-cycles 2 --repeat 3 --variant "$variant" --report "$d/rep.json")
    [ "$variant" != none ] && args+=(--torch-trace "$d/torch")
    local t
    t=$(now_ms)
    env "$@" CUPTIMON_SOCKET="$P" timeout 300 "$PY" "$here/torch-loop.py" "${args[@]}" >"$d/out" 2>"$d/err"
    echo $? >"$d/rc"
    echo $(($(now_ms) - t)) >"$d/wall_ms"
    echo "$name: exit $(cat "$d/rc") in $(cat "$d/wall_ms") ms: $(tail -c 200 "$d/out")" >>"$REPORT"
}
run noprof none CUDA_INJECTION64_PATH="$SHIM"
for v in $VARIANTS; do
    run "$v-ref" "$v"
    run "$v-preload" "$v" LD_PRELOAD="$SHIM"
    run "$v-inject" "$v" CUDA_INJECTION64_PATH="$SHIM" CUPTIMON_DEBUG=1
done
ctl flush --forced >/dev/null 2>&1
kill -TERM "$dpid"; wait "$dpid"
echo "daemon: exit $? (SIGTERM)" >>"$REPORT"
# Each session decoded on its own, named by the pid in its meta.json, so
# that the checks need not know how the trace spells a process.
mkdir -p "$W/ours"
nd=0 nbad=0
for d in "$W"/out/archive/*/; do
    [ -e "$d/meta.json" ] || continue
    # A GPU's metrics archive (issue 34) has no pid: not a process's session.
    pid=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("pid", ""))' "$d/meta.json") || pid=unknown
    [ -n "$pid" ] || continue
    nd=$((nd + 1))
    "$B/cli/cuptimonctl" decode "$d" -o "$W/ours/$pid.$nd.json" 2>>"$W/decode.log" || nbad=$((nbad + 1))
done
echo "decode: $nd sessions, $nbad failed$( [ "$nbad" = 0 ] || { echo ':'; tail -3 "$W/decode.log"; })" >>"$REPORT"
T1=$(now_ms)
echo "runs and decode: $((T1 - T0)) ms" >>"$REPORT"
tail -5 "$W/d.log" | sed 's/^/daemon log: /' >>"$REPORT"
# shellcheck disable=SC2086  # the variants are words
"$PY" "$here/coexist-check.py" "$W" $VARIANTS >>"$REPORT" 2>&1
rc=$?
grep -q '^RESULT ' "$REPORT" || { echo "RESULT FAIL (coexist-check.py exited $rc without a result)" >>"$REPORT"; rc=1; }
for v in $VARIANTS; do cp "$W/$v-inject/err" "$OUT/coexist-$v-inject-stderr.txt" 2>/dev/null; done
# On a failure, what the checks read (reports, stderr, the profiler's traces,
# cuptimon's decoded trace, the daemon's log) comes back with the report, so
# that a difference can be looked at without another run on the GPU.
if [ "$rc" != 0 ] || [ "${COEXIST_KEEP:-0}" = 1 ]; then
    (cd "$W" && tar czf "$OUT/coexist-work.tar.gz" --exclude=out --exclude='*.sock' .) &&
        echo "coexist-case: the work directory (without the archive) is in $OUT/coexist-work.tar.gz" >&2
fi
cat "$REPORT"
exit $((rc != 0))
