/*
 * Trace windows over many processes, with PyTorch's monitor semantics:
 *   prepare: enable the window's extra activity kinds in every selected
 *            session (processes that join later and match are included);
 *   start:   non-forced flush of the selected sessions, wait, mark the
 *            start time;
 *   end:     mark the end time, disable the extra kinds, then a fence
 *            (flush.c): plain flushes until every session has handed over
 *            every buffer CUPTI held at the end, so that the records of
 *            work launched inside the window and still running at its end
 *            arrive complete, bounded by window_end_timeout_s (or the
 *            request's wait_s); a session that never answers is "late",
 *            one whose work still runs at the bound "running" (its records
 *            still reach the archive, once, when the work ends).  Then
 *            write one trace of what arrived, filtered as window-write.h
 *            says, on a worker thread.  Never a forced flush: it would hand
 *            over the running work's records incomplete and lose them
 *            (docs/gpu-runs/20261204-h200-probe), from the always-on
 *            archive too.
 * The always-on archive keeps running throughout: a window reads the
 * chunks its sessions archived from the prepare on.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cupti-abi.h"
#include "daemon.h"
#include "window-write.h"
#include "archive/json-get.h"

enum wstate {
    W_PREPARED,
    W_STARTING,
    W_ACTIVE,
    W_ENDING,
    W_WRITING,
    W_DONE,
    W_FAILED
};
static const char *const wstate_names[] = {"prepared", "starting", "active", "ending",
                                           "writing",  "done",     "failed"};

#define MAX_KINDS   24
#define MAX_WAITERS 16

struct member {
    uint64_t session;
    pid_t pid;
    uid_t uid;
    char dir[700];
    uint64_t first_chunk, last_chunk;
    uint32_t extra[MAX_KINDS]; /* kinds this window enabled (not always-on) */
    int nextra;
    int late, gone, joined;
    int running; /* its work launched before the end still ran at the end's bound */
};

struct selector {
    int all;
    int all_users; /* a label, job or rank selector may take several users' sessions */
    int64_t pids[64];
    int npids;
    int64_t uid;
    char job[128], rank[32], label[128];
};

struct window {
    struct daemon *d;
    uint64_t id;
    int64_t owner_uid;               /* -1: an operator's window */
    struct cuptimon_requester req;   /* who asked: the trace is theirs; groups malloc'd */
    int user_dir;                    /* req chose the trace's directory (--output) */
    int gpm_fine;                    /* asked the GPU metrics for their window interval */
    struct cuptimon_outdir_id dirid; /* the directory checked at prepare */
    int state;
    struct selector sel;
    uint32_t kinds[MAX_KINDS];
    int nkinds;
    int64_t prepared_ns, start_ns, end_ns, at_ns;
    double duration_s;
    char output[700];
    int gzip_level;          /* 1..9: written gzipped (.json.gz); 0: plain JSON */
    int per_process;         /* also one trace per process */
    double end_wait_s;       /* the end's bound on waiting for running work */
    json_object *end_report; /* how the end's wait went (flush.c's result, trimmed) */
    struct member *m;
    size_t nm, capm;
    uv_timer_t timer;
    int timer_on;
    struct ctl_reply *start_wait[MAX_WAITERS], *end_wait[MAX_WAITERS];
    int nstart_wait, nend_wait;
    json_object *result;
    char *error;
    /* for the worker */
    uv_work_t work;
    struct cuptimon_window_source *src;
    json_object *summary;
    char *werr;
    int wrc;
    struct window *next;
};

static const uint32_t default_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_OVERHEAD,
    CUPTI_ACTIVITY_KIND_CUDA_EVENT,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_MARKER,
    CUPTI_ACTIVITY_KIND_MARKER_DATA, /* NVTX ranges (the shim arranges NVTX injection) */
};

static void send_err(struct conn *c, const char *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void send_err(struct conn *c, const char *e, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    conn_send_error(c, e, "%s", msg);
}

/* ---- selection ---------------------------------------------------------- */

static int parse_selector(json_object *req, struct selector *sel, char *why, size_t wl)
{
    json_object *v;
    memset(sel, 0, sizeof *sel);
    sel->uid = -1;
    int any = 0;
    if (json_object_object_get_ex(req, "pids", &v)) {
        if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) == 0 ||
            json_object_array_length(v) > 64) {
            snprintf(why, wl, "\"pids\" must be a list of 1..64 process ids");
            return -EINVAL;
        }
        for (size_t i = 0; i < json_object_array_length(v); i++) {
            json_object *p = json_object_array_get_idx(v, i);
            if (!json_object_is_type(p, json_type_int)) {
                snprintf(why, wl, "\"pids\" must be a list of 1..64 process ids (integers)");
                return -EINVAL;
            }
            sel->pids[sel->npids++] = json_object_get_int64(p);
        }
        any = 1;
    }
    if (json_object_object_get_ex(req, "uid", &v)) {
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0) {
            snprintf(why, wl, "\"uid\" must be a user id (an integer of 0 or more)");
            return -EINVAL;
        }
        sel->uid = json_object_get_int64(v);
        any = 1;
    }
    /* A selector of the wrong type is an error, never no selector (which
     * would select everything). */
    const struct {
        const char *key;
        char *dst;
        size_t len;
    } strs[] = {{"job", sel->job, sizeof sel->job},
                {"rank", sel->rank, sizeof sel->rank},
                {"label", sel->label, sizeof sel->label}};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        if (!cuptimon__json_get(req, strs[i].key))
            continue;
        const char *s = cuptimon__json_str(req, strs[i].key, NULL);
        if (!s) {
            snprintf(why, wl, "\"%s\" must be a string", strs[i].key);
            return -EINVAL;
        }
        snprintf(strs[i].dst, strs[i].len, "%s", s);
        any = 1;
    }
    if (json_object_object_get_ex(req, "all_users", &v) && json_object_get_boolean(v)) {
        if (sel->uid >= 0) {
            snprintf(why, wl,
                     "--all-users and --uid %" PRId64 " contradict each other; give "
                     "one of them",
                     sel->uid);
            return -EINVAL;
        }
        sel->all_users = 1;
    }
    sel->all = !any;
    return 0;
}

