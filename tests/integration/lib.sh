# Shared helpers for the integration tests: sourced, never run.  Each test
# gets a private directory with its own daemon sockets and output, and
# drives the real cuptimond, cuptimonctl and shim.
set -eu
: "${top_builddir:?run through make check}" "${top_srcdir:?run through make check}"

# Configured without CUPTI headers (--without-cuda), the libcupti test
# double is not built: a test that runs workloads through it is skipped.  A
# test that needs none sets CUPTIMON_TEST_NO_DOUBLE=1 before sourcing this.
if [ ! -e "$top_builddir/tests/fakecupti/cuptimon-workload" ] && [ "${CUPTIMON_TEST_NO_DOUBLE:-0}" != 1 ]; then
    echo "SKIP: the libcupti test double is not built (configured without CUPTI headers: --with-cuda=DIR)"
    exit 77
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/cuptimon-test.XXXXXX")
CUPTIMOND=$top_builddir/daemon/cuptimond
CTL=$top_builddir/cli/cuptimonctl
SHIM=$top_builddir/client-lib/.libs/libcuptimon.so
FAKECUPTI=$top_builddir/tests/fakecupti/.libs/libcupti-fake.so
WORKLOAD=$top_builddir/tests/fakecupti/cuptimon-workload
export CUPTIMON_SOCKET=$T/producer.sock
export CUPTIMON_CONTROL_SOCKET=$T/control.sock
DPID=
# A sanitizer build's shim needs the sanitizer runtime first in line when
# preloaded into a program that was not built with it.
ASAN_RT=$(ldd "$SHIM" 2>/dev/null | awk '/libasan/ {print $3}')

# Tests whose verdict depends on the CPU they get (drops at a rate, time
# to be served) set CUPTIMON_TEST_ALONE=1 before sourcing this: they hold
# the build tree's test lock exclusively, every other integration test holds
# it shared, so under make check -jN they never share the machine with
# another integration test.  The lock is held by a flock(1) process of the
# test's own (not by an fd that the daemons and workloads it starts would
# inherit and keep after the test).
TEST_LOCK_PID=
take_test_lock() {
    local mode=-s
    [ "${CUPTIMON_TEST_ALONE:-0}" = 1 ] && mode=-x
    command -v flock >/dev/null || return 0
    flock "$mode" -o "$top_builddir/.test-alone.lock" \
        sh -c 'echo $$ >"$1"; exec sleep 86400' sh "$T/.lock-held" &
    TEST_LOCK_PID=$!
    while [ ! -s "$T/.lock-held" ]; do
        kill -0 "$TEST_LOCK_PID" 2>/dev/null || { TEST_LOCK_PID=; return 0; }
        sleep 0.05
    done
}
drop_test_lock() {
    [ -n "$TEST_LOCK_PID" ] || return 0
    if [ -s "$T/.lock-held" ]; then kill "$(cat "$T/.lock-held")" 2>/dev/null || true; fi
    kill "$TEST_LOCK_PID" 2>/dev/null || true
    wait "$TEST_LOCK_PID" 2>/dev/null || true
    TEST_LOCK_PID=
}

cleanup() {
    local rc=$?
    drop_test_lock
    if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
        kill -KILL "$DPID" 2>/dev/null || true
    fi
    if [ $rc -ne 0 ]; then
        echo "--- daemon log ($T/daemon.log):"
        tail -n 40 "$T/daemon.log" 2>/dev/null || true
    fi
    # A failed test keeps its files (traces, launch logs, the daemon's log
    # and archive): a failure that happened once is explained from them.
    if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
        echo "--- the test's files are kept in $T"
    elif [ -z "${KEEP:-}" ]; then
        rm -rf "$T"
    fi
    exit $rc
}
trap cleanup EXIT
take_test_lock

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

ctl() {
    "$CTL" --control-socket "$CUPTIMON_CONTROL_SOCKET" "$@"
}

# as_nobody CMD...: runs CMD as the tests' second user, 'nobody'.
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

# need_nobody: skips the test (exit 77, saying why) unless it can act as
# 'nobody' (root, setpriv) and nobody can run the build tree's shim,
# workload and cuptimonctl; makes $T reachable for nobody.
need_nobody() {
    [ "$(id -u)" = 0 ] || { echo "SKIP: needs root to act as a second user"; exit 77; }
    command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
    chmod 755 "$T"
    as_nobody test -r "$SHIM" -a -x "$WORKLOAD" -a -x "$CTL" ||
        { echo "SKIP: the build tree is not readable by nobody"; exit 77; }
}

