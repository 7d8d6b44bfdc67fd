/*
 * The statistics engine (see stats.h).
 */
#include "config.h"

#include "stats.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cbid.h"
#include "cuptimon-proto.h"
#include "demangle.h"
#include "hash.h"
#include "strtab.h"
#include "utf8.h"

/* Histogram bins per power of two: 2^SUB_BITS. */
#define SUB_BITS 6
#define SUB      (1u << SUB_BITS)
/* Bins one histogram keeps at most (16 KiB): 32 powers of two. */
#define SKETCH_MAX_BINS 2048u
/* Disjoint busy intervals a process keeps before adding up the earliest. */
#define BUSY_MAX 4096u
/* (process, name pointer) and (API kind, cbid) pairs resolved to rows. */
#define KEYS_MAX (1u << 20)
/* Memory operations: the 11 copy kinds of copy_name() (Unknown .. PtoP),
 * peer-to-peer records, memset. */
#define MEM_OPS 13u

/* ---- distributions ------------------------------------------------------ */

struct sketch {
    int32_t lo;      /* the bin index of b[0] */
    uint32_t n;      /* bins in use: [lo, lo + n) */
    uint32_t cap;    /* bins allocated */
    uint64_t folded; /* values in b[0] that belong to a lower bin */
    uint64_t *b;
};

/* Count, total, extremes and moments are always exact; the values behind
 * the median are either kept (v) or in a histogram (sk), never both. */
struct dist {
    uint64_t n, total, min, max;
    double mean, m2; /* Welford's running mean and sum of squared deviations */
    uint64_t *v;
    size_t vn, vcap;
    struct sketch *sk;
};

/* The bin of x: x itself below 2 * SUB (those bins hold one value each);
 * above, SUB bins per power of two, each as wide as 1/(2 SUB) to 1/SUB of
 * its smallest value.  At most 3775 (x = 2^64 - 1). */
static inline int32_t bin_of(uint64_t x)
{
    unsigned e;

    if (x < SUB)
        return (int32_t)x;
    e = 63u - (unsigned)__builtin_clzll(x); /* e >= SUB_BITS */
    return (int32_t)(((e - SUB_BITS + 1u) << SUB_BITS) + ((x >> (e - SUB_BITS)) & (SUB - 1u)));
}

/* The middle of bin i's values: no value in the bin is further from it
 * than 1/(2 SUB) of itself. */
static double bin_mid(int32_t i)
{
    unsigned k = (unsigned)i >> SUB_BITS, m = (unsigned)i & (SUB - 1u);
    uint64_t lo, width;

    if (i < (int32_t)(2 * SUB))
        return (double)i;
    lo = (uint64_t)(SUB + m) << (k - 1u);
    width = (uint64_t)1 << (k - 1u);
    return (double)lo + (double)(width - 1u) / 2.0;
}

static int sk_reserve(struct sketch *k, uint32_t bins)
{
    uint32_t cap = k->cap ? k->cap : 16;
    uint64_t *nb;

    if (bins <= k->cap)
        return 0;
    while (cap < bins)
        cap *= 2;
    if (cap > SKETCH_MAX_BINS)
        cap = SKETCH_MAX_BINS;
    nb = realloc(k->b, cap * sizeof(*nb));
    if (nb == NULL)
        return -ENOMEM;
    k->b = nb;
    k->cap = cap;
    return 0;
}

/* Adds c values to bin i; values that fall below the SKETCH_MAX_BINS the
 * histogram keeps go to its lowest bin, and are counted as folded. */
static int sk_add(struct sketch *k, int32_t i, uint64_t c)
{
    const int32_t max = (int32_t)SKETCH_MAX_BINS;

    if (k->n == 0) {
        if (sk_reserve(k, 1) < 0)
            return -ENOMEM;
        k->lo = i;
        k->n = 1;
        k->b[0] = c;
        return 0;
    }
    int32_t hi = k->lo + (int32_t)k->n - 1;
    if (i < k->lo) {
        int32_t nlo = hi - i + 1 > max ? hi - max + 1 : i;
        if (nlo < k->lo) {
            uint32_t grow = (uint32_t)(k->lo - nlo);
            if (sk_reserve(k, k->n + grow) < 0)
                return -ENOMEM;
            memmove(k->b + grow, k->b, k->n * sizeof(*k->b));
            memset(k->b, 0, grow * sizeof(*k->b));
            k->lo = nlo;
            k->n += grow;
        }
        if (i < k->lo) {
            k->folded += c;
            i = k->lo;
        }
    } else if (i > hi) {
        if (i - k->lo + 1 > max) {
            /* Fold the lowest bins into the new lowest one. */
            int32_t nlo = i - max + 1;
            uint64_t sum = 0;
            uint32_t drop = nlo - k->lo >= (int32_t)k->n ? k->n : (uint32_t)(nlo - k->lo);
            for (uint32_t j = 0; j < drop; j++)
                sum += k->b[j];
            k->folded = sum; /* the values of the bins dropped, folded before or not */
            memmove(k->b, k->b + drop, (k->n - drop) * sizeof(*k->b));
            k->n -= drop;
            if (k->n == 0) {
                k->n = 1;
                k->b[0] = 0;
            }
            k->lo = nlo;
            k->b[0] += sum;
        }
        uint32_t nn = (uint32_t)(i - k->lo + 1);
        if (sk_reserve(k, nn) < 0)
            return -ENOMEM;
        memset(k->b + k->n, 0, (nn - k->n) * sizeof(*k->b));
        k->n = nn;
    }
    k->b[i - k->lo] += c;
    return 0;
}

/* The value of rank r (0-based) in the histogram. */
static double sk_rank(const struct sketch *k, uint64_t r)
{
    uint64_t seen = 0;

    for (uint32_t j = 0; j < k->n; j++) {
        seen += k->b[j];
        if (seen > r)
            return bin_mid(k->lo + (int32_t)j);
    }
    return k->n ? bin_mid(k->lo + (int32_t)k->n - 1) : 0;
}

/* ---- the engine ---------------------------------------------------------- */

struct row {
    char *name;
    struct dist t; /* durations (ns) */
    struct dist b; /* sizes (bytes): memory rows only */
};

