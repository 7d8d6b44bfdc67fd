/*
 * Live aggregates (see aggregate.h): the tables and how they are fed.  The
 * JSON view is in aggregate-query.c, the Prometheus text in
 * aggregate-prom.c; what they share is in aggregate-int.h.
 */
#include "config.h"

#include "aggregate-int.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "cuptimon-proto.h"
#include "archive/demangle.h"
#include "archive/strtab.h"
#include "proto/util.h"

#define DEF_TOP_N        64u
#define DEF_MAX_SESSIONS 512u
#define DEF_MAX_DEVICES  16u

/* Kernel intervals a device keeps for the union (16 bytes each). */
#define IV_CAP 65536u
/* Interned names are bounded in total (names past it show as pointers). */
#define NAMES_MAX_BYTES (16u << 20)
/* A name longer than this is not kept (it would not demangle either). */
#define NAME_MAX_LEN 16384u
/* How far a record may lie in the future of the daemon's clock. */
#define DEF_FUTURE_NS (60 * (int64_t)NS_PER_S)
/* Events of one buffer collected before the devices are updated. */
#define SCRATCH 2048u

/* ---- histogram ------------------------------------------------------------ */

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

void cuptimon__agg_hist_init(struct hist *h)
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

void cuptimon__agg_hist_merge(struct hist *into, const struct hist *from)
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
uint64_t cuptimon__agg_hist_pct(const struct hist *h, unsigned pm)
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

uint64_t cuptimon__agg_hash_str(const char *s, size_t len)
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
    uint64_t h = cuptimon__agg_hash_str(s, len);
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

int64_t cuptimon__agg_now_ns(void)
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
    a->future_ns =
        lim && lim->future_s ? (int64_t)lim->future_s * (int64_t)NS_PER_S : DEF_FUTURE_NS;
    a->keep_ended_ns =
        (int64_t)(lim && lim->keep_ended_s ? lim->keep_ended_s : 60) * (int64_t)NS_PER_S;
    a->map_wait_ns = (int64_t)(lim && lim->map_wait_s ? lim->map_wait_s : 15) * (int64_t)NS_PER_S;
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
    free(s->wait_ev);
    free(s->nccl);
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
void cuptimon__agg_sess_expire(struct cuptimon_agg *a, int64_t now, int room_for_one)
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
    cuptimon__agg_sess_expire(a, cuptimon__agg_now_ns(), 1);
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
    cuptimon__agg_hist_init(&s->handoff);
    pthread_mutex_init(&s->mu, NULL);
    a->sess[a->nsess++] = s;
    return s;
}

void cuptimon__agg_copy_str(char *dst, size_t n, const char *src)
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
            cuptimon__agg_copy_str(s->job, sizeof(s->job), id->job);
            cuptimon__agg_copy_str(s->rank, sizeof(s->rank), id->rank);
            cuptimon__agg_copy_str(s->label, sizeof(s->label), id->label);
            cuptimon__agg_copy_str(s->exe, sizeof(s->exe), id->exe);
        }
        s->dropped = dropped;
        s->lost = lost;
    }
    pthread_mutex_unlock(&a->mu);
    return rc;
}

void cuptimon__agg_session_path(struct cuptimon_agg *a, uint64_t session, const char *path,
                                uint32_t record_bytes_per_kernel)
{
    pthread_mutex_lock(&a->mu);
    struct asess *s = sess_find(a, session);
    if (s != NULL) {
        cuptimon__agg_copy_str(s->path, sizeof(s->path), path);
        s->record_bytes_per_kernel = record_bytes_per_kernel;
    }
    pthread_mutex_unlock(&a->mu);
}

/* ---- NCCL (issue 46) -------------------------------------------------------- */

/* The communicator of a record (by id and rank: one process may hold
 * several ranks of one communicator), made at its first record; NULL past
 * NCCL_COMMS_SHOWN (counted). */
static struct anccl *nccl_comm(struct asess *s, const struct cuptimon_nccl_rec *r,
                               const struct cuptimon_nccl_text *t)
{
    for (unsigned i = 0; i < s->nnccl; i++)
        if (s->nccl[i].id == r->comm_id && s->nccl[i].rank == r->rank)
            return &s->nccl[i];
    if (s->nccl == NULL && (s->nccl = calloc(NCCL_COMMS_SHOWN, sizeof(*s->nccl))) == NULL)
        return NULL;
    if (s->nnccl >= NCCL_COMMS_SHOWN) {
        s->nccl_comms_over++;
        return NULL;
    }
    struct anccl *c = &s->nccl[s->nnccl++];
    memset(c, 0, sizeof(*c));
    c->id = r->comm_id;
    c->rank = r->rank;
    cuptimon__agg_copy_str(c->name, sizeof(c->name), t->comm_name);
    return c;
}

