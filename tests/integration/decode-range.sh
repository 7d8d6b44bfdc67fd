#!/bin/bash
# cuptimonctl decode --from/--to passes over the chunks completed more than
# 1 s before --from without reading their payload, and writes what reading
# every chunk writes (--read-all: the decode as it was before chunks were
# passed over): the trace byte for byte up to its otherData, otherData and
# the summary alike but for the counts of what was read; what was passed
# over is counted (each session's chunks_skipped and records_skipped, the
# summary's range_skip, the progress line on a terminal), and the records
# of the chunks passed over are exactly the ones the skipping decode did
# not decode.  Ranges: one inside the sessions, --from alone, one before
# every chunk (nothing passed over) and one after them all (all of it).
. "$top_srcdir/tests/integration/lib.sh"

# Buffers completed every 0.2 s over 3 s, so that a session has chunks
# more than a second before a range in its middle; a window with the API
# kinds on in the middle adds runtime/driver records and flows.
start_daemon --flush-period 0.2
pids=
for i in 0 1; do
    workload --kernels 7500 --rate 2500 --threads 2 --report "$T/report-$i.json" &
    pids="$pids $!"
done
sleep 1
ctl begin-window --all --json >"$T/begin.json" || fail "begin-window failed"
sleep 0.8
ctl end-window --json >"$T/end.json" || fail "end-window failed"
for p in $pids; do wait "$p" || fail "a workload exited with status $?"; done
stop_daemon

# The chunks' completion times, from the segments' chunk headers.
python3 - "$T/out" >"$T/chunks.txt" <<'PY' || fail "reading the chunk headers"
import glob, os, struct, sys
for seg in sorted(glob.glob(os.path.join(sys.argv[1], "archive", "*", "seg-*.cpt"))):
    data = open(seg, "rb").read()
    off = 16
    while off + 96 <= len(data):
        assert data[off:off + 8] == b"CPTMCHNK", (seg, off)
        unix_ns, = struct.unpack_from("<Q", data, off + 48)
        stored, = struct.unpack_from("<Q", data, off + 64)
        print(os.path.basename(os.path.dirname(seg)), unix_ns)
        off += 96 + stored
