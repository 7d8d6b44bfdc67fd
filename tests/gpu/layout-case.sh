#!/bin/bash
# The per-session layout check on a real GPU (issue 30): known-work runs under
# the shim with kernel, memcpy, memset, runtime, driver and external
# correlation records on; the shim measures each kind's record size as the
# real libcupti's cuptiActivityGetNextRecord steps over it (and, on CUDA
# 13.2+, asks cuptiActivityGetStructSize) and tells the daemon.  On the H200
# (CUDA 13.0, CUPTI 130001) every measured size must agree with the layout
# table (CONCURRENT_KERNEL 216, MEMCPY 96, MEMSET 88, DRIVER and RUNTIME 40,
# EXTERNAL_CORRELATION 24), status must show no layout mismatch and name the
# kinds it confirmed, meta.json must keep the measured sizes, and the decode
# must hold every record with nothing undecodable.
# usage: OUT=DIR tests/gpu/layout-case.sh BUILD_DIR   (writes OUT/layout-report.txt;
#        exit 0 when every check passed).  CUPTIMON_GPU_DRYRUN=1: the libcupti
#        double's workload stands in for known-work (no GPU needed).
set -u
B=$(cd "$1" && pwd); here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-layout-out}; mkdir -p "$OUT"
W=$(mktemp -d /tmp/cuptimon-gpulayout.XXXXXX)
P=$W/p.sock C=$W/c.sock
REPORT=$OUT/layout-report.txt
ctl() { "$B/cli/cuptimonctl" --control-socket "$C" "$@"; }
"$B/daemon/cuptimond" --socket "$P" --control-socket "$C" --output-dir "$W/out" 2>"$W/d.log" &
dpid=$!
trap 'kill $dpid 2>/dev/null' EXIT
for _ in $(seq 100); do ctl status >/dev/null 2>&1 && break; sleep 0.1; done
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:${CUDA_HOME:-/usr/local/cuda}/targets/x86_64-linux/lib
export CUPTIMON_SOCKET=$P CUDA_INJECTION64_PATH=$B/client-lib/.libs/libcuptimon.so
export CUPTIMON_ACTIVITIES=kernel,memcpy,memset,runtime,driver,external_correlation
if [ "${CUPTIMON_GPU_DRYRUN:-0}" = 1 ]; then
    timeout 120 "$B/tests/fakecupti/cuptimon-workload" --kernels 20000 --rate 20000 --streams 2 \
        --memcpy-every 7 --memset-every 11 --report "$W/kw.json" --linger-ms 3000 &
else
    timeout 120 "$here/build/known-work" --kernels 20000 --graph-replays 20 --no-nvtx \
        --report "$W/kw.json" --linger-ms 3000 --quiet &
fi
kw=$!
# The first buffers with each kind carry its measurement: wait until every
# kind the work makes is in (known-work's copies and memsets come after its
# kernels: on the H200 a status read once the kernel's was in had not them
# yet).
for _ in $(seq 150); do
    ctl status --json > "$W/status.json" 2>/dev/null
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["sessions"]; sys.exit(0 if s and {1, 2, 4, 5, 10} <= set(s[0]["layout_checked"] + [int(m.split()[3].rstrip(",")) for m in s[0]["layout_mismatch"]]) else 1)' \
        "$W/status.json" 2>/dev/null && break
    sleep 0.2
done
ctl status > "$W/status.txt" 2>&1
wait $kw; echo "workload exit $?" > "$REPORT"
kill -TERM $dpid; wait $dpid; echo "daemon exit $?" >> "$REPORT"
trap - EXIT
session=$(find "$W/out/archive" -mindepth 1 -maxdepth 1 -type d | head -1)
ctl decode "$session" -o "$W/trace.json" --summary-out "$W/summary.json" 2>"$W/decode.err"
echo "decode exit $?" >> "$REPORT"
python3 - "$W" >> "$REPORT" 2>&1 <<'PY'
import glob, json, sys
W = sys.argv[1]
fails = []
def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)
names = {1: "MEMCPY", 2: "MEMSET", 4: "DRIVER", 5: "RUNTIME", 10: "CONCURRENT_KERNEL",
         39: "EXTERNAL_CORRELATION"}
want = {10: 216, 1: 96, 2: 88, 4: 40, 5: 40, 39: 24}   # the 13.0 table (cupti_activity.h 13.0)
st = json.load(open(f"{W}/status.json"))["sessions"]
check(len(st) == 1, "one session in status")
s = st[0] if st else {}
print("status: cupti_version", s.get("cupti_version"), "release", s.get("cupti_release"))
print("status: layout_checked", s.get("layout_checked"), "layout_mismatch", s.get("layout_mismatch"),
      "layout_unverified", s.get("layout_unverified"))
check(s.get("layout_mismatch") == [], "status: no layout mismatch")
check("release_refuted" not in s, "status: the release holds")
check({10, 1, 2, 4, 5} <= set(s.get("layout_checked", [])),
      "status: kernel, memcpy, memset, driver and runtime sizes confirmed the table")
print(open(f"{W}/status.txt").read().rstrip())
meta = json.load(open(glob.glob(f"{W}/out/archive/*/meta.json")[0]))
m = {int(k): v for k, v in meta.get("record_sizes_measured", {}).items()}
by = meta.get("record_sizes_by", {})
for k in sorted(m):
    print(f"measured: kind {k} ({names.get(k, '?')}): {m[k]} bytes by {by.get(str(k))}"
          + (f" (table {want[k]})" if k in want else ""))
for k in (10, 1, 2, 4, 5):
    check(m.get(k) == want[k], f"meta.json: {names[k]} measured {m.get(k)} bytes, table {want[k]}")
if 39 in m:
    check(m[39] == want[39], f"meta.json: EXTERNAL_CORRELATION measured {m[39]} bytes, table 24")
v = meta.get("cupti_version", 0)
check(all(by.get(str(k)) == ("struct_size" if v >= 130200 else "stride") for k in m),
      "meta.json: measured by " + ("cuptiActivityGetStructSize" if v >= 130200 else
                                   "the stride of cuptiActivityGetNextRecord"))
summ = json.load(open(f"{W}/summary.json"))
u = summ["undecodable"]
print("summary: records", summ["records"], "undecodable", {k: u[k] for k in
      ("bytes", "causes", "unknown_layout_records", "unknown_kind_stops")})
check(u["bytes"] == 0 and u["causes"] == "none", "decode: nothing undecodable")
rep = json.load(open(f"{W}/kw.json"))
kernels = rep.get("kernels_recorded", rep.get("kernels"))
print("workload report: kernels", kernels)
check(summ["records"]["kernel"] > 0, "decode: kernels decoded")
print("RESULT", "PASS" if not fails else "FAIL " + ", ".join(fails))
sys.exit(1 if fails else 0)
PY
rc=$?
echo "report: $REPORT"
cat "$REPORT"
exit $rc
