#!/bin/bash
# A trace window on a real GPU: known-work runs a long launch loop under the
# shim; a window is opened and closed in the middle; the window's trace
# must hold runtime API calls and the kernels they launched, linked by
# correlation, with demangled names, and nothing from before the start.
# usage: OUT=DIR tests/gpu/window-case.sh BUILD_DIR
set -u
B=$(cd "$1" && pwd); here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-window-out}; mkdir -p "$OUT"
W=$(mktemp -d /tmp/cuptimon-gpuwin.XXXXXX)
P=$W/p.sock C=$W/c.sock
ctl() { "$B/cli/cuptimonctl" --control-socket "$C" "$@"; }
"$B/daemon/cuptimond" --socket "$P" --control-socket "$C" --output-dir "$W/out" 2>"$W/d.log" &
dpid=$!
trap 'kill $dpid 2>/dev/null' EXIT
for _ in $(seq 100); do ctl status >/dev/null 2>&1 && break; sleep 0.1; done
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:${CUDA_HOME:-/usr/local/cuda}/targets/x86_64-linux/lib
CUPTIMON_SOCKET=$P CUDA_INJECTION64_PATH=$B/client-lib/.libs/libcuptimon.so \
    timeout 120 "$here/build/known-work" --kernels 600000 --graph-replays 2000 --no-nvtx \
    --report "$W/kw.json" --quiet &
kw=$!
for _ in $(seq 100); do
    [ "$(ctl status --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["sessions"]))')" -ge 1 ] && break
    sleep 0.1
done
sleep 0.5
ctl begin-window --all --json > "$W/begin.json"
sleep 0.4
ctl end-window --json > "$W/end.json"
wait $kw; echo "known-work exit $?" > "$OUT/window-report.txt"
kill -TERM $dpid; wait $dpid
python3 - "$W" >> "$OUT/window-report.txt" 2>&1 <<'PY'
import json, sys, collections
W = sys.argv[1]
end = json.load(open(f"{W}/end.json"))
t = json.load(open(end["output"]))
ev = [e for e in t["traceEvents"] if e.get("ph") == "X"]
cats = collections.Counter(e["cat"] for e in ev)
print("window", end["window"], "state", end["state"], "duration_s",
      (end["end_unix_ns"] - end["start_unix_ns"]) / 1e9)
print("events by category:", dict(cats))
api = {e["args"].get("correlation") for e in ev if e["cat"] == "cuda_runtime"}
kern = [e for e in ev if e["cat"] == "kernel"]
unlinked = [e for e in kern if e["args"].get("correlation") not in api]
names = collections.Counter(e["name"] for e in kern)
print("kernel names:", dict(names.most_common(8)))
print("kernels without their runtime call:", len(unlinked))
base = t["otherData"]["base_unix_ns"]
early = [e for e in ev if e["cat"] == "cuda_runtime" and base + float(e["ts"]) * 1000 < end["start_unix_ns"] - 1000]
print("runtime calls before the start:", len(early))
flows = sum(1 for e in t["traceEvents"] if e.get("ph") == "s")
print("flow arrows:", flows)
ok = cats["kernel"] > 0 and cats["cuda_runtime"] > 0 and not unlinked and not early and \
    any("<" in n or "::" in n for n in names)
print("RESULT:", "PASS" if ok else "FAIL")
PY
tail -3 "$W/d.log" >> "$OUT/window-report.txt"
cat "$OUT/window-report.txt"
