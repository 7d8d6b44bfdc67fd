#!/bin/bash
# NVTX by default: a job that set nothing gets NVTX_INJECTION64_PATH
# pointed at the libcupti the shim loaded (the file itself, so that NVTX
# loads that very copy), injected and preloaded; a value the job set (a
# tool such as nsys sets its own) is never replaced, even an empty one;
# CUPTIMON_NVTX=0 leaves NVTX alone; and a window's default kinds include
# the marker kinds that carry NVTX ranges.
. "$top_srcdir/tests/integration/lib.sh"
start_daemon

want=$(readlink -f "$FAKECUPTI")
nvtx_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["nvtx_injection64_path"])' "$1"; }

workload --kernels 10 --report "$T/inj.json" >/dev/null
got=$(nvtx_of "$T/inj.json")
[ "$(readlink -f "$got")" = "$want" ] && [ "${got#/}" != "$got" ] ||
    fail "injected: NVTX_INJECTION64_PATH is '$got', not the loaded libcupti $want"

workload_preload --kernels 10 --report "$T/pre.json" >/dev/null
got=$(nvtx_of "$T/pre.json")
[ "$(readlink -f "$got")" = "$want" ] || fail "preloaded: NVTX_INJECTION64_PATH is '$got', not $want"

NVTX_INJECTION64_PATH=/opt/some-tool/libToolInjection64.so workload --kernels 10 \
    --report "$T/set.json" >/dev/null
got=$(nvtx_of "$T/set.json")
[ "$got" = /opt/some-tool/libToolInjection64.so ] || fail "a job's own NVTX_INJECTION64_PATH became '$got'"

NVTX_INJECTION64_PATH= workload --kernels 10 --report "$T/empty.json" >/dev/null
got=$(nvtx_of "$T/empty.json")
[ -z "$got" ] || fail "an empty NVTX_INJECTION64_PATH became '$got'"

CUPTIMON_NVTX=0 workload --kernels 10 --report "$T/off.json" >/dev/null
got=$(nvtx_of "$T/off.json")
[ "$got" = None ] || fail "CUPTIMON_NVTX=0: NVTX_INJECTION64_PATH is '$got'"

# The window's default kinds: marker (12) and marker_data (13) among them.
CUPTIMON_LABEL=nv spawn_workload --kernels 2000 --rate 2000 --linger-ms 3000 --quiet
w=$SPAWNED
wait_for 100 sh -c "\"$CTL\" --control-socket \"$CUPTIMON_CONTROL_SOCKET\" status --json | grep -q '\"nv\"'" ||
    fail "the workload did not connect"
ctl begin-window --label nv --json >"$T/begin.json" || fail "begin-window failed"
python3 - "$T/begin.json" <<'PY' || fail "the window's default kinds lack the marker kinds"
import json, sys
k = json.load(open(sys.argv[1]))["kinds"]
assert 12 in k and 13 in k, k
PY
ctl end-window --json >/dev/null || fail "end-window failed"
wait "$w" || fail "the windowed workload failed"
echo "ok"
