#!/bin/bash
# Held, never dropped (issue 33), against the libcupti double, which
# completes records in launch order: one kernel that runs for seconds on a
# stream of its own holds every record launched after it, on any stream, in
# buffers CUPTI keeps (docs/gpu-runs/20261204-h200-probe).
#  A. a 5 s kernel while another stream launches flat out: the pool grows
#     past its resident slots instead of declining, so every kernel, copy
#     and memset is archived exactly once and CUPTI drops nothing; status
#     names the running kernel (name, stream, correlation id, age, what
#     waits behind it) during the hold, the daemon logs it past
#     inflight_warn_s; periodic flushes while it runs close no buffer (the
#     held buffers are full ones); once it ends the grown slots go back and
#     the pool's memory (its memfd's pages) shrinks back;
#  B. the same against a small cap (CUPTIMON_POOL_MAX): CUPTI drops what no
#     buffer is left for, and that is counted (status, meta.json), logged
#     (the cap was reached) and is all that is missing.
#  C. the daemon stopped across the hold's end while the job launches on:
#     the pool grows past that backlog on its credit, nothing is dropped;
#  D. no long kernel: status shows nothing in flight (the double leaves the
#     records of the buffer it fills incomplete until it closes it).
# With the fixed pool of before, A dropped most of what was launched
# during the hold.
. "$top_srcdir/tests/integration/lib.sh"

printf '{"inflight_warn_s": 1}\n' >"$T/cuptimond.conf"
start_daemon --flush-period 0.2 --config "$T/cuptimond.conf"

# status_of PID: that process's session in status --json, as one line.
status_of() {
    ctl status --json | python3 -c '
import json, sys
for s in json.load(sys.stdin)["sessions"]:
    if s["pid"] == int(sys.argv[1]) and s["connected"]:
        print(json.dumps(s))' "$1"
}
has_session() { [ -n "$(status_of "$1")" ]; }

# 30000 records fill some 46 slots of 128 KiB, three times the resident 16;
# launched in 1 s (2 s on a loaded machine under a sanitizer), all inside the
# 5 s hold: the buffers that come when it ends are the daemon's to drain,
# and the job launches nothing more meanwhile (a daemon slower than the
# job's launches makes CUPTI drop, by design: the pool does not grow for a
# daemon that falls behind).
slot=131072
# poll_held PID NAME: one status sample of the workload's session, logged
# to $T/NAME-polls.txt; the first that shows the hold kernel a second old
# is kept as NAME-during.json, the latest as NAME-after.json.  Exits 0 once
# a sample shows the hold over: nothing in flight, the grown slots back.
poll_held() {
    ctl status --json | python3 -c '
import json, sys, time
pid, T, name = int(sys.argv[1]), sys.argv[2], sys.argv[3]
raw = sys.stdin.read()
try:
    s = [x for x in json.loads(raw)["sessions"] if x["pid"] == pid and x["connected"]]
except ValueError:
    s = None
with open(f"{T}/{name}-polls.txt", "a") as log:
    if not s:
        log.write(f"{time.time():.3f} no session in status ({len(raw)} bytes)\n")
        sys.exit(1)
    s = s[0]
    f, pool = s.get("in_flight") or {}, s["pool"]
    fields = (time.time(), f.get("name"), f.get("age_s"), pool["grown_slots"],
              pool["grown_peak_slots"], s.get("buffers_received"))
    log.write("%.3f in_flight %s age %s grown %s peak %s buffers %s\n" % fields)
try:
    open(f"{T}/{name}-during.json")
except OSError:
    if f.get("name") == "hold()" and f["age_s"] >= 1:
        json.dump(s, open(f"{T}/{name}-during.json", "w"))
json.dump(s, open(f"{T}/{name}-after.json", "w"))
sys.exit(0 if not f and pool["grown_slots"] == 0 and pool["grown_peak_slots"] > 0 else 1)
' "$1" "$T" "$2"
}

held_run() { # NAME [ENV=VALUE...]: a held workload, its session polled while it runs
    local name=$1
    shift
    env "$@" CUPTIMON_SLOT_SIZE=$slot CUDA_INJECTION64_PATH="$SHIM" "$WORKLOAD" \
        --hold-us 5000000 --kernels 30000 --rate 30000 --wait-file "$T/go-$name" \
        --report "$T/$name.json" --launch-log "$T/$name.log" --linger-ms 60000 --quiet \
        2>"$T/$name.err" &
    local w=$! i
    wait_for 100 has_session $w || fail "$name: the workload did not connect"
    touch "$T/go-$name"
    # Sampled through the hold (its kernel named once a second old) until
    # it is over; the job lingers 60 s for it.  The hold is 5 s: with 3 s,
    # a loaded machine's polls (ctl and python each) took no sample while
    # the kernel was between 1 s old and done (no NAME-during.json).
    for i in $(seq 1 400); do
        poll_held $w "$name" && break
        kill -0 $w 2>/dev/null || break
        sleep 0.1
    done
    if ! poll_held $w "$name"; then
        echo "--- $name: status through the hold:"
        tail -n 30 "$T/$name-polls.txt"
        echo "--- $name: the workload's stderr:"
        tail -n 30 "$T/$name.err"
        fail "$name: the hold did not end in status (nothing in flight, the grown slots back) while the job lingered"
    fi
    kill -USR1 $w
    wait $w || fail "$name: the workload failed"
}

