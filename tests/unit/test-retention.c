/* Unit tests of archive retention: a fake archive of files with known sizes
 * (sparse) and mtimes; the byte cap deletes oldest first and never a live
 * segment, the age cap, session directories without segments, symlinks
 * (never followed), a cap that live segments alone exceed, the live set. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon/retention.h"
#include "tests/unit/testlib.h"

static char tmpdir[256], root[300], outside[300];
static time_t now;

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cuptimon-retention-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(root, sizeof root, "%s/archive", tmpdir);
    snprintf(outside, sizeof outside, "%s/outside", tmpdir);
    ck_assert_int_eq(mkdir(root, 0750), 0);
    ck_assert_int_eq(mkdir(outside, 0750), 0);
    now = time(NULL);
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* A file of `size` bytes (sparse) whose mtime is `age` seconds ago. */
static void make_file_at(const char *dir, const char *name, off_t size, long age)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0640);
    ck_assert_msg(fd >= 0, "%s: %s", p, strerror(errno));
    ck_assert_int_eq(ftruncate(fd, size), 0);
    struct timespec ts[2] = {{.tv_sec = now - age}, {.tv_sec = now - age}};
    ck_assert_int_eq(futimens(fd, ts), 0);
    close(fd);
}

static void make_session(const char *sess)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", root, sess);
    ck_assert_int_eq(mkdir(p, 0750), 0);
    make_file_at(p, "meta.json", 1000, 5000);
    make_file_at(p, "strings.bin", 3000, 5000);
}

static void make_seg(const char *sess, unsigned n, off_t size, long age)
{
    char dir[600], name[32];
    snprintf(dir, sizeof dir, "%s/%s", root, sess);
    snprintf(name, sizeof name, "seg-%06u.cpt", n);
    make_file_at(dir, name, size, age);
    /* utimensat on the path, as an archive tool would: same result. */
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct timespec ts[2] = {{.tv_sec = now - age}, {.tv_sec = now - age}};
    ck_assert_int_eq(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0);
}

static int exists(const char *sess, const char *name)
{
    char p[700];
    struct stat st;
    if (name)
        snprintf(p, sizeof p, "%s/%s/%s", root, sess, name);
    else
        snprintf(p, sizeof p, "%s/%s", root, sess);
    return lstat(p, &st) == 0;
}

static int seg_exists(const char *sess, unsigned n)
{
    char name[32];
    snprintf(name, sizeof name, "seg-%06u.cpt", n);
    return exists(sess, name);
}

/* What is on disk now: the sizes of the regular files of the session dirs. */
static uint64_t disk_total(void)
{
    uint64_t total = 0;
    DIR *d = opendir(root);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        char p[700];
        struct stat st;
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", root, e->d_name);
        if (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        DIR *s = opendir(p);
        struct dirent *f;
        while ((f = readdir(s))) {
            char q[1000];
            snprintf(q, sizeof q, "%s/%s", p, f->d_name);
            if (lstat(q, &st) == 0 && S_ISREG(st.st_mode))
                total += (uint64_t)st.st_size;
        }
        closedir(s);
    }
    closedir(d);
    return total;
}

/* is_live for the tests: sessions by name, and single segments. */
struct live {
    const char *sessions[4];
    const char *segments[4]; /* "session/seg-NNNNNN.cpt" */
    int calls_null, calls_seg;
};

static int test_is_live(void *ud, const char *dir, const char *seg)
{
    struct live *l = ud;
    if (!seg) {
        l->calls_null++;
        for (int i = 0; i < 4 && l->sessions[i]; i++)
            if (strcmp(l->sessions[i], dir) == 0)
                return 1;
        return 0;
    }
    l->calls_seg++;
    char both[300];
    snprintf(both, sizeof both, "%s/%s", dir, seg);
    for (int i = 0; i < 4 && l->segments[i]; i++)
        if (strcmp(l->segments[i], both) == 0)
            return 1;
    return 0;
}

#define MB (1ull << 20)

