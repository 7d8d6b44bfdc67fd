#!/bin/bash
# Many producers coming and going: SOAK_PRODUCERS (default 64) producers at
# a time for SOAK_SECONDS (default 5 here; `make soak` runs 20, and longer
# with SOAK_SECONDS=N), each streaming a small random amount at a random
# rate, lingering a random time (at least SOAK_MIN_LINGER_MS, default 200:
# see hello-close.sh), and about one in five SIGKILLed at a
# random moment after its hello was taken (SOAK_EARLY_KILLS=1: at any
# moment, also before; that crashes the daemon today, see hello-close.sh and
# docs/FAULTS.md).  Then, with every producer gone: the daemon still answers,
# has no session left, holds as many fds as before the soak, maps no pool,
# and its memory did not grow with the number of sessions it served (RSS
# bounded, and flat over the second half of the soak); every session's
# archive reads back without corruption or torn tail; every producer that
# exited normally has every record it wrote in the archive exactly once.
# SOAK_CHURN=1 is the churn of issue 21: no allowances (not niced, no
# minimum linger, kills at any moment) and shorter jobs, so that the daemon
# falls behind; then a normally exiting producer's records must be archived
# or counted as lost (its stderr line, the daemon's status), none uncounted,
# and at least 2 000 jobs ran in 120 s (scaled to SOAK_SECONDS).
# The daemon's fds, VmRSS and VmData (its heap and other private writable
# mappings, from /proc/PID/status) are shown at start, after the warm-up,
# at their peak in each half of the soak and at the end, and must stay
# flat (the bounds are below).
. "$top_srcdir/tests/fault/fault-lib.sh"

