/*
 * Live aggregates: the query parser and the JSON view (cuptimon__agg_json)
 * that cuptimonctl top shows.
 */
#include "config.h"

#include "aggregate-int.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "archive/demangle.h"

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
    cuptimon__agg_copy_str(out, n, json_object_get_string(v));
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

/* How much of second sec a kernel running since since_ns (0: none) until
 * now covers. */
static uint64_t covered(int64_t sec, uint64_t since_ns, int64_t now)
{
    uint64_t lo = (uint64_t)sec * NS_PER_S, hi = lo + NS_PER_S;
    if (since_ns == 0 || now <= 0)
        return 0;
    if (since_ns > lo)
        lo = since_ns;
    if ((uint64_t)now < hi)
        hi = (uint64_t)now;
    return hi > lo ? hi - lo : 0;
}

/* Second sec's busy time: the records' union, or at least what a kernel
 * still running covers of it (its record comes when it ends). */
static uint64_t busy_in(const struct adev *d, int64_t sec, uint64_t run_since, int64_t now)
{
    const struct bucket *b = &d->ring[(uint64_t)sec % RING];
    uint64_t busy = 0, run = covered(sec, run_since, now);
    if (sec >= 0 && b->sec == sec)
        busy = b->busy_ns < NS_PER_S ? b->busy_ns : NS_PER_S;
    return run > busy ? run : busy;
}

double cuptimon__agg_busy_ratio(const struct adev *d, int64_t end, unsigned w, uint64_t run_since,
                                int64_t now)
{
    uint64_t busy = 0;

    for (int64_t sec = end - (int64_t)w; sec < end; sec++)
        if (sec >= 0)
            busy += busy_in(d, sec, run_since, now);
    return (double)busy / ((double)w * (double)NS_PER_S);
}

/* Under s->mu: the node GPU of the process's ordinal id, -1 while the node
 * map may still name it; an ordinal without a UUID stands for itself, as
 * its records do. */
static int64_t sess_node(const struct asess *s, uint32_t id)
{
    for (unsigned i = 0; i < s->ndevs; i++)
        if (s->devs[i] == id)
            return s->unmapped[i] ? -1 : (int64_t)s->node[i];
    return id;
}

size_t cuptimon__agg_running(struct cuptimon_agg *a, struct running **out)
{
    size_t n = 0;
    *out = NULL;
    for (size_t i = 0; i < a->nsess; i++) {
        struct asess *s = a->sess[i];
        int64_t node;
        size_t k;
        if (s->ended_ns != 0 || !s->held_kernel || s->held_since_ns == 0)
            continue;
        pthread_mutex_lock(&s->mu);
        node = sess_node(s, s->held_dev);
        pthread_mutex_unlock(&s->mu);
        if (node < 0)
            continue;
        if (*out == NULL && (*out = calloc(a->nsess, sizeof(**out))) == NULL)
            return 0;
        for (k = 0; k < n && (*out)[k].dev != (uint32_t)node; k++)
            ;
        if (k == n)
            (*out)[n++] = (struct running){(uint32_t)node, s->held_since_ns};
        else if (s->held_since_ns < (*out)[k].since_ns)
            (*out)[k].since_ns = s->held_since_ns;
    }
    return n;
}

void cuptimon__agg_running_devices(struct cuptimon_agg *a, const struct running *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        (void)cuptimon__agg_dev_get(a, r[i].dev);
}

uint64_t cuptimon__agg_running_since(const struct running *r, size_t n, uint32_t id)
{
    for (size_t i = 0; i < n; i++)
        if (r[i].dev == id)
            return r[i].since_ns;
    return 0;
}

int64_t cuptimon__agg_window_end(const struct cuptimon_agg_query *q)
{
    int64_t now = q && q->now_ns ? q->now_ns : cuptimon__agg_now_ns();
    int lag = q && q->lag_s >= 0 ? q->lag_s : 2;
    return now / (int64_t)NS_PER_S - lag;
}

/* run_since: a kernel has run on it since then, until now (0: none). */
static json_object *device_json(const struct adev *d, int64_t end, uint64_t run_since, int64_t now)
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
    json_object_object_add(
        o, "busy_1s", json_object_new_double(cuptimon__agg_busy_ratio(d, end, 1, run_since, now)));
    json_object_object_add(
        o, "busy_10s",
        json_object_new_double(cuptimon__agg_busy_ratio(d, end, 10, run_since, now)));
    json_object_object_add(
        o, "busy_60s",
        json_object_new_double(cuptimon__agg_busy_ratio(d, end, 60, run_since, now)));
    for (int64_t sec = end - 60; sec < end; sec++) {
        const struct bucket *b = &d->ring[(uint64_t)sec % RING];
        double r = sec >= 0 ? (double)busy_in(d, sec, run_since, now) / (double)NS_PER_S : 0;
        if (sec >= 0 && b->sec == sec)
            unchecked += b->unchecked_ns;
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
    case CUPTIMON_AGG_SORT_COUNT:
        kx = x->h.count;
        ky = y->h.count;
        break;
    case CUPTIMON_AGG_SORT_P99:
        kx = x->p99;
        ky = y->p99;
        break;
    default:
        kx = x->h.total;
        ky = y->h.total;
        break;
    }
    if (kx != ky)
        return kx < ky ? 1 : -1;
    if (x->h.total != y->h.total)
        return x->h.total < y->h.total ? 1 : -1;
    if (x->name && y->name)
        return strcmp(x->name, y->name);
    return x->sess < y->sess ? -1 : x->sess > y->sess;
}

