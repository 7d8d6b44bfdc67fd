#!/bin/bash
# bench-window (issue 20): a trace window at node scale.  N (8) cheap
# producers (bench/replay-producer, --kernel-rate R: 50,000 kernel records/s
# each) stream into one real cuptimond; a window over all of them
# (default kinds: runtime and driver API on, so each producer then replays
# a real H200 buffer with API records, with fresh correlation ids and
# timestamps per replay) is held for each duration in DURATIONS, written
# gzipped (.json.gz).  Per duration, one JSON line: the time from
# `end-window` to the trace being complete, the daemon's peak RSS while
# writing it (VmHWM reset at end-window), its RSS before, the trace's
# size gzipped and as JSON (gunzipped to a pipe: no JSON on disk), events
# written and records/s per core of the daemon's CPU during the write.
# The producers keep streaming (always-on kinds) during the write, as a
# node's jobs would: the daemon's CPU then includes their archiving, which
# is measured just before the end and given apart.
# The producers share the cores with the daemon: ratios of one run.
# With BENCH_WINDOW_DECODE=1, the last duration's archive (all it holds:
# the always-on stream before and after the window, the window kinds'
# records inside it) is then decoded offline with cuptimonctl decode to
# /dev/null: whole, a 1 s --from/--to slice in its middle, and one --pid,
# each with its wall time, CPU and peak RSS against the archive's size;
# and cuptimonctl stats (every report) of the same three, beside each.
# usage: window-scale.sh [DURATIONS [N [KERNEL_RATE]]]   (default "10 60" 8 50000)
set -eu
: "${top_builddir:?run through make bench-window}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
durs=${1:-"10 60"}
n=${2:-8}
krate=${3:-50000}
T=$(mktemp -d "${TMPDIR:-/tmp}/cuptimon-win.XXXXXX")
# Archive and trace on disk by default: a 60 s window's archive is ~1 GB.
out=${BENCH_OUTPUT_DIR:-$T}/cuptimon-win-$$
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
ctl() { "$top_builddir/cli/cuptimonctl" --control-socket "$T/c.sock" "$@"; }
cpu() { awk '{print $14 + $15}' "/proc/$dpid/stat"; }
clk=$(getconf CLK_TCK)
# No cap on a window's events (the default 50 M would cut a 60 s window).
echo '{"window_max_events": 1000000000000}' >"$T/d.conf"
for dur in $durs; do
    rm -rf "$out"
    mkdir -p "$out"
    "$top_builddir/daemon/cuptimond" --config "$T/d.conf" --socket "$T/p.sock" \
        --control-socket "$T/c.sock" --output-dir "$out/arch" --flush-period 0 2>"$T/d.log" &
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
    sleep 1
    ctl begin-window --all --output "$out/w.json.gz" --json >"$T/begin.json"
    # The daemon's CPU for archiving alone, over the window's last 5 s.
    sleep $(( dur > 5 ? dur - 5 : 0 ))
    c0=$(cpu); t0=$(date +%s%N)
    sleep $(( dur > 5 ? 5 : dur ))
    c1=$(cpu); t1=$(date +%s%N)
    rss_before=$(awk '/^VmRSS:/ {print $2}' "/proc/$dpid/status")
    echo 5 >"/proc/$dpid/clear_refs" # resets VmHWM to the current RSS
    t2=$(date +%s%N); c2=$(cpu)
    # A long window takes minutes to write: more than end-window waits by default.
    ctl --timeout 3600 end-window --json >"$T/end.json"
    t3=$(date +%s%N); c3=$(cpu)
    hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$dpid/status")
    # shellcheck disable=SC2086
    kill $pids 2>/dev/null
    # shellcheck disable=SC2086
    wait $pids 2>/dev/null || true
    pids=
    gz=$(stat -c %s "$out/w.json.gz")
    json=$(gzip -dc "$out/w.json.gz" | wc -c)
    arch=$(du -sb "$out/arch" | awk '{print $1}')
    kill -TERM "$dpid"; wait "$dpid" || true
    dpid=
    python3 - "$dur" "$n" "$krate" "$clk" "$c0" "$c1" "$t0" "$t1" "$c2" "$c3" "$t2" "$t3" \
        "$rss_before" "$hwm" "$gz" "$json" "$arch" "$T" <<'PY'
