/*
 * A producer's string table: the pointer values CUPTI put in records
 * (kernel names, NVTX names and domains) mapped to owned copies of the
 * strings the shim interned for them.  The pointers belong to another
 * process and are only ever used as keys.
 *
 * Open addressing (linear probing) keyed by the 64-bit pointer value; the
 * table is bounded in entries, total bytes and string length so that a
 * hostile producer cannot make the daemon grow without limit: what does
 * not fit is refused and counted.  Not thread-safe: one table per
 * producer, used by one thread at a time.
 */
#ifndef CUPTIMON_STRTAB_H
#define CUPTIMON_STRTAB_H

#include <stddef.h>
#include <stdint.h>

struct cuptimon_strtab;

struct cuptimon_strtab_limits {
    size_t max_entries; /* 0: default 1 << 20 */
    size_t max_bytes;   /* total string bytes; 0: default 256 MiB */
    size_t max_len;     /* one string; 0: default 64 KiB */
};

struct cuptimon_strtab_stats {
    uint64_t entries;
    uint64_t bytes;
    uint64_t replaced; /* a known pointer given a different string */
    uint64_t refused;  /* over a limit, or invalid (pointer 0) */
};

/* lim may be NULL for the defaults.  0 or -ENOMEM. */
int cuptimon__strtab_new(const struct cuptimon_strtab_limits *lim, struct cuptimon_strtab **out);
void cuptimon__strtab_free(struct cuptimon_strtab *t);

/*
 * Stores a copy of s[0, len) (need not be NUL-terminated; a NUL is added)
 * for ptr; a pointer already present gets the new string (the producer
 * re-used an address).  Returns 0; -EINVAL (ptr 0); -E2BIG (over a limit:
 * refused, the table unchanged); -ENOMEM.
 */
int cuptimon__strtab_put(struct cuptimon_strtab *t, uint64_t ptr, const char *s, size_t len);

/* The string for ptr (NUL-terminated; *len, when not NULL, gets its length)
 * or NULL.  Valid until the entry is replaced or the table freed. */
const char *cuptimon__strtab_get(const struct cuptimon_strtab *t, uint64_t ptr, size_t *len);

/* Bumped whenever an existing pointer is given a different string, so that
 * caches built on top (the trace writer's) know to drop what they hold. */
uint64_t cuptimon__strtab_epoch(const struct cuptimon_strtab *t);

/* Calls fn for every entry, in no particular order; stops at and returns
 * the first negative fn returns, else 0.  fn must not change the table. */
int cuptimon__strtab_each(const struct cuptimon_strtab *t,
                          int (*fn)(void *ud, uint64_t ptr, const char *s, size_t len), void *ud);

void cuptimon__strtab_stats(const struct cuptimon_strtab *t, struct cuptimon_strtab_stats *st);

/* Adapter for cuptimon__archive_strings(): ud is the table.  Refusals are
 * counted in the stats and do not stop the walk (returns 0). */
int cuptimon__strtab_put_cb(void *ud, uint64_t ptr, const char *s, size_t len);

#endif
