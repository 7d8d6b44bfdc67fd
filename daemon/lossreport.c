/*
 * Loss reports: what exiting jobs could not hand off, and refusals, per
 * user.  A shim whose exit bound ran out with buffers that no daemon took
 * (the listen queue stayed full while the daemon was stopped or behind, a
 * refusal, a daemon gone) leaves one small JSON file in the loss directory
 * beside the producer socket (proto/cuptimon-proto.h).  Every second a
 * worker reads what is there, and the loop adds it to per-user totals that
 * `status` shows, so that such a loss is counted even though no session
 * ever saw it.
 *
 * The directory is writable by every user, so each file is untrusted: it
 * is opened without following links and without blocking, taken only when
 * it is a regular file with one link and at most CUPTIMON_LOSS_REPORT_MAX
 * bytes, attributed to its owner (fstat), never to the uid or pid it
 * claims, and every number in it is range-checked.  The directory is
 * sticky (1733): a user may add reports, but not list, replace or remove
 * another user's.  Whatever is read is removed, valid or not; at most
 * SCAN_REPORTS files are taken per scan and the log is rate-limited, so a
 * user who floods the directory costs a bounded amount per second and
 * shows up in their own row (bad_reports).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"

#define SCAN_PERIOD_MS 1000
#define SCAN_REPORTS   256   /* files read per scan */
#define SCAN_ENTRIES   65536 /* directory entries looked at per scan */
#define STALE_TEMP_S   60    /* a dot file this old lost its writer */
#define MAX_USERS      1024  /* rows; later users share the "other" row */
#define RECENT         32
#define CLAIM_MAX      1000000000000LL /* no job loses more than 10^12 records at exit */

static const char *const reasons[] = {CUPTIMON_LOSS_REASONS};

struct loss_user {
    int64_t uid; /* -1: the row of users past MAX_USERS */
    uint64_t refused, reports, records, buffers, dropped, bad;
};

struct loss_item {
    uid_t uid;
    int ok;
    int64_t pid;
    uint64_t records, buffers, dropped;
    const char *reason; /* one of reasons[], or "other" */
    char label[64];
    char why[80]; /* when not ok */
};

struct loss_recent {
    int64_t unix_ns;
    struct loss_item item;
};

struct lossreport {
    struct daemon *d;
    char dir[700];
    int dirfd; /* -1: reports are off */
    uv_timer_t timer;
    int scanning;
    struct loss_user *users;
    size_t nusers;
    struct loss_user other;
    struct loss_recent recent[RECENT];
    size_t recent_next, recent_len;
    uint64_t logged;
};

struct scan {
    uv_work_t req;
    struct lossreport *lr;
    struct loss_item items[SCAN_REPORTS];
    size_t n;
    int err;
};

/* ---- one file (on the worker) ------------------------------------------ */

static int claim(json_object *o, const char *key, uint64_t *out)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
        return -1;
    int64_t x = json_object_get_int64(v);
    if (x < 0 || x > CLAIM_MAX)
        return -1;
    *out = (uint64_t)x;
    return 0;
}

static void parse_report(struct loss_item *it, const char *buf, size_t len)
{
    json_tokener *tok = json_tokener_new();
    json_object *o = tok ? json_tokener_parse_ex(tok, buf, (int)len) : NULL, *v;
    size_t end = tok ? json_tokener_get_parse_end(tok) : 0;
    if (tok)
        json_tokener_free(tok);
    /* One object, then at most white space. */
    while (end < len && (buf[end] == '\n' || buf[end] == ' '))
        end++;
    if (!o || !json_object_is_type(o, json_type_object) || end != len) {
        snprintf(it->why, sizeof it->why, "not one JSON object");
        goto out;
    }
    if (!json_object_object_get_ex(o, "report", &v) || json_object_get_int64(v) != 1 ||
        !json_object_is_type(v, json_type_int)) {
        snprintf(it->why, sizeof it->why, "not a report of version 1");
        goto out;
    }
    if (claim(o, "records_lost", &it->records) < 0 || claim(o, "buffers_lost", &it->buffers) < 0 ||
        claim(o, "dropped_records", &it->dropped) < 0) {
        snprintf(it->why, sizeof it->why, "a count is missing or outside 0..10^12");
        goto out;
    }
    it->pid = json_object_object_get_ex(o, "pid", &v) && json_object_is_type(v, json_type_int)
                  ? json_object_get_int64(v)
                  : 0;
    if (it->pid < 0 || it->pid > INT32_MAX)
        it->pid = 0;
    it->reason = "other";
    const char *r = json_object_object_get_ex(o, "reason", &v) ? json_object_get_string(v) : NULL;
    for (size_t i = 0; r && i < sizeof reasons / sizeof reasons[0]; i++)
        if (strcmp(r, reasons[i]) == 0)
            it->reason = reasons[i];
    const char *l =
        json_object_object_get_ex(o, "label", &v) && json_object_is_type(v, json_type_string)
            ? json_object_get_string(v)
            : "";
    size_t n = 0;
    for (; *l && n < sizeof it->label - 1; l++)
        it->label[n++] = (*l >= 0x20 && *l < 0x7f) ? *l : '?';
    it->label[n] = '\0';
    it->ok = 1;
out:
    json_object_put(o);
}

