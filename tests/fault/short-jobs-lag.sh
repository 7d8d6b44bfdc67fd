#!/bin/bash
# Many short jobs while the daemon lags (issue 21, item 3): the daemon is
# stopped (SIGSTOP) for a few seconds while 160 jobs of about 1,000 records
# each start and exit, then 20 more exit while its listen queue is full as
# well; then it runs again.  Every job exits on time, and every record each
# job wrote is either archived or counted as lost: on the job's stderr (one
# line naming how many and why) and in `status` (the daemon's losses, per
# user, from the reports the shims left it).  Archived + counted = written,
# job by job and in total.  Was: the listen backlog was 128, and a job that
# found the queue full gave up after its exit hand-off bound (1 s) in
# silence: 160 jobs made 129 sessions, and the rest of their records were
# lost without a word, even with CUPTIMON_DEBUG=1.
. "$top_srcdir/tests/fault/fault-lib.sh"

A=${LAG_JOBS:-160}
B=${LAG_FULL_JOBS:-20}
start_daemon --flush-period 0.2
kill -STOP "$DPID"
t0=$(now_ms)

# spawn_job NAME: one short job in the background, its stderr kept.
declare -A start_ms=()
pids=()
spawn_job() {
    CUPTIMON_LABEL=$1 CUDA_INJECTION64_PATH=$SHIM "$WORKLOAD" --kernels 1000 --quiet \
        --report "$T/$1.json" 2>"$T/$1.err" &
    track $!
    pids+=($!)
    start_ms[$!]=$(now_ms)
}
# reap: waits for every job spawned so far; the longest one's wall time,
# start to exit as seen from here, goes to $longest_ms.
longest_ms=0
reap() {
    for p in "${pids[@]}"; do
        wait "$p" || fail "job $p failed"
        local took=$(($(now_ms) - start_ms[$p]))
        [ "$took" -gt "$longest_ms" ] && longest_ms=$took
    done
    pids=()
}

# 1. The daemon is stopped: its listen queue takes the jobs' connections
#    (the kernel queues up to the backlog), and each job hands off into
#    its socket and leaves within its exit bound.
for i in $(seq 1 "$A"); do spawn_job "a$i"; done
reap
long_a=$longest_ms

# 2. The queue is full as well (a client holds more connections than it
#    takes): these jobs cannot connect at all within their bound.
fill=$(queue_fill_count)
ulimit -n $((fill + 192)) 2>/dev/null || true
"$HOSTILE" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
    --count "$fill" --hold-ms 8000 idle-connections >"$T/h.out" 2>&1 &
h=$!
track "$h"
wait_for 100 grep -q "idle connections open" "$T/h.out" || fail "the queue did not fill"
grep -q "([1-9][0-9]* refused by the kernel)" "$T/h.out" ||
    fail "the daemon's listen queue did not fill: $(cat "$T/h.out")"
longest_ms=0
for i in $(seq 1 "$B"); do spawn_job "b$i"; done
reap
long_b=$longest_ms
stopped=$(($(now_ms) - t0))
kill -CONT "$DPID"
t_cont=$(now_ms)
answers() { ctl --timeout 2 status >/dev/null 2>&1; }
wait_for 300 answers || fail "the daemon did not answer status within 30 s of running again"
echo "short-jobs-lag: status answered $(($(now_ms) - t_cont)) ms after the daemon ran again"
echo "short-jobs-lag: daemon stopped $stopped ms; $A jobs with room in its queue took at most" \
    "$long_a ms each, $B with its queue full at most $long_b ms"
sed -n 's/^idle-connections: //p' "$T/h.out"

no_sessions() { [ "$(status_py "len(st['sessions'])" 2>/dev/null)" = 0 ]; }
wait_for 300 no_sessions || fail "the sessions did not end: $(status_py "len(st['sessions'])") left"
# The reports are picked up within a second or two of the daemon running.
reported() {
    [ "$(status_py "sum(u.get('records_lost', 0) for u in st['daemon'].get('losses', {}).get('users', []))" 2>/dev/null)" \
        = "$(cat "$T"/*.err | sed -n 's/.* lost \([0-9]*\) records.*/\1/p' | awk '{s += $1} END {print s + 0}')" ]
}
wait_for 50 reported || true
ctl status --json >"$T/status.json"
stop_daemon
"$CTL" decode "$T/out" -o /dev/null --summary-out "$T/sum.json" 2>"$T/decode.err" ||
    fail "the archive does not decode: $(tail -5 "$T/decode.err")"

python3 - "$T" "$A" "$B" <<'PY' || fail "records were lost without being counted"
import glob, json, os, re, sys
T, A, B = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
summ = json.load(open(f"{T}/sum.json"))
archived = {p["pid"]: p["records"] for p in summ["processes"]}
status = json.load(open(f"{T}/status.json"))
losses = status["daemon"].get("losses", {})
problems, lost_total, wrote_total, arch_total = [], 0, 0, 0
jobs_lost = {"a": 0, "b": 0}
for rep in sorted(glob.glob(f"{T}/[ab]*.json")):
    name = os.path.basename(rep)[:-5]
    r = json.load(open(rep))
    wrote = r["kernels_recorded"] + r["memcpys_recorded"] + r["memsets_recorded"]
    err = open(f"{T}/{name}.err").read()
    said = [int(m) for m in re.findall(r"cuptimon\[\d+\]:.* lost (\d+) records", err)]
    if len(said) > 1:
        problems.append(f"{name}: {len(said)} loss lines on stderr")
    lost = sum(said)
    got = archived.get(r["pid"], 0)
    wrote_total += wrote
    lost_total += lost
    arch_total += got
    if lost:
        jobs_lost[name[0]] += 1
    if got + lost != wrote:
        problems.append(f"{name} (pid {r['pid']}): wrote {wrote} records, {got} archived, "
                        f"{lost} said lost: {wrote - got - lost} vanished")
users = losses.get("users", [])
in_status = sum(u.get("records_lost", 0) for u in users)
reports = sum(u.get("loss_reports", 0) for u in users)
if in_status != lost_total:
    problems.append(f"status counts {in_status} records lost, the jobs said {lost_total}")
if reports != jobs_lost["a"] + jobs_lost["b"]:
    problems.append(f"status counts {reports} loss reports for "
                    f"{jobs_lost['a'] + jobs_lost['b']} jobs that lost records")
if jobs_lost["b"] != B:
    problems.append(f"only {jobs_lost['b']} of the {B} jobs that found the queue full lost records")
print(f"short-jobs-lag: {A + B} jobs wrote {wrote_total} records: {arch_total} archived, "
      f"{lost_total} counted as lost ({jobs_lost['a']} + {jobs_lost['b']} jobs; status: "
      f"{in_status} in {reports} reports), {wrote_total - arch_total - lost_total} uncounted")
if problems:
    sys.exit("FAIL: " + "\nFAIL: ".join(problems[:20]) + f"\n({len(problems)} problems)")
PY
echo "ok"
