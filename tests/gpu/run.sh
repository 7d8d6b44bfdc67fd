#!/usr/bin/env bash
# cuptimon's GPU suite: the real cuptimond, cuptimonctl and shim against real
# CUPTI on a CUDA machine.  Run from anywhere, after building the project and
# tests/gpu/build.sh:
#
#   OUT=/some/dir tests/gpu/run.sh BUILD_DIR
#
# It starts cuptimond on private sockets under a temp dir, runs the cases
# (known-work alone; known-work with extra activity kinds; 4 known-work at
# once; torch-loop.py under the shim; the same under torch.profiler with and
# without the shim; known-work timed with and without the shim, interleaved),
# flushes and asks for status while the processes still run, stops the daemon
# with SIGTERM, decodes every session with `cuptimonctl decode`, and has
# check.py compare it all with what the programs say they launched.  Writes
# OUT/gpu-report.json and OUT/gpu-report.txt (every check), the daemon's log
# tail, the programs' logs and three traces, gzipped (7 files, no folders).
# Exits 0 only when every hard check passed; never waits without a timeout.
#
# Environment:
#   OUT                      where results go (default: ./gpu-suite-out)
#   CUPTIMON_GPU_DRYRUN=1    no GPU: the libcupti test double's workload
#                            (BUILD_DIR/tests/fakecupti/cuptimon-workload, built
#                            by `make check` or `make tests/fakecupti/cuptimon-workload`)
#                            stands in for known-work and for the torch loop
#   CUPTIMON_GPU_BUDGET_S    wall-clock budget for the cases (default 420)
#   CUPTIMON_GPU_SKIP        space-separated case kinds to skip (known-alone
#                            known-extra-kinds known-4 torch-shim
#                            torch-profile-shim torch-profile-noshim overhead)
#   CUPTIMON_GPU_STRICT=1    make case 05's status-cupti-shared hard (status
#                            says the shim kept CUPTI, shared); its trace
#                            against case 06's, per name and per step, is
#                            always hard
#   CUPTIMON_GPU_KEEP=1      keep the work dir (its path is printed)
#   PYTHON                   the python with torch (default python3)
#   CUDA_HOME                default /usr/local/cuda (to find libcupti.so.13)
set -u

usage() {
    echo "usage: [OUT=DIR] $0 BUILD_DIR   (see the comment at the top of $0)" >&2
    exit 2
}
[ $# -eq 1 ] || usage
[ -d "$1" ] || { echo "run.sh: '$1' is not a directory" >&2; exit 2; }
B=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-suite-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DRY=${CUPTIMON_GPU_DRYRUN:-0}
BUDGET=${CUPTIMON_GPU_BUDGET_S:-420}
SKIP=" ${CUPTIMON_GPU_SKIP:-} "
PY=${PYTHON:-python3}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
T0=$(date +%s)

CUPTIMOND=$B/daemon/cuptimond
CTL=$B/cli/cuptimonctl
SHIM=$B/client-lib/.libs/libcuptimon.so
KW=$here/build/known-work
KW_TABLE=$here/build/known-work.kernels.json
TL=$here/torch-loop.py
CHECK=$here/check.py
WORKLOAD=$B/tests/fakecupti/cuptimon-workload

# Short socket paths (sun_path holds 107 bytes).
W=$(mktemp -d /tmp/cuptimon-gpu.XXXXXX) || exit 1
PSOCK=$W/p.sock
CSOCK=$W/c.sock
DPID=

# Nothing of the caller's must leak into the cases.
unset CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH CUPTIMON_LIBCUPTI_PATH CUPTIMON_ACTIVITIES \
      CUPTIMON_LABEL RANK LOCAL_RANK WORLD_SIZE SLURM_JOB_ID TORCHELASTIC_RUN_ID
case ${LD_PRELOAD:-} in *libcuptimon*) unset LD_PRELOAD ;; esac

