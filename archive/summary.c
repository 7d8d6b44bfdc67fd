/*
 * The per-trace summary (see summary.h).
 */
#include "config.h"

#include "summary.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "demangle.h"
#include "strtab.h"

/* Distinct (process, kernel) pairs kept; more are counted as "other". */
#define KAGG_MAX (1u << 20)

struct kagg {
    uint64_t ptr;
    uint32_t proc;
    uint32_t used;
    uint64_t count, total, min, max;
};

struct sproc {
    struct cuptimon_proc_info info; /* strings owned */
    const struct cuptimon_strtab *names;
    struct cuptimon_demangler *dm;
    uint64_t records, kernels, kernel_ns;
};

struct cuptimon_summary {
    uint64_t by_type[CUPTIMON_EV_TYPES];
    uint64_t gpu_ns[CUPTIMON_EV_TYPES];
    uint64_t kernels, kernel_ns;
    uint64_t other_kernels, other_kernel_ns; /* beyond KAGG_MAX */
    uint64_t dropped;
    uint64_t bad_times;
    struct cuptimon_decode_stats dec;
    struct kagg *agg;
    size_t agg_cap, agg_n;
    struct kagg *agg_last;
    struct sproc *procs;
    size_t nprocs, procs_cap;
    json_object *extra;
};

