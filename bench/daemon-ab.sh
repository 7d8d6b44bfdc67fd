#!/bin/bash
# Two cuptimond binaries side by side: daemon CPU per archived record with
# N bench/replay-producers (a real H200 buffer replayed over the shim's
# protocol, as fast as slots come back), old and new interleaved round by
# round in one run, so that the machine's drift hits both alike.  Prints
# one line per round and the paired new/old ratios' median.
# usage: daemon-ab.sh OLD_CUPTIMOND NEW_CUPTIMOND [ROUNDS [PRODUCERS [RECORDS]]]
#   (run from a build directory, or set top_builddir)
set -eu
old=$1 new=$2 rounds=${3:-5} n=${4:-4} per=${5:-1500000}
: "${top_builddir:=$PWD}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
buf=$top_srcdir/tests/data/cupti-13.0-h200/phase0-buf0.bin.zst
clk=$(getconf CLK_TCK)

# one DAEMON: prints "µs-per-record records dropped"
one() {
    local T out dp pids u0 s0 u1 s1
    T=$(mktemp -d "${TMPDIR:-/tmp}/cuptimon-ab.XXXXXX")
    out=${BENCH_OUTPUT_DIR:-/dev/shm}/cuptimon-ab-$$
    rm -rf "$out"
    "$1" --socket "$T/p.sock" --control-socket "$T/c.sock" --output-dir "$out" \
        --flush-period 0 2>"$T/d.log" &
    dp=$!
    for _ in $(seq 100); do
        "$top_builddir/cli/cuptimonctl" --control-socket "$T/c.sock" status >/dev/null 2>&1 && break
        sleep 0.05
    done
    read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$dp/stat")
    pids=
    for i in $(seq "$n"); do
        "$top_builddir/bench/replay-producer" --socket "$T/p.sock" --buffer "$buf" \
            --records "$per" --rate 0 --report "$T/r$i.json" &
        pids="$pids $!"
    done
    # shellcheck disable=SC2086
    wait $pids
    sleep 0.3
    read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$dp/stat")
    kill -TERM "$dp"
    wait "$dp" || true
    python3 - "$T" "$(((u1 - u0) + (s1 - s0)))" "$clk" <<'PY'
import glob, json, sys
T, ticks, clk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
reps = [json.load(open(p)) for p in glob.glob(T + "/r*.json")]
n = sum(r["records_sent"] for r in reps)
d = sum(r["records_dropped"] for r in reps)
print("%.3f %d %d" % (ticks / clk * 1e6 / max(n, 1), n, d))
PY
    rm -rf "$T" "$out"
}

ratios=
for r in $(seq "$rounds"); do
    a=$(one "$old")
    b=$(one "$new")
    echo "round $r: old ${a%% *} us/record, new ${b%% *} us/record (records, dropped: old ${a#* }, new ${b#* })"
    ratios="$ratios $(python3 -c "print('%.3f' % (${b%% *} / ${a%% *}))")"
done
python3 - $ratios <<'PY'
import statistics, sys
r = [float(x) for x in sys.argv[1:]]
print("paired new/old:", " ".join("%.2f" % x for x in r), "median %.2f" % statistics.median(r))
PY
