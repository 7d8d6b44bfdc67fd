/* Unit tests of the small shared helpers: mkdir -p (proto/util.c) on new,
 * existing and blocked paths; the typed JSON getters (archive/json-get.c)
 * on missing keys, JSON null, wrong types, non-objects and numeric
 * strings. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "archive/json-get.h"
#include "tests/unit/testlib.h"
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

/* ---- typed JSON getters ---------------------------------------------------------- */

static json_object *doc;

static void json_setup(void)
{
    doc = json_tokener_parse("{\"s\": \"text\", \"empty\": \"\", \"i\": 42, \"neg\": -7,"
                             " \"big\": 18446744073709551615, \"d\": 2.75, \"t\": true,"
                             " \"f\": false, \"n\": null, \"num\": \"123\", \"numneg\": \"-9\","
                             " \"junk\": \"12abc\", \"huge\": \"99999999999999999999\","
                             " \"arr\": [1, 2], \"obj\": {\"x\": 1}}");
    ck_assert_ptr_nonnull(doc);
}

static void json_teardown(void)
{
    json_object_put(doc);
}

START_TEST(json_get_member)
{
    ck_assert_ptr_nonnull(cuptimon__json_get(doc, "obj"));
    ck_assert_int_eq(cuptimon__json_int(cuptimon__json_get(doc, "obj"), "x", 0), 1);
    ck_assert_ptr_null(cuptimon__json_get(doc, "missing"));
    /* JSON null is absent. */
    ck_assert_ptr_null(cuptimon__json_get(doc, "n"));
    ck_assert_ptr_null(cuptimon__json_get(NULL, "s"));
    /* A non-object has no members. */
    ck_assert_ptr_null(cuptimon__json_get(cuptimon__json_get(doc, "arr"), "x"));
    ck_assert_ptr_null(cuptimon__json_get(cuptimon__json_get(doc, "s"), "x"));
}
END_TEST

START_TEST(json_str_is_strict)
{
    ck_assert_str_eq(cuptimon__json_str(doc, "s", "d"), "text");
    ck_assert_str_eq(cuptimon__json_str(doc, "empty", "d"), "");
    ck_assert_str_eq(cuptimon__json_str(doc, "missing", "d"), "d");
    ck_assert_ptr_null(cuptimon__json_str(doc, "missing", NULL));
    /* Other types are not turned into text. */
    ck_assert_str_eq(cuptimon__json_str(doc, "i", "d"), "d");
    ck_assert_str_eq(cuptimon__json_str(doc, "t", "d"), "d");
    ck_assert_str_eq(cuptimon__json_str(doc, "n", "d"), "d");
    ck_assert_str_eq(cuptimon__json_str(doc, "obj", "d"), "d");
    ck_assert_str_eq(cuptimon__json_str(NULL, "s", "d"), "d");
}
END_TEST

START_TEST(json_int_is_lenient)
{
    ck_assert_int_eq(cuptimon__json_int(doc, "i", -1), 42);
    ck_assert_int_eq(cuptimon__json_int(doc, "neg", -1), -7);
    ck_assert_int_eq(cuptimon__json_int(doc, "missing", -1), -1);
    ck_assert_int_eq(cuptimon__json_int(doc, "n", -1), -1);
    ck_assert_int_eq(cuptimon__json_int(NULL, "i", -1), -1);
    /* json-c's conversions: truncated, parsed, 0/1, 0 for the rest. */
    ck_assert_int_eq(cuptimon__json_int(doc, "d", -1), 2);
    ck_assert_int_eq(cuptimon__json_int(doc, "num", -1), 123);
    ck_assert_int_eq(cuptimon__json_int(doc, "t", -1), 1);
    ck_assert_int_eq(cuptimon__json_int(doc, "f", -1), 0);
    ck_assert_int_eq(cuptimon__json_int(doc, "arr", -1), 0);
    ck_assert_int_eq(cuptimon__json_int(doc, "big", -1), INT64_MAX);
}
END_TEST

START_TEST(json_uint_never_negative)
{
    ck_assert_uint_eq(cuptimon__json_uint(doc, "i", 5), 42);
    ck_assert_uint_eq(cuptimon__json_uint(doc, "neg", 5), 0);
    ck_assert_uint_eq(cuptimon__json_uint(doc, "numneg", 5), 0);
    ck_assert_uint_eq(cuptimon__json_uint(doc, "big", 5), UINT64_MAX);
    ck_assert_uint_eq(cuptimon__json_uint(doc, "missing", 5), 5);
    ck_assert_uint_eq(cuptimon__json_uint(doc, "n", 5), 5);
}
END_TEST

