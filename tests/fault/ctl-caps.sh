#!/bin/bash
# Control connections of one ordinary user cannot push the operator out
# (issue 21 item 2, fair shares).  Anyone may connect to the control socket
# and a client that pings within control_idle_timeout_s is never idle, so:
#  - caps: with max_controls_per_user = 4, 'nobody' opens 10 connections
#    and holds them: 4 are served, the other 6 get the cap's error (naming
#    the key) and are closed; status counts them, the log says so once,
#    nobody's own cuptimonctl is told why, and root's status answers
#    within 2 s.  Root is not capped.
#  - reserve: a daemon at `ulimit -n 64` (a reserve of 8 descriptors) and
#    no cap: nobody's connections fill every descriptor below the reserve
#    and no more (those landing in it are refused), root's status answers
#    within 2 s; then root fills the reserve with connections of its own,
#    and when the daemon runs out, nobody's longest-idle connections are
#    closed to let root's in (counted as idle_controls_evicted).
# Its verdict is a time to be served: it runs with no other integration
# test beside it (tests/integration/lib.sh).
CUPTIMON_TEST_ALONE=1
. "$top_srcdir/tests/fault/fault-lib.sh"
need_nobody

# The python3 that nobody can run (the first on PATH may be under /root).
npython=
for p in $(type -ap python3); do
    if as_nobody "$p" -c pass 2>/dev/null; then npython=$p; break; fi
done
[ -n "$npython" ] || skip "no python3 on PATH that nobody may run"

# hold.py SOCKET N RELEASE [burst]: opens N control connections one after
# another, each sending a ping and reading one answer (with burst: opens
# all N first, then asks on each), and prints what they got as one JSON
# line; then holds the served ones until the file RELEASE exists, pings
# each again and prints a second line (which were still open).
cat >"$T/hold.py" <<'PY'
import json, os, socket, struct, sys, time
HDR = struct.Struct("<IHHII")  # magic, version, type, length, flags
path, n, release = sys.argv[1], int(sys.argv[2]), sys.argv[3]
burst = sys.argv[4:] == ["burst"]
PING = json.dumps({"op": "ping"}).encode()

def ask(s, timeout=5.0):
    try:
        s.sendall(HDR.pack(0x4D545043, 1, 0x0401, len(PING), 0) + PING)
    except OSError:
        pass  # refused and closed before the ping went: its answer is still there
    s.settimeout(timeout)
    buf = b""
    try:
        while True:
            if len(buf) >= HDR.size:
                _, _, typ, ln, _ = HDR.unpack(buf[:HDR.size])
                if len(buf) >= HDR.size + ln:
                    body = json.loads(buf[HDR.size:HDR.size + ln])
                    return {0x0501: "ok", 0x0502: "error"}.get(typ, hex(typ)), body
            c = s.recv(65536)
            if not c:
                return "closed", None
            buf += c
    except socket.timeout:
        return "timeout", None
    except OSError:
        return "closed", None

def closed_by_peer(s, timeout=3.0):
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True

served, refused = [], []
r = {"ok": 0, "closed": 0, "timeout": 0, "errors": {}, "messages": {}, "slowest_ms": 0}
def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s
opened = [connect() for _ in range(n)] if burst else []
for i in range(n):
    s = opened[i] if burst else connect()
    t0 = time.time()
    kind, body = ask(s)
    r["slowest_ms"] = max(r["slowest_ms"], int((time.time() - t0) * 1000))
    if kind == "ok":
        r["ok"] += 1
        served.append(s)
    elif kind == "error":
        code = body.get("error", "?")
        r["errors"][code] = r["errors"].get(code, 0) + 1
        r["messages"].setdefault(code, body.get("message", ""))
        refused.append(s)
    else:
        r[kind] = r.get(kind, 0) + 1
r["refused_closed"] = sum(closed_by_peer(s) for s in refused)
print(json.dumps(r), flush=True)
deadline = time.time() + 120
while not os.path.exists(release) and time.time() < deadline:
    time.sleep(0.05)
alive = sum(ask(s)[0] == "ok" for s in served)
print(json.dumps({"alive": alive, "gone": len(served) - alive}), flush=True)
PY
chmod 644 "$T/hold.py"