say() { printf '[gpu-suite +%3ds] %s\n' "$(( $(date +%s) - T0 ))" "$*"; }
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
# tmo DEFAULT: a timeout that keeps the suite inside its budget.
tmo() {
    local l
    l=$(( $(left) - 20 ))
    if [ "$l" -lt "$1" ]; then
        [ "$l" -lt 5 ] && l=5
        echo "$l"
    else
        echo "$1"
    fi
}
ctl() { timeout -k 5 45 "$CTL" --control-socket "$CSOCK" --timeout 30 "$@"; }

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
    local rc=$? f p c
    for f in "$W"/cases/*/p*/bgpid; do
        [ -e "$f" ] || continue
        p=$(cat "$f")
        if kill -0 "$p" 2>/dev/null; then
            # the subshell's children (timeout and the program), then itself
            for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do
                kill -KILL "$c" 2>/dev/null
            done
            kill -KILL "$p" 2>/dev/null
        fi
    done
    if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
        kill -KILL "$DPID" 2>/dev/null
    fi
    if [ "${CUPTIMON_GPU_KEEP:-0}" = 1 ]; then
        echo "run.sh: work dir kept: $W"
    else
        rm -rf "$W"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fatal() {
    say "FATAL: $*"
    { echo "cuptimon GPU suite: FAIL (could not run)"; echo "  $*"; echo
      echo "0 passed, 1 failed"; } >"$OUT/gpu-report.txt"
    [ -f "$W/daemon.log" ] && tail -n 200 "$W/daemon.log" >"$OUT/daemon-log.txt"
    exit 1
}

for f in "$CUPTIMOND" "$CTL" "$SHIM" "$CHECK"; do
    [ -e "$f" ] || fatal "$f is missing (build the project in $B first)"
done
if [ "$DRY" = 1 ]; then
    [ -x "$WORKLOAD" ] || fatal "$WORKLOAD is missing: make -C $B tests/fakecupti/cuptimon-workload"
else
    [ -x "$KW" ] || fatal "$KW is missing: run tests/gpu/build.sh first (and carry tests/gpu/build)"
fi
"$CUPTIMOND" --version >/dev/null 2>&1 ||
    fatal "$CUPTIMOND does not start: $("$CUPTIMOND" --version 2>&1 | head -3) (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"

# ---- the machine --------------------------------------------------------------
mkdir -p "$W/env" "$W/cases" "$W/decode"
{
    echo "dryrun=$DRY"
    echo "strict=${CUPTIMON_GPU_STRICT:-0}"
    echo "build_dir=$B"
    echo "started_unix=$T0"
    echo "hostname=$(hostname 2>/dev/null)"
    echo "ld_library_path=${LD_LIBRARY_PATH:-}"
} >"$W/suite.env"
uname -a >"$W/env/uname.txt" 2>&1
if command -v nvidia-smi >/dev/null 2>&1; then
    timeout 30 nvidia-smi -L >"$W/env/nvidia-smi-L.txt" 2>&1
    timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,pci.bus_id \
        --format=csv,noheader >"$W/env/driver.txt" 2>&1
    timeout 30 nvidia-smi >"$W/env/nvidia-smi.txt" 2>&1
else
    echo "nvidia-smi not found" >"$W/env/nvidia-smi-L.txt"
fi

# known-work does not link libcupti: the shim dlopens libcupti.so.13 by
# soname.  Where the loader cannot find it, point LD_LIBRARY_PATH at the
# toolkit's copy for known-work only (never for python: torch brings its own).
KW_LDPATH=${LD_LIBRARY_PATH:-}
CUPTI_LIB=
if [ "$DRY" != 1 ]; then
    CUPTI_LIB=$(ldconfig -p 2>/dev/null | awk '/libcupti\.so\.13 / {print $NF; exit}')
    if [ -z "$CUPTI_LIB" ]; then
        for d in "$CUDA_HOME/targets/x86_64-linux/lib" "$CUDA_HOME/lib64" "$CUDA_HOME/extras/CUPTI/lib64"; do
            if [ -e "$d/libcupti.so.13" ]; then
                CUPTI_LIB=$d/libcupti.so.13
                KW_LDPATH=$d${KW_LDPATH:+:$KW_LDPATH}
                echo "cupti_ld_path_added=$d" >>"$W/suite.env"
                break
            fi
        done
    fi
    echo "libcupti=${CUPTI_LIB:-not found}" >>"$W/suite.env"
    [ -n "$CUPTI_LIB" ] || say "WARNING: libcupti.so.13 not found; the shim will not trace known-work"
