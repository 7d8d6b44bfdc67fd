/*
 * Writing a whole output file so that it appears complete or not at all,
 * without ever replacing what is not a regular file.
 *
 * A regular file (or a path that does not exist yet) is written to
 * PATH.tmp.PID and renamed over PATH at commit.  Anything else that exists
 * at PATH (a character device such as /dev/null, a FIFO, a terminal, a
 * pipe behind /dev/stdout) is written in place: a rename over it would
 * replace the device node with a file (as root, `-o /dev/null` replaced
 * /dev/null itself), and the temporary file could not be created beside it
 * by anyone else.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuptimon-proto.h"

int cuptimon__outfile_open(struct cuptimon_outfile *o, const char *path, mode_t mode)
{
    struct stat st;
    memset(o, 0, sizeof *o);
    o->fd = -1;
    if (!path || !*path)
        return -EINVAL;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode))
            return -EISDIR;
        o->fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        return o->fd < 0 ? -errno : 0;
    }
    size_t n = strlen(path) + 32;
    o->tmp = malloc(n);
    o->path = strdup(path);
    if (!o->tmp || !o->path) {
        free(o->tmp);
        free(o->path);
        o->tmp = o->path = NULL;
        return -ENOMEM;
    }
    snprintf(o->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (o->fd < 0) {
        int e = errno;
        free(o->tmp);
        free(o->path);
        o->tmp = o->path = NULL;
        return -e;
    }
    /* The mode asked for, whatever the umask (a metrics file read by
     * another user, say). */
    if (fchmod(o->fd, mode) < 0) {
        int e = errno;
        close(o->fd);
        unlink(o->tmp);
        free(o->tmp);
        free(o->path);
        o->tmp = o->path = NULL;
        o->fd = -1;
        return -e;
    }
    return 0;
}

int cuptimon__outfile_commit(struct cuptimon_outfile *o, int ok, int sync)
{
    int rc = 0;
    if (o->fd >= 0) {
        if (ok && sync && o->tmp && fsync(o->fd) < 0)
            rc = -errno;
        if (close(o->fd) < 0 && ok && rc == 0)
            rc = -errno;
        o->fd = -1;
    }
    if (o->tmp) {
        if (ok && rc == 0 && rename(o->tmp, o->path) < 0)
            rc = -errno;
        if (!ok || rc < 0)
            unlink(o->tmp);
    }
    free(o->tmp);
    free(o->path);
    o->tmp = o->path = NULL;
    return rc;
}
