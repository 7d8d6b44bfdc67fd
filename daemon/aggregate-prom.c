/*
 * Live aggregates: the Prometheus text exposition (cuptimon__agg_prometheus)
 * and the metrics file the daemon rewrites for node_exporter.
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
#include <unistd.h>

#include "cuptimon-proto.h"
#include "archive/utf8.h"

/* Prometheus kernel label values are cut here (bytes). */
#define PROM_NAME_MAX 200u

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

/* A label value: escaped (\\, \", \n), invalid UTF-8 bytes as U+FFFD,
 * cut at max bytes of input on a character boundary. */
static void sb_label(struct sb *b, const char *v, size_t max)
{
    const unsigned char *s = (const unsigned char *)(v ? v : "");
    size_t n = strlen((const char *)s), i = 0;

    if (n > max)
        n = max;
    while (i < n) {
        size_t l = cuptimon__utf8_len(s + i, n - i);
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
    char *n = cuptimon__agg_display_name(a, e);
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

/* Whether session s is in the text for uid (< 0: every user); under a->mu. */
static int shown_to(const struct asess *s, int64_t uid)
{
    return uid < 0 || (int64_t)s->uid == uid;
}

char *cuptimon__agg_prometheus(struct cuptimon_agg *a)
{
    return cuptimon__agg_prometheus_of(a, -1);
}

char *cuptimon__agg_prometheus_of(struct cuptimon_agg *a, int64_t uid)
{
    struct sb b = {0};
    int64_t end = cuptimon__agg_window_end(NULL);
    size_t live = 0;

    pthread_mutex_lock(&a->mu);
    cuptimon__agg_sess_expire(a, cuptimon__agg_now_ns(), 0);
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
        if (!shown_to(s, uid))
            continue;
        live += s->ended_ns == 0;
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
                sb_printf(&b, ",device=\"%" PRIu32 "\",kernel=\"", s->node[d]);
                sb_label(&b, v[j].label, SIZE_MAX);
                sb_printf(&b, "\"} %" PRIu64 ".%09" PRIu64 "\n", v[j].total / NS_PER_S,
                          v[j].total % NS_PER_S);
                sb_printf(&l, "cuptimon_kernel_launches_total{");
                sb_ident(&l, s);
                sb_printf(&l, ",device=\"%" PRIu32 "\",kernel=\"", s->node[d]);
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
        if (!shown_to(a->sess[i], uid))
            continue;
        sb_printf(&b, "cuptimon_dropped_records_total{");
        sb_ident(&b, a->sess[i]);
        sb_printf(&b, "} %" PRIu64 "\n", a->sess[i]->dropped);
    }
    sb_family(&b, "cuptimon_lost_buffers_total", "counter",
              "Activity buffers of the process that were lost (a daemon went away, or a "
              "write failed).");
    for (size_t i = 0; i < a->nsess; i++) {
        if (!shown_to(a->sess[i], uid))
            continue;
        sb_printf(&b, "cuptimon_lost_buffers_total{");
        sb_ident(&b, a->sess[i]);
        sb_printf(&b, "} %" PRIu64 "\n", a->sess[i]->lost);
    }
    /* NCCL (issue 46): per communicator of each process, labelled with the
     * communicator's id, name and the process's rank in it, so that one
     * query across the nodes' files compares the ranks of a communicator
     * (cuptimond(8) says which). */
    int64_t now = cuptimon__agg_now_ns();
    {
        static const char *const fam[][3] = {
            {"cuptimon_nccl_started_total", "counter",
             "Collectives the rank started on the communicator (its ranks start the same ones "
             "in the same order: the rank with the fewest is behind)."},
            {"cuptimon_nccl_completed_total", "counter",
             "Collectives of the communicator the rank's GPU has finished."},
            {"cuptimon_nccl_last_completed_seq", "gauge",
             "NCCL's sequence number of the rank's last finished collective on the "
             "communicator (per function: see the function label)."},
            {"cuptimon_nccl_inflight_seconds", "gauge",
             "How long the rank's oldest unfinished collective on the communicator has been in "
             "flight (0: none); its function and sequence number are labels."},
            {"cuptimon_nccl_ops_total", "counter",
             "NCCL operations of the rank on the communicator, by function."},
            {"cuptimon_nccl_bytes_total", "counter",
             "Bytes of those operations (nccl-tests' size), by function."},
            {"cuptimon_nccl_seconds_total", "counter",
             "Time of those operations (their kernels' by the GPU's timer), by function."},
        };
        for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
            sb_family(&b, fam[f][0], fam[f][1], fam[f][2]);
            for (size_t i = 0; i < a->nsess; i++) {
                struct asess *s = a->sess[i];
                if (!shown_to(s, uid) || s->ended_ns)
                    continue;
                pthread_mutex_lock(&s->mu);
                for (unsigned c = 0; c < s->nnccl; c++) {
                    const struct anccl *x = &s->nccl[c];
                    for (unsigned k = 0; k < (f >= 4 ? NCCL_FUNCS_SHOWN : 1u); k++) {
                        if (f >= 4 && !x->fn[k].name[0])
                            break;
                        if (f == 2 && !x->last_seq1)
                            break;
                        sb_printf(&b, "%s{", fam[f][0]);
                        sb_ident(&b, s);
                        sb_printf(&b, ",comm_id=\"0x%016" PRIx64 "\",comm=\"", x->id);
                        sb_label(&b, x->name, sizeof(x->name));
                        sb_printf(&b, "\",comm_rank=\"%d\",comm_ranks=\"%d\"", x->rank, x->nranks);
                        if (f == 2) {
                            sb_printf(&b, ",function=\"");
                            sb_label(&b, x->last_func, sizeof(x->last_func));
                            sb_printf(&b, "\"} %" PRIu64 "\n", x->last_seq1 - 1);
                        } else if (f == 3) {
                            uint64_t age = x->fly_since && (int64_t)x->fly_since < now
                                               ? (uint64_t)(now - (int64_t)x->fly_since)
                                               : 0;
                            sb_printf(&b, ",function=\"");
                            sb_label(&b, x->fly_since ? x->fly_func : "", sizeof(x->fly_func));
                            sb_printf(&b, "\",seq=\"%" PRIu64 "\"} %" PRIu64 ".%03" PRIu64 "\n",
                                      x->fly_since ? x->fly_seq : 0, age / NS_PER_S,
                                      age % NS_PER_S / 1000000);
                        } else if (f >= 4) {
                            sb_printf(&b, ",function=\"");
                            sb_label(&b, x->fn[k].name, sizeof(x->fn[k].name));
                            if (f == 6)
                                sb_printf(&b, "\"} %" PRIu64 ".%09" PRIu64 "\n",
                                          x->fn[k].ns / NS_PER_S, x->fn[k].ns % NS_PER_S);
                            else
                                sb_printf(&b, "\"} %" PRIu64 "\n",
                                          f == 4 ? x->fn[k].ops : x->fn[k].bytes);
                        } else {
                            sb_printf(&b, "} %" PRIu64 "\n", f == 0 ? x->started : x->completed);
                        }
                    }
                }
                pthread_mutex_unlock(&s->mu);
            }
        }
    }
    /* What CUPTI holds behind running work (issue 33), read now. */
    sb_family(&b, "cuptimon_inflight_oldest_seconds", "gauge",
              "How long the process's oldest GPU work whose record CUPTI has not completed has "
              "held every record launched after it (0: nothing held).");
    for (size_t i = 0; i < a->nsess; i++) {
        const struct asess *s = a->sess[i];
        uint64_t age = s->held_since_ns && !s->ended_ns && (int64_t)s->held_since_ns < now
                           ? (uint64_t)(now - (int64_t)s->held_since_ns)
                           : 0;
        if (!shown_to(s, uid))
            continue;
        sb_printf(&b, "cuptimon_inflight_oldest_seconds{");
        sb_ident(&b, s);
        sb_printf(&b, "} %" PRIu64 ".%03" PRIu64 "\n", age / NS_PER_S, age % NS_PER_S / 1000000);
    }
    sb_family(&b, "cuptimon_inflight_held_bytes", "gauge",
              "Bytes of the process's activity records that CUPTI holds behind that work.");
    for (size_t i = 0; i < a->nsess; i++) {
        if (!shown_to(a->sess[i], uid))
            continue;
        sb_printf(&b, "cuptimon_inflight_held_bytes{");
        sb_ident(&b, a->sess[i]);
        sb_printf(&b, "} %" PRIu64 "\n", a->sess[i]->ended_ns ? 0 : a->sess[i]->held_bytes);
    }
    sb_family(&b, "cuptimon_pool_grown_bytes", "gauge",
              "Bytes the process's buffer pool has grown by past its resident slots, to keep "
              "the records CUPTI holds; they go back when CUPTI hands them over.");
    for (size_t i = 0; i < a->nsess; i++) {
        if (!shown_to(a->sess[i], uid))
            continue;
        sb_printf(&b, "cuptimon_pool_grown_bytes{");
        sb_ident(&b, a->sess[i]);
        sb_printf(&b, "} %" PRIu64 "\n", a->sess[i]->ended_ns ? 0 : a->sess[i]->grown_bytes);
    }
    /* While the pool is at its cap CUPTI drops records but counts them
     * only when it hands the buffers it holds over (the dropped counters
     * stay still until then): how long it has been dropping (issue 47). */
    sb_family(&b, "cuptimon_pool_dropping_seconds", "gauge",
              "Seconds the process's CUPTI has been dropping records for want of a buffer "
              "(its pool at its cap; 0: not now); CUPTI counts them when it hands over the "
              "buffers it holds.");
    for (size_t i = 0; i < a->nsess; i++) {
        struct asess *s = a->sess[i];
        uint64_t age = !s->ended_ns && s->dropping_since_ns && now > (int64_t)s->dropping_since_ns
                           ? (uint64_t)(now - (int64_t)s->dropping_since_ns)
                           : 0;
        if (!shown_to(s, uid))
            continue;
        sb_printf(&b, "cuptimon_pool_dropping_seconds{");
        sb_ident(&b, s);
        sb_printf(&b, "} %" PRIu64 ".%03" PRIu64 "\n", age / NS_PER_S, age % NS_PER_S / 1000000);
    }
    sb_family(&b, "cuptimon_handoff_latency_seconds", "summary",
              "Time from a buffer's completion in the process to its aggregation in the "
              "daemon, after the archive write.");
    for (size_t i = 0; i < a->nsess; i++) {
        struct asess *s = a->sess[i];
        if (!shown_to(s, uid))
            continue;
        pthread_mutex_lock(&s->mu);
        if (s->handoff.count > 0) {
            static const unsigned qs[] = {500, 990};
            static const char *const qn[] = {"0.5", "0.99"};
            for (unsigned k = 0; k < 2; k++) {
                uint64_t v = cuptimon__agg_hist_pct(&s->handoff, qs[k]);
                sb_printf(&b, "cuptimon_handoff_latency_seconds{");
                sb_ident(&b, s);
                sb_printf(&b, ",quantile=\"%s\"} %" PRIu64 ".%09" PRIu64 "\n", qn[k], v / NS_PER_S,
                          v % NS_PER_S);
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
    sb_family(&b, "cuptimon_session_info", "gauge",
              "1 per process, labelled with the CUPTI activity API cuptimon uses in it: path "
              "\"v1\" (the global API) or \"v2+udr\" (its own subscriber, user-defined "
              "records).");
    for (size_t i = 0; i < a->nsess; i++) {
        if (!shown_to(a->sess[i], uid))
            continue;
        sb_printf(&b, "cuptimon_session_info{");
        sb_ident(&b, a->sess[i]);
        sb_printf(&b, ",path=\"");
        sb_label(&b, a->sess[i]->path[0] ? a->sess[i]->path : "v1", sizeof(a->sess[i]->path));
        sb_printf(&b, "\"} 1\n");
    }
    sb_family(&b, "cuptimon_record_bytes_per_kernel", "gauge",
              "Bytes of one kernel activity record in the process's buffers (and archive).");
    for (size_t i = 0; i < a->nsess; i++) {
        if (!shown_to(a->sess[i], uid) || a->sess[i]->record_bytes_per_kernel == 0)
            continue;
        sb_printf(&b, "cuptimon_record_bytes_per_kernel{");
        sb_ident(&b, a->sess[i]);
        sb_printf(&b, "} %" PRIu32 "\n", a->sess[i]->record_bytes_per_kernel);
    }
    sb_family(&b, "cuptimon_sessions", "gauge", "Processes whose activity is aggregated now.");
    sb_printf(&b, "cuptimon_sessions %zu\n", live);

    /* A kernel still running counts as busy (its record comes when it
     * ends); the busy seconds counter stays the records' own. */
    struct running *run = NULL;
    size_t nrun = cuptimon__agg_running(a, &run);
    pthread_mutex_lock(&a->dev_mu);
    cuptimon__agg_running_devices(a, run, nrun);
    sb_family(&b, "cuptimon_gpu_busy_ratio", "gauge",
              "Fraction of the 10 s ending 2 s ago in which at least one kernel ran on the "
              "device (CUDA device ordinal of the processes).");
    for (size_t i = 0; i < a->ndev; i++)
        sb_printf(&b, "cuptimon_gpu_busy_ratio{device=\"%" PRIu32 "\"} %.6f\n", a->dev[i]->id,
                  cuptimon__agg_busy_ratio(a->dev[i], end, 10,
                                           cuptimon__agg_running_since(run, nrun, a->dev[i]->id),
                                           now));
    free(run);
    sb_family(&b, "cuptimon_gpu_busy_seconds_total", "counter",
              "Time in which at least one kernel ran on the device (the union of kernel "
              "intervals).");
    for (size_t i = 0; i < a->ndev; i++)
        sb_printf(
            &b,
            "cuptimon_gpu_busy_seconds_total{device=\"%" PRIu32 "\"} %" PRIu64 ".%09" PRIu64 "\n",
            a->dev[i]->id, a->dev[i]->busy_total / NS_PER_S, a->dev[i]->busy_total % NS_PER_S);
    sb_family(&b, "cuptimon_memcpy_bytes_total", "counter",
              "Bytes copied by memory copies on the device, by direction.");
    for (size_t i = 0; i < a->ndev; i++)
        for (unsigned k = 0; k < NDIR; k++)
            if (a->dev[i]->copies[k] > 0)
                sb_printf(&b,
                          "cuptimon_memcpy_bytes_total{device=\"%" PRIu32
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

int cuptimon__agg_write_prometheus(struct cuptimon_agg *a, const char *path, const char *extra)
{
    struct cuptimon_outfile of;
    char *text;
    size_t len, off = 0;
    int fd, rc = 0;

    text = cuptimon__agg_prometheus(a);
    if (text == NULL)
        return -ENOMEM;
    if (extra && *extra) {
        char *both = NULL;
        if (asprintf(&both, "%s%s", text, extra) < 0) {
            free(text);
            return -ENOMEM;
        }
        free(text);
        text = both;
    }
    len = strlen(text);
    /* It names every user's processes and kernels: not world-readable
     * (issue 21).  0640 whatever the umask; node_exporter reads it through
     * the group or a default ACL of the directory (cuptimond.conf(5)). */
    if ((rc = cuptimon__outfile_open(&of, path, 0640)) < 0) {
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
