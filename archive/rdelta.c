/* The per-kind record delta (rdelta.h). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "cuptimon-proto.h"
#include "decode.h"
#include "rdelta.h"

/* The transform walks by the decoder's sizes (cuptimon_layout.size). */
_Static_assert(CUPTIMON_RDELTA_KINDS == CUPTIMON_KIND_SLOTS, "one kind numbering");
_Static_assert(CUPTIMON_RDELTA_RECORD_MAX == CUPTIMON_RECORD_MAX, "one largest record");

/* Words are loaded as native integers and the format says little-endian:
 * one and the same on the hosts that run CUPTI (x86-64, aarch64). */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "rdelta words are little-endian");

/* Word 0's high half (the field after the kind) is transformed, its low
 * half (the kind) is not: subtracting a multiple of 2^32 leaves it as is. */
#define KIND_KEEP 0xffffffff00000000ull

static int size_ok(uint32_t s)
{
    return s >= 8 && s <= CUPTIMON_RDELTA_RECORD_MAX && s % 8 == 0;
}

static inline uint64_t ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline void st64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

size_t cuptimon__rdelta_encode(const uint16_t sizes[CUPTIMON_RDELTA_KINDS], const uint8_t *src,
                               size_t len, uint8_t *out, size_t *walked)
{
    const uint8_t *prev[CUPTIMON_RDELTA_KINDS] = {0};
    uint16_t sz[CUPTIMON_RDELTA_KINDS];
    uint64_t used = 0;
    size_t off = 0;

    for (unsigned k = 0; k < CUPTIMON_RDELTA_KINDS; k++)
        sz[k] = sizes && size_ok(sizes[k]) ? sizes[k] : 0;
    /* The prefix P stops where the decoder's walk would: at a kind whose
     * size is not known here, or a record cut short.  What follows is
     * kept as it is, so every buffer encodes, whatever it holds. */
    while (len - off >= 8 && off <= UINT32_MAX) {
        uint32_t kind;
        memcpy(&kind, src + off, 4);
        if (kind >= CUPTIMON_RDELTA_KINDS || sz[kind] == 0 || sz[kind] > len - off)
            break;
        size_t n = sz[kind];
        const uint8_t *r = src + off, *p = prev[kind];
        uint8_t *o = out + off;
        if (p == NULL) {
            memcpy(o, r, n);
        } else {
            st64(o, ld64(r) - (ld64(p) & KIND_KEEP));
            for (size_t i = 8; i < n; i += 8)
                st64(o + i, ld64(r + i) - ld64(p + i));
        }
        prev[kind] = r;
        used |= 1ull << kind;
        off += n;
    }
    if (off > UINT32_MAX) /* cannot happen: chunks are 256 MiB at most */
        off = 0;
    memcpy(out + off, src + off, len - off);
    uint8_t *t = out + len;
    uint32_t nk = 0;
    for (unsigned k = 0; k < CUPTIMON_RDELTA_KINDS; k++) {
        if (!(used >> k & 1))
            continue;
        cuptimon__put_u32(t, k);
        cuptimon__put_u32(t + 4, sz[k]);
        t += 8;
        nk++;
    }
    cuptimon__put_u32(t, nk);
    cuptimon__put_u32(t + 4, (uint32_t)off);
    if (walked)
        *walked = off;
    return len + 8 + 8 * (size_t)nk;
}

int cuptimon__rdelta_decode(uint8_t *buf, size_t n, size_t *len)
{
    uint16_t sz[CUPTIMON_RDELTA_KINDS] = {0};
    size_t prev[CUPTIMON_RDELTA_KINDS];

    if (n < 8)
        return -EBADMSG;
    uint32_t nk = cuptimon__get_u32(buf + n - 8), walked = cuptimon__get_u32(buf + n - 4);
    if (nk > CUPTIMON_RDELTA_KINDS || 8 + 8 * (size_t)nk > n)
        return -EBADMSG;
    size_t raw = n - 8 - 8 * (size_t)nk;
    if (walked > raw)
        return -EBADMSG;
    for (uint32_t i = 0; i < nk; i++) {
        uint32_t k = cuptimon__get_u32(buf + raw + 8 * (size_t)i),
                 s = cuptimon__get_u32(buf + raw + 8 * (size_t)i + 4);
        if (k >= CUPTIMON_RDELTA_KINDS || sz[k] != 0 || !size_ok(s))
            return -EBADMSG;
        sz[k] = (uint16_t)s;
    }
    for (unsigned k = 0; k < CUPTIMON_RDELTA_KINDS; k++)
        prev[k] = SIZE_MAX;
    /* In place: the previous record of a kind lies before this one and is
     * already restored. */
    for (size_t off = 0; off < walked;) {
        if (walked - off < 8)
            return -EBADMSG;
        uint32_t kind;
        memcpy(&kind, buf + off, 4);
        if (kind >= CUPTIMON_RDELTA_KINDS || sz[kind] == 0 || sz[kind] > walked - off)
            return -EBADMSG;
        size_t rn = sz[kind];
        uint8_t *r = buf + off;
        if (prev[kind] != SIZE_MAX) {
            const uint8_t *p = buf + prev[kind];
            st64(r, ld64(r) + (ld64(p) & KIND_KEEP));
            for (size_t i = 8; i < rn; i += 8)
                st64(r + i, ld64(r + i) + ld64(p + i));
        }
        prev[kind] = off;
        off += rn;
    }
    *len = raw;
    return 0;
}