START_TEST(json_double_and_bool)
{
    ck_assert_double_eq(cuptimon__json_double(doc, "d", -1), 2.75);
    ck_assert_double_eq(cuptimon__json_double(doc, "i", -1), 42);
    ck_assert_double_eq(cuptimon__json_double(doc, "missing", -1), -1);
    ck_assert_double_eq(cuptimon__json_double(NULL, "d", -1), -1);
    ck_assert_int_eq(cuptimon__json_bool(doc, "t", 0), 1);
    ck_assert_int_eq(cuptimon__json_bool(doc, "f", 1), 0);
    ck_assert_int_eq(cuptimon__json_bool(doc, "i", 0), 1);
    ck_assert_int_eq(cuptimon__json_bool(doc, "empty", 1), 0);
    ck_assert_int_eq(cuptimon__json_bool(doc, "missing", 1), 1);
    ck_assert_int_eq(cuptimon__json_bool(doc, "n", 0), 0);
    ck_assert_int_eq(cuptimon__json_bool(doc, "n", 1), 1);
}
END_TEST

START_TEST(json_get_int_is_strict)
{
    int64_t v = 77;
    ck_assert_int_eq(cuptimon__json_get_int(doc, "i", &v), 0);
    ck_assert_int_eq(v, 42);
    ck_assert_int_eq(cuptimon__json_get_int(doc, "num", &v), 0);
    ck_assert_int_eq(v, 123);
    ck_assert_int_eq(cuptimon__json_get_int(doc, "numneg", &v), 0);
    ck_assert_int_eq(v, -9);
    v = 77;
    /* Absent, of another type, or not a whole decimal number: *out untouched. */
    ck_assert_int_eq(cuptimon__json_get_int(doc, "missing", &v), -ENOENT);
    ck_assert_int_eq(cuptimon__json_get_int(doc, "n", &v), -ENOENT);
    ck_assert_int_eq(cuptimon__json_get_int(NULL, "i", &v), -ENOENT);
    ck_assert_int_eq(cuptimon__json_get_int(doc, "d", &v), -EINVAL);
    ck_assert_int_eq(cuptimon__json_get_int(doc, "t", &v), -EINVAL);
    ck_assert_int_eq(cuptimon__json_get_int(doc, "arr", &v), -EINVAL);
    ck_assert_int_eq(cuptimon__json_get_int(doc, "empty", &v), -EINVAL);
    ck_assert_int_eq(cuptimon__json_get_int(doc, "junk", &v), -EINVAL);
    ck_assert_int_eq(cuptimon__json_get_int(doc, "huge", &v), -EINVAL);
    ck_assert_int_eq(v, 77);
    ck_assert_int_eq(cuptimon__json_int_strict(doc, "num", -1), 123);
    ck_assert_int_eq(cuptimon__json_int_strict(doc, "junk", -1), -1);
    ck_assert_int_eq(cuptimon__json_int_strict(doc, "d", -1), -1);
}
END_TEST

START_TEST(json_integer_takes_only_integers)
{
    /* A protocol integer is a JSON integer: a numeric string, a double, a
     * boolean and null are the default. */
    ck_assert_int_eq(cuptimon__json_integer(doc, "i", -1), 42);
    ck_assert_int_eq(cuptimon__json_integer(doc, "neg", 0), -7);
    ck_assert_int_eq(cuptimon__json_integer(doc, "numneg", -1), -1);
    ck_assert_int_eq(cuptimon__json_integer(doc, "num", -1), -1);
    ck_assert_int_eq(cuptimon__json_integer(doc, "d", -1), -1);
    ck_assert_int_eq(cuptimon__json_integer(doc, "t", -1), -1);
    ck_assert_int_eq(cuptimon__json_integer(doc, "n", -1), -1);
    ck_assert_int_eq(cuptimon__json_integer(doc, "missing", -2), -2);
    ck_assert_int_eq(cuptimon__json_integer(NULL, "i", -3), -3);
}
END_TEST

Suite *cuptimon__test_suite(void)
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
    t = tcase_create("json_get");
    tcase_add_checked_fixture(t, json_setup, json_teardown);
    tcase_add_test(t, json_get_member);
    tcase_add_test(t, json_str_is_strict);
    tcase_add_test(t, json_int_is_lenient);
    tcase_add_test(t, json_uint_never_negative);
    tcase_add_test(t, json_double_and_bool);
    tcase_add_test(t, json_get_int_is_strict);
    tcase_add_test(t, json_integer_takes_only_integers);
    suite_add_tcase(s, t);
    return s;
}
