#!/bin/sh
# Replays the fuzz corpus through the fuzz targets built as plain programs
# (tests/fuzz/replay-*), so that `make check` runs every seed input and any
# crash reproducer committed under tests/fuzz/corpus with any compiler.
# Also checks that the committed seeds are what gen-corpus writes today
# (frame, strings, ranges and gpm: the GPU metrics sessions).
set -eu

: "${top_builddir:?top_builddir is not set (run through make check)}"
: "${top_srcdir:?top_srcdir is not set (run through make check)}"
fuzz_b=$top_builddir/tests/fuzz
corpus=$top_srcdir/tests/fuzz/corpus

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cuptimon-replay.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/frame" "$tmp/strings" "$tmp/ranges" "$tmp/gpm"
"$fuzz_b/gen-corpus" "$tmp"

status=0
for t in frame strings ranges gpm; do
    for f in "$tmp/$t"/*; do
        name=${f##*/}
        if ! cmp -s "$f" "$corpus/$t/$name"; then
            echo "replay: $corpus/$t/$name differs from what gen-corpus writes now;" \
                 "after a protocol change run: $fuzz_b/gen-corpus $corpus" >&2
            status=1
        fi
    done
    # The committed corpus (seeds and any reproducers), then today's seeds.
    "$fuzz_b/replay-$t" "$corpus/$t" "$tmp/$t"
done
exit $status
