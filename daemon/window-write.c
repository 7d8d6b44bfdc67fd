/* Writes a trace window from the archive, filtered as window-write.h says.
 * Two passes per session: the first collects the correlation ids of the API
 * calls that start inside the window, the second writes what the filter
 * keeps.  Memory: the set of retained correlation ids, bounded by the API
 * calls of the window, plus the trace writer's bounded tables. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "archive/archive.h"
#include "cuptimon-proto.h"
#include "archive/decode.h"
#include "archive/demangle.h"
#include "archive/session.h"
#include "archive/strtab.h"
#include "archive/summary.h"
#include "archive/trace.h"
#include "log.h"
#include "window-write.h"

/* ---- a set of correlation ids -------------------------------------------- */

struct idset {
    uint32_t *v; /* 0 = empty slot (correlation id 0 is never stored) */
    size_t cap, len;
};

static int idset_add(struct idset *s, uint32_t id)
{
    if (id == 0)
        return 0;
    if ((s->len + 1) * 2 > s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 1024;
        uint32_t *nv = calloc(ncap, sizeof *nv);
        if (!nv)
            return -ENOMEM;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->v[i])
                continue;
            size_t j = (s->v[i] * 2654435761u) & (ncap - 1);
            while (nv[j])
                j = (j + 1) & (ncap - 1);
            nv[j] = s->v[i];
        }
        free(s->v);
        s->v = nv;
        s->cap = ncap;
    }
    size_t j = (id * 2654435761u) & (s->cap - 1);
    while (s->v[j]) {
        if (s->v[j] == id)
            return 0;
        j = (j + 1) & (s->cap - 1);
    }
    s->v[j] = id;
    s->len++;
    return 0;
}

static int idset_has(const struct idset *s, uint32_t id)
{
    if (id == 0 || s->cap == 0)
        return 0;
    size_t j = (id * 2654435761u) & (s->cap - 1);
    while (s->v[j]) {
        if (s->v[j] == id)
            return 1;
        j = (j + 1) & (s->cap - 1);
    }
    return 0;
}

/* ---- one session ------------------------------------------------------------ */

struct wsession {
    const struct cuptimon_window_source *src;
    struct cuptimon_archive_session as; /* meta.json and strings, read on the first pass */
    struct cuptimon_decode_stats dec;
    int loaded; /* as was read (on the first pass) */
    struct idset keep;
    uint32_t min_api_corr; /* the lowest correlation id of any API record seen */
    uint64_t events, kernels, dropped, chunks;
};

static int is_api(const struct cuptimon_ev *ev)
{
    return ev->type == CUPTIMON_EV_RUNTIME || ev->type == CUPTIMON_EV_DRIVER;
}

static int is_gpu(const struct cuptimon_ev *ev)
{
    return ev->type == CUPTIMON_EV_KERNEL || ev->type == CUPTIMON_EV_MEMCPY ||
           ev->type == CUPTIMON_EV_MEMCPY_P2P || ev->type == CUPTIMON_EV_MEMSET;
}

/* Damage in a session's archive met while writing a window: logged (the
 * reader reports the first of each kind per pass), the rest still read. */
static void on_damage(void *ud, enum cuptimon_archive_damage kind, const char *path,
                      uint64_t offset, const char *what)
{
    (void)ud;
    (void)kind;
    if (offset == UINT64_MAX)
        log_warn("window", "%s: %s", path, what);
    else
        log_warn("window", "%s at byte %" PRIu64 ": %s", path, offset, what);
}

/* Calls fn for every event of the session's chunks inside the window's
 * chunk range. */
static int each_event(struct wsession *s, int (*fn)(struct wsession *, const struct cuptimon_ev *,
                                                    const struct cuptimon_clock *, void *),
                      void *ud, struct cuptimon_decode_stats *st, char **err)
{
    struct cuptimon_archive_reader *r;
    struct cuptimon_archive_chunk ch;
    int rc = cuptimon__archive_open(s->src->archive_dir, &r, err);
    if (rc < 0)
        return rc;
    cuptimon__archive_set_report(r, on_damage, NULL);
    if (!s->loaded) {
        /* A meta.json that cannot be parsed leaves an unknown CUPTI
         * version: the session's records are then counted, not written.
         * A strings file that cannot be read leaves names unresolved. */
        (void)cuptimon__archive_session_meta(&s->as, cuptimon__archive_meta(r));
        (void)cuptimon__archive_session_strings(&s->as, r);
        s->loaded = 1;
    }
    while ((rc = cuptimon__archive_next(r, &ch)) == 1) {
        if (ch.hdr.index < s->src->first_chunk || ch.hdr.index > s->src->last_chunk)
            continue;
        struct cuptimon_clock clk = {ch.hdr.cupti_ts, ch.hdr.unix_ns};
        struct cuptimon_walk w;
        struct cuptimon_ev ev;
        if (st == &s->dec) {
            s->chunks++;
            s->dropped += ch.hdr.dropped;
        }
        cuptimon__walk_begin(&w, &s->as.layout, ch.data, (size_t)ch.hdr.raw_size, st);
        while (cuptimon__walk_next(&w, &ev))
            if ((rc = fn(s, &ev, &clk, ud)) < 0)
                break;
        if (rc < 0)
            break;
    }
    cuptimon__archive_close(r);
    return rc < 0 ? rc : 0;
}

