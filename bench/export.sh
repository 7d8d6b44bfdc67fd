#!/bin/bash
# bench-export (issue 50): cuptimonctl export --type sqlite against
# cuptimonctl decode (to JSON, /dev/null) on the same archive.  N cheap
# producers (bench/replay-producer replaying a real H200 buffer, --kernel-rate
# R kernel records/s each) stream into one real cuptimond for each duration
# in DURATIONS; a window over all of them for the middle third adds the
# runtime/driver API records of a second real buffer, so that the archive
# holds what a node's does.  Then, on that archive, one JSON line each for
# decode and export: records decoded, wall time, CPU, records per second
# of CPU, peak RSS, the output's size, and export's rate as a ratio of
# decode's.  Peak RSS over the durations shows export's memory bounded
# (streamed: one transaction per chunk), whatever the archive's size.
# usage: export.sh [DURATIONS [N [KERNEL_RATE]]]   (default "5 20" 2 50000)
set -eu
: "${top_builddir:?run through make bench-export}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
durs=${1:-"5 20"}
n=${2:-2}
krate=${3:-50000}
T=$(mktemp -d "${TMPDIR:-/tmp}/cuptimon-export.XXXXXX")
out=${BENCH_OUTPUT_DIR:-$T}/cuptimon-export-$$
dpid=
pids=
cleanup() {
    # shellcheck disable=SC2086
    [ -n "$pids" ] && kill $pids 2>/dev/null
    [ -n "$dpid" ] && kill "$dpid" 2>/dev/null
    wait 2>/dev/null || true
    rm -rf "$T" "$out"
}
trap cleanup EXIT
data=$top_srcdir/tests/data/cupti-13.0-h200
CTL=$top_builddir/cli/cuptimonctl
ctl() { "$CTL" --control-socket "$T/c.sock" "$@"; }
for dur in $durs; do
    rm -rf "$out"
    mkdir -p "$out"
    "$top_builddir/daemon/cuptimond" --socket "$T/p.sock" --control-socket "$T/c.sock" \
        --output-dir "$out/arch" --flush-period 0 2>"$T/d.log" &
    dpid=$!
    for _ in $(seq 100); do ctl status >/dev/null 2>&1 && break; sleep 0.05; done
    pids=
    for i in $(seq "$n"); do
        "$top_builddir/bench/replay-producer" --socket "$T/p.sock" \
            --buffer "$data/phase0-buf0.bin.zst" --window-buffer "$data/phase1-buf4.bin.zst" \
            --kernel-rate "$krate" --records 100000000000 --slots 16 --report "$T/r$i.json" &
        pids="$pids $!"
    done
    for _ in $(seq 100); do
        [ "$(ctl status --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("sessions", [])))')" -ge "$n" ] && break
        sleep 0.1
    done
    third=$(python3 -c "print($dur / 3)")
    sleep "$third"
    ctl begin-window --all --output "$out/w.json.gz" --json >/dev/null
    sleep "$third"
    ctl --timeout 600 end-window --json >/dev/null
    rm -f "$out/w.json.gz"
    sleep "$third"
    # shellcheck disable=SC2086
    kill $pids 2>/dev/null
    # shellcheck disable=SC2086
    wait $pids 2>/dev/null || true
    pids=
    kill -TERM "$dpid"
    wait "$dpid" || true
    dpid=
    arch=$(du -sb "$out/arch/archive" | awk '{print $1}')
    /usr/bin/time -f "%e %U %S %M" -o "$T/time-decode" "$CTL" decode "$out/arch" -o /dev/null \
        --quiet --summary-out "$T/sum.json"
    /usr/bin/time -f "%e %U %S %M" -o "$T/time-export" "$CTL" export "$out/arch" --type sqlite \
        -o "$out/x.sqlite"
    python3 - "$dur" "$n" "$krate" "$arch" "$T/time-decode" "$T/time-export" "$T/sum.json" \
        "$out/x.sqlite" <<'PY'
import json, os, sqlite3, sys
dur, n, krate, arch, td, te, sp, db = sys.argv[1:]
def t(p):
    wall, us, ss, kb = open(p).read().split()
    return float(wall), float(us) + float(ss), int(kb)
sm = json.load(open(sp))
dec_records = sum(s["records_decoded"] for s in sm["sessions"])
con = sqlite3.connect(db)
exp_records, exported = con.execute(
    "SELECT sum(recordsDecoded), sum(recordsExported) FROM CUPTIMON_SESSIONS").fetchone()
rows = {t: con.execute("SELECT count(*) FROM " + t).fetchone()[0] for t in
        ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME")}
res = {}
for name, p, recs, size in (("decode", td, dec_records, None),
                            ("export", te, exp_records, os.path.getsize(db))):
    wall, cpu, kb = t(p)
    res[name] = recs / cpu if cpu else None
    print(json.dumps({"bench": "export", "case": name, "duration_s": float(dur), "producers": int(n),
                      "kernel_rate_per_producer": float(krate), "archive_bytes": int(arch),
                      "records_decoded": recs, "wall_s": wall, "cpu_s": round(cpu, 2),
                      "records_per_s_per_core": round(recs / cpu) if cpu else None,
                      "peak_rss_mib": round(kb / 1024, 1), "output_bytes": size,
                      **({"rows": rows, "records_exported": exported} if name == "export" else {})}))
print(json.dumps({"bench": "export", "case": "ratio", "duration_s": float(dur),
                  "export_over_decode_records_per_s": round(res["export"] / res["decode"], 3)
                  if res["export"] and res["decode"] else None}))
PY
    rm -f "$out/x.sqlite"
done
