/*
 * The producer string table (see strtab.h).
 */
#include "config.h"

#include "strtab.h"
#include "hash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct slot {
    uint64_t key; /* 0: empty (CUPTI never names anything at address 0) */
    char *s;
    size_t len;
};

struct cuptimon_strtab {
    struct slot *slots;
    size_t cap; /* power of two */
    size_t n;
    size_t bytes;
    struct cuptimon_strtab_limits lim;
    uint64_t epoch;
    uint64_t replaced;
    uint64_t refused;
};

int cuptimon__strtab_new(const struct cuptimon_strtab_limits *lim, struct cuptimon_strtab **out)
{
    struct cuptimon_strtab *t = calloc(1, sizeof(*t));

    *out = NULL;
    if (t == NULL)
        return -ENOMEM;
    if (lim != NULL)
        t->lim = *lim;
    if (t->lim.max_entries == 0)
        t->lim.max_entries = (size_t)1 << 20;
    if (t->lim.max_bytes == 0)
        t->lim.max_bytes = (size_t)256 << 20;
    if (t->lim.max_len == 0)
        t->lim.max_len = (size_t)64 << 10;
    t->cap = 64;
    t->slots = calloc(t->cap, sizeof(*t->slots));
    if (t->slots == NULL) {
        free(t);
        return -ENOMEM;
    }
    *out = t;
    return 0;
}

void cuptimon__strtab_free(struct cuptimon_strtab *t)
{
    if (t == NULL)
        return;
    if (t->slots != NULL)
        for (size_t i = 0; i < t->cap; i++)
            free(t->slots[i].s);
    free(t->slots);
    free(t);
}

static struct slot *find(const struct cuptimon_strtab *t, uint64_t key)
{
    size_t mask = t->cap - 1;
    size_t i = (size_t)cuptimon__mix64(key) & mask;

    for (;;) {
        struct slot *s = &t->slots[i];
        if (s->key == key || s->key == 0)
            return s;
        i = (i + 1) & mask;
    }
}

static int grow(struct cuptimon_strtab *t)
{
    size_t ncap = t->cap * 2;
    struct slot *old = t->slots, *ns = calloc(ncap, sizeof(*ns));
    size_t ocap = t->cap;

    if (ns == NULL)
        return -ENOMEM;
    t->slots = ns;
    t->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].key != 0)
            *find(t, old[i].key) = old[i];
    free(old);
    return 0;
}

int cuptimon__strtab_put(struct cuptimon_strtab *t, uint64_t ptr, const char *s, size_t len)
{
    struct slot *sl;
    char *copy;

    if (ptr == 0 || (s == NULL && len != 0)) {
        t->refused++;
        return -EINVAL;
    }
    if (len > t->lim.max_len) {
        t->refused++;
        return -E2BIG;
    }
    sl = find(t, ptr);
    if (sl->key == ptr) {
        if (sl->len == len && memcmp(sl->s, s, len) == 0)
            return 0;
        if (t->bytes - sl->len + len > t->lim.max_bytes) {
            t->refused++;
            return -E2BIG;
        }
    } else if (t->n >= t->lim.max_entries || t->bytes + len > t->lim.max_bytes) {
        t->refused++;
        return -E2BIG;
    }
    copy = malloc(len + 1);
    if (copy == NULL)
        return -ENOMEM;
    if (len)
        memcpy(copy, s, len);
    copy[len] = '\0';

    if (sl->key == ptr) {
        t->bytes -= sl->len;
        free(sl->s);
        sl->s = copy;
        sl->len = len;
        t->bytes += len;
        t->replaced++;
        t->epoch++;
        return 0;
    }
    /* Keep the load at or below one half so probes stay short. */
    if ((t->n + 1) * 2 > t->cap) {
        int rc = grow(t);
        if (rc < 0) {
            free(copy);
            return rc;
        }
        sl = find(t, ptr);
    }
    sl->key = ptr;
    sl->s = copy;
    sl->len = len;
    t->n++;
    t->bytes += len;
    return 0;
}

const char *cuptimon__strtab_get(const struct cuptimon_strtab *t, uint64_t ptr, size_t *len)
{
    const struct slot *sl;

    if (t == NULL || ptr == 0)
        return NULL;
    sl = find(t, ptr);
    if (sl->key != ptr)
        return NULL;
    if (len != NULL)
        *len = sl->len;
    return sl->s;
}

int cuptimon__strtab_each(const struct cuptimon_strtab *t,
                          int (*fn)(void *ud, uint64_t ptr, const char *s, size_t len), void *ud)
{
    if (t == NULL)
        return 0;
    for (size_t i = 0; i < t->cap; i++) {
        int rc;
        if (t->slots[i].key != 0 &&
            (rc = fn(ud, t->slots[i].key, t->slots[i].s, t->slots[i].len)) < 0)
            return rc;
    }
    return 0;
}

uint64_t cuptimon__strtab_epoch(const struct cuptimon_strtab *t)
{
    return t ? t->epoch : 0;
}

void cuptimon__strtab_stats(const struct cuptimon_strtab *t, struct cuptimon_strtab_stats *st)
{
    st->entries = t->n;
    st->bytes = t->bytes;
    st->replaced = t->replaced;
    st->refused = t->refused;
}

int cuptimon__strtab_put_cb(void *ud, uint64_t ptr, const char *s, size_t len)
{
    int rc = cuptimon__strtab_put(ud, ptr, s, len);
    return rc == -ENOMEM ? rc : 0;
}
