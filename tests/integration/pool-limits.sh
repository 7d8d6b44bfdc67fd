#!/bin/bash
# No setting leaves a job untraced, and held is not dropped in a small
# container either (issue 47), against the libcupti double's hold (one
# kernel that runs for 3 s on a stream of its own holds every record
# launched after it, on any stream, in buffers CUPTI keeps):
#  A. a pool over the daemon's max_pool_bytes (CUPTIMON_POOL_MAX=16M against
#     4M) is traced, not refused: the daemon takes 32 of its 128 KiB
#     buffers at once, the shim keeps its pool to that and says so once,
#     the daemon logs it once and status shows the cap as the daemon's;
#     during the hold, at that cap, status says CUPTI is dropping (since
#     when, the requests declined, counted when CUPTI hands the buffers
#     over) while DROPPED is still 0, and afterwards only CUPTI's counted
#     drops are missing from the archive;
#  A2. resident slots alone over max_pool_bytes (CUPTIMON_POOL_SLOTS=40):
#     traced, and status and the log say its pool cannot grow, and why;
#  B. a small memory limit (8 MiB, from files the test controls through
#     CUPTIMON_TEST_CGROUP_ROOT): the pool grows by an eighth of it past its
#     resident slots (before: an eighth of the whole, below the resident
#     2 MiB, so no growth at all);
#  C. CUPTIMON_POOL_MAX=0: the pool cannot grow; status and the log say so
#     and why, and during the hold cap_reached is true and status says it
#     drops (before: cap_reached false, no pool line, nothing in the log);
#  R. a producer refused (a hello without its pool fd) is listed in text
#     status with why.
. "$top_srcdir/tests/integration/lib.sh"

printf '{"max_pool_bytes": "4M", "inflight_warn_s": 60}\n' >"$T/cuptimond.conf"
start_daemon --flush-period 0.2 --config "$T/cuptimond.conf"
slot=131072

status_of() { # PID: that process's connected session in status --json, one line
    ctl status --json | python3 -c '
import json, sys
for s in json.load(sys.stdin)["sessions"]:
    if s["pid"] == int(sys.argv[1]) and s["connected"]:
        print(json.dumps(s))' "$1"
}
has_session() { [ -n "$(status_of "$1")" ]; }

