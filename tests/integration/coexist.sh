#!/bin/bash
# Another CUPTI tool in the same job (the way torch.profiler's Kineto
# works: it registers its own callbacks mid-run, sets its own timebase,
# flushes, disables and finalizes, twice).  Preloaded, the shim shares CUPTI:
# the tool gets every record of its kinds in its own timebase, and
# cuptimon's archive still has every kernel of the whole run.  Injected
# only, the job and the tool run to completion without a crash.
. "$top_srcdir/tests/integration/lib.sh"
TOOL=$top_builddir/tests/fakecupti/cuptimon-othertool

start_daemon
LD_PRELOAD="${ASAN_RT:+$ASAN_RT }$SHIM" "$TOOL" "$T/pre.json" 3000 2000 3000 \
    || fail "the job with its own CUPTI tool failed under the preloaded shim"
# Injected only, the shim cannot share: the tool takes CUPTI over.  The job
# and the tool finish, and status says what happened.
OTHERTOOL_LINGER_MS=3000 CUDA_INJECTION64_PATH=$SHIM "$TOOL" "$T/inj.json" 1000 500 1000 \
    2>"$T/inj.err" &
inj=$!
wait_for 100 test -s "$T/inj.json" || fail "the injected job did not get through its profiles"
ctl flush --forced >/dev/null
taken() { ctl status --json | python3 -c 'import json,sys; s=[x for x in json.load(sys.stdin)["sessions"] if x["pid"]=='"$inj"']; sys.exit(0 if s and s[0]["cupti"]=="taken by another tool" else 1)'; }
wait_for 30 taken || { ctl status --json; fail "status does not say that another tool took CUPTI"; }
ctl status | grep -q "cupti: taken by another tool" || fail "the status table does not say it"
wait "$inj" || fail "the job with its own CUPTI tool failed under the injected shim"
grep -q "another CUPTI client took the activity callbacks" "$T/inj.err" || fail "the shim did not say so on stderr"
stop_daemon

"$CTL" decode "$T/out" --summary-out "$T/sum.json" -o /dev/null
python3 - "$T/pre.json" "$T/sum.json" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
summ = json.load(open(sys.argv[2]))
for i, p in enumerate(rep["profiles"]):
    assert p["foreign_buffers"] == 0, f"profile {i}: the tool got {p['foreign_buffers']} buffers it did not own"
    assert p["kernels"] == p["launched"] and p["in_range"] == p["launched"], \
        f"profile {i}: the tool got {p['kernels']} kernels ({p['in_range']} of its own launches), launched {p['launched']}"
    assert p["runtime"] == p["launched"], f"profile {i}: runtime records {p['runtime']} != {p['launched']}"
    assert p["bad_time"] == 0 and p["min_ts"] >= 10**15, f"profile {i}: timestamps not in the tool's timebase: {p}"
sess = [s for s in summ["sessions"] if s["pid"] == rep["pid"]]
assert len(sess) == 1, f"the preloaded job has {len(sess)} sessions"
kernels = next(pr["kernels"] for pr in summ["processes"] if pr["pid"] == rep["pid"])
assert kernels == rep["kernels_launched"], f"cuptimon archived {kernels} kernels of {rep['kernels_launched']}"
print(f"coexist: the tool got all {rep['profiles'][0]['launched']} kernels twice, in its timebase; "
      f"cuptimon archived all {kernels}")
PY
echo "ok"
