# Unit suites of the daemon's parts.
check_PROGRAMS += tests/unit/test-archive
TESTS += tests/unit/test-archive
UNIT_TESTS += tests/unit/test-archive
tests_unit_test_archive_SOURCES = tests/unit/test-archive.c
tests_unit_test_archive_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_test_archive_LDADD = $(ARCHIVE_LIBS) $(CHECK_TEST_LIBS)
# The archive writer's allocations per chunk, counted (issue 49).
check_PROGRAMS += tests/unit/test-aw-alloc
TESTS += tests/unit/test-aw-alloc
UNIT_TESTS += tests/unit/test-aw-alloc
tests_unit_test_aw_alloc_SOURCES = tests/unit/test-aw-alloc.c
tests_unit_test_aw_alloc_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_test_aw_alloc_LDADD = $(ARCHIVE_LIBS) $(CHECK_TEST_LIBS)
