/*
 * libFuzzer target: the input is a byte stream as a daemon or producer
 * would read it from a socket.  Frames are parsed in turn; each body goes
 * to the decoder of its type; STRINGS bodies are walked.  Every invariant
 * the protocol promises is checked with abort(), which the fuzzer reports.
 *
 * The stream is parsed twice, whole and through a cuptimon_buf fed in
 * small chunks, and both must see the same frames and the same verdict:
 * a reader must not care how the kernel split its reads.
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

/* What the whole-stream pass saw, for the chunked pass to compare with. */
#define MAX_FRAMES 4096
struct seen {
    size_t n;
    uint16_t type[MAX_FRAMES];
    uint32_t length[MAX_FRAMES];
    int end; /* the return that stopped the walk */
};

static void walk_strings(const uint8_t *body, size_t len)
{
    struct cuptimon_strings_iter it;
    if (cuptimon__strings_iter_init(&it, body, len) < 0)
        return;
    uint32_t count = cuptimon__get_u32(body);
    /* A batch that reads back whole must re-encode to the same bytes. */
    struct cuptimon_buf re = {0};
    CHECK(cuptimon__strings_begin(&re) == 0);
    uint32_t got = 0;
    int rc;
    uint64_t ptr;
    const char *s;
    size_t slen;
    while ((rc = cuptimon__strings_next(&it, &ptr, &s, &slen)) == 1) {
        const uint8_t *u = (const uint8_t *)s;
        CHECK(u >= body + CUPTIMON_STRINGS_HDR_SIZE + CUPTIMON_STRING_ENTRY_HDR);
        CHECK(u + slen < body + len); /* the terminator is inside too */
        CHECK(slen <= CUPTIMON_STRING_MAX_LEN);
        CHECK(strnlen(s, (size_t)(body + len - u)) == slen);
        CHECK(++got <= count);
        CHECK(cuptimon__strings_add(&re, ptr, s, slen) == 0);
    }
    CHECK(rc == 0 || rc == -EBADMSG);
    if (rc == 0) {
        CHECK(got == count);
        CHECK(cuptimon__strings_count(&re) == count);
        CHECK(re.len == len && memcmp(re.data, body, len) == 0);
    }
    cuptimon__buf_free(&re);
}

static void decode_body(uint16_t type, const uint8_t *body, size_t len)
{
    uint8_t out[CUPTIMON_BUFFER_READY_SIZE];
    switch (type) {
    case CUPTIMON_MSG_BUFFER_READY: {
        struct cuptimon_buffer_ready m;
        int rc = cuptimon__buffer_ready_decode(body, len, &m);
        CHECK(rc == (len == CUPTIMON_BUFFER_READY_SIZE ? 0 : -EBADMSG));
        if (rc == 0) {
            cuptimon__buffer_ready_encode(out, &m);
            CHECK(memcmp(out, body, CUPTIMON_BUFFER_READY_SIZE) == 0);
        }
        break;
    }
    case CUPTIMON_MSG_BUFFER_RELEASE: {
        struct cuptimon_buffer_release m;
        int rc = cuptimon__buffer_release_decode(body, len, &m);
        CHECK(rc == (len == CUPTIMON_BUFFER_RELEASE_SIZE ? 0 : -EBADMSG));
        if (rc == 0) {
            cuptimon__buffer_release_encode(out, &m);
            CHECK(memcmp(out, body, CUPTIMON_BUFFER_RELEASE_SIZE) == 0);
        }
        break;
    }
    case CUPTIMON_MSG_FLUSH: {
        struct cuptimon_flush m;
        int rc = cuptimon__flush_decode(body, len, &m);
        CHECK(rc == 0 || rc == -EBADMSG);
        if (len != CUPTIMON_FLUSH_SIZE)
            CHECK(rc == -EBADMSG);
        if (rc == 0) {
            CHECK(m.mode <= CUPTIMON_FLUSH_FENCE &&
                  (m.mode == CUPTIMON_FLUSH_FENCE) == (m.fence != 0));
            cuptimon__flush_encode(out, &m);
            CHECK(memcmp(out, body, CUPTIMON_FLUSH_SIZE) == 0);
        }
        break;
    }
    case CUPTIMON_MSG_FLUSH_DONE: {
        struct cuptimon_flush_done m;
        int rc = cuptimon__flush_done_decode(body, len, &m);
        CHECK(rc == (len == CUPTIMON_FLUSH_DONE_SIZE ? 0 : -EBADMSG));
        if (rc == 0) {
            cuptimon__flush_done_encode(out, &m);
            CHECK(memcmp(out, body, CUPTIMON_FLUSH_DONE_SIZE) == 0);
        }
        break;
    }
    case CUPTIMON_MSG_HELD: {
        struct cuptimon_held m;
        uint8_t h[CUPTIMON_HELD_SIZE + CUPTIMON_HELD_EXT_SIZE];
        if (cuptimon__held_decode(body, len, &m) == 0) {
            /* A report that reads back holds only what it says: its name
             * ends the body, and its fixed part (and the declines, when it
             * says it has them) re-encodes to the bytes. */
            size_t fixed = cuptimon__held_size(&m);
            CHECK(len == fixed + m.name_len && m.name_len <= CUPTIMON_HELD_NAME_MAX);
            CHECK(m.slots_base <= m.slots_max && m.slots_out <= m.slots_max);
            cuptimon__held_encode(h, &m);
            CHECK(memcmp(h, body, fixed) == 0);
        } else {
            CHECK(len < CUPTIMON_HELD_SIZE || len != cuptimon__held_size(&m) + m.name_len ||
                  m.name_len > CUPTIMON_HELD_NAME_MAX || m.flags || m.slots_base > m.slots_max ||
                  m.slots_out > m.slots_max || m.grown > m.slots_max ||
                  m.grown_peak > m.slots_max || (m.kind >> 31) ||
                  memcmp(body + CUPTIMON_HELD_SIZE - 10, "\0\0\0\0\0\0\0\0\0\0", 10) != 0);
        }
        break;
    }
    case CUPTIMON_MSG_STRINGS: walk_strings(body, len); break;
    default:
        /* JSON bodies are json-c's business; only the name lookup here. */
        CHECK(cuptimon__type_name(type) != NULL);
        break;
    }
}

