# Unit tests of the wire protocol library: framing, data-path bodies,
# string batches and the socket helpers (fd passing, peer credentials,
# the blocking control request against an in-test server thread).
check_PROGRAMS += tests/unit/test-proto
TESTS += tests/unit/test-proto
tests_unit_test_proto_SOURCES = tests/unit/test-proto.c
tests_unit_test_proto_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_test_proto_LDADD = proto/libcuptimon-proto.la $(CHECK_TEST_LIBS) $(PTHREAD_LIBS)
UNIT_TESTS += tests/unit/test-proto
