/*
 * Where a trace window's file may go, and writing it there on behalf of
 * the user who asked: the rules are in window-output.h.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "window-output.h"

static int fail(int rc, char *why, size_t wl, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(int rc, char *why, size_t wl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, wl, fmt, ap);
    va_end(ap);
    return rc;
}

/* Splits an absolute path into its directory (into dir) and its last
 * name (a pointer into path); -EINVAL for a path that names no file. */
static int split(const char *path, char *dir, size_t dl, const char **name, char *why, size_t wl)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (!path || path[0] != '/' || !slash)
        return fail(-EINVAL, why, wl, "the trace path must be absolute: %s", path ? path : "");
    *name = slash + 1;
    if (!**name || strcmp(*name, ".") == 0 || strcmp(*name, "..") == 0)
        return fail(-EINVAL, why, wl, "the trace path %s names a directory, not a file", path);
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    if (n >= dl)
        return fail(-ENAMETOOLONG, why, wl, "the trace path is too long: %s", path);
    memcpy(dir, path, n);
    dir[n] = '\0';
    return 0;
}

static int in_groups(const struct cuptimon_requester *r, gid_t g)
{
    if (g == r->gid)
        return 1;
    for (size_t i = 0; i < r->ngroups; i++)
        if (r->groups[i] == g)
            return 1;
    return 0;
}

/* Whether r may create a file in the directory st, by its owner, group
 * and mode, as the kernel would decide without ACLs (an ACL that grants
 * more is not seen: the check errs on the side of refusing). */
static int may_create(const struct stat *st, const struct cuptimon_requester *r)
{
    mode_t need;
    if (r->uid == 0)
        return 1;
    if (st->st_uid == r->uid)
        need = S_IWUSR | S_IXUSR;
    else if (in_groups(r, st->st_gid))
        need = S_IWGRP | S_IXGRP;
    else
        need = S_IWOTH | S_IXOTH;
    return (st->st_mode & need) == need;
}

/* Whether what is at name in dfd may be replaced for r: nothing there
 * (*exists 0), or a regular file or link that r owns.  0 or -errno with why. */
static int check_name(int dfd, const char *name, const char *path,
                      const struct cuptimon_requester *r, int *exists, char *why, size_t wl)
{
    struct stat st;
    *exists = 0;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT)
            return 0;
        return fail(-errno, why, wl, "cannot look at %s: %s", path, strerror(errno));
    }
    *exists = 1;
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
        return fail(S_ISDIR(st.st_mode) ? -EISDIR : -EEXIST, why, wl,
                    "%s exists and is not a regular file: a trace replaces only a regular "
                    "file of its own user; choose another --output",
                    path);
    if (st.st_uid != r->uid)
        return fail(-EEXIST, why, wl,
                    "%s exists and is owned by uid %u: a trace never replaces a file of "
                    "another user (it is written for uid %u); choose another --output",
                    path, (unsigned)st.st_uid, (unsigned)r->uid);
    return 0;
}

/* Opens path's directory and checks it and the name; returns the
 * directory's fd, or -errno with why. */
static int open_checked(const char *path, const struct cuptimon_requester *r, int user_dir,
                        const struct cuptimon_outdir_id *want, struct cuptimon_outdir_id *got,
                        const char **name, char *why, size_t wl)
{
    char dir[4096];
    struct stat st;
    int rc, exists, dfd;
    if ((rc = split(path, dir, sizeof dir, name, why, wl)) < 0)
        return rc;
    /* Links in the directory part are followed, as the user's own open
     * would follow them: what is checked is the directory they lead to. */
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return fail(-errno, why, wl, "cannot open the directory %s of the trace: %s", dir,
                    strerror(errno));
    if (fstat(dfd, &st) < 0) {
        rc = fail(-errno, why, wl, "cannot look at %s: %s", dir, strerror(errno));
        goto bad;
    }
    if (user_dir && !may_create(&st, r)) {
        rc = fail(-EACCES, why, wl,
                  "uid %u may not create files in %s (owner uid %u, group %u, mode %04o): the "
                  "daemon writes a trace only where its user could write it; choose a "
                  "directory of your own",
                  (unsigned)r->uid, dir, (unsigned)st.st_uid, (unsigned)st.st_gid,
                  (unsigned)(st.st_mode & 07777));
        goto bad;
    }
    if (want && (want->dev != (uint64_t)st.st_dev || want->ino != (uint64_t)st.st_ino)) {
        rc = fail(-ESTALE, why, wl,
                  "%s is not the directory that was checked when the window "
                  "was opened: it was replaced since",
                  dir);
        goto bad;
    }
    if ((rc = check_name(dfd, *name, path, r, &exists, why, wl)) < 0)
        goto bad;
    if (got)
        *got = (struct cuptimon_outdir_id){(uint64_t)st.st_dev, (uint64_t)st.st_ino};
    return dfd;
bad:
    close(dfd);
    return rc;
}

