#!/bin/bash
# Turns on the worker pool go by user, not by session (issue 21, fair
# shares): one ordinary user ('nobody') runs sixteen producers whose pools are
# sparse 16 x 64 MiB (every byte announced, again and again) and must not
# make root's honest producer beside them drop records.  Each session has
# at most one work item of up to 32 MiB at a time, and the users take
# turns for the pool's workers: nobody's sixteen sessions get one turn in a
# round, root's one session the next.  With turns per session (each session
# one item in libuv's FIFO) the honest producer waited behind sixteen 32 MiB
# items for each of its buffers.  The producers are bench/replay-producer
# (a real H200 buffer over the shim's protocol); no workload runs through
# the libcupti test double.
CUPTIMON_TEST_NO_DOUBLE=1
# Its verdict depends on the CPU it gets: it runs with no other
# integration test beside it (tests/integration/lib.sh).  A sanitizer
# build skips it below: there it does not wait for the machine to itself
# (under make check -j2 that wait held a job slot idle some 13 s).
[ "${CUPTIMON_SANITIZERS:-no}" = yes ] || CUPTIMON_TEST_ALONE=1
. "$top_srcdir/tests/fault/fault-lib.sh"
[ "${CUPTIMON_SANITIZERS:-no}" = yes ] && skip "its verdict is the daemon's throughput, which a sanitizer build does not have (the build without sanitizers runs it)"
need_replay_producer
[ "$(id -u)" = 0 ] || skip "needs root to run producers as a second user"
command -v setpriv >/dev/null || skip "no setpriv"
chmod 755 "$T"
as_nobody test -x "$RP" -a -r "$BUF" || skip "the build tree is not readable by nobody"

start_daemon --flush-period 0
sparse_producers 16 as_nobody
flooding() { [ "$(status_py "sum(1 for s in st['sessions'] if s['connected'] and s['uid'] == 65534)")" = 16 ]; }
wait_for 100 flooding || fail "nobody's sixteen sparse producers did not connect"
sleep 0.5
# Two slots at 200k records/s leave 0.2 s per buffer.  Measured on the
# 2-core machine: turns by user 0 dropped on a quiet machine (8 sparse
# producers: 4-22% with other builds and tests running beside); turns by
# session, with 16 sparse producers, 49% (8: 33-63%).  The bound sits
# between.
honest_producer 2 200000 1000000 0.25 "fair-users: root's producer beside 16 sparse ones of nobody's"
kill -0 "$DPID" || fail "the daemon died"
echo ok