/* A report's rows, found by name through an open-addressing table. */
struct report {
    struct row *rows;
    size_t n, cap;
    uint32_t *idx; /* row index + 1, 0: empty */
    size_t idx_cap;
    struct row other;    /* names past names_max */
    uint64_t incomplete; /* records without a complete time */
    int has_other;
};

/* (process or API kind, pointer or cbid) -> row index + 1 (0: empty;
 * UINT32_MAX: the report's other row). */
struct key {
    uint64_t ptr;
    uint32_t proc;
    uint32_t row;
};

struct keymap {
    struct key *k;
    size_t cap, n;
    struct key *last;
};

struct ival {
    uint64_t s, e;
};

struct sproc {
    struct cuptimon_proc_info info; /* hostname and label owned */
    const struct cuptimon_strtab *names;
    struct cuptimon_demangler *dm;
    uint64_t kernels, records, dropped;
    uint64_t first, last; /* Unix ns; first 0: no timed event yet */
    struct ival *iv;      /* sorted, disjoint, not touching */
    size_t niv, ivcap;
    uint64_t busy_closed;    /* the length of the intervals added up and forgotten */
    uint64_t watermark;      /* ... which all ended by this */
    uint64_t busy_uncertain; /* time before the watermark not known to be busy or not */
};

struct cuptimon_stats {
    unsigned reports;
    uint64_t exact_limit;
    size_t names_max;
    struct report rep[CUPTIMON_STATS_REPORTS]; /* MEMORY_BYTES: unused, memory rows hold both */
    struct keymap kkeys, akeys;
    struct sproc *procs;
    size_t nprocs, procs_cap;
    uint64_t kept;            /* values allocated for exact medians */
    uint32_t memrow[MEM_OPS]; /* row index + 1 per memory operation, 0: not yet */
    uint64_t dropped;
    uint64_t key_overflow; /* records of pairs past KEYS_MAX, in the other rows */
    uint64_t rng;
    int oom;
};

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

static void dist_init(struct dist *d)
{
    memset(d, 0, sizeof(*d));
    d->min = UINT64_MAX;
}

static void dist_free(struct cuptimon_stats *st, struct dist *d)
{
    st->kept -= d->vcap;
    free(d->v);
    if (d->sk != NULL)
        free(d->sk->b);
    free(d->sk);
    dist_init(d);
}

/* Moves d's kept values into a histogram. */
static int to_sketch(struct cuptimon_stats *st, struct dist *d)
{
    struct sketch *k = calloc(1, sizeof(*k));

    if (k == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < d->vn; i++) {
        if (sk_add(k, bin_of(d->v[i]), 1) < 0) {
            free(k->b);
            free(k);
            return -ENOMEM;
        }
    }
    st->kept -= d->vcap;
    free(d->v);
    d->v = NULL;
    d->vn = d->vcap = 0;
    d->sk = k;
    return 0;
}

/* Calls fn on every distribution. */
static void each_dist(struct cuptimon_stats *st, void (*fn)(struct dist *, void *), void *ud)
{
    for (unsigned r = 0; r < CUPTIMON_STATS_REPORTS; r++) {
        struct report *rp = &st->rep[r];
        for (size_t i = 0; i < rp->n; i++) {
            fn(&rp->rows[i].t, ud);
            fn(&rp->rows[i].b, ud);
        }
        fn(&rp->other.t, ud);
        fn(&rp->other.b, ud);
    }
}

static void largest(struct dist *d, void *ud)
{
    struct dist **best = ud;
    if (d->vcap > 0 && (*best == NULL || d->vcap > (*best)->vcap))
        *best = d;
}

/* Makes room for need more kept values: moves the distributions that keep
 * the most to histograms, largest first, until the kept values and need
 * fit in three quarters of the limit (or none is left to move). */
static void make_room(struct cuptimon_stats *st, uint64_t need)
{
    uint64_t target = st->exact_limit / 4 * 3;

    while (st->kept + need > target) {
        struct dist *best = NULL;
        each_dist(st, largest, &best);
        if (best == NULL || to_sketch(st, best) < 0)
            return;
    }
}

static void dist_add(struct cuptimon_stats *st, struct dist *d, uint64_t x)
{
    double delta;

    d->n++;
    d->total = sat_add(d->total, x);
    if (x < d->min)
        d->min = x;
    if (x > d->max)
        d->max = x;
    delta = (double)x - d->mean;
    d->mean += delta / (double)d->n;
    d->m2 += delta * ((double)x - d->mean);

    if (d->sk == NULL && d->vn == d->vcap) {
        size_t ncap = d->vcap ? d->vcap * 2 : 16;
        if (st->kept + (ncap - d->vcap) > st->exact_limit)
            make_room(st, ncap - d->vcap);
        if (d->sk == NULL && st->kept + (ncap - d->vcap) > st->exact_limit &&
            to_sketch(st, d) < 0) {
            st->oom = 1;
            return;
        }
        if (d->sk == NULL) {
            uint64_t *nv = realloc(d->v, ncap * sizeof(*nv));
            if (nv == NULL) {
                if (to_sketch(st, d) < 0)
                    st->oom = 1;
            } else {
                st->kept += ncap - d->vcap;
                d->v = nv;
                d->vcap = ncap;
            }
        }
    }
    if (d->sk != NULL) {
        if (sk_add(d->sk, bin_of(x), 1) < 0)
            st->oom = 1;
    } else if (d->vn < d->vcap) {
        d->v[d->vn++] = x;
    }
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* The value of rank k in a[0, n) (reorders a): quickselect with a random
 * pivot and a three-way partition, so that neither a crafted order nor
 * many equal values (durations often are) make it quadratic. */
static uint64_t select_k(uint64_t *a, size_t n, size_t k, uint64_t *rng)
{
    size_t lo = 0, hi = n;

    while (hi - lo > 1) {
        uint64_t p = a[lo + xorshift(rng) % (hi - lo)], t;
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            if (a[i] < p) {
                t = a[lt];
                a[lt++] = a[i];
                a[i++] = t;
            } else if (a[i] > p) {
                t = a[--gt];
                a[gt] = a[i];
                a[i] = t;
            } else {
                i++;
            }
        }
        if (k < lt)
            hi = lt;
        else if (k >= gt)
            lo = gt;
        else
            return p;
    }
    return a[k];
}

