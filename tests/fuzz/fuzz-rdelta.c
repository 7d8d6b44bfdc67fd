/* Fuzz target: the per-kind record delta (archive/rdelta.h), whose
 * inverse the archive reader runs on every chunk of codec
 * CUPTIMON_CODEC_ZSTD_RDELTA once its zstd frame has decompressed.
 *
 * The input is 2 bytes of settings and a body.  The body is taken both as
 * an encoded form (hostile: the inverse must refuse it or undo it within
 * its bytes, giving len = n - 8 - 8 * nkinds) and as a buffer of records,
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

    /* As an encoded form, undone in a buffer of exactly its size. */
    uint8_t *b = malloc(n ? n : 1);
    CHECK(b != NULL);
    memcpy(b, body, n);
    size_t len = 0;
    if (cuptimon__rdelta_decode(b, n, &len) == 0) {
        CHECK(n >= 8);
        uint32_t nk = cuptimon__get_u32(body + n - 8);
        CHECK(nk <= CUPTIMON_RDELTA_KINDS && len == n - 8 - 8 * (size_t)nk);
        CHECK(cuptimon__get_u32(body + n - 4) <= len);
        /* Bytes after the walked prefix are as they came. */
        size_t walked = cuptimon__get_u32(body + n - 4);
        CHECK(memcmp(b + walked, body + walked, n - walked) == 0);
    }
    free(b);

    /* As records, through the transform and back. */
    uint16_t sz[CUPTIMON_RDELTA_KINDS];
    memcpy(sz, sizes, sizeof sz);
    sz[data[0] % CUPTIMON_RDELTA_KINDS] = (uint16_t)(data[1] * 8u);
    uint8_t *enc = malloc(n + CUPTIMON_RDELTA_MAX_EXTRA);
    CHECK(enc != NULL);
    size_t walked;
    size_t en = cuptimon__rdelta_encode(sz, body, n, enc, &walked);
    CHECK(walked <= n && walked % 8 == 0);
    CHECK(en >= n + 8 && en <= n + CUPTIMON_RDELTA_MAX_EXTRA && (en - n) % 8 == 0);
    CHECK(cuptimon__rdelta_decode(enc, en, &len) == 0);
    CHECK(len == n && memcmp(enc, body, n) == 0);
    free(enc);
    return 0;
}