int cuptimon__summary_new(struct cuptimon_summary **out)
{
    struct cuptimon_summary *s = calloc(1, sizeof(*s));

    *out = NULL;
    if (s == NULL)
        return -ENOMEM;
    s->extra = json_object_new_object();
    if (s->extra == NULL) {
        free(s);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

void cuptimon__summary_free(struct cuptimon_summary *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nprocs; i++) {
        free((char *)s->procs[i].info.hostname);
        free((char *)s->procs[i].info.label);
        free((char *)s->procs[i].info.job_id);
    }
    free(s->procs);
    free(s->agg);
    json_object_put(s->extra);
    free(s);
}

int cuptimon__summary_add_process(struct cuptimon_summary *s, const struct cuptimon_proc_info *p,
                                  const struct cuptimon_strtab *names,
                                  struct cuptimon_demangler *dm)
{
    struct sproc *sp;

    if (s->nprocs == s->procs_cap) {
        size_t nc = s->procs_cap ? s->procs_cap * 2 : 8;
        struct sproc *np = realloc(s->procs, nc * sizeof(*np));
        if (np == NULL)
            return -ENOMEM;
        s->procs = np;
        s->procs_cap = nc;
    }
    sp = &s->procs[s->nprocs];
    memset(sp, 0, sizeof(*sp));
    sp->info = *p;
    sp->info.hostname = p->hostname ? strdup(p->hostname) : NULL;
    sp->info.label = p->label ? strdup(p->label) : NULL;
    sp->info.job_id = p->job_id ? strdup(p->job_id) : NULL;
    sp->info.exe = NULL; /* not used by the summary, not kept */
    if ((p->hostname && !sp->info.hostname) || (p->label && !sp->info.label) ||
        (p->job_id && !sp->info.job_id)) {
        free((char *)sp->info.hostname);
        free((char *)sp->info.label);
        free((char *)sp->info.job_id);
        return -ENOMEM;
    }
    sp->names = names;
    sp->dm = dm;
    return (int)s->nprocs++;
}

static inline size_t khash(uint64_t ptr, uint32_t proc)
{
    uint64_t x = ptr ^ ((uint64_t)proc * 0x9e3779b97f4a7c15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

static struct kagg *kslot(struct kagg *tab, size_t cap, uint64_t ptr, uint32_t proc)
{
    size_t mask = cap - 1, i = khash(ptr, proc) & mask;

    while (tab[i].used && (tab[i].ptr != ptr || tab[i].proc != proc))
        i = (i + 1) & mask;
    return &tab[i];
}

static struct kagg *kfind(struct cuptimon_summary *s, uint64_t ptr, uint32_t proc)
{
    struct kagg *e = s->agg_last;

    if (e != NULL && e->ptr == ptr && e->proc == proc)
        return e;
    if (s->agg == NULL) {
        s->agg = calloc(256, sizeof(*s->agg));
        if (s->agg == NULL)
            return NULL;
        s->agg_cap = 256;
    }
    e = kslot(s->agg, s->agg_cap, ptr, proc);
    if (!e->used) {
        if (s->agg_n >= KAGG_MAX)
            return NULL;
        if ((s->agg_n + 1) * 2 > s->agg_cap) {
            size_t ncap = s->agg_cap * 2;
            struct kagg *nt = calloc(ncap, sizeof(*nt));
            if (nt == NULL)
                return NULL;
            for (size_t i = 0; i < s->agg_cap; i++)
                if (s->agg[i].used)
                    *kslot(nt, ncap, s->agg[i].ptr, s->agg[i].proc) = s->agg[i];
            free(s->agg);
            s->agg = nt;
            s->agg_cap = ncap;
            e = kslot(s->agg, s->agg_cap, ptr, proc);
        }
        e->used = 1;
        e->ptr = ptr;
        e->proc = proc;
        e->min = UINT64_MAX;
        s->agg_n++;
    }
    s->agg_last = e;
    return e;
}

void cuptimon__summary_event(struct cuptimon_summary *s, int proc, const struct cuptimon_ev *ev)
{
    uint64_t dur = ev->end >= ev->start ? ev->end - ev->start : 0;
    struct sproc *sp = NULL;

    if (ev->type >= CUPTIMON_EV_TYPES)
        return;
    if (proc >= 0 && (size_t)proc < s->nprocs)
        sp = &s->procs[proc];
    s->by_type[ev->type]++;
    if (ev->end < ev->start)
        s->bad_times++;
    if (sp != NULL)
        sp->records++;
    switch (ev->type) {
    case CUPTIMON_EV_KERNEL: {
        struct kagg *k = kfind(s, ev->u.kernel.name_ptr, (uint32_t)(proc < 0 ? 0 : proc));
        s->kernels++;
        s->kernel_ns += dur;
        s->gpu_ns[ev->type] += dur;
        if (sp != NULL) {
            sp->kernels++;
            sp->kernel_ns += dur;
        }
        if (k == NULL) {
            s->other_kernels++;
            s->other_kernel_ns += dur;
            break;
        }
        k->count++;
        k->total += dur;
        if (dur < k->min)
            k->min = dur;
        if (dur > k->max)
            k->max = dur;
        break;
    }
    case CUPTIMON_EV_MEMCPY:
    case CUPTIMON_EV_MEMCPY_P2P:
    case CUPTIMON_EV_MEMSET: s->gpu_ns[ev->type] += dur; break;
    default: break;
    }
}

void cuptimon__summary_decode_stats(struct cuptimon_summary *s,
                                    const struct cuptimon_decode_stats *st)
{
    cuptimon__decode_stats_add(&s->dec, st);
}

void cuptimon__summary_dropped(struct cuptimon_summary *s, uint64_t n)
{
    s->dropped += n;
}

void cuptimon__summary_set(struct cuptimon_summary *s, const char *key, struct json_object *v)
{
    json_object_object_add(s->extra, key, v);
}

struct named {
    char *name;
    uint64_t count, total, min, max;
};

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct named *)a)->name, ((const struct named *)b)->name);
}

static int by_total(const void *a, const void *b)
{
    const struct named *x = a, *y = b;
    if (x->total != y->total)
        return x->total < y->total ? 1 : -1;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->name, y->name);
}

static char *resolve(const struct sproc *sp, uint64_t ptr)
{
    const char *s = sp ? cuptimon__strtab_get(sp->names, ptr, NULL) : NULL;
    char buf[64];

    if (s == NULL) {
        snprintf(buf, sizeof(buf), "<unknown kernel 0x%" PRIx64 ">", ptr);
        return strdup(buf);
    }
    if (sp->dm != NULL)
        s = cuptimon__demangle(sp->dm, s);
    return strdup(s);
}

