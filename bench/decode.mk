# bench-decode: decode + trace JSON writing, and decode + the statistics
# engine (cuptimonctl stats), records per second per core,
# on the real H200 buffers.  Not built by 'make all'; 'make bench-decode'
# builds and runs it (BENCH_DECODE_ARGS='--seconds 5' to measure longer).
# It is a check program so that 'make check' keeps it compiling (it is not
# in TESTS: nothing runs it there); EXTRA_PROGRAMS would need an '=' that
# no fragment owns.
check_PROGRAMS += bench/bench-decode
bench_bench_decode_SOURCES = bench/bench-decode.c
bench_bench_decode_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS) $(JSONC_CFLAGS) -DTEST_DATA_DIR='"$(abs_top_srcdir)/tests/data"'
bench_bench_decode_LDADD = $(ARCHIVE_LIBS)

BENCH_DECODE_ARGS =
bench-decode: bench/bench-decode$(EXEEXT)
	./bench/bench-decode$(EXEEXT) $(BENCH_DECODE_ARGS)
.PHONY: bench-decode