static int matches(const struct selector *sel, const struct session *s)
{
    if (!s->conn || !s->hello)
        return 0;
    if (sel->all)
        return 1;
    if (sel->npids) {
        int hit = 0;
        for (int i = 0; i < sel->npids; i++)
            hit |= sel->pids[i] == s->peer.pid;
        if (!hit)
            return 0;
    }
    if (sel->uid >= 0 && (uid_t)sel->uid != s->peer.uid)
        return 0;
    json_object *job = NULL;
    json_object_object_get_ex(s->hello, "job", &job);
    if (sel->job[0]) {
        const char *a = cuptimon__json_str(job, "slurm_job_id", NULL);
        const char *b = cuptimon__json_str(job, "torchelastic_run_id", NULL);
        if (!(a && strcmp(a, sel->job) == 0) && !(b && strcmp(b, sel->job) == 0))
            return 0;
    }
    if (sel->rank[0] && strcmp(cuptimon__json_str(job, "rank", ""), sel->rank) != 0)
        return 0;
    if (sel->label[0] && strcmp(s->label, sel->label) != 0)
        return 0;
    return 1;
}

/* The connected sessions that conn may steer, for an error's text: a user
 * who is not an operator is told of their own processes only. */
static void describe_sessions(struct daemon *d, const struct conn *conn, char *out, size_t len)
{
    size_t o = 0;
    int n = 0;
    out[0] = '\0';
    for (struct session *s = d->sessions; s && o < len; s = s->next) {
        if (!s->conn || !s->hello || (conn->restricted && s->peer.uid != conn->peer.uid))
            continue;
        json_object *job = NULL;
        json_object_object_get_ex(s->hello, "job", &job);
        const char *rank = cuptimon__json_str(job, "rank", NULL);
        int w = snprintf(out + o, len - o, "%spid %d uid %u%s%s%s%s", n++ ? "; " : "",
                         (int)s->peer.pid, (unsigned)s->peer.uid, s->label[0] ? " label " : "",
                         s->label, rank ? " rank " : "", rank ? rank : "");
        if (w < 0)
            break;
        o += (size_t)w;
    }
    if (!n)
        snprintf(out, len, "%s",
                 conn->restricted ? "none of yours is connected" : "no sessions are connected");
}

/*
 * Labels, job ids and ranks are what a process says of itself (its
 * environment): anyone can start a process labelled like someone else's
 * job.  So an operator's selector made only of them takes the sessions of
 * one user: the one whose connected sessions it matches now, fixed for the
 * window's life (a process of another user that joins later with the same
 * label stays out).  When it matches sessions of several users, the
 * request is refused with their uids, to be narrowed with --uid or widened
 * on purpose with --all-users.  --pid and --uid are the kernel's word and
 * are taken as given.  (A user who is not an operator is pinned to their
 * own uid before this.)  cuptimond(8), AUTHORIZATION, says the same.
 */
static int pin_user(struct daemon *d, struct selector *sel, char *why, size_t wl)
{
    uid_t uids[8];
    size_t nu = 0, more = 0;
    if (sel->all || sel->all_users || sel->npids || sel->uid >= 0)
        return 0;
    for (struct session *s = d->sessions; s; s = s->next) {
        if (!matches(sel, s))
            continue;
        size_t k;
        for (k = 0; k < nu && uids[k] != s->peer.uid; k++)
            ;
        if (k < nu)
            continue;
        if (nu < sizeof uids / sizeof uids[0])
            uids[nu++] = s->peer.uid;
        else
            more++;
    }
    if (nu == 1)
        sel->uid = uids[0];
    if (nu <= 1)
        return 0; /* none: the caller says what exists */
    size_t o =
        (size_t)snprintf(why, wl, "the selector matches sessions of %zu users (uids", nu + more);
    for (size_t k = 0; k < nu && o < wl; k++)
        o += (size_t)snprintf(why + o, wl - o, "%s %u", k ? "," : "", (unsigned)uids[k]);
    if (o < wl)
        snprintf(why + o, wl - o,
                 "%s), and labels, job ids and ranks are what a process says "
                 "of itself: add --uid U to take one user's sessions, or --all-users to take "
                 "every user's",
                 more ? ", ..." : "");
    return -EINVAL;
}

/* ---- kinds -------------------------------------------------------------- */

