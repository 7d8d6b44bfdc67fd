#!/bin/sh
# Configured without CUPTI headers (--without-cuda, or none under
# /usr/local/cuda): cuptimon is built all the same (it declares the part of
# CUPTI it uses in proto/cupti-abi.h), but the tests that need the headers
# are not built.  This test says so in the suite's results.
echo "SKIP: no CUPTI headers were configured (--with-cuda=DIR): not built or run here:"
echo "  the libcupti and PM sampling test doubles (tests/fakecupti) and every test"
echo "  that runs a workload through them (tests/integration, tests/fault,"
echo "  tests/python), test-decode,"
echo "  test-trace, test-export, test-window, test-layouts, test-aggregate, test-cupti-abi,"
echo "  fakepm-test and cbid-names.sh"
exit 77
