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
# usage: OUT=DIR tests/gpu/sandbox-case.sh BUILD_DIR   (as root; after tests/gpu/build.sh)
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
printf '{"gpu_metrics_interval_s": 0.1, "gpu_metrics_retry_s": 1}\n' >"$W/c.conf"

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

variant sys_admin sys_admin
if [ "$state" = sampling ] && [ "${samples:-0}" -gt 0 ]; then
    ok "with CAP_SYS_ADMIN under MemoryDenyWriteExecute and AF_UNIX only, the daemon samples GPU 0 ($samples samples)"
else
    bad "with CAP_SYS_ADMIN under the unit's filters the daemon does not sample (state ${state:-?}): $(head -c 600 "$W/sys_admin/gpm.txt")"
fi
grep -E ' (error|crit|alert|emerg) ' "$W/sys_admin/daemon.log" | head -n 3 >>"$R"

variant unit none
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
