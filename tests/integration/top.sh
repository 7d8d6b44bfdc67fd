#!/bin/bash
# cuptimonctl top and metrics against the real daemon (issue 12): two
# workloads under the shim; top --once --by kernel must list the three
# kernel names demangled, with the counts the workloads report; --json must
# parse; metrics must pass promtool (when installed); and the full-screen
# view, driven in tmux (when installed), must show its header, regroup on
# k, quit on q and leave the terminal as it found it.
. "$top_srcdir/tests/integration/lib.sh"

start_daemon --flush-period 0.2

# Until the daemon and cuptimonctl are wired to the aggregates, skip.
if ! ctl top --once >"$T/probe.txt" 2>&1; then
    if grep -qE "unknown op|unknown command" "$T/probe.txt"; then
        echo "SKIP: $(head -n 1 "$T/probe.txt")"
        exit 77
    fi
    cat "$T/probe.txt"
    fail "top --once failed"
fi

# Two processes; they linger after their work so that they are still
# sessions when top looks, until the test ends them (SIGUSR1: a normal
# exit; spawn_workload, so that the signal reaches the program).
CUPTIMON_LABEL=alpha RANK=0 spawn_workload --kernels 30000 --rate 100000 --streams 2 \
    --report "$T/report-0.json" --linger-ms 600000 -q
W0=$SPAWNED
CUPTIMON_LABEL=beta RANK=1 spawn_workload --kernels 21000 --rate 100000 --streams 1 \
    --report "$T/report-1.json" --linger-ms 600000 -q
W1=$SPAWNED
reported() { [ -s "$T/report-0.json" ] && [ -s "$T/report-1.json" ]; }
wait_for 300 reported || fail "the workloads did not report within 30 s"
# Everything they recorded, handed over and aggregated.
ctl flush --forced >"$T/flush.txt" || { cat "$T/flush.txt"; fail "forced flush reported late sessions"; }

python3 - "$T/report-0.json" "$T/report-1.json" >"$T/expected.txt" <<'EOF'
import json, sys
names = {"_Z5scaleILi2EEvPfi": "void scale<2>(float*, int)",
         "_Z5scaleILi3EEvPfi": "void scale<3>(float*, int)",
         "_ZN2ns7add_oneEPfi": "ns::add_one(float*, int)"}
tot = {}
for path in sys.argv[1:]:
    for k, v in json.load(open(path))["by_name"].items():
        tot[names[k]] = tot.get(names[k], 0) + v
for k, v in sorted(tot.items()):
    print("%s\t%d" % (k, v))
EOF

ctl top --once --by kernel >"$T/top.txt" || { cat "$T/top.txt"; fail "top --once --by kernel failed"; }
cat "$T/top.txt"
grep -q "^cuptimon top - " "$T/top.txt" || fail "top --once has no header"
grep -q "^GPU 0 " "$T/top.txt" || fail "top --once has no busy line for GPU 0"
grep -q "KERNEL" "$T/top.txt" || fail "top --once --by kernel has no KERNEL column"
while IFS=$'\t' read -r name want; do
    line=$(grep -F -- "$name" "$T/top.txt") || fail "top --once --by kernel does not list '$name'"
    got=$(echo "$line" | awk '{print $1}')
    # Counts below 100000 are printed in full.
    [ "$got" = "$want" ] || fail "top shows $got launches of '$name'; the workloads report $want"
done <"$T/expected.txt"

# --json: parses, full names, both processes, the same counts.
ctl top --once --json --by kernel >"$T/top.json" || fail "top --json failed"
python3 - "$T/top.json" "$T/expected.txt" <<'EOF' || fail "top --json is not what was expected"
import json, sys
t = json.load(open(sys.argv[1]))
want = dict(l.rstrip("\n").split("\t") for l in open(sys.argv[2]))
rows = {r["name"]: r for r in t["rows"]}
for name, n in want.items():
    r = rows[name]
    assert r["count"] == int(n), (name, r["count"], n)
    assert r["processes"] == 2, r
    assert r["mangled"].startswith("_Z"), r
    assert 0 < r["p50_ns"] <= r["p90_ns"] <= r["p99_ns"] <= r["max_ns"], r
