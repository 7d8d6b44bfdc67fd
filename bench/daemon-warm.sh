#!/bin/bash
# bench-warm (issue 49): the daemon's CPU per archived record on a fresh
# daemon and on a warm one (after WARM short sessions have come and gone,
# as on a node that has been up a while), N bench/replay-producers of
# RECORDS each, ROUNDS rounds alternating fresh and warm; one JSON line with
# the medians.  The daemon is always on: what it costs on day 30 is what
# counts, and no other bench starts anything but a fresh one.
#
# --soak SECONDS: one daemon kept up that long, cycling WARM short sessions
# and a measured load of N producers; one JSON line per cycle and a last one
# comparing the first cycles with the last (make bench-soak: an hour).
# usage: daemon-warm.sh [--soak SECONDS] [ROUNDS [N [RECORDS [WARM]]]]
set -eu
: "${top_builddir:?run through make bench-warm}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
soak=0
if [ "${1:-}" = --soak ]; then
    soak=$2
    shift 2
fi
rounds=${1:-3} n=${2:-8} per=${3:-500000} warm=${4:-64}
# shellcheck source=bench/daemon-run.sh
. "$top_srcdir/bench/daemon-run.sh"
trap '[ -z "${dr_pid:-}" ] || kill "$dr_pid" 2>/dev/null || true' EXIT
d=$top_builddir/daemon/cuptimond

if [ "$soak" -gt 0 ]; then
    dr_start "$d"
    end=$(($(date +%s) + soak))
    cycle=0 all=
    while [ "$(date +%s)" -lt "$end" ]; do
        cycle=$((cycle + 1))
        dr_warm "$warm"
        c0=$(dr_cpu)
        r=$(dr_load "$n" "$per")
        c1=$(dr_cpu)
        rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$dr_pid/status")
        us=$(python3 -c 'import sys; t, c, n = map(int, sys.argv[1:]); print("%.3f" % (t / c * 1e6 / max(n, 1)))' \
            "$((c1 - c0))" "$dr_clk" "${r%% *}")
        all="$all $us"
        echo "{\"bench\": \"soak\", \"cycle\": $cycle, \"uptime_s\": $((soak - end + $(date +%s))), \"sessions_served\": $((cycle * (warm + n))), \"records\": ${r%% *}, \"dropped\": ${r#* }, \"daemon_us_per_record\": $us, \"daemon_rss_kib\": $rss}"
    done
    dr_stop
    # shellcheck disable=SC2086
    python3 - $all <<'PY'
import json, statistics, sys
v = [float(x) for x in sys.argv[1:]]
k = max(1, len(v) // 4)
print(json.dumps({"bench": "soak", "cycles": len(v),
                  "first_quarter_median_us_per_record": statistics.median(v[:k]),
                  "last_quarter_median_us_per_record": statistics.median(v[-k:]),
                  "last_over_first": round(statistics.median(v[-k:]) / statistics.median(v[:k]), 3)}))
PY
    exit 0
fi

fresh='' warmv=''
for _ in $(seq "$rounds"); do
    a=$(dr_measure "$d" 0 "$n" "$per")
    b=$(dr_measure "$d" "$warm" "$n" "$per")
    fresh="$fresh ${a%% *}"
    warmv="$warmv ${b%% *}"
done
python3 - "$n" "$per" "$warm" "$fresh" "$warmv" <<'PY'
import json, statistics, sys
n, per, warm = map(int, sys.argv[1:4])
f, w = ([float(x) for x in a.split()] for a in sys.argv[4:6])
print(json.dumps({"bench": "warm", "producers": n, "records_per_producer": per,
                  "warm_sessions": warm, "fresh_us_per_record": f, "warm_us_per_record": w,
                  "fresh_median": statistics.median(f), "warm_median": statistics.median(w),
                  "warm_over_fresh": round(statistics.median(w) / statistics.median(f), 3)}))
PY
