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
/* A kind is stored in one byte of the sequence. */
_Static_assert(CUPTIMON_RDELTA_KINDS <= 256, "kinds fit a byte");
/* Words are loaded as native integers and the format says little-endian:
 * one and the same on the hosts that run CUPTI (x86-64, aarch64). */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "rdelta words are little-endian");

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

/* The extent the transform walks (count: records of each kind, nrec: all
 * of them): the prefix stops where the decoder's walk would, at a kind
 * whose size is not known here or a record cut short.  (Chunks are 256 MiB
 * at most, so the prefix and its record count fit 32 bits.) */
static size_t extent(const uint16_t sz[CUPTIMON_RDELTA_KINDS], const uint8_t *src, size_t len,
                     size_t count[CUPTIMON_RDELTA_KINDS], size_t *nrec)
{
    size_t off = 0;
    *nrec = 0;
    while (len - off >= 8 && off < UINT32_MAX - CUPTIMON_RDELTA_RECORD_MAX) {
        uint32_t kind;
        memcpy(&kind, src + off, 4);
        if (kind >= CUPTIMON_RDELTA_KINDS || sz[kind] == 0 || sz[kind] > len - off)
            break;
        count[kind]++;
        (*nrec)++;
        off += sz[kind];
    }
    return off;
}

static void known_sizes(const uint16_t sizes[CUPTIMON_RDELTA_KINDS],
                        uint16_t sz[CUPTIMON_RDELTA_KINDS])
{
    for (unsigned k = 0; k < CUPTIMON_RDELTA_KINDS; k++)
        sz[k] = sizes && size_ok(sizes[k]) ? sizes[k] : 0;
}

/* A kind's first record is the difference from zeros. */
static const uint8_t zeros[CUPTIMON_RDELTA_RECORD_MAX];

size_t cuptimon__rdelta_encode(const uint16_t sizes[CUPTIMON_RDELTA_KINDS], const uint8_t *src,
                               size_t len, size_t min_walk, uint8_t *out, size_t *walked)
{
    uint16_t sz[CUPTIMON_RDELTA_KINDS];
    size_t count[CUPTIMON_RDELTA_KINDS] = {0}, base[CUPTIMON_RDELTA_KINDS],
           idx[CUPTIMON_RDELTA_KINDS];
    const uint8_t *prev[CUPTIMON_RDELTA_KINDS];
    size_t nrec;

    known_sizes(sizes, sz);
    /* First the extent; what follows it is kept as it is, so every buffer
     * encodes, whatever it holds. */
    size_t p_len = extent(sz, src, len, count, &nrec);
    if (walked)
        *walked = p_len;
    if (p_len < min_walk)
        return 0;
    for (size_t k = 0, at = 0; k < CUPTIMON_RDELTA_KINDS; k++) {
        base[k] = at;
        idx[k] = 0;
        prev[k] = zeros;
        at += count[k] * sz[k];
    }
    /* Then the columns: record i of kind k puts its word w's difference at
     * base[k] + (w * count[k] + i) * 8, and its kind at P + its place. */
    uint8_t *seq = out + p_len;
    for (size_t j = 0, at = 0; j < nrec; j++) {
        uint32_t kind;
        memcpy(&kind, src + at, 4);
        const uint8_t *r = src + at, *p = prev[kind];
        size_t words = sz[kind] / 8, stride = count[kind] * 8;
        uint8_t *col = out + base[kind] + idx[kind] * 8;
        seq[j] = (uint8_t)kind;
        for (size_t w = 0; w < words; w++)
            st64(col + w * stride, ld64(r + 8 * w) - ld64(p + 8 * w));
        prev[kind] = r;
        idx[kind]++;
        at += sz[kind];
    }
    memcpy(seq + nrec, src + p_len, len - p_len);
    uint8_t *t = seq + nrec + (len - p_len);
    uint32_t nk = 0;
    for (unsigned k = 0; k < CUPTIMON_RDELTA_KINDS; k++) {
        if (count[k] == 0)
            continue;
        cuptimon__put_u32(t, k);
        cuptimon__put_u32(t + 4, sz[k]);
        t += 8;
        nk++;
    }
    cuptimon__put_u32(t, nk);
    cuptimon__put_u32(t + 4, (uint32_t)p_len);
    cuptimon__put_u32(t + 8, (uint32_t)nrec);
    return len + nrec + 12 + 8 * (size_t)nk;
}

/* An encoded form's trailer and kind sequence, checked. */
struct form {
    uint16_t sz[CUPTIMON_RDELTA_KINDS];
    size_t count[CUPTIMON_RDELTA_KINDS], base[CUPTIMON_RDELTA_KINDS];
    size_t p_len, nrec, len; /* P, R, and the records' length */
    const uint8_t *seq, *tail;
};