static int parse_kinds(json_object *req, struct window *w, char *why, size_t wl)
{
    json_object *v;
    w->nkinds = 0;
    if (!json_object_object_get_ex(req, "activities", &v)) {
        for (size_t i = 0; i < sizeof default_kinds / sizeof default_kinds[0]; i++)
            w->kinds[w->nkinds++] = default_kinds[i];
        return 0;
    }
    if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) == 0) {
        snprintf(why, wl, "\"activities\" must be a non-empty list");
        return -EINVAL;
    }
    for (size_t i = 0; i < json_object_array_length(v) && w->nkinds < MAX_KINDS; i++) {
        json_object *e = json_object_array_get_idx(v, i);
        uint32_t k = 0;
        if (json_object_is_type(e, json_type_int)) {
            k = (uint32_t)json_object_get_int(e);
        } else {
            const char *n = json_object_get_string(e);
            if (cuptimon__kind_parse(n, &k) < 0) {
                snprintf(why, wl, "unknown activity kind '%s' (known: %s)", n,
                         cuptimon__kind_words());
                return -EINVAL;
            }
        }
        if (k == 0 || k >= CUPTIMON_ACTIVITY_KIND_LIMIT) {
            snprintf(why, wl, "activity kind %u is out of range", k);
            return -EINVAL;
        }
        w->kinds[w->nkinds++] = k;
    }
    return 0;
}

static int always_on(const struct session *s, uint32_t kind)
{
    json_object *k;
    if (!json_object_object_get_ex(s->hello, "kinds", &k) ||
        !json_object_is_type(k, json_type_array))
        return 0;
    for (size_t i = 0; i < json_object_array_length(k); i++)
        if ((uint32_t)json_object_get_int(json_object_array_get_idx(k, i)) == kind)
            return 1;
    return 0;
}

static void send_kinds(struct session *s, uint16_t type, const uint32_t *kinds, int n)
{
    if (!s->conn || n == 0)
        return;
    json_object *o = json_object_new_object(), *a = json_object_new_array();
    for (int i = 0; i < n; i++)
        json_object_array_add(a, json_object_new_int64(kinds[i]));
    json_object_object_add(o, "kinds", a);
    conn_send_json(s->conn, type, o);
    json_object_put(o);
}

/* ---- members ------------------------------------------------------------ */

static struct session *find_session(struct daemon *d, uint64_t id)
{
    for (struct session *s = d->sessions; s; s = s->next)
        if (s->id == id)
            return s;
    return NULL;
}

static int add_member(struct window *w, struct session *s)
{
    if (w->nm == w->capm) {
        size_t cap = w->capm ? w->capm * 2 : 8;
        struct member *nm = realloc(w->m, cap * sizeof *nm);
        if (!nm)
            return -ENOMEM;
        w->m = nm;
        w->capm = cap;
    }
    struct member *m = &w->m[w->nm++];
    memset(m, 0, sizeof *m);
    m->session = s->id;
    m->pid = s->peer.pid;
    m->uid = s->peer.uid;
    snprintf(m->dir, sizeof m->dir, "%s", s->archive_dir);
    m->first_chunk = s->seq_next;
    m->last_chunk = UINT64_MAX;
    for (int i = 0; i < w->nkinds; i++)
        if (!always_on(s, w->kinds[i]))
            m->extra[m->nextra++] = w->kinds[i];
    s->window = w;
    send_kinds(s, CUPTIMON_MSG_ENABLE, m->extra, m->nextra);
    return 0;
}

static void member_ids(struct window *w, uint64_t **ids, size_t *n)
{
    *ids = calloc(w->nm ? w->nm : 1, sizeof **ids);
    *n = 0;
    for (size_t i = 0; *ids && i < w->nm; i++)
        if (!w->m[i].gone)
            (*ids)[(*n)++] = w->m[i].session;
}

static int is_open(const struct window *w)
{
    return w->state <= W_ACTIVE;
}

/* ---- replies ------------------------------------------------------------ */

static json_object *window_json(const struct window *w)
{
    json_object *o = json_object_new_object(), *p = json_object_new_array();
    json_object_object_add(o, "window", json_object_new_int64((int64_t)w->id));
    json_object_object_add(o, "state", json_object_new_string(wstate_names[w->state]));
    json_object_object_add(o, "prepared_unix_ns", json_object_new_int64(w->prepared_ns));
    json_object_object_add(o, "start_unix_ns", json_object_new_int64(w->start_ns));
    json_object_object_add(o, "end_unix_ns", json_object_new_int64(w->end_ns));
    if (w->at_ns)
        json_object_object_add(o, "at_unix_ns", json_object_new_int64(w->at_ns));
    if (w->duration_s > 0)
        json_object_object_add(o, "duration_s", json_object_new_double(w->duration_s));
    json_object_object_add(o, "output", json_object_new_string(w->output));
    for (size_t i = 0; i < w->nm; i++)
        json_object_array_add(p, json_object_new_int64(w->m[i].pid));
    json_object_object_add(o, "pids", p);
    /* Whose processes joined (each uid once, in the order they joined),
     * and who asked: a label says nothing of a process's user. */
    json_object *u = json_object_new_array();
    for (size_t i = 0; i < w->nm; i++) {
        size_t k;
        for (k = 0; k < i && w->m[k].uid != w->m[i].uid; k++)
            ;
        if (k == i)
            json_object_array_add(u, json_object_new_int64(w->m[i].uid));
    }
    json_object_object_add(o, "uids", u);
    json_object_object_add(o, "requested_by_uid", json_object_new_int64(w->req.uid));
    json_object *k = json_object_new_array();
    for (int i = 0; i < w->nkinds; i++)
        json_object_array_add(k, json_object_new_int64(w->kinds[i]));
    json_object_object_add(o, "kinds", k);
    json_object_object_add(o, "end_timeout_s", json_object_new_double(w->end_wait_s));
    if (w->end_report)
        json_object_object_add(o, "end_wait", json_object_get(w->end_report));
    if (w->result) {
        json_object *pt;
        json_object_object_add(o, "summary", json_object_get(w->result));
        if (json_object_object_get_ex(w->result, "process_traces", &pt))
            json_object_object_add(o, "process_traces", json_object_get(pt));
    }
    if (w->error)
        json_object_object_add(o, "error", json_object_new_string(w->error));
    return o;
}

