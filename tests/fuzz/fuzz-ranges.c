/*
 * libFuzzer target: the input is one RANGES body (annotation push/pop
 * times from a producer), and also, read as text, one archived range
 * (CUPTIMON_RANGE_BEGIN_KEY / _END_KEY value).  A body the parser accepts
 * has exactly count entries, each with an id in [1, 2^60), a known `what`
 * and a zero reserved byte, and re-encodes to the same bytes; a text the
 * range parsers accept is the exact form the formatters write.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cuptimon-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            abort();                                                                               \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cuptimon_ranges_hdr h;
    int rc = cuptimon__ranges_parse(data, size, &h);
    if (rc < 0) {
        CHECK(rc == -EBADMSG);
    } else {
        CHECK(size == CUPTIMON_RANGES_HDR_SIZE + (size_t)h.count * CUPTIMON_RANGE_ENTRY_SIZE);
        uint8_t *re = malloc(size);
        CHECK(re != NULL);
        cuptimon__ranges_hdr_encode(re, &h);
        for (uint32_t i = 0; i < h.count; i++) {
            struct cuptimon_range_ev r;
            cuptimon__range_get(data, i, &r);
            CHECK(r.id != 0 && r.id < CUPTIMON_RANGE_ID_MAX && r.parent < CUPTIMON_RANGE_ID_MAX);
            CHECK(r.what == CUPTIMON_RANGE_BEGIN || r.what == CUPTIMON_RANGE_END);
            cuptimon__range_encode(
                re + CUPTIMON_RANGES_HDR_SIZE + (size_t)i * CUPTIMON_RANGE_ENTRY_SIZE, &r);
        }
        CHECK(memcmp(re, data, size) == 0);
        free(re);
    }

    struct cuptimon_range_begin b;
    uint64_t e;
    char text[CUPTIMON_RANGE_TEXT_MAX];
    if (cuptimon__range_begin_parse((const char *)data, size, &b) == 0) {
        CHECK(b.depth <= 65535 && b.parent < CUPTIMON_RANGE_ID_MAX);
        size_t n = cuptimon__range_begin_format(text, &b);
        CHECK(n == size && memcmp(text, data, size) == 0);
    }
    if (cuptimon__range_end_parse((const char *)data, size, &e) == 0) {
        size_t n = cuptimon__range_end_format(text, e);
        CHECK(n == size && memcmp(text, data, size) == 0);
    }
    return 0;
}
