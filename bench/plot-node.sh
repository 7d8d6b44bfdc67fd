#!/usr/bin/env bash
# Plots bench-node (bench/node-scale.sh): the daemon's CPU per archived
# record and the records dropped against the number of producers N, from
# the JSON lines the bench prints (one per N).  Runs where gnuplot is:
# apt-get install -y gnuplot-nox.
#
#   bench/plot-node.sh NODE_SCALE_JSONL [PNG]      (default docs/bench-node.png)
#
# Lines of other benches in the file (make bench prints them all) are
# left out.
# shellcheck disable=SC2154,SC2028  # node.dat.env sets the ranges; the \n are for gnuplot
set -eu
set -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
json=${1:?usage: plot-node.sh NODE_SCALE_JSONL [PNG]}
png=${2:-$top/docs/bench-node.png}
[ -f "$json" ] || { echo "plot-node.sh: $json not found" >&2; exit 2; }
command -v gnuplot >/dev/null 2>&1 || { echo "plot-node.sh: gnuplot not found (apt-get install -y gnuplot-nox)" >&2; exit 1; }

T=$(mktemp -d "${TMPDIR:-/tmp}/bench-plot.XXXXXX")
trap 'rm -rf "$T"' EXIT

# One row per N: index, N, µs/record, dropped, records/s (M), peak RSS.
python3 - "$json" "$T/node.dat" <<'EOF'
import json, sys
rows = []
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if r.get("bench") != "node-scale":
        continue
    rows.append(r)
if not rows:
    sys.exit("plot-node.sh: no node-scale lines in %s" % sys.argv[1])
rows.sort(key=lambda r: r["producers"])
with open(sys.argv[2], "w") as f:
    for i, r in enumerate(rows):
        f.write("%d\t%d\t%.4f\t%d\t%.3f\t%.1f\n" % (
            i, r["producers"], r["daemon_us_per_record"] or 0, r["records_dropped"],
            (r["records_per_s"] or 0) / 1e6, r["daemon_peak_rss_mib"]))
with open(sys.argv[2] + ".env", "w") as f:
    f.write("ymax_us=%.3f\nymax_drop=%d\n" % (
        max(0.25, max(r["daemon_us_per_record"] or 0 for r in rows)) * 1.35,
        max(1, int(max(r["records_dropped"] for r in rows) * 1.3))))
EOF
# shellcheck disable=SC1091
. "$T/node.dat.env"

term="pngcairo size 1100,520 font 'DejaVu Sans,11'"
gnuplot -e "set terminal" 2>/dev/null | grep -q pngcairo || term="png size 1100,520"
cat >"$T/plot.gp" <<EOF
set terminal $term
set output '$png'
set datafile separator '\t'
set style fill solid 0.75 border rgb 'black'
set boxwidth 0.55
set grid ytics
set offsets 0.5, 0.5, 0, 0
set xtics nomirror noenhanced
set xlabel 'producers (N), one daemon, 2 shared cores'
set key top left
set multiplot layout 1,2 title "cuptimond at node scale (bench/node-scale.sh): replay producers of real H200 buffers, zstd-1\\nshared 2-core machine: producers, daemon and other users' work on the same cores" noenhanced
set title "daemon CPU per archived record" noenhanced
set ylabel 'µs CPU / record'
set yrange [0:$ymax_us]
plot "$T/node.dat" using 1:3:xtic(2) with boxes lc rgb "#4477AA" notitle, \
     "" using 1:3:(sprintf("%.2f µs\\n%.2f M/s", \$3, \$5)) with labels offset 0,1.4 notitle, \
     0.2 with lines lc rgb "#EE6677" lw 2 dt 2 title "target 0.2 µs"
set title "records dropped (due while every slot was with the daemon)" noenhanced
set ylabel 'records dropped'
set yrange [0:$ymax_drop]
plot "$T/node.dat" using 1:4:xtic(2) with boxes lc rgb "#CCBB44" notitle, \
     "" using 1:4:(sprintf("%d", \$4)) with labels offset 0,0.8 notitle
unset multiplot
EOF
mkdir -p "$(dirname "$png")"
gnuplot "$T/plot.gp"
echo "plot-node.sh: wrote $png"
