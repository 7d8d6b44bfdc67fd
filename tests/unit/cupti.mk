# The project's declarations of CUPTI against a toolkit's headers: the ABI
# subset the product uses (proto/cupti-abi.h, checked at compile time by
# test-cupti-abi) and the callback-id name table (archive/cbid-names.c,
# checked by cbid-names.sh).  Both need the CUPTI headers configure found;
# without them, no-cupti-headers.sh says what is not tested.
if HAVE_CUPTI_HEADERS
check_PROGRAMS += tests/unit/test-cupti-abi
TESTS += tests/unit/test-cupti-abi tests/unit/cbid-names.sh
UNIT_TESTS += tests/unit/test-cupti-abi
tests_unit_test_cupti_abi_SOURCES = tests/unit/test-cupti-abi.c
tests_unit_test_cupti_abi_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_test_cupti_abi_LDADD = $(CHECK_TEST_LIBS)
else
TESTS += tests/unit/no-cupti-headers.sh
endif
EXTRA_DIST += tests/unit/cbid-names.sh tests/unit/no-cupti-headers.sh
AM_TESTS_ENVIRONMENT += \
	CUPTIMON_RUNTIME_CBID_H='$(CUPTIMON_RUNTIME_CBID_H)'; export CUPTIMON_RUNTIME_CBID_H; \
	CUPTIMON_DRIVER_CBID_H='$(CUPTIMON_DRIVER_CBID_H)'; export CUPTIMON_DRIVER_CBID_H;
# The GPU metrics sampler's declarations (daemon/gpm-cupti.h) likewise;
# cupti_profiler_host.h includes <string>: an empty one for C (cxx-shim).
if HAVE_CUPTI_HEADERS
check_PROGRAMS += tests/unit/test-gpm-abi
TESTS += tests/unit/test-gpm-abi
tests_unit_test_gpm_abi_SOURCES = tests/unit/test-gpm-abi.c
tests_unit_test_gpm_abi_CFLAGS = $(AM_CFLAGS) -I$(srcdir)/tests/fakecupti/cxx-shim $(CUPTI_TEST_CFLAGS)
endif
EXTRA_DIST += tests/fakecupti/cxx-shim/string