fi

# ---- the daemon ----------------------------------------------------------------
"$CUPTIMOND" --socket "$PSOCK" --control-socket "$CSOCK" --output-dir "$W/out" \
    2>>"$W/daemon.log" &
DPID=$!
up=0
for _ in $(seq 1 100); do
    if ctl status --json >/dev/null 2>&1; then up=1; break; fi
    kill -0 "$DPID" 2>/dev/null || break
    sleep 0.1
done
[ "$up" = 1 ] || fatal "cuptimond did not answer on $CSOCK within 10 s: $(tail -n 5 "$W/daemon.log")"
echo "daemon_started=1" >>"$W/suite.env"
say "cuptimond pid $DPID up; work dir $W; ${DRY:+dry run=$DRY}"

# CUPTIMON_GPU_MODE=preload: the shim through LD_PRELOAD (it then shares
# CUPTI with torch.profiler), else through CUDA_INJECTION64_PATH.
if [ "${CUPTIMON_GPU_MODE:-inject}" = preload ]; then
    SHIM_ENV=(LD_PRELOAD="$SHIM" CUPTIMON_SOCKET="$PSOCK")
else
    SHIM_ENV=(CUDA_INJECTION64_PATH="$SHIM" CUPTIMON_SOCKET="$PSOCK")
fi
DRY_NAMES=
[ "$DRY" = 1 ] && DRY_NAMES=$("$PY" "$CHECK" kernel-names "$KW_TABLE")

# ---- process helpers ---------------------------------------------------------------
# start_proc DIR TIMEOUT [VAR=VALUE...] CMD [ARG...]: runs it in the
# background under timeout(1); DIR gets cmd, stdout, stderr, rc, and the
# CLOCK_REALTIME ns around it (wall_start_ns, wall_end_ns).
start_proc() {
    local d=$1 t=$2
    shift 2
    mkdir -p "$d"
    printf '%q ' "$@" >"$d/cmd"
    echo >>"$d/cmd"
    date +%s%N >"$d/wall_start_ns"
    (
        timeout -k 5 "$t" env "$@" >"$d/stdout" 2>"$d/stderr" </dev/null
        echo $? >"$d/rc.tmp"
        date +%s%N >"$d/wall_end_ns"
        mv "$d/rc.tmp" "$d/rc"
    ) &
    echo $! >"$d/bgpid"
}

# wait_proc DIR MAX_S: until the process of DIR ended (bounded: timeout(1)
# already bounds it; MAX_S is a second line of defence).
wait_proc() {
    local d=$1 n
    n=$(( $2 * 20 ))
    while [ ! -e "$d/rc" ] && [ "$n" -gt 0 ]; do
        sleep 0.05
        n=$((n - 1))
    done
    wait "$(cat "$d/bgpid")" 2>/dev/null
    [ -e "$d/rc" ] || echo 124 >"$d/rc"
    [ "$DRY" = 1 ] && ready "$d"
    return 0
}

# ready DIR: 0 once the program's report exists (dry runs: once the
# workload's raw report could be turned into one).
ready() {
    local d=$1
    [ -e "$d/report.json" ] && return 0
    if [ "$DRY" = 1 ] && [ -s "$d/raw.json" ]; then
        local args=()
        read -r -a args <"$d/adapt.args"
        "$PY" "$CHECK" adapt-workload "$d/raw.json" "$KW_TABLE" "$d/report.json" "${args[@]}" \
            >/dev/null 2>&1 && return 0
    fi
    return 1
}

