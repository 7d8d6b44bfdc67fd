#!/bin/bash
# Nothing lost at the edges, on a real GPU (issue 27): two processes keep
# long kernels running on several streams (long-work: one running and one
# queued per stream at all times, plus a memset and a copy per round) under
# the shim, while an operator opens and ends trace windows, flushes (plain
# and --wait-running), reloads the daemon, and stops and restarts it.  One
# process exits with work still running.  edges-check.py then checks that
# every kernel, copy and memset is in the archive exactly once with its
# true duration, and that each window holds exactly the work launched
# inside it, complete.
# usage: OUT=DIR tests/gpu/edges-case.sh BUILD_DIR   (after tests/gpu/build.sh)
set -u
B=$(cd "$1" && pwd); here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-edges-out}; mkdir -p "$OUT"
W=$(mktemp -d /tmp/cuptimon-edges.XXXXXX)
P=$W/p.sock C=$W/c.sock
KMS=${EDGES_KERNEL_MS:-40}
ctl() { "$B/cli/cuptimonctl" --control-socket "$C" "$@"; }
start_daemon() {
    "$B/daemon/cuptimond" --socket "$P" --control-socket "$C" --output-dir "$W/out" \
        --log-level info 2>>"$W/d$1.log" &
    dpid=$!
    for _ in $(seq 100); do ctl status >/dev/null 2>&1 && return 0; sleep 0.05; done
    echo "daemon $1 did not start" >&2
    return 1
}
stamp() { echo "$1 $(date +%s%N)" >>"$W/timeline.txt"; }
dpid=
trap 'kill $dpid 2>/dev/null' EXIT
start_daemon 1 || exit 1
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:${CUDA_HOME:-/usr/local/cuda}/targets/x86_64-linux/lib
export CUPTIMON_SOCKET=$P CUDA_INJECTION64_PATH=$B/client-lib/.libs/libcuptimon.so
CUPTIMON_LABEL=A timeout 60 "$here/build/long-work" --report "$W/A.json" --streams 3 \
    --kernel-ms "$KMS" --seconds 7 >"$W/A.out" 2>&1 &
apid=$!
CUPTIMON_LABEL=B timeout 60 "$here/build/long-work" --report "$W/B.json" --streams 2 \
    --kernel-ms "$((KMS + 5))" --seconds 7.2 --no-sync-exit >"$W/B.out" 2>&1 &
bpid=$!
unset CUDA_INJECTION64_PATH
for _ in $(seq 200); do
    [ "$(ctl status --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["sessions"]))')" -ge 2 ] && break
    sleep 0.05
done
stamp ready
sleep 1.0
ctl begin-window --all --json >"$W/w1-begin.json"; stamp w1-begin
sleep 1.2
ctl end-window --json >"$W/w1-end.json"; stamp w1-end
sleep 0.4
ctl flush --wait-running --timeout 5 --json >"$W/flush-wait.json"; stamp flush-wait
sleep 0.3
ctl flush --json >"$W/flush-plain.json"; stamp flush-plain
ctl reload >"$W/reload.txt" 2>&1; stamp reload
sleep 0.3
ctl begin-window --label A --json >"$W/w2-begin.json"; stamp w2-begin
sleep 0.8
ctl end-window --json >"$W/w2-end.json"; stamp w2-end
sleep 0.3
kill -TERM "$dpid"; wait "$dpid"; stamp d1-stopped
sleep 0.3
start_daemon 2 || exit 1; stamp d2-started
sleep 0.8
ctl begin-window --all --json >"$W/w3-begin.json"; stamp w3-begin
sleep 0.8
ctl end-window --json >"$W/w3-end.json"; stamp w3-end
wait "$apid"; echo "A exit $?" >"$W/exits.txt"
wait "$bpid"; echo "B exit $?" >>"$W/exits.txt"
stamp workloads-done
sleep 1
ctl flush --json >"$W/flush-last.json"
ctl status --json >"$W/status-last.json"
kill -TERM "$dpid"; wait "$dpid"; dpid=
for d in "$W"/out/archive/*/; do
    "$B/cli/cuptimonctl" decode "$d" -o "$W/$(basename "$d").trace.json" --summary \
        >"$W/$(basename "$d").summary.json" 2>"$W/$(basename "$d").decode.err"
done
python3 "$here/edges-check.py" "$W" >"$OUT/edges-report.txt" 2>&1
rc=$?
cat "$OUT/edges-report.txt"
tar -C "$W" -czf "$OUT/edges-work.tgz" --exclude=out . 2>/dev/null
exit $rc
