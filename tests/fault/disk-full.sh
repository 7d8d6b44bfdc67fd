#!/bin/bash
# Disk full: the archive lives on a small tmpfs (as root, where mount
# works); a producer streams, the disk is filled under it, a second producer
# starts on the full disk, then space is freed.  The daemon keeps serving
# throughout: every slot comes back (the producers never stall: their run
# time stays that of the no-fault run), the chunks it could not write are
# counted (status and meta.json: write_errors, lost_buffers) and logged, the
# segments stay readable (a failed chunk is cut off, never left torn), and
# once space returns new chunks are archived again in the same session.
# Everything written before and after is complete.
#
# Without root (or mount), a file-size limit stands in for the full disk
# (ulimit -f, SIGXFSZ ignored so that writes fail with EFBIG; xfsz.sh checks
# the default disposition): a session's writes fail once its segment reaches
# the limit, and space "returns" with a second daemon run without the limit.
# FAULT_DISK_MODE=tmpfs|fsize picks one.
# Its verdict depends on the CPU it gets: it runs with no other
# integration test beside it (tests/integration/lib.sh).
CUPTIMON_TEST_ALONE=1
. "$top_srcdir/tests/fault/fault-lib.sh"

mode=${FAULT_DISK_MODE:-}
mkdir -p "$T/out"
if [ -z "$mode" ] || [ "$mode" = tmpfs ]; then
    if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=16m,mode=0755 cuptimon-full "$T/out" 2>/dev/null; then
        mounted "$T/out"
        mode=tmpfs
    elif [ "$mode" = tmpfs ]; then
        skip "cannot mount a tmpfs (needs root)"
    else
        mode=fsize
    fi
fi
echo "disk-full: mode $mode"

# check_session_archive PID: the session's archive reads back with no
# corruption and no torn tail, and holds exactly the chunks that were not
# counted as write errors (some were, and some were written).
check_session_archive() {
    local dir
    dir=$(dirname "$(meta_of "$1")")
    "$CTL" decode "$dir" --summary-out "$T/sum-$1.json" -o /dev/null 2>"$T/decode-$1.err" ||
        fail "pid $1's archive does not decode: $(cat "$T/decode-$1.err")"
    python3 - "$T/sum-$1.json" "$dir/meta.json" "$2" <<'PY' || fail "pid $1's archive does not add up"
import json, sys
summary = json.load(open(sys.argv[1]))
s = summary["sessions"][0]
final = json.load(open(sys.argv[2]))["final"]
rep = json.load(open(sys.argv[3]))
assert s["corrupt_chunks"] == 0 and s["corrupt_strings"] == 0 and s["torn_tails"] == 0, s
assert s["chunks"] == final["chunks_written"], (s["chunks"], final)
assert final["chunks_written"] + final["write_errors"] == final["buffers_received"], final
assert final["write_errors"] > 0 and final["chunks_written"] > 0, final
kept = summary["records"]["kernel"]
print(f"disk-full: pid {rep['pid']} archived {s['chunks']} of {final['buffers_received']} buffers "
      f"({final['write_errors']} not written, counted); {kept} of {rep['kernels_recorded']} kernels")
assert 0 < kept < rep["kernels_recorded"], kept
PY
}

# check_complete REPORT...: those producers' sessions, copied out of the
# archive root (which also holds the damaged ones), are complete.
check_complete() {
    rm -rf "$T/complete"
    mkdir -p "$T/complete/archive"
    for r in "$@"; do
        cp -r "$(dirname "$(meta_of "$(report_field "$r" pid)")")" "$T/complete/archive/"
    done
    python3 "$CHECK_ARCHIVE" "$CTL" "$T/complete" "$@"
}

if [ "$mode" = fsize ]; then
    # Segments rotate at 1 MiB, the limit is 512 KiB: once a segment reaches
    # it, every later chunk of that session fails with EFBIG.  Space
    # "returns" with a second daemon run without the limit.
    export CUPTIMON_SLOT_SIZE=256K
    (ulimit -f 512 && exec env --ignore-signal=XFSZ "$CUPTIMOND" --socket "$CUPTIMON_SOCKET" \
        --control-socket "$CUPTIMON_CONTROL_SOCKET" --output-dir "$T/out" --flush-period 0.2 \
        --segment-size 1M --compress-level 0) 2>>"$T/daemon.log" &
    DPID=$!
    wait_for 100 ctl status >/dev/null 2>&1 || fail "cuptimond did not start"
    CUPTIMON_LABEL=under workload --kernels 1000 --quiet --report "$T/a.json" || fail "producer A failed"
    t0=$(now_ms)
    CUPTIMON_LABEL=past spawn_tracked --kernels 40000 --rate 20000 --quiet --linger-ms 1000 \
        --report "$T/c.json"
    c=$SPAWNED
    sleep 2.7
    read -r errs lost chunks <<<"$(session_field "$c" write_errors lost_buffers chunks_written)"
    wait "$c" || fail "producer C failed"
    c_ms=$(($(now_ms) - t0 - 1000))
    kill -0 "$DPID" 2>/dev/null || fail "the daemon died at the file-size limit"
    echo "disk-full: C write_errors $errs lost_buffers $lost chunks_written $chunks; ${c_ms} ms for 2 s of launches"
    [ "$errs" != none ] && [ "$errs" -gt 0 ] || fail "C's failed writes were not counted ($errs)"
    [ "$lost" = "$errs" ] || fail "C's lost_buffers ($lost) is not its $errs write errors"
    [ "$c_ms" -lt 12000 ] || fail "C took $c_ms ms for 2 s of launches: it was held up"
    grep -q "cannot write chunk .*File too large.*still serving" "$T/daemon.log" ||
        fail "no 'cannot write chunk ... File too large ... still serving' line in the log"
    stop_daemon
    start_daemon --flush-period 0.2
    CUPTIMON_LABEL=after workload --kernels 20000 --quiet --report "$T/d.json" || fail "producer D failed"
    stop_daemon
    check_session_archive "$(report_field "$T/c.json" pid)" "$T/c.json"
    check_complete "$T/a.json" "$T/d.json"
    echo "ok"
    exit 0
