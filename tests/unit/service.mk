# Running cuptimond as a node service: the configuration file
# (daemon/conf.c) and archive retention (daemon/retention.c), built into the
# daemon's internal library so that cuptimond, cuptimonctl and the tests
# share them; their unit suites; and the check that systemd accepts the
# units (systemd/local.mk builds the copies it verifies).
daemon_libcuptimon_decode_la_SOURCES += daemon/conf.c daemon/conf.h \
	daemon/retention.c daemon/retention.h
# The configuration's default path is SYSCONFDIR/cuptimon/cuptimond.conf.
daemon_libcuptimon_decode_la_CFLAGS += -DSYSCONFDIR='"$(sysconfdir)"'

check_PROGRAMS += tests/unit/test-config tests/unit/test-retention
TESTS += tests/unit/test-config tests/unit/test-retention
UNIT_TESTS += tests/unit/test-config tests/unit/test-retention

tests_unit_test_config_SOURCES = tests/unit/test-config.c
tests_unit_test_config_CFLAGS = $(CHECK_TEST_CFLAGS) $(JSONC_CFLAGS)
tests_unit_test_config_LDADD = daemon/libcuptimon-decode.la proto/libcuptimon-proto.la \
	$(CHECK_TEST_LIBS) $(JSONC_LIBS) $(ZSTD_LIBS) $(IBERTY_LIBS)

tests_unit_test_retention_SOURCES = tests/unit/test-retention.c
tests_unit_test_retention_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_test_retention_LDADD = daemon/libcuptimon-decode.la proto/libcuptimon-proto.la \
	$(CHECK_TEST_LIBS) $(JSONC_LIBS) $(ZSTD_LIBS) $(IBERTY_LIBS) $(PTHREAD_LIBS)

# systemd-analyze verify over the units as configured, but pointing at the
# programs in this build tree (it insists that ExecStart exists).
TESTS += tests/unit/systemd-verify.sh
EXTRA_DIST += tests/unit/systemd-verify.sh
tests/unit/systemd-verify.log: $(SYSTEMD_TEST_UNITS)

# The shim's run-time dependencies and exported symbols.
TESTS += tests/unit/shim-surface.sh
EXTRA_DIST += tests/unit/shim-surface.sh
