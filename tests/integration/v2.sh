#!/bin/bash
# CUPTI 13.3 and later: the shim as one of several CUPTI subscribers, with
# user-defined records (issue 28), against the test double's documented
# v2 contract (tests/fakecupti/fakecupti-v2.c).
#
# Five jobs under one daemon: CUPTI 13.0 (the global API, as on the H200),
# 13.3 with a second subscriber of its own in the same process (as
# PyTorch's CUPTI monitor), 13.4 with kernel latency timestamps, 13.5, and
# a 14.0 released after this build.  Status says each one's path and bytes
# per kernel record; the second subscriber receives exactly its own
# records; a window (which enables more kinds, so the v2 jobs' layouts
# change mid-session: LAYOUTS) and the offline decode hold every kernel,
# copy and memset of every job exactly once, with the same fields in every
# version, API calls and annotations in the window, queued/submitted where
# asked for.  Then the fallbacks: CUPTI 13.2, a libcupti without the _v2
# entry points, a v2 error, and a first subscriber that allows no other
# land on the global API (or, for the last, cannot trace), each said in
# one line.
. "$top_srcdir/tests/integration/lib.sh"

VERSIONS="130001 130300 130400 130500 140000"
start_daemon --flush-period 0.2
pids=
for v in $VERSIONS; do
    extra= lat=0
    [ "$v" = 130300 ] && extra="--v2-subscriber monitor"
    [ "$v" = 130400 ] && lat=1
    # shellcheck disable=SC2086
    CUPTIMON_KERNEL_LATENCY=$lat FAKECUPTI_VERSION=$v CUPTIMON_LABEL=v$v \
        CUDA_INJECTION64_PATH=$SHIM "$WORKLOAD" \
        --kernels 24000 --rate 3000 --streams 2 --memcpy-every 7 --memset-every 11 \
        --annotate 100 --report "$T/r-$v.json" --linger-ms 60000 $extra 2>"$T/err-$v" &
    pids="$pids $!"
done
# Five connected, each with its bytes per kernel measured: they come from
# a session's first buffer (every 0.2 s), so connected alone is not enough
# (under ASan, status read a 0).
five() { ctl status --json | python3 -c 'import json,sys; s=[s for s in json.load(sys.stdin)["sessions"] if s["connected"]]; sys.exit(not (len(s) == 5 and all(x["record_bytes_per_kernel"] for x in s)))'; }
wait_for 100 five || { ctl status; fail "the 5 workloads did not all connect with their bytes per kernel measured"; }
ctl status --json > "$T/status.json"
ctl status > "$T/status.txt"
ctl metrics > "$T/metrics.txt" || fail "metrics failed"
ctl begin-window --json > "$T/begin.json" || fail "begin-window failed"
sleep 1.5
ctl end-window --json > "$T/end.json" || fail "end-window failed"
ctl status --json > "$T/status-after.json"
# The launches take 8 s; the jobs linger until told (SIGUSR1: a normal exit).
# Told now, each still launches all it was to and then exits: wait below
# waits for that (a fixed 8 s here waited out the launches and then some).
# shellcheck disable=SC2086
kill -USR1 $pids
for p in $pids; do wait "$p" || fail "a workload exited with status $?"; done
stop_daemon
# Nothing about the in-flight view on a job's stderr: on v2 it is by design.
if grep -H 'work in flight\|step over' "$T"/err-*; then
    fail "a job's stderr speaks of the in-flight view"
fi

python3 - "$T/status.json" "$T/status-after.json" "$T/status.txt" "$T/metrics.txt" <<'PY'
import json, sys
st = {s["label"]: s for s in json.load(open(sys.argv[1]))["sessions"]}
after = {s["label"]: s for s in json.load(open(sys.argv[2]))["sessions"]}
txt = open(sys.argv[3]).read()
assert st["v130001"]["path"] == "v1", st["v130001"]
assert st["v130001"]["record_bytes_per_kernel"] == 216, st["v130001"]  # Kernel10
for v in ("v130300", "v130400", "v130500", "v140000"):
    s = st[v]
    assert s["path"] == "v2+udr", (v, s["path"])
    # The fields the decoder reads, in the widths the headers document.
    assert 0 < s["record_bytes_per_kernel"] < 160, (v, s["record_bytes_per_kernel"])
    # The window enabled more kinds: their layouts came in a LAYOUTS.
    assert after[v]["layout_changes"] >= 1, (v, after[v]["layout_changes"])
