#!/bin/sh
# The C sources are formatted as .clang-format says (CI runs this; fix with
# `scripts/check-format.sh --fix`).  The generated API-name table and test
# data are left out.  Names each file that differs.
set -eu
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed" >&2; exit 1; }
files=$(git ls-files '*.c' '*.h' 2>/dev/null | grep -v -e '^tests/data/' -e '^archive/cbid-names.c$' || true)
[ -n "$files" ] || files=$(find proto archive daemon client-lib cli tests bench -name '*.[ch]' \
    ! -path 'tests/data/*' ! -name cbid-names.c)
if [ "${1:-}" = --fix ]; then
    # shellcheck disable=SC2086
    clang-format -i $files
    exit 0
fi
bad=0
for f in $files; do
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
        echo "check-format: $f is not formatted as .clang-format says"
        bad=1
    fi
done
exit $bad