static json_object *kernels_json(struct cuptimon_summary *s, unsigned top_n)
{
    json_object *k = json_object_new_object(), *top = json_object_new_array();
    struct named *v = NULL;
    size_t n = 0, m = 0;

    if (k == NULL || top == NULL) {
        json_object_put(k);
        json_object_put(top);
        return NULL;
    }
    if (s->agg_n > 0)
        v = calloc(s->agg_n, sizeof(*v));
    for (size_t i = 0; v != NULL && i < s->agg_cap; i++) {
        const struct kagg *a = &s->agg[i];
        if (!a->used || a->count == 0)
            continue;
        v[n].name = resolve(a->proc < s->nprocs ? &s->procs[a->proc] : NULL, a->ptr);
        if (v[n].name == NULL)
            continue;
        v[n].count = a->count;
        v[n].total = a->total;
        v[n].min = a->min;
        v[n].max = a->max;
        n++;
    }
    /* The same kernel in several processes is one row. */
    if (n > 0) {
        qsort(v, n, sizeof(*v), by_name);
        for (size_t i = 0; i < n; i++) {
            if (m > 0 && strcmp(v[m - 1].name, v[i].name) == 0) {
                v[m - 1].count += v[i].count;
                v[m - 1].total += v[i].total;
                if (v[i].min < v[m - 1].min)
                    v[m - 1].min = v[i].min;
                if (v[i].max > v[m - 1].max)
                    v[m - 1].max = v[i].max;
                free(v[i].name);
            } else {
                v[m++] = v[i];
            }
        }
        qsort(v, m, sizeof(*v), by_total);
    }
    for (size_t i = 0; i < m && i < top_n; i++) {
        json_object *e = json_object_new_object();
        if (e == NULL)
            break;
        json_object_object_add(e, "name", json_object_new_string(v[i].name));
        json_object_object_add(e, "count", json_object_new_uint64(v[i].count));
        json_object_object_add(e, "total_ns", json_object_new_uint64(v[i].total));
        json_object_object_add(e, "mean_ns", json_object_new_uint64(v[i].total / v[i].count));
        json_object_object_add(e, "min_ns", json_object_new_uint64(v[i].min));
        json_object_object_add(e, "max_ns", json_object_new_uint64(v[i].max));
        json_object_array_add(top, e);
    }
    for (size_t i = 0; i < m; i++)
        free(v[i].name);
    free(v);

    json_object_object_add(k, "count", json_object_new_uint64(s->kernels));
    json_object_object_add(k, "total_ns", json_object_new_uint64(s->kernel_ns));
    json_object_object_add(k, "mean_ns",
                           json_object_new_uint64(s->kernels ? s->kernel_ns / s->kernels : 0));
    json_object_object_add(k, "distinct", json_object_new_uint64(m));
    if (s->other_kernels) {
        json_object_object_add(k, "not_aggregated_count", json_object_new_uint64(s->other_kernels));
        json_object_object_add(k, "not_aggregated_ns", json_object_new_uint64(s->other_kernel_ns));
    }
    json_object_object_add(k, "top", top);
    return k;
}

struct json_object *cuptimon__summary_json(struct cuptimon_summary *s, unsigned top_n)
{
    json_object *o = json_object_new_object(), *rec = json_object_new_object();
    json_object *gpu = json_object_new_object(), *und = json_object_new_object();
    json_object *procs = json_object_new_array(), *kern, *skipped;

    if (top_n == 0)
        top_n = 20;
    if (!o || !rec || !gpu || !und || !procs) {
        json_object_put(o);
        json_object_put(rec);
        json_object_put(gpu);
        json_object_put(und);
        json_object_put(procs);
        return NULL;
    }
    for (unsigned t = 1; t < CUPTIMON_EV_TYPES; t++)
        json_object_object_add(rec, cuptimon__ev_type_name(t),
                               json_object_new_uint64(s->by_type[t]));
    json_object_object_add(o, "records", rec);
    json_object_object_add(gpu, "kernel", json_object_new_uint64(s->gpu_ns[CUPTIMON_EV_KERNEL]));
    json_object_object_add(
        gpu, "memcpy",
        json_object_new_uint64(s->gpu_ns[CUPTIMON_EV_MEMCPY] + s->gpu_ns[CUPTIMON_EV_MEMCPY_P2P]));
    json_object_object_add(gpu, "memset", json_object_new_uint64(s->gpu_ns[CUPTIMON_EV_MEMSET]));
    json_object_object_add(o, "gpu_time_ns", gpu);
    kern = kernels_json(s, top_n);
    if (kern != NULL)
        json_object_object_add(o, "kernels", kern);
    json_object_object_add(o, "dropped_records", json_object_new_uint64(s->dropped));