assert st["v130400"]["record_bytes_per_kernel"] == st["v130300"]["record_bytes_per_kernel"] + 16
# What is in flight: read on v1; on v2 CUPTI describes a buffer's records
# only with the completed buffer, so status says the view is unavailable
# (not "partial", and not "complete" while nothing happens to be held).
assert after["v130001"]["pool"]["in_flight_view"] == "complete", after["v130001"]["pool"]
for v in ("v130300", "v130400", "v130500", "v140000"):
    assert after[v]["pool"]["in_flight_view"] == "unavailable", (v, after[v]["pool"])
assert st["v140000"]["cupti_release"] == "unknown (self-described)", st["v140000"]
assert st["v130400"]["kernel_latency"] is True and st["v130300"]["kernel_latency"] is False
# Why 13.0 is on v1 (said in status only, not on the job's stderr).
assert st["v130001"]["activity_api_note"] == "CUPTI 130001 predates multiple subscribers (13.3)"
assert "v2+udr" in txt and "CUPTI version unknown" not in txt, txt
# The metrics say the same per process.
import re
met = open(sys.argv[4]).read()
for v, want in (("v130001", "v1"), ("v130300", "v2+udr")):
    assert re.search(r'cuptimon_session_info\{[^}]*label="%s",path="%s"\} 1' % (v, re.escape(want)), met), (v, met[:3000])
    assert re.search(r'cuptimon_record_bytes_per_kernel\{[^}]*label="%s"\} %d' %
                     (v, st[v]["record_bytes_per_kernel"]), met), v
print("status: v1 216 bytes a kernel, v2+udr %d (%d with latency)" %
      (st["v130300"]["record_bytes_per_kernel"], st["v130400"]["record_bytes_per_kernel"]))
PY

reports=
for v in $VERSIONS; do reports="$reports $T/r-$v.json"; done
# shellcheck disable=SC2086
python3 "$top_srcdir/tests/integration/check-archive.py" "$CTL" "$T/out" $reports
"$CTL" decode "$T/out" -o "$T/all.json" 2>"$T/decode.err" || { cat "$T/decode.err"; fail "decode failed"; }
grep -q "refused\|undecodable" "$T/decode.err" && { cat "$T/decode.err"; fail "decode refused a layout"; }

# shellcheck disable=SC2086
python3 - "$T/end.json" "$T/all.json" "$T/r-130300.json" $reports <<'PY'
import json, sys, collections
end = json.load(open(sys.argv[1]))
assert end["state"] == "done", end
mon = json.load(open(sys.argv[3]))
reports = {json.load(open(p))["pid"]: p.rsplit("-", 1)[1][:-5] for p in sys.argv[4:]}

# The second subscriber: exactly its own records, each once, as selected.
sub = mon["v2_subscriber"]
assert sub["subscribed"], sub
assert sub["kernels"] == mon["kernels"] and sub["memcpys"] == mon["memcpys"], (sub, mon)
for k in ("foreign", "duplicates", "bad_layout", "bad_name", "outside"):
    assert sub[k] == 0, (k, sub)

def fields(trace):
    out = collections.defaultdict(collections.Counter)
    api = collections.Counter()
    queued = collections.Counter()
    for e in trace["traceEvents"]:
        if e.get("ph") != "X":
            continue
        if e.get("cat") == "cuda_runtime":
            api[e["pid"]] += 1
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        a = e["args"]
        if e["cat"] == "kernel":
            assert not e["name"].startswith("0x"), f"pid {e['pid']}: unresolved name {e['name']}"
            if "queued" in a:
                assert 0 < a["queued"] <= a["submitted"], a
                queued[e["pid"]] += 1
            key = (e["name"], tuple(a["grid"]), tuple(a["block"]), a["registers per thread"],
                   a["dynamic shared memory"], a["stream"], a["device"])
        elif e["cat"] == "gpu_memcpy":
            key = (e["name"], a["bytes"], a["copy kind"], a["stream"], a["device"])
        else:
            key = (e["name"], a["bytes"], a["memory kind"], a["stream"], a["device"])
        out[e["pid"]][(e["cat"],) + key] += 1
    return out, api, queued

