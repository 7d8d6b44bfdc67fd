# Benchmarks (CPU side): `make bench` runs them all and prints one JSON
# object per measurement.  Figures are ratios or per-core rates measured
# side by side in one run; absolute times only come from the GPU machine
# (tests/gpu).  The programs are check programs so that `make check` keeps
# them compiling; nothing in TESTS runs them.
include bench/decode.mk

check_PROGRAMS += bench/bench-archive
bench_bench_archive_SOURCES = bench/bench-archive.c
bench_bench_archive_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS) -DTEST_DATA_DIR='"$(abs_top_srcdir)/tests/data"'
bench_bench_archive_LDADD = $(ARCHIVE_LIBS)
# The same on the libcupti test double's records (tests/fakecupti/double-bufs.h).
if HAVE_CUPTI_HEADERS
check_PROGRAMS += bench/bench-archive-double
bench_bench_archive_double_SOURCES = bench/bench-archive.c tests/fakecupti/double-bufs.h
bench_bench_archive_double_CPPFLAGS = $(AM_CPPFLAGS) $(CUPTI_TEST_CFLAGS) -I$(top_srcdir)/tests/fakecupti
bench_bench_archive_double_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS) -DBENCH_DOUBLE
bench_bench_archive_double_LDFLAGS = $(AM_LDFLAGS) -no-install
bench_bench_archive_double_LDADD = tests/fakecupti/libcupti-fake.la $(ARCHIVE_LIBS) $(PTHREAD_LIBS)
BENCH_ARCHIVE_DOUBLE = bench/bench-archive-double$(EXEEXT)
endif
# A producer that replays a real H200 buffer over the protocol: cheap enough
# that many of them reach the daemon's own limit on two cores.
check_PROGRAMS += bench/replay-producer
bench_replay_producer_SOURCES = bench/replay-producer.c
bench_replay_producer_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS)
bench_replay_producer_LDADD = $(ARCHIVE_LIBS)
# User-defined records (CUPTI 13.3+'s v2 path) against the fixed ones: archived
# bytes and daemon CPU per record, side by side (BENCH_UDR_ARGS='--seconds 5').
check_PROGRAMS += bench/bench-udr
bench_bench_udr_SOURCES = bench/bench-udr.c client-lib/v2-fields.c
bench_bench_udr_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS) $(JSONC_CFLAGS) -DTEST_DATA_DIR='"$(abs_top_srcdir)/tests/data"'
bench_bench_udr_LDADD = $(ARCHIVE_LIBS)
BENCH_UDR_ARGS =
bench-udr: bench/bench-udr$(EXEEXT)
	./bench/bench-udr$(EXEEXT) $(BENCH_UDR_ARGS)

EXTRA_DIST += bench/handoff.sh bench/node-scale.sh bench/daemon-ab.sh bench/window-scale.sh \
	bench/plot-node.sh bench/load-zst.h bench/gzip-threads.sh bench/daemon-run.sh \
	bench/daemon-warm.sh bench/nccl.sh

BENCH_ARCHIVE_ARGS = --levels 0,1,3,6
bench-archive: bench/bench-archive$(EXEEXT) $(BENCH_ARCHIVE_DOUBLE)
	./bench/bench-archive$(EXEEXT) $(BENCH_ARCHIVE_ARGS)
	$(if $(BENCH_ARCHIVE_DOUBLE),./$(BENCH_ARCHIVE_DOUBLE) $(BENCH_ARCHIVE_ARGS))

bench-handoff: all $(check_PROGRAMS) $(check_LTLIBRARIES)
	top_builddir='$(abs_top_builddir)' $(SHELL) $(top_srcdir)/bench/handoff.sh $(BENCH_HANDOFF_ARGS)

bench-node: all $(check_PROGRAMS)
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' $(SHELL) $(top_srcdir)/bench/node-scale.sh $(BENCH_NODE_ARGS)

# BENCH_WINDOW_ARGS="DURATIONS N KERNEL_RATE", default '"10 60" 8 50000';
# '"2" 8 50000' for a quick run.  BENCH_WINDOW_DECODE=1 then times
# cuptimonctl decode and cuptimonctl stats side by side on the last
# duration's archive (the 60 s x 8-producer one by default).
bench-window: all $(check_PROGRAMS)
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' $(SHELL) $(top_srcdir)/bench/window-scale.sh $(BENCH_WINDOW_ARGS)

# BENCH_GZIP_ARGS="ROUNDS THREADS_LIST RECORDS_PER_PRODUCER N", default '5 "1 2 4 8" 250000 4'.
bench-gzip: all $(check_PROGRAMS)
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' $(SHELL) $(top_srcdir)/bench/gzip-threads.sh $(BENCH_GZIP_ARGS)

# BENCH_EXPORT_ARGS="DURATIONS N KERNEL_RATE", default '"5 20" 2 50000' (issue 50):
# export --type sqlite against decode to JSON on the same archive.
bench-export: all $(check_PROGRAMS)
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' $(SHELL) $(top_srcdir)/bench/export.sh $(BENCH_EXPORT_ARGS)
EXTRA_DIST += bench/export.sh

# Fresh and warm (issue 49): BENCH_WARM_ARGS="ROUNDS N RECORDS WARM_SESSIONS",
# default '3 8 500000 64'.  bench-soak keeps one daemon up for
# BENCH_SOAK_SECONDS (3600) cycling short sessions and measured loads; it is
# not part of `make bench` (nor CI).
bench-warm: all $(check_PROGRAMS)
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' $(SHELL) $(top_srcdir)/bench/daemon-warm.sh $(BENCH_WARM_ARGS)
BENCH_SOAK_SECONDS = 3600
bench-soak: all $(check_PROGRAMS)
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' $(SHELL) $(top_srcdir)/bench/daemon-warm.sh --soak $(BENCH_SOAK_SECONDS) $(BENCH_WARM_ARGS)

bench: bench-archive bench-decode bench-udr bench-handoff bench-node bench-window bench-gzip bench-export bench-warm bench-nccl
.PHONY: bench bench-archive bench-udr bench-handoff bench-node bench-window bench-gzip bench-export bench-warm bench-soak

# The shim as NCCL's profiler plugin (issue 46): ns per collective on NCCL's
# threads.  BENCH_NCCL_ARGS="N ROUNDS", default "1000000 3".
bench-nccl: all $(check_PROGRAMS) $(check_LTLIBRARIES)
	top_builddir='$(abs_top_builddir)' $(SHELL) $(top_srcdir)/bench/nccl.sh $(BENCH_NCCL_ARGS)
.PHONY: bench-nccl
