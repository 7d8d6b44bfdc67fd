#!/bin/bash
# Authorization, fail closed: a user who is not an operator sees only their
# own sessions, flushes only them, and may open windows over their own
# processes only; asking for someone else's is refused with a reason and
# logged.  Runs the unprivileged side as 'nobody' (needs root and setpriv).
. "$top_srcdir/tests/integration/lib.sh"
need_nobody

start_daemon
# Root's process has a label and a kernel name of its own: neither may reach
# nobody through any listing.
# Both stay connected (--linger-ms) until SIGUSR1 ends them, however slowly
# the checks below run (ASan, a loaded machine).
CUPTIMON_LABEL=rootjob spawn_workload --kernels 60000 --rate 20000 --names _Z10rootsecretPfi \
    --linger-ms 300000 --report "$T/root.json"
rootpid=$SPAWNED
setpriv --reuid=65534 --regid=65534 --clear-groups env CUPTIMON_SOCKET="$CUPTIMON_SOCKET" \
    CUDA_INJECTION64_PATH="$SHIM" "$WORKLOAD" --kernels 60000 --rate 20000 --linger-ms 300000 &
nobodypid=$!
two() { [ "$(ctl status --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["sessions"]))')" = 2 ]; }
wait_for 100 two || fail "both workloads did not connect"

nctl() { as_nobody "$CTL" --control-socket "$CUPTIMON_CONTROL_SOCKET" "$@"; }
nctl status --json > "$T/nstatus.json" || fail "nobody cannot ask for status"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["sessions"]; assert [x["pid"] for x in s]==[int(sys.argv[2])], s' \
    "$T/nstatus.json" "$nobodypid" || fail "nobody sees other users' sessions: $(cat "$T/nstatus.json")"
nctl flush --forced | grep -q "1 of 1 session" || fail "nobody's flush reached other sessions"
# The op list is filtered by the caller's rights too: nobody is offered the
# ops of daemon/control.c's table that anyone may call, and no other; an
# operator's op is refused with the reason, and logged.
anyone=$(sed -n '/^static const struct ctl_op ctl_ops\[\] = {$/,/^};$/p' "$top_srcdir/daemon/control.c" |
         sed -n 's/^ *{"\([a-z_]*\)", [a-z_]*, CTL_ANYONE, .*},$/\1/p')
[ "$(echo $anyone | wc -w)" -ge 5 ] || fail "found only '$(echo $anyone)' in daemon/control.c's op table: the pattern is stale"
# The request is sent by python3, and the first one on PATH may sit where
# nobody cannot reach it (pyenv under /root).
npython=
for p in $(type -ap python3); do
    if as_nobody "$p" -c pass 2>/dev/null; then npython=$p; break; fi
done
if [ -n "$npython" ]; then
    listed=$(AS=as_nobody AS_PYTHON=$npython known_ops) || fail "nobody's reply to an unknown op is not as expected"
    [ "$(echo $listed)" = "$(echo $anyone)" ] ||
        fail "nobody is offered the ops '$(echo $listed)', not the ones anyone may call: '$(echo $anyone)'"
else
    echo "note: no python3 on PATH that nobody may run; nobody's op list is not checked"
