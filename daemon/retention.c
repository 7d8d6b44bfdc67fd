/*
 * Retention: the archive's byte and age caps (retention.h).  Everything
 * below archive_root is reached through directory fds, never by path, and
 * never through a symlink: the archive may be written by a daemon that
 * parses untrusted input, and a planted link must not turn a sweep into a
 * deletion elsewhere.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "retention.h"

struct seg {
    uint32_t sess;         /* index into sessions */
    const char *sess_name; /* sessions[sess].name (its own allocation) */
    uint64_t num;          /* NNNNNN */
    int64_t mtime_ns;
    uint64_t size;
    dev_t dev;
    ino_t ino;
    char name[32];
};

struct sess {
    char *name;
    size_t segs_left;
    uint64_t newest; /* highest segment number seen */
    int has_newest;
    int live; /* at the time of the listing */
    int removed;
};

struct sweep {
    int rootfd;
    const char *root;
    int (*is_live)(void *ud, const char *session_dir, const char *segment_name);
    void *ud;
    struct sess *sessions;
    size_t nsessions, sessions_cap;
    struct seg *segs;
    size_t nsegs, segs_cap;
    uint64_t total;
    struct cuptimon_retention_stats st;
    char *first_error;
};

static void note_error(struct sweep *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note_error(struct sweep *w, const char *fmt, ...)
{
    w->st.errors++;
    if (w->first_error)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&w->first_error, fmt, ap) < 0)
        w->first_error = NULL;
    va_end(ap);
}

static int live(struct sweep *w, const char *dir, const char *seg)
{
    return w->is_live ? w->is_live(w->ud, dir, seg) != 0 : 0;
}

/* "seg-" digits ".cpt", as the archive writer names them. */
static int segment_number(const char *name, uint64_t *num)
{
    if (strncmp(name, "seg-", 4) != 0)
        return -1;
    const char *p = name + 4;
    uint64_t v = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9') {
        if (++digits > 19)
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
        p++;
    }
    if (digits == 0 || strcmp(p, ".cpt") != 0)
        return -1;
    *num = v;
    return 0;
}

static int64_t mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* Opens a session directory below the root without following a link:
 * a directory swapped for a symlink since the listing fails here. */
static int open_session(struct sweep *w, const char *name)
{
    return openat(w->rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static int add_segment(struct sweep *w, uint32_t sess, uint64_t num, const char *name,
                       const struct stat *st)
{
    if (strlen(name) >= sizeof w->segs[0].name)
        return 0; /* cannot happen: segment names are at most 27 bytes */
    if (w->nsegs == w->segs_cap) {
        size_t cap = w->segs_cap ? w->segs_cap * 2 : 256;
        struct seg *n = realloc(w->segs, cap * sizeof *n);
        if (!n)
            return -ENOMEM;
        w->segs = n;
        w->segs_cap = cap;
    }
    struct seg *s = &w->segs[w->nsegs++];
    memset(s, 0, sizeof *s);
    s->sess = sess;
    s->sess_name = w->sessions[sess].name;
    s->num = num;
    s->mtime_ns = mtime_ns(st);
    s->size = (uint64_t)st->st_size;
    s->dev = st->st_dev;
    s->ino = st->st_ino;
    memcpy(s->name, name, strlen(name) + 1); /* segment_number() bounds it */
    return 0;
}

/* Lists one session directory: its segments, and the bytes of the rest. */
static int scan_session(struct sweep *w, const char *name)
{
    int dfd = open_session(w, name);
    if (dfd < 0) {
        if (errno == ENOENT)
            return 0; /* removed since the listing */
        if (errno == ELOOP || errno == ENOTDIR) {
            w->st.skipped++;
            return 0;
        }
        note_error(w, "retention: cannot open %s/%s: %s", w->root, name, strerror(errno));
        return 0;
    }
    DIR *dir = fdopendir(dfd);
    if (!dir) {
        note_error(w, "retention: cannot list %s/%s: %s", w->root, name, strerror(errno));
        close(dfd);
        return 0;
    }
    if (w->nsessions == w->sessions_cap) {
        size_t cap = w->sessions_cap ? w->sessions_cap * 2 : 64;
        struct sess *n = realloc(w->sessions, cap * sizeof *n);
        if (!n) {
            closedir(dir);
            return -ENOMEM;
        }
        w->sessions = n;
        w->sessions_cap = cap;
    }
    struct sess *s = &w->sessions[w->nsessions];
    memset(s, 0, sizeof *s);
    if (!(s->name = strdup(name))) {
        closedir(dir);
        return -ENOMEM;
    }
    uint32_t idx = (uint32_t)w->nsessions++;
    w->st.sessions++;

    struct dirent *e;
    int rc = 0;
    while ((e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT)
                note_error(w, "retention: cannot stat %s/%s/%s: %s", w->root, name, e->d_name,
                           strerror(errno));
            continue;
        }
        if (!S_ISREG(st.st_mode)) {
            w->st.skipped++;
            continue;
        }
        w->total += (uint64_t)st.st_size;
        uint64_t num;
        if (segment_number(e->d_name, &num) == 0) {
            s = &w->sessions[idx];
            if ((rc = add_segment(w, idx, num, e->d_name, &st)) < 0)
                break;
            w->st.segments++;
            s->segs_left++;
            if (!s->has_newest || num > s->newest) {
                s->newest = num;
                s->has_newest = 1;
            }
        }
    }
    closedir(dir);
    return rc;
}

static int scan(struct sweep *w)
{
    int fd = dup(w->rootfd);
    if (fd < 0)
        return -errno;
    DIR *dir = fdopendir(fd);
    if (!dir) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(w->rootfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT)
                note_error(w, "retention: cannot stat %s/%s: %s", w->root, e->d_name,
                           strerror(errno));
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            w->st.skipped++;
            continue;
        }
        if ((rc = scan_session(w, e->d_name)) < 0)
            break;
    }
    closedir(dir);
    return rc;
}

