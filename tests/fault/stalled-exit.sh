#!/bin/bash
# A producer exits while the daemon is stalled (SIGSTOP): it announced its
# last buffers (BUFFER_READY is in the socket, the bytes in the pool the
# daemon maps) and could not wait for their release.  When the daemon runs
# again, those buffers are still archived (DESIGN-NOTES: "a session outlives
# its producer until its queue is written"): the archive holds exactly the
# records that reached a buffer.  XFAIL: the daemon's first action after
# the stall is the overdue periodic FLUSH to that producer; the send fails
# with EPIPE and conn_send() closes the connection at once, discarding the
# BUFFER_READYs still unread in the socket (docs/FAULTS.md).
. "$top_srcdir/tests/fault/fault-lib.sh"

start_daemon --flush-period 0.2
stalled_exit
# The daemon still serves.
workload --kernels 5000 --quiet --report "$T/after.json" || fail "a producer after the stall failed"
stop_daemon
echo "stalled-exit: recorded $(report_field "$T/stalled.json" kernels_recorded) kernels," \
    "dropped $(report_field "$T/stalled.json" dropped); the daemon received" \
    "$(final_field "$STALLED_PID" buffers_received) buffers"
python3 "$CHECK_RECORDED" "$CTL" "$T/out" "$T/stalled.json" "$T/after.json"
echo "ok"
