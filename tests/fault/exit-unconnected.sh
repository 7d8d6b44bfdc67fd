#!/bin/bash
# A short job whose shim is not connected at the moment the job exits (its
# connect attempts found the daemon's listen queue full: the daemon was
# busy, and it is waiting out its backoff) must still hand off its records
# within the exit-time bound of about a second once the daemon takes
# connections again, as DESIGN.md promises ("at process exit the shim
# force-flushes and hands off what is left with a bounded wait (about a
# second), so short jobs lose nothing").  Here the queue is full for the
# first 0.5 s of a 0.3 s job; the daemon then takes it at once.  Was bug 9
# (docs/FAULTS.md): the exit hand-off waited only while connected, so an
# unconnected shim gave up at once.  Now it waits while its last connect
# found the daemon's queue full (EAGAIN: a daemon is there), and still leaves
# at once when there is no daemon (no-daemon.sh).
. "$top_srcdir/tests/fault/fault-lib.sh"

start_daemon --flush-period 0.2
# Stopped, the daemon accepts nothing: the kernel queues as many
# connections as its backlog allows and refuses the rest (EAGAIN), as when
# it is too busy to accept.
kill -STOP "$DPID"
fill=$(queue_fill_count)
ulimit -n $((fill + 192)) 2>/dev/null || true
"$HOSTILE" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
    --count "$fill" --hold-ms 5000 idle-connections >"$T/h.out" 2>&1 &
h=$!
track "$h"
wait_for 50 grep -q "idle connections open" "$T/h.out" || { kill -CONT "$DPID"; fail "the queue did not fill"; }
grep -q "([1-9][0-9]* refused by the kernel)" "$T/h.out" ||
    { kill -CONT "$DPID"; fail "the daemon's listen queue did not fill: $(cat "$T/h.out")"; }
CUPTIMON_LABEL=short spawn_tracked --kernels 300 --rate 5000 --linger-ms 200 --quiet \
    --report "$T/short.json"
s=$SPAWNED
sleep 0.5
state="had already exited"
kill -0 "$s" 2>/dev/null && state="was still handing off"
kill -CONT "$DPID"
wait "$s" || fail "the short job failed"
echo "exit-unconnected: when the daemon took connections again (0.5 s), the 0.3 s job $state"
wait "$h" || true
sed -n 's/^idle-connections: //p' "$T/h.out"
workload --kernels 2000 --quiet --report "$T/after.json" || fail "a producer afterwards failed"
stop_daemon
[ -n "$(meta_of "$(report_field "$T/short.json" pid)")" ] ||
    fail "the short job never reached the daemon: its $(report_field "$T/short.json" kernels_recorded) kernels are lost"
python3 "$CHECK_ARCHIVE" "$CTL" "$T/out" "$T/short.json" "$T/after.json"
echo "ok"
