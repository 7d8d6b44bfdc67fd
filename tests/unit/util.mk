# Unit tests of the small shared helpers: mkdir -p (proto/util.c) and the
# typed JSON getters (archive/json-get.c).
check_PROGRAMS += tests/unit/test-util
TESTS += tests/unit/test-util
UNIT_TESTS += tests/unit/test-util
tests_unit_test_util_SOURCES = tests/unit/test-util.c
tests_unit_test_util_CFLAGS = $(CHECK_TEST_CFLAGS) $(JSONC_CFLAGS)
tests_unit_test_util_LDADD = $(ARCHIVE_LIBS) $(CHECK_TEST_LIBS)
