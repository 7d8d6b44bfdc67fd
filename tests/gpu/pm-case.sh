#!/bin/bash
# What the GPU itself was doing, on a real GPU (issue 34): cuptimond samples
# the GPU's hardware counters (CUPTI PM sampling, default settings) while
# pm-load runs known phases under the shim inside a trace window: a
# memory-bound stream triad, cuBLAS fp16 GEMMs, WMMA GEMMs, host-to-device
# and device-to-host copies.  Then:
#   - the window's trace has counter tracks for the GPU, lined up with the
#     kernels: DRAM throughput high in the stream phase, the tensor pipe in
#     the GEMM phase, PCIe rx/tx in the copies;
#   - cuptimonctl stats --report gpu over the archive;
#   - Nsight Compute beside it: with the counters paused (gpu-metrics pause)
#     ncu works, and its per-kernel DRAM and tensor pipe figures (pm-load
#     ref: run's kernels at run's sizes) are held against the sampled
#     phases; without a pause, the daemon yields when ncu's process appears;
#   - the cost: pm-load with sampling on and paused, interleaved, 3 each;
#   - the job's side: known-work's launch-bound run under the shim and
#     without it, sampling on and paused, interleaved, 5 each;
#   - the metrics file families.
# pm-check.py checks it all and writes pm-report.txt.
# usage: OUT=DIR tests/gpu/pm-case.sh BUILD_DIR
#   (after tests/gpu/build.sh and tests/gpu/pm-probe.sh build; PM_ITERS="S G W"
#   sets pm-load's iterations, default "2560 1465 854", about 2 s a phase on
#   an H200)
set -u
B=$(cd "$1" && pwd); here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-pm-out}; mkdir -p "$OUT"
W=$(mktemp -d /tmp/cuptimon-pm.XXXXXX)
P=$W/p.sock C=$W/c.sock
LOAD=$here/build/pm/pm-load
[ -x "$LOAD" ] || { echo "pm-case.sh: $LOAD is missing: run tests/gpu/build.sh first" >&2; exit 2; }
ITERS=${PM_ITERS:-2560 1465 854}
ctl() { "$B/cli/cuptimonctl" --control-socket "$C" "$@"; }
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:${CUDA_HOME:-/usr/local/cuda}/lib64
# PM_SET: the daemon's gpu_metrics_set (default: its default set), to hold
# another configuration of the same keys against Nsight Compute (issue 48).
printf '{"metrics_file": "%s/metrics.prom", "metrics_interval_s": 1, "gpu_metrics_set": "%s"}\n' \
    "$W" "${PM_SET:-}" >"$W/cuptimond.conf"
"$B/daemon/cuptimond" --socket "$P" --control-socket "$C" --output-dir "$W/out" \
    --config "$W/cuptimond.conf" --log-level info 2>>"$W/daemon.log" &
dpid=$!
# Stopped early (a timeout's TERM), what was gathered still comes back.
finish() {
    kill $dpid 2>/dev/null
    [ -d "$W" ] && tar -C "$W" -czf "$OUT/pm-work.tgz" --exclude=out . 2>/dev/null && rm -rf "$W"
}
trap finish EXIT
trap 'echo "stopped by a signal" >&2; exit 143' TERM INT
for _ in $(seq 100); do ctl status >/dev/null 2>&1 && break; sleep 0.05; done
sampling() { ctl gpu-metrics --json | python3 -c 'import json,sys; d=json.load(sys.stdin)["devices"]; sys.exit(0 if d and d[0]["state"] == "sampling" else 1)'; }
wait_sampling() { for _ in $(seq 100); do sampling && break; sleep 0.1; done; }
# The cost runs' pause and resume: the "off" run starts with the counters
# released, the next "on" run with the sampler back.
pause_quiet() { ctl gpu-metrics pause >/dev/null 2>&1; sleep 0.5; }
resume_quiet() { ctl gpu-metrics resume >/dev/null 2>&1; wait_sampling; }
SHIM_ENV=(env CUPTIMON_SOCKET="$P" CUDA_INJECTION64_PATH="$B/client-lib/.libs/libcuptimon.so")
wait_sampling
ctl gpu-metrics --json >"$W/gpm-start.json"
ctl gpu-metrics >"$W/gpm-start.txt"

