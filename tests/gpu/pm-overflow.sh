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
# With "candidates" (issue 48): the cheap configuration that reads the
# same.  The default ten (the costly pair: cur) against the same ten with
# the tensor pipe read from its realtime counter (rt), with occupancy from
# the realtime warps counter too (rtw), and with SM active, occupancy and
# the tensor pipe from XLA's one counter group TPC.TriageCompute (triage),
# each row 2.5 s at the daemon's settings, the sets interleaved and run
# twice, idle, under the stream triad and under cuBLAS GEMMs (the cost);
# then each set sampled at 100 ms over pm-load's whole run (stream, GEMM,
# WMMA, copies) with its phase means (the values).
#
# usage: OUT=DIR tests/gpu/pm-overflow.sh [overflow|cost|candidates]
#   (after tests/gpu/pm-probe.sh build); writes OUT/pm-overflow.txt,
#   OUT/pm-cost.txt or OUT/pm-candidates.txt
set -u
mode=${1:-overflow}
case $mode in overflow | cost | candidates) ;; *) echo "pm-overflow.sh: unknown mode '$mode' (overflow, cost or candidates)" >&2; exit 2 ;; esac
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
# The candidates for the same three numbers at DCGM's cost (issue 48)
PE=.avg.pct_of_peak_sustained_elapsed
TENRT=sm__pipe_tensor_cycles_active_realtime$PE
OCCRT=sm__warps_active_realtime$PE
TC=TPC.TriageCompute
TRIAGE=$TC.sm__cycles_active$PE,$TC.tpc__warps_active_realtime$PE,$TC.sm__pipe_tensor_cycles_active_realtime$PE
W=$(mktemp -d /tmp/pm-overflow.XXXXXX)
[ "$mode" = cost ] && R=$OUT/pm-cost.txt || R=$OUT/pm-overflow.txt
[ "$mode" = candidates ] && R=$OUT/pm-candidates.txt
: >"$R"
D="--interval-ns 100000000 --hwbuf 67108864 --max-samples 20 --decode-ms 200"
if [ "$mode" = candidates ]; then
    trap 'rm -rf "$W"' EXIT
    sets() {
        cat <<SETS
cur|$DM
rt|$SMA,$OCC,$TENRT,$REST
rtw|$SMA,$OCCRT,$TENRT,$REST
triage|$TRIAGE,$REST
SETS
    }
    crow() { # name metrics
        # shellcheck disable=SC2086 # D is a list of options
        timeout 20 "$B/pm-probe" sample --dev 0 --metrics "$2" --duration-ms 2500 $D >"$W/c.out" 2>&1
        echo "== $1 rc=$?" >>"$R"
        grep -E 'RESULT .*(counter_data_image|samples=|decode_cpu_ms|process_cpu_ms)' "$W/c.out" >>"$R"
    }
    cost_load() { # load [pm-load args]: the sets interleaved, twice
        local load=$1 lp=
        shift
        if [ $# -gt 0 ]; then
            "$B/pm-load" "$@" >"$W/load-$load.out" 2>&1 &
            lp=$!
            sleep 2
        fi
        for rep in 1 2; do
            while IFS='|' read -r name m; do crow "cost-$load-$name-$rep" "$m"; done < <(sets)
        done
        if [ -n "$lp" ]; then
            kill "$lp" 2>/dev/null
            wait "$lp" 2>/dev/null
            sleep 1
        fi
    }
    "$B/pm-load" calibrate >"$W/calib.out" 2>&1
    grep calib "$W/calib.out" >>"$R"
    read -r SI GI WI < <(sed -n 's/.*stream_iters=\([0-9]*\) gemm_iters=\([0-9]*\) wmma_iters=\([0-9]*\).*/\1 \2 \3/p' "$W/calib.out")
    SI=${SI:-2560} GI=${GI:-1465} WI=${WI:-854}
    cost_load idle
    cost_load stream run 200000 1 0
    cost_load gemm run 0 $((GI * 25)) 0
    # The values: each set over pm-load's phases, as pm-probe's phase means.
    while IFS='|' read -r name m; do
        rm -f "$W/stop" "$W/ready"
        # shellcheck disable=SC2086 # D is a list of options
        timeout 60 "$B/pm-probe" sample --dev 0 --metrics "$m" $D --max-samples 40 \
            --stop-file "$W/stop" --ready "$W/ready" --phases-from "$W/v.load" >"$W/v.out" 2>&1 &
        sp=$!
        for _ in $(seq 300); do [ -e "$W/ready" ] && break; sleep 0.1; done
        timeout 60 "$B/pm-load" run "$SI" "$GI" "$WI" >"$W/v.load" 2>&1
        sleep 0.3
        touch "$W/stop"
        wait $sp
        echo "== values-$name rc=$?" >>"$R"
        grep -E 'RESULT (phase_means|sample (samples=|decode_cpu_ms|process_cpu_ms))' "$W/v.out" >>"$R"
        grep -E '^PMLOAD phase' "$W/v.load" >>"$R"
    done < <(sets)
    cat "$R"
    exit 0
fi
"$B/pm-load" run 200000 1 0 >"$W/load.out" 2>&1 &
lp=$!
trap 'kill $lp 2>/dev/null; rm -rf "$W"' EXIT
sleep 1
i=0
# name | metrics | pm-probe sample's settings; idle: whether the row runs idle too
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
