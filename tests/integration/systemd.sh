#!/bin/bash
# Socket activation and sd_notify: cuptimond started by
# systemd-socket-activate takes the passed sockets (matched by path), says
# READY=1 on NOTIFY_SOCKET once it serves, and leaves the socket files to
# systemd when it stops.
. "$top_srcdir/tests/integration/lib.sh"
command -v systemd-socket-activate >/dev/null || { echo "SKIP: no systemd-socket-activate"; exit 77; }
grep -q "HAVE_SYSTEMD 1" "$top_builddir/config.h" || { echo "SKIP: built without libsystemd"; exit 77; }

python3 - "$T/notify.sock" "$T/notify.log" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(20)
with open(sys.argv[2], "w", buffering=1) as log:
    try:
        while True:
            log.write(s.recv(4096).decode() + "\n")
    except socket.timeout:
        pass
PY
npid=$!
for _ in $(seq 50); do [ -S "$T/notify.sock" ] && break; sleep 0.1; done

systemd-socket-activate -l "$CUPTIMON_SOCKET" -l "$CUPTIMON_CONTROL_SOCKET" \
    -E NOTIFY_SOCKET="$T/notify.sock" \
    "$CUPTIMOND" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
    --output-dir "$T/out" 2>>"$T/daemon.log" &
DPID=$!
for _ in $(seq 50); do [ -S "$CUPTIMON_CONTROL_SOCKET" ] && break; sleep 0.1; done
# The first connection starts the daemon.
wait_for 50 ctl status >/dev/null || fail "the socket-activated daemon does not answer"
ctl status --json | python3 -c 'import json,sys; assert json.load(sys.stdin)["daemon"]["socket_activated"] is True' \
    || fail "the daemon did not take the passed sockets"
wait_for 50 grep -q "READY=1" "$T/notify.log" || fail "no READY=1 on NOTIFY_SOCKET: $(cat "$T/notify.log")"
workload --kernels 5000 --report "$T/w.json"
stop_daemon
grep -q "STOPPING=1" "$T/notify.log" || fail "no STOPPING=1 on NOTIFY_SOCKET"
[ -S "$CUPTIMON_SOCKET" ] || fail "the daemon removed the socket file that systemd owns"
n=$(find "$T/out/archive" -name meta.json | wc -l)
[ "$n" -eq 1 ] || fail "the producer's session was not archived ($n sessions)"
kill "$npid" 2>/dev/null || true
echo "ok"
