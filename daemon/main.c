/*
 * cuptimond: the node daemon.  Startup is a straight chain of return codes;
 * errors at startup are fatal, errors at run time are logged and the
 * daemon keeps serving.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon.h"
#include "gpm-set.h"
#include "layouts.h"

#ifdef HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#else
static int sd_listen_fds(int unset)
{
    (void)unset;
    return 0;
}
static int sd_is_socket_unix(int fd, int type, int listening, const char *path, size_t len)
{
    (void)fd;
    (void)type;
    (void)listening;
    (void)path;
    (void)len;
    return 0;
}
static int sd_notify(int unset, const char *state)
{
    (void)unset;
    (void)state;
    return 0;
}
static int sd_notifyf(int unset, const char *fmt, ...)
{
    (void)unset;
    (void)fmt;
    return 0;
}
static int sd_watchdog_enabled(int unset, uint64_t *usec)
{
    (void)unset;
    (void)usec;
    return 0;
}
#define SD_LISTEN_FDS_START 3
#endif

static void usage(FILE *f)
{
    fprintf(f, "Usage: cuptimond [OPTION]...\n"
               "Keep CUPTI activity tracing on for every CUDA process of this node that runs\n"
               "the cuptimon shim (libcuptimon.so), archive what they produce, and serve\n"
               "cuptimonctl.\n"
               "\n"
               "Options:\n"
               "  -s, --socket=PATH          producer socket the shims connect to\n"
               "                             (default: RUNTIME/" CUPTIMON_PRODUCER_SOCKET_NAME ")\n"
               "  -c, --control-socket=PATH  control socket for cuptimonctl\n"
               "                             (default: RUNTIME/" CUPTIMON_CONTROL_SOCKET_NAME ")\n"
               "  -o, --output-dir=DIR       where the archive goes (default: /var/lib/cuptimon\n"
               "                             for root, else $XDG_DATA_HOME/cuptimon or\n"
               "                             ~/.local/share/cuptimon); sessions are written\n"
               "                             under DIR/archive/\n"
               "  -f, --flush-period=SECONDS periodic non-forced flush of every session,\n"
               "                             staggered over the period; 0 = never (default 1)\n"
               "      --segment-size=BYTES   rotate archive segments past this size, with an\n"
               "                             optional K/M/G/T suffix, 1M..64G (default 64M)\n"
               "  -z, --compress-level=N     zstd level for archive chunks, 0 = store raw\n"
               "                             (default 1)\n"
               "  -l, --log-level=LEVEL      err, warning, notice, info or debug (default info)\n"
               "  -g, --control-group=GROUP  members of GROUP may control every session (as\n"
               "                             root and the daemon's own user may); any other\n"
               "                             user sees and steers only their own processes\n"
               "      --no-aggregate         keep no live per-kernel aggregates: `cuptimonctl\n"
               "                             top` and the metrics file are then off\n"
               "      --metrics-file=FILE    rewrite FILE (an absolute path) with the live\n"
               "                             aggregates in Prometheus text format, for\n"
               "                             node_exporter's textfile collector (default: none)\n"
               "      --metrics-interval=SECONDS  how often FILE is rewritten, 1..3600\n"
               "                             (default 15)\n"
               "      --config=FILE          the configuration file (default:\n"
               "                             /etc/cuptimon/cuptimond.conf for root, else\n"
               "                             ~/.config/cuptimon/cuptimond.conf); options given\n"
               "                             here win over it; SIGHUP re-reads it\n"
               "      --check-config         print the effective configuration and exit\n"
               "  -h, --help                 show this help and exit\n"
               "  -V, --version              show the version and exit\n"
               "\n"
               "RUNTIME is $XDG_RUNTIME_DIR/cuptimon when XDG_RUNTIME_DIR is set, else\n"
               "/run/cuptimon for root, else /tmp/cuptimon-UID.  Shims find the socket there\n"
               "by the same rule, or through CUPTIMON_SOCKET.\n"
               "\n"
               "Signals: SIGTERM and SIGINT flush every session, finish writing and exit;\n"
               "SIGHUP re-reads the configuration (a bad one is reported and the old kept).\n"
               "Logs go to standard error.  See cuptimond(8).\n");
}

static int default_output_dir(char *out, size_t len)
{
    const char *v;
    int n;
    if (geteuid() == 0)
        n = snprintf(out, len, "%s/lib/cuptimon", LOCALSTATEDIR);
    else if ((v = getenv("XDG_DATA_HOME")) && v[0] == '/')
        n = snprintf(out, len, "%s/cuptimon", v);
    else if ((v = getenv("HOME")) && v[0] == '/')
        n = snprintf(out, len, "%s/.local/share/cuptimon", v);
    else
        return -ENOENT;
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int parent_dir(const char *path, char *out, size_t len)
{
    snprintf(out, len, "%s", path);
    char *slash = strrchr(out, '/');
    if (!slash || slash == out)
        return -EINVAL;
    *slash = '\0';
    return 0;
}

/* The listen queue.  While the daemon is stopped, swapped out or behind,
 * the kernel queues connections up to this many and refuses the rest
 * (EAGAIN): at 128, a burst of short jobs during a stall of a few seconds
 * overflowed it, and jobs that exit gave up after their exit bound.  The
 * kernel caps it at net.core.somaxconn (4096 by default since Linux 5.4). */