static void nccl_add(struct asess *s, const struct cuptimon_ev *ev)
{
    struct cuptimon_nccl_rec r;
    struct cuptimon_nccl_text t;
    if (cuptimon__nccl_rec_decode(ev->u.nccl.raw, CUPTIMON_NCCL_REC_SIZE, &r, &t) < 0) {
        s->nccl_bad++;
        return;
    }
    struct anccl *c = nccl_comm(s, &r, &t);
    if (c == NULL)
        return;
    c->nranks = r.nranks;
    c->nnodes = r.nnodes;
    if (r.what == CUPTIMON_NCCL_COMM_STATE) {
        /* States may come out of order across buffers: the newest wins. */
        if (r.host_start < c->state_ns)
            return;
        c->state_ns = r.host_start;
        c->started = r.started;
        c->completed = r.completed;
        c->bytes = r.bytes;
        c->last_seq1 = r.count;
        cuptimon__agg_copy_str(c->last_func, sizeof(c->last_func), t.algo);
        c->fly_since = r.host_stop;
        c->fly_seq = r.seq;
        cuptimon__agg_copy_str(c->fly_func, sizeof(c->fly_func), r.host_stop ? t.func : "");
        return;
    }
    s->nccl_ops++;
    unsigned k = 0;
    while (k < NCCL_FUNCS_SHOWN - 1 && c->fn[k].name[0] && strcmp(c->fn[k].name, t.func) != 0)
        k++;
    if (!c->fn[k].name[0])
        cuptimon__agg_copy_str(c->fn[k].name, sizeof(c->fn[k].name), t.func);
    else if (strcmp(c->fn[k].name, t.func) != 0)
        cuptimon__agg_copy_str(c->fn[k].name, sizeof(c->fn[k].name), "other");
    uint64_t bytes = r.count * cuptimon__nccl_type_size(t.datatype);
    if (strcmp(t.func, "AllGather") == 0 || strcmp(t.func, "ReduceScatter") == 0)
        bytes *= r.nranks > 0 ? (uint64_t)r.nranks : 1;
    uint64_t ns = (r.flags & CUPTIMON_NCCL_F_GPU_TIMES) && r.gpu_end >= r.gpu_start
                      ? r.gpu_end - r.gpu_start
                  : (r.flags & CUPTIMON_NCCL_F_COMPLETED) && r.host_end >= r.host_start
                      ? r.host_end - r.host_start
                      : 0;
    c->fn[k].ops++;
    c->fn[k].bytes += bytes;
    c->fn[k].ns += ns;
}

static json_object *nccl_u64(uint64_t v)
{
    return json_object_new_int64(v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v);
}

json_object *cuptimon__agg_nccl_comms_json(const struct asess *s, int64_t now)
{
    json_object *a = json_object_new_array();
    for (unsigned i = 0; a != NULL && i < s->nnccl; i++) {
        const struct anccl *c = &s->nccl[i];
        json_object *o = json_object_new_object(), *fns = json_object_new_array();
        char id[24];
        snprintf(id, sizeof id, "0x%016" PRIx64, c->id);
        json_object_object_add(o, "comm_id", json_object_new_string(id));
        json_object_object_add(o, "name", json_object_new_string(c->name));
        json_object_object_add(o, "rank", json_object_new_int(c->rank));
        json_object_object_add(o, "ranks", json_object_new_int(c->nranks));
        json_object_object_add(o, "nodes", json_object_new_int(c->nnodes));
        json_object_object_add(o, "started", nccl_u64(c->started));
        json_object_object_add(o, "completed", nccl_u64(c->completed));
        if (c->last_seq1) {
            json_object *l = json_object_new_object();
            json_object_object_add(l, "function", json_object_new_string(c->last_func));
            json_object_object_add(l, "seq", nccl_u64(c->last_seq1 - 1));
            json_object_object_add(o, "last_completed", l);
        }
        if (c->fly_since) {
            json_object *f = json_object_new_object();
            json_object_object_add(f, "function", json_object_new_string(c->fly_func));
            json_object_object_add(f, "seq", nccl_u64(c->fly_seq));
            json_object_object_add(f, "since_unix_ns", nccl_u64(c->fly_since));
            json_object_object_add(
                f, "age_s",
                json_object_new_double(
                    (int64_t)c->fly_since < now ? (double)(now - (int64_t)c->fly_since) / 1e9 : 0));
            json_object_object_add(o, "in_flight", f);
        }
        for (unsigned k = 0; k < NCCL_FUNCS_SHOWN && c->fn[k].name[0]; k++) {
            json_object *x = json_object_new_object();
            json_object_object_add(x, "function", json_object_new_string(c->fn[k].name));
            json_object_object_add(x, "ops", nccl_u64(c->fn[k].ops));
            json_object_object_add(x, "bytes", nccl_u64(c->fn[k].bytes));
            json_object_object_add(x, "ns", nccl_u64(c->fn[k].ns));
            json_object_array_add(fns, x);
        }
        json_object_object_add(o, "functions", fns);
        json_object_array_add(a, o);
    }
    return a;
}

