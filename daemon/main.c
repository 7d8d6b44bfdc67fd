/*
 * cuptimond: the node daemon.  Startup is a straight chain of return codes;
 * errors at startup are fatal, errors at run time are logged and the
 * daemon keeps serving.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cupti_version.h>

#include "daemon.h"

#ifdef HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#else
static int sd_listen_fds(int unset) { (void)unset; return 0; }
static int sd_is_socket_unix(int fd, int type, int listening, const char *path, size_t len)
{
    (void)fd; (void)type; (void)listening; (void)path; (void)len;
    return 0;
}
static int sd_notify(int unset, const char *state) { (void)unset; (void)state; return 0; }
static int sd_notifyf(int unset, const char *fmt, ...) { (void)unset; (void)fmt; return 0; }
static int sd_watchdog_enabled(int unset, uint64_t *usec) { (void)unset; (void)usec; return 0; }
#define SD_LISTEN_FDS_START 3
#endif

static void usage(FILE *f)
{
    fprintf(f,
"Usage: cuptimond [OPTION]...\n"
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
"                             optional K/M/G suffix (default 64M)\n"
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

static int parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return -EINVAL;
    unsigned long long mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1ull << 10; end++; break;
    case 'm': case 'M': mul = 1ull << 20; end++; break;
    case 'g': case 'G': mul = 1ull << 30; end++; break;
    default: break;
    }
    if (*end || v > ULLONG_MAX / mul)
        return -EINVAL;
    *out = v * mul;
    return 0;
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

static int mkdirs(const char *path, mode_t mode)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, mode) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(tmp, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
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
    if (parent_dir(path, dir, sizeof dir) == 0 && (rc = mkdirs(dir, 0755)) < 0) {
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
    if (rc < 0 || listen(fd, 128) < 0) {
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
                /* Out of descriptors: the connection stays queued and the
                 * listener would fire again at once.  Stop listening for a
                 * moment instead of spinning, and say so once a minute. */
                static int64_t last;
                if (unix_ns_now() - last > 60000000000LL) {
                    log_err("listen", "accept on %s: %s; pausing new connections for 200 ms "
                            "(raise the fd limit, or look for clients that hold connections)",
                            is_control ? d->cfg.control_path : d->cfg.socket_path,
                            strerror(errno));
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
        if (is_control)
            control_accept(d, fd);
        else
            session_accept(d, fd);
    }
}

/* The watchdog is fed from the loop itself, so a stuck loop is noticed. */
static void on_watchdog(uv_timer_t *t)
{
    struct daemon *d = t->data;
    sd_notifyf(0, "WATCHDOG=1\nSTATUS=%zu sessions", session_count(d));
}

/* Takes the file's values for what the command line did not set.  Paths
 * only at startup: moving sockets or the archive needs a restart. */
static void apply_config(struct daemon *d, const struct cuptimon_config *c, int startup)
{
    if (startup) {
        if (!(d->given & CFG_SOCKET) && c->socket[0])
            snprintf(d->cfg.socket_path, sizeof d->cfg.socket_path, "%s", c->socket);
        if (!(d->given & CFG_CONTROL) && c->control_socket[0])
            snprintf(d->cfg.control_path, sizeof d->cfg.control_path, "%s", c->control_socket);
        if (!(d->given & CFG_OUTPUT) && c->output_dir[0])
            snprintf(d->cfg.output_dir, sizeof d->cfg.output_dir, "%s", c->output_dir);
    } else if ((!(d->given & CFG_SOCKET) && c->socket[0] &&
                strcmp(c->socket, d->cfg.socket_path) != 0) ||
               (!(d->given & CFG_OUTPUT) && c->output_dir[0] &&
                strcmp(c->output_dir, d->cfg.output_dir) != 0)) {
        log_warn("config", "socket and output_dir changes take effect at the next restart");
    }
    if (!(d->given & CFG_FLUSH))
        d->cfg.flush_period_s = c->flush_period_s;
    if (!(d->given & CFG_SEGMENT))
        d->cfg.segment_bytes = c->segment_size;
    if (!(d->given & CFG_ZLEVEL))
        d->cfg.compress_level = c->compress_level;
    if (!(d->given & CFG_LOG))
        cuptimon__log_init(c->log_level);
    if (!(d->given & CFG_GROUP))
        d->cfg.control_gid = c->has_control_gid ? (long)c->control_gid : -1;
    d->cfg.flush_timeout_s = c->flush_timeout_s;
    d->cfg.window_max_events = c->window_max_events;
    d->archive_max_bytes = c->archive_max_bytes;
    d->archive_max_age_s = c->archive_max_age_s;
    d->retention_period_s = c->retention_period_s;
    if (!startup && uv_is_active((uv_handle_t *)&d->retention_timer))
        uv_timer_set_repeat(&d->retention_timer, (uint64_t)(d->retention_period_s * 1000));
}