#define LISTEN_BACKLOG 4096

/* Binds a listening socket at path.  A stale socket file (nobody accepts on
 * it) is replaced; a live one means another daemon runs: that is fatal. */
static int listen_at(const char *path, mode_t mode)
{
    struct sockaddr_un sa;
    char dir[600];
    int rc = cuptimon__sockaddr(&sa, path);
    if (rc < 0) {
        fprintf(stderr, "cuptimond: socket path '%s' is too long (at most %zu bytes)\n", path,
                sizeof sa.sun_path - 1);
        return rc;
    }
    if (parent_dir(path, dir, sizeof dir) == 0 && (rc = cuptimon__mkdir_p(dir, 0755)) < 0) {
        fprintf(stderr, "cuptimond: cannot create %s for socket %s: %s\n", dir, path,
                strerror(-rc));
        return rc;
    }
    int probe = cuptimon__connect(path, 1);
    if (probe >= 0) {
        close(probe);
        fprintf(stderr, "cuptimond: another daemon is already listening on %s\n", path);
        return -EADDRINUSE;
    }
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    mode_t old = umask(0777 & ~mode);
    rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
        rc = -errno;
        fprintf(stderr, "cuptimond: cannot listen on %s: %s\n", path, strerror(-rc));
        close(fd);
        return rc;
    }
    return fd;
}

static void on_listen(uv_poll_t *p, int status, int events);

static void on_accept_resume(uv_timer_t *t)
{
    struct daemon *d = t->data;
    if (d->stopping)
        return;
    if (d->accept_paused & 1)
        uv_poll_start(&d->listen_poll, UV_READABLE, on_listen);
    if (d->accept_paused & 2)
        uv_poll_start(&d->control_poll, UV_READABLE, on_listen);
    d->accept_paused = 0;
}

static void on_listen(uv_poll_t *p, int status, int events)
{
    struct daemon *d = p->data;
    int is_control = p == &d->control_poll;
    int lfd = is_control ? d->control_fd : d->listen_fd;
    /* A few at a time, so that the control socket gets its turn in the same
     * loop iteration when producers crowd in. */
    for (int i = 0; i < (is_control ? 64 : 8) && !d->stopping; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of descriptors.  Connections that have said nothing
                 * make room first (their descriptors are free once this
                 * loop iteration has closed them, and the listener fires
                 * again): a client that holds idle connections cannot keep
                 * out a producer or the operator.  When there are none the
                 * connection stays queued and the listener would fire again
                 * at once: stop listening for a moment instead of
                 * spinning, and say so once a minute. */
                int made = session_make_room(d, NULL);
                /* On the control socket an operator may be waiting: a
                 * control connection of another user that is idle makes
                 * room too (operators' never are closed for this). */
                if (!made && is_control)
                    made = control_evict_idle(d);
                if (made)
                    return;
                static int64_t last;
                if (unix_ns_now() - last > 60000000000LL) {
                    log_err("listen",
                            "accept on %s: %s; pausing new connections for 200 ms "
                            "(raise the fd limit, or look for clients that hold connections)",
                            is_control ? d->cfg.control_path : d->cfg.socket_path, strerror(errno));
                    last = unix_ns_now();
                }
                uv_poll_stop(p);
                d->accept_paused |= is_control ? 2 : 1;
                uv_timer_start(&d->accept_timer, on_accept_resume, 200, 0);
            } else if (errno != EAGAIN && errno != EINTR) {
                log_warn("listen", "accept on %s failed: %s",
                         is_control ? d->cfg.control_path : d->cfg.socket_path, strerror(errno));
            }
            return;
        }
        if (is_control) {
            control_accept(d, fd);
            /* In the reserve: a connection refused there is closed, but
             * its descriptor is free only once this loop iteration has
             * run its close callbacks.  Accepting on would fill the
             * reserve with those and make EMFILE close someone's idle
             * connection for nothing: the rest wait for the next turn. */
            if (fd_in_reserve(d, fd))
                return;
            continue;
        }
        session_accept(d, fd);
        /* Into the reserve: this one is served (its hello is refused, to
         * try again), and the next wait a moment in the listen queue. */
        if (fd_in_reserve(d, fd)) {
            uv_poll_stop(p);
            d->accept_paused |= 1;
            uv_timer_start(&d->accept_timer, on_accept_resume, 200, 0);
            return;
        }
    }
}

/* The watchdog is fed from the loop itself, so a stuck loop is noticed. */
static void on_watchdog(uv_timer_t *t)
{
    struct daemon *d = t->data;
    sd_notifyf(0, "WATCHDOG=1\nSTATUS=%zu sessions", session_count(d));
}

/* ---- configuration -------------------------------------------------------- */

static void set_err(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_err(char **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(err, fmt, ap) < 0)
        *err = NULL;
    va_end(ap);
}

/* The effective configuration: defaults, then the file, then the keys given
 * on the command line, then the checks across keys.  Startup and every
 * reload take the same steps, so that an option keeps winning over the
 * file.  Returns 0; -ENOENT when there is no file (*c then holds the
 * defaults and the options); any other -errno with *err, a malloc'd
 * message, set (*err is NULL on entry). */