# wait_ready MAX_S DIR...: until every DIR is ready or its process ended.
wait_ready() {
    local n d all
    n=$(( $1 * 10 ))
    shift
    while [ "$n" -gt 0 ]; do
        all=1
        for d in "$@"; do
            ready "$d" || { [ -e "$d/rc" ] || all=0; }
        done
        [ "$all" = 1 ] && return 0
        sleep 0.1
        n=$((n - 1))
    done
    return 1
}

# control CASE_DIR: what the daemon says while the case's processes linger.
control() {
    ctl flush --forced --timeout 10 --json >"$1/flush.json" 2>"$1/flush.stderr"
    echo $? >"$1/flush.rc"
    ctl status --json >"$1/status-during.json" 2>"$1/status.stderr"
}

# known PROC_DIR TIMEOUT LINGER_MS SHIM [VAR=VALUE...] -- [ARGS...]: starts
# known-work (or, in a dry run, the double's workload) with ARGS.  SHIM: 0
# none, 1 the shim with CUPTIMON_DEBUG=1, q the shim without diagnostics.
known() {
    local d=$1 t=$2 linger=$3 shim=$4
    shift 4
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    mkdir -p "$d"
    case $shim in
        1) envs+=("${SHIM_ENV[@]}" CUPTIMON_DEBUG=1) ;;
        q) envs+=("${SHIM_ENV[@]}"); shim=1 ;;
    esac
    printf 'shim=%s\n' "$shim" >"$d/proc.env"
    local e
    for e in "${envs[@]}"; do
        case $e in
            CUPTIMON_LABEL=*) echo "label=${e#*=}" >>"$d/proc.env" ;;
            RANK=*) echo "rank=${e#*=}" >>"$d/proc.env" ;;
        esac
    done
    if [ "$DRY" = 1 ]; then
        # the double's workload: the kernel table's names, 2 streams
        local graph="" adapt="--every 50,70"
        case " $* " in *" --dry-graph "*) graph="--graph-id 7"; adapt="$adapt --graph" ;; esac
        echo "$adapt" >"$d/adapt.args"
        # shellcheck disable=SC2086  # graph is empty or two words
        start_proc "$d" "$t" "${envs[@]}" "$WORKLOAD" --kernels "${DRY_KERNELS:-700}" \
            --names "$DRY_NAMES" --streams 2 --memcpy-every 50 --memset-every 70 \
            $graph --report "$d/raw.json" --linger-ms "$linger" --quiet
    else
        local args=()
        for e in "$@"; do [ "$e" = --dry-graph ] || args+=("$e"); done
        start_proc "$d" "$t" LD_LIBRARY_PATH="$KW_LDPATH" "${envs[@]}" "$KW" "${args[@]}" \
            --report "$d/report.json" --linger-ms "$linger"
    fi
}

# torch PROC_DIR TIMEOUT SHIM(0|1) PROFILE(0|1): torch-loop.py (dry runs:
# the workload, reported as a torch loop, with a synthetic profiler trace).
torch_run() {
    local d=$1 t=$2 shim=$3 prof=$4
    mkdir -p "$d"
    local envs=(CUPTIMON_LABEL="torch-$shim$prof")
    [ "$shim" = 1 ] && envs+=("${SHIM_ENV[@]}" CUPTIMON_DEBUG=1)
    printf 'shim=%s\nprofile=%s\nlabel=torch-%s%s\n' "$shim" "$prof" "$shim" "$prof" >"$d/proc.env"
    if [ "$DRY" = 1 ]; then
        local adapt="--torch"
        [ "$prof" = 1 ] && adapt="$adapt --trace $d/torch-trace.json"
        echo "$adapt" >"$d/adapt.args"
        start_proc "$d" "$t" "${envs[@]}" "$WORKLOAD" --kernels "${DRY_KERNELS:-700}" --streams 1 \
            --names "$DRY_NAMES" \
            --report "$d/raw.json" --linger-ms 2000 --quiet
    else
        local args=(--steps 20 --warmup 3 --report "$d/report.json" --linger-s 2)
        [ "$prof" = 1 ] && args+=(--profile --torch-trace "$d/torch-trace.json")
        start_proc "$d" "$t" "${envs[@]}" "$PY" "$TL" "${args[@]}"
    fi
}

