#!/bin/bash
# A trace window keeps exactly PyTorch's set (issue 27) whatever the
# correlation ids are: one window over five workloads whose libcupti double
# numbers as real CUPTI may (kernels, copies and memsets from separate
# ranges; ids out of order; a counter that wraps at 2^32 inside the window;
# API records dropped while their GPU records are kept; runtime records
# before their nested driver records, which start 0.2 ms into them) and one that joins mid-window with
# per-kind ranges.  Each process's trace is checked against what its
# workload launched (its --launch-log: kind, id, times, and which records
# the double wrote or dropped), never against what the writer wrote:
# launched inside with its API record, the work and one launch event are
# there; launched outside, or with its API record dropped, it is not;
# nothing else is; annotations are the launch's own.
. "$top_srcdir/tests/integration/lib.sh"

start_daemon --flush-period 0.3

# 4000 launches/s, a copy after every third and a memset after every
# fourth: about 6300 ids/s, until the test says stop (however slowly a
# loaded machine gets to the window).
run() { # run INDEX [--OPTION=VALUE...] [KNOB=VALUE...]: a workload in the background
    local i=$1 opts=()
    shift
    while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do opts+=("$1"); shift; done
    env "$@" CUPTIMON_LABEL=ids CUDA_INJECTION64_PATH="$SHIM" "$WORKLOAD" --kernels 10000000 \
        --rate 4000 --memcpy-every 3 --memset-every 4 --launch-log "$T/l$i.txt" \
        --report "$T/r$i.json" --stop-file "$T/stop" --quiet "${opts[@]}" &
    pids="$pids $!"
}
connected() {
    [ "$(ctl status --json | python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin)["sessions"] if s["connected"]))')" = "$1" ]
}
pids=
run 0 --annotate=200 FAKECUPTI_CORR_RANGES=1,1000000000,2000000000
run 1 --annotate=200 FAKECUPTI_CORR_SHUFFLE=4096
run 2 --annotate=200 FAKECUPTI_DROP_API=7
# Its runtime calls spend 0.2 ms before their nested driver calls, so that
# the window's start falls between the two calls of some launch (which is
# then not the window's: tests/unit/test-window's driver-inside proves it).
run 3 --annotate=200 FAKECUPTI_API_ORDER=alternate FAKECUPTI_RT_LEAD_NS=200000
# The wrapping counter starts launching when the window has started, 5000
# ids (about 0.8 s) before 2^32, so that it wraps inside (checked below).
run 4 --annotate=200 --wait-file="$T/go" FAKECUPTI_CORR_START=$((4294967295 - 5000))
wait_for 300 connected 5 || fail "the workloads did not all connect"
ctl begin-window --label ids --json >"$T/begin.json" || fail "begin-window failed"
touch "$T/go"
sleep 0.8
# The joiner: per-kind ranges, its first launches before the window's API
# kinds reach it.
run 5 FAKECUPTI_CORR_RANGES=1,1000000000,2000000000
sleep 1.2
end_req_ns=$(date +%s%N)
ctl end-window --json >"$T/end.json" || fail "end-window failed"
sleep 0.3 # launches after the end
touch "$T/stop"
for p in $pids; do wait "$p" || fail "a workload failed"; done

if python3 - "$T" "$end_req_ns" <<'PY'
import collections, json, sys
T, end_req = sys.argv[1], int(sys.argv[2])
end = json.load(open(f"{T}/end.json"))
assert end["state"] == "done", end
start_ns, end_ns = end["start_unix_ns"], end["end_unix_ns"]
trace = json.load(open(end["output"]))
base = trace["otherData"]["base_unix_ns"]
names = ["per-kind ranges", "shuffled", "API records dropped", "driver/runtime order",
         "wraps at 2^32", "joined, per-kind ranges"]
GPU = {"kernel": "K", "gpu_memcpy": "C", "gpu_memset": "S"}
RT, DRV, EXT = 2, 4, 8
DROPPED = 8
events = collections.defaultdict(list)
for e in trace["traceEvents"]:
    if e.get("ph") == "X":
        events[e["pid"]].append(e)
