#!/bin/bash
# Idle control connections (issue 21 item 2): anyone may connect to the
# control socket, so a connection that waits for no reply and has sent
# nothing for control_idle_timeout_s is closed; one that waits on a slow
# request (a flush that waits for a stopped job) is not, and gets its
# answer.  Status counts the ones closed.
. "$top_srcdir/tests/fault/fault-lib.sh"

echo '{"control_idle_timeout_s": 1, "flush_timeout_s": 4}' >"$T/idle.conf"
start_daemon --config "$T/idle.conf"

# 40 connections that say nothing, held 5 s: the daemon must hang up on them.
python3 - "$CUPTIMON_CONTROL_SOCKET" >"$T/idle.out" 2>&1 <<'PY' &
import socket, sys, time
socks = []
for _ in range(40):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    socks.append(s)
t0 = time.time()
closed = 0
for s in socks:
    s.settimeout(max(0.1, 5 - (time.time() - t0)))
    try:
        closed += s.recv(1) == b""
    except socket.timeout:
        pass
print("idle: %d of %d closed by the daemon within 5 s" % (closed, len(socks)))
PY
idle=$!
track "$idle"

# A job that cannot answer a flush (stopped), and a flush that waits for it
# for flush_timeout_s (4 s, past the idle timeout): it must get its answer.
spawn_tracked --kernels 1000 --rate 1000 --linger-ms 8000 --quiet
job=$SPAWNED
connected() { [ "$(status_py "sum(1 for s in st['sessions'] if s['connected'])")" = 1 ]; }
wait_for 100 connected || fail "the job did not connect"
kill -STOP "$job"
t0=$(now_ms)
# It exits 1 (the stopped job is late), but with the daemon's answer.
out=$(ctl --timeout 10 flush --forced 2>&1) || true
echo "$out" | grep -q "session(s) flushed" || fail "the slow flush got no answer: $out"
dt=$(($(now_ms) - t0))
kill -CONT "$job"
echo "slow flush answered after $dt ms: $out"
[ "$dt" -ge 2000 ] || fail "the flush did not wait for the stopped job ($dt ms), so it tests nothing"

wait "$idle" || true
cat "$T/idle.out"
grep -q "idle: 40 of 40 closed" "$T/idle.out" || fail "the daemon kept idle control connections open"
n=$(status_py "st['daemon']['idle_controls_closed']")
[ "$n" -ge 40 ] || fail "status counts $n idle control connections closed, expected 40 or more"
wait "$job" || fail "the job failed"
stop_daemon
echo ok
