#!/bin/bash
# Trace windows across users (issue 21, item 7).  A window that an
# ordinary user opens writes a trace that user can read: it is theirs
# (chown, or an ACL where the daemon may not chown) and they can reach it
# in OUTPUT_DIR/windows/.  Labels are what a process says of itself, so an
# operator's window by label takes one user's sessions: refused, with the
# users, when the label matches several; fixed to the user it matched, so
# that another user's process joining later with the same label stays out;
# --uid and --all-users choose on purpose.  The reply and the trace name
# the uid of every process.  Runs the second user as 'nobody' (needs root
# and setpriv).
. "$top_srcdir/tests/integration/lib.sh"
need_nobody
nctl() { as_nobody "$CTL" --control-socket "$CUPTIMON_CONTROL_SOCKET" "$@"; }
PIDS=
stop_all() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    for p in $PIDS; do wait "$p" 2>/dev/null || true; done
    PIDS=
}
# nobody_job LABEL: a lingering workload of nobody's; $NPID is its pid.
nobody_job() {
    # setpriv itself, not a function: $! is then the workload's pid.
    setpriv --reuid=65534 --regid=65534 --clear-groups env CUPTIMON_SOCKET="$CUPTIMON_SOCKET" \
        CUDA_INJECTION64_PATH="$SHIM" \
        CUPTIMON_LABEL="$1" "$WORKLOAD" --kernels 2000 --rate 2000 --linger-ms 60000 -q &
    NPID=$!
    PIDS="$PIDS $NPID"
}
sessions() { ctl status --json | python3 -c 'import json,sys; print(" ".join(str(s["pid"]) for s in json.load(sys.stdin)["sessions"]))'; }
has_session() { sessions | tr ' ' '\n' | grep -qx "$1"; }
json_get() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
# readable_by_nobody PATH: nobody can read PATH, and it is a trace.
readable_by_nobody() {
    as_nobody cat "$1" | python3 -c 'import json,sys; json.load(sys.stdin)'
}

start_daemon --flush-period 0.2

# 1. nobody's own window: a trace nobody can read (it was mode 0640 root in
# a 0750 directory).
nobody_job rootjob
wait_for 100 has_session "$NPID" || fail "nobody's workload did not connect"
nctl begin-window --all --json > "$T/nb.json" || fail "nobody cannot open a window"
sleep 0.3
nctl end-window --json > "$T/nend.json" || fail "nobody cannot end its window"
trace=$(json_get "$T/nend.json" 'r["output"]')
readable_by_nobody "$trace" || fail "nobody cannot read its own trace $trace: $(ls -ld "$T/out" "$T/out/windows" "$trace")"
[ "$(stat -c %u "$trace")" = 65534 ] || fail "nobody's trace is owned by uid $(stat -c %u "$trace")"
[ "$(json_get "$T/nend.json" 'r["uids"]')" = "[65534]" ] || fail "the reply does not name nobody's uid: $(cat "$T/nend.json")"
# Others cannot list the traces, nor read root's.
as_nobody ls "$T/out/windows" >/dev/null 2>&1 && fail "nobody can list $T/out/windows"

