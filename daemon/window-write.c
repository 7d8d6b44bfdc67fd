/* Writes a trace window from the archive, filtered as window-write.h says.
 * Two passes per session: the first collects the correlation ids of the
 * API calls that start inside the window, the second writes what the
 * filter keeps.  The ids are kept as a set (daemon/idset.h), never a
 * range: CUPTI promises a unique id per call, not one counter in start
 * order, and a range let in work launched outside the window wherever the
 * numbering was not one ordered counter (kernels, copies and memsets
 * numbered apart, ids out of order, a counter wrapping at 2^32).  The set
 * is paged, so its memory follows the ids it holds (a 60 s window of one
 * process at 50 k launches/s: well under a MiB), and only one session's
 * set is held at a time.  Memory: the trace writer's bounded tables plus
 * that set, the set of its runtime calls begun before the start in the
 * window's first chunks (a launch belongs to the window when its outermost
 * call starts inside: launched_inside below), and, for a process that
 * joined during the window, the set of its API calls outside it. */
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
#include "archive/gpm.h"
#include "archive/session.h"
#include "archive/strtab.h"
#include "archive/stats.h"
#include "archive/summary.h"
#include "archive/trace.h"
#include "idset.h"
#include "log.h"
#include "window-write.h"

/* ---- one session ------------------------------------------------------------ */

