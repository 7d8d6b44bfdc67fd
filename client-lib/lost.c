/*
 * The exit hand-off's loss report.  When cuptimon_shutdown's bound runs out
 * with buffers that no daemon took (its listen queue stayed full, it
 * refused this process, it went away, or its socket would not take the
 * last frames), their records are still counted: one line on the job's
 * stderr, and a small file in the daemon's loss directory beside its
 * socket (proto/cuptimon-proto.h), which the daemon shows in its status.
 * This runs only when something was lost; on a node where no daemon ever
 * answered it says nothing (CUPTIMON_DEBUG aside): no daemon, no promise.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

/* Indexed by enum shim_loss_reason (SHIM_LOSS_NONE is 0). */
static const char *const reason_words[] = {"none", CUPTIMON_LOSS_REASONS};
_Static_assert(sizeof reason_words / sizeof reason_words[0] == SHIM_LOSS_DISCONNECTED + 1,
               "one word per enum shim_loss_reason");

static void why_text(const struct shim *s, const struct shim_loss *l, const char *sock, char *out,
                     size_t len)
{
    switch (l->reason) {
    case SHIM_LOSS_QUEUE_FULL:
        snprintf(out, len,
                 "the daemon on %s did not take the connection within the %d ms exit "
                 "bound (its listen queue was full)",
                 sock, s->exit_timeout_ms);
        break;
    case SHIM_LOSS_REFUSED:
        snprintf(out, len, "the daemon on %s refused this process", sock);
        break;
    case SHIM_LOSS_UNSENT:
        snprintf(out, len, "the daemon on %s did not read its socket within the %d ms exit bound",
                 sock, s->exit_timeout_ms);
        break;
    default:
        snprintf(out, len, "not connected to the daemon on %s at exit (%s)", sock,
                 l->err ? strerror(l->err) : "it went away");
        break;
    }
}

/* The label as the report carries it: printable ASCII without quotes or
 * backslashes (no JSON escaping needed), at most 63 bytes. */
static void report_label(char *out, size_t len)
{
    const char *v = getenv("CUPTIMON_LABEL");
    size_t n = 0;
    for (; v && *v && n + 1 < len && n < 63; v++)
        out[n++] = (*v > 0x20 && *v < 0x7f && *v != '"' && *v != '\\') ? *v : '_';
    out[n] = '\0';
}

/* Leaves the report in dir (sock's directory + CUPTIMON_LOSS_DIR_NAME), as
 * a complete file: written under a dot name, then renamed.  Returns 0 or
 * -errno. */
static int write_report(const struct shim *s, const struct shim_loss *l, const char *sock,
                        char *dir, size_t dirlen)
{
    struct stat sst, dst;
    snprintf(dir, dirlen, "%s", sock);
    char *slash = strrchr(dir, '/');
    if (!slash || (size_t)(slash + 1 - dir) + sizeof CUPTIMON_LOSS_DIR_NAME > dirlen)
        return -ENAMETOOLONG;
    memcpy(slash + 1, CUPTIMON_LOSS_DIR_NAME, sizeof CUPTIMON_LOSS_DIR_NAME);
    if (lstat(sock, &sst) < 0)
        return -errno;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    /* Only the daemon that made the socket made its loss directory (sticky,
     * so that no user can remove another's report): anything else there is
     * not where a daemon looks. */
    if (fstat(dfd, &dst) < 0 || dst.st_uid != sst.st_uid || !(dst.st_mode & S_ISVTX)) {
        close(dfd);
        return -EPERM;
    }
    char label[64], body[CUPTIMON_LOSS_REPORT_MAX], name[64], tmp[72];
    report_label(label, sizeof label);
    int n = snprintf(body, sizeof body,
                     "{\"report\":1,\"pid\":%d,\"records_lost\":%llu,\"buffers_lost\":%llu,"
                     "\"dropped_records\":%llu,\"reason\":\"%s\",\"exit_timeout_ms\":%d,"
                     "\"label\":\"%s\"}\n",
                     (int)getpid(), (unsigned long long)l->records, (unsigned long long)l->buffers,
                     (unsigned long long)l->dropped, reason_words[l->reason], s->exit_timeout_ms,
                     label);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(name, sizeof name, "%d-%lld.%09ld", (int)getpid(), (long long)ts.tv_sec, ts.tv_nsec);
    snprintf(tmp, sizeof tmp, ".%s", name);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = -errno;
        close(dfd);
        return rc;
    }
    /* Readable by a daemon that does not run as root, whatever the job's
     * umask: it holds counts, a pid and a label. */
    fchmod(fd, 0644);
    ssize_t w = write(fd, body, (size_t)n);
    int rc = w == n ? 0 : w < 0 ? -errno : -EIO;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && renameat(dfd, tmp, dfd, name) < 0)
        rc = -errno;
    if (rc < 0)
        unlinkat(dfd, tmp, 0);
    close(dfd);
    return rc;
}

void cuptimon__loss_report(struct shim *s, const struct shim_loss *l)
{
    int seen = atomic_load(&s->daemon_seen);
    const char *plural = l->buffers == 1 ? "" : "s";
    if (seen <= 0 || seen > s->nsockets) {
        shim_debug(s,
                   "%llu records in %llu buffer%s were not handed off at exit: no daemon "
                   "answered",
                   (unsigned long long)l->records, (unsigned long long)l->buffers, plural);
        return;
    }
    const char *sock = s->sockets[seen - 1];
    char why[300], dir[128];
    why_text(s, l, sock, why, sizeof why);
    int rc = write_report(s, l, sock, dir, sizeof dir);
    if (rc == 0)
        cuptimon__log("lost %llu records (%llu buffer%s) at exit: %s; the daemon counts them in "
                      "its status (report in %s)",
                      (unsigned long long)l->records, (unsigned long long)l->buffers, plural, why,
                      dir);
    else
        cuptimon__log("lost %llu records (%llu buffer%s) at exit: %s; no report could be left "
                      "for the daemon in %s: %s",
                      (unsigned long long)l->records, (unsigned long long)l->buffers, plural, why,
                      dir, strerror(-rc));
}
