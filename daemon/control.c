/*
 * The control socket: cuptimonctl's requests.  Each request is one CONTROL
 * frame with a JSON body {"op": ...}; each gets one reply frame, at once or,
 * for a flush or a window's start and end, once that is done.  One table,
 * ctl_ops, names every op with its handler and who may call it.
 * Authorization is on the kernel's word (SO_PEERCRED, read at accept):
 * operators (root, the daemon's own user, members of control_group) see
 * and steer every session; any other user sees and steers only sessions
 * and windows of its own uid, and may not call the operators' ops (reload).
 * That holds for every listing, top and metrics included, and for the
 * text of an error (an unmatched selector lists only the caller's own
 * sessions).  See is_operator() and enum ctl_who; the rules are written
 * down in cuptimond(8), AUTHORIZATION.
 *
 * Anyone may connect, and each connection holds one of the daemon's
 * descriptors, so a user who is not an operator may hold at most
 * max_controls_per_user connections, and never one on a descriptor of the
 * reserve (the top of the table, kept for operators and the daemon's own
 * files: see raise_fd_limit in main.c).  Past either, the connection is
 * answered with the reason at once and closed (refuse_at_accept).  Out of
 * descriptors, such a user's longest-idle connection makes room
 * (control_evict_idle).  See cuptimond(8), Descriptors.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"

struct ctl {
    struct conn *conn;
    int refs;                /* 1: the connection; +1 per reply it waits for */
    int64_t last_ns;         /* when it last sent a request or got a reply */
    int refused;             /* answered with a refusal at accept; closed at its first
                              * request, or CTL_REFUSED_LINGER_NS after the accept */
    struct ctl *prev, *next; /* d->ctls, while connected */
};

/* How long a connection refused over the cap stays open for its client to
 * send its request.  The refusal is sent at accept; closing at once would
 * make a client that connects and then sends (cuptimonctl) fail its send
 * with EPIPE before it reads why.  It holds a descriptor meanwhile, so
 * it is short, and the idle timer (every second) ends it. */
#define CTL_REFUSED_LINGER_NS 1000000000LL

static void ctl_unref(struct ctl *c)
{
    if (--c->refs == 0)
        free(c);
}

/* ---- requests ----------------------------------------------------------- */

