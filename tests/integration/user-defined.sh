#!/bin/bash
# CUPTI 13.2+ user-defined activity records, daemon and cuptimonctl side
# (issue 16): a producer that describes its own records (the hello's
# "record_layouts": every field the decoder reads, packed in reverse order,
# so that no struct of the layout table fits them) and reports a CUPTI
# released after this build (14.99), beside a job whose CUPTI (the double,
# 13.0) writes the table's layouts, under one daemon.  The offline decode
# holds every kernel, copy and memset of both exactly, with the fields the
# producer wrote; one window over both holds records of both, each with
# fields the producer wrote.  Then a producer whose description puts a
# kernel field outside its record: refused with a message naming the kind
# and field, its kernels counted as undecodable (never misread), its valid
# kinds still decoded.
#
# The producer is tests/fault/hostile-producer (cases user-defined,
# user-defined-hostile and user-defined-layouts), which speaks the protocol
# itself and writes records whose every field the test can recompute
# (the shim's own v2 path is tests/integration/v2.sh).
. "$top_srcdir/tests/integration/lib.sh"
HOSTILE=$top_builddir/tests/fault/hostile-producer

start_daemon --flush-period 0.2
CUPTIMON_LABEL=table workload --kernels 6000 --rate 2000 --streams 2 --memcpy-every 7 \
    --memset-every 11 --report "$T/r-table.json" --linger-ms 500 &
wp=$!
"$HOSTILE" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
    --count 20000 --hold-ms 4000 user-defined > "$T/udr.out" 2>&1 &
hp=$!
two() { [ "$(ctl status --json | python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin)["sessions"] if s["connected"]))')" = 2 ]; }
wait_for 100 two || { ctl status; fail "the two producers did not both connect"; }
sleep 0.5
ctl begin-window --json > "$T/begin.json" || fail "begin-window failed"
sleep 1.5
ctl end-window --json > "$T/end.json" || fail "end-window failed"
wait "$wp" || fail "the workload exited with status $?"
wait "$hp" || { cat "$T/udr.out"; fail "the user-defined producer failed"; }
stop_daemon
grep -q "its user-defined record layouts are refused" "$T/daemon.log" &&
    { cat "$T/daemon.log"; fail "the daemon refused a valid description"; }

python3 "$top_srcdir/tests/integration/check-archive.py" "$CTL" "$T/out" "$T/r-table.json"
"$CTL" decode "$T/out" -o "$T/all.json" --summary-out "$T/summary.json" 2>"$T/decode.err" ||
    { cat "$T/decode.err"; fail "decode failed"; }
grep "udr-report:" "$T/udr.out" | sed 's/^udr-report: //' > "$T/udr.json"
python3 - "$T/end.json" "$T/all.json" "$T/udr.json" "$T/r-table.json" <<'PY'
import json, sys, collections
end = json.load(open(sys.argv[1]))
assert end["state"] == "done", end
rep = json.load(open(sys.argv[3]))
table_pid = json.load(open(sys.argv[4]))["pid"]
udr_pid = rep["pid"]

# What the producer wrote (tests/fault/hostile-producer.c, udr_record).
want = collections.Counter()
for i in range(rep["records"]):
    if i % 11 == 10:
        want[("gpu_memset", 512 * (1 + i % 5), 3, 7 + i % 2)] += 1
    elif i % 7 == 6:
        want[("gpu_memcpy", 4096 * (1 + i % 3), 1 + i % 2, 7 + i % 2)] += 1
    else:
        want[("kernel", (1 + i % 5, 2, 3), (32 * (1 + i % 4), 1, 1), 16 + i % 8, 256 * (i % 3),
              7 + i % 2)] += 1

def gpu(trace):
    out = collections.defaultdict(collections.Counter)
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        a = e["args"]
        if e["cat"] == "kernel":
            key = ("kernel", tuple(a["grid"]), tuple(a["block"]), a["registers per thread"],
                   a["dynamic shared memory"], a["stream"])
        elif e["cat"] == "gpu_memcpy":
            key = ("gpu_memcpy", a["bytes"], a["copy kind"], a["stream"])
        else:
            key = ("gpu_memset", a["bytes"], a["memory kind"], a["stream"])
        out[e["pid"]][key] += 1
    return out

got = gpu(json.load(open(sys.argv[2])))
assert got[udr_pid] == want, \
    f"decode: the user-defined producer's records differ: missing {list((want - got[udr_pid]).items())[:3]}, extra {list((got[udr_pid] - want).items())[:3]}"
assert sum(want.values()) == rep["records"] == 20000, rep
print(f"decode: {rep['records']} records laid out as described, every one exact "
      f"({rep['kernels']} kernels, {rep['memcpys']} copies, {rep['memsets']} memsets)")

w = gpu(json.load(open(end["output"])))
assert set(w) == {udr_pid, table_pid}, f"window: processes {sorted(w)}, want {udr_pid} and {table_pid}"
extra = w[udr_pid] - want
assert not extra, f"window: records the producer did not write: {list(extra.items())[:3]}"
cats = {k[0] for k in w[udr_pid]}
assert cats == {"kernel", "gpu_memcpy", "gpu_memset"}, cats
print(f"window: {sum(w[udr_pid].values())} user-defined and {sum(w[table_pid].values())} "
      "table-layout records, every one with the fields written")
PY
grep -q "refused" "$T/decode.err" && { cat "$T/decode.err"; fail "decode refused a valid description"; }

