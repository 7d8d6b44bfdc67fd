/* What the Check suites in tests/unit share: the runner's main() and the
 * loader of the real H200 buffers in tests/data.  Each suite links
 * libcuptimon-testlib (through CHECK_TEST_LIBS) and defines
 * cuptimon__test_suite(); testlib's main() runs it, so every suite runs
 * with the same runner settings and exit status. */
#ifndef CUPTIMON_TESTLIB_H
#define CUPTIMON_TESTLIB_H

#include <stddef.h>
#include <stdint.h>

#include <check.h>

/* The suite this program runs; each test program defines it once. */
Suite *cuptimon__test_suite(void);

/* Reads tests/data/cupti-13.0-h200/NAME (zstd-compressed) and returns the
 * decompressed bytes (free() them), their length in *len.  It fails the
 * calling test, rather than returning an error, when the file is missing or
 * damaged, since no test can go on without its input. */
uint8_t *cuptimon__test_load_real(const char *name, size_t *len);

#endif
