# Live aggregates (daemon/aggregate.c, cuptimonctl top and metrics): their
# unit suite (with the cost per record on the real H200 buffers, printed to
# its log) and the integration test of top and metrics.

if HAVE_CUPTI_HEADERS
check_PROGRAMS += tests/unit/test-aggregate
TESTS += tests/unit/test-aggregate
UNIT_TESTS += tests/unit/test-aggregate
tests_unit_test_aggregate_SOURCES = tests/unit/test-aggregate.c
tests_unit_test_aggregate_CFLAGS = $(CHECK_TEST_CFLAGS) $(JSONC_CFLAGS) $(PTHREAD_CFLAGS)
tests_unit_test_aggregate_LDADD = $(DAEMON_CORE_LIBS) $(CHECK_TEST_LIBS) $(PTHREAD_LIBS)
endif
TESTS += tests/integration/top.sh
EXTRA_DIST += tests/integration/top.sh
