/*
 * Cached demangling of kernel names with libiberty's
 * cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI).  A name that does not
 * demangle (C kernels, already readable names, garbage) stays as it was.
 * Bounded; not thread-safe (one cache per decoding thread).
 */
#ifndef CUPTIMON_DEMANGLE_H
#define CUPTIMON_DEMANGLE_H

#include <stddef.h>
#include <stdint.h>

struct cuptimon_demangler;

struct cuptimon_demangle_stats {
    uint64_t entries;
    uint64_t hits;
    uint64_t misses;   /* cplus_demangle calls */
    uint64_t uncached; /* results not kept because the cache was full */
};

/* max_entries 0: default 65536.  0 or -ENOMEM. */
int cuptimon__demangler_new(size_t max_entries, struct cuptimon_demangler **out);
void cuptimon__demangler_free(struct cuptimon_demangler *d);

/*
 * The demangled form of name, or name's own text when it does not
 * demangle (or is longer than 16 KiB, which only a hostile producer
 * sends).  Never NULL for a non-NULL name.  A cached result stays valid
 * until the demangler is freed; when the cache is full the result lives
 * in a scratch buffer valid until the next call, so callers that keep a
 * name copy it.
 */
const char *cuptimon__demangle(struct cuptimon_demangler *d, const char *name);

void cuptimon__demangler_stats(const struct cuptimon_demangler *d,
                               struct cuptimon_demangle_stats *st);

#endif
