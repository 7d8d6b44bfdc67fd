#!/bin/bash
# NCCL's collectives (issue 46): the shim is NCCL's profiler plugin.  The
# double of NCCL's side (cuptimon-fakenccl) loads the plugin that
# NCCL_PROFILER_PLUGIN names once CUDA is up (the injected shim named
# itself), takes the newest struct it knows, and drives init, start, stop
# and kernel-channel state for two communicators in each of four processes
# (ranks): one on each plugin version 4, 5 and 6, one of them lagging 1.5 s
# before a collective, one passing hostile input (NULL descriptors, foreign
# handles, unknown event types, over-long strings, a NULL context).  Every
# operation each process drove must be in the archive exactly once, as
# torch.profiler writes collectives (record_param_comms with Kineto's
# args), with its communicator, sequence number, function, count, root or
# peer, channels and protocol, and completed by its kernel channels; the
# window trace holds those of its span; a job that names its own plugin
# keeps it, and the hello says so.
. "$top_srcdir/tests/integration/lib.sh"
FAKENCCL=$top_builddir/tests/fakecupti/cuptimon-fakenccl

printf '{"inflight_warn_s": 1, "metrics_file": "%s", "metrics_interval_s": 1}\n' "$T/metrics.prom" \
    >"$T/cuptimond.conf"
start_daemon --flush-period 0.3 --config "$T/cuptimond.conf"
nccl() {
    CUPTIMON_LABEL=nccl CUDA_INJECTION64_PATH=$SHIM "$FAKENCCL" "$@"
}
nccl --rank 0 --ranks 4 --colls 40 --captured 6 --log "$T/ops0.log" 2>"$T/err0" &
p0=$!
nccl --rank 1 --ranks 4 --colls 40 --lag-at 20 --lag-ms 1500 --max-version 5 --log "$T/ops1.log" \
    2>"$T/err1" &
p1=$!
nccl --rank 2 --ranks 4 --colls 40 --hostile --log "$T/ops2.log" 2>"$T/err2" &
p2=$!
nccl --rank 3 --ranks 4 --colls 40 --max-version 4 --log "$T/ops3.log" 2>"$T/err3" &
p3=$!
# The window spans rank 1's lag and the collectives after it.
sleep 0.3
ctl begin-window --label nccl --json >"$T/begin.json" || fail "begin-window failed"
sleep 2
ctl end-window --json >"$T/end.json" || fail "end-window failed"
for p in $p0 $p1 $p2 $p3; do
    wait "$p" || fail "a fakenccl rank failed: $(cat "$T"/err*)"
done
grep -q 'using ncclProfiler_v6' "$T/err0" || fail "rank 0 did not find ncclProfiler_v6: $(cat "$T/err0")"
grep -q 'using ncclProfiler_v5' "$T/err1" || fail "rank 1 did not take v5: $(cat "$T/err1")"
grep -q 'using ncclProfiler_v4' "$T/err3" || fail "rank 3 did not take v4: $(cat "$T/err3")"
# The hostile input is said (once, by the IO thread), never fatal.
grep -q 'cut' "$T/err2" || fail "the over-long strings were not said: $(cat "$T/err2")"
grep -q "not the shim's" "$T/err2" || fail "the foreign handles were not said: $(cat "$T/err2")"
grep -q 'NULL event descriptor' "$T/err2" || fail "the NULL descriptor was not said: $(cat "$T/err2")"

# A job that names its own plugin keeps it (here one that does not exist:
# the double then runs without one, as NCCL does).
CUPTIMON_LABEL=own NCCL_PROFILER_PLUGIN=/nonexistent/libnccl-profiler-own.so \
    CUDA_INJECTION64_PATH=$SHIM "$FAKENCCL" --colls 2 2>"$T/err-own" && fail "the double ran without a plugin"
grep -q 'cannot load profiler plugin /nonexistent' "$T/err-own" ||
    fail "the job's own NCCL_PROFILER_PLUGIN was replaced: $(cat "$T/err-own")"
# ... and status says whose plugin NCCL runs.
# (It lingers until both are read: SIGUSR1 ends the linger, a normal exit.)
CUPTIMON_LABEL=own NCCL_PROFILER_PLUGIN=/opt/own/libnccl-profiler-own.so \
    spawn_workload --kernels 20 --linger-ms 120000 --quiet