procs = {p["pid"] for p in end["summary"]["processes"]}
bad = []
orphan_ids = {}
for i, name in enumerate(names):
    rep = json.load(open(f"{T}/r{i}.json"))
    pid = rep["pid"]
    assert pid in procs, f"{name}: pid {pid} is not in the window"
    launches = {}
    step = -1
    for line in open(f"{T}/l{i}.txt"):
        kind, corr, before, after, bits = line.split()
        corr, before, after, bits = int(corr), int(before), int(after), int(bits)
        if kind == "K":
            step += 1
        assert corr != 0, f"{name}: the double handed out correlation id 0"
        assert corr not in launches, f"{name}: correlation id {corr} handed out twice"
        launches[corr] = (kind, before, after, bits, step // 200)
    gpu, api, ann = {}, collections.Counter(), {}
    for e in events[pid]:
        c = e["args"].get("correlation")
        if e["cat"] in GPU:
            if c == 0:
                continue
            l = launches.get(c)
            assert l and l[0] == GPU[e["cat"]], f"{name}: {e['cat']} {c} was never launched"
            assert c not in gpu, f"{name}: {e['cat']} {c} written twice"
            gpu[c] = e
            ann[c] = e["args"].get("annotation")
        elif e["cat"] in ("cuda_runtime", "cuda_driver"):
            api[c] += 1
    twice = [c for c, n in api.items() if n > 1]
    if twice:
        bad.append(f"{name}: {len(twice)} correlation ids have two launch events, e.g. {twice[0]}")
    must, mustnot, noapi_inside = set(), set(), set()
    for c, (kind, before, after, bits, st) in launches.items():
        inside = before >= start_ns and after <= end_req - 20_000_000
        if bits & RT and inside:
            must.add(c)
        if after < start_ns or before > end_ns or bits & (RT << DROPPED):
            mustnot.add(c)
        # Without its API record (the window's kinds not on yet, or off
        # again) no id of the window is its: PyTorch's set leaves it out.
        if i != 5 and not bits & RT:
            mustnot.add(c)
        # The joiner's work from before the window's API kinds reached it
        # has no API record: kept when it starts inside (it starts at most
        # a few ms after its launch).
        if i == 5 and not bits & (RT | DRV | (RT << DROPPED)) and inside:
            noapi_inside.add(c)
    missing = must - set(gpu)
    if missing:
        c = min(missing)
        bad.append(f"{name}: {len(missing)} of {len(must)} launches made inside the window are "
                   f"missing, e.g. {launches[c][0]} {c}")
    nolaunch = [c for c in must if api[c] == 0]
    if nolaunch:
        bad.append(f"{name}: {len(nolaunch)} launches made inside have no launch event")
    extra = set(gpu) & mustnot
    if extra:
        c = min(extra)
        kind, before, after, bits, _ = launches[c]
        why = "its API record dropped" if bits & (RT << DROPPED) else \
              "it has no API record" if not bits & RT and start_ns <= after and before <= end_ns else \
              f"launched {(start_ns - after) / 1e6:.1f} ms before the start" if after < start_ns else \
              f"launched {(before - end_ns) / 1e6:.1f} ms after the end"
        bad.append(f"{name}: {len(extra)} kept that PyTorch's set leaves out, e.g. {kind} {c} ({why})")
    orphans = [c for c in gpu if api[c] == 0 and not (i == 5 and not launches[c][3] & (RT | DRV))]
    if orphans:
        bad.append(f"{name}: {len(orphans)} GPU work kept without its launch")
        # What the next engineer needs to explain it (it failed once in CI
        # under ASan with nothing kept): each orphan's launch as the double
        # logged it, its GPU event, and (below, from the whole archive)
        # every record with its id.
        for c in sorted(orphans)[:3]:
            kind, before, after, bits, _ = launches[c]
            e = gpu[c]
            bad.append(f"  orphan {kind} {c}: bits {bits:#x}, launched {(before - start_ns) / 1e6:.3f}.."
                       f"{(after - start_ns) / 1e6:.3f} ms after the start, window {(end_ns - start_ns) / 1e6:.3f} ms;"
                       f" its {e['cat']} at ts {e['ts']} dur {e.get('dur')} (trace base {base})")
        orphan_ids[pid] = sorted(orphans)
    if i == 5:
        lost = noapi_inside - set(gpu)
        if lost:
            bad.append(f"joiner: {len(lost)} of {len(noapi_inside)} launches made before its API "
                       f"kinds were on, inside the window, are missing")
        print(f"joiner: {len(noapi_inside)} launches inside before its API kinds were on, kept")
    if i == 4:
        ids = [c for c in must]
        lo, hi = sum(c < 2**31 for c in ids), sum(c >= 2**31 for c in ids)
        assert lo and hi, f"the wrap fell outside the window ({lo} ids below 2^31, {hi} above): the test is mis-timed"
    if i < 5:
        named = [c for c in must if ann.get(c)]
        wrong = [c for c in named if ann[c] != f"step {launches[c][4]}"]
        if wrong:
            bad.append(f"{name}: {len(wrong)} launches carry another launch's annotation")
        if len(named) < 0.5 * len(must):
            bad.append(f"{name}: only {len(named)} of {len(must)} launches carry their annotation")
    assert len(must) > 1000, f"{name}: only {len(must)} launches inside the window: mis-timed"
    print(f"{name}: {len(gpu)} GPU records kept, {len(must)} required, "
          f"{len(mustnot & set(launches))} excluded launches checked")
if orphan_ids:
    json.dump(orphan_ids, open(f"{T}/orphans.json", "w"))
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("window ids: ok")
PY
then :; else
    # Every record of the orphans' ids in the whole archive (the window
    # keeps a subset): which API records CUPTI's double wrote for them and
    # when, against the window's ends.
    if [ -s "$T/orphans.json" ]; then
        ctl flush >/dev/null 2>&1 || true
        "$CTL" decode "$T/out" -o "$T/all.json" 2>"$T/decode.err" || cat "$T/decode.err"
        python3 - "$T" <<'PY' || true
import json, sys
T = sys.argv[1]
ids = json.load(open(f"{T}/orphans.json"))
end = json.load(open(f"{T}/end.json"))
tr = json.load(open(f"{T}/all.json"))
base = tr["otherData"].get("base_unix_ns", 0)
print(f"window [{end['start_unix_ns']}, {end['end_unix_ns']}] unix ns; decode base {base}")
shown = 0
for pid, cs in ids.items():
    want = set(cs[:3])
    for e in tr["traceEvents"]:
        if e.get("pid") == int(pid) and e.get("args", {}).get("correlation") in want and shown < 30:
            shown += 1
            print(f"  pid {pid} corr {e['args']['correlation']}: {e.get('cat')} {e.get('name')!r} "
                  f"ph {e.get('ph')} ts {e.get('ts')} dur {e.get('dur')}")
PY
    fi
    fail "window ids (the test's files are kept in $T)"
fi
stop_daemon
echo "ok"
