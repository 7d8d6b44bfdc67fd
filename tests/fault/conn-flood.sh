#!/bin/bash
# A flood of connections: a local user (the producer socket is 0666) opens
# more connections than the daemon has file descriptors and never says
# hello.  The daemon must stay usable for everyone else: it must not spin
# on a failing accept(), must not flood its log, and must let the operator
# (control socket) and a real producer in while the idle connections are
# still held: it closes connections that send no hello within 2 s, and,
# out of descriptors, closes the oldest silent one to make room for a new
# one.  The daemon runs with `ulimit -n 64` so that the flood is cheap.
# The idle connections are held 12 s; the operator and the producer must
# get in within 9 s (the shim retries at 0.1, 0.3, 0.7, 1.5, 3.1, 6.3 s;
# without the eviction they got in at 2 and 4-6.4 s, with it at 0.2 and
# 0.7 s), and status must count the connections it closed.
. "$top_srcdir/tests/fault/fault-lib.sh"

HOLD_MS=12000
WINDOW_MS=9000
# The daemon's fd limit is lowered in a subshell that then execs it, so that
# $DPID is cuptimond itself.  Its log goes through a filter that keeps the
# first 20000 lines and counts the rest: unbounded, it runs to gigabytes.
(ulimit -n 64 && exec "$CUPTIMOND" --socket "$CUPTIMON_SOCKET" \
    --control-socket "$CUPTIMON_CONTROL_SOCKET" --output-dir "$T/out" --flush-period 0.5) \
    2> >(exec awk -v count="$T/log.count" 'NR <= 20000 {print; fflush()} END {print NR > count}' \
        >>"$T/daemon.log") &
DPID=$!
wait_for 100 ctl status >/dev/null 2>&1 || fail "cuptimond did not start"

"$HOSTILE" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
    --count 200 --hold-ms $HOLD_MS idle-connections >"$T/h.out" 2>&1 &
h=$!
track "$h"
wait_for 50 grep -q "idle connections open" "$T/h.out" || fail "the flood did not start"
flood_start=$(now_ms)
deadline=$((flood_start + WINDOW_MS))
ticks0=$(cpu_ticks "$DPID")

# A real producer arrives during the flood and retries for 10 s; the
# operator asks for status with a timeout that ends inside the window.
CUPTIMON_LABEL=during-flood spawn_tracked --kernels 2000 --rate 1000 --linger-ms 10000 \
    --quiet --report "$T/w.json"
w=$SPAWNED
status_ms=none
if "$CTL" --control-socket "$CUPTIMON_CONTROL_SOCKET" --timeout $((WINDOW_MS / 1000)) status \
    >"$T/status.out" 2>&1; then
    status_ms=$(($(now_ms) - flood_start))
fi
served_ms=none
while [ "$(now_ms)" -lt "$deadline" ]; do
    if [ -n "$(meta_of "$w")" ]; then
        served_ms=$(($(now_ms) - flood_start))
        break
    fi
    sleep 0.2
done
sleep 0.1
window_ms=$(($(now_ms) - flood_start))
ticks1=$(cpu_ticks "$DPID")
wait "$h" || true
cat "$T/h.out"
wait "$w" || fail "the producer beside the flood failed"
closed=$(status_py 'st["daemon"]["silent_connections_closed"]')
kill -0 "$DPID" 2>/dev/null || fail "the daemon died"
stop_daemon
wait_for 50 test -s "$T/log.count" || true
lines=$(cat "$T/log.count" 2>/dev/null || echo 0)
hz=$(getconf CLK_TCK)
cpu_pct=$(((ticks1 - ticks0) * 100 * 1000 / hz / window_ms))
echo "conn-flood: status answered at ${status_ms} ms; producer served at ${served_ms} ms;" \
    "daemon CPU ${cpu_pct}% over ${window_ms} ms; $lines log lines in all;" \
    "$closed silent connections closed"
[ "$cpu_pct" -lt 50 ] ||
    fail "the daemon used ${cpu_pct}% of a CPU while the idle connections were held (it spins on accept)"
[ "$lines" -lt 1000 ] || fail "the daemon logged $lines lines about the flood"
[ "$status_ms" != none ] || fail "cuptimonctl status got no answer within $WINDOW_MS ms of the flood"
[ "$served_ms" != none ] || fail "a real producer was not let in within $WINDOW_MS ms of the flood"
[ "$closed" -ge 100 ] || fail "status counts $closed silent connections closed; the flood held 100 or more"
echo "ok"
