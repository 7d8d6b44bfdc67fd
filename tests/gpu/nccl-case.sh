#!/bin/bash
# NCCL's collectives on a real GPU (issue 46): two ranks of a PyTorch job on
# the one GPU (nccl-work.py: all_reduce, broadcast, all_gather,
# reduce_scatter in a loop, an all_reduce under CUDA-graph capture, then one
# rank lagging LAG_S before an all_reduce), under the injected shim, which
# names itself NCCL's profiler plugin.  Two ranks on one GPU: NCCL 2.30 with
# NCCL_MULTI_RANK_GPU_ENABLE=1; older NCCL refuses a GPU shared by ranks of
# one host, so the ranks then name different hosts (NCCL_HOSTID) and talk
# over sockets on loopback (NCCL_P2P_DISABLE, NCCL_SHM_DISABLE).  Each way is
# tried in turn; the report says which ran.
# While the lagging rank sleeps: cuptimonctl status --json (the other rank
# waits in the collective).  After: every collective each rank issued is in
# the archive (record_param_comms per function and rank at least as many
# as issued), NCCL kernels are there, stats --report nccl.
# usage: OUT=DIR tests/gpu/nccl-case.sh BUILD_DIR
#   writes OUT/nccl-report.txt (ends RESULT PASS/FAIL) and OUT/nccl-work.tgz;
#   PYTHON: the python with torch.
set -u
B=$(cd "$1" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-nccl-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/cuptimon-gpunccl.XXXXXX)
export CUPTIMON_SOCKET=$W/p.sock CUPTIMON_CONTROL_SOCKET=$W/c.sock
CTL=$B/cli/cuptimonctl
SHIM=$B/client-lib/.libs/libcuptimon.so
REPORT=$OUT/nccl-report.txt
LAG_S=${LAG_S:-6}
"$B/daemon/cuptimond" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
    --output-dir "$W/out" --flush-period 0.5 2>"$W/d.log" &
dpid=$!
trap 'kill $dpid 2>/dev/null' EXIT
for _ in $(seq 100); do "$CTL" status >/dev/null 2>&1 && break; sleep 0.1; done

