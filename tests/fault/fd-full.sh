#!/bin/bash
# A daemon out of file descriptors with no idle connection to close: its
# sessions are all real producers.  A new producer's connection is accepted
# with the last descriptor, so the pool fd its hello carries cannot be
# taken (EMFILE) and the hello is refused.  That refusal says "out of
# descriptors" (EMFILE), and the shim must try again on its short backoff,
# not wait out the 30 s it waits after a real refusal: once a session ends
# and frees its descriptors the newcomer must be in within a few seconds,
# and its shim must not have logged that it was refused.  (Under load the
# old shim's 30 s wait left a producer beside conn-flood.sh's flood out.)
. "$top_srcdir/tests/fault/fault-lib.sh"

LIMIT=40
(ulimit -n $LIMIT && exec "$CUPTIMOND" --socket "$CUPTIMON_SOCKET" \
    --control-socket "$CUPTIMON_CONTROL_SOCKET" --output-dir "$T/out" --flush-period 0.5) \
    2>>"$T/daemon.log" &
DPID=$!
wait_for 100 ctl status >/dev/null 2>&1 || fail "cuptimond did not start"

# Producers that linger, one at a time, until the daemon refuses one for
# want of a descriptor.
pids=()
refused=
for i in $(seq 1 $LIMIT); do
    CUPTIMON_LABEL=p$i spawn_tracked --kernels 200 --rate 1000 --linger-ms 60000 --quiet \
        2>"$T/p$i.err"
    p=$SPAWNED
    for _ in $(seq 1 100); do
        [ -n "$(meta_of "$p")" ] && break
        if grep -q "pid $p .*could not take the pool fd" "$T/daemon.log"; then
            refused=$p
            break
        fi
        sleep 0.05
    done
    [ -n "$refused" ] && break
    [ -n "$(meta_of "$p")" ] || fail "producer $i (pid $p) was neither served nor refused in 5 s"
    pids+=("$p")
done
[ -n "$refused" ] || skip "$LIMIT descriptors held ${#pids[@]} sessions with no EMFILE refusal"
echo "fd-full: ${#pids[@]} sessions in $LIMIT descriptors; pid $refused refused (EMFILE)"

# One session ends; the refused producer must take its place soon.
kill -KILL "${pids[0]}"
t0=$(now_ms)
served_ms=none
while [ $(($(now_ms) - t0)) -lt 10000 ]; do
    if [ -n "$(meta_of "$refused")" ]; then
        served_ms=$(($(now_ms) - t0))
        break
    fi
    sleep 0.1
done
echo "fd-full: the refused producer was served ${served_ms} ms after a session ended"
[ "$served_ms" != none ] || fail "the producer refused for EMFILE was not served within 10 s of room being made"
[ "$served_ms" -lt 5000 ] || fail "the producer refused for EMFILE waited ${served_ms} ms after room was made"
if grep -q "refused this process" "$T/p$i.err"; then
    cat "$T/p$i.err"
    fail "the shim took an out-of-descriptors refusal for a real one"
fi
deferred=$(status_py 'st["daemon"]["hellos_deferred"]')
refusedp=$(status_py 'st["daemon"]["refused_producers"]')
echo "fd-full: status counts $deferred hellos deferred, $refusedp producers refused"
[ "$deferred" -ge 1 ] || fail "status counts $deferred hellos deferred for EMFILE"
[ "$refusedp" -eq 0 ] || fail "status counts $refusedp refused producers; none was refused for good"
kill -0 "$DPID" 2>/dev/null || fail "the daemon died"
echo "ok"