static json_object *status_json(struct daemon *d, const struct conn *conn)
{
    json_object *o = json_object_new_object(), *dm = json_object_new_object(),
                *ss = json_object_new_array();
    int64_t now = unix_ns_now();
    json_object_object_add(dm, "version", json_object_new_string(PACKAGE_VERSION));
    json_object_object_add(dm, "protocol", json_object_new_int(CUPTIMON_PROTO_VERSION));
    json_object_object_add(dm, "pid", json_object_new_int64(getpid()));
    json_object_object_add(dm, "started_unix_ns", json_object_new_int64(d->started_unix_ns));
    json_object_object_add(dm, "uptime_s",
                           json_object_new_double((double)(now - d->started_unix_ns) / 1e9));
    json_object_object_add(dm, "producer_socket", json_object_new_string(d->cfg.socket_path));
    json_object_object_add(dm, "control_socket", json_object_new_string(d->cfg.control_path));
    json_object_object_add(dm, "output_dir", json_object_new_string(d->cfg.output_dir));
    json_object_object_add(dm, "archive_dir", json_object_new_string(d->archive_root));
    json_object_object_add(dm, "flush_period_s", json_object_new_double(d->cfg.flush_period_s));
    json_object_object_add(dm, "compress_level", json_object_new_int(d->cfg.compress_level));
    json_object_object_add(dm, "archive_rdelta_fallbacks",
                           json_object_new_int64((int64_t)d->rdelta_fallbacks));
    json_object_object_add(dm, "socket_activated", json_object_new_boolean(d->activated));
    json_object_object_add(dm, "config", json_object_new_string(d->conf_path));
    json_object *ret = json_object_new_object();
    json_object_object_add(ret, "max_bytes", json_object_new_int64((int64_t)d->archive_max_bytes));
    json_object_object_add(ret, "max_age_s", json_object_new_int64((int64_t)d->archive_max_age_s));
    json_object_object_add(ret, "archive_bytes",
                           json_object_new_int64((int64_t)d->last_sweep.bytes_after));
    json_object_object_add(ret, "segments_deleted",
                           json_object_new_int64((int64_t)d->last_sweep.segments_deleted));
    json_object_object_add(ret, "over_cap", json_object_new_boolean(d->last_sweep.over_cap));
    json_object_object_add(ret, "last_sweep_unix_ns", json_object_new_int64(d->last_sweep_ns));
    json_object_object_add(dm, "retention", ret);
    json_object_object_add(dm, "sessions_total", json_object_new_int64((int64_t)d->sessions_total));
    json_object_object_add(dm, "refused_producers",
                           json_object_new_int64((int64_t)d->refused_producers));
    /* The last producers refused and why (a restricted client sees its
     * own): each one's job runs untraced. */
    json_object *rf = json_object_new_array();
    uint64_t first =
        d->refusal_next > DAEMON_REFUSALS_KEPT ? d->refusal_next - DAEMON_REFUSALS_KEPT : 0;
    for (uint64_t k = first; k < d->refusal_next; k++) {
        const struct refusal *r = &d->refusals[k % DAEMON_REFUSALS_KEPT];
        if (conn->restricted && r->uid != (uint32_t)conn->peer.uid)
            continue;
        json_object *e = json_object_new_object();
        json_object_object_add(e, "unix_ns", json_object_new_int64(r->unix_ns));
        json_object_object_add(e, "pid", json_object_new_int64(r->pid));
        json_object_object_add(e, "uid", json_object_new_int64(r->uid));
        json_object_object_add(e, "exe", json_object_new_string(r->exe));
        json_object_object_add(e, "why", json_object_new_string(r->why));
        json_object_array_add(rf, e);
    }
    json_object_object_add(dm, "refused", rf);
    json_object_object_add(dm, "hellos_deferred",
                           json_object_new_int64((int64_t)d->hellos_deferred));
    /* Connections closed for saying no hello (timed out, or made room
     * for a new one when the daemon ran out of descriptors). */
    json_object_object_add(dm, "silent_connections_closed",
                           json_object_new_int64((int64_t)d->silent_closed));
    json_object_object_add(dm, "idle_controls_closed",
                           json_object_new_int64((int64_t)d->ctl_idle_closed));
    /* Control connections of users other than operators: refused over
     * max_controls_per_user, refused because their descriptor lay in the
     * operators' reserve, and idle ones closed to let another in when the
     * daemon was out of descriptors. */
    json_object_object_add(dm, "refused_controls_over_cap",
                           json_object_new_int64((int64_t)d->ctl_refused_over_cap));
    json_object_object_add(dm, "refused_controls_in_reserve",
                           json_object_new_int64((int64_t)d->ctl_refused_in_reserve));
    json_object_object_add(dm, "idle_controls_evicted",
                           json_object_new_int64((int64_t)d->ctl_evicted));
    json_object_object_add(dm, "losses", lossreport_status(d, conn));
    /* Oldest first: the list is kept newest first.  A connection whose
     * hello has not been read yet is no session yet: listed, it would be a
     * "connected" pid that no window can select (a job seen in the moment
     * between its connect and its hello, on a loaded node); counted. */
    size_t n = session_count(d), i = 0, awaiting = 0;
    const struct session **arr = calloc(n ? n : 1, sizeof *arr);
    for (const struct session *s = d->sessions; s && arr; s = s->next) {
        if (conn->restricted && s->peer.uid != conn->peer.uid)
            continue;
        if (s->conn && !s->hello)
            awaiting++;
        else
            arr[i++] = s;
    }
    json_object_object_add(dm, "connections_awaiting_hello",
                           json_object_new_int64((int64_t)awaiting));
    json_object_object_add(o, "daemon", dm);
    while (arr && i > 0)
        json_object_array_add(ss, session_status(arr[--i]));
    free(arr);
    json_object_object_add(o, "sessions", ss);
    return o;
}

/* A pending reply for ops that finish later (windows): the client may be
 * gone by then, so the reply holds a reference on it. */
struct ctl_reply *ctl_reply_hold(struct conn *conn)
{
    struct ctl *c = conn->owner;
    c->refs++;
    return (struct ctl_reply *)c;
}

void ctl_reply_send(struct ctl_reply *r, int ok, json_object *body)
{
    struct ctl *c = (struct ctl *)r;
    c->last_ns = unix_ns_now();
    if (c->conn)
        conn_send_json(c->conn, ok ? CUPTIMON_MSG_REPLY_OK : CUPTIMON_MSG_REPLY_ERROR, body);
    ctl_unref(c);
}

