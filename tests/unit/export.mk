# cuptimonctl export (cli/export.c, issue 50) over a session archive the test
# writes from CUPTI's own structs (so it needs CUPTI's headers), read back
# with SQLite: every value of the rows it must write.
if HAVE_CUPTI_HEADERS
check_PROGRAMS += tests/unit/test-export
TESTS += tests/unit/test-export
UNIT_TESTS += tests/unit/test-export
tests_unit_test_export_SOURCES = tests/unit/test-export.c cli/export.c cli/ctl.c cli/decode.c \
	cli/read.c
tests_unit_test_export_CFLAGS = $(CHECK_TEST_CFLAGS) $(JSONC_CFLAGS) $(SQLITE3_CFLAGS)
tests_unit_test_export_LDADD = $(ARCHIVE_LIBS) $(CHECK_TEST_LIBS) $(SQLITE3_LIBS)
endif
