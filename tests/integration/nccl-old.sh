#!/bin/bash
# NCCL 2.23-2.27 (profiler plugin versions 1 to 3; issue 46): the double of
# NCCL's side drives one rank on each of ncclProfiler_v1, _v2 and _v3 as
# the NCCL that offers that version at most does (tests/fakecupti/
# fakenccl.c says how): init(context, mask) alone, a Group event before
# each operation's events (and those only under a non-NULL group handle),
# the communicator's name and hash in every event, v1's enums, no kernel
# channel before v3, v3's channels without a GPU timer, for p2p too.
# Every operation each rank drove must be in the archive exactly once with
# what that version gives (communicator, sequence number, function, count,
# root or peer, channels, algorithm, protocol), completed as the shim
# promises: at NCCL's stop on v1/v2 (no "GPU done"), by the kernel
# channels' stop on v3 ("GPU done", no GPU timer); what no old version says
# (the communicator's size) is left out, not invented; status names each
# communicator by the hash its operations carry, never as communicator 0
# of rank -1; the shim calls none of NCCL's handles foreign.
. "$top_srcdir/tests/integration/lib.sh"
FAKENCCL=$top_builddir/tests/fakecupti/cuptimon-fakenccl

start_daemon --flush-period 0.3
# Each rank sleeps 4 s before its collective 30 of communicator 0; status
# (JSON and text) is read until each rank has been seen with both its
# communicators named, every reading kept.
for r in 0 1 2; do
    CUPTIMON_LABEL=ncclold CUDA_INJECTION64_PATH=$SHIM "$FAKENCCL" --rank "$r" --ranks 3 --colls 40 \
        --max-version $((r + 1)) --lag-at 30 --lag-ms 4000 --log "$T/ops$r.log" 2>"$T/err$r" &
    eval "p$r=\$!"
done
mkdir "$T/st"
n=0
named() {
    n=$((n + 1))
    ctl status --json >"$T/st/$n.json" 2>/dev/null || return 1
    ctl status >"$T/st/$n.txt" 2>/dev/null || return 1
    python3 - "$T/st" <<'PY'
import glob, json, re, sys
seen = set()
for path in glob.glob(sys.argv[1] + "/*.json"):
    try:
        st = json.load(open(path))
    except ValueError:
        continue
    text = open(path[:-5] + ".txt").read()
    for s in st["sessions"]:
        if s.get("label") != "ncclold" or not s.get("connected"):
            continue
        for c in s.get("nccl", {}).get("communicators", []):
            line = r"NCCL %s \(%s\) rank %d: last completed " % (c["name"], c["comm_id"], c["rank"])
            if c.get("completed", 0) >= 20 and re.search(line, text):
                seen.add((c["comm_id"], c["rank"]))
# Both communicators of each of the three ranks, in JSON and text.
sys.exit(0 if len(seen) == 6 else 1)
PY
}
wait_for 300 named || fail "status did not show the six communicators of the v1-v3 ranks (readings in $T/st)"
python3 - "$T/st" <<'PY' || fail "status names the v1-v3 communicators wrongly"
import glob, json, sys
comms = set()
for path in glob.glob(sys.argv[1] + "/*.json"):
    try:
        st = json.load(open(path))
    except ValueError:
        continue
    for s in st["sessions"]:
        if s.get("label") == "ncclold":
            for c in s.get("nccl", {}).get("communicators", []):
                comms.add((c["comm_id"], c["rank"], c["name"]))
    # No size is known: none is printed ("rank 2 of 0" would be a lie).
    text = open(path[:-5] + ".txt").read()
    assert " of 0:" not in text, text
# Only the communicators the operations named: no communicator 0, rank -1.
want = {("0x%016x" % (0x1000 + k), r, "pg%d" % k) for k in (0, 1) for r in (0, 1, 2)}
assert comms == want, sorted(comms)
print("ok: status names the v1-v3 communicators")
PY
for r in 0 1 2; do
    eval "wait \$p$r" || fail "fakenccl rank $r failed: $(cat "$T/err$r")"
    grep -q "using ncclProfiler_v$((r + 1)) " "$T/err$r" || fail "rank $r did not take v$((r + 1)): $(cat "$T/err$r")"
    ! grep -q 'NULL handle' "$T/err$r" || fail "rank $r: $(cat "$T/err$r")"
    ! grep -q "not the shim's" "$T/err$r" || fail "rank $r: the shim called NCCL's handles foreign: $(cat "$T/err$r")"
done
stop_daemon

