#!/bin/bash
# cuptimonctl decode --pid / --label write only the chosen processes, with
# exactly their records (compared with the full decode's per-session
# counts and with what each workload made); a bad or unmatched value is
# refused naming it; the progress line appears on a terminal (a pty) and
# not when standard error is a pipe or with --quiet.
. "$top_srcdir/tests/integration/lib.sh"

start_daemon --flush-period 0.2
pids=
i=0
for lab in alpha beta beta; do
    CUPTIMON_LABEL=$lab workload --kernels $((3000 + i * 1000)) --rate 50000 \
        --report "$T/report-$i.json" &
    pids="$pids $!"
    i=$((i + 1))
done
for p in $pids; do wait "$p" || fail "a workload exited with status $?"; done
stop_daemon

"$CTL" decode "$T/out" -o "$T/all.json" --summary-out "$T/all-sum.json" --quiet ||
    fail "the full decode failed"
# The sessions' pids and labels, from the full decode's summary.
read -r p0 p1 p2 < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["sessions"]
print(*sorted(x["pid"] for x in s))' "$T/all-sum.json")
[ -n "$p2" ] || fail "the full decode did not find three sessions"

# check SUMMARY TRACE PID...: the summary lists exactly these sessions with
# the full decode's record counts, and the trace's events are theirs only.
check() {
    python3 - "$T/all-sum.json" "$@" <<'PY'
import json, sys
full = {s["pid"]: s for s in json.load(open(sys.argv[1]))["sessions"]}
sub = json.load(open(sys.argv[2]))
trace = json.load(open(sys.argv[3]))
want = sorted(int(p) for p in sys.argv[4:])
got = sorted(s["pid"] for s in sub["sessions"])
assert got == want, ("sessions", got, want)
for s in sub["sessions"]:
    assert s["records_decoded"] == full[s["pid"]]["records_decoded"] > 0, s
    assert s["records_kept"] == full[s["pid"]]["records_kept"], s
total = sum(s["records_decoded"] for s in sub["sessions"])
kinds = sum(sub["records"].values())
assert kinds == total, ("records by kind", kinds, total)
pids = {e["pid"] for e in trace["traceEvents"] if e.get("ph") == "X"}
assert pids == set(want), ("trace pids", pids, want)
PY
}
"$CTL" decode "$T/out" --pid "$p1" -o "$T/p1.json" --summary-out "$T/p1-sum.json" -q ||
    fail "decode --pid $p1 failed"
check "$T/p1-sum.json" "$T/p1.json" "$p1" || fail "--pid $p1 kept the wrong records"
"$CTL" decode "$T/out" --pid "$p0" --pid "$p2" -o "$T/p02.json" --summary-out "$T/p02-sum.json" \
    -q || fail "decode --pid $p0 --pid $p2 failed"
check "$T/p02-sum.json" "$T/p02.json" "$p0" "$p2" || fail "--pid $p0 --pid $p2 kept the wrong records"
# The beta sessions, by their meta.json.
beta=$(for f in "$T"/out/archive/*/meta.json; do
    python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
if m["job"].get("label") == "beta": print(m["pid"])' "$f"
done | sort -n | tr '\n' ' ')
[ "$(echo "$beta" | wc -w)" = 2 ] || fail "meta.json did not show two beta sessions: $beta"
"$CTL" decode "$T/out" --label beta -o "$T/beta.json" --summary-out "$T/beta-sum.json" -q ||
    fail "decode --label beta failed"
# shellcheck disable=SC2086
check "$T/beta-sum.json" "$T/beta.json" $beta || fail "--label beta kept the wrong records"
# The beta sessions' kernels are what their workloads recorded.
python3 - "$T/beta-sum.json" "$T/report-1.json" "$T/report-2.json" <<'PY' || fail "beta kernel counts"
import json, sys
sub = json.load(open(sys.argv[1]))
reps = [json.load(open(p)) for p in sys.argv[2:]]
for kind in ("kernel", "memcpy", "memset"):
    made = sum(r[kind + "s_recorded"] for r in reps)
    assert sub["records"][kind] == made, (kind, sub["records"][kind], made)
PY

# Bad values are refused, naming them; nothing is written.
rc=0; "$CTL" decode "$T/out" --pid 12x -o "$T/bad.json" 2>"$T/err" || rc=$?
[ $rc = 2 ] && grep -q "'12x' is not a process id" "$T/err" || { cat "$T/err"; fail "--pid 12x: rc $rc"; }
rc=0; "$CTL" decode "$T/out" --pid 0 -o "$T/bad.json" 2>"$T/err" || rc=$?
[ $rc = 2 ] && grep -q "'0' is not a process id" "$T/err" || { cat "$T/err"; fail "--pid 0: rc $rc"; }
rc=0; "$CTL" decode "$T/out" --label '' -o "$T/bad.json" 2>"$T/err" || rc=$?
[ $rc = 2 ] && grep -q "label is empty" "$T/err" || { cat "$T/err"; fail "--label '': rc $rc"; }
rc=0; "$CTL" decode "$T/out" --pid "$p1" --label gamma -o "$T/bad.json" -q 2>"$T/err" || rc=$?
[ $rc = 1 ] && grep -q -- "--label gamma: no session with that label" "$T/err" ||
    { cat "$T/err"; fail "--label gamma: rc $rc"; }
[ ! -e "$T/bad.json" ] || fail "a refused decode left $T/bad.json"

# Progress: on a terminal only, and not with --quiet.
progress() { # progress QUIET (0 or 1): decode with standard error on a pty; prints what it showed
    if [ "$1" = 1 ]; then on_tty "$CTL" decode "$T/out" -o "$T/tty.json" --quiet
    else on_tty "$CTL" decode "$T/out" -o "$T/tty.json"; fi
}
progress 0 >"$T/tty.txt" || fail "decode on a pty failed"
grep -q "decode: .* M records, .* of .* M records/s" "$T/tty.txt" ||
    { cat -v "$T/tty.txt"; fail "no progress line on a terminal"; }
progress 1 >"$T/tty-q.txt" || fail "decode --quiet on a pty failed"
! grep -q "records/s" "$T/tty-q.txt" || { cat -v "$T/tty-q.txt"; fail "progress shown with --quiet"; }
"$CTL" decode "$T/out" -o "$T/pipe.json" 2>&1 | cat >"$T/pipe.txt"
! grep -q "records/s" "$T/pipe.txt" || { cat -v "$T/pipe.txt"; fail "progress shown on a pipe"; }
echo "ok"
