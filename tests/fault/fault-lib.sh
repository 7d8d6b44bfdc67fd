# Helpers for the fault tests: sourced, never run.  Builds on the
# integration harness (tests/integration/lib.sh: $T, start_daemon,
# stop_daemon, workload, spawn_workload, ctl, fail, wait_for) and adds what
# faults need: every process a test starts is tracked and killed on exit
# (a SIGSTOPped daemon is continued first), mounts are undone, and small
# probes of a process's fds, maps and memory.
. "$top_srcdir/tests/integration/lib.sh"

# Whatever the checkers leave in their temporary directories (check-archive.py
# keeps its decoded trace) goes away with $T.
export TMPDIR=$T
HOSTILE=$top_builddir/tests/fault/hostile-producer
CHECK_ARCHIVE=$top_srcdir/tests/integration/check-archive.py
CHECK_RECORDED=$top_srcdir/tests/fault/check-recorded.py
FAULT_PIDS=
FAULT_MOUNTS=

# track PID...: killed (SIGKILL) when the test exits, however it exits.
track() {
    FAULT_PIDS="$FAULT_PIDS $*"
}

# mounted DIR: unmounted (lazily) when the test exits, before $T is removed.
mounted() {
    FAULT_MOUNTS="$1 $FAULT_MOUNTS"
}

fault_cleanup() {
    local rc=$?
    set +e
    if [ -n "$DPID" ]; then kill -CONT "$DPID" 2>/dev/null; fi
    for p in $FAULT_PIDS; do kill -KILL "$p" 2>/dev/null; done
    for p in $FAULT_PIDS; do wait "$p" 2>/dev/null; done
    # Mounts nest (a bind over a tmpfs): newest first.
    for m in $FAULT_MOUNTS; do umount -l "$m" 2>/dev/null; done
    (exit $rc)
    cleanup
}
trap fault_cleanup EXIT

skip() {
    echo "SKIP: $*"
    exit 77
}

# spawn_tracked ARGS...: spawn_workload, tracked.
spawn_tracked() {
    spawn_workload "$@"
    track "$SPAWNED"
}

# queue_fill_count: how many connections fill the daemon's listen queue and
# then some: its backlog (4096, daemon/main.c) as the kernel caps it
# (net.core.somaxconn), plus 64.  The caller's fd limit is raised to fit.
queue_fill_count() {
    local b
    b=$(cat /proc/sys/net/core/somaxconn 2>/dev/null || echo 4096)
    [ "$b" -gt 4096 ] && b=4096
    ulimit -n $((b + 256)) 2>/dev/null || true
    echo $((b + 64))
}

fd_count() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
# maps_matching PID TEXT: how many of the process's mappings name TEXT.
maps_matching() { grep -c -- "$2" "/proc/$1/maps" 2>/dev/null || true; }
# cpu_ticks PID: user+system clock ticks the process has used.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
log_lines() { wc -l <"$T/daemon.log"; }

# status_py EXPR: evaluates a Python expression over `st` (status --json).
status_py() {
    ctl status --json | python3 -c 'import json, sys
st = json.load(sys.stdin)
print(eval(sys.argv[1]))' "$1"
}

# session_field PID KEY...: the KEYs of the (last) session of PID in one
# status reply, space-separated ("none" for each when it is not listed).
session_field() {
    local pid=$1
    shift
    ctl status --json | python3 -c 'import json, sys
st = json.load(sys.stdin)
pid, keys = int(sys.argv[1]), sys.argv[2:]
s = next((s for s in reversed(st["sessions"]) if s["pid"] == pid), None)
print(" ".join(str(s[k]) if s else "none" for k in keys))' "$pid" "$@"
}