static void answer(struct ctl_reply **list, int *n, struct window *w)
{
    json_object *o = window_json(w);
    if (w->state == W_FAILED) {
        json_object_object_add(o, "message",
                               json_object_new_string(w->error ? w->error : "failed"));
        json_object_object_add(o, "error", json_object_new_string("EIO"));
    }
    for (int i = 0; i < *n; i++)
        ctl_reply_send(list[i], w->state != W_FAILED, o);
    *n = 0;
    json_object_put(o);
}

/* ---- writing -------------------------------------------------------------- */

static void write_cb(uv_work_t *req)
{
    struct window *w = req->data;
    struct cuptimon_window_spec spec = {.id = w->id,
                                        .start_ns = (uint64_t)w->start_ns,
                                        .end_ns = (uint64_t)w->end_ns,
                                        .src = w->src,
                                        .nsrc = w->nm,
                                        .output = w->output,
                                        .max_events = w->d->cfg.window_max_events,
                                        .gzip_level = w->gzip_level,
                                        .per_process = w->per_process,
                                        .owner = &w->req,
                                        .user_dir = w->user_dir,
                                        .dir = &w->dirid};
    w->wrc = cuptimon__window_write(&spec, &w->summary, &w->werr);
}

static void after_write_cb(uv_work_t *req, int status)
{
    struct window *w = req->data;
    free(w->src);
    w->src = NULL;
    if (status < 0 || w->wrc < 0) {
        w->state = W_FAILED;
        if (!w->error &&
            asprintf(&w->error, "writing the trace %s failed: %s", w->output,
                     w->werr ? w->werr : strerror(-(status < 0 ? status : w->wrc))) < 0)
            w->error = NULL;
        log_err("window", "window %" PRIu64 ": %s", w->id, w->error ? w->error : "failed");
    } else {
        w->state = W_DONE;
        w->result = w->summary;
        w->summary = NULL;
        log_info("window", "window %" PRIu64 ": %zu process(es), trace %s", w->id, w->nm,
                 w->output);
    }
    free(w->werr);
    w->werr = NULL;
    answer(w->end_wait, &w->nend_wait, w);
}

/* Sets a member's late (key "late") or running flag for each pid listed
 * under key in the flush result. */
static void mark_members(struct window *w, json_object *result, const char *key)
{
    json_object *a;
    int late = strcmp(key, "late") == 0;
    if (!json_object_object_get_ex(result, key, &a) || !json_object_is_type(a, json_type_array))
        return;
    for (size_t i = 0; i < json_object_array_length(a); i++) {
        pid_t pid = (pid_t)json_object_get_int64(json_object_array_get_idx(a, i));
        for (size_t k = 0; k < w->nm; k++)
            if (w->m[k].pid == pid)
                *(late ? &w->m[k].late : &w->m[k].running) = 1;
    }
}

static void ended(struct daemon *d, void *ud, json_object *result)
{
    struct window *w = ud;
    static const char *const keep[] = {"late",        "running",    "gone",
                                       "cupti_taken", "elapsed_ms", "fence_flushes"};
    mark_members(w, result, "late");
    mark_members(w, result, "running");
    json_object_put(w->end_report);
    w->end_report = json_object_new_object();
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        json_object *v;
        if (json_object_object_get_ex(result, keep[i], &v))
            json_object_object_add(w->end_report, keep[i], json_object_get(v));
    }
    if (json_object_array_length(json_object_object_get(result, "running")) > 0)
        log_notice("window",
                   "window %" PRIu64 ": %zu process(es) still ran work launched before its end "
                   "after %.1f s (window_end_timeout_s); those records reach the archive when "
                   "the work ends, not this window's trace",
                   w->id, json_object_array_length(json_object_object_get(result, "running")),
                   w->end_wait_s);
    w->src = calloc(w->nm ? w->nm : 1, sizeof *w->src);
    for (size_t i = 0; w->src && i < w->nm; i++) {
        struct member *m = &w->m[i];
        struct session *s = find_session(d, m->session);
        if (s) {
            m->last_chunk = s->seq_next ? s->seq_next - 1 : 0;
            s->window = NULL;
        }
        w->src[i] = (struct cuptimon_window_source){.archive_dir = m->dir,
                                                    .first_chunk = m->first_chunk,
                                                    .last_chunk = s ? m->last_chunk : UINT64_MAX,
                                                    .late = m->late,
                                                    .joined = m->joined,
                                                    .pid = m->pid,
                                                    .uid = m->uid};
    }
    w->state = W_WRITING;
    w->work.data = w;
    if (!w->src || uv_queue_work(d->loop, &w->work, write_cb, after_write_cb) < 0) {
        w->wrc = -ENOMEM;
        after_write_cb(&w->work, 0);
    }
}

