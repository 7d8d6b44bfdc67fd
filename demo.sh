#!/bin/sh
# The main job, on a fresh machine: install what is missing, build, then run
# the demo (daemon in the foreground on a private socket, a workload under
# the shim, status, a window, a flush that waits for running work, a clean stop, the archive, and
# at the end the tables of what ran, where the trace is and how to open it).
set -eu
cd "$(dirname "$0")"
./scripts/install-deps.sh
[ -x configure ] || autoreconf -fi
mkdir -p build
cd build
[ -f Makefile ] || ../configure --enable-werror
make -j"$(nproc)"
make demo
