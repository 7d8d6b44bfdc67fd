# Unit suites of the daemon's parts.
check_PROGRAMS += tests/unit/test-archive
TESTS += tests/unit/test-archive
UNIT_TESTS += tests/unit/test-archive
tests_unit_test_archive_SOURCES = tests/unit/test-archive.c
tests_unit_test_archive_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_test_archive_LDADD = $(ARCHIVE_LIBS) $(CHECK_TEST_LIBS)

# The per-kind record delta and its chunk codec (archive/rdelta.h).
check_PROGRAMS += tests/unit/test-rdelta
TESTS += tests/unit/test-rdelta
UNIT_TESTS += tests/unit/test-rdelta
tests_unit_test_rdelta_SOURCES = tests/unit/test-rdelta.c
tests_unit_test_rdelta_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_test_rdelta_LDADD = $(ARCHIVE_LIBS) $(CHECK_TEST_LIBS)