struct pass {
    const struct cuptimon_window_spec *w;
    struct cuptimon_trace *tr;
    struct cuptimon_summary *sum;
    int tproc, sproc;
    uint64_t *total;
    int truncated;
};

static int collect(struct wsession *s, const struct cuptimon_ev *ev,
                   const struct cuptimon_clock *clk, void *ud)
{
    const struct pass *p = ud;
    if (!is_api(ev))
        return 0;
    if (ev->correlation_id && (!s->min_api_corr || ev->correlation_id < s->min_api_corr))
        s->min_api_corr = ev->correlation_id;
    uint64_t t = cuptimon__clock_map(clk, ev->start);
    if (t >= p->w->start_ns && t <= p->w->end_ns)
        return idset_add(&s->keep, ev->correlation_id);
    return 0;
}

static int keep(const struct wsession *s, const struct cuptimon_ev *ev,
                const struct cuptimon_clock *clk, const struct cuptimon_window_spec *w)
{
    uint64_t t = cuptimon__clock_map(clk, ev->start);
    if (is_api(ev))
        return t >= w->start_ns && t <= w->end_ns;
    if (is_gpu(ev)) {
        int inside = t >= w->start_ns && t <= w->end_ns;
        return idset_has(&s->keep, ev->correlation_id) || (ev->correlation_id == 0 && inside) ||
               (s->src->joined && inside &&
                (!s->min_api_corr || ev->correlation_id < s->min_api_corr));
    }
    if (ev->type == CUPTIMON_EV_EXTERNAL_CORRELATION)
        return idset_has(&s->keep, ev->correlation_id);
    return ev->start == 0 || (t >= w->start_ns && t <= w->end_ns);
}

static int emit(struct wsession *s, const struct cuptimon_ev *ev, const struct cuptimon_clock *clk,
                void *ud)
{
    struct pass *p = ud;
    if (!keep(s, ev, clk, p->w))
        return 0;
    if (p->w->max_events && *p->total >= p->w->max_events) {
        p->truncated = 1;
        return 0;
    }
    (*p->total)++;
    s->events++;
    if (ev->type == CUPTIMON_EV_KERNEL)
        s->kernels++;
    cuptimon__summary_event(p->sum, p->sproc, ev);
    return cuptimon__trace_event(p->tr, p->tproc, ev, clk);
}

