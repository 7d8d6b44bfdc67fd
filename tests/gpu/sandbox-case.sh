#!/bin/bash
# cuptimond's GPU metrics under cuptimond.service's sandbox, on a machine
# without systemd: sandbox-run applies what it can of the unit
# (MemoryDenyWriteExecute=yes and RestrictAddressFamilies=AF_UNIX as systemd
# builds them, NoNewPrivileges=yes, the capability bounding set) to a root
# daemon, two ways:
#   unit        as shipped: no capability;
#   sys_admin   with the drop-in cuptimond(8) gives, CapabilityBoundingSet=
#               CAP_SYS_ADMIN.
# Checks: with CAP_SYS_ADMIN the daemon samples the GPU (CUDA's and CUPTI's
# start-up survive the seccomp filters); without it, it samples where the
# driver lets anyone read the counters (RmProfilingAdminOnly=0) and where
# it does not is off, naming CAP_SYS_ADMIN and the drop-in.  Not applied:
# DevicePolicy=closed with DeviceAllow=char-nvidia* (cgroups) and the file
# system's read-only view.
#
# Each variant also checks that the sandbox was there: the daemon's
# /proc/PID/status says seccomp filter mode, NoNewPrivs and the bounding
# set, and, once, a W+X mapping and an AF_INET socket fail under the same
# filters.
#
# usage: OUT=DIR tests/gpu/sandbox-case.sh BUILD_DIR   (as root; after tests/gpu/build.sh)
#   SANDBOX_GPM_LIB=PATH  the daemon's libcupti and libcuda are PATH (the PM
#                         double, build/tests/fakecupti/.libs/libpm-fake.so:
#                         the script checked without a GPU)
#   writes OUT/sandbox-report.txt (ends with RESULT PASS or RESULT FAIL) and
#   OUT/sandbox-work.tgz (the daemons' logs and gpu-metrics answers).
set -u
B=$(cd "${1:?usage: OUT=DIR $0 BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
S=$here/build/sandbox-run
[ -x "$S" ] || { echo "sandbox-case.sh: $S is missing: run tests/gpu/build.sh first" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "sandbox-case.sh: run it as root (the unit's daemon is root)" >&2; exit 2; }
OUT=${OUT:-$PWD/gpu-sandbox-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
W=$(mktemp -d /tmp/cuptimon-sandbox.XXXXXX)
trap 'tar -C "$W" -czf "$OUT/sandbox-work.tgz" . 2>/dev/null; rm -rf "$W"' EXIT
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:${CUDA_HOME:-/usr/local/cuda}/lib64
R=$OUT/sandbox-report.txt
fails=0
ok() { echo "ok    $*" >>"$R"; }
bad() { echo "FAIL  $*" >>"$R"; fails=$((fails + 1)); }
admin=$(awk -F': *' '/RmProfilingAdminOnly/ {print $2}' /proc/driver/nvidia/params 2>/dev/null)
{
    echo "driver: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n 1)"
    echo "RmProfilingAdminOnly: ${admin:-unknown}"
} >"$R"
lib=${SANDBOX_GPM_LIB:+, \"gpu_metrics_libcupti\": \"$SANDBOX_GPM_LIB\", \"gpu_metrics_libcuda\": \"$SANDBOX_GPM_LIB\"}
printf '{"gpu_metrics_interval_s": 0.1, "gpu_metrics_retry_s": 1%s}\n' "$lib" >"$W/c.conf"

# The filters as sandbox-run applies them refuse what the unit refuses.
"$S" --mdwe --unix-only --caps none -- python3 -c '
import mmap, socket
for what, f in (("W+X mapping", lambda: mmap.mmap(-1, 4096, prot=7)),
                ("AF_INET socket", lambda: socket.socket(socket.AF_INET))):
    try:
        f()
        print("allowed:", what)
    except OSError as e:
        print("refused:", what, e.errno)
' >"$W/control.txt" 2>&1
if [ "$(grep -c '^refused:' "$W/control.txt")" = 2 ]; then
    ok "under the filters a W+X mapping and an AF_INET socket are refused"
else
    bad "the filters do not refuse what the unit refuses: $(tr '\n' ' ' <"$W/control.txt")"
fi

# variant NAME CAPS: starts the daemon under the sandbox, waits for GPU 0 to
# leave "starting" and for a few samples, keeps what gpu-metrics says.
variant() {
    local name=$1 caps=$2 d=$W/$1
    mkdir -p "$d"
    "$S" --mdwe --unix-only --caps "$caps" -- "$B/daemon/cuptimond" --socket "$d/p.sock" \
        --control-socket "$d/c.sock" --output-dir "$d/out" --config "$W/c.conf" \
        --log-level info 2>"$d/daemon.log" &
    local pid=$! st=none
    for _ in $(seq 150); do
        st=$("$B/cli/cuptimonctl" --control-socket "$d/c.sock" gpu-metrics --json 2>/dev/null |
            python3 -c 'import json,sys; d=json.load(sys.stdin)["devices"]; print(d[0]["state"] if d else "none")' 2>/dev/null)
        case $st in sampling | off | failed | busy) break ;; esac
        sleep 0.1
    done
    [ "$st" = sampling ] && sleep 1.5 # samples to count
    grep -E '^(Seccomp|NoNewPrivs|CapBnd):' "/proc/$pid/status" >"$d/proc-status.txt" 2>&1
    "$B/cli/cuptimonctl" --control-socket "$d/c.sock" gpu-metrics --json >"$d/gpm.json" 2>&1
    "$B/cli/cuptimonctl" --control-socket "$d/c.sock" gpu-metrics >"$d/gpm.txt" 2>&1
    kill "$pid" 2>/dev/null
    wait "$pid"
    echo "daemon exit $? ($name)" >>"$d/exit.txt"
    python3 - "$d/gpm.json" <<'EOF' >"$d/summary.txt" 2>&1
import json, sys
d = json.load(open(sys.argv[1]))["devices"][0]
print("%s|%s|%s" % (d["state"], d.get("samples", 0), d.get("why", "")))
EOF
    IFS='|' read -r state samples why <"$d/summary.txt"
    echo "$name: state ${state:-?}, ${samples:-0} samples${why:+; why: $why}" >>"$R"
}

# in_sandbox NAME CAPBND: the daemon ran under seccomp filters, with
# NoNewPrivs and the bounding set CAPBND (hex, as /proc shows it).
in_sandbox() {
    local f=$W/$1/proc-status.txt
    if grep -qx 'Seccomp:[[:space:]]*2' "$f" && grep -qx 'NoNewPrivs:[[:space:]]*1' "$f" &&
        grep -qx "CapBnd:[[:space:]]*$2" "$f"; then
        ok "$1: the daemon ran under the filters, NoNewPrivs, bounding set $2"
    else
        bad "$1: the daemon was not in the sandbox: $(tr '\n' ' ' <"$f")"
    fi
}

variant sys_admin sys_admin
in_sandbox sys_admin 0000000000200000
if [ "$state" = sampling ] && [ "${samples:-0}" -gt 0 ]; then
    ok "with CAP_SYS_ADMIN under MemoryDenyWriteExecute and AF_UNIX only, the daemon samples GPU 0 ($samples samples)"
else
    bad "with CAP_SYS_ADMIN under the unit's filters the daemon does not sample (state ${state:-?}): $(head -c 600 "$W/sys_admin/gpm.txt")"
fi
grep -E ' (error|crit|alert|emerg) ' "$W/sys_admin/daemon.log" | head -n 3 >>"$R"

variant unit none
in_sandbox unit 0000000000000000
if [ "$admin" = 1 ]; then
    case "$state|$why" in
        off\|*CAP_SYS_ADMIN*CapabilityBoundingSet=CAP_SYS_ADMIN*)
            ok "as shipped (no capability, RmProfilingAdminOnly=1): off, naming CAP_SYS_ADMIN and the drop-in" ;;
        *) bad "as shipped (no capability, RmProfilingAdminOnly=1): state ${state:-?}, expected off naming CAP_SYS_ADMIN and the drop-in: $why" ;;
    esac
elif [ "$state" = sampling ] && [ "${samples:-0}" -gt 0 ]; then
    ok "as shipped (no capability, RmProfilingAdminOnly=${admin:-unknown}): the daemon samples GPU 0 ($samples samples)"
else
    bad "as shipped (no capability, RmProfilingAdminOnly=${admin:-unknown}): state ${state:-?}: $why"
fi

if [ "$fails" = 0 ]; then echo "RESULT PASS" >>"$R"; else echo "RESULT FAIL, $fails failed" >>"$R"; fi
cat "$R"