int cuptimon__outpath_check(const char *path, const struct cuptimon_requester *r, int user_dir,
                            struct cuptimon_outdir_id *id, char *why, size_t wl)
{
    const char *name;
    int dfd = open_checked(path, r, user_dir, NULL, id, &name, why, wl);
    if (dfd < 0)
        return dfd;
    close(dfd);
    return 0;
}

/* Grants uid read access to fd with a POSIX ACL (the raw form of
 * system.posix_acl_access, little-endian), keeping mode's other bits. */
static int acl_grant_read(int fd, uid_t uid, mode_t mode)
{
    enum {
        USER_OBJ = 0x01,
        USER = 0x02,
        GROUP_OBJ = 0x04,
        MASK = 0x10,
        OTHER = 0x20
    };
    const uint32_t none = UINT32_MAX; /* ACL_UNDEFINED_ID */
    uint32_t grp = (mode >> 3) & 7;
    /* Sorted by tag, then id, as the kernel requires. */
    const uint32_t e[5][3] = {{USER_OBJ, (mode >> 6) & 7, none},
                              {USER, 4, (uint32_t)uid},
                              {GROUP_OBJ, grp, none},
                              {MASK, grp | 4, none},
                              {OTHER, mode & 7, none}};
    uint8_t x[4 + 5 * 8];
    uint32_t v = htole32(2);
    memcpy(x, &v, 4);
    for (int i = 0; i < 5; i++) {
        uint16_t tag = htole16((uint16_t)e[i][0]), perm = htole16((uint16_t)e[i][1]);
        uint32_t id = htole32(e[i][2]);
        memcpy(x + 4 + 8 * i, &tag, 2);
        memcpy(x + 6 + 8 * i, &perm, 2);
        memcpy(x + 8 + 8 * i, &id, 4);
    }
    return fsetxattr(fd, "system.posix_acl_access", x, sizeof x, 0) < 0 ? -errno : 0;
}

/* Makes the new file fd r's: its owner and group, else (no CAP_CHOWN) an
 * ACL that lets r read it. */
static int give(int fd, const struct cuptimon_requester *r, mode_t mode, const char *path,
                char *why, size_t wl)
{
    if (r->uid == geteuid())
        return fchmod(fd, mode) < 0
                   ? fail(-errno, why, wl, "cannot set the mode of %s: %s", path, strerror(errno))
                   : 0;
    if (fchown(fd, r->uid, r->gid) == 0)
        return fchmod(fd, mode) < 0
                   ? fail(-errno, why, wl, "cannot set the mode of %s: %s", path, strerror(errno))
                   : 0;
    int chown_err = errno;
    if (fchmod(fd, mode) < 0)
        return fail(-errno, why, wl, "cannot set the mode of %s: %s", path, strerror(errno));
    int rc = acl_grant_read(fd, r->uid, mode);
    if (rc < 0)
        return fail(rc, why, wl,
                    "cannot give the trace %s to uid %u: chown: %s; an ACL: %s "
                    "(a daemon without CAP_CHOWN needs a file system with POSIX ACLs)",
                    path, (unsigned)r->uid, strerror(chown_err), strerror(-rc));
    return 0;
}

