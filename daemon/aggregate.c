/*
 * Live aggregates (see aggregate.h).
 */
#include "config.h"

#include "aggregate.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cuptimon-proto.h"
#include "archive/demangle.h"
#include "archive/strtab.h"

#define NS_PER_S UINT64_C(1000000000)

#define DEF_TOP_N 64u
#define DEF_MAX_SESSIONS 512u
#define DEF_MAX_DEVICES 16u
/* Devices one session may report; records on more are counted, not kept. */
#define SESSION_DEVICES 16u

/* The busy ring: 64 one-second buckets cover the 60 s shown plus the lag. */
#define RING 64u
/* Kernel intervals a device keeps for the union (16 bytes each). */
#define IV_CAP 65536u
/* Kernel pieces a device collects before they are merged into the union. */
#define PEND_MAX 4096u
/* Interned names are bounded in total (names past it show as pointers). */
#define NAMES_MAX_BYTES (16u << 20)
/* A name longer than this is not kept (it would not demangle either). */
#define NAME_MAX_LEN 16384u
/* How far a record may lie in the future of the daemon's clock. */
#define DEF_FUTURE_NS (60 * (int64_t)NS_PER_S)
/* Events of one buffer collected before the devices are updated. */
#define SCRATCH 2048u
/* Buckets of the per-session admission sketch (GPU ns of kernels not in
 * the full table, by hash). */
#define CAND 256u
/* Prometheus kernel label values are cut here (bytes). */
#define PROM_NAME_MAX 200u

/* Copy directions: CUpti_ActivityMemcpyKind 0..10 (Unknown .. PtoP). */
#define NDIR 11u

/* ---- histogram ------------------------------------------------------------ */

struct hist {
    uint64_t count, total, min, max;
    uint32_t b[CUPTIMON_AGG_HIST_BUCKETS];
};

unsigned cuptimon__agg_hist_index(uint64_t ns)
{
    unsigned k, idx;

    if (ns < 8)
        return (unsigned)ns;
    k = 63u - (unsigned)__builtin_clzll(ns);
    idx = 8u + (k - 3u) * 8u + (unsigned)((ns >> (k - 3u)) & 7u);
    return idx < CUPTIMON_AGG_HIST_BUCKETS ? idx : CUPTIMON_AGG_HIST_BUCKETS - 1;
}

uint64_t cuptimon__agg_hist_low(unsigned idx)
{
    unsigned k;

    if (idx < 8)
        return idx;
    if (idx >= CUPTIMON_AGG_HIST_BUCKETS)
        idx = CUPTIMON_AGG_HIST_BUCKETS - 1;
    k = (idx - 8u) / 8u + 3u;
    return (uint64_t)(8u + (idx - 8u) % 8u) << (k - 3u);
}

uint64_t cuptimon__agg_hist_mid(unsigned idx)
{
    unsigned k;

    if (idx < 8)
        return idx;
    if (idx >= CUPTIMON_AGG_HIST_BUCKETS)
        idx = CUPTIMON_AGG_HIST_BUCKETS - 1;
    k = (idx - 8u) / 8u + 3u;
    return cuptimon__agg_hist_low(idx) + ((1ull << (k - 3u)) >> 1);
}

static void hist_init(struct hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

/* When a bucket would overflow its 32-bit count, every bucket is halved:
 * the shape (and so the percentiles) stays, older launches weigh less.
 * count and total stay exact. */
static void hist_halve(struct hist *h)
{
    for (unsigned i = 0; i < CUPTIMON_AGG_HIST_BUCKETS; i++)
        h->b[i] >>= 1;
}

static inline void hist_add(struct hist *h, uint64_t v)
{
    unsigned i = cuptimon__agg_hist_index(v);

    h->count++;
    h->total += v;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
    if (h->b[i] == UINT32_MAX)
        hist_halve(h);
    h->b[i]++;
}

static void hist_merge(struct hist *into, const struct hist *from)
{
    if (from->count == 0)
        return;
    into->count += from->count;
    into->total += from->total;
    if (from->min < into->min)
        into->min = from->min;
    if (from->max > into->max)
        into->max = from->max;
    for (unsigned i = 0; i < CUPTIMON_AGG_HIST_BUCKETS; i++) {
        uint64_t s = (uint64_t)into->b[i] + from->b[i];
        if (s > UINT32_MAX) {
            hist_halve(into);
            s = (uint64_t)into->b[i] + (from->b[i] >> 1);
            /* Rare enough (4e9 launches of one duration) not to be exact. */
            if (s > UINT32_MAX)
                s = UINT32_MAX;
        }
        into->b[i] = (uint32_t)s;
    }
}

/* The quantile pm/1000: the midpoint of the bucket that holds the
 * ceil(pm * n / 1000)-th value, clamped to [min, max]. */
static uint64_t hist_pct(const struct hist *h, unsigned pm)
{
    uint64_t n = 0, rank, cum = 0, v;
    unsigned i;

    for (i = 0; i < CUPTIMON_AGG_HIST_BUCKETS; i++)
        n += h->b[i];
    if (n == 0)
        return 0;
    rank = n / 1000 * pm + ((n % 1000) * pm + 999) / 1000;
    if (rank < 1)
        rank = 1;
    for (i = 0; i < CUPTIMON_AGG_HIST_BUCKETS; i++) {
        cum += h->b[i];
        if (cum >= rank)
            break;
    }
    if (i == CUPTIMON_AGG_HIST_BUCKETS)
        i--;
    v = cuptimon__agg_hist_mid(i);
    if (v < h->min)
        v = h->min;
    if (v > h->max)
        v = h->max;
    return v;
}

/* ---- interned names --------------------------------------------------------- */

struct name {
    struct name *next;
    uint64_t hash;
    uint32_t refs;
    uint32_t len;
    char s[];
};

struct names {
    pthread_mutex_t mu;
    struct name **b;
    size_t nb, n, bytes;
};

static uint64_t hash_str(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* A reference to the interned copy of s[0, len), or NULL (over the bound,
 * or no memory: the kernel then shows as its pointer). */
static const char *name_get(struct names *t, const char *s, size_t len)
{
    uint64_t h = hash_str(s, len);
    struct name *e = NULL;

    if (len > NAME_MAX_LEN)
        return NULL;
    pthread_mutex_lock(&t->mu);
    if (t->b == NULL) {
        t->b = calloc(1024, sizeof(*t->b));
        if (t->b == NULL)
            goto out;
        t->nb = 1024;
    }
    for (e = t->b[h & (t->nb - 1)]; e != NULL; e = e->next)
        if (e->hash == h && e->len == len && memcmp(e->s, s, len) == 0)
            break;
    if (e != NULL) {
        e->refs++;
        goto out;
    }
    if (t->bytes + len + sizeof(*e) > NAMES_MAX_BYTES)
        goto out;
    if (t->n >= t->nb) {
        size_t nb = t->nb * 2;
        struct name **b = calloc(nb, sizeof(*b));
        if (b != NULL) {
            for (size_t i = 0; i < t->nb; i++) {
                for (struct name *x = t->b[i], *nx; x != NULL; x = nx) {
                    nx = x->next;
                    x->next = b[x->hash & (nb - 1)];
                    b[x->hash & (nb - 1)] = x;
                }
            }
            free(t->b);
            t->b = b;
            t->nb = nb;
        }
    }
    e = malloc(sizeof(*e) + len + 1);
    if (e == NULL)
        goto out;
    e->hash = h;
    e->refs = 1;
    e->len = (uint32_t)len;
    memcpy(e->s, s, len);
    e->s[len] = '\0';
    e->next = t->b[h & (t->nb - 1)];
    t->b[h & (t->nb - 1)] = e;
    t->n++;
    t->bytes += len + sizeof(*e);
out:
    pthread_mutex_unlock(&t->mu);
    return e != NULL ? e->s : NULL;
}

static void name_put(struct names *t, const char *s)
{
    struct name *e, **pp;

    if (s == NULL)
        return;
    e = (struct name *)(void *)(s - offsetof(struct name, s));
    pthread_mutex_lock(&t->mu);
    if (--e->refs == 0) {
        for (pp = &t->b[e->hash & (t->nb - 1)]; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == e) {
                *pp = e->next;
                break;
            }
        }
        t->n--;
        t->bytes -= e->len + sizeof(*e);
        free(e);
    }
    pthread_mutex_unlock(&t->mu);
}

/* ---- sessions ------------------------------------------------------------- */

struct kent {
    uint64_t ptr;
    uint32_t dslot; /* index into the session's devs */
    const char *name; /* interned mangled name, NULL until resolved */
    struct hist h;
};

struct asess {
    uint64_t id;
    pthread_mutex_t mu;
    int refs, dead; /* under a->mu */
    int64_t ended_ns; /* under a->mu: when cuptimon__agg_end was called, 0 = live */
    /* identity and the caller's counters: under a->mu */
    int64_t pid;
    uint32_t uid;
    char job[128], rank[32], label[128], exe[256];
    uint64_t dropped, lost;
    /* the rest: under mu */
    struct kent **k;
    size_t nk, kcap;
    int32_t *idx; /* open addressing over k[], -1 empty */
    size_t icap;
    struct kent *last;
    uint32_t devs[SESSION_DEVICES];
    struct kent *other[SESSION_DEVICES]; /* folded kernels, per device */
    unsigned ndevs;
    uint64_t epoch;
    const struct cuptimon_strtab *seen_tab;
    size_t unresolved;
    uint64_t cand[CAND]; /* admission sketch: ns of kernels waiting outside the table */
    uint64_t min_total;  /* the lightest kept kernel's ns, when min_valid */
    size_t min_idx;
    int min_valid;
    uint64_t buffers, records, undecodable, folded, bad_times;
    uint64_t kernels, kernel_ns;
    uint64_t memcpys, memcpy_bytes, memcpy_ns, memsets, memset_bytes, memset_ns;
    struct hist handoff;
};

/* ---- devices -------------------------------------------------------------- */

struct bucket {
    int64_t sec; /* the Unix second held, -1 none */
    uint64_t busy_ns, unchecked_ns;
    uint64_t copy_bytes[NDIR];
    uint32_t copies[NDIR];
    uint64_t memset_bytes;
};

struct iv {
    uint64_t s, e;
};

struct adev {
    uint32_t id;
    int64_t newest; /* newest second with data, -1 none */
    struct bucket ring[RING];
    struct iv *iv; /* kept for the union: sorted, disjoint (not touching), unix ns */
    size_t niv, ivcap;
    struct iv pend[PEND_MAX]; /* pieces of this flush, each inside one second */
    size_t npend;
    uint64_t sealed; /* intervals ending at or before this were released */
    uint64_t busy_total, unchecked_total, late_ns;
    uint64_t kernels, kernel_ns;
    uint64_t copy_bytes[NDIR], copies[NDIR];
    uint64_t memset_bytes, memsets;
};

struct cuptimon_agg {
    pthread_mutex_t mu;     /* sessions table, identities, output */
    pthread_mutex_t dev_mu; /* devices */
    unsigned top_n, max_sessions, max_devices;
    int64_t future_ns;
    int64_t keep_ended_ns;
    struct asess **sess;
    size_t nsess, sesscap;
    struct adev **dev;
    size_t ndev;
    struct names names;
    struct cuptimon_demangler *dm; /* output only, under mu */
    /* counters: under mu */
    uint64_t buffers, records, aggregated, not_aggregated, folded, bad_times;
    uint64_t dev_not_aggregated, dev_bad_times; /* under dev_mu */
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * (int64_t)NS_PER_S + ts.tv_nsec;
}

int cuptimon__agg_new(const struct cuptimon_agg_limits *lim, struct cuptimon_agg **out)
{
    struct cuptimon_agg *a;

    *out = NULL;
    if (lim != NULL && (lim->top_n > 4096 || lim->max_sessions > 65536 || lim->max_devices > 1024))
        return -EINVAL;
    a = calloc(1, sizeof(*a));
    if (a == NULL)
        return -ENOMEM;
    a->top_n = lim && lim->top_n ? lim->top_n : DEF_TOP_N;
    a->max_sessions = lim && lim->max_sessions ? lim->max_sessions : DEF_MAX_SESSIONS;
    a->max_devices = lim && lim->max_devices ? lim->max_devices : DEF_MAX_DEVICES;
    a->future_ns = lim && lim->future_s ? (int64_t)lim->future_s * (int64_t)NS_PER_S
                                        : DEF_FUTURE_NS;
    a->keep_ended_ns = (int64_t)(lim && lim->keep_ended_s ? lim->keep_ended_s : 60) *
                       (int64_t)NS_PER_S;
    if (cuptimon__demangler_new(8192, &a->dm) < 0) {
        free(a);
        return -ENOMEM;
    }
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->dev_mu, NULL);
    pthread_mutex_init(&a->names.mu, NULL);
    *out = a;
    return 0;
}

