#!/bin/bash
# The record layouts after CUDA 13.0, and the per-session check that keeps
# a wrong layout table from mis-stepping (issue 30), with the libcupti
# double writing the header-derived structs (tests/fakecupti/cupti-future.h:
# Kernel11 224 bytes, Kernel12 232):
#  1. jobs on CUDA 12.0 and 12.1 (whose CUPTI reports 18, as 11.8 does),
#     13.1, 13.2 (with cuptiActivityGetStructSize) and 13.3 under one daemon:
#     the offline decode holds every kernel (by name), copy and memset
#     exactly once; status names each release and shows the check confirmed
#     the table (no mismatch); meta.json keeps the measured sizes (all on
#     the global activity API: 13.3 on the v2 path is v2.sh's);
#  2. a deliberately wrong table entry (the test hook
#     CUPTIMON_TEST_LAYOUT_SIZE: CUDA 13.1's kernel as 216 bytes, the size
#     NVIDIA's reference pages suggest) in the daemon and cuptimonctl: the
#     check catches it, status and the log say "layout mismatch: kind 10,
#     table 216 bytes, CUPTI 224", the kernels are walked by CUPTI's size
#     and counted as unknown_layout, never mis-stepped (every copy and
#     memset after them decodes, no buffer is cut short), and the summary
#     names the cause;
#  3. CUDA 11.8 (CUPTI 18 too, Kernel8 of 200 bytes): told apart from 12.0
#     by its kernel record; nothing of it is decoded as 12.0's, nothing is
#     cut short, status and decode say why.
. "$top_srcdir/tests/integration/lib.sh"

# ---- 1. every 13.1-13.3 release, and 12.0/12.1 at version 18 ------------
RELEASES="12.0 12.1 13.1 13.2 13.3"
start_daemon --flush-period 0.2
pids=
for r in $RELEASES; do
    # The API kinds always on too, so that their records are measured.
    CUPTIMON_ACTIVITIES=kernel,memcpy,memset,runtime,driver \
        CUPTIMON_CUPTI_API=v1 FAKECUPTI_CUDA=$r CUPTIMON_LABEL=cuda$r spawn_workload --kernels 6000 --rate 4000 --streams 2 \
        --memcpy-every 7 --memset-every 11 --report "$T/r-$r.json" --linger-ms 4000
    pids="$pids $SPAWNED"
