#!/bin/bash
# Nothing lost at the edges (issue 27), against the libcupti double, which
# completes a GPU record only once its work has ended, holds back a buffer
# with a record of running work at a plain flush, and loses that work at a
# forced one (as CUPTI on the H200: docs/gpu-runs/20261204-h200-probe):
#  A. a window ended while kernels launched inside it run: its trace holds
#     every kernel launched inside, complete; the end waited for them;
#  B. flush --wait-running while kernels run: it returns once they ended;
#  C. a window whose end bound passes while a kernel runs: the answer names
#     the process, the trace has not got that kernel, the archive has it,
#     once, with its time, after it ended;
#  D. a process that exits with a kernel running: archived with its time;
#  E. ... one whose kernel outlasts the exit bound: forced then, counted
#     (exit_incomplete_buffers) and logged;
#  F. the daemon stopped and started again while a kernel runs: the kernel
#     reaches the second daemon;
# and, over all of it, every kernel each workload launched is in the
# archive exactly once with its true duration (E's forced one aside).
. "$top_srcdir/tests/integration/lib.sh"

start_daemon --flush-period 0.3
connected() { [ "$(ctl status --json | python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin)["sessions"] if s["connected"]))')" -ge "$1" ]; }

# A, B: two streams of 100 ms kernels, one running on each at all times
# (the double blocks a launch while its stream is more than 2 ms ahead).
workload --memcpy-every 0 --memset-every 0 --kernels 60 --streams 2 --kernel-us 100000 \
    --wait-file "$T/go-ab" --log "$T/ab.log" --report "$T/ab.json" --linger-ms 300 --quiet &
wab=$!
wait_for 100 connected 1 || fail "workload A/B did not connect"
touch "$T/go-ab"
sleep 0.25
ctl begin-window --all --json >"$T/a-begin.json" || fail "begin-window failed"
sleep 0.33
ctl end-window --json >"$T/a-end.json" || fail "end-window failed"
sleep 0.05
ctl flush --wait-running --timeout 5 --json >"$T/b-flush.json" || fail "flush --wait-running: $(cat "$T/b-flush.json")"
wait "$wab" || fail "workload A/B failed"

# C: a 1.5 s kernel launched inside a window that ends 0.2 s later, with
# an end bound of 0.2 s.
workload --memcpy-every 0 --memset-every 0 --kernels 1 --kernel-us 1500000 --wait-file "$T/go-c" \
    --log "$T/c.log" --report "$T/c.json" --quiet &
wc=$!
wait_for 100 connected 1 || fail "workload C did not connect"
ctl begin-window --all --end-timeout 0.2 --json >"$T/c-begin.json" || fail "begin-window C failed"
touch "$T/go-c"
sleep 0.2
ctl end-window --json >"$T/c-end.json" || fail "end-window C failed"
wait "$wc" || fail "workload C failed"

# D: exits 0.2 s before its last kernel ends (the shim's exit waits).
workload --memcpy-every 0 --memset-every 0 --kernels 3 --streams 1 --kernel-us 200000 --no-sync --log "$T/d.log" \
    --report "$T/d.json" --quiet || fail "workload D failed"
# E: exits with a 3 s kernel running and an exit bound of 0.2 s.
CUPTIMON_EXIT_TIMEOUT_MS=200 workload --memcpy-every 0 --memset-every 0 --kernels 1 --kernel-us 3000000 --no-sync \
    --log "$T/e.log" --report "$T/e.json" --quiet 2>"$T/e.err" || fail "workload E failed"
grep -q "still held work that ran" "$T/e.err" || fail "E: the shim did not say what it forced out: $(cat "$T/e.err")"

# F: the daemon stops while 0.4 s kernels run, and a new one starts.
workload --memcpy-every 0 --memset-every 0 --kernels 4 --streams 1 --kernel-us 400000 \
    --wait-file "$T/go-f" --log "$T/f.log" --report "$T/f.json" --linger-ms 1500 --quiet &
wf=$!
wait_for 100 connected 1 || fail "workload F did not connect"
touch "$T/go-f"
sleep 0.5
stop_daemon
sleep 0.1
start_daemon --flush-period 0.3
wait "$wf" || fail "workload F failed"
ctl flush --wait-running --json >/dev/null || true
ctl status --json >"$T/status.json"
stop_daemon
grep -q "buffer(s) held work still running when the process ended" "$T/daemon.log" ||
    fail "E: the daemon did not log the forced-out buffer"