# run WAY PORT: both ranks; 0 when both exited 0.
run() {
    local way=$1 port=$2 r pids=() rc=0
    mkdir -p "$W/$way"
    for r in 0 1; do
        local extra=()
        case $way in
            multi) extra=(NCCL_MULTI_RANK_GPU_ENABLE=1) ;;
            hostid) extra=(NCCL_HOSTID="cuptimon-rank-$r" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
                           NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1) ;;
        esac
        env "${extra[@]}" RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            CUDA_INJECTION64_PATH="$SHIM" CUPTIMON_LABEL="nccl-$way" NCCL_DEBUG=INFO \
            NCCL_DEBUG_SUBSYS=INIT,ENV,PROFILE LAG_S=$LAG_S \
            timeout 80 "$PY" "$here/nccl-work.py" "$W/$way" >"$W/$way/out-$r.txt" 2>&1 &
        pids+=($!)
    done
    # While rank 1 lags (its peer waits inside the all_reduce): status.
    (
        for i in $(seq 1 40); do
            sleep 1
            "$CTL" status --json >"$W/$way/status-$i.json" 2>/dev/null
            "$CTL" top --once >"$W/$way/top-$i.txt" 2>/dev/null
        done
    ) &
    local sp=$!
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    kill $sp 2>/dev/null
    return $rc
}
{
    echo "nccl-case: $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
    "$PY" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
    way=
    for w in multi hostid; do
        echo "nccl-case: two ranks on one GPU by '$w'"
        if run "$w" $((29600 + RANDOM % 300)); then
            way=$w
            break
        fi
        echo "nccl-case: '$w' failed:"
        grep -h -i -E 'error|invalid|duplicate|warn' "$W/$w"/out-*.txt | head -n 12 | cut -c1-300
    done
    [ -n "$way" ] || echo "FAIL: two ranks could not run on one GPU either way"
    grep -h -i 'profiler' "$W/${way:-multi}"/out-*.txt | head -n 10 | cut -c1-300
    kill -TERM $dpid
    wait $dpid
    "$CTL" decode "$W/out" -o "$W/all.json" --summary 2>"$W/decode.err" | head -c 2000
    "$CTL" stats "$W/out" --report nccl,processes 2>&1 | cut -c1-220
    "$CTL" stats "$W/out" --report nccl --format json -o "$W/stats.json" 2>/dev/null
    [ -n "$way" ] && "$PY" - "$W" "$way" <<'PY'
import glob, json, sys
W, way = sys.argv[1:]
fails = 0
def check(name, ok, detail=""):
    global fails
    print("%s: %s %s" % ("PASS" if ok else "FAIL", name, detail))
    fails += not ok
reps = {}
for f in glob.glob("%s/%s/rank-*.json" % (W, way)):
    r = json.load(open(f))
    reps[r["rank"]] = r
check("both ranks reported", sorted(reps) == [0, 1], str(sorted(reps)))
d = json.load(open(W + "/all.json"))
procs = {}
for e in d["traceEvents"]:
    if e.get("ph") == "M" and e.get("name") == "process_labels":
        procs[e["pid"]] = e["args"].get("labels", "")
ops = [e for e in d["traceEvents"] if e.get("name") == "record_param_comms"]
kern = [e for e in d["traceEvents"] if e.get("cat") == "kernel" and "nccl" in e["name"].lower()]
print("record_param_comms: %d, NCCL kernels: %d" % (len(ops), len(kern)))
by = {}
for e in ops:
    k = (e["args"]["Rank"], e["args"]["NCCL function"])
    by[k] = by.get(k, 0) + 1
print("by rank and function:", json.dumps({"%d %s" % k: v for k, v in sorted(by.items())}))
for r, rep in reps.items():
    for f, n in rep["issued"].items():
        got = by.get((r, f), 0)
        check("rank %d %s: %d issued, %d recorded" % (r, f, n, got), got >= n)
unf = [e for e in ops if e["args"].get("unfinished")]
check("no collective left unfinished", not unf, str(len(unf)))
gpu = [e for e in ops if "GPU globaltimer ns" in e["args"]]
check("collectives with GPU times (kernel channels)", len(gpu) > 0.9 * len(ops),
      "%d of %d" % (len(gpu), len(ops)))
check("NCCL kernels in the archive", len(kern) > 0)
# The lag: the status taken while rank 1 slept shows rank 0's all_reduce in
# flight (informational until status has the NCCL view).
st = sorted(glob.glob("%s/%s/status-*.json" % (W, way)), key=lambda p: int(p.rsplit("-", 1)[1][:-5]))
print("status snapshots:", len(st))
named = 0
for p in st:
    try:
        js = json.load(open(p))
    except ValueError:
        continue
    view = []
    for s in js.get("sessions", []):
        for c in s.get("nccl", {}).get("communicators", []):
            f = c.get("in_flight")
            view.append((s.get("pid"), c["rank"], c["started"], c["completed"],
                         f and (f["function"], f["seq"], round(f["age_s"], 1))))
    if any(v[4] and v[4][2] >= 2 for v in view):
        named += 1
        if named <= 2:
            print("status while one rank lags:", view)
check("status names a collective in flight for 2 s or more while a rank lags", named > 0)
plugins = set()
for p in st[:3]:
    try:
        plugins |= {s.get("nccl", {}).get("plugin") for s in json.load(open(p)).get("sessions", [])}
    except ValueError:
        pass
print("plugin states in status:", plugins)
for r, rep in sorted(reps.items()):
    print("rank %d: nccl %s, init %.1f s, wall %.1f s, graph %s" % (
        r, rep["nccl_version"], rep["init_s"], rep["wall_s"], rep["graph"]))
# GPU times against CUPTI's kernel durations (globaltimer vs CUPTI).
g = sorted(e["args"]["GPU globaltimer ns"] for e in gpu)
k = sorted(e["dur"] * 1000 for e in kern)
if g and k:
    print("median collective GPU time %.0f ns (globaltimer), median NCCL kernel %.0f ns (CUPTI)" % (
        g[len(g) // 2], k[len(k) // 2]))
print("RESULT %s" % ("PASS" if fails == 0 else "FAIL"))
PY
} >"$REPORT" 2>&1
rc=$?
grep -qx "RESULT PASS" "$REPORT" || rc=1
cp "$W/d.log" "$W/daemon.log" 2>/dev/null
tar -C "$W" -czf "$OUT/nccl-work.tgz" --exclude='out/archive' . 2>/dev/null
cat "$REPORT"
rm -rf "$W"
exit $rc