/* The median (the mean of the two middle values when n is even, as
 * `nsys stats` gives it); *exact 0 when read from a histogram. */
static double dist_median(struct cuptimon_stats *st, struct dist *d, int *exact)
{
    double a, b;

    *exact = d->sk == NULL;
    if (d->n == 0)
        return 0;
    if (d->sk == NULL) {
        a = (double)select_k(d->v, d->vn, (d->vn - 1) / 2, &st->rng);
        b = (double)select_k(d->v, d->vn, d->vn / 2, &st->rng);
        return (a + b) / 2;
    }
    a = sk_rank(d->sk, (d->n - 1) / 2);
    b = sk_rank(d->sk, d->n / 2);
    /* The extremes are exact: a bin's middle past them is not a value. */
    if (a < (double)d->min)
        a = (double)d->min;
    if (b > (double)d->max)
        b = (double)d->max;
    return (a + b) / 2;
}

static double dist_stddev(const struct dist *d)
{
    return d->n > 1 ? sqrt(d->m2 / (double)(d->n - 1)) : 0;
}

/* ---- names and rows ------------------------------------------------------- */

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

char *cuptimon__stats_clean_text(const char *s, int controls)
{
    size_t n = strlen(s), o = 0;
    char *out = malloc(n * 3 + 1);

    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n;) {
        size_t l = cuptimon__utf8_len((const unsigned char *)s + i, n - i);
        unsigned long cp = l && controls ? cuptimon__utf8_cp((const unsigned char *)s + i, l) : 0;
        if (l == 0 || (controls && (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)))) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i += l ? l : 1;
        } else {
            memcpy(out + o, s + i, l);
            o += l;
            i += l;
        }
    }
    out[o] = '\0';
    return out;
}

static int report_grow_idx(struct report *rp)
{
    size_t ncap = rp->idx_cap ? rp->idx_cap * 2 : 64;
    uint32_t *ni = calloc(ncap, sizeof(*ni));

    if (ni == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < rp->n; i++) {
        size_t h = (size_t)str_hash(rp->rows[i].name) & (ncap - 1);
        while (ni[h] != 0)
            h = (h + 1) & (ncap - 1);
        ni[h] = (uint32_t)i + 1;
    }
    free(rp->idx);
    rp->idx = ni;
    rp->idx_cap = ncap;
    return 0;
}

/* The row named name (created when new; UINT32_MAX: the other row, past
 * names_max), or -ENOMEM (as UINT32_MAX - 1). */
#define ROW_OTHER UINT32_MAX
#define ROW_FAIL  (UINT32_MAX - 1)
static uint32_t report_row(struct cuptimon_stats *st, struct report *rp, const char *raw)
{
    char *name = cuptimon__stats_clean_text(raw, 0);
    size_t h;

    if (name == NULL)
        return ROW_FAIL;
    if (rp->idx_cap == 0 && report_grow_idx(rp) < 0) {
        free(name);
        return ROW_FAIL;
    }
    h = (size_t)str_hash(name) & (rp->idx_cap - 1);
    while (rp->idx[h] != 0) {
        if (strcmp(rp->rows[rp->idx[h] - 1].name, name) == 0) {
            free(name);
            return rp->idx[h] - 1;
        }
        h = (h + 1) & (rp->idx_cap - 1);
    }
    if (rp->n >= st->names_max) {
        free(name);
        rp->has_other = 1;
        return ROW_OTHER;
    }
    if (rp->n == rp->cap) {
        size_t ncap = rp->cap ? rp->cap * 2 : 16;
        struct row *nr = realloc(rp->rows, ncap * sizeof(*nr));
        if (nr == NULL) {
            free(name);
            return ROW_FAIL;
        }
        rp->rows = nr;
        rp->cap = ncap;
    }
    struct row *r = &rp->rows[rp->n];
    r->name = name;
    dist_init(&r->t);
    dist_init(&r->b);
    rp->idx[h] = (uint32_t)rp->n + 1;
    rp->n++;
    if ((rp->n + 1) * 2 > rp->idx_cap && report_grow_idx(rp) < 0)
        return ROW_FAIL; /* the row is there; only the index could not grow */
    return (uint32_t)rp->n - 1;
}

static struct key *key_slot(struct key *tab, size_t cap, uint64_t ptr, uint32_t proc)
{
    size_t mask = cap - 1, i = (size_t)cuptimon__mix64(ptr ^ ((uint64_t)proc << 40)) & mask;

    while (tab[i].row != 0 && (tab[i].ptr != ptr || tab[i].proc != proc))
        i = (i + 1) & mask;
    return &tab[i];
}

/* The slot for (ptr, proc): row 0 when new (the caller fills it in), or
 * NULL when the map is full or out of memory. */
static struct key *key_find(struct keymap *m, uint64_t ptr, uint32_t proc)
{
    struct key *k = m->last;

    if (k != NULL && k->ptr == ptr && k->proc == proc)
        return k;
    if (m->k == NULL) {
        m->k = calloc(256, sizeof(*m->k));
        if (m->k == NULL)
            return NULL;
        m->cap = 256;
    }
    k = key_slot(m->k, m->cap, ptr, proc);
    if (k->row == 0) {
        if (m->n >= KEYS_MAX)
            return NULL;
        if ((m->n + 1) * 2 > m->cap) {
            size_t ncap = m->cap * 2;
            struct key *nt = calloc(ncap, sizeof(*nt));
            if (nt == NULL)
                return NULL;
            for (size_t i = 0; i < m->cap; i++)
                if (m->k[i].row != 0)
                    *key_slot(nt, ncap, m->k[i].ptr, m->k[i].proc) = m->k[i];
            free(m->k);
            m->k = nt;
            m->cap = ncap;
            k = key_slot(m->k, m->cap, ptr, proc);
        }
        k->ptr = ptr;
        k->proc = proc;
        m->n++;
    }
    m->last = k;
    return k;
}

/* The row key k (from key_find()) stands for: a NULL key (the map is
 * full, or memory ran out) counts in the other row, as does a name past
 * names_max. */
