#!/bin/bash
# Fair shares: one user's processes cannot take the daemon's descriptors
# from everyone else.  With max_sessions_per_user = 3, a fourth and fifth
# concurrent process of an ordinary user ('nobody') are refused with the
# reason (their jobs still run and exit 0), status counts the refusals,
# root's processes are not capped, and once nobody's sessions end a new
# one of theirs is let in again.  Pools larger than max_pool_bytes are
# taken, at most that much of them at once (pool-limits.sh).
. "$top_srcdir/tests/fault/fault-lib.sh"
need_nobody

echo '{"max_sessions_per_user": 3}' >"$T/caps.conf"
start_daemon --config "$T/caps.conf"
chmod 755 "$T/out" 2>/dev/null || true

nobody_job() {
    # setpriv itself, not the function, so that $! is the job's pid.
    setpriv --reuid=65534 --regid=65534 --clear-groups env CUPTIMON_SOCKET="$CUPTIMON_SOCKET" CUDA_INJECTION64_PATH="$SHIM" \
        CUPTIMON_LABEL="$1" "$WORKLOAD" --kernels 500 --rate 1000 --linger-ms 120000 --quiet &
    track $!
    eval "$2=\$!"
}
sessions_of() { status_py "len([s for s in st['sessions'] if s['uid'] == $1 and s['connected']])"; }

# Every job lingers until the test ends it (SIGUSR1: a normal exit after all
# its launches): a fixed linger let a loaded machine end nobody's first
# three before the refusals were counted.
nobody_job n1 p1; nobody_job n2 p2; nobody_job n3 p3
three() { [ "$(sessions_of 65534)" = 3 ]; }
wait_for 100 three || fail "nobody's first three jobs did not connect: $(ctl status)"
nobody_job n4 p4; nobody_job n5 p5
two_refused() { [ "$(status_py "st['daemon']['refused_producers']")" -ge 2 ]; }
wait_for 100 two_refused || fail "nobody's fourth and fifth jobs were not refused: $(ctl status)"
grep -q "refused a producer, pid [0-9]* uid 65534: uid 65534 already has 3 sessions, as many as max_sessions_per_user allows" \
    "$T/daemon.log" || fail "the refusal does not say why: $(grep refused "$T/daemon.log")"
[ "$(sessions_of 65534)" = 3 ] || fail "nobody holds $(sessions_of 65534) sessions, the cap is 3"

# Root is not capped: four of root's jobs beside nobody's three.
for i in 1 2 3 4; do spawn_tracked --kernels 500 --rate 1000 --linger-ms 120000 --quiet; eval "r$i=\$SPAWNED"; done
four_root() { [ "$(sessions_of 0)" = 4 ]; }
wait_for 100 four_root || fail "root's four jobs are not all in: $(sessions_of 0) sessions"

# Every job, refused or not, runs to the end and exits 0.
kill -USR1 $p1 $p2 $p3 $p4 $p5 $r1 $r2 $r3 $r4
for p in $p1 $p2 $p3 $p4 $p5 $r1 $r2 $r3 $r4; do wait "$p" || fail "job $p exited $?"; done
# The cap counts live sessions: nobody gets in again.
nobody_job n6 p6
one() { [ "$(sessions_of 65534)" = 1 ]; }
wait_for 100 one || fail "nobody's job after the others ended was not let in: $(ctl status)"
kill -USR1 "$p6"
wait "$p6" || fail "nobody's last job failed"
# A refused shim tries again with its backoff (a place may free up), so
# the count is of refusals; the refused processes are nobody's 4th and 5th.
refused=$(status_py "st['daemon']['refused_producers']")
[ "$refused" -ge 2 ] || fail "status counts $refused refused producers, expected 2 or more"
who=$(sed -n 's/.*refused a producer, pid \([0-9]*\) uid 65534: uid 65534 already has.*/\1/p' \
    "$T/daemon.log" | sort -u | tr '\n' ' ')
[ "$who" = "$(printf '%s\n' "$p4" "$p5" | sort -u | tr '\n' ' ')" ] ||
    fail "the refused pids are $who, expected nobody's 4th and 5th ($p4 $p5)"
echo "user-caps: 3 of nobody's 5 concurrent jobs admitted, 2 refused with the reason" \
    "($refused refusals with the shims' retries); root's 4 admitted"
stop_daemon
echo ok