json_object *cuptimon__agg_nccl_json(struct cuptimon_agg *a, uint64_t session)
{
    json_object *o = NULL;
    pthread_mutex_lock(&a->mu);
    struct asess *s = sess_find(a, session);
    if (s != NULL) {
        pthread_mutex_lock(&s->mu);
        if (s->nnccl > 0)
            o = cuptimon__agg_nccl_comms_json(s, cuptimon__agg_now_ns());
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&a->mu);
    return o;
}

int cuptimon__agg_nccl_late(struct cuptimon_agg *a, uint64_t session, double warn_s, char *out,
                            size_t n)
{
    int said = 0;
    int64_t now = cuptimon__agg_now_ns();
    pthread_mutex_lock(&a->mu);
    struct asess *s = sess_find(a, session);
    if (s != NULL) {
        pthread_mutex_lock(&s->mu);
        for (unsigned i = 0; i < s->nnccl && !said; i++) {
            struct anccl *c = &s->nccl[i];
            double age = c->fly_since && (int64_t)c->fly_since < now
                             ? (double)(now - (int64_t)c->fly_since) / 1e9
                             : 0;
            if (warn_s <= 0 || age < warn_s || c->warned_since == c->fly_since)
                continue;
            c->warned_since = c->fly_since;
            snprintf(out, n,
                     "NCCL %s #%" PRIu64 " of communicator %s (id 0x%016" PRIx64
                     ") has been in flight on rank %d of %d for %.0f s (%" PRIu64
                     " collectives started, %" PRIu64 " completed)",
                     c->fly_func, c->fly_seq, c->name[0] ? c->name : "(unnamed)", c->id, c->rank,
                     c->nranks, age, c->started, c->completed);
            said = 1;
        }
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&a->mu);
    return said;
}

void cuptimon__agg_session_held(struct cuptimon_agg *a, uint64_t session,
                                const struct cuptimon_agg_held *h)
{
    pthread_mutex_lock(&a->mu);
    struct asess *s = sess_find(a, session);
    if (s != NULL) {
        s->held_since_ns = h->since_ns;
        s->held_records = h->records;
        s->held_bytes = h->bytes;
        s->grown_bytes = h->grown_bytes;
        s->held_kernel = h->kernel && h->since_ns;
        s->held_dev = h->device;
        s->dropping_since_ns = h->dropping_since_ns;
        cuptimon__agg_copy_str(s->held_what, sizeof(s->held_what), h->what);
    }
    pthread_mutex_unlock(&a->mu);
}

static int sess_dev(struct cuptimon_agg *a, struct asess *s, uint32_t id,
                    const struct cuptimon_strtab *names);

