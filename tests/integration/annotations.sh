#!/bin/bash
# Annotation ranges (issue 18): the real daemon and shim over the test
# double, a workload on two threads that marks steps with cuptimon_step()
# and wraps each launch in a nested annotation "inner", logging the
# CLOCK_REALTIME bracket of every call (--range-log).  The window trace and
# the offline decode must hold every range as Kineto draws it: a
# user_annotation slice on the pushing thread, starting inside the push
# call's bracket and ending inside the pop's, with its nesting (depth, the
# parent's External id), ProfilerStep#N for the steps, and a
# gpu_user_annotation slice per annotation and GPU track spanning exactly
# the GPU work it launched; ranges crossing the window's edges clipped to
# them.  A second process has a helper thread that never annotates (as
# autograd's engine thread): its work goes to the range open on the other
# thread when it was launched ("attributed by launch time").
. "$top_srcdir/tests/integration/lib.sh"
# Times are compared with a tolerance of SLACK ns: the shim maps CUPTI's
# clock (the double's is CLOCK_REALTIME) to Unix time with a pair of clock
# reads, which are some tens of ns apart, as the records' own pairs are.
export SLACK=2000

start_daemon --flush-period 0.3
# The workloads launch only once both are connected (--wait-file), just
# before the window opens, and until it has ended (--stop-file): on a
# loaded machine the window once opened after a fixed 1.5 s of launches.
CUPTIMON_LABEL=annot workload --kernels 600000 --rate 4000 --threads 2 --annotate 100 --steps --nest \
    --memcpy-every 7 --memset-every 11 --range-log "$T/ranges.log" --report "$T/r.json" --linger-ms 2000 \
    --wait-file "$T/go" --stop-file "$T/stop" --quiet &
wp=$!
CUPTIMON_LABEL=annot workload --kernels 400000 --rate 3000 --threads 2 --bare-threads 1 --annotate 100 --steps \
    --memcpy-every 7 --range-log "$T/ranges2.log" --report "$T/r2.json" --linger-ms 2000 \
    --wait-file "$T/go" --stop-file "$T/stop" --quiet &
wp2=$!
two() { [ "$(ctl status --json | python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin)["sessions"] if s["connected"]))')" = 2 ]; }
wait_for 100 two || fail "the workloads did not connect"
touch "$T/go"
sleep 0.2
ctl begin-window --label annot --activities kernel,memcpy,memset,runtime,external_correlation \
    --json >"$T/begin.json" || fail "begin-window failed"
sleep 0.8
ctl end-window --json >"$T/end.json" || fail "end-window failed"
ctl status --json >"$T/status.json" || fail "status failed"
touch "$T/stop"
wait "$wp" || fail "the workload failed"
wait "$wp2" || fail "the workload with a helper thread failed"
cat "$T/ranges2.log" >>"$T/ranges.log"
stop_daemon
trace=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["output"])' "$T/end.json")
"$CTL" decode "$T/out" -o "$T/all.json" 2>"$T/decode.err" || fail "decode failed: $(cat "$T/decode.err")"
# Kineto's categories and arg keys, as torch.profiler's trace has them.
REF=$top_srcdir/tests/data/kineto-ref/torch-2.11-h200.json.gz
for f in "$trace" "$T/all.json"; do
    python3 "$top_srcdir/tests/integration/kineto-check.py" "$REF" "$f" --annotations --steps ||
        fail "$f: the annotation ranges are not in Kineto's dialect"
done

python3 - "$T/ranges.log" "$trace" "$T/all.json" "$T/end.json" "$T/status.json" <<'PY' || fail "the annotation ranges are wrong"
import json, os, sys
SLACK = int(os.environ["SLACK"])
log, window, decoded, end, status = sys.argv[1:]

# What the workload did, as it saw it: per thread, the steps and the
# inner ranges, each with the brackets of its begin and end calls.
ranges = []          # dict(name, tid, b0, b1, e0, e1, depth)
open_step = {}
open_inner = {}
for line in open(log):
    f = line.split()
    kind, tid, t0, t1 = f[0], int(f[1]), int(f[2]), int(f[3])
    if kind == "step":
        n = int(f[4])
        if n < 0:
            continue            # -EBUSY and such: nothing began
        if tid in open_step:
            open_step[tid].update(e0=t0, e1=t1)
        # A step made outside the window is no range (annotations are off);
        # kept anyway and matched by time below.
        r = dict(name="ProfilerStep#%d" % n, tid=tid, b0=t0, b1=t1, e0=None, e1=None, depth=0)
        ranges.append(r)
        open_step[tid] = r
    elif kind == "push":
        r = dict(name="inner", tid=tid, b0=t0, b1=t1, e0=None, e1=None, depth=1)
        ranges.append(r)
        open_inner[tid] = r
    elif kind == "pop":
        open_inner.pop(tid).update(e0=t0, e1=t1, corr=int(f[4]))
tids = {r["tid"] for r in ranges}
assert len(tids) == 3, tids     # 2 + 1: the helper thread annotates nothing

