/* The shim's bounded lock-free queue (mpq.h). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "mpq.h"

static _Atomic uint64_t *seq_of(struct cuptimon_mpq *q, uint64_t pos)
{
    return (_Atomic uint64_t *)(void *)(q->slots + (size_t)(pos & (q->n - 1)) * q->stride);
}

void cuptimon__mpq_init(struct cuptimon_mpq *q)
{
    for (uint32_t i = 0; i < q->n; i++)
        atomic_store_explicit(seq_of(q, i), i, memory_order_relaxed);
}

int cuptimon__mpq_put(struct cuptimon_mpq *q, const void *entry, uint64_t *pos_out)
{
    uint64_t pos = atomic_load_explicit(&q->head, memory_order_relaxed);
    for (;;) {
        _Atomic uint64_t *seq = seq_of(q, pos);
        int64_t dif = (int64_t)(atomic_load_explicit(seq, memory_order_acquire) - pos);
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->head, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                memcpy((unsigned char *)seq + q->off, entry, q->size);
                atomic_store_explicit(seq, pos + 1, memory_order_release);
                if (pos_out)
                    *pos_out = pos;
                return 0;
            }
        } else if (dif < 0) {
            return -ENOBUFS; /* full: the consumer is behind */
        } else {
            pos = atomic_load_explicit(&q->head, memory_order_relaxed);
        }
    }
}

int cuptimon__mpq_take(struct cuptimon_mpq *q, void *entry)
{
    uint64_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
    _Atomic uint64_t *seq = seq_of(q, pos);
    if ((int64_t)(atomic_load_explicit(seq, memory_order_acquire) - (pos + 1)) < 0)
        return 0;
    memcpy(entry, (unsigned char *)seq + q->off, q->size);
    atomic_store_explicit(seq, pos + q->n, memory_order_release);
    atomic_store_explicit(&q->tail, pos + 1, memory_order_relaxed);
    return 1;
}

uint32_t cuptimon__mpq_pending(struct cuptimon_mpq *q)
{
    uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
    return h > t ? (uint32_t)(h - t) : 0;
}