fi
set +e
out=$(nctl reload 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && echo "$out" | grep -q 'uid 65534 may not use the op "reload"' ||
    fail "nobody's reload was not refused: $rc $out"
grep -q "refused: uid 65534 pid [0-9]* asked for reload" "$T/daemon.log" || fail "the refused reload was not logged"
set +e
out=$(nctl begin-window --pid "$rootpid" 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && echo "$out" | grep -q "is not yours" || fail "a window over root's process was not refused: $rc $out"
grep -q "refused: uid 65534" "$T/daemon.log" || fail "the refusal was not logged"
set +e
out=$(nctl begin-window --uid 0 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && echo "$out" | grep -q "own processes only" || fail "a window over uid 0 was not refused: $rc $out"
# A selector that matches nothing says what nobody could have chosen:
# nobody's own sessions, never root's (its pid, uid or label).
set +e
out=$(nctl begin-window --label nosuch 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && echo "$out" | grep -q "matches no session" || fail "an unmatched selector was not refused: $rc $out"
echo "$out" | grep -q "pid $nobodypid" || fail "nobody is not told of its own session: $out"
! echo "$out" | grep -qE "pid $rootpid|uid 0|rootjob" || fail "nobody is told of root's session: $out"
# The daemon writes a trace with its own rights: nobody may not say where.
set +e
out=$(nctl begin-window --all --output /tmp/cuptimon-authz-$$.json 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && echo "$out" | grep -q "only operators may choose where" \
    || fail "nobody chose where the daemon writes a trace: $rc $out"
[ ! -e /tmp/cuptimon-authz-$$.json ] || fail "the daemon wrote nobody's trace where nobody asked"
# --all from nobody means nobody's own processes.
nctl begin-window --all --json > "$T/nw.json" || fail "nobody cannot open a window over its own process"
python3 -c 'import json,sys; w=json.load(open(sys.argv[1])); assert w["pids"]==[int(sys.argv[2])], w' \
    "$T/nw.json" "$nobodypid" || fail "nobody's --all window holds other processes: $(cat "$T/nw.json")"
# Root does not see nobody's window as an error, and nobody cannot end root's.
ctl begin-window --pid "$rootpid" --json > "$T/rw.json"
rid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["window"])' "$T/rw.json")
set +e
out=$(nctl end-window "$rid" 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && echo "$out" | grep -q "no window $rid of yours" || fail "nobody could end root's window: $rc $out"
nctl end-window --json > "$T/nend.json" || fail "nobody cannot end its own window"
ctl end-window "$rid" --json > /dev/null || fail "root cannot end its window"
kill -USR1 "$nobodypid" "$rootpid"
wait "$nobodypid" || fail "nobody's workload failed"
wait "$rootpid" || fail "root's workload failed"
# top and metrics: nobody sees the aggregates of its own process only (the
# sessions that ended stay in them for a minute).  Root's label, pid and
# kernel name appear nowhere, and nobody's totals are its own.
ctl flush --forced >/dev/null || true
ctl top --json > "$T/rtop.json" || fail "root cannot ask for top"
nctl top --json > "$T/ntop.json" || fail "nobody cannot ask for top"
nctl top --json --by kernel > "$T/ntopk.json" || fail "nobody cannot ask for top --by kernel"
nctl metrics > "$T/nmetrics.txt" || fail "nobody cannot ask for metrics"
python3 - "$T/rtop.json" "$T/ntop.json" "$T/ntopk.json" "$nobodypid" <<'PY' || fail "nobody's top shows other users' processes"
import json, sys
r, n, k = (json.load(open(p)) for p in sys.argv[1:4])
me = int(sys.argv[4])
assert len(r["rows"]) == 2, ("root should see both processes", r["rows"])
assert [x["pid"] for x in n["rows"]] == [me], n["rows"]
assert all(x["uid"] == 65534 for x in n["rows"]), n["rows"]
mine = n["rows"][0]["kernels"]
assert n["node"]["sessions"] + n["node"]["sessions_ended"] == 1, n["node"]
assert n["node"]["kernels"] == mine, (n["node"], mine)
names = [x["name"] for x in k["rows"]]
assert not any("rootsecret" in x for x in names), names
assert sum(x["count"] for x in k["rows"]) + k["rest"]["count"] == mine, (k["rows"], mine)
assert "rootjob" not in json.dumps([n, k]), "root's label reaches nobody"
PY
! grep -qE "pid=\"$rootpid\"|rootjob|rootsecret" "$T/nmetrics.txt" ||
    fail "nobody's metrics show root's process: $(grep -E "pid=\"$rootpid\"|rootjob|rootsecret" "$T/nmetrics.txt" | head -3)"
grep -q "pid=\"$nobodypid\"" "$T/nmetrics.txt" || fail "nobody's metrics do not show its own process"
ctl metrics | grep -q "pid=\"$rootpid\"" || fail "root's metrics do not show root's process"
stop_daemon
echo "ok"
