#!/bin/bash
# The daemon is slower than its producers: it is stopped (SIGSTOP) for 2 s
# while two producers stream into small pools (4 slots of 64 KiB).  The
# pools fill, the shim declines CUPTI's requests and CUPTI (the double)
# drops and counts the records.  The producers never wait for the daemon:
# their launch calls stay in microseconds (p99, from the launch log), their
# run time stays that of the launches, and their memory stays bounded by
# the pool (VmRSS does not grow over the stop).  After SIGCONT the daemon
# drains everything: each archive holds exactly the records that reached a
# buffer (the double's *_recorded counts; the dropped ones never did), and
# the drops are reported to the daemon (meta.json dropped_records = the
# double's dropped).  A producer that exits during the stall is
# stalled-exit.sh and drop-report.sh.
. "$top_srcdir/tests/fault/fault-lib.sh"

export CUPTIMON_POOL_SLOTS=4 CUPTIMON_SLOT_SIZE=64K
start_daemon --flush-period 0.2

# percentiles LOG FROM_NS TO_NS: p50 p99 max (ns) of the launch calls that
# started in [FROM, TO), from a workload --log (corr before after).
percentiles() {
    python3 - "$@" <<'PY'
import sys
lo, hi = int(sys.argv[2]), int(sys.argv[3])
d = sorted(int(a) - int(b) for _, b, a in (l.split() for l in open(sys.argv[1]))
           if lo <= int(b) < hi)
assert d, "no launch in the window"
print(len(d), d[len(d) // 2], d[int(len(d) * 0.99)], d[-1])
PY
}

# No fault: the reference, with a pool (8 x 256 KiB, half a second of
# records) that a loaded machine's hiccups do not fill.
t0=$(now_ms)
CUPTIMON_POOL_SLOTS=8 CUPTIMON_SLOT_SIZE=256K workload --kernels 40000 --rate 20000 --quiet \
    --log "$T/base.log" --report "$T/base.json" || fail "the reference run failed"
base_ms=$(($(now_ms) - t0))
read -r _ _ base_p99 base_max <<<"$(percentiles "$T/base.log" 0 99999999999999999999)"

t0=$(now_ms)
spawn_tracked --kernels 120000 --rate 20000 --quiet --report "$T/p1.json"
p1=$SPAWNED
spawn_tracked --kernels 120000 --rate 20000 --quiet --log "$T/p2.log" --report "$T/p2.json"
p2=$SPAWNED
sleep 1
kill -STOP "$DPID"
stop_ns=$(date +%s%N)
sleep 0.3
rss1=$(rss_kb "$p1")
sleep 1.6
rss2=$(rss_kb "$p1")
cont_ns=$(date +%s%N)
kill -CONT "$DPID"
wait "$p1" || fail "P1 failed"
wait "$p2" || fail "P2 failed"
run_ms=$(($(now_ms) - t0))
read -r n p50 p99 max <<<"$(percentiles "$T/p2.log" "$stop_ns" "$cont_ns")"
echo "slow-daemon: reference $base_ms ms (launch p99 $base_p99 ns, max $base_max ns);" \
    "through the stop: P1/P2 $run_ms ms for 6 s of launches; $n launches during the stop:" \
    "p50 $p50 ns, p99 $p99 ns, max $max ns; P1 VmRSS $rss1 -> $rss2 KiB"
[ "$run_ms" -lt 20000 ] || fail "P1/P2 took $run_ms ms for 6 s of launches: they waited for the daemon"
[ "$p99" -lt 100000 ] || fail "launch calls took $p99 ns (p99) while the daemon was stopped"
[ "$max" -lt 100000000 ] || fail "a launch call took $max ns while the daemon was stopped: it blocked"
[ "$rss2" -lt $((rss1 + 1024)) ] ||
    fail "P1's VmRSS grew from $rss1 to $rss2 KiB while the daemon was stopped"
for p in p1 p2; do
    d=$(report_field "$T/$p.json" dropped)
    r=$(report_field "$T/$p.json" requests_declined)
    [ "$d" -gt 0 ] && [ "$r" -gt 0 ] || fail "$p: nothing was dropped ($d) or declined ($r): the pool never filled"
    echo "slow-daemon: $p recorded $(report_field "$T/$p.json" kernels_recorded) kernels," \
        "dropped $d records, $r requests declined"
done
[ "$(report_field "$T/base.json" dropped)" = 0 ] ||
    fail "the reference run dropped $(report_field "$T/base.json" dropped) records with no fault"

# The daemon drains: every session ends, nothing is left queued.
no_sessions() { [ "$(status_py "len(st['sessions'])")" = 0 ]; }
wait_for 100 no_sessions || fail "sessions are left after the drain: $(ctl status)"
stop_daemon
for p in p1 p2; do
    pid=$(report_field "$T/$p.json" pid)
    got=$(final_field "$pid" dropped_records)
    want=$(report_field "$T/$p.json" dropped)
    [ "$got" = "$want" ] || fail "$p: meta.json reports $got dropped records, the double dropped $want"
done
python3 "$CHECK_RECORDED" "$CTL" "$T/out" "$T/base.json" "$T/p1.json" "$T/p2.json"
echo "ok"
