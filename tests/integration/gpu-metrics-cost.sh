#!/bin/bash
# GPU metrics (issue 48) against libpm-fake.so: what sampling costs, and the
# operator's commands telling the truth.
#  - pause, pause --for=N and resume print the state the command leaves
#    (paused; until when, in text and JSON; starting again), and the
#    node's state is paused when every GPU is;
#  - a set is judged before it runs: --check-config refuses a metric name
#    it does not know, naming the keys, takes keys in any case, and warns
#    about the known-costly pair (the default set included);
#  - the double floods a configuration holding that pair with records
#    besides the triggered samples (FAKEPM_FLOOD_BPS), each raw MiB costing
#    the decode CPU (FAKEPM_DECODE_NS_PER_MIB), as the H100 did: the daemon
#    measures its decode CPU and the raw bytes per second, shows both in
#    status (text, JSON) and the metrics file, and logs once past its
#    bounds; a set without the pair (SM active, occupancy and the tensor
#    pipe from TPC.TriageCompute, under their keys and Prometheus names),
#    sampled the same way, stays below them.
. "$top_srcdir/tests/integration/lib.sh"
FAKEPM=$top_builddir/tests/fakecupti/.libs/libpm-fake.so
[ -e "$FAKEPM" ] || { echo "SKIP: libpm-fake.so is not built"; exit 77; }
mkdir -p "$T/pmlock"
export FAKEPM_DIR=$T/pmlock
conf() { # set
    cat >"$T/cuptimond.conf" <<EOF
{"gpu_metrics_libcupti": "$FAKEPM", "gpu_metrics_libcuda": "$FAKEPM",
 "gpu_metrics_interval_s": 0.05, "gpu_metrics_set": "$1",
 "metrics_file": "$T/metrics.prom", "metrics_interval_s": 1}
EOF
}
gjson() { ctl gpu-metrics --json "$@"; }
gstate() { gjson | python3 -c 'import json,sys; d=json.load(sys.stdin)["devices"]; print(d[0]["state"] if d else "none")'; }
gwait() { for _ in $(seq 200); do [ "$(gstate)" = "$1" ] && return 0; sleep 0.05; done; return 1; }

# 1. The set's judgement, before anything runs.
conf "sm_actve,dram_active"
out=$("$CUPTIMOND" --config "$T/cuptimond.conf" --check-config 2>&1) &&
    fail "--check-config took a misspelt metric: $out"
case $out in *"'sm_actve' is not a metric this daemon knows"*"sm_active, sm_occupancy, tensor_active"*) ;;
*) fail "the refusal does not name the word and the keys: $out" ;; esac
conf "SM_Active,Tensor_Active"
out=$("$CUPTIMOND" --config "$T/cuptimond.conf" --check-config 2>&1 >/dev/null) ||
    fail "--check-config refused keys in another case: $out"
case $out in *"warning"*"sm__pipe_tensor_cycles_active (tensor_active) and sm__cycles_active (sm_active)"*) ;;
*) fail "no warning about the costly pair: $out" ;; esac
conf "sm_active,sm_occupancy,dram_active"
out=$("$CUPTIMOND" --config "$T/cuptimond.conf" --check-config 2>&1 >/dev/null) ||
    fail "--check-config refused a good set: $out"
[ -z "$out" ] || fail "a set without the pair was warned about: $out"

# 2. The operator's commands, on a set named in another case.
conf "SM_Active,DRAM_Active"
start_daemon --config "$T/cuptimond.conf"
gwait sampling || fail "GPU 0 is not sampled: $(ctl gpu-metrics)"
keys=$(gjson | python3 -c 'import json,sys; print(",".join(m["key"] for m in json.load(sys.stdin)["devices"][0]["metrics"]))')
[ "$keys" = "sm_active,dram_active" ] || fail "keys in another case are not the keys: $keys"
out=$(ctl gpu-metrics pause) || fail "pause failed: $out"
case $out in "GPU metrics: paused"*"GPU 0 "*": paused: paused by uid"*) ;;
*) fail "pause does not print the state it leaves: $out" ;; esac
out=$(ctl gpu-metrics resume) || fail "resume failed: $out"
case $out in *": paused:"* | "GPU metrics: paused"*) fail "resume prints a paused GPU: $out" ;; esac
gwait sampling || fail "not sampled again after resume: $(ctl gpu-metrics)"
before=$(date +%s)
gjson pause --for=30 >"$T/pause-for.json" || fail "pause --for failed"
python3 - "$T/pause-for.json" "$before" <<'EOF' || fail "pause --for=30: $(cat "$T/pause-for.json")"
import json, sys
st = json.load(open(sys.argv[1]))
d = st["devices"][0]
assert st["state"] == "paused", st["state"]
assert d["state"] == "paused", d["state"]
until = d["paused_until_unix_ns"] / 1e9
assert 28 <= until - int(sys.argv[2]) <= 33, until - int(sys.argv[2])
assert d["paused_until"] in d["why"], (d["paused_until"], d["why"])
EOF
out=$(ctl gpu-metrics)
case $out in *"until 20"*"Z ("*" s from now)"*) ;; *) fail "status does not say until when: $out" ;; esac
ctl status | grep -q "gpus:.*GPU 0 paused" || fail "status has no paused GPU line: $(ctl status)"
ctl gpu-metrics resume >/dev/null || fail "resume failed"
gwait sampling || fail "not sampled again after resume: $(ctl gpu-metrics)"
stop_daemon

