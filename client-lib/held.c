/*
 * What CUPTI holds behind running work (issue 33), seen from the IO thread.
 *
 * CUPTI writes a kernel's, copy's or memset's record into the current
 * buffer at launch, incomplete (bit 31 of its kind set, no times), fills it
 * in when the work has ended, in launch order, and hands buffers back in
 * the order it filled them (docs/gpu-runs/20261204-h200-probe).  So one
 * kernel that runs for seconds holds every record launched after it, on
 * any stream, in buffers CUPTI keeps until it ends.  The slots are the
 * shim's memory, so the IO thread can see that without CUPTI's help and
 * without a flush: it walks the slots CUPTI holds, in the order CUPTI asked
 * for them, by the records' sizes, and finds the oldest record that is not
 * complete, "the head", which every other held record waits on.
 *
 * That walk serves three things:
 *  - the HELD report to the daemon (status, top, metrics, the warning
 *    after inflight_warn_s): what the head is (kind, correlation id,
 *    device, stream, a kernel's name), since when it is the head, and how
 *    many records and bytes wait behind it, with the pool's growth;
 *  - spacing out the plain flushes while the same head runs: a flush
 *    closes every current buffer, and each buffer closed behind the head
 *    is held too, so a flush a period would waste a slot a period on a
 *    buffer that is nearly empty (cuptimon__held_skip);
 *  - nothing else: the walk never changes a slot.
 *
 * The walk is incremental (struct shim_scan): CUPTI only appends records
 * to a buffer and completes them in order, so each pass continues where the
 * last one stopped, and a held buffer is walked about once in all.  The
 * reads race with CUPTI's writes on purpose, a 4-byte kind at a time, as
 * cuptimon__mark_complete_held's do; a record's other fields are read only
 * for the head, whose launch-time fields CUPTI wrote before it began the
 * next record.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

/* The IO thread's state across passes. */
static struct {
    /* the current head, and since when (CLOCK_REALTIME ns) */
    int head;
    uint32_t slot, off;
    uint64_t req, since_ns;
    /* the head at the last flush that ran, when it ran (monotonic ms), and
     * how long to wait before the next while the same head holds */
    int fl_head;
    uint32_t fl_slot, fl_off;
    uint64_t fl_req;
    long long fl_ms, backoff_ms;
    /* the head kernel's name, read once per name pointer */
    uint64_t name_ptr;
    uint16_t name_len;
    char name[CUPTIMON_HELD_NAME_MAX];
    /* the last report sent (its body), and when (monotonic ms) */
    int sent;
    uint8_t last[CUPTIMON_HELD_SIZE + CUPTIMON_HELD_EXT_SIZE + CUPTIMON_HELD_NAME_MAX];
    size_t last_len;
    long long sent_ms;
    int walk_warned; /* a walk stopped at a record it could not step over */
} hs;

#define FLUSH_BACKOFF_MIN_MS 1000
#define FLUSH_BACKOFF_MAX_MS 16000

static struct shim *sort_shim; /* qsort's context: the IO thread only */

static int by_request(const void *a, const void *b)
{
    uint64_t ra =
        atomic_load_explicit(&sort_shim->slot_req[*(const uint32_t *)a], memory_order_relaxed);
    uint64_t rb =
        atomic_load_explicit(&sort_shim->slot_req[*(const uint32_t *)b], memory_order_relaxed);
    return ra < rb ? -1 : ra > rb;
}

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whether h's head was the head when the last flush ran: the flush left
 * it incomplete. */
static int held_since_flush(const struct shim_held *h)
{
    return h->head && hs.fl_head && hs.fl_slot == h->head_slot && hs.fl_off == h->head_off &&
           hs.fl_req == h->head_req;
}

/* Continues the walk of slot idx (c is its cache): records are appended
 * at c->end, and complete from c->done on while their kinds are clean.
 * Returns -1 at a record whose size is unknown (the walk cannot step). */