# case_begin NN KIND DESCRIPTION NEED_S: makes the case dir (in $CD) or
# marks it skipped; returns 1 when skipped.
case_begin() {
    CD=$W/cases/$1-$2
    mkdir -p "$CD"
    printf 'kind=%s\ndesc=%s\n' "$2" "$3" >"$CD/case.env"
    case $SKIP in
        *" $2 "*) echo "skipped=skipped by CUPTIMON_GPU_SKIP" >>"$CD/case.env"; say "skip $2"; return 1 ;;
    esac
    if [ "$(left)" -lt "$4" ]; then
        echo "skipped=budget: $(left) s left, the case needs about $4 s" >>"$CD/case.env"
        echo "skip_fail=1" >>"$CD/case.env"
        say "skip $2: out of time"
        return 1
    fi
    say "case $1 $2: $3"
    return 0
}

status_after() { ctl status --json >"$CD/status-after.json" 2>/dev/null; }

# ---- 1. known-work alone ------------------------------------------------------------
KWARGS=(--kernels 700 --graph-replays 10 --memcpys 4 --memsets 4)
if case_begin 01 known-alone "known-work alone under the shim" 30; then
    known "$CD/p0" "$(tmo 90)" 2500 1 CUPTIMON_LABEL=known-alone RANK=0 -- "${KWARGS[@]}"
    wait_ready "$(tmo 60)" "$CD/p0"
    control "$CD"
    wait_proc "$CD/p0" 100
    status_after
    say "  exit $(cat "$CD/p0/rc"): $(head -c 300 "$CD/p0/stdout")"
fi

# ---- 1b. with more activity kinds (runtime API, NVTX markers, external correlation)
if case_begin 02 known-extra-kinds "known-work with runtime,marker,external_correlation kinds" 30; then
    kinds=kernel,memcpy,memset,runtime,marker,external_correlation
    extra=(CUPTIMON_LABEL=known-extra RANK=0 CUPTIMON_ACTIVITIES="$kinds")
    [ -n "$CUPTI_LIB" ] && extra+=(NVTX_INJECTION64_PATH="$CUPTI_LIB")
    known "$CD/p0" "$(tmo 90)" 2500 1 "${extra[@]}" -- "${KWARGS[@]}"
    wait_ready "$(tmo 60)" "$CD/p0"
    control "$CD"
    wait_proc "$CD/p0" 100
    status_after
    say "  exit $(cat "$CD/p0/rc")"
fi

# ---- 2. four at once ---------------------------------------------------------------------
if case_begin 03 known-4 "4 known-work processes at once" 40; then
    echo "procs=4" >>"$CD/case.env"
    for r in 0 1 2 3; do
        g=(--kernels 1400 --graph-replays 20 --memcpys 8 --memsets 8)
        [ "$r" = 3 ] && g+=(--dry-graph) # dry runs: this one's kernels are graph kernels
        known "$CD/p$r" "$(tmo 120)" 6000 1 CUPTIMON_LABEL="known-4-r$r" RANK="$r" LOCAL_RANK="$r" \
            WORLD_SIZE=4 -- "${g[@]}"
    done
    wait_ready "$(tmo 90)" "$CD/p0" "$CD/p1" "$CD/p2" "$CD/p3"
    control "$CD"
    for r in 0 1 2 3; do wait_proc "$CD/p$r" 130; done
    status_after
    say "  exits $(cat "$CD"/p*/rc | tr '\n' ' ')"
fi

