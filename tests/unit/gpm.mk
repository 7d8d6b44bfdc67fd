# GPU metrics sessions (archive/gpm.c, issue 34): their format written as
# the daemon writes it and read back, the reader's refusals and counts, the
# trace's counter tracks, the statistics of `cuptimonctl stats --report
# gpu`, and the readers that use them: decode and stats (cli/, built in)
# and the window writer (daemon/window-write.c, built in), over a process
# session made of a real H200 buffer; and the sampler's map from a job's GPU
# UUID to the node's ordinal (daemon/gpm.c, built in; against the PM
# sampling double where it is built).  It builds no CUPTI record, so it
# needs no CUPTI header.
check_PROGRAMS += tests/unit/test-gpm
TESTS += tests/unit/test-gpm
UNIT_TESTS += tests/unit/test-gpm
tests_unit_test_gpm_SOURCES = tests/unit/test-gpm.c cli/decode.c cli/read.c cli/stats.c cli/ctl.c \
	daemon/window-write.c daemon/window-output.c daemon/gpm.c
tests_unit_test_gpm_CFLAGS = $(CHECK_TEST_CFLAGS) $(JSONC_CFLAGS) $(PTHREAD_CFLAGS) $(TEST_GPM_FAKEPM)
tests_unit_test_gpm_LDADD = $(DAEMON_CORE_LIBS) $(JSONC_LIBS) $(CHECK_TEST_LIBS) $(PTHREAD_LIBS) -ldl
if HAVE_CUPTI_HEADERS
TEST_GPM_FAKEPM = -DFAKEPM_SO='"$(abs_top_builddir)/tests/fakecupti/.libs/libpm-fake.so"'
EXTRA_tests_unit_test_gpm_DEPENDENCIES = tests/fakecupti/libpm-fake.la
endif