assert t["node"]["sessions"] >= 2, t["node"]
assert t["devices"] and 0 <= t["devices"][0]["busy_60s"] <= 1, t["devices"]
EOF
ctl top --once --json --by process --label beta >"$T/proc.json" || fail "top --json --label failed"
python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))
assert len(t["rows"]) == 1 and t["rows"][0]["label"] == "beta" and t["rows"][0]["rank"] == "1", t["rows"]
assert t["rows"][0]["kernels"] == json.load(open(sys.argv[2]))["kernels_recorded"], t["rows"]
' "$T/proc.json" "$T/report-1.json" || fail "top --label beta does not show exactly the beta process"
ctl top --once --by device >"$T/dev.txt" || fail "top --by device failed"
grep -q "BUSY1S" "$T/dev.txt" || { cat "$T/dev.txt"; fail "top --by device has no table"; }

# Metrics: the exposition format.
ctl metrics >"$T/metrics.txt" || fail "metrics failed"
grep -q '^cuptimon_kernel_launches_total{.*label="alpha".*kernel="ns::add_one(float\*, int)"} ' \
    "$T/metrics.txt" || { cat "$T/metrics.txt"; fail "metrics lack alpha's add_one launches"; }
grep -q '^cuptimon_sessions ' "$T/metrics.txt" || fail "metrics lack cuptimon_sessions"
if command -v promtool >/dev/null 2>&1; then
    promtool check metrics <"$T/metrics.txt" || fail "promtool check metrics failed"
else
    echo "promtool not installed: skipping promtool check metrics"
fi

# The full-screen view: in a private tmux server when tmux works here, else
# through a pty from python (tmux's server needs /dev/null to be the
# character device, which some sandboxes lack).
TM="tmux -S $T/tmux.sock"
cat >"$T/run-top.sh" <<EOF
#!/bin/sh
export CUPTIMON_CONTROL_SOCKET='$CUPTIMON_CONTROL_SOCKET'
stty -a | tr ' ;' '\n\n' | grep -E '^-?(icanon|echo)\$' | tr '\n' ' ' >'$T/stty-before'
'$CTL' top --interval 0.5
echo "TOP-EXIT=\$?"
stty -a | tr ' ;' '\n\n' | grep -E '^-?(icanon|echo)\$' | tr '\n' ' ' >'$T/stty-after'
echo AFTER-TOP
sleep 60
EOF
chmod +x "$T/run-top.sh"
if command -v tmux >/dev/null 2>&1 &&
    $TM new-session -d -s top -x 160 -y 40 "$T/run-top.sh" 2>"$T/tmux.err"; then
    trap 'rc=$?; $TM kill-server 2>/dev/null; (exit $rc); cleanup' EXIT
    on_screen() { $TM capture-pane -p -t top >"$T/screen.txt" 2>/dev/null && grep -qE "$1" "$T/screen.txt"; }
    wait_for 100 on_screen "^cuptimon top - " || { cat "$T/screen.txt"; fail "tmux: top showed no header"; }
    wait_for 50 on_screen "^GPU 0 +\[" || { cat "$T/screen.txt"; fail "tmux: top showed no busy bar"; }
    wait_for 50 on_screen "LABEL" || { cat "$T/screen.txt"; fail "tmux: top did not start by process"; }
    wait_for 50 on_screen "alpha" || { cat "$T/screen.txt"; fail "tmux: the process table lacks alpha"; }
    $TM send-keys -t top k
    wait_for 50 on_screen "KERNEL" || { cat "$T/screen.txt"; fail "tmux: k did not group by kernel"; }
    wait_for 50 on_screen "ns::add_one\(float\*, int\)" || { cat "$T/screen.txt"; fail "tmux: no demangled kernel"; }
    wait_for 50 on_screen "by kernel, sorted by time" || { cat "$T/screen.txt"; fail "tmux: header does not say by kernel"; }
    $TM send-keys -t top q
    wait_for 50 on_screen "AFTER-TOP" || { cat "$T/screen.txt"; fail "tmux: top did not quit on q"; }
    grep -q "TOP-EXIT=0" "$T/screen.txt" || { cat "$T/screen.txt"; fail "tmux: top did not exit 0"; }
    # The alternate screen was left: the view is gone from the pane.
    ! grep -q "^cuptimon top - " "$T/screen.txt" || { cat "$T/screen.txt"; fail "tmux: top left its screen behind"; }
    [ "$(cat "$T/stty-before")" = "$(cat "$T/stty-after")" ] ||
        fail "tmux: terminal modes not restored: before '$(cat "$T/stty-before")', after '$(cat "$T/stty-after")'"
    # The cursor is visible again (tmux reports the pane's cursor flag).
    [ "$($TM display-message -p -t top '#{cursor_flag}')" = 1 ] || fail "tmux: the cursor is still hidden"
    $TM kill-server 2>/dev/null || true
    trap cleanup EXIT
    echo "full screen: driven in tmux"