# VmData: the private writable memory the daemon has mapped (malloc's heap
# and arenas, thread stacks), resident or not: what malloc holds, which
# VmRSS understates for pages never touched or swapped out.  Reading it is
# as cheap as VmRSS.
data_kb() { awk '/^VmData:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

CHURN=${SOAK_CHURN:-0}
if [ "$CHURN" = 1 ]; then
    : "${SOAK_NICE:=0}" "${SOAK_MIN_LINGER_MS:=0}" "${SOAK_EARLY_KILLS:=1}" "${SOAK_MAX_LINGER_MS:=100}"
fi

SECONDS_=${SOAK_SECONDS:-5}
N=${SOAK_PRODUCERS:-64}
# The producers run niced (SOAK_NICE, default 10): 64 of them on a 2-core CI
# machine otherwise starve the daemon for over a second, and a producer
# whose exit-time hand-off (1 s) runs out then loses its last buffer to the
# bug that stalled-exit.sh shows.  SOAK_NICE=0 shows that loss.
NICE=${SOAK_NICE:-10}
export CUPTIMON_POOL_SLOTS=8 CUPTIMON_SLOT_SIZE=256K
# Completeness is the verdict here, not the exit hand-off's bound (1 s by
# default, stalled-exit.sh's subject): a daemon starved by a loaded CI
# machine under a sanitizer took longer and a producer counted its last
# buffer lost.  The churn keeps the default, and its losses must be counted.
[ "$CHURN" = 1 ] || export CUPTIMON_EXIT_TIMEOUT_MS=${SOAK_EXIT_TIMEOUT_MS:-10000}
start_daemon --flush-period 0.5
start_fds=$(fd_count "$DPID") start_rss=$(rss_kb "$DPID") start_data=$(data_kb "$DPID")

# Warm up (the first sessions allocate the worker pool and compressors),
# then take the baseline.
warm=
for i in 1 2 3 4; do
    spawn_tracked --kernels 500 --linger-ms 300 --quiet --report "$T/warm$i.json"
    warm="$warm $SPAWNED"
done
for p in $warm; do wait "$p" || fail "a warm-up producer failed"; done
no_sessions() { [ "$(status_py "len(st['sessions'])")" = 0 ]; }
wait_for 50 no_sessions || fail "the warm-up sessions did not end"
base_fds=$(fd_count "$DPID")
base_rss=$(rss_kb "$DPID")
base_data=$(data_kb "$DPID")

RANDOM=${SOAK_SEED:-$$}
echo "soak: $N producers at a time for ${SECONDS_} s, nice $NICE, churn $CHURN (seed ${SOAK_SEED:-$$})"
declare -A kill_at=()   # pid -> ms at which to SIGKILL it
declare -A report=()    # pid -> report file (every producer not SIGKILLed)
running=()
normal_reports=()
spawned=0 killed=0 normal=0
start=$(now_ms)
end=$((start + SECONDS_ * 1000))
mid_rss=0 max_rss=0 late_max_rss=0
mid_data=0 max_data=0 late_max_data=0 max_fds=0
next_sample=$start
while :; do
    now=$(now_ms)
    [ "$now" -lt "$end" ] || break
    still=()
    for p in "${running[@]}"; do
        if kill -0 "$p" 2>/dev/null; then
            # The daemon logs the session once it has answered the hello:
            # only then is a kill a "producer killed mid-run".
            if [ -n "${kill_at[$p]:-}" ] && [ "$now" -ge "${kill_at[$p]}" ] &&
                { [ "${SOAK_EARLY_KILLS:-0}" = 1 ] || grep -q "session [0-9]*: pid $p " "$T/daemon.log"; }; then
                kill -KILL "$p" 2>/dev/null || true
                killed=$((killed + 1))
                unset "kill_at[$p]" "report[$p]"
            fi
            still+=("$p")
            continue
        fi
        rc=0
        wait "$p" || rc=$?
        # One that ended before its kill time exited normally after all,
        # and is checked as such (its report is still set).
        if [ -n "${report[$p]:-}" ]; then
            [ "$rc" = 0 ] || fail "producer $p exited with status $rc"
            normal=$((normal + 1))
            normal_reports+=("${report[$p]}")
        fi
        # Its pid may come back for a later producer.
        unset "report[$p]" "kill_at[$p]"
    done
    running=("${still[@]}")
    # Only the producers still running are killed if the soak fails: a
    # reaped one's pid may belong to anyone by now.
    FAULT_PIDS="${running[*]:-}"
    while [ "${#running[@]}" -lt "$N" ]; do
        k=$((50 + RANDOM % 800))
        rate=$((2000 + RANDOM % 18000))
        # At least 200 ms: a producer that is gone before the daemon
        # answers its hello crashes the daemon today (hello-close.sh).
        linger=$((${SOAK_MIN_LINGER_MS:-200} + RANDOM % ${SOAK_MAX_LINGER_MS:-300}))
        spawned=$((spawned + 1))
        f="$T/r$spawned.json"
        CUPTIMON_LABEL=soak-$spawned CUDA_INJECTION64_PATH=$SHIM nice -n "$NICE" "$WORKLOAD" \
            --kernels "$k" --rate "$rate" --linger-ms "$linger" --quiet --report "$f" \
            2>"$T/r$spawned.err" &
        SPAWNED=$!
        running+=("$SPAWNED")
        FAULT_PIDS="${running[*]}"
        report[$SPAWNED]=$f
        if [ $((RANDOM % 5)) = 0 ]; then
            kill_at[$SPAWNED]=$((now + RANDOM % 400))
        fi
    done
    if [ "$now" -ge "$next_sample" ]; then
        r=$(rss_kb "$DPID")
        v=$(data_kb "$DPID")
        nfd=$(fd_count "$DPID")
        [ "$nfd" -gt "$max_fds" ] && max_fds=$nfd
        [ "$r" -gt "$max_rss" ] && max_rss=$r
        [ "$v" -gt "$max_data" ] && max_data=$v
        if [ $((now - start)) -lt $((SECONDS_ * 500)) ]; then
            mid_rss=$max_rss mid_data=$max_data
        else
            [ "$r" -gt "$late_max_rss" ] && late_max_rss=$r
            [ "$v" -gt "$late_max_data" ] && late_max_data=$v
        fi
        next_sample=$((now + 500))
        kill -0 "$DPID" 2>/dev/null || fail "the daemon died during the soak"
    fi
    sleep 0.05
done
# Let the last ones finish (those still due to be killed just run out, and
# are normal exits).
for p in "${running[@]}"; do
    rc=0
    wait "$p" || rc=$?
    if [ -n "${report[$p]:-}" ]; then
        [ "$rc" = 0 ] || fail "producer $p exited with status $rc"
        normal=$((normal + 1))
        normal_reports+=("${report[$p]}")
    fi
done
FAULT_PIDS=
echo "soak: $spawned producers in $(($(now_ms) - start)) ms: $normal exited normally, $killed SIGKILLed"
# Issue 21's churn asks for at least 2 000 jobs in 2 minutes: so many
# short jobs that the daemon falls behind.  Shorter or longer runs scale
# the floor with their length: 2000 * SOAK_SECONDS / 120 (83 for 5 s).
if [ "$CHURN" = 1 ]; then
    min_jobs=$((2000 * SECONDS_ / 120))
    [ "$spawned" -ge "$min_jobs" ] ||
        fail "only $spawned producer jobs ran in ${SECONDS_} s; the churn needs at least $min_jobs"
fi

kill -0 "$DPID" 2>/dev/null || fail "the daemon died"
wait_for 100 no_sessions || fail "stale sessions after the soak: $(ctl status)"
fds_back() {
    end_fds=$(fd_count "$DPID")
    [ "$end_fds" -le "$base_fds" ]
}
wait_for 50 fds_back || {
    ls -l "/proc/$DPID/fd"
    fail "the daemon holds $(fd_count "$DPID") fds after the soak, $base_fds before"
}
[ "$(maps_matching "$DPID" memfd:)" = 0 ] ||
    fail "the daemon still maps $(maps_matching "$DPID" memfd:) pool(s) after every producer left"
end_rss=$(rss_kb "$DPID")
end_data=$(data_kb "$DPID")
total=$(status_py "st['daemon']['sessions_total']")
echo "soak: daemon fds $start_fds at start, $base_fds after the warm-up, max $max_fds," \
    "$end_fds at the end"
echo "soak: daemon VmRSS KiB: $start_rss at start, $base_rss after the warm-up, max $max_rss" \
    "(first half $mid_rss, second half $late_max_rss), $end_rss at the end"
echo "soak: daemon VmData KiB: $start_data at start, $base_data after the warm-up, max $max_data" \
    "(first half $mid_data, second half $late_max_data), $end_data at the end; $total sessions served"
# Memory is per live session, not per session served: bounded by the 64
# live ones, and no higher in the second half than in the first.  Not under
# ASan, whose quarantine keeps freed memory resident by design (LSan checks
# leaks there when the daemon exits).
if [ -z "$ASAN_RT" ]; then
    [ "$max_rss" -lt $((base_rss + 262144)) ] || fail "the daemon's RSS reached $max_rss KiB (from $base_rss)"
    [ "$late_max_rss" -le $((mid_rss + 16384)) ] ||
        fail "the daemon's RSS grew from $mid_rss KiB (first half) to $late_max_rss KiB (second half)"
    [ "$end_rss" -lt $((base_rss + 65536)) ] ||
        fail "the daemon's RSS is $end_rss KiB with no session left ($base_rss before the soak)"
    # VmData, the same way: what it maps for 64 live sessions is bounded
    # (256 MiB), the second half maps at most 16 MiB more than the first
    # (malloc's arenas settle in the first), and with no session left at
    # most 64 MiB more than after the warm-up.  A leak per session served
    # grows it with the thousands of sessions of a long soak.
    [ "$max_data" -lt $((base_data + 262144)) ] ||
        fail "the daemon's VmData reached $max_data KiB (from $base_data)"
    [ "$late_max_data" -le $((mid_data + 16384)) ] ||
        fail "the daemon's VmData grew from $mid_data KiB (first half) to $late_max_data KiB (second half)"
    [ "$end_data" -lt $((base_data + 65536)) ] ||
        fail "the daemon's VmData is $end_data KiB with no session left ($base_data before the soak)"
else
    echo "soak: RSS and VmData bounds not checked under ASan (its quarantine keeps freed memory)"
fi
# In the churn some may never connect: they must be counted instead (below).
[ "$CHURN" = 1 ] || [ "$total" -ge $((normal + 4)) ] ||
    fail "$total sessions for $normal normal producers: some never connected"
said_lost() { cat "$T"/r*.err 2>/dev/null | sed -n 's/^cuptimon\[[0-9]*\]: lost \([0-9]*\) records.*/\1/p' | awk '{s += $1} END {print s + 0}'; }
lost_in_status() { status_py "st['daemon'].get('losses', {}).get('records_lost', 0)"; }
reports_in() { [ "$(lost_in_status)" = "$(said_lost)" ]; }
wait_for 50 reports_in || true
in_status=$(lost_in_status)
stop_daemon

# Every session reads back clean; every normal producer is complete.  The
# summary's per-process counts are enough here (and cheap for thousands of
# sessions); check-archive.py does the per-name check in the other tests.
"$CTL" decode "$T/out" -o /dev/null --summary-out "$T/sum.json" 2>"$T/decode.err" ||
    fail "the soak archive does not decode: $(tail -5 "$T/decode.err")"
reports=()
for f in "${normal_reports[@]}"; do [ -f "$f" ] && reports+=("$f"); done
export CHURN IN_STATUS=$in_status
python3 - "$T/sum.json" "${reports[@]}" <<'PY' || fail "the soak archive is not complete"
import json, os, re, sys
churn, in_status = os.environ["CHURN"] == "1", int(os.environ["IN_STATUS"])
s = json.load(open(sys.argv[1]))
bad = [x for x in s["sessions"] if x["corrupt_chunks"] or x["corrupt_strings"] or x["torn_tails"]]
assert not bad, f"{len(bad)} damaged sessions, e.g. {bad[:2]}"
assert s["undecodable"]["bytes"] == 0, s["undecodable"]
# By label (soak-N for the report rN.json), not by pid: in a 120 s churn on
# a busy machine the pids wrap (pid_max 32768: 7 551 jobs, the script's own
# forks and a CI run went round once), and a pid then names two jobs.  A
# job with several sessions (a reconnect) is the sum of them.
procs = {}
for p in s["processes"]:
    if p.get("label"):
        q = procs.setdefault(p["label"], {"kernels": 0, "records": 0})
        q["kernels"] += p["kernels"]
        q["records"] += p["records"]
problems = []
wrote = archived = counted = counted_jobs = 0
for path in sys.argv[2:]:
    r = json.load(open(path))
    want_k = r["kernels_recorded"]
    want_all = want_k + r["memcpys_recorded"] + r["memsets_recorded"]
    label = "soak-" + re.search(r"/r(\d+)\.json$", path).group(1)
    p = procs.get(label, {"kernels": 0, "records": 0})
    # A record the exit hand-off could not pass on is counted on stderr.
    said = sum(int(n) for n in re.findall(r"^cuptimon\[\d+\]: lost (\d+) records",
                                          open(path[:-5] + ".err").read(), re.M))
    wrote += want_all
    archived += p["records"]
    counted += said
    counted_jobs += said > 0
    if r["dropped"]:
        problems.append(f"pid {r['pid']}: {r['dropped']} records dropped")
    if said and not churn:
        problems.append(f"pid {r['pid']}: {said} records lost at exit (counted)")
    if p["records"] + said != want_all or (not said and p["kernels"] != want_k):
        problems.append(f"pid {r['pid']} ({label}): archive has {p['kernels']} kernels / {p['records']} records,"
                        f" {said} counted as lost; the producer wrote {want_k} / {want_all}")
if churn and in_status < counted:
    problems.append(f"status counts {in_status} records lost; the producers said {counted}")
print(f"soak: {len(s['sessions'])} sessions read back clean; {len(sys.argv) - 2} normal producers"
      f" wrote {wrote} records: {archived} archived, {counted} counted as lost"
      f" ({counted_jobs} producers; status: {in_status}), {wrote - archived - counted} uncounted")
if problems:
    sys.exit("FAIL: " + "\nFAIL: ".join(problems[:20]) + f"\n({len(problems)} producers)")
PY
echo "ok"
