#!/bin/bash
# Traces for Kineto's multi-rank tools (issue 18): window_gzip_level and
# begin-window --gzip (window traces as .json.gz), checked on a window over
# two test-double processes on ranks 0 and 1, and decode --split: one
# complete trace per rank (or process), as HTA reads a job, each with its
# own distributedInfo, deviceProperties and process metadata.
. "$top_srcdir/tests/integration/lib.sh"
REF=$top_srcdir/tests/data/kineto-ref/torch-2.11-h200.json.gz
CHECK=$top_srcdir/tests/integration/kineto-check.py

# The key is range-checked like every other, naming itself and the value.
echo '{"window_gzip_level": 10}' >"$T/bad.conf"
set +e
out=$("$CUPTIMOND" --config "$T/bad.conf" --check-config 2>&1); rc=$?
set -e
[ $rc -ne 0 ] || fail "window_gzip_level 10 was accepted: $out"
echo "$out" | grep -q "window_gzip_level: 10 is not a whole number in 0..9" ||
    fail "the refusal does not name window_gzip_level and 10: $out"
echo '{"window_per_process": 3}' >"$T/bad.conf"
set +e
out=$("$CUPTIMOND" --config "$T/bad.conf" --check-config 2>&1); rc=$?
set -e
[ $rc -ne 0 ] && echo "$out" | grep -q "window_per_process" || fail "window_per_process 3 was not refused by name: $out"
echo '{"window_gzip_level": 6}' >"$T/gz.conf"
"$CUPTIMOND" --config "$T/gz.conf" --check-config | grep -q '"window_gzip_level": 6' ||
    fail "--check-config does not show window_gzip_level 6"

start_daemon --config "$T/gz.conf" --flush-period 0.3
for r in 0 1; do
    # spawn_workload: $SPAWNED is the workload's own pid, which the kill
    # below must reach (a backgrounded function's $! is a subshell's: killed,
    # it left the workload running its 400 s beside the tests that follow).
    # 1000 launches a second (an annotation every 40: 25 a second, as
    # before at 5000 and 200) fill each window with hundreds of kernels;
    # the decodes below read all they sent, five times as much at 5000.
    RANK=$r WORLD_SIZE=2 CUPTIMON_LABEL=ranks spawn_workload --kernels 2000000 --rate 1000 --threads 2 \
        --annotate 40 --report "$T/r$r.json" --quiet
    eval "p$r=\$SPAWNED"
done
two() { [ "$(ctl status --json | python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin)["sessions"] if s["connected"]))')" = 2 ]; }
wait_for 100 two || fail "the two ranks did not connect"
sleep 0.3

# window N: OPTIONS...; prints the trace path.
window() {
    ctl begin-window --label ranks --activities kernel,memcpy,memset,runtime,external_correlation \
        "$@" --json >"$T/begin.json" || fail "begin-window $* failed"
    sleep 0.4
    ctl end-window --json >"$T/end.json" || fail "end-window failed after begin-window $*"
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["output"])' "$T/end.json"
}

# The configured level: the default name ends in .json.gz and is gzip.
tr=$(window)
case "$tr" in *.json.gz) ;; *) fail "window_gzip_level 6: the trace is $tr, not .json.gz" ;; esac
gzip -t "$tr" || fail "$tr is not gzip"
python3 "$CHECK" "$REF" "$tr" --ranks 2 || fail "the gzipped window trace is not in Kineto's dialect"
# Level 6 is not level 1: gzip's header says which (XFL 2 = best-ish, 4 = fastest).
python3 - "$tr" <<'PY' || fail "the trace was not written at the configured level"
import sys
h = open(sys.argv[1], "rb").read(10)
assert h[:2] == b"\x1f\x8b" and h[8] == 0, ("gzip header", h)  # level 6: XFL 0
print("window: gzip at the configured level (XFL %d)" % h[8])
PY
# --per-process: beside the trace, one complete trace per process, named by
# its rank, listed in the answer.
tr=$(window --per-process)
python3 - "$T/end.json" "$tr" "$WORKLOAD" <<'PY' || fail "--per-process did not write the processes' own traces"
import gzip, json, os, re, sys
end, combined, exe = json.load(open(sys.argv[1])), sys.argv[2], os.path.basename(sys.argv[3])
pts = end["process_traces"]
assert sorted(p["rank"] for p in pts) == [0, 1], pts
assert end["summary"]["process_traces"] == pts
base = combined[:-len(".json.gz")]
for p in pts:
    assert p["path"] == "%s.rank-%d.json.gz" % (base, p["rank"]), (p, base)
    text = gzip.open(p["path"], "rt").read()
    t = json.loads(text)
    assert t["distributedInfo"] == {"rank": p["rank"], "world_size": 2}, t["distributedInfo"]
    assert int(re.search(r'"rank":\s+(\d+)', text).group(1)) == p["rank"]
    assert [q["pid"] for q in t["otherData"]["processes"]] == [p["pid"]]
    assert t["deviceProperties"] and t["traceName"] == p["path"]
    names = [e["args"]["name"] for e in t["traceEvents"] if e.get("name") == "process_name"]
    assert names == ["%s rank %d (ranks)" % (exe, p["rank"])], names
    assert t["otherData"]["window"] == end["window"]
    print("window --per-process: rank %d: %d events" % (p["rank"], len(t["traceEvents"])))
PY
for p in $(python3 -c 'import json,sys; print(" ".join(p["path"] for p in json.load(open(sys.argv[1]))["process_traces"]))' "$T/end.json"); do
    python3 "$CHECK" "$REF" "$p" || fail "$p is not in Kineto's dialect"