static void end_window(struct window *w)
{
    struct daemon *d = w->d;
    if (w->state >= W_ENDING)
        return;
    if (w->timer_on) {
        uv_timer_stop(&w->timer);
    }
    /* The end is when it was asked for: API calls that start after it are
     * not the window's, whatever the wait for running work below. */
    w->end_ns = unix_ns_now();
    if (w->start_ns == 0)
        w->start_ns = w->end_ns; /* ended before it started: an empty window */
    w->state = W_ENDING;
    if (w->gpm_fine) {
        cuptimon__gpm_window(d->gpm, -1);
        w->gpm_fine = 0;
    }
    for (size_t i = 0; i < w->nm; i++) {
        struct session *s = find_session(d, w->m[i].session);
        if (s)
            send_kinds(s, CUPTIMON_MSG_DISABLE, w->m[i].extra, w->m[i].nextra);
    }
    uint64_t *ids;
    size_t n;
    member_ids(w, &ids, &n);
    if (!ids || flush_some(d, CUPTIMON_FLUSH_FENCE, w->end_wait_s, ids, n, ended, w) < 0) {
        json_object *empty = json_object_new_object();
        ended(d, w, empty);
        json_object_put(empty);
    }
    free(ids);
}

static void on_timer(uv_timer_t *t);

static void started(struct daemon *d, void *ud, json_object *result)
{
    struct window *w = ud;
    if (w->state != W_STARTING)
        return;
    w->start_ns = unix_ns_now();
    w->state = W_ACTIVE;
    log_info("window", "window %" PRIu64 " started over %zu process(es)", w->id, w->nm);
    if (w->duration_s > 0) {
        w->timer_on = 1;
        uv_timer_start(&w->timer, on_timer, (uint64_t)(w->duration_s * 1000), 0);
    }
    answer(w->start_wait, &w->nstart_wait, w);
    if (w->nend_wait > 0)
        end_window(w); /* end-window came while it was starting */
}

static void start_window(struct window *w)
{
    uint64_t *ids;
    size_t n;
    w->state = W_STARTING;
    /* The GPUs' counters finer while a window is open (gpu_metrics_window_interval_s). */
    cuptimon__gpm_window(w->d->gpm, +1);
    w->gpm_fine = 1;
    member_ids(w, &ids, &n);
    /* PyTorch's start: a non-forced flush and a wait, so that what was
     * already buffered is behind us, then the start time. */
    if (!ids ||
        flush_some(w->d, CUPTIMON_FLUSH_PLAIN, w->d->cfg.flush_timeout_s, ids, n, started, w) < 0) {
        json_object *empty = json_object_new_object();
        started(w->d, w, empty);
        json_object_put(empty);
    }
    free(ids);
}

static void on_timer(uv_timer_t *t)
{
    struct window *w = t->data;
    if (w->state == W_PREPARED && w->at_ns)
        start_window(w);
    else if (w->state == W_ACTIVE)
        end_window(w);
}

/* ---- ops ------------------------------------------------------------------
 * Called from control.c's op table, which lets any user call them: a caller
 * that is not an operator (conn->restricted) opens windows over its own
 * processes only, and finds, ends and lists only the windows it opened. */

/* A window an operator opened has owner_uid -1, so that it is never shown
 * to a user who is not one. */
static int may_see(const struct conn *conn, const struct window *w)
{
    return !conn->restricted || w->owner_uid == (int64_t)conn->peer.uid;
}

static struct window *find_window(struct daemon *d, const struct conn *conn, json_object *req,
                                  char *why, size_t wl)
{
    json_object *v;
    if (json_object_object_get_ex(req, "window", &v)) {
        uint64_t id = (uint64_t)json_object_get_int64(v);
        for (struct window *w = d->windows; w; w = w->next)
            if (w->id == id && may_see(conn, w))
                return w;
        snprintf(why, wl, "there is no window %" PRIu64 "%s", id,
                 conn->restricted ? " of yours" : "");
        return NULL;
    }
    /* No id: the newest window this client may see. */
    for (struct window *w = d->windows; w; w = w->next)
        if (may_see(conn, w))
            return w;
    snprintf(why, wl, "there is no window (open one with begin-window)");
    return NULL;
}

/* OUTPUT_DIR/windows, where traces go by default, into dir.  A trace
 * written for a user other than the daemon's is theirs (window-output.h),
 * and they reach it by its name: the directory and OUTPUT_DIR get search
 * permission for everyone (never read: no one lists another's traces).
 * Only what the daemon owns is changed; a failure shows in the check. */
