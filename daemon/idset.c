/* A paged set of correlation ids: see idset.h. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "idset.h"

#define PAGE_SHIFT 12u
#define PAGE_IDS   (1u << PAGE_SHIFT)
#define PAGE_WORDS (PAGE_IDS / 64u)
#define SMALL      9u

struct cuptimon_idpage {
    uint32_t key;          /* page number + 1; 0: an empty entry */
    uint16_t n;            /* ids in the page, up to PAGE_IDS */
    uint16_t small[SMALL]; /* while bits is NULL: the offsets of the n ids */
    uint64_t *bits;        /* NULL: small; &full_mark: all; else PAGE_WORDS words */
};

/* The bits of every full page: a mark, never read or written. */
static uint64_t full_mark;

static int is_full(const struct cuptimon_idpage *p)
{
    return p->bits == &full_mark;
}

static size_t slot_of(const struct cuptimon_idset *s, uint32_t key)
{
    return (size_t)((key * 0x9E3779B1u) >> (32u - s->lg));
}

/* The entry of key, or of the empty slot where it would go. */
static struct cuptimon_idpage *find(struct cuptimon_idset *s, uint32_t key)
{
    struct cuptimon_idpage *p = &s->tab[s->last];
    if (p->key == key)
        return p;
    size_t j = slot_of(s, key);
    while (s->tab[j].key != 0 && s->tab[j].key != key)
        j = (j + 1) & (s->cap - 1);
    if (s->tab[j].key == key)
        s->last = j;
    return &s->tab[j];
}

static int grow(struct cuptimon_idset *s)
{
    unsigned lg = s->tab ? s->lg + 1 : 4;
    size_t cap = (size_t)1 << lg;
    struct cuptimon_idpage *t = calloc(cap, sizeof *t);
    if (!t)
        return -ENOMEM;
    struct cuptimon_idset ns = {.tab = t, .cap = cap, .lg = lg};
    for (size_t i = 0; i < s->cap; i++) {
        if (s->tab[i].key == 0)
            continue;
        size_t j = slot_of(&ns, s->tab[i].key);
        while (t[j].key != 0)
            j = (j + 1) & (cap - 1);
        t[j] = s->tab[i];
    }
    free(s->tab);
    s->tab = t;
    s->cap = cap;
    s->lg = lg;
    s->last = 0;
    return 0;
}

int cuptimon__idset_add(struct cuptimon_idset *s, uint32_t id)
{
    if (id == 0)
        return 0;
    uint32_t key = (id >> PAGE_SHIFT) + 1;
    uint16_t off = (uint16_t)(id & (PAGE_IDS - 1));
    struct cuptimon_idpage *p = s->tab ? find(s, key) : NULL;
    if (p == NULL || p->key == 0) {
        /* A new page: at most half the table in use. */
        if ((s->pages + 1) * 2 > s->cap) {
            int rc = grow(s);
            if (rc < 0)
                return rc;
            p = find(s, key);
        }
        p->key = key;
        s->pages++;
    }
    if (is_full(p))
        return 0;
    if (p->bits == NULL) {
        for (unsigned i = 0; i < p->n; i++)
            if (p->small[i] == off)
                return 0;
        if (p->n < SMALL) {
            p->small[p->n++] = off;
            s->ids++;
            return 0;
        }
        uint64_t *b = calloc(PAGE_WORDS, sizeof *b);
        if (!b)
            return -ENOMEM;
        for (unsigned i = 0; i < p->n; i++)
            b[p->small[i] / 64] |= 1ull << (p->small[i] % 64);
        p->bits = b;
        s->bitmaps++;
    }
    uint64_t m = 1ull << (off % 64);
    if (p->bits[off / 64] & m)
        return 0;
    p->bits[off / 64] |= m;
    p->n++;
    s->ids++;
    if (p->n == PAGE_IDS) {
        free(p->bits);
        p->bits = &full_mark;
        s->bitmaps--;
    }
    return 0;
}

int cuptimon__idset_has(struct cuptimon_idset *s, uint32_t id)
{
    if (id == 0 || s->tab == NULL)
        return 0;
    const struct cuptimon_idpage *p = find(s, (id >> PAGE_SHIFT) + 1);
    if (p->key == 0)
        return 0;
    uint16_t off = (uint16_t)(id & (PAGE_IDS - 1));
    if (is_full(p))
        return 1;
    if (p->bits != NULL)
        return (p->bits[off / 64] >> (off % 64)) & 1;
    for (unsigned i = 0; i < p->n; i++)
        if (p->small[i] == off)
            return 1;
    return 0;
}

size_t cuptimon__idset_bytes(const struct cuptimon_idset *s)
{
    return s->cap * sizeof(struct cuptimon_idpage) + s->bitmaps * PAGE_WORDS * sizeof(uint64_t);
}

void cuptimon__idset_clear(struct cuptimon_idset *s)
{
    for (size_t i = 0; i < s->cap; i++)
        if (s->tab[i].bits != NULL && !is_full(&s->tab[i]))
            free(s->tab[i].bits);
    free(s->tab);
    *s = (struct cuptimon_idset){0};
}
