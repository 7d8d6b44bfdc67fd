# Unit test of the PM sampling double (tests/fakecupti/fakepm.c, libpm-fake.so): it links
# the double and holds it to the facts fakepm.h models.  Built where the CUPTI headers are
# (the double includes them).
if HAVE_CUPTI_HEADERS
check_PROGRAMS += tests/unit/fakepm-test
TESTS += tests/unit/fakepm-test
UNIT_TESTS += tests/unit/fakepm-test
tests_unit_fakepm_test_SOURCES = tests/unit/fakepm-test.c tests/fakecupti/fakepm.h
tests_unit_fakepm_test_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/fakecupti \
	-I$(top_srcdir)/tests/fakecupti/cxx-shim
tests_unit_fakepm_test_CFLAGS = $(CHECK_TEST_CFLAGS)
tests_unit_fakepm_test_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_unit_fakepm_test_LDADD = tests/fakecupti/libpm-fake.la $(CHECK_TEST_LIBS) $(PTHREAD_LIBS) -ldl -lm
endif
