#!/bin/bash
# NVTX by default on a real GPU (issue 18): a PyTorch process that sets no
# NVTX variable runs under the injected shim; a window over it must hold
# every torch.cuda.nvtx range pushed inside it, begin and end, by name, on
# the thread that pushed it, and the process must see NVTX_INJECTION64_PATH
# pointing at the libcupti the shim loaded (PyTorch's own copy).
# usage: OUT=DIR tests/gpu/nvtx-case.sh BUILD_DIR   (writes OUT/nvtx-report.txt)
set -u
B=$(cd "$1" && pwd)
OUT=${OUT:-$PWD/gpu-nvtx-out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/cuptimon-gpunvtx.XXXXXX)
P=$W/p.sock C=$W/c.sock
CTL="$B/cli/cuptimonctl --control-socket $C"
"$B/daemon/cuptimond" --socket "$P" --control-socket "$C" --output-dir "$W/out" 2>"$W/d.log" &
dpid=$!
trap 'kill $dpid 2>/dev/null' EXIT
for _ in $(seq 100); do $CTL status >/dev/null 2>&1 && break; sleep 0.1; done
REPORT=$OUT/nvtx-report.txt
env -u NVTX_INJECTION64_PATH CUPTIMON_SOCKET="$P" CUDA_INJECTION64_PATH="$B/client-lib/.libs/libcuptimon.so" \
    CTL="$CTL" timeout 240 "$PY" - "$W/res.json" >"$W/py.out" 2>&1 <<'PY'
import ctypes, json, os, subprocess, sys, threading, time
import torch
x = torch.randn(1024, 1024, device="cuda")
torch.cuda.synchronize()            # cuInit: the injected shim is in
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
nvtx_env = libc.getenv(b"NVTX_INJECTION64_PATH")
ctl = os.environ["CTL"].split()
b = subprocess.run(ctl + ["begin-window", "--pid", str(os.getpid()), "--json"],
                   capture_output=True, text=True, timeout=60)
time.sleep(0.3)
for i in range(20):
    torch.cuda.nvtx.range_push(f"nvtx-step-{i}")
    y = x @ x
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
time.sleep(0.2)
e = subprocess.run(ctl + ["end-window", "--json"], capture_output=True, text=True, timeout=120)
json.dump({"nvtx_env": nvtx_env.decode() if nvtx_env else None, "tid": threading.get_native_id(),
           "pid": os.getpid(), "begin": b.stdout + b.stderr, "end": e.stdout + e.stderr,
           "end_rc": e.returncode}, open(sys.argv[1], "w"))
PY
echo "python exit $?" >"$REPORT"
tail -5 "$W/py.out" >>"$REPORT"
"$PY" - "$W/res.json" >>"$REPORT" 2>&1 <<'PY'
import collections, gzip, json, sys
r = json.load(open(sys.argv[1]))
fails = []
def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)
print("NVTX_INJECTION64_PATH in the process:", r["nvtx_env"])
check(bool(r["nvtx_env"]) and "cupti" in r["nvtx_env"] and r["nvtx_env"].startswith("/"),
      "the shim pointed NVTX_INJECTION64_PATH at a libcupti file")
end = json.loads(r["end"][r["end"].index("{"):]) if "{" in r["end"] else {}
path = end.get("output", "")
op = gzip.open if path.endswith(".gz") else open
t = json.load(op(path, "rt")) if path else {"traceEvents": []}
nv = [e for e in t["traceEvents"] if e.get("cat") == "nvtx"]
begins = collections.Counter(e["name"] for e in nv if e.get("ph") == "b")
ends = collections.Counter(e["name"] for e in nv if e.get("ph") == "e")
want = {f"nvtx-step-{i}" for i in range(20)}
print("nvtx begins:", len(begins), "ends:", len(ends), "sample:", sorted(begins)[:3])
check(set(begins) >= want and all(begins[n] == 1 for n in want), "every range's begin, once, by name")
check(set(ends) >= want and all(ends[n] == 1 for n in want), "every range's end, once, by name")
check(all(e["tid"] == r["tid"] for e in nv if e["name"] in want), "on the thread that pushed it")
print("RESULT", "PASS" if not fails else "FAIL")
PY
tail -3 "$W/d.log" >>"$REPORT"
cat "$REPORT"
