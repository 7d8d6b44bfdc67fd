/* The Check suites' shared main() and real-buffer loader (testlib.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <zstd.h>

#include "tests/unit/testlib.h"

uint8_t *cuptimon__test_load_real(const char *name, size_t *len)
{
    char path[512];
    FILE *f;
    long n;
    uint8_t *z, *out = NULL;
    size_t cap = 0, got = 0;
    ZSTD_DStream *ds;
    ZSTD_inBuffer in;

    snprintf(path, sizeof(path), "%s/cupti-13.0-h200/%s", TEST_DATA_DIR, name);
    f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    z = malloc((size_t)n);
    ck_assert_ptr_nonnull(z);
    ck_assert_uint_eq(fread(z, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    /* Streaming, so that a frame without a content size works too. */
    ds = ZSTD_createDStream();
    ck_assert_ptr_nonnull(ds);
    ZSTD_initDStream(ds);
    in.src = z;
    in.size = (size_t)n;
    in.pos = 0;
    for (;;) {
        ZSTD_outBuffer o;
        size_t r;
        if (cap - got < (1u << 20)) {
            cap = cap ? cap * 2 : (4u << 20);
            ck_assert_uint_le(cap, 64u << 20);
            out = realloc(out, cap);
            ck_assert_ptr_nonnull(out);
        }
        o.dst = out;
        o.size = cap;
        o.pos = got;
        r = ZSTD_decompressStream(ds, &o, &in);
        ck_assert_msg(!ZSTD_isError(r), "%s: %s", name, ZSTD_getErrorName(r));
        got = o.pos;
        if (r == 0 && in.pos == in.size)
            break;
        ck_assert_msg(in.pos < in.size || o.pos == o.size, "%s: truncated frame", name);
    }
    ZSTD_freeDStream(ds);
    free(z);
    *len = got;
    return out;
}

/* The fork mode and timeouts come from the environment (CK_FORK,
 * CK_DEFAULT_TIMEOUT), so that check-valgrind can run a suite in one process. */
int main(void)
{
    SRunner *sr = srunner_create(cuptimon__test_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
