# Tests: Check unit suites (tests/unit), the libcupti test double and the
# workload (tests/fakecupti), integration scripts (tests/integration) and
# fuzz targets (tests/fuzz).  Each part keeps its rules in its own file.
TEST_EXTENSIONS = .sh
SH_LOG_COMPILER = $(SHELL)
AM_TESTS_ENVIRONMENT = \
	top_builddir='$(abs_top_builddir)'; export top_builddir; \
	top_srcdir='$(abs_top_srcdir)'; export top_srcdir; \
	CK_DEFAULT_TIMEOUT=60; export CK_DEFAULT_TIMEOUT; \
	SHIM_STATIC_JSONC=$(SHIM_STATIC_JSONC); export SHIM_STATIC_JSONC; \
	CUPTIMON_SANITIZERS=$(CUPTIMON_SANITIZERS); export CUPTIMON_SANITIZERS;
# python3 found first in PATH may be a shim that picks the interpreter
# (pyenv's: a shell script that runs pyenv, some 0.25 s of CPU a call; the
# tests call python3 hundreds of times, in polling loops too).  Then the
# interpreter it picks goes first in PATH, as pyenv exec itself puts it:
# the same python with the same modules, without the shim each call.  A
# python3 that is the interpreter (Debian's, a venv's) leaves PATH alone.
AM_TESTS_ENVIRONMENT += \
	cuptimon_py=$$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) || cuptimon_py=; \
	if [ -n "$$cuptimon_py" ] && \
	  [ "$$(readlink -f "$$(command -v python3)")" != "$$(readlink -f "$$cuptimon_py")" ]; then \
	  PATH=$${cuptimon_py%/*}:$$PATH; export PATH; \
	fi;
# yes in an ASan+UBSan build (--enable-sanitizers): the tests whose verdict
# is a throughput, or that do not depend on the build, skip there.
if SANITIZERS
CUPTIMON_SANITIZERS = yes
else
CUPTIMON_SANITIZERS = no
endif

# CUPTI_TEST_CFLAGS: the toolkit's CUPTI headers, for the suites that build
# records of the real structs (test programs only; never the product).
CHECK_TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(CUPTI_TEST_CFLAGS) -DTEST_DATA_DIR='"$(abs_top_srcdir)/tests/data"'
# Every Check suite links testlib (tests/unit/testlib.mk), which holds main().
CHECK_TEST_LIBS = tests/unit/libcuptimon-testlib.la $(CHECK_LIBS)

# Unit suites that also run under valgrind (make check-valgrind).
UNIT_TESTS =
VALGRIND = valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect
# The suites run side by side, one per CPU (VALGRIND_JOBS=N to choose);
# each one's output is in its .valgrind.log, shown when it fails.
check-valgrind: $(check_PROGRAMS) $(check_LTLIBRARIES)
	@printf '%s\n' $(UNIT_TESTS) | xargs -n 1 -P "$${VALGRIND_JOBS:-$$(nproc)}" sh -c '\
	  echo "  VALGRIND $$0"; \
	  CK_FORK=no CK_DEFAULT_TIMEOUT=600 $(LIBTOOL) --mode=execute $(VALGRIND) ./$$0 >$$0.valgrind.log 2>&1 \
	    || { cat $$0.valgrind.log; echo "  VALGRIND $$0 FAILED"; exit 1; }'
.PHONY: check-valgrind

EXTRA_DIST += tests/data tests/demo.sh tests/integration/lib.sh
# The lock that runs some integration tests alone (tests/integration/lib.sh).
CLEANFILES += .test-alone.lock

include tests/unit/testlib.mk
include tests/fakecupti/local.mk
include tests/unit/proto.mk
include tests/unit/util.mk
include tests/unit/decode.mk
include tests/unit/stats.mk
include tests/unit/export.mk
include tests/unit/gpm.mk
include tests/unit/daemon.mk
include tests/unit/window.mk
include tests/integration/local.mk
include tests/fuzz/local.mk

# The GPU suite (tests/gpu/README.md): run by hand on a CUDA machine.
EXTRA_DIST += tests/gpu/README.md tests/gpu/build.sh tests/gpu/run.sh tests/gpu/check.py \
	tests/gpu/known-work.cu tests/gpu/torch-loop.py tests/gpu/cupti-layout.c \
	tests/gpu/window-case.sh tests/gpu/coexist-case.sh tests/gpu/kineto-ref.py \
	tests/gpu/layout-case.sh \
	tests/gpu/nvtx-case.sh tests/gpu/coexist-check.py tests/gpu/coexist-selftest.sh \
	tests/gpu/ranks-case.sh tests/gpu/ranks-check.py \
	tests/gpu/held-case.sh tests/gpu/held-check.py tests/gpu/held-work.cu tests/gpu/held-torch.py \
	tests/gpu/pm-probe.sh tests/gpu/pm-probe.c tests/gpu/pm-load.cu tests/gpu/pm-overflow.sh
# cuptimonctl export against nsys stats on a real job (issue 50).
EXTRA_DIST += tests/gpu/export-case.sh tests/gpu/export-check.py
# ... whose coexistence checker is checked here, against synthetic runs.
TESTS += tests/gpu/coexist-selftest.sh
include tests/unit/service.mk
include tests/python/local.mk
include tests/fault/local.mk
include tests/unit/aggregate.mk
include tests/unit/cupti.mk
include tests/unit/fakepm.mk

# distcheck proves that the tarball builds and that its tests find what
# they need in it; check.sh runs it with these (make distcheck-short): the
# unit suites and one test of each part that reads files of its own from
# the tree.  Every other build of check.sh runs the whole suite.
DISTCHECK_TESTS = $(filter tests/unit/%,$(TESTS)) tests/integration/cli.sh \
	tests/integration/stats.sh tests/integration/edges.sh tests/fault/hostile.sh \
	tests/fuzz/replay.sh tests/python/pytest.sh tests/gpu/coexist-selftest.sh
distcheck-short:
	$(MAKE) $(AM_MAKEFLAGS) distcheck TESTS='$(DISTCHECK_TESTS)'
.PHONY: distcheck-short

# check.sh's gcc build runs these (make check-plain): the unit suites, the
# tests that skip under the sanitizers (a throughput verdict, or a check
# that does not depend on the build: their scripts say which), and an
# end-to-end smoke at full speed.  Its ASan+UBSan build runs the whole
# suite; make check runs the whole suite in any build.
PLAIN_TESTS = $(filter tests/unit/%,$(TESTS)) tests/fault/tsan.sh tests/fault/cppcheck.sh \
	tests/fault/fair-users.sh tests/fault/fair-workers.sh tests/integration/multi-producer.sh \
	tests/integration/demo-end.sh
# (tests/python/pytest.sh runs in distcheck's build, configured as this one
# is: here it ran a second time, 24 s, for the same verdict.)
check-plain:
	$(MAKE) $(AM_MAKEFLAGS) check TESTS='$(PLAIN_TESTS)'
.PHONY: check-plain
# Issue 48: the candidates' table.
EXTRA_DIST += tests/gpu/pm-candidates.py

# check.sh's build without a CUDA toolkit runs these (make check-nocuda):
# every test but those whose verdict cannot differ from their run in the
# gcc build's check-plain: cppcheck.sh reads the sources, not the build
# (28 s), and fair-users.sh and fair-workers.sh, which run alone, measure
# the daemon, the same program in both builds (the same config.h and
# flags; check.sh's no_cuda_headers shows that no product object reads a
# CUDA header).
NOCUDA_SAME_TESTS = tests/fault/cppcheck.sh tests/fault/fair-users.sh tests/fault/fair-workers.sh
check-nocuda:
	$(MAKE) $(AM_MAKEFLAGS) check TESTS='$(filter-out $(NOCUDA_SAME_TESTS),$(TESTS))'
.PHONY: check-nocuda
