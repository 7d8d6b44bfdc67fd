#!/bin/bash
# The daemon is SIGKILLed while 4 producers stream: the producers keep
# running at full speed and exit normally, reconnect to a new daemon, and
# report what they lost; everything archived before the kill reads back.
. "$top_srcdir/tests/integration/lib.sh"

start_daemon --flush-period 0.2
pids=
for i in 0 1 2 3; do
    CUPTIMON_LABEL=w$i workload --kernels 60000 --rate 20000 --report "$T/r$i.json" &
    pids="$pids $!"
done
sleep 1
kill -KILL "$DPID"
wait "$DPID" 2>/dev/null || true
DPID=
killed_at=$(date +%s%N)
mv "$T/out" "$T/out-first"
sleep 0.5
start_daemon --flush-period 0.2
for p in $pids; do wait "$p" || fail "a producer failed after the daemon was killed"; done
done_ms=$(( ($(date +%s%N) - killed_at) / 1000000 ))
# 60000 launches at 20000/s take 3 s; a shim that waited for the dead daemon
# would hold them far longer (the bound leaves room for a loaded CI machine).
[ "$done_ms" -lt 60000 ] || fail "producers took $done_ms ms after the kill: they were held up"
stop_daemon

# The first daemon's archive: every chunk that was written reads back,
# and nothing in it is corrupt (a torn tail is allowed).
"$CTL" decode "$T/out-first" --summary-out "$T/first-summary.json" -o "$T/first.json" \
    2>"$T/first.err" || fail "decoding the first daemon's archive failed: $(cat "$T/first.err")"
python3 - "$T/first-summary.json" "$T/out" "$T"/r*.json <<'PY'
import json, sys, glob, os
s = json.load(open(sys.argv[1]))
corrupt = sum(x["corrupt_chunks"] + x["corrupt_strings"] for x in s["sessions"])
assert corrupt == 0, f"first archive: {corrupt} corrupt chunks or strings"
assert len(s["sessions"]) == 4, f"first archive has {len(s['sessions'])} sessions, want 4"
assert s["records"]["kernel"] > 0, "the first daemon archived no kernels"
# Every producer reconnected to the second daemon and said what it lost.
metas = [json.load(open(m)) for m in glob.glob(os.path.join(sys.argv[2], "archive", "*", "meta.json"))]
pids = {json.load(open(r))["pid"] for r in sys.argv[3:]}
second = {m["pid"]: m for m in metas}
missing = pids - set(second)
assert not missing, f"producers {missing} did not reconnect to the new daemon"
for pid in pids:
    c = second[pid].get("counters", {})
    assert c.get("connects", 0) >= 1, f"pid {pid}: hello says it connected {c.get('connects')} times before"
print("daemon-killed: first archive intact, all producers reconnected")
PY
echo "ok"