wo=$SPAWNED
own_seen() {
    ctl status --json | python3 -c '
import json, sys
s = [s for s in json.load(sys.stdin)["sessions"] if s.get("label") == "own" and s.get("connected")]
sys.exit(0 if s and s[0]["nccl"] == {"plugin": "user", "user_plugin": "/opt/own/libnccl-profiler-own.so"} else 1)'
}
wait_for 100 own_seen || fail "status does not say the job runs its own NCCL profiler plugin"
ctl status >"$T/status-own.txt" || fail "status failed"
grep -q "NCCL runs the job's own profiler plugin (/opt/own/libnccl-profiler-own.so): its collectives are not recorded" \
    "$T/status-own.txt" || { cat "$T/status-own.txt"; fail "status (text) does not say whose plugin NCCL runs"; }
kill -USR1 "$wo"
wait "$wo" || fail "the workload with its own plugin failed"
# A hang: rank 0's last collective of communicator 0 stays in flight 4 s
# (its kernel does not end), rank 1 sleeps 4 s before its last one (it
# started one fewer).  Meanwhile status names the collective in flight and
# its age on rank 0, the metrics file lets one query name rank 1, and the
# daemon logs the collective in flight past inflight_warn_s (1 s).
CUPTIMON_LABEL=hang CUDA_INJECTION64_PATH=$SHIM "$FAKENCCL" --rank 0 --ranks 2 --colls 10 \
    --hang-ms 4000 2>"$T/err-h0" &
h0=$!
CUPTIMON_LABEL=hang CUDA_INJECTION64_PATH=$SHIM "$FAKENCCL" --rank 1 --ranks 2 --colls 10 \
    --lag-at 9 --lag-ms 4000 2>"$T/err-h1" &
h1=$!
sleep 2.5
ctl status --json >"$T/status-hang.json" || fail "status failed"
ctl status >"$T/status-hang.txt" || fail "status (text) failed"
COLUMNS=200 ctl top --once >"$T/top-hang.txt" || fail "top failed"
sleep 0.5
cp "$T/metrics.prom" "$T/metrics-hang.prom" || fail "no metrics file"
wait "$h0" || fail "hang rank 0 failed: $(cat "$T/err-h0")"
wait "$h1" || fail "hang rank 1 failed: $(cat "$T/err-h1")"
python3 - "$T/status-hang.json" "$T/metrics-hang.prom" <<'PY' || fail "status or the metrics file do not show the hang"
import json, re, sys
st = json.load(open(sys.argv[1]))
comms = {}
for s in st["sessions"]:
    if s.get("connected") is False:
        continue
    assert s["nccl"]["plugin"] == "shim", s["nccl"]
    for c in s["nccl"].get("communicators", []):
        if c["ranks"] == 2:
            comms[(c["comm_id"], c["rank"])] = c
c0 = comms[("0x0000000000001000", 0)]
c1 = comms[("0x0000000000001000", 1)]
f = c0.get("in_flight")
# Its 10th collective: (9 + 0) % 4 = 1, Broadcast, the third of its kind (seq 2).
assert f and f["function"] == "Broadcast" and f["seq"] == 2 and f["age_s"] >= 1.5, c0
assert c0["started"] == 10 and c0["completed"] == 9, c0
assert c0["last_completed"]["function"] == "AllReduce" and c0["last_completed"]["seq"] == 2, c0
assert c1["started"] == 9 and c1["completed"] == 9 and "in_flight" not in c1, c1
# The query of cuptimond(8): the ranks that started fewer collectives than
# another rank of the same communicator.
started = {}
for line in open(sys.argv[2]):
    m = re.match(r'cuptimon_nccl_started_total\{(.*)\} (\d+)$', line)
    if m:
        lab = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        started.setdefault(lab["comm_id"], []).append((int(m.group(2)), lab["comm_rank"], lab["pid"]))
behind = {k: [r for r in v if r[0] == min(x[0] for x in v)] for k, v in started.items()
          if min(x[0] for x in v) < max(x[0] for x in v)}