# A description that puts the kernel's start outside its record.
mv "$T/out" "$T/out-good"
start_daemon --flush-period 0.2
"$HOSTILE" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
    --count 3000 --hold-ms 300 user-defined-hostile > "$T/bad.out" 2>&1 ||
    { cat "$T/bad.out"; fail "the hostile producer's own checks failed"; }
stop_daemon
want_log=$(sed -n 's/^expect-log: //p' "$T/bad.out")
grep -qF -- "$want_log" "$T/daemon.log" || { cat "$T/daemon.log"; fail "the daemon did not log: $want_log"; }
"$CTL" decode "$T/out" -o "$T/bad.json" --summary-out "$T/bad-summary.json" 2>"$T/bad-decode.err" ||
    { cat "$T/bad-decode.err"; fail "decode of the refused description failed"; }
grep -q "the producer's user-defined record layouts: kind 10 (CONCURRENT_KERNEL): field start at offset [0-9]* (8 bytes) is not inside the record" "$T/bad-decode.err" ||
    { cat "$T/bad-decode.err"; fail "decode does not name the refused kind and field"; }
grep "udr-report:" "$T/bad.out" | sed 's/^udr-report: //' > "$T/bad-rep.json"
python3 - "$T/bad.json" "$T/bad-summary.json" "$T/bad-rep.json" <<'PY'
import json, sys, collections
trace, summary, rep = (json.load(open(p)) for p in sys.argv[1:])
cats = collections.Counter(e["cat"] for e in trace["traceEvents"]
                           if e.get("ph") == "X" and e.get("pid") == rep["pid"])
assert cats["kernel"] == 0, f"kernels decoded through a refused layout: {cats}"
assert cats["gpu_memcpy"] == rep["memcpys"] and cats["gpu_memset"] == rep["memsets"], (cats, rep)
und = summary["undecodable"]["bytes"]
assert und == rep["kernels"] * rep["sizes"][0], f"undecodable {und} bytes, want {rep['kernels']} kernels x {rep['sizes'][0]}"
print(f"hostile description: {rep['kernels']} kernels refused and counted ({und} bytes), "
      f"{cats['gpu_memcpy']} copies and {cats['gpu_memset']} memsets still decoded")
PY

# Layouts that change half way through a session (LAYOUTS, issue 28): the
# session of a shim on CUPTI's v2 path, whose hello describes nothing, with
# a forged layout in STRINGS and broken or late LAYOUTS around the real
# ones (each refused and logged).  The offline decode holds every record
# with the fields written, each chunk read with the layouts it was written
# with, and an archive without LAYOUTS (the first part's) still decodes as
# before.
mv "$T/out" "$T/out-bad"
start_daemon --flush-period 0.2
"$HOSTILE" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
    --count 6000 --hold-ms 600 user-defined-layouts > "$T/gen.out" 2>&1 ||
    { cat "$T/gen.out"; fail "the changing-layouts producer's own checks failed"; }
stop_daemon
sed -n 's/^expect-log: //p' "$T/gen.out" | while IFS= read -r want_log; do
    grep -qF -- "$want_log" "$T/daemon.log" || { cat "$T/daemon.log"; fail "the daemon did not log: $want_log"; }
done
"$CTL" decode "$T/out" -o "$T/gen.json" --summary-out "$T/gen-summary.json" 2>"$T/gen-decode.err" ||
    { cat "$T/gen-decode.err"; fail "decode of the changing layouts failed"; }
grep "udr-report:" "$T/gen.out" | sed 's/^udr-report: //' > "$T/gen-rep.json"
python3 - "$T/gen.json" "$T/gen-summary.json" "$T/gen-rep.json" <<'PY'
import json, sys, collections
trace, summary, rep = (json.load(open(p)) for p in sys.argv[1:])
want = collections.Counter()
for i in range(rep["records"]):
    if i % 11 == 10:
        want[("gpu_memset", 512 * (1 + i % 5), 3, 7 + i % 2)] += 1
    elif i % 7 == 6:
        want[("gpu_memcpy", 4096 * (1 + i % 3), 1 + i % 2, 7 + i % 2)] += 1
    else:
        want[("kernel", (1 + i % 5, 2, 3), (32 * (1 + i % 4), 1, 1), 16 + i % 8, 256 * (i % 3),
              7 + i % 2)] += 1
got = collections.Counter()
for e in trace["traceEvents"]:
    if e.get("ph") != "X" or e.get("pid") != rep["pid"]:
        continue
    a = e.get("args", {})
    if e["cat"] == "kernel":
        got[("kernel", tuple(a["grid"]), tuple(a["block"]), a["registers per thread"],
             a["dynamic shared memory"], a["stream"])] += 1
    elif e["cat"] == "gpu_memcpy":
        got[("gpu_memcpy", a["bytes"], a["copy kind"], a["stream"])] += 1
    elif e["cat"] == "gpu_memset":
        got[("gpu_memset", a["bytes"], a["memory kind"], a["stream"])] += 1
assert got == want, f"missing {list((want - got).items())[:3]}, extra {list((got - want).items())[:3]}"
assert summary["undecodable"]["bytes"] == 0, summary["undecodable"]
print(f"changing layouts: {rep['records']} records decoded exactly across the change")
PY
"$CTL" decode "$T/out-good" -o /dev/null 2>"$T/old-decode.err" || fail "the first archive no longer decodes"
echo "ok"