# 3. What sampling costs: the costly pair floods, a set without it does
# not (the same flood setting, the same decode price).
export FAKEPM_FLOOD_BPS=$((64 << 20)) FAKEPM_DECODE_NS_PER_MIB=1000000
cost_run() { # name set
    conf "$2"
    : >"$T/daemon.log"
    start_daemon --config "$T/cuptimond.conf"
    gwait sampling || fail "$1: GPU 0 is not sampled: $(ctl gpu-metrics)"
    # Two whole 10 s windows of the cost figures.
    for _ in $(seq 300); do
        gjson >"$T/cost-$1.json"
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["devices"][0]; sys.exit(0 if "decode_cpu_pct" in d else 1)' "$T/cost-$1.json" && break
        sleep 0.1
    done
    sleep 10.5
    gjson >"$T/cost-$1.json"
    ctl gpu-metrics >"$T/cost-$1.txt"
    sleep 1.2
    cp "$T/metrics.prom" "$T/cost-$1.prom"
    stop_daemon
    cp "$T/daemon.log" "$T/cost-$1.log"
}
cost_run pair "sm_active,tensor_active,dram_active"
# The same three from XLA's one counter group: the keys, and so the
# Prometheus names, stay the user's.
PE=.avg.pct_of_peak_sustained_elapsed TC=TPC.TriageCompute
cost_run cheap "$TC.sm__cycles_active$PE,$TC.tpc__warps_active_realtime$PE,$TC.sm__pipe_tensor_cycles_active_realtime$PE,dram_active"
python3 - "$T" <<'EOF' || fail "the sampler's cost is not measured, shown or logged as it should be"
import json, re, sys
T = sys.argv[1]
ok = True
def check(c, what):
    global ok
    print(("ok   " if c else "FAIL ") + what)
    ok &= bool(c)
for name, costly in (("pair", True), ("cheap", False)):
    d = json.load(open(f"{T}/cost-{name}.json"))["devices"][0]
    cpu, raw = d.get("decode_cpu_pct"), d.get("raw_bytes_per_s")
    txt, prom, log = (open(f"{T}/cost-{name}.{x}").read() for x in ("txt", "prom", "log"))
    check(cpu is not None and raw is not None, f"{name}: status has the decode CPU and raw bytes ({cpu}, {raw})")
    if cpu is None or raw is None:
        continue
    check(d["costly_set"] == costly, f"{name}: judged {'costly' if costly else 'not costly'}")
    if not costly:
        keys = [m["key"] for m in d["metrics"]]
        check(keys == ["sm_active", "sm_occupancy", "tensor_active", "dram_active"],
              f"{name}: TPC.TriageCompute's names keep the keys ({keys})")
        for fam in ("cuptimon_gpu_prof_sm_active", "cuptimon_gpu_prof_sm_occupancy",
                    "cuptimon_gpu_prof_pipe_tensor_active"):
            check(re.search(r'^%s\{gpu="0",' % fam, prom, re.M), f"{name}: the metrics file has {fam}")
    # The double's flood: 64 MiB/s and 1 ms of CPU per MiB, 6.4 % of a core.
    if costly:
        check(55 <= raw / 2**20 <= 75, f"{name}: raw records about 64 MiB/s ({raw / 2**20:.1f})")
        check(5 < cpu < 60, f"{name}: decode CPU past the 5 % bound ({cpu:.2f} %)")
    else:
        check(raw < 2**20, f"{name}: raw records only the samples ({raw:.0f} B/s)")
        check(cpu < 5, f"{name}: decode CPU below the bound ({cpu:.2f} %)")
    warned = len(re.findall(r"decoding its counters costs", log))
    check(warned == (1 if costly else 0), f"{name}: the cost logged {'once' if costly else 'never'} ({warned})")
    check(re.search(r"cost: [0-9.]+ % of a CPU core decoding, raw records [0-9.]+ [KM]?B/s", txt),
          f"{name}: the text status shows the cost")
    m = re.search(r'^cuptimon_gpu_metrics_decode_cpu_cores\{gpu="0",[^}]*\} (\S+)$', prom, re.M)
    check(m and abs(float(m.group(1)) * 100 - cpu) < 5, f"{name}: the metrics file has the decode CPU ({m and m.group(1)})")
    check(re.search(r'^cuptimon_gpu_metrics_raw_bytes_per_second\{gpu="0",', prom, re.M),
          f"{name}: the metrics file has the raw bytes per second")
sys.exit(0 if ok else 1)
EOF
echo "PASS: the sampler's cost and the operator's commands"
