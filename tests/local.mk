# Tests: Check unit suites (tests/unit), the libcupti test double and the
# workload (tests/fakecupti), integration scripts (tests/integration) and
# fuzz targets (tests/fuzz).  Each part keeps its rules in its own file.
TEST_EXTENSIONS = .sh
SH_LOG_COMPILER = $(SHELL)
AM_TESTS_ENVIRONMENT = \
	top_builddir='$(abs_top_builddir)'; export top_builddir; \
	top_srcdir='$(abs_top_srcdir)'; export top_srcdir; \
	CK_DEFAULT_TIMEOUT=60; export CK_DEFAULT_TIMEOUT;

CHECK_TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) -DTEST_DATA_DIR='"$(abs_top_srcdir)/tests/data"'
CHECK_TEST_LIBS = $(CHECK_LIBS)

EXTRA_DIST += tests/data tests/demo.sh tests/integration/lib.sh

include tests/fakecupti/local.mk
include tests/unit/proto.mk
include tests/unit/decode.mk
include tests/unit/daemon.mk
include tests/integration/local.mk
include tests/fuzz/local.mk
