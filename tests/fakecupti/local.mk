# tests/fakecupti: the libcupti test double (libcupti-fake.so: CUPTI 13.0's activity API
# plus a fake CUDA API), the workload that drives it, and the double's own unit test.
# Nothing here is installed; all of it is built by `make check`.

# -rpath /nowhere makes libtool build a real shared object (.libs/libcupti-fake.so)
# rather than a convenience archive.  No -module: the programs below link it, and libtool
# warns about linking a module ("not portable"); the name has the lib prefix anyway.  The double is found at run time by path (the shim
# looks for an already-loaded library whose path contains "libcupti").
# The double emits the real CUPTI structs: it is built only where configure
# found CUPTI headers (CUPTI_TEST_CFLAGS).
if HAVE_CUPTI_HEADERS
check_LTLIBRARIES += tests/fakecupti/libcupti-fake.la
tests_fakecupti_libcupti_fake_la_SOURCES = tests/fakecupti/fakecupti.c tests/fakecupti/fakecupti.h \
	tests/fakecupti/fakecupti-v2.c tests/fakecupti/fakecupti-int.h \
	tests/fakecupti/cupti-future.h
tests_fakecupti_libcupti_fake_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUPTI_TEST_CFLAGS)
tests_fakecupti_libcupti_fake_la_LDFLAGS = $(AM_LDFLAGS) -avoid-version -shared -rpath /nowhere
tests_fakecupti_libcupti_fake_la_LIBADD = $(PTHREAD_LIBS)

# The same double without CUPTI 13.2+'s _v2 entry points (a libcupti that reports 13.3 and
# lacks them): tests/integration/v2.sh runs the workload with it first in LD_LIBRARY_PATH
# (the workload's RUNPATH yields to it) for the shim's fallback.
check_LTLIBRARIES += tests/fakecupti/nov2/libcupti-fake.la
tests_fakecupti_nov2_libcupti_fake_la_SOURCES = tests/fakecupti/fakecupti.c tests/fakecupti/fakecupti.h \
	tests/fakecupti/fakecupti-nov2.c tests/fakecupti/fakecupti-int.h tests/fakecupti/cupti-future.h
tests_fakecupti_nov2_libcupti_fake_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUPTI_TEST_CFLAGS)
tests_fakecupti_nov2_libcupti_fake_la_LDFLAGS = $(AM_LDFLAGS) -avoid-version -shared -rpath /nowhere
tests_fakecupti_nov2_libcupti_fake_la_LIBADD = $(PTHREAD_LIBS)

# The workload links the double, so libcupti-fake.so is already in the process when an
# injected shim starts (like PyTorch's wheel copy of libcupti).  -no-install: a real
# binary with an rpath into the build tree, runnable directly and under valgrind.
check_PROGRAMS += tests/fakecupti/cuptimon-workload
tests_fakecupti_cuptimon_workload_SOURCES = tests/fakecupti/workload.c tests/fakecupti/fakecupti.h \
	tests/fakecupti/v2sub.c tests/fakecupti/v2sub.h
tests_fakecupti_cuptimon_workload_CPPFLAGS = $(AM_CPPFLAGS) $(CUPTI_TEST_CFLAGS)
tests_fakecupti_cuptimon_workload_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_fakecupti_cuptimon_workload_LDADD = tests/fakecupti/libcupti-fake.la $(PTHREAD_LIBS)

# Unit test of the double itself (Check).
check_PROGRAMS += tests/unit/fakecupti-test
TESTS += tests/unit/fakecupti-test
tests_unit_fakecupti_test_SOURCES = tests/unit/fakecupti-test.c tests/fakecupti/fakecupti.h
tests_unit_fakecupti_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUPTI_TEST_CFLAGS) -I$(top_srcdir)/tests/fakecupti
tests_unit_fakecupti_test_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_fakecupti_test_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_unit_fakecupti_test_LDADD = tests/fakecupti/libcupti-fake.la $(CHECK_TEST_LIBS) $(PTHREAD_LIBS)
UNIT_TESTS += tests/unit/fakecupti-test

# The double's CUPTI 13.2+ multi-subscriber API (fakecupti-v2.c).
check_PROGRAMS += tests/unit/fakecupti-v2-test
TESTS += tests/unit/fakecupti-v2-test
tests_unit_fakecupti_v2_test_SOURCES = tests/unit/fakecupti-v2-test.c tests/fakecupti/fakecupti.h
tests_unit_fakecupti_v2_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUPTI_TEST_CFLAGS) -I$(top_srcdir)/tests/fakecupti
tests_unit_fakecupti_v2_test_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_fakecupti_v2_test_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_unit_fakecupti_v2_test_LDADD = tests/fakecupti/libcupti-fake.la $(CHECK_TEST_LIBS) $(PTHREAD_LIBS)
UNIT_TESTS += tests/unit/fakecupti-v2-test

