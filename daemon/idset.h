/*
 * A set of 32-bit correlation ids whose memory follows what it holds, not
 * the span of the ids: the ids of a trace window's API calls, per process
 * (daemon/window-write.c).
 *
 * CUPTI promises a unique correlation id per API call, not one ordered
 * counter, so a window keeps the set itself (PyTorch's retained set), never
 * a range.  The ids are cut into pages of 4096; a page is found through a
 * small open-addressing table (the pages in use only) and holds:
 *  - up to 9 ids as 12-bit offsets inside its table entry (sparse ids:
 *    32 bytes of table per page, whatever the ids are);
 *  - a 512-byte bitmap from the 10th id on;
 *  - nothing once all 4096 of its ids are in (a mark says "full").
 * A process that numbers its calls from one counter fills whole pages, so a
 * window of 60 s at 50 k launches/s (3 M ids) costs its table, 64 KiB,
 * plus at most two partial bitmaps; ids numbered per kind, out of
 * order or wrapping at 2^32 cost a bitmap per partly filled page; ids
 * scattered on purpose cost at most 128 bytes each (a 32-byte entry in a
 * table kept between a quarter and half full), up to 2^20 pages.
 */
#ifndef CUPTIMON_IDSET_H
#define CUPTIMON_IDSET_H

#include <stddef.h>
#include <stdint.h>

struct cuptimon_idpage;

/* Zeroed, it is an empty set. */
struct cuptimon_idset {
    struct cuptimon_idpage *tab; /* cap entries (a power of two), NULL when empty */
    size_t cap, pages;
    size_t bitmaps; /* pages that hold a bitmap of their own */
    unsigned lg;    /* log2(cap) */
    size_t last;    /* the entry found last (ids come in runs) */
    uint64_t ids;   /* ids in the set */
};

/* Adds id; 0 (CUPTI's "no correlation") is never stored.  0 or -ENOMEM
 * (the set is unchanged then). */
int cuptimon__idset_add(struct cuptimon_idset *s, uint32_t id);

/* 1 when id is in the set. */
int cuptimon__idset_has(struct cuptimon_idset *s, uint32_t id);

/* The bytes the set holds in memory (its table and bitmaps). */
size_t cuptimon__idset_bytes(const struct cuptimon_idset *s);

/* Frees everything; s is an empty set again. */
void cuptimon__idset_clear(struct cuptimon_idset *s);

#endif
