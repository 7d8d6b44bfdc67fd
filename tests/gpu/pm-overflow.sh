#!/bin/bash
# Which PM sampling settings make CUPTI report a hardware buffer overflow on
# this GPU under a memory-bound load (issue 34).  While pm-load's stream
# phase runs, pm-probe samples for 2.5 s per row, one setting changed at a
# time, and prints each run's decode results; the last rows run with the
# GPU idle.
#
# Found so far on the H100 (docs/gpu-runs): at 10 ms a 32 MiB buffer
# overflowed before the first decode whatever the decode period, 64 MiB
# never did (20261205-h100-held-pm-edges); at 100 ms with a decode a second
# (the daemon's settings until 2026-12-06) 64 MiB overflowed before the
# first decode in 6 of 6 starts, after an ncu run or not
# (20261206-h100-suite-pm-overflow).
#
# usage: OUT=DIR tests/gpu/pm-overflow.sh   (after tests/gpu/pm-probe.sh build)
#   writes OUT/pm-overflow.txt
set -u
here=$(cd "$(dirname "$0")" && pwd)
B=$here/build/pm
OUT=${OUT:-$PWD/gpu-pm-overflow}
mkdir -p "$OUT"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export LD_LIBRARY_PATH=$CUDA_HOME/lib64:$CUDA_HOME/extras/CUPTI/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for x in "$B/pm-probe" "$B/pm-load"; do
    [ -x "$x" ] || { echo "pm-overflow.sh: $x is missing (tests/gpu/pm-probe.sh build)" >&2; exit 2; }
done
# cuptimond's default metrics on GH100 (daemon/gpm.c, NVLink left out)
DM=sm__cycles_active.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_elapsed
DM=$DM,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
DM=$DM,dram__bytes_read.sum.per_second,dram__bytes_write.sum.per_second,gr__cycles_active.avg.pct_of_peak_sustained_elapsed
DM=$DM,pcie__read_bytes.sum.per_second,pcie__write_bytes.sum.per_second,gpc__cycles_elapsed.avg.per_second
W=$(mktemp -d /tmp/pm-overflow.XXXXXX)
R=$OUT/pm-overflow.txt
: >"$R"
"$B/pm-load" run 200000 1 0 >"$W/load.out" 2>&1 &
lp=$!
trap 'kill $lp 2>/dev/null; rm -rf "$W"' EXIT
sleep 1
i=0
# name | pm-probe sample's settings
rows() {
    cat <<ROWS
10ms-32M-d200|--interval-ns 10000000 --hwbuf 33554432 --max-samples 56 --decode-ms 200
10ms-64M-d200|--interval-ns 10000000 --hwbuf 67108864 --max-samples 56 --decode-ms 200
100ms-64M-d1000|--interval-ns 100000000 --hwbuf 67108864 --max-samples 36 --decode-ms 1000
100ms-64M-d500|--interval-ns 100000000 --hwbuf 67108864 --max-samples 26 --decode-ms 500
100ms-64M-d200|--interval-ns 100000000 --hwbuf 67108864 --max-samples 20 --decode-ms 200
100ms-128M-d1000|--interval-ns 100000000 --hwbuf 134217728 --max-samples 36 --decode-ms 1000
1s-64M-d1000|--interval-ns 1000000000 --hwbuf 67108864 --max-samples 18 --decode-ms 1000
ROWS
}
run_row() { # name args
    i=$((i + 1))
    # shellcheck disable=SC2086 # args is a list of options
    timeout 20 "$B/pm-probe" sample --dev 0 --metrics "$DM" --duration-ms 2500 $2 >"$W/$i.out" 2>&1
    local rc=$?
    {
        echo "== $1 ($2) rc=$rc"
        grep -E '^DECODE' "$W/$i.out" | head -n 3
        grep -E 'RESULT .*(samples=|samples_per_s|decode_cpu_ms)' "$W/$i.out"
    } >>"$R"
}
while IFS='|' read -r name args; do run_row "stream-$name" "$args"; done < <(rows)
kill $lp 2>/dev/null
wait $lp 2>/dev/null
sleep 1
while IFS='|' read -r name args; do
    case $name in 10ms-64M-d200 | 100ms-64M-d1000) run_row "idle-$name" "$args" ;; esac
done < <(rows)
cat "$R"