static struct row *key_row(struct cuptimon_stats *st, struct report *rp, const struct key *k)
{
    if (k == NULL) {
        st->key_overflow++;
        rp->has_other = 1;
        return &rp->other;
    }
    return k->row == ROW_OTHER ? &rp->other : &rp->rows[k->row - 1];
}

/* Gives a new key (row 0) the row named name; without memory for it, the
 * other row, and st->oom (no table is given then). */
static void key_name(struct cuptimon_stats *st, struct report *rp, struct key *k, const char *name)
{
    uint32_t r = report_row(st, rp, name);

    if (r == ROW_FAIL) {
        st->oom = 1;
        k->row = ROW_OTHER;
    } else {
        k->row = r == ROW_OTHER ? ROW_OTHER : r + 1;
    }
}

/* The row of a kernel's name, resolved once per (process, pointer). */
static struct row *kernel_row(struct cuptimon_stats *st, int proc, uint64_t ptr)
{
    struct report *rp = &st->rep[CUPTIMON_STATS_KERNELS];
    struct key *k = key_find(&st->kkeys, ptr, (uint32_t)proc);

    if (k != NULL && k->row == 0) {
        const struct sproc *sp = proc >= 0 && (size_t)proc < st->nprocs ? &st->procs[proc] : NULL;
        const char *s = sp && sp->names ? cuptimon__strtab_get(sp->names, ptr, NULL) : NULL;
        char buf[64];
        if (s == NULL) {
            snprintf(buf, sizeof(buf), "<unknown kernel 0x%" PRIx64 ">", ptr);
            s = buf;
        } else if (sp->dm != NULL) {
            s = cuptimon__demangle(sp->dm, s);
        }
        key_name(st, rp, k, s);
    }
    return key_row(st, rp, k);
}

/* The row of a runtime or driver call, resolved once per (cbid, API). */
static struct row *api_row(struct cuptimon_stats *st, unsigned type, uint32_t cbid)
{
    struct report *rp = &st->rep[CUPTIMON_STATS_API];
    int drv = type == CUPTIMON_EV_DRIVER;
    struct key *k = key_find(&st->akeys, cbid, (uint32_t)drv);

    if (k != NULL && k->row == 0) {
        const char *s = drv ? cuptimon__cbid_driver_name(cbid) : cuptimon__cbid_runtime_name(cbid);
        char buf[64];
        if (s == NULL) {
            snprintf(buf, sizeof(buf), "<%s API cbid %" PRIu32 ">", drv ? "driver" : "runtime",
                     cbid);
            s = buf;
        }
        key_name(st, rp, k, s);
    }
    return key_row(st, rp, k);
}

/* `nsys stats` names of the copy kinds (CUpti_ActivityMemcpyKind). */
static const char *copy_name(const struct cuptimon_ev *ev)
{
    static const char *const n[] = {
        "[CUDA memcpy Unknown]",          "[CUDA memcpy Host-to-Device]",
        "[CUDA memcpy Device-to-Host]",   "[CUDA memcpy Host-to-Array]",
        "[CUDA memcpy Array-to-Host]",    "[CUDA memcpy Array-to-Array]",
        "[CUDA memcpy Array-to-Device]",  "[CUDA memcpy Device-to-Array]",
        "[CUDA memcpy Device-to-Device]", "[CUDA memcpy Host-to-Host]",
        "[CUDA memcpy Peer-to-Peer]"};

    if (ev->type == CUPTIMON_EV_MEMSET)
        return "[CUDA memset]";
    if (ev->type == CUPTIMON_EV_MEMCPY_P2P)
        return n[10];
    return ev->u.memcpy.copy_kind < sizeof(n) / sizeof(n[0]) ? n[ev->u.memcpy.copy_kind] : n[0];
}

/* The row of a copy kind or memset, resolved once per operation.  Not
 * through key_name()/key_row() as kernels and calls are: a dozen
 * operations index memrow directly, with no key map to fill or overflow,
 * and a row that could not be made is not remembered (st->oom already
 * withholds every table). */
static struct row *memory_row(struct cuptimon_stats *st, const struct cuptimon_ev *ev)
{
    struct report *rp = &st->rep[CUPTIMON_STATS_MEMORY_TIME];
    unsigned op = ev->type == CUPTIMON_EV_MEMSET         ? MEM_OPS - 1
                  : ev->type == CUPTIMON_EV_MEMCPY_P2P   ? MEM_OPS - 2
                  : ev->u.memcpy.copy_kind < MEM_OPS - 2 ? ev->u.memcpy.copy_kind
                                                         : 0;
    uint32_t r = st->memrow[op];

    if (r == 0) {
        r = report_row(st, rp, copy_name(ev));
        if (r == ROW_FAIL) {
            st->oom = 1;
            return NULL;
        }
        r = st->memrow[op] = r == ROW_OTHER ? ROW_OTHER : r + 1;
    }
    return r == ROW_OTHER ? &rp->other : &rp->rows[r - 1];
}

/* ---- busy time -------------------------------------------------------------- */

