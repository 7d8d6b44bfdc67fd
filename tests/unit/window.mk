# The trace window's filter (daemon/window-write.c, built in from its
# sources) over archives written here, and the set of ids it keeps
# (daemon/idset.c).  It builds records of CUPTI's own structs.
if HAVE_CUPTI_HEADERS
check_PROGRAMS += tests/unit/test-window
TESTS += tests/unit/test-window
UNIT_TESTS += tests/unit/test-window
tests_unit_test_window_SOURCES = tests/unit/test-window.c daemon/window-write.c \
	daemon/window-output.c
tests_unit_test_window_CFLAGS = $(CHECK_TEST_CFLAGS) $(JSONC_CFLAGS)
tests_unit_test_window_LDADD = $(DAEMON_CORE_LIBS) $(JSONC_LIBS) $(CHECK_TEST_LIBS)
endif