fi

start_daemon --flush-period 0.2
fill() { dd if=/dev/zero of="$T/out/filler" bs=64k 2>/dev/null || true; }
unfill() { rm -f "$T/out/filler"; }

# A: no fault, the reference run time.
t0=$(now_ms)
CUPTIMON_LABEL=before workload --kernels 20000 --rate 20000 --quiet --report "$T/a.json" ||
    fail "producer A failed"
a_ms=$(($(now_ms) - t0))

# C streams for 12 s; the disk fills at 1 s and gets space back a few
# seconds later (as soon as B has run on the full disk), with C still
# streaming however slowly the machine runs the steps in between.
t0=$(now_ms)
# Pools of 8 x 256 KiB hold under half a second of records: were slots not
# given back when their write failed, B and C would drop.
export CUPTIMON_POOL_SLOTS=8 CUPTIMON_SLOT_SIZE=256K
CUPTIMON_LABEL=through spawn_tracked --kernels 240000 --rate 20000 --quiet --report "$T/c.json"
c=$SPAWNED
sleep 1
fill
[ "$(df --output=avail "$T/out" | tail -1)" -lt 64 ] ||
    fail "the tmpfs is not full: $(df -h "$T/out")"
e1=$(session_field "$c" write_errors)

# B starts on the full disk: it runs as fast as A did, its buffers are
# counted as not written, and it is told so in the log.
t1=$(now_ms)
CUPTIMON_LABEL=on-full spawn_tracked --kernels 20000 --rate 20000 --quiet --report "$T/b.json"
b=$SPAWNED
sleep 0.7
read -r b_errs b_lost <<<"$(session_field "$b" write_errors lost_buffers)"
wait "$b" || fail "producer B failed on the full disk"
b_ms=$(($(now_ms) - t1))
sleep 0.4
read -r e2 c2 c_lost <<<"$(session_field "$c" write_errors chunks_written lost_buffers)"
kill -0 "$DPID" 2>/dev/null || fail "the daemon died on the full disk"
echo "disk-full: C write_errors $e1 -> $e2 while full (lost_buffers $c_lost); B write_errors $b_errs lost $b_lost"
[ "$e2" != none ] && [ "$e2" -gt "$e1" ] || fail "C's write errors did not grow on the full disk ($e1 -> $e2)"
[ "$c_lost" = "$e2" ] || fail "C's lost_buffers ($c_lost) is not its $e2 write errors"
[ "$b_errs" != none ] && [ "$b_errs" -gt 0 ] || fail "B's buffers on the full disk were not counted as write errors ($b_errs)"
[ "$b_lost" = "$b_errs" ] || fail "B's lost_buffers ($b_lost) is not its $b_errs write errors"

# Space returns: C's next chunks are archived again.
unfill
more() { [ "$(session_field "$c" chunks_written)" -gt "$c2" ]; }
[ "$(session_field "$c" connected)" = True ] ||
    fail "C was no longer streaming when space returned: the test ran too slowly to tell"
wait_for 100 more || fail "no new chunk of C was archived after space returned"
wait "$c" || fail "producer C failed"
c_ms=$(($(now_ms) - t0))

# D starts after the recovery.
CUPTIMON_LABEL=after workload --kernels 20000 --rate 20000 --quiet --report "$T/d.json" ||
    fail "producer D failed"
stop_daemon
echo "disk-full: run times A ${a_ms} ms, B ${b_ms} ms (on the full disk), C ${c_ms} ms (12 s of launches)"
[ "$b_ms" -lt $((a_ms * 2 + 1000)) ] || fail "B took $b_ms ms on the full disk, A $a_ms ms without a fault: it was held up"
[ "$c_ms" -lt 30000 ] || fail "C took $c_ms ms for 12 s of launches: it was held up by the full disk"
for r in b c; do
    [ "$(report_field "$T/$r.json" dropped)" = 0 ] ||
        fail "$r dropped $(report_field "$T/$r.json" dropped) records: its slots did not come back"
done

grep -q "cannot write chunk .*No space left on device.*still serving" "$T/daemon.log" ||
    fail "no 'cannot write chunk ... No space left on device ... still serving' line in the log"
grep -q "archive: .*No space left on device; session .* is not archived" "$T/daemon.log" ||
    fail "B's session was not reported as not archived"
check_session_archive "$(report_field "$T/c.json" pid)" "$T/c.json"
check_complete "$T/a.json" "$T/d.json"
echo "ok"
