/*
 * Cached demangling (see demangle.h).
 */
#include "config.h"

#include "demangle.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#define DEMANGLE_MAX_LEN (16u << 10)

struct dslot {
    uint64_t hash; /* 0: empty (hashes are forced non-zero) */
    char *key;
    char *val; /* == key when the name does not demangle */
};

struct cuptimon_demangler {
    struct dslot *slots;
    size_t cap;
    size_t n;
    size_t max_entries;
    char *scratch; /* the uncached result of the last call, malloc'd */
    uint64_t hits, misses, uncached;
};

/* FNV-1a, 64 bit: names are short and this is not on the per-record path
 * (the trace writer caches per pointer value on top of this). */
static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h ? h : 1;
}

int cuptimon__demangler_new(size_t max_entries, struct cuptimon_demangler **out)
{
    struct cuptimon_demangler *d = calloc(1, sizeof(*d));

    *out = NULL;
    if (d == NULL)
        return -ENOMEM;
    d->max_entries = max_entries ? max_entries : 65536;
    d->cap = 64;
    d->slots = calloc(d->cap, sizeof(*d->slots));
    if (d->slots == NULL) {
        free(d);
        return -ENOMEM;
    }
    *out = d;
    return 0;
}

void cuptimon__demangler_free(struct cuptimon_demangler *d)
{
    if (d == NULL)
        return;
    if (d->slots != NULL) {
        for (size_t i = 0; i < d->cap; i++) {
            if (d->slots[i].val != d->slots[i].key)
                free(d->slots[i].val);
            free(d->slots[i].key);
        }
    }
    free(d->slots);
    free(d->scratch);
    free(d);
}

static struct dslot *dfind(const struct cuptimon_demangler *d, uint64_t h, const char *key)
{
    size_t mask = d->cap - 1;
    size_t i = (size_t)h & mask;

    for (;;) {
        struct dslot *s = &d->slots[i];
        if (s->hash == 0 || (s->hash == h && strcmp(s->key, key) == 0))
            return s;
        i = (i + 1) & mask;
    }
}

static int dgrow(struct cuptimon_demangler *d)
{
    size_t ocap = d->cap, ncap = d->cap * 2;
    struct dslot *old = d->slots, *ns = calloc(ncap, sizeof(*ns));

    if (ns == NULL)
        return -ENOMEM;
    d->slots = ns;
    d->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].hash != 0)
            *dfind(d, old[i].hash, old[i].key) = old[i];
    free(old);
    return 0;
}

const char *cuptimon__demangle(struct cuptimon_demangler *d, const char *name)
{
    uint64_t h;
    struct dslot *s;
    char *dm, *key;

    if (name == NULL)
        return NULL;
    if (strlen(name) > DEMANGLE_MAX_LEN)
        return name;
    h = hash_str(name);
    s = dfind(d, h, name);
    if (s->hash != 0) {
        d->hits++;
        return s->val;
    }
    d->misses++;
    dm = cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);

    if (d->n >= d->max_entries || (d->n + 1) * 2 > d->cap) {
        if (d->n >= d->max_entries || dgrow(d) < 0) {
            d->uncached++;
            free(d->scratch);
            d->scratch = dm;
            return dm ? dm : name;
        }
        s = dfind(d, h, name);
    }
    key = strdup(name);
    if (key == NULL) {
        d->uncached++;
        free(d->scratch);
        d->scratch = dm;
        return dm ? dm : name;
    }
    s->hash = h;
    s->key = key;
    s->val = dm ? dm : key;
    d->n++;
    return s->val;
}

void cuptimon__demangler_stats(const struct cuptimon_demangler *d,
                               struct cuptimon_demangle_stats *st)
{
    st->entries = d->n;
    st->hits = d->hits;
    st->misses = d->misses;
    st->uncached = d->uncached;
}
