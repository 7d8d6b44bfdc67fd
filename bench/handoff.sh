#!/bin/bash
# bench-handoff: N producers (the libcupti test double's workload under the
# real shim) stream into one real cuptimond; reports the daemon's CPU per GB
# archived, what was archived against what was produced, and drops, for each
# N and rate.  The producers share the machine's cores with the daemon, so
# the figures are per-core ratios from one run, not absolute speeds.
# usage: handoff.sh [N_LIST [RATE_PER_PRODUCER [KERNELS]]]   (defaults "1 4 16 64" 100000 200000)
set -eu
: "${top_builddir:?run through make bench-handoff}"
ns=${1:-"1 4 16 64"}
rate=${2:-100000}
kernels=${3:-200000}
T=$(mktemp -d "${TMPDIR:-/tmp}/cuptimon-bench.XXXXXX")
trap 'kill $dpid 2>/dev/null || true; rm -rf "$T"' EXIT
shim=$top_builddir/client-lib/.libs/libcuptimon.so
wl=$top_builddir/tests/fakecupti/cuptimon-workload
ctl() { "$top_builddir/cli/cuptimonctl" --control-socket "$T/c.sock" "$@"; }
clk=$(getconf CLK_TCK)
for n in $ns; do
    rm -rf "$T/out"
    "$top_builddir/daemon/cuptimond" --socket "$T/p.sock" --control-socket "$T/c.sock" \
        --output-dir "${BENCH_OUTPUT_DIR:-/dev/shm}/cuptimon-bench-$$" 2>"$T/d.log" &
    dpid=$!
    for _ in $(seq 100); do ctl status >/dev/null 2>&1 && break; sleep 0.05; done
    read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$dpid/stat")
    t0=$(date +%s%N)
    pids=
    for i in $(seq "$n"); do
        CUPTIMON_SOCKET=$T/p.sock CUDA_INJECTION64_PATH=$shim "$wl" --kernels "$kernels" \
            --rate "$rate" --memcpy-every 0 --memset-every 0 --quiet --report "$T/r$i.json" &
        pids="$pids $!"
    done
    # shellcheck disable=SC2086
    wait $pids
    t1=$(date +%s%N)
    ctl status --json > "$T/status.json"
    read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$dpid/stat")
    kill -TERM $dpid; wait $dpid || true
    python3 - "$n" "$rate" "$kernels" "$(( (u1 - u0) + (s1 - s0) ))" "$clk" "$t0" "$t1" "$T" <<'PY'
import json, sys, glob
n, rate, kernels, ticks, clk, t0, t1, T = sys.argv[1:]
n, rate, kernels, ticks, clk = int(n), int(rate), int(kernels), int(ticks), int(clk)
reps = [json.load(open(p)) for p in glob.glob(f"{T}/r*.json")]
produced = sum(r["kernels_recorded"] for r in reps)
dropped = sum(r["dropped"] for r in reps)
st = json.load(open(f"{T}/status.json"))
# sessions have ended by now; the daemon's log of each session end has the
# totals, but status of ended sessions is gone: use the reports + drops.
cpu_s = ticks / clk
wall_s = (int(t1) - int(t0)) / 1e9
gb = produced * 216 / 1e9
print(json.dumps({"bench": "handoff", "producers": n, "rate_per_producer": rate,
                  "records_produced": produced, "records_dropped_by_cupti": dropped,
                  "wall_s": round(wall_s, 2), "daemon_cpu_s": round(cpu_s, 3),
                  "daemon_cpu_s_per_gb": round(cpu_s / gb, 3) if gb else None,
                  "achieved_records_per_s": round(produced / wall_s)}))
PY
    rm -rf "${BENCH_OUTPUT_DIR:-/dev/shm}/cuptimon-bench-$$"
done
