/*
 * libFuzzer target: the input is one STRINGS body.  Every string the
 * iterator hands out must lie inside the input with its terminator, have
 * strlen == slen, and the walk must end in 0 or -EBADMSG; a batch that
 * reads back whole re-encodes to the same bytes.
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
    struct cuptimon_strings_iter it;
    int rc = cuptimon__strings_iter_init(&it, data, size);
    if (rc < 0) {
        CHECK(rc == -EBADMSG);
        return 0;
    }
    CHECK(size >= CUPTIMON_STRINGS_HDR_SIZE);
    uint32_t count = cuptimon__get_u32(data);
    /* Every entry takes at least its header and a terminator. */
    CHECK((uint64_t)count * (CUPTIMON_STRING_ENTRY_HDR + 1) <= size - CUPTIMON_STRINGS_HDR_SIZE);

    struct cuptimon_buf re = {0};
    CHECK(cuptimon__strings_begin(&re) == 0);
    uint32_t got = 0;
    uint64_t ptr;
    const char *s;
    size_t slen;
    const uint8_t *prev_end = data + CUPTIMON_STRINGS_HDR_SIZE;
    while ((rc = cuptimon__strings_next(&it, &ptr, &s, &slen)) == 1) {
        const uint8_t *u = (const uint8_t *)s;
        /* Entries follow one another without gaps. */
        CHECK(u == prev_end + CUPTIMON_STRING_ENTRY_HDR);
        CHECK(u + slen < data + size);
        CHECK(slen <= CUPTIMON_STRING_MAX_LEN);
        CHECK(strnlen(s, (size_t)(data + size - u)) == slen);
        CHECK(strlen(s) == slen);
        CHECK(cuptimon__get_u64(u - CUPTIMON_STRING_ENTRY_HDR) == ptr);
        CHECK(++got <= count);
        CHECK(cuptimon__strings_add(&re, ptr, s, slen) == 0);
        prev_end = u + slen + 1;
    }
    CHECK(rc == 0 || rc == -EBADMSG);
    if (rc == 0) {
        CHECK(got == count);
        CHECK(prev_end == data + size);
        CHECK(re.len == size && memcmp(re.data, data, size) == 0);
        /* The end is sticky. */
        CHECK(cuptimon__strings_next(&it, &ptr, &s, &slen) == 0);
    }
    cuptimon__buf_free(&re);
    return 0;
}
