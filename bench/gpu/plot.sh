#!/usr/bin/env bash
# Plots the job-side GPU benchmark: median launch-loop time per mode with
# min..max error bars, known-work and the PyTorch loop side by side, each bar
# labelled with its ratio to no tracing.  Runs where gnuplot is (not on the
# GPU host): apt-get install -y gnuplot-nox.
#
#   bench/gpu/plot.sh [BENCH_GPU_JSON [PNG]]
#
# Defaults: bench-gpu-out/bench-gpu.json (run.sh's default OUT) and
# docs/bench-overhead.png.  Needs python3 and gnuplot (pngcairo, else png).
# shellcheck disable=SC2154,SC2028  # plot.env sets the flags; the \t and \n are for gnuplot
set -eu
set -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
json=${1:-bench-gpu-out/bench-gpu.json}
png=${2:-$top/docs/bench-overhead.png}
[ -f "$json" ] || { echo "plot.sh: $json not found" >&2; exit 2; }
command -v gnuplot >/dev/null 2>&1 || { echo "plot.sh: gnuplot not found (apt-get install -y gnuplot-nox)" >&2; exit 1; }

T=$(mktemp -d "${TMPDIR:-/tmp}/bench-plot.XXXXXX")
trap 'rm -rf "$T"' EXIT

# The data: one tab-separated file per panel; the title and the panels'
# count in T/plot.env.
python3 - "$json" "$T" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
T = sys.argv[2]
colors = {"a": 0x888888, "b": 0x4477AA, "bw": 0x66CCEE, "c": 0x228833, "d": 0xCCBB44,
          "ta": 0x888888, "tb": 0x4477AA, "tc": 0x228833, "tk": 0xEE6677}
short = {"a": "a: none", "b": "b: bare\\nCUPTI", "bw": "b': bare CUPTI\\n+ window kinds",
         "c": "c: cuptimon", "d": "d: cuptimon\\nin a window", "ta": "none", "tb": "bare\\nCUPTI",
         "tc": "cuptimon", "tk": "torch.profiler\\n(Kineto)"}
panels = []
for prog, none, fname in (("kw", "a", "kw.dat"), ("torch", "ta", "torch.dat")):
    keys = [k for k in doc["modes"] if (k.startswith("t") if prog == "torch" else not k.startswith("t"))]
    rows = []
    for k in keys:
        w = doc["modes"][k].get("work_ns")
        if not w:
            continue
        r = doc.get("ratios", {}).get("%s/%s" % (k, none))
        lab = "x%.3f" % r["of_medians"] if r else ("n=%d" % w["n"])
        rows.append((len(rows), short.get(k, k), w["median"] / 1e6, w["min"] / 1e6, w["max"] / 1e6,
                     lab, colors.get(k, 0x444444)))
    if rows:
        with open("%s/%s" % (T, fname), "w") as f:
            for r in rows:
                f.write("%d\t%s\t%.4f\t%.4f\t%.4f\t%s\t%d\n" % r)
        panels.append(prog)
m = doc.get("machine", {})
gpu = (m.get("gpu") or ["?"])[0].split(",")[0]
title = "cuptimon job-side overhead: median launch-loop time, bars min..max, label = ratio to no tracing"
sub = "%s%s, %s runs per mode interleaved" % (
    "DRY RUN (libcupti test double, no GPU): " if doc.get("dryrun") else "", gpu,
    doc.get("config", {}).get("runs_per_mode", "?"))
def brief(args, keep):
    """The arguments that say how much work, as 'k=v' pairs."""
    out, args = [], list(args)
    for i, a in enumerate(args):
        if a in keep and i + 1 < len(args):
            out.append("%s %s" % (a.lstrip("-"), args[i + 1]))
    return ", ".join(out)
kwargs = brief(doc.get("config", {}).get("known_work_args", []), ("--kernels", "--graph-replays"))
if doc.get("dryrun"):
    kwargs = "test double's workload"
ta = brief(doc.get("config", {}).get("torch_args", []), ("--ops", "--reps"))
with open("%s/plot.env" % T, "w") as f:
    f.write("panels=%d\nhave_kw=%d\nhave_torch=%d\n" % (len(panels), "kw" in panels, "torch" in panels))
for name, val in (("title", title), ("sub", sub), ("kwargs", kwargs), ("targs", ta)):
    with open("%s/%s.txt" % (T, name), "w") as f:
        f.write(val.replace('"', "'"))
if not panels:
    sys.exit("plot.sh: no mode with a successful run in %s" % sys.argv[1])
EOF
# shellcheck disable=SC1091
. "$T/plot.env"

term="pngcairo size 1500,650 font 'DejaVu Sans,11'"
gnuplot -e "set terminal" 2>/dev/null | grep -q pngcairo || term="png size 1500,650"
width=$(( panels == 2 ? 1500 : 900 ))
term=${term/1500/$width}

panel() { # panel DATAFILE XLABEL
    cat <<EOF
set title "$2" noenhanced
plot "$1" using 1:3:7:xtic(2) with boxes lc rgb variable notitle, \
     "" using 1:3:4:5 with yerrorbars lc rgb "black" pt 7 ps 0.5 lw 1.5 notitle, \
     "" using 1:5:6 with labels offset 0,0.9 notitle
EOF
}
{
    echo "set terminal $term"
    echo "set output '$png'"
    echo "set datafile separator '\t'"
    echo "set style fill solid 0.75 border rgb 'black'"
    echo "set boxwidth 0.62"
    echo "set grid ytics"
    echo "set yrange [0:*]"
    echo "set offsets 0.5, 0.5, 0, 0"
    echo "set ylabel 'launch loop, ms'"
    echo "set xtics nomirror noenhanced"
    echo "set bmargin 5"
    echo "set multiplot layout 1,$panels title \"$(cat "$T/title.txt")\\n$(cat "$T/sub.txt")\" noenhanced"
    [ "$have_kw" = 1 ] && panel "$T/kw.dat" "known-work launch loop ($(cat "$T/kwargs.txt"))"
    [ "$have_torch" = 1 ] && panel "$T/torch.dat" "PyTorch x.add_(1) loop, torch-launch.py ($(cat "$T/targs.txt"))"
    echo "unset multiplot"
} >"$T/plot.gp"
mkdir -p "$(dirname "$png")"
gnuplot "$T/plot.gp"
echo "plot.sh: wrote $png"
