#!/bin/bash
# cuptimonctl export --type sqlite over a real archive (real daemon, shim
# and workloads on the libcupti double, GPU metrics from the PM double):
# the published recipes of Nsight Systems' SQLite export run on it, and
# their answers are checked against cuptimonctl stats on the same archive
# (a different path: the statistics engine) and against what the workloads
# logged themselves:
#  - the kernel summary by name (cuda_gpu_kern_sum's query; the median
#    computed in Python, as plain SQLite has none): equal names, counts,
#    totals, medians, minima and maxima to stats' kernels report; the
#    memory summaries (cuda_gpu_mem_time_sum / _size_sum) to memory_time and
#    memory_bytes; the API summary (cuda_api_sum, the _vNNNN suffix cut as it
#    cuts it) to api;
#  - a CUDA API launch joined to its kernel by correlationId (the recipe of
#    "Common SQLite examples", scoped to the process by globalPid): every
#    launch call stats counts has its kernel, launched before it ran;
#  - kernels inside NVTX ranges (nvtx_kern_sum's attribution: the range on
#    the launching thread around the launch): every such kernel of the
#    annotating process is in exactly one "step" and one "inner" range, and
#    the launches inside "inner" are those the workload logged;
#  - a process's rank and label from CUPTIMON_SESSIONS by globalPid, and the
#    globalPid/globalTid encodings the recipes decode;
#  - times on the clock of decode's trace (start / 1000 is the trace's ts);
#  - GPU_METRICS per metric: the samples with a value and their min and
#    max, as stats --report gpu counts them;
#  - sqlite3 from the distribution reads the same numbers; DuckDB too where
#    its Python module is installed (skipped otherwise);
#  - --pid narrows, a damaged chunk is skipped and reported (CUPTIMON_SESSIONS
#    and CUPTIMON_DAMAGE), bad usage and an unwritable file leave nothing
#    at FILE.
. "$top_srcdir/tests/integration/lib.sh"
FAKEPM=$top_builddir/tests/fakecupti/.libs/libpm-fake.so
command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3 command (Debian package sqlite3)"; exit 77; }

NAMES="_Z5scaleILi2EEvPfi,ns_add_one,_ZN2at6native18elementwise_kernelILi128ELi4EEEvi"
cat >"$T/cuptimond.conf" <<EOF
{"gpu_metrics_libcupti": "$FAKEPM", "gpu_metrics_libcuda": "$FAKEPM",
 "gpu_metrics_interval_s": 0.05, "gpu_metrics_window_interval_s": 0.02}
EOF
mkdir -p "$T/pmlock"
export FAKEPM_DIR=$T/pmlock
if [ -e "$FAKEPM" ]; then
    start_daemon --flush-period 0.2 --config "$T/cuptimond.conf"
else
    start_daemon --flush-period 0.2
fi
CUPTIMON_LABEL=exp RANK=0 spawn_workload --kernels 6000 --rate 4000 --threads 2 --annotate 100 --nest \
    --names "$NAMES" --memcpy-every 7 --memset-every 11 --range-log "$T/ranges.log" \
    --report "$T/r0.json" --linger-ms 1500 --wait-file "$T/go" --quiet
w0=$SPAWNED
CUPTIMON_LABEL=other RANK=1 spawn_workload --kernels 3000 --rate 3000 --names "$NAMES" --memcpy-every 5 \
    --report "$T/r1.json" --linger-ms 1500 --wait-file "$T/go" --quiet
w1=$SPAWNED
two() { [ "$(ctl status --json | python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin)["sessions"] if s["connected"]))')" = 2 ]; }
wait_for 100 two || fail "the workloads did not connect"
touch "$T/go"
sleep 0.2
ctl begin-window --all --activities kernel,memcpy,memset,runtime,external_correlation \
    --json >/dev/null || fail "begin-window failed"