static void windows_dir(struct daemon *d, uid_t for_uid, char *dir, size_t len)
{
    struct stat st;
    snprintf(dir, len, "%s/windows", d->cfg.output_dir);
    (void)cuptimon__mkdir_p(dir, 0711);
    if (for_uid == geteuid())
        return;
    const char *paths[] = {d->cfg.output_dir, dir};
    for (size_t i = 0; i < 2; i++)
        if (stat(paths[i], &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
            (st.st_mode & 0111) != 0111 && chmod(paths[i], (st.st_mode & 07777) | 0111) < 0)
            log_warn("window", "cannot make %s searchable for the user of a trace: %s", paths[i],
                     strerror(errno));
}

/* Checks w->output for w->req by window-output.h's rules, with the user's
 * groups from the user database (as login would give them), which the
 * window keeps for the check again when the trace is written. */
static int check_output(struct window *w, char *why, size_t wl)
{
    gid_t groups[256];
    int n = 0;
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (w->user_dir && getpwuid_r(w->req.uid, &pw, buf, sizeof buf, &res) == 0 && res) {
        n = 256;
        if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) < 0)
            n = 0; /* more than 256: only the primary groups count */
    }
    if (n > 0) {
        gid_t *keep = malloc((size_t)n * sizeof *keep);
        if (!keep) {
            snprintf(why, wl, "out of memory");
            return -ENOMEM;
        }
        memcpy(keep, groups, (size_t)n * sizeof *keep);
        w->req.groups = keep;
        w->req.ngroups = (size_t)n;
    }
    return cuptimon__outpath_check(w->output, &w->req, w->user_dir, &w->dirid, why, wl);
}

/* A request's bound on the end's wait for running work (seconds). */
static int parse_end_timeout(json_object *v, double *out, char *why, size_t wl)
{
    double s = json_object_get_double(v);
    if (!(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)) ||
        !(s > 0 && s <= 3600)) {
        snprintf(why, wl,
                 "end timeout %s is not a number of seconds in (0, 3600] (how long the "
                 "window's end waits for work still running)",
                 json_object_to_json_string(v));
        return -EINVAL;
    }
    *out = s;
    return 0;
}

