#!/bin/bash
# A daemon out of file descriptors with no idle connection to close: its
# sessions are all real producers.  Where the last descriptor runs out
# depends on how many the daemon holds (the harness may pass it extra
# ones), so the case is run at four limits in a row, one for each place
# the EMFILE can land: accept() (the daemon pauses accepting for 200 ms and
# the newcomer waits in the listen queue), the pool fd its hello carries,
# or the session's archive (in both the hello is refused with "out of
# descriptors" and the shim tries again on its short backoff, not the 30 s
# it waits after a real refusal).  Either way, once a session ends and
# frees its descriptors, the held-back producer must be in within a few
# seconds, its shim must not have logged a refusal, and no producer counts
# as refused.  (Under load the old shim's 30 s wait left a producer beside
# conn-flood.sh's flood out.)
# Its verdict depends on the CPU it gets: it runs with no other
# integration test beside it (tests/integration/lib.sh).
CUPTIMON_TEST_ALONE=1
. "$top_srcdir/tests/fault/fault-lib.sh"

deferred_total=0
paused_total=0
# scenario LIMIT: one daemon at LIMIT descriptors, filled with lingering
# producers until one is held back, then room made by killing a session.
scenario() {
    local limit=$1 out=$T/out-$1 log=$T/daemon-$1.log
    export CUPTIMON_SOCKET=$T/p$1.sock CUPTIMON_CONTROL_SOCKET=$T/c$1.sock
    # Only 0, 1 and 2 open: the limits mean the same whatever this script
    # inherited.
    (close_inherited; ulimit -n "$limit" && exec "$CUPTIMOND" --socket "$CUPTIMON_SOCKET" \
        --control-socket "$CUPTIMON_CONTROL_SOCKET" --output-dir "$out" --flush-period 0.5) \
        2>>"$log" &
    DPID=$!
    track "$DPID"
    wait_for 100 ctl status >/dev/null 2>&1 || fail "limit $limit: cuptimond did not start"

    local pids=() held= how= i p
    for i in $(seq 1 "$limit"); do
        CUPTIMON_LABEL=p$i spawn_tracked --kernels 200 --rate 1000 --linger-ms 60000 --quiet \
            2>"$T/p$limit-$i.err"
        p=$SPAWNED
        for _ in $(seq 1 100); do
            [ -n "$(meta_of "$p" "$out")" ] && break
            if grep -q "refused a producer, pid $p .*out of file descriptors" "$log"; then
                held=$p how="hello refused (EMFILE)"
                break
            fi
            sleep 0.05
        done
        [ -n "$held" ] && break
        if [ -z "$(meta_of "$p" "$out")" ]; then
            # Not served in 5 s: that is right only while accepting is paused.
            grep -qF "accept on $CUPTIMON_SOCKET: Too many open files; pausing" "$log" ||
                { cat "$log"; fail "limit $limit: producer $i (pid $p) was neither served nor held back for want of descriptors in 5 s"; }
            held=$p how="waiting in the listen queue (accept paused)"
            break
        fi
        pids+=("$p")
    done
    [ -n "$held" ] || fail "limit $limit: $limit descriptors held ${#pids[@]} sessions and nobody was held back"
    [ "${#pids[@]}" -ge 1 ] || fail "limit $limit: no session was served before descriptors ran out"
    echo "fd-full: limit $limit: ${#pids[@]} sessions; pid $held $how"

    kill -KILL "${pids[0]}"
    local t0 served_ms=none
    t0=$(now_ms)
    while [ $(($(now_ms) - t0)) -lt 10000 ]; do
        if [ -n "$(meta_of "$held" "$out")" ]; then
            served_ms=$(($(now_ms) - t0))
            break
        fi
        sleep 0.1
    done
    echo "fd-full: limit $limit: the held-back producer was served ${served_ms} ms after a session ended"
    [ "$served_ms" != none ] || { cat "$log"; fail "limit $limit: the held-back producer was not served within 10 s of room being made"; }
    [ "$served_ms" -lt 5000 ] || fail "limit $limit: the held-back producer waited ${served_ms} ms after room was made"
    if grep -q "refused this process" "$T/p$limit-$i.err"; then
        cat "$T/p$limit-$i.err"
        fail "limit $limit: the shim took an out-of-descriptors refusal for a real one"
    fi
    local deferred refusedp
    deferred=$(status_py 'st["daemon"]["hellos_deferred"]')
    refusedp=$(status_py 'st["daemon"]["refused_producers"]')
    echo "fd-full: limit $limit: status counts $deferred hellos deferred, $refusedp producers refused"
    case $how in
    hello*) [ "$deferred" -ge 1 ] || fail "limit $limit: status counts $deferred hellos deferred for EMFILE" ;;
    *) paused_total=$((paused_total + 1)) ;;
    esac
    [ "$refusedp" -eq 0 ] || fail "limit $limit: status counts $refusedp refused producers; none was refused for good"
    kill -0 "$DPID" 2>/dev/null || fail "limit $limit: the daemon died"
    deferred_total=$((deferred_total + deferred))
    for p in "${pids[@]}" "$held"; do kill -KILL "$p" 2>/dev/null || true; done
    kill -TERM "$DPID"
    wait "$DPID" 2>/dev/null || true
    DPID=
}

for limit in 40 41 42 43; do
    scenario "$limit"
done
echo "fd-full: $deferred_total hellos deferred in all; $paused_total cases held at accept()"
# Four limits in a row cover every residue of a session's descriptors, so
# at least one of them must have run out at the hello.
[ "$deferred_total" -ge 1 ] || fail "no limit ran out of descriptors at a hello; the hello's EMFILE path went untested"
echo "ok"