START_TEST(byte_cap_oldest_first_never_live)
{
    /* A: ended, three old segments.  B: live, its newest is the oldest file
     * of all.  C: ended, younger. */
    make_session("A");
    make_seg("A", 0, 10 * MB, 900);
    make_seg("A", 1, 10 * MB, 800);
    make_seg("A", 2, 10 * MB, 700);
    make_session("B");
    make_seg("B", 0, 10 * MB, 600);
    make_seg("B", 1, 10 * MB, 1000); /* newest by number, oldest by mtime */
    make_session("C");
    make_seg("C", 0, 10 * MB, 500);
    make_seg("C", 1, 10 * MB, 400);
    uint64_t meta = 3 * 4000;
    ck_assert_uint_eq(disk_total(), 70 * MB + meta);

    struct live l = {.sessions = {"B"}};
    struct cuptimon_retention_stats st;
    char *err = NULL;
    /* Room for 40M: three segments must go, the oldest three not live:
     * A/0, A/1, A/2 (B/1 is older but live). */
    int rc = cuptimon__retention_sweep(root, 40 * MB + meta, 0, test_is_live, &l, &st, &err);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err ? err : "");
    ck_assert_ptr_null(err);
    ck_assert(seg_exists("B", 1));
    ck_assert(!seg_exists("A", 0) && !seg_exists("A", 1) && !seg_exists("A", 2));
    /* A had nothing left and is not live: gone with its meta and strings. */
    ck_assert(!exists("A", NULL));
    ck_assert(seg_exists("B", 0) && seg_exists("C", 0) && seg_exists("C", 1));
    ck_assert_uint_eq(st.sessions, 3);
    ck_assert_uint_eq(st.segments, 7);
    ck_assert_uint_eq(st.segments_deleted, 3);
    ck_assert_uint_eq(st.segments_expired, 0);
    ck_assert_uint_eq(st.sessions_removed, 1);
    ck_assert_uint_eq(st.bytes_before, 70 * MB + meta);
    ck_assert_uint_eq(st.bytes_deleted, 30 * MB + 4000);
    ck_assert_uint_eq(st.bytes_after, 40 * MB + 2 * 4000);
    ck_assert_uint_eq(st.bytes_after, disk_total());
    ck_assert_int_eq(st.over_cap, 0);
    ck_assert_uint_ge(st.live_segments, 1);

    /* Tighter: 25M.  B/0 (600 s) goes before C/0 (500 s); B/1 stays. */
    rc = cuptimon__retention_sweep(root, 25 * MB, 0, test_is_live, &l, &st, &err);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err ? err : "");
    ck_assert(!seg_exists("B", 0) && seg_exists("B", 1));
    ck_assert(!seg_exists("C", 0) && seg_exists("C", 1));
    ck_assert(exists("B", "meta.json") && exists("C", "meta.json"));
    ck_assert_uint_le(disk_total(), 25 * MB);
    ck_assert_uint_eq(st.bytes_after, disk_total());
}
END_TEST

START_TEST(is_live_segment_is_kept)
{
    /* The callback names a segment that is not the newest: kept as well. */
    make_session("S");
    make_seg("S", 0, 5 * MB, 900);
    make_seg("S", 1, 5 * MB, 800);
    make_seg("S", 2, 5 * MB, 700);
    struct live l = {.segments = {"S/seg-000000.cpt"}};
    struct cuptimon_retention_stats st;
    char *err = NULL;
    int rc = cuptimon__retention_sweep(root, 1, 0, test_is_live, &l, &st, &err);
    ck_assert_int_eq(rc, -ENOSPC);
    ck_assert(seg_exists("S", 0));
    ck_assert(!seg_exists("S", 1) && !seg_exists("S", 2));
    ck_assert(exists("S", "meta.json")); /* it still has a segment */
    ck_assert_uint_gt(l.calls_seg, 0);
    free(err);
}
END_TEST

START_TEST(age_cap)
{
    make_session("old");
    make_seg("old", 0, MB, 10 * 86400);
    make_seg("old", 1, MB, 8 * 86400);
    make_seg("old", 2, MB, 3600);
    make_session("live");
    make_seg("live", 0, MB, 9 * 86400);
    make_seg("live", 1, MB, 20 * 86400); /* the one being written: kept */
    struct live l = {.sessions = {"live"}};
    struct cuptimon_retention_stats st;
    char *err = NULL;
    int rc = cuptimon__retention_sweep(root, 0, 7 * 86400, test_is_live, &l, &st, &err);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err ? err : "");
    ck_assert(!seg_exists("old", 0) && !seg_exists("old", 1) && seg_exists("old", 2));
    ck_assert(!seg_exists("live", 0) && seg_exists("live", 1));
    ck_assert_uint_eq(st.segments_deleted, 3);
    ck_assert_uint_eq(st.segments_expired, 3);
    ck_assert_uint_eq(st.bytes_deleted, 3 * MB);
    ck_assert_int_eq(st.over_cap, 0);
    /* No caps: nothing to do. */
    rc = cuptimon__retention_sweep(root, 0, 0, test_is_live, &l, &st, &err);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(st.segments_deleted, 0);
    ck_assert_uint_eq(st.sessions_removed, 0);
}
END_TEST