"$CTL" decode "$T/out" --label ncclold -o "$T/all.json" 2>"$T/decode.err" || fail "decode failed: $(cat "$T/decode.err")"
python3 - "$T" "$T/all.json" <<'PY' || fail "the v1-v3 operations in the archive are wrong"
import json, sys
T, alltrace = sys.argv[1:]
torch_name = {"AllReduce": "allreduce", "Broadcast": "broadcast", "AllGather": "_allgather_base",
              "ReduceScatter": "_reduce_scatter_base", "Send": "send"}
want = {}
for r in range(3):
    for line in open("%s/ops%d.log" % (T, r)):
        kind, c, comm, func, seq, count, root, nch, proto, t0 = line.split()
        want[(r, int(comm), func, int(seq), kind)] = (int(count), int(root), int(nch), proto)
got = {}
for e in json.load(open(alltrace))["traceEvents"]:
    if e.get("name") != "record_param_comms":
        continue
    a = e["args"]
    kind = "p2p" if a["NCCL function"] == "Send" else "coll"
    key = (a["Rank"], int(a["NCCL comm id"], 16), a["NCCL function"], a["Seq"], kind)
    assert key not in got, ("twice", key)
    got[key] = e
missing = set(want) - set(got)
extra = set(got) - set(want)
assert not missing, ("not in the archive", sorted(missing)[:5], len(missing), len(want))
assert not extra, ("in the archive, never driven", sorted(extra)[:5])
for key, (count, root, nch, proto) in want.items():
    a = got[key]["args"]
    version = key[0] + 1
    assert a["Collective name"] == torch_name[key[2]], a
    assert a["Process Group Name"] == "pg%d" % (key[1] - 0x1000), a
    # No old version says the communicator's size.
    assert "Group size" not in a and "Nodes" not in a, a
    if key[2] == "AllGather":
        assert a["In msg nelems"] == count and "Out msg nelems" not in a, a
    elif key[2] == "ReduceScatter":
        assert a["Out msg nelems"] == count and "In msg nelems" not in a, a
    else:
        assert a["In msg nelems"] == a["Out msg nelems"] == count, a
    assert "unfinished" not in a and "graph captured" not in a, a
    # No GPU timer before v4.
    assert "GPU globaltimer ns" not in a, a
    if key[4] == "p2p":
        assert a["Dst Rank"] == root and a["dtype"] == "BFloat16", a
        assert a["NCCL datatype"] == "ncclBfloat16", a
        # No channel count in v1-v3's P2p: finished at NCCL's stop.
        assert a["Channels"] == 0 and "GPU done" not in a, a
        continue
    assert a["dtype"] == "Float" and a["NCCL datatype"] == "ncclFloat32", a
    assert a.get("Root", -1) == root, a
    assert a["Channels"] == nch, a
    assert a["Algorithm"] == "RING" and a["Protocol"] == proto, a
    if version >= 3:
        # Completed by its kernel channels' stop.
        assert "GPU done" in a and a["GPU done"] >= got[key]["ts"], a
    else:
        assert "GPU done" not in a, a
print("ok: %d operations of v1, v2, v3" % len(got))
PY

# stats --report nccl: what needs the communicator's size, which no old
# version says, is empty, not figured with one rank (an all-gather's or
# reduce-scatter's bytes and bandwidths, the bus bandwidth of an all-reduce);
# what does not need it is there.
"$CTL" stats "$T/out" --label ncclold --report nccl --format json -o "$T/stats.json" 2>"$T/stats.err" ||
    fail "stats failed: $(cat "$T/stats.err")"
python3 - "$T/stats.json" <<'PY' || fail "the nccl report invents what the old versions do not say"
import json, sys
rows = json.load(open(sys.argv[1]))["nccl"]
funcs = {x["function"] for x in rows}
assert {"AllReduce", "Broadcast", "AllGather", "ReduceScatter"} <= funcs, funcs
for x in rows:
    assert x["ranks"] is None and x["count"] > 0 and x["total_ns"] > 0, x
    if x["function"] in ("AllGather", "ReduceScatter"):
        assert x["total_bytes"] is None and x["algbw_gbps"] is None and x["busbw_gbps"] is None, x
    elif x["function"] == "AllReduce":
        assert x["total_bytes"] > 0 and x["algbw_gbps"] > 0 and x["busbw_gbps"] is None, x
    else:
        assert x["total_bytes"] > 0 and x["busbw_gbps"] == x["algbw_gbps"], x
print("ok: %d rows, nothing invented" % len(rows))
PY
"$CTL" stats "$T/out" --label ncclold --report nccl >"$T/stats.txt" 2>&1 || fail "stats (table) failed"
grep -q AllGather "$T/stats.txt" || { cat "$T/stats.txt"; fail "the table has no AllGather row"; }