held_run a
held_run b CUPTIMON_POOL_MAX=3M

# C. The hold ends while the daemon is stopped and the job launches on: the
# buffers CUPTI held all complete at once and wait for the daemon, and the
# job's new records need buffers before it gives any back.  The pool grows
# past that backlog by up to its resident slots (a credit each release
# returns), so CUPTI drops nothing; growing only after a release (the rule
# before: on the H100 the 153 buffers a 15-s kernel held took 0.45 s to
# reach the daemon) drops every record launched until the daemon runs.
# 30000 records during the 3 s hold, then the last 4000 (7 slots, within the
# credit of 16) while the daemon is still stopped.  The double hands the
# held buffers over when the first buffer fills after the hold, as the H100
# does, without waiting for a flush.
env CUPTIMON_SLOT_SIZE=$slot CUDA_INJECTION64_PATH="$SHIM" "$WORKLOAD" \
    --hold-us 3000000 --kernels 34000 --rate 10000 --wait-file "$T/go-c" \
    --report "$T/c.json" --launch-log "$T/c.log" --quiet &
w=$!
wait_for 100 has_session $w || fail "c: the workload did not connect"
go_ns=$(date +%s%N)
touch "$T/go-c"
sleep 1.5
kill -STOP "$DPID"
sleep "$(python3 -c "print(max(0.0, ($go_ns + 3.8e9 - $(date +%s%N)) / 1e9))")"
cont_ns=$(date +%s%N)
kill -CONT "$DPID"
wait $w || fail "c: the workload failed"

# D. No long kernel: the job launches short ones steadily.  CUPTI leaves
# every record of the buffer it fills incomplete until it closes it (the
# H100), so there is always an oldest incomplete record, and it is work
# that has ended: status must not show it in flight.
# Ten samples, however slow status is (a sanitizer on a loaded machine):
# the job launches for 20 s at most and is stopped once they are taken.
env CUPTIMON_SLOT_SIZE=$slot CUDA_INJECTION64_PATH="$SHIM" "$WORKLOAD" \
    --kernels 200000 --rate 10000 --wait-file "$T/go-d" --report "$T/d.json" \
    --stop-file "$T/stop-d" --quiet &
w=$!
wait_for 100 has_session $w || fail "d: the workload did not connect"
touch "$T/go-d"
: >"$T/d-status.json"
while [ "$(wc -l <"$T/d-status.json")" -lt 10 ] && kill -0 $w 2>/dev/null; do
    sleep 0.1
    status_of $w >>"$T/d-status.json"
done
touch "$T/stop-d"
wait $w || fail "d: the workload failed"
ctl status --json >"$T/status.json"
stop_daemon

python3 "$top_srcdir/tests/integration/check-archive.py" "$CTL" "$T/out" "$T/a.json" ||
    fail "a held record was lost or archived twice"
python3 "$top_srcdir/tests/integration/check-archive.py" --drops-ok "$CTL" "$T/out" "$T/b.json" ||
    fail "past the cap, a record that was not dropped was lost or archived twice"

python3 "$top_srcdir/tests/integration/check-archive.py" "$CTL" "$T/out" "$T/c.json" ||
    fail "c: a record launched after the hold, while the daemon was stopped, was lost"

python3 - "$T" "$slot" "$cont_ns" <<'PY' || fail "held buffers were not handled as they must be"
import glob, json, sys
T, slot = sys.argv[1], int(sys.argv[2])
fails = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    ok or fails.append(what)

def meta(name):
    pid = json.load(open(f"{T}/{name}.json"))["pid"]
    for m in glob.glob(f"{T}/out/archive/*-{pid}-*/meta.json"):
        return json.load(open(m))
    sys.exit(f"no meta.json for {name}")

def hold_corr(name):
    return int(open(f"{T}/{name}.log").readline().split()[1])