int cuptimon__window_write(const struct cuptimon_window_spec *w, json_object **summary, char **err)
{
    struct cuptimon_outpath of = {.fd = -1, .dfd = -1};
    char why[1024] = "";
    struct cuptimon_trace *tr = NULL;
    struct cuptimon_summary *sum = NULL;
    struct cuptimon_demangler *dm = NULL;
    struct wsession *ss = calloc(w->nsrc ? w->nsrc : 1, sizeof *ss);
    uint64_t total = 0;
    int truncated = 0, rc, fd = -1;
    *summary = NULL;
    *err = NULL;
    if (!ss)
        return -ENOMEM;
    if ((rc = cuptimon__outpath_open(&of, w->output, w->owner, w->user_dir, w->dir, 0640, why,
                                     sizeof why)) < 0) {
        if (asprintf(err, "%s", why) < 0)
            *err = NULL;
        goto out;
    }
    fd = of.fd;
    struct cuptimon_trace_opts o = {.base_ns = w->start_ns, .trace_name = w->output,
                                    .range_from_ns = w->start_ns, .range_to_ns = w->end_ns};
    if ((rc = cuptimon__trace_new_fd(&o, fd, &tr)) < 0 ||
        (rc = cuptimon__summary_new(&sum)) < 0 || (rc = cuptimon__demangler_new(0, &dm)) < 0)
        goto out;
    for (size_t i = 0; i < w->nsrc; i++) {
        struct wsession *s = &ss[i];
        struct cuptimon_decode_stats scratch = {0};
        struct pass p = {.w = w, .tr = tr, .sum = sum, .total = &total};
        char *e = NULL;
        s->src = &w->src[i];
        if ((rc = cuptimon__strtab_new(NULL, &s->as.names)) < 0)
            goto out;
        /* Pass 1: the API calls inside the window. */
        if ((rc = each_event(s, collect, &p, &scratch, &e)) < 0) {
            /* A session whose archive cannot be read is reported, not fatal. */
            free(e);
            continue;
        }
        p.tproc = cuptimon__trace_add_process(tr, &s->as.info, s->as.names, dm);
        p.sproc = cuptimon__summary_add_process(sum, &s->as.info, s->as.names, dm);
        if (p.tproc < 0 || p.sproc < 0) {
            rc = p.tproc < 0 ? p.tproc : p.sproc;
            goto out;
        }
        /* Pass 2: what the filter keeps. */
        rc = each_event(s, emit, &p, &s->dec, &e);
        free(e);
        if (rc < 0 && rc != -ENOENT)
            goto out;
        if ((rc = cuptimon__trace_end_process(tr, p.tproc)) < 0)
            goto out;
        cuptimon__summary_dropped(sum, s->dropped);
        cuptimon__summary_decode_stats(sum, &s->dec);
        truncated |= p.truncated;
    }
    json_object *extra = json_object_new_object();
    json_object_object_add(extra, "window", json_object_new_int64((int64_t)w->id));
    json_object_object_add(extra, "window_start_unix_ns", json_object_new_int64((int64_t)w->start_ns));
    json_object_object_add(extra, "window_end_unix_ns", json_object_new_int64((int64_t)w->end_ns));
    /* Who asked, and whose processes are in it: labels and job ids are
     * what a process says of itself, the uid is the kernel's word. */
    json_object_object_add(extra, "window_requested_by_uid", json_object_new_int64(w->owner->uid));
    json_object *wp = json_object_new_array();
    for (size_t i = 0; i < w->nsrc; i++) {
        json_object *p = json_object_new_object();
        json_object_object_add(p, "pid", json_object_new_int64(w->src[i].pid));
        json_object_object_add(p, "uid", json_object_new_int64(w->src[i].uid));
        json_object_array_add(wp, p);
    }
    json_object_object_add(extra, "window_processes", wp);
    rc = cuptimon__trace_finish(tr, extra);
    json_object_put(extra);
    if (rc < 0)
        goto out;
    fd = -1;
    if ((rc = cuptimon__outpath_commit(&of, 1, why, sizeof why)) < 0) {
        if (asprintf(err, "%s", why) < 0)
            *err = NULL;
        goto out;
    }
    json_object *res = cuptimon__summary_json(sum, 20), *procs = json_object_new_array();
    for (size_t i = 0; i < w->nsrc; i++) {
        json_object *p = json_object_new_object();
        json_object_object_add(p, "pid", json_object_new_int64(ss[i].as.info.pid));
        json_object_object_add(p, "uid", json_object_new_int64(w->src[i].uid));
        json_object_object_add(p, "archive", json_object_new_string(w->src[i].archive_dir));
        json_object_object_add(p, "events", json_object_new_int64((int64_t)ss[i].events));
        json_object_object_add(p, "kernels", json_object_new_int64((int64_t)ss[i].kernels));
        json_object_object_add(p, "api_calls_in_window", json_object_new_int64((int64_t)ss[i].keep.len));
        json_object_object_add(p, "dropped_records", json_object_new_int64((int64_t)ss[i].dropped));
        json_object_object_add(p, "late", json_object_new_boolean(w->src[i].late));
        json_object_array_add(procs, p);
    }
    json_object_object_add(res, "processes", procs);
    json_object_object_add(res, "events", json_object_new_int64((int64_t)total));
    json_object_object_add(res, "truncated", json_object_new_boolean(truncated));
    *summary = res;
    rc = 0;
out:
    if (rc < 0 && !*err && asprintf(err, "%s", strerror(-rc)) < 0)
        *err = NULL;
    cuptimon__outpath_commit(&of, 0, NULL, 0); /* after a failure: removes what was written */
    cuptimon__trace_free(tr);
    cuptimon__summary_free(sum);
    cuptimon__demangler_free(dm);
    for (size_t i = 0; i < w->nsrc; i++) {
        cuptimon__archive_session_clear(&ss[i].as);
        free(ss[i].keep.v);
    }
    free(ss);
    return rc;
}