__attribute__((no_sanitize("thread"))) static int walk(struct shim *s, uint32_t idx,
                                                       struct shim_scan *c)
{
    const uint8_t *b = s->pool + (size_t)idx * s->slot_size;
    while ((uint64_t)c->end + 8 <= s->slot_size) {
        uint32_t kind =
            __atomic_load_n((const uint32_t *)(const void *)(b + c->end), __ATOMIC_RELAXED);
        if (kind == 0)
            break;
        uint32_t size = cuptimon__record_size(s, kind & ~KIND_INCOMPLETE);
        if (size == 0 || (uint64_t)c->end + size > s->slot_size) {
            if (!hs.walk_warned) {
                hs.walk_warned = 1;
                cuptimon__log("the view of work in flight cannot step over a record of kind "
                              "0x%x (%u bytes) at byte %u of a buffer CUPTI holds; status shows "
                              "it as partial",
                              kind, size, c->end);
            }
            return -1;
        }
        c->end += size;
        c->records++;
    }
    while (c->done < c->end) {
        uint32_t kind =
            __atomic_load_n((const uint32_t *)(const void *)(b + c->done), __ATOMIC_RELAXED);
        uint32_t size = cuptimon__record_size(s, kind);
        if ((kind & KIND_INCOMPLETE) || size == 0)
            break;
        c->done += size;
        c->done_recs++;
    }
    return 0;
}

/*
 * A string in this process's memory at an address CUPTI wrote, read
 * without trusting it: write(2) from a bad address fails with EFAULT where
 * a load would kill the job.  A pipe, page by page, up to the first NUL.
 * The write is a raw system call: the bytes after the NUL, up to the
 * chunk's end, are read too, which the kernel does safely and a
 * sanitizer's write(2) interceptor reports as an overflow.
 * Returns the length read (0: none).
 */
static size_t read_own_string(uint64_t addr, char *out, size_t max)
{
    int p[2];
    size_t got = 0;
    if (addr == 0 || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
        return 0;
    while (got < max) {
        size_t chunk = 4096 - (size_t)((addr + got) & 4095);
        if (chunk > max - got)
            chunk = max - got;
        ssize_t n = (ssize_t)syscall(SYS_write, p[1], (const void *)(uintptr_t)(addr + got), chunk);
        if (n <= 0 || read(p[0], out + got, (size_t)n) != n)
            break;
        const char *z = memchr(out + got, '\0', (size_t)n);
        if (z) {
            got = (size_t)(z - out);
            break;
        }
        got += (size_t)n;
    }
    close(p[0]);
    close(p[1]);
    return got;
}

/* A copy of the record at src (8-aligned, size a multiple of 8), a word
 * at a time: CUPTI may be writing it (its times, once the work ends). */
__attribute__((no_sanitize("thread"))) static void snapshot(uint64_t *dst, const uint8_t *src,
                                                            size_t size)
{
    for (size_t i = 0; i < size / 8; i++)
        dst[i] = __atomic_load_n((const uint64_t *)(const void *)(src + 8 * i), __ATOMIC_RELAXED);
}

/* The head record's launch-time fields, read from a copy through the
 * release's layout when its size there is the size CUPTI's walk measured. */
static void head_fields(struct shim *s, struct shim_held *h)
{
    uint64_t copy[512 / 8];
    const uint8_t *rec = (const uint8_t *)copy;
    const uint8_t *at = s->pool + (size_t)h->head_slot * s->slot_size + h->head_off;
    snapshot(copy, at, 8);
    uint32_t kind = (uint32_t)copy[0] & ~KIND_INCOMPLETE;
    const struct cuptimon_rec_layout *l =
        s->cupti.release && kind < CUPTIMON_LAYOUT_KINDS ? s->cupti.release->kinds[kind] : NULL;
    struct cuptimon_held *m = &h->msg;
    uint64_t name = 0;
    m->kind = kind;
    if (l == NULL || cuptimon__record_size(s, kind) != l->size || l->size > sizeof copy ||
        l->size % 8 || (uint64_t)h->head_off + l->size > s->slot_size)
        return;
    snapshot(copy, at, l->size);
    switch (l->type) {
    case CUPTIMON_REC_KERNEL:
        m->correlation_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FK_correlationId);
        m->device_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FK_deviceId);
        m->context_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FK_contextId);
        m->stream_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FK_streamId);
        name = cuptimon__rec_get(l, rec, CUPTIMON_FK_name);
        break;
    case CUPTIMON_REC_MEMCPY:
        m->correlation_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FMC_correlationId);
        m->device_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FMC_deviceId);
        m->context_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FMC_contextId);
        m->stream_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FMC_streamId);
        m->bytes = cuptimon__rec_get(l, rec, CUPTIMON_FMC_bytes);
        break;
    case CUPTIMON_REC_P2P:
        m->correlation_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FP2P_correlationId);
        m->device_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FP2P_deviceId);
        m->context_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FP2P_contextId);
        m->stream_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FP2P_streamId);
        m->bytes = cuptimon__rec_get(l, rec, CUPTIMON_FP2P_bytes);
        break;
    case CUPTIMON_REC_MEMSET:
        m->correlation_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FMS_correlationId);
        m->device_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FMS_deviceId);
        m->context_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FMS_contextId);
        m->stream_id = (uint32_t)cuptimon__rec_get(l, rec, CUPTIMON_FMS_streamId);
        m->bytes = cuptimon__rec_get(l, rec, CUPTIMON_FMS_bytes);
        break;
    default: break;
    }
    if (name != hs.name_ptr) {
        hs.name_ptr = name;
        hs.name_len = (uint16_t)read_own_string(name, hs.name, sizeof hs.name);
    }
    if (name) {
        memcpy(h->name, hs.name, hs.name_len);
        h->name[hs.name_len] = '\0';
        m->name_len = hs.name_len;
    }
}