static void busy_add(struct sproc *p, uint64_t s, uint64_t e, int *oom)
{
    size_t lo, hi, j;

    if (e <= s)
        return;
    if (p->watermark != 0 && s < p->watermark) {
        if (e <= p->watermark) {
            p->busy_uncertain = sat_add(p->busy_uncertain, e - s);
            return;
        }
        p->busy_uncertain = sat_add(p->busy_uncertain, p->watermark - s);
        s = p->watermark;
    }
    /* The common case: at or after the last interval's start. */
    if (p->niv > 0 && s >= p->iv[p->niv - 1].s) {
        struct ival *l = &p->iv[p->niv - 1];
        if (s <= l->e) {
            if (e > l->e)
                l->e = e;
            return;
        }
        lo = p->niv;
    } else {
        /* The first interval that ends at or after s. */
        lo = 0;
        hi = p->niv;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (p->iv[mid].e < s)
                lo = mid + 1;
            else
                hi = mid;
        }
    }
    for (j = lo; j < p->niv && p->iv[j].s <= e; j++)
        ;
    if (j > lo) {
        /* [s, e) touches intervals lo .. j-1: they become one. */
        struct ival m = {p->iv[lo].s < s ? p->iv[lo].s : s,
                         p->iv[j - 1].e > e ? p->iv[j - 1].e : e};
        p->iv[lo] = m;
        memmove(p->iv + lo + 1, p->iv + j, (p->niv - j) * sizeof(*p->iv));
        p->niv -= j - lo - 1;
        return;
    }
    if (p->niv == p->ivcap) {
        size_t ncap = p->ivcap ? p->ivcap * 2 : 64;
        struct ival *ni = realloc(p->iv, ncap * sizeof(*ni));
        if (ni == NULL) {
            *oom = 1;
            return;
        }
        p->iv = ni;
        p->ivcap = ncap;
    }
    memmove(p->iv + lo + 1, p->iv + lo, (p->niv - lo) * sizeof(*p->iv));
    p->iv[lo] = (struct ival){s, e};
    p->niv++;
    if (p->niv > BUSY_MAX) {
        size_t half = p->niv / 2;
        for (size_t i = 0; i < half; i++)
            p->busy_closed = sat_add(p->busy_closed, p->iv[i].e - p->iv[i].s);
        p->watermark = p->iv[half - 1].e;
        memmove(p->iv, p->iv + half, (p->niv - half) * sizeof(*p->iv));
        p->niv -= half;
    }
}

static uint64_t busy_total(const struct sproc *p)
{
    uint64_t t = p->busy_closed;
    for (size_t i = 0; i < p->niv; i++)
        t = sat_add(t, p->iv[i].e - p->iv[i].s);
    return t;
}

/* ---- the public interface ---------------------------------------------------- */

int cuptimon__stats_new(const struct cuptimon_stats_opts *opts, struct cuptimon_stats **out)
{
    struct cuptimon_stats *st = calloc(1, sizeof(*st));

    *out = NULL;
    if (st == NULL)
        return -ENOMEM;
    st->reports = opts && opts->reports ? opts->reports : CUPTIMON_STATS_ALL;
    /* memory_time and memory_bytes are one pass over the same records. */
    if (st->reports & (CUPTIMON_STATS_BIT(CUPTIMON_STATS_MEMORY_TIME) |
                       CUPTIMON_STATS_BIT(CUPTIMON_STATS_MEMORY_BYTES)))
        st->reports |= CUPTIMON_STATS_BIT(CUPTIMON_STATS_MEMORY_TIME) |
                       CUPTIMON_STATS_BIT(CUPTIMON_STATS_MEMORY_BYTES);
    st->exact_limit = opts ? opts->exact_limit : CUPTIMON_STATS_EXACT_DEFAULT;
    st->names_max = opts && opts->names_max ? opts->names_max : CUPTIMON_STATS_NAMES_DEFAULT;
    st->rng = 0x9e3779b97f4a7c15ull;
    for (unsigned r = 0; r < CUPTIMON_STATS_REPORTS; r++) {
        dist_init(&st->rep[r].other.t);
        dist_init(&st->rep[r].other.b);
    }
    *out = st;
    return 0;
}

static void free_dist(struct dist *d, void *ud)
{
    dist_free(ud, d);
}

void cuptimon__stats_free(struct cuptimon_stats *st)
{
    if (st == NULL)
        return;
    each_dist(st, free_dist, st);
    for (unsigned r = 0; r < CUPTIMON_STATS_REPORTS; r++) {
        for (size_t i = 0; i < st->rep[r].n; i++)
            free(st->rep[r].rows[i].name);
        free(st->rep[r].rows);
        free(st->rep[r].idx);
    }
    free(st->kkeys.k);
    free(st->akeys.k);
    for (size_t i = 0; i < st->nprocs; i++) {
        free((char *)st->procs[i].info.hostname);
        free((char *)st->procs[i].info.label);
        free(st->procs[i].iv);
    }
    free(st->procs);
    free(st);
}

int cuptimon__stats_add_process(struct cuptimon_stats *st, const struct cuptimon_proc_info *p,
                                const struct cuptimon_strtab *names, struct cuptimon_demangler *dm)
{
    struct sproc *sp;

    if (st->nprocs >= UINT32_MAX / 2)
        return -E2BIG;
    if (st->nprocs == st->procs_cap) {
        size_t nc = st->procs_cap ? st->procs_cap * 2 : 8;
        struct sproc *np = realloc(st->procs, nc * sizeof(*np));
        if (np == NULL)
            return -ENOMEM;
        st->procs = np;
        st->procs_cap = nc;
    }
    sp = &st->procs[st->nprocs];
    memset(sp, 0, sizeof(*sp));
    sp->info = *p;
    sp->info.hostname = p->hostname ? cuptimon__stats_clean_text(p->hostname, 0) : NULL;
    sp->info.label = p->label ? cuptimon__stats_clean_text(p->label, 0) : NULL;
    sp->info.job_id = NULL; /* not shown, not kept */
    sp->info.exe = NULL;
    if ((p->hostname && !sp->info.hostname) || (p->label && !sp->info.label)) {
        free((char *)sp->info.hostname);
        free((char *)sp->info.label);
        return -ENOMEM;
    }
    sp->names = names;
    sp->dm = dm;
    return (int)st->nprocs++;
}

/* ---- NCCL (issue 46) ----------------------------------------------------------- */

/* nccl-tests' bus
 * bandwidth factor (nccl-tests src/all_reduce.cu AllReduceGetBw and its
 * siblings); -1 when it needs the ranks and n (0) does not say them. */
static double nccl_busbw_factor(const char *func, int n)
{
    double nr = n;
    if (strcmp(func, "AllReduce") == 0)
        return n > 0 ? 2 * (nr - 1) / nr : -1;
    if (strcmp(func, "AllGather") == 0 || strcmp(func, "ReduceScatter") == 0 ||
        strcmp(func, "AllToAll") == 0)
        return n > 0 ? (nr - 1) / nr : -1;
    return 1;
}

/* Whether a function's size (nccl-tests') is its count times the ranks. */
static int nccl_bytes_by_n(const char *func)
{
    return strcmp(func, "AllGather") == 0 || strcmp(func, "ReduceScatter") == 0;
}