done
# --gzip 0 for one window: plain JSON, named .json.
tr=$(window --gzip 0)
case "$tr" in *.json) ;; *) fail "--gzip 0: the trace is $tr, not .json" ;; esac
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tr" || fail "--gzip 0 did not write plain JSON"
# --gzip 1: XFL 4 (fastest).
tr=$(window --gzip 1)
python3 -c 'import sys; h=open(sys.argv[1],"rb").read(10); assert h[:2]==b"\x1f\x8b" and h[8]==4, h' "$tr" ||
    fail "--gzip 1 did not write gzip at level 1"
# An --output path decides by its name.
tr=$(window --gzip 0 --output "$T/mine.json.gz")
[ "$tr" = "$T/mine.json.gz" ] && gzip -t "$tr" || fail "--output mine.json.gz was not written gzipped"
tr=$(window --output "$T/mine.json")
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tr" || fail "--output mine.json is not plain JSON"
# A bad level is refused by name.
set +e
out=$(ctl begin-window --label ranks --gzip 10 2>&1); rc=$?
set -e
[ $rc = 2 ] && echo "$out" | grep -q -- "--gzip '10' is not a level" || fail "--gzip 10: rc $rc: $out"

# The workloads run far longer than the windows need (on a busy machine the
# windows take long): stop them; what they sent is archived.
kill -TERM "$p0" "$p1"
wait "$p0" "$p1" || true
# A third process without a rank, twice the same pid would need pid reuse:
# one unranked process is enough to show its own file.
CUPTIMON_LABEL=solo workload --kernels 200 --quiet || fail "the unranked workload failed"
ctl flush >/dev/null || fail "flush failed"
stop_daemon

# checksplit DIR FILE... : each FILE in DIR is a complete Kineto trace of
# the processes its name says, and DIR holds nothing else.
checksplit() {
    local dir=$1; shift
    [ "$(cd "$dir" && ls | sort | tr '\n' ' ')" = "$* " ] ||
        fail "$dir holds $(ls "$dir" | tr '\n' ' '), not $*"
    python3 - "$dir" "$WORKLOAD" "$@" <<'PY' || fail "a --split file is not the trace of its rank or process"
import gzip, json, os, re, sys
d, exe = sys.argv[1], os.path.basename(sys.argv[2])
for f in sys.argv[3:]:
    text = gzip.open(os.path.join(d, f), "rt").read()
    t = json.loads(text)
    procs = t["otherData"]["processes"]
    di = t["distributedInfo"]
    m = re.match(r"rank-(\d+)\.json\.gz$", f)
    if m:
        r = int(m.group(1))
        assert [p["rank"] for p in procs] == [r], (f, procs)
        assert di == {"rank": r, "world_size": 2}, (f, di)
        # HTA's pattern finds this file's rank first.
        assert int(re.search(r'"rank":\s+(\d+)', text).group(1)) == r, f
        want = "%s rank %d (ranks)" % (exe, r)
    else:
        pid = int(re.match(r"pid-(\d+)\.json\.gz$", f).group(1))
        assert [p["pid"] for p in procs] == [pid], (f, procs)
        want = "%s rank %d (ranks)" % (exe, procs[0]["rank"]) if "rank" in procs[0] else "%s (solo)" % exe
        if "rank" not in procs[0]:
            assert di == {"rank": 0, "world_size": 1}, (f, di)
    assert [e["args"]["name"] for e in t["traceEvents"] if e.get("name") == "process_name"] == [want], f
    assert [x["id"] for x in t["deviceProperties"]] == list(range(len(t["deviceProperties"]))) and t["deviceProperties"], f
    assert t["traceName"] == os.path.join(d, f), (t["traceName"], f)
    assert isinstance(t["baseTimeNanoseconds"], int)
    n = sum(1 for e in t["traceEvents"] if e.get("cat") == "kernel")
    assert n > 0, f
    print("split: %s: %s, %d kernels, %d device(s)" % (f, di, n, len(t["deviceProperties"])))
PY
}
"$CTL" decode "$T/out" --split rank -o "$T/byrank" 2>"$T/split.err" || fail "decode --split rank failed: $(cat "$T/split.err")"
solo=$(python3 -c 'import json,glob,sys
for m in glob.glob(sys.argv[1] + "/out/archive/*/meta.json"):
    j = json.load(open(m))
    if j["job"].get("label") == "solo": print(j["pid"])' "$T")
[ -n "$solo" ] || fail "no archive session of the unranked process"
checksplit "$T/byrank" pid-$solo.json.gz rank-0.json.gz rank-1.json.gz
for f in rank-0 rank-1; do
    python3 "$CHECK" "$REF" "$T/byrank/$f.json.gz" || fail "$f.json.gz is not in Kineto's dialect"
done
"$CTL" decode "$T/out" --split process --gzip 0 -o "$T/byproc" 2>>"$T/split.err" || fail "decode --split process failed"
[ "$(ls "$T/byproc" | grep -c '^pid-[0-9]*\.json$')" = 3 ] || fail "--split process --gzip 0: $(ls "$T/byproc")"
for f in "$T"/byproc/*.json; do
    python3 -c 'import json,sys; t = json.load(open(sys.argv[1])); assert len(t["otherData"]["processes"]) == 1' "$f" ||
        fail "$f is not plain JSON of one process"
done
set +e
out=$("$CTL" decode "$T/out" --split host -o "$T/x" 2>&1); rc=$?
set -e
[ $rc = 2 ] && echo "$out" | grep -q "'host' is not rank or process" || fail "--split host: rc $rc: $out"
echo ok
