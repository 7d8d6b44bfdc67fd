# Fuzz targets of the wire protocol.  The same sources build two ways:
#  - always, with any compiler, as plain programs (tests/fuzz/replay-*) that
#    run LLVMFuzzerTestOneInput over the corpus under `make check`;
#  - with --enable-fuzzing (clang), as libFuzzer binaries tests/fuzz/fuzz-*,
#    run for a while by `make fuzz-smoke FUZZ_SECONDS=N`.
# The seed corpus is written by tests/fuzz/gen-corpus and committed.

FUZZ_REPLAY_LIBS = proto/libcuptimon-proto.la

check_PROGRAMS += tests/fuzz/replay-frame tests/fuzz/replay-strings tests/fuzz/replay-ranges \
	tests/fuzz/gen-corpus
tests_fuzz_replay_frame_SOURCES = tests/fuzz/fuzz-frame.c tests/fuzz/fuzz-main.c
tests_fuzz_replay_frame_LDADD = $(FUZZ_REPLAY_LIBS)
tests_fuzz_replay_strings_SOURCES = tests/fuzz/fuzz-strings.c tests/fuzz/fuzz-main.c
tests_fuzz_replay_strings_LDADD = $(FUZZ_REPLAY_LIBS)
tests_fuzz_replay_ranges_SOURCES = tests/fuzz/fuzz-ranges.c tests/fuzz/fuzz-main.c
tests_fuzz_replay_ranges_LDADD = $(FUZZ_REPLAY_LIBS)
tests_fuzz_gen_corpus_SOURCES = tests/fuzz/gen-corpus.c
# The GPU metrics seeds are written with the archive library's encoders.
tests_fuzz_gen_corpus_LDADD = $(FUZZ_LIB_LIBS)

# The decoder and the archive reader (the daemon's library).
FUZZ_LIB_LIBS = $(ARCHIVE_LIBS)
check_PROGRAMS += tests/fuzz/replay-decode tests/fuzz/replay-archive tests/fuzz/replay-layouts \
	tests/fuzz/replay-gpm
# GPU metrics sessions (archive/gpm.c): meta.json, chunks and samples, the
# counter tracks and statistics made of them.
tests_fuzz_replay_gpm_SOURCES = tests/fuzz/fuzz-gpm.c tests/fuzz/fuzz-main.c
tests_fuzz_replay_gpm_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
tests_fuzz_replay_gpm_LDADD = $(FUZZ_LIB_LIBS)
tests_fuzz_replay_layouts_SOURCES = tests/fuzz/fuzz-layouts.c tests/fuzz/fuzz-main.c
tests_fuzz_replay_layouts_LDADD = $(FUZZ_LIB_LIBS)
tests_fuzz_replay_decode_SOURCES = tests/fuzz/fuzz-decode.c tests/fuzz/fuzz-main.c
tests_fuzz_replay_decode_LDADD = $(FUZZ_LIB_LIBS)
tests_fuzz_replay_archive_SOURCES = tests/fuzz/fuzz-archive.c tests/fuzz/fuzz-main.c
tests_fuzz_replay_archive_LDADD = $(FUZZ_LIB_LIBS)
# The per-kind record delta's inverse (chunk codec 2, archive/rdelta.h).
check_PROGRAMS += tests/fuzz/replay-rdelta
tests_fuzz_replay_rdelta_SOURCES = tests/fuzz/fuzz-rdelta.c tests/fuzz/fuzz-main.c
tests_fuzz_replay_rdelta_LDADD = $(FUZZ_LIB_LIBS)

TESTS += tests/fuzz/replay.sh tests/fuzz/replay-lib.sh
EXTRA_DIST += tests/fuzz/replay.sh tests/fuzz/replay-lib.sh tests/fuzz/corpus tests/fuzz/fuzz-files.h

FUZZ_SECONDS = 30

if FUZZING
# The protocol sources are compiled into each target rather than linked
# from libcuptimon-proto.la, so that they carry libFuzzer's coverage
# instrumentation (the library itself is built without it).
noinst_PROGRAMS += tests/fuzz/fuzz-frame tests/fuzz/fuzz-strings tests/fuzz/fuzz-decode \
	tests/fuzz/fuzz-archive tests/fuzz/fuzz-ranges tests/fuzz/fuzz-layouts tests/fuzz/fuzz-gpm \
	tests/fuzz/fuzz-rdelta