# start_daemon [ARGS...]: starts cuptimond in the background and waits
# until its control socket answers.
start_daemon() {
    "$CUPTIMOND" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
        --output-dir "$T/out" "$@" 2>>"$T/daemon.log" &
    DPID=$!
    for _ in $(seq 1 100); do
        if ctl status >/dev/null 2>&1; then return 0; fi
        kill -0 "$DPID" 2>/dev/null || fail "cuptimond exited at startup"
        sleep 0.05
    done
    fail "cuptimond did not answer on $CUPTIMON_CONTROL_SOCKET within 5 s"
}

# stop_daemon: SIGTERM, then the daemon must exit 0 within 10 s.
stop_daemon() {
    kill -TERM "$DPID"
    for _ in $(seq 1 200); do
        if ! kill -0 "$DPID" 2>/dev/null; then
            wait "$DPID" || fail "cuptimond exited with status $?"
            DPID=
            return 0
        fi
        sleep 0.05
    done
    fail "cuptimond did not stop within 10 s of SIGTERM"
}

# ctl_request JSON: sends JSON as one control request, framed as
# cuptimonctl frames it, for requests cuptimonctl never sends; prints the
# reply as "ok BODY" or "error BODY".  $AS, when set, is a command to run
# it under (another user), and $AS_PYTHON the python3 that user can run.
ctl_request() {
    ${AS:-} "${AS_PYTHON:-python3}" - "$CUPTIMON_CONTROL_SOCKET" "$1" <<'PY'
import socket, struct, sys
hdr = struct.Struct("<IHHII")  # magic, version, type, length, flags
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(sys.argv[1])
body = sys.argv[2].encode()
s.sendall(hdr.pack(0x4D545043, 1, 0x0401, len(body), 0) + body)
def recv(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            sys.exit("the daemon closed the connection without a reply")
        b += c
    return b
_, _, typ, n, _ = hdr.unpack(recv(hdr.size))
print({0x0501: "ok", 0x0502: "error"}.get(typ, hex(typ)), recv(n).decode())
PY
}

# known_ops: the ops that the daemon's "unknown op" reply lists to this
# caller (as $AS, see ctl_request), separated by spaces.
known_ops() {
    ctl_request '{"op":"no-such-op"}' | python3 -c '
import json, re, sys
kind, _, body = sys.stdin.read().partition(" ")
r = json.loads(body)
assert kind == "error" and r["error"] == "EOPNOTSUPP", (kind, r)
m = re.search(r"\(known: (.*)\)$", r["message"])
assert m, r["message"]
print(m.group(1).replace(",", ""))'
}

# workload ARGS...: the test workload under the shim, injected the way the
# CUDA driver does it (CUDA_INJECTION64_PATH).
workload() {
    CUDA_INJECTION64_PATH=$SHIM "$WORKLOAD" "$@"
}

# spawn_workload ARGS...: workload in the background; $SPAWNED is its pid
# (the program's own, not a subshell's, so that signals reach it).
spawn_workload() {
    CUDA_INJECTION64_PATH=$SHIM "$WORKLOAD" "$@" &
    SPAWNED=$!
}

# workload_preload ARGS...: the same through LD_PRELOAD.
workload_preload() {
    LD_PRELOAD="${ASAN_RT:+$ASAN_RT }$SHIM" "$WORKLOAD" "$@"
}

# on_tty CMD...: runs CMD with its standard error on a pseudo-terminal (as
# a person at a terminal sees it) and prints what it wrote there; returns
# CMD's status.
on_tty() {
    python3 - "$@" <<'PY'
import os, pty, subprocess, sys
m, s = pty.openpty()
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=s)
os.close(s)
buf = b""
while True:
    try:
        c = os.read(m, 4096)
    except OSError:
        break
    if not c:
        break
    buf += c
sys.stdout.write(buf.decode(errors="replace"))
sys.exit(p.wait())
PY
}

# wait_for COUNT CMD...: retries CMD every 0.1 s up to COUNT times.
wait_for() {
    local n=$1; shift
    for _ in $(seq 1 "$n"); do
        if "$@"; then return 0; fi
        sleep 0.1
    done
    return 1
}
