#!/bin/bash
# Every command tells the truth during a hold (issue 47), against the
# libcupti double, which completes records in launch order: one kernel of
# 12 s on a stream of its own holds every record launched after it, on any
# stream, in buffers CUPTI keeps (docs/gpu-runs/20261204-h200-probe).
# Sampled once that kernel has been in flight for 4 s:
#  A. a plain cuptimonctl flush names the process it could not hand the
#     records over for, the kernel they wait on and what waits behind it,
#     points at --wait-running, does not count that session as flushed and
#     archived, and exits 1 (it said "1 of 1 session(s) flushed and
#     archived", exit 0); --json's "held" says the same; once the hold is
#     over a flush exits 0 again.
#  B. top: the GPU is busy over the last second shown (busy_1s 1, where it
#     read 0 % while no record of the running kernel could come), and at 80
#     columns the held note is whole, on a line of its own, with every line
#     within the 80 columns (it was cut to nothing in the JOB/EXE column).
. "$top_srcdir/tests/integration/lib.sh"

start_daemon --flush-period 0.2

# A first job: its records give the daemon a GPU to show before the hold,
# as a node that ran work has (its 2000 kernels of 1-5 us leave it idle).
workload --kernels 2000 --quiet || fail "the first workload failed"

# in_flight_age: the age of the hold kernel's in-flight view in status, or
# nothing while there is none.  Without python: its start takes seconds on
# a loaded machine, and the hold is sampled while it lasts.
in_flight_age() {
    ctl status --json | tr -d ' \n' | grep -o '"name":"hold()"[^}]*' |
        grep -o '"age_s":[0-9.e+-]*' | head -n 1 | cut -d: -f2
}
held_for() { # SECONDS: the hold kernel has been in flight that long
    local age
    age=$(in_flight_age)
    [ -n "$age" ] && awk -v a="$age" -v m="$1" 'BEGIN { exit !(a >= m) }'
}
hold_over() { [ -z "$(in_flight_age)" ]; }
connected() { ctl status --json | tr -d ' \n' | grep -q "\"pid\":$1,"; }

CUPTIMON_SLOT_SIZE=131072 spawn_workload --hold-us 12000000 --kernels 3000 --rate 3000 \
    --wait-file "$T/go" --report "$T/hold.json" --linger-ms 60000 --quiet
w=$SPAWNED
wait_for 100 connected $w || fail "the workload did not connect"
touch "$T/go"
wait_for 100 held_for 4 || fail "status did not show the hold kernel in flight for 4 s"

rc=0
ctl flush >"$T/flush.txt" 2>&1 || rc=$?
rcj=0
ctl flush --json >"$T/flush.json" 2>&1 || rcj=$?
rcw=0
ctl flush --wait-running --timeout 1 >"$T/flush-wait.txt" 2>&1 || rcw=$?
COLUMNS=80 ctl top --once >"$T/top80.txt" 2>&1 || fail "top --once: $(cat "$T/top80.txt")"
ctl top --once --json >"$T/top.json" || fail "top --once --json failed"
held_for 4 || fail "the hold ended before the commands were done (a machine this slow needs a longer --hold-us)"

cat "$T/flush.txt" "$T/flush-wait.txt" "$T/top80.txt"
python3 - "$T" "$w" "$rc" "$rcj" "$rcw" <<'PY' || fail "a command did not tell the truth during the hold"
import json, re, sys
T, pid, rc, rcj, rcw = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
fails = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    ok or fails.append(what)

text = open(f"{T}/flush.txt").read()
check(rc == 1 and rcj == 1, f"flush exits 1 while records are held (text {rc}, --json {rcj})")
check(text.startswith("flush: 0 of 1 session(s) flushed and archived"),
      "flush does not count the held session as flushed and archived")
line = [l for l in text.splitlines() if l.startswith(f"  pid {pid}, session ")]
check(len(line) == 1 and "waiting" in line[0] and "on kernel hold() (device 0, stream 3," in line[0]
      and re.search(r": [1-9][0-9]* records \(.*\) in [1-9][0-9]* buffers behind it$", line[0]),
      f"flush names the process, the kernel and what waits behind it: {line}")
check("cuptimonctl flush --wait-running" in text, "flush points at --wait-running")
# --wait-running's timeout lists the same, in the same words.
wait = open(f"{T}/flush-wait.txt").read().splitlines()
check(rcw == 1 and wait[1:2] == ["still running work after 1 s (those records reach the archive "
                                 "when the work ends):"]
      and len(wait) > 2 and wait[2].startswith(f"  pid {pid}, session ")
      and wait[2].split(": ", 1)[1] .split(" on ")[1] == line[0].split(": ", 1)[1].split(" on ")[1]
      if line else False, f"flush --wait-running names the same work (exit {rcw}): {wait}")
held = json.load(open(f"{T}/flush.json")).get("held", [])
check(len(held) == 1 and held[0]["pid"] == pid and held[0]["name"] == "hold()"
      and held[0]["records_behind"] > 1000 and held[0]["buffers_held"] >= 1
      and held[0]["age_s"] >= 4, f"flush --json: held {held}")

top = json.load(open(f"{T}/top.json"))
busy = [d["busy_1s"] for d in top["devices"]]
check(busy and max(busy) >= 0.999,
      f"top: the GPU the kernel runs on is busy over the last second shown ({busy})")
lines = open(f"{T}/top80.txt").read().splitlines()
check(all(len(l) <= 80 for l in lines), "top at 80 columns: every line within them "
      f"({max(len(l) for l in lines)} at most)")
note = [l for l in lines if re.match(r"^ +held \S+ by kernel hold\(\), \S+ behind it$", l)]
check(len(note) == 1, f"top at 80 columns: the held note whole on a line of its own ({note})")
sys.exit(1 if fails else 0)
PY

# Once the kernel ended and its records were handed over, a flush hands
# over everything again.
wait_for 300 hold_over || fail "the hold did not end in status"
ctl flush >"$T/flush-after.txt" || fail "flush after the hold: $(cat "$T/flush-after.txt")"
grep -q "^flush: 1 of 1 session(s) flushed and archived" "$T/flush-after.txt" ||
    fail "flush after the hold: $(cat "$T/flush-after.txt")"
! grep -q "not handed over" "$T/flush-after.txt" || fail "flush after the hold: $(cat "$T/flush-after.txt")"
kill -USR1 $w
wait $w || fail "the workload failed"
stop_daemon
echo ok
