#!/bin/bash
# bench-node (issue 20): N cheap producers (bench/replay-producer: a real
# H200 buffer of 19,793 kernel, memcpy and memset records replayed over the
# shim's protocol) into one real cuptimond, at N = 1, 8, 32, 64 by default,
# each at RATE records/s (0: as fast as the daemon releases slots).
# Per N, one JSON line: the daemon's CPU per archived record and per MB,
# the aggregate rate held, records dropped (due while every slot was still
# with the daemon: what CUPTI would drop), the daemon's peak RSS and fds.
# The producers share the cores with the daemon: the figures are ratios of
# one run, not absolute speeds.
# usage: node-scale.sh [N_LIST [RATE [RECORDS_PER_PRODUCER]]]
set -eu
: "${top_builddir:?run through make bench-node}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
ns=${1:-"1 8 32 64"}
rate=${2:-0}
per=${3:-1000000}
T=$(mktemp -d "${TMPDIR:-/tmp}/cuptimon-node.XXXXXX")
out=${BENCH_OUTPUT_DIR:-/dev/shm}/cuptimon-node-$$
trap 'kill $dpid 2>/dev/null || true; rm -rf "$T" "$out"' EXIT
buf=$top_srcdir/tests/data/cupti-13.0-h200/phase0-buf0.bin.zst
ctl() { "$top_builddir/cli/cuptimonctl" --control-socket "$T/c.sock" "$@"; }
clk=$(getconf CLK_TCK)
for n in $ns; do
    rm -rf "$out"
    "$top_builddir/daemon/cuptimond" --socket "$T/p.sock" --control-socket "$T/c.sock" \
        --output-dir "$out" --flush-period 0 2>"$T/d.log" &
    dpid=$!
    for _ in $(seq 100); do ctl status >/dev/null 2>&1 && break; sleep 0.05; done
    read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$dpid/stat")
    t0=$(date +%s%N)
    pids=
    for i in $(seq "$n"); do
        "$top_builddir/bench/replay-producer" --socket "$T/p.sock" --buffer "$buf" \
            --records "$per" --rate "$rate" --report "$T/r$i.json" &
        pids="$pids $!"
    done
    maxfd=0
    while kill -0 $pids 2>/dev/null; do
        f=$(ls "/proc/$dpid/fd" 2>/dev/null | wc -l)
        [ "$f" -gt "$maxfd" ] && maxfd=$f
        sleep 0.2
    done
    # shellcheck disable=SC2086
    wait $pids || true
    t1=$(date +%s%N)
    read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$dpid/stat")
    hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$dpid/status")
    kill -TERM $dpid; wait $dpid || true
    python3 - "$n" "$rate" "$(( (u1 - u0) + (s1 - s0) ))" "$clk" "$t0" "$t1" "$T" "$hwm" "$maxfd" <<'PY'
import glob, json, sys
n, rate, ticks, clk, t0, t1, T, hwm, maxfd = sys.argv[1:]
reps = [json.load(open(p)) for p in glob.glob(f"{T}/r*.json")]
sent = sum(r["records_sent"] for r in reps)
dropped = sum(r["records_dropped"] for r in reps)
failed = sum(1 for r in reps if r["failed"])
cpu_s = int(ticks) / int(clk)
wall = (int(t1) - int(t0)) / 1e9
mb = sent * (4194304 / 19793) / 1e6 if reps else 0  # the buffer's bytes per record
print(json.dumps({"bench": "node-scale", "producers": int(n), "rate_per_producer": float(rate),
                  "records_archived": sent, "records_dropped": dropped, "producers_failed": failed,
                  "wall_s": round(wall, 2), "daemon_cpu_s": round(cpu_s, 2),
                  "daemon_us_per_record": round(cpu_s / sent * 1e6, 3) if sent else None,
                  "daemon_ms_per_mb": round(cpu_s / mb * 1e3, 3) if mb else None,
                  "records_per_s": round(sent / wall) if wall else None,
                  "daemon_peak_rss_mib": round(int(hwm) / 1024, 1), "daemon_max_fds": int(maxfd)}))
PY
done
