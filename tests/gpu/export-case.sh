#!/bin/bash
# Issue 50's item 4: `nsys stats` on cuptimonctl's SQLite export of a real
# job, against `cuptimonctl stats` on the same archive.  known-work (every
# kernel, copy and memset known) runs under the shim with its API calls
# and NVTX archived too (CUPTIMON_ACTIVITIES), then:
#   cuptimonctl export OUT/archive --type sqlite -o x.sqlite
#   nsys stats --report cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,
#              cuda_gpu_mem_size_sum,cuda_api_sum --format csv x.sqlite
#   cuptimonctl stats OUT/archive --report all --format json
# and export-check.py compares them row by row (names, counts, totals,
# medians, min, max: equal, as both read the same records; nsys' medians
# and ours are exact).  Without nsys on the machine, the same recipes run
# through Python's sqlite3 instead (RESULT says which).
# usage: OUT=DIR tests/gpu/export-case.sh BUILD_DIR
#   (known-work from tests/gpu/build.sh; LD_LIBRARY_PATH=$PWD/.devlibs when
#   the build came from another machine; NSYS=path/to/nsys to choose one)
#   writes OUT/export-report.txt (ends RESULT PASS/FAIL) and OUT/export.sqlite.
set -u
B=$(cd "$1" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-export-out}; mkdir -p "$OUT"
W=$(mktemp -d /tmp/cuptimon-gpuexport.XXXXXX)
export CUPTIMON_SOCKET=$W/p.sock CUPTIMON_CONTROL_SOCKET=$W/c.sock
CTL=$B/cli/cuptimonctl
KW=$here/build/known-work
REPORT=$OUT/export-report.txt
NSYS=${NSYS:-$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda*/nsight-systems-*/bin/nsys \
    /usr/local/cuda/bin/nsys 2>/dev/null | tail -1)}
# CUPTIMON_GPU_DRYRUN=1: no GPU, the libcupti test double's workload stands
# in for known-work (the plumbing checked anywhere, as run.sh's dry run).
DRY=${CUPTIMON_GPU_DRYRUN:-0}
if [ "$DRY" = 1 ]; then
    KW=$B/tests/fakecupti/cuptimon-workload
    KW_ARGS=(--kernels 3000 --names "_Z5scaleILi2EEvPfi,ns_add_one" --memcpy-every 7 --memset-every 11
        --report "$W/kw.json" --quiet)
else
    KW_ARGS=(--report "$W/kw.json")
fi
[ -x "$KW" ] || { echo "$KW is missing: run tests/gpu/build.sh first (dry run: make check)"; exit 2; }
# known-work does not link libcupti: the shim dlopens it by soname.
KW_LDPATH=${LD_LIBRARY_PATH:-}
if ! ldconfig -p 2>/dev/null | grep -q 'libcupti\.so\.13 '; then
    for d in /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64; do
        [ -e "$d/libcupti.so.13" ] && { KW_LDPATH=$d${KW_LDPATH:+:$KW_LDPATH}; break; }
    done
fi
"$B/daemon/cuptimond" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
    --output-dir "$W/out" 2>"$W/d.log" &
dpid=$!
trap 'kill $dpid 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 100); do "$CTL" status >/dev/null 2>&1 && break; sleep 0.1; done
{
    echo "export-case: known-work under the shim, API calls and NVTX always on"
    CUDA_INJECTION64_PATH=$B/client-lib/.libs/libcuptimon.so CUPTIMON_LABEL=export-case \
        CUPTIMON_ACTIVITIES=kernel,memcpy,memset,runtime,driver,marker,synchronization \
        LD_LIBRARY_PATH=$KW_LDPATH timeout 120 "$KW" "${KW_ARGS[@]}" >"$W/kw.out" 2>&1 ||
        { echo "FAIL: known-work"; tail -n 20 "$W/kw.out"; }
    kill -TERM $dpid; wait $dpid
    "$CTL" export "$W/out/archive" --type sqlite -o "$OUT/export.sqlite" || echo "FAIL: export"
    "$CTL" stats "$W/out/archive" --report all --format json -o "$W/stats.json" -q ||
        echo "FAIL: stats"
    if [ -n "$NSYS" ] && [ -x "$NSYS" ]; then
        echo "nsys: $NSYS ($("$NSYS" --version 2>&1 | head -1))"
        "$NSYS" stats --report cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum,cuda_api_sum \
            --format csv --output "$W/nsys" --force-overwrite true "$OUT/export.sqlite" \
            >"$W/nsys.out" 2>&1 || { echo "FAIL: nsys stats"; tail -n 30 "$W/nsys.out"; }
        cp "$W/nsys.out" "$OUT/nsys-stats.out"
        cp "$W"/nsys_*.csv "$OUT"/ 2>/dev/null
        python3 "$here/export-check.py" nsys "$W/nsys" "$W/stats.json" "$W/kw.json"
    else
        echo "nsys: not found (NSYS=...): the recipes run through Python's sqlite3 instead"
        python3 "$here/export-check.py" sqlite "$OUT/export.sqlite" "$W/stats.json" "$W/kw.json"
    fi
} >"$REPORT" 2>&1
rc=0
grep -qx "RESULT PASS.*" "$REPORT" && ! grep -q "^FAIL" "$REPORT" || rc=1
cp "$W/d.log" "$OUT/export-daemon.log"
cat "$REPORT"
exit $rc
