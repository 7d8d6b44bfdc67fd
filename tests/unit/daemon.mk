# Unit suites of the daemon's parts.
check_PROGRAMS += tests/unit/test-archive
TESTS += tests/unit/test-archive
UNIT_TESTS += tests/unit/test-archive
tests_unit_test_archive_SOURCES = tests/unit/test-archive.c
tests_unit_test_archive_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_test_archive_LDADD = $(ARCHIVE_LIBS) $(CHECK_TEST_LIBS)
