#!/bin/bash
# A 2-rank PyTorch job on a real GPU (issue 18's "done when"): the same
# steps traced by torch.profiler in each rank, then by one cuptimon window
# over both ranks closed with --per-process; ranks-check.py compares each
# rank's file with torch.profiler's trace of that rank (Kineto's dialect,
# rank and time base, the same GPU work and launches, annotation and step
# ranges, named threads).  Both ranks share GPU 0 (gloo between them).
# usage: OUT=DIR tests/gpu/ranks-case.sh BUILD_DIR
#   writes OUT/ranks-report.txt (ends RESULT PASS/FAIL) and OUT/*.json.gz;
#   exits 0 on PASS.  PYTHON: the python with torch.
set -u
B=$(cd "$1" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
OUT=${OUT:-$PWD/gpu-ranks-out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/cuptimon-gpuranks.XXXXXX)
export CUPTIMON_SOCKET=$W/p.sock CUPTIMON_CONTROL_SOCKET=$W/c.sock
CTL=$B/cli/cuptimonctl
"$B/daemon/cuptimond" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
    --output-dir "$W/out" 2>"$W/d.log" &
dpid=$!
trap 'kill $dpid 2>/dev/null' EXIT
for _ in $(seq 100); do "$CTL" status >/dev/null 2>&1 && break; sleep 0.1; done
REPORT=$OUT/ranks-report.txt
start_ns=$(date +%s%N)
export PYTHONPATH=$top/python${PYTHONPATH:+:$PYTHONPATH} WORLD_SIZE=2 MASTER_ADDR=127.0.0.1

# job MODE PORT [env...]: both ranks of kineto-ref.py --dist in MODE.
job() {
    local mode=$1 port=$2 r pids=() rc=0
    shift 2
    for r in 0 1; do
        env "$@" RANK=$r LOCAL_RANK=$r MASTER_PORT=$port timeout 240 "$PY" "$here/kineto-ref.py" \
            --mode "$mode" --dist --label ranks-case --ctl "$CTL" \
            --out "$W/$mode-rank{rank}.json.gz" >"$W/$mode-$r.out" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    return $rc
}
{
    echo "ranks-case: torch.profiler, 2 ranks"
    job torch 29531 || { echo "FAIL: the torch.profiler job"; tail -n 20 "$W"/torch-*.out; }
    echo "ranks-case: cuptimon window --per-process, 2 ranks"
    job cuptimon 29532 CUDA_INJECTION64_PATH="$B/client-lib/.libs/libcuptimon.so" \
        CUPTIMON_LABEL=ranks-case ||
        { echo "FAIL: the cuptimon job"; tail -n 20 "$W"/cuptimon-*.out; }
    grep -h "end-window\|wrote" "$W"/cuptimon-0.out | cut -c1-600
    "$PY" "$here/ranks-check.py" "$W/torch-rank{rank}.json.gz" "$W/cuptimon-rank{rank}.json.gz" 2 \
        "$start_ns"
} >"$REPORT" 2>&1
rc=$?
grep -qx "RESULT PASS" "$REPORT" || rc=1
cp "$W"/*-rank*.json.gz "$OUT"/ 2>/dev/null
cp "$W/d.log" "$OUT/ranks-daemon.log"
cat "$REPORT"
rm -rf "$W"
exit $rc