def slices(path):
    t = json.load(open(path))
    base = t["baseTimeNanoseconds"]
    ev = t["traceEvents"]
    def ns(x):
        return base + round(x * 1000)
    ua = [e for e in ev if e.get("cat") == "user_annotation"]
    ga = [e for e in ev if e.get("cat") == "gpu_user_annotation"]
    return t, ev, ua, ga, ns

def check(path, win):
    t, ev, ua, ga, ns = slices(path)
    assert ua, "no user_annotation slices in " + path
    # Annotation ids are per process: keys are (pid, id).
    by_id = {(e["pid"], e["args"]["External id"]): e for e in ua}
    assert len(by_id) == len(ua), "two slices for one annotation"
    # Every slice is one of the workload's ranges: its thread, name and
    # nesting, beginning inside the push's bracket and ending inside the
    # pop's (or at the window's edge, clipped, or still open).
    matched = set()
    for e in ua:
        a = e["args"]
        b, x = ns(e["ts"]), ns(e["ts"] + e["dur"])
        # Matched by the begin's bracket, or for a range clipped at the
        # window's start (it began before) by the end's.
        if a.get("clipped") in ("begin", "both"):
            cands = [i for i, r in enumerate(ranges) if r["tid"] == e["tid"] and r["name"] == e["name"] and
                     r["b0"] < b and (a.get("clipped") == "both" or a.get("open") or
                                      (r["e0"] is not None and r["e0"] - SLACK <= x <= r["e1"] + SLACK))]
        else:
            cands = [i for i, r in enumerate(ranges) if r["tid"] == e["tid"] and r["name"] == e["name"] and
                     r["b0"] - SLACK <= b <= r["b1"] + SLACK]
        assert len(cands) >= 1, ("a slice no range of the workload explains", e, min(
            ((r["b0"] - b, b - r["b1"]) for r in ranges if r["tid"] == e["tid"] and r["name"] == e["name"]),
            key=lambda d: max(d)))
        i = min(cands, key=lambda i: abs(ranges[i]["b0"] - b) if a.get("clipped") not in ("begin", "both")
                else abs((ranges[i]["e0"] or 0) - x))
        r = ranges[i]
        assert i not in matched, ("one range drawn twice", e)
        matched.add(i)
        # An inner range before the thread's first step of the window has
        # no step around it: the step that began before the window was
        # pushed while annotations were off.
        first_step = min((x["ts"] for x in ua if x["tid"] == e["tid"] and
                          x["name"].startswith("ProfilerStep#")), default=None)
        want = r["depth"] if first_step is not None and e["ts"] >= first_step else 0
        assert a["depth"] == want, (e, r, first_step)
        if a.get("clipped") in ("end", "both"):
            assert win and x == win[1], (e, win)
        elif a.get("open"):
            pass
        else:
            assert r["e0"] is not None and r["e0"] - SLACK <= x <= r["e1"] + SLACK, ("end outside the pop's bracket", e, r, b - r["b0"], r["b1"] - b, x - r["e0"], r["e1"] - x)
        if a.get("clipped") in ("begin", "both"):
            assert win and b == win[0] and r["b0"] < win[0], (e, win)
        if want == 1:
            # Nested in the thread's step, which encloses it.
            p = by_id.get((e["pid"], a.get("parent external id")))
            assert p is not None and p["name"].startswith("ProfilerStep#") and p["tid"] == e["tid"], (e, p)
            assert p["ts"] <= e["ts"] and e["ts"] + e["dur"] <= p["ts"] + p["dur"] + 0.002, (e, p)
        else:
            assert "parent external id" not in a, e
    # ... and every range of the workload inside the traced span is drawn.
    # (From the first range drawn whole: the shim turns annotations on
    # when the window's ENABLE reaches it, which on a loaded machine can
    # be after the window's start.)
    first = min(ns(e["ts"]) for e in ua if not e["args"].get("clipped"))
    lo, hi = win if win else (first, max(ns(e["ts"] + e["dur"]) for e in ua))
    lo = max(lo, first)
    # (To the last range that began before the shim's final flush: the
    # window's end is taken when that flush is done, so what was pushed
    # in between is in the archive only after the window was written.)
    hi = min(hi, max(ns(e["ts"]) for e in ua if not e["args"].get("clipped", "").startswith("b")))
    # Each process turns annotations on when its own ENABLE arrives: from
    # that process's first range drawn whole (its workload starts launching
    # just before the window, so a step can begin before its ENABLE).
    pid_of = {e["tid"]: e["pid"] for e in ua}
    first_pid = {}
    for e in ua:
        if not e["args"].get("clipped"):
            first_pid[e["pid"]] = min(first_pid.get(e["pid"], 1 << 62), ns(e["ts"]))
    def lo_of(r):
        return max(lo, first_pid.get(pid_of.get(r["tid"]), lo))
    missing = [r for i, r in enumerate(ranges) if i not in matched and r["e0"] is not None and
               r["b0"] > lo_of(r) + 2_000_000 and r["e1"] < hi - 2_000_000]
    assert not missing, ("ranges not drawn", path, len(missing), lo, hi, missing[:3])
    steps = sorted(e["name"] for e in ua if e["name"].startswith("ProfilerStep#"))
    assert len(steps) >= 2, steps
    # GPU slices: per annotation and GPU track, from the first start to the
    # last end of the kernels and copies that carry its External id.
    work = {}
    for e in ev:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "External id" in e.get("args", {}):
            k = (e["pid"], e["args"]["External id"], e["tid"])
            lo_, hi_ = work.get(k, (None, None))
            s0, s1 = round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)
            work[k] = (s0 if lo_ is None else min(lo_, s0), s1 if hi_ is None else max(hi_, s1))
    # Work with no annotation of its own goes by its launch's thread and
    # time: to the innermost range of the launching thread open then; from
    # a thread with no range at all, to the one other thread's innermost
    # open range (with several, to none).  Its slice says so.
    launch = {}
    for e in ev:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launch[(e["pid"], e["args"]["correlation"])] = (e["tid"], round(e["ts"] * 1000))
    open_on = {}
    for e in ua:
        open_on.setdefault((e["pid"], e["tid"]), []).append(
            (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000), e["args"]["depth"],
             e["args"]["External id"]))
    def innermost(key, at):
        c = [r for r in open_on.get(key, ()) if r[0] <= at <= r[1]]
        return max(c, key=lambda r: (r[0], r[2]))[3] if c else None
    timed = set()
    for e in ev:
        a = e.get("args", {})
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset") or "External id" in a:
            continue
        launched = launch.get((e["pid"], a.get("correlation")))
        if launched is None:
            continue
        ext = innermost((e["pid"], launched[0]), launched[1])
        if ext is None and (e["pid"], launched[0]) not in open_on:
            others = [innermost(k, launched[1]) for k in open_on if k[0] == e["pid"] and k[1] != launched[0]]
            others = [x for x in others if x is not None]
            ext = others[0] if len(others) == 1 else None
        if ext is None:
            continue
        k = (e["pid"], ext, e["tid"])
        lo_, hi_ = work.get(k, (None, None))
        s0, s1 = round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)
        work[k] = (s0 if lo_ is None else min(lo_, s0), s1 if hi_ is None else max(hi_, s1))
        timed.add(k)
    assert ga, "no gpu_user_annotation slices in " + path
    gk = {}
    for e in ga:
        k = (e["pid"], e["args"]["External id"], e["tid"])
        assert k not in gk, ("two GPU slices for one annotation and track", e)
        gk[k] = e
        assert k in work, ("a GPU slice over no work", e)
        assert bool(e["args"].get("attributed by launch time")) == (k in timed), ("attributed by launch time", e)
        s0, s1 = work[k]
        assert (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)) == (s0, s1), (e, work[k])
        name = by_id[k[:2]]["name"] if k[:2] in by_id else None
        assert name is None or e["name"] == name, (e, name)
    assert set(work) == set(gk), ("GPU work of an annotation without its slice", set(work) - set(gk))
    inner_gpu = sum(1 for e in ga if e["name"] == "inner")
    assert inner_gpu > 100, inner_gpu
    # A copy follows every 7th launch inside the same inner range: its
    # GPU slice spans kernel and copy, so some are wider than one kernel.
    print("annotations: %d GPU slice(s) with work attributed by launch time in %s" % (len(timed), os.path.basename(path)))
    assert timed, "no work of the helper thread was attributed by its launch time"
    return len(ua), len(ga), len(steps)

