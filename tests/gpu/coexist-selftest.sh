#!/bin/bash
# coexist-check.py (the checks of coexist-case.sh, run by hand on a GPU)
# against synthetic runs: a good one passes; the failures issue 17 saw on
# the H200 (work from the gap between cycles, a schedule's warm-up step,
# events shifted by milliseconds, a kernel dropped, one start 3 us off,
# records missing from cuptimon's archive) each fail exactly the checks
# that should catch them.  Here so that the checker itself stays right
# without a GPU.  Skipped (77) without python3.
set -u
: "${top_srcdir:?run through make check}"
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null 2>&1 || { echo "SKIP: no $PY"; exit 77; }
exec "$PY" "$top_srcdir/tests/gpu/coexist-check.py" --self-test