char *cuptimon__agg_display_name(struct cuptimon_agg *a, const struct kent *e)
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
    uint64_t h = cuptimon__agg_hash_str(name, strlen(name)) ^ (uint64_t)other;
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
    cuptimon__agg_hist_init(&r->h);
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
    cuptimon__agg_hist_merge(&r->h, &e->h);
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
    json_object_object_add(o, k, u64j(cuptimon__agg_hist_pct(h, 500)));
    snprintf(k, sizeof(k), "%sp90_ns", prefix);
    json_object_object_add(o, k, u64j(cuptimon__agg_hist_pct(h, 900)));
    snprintf(k, sizeof(k), "%sp99_ns", prefix);
    json_object_object_add(o, k, u64j(cuptimon__agg_hist_pct(h, 990)));
}

static void sess_hist(const struct asess *s, struct hist *h)
{
    cuptimon__agg_hist_init(h);
    for (size_t j = 0; j < s->nk; j++)
        cuptimon__agg_hist_merge(h, &s->k[j]->h);
    for (unsigned d = 0; d < s->ndevs; d++)
        if (s->other[d] != NULL)
            cuptimon__agg_hist_merge(h, &s->other[d]->h);
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
    if (s->held_since_ns && !s->ended_ns) {
        int64_t now = cuptimon__agg_now_ns();
        json_object_object_add(
            x, "inflight_s",
            json_object_new_double((int64_t)s->held_since_ns < now
                                       ? (double)(now - (int64_t)s->held_since_ns) / 1e9
                                       : 0));
        json_object_object_add(x, "inflight_what", json_object_new_string(s->held_what));
        json_object_object_add(x, "inflight_held_bytes", u64j(s->held_bytes));
    }
    if (s->nnccl > 0)
        json_object_object_add(x, "nccl", cuptimon__agg_nccl_comms_json(s, cuptimon__agg_now_ns()));
    json_object_object_add(x, "pool_grown_bytes", u64j(s->ended_ns ? 0 : s->grown_bytes));
    json_object_object_add(x, "handoff_p50_ns", u64j(cuptimon__agg_hist_pct(&s->handoff, 500)));
    json_object_object_add(x, "handoff_p99_ns", u64j(cuptimon__agg_hist_pct(&s->handoff, 990)));
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
             lost = 0, shown = 0, live = 0, ended = 0;
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
    end = cuptimon__agg_window_end(q);
    json_object_object_add(o, "now_unix_ns",
                           json_object_new_int64(q->now_ns ? q->now_ns : cuptimon__agg_now_ns()));
    json_object_object_add(o, "window_end_unix_ns", json_object_new_int64(end * (int64_t)NS_PER_S));
    json_object_object_add(o, "by", json_object_new_string(bys[by]));
    json_object_object_add(o, "sort", json_object_new_string(sorts[sort]));

    pthread_mutex_lock(&a->mu);
    cuptimon__agg_sess_expire(a, cuptimon__agg_now_ns(), 0);
    for (size_t i = 0; i < a->nsess; i++) {
        struct asess *s = a->sess[i];
        int m = matches(s, q);
        /* Another user's session is not there for this caller: not in
         * the rows, not in the totals, not in the counts. */
        if (q->one_uid && s->uid != q->uid)
            continue;
        live += s->ended_ns == 0;
        ended += s->ended_ns != 0;
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
            r->p99 = cuptimon__agg_hist_pct(&r->h, 990);
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
                nm = other ? strdup("other") : cuptimon__agg_display_name(a, e);
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
    json_object_object_add(node, "sessions", u64j(live));
    json_object_object_add(node, "sessions_ended", u64j(ended));
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
    struct running *run = NULL;
    size_t nrun = cuptimon__agg_running(a, &run);
    int64_t now = q->now_ns ? q->now_ns : cuptimon__agg_now_ns();
    pthread_mutex_lock(&a->dev_mu);
    cuptimon__agg_running_devices(a, run, nrun);
    json_object_object_add(node, "not_aggregated_records",
                           u64j(a->not_aggregated + a->dev_not_aggregated));
    /* Records of a GPU the node map did not name in time (map_wait_s): on
     * the process's own ordinal, maybe not the node's. */
    json_object_object_add(node, "records_on_process_ordinal", u64j(a->dev_own_ordinal));
    for (size_t i = 0; i < a->ndev; i++) {
        uint64_t rs_ns = cuptimon__agg_running_since(run, nrun, a->dev[i]->id);
        json_object *d = device_json(a->dev[i], end, rs_ns, now);
        if (d != NULL)
            json_object_array_add(devs, d);
        if (by == CUPTIMON_AGG_BY_DEVICE && i < n) {
            d = device_json(a->dev[i], end, rs_ns, now);
            if (d != NULL)
                json_object_array_add(rows, d);
        }
    }
    if (by == CUPTIMON_AGG_BY_DEVICE)
        shown = a->ndev;
    pthread_mutex_unlock(&a->dev_mu);
    free(run);
    json_object_object_add(o, "node", node);
    json_object_object_add(o, "devices", devs);

    if (by != CUPTIMON_AGG_BY_DEVICE && !fail) {
        uint64_t rest_count = 0, rest_ns = 0;
        if (by == CUPTIMON_AGG_BY_KERNEL)
            for (size_t i = 0; i < rs.n; i++)
                rs.r[i].p99 = cuptimon__agg_hist_pct(&rs.r[i].h, 990);
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
