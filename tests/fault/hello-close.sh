#!/bin/bash
# A producer that is gone before the daemon answers its hello: the daemon
# must survive it.  Three ways: a refused hello and a good hello whose
# sender closes at once (tests/fault/hostile-producer hello-then-close: any
# local user), and a real job that starts and ends while the daemon is
# stalled (SIGSTOP), so that its hello is read after it exited.  After each,
# the daemon must still run and archive a real producer completely.  XFAIL:
# on_hello() (daemon/session.c) replies with conn_send*(), which closes the
# connection on EPIPE and sets s->conn to NULL, then dereferences s->conn
# (s->conn->accept_fd = 0; refused: conn_close(s->conn)): SIGSEGV
# (docs/FAULTS.md).
. "$top_srcdir/tests/fault/fault-lib.sh"

alive() {
    kill -0 "$DPID" 2>/dev/null && return 0
    local rc=0
    wait "$DPID" || rc=$?
    DPID=
    fail "cuptimond died (exit status $rc$([ "$rc" = 139 ] && echo ': SIGSEGV')) $1"
}

start_daemon --flush-period 0.2
"$HOSTILE" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
    hello-then-close >"$T/h.out" 2>&1 || true
cat "$T/h.out"
alive "after a producer sent its hello and closed at once"
grep -q '^ok: ' "$T/h.out" || fail "hello-then-close: $(grep FAIL "$T/h.out")"

# A job that lives only while the daemon is stopped.
kill -STOP "$DPID"
CUPTIMON_LABEL=while-stopped spawn_tracked --kernels 5000 --quiet --report "$T/short.json"
s=$SPAWNED
gone() { ! kill -0 "$s" 2>/dev/null; }
wait_for 50 gone || { kill -CONT "$DPID"; fail "the short job did not exit while the daemon was stopped"; }
wait "$s" || { kill -CONT "$DPID"; fail "the short job failed"; }
kill -CONT "$DPID"
sleep 0.5
alive "after reading the hello of a job that had already exited"
workload --kernels 5000 --quiet --report "$T/after.json" || fail "a producer afterwards failed"
alive "serving a producer afterwards"

# A connection whose hello has not come is no session yet: status lists no
# connected session for it (a test or an operator that waits for a job's
# session and then opens a window on it would find none to select; the
# pytest suite did under load), and counts it.
python3 - "$CUPTIMON_SOCKET" "$T/holder" <<'PY' &
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
open(sys.argv[2], "w").write(str(os.getpid()))
time.sleep(1.5)
PY
holder=$!
wait_for 50 test -s "$T/holder" || fail "the silent connection was not made"
ctl status --json >"$T/holder-status.json" || fail "status failed with a silent connection"
wait $holder
python3 - "$T/holder-status.json" "$(cat "$T/holder")" <<'PY' || fail "a connection without its hello is listed as a connected session"
import json, sys
st, pid = json.load(open(sys.argv[1])), int(sys.argv[2])
listed = [s for s in st["sessions"] if s["pid"] == pid and s["connected"]]
print(f"silent connection: {len(listed)} connected session(s) of its pid; "
      f"{st['daemon'].get('connections_awaiting_hello')} connection(s) awaiting a hello")
assert not listed, listed
PY
stop_daemon
python3 "$CHECK_ARCHIVE" "$CTL" "$T/out" "$T/after.json"
echo "ok"