static void flush_reply(struct daemon *d, void *ud, json_object *result)
{
    struct ctl *c = ud;
    if (c->conn)
        conn_send_json(c->conn, CUPTIMON_MSG_REPLY_OK, result);
    ctl_unref(c);
}

/* ---- the ops ------------------------------------------------------------ */

static void op_status(struct daemon *d, struct conn *conn, json_object *req)
{
    (void)req;
    json_object *st = status_json(d, conn);
    /* The node's GPUs, which name no process: shown to everyone. */
    json_object_object_add(st, "gpu_metrics", cuptimon__gpm_status(d->gpm));
    conn_send_json(conn, CUPTIMON_MSG_REPLY_OK, st);
    json_object_put(st);
}

static void op_flush(struct daemon *d, struct conn *conn, json_object *req)
{
    struct ctl *c = conn->owner;
    json_object *v;
    /* "fence" (cuptimonctl flush --wait-running; "forced", its older name,
     * means the same): every record of the work launched so far, waiting
     * for work still running.  Never CUPTI's forced flush, which hands that
     * work's records over incomplete and loses them. */
    int fence = (json_object_object_get_ex(req, "fence", &v) && json_object_get_boolean(v)) ||
                (json_object_object_get_ex(req, "forced", &v) && json_object_get_boolean(v));
    int mode = fence ? CUPTIMON_FLUSH_FENCE : CUPTIMON_FLUSH_PLAIN;
    double timeout = d->cfg.flush_timeout_s;
    if (json_object_object_get_ex(req, "timeout_s", &v)) {
        timeout = json_object_get_double(v);
        if (!(timeout > 0 && timeout <= 600)) {
            conn_send_error(conn, "EINVAL", "timeout_s %g is outside (0, 600]", timeout);
            return;
        }
    }
    c->refs++;
    /* A user who is not an operator flushes their own processes only. */
    uint64_t *ids = NULL;
    size_t nids = 0;
    if (conn->restricted) {
        ids = calloc(session_count(d) + 1, sizeof *ids);
        for (struct session *s = d->sessions; ids && s; s = s->next)
            if (s->peer.uid == conn->peer.uid)
                ids[nids++] = s->id;
    }
    int frc = conn->restricted
                  ? (ids ? flush_some(d, mode, timeout, ids, nids, flush_reply, c) : -ENOMEM)
                  : flush_all(d, mode, timeout, flush_reply, c);
    free(ids);
    if (frc < 0) {
        c->refs--;
        conn_send_error(conn, "ENOMEM", "cannot start the flush");
    }
}

static void op_reload(struct daemon *d, struct conn *conn, json_object *req)
{
    char *err = NULL;
    (void)req;
    if (daemon_reload(d, &err) < 0) {
        conn_send_error(conn, "EINVAL", "%s; the running configuration is kept",
                        err ? err : "reload failed");
    } else {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "reloaded", json_object_new_string(d->conf_path));
        conn_send_json(conn, CUPTIMON_MSG_REPLY_OK, o);
        json_object_put(o);
    }
    free(err);
}

static void op_top(struct daemon *d, struct conn *conn, json_object *req)
{
    struct cuptimon_agg_query q;
    char *err = NULL;
    json_object *r;
    if (!d->agg) {
        conn_send_error(
            conn, "EOPNOTSUPP",
            "live aggregates are off in this daemon "
            "(aggregate is off: --no-aggregate or \"aggregate\": false in cuptimond.conf)");
        return;
    }
    if (cuptimon__agg_query_from_json(req, &q, &err) < 0) {
        conn_send_error(conn, "EINVAL", "%s", err ? err : "bad top request");
        free(err);
        return;
    }
    /* A user who is not an operator sees the aggregates of their own
     * processes only; the reply says so, for the header. */
    q.one_uid = conn->restricted;
    q.uid = conn->peer.uid;
    r = cuptimon__agg_json(d->agg, &q);
    if (!r) {
        conn_send_error(conn, "ENOMEM", "cannot build the top view");
        return;
    }
    if (conn->restricted)
        json_object_object_add(r, "only_uid", json_object_new_int64(conn->peer.uid));
    json_object_object_add(r, "gpu_metrics", cuptimon__gpm_top(d->gpm));
    if (conn_send_json(conn, CUPTIMON_MSG_REPLY_OK, r) < 0)
        conn_send_error(conn, "EFBIG", "the top view does not fit a reply; ask for fewer rows");
    json_object_put(r);
}