# One trace per session: a process that had two (F) is two processes in
# a trace of all of them.
for d in "$T"/out/archive/*/; do
    "$CTL" decode "$d" -o "$T/session-$(basename "$d").json" 2>"$T/decode.err" ||
        fail "decode of $d failed: $(cat "$T/decode.err")"
done
python3 - "$T" <<'PY' || fail "the edges lost or cut work"
import glob, json, sys
T = sys.argv[1]
fails = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    ok or fails.append(what)

def launches(name):
    # corr before after, one line per kernel launch
    return [tuple(int(x) for x in l.split()) for l in open(f"{T}/{name}.log")]

def kernels(trace):
    t = json.load(open(trace))
    base = int(t["otherData"]["base_unix_ns"])
    return t, [dict(pid=e["pid"], corr=e["args"]["correlation"], dur=round(e["dur"] * 1000),
                    start=base + round(e["ts"] * 1000))
               for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]

pid = {n: json.load(open(f"{T}/{n}.json"))["pid"] for n in ("ab", "c", "d", "e", "f")}
dur = {"ab": 100_000_000, "c": 1_500_000_000, "d": 200_000_000, "e": 3_000_000_000,
       "f": 400_000_000}
arch = []
for f in glob.glob(f"{T}/session-*.json"):
    pid_of = int(f.rsplit("-", 2)[1])  # .../session-<time>-<pid>-<n>.json
    arch += [dict(k, pid=pid_of) for k in kernels(f)[1]]
for n in ("ab", "c", "d", "f"):
    want = {c for c, _, _ in launches(n)}
    got = [k for k in arch if k["pid"] == pid[n]]
    corrs = [k["corr"] for k in got]
    check(sorted(corrs) == sorted(want), f"{n}: every kernel archived once ({len(corrs)} of {len(want)})")
    bad = [k["dur"] for k in got if abs(k["dur"] - dur[n]) > 1000]
    check(not bad, f"{n}: every kernel with its true duration {dur[n] / 1e6:g} ms (off: {bad[:4]})")

# A: the window holds exactly the kernels launched inside it, complete,
# also those still running at end-window; the end waited for them.
end = json.load(open(f"{T}/a-end.json"))
s0, s1 = end["start_unix_ns"], end["end_unix_ns"]
inside = {c for c, b, a in launches("ab") if b >= s0 and a <= s1}
edge = {c for c, b, a in launches("ab") if a >= s0 and b <= s1}
_, wk = kernels(end["output"])
wc = {k["corr"] for k in wk if k["pid"] == pid["ab"]}
check(inside <= wc <= edge, f"A: the window's kernels are those launched inside it ({len(wc)}; inside {len(inside)}, with edges {len(edge)})")
check(all(abs(k["dur"] - dur["ab"]) <= 1000 for k in wk), "A: no kernel of the window cut")
ran_past = [k for k in wk if k["start"] + k["dur"] > s1]
check(len(ran_past) >= 1, f"A: kernels launched inside still ran at end-window ({len(ran_past)}), and are in")
ew = end["end_wait"]
check(ew["running"] == [] and ew["late"] == [] and ew["elapsed_ms"] >= 10 and ew["fence_flushes"] >= 1,
      f"A: the end waited {ew['elapsed_ms']:.1f} ms, {ew['fence_flushes']} more flush(es), for the running kernels")
# B
fl = json.load(open(f"{T}/b-flush.json"))
check(fl["fence"] and fl["running"] == [] and fl["completed"] == fl["sessions"] and fl["elapsed_ms"] >= 10,
      f"B: flush --wait-running waited {fl['elapsed_ms']:.1f} ms for the running kernels")
# C
end = json.load(open(f"{T}/c-end.json"))
_, wk = kernels(end["output"])
inside = {c for c, b, a in launches("c") if b >= end["start_unix_ns"] and a <= end["end_unix_ns"]}
check(len(inside) == 1, f"C: one kernel was launched inside the window ({len(inside)})")
check(end["end_wait"]["running"] == [pid["c"]], f"C: the answer names the process still running work: {end['end_wait']}")
check(not [k for k in wk if k["pid"] == pid["c"]], "C: the trace has not got the kernel that outlived the bound")
check(inside <= {k["corr"] for k in arch if k["pid"] == pid["c"]}, "C: the archive has it, after it ended")
check(abs(end["end_timeout_s"] - 0.2) < 1e-9, "C: begin-window's --end-timeout is the window's bound")
# E: forced at exit, counted; its record came without times (not drawn)
st = json.load(open(f"{T}/status.json"))
metas = [json.load(open(m)) for m in glob.glob(f"{T}/out/archive/*/meta.json")]
me = [m for m in metas if m["pid"] == pid["e"]]
check(me and me[0].get("final", {}).get("exit_incomplete_buffers") == 1,
      f"E: meta.json counts the buffer forced out at exit: {me and me[0].get('final')}")
check(not [k for k in arch if k["pid"] == pid["e"]], "E: its kernel, forced out incomplete, is not drawn with made-up times")
# F: two sessions, the kernel that ran across the restart in the second
mf = [m for m in metas if m["pid"] == pid["f"]]
check(len(mf) == 2, f"F: the process had a session with each daemon ({len(mf)})")
sys.exit(1 if fails else 0)
PY
echo ok
