#!/usr/bin/env bash
# Builds what the GPU suite runs besides the project itself, into
# tests/gpu/build/ (git-ignored).  Idempotent: a target is rebuilt only when
# its source or the compiler flags changed.  Needs nvcc (CUDA 12.3+; the suite
# was written against 13.0) and a C compiler; no GPU.
#
#   tests/gpu/build.sh                     known-work, long-work, held-work,
#                                          cupti-probe, pm-load, sandbox-run
#                                          + cupti-layout.json
#   tests/gpu/build.sh --devlibs BUILD_DIR also copy the shared libraries that
#                                          BUILD_DIR's cuptimond, cuptimonctl
#                                          and libcuptimon.so need (outside
#                                          glibc) into .devlibs/ at the repo
#                                          root, for a machine without them
#
# Environment: NVCC (default: $CUDA_HOME/bin/nvcc, /usr/local/cuda/bin/nvcc,
# then PATH), CUDA_HOME (default /usr/local/cuda), CC (default cc),
# KNOWN_WORK_ARCH (default 90: sm_90 SASS + compute_90 PTX), DEVLIBS_DIR
# (default REPO/.devlibs).
set -eu
set -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=$here/build
devlibs_from=
while [ $# -gt 0 ]; do
    case $1 in
        --devlibs) devlibs_from=${2:?--devlibs needs the build dir}; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ -z "${NVCC:-}" ]; then
    if [ -x "$CUDA_HOME/bin/nvcc" ]; then NVCC=$CUDA_HOME/bin/nvcc
    else NVCC=$(command -v nvcc || true)
    fi
fi
if [ -z "$NVCC" ] || [ ! -x "$NVCC" ]; then
    echo "build.sh: nvcc not found (set NVCC or CUDA_HOME)" >&2
    exit 1
fi
CC=${CC:-cc}
arch=${KNOWN_WORK_ARCH:-90}
mkdir -p "$out"

# rebuild_needed TARGET STAMP_TEXT SOURCES...: 0 when TARGET must be rebuilt.
rebuild_needed() {
    local target=$1 stamp=$2 src
    shift 2
    [ -e "$target" ] || return 0
    [ -e "$target.flags" ] && [ "$(cat "$target.flags")" = "$stamp" ] || return 0
    for src in "$@"; do
        [ "$src" -nt "$target" ] && return 0
    done
    return 1
}

# ---- known-work -------------------------------------------------------------
kw_flags="-O2 -lineinfo -gencode arch=compute_$arch,code=sm_$arch -gencode arch=compute_$arch,code=compute_$arch"
kw_stamp="$NVCC $kw_flags"
if rebuild_needed "$out/known-work" "$kw_stamp" "$here/known-work.cu"; then
    echo "  NVCC     tests/gpu/build/known-work"
    # shellcheck disable=SC2086  # kw_flags is a list of flags
    "$NVCC" $kw_flags -o "$out/known-work.tmp" "$here/known-work.cu" -ldl
    # The PTX entry names are the kernel names CUPTI reports.
    # shellcheck disable=SC2086
    "$NVCC" -O2 -arch=compute_$arch -ptx -o "$out/known-work.ptx" "$here/known-work.cu"
    mv "$out/known-work.tmp" "$out/known-work"
    echo "$kw_stamp" >"$out/known-work.flags"
else
    echo "  UP2DATE  tests/gpu/build/known-work"
fi

# The report's literal kernel names must be the device entry names, and
# their demangled forms what a GNU demangler makes of them.
grep -oE '\.entry [A-Za-z0-9_$]+' "$out/known-work.ptx" | awk '{print $2}' | sort >"$out/known-work.entries"
"$out/known-work" --list-kernels >"$out/known-work.kernels.json"
python3 - "$out/known-work.kernels.json" "$out/known-work.entries" <<'EOF'
import json, shutil, subprocess, sys
table = json.load(open(sys.argv[1]))["kernels"]
entries = set(open(sys.argv[2]).read().split())
bad = []
have_filt = shutil.which("c++filt") is not None
for k in table:
    m = k["mangled"]
    if m is None:
        # anonymous namespace: nvcc names it _GLOBAL__N__<hash>...; find it
        cand = [e for e in entries if "_GLOBAL__N_" in e]
        if not cand:
            bad.append("no anonymous-namespace entry in the PTX for %s" % k["demangled"])
            continue
        m = None
        for c in cand:
            if have_filt and subprocess.run(["c++filt", c], capture_output=True, text=True).stdout.strip() == k["demangled"]:
                m = c
        if have_filt and m is None:
            bad.append("no PTX entry demangles to %s (candidates %s)" % (k["demangled"], cand))
        continue
    if m not in entries:
        bad.append("%s is not a PTX entry (entries: %s)" % (m, sorted(entries)))
    if have_filt:
        d = subprocess.run(["c++filt", m], capture_output=True, text=True).stdout.strip()
        if d != k["demangled"]:
            bad.append("c++filt %s gives '%s', the table says '%s'" % (m, d, k["demangled"]))
