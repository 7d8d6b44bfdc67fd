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
# ... and on the libcupti test double's records.
if HAVE_CUPTI_HEADERS
check_PROGRAMS += tests/unit/test-rdelta-double
TESTS += tests/unit/test-rdelta-double
UNIT_TESTS += tests/unit/test-rdelta-double
tests_unit_test_rdelta_double_SOURCES = tests/unit/test-rdelta-double.c tests/fakecupti/double-bufs.h
tests_unit_test_rdelta_double_CPPFLAGS = $(AM_CPPFLAGS) $(CUPTI_TEST_CFLAGS) -I$(top_srcdir)/tests/fakecupti
tests_unit_test_rdelta_double_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_test_rdelta_double_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_unit_test_rdelta_double_LDADD = tests/fakecupti/libcupti-fake.la $(ARCHIVE_LIBS) $(CHECK_TEST_LIBS) $(PTHREAD_LIBS)
endif
# The archive writer's allocations per chunk, counted (issue 49).
check_PROGRAMS += tests/unit/test-aw-alloc
TESTS += tests/unit/test-aw-alloc
UNIT_TESTS += tests/unit/test-aw-alloc
tests_unit_test_aw_alloc_SOURCES = tests/unit/test-aw-alloc.c
tests_unit_test_aw_alloc_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_test_aw_alloc_LDADD = $(ARCHIVE_LIBS) $(CHECK_TEST_LIBS)
