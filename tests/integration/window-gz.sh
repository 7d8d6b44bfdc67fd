#!/bin/bash
# A window whose trace path ends in .gz is written gzipped (as decode -o
# x.gz is), and holds the same events as the summary says: a trace of many
# processes' API calls is 12x smaller so.
. "$top_srcdir/tests/integration/lib.sh"

start_daemon --flush-period 0.3
workload --kernels 60000 --rate 20000 --report "$T/r.json" &
wl=$!
one() { [ "$(ctl status --json | python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin)["sessions"] if s["connected"]))')" = 1 ]; }
wait_for 100 one || fail "the workload did not connect"
ctl begin-window --all --output "$T/w.json.gz" --json >"$T/begin.json" || fail "begin-window failed"
sleep 1
ctl end-window --json >"$T/end.json" || fail "end-window failed"
wait $wl || fail "the workload failed"
stop_daemon
python3 - "$T/w.json.gz" "$T/end.json" <<'PY' || fail "the .json.gz window trace"
import gzip, json, sys
with open(sys.argv[1], "rb") as f:
    assert f.read(2) == b"\x1f\x8b", "not gzip"
trace = json.load(gzip.open(sys.argv[1]))
end = json.load(open(sys.argv[2]))
kernels = end["summary"]["records"]["kernel"]
assert kernels > 1000, end["summary"]["records"]
got = sum(1 for e in trace["traceEvents"] if e.get("cat") == "kernel")
assert got == kernels, (got, kernels)
print("window-gz: %d kernels in the gzipped trace" % got)
PY
echo "ok"
