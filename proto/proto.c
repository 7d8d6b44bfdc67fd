/* Framing and body encoders/decoders of the cuptimon wire protocol. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cuptimon-proto.h"

void cuptimon__hdr_encode(uint8_t out[CUPTIMON_MSG_HDR_SIZE], uint16_t type, uint32_t length)
{
    cuptimon__put_u32(out, CUPTIMON_PROTO_MAGIC);
    cuptimon__put_u16(out + 4, CUPTIMON_PROTO_VERSION);
    cuptimon__put_u16(out + 6, type);
    cuptimon__put_u32(out + 8, length);
    cuptimon__put_u32(out + 12, 0);
}

int cuptimon__frame_parse(const uint8_t *buf, size_t len, struct cuptimon_msg_hdr *hdr)
{
    if (len < CUPTIMON_MSG_HDR_SIZE)
        return -EAGAIN;
    hdr->magic = cuptimon__get_u32(buf);
    hdr->version = cuptimon__get_u16(buf + 4);
    hdr->type = cuptimon__get_u16(buf + 6);
    hdr->length = cuptimon__get_u32(buf + 8);
    hdr->flags = cuptimon__get_u32(buf + 12);
    if (hdr->magic != CUPTIMON_PROTO_MAGIC || hdr->flags != 0)
        return -EBADMSG;
    if (hdr->version != CUPTIMON_PROTO_VERSION)
        return -EPROTO;
    if (hdr->length > CUPTIMON_MSG_MAX_BODY)
        return -EMSGSIZE;
    if (len - CUPTIMON_MSG_HDR_SIZE < hdr->length)
        return -EAGAIN;
    return 0;
}

static const struct {
    uint16_t type;
    const char *name;
} type_names[] = {
    {CUPTIMON_MSG_HELLO, "HELLO"},
    {CUPTIMON_MSG_HELLO_ACK, "HELLO_ACK"},
    {CUPTIMON_MSG_BYE, "BYE"},
    {CUPTIMON_MSG_BUFFER_READY, "BUFFER_READY"},
    {CUPTIMON_MSG_BUFFER_RELEASE, "BUFFER_RELEASE"},
    {CUPTIMON_MSG_STRINGS, "STRINGS"},
    {CUPTIMON_MSG_FLUSH_DONE, "FLUSH_DONE"},
    {CUPTIMON_MSG_RANGES, "RANGES"},
    {CUPTIMON_MSG_LAYOUTS, "LAYOUTS"},
    {CUPTIMON_MSG_HELD, "HELD"},
    {CUPTIMON_MSG_FLUSH, "FLUSH"},
    {CUPTIMON_MSG_ENABLE, "ENABLE"},
    {CUPTIMON_MSG_DISABLE, "DISABLE"},
    {CUPTIMON_MSG_CONFIG, "CONFIG"},
    {CUPTIMON_MSG_CONTROL, "CONTROL"},
    {CUPTIMON_MSG_REPLY_OK, "REPLY_OK"},
    {CUPTIMON_MSG_REPLY_ERROR, "REPLY_ERROR"},
};

int cuptimon__type_known(uint16_t type)
{
    for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
        if (type_names[i].type == type)
            return 1;
    return 0;
}

const char *cuptimon__type_name(uint16_t type)
{
    for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
        if (type_names[i].type == type)
            return type_names[i].name;
    return "unknown";
}

/* ---- buffers ---------------------------------------------------------- */

int cuptimon__buf_reserve(struct cuptimon_buf *b, size_t extra)
{
    if (extra > SIZE_MAX / 2 - b->len)
        return -ENOMEM;
    if (b->len + extra <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra)
        cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d)
        return -ENOMEM;
    b->data = d;
    b->cap = cap;
    return 0;
}

