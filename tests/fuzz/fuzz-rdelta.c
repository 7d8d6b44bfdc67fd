/* Fuzz target: the per-kind record delta (archive/rdelta.h), whose
 * inverse the archive reader runs on every chunk of codec
 * CUPTIMON_CODEC_ZSTD_RDELTA once its zstd frame has decompressed.
 *
 * The input is 2 bytes of settings and a body.  The body is taken both as
 * an encoded form (hostile: the inverse must refuse it or undo it into
 * exactly the length its trailer names, and what it gives must verify) and
 * as a buffer of records,
 * walked by CUDA 13.0's sizes with one kind's size changed by the settings
 * (byte 0: the kind, byte 1: its size in words, 0..255): encoding it must
 * stay within the promised bound and decoding the result must give the
 * body back exactly.  The sanitizers watch every read and write. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/decode.h"
#include "archive/rdelta.h"
#include "cuptimon-proto.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz-rdelta: check failed: %s\n", #c);                                \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint16_t sizes[CUPTIMON_RDELTA_KINDS];
    static int have;
    if (!have) {
        struct cuptimon_layout l;
        CHECK(cuptimon__layout_init(&l, 130001, NULL) == 0);
        memcpy(sizes, l.size, sizeof sizes);
        have = 1;
    }
    if (size < 2)
        return 0;
    const uint8_t *body = data + 2;
    size_t n = size - 2;

    /* As an encoded form, undone into room of exactly the length its
     * trailer gives. */
    uint8_t *in = malloc(n ? n : 1);
    CHECK(in != NULL);
    memcpy(in, body, n);
    int64_t want = cuptimon__rdelta_length(in, n);
    if (want >= 0) {
        CHECK((uint64_t)want + 12 <= n);
        uint8_t *out = malloc(want ? (size_t)want : 1);
        CHECK(out != NULL);
        size_t len = 0;
        if (cuptimon__rdelta_decode(in, n, out, (size_t)want, &len) == 0) {
            CHECK(len == (size_t)want);
            /* What decodes verifies against what it decoded to. */
            CHECK(cuptimon__rdelta_verify(in, n, out, len) == 0);
        }
        free(out);
    }
    free(in);

    /* As records, through the transform and back. */
    uint16_t sz[CUPTIMON_RDELTA_KINDS];
    memcpy(sz, sizes, sizeof sz);
    sz[data[0] % CUPTIMON_RDELTA_KINDS] = (uint16_t)(data[1] * 8u);
    uint8_t *enc = malloc(CUPTIMON_RDELTA_BOUND(n)), *dec = malloc(n ? n : 1);
    CHECK(enc != NULL && dec != NULL);
    size_t walked, len = 0;
    size_t en = cuptimon__rdelta_encode(sz, body, n, 0, enc, &walked);
    CHECK(walked <= n && walked % 8 == 0);
    CHECK(en >= n + 12 && en <= CUPTIMON_RDELTA_BOUND(n));
    CHECK(cuptimon__rdelta_verify(enc, en, body, n) == 0);
    CHECK(cuptimon__rdelta_decode(enc, en, dec, n, &len) == 0);
    CHECK(len == n && memcmp(dec, body, n) == 0);
    free(enc);
    free(dec);
    return 0;
}