    json_object_object_add(und, "bytes", json_object_new_uint64(s->dec.undecodable_bytes));
    json_object_object_add(und, "decoded_bytes", json_object_new_uint64(s->dec.decoded_bytes));
    json_object_object_add(und, "buffers", json_object_new_uint64(s->dec.buffers));
    json_object_object_add(und, "unsupported_records",
                           json_object_new_uint64(s->dec.skipped_unsupported));
    json_object_object_add(und, "unknown_layout_records",
                           json_object_new_uint64(s->dec.skipped_bad_layout));
    json_object_object_add(und, "unknown_version_records",
                           json_object_new_uint64(s->dec.skipped_bad_version));
    json_object_object_add(und, "unconfirmed_layout_records",
                           json_object_new_uint64(s->dec.skipped_unconfirmed));
    json_object_object_add(und, "unknown_kind_stops",
                           json_object_new_uint64(s->dec.unknown_kind_stops));
    /* Why: the buffers cut short by cause, and the causes named. */
    json_object *stops = json_object_new_object();
    if (stops != NULL) {
        json_object_object_add(stops, "unknown_version",
                               json_object_new_uint64(s->dec.stops_unknown_version));
        json_object_object_add(stops, "layout_mismatch",
                               json_object_new_uint64(s->dec.stops_layout));
        json_object_object_add(stops, "unknown_kind",
                               json_object_new_uint64(s->dec.stops_unknown_kind));
        json_object_object_add(und, "stops_by_cause", stops);
    }
    char causes[160];
    cuptimon__undecodable_causes(&s->dec, causes, sizeof(causes));
    json_object_object_add(und, "causes", json_object_new_string(causes));
    json_object_object_add(und, "truncated_buffers", json_object_new_uint64(s->dec.truncated));
    json_object_object_add(und, "end_before_start", json_object_new_uint64(s->bad_times));
    skipped = json_object_new_object();
    if (skipped != NULL) {
        for (unsigned k = 0; k < CUPTIMON_KIND_SLOTS; k++) {
            char key[32];
            const char *kn;
            if (s->dec.skipped_by_kind[k] == 0)
                continue;
            kn = cuptimon__kind_name(k);
            if (kn == NULL) {
                snprintf(key, sizeof(key), "kind_%u", k);
                kn = key;
            }
            json_object_object_add(skipped, kn, json_object_new_uint64(s->dec.skipped_by_kind[k]));
        }
        json_object_object_add(und, "skipped_by_kind", skipped);
    }
    json_object_object_add(o, "undecodable", und);

    for (size_t i = 0; i < s->nprocs; i++) {
        const struct sproc *sp = &s->procs[i];
        json_object *p = json_object_new_object();
        if (p == NULL)
            continue;
        json_object_object_add(p, "pid", json_object_new_int64(sp->info.pid));
        if (sp->info.hostname)
            json_object_object_add(p, "hostname", json_object_new_string(sp->info.hostname));
        if (sp->info.label)
            json_object_object_add(p, "label", json_object_new_string(sp->info.label));
        if (sp->info.rank >= 0)
            json_object_object_add(p, "rank", json_object_new_int64(sp->info.rank));
        if (sp->info.world_size >= 0)
            json_object_object_add(p, "world_size", json_object_new_int64(sp->info.world_size));
        json_object_object_add(p, "records", json_object_new_uint64(sp->records));
        json_object_object_add(p, "kernels", json_object_new_uint64(sp->kernels));
        json_object_object_add(p, "kernel_ns", json_object_new_uint64(sp->kernel_ns));
        json_object_array_add(procs, p);
    }
    json_object_object_add(o, "processes", procs);

    json_object_object_foreach(s->extra, key, val)
    {
        json_object_object_add(o, key, json_object_get(val));
    }
    return o;
}

int cuptimon__summary_write(struct cuptimon_summary *s, FILE *f, unsigned top_n)
{
    json_object *o = cuptimon__summary_json(s, top_n);
    const char *text;
    int rc = 0;

    if (o == NULL)
        return -ENOMEM;
    text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                 JSON_C_TO_STRING_NOSLASHESCAPE);
    if (fputs(text, f) == EOF || fputc('\n', f) == EOF)
        rc = errno ? -errno : -EIO;
    json_object_put(o);
    return rc;
}