static void prepare(struct daemon *d, struct conn *conn, json_object *req, int begin)
{
    char why[2048];
    struct window *w = calloc(1, sizeof *w);
    json_object *v;
    if (!w) {
        send_err(conn, "ENOMEM", "out of memory");
        return;
    }
    w->d = d;
    w->owner_uid = -1;
    if (parse_selector(req, &w->sel, why, sizeof why) < 0 ||
        parse_kinds(req, w, why, sizeof why) < 0) {
        send_err(conn, "EINVAL", "%s", why);
        free(w);
        return;
    }
    if (conn->restricted) {
        /* Any user may open a window over their own processes only. */
        uid_t me = conn->peer.uid;
        if (w->sel.all_users) {
            send_err(conn, "EACCES",
                     "uid %u may open windows over its own processes only, "
                     "not --all-users",
                     (unsigned)me);
            free(w);
            return;
        }
        if (w->sel.uid >= 0 && (uid_t)w->sel.uid != me) {
            log_warn("window", "refused: uid %u pid %d asked for a window over uid %" PRId64,
                     (unsigned)me, (int)conn->peer.pid, w->sel.uid);
            send_err(conn, "EACCES",
                     "uid %u may open windows over its own processes only, not "
                     "uid %" PRId64,
                     (unsigned)me, w->sel.uid);
            free(w);
            return;
        }
        for (int i = 0; i < w->sel.npids; i++) {
            for (struct session *s = d->sessions; s; s = s->next) {
                if (s->peer.pid == w->sel.pids[i] && s->peer.uid != me) {
                    log_warn("window",
                             "refused: uid %u pid %d asked for a window over pid %d "
                             "of uid %u",
                             (unsigned)me, (int)conn->peer.pid, (int)s->peer.pid,
                             (unsigned)s->peer.uid);
                    send_err(conn, "EACCES",
                             "pid %d is not yours (uid %u): uid %u may open "
                             "windows over its own processes only",
                             (int)s->peer.pid, (unsigned)s->peer.uid, (unsigned)me);
                    free(w);
                    return;
                }
            }
        }
        w->sel.uid = me;
        w->sel.all = 0;
        w->owner_uid = me;
    }
    if (json_object_object_get_ex(req, "duration_s", &v)) {
        w->duration_s = json_object_get_double(v);
        if (!(w->duration_s > 0 && w->duration_s <= 86400)) {
            send_err(conn, "EINVAL", "duration %g s is outside (0, 86400]", w->duration_s);
            free(w);
            return;
        }
    }
    if (json_object_object_get_ex(req, "at_unix_ns", &v)) {
        w->at_ns = json_object_get_int64(v);
        int64_t now = unix_ns_now();
        if (w->at_ns < now - 1000000000LL || w->at_ns > now + 86400LL * 1000000000LL) {
            send_err(conn, "EINVAL",
                     "--at %" PRId64 " is in the past or more than a day ahead "
                     "(now is %" PRId64 ")",
                     w->at_ns, now);
            free(w);
            return;
        }
    }
    if (pin_user(d, &w->sel, why, sizeof why) < 0) {
        send_err(conn, "EINVAL", "%s", why);
        free(w);
        return;
    }
    /* Match first: an empty selection says what exists; an overlap says
     * which window holds the session. */
    size_t n = 0;
    for (struct session *s = d->sessions; s; s = s->next) {
        if (!matches(&w->sel, s))
            continue;
        if (s->window && is_open(s->window) && !may_see(conn, s->window)) {
            send_err(conn, "EBUSY",
                     "pid %d is already in an operator's open window, which "
                     "only an operator can end",
                     (int)s->peer.pid);
            free(w);
            return;
        }
        if (s->window && is_open(s->window)) {
            send_err(conn, "EBUSY",
                     "pid %d is already in open window %" PRIu64
                     "; end it first (cuptimonctl end-window %" PRIu64 ")",
                     (int)s->peer.pid, s->window->id, s->window->id);
            free(w);
            return;
        }
        n++;
    }
    if (n == 0 && !w->sel.all) {
        char have[1500];
        describe_sessions(d, conn, have, sizeof have);
        send_err(conn, "ENOENT", "the selector matches no session; sessions: %s", have);
        free(w);
        return;
    }
    w->id = ++d->next_window_id;
    w->prepared_ns = unix_ns_now();
    const char *out = cuptimon__json_str(req, "output", NULL);
    if (out && *out && conn->restricted) {
        /* The daemon writes the trace with its own rights: only an
         * operator may say where. */
        log_warn("window", "refused: uid %u pid %d asked for the trace at %s",
                 (unsigned)conn->peer.uid, (int)conn->peer.pid, out);
        send_err(conn, "EACCES",
                 "only operators may choose where the daemon writes a trace "
                 "(--output %s); without it the trace goes to %s/windows/",
                 out, d->cfg.output_dir);
        free(w);
        return;
    }
    if (out && *out && (out[0] != '/' || strlen(out) >= sizeof w->output)) {
        send_err(conn, "EINVAL", "the trace path must be absolute and under %zu bytes: %s",
                 sizeof w->output, out);
        free(w);
        return;
    }
    /* gzip: the request's level (begin-window --gzip N), else the
     * configuration's window_gzip_level.  A path the user chose decides by
     * its name, as decode -o does: FILE.gz is gzipped (at level 1 when the
     * level says plain), any other name is plain JSON. */
    w->gzip_level = d->conf.window_gzip_level;
    w->end_wait_s = d->conf.window_end_timeout_s;
    if (json_object_object_get_ex(req, "end_timeout_s", &v) &&
        parse_end_timeout(v, &w->end_wait_s, why, sizeof why) < 0) {
        send_err(conn, "EINVAL", "%s", why);
        free(w);
        return;
    }
    w->per_process = d->conf.window_per_process;
    if (json_object_object_get_ex(req, "per_process", &v)) {
        if (!json_object_is_type(v, json_type_boolean)) {
            send_err(conn, "EINVAL", "per_process %s is not true or false",
                     json_object_to_json_string(v));
            free(w);
            return;
        }
        w->per_process = json_object_get_boolean(v);
    }
    if (json_object_object_get_ex(req, "gzip_level", &v)) {
        int64_t lv = cuptimon__json_integer(req, "gzip_level", -1);
        if (lv < 0 || lv > 9) {
            send_err(conn, "EINVAL", "gzip level %s is not an integer from 0 (plain JSON) to 9",
                     json_object_to_json_string(v));
            free(w);
            return;
        }
        w->gzip_level = (int)lv;
    }
    if (out && *out) {
        size_t ol = strlen(out);
        int gz_name = ol > 3 && strcmp(out + ol - 3, ".gz") == 0;
        w->gzip_level = gz_name ? (w->gzip_level > 0 ? w->gzip_level : 1) : 0;
    }
    w->req = (struct cuptimon_requester){.uid = conn->peer.uid, .gid = conn->peer.gid};
    if (out && *out) {
        snprintf(w->output, sizeof w->output, "%s", out);
        w->user_dir = 1;
    } else {
        char dir[620];
        time_t secs = (time_t)(w->prepared_ns / 1000000000);
        struct tm tm;
        gmtime_r(&secs, &tm);
        windows_dir(d, w->req.uid, dir, sizeof dir);
        snprintf(w->output, sizeof w->output,
                 "%s/window-%" PRIu64 "-%04d%02d%02dT%02d%02d%02dZ.json%s", dir, w->id,
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 w->gzip_level > 0 ? ".gz" : "");
    }
    int orc = check_output(w, why, sizeof why);
    if (orc < 0) {
        log_warn("window", "refused: uid %u pid %d: %s", (unsigned)conn->peer.uid,
                 (int)conn->peer.pid, why);
        send_err(conn,
                 orc == -EACCES                     ? "EACCES"
                 : orc == -EEXIST || orc == -EISDIR ? "EEXIST"
                                                    : "EINVAL",
                 "%s", why);
        free((void *)w->req.groups);
        free(w);
        return;
    }
    uv_timer_init(d->loop, &w->timer);
    w->timer.data = w;
    w->next = d->windows;
    d->windows = w;
    w->state = W_PREPARED;
    for (struct session *s = d->sessions; s; s = s->next)
        if (matches(&w->sel, s))
            add_member(w, s);
    log_info("window", "window %" PRIu64 " prepared over %zu process(es)", w->id, w->nm);
    if (!begin) {
        json_object *o = window_json(w);
        conn_send_json(conn, CUPTIMON_MSG_REPLY_OK, o);
        json_object_put(o);
        return;
    }
    if (w->at_ns) {
        /* Aligned start: reply now; the start happens at the given time,
         * never before it: the delay is rounded up to the timer's
         * milliseconds and counted from now, not from the loop's cached
         * time (windows.sh saw a start 0.3 ms before --at). */
        int64_t delay = (w->at_ns - unix_ns_now() + 999999) / 1000000;
        uv_update_time(d->loop);
        w->timer_on = 1;
        uv_timer_start(&w->timer, on_timer, delay > 0 ? (uint64_t)delay : 0, 0);
        json_object *o = window_json(w);
        conn_send_json(conn, CUPTIMON_MSG_REPLY_OK, o);
        json_object_put(o);
        return;
    }
    w->start_wait[w->nstart_wait++] = ctl_reply_hold(conn);
    start_window(w);
}