sleep 0.8
ctl end-window --json >/dev/null || fail "end-window failed"
# The window has ended: SIGUSR1 ends their linger (a normal exit, after
# all their launches).
kill -USR1 "$w0" "$w1" 2>/dev/null || true
wait "$w0" || fail "the annotating workload failed"
wait "$w1" || fail "the second workload failed"
# --window: the ended window's range and processes, as --from/--to/--pid
# of them export them.
ctl export --window 1 --type sqlite -o "$T/win.sqlite" 2>"$T/err" || fail "export --window 1: $(cat "$T/err")"
ctl windows --json >"$T/windows.json" || fail "windows failed"
rc=0; ctl export --window 7 --type sqlite -o "$T/bad.sqlite" 2>"$T/err" || rc=$?
[ $rc = 1 ] && grep -q -- "--window 7: the daemon has no such window" "$T/err" || fail "--window 7: rc $rc"
stop_daemon
read -r wfrom wto wpids < <(python3 -c '
import json, sys
w = [w for w in json.load(open(sys.argv[1]))["windows"] if w["window"] == 1][0]
print(w["start_unix_ns"], w["end_unix_ns"] + 1, " ".join("--pid %d" % p["pid"] for p in w["summary"]["processes"]))' \
    "$T/windows.json")
# shellcheck disable=SC2086
"$CTL" export "$T/out" --type sqlite --from "${wfrom}ns" --to "${wto}ns" $wpids -o "$T/range.sqlite" ||
    fail "export over the window's range failed"
q="SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL; SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME; SELECT count(*) FROM NVTX_EVENTS"
a=$(sqlite3 "$T/win.sqlite" "$q"); b=$(sqlite3 "$T/range.sqlite" "$q")
[ "$a" = "$b" ] && [ "${a%%|*}" -gt 0 ] || fail "export --window 1: $a; over its range: $b"

DB=$T/x.sqlite
"$CTL" export "$T/out" --type sqlite -o "$DB" 2>"$T/export.err" ||
    fail "export failed: $(cat "$T/export.err")"
[ ! -s "$T/export.err" ] || fail "export of a sound archive said: $(cat "$T/export.err")"
ls "$T"/x.sqlite.tmp.* >/dev/null 2>&1 && fail "export left its temporary file"
"$CTL" stats "$T/out" --report all --format json -o "$T/stats.json" -q || fail "stats failed"
"$CTL" stats "$T/out" --report gpu --format json -o "$T/gpu.json" -q || fail "stats --report gpu failed"
"$CTL" decode "$T/out" -o "$T/trace.json" -q || fail "decode failed"

cat >"$T/recipes.py" <<'PY'
# The published recipes, as nsys stats runs them (its median(), which plain
# SQLite lacks, is computed here), over any DB-API connection.
import statistics

STRIP = "CASE substr(ids.value, -6, 2) WHEN '_v' THEN substr(ids.value, 1, length(ids.value)-6) ELSE ids.value END"

def groups(rows):
    by = {}
    for name, dur in rows:
        by.setdefault(name, []).append(dur)
    return {n: (len(v), sum(v), statistics.median(v), min(v), max(v)) for n, v in by.items()}

def kern_sum(db):
    # cuda_gpu_kern_sum: the templated (demangled) name.
    return groups(db.execute(
        "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL AS k"
        " JOIN StringIds AS s ON s.id = k.demangledName").fetchall())

def mem_time_sum(db):
    # cuda_gpu_mem_time_sum: '[CUDA memcpy ' || label || ']' and '[CUDA memset]'.
    return groups(db.execute(
        "SELECT '[CUDA memcpy ' || e.label || ']', m.end - m.start FROM CUPTI_ACTIVITY_KIND_MEMCPY"
        " AS m JOIN ENUM_CUDA_MEMCPY_OPER AS e ON e.id = m.copyKind"
        " UNION ALL SELECT '[CUDA memset]', end - start FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchall())

def mem_size_sum(db):
    return groups(db.execute(
        "SELECT '[CUDA memcpy ' || e.label || ']', m.bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY AS m"
        " JOIN ENUM_CUDA_MEMCPY_OPER AS e ON e.id = m.copyKind"
        " UNION ALL SELECT '[CUDA memset]', bytes FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchall())

def api_sum(db):
    # cuda_api_sum: runtime and driver calls, the _vNNNN suffix cut.
    return groups(db.execute(
        "SELECT " + STRIP + ", r.end - r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r"
        " LEFT JOIN StringIds AS ids ON ids.id = r.nameId").fetchall())

def launches(db):
    # "Correlate CUDA kernel launches with CUDA API kernel launches", scoped
    # to the process (correlation ids are per process).
    return db.execute(
        "SELECT " + STRIP + ", r.start, k.start, k.globalPid, r.globalTid, k.correlationId, r.end"
        " FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r JOIN StringIds AS ids ON ids.id = r.nameId"
        " JOIN CUPTI_ACTIVITY_KIND_KERNEL AS k ON k.correlationId = r.correlationId"
        " AND k.globalPid = (r.globalTid & 0xFFFFFFFFFF000000)").fetchall()

def kernels_in_nvtx(db):
    # nvtx_kern_sum's attribution: an NVTX range on the launching thread
    # around the launch call gives the kernel to the range.
    return db.execute(
        "SELECT coalesce(n.text, s.value), k.correlationId, k.globalPid"
        " FROM NVTX_EVENTS AS n LEFT JOIN StringIds AS s ON s.id = n.textId"
        " JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.globalTid = n.globalTid"
        " AND r.start >= n.start AND r.end <= n.end"
        " JOIN CUPTI_ACTIVITY_KIND_KERNEL AS k ON k.correlationId = r.correlationId"
        " AND k.globalPid = (r.globalTid & 0xFFFFFFFFFF000000)"
        " WHERE n.eventType = 59").fetchall()
PY

python3 - "$DB" "$T/stats.json" "$T/gpu.json" "$T/trace.json" "$T/ranges.log" "$T/recipes.py" \
    "$T/r0.json" <<'PY' || fail "the recipes on the export disagree with stats"
import json, sqlite3, sys
db_path, stats_p, gpu_p, trace_p, rlog, recipes, r0 = sys.argv[1:]
exec(open(recipes).read())
st = json.load(open(stats_p))
db = sqlite3.connect(db_path)

def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)

def compare(mine, rows, key, count):
    ref = {r[key]: (r[count], r["total_ns" if "total_ns" in r else "total_bytes"],
                    r["med_ns" if "med_ns" in r else "med_bytes"],
                    r["min_ns" if "min_ns" in r else "min_bytes"],
                    r["max_ns" if "max_ns" in r else "max_bytes"]) for r in rows}
    check(all(r["med_exact"] for r in rows), "stats' medians are exact")
    check(set(mine) == set(ref), "names: %s vs %s" % (sorted(mine), sorted(ref)))
    for n in ref:
        check(mine[n] == ref[n], "%s: export %s, stats %s" % (n, mine[n], ref[n]))
    return sum(v[0] for v in ref.values())

nk = compare(kern_sum(db), st["kernels"], "name", "instances")
check(nk == st["info"]["kernels"] and nk >= 9000, "kernels: %d" % nk)
check(len(st["kernels"]) == 3, "three kernel names")
compare(mem_time_sum(db), st["memory_time"], "operation", "count")
compare(mem_size_sum(db), st["memory_bytes"], "operation", "count")
napi = compare(api_sum(db), st["api"], "name", "calls")
check(napi > 0, "the window's API calls are exported")

# Names as nsys gives them: demangled (templated), base and mangled.
names = {r[0]: r[1:] for r in db.execute(
    "SELECT d.value, s.value, m.value FROM CUPTI_ACTIVITY_KIND_KERNEL AS k"
    " JOIN StringIds AS d ON d.id = k.demangledName JOIN StringIds AS s ON s.id = k.shortName"
    " JOIN StringIds AS m ON m.id = k.mangledName GROUP BY 1, 2, 3")}
check(names == {"void scale<2>(float*, int)": ("scale", "_Z5scaleILi2EEvPfi"),
                "ns_add_one": ("ns_add_one", "ns_add_one"),
                "void at::native::elementwise_kernel<128, 4>(int)":
                    ("elementwise_kernel", "_ZN2at6native18elementwise_kernelILi128ELi4EEEvi")},
      "kernel names: %s" % names)

# Launch -> kernel by correlationId: every launch call stats counted has
# its kernel, which ran after the call began.
pairs = launches(db)
launch_calls = sum(r["calls"] for r in st["api"] if r["name"].startswith("cudaLaunchKernel"))
check(len(pairs) == launch_calls and launch_calls > 0,
      "launch->kernel pairs: %d, launch calls: %d" % (len(pairs), launch_calls))
check(all(p[0].startswith("cudaLaunchKernel") for p in pairs), "only launches pair with kernels")
check(all(p[1] <= p[2] for p in pairs), "a kernel starts after its launch call")
check(len({(p[3], p[5]) for p in pairs}) == len(pairs), "one launch per kernel")

# The processes: rank and label joined by globalPid; the pid where the
# recipes read it.
procs = {r[0]: r[1:] for r in db.execute(
    "SELECT label, rank, pid, globalPid / 0x1000000 % 0x1000000, globalPid FROM CUPTIMON_SESSIONS")}
check(set(procs) == {"exp", "other"}, "sessions: %s" % procs)
check(procs["exp"][0] == 0 and procs["other"][0] == 1, "ranks: %s" % procs)
check(all(p[1] == p[2] for p in procs.values()), "globalPid / 0x1000000 % 0x1000000 is the pid")
check(procs["exp"][1] == json.load(open(r0))["pid"], "the annotating workload's pid")
by_label = dict(db.execute(
    "SELECT s.label, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL AS k"
    " JOIN CUPTIMON_SESSIONS AS s ON s.globalPid = k.globalPid GROUP BY 1"))
check(by_label == {"exp": 6000, "other": 3000}, "kernels by label: %s" % by_label)
check(db.execute("SELECT count(*) FROM PROCESSES").fetchone()[0] == 2, "PROCESSES")
tids = db.execute("SELECT DISTINCT globalTid / 0x1000000 % 0x1000000 FROM CUPTI_ACTIVITY_KIND_RUNTIME"
                  " WHERE globalTid % 0x1000000 = 0").fetchall()
check(tids == [], "every API call carries its thread id")

# Kernels inside NVTX ranges: on each annotating thread, every kernel
# launched between its first archived range's start and its last's end is
# in exactly one "inner" range (the workload wraps each launch in one),
# and one "step K" range on the thread that steps (the workload's thread
# 0: the step index is global); the launches inside "inner" are those the
# workload logged inside "inner".  (A range begun before the archive held
# ranges is not in it, nor are the launches it covered.)
gp = procs["exp"][3]
inr = kernels_in_nvtx(db)
by_tid = {}
for p in pairs:
    if p[3] == gp:
        by_tid.setdefault(p[4], []).append(p)
for what in ("inner", "step"):
    got = [r for r in inr if r[2] == gp and (r[0] == "inner" if what == "inner" else r[0].startswith("step "))]
    check(len({r[1] for r in got}) == len(got), what + ": a kernel in two ranges")
    ranges = db.execute(
        "SELECT n.globalTid, min(n.start), max(n.end) FROM NVTX_EVENTS AS n"
        " LEFT JOIN StringIds AS s ON s.id = n.textId WHERE coalesce(n.text, s.value) "
        + ("= 'inner'" if what == "inner" else "LIKE 'step %'") + " GROUP BY 1").fetchall()
    check(len(ranges) == (2 if what == "inner" else 1), what + ": ranges on %d threads" % len(ranges))
    want = {p[5] for tid, lo, hi in ranges for p in by_tid.get(tid, []) if lo <= p[1] and p[6] <= hi}
    check(want and {r[1] for r in got} == want, "%s: %d kernels in ranges, %d launched in their span"
          % (what, len(got), len(want)))
inner = {r[1] for r in inr if r[0] == "inner" and r[2] == gp}
logged = {int(l.split()[4]) for l in open(rlog) if l.startswith("pop ")}
check(inner <= logged, "the inner kernels are launches the workload logged inside inner")
check(not [r for r in inr if r[2] != gp], "the second process has no NVTX range")

# The clock: start / 1000 is the trace's ts (same base), for every kernel.
base = db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
tr = json.load(open(trace_p))
check(tr["otherData"]["base_unix_ns"] == base, "the time base is decode's")
tk = sorted((round(e["ts"] * 1000), e["args"]["correlation"]) for e in tr["traceEvents"]
            if e.get("cat") == "kernel")
ek = sorted(db.execute("SELECT start, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall())
check(tk == ek, "kernel starts: the trace's ts * 1000 and the export's start differ")

# The schema version users check, and the indexes the recipes join on.
check(dict(db.execute("SELECT name, value FROM META_DATA_EXPORT"))["EXPORT_SCHEMA_VERSION"]
      == "3.16.1", "EXPORT_SCHEMA_VERSION")
idx = {r[0] for r in db.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND sql NOT NULL")}
for want in ("CUPTI_ACTIVITY_KIND_KERNEL (correlationId)", "CUPTI_ACTIVITY_KIND_RUNTIME (correlationId)",
             "CUPTI_ACTIVITY_KIND_KERNEL (globalPid)", "CUPTI_ACTIVITY_KIND_KERNEL (start)"):
    check(any(want in i for i in idx), "an index on " + want)

# GPU metrics as stats --report gpu counts them: the samples with a value,
# their min and max, per metric.
gpu = json.load(open(gpu_p)).get("gpu", [])
if gpu:
    mine = {r[0]: r[1:] for r in db.execute(
        "SELECT t.metricName, count(*), min(g.value), max(g.value) FROM GPU_METRICS AS g"
        " JOIN TARGET_INFO_GPU_METRICS AS t ON t.typeId = g.typeId AND t.metricId = g.metricId"
        " GROUP BY t.typeId, t.metricId")}
    ref = {r["label"]: (r["samples"], r["min"], r["max"]) for r in gpu if r["samples"]}
    check(ref and mine == ref, "GPU metrics: export %s, stats %s" % (mine, ref))
print("ok: %d kernels, %d API calls, %d launch pairs, %d kernels in ranges, %d GPU metrics" %
      (nk, napi, len(pairs), len(inner), len(gpu)))
PY

# sqlite3 from the distribution: the same kernel totals.
got=$(sqlite3 "$DB" "SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
want=$(python3 -c 'import json,sys; k=json.load(open(sys.argv[1]))["kernels"]; print("%d|%d" % (sum(r["instances"] for r in k), sum(r["total_ns"] for r in k)))' "$T/stats.json")
[ "$got" = "$want" ] || fail "sqlite3: kernels $got, stats $want"
# DuckDB where installed.
if python3 -c 'import duckdb' 2>/dev/null; then
    python3 - "$DB" "$T/recipes.py" "$T/stats.json" <<'PY' || fail "DuckDB reads the export otherwise"
import duckdb, json, sys
db_path, recipes, stats_p = sys.argv[1:]
exec(open(recipes).read())
con = duckdb.connect()
try:
    con.execute("LOAD sqlite")
except duckdb.Error:
    try:  # fetched from DuckDB's extension repository: needs the network
        con.execute("INSTALL sqlite; LOAD sqlite")
    except duckdb.Error as e:
        print("DuckDB: its sqlite extension cannot be loaded (%s): its check is skipped" % e)
        sys.exit(0)
con.execute("ATTACH '%s' AS x (TYPE sqlite); USE x" % db_path)
k = kern_sum(con)
ref = {r["name"]: r["instances"] for r in json.load(open(stats_p))["kernels"]}
assert {n: v[0] for n, v in k.items()} == ref, (k, ref)
PY
else
    echo "DuckDB not installed: its check is skipped"
fi

# --pid: only that process's rows.
pid1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$T/r1.json")
"$CTL" export "$T/out" --type=sqlite --pid "$pid1" -o "$T/one.sqlite" 2>"$T/err" || fail "export --pid failed"
got=$(sqlite3 "$T/one.sqlite" "SELECT count(*), count(DISTINCT globalPid) FROM CUPTI_ACTIVITY_KIND_KERNEL; SELECT group_concat(label) FROM CUPTIMON_SESSIONS")
[ "$got" = "3000|1
other" ] || fail "export --pid $pid1: $got"

# A damaged chunk: skipped, said on standard error as decode says it, and
# kept in CUPTIMON_SESSIONS and CUPTIMON_DAMAGE; the rest is exported.
sdir=$(python3 -c '
import json, sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT sessionDir FROM CUPTIMON_SESSIONS WHERE label = ?", ("other",)).fetchone()[0])' "$DB")
seg=$(ls "$sdir"/seg-*.cpt | head -1)
python3 - "$seg" <<'PY'
import sys
# The middle of the first chunk's payload (past the segment and chunk headers).
with open(sys.argv[1], "r+b") as f:
    f.seek(400)
    b = f.read(1)
    f.seek(400)
    f.write(bytes([b[0] ^ 0xFF]))
PY
"$CTL" decode "$sdir" -o /dev/null -q 2>"$T/decode-damaged.err" || fail "decode of the damaged session failed"
rc=0; "$CTL" export "$sdir" --type sqlite -o "$T/damaged.sqlite" 2>"$T/err" || rc=$?
[ $rc = 0 ] || fail "export of a damaged session: rc $rc: $(cat "$T/err")"
grep -q "corrupt chunk" "$T/err" || fail "the damaged chunk is not reported: $(cat "$T/err")"
head -1 "$T/decode-damaged.err" | sed 's/cuptimonctl decode/cuptimonctl export/' >"$T/want-line"
grep -qxF -f "$T/want-line" "$T/err" || fail "export does not say what decode says: $(cat "$T/err")"
got=$(sqlite3 "$T/damaged.sqlite" "SELECT corruptChunks FROM CUPTIMON_SESSIONS; SELECT kind FROM CUPTIMON_DAMAGE; SELECT count(*) < 3000 AND count(*) > 0 FROM CUPTI_ACTIVITY_KIND_KERNEL")
[ "$got" = "1
chunk
1" ] || fail "the damaged chunk in the database: $got"

# On a terminal, a progress line (the last one says every session); -q:
# none (the damaged chunk above is still said).
on_tty "$CTL" export "$T/out" --type sqlite -o "$T/tty.sqlite" >"$T/tty.txt" || fail "export on a tty failed"
grep -q "export: .* M records, session 3 of 3, .* M records/s" "$T/tty.txt" ||
    fail "no progress line on a terminal: $(cat -v "$T/tty.txt")"
on_tty "$CTL" export "$T/out" --type sqlite -o "$T/tty.sqlite" -q >"$T/tty.txt" || fail "export -q failed"
! grep -q "M records" "$T/tty.txt" || fail "export -q wrote a progress line: $(cat -v "$T/tty.txt")"

# Bad usage, and a file that cannot be written: nothing at FILE.
rc=0; "$CTL" export "$T/out" -o "$T/bad.sqlite" 2>"$T/err" || rc=$?
[ $rc = 2 ] && grep -q -- "--type is missing" "$T/err" || fail "no --type: rc $rc: $(cat "$T/err")"
rc=0; "$CTL" export "$T/out" --type csv -o "$T/bad.sqlite" 2>"$T/err" || rc=$?
[ $rc = 2 ] && grep -q -- "--type: 'csv'" "$T/err" || fail "--type csv: rc $rc"
rc=0; "$CTL" export "$T/out" --type sqlite 2>"$T/err" || rc=$?
[ $rc = 2 ] && grep -q -- "-o FILE" "$T/err" || fail "no -o: rc $rc"
rc=0; "$CTL" export "$T/out" --type sqlite -o /dev/null 2>"$T/err" || rc=$?
[ $rc = 2 ] && grep -q "not a regular file" "$T/err" || fail "-o /dev/null: rc $rc"
rc=0; "$CTL" export "$T/out" --type sqlite --label nosuch -o "$T/bad.sqlite" 2>"$T/err" || rc=$?
[ $rc = 1 ] && grep -q -- "--label nosuch: no session" "$T/err" || fail "--label nosuch: rc $rc"
[ ! -e "$T/bad.sqlite" ] || fail "a failed export left $T/bad.sqlite"
mkdir "$T/ro" && chmod 555 "$T/ro"
if [ ! -w "$T/ro" ]; then
    rc=0; "$CTL" export "$T/out" --type sqlite -o "$T/ro/x.sqlite" 2>"$T/err" || rc=$?
    [ $rc = 1 ] && grep -q "cannot write $T/ro/x.sqlite" "$T/err" || fail "unwritable: rc $rc: $(cat "$T/err")"
fi
# An export over an existing database replaces it whole.
cp "$T/one.sqlite" "$T/again.sqlite"
"$CTL" export "$T/out" --type sqlite -o "$T/again.sqlite" 2>/dev/null || fail "export over a file failed"
[ "$(sqlite3 "$T/again.sqlite" "SELECT count(*) FROM CUPTIMON_SESSIONS")" = 2 ] || fail "the file was not replaced"
echo "ok"
