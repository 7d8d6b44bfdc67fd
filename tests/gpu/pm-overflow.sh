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
# (20261206-h100-suite-pm-overflow).  The two -notensor rows leave the
# tensor pipe out: whether the pair that makes the decoding cost (see
# "cost") is also what fills the buffer.
#
# With "cost": what decoding costs the CPU by metric set (the daemon's
# sampler used about 0.4 of a core under a memory-bound load).  At the
# daemon's settings (100 ms, 64 MiB, a decode every 200 ms) one row per set:
# cuptimond's ten metrics, its three SM ones, SM active with the tensor
# pipe, the two SM ones without it, the tensor pipe and the two SM ones each
# with the seven others, the DRAM and PCIe ones and the clock alone, under
# the stream phase (the rows marked idle again with the GPU idle); each
# prints the decode's and the evaluation's CPU, the process's CPU and the
# bytes per sample.  Found on
# the H100 (docs/gpu-runs/20261207-h100-sandbox-pm-cost): the tensor pipe
# in one configuration with SM active or occupancy costs about half a core
# on a busy GPU (the stream or a GEMM alike); every set without that pair,
# 1-2 % of a core.
#
# usage: OUT=DIR tests/gpu/pm-overflow.sh [overflow|cost]
#   (after tests/gpu/pm-probe.sh build); writes OUT/pm-overflow.txt or
#   OUT/pm-cost.txt
set -u
mode=${1:-overflow}
case $mode in overflow | cost) ;; *) echo "pm-overflow.sh: unknown mode '$mode' (overflow or cost)" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
B=$here/build/pm
OUT=${OUT:-$PWD/gpu-pm-$mode}
mkdir -p "$OUT"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export LD_LIBRARY_PATH=$CUDA_HOME/lib64:$CUDA_HOME/extras/CUPTI/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for x in "$B/pm-probe" "$B/pm-load"; do
    [ -x "$x" ] || { echo "pm-overflow.sh: $x is missing (tests/gpu/pm-probe.sh build)" >&2; exit 2; }
done
# cuptimond's default metrics on GH100 (daemon/gpm.c, NVLink left out)
SMA=sm__cycles_active.avg.pct_of_peak_sustained_elapsed
OCC=sm__warps_active.avg.pct_of_peak_sustained_elapsed
TEN=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed
SM=$SMA,$OCC,$TEN
DRAM=dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum.per_second
DRAM=$DRAM,dram__bytes_write.sum.per_second
PCIE=pcie__read_bytes.sum.per_second,pcie__write_bytes.sum.per_second
CLK=gpc__cycles_elapsed.avg.per_second
REST=$DRAM,gr__cycles_active.avg.pct_of_peak_sustained_elapsed,$PCIE,$CLK
DM=$SM,$REST
W=$(mktemp -d /tmp/pm-overflow.XXXXXX)
[ "$mode" = cost ] && R=$OUT/pm-cost.txt || R=$OUT/pm-overflow.txt
: >"$R"
"$B/pm-load" run 200000 1 0 >"$W/load.out" 2>&1 &
lp=$!
trap 'kill $lp 2>/dev/null; rm -rf "$W"' EXIT
sleep 1
i=0
# name | metrics | pm-probe sample's settings; idle: whether the row runs idle too
D="--interval-ns 100000000 --hwbuf 67108864 --max-samples 20 --decode-ms 200"
rows() {
    if [ "$mode" = cost ]; then
        cat <<ROWS
all10|$DM|$D|idle
sm3|$SM|$D|idle
sm_tensor|$SMA,$TEN|$D|
sm2|$SMA,$OCC|$D|
tensor+7|$TEN,$REST|$D|
sm2+7|$SMA,$OCC,$REST|$D|
dram3|$DRAM|$D|idle
pcie2|$PCIE|$D|idle
clock1|$CLK|$D|idle
ROWS
        return
    fi
    cat <<ROWS
10ms-32M-d200|$DM|--interval-ns 10000000 --hwbuf 33554432 --max-samples 56 --decode-ms 200|
10ms-64M-d200|$DM|--interval-ns 10000000 --hwbuf 67108864 --max-samples 56 --decode-ms 200|idle
100ms-64M-d1000|$DM|--interval-ns 100000000 --hwbuf 67108864 --max-samples 36 --decode-ms 1000|idle
100ms-64M-d500|$DM|--interval-ns 100000000 --hwbuf 67108864 --max-samples 26 --decode-ms 500|
100ms-64M-d200|$DM|$D|
100ms-128M-d1000|$DM|--interval-ns 100000000 --hwbuf 134217728 --max-samples 36 --decode-ms 1000|
1s-64M-d1000|$DM|--interval-ns 1000000000 --hwbuf 67108864 --max-samples 18 --decode-ms 1000|
10ms-32M-d200-notensor|$SMA,$OCC,$REST|--interval-ns 10000000 --hwbuf 33554432 --max-samples 56 --decode-ms 200|
100ms-64M-d1000-notensor|$SMA,$OCC,$REST|--interval-ns 100000000 --hwbuf 67108864 --max-samples 36 --decode-ms 1000|
ROWS
}
run_row() { # name metrics args
    i=$((i + 1))
    # shellcheck disable=SC2086 # args is a list of options
    timeout 20 "$B/pm-probe" sample --dev 0 --metrics "$2" --duration-ms 2500 $3 >"$W/$i.out" 2>&1
    local rc=$?
    {
        echo "== $1 ($3) rc=$rc"
        grep -E '^DECODE' "$W/$i.out" | head -n 3
        grep -E 'RESULT .*(counter_data_image|samples=|samples_per_s|decode_cpu_ms|process_cpu_ms)' "$W/$i.out"
    } >>"$R"
}
while IFS='|' read -r name m args _; do run_row "stream-$name" "$m" "$args"; done < <(rows)
kill $lp 2>/dev/null
wait $lp 2>/dev/null
sleep 1
while IFS='|' read -r name m args idle; do
    [ "$idle" = idle ] && run_row "idle-$name" "$m" "$args"
done < <(rows)
cat "$R"