/* Reads and removes one entry.  Returns 1 when it yields an item (a report,
 * or a bad one whose owner is known), 0 when there is nothing to count. */
static int take_entry(int dfd, const char *name, struct loss_item *it)
{
    struct stat st;
    memset(it, 0, sizeof *it);
    if (name[0] == '.') {
        /* Being written (the shim renames it when complete), or left by a
         * writer that died: removed once it is old. */
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            st.st_mtime + STALE_TEMP_S < time(NULL))
            unlinkat(dfd, name, 0);
        return 0;
    }
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        /* A link, a socket, something unreadable: its owner made it there. */
        int e = errno;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return 0;
        if (unlinkat(dfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
            return 0; /* a directory with something in it: not ours to empty */
        it->uid = st.st_uid;
        snprintf(it->why, sizeof it->why, "cannot be opened: %s", strerror(e));
        return 1;
    }
    char buf[CUPTIMON_LOSS_REPORT_MAX + 1];
    ssize_t n = -1;
    if (fstat(fd, &st) < 0) {
        close(fd);
        return 0;
    }
    it->uid = st.st_uid;
    if (!S_ISREG(st.st_mode))
        snprintf(it->why, sizeof it->why, "not a regular file (mode 0%o)", (unsigned)st.st_mode);
    else if (st.st_nlink != 1)
        snprintf(it->why, sizeof it->why, "a file with %ju links", (uintmax_t)st.st_nlink);
    else if (st.st_size > (off_t)CUPTIMON_LOSS_REPORT_MAX)
        snprintf(it->why, sizeof it->why, "%jd bytes, more than %u", (intmax_t)st.st_size,
                 CUPTIMON_LOSS_REPORT_MAX);
    else if ((n = pread(fd, buf, sizeof buf, 0)) < 0 || n > (ssize_t)CUPTIMON_LOSS_REPORT_MAX)
        snprintf(it->why, sizeof it->why, "%s", n < 0 ? strerror(errno) : "it grew while read");
    else
        parse_report(it, buf, (size_t)n);
    close(fd);
    if (unlinkat(dfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0 && errno != ENOENT)
        return 0;
    return 1;
}

static void scan_work(uv_work_t *w)
{
    struct scan *sc = w->data;
    int fd = openat(sc->lr->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        sc->err = errno;
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *e;
    for (size_t seen = 0; sc->n < SCAN_REPORTS && seen < SCAN_ENTRIES && (e = readdir(dir));
         seen++) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (take_entry(fd, e->d_name, &sc->items[sc->n]))
            sc->n++;
    }
    closedir(dir);
}

/* ---- totals (on the loop) ---------------------------------------------- */

static struct loss_user *user_row(struct lossreport *lr, uid_t uid)
{
    for (size_t i = 0; i < lr->nusers; i++)
        if (lr->users[i].uid == (int64_t)uid)
            return &lr->users[i];
    if (lr->nusers == MAX_USERS)
        return &lr->other;
    if (!lr->users && !(lr->users = calloc(MAX_USERS, sizeof *lr->users)))
        return &lr->other;
    struct loss_user *u = &lr->users[lr->nusers++];
    u->uid = uid;
    return u;
}

/* The first 20 lines, then every 100th: a user who floods the directory
 * cannot flood the log. */
static int may_log(struct lossreport *lr)
{
    uint64_t n = lr->logged++;
    return n < 20 || n % 100 == 0;
}

static void scan_done(uv_work_t *w, int status)
{
    struct scan *sc = w->data;
    struct lossreport *lr = sc->lr;
    lr->scanning = 0;
    if (status == 0 && sc->err && may_log(lr))
        log_warn("lossreport", "cannot read %s: %s", lr->dir, strerror(sc->err));
    for (size_t i = 0; status == 0 && i < sc->n; i++) {
        const struct loss_item *it = &sc->items[i];
        struct loss_user *u = user_row(lr, it->uid);
        if (!it->ok) {
            u->bad++;
            if (may_log(lr))
                log_warn("lossreport",
                         "removed a file of uid %u in %s that is not a loss "
                         "report (%s); %" PRIu64 " such file(s) of that user so far",
                         (unsigned)it->uid, lr->dir, it->why, u->bad);
            continue;
        }
        u->reports++;
        u->records += it->records;
        u->buffers += it->buffers;
        u->dropped += it->dropped;
        lr->recent[lr->recent_next] = (struct loss_recent){unix_ns_now(), *it};
        lr->recent_next = (lr->recent_next + 1) % RECENT;
        if (lr->recent_len < RECENT)
            lr->recent_len++;
        if (may_log(lr))
            log_warn("lossreport",
                     "uid %u pid %" PRId64 "%s%s%s lost %" PRIu64 " records (%" PRIu64
                     " buffer(s)) at exit: %s; %" PRIu64 " records in %" PRIu64 " reports of "
                     "that user so far",
                     (unsigned)it->uid, it->pid, it->label[0] ? " (" : "", it->label,
                     it->label[0] ? ")" : "", it->records, it->buffers, it->reason, u->records,
                     u->reports);
    }
    free(sc);
}

static void on_scan_timer(uv_timer_t *t)
{
    struct lossreport *lr = t->data;
    if (lr->scanning || lr->d->stopping || lr->dirfd < 0)
        return;
    struct scan *sc = calloc(1, sizeof *sc);
    if (!sc)
        return;
    sc->lr = lr;
    sc->req.data = sc;
    lr->scanning = 1;
    if (uv_queue_work(lr->d->loop, &sc->req, scan_work, scan_done) < 0) {
        lr->scanning = 0;
        free(sc);
    }
}

/* ---- the daemon's side ------------------------------------------------- */

int lossreport_start(struct daemon *d)
{
    struct lossreport *lr = calloc(1, sizeof *lr);
    if (!lr)
        return -ENOMEM;
    lr->d = d;
    lr->dirfd = -1;
    lr->other.uid = -1;
    d->loss = lr;
    uv_timer_init(d->loop, &lr->timer);
    lr->timer.data = lr;
    /* The scans never keep the loop from ending at shutdown. */
    uv_unref((uv_handle_t *)&lr->timer);

    const char *slash = strrchr(d->cfg.socket_path, '/');
    if (!slash || snprintf(lr->dir, sizeof lr->dir, "%.*s/%s", (int)(slash - d->cfg.socket_path),
                           d->cfg.socket_path, CUPTIMON_LOSS_DIR_NAME) >= (int)sizeof lr->dir) {
        lr->dir[0] = '\0';
        return 0;
    }
    struct stat st;
    if (mkdir(lr->dir, 0700) < 0 && errno != EEXIST) {
        log_warn("lossreport",
                 "cannot create %s: %s; jobs that cannot hand off at exit are not "
                 "counted",
                 lr->dir, strerror(errno));
        return 0;
    }
    int fd = open(lr->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != geteuid()) {
        /* Someone else's directory (or a link) where ours belongs: taking
         * it would read and delete their files. */
        log_warn("lossreport", "%s is %s; jobs that cannot hand off at exit are not counted",
                 lr->dir, fd < 0 ? strerror(errno) : "not the daemon's own directory");
        if (fd >= 0)
            close(fd);
        return 0;
    }
    if ((st.st_mode & 07777) != 01733 && fchmod(fd, 01733) < 0) {
        log_warn("lossreport",
                 "cannot make %s mode 1733: %s; jobs that cannot hand off at exit "
                 "are not counted",
                 lr->dir, strerror(errno));
        close(fd);
        return 0;
    }
    lr->dirfd = fd;
    uv_timer_start(&lr->timer, on_scan_timer, 0, SCAN_PERIOD_MS);
    log_info("lossreport", "jobs that cannot hand off their last buffers at exit report them in %s",
             lr->dir);
    return 0;
}

void lossreport_refused(struct daemon *d, uid_t uid)
{
    if (d->loss)
        user_row(d->loss, uid)->refused++;
}

void lossreport_refused_lost(struct daemon *d, uid_t uid, uint64_t records, uint64_t buffers,
                             uint64_t dropped)
{
    if (d->loss == NULL)
        return;
    struct loss_user *u = user_row(d->loss, uid);
    /* Claims of a producer: held at the top, as session.c's counters. */
    u->records = records > UINT64_MAX - u->records ? UINT64_MAX : u->records + records;
    u->buffers = buffers > UINT64_MAX - u->buffers ? UINT64_MAX : u->buffers + buffers;
    u->dropped = dropped > UINT64_MAX - u->dropped ? UINT64_MAX : u->dropped + dropped;
}

static json_object *user_json(const struct loss_user *u)
{
    json_object *o = json_object_new_object();
    json_object_object_add(
        o, "uid", u->uid < 0 ? json_object_new_string("other") : json_object_new_int64(u->uid));
    json_object_object_add(o, "refused_producers", json_object_new_int64((int64_t)u->refused));
    json_object_object_add(o, "loss_reports", json_object_new_int64((int64_t)u->reports));
    json_object_object_add(o, "records_lost", json_object_new_int64((int64_t)u->records));
    json_object_object_add(o, "buffers_lost", json_object_new_int64((int64_t)u->buffers));
    json_object_object_add(o, "dropped_records", json_object_new_int64((int64_t)u->dropped));
    json_object_object_add(o, "bad_reports", json_object_new_int64((int64_t)u->bad));
    return o;
}

json_object *lossreport_status(const struct daemon *d, const struct conn *conn)
{
    const struct lossreport *lr = d->loss;
    json_object *o = json_object_new_object(), *users = json_object_new_array(),
                *recent = json_object_new_array();
    uint64_t refused = 0, reports = 0, records = 0, bad = 0;
    /* A user who is not an operator sees their own row only. */
    int64_t only = conn->restricted ? (int64_t)conn->peer.uid : -2;
    for (size_t i = 0; lr && i <= lr->nusers; i++) {
        const struct loss_user *u = i < lr->nusers ? &lr->users[i] : &lr->other;
        if ((only != -2 && u->uid != only) ||
            (i == lr->nusers && !u->refused && !u->reports && !u->bad))
            continue;
        refused += u->refused;
        reports += u->reports;
        records += u->records;
        bad += u->bad;
        json_object_array_add(users, user_json(u));
    }
    for (size_t k = 0; lr && k < lr->recent_len; k++) {
        const struct loss_recent *r = &lr->recent[(lr->recent_next + RECENT - 1 - k) % RECENT];
        if (only != -2 && (int64_t)r->item.uid != only)
            continue;
        json_object *e = json_object_new_object();
        json_object_object_add(e, "unix_ns", json_object_new_int64(r->unix_ns));
        json_object_object_add(e, "uid", json_object_new_int64(r->item.uid));
        json_object_object_add(e, "reported_pid", json_object_new_int64(r->item.pid));
        json_object_object_add(e, "records_lost", json_object_new_int64((int64_t)r->item.records));
        json_object_object_add(e, "buffers_lost", json_object_new_int64((int64_t)r->item.buffers));
        json_object_object_add(e, "dropped_records",
                               json_object_new_int64((int64_t)r->item.dropped));
        json_object_object_add(e, "reason", json_object_new_string(r->item.reason));
        json_object_object_add(e, "label", json_object_new_string(r->item.label));
        json_object_array_add(recent, e);
    }
    json_object_object_add(o, "report_dir",
                           lr && lr->dirfd >= 0 ? json_object_new_string(lr->dir) : NULL);
    json_object_object_add(o, "refused_producers", json_object_new_int64((int64_t)refused));
    json_object_object_add(o, "loss_reports", json_object_new_int64((int64_t)reports));
    json_object_object_add(o, "records_lost", json_object_new_int64((int64_t)records));
    json_object_object_add(o, "bad_reports", json_object_new_int64((int64_t)bad));
    json_object_object_add(o, "users", users);
    json_object_object_add(o, "recent", recent);
    return o;
}

void lossreport_free(struct daemon *d)
{
    struct lossreport *lr = d->loss;
    if (!lr)
        return;
    if (lr->dirfd >= 0)
        close(lr->dirfd);
    free(lr->users);
    free(lr);
    d->loss = NULL;
}
