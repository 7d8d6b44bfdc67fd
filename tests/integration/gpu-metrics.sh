#!/bin/bash
# GPU hardware metrics (issue 34) against libpm-fake.so, the double of
# CUPTI's PM Sampling API (tests/fakecupti/fakepm.h), scripted to run a
# memory-bound phase and then a tensor-core phase:
#  - the daemon samples GPU 0 with the default set, less what the board
#    lacks (NVLink on a single-GPU node), every 50 ms, 20 ms while a window
#    is open;
#  - a window over a workload spanning both phases holds counter tracks of
#    GPU 0 whose values are the script's in each phase, beside the kernels;
#  - stats --report gpu over the archive, the metrics file's families;
#  - pause / resume (an operator's only), a busy device (another profiler:
#    HARDWARE_BUSY) tried again until free, a yield while a process named in
#    gpu_metrics_yield_to runs, and the counters released meanwhile (the
#    double's lock file free);
#  - a daemon the driver refuses the counters to (admin only): off, saying
#    why; and one without a CUDA driver: off, saying why, serving the rest;
#  - a sampler that fell behind (the hardware buffer overflowed): counted,
#    logged, and sampling restarted where CUPTI then decodes nothing (the
#    H200), not where it still decodes (the header's account).
. "$top_srcdir/tests/integration/lib.sh"
FAKEPM=$top_builddir/tests/fakecupti/.libs/libpm-fake.so
[ -e "$FAKEPM" ] || { echo "SKIP: libpm-fake.so is not built"; exit 77; }

: >"$T/phases" # the phases, once the workload runs
mkdir -p "$T/pmlock"
cat >"$T/cuptimond.conf" <<EOF
{"gpu_metrics_libcupti": "$FAKEPM", "gpu_metrics_libcuda": "$FAKEPM",
 "gpu_metrics_interval_s": 0.05, "gpu_metrics_window_interval_s": 0.02,
 "gpu_metrics_retry_s": 0.3, "gpu_metrics_yield_to": "fakencu",
 "metrics_file": "$T/metrics.prom", "metrics_interval_s": 1}
EOF
export FAKEPM_PHASES_FILE=$T/phases FAKEPM_BUSY_FILE=$T/busy FAKEPM_DIR=$T/pmlock
start_daemon --flush-period 0.2 --config "$T/cuptimond.conf"
gstate() { ctl gpu-metrics --json | python3 -c 'import json,sys; d=json.load(sys.stdin)["devices"]; print(d[0]["state"] if d else "none")'; }
gwait() { for _ in $(seq 100); do [ "$(gstate)" = "$1" ] && return 0; sleep 0.05; done; return 1; }
gwait sampling || fail "GPU 0 is not sampled: $(ctl gpu-metrics)"
ctl gpu-metrics --json >"$T/gpm-start.json"

# The workload spans both phases, on GPU 0; the window covers it.
workload --kernels 40000 --rate 10000 --memcpy-every 0 --memset-every 0 --wait-file "$T/go" \
    --report "$T/w.json" --quiet &
wp=$!
connected() { [ "$(ctl status --json | python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin)["sessions"] if s["connected"]))')" -ge 1 ]; }
wait_for 100 connected || fail "the workload did not connect"
ctl begin-window --all --json >"$T/begin.json" || fail "begin-window failed"
touch "$T/go"
# The phases from now (the double reads the file again when it changes), so
# that a slow start (a sanitizer build, a loaded machine) does not miss them;
# the workload runs 4 s or more.
now=$(date +%s%N)
p1=$((now + 200000000)) p2=$((now + 1700000000)) p3=$((now + 3200000000))
printf '%s %s stream\n%s %s gemm\n' "$p1" "$p2" "$p2" "$p3" >"$T/phases"
sleep 0.5
ctl gpu-metrics --json >"$T/gpm-window.json"
wait $wp || fail "the workload failed"
ctl end-window --json >"$T/end.json" || fail "end-window failed"
sleep 1.2 # the metrics file, rewritten every second
cp "$T/metrics.prom" "$T/metrics-copy.prom" || fail "no metrics file"
ctl top --by device --once >"$T/top.txt" 2>&1