void cuptimon__held_scan(struct shim *s, struct shim_held *h)
{
    uint32_t n = 0;
    memset(h, 0, sizeof *h);
    h->scanned = 1;
    for (uint32_t i = 0; i < s->nslots; i++)
        if (atomic_load_explicit(&s->slot_state[i], memory_order_relaxed) == SLOT_CUPTI &&
            atomic_load_explicit(&s->slot_gen[i], memory_order_relaxed) != UINT64_MAX)
            s->scan_order[n++] = i;
    /* On CUPTI's v2 path a buffer's record layouts come only with the
     * buffer, when CUPTI completes it: those it holds are not read (the
     * view is "unavailable" in status, and nothing is said on the job's
     * stderr: it is not a fault). */
    uint32_t walked = s->v2 ? 0 : n;
    if (s->v2)
        h->scanned = 0;
    sort_shim = s;
    qsort(s->scan_order, walked, sizeof *s->scan_order, by_request);
    for (uint32_t k = 0; k < walked; k++) {
        uint32_t idx = s->scan_order[k];
        uint64_t req = atomic_load_explicit(&s->slot_req[idx], memory_order_relaxed);
        struct shim_scan *c = &s->scan[idx];
        if (c->req != req)
            *c = (struct shim_scan){.req = req};
        if (walk(s, idx, c) < 0)
            h->scanned = 0;
        if (!h->head && c->done < c->end) {
            h->head = 1;
            h->head_slot = idx;
            h->head_off = c->done;
            h->head_req = req;
            h->buffers = 1;
            h->records = c->records - c->done_recs;
            h->bytes = c->end - c->done;
        } else if (h->head) {
            h->buffers++;
            h->records += c->records;
            h->bytes += c->end;
        } else if (c->records > 0) {
            /* Before the head and complete: a flush hands it back. */
            h->complete_held = 1;
        }
    }
    if (!h->head)
        h->buffers = n;

    struct cuptimon_held *m = &h->msg;
    uint64_t now = realtime_ns();
    if (h->head) {
        if (!hs.head || hs.slot != h->head_slot || hs.off != h->head_off || hs.req != h->head_req)
            hs.since_ns = now;
        /* CUPTI completes the records of the buffer it fills only when it
         * closes it (H100: every record there stays incomplete until then),
         * so an incomplete record is work still running only once a flush,
         * which closes that buffer, has left it so.  Until then it is
         * reported as no head (the counts are of the held buffers). */
        if (held_since_flush(h)) {
            m->since_ns = hs.since_ns;
            m->records = h->records;
            m->held_bytes = h->bytes;
            head_fields(s, h);
        }
    }
    hs.head = h->head;
    hs.slot = h->head_slot;
    hs.off = h->head_off;
    hs.req = h->head_req;
    if (s->cupti.GetTimestamp == NULL || s->cupti.GetTimestamp(&m->cupti_ts) != CUPTI_SUCCESS)
        m->cupti_ts = 0;
    m->realtime_ns = now;
    m->buffers = m->since_ns ? h->buffers : n;
    m->flushes_skipped = atomic_load(&s->flushes_skipped);
    m->slots_base = s->nbase;
    m->slots_max = s->nslots;
    m->slots_out = s->nslots - atomic_load(&s->pool_free);
    m->grown = atomic_load(&s->grown);
    m->grown_peak = atomic_load(&s->grown_peak);
    if (m->slots_out > s->nslots) /* a free count read mid-update */
        m->slots_out = s->nslots;
    if (m->grown > s->nslots)
        m->grown = s->nslots;
    m->flags = h->scanned ? 0 : CUPTIMON_HELD_UNSCANNED;
    shim_debug(s,
               "held: %u buffers CUPTI holds, walked%s; head %s (slot %u at byte %u, kind 0x%x); "
               "%" PRIu64 " records in %" PRIu64 " bytes from it on",
               n, h->scanned ? "" : " in part", h->head ? "found" : "none", h->head_slot,
               h->head_off, m->kind, h->records, h->bytes);
}