START_TEST(sessions_without_segments)
{
    make_session("ended-empty"); /* meta and strings only, not live */
    make_session("starting");    /* live, its first segment not made yet */
    make_session("ended-full");
    make_seg("ended-full", 0, MB, 100);
    make_file_at(root, "stray-file", 50 * MB, 100); /* not a session: not counted */
    struct live l = {.sessions = {"starting"}};
    struct cuptimon_retention_stats st;
    char *err = NULL;
    int rc = cuptimon__retention_sweep(root, 0, 0, test_is_live, &l, &st, &err);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err ? err : "");
    ck_assert(!exists("ended-empty", NULL));
    ck_assert(exists("starting", "meta.json"));
    ck_assert(seg_exists("ended-full", 0));
    ck_assert_uint_eq(st.sessions_removed, 1);
    ck_assert_uint_eq(st.bytes_before, 3 * 4000 + MB);
    ck_assert_uint_eq(st.bytes_deleted, 4000);
    ck_assert_uint_ge(st.skipped, 1);
    char p[400];
    snprintf(p, sizeof p, "%s/stray-file", root);
    ck_assert_int_eq(access(p, F_OK), 0);
    /* No is_live at all: nothing is live. */
    rc = cuptimon__retention_sweep(root, 0, 0, NULL, NULL, &st, &err);
    ck_assert_int_eq(rc, 0);
    ck_assert(!exists("starting", NULL));
}
END_TEST

START_TEST(symlinks_are_not_followed)
{
    /* Outside the archive: an old big file, and a directory that looks like
     * a session. */
    make_file_at(outside, "victim", 20 * MB, 99999);
    make_file_at(outside, "seg-000000.cpt", 20 * MB, 99999);
    make_file_at(outside, "meta.json", 10, 99999);
    char p[700], q[700];
    /* A session dir that is a symlink to it. */
    snprintf(p, sizeof p, "%s/linked-session", root);
    ck_assert_int_eq(symlink(outside, p), 0);
    /* A session whose "segment" and "meta.json" are links to the victim. */
    make_session("tricky");
    snprintf(p, sizeof p, "%s/victim", outside);
    snprintf(q, sizeof q, "%s/tricky/seg-000000.cpt", root);
    ck_assert_int_eq(symlink(p, q), 0);
    snprintf(q, sizeof q, "%s/tricky/strings2.bin", root);
    ck_assert_int_eq(symlink(p, q), 0);
    /* A real session with real segments, so there is work to do. */
    make_session("real");
    make_seg("real", 0, 2 * MB, 500);
    make_seg("real", 1, 2 * MB, 400);

    struct cuptimon_retention_stats st;
    char *err = NULL;
    int rc = cuptimon__retention_sweep(root, 1, 1, NULL, NULL, &st, &err);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err ? err : "");
    /* Nothing outside changed. */
    struct stat sb;
    snprintf(p, sizeof p, "%s/victim", outside);
    ck_assert_int_eq(stat(p, &sb), 0);
    ck_assert_int_eq(sb.st_size, 20 * MB);
    ck_assert_int_eq(sb.st_mtime, now - 99999);
    snprintf(p, sizeof p, "%s/seg-000000.cpt", outside);
    ck_assert_int_eq(stat(p, &sb), 0);
    ck_assert_int_eq(sb.st_size, 20 * MB);
    snprintf(p, sizeof p, "%s/meta.json", outside);
    ck_assert_int_eq(access(p, F_OK), 0);
    /* The linked "session" is not measured: only real files are. */
    ck_assert_uint_eq(st.bytes_before, 2 * 4000 + 4 * MB);
    ck_assert_uint_ge(st.skipped, 3);
    /* The real segments went; the tricky session had no real segment and
     * was removed, its links with it (unlinked, not followed). */
    ck_assert(!seg_exists("real", 0) && !seg_exists("real", 1));
    ck_assert(!exists("tricky", NULL));
    ck_assert(exists("linked-session", NULL)); /* the link itself stays */
    ck_assert_uint_eq(st.bytes_after, 0);
}
END_TEST

