#!/bin/bash
# Another CUPTI tool in the same job (the way torch.profiler's Kineto
# works: it registers its own callbacks mid-run, sets its own timebase,
# flushes, disables and finalizes, twice).
#  1. Preloaded, the shim shares CUPTI: the tool gets every record of its
#     kinds in its own timebase, and cuptimon's archive still has every
#     kernel of the whole run.
#  2. Injected only, the same: the shim routes the job's CUPTI imports to
#     itself, so the tool is shared exactly as when preloaded.
#  3. Injected, with a tool that reaches libcupti behind the shim's back
#     (dlsym) in its first round: it takes CUPTI over; status says so; the
#     tool gets all of its records; when it lets go the shim takes CUPTI
#     back, and every kernel launched from then on is archived; the tool's
#     second round is shared; the same with Kineto's stop sequence.
#  4. A tool in a library dlopened after the shim started is shared too.
#  5. A tool like Kineto with TSC timestamps (its clock ticks 2.5 times per
#     ns, not in ns) that stops as Kineto does and starts again while work
#     runs in between, preloaded and injected: each round holds exactly its
#     own launches (none of the gap's), and every kernel's start, mapped
#     back from the tool's clock, agrees with cuptimon's record of the same
#     correlation id.
. "$top_srcdir/tests/integration/lib.sh"
TOOL=$top_builddir/tests/fakecupti/cuptimon-othertool

start_daemon
LD_PRELOAD="${ASAN_RT:+$ASAN_RT }$SHIM" "$TOOL" "$T/pre.json" 3000 2000 3000 \
    || fail "the job with its own CUPTI tool failed under the preloaded shim"
# Linked with full RELRO: the import slots are read-only by then.
readelf -d "$TOOL-relro" 2>/dev/null | grep -q "BIND_NOW\|FLAGS.*NOW" \
    || fail "cuptimon-othertool-relro was not linked with -z now"
CUDA_INJECTION64_PATH=$SHIM "$TOOL-relro" "$T/inj.json" 3000 2000 3000 \
    || fail "the job with its own CUPTI tool failed under the injected shim"

OTHERTOOL_DIRECT=1 OTHERTOOL_HOLD=$T/go CUDA_INJECTION64_PATH=$SHIM \
    "$TOOL" "$T/direct.json" 1000 500 1000 2>"$T/direct.err" &
job=$!
wait_for 200 test -e "$T/go.holding" || fail "the direct tool never reached its first round"
ctl flush --forced >/dev/null
taken() { ctl status --json | python3 -c 'import json,sys; s=[x for x in json.load(sys.stdin)["sessions"] if x["pid"]=='"$job"']; sys.exit(0 if s and s[0]["cupti"]=="taken by another tool" else 1)'; }
wait_for 100 taken || { ctl status --json; fail "status does not say that another tool took CUPTI"; }
ctl status | grep -q "cupti: taken by another tool" || fail "the status table does not say it"
touch "$T/go"
wait "$job" || { cat "$T/direct.err"; fail "the job whose tool took CUPTI failed"; }
grep -q "another CUPTI client took the activity callbacks" "$T/direct.err" \
    || fail "the shim did not say on stderr that CUPTI was taken"
grep -q "took CUPTI back (the other tool finalized CUPTI)" "$T/direct.err" \
    || { cat "$T/direct.err"; fail "the shim did not take CUPTI back when the tool let go"; }
# A tool in a library loaded after the shim started: the shim's next look
# at the loaded objects routes its imports too, so it is shared.
OTHERTOOL_LATE_LIB=$top_builddir/tests/fakecupti/.libs/libothertool-late.so CUDA_INJECTION64_PATH=$SHIM \
    "$TOOL" "$T/late.json" 1000 500 1000 2>"$T/late.err" \
    || { cat "$T/late.err"; fail "the job with a late-loaded tool failed"; }
# The same tool stopping as Kineto does (disable, forced flush, no
# finalize): its forced flush after its disables is its letting go.
OTHERTOOL_DIRECT=1 OTHERTOOL_KINETO_STOP=1 CUDA_INJECTION64_PATH=$SHIM \
    "$TOOL" "$T/kineto.json" 1000 500 1000 2>"$T/kineto.err" \
    || { cat "$T/kineto.err"; fail "the job whose tool stops like Kineto failed"; }
grep -q "took CUPTI back (the other tool stopped tracing)" "$T/kineto.err" \
    || { cat "$T/kineto.err"; fail "the shim did not take CUPTI back after a Kineto-like stop"; }
OTHERTOOL_KINETO_STOP=1 OTHERTOOL_TSC=1 LD_PRELOAD="${ASAN_RT:+$ASAN_RT }$SHIM" \
    "$TOOL" "$T/tsc-pre.json" 1000 1000 2000 || fail "the TSC-clock tool failed (preloaded)"
OTHERTOOL_KINETO_STOP=1 OTHERTOOL_TSC=1 CUDA_INJECTION64_PATH=$SHIM \
    "$TOOL-relro" "$T/tsc-inj.json" 1000 1000 2000 || fail "the TSC-clock tool failed (injected)"