# line FILE N: the Nth line of FILE, once there is one (5 s for the first
# ask of each of up to 80 connections is more than enough).
# (has_line's arguments are its own: wait_for has a local n.)
has_line() { [ "$(wc -l <"$1")" -ge "$2" ]; }
line() {
    wait_for 300 has_line "$1" "$2" || { cat "$1"; fail "$1 has no line $2"; }
    sed -n "${2}p" "$1"
}
# field JSON EXPR: a Python expression over the JSON line `r`.
field() {
    python3 -c 'import json, sys
r = json.loads(sys.argv[1])
print(eval(sys.argv[2]))' "$1" "$2"
}
# timed_status: root's status, with a 2 s timeout; prints the time it took.
timed_status() {
    local t0 ms
    t0=$(now_ms)
    ctl --timeout 2 status >"$T/status.out" 2>&1 ||
        { cat "$T/status.out"; fail "root's status got no answer within 2 s ($1)"; }
    ms=$(($(now_ms) - t0))
    [ "$ms" -le 2000 ] || fail "root's status took $ms ms ($1)"
    echo "$ms"
}

# ---- caps --------------------------------------------------------------
echo '{"max_controls_per_user": 4}' >"$T/caps.conf"
start_daemon --config "$T/caps.conf"
as_nobody "$npython" "$T/hold.py" "$CUPTIMON_CONTROL_SOCKET" 10 "$T/release-a" >"$T/a.out" 2>&1 &
hold_a=$!
track "$hold_a"
a1=$(line "$T/a.out" 1)
echo "caps: nobody's 10 connections: $a1"
[ "$(field "$a1" 'r["ok"]')" = 4 ] || fail "nobody was served on $(field "$a1" 'r["ok"]') connections, the cap is 4"
[ "$(field "$a1" 'r["errors"].get("EUSERS", 0)')" = 6 ] || fail "nobody's 6 connections past the cap did not get the cap's error: $a1"
msg=$(field "$a1" 'r["messages"]["EUSERS"]')
echo "$msg" | grep -q "uid 65534 already holds 4 control connections.*max_controls_per_user (4)" ||
    fail "the cap's error does not name the cap and the key: $msg"
[ "$(field "$a1" 'r["refused_closed"]')" = 6 ] || fail "the daemon did not close the refused connections: $a1"
# nobody's cuptimonctl, past the cap, is told why.
out=$(as_nobody "$CTL" --control-socket "$CUPTIMON_CONTROL_SOCKET" --timeout 5 status 2>&1) &&
    fail "nobody's 5th connection was served: $out"
echo "$out" | grep -q "max_controls_per_user" || fail "nobody's cuptimonctl past the cap does not say why: $out"
ms_a=$(timed_status "nobody holding its 4")
refused=$(status_py "st['daemon']['refused_controls_over_cap']")
[ "$refused" = 7 ] || fail "status counts $refused control connections refused over the cap, expected 7"
lines=$(grep -c "refused a control connection of uid 65534" "$T/daemon.log" || true)
[ "$lines" -ge 1 ] && [ "$lines" -le 3 ] || fail "7 refusals within a few seconds were logged in $lines lines"
# Root is not capped: 6 held connections of root's beside nobody's.
python3 "$T/hold.py" "$CUPTIMON_CONTROL_SOCKET" 6 "$T/release-a" >"$T/a-root.out" 2>&1 &
track $!
r1=$(line "$T/a-root.out" 1)
[ "$(field "$r1" 'r["ok"]')" = 6 ] || fail "root was capped: $r1"
touch "$T/release-a"
a2=$(line "$T/a.out" 2)
[ "$(field "$a2" 'r["alive"]')" = 4 ] || fail "nobody's 4 served connections did not stay open: $a2"
wait "$hold_a" || true
# The cap counts open connections: nobody's are closed, it is served again.
# (The daemon may see the new connection before the old ones' ends.)
wait_for 30 as_nobody "$CTL" --control-socket "$CUPTIMON_CONTROL_SOCKET" status >/dev/null 2>&1 ||
    fail "nobody was not served once its connections were closed"
echo "ctl-caps: caps: nobody served on 4 of 10 connections, 6 refused with the reason and closed;" \
    "$refused refusals counted (with nobody's cuptimonctl), $lines log line(s); root's status in $ms_a ms"
stop_daemon

# ---- reserve -----------------------------------------------------------
# The daemon starts with only 0, 1 and 2 open (close_inherited), so that
# its table is the same whatever this script inherited.
LIMIT=64
RESERVE=8 # an eighth of the table, at least 8 (daemon/main.c, raise_fd_limit)
export CUPTIMON_SOCKET=$T/pb.sock CUPTIMON_CONTROL_SOCKET=$T/cb.sock
echo '{"max_controls_per_user": 0}' >"$T/nocap.conf"
(close_inherited; ulimit -n "$LIMIT" && exec "$CUPTIMOND" --socket "$CUPTIMON_SOCKET" \
    --control-socket "$CUPTIMON_CONTROL_SOCKET" --output-dir "$T/outb" --config "$T/nocap.conf") \
    2>>"$T/daemon.log" &
