#!/bin/bash
# LD_PRELOAD: the shim points the driver's injection hook at itself, starts
# at cuInit, and a process that never initialises CUDA never connects.
. "$top_srcdir/tests/integration/lib.sh"

start_daemon
LD_PRELOAD="${ASAN_RT:+$ASAN_RT }$SHIM" sh -c 'echo "$CUDA_INJECTION64_PATH"' > "$T/inj.txt"
grep -q "libcuptimon" "$T/inj.txt" || fail "preloading did not set CUDA_INJECTION64_PATH: $(cat "$T/inj.txt")"
# Not a CUDA program: no session.
LD_PRELOAD="${ASAN_RT:+$ASAN_RT }$SHIM" "$WORKLOAD" --no-init --kernels 10 --report "$T/none.json"
workload_preload --kernels 20000 --report "$T/pre.json" --linger-ms 300
stop_daemon
n=$(find "$T/out/archive" -name meta.json | wc -l)
[ "$n" -eq 1 ] || fail "expected exactly one session (the CUDA one), found $n"
python3 "$top_srcdir/tests/integration/check-archive.py" "$CTL" "$T/out" "$T/pre.json"
echo "ok"