for what, path in (("window", end["output"]), ("decode", sys.argv[2])):
    got, api, queued = fields(json.load(open(path)))
    assert set(got) == set(reports), \
        f"{what}: processes {sorted(got)}, want {sorted(reports)}; window: {json.dumps(end)[:1500]}"
    ref = next(p for p, v in reports.items() if v == "130001")
    for pid, v in reports.items():
        diff = set(got[pid]) ^ set(got[ref])
        assert not diff, f"{what}: CUPTI {v} decodes differently from 13.0: {sorted(diff)[:4]}"
        if what == "decode":
            assert got[pid] == got[ref], f"decode: CUPTI {v}: counts differ from 13.0"
        if what == "window":
            # API calls, through the runtime kind the window enabled.
            assert api[pid] > 0, f"window: CUPTI {v}: no runtime API calls"
        # queued/submitted only where asked for (13.4's job).
        assert (queued[pid] > 0) == (v == "130400"), (what, v, queued[pid])
    print(f"{what}: {len(got)} processes, the same fields on the v1 and v2 paths")

# Annotations (external correlation through each path's calls).
w = json.load(open(end["output"]))
ann = collections.Counter(e["pid"] for e in w["traceEvents"]
                          if e.get("cat") == "gpu_user_annotation")
for pid, v in reports.items():
    assert ann[pid] > 0, f"window: CUPTI {v}: no annotated GPU work"
print("annotations: in the window for every path")
PY
for v in $VERSIONS; do
    if grep -q "v2 path is not used" "$T/err-$v"; then cat "$T/err-$v"; fail "CUPTI $v: fell back"; fi
done

# ---- fallbacks: each in one line, the job traced on the global API -------
export CUPTIMON_SOCKET=$T/none.sock
fallback() { # NAME WANT_LINE KERNELS_RECORDED ENV... -- ARGS...
    local name=$1 want=$2 recorded=$3
    shift 3
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" CUDA_INJECTION64_PATH="$SHIM" "$WORKLOAD" --kernels 50 --memcpy-every 0 \
        --memset-every 0 --report "$T/f-$name.json" "$@" 2>"$T/f-$name.err" >/dev/null ||
        fail "$name: the workload failed"
    n=$(grep -c "CUPTI's v2 path is not used" "$T/f-$name.err" || true)
    [ "$n" = 1 ] || { cat "$T/f-$name.err"; fail "$name: $n lines about the v2 path, want 1"; }
    grep -q "CUPTI's v2 path is not used: $want" "$T/f-$name.err" ||
        { cat "$T/f-$name.err"; fail "$name: the line does not say \"$want\""; }
    got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["kernels_recorded"])' "$T/f-$name.json")
    [ "$got" = "$recorded" ] || fail "$name: $got kernels recorded, want $recorded"
}
fallback cupti-13.2 "CUPTI 130201 has multiple subscribers and user-defined records as a beta" \
    50 FAKECUPTI_VERSION=130201 --
fallback v2-error "cuptiSubscribe_v2 failed (CUPTI_ERROR_UNKNOWN)" 50 FAKECUPTI_VERSION=130300 \
    FAKECUPTI_V2_FAIL=subscribe --
fallback no-v2-symbols "$top_builddir/tests/fakecupti/nov2/.libs/libcupti-fake.so (CUPTI 130300) has no cuptiSubscribe_v2" \
    50 FAKECUPTI_VERSION=130300 LD_LIBRARY_PATH="$top_builddir/tests/fakecupti/nov2/.libs" --