# 1. pm-load under the shim, inside a window (begun once its session is up).
"${SHIM_ENV[@]}" "$LOAD" run $ITERS >"$W/load-window.out" 2>&1 &
lp=$!
for _ in $(seq 500); do
    ctl status --json | python3 -c 'import json,sys; sys.exit(0 if any(s["pid"] == int(sys.argv[1]) for s in json.load(sys.stdin)["sessions"]) else 1)' $lp && break
    sleep 0.02
done
ctl begin-window --all --json >"$W/w-begin.json"
sleep 1
ctl gpu-metrics --json >"$W/gpm-window.json" # the finer interval while the window is open
wait $lp; echo "load-window exit $?" >>"$W/exits.txt"
ctl end-window --json >"$W/w-end.json"
ctl top --by device --once >"$W/top.txt" 2>&1
ctl metrics >"$W/metrics.txt" 2>&1
sleep 2
cp "$W/metrics.prom" "$W/metrics-file.prom" 2>/dev/null

# 2. Nsight Compute: paused first, then without a pause (the daemon yields).
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
if [ -x "$NCU" ]; then
    ctl gpu-metrics pause >"$W/pause.txt" 2>&1
    sleep 1
    ctl gpu-metrics --json >"$W/gpm-paused.json"
    # The paused run also measures, per kernel at run's sizes and clocks
    # (no clock lock), the metrics the sampler reports for the phases:
    # pm-check.py holds the two against each other.
    timeout 150 "$NCU" --clock-control none --csv --metrics \
        dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg.pct_of_peak_sustained_elapsed \
        "$LOAD" ref >"$W/ncu-paused.out" 2>"$W/ncu-paused.err"
    echo "ncu-paused exit $?" >>"$W/exits.txt"
    ctl gpu-metrics resume >"$W/resume.txt" 2>&1
    wait_sampling
    timeout 120 "$NCU" --metrics sm__cycles_active.avg "$LOAD" small >"$W/ncu-yield.out" 2>&1
    echo "ncu-yield exit $?" >>"$W/exits.txt"
    wait_sampling
    ctl gpu-metrics --json >"$W/gpm-after-ncu.json"
else
    echo "ncu not found" >>"$W/exits.txt"
fi

# 3. The cost: pm-load without the shim, sampled or not, interleaved.
for i in 1 2 3; do
    "$LOAD" run $ITERS >"$W/cost-on-$i.out" 2>&1
    pause_quiet
    "$LOAD" run $ITERS >"$W/cost-off-$i.out" 2>&1
    resume_quiet
done

# 4. The job's side: the GPU suite's launch-bound known-work (its overhead
# case) under the shim and without it, with the counters sampled and
# paused, interleaved: whether sampling slows a traced job's launches.
KW=$here/build/known-work
KWARGS=(--kernels 7000 --graph-replays 100 --memcpys 16 --memsets 16 --no-nvtx --quiet)
kw() { # kw on|off I: known-work under the shim, then without it
    "${SHIM_ENV[@]}" "$KW" "${KWARGS[@]}" --report "$W/kw-shim-$1-$2.json" >/dev/null 2>&1
    "$KW" "${KWARGS[@]}" --report "$W/kw-bare-$1-$2.json" >/dev/null 2>&1
}
for i in 1 2 3 4 5; do
    kw on "$i"
    pause_quiet
    kw off "$i"
    resume_quiet
done
ctl gpu-metrics --json >"$W/gpm-end.json"
kill -TERM "$dpid"; wait "$dpid"; echo "daemon exit $?" >>"$W/exits.txt"; dpid=
"$B/cli/cuptimonctl" stats "$W/out/archive" --report gpu >"$W/stats-gpu.txt" 2>&1
"$B/cli/cuptimonctl" stats "$W/out/archive" --report gpu --format json >"$W/stats-gpu.json" 2>&1
python3 "$here/pm-check.py" "$W" >"$OUT/pm-report.txt" 2>&1
rc=$?
cat "$OUT/pm-report.txt"
exit $rc