# during NAME PID MODE: samples status until the hold kernel has been in
# flight a second and, for a pool at its cap (MODE cap), CUPTI's requests
# are declined; keeps that sample as NAME-during.json and the text status
# taken right after it as NAME-during.txt.
during() {
    local name=$1 pid=$2 i
    for i in $(seq 1 100); do
        if status_of "$pid" | tee "$T/$name-sample.json" | python3 -c '
import json, sys
s = json.load(sys.stdin)
f, p = s.get("in_flight") or {}, s["pool"]
sys.exit(0 if f.get("age_s", 0) >= 1 and (sys.argv[1] == "grow" or p.get("dropping_since_unix_ns")) else 1)
' "$3" 2>/dev/null; then
            ctl status >"$T/$name-during.txt"
            mv "$T/$name-sample.json" "$T/$name-during.json"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# held NAME MODE [ENV=VALUE...]: a 6-s hold with 30000 kernels launched
# in its first second (some 46 buffers of 128 KiB), sampled while it holds
# (6 s: status may be slow on a loaded machine); the job lingers until
# then, and ends.
held() {
    local name=$1 mode=$2
    shift 2
    env "$@" CUPTIMON_SLOT_SIZE=$slot CUDA_INJECTION64_PATH="$SHIM" "$WORKLOAD" \
        --hold-us 6000000 --kernels 30000 --rate 30000 --wait-file "$T/go-$name" \
        --report "$T/$name.json" --launch-log "$T/$name.log" --linger-ms 60000 --quiet \
        2>"$T/$name.err" &
    local w=$!
    wait_for 100 has_session $w || {
        kill $w
        cat "$T/$name.err"
        fail "$name: the workload was not traced (no session; its stderr above)"
    }
    touch "$T/go-$name"
    during "$name" $w "$mode" || {
        kill $w
        cat "$T/$name-sample.json"
        fail "$name: status never showed the hold (and, at the cap, the drops)"
    }
    kill -USR1 $w
    wait $w || fail "$name: the workload failed"
}

held a cap CUPTIMON_POOL_MAX=16M
# A2: its resident slots alone are over max_pool_bytes.
env CUPTIMON_SLOT_SIZE=$slot CUPTIMON_POOL_SLOTS=40 CUDA_INJECTION64_PATH="$SHIM" "$WORKLOAD" \
    --kernels 5000 --rate 20000 --wait-file "$T/go-a2" --report "$T/a2.json" \
    --linger-ms 30000 --stop-file "$T/stop-a2" --quiet 2>"$T/a2.err" &
w=$!
wait_for 100 has_session $w || { kill $w; fail "a2: a pool of 40 resident slots over max_pool_bytes was not traced"; }
touch "$T/go-a2"
ctl status >"$T/a2-status.txt"
status_of $w >"$T/a2-status.json"
# It stops launching and ends: SIGUSR1 ends its linger (else 30 s more).
touch "$T/stop-a2"
kill -USR1 $w 2>/dev/null || true
wait $w || fail "a2: the workload failed"

mkdir -p "$T/cg/memory"
echo 8388608 >"$T/cg/memory.max"
echo 8388608 >"$T/cg/memory/memory.limit_in_bytes"
held b grow CUPTIMON_TEST_CGROUP_ROOT="$T/cg"
held c cap CUPTIMON_POOL_MAX=0

# R: a hello without its pool fd is refused.
python3 - "$CUPTIMON_SOCKET" <<'PY' || fail "r: could not send the hello"
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
body = json.dumps({"pid": 1, "exe": "/no/fd", "pool": {"slots": 16, "slot_size": 131072}}).encode()
s.sendall(struct.pack("<IHHII", 0x4D545043, 1, 0x0101, len(body), 0) + body)
s.settimeout(10)
s.recv(4096)
PY
ctl status >"$T/r-status.txt"
stop_daemon

python3 "$top_srcdir/tests/integration/check-archive.py" --drops-ok "$CTL" "$T/out" "$T/a.json" ||
    fail "a: a record CUPTI did not drop was lost or archived twice"
python3 "$top_srcdir/tests/integration/check-archive.py" "$CTL" "$T/out" "$T/a2.json" ||
    fail "a2: a record was lost or archived twice"
python3 "$top_srcdir/tests/integration/check-archive.py" --drops-ok "$CTL" "$T/out" "$T/b.json" ||
    fail "b: a record CUPTI did not drop was lost or archived twice"
python3 "$top_srcdir/tests/integration/check-archive.py" --drops-ok "$CTL" "$T/out" "$T/c.json" ||
    fail "c: a record CUPTI did not drop was lost or archived twice"

# O runs on a daemon of its own over the same archive: its buffers are not
# records (checked above without them).
start_daemon --flush-period 0.2 --config "$T/cuptimond.conf"

# O: a producer that does not read the HELLO_ACK's pool_slots (an older
# shim), with a pool of 64 x 128 KiB against max_pool_bytes 4M, announces
# all 64 buffers at once: the daemon holds 32 at a time and reads the rest
# as it gives buffers back, so every one is archived and released, and no
# protocol error is counted.
python3 - "$CUPTIMON_SOCKET" "$T/o-pid" <<'PY' >"$T/o.txt" 2>&1 &
import fcntl, json, os, socket, struct, sys, time
hdr = struct.Struct("<IHHII")
n, size = 64, 131072
fd = os.memfd_create("pool", os.MFD_ALLOW_SEALING)
os.ftruncate(fd, n * size)
for i in range(n):
    os.pwrite(fd, b"\x01" * 4096, i * size)  # its records: never decoded (version 0)
fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
open(sys.argv[2], "w").write(str(os.getpid()))
hello = json.dumps({"pid": os.getpid(), "exe": "/older/shim", "cupti_version": 0,
                    "pool": {"slots": n, "slot_size": size, "resident_slots": 16}}).encode()
msgs = hdr.pack(0x4D545043, 1, 0x0101, len(hello), 0) + hello
for i in range(n):
    body = struct.pack("<IIQQQQQQQ", i, 7, 4096, 1, 0, 0, time.time_ns(), i, 0)
    msgs += hdr.pack(0x4D545043, 1, 0x0201, len(body), 0) + body
socket.send_fds(s, [msgs[:hdr.size + len(hello)]], [fd])
s.sendall(msgs[hdr.size + len(hello):])
s.settimeout(20)
buf, ack, released = b"", None, {}
while len(released) < n:
    c = s.recv(65536)
    if not c:
        sys.exit(f"the daemon closed the connection: {buf[:300]!r}, {len(released)} released")
    buf += c
    while len(buf) >= hdr.size:
        _, _, typ, ln, _ = hdr.unpack(buf[:hdr.size])
        if len(buf) < hdr.size + ln:
            break
        body, buf = buf[hdr.size:hdr.size + ln], buf[hdr.size + ln:]
        if typ == 0x0102:
            ack = json.loads(body)
        elif typ == 0x0202:
            slot, status, _ = struct.unpack("<IIQ", body)
            released[slot] = status
        elif typ == 0x0502:
            sys.exit(f"refused: {body!r}")
print(json.dumps({"ack": ack, "released": released}))
open(sys.argv[2] + ".go", "w").close()
time.sleep(30)  # kept connected for status; killed below
PY
o=$!
wait_for 200 test -e "$T/o-pid.go" || { kill $o; fail "o: the older shim's buffers did not all come back: $(cat "$T/o.txt")"; }
status_of "$(cat "$T/o-pid")" >"$T/o-status.json"
kill $o
stop_daemon

python3 - "$T" "$slot" <<'PY' || fail "the pool's limits were not handled or told as they must be"
import glob, json, re, sys
T, slot = sys.argv[1], int(sys.argv[2])
fails = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    ok or fails.append(what)
def text(name):
    return open(f"{T}/{name}").read()
def meta(name):
    pid = json.load(open(f"{T}/{name}.json"))["pid"]
    for m in glob.glob(f"{T}/out/archive/*-{pid}-*/meta.json"):
        return json.load(open(m))["final"]
    sys.exit(f"no meta.json for {name}")
log = text("daemon.log")

# A: over max_pool_bytes, traced at the daemon's limit.
a = json.load(open(f"{T}/a-during.json"))
p, rep = a["pool"], json.load(open(f"{T}/a.json"))
check(p["max_slots"] == 128 and p["cap_slots"] == 32 and p.get("cap_limited_by") == "max_pool_bytes",
      f"a: the daemon takes 32 of the 128 slots at once ({p['cap_slots']}, {p.get('cap_limited_by')})")
check(p["slots_out"] <= 33, f"a: the shim keeps to it: {p['slots_out']} slots out")
check(p["cap_reached"] is True and p.get("dropping_since_unix_ns", 0) > 0 and a["requests_declined"] > 0,
      f"a: during the hold at the cap, status says it drops (since {p.get('dropping_since_unix_ns')}, "
      f"{a['requests_declined']} requests declined) while DROPPED is {a['dropped_records']}")
t = text("a-during.txt")
check(re.search(r"dropping since \d\d:\d\d:\d\d \(\d+s ago\): no buffer for CUPTI \(\d+ requests declined "
                r"so far\); CUPTI counts the records it drops when it hands over the buffers it holds", t),
      "a: text status says since when it drops and when CUPTI counts it")
check(re.search(r"pool [\d.]+ MiB now \(2\.0 MiB resident \+ \d+ slots grown\), [\d.]+ MiB at its peak; "
                r"cap 4\.0 MiB \(the daemon's max_pool_bytes; the shim's cap: CUPTIMON_POOL_MAX, 16\.0 MiB, "
                r"16\.0 MiB\)", t), "a: the pool line says what it means (whole pool now, peak, cap and whose)")
err = text("a.err")
check(err.count("the daemon takes at most 4.0 MiB") == 1 and "refused" not in err,
      f"a: the shim says once that the daemon takes 4 MiB at once: {err.strip()[:300]}")
check(len(re.findall(r"session \d+ \(pid %d\): its pool may grow to 16\.0 MiB .* more than max_pool_bytes"
                     % rep["pid"], log)) == 1, "a: the daemon logs it once")
m = meta("a")
check(rep["dropped"] > 0 and m["dropped_records"] == rep["dropped"],
      f"a: CUPTI's drops counted once handed over ({m['dropped_records']} of the double's {rep['dropped']})")
check(re.search(r"session \d+ \(pid %d\): its buffer pool is at its cap \(32 slots" % rep["pid"], log),
      "a: the cap logged")

# A2: resident slots over max_pool_bytes.
a2, t = json.load(open(f"{T}/a2-status.json")), text("a2-status.txt")
check(a2["pool"]["can_grow"] is False and "max_pool_bytes" in a2["pool"].get("cannot_grow", ""),
      f"a2: status says it cannot grow and why: {a2['pool'].get('cannot_grow')}")
check("pool 5.0 MiB (40 resident slots), cannot grow: max_pool_bytes (4.0 MiB) leaves it no room past them" in t,
      "a2: text status says so")
check(re.search(r"its buffer pool cannot grow past its 40 resident slots .*max_pool_bytes", log),
      "a2: the daemon's log says so")

# B: a small memory limit still lets the pool grow.
b = json.load(open(f"{T}/b-during.json"))
p = b["pool"]
check(p["max_slots"] == 24 and p["can_grow"] is True and "1/8 of the cgroup's memory limit, 8 MiB" in p["cap_from"],
      f"b: the cap is the resident 16 slots + 1/8 of 8 MiB: {p['max_slots']} slots ({p['cap_from']})")
check(meta("b")["pool_grown_peak_slots"] == 8, f"b: the pool grew by 8 slots: {meta('b')['pool_grown_peak_slots']}")

# C: CUPTIMON_POOL_MAX=0.
c, t = json.load(open(f"{T}/c-during.json")), text("c-during.txt")
p = c["pool"]
check(p["can_grow"] is False and "CUPTIMON_POOL_MAX=0" in p.get("cannot_grow", ""),
      f"c: status says it cannot grow and why: {p.get('cannot_grow')}")
check(p["cap_reached"] is True and p.get("dropping_since_unix_ns", 0) > 0,
      f"c: during the hold cap_reached is true and it drops since {p.get('dropping_since_unix_ns')}")
check("pool 2.0 MiB (16 resident slots), cannot grow: its cap (CUPTIMON_POOL_MAX=0) is not above them" in t
      and "dropping since" in t, "c: text status says it cannot grow, why, and that it drops")
pid = json.load(open(f"{T}/c.json"))["pid"]
check(len(re.findall(r"session \d+ \(pid %d\): its buffer pool cannot grow past its 16 resident slots "
                     r"\(2\.0 MiB\): its cap \(CUPTIMON_POOL_MAX=0\)" % pid, log)) == 1,
      "c: the daemon logs once that it cannot grow, and why")

# R: the refused producer in text status.
t = text("r-status.txt")
check(re.search(r"refused \(their jobs run untraced; 1 since start, the last 1 here\):\n"
                r"  \S+ \S+ pid \d+ uid \d+ /no/fd: the hello carried no pool fd", t),
      "r: text status lists the refused process with why")

# O: an older shim's 64 buffers against 32 at once.
o = json.loads(open(f"{T}/o.txt").read())
st = json.load(open(f"{T}/o-status.json"))
check(o["ack"].get("pool_slots") == 32 and o["ack"].get("max_pool_bytes") == 4 << 20,
      f"o: the HELLO_ACK says the daemon takes 32 slots at once: {o['ack']}")
check(sorted(int(k) for k in o["released"]) == list(range(64)) and not any(o["released"].values()),
      "o: all 64 buffers archived and released")
check(st["buffers_received"] == 64 and st["protocol_errors"] == 0 and st["reads_paused"] >= 1,
      f"o: read 32 at a time ({st['reads_paused']} pauses), no protocol error ({st['protocol_errors']})")
sys.exit(1 if fails else 0)
PY
echo "PASS"
