# Running cuptimond as a node service: the unit suites of the configuration
# file (daemon/conf.c) and archive retention (daemon/retention.c), and the
# check that systemd accepts the units (systemd/local.mk builds the copies
# it verifies).

check_PROGRAMS += tests/unit/test-config tests/unit/test-retention
TESTS += tests/unit/test-config tests/unit/test-retention
UNIT_TESTS += tests/unit/test-config tests/unit/test-retention

tests_unit_test_config_SOURCES = tests/unit/test-config.c
tests_unit_test_config_CFLAGS = $(CHECK_TEST_CFLAGS) $(JSONC_CFLAGS)
tests_unit_test_config_LDADD = $(DAEMON_CORE_LIBS) $(CHECK_TEST_LIBS)

tests_unit_test_retention_SOURCES = tests/unit/test-retention.c
tests_unit_test_retention_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_test_retention_LDADD = $(DAEMON_CORE_LIBS) $(CHECK_TEST_LIBS) $(PTHREAD_LIBS)

# systemd-analyze verify over the units as configured, but pointing at the
# programs in this build tree (it insists that ExecStart exists).
TESTS += tests/unit/systemd-verify.sh
EXTRA_DIST += tests/unit/systemd-verify.sh
tests/unit/systemd-verify.log: $(SYSTEMD_TEST_UNITS)
# systemd.sh checks LimitNOFILE= in both units (the build's and the test copy).
tests/integration/systemd.log: $(SYSTEMD_TEST_UNITS)

# The shim's run-time dependencies and exported symbols.
TESTS += tests/unit/shim-surface.sh
EXTRA_DIST += tests/unit/shim-surface.sh
