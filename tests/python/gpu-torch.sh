#!/bin/bash
# The Python package end to end on a GPU with PyTorch: a private cuptimond,
# then tests/python/gpu_torch_loop.py twice, once with the shim injected by
# the CUDA driver (CUDA_INJECTION64_PATH) and once loaded by
# cuptimon.start_collection() (CUPTIMON_LIB).  Not part of make check.
# usage: OUT=DIR [PYTHON=python3] [DAEMON_LD_LIBRARY_PATH=DIRS] [SHIM_LD_LIBRARY_PATH=DIRS] \
#        tests/python/gpu-torch.sh BUILD_DIR
# (the *_LD_LIBRARY_PATH: where the daemon's and the shim's libraries are, on a
# host without the development packages; the shim needs libjson-c.so.5)
set -u
B=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
PY=${PYTHON:-python3}
OUT=${OUT:-$PWD/gpu-python-out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/cuptimon-gpupy.XXXXXX)
export CUPTIMON_SOCKET=$W/p.sock CUPTIMON_CONTROL_SOCKET=$W/c.sock
unset CUDA_INJECTION64_PATH CUPTIMON_LIB LD_PRELOAD
LD_LIBRARY_PATH=${DAEMON_LD_LIBRARY_PATH:-${LD_LIBRARY_PATH:-}} \
    "$B/daemon/cuptimond" --socket "$CUPTIMON_SOCKET" --control-socket "$CUPTIMON_CONTROL_SOCKET" \
    --output-dir "$W/out" 2>"$W/daemon.log" &
dpid=$!
trap 'kill -KILL $dpid 2>/dev/null; tail -n 60 "$W/daemon.log" > "$OUT/daemon-log-tail.txt"' EXIT
export PYTHONPATH=$src/python PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export LD_LIBRARY_PATH=${SHIM_LD_LIBRARY_PATH:+$SHIM_LD_LIBRARY_PATH:}${LD_LIBRARY_PATH:-}
for _ in $(seq 100); do "$PY" -m cuptimon status >/dev/null 2>&1 && break; sleep 0.1; done
"$PY" -m cuptimon status || { echo "FAIL: cuptimond did not start"; exit 1; }
# The shim uses the libcupti already in the process (PyTorch's, when torch
# loads one at import); else point it at one.
if ! "$PY" -c 'import sys, torch; sys.exit(0 if any("libcupti" in l for l in open("/proc/self/maps")) else 1)'; then
    cupti=$("$PY" - <<'PY'
import glob, os, site, sys
dirs = site.getsitepackages() + [site.getusersitepackages()]
pats = [os.path.join(d, "nvidia", "**", "libcupti.so*") for d in dirs]
pats += [os.environ.get("CUDA_HOME", "/usr/local/cuda") + s for s in
         ("/extras/CUPTI/lib64/libcupti.so.13", "/targets/x86_64-linux/lib/libcupti.so.13")]
for p in pats:
    hits = sorted(glob.glob(p, recursive=True))
    if hits:
        print(hits[0]); sys.exit(0)
PY
)
    [ -n "$cupti" ] && export CUPTIMON_LIBCUPTI_PATH=$cupti
fi
echo "libcupti for the shim: ${CUPTIMON_LIBCUPTI_PATH:-the one torch loads}"
rc=0
echo "=== injected"
CUDA_INJECTION64_PATH=$B/client-lib/.libs/libcuptimon.so WIN_DIR=$W/win-injected \
    timeout 300 "$PY" "$here/gpu_torch_loop.py" injected "$OUT/injected.json" || rc=1
echo "=== loaded by start_collection"
CUPTIMON_LIB=$B/client-lib/.libs/libcuptimon.so WIN_DIR=$W/win-loaded \
    timeout 300 "$PY" "$here/gpu_torch_loop.py" loaded "$OUT/loaded.json" || rc=1
"$PY" -m cuptimon status
"$PY" -m cuptimon windows
kill -TERM $dpid
wait $dpid || { echo "FAIL: cuptimond exited with $?"; rc=1; }
for f in "$W"/win-*/window-*.json; do [ -f "$f" ] && gzip -c "$f" > "$OUT/$(basename "$(dirname "$f")")-trace.json.gz"; done
echo "gpu-torch: $([ $rc -eq 0 ] && echo ok || echo FAILED)"
exit $rc
