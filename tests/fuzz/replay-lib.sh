#!/bin/sh
# Replays the decoder and archive-reader corpora through their fuzz targets
# built as plain programs, plus slices of the real H200 buffers.
set -eu
: "${top_builddir:?run through make check}" "${top_srcdir:?run through make check}"
fuzz_b=$top_builddir/tests/fuzz
corpus=$top_srcdir/tests/fuzz/corpus
"$fuzz_b/replay-decode" "$corpus/decode"
"$fuzz_b/replay-archive" "$corpus/archive"
"$fuzz_b/replay-layouts" "$corpus/layouts"
"$fuzz_b/replay-rdelta" "$corpus/rdelta"
echo "replay-lib: ok"
