#!/usr/bin/env bash
# PM sampling probe for issue 34 (device-level GPU metrics in cuptimond).
# See docs/reference-pmsampling.md.
#
#   tests/gpu/pm-probe.sh build
#       Builds tests/gpu/build/pm/pm-probe (gcc, C) and pm-load (nvcc, sm_90)
#       against $CUDA_HOME (default /usr/local/cuda), then runs the host-only
#       part (metric listing and one-pass check for GH100; no GPU needed).
#
#   OUT=dir tests/gpu/pm-probe.sh run
#       On the GPU host: every probe step (about 2 minutes on an idle H200),
#       each under a timeout, failures recorded and skipped.  Writes into
#       $OUT (at most 5 files):
#         summary.txt         every step's result codes, RESULT/MEM/CLOCK lines
#         log.txt             full output of every step (trimmed)
#         samples-10ms.csv    per-sample values, 10 ms sampling while pm-load runs
#         cost.csv            pm-load phase times with and without sampling
#         metrics-GH100.txt   the chip's PM sampling base metrics (with the
#                             device's counter availability image)
#
# Environment: CUDA_HOME, NCU (default $CUDA_HOME/bin/ncu), PM_BUDGET_S
# (default 170: steps that would start later are skipped), PM_DEV (CUDA
# ordinal, default 0).
set -u
set -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
B=$here/build/pm
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
P=$B/pm-probe
L=$B/pm-load
DEV=${PM_DEV:-0}

build() {
    set -e
    mkdir -p "$B/include"
    # cupti_profiler_host.h includes <string> (C++); an empty one lets C use it.
    : >"$B/include/string"
    local nvcc=$CUDA_HOME/bin/nvcc
    [ -x "$nvcc" ] || nvcc=$(command -v nvcc)
    echo "  CC       tests/gpu/build/pm/pm-probe"
    ${CC:-gcc} -std=gnu11 -O2 -g -Wall -Wextra -Werror \
        -I"$CUDA_HOME/include" -I"$B/include" \
        "$here/pm-probe.c" -o "$B/pm-probe" \
        -L"$CUDA_HOME/lib64" -lcupti -ldl -lm \
        -Wl,-rpath,"$CUDA_HOME/lib64" -Wl,-rpath,/usr/local/cuda/lib64
    echo "  NVCC     tests/gpu/build/pm/pm-load"
    "$nvcc" -O2 -std=c++17 -Xcompiler -Wall \
        -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
        "$here/pm-load.cu" -o "$B/pm-load" -ldl
    set +e
    echo "  RUN      pm-probe host --chip GH100 (no GPU needed)"
    "$P" host --chip GH100 --set all --list "$B/metrics-GH100-offline.txt" >"$B/host-GH100.txt" 2>&1
    local rc=$?
    grep -E '^RESULT (cupti_api|max_hw|base_metrics|full_set|chosen_set|not_in_set)' "$B/host-GH100.txt" | sed 's/^/    /'
    echo "  host-only output: tests/gpu/build/pm/host-GH100.txt (rc=$rc), metric list: metrics-GH100-offline.txt"
    return 0
}

# ------------------------------------------------------------------ run
T0=$(date +%s)
elapsed() { echo $(($(date +%s) - T0)); }

# log_step NAME FILE...: append files to log.txt (trimmed) and the interesting
# lines to summary.txt
log_step() {
    local name=$1 f
    shift
    for f in "$@"; do
        [ -e "$f" ] || continue
        {
            echo "=================== $name: $(basename "$f")"
            if [ "$(wc -l <"$f")" -gt 400 ]; then
                head -n 250 "$f"
                echo "... ($(wc -l <"$f") lines, trimmed) ..."
                tail -n 120 "$f"
            else
                cat "$f"
            fi
        } >>"$OUT/log.txt"
        grep -E '^(RESULT|MEM|CLOCK|SMI|DECODE|EVAL|PMLOAD|STEP|TRY|INFO (going|no one|no CUDA|--no|chip|libcuda|nvml))' "$f" |
            grep -vE '^STEP (cuptiProfilerHostGetBaseMetrics|cuptiProfilerHostConfigAddMetrics) .*rc=0 ' |
            head -n 160 | sed "s/^/  [$(basename "$f")] /" >>"$OUT/summary.txt"
    done
}