static void op_metrics(struct daemon *d, struct conn *conn, json_object *req)
{
    char *text;
    json_object *r;
    (void)req;
    if (!d->agg) {
        conn_send_error(
            conn, "EOPNOTSUPP",
            "live aggregates are off in this daemon "
            "(aggregate is off: --no-aggregate or \"aggregate\": false in cuptimond.conf)");
        return;
    }
    text = cuptimon__agg_prometheus_of(d->agg, conn->restricted ? (int64_t)conn->peer.uid : -1);
    char *gpu = cuptimon__gpm_prometheus(d->gpm, d->conf.metrics_interval_s);
    if (text && gpu && *gpu) {
        char *both = NULL;
        if (asprintf(&both, "%s%s", text, gpu) >= 0) {
            free(text);
            text = both;
        }
    }
    free(gpu);
    if (!text) {
        conn_send_error(conn, "ENOMEM", "cannot build the metrics");
        return;
    }
    r = json_object_new_object();
    json_object_object_add(r, "text", json_object_new_string(text));
    if (conn_send_json(conn, CUPTIMON_MSG_REPLY_OK, r) < 0)
        conn_send_error(conn, "EFBIG",
                        "the metrics are %zu bytes, more than a control reply "
                        "carries; have the daemon write them to metrics_file instead",
                        strlen(text));
    json_object_put(r);
    free(text);
}

/* gpu_metrics {"action": "status" | "pause" | "resume", "device": N (all
 * when absent), "seconds": S (pause: 0 or absent until resumed)}.  Pause
 * and resume are an operator's: they take the node's counters from, or
 * give them to, every other profiler. */
static void op_gpu_metrics(struct daemon *d, struct conn *conn, json_object *req)
{
    json_object *v;
    const char *action =
        json_object_object_get_ex(req, "action", &v) && json_object_is_type(v, json_type_string)
            ? json_object_get_string(v)
            : "status";
    int device = -1;
    double seconds = 0;
    if (json_object_object_get_ex(req, "device", &v)) {
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
            json_object_get_int64(v) > 1024) {
            conn_send_error(conn, "EINVAL", "device must be a GPU's CUDA ordinal");
            return;
        }
        device = (int)json_object_get_int64(v);
    }
    if (json_object_object_get_ex(req, "seconds", &v)) {
        seconds = json_object_get_double(v);
        if (!(seconds >= 0 && seconds <= 7 * 86400)) {
            conn_send_error(conn, "EINVAL", "seconds %g is outside [0, 604800]", seconds);
            return;
        }
    }
    if (strcmp(action, "pause") == 0 || strcmp(action, "resume") == 0) {
        char who[96];
        int rc;
        if (conn->restricted) {
            conn_send_error(conn, "EACCES",
                            "uid %u may not %s the GPU metrics: the GPUs' counters are the "
                            "node's; an operator (root, uid %u, or a member of control_group) "
                            "may",
                            (unsigned)conn->peer.uid, action, (unsigned)geteuid());
            return;
        }
        snprintf(who, sizeof who, "uid %u (pid %d)", (unsigned)conn->peer.uid, (int)conn->peer.pid);
        rc = action[0] == 'p' ? cuptimon__gpm_pause(d->gpm, device, seconds, who)
                              : cuptimon__gpm_resume(d->gpm, device);
        if (rc < 0) {
            conn_send_error(conn, "ENODEV", "no GPU %d is sampled by this daemon", device);
            return;
        }
        char which[32] = "every GPU";
        if (device >= 0)
            snprintf(which, sizeof which, "GPU %d", device);
        log_notice("gpu-metrics", "%s %s %s%s", who,
                   action[0] == 'p' ? "pauses the counters of" : "resumes sampling on", which,
                   action[0] == 'p' && seconds > 0 ? " for a while" : "");
    } else if (strcmp(action, "status") != 0) {
        conn_send_error(conn, "EINVAL", "action \"%.32s\" is not status, pause or resume", action);
        return;
    }
    json_object *st = cuptimon__gpm_status(d->gpm);
    conn_send_json(conn, CUPTIMON_MSG_REPLY_OK, st);
    json_object_put(st);
}

static void op_ping(struct daemon *d, struct conn *conn, json_object *req)
{
    (void)d;
    (void)req;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "version", json_object_new_string(PACKAGE_VERSION));
    conn_send_json(conn, CUPTIMON_MSG_REPLY_OK, o);
    json_object_put(o);
}