struct wsession {
    const struct cuptimon_window_source *src;
    struct cuptimon_archive_session as; /* meta.json and strings, read on the first pass */
    struct cuptimon_decode_stats dec;
    int loaded;                      /* as was read (on the first pass) */
    struct cuptimon_idset in;        /* ids of the API calls that start inside the window */
    struct cuptimon_idset out;       /* ... and outside it (a process that joined only) */
    struct cuptimon_idset rt_before; /* runtime calls that start before the window */
    uint64_t api_in_window;          /* API records inside the window */
    uint64_t events, kernels, dropped, chunks;
    struct cuptimon_gpm_ordinals devs; /* the devices its kept GPU work ran on */
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
static int each_event(struct wsession *s,
                      int (*fn)(struct wsession *, const struct cuptimon_ev *,
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
        cuptimon__walk_begin(&w, cuptimon__archive_session_layout(&s->as, ch.hdr.index), ch.data,
                             (size_t)ch.hdr.raw_size, st);
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
    struct cuptimon_trace *ptr; /* the process's own trace (per_process), or NULL */
    int ptproc;
    struct cuptimon_summary *sum;
    struct cuptimon_stats *st; /* the top kernels of the reply */
    int tproc, sproc, stproc;
    uint64_t *total;
    int truncated;
};

static int collect(struct wsession *s, const struct cuptimon_ev *ev,
                   const struct cuptimon_clock *clk, void *ud)
{
    const struct pass *p = ud;
    int rc;
    if (!is_api(ev))
        return 0;
    uint64_t t = cuptimon__clock_map(clk, ev->start);
    if (!(t >= p->w->start_ns && t <= p->w->end_ns)) {
        if (ev->type == CUPTIMON_EV_RUNTIME && t < p->w->start_ns &&
            (rc = cuptimon__idset_add(&s->rt_before, ev->correlation_id)) < 0)
            return rc;
        return s->src->joined ? cuptimon__idset_add(&s->out, ev->correlation_id) : 0;
    }
    s->api_in_window++;
    return cuptimon__idset_add(&s->in, ev->correlation_id);
}

/* A launch is the window's when its outermost API call starts inside: the
 * runtime call where there is one.  A runtime call begun before the start
 * whose nested driver call starts inside (the runtime spent that long
 * before calling the driver: lazy loading, a pageable copy's staging) is
 * not the window's, though PyTorch's filter, reading each record alone,
 * would keep its work through the driver record; the trace then showed a
 * kernel launched by a bare cuLaunchKernel, or a copy or memset with no
 * launch at all (a copy's driver call is not drawn, as in Kineto).  At the
 * end no such case arises: a runtime call inside keeps its work whenever
 * its driver call starts. */
static int launched_inside(struct wsession *s, uint32_t corr)
{
    return cuptimon__idset_has(&s->in, corr) &&
           (s->rt_before.ids == 0 || !cuptimon__idset_has(&s->rt_before, corr));
}

static int keep(struct wsession *s, const struct cuptimon_ev *ev, const struct cuptimon_clock *clk,
                const struct cuptimon_window_spec *w)
{
    uint64_t t = cuptimon__clock_map(clk, ev->start);
    if (is_api(ev))
        return t >= w->start_ns && t <= w->end_ns &&
               (ev->type == CUPTIMON_EV_RUNTIME || launched_inside(s, ev->correlation_id));
    if (is_gpu(ev)) {
        int inside = t >= w->start_ns && t <= w->end_ns;
        if (launched_inside(s, ev->correlation_id))
            return 1; /* whatever its own times: launched inside */
        if (ev->correlation_id == 0)
            return inside;
        /* A process that joined launched its first work before the
         * window's API kinds reached it: work with no API record at all
         * is kept when it starts inside (more than PyTorch keeps). */
        return s->src->joined && inside && !cuptimon__idset_has(&s->out, ev->correlation_id);
    }
    if (ev->type == CUPTIMON_EV_EXTERNAL_CORRELATION)
        return launched_inside(s, ev->correlation_id);
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
    if (is_gpu(ev))
        cuptimon__gpm_ordinals_add(&s->devs, ev->device_id);
    cuptimon__summary_event(p->sum, p->sproc, ev);
    cuptimon__stats_event(p->st, p->stproc, ev, clk);
    if (p->ptr != NULL) {
        int rc = cuptimon__trace_event(p->ptr, p->ptproc, ev, clk);
        if (rc < 0)
            return rc;
    }
    return cuptimon__trace_event(p->tr, p->tproc, ev, clk);
}

/* ---- GPU metrics ----------------------------------------------------------- */

/* The GPU metrics sessions beside the window's processes' (the daemon
 * keeps every session under one archive directory), found once. */
struct gpm_beside {
    int looked;
    char **dirs; /* NULL: none */
    uint64_t sessions, samples;
};

static char **gpm_dirs(const struct cuptimon_window_spec *w, struct gpm_beside *g)
{
    if (!g->looked && w->nsrc > 0) {
        char *root = strdup(w->src[0].archive_dir), *slash = root ? strrchr(root, '/') : NULL;
        g->looked = 1;
        if (slash != NULL && slash != root) {
            *slash = '\0';
            int rc = cuptimon__gpm_find_sessions(root, &g->dirs);
            if (rc < 0) {
                log_warn("window", "window %" PRIu64 ": looking for GPU metrics in %s: %s", w->id,
                         root, strerror(-rc));
                g->dirs = NULL;
            }
        }
        free(root);
    }
    return g->dirs;
}

/* Writes the counter tracks of the GPU metrics sessions of the devices in
 * devs over the window's [start, end] into t (count: into the reply's
 * figures).  A session that cannot be read is logged and left out; a
 * write error of the trace comes back from its finish.  The samples are
 * what the sampler has archived by now: its chunks, like a process's
 * buffers, reach the archive some time after they were taken. */
static void gpm_write(const struct cuptimon_window_spec *w, struct gpm_beside *g,
                      struct cuptimon_trace *t, const struct cuptimon_gpm_devset *devs, int count)
{
    char **dirs;

    if (cuptimon__gpm_devset_empty(devs) || (dirs = gpm_dirs(w, g)) == NULL)
        return;
    for (size_t i = 0; dirs[i] != NULL; i++) {
        struct cuptimon_gpm_read_stats st = {0};
        char why[640] = "";
        int rc = cuptimon__gpm_trace_session(t, dirs[i], w->start_ns, w->end_ns + 1, devs, &st, why,
                                             sizeof why);
        if (rc < 0) {
            log_warn("window", "window %" PRIu64 ": GPU metrics %s left out: %s", w->id, dirs[i],
                     why);
            continue;
        }
        if (count && rc > 0) {
            g->sessions++;
            g->samples += st.samples;
        }
        if (st.bad_chunks || st.bad_samples || st.damaged)
            log_warn("window",
                     "window %" PRIu64 ": GPU metrics %s: %" PRIu64 " damaged chunk(s), %" PRIu64
                     " chunk(s) of a wrong size, %" PRIu64 " bad sample(s) skipped",
                     w->id, dirs[i], st.damaged, st.bad_chunks, st.bad_samples);
    }
}

/* What otherData says of the window, in every trace it writes. */
static json_object *window_extra(const struct cuptimon_window_spec *w)
{
    json_object *extra = json_object_new_object();
    json_object_object_add(extra, "window", json_object_new_int64((int64_t)w->id));
    json_object_object_add(extra, "window_start_unix_ns",
                           json_object_new_int64((int64_t)w->start_ns));
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
    return extra;
}

/* The path of a process's own trace: output with its ".json" (and ".gz")
 * suffix replaced by ".rank-R.json" or ".pid-P.json" (+ ".gz"); made of
 * numbers only, never of what a producer wrote.  -ENAMETOOLONG. */
static int process_path(const struct cuptimon_window_spec *w, const struct cuptimon_proc_info *in,
                        char *out, size_t n)
{
    size_t len = strlen(w->output);
    const char *gz = w->gzip_level > 0 ? ".gz" : "";
    if (len > 3 && strcmp(w->output + len - 3, ".gz") == 0)
        len -= 3;
    if (len > 5 && memcmp(w->output + len - 5, ".json", 5) == 0)
        len -= 5;
    int k = in->rank >= 0
                ? snprintf(out, n, "%.*s.rank-%lld.json%s", (int)len, w->output,
                           (long long)in->rank, gz)
                : snprintf(out, n, "%.*s.pid-%u.json%s", (int)len, w->output, in->pid, gz);
    return k < 0 || (size_t)k >= n ? -ENAMETOOLONG : 0;
}

int cuptimon__window_write(const struct cuptimon_window_spec *w, json_object **summary, char **err)
{
    struct cuptimon_outpath of = {.fd = -1, .dfd = -1}, pof = {.fd = -1, .dfd = -1};
    json_object *ptraces = json_object_new_array();
    struct cuptimon_trace *ptr = NULL; /* the current process's own trace */
    char why[1024] = "";
    struct cuptimon_trace *tr = NULL;
    struct cuptimon_summary *sum = NULL;
    struct cuptimon_stats *st = NULL;
    struct cuptimon_demangler *dm = NULL;
    struct wsession *ss = calloc(w->nsrc ? w->nsrc : 1, sizeof *ss);
    struct gpm_beside gb = {0};
    struct cuptimon_gpm_devset alldevs = {0};
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
    struct cuptimon_trace_opts o = {.base_ns = w->start_ns,
                                    .trace_name = w->output,
                                    .gzip_level = w->gzip_level,
                                    .range_from_ns = w->start_ns,
                                    .range_to_ns = w->end_ns};
    /* The reply's top kernels: exact medians while they take at most
     * 2 MiB, then histograms (archive/stats.h: within 0.8%, marked), so
     * that a long window costs the daemon no more. */
    struct cuptimon_stats_opts so = {.reports = CUPTIMON_STATS_BIT(CUPTIMON_STATS_KERNELS),
                                     .exact_limit = (uint64_t)1 << 18};
    if ((rc = cuptimon__trace_new_fd(&o, fd, &tr)) < 0 || (rc = cuptimon__summary_new(&sum)) < 0 ||
        (rc = cuptimon__demangler_new(0, &dm)) < 0 || (rc = cuptimon__stats_new(&so, &st)) < 0)
        goto out;
    for (size_t i = 0; i < w->nsrc; i++) {
        struct wsession *s = &ss[i];
        struct cuptimon_decode_stats scratch = {0};
        struct pass p = {.w = w, .tr = tr, .sum = sum, .st = st, .total = &total};
        char *e = NULL;
        s->src = &w->src[i];
        if ((rc = cuptimon__strtab_new(NULL, &s->as.names)) < 0)
            goto out;
        /* Pass 1: the API calls inside the window. */
        if ((rc = each_event(s, collect, &p, &scratch, &e)) < 0) {
            /* A session whose archive cannot be read (or whose ids do not
             * fit in memory) is reported, not fatal. */
            log_warn("window", "window %" PRIu64 ": %s left out: %s", w->id, s->src->archive_dir,
                     e ? e : strerror(-rc));
            free(e);
            continue;
        }
        p.tproc = cuptimon__trace_add_process(tr, &s->as.info, s->as.names, dm);
        p.sproc = cuptimon__summary_add_process(sum, &s->as.info, s->as.names, dm);
        p.stproc = cuptimon__stats_add_process(st, &s->as.info, s->as.names, dm);
        if (p.tproc < 0 || p.sproc < 0 || p.stproc < 0) {
            rc = p.tproc < 0 ? p.tproc : p.sproc < 0 ? p.sproc : p.stproc;
            goto out;
        }
        /* The process's own trace, written beside in the same pass.  Its
         * path lives as long as the trace (which keeps it as trace_name)
         * and the outpath, to their finish below. */
        char path[1024];
        if (w->per_process) {
            if ((rc = process_path(w, &s->as.info, path, sizeof path)) < 0)
                goto out;
            struct cuptimon_trace_opts po = {
                .base_ns = w->start_ns, .trace_name = path, .gzip_level = w->gzip_level};
            if ((rc = cuptimon__outpath_open(&pof, path, w->owner, w->user_dir, w->dir, 0640, why,
                                             sizeof why)) < 0) {
                if (asprintf(err, "%s", why) < 0)
                    *err = NULL;
                goto out;
            }
            if ((rc = cuptimon__trace_new_fd(&po, pof.fd, &ptr)) < 0)
                goto out;
            p.ptr = ptr;
            if ((p.ptproc = cuptimon__trace_add_process(p.ptr, &s->as.info, s->as.names, dm)) < 0) {
                rc = p.ptproc;
                goto out;
            }
            json_object *pt = json_object_new_object();
            json_object_object_add(pt, "pid", json_object_new_int64(s->as.info.pid));
            if (s->as.info.rank >= 0)
                json_object_object_add(pt, "rank", json_object_new_int64(s->as.info.rank));
            json_object_object_add(pt, "path", json_object_new_string(path));
            json_object_array_add(ptraces, pt);
        }
        /* Pass 2: what the filter keeps. */
        rc = each_event(s, emit, &p, &s->dec, &e);
        free(e);
        if (rc < 0 && rc != -ENOENT)
            goto out;
        cuptimon__gpm_devset_resolve(&alldevs, &s->devs, s->as.names);
        if (p.ptr != NULL) {
            json_object *pextra = window_extra(w);
            struct cuptimon_gpm_devset own = {0};
            cuptimon__gpm_devset_resolve(&own, &s->devs, s->as.names);
            gpm_write(w, &gb, p.ptr, &own, 0);
            rc = cuptimon__trace_finish(p.ptr, pextra);
            json_object_put(pextra);
            cuptimon__trace_free(ptr);
            p.ptr = ptr = NULL;
            if (rc < 0)
                goto out;
            if ((rc = cuptimon__outpath_commit(&pof, 1, why, sizeof why)) < 0) {
                if (asprintf(err, "%s", why) < 0)
                    *err = NULL;
                goto out;
            }
            pof = (struct cuptimon_outpath){.fd = -1, .dfd = -1};
        }
        if ((rc = cuptimon__trace_end_process(tr, p.tproc)) < 0)
            goto out;
        cuptimon__summary_dropped(sum, s->dropped);
        cuptimon__summary_decode_stats(sum, &s->dec);
        truncated |= p.truncated;
        log_debug("window",
                  "window %" PRIu64 ": pid %" PRId64 ": %" PRIu64
                  " API calls inside, ids held in %zu bytes (+%zu outside)",
                  w->id, s->src->pid, s->api_in_window, cuptimon__idset_bytes(&s->in),
                  cuptimon__idset_bytes(&s->out));
        /* Only one session's sets at a time. */
        cuptimon__idset_clear(&s->in);
        cuptimon__idset_clear(&s->out);
        cuptimon__idset_clear(&s->rt_before);
    }
    /* The GPUs the window's processes ran work on, over its span. */
    gpm_write(w, &gb, tr, &alldevs, 1);
    json_object *extra = window_extra(w);
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
        json_object_object_add(p, "api_calls_in_window",
                               json_object_new_int64((int64_t)ss[i].api_in_window));
        json_object_object_add(p, "dropped_records", json_object_new_int64((int64_t)ss[i].dropped));
        json_object_object_add(p, "late", json_object_new_boolean(w->src[i].late));
        json_object_array_add(procs, p);
    }
    json_object_object_add(res, "processes", procs);
    json_object_object_add(res, "events", json_object_new_int64((int64_t)total));
    json_object_object_add(res, "truncated", json_object_new_boolean(truncated));
    if (w->per_process)
        json_object_object_add(res, "process_traces", json_object_get(ptraces));
    if (gb.sessions > 0) {
        json_object *gm = json_object_new_object();
        json_object_object_add(gm, "sessions", json_object_new_uint64(gb.sessions));
        json_object_object_add(gm, "samples", json_object_new_uint64(gb.samples));
        json_object_object_add(res, "gpu_metrics", gm);
    }
    json_object *top = cuptimon__stats_rows(st, CUPTIMON_STATS_KERNELS, 10);
    if (top != NULL)
        json_object_object_add(res, "top_kernels", top);
    *summary = res;
    rc = 0;
out:
    if (rc < 0 && !*err && asprintf(err, "%s", strerror(-rc)) < 0)
        *err = NULL;
    cuptimon__outpath_commit(&of, 0, NULL, 0); /* after a failure: removes what was written */
    cuptimon__outpath_commit(&pof, 0, NULL, 0);
    cuptimon__trace_free(ptr);
    json_object_put(ptraces);
    cuptimon__trace_free(tr);
    cuptimon__summary_free(sum);
    cuptimon__stats_free(st);
    cuptimon__demangler_free(dm);
    for (size_t i = 0; i < w->nsrc; i++) {
        cuptimon__archive_session_clear(&ss[i].as);
        cuptimon__idset_clear(&ss[i].in);
        cuptimon__idset_clear(&ss[i].out);
        cuptimon__idset_clear(&ss[i].rt_before);
    }
    free(ss);
    cuptimon__archive_free_list(gb.dirs);
    return rc;
}