void window_op_start(struct daemon *d, struct conn *conn, json_object *req)
{
    char why[200];
    struct window *w = find_window(d, conn, req, why, sizeof why);
    if (!w) {
        send_err(conn, "ENOENT", "%s", why);
        return;
    }
    if (w->state != W_PREPARED) {
        send_err(conn, "EINVAL", "window %" PRIu64 " is %s, not prepared", w->id,
                 wstate_names[w->state]);
        return;
    }
    if (w->nstart_wait < MAX_WAITERS)
        w->start_wait[w->nstart_wait++] = ctl_reply_hold(conn);
    start_window(w);
}

void window_op_end(struct daemon *d, struct conn *conn, json_object *req)
{
    char why[200];
    struct window *w = find_window(d, conn, req, why, sizeof why);
    if (!w) {
        send_err(conn, "ENOENT", "%s", why);
        return;
    }
    if (w->state == W_DONE || w->state == W_FAILED) {
        /* Ended by itself (--duration) or already ended: the result. */
        json_object *o = window_json(w);
        conn_send_json(conn, w->state == W_DONE ? CUPTIMON_MSG_REPLY_OK : CUPTIMON_MSG_REPLY_ERROR,
                       o);
        json_object_put(o);
        return;
    }
    if (w->nend_wait >= MAX_WAITERS) {
        send_err(conn, "EBUSY", "too many clients wait for window %" PRIu64, w->id);
        return;
    }
    json_object *v;
    if (w->state < W_ENDING && json_object_object_get_ex(req, "end_timeout_s", &v) &&
        parse_end_timeout(v, &w->end_wait_s, why, sizeof why) < 0) {
        send_err(conn, "EINVAL", "%s", why);
        return;
    }
    w->end_wait[w->nend_wait++] = ctl_reply_hold(conn);
    if (w->state == W_STARTING) {
        /* Let the start finish first; it answers its waiters, then end. */
        return;
    }
    end_window(w);
}

void window_op_prepare(struct daemon *d, struct conn *conn, json_object *req)
{
    prepare(d, conn, req, 0);
}

void window_op_begin(struct daemon *d, struct conn *conn, json_object *req)
{
    prepare(d, conn, req, 1);
}

void window_op_list(struct daemon *d, struct conn *conn, json_object *req)
{
    json_object *o = json_object_new_object(), *a = json_object_new_array();
    (void)req;
    for (struct window *w = d->windows; w; w = w->next)
        if (may_see(conn, w))
            json_object_array_add(a, window_json(w));
    json_object_object_add(o, "windows", a);
    conn_send_json(conn, CUPTIMON_MSG_REPLY_OK, o);
    json_object_put(o);
}

void window_session_joined(struct daemon *d, struct session *s)
{
    /* A process that joins the node during a window is included if it
     * matches; it joined after the start, so everything it sends counts. */
    for (struct window *w = d->windows; w; w = w->next) {
        if (is_open(w) && matches(&w->sel, s)) {
            add_member(w, s);
            w->m[w->nm - 1].first_chunk = 0;
            w->m[w->nm - 1].joined = 1;
            log_info("window", "window %" PRIu64 ": pid %d joined", w->id, (int)s->peer.pid);
            return;
        }
    }
}

void window_session_gone(struct daemon *d, struct session *s)
{
    struct window *w = s->window;
    if (!w)
        return;
    for (size_t i = 0; i < w->nm; i++) {
        if (w->m[i].session == s->id) {
            w->m[i].gone = 1;
            w->m[i].last_chunk = s->seq_next ? s->seq_next - 1 : 0;
        }
    }
    s->window = NULL;
}

static void on_window_timer_closed(uv_handle_t *h)
{
    struct window *w = h->data;
    json_object_put(w->result);
    json_object_put(w->summary);
    json_object_put(w->end_report);
    free(w->error);
    free(w->werr);
    free(w->m);
    free((void *)w->req.groups);
    free(w);
}

void window_shutdown(struct daemon *d)
{
    while (d->windows) {
        struct window *w = d->windows;
        if (w->state == W_WRITING)
            return; /* the worker finishes first; called again later */
        d->windows = w->next;
        if (w->state != W_DONE && w->state != W_FAILED) {
            w->state = W_FAILED;
            if (!w->error)
                w->error = strdup("the daemon is shutting down");
            answer(w->start_wait, &w->nstart_wait, w);
            answer(w->end_wait, &w->nend_wait, w);
        }
        uv_timer_stop(&w->timer);
        uv_close((uv_handle_t *)&w->timer, on_window_timer_closed);
    }
}