int daemon_reload(struct daemon *d, char **err)
{
    struct cuptimon_config c;
    cuptimon__config_defaults(&c);
    int rc = d->conf_path[0] ? cuptimon__config_load(d->conf_path, &c, err) : -ENOENT;
    if (rc < 0 && rc != -ENOENT) {
        log_err("config", "reload: %s; keeping the running configuration", *err ? *err : "failed");
        return rc;
    }
    apply_config(d, &c, 0);
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
    j->rc = cuptimon__retention_sweep(j->root, j->max_bytes, j->max_age_s, cuptimon__live_set_is_live,
                                      &j->d->live, &j->st, &j->err);
}

static void sweep_done(uv_work_t *w, int status)
{
    struct sweep *j = w->data;
    struct daemon *d = j->d;
    d->retention_running = 0;
    d->last_sweep = j->st;
    d->last_sweep_ns = unix_ns_now();
    if (j->st.segments_deleted || j->st.segments_expired || j->st.sessions_removed)
        log_info("retention", "deleted %llu segment(s) (%llu over the age cap), %llu byte(s), "
                 "%llu empty session(s); archive now %llu bytes",
                 (unsigned long long)j->st.segments_deleted, (unsigned long long)j->st.segments_expired,
                 (unsigned long long)j->st.bytes_deleted, (unsigned long long)j->st.sessions_removed,
                 (unsigned long long)j->st.bytes_after);
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
    int rc = cuptimon__agg_write_prometheus(d->agg, d->cfg.metrics_file);
    if (rc < 0 && !d->metrics_failing)
        log_err("metrics", "cannot write %s: %s; retrying every %g s (still serving)",
                d->cfg.metrics_file, strerror(-rc), d->cfg.metrics_interval_s);
    else if (rc == 0 && d->metrics_failing)
        log_notice("metrics", "writing %s again", d->cfg.metrics_file);
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
    if (d->stop_flushed && ((d->sessions == NULL && d->windows == NULL) || waited > 30000000000LL)) {
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
    if (uv_is_active((uv_handle_t *)&d->metrics_timer)) {
        /* The processes are going: so do their metrics (a file left behind
         * would be exported as if they still ran). */
        uv_timer_stop(&d->metrics_timer);
        uv_close((uv_handle_t *)&d->metrics_timer, NULL);
        unlink(d->cfg.metrics_file);
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
    if (flush_all(d, 1, 2.0, on_stop_flushed, NULL) < 0)
        finish_stop(d);
}

int main(int argc, char **argv)
{
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
    struct daemon d = {.listen_fd = -1, .control_fd = -1};
    char rundir[256];
    int rc, opt, level = LOG_INFO, check_config = 0, conf_explicit = 0;
    d.cfg.flush_period_s = 1.0;
    d.cfg.segment_bytes = 64ull << 20;
    d.cfg.compress_level = 1;
    d.cfg.flush_timeout_s = 5.0;
    d.cfg.window_max_events = 50000000;
    d.cfg.control_gid = -1;
    d.cfg.aggregate = 1;
    d.cfg.metrics_interval_s = 15;
    while ((opt = getopt_long(argc, argv, "s:c:o:f:z:l:g:C:KhV", opts, NULL)) != -1) {
        char *end;
        switch (opt) {
        case 's':
        case 'c': {
            d.given |= opt == 's' ? CFG_SOCKET : CFG_CONTROL;
            char *dst = opt == 's' ? d.cfg.socket_path : d.cfg.control_path;
            if (strlen(optarg) >= sizeof d.cfg.socket_path || optarg[0] == '\0') {
                fprintf(stderr, "cuptimond: --%s '%s': a socket path must be 1..%zu bytes\n",
                        opt == 's' ? "socket" : "control-socket", optarg,
                        sizeof d.cfg.socket_path - 1);
                return 2;
            }
            strcpy(dst, optarg);
            break;
        }
        case 'o':
            d.given |= CFG_OUTPUT;
            if (strlen(optarg) >= 400 || optarg[0] == '\0') {
                fprintf(stderr, "cuptimond: --output-dir '%s' is empty or too long\n", optarg);
                return 2;
            }
            snprintf(d.cfg.output_dir, sizeof d.cfg.output_dir, "%s", optarg);
            break;
        case 'f':
            d.given |= CFG_FLUSH;
            d.cfg.flush_period_s = strtod(optarg, &end);
            if (*end || end == optarg || !(d.cfg.flush_period_s >= 0) ||
                d.cfg.flush_period_s > 3600) {
                fprintf(stderr, "cuptimond: --flush-period '%s' is not a number of seconds in "
                        "0..3600\n", optarg);
                return 2;
            }
            break;
        case 'S':
            d.given |= CFG_SEGMENT;
            if (parse_bytes(optarg, &d.cfg.segment_bytes) < 0 ||
                d.cfg.segment_bytes < (1u << 20)) {
                fprintf(stderr, "cuptimond: --segment-size '%s' must be a size of at least 1M "
                        "(e.g. 64M)\n", optarg);
                return 2;
            }
            break;
        case 'z':
            d.given |= CFG_ZLEVEL;
            d.cfg.compress_level = (int)strtol(optarg, &end, 10);
            if (*end || end == optarg || d.cfg.compress_level < 0 || d.cfg.compress_level > 19) {
                fprintf(stderr, "cuptimond: --compress-level '%s' must be 0..19\n", optarg);
                return 2;
            }
            break;
        case 'l':
            d.given |= CFG_LOG;
            if ((level = cuptimon__log_level_parse(optarg)) < 0) {
                fprintf(stderr, "cuptimond: --log-level '%s': use err, warning, notice, info "
                        "or debug\n", optarg);
                return 2;
            }
            break;
        case 'g': {
            d.given |= CFG_GROUP;
            struct group *gr = getgrnam(optarg);
            if (!gr) {
                fprintf(stderr, "cuptimond: --control-group '%s': no such group\n", optarg);
                return 2;
            }
            d.cfg.control_gid = (long)gr->gr_gid;
            break;
        }
        case 'C':
            if (snprintf(d.conf_path, sizeof d.conf_path, "%s", optarg) >= (int)sizeof d.conf_path) {
                fprintf(stderr, "cuptimond: --config '%s' is too long\n", optarg);
                return 2;
            }
            conf_explicit = 1;
            break;
        case 'K':
            check_config = 1;
            break;
        case 'A':
            d.cfg.aggregate = 0;
            break;
        case 'M':
            if (optarg[0] != '/' || strlen(optarg) >= sizeof d.cfg.metrics_file) {
                fprintf(stderr, "cuptimond: --metrics-file '%s' must be an absolute path\n", optarg);
                return 2;
            }
            snprintf(d.cfg.metrics_file, sizeof d.cfg.metrics_file, "%s", optarg);
            break;
        case 'I':
            d.cfg.metrics_interval_s = strtod(optarg, &end);
            if (*end || !(d.cfg.metrics_interval_s >= 1 && d.cfg.metrics_interval_s <= 3600)) {
                fprintf(stderr, "cuptimond: --metrics-interval '%s' must be seconds in 1..3600\n",
                        optarg);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("cuptimond %s (protocol %u, built with CUPTI API %u)\n", PACKAGE_VERSION,
                   CUPTIMON_PROTO_VERSION, (unsigned)CUPTI_API_VERSION);
            return 0;
        default:
            fprintf(stderr, "Try 'cuptimond --help' for more information.\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cuptimond: unexpected argument '%s'\n"
                        "Try 'cuptimond --help' for more information.\n", argv[optind]);
        return 2;
    }
    cuptimon__log_init(level);
    signal(SIGPIPE, SIG_IGN);
    /* A file-size limit (ulimit -f, LimitFSIZE=) must fail a write with
     * EFBIG, counted and logged, not kill the daemon. */
    signal(SIGXFSZ, SIG_IGN);

    /* The configuration file, then the command line on top of it. */
    struct cuptimon_config conf;
    char *cerr = NULL;
    cuptimon__config_defaults(&conf);
    if (!conf_explicit && cuptimon__config_default_path(d.conf_path, sizeof d.conf_path) < 0)
        d.conf_path[0] = '\0';
    rc = d.conf_path[0] ? cuptimon__config_load(d.conf_path, &conf, &cerr) : -ENOENT;
    if (rc == -ENOENT && conf_explicit) {
        fprintf(stderr, "cuptimond: --config %s: no such file\n", d.conf_path);
        return 1;
    }
    if (rc < 0 && rc != -ENOENT) {
        fprintf(stderr, "cuptimond: %s\n", cerr ? cerr : strerror(-rc));
        free(cerr);
        return 1;
    }
    apply_config(&d, &conf, 1);
    if (check_config) {
        /* The effective configuration: the file's, with the command line's
         * values where given. */
        if (d.given & CFG_SOCKET)
            snprintf(conf.socket, sizeof conf.socket, "%s", d.cfg.socket_path);
        if (d.given & CFG_CONTROL)
            snprintf(conf.control_socket, sizeof conf.control_socket, "%s", d.cfg.control_path);
        if ((d.given & CFG_OUTPUT) &&
            snprintf(conf.output_dir, sizeof conf.output_dir, "%s", d.cfg.output_dir) >=
                (int)sizeof conf.output_dir)
            conf.output_dir[0] = '\0'; /* --output-dir is bounded to 400 bytes above */
        conf.flush_period_s = d.cfg.flush_period_s;
        conf.segment_size = d.cfg.segment_bytes;
        conf.compress_level = d.cfg.compress_level;
        if (d.given & CFG_LOG)
            conf.log_level = level;
        char *dump = cuptimon__config_dump(&conf);
        printf("# %s%s\n%s\n", d.conf_path[0] ? d.conf_path : "(no configuration file)",
               rc == -ENOENT ? " (not found: defaults)" : "", dump ? dump : "");
        free(dump);
        return 0;
    }

    if (cuptimon__default_runtime_dir(rundir, sizeof rundir) < 0) {
        fprintf(stderr, "cuptimond: cannot work out a runtime directory; pass --socket and "
                        "--control-socket\n");
        return 1;
    }
    if ((!d.cfg.socket_path[0] &&
         snprintf(d.cfg.socket_path, sizeof d.cfg.socket_path, "%s/%s", rundir,
                  CUPTIMON_PRODUCER_SOCKET_NAME) >= (int)sizeof d.cfg.socket_path) ||
        (!d.cfg.control_path[0] &&
         snprintf(d.cfg.control_path, sizeof d.cfg.control_path, "%s/%s", rundir,
                  CUPTIMON_CONTROL_SOCKET_NAME) >= (int)sizeof d.cfg.control_path)) {
        fprintf(stderr, "cuptimond: the runtime directory %s is too long for a socket path; "
                        "pass --socket and --control-socket\n", rundir);
        return 1;
    }
    if (!d.cfg.output_dir[0] && default_output_dir(d.cfg.output_dir, sizeof d.cfg.output_dir) < 0) {
        fprintf(stderr, "cuptimond: no HOME or XDG_DATA_HOME to put the archive under; pass "
                        "--output-dir\n");
        return 1;
    }
    snprintf(d.archive_root, sizeof d.archive_root, "%s/archive", d.cfg.output_dir);
    if ((rc = mkdirs(d.archive_root, 0750)) < 0) {
        fprintf(stderr, "cuptimond: cannot create the archive directory %s: %s\n",
                d.archive_root, strerror(-rc));
        return 1;
    }
    if (access(d.archive_root, W_OK) < 0) {
        fprintf(stderr, "cuptimond: the archive directory %s is not writable: %s\n",
                d.archive_root, strerror(errno));
        return 1;
    }
    /* Socket activation: take the sockets systemd passes, matched by path;
     * whatever is not passed is bound here. */
    int nfds = sd_listen_fds(1);
    for (int i = 0; i < (nfds > 0 ? nfds : 0); i++) {
        int fd = SD_LISTEN_FDS_START + i;
        if (sd_is_socket_unix(fd, SOCK_STREAM, 1, d.cfg.socket_path, 0) > 0)
            d.listen_fd = fd;
        else if (sd_is_socket_unix(fd, SOCK_STREAM, 1, d.cfg.control_path, 0) > 0)
            d.control_fd = fd;
        else {
            log_warn("main", "ignoring passed fd %d: not a listening Unix socket at %s or %s", fd,
                     d.cfg.socket_path, d.cfg.control_path);
            continue;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        d.activated = 1;
    }
    /* Producers of every user may connect (each speaks only for itself). */
    if (d.listen_fd < 0 && (d.listen_fd = listen_at(d.cfg.socket_path, 0666)) < 0)
        return 1;
    /* The control socket is open to every user: what each may do is
     * decided per connection from SO_PEERCRED (control.c). */
    if (d.control_fd < 0 && (d.control_fd = listen_at(d.cfg.control_path, 0666)) < 0) {
        if (!d.activated)
            unlink(d.cfg.socket_path);
        return 1;
    }

    if (d.cfg.aggregate && (rc = cuptimon__agg_new(NULL, &d.agg)) < 0) {
        fprintf(stderr, "cuptimond: cannot set up the live aggregates: %s\n", strerror(-rc));
        return 1;
    }
    d.loop = uv_default_loop();
    d.started_unix_ns = unix_ns_now();
    uv_timer_init(d.loop, &d.accept_timer);
    d.accept_timer.data = &d;
    uv_poll_init(d.loop, &d.listen_poll, d.listen_fd);
    uv_poll_init(d.loop, &d.control_poll, d.control_fd);
    d.listen_poll.data = d.control_poll.data = &d;
    uv_poll_start(&d.listen_poll, UV_READABLE, on_listen);
    uv_poll_start(&d.control_poll, UV_READABLE, on_listen);
    uv_signal_init(d.loop, &d.sig_term);
    uv_signal_init(d.loop, &d.sig_int);
    uv_signal_init(d.loop, &d.sig_hup);
    d.sig_term.data = d.sig_int.data = d.sig_hup.data = &d;
    uv_signal_start(&d.sig_term, on_signal, SIGTERM);
    uv_signal_start(&d.sig_int, on_signal, SIGINT);
    uv_signal_start(&d.sig_hup, on_signal, SIGHUP);

    cuptimon__live_set_init(&d.live);
    uv_timer_init(d.loop, &d.retention_timer);
    d.retention_timer.data = &d;
    uv_timer_start(&d.retention_timer, on_retention_timer, 1000,
                   (uint64_t)(d.retention_period_s * 1000));
    if (d.agg && d.cfg.metrics_file[0]) {
        uint64_t ms = (uint64_t)(d.cfg.metrics_interval_s * 1000);
        uv_timer_init(d.loop, &d.metrics_timer);
        d.metrics_timer.data = &d;
        uv_timer_start(&d.metrics_timer, on_metrics_timer, 0, ms);
    }
    uint64_t wd_usec = 0;
    if (sd_watchdog_enabled(0, &wd_usec) > 0 && wd_usec > 0) {
        uv_timer_init(d.loop, &d.watchdog);
        d.watchdog.data = &d;
        uv_timer_start(&d.watchdog, on_watchdog, wd_usec / 2000, wd_usec / 2000);
    }
    log_notice("main", "cuptimond %s ready: producers on %s, control on %s, archive in %s%s",
               PACKAGE_VERSION, d.cfg.socket_path, d.cfg.control_path, d.archive_root,
               d.activated ? " (socket-activated)" : "");
    /* READY only now that the listeners exist. */
    sd_notify(0, "READY=1\nSTATUS=0 sessions");
    /* Readiness line for scripts that start us in the background. */
    fflush(stderr);

    /* The loop runs until every handle is closed: after a signal, the last
     * session's archive writes finish before we return. */
    uv_run(d.loop, UV_RUN_DEFAULT);
    uv_walk(d.loop, on_walk_close, NULL);
    uv_run(d.loop, UV_RUN_DEFAULT);
    rc = uv_loop_close(d.loop);
    cuptimon__live_set_destroy(&d.live);
    if (rc != 0)
        log_warn("main", "event loop closed with handles still open: %s", uv_strerror(rc));
    cuptimon__agg_free(d.agg);
    log_notice("main", "stopped");
    return 0;
}