/* ---- the op table --------------------------------------------------------
 * One row per control operation, in the order the "unknown op" reply lists
 * them: dispatch, the authorization check and that list all come from it,
 * so none of them can miss an op.  tests/integration/cli.sh and authz.sh
 * read the rows (keep one a line): every op must be sent by some
 * cuptimonctl command or say, in `internal`, who else sends it. */

/* Who may call an op.  Anything but CTL_ANYONE needs an operator, so that a
 * class added later is closed to other users until someone opens it. */
enum ctl_who {
    /* Any user.  For a caller that is not an operator (conn->restricted)
     * the handler limits what it shows and touches to the caller's own
     * uid: status lists, and flush asks, only their sessions; the window
     * ops open windows over their processes only and find, end and list
     * only their windows; top and metrics show the aggregates of their
     * processes only (and the node's devices, which name no process). */
    CTL_ANYONE,
    /* Operators only (root, the daemon's own user, members of
     * control_group): what the op changes is the whole daemon's. */
    CTL_OPERATOR,
};

struct ctl_op {
    const char *name;
    void (*run)(struct daemon *d, struct conn *conn, json_object *req);
    enum ctl_who who;
    const char *internal; /* NULL: a cuptimonctl command sends it; else who does */
};

static const struct ctl_op ctl_ops[] = {
    {"status", op_status, CTL_ANYONE, NULL},
    {"flush", op_flush, CTL_ANYONE, NULL},
    {"reload", op_reload, CTL_OPERATOR, NULL},
    {"ping", op_ping, CTL_ANYONE, "liveness checks of the Python package (cuptimon.ping)"},
    {"top", op_top, CTL_ANYONE, NULL},
    {"metrics", op_metrics, CTL_ANYONE, NULL},
    {"gpu_metrics", op_gpu_metrics, CTL_ANYONE, NULL},
    {"window_prepare", window_op_prepare, CTL_ANYONE, NULL},
    {"window_start", window_op_start, CTL_ANYONE, NULL},
    {"window_begin", window_op_begin, CTL_ANYONE, NULL},
    {"window_end", window_op_end, CTL_ANYONE, NULL},
    {"windows", window_op_list, CTL_ANYONE, NULL},
};

static int may_call(const struct conn *conn, const struct ctl_op *op)
{
    return op->who == CTL_ANYONE || !conn->restricted;
}

static const struct ctl_op *find_op(const char *name)
{
    for (size_t i = 0; i < sizeof ctl_ops / sizeof ctl_ops[0]; i++)
        if (strcmp(ctl_ops[i].name, name) == 0)
            return &ctl_ops[i];
    return NULL;
}

/* "status, flush, ..." into buf: the ops this caller may call, so that a
 * user who is not an operator is not pointed at ops it would be refused
 * (cut short, never overrun, if buf is too small). */
