#!/bin/bash
# Which of the daemon's PM sampling settings makes CUPTI report a hardware
# buffer overflow at 10 ms (issue 34: pm-case saw cuptimond restart on
# overflows within a second of each start at 10 ms, where pm-probe at 10 ms
# with its own settings never saw one).  While one pm-load stream phase runs
# (memory bound, ~15 s), pm-probe samples five times for 2.5 s each, one
# setting changed at a time, and prints each run's decode results.
#
# usage: OUT=DIR tests/gpu/pm-overflow.sh   (after tests/gpu/pm-probe.sh build)
set -u
here=$(cd "$(dirname "$0")" && pwd)
B=$here/build/pm
OUT=${OUT:-$PWD/gpu-pm-overflow}
mkdir -p "$OUT"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export LD_LIBRARY_PATH=$CUDA_HOME/lib64:$CUDA_HOME/extras/CUPTI/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
W=$(mktemp -d /tmp/pm-overflow.XXXXXX)
"$B/pm-load" run 20000 1 0 >"$W/load.out" 2>&1 &
lp=$!
sleep 1
i=0
# name | settings (interval 10 ms throughout)
while IFS='|' read -r name args; do
    i=$((i + 1))
    # shellcheck disable=SC2086 # args is a list of options
    timeout 20 "$B/pm-probe" sample --dev 0 --interval-ns 10000000 --duration-ms 2500 $args \
        >"$W/$i.out" 2>&1
    rc=$?
    {
        echo "== $name ($args) rc=$rc"
        grep -E 'SetConfig|max_samples=|overflow_flags|samples_per_s|DECODE' "$W/$i.out" | head -n 12
    } >>"$OUT/pm-overflow.txt"
done <<'EOF'
daemon|--hwbuf 33554432 --max-samples 56 --decode-ms 200
probe|--hwbuf 67108864 --decode-ms 100
daemon-64M|--hwbuf 67108864 --max-samples 56 --decode-ms 200
daemon-400|--hwbuf 33554432 --max-samples 400 --decode-ms 200
daemon-100ms|--hwbuf 33554432 --decode-ms 100
EOF
kill $lp 2>/dev/null
wait $lp 2>/dev/null
grep -E '^PMLOAD phase' "$W/load.out" >>"$OUT/pm-overflow.txt"
rm -rf "$W"
cat "$OUT/pm-overflow.txt"