static void kent_free(struct cuptimon_agg *a, struct kent *e)
{
    if (e == NULL)
        return;
    name_put(&a->names, e->name);
    free(e);
}

static void sess_free(struct cuptimon_agg *a, struct asess *s)
{
    for (size_t i = 0; i < s->nk; i++)
        kent_free(a, s->k[i]);
    for (unsigned i = 0; i < s->ndevs; i++)
        kent_free(a, s->other[i]);
    free(s->k);
    free(s->idx);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void cuptimon__agg_free(struct cuptimon_agg *a)
{
    if (a == NULL)
        return;
    for (size_t i = 0; i < a->nsess; i++)
        sess_free(a, a->sess[i]);
    free(a->sess);
    for (size_t i = 0; i < a->ndev; i++) {
        free(a->dev[i]->iv);
        free(a->dev[i]);
    }
    free(a->dev);
    free(a->names.b);
    cuptimon__demangler_free(a->dm);
    pthread_mutex_destroy(&a->names.mu);
    pthread_mutex_destroy(&a->dev_mu);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

/* Under a->mu. */
static struct asess *sess_find(struct cuptimon_agg *a, uint64_t id)
{
    for (size_t i = 0; i < a->nsess; i++)
        if (a->sess[i]->id == id)
            return a->sess[i];
    return NULL;
}

/* Under a->mu: removes session i from the table (freed now, or by the
 * last buffer still being added). */
static void sess_remove(struct cuptimon_agg *a, size_t i)
{
    struct asess *s = a->sess[i];

    memmove(a->sess + i, a->sess + i + 1, (a->nsess - i - 1) * sizeof(*a->sess));
    a->nsess--;
    if (s->refs == 0)
        sess_free(a, s);
    else
        s->dead = 1;
}

/* Under a->mu: drops the sessions that ended more than keep_ended ago;
 * with room_for_one, also the oldest ended one when the table is full. */
static void sess_expire(struct cuptimon_agg *a, int64_t now, int room_for_one)
{
    size_t oldest = SIZE_MAX;

    for (size_t i = 0; i < a->nsess;) {
        struct asess *s = a->sess[i];
        if (s->ended_ns != 0 && now - s->ended_ns > a->keep_ended_ns) {
            sess_remove(a, i);
            continue;
        }
        if (s->ended_ns != 0 && (oldest == SIZE_MAX || s->ended_ns < a->sess[oldest]->ended_ns))
            oldest = i;
        i++;
    }
    if (room_for_one && a->nsess >= a->max_sessions && oldest != SIZE_MAX)
        sess_remove(a, oldest);
}

/* Under a->mu: finds or creates; NULL with *rc set. */
static struct asess *sess_get(struct cuptimon_agg *a, uint64_t id, int *rc)
{
    struct asess *s = sess_find(a, id);

    *rc = 0;
    if (s != NULL)
        return s;
    /* A live process takes the place of one that ended. */
    sess_expire(a, now_ns(), 1);
    if (a->nsess >= a->max_sessions) {
        *rc = -ENOSPC;
        return NULL;
    }
    if (a->nsess == a->sesscap) {
        size_t nc = a->sesscap ? a->sesscap * 2 : 16;
        struct asess **ns = realloc(a->sess, nc * sizeof(*ns));
        if (ns == NULL) {
            *rc = -ENOMEM;
            return NULL;
        }
        a->sess = ns;
        a->sesscap = nc;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        *rc = -ENOMEM;
        return NULL;
    }
    s->id = id;
    s->pid = -1;
    s->kcap = 2u * a->top_n;
    hist_init(&s->handoff);
    pthread_mutex_init(&s->mu, NULL);
    a->sess[a->nsess++] = s;
    return s;
}

static void copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

int cuptimon__agg_session(struct cuptimon_agg *a, uint64_t session,
                          const struct cuptimon_agg_ident *id, uint64_t dropped, uint64_t lost)
{
    struct asess *s;
    int rc;

    pthread_mutex_lock(&a->mu);
    s = sess_get(a, session, &rc);
    if (s != NULL) {
        if (id != NULL) {
            s->pid = id->pid;
            s->uid = id->uid;
            copy_str(s->job, sizeof(s->job), id->job);
            copy_str(s->rank, sizeof(s->rank), id->rank);
            copy_str(s->label, sizeof(s->label), id->label);
            copy_str(s->exe, sizeof(s->exe), id->exe);
        }
        s->dropped = dropped;
        s->lost = lost;
    }
    pthread_mutex_unlock(&a->mu);
    return rc;
}

void cuptimon__agg_forget(struct cuptimon_agg *a, uint64_t session)
{
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->nsess; i++) {
        if (a->sess[i]->id == session) {
            /* A buffer still being added (the caller should not do that)
             * frees it when it is done. */
            sess_remove(a, i);
            break;
        }
    }
    pthread_mutex_unlock(&a->mu);
}

void cuptimon__agg_end(struct cuptimon_agg *a, uint64_t session)
{
    pthread_mutex_lock(&a->mu);
    struct asess *s = sess_find(a, session);
    if (s != NULL && s->ended_ns == 0)
        s->ended_ns = now_ns();
    pthread_mutex_unlock(&a->mu);
}

/* Under a->mu. */
static size_t sess_live(const struct cuptimon_agg *a)
{
    size_t n = 0;
    for (size_t i = 0; i < a->nsess; i++)
        n += a->sess[i]->ended_ns == 0;
    return n;
}

/* ---- the per-session kernel table (under s->mu) ---------------------------- */

static inline size_t khash(uint64_t ptr, uint32_t dslot)
{
    uint64_t x = ptr ^ ((uint64_t)dslot * 0x9e3779b97f4a7c15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

static void kindex_rebuild(struct asess *s)
{
    size_t mask = s->icap - 1;

    for (size_t i = 0; i < s->icap; i++)
        s->idx[i] = -1;
    for (size_t j = 0; j < s->nk; j++) {
        size_t i = khash(s->k[j]->ptr, s->k[j]->dslot) & mask;
        while (s->idx[i] >= 0)
            i = (i + 1) & mask;
        s->idx[i] = (int32_t)j;
    }
}

/* The "other" entry of device slot d, created on first use. */
static struct kent *other_of(struct asess *s, unsigned d)
{
    if (s->other[d] == NULL) {
        s->other[d] = malloc(sizeof(struct kent));
        if (s->other[d] == NULL)
            return NULL;
        s->other[d]->ptr = 0;
        s->other[d]->dslot = d;
        s->other[d]->name = NULL;
        hist_init(&s->other[d]->h);
    }
    return s->other[d];
}

static const char *resolve(struct cuptimon_agg *a, const struct cuptimon_strtab *names,
                           uint64_t ptr)
{
    size_t len;
    const char *str = names ? cuptimon__strtab_get(names, ptr, &len) : NULL;

    return str != NULL ? name_get(&a->names, str, len) : NULL;
}

/* Folds k[j] into its device's other; the slot is left for the caller. */
static int fold(struct cuptimon_agg *a, struct asess *s, size_t j)
{
    struct kent *e = s->k[j], *o = other_of(s, e->dslot);

    if (o == NULL)
        return -ENOMEM;
    hist_merge(&o->h, &e->h);
    if (e->name == NULL && s->unresolved > 0)
        s->unresolved--;
    name_put(&a->names, e->name);
    e->name = NULL;
    s->folded++;
    return 0;
}

/*
 * The entry a kernel's launch of dur ns is counted in.  While the table has
 * room every kernel gets its own; once it is full, a new kernel's time goes
 * to its device's "other" and into the admission sketch, and the kernel is
 * admitted (replacing the lightest kept one, which is folded into other)
 * only once the sketch says it took more GPU time than that one.  So a
 * churn of rare names costs a hash per launch, not a table rebuild, and
 * the heavy kernels stay named.  NULL only without memory.
 */
static struct kent *kfind(struct cuptimon_agg *a, struct asess *s, uint64_t ptr, uint32_t dslot,
                          const struct cuptimon_strtab *names, uint64_t dur)
{
    struct kent *e = s->last;
    size_t mask, i, h;

    if (e != NULL && e->ptr == ptr && e->dslot == dslot)
        return e;
    if (s->idx == NULL) {
        size_t cap = 16;
        while (cap < s->kcap * 2)
            cap *= 2;
        s->k = calloc(s->kcap, sizeof(*s->k));
        s->idx = malloc(cap * sizeof(*s->idx));
        if (s->k == NULL || s->idx == NULL) {
            free(s->k);
            free(s->idx);
            s->k = NULL;
            s->idx = NULL;
            return NULL;
        }
        s->icap = cap;
        kindex_rebuild(s);
    }
    mask = s->icap - 1;
    for (i = khash(ptr, dslot) & mask; s->idx[i] >= 0; i = (i + 1) & mask) {
        e = s->k[s->idx[i]];
        if (e->ptr == ptr && e->dslot == dslot) {
            s->last = e;
            return e;
        }
    }
    if (s->nk < s->kcap) {
        e = malloc(sizeof(*e));
        if (e == NULL)
            return NULL;
        s->idx[i] = (int32_t)s->nk;
        s->k[s->nk++] = e;
        s->min_valid = 0;
    } else {
        h = (khash(ptr, dslot) >> 32) & (CAND - 1);
        s->cand[h] += dur + 1; /* + 1: zero-length kernels count too */
        if (!s->min_valid) {
            s->min_idx = 0;
            for (size_t j = 1; j < s->nk; j++)
                if (s->k[j]->h.total < s->k[s->min_idx]->h.total)
                    s->min_idx = j;
            s->min_total = s->k[s->min_idx]->h.total;
            s->min_valid = 1;
        }
        if (s->cand[h] <= s->min_total)
            return other_of(s, dslot);
        if (fold(a, s, s->min_idx) < 0)
            return NULL;
        e = s->k[s->min_idx];
        s->cand[h] = 0;
        s->min_valid = 0;
        e->ptr = ptr;
        e->dslot = dslot;
        kindex_rebuild(s);
    }
    e->ptr = ptr;
    e->dslot = dslot;
    e->name = resolve(a, names, ptr);
    if (e->name == NULL)
        s->unresolved++;
    hist_init(&e->h);
    s->last = e;
    return e;
}

/* At the start of a buffer: names that arrived since, and pointers the
 * producer gave a different string (their launches so far go to other). */
static void refresh_names(struct cuptimon_agg *a, struct asess *s,
                          const struct cuptimon_strtab *names)
{
    uint64_t ep;

    /* Kept kernels grew since the lightest was found. */
    s->min_valid = 0;
    if (names == NULL)
        return;
    ep = cuptimon__strtab_epoch(names);
    if (names == s->seen_tab && ep == s->epoch && s->unresolved == 0)
        return;
    if (names != s->seen_tab || ep != s->epoch) {
        for (size_t j = 0; j < s->nk;) {
            struct kent *e = s->k[j];
            const char *now = e->name ? cuptimon__strtab_get(names, e->ptr, NULL) : NULL;
            if (e->name != NULL && now != NULL && strcmp(now, e->name) != 0) {
                if (fold(a, s, j) < 0)
                    break;
                free(e);
                s->k[j] = s->k[--s->nk];
                s->last = NULL;
                continue;
            }
            j++;
        }
        if (s->idx != NULL)
            kindex_rebuild(s);
        s->seen_tab = names;
        s->epoch = ep;
    }
    for (size_t j = 0; j < s->nk && s->unresolved > 0; j++) {
        struct kent *e = s->k[j];
        if (e->name == NULL && (e->name = resolve(a, names, e->ptr)) != NULL)
            s->unresolved--;
    }
}

/* The device slot of a device id in this session, or -1 past the bound. */
static int sess_dev(struct asess *s, uint32_t id)
{
    for (unsigned i = 0; i < s->ndevs; i++)
        if (s->devs[i] == id)
            return (int)i;
    if (s->ndevs >= SESSION_DEVICES)
        return -1;
    s->devs[s->ndevs] = id;
    return (int)s->ndevs++;
}

/* ---- devices (under a->dev_mu) ------------------------------------------------ */

enum { DEV_KERNEL, DEV_MEMCPY, DEV_MEMSET };

struct dev_ev {
    uint32_t dev;
    uint8_t type, dir;
    uint64_t s, e, bytes;
};

static struct adev *dev_get(struct cuptimon_agg *a, uint32_t id)
{
    struct adev *d, **nd;

    for (size_t i = 0; i < a->ndev; i++)
        if (a->dev[i]->id == id)
            return a->dev[i];
    if (a->ndev >= a->max_devices)
        return NULL;
    d = calloc(1, sizeof(*d));
    nd = realloc(a->dev, (a->ndev + 1) * sizeof(*nd));
    if (d == NULL || nd == NULL) {
        free(d);
        if (nd != NULL)
            a->dev = nd;
        return NULL;
    }
    d->id = id;
    d->newest = -1;
    for (unsigned i = 0; i < RING; i++)
        d->ring[i].sec = -1;
    a->dev = nd;
    /* Kept sorted by id, for output. */
    size_t at = a->ndev;
    while (at > 0 && a->dev[at - 1]->id > id) {
        a->dev[at] = a->dev[at - 1];
        at--;
    }
    a->dev[at] = d;
    a->ndev++;
    return d;
}

static struct bucket *bucket_of(struct adev *d, int64_t sec)
{
    struct bucket *b = &d->ring[(uint64_t)sec % RING];

    if (b->sec != sec) {
        memset(b, 0, sizeof(*b));
        b->sec = sec;
    }
    return b;
}

/* The oldest second the ring holds. */
static int64_t ring_floor(const struct adev *d)
{
    return d->newest >= (int64_t)RING ? d->newest - (int64_t)RING + 1 : 0;
}

static void advance(struct adev *d, int64_t sec)
{
    uint64_t floor_ns;
    size_t k = 0;

    if (sec <= d->newest)
        return;
    d->newest = sec;
    /* Intervals below the ring are of no use for the union any more. */
    floor_ns = (uint64_t)ring_floor(d) * NS_PER_S;
    while (k < d->niv && d->iv[k].e <= floor_ns)
        k++;
    if (k > 0) {
        if (d->iv[k - 1].e > d->sealed)
            d->sealed = d->iv[k - 1].e;
        memmove(d->iv, d->iv + k, (d->niv - k) * sizeof(*d->iv));
        d->niv -= k;
    }
}

static int iv_cmp(const void *pa, const void *pb)
{
    const struct iv *x = pa, *y = pb;
    return x->s < y->s ? -1 : x->s > y->s;
}

/* Sorts by start.  CUPTI hands records over in about the order they
 * completed, which is nearly start order: insertion sort, unless the
 * pieces turn out to be far from sorted. */
static void iv_sort(struct iv *p, size_t n)
{
    size_t moves = 0;

    for (size_t i = 1; i < n; i++) {
        struct iv x = p[i];
        size_t j = i;
        while (j > 0 && p[j - 1].s > x.s) {
            p[j] = p[j - 1];
            j--;
            if (++moves > 16 * n) {
                p[j] = x;
                qsort(p, n, sizeof(*p), iv_cmp);
                return;
            }
        }
        p[j] = x;
    }
}

static void busy_late(struct adev *d, uint64_t len)
{
    d->busy_total += len;
    d->unchecked_total += len;
    d->late_ns += len;
}

/* Adds the device's pending pieces (each inside one second) to the union
 * and to their seconds' busy time. */
/* Runs that could not be merged with what is kept (out of memory): counted
 * as busy, and as unchecked so that the busy ratio says so. */
static void count_unchecked(struct adev *d, const struct iv *p, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        struct bucket *b = bucket_of(d, (int64_t)(p[i].s / NS_PER_S));
        b->busy_ns += p[i].e - p[i].s;
        b->unchecked_ns += p[i].e - p[i].s;
        d->busy_total += p[i].e - p[i].s;
        d->unchecked_total += p[i].e - p[i].s;
    }
}

static void busy_pieces(struct adev *d)
{
    uint64_t floor_ns = (uint64_t)ring_floor(d) * NS_PER_S;
    struct iv *p = d->pend, *t = NULL, *L;
    size_t m = 0, r = 0, k = 0, n, i0, tn, j, o, x, y;

    /* The ring may have moved on since a piece was collected. */
    for (size_t i = 0; i < d->npend; i++) {
        if (p[i].s < floor_ns)
            busy_late(d, p[i].e - p[i].s);
        else
            p[m++] = p[i];
    }
    d->npend = 0;
    if (m == 0)
        return;
    iv_sort(p, m);
    /* The union of the pieces themselves, within each second. */
    for (size_t i = 0; i < m; i++) {
        if (r > 0 && p[i].s <= p[r - 1].e && p[i].s / NS_PER_S == p[r - 1].s / NS_PER_S) {
            if (p[i].e > p[r - 1].e)
                p[r - 1].e = p[i].e;
        } else {
            p[r++] = p[i];
        }
    }
    /* Time over released intervals cannot be checked: added as it is. */
    for (size_t i = 0; i < r; i++) {
        if (p[i].s < d->sealed) {
            uint64_t cut = p[i].e < d->sealed ? p[i].e : d->sealed, u = cut - p[i].s;
            struct bucket *b = bucket_of(d, (int64_t)(p[i].s / NS_PER_S));
            b->busy_ns += u;
            b->unchecked_ns += u;
            d->busy_total += u;
            d->unchecked_total += u;
            p[i].s = cut;
            if (p[i].s >= p[i].e)
                continue;
        }
        p[k++] = p[i];
    }
    if (k == 0)
        return;
    /* Merge with the kept intervals: only those from the first one that
     * can touch the new ones on are rewritten (in order: none). */
    n = d->niv;
    if (d->ivcap < n + k) {
        size_t nc = d->ivcap ? d->ivcap : 1024;
        struct iv *ni;
        while (nc < n + k)
            nc *= 2;
        ni = realloc(d->iv, nc * sizeof(*ni));
        if (ni == NULL) {
            /* Counted as unchecked rather than lost. */
            count_unchecked(d, p, k);
            return;
        }
        d->iv = ni;
        d->ivcap = nc;
    }
    L = d->iv;
    {
        size_t lo = 0, hi = n;
        while (lo < hi) { /* the first kept interval ending at or after p[0].s */
            size_t mid = lo + (hi - lo) / 2;
            if (L[mid].e < p[0].s)
                lo = mid + 1;
            else
                hi = mid;
        }
        i0 = lo;
    }
    tn = n - i0;
    if (tn > 0) {
        t = malloc(tn * sizeof(*t));
        if (t == NULL) {
            count_unchecked(d, p, k);
            return;
        }
        memcpy(t, L + i0, tn * sizeof(*t));
    }
    /* New coverage of each run: its length less its overlap with what is
     * kept (both lists sorted and disjoint: one pass). */
    j = 0;
    for (size_t i = 0; i < k; i++) {
        uint64_t ov = 0, delta;
        struct bucket *b;
        while (j < tn && t[j].e < p[i].s)
            j++;
        for (size_t q = j; q < tn && t[q].s <= p[i].e; q++) {
            uint64_t a0 = t[q].s > p[i].s ? t[q].s : p[i].s;
            uint64_t a1 = t[q].e < p[i].e ? t[q].e : p[i].e;
            ov += a1 - a0;
        }
        delta = (p[i].e - p[i].s) - ov;
        b = bucket_of(d, (int64_t)(p[i].s / NS_PER_S));
        b->busy_ns += delta;
        d->busy_total += delta;
    }
    /* The union, touching intervals joined. */
    o = i0;
    x = y = 0;
    while (x < tn || y < k) {
        struct iv v = (y >= k || (x < tn && t[x].s <= p[y].s)) ? t[x++] : p[y++];
        if (o > i0 && v.s <= L[o - 1].e) {
            if (v.e > L[o - 1].e)
                L[o - 1].e = v.e;
        } else {
            L[o++] = v;
        }
    }
    d->niv = o;
    free(t);
    if (d->niv > IV_CAP) {
        /* Full: the oldest are released; later pieces over that time are
         * added without a union check (and counted as unchecked). */
        size_t rel = d->niv - IV_CAP / 4 * 3;
        if (L[rel - 1].e > d->sealed)
            d->sealed = L[rel - 1].e;
        memmove(L, L + rel, (d->niv - rel) * sizeof(*L));
        d->niv -= rel;
    }
}

/* Queues the part of [s, e) that the ring holds, cut at seconds. */
static void busy_add(struct adev *d, uint64_t s, uint64_t e)
{
    uint64_t floor_ns;

    advance(d, (int64_t)((e - 1) / NS_PER_S));
    floor_ns = (uint64_t)ring_floor(d) * NS_PER_S;
    if (s < floor_ns) {
        /* Older than the ring: in the total only, without a union. */
        busy_late(d, (e < floor_ns ? e : floor_ns) - s);
        s = floor_ns;
        if (s >= e)
            return;
    }
    for (uint64_t b0 = s / NS_PER_S * NS_PER_S;; b0 += NS_PER_S) {
        uint64_t b1 = b0 + NS_PER_S;
        if (d->npend == PEND_MAX)
            busy_pieces(d);
        d->pend[d->npend].s = s > b0 ? s : b0;
        d->pend[d->npend].e = e < b1 ? e : b1;
        d->npend++;
        if (e <= b1)
            break;
    }
}

/* The bucket of second sec for a copy or memset, or NULL when it is older
 * than the ring (the totals still count it). */
static struct bucket *bucket_at(struct adev *d, int64_t sec)
{
    advance(d, sec);
    return sec >= ring_floor(d) ? bucket_of(d, sec) : NULL;
}

static void dev_flush(struct cuptimon_agg *a, const struct dev_ev *ev, size_t n, int64_t now)
{
    /* A record far in the future would move the ring past everyone's
     * data: such records count in the totals, not in the ring. */
    uint64_t limit = (uint64_t)now + (uint64_t)a->future_ns;
    struct adev *d = NULL;
    uint32_t last = 0;
    int have = 0;

    if (n == 0)
        return;
    pthread_mutex_lock(&a->dev_mu);
    for (size_t i = 0; i < n; i++) {
        const struct dev_ev *x = &ev[i];
        struct bucket *b;
        int timed = x->e != 0 && x->e <= limit;
        if (!have || x->dev != last) {
            d = dev_get(a, x->dev);
            last = x->dev;
            have = 1;
        }
        if (d == NULL) {
            a->dev_not_aggregated++;
            continue;
        }
        if (x->e != 0 && !timed)
            a->dev_bad_times++;
        switch (x->type) {
        case DEV_KERNEL:
            d->kernels++;
            d->kernel_ns += x->e - x->s;
            if (timed && x->e > x->s)
                busy_add(d, x->s, x->e);
            break;
        case DEV_MEMCPY:
            d->copy_bytes[x->dir] += x->bytes;
            d->copies[x->dir]++;
            if (timed && (b = bucket_at(d, (int64_t)(x->s / NS_PER_S))) != NULL) {
                b->copy_bytes[x->dir] += x->bytes;
                b->copies[x->dir]++;
            }
            break;
        case DEV_MEMSET:
            d->memset_bytes += x->bytes;
            d->memsets++;
            if (timed && (b = bucket_at(d, (int64_t)(x->s / NS_PER_S))) != NULL)
                b->memset_bytes += x->bytes;
            break;
        }
    }
    for (size_t i = 0; i < a->ndev; i++)
        if (a->dev[i]->npend > 0)
            busy_pieces(a->dev[i]);
    pthread_mutex_unlock(&a->dev_mu);
}

/* ---- feeding -------------------------------------------------------------- */

int cuptimon__agg_add_buffer(struct cuptimon_agg *a, uint64_t session,
                             const struct cuptimon_layout *l, const struct cuptimon_strtab *names,
                             const void *buf, size_t len, const struct cuptimon_clock *clk)
{
    struct cuptimon_decode_stats st;
    struct cuptimon_walk w;
    struct cuptimon_ev ev;
    struct dev_ev *scratch;
    struct asess *s;
    size_t ns = 0;
    int64_t now = now_ns();

    memset(&st, 0, sizeof(st));
    int rc = 0, last_dslot = -1;
    uint32_t last_dev = 0;
    uint64_t aggregated = 0, not_agg = 0;

    pthread_mutex_lock(&a->mu);
    s = sess_get(a, session, &rc);
    if (s == NULL) {
        a->buffers++;
        memset(&st, 0, sizeof(st));
        pthread_mutex_unlock(&a->mu);
        /* Counted, so that a bound being hit shows. */
        cuptimon__walk_begin(&w, l, buf, len, &st);
        while (cuptimon__walk_next(&w, &ev))
            ;
        pthread_mutex_lock(&a->mu);
        a->records += st.records;
        a->not_aggregated += st.records;
        pthread_mutex_unlock(&a->mu);
        return rc;
    }
    s->refs++;
    pthread_mutex_unlock(&a->mu);

    scratch = malloc(SCRATCH * sizeof(*scratch));
    pthread_mutex_lock(&s->mu);
    if (scratch == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    refresh_names(a, s, names);
    memset(&st, 0, sizeof(st));
    cuptimon__walk_begin(&w, l, buf, len, &st);
    while (cuptimon__walk_next(&w, &ev)) {
        uint64_t dur, t0, t1;
        int dslot;
        struct kent *e;
        struct dev_ev *x;

        if (ev.type != CUPTIMON_EV_KERNEL && ev.type != CUPTIMON_EV_MEMCPY &&
            ev.type != CUPTIMON_EV_MEMCPY_P2P && ev.type != CUPTIMON_EV_MEMSET)
            continue;
        if (last_dslot >= 0 && ev.device_id == last_dev) {
            dslot = last_dslot;
        } else {
            dslot = sess_dev(s, ev.device_id);
            last_dslot = dslot;
            last_dev = ev.device_id;
        }
        if (dslot < 0) {
            not_agg++;
            continue;
        }
        if (ev.end < ev.start || ev.start == 0) {
            /* No usable time: counted, but not on the device's clock. */
            s->bad_times++;
            dur = 0;
            t0 = t1 = 0;
        } else {
            dur = ev.end - ev.start;
            t0 = cuptimon__clock_map(clk, ev.start);
            t1 = t0 + dur;
        }
        if (ns == SCRATCH) {
            dev_flush(a, scratch, ns, now);
            ns = 0;
        }
        x = &scratch[ns];
        x->dev = ev.device_id;
        x->s = t0;
        x->e = t1;
        switch (ev.type) {
        case CUPTIMON_EV_KERNEL:
            e = kfind(a, s, ev.u.kernel.name_ptr, (uint32_t)dslot, names, dur);
            if (e == NULL) {
                rc = -ENOMEM;
                not_agg++;
                continue;
            }
            hist_add(&e->h, dur);
            s->kernels++;
            s->kernel_ns += dur;
            x->type = DEV_KERNEL;
            x->dir = 0;
            x->bytes = 0;
            break;
        case CUPTIMON_EV_MEMSET:
            s->memsets++;
            s->memset_bytes += ev.u.memset.bytes;
            s->memset_ns += dur;
            x->type = DEV_MEMSET;
            x->dir = 0;
            x->bytes = ev.u.memset.bytes;
            break;
        default: /* MEMCPY, MEMCPY_P2P */
            s->memcpys++;
            s->memcpy_bytes += ev.u.memcpy.bytes;
            s->memcpy_ns += dur;
            x->type = DEV_MEMCPY;
            x->dir = ev.u.memcpy.copy_kind < NDIR ? ev.u.memcpy.copy_kind : 0;
            if (ev.type == CUPTIMON_EV_MEMCPY_P2P)
                x->dir = 10; /* PtoP */
            x->bytes = ev.u.memcpy.bytes;
            break;
        }
        ns++;
        aggregated++;
    }
    dev_flush(a, scratch, ns, now);
    s->buffers++;
    s->records += st.records;
    s->undecodable += st.undecodable_bytes;
    if (clk != NULL && clk->unix_ns != 0) {
        int64_t lat = now - (int64_t)clk->unix_ns;
        if (lat >= 0 && lat < 3600 * (int64_t)NS_PER_S)
            hist_add(&s->handoff, (uint64_t)lat);
    }
out:
    pthread_mutex_unlock(&s->mu);
    free(scratch);
    pthread_mutex_lock(&a->mu);
    a->buffers++;
    a->records += st.records;
    a->aggregated += aggregated;
    a->not_aggregated += not_agg;
    if (--s->refs == 0 && s->dead)
        sess_free(a, s);
    pthread_mutex_unlock(&a->mu);
    return rc < 0 ? rc : (int)(aggregated > INT32_MAX ? INT32_MAX : aggregated);
}

/* ---- from a hello ----------------------------------------------------------- */

int cuptimon__agg_layout_from_hello(json_object *hello, struct cuptimon_layout *l)
{
    uint32_t sizes[CUPTIMON_KIND_SLOTS];
    uint32_t version = 0;
    int have = 0;
    json_object *v, *rs;

    memset(sizes, 0, sizeof(sizes));
    if (hello != NULL && json_object_object_get_ex(hello, "cupti_version", &v) &&
        json_object_is_type(v, json_type_int) && json_object_get_int64(v) > 0 &&
        json_object_get_int64(v) <= UINT32_MAX)
        version = (uint32_t)json_object_get_int64(v);
    if (hello != NULL && json_object_object_get_ex(hello, "record_sizes", &rs) &&
        json_object_is_type(rs, json_type_object)) {
        json_object_object_foreach(rs, key, val)
        {
            char *end;
            unsigned long k = strtoul(key, &end, 10);
            int64_t n = json_object_is_type(val, json_type_int) ? json_object_get_int64(val) : 0;
            /* Absurd sizes are left to cuptimon__layout_init to refuse. */
            if (*end != '\0' || end == key || k >= CUPTIMON_KIND_SLOTS || n <= 0 || n > UINT32_MAX)
                continue;
            sizes[k] = (uint32_t)n;
            have = 1;
        }
    }
    return cuptimon__layout_init(l, version, have ? sizes : NULL);
}

static const char *hello_job_str(json_object *job, const char *key)
{
    json_object *v;
    if (job == NULL || !json_object_object_get_ex(job, key, &v) ||
        !json_object_is_type(v, json_type_string) || json_object_get_string_len(v) == 0)
        return NULL;
    return json_object_get_string(v);
}

void cuptimon__agg_ident_from_hello(json_object *hello, struct cuptimon_agg_ident *id)
{
    json_object *job = NULL;

    if (hello != NULL && !json_object_object_get_ex(hello, "job", &job))
        job = NULL;
    id->job = hello_job_str(job, "slurm_job_id");
    if (id->job == NULL)
        id->job = hello_job_str(job, "torchelastic_run_id");
    id->rank = hello_job_str(job, "rank");
    id->label = hello_job_str(job, "label");
}

/* ---- queries ------------------------------------------------------------------ */

static int set_err(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int set_err(char **err, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL) {
        va_start(ap, fmt);
        if (vasprintf(err, fmt, ap) < 0)
            *err = NULL;
        va_end(ap);
    }
    return -EINVAL;
}

static int str_key(json_object *req, const char *key, char *out, size_t n, char **err)
{
    json_object *v;

    if (!json_object_object_get_ex(req, key, &v) || json_object_is_type(v, json_type_null))
        return 0;
    if (json_object_is_type(v, json_type_int)) {
        snprintf(out, n, "%" PRId64, json_object_get_int64(v));
        return 0;
    }
    if (!json_object_is_type(v, json_type_string))
        return set_err(err, "\"%s\" must be a string, not %s", key,
                       json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
    if ((size_t)json_object_get_string_len(v) >= n)
        return set_err(err, "\"%s\" is %d bytes long; at most %zu are allowed", key,
                       json_object_get_string_len(v), n - 1);
    copy_str(out, n, json_object_get_string(v));
    return 0;
}

int cuptimon__agg_query_from_json(json_object *req, struct cuptimon_agg_query *q, char **err)
{
    static const char *const bys[] = {"process", "kernel", "device"};
    static const char *const sorts[] = {"time", "count", "p99"};
    json_object *v;
    int rc;

    if (err != NULL)
        *err = NULL;
    memset(q, 0, sizeof(*q));
    q->lag_s = -1;
    if (req == NULL || !json_object_is_type(req, json_type_object))
        return set_err(err, "the request is not a JSON object");
    if (json_object_object_get_ex(req, "by", &v)) {
        const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
        unsigned i;
        for (i = 0; i < 3 && strcmp(s, bys[i]) != 0; i++)
            ;
        if (i == 3)
            return set_err(err, "\"by\": %s is not one of \"process\", \"kernel\", \"device\"",
                           json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
        q->by = (int)i;
    }
    if (json_object_object_get_ex(req, "sort", &v)) {
        const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
        unsigned i;
        for (i = 0; i < 3 && strcmp(s, sorts[i]) != 0; i++)
            ;
        if (i == 3)
            return set_err(err, "\"sort\": %s is not one of \"time\", \"count\", \"p99\"",
                           json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
        q->sort = (int)i;
    }
    if (json_object_object_get_ex(req, "pid", &v) && !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) <= 0)
            return set_err(err, "\"pid\": %s is not a process id (a positive integer)",
                           json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
        q->pid = json_object_get_int64(v);
    }
    if ((rc = str_key(req, "job", q->job, sizeof(q->job), err)) < 0 ||
        (rc = str_key(req, "rank", q->rank, sizeof(q->rank), err)) < 0 ||
        (rc = str_key(req, "label", q->label, sizeof(q->label), err)) < 0)
        return rc;
    if (json_object_object_get_ex(req, "n", &v) && !json_object_is_type(v, json_type_null)) {
        int64_t n = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
        if (n < 1 || n > 1000)
            return set_err(err, "\"n\": %s is not a number of rows in 1..1000",
                           json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
        q->n = (unsigned)n;
    }
    return 0;
}

/* Under a->mu. */
static int matches(const struct asess *s, const struct cuptimon_agg_query *q)
{
    return (q->pid == 0 || s->pid == q->pid) && (!q->job[0] || strcmp(s->job, q->job) == 0) &&
           (!q->rank[0] || strcmp(s->rank, q->rank) == 0) &&
           (!q->label[0] || strcmp(s->label, q->label) == 0);
}

static json_object *u64j(uint64_t v)
{
    return json_object_new_uint64(v);
}

/* A device's busy ratio over [end - w, end) seconds (under dev_mu). */
static double busy_ratio(const struct adev *d, int64_t end, unsigned w)
{
    uint64_t busy = 0;

    for (int64_t sec = end - (int64_t)w; sec < end; sec++) {
        const struct bucket *b = &d->ring[(uint64_t)sec % RING];
        if (sec >= 0 && b->sec == sec)
            busy += b->busy_ns < NS_PER_S ? b->busy_ns : NS_PER_S;
    }
    return (double)busy / ((double)w * (double)NS_PER_S);
}

static int64_t window_end(const struct cuptimon_agg_query *q)
{
    int64_t now = q && q->now_ns ? q->now_ns : now_ns();
    int lag = q && q->lag_s >= 0 ? q->lag_s : 2;
    return now / (int64_t)NS_PER_S - lag;
}

static json_object *device_json(const struct adev *d, int64_t end)
{
    json_object *o = json_object_new_object(), *series = json_object_new_array(),
                *mc = json_object_new_object();
    uint64_t cb[NDIR] = {0}, unchecked = 0;

    if (o == NULL || series == NULL || mc == NULL) {
        json_object_put(o);
        json_object_put(series);
        json_object_put(mc);
        return NULL;
    }
    json_object_object_add(o, "device", json_object_new_int64(d->id));
    json_object_object_add(o, "busy_1s", json_object_new_double(busy_ratio(d, end, 1)));
    json_object_object_add(o, "busy_10s", json_object_new_double(busy_ratio(d, end, 10)));
    json_object_object_add(o, "busy_60s", json_object_new_double(busy_ratio(d, end, 60)));
    for (int64_t sec = end - 60; sec < end; sec++) {
        const struct bucket *b = &d->ring[(uint64_t)sec % RING];
        double r = 0;
        if (sec >= 0 && b->sec == sec) {
            r = (double)(b->busy_ns < NS_PER_S ? b->busy_ns : NS_PER_S) / (double)NS_PER_S;
            unchecked += b->unchecked_ns;
        }
        json_object_array_add(series, json_object_new_double(r));
        if (sec >= end - 10 && sec >= 0 && b->sec == sec)
            for (unsigned k = 0; k < NDIR; k++)
                cb[k] += b->copy_bytes[k];
    }
    json_object_object_add(o, "busy_series", series);
    json_object_object_add(o, "busy_ns_total", u64j(d->busy_total));
    json_object_object_add(o, "busy_unchecked_ns", u64j(d->unchecked_total));
    json_object_object_add(o, "busy_unchecked_ns_60s", u64j(unchecked));
    json_object_object_add(o, "kernels", u64j(d->kernels));
    json_object_object_add(o, "kernel_ns", u64j(d->kernel_ns));
    for (unsigned k = 0; k < NDIR; k++) {
        json_object *x;
        if (d->copies[k] == 0)
            continue;
        x = json_object_new_object();
        if (x == NULL)
            continue;
        json_object_object_add(x, "bytes", u64j(d->copy_bytes[k]));
        json_object_object_add(x, "count", u64j(d->copies[k]));
        json_object_object_add(x, "bytes_per_s", json_object_new_double((double)cb[k] / 10.0));
        json_object_object_add(mc, cuptimon__memcpy_kind_name(k), x);
    }
    json_object_object_add(o, "memcpy", mc);
    json_object_object_add(o, "memset_bytes", u64j(d->memset_bytes));
    json_object_object_add(o, "memsets", u64j(d->memsets));
    return o;
}

/* One output row: a session, or a kernel name merged over sessions. */
struct row {
    char *name;    /* demangled (kernel rows) */
    char *mangled; /* a copy: the interned name may go while output runs */
    int other;
    uint64_t procs, last_sess;
    uint64_t sess;    /* process rows: the session id */
    json_object *obj; /* process rows: built under the session's lock */
    struct hist h;
    uint64_t p99; /* computed for sorting */
};

static int row_cmp(const void *pa, const void *pb, void *ud)
{
    const struct row *x = pa, *y = pb;
    int sort_key = *(const int *)ud;
    uint64_t kx, ky;

    switch (sort_key) {
    case CUPTIMON_AGG_SORT_COUNT: kx = x->h.count; ky = y->h.count; break;
    case CUPTIMON_AGG_SORT_P99: kx = x->p99; ky = y->p99; break;
    default: kx = x->h.total; ky = y->h.total; break;
    }
    if (kx != ky)
        return kx < ky ? 1 : -1;
    if (x->h.total != y->h.total)
        return x->h.total < y->h.total ? 1 : -1;
    if (x->name && y->name)
        return strcmp(x->name, y->name);
    return x->sess < y->sess ? -1 : x->sess > y->sess;
}

static char *display_name(struct cuptimon_agg *a, const struct kent *e)
{
    char buf[64];

    if (e->name == NULL) {
        snprintf(buf, sizeof(buf), "<unknown kernel 0x%" PRIx64 ">", e->ptr);
        return strdup(buf);
    }
    return strdup(cuptimon__demangle(a->dm, e->name));
}

/* Kernel rows, merged by display name: a small chained hash over rows. */
struct rowset {
    struct row *r;
    size_t n, cap;
    size_t *head, *next; /* index + 1, 0 = end */
    size_t nb;
};

static struct row *rowset_get(struct rowset *rs, char *name, int other)
{
    uint64_t h = hash_str(name, strlen(name)) ^ (uint64_t)other;
    size_t b, i;

    if (rs->head == NULL) {
        rs->nb = 1024;
        rs->head = calloc(rs->nb, sizeof(*rs->head));
        if (rs->head == NULL)
            return NULL;
    }
    b = h & (rs->nb - 1);
    for (i = rs->head[b]; i != 0; i = rs->next[i - 1]) {
        struct row *r = &rs->r[i - 1];
        if (r->other == other && strcmp(r->name, name) == 0) {
            free(name);
            return r;
        }
    }
    if (rs->n == rs->cap) {
        size_t nc = rs->cap ? rs->cap * 2 : 64;
        struct row *nr = realloc(rs->r, nc * sizeof(*nr));
        size_t *nn = realloc(rs->next, nc * sizeof(*nn));
        if (nr != NULL)
            rs->r = nr;
        if (nn != NULL)
            rs->next = nn;
        if (nr == NULL || nn == NULL)
            return NULL;
        rs->cap = nc;
    }
    struct row *r = &rs->r[rs->n];
    memset(r, 0, sizeof(*r));
    r->name = name;
    r->other = other;
    hist_init(&r->h);
    rs->next[rs->n] = rs->head[b];
    rs->head[b] = ++rs->n;
    return r;
}

static void rowset_free(struct rowset *rs)
{
    for (size_t i = 0; i < rs->n; i++) {
        free(rs->r[i].name);
        free(rs->r[i].mangled);
        json_object_put(rs->r[i].obj);
    }
    free(rs->r);
    free(rs->head);
    free(rs->next);
}

static void row_add(struct row *r, const struct kent *e, uint64_t sess)
{
    hist_merge(&r->h, &e->h);
    if (r->last_sess != sess + 1) {
        r->procs++;
        r->last_sess = sess + 1;
    }
    if (r->mangled == NULL && e->name != NULL)
        r->mangled = strdup(e->name); /* NULL (no memory): the name is shown */
}

static void hist_json(json_object *o, const struct hist *h, const char *prefix)
{
    char k[32];

    snprintf(k, sizeof(k), "%sp50_ns", prefix);
    json_object_object_add(o, k, u64j(hist_pct(h, 500)));
    snprintf(k, sizeof(k), "%sp90_ns", prefix);
    json_object_object_add(o, k, u64j(hist_pct(h, 900)));
    snprintf(k, sizeof(k), "%sp99_ns", prefix);
    json_object_object_add(o, k, u64j(hist_pct(h, 990)));
}

static void sess_hist(const struct asess *s, struct hist *h)
{
    hist_init(h);
    for (size_t j = 0; j < s->nk; j++)
        hist_merge(h, &s->k[j]->h);
    for (unsigned d = 0; d < s->ndevs; d++)
        if (s->other[d] != NULL)
            hist_merge(h, &s->other[d]->h);
}

/* A process row (under a->mu and s->mu). */
static json_object *process_json(const struct asess *s, const struct hist *h)
{
    json_object *x = json_object_new_object();

    if (x == NULL)
        return NULL;
    json_object_object_add(x, "session", u64j(s->id));
    json_object_object_add(x, "pid", json_object_new_int64(s->pid));
    json_object_object_add(x, "uid", json_object_new_int64(s->uid));
    json_object_object_add(x, "job", json_object_new_string(s->job));
    json_object_object_add(x, "rank", json_object_new_string(s->rank));
    json_object_object_add(x, "label", json_object_new_string(s->label));
    json_object_object_add(x, "exe", json_object_new_string(s->exe));
    json_object_object_add(x, "ended", json_object_new_boolean(s->ended_ns != 0));
    json_object_object_add(x, "kernels", u64j(s->kernels));
    json_object_object_add(x, "kernel_ns", u64j(s->kernel_ns));
    hist_json(x, h, "");
    json_object_object_add(x, "memcpys", u64j(s->memcpys));
    json_object_object_add(x, "memcpy_bytes", u64j(s->memcpy_bytes));
    json_object_object_add(x, "memcpy_ns", u64j(s->memcpy_ns));
    json_object_object_add(x, "memsets", u64j(s->memsets));
    json_object_object_add(x, "memset_bytes", u64j(s->memset_bytes));
    json_object_object_add(x, "memset_ns", u64j(s->memset_ns));
    json_object_object_add(x, "records", u64j(s->records));
    json_object_object_add(x, "buffers", u64j(s->buffers));
    json_object_object_add(x, "dropped_records", u64j(s->dropped));
    json_object_object_add(x, "lost_buffers", u64j(s->lost));
    json_object_object_add(x, "kernels_folded", u64j(s->folded));
    json_object_object_add(x, "handoff_p50_ns", u64j(hist_pct(&s->handoff, 500)));
    json_object_object_add(x, "handoff_p99_ns", u64j(hist_pct(&s->handoff, 990)));
    json_object_object_add(x, "handoff_max_ns", u64j(s->handoff.count ? s->handoff.max : 0));
    return x;
}

json_object *cuptimon__agg_json(struct cuptimon_agg *a, const struct cuptimon_agg_query *q)
{
    static const char *const bys[] = {"process", "kernel", "device"};
    static const char *const sorts[] = {"time", "count", "p99"};
    struct cuptimon_agg_query dq;
    json_object *o = json_object_new_object(), *node = json_object_new_object(),
                *devs = json_object_new_array(), *rows = json_object_new_array();
    struct rowset rs = {0};
    uint64_t kernels = 0, kernel_ns = 0, mcb = 0, mcn = 0, msb = 0, msn = 0, recs = 0, drop = 0,
             lost = 0, shown = 0;
    unsigned n, by, sort;
    int64_t end;
    int fail = 0;

    if (q == NULL) {
        memset(&dq, 0, sizeof(dq));
        dq.lag_s = -1;
        q = &dq;
    }
    if (o == NULL || node == NULL || devs == NULL || rows == NULL) {
        json_object_put(o);
        json_object_put(node);
        json_object_put(devs);
        json_object_put(rows);
        return NULL;
    }
    n = q->n ? (q->n > 1000 ? 1000 : q->n) : 20;
    by = q->by >= 0 && q->by <= 2 ? (unsigned)q->by : 0;
    sort = q->sort >= 0 && q->sort <= 2 ? (unsigned)q->sort : 0;
    end = window_end(q);
    json_object_object_add(o, "now_unix_ns",
                           json_object_new_int64(q->now_ns ? q->now_ns : now_ns()));
    json_object_object_add(o, "window_end_unix_ns",
                           json_object_new_int64(end * (int64_t)NS_PER_S));
    json_object_object_add(o, "by", json_object_new_string(bys[by]));
    json_object_object_add(o, "sort", json_object_new_string(sorts[sort]));

    pthread_mutex_lock(&a->mu);
    sess_expire(a, now_ns(), 0);
    for (size_t i = 0; i < a->nsess; i++) {
        struct asess *s = a->sess[i];
        int m = matches(s, q);
        pthread_mutex_lock(&s->mu);
        kernels += s->kernels;
        kernel_ns += s->kernel_ns;
        mcb += s->memcpy_bytes;
        mcn += s->memcpys;
        msb += s->memset_bytes;
        msn += s->memsets;
        recs += s->records;
        drop += s->dropped;
        lost += s->lost;
        shown += (uint64_t)m;
        if (m && by == CUPTIMON_AGG_BY_PROCESS) {
            struct row *r;
            if (rs.n == rs.cap) {
                size_t nc = rs.cap ? rs.cap * 2 : 16;
                struct row *nr = realloc(rs.r, nc * sizeof(*nr));
                if (nr == NULL) {
                    fail = 1;
                    pthread_mutex_unlock(&s->mu);
                    break;
                }
                rs.r = nr;
                rs.cap = nc;
            }
            r = &rs.r[rs.n++];
            memset(r, 0, sizeof(*r));
            r->sess = s->id;
            sess_hist(s, &r->h);
            r->p99 = hist_pct(&r->h, 990);
            r->obj = process_json(s, &r->h);
            if (r->obj == NULL)
                fail = 1;
        } else if (m && by == CUPTIMON_AGG_BY_KERNEL) {
            for (size_t j = 0; j < s->nk + s->ndevs && !fail; j++) {
                const struct kent *e = j < s->nk ? s->k[j] : s->other[j - s->nk];
                int other = j >= s->nk;
                char *nm;
                struct row *r;
                if (e == NULL || e->h.count == 0)
                    continue;
                nm = other ? strdup("other") : display_name(a, e);
                r = nm ? rowset_get(&rs, nm, other) : NULL;
                if (r == NULL) {
                    free(nm);
                    fail = 1;
                    break;
                }
                row_add(r, e, s->id);
            }
        }
        pthread_mutex_unlock(&s->mu);
        if (fail)
            break;
    }
    json_object_object_add(node, "sessions", u64j(sess_live(a)));
    json_object_object_add(node, "sessions_ended", u64j(a->nsess - sess_live(a)));
    json_object_object_add(node, "sessions_shown", u64j(shown));
    json_object_object_add(node, "kernels", u64j(kernels));
    json_object_object_add(node, "kernel_ns", u64j(kernel_ns));
    json_object_object_add(node, "memcpys", u64j(mcn));
    json_object_object_add(node, "memcpy_bytes", u64j(mcb));
    json_object_object_add(node, "memsets", u64j(msn));
    json_object_object_add(node, "memset_bytes", u64j(msb));
    json_object_object_add(node, "records", u64j(recs));
    json_object_object_add(node, "dropped_records", u64j(drop));
    json_object_object_add(node, "lost_buffers", u64j(lost));
    pthread_mutex_lock(&a->dev_mu);
    json_object_object_add(node, "not_aggregated_records",
                           u64j(a->not_aggregated + a->dev_not_aggregated));
    for (size_t i = 0; i < a->ndev; i++) {
        json_object *d = device_json(a->dev[i], end);
        if (d != NULL)
            json_object_array_add(devs, d);
        if (by == CUPTIMON_AGG_BY_DEVICE && i < n) {
            d = device_json(a->dev[i], end);
            if (d != NULL)
                json_object_array_add(rows, d);
        }
    }
    if (by == CUPTIMON_AGG_BY_DEVICE)
        shown = a->ndev;
    pthread_mutex_unlock(&a->dev_mu);
    json_object_object_add(o, "node", node);
    json_object_object_add(o, "devices", devs);

    if (by != CUPTIMON_AGG_BY_DEVICE && !fail) {
        uint64_t rest_count = 0, rest_ns = 0;
        if (by == CUPTIMON_AGG_BY_KERNEL)
            for (size_t i = 0; i < rs.n; i++)
                rs.r[i].p99 = hist_pct(&rs.r[i].h, 990);
        int key = (int)sort;
        if (rs.n > 1)
            qsort_r(rs.r, rs.n, sizeof(*rs.r), row_cmp, &key);
        for (size_t i = 0; i < rs.n; i++) {
            const struct row *r = &rs.r[i];
            json_object *x;
            if (i >= n) {
                rest_count += r->h.count;
                rest_ns += r->h.total;
                continue;
            }
            x = by == CUPTIMON_AGG_BY_PROCESS ? NULL : json_object_new_object();
            if (x == NULL && by != CUPTIMON_AGG_BY_PROCESS)
                continue;
            if (by == CUPTIMON_AGG_BY_PROCESS) {
                x = json_object_get(r->obj);
            } else {
                json_object_object_add(x, "name", json_object_new_string(r->name));
                json_object_object_add(x, "mangled",
                                       r->mangled ? json_object_new_string(r->mangled)
                                                  : json_object_new_string(r->name));
                json_object_object_add(x, "count", u64j(r->h.count));
                json_object_object_add(x, "total_ns", u64j(r->h.total));
                json_object_object_add(x, "mean_ns",
                                       u64j(r->h.count ? r->h.total / r->h.count : 0));
                json_object_object_add(x, "min_ns", u64j(r->h.count ? r->h.min : 0));
                json_object_object_add(x, "max_ns", u64j(r->h.max));
                hist_json(x, &r->h, "");
                json_object_object_add(x, "processes", u64j(r->procs));
                json_object_object_add(x, "other", json_object_new_boolean(r->other));
            }
            json_object_array_add(rows, x);
        }
        json_object *rest = json_object_new_object();
        if (rest != NULL) {
            json_object_object_add(rest, "rows", u64j(rs.n > n ? rs.n - n : 0));
            json_object_object_add(rest, "count", u64j(rest_count));
            json_object_object_add(rest, "total_ns", u64j(rest_ns));
            json_object_object_add(o, "rest", rest);
        }
        shown = rs.n;
    }
    pthread_mutex_unlock(&a->mu);
    rowset_free(&rs);
    json_object_object_add(o, "rows", rows);
    json_object_object_add(o, "total_rows", u64j(shown));
    if (fail) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

/* ---- Prometheus --------------------------------------------------------------- */

struct sb {
    char *p;
    size_t len, cap;
    int err;
};

static void sb_grow(struct sb *b, size_t need)
{
    size_t nc;
    char *np;

    if (b->err || b->len + need + 1 <= b->cap)
        return;
    nc = b->cap ? b->cap : 4096;
    while (nc < b->len + need + 1)
        nc *= 2;
    np = realloc(b->p, nc);
    if (np == NULL) {
        b->err = 1;
        return;
    }
    b->p = np;
    b->cap = nc;
}

static void sb_printf(struct sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sb *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->err)
        return;
    va_start(ap, fmt);
    n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->err = 1;
        return;
    }
    if (b->p == NULL || b->len + (size_t)n + 1 > b->cap) {
        sb_grow(b, (size_t)n);
        if (b->err)
            return;
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

static void sb_putc(struct sb *b, char c)
{
    sb_grow(b, 1);
    if (b->err)
        return;
    b->p[b->len++] = c;
    b->p[b->len] = '\0';
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len;
    uint32_t cp;

    if (s[0] < 0x80)
        return 1;
    if ((s[0] & 0xe0) == 0xc0) {
        len = 2;
        cp = s[0] & 0x1f;
    } else if ((s[0] & 0xf0) == 0xe0) {
        len = 3;
        cp = s[0] & 0x0f;
    } else if ((s[0] & 0xf8) == 0xf0) {
        len = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* A label value: escaped (\\, \", \n), invalid UTF-8 bytes as U+FFFD,
 * cut at max bytes of input on a character boundary. */
static void sb_label(struct sb *b, const char *v, size_t max)
{
    const unsigned char *s = (const unsigned char *)(v ? v : "");
    size_t n = strlen((const char *)s), i = 0;

    if (n > max)
        n = max;
    while (i < n) {
        size_t l = utf8_len(s + i, n - i);
        if (l == 0) {
            sb_printf(b, "\xef\xbf\xbd");
            i++;
        } else if (s[i] == '\\') {
            sb_printf(b, "\\\\");
            i++;
        } else if (s[i] == '"') {
            sb_printf(b, "\\\"");
            i++;
        } else if (s[i] == '\n') {
            sb_printf(b, "\\n");
            i++;
        } else {
            for (size_t k = 0; k < l; k++)
                sb_putc(b, (char)s[i + k]);
            i += l;
        }
    }
}

static void sb_ident(struct sb *b, const struct asess *s)
{
    sb_printf(b, "pid=\"%" PRId64 "\",job=\"", s->pid);
    sb_label(b, s->job, sizeof(s->job));
    sb_printf(b, "\",rank=\"");
    sb_label(b, s->rank, sizeof(s->rank));
    sb_printf(b, "\",label=\"");
    sb_label(b, s->label, sizeof(s->label));
    sb_printf(b, "\"");
}

static void sb_family(struct sb *b, const char *name, const char *type, const char *help)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One session's kernel series on one device: label, launches, ns. */
struct pk {
    char *label;
    const struct kent *e;
    uint64_t count, total;
};

static int pk_by_total(const void *pa, const void *pb)
{
    const struct pk *x = pa, *y = pb;
    if (x->total != y->total)
        return x->total < y->total ? 1 : -1;
    return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

static int pk_by_label(const void *pa, const void *pb)
{
    return strcmp(((const struct pk *)pa)->label, ((const struct pk *)pb)->label);
}

/* Cuts a demangled name where its label value will be cut (so that two
 * names equal in their first PROM_NAME_MAX bytes become one series). */
static char *prom_name(struct cuptimon_agg *a, const struct kent *e)
{
    char *n = display_name(a, e);
    if (n != NULL && strlen(n) > PROM_NAME_MAX) {
        size_t cut = PROM_NAME_MAX;
        while (cut > 0 && ((unsigned char)n[cut] & 0xc0) == 0x80)
            cut--;
        n[cut] = '\0';
    }
    return n;
}

/* Builds the kernel series of session s (under s->mu) into *out. */
static int session_series(struct cuptimon_agg *a, const struct asess *s, unsigned d,
                          struct pk **out, size_t *nout)
{
    struct pk *v = calloc(s->nk + 1, sizeof(*v));
    size_t n = 0, m = 0;
    uint64_t oc = 0, ot = 0;

    *out = NULL;
    *nout = 0;
    if (v == NULL)
        return -ENOMEM;
    for (size_t j = 0; j < s->nk; j++) {
        const struct kent *e = s->k[j];
        if (e->dslot != d || e->h.count == 0)
            continue;
        v[n].count = e->h.count;
        v[n].total = e->h.total;
        v[n].e = e; /* named below, for the top_n only */
        n++;
    }
    if (n > 1)
        qsort(v, n, sizeof(*v), pk_by_total);
    for (size_t j = 0; j < n; j++) {
        if (j < a->top_n) {
            v[m].count = v[j].count;
            v[m].total = v[j].total;
            v[m].label = prom_name(a, v[j].e);
            if (v[m].label == NULL) {
                for (size_t k = 0; k < m; k++)
                    free(v[k].label);
                free(v);
                return -ENOMEM;
            }
            m++;
        } else {
            oc += v[j].count;
            ot += v[j].total;
        }
    }
    if (d < s->ndevs && s->other[d] != NULL) {
        oc += s->other[d]->h.count;
        ot += s->other[d]->h.total;
    }
    if (oc > 0) {
        v[m].label = strdup("other");
        v[m].count = oc;
        v[m].total = ot;
        if (v[m].label != NULL)
            m++;
    }
    /* Equal labels (cut names, a kernel called "other") are one series. */
    if (m > 1) {
        size_t k = 0;
        qsort(v, m, sizeof(*v), pk_by_label);
        for (size_t j = 1; j < m; j++) {
            if (strcmp(v[k].label, v[j].label) == 0) {
                v[k].count += v[j].count;
                v[k].total += v[j].total;
                free(v[j].label);
            } else {
                v[++k] = v[j];
            }
        }
        m = k + 1;
    }
    *out = v;
    *nout = m;
    return 0;
}

char *cuptimon__agg_prometheus(struct cuptimon_agg *a)
{
    struct sb b = {0};
    int64_t end = window_end(NULL);

    pthread_mutex_lock(&a->mu);
    sess_expire(a, now_ns(), 0);
    sb_family(&b, "cuptimon_kernel_seconds_total", "counter",
              "GPU time of kernels by process, device and kernel name (the top names of each "
              "process and device, the rest as kernel=\"other\").");
    /* Both kernel families come from one pass; the launches go to a second
     * buffer appended after. */
    struct sb l = {0};
    sb_family(&l, "cuptimon_kernel_launches_total", "counter",
              "Kernels completed by process, device and kernel name (the top names of each "
              "process and device, the rest as kernel=\"other\").");
    for (size_t i = 0; i < a->nsess; i++) {
        struct asess *s = a->sess[i];
        pthread_mutex_lock(&s->mu);
        for (unsigned d = 0; d < s->ndevs; d++) {
            struct pk *v;
            size_t m;
            if (session_series(a, s, d, &v, &m) < 0) {
                b.err = 1;
                continue;
            }
            for (size_t j = 0; j < m; j++) {
                sb_printf(&b, "cuptimon_kernel_seconds_total{");
                sb_ident(&b, s);
                sb_printf(&b, ",device=\"%" PRIu32 "\",kernel=\"", s->devs[d]);
                sb_label(&b, v[j].label, SIZE_MAX);
                sb_printf(&b, "\"} %" PRIu64 ".%09" PRIu64 "\n", v[j].total / NS_PER_S,
                          v[j].total % NS_PER_S);
                sb_printf(&l, "cuptimon_kernel_launches_total{");
                sb_ident(&l, s);
                sb_printf(&l, ",device=\"%" PRIu32 "\",kernel=\"", s->devs[d]);
                sb_label(&l, v[j].label, SIZE_MAX);
                sb_printf(&l, "\"} %" PRIu64 "\n", v[j].count);
                free(v[j].label);
            }
            free(v);
        }
        pthread_mutex_unlock(&s->mu);
    }
    if (l.err)
        b.err = 1;
    else if (l.len > 0)
        sb_printf(&b, "%s", l.p);
    free(l.p);

    sb_family(&b, "cuptimon_dropped_records_total", "counter",
              "Activity records CUPTI dropped in the process (its buffers were full).");
    for (size_t i = 0; i < a->nsess; i++) {
        sb_printf(&b, "cuptimon_dropped_records_total{");
        sb_ident(&b, a->sess[i]);
        sb_printf(&b, "} %" PRIu64 "\n", a->sess[i]->dropped);
    }
    sb_family(&b, "cuptimon_lost_buffers_total", "counter",
              "Activity buffers of the process that were lost (a daemon went away, or a "
              "write failed).");
    for (size_t i = 0; i < a->nsess; i++) {
        sb_printf(&b, "cuptimon_lost_buffers_total{");
        sb_ident(&b, a->sess[i]);
        sb_printf(&b, "} %" PRIu64 "\n", a->sess[i]->lost);
    }
    sb_family(&b, "cuptimon_handoff_latency_seconds", "summary",
              "Time from a buffer's completion in the process to its aggregation in the "
              "daemon, after the archive write.");
    for (size_t i = 0; i < a->nsess; i++) {
        struct asess *s = a->sess[i];
        pthread_mutex_lock(&s->mu);
        if (s->handoff.count > 0) {
            static const unsigned qs[] = {500, 990};
            static const char *const qn[] = {"0.5", "0.99"};
            for (unsigned k = 0; k < 2; k++) {
                uint64_t v = hist_pct(&s->handoff, qs[k]);
                sb_printf(&b, "cuptimon_handoff_latency_seconds{");
                sb_ident(&b, s);
                sb_printf(&b, ",quantile=\"%s\"} %" PRIu64 ".%09" PRIu64 "\n", qn[k],
                          v / NS_PER_S, v % NS_PER_S);
            }
        }
        sb_printf(&b, "cuptimon_handoff_latency_seconds_sum{");
        sb_ident(&b, s);
        sb_printf(&b, "} %" PRIu64 ".%09" PRIu64 "\n", s->handoff.total / NS_PER_S,
                  s->handoff.total % NS_PER_S);
        sb_printf(&b, "cuptimon_handoff_latency_seconds_count{");
        sb_ident(&b, s);
        sb_printf(&b, "} %" PRIu64 "\n", s->handoff.count);
        pthread_mutex_unlock(&s->mu);
    }
    sb_family(&b, "cuptimon_sessions", "gauge", "Processes whose activity is aggregated now.");
    sb_printf(&b, "cuptimon_sessions %zu\n", sess_live(a));

    pthread_mutex_lock(&a->dev_mu);
    sb_family(&b, "cuptimon_gpu_busy_ratio", "gauge",
              "Fraction of the 10 s ending 2 s ago in which at least one kernel ran on the "
              "device (CUDA device ordinal of the processes).");
    for (size_t i = 0; i < a->ndev; i++)
        sb_printf(&b, "cuptimon_gpu_busy_ratio{device=\"%" PRIu32 "\"} %.6f\n", a->dev[i]->id,
                  busy_ratio(a->dev[i], end, 10));
    sb_family(&b, "cuptimon_gpu_busy_seconds_total", "counter",
              "Time in which at least one kernel ran on the device (the union of kernel "
              "intervals).");
    for (size_t i = 0; i < a->ndev; i++)
        sb_printf(&b, "cuptimon_gpu_busy_seconds_total{device=\"%" PRIu32 "\"} %" PRIu64
                      ".%09" PRIu64 "\n",
                  a->dev[i]->id, a->dev[i]->busy_total / NS_PER_S,
                  a->dev[i]->busy_total % NS_PER_S);
    sb_family(&b, "cuptimon_memcpy_bytes_total", "counter",
              "Bytes copied by memory copies on the device, by direction.");
    for (size_t i = 0; i < a->ndev; i++)
        for (unsigned k = 0; k < NDIR; k++)
            if (a->dev[i]->copies[k] > 0)
                sb_printf(&b, "cuptimon_memcpy_bytes_total{device=\"%" PRIu32
                              "\",direction=\"%s\"} %" PRIu64 "\n",
                          a->dev[i]->id, cuptimon__memcpy_kind_name(k), a->dev[i]->copy_bytes[k]);
    sb_family(&b, "cuptimon_memset_bytes_total", "counter", "Bytes set by memsets on the device.");
    for (size_t i = 0; i < a->ndev; i++)
        sb_printf(&b, "cuptimon_memset_bytes_total{device=\"%" PRIu32 "\"} %" PRIu64 "\n",
                  a->dev[i]->id, a->dev[i]->memset_bytes);
    pthread_mutex_unlock(&a->dev_mu);
    pthread_mutex_unlock(&a->mu);
    if (b.err) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

int cuptimon__agg_write_prometheus(struct cuptimon_agg *a, const char *path)
{
    struct cuptimon_outfile of;
    char *text;
    size_t len, off = 0;
    int fd, rc = 0;

    text = cuptimon__agg_prometheus(a);
    if (text == NULL)
        return -ENOMEM;
    len = strlen(text);
    /* node_exporter may run as another user: 0644 whatever the umask. */
    if ((rc = cuptimon__outfile_open(&of, path, 0644)) < 0) {
        free(text);
        return rc;
    }
    fd = of.fd;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = -errno;
            goto out;
        }
        off += (size_t)w;
    }
    /* No fsync: the file is rewritten every interval, and a sync on the
     * daemon's loop could stall it behind a busy disk. */
out:;
    int crc = cuptimon__outfile_commit(&of, rc == 0, 0);
    if (rc == 0)
        rc = crc;
    free(text);
    return rc;
}

void cuptimon__agg_stats(struct cuptimon_agg *a, struct cuptimon_agg_stats *st)
{
    memset(st, 0, sizeof(*st));
    pthread_mutex_lock(&a->mu);
    st->sessions = a->nsess; /* live and ended */
    st->buffers = a->buffers;
    st->records = a->records;
    st->aggregated = a->aggregated;
    st->not_aggregated = a->not_aggregated;
    st->bytes = sizeof(*a) + a->sesscap * sizeof(*a->sess);
    for (size_t i = 0; i < a->nsess; i++) {
        struct asess *s = a->sess[i];
        pthread_mutex_lock(&s->mu);
        st->folded += s->folded;
        st->bad_times += s->bad_times;
        st->bytes += sizeof(*s) + s->kcap * sizeof(*s->k) + s->icap * sizeof(*s->idx) +
                     (s->nk + s->ndevs) * sizeof(struct kent);
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_lock(&a->names.mu);
    st->bytes += a->names.bytes + a->names.nb * sizeof(*a->names.b);
    pthread_mutex_unlock(&a->names.mu);
    pthread_mutex_lock(&a->dev_mu);
    st->not_aggregated += a->dev_not_aggregated;
    st->bad_times += a->dev_bad_times;
    for (size_t i = 0; i < a->ndev; i++) {
        st->late_ns += a->dev[i]->late_ns;
        st->bytes += sizeof(*a->dev[i]) + a->dev[i]->ivcap * sizeof(struct iv);
    }
    pthread_mutex_unlock(&a->dev_mu);
    pthread_mutex_unlock(&a->mu);
}