# budget_ok NEED_S: is there time left for a step of about NEED_S seconds?
budget_ok() {
    local need=$1
    if [ $(($(elapsed) + need)) -gt "${PM_BUDGET_S:-170}" ]; then
        echo "== SKIPPED (budget: $(elapsed)s spent, step needs ~${need}s)" >>"$OUT/summary.txt"
        return 1
    fi
    return 0
}

# step NAME TIMEOUT CMD...: run CMD, output to $W/NAME.out
step() {
    local name=$1 to=$2
    shift 2
    local t
    t=$(date +%s%N)
    echo "== $name: $*" >>"$OUT/summary.txt"
    timeout "$to" "$@" >"$W/$name.out" 2>&1
    local rc=$?
    echo "   rc=$rc ($((($(date +%s%N) - t) / 1000000)) ms)" >>"$OUT/summary.txt"
    log_step "$name" "$W/$name.out"
    return $rc
}

# wait_ready FILE PID SECONDS
wait_ready() {
    local f=$1 pid=$2 n=$(($3 * 10))
    while [ "$n" -gt 0 ]; do
        [ -e "$f" ] && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
        n=$((n - 1))
    done
    return 1
}

# start_sampler NAME ARGS...: pm-probe sample in the background, waits until
# it has started sampling (or failed); sets SPID
start_sampler() {
    local name=$1
    shift
    rm -f "$W/$name.stop" "$W/$name.ready"
    timeout 60 "$P" sample --dev "$DEV" --stop-file "$W/$name.stop" --ready "$W/$name.ready" "$@" \
        >"$W/$name.probe" 2>&1 &
    SPID=$!
    if wait_ready "$W/$name.ready" "$SPID" 40; then
        echo "   sampler $name ready: $(cat "$W/$name.ready" 2>/dev/null)" >>"$OUT/summary.txt"
    else
        echo "   sampler $name NOT ready (exited or timed out)" >>"$OUT/summary.txt"
    fi
}

stop_sampler() {
    local name=$1
    touch "$W/$name.stop"
    wait "$SPID"
    echo "   sampler $name rc=$?" >>"$OUT/summary.txt"
}

cost_rows() { # NAME INTERVAL FILE
    grep '^PMLOAD phase ' "$3" 2>/dev/null | sed -E 's/.*name=([a-z0-9]+) .*wall_ms=([0-9.]+) iters=([0-9]+) rate=([0-9.]+)([A-Za-z/]+).*/\1,\2,\3,\4,\5/' |
        while IFS= read -r row; do echo "$1,$2,$row"; done >>"$OUT/cost.csv"
}

# sampled NAME INTERVAL_NS DECODE_MS [pm-load args...]
sampled() {
    local name=$1 interval=$2 dms=$3
    shift 3
    budget_ok 12 || return 0
    echo "== $name: sampling every ${interval} ns while pm-load runs $SI $GI $WI $*" >>"$OUT/summary.txt"
    local csv=()
    [ "$name" = s10ms ] && csv=(--csv "$OUT/samples-10ms.csv")
    start_sampler "$name" --interval-ns "$interval" --decode-ms "$dms" --phases-from "$W/$name.load" "${csv[@]}"
    timeout 40 "$L" run "$SI" "$GI" "$WI" "$@" >"$W/$name.load" 2>&1
    echo "   pm-load rc=$?" >>"$OUT/summary.txt"
    sleep 0.2
    stop_sampler "$name"
    log_step "$name" "$W/$name.probe" "$W/$name.load"
    cost_rows "$name" "$interval" "$W/$name.load"
}