# 2. nobody's process carries root's label: root's window by that label
# is refused and names both users; --uid and --all-users choose.
CUPTIMON_LABEL=rootjob spawn_workload --kernels 2000 --rate 2000 --linger-ms 60000 -q
RPID=$SPAWNED
PIDS="$PIDS $RPID"
wait_for 100 has_session "$RPID" || fail "root's workload did not connect"
set +e
out=$(ctl begin-window --label rootjob 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && echo "$out" | grep -q "matches sessions of 2 users (uids" &&
    echo "$out" | grep -q " 0" && echo "$out" | grep -q "65534" && echo "$out" | grep -q -- "--all-users" ||
    fail "root's window by a label two users claim was not refused: $rc $out"
ctl begin-window --label rootjob --uid 0 --json > "$T/r.json" || fail "root cannot narrow its label window with --uid 0"
[ "$(json_get "$T/r.json" 'r["pids"]')" = "[$RPID]" ] || fail "--label rootjob --uid 0 took $(json_get "$T/r.json" 'r["pids"]')"
ctl end-window --json > "$T/rend.json" || fail "root cannot end its window"
[ "$(json_get "$T/rend.json" 'r["uids"]')" = "[0]" ] || fail "the reply names $(json_get "$T/rend.json" 'r["uids"]')"
ctl begin-window --label rootjob --all-users --json > "$T/a.json" || fail "root cannot take every user's rootjob"
[ "$(json_get "$T/a.json" 'sorted(r["pids"])')" = "$(echo "[$RPID, $NPID]" | python3 -c 'import sys; print(sorted(eval(sys.stdin.read())))')" ] ||
    fail "--all-users took $(json_get "$T/a.json" 'r["pids"]')"
ctl end-window --json > "$T/aend.json" || fail "root cannot end its --all-users window"
[ "$(json_get "$T/aend.json" 'sorted(r["uids"])')" = "[0, 65534]" ] || fail "the reply names $(json_get "$T/aend.json" 'r["uids"]')"
# The trace records whose each process is.
atrace=$(json_get "$T/aend.json" 'r["output"]')
python3 - "$atrace" "$RPID" "$NPID" <<'PY' || fail "the trace does not record the uid of each process"
import json, sys
t = json.load(open(sys.argv[1]))["otherData"]
got = sorted((p["pid"], p["uid"]) for p in t["window_processes"])
assert got == sorted([(int(sys.argv[2]), 0), (int(sys.argv[3]), 65534)]), got
assert t["window_requested_by_uid"] == 0, t
PY
set +e
out=$(ctl begin-window --label rootjob --uid 0 --all-users 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && echo "$out" | grep -q "contradict" || fail "--uid with --all-users was not refused: $rc $out"
set +e
out=$(nctl begin-window --label rootjob --all-users 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && echo "$out" | grep -q "own processes only" || fail "nobody's --all-users was not refused: $rc $out"

# 3. Root's window by label is fixed to root: nobody's process that joins
# later with the same label stays out (it joined root's window).
kill "$NPID"; wait "$NPID" 2>/dev/null || true
gone() { ! has_session "$NPID"; }
wait_for 100 gone || fail "nobody's first workload did not go"
ctl begin-window --label rootjob --json > "$T/l.json" || fail "root cannot open a window by its label"
[ "$(json_get "$T/l.json" 'r["pids"]')" = "[$RPID]" ] || fail "root's label window took $(json_get "$T/l.json" 'r["pids"]')"
nobody_job rootjob
wait_for 100 has_session "$NPID" || fail "nobody's second workload did not connect"
sleep 0.3
ctl end-window --json > "$T/lend.json" || fail "root cannot end its label window"
[ "$(json_get "$T/lend.json" 'r["pids"]')" = "[$RPID]" ] ||
    fail "nobody's process labelled rootjob joined root's window: $(json_get "$T/lend.json" 'r["pids"]')"
stop_all
stop_daemon

# 4. A daemon that may not chown (as under the systemd unit, which keeps no
# capability) gives nobody the trace with an ACL instead.
if setpriv --bounding-set=-chown true 2>/dev/null; then
    setpriv --bounding-set=-chown "$CUPTIMOND" --socket "$CUPTIMON_SOCKET" \
        --control-socket "$CUPTIMON_CONTROL_SOCKET" --output-dir "$T/out2" --flush-period 0.2 \
        2>>"$T/daemon.log" &
    DPID=$!
    wait_for 100 ctl status >/dev/null 2>&1 || fail "the daemon without CAP_CHOWN did not start"
    nobody_job acl
    wait_for 100 has_session "$NPID" || fail "nobody's workload did not connect"
    nctl begin-window --all --json > /dev/null || fail "nobody cannot open a window"
    set +e
    out=$(nctl end-window --json 2>&1); rc=$?
    set -e
    if [ $rc -ne 0 ] && echo "$out" | grep -q "POSIX ACLs"; then
        echo "note: $T has no POSIX ACLs; the ACL case is not checked: $out"
    else
        [ $rc -eq 0 ] || fail "nobody's window failed under a daemon without CAP_CHOWN: $out"
        trace=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["output"])')
        [ "$(stat -c %u "$trace")" = 0 ] || fail "a daemon without CAP_CHOWN could chown $trace?"
        readable_by_nobody "$trace" || fail "nobody cannot read its trace through the ACL: $(ls -l "$trace")"
    fi
    stop_all
    stop_daemon
else
    echo "note: setpriv cannot drop CAP_CHOWN here; the ACL case is not checked"
fi
echo ok
