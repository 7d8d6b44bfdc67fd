#!/bin/sh
# The cost of the shim as NCCL's profiler plugin on NCCL's threads (issue
# 46): the NCCL double (tests/fakecupti/cuptimon-fakenccl --bench) calls the
# plugin for N collectives of two kernel channels each, back to back, with a
# daemon taking the records, and prints ns per collective (JSON).  Without
# the shim NCCL calls no plugin: this is the whole added cost per collective
# on the enqueuing thread and the proxy thread together.
# BENCH_NCCL_ARGS="N ROUNDS" (default "1000000 3").
set -eu
: "${top_builddir:?run through make bench-nccl}"
n=${1:-1000000}
rounds=${2:-3}
T=$(mktemp -d "${TMPDIR:-/tmp}/cuptimon-bench-nccl.XXXXXX")
export CUPTIMON_SOCKET=$T/p.sock CUPTIMON_CONTROL_SOCKET=$T/c.sock
"$top_builddir/daemon/cuptimond" --socket "$CUPTIMON_SOCKET" --control-socket \
    "$CUPTIMON_CONTROL_SOCKET" --output-dir "$T/out" 2>"$T/d.log" &
dpid=$!
trap 'kill $dpid 2>/dev/null; wait $dpid 2>/dev/null; rm -rf "$T"' EXIT
i=0
while ! "$top_builddir/cli/cuptimonctl" status >/dev/null 2>&1 && [ $i -lt 100 ]; do
    sleep 0.05
    i=$((i + 1))
done
for r in $(seq 1 "$rounds"); do
    CUDA_INJECTION64_PATH=$top_builddir/client-lib/.libs/libcuptimon.so \
        "$top_builddir/tests/fakecupti/cuptimon-fakenccl" --bench "$n" 2>/dev/null
done
