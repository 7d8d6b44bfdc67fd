/*
 * A bounded lock-free multi-producer queue with one consumer (Dmitry
 * Vyukov's: one compare-and-swap per entry, no lock, no allocation, no
 * system call), for the job's threads to hand small fixed-size entries to
 * the IO thread: annotation ranges (ranges.c) and NCCL's operations
 * (nccl.c).  A full queue refuses the entry; the caller counts it.
 *
 * Each slot is a sequence number followed by the entry; the caller gives
 * the slots' storage (n slots of stride bytes, n a power of two).
 */
#ifndef CUPTIMON_MPQ_H
#define CUPTIMON_MPQ_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct cuptimon_mpq {
    _Atomic uint64_t head, tail; /* head: next to write; tail: next to read */
    unsigned char *slots;
    uint32_t n;         /* slots, a power of two */
    size_t stride, off; /* a slot's size, and where its entry starts in it */
    size_t size;        /* an entry's size */
};

/* The slot type for entries of type T: use sizeof and offsetof of it. */
#define CUPTIMON_MPQ_SLOT(T)                                                                       \
    struct {                                                                                       \
        _Atomic uint64_t seq;                                                                      \
        T v;                                                                                       \
    }

/* A queue over an array of such slots (static storage: n is its length). */
#define CUPTIMON_MPQ_OVER(array)                                                                   \
    {                                                                                              \
        .slots = (unsigned char *)(array), .n = sizeof(array) / sizeof((array)[0]),                \
        .stride = sizeof((array)[0]), .off = offsetof(__typeof__((array)[0]), v),                  \
        .size = sizeof((array)[0].v)                                                               \
    }

/* Numbers the slots (before the first put, on one thread). */
void cuptimon__mpq_init(struct cuptimon_mpq *q);

/* Appends the entry: 0 (*pos: its place, counted from 0), or -ENOBUFS when
 * the queue is full. */
int cuptimon__mpq_put(struct cuptimon_mpq *q, const void *entry, uint64_t *pos);

/* The consumer: 1 with the oldest entry in *entry, or 0 when the queue is
 * empty or the producer of the oldest slot is mid-write. */
int cuptimon__mpq_take(struct cuptimon_mpq *q, void *entry);

/* Entries put and not yet taken. */
uint32_t cuptimon__mpq_pending(struct cuptimon_mpq *q);

#endif