START_TEST(total_ends_under_cap)
{
    char name[32];
    unsigned seed = 12345;
    for (int s = 0; s < 12; s++) {
        snprintf(name, sizeof name, "2026010%dT000000Z-%d-%d", s % 9, 100 + s, s);
        make_session(name);
        for (unsigned g = 0; g < 9; g++) {
            seed = seed * 1103515245u + 12345u;
            make_seg(name, g, (off_t)(seed % (7 * MB)), 100000 - s * 10 - (long)g * 1000);
        }
    }
    struct live l = {.sessions = {"20260100T000000Z-100-0", "20260103T000000Z-103-3"}};
    uint64_t before = disk_total();
    for (uint64_t cap = before; cap > 50 * MB; cap = cap * 2 / 3) {
        struct cuptimon_retention_stats st;
        char *err = NULL;
        int rc = cuptimon__retention_sweep(root, cap, 0, test_is_live, &l, &st, &err);
        ck_assert_msg(rc == 0, "cap %llu: rc %d: %s", (unsigned long long)cap, rc, err ? err : "");
        ck_assert_uint_le(disk_total(), cap);
        ck_assert_uint_eq(st.bytes_after, disk_total());
        ck_assert(seg_exists("20260100T000000Z-100-0", 8));
        ck_assert(seg_exists("20260103T000000Z-103-3", 8));
    }
}
END_TEST

START_TEST(live_alone_exceed_cap)
{
    make_session("live1");
    make_seg("live1", 0, 8 * MB, 900);
    make_seg("live1", 1, 30 * MB, 100);
    make_session("live2");
    make_seg("live2", 4, 30 * MB, 200);
    make_session("gone");
    make_seg("gone", 0, 8 * MB, 50);
    make_seg("gone", 1, 8 * MB, 40);
    struct live l = {.sessions = {"live1", "live2"}};
    struct cuptimon_retention_stats st;
    char *err = NULL;
    int rc = cuptimon__retention_sweep(root, 10 * MB, 0, test_is_live, &l, &st, &err);
    ck_assert_int_eq(rc, -ENOSPC);
    ck_assert_int_eq(st.over_cap, 1);
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(strstr(err, "above the cap") && strstr(err, "2 live segment(s)"), "%s", err);
    free(err);
    /* Everything else is gone. */
    ck_assert(!seg_exists("live1", 0) && !exists("gone", NULL));
    ck_assert(seg_exists("live1", 1) && seg_exists("live2", 4));
    ck_assert_uint_eq(st.live_segments, 2);
    ck_assert_uint_eq(st.live_bytes, 60 * MB);
    ck_assert_uint_eq(st.bytes_after, disk_total());
    ck_assert_uint_eq(st.bytes_after, 60 * MB + 2 * 4000);
}
END_TEST

/* A writer that appends to its newest segment and rotates, as the archive
 * writer does, while sweeps run: its current segment is never unlinked
 * under it (st_nlink stays 1), and no sweep reports an error. */
struct writer {
    atomic_int stop;
    int unlinked_under_us;
    unsigned segments;
};

static void *writer_main(void *arg)
{
    struct writer *wr = arg;
    static char chunk[64 << 10];
    char p[700];
    int fd = -1;
    size_t in_seg = 0;
    while (!atomic_load(&wr->stop)) {
        if (fd < 0 || in_seg >= MB) {
            if (fd >= 0)
                close(fd);
            snprintf(p, sizeof p, "%s/w/seg-%06u.cpt", root, wr->segments++);
            fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0640);
            if (fd < 0)
                break;
            in_seg = 0;
        }
        if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk)
            break;
        in_seg += sizeof chunk;
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_nlink == 0)
            wr->unlinked_under_us++;
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

