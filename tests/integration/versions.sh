#!/bin/bash
# Every CUPTI a node runs, under one daemon: five jobs whose libcupti (the
# double, told which release to be) reports the CUPTI API version of CUDA
# 12.0 (18, which 12.1 and 11.8 report too: tests/integration/layouts.sh),
# 12.8, 13.0, 13.1 and 13.4 and writes that release's record layouts
# (Kernel9 / Memcpy5, Kernel9 / Memcpy6, Kernel10, Kernel11, Kernel13 /
# Memcpy7 / Memset5; 13.4's unverified, confirmed by the per-session check).
# One window over all of them and the offline decode of each session must
# hold every kernel, copy and memset exactly once, with demangled names,
# and with the same launch configuration, stream, bytes and copy kind in
# every version (the jobs launch the same work, so any field read at a
# wrong offset in one version shows as a difference).  Then a job whose
# CUPTI reports a version no release in the table claims: archived, not
# decoded, and status and decode say so.  All on the global (v1) activity
# API: 13.3+ on the v2 path is tests/integration/v2.sh's.
. "$top_srcdir/tests/integration/lib.sh"

VERSIONS="18 26 130001 130100 130400"
start_daemon --flush-period 0.2
pids=
i=0
for v in $VERSIONS; do
    CUPTIMON_CUPTI_API=v1 FAKECUPTI_VERSION=$v CUPTIMON_LABEL=v$v workload --kernels 24000 --rate 4000 --streams 2 \
        --memcpy-every 7 --memset-every 11 --report "$T/r-$v.json" --linger-ms 1000 &
    pids="$pids $!"
    i=$((i + 1))
done
five() { [ "$(ctl status --json | python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin)["sessions"] if s["connected"]))')" = 5 ]; }
wait_for 100 five || { ctl status; fail "the 5 workloads did not all connect"; }
# ... and 13.4's first buffers measured (status then names its check); the
# status read here is the one checked (a session could end in between).
measured() {
    ctl status --json > "$T/status.json"
    python3 -c 'import json,sys; ss=[s for s in json.load(open(sys.argv[1]))["sessions"] if s["connected"]]; sys.exit(0 if len(ss) == 5 and any(s["layout_unverified"] for s in ss) else 1)' "$T/status.json"
}
wait_for 100 measured || { cat "$T/status.json"; fail "13.4's records were never measured"; }

# status names each session's release.
python3 - "$T/status.json" <<'PY'
import json, sys
want = {"v18": "12.0-12.1", "v26": "12.8-12.9", "v130001": "13.0", "v130100": "13.1-13.2",
        "v130400": "13.4"}
ss = json.load(open(sys.argv[1]))["sessions"]
got = {s["label"]: s["cupti_release"] for s in ss}
assert got == want, f"status: releases {got}, want {want}"
# 13.4's structs are unverified (no header-derived source), and status says
# so, with the check's verdict; no other release's are.
for s in ss:
    u = s["layout_unverified"]
    if s["label"] != "v130400":
        assert u == [], s
    else:
        assert any("CUpti_ActivityKernel13 is unverified" in x and "confirmed by this libcupti"
                   in x for x in u), u
PY

ctl begin-window --json > "$T/begin.json" || fail "begin-window failed"
sleep 1.5
ctl end-window --json > "$T/end.json" || fail "end-window failed"
for p in $pids; do wait "$p" || fail "a workload exited with status $?"; done
stop_daemon

reports=
for v in $VERSIONS; do reports="$reports $T/r-$v.json"; done
# shellcheck disable=SC2086
python3 "$top_srcdir/tests/integration/check-archive.py" "$CTL" "$T/out" $reports

# The window and the offline decode: the same fields in every version.
"$CTL" decode "$T/out" -o "$T/all.json" 2>"$T/decode.err" || { cat "$T/decode.err"; fail "decode failed"; }
# shellcheck disable=SC2086
python3 - "$T/end.json" "$T/all.json" $reports <<'PY'
import json, sys, collections
end = json.load(open(sys.argv[1]))
assert end["state"] == "done", end
reports = {json.load(open(p))["pid"]: p.rsplit("-", 1)[1][:-5] for p in sys.argv[3:]}

