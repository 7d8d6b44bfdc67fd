# Live aggregates (issue 12): the aggregation module goes into the decoder
# library (cuptimond feeds it on its workers, cuptimonctl could read it),
# cuptimonctl top and metrics into cuptimonctl; their unit suite (with the
# cost per record on the real H200 buffers, printed to its log) and the
# integration test of top and metrics.
daemon_libcuptimon_decode_la_SOURCES += daemon/aggregate.c daemon/aggregate.h
cli_cuptimonctl_SOURCES += cli/top.c cli/top.h

check_PROGRAMS += tests/unit/test-aggregate
TESTS += tests/unit/test-aggregate
UNIT_TESTS += tests/unit/test-aggregate
tests_unit_test_aggregate_SOURCES = tests/unit/test-aggregate.c
tests_unit_test_aggregate_CFLAGS = $(CHECK_TEST_CFLAGS) $(ZSTD_CFLAGS) $(JSONC_CFLAGS) $(PTHREAD_CFLAGS)
tests_unit_test_aggregate_LDADD = daemon/libcuptimon-decode.la proto/libcuptimon-proto.la \
	$(CHECK_TEST_LIBS) $(ZSTD_LIBS) $(JSONC_LIBS) $(IBERTY_LIBS) $(PTHREAD_LIBS)

TESTS += tests/integration/top.sh
EXTRA_DIST += tests/integration/top.sh