e = json.load(open(end))
w = e.get("window_start_unix_ns"), e.get("window_end_unix_ns")
if None in w:
    t = json.load(open(window))["otherData"]
    w = t["window_start_unix_ns"], t["window_end_unix_ns"]
nu, ng, ns_ = check(window, w)
t = json.load(open(window))
clipped = [x for x in t["traceEvents"] if x.get("cat") == "user_annotation" and x["args"].get("clipped")]
# Whether a step straddles an edge depends on when the window's ENABLE
# reaches the shim (late on a slow, sanitized run): the clipping itself is
# checked exactly in test-trace; here it is reported.
print("annotations: %d range(s) clipped at the window's edges" % len(clipped))
print("window: %d user_annotation, %d gpu_user_annotation, %d steps, %d clipped" % (nu, ng, ns_, len(clipped)))
nu2, ng2, ns2 = check(decoded, None)
assert nu2 >= nu and ns2 >= ns_, (nu2, nu)
print("decode: %d user_annotation, %d gpu_user_annotation, %d steps" % (nu2, ng2, ns2))
s = json.load(open(status))["sessions"]
assert len(s) == 2, s          # the workloads linger: still connected
# A push and a pop per range, less the pops of ranges still open at the
# window's end (clipped there: status was read before they came).
assert sum(x.get("annotation_ranges", 0) for x in s) >= 2 * nu - len(clipped), s
assert all(x.get("annotation_ranges_dropped", 0) == 0 for x in s), s
PY
echo ok
