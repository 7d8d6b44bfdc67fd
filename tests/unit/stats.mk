# The statistics engine (archive/stats.c) against values each test computes
# from the events it made, and the tables cuptimonctl stats prints
# (cli/stats.c, built in with what it needs of the CLI).  It builds no
# CUPTI record, so it needs no CUPTI header.
check_PROGRAMS += tests/unit/test-stats
TESTS += tests/unit/test-stats
UNIT_TESTS += tests/unit/test-stats
tests_unit_test_stats_SOURCES = tests/unit/test-stats.c cli/stats.c cli/ctl.c cli/decode.c cli/read.c
tests_unit_test_stats_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(JSONC_CFLAGS)
tests_unit_test_stats_LDADD = $(ARCHIVE_LIBS) $(CHECK_TEST_LIBS)