static void nccl_event(struct cuptimon_stats *st, const struct cuptimon_ev *ev)
{
    struct cuptimon_nccl_rec r;
    struct cuptimon_nccl_text x;
    struct report *rp = &st->rep[CUPTIMON_STATS_NCCL];
    if (!(st->reports & CUPTIMON_STATS_BIT(CUPTIMON_STATS_NCCL)) ||
        cuptimon__nccl_rec_decode(ev->u.nccl.raw, CUPTIMON_NCCL_REC_SIZE, &r, &x) < 0 ||
        r.what == CUPTIMON_NCCL_COMM_STATE)
        return;
    uint64_t dur;
    if ((r.flags & CUPTIMON_NCCL_F_GPU_TIMES) && r.gpu_end >= r.gpu_start)
        dur = r.gpu_end - r.gpu_start;
    else if ((r.flags & CUPTIMON_NCCL_F_COMPLETED) && r.host_end >= r.host_start)
        dur = r.host_end - r.host_start;
    else {
        rp->incomplete++;
        return;
    }
    /* The row's key holds what its columns need (tabs never occur in
     * what the decoder gives back: it replaces control bytes). */
    char key[256];
    snprintf(key, sizeof key, "%s\t%s\t%016" PRIx64 "\t%d", x.func, x.comm_name, r.comm_id,
             r.nranks);
    uint32_t i = report_row(st, rp, key);
    if (i == ROW_FAIL) {
        st->oom = 1;
        return;
    }
    struct row *row = i == ROW_OTHER ? &rp->other : &rp->rows[i];
    uint64_t n = r.nranks > 0 ? (uint64_t)r.nranks : 1;
    uint64_t bytes = r.count * cuptimon__nccl_type_size(x.datatype);
    if (nccl_bytes_by_n(x.func))
        bytes *= n; /* (n 1 when unknown: the row then shows no bytes) */
    dist_add(st, &row->t, dur);
    dist_add(st, &row->b, bytes);
}

void cuptimon__stats_event(struct cuptimon_stats *st, int proc, const struct cuptimon_ev *ev,
                           const struct cuptimon_clock *clk)
{
    struct sproc *sp = proc >= 0 && (size_t)proc < st->nprocs ? &st->procs[proc] : NULL;
    int complete = ev->start != 0 && ev->end != 0 && ev->end >= ev->start;
    uint64_t dur = complete ? ev->end - ev->start : 0;
    struct report *rp = NULL;
    struct row *row = NULL;
    unsigned want;

    if (sp != NULL) {
        sp->records++;
        if (ev->start != 0) {
            uint64_t s = cuptimon__clock_map(clk, ev->start);
            uint64_t e = complete ? cuptimon__clock_map(clk, ev->end) : s;
            if (sp->first == 0 || s < sp->first)
                sp->first = s;
            if (e > sp->last)
                sp->last = e;
        }
    }
    switch (ev->type) {
    case CUPTIMON_EV_NCCL: nccl_event(st, ev); return;
    case CUPTIMON_EV_KERNEL:
        if (sp != NULL)
            sp->kernels++;
        want = CUPTIMON_STATS_BIT(CUPTIMON_STATS_KERNELS);
        rp = &st->rep[CUPTIMON_STATS_KERNELS];
        if ((st->reports & want) && complete)
            row = kernel_row(st, proc, ev->u.kernel.name_ptr);
        break;
    case CUPTIMON_EV_MEMCPY:
    case CUPTIMON_EV_MEMCPY_P2P:
    case CUPTIMON_EV_MEMSET:
        want = CUPTIMON_STATS_BIT(CUPTIMON_STATS_MEMORY_TIME);
        rp = &st->rep[CUPTIMON_STATS_MEMORY_TIME];
        if ((st->reports & want) && complete)
            row = memory_row(st, ev);
        break;
    case CUPTIMON_EV_RUNTIME:
    case CUPTIMON_EV_DRIVER:
        want = CUPTIMON_STATS_BIT(CUPTIMON_STATS_API);
        rp = &st->rep[CUPTIMON_STATS_API];
        if ((st->reports & want) && complete)
            row = api_row(st, ev->type, ev->u.api.cbid);
        break;
    default: return;
    }
    if (!complete) {
        rp->incomplete++;
        return;
    }
    if (sp != NULL && ev->type != CUPTIMON_EV_RUNTIME && ev->type != CUPTIMON_EV_DRIVER &&
        (st->reports & CUPTIMON_STATS_BIT(CUPTIMON_STATS_PROCESSES)))
        busy_add(sp, cuptimon__clock_map(clk, ev->start), cuptimon__clock_map(clk, ev->end),
                 &st->oom);
    if (row == NULL)
        return;
    dist_add(st, &row->t, dur);
    if (ev->type == CUPTIMON_EV_MEMSET)
        dist_add(st, &row->b, ev->u.memset.bytes);
    else if (ev->type == CUPTIMON_EV_MEMCPY || ev->type == CUPTIMON_EV_MEMCPY_P2P)
        dist_add(st, &row->b, ev->u.memcpy.bytes);
}

void cuptimon__stats_dropped(struct cuptimon_stats *st, int proc, uint64_t n)
{
    st->dropped = sat_add(st->dropped, n);
    if (proc >= 0 && (size_t)proc < st->nprocs)
        st->procs[proc].dropped = sat_add(st->procs[proc].dropped, n);
}

const char *cuptimon__stats_report_name(enum cuptimon_stats_report r)
{
    static const char *const n[] = {"kernels", "memory_time", "memory_bytes",
                                    "api",     "processes",   "nccl"};
    return (unsigned)r < CUPTIMON_STATS_REPORTS ? n[r] : "?";
}

/* ---- rows ---------------------------------------------------------------------- */

struct sorted {
    struct row *r;
    const struct dist *d;
};

static int by_total(const void *a, const void *b)
{
    const struct sorted *x = a, *y = b;
    if (x->d->total != y->d->total)
        return x->d->total < y->d->total ? 1 : -1;
    if (x->d->n != y->d->n)
        return x->d->n < y->d->n ? 1 : -1;
    return strcmp(x->r->name, y->r->name);
}