for name in ("a", "b"):
    rep = json.load(open(f"{T}/{name}.json"))
    during = json.load(open(f"{T}/{name}-during.json"))
    after = json.load(open(f"{T}/{name}-after.json"))
    fl, pool = during.get("in_flight") or {}, during["pool"]
    check(fl.get("name") == "hold()" and fl.get("kind") == "kernel",
          f"{name}: status names the running kernel ({fl.get('what')})")
    check(fl.get("stream") == rep["streams"] + 1 and fl.get("device") == 0,
          f"{name}: on its stream {fl.get('stream')} and device {fl.get('device')}")
    check(fl.get("correlation_id") == hold_corr(name),
          f"{name}: with its correlation id {fl.get('correlation_id')}")
    check(1 <= fl.get("age_s", 0) < 10, f"{name}: in flight for {fl.get('age_s', 0):.2f} s")
    behind = fl.get("bytes_behind", 0)
    check(fl.get("records_behind", 0) > 1000 and behind > 16 * slot,
          f"{name}: {fl.get('records_behind')} records ({behind} bytes) wait behind it")
    # The held buffers are full ones: while the same kernel runs, the
    # periodic flushes (every 0.2 s) close none (each would be one more
    # buffer behind it, nearly empty).
    full = -(-behind // slot)
    check(fl.get("buffers_held", 0) <= full + 2,
          f"{name}: {fl.get('buffers_held')} buffers hold them, {full} would be full ones")
    check(pool["grown_slots"] > 0 and pool["resident_slots"] == 16,
          f"{name}: the pool grew by {pool['grown_slots']} past its 16 resident slots")
    check(pool["flushes_skipped"] >= 3, f"{name}: {pool['flushes_skipped']} flushes skipped")
    check("in_flight" not in after and after["pool"]["grown_slots"] == 0,
          f"{name}: after the hold nothing is in flight and the grown slots are back")
    # The pool's pages as the daemon sees them in the memfd (the job's
    # RssShmem is a per-thread cached count, late by up to 64 pages).
    rd, ra = pool["resident_bytes"], after["pool"]["resident_bytes"]
    check(ra <= 16 * slot and rd >= ra + pool["grown_slots"] * slot // 2,
          f"{name}: the pool's memory went from {rd >> 10} KiB to {ra >> 10} KiB")
    m = meta(name)["final"]
    check(m["pool_grown_peak_slots"] > 0, f"{name}: meta.json has the peak {m['pool_grown_peak_slots']}")
    if name == "a":
        check(rep["dropped"] == 0 and m["dropped_records"] == 0 and m["requests_declined"] == 0,
              f"a: nothing dropped (the double: {rep['dropped']}, meta: {m['dropped_records']})")
        check(pool["max_slots"] == 4096 and pool["cap_reached"] is False,
              f"a: the default cap (4096 slots of {slot}) not reached")
    else:
        check(rep["dropped"] > 0 and m["dropped_records"] == rep["dropped"],
              f"b: CUPTI's drops counted ({m['dropped_records']} of the double's {rep['dropped']})")
        check(m["requests_declined"] > 0, f"b: {m['requests_declined']} requests declined")
        check(pool["max_slots"] == 24 and after["pool"]["cap_reached"] is True and
              after["pool"]["grown_peak_slots"] == 8,
              f"b: the cap of 24 slots (3M) reached: {after['pool']}")
# C: the daemon was stopped across the hold's end, with launches after it.
log = [l.split() for l in open(f"{T}/c.log")]
hold_end = int(log[0][3]) + 3_000_000_000
after = sum(1 for l in log[1:] if hold_end <= int(l[2]) < int(sys.argv[3]))
rep, m = json.load(open(f"{T}/c.json")), meta("c")["final"]
check(after >= 2000, f"c: {after} launches after the hold ended, before the daemon ran again")
check(rep["dropped"] == 0 and m["dropped_records"] == 0 and m["requests_declined"] == 0,
      f"c: nothing dropped (the double: {rep['dropped']}, meta: {m['dropped_records']}, "
      f"declined {m['requests_declined']}), the pool grown by {m['pool_grown_peak_slots']}")
# D: nothing in flight while only short kernels ran.
d = [json.loads(l) for l in open(f"{T}/d-status.json") if l.strip()]
shown = [x["in_flight"]["what"] for x in d if x.get("in_flight")]
check(len(d) >= 5 and not shown,
      f"d: no work shown in flight in {len(d)} samples of a job without long kernels ({shown[:3]})")
sys.exit(1 if fails else 0)
PY

grep -q 'inflight: .*kernel hold() has held this process' "$T/daemon.log" ||
    fail "no inflight_warn_s line in the daemon's log"
[ "$(grep -c 'kernel hold() has held' "$T/daemon.log")" -eq 3 ] ||
    fail "the in-flight warning is not once per held kernel: $(grep -c 'kernel hold() has held' "$T/daemon.log")"
# Only the hold kernels: in C the buffer CUPTI was filling went unflushed
# while the daemon was stopped, its records incomplete (as CUPTI leaves
# them until it closes the buffer), which is not work in flight.
[ "$(grep -c 'has held this process' "$T/daemon.log")" -eq 3 ] ||
    fail "an in-flight warning named work that was not running: $(grep 'has held this process' "$T/daemon.log")"
grep -q 'buffer pool is at its cap (24 slots' "$T/daemon.log" || fail "the cap was not logged"
echo "PASS"