# A job that runs its own CUPTI tool mid-run, like torch.profiler (coexistence tests).
check_PROGRAMS += tests/fakecupti/cuptimon-othertool
tests_fakecupti_cuptimon_othertool_SOURCES = tests/fakecupti/othertool.c tests/fakecupti/fakecupti.h
tests_fakecupti_cuptimon_othertool_CPPFLAGS = $(AM_CPPFLAGS) $(CUPTI_TEST_CFLAGS) -I$(top_srcdir)/tests/fakecupti
tests_fakecupti_cuptimon_othertool_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_fakecupti_cuptimon_othertool_LDADD = tests/fakecupti/libcupti-fake.la $(PTHREAD_LIBS) -ldl

# The same, linked with full RELRO (-z now): its import slots are read-only
# after start-up, as in hardened builds; an injected shim must still route
# them to itself.
check_PROGRAMS += tests/fakecupti/cuptimon-othertool-relro
tests_fakecupti_cuptimon_othertool_relro_SOURCES = $(tests_fakecupti_cuptimon_othertool_SOURCES)
tests_fakecupti_cuptimon_othertool_relro_CPPFLAGS = $(tests_fakecupti_cuptimon_othertool_CPPFLAGS)
tests_fakecupti_cuptimon_othertool_relro_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,-z,relro -Wl,-z,now
tests_fakecupti_cuptimon_othertool_relro_LDADD = $(tests_fakecupti_cuptimon_othertool_LDADD)

# A tool in a library the job dlopens after the shim started (coexist.sh).
check_LTLIBRARIES += tests/fakecupti/libothertool-late.la
tests_fakecupti_libothertool_late_la_SOURCES = tests/fakecupti/latetool.c tests/fakecupti/fakecupti.h
tests_fakecupti_libothertool_late_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUPTI_TEST_CFLAGS) -I$(top_srcdir)/tests/fakecupti
tests_fakecupti_libothertool_late_la_LDFLAGS = $(AM_LDFLAGS) -avoid-version -shared -rpath /nowhere
tests_fakecupti_libothertool_late_la_LIBADD = tests/fakecupti/libcupti-fake.la
endif

# The PM sampling double (libpm-fake.so: CUPTI's PM Sampling API, the Profiler Host/Target
# calls around it and the CUDA driver calls of daemon/gpm-cupti.h; fakepm.h): tests point
# the daemon's GPU metrics sampler at it for both its libcupti and its libcuda.
# cupti_profiler_host.h includes the C++ header <string>: cxx-shim/ holds an empty one.
EXTRA_DIST += tests/fakecupti/cxx-shim/string
if HAVE_CUPTI_HEADERS
check_LTLIBRARIES += tests/fakecupti/libpm-fake.la
tests_fakecupti_libpm_fake_la_SOURCES = tests/fakecupti/fakepm.c tests/fakecupti/fakepm.h
tests_fakecupti_libpm_fake_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/fakecupti/cxx-shim \
	$(CUPTI_TEST_CFLAGS)
tests_fakecupti_libpm_fake_la_LDFLAGS = $(AM_LDFLAGS) -avoid-version -shared -rpath /nowhere
tests_fakecupti_libpm_fake_la_LIBADD = $(PTHREAD_LIBS)
endif

# A double of NCCL's side of the profiler plugin contract (issue 46): loads the plugin
# NCCL_PROFILER_PLUGIN names (the shim, once injected) and drives its events.
if HAVE_CUPTI_HEADERS
check_PROGRAMS += tests/fakecupti/cuptimon-fakenccl
tests_fakecupti_cuptimon_fakenccl_SOURCES = tests/fakecupti/fakenccl.c tests/fakecupti/fakecupti.h
tests_fakecupti_cuptimon_fakenccl_CPPFLAGS = $(AM_CPPFLAGS) $(CUPTI_TEST_CFLAGS) -I$(top_srcdir)/tests/fakecupti
tests_fakecupti_cuptimon_fakenccl_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_fakecupti_cuptimon_fakenccl_LDADD = tests/fakecupti/libcupti-fake.la $(PTHREAD_LIBS) -ldl
endif
