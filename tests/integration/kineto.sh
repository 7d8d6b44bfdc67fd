#!/bin/bash
# Kineto's dialect (issue 18): a window over two processes on ranks 0 and 1
# (runtime and driver kinds on, annotations pushed and popped, two
# launching threads), and the offline decode of their archives, checked by
# kineto-check.py against torch.profiler's own trace of PyTorch steps on
# the H200 (tests/data/kineto-ref/): top level, categories, arg keys,
# flows, one event per launch, bandwidths.  decode -o FILE.json.gz writes
# gzip that holds the same trace.  The checker must also fail on the trace
# cuptimon wrote on the H200 before the dialect (cuptimon-h200-before), so
# that a checker which passes everything cannot pass for green, and pass
# the one it wrote there after.
. "$top_srcdir/tests/integration/lib.sh"
export REF=$top_srcdir/tests/data/kineto-ref/torch-2.11-h200.json.gz
CHECK=$top_srcdir/tests/integration/kineto-check.py

if python3 "$CHECK" "$REF" "$top_srcdir/tests/data/kineto-ref/cuptimon-h200-before.json.gz" \
    >"$T/before.out" 2>&1; then
    cat "$T/before.out"
    fail "kineto-check.py passes the trace written before the dialect"
fi
grep -q "baseTimeNanoseconds" "$T/before.out" || fail "kineto-check.py failed the old trace for another reason: $(cat "$T/before.out")"
# ... and pass the window trace cuptimon wrote on the H200 of the same steps
# after it (cuptimon-h200-after: torch 2.11, CUDA 13.0; its launching
# threads are pid 620 "python3" and 663 "pt_autograd_0"), but for its
# process metadata and deviceProperties, which it has from before they were
# written Kineto's way
# (the window trace below is checked for it) ...
python3 "$CHECK" "$REF" "$top_srcdir/tests/data/kineto-ref/cuptimon-h200-after.json.gz" --no-metadata ||
    fail "kineto-check.py fails the H200 window trace written in Kineto's dialect"
# ... and fail it on the metadata, so that the metadata check is known to bite.
python3 "$CHECK" "$REF" "$top_srcdir/tests/data/kineto-ref/cuptimon-h200-after.json.gz" >"$T/meta.out" 2>&1 &&
    fail "kineto-check.py passes the H200 trace's old process metadata"
grep -q 'process_labels of pid 620 is .CUPTI 130001., not Kineto' "$T/meta.out" ||
    fail "kineto-check.py failed the old process metadata for another reason: $(cat "$T/meta.out")"

start_daemon --flush-period 0.3
# The workloads must outlive the window: the shim names threads at forced
# flushes, and a process that ends inside the window (before the end's
# forced flush) has its threads unnamed; at 20000 kernels/s (2 s), and at
# 8000/s (5 s) under a load of 7-10, a busy machine made that happen: they
# launch until the window has ended (--stop-file).  Rank 1's process sees two devices (the test double's driver queries), rank
# 0's one: the trace's deviceProperties has both, device 0 once.
for r in 0 1; do
    FAKECUPTI_DEVICES=$((r + 1)) RANK=$r WORLD_SIZE=2 CUPTIMON_LABEL=kineto workload --kernels 4000000 --rate 8000 --threads 2 \
        --annotate 500 --report "$T/r$r.json" --stop-file "$T/stop" --quiet &
    eval "p$r=\$!"
done
two() { [ "$(ctl status --json | python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin)["sessions"] if s["connected"]))')" = 2 ]; }
wait_for 100 two || fail "the two ranks did not connect"
sleep 0.3
ctl begin-window --label kineto --activities kernel,memcpy,memset,runtime,driver,external_correlation \
    --json >"$T/begin.json" || fail "begin-window failed"
sleep 0.6
ctl end-window --json >"$T/end.json" || fail "end-window failed"
touch "$T/stop" # (they launch until the window has ended: none ends inside it)
trace=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["output"])' "$T/end.json")
python3 "$CHECK" "$REF" "$trace" --ranks 2 --devices 2 --annotations || fail "the window trace is not in Kineto's dialect"
# The test double records the cuLaunchKernel inside each cudaLaunchKernel
# (same correlation id): none is written, each is counted.
python3 - "$trace" "$WORKLOAD" <<'PY' || fail "the window trace has a nested driver launch, or thread ids not the system's, or unnamed threads"
import json, os, sys
t = json.load(open(sys.argv[1]))
w = t["otherData"]["writer"]
assert w["nested_driver_launches"] > 1000, w
# Except at the window's start: a cudaLaunchKernel that began just before
# it is not in the window, and its cuLaunchKernel, begun inside, is then
# the one record of that launch there (at most one per launching thread).
rt_corr = {e["args"]["correlation"] for e in t["traceEvents"] if e.get("cat") == "cuda_runtime"}
edge = {}
for e in t["traceEvents"]:
    if e.get("cat") == "cuda_driver":
        assert e["args"]["correlation"] not in rt_corr, ("a nested driver call was written", e)
        edge[(e["pid"], e["tid"])] = edge.get((e["pid"], e["tid"]), 0) + 1
