#!/bin/bash
# Socket activation and sd_notify: cuptimond started by
# systemd-socket-activate takes the passed sockets (matched by path), says
# READY=1 on NOTIFY_SOCKET once it serves, and leaves the socket files to
# systemd when it stops.  First, without systemd: the unit the build
# generates sets LimitNOFILE= high enough for the per-user session cap.
. "$top_srcdir/tests/integration/lib.sh"

# LimitNOFILE= in the generated cuptimond.service (issue 21, item 2).
# systemd's default soft limit, 1024, let one user's ~337 sessions take
# every descriptor.  A producer session holds three (its socket, its pool
# memfd, its archive segment), so one user at max_sessions_per_user holds
# 3 x cap; the daemon keeps a reserve of limit/8, clamped to 8..64
# (daemon/main.c, raise_fd_limit()), out of producers' reach for root's
# cuptimonctl and its own files.  Below 3 x cap + reserve, a single user
# runs the daemon out of producer descriptors before the cap refuses them,
# and the cap protects nobody: with the defaults that is 3 x 256 + 64 =
# 832.  The cap is the daemon's own default (--check-config with an empty
# configuration), so the check follows it.  The daemon raises its soft
# limit to the hard one at start, so a "soft:hard" value is judged by its
# hard part.  (The unit sets 65536, room for many users at their caps.)
echo '{}' >"$T/empty.conf"
cap=$("$CUPTIMOND" --check-config --config "$T/empty.conf" | sed '/^#/d' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["max_sessions_per_user"])') ||
    fail "cuptimond --check-config does not show max_sessions_per_user"
for unit in "$top_builddir/systemd/cuptimond.service" "$top_builddir/systemd/test/cuptimond.service"; do
    [ -f "$unit" ] || fail "$unit is missing (make all generates it)"
    grep -qE '^[[:space:]]*LimitNOFILE=' "$unit" ||
        fail "$unit has no LimitNOFILE= line: the daemon would get systemd's default, 1024"
    value=$(sed -n 's/^[[:space:]]*LimitNOFILE=[[:space:]]*//p' "$unit" | tail -n 1 | tr -d '[:space:]')
    limit=${value##*:}
    [ "$limit" = infinity ] && { echo "$unit: LimitNOFILE=$value"; continue; }
    case $limit in '' | *[!0-9]*) fail "$unit: LimitNOFILE=$value is not a number" ;; esac
    reserve=$((limit / 8 < 8 ? 8 : limit / 8 > 64 ? 64 : limit / 8))
    need=$((3 * cap + reserve))
    [ "$limit" -ge "$need" ] ||
        fail "$unit: LimitNOFILE=$value is below 3 x max_sessions_per_user ($cap) + the reserve ($reserve) = $need"
    echo "$unit: LimitNOFILE=$value; needs at least 3 x $cap + $reserve = $need"
done
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
