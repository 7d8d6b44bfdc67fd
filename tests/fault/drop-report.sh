#!/bin/bash
# Drops are counted and reported (README: "when the pool is full CUPTI drops
# records and counts them, and `status` reports the count"), also for a
# producer that exits while the daemon is stalled: after the drain, the
# session's meta.json must account for what CUPTI dropped, as
# final.dropped_records (the double's "dropped") or as
# final.requests_declined (the shim's count; equal here, one record per
# declined request).  XFAIL: the daemon learns of drops only from the
# `dropped` field of a later BUFFER_READY and of declines only from a
# FLUSH_DONE; a producer that exits with a full pool sends neither, and
# meta.json's final counters have no requests_declined (docs/FAULTS.md).
. "$top_srcdir/tests/fault/fault-lib.sh"

start_daemon --flush-period 0.2
stalled_exit
stop_daemon
want_d=$(report_field "$T/stalled.json" dropped)
want_r=$(report_field "$T/stalled.json" requests_declined)
got_d=$(final_field "$STALLED_PID" dropped_records)
got_r=$(final_field "$STALLED_PID" requests_declined)
echo "drop-report: the double dropped $want_d records ($want_r requests declined);" \
    "meta.json final: dropped_records $got_d, requests_declined $got_r"
[ "$got_d" = "$want_d" ] || [ "$got_r" = "$want_r" ] ||
    fail "meta.json reports dropped_records $got_d / requests_declined $got_r; CUPTI dropped $want_d ($want_r declined)"
echo "ok"