static int config_read(const struct daemon *d, struct cuptimon_config *c, char **err)
{
    char *kerr = NULL;
    int rc;
    cuptimon__config_defaults(c);
    int file_rc = d->conf_path[0] ? cuptimon__config_load(d->conf_path, c, err) : -ENOENT;
    if (file_rc < 0 && file_rc != -ENOENT)
        return file_rc;
    for (size_t i = 0; i < d->ncli; i++) {
        if ((rc = cuptimon__config_set(c, d->cli[i].key, d->cli[i].value, &kerr)) < 0) {
            set_err(err, "--%s: %s", d->cli[i].option, kerr ? kerr : strerror(-rc));
            free(kerr);
            return rc;
        }
    }
    /* The file was checked on its own; the options may upset it (a
     * --segment-size above the file's archive_max_bytes). */
    if (d->ncli > 0 && (rc = cuptimon__config_check(c, &kerr)) < 0) {
        set_err(err, "the command line's options over %s: %s",
                file_rc == 0 ? d->conf_path : "the defaults", kerr ? kerr : strerror(-rc));
        free(kerr);
        return rc;
    }
    return file_rc;
}

/* Puts c in effect for the values the running daemon reads.  The paths and
 * the aggregates are taken once, at startup (resolve_paths, start_loop). */
void daemon_gpm_config(const struct cuptimon_config *c, struct cuptimon_gpm_config *g)
{
    memset(g, 0, sizeof *g);
    g->enabled = c->gpu_metrics;
    g->interval_s = c->gpu_metrics_interval_s;
    g->window_interval_s = c->gpu_metrics_window_interval_s;
    g->retry_s = c->gpu_metrics_retry_s;
    snprintf(g->set, sizeof g->set, "%s", c->gpu_metrics_set);
    snprintf(g->yield_to, sizeof g->yield_to, "%s", c->gpu_metrics_yield_to);
    snprintf(g->libcupti, sizeof g->libcupti, "%s", c->gpu_metrics_libcupti);
    snprintf(g->libcuda, sizeof g->libcuda, "%s", c->gpu_metrics_libcuda);
}

static void use_config(struct daemon *d, const struct cuptimon_config *c)
{
    d->conf = *c;
    cuptimon__log_init(c->log_level);
    d->cfg.flush_period_s = c->flush_period_s;
    d->cfg.segment_bytes = c->segment_size;
    d->cfg.compress_level = c->compress_level;
    d->cfg.control_gid = c->has_control_gid ? (long)c->control_gid : -1;
    d->cfg.flush_timeout_s = c->flush_timeout_s;
    d->cfg.window_max_events = c->window_max_events;
    d->cfg.control_idle_s = c->control_idle_s;
    d->cfg.max_pool_bytes = c->max_pool_bytes;
    d->cfg.max_sessions_per_user = c->max_sessions_per_user;
    d->archive_max_bytes = c->archive_max_bytes;
    d->archive_max_age_s = c->archive_max_age_s;
    d->retention_period_s = c->retention_period_s;
    /* Before the loop runs the timers are not started yet (a zeroed handle
     * is not active); start_loop reads the periods itself then. */
    if (uv_is_active((uv_handle_t *)&d->retention_timer))
        uv_timer_set_repeat(&d->retention_timer, (uint64_t)(d->retention_period_s * 1000));
    if (uv_is_active((uv_handle_t *)&d->metrics_timer))
        uv_timer_set_repeat(&d->metrics_timer, (uint64_t)(c->metrics_interval_s * 1000));
    if (d->gpm) {
        struct cuptimon_gpm_config g;
        daemon_gpm_config(c, &g);
        cuptimon__gpm_configure(d->gpm, &g);
    }
}

/* The sockets and the archive directory are open, and the aggregates are
 * set up (or not) before the first producer connects: a reload that changes
 * one of those keys says so and keeps the running value. */