assert all(n == 1 for n in edge.values()), ("driver calls written beyond the window's edge", edge)
print("window: %d nested driver launches not written" % w["nested_driver_launches"])
# Threads are the system's (gettid, as Kineto sets CUPTI up), not
# pthread_self() values: at most pid_max's limit, two per process here.
tids = {}
for e in t["traceEvents"]:
    if e.get("cat") == "cuda_runtime":
        tids.setdefault(e["pid"], set()).add(e["tid"])
assert len(tids) == 2 and all(len(v) == 2 for v in tids.values()), tids
assert all(0 < x <= 4194304 for v in tids.values() for x in v), tids
print("window: launching threads by system tid:", {p: sorted(v) for p, v in tids.items()})
# Each is named after its comm, which the shim sent: the workload's name
# cut to 15 bytes (the kernel's TASK_COMM_LEN), as /proc shows it.
comm = os.path.basename(sys.argv[2])[:15]
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in t["traceEvents"]
         if e.get("ph") == "M" and e.get("name") == "thread_name"}
unnamed = [(p, x) for p, v in tids.items() for x in v if names.get((p, x)) != comm]
assert not unnamed, ("threads not named %r" % comm, unnamed, names)
print("window: every launching thread named", repr(comm))
# Each process is named as Kineto names it (the command's base name), with
# its rank and label, and its labels start with Kineto's "CPU".
pn = {e["pid"]: e["args"]["name"] for e in t["traceEvents"] if e.get("name") == "process_name"}
rank = {p["trace_pid"]: p["rank"] for p in t["otherData"]["processes"]}
exe = os.path.basename(sys.argv[2])
want = {p: "%s rank %d (kineto)" % (exe, rank[p]) for p in tids}
assert {p: pn.get(p) for p in tids} == want, (pn, want)
print("window: processes named", sorted(want.values()))
# deviceProperties: what the test double's driver answered the shim, the
# reference H200's values but the SM count (132 + device) and the name.
ref = json.load(__import__("gzip").open(os.environ["REF"]))["deviceProperties"][0]
want = [dict(ref, id=d, name="Fake H200" + (" #%d" % d if d else ""), numSms=132 + d) for d in (0, 1)]
assert t["deviceProperties"] == want, (t["deviceProperties"], want)
assert t["otherData"]["writer"]["device_properties_refused"] == 0
print("window: deviceProperties of devices", [d["id"] for d in want])
PY
wait "$p0" && wait "$p1" || fail "a workload failed"
stop_daemon

"$CTL" decode "$T/out" -o "$T/all.json" 2>"$T/decode.err" || fail "decode failed: $(cat "$T/decode.err")"
"$CTL" decode "$T/out" -o "$T/all.json.gz" 2>>"$T/decode.err" || fail "decode to .json.gz failed"
gzip -t "$T/all.json.gz" || fail "decode -o all.json.gz did not write gzip"
python3 - "$T/all.json" "$T/all.json.gz" <<'PY' || fail "the gzipped trace differs from the plain one"
import gzip, json, os, sys
a = json.load(open(sys.argv[1]))
b = json.load(gzip.open(sys.argv[2]))
a["otherData"].pop("traceName", None); b["otherData"].pop("traceName", None)
a.pop("traceName"); b.pop("traceName")
assert a == b, "the traces differ"
print("decode: %d events; gzip %d bytes for %d (%.1fx)" % (len(a["traceEvents"]), os.path.getsize(sys.argv[2]),
      os.path.getsize(sys.argv[1]), os.path.getsize(sys.argv[1]) / os.path.getsize(sys.argv[2])))
PY
python3 "$CHECK" "$REF" "$T/all.json.gz" --ranks 2 --devices 2 --annotations || fail "the decoded trace is not in Kineto's dialect"

# One trace per rank, merged: the merge keeps distributedInfo, with both ranks.
i=0
for d in "$T"/out/archive/*/; do
    "$CTL" decode "$d" -o "$T/rank$i.json" 2>>"$T/decode.err" || fail "decode of $d failed"
    i=$((i + 1))
done
[ "$i" = 2 ] || fail "expected 2 archive sessions, found $i"
"$CTL" merge -o "$T/merged.json" "$T/rank0.json" "$T/rank1.json" || fail "merge failed"
python3 "$CHECK" "$REF" "$T/merged.json" --devices 2 || fail "the merged trace is not in Kineto's dialect"
python3 - "$T/merged.json" <<'PY' || fail "merge lost distributedInfo"
import json, sys
t = json.load(open(sys.argv[1]))
di = t["distributedInfo"]
assert di["world_size"] == 2 and sorted(di["ranks"]) == [0, 1] and di["rank"] == 0, di
print("merge: distributedInfo", di)
PY
echo ok