# ---- 3-5. PyTorch -------------------------------------------------------------------------
torch_ok=1
if [ "$DRY" != 1 ]; then
    if ! timeout -k 5 "$(tmo 180)" "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)' \
        >"$W/env/torch-import.txt" 2>&1; then
        torch_ok=0
        say "torch is not usable in $PY: $(tail -n 2 "$W/env/torch-import.txt")"
    fi
fi
torch_case() {
    local nn=$1 kind=$2 desc=$3 shim=$4 prof=$5
    if [ "$torch_ok" != 1 ]; then
        mkdir -p "$W/cases/$nn-$kind"
        printf 'kind=%s\ndesc=%s\nskipped=torch is not usable in %s: %s\nskip_warn=1\n' "$kind" "$desc" \
            "$PY" "$(tail -n 1 "$W/env/torch-import.txt" | tr -d '\n')" >"$W/cases/$nn-$kind/case.env"
        return
    fi
    case_begin "$nn" "$kind" "$desc" 60 || return
    torch_run "$CD/p0" "$(tmo 240)" "$shim" "$prof"
    wait_ready "$(tmo 240)" "$CD/p0"
    [ "$shim" = 1 ] && control "$CD"
    wait_proc "$CD/p0" 250
    [ "$shim" = 1 ] && status_after
    say "  exit $(cat "$CD/p0/rc"): $(tail -c 300 "$CD/p0/stdout")"
}
torch_case 04 torch-shim "torch-loop.py under the shim" 1 0
torch_case 05 torch-profile-shim "torch-loop.py --profile (torch.profiler) under the shim" 1 1
torch_case 06 torch-profile-noshim "torch-loop.py --profile without the shim (reference trace)" 0 1

# ---- 6. overhead: ABAB, 5 each -------------------------------------------------------------
OVARGS=(--kernels 7000 --graph-replays 100 --memcpys 16 --memsets 16 --no-nvtx --quiet)
if case_begin 07 overhead "known-work timed without (A) and with (B) the shim, ABAB x5" 60; then
    echo "args=${OVARGS[*]}" >>"$CD/case.env"
    i=0
    for _ in 1 2 3 4 5; do
        for s in 0 1; do
            p=$(printf '%s/p%02d' "$CD" "$i")
            [ "$s" = 1 ] && s=q
            known "$p" "$(tmo 60)" 0 "$s" CUPTIMON_LABEL="overhead-$i" -- "${OVARGS[@]}"
            wait_proc "$p" 70
            i=$((i + 1))
        done
    done
    say "  exits $(cat "$CD"/p*/rc | tr '\n' ' ')"
fi

# ---- stop, decode, check ----------------------------------------------------------------------
ctl status --json >"$W/status-final.json" 2>/dev/null
kill -TERM "$DPID" 2>/dev/null
drc=
for _ in $(seq 1 450); do
    if ! kill -0 "$DPID" 2>/dev/null; then
        wait "$DPID"
        drc=$?
        break
    fi
    sleep 0.1
done
if [ -z "$drc" ]; then
    say "cuptimond did not stop within 45 s of SIGTERM: killed"
    kill -KILL "$DPID" 2>/dev/null
    wait "$DPID" 2>/dev/null
    drc=137
fi
DPID=
echo "$drc" >"$W/daemon.rc"
say "cuptimond stopped: exit $drc"