tests_fuzz_fuzz_rdelta_SOURCES = tests/fuzz/fuzz-rdelta.c
tests_fuzz_fuzz_rdelta_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
tests_fuzz_fuzz_rdelta_LDFLAGS = $(SAN_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_rdelta_LDADD = $(FUZZ_LIB_LIBS)
tests_fuzz_fuzz_gpm_SOURCES = tests/fuzz/fuzz-gpm.c
tests_fuzz_fuzz_gpm_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS) $(JSONC_CFLAGS)
tests_fuzz_fuzz_gpm_LDFLAGS = $(SAN_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_gpm_LDADD = $(FUZZ_LIB_LIBS)
tests_fuzz_fuzz_layouts_SOURCES = tests/fuzz/fuzz-layouts.c
tests_fuzz_fuzz_layouts_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
tests_fuzz_fuzz_layouts_LDFLAGS = $(SAN_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_layouts_LDADD = $(FUZZ_LIB_LIBS)
# The library they exercise carries the coverage instrumentation too
# (archive/local.mk adds FUZZ_CFLAGS to it).
tests_fuzz_fuzz_decode_SOURCES = tests/fuzz/fuzz-decode.c
tests_fuzz_fuzz_decode_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
tests_fuzz_fuzz_decode_LDFLAGS = $(SAN_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_decode_LDADD = $(FUZZ_LIB_LIBS)
tests_fuzz_fuzz_archive_SOURCES = tests/fuzz/fuzz-archive.c
tests_fuzz_fuzz_archive_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
tests_fuzz_fuzz_archive_LDFLAGS = $(SAN_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_archive_LDADD = $(FUZZ_LIB_LIBS)
tests_fuzz_fuzz_frame_SOURCES = tests/fuzz/fuzz-frame.c proto/proto.c
tests_fuzz_fuzz_frame_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
tests_fuzz_fuzz_frame_LDFLAGS = $(SAN_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_strings_SOURCES = tests/fuzz/fuzz-strings.c proto/proto.c
tests_fuzz_fuzz_strings_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
tests_fuzz_fuzz_strings_LDFLAGS = $(SAN_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_ranges_SOURCES = tests/fuzz/fuzz-ranges.c proto/proto.c
tests_fuzz_fuzz_ranges_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
tests_fuzz_fuzz_ranges_LDFLAGS = $(SAN_CFLAGS) -fsanitize=fuzzer

# Each target runs FUZZ_SECONDS over a scratch copy of its seed corpus (new
# inputs it finds land there, not in the source tree).  A crash leaves its
# reproducer as tests/fuzz/crash-* in the build tree and fails the target;
# replay it with tests/fuzz/fuzz-TARGET FILE, and commit it under
# tests/fuzz/corpus/TARGET/ once fixed.  The targets run side by side, one
# per CPU (FUZZ_JOBS=N to choose; each libFuzzer process is single-threaded,
# so each still gets FUZZ_SECONDS of a CPU); each one's output is in a log
# of its own, shown whole when it fails, its "Done N runs" line when not.
FUZZ_SMOKE_TARGETS = frame strings decode archive ranges layouts gpm rdelta
fuzz-smoke: $(FUZZ_SMOKE_TARGETS:%=tests/fuzz/fuzz-%$(EXEEXT))
	@set -e; \
	work=$$(mktemp -d "$${TMPDIR:-/tmp}/cuptimon-fuzz.XXXXXX"); \
	trap 'rm -rf "$$work"' EXIT; \
	jobs=$${FUZZ_JOBS:-$$(nproc)}; \
	echo "fuzz-smoke: each target for $(FUZZ_SECONDS)s, $$jobs at a time"; \
	for t in $(FUZZ_SMOKE_TARGETS); do \
	  mkdir "$$work/$$t"; \
	  cp $(srcdir)/tests/fuzz/corpus/$$t/* "$$work/$$t/"; \
	done; \
	printf '%s\n' $(FUZZ_SMOKE_TARGETS) | xargs -n 1 -P "$$jobs" sh -c '\
	  if ./tests/fuzz/fuzz-$$1$(EXEEXT) -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	      -artifact_prefix=tests/fuzz/ "$$0/$$1" >"$$0/$$1.log" 2>&1; then \
	    echo "fuzz-smoke: fuzz-$$1: $$(grep -m 1 "^Done " "$$0/$$1.log")"; \
	  else cat "$$0/$$1.log"; echo "fuzz-smoke: fuzz-$$1 FAILED"; exit 1; fi' "$$work"
else
fuzz-smoke:
	@echo "fuzz-smoke: the libFuzzer targets are not built;" \
	  "configure with: ./configure CC=clang --enable-fuzzing [--enable-sanitizers]" >&2; \
	exit 1
endif
.PHONY: fuzz-smoke
CLEANFILES += tests/fuzz/crash-* tests/fuzz/leak-* tests/fuzz/timeout-* tests/fuzz/oom-*