run() {
    : "${OUT:?set OUT to the output directory}"
    mkdir -p "$OUT"
    OUT=$(cd "$OUT" && pwd)
    rm -f "$OUT/summary.txt" "$OUT/log.txt" "$OUT/cost.csv" "$OUT/samples-10ms.csv" "$OUT/metrics-GH100.txt"
    W=$(mktemp -d "${TMPDIR:-/tmp}/pm-probe.XXXXXX")
    export LD_LIBRARY_PATH=$CUDA_HOME/lib64:$CUDA_HOME/extras/CUPTI/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    for x in "$P" "$L"; do
        [ -x "$x" ] || { echo "missing $x: run 'tests/gpu/pm-probe.sh build' first" >&2; exit 1; }
    done
    echo "run,interval_ns,phase,wall_ms,iters,rate,unit" >"$OUT/cost.csv"
    {
        echo "pm-probe run $(date -u +%FT%TZ) host=$(hostname) uid=$(id -u) kernel=$(uname -r)"
        echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
        ldd "$P" | grep -E 'cupti|nvperf' | sed 's/^/  ldd pm-probe: /'
        grep -E 'RmProfilingAdminOnly' /proc/driver/nvidia/params 2>/dev/null | sed 's/^/  /'
        nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,persistence_mode,mig.mode.current,clocks.sm,clocks.max.sm,memory.used,memory.total --format=csv 2>&1 | sed 's/^/  smi: /'
        nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv 2>&1 | sed 's/^/  smi apps: /'
        # DCGM profiling (dcgm-exporter DCP metrics) holds the same counters
        echo "  dcgm/nsys processes: $(pgrep -a -f 'nv-hostengine|dcgm|nsys' 2>/dev/null | grep -v pgrep | head -n 5 | tr '\n' ';')"
        NCU=${NCU:-$CUDA_HOME/bin/ncu}
        if [ -x "$NCU" ]; then echo "  ncu: $NCU $("$NCU" --version 2>&1 | tail -n 1)"; else echo "  ncu: not found at $NCU"; fi
    } >>"$OUT/summary.txt" 2>&1

    # 1. host-only part, here too
    step host 30 "$P" host --chip GH100 --set all

    # 2. bring-up variants: context or not, cuInit or not, profiler init or
    #    not, hardware buffer size, CUDA_VISIBLE_DEVICES hiding the GPU
    budget_ok 8 && step dev-none 30 "$P" device --dev "$DEV" --ctx none --interval-ns 1000000 --ms 1000 --set all --list "$W/metrics.txt"
    [ -s "$W/metrics.txt" ] && cp "$W/metrics.txt" "$OUT/metrics-GH100.txt"
    budget_ok 8 && step dev-primary 25 "$P" device --dev "$DEV" --ctx primary --interval-ns 1000000 --ms 500
    budget_ok 8 && step dev-create 25 "$P" device --dev "$DEV" --ctx create --interval-ns 1000000 --ms 500
    budget_ok 8 && step dev-nocuinit 25 "$P" device --dev "$DEV" --no-cuinit --interval-ns 1000000 --ms 500
    budget_ok 8 && step dev-noprofinit 25 "$P" device --dev "$DEV" --no-profinit --interval-ns 1000000 --ms 500
    budget_ok 8 && step dev-hwbuf8M 25 "$P" device --dev "$DEV" --hwbuf 8388608 --interval-ns 1000000 --ms 500
    budget_ok 8 && step dev-hwbuf512M 25 "$P" device --dev "$DEV" --hwbuf 536870912 --interval-ns 1000000 --ms 500
    budget_ok 8 && step dev-hidden 25 env CUDA_VISIBLE_DEVICES= "$P" device --dev 0 --interval-ns 1000000 --ms 300

    # 3. clocks and workload calibration
    budget_ok 5 && step clock 30 "$L" clock
    SI=2500 GI=1000 WI=0
    if budget_ok 10 && step calibrate 60 "$L" calibrate; then
        SI=$(sed -n 's/.*stream_iters=\([0-9]*\).*/\1/p' "$W/calibrate.out" | tail -n 1)
        GI=$(sed -n 's/.*gemm_iters=\([0-9]*\).*/\1/p' "$W/calibrate.out" | tail -n 1)
        WI=$(sed -n 's/.*wmma_iters=\([0-9]*\).*/\1/p' "$W/calibrate.out" | tail -n 1)
        SI=${SI:-2500} GI=${GI:-1000} WI=${WI:-0}
    fi
    echo "== workload: stream_iters=$SI gemm_iters=$GI wmma_iters=$WI" >>"$OUT/summary.txt"

    # 4. cost and values: the same workload without and with sampling
    if budget_ok 8; then
        step base1 40 "$L" run "$SI" "$GI" "$WI"
        cost_rows base1 0 "$W/base1.out"
    fi
    sampled s10ms 10000000 100
    sampled s1ms 1000000 50
    sampled s100us 100000 20
    if budget_ok 8; then
        step base2 40 "$L" run "$SI" "$GI" "$WI"
        cost_rows base2 0 "$W/base2.out"
    fi

    # 5. conflicts: a second PM sampler on the same device; ncu on it
    if budget_ok 8; then
        echo "== conflict: second pm-probe while one samples" >>"$OUT/summary.txt"
        start_sampler conflictA --interval-ns 10000000 --decode-ms 100
        step conflictB 30 "$P" sample --dev "$DEV" --interval-ns 10000000 --duration-ms 500
        stop_sampler conflictA
        log_step conflictA "$W/conflictA.probe"
    fi
    NCU=${NCU:-$CUDA_HOME/bin/ncu}
    if [ -x "$NCU" ]; then
        if budget_ok 20; then
            step ncu-alone 45 "$NCU" --metrics sm__cycles_active.avg "$L" small
        fi
        if budget_ok 25; then
            echo "== ncu while pm-probe samples (10 ms)" >>"$OUT/summary.txt"
            start_sampler ncuA --interval-ns 10000000 --decode-ms 100
            echo "   ncu start realtime_ns=$(date +%s%N)" >>"$OUT/summary.txt"
            step ncu-while-sampling 45 "$NCU" --metrics sm__cycles_active.avg "$L" small
            echo "   ncu end realtime_ns=$(date +%s%N)" >>"$OUT/summary.txt"
            sleep 0.5
            stop_sampler ncuA
            log_step ncuA "$W/ncuA.probe"
        fi
    else
        echo "== ncu: not found at $NCU; ncu cases not run" >>"$OUT/summary.txt"
    fi

    # 6. CUPTI activity tracing inside the job (what cuptimon's shim does)
    #    while the node samples
    sampled s10ms-activity 10000000 100 --activity

    # 7. trigger mode and overflow
    budget_ok 5 && step sysclk 30 "$P" sample --dev "$DEV" --trigger sysclk --interval-ns 1000000 --duration-ms 1000 --decode-ms 100
    budget_ok 6 && step overflow-oldest 30 "$P" sample --dev "$DEV" --interval-ns 20000 --hwbuf 4194304 \
        --first-decode-ms 1500 --decode-ms 100 --duration-ms 2000 --max-samples 20000 --append oldest
    budget_ok 6 && step overflow-latest 30 "$P" sample --dev "$DEV" --interval-ns 20000 --hwbuf 4194304 \
        --first-decode-ms 1500 --decode-ms 100 --duration-ms 2000 --max-samples 20000 --append latest

    {
        echo "== cost table (wall ms per phase; delta vs the mean of base1 and base2)"
        awk -F, 'NR > 1 { w[$1 "," $3] = $4; if ($1 ~ /^base/) { b[$3] += $4; nb[$3]++ } ; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
            END { for (i = 1; i <= n; i++) { r = order[i]; line = sprintf("   %-16s", r);
                    split("stream gemm wmma h2d d2h", ph, " ");
                    for (k = 1; k <= 5; k++) { p = ph[k]; key = r "," p;
                        if (key in w && nb[p]) line = line sprintf(" %s=%.1f (%+.2f%%)", p, w[key], 100 * (w[key] / (b[p] / nb[p]) - 1));
                        else if (key in w) line = line sprintf(" %s=%.1f", p, w[key]) }
                    print line } }' "$OUT/cost.csv"
    } >>"$OUT/summary.txt"
    echo "== done in $(elapsed)s; files: $(cd "$OUT" && ls | tr '\n' ' ')" >>"$OUT/summary.txt"
    # keep log.txt under 1.5 MB
    if [ "$(stat -c %s "$OUT/log.txt")" -gt 1500000 ]; then
        head -c 1400000 "$OUT/log.txt" >"$W/log.trim" && echo "... (log trimmed)" >>"$W/log.trim" && mv "$W/log.trim" "$OUT/log.txt"
    fi
    rm -rf "$W"
    tail -n 1 "$OUT/summary.txt"
}

case "${1:-}" in
    build) build ;;
    run) run ;;
    *) sed -n '2,26p' "$0"; exit 2 ;;
esac
