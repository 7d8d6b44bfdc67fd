/*
 * Retention of the always-on archive: a byte cap and an age cap over
 * OUTPUT_DIR/archive/<session dir>/{meta.json, strings.bin, seg-NNNNNN.cpt}
 * (archive.h), enforced by deleting whole segments, oldest first, and
 * never a segment that is being written.
 *
 * The sweep only stats and unlinks: it never reads a file, so it is safe to
 * run on a worker thread while the archive writers keep appending.  It never
 * follows a symlink below archive_root: directories are opened with
 * O_NOFOLLOW relative to their parent's fd, entries are examined with
 * fstatat(AT_SYMLINK_NOFOLLOW) and removed with unlinkat, so a link planted
 * in the archive cannot make it delete or measure anything outside.
 * (archive_root itself may be a symlink: that is the operator's choice.)
 */
#ifndef CUPTIMON_RETENTION_H
#define CUPTIMON_RETENTION_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct cuptimon_retention_stats {
    uint64_t sessions;         /* session directories seen */
    uint64_t segments;         /* segment files seen */
    uint64_t bytes_before;     /* sizes of every regular file in the session dirs */
    uint64_t bytes_after;      /* the same after the sweep */
    uint64_t segments_deleted; /* by either cap */
    uint64_t segments_expired; /* of those, older than max_age_s */
    uint64_t bytes_deleted;    /* every file removed: segments and session files */
    uint64_t sessions_removed; /* session dirs removed (no segment left, not live) */
    uint64_t live_segments;    /* kept because they are being written */
    uint64_t live_bytes;
    uint64_t skipped; /* symlinks and other entries that are never followed */
    uint64_t errors;  /* stat/unlink failures (the first is in *err) */
    int over_cap;     /* 1: bytes_after is still above max_bytes */
};

/*
 * is_live(ud, session_dir, segment_name) is asked, right before anything in
 * session_dir (the directory's name under archive_root, not a path) is
 * deleted, whether it is in use:
 *  - with segment_name NULL: is the session still open (its producer is
 *    connected, or its last writes are queued)?  A live session's directory
 *    is never removed, and its newest segment (the highest NNNNNN) is kept
 *    even when is_live says nothing about it;
 *  - with a segment name ("seg-000012.cpt"): is this segment being written?
 * It is called from the sweeping thread; it must be thread-safe (see
 * cuptimon_live_set below) and must not block.  is_live NULL: nothing is live.
 *
 * The sweep
 *  1. measures: the total is the size (st_size) of every regular file in
 *     every session directory; files at archive_root itself and anything
 *     that is not a regular file or a directory are not counted;
 *  2. deletes segments oldest first (mtime, then session dir name, then
 *     segment number), skipping live ones, while the total is above
 *     max_bytes (0 = no byte cap) or the segment's mtime is more than
 *     max_age_s before now (0 = no age cap);
 *  3. removes every session directory that has no segment left and is not
 *     live, with everything in it (meta.json, strings.bin).
 *
 * Returns 0 when the total ended within the cap; -ENOSPC when the sweep ran
 * to the end but the total is still above max_bytes (what is left is live
 * or could not be deleted: st->over_cap = 1 and *err says by how much);
 * another -errno when archive_root cannot be opened (nothing was deleted;
 * -ENOENT simply means there is no archive yet).  Failures on single files
 * (a file vanishing under the sweep is not one) are counted in st->errors,
 * the first described in *err, and the sweep goes on; the return value is
 * then -EIO unless it is -ENOSPC.  *err, when err is not NULL, is set to a
 * malloc'd message or NULL.  st may be NULL.
 *
 * Sizes are sampled once: bytes that live segments gain during and after
 * the sweep are the next sweep's.  To stay under the cap while producers
 * write, run it every few seconds and, if need be, pass a max_bytes lowered
 * by the expected growth in between.
 */
int cuptimon__retention_sweep(const char *archive_root, uint64_t max_bytes, uint64_t max_age_s,
                              int (*is_live)(void *ud, const char *session_dir,
                                             const char *segment_name),
                              void *ud, struct cuptimon_retention_stats *st, char **err);

/* A thread-safe set of live session directory names, for is_live: the loop
 * thread adds a session's directory name before it creates the directory
 * (cuptimon__aw_open) and removes it after the session's writer is closed;
 * the sweep looks names up from its worker thread. */
struct cuptimon_live_set {
    pthread_mutex_t lock;
    char **names; /* sorted */
    size_t len, cap;
};

void cuptimon__live_set_init(struct cuptimon_live_set *ls);
void cuptimon__live_set_destroy(struct cuptimon_live_set *ls);
/* 0, -ENOMEM, or -EEXIST when the name is already in. */
int cuptimon__live_set_add(struct cuptimon_live_set *ls, const char *session_dir);
/* 0 or -ENOENT. */
int cuptimon__live_set_remove(struct cuptimon_live_set *ls, const char *session_dir);
/* The is_live callback over a set (ud = the set): a live session's newest
 * segment is kept by the sweep itself, so segment names are not looked up. */
int cuptimon__live_set_is_live(void *ud, const char *session_dir, const char *segment_name);

#endif