import glob, json, sys
(dur, n, krate, clk, c0, c1, t0, t1, c2, c3, t2, t3, rss, hwm, gz, js, arch, T) = sys.argv[1:]
clk = int(clk)
end = json.load(open(f"{T}/end.json"))
summ = end.get("summary", {})
events = summ.get("events", 0)
reps = [json.load(open(p)) for p in glob.glob(f"{T}/r*.json")]
bg_cores = (int(c1) - int(c0)) / clk / ((int(t1) - int(t0)) / 1e9)
write_s = (int(t3) - int(t2)) / 1e9
write_cpu = (int(c3) - int(c2)) / clk
own_cpu = max(write_cpu - bg_cores * write_s, 1e-9)
kernels = sum(p.get("kernels", 0) for p in summ.get("processes", []))
print(json.dumps({
    "bench": "window-scale", "window_s": float(dur), "producers": int(n),
    "kernel_rate_per_producer": float(krate), "state": end.get("state"),
    "truncated": summ.get("truncated"), "events_written": events, "kernels_written": kernels,
    "end_to_complete_s": round(write_s, 2),
    "daemon_rss_before_mib": round(int(rss) / 1024, 1),
    "daemon_peak_rss_writing_mib": round(int(hwm) / 1024, 1),
    "trace_gz_bytes": int(gz), "trace_json_bytes": int(js),
    "json_bytes_per_event": round(int(js) / events, 1) if events else None,
    "gzip_ratio": round(int(js) / int(gz), 2) if int(gz) else None,
    "archive_bytes": int(arch),
    "daemon_cpu_s_writing": round(write_cpu, 2),
    "daemon_archiving_cores_before": round(bg_cores, 3),
    "records_per_s_per_core": round(events / own_cpu) if events else None,
    "records_per_s_wall": round(events / write_s) if write_s else None,
    "producers_dropped": sum(r.get("records_dropped", 0) for r in reps),
}))
PY
    if [ "${BENCH_WINDOW_DECODE:-0}" = 1 ] && [ "$dur" = "${durs##* }" ]; then
        rm -f "$out/w.json.gz"
        mid=$(python3 -c 'import json,sys; b=json.load(open(sys.argv[1])); print((b["start_unix_ns"] + b.get("end_unix_ns", b["start_unix_ns"]))//2 if b.get("end_unix_ns") else b["start_unix_ns"] + int(float(sys.argv[2]) / 2 * 1e9))' "$T/begin.json" "$dur")
        one=$(ls "$out/arch/archive" | head -1)
        opid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$out/arch/archive/$one/meta.json")
        dec() { # dec NAME ARGS...: one decode, timed
            local name=$1; shift
            /usr/bin/time -f "%e %U %S %M" -o "$T/time" "$top_builddir/cli/cuptimonctl" decode \
                "$out/arch" -o /dev/null --quiet --summary-out "$T/sum.json" "$@"
            read -r wall us ss kb <"$T/time"
            python3 - "$name" "$arch" "$wall" "$us" "$ss" "$kb" "$T/sum.json" "$*" <<'PY'
import json, sys
name, arch, wall, us, ss, kb, sp, args = sys.argv[1:]
sm = json.load(open(sp))
kept = sum(s["records_kept"] for s in sm["sessions"])
dec = sum(s["records_decoded"] for s in sm["sessions"])
cpu = float(us) + float(ss)
print(json.dumps({"bench": "decode-big", "case": name, "args": args,
                  "archive_bytes": int(arch), "records_decoded": dec, "records_written": kept,
                  "wall_s": float(wall), "cpu_s": round(cpu, 2),
                  "records_decoded_per_s_per_core": round(dec / cpu) if cpu else None,
                  "peak_rss_mib": round(int(kb) / 1024, 1)}))
PY
        }
        # cuptimonctl stats on the same archive, beside decode: every
        # report, as JSON (its peak RSS is what its memory bound gives).
        sts() { # sts NAME ARGS...: one stats, timed
            local name=$1; shift
            /usr/bin/time -f "%e %U %S %M" -o "$T/time" "$top_builddir/cli/cuptimonctl" stats \
                "$out/arch" --report all --format json -o "$T/stats.json" --quiet "$@"
            read -r wall us ss kb <"$T/time"
            python3 - "$name" "$arch" "$wall" "$us" "$ss" "$kb" "$T/stats.json" "$*" <<'PY'
import json, sys
name, arch, wall, us, ss, kb, sp, args = sys.argv[1:]
st = json.load(open(sp))
dec = st["info"]["records_decoded"]
cpu = float(us) + float(ss)
print(json.dumps({"bench": "stats-big", "case": name, "args": args,
                  "archive_bytes": int(arch), "records_decoded": dec,
                  "records_counted": st["info"]["records_counted"],
                  "kernels": st["info"]["kernels"],
                  "approximate_medians": st["info"]["medians"]["approximate_medians"],
                  "wall_s": float(wall), "cpu_s": round(cpu, 2),
                  "records_decoded_per_s_per_core": round(dec / cpu) if cpu else None,
                  "peak_rss_mib": round(int(kb) / 1024, 1)}))
PY
        }
        dec whole
        sts whole
        dec slice-1s --from "$((mid - 500000000))ns" --to "$((mid + 500000000))ns"
        sts slice-1s --from "$((mid - 500000000))ns" --to "$((mid + 500000000))ns"
        dec one-pid --pid "$opid"
        sts one-pid --pid "$opid"
    fi
    rm -rf "$out"
done