else
    if command -v tmux >/dev/null 2>&1; then
        echo "tmux cannot start a server here ($(head -n 1 "$T/tmux.err")): driving top through a pty"
    else
        echo "tmux not installed: driving top through a pty"
    fi
    python3 - "$T" "$CTL" "$CUPTIMON_CONTROL_SOCKET" <<'PY' || fail "full screen (pty): see above"
import fcntl, os, pty, select, signal, struct, sys, termios, time
T, ctl, sock = sys.argv[1:]

def spawn(args):
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["CUPTIMON_CONTROL_SOCKET"] = sock
        os.environ["TERM"] = "xterm"
        os.execv(args[0], args)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    return pid, fd

def pump(fd, out, timeout):
    r, _, _ = select.select([fd], [], [], timeout)
    if r:
        try:
            out[0] += os.read(fd, 65536)
        except OSError:
            return False
    return True

def read_until(fd, out, pat, since=0, timeout=10):
    end = time.time() + timeout
    while pat not in out[0][since:]:
        if time.time() > end or not pump(fd, out, 0.1):
            sys.exit("pty: %r not seen; the screen so far:\n%s"
                     % (pat, out[0][-3000:].decode(errors="replace")))

def finish(pid, fd, out):
    end = time.time() + 10
    while time.time() < end:
        p, st = os.waitpid(pid, os.WNOHANG)
        if p:
            while pump(fd, out, 0.05) and select.select([fd], [], [], 0)[0]:
                pass
            return os.waitstatus_to_exitcode(st)
        pump(fd, out, 0.1)
    sys.exit("pty: top did not exit")

# The header, k regroups, a resize redraws, q quits 0, and the terminal is
# put back: the alternate screen left, the cursor shown, the modes as they
# were (the script prints stty before and after).
pid, fd = spawn(["/bin/sh", T + "/run-top.sh"])
out = [b""]
read_until(fd, out, b"cuptimon top - ")
read_until(fd, out, b"LABEL")
read_until(fd, out, b"alpha")
assert b"\x1b[?1049h" in out[0] and b"\x1b[?25l" in out[0], "no alternate screen"
os.write(fd, b"k")
read_until(fd, out, b"by kernel, sorted by time")
read_until(fd, out, b"ns::add_one(float*, int)")
mark = len(out[0])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 70, 0, 0))
read_until(fd, out, b"cuptimon top - ", since=mark)
os.write(fd, b"q")
read_until(fd, out, b"AFTER-TOP")
tail = out[0][out[0].rfind(b"cuptimon top - "):]
assert b"\x1b[?25h" in tail and b"\x1b[?1049l" in tail, "terminal not put back: %r" % tail[-300:]
assert b"TOP-EXIT=0" in out[0], "top did not exit 0"
before, after = open(T + "/stty-before").read(), open(T + "/stty-after").read()
assert before == after, "modes not restored: %r -> %r" % (before, after)
os.kill(pid, signal.SIGKILL)
os.waitpid(pid, 0)

# SIGTERM and SIGINT put the terminal back too.
for sig, want in ((signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, 0)):
    pid, fd = spawn([ctl, "top", "--interval", "0.5"])
    out = [b""]
    read_until(fd, out, b"cuptimon top - ")
    os.kill(pid, sig)
    code = finish(pid, fd, out)
    tail = out[0][out[0].rfind(b"cuptimon top - "):]
    assert b"\x1b[?1049l" in tail and b"\x1b[?25h" in tail, "%s: terminal not put back" % sig
    assert code == want, "%s: exit %d, want %d" % (sig, code, want)
print("full screen: driven through a pty")
PY
fi

kill -USR1 "$W0" "$W1" 2>/dev/null || true
wait "$W0" "$W1" || fail "a workload failed"
stop_daemon
echo "ok"
