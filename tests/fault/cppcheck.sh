#!/bin/bash
# Static analysis: cppcheck over the product (proto, client-lib, archive, daemon,
# cli) with warnings and portability checks, as CI runs it.  Any finding
# fails the test; false positives are suppressed in tests/fault/cppcheck.supp
# with the reason, real ones are listed in docs/FAULTS.md.  Skipped (77)
# when cppcheck is not installed (Debian package cppcheck).
set -eu
: "${top_builddir:?run through make check}" "${top_srcdir:?run through make check}"
command -v cppcheck >/dev/null || { echo "SKIP: cppcheck is not installed"; exit 77; }
# The same sources whatever the build: the build without sanitizers runs it.
[ "${CUPTIMON_SANITIZERS:-no}" = yes ] && { echo "SKIP: the same check runs in the build without sanitizers"; exit 77; }
cd "$top_srcdir"
out=$(mktemp "${TMPDIR:-/tmp}/cuptimon-cppcheck.XXXXXX")
trap 'rm -f "$out"' EXIT
echo "$(cppcheck --version): proto client-lib archive daemon cli"
rc=0
cppcheck --error-exitcode=1 --enable=warning,portability --inline-suppr -q -j2 \
    --suppressions-list=tests/fault/cppcheck.supp \
    -I . -I proto -I client-lib -I "$top_builddir" \
    proto client-lib archive daemon cli >"$out" 2>&1 || rc=$?
cat "$out"
if [ "$rc" != 0 ]; then
    echo "FAIL: cppcheck reported $(grep -c '^[^ ].*: \(error\|warning\|portability\|style\):' "$out" || true) finding(s) (exit $rc)"
    exit 1
fi
echo "ok: no findings"