done
# Connected, and each one's kernel, copy, memset, driver and runtime
# records measured (kinds 10, 1, 2, 4, 5): they come with its first buffers.
measured() { ctl status --json | python3 -c '
import json, sys
ss = [s for s in json.load(sys.stdin)["sessions"] if s["connected"]]
sys.exit(0 if len(ss) == 5 and all(
    set(s["layout_checked"] + [int(m.split()[3].rstrip(",")) for m in s["layout_mismatch"]])
    >= {10, 1, 2, 4, 5} for s in ss) else 1)'; }
wait_for 200 measured || { ctl status --json; fail "the 5 workloads were not all connected and measured"; }
ctl status --json > "$T/status.json"
ctl status > "$T/status.txt"
# Seen: SIGUSR1 ends their linger (each still launches all it was to).
for p in $pids; do kill -USR1 "$p" 2>/dev/null || true; done
for p in $pids; do wait "$p" || fail "a workload exited with status $?"; done
stop_daemon

python3 - "$T/status.json" <<'PY'
import json, sys
want = {"cuda12.0": ("12.0-12.1", 18), "cuda12.1": ("12.0-12.1", 18),
        "cuda13.1": ("13.1-13.2", 130100), "cuda13.2": ("13.1-13.2", 130200),
        "cuda13.3": ("13.3", 130300)}
for s in json.load(open(sys.argv[1]))["sessions"]:
    rel, ver = want[s["label"]]
    assert (s["cupti_release"], s["cupti_version"]) == (rel, ver), s
    assert s["layout_mismatch"] == [], s
    assert "release_refuted" not in s, s
    # The kernel, copy, memset and API records' sizes were measured and
    # agree with the table: CONCURRENT_KERNEL 10, MEMCPY 1, MEMSET 2, DRIVER
    # 4, RUNTIME 5.
    for k in (10, 1, 2, 4, 5):
        assert k in s["layout_checked"], (k, s)
print("status: 5 releases named, every measured layout agrees with the table")
PY
grep -q "layout mismatch" "$T/status.txt" && { cat "$T/status.txt"; fail "status shows a mismatch"; }

reports=
for r in $RELEASES; do reports="$reports $T/r-$r.json"; done
# shellcheck disable=SC2086
python3 "$top_srcdir/tests/integration/check-archive.py" "$CTL" "$T/out" $reports

# meta.json keeps what was measured, and how.
python3 - "$T/out" <<'PY'
import glob, json, os, sys
want = {"cuda12.0": 208, "cuda12.1": 208, "cuda13.1": 224, "cuda13.2": 224, "cuda13.3": 232}
seen = {}
for m in glob.glob(os.path.join(sys.argv[1], "archive", "*", "meta.json")):
    meta = json.load(open(m))
    label = meta["job"]["label"]
    assert meta["record_sizes_measured"]["10"] == want[label], (label, meta["record_sizes_measured"])
    assert meta["record_sizes"]["10"] == want[label], (label, meta["record_sizes"])
    # 13.2 and later say their sizes themselves (cuptiActivityGetStructSize),
    # the others are measured by the stride of CUPTI's walk.
    by = meta["record_sizes_by"]["10"]
    assert by == ("struct_size" if label in ("cuda13.2", "cuda13.3") else "stride"), (label, by)
    seen[label] = meta["record_sizes_measured"]["10"]
assert seen == want, seen
print("meta.json: measured kernel sizes", seen)
PY

# ---- 2. a wrong table entry is caught --------------------------------------
mv "$T/out" "$T/out-releases"
: > "$T/daemon.log"
# The daemon's and cuptimonctl's table is wrong; the shim's is not (a
# wrong entry there would only cost that kind's names: the shim reads a
# name only from a record of its table's size, and counts the others).
CUPTIMON_TEST_LAYOUT_SIZE=130100:10:216 start_daemon --flush-period 0.2
CUPTIMON_CUPTI_API=v1 FAKECUPTI_CUDA=13.1 CUPTIMON_LABEL=wrong spawn_workload --kernels 6000 --rate 4000 --streams 2 \
    --memcpy-every 7 --memset-every 11 --report "$T/r-wrong.json" --linger-ms 4000
wp=$SPAWNED
shows_mismatch() {
    ctl status > "$T/status-wrong.txt"
    grep -q "layout mismatch: kind 10, table 216 bytes, CUPTI 224" "$T/status-wrong.txt"
}
wait_for 100 shows_mismatch || { cat "$T/status-wrong.txt"; fail "status does not show the mismatch"; }
kill -USR1 "$wp" 2>/dev/null || true
wait "$wp" || fail "the 13.1 workload failed"
stop_daemon
grep -q "session 1 (pid [0-9]*): layout mismatch: kind 10, table 216 bytes, CUPTI 224" "$T/daemon.log" ||
    { cat "$T/daemon.log"; fail "the daemon did not log the mismatch"; }
[ "$(grep -c "layout mismatch" "$T/daemon.log")" = 1 ] || { cat "$T/daemon.log"; fail "the mismatch is not logged once"; }

# Decoded by a cuptimonctl with the same wrong table: the kernels are
# counted as unknown layout, everything else decodes, nothing is cut.
CUPTIMON_TEST_LAYOUT_SIZE=130100:10:216 "$CTL" decode "$T/out" -o "$T/wrong.json" \
    --summary-out "$T/wrong-summary.json" 2>"$T/wrong.err" ||
    { cat "$T/wrong.err"; fail "decode failed"; }
grep -q "layout mismatch: kind 10, table 216 bytes, CUPTI 224" "$T/wrong.err" ||
    { cat "$T/wrong.err"; fail "decode does not name the mismatch"; }
grep -q "not decoded, because of: layout mismatch" "$T/wrong.err" ||
    { cat "$T/wrong.err"; fail "decode does not name the cause"; }
python3 - "$T/wrong-summary.json" "$T/wrong.json" "$T/r-wrong.json" <<'PY'
import collections, json, sys
s = json.load(open(sys.argv[1]))
trace = json.load(open(sys.argv[2]))
rep = json.load(open(sys.argv[3]))
u = s["undecodable"]
assert u["unknown_layout_records"] == rep["kernels_recorded"], (u, rep["kernels_recorded"])
assert u["unknown_kind_stops"] == 0 and u["truncated_buffers"] == 0, u
assert u["stops_by_cause"] == {"unknown_version": 0, "layout_mismatch": 0, "unknown_kind": 0}, u
assert u["causes"] == "layout mismatch", u
cats = collections.Counter(e["cat"] for e in trace["traceEvents"] if e.get("ph") == "X")
assert cats["kernel"] == 0, cats
assert cats["gpu_memcpy"] == rep["memcpys_recorded"], (cats, rep)
assert cats["gpu_memset"] == rep["memsets_recorded"], (cats, rep)
print(f"wrong table: {u['unknown_layout_records']} kernels counted as unknown layout, "
      f"{cats['gpu_memcpy']} copies and {cats['gpu_memset']} memsets decoded, nothing cut short")
PY
# The archive itself is right: a cuptimonctl with the right table decodes
# every record of it, names included.
python3 "$top_srcdir/tests/integration/check-archive.py" "$CTL" "$T/out" "$T/r-wrong.json"

# ---- 3. CUDA 11.8: version 18 too, told apart ----------------------------
mv "$T/out" "$T/out-wrong"
: > "$T/daemon.log"
start_daemon --flush-period 0.2
FAKECUPTI_CUDA=11.8 CUPTIMON_LABEL=cuda11.8 spawn_workload --kernels 3000 --rate 4000 \
    --memcpy-every 7 --report "$T/r-118.json" --linger-ms 4000
op=$SPAWNED
refuted() {
    ctl status > "$T/status-118.txt"
    grep -q "CUPTI API version 18 is 12.0-12.1's and 11.8's; the measured record sizes are not 12.0-12.1's: CUDA 11.8, not decoded" "$T/status-118.txt"
}
wait_for 100 refuted || { cat "$T/status-118.txt"; fail "status does not tell 11.8 apart"; }
kill -USR1 "$op" 2>/dev/null || true
wait "$op" || fail "the 11.8 workload failed"
stop_daemon
grep -q "CUPTI API version 18 is reported by CUDA 12.0-12.1 and by 11.8, and its measured record sizes are not 12.0-12.1's" "$T/daemon.log" ||
    { cat "$T/daemon.log"; fail "the daemon did not log it"; }
"$CTL" decode "$T/out" -o "$T/118.json" --summary-out "$T/118-summary.json" 2>"$T/118.err" ||
    { cat "$T/118.err"; fail "decode of 11.8 failed"; }
grep -q "it is CUDA 11.8, which this build does not decode" "$T/118.err" ||
    { cat "$T/118.err"; fail "decode does not tell 11.8 apart"; }
python3 - "$T/118-summary.json" "$T/r-118.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
rep = json.load(open(sys.argv[2]))
u = s["undecodable"]
assert rep["kernels_recorded"] == 3000, rep
assert sum(s["records"].values()) == 0, s["records"]
assert u["unknown_kind_stops"] == 0 and u["unknown_version_records"] > 3000, u
assert u["causes"] == "unknown version", u
print(f"11.8: {u['unknown_version_records']} records walked by their measured sizes, none decoded as 12.0's")
PY
echo "ok"
