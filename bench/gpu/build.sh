#!/usr/bin/env bash
# Builds what the job-side GPU benchmark (bench/gpu/run.sh) runs besides the
# project itself: bare-cupti.so (the bare CUPTI floor) into bench/gpu/build/
# (git-ignored), and known-work through tests/gpu/build.sh (into
# tests/gpu/build/).  Needs gcc and the CUPTI headers; known-work needs nvcc.
# No GPU.  Idempotent.
#
#   bench/gpu/build.sh                 bare-cupti.so + known-work
#   bench/gpu/build.sh --devlibs B     also copy the shared libraries that B's
#                                      cuptimond, cuptimonctl and shim need
#                                      into .devlibs/ (tests/gpu/build.sh --devlibs)
#   bench/gpu/build.sh --bare-only     bare-cupti.so only (no nvcc needed)
#
# Environment: CC (default gcc), CUDA_HOME (default /usr/local/cuda), and
# what tests/gpu/build.sh reads (NVCC, KNOWN_WORK_ARCH, DEVLIBS_DIR).
set -eu
set -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=$here/build
devlibs=()
bare_only=0
while [ $# -gt 0 ]; do
    case $1 in
        --devlibs) devlibs=(--devlibs "${2:?--devlibs needs the build dir}"); shift 2 ;;
        --bare-only) bare_only=1; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "bench/gpu/build.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CC=${CC:-gcc}
inc=
for d in "$CUDA_HOME/include" "$CUDA_HOME/extras/CUPTI/include" "$CUDA_HOME/targets/x86_64-linux/include"; do
    [ -f "$d/cupti_activity.h" ] && inc="$inc -I$d"
done
[ -n "$inc" ] || { echo "bench/gpu/build.sh: cupti_activity.h not found under $CUDA_HOME" >&2; exit 1; }

mkdir -p "$out"
flags="-std=gnu11 -O2 -g -Wall -Wextra -Wshadow -shared -fPIC -fvisibility=hidden$inc"
stamp="$CC $flags"
so=$out/bare-cupti.so
if [ ! -e "$so" ] || [ "$here/bare-cupti.c" -nt "$so" ] || [ "$(cat "$so.flags" 2>/dev/null)" != "$stamp" ]; then
    echo "  CC       bench/gpu/build/bare-cupti.so"
    # shellcheck disable=SC2086  # flags is a list
    "$CC" $flags -o "$so.tmp" "$here/bare-cupti.c" -ldl -lpthread
    mv "$so.tmp" "$so"
    echo "$stamp" >"$so.flags"
else
    echo "  UP2DATE  bench/gpu/build/bare-cupti.so"
fi
# It must export InitializeInjection and link no libcupti (it dlopens one).
nm -D --defined-only "$so" | grep -qw InitializeInjection ||
    { echo "bench/gpu/build.sh: $so does not export InitializeInjection" >&2; exit 1; }
if ldd "$so" 2>/dev/null | grep -q libcupti; then
    echo "bench/gpu/build.sh: $so links libcupti; it must dlopen it" >&2
    exit 1
fi

python3 -m py_compile "$here/bench.py" "$here/torch-launch.py"
rm -rf "$here/__pycache__"

if [ "$bare_only" = 0 ]; then
    "$top/tests/gpu/build.sh" "${devlibs[@]}"
fi
echo "bench/gpu/build.sh: done ($out)"
