/*
 * Where a trace window's file may go, and writing it there on behalf of
 * the user who asked (issue 21, items 6 and 7).
 *
 * The daemon writes with its own rights, usually root's; the path comes
 * from a control client.  So the trace is held to what that user could do
 * themselves, with the uid and groups the kernel vouched for (SO_PEERCRED):
 *   - a path the user chose (--output) must lie in a directory the user
 *     may create files in (by its owner, group and mode; root may anywhere);
 *   - the name in that directory is never followed: it must not exist, or
 *     be a regular file or a symbolic link that the user owns (the link
 *     itself is replaced, never what it points to); a file of someone else,
 *     a device, a FIFO or a directory is refused, whoever asks, root too;
 *   - the trace is written to a new temporary file beside it (O_EXCL, so
 *     never an existing inode), given to the user, and renamed into place
 *     only when the name is still absent (RENAME_NOREPLACE) or still the
 *     user's own.
 * The directory is opened once and everything else is done relative to
 * that descriptor, so that a directory swapped for a link on the way is
 * noticed (its device and inode are compared with the check's).
 *
 * "Given to the user": the file is made theirs with fchown (uid and the
 * primary gid of the asking process), mode 0640.  A daemon that may not
 * chown (no CAP_CHOWN: the systemd unit keeps no capability) grants the
 * user read access with a POSIX ACL instead, which the file's owner may
 * set; when neither works, the window fails and says why.
 */
#ifndef CUPTIMON_WINDOW_OUTPUT_H
#define CUPTIMON_WINDOW_OUTPUT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The user a trace is written for. */
struct cuptimon_requester {
    uid_t uid;
    gid_t gid;           /* the asking process's gid: the trace's group */
    const gid_t *groups; /* every group of the user, for the directory check */
    size_t ngroups;
};

/* Identifies the directory that was checked. */
struct cuptimon_outdir_id {
    uint64_t dev, ino;
};

/*
 * Checks that the trace may be written at path (absolute) for r, as the
 * rules above say; user_dir: the user chose the directory (else it is the
 * daemon's own, and only the name is checked).  Returns 0 with *id set,
 * or -errno with why (wl bytes) saying what was wrong, with the path.
 * Blocks on the file system (a stat of the directory and of the name).
 */
int cuptimon__outpath_check(const char *path, const struct cuptimon_requester *r, int user_dir,
                            struct cuptimon_outdir_id *id, char *why, size_t wl);

/* A trace being written: write to fd. */
struct cuptimon_outpath {
    int fd;
    int dfd;    /* the directory */
    char *tmp;  /* the temporary name in it */
    char *name; /* the final name in it */
    char *path; /* the whole path, for messages */
    uid_t uid;  /* whose it is */
};

/*
 * Opens a temporary file for path (checked again as cuptimon__outpath_check
 * does, and the directory must still be id when id is not NULL), given to
 * r with mode.  Returns 0, or -errno with why.
 */
int cuptimon__outpath_open(struct cuptimon_outpath *o, const char *path,
                           const struct cuptimon_requester *r, int user_dir,
                           const struct cuptimon_outdir_id *id, mode_t mode, char *why, size_t wl);

/*
 * Closes; ok: fsync and rename into place (only where the name is still
 * absent or still the requester's), else removes the temporary file.
 * Returns 0 or -errno with why.  Accepts an o that failed to open.
 */
int cuptimon__outpath_commit(struct cuptimon_outpath *o, int ok, char *why, size_t wl);

#endif
