#!/bin/bash
# bench-gzip (issue 20): a trace's gzip on 1 thread against several.  Makes
# an archive (N cheap producers, bench/replay-producer, replaying a real
# H200 buffer into one real cuptimond), then decodes it to a .json.gz with
# `cuptimonctl decode --gzip-threads=T` for each T, ROUNDS rounds with the
# thread counts interleaved.  One JSON line per T: median wall and CPU
# seconds, MB/s of JSON per wall second, and the paired wall ratio against
# the first T per round (median, min, max).  The output is the same bytes
# whatever T (checked).  Ratios of one run; absolute times only from the
# machine the figure names.
# usage: gzip-threads.sh [ROUNDS [THREADS_LIST [RECORDS_PER_PRODUCER [N]]]]
#        (default 5 "1 2 4 8" 250000 4)
set -eu
: "${top_builddir:?run through make bench-gzip}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
rounds=${1:-5}
tlist=${2:-"1 2 4 8"}
recs=${3:-250000}
n=${4:-4}
T=$(mktemp -d "${TMPDIR:-/tmp}/cuptimon-gzb.XXXXXX")
dpid=
trap '[ -n "$dpid" ] && kill "$dpid" 2>/dev/null; rm -rf "$T"' EXIT
ctl() { "$top_builddir/cli/cuptimonctl" --control-socket "$T/c.sock" "$@"; }
"$top_builddir/daemon/cuptimond" --socket "$T/p.sock" --control-socket "$T/c.sock" \
    --output-dir "$T/arch" --flush-period 0 2>"$T/d.log" &
dpid=$!
for _ in $(seq 100); do ctl status >/dev/null 2>&1 && break; sleep 0.05; done
pids=
for _ in $(seq "$n"); do
    "$top_builddir/bench/replay-producer" --socket "$T/p.sock" \
        --buffer "$top_srcdir/tests/data/cupti-13.0-h200/phase0-buf0.bin.zst" \
        --records "$recs" --slots 16 >/dev/null &
    pids="$pids $!"
done
# shellcheck disable=SC2086
wait $pids
kill "$dpid"
wait "$dpid" || true
dpid=
for r in $(seq "$rounds"); do
    for t in $tlist; do
        # One path for all (the trace names it): the bytes must not differ.
        TIMEFORMAT="%R %U %S"
        { time "$top_builddir/cli/cuptimonctl" decode "$T/arch" -o "$T/t.json.gz" \
            --gzip-threads="$t" --quiet; } 2>"$T/time"
        mv "$T/t.json.gz" "$T/t$t.json.gz"
        echo "$r $t $(cat "$T/time") $(stat -c %s "$T/t$t.json.gz")" >>"$T/runs"
    done
done
json=$(gzip -dc "$T/t${tlist%% *}.json.gz" | wc -c)
for t in $tlist; do
    cmp -s "$T/t${tlist%% *}.json.gz" "$T/t$t.json.gz" ||
        { echo "gzip-threads: the output on $t threads differs from the output on ${tlist%% *}" >&2; exit 1; }
done
python3 - "$T/runs" "$json" "$(nproc)" <<'PY'
import json, statistics, sys
runs, js, cpus = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
by = {}
for line in open(runs):
    r, t, wall, us, ss, gz = line.split()
    by.setdefault(int(t), {})[int(r)] = (float(wall), float(us) + float(ss), int(gz))
ts = sorted(by, key=list(by).index)
base = ts[0]
for t in ts:
    walls = [w for w, _, _ in by[t].values()]
    cpus_ = [c for _, c, _ in by[t].values()]
    ratios = sorted(by[base][r][0] / by[t][r][0] for r in by[t] if by[t][r][0] > 0)
    print(json.dumps({
        "bench": "gzip-threads", "threads": t, "processors": cpus, "rounds": len(walls),
        "json_bytes": js, "gz_bytes": next(iter(by[t].values()))[2],
        "wall_s_median": round(statistics.median(walls), 3),
        "cpu_s_median": round(statistics.median(cpus_), 3),
        "json_mb_per_s_wall": round(js / 1e6 / statistics.median(walls), 1),
        "speedup_vs_%d_threads_median" % base: round(statistics.median(ratios), 2),
        "speedup_min": round(ratios[0], 2), "speedup_max": round(ratios[-1], 2),
    }))
PY
