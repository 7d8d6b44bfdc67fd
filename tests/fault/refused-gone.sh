#!/bin/bash
# A job refused after it had ended loses nothing uncounted (issue 21 item
# 3).  The daemon is stopped while an ordinary user's job ('nobody', at its
# cap of one session) starts, connects, announces its buffers and exits:
# its shim leaves buffers whose BUFFER_READY reached the daemon's socket to
# the daemon, so it counts none.  When the daemon runs again it refuses the
# hello (over max_sessions_per_user): the buffers are not archived, and
# their records must be counted as lost for that user in status, and said
# in the log.  Before, the refusal was counted and the records were not.
. "$top_srcdir/tests/fault/fault-lib.sh"
need_nobody

echo '{"max_sessions_per_user": 1}' >"$T/caps.conf"
start_daemon --config "$T/caps.conf" --flush-period 0.2
chmod 755 "$T/out" 2>/dev/null || true
mkdir -m 777 "$T/nb" # where nobody's job writes its report
as_job() { # as_job LABEL ARGS...: a workload of nobody's, under the shim
    local label=$1
    shift
    setpriv --reuid=65534 --regid=65534 --clear-groups env CUPTIMON_SOCKET="$CUPTIMON_SOCKET" \
        CUDA_INJECTION64_PATH="$SHIM" CUPTIMON_LABEL="$label" "$WORKLOAD" "$@"
}
# The one session nobody may have.
as_job holder --kernels 200 --rate 1000 --linger-ms 60000 --quiet &
holder=$!
track "$holder"
one() { [ "$(status_py "len([s for s in st['sessions'] if s['uid'] == 65534 and s['connected']])")" = 1 ]; }
wait_for 100 one || fail "nobody's first job did not connect"

kill -STOP "$DPID"
# The short job runs whole while the daemon is stopped: its exit waits at
# most 1 s for a daemon that does not answer, then it leaves.
as_job short --kernels 3000 --quiet --report "$T/nb/short.json" 2>"$T/short.err" ||
    { kill -CONT "$DPID"; fail "the short job failed: $(cat "$T/short.err")"; }
kill -CONT "$DPID"
counted() { [ "$(status_py "st['daemon']['losses']['records_lost']")" -gt 0 ]; }
wait_for 100 counted || fail "the records of the refused job are not counted as lost: $(ctl status --json | head -c 2000)"
grep -q "refused a producer, pid [0-9]* uid 65534: .*max_sessions_per_user" "$T/daemon.log" ||
    fail "the short job was not refused over the cap: $(grep refused "$T/daemon.log")"
grep -q "refused producer pid [0-9]* uid 65534 had ended: the [0-9]* records ([0-9]* buffers) it had announced are lost" \
    "$T/daemon.log" || fail "the loss is not in the log: $(grep -i 'refused' "$T/daemon.log")"
python3 - "$T/nb/short.json" <<PY || fail "the loss counted for nobody is not the short job's"
import json, subprocess, sys
rep = json.load(open(sys.argv[1]))
st = json.loads(subprocess.run(["$CTL", "--control-socket", "$CUPTIMON_CONTROL_SOCKET", "status",
                                "--json"], capture_output=True, text=True, check=True).stdout)
row = [u for u in st["daemon"]["losses"]["users"] if u["uid"] == 65534][0]
# Every record the double recorded (kernels, copies, memsets and their API
# records are all in buffers it announced) is counted once.
want = sum(rep[k] for k in ("kernels_recorded", "memcpys_recorded", "memsets_recorded",
                           "runtime_api_recorded", "driver_api_recorded",
                           "external_correlation_recorded"))
print("refused-gone: the short job recorded %d records; status counts %d records lost in %d buffers for uid 65534 (%d refusals)"
      % (want, row["records_lost"], row["buffers_lost"], row["refused_producers"]))
assert row["refused_producers"] >= 1, row
assert row["records_lost"] == want, (row, rep)
PY
grep -q "lost [0-9]* records" "$T/short.err" &&
    fail "the short job's shim counted a loss as well: it would be counted twice: $(cat "$T/short.err")"
kill -0 "$DPID" || fail "the daemon died"
echo ok
