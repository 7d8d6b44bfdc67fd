#!/usr/bin/env bash
# cuptimon's job-side GPU benchmark (issue 7): what a CUDA job pays for
# cuptimon, against no tracing and against the bare CUPTI floor, and against
# torch.profiler on a PyTorch loop.  Run from the repo root on the GPU host,
# after building the project and bench/gpu/build.sh:
#
#   OUT=/some/dir bench/gpu/run.sh BUILD_DIR
#
# Modes, interleaved run by run, BENCH_GPU_RUNS (10) runs each:
#   known-work:  a none | b bare CUPTI floor | bw bare floor + window kinds (b')
#                c cuptimon always-on | d cuptimon inside a trace window
#   PyTorch:     ta none | tb bare floor | tc cuptimon | tk torch.profiler
# cuptimond runs once for the whole benchmark on private sockets under a temp
# dir.  Writes OUT/bench-gpu.json (every run's figures, per-mode median, min,
# max, ratios, targets), OUT/bench-gpu.txt (the table) and OUT/bench-logs.txt.
# bench/gpu/plot.sh turns the JSON into docs/bench-overhead.png (on a machine
# with gnuplot).  Exit status: 0 when every run ran, targets met or not (the
# report says which); 1 when a run failed or the benchmark could not run;
# 2 for bad usage.  Every wait has a timeout; the whole thing is bounded by
# BENCH_GPU_HARD_S (default 450) and aims at BENCH_GPU_BUDGET_S (330) for
# its rounds.  See bench/gpu/bench.py for every knob; BENCH_GPU_DRYRUN=1
# runs the plumbing without a GPU (the libcupti test double's workload).
set -u

usage() {
    echo "usage: [OUT=DIR] $0 BUILD_DIR   (see the comment at the top of $0)" >&2
    exit 2
}
[ $# -eq 1 ] || usage
[ -d "$1" ] || { echo "run.sh: '$1' is not a directory" >&2; exit 2; }
B=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/bench-gpu-out}
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
HARD=${BENCH_GPU_HARD_S:-450}

# Short socket paths (sun_path holds 107 bytes).
W=$(mktemp -d /tmp/cuptimon-bench.XXXXXX) || exit 1

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
    local rc=$? p
    # bench.py stops the daemon itself; this is for when it was killed
    if [ -s "$W/daemon.pid" ]; then
        p=$(cat "$W/daemon.pid")
        if kill -0 "$p" 2>/dev/null && grep -q cuptimond "/proc/$p/cmdline" 2>/dev/null; then
            kill -KILL "$p" 2>/dev/null
        fi
    fi
    if [ "${BENCH_GPU_KEEP:-0}" = 1 ]; then
        echo "run.sh: work dir kept: $W"
    else
        rm -rf "$W"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PY=${BENCH_PYTHON:-python3}
command -v "$PY" >/dev/null 2>&1 || { echo "run.sh: $PY not found" >&2; exit 1; }
"$B/daemon/cuptimond" --version >/dev/null 2>&1 || {
    echo "run.sh: $B/daemon/cuptimond does not start: $("$B/daemon/cuptimond" --version 2>&1 | head -3)" \
         "(LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})" >&2
    { echo "cuptimon job-side GPU benchmark: FAIL (could not run)"
      echo "  $B/daemon/cuptimond does not start: $("$B/daemon/cuptimond" --version 2>&1 | head -3)"; } \
        >"$OUT/bench-gpu.txt"
    exit 1
}

# timeout(1) signals its whole process group: bench.py, its children and
# the daemon.
timeout -k 15 "$HARD" "$PY" "$here/bench.py" "$B" "$OUT" "$W"
rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "run.sh: bench.py ran past BENCH_GPU_HARD_S=$HARD s and was stopped (rc $rc)" >&2
    [ -s "$OUT/bench-gpu.txt" ] && echo "run.sh: OUT/bench-gpu.{json,txt} are from the last finished round" >&2
    printf '\nrun.sh: STOPPED after %s s (BENCH_GPU_HARD_S); the figures above are from the last finished round\n' \
        "$HARD" >>"$OUT/bench-gpu.txt"
    rc=1
fi
exit "$rc"