int cuptimon__held_skip(struct shim *s, const struct shim_held *h, long long now_ms)
{
    (void)s;
    int stalled = h->scanned && !h->complete_held && held_since_flush(h);
    if (!stalled) {
        hs.backoff_ms = FLUSH_BACKOFF_MIN_MS;
        return 0;
    }
    /* CUPTI completes records when it looks, at a flush (the double models
     * it so, and nothing on the H200 says otherwise): without flushes the
     * head would never move.  So flushes go on, further apart the longer
     * the same work holds everything: after a second, two, four, ... at
     * most FLUSH_BACKOFF_MAX_MS. */
    long long since = now_ms - hs.fl_ms;
    if (since < hs.backoff_ms)
        return 1;
    hs.backoff_ms = 2 * since < FLUSH_BACKOFF_MAX_MS ? 2 * since : FLUSH_BACKOFF_MAX_MS;
    return 0;
}

void cuptimon__held_flushed(struct shim *s, const struct shim_held *h, long long now_ms)
{
    (void)s;
    hs.fl_head = h->head;
    hs.fl_slot = h->head_slot;
    hs.fl_off = h->head_off;
    hs.fl_req = h->head_req;
    hs.fl_ms = now_ms;
}

void cuptimon__held_reset(void)
{
    hs.sent = 0;
}

int cuptimon__held_frame(struct shim *s, const struct shim_held *h, struct cuptimon_buf *out,
                         long long now_ms)
{
    (void)s;
    uint8_t body[CUPTIMON_HELD_SIZE + CUPTIMON_HELD_EXT_SIZE + CUPTIMON_HELD_NAME_MAX];
    size_t fixed = cuptimon__held_size(&h->msg);
    cuptimon__held_encode(body, &h->msg);
    memcpy(body + fixed, h->name, h->msg.name_len);
    size_t len = fixed + h->msg.name_len;
    /* The same report as the last one, its sampling times aside (the first
     * 16 bytes), goes again only while work is held, once a second. */
    int same = hs.sent && hs.last_len == len && memcmp(hs.last + 16, body + 16, len - 16) == 0;
    if (same &&
        (!(h->head || h->msg.grown > 0 || h->msg.declining_since_ns) || now_ms - hs.sent_ms < 1000))
        return 0;
    if (cuptimon__frame_append(out, CUPTIMON_MSG_HELD, body, len) < 0)
        return 0;
    hs.sent = 1;
    memcpy(hs.last, body, len);
    hs.last_len = len;
    hs.sent_ms = now_ms;
    return 1;
}