# The nov2 library really was the one in the process: it has no _v2 symbol.
nm -D "$top_builddir/tests/fakecupti/nov2/.libs/libcupti-fake.so" | grep -q " T cupti.*_v2$" &&
    fail "the nov2 double exports _v2 entry points"
# An error after cuptimon subscribed: it unsubscribes, and the global API
# is then refused too (v1 and v2 never mix in a process): said, not traced.
fallback udr-error "the user-defined records attribute failed (CUPTI_ERROR_UNKNOWN)" 0 \
    FAKECUPTI_VERSION=130300 FAKECUPTI_V2_FAIL=udr --
grep -q "cuptiActivityRegisterCallbacks failed: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; not tracing" \
    "$T/f-udr-error.err" || { cat "$T/f-udr-error.err"; fail "udr error: not said that cuptimon cannot trace"; }
# A first subscriber that allows no other: CUPTI refuses cuptimon's
# subscriber, and, v1 and v2 not mixing, its global registration too.  The
# job's own subscriber is traced (the double's statistics are its).
fallback state-0 "the process's first CUPTI subscriber allows no other" 50 FAKECUPTI_VERSION=130300 \
    -- --v2-first-disallow alone
grep -q "cuptiActivityRegisterCallbacks failed: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; not tracing" \
    "$T/f-state-0.err" || { cat "$T/f-state-0.err"; fail "state 0: not said that cuptimon cannot trace"; }
# Explicitly v1 (CUPTIMON_CUPTI_API=v1): silent, traced on the global API.
CUPTIMON_CUPTI_API=v1 FAKECUPTI_VERSION=130300 CUDA_INJECTION64_PATH="$SHIM" "$WORKLOAD" \
    --kernels 50 --report "$T/f-v1.json" 2>"$T/f-v1.err" >/dev/null || fail "v1: the workload failed"
grep -q "v2 path" "$T/f-v1.err" && { cat "$T/f-v1.err"; fail "CUPTIMON_CUPTI_API=v1 was not silent"; }

# ---- opt-ins: HES (13.4+, Blackwell, not MIG) and its flush cadence -------
hes() { # NAME WANT_LINE ENV...: WANT_LINE "" means: no HES line, HES on
    local name=$1 want=$2
    shift 2
    env "$@" CUPTIMON_HW_TRACE=1 CUPTIMON_DEBUG=1 CUDA_INJECTION64_PATH="$SHIM" "$WORKLOAD" \
        --kernels 70 --rate 100 --report "$T/h-$name.json" 2>"$T/h-$name.err" >/dev/null ||
        fail "hes $name: the workload failed"
    if [ -n "$want" ]; then
        grep -q "$want" "$T/h-$name.err" || { cat "$T/h-$name.err"; fail "hes $name: not said: $want"; }
    else
        grep -q 'subscribed as "cuptimon" with user-defined records, HES' "$T/h-$name.err" ||
            { cat "$T/h-$name.err"; fail "hes $name: HES not on"; }
    fi
}
hes 13.3 "HES is not turned on with CUPTI 130300: 13.4 fixed a host heap corruption" \
    FAKECUPTI_VERSION=130300
hes hopper "CUPTI refused HES (CUPTI_ERROR_NOT_SUPPORTED)" FAKECUPTI_VERSION=130400
hes mig "CUPTI refused HES (CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED)" FAKECUPTI_VERSION=130400 \
    FAKECUPTI_HW_TRACE=mig
hes v1 "apply on CUPTI's v2 path only" FAKECUPTI_VERSION=130001
hes blackwell "" FAKECUPTI_VERSION=130400 FAKECUPTI_HW_TRACE=1
# With HES, plain flushes every 100 ms (0.7 s of launches) without a daemon (the 128 MB
# hardware buffer must not fill); without it, only the exit's.
python3 - "$T/h-blackwell.json" "$T/h-hopper.json" <<'PY'
import json, sys
on, off = (json.load(open(p))["flushes"] for p in sys.argv[1:])
assert on >= 4 and off <= 2, (on, off)
print(f"hes: {on} flushes in 0.7 s of launches with HES, {off} without")
PY
echo "ok"