# Rank 1 sleeps before the 10th collective of both its communicators.
assert sorted(behind) == ["0x0000000000001000", "0x0000000000001001"], started
assert all([r[1] for r in v] == ["1"] for v in behind.values()), started
fl = [l for l in open(sys.argv[2]) if l.startswith("cuptimon_nccl_inflight_seconds{") and 'comm_rank="0"' in l
      and 'comm_id="0x0000000000001000"' in l and 'function="Broadcast"' in l and 'seq="2"' in l]
assert fl and float(fl[0].split()[-1]) >= 1.5, fl
print("ok: the hang is named")
PY
# The same in the text an operator reads first: status and top name the
# collective in flight on rank 0 and what rank 1 completed last.
python3 - "$T/status-hang.txt" "$T/top-hang.txt" <<'PY' || fail "status or top (text) do not show the hang"
import re, sys
for path in sys.argv[1:]:
    text = open(path).read()
    m = re.search(r"NCCL pg0 \(0x0000000000001000\) rank 0 of 2: last completed AllReduce #2; "
                  r"in flight Broadcast #2 for ([0-9.]+)(ms|s)\b", text)
    assert m, (path, text)
    age = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
    assert age >= 1.5, (path, m.group(0))
    assert re.search(r"NCCL pg0 \(0x0000000000001000\) rank 1 of 2: last completed AllReduce #2; "
                     r"none in flight", text), (path, text)
print("ok: status and top name the hang")
PY
grep -q 'NCCL Broadcast #2 of communicator pg0 (id 0x0000000000001000) has been in flight on rank 0 of 2' \
    "$T/daemon.log" || fail "the daemon did not log the collective in flight"
stop_daemon

