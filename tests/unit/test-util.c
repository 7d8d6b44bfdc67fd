/* Unit tests of the small shared helpers: mkdir -p (proto/util.c) on new,
 * existing and blocked paths. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/util.h"

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cuptimon-util-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    close(fd);
}

/* ---- mkdir -p --------------------------------------------------------------- */

START_TEST(mkdir_p_creates_every_level)
{
    char p[400];
    struct stat st;
    snprintf(p, sizeof p, "%s/a/b/c", tmpdir);
    ck_assert_int_eq(cuptimon__mkdir_p(p, 0750), 0);
    ck_assert(is_dir(p));
    ck_assert_int_eq(stat(p, &st), 0);
    /* The mode asked for, less what the umask takes. */
    mode_t um = umask(0);
    umask(um);
    ck_assert_int_eq(st.st_mode & 0777, 0750 & ~um);
}
END_TEST

START_TEST(mkdir_p_existing_is_fine)
{
    char p[400];
    snprintf(p, sizeof p, "%s/x", tmpdir);
    ck_assert_int_eq(cuptimon__mkdir_p(tmpdir, 0750), 0);
    ck_assert_int_eq(cuptimon__mkdir_p(p, 0750), 0);
    ck_assert_int_eq(cuptimon__mkdir_p(p, 0750), 0);
    ck_assert(is_dir(p));
    ck_assert_int_eq(cuptimon__mkdir_p("/", 0750), 0);
}
END_TEST

START_TEST(mkdir_p_extra_slashes)
{
    char p[400], q[400];
    snprintf(p, sizeof p, "%s//d1///d2/", tmpdir);
    snprintf(q, sizeof q, "%s/d1/d2", tmpdir);
    ck_assert_int_eq(cuptimon__mkdir_p(p, 0750), 0);
    ck_assert(is_dir(q));
}
END_TEST

START_TEST(mkdir_p_relative)
{
    char cwd[4096];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(tmpdir), 0);
    ck_assert_int_eq(cuptimon__mkdir_p("r1/r2", 0750), 0);
    ck_assert(is_dir("r1/r2"));
    ck_assert_int_eq(chdir(cwd), 0);
}
END_TEST

START_TEST(mkdir_p_file_in_the_way)
{
    char f[400], p[400];
    snprintf(f, sizeof f, "%s/file", tmpdir);
    touch(f);
    /* The last component is a file: not a directory, though mkdir says EEXIST. */
    ck_assert_int_eq(cuptimon__mkdir_p(f, 0750), -ENOTDIR);
    /* A file above it. */
    snprintf(p, sizeof p, "%s/file/sub/dir", tmpdir);
    ck_assert_int_eq(cuptimon__mkdir_p(p, 0750), -ENOTDIR);
}
END_TEST

START_TEST(mkdir_p_symlinks)
{
    char d[400], l[400], f[400], lf[400], p[400];
    snprintf(d, sizeof d, "%s/real", tmpdir);
    snprintf(l, sizeof l, "%s/link", tmpdir);
    snprintf(f, sizeof f, "%s/file", tmpdir);
    snprintf(lf, sizeof lf, "%s/linkfile", tmpdir);
    ck_assert_int_eq(mkdir(d, 0750), 0);
    ck_assert_int_eq(symlink(d, l), 0);
    touch(f);
    ck_assert_int_eq(symlink(f, lf), 0);
    /* A link to a directory is a directory; a link to a file is not. */
    ck_assert_int_eq(cuptimon__mkdir_p(l, 0750), 0);
    snprintf(p, sizeof p, "%s/link/under", tmpdir);
    ck_assert_int_eq(cuptimon__mkdir_p(p, 0750), 0);
    snprintf(p, sizeof p, "%s/real/under", tmpdir);
    ck_assert(is_dir(p));
    ck_assert_int_eq(cuptimon__mkdir_p(lf, 0750), -ENOTDIR);
}
END_TEST

START_TEST(mkdir_p_errors)
{
    char p[400];
    ck_assert_int_eq(cuptimon__mkdir_p("", 0750), -EINVAL);
    ck_assert_int_eq(cuptimon__mkdir_p(NULL, 0750), -EINVAL);
    /* A parent the caller may not write in: the errno of mkdir, not 0. */
    if (geteuid() != 0) {
        char ro[400];
        snprintf(ro, sizeof ro, "%s/ro", tmpdir);
        ck_assert_int_eq(mkdir(ro, 0500), 0);
        snprintf(p, sizeof p, "%s/ro/a/b", tmpdir);
        ck_assert_int_eq(cuptimon__mkdir_p(p, 0750), -EACCES);
        ck_assert_int_eq(chmod(ro, 0700), 0);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("util");
    TCase *t = tcase_create("mkdir_p");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, mkdir_p_creates_every_level);
    tcase_add_test(t, mkdir_p_existing_is_fine);
    tcase_add_test(t, mkdir_p_extra_slashes);
    tcase_add_test(t, mkdir_p_relative);
    tcase_add_test(t, mkdir_p_file_in_the_way);
    tcase_add_test(t, mkdir_p_symlinks);
    tcase_add_test(t, mkdir_p_errors);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
