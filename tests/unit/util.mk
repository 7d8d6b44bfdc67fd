# Unit tests of the small shared helpers: mkdir -p (proto/util.c) and the
# typed JSON getters (archive/json-get.c).
check_PROGRAMS += tests/unit/test-util
TESTS += tests/unit/test-util
UNIT_TESTS += tests/unit/test-util
tests_unit_test_util_SOURCES = tests/unit/test-util.c
tests_unit_test_util_CFLAGS = $(CHECK_TEST_CFLAGS) $(JSONC_CFLAGS)
tests_unit_test_util_LDADD = $(ARCHIVE_LIBS) $(CHECK_TEST_LIBS)

# The fields the shim selects on CUPTI's v2 path against the decoder's names.
check_PROGRAMS += tests/unit/test-v2fields
TESTS += tests/unit/test-v2fields
UNIT_TESTS += tests/unit/test-v2fields
tests_unit_test_v2fields_SOURCES = tests/unit/test-v2fields.c client-lib/v2-fields.c
tests_unit_test_v2fields_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_test_v2fields_LDADD = proto/libcuptimon-proto.la $(CHECK_TEST_LIBS)