int cuptimon__outpath_open(struct cuptimon_outpath *o, const char *path,
                           const struct cuptimon_requester *r, int user_dir,
                           const struct cuptimon_outdir_id *id, mode_t mode, char *why, size_t wl)
{
    static unsigned counter;
    const char *name;
    char tmp[300];
    int rc;
    memset(o, 0, sizeof *o);
    o->fd = o->dfd = -1;
    o->uid = r->uid;
    if ((o->dfd = open_checked(path, r, user_dir, id, NULL, &name, why, wl)) < 0) {
        rc = o->dfd;
        o->dfd = -1;
        return rc;
    }
    /* A fresh name, created exclusively: never an inode that was there. */
    snprintf(tmp, sizeof tmp, ".%.200s.tmp.%ld.%u", name, (long)getpid(),
             __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    o->tmp = strdup(tmp);
    o->name = strdup(name);
    o->path = strdup(path);
    if (!o->tmp || !o->name || !o->path) {
        rc = fail(-ENOMEM, why, wl, "out of memory");
        goto bad;
    }
    o->fd = openat(o->dfd, o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (o->fd < 0) {
        rc = fail(-errno, why, wl, "cannot create a temporary file beside %s: %s", path,
                  strerror(errno));
        free(o->tmp);
        o->tmp = NULL;
        goto bad;
    }
    if ((rc = give(o->fd, r, mode, path, why, wl)) < 0)
        goto bad;
    return 0;
bad:
    cuptimon__outpath_commit(o, 0, NULL, 0);
    return rc;
}

/* Renames the temporary file over the final name only where that is
 * still absent or r's: RENAME_NOREPLACE where the name is absent (a file
 * that appears meanwhile makes it fail, not vanish). */
static int put_in_place(struct cuptimon_outpath *o, char *why, size_t wl)
{
    struct cuptimon_requester r = {.uid = o->uid};
    int exists, rc;
    for (int tries = 0; tries < 2; tries++) {
        if ((rc = check_name(o->dfd, o->name, o->path, &r, &exists, why, wl)) < 0)
            return rc;
        if (exists)
            return renameat(o->dfd, o->tmp, o->dfd, o->name) < 0
                       ? fail(-errno, why, wl, "cannot rename the trace to %s: %s", o->path,
                              strerror(errno))
                       : 0;
        if (renameat2(o->dfd, o->tmp, o->dfd, o->name, RENAME_NOREPLACE) == 0)
            return 0;
        if (errno == EINVAL || errno == ENOSYS) {
            /* No RENAME_NOREPLACE on this file system: a hard link fails
             * the same way when the name exists. */
            if (linkat(o->dfd, o->tmp, o->dfd, o->name, 0) == 0) {
                unlinkat(o->dfd, o->tmp, 0);
                return 0;
            }
        }
        if (errno != EEXIST)
            return fail(-errno, why, wl, "cannot rename the trace to %s: %s", o->path,
                        strerror(errno));
        /* Someone created the name meanwhile: look again. */
    }
    return fail(-EEXIST, why, wl, "%s keeps appearing while the trace is put in place", o->path);
}

int cuptimon__outpath_commit(struct cuptimon_outpath *o, int ok, char *why, size_t wl)
{
    char scratch[8];
    int rc = 0;
    if (!why) {
        why = scratch;
        wl = sizeof scratch;
    }
    if (o->fd >= 0) {
        if (ok && fsync(o->fd) < 0)
            rc = fail(-errno, why, wl, "cannot write the trace %s: %s", o->path, strerror(errno));
        if (close(o->fd) < 0 && ok && rc == 0)
            rc = fail(-errno, why, wl, "cannot write the trace %s: %s", o->path, strerror(errno));
        o->fd = -1;
    }
    if (o->tmp && o->dfd >= 0) {
        if (ok && rc == 0)
            rc = put_in_place(o, why, wl);
        if (!ok || rc < 0)
            unlinkat(o->dfd, o->tmp, 0);
    }
    if (o->dfd >= 0)
        close(o->dfd);
    o->dfd = -1;
    free(o->tmp);
    free(o->name);
    free(o->path);
    o->tmp = o->name = o->path = NULL;
    return rc;
}