def fields(trace):
    """pid -> set of (category, name, configuration) tuples."""
    out = collections.defaultdict(collections.Counter)
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        a = e["args"]
        if e["cat"] == "kernel":
            assert not e["name"].startswith("0x"), f"pid {e['pid']}: unresolved kernel name {e['name']}"
            key = (e["name"], tuple(a["grid"]), tuple(a["block"]), a["registers per thread"],
                   a["dynamic shared memory"], a["stream"], a["device"])
        elif e["cat"] == "gpu_memcpy":
            key = (e["name"], a["bytes"], a["copy kind"], a["stream"], a["device"])
        else:
            key = (e["name"], a["bytes"], a["memory kind"], a["stream"], a["device"])
        out[e["pid"]][(e["cat"],) + key] += 1
    return out

for what, path in (("window", end["output"]), ("decode", sys.argv[2])):
    got = fields(json.load(open(path)))
    assert set(got) == set(reports), \
        f"{what}: processes {sorted(got)}, want {sorted(reports)}; window: {json.dumps(end)[:2000]}"
    # Every version's distinct (category, name, fields) tuples are the same
    # set: the jobs launch the same work.
    ref_pid = next(p for p, v in reports.items() if v == "130001")
    ref = set(got[ref_pid])
    for pid, v in reports.items():
        diff = set(got[pid]) ^ ref
        assert not diff, f"{what}: CUPTI {v} decodes differently from 13.0: {sorted(diff)[:4]}"
    if what == "decode":
        # The full decode holds the same counts for every version.
        for pid, v in reports.items():
            assert got[pid] == got[ref_pid], f"decode: CUPTI {v}: counts differ from 13.0"
    n = sum(sum(c.values()) for c in got.values())
    print(f"{what}: {len(got)} processes on 5 CUPTI releases, {n} GPU records, the same fields in each")
PY

# A CUPTI this build does not know: archived, not decoded, and said so.
mv "$T/out" "$T/out-known"
start_daemon --flush-period 0.2
# (On the global activity API: a 14.0 on CUPTI's v2 path describes its
# records itself and decodes, which tests/integration/v2.sh shows.)
CUPTIMON_CUPTI_API=v1 FAKECUPTI_VERSION=140000 CUPTIMON_LABEL=future spawn_workload --kernels 3000 --rate 20000 \
    --report "$T/r-future.json" --linger-ms 4000 2>"$T/future.err"
fp=$SPAWNED
one() { ctl status --json | python3 -c 'import json,sys; sys.exit(0 if any(s["connected"] for s in json.load(sys.stdin)["sessions"]) else 1)'; }
wait_for 100 one || fail "the 14.0 workload did not connect"
# The job lingers 4 s: status is read while it is still connected, even on
# a loaded machine.
ctl status > "$T/status-future.txt"
grep -q "CUPTI version unknown to this build" "$T/status-future.txt" || { cat "$T/status-future.txt"; fail "status does not say the version is unknown"; }
# Read: SIGUSR1 ends the linger (a normal exit, after all its launches).
kill -USR1 "$fp" 2>/dev/null || true
wait "$fp" || fail "the 14.0 workload failed"
stop_daemon
grep -q "CUPTI API version 140000 (.*) is not one this build knows" "$T/future.err" ||
    { cat "$T/future.err"; fail "the shim did not say the version is unknown"; }
grep -q "session 1 (pid [0-9]*): CUPTI API version 140000 is not one this build decodes" "$T/daemon.log" ||
    fail "the daemon did not log the unknown version"
"$CTL" decode "$T/out" -o "$T/future.json" --summary-out "$T/future-summary.json" 2>"$T/future-decode.err" ||
    { cat "$T/future-decode.err"; fail "decode of the unknown version failed"; }
grep -q "CUPTI API version 140000 is not one this build decodes (it decodes CUDA 12.0" "$T/future-decode.err" ||
    { cat "$T/future-decode.err"; fail "decode does not name the unknown version"; }
python3 - "$T/future-summary.json" "$T/r-future.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
rep = json.load(open(sys.argv[2]))
assert rep["kernels_recorded"] == 3000, rep
# Nothing decoded; every byte kept and counted as undecodable.
assert s["undecodable"]["bytes"] > 3000 * 200, s["undecodable"]
print(f"unknown version: {s['undecodable']['bytes']} bytes archived, undecodable, reported")
PY
echo "ok"
