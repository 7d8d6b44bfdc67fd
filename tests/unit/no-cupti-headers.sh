#!/bin/sh
# Configured without CUPTI headers (--without-cuda, or none under
# /usr/local/cuda): cuptimon is built all the same (it declares the part of
# CUPTI it uses in proto/cupti-abi.h), but the tests that need the headers
# are not built.  This test says so in the suite's results.
echo "SKIP: no CUPTI headers were configured (--with-cuda=DIR): not built or run here:"
echo "  the libcupti test double (tests/fakecupti) and every test that runs a workload"
echo "  through it (tests/integration, tests/fault, tests/python), test-decode,"
echo "  test-trace, test-window, test-layouts, test-aggregate, test-cupti-abi and"
echo "  cbid-names.sh"
exit 77
