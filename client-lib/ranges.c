/*
 * Annotation ranges: the time of every cuptimon_push_annotation and
 * cuptimon_pop_annotation, kept so that traces can draw each annotation as
 * a range on its thread (Kineto's user_annotation) and over the GPU work
 * it launched (gpu_user_annotation).
 *
 * The job's threads only append to a bounded lock-free queue (Vyukov's
 * bounded multi-producer queue: one compare-and-swap per entry, no lock,
 * no allocation, no system call); a full queue costs the entry, which is
 * counted and reported to the daemon in the next RANGES batch, never a
 * wait.  The IO thread takes the entries and frames them as RANGES
 * messages, after the strings that name them.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "mpq.h"
#include "shim.h"

#define RANGE_SLOTS 16384u /* power of two: 512 KiB of entries, touched as used */

typedef CUPTIMON_MPQ_SLOT(struct cuptimon_range_ev) rslot;
static rslot ring[RANGE_SLOTS];
static struct cuptimon_mpq q = CUPTIMON_MPQ_OVER(ring);
static _Atomic int ring_ready;
static _Atomic uint64_t dropped, dropped_total;

/* The slots' sequence numbers start at their index; done once, before the
 * first entry (cuptimon_init calls it). */
void cuptimon__ranges_init(void)
{
    if (atomic_load(&ring_ready))
        return;
    cuptimon__mpq_init(&q);
    atomic_store(&ring_ready, 1);
}

int cuptimon__range_note(const struct cuptimon_range_ev *ev)
{
    if (!atomic_load_explicit(&ring_ready, memory_order_acquire))
        return -EAGAIN;
    if (cuptimon__mpq_put(&q, ev, NULL) == 0)
        return 0;
    /* Full: the IO thread is behind (or no daemon takes ranges). */
    atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&dropped_total, 1, memory_order_relaxed);
    return -ENOBUFS;
}

/* One consumer: the IO thread. */
static int take(struct cuptimon_range_ev *ev)
{
    return cuptimon__mpq_take(&q, ev);
}

uint32_t cuptimon__ranges_pending(void)
{
    return cuptimon__mpq_pending(&q);
}

uint64_t cuptimon__ranges_dropped(void)
{
    return atomic_load(&dropped_total);
}

/* Moves the queued entries into RANGES frames at the end of out (send:
 * 1), or discards them (send: 0, a daemon that does not take ranges).
 * The clock pair is sampled once per frame, after its entries were taken,
 * so every entry's timestamp is at or before it. */
int cuptimon__ranges_frame(struct shim *s, struct cuptimon_buf *out, int send)
{
    enum {
        PER_FRAME = 8192
    }; /* 256 KiB bodies */
    struct cuptimon_range_ev ev;
    int frames = 0;
    if (!atomic_load(&ring_ready))
        return 0;
    for (;;) {
        uint32_t n = 0;
        size_t at = out->len;
        size_t body = CUPTIMON_RANGES_HDR_SIZE + (size_t)PER_FRAME * CUPTIMON_RANGE_ENTRY_SIZE;
        if (send && cuptimon__buf_reserve(out, CUPTIMON_MSG_HDR_SIZE + body) < 0)
            return -ENOMEM; /* the entries stay queued for the next pass */
        uint8_t *p =
            send ? out->data + at + CUPTIMON_MSG_HDR_SIZE + CUPTIMON_RANGES_HDR_SIZE : NULL;
        while (n < PER_FRAME && take(&ev)) {
            if (send)
                cuptimon__range_encode(p + (size_t)n * CUPTIMON_RANGE_ENTRY_SIZE, &ev);
            n++;
        }
        uint64_t lost = atomic_exchange(&dropped, 0);
        if (!send || (n == 0 && lost == 0))
            return frames;
        struct cuptimon_ranges_hdr h = {.count = n,
                                        .dropped = lost > UINT32_MAX ? UINT32_MAX : (uint32_t)lost};
        /* The pair is read as CUPTI, realtime, CUPTI, and the CUPTI
         * midpoint kept: the mapping is then off by at most half the gap
         * between the reads.  Of up to four tries the tightest is kept, so
         * that a preemption between two reads does not shift the batch. */
        uint64_t best_gap = UINT64_MAX;
        h.cupti_ts = h.realtime_ns = 0;
        for (int i = 0; i < 4 && best_gap > 1000; i++) {
            uint64_t c0 = 0, c1 = 0;
            struct timespec rt;
            int ok = s->cupti.GetTimestamp != NULL && s->cupti.GetTimestamp(&c0) == CUPTI_SUCCESS;
            clock_gettime(CLOCK_REALTIME, &rt);
            ok = ok && s->cupti.GetTimestamp(&c1) == CUPTI_SUCCESS && c1 >= c0;
            uint64_t real = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
            if (!ok) {
                h.cupti_ts = h.realtime_ns = real; /* CUPTI's default timebase */
                break;
            }
            if (c1 - c0 < best_gap) {
                best_gap = c1 - c0;
                h.cupti_ts = c0 + (c1 - c0) / 2;
                h.realtime_ns = real;
            }
        }
        body = CUPTIMON_RANGES_HDR_SIZE + (size_t)n * CUPTIMON_RANGE_ENTRY_SIZE;
        cuptimon__hdr_encode(out->data + at, CUPTIMON_MSG_RANGES, (uint32_t)body);
        cuptimon__ranges_hdr_encode(out->data + at + CUPTIMON_MSG_HDR_SIZE, &h);
        out->len = at + CUPTIMON_MSG_HDR_SIZE + body;
        frames++;
        if (n < PER_FRAME)
            return frames;
    }
}