static int parse_trailer(const uint8_t *in, size_t n, struct form *f)
{
    if (n < 12)
        return -EBADMSG;
    uint32_t nk = cuptimon__get_u32(in + n - 12);
    if (nk > CUPTIMON_RDELTA_KINDS || 12 + 8 * (size_t)nk > n)
        return -EBADMSG;
    size_t body = n - 12 - 8 * (size_t)nk; /* = len + R */
    f->p_len = cuptimon__get_u32(in + n - 8);
    f->nrec = cuptimon__get_u32(in + n - 4);
    if (f->nrec > body || f->p_len > body - f->nrec || f->nrec > f->p_len / 8)
        return -EBADMSG;
    f->len = body - f->nrec;
    memset(f->sz, 0, sizeof f->sz);
    for (uint32_t i = 0; i < nk; i++) {
        const uint8_t *e = in + body + 8 * (size_t)i;
        uint32_t k = cuptimon__get_u32(e), s = cuptimon__get_u32(e + 4);
        if (k >= CUPTIMON_RDELTA_KINDS || f->sz[k] != 0 || !size_ok(s))
            return -EBADMSG;
        f->sz[k] = (uint16_t)s;
    }
    return 0;
}

static int parse(const uint8_t *in, size_t n, struct form *f)
{
    int rc = parse_trailer(in, n, f);
    if (rc < 0)
        return rc;
    f->seq = in + f->p_len;
    f->tail = f->seq + f->nrec;
    memset(f->count, 0, sizeof f->count);
    for (size_t j = 0; j < f->nrec; j++) {
        uint8_t k = f->seq[j];
        if (k >= CUPTIMON_RDELTA_KINDS || f->sz[k] == 0)
            return -EBADMSG;
        f->count[k]++;
    }
    /* The records must fill the columns exactly: then every column read
     * below lies inside [0, P). */
    size_t at = 0;
    for (unsigned k = 0; k < CUPTIMON_RDELTA_KINDS; k++) {
        f->base[k] = at;
        at += f->count[k] * f->sz[k]; /* <= 2^32 * 4096: no overflow */
    }
    return at == f->p_len ? 0 : -EBADMSG;
}

int64_t cuptimon__rdelta_length(const uint8_t *in, size_t n)
{
    struct form f;
    int rc = parse_trailer(in, n, &f);
    return rc < 0 ? rc : (int64_t)f.len;
}

/* Restores the records into out, or (out NULL) compares each restored
 * word with ref's as it is computed, keeping nothing: the writer's check
 * of its own output costs no store and no buffer.  Inlined into each
 * caller, so that each loop is the one it needs. */
static inline __attribute__((always_inline)) int restore(const struct form *f, const uint8_t *in,
                                                         uint8_t *out, const uint8_t *ref)
{
    size_t idx[CUPTIMON_RDELTA_KINDS] = {0};
    const uint8_t *prev[CUPTIMON_RDELTA_KINDS];
    /* Where the records restored so far are: out, or ref, whose records
     * they equal as long as the comparison holds. */
    const uint8_t *done = out ? out : ref;

    for (unsigned k = 0; k < CUPTIMON_RDELTA_KINDS; k++)
        prev[k] = zeros;
    for (size_t j = 0, at = 0; j < f->nrec; j++) {
        uint8_t k = f->seq[j];
        size_t words = f->sz[k] / 8, stride = f->count[k] * 8;
        const uint8_t *col = in + f->base[k] + idx[k] * 8, *p = prev[k];
        if (out) {
            for (size_t w = 0; w < words; w++)
                st64(out + at + 8 * w, ld64(col + w * stride) + ld64(p + 8 * w));
        } else {
            uint64_t diff = 0;
            for (size_t w = 0; w < words; w++)
                diff |= (ld64(col + w * stride) + ld64(p + 8 * w)) ^ ld64(ref + at + 8 * w);
            if (diff)
                return -EBADMSG;
        }
        prev[k] = done + at;
        idx[k]++;
        at += f->sz[k];
    }
    if (out)
        memcpy(out + f->p_len, f->tail, f->len - f->p_len);
    else if (memcmp(ref + f->p_len, f->tail, f->len - f->p_len) != 0)
        return -EBADMSG;
    return 0;
}

int cuptimon__rdelta_decode(const uint8_t *in, size_t n, uint8_t *out, size_t cap, size_t *len)
{
    struct form f;
    int rc = parse(in, n, &f);
    if (rc < 0 || f.len > cap)
        return -EBADMSG;
    if ((rc = restore(&f, in, out, NULL)) < 0)
        return rc;
    *len = f.len;
    return 0;
}

int cuptimon__rdelta_verify(const uint8_t *in, size_t n, const uint8_t *raw, size_t len)
{
    struct form f;
    int rc = parse(in, n, &f);
    if (rc < 0 || f.len != len)
        return -EBADMSG;
    return restore(&f, in, NULL, raw);
}