trace=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["output"])' "$T/end.json")
"$CTL" decode "$T/out" --label nccl -o "$T/all.json" 2>"$T/decode.err" || fail "decode failed: $(cat "$T/decode.err")"
python3 - "$T" "$T/all.json" "$trace" <<'PY' || fail "the collectives in the archive are wrong"
import glob, gzip, json, os, sys
T, alltrace, window = sys.argv[1:]
def load(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        return json.load(f)
torch_name = {"AllReduce": "allreduce", "Broadcast": "broadcast", "AllGather": "_allgather_base",
              "ReduceScatter": "_reduce_scatter_base", "Send": "send"}
want = {}
for r in range(4):
    for line in open("%s/ops%d.log" % (T, r)):
        kind, c, comm, func, seq, count, root, nch, proto, t0 = line.split()
        want[(r, int(comm), func, int(seq), "p2p" if kind == "p2p" else "coll")] = (
            int(count), int(root), int(nch), proto, kind == "captured")
d = load(alltrace)
# The process of each rank: its process_labels carry the rank of the hello
# (RANK is not set here): match by the record's Rank arg instead.
got = {}
kernels = {}
for e in d["traceEvents"]:
    if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel"):
        kernels[e["pid"]] = kernels.get(e["pid"], 0) + 1
    if e.get("name") != "record_param_comms":
        continue
    a = e["args"]
    assert e["cat"] == "cpu_op" and e["ph"] == "X", e
    for k in ("Collective name", "dtype", "In msg nelems", "Out msg nelems", "Group size",
              "Process Group Name"):
        assert k in a, (k, e)
    kind = "p2p" if a["NCCL function"] == "Send" else "coll"
    key = (a["Rank"], int(a["NCCL comm id"], 16), a["NCCL function"], a["Seq"], kind)
    assert key not in got, ("twice", key)
    got[key] = e
missing = set(want) - set(got)
extra = set(got) - set(want)
assert not missing, ("not in the archive", sorted(missing)[:5], len(missing))
assert not extra, ("in the archive, never driven", sorted(extra)[:5])
for key, (count, root, nch, proto, captured) in want.items():
    a = got[key]["args"]
    assert a["Collective name"] == torch_name[key[2]], a
    assert a["Group size"] == 4, a
    n = 4
    if key[2] == "AllGather":
        assert (a["In msg nelems"], a["Out msg nelems"]) == (count, count * n), a
    elif key[2] == "ReduceScatter":
        assert (a["In msg nelems"], a["Out msg nelems"]) == (count * n, count), a
    else:
        assert a["In msg nelems"] == a["Out msg nelems"] == count, a
    if key[4] == "p2p":
        assert a["Dst Rank"] == root and a["dtype"] == "BFloat16", a
    else:
        assert a["dtype"] == "Float" or key[0] == 2, a
        assert a.get("Root", -1) == root, a
        assert a["Channels"] == nch, a
        assert a.get("Protocol", "-") == proto, a
        if captured:
            # Recorded into a graph: the capture, no kernel of its own.
            assert a.get("graph captured") is True and "GPU done" not in a, a
            continue
        assert "graph captured" not in a, a
        # Completed by its kernel channels: the GPU's times are there.
        assert "GPU done" in a and "GPU globaltimer ns" in a, a
        assert a["GPU done"] >= got[key]["ts"], a
    assert "unfinished" not in a, a
    # Rank 2 named its second communicator with 199 bytes: cut to 64.
    if key[0] == 2 and key[1] == 0x1001:
        assert a["Process Group Name"] == "N" * 64, a
    else:
        assert a["Process Group Name"] == "pg%d" % (key[1] - 0x1000), a
# Rank 1 lagged 1.5 s before its collective 20 of communicator 0.
lag = [got[k]["ts"] for k in got if k[0] == 1 and k[1] == 0x1000]
lag.sort()
assert max(b - a for a, b in zip(lag, lag[1:])) >= 1.4e6, "no lag seen on rank 1"
assert all(kernels.get(p, 0) > 0 for p in {e["pid"] for e in got.values()}), kernels
# The window holds collectives of its span, each one in the archive.
w = load(window)
wops = [e for e in w["traceEvents"] if e.get("name") == "record_param_comms"]
assert wops, "no collective in the window"
for e in wops:
    a = e["args"]
    kind = "p2p" if a["NCCL function"] == "Send" else "coll"
    assert (a["Rank"], int(a["NCCL comm id"], 16), a["NCCL function"], a["Seq"], kind) in got, a
print("ok: %d operations, %d in the window" % (len(got), len(wops)))
PY

# cuptimonctl stats --report nccl: per function and communicator, the count
# and bytes of what was driven, nccl-tests' bandwidths.
"$CTL" stats "$T/out" --label nccl --report nccl --format json -o "$T/stats.json" 2>"$T/stats.err" ||
    fail "stats failed: $(cat "$T/stats.err")"
python3 - "$T" "$T/stats.json" <<'PY' || fail "the nccl report is wrong"
import json, sys
T, path = sys.argv[1:]
size = {"AllReduce": 4, "Broadcast": 4, "AllGather": 4, "ReduceScatter": 4, "Send": 2}
want = {}
for r in range(4):
    for line in open("%s/ops%d.log" % (T, r)):
        kind, c, comm, func, seq, count, root, nch, proto, t0 = line.split()
        if kind == "captured":
            continue  # no time of its own: counted incomplete, not in a row
        name = "N" * 64 if (r == 2 and c == "1") else "pg" + c
        k = (func, name, int(comm))
        n, b = want.get(k, (0, 0))
        nb = int(count) * size[func] * (4 if func in ("AllGather", "ReduceScatter") else 1)
        want[k] = (n + 1, b + nb)
rows = json.load(open(path))["nccl"]
got = {(x["function"], x["communicator"], int(x["comm_id"], 16)): x for x in rows}
assert set(got) == set(want), (sorted(set(got) ^ set(want)))
factor = {"AllReduce": 2 * 3 / 4, "AllGather": 3 / 4, "ReduceScatter": 3 / 4}
for k, (n, b) in want.items():
    x = got[k]
    # Rank 2's collective 3 named a datatype the shim cut to 16 bytes: no
    # element size, so its bytes are not counted (the count is).
    assert x["count"] == n and x["ranks"] == 4, (k, x, n)
    assert x["total_bytes"] <= b and x["total_bytes"] >= b - 4 * (1024 * 2 + 40) * 4, (k, x, b)
    assert x["total_ns"] > 0
    assert abs(x["algbw_gbps"] - x["total_bytes"] / x["total_ns"]) < 1e-9 * max(1, x["algbw_gbps"])
    assert abs(x["busbw_gbps"] - x["algbw_gbps"] * factor.get(k[0], 1)) < 1e-9 * max(1, x["busbw_gbps"]), x
print("ok: %d rows" % len(rows))
PY
