#!/bin/bash
# Shared by bench/daemon-ab.sh and bench/daemon-warm.sh (sourced): one
# cuptimond under bench/replay-producers (a real H200 buffer replayed over
# the shim's protocol, as fast as slots come back), its CPU read from
# /proc.  Needs top_builddir and top_srcdir set.
: "${top_builddir:?}" "${top_srcdir:?}"
dr_buf=$top_srcdir/tests/data/cupti-13.0-h200/phase0-buf0.bin.zst
dr_clk=$(getconf CLK_TCK)

# dr_start CUPTIMOND: starts it on sockets in a fresh directory (dr_T),
# output under BENCH_OUTPUT_DIR (/dev/shm: the disk is not what is measured).
dr_start() {
    dr_T=$(mktemp -d "${TMPDIR:-/tmp}/cuptimon-dr.XXXXXX")
    dr_out=${BENCH_OUTPUT_DIR:-/dev/shm}/cuptimon-dr-$$
    rm -rf "$dr_out"
    "$1" --socket "$dr_T/p.sock" --control-socket "$dr_T/c.sock" --output-dir "$dr_out" \
        --flush-period 0 2>"$dr_T/d.log" &
    dr_pid=$!
    for _ in $(seq 100); do
        "$top_builddir/cli/cuptimonctl" --control-socket "$dr_T/c.sock" status >/dev/null 2>&1 &&
            return 0
        sleep 0.05
    done
    echo "daemon-run: $1 did not start:" >&2
    cat "$dr_T/d.log" >&2
    return 1
}

# dr_cpu: the daemon's CPU so far, in clock ticks (user + system).
dr_cpu() { awk '{print $14 + $15}' "/proc/$dr_pid/stat"; }

# dr_load N RECORDS: N producers at once, each RECORDS records of buffers
# that vary in length (--vary), each on a GPU of its own (--device: a
# node's jobs, one per GPU; all on one GPU, the per-GPU busy union merges
# eight jobs' overlapping kernels, which no one-job-per-GPU node does);
# waits for them, and for the daemon to finish their last buffers.
# Prints "records dropped".
dr_load() {
    local pids='' i
    rm -f "$dr_T"/r*.json
    for i in $(seq "$1"); do
        "$top_builddir/bench/replay-producer" --socket "$dr_T/p.sock" --buffer "$dr_buf" \
            --records "$2" --rate 0 --vary --device $((i - 1)) --report "$dr_T/r$i.json" &
        pids="$pids $!"
    done
    # shellcheck disable=SC2086
    wait $pids
    sleep 0.3
    python3 - "$dr_T" <<'PY'
import glob, json, sys
reps = [json.load(open(p)) for p in glob.glob(sys.argv[1] + "/r*.json")]
print(sum(r["records_sent"] for r in reps), sum(r["records_dropped"] for r in reps))
PY
}

# dr_warm SESSIONS: that many short sessions (about three buffers each), 8
# at a time, as a node's jobs come and go, so that what the measured load
# finds is a daemon that has served and ended sessions (issue 49).
dr_warm() {
    local left=$1 k
    while [ "$left" -gt 0 ]; do
        k=$((left < 8 ? left : 8))
        dr_load "$k" 50000 >/dev/null
        left=$((left - k))
    done
    # Their archives are removed so that the output dir holds the same
    # bytes either way (retention is not what is measured).
    rm -rf "${dr_out:?}"/archive/*
}

dr_stop() {
    kill -TERM "$dr_pid"
    wait "$dr_pid" || true
    dr_pid=
    rm -rf "$dr_T" "$dr_out"
}

# dr_measure CUPTIMOND WARM N RECORDS: a fresh daemon, WARM short sessions,
# then N producers of RECORDS each measured.  Prints "µs-per-record records
# dropped".
dr_measure() {
    local c0 c1 r
    dr_start "$1" || return 1
    [ "$2" -gt 0 ] && dr_warm "$2"
    c0=$(dr_cpu)
    r=$(dr_load "$3" "$4")
    c1=$(dr_cpu)
    dr_stop
    python3 -c 'import sys; t, c, n, d = map(int, sys.argv[1:]); print("%.3f %d %d" % (t / c * 1e6 / max(n, 1), n, d))' \
        "$((c1 - c0))" "$dr_clk" "${r%% *}" "${r#* }"
}