if "$CTL" decode --help >/dev/null 2>&1; then
    echo "available=1" >"$W/decode/decode.env"
    for d in "$W"/out/archive/*/; do
        [ -e "$d/meta.json" ] || continue
        n=$(basename "$d")
        o=$W/decode/$n
        # the documented order first (ARCHIVE_DIR, then options) ...
        timeout -k 5 120 "$CTL" decode "$d" -o "$o.trace.json" --summary --summary-out "$o.summary.json" \
            >"$o.stdout" 2>"$o.stderr"
        rc=$?
        if [ "$rc" = 2 ]; then
            # ... then options first, and say that the documented one failed
            grep -q . "$o.stderr" && { echo "argorder_failed=1"; echo "argorder_error=$(head -1 "$o.stderr")"; } \
                >>"$W/decode/decode.env"
            timeout -k 5 120 "$CTL" decode -o "$o.trace.json" --summary --summary-out "$o.summary.json" "$d" \
                >"$o.stdout" 2>"$o.stderr"
            rc=$?
        fi
        echo "$rc" >"$o.rc"
    done
else
    { echo "available=0"; echo "why=$("$CTL" decode --help 2>&1 | head -1)"; } >"$W/decode/decode.env"
fi
say "decoded $(find "$W/decode" -name '*.rc' | wc -l) session(s)"

"$PY" "$CHECK" check "$W" "$OUT" >"$W/check.out" 2>&1
crc=$?
if [ ! -s "$OUT/gpu-report.txt" ] || { [ "$crc" != 0 ] && [ "$crc" != 1 ]; }; then
    { echo "cuptimon GPU suite: FAIL (check.py exited $crc)"; cat "$W/check.out"; echo
      echo "0 passed, 1 failed"; } >"$OUT/gpu-report.txt"
    crc=1
fi

# ---- what comes back (at most 7 files, no folders) -------------------------------------
tail -n 600 "$W/daemon.log" >"$OUT/daemon-log.txt" 2>/dev/null
{
    for f in "$W"/env/*.txt "$W/suite.env"; do
        [ -e "$f" ] && { echo "=== $(basename "$f")"; cat "$f"; }
    done
    for p in "$W"/cases/*/p*/; do
        [ -d "$p" ] || continue
        echo
        echo "=== ${p#"$W"/cases/} rc=$(cat "$p/rc" 2>/dev/null)"
        echo "cmd: $(cat "$p/cmd" 2>/dev/null)"
        echo "--- stdout (tail)"; tail -n 15 "$p/stdout" 2>/dev/null
        echo "--- stderr (tail)"; tail -n 80 "$p/stderr" 2>/dev/null
    done
    for c in "$W"/cases/*/; do
        for f in "$c"flush.json "$c"status-during.json "$c"flush.stderr "$c"status.stderr; do
            [ -s "$f" ] && { echo; echo "=== ${f#"$W"/cases/}"; head -c 20000 "$f"; }
        done
    done
    echo; echo "=== check.py output"; cat "$W/check.out"
} >"$OUT/logs.txt" 2>&1

# put SRC NAME: copies a trace into OUT as NAME.gz (as NAME where there is
# no gzip); skipped when over 16 MiB.
put() {
    [ -s "$1" ] || return 0
    local dst=$OUT/$2
    if command -v gzip >/dev/null 2>&1; then
        dst=$dst.gz
        gzip -c "$1" >"$dst"
    else
        cp "$1" "$dst"
    fi
    if [ "$(stat -c %s "$dst")" -gt $((16 << 20)) ]; then
        rm -f "$dst"
        say "$2: over 16 MiB, not kept"
    fi
}
session_of() { # session_of CASE_DIR: the decoded trace of its p0's session
    local pid f
    pid=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$1/p0/report.json" 2>/dev/null) || return 0
    for f in "$W"/decode/*-"$pid"-*.trace.json; do
        [ -e "$f" ] && { echo "$f"; return 0; }
    done
}
put "$(session_of "$W/cases/01-known-alone")" known-work.trace.json
put "$(session_of "$W/cases/04-torch-shim")" torch-cuptimon.trace.json
put "$W/cases/05-torch-profile-shim/p0/torch-trace.json" torch-profiler-with-shim.trace.json

say "results in $OUT: $(cd "$OUT" && printf '%s ' *)"
echo
# the verdict, the failures (hard and soft) and the closing count
awk '/^cuptimon GPU suite|^[0-9]+ passed/ {print; next}
     /^  (FAIL|WARN) / {print; d = 1; next}
     /^  [A-Z]+ / {d = 0}
     /^       / && d {print}' "$OUT/gpu-report.txt" | head -c 9000
exit "$crc"