static json_object *row_json(struct cuptimon_stats *st, struct row *r, int bytes,
                             enum cuptimon_stats_report rep, uint64_t grand)
{
    struct dist *d = bytes ? &r->b : &r->t;
    json_object *o = json_object_new_object();
    const char *count = rep == CUPTIMON_STATS_KERNELS ? "instances"
                        : rep == CUPTIMON_STATS_API   ? "calls"
                                                      : "count";
    const char *unit = bytes ? "bytes" : "ns";
    char key[32];
    int exact;
    double med;

    if (o == NULL)
        return NULL;
    med = dist_median(st, d, &exact);
    if (!bytes)
        json_object_object_add(
            o, "time_pct",
            json_object_new_double(grand ? 100.0 * (double)d->total / (double)grand : 0));
    snprintf(key, sizeof key, "total_%s", unit);
    json_object_object_add(o, key, json_object_new_uint64(d->total));
    json_object_object_add(o, count, json_object_new_uint64(d->n));
    snprintf(key, sizeof key, "avg_%s", unit);
    json_object_object_add(o, key,
                           json_object_new_double(d->n ? (double)d->total / (double)d->n : 0));
    snprintf(key, sizeof key, "med_%s", unit);
    json_object_object_add(o, key, json_object_new_double(med));
    json_object_object_add(o, "med_exact", json_object_new_boolean(exact));
    snprintf(key, sizeof key, "min_%s", unit);
    json_object_object_add(o, key, json_object_new_uint64(d->n ? d->min : 0));
    snprintf(key, sizeof key, "max_%s", unit);
    json_object_object_add(o, key, json_object_new_uint64(d->max));
    snprintf(key, sizeof key, "stddev_%s", unit);
    json_object_object_add(o, key, json_object_new_double(dist_stddev(d)));
    json_object_object_add(
        o, rep == CUPTIMON_STATS_KERNELS || rep == CUPTIMON_STATS_API ? "name" : "operation",
        json_object_new_string(r->name));
    return o;
}

static json_object *dist_rows(struct cuptimon_stats *st, enum cuptimon_stats_report rep,
                              size_t top_n)
{
    int bytes = rep == CUPTIMON_STATS_MEMORY_BYTES;
    struct report *rp = &st->rep[bytes ? CUPTIMON_STATS_MEMORY_TIME : rep];
    json_object *a = json_object_new_array();
    struct sorted *v;
    size_t n = 0;
    uint64_t grand = 0;
    char other[64];

    if (a == NULL)
        return NULL;
    if (!(st->reports & CUPTIMON_STATS_BIT(rep)))
        return a;
    v = calloc(rp->n + 1, sizeof(*v));
    if (v == NULL) {
        json_object_put(a);
        return NULL;
    }
    for (size_t i = 0; i < rp->n; i++) {
        v[n].r = &rp->rows[i];
        v[n].d = bytes ? &rp->rows[i].b : &rp->rows[i].t;
        grand = sat_add(grand, v[n].d->total);
        n++;
    }
    if (rp->has_other && rp->other.t.n > 0) {
        snprintf(other, sizeof other, "(other %s)",
                 rep == CUPTIMON_STATS_KERNELS ? "kernel names"
                 : rep == CUPTIMON_STATS_API   ? "API calls"
                                               : "operations");
        rp->other.name = other;
        v[n].r = &rp->other;
        v[n].d = bytes ? &rp->other.b : &rp->other.t;
        grand = sat_add(grand, v[n].d->total);
        n++;
    }
    qsort(v, n, sizeof(*v), by_total);
    for (size_t i = 0; i < n && (top_n == 0 || i < top_n); i++) {
        json_object *o = row_json(st, v[i].r, bytes, rep, grand);
        if (o == NULL || json_object_array_add(a, o) < 0) {
            json_object_put(o);
            json_object_put(a);
            a = NULL;
            break;
        }
    }
    rp->other.name = NULL;
    free(v);
    return a;
}

static json_object *process_rows(struct cuptimon_stats *st, size_t top_n)
{
    json_object *a = json_object_new_array();

    if (a == NULL || !(st->reports & CUPTIMON_STATS_BIT(CUPTIMON_STATS_PROCESSES)))
        return a;
    for (size_t i = 0, n = 0; i < st->nprocs && (top_n == 0 || n < top_n); i++) {
        const struct sproc *p = &st->procs[i];
        json_object *o;
        uint64_t busy = busy_total(p), span = p->last > p->first ? p->last - p->first : 0;
        if (p->first == 0)
            continue; /* no event with a time in the range (or at all) */
        n++;
        o = json_object_new_object();
        if (o == NULL) {
            json_object_put(a);
            return NULL;
        }
        json_object_object_add(o, "pid", json_object_new_int64(p->info.pid));
        json_object_object_add(o, "rank",
                               p->info.rank >= 0 ? json_object_new_int64(p->info.rank) : NULL);
        json_object_object_add(o, "label",
                               p->info.label ? json_object_new_string(p->info.label) : NULL);
        json_object_object_add(o, "hostname",
                               p->info.hostname ? json_object_new_string(p->info.hostname) : NULL);
        json_object_object_add(o, "gpu_busy_ns", json_object_new_uint64(busy));
        json_object_object_add(
            o, "busy_pct", json_object_new_double(span ? 100.0 * (double)busy / (double)span : 0));
        json_object_object_add(o, "kernels", json_object_new_uint64(p->kernels));
        json_object_object_add(o, "first_unix_ns", json_object_new_uint64(p->first));
        json_object_object_add(o, "last_unix_ns", json_object_new_uint64(p->last));
        json_object_object_add(o, "busy_uncertain_ns", json_object_new_uint64(p->busy_uncertain));
        json_object_object_add(o, "records", json_object_new_uint64(p->records));
        json_object_object_add(o, "dropped_records", json_object_new_uint64(p->dropped));
        if (json_object_array_add(a, o) < 0) {
            json_object_put(o);
            json_object_put(a);
            return NULL;
        }
    }
    return a;
}