DPID=$!
track "$DPID"
wait_for 100 ctl status >/dev/null 2>&1 || fail "the daemon at $LIMIT descriptors did not start"
# What the daemon holds of its own (the status above may still be closing).
sleep 0.3
base=$(fd_count "$DPID")

as_nobody "$npython" "$T/hold.py" "$CUPTIMON_CONTROL_SOCKET" 80 "$T/release-b" >"$T/b.out" 2>&1 &
hold_b=$!
track "$hold_b"
b1=$(line "$T/b.out" 1)
echo "reserve: nobody's 80 connections: $b1"
served=$(field "$b1" 'r["ok"]')
top=$(ls "/proc/$DPID/fd" | sort -n | tail -n 1)
[ "$top" -lt $((LIMIT - RESERVE)) ] ||
    fail "nobody's connections took descriptor $top, in the reserve ($((LIMIT - RESERVE))..$((LIMIT - 1)))"
[ "$served" -eq $((LIMIT - RESERVE - base)) ] ||
    fail "nobody was served on $served connections; the $((LIMIT - RESERVE)) below the reserve less the daemon's $base make $((LIMIT - RESERVE - base))"
[ "$(field "$b1" 'r["errors"].get("EMFILE", 0)')" = $((80 - served)) ] ||
    fail "nobody's connections in the reserve were not all refused with EMFILE: $b1"
ms_b=$(timed_status "nobody holding every descriptor below the reserve")
inres=$(status_py "st['daemon']['refused_controls_in_reserve']")
[ "$inres" -ge $((80 - served)) ] || fail "status counts $inres connections refused in the reserve, expected $((80 - served))"
# A burst of 40 more, all queued before the daemon takes one: each lands
# on the first descriptor of the reserve, is refused and closed, and the
# next waits for that descriptor to be free; none of nobody's held
# connections is closed for room that was only on its way back.
as_nobody "$npython" "$T/hold.py" "$CUPTIMON_CONTROL_SOCKET" 40 "$T/hold.py" burst >"$T/burst.out" 2>&1 ||
    { cat "$T/burst.out"; fail "nobody's burst failed"; }
burst=$(line "$T/burst.out" 1)
[ "$(field "$burst" 'r["errors"].get("EMFILE", 0)')" = 40 ] ||
    fail "nobody's burst of 40 in the reserve was not all refused with EMFILE: $burst"
ev=$(status_py "st['daemon']['idle_controls_evicted']")
[ "$ev" = 0 ] || fail "a burst of refusals in the reserve closed $ev of nobody's idle connections"

# Root takes the reserve and more: the daemon runs out, and nobody's
# longest-idle connections make room for root's.
python3 "$T/hold.py" "$CUPTIMON_CONTROL_SOCKET" 12 "$T/release-b" >"$T/b-root.out" 2>&1 &
track $!
r1=$(line "$T/b-root.out" 1)
[ "$(field "$r1" 'r["ok"]')" = 12 ] || fail "root's 12 connections beside nobody's were not all served: $r1"
ms_c=$(timed_status "root holding the reserve and more")
evicted=$(status_py "st['daemon']['idle_controls_evicted']")
touch "$T/release-b"
b2=$(line "$T/b.out" 2)
gone=$(field "$b2" 'r["gone"]')
[ "$gone" -ge 1 ] || fail "no connection of nobody's was closed to make room for root's: $b2"
[ "$gone" = "$evicted" ] || fail "nobody lost $gone connections, status counts $evicted evicted"
grep -q "out of file descriptors: closed the control connection of uid 65534" "$T/daemon.log" ||
    fail "the eviction was not logged"
wait "$hold_b" || true
kill -0 "$DPID" 2>/dev/null || fail "the daemon died"
echo "ctl-caps: reserve: $base descriptors the daemon's own, nobody served on $served of 80 (highest fd $top," \
    "below $((LIMIT - RESERVE))), $inres refused in the reserve, then a burst of 40 all refused," \
    "none closed for room; root's status in $ms_b ms;" \
    "root's 12 beside them in (slowest $(field "$r1" 'r["slowest_ms"]') ms) by closing $evicted of nobody's idle ones;" \
    "root's status then in $ms_c ms"
stop_daemon
echo ok