static void op_names(const struct conn *conn, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof ctl_ops / sizeof ctl_ops[0] && used < len; i++) {
        if (!may_call(conn, &ctl_ops[i]))
            continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", ctl_ops[i].name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

static void on_ctl_msg(struct conn *conn, const struct cuptimon_msg_hdr *h, const uint8_t *body,
                       int fd)
{
    struct daemon *d = conn->d;
    struct ctl *c = conn->owner;
    c->last_ns = unix_ns_now();
    if (fd >= 0)
        close(fd);
    /* Its answer, the refusal, went out at accept; the request has come,
     * so the client is reading it. */
    if (c->refused) {
        conn_close(conn);
        return;
    }
    if (h->type != CUPTIMON_MSG_CONTROL) {
        conn_send_error(conn, "EPROTO", "expected a CONTROL message, got %s",
                        cuptimon__type_name(h->type));
        return;
    }
    json_tokener *tok = json_tokener_new();
    json_object *req = json_tokener_parse_ex(tok, (const char *)body, (int)h->length), *v;
    int complete = json_tokener_get_error(tok) == json_tokener_success &&
                   json_tokener_get_parse_end(tok) == h->length;
    json_tokener_free(tok);
    const char *name = NULL;
    if (req && complete && json_object_is_type(req, json_type_object) &&
        json_object_object_get_ex(req, "op", &v) && json_object_is_type(v, json_type_string))
        name = json_object_get_string(v);
    if (!name) {
        conn_send_error(conn, "EINVAL", "the request is not a JSON object with a string \"op\"");
        goto out;
    }
    const struct ctl_op *op = find_op(name);
    if (!op) {
        char known[512];
        op_names(conn, known, sizeof known);
        /* The name is cut so that a long one cannot push the list out of
         * the reply's message. */
        conn_send_error(conn, "EOPNOTSUPP", "unknown op \"%.64s\" (known: %s)", name, known);
        goto out;
    }
    if (!may_call(conn, op)) {
        log_warn("control", "refused: uid %u pid %d asked for %s, which is for operators only",
                 (unsigned)conn->peer.uid, (int)conn->peer.pid, op->name);
        conn_send_error(conn, "EACCES",
                        "uid %u may not use the op \"%s\": it is for "
                        "operators (root, uid %u that cuptimond runs as, and members of its "
                        "control_group); run it as one of them",
                        (unsigned)conn->peer.uid, op->name, (unsigned)geteuid());
        goto out;
    }
    op->run(d, conn, req);
out:
    json_object_put(req);
}

static void on_ctl_close(struct conn *conn)
{
    struct ctl *c = conn->owner;
    struct daemon *d = conn->d;
    if (c->prev)
        c->prev->next = c->next;
    else if (d->ctls == c)
        d->ctls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    c->conn = NULL;
    ctl_unref(c);
}

/* Every few seconds: a control connection that waits for no reply and has
 * sent nothing for control_idle_timeout_s is closed, so that idle clients
 * (anyone may connect) cannot hold the daemon's descriptors.  A client
 * waiting on a flush or a window's end is never idle. */
static void on_ctl_idle_timer(uv_timer_t *t)
{
    struct daemon *d = t->data;
    int64_t now = unix_ns_now();
    int64_t cutoff = now - (int64_t)(d->cfg.control_idle_s * 1e9);
    for (struct ctl *c = d->ctls, *next; c; c = next) {
        next = c->next;
        if (c->refused) {
            /* Counted as refused, not as idle. */
            if (c->conn && c->last_ns < now - CTL_REFUSED_LINGER_NS)
                conn_close(c->conn);
            continue;
        }
        if (c->refs == 1 && c->conn && c->last_ns < cutoff) {
            if (d->ctl_idle_closed++ % 1000 == 0)
                log_info("control",
                         "closed an idle control connection of uid %u pid %d "
                         "(nothing asked for %.0f s; %" PRIu64 " so far)",
                         (unsigned)c->conn->peer.uid, (int)c->conn->peer.pid, d->cfg.control_idle_s,
                         d->ctl_idle_closed);
            conn_close(c->conn);
        }
    }
}

static int is_operator(const struct daemon *d, const struct cuptimon_peer *peer)
{
    if (peer->uid == 0 || peer->uid == geteuid())
        return 1;
    if (d->cfg.control_gid < 0)
        return 0;
    if (peer->gid == (gid_t)d->cfg.control_gid)
        return 1;
    /* Supplementary groups: from the user database, as login would. */
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwuid_r(peer->uid, &pw, buf, sizeof buf, &res) != 0 || !res)
        return 0;
    gid_t groups[256];
    int n = 256;
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) < 0)
        return 0;
    for (int i = 0; i < n; i++)
        if (groups[i] == (gid_t)d->cfg.control_gid)
            return 1;
    return 0;
}

/* The control connections uid holds that are served (refused ones, which
 * are on their way out, do not count). */
static uint64_t ctl_count_of(const struct daemon *d, uid_t uid)
{
    uint64_t n = 0;
    for (const struct ctl *c = d->ctls; c; c = c->next)
        if (c->conn && !c->refused && c->conn->peer.uid == uid)
            n++;
    return n;
}

/* Whether the connection of a user who is not an operator, on descriptor
 * fd, is refused; if so, the error code and the reason (for the client
 * and the log), and it is counted. */