int cuptimon__buf_append(struct cuptimon_buf *b, const void *p, size_t n)
{
    int rc = cuptimon__buf_reserve(b, n);
    if (rc < 0)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

void cuptimon__buf_consume(struct cuptimon_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

void cuptimon__buf_free(struct cuptimon_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int cuptimon__frame_append(struct cuptimon_buf *b, uint16_t type, const void *body, size_t len)
{
    if (len > CUPTIMON_MSG_MAX_BODY)
        return -EMSGSIZE;
    int rc = cuptimon__buf_reserve(b, CUPTIMON_MSG_HDR_SIZE + len);
    if (rc < 0)
        return rc;
    cuptimon__hdr_encode(b->data + b->len, type, (uint32_t)len);
    b->len += CUPTIMON_MSG_HDR_SIZE;
    return cuptimon__buf_append(b, body, len);
}

/* ---- data-path bodies ------------------------------------------------- */

void cuptimon__buffer_ready_encode(uint8_t out[CUPTIMON_BUFFER_READY_SIZE],
                                   const struct cuptimon_buffer_ready *m)
{
    cuptimon__put_u32(out, m->slot);
    cuptimon__put_u32(out + 4, m->stream_id);
    cuptimon__put_u64(out + 8, m->valid_size);
    cuptimon__put_u64(out + 16, m->context);
    cuptimon__put_u64(out + 24, m->dropped);
    cuptimon__put_u64(out + 32, m->cupti_ts);
    cuptimon__put_u64(out + 40, m->realtime_ns);
    cuptimon__put_u64(out + 48, m->seq);
    cuptimon__put_u64(out + 56, m->records);
}

int cuptimon__buffer_ready_decode(const uint8_t *body, size_t len, struct cuptimon_buffer_ready *m)
{
    if (len != CUPTIMON_BUFFER_READY_SIZE)
        return -EBADMSG;
    m->slot = cuptimon__get_u32(body);
    m->stream_id = cuptimon__get_u32(body + 4);
    m->valid_size = cuptimon__get_u64(body + 8);
    m->context = cuptimon__get_u64(body + 16);
    m->dropped = cuptimon__get_u64(body + 24);
    m->cupti_ts = cuptimon__get_u64(body + 32);
    m->realtime_ns = cuptimon__get_u64(body + 40);
    m->seq = cuptimon__get_u64(body + 48);
    m->records = cuptimon__get_u64(body + 56);
    return 0;
}

void cuptimon__buffer_release_encode(uint8_t out[CUPTIMON_BUFFER_RELEASE_SIZE],
                                     const struct cuptimon_buffer_release *m)
{
    cuptimon__put_u32(out, m->slot);
    cuptimon__put_u32(out + 4, m->status);
    cuptimon__put_u64(out + 8, m->seq);
}

int cuptimon__buffer_release_decode(const uint8_t *body, size_t len,
                                    struct cuptimon_buffer_release *m)
{
    if (len != CUPTIMON_BUFFER_RELEASE_SIZE)
        return -EBADMSG;
    m->slot = cuptimon__get_u32(body);
    m->status = cuptimon__get_u32(body + 4);
    m->seq = cuptimon__get_u64(body + 8);
    return 0;
}

void cuptimon__flush_encode(uint8_t out[CUPTIMON_FLUSH_SIZE], const struct cuptimon_flush *m)
{
    cuptimon__put_u64(out, m->flush_id);
    cuptimon__put_u32(out + 8, m->mode);
    cuptimon__put_u32(out + 12, m->mode == CUPTIMON_FLUSH_FENCE ? m->fence : 0);
}

int cuptimon__flush_decode(const uint8_t *body, size_t len, struct cuptimon_flush *m)
{
    if (len != CUPTIMON_FLUSH_SIZE)
        return -EBADMSG;
    m->flush_id = cuptimon__get_u64(body);
    m->mode = cuptimon__get_u32(body + 8);
    m->fence = cuptimon__get_u32(body + 12);
    if (m->mode > CUPTIMON_FLUSH_FENCE || (m->mode == CUPTIMON_FLUSH_FENCE) != (m->fence != 0))
        return -EBADMSG;
    return 0;
}

void cuptimon__flush_done_encode(uint8_t out[CUPTIMON_FLUSH_DONE_SIZE],
                                 const struct cuptimon_flush_done *m)
{
    cuptimon__put_u64(out, m->flush_id);
    cuptimon__put_u64(out + 8, m->buffers);
    cuptimon__put_u64(out + 16, m->buffers_lost);
    cuptimon__put_u64(out + 24, m->requests_declined);
    cuptimon__put_u64(out + 32, m->foreign_buffers);
    cuptimon__put_u64(out + 40, m->flags);
}

int cuptimon__flush_done_decode(const uint8_t *body, size_t len, struct cuptimon_flush_done *m)
{
    if (len != CUPTIMON_FLUSH_DONE_SIZE)
        return -EBADMSG;
    m->flush_id = cuptimon__get_u64(body);
    m->buffers = cuptimon__get_u64(body + 8);
    m->buffers_lost = cuptimon__get_u64(body + 16);
    m->requests_declined = cuptimon__get_u64(body + 24);
    m->foreign_buffers = cuptimon__get_u64(body + 32);
    m->flags = cuptimon__get_u64(body + 40);
    return 0;
}

/* ---- what CUPTI holds --------------------------------------------------- */

size_t cuptimon__held_size(const struct cuptimon_held *m)
{
    return CUPTIMON_HELD_SIZE + (m->flags & CUPTIMON_HELD_DECLINES ? CUPTIMON_HELD_EXT_SIZE : 0);
}

void cuptimon__held_encode(uint8_t *out, const struct cuptimon_held *m)
{
    const uint64_t w64[] = {m->cupti_ts, m->realtime_ns, m->since_ns,       m->bytes,
                            m->records,  m->held_bytes,  m->flushes_skipped};
    const uint32_t w32[] = {m->kind,      m->correlation_id, m->device_id,  m->context_id,
                            m->stream_id, m->buffers,        m->slots_base, m->slots_max,
                            m->slots_out, m->grown,          m->grown_peak, m->flags};
    size_t o = 0;
    for (size_t i = 0; i < sizeof w64 / sizeof w64[0]; i++, o += 8)
        cuptimon__put_u64(out + o, w64[i]);
    for (size_t i = 0; i < sizeof w32 / sizeof w32[0]; i++, o += 4)
        cuptimon__put_u32(out + o, w32[i]);
    cuptimon__put_u16(out + o, m->name_len);
    cuptimon__put_u16(out + o + 2, 0);
    memset(out + o + 4, 0, CUPTIMON_HELD_SIZE - o - 4);
    if (m->flags & CUPTIMON_HELD_DECLINES) {
        cuptimon__put_u64(out + CUPTIMON_HELD_SIZE, m->declined);
        cuptimon__put_u64(out + CUPTIMON_HELD_SIZE + 8, m->declining_since_ns);
    }
}

int cuptimon__held_decode(const uint8_t *body, size_t len, struct cuptimon_held *m)
{
    if (len < CUPTIMON_HELD_SIZE)
        return -EBADMSG;
    uint64_t *w64[] = {&m->cupti_ts, &m->realtime_ns, &m->since_ns,       &m->bytes,
                       &m->records,  &m->held_bytes,  &m->flushes_skipped};
    uint32_t *w32[] = {&m->kind,      &m->correlation_id, &m->device_id,  &m->context_id,
                       &m->stream_id, &m->buffers,        &m->slots_base, &m->slots_max,
                       &m->slots_out, &m->grown,          &m->grown_peak, &m->flags};
    size_t o = 0;
    for (size_t i = 0; i < sizeof w64 / sizeof w64[0]; i++, o += 8)
        *w64[i] = cuptimon__get_u64(body + o);
    for (size_t i = 0; i < sizeof w32 / sizeof w32[0]; i++, o += 4)
        *w32[i] = cuptimon__get_u32(body + o);
    m->name_len = cuptimon__get_u16(body + o);
    for (size_t i = o + 2; i < CUPTIMON_HELD_SIZE; i++)
        if (body[i])
            return -EBADMSG;
    m->declined = m->declining_since_ns = 0;
    if ((m->flags & CUPTIMON_HELD_DECLINES) && len >= CUPTIMON_HELD_SIZE + CUPTIMON_HELD_EXT_SIZE) {
        m->declined = cuptimon__get_u64(body + CUPTIMON_HELD_SIZE);
        m->declining_since_ns = cuptimon__get_u64(body + CUPTIMON_HELD_SIZE + 8);
    }
    if (m->name_len > CUPTIMON_HELD_NAME_MAX || len != cuptimon__held_size(m) + m->name_len ||
        (m->flags & ~(CUPTIMON_HELD_UNSCANNED | CUPTIMON_HELD_DECLINES)) ||
        (m->kind & 0x80000000u) || m->slots_base > m->slots_max || m->slots_out > m->slots_max ||
        m->grown > m->slots_max || m->grown_peak > m->slots_max)
        return -EBADMSG;
    return 0;
}

/* ---- annotation ranges -------------------------------------------------- */

void cuptimon__ranges_hdr_encode(uint8_t out[CUPTIMON_RANGES_HDR_SIZE],
                                 const struct cuptimon_ranges_hdr *h)
{
    cuptimon__put_u32(out, h->count);
    cuptimon__put_u32(out + 4, h->dropped);
    cuptimon__put_u64(out + 8, h->cupti_ts);
    cuptimon__put_u64(out + 16, h->realtime_ns);
}

void cuptimon__range_encode(uint8_t out[CUPTIMON_RANGE_ENTRY_SIZE],
                            const struct cuptimon_range_ev *r)
{
    cuptimon__put_u64(out, r->ts);
    cuptimon__put_u64(out + 8, r->id);
    cuptimon__put_u64(out + 16, r->parent);
    cuptimon__put_u32(out + 24, r->tid);
    cuptimon__put_u16(out + 28, r->depth);
    out[30] = r->what;
    out[31] = 0;
}

void cuptimon__range_get(const uint8_t *body, uint32_t i, struct cuptimon_range_ev *r)
{
    const uint8_t *p = body + CUPTIMON_RANGES_HDR_SIZE + (size_t)i * CUPTIMON_RANGE_ENTRY_SIZE;
    r->ts = cuptimon__get_u64(p);
    r->id = cuptimon__get_u64(p + 8);
    r->parent = cuptimon__get_u64(p + 16);
    r->tid = cuptimon__get_u32(p + 24);
    r->depth = cuptimon__get_u16(p + 28);
    r->what = p[30];
}

int cuptimon__ranges_parse(const uint8_t *body, size_t len, struct cuptimon_ranges_hdr *h)
{
    if (len < CUPTIMON_RANGES_HDR_SIZE)
        return -EBADMSG;
    h->count = cuptimon__get_u32(body);
    h->dropped = cuptimon__get_u32(body + 4);
    h->cupti_ts = cuptimon__get_u64(body + 8);
    h->realtime_ns = cuptimon__get_u64(body + 16);
    /* Compared as a division so that no count can overflow the product. */
    if ((len - CUPTIMON_RANGES_HDR_SIZE) % CUPTIMON_RANGE_ENTRY_SIZE != 0 ||
        (len - CUPTIMON_RANGES_HDR_SIZE) / CUPTIMON_RANGE_ENTRY_SIZE != h->count)
        return -EBADMSG;
    for (uint32_t i = 0; i < h->count; i++) {
        const uint8_t *p = body + CUPTIMON_RANGES_HDR_SIZE + (size_t)i * CUPTIMON_RANGE_ENTRY_SIZE;
        uint64_t id = cuptimon__get_u64(p + 8), parent = cuptimon__get_u64(p + 16);
        if (id == 0 || id >= CUPTIMON_RANGE_ID_MAX || parent >= CUPTIMON_RANGE_ID_MAX ||
            (p[30] != CUPTIMON_RANGE_BEGIN && p[30] != CUPTIMON_RANGE_END) || p[31] != 0)
            return -EBADMSG;
    }
    return 0;
}

static char *dec_u64(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

size_t cuptimon__range_begin_format(char *out, const struct cuptimon_range_begin *b)
{
    char *p = dec_u64(out, b->unix_ns);
    *p++ = ' ';
    p = dec_u64(p, b->tid);
    *p++ = ' ';
    p = dec_u64(p, b->depth);
    *p++ = ' ';
    p = dec_u64(p, b->parent);
    *p = '\0';
    return (size_t)(p - out);
}

size_t cuptimon__range_end_format(char *out, uint64_t end_unix_ns)
{
    char *p = dec_u64(out, end_unix_ns);
    *p = '\0';
    return (size_t)(p - out);
}

/* One decimal field at s[*off, len) up to a space or the end: the exact
 * form the formatter writes, so that a hostile entry means one thing. */
static int parse_field(const char *s, size_t len, size_t *off, int last, uint64_t *v)
{
    size_t i = *off, start = i;
    uint64_t x = 0;
    while (i < len && s[i] >= '0' && s[i] <= '9') {
        unsigned d = (unsigned)(s[i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -EBADMSG;
        x = x * 10 + d;
        i++;
    }
    if (i == start || (s[start] == '0' && i - start > 1))
        return -EBADMSG;
    if (last ? i != len : (i >= len || s[i] != ' '))
        return -EBADMSG;
    *off = last ? i : i + 1;
    *v = x;
    return 0;
}

int cuptimon__range_begin_parse(const char *s, size_t len, struct cuptimon_range_begin *b)
{
    size_t off = 0;
    uint64_t ns, tid, depth, parent;
    if (parse_field(s, len, &off, 0, &ns) < 0 || parse_field(s, len, &off, 0, &tid) < 0 ||
        parse_field(s, len, &off, 0, &depth) < 0 || parse_field(s, len, &off, 1, &parent) < 0 ||
        tid > UINT32_MAX || depth > UINT16_MAX || parent >= CUPTIMON_RANGE_ID_MAX)
        return -EBADMSG;
    b->unix_ns = ns;
    b->tid = (uint32_t)tid;
    b->depth = (uint32_t)depth;
    b->parent = parent;
    return 0;
}

int cuptimon__range_end_parse(const char *s, size_t len, uint64_t *end_unix_ns)
{
    size_t off = 0;
    return parse_field(s, len, &off, 1, end_unix_ns);
}

/* ---- string batches --------------------------------------------------- */

int cuptimon__strings_begin(struct cuptimon_buf *b)
{
    uint8_t h[CUPTIMON_STRINGS_HDR_SIZE] = {0};
    b->len = 0;
    return cuptimon__buf_append(b, h, sizeof h);
}

int cuptimon__strings_add(struct cuptimon_buf *b, uint64_t ptr, const char *s, size_t len)
{
    if (len > CUPTIMON_STRING_MAX_LEN || b->len < CUPTIMON_STRINGS_HDR_SIZE)
        return -EINVAL;
    if (len && (!s || memchr(s, '\0', len)))
        return -EINVAL;
    int rc = cuptimon__buf_reserve(b, CUPTIMON_STRING_ENTRY_HDR + len + 1);
    if (rc < 0)
        return rc;
    uint8_t *p = b->data + b->len;
    cuptimon__put_u64(p, ptr);
    cuptimon__put_u32(p + 8, (uint32_t)len);
    if (len)
        memcpy(p + 12, s, len);
    p[12 + len] = '\0';
    b->len += CUPTIMON_STRING_ENTRY_HDR + len + 1;
    cuptimon__put_u32(b->data, cuptimon__get_u32(b->data) + 1);
    return 0;
}

uint32_t cuptimon__strings_count(const struct cuptimon_buf *b)
{
    return b->len >= CUPTIMON_STRINGS_HDR_SIZE ? cuptimon__get_u32(b->data) : 0;
}

int cuptimon__strings_iter_init(struct cuptimon_strings_iter *it, const uint8_t *body, size_t len)
{
    if (len < CUPTIMON_STRINGS_HDR_SIZE)
        return -EBADMSG;
    uint32_t count = cuptimon__get_u32(body);
    if (cuptimon__get_u32(body + 4) != 0)
        return -EBADMSG;
    /* Each entry takes at least 13 bytes; a count beyond that is a lie. */
    if ((uint64_t)count * (CUPTIMON_STRING_ENTRY_HDR + 1) > len - CUPTIMON_STRINGS_HDR_SIZE)
        return -EBADMSG;
    it->body = body;
    it->len = len;
    it->off = CUPTIMON_STRINGS_HDR_SIZE;
    it->left = count;
    return 0;
}

int cuptimon__strings_next(struct cuptimon_strings_iter *it, uint64_t *ptr, const char **s,
                           size_t *slen)
{
    if (it->left == 0)
        return it->off == it->len ? 0 : -EBADMSG;
    size_t room = it->len - it->off;
    if (room < CUPTIMON_STRING_ENTRY_HDR + 1)
        return -EBADMSG;
    const uint8_t *p = it->body + it->off;
    uint32_t n = cuptimon__get_u32(p + 8);
    if (n > CUPTIMON_STRING_MAX_LEN || (size_t)n + 1 > room - CUPTIMON_STRING_ENTRY_HDR)
        return -EBADMSG;
    const char *str = (const char *)p + CUPTIMON_STRING_ENTRY_HDR;
    if (str[n] != '\0' || memchr(str, '\0', n))
        return -EBADMSG;
    *ptr = cuptimon__get_u64(p);
    *s = str;
    *slen = n;
    it->off += CUPTIMON_STRING_ENTRY_HDR + n + 1;
    it->left--;
    return 1;
}

/* ---- NCCL records (issue 46) ------------------------------------------- */

void cuptimon__nccl_rec_encode(uint8_t out[CUPTIMON_NCCL_REC_SIZE],
                               const struct cuptimon_nccl_rec *r)
{
    memset(out, 0, CUPTIMON_NCCL_REC_SIZE);
    cuptimon__put_u32(out, CUPTIMON_KIND_NCCL);
    out[4] = r->what;
    out[5] = r->flags;
    out[6] = r->nchannels;
    out[7] = r->version;
    cuptimon__put_u64(out + 8, r->comm_id);
    cuptimon__put_u64(out + 16, r->seq);
    cuptimon__put_u64(out + 24, r->count);
    cuptimon__put_u64(out + 32, r->host_start);
    cuptimon__put_u64(out + 40, r->host_stop);
    cuptimon__put_u64(out + 48, r->host_end);
    cuptimon__put_u64(out + 56, r->gpu_start);
    cuptimon__put_u64(out + 64, r->gpu_end);
    cuptimon__put_u32(out + 72, r->tid);
    cuptimon__put_u32(out + 76, (uint32_t)r->rank);
    cuptimon__put_u32(out + 80, (uint32_t)r->nranks);
    cuptimon__put_u32(out + 84, (uint32_t)r->nnodes);
    cuptimon__put_u32(out + 88, (uint32_t)r->root);
    out[92] = r->nwarps;
    out[93] = r->channels_seen;
    memcpy(out + 96, r->func, CUPTIMON_NCCL_STR);
    memcpy(out + 112, r->datatype, CUPTIMON_NCCL_STR);
    memcpy(out + 128, r->algo, CUPTIMON_NCCL_STR);
    memcpy(out + 144, r->proto, CUPTIMON_NCCL_STR);
    memcpy(out + 160, r->comm_name, CUPTIMON_NCCL_NAME);
    cuptimon__put_u64(out + 224, r->completed);
    cuptimon__put_u64(out + 232, r->bytes);
    cuptimon__put_u64(out + 240, r->started);
}

/* A field's text up to its first NUL (or the whole field), NUL-terminated;
 * control bytes become '?' so that no reader has to guard against them. */
static void nccl_text(char *dst, const uint8_t *src, size_t n)
{
    size_t i = 0;
    for (; i < n && src[i]; i++)
        dst[i] = src[i] < 0x20 || src[i] == 0x7f ? '?' : (char)src[i];
    dst[i] = 0;
}

int cuptimon__nccl_rec_decode(const uint8_t *in, size_t len, struct cuptimon_nccl_rec *r,
                              struct cuptimon_nccl_text *t)
{
    if (len < CUPTIMON_NCCL_REC_SIZE || cuptimon__get_u32(in) != CUPTIMON_KIND_NCCL)
        return -EBADMSG;
    if (in[4] < CUPTIMON_NCCL_COLL || in[4] > CUPTIMON_NCCL_COMM_STATE || in[94] || in[95])
        return -EBADMSG;
    for (int i = 248; i < 256; i++)
        if (in[i])
            return -EBADMSG;
    memset(r, 0, sizeof *r);
    r->what = in[4];
    r->flags = in[5];
    r->nchannels = in[6];
    r->version = in[7];
    r->comm_id = cuptimon__get_u64(in + 8);
    r->seq = cuptimon__get_u64(in + 16);
    r->count = cuptimon__get_u64(in + 24);
    r->host_start = cuptimon__get_u64(in + 32);
    r->host_stop = cuptimon__get_u64(in + 40);
    r->host_end = cuptimon__get_u64(in + 48);
    r->gpu_start = cuptimon__get_u64(in + 56);
    r->gpu_end = cuptimon__get_u64(in + 64);
    r->tid = cuptimon__get_u32(in + 72);
    r->rank = (int32_t)cuptimon__get_u32(in + 76);
    r->nranks = (int32_t)cuptimon__get_u32(in + 80);
    r->nnodes = (int32_t)cuptimon__get_u32(in + 84);
    r->root = (int32_t)cuptimon__get_u32(in + 88);
    r->nwarps = in[92];
    r->channels_seen = in[93];
    r->completed = cuptimon__get_u64(in + 224);
    r->bytes = cuptimon__get_u64(in + 232);
    r->started = cuptimon__get_u64(in + 240);
    if (t) {
        nccl_text(t->func, in + 96, CUPTIMON_NCCL_STR);
        nccl_text(t->datatype, in + 112, CUPTIMON_NCCL_STR);
        nccl_text(t->algo, in + 128, CUPTIMON_NCCL_STR);
        nccl_text(t->proto, in + 144, CUPTIMON_NCCL_STR);
        nccl_text(t->comm_name, in + 160, CUPTIMON_NCCL_NAME);
    }
    return 0;
}

unsigned cuptimon__nccl_type_size(const char *dt)
{
    static const struct {
        const char *name;
        unsigned size;
    } types[] = {{"Int8", 1},      {"Uint8", 1},  {"Char", 1},     {"Int32", 4},
                 {"Int", 4},       {"Uint32", 4}, {"Int64", 8},    {"Uint64", 8},
                 {"Float16", 2},   {"Half", 2},   {"Float32", 4},  {"Float", 4},
                 {"Float64", 8},   {"Double", 8}, {"Bfloat16", 2}, {"Float8e4m3", 1},
                 {"Float8e5m2", 1}};
    if (dt == NULL)
        return 0;
    /* NCCL's strings are "ncclFloat32"; PyTorch's and nccl-tests' spell
     * the same types in lower case without the prefix. */
    if (strncmp(dt, "nccl", 4) == 0)
        dt += 4;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcasecmp(dt, types[i].name) == 0)
            return types[i].size;
    return 0;
}