static json_object *nccl_rows(struct cuptimon_stats *st, size_t top_n)
{
    struct report *rp = &st->rep[CUPTIMON_STATS_NCCL];
    json_object *a = json_object_new_array();
    struct sorted *v = calloc(rp->n ? rp->n : 1, sizeof(*v));
    if (a == NULL || v == NULL) {
        free(v);
        json_object_put(a);
        return NULL;
    }
    for (size_t i = 0; i < rp->n; i++)
        v[i] = (struct sorted){&rp->rows[i], &rp->rows[i].t};
    qsort(v, rp->n, sizeof(*v), by_total);
    for (size_t i = 0; i < rp->n && (top_n == 0 || i < top_n); i++) {
        char func[64] = "", comm[128] = "", id[32] = "";
        int nr = 0;
        const char *k = v[i].r->name, *t1 = strchr(k, '\t');
        const char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        const char *t3 = t2 ? strchr(t2 + 1, '\t') : NULL;
        if (t3 == NULL)
            continue;
        snprintf(func, sizeof func, "%.*s", (int)(t1 - k), k);
        snprintf(comm, sizeof comm, "%.*s", (int)(t2 - t1 - 1), t1 + 1);
        snprintf(id, sizeof id, "0x%.*s", (int)(t3 - t2 - 1), t2 + 1);
        nr = atoi(t3 + 1);
        const struct dist *t = &v[i].r->t, *b = &v[i].r->b;
        double algbw = t->total ? (double)b->total / (double)t->total : 0; /* bytes/ns = GB/s */
        json_object *o = json_object_new_object();
        json_object_object_add(o, "function", json_object_new_string(func));
        json_object_object_add(o, "communicator", json_object_new_string(comm));
        json_object_object_add(o, "comm_id", json_object_new_string(id));
        /* NCCL before 2.27.3 (plugin v1-v3) never says a communicator's
         * size: then what needs it is null (empty in tables), not figured
         * with one rank: an all-gather's or reduce-scatter's size, and the
         * bus bandwidth of those and of all-reduce and all-to-all. */
        int sized = nr > 0;
        int bytes_known = sized || !nccl_bytes_by_n(func);
        double busf = nccl_busbw_factor(func, nr);
        json_object_object_add(o, "ranks", sized ? json_object_new_int(nr) : NULL);
        json_object_object_add(o, "count", json_object_new_uint64(t->n));
        json_object_object_add(o, "total_bytes",
                               bytes_known ? json_object_new_uint64(b->total) : NULL);
        json_object_object_add(o, "total_ns", json_object_new_uint64(t->total));
        json_object_object_add(o, "avg_ns",
                               json_object_new_double(t->n ? (double)t->total / (double)t->n : 0));
        json_object_object_add(o, "algbw_gbps", bytes_known ? json_object_new_double(algbw) : NULL);
        json_object_object_add(o, "busbw_gbps",
                               bytes_known && busf >= 0 ? json_object_new_double(algbw * busf)
                                                        : NULL);
        json_object_array_add(a, o);
    }
    free(v);
    return a;
}

struct json_object *cuptimon__stats_rows(struct cuptimon_stats *st, enum cuptimon_stats_report r,
                                         size_t top_n)
{
    if (st->oom)
        return NULL;
    if (r == CUPTIMON_STATS_PROCESSES)
        return process_rows(st, top_n);
    if (r == CUPTIMON_STATS_NCCL)
        return nccl_rows(st, top_n);
    if ((unsigned)r >= CUPTIMON_STATS_REPORTS)
        return NULL;
    return dist_rows(st, r, top_n);
}

static void count_approx(struct dist *d, void *ud)
{
    uint64_t *n = ud;
    if (d->sk != NULL && d->n > 0) {
        n[0]++;
        n[1] += d->sk->folded;
    }
}

struct json_object *cuptimon__stats_info_json(struct cuptimon_stats *st)
{
    json_object *o = json_object_new_object(), *inc = json_object_new_object();
    json_object *oth = json_object_new_object(), *med = json_object_new_object();
    const struct report *k = &st->rep[CUPTIMON_STATS_KERNELS];
    uint64_t kernels = k->other.t.n, kns = k->other.t.total, approx[2] = {0, 0};

    if (o == NULL || inc == NULL || oth == NULL || med == NULL || st->oom) {
        json_object_put(o);
        json_object_put(inc);
        json_object_put(oth);
        json_object_put(med);
        return NULL;
    }
    for (size_t i = 0; i < k->n; i++) {
        kernels += k->rows[i].t.n;
        kns = sat_add(kns, k->rows[i].t.total);
    }
    each_dist(st, count_approx, approx);
    json_object_object_add(o, "kernels", json_object_new_uint64(kernels));
    json_object_object_add(o, "kernel_ns", json_object_new_uint64(kns));
    json_object_object_add(o, "kernel_names", json_object_new_uint64(k->n));
    json_object_object_add(inc, "kernel", json_object_new_uint64(k->incomplete));
    json_object_object_add(inc, "memory",
                           json_object_new_uint64(st->rep[CUPTIMON_STATS_MEMORY_TIME].incomplete));
    json_object_object_add(inc, "api",
                           json_object_new_uint64(st->rep[CUPTIMON_STATS_API].incomplete));
    json_object_object_add(inc, "nccl",
                           json_object_new_uint64(st->rep[CUPTIMON_STATS_NCCL].incomplete));
    json_object_object_add(o, "incomplete", inc);
    json_object_object_add(o, "dropped_records", json_object_new_uint64(st->dropped));
    json_object_object_add(oth, "kernels", json_object_new_uint64(k->other.t.n));
    json_object_object_add(oth, "api",
                           json_object_new_uint64(st->rep[CUPTIMON_STATS_API].other.t.n));
    json_object_object_add(oth, "names_max", json_object_new_uint64(st->names_max));
    json_object_object_add(o, "other_rows", oth);
    json_object_object_add(med, "exact_limit", json_object_new_uint64(st->exact_limit));
    json_object_object_add(med, "values_kept", json_object_new_uint64(st->kept));
    json_object_object_add(med, "approximate_medians", json_object_new_uint64(approx[0]));
    json_object_object_add(med, "relative_error", json_object_new_double(CUPTIMON_STATS_MED_ERROR));
    json_object_object_add(med, "collapsed", json_object_new_uint64(approx[1]));
    json_object_object_add(o, "medians", med);
    return o;
}
