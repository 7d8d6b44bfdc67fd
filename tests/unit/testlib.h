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

/* A passing assertion costs nothing.  Check's own ck_assert_msg (and every
 * ck_assert_* built on it) writes its file and line to the runner each time
 * it passes, a write(2): test-trace made 1.67 million, 298 s of its run under
 * ASan.  A test that crashes is located by the sanitizer's or valgrind's stack
 * instead of by Check's last passed point. */
#undef ck_assert_msg
#define ck_assert_msg(expr, ...)                                                                   \
    ((expr)                                                                                        \
         ? (void)0                                                                                 \
         : _ck_assert_failed(__FILE__, __LINE__, "Assertion '" #expr "' failed", ##__VA_ARGS__))

/* The suite this program runs; each test program defines it once. */
Suite *cuptimon__test_suite(void);

/* Reads tests/data/cupti-13.0-h200/NAME (zstd-compressed) and returns the
 * decompressed bytes (free() them), their length in *len.  It fails the
 * calling test, rather than returning an error, when the file is missing or
 * damaged, since no test can go on without its input. */
uint8_t *cuptimon__test_load_real(const char *name, size_t *len);

#endif