# Pause and resume: an operator's; nobody else's.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    chmod 755 "$T"
    as_nobody "$CTL" --control-socket "$CUPTIMON_CONTROL_SOCKET" gpu-metrics pause >"$T/nobody.txt" 2>&1 &&
        fail "uid nobody paused the GPU metrics"
    grep -q "may not pause" "$T/nobody.txt" || fail "nobody's refusal does not say why: $(cat "$T/nobody.txt")"
fi
ctl gpu-metrics pause >/dev/null || fail "pause failed"
gwait paused || fail "not paused: $(ctl gpu-metrics)"
# The counters are released: the double's lock of the device is free.
for f in "$T"/pmlock/*; do
    [ -e "$f" ] || continue
    flock -n "$f" true || fail "paused, yet the device's counters are held ($f)"
done
n1=$(ctl gpu-metrics --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["samples"])')
sleep 0.5
n2=$(ctl gpu-metrics --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["samples"])')
[ "$n1" = "$n2" ] || fail "samples went on while paused ($n1 -> $n2)"
# Another profiler holds the device: busy, tried again, sampled once free.
touch "$T/busy"
ctl gpu-metrics resume >/dev/null || fail "resume failed"
gwait busy || fail "a busy device is not said so: $(ctl gpu-metrics)"
ctl gpu-metrics --json >"$T/gpm-busy.json"
rm -f "$T/busy"
gwait sampling || fail "not sampled again once free: $(ctl gpu-metrics)"
# A process named in gpu_metrics_yield_to: yielded while it runs.
cp "$(command -v sleep)" "$T/fakencu"
# It runs until the test has read the state (a fixed 3 s ran out before
# the read on a loaded machine, twice: the state was sampling again).
"$T/fakencu" 300 &
np=$!
gwait paused || fail "did not yield to fakencu: $(ctl gpu-metrics)"
ctl gpu-metrics --json >"$T/gpm-yield.json"
kill $np
wait $np 2>/dev/null || true
gwait sampling || fail "not sampled again after fakencu: $(ctl gpu-metrics)"
ctl status >"$T/status.txt"
stop_daemon

"$CTL" stats "$T/out/archive" --report gpu >"$T/stats.txt" 2>&1 || fail "stats --report gpu: $(cat "$T/stats.txt")"
"$CTL" stats "$T/out/archive" --report gpu --format json >"$T/stats.json" 2>&1 ||
    fail "stats --report gpu --format json failed"

python3 - "$T" "$p1" "$p2" "$p3" <<'PY' || fail "the GPU metrics are not what the double sampled"
import json, re, sys
T, p1, p2, p3 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
fails = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    ok or fails.append(what)

st = json.load(open(f"{T}/gpm-start.json"))
d = st["devices"][0]
keys = [m["key"] for m in d["metrics"]]
check(st["state"] == "on" and d["state"] == "sampling" and d["chip"] == "GH100",
      f"GPU 0 sampled ({d['state']}: {d['why']})")
check(all(k in keys for k in ("sm_active", "tensor_active", "dram_active", "pcie_rx_bytes", "sm_clock")),
      f"the default set ({', '.join(keys)})")
check("nvlink_rx_bytes" in d.get("not_sampled", "") and "nvlink_rx_bytes" not in keys,
      f"NVLink left out on a single-GPU node ({d.get('not_sampled')})")
check(d["interval_ms"] == 50, f"every 50 ms ({d['interval_ms']})")
w = json.load(open(f"{T}/gpm-window.json"))["devices"][0]
check(w["interval_ms"] == 20, f"every 20 ms while the window is open ({w['interval_ms']})")

end = json.load(open(f"{T}/end.json"))
t = json.load(open(end["output"]))
base = int(t["otherData"]["base_unix_ns"])
series = {}
kernels = 0
for e in t["traceEvents"]:
    if e.get("ph") == "C" and e.get("cat") == "gpu_metrics":
        (v,) = e["args"].values()
        series.setdefault(e["name"], []).append((base + round(e["ts"] * 1000), float(v)))
    elif e.get("ph") == "X" and e.get("cat") == "kernel":
        kernels += 1
check(kernels > 1000, f"the window has the workload's kernels ({kernels})")
check("GPU 0 DRAM active" in series and "GPU 0 Tensor pipe active" in series,
      f"counter tracks of GPU 0 ({', '.join(sorted(series))})")
def values(track, lo, hi):
    return [v for ts, v in series.get(track, []) if lo <= ts < hi]
# The samples wholly inside each phase read the script's values.
m = 100_000_000
dram_s = values("GPU 0 DRAM active", p1 + m, p2 - m)
tens_s = values("GPU 0 Tensor pipe active", p1 + m, p2 - m)
tens_g = values("GPU 0 Tensor pipe active", p2 + m, p3 - m)
check(len(dram_s) >= 20 and all(abs(v - 85) < 1e-6 for v in dram_s),
      f"DRAM active 85 % in the stream phase ({len(dram_s)} samples: {sorted(set(dram_s))[:4]})")
check(tens_s and all(v < 1e-6 for v in tens_s), "tensor pipe 0 in the stream phase")
check(len(tens_g) >= 20 and all(abs(v - 94) < 1e-6 for v in tens_g),
      f"tensor pipe active 94 % in the GEMM phase ({len(tens_g)} samples)")
# Samples every 20 ms inside the window.
ts = sorted(ts for ts, _ in series["GPU 0 DRAM active"])
gaps = sorted(b - a for a, b in zip(ts, ts[1:]))
check(gaps and abs(gaps[len(gaps) // 2] - 20_000_000) < 1_000_000,
      f"the window's samples 20 ms apart (median {gaps[len(gaps) // 2] / 1e6 if gaps else 0:.1f} ms)")
prom = open(f"{T}/metrics-copy.prom").read()
for fam in ("cuptimon_gpu_prof_sm_active", "cuptimon_gpu_prof_pipe_tensor_active",
            "cuptimon_gpu_prof_dram_active", "cuptimon_gpu_sm_clock", "cuptimon_gpu_metrics_state"):
    check(re.search(r"^%s\{gpu=\"0\",UUID=\"GPU-fa4e0000-" % fam, prom, re.M) is not None,
          f"the metrics file has {fam}")
busy = json.load(open(f"{T}/gpm-busy.json"))["devices"][0]
check("HARDWARE_BUSY" in busy["why"], f"busy says why ({busy['why']})")
y = json.load(open(f"{T}/gpm-yield.json"))["devices"][0]
check("fakencu" in y["why"], f"the yield names the process ({y['why']})")
top = open(f"{T}/top.txt").read()
check("counters:" in top, "top shows the counters")
stats = open(f"{T}/stats.txt").read()
check("DRAM active" in stats and "Tensor pipe active" in stats, "stats --report gpu has the metrics")
sys.exit(1 if fails else 0)
PY
grep -q "gpus:.*GPU 0 sampling" "$T/status.txt" || fail "status has no gpus line: $(cat "$T/status.txt")"

# The driver gives the counters to administrators only: off, and why.
FAKEPM_ADMIN_ONLY=all start_daemon --config "$T/cuptimond.conf"
for _ in $(seq 100); do [ "$(gstate)" = "off" ] && break; sleep 0.05; done
ctl gpu-metrics >"$T/admin.txt"
grep -q "administrators only.*CAP_SYS_ADMIN.*CapabilityBoundingSet=CAP_SYS_ADMIN" "$T/admin.txt" ||
    fail "the refusal does not say why and what to do: $(cat "$T/admin.txt")"
stop_daemon
# No CUDA driver: off, and why; the rest is served.
printf '{"gpu_metrics_libcuda": "%s/none.so"}\n' "$T" >"$T/nodriver.conf"
start_daemon --config "$T/nodriver.conf"
for _ in $(seq 100); do ctl gpu-metrics --json | grep -q '"state":"off"\|"state": "off"' && break; sleep 0.05; done
ctl gpu-metrics >"$T/nodriver.txt"
grep -q "no CUDA driver" "$T/nodriver.txt" || fail "no driver is not said so: $(cat "$T/nodriver.txt")"
workload --kernels 100 --quiet || fail "a workload without GPU metrics failed"
stop_daemon

# The sampler falls behind (the daemon stopped for 2.5 s; the double's
# hardware buffer, 64 MiB of 2 MiB samples, holds 32, 1.6 s): the buffer overflows, and after
# that CUPTI decodes nothing until sampling starts again, as on the H200.
# The overflow is counted and logged, and sampling restarts.
FAKEPM_HW_SAMPLE_BYTES=2097152 start_daemon --config "$T/cuptimond.conf"
gwait sampling || fail "GPU 0 is not sampled: $(ctl gpu-metrics)"
gsamples() { ctl gpu-metrics --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["'"$1"'"])'; }
kill -STOP "$DPID"
sleep 2.5
kill -CONT "$DPID"
wait_for 50 grep -q "hardware buffer overflowed" "$T/daemon.log" || fail "no overflow logged"
gwait sampling || fail "not sampled again after the overflow: $(ctl gpu-metrics)"
n1=$(gsamples samples)
more() { [ "$(gsamples samples)" -ge $((n1 + 10)) ]; }
wait_for 50 more ||
    fail "no samples after the overflow ($n1, then $(gsamples samples)): $(ctl gpu-metrics)"
[ "$(gsamples overflows)" -ge 1 ] || fail "the overflow is not counted: $(ctl gpu-metrics)"
stop_daemon
grep -q "samples lost (counted); sampling restarts" "$T/daemon.log" || fail "the restart is not logged"
# A CUPTI that decodes what it kept after an overflow (the header's account,
# FAKEPM_OVERFLOW_RESULT=oom): counted and logged, sampling goes on, no restart.
: >"$T/daemon.log"
FAKEPM_OVERFLOW_RESULT=oom FAKEPM_HW_SAMPLE_BYTES=2097152 start_daemon --config "$T/cuptimond.conf"
gwait sampling || fail "GPU 0 is not sampled: $(ctl gpu-metrics)"
kill -STOP "$DPID"
sleep 2.5
kill -CONT "$DPID"
wait_for 50 grep -q "hardware buffer overflowed" "$T/daemon.log" || fail "no overflow logged (oom)"
n1=$(gsamples samples)
wait_for 50 more || fail "no samples after the overflow (oom): $(ctl gpu-metrics)"
[ "$(gsamples overflows)" -ge 1 ] || fail "the overflow is not counted (oom): $(ctl gpu-metrics)"
stop_daemon
starts=$(grep -c 'GPU 0 (NVIDIA H200, GH100): sampling' "$T/daemon.log" || true)
if grep -q "sampling restarts" "$T/daemon.log" || [ "$starts" -ne 1 ]; then
    fail "sampling restarted where CUPTI still decoded: $(grep gpu-metrics "$T/daemon.log")"
fi
# A decode that fails once (CUPTI_ERROR_INVALID_PARAMETER, as once on the
# H100 in a memory-bound phase, before two overflows): counted and logged
# with when it came, and sampling goes on without a restart.
: >"$T/daemon.log"
FAKEPM_DECODE_FAIL_AT=3 start_daemon --config "$T/cuptimond.conf"
gwait sampling || fail "GPU 0 is not sampled: $(ctl gpu-metrics)"
failed() { [ "$(gsamples decode_errors)" = 1 ]; }
wait_for 50 failed || fail "the failed decode is not counted: $(ctl gpu-metrics --json)"
n1=$(gsamples samples)
wait_for 50 more || fail "no samples after the failed decode: $(ctl gpu-metrics)"
stop_daemon
grep -q "cuptiPmSamplingDecodeData: CUPTI_ERROR_INVALID_PARAMETER (counted; [0-9.]* s after Start, decode round 0" "$T/daemon.log" ||
    fail "the failed decode is not logged with when: $(grep gpu-metrics "$T/daemon.log")"
if grep -q "sampling restarts" "$T/daemon.log"; then
    fail "sampling restarted after one failed decode: $(grep gpu-metrics "$T/daemon.log")"
fi
# A hardware buffer too small for the chip (the H100's 32 MiB under load:
# overflowed before the first decode, every start): the device restarts
# with twice the buffer, and samples.
: >"$T/daemon.log"
FAKEPM_MIN_HW_BUFFER=100000000 start_daemon --config "$T/cuptimond.conf"
wait_for 50 grep -q "hardware buffer grows to 128 MiB" "$T/daemon.log" ||
    fail "the buffer did not grow: $(grep gpu-metrics "$T/daemon.log")"
gwait sampling || fail "GPU 0 is not sampled: $(ctl gpu-metrics)"
n1=$(gsamples samples)
wait_for 50 more || fail "no samples with the larger buffer: $(ctl gpu-metrics)"
[ "$(gsamples hw_buffer_bytes)" = 134217728 ] || fail "hw_buffer_bytes: $(ctl gpu-metrics --json)"
stop_daemon
[ "$(grep -c "sampling restarts" "$T/daemon.log")" = 1 ] ||
    fail "not one restart: $(grep gpu-metrics "$T/daemon.log")"
# An H100 under a memory-bound load fills the hardware buffer at a rate the
# interval does not set (64 MiB within 0.5 s at 10 ms, 100 ms and 1 s; the
# double: 160 MiB a second, 32 MiB in 200 ms): at a 0.5 s interval the
# daemon still decodes every 200 ms, and loses nothing (decoding every ten
# intervals, at least every 0.5 s, it overflowed and restarted).
: >"$T/daemon.log"
sed 's/"gpu_metrics_interval_s": 0.05/"gpu_metrics_interval_s": 0.5/' "$T/cuptimond.conf" >"$T/slow.conf"
FAKEPM_HW_FILL_BPS=167772160 start_daemon --config "$T/slow.conf"
gwait sampling || fail "GPU 0 is not sampled (0.5 s): $(ctl gpu-metrics)"
[ "$(gsamples interval_ms)" = 500.0 ] || fail "not sampled at 0.5 s: $(ctl gpu-metrics --json)"
four() { [ "$(gsamples samples)" -ge 4 ]; }
wait_for 100 four || fail "no 4 samples at 0.5 s: $(ctl gpu-metrics --json)"
[ "$(gsamples overflows)" = 0 ] || fail "the buffer overflowed at 0.5 s: $(grep gpu-metrics "$T/daemon.log")"
stop_daemon

# Two GPUs; a job given the second (CUDA_VISIBLE_DEVICES=1, as SLURM binds
# ranks) calls it its device 0.  Its window, and its decode, show the
# counters of the node's GPU 1, matched by the UUID the shim sent, not
# those of GPU 0 (the ordinal in its records).
FAKEPM_DEVICES=2 start_daemon --flush-period 0.2 --config "$T/cuptimond.conf"
both() { [ "$(ctl gpu-metrics --json | python3 -c 'import json,sys; print(sum(d["state"] == "sampling" for d in json.load(sys.stdin)["devices"]))')" = 2 ]; }
wait_for 100 both || fail "the two GPUs are not sampled: $(ctl gpu-metrics)"
ctl begin-window --all --json >/dev/null || fail "begin-window failed (two GPUs)"
FAKECUPTI_DEVICES=2 CUDA_VISIBLE_DEVICES=1 spawn_workload --kernels 3000 --rate 10000 \
    --report "$T/v.json" --quiet
vp=$SPAWNED
wait $vp || fail "the workload on GPU 1 failed"
sleep 0.2 # past its last kernel by a sample or more
ctl end-window --json >"$T/end-v.json" || fail "end-window failed (two GPUs)"
ctl top --by device --json >"$T/agg-v.json" || fail "top --by device --json failed (two GPUs)"
ctl decode "$T/out/archive" --pid "$vp" -o "$T/dec-v.json" 2>"$T/dec-v.err" ||
    fail "decode --pid of the GPU 1 job failed: $(cat "$T/dec-v.err")"
"$CTL" stats "$T/out/archive" --report gpu --pid "$vp" --format json >"$T/stats-v.json" 2>"$T/stats-v.err" ||
    fail "stats --report gpu --pid of the GPU 1 job failed: $(cat "$T/stats-v.err")"
stop_daemon
python3 - "$T/end-v.json" "$T/dec-v.json" "$T/stats-v.json" "$T/agg-v.json" <<'PY' || fail "the job on GPU 1 shows another GPU's counters"
import json, sys
end = json.load(open(sys.argv[1]))
def rows(o):  # the gpu report's rows, wherever the JSON nests them
    if isinstance(o, dict):
        if "metric" in o and "device" in o and "uuid" in o:
            yield o
        for v in o.values():
            yield from rows(v)
    elif isinstance(o, list):
        for v in o:
            yield from rows(v)
agg = json.load(open(sys.argv[4]))
busy = {d["device"]: d["busy_ns_total"] for d in agg["devices"]}
print(f"live aggregate: busy ns by device {busy}")
assert busy.get(1, 0) > 0 and busy.get(0, 0) == 0, busy
st = list(rows(json.load(open(sys.argv[3]))))
print(f"stats --pid: rows of GPU(s) {sorted({r['device'] for r in st})}")
assert st and {r["device"] for r in st} == {1} and all(r["uuid"].endswith("01") for r in st), st[:2]
for what, path in (("window", end["output"]), ("decode --pid", sys.argv[2])):
    t = json.load(open(path))
    gpus = sorted({e["name"].split()[1] for e in t["traceEvents"]
                   if e.get("ph") == "C" and e.get("cat") == "gpu_metrics"})
    devs = [e["args"]["device"] for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
    print(f"{what}: counter tracks of GPU(s) {gpus}; {len(devs)} kernels on device(s) {sorted(set(devs))}")
    assert devs and set(devs) == {0}, devs
    assert gpus == ["1"], gpus
PY
# No libcupti for the daemon (the jobs bring their own, in a wheel): no GPU
# metrics, but the driver still says which GPU each UUID is, so the live
# view puts the job on GPU 1.
printf '{"gpu_metrics_libcupti": "%s/none.so", "gpu_metrics_libcuda": "%s"}\n' "$T" "$FAKEPM" >"$T/nocupti.conf"
FAKEPM_DEVICES=2 start_daemon --flush-period 0.2 --config "$T/nocupti.conf"
nocupti() { ctl gpu-metrics | grep -q "no libcupti"; }
wait_for 100 nocupti || fail "no libcupti is not said: $(ctl gpu-metrics)"
FAKECUPTI_DEVICES=2 CUDA_VISIBLE_DEVICES=1 workload --kernels 2000 --rate 10000 --quiet ||
    fail "the workload on GPU 1 failed (no libcupti)"
ctl top --by device --json >"$T/agg-n.json" || fail "top --by device --json failed (no libcupti)"
stop_daemon
python3 - "$T/agg-n.json" <<'PY' || fail "without libcupti, the job on GPU 1 is not put on GPU 1"
import json, sys
busy = {d["device"]: d["busy_ns_total"] for d in json.load(open(sys.argv[1]))["devices"]}
print(f"no libcupti: busy ns by device {busy}")
assert busy.get(1, 0) > 0 and busy.get(0, 0) == 0, busy
PY
echo PASS
