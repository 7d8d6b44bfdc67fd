#!/bin/bash
# No daemon: the job runs at full speed and exits normally.  A daemon that
# starts while the job runs gets everything the pool held.
. "$top_srcdir/tests/integration/lib.sh"

# 1. Never a daemon: the job finishes, and quickly (the exit hand-off does
#    not wait for a daemon that is not there).
start=$(date +%s%N)
workload --kernels 50000 --report "$T/alone.json" 2>"$T/alone.err" || fail "workload failed without a daemon"
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$elapsed_ms" -lt 5000 ] || fail "without a daemon the job took $elapsed_ms ms"
! grep -qi "error" "$T/alone.err" || { cat "$T/alone.err"; fail "the shim complained without a daemon"; }

# 2. The daemon comes up while the job runs: buffers completed before it was
#    there are held in the pool and delivered once it is (CUPTIMON_POOL_SLOTS
#    sized so that nothing is declined).
CUPTIMON_POOL_SLOTS=64 CUPTIMON_SLOT_SIZE=256K workload --kernels 30000 --rate 20000 \
    --report "$T/late.json" --linger-ms 2500 &
wpid=$!
sleep 0.8
start_daemon --flush-period 0.2
wait "$wpid" || fail "the workload failed"
stop_daemon
python3 "$top_srcdir/tests/integration/check-archive.py" "$CTL" "$T/out" "$T/late.json"
echo "ok"
