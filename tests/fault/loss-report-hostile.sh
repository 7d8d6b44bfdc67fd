#!/bin/bash
# The loss directory (daemon/lossreport.c) is writable by every user, so
# what is in it is hostile until shown otherwise: a link, a FIFO, a huge
# sparse file, a hard link to someone else's file, junk, counts out of
# range, a report that claims another uid and pid, a directory, a flood of
# files.  The daemon must follow no link, block on nothing, read no more
# than a report's size, count each file for its owner (fstat) and never
# for what it claims, remove what it read and nothing else, keep its log
# bounded, and show each user only their own row.  A loss directory that
# someone else made is not used at all.  Needs root (to act as 'nobody').
# It runs no workload through the libcupti test double.
CUPTIMON_TEST_NO_DOUBLE=1
. "$top_srcdir/tests/fault/fault-lib.sh"
need_nobody

start_daemon
L=$T/lost
[ "$(stat -c %a:%u "$L")" = "1733:0" ] || fail "the loss directory is $(stat -c %a:%u "$L"), not 1733:0"
! as_nobody ls "$L" >/dev/null 2>&1 || fail "nobody can list the loss directory"

echo "root's own" >"$T/secret"
chmod 600 "$T/secret"
# A valid report, but a hard link to a file of root's: not taken (a user
# with a link to someone's file would otherwise have it read and counted).
printf '{"report":1,"pid":9,"records_lost":5,"buffers_lost":1,"dropped_records":0,"reason":"unsent"}' \
    >"$T/linked"
ln "$T/linked" "$L/hard"
report='{"report":1,"uid":0,"pid":1,"records_lost":7,"buffers_lost":1,"dropped_records":2,"reason":"queue_full; rm -rf /","label":"x\u0001y"}'
as_nobody sh -c "
    ln -s '$T/secret' '$L/link'
    mkfifo '$L/fifo'
    truncate -s 2G '$L/big'
    printf 'not json' >'$L/junk'
    printf '{\"report\":1,\"records_lost\":-5,\"buffers_lost\":1,\"dropped_records\":0}' >'$L/negative'
    printf '{\"report\":1,\"records_lost\":100000000000000,\"buffers_lost\":1,\"dropped_records\":0}' >'$L/huge'
    printf '%s' '$report' >'$L/claim'
    mkdir '$L/dir' && touch '$L/dir/x'
" || fail "nobody could not write into the loss directory"
log0=$(log_lines)
taken() { [ "$(ls -A "$L")" = dir ]; }
wait_for 50 taken || fail "the daemon did not take every file: $(ls -A "$L")"
kill -0 "$DPID" || fail "the daemon died"
[ "$(cat "$T/secret")" = "root's own" ] || fail "the link's target was changed"
[ -f "$T/linked" ] && [ "$(stat -c %h "$T/linked")" = 1 ] || fail "the hard link's other name is gone"
[ -e "$L/dir/x" ] || fail "the daemon emptied a user's directory"

ctl status --json >"$T/st.json"
as_nobody "$CTL" --control-socket "$CUPTIMON_CONTROL_SOCKET" status --json >"$T/nst.json" ||
    fail "nobody cannot ask for status"
python3 - "$T/st.json" "$T/nst.json" <<'PY' || fail "the loss reports were not counted as they must be"
import json, sys
st = json.load(open(sys.argv[1]))["daemon"]["losses"]
nst = json.load(open(sys.argv[2]))["daemon"]["losses"]
users = {u["uid"]: u for u in st["users"]}
nob, root = users.get(65534), users.get(0)
assert nob and nob["loss_reports"] == 1 and nob["records_lost"] == 7, st
assert nob["dropped_records"] == 2 and nob["bad_reports"] == 6, nob
assert root and root["loss_reports"] == 0 and root["bad_reports"] == 1, root
r = st["recent"][0]
assert r["uid"] == 65534 and r["reported_pid"] == 1 and r["reason"] == "other", r
assert r["label"] == "x?y", r
assert [u["uid"] for u in nst["users"]] == [65534], nst
assert all(x["uid"] == 65534 for x in nst["recent"]) and nst["records_lost"] == 7, nst
print(f"loss-report-hostile: nobody {nob}; root {root}")
PY

# A flood: 1000 files at once are all taken within a few seconds, with a
# bounded log.
as_nobody sh -c "for i in \$(seq 1 1000); do printf x >'$L/f'\$i; done"
log1=$(log_lines)
t0=$(now_ms)
wait_for 150 taken || fail "the flood was not taken: $(ls -A "$L" | wc -l) files left"
lines=$(($(log_lines) - log1))
echo "loss-report-hostile: 1000 junk files taken in $(($(now_ms) - t0)) ms, $lines log lines" \
    "($((log1 - log0)) for the 10 cases before)"
[ "$lines" -le 30 ] || fail "the flood wrote $lines log lines"
[ "$(status_py "[u for u in st['daemon']['losses']['users'] if u['uid'] == 65534][0]['bad_reports']")" = 1006 ] ||
    fail "the flood was not counted for its owner"
stop_daemon

# A loss directory that another user made first: the daemon leaves it
# alone (taking it would read and delete that user's files).
mkdir -m 1777 "$T/d2"
as_nobody mkdir -m 1777 "$T/d2/lost"
chmod 755 "$T/d2"
as_nobody sh -c "printf '%s' '$report' >'$T/d2/lost/mine'"
CUPTIMON_SOCKET=$T/d2/producer.sock
start_daemon
sleep 1.5
[ -f "$T/d2/lost/mine" ] || fail "the daemon took a file from a loss directory it does not own"
grep -q "lost is not the daemon's own directory" "$T/daemon.log" || fail "the daemon did not say why"
[ "$(status_py "st['daemon']['losses']['report_dir']")" = None ] || fail "status names a loss directory"
stop_daemon
echo "ok"