static void parse_whole(const uint8_t *data, size_t size, struct seen *sn)
{
    size_t off = 0;
    sn->n = 0;
    for (;;) {
        struct cuptimon_msg_hdr h;
        int rc = cuptimon__frame_parse(data + off, size - off, &h);
        if (rc != 0) {
            CHECK(rc == -EAGAIN || rc == -EBADMSG || rc == -EPROTO || rc == -EMSGSIZE);
            if (rc == -EPROTO)
                CHECK(h.version != CUPTIMON_PROTO_VERSION);
            sn->end = rc;
            return;
        }
        CHECK(h.magic == CUPTIMON_PROTO_MAGIC && h.version == CUPTIMON_PROTO_VERSION);
        CHECK(h.flags == 0);
        CHECK(h.length <= CUPTIMON_MSG_MAX_BODY);
        CHECK(h.length <= size - off - CUPTIMON_MSG_HDR_SIZE);
        /* A valid header re-encodes to its own bytes. */
        uint8_t hb[CUPTIMON_MSG_HDR_SIZE];
        cuptimon__hdr_encode(hb, h.type, h.length);
        CHECK(memcmp(hb, data + off, CUPTIMON_MSG_HDR_SIZE) == 0);
        int named = strcmp(cuptimon__type_name(h.type), "unknown") != 0;
        CHECK(cuptimon__type_known(h.type) == named);

        decode_body(h.type, data + off + CUPTIMON_MSG_HDR_SIZE, h.length);
        if (sn->n < MAX_FRAMES) {
            sn->type[sn->n] = h.type;
            sn->length[sn->n] = h.length;
        }
        sn->n++;
        off += CUPTIMON_MSG_HDR_SIZE + h.length;
    }
}

static void parse_chunked(const uint8_t *data, size_t size, const struct seen *sn)
{
    struct cuptimon_buf in = {0};
    size_t chunk = 1 + (size ? data[0] % 29 : 0);
    size_t fed = 0, n = 0;
    int end = -EAGAIN;
    for (;;) {
        struct cuptimon_msg_hdr h;
        int rc = cuptimon__frame_parse(in.data, in.len, &h);
        if (rc == 0) {
            if (n < MAX_FRAMES) {
                CHECK(h.type == sn->type[n]);
                CHECK(h.length == sn->length[n]);
            }
            n++;
            cuptimon__buf_consume(&in, CUPTIMON_MSG_HDR_SIZE + h.length);
            continue;
        }
        if (rc != -EAGAIN) {
            end = rc;
            break;
        }
        if (fed == size)
            break;
        size_t k = size - fed < chunk ? size - fed : chunk;
        CHECK(cuptimon__buf_append(&in, data + fed, k) == 0);
        fed += k;
    }
    CHECK(n == sn->n);
    CHECK(end == sn->end);
    cuptimon__buf_free(&in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct seen sn;
    parse_whole(data, size, &sn);
    parse_chunked(data, size, &sn);
    return 0;
}
