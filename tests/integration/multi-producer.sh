#!/bin/bash
# The foundation's end-to-end test: the real cuptimond, 4 workload
# processes at once under the real shim, the real cuptimonctl.  Every
# session must appear in status, and the archive must hold every record each
# process produced, exactly once, with its kernel name.
. "$top_srcdir/tests/integration/lib.sh"

start_daemon --flush-period 0.2
pids=
for i in 0 1 2 3; do
    CUPTIMON_LABEL=worker$i RANK=$i WORLD_SIZE=4 spawn_workload --kernels $((20000 + i * 5000)) \
        --rate 40000 --streams $((i + 1)) --threads $((i % 2 + 1)) \
        --report "$T/report-$i.json" --linger-ms 60000
    pids="$pids $SPAWNED"
done

# While they run (each lingers until SIGUSR1), status lists all four, with
# their labels and ranks, and a forced flush reaches all four.
listed() {
    ctl status >"$T/status.txt" || return 1
    for i in 0 1 2 3; do grep -q "worker$i rank $i" "$T/status.txt" || return 1; done
}
wait_for 100 listed || { cat "$T/status.txt"; fail "status did not list worker0..3 with their ranks"; }
ctl flush --forced > "$T/flush.txt" || { cat "$T/flush.txt"; fail "forced flush reported late sessions"; }
grep -q "4 of 4 session(s)" "$T/flush.txt" || { cat "$T/flush.txt"; fail "flush did not reach 4 sessions"; }
# No chunk fell back from the per-kind record delta (status counts any).
ctl status --json | python3 -c '
import json, sys
d = json.load(sys.stdin)["daemon"]
assert d["archive_rdelta_fallbacks"] == 0, d' || fail "status: archive_rdelta_fallbacks missing or not 0"
kill -USR1 $pids
for p in $pids; do wait "$p" || fail "a workload exited with status $?"; done
stop_daemon

# The daemon writes the double's records with the per-kind record delta
# (codec 2, chunk version 2): every chunk of every session.
python3 - "$T/out" <<'PY' || fail "chunks written without the per-kind record delta"
import glob, struct, sys
n = 0
for seg in glob.glob(sys.argv[1] + "/archive/*/seg-*.cpt"):
    b = open(seg, "rb").read()
    off = 16
    while off + 96 <= len(b):
        assert b[off:off + 8] == b"CPTMCHNK", (seg, off)
        version, codec = struct.unpack_from("<I", b, off + 8)[0], struct.unpack_from("<I", b, off + 28)[0]
        stored = struct.unpack_from("<Q", b, off + 64)[0]
        assert (version, codec) == (2, 2), (seg, off, version, codec)
        off += 96 + stored
        n += 1
assert n >= 4, n
PY
# Every session's archive, decoded, matches what its workload says it made.
python3 "$top_srcdir/tests/integration/check-archive.py" "$CTL" "$T/out" "$T"/report-*.json
echo "ok"
