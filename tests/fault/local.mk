# Fault-injection tests (issue 6, docs/FAULTS.md): hostile producers, a full
# or read-only disk, a stopped daemon, many producers coming and going, and
# the static/dynamic checks (cppcheck, TSan on the shim).  Each script
# starts the real cuptimond and shim through tests/integration/lib.sh.

# A producer that lies: speaks the protocol to the producer socket itself.
check_PROGRAMS += tests/fault/hostile-producer
tests_fault_hostile_producer_SOURCES = tests/fault/hostile-producer.c
tests_fault_hostile_producer_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
tests_fault_hostile_producer_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_fault_hostile_producer_LDADD = proto/libcuptimon-proto.la $(JSONC_LIBS)

FAULT_TESTS = \
	tests/fault/hostile.sh \
	tests/fault/hostile-log-flood.sh \
	tests/fault/conn-flood.sh \
	tests/fault/fd-full.sh \
	tests/fault/user-caps.sh \
	tests/fault/ctl-idle.sh \
	tests/fault/ctl-caps.sh \
	tests/fault/fair-workers.sh \
	tests/fault/fair-users.sh \
	tests/fault/refused-gone.sh \
	tests/fault/disk-full.sh \
	tests/fault/xfsz.sh \
	tests/fault/readonly-output.sh \
	tests/fault/window-output.sh \
	tests/fault/unarchived-count.sh \
	tests/fault/slow-daemon.sh \
	tests/fault/stalled-exit.sh \
	tests/fault/drop-report.sh \
	tests/fault/hello-close.sh \
	tests/fault/exit-unconnected.sh \
	tests/fault/short-jobs-lag.sh \
	tests/fault/loss-report-hostile.sh \
	tests/fault/close-unread.sh \
	tests/fault/decode-hostile.sh \
	tests/fault/soak.sh \
	tests/fault/cppcheck.sh \
	tests/fault/tsan.sh
TESTS += $(FAULT_TESTS)

# Tests of product bugs not yet fixed (docs/FAULTS.md, "Bugs found"); each
# line goes with its fix (the test then XPASSes).  None open now.
XFAIL_TESTS =

# What the scripts need at run time: the compiler and flags of this build
# (tsan.sh compiles the shim itself) and the soak's size.
AM_TESTS_ENVIRONMENT += \
	CUPTIMON_FAULT_CC='$(CC)'; export CUPTIMON_FAULT_CC; \
	CUPTIMON_FAULT_CPPFLAGS='$(DEFS) $(CUPTI_TEST_CFLAGS) $(JSONC_CFLAGS)'; export CUPTIMON_FAULT_CPPFLAGS; \
	CUPTIMON_FAULT_LIBS='$(JSONC_LIBS)'; export CUPTIMON_FAULT_LIBS;

EXTRA_DIST += $(FAULT_TESTS) tests/fault/fault-lib.sh tests/fault/check-recorded.py \
	tests/fault/cppcheck.supp

# The long soak (issue 6: minutes, 64 producers): make soak [SOAK_SECONDS=N]
# [SOAK_PRODUCERS=N] [SOAK_CHURN=1].  `make check` runs the short version
# (5 s).  SOAK_CHURN=1 is issue 21's churn: `make soak SOAK_CHURN=1
# SOAK_SECONDS=120`.
SOAK_SECONDS ?= 20
SOAK_PRODUCERS ?= 64
SOAK_CHURN ?= 0
soak: all $(check_PROGRAMS) $(check_LTLIBRARIES)
	$(AM_V_at)top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
	  SOAK_SECONDS='$(SOAK_SECONDS)' SOAK_PRODUCERS='$(SOAK_PRODUCERS)' SOAK_CHURN='$(SOAK_CHURN)' \
	  $(SHELL) $(abs_top_srcdir)/tests/fault/soak.sh
.PHONY: soak
