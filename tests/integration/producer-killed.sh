#!/bin/bash
# A producer killed mid-run: the daemon frees its session, keeps serving
# the others (whose archives are complete), and the killed one's archive
# ends cleanly.
. "$top_srcdir/tests/integration/lib.sh"

start_daemon --flush-period 0.1
spawn_workload --kernels 200000 --rate 50000 --report "$T/victim.json"
victim=$SPAWNED
pids=
for i in 0 1 2; do
    workload --kernels 30000 --rate 30000 --report "$T/r$i.json" --linger-ms 200 &
    pids="$pids $!"
done
sleep 1
kill -KILL "$victim"
wait "$victim" 2>/dev/null && fail "the victim was not killed"
[ ! -e "$T/victim.json" ] || fail "the victim finished before it was killed"
for p in $pids; do wait "$p" || fail "a producer failed"; done
gone() { [ "$(ctl status --json | python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin)["sessions"] if s["pid"] == '"$victim"'))')" = 0 ]; }
wait_for 50 gone || fail "the killed producer's session is still listed"
ctl status >/dev/null || fail "the daemon stopped answering"
stop_daemon
python3 "$top_srcdir/tests/integration/check-archive.py" "$CTL" "$T/out" "$T"/r[0-9].json
vdir=$(python3 -c 'import glob,json,os,sys
print(next(os.path.dirname(m) for m in glob.glob(sys.argv[1] + "/archive/*/meta.json") if json.load(open(m))["pid"] == int(sys.argv[2])))' "$T/out" "$victim")
"$CTL" decode "$vdir" --summary-out "$T/v.json" -o /dev/null || fail "the killed producer's archive does not decode"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); x=s["sessions"][0]; assert x["corrupt_chunks"]==0 and x["corrupt_strings"]==0, x; assert s["records"]["kernel"]>0, s["records"]; print("victim archive:", s["records"]["kernel"], "kernels")' "$T/v.json"
# An output that is not a regular file is written in place, never replaced
# (as root, a rename over /dev/null once replaced the device with a file).
[ -c /dev/null ] || fail "decode -o /dev/null replaced /dev/null: $(ls -l /dev/null)"
mkfifo "$T/fifo"
cat "$T/fifo" >"$T/from-fifo.json" &
reader=$!
"$CTL" decode "$vdir" -o "$T/fifo" || fail "decode into a FIFO failed"
wait "$reader"
[ -p "$T/fifo" ] || fail "decode replaced the FIFO it wrote to"
python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); assert any(e.get("cat")=="kernel" for e in t["traceEvents"])' \
    "$T/from-fifo.json" || fail "the trace read from the FIFO is not a trace with kernels"
echo "ok"