stop_daemon

"$CTL" decode "$T/out" -o "$T/trace.json" --summary-out "$T/sum.json"
python3 - "$T/pre.json" "$T/inj.json" "$T/direct.json" "$T/kineto.json" "$T/late.json" "$T/sum.json" "$T/trace.json" <<'PY'
import collections, json, sys
pre, inj, direct, kineto, late = (json.load(open(p)) for p in sys.argv[1:6])
summ = json.load(open(sys.argv[6]))
trace = json.load(open(sys.argv[7]))

def tool_complete(name, rep, rounds):
    for i in rounds:
        p = rep["profiles"][i]
        assert p["foreign_buffers"] == 0, f"{name} round {i}: the tool got {p['foreign_buffers']} buffers it did not own"
        assert p["kernels"] == p["launched"] and p["in_range"] == p["launched"], \
            f"{name} round {i}: the tool got {p['kernels']} kernels ({p['in_range']} of its own launches), launched {p['launched']}"
        assert p["runtime"] == p["launched"], f"{name} round {i}: runtime records {p['runtime']} != {p['launched']}"
        assert p["bad_time"] == 0 and p["min_ts"] >= 10**15, f"{name} round {i}: timestamps not in the tool's timebase: {p}"

def archived(rep):
    sess = [s for s in summ["sessions"] if s["pid"] == rep["pid"]]
    assert len(sess) == 1, f"pid {rep['pid']} has {len(sess)} sessions"
    return next(pr["kernels"] for pr in summ["processes"] if pr["pid"] == rep["pid"])

for name, rep in (("preloaded", pre), ("injected", inj), ("late", late)):
    tool_complete(name, rep, (0, 1))
    k = archived(rep)
    assert k == rep["kernels_launched"], f"{name}: cuptimon archived {k} kernels of {rep['kernels_launched']}"

lt = late["late"]
assert lt["foreign_buffers"] == 0 and lt["kernels"] == lt["launched"], \
    f"late-loaded tool: got {lt['kernels']} kernels of {lt['launched']}, {lt['foreign_buffers']} foreign buffers"
# Round 1 held CUPTI itself: it got all of its own kernels (what CUPTI had
# taken from cuptimon's buffers is "foreign" to it, as Kineto would see);
# round 2 was shared.
for name, rep in (("direct", direct), ("kineto-stop", kineto)):
    r1 = rep["profiles"][0]
    assert r1["kernels"] == r1["launched"] == r1["in_range"], f"{name} round 1: the tool got {r1}"
    tool_complete(name, rep, (1,))
    corr = collections.Counter(e["args"]["correlation"] for e in trace["traceEvents"]
                               if e.get("cat") == "kernel" and e.get("pid") == rep["pid"])
    dup = [c for c, n in corr.items() if n > 1]
    assert not dup, f"{name}: kernels archived twice: {dup[:5]}"
    after = sum(1 for c in corr if c >= rep["first_after_round1"])
    assert after == rep["launched_after_round1"], \
        f"{name}: after the tool let go cuptimon archived {after} of {rep['launched_after_round1']} kernels"
# 5: per round exactly its own kernels, and each one's time on the tool's
# TSC-like clock maps back to cuptimon's record of it.
starts = collections.defaultdict(dict)
base = trace["otherData"]["base_unix_ns"]
for e in trace["traceEvents"]:
    if e.get("cat") == "kernel" and e.get("ph") == "X":
        starts[e["pid"]][e["args"]["correlation"]] = base + round(float(e["ts"]) * 1000)
for name in ("tsc-pre", "tsc-inj"):
    rep = json.load(open(sys.argv[1].replace("pre.json", name + ".json")))
    tool_complete(name, rep, (0, 1))
    c = rep["tsc"]
    ours = starts[rep["pid"]]
    errs = []
    for i, p in enumerate(rep["profiles"]):
        assert len(p["starts"]) == p["launched"], f"{name} round {i}: {len(p['starts'])} starts listed"
        for corr, ticks in p["starts"]:
            back = c["base_ns"] + (ticks - c["epoch"]) * c["den"] // c["num"]
            errs.append(abs(back - ours[corr]))
    errs.sort()
    med, mx = errs[len(errs) // 2], errs[-1]
    # The tool's clock is read at buffer completions (a sample is the
    # tool's clock between two reads of CUPTI's); allow 2 us for a loaded
    # or sanitized run.
    assert mx <= 2000, f"{name}: tool times off cuptimon's by median {med:.0f} ns, max {mx:.0f} ns"
    print(f"{name}: {len(errs)} kernels on a 2.5-ticks-per-ns clock, start agreement median {med:.0f} ns, max {mx:.0f} ns")
print(f"coexist: preloaded and injected, the tool got all {pre['profiles'][0]['launched']} kernels twice "
      f"in its timebase and cuptimon archived all {pre['kernels_launched']}; a tool that took CUPTI "
      f"behind the shim got all of its own, and cuptimon archived all {after} kernels after it let go")
PY
echo "ok"