/* Oldest first: mtime, then the session's name (which starts with its UTC
 * start time), then the segment number. */
static int seg_cmp(const void *a, const void *b)
{
    const struct seg *x = a, *y = b;
    if (x->mtime_ns != y->mtime_ns)
        return x->mtime_ns < y->mtime_ns ? -1 : 1;
    if (x->sess != y->sess) {
        int c = strcmp(x->sess_name, y->sess_name);
        if (c)
            return c;
    }
    return x->num < y->num ? -1 : x->num > y->num;
}

/* Removes a session directory that has no segment left and is not live,
 * with the files in it (a symlink among them is unlinked, not followed).
 * A segment that appeared meanwhile, or a directory inside, stops the
 * removal: the directory stays. */
static void remove_session(struct sweep *w, struct sess *s)
{
    if (s->removed || live(w, s->name, NULL))
        return;
    int dfd = open_session(w, s->name);
    if (dfd < 0) {
        if (errno == ENOENT)
            s->removed = 1;
        else if (errno != ELOOP && errno != ENOTDIR)
            note_error(w, "retention: cannot open %s/%s: %s", w->root, s->name, strerror(errno));
        return;
    }
    int fd2 = dup(dfd);
    DIR *dir = fd2 >= 0 ? fdopendir(fd2) : NULL;
    if (!dir) {
        note_error(w, "retention: cannot list %s/%s: %s", w->root, s->name, strerror(errno));
        if (fd2 >= 0)
            close(fd2);
        close(dfd);
        return;
    }
    struct dirent *e;
    int keep = 0;
    while ((e = readdir(dir)) != NULL) {
        uint64_t num;
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        /* A segment written since the listing means the session is in use
         * after all; a directory is not ours to descend into. */
        if ((S_ISREG(st.st_mode) && segment_number(e->d_name, &num) == 0) || S_ISDIR(st.st_mode)) {
            keep = 1;
            continue;
        }
        /* A symlink or other entry is unlinked itself, never followed. */
        if (unlinkat(dfd, e->d_name, 0) < 0) {
            if (errno != ENOENT) {
                note_error(w, "retention: cannot delete %s/%s/%s: %s", w->root, s->name, e->d_name,
                           strerror(errno));
                keep = 1;
            }
            continue;
        }
        if (S_ISREG(st.st_mode)) {
            uint64_t n = (uint64_t)st.st_size;
            w->st.bytes_deleted += n;
            w->total = w->total > n ? w->total - n : 0;
        }
    }
    closedir(dir);
    close(dfd);
    if (keep)
        return;
    if (unlinkat(w->rootfd, s->name, AT_REMOVEDIR) < 0) {
        int rm_errno = errno;
        /* Something was created in it meanwhile: it is in use after all. */
        if (rm_errno != ENOTEMPTY && rm_errno != EEXIST && rm_errno != ENOENT)
            note_error(w, "retention: cannot remove %s/%s: %s", w->root, s->name,
                       strerror(rm_errno));
        if (rm_errno != ENOENT)
            return;
    }
    s->removed = 1;
    w->st.sessions_removed++;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Deletes one segment, after checking that the name still is the file that
 * was measured.  Returns 1 when it is gone (deleted here or by someone
 * else), 0 when it stays. */
static int delete_segment(struct sweep *w, struct seg *g, int expired)
{
    struct sess *s = &w->sessions[g->sess];
    int dfd = open_session(w, s->name);
    if (dfd < 0) {
        if (errno == ENOENT)
            goto gone;
        if (errno != ELOOP && errno != ENOTDIR)
            note_error(w, "retention: cannot open %s/%s: %s", w->root, s->name, strerror(errno));
        return 0;
    }
    struct stat st;
    if (fstatat(dfd, g->name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        int e = errno;
        close(dfd);
        if (e == ENOENT)
            goto gone;
        note_error(w, "retention: cannot stat %s/%s/%s: %s", w->root, s->name, g->name,
                   strerror(e));
        return 0;
    }
    if (!S_ISREG(st.st_mode) || st.st_dev != g->dev || st.st_ino != g->ino) {
        close(dfd); /* replaced since the listing: leave it to the next sweep */
        return 0;
    }
    if (unlinkat(dfd, g->name, 0) < 0) {
        int e = errno;
        close(dfd);
        if (e == ENOENT)
            goto gone;
        note_error(w, "retention: cannot delete %s/%s/%s: %s", w->root, s->name, g->name,
                   strerror(e));
        return 0;
    }
    close(dfd);
    w->st.segments_deleted++;
    w->st.segments_expired += expired != 0;
    w->st.bytes_deleted += (uint64_t)st.st_size;
    w->total = w->total > (uint64_t)st.st_size ? w->total - (uint64_t)st.st_size : 0;
    s->segs_left--;
    return 1;
gone:
    w->total = w->total > g->size ? w->total - g->size : 0;
    s->segs_left--;
    return 1;
}

int cuptimon__retention_sweep(const char *archive_root, uint64_t max_bytes, uint64_t max_age_s,
                              int (*is_live)(void *ud, const char *session_dir,
                                             const char *segment_name),
                              void *ud, struct cuptimon_retention_stats *st, char **err)
{
    struct sweep w = {.root = archive_root, .is_live = is_live, .ud = ud};
    int rc;

    if (err)
        *err = NULL;
    w.rootfd = open(archive_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (w.rootfd < 0) {
        rc = -errno;
        if (err && asprintf(err, "retention: cannot open the archive %s: %s", archive_root,
                            strerror(-rc)) < 0)
            *err = NULL;
        if (st)
            memset(st, 0, sizeof *st);
        return rc;
    }
    if ((rc = scan(&w)) < 0) {
        note_error(&w, "retention: listing %s: %s", archive_root, strerror(-rc));
        goto out;
    }
    w.st.bytes_before = w.total;

    /* A live session's newest segment is the one its writer appends to. */
    for (size_t i = 0; i < w.nsessions; i++)
        w.sessions[i].live = live(&w, w.sessions[i].name, NULL);
    uint8_t *keep = calloc(w.nsegs ? w.nsegs : 1, 1);
    if (!keep) {
        rc = -ENOMEM;
        goto out;
    }
    if (w.nsegs > 1)
        qsort(w.segs, w.nsegs, sizeof *w.segs, seg_cmp);
    for (size_t i = 0; i < w.nsegs; i++) {
        const struct sess *s = &w.sessions[w.segs[i].sess];
        if (s->live && s->has_newest && w.segs[i].num == s->newest) {
            keep[i] = 1;
            w.st.live_segments++;
            w.st.live_bytes += w.segs[i].size;
        }
    }

    int64_t cutoff = max_age_s ? now_ns() - (int64_t)max_age_s * 1000000000 : INT64_MIN;
    for (size_t i = 0; i < w.nsegs; i++) {
        struct seg *g = &w.segs[i];
        int expired = max_age_s && g->mtime_ns < cutoff;
        int over = max_bytes && w.total > max_bytes;
        if (!expired && !over)
            break; /* every later segment is younger */
        if (keep[i])
            continue;
        if (live(&w, w.sessions[g->sess].name, g->name)) {
            w.st.live_segments++;
            w.st.live_bytes += g->size;
            continue;
        }
        if (delete_segment(&w, g, expired) && w.sessions[g->sess].segs_left == 0)
            remove_session(&w, &w.sessions[g->sess]);
    }
    free(keep);
    /* Sessions that had no segment to begin with (or whose last one went
     * by another hand). */
    for (size_t i = 0; i < w.nsessions; i++)
        if (w.sessions[i].segs_left == 0)
            remove_session(&w, &w.sessions[i]);
    rc = 0;

out:
    w.st.bytes_after = w.total;
    w.st.over_cap = max_bytes && w.total > max_bytes;
    if (rc == 0 && w.st.over_cap)
        rc = -ENOSPC;
    else if (rc == 0 && w.st.errors)
        rc = -EIO;
    if (err) {
        if (w.st.over_cap) {
            if (asprintf(err,
                         "retention: %s holds %" PRIu64 " bytes after the sweep, above the cap "
                         "of %" PRIu64 " bytes: the rest is being written (%" PRIu64
                         " live segment(s), %" PRIu64 " bytes)%s%s%s",
                         archive_root, w.total, max_bytes, w.st.live_segments, w.st.live_bytes,
                         w.first_error ? " or could not be deleted (" : "",
                         w.first_error ? w.first_error : "", w.first_error ? ")" : "") < 0)
                *err = NULL;
        } else if (w.first_error) {
            *err = w.first_error;
            w.first_error = NULL;
        }
    }
    if (st)
        *st = w.st;
    free(w.first_error);
    for (size_t i = 0; i < w.nsessions; i++)
        free(w.sessions[i].name);
    free(w.sessions);
    free(w.segs);
    close(w.rootfd);
    return rc;
}

/* ---- the live set -------------------------------------------------------- */

void cuptimon__live_set_init(struct cuptimon_live_set *ls)
{
    memset(ls, 0, sizeof *ls);
    pthread_mutex_init(&ls->lock, NULL);
}

void cuptimon__live_set_destroy(struct cuptimon_live_set *ls)
{
    for (size_t i = 0; i < ls->len; i++)
        free(ls->names[i]);
    free(ls->names);
    pthread_mutex_destroy(&ls->lock);
    memset(ls, 0, sizeof *ls);
}

/* The index of name, or where it would go (*found = 0). */
static size_t live_find(const struct cuptimon_live_set *ls, const char *name, int *found)
{
    size_t lo = 0, hi = ls->len;
    *found = 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ls->names[mid], name);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int cuptimon__live_set_add(struct cuptimon_live_set *ls, const char *session_dir)
{
    int found, rc = 0;
    char *copy = strdup(session_dir);
    if (!copy)
        return -ENOMEM;
    pthread_mutex_lock(&ls->lock);
    size_t at = live_find(ls, session_dir, &found);
    if (found) {
        rc = -EEXIST;
        goto out;
    }
    if (ls->len == ls->cap) {
        size_t cap = ls->cap ? ls->cap * 2 : 16;
        char **n = realloc(ls->names, cap * sizeof *n);
        if (!n) {
            rc = -ENOMEM;
            goto out;
        }
        ls->names = n;
        ls->cap = cap;
    }
    memmove(ls->names + at + 1, ls->names + at, (ls->len - at) * sizeof *ls->names);
    ls->names[at] = copy;
    ls->len++;
    copy = NULL;
out:
    pthread_mutex_unlock(&ls->lock);
    free(copy);
    return rc;
}

int cuptimon__live_set_remove(struct cuptimon_live_set *ls, const char *session_dir)
{
    int found;
    pthread_mutex_lock(&ls->lock);
    size_t at = live_find(ls, session_dir, &found);
    if (found) {
        free(ls->names[at]);
        memmove(ls->names + at, ls->names + at + 1, (ls->len - at - 1) * sizeof *ls->names);
        ls->len--;
    }
    pthread_mutex_unlock(&ls->lock);
    return found ? 0 : -ENOENT;
}

int cuptimon__live_set_is_live(void *ud, const char *session_dir, const char *segment_name)
{
    struct cuptimon_live_set *ls = ud;
    int found;
    if (segment_name)
        return 0; /* the sweep keeps a live session's newest segment itself */
    pthread_mutex_lock(&ls->lock);
    live_find(ls, session_dir, &found);
    pthread_mutex_unlock(&ls->lock);
    return found;
}
