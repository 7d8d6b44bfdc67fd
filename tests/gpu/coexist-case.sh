#!/bin/bash
# torch.profiler started and stopped twice in the middle of a PyTorch loop,
# with cuptimon on the same process (issue 10), on a real GPU:
#   ref      the loop with its two profiler cycles, no shim: the reference
#            torch.profiler traces;
#   noprof   the same steps under the injected shim, no profiler: every
#            kernel of the run, for cuptimon's total;
#   preload  the loop with its cycles, shim preloaded (LD_PRELOAD);
#   inject   the same, shim injected only (CUDA_INJECTION64_PATH): the shim
#            routes the job's CUPTI imports to itself and shares CUPTI as
#            when preloaded.
# Checks, for preload and inject: each cycle's torch.profiler trace has the
# reference's kernels (per name); cuptimon's archive has every kernel of the
# run (as many as noprof's); the kernels cuptimon recorded inside each
# cycle's steps are as many as torch.profiler's for that cycle, and their
# start times agree with the profiler's; the daemon never saw CUPTI taken.
# usage: OUT=DIR tests/gpu/coexist-case.sh BUILD_DIR   (writes OUT/coexist-report.txt)
set -u
B=$(cd "$1" && pwd); here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-coexist-out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
STEPS=${COEXIST_STEPS:-8}
W=$(mktemp -d /tmp/cuptimon-gpucoex.XXXXXX)
P=$W/p.sock C=$W/c.sock
SHIM=$B/client-lib/.libs/libcuptimon.so
ctl() { "$B/cli/cuptimonctl" --control-socket "$C" "$@"; }
"$B/daemon/cuptimond" --socket "$P" --control-socket "$C" --output-dir "$W/out" 2>"$W/d.log" &
dpid=$!
trap 'kill $dpid 2>/dev/null' EXIT
for _ in $(seq 100); do ctl status >/dev/null 2>&1 && break; sleep 0.1; done
: >"$OUT/coexist-report.txt"
run() { # MODE ENV... -- LOOP-ARGS...
    local m=$1; shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    mkdir -p "$W/$m"
    env "${envs[@]}" CUPTIMON_SOCKET="$P" timeout 300 "$PY" "$here/torch-loop.py" --steps "$STEPS" \
        --profile-cycles 2 --report "$W/$m/rep.json" "$@" >"$W/$m/out" 2>"$W/$m/err"
    echo "$m: exit $? $(tail -c 200 "$W/$m/out")" >>"$OUT/coexist-report.txt"
}
run ref -- --torch-trace "$W/ref/torch"
run noprof CUDA_INJECTION64_PATH="$SHIM" -- --cycles-without-profiler
run preload LD_PRELOAD="$SHIM" -- --torch-trace "$W/preload/torch"
run inject CUDA_INJECTION64_PATH="$SHIM" CUPTIMON_DEBUG=1 -- --torch-trace "$W/inject/torch"
ctl flush --forced >/dev/null 2>&1
kill -TERM $dpid; wait $dpid
"$B/cli/cuptimonctl" decode "$W/out" -o "$W/trace.json" --summary-out "$W/sum.json" 2>>"$W/d.log"
"$PY" - "$W" >>"$OUT/coexist-report.txt" 2>&1 <<'PY'
import collections, json, sys
W = sys.argv[1]
rep = {m: json.load(open(f"{W}/{m}/rep.json")) for m in ("ref", "noprof", "preload", "inject")}
trace = json.load(open(f"{W}/trace.json"))
base = trace["otherData"]["base_unix_ns"]
ours = collections.defaultdict(list)  # pid -> [(start unix ns, name)]
for e in trace["traceEvents"]:
    if e.get("cat") == "kernel" and e.get("ph") == "X":
        ours[e["pid"]].append((base + round(float(e["ts"]) * 1000), e["name"]))
fails = []
def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)

def torch_kernels(path):
    t = json.load(open(path))
    ev = t["traceEvents"] if isinstance(t, dict) else t
    tb = t.get("baseTimeNanoseconds", 0) if isinstance(t, dict) else 0
    return [(tb + round(float(e["ts"]) * 1000), e["name"]) for e in ev
            if e.get("cat") == "kernel" and e.get("ph") == "X"]

ref_cycles = [collections.Counter(n for _, n in torch_kernels(c["torch_trace"]))
              for c in rep["ref"]["profile_cycles"]]
total = len(ours[rep["noprof"]["pid"]])
check(total > 0, f"noprof: cuptimon archived {total} kernels of the unprofiled run")
for m in ("preload", "inject"):
    r = rep[m]
    mine = sorted(ours[r["pid"]])
    check(len(mine) == total, f"{m}: cuptimon archived {len(mine)} kernels, the unprofiled run {total}")
    for k, c in enumerate(r["profile_cycles"]):
        tk = torch_kernels(c["torch_trace"])
        names = collections.Counter(n for _, n in tk)
        check(names == ref_cycles[k],
              f"{m} cycle {k}: torch.profiler's trace has {sum(names.values())} kernels, the "
              f"reference {sum(ref_cycles[k].values())}; same per name: {names == ref_cycles[k]}")
        inside = [x for x in mine if c["steps_start_ns"] <= x[0] <= c["steps_end_ns"]]
        tin = [x for x in tk if c["steps_start_ns"] - 2_000_000 <= x[0] <= c["steps_end_ns"] + 2_000_000]
        check(abs(len(inside) - len(tin)) <= max(2, len(tin) // 100),
              f"{m} cycle {k}: cuptimon has {len(inside)} kernels inside the cycle's steps, "
              f"torch.profiler {len(tin)} (within 2 ms of them)")
        if tk and inside:
            # The same kernels in the same order: their start times should agree.
            tks = sorted(tk)
            d = [abs(a[0] - b[0]) for a, b in zip(sorted(inside)[: len(tks)], tks)]
            d.sort()
            med = d[len(d) // 2] if d else None
            check(med is not None and med < 50_000,
                  f"{m} cycle {k}: median |cuptimon - torch.profiler| kernel start {med} ns")
    dlog = open(f"{W}/d.log").read()
    check(f"(pid {r['pid']}): another CUPTI client took" not in dlog,
          f"{m}: the daemon never saw CUPTI taken from pid {r['pid']}")
err = open(f"{W}/inject/err").read()
check("took the activity callbacks" not in err, "inject: the shim never lost CUPTI")
check("routed" in err, "inject: the shim routed the job's CUPTI imports to itself: "
      + next((l for l in err.splitlines() if "routed" in l), "(no line)"))
print("RESULT:", "PASS" if not fails else f"FAIL ({len(fails)})")
PY
tail -5 "$W/d.log" >>"$OUT/coexist-report.txt"
cp "$W/inject/err" "$OUT/coexist-inject-stderr.txt" 2>/dev/null
cat "$OUT/coexist-report.txt"