if bad:
    sys.exit("build.sh: known-work's kernel table is wrong:\n  " + "\n  ".join(bad))
print("  CHECK    kernel table: %d kernels match the PTX entries%s" % (len(table), "" if have_filt else " (c++filt absent: demangled forms not checked)"))
EOF

# ---- long-work (edges-case.sh), cupti-probe, held-work (held-case.sh) ------
# ---- pm/pm-load (pm-case.sh, pm-probe.sh) -----------------------------------
mkdir -p "$out/pm"
for prog in long-work cupti-probe held-work pm/pm-load; do
    pf="-O2 -gencode arch=compute_$arch,code=sm_$arch"
    case $prog in
        cupti-probe) pf="$pf -I$CUDA_HOME/include -L$CUDA_HOME/lib64 -L$CUDA_HOME/lib -lcupti -lcuda -ldl" ;;
        pm/pm-load) pf="$pf -gencode arch=compute_$arch,code=compute_$arch -std=c++17 -Xcompiler -Wall -ldl" ;;
    esac
    src=$here/${prog#pm/}.cu
    if rebuild_needed "$out/$prog" "$NVCC $pf" "$src"; then
        echo "  NVCC     tests/gpu/build/$prog"
        # shellcheck disable=SC2086
        "$NVCC" -o "$out/$prog.tmp" "$src" $pf
        mv "$out/$prog.tmp" "$out/$prog"
        echo "$NVCC $pf" >"$out/$prog.flags"
    else
        echo "  UP2DATE  tests/gpu/build/$prog"
    fi
done

# ---- sandbox-run (sandbox-case.sh) --------------------------------------------
sr_stamp="$CC -std=gnu11 -O2 -Wall -Wextra"
if rebuild_needed "$out/sandbox-run" "$sr_stamp" "$here/sandbox-run.c"; then
    echo "  CC       tests/gpu/build/sandbox-run"
    # shellcheck disable=SC2086
    $sr_stamp -o "$out/sandbox-run" "$here/sandbox-run.c"
    echo "$sr_stamp" >"$out/sandbox-run.flags"
else
    echo "  UP2DATE  tests/gpu/build/sandbox-run"
fi

# ---- cupti-layout.json ------------------------------------------------------
inc=
for d in "$CUDA_HOME/include" "$CUDA_HOME/extras/CUPTI/include" "$CUDA_HOME/targets/x86_64-linux/include"; do
    [ -f "$d/cupti_activity.h" ] && inc="$inc -I$d"
done
[ -n "$inc" ] || { echo "build.sh: cupti_activity.h not found under $CUDA_HOME" >&2; exit 1; }
cl_stamp="$CC $inc"
if rebuild_needed "$out/cupti-layout.json" "$cl_stamp" "$here/cupti-layout.c"; then
    echo "  CC       tests/gpu/build/cupti-layout.json"
    # shellcheck disable=SC2086
    "$CC" -std=c11 -O0 $inc -o "$out/cupti-layout" "$here/cupti-layout.c"
    "$out/cupti-layout" >"$out/cupti-layout.json.tmp"
    python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$out/cupti-layout.json.tmp"
    mv "$out/cupti-layout.json.tmp" "$out/cupti-layout.json"
    echo "$cl_stamp" >"$out/cupti-layout.json.flags"
else
    echo "  UP2DATE  tests/gpu/build/cupti-layout.json"
fi

python3 -m py_compile "$here/check.py" "$here/torch-loop.py" "$here/edges-check.py"
rm -rf "$here/__pycache__"

# ---- .devlibs ----------------------------------------------------------------
if [ -n "$devlibs_from" ]; then
    b=$(cd "$devlibs_from" && pwd)
    dest=${DEVLIBS_DIR:-$top/.devlibs}
    mkdir -p "$dest"
    for f in "$b/daemon/cuptimond" "$b/cli/cuptimonctl" "$b/client-lib/.libs/libcuptimon.so"; do
        [ -e "$f" ] || { echo "build.sh: $f is missing: build the project in $b first" >&2; exit 1; }
        ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
    done | sort -u | while read -r lib; do
        case $(basename "$lib") in
            libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) continue ;;
        esac
        cp -L "$lib" "$dest/"
        echo "  DEVLIB   .devlibs/$(basename "$lib")"
    done
fi
echo "build.sh: done ($out)"