# report_field FILE KEY: a field of a workload report.
report_field() {
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# meta_of PID [DIR]: the meta.json of PID's session in the archive under DIR
# (the daemon's output directory, $T/out unless given).
meta_of() {
    python3 - "${2:-$T/out}" "$1" <<'PY'
import glob, json, sys
for m in sorted(glob.glob(sys.argv[1] + "/archive/*/meta.json")):
    if json.load(open(m))["pid"] == int(sys.argv[2]):
        print(m)
        break
PY
}

# final_field PID KEY: KEY of the "final" counters that meta.json holds once
# PID's session has ended ("none" before that).
final_field() {
    local m
    m=$(meta_of "$1")
    [ -n "$m" ] || { echo none; return; }
    python3 -c 'import json, sys
print(json.load(open(sys.argv[1])).get("final", {}).get(sys.argv[2], "none"))' "$m" "$2"
}
session_ended() { [ "$(final_field "$1" buffers_received)" != none ]; }

# stalled_exit [WORKLOAD ARGS...]: with a running daemon ($DPID), a
# producer with a small pool connects; once its hello is taken it starts
# launching (--wait-file: a loaded machine may take longer to list it than
# the workload takes to run), and 0.3 s later the daemon is stopped
# (SIGSTOP); the producer's pool fills, CUPTI drops,
# and the producer exits while the daemon is still stopped, leaving
# BUFFER_READYs the daemon has not read; then the daemon is continued and
# given time to drain.  The producer's report is $T/stalled.json and its
# pid $STALLED_PID.
stalled_exit() {
    CUPTIMON_POOL_SLOTS=4 CUPTIMON_SLOT_SIZE=64K CUPTIMON_LABEL=stalled \
        spawn_tracked --kernels 40000 --rate 20000 --quiet --report "$T/stalled.json" \
        --wait-file "$T/stalled.go" "$@"
    STALLED_PID=$SPAWNED
    local p=$SPAWNED
    listed() { [ "$(session_field "$p" pid)" = "$p" ]; }
    wait_for 50 listed || fail "the producer's session did not start"
    touch "$T/stalled.go"
    sleep 0.3
    kill -STOP "$DPID"
    local gone=no
    for _ in $(seq 1 100); do
        if ! kill -0 "$p" 2>/dev/null; then gone=yes; break; fi
        sleep 0.1
    done
    kill -CONT "$DPID"
    [ "$gone" = yes ] || fail "the producer did not exit while the daemon was stopped: it waits for the daemon"
    wait "$p" || fail "the producer failed"
    [ "$(report_field "$T/stalled.json" dropped)" -gt 0 ] || fail "the producer's pool never filled"
    no_sessions() { [ "$(status_py "len(st['sessions'])")" = 0 ]; }
    wait_for 100 no_sessions || fail "the stalled producer's session did not end"
}

# close_inherited: closes every descriptor above 2 of the (sub)shell, so
# that a daemon started from it has a table that does not depend on what
# the test inherited (for limits set with ulimit -n).
close_inherited() {
    local f n
    for f in /proc/$BASHPID/fd/*; do
        n=${f##*/}
        [ "$n" -gt 2 ] && eval "exec $n>&-" 2>/dev/null
    done
    return 0
}

# The replay producer (bench/replay-producer: a real H200 buffer over the
# shim's protocol, cheap enough to load the daemon) and the buffer it
# replays, for sparse_producers and honest_producer.
RP=$top_builddir/bench/replay-producer
BUF=$top_srcdir/tests/data/cupti-13.0-h200/phase0-buf0.bin.zst
need_replay_producer() {
    [ -x "$RP" ] || fail "$RP is not built"
}

# sparse_producers N [AS...]: N bench/replay-producers (as the user AS...
# runs them: as_nobody, or nothing for the caller) whose pools are sparse
# 16 x 64 MiB, every byte announced again and again: a hostile load on the
# daemon's workers.  Tracked.
sparse_producers() {
    local n=$1 i
    shift
    for i in $(seq 1 "$n"); do
        "$@" "$RP" --socket "$CUPTIMON_SOCKET" --buffer "$BUF" --sparse --slot-size $((64 << 20)) \
            --slots 16 --records 1000000000 >/dev/null 2>&1 &
        track $!
    done
}

# honest_producer SLOTS RATE RECORDS MAX_DROPPED WHAT: an honest replay
# producer of SLOTS slots at RATE records/s; fails when it drops more than
# the fraction MAX_DROPPED of its records.  Prints WHAT with the figures.
honest_producer() {
    "$RP" --socket "$CUPTIMON_SOCKET" --buffer "$BUF" --slots "$1" --rate "$2" --records "$3" \
        --report "$T/honest.json" || fail "the honest producer failed"
    python3 - "$T/honest.json" "$4" "$5" <<'PY' || fail "$5: the honest producer dropped records"
import json, sys
r = json.load(open(sys.argv[1]))
total = r["records_sent"] + r["records_dropped"]
print("%s: %d of %d records handed over, %d dropped"
      % (sys.argv[3], r["records_sent"], total, r["records_dropped"]))
assert r["records_dropped"] <= total * float(sys.argv[2]), r
PY
}
