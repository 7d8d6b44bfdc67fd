#!/bin/bash
# A producer that closes its connection with the daemon's messages unread
# (it never read the HELLO_ACK) right after announcing a buffer: the kernel
# then reports the daemon's side as reset (EPOLLERR) with the BUFFER_READY
# still queued.  The daemon must take that buffer (it is in the pool the
# daemon maps) and end the session: no session left in status, meta.json's
# final counters written with the buffer archived, no fd kept.  Done 3 times.
# XFAIL (docs/FAULTS.md, bug 10): on EPOLLERR libuv stops the poll handle
# before calling on_poll() (daemon/conn.c) with status < 0; at HEAD the
# daemon closes at once and drops the buffer; with the write_dead change
# it reads once, and conn_update() does not restart the stopped handle (its
# `watching` is unchanged), so EOF is never seen: the session stays
# "connected" forever and keeps its fd.
# It runs no workload through the libcupti test double.
CUPTIMON_TEST_NO_DOUBLE=1
. "$top_srcdir/tests/fault/fault-lib.sh"

start_daemon --flush-period 0.5
base_fds=$(fd_count "$DPID")
for round in 1 2 3; do
    "$HOSTILE" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
        close-unread >"$T/h$round.out" 2>&1 || { cat "$T/h$round.out"; fail "close-unread failed"; }
    pid=$(sed -n 's/^close-unread-pid: //p' "$T/h$round.out")
    gone() { [ "$(session_field "$pid" pid)" = none ]; }
    wait_for 50 gone || fail "round $round: pid $pid's session is still listed 5 s after it closed: $(ctl status | tail -3)"
    wait_for 30 session_ended "$pid" || fail "round $round: pid $pid's session has no final counters"
    got=$(final_field "$pid" chunks_written)
    [ "$got" = 1 ] || fail "round $round: pid $pid's announced buffer was not archived (chunks_written $got)"
    echo "close-unread: round $round: the session ended, its buffer archived"
done
fds_back() { [ "$(fd_count "$DPID")" -le "$base_fds" ]; }
wait_for 30 fds_back || fail "the daemon holds $(fd_count "$DPID") fds, $base_fds before"
stop_daemon
echo "ok"
