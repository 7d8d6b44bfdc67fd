#!/bin/bash
# Held, never dropped, on a real GPU (issue 33): a workload runs one kernel
# of HOLD_S seconds (default 15) on a stream of its own while another stream
# launches a tiny kernel flat out (with a copy and a memset every 1000), under
# the shim with default settings.  CUPTI completes records in launch order,
# so everything launched meanwhile waits in buffers CUPTI holds; the pool
# must grow to keep it and give the memory back after.  Runs, one after the
# other, under one daemon:
#   control  no long kernel, 5 s: the launch rate and the job's memory as today
#   hold     the long kernel: status sampled every second (the running kernel
#            named), the job's VmRSS/RssShmem every 0.2 s
#   cap      CUPTIMON_POOL_MAX=96M, an 8 s kernel: CUPTI drops past the cap;
#            the drops must be counted and be all that is missing
# held-check.py then proves every kernel, copy and memset archived exactly
# once (the long kernel with its true duration), and reports the peak memory
# and the time to give it back.
# HELD_WORKLOADS="cuda torch" runs held-work.cu and/or held-torch.py (the
# same scenario as a PyTorch user writes it: torch.cuda._sleep on a side
# stream); default cuda.  HOLD_S sets the long kernel's seconds.
# usage: OUT=DIR tests/gpu/held-case.sh BUILD_DIR   (after tests/gpu/build.sh)
set -u
B=$(cd "$1" && pwd); here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-held-out}; mkdir -p "$OUT"
W=$(mktemp -d /tmp/cuptimon-held.XXXXXX)
P=$W/p.sock C=$W/c.sock
HOLD_S=${HOLD_S:-15}
ctl() { "$B/cli/cuptimonctl" --control-socket "$C" "$@"; }
# The daemon's defaults, but for the in-flight warning, which a 15 s run
# must reach to be seen (default 60 s).
printf '{"inflight_warn_s": 5}\n' >"$W/cuptimond.conf"
"$B/daemon/cuptimond" --socket "$P" --control-socket "$C" --output-dir "$W/out" \
    --config "$W/cuptimond.conf" --log-level info 2>>"$W/daemon.log" &
dpid=$!
# Stopped early (a timeout's TERM), what was gathered still comes back.
finish() {
    kill $dpid 2>/dev/null
    [ -d "$W" ] && tar -C "$W" -czf "$OUT/held-work.tgz" --exclude=out --exclude='*.trace.json' . 2>/dev/null && rm -rf "$W"
}
trap finish EXIT
trap 'echo "stopped by a signal" >&2; exit 143' TERM INT
for _ in $(seq 100); do ctl status >/dev/null 2>&1 && break; sleep 0.05; done
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:${CUDA_HOME:-/usr/local/cuda}/targets/x86_64-linux/lib

# run NAME ARGS...: the workload under the shim, sampled while it runs.
run() {
    local name=$1 t=0
    shift
    if [ "$wl" = torch ]; then
        set -- "${PYTHON:-python3}" "$here/held-torch.py" --report "$W/$name.json" "$@"
    else
        set -- "$here/build/held-work" --report "$W/$name.json" "$@"
    fi
    CUPTIMON_SOCKET=$P CUDA_INJECTION64_PATH=$B/client-lib/.libs/libcuptimon.so \
        "$@" >"$W/$name.out" 2>&1 &
    local w=$!
    (sleep 120; kill $w 2>/dev/null) &
    local dog=$!
    : >"$W/$name.mem"
    : >"$W/$name.status"
    while kill -0 $w 2>/dev/null; do
        awk -v t="$(date +%s%N)" '/^VmRSS:/ {r=$2} /^RssShmem:/ {s=$2} END {if (r) print t, r, s + 0}' \
            "/proc/$w/status" >>"$W/$name.mem" 2>/dev/null
        if [ $((t % 5)) -eq 0 ]; then
            ctl status --json 2>/dev/null | python3 -c '
import json, sys, time
d = json.load(sys.stdin)
for s in d["sessions"]:
    if s["pid"] == int(sys.argv[1]):
        print(json.dumps({"t": time.time_ns(), "in_flight": s.get("in_flight"), "pool": s.get("pool"),
                          "dropped_records": s.get("dropped_records")}))' $w >>"$W/$name.status"
        fi
        t=$((t + 1))
        sleep 0.2
    done
    wait $w
    echo "$name exit $?" >>"$W/exits.txt"
    kill $dog 2>/dev/null
    sleep 2 # the session's last buffers written
}

for wl in ${HELD_WORKLOADS:-cuda}; do
    run $wl-control --hold-s 0 --seconds 5
    run $wl-hold --hold-s "$HOLD_S" --seconds "$((HOLD_S + 3))"
    CUPTIMON_POOL_MAX=96M run $wl-cap --hold-s 8 --seconds 9
done
ctl status >"$W/status-last.txt" 2>&1
echo "status rc $?" >>"$W/exits.txt"
kill -TERM "$dpid"; wait "$dpid"; echo "daemon exit $?" >>"$W/exits.txt"; dpid=
# The sessions decoded side by side (millions of kernels each at the H100's
# launch rate).
for rep in "$W"/*-control.json "$W"/*-hold.json "$W"/*-cap.json; do
    [ -e "$rep" ] || continue
    name=$(basename "$rep" .json)
    pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$rep" 2>/dev/null)
    d=$(ls -d "$W"/out/archive/*-"$pid"-*/ 2>/dev/null | head -1)
    [ -n "$d" ] || continue
    cp "$d/meta.json" "$W/$name.meta.json"
    "$B/cli/cuptimonctl" decode "$d" -o "$W/$name.trace.json" --summary >"$W/$name.summary.json" \
        2>"$W/$name.decode.err" &
done
wait
python3 "$here/held-check.py" "$W" >"$OUT/held-report.txt" 2>&1
rc=$?
cat "$OUT/held-report.txt"
grep -E 'inflight|cap' "$W/daemon.log" >>"$OUT/held-report.txt"
exit $rc
