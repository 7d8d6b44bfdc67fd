#!/bin/bash
# Two cuptimond binaries side by side: daemon CPU per archived record with
# N bench/replay-producers (a real H200 buffer replayed over the shim's
# protocol, as fast as slots come back, buffers of varying length), old and
# new interleaved round by round in one run, so that the machine's drift
# hits both alike.  With WARM > 0 each round measures each daemon twice:
# fresh, and warm (after WARM short sessions have come and gone, as on a
# node that has been up a while: issue 49).  Prints one line per
# measurement and the paired new/old ratios' medians.
# usage: daemon-ab.sh OLD_CUPTIMOND NEW_CUPTIMOND [ROUNDS [PRODUCERS [RECORDS [WARM]]]]
#   (run from a build directory, or set top_builddir)
set -eu
old=$1 new=$2 rounds=${3:-5} n=${4:-4} per=${5:-1500000} warm=${6:-0}
: "${top_builddir:=$PWD}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
# shellcheck source=bench/daemon-run.sh
. "$top_srcdir/bench/daemon-run.sh"
trap '[ -z "${dr_pid:-}" ] || kill "$dr_pid" 2>/dev/null || true' EXIT

modes=fresh
[ "$warm" -gt 0 ] && modes="fresh warm"
declare -A ratios olds news
for r in $(seq "$rounds"); do
    for m in $modes; do
        w=0
        [ "$m" = warm ] && w=$warm
        a=$(dr_measure "$old" "$w" "$n" "$per")
        b=$(dr_measure "$new" "$w" "$n" "$per")
        echo "round $r $m: old ${a%% *} us/record, new ${b%% *} us/record" \
            "(records, dropped: old ${a#* }, new ${b#* })"
        ratios[$m]="${ratios[$m]:-} $(python3 -c "print('%.3f' % (${b%% *} / ${a%% *}))")"
        olds[$m]="${olds[$m]:-} ${a%% *}"
        news[$m]="${news[$m]:-} ${b%% *}"
    done
done
for m in $modes; do
    python3 - "$m" "${olds[$m]}" "${news[$m]}" "${ratios[$m]}" <<'PY'
import statistics, sys
m, o, n, r = sys.argv[1], *[[float(x) for x in a.split()] for a in sys.argv[2:]]
print("%s: old median %.3f us/record, new median %.3f us/record; paired new/old: %s, median %.2f"
      % (m, statistics.median(o), statistics.median(n), " ".join("%.2f" % x for x in r),
         statistics.median(r)))
PY
done
