# Unit suites of the decoder library: record layouts and the walker (with
# the real H200 buffers, damaged and random input), string table,
# demangling, callback-id names; the trace writer (escaping, exact
# timestamps, a golden trace parsed back and schema-checked, flows), the
# summary, and cuptimonctl decode over a real archive.  They build records
# of CUPTI's own structs, so they need its headers.
if HAVE_CUPTI_HEADERS
check_PROGRAMS += tests/unit/test-decode tests/unit/test-trace
TESTS += tests/unit/test-decode tests/unit/test-trace
UNIT_TESTS += tests/unit/test-decode tests/unit/test-trace

tests_unit_test_decode_SOURCES = tests/unit/test-decode.c
tests_unit_test_decode_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_test_decode_LDADD = $(ARCHIVE_LIBS) $(CHECK_TEST_LIBS)

# test-trace also drives cuptimonctl decode, so it builds cli/decode.c in
# (with cli/read.c, what decode shares with stats).
tests_unit_test_trace_SOURCES = tests/unit/test-trace.c cli/decode.c cli/read.c
tests_unit_test_trace_CFLAGS = $(CHECK_TEST_CFLAGS) $(JSONC_CFLAGS)
tests_unit_test_trace_LDADD = $(ARCHIVE_LIBS) $(CHECK_TEST_LIBS)

# The CUPTI layout table (proto/layouts.c) against the installed headers
# and the test double's declarations of newer structs, and the decoder
# through each release's table.
check_PROGRAMS += tests/unit/test-layouts
TESTS += tests/unit/test-layouts
UNIT_TESTS += tests/unit/test-layouts
tests_unit_test_layouts_SOURCES = tests/unit/test-layouts.c tests/fakecupti/cupti-future.h
tests_unit_test_layouts_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/fakecupti
tests_unit_test_layouts_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_test_layouts_LDADD = $(ARCHIVE_LIBS) $(CHECK_TEST_LIBS)
endif
