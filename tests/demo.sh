#!/bin/bash
# The README's main job: start cuptimond in the foreground on a private
# socket, run workloads under the shim, show status, open and close a trace
# window, flush, stop cleanly, show the archive, and end with the tables of
# what ran (cuptimonctl stats: kernels, processes) and three lines: where
# the trace is, how to open it, and the stats command for the archive.
# Usage: tests/demo.sh BUILD_DIR
# (CUPTIMON_DEMO_OUTPUT: where it writes, default BUILD_DIR/demo-output.)
set -eu
b=${1:?usage: demo.sh BUILD_DIR}
cd "$b"
demo=${CUPTIMON_DEMO_OUTPUT:-$b/demo-output}
rm -rf "$demo"
mkdir -p "$demo"
export CUPTIMON_SOCKET=$demo/producer.sock CUPTIMON_CONTROL_SOCKET=$demo/control.sock
shim=$b/client-lib/.libs/libcuptimon.so
ctl() { "$b/cli/cuptimonctl" "$@"; }

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "starting cuptimond (private sockets under $demo)"
"$b/daemon/cuptimond" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
    --output-dir "$demo/out" --flush-period 0.5 2>"$demo/daemon.log" &
dpid=$!
trap 'kill $dpid 2>/dev/null || true' EXIT
for _ in $(seq 50); do ctl status >/dev/null 2>&1 && break; sleep 0.1; done
ctl status >/dev/null || { cat "$demo/daemon.log"; exit 1; }

if [ -n "${CUPTIMON_DEMO_CMD:-}" ]; then
    say "running your workload under the shim: $CUPTIMON_DEMO_CMD"
    CUDA_INJECTION64_PATH=$shim CUPTIMON_LABEL=demo sh -c "$CUPTIMON_DEMO_CMD" &
    wpids=$!
else
    say "running two workloads under the shim (CUDA_INJECTION64_PATH=libcuptimon.so)"
    echo "(no GPU needed: they drive the libcupti test double, which emits records with"
    echo " CUPTI 13.0's real layouts; on a GPU node set CUPTIMON_DEMO_CMD to a CUDA program)"
    wpids=
    for r in 0 1; do
        CUDA_INJECTION64_PATH=$shim CUPTIMON_LABEL=demo RANK=$r WORLD_SIZE=2 \
            "$b/tests/fakecupti/cuptimon-workload" --kernels 150000 --rate 50000 \
            --report "$demo/workload-$r.json" &
        wpids="$wpids $!"
    done
fi
sleep 1
say "cuptimonctl status (while they run)"
ctl status
say "cuptimonctl begin-window --all (adds CPU API calls, annotations, overheads, ...)"
ctl begin-window --all
sleep 1
say "cuptimonctl end-window"
ctl end-window | tee "$demo/window.txt"
window_trace=$(sed -n 's/^  trace: //p' "$demo/window.txt")
say "cuptimonctl flush --wait-running (everything launched so far, running work included)"
ctl flush --wait-running
# shellcheck disable=SC2086
wait $wpids
say "cuptimonctl status (after they exited)"
ctl status
say "stopping cuptimond (SIGTERM: flush, finish writing, exit)"
kill -TERM $dpid
wait $dpid
trap - EXIT
tail -n 3 "$demo/daemon.log"
say "the archive"
find "$demo/out/archive" -maxdepth 2 | sort | sed 's/^/  /'
# The last screen: what ran, as tables, then where the trace is, how to
# open it, and the command for the tables.
trace=$window_trace
if ctl decode "$demo/out" -o "$demo/trace.json" -q 2>"$demo/decode.err"; then
    trace=$demo/trace.json
else
    echo "(offline decode not available: $(head -n1 "$demo/decode.err"))"
fi
say "what ran: cuptimonctl stats (GPU time per kernel, per process; from the archive)"
ctl stats "$demo/out" --report kernels,processes
echo
window_id=$(sed -n 's/^window \([0-9]*\):.*/\1/p' "$demo/window.txt" | head -n 1)
echo "trace:   $trace (the whole archive; window $window_id alone: $window_trace)"
echo "open it: https://ui.perfetto.dev (Open trace file), or chrome://tracing (Load)"
echo "tables:  $b/cli/cuptimonctl stats $demo/out/archive [--report all] [--format csv|json]"