void cuptimon__agg_session_devices(struct cuptimon_agg *a, uint64_t session,
                                   const struct cuptimon_strtab *names)
{
    pthread_mutex_lock(&a->mu);
    struct asess *s = sess_find(a, session);
    if (s != NULL)
        s->refs++;
    pthread_mutex_unlock(&a->mu);
    if (s == NULL || names == NULL)
        goto out;
    pthread_mutex_lock(&s->mu);
    for (uint32_t id = 0; id < SESSION_DEVICES; id++)
        if (cuptimon__strtab_get(names, CUPTIMON_DEVICE_UUID_KEY(id), NULL) != NULL)
            (void)sess_dev(a, s, id, names);
    pthread_mutex_unlock(&s->mu);
out:
    if (s == NULL)
        return;
    pthread_mutex_lock(&a->mu);
    if (--s->refs == 0 && s->dead)
        sess_free(a, s);
    pthread_mutex_unlock(&a->mu);
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

static void wait_release(struct cuptimon_agg *a, struct asess *s, int64_t now);

void cuptimon__agg_end(struct cuptimon_agg *a, uint64_t session)
{
    pthread_mutex_lock(&a->mu);
    struct asess *s = sess_find(a, session);
    if (s != NULL && s->ended_ns == 0) {
        s->ended_ns = cuptimon__agg_now_ns();
        /* No later buffer will release what waits for the node map. */
        pthread_mutex_lock(&s->mu);
        s->no_wait = 1;
        if (s->nwait > 0)
            wait_release(a, s, s->ended_ns);
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&a->mu);
}

/* Under a->mu. */
size_t cuptimon__agg_sess_live(const struct cuptimon_agg *a)
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
        cuptimon__agg_hist_init(&s->other[d]->h);
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
    cuptimon__agg_hist_merge(&o->h, &e->h);
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
    cuptimon__agg_hist_init(&e->h);
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

void cuptimon__agg_set_node_map(struct cuptimon_agg *a, int (*node_of)(void *ud, const char *uuid),
                                void *ud)
{
    a->node_of = node_of;
    a->node_ud = ud;
}

/* Slot i's node GPU: by the UUID the process sent for its ordinal, when
 * the node map knows it (cuptimon__agg_set_node_map). */
static void sess_dev_map(struct cuptimon_agg *a, struct asess *s, unsigned i,
                         const struct cuptimon_strtab *names)
{
    const char *text = NULL;
    size_t len = 0;
    char uuid[CUPTIMON_UUID_TEXT_SIZE];
    int n = -1, valid;

    if (a->node_of != NULL && names != NULL)
        text = cuptimon__strtab_get(names, CUPTIMON_DEVICE_UUID_KEY(s->devs[i]), &len);
    valid = text != NULL && cuptimon__uuid_text_ok(text, len);
    if (valid) {
        memcpy(uuid, text, len);
        uuid[len] = '\0';
        n = a->node_of(a->node_ud, uuid);
    }
    if (n >= 0)
        s->node[i] = (uint32_t)n;
    /* Asked again at the next buffer only for a UUID the map may learn. */
    if (s->unmapped[i] != (valid && n == -1)) {
        s->unmapped[i] = !s->unmapped[i];
        s->nunmapped += s->unmapped[i] ? 1u : (unsigned)-1;
    }
}

/* The device slot of a device id in this session, or -1 past the bound. */
static int sess_dev(struct cuptimon_agg *a, struct asess *s, uint32_t id,
                    const struct cuptimon_strtab *names)
{
    for (unsigned i = 0; i < s->ndevs; i++)
        if (s->devs[i] == id)
            return (int)i;
    if (s->ndevs >= SESSION_DEVICES)
        return -1;
    s->devs[s->ndevs] = s->node[s->ndevs] = id;
    sess_dev_map(a, s, s->ndevs, names);
    return (int)s->ndevs++;
}

/* ---- devices (under a->dev_mu) ------------------------------------------------ */

enum {
    DEV_KERNEL,
    DEV_MEMCPY,
    DEV_MEMSET
};

struct dev_ev {
    uint32_t dev;
    uint8_t type, dir;
    uint64_t s, e, bytes;
};

struct adev *cuptimon__agg_dev_get(struct cuptimon_agg *a, uint32_t id)
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

/* Adds n device records to their GPUs; own of them are on the process's
 * ordinal for want of the node map's answer (counted). */
static void dev_flush(struct cuptimon_agg *a, const struct dev_ev *ev, size_t n, int64_t now,
                      uint64_t own)
{
    /* A record far in the future would move the ring past everyone's
     * data: such records count in the totals, not in the ring. */
    uint64_t limit = (uint64_t)now + (uint64_t)a->future_ns;
    struct adev *d = NULL;
    uint32_t last = 0;
    int have = 0;

    if (n == 0 && own == 0)
        return;
    pthread_mutex_lock(&a->dev_mu);
    a->dev_own_ordinal += own;
    for (size_t i = 0; i < n; i++) {
        const struct dev_ev *x = &ev[i];
        struct bucket *b;
        int timed = x->e != 0 && x->e <= limit;
        if (!have || x->dev != last) {
            d = cuptimon__agg_dev_get(a, x->dev);
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

/* ---- waiting for the node map (under s->mu) ------------------------------- */

/* Room for one more device record waiting for the node map, or NULL when
 * it has waited map_wait_ns already, holds WAIT_EV_MAX, or no memory. */
static struct dev_ev *wait_slot(struct cuptimon_agg *a, struct asess *s, int64_t now)
{
    if (s->no_wait)
        return NULL;
    if (s->nwait == 0)
        s->wait_since = now;
    else if (now - s->wait_since >= a->map_wait_ns)
        return NULL;
    if (s->nwait == s->wait_cap) {
        size_t cap = s->wait_cap ? 2 * s->wait_cap : 256;
        struct dev_ev *p;
        if (s->wait_cap >= WAIT_EV_MAX || (p = realloc(s->wait_ev, cap * sizeof(*p))) == NULL)
            return NULL;
        s->wait_ev = p;
        s->wait_cap = cap;
    }
    return &s->wait_ev[s->nwait++];
}

/* Puts the waiting records on their GPUs: the node's where the map has
 * named it by now, else the process's ordinal (counted; and the session's
 * records wait no more: a map that slow would hold its live view back). */
static void wait_release(struct cuptimon_agg *a, struct asess *s, int64_t now)
{
    uint64_t own = 0;
    for (size_t i = 0; i < s->nwait; i++) {
        struct dev_ev *x = &s->wait_ev[i];
        own += s->unmapped[x->dev];
        x->dev = s->node[x->dev];
    }
    dev_flush(a, s->wait_ev, s->nwait, now, own);
    if (own > 0)
        s->no_wait = 1;
    free(s->wait_ev);
    s->wait_ev = NULL;
    s->nwait = s->wait_cap = 0;
}

/* ---- feeding -------------------------------------------------------------- */

int cuptimon__agg_add_buffer(struct cuptimon_agg *a, uint64_t session,
                             const struct cuptimon_layout *l, const struct cuptimon_strtab *names,
                             const void *buf, size_t len, const struct cuptimon_clock *clk)
{
    struct cuptimon_decode_stats st;
    struct cuptimon_walk w;
    struct cuptimon_ev ev;
    struct dev_ev *scratch, d;
    struct asess *s;
    size_t ns = 0;
    uint64_t own = 0;
    int64_t now = cuptimon__agg_now_ns();

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
        cuptimon__walk_begin_device(&w, l, buf, len, &st);
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
    for (unsigned i = 0; s->nunmapped > 0 && i < s->ndevs; i++)
        if (s->unmapped[i])
            sess_dev_map(a, s, i, names);
    if (s->nwait > 0 && (s->nunmapped == 0 || now - s->wait_since >= a->map_wait_ns))
        wait_release(a, s, now);
    memset(&st, 0, sizeof(st));
    cuptimon__walk_begin_device(&w, l, buf, len, &st);
    while (cuptimon__walk_next(&w, &ev)) {
        uint64_t dur, t0, t1;
        int dslot;
        struct kent *e;
        struct dev_ev *x;

        if (ev.type == CUPTIMON_EV_NCCL) {
            nccl_add(s, &ev);
            aggregated++;
            continue;
        }
        if (ev.type != CUPTIMON_EV_KERNEL && ev.type != CUPTIMON_EV_MEMCPY &&
            ev.type != CUPTIMON_EV_MEMCPY_P2P && ev.type != CUPTIMON_EV_MEMSET)
            continue;
        if (last_dslot >= 0 && ev.device_id == last_dev) {
            dslot = last_dslot;
        } else {
            dslot = sess_dev(a, s, ev.device_id, names);
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
        x = &d;
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
        /* A device whose node GPU the map may still name waits for it. */
        if (s->unmapped[dslot] && (x = wait_slot(a, s, now)) != NULL) {
            d.dev = (uint32_t)dslot;
        } else {
            own += s->unmapped[dslot];
            if (ns == SCRATCH) {
                dev_flush(a, scratch, ns, now, 0);
                ns = 0;
            }
            x = &scratch[ns++];
            d.dev = s->node[dslot];
        }
        *x = d;
        aggregated++;
    }
    dev_flush(a, scratch, ns, now, own);
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
    return cuptimon__layout_init_meta(l, version, have ? sizes : NULL, hello);
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

/* ---- statistics --------------------------------------------------------------- */

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
                     (s->nk + s->ndevs) * sizeof(struct kent) + s->wait_cap * sizeof(struct dev_ev);
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_lock(&a->names.mu);
    st->bytes += a->names.bytes + a->names.nb * sizeof(*a->names.b);
    pthread_mutex_unlock(&a->names.mu);
    pthread_mutex_lock(&a->dev_mu);
    st->not_aggregated += a->dev_not_aggregated;
    st->bad_times += a->dev_bad_times;
    st->own_ordinal += a->dev_own_ordinal;
    for (size_t i = 0; i < a->ndev; i++) {
        st->late_ns += a->dev[i]->late_ns;
        st->bytes += sizeof(*a->dev[i]) + a->dev[i]->ivcap * sizeof(struct iv);
    }
    pthread_mutex_unlock(&a->dev_mu);
    pthread_mutex_unlock(&a->mu);
}
