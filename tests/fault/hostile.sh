#!/bin/bash
# Hostile input: a producer that lies (tests/fault/hostile-producer.c runs
# one case per connection: hellos without, with unsealed, short or
# non-memfd pools, absurd geometry, a false pid, extra fds; data messages
# before the hello, out of range, twice, malformed or unknown; wrong
# versions, 2 GiB headers, a flood of 100k messages).  Each case checks
# the daemon's answer itself.  Around each, this script proves that the
# daemon stayed alive, answered the control socket promptly, served a real
# workload next to the hostile one, and logged a clear line naming the
# value; at the end, that it holds no fd, mapping or session of theirs,
# that every real workload's archive is complete, and that the garbage the
# hostile producers had archived decodes without crashing the decoder.
. "$top_srcdir/tests/fault/fault-lib.sh"

# Under AddressSanitizer, freed memory waits in a quarantine of up to
# 256 MiB before it is reused, which the RSS check below would read as a
# leak (it grew by 68 MiB over the cases); 8 MiB keeps the check about
# what the daemon holds.  (ASan's leak check at exit still runs.)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"
start_daemon --flush-period 0.5
base_fds=$(fd_count "$DPID")
base_rss=$(rss_kb "$DPID")

logged_since() {
    tail -n +"$(($1 + 1))" "$T/daemon.log" | grep -qF -- "$2"
}

# bad-flood, idle-connections, hello-then-close and close-unread are judged
# by their own scripts (hostile-log-flood.sh, conn-flood.sh, hello-close.sh,
# close-unread.sh).
cases=$("$HOSTILE" --list | cut -f1 |
    grep -v -x -e bad-flood -e idle-connections -e hello-then-close -e close-unread)
reports=
ncases=0
for c in $cases; do
    ncases=$((ncases + 1))
    before=$(log_lines)
    CUPTIMON_LABEL=next-to-$c spawn_tracked --kernels 3000 --rate 30000 --quiet \
        --report "$T/w-$c.json"
    w=$SPAWNED
    "$HOSTILE" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" "$c" \
        >"$T/h-$c.out" 2>&1 &
    h=$!
    track "$h"
    # While the hostile producer works, the control socket answers promptly.
    t0=$(now_ms)
    ctl status >/dev/null || fail "$c: cuptimonctl status failed while the case ran"
    dt=$(($(now_ms) - t0))
    [ "$dt" -lt 8000 ] || fail "$c: cuptimonctl status took $dt ms while the case ran"
    if ! wait "$h"; then
        cat "$T/h-$c.out"
        fail "$c: the daemon did not behave (see above)"
    fi
    wait "$w" || fail "$c: the real workload next to it failed"
    kill -0 "$DPID" 2>/dev/null || fail "$c: the daemon died"
    ctl status >/dev/null || fail "$c: the daemon stopped answering"
    while read -r pat; do
        wait_for 30 logged_since "$before" "$pat" ||
            fail "$c: the daemon did not log a line containing: $pat"
    done < <(sed -n 's/^expect-log: //p' "$T/h-$c.out")
    reports="$reports $T/w-$c.json"
    sed -n -e 's/^ok: /  ok /p' -e 's/^SKIP /  SKIP /p' "$T/h-$c.out"
done
# A case this kernel cannot try (hello-hugetlb without hugetlbfs memfds)
# passed nothing: it is counted apart and named with its reason below, and
# the other cases still decide the verdict.
skips=$(cat "$T"/h-*.out | sed -n 's/^SKIP //p')
nskipped=$(printf '%s' "$skips" | grep -c . || true)

# Every hello refused as invalid is counted.
refused=$(cat "$T"/h-*.out | grep -c '^[a-z-]*: refused: EINVAL' || true)
got=$(status_py "st['daemon']['refused_producers']")
[ "$got" = "$refused" ] || fail "status counts $got refused producers, the cases saw $refused"

# Nothing of theirs is left in the daemon: sessions, fds, pool mappings.
no_sessions() { [ "$(status_py "len(st['sessions'])")" = 0 ]; }
wait_for 50 no_sessions || fail "sessions are left over: $(ctl status)"
fds_back() { [ "$(fd_count "$DPID")" -le "$base_fds" ]; }
wait_for 50 fds_back || {
    ls -l "/proc/$DPID/fd"
    fail "the daemon has $(fd_count "$DPID") fds open, $base_fds before the cases"
}
[ "$(maps_matching "$DPID" memfd:)" = 0 ] ||
    fail "the daemon still maps pools: $(grep memfd: "/proc/$DPID/maps")"
rss=$(rss_kb "$DPID")
[ "$rss" -lt $((base_rss + 65536)) ] ||
    fail "the daemon's RSS grew from $base_rss to $rss KiB over the cases"
echo "hostile: $ncases cases, $((ncases - nskipped)) passed, $nskipped skipped;" \
    "daemon fds $base_fds -> $(fd_count "$DPID"), RSS $base_rss -> $rss KiB"
[ "$nskipped" = 0 ] || printf '%s\n' "$skips" | sed 's/^/hostile: skipped /'
stop_daemon

# The hostile sessions' archives hold what they sent (garbage, on purpose):
# set them aside, decode them (the decoder must survive them), and check the
# real workloads' archives alone.
python3 - "$T/out" "$T/hostile-out" <<'PY'
import glob, json, os, shutil, sys
os.makedirs(os.path.join(sys.argv[2], "archive"))
for m in glob.glob(os.path.join(sys.argv[1], "archive", "*", "meta.json")):
    if json.load(open(m)).get("job", {}).get("label", "").startswith("hostile-"):
        d = os.path.dirname(m)
        shutil.move(d, os.path.join(sys.argv[2], "archive", os.path.basename(d)))
PY
rc=0
"$CTL" decode "$T/hostile-out" -o "$T/hostile-trace.json" --summary-out "$T/hostile-sum.json" \
    >"$T/hostile-decode.out" 2>&1 || rc=$?
[ "$rc" -lt 2 ] || { cat "$T/hostile-decode.out"; fail "decoding the hostile archives exited $rc"; }
python3 -c 'import json,sys; json.load(open(sys.argv[1])); s=json.load(open(sys.argv[2]))
print("hostile archives: %d sessions decode; %d undecodable bytes reported as such" % (len(s["sessions"]), s["undecodable"]["bytes"]))' \
    "$T/hostile-trace.json" "$T/hostile-sum.json" || fail "the hostile archives' trace or summary is not JSON"
# ... and export them (issue 50): every session in the database, nothing
# invented (sqlite3's own integrity check passes).
rc=0
"$CTL" export "$T/hostile-out" --type sqlite -o "$T/hostile.sqlite" >"$T/hostile-export.out" 2>&1 || rc=$?
[ "$rc" = 0 ] || { cat "$T/hostile-export.out"; fail "exporting the hostile archives exited $rc"; }
python3 -c 'import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
n = db.execute("SELECT count(*) FROM CUPTIMON_SESSIONS").fetchone()[0]
assert n == len(json.load(open(sys.argv[2]))["sessions"]), n' "$T/hostile.sqlite" "$T/hostile-sum.json" ||
    fail "the hostile archives' export lacks sessions"
# shellcheck disable=SC2086
python3 "$CHECK_ARCHIVE" "$CTL" "$T/out" $reports
echo "ok"