START_TEST(concurrent_writer)
{
    make_session("w");
    make_session("old");
    for (unsigned g = 0; g < 8; g++)
        make_seg("old", g, MB, 1000 - g);
    struct live l = {.sessions = {"w"}};
    struct writer wr = {0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, writer_main, &wr), 0);
    int sweeps = 0;
    struct timespec start, now_ts;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        struct cuptimon_retention_stats st;
        char *err = NULL;
        int rc = cuptimon__retention_sweep(root, 3 * MB, 0, test_is_live, &l, &st, &err);
        ck_assert_msg(rc == 0 || rc == -ENOSPC, "rc %d: %s", rc, err ? err : "");
        ck_assert_msg(st.errors == 0, "%s", err ? err : "");
        free(err);
        sweeps++;
        clock_gettime(CLOCK_MONOTONIC, &now_ts);
    } while ((now_ts.tv_sec - start.tv_sec) * 1000 + (now_ts.tv_nsec - start.tv_nsec) / 1000000 <
             400);
    atomic_store(&wr.stop, 1);
    pthread_join(t, NULL);
    ck_assert_int_eq(wr.unlinked_under_us, 0);
    ck_assert_uint_gt(wr.segments, 1);
    ck_assert(!exists("old", NULL));
    /* Once the writer stopped, one more sweep brings the total under. */
    struct cuptimon_retention_stats st;
    ck_assert_int_eq(cuptimon__retention_sweep(root, 3 * MB, 0, test_is_live, &l, &st, NULL), 0);
    ck_assert_uint_le(disk_total(), 3 * MB);
    ck_assert(seg_exists("w", wr.segments - 1));
}
END_TEST

START_TEST(missing_root)
{
    struct cuptimon_retention_stats st;
    char *err = NULL;
    ck_assert_int_eq(
        cuptimon__retention_sweep("/nonexistent/cuptimon/archive", 1, 1, NULL, NULL, &st, &err),
        -ENOENT);
    ck_assert_ptr_nonnull(err);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/cuptimon/archive"));
    free(err);
    ck_assert_int_eq(cuptimon__retention_sweep(root, 1, 1, NULL, NULL, NULL, NULL), 0);
}
END_TEST

START_TEST(live_set)
{
    struct cuptimon_live_set ls;
    cuptimon__live_set_init(&ls);
    const char *names[] = {"m", "c", "x", "a", "q", "b"};
    for (size_t i = 0; i < 6; i++)
        ck_assert_int_eq(cuptimon__live_set_add(&ls, names[i]), 0);
    ck_assert_int_eq(cuptimon__live_set_add(&ls, "q"), -EEXIST);
    for (size_t i = 1; i < ls.len; i++)
        ck_assert_int_lt(strcmp(ls.names[i - 1], ls.names[i]), 0);
    ck_assert_int_eq(cuptimon__live_set_is_live(&ls, "x", NULL), 1);
    ck_assert_int_eq(cuptimon__live_set_is_live(&ls, "y", NULL), 0);
    ck_assert_int_eq(cuptimon__live_set_is_live(&ls, "x", "seg-000001.cpt"), 0);
    ck_assert_int_eq(cuptimon__live_set_remove(&ls, "x"), 0);
    ck_assert_int_eq(cuptimon__live_set_remove(&ls, "x"), -ENOENT);
    ck_assert_int_eq(cuptimon__live_set_is_live(&ls, "x", NULL), 0);

    /* In a sweep: the live session keeps its newest segment and its dir. */
    make_session("m");
    make_seg("m", 0, MB, 300);
    make_seg("m", 1, MB, 200);
    make_session("z");
    make_seg("z", 0, MB, 100);
    struct cuptimon_retention_stats st;
    ck_assert_int_eq(
        cuptimon__retention_sweep(root, 1, 0, cuptimon__live_set_is_live, &ls, &st, NULL), -ENOSPC);
    ck_assert(!seg_exists("m", 0) && seg_exists("m", 1) && !exists("z", NULL));
    cuptimon__live_set_destroy(&ls);
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("retention");
    TCase *t = tcase_create("retention");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, byte_cap_oldest_first_never_live);
    tcase_add_test(t, is_live_segment_is_kept);
    tcase_add_test(t, age_cap);
    tcase_add_test(t, sessions_without_segments);
    tcase_add_test(t, symlinks_are_not_followed);
    tcase_add_test(t, total_ends_under_cap);
    tcase_add_test(t, live_alone_exceed_cap);
    tcase_add_test(t, concurrent_writer);
    tcase_add_test(t, missing_root);
    tcase_add_test(t, live_set);
    suite_add_tcase(s, t);
    return s;
}
