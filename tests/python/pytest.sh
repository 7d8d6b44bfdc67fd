#!/bin/bash
# The Python package (python/cuptimon) under pytest, against a real cuptimond
# on private sockets, the real shim and the libcupti test double.  Skipped
# (77) when no python3 here has pytest (Debian: python3-pytest).
set -u
: "${top_builddir:?run through make check}" "${top_srcdir:?run through make check}"
PY=
for cand in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import pytest' >/dev/null 2>&1; then
        PY=$cand
        break
    fi
done
if [ -z "$PY" ]; then
    echo "SKIP: pytest is not installed for python3 (apt-get install python3-pytest)"
    exit 77
fi

. "$top_srcdir/tests/integration/lib.sh"

start_daemon --flush-period 0.3
export CUPTIMON_TEST_DAEMON=1 CUPTIMON_TEST_DIR="$T" CUPTIMON_TEST_OUTPUT="$T/out"
export CUPTIMON_TEST_ASAN_RT="$ASAN_RT"
export PYTHONPATH="$top_srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
# Nothing may be written into the source tree (distcheck's is read-only).
export PYTHONDONTWRITEBYTECODE=1
rc=0
"$PY" -m pytest -p no:cacheprovider -q -rfEs --basetemp="$T/pytest" \
    ${CUPTIMON_PYTEST_ARGS:-} "$top_srcdir/tests/python" || rc=$?
if [ $rc -ne 0 ]; then
    echo "FAIL: pytest exited with $rc"
    exit $rc
fi
stop_daemon
echo "ok"