static const char *refuse_at_accept(struct daemon *d, int fd, const struct cuptimon_peer *peer,
                                    char *why, size_t whylen)
{
    uint64_t cap = d->conf.max_controls_per_user, n;
    /* The reserve is for operators: a user who could take it could keep
     * root's status (and the daemon's own files) out of a full table. */
    if (fd_in_reserve(d, fd)) {
        d->ctl_refused_in_reserve++;
        snprintf(why, whylen,
                 "the daemon is short of file descriptors (this connection's, %d, is among "
                 "the last %d of %d, kept for operators); close idle connections and try again",
                 fd, d->fd_reserve, d->fd_limit);
        return "EMFILE";
    }
    if (cap && (n = ctl_count_of(d, peer->uid)) >= cap) {
        d->ctl_refused_over_cap++;
        snprintf(why, whylen,
                 "uid %u already holds %" PRIu64 " control connections to cuptimond, as many as "
                 "max_controls_per_user (%" PRIu64 ") allows; close some and try again, or have "
                 "the administrator raise max_controls_per_user in cuptimond.conf",
                 (unsigned)peer->uid, n, cap);
        return "EUSERS";
    }
    return NULL;
}

void control_accept(struct daemon *d, int fd)
{
    struct cuptimon_peer peer;
    char why[400];
    const char *refusal = NULL;
    if (cuptimon__peer_cred(fd, &peer) < 0) {
        close(fd);
        return;
    }
    /* Operators (root, the daemon's user, the control group) see and steer
     * every session; any other user only their own processes.  The check
     * is on the kernel's word (SO_PEERCRED), never on what a client says. */
    int restricted = !is_operator(d, &peer);
    if (restricted)
        refusal = refuse_at_accept(d, fd, &peer, why, sizeof why);
    /* Logged as the daemon logs its other floods: the first, then every
     * 1000th (status counts them all). */
    if (refusal && (d->ctl_refused_over_cap + d->ctl_refused_in_reserve) % 1000 == 1)
        log_warn("control",
                 "refused a control connection of uid %u pid %d: %s (%" PRIu64 " refused so far)",
                 (unsigned)peer.uid, (int)peer.pid, why,
                 d->ctl_refused_over_cap + d->ctl_refused_in_reserve);
    struct ctl *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
    c->refs = 1;
    c->conn = conn_new(d, fd, on_ctl_msg, on_ctl_close, c);
    if (!c->conn) {
        close(fd);
        free(c);
        return;
    }
    c->last_ns = unix_ns_now();
    c->next = d->ctls;
    if (d->ctls)
        d->ctls->prev = c;
    d->ctls = c;
    if (!d->ctl_idle_timer_on) {
        uv_timer_init(d->loop, &d->ctl_idle_timer);
        d->ctl_idle_timer.data = d;
        uv_timer_start(&d->ctl_idle_timer, on_ctl_idle_timer, 1000, 1000);
        d->ctl_idle_timer_on = 1;
    }
    c->conn->peer = peer;
    c->conn->restricted = restricted;
    if (refusal) {
        /* The answer to whatever the client asks, sent now: a client that
         * says nothing learns why too.  In the reserve the descriptor is
         * given back at once (the client may then see EPIPE on its send,
         * but the reserve stays free); over the cap it lingers until the
         * request comes (on_ctl_msg) or the idle timer ends it. */
        c->refused = 1;
        conn_send_error(c->conn, refusal, "%s", why);
        if (strcmp(refusal, "EMFILE") == 0)
            conn_close(c->conn);
        return;
    }
    if (restricted)
        log_debug("control", "uid %u pid %d: limited to its own sessions", (unsigned)peer.uid,
                  (int)peer.pid);
}

int control_evict_idle(struct daemon *d)
{
    struct ctl *victim = NULL;
    for (struct ctl *c = d->ctls; c; c = c->next) {
        if (!c->conn || c->conn->closing || !c->conn->restricted)
            continue;
        /* A refused connection has had its answer: it goes first. */
        if (c->refused) {
            conn_close(c->conn);
            return 1;
        }
        /* One waiting for a flush or a window's end is not idle. */
        if (c->refs == 1 && (!victim || c->last_ns < victim->last_ns))
            victim = c;
    }
    if (!victim)
        return 0;
    if (d->ctl_evicted++ % 1000 == 0)
        log_notice("control",
                   "out of file descriptors: closed the control connection of uid %u pid %d, "
                   "idle for %.1f s, to let another in (%" PRIu64 " so far)",
                   (unsigned)victim->conn->peer.uid, (int)victim->conn->peer.pid,
                   (double)(unix_ns_now() - victim->last_ns) / 1e9, d->ctl_evicted);
    conn_close(victim->conn);
    return 1;
}

void control_shutdown(struct daemon *d)
{
    /* The barriers still waiting answer now, with what they have: their
     * callbacks reply to the clients (and windows) waiting on them. */
    flush_shutdown(d);
}