static void keep_startup_keys(const struct cuptimon_config *run, struct cuptimon_config *c)
{
    char changed[256] = "";
#define KEEP_STR(f)                                                                                \
    if (strcmp(run->f, c->f) != 0) {                                                               \
        snprintf(changed + strlen(changed), sizeof changed - strlen(changed), "%s%s",              \
                 changed[0] ? ", " : "", #f);                                                      \
        memcpy(c->f, run->f, sizeof c->f);                                                         \
    }
    KEEP_STR(socket)
    KEEP_STR(control_socket)
    KEEP_STR(output_dir)
    KEEP_STR(metrics_file)
    KEEP_STR(gpu_metrics_libcupti)
    KEEP_STR(gpu_metrics_libcuda)
#undef KEEP_STR
#define KEEP_INT(f)                                                                                \
    if (run->f != c->f) {                                                                          \
        snprintf(changed + strlen(changed), sizeof changed - strlen(changed), "%s%s",              \
                 changed[0] ? ", " : "", #f);                                                      \
        c->f = run->f;                                                                             \
    }
    KEEP_INT(aggregate)
    KEEP_INT(gpu_metrics)
#undef KEEP_INT
    if (changed[0])
        log_warn("config", "changes to %s take effect at the next restart", changed);
}

int daemon_reload(struct daemon *d, char **err)
{
    struct cuptimon_config c;
    int rc = config_read(d, &c, err);
    if (rc < 0 && rc != -ENOENT) {
        log_err("config", "reload: %s; keeping the running configuration", *err ? *err : "failed");
        return rc;
    }
    keep_startup_keys(&d->conf, &c);
    use_config(d, &c);
    log_notice("config", "reloaded %s%s", d->conf_path[0] ? d->conf_path : "(defaults)",
               rc == -ENOENT ? " (not found: defaults)" : "");
    return 0;
}

/* ---- retention ------------------------------------------------------------ */

struct sweep {
    uv_work_t req;
    struct daemon *d;
    char root[600];
    uint64_t max_bytes, max_age_s;
    struct cuptimon_retention_stats st;
    int rc;
    char *err;
};

static void sweep_work(uv_work_t *w)
{
    struct sweep *j = w->data;
    j->rc = cuptimon__retention_sweep(j->root, j->max_bytes, j->max_age_s,
                                      cuptimon__live_set_is_live, &j->d->live, &j->st, &j->err);
}

static void sweep_done(uv_work_t *w, int status)
{
    struct sweep *j = w->data;
    struct daemon *d = j->d;
    d->retention_running = 0;
    d->last_sweep = j->st;
    d->last_sweep_ns = unix_ns_now();
    if (j->st.segments_deleted || j->st.segments_expired || j->st.sessions_removed)
        log_info("retention",
                 "deleted %llu segment(s) (%llu over the age cap), %llu byte(s), "
                 "%llu empty session(s); archive now %llu bytes",
                 (unsigned long long)j->st.segments_deleted,
                 (unsigned long long)j->st.segments_expired,
                 (unsigned long long)j->st.bytes_deleted,
                 (unsigned long long)j->st.sessions_removed, (unsigned long long)j->st.bytes_after);
    if (j->rc < 0 && j->rc != -ENOENT && status == 0) {
        static int64_t last_warn;
        if (unix_ns_now() - last_warn > 60000000000LL) {
            log_warn("retention", "%s", j->err ? j->err : strerror(-j->rc));
            last_warn = unix_ns_now();
        }
    }
    free(j->err);
    free(j);
}

static void on_retention_timer(uv_timer_t *t)
{
    struct daemon *d = t->data;
    d->bytes_since_sweep = 0;
    if (d->retention_running || d->stopping || (!d->archive_max_bytes && !d->archive_max_age_s))
        return;
    struct sweep *j = calloc(1, sizeof *j);
    if (!j)
        return;
    j->d = d;
    j->req.data = j;
    snprintf(j->root, sizeof j->root, "%s", d->archive_root);
    j->max_bytes = d->archive_max_bytes;
    j->max_age_s = d->archive_max_age_s;
    d->retention_running = 1;
    if (uv_queue_work(d->loop, &j->req, sweep_work, sweep_done) < 0) {
        d->retention_running = 0;
        free(j);
    }
}

void daemon_wrote(struct daemon *d, uint64_t bytes)
{
    d->bytes_since_sweep += bytes;
    /* Sweeping every eighth of the cap keeps the archive within about that
     * much of it however fast producers write; the timer covers the rest. */
    uint64_t step = d->archive_max_bytes / 8;
    if (d->archive_max_bytes && d->bytes_since_sweep > (step > (1u << 20) ? step : (1u << 20)))
        on_retention_timer(&d->retention_timer);
}

/* Rewrites metrics_file (atomically: node_exporter reads it whenever). */
static void on_metrics_timer(uv_timer_t *t)
{
    struct daemon *d = t->data;
    char *gpu = cuptimon__gpm_prometheus(d->gpm, d->conf.metrics_interval_s);
    int rc = cuptimon__agg_write_prometheus(d->agg, d->conf.metrics_file, gpu);
    free(gpu);
    if (rc < 0 && !d->metrics_failing)
        log_err("metrics", "cannot write %s: %s; retrying every %g s (still serving)",
                d->conf.metrics_file, strerror(-rc), d->conf.metrics_interval_s);
    else if (rc == 0 && d->metrics_failing)
        log_notice("metrics", "writing %s again", d->conf.metrics_file);
    d->metrics_failing = rc < 0;
}

static void on_walk_close(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void finish_stop(struct daemon *d)
{
    d->stop_flushed = 1;
    session_close_all(d);
    control_shutdown(d);
    window_shutdown(d);
}

/* After the last flush, waits for the sessions' last writes; then closes
 * the last handles so that the loop ends.  Gives up after 30 s. */
static void on_stop_timer(uv_timer_t *t)
{
    struct daemon *d = t->data;
    int64_t waited = unix_ns_now() - d->stop_started_ns;
    window_shutdown(d);
    if (d->stop_flushed &&
        ((d->sessions == NULL && d->windows == NULL) || waited > 30000000000LL)) {
        if (d->sessions)
            log_err("main", "gave up waiting for %zu session(s) to finish writing",
                    session_count(d));
        uv_timer_stop(t);
        uv_close((uv_handle_t *)t, NULL);
        if (!uv_is_closing((uv_handle_t *)&d->sig_int))
            uv_close((uv_handle_t *)&d->sig_int, NULL);
        if (d->sessions)
            uv_stop(d->loop);
    }
}

static void on_stop_flushed(struct daemon *d, void *ud, json_object *result)
{
    json_object *late;
    if (json_object_object_get_ex(result, "late", &late) && json_object_array_length(late) > 0)
        log_warn("main", "shutting down: %zu session(s) did not finish their last flush",
                 json_object_array_length(late));
    finish_stop(d);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct daemon *d = h->data;
    if (signum == SIGHUP) {
        char *err = NULL;
        daemon_reload(d, &err);
        free(err);
        return;
    }
    if (d->stopping) {
        log_notice("main", "second %s: stopping now", strsignal(signum));
        finish_stop(d);
        d->stop_started_ns = 0;
        return;
    }
    d->stopping = 1;
    sd_notify(0, "STOPPING=1");
    log_notice("main", "%s: flushing %zu session(s) and stopping", strsignal(signum),
               session_count(d));
    uv_poll_stop(&d->listen_poll);
    uv_poll_stop(&d->control_poll);
    uv_close((uv_handle_t *)&d->listen_poll, NULL);
    uv_close((uv_handle_t *)&d->control_poll, NULL);
    close(d->listen_fd);
    close(d->control_fd);
    /* Socket files that systemd made are systemd's to remove. */
    if (!d->activated) {
        unlink(d->cfg.socket_path);
        unlink(d->cfg.control_path);
    }
    if (uv_is_active((uv_handle_t *)&d->watchdog))
        uv_timer_stop(&d->watchdog);
    uv_timer_stop(&d->retention_timer);
    uv_timer_stop(&d->accept_timer);
    if (d->ctl_idle_timer_on)
        uv_timer_stop(&d->ctl_idle_timer);
    if (uv_is_active((uv_handle_t *)&d->metrics_timer)) {
        /* The processes are going: so do their metrics (a file left behind
         * would be exported as if they still ran). */
        uv_timer_stop(&d->metrics_timer);
        uv_close((uv_handle_t *)&d->metrics_timer, NULL);
        unlink(d->conf.metrics_file);
    }
    uv_signal_stop(&d->sig_hup);
    uv_close((uv_handle_t *)&d->sig_hup, NULL);
    uv_signal_stop(&d->sig_term);
    uv_close((uv_handle_t *)&d->sig_term, NULL);
    /* Keep SIGINT armed so that a second ^C stops at once. */
    d->stop_started_ns = unix_ns_now();
    uv_timer_init(d->loop, &d->stop_timer);
    d->stop_timer.data = d;
    uv_timer_start(&d->stop_timer, on_stop_timer, 20, 20);
    /* A plain flush: what CUPTI has complete is archived now; the rest (work
     * still running) stays with each shim, which hands it to the next
     * daemon.  A forced one would lose the records of running work. */
    if (flush_all(d, CUPTIMON_FLUSH_PLAIN, 2.0, on_stop_flushed, NULL) < 0)
        finish_stop(d);
}

/* ---- command line, startup and shutdown ----------------------------------- */

static const struct option opts[] = {
    {"socket", required_argument, NULL, 's'},
    {"control-socket", required_argument, NULL, 'c'},
    {"output-dir", required_argument, NULL, 'o'},
    {"flush-period", required_argument, NULL, 'f'},
    {"segment-size", required_argument, NULL, 'S'},
    {"compress-level", required_argument, NULL, 'z'},
    {"log-level", required_argument, NULL, 'l'},
    {"control-group", required_argument, NULL, 'g'},
    {"no-aggregate", no_argument, NULL, 'A'},
    {"metrics-file", required_argument, NULL, 'M'},
    {"metrics-interval", required_argument, NULL, 'I'},
    {"config", required_argument, NULL, 'C'},
    {"check-config", no_argument, NULL, 'K'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* The options that set a configuration key.  Each goes through
 * cuptimon__config_set, so that its value is checked by the same rule, in
 * the same place, as the file's. */
static const struct opt_key {
    int opt;
    const char *key;
    const char *value; /* NULL: the option's argument */
    int relative_ok;   /* a relative path is taken from the working directory */
} opt_keys[] = {
    {'s', "socket", NULL, 1},
    {'c', "control_socket", NULL, 1},
    {'o', "output_dir", NULL, 1},
    {'f', "flush_period_s", NULL, 0},
    {'S', "segment_size", NULL, 0},
    {'z', "compress_level", NULL, 0},
    {'l', "log_level", NULL, 0},
    {'g', "control_group", NULL, 0},
    {'A', "aggregate", "no", 0},
    {'M', "metrics_file", NULL, 0},
    {'I', "metrics_interval_s", NULL, 0},
};
#define NOPT_KEYS (sizeof opt_keys / sizeof opt_keys[0])
_Static_assert(NOPT_KEYS <= DAEMON_MAX_CLI_KEYS, "struct daemon has a slot for each key option");

/* --socket, --control-socket and --output-dir have always accepted a path
 * relative to the working directory (the daemon never changes it), but the
 * keys hold absolute paths, as the file and --check-config show them.  The
 * joined paths live here, one per option, for as long as d->cli does. */
static char abs_paths[NOPT_KEYS][1024];

struct cmdline {
    int check_config;
    int conf_explicit;
};

/* main's answer to parse_args: start the daemon. */
#define RUN (-1)

static const char *long_name(int opt)
{
    for (const struct option *o = opts; o->name; o++)
        if (o->val == opt)
            return o->name;
    return "?";
}

/* Checks one key option's value on a scratch configuration, so that a bad
 * value is a usage error before any file is read, and records it in
 * d->cli.  Returns 0 or -errno after saying why. */
static int add_cli_key(struct daemon *d, const struct opt_key *k, const char *arg)
{
    const char *value = k->value ? k->value : arg;
    char cwd[512], *err = NULL;
    if (k->relative_ok && value[0] && value[0] != '/' && getcwd(cwd, sizeof cwd)) {
        char *abs = abs_paths[k - opt_keys];
        /* A path too long to join (or no readable working directory) leaves
         * it relative; the key then refuses it, naming it. */
        if (snprintf(abs, sizeof abs_paths[0], "%s/%s", cwd, value) < (int)sizeof abs_paths[0])
            value = abs;
    }
    struct cuptimon_config scratch;
    cuptimon__config_defaults(&scratch);
    int rc = cuptimon__config_set(&scratch, k->key, value, &err);
    if (rc < 0) {
        fprintf(stderr, "cuptimond: --%s: %s\n", long_name(k->opt), err ? err : strerror(-rc));
        free(err);
        return rc;
    }
    /* A repeated option replaces its earlier value: the last one counts. */
    size_t i = 0;
    while (i < d->ncli && strcmp(d->cli[i].key, k->key) != 0)
        i++;
    d->cli[i] = (struct daemon_cli_key){long_name(k->opt), k->key, value};
    if (i == d->ncli)
        d->ncli++;
    return 0;
}

/* Reads the command line into d->cli, d->conf_path and *cl.  Returns RUN,
 * or the status main exits with: 0 after --help or --version, 2 for bad
 * usage. */
static int parse_args(struct daemon *d, int argc, char **argv, struct cmdline *cl)
{
    int opt;
    while ((opt = getopt_long(argc, argv, "s:c:o:f:z:l:g:C:KhV", opts, NULL)) != -1) {
        const struct opt_key *k = NULL;
        for (size_t i = 0; i < NOPT_KEYS && !k; i++)
            if (opt_keys[i].opt == opt)
                k = &opt_keys[i];
        if (k) {
            if (add_cli_key(d, k, optarg) < 0)
                return 2;
            continue;
        }
        switch (opt) {
        case 'C':
            if (snprintf(d->conf_path, sizeof d->conf_path, "%s", optarg) >=
                (int)sizeof d->conf_path) {
                fprintf(stderr, "cuptimond: --config '%s' is too long (at most %zu bytes)\n",
                        optarg, sizeof d->conf_path - 1);
                return 2;
            }
            cl->conf_explicit = 1;
            break;
        case 'K': cl->check_config = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V':
            /* What the daemon decodes is its layout table, not a toolkit it
             * was built with (it is built with none). */
            printf("cuptimond %s (protocol %u)\nDecodes the CUPTI activity records of %s.\n",
                   PACKAGE_VERSION, CUPTIMON_PROTO_VERSION, cuptimon__cupti_supported());
            return 0;
        default: fprintf(stderr, "Try 'cuptimond --help' for more information.\n"); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr,
                "cuptimond: unexpected argument '%s'\n"
                "Try 'cuptimond --help' for more information.\n",
                argv[optind]);
        return 2;
    }
    return RUN;
}

/* Reads the configuration file and the options into d->conf and puts it in
 * effect; *found says whether there was a file.  Returns 0 or -errno after
 * saying why. */
static int config_start(struct daemon *d, int conf_explicit, int *found)
{
    struct cuptimon_config c;
    char *err = NULL;
    if (!conf_explicit && cuptimon__config_default_path(d->conf_path, sizeof d->conf_path) < 0)
        d->conf_path[0] = '\0';
    int rc = config_read(d, &c, &err);
    if (rc == -ENOENT && conf_explicit) {
        fprintf(stderr, "cuptimond: --config %s: no such file\n", d->conf_path);
        return rc;
    }
    if (rc < 0 && rc != -ENOENT) {
        fprintf(stderr, "cuptimond: %s\n", err ? err : strerror(-rc));
        free(err);
        return rc;
    }
    *found = rc == 0;
    use_config(d, &c);
    return 0;
}

/* --check-config: the effective configuration, in the file's format. */
static int print_config(const struct daemon *d, int found)
{
    char *dump = cuptimon__config_dump(&d->conf);
    if (!dump) {
        fprintf(stderr, "cuptimond: out of memory\n");
        return 1;
    }
    printf("# %s%s\n%s\n", d->conf_path[0] ? d->conf_path : "(no configuration file)",
           found ? "" : " (not found: defaults)", dump);
    free(dump);
    /* A set that would cost a large part of a core per GPU is said before
     * it runs (issue 48); the configuration is still valid. */
    struct cuptimon_gpm_judgement j;
    cuptimon__gpm_set_judge(d->conf.gpu_metrics_set, &j);
    if (d->conf.gpu_metrics && j.costly)
        fprintf(stderr, "cuptimond: warning: gpu_metrics_set%s: %s\n",
                d->conf.gpu_metrics_set[0] ? "" : " (the default set)", j.why_costly);
    return 0;
}

/* Fills in the built-in sockets and output directory where the
 * configuration has none.  Returns 0 or -errno after saying why. */
static int resolve_paths(struct daemon *d)
{
    struct daemon_config *cfg = &d->cfg;
    char rundir[256];
    snprintf(cfg->socket_path, sizeof cfg->socket_path, "%s", d->conf.socket);
    snprintf(cfg->control_path, sizeof cfg->control_path, "%s", d->conf.control_socket);
    snprintf(cfg->output_dir, sizeof cfg->output_dir, "%s", d->conf.output_dir);
    if ((!cfg->socket_path[0] || !cfg->control_path[0]) &&
        cuptimon__default_runtime_dir(rundir, sizeof rundir) < 0) {
        fprintf(stderr, "cuptimond: cannot work out a runtime directory; pass --socket and "
                        "--control-socket\n");
        return -ENOENT;
    }
    if ((!cfg->socket_path[0] &&
         snprintf(cfg->socket_path, sizeof cfg->socket_path, "%s/%s", rundir,
                  CUPTIMON_PRODUCER_SOCKET_NAME) >= (int)sizeof cfg->socket_path) ||
        (!cfg->control_path[0] &&
         snprintf(cfg->control_path, sizeof cfg->control_path, "%s/%s", rundir,
                  CUPTIMON_CONTROL_SOCKET_NAME) >= (int)sizeof cfg->control_path)) {
        fprintf(stderr,
                "cuptimond: the runtime directory %s is too long for a socket path; "
                "pass --socket and --control-socket\n",
                rundir);
        return -ENAMETOOLONG;
    }
    if (!cfg->output_dir[0] && default_output_dir(cfg->output_dir, sizeof cfg->output_dir) < 0) {
        fprintf(stderr, "cuptimond: no HOME or XDG_DATA_HOME to put the archive under; pass "
                        "--output-dir\n");
        return -ENOENT;
    }
    snprintf(d->archive_root, sizeof d->archive_root, "%s/archive", cfg->output_dir);
    return 0;
}

/* Creates OUTPUT_DIR/archive and checks that it can be written to before
 * any producer is accepted.  Returns 0 or -errno after saying why. */
static int make_archive_dir(struct daemon *d)
{
    int rc;
    if ((rc = cuptimon__mkdir_p(d->archive_root, 0750)) < 0) {
        fprintf(stderr, "cuptimond: cannot create the archive directory %s: %s\n", d->archive_root,
                strerror(-rc));
        return rc;
    }
    if (access(d->archive_root, W_OK) < 0) {
        rc = -errno;
        fprintf(stderr, "cuptimond: the archive directory %s is not writable: %s\n",
                d->archive_root, strerror(-rc));
        return rc;
    }
    return 0;
}

/* Takes the sockets systemd passes, matched by path, and binds whatever is
 * not passed.  Returns 0 or -errno after saying why. */
static int open_listeners(struct daemon *d)
{
    int nfds = sd_listen_fds(1);
    for (int i = 0; i < (nfds > 0 ? nfds : 0); i++) {
        int fd = SD_LISTEN_FDS_START + i;
        if (sd_is_socket_unix(fd, SOCK_STREAM, 1, d->cfg.socket_path, 0) > 0)
            d->listen_fd = fd;
        else if (sd_is_socket_unix(fd, SOCK_STREAM, 1, d->cfg.control_path, 0) > 0)
            d->control_fd = fd;
        else {
            log_warn("main", "ignoring passed fd %d: not a listening Unix socket at %s or %s", fd,
                     d->cfg.socket_path, d->cfg.control_path);
            continue;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        d->activated = 1;
    }
    /* Producers of every user may connect (each speaks only for itself). */
    if (d->listen_fd < 0 && (d->listen_fd = listen_at(d->cfg.socket_path, 0666)) < 0)
        return d->listen_fd;
    /* The control socket is open to every user: what each may do is
     * decided per connection from SO_PEERCRED (control.c). */
    if (d->control_fd < 0 && (d->control_fd = listen_at(d->cfg.control_path, 0666)) < 0) {
        if (!d->activated)
            unlink(d->cfg.socket_path);
        return d->control_fd;
    }
    return 0;
}

/* Sets up the loop's handles and timers.  Returns 0 or -errno after saying
 * why. */
static int start_loop(struct daemon *d)
{
    int rc;
    if (d->conf.aggregate && (rc = cuptimon__agg_new(NULL, &d->agg)) < 0) {
        fprintf(stderr, "cuptimond: cannot set up the live aggregates: %s\n", strerror(-rc));
        return rc;
    }
    d->loop = uv_default_loop();
    d->started_unix_ns = unix_ns_now();
    uv_timer_init(d->loop, &d->accept_timer);
    d->accept_timer.data = d;
    uv_poll_init(d->loop, &d->listen_poll, d->listen_fd);
    uv_poll_init(d->loop, &d->control_poll, d->control_fd);
    d->listen_poll.data = d->control_poll.data = d;
    uv_poll_start(&d->listen_poll, UV_READABLE, on_listen);
    uv_poll_start(&d->control_poll, UV_READABLE, on_listen);
    uv_signal_init(d->loop, &d->sig_term);
    uv_signal_init(d->loop, &d->sig_int);
    uv_signal_init(d->loop, &d->sig_hup);
    d->sig_term.data = d->sig_int.data = d->sig_hup.data = d;
    uv_signal_start(&d->sig_term, on_signal, SIGTERM);
    uv_signal_start(&d->sig_int, on_signal, SIGINT);
    uv_signal_start(&d->sig_hup, on_signal, SIGHUP);

    cuptimon__live_set_init(&d->live);
    {
        struct cuptimon_gpm_config g;
        daemon_gpm_config(&d->conf, &g);
        d->gpm = cuptimon__gpm_start(&g, d->archive_root, d->cfg.segment_bytes,
                                     d->cfg.compress_level, &d->live);
        /* A job's devices in top and the metrics are the node's GPUs. */
        if (d->agg && d->gpm)
            cuptimon__agg_set_node_map(d->agg, cuptimon__gpm_node_of, d->gpm);
    }
    uv_timer_init(d->loop, &d->retention_timer);
    d->retention_timer.data = d;
    uv_timer_start(&d->retention_timer, on_retention_timer, 1000,
                   (uint64_t)(d->retention_period_s * 1000));
    if (d->agg && d->conf.metrics_file[0]) {
        uv_timer_init(d->loop, &d->metrics_timer);
        d->metrics_timer.data = d;
        uv_timer_start(&d->metrics_timer, on_metrics_timer, 0,
                       (uint64_t)(d->conf.metrics_interval_s * 1000));
    }
    uint64_t wd_usec = 0;
    if (sd_watchdog_enabled(0, &wd_usec) > 0 && wd_usec > 0) {
        uv_timer_init(d->loop, &d->watchdog);
        d->watchdog.data = d;
        uv_timer_start(&d->watchdog, on_watchdog, wd_usec / 2000, wd_usec / 2000);
    }
    return 0;
}

/* Each producer holds three descriptors (its socket, its pool, its archive
 * segment) and systemd's default soft limit is 1024, so a node of a few
 * hundred processes would run out: the soft limit goes up to the hard one
 * (systemd's default hard limit is 524288), as systemd itself advises for
 * services that need many.  A failure only costs headroom. */
static void raise_fd_limit(struct daemon *d)
{
    struct rlimit rl;
    d->fd_limit = INT_MAX;
    d->fd_reserve = 0;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t old = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
            log_warn("main", "cannot raise the descriptor limit from %llu to %llu: %s",
                     (unsigned long long)old, (unsigned long long)rl.rlim_max, strerror(errno));
            rl.rlim_cur = old;
        } else {
            log_info("main", "descriptor limit raised from %llu to %llu", (unsigned long long)old,
                     (unsigned long long)rl.rlim_cur);
        }
    }
    /* An eighth of the table, 8 to 64, stays out of the producers' reach,
     * so that the operator's status and the daemon's own files still get a
     * descriptor when jobs have taken all the others. */
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)INT_MAX) {
        d->fd_limit = (int)rl.rlim_cur;
        d->fd_reserve = d->fd_limit / 8 < 8 ? 8 : d->fd_limit / 8 > 64 ? 64 : d->fd_limit / 8;
    }
}

/* Everything the daemon needs before the loop runs, in order; READY=1 is
 * sent only once the listeners exist.  Returns 0 or -errno after saying
 * why. */
static int daemon_init(struct daemon *d)
{
    int rc;
    raise_fd_limit(d);
    if ((rc = resolve_paths(d)) < 0 || (rc = make_archive_dir(d)) < 0 ||
        (rc = open_listeners(d)) < 0 || (rc = start_loop(d)) < 0 || (rc = lossreport_start(d)) < 0)
        return rc;
    log_notice("main", "cuptimond %s ready: producers on %s, control on %s, archive in %s%s",
               PACKAGE_VERSION, d->cfg.socket_path, d->cfg.control_path, d->archive_root,
               d->activated ? " (socket-activated)" : "");
    sd_notify(0, "READY=1\nSTATUS=0 sessions");
    /* Readiness line for scripts that start us in the background. */
    fflush(stderr);
    return 0;
}

/* After the loop: closes what is left and frees it.  Returns the exit
 * status. */
static int daemon_done(struct daemon *d)
{
    uv_walk(d->loop, on_walk_close, NULL);
    uv_run(d->loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(d->loop);
    cuptimon__gpm_stop(d->gpm);
    d->gpm = NULL;
    cuptimon__live_set_destroy(&d->live);
    lossreport_free(d);
    session_scratch_free(d);
    if (rc != 0)
        log_warn("main", "event loop closed with handles still open: %s", uv_strerror(rc));
    cuptimon__agg_free(d->agg);
    log_notice("main", "stopped");
    return 0;
}

int main(int argc, char **argv)
{
    struct daemon d = {.listen_fd = -1, .control_fd = -1};
    struct cmdline cl = {0};
    int rc, found = 0;
    if ((rc = parse_args(&d, argc, argv, &cl)) != RUN)
        return rc;
    signal(SIGPIPE, SIG_IGN);
    /* A file-size limit (ulimit -f, LimitFSIZE=) must fail a write with
     * EFBIG, counted and logged, not kill the daemon. */
    signal(SIGXFSZ, SIG_IGN);
    if (config_start(&d, cl.conf_explicit, &found) < 0)
        return 1;
    if (cl.check_config)
        return print_config(&d, found);
    if (daemon_init(&d) < 0)
        return 1;
    /* The loop runs until every handle is closed: after a signal, the last
     * session's archive writes finish before it returns. */
    uv_run(d.loop, UV_RUN_DEFAULT);
    return daemon_done(&d);
}
