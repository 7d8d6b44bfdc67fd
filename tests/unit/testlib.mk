# What the Check suites share (tests/unit/testlib.h): main(), which runs the
# suite a program defines, and the loader of the real H200 buffers.  It is a
# convenience library in CHECK_TEST_LIBS, so every suite, wherever its rules
# are, links it without naming it.
check_LTLIBRARIES += tests/unit/libcuptimon-testlib.la
tests_unit_libcuptimon_testlib_la_SOURCES = tests/unit/testlib.c tests/unit/testlib.h
tests_unit_libcuptimon_testlib_la_CFLAGS = $(CHECK_TEST_CFLAGS) $(ZSTD_CFLAGS)
tests_unit_libcuptimon_testlib_la_LIBADD = $(ZSTD_LIBS)