PY
# (Python, not awk: awk's numbers are doubles, too coarse for Unix ns.)
count_before() { # count_before NS: the chunks completed before NS
    python3 -c 'import sys
print(sum(int(l.split()[1]) < int(sys.argv[2]) for l in open(sys.argv[1])))' "$T/chunks.txt" "$1"
}
read -r first last nchunks < <(python3 -c 'import sys
t = [int(l.split()[1]) for l in open(sys.argv[1])]
print(min(t), max(t), len(t))' "$T/chunks.txt")
[ "$nchunks" -ge 20 ] || fail "only $nchunks chunks: too few to pass any over"
[ $((last - first)) -gt 2500000000 ] || fail "the chunks span $(((last - first) / 1000000)) ms only"

# same NAME ARGS...: a decode with ARGS passing chunks over and one reading
# them all write the same trace and summary, but for the counts of what
# they read; prints the chunks passed over.
same() {
    local name=$1; shift
    "$CTL" decode "$T/out" "$@" --summary-out "$T/$name-skip-sum.json" -q >"$T/$name-skip.json" \
        2>"$T/$name-skip.err" || { cat "$T/$name-skip.err"; fail "$name: decode $* failed"; }
    "$CTL" decode "$T/out" "$@" --read-all --summary-out "$T/$name-all-sum.json" -q \
        >"$T/$name-all.json" 2>"$T/$name-all.err" ||
        { cat "$T/$name-all.err"; fail "$name: decode $* --read-all failed"; }
    ! grep -q "read-all" "$T/$name-skip.err" || { cat "$T/$name-skip.err"; fail "$name: records late"; }
    python3 - "$T/$name" <<'PY' || fail "$name: decode $* differs from --read-all"
import json, sys
p = sys.argv[1]
skip, full = open(p + "-skip.json", "rb").read(), open(p + "-all.json", "rb").read()
cut = b'\n"otherData":'
assert skip.count(cut) == 1 and full.count(cut) == 1
# The trace's events and everything before otherData, byte for byte.
assert skip[:skip.index(cut)] == full[:full.index(cut)], "the trace's events differ"
READ = ("records_decoded", "undecodable_bytes")
NEW = ("chunks_skipped", "records_skipped", "bytes_skipped", "records_late")
def sessions(doc):
    out = []
    for s in doc["sessions"]:
        out.append({k: v for k, v in s.items() if k not in READ + NEW})
    return out
def check_sessions(a, b):
    assert len(a) == len(b)
    for s, f in zip(a, b):
        for k in NEW:
            assert k in s and k not in f, k
        assert s["records_late"] == 0, s
        # What was not decoded is exactly what the chunks passed over held.
        assert s["records_decoded"] + s["records_skipped"] == f["records_decoded"], (s, f)
        assert s["undecodable_bytes"] == f["undecodable_bytes"] == 0, (s, f)
    assert sessions({"sessions": a}) == sessions({"sessions": b})
od_s, od_f = json.loads(skip)["otherData"], json.loads(full)["otherData"]
check_sessions(od_s["sessions"], od_f["sessions"])
assert {k: v for k, v in od_s.items() if k != "sessions"} == \
    {k: v for k, v in od_f.items() if k != "sessions"}
ss, sf = json.load(open(p + "-skip-sum.json")), json.load(open(p + "-all-sum.json"))
check_sessions(ss["sessions"], sf["sessions"])
rs = ss.pop("range_skip")
assert "range_skip" not in sf
assert rs["chunks"] == sum(s["chunks_skipped"] for s in ss["sessions"]), rs
assert rs["records"] == sum(s["records_skipped"] for s in ss["sessions"]), rs
assert rs["margin_ns"] == 1000000000 and rs["records_late"] == 0, rs
us, uf = ss.pop("undecodable"), sf.pop("undecodable")
assert us["buffers"] + rs["chunks"] == uf["buffers"], (us, uf, rs)
for k in ("buffers", "decoded_bytes"):
    us.pop(k); uf.pop(k)
assert us == uf, (us, uf)
ss["sessions"] = sessions(ss)
sf["sessions"] = sessions(sf)
assert ss == sf, "the summaries differ"
print(rs["chunks"])
PY
}

mid=$(((first + last) / 2))
# A range in the middle: the chunks before mid - 1.3 s are passed over.
n=$(same mid --from "${mid}ns" --to "$((mid + 300000000))ns")
want=$(count_before $((mid - 1000000000)))
if [ "$n" != "$want" ] || [ "$n" -eq 0 ]; then fail "mid: $n chunks passed over, not $want"; fi
python3 - "$T/mid-skip.json" "$T/mid-skip-sum.json" <<'PY' || fail "mid: the range holds too little"
import json, sys
tr = json.load(open(sys.argv[1]))
kinds = {e.get("cat") for e in tr["traceEvents"] if e.get("ph") == "X"}
assert "kernel" in kinds, kinds
sm = json.load(open(sys.argv[2]))
assert sm["records"]["kernel"] > 100, sm["records"]
PY
# --from alone, in the window: its API records and their flows.
n=$(same from --from "$((first + 1500000000))ns")
[ "$n" -gt 0 ] || fail "from: no chunk passed over"
# Before every chunk: nothing is passed over.
n=$(same before --from "$((first - 5000000000))ns" --to "$((first + 1000000000))ns")
[ "$n" = 0 ] || fail "before: $n chunks passed over"
# After every chunk (and its margin): all of them are, and no event is kept.
n=$(same after --from "$((last + 1500000000))ns")
[ "$n" = "$nchunks" ] || fail "after: $n of $nchunks chunks passed over"

# On a terminal, the progress line says how many chunks were passed over.
on_tty "$CTL" decode "$T/out" -o "$T/tty.json" --from "${mid}ns" >"$T/tty.txt" ||
    fail "decode on a pty failed"
grep -q "M records, .* chunks before --from skipped" "$T/tty.txt" ||
    { cat -v "$T/tty.txt"; fail "the progress line does not count the chunks passed over"; }
echo "ok"
