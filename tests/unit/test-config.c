/* Unit tests of cuptimond.conf: defaults, a full file, every key with a bad
 * value, unknown keys, syntax errors, sizes and durations, a missing file,
 * command-line overrides (checked like the file's values) and the dump read
 * back. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include <json-c/json.h>

#include "daemon/conf.h"
#include "daemon/gpm-set.h"
#include "tests/unit/testlib.h"

static char tmpdir[256];
static char path[300];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cuptimon-config-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(path, sizeof path, "%s/cuptimond.conf", tmpdir);
}

static void teardown(void)
{
    unlink(path);
    ck_assert_int_eq(rmdir(tmpdir), 0);
}

static void write_conf(const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

/* Loads text over the defaults; returns the rc, *c and the message. */
static int load_text(const char *text, struct cuptimon_config *c, char **err)
{
    write_conf(text);
    cuptimon__config_defaults(c);
    *err = NULL;
    return cuptimon__config_load(path, c, err);
}

START_TEST(defaults)
{
    struct cuptimon_config c;
    memset(&c, 0xa5, sizeof c);
    cuptimon__config_defaults(&c);
    ck_assert_str_eq(c.socket, "");
    ck_assert_str_eq(c.control_socket, "");
    ck_assert_str_eq(c.output_dir, "");
    ck_assert(c.flush_period_s == 1.0);
    ck_assert(c.flush_timeout_s == 5.0);
    ck_assert_uint_eq(c.segment_size, 64ull << 20);
    ck_assert_int_eq(c.compress_level, 1);
    ck_assert_uint_eq(c.archive_max_bytes, 10ull << 30);
    ck_assert_uint_eq(c.archive_max_age_s, 7 * 86400);
    ck_assert(c.retention_period_s == 10.0);
    ck_assert_uint_eq(c.window_max_events, 50000000);
    ck_assert_str_eq(c.control_group, "");
    ck_assert_int_eq(c.has_control_gid, 0);
    ck_assert_int_eq(c.log_level, LOG_INFO);
    ck_assert_uint_eq(c.shim_pool_slots, 16);
    ck_assert_uint_eq(c.shim_slot_size, 4ull << 20);
    ck_assert_uint_eq(c.max_controls_per_user, 32);
    ck_assert_int_eq(c.aggregate, 1);
    ck_assert_str_eq(c.metrics_file, "");
    ck_assert(c.metrics_interval_s == 15.0);
    char *err = NULL;
    ck_assert_int_eq(cuptimon__config_check(&c, &err), 0);
    ck_assert_ptr_null(err);
}
END_TEST

START_TEST(full_valid_file)
{
    struct cuptimon_config c;
    char *err;
    int rc = load_text("/* every key, none at its default */\n"
                       "{\n"
                       "  \"socket\": \"/run/x/producer.sock\",\n"
                       "  \"control_socket\": \"/run/x/control.sock\",\n"
                       "  \"output_dir\": \"/srv/cuptimon\",\n"
                       "  \"flush_period_s\": 0.25,\n"
                       "  \"flush_timeout_s\": \"1500ms\",\n"
                       "  \"segment_size\": \"16M\",\n"
                       "  \"compress_level\": 0,\n"
                       "  \"archive_max_bytes\": \"2G\",\n"
                       "  \"archive_max_age_s\": \"36h\",\n"
                       "  \"retention_period_s\": 30,\n"
                       "  \"window_max_events\": 1000000,\n"
                       "  \"control_group\": \"root\",\n"
                       "  \"log_level\": \"debug\",  // comments are fine\n"
                       "  \"shim_pool_slots\": 64,\n"
                       "  \"shim_slot_size\": \"8M\",\n"
                       "  \"max_controls_per_user\": 0,\n"
                       "  \"aggregate\": false,\n"
                       "  \"metrics_file\": \"/var/lib/node_exporter/cuptimon.prom\",\n"
                       "  \"metrics_interval_s\": \"1m\"\n"
                       "}\n",
                       &c, &err);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err ? err : "");
    ck_assert_ptr_null(err);
    ck_assert_str_eq(c.socket, "/run/x/producer.sock");
    ck_assert_str_eq(c.control_socket, "/run/x/control.sock");
    ck_assert_str_eq(c.output_dir, "/srv/cuptimon");
    ck_assert(c.flush_period_s == 0.25);
    ck_assert(c.flush_timeout_s == 1.5);
    ck_assert_uint_eq(c.segment_size, 16ull << 20);
    ck_assert_int_eq(c.compress_level, 0);
    ck_assert_uint_eq(c.archive_max_bytes, 2ull << 30);
    ck_assert_uint_eq(c.archive_max_age_s, 36 * 3600);
    ck_assert(c.retention_period_s == 30.0);
    ck_assert_uint_eq(c.window_max_events, 1000000);
    ck_assert_str_eq(c.control_group, "root");
    ck_assert_int_eq(c.has_control_gid, 1);
    ck_assert_uint_eq(c.control_gid, 0);
    ck_assert_int_eq(c.log_level, LOG_DEBUG);
    ck_assert_uint_eq(c.shim_pool_slots, 64);
    ck_assert_uint_eq(c.shim_slot_size, 8ull << 20);
    ck_assert_uint_eq(c.max_controls_per_user, 0);
    ck_assert_int_eq(c.aggregate, 0);
    ck_assert_str_eq(c.metrics_file, "/var/lib/node_exporter/cuptimon.prom");
    ck_assert(c.metrics_interval_s == 60.0);
}
END_TEST

START_TEST(aggregate_values)
{
    static const struct {
        const char *json;
        int want;
    } ok[] = {{"true", 1},   {"false", 0},    {"\"yes\"", 1},
              {"\"no\"", 0}, {"\"true\"", 1}, {"\"false\"", 0}};
    struct cuptimon_config c;
    char text[128], *err;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(text, sizeof text, "{\"aggregate\": %s}", ok[i].json);
        cuptimon__config_defaults(&c);
        c.aggregate = !ok[i].want;
        write_conf(text);
        ck_assert_msg(cuptimon__config_load(path, &c, &err) == 0, "%s: %s", text, err);
        ck_assert_msg(c.aggregate == ok[i].want, "%s", text);
    }
    /* null is not a yes or no: there is no built-in rule to go back to. */
    ck_assert_int_eq(load_text("{\"aggregate\": null}", &c, &err), -EINVAL);
    ck_assert_msg(strstr(err, "aggregate: null is not a yes or no"), "%s", err);
    free(err);
}
END_TEST

START_TEST(empty_object_and_nulls)
{
    struct cuptimon_config c, d;
    char *err;
    ck_assert_int_eq(load_text("{}", &c, &err), 0);
    cuptimon__config_defaults(&d);
    ck_assert_int_eq(memcmp(&c, &d, sizeof c), 0);
    /* null puts a path or the group back to the built-in rule. */
    write_conf("{\"output_dir\": null, \"socket\": \"\", \"control_group\": null}");
    strcpy(c.output_dir, "/old");
    strcpy(c.socket, "/old.sock");
    ck_assert_int_eq(cuptimon__config_load(path, &c, &err), 0);
    ck_assert_str_eq(c.output_dir, "");
    ck_assert_str_eq(c.socket, "");
}
END_TEST

/* Each key with a value it must refuse: the message names the file, the
 * key and the value as written, and says what is allowed. */
static const struct {
    const char *key, *json, *shown, *hint;
} bad[] = {
    {"socket", "\"relative.sock\"", "\"relative.sock\"", "absolute path"},
    {"socket", "5", "5", "absolute path"},
    {"socket",
     "\"/run/cuptimon/"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaa.sock\"",
     "\"/run/cuptimon/aaaa", "at most 107 bytes"},
    {"control_socket", "true", "true", "absolute path"},
    {"output_dir", "\"var/lib\"", "\"var/lib\"", "absolute path"},
    {"output_dir", "[\"/a\"]", "[\"/a\"]", "absolute path"},
    {"flush_period_s", "-1", "-1", "is not a number of seconds in 0..3600"},
    {"flush_period_s", "3601", "3601", "0..3600"},
    {"flush_period_s", "\"soon\"", "\"soon\"", "number of seconds"},
    {"flush_period_s", "\"5 s\"", "\"5 s\"", "number of seconds"},
    {"flush_timeout_s", "0", "0", "0.01..600"},
    {"segment_size", "1000", "1000", "is not a size in 1M..64G"},
    {"segment_size", "\"64Q\"", "\"64Q\"", "suffix K, M, G or T"},
    {"segment_size", "\"1.5G\"", "\"1.5G\"", "size"},
    {"segment_size", "\"-64M\"", "\"-64M\"", "size"},
    {"segment_size", "67108864.5", "67108864.5", "size"},
    {"compress_level", "20", "20", "whole number in 0..19"},
    {"compress_level", "1.5", "1.5", "whole number"},
    {"compress_level", "\"fast\"", "\"fast\"", "whole number"},
    {"archive_max_bytes", "-1", "-1", "0 = no byte cap"},
    {"archive_max_bytes", "\"lots\"", "\"lots\"", "size"},
    {"archive_max_age_s", "-5", "-5", "0 = no age cap"},
    {"archive_max_age_s", "1.5", "1.5", "whole number of seconds"},
    {"archive_max_age_s", "\"forever\"", "\"forever\"", "\"7d\""},
    {"retention_period_s", "0", "0", "1..3600"},
    {"window_max_events", "10", "10", "1000..1000000000000"},
    {"window_max_events", "\"many\"", "\"many\"", "whole number"},
    {"control_group", "\"no-such-group-cuptimon-test\"", "\"no-such-group-cuptimon-test\"",
     "not a group of this system"},
    {"control_group", "\"bad name!\"", "\"bad name!\"", "not a group"},
    {"control_group", "-3", "-3", "not a group"},
    {"log_level", "\"verbose\"", "\"verbose\"", "err, warning, notice, info or debug"},
    {"log_level", "7", "7", "log level"},
    {"shim_pool_slots", "1", "1", "2..4096"},
    {"shim_pool_slots", "5000", "5000", "2..4096"},
    {"shim_slot_size", "\"4097K\"", "\"4097K\"", "multiple of 4096"},
    {"shim_slot_size", "\"512M\"", "\"512M\"", "64K..256M"},
    {"max_controls_per_user", "-1", "-1", "is not a whole number in 0..1000000; 0 = no cap"},
    {"max_controls_per_user", "\"lots\"", "\"lots\"", "whole number"},
    {"aggregate", "\"maybe\"", "\"maybe\"", "is not a yes or no: use true or false"},
    {"aggregate", "1", "1", "is not a yes or no"},
    {"aggregate", "\"\"", "\"\"", "yes or no"},
    {"metrics_file", "\"cuptimon.prom\"", "\"cuptimon.prom\"",
     "is not an absolute path of at most 511 bytes (or null for none)"},
    {"metrics_file", "false", "false", "absolute path"},
    {"metrics_interval_s", "0", "0", "is not a number of seconds in 1..3600"},
    {"metrics_interval_s", "\"2h\"", "\"2h\"", "1..3600"},
    {"metrics_interval_s", "\"often\"", "\"often\"", "number of seconds"},
};

START_TEST(bad_value)
{
    struct cuptimon_config c, d;
    char text[512], *err;
    snprintf(text, sizeof text, "{\n  \"%s\": %s\n}\n", bad[_i].key, bad[_i].json);
    int rc = load_text(text, &c, &err);
    ck_assert_msg(rc == -EINVAL, "%s = %s: rc %d", bad[_i].key, bad[_i].json, rc);
    ck_assert_ptr_nonnull(err);
    char want[400];
    snprintf(want, sizeof want, "%s: %s: ", path, bad[_i].key);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "'%s' does not start with '%s'", err,
                  want);
    ck_assert_msg(strstr(err, bad[_i].shown), "'%s' does not show the value %s", err,
                  bad[_i].shown);
    ck_assert_msg(strstr(err, bad[_i].hint), "'%s' does not say '%s'", err, bad[_i].hint);
    /* A refused file changes nothing. */
    cuptimon__config_defaults(&d);
    ck_assert_int_eq(memcmp(&c, &d, sizeof c), 0);
    free(err);
}
END_TEST

/* The same values given as a command-line option would give them (the text
 * of a JSON string, or a number as written) go through the same checks,
 * with the same message after the value.  Values that only JSON can spell
 * (true, arrays, null) are skipped. */
START_TEST(bad_value_from_command_line)
{
    const char *json = bad[_i].json;
    char text[512], *err = NULL, *file_err = NULL;
    size_t n = strlen(json);
    if (json[0] == '"' && n >= 2) {
        snprintf(text, sizeof text, "%.*s", (int)(n - 2), json + 1);
    } else if (json[0] == '-' || (json[0] >= '0' && json[0] <= '9')) {
        snprintf(text, sizeof text, "%s", json);
    } else {
        return;
    }
    struct cuptimon_config c, d;
    cuptimon__config_defaults(&c);
    d = c;
    int rc = cuptimon__config_set(&c, bad[_i].key, text, &err);
    ck_assert_msg(rc == -EINVAL, "%s = '%s': rc %d", bad[_i].key, text, rc);
    ck_assert_int_eq(memcmp(&c, &d, sizeof c), 0);
    char want[600];
    snprintf(want, sizeof want, "%s: '%s' ", bad[_i].key, text);
    if (strlen(text) <= 80)
        ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "'%s' does not start with '%s'", err,
                      want);
    ck_assert_msg(strstr(err, bad[_i].hint), "'%s' does not say '%s'", err, bad[_i].hint);
    /* What follows the value is the file's message, word for word. */
    snprintf(text, sizeof text, "{\"%s\": %s}", bad[_i].key, json);
    ck_assert_int_eq(load_text(text, &c, &file_err), -EINVAL);
    const char *what = strstr(err, "' is ");
    ck_assert_ptr_nonnull(what);
    ck_assert_msg(strstr(file_err, what + 2), "'%s' and '%s' differ", err, file_err);
    free(err);
    free(file_err);
}
END_TEST

START_TEST(bad_value_example_message)
{
    struct cuptimon_config c;
    char *err, want[400];
    ck_assert_int_eq(load_text("{\"flush_period_s\": -1}", &c, &err), -EINVAL);
    snprintf(want, sizeof want, "%s: flush_period_s: -1 is not a number of seconds in 0..3600",
             path);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
    free(err);
}
END_TEST

START_TEST(one_bad_key_keeps_everything)
{
    struct cuptimon_config c, d;
    char *err;
    cuptimon__config_defaults(&c);
    c.compress_level = 7;
    d = c;
    write_conf("{\"compress_level\": 3, \"log_level\": \"debug\", \"segment_size\": \"2X\"}");
    ck_assert_int_eq(cuptimon__config_load(path, &c, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "segment_size"));
    ck_assert_int_eq(memcmp(&c, &d, sizeof c), 0);
    free(err);
}
END_TEST

START_TEST(unknown_key)
{
    struct cuptimon_config c;
    char *err;
    ck_assert_int_eq(load_text("{\"flush_period\": 2}", &c, &err), -EINVAL);
    ck_assert_msg(strstr(err, "unknown key \"flush_period\""), "%s", err);
    ck_assert_msg(strstr(err, "did you mean flush_period_s?"), "%s", err);
    /* It lists every key of the table, whole: the keys are those the
     * dump prints (it walks the same table), each named in the hint as
     * an item of its list, "key, " or "key)". */
    struct cuptimon_config def;
    cuptimon__config_defaults(&def);
    char *dump = cuptimon__config_dump(&def);
    json_object *all = json_tokener_parse(dump);
    ck_assert_ptr_nonnull(all);
    const char *list = strstr(err, "(known keys: ");
    ck_assert_msg(list, "%s", err);
    size_t nkeys = 0;
    json_object_object_foreach(all, key, val)
    {
        (void)val;
        char item[128];
        nkeys++;
        snprintf(item, sizeof item, " %s,", key);
        int listed = strstr(list, item) != NULL;
        snprintf(item, sizeof item, " %s)", key);
        listed = listed || strstr(list, item) != NULL;
        ck_assert_msg(listed, "'%s' does not list %s", err, key);
    }
    ck_assert_uint_ge(nkeys, 30); /* the dump was read: 34 keys today */
    json_object_put(all);
    free(dump);
    free(err);
    ck_assert_int_eq(load_text("{\"zzzzzzzz\": 2}", &c, &err), -EINVAL);
    ck_assert_msg(strstr(err, "\"zzzzzzzz\"") && !strstr(err, "did you mean"), "%s", err);
    free(err);
}
END_TEST

START_TEST(syntax_errors)
{
    struct cuptimon_config c;
    char *err;
    /* A missing ':' on line 3. */
    ck_assert_int_eq(
        load_text("{\n  \"flush_period_s\": 1,\n  \"log_level\" \"info\"\n}\n", &c, &err), -EINVAL);
    char want[400];
    snprintf(want, sizeof want, "%s:3:", path);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
    ck_assert_msg(strstr(err, "JSON syntax error") && strstr(err, "byte offset"), "%s", err);
    free(err);
    /* Cut short. */
    ck_assert_int_eq(load_text("{\n  \"flush_period_s\": 1,\n", &c, &err), -EINVAL);
    ck_assert_msg(strstr(err, "JSON syntax error"), "%s", err);
    free(err);
    /* Text after the object. */
    ck_assert_int_eq(load_text("{}\n}\n", &c, &err), -EINVAL);
    snprintf(want, sizeof want, "%s:2:1: JSON syntax error", path);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
    free(err);
    /* Not an object. */
    ck_assert_int_eq(load_text("[1, 2]", &c, &err), -EINVAL);
    ck_assert_msg(strstr(err, "one JSON object") && strstr(err, "array"), "%s", err);
    free(err);
    ck_assert_int_eq(load_text("5", &c, &err), -EINVAL);
    ck_assert_msg(strstr(err, "one JSON object"), "%s", err);
    free(err);
    ck_assert_int_eq(load_text("", &c, &err), -EINVAL);
    ck_assert_msg(strstr(err, "empty") && strstr(err, "{}"), "%s", err);
    free(err);
    /* Comments may follow the object. */
    ck_assert_int_eq(load_text("{} // the end\n/* really */\n", &c, &err), 0);
    /* A NUL byte. */
    FILE *f = fopen(path, "w");
    fwrite("{}\0", 1, 3, f);
    fclose(f);
    ck_assert_int_eq(cuptimon__config_load(path, &c, &err), -EINVAL);
    ck_assert_msg(strstr(err, "NUL"), "%s", err);
    free(err);
}
END_TEST

START_TEST(sizes_with_suffixes)
{
    static const struct {
        const char *json;
        uint64_t bytes;
    } ok[] = {
        {"1048576", 1ull << 20},   {"\"1048576\"", 1ull << 20}, {"\"1024K\"", 1ull << 20},
        {"\"1024k\"", 1ull << 20}, {"\"64M\"", 64ull << 20},    {"\"64MiB\"", 64ull << 20},
        {"\"64MB\"", 64ull << 20}, {"\"3G\"", 3ull << 30},      {"\"1g\"", 1ull << 30},
        {"\"64G\"", 64ull << 30},  {"2097152.0", 2ull << 20},   {"\"2097152B\"", 2ull << 20},
    };
    struct cuptimon_config c;
    char text[200], *err;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(text, sizeof text, "{\"segment_size\": %s, \"archive_max_bytes\": 0}", ok[i].json);
        int rc = load_text(text, &c, &err);
        ck_assert_msg(rc == 0, "%s: %s", ok[i].json, err ? err : "");
        ck_assert_uint_eq(c.segment_size, ok[i].bytes);
    }
    /* The byte cap: terabytes, and 0 for none. */
    ck_assert_int_eq(load_text("{\"archive_max_bytes\": \"2T\"}", &c, &err), 0);
    ck_assert_uint_eq(c.archive_max_bytes, 2ull << 40);
    ck_assert_int_eq(load_text("{\"archive_max_bytes\": 0}", &c, &err), 0);
    ck_assert_uint_eq(c.archive_max_bytes, 0);
    static const char *const no[] = {"\"64 M\"",     "\"M\"", "\"64MX\"",
                                     "\"0x100000\"", "\"\"",  "\"64Mi\"",
                                     "\"1e6\"",      "null",  "{}"};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        snprintf(text, sizeof text, "{\"segment_size\": %s}", no[i]);
        ck_assert_msg(load_text(text, &c, &err) == -EINVAL, "%s was accepted", no[i]);
        ck_assert_ptr_nonnull(strstr(err, "segment_size"));
        free(err);
    }
}
END_TEST

START_TEST(durations)
{
    static const struct {
        const char *json;
        uint64_t s;
    } ok[] = {{"0", 0},           {"3600", 3600},      {"\"90s\"", 90},
              {"\"5m\"", 300},    {"\"5min\"", 300},   {"\"12h\"", 43200},
              {"\"7d\"", 604800}, {"\"2w\"", 1209600}, {"\"1.5h\"", 5400}};
    struct cuptimon_config c;
    char text[200], *err;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(text, sizeof text, "{\"archive_max_age_s\": %s}", ok[i].json);
        ck_assert_msg(load_text(text, &c, &err) == 0, "%s: %s", ok[i].json, err ? err : "");
        ck_assert_uint_eq(c.archive_max_age_s, ok[i].s);
    }
    ck_assert_int_eq(load_text("{\"flush_period_s\": \"250ms\"}", &c, &err), 0);
    ck_assert(c.flush_period_s == 0.25);
    ck_assert_int_eq(load_text("{\"flush_period_s\": \"2h\"}", &c, &err), -EINVAL);
    ck_assert_msg(strstr(err, "\"2h\" is not a number of seconds in 0..3600"), "%s", err);
    free(err);
    ck_assert_int_eq(load_text("{\"flush_period_s\": \"1x\"}", &c, &err), -EINVAL);
    free(err);
    ck_assert_int_eq(load_text("{\"flush_period_s\": \"nan\"}", &c, &err), -EINVAL);
    free(err);
}
END_TEST

START_TEST(cap_must_hold_a_segment)
{
    struct cuptimon_config c;
    char *err;
    ck_assert_int_eq(
        load_text("{\"segment_size\": \"64M\", \"archive_max_bytes\": \"32M\"}", &c, &err),
        -EINVAL);
    ck_assert_msg(strstr(err, "archive_max_bytes: 33554432 is smaller than segment_size "
                              "(67108864)"),
                  "%s", err);
    free(err);
    ck_assert_int_eq(
        load_text("{\"segment_size\": \"16M\", \"archive_max_bytes\": \"16M\"}", &c, &err), 0);
}
END_TEST

START_TEST(missing_file)
{
    struct cuptimon_config c, d;
    char *err = (char *)"untouched";
    cuptimon__config_defaults(&c);
    d = c;
    ck_assert_int_eq(cuptimon__config_load("/nonexistent/cuptimon/cuptimond.conf", &c, &err),
                     -ENOENT);
    ck_assert_ptr_null(err);
    ck_assert_int_eq(memcmp(&c, &d, sizeof c), 0);
    /* A directory is not a configuration file. */
    ck_assert_int_eq(cuptimon__config_load(tmpdir, &c, &err), -EINVAL);
    ck_assert_msg(strstr(err, "not a regular file"), "%s", err);
    free(err);
}
END_TEST

START_TEST(set_from_command_line)
{
    struct cuptimon_config c;
    char *err = NULL;
    cuptimon__config_defaults(&c);
    ck_assert_int_eq(cuptimon__config_set(&c, "flush_period_s", "2.5", &err), 0);
    ck_assert(c.flush_period_s == 2.5);
    ck_assert_int_eq(cuptimon__config_set(&c, "segment_size", "128M", &err), 0);
    ck_assert_uint_eq(c.segment_size, 128ull << 20);
    ck_assert_int_eq(cuptimon__config_set(&c, "archive_max_age_s", "3d", &err), 0);
    ck_assert_uint_eq(c.archive_max_age_s, 3 * 86400);
    ck_assert_int_eq(cuptimon__config_set(&c, "log_level", "warning", &err), 0);
    ck_assert_int_eq(c.log_level, LOG_WARNING);
    ck_assert_int_eq(cuptimon__config_set(&c, "output_dir", "/data/cuptimon", &err), 0);
    ck_assert_str_eq(c.output_dir, "/data/cuptimon");
    ck_assert_int_eq(cuptimon__config_set(&c, "output_dir", "", &err), 0);
    ck_assert_str_eq(c.output_dir, "");
    ck_assert_int_eq(cuptimon__config_set(&c, "control_group", "root", &err), 0);
    ck_assert_int_eq(c.has_control_gid, 1);
    ck_assert_int_eq(cuptimon__config_set(&c, "control_group", "none", &err), 0);
    ck_assert_int_eq(c.has_control_gid, 0);
    ck_assert_str_eq(c.control_group, "");
    ck_assert_int_eq(cuptimon__config_set(&c, "control_group", "4242", &err), 0);
    ck_assert_int_eq(c.has_control_gid, 1);
    ck_assert_uint_eq(c.control_gid, 4242);

    struct cuptimon_config before = c;
    ck_assert_int_eq(cuptimon__config_set(&c, "compress_level", "99", &err), -EINVAL);
    ck_assert_str_eq(err, "compress_level: '99' is not a whole number in 0..19; 0 = store raw");
    free(err);
    ck_assert_int_eq(memcmp(&c, &before, sizeof c), 0);
    ck_assert_int_eq(cuptimon__config_set(&c, "aggregate", "no", &err), 0);
    ck_assert_int_eq(c.aggregate, 0);
    ck_assert_int_eq(cuptimon__config_set(&c, "metrics_file", "/run/m.prom", &err), 0);
    ck_assert_str_eq(c.metrics_file, "/run/m.prom");
    ck_assert_int_eq(cuptimon__config_set(&c, "metrics_interval_s", "30", &err), 0);
    ck_assert(c.metrics_interval_s == 30.0);
    before = c;
    ck_assert_int_eq(cuptimon__config_set(&c, "metrics_interval_s", "0.5", &err), -EINVAL);
    ck_assert_msg(
        strncmp(err, "metrics_interval_s: '0.5' is not a number of seconds in 1..3600",
                strlen("metrics_interval_s: '0.5' is not a number of seconds in 1..3600")) == 0,
        "%s", err);
    free(err);
    ck_assert_int_eq(cuptimon__config_set(&c, "aggregate", "off", &err), -EINVAL);
    ck_assert_str_eq(err, "aggregate: 'off' is not a yes or no: use true or false (or the strings "
                          "\"yes\" or \"no\")");
    free(err);
    ck_assert_int_eq(memcmp(&c, &before, sizeof c), 0);
    ck_assert_int_eq(cuptimon__config_set(&c, "segmentsize", "1M", &err), -ENOENT);
    ck_assert_msg(strstr(err, "unknown key \"segmentsize\"; did you mean segment_size?"), "%s",
                  err);
    free(err);
}
END_TEST

START_TEST(dump_reads_back)
{
    struct cuptimon_config c, d;
    char *err;
    ck_assert_int_eq(load_text("{\"output_dir\": \"/srv/c\", \"flush_period_s\": 0.1,"
                               " \"segment_size\": \"8M\", \"control_group\": \"root\","
                               " \"log_level\": \"notice\", \"archive_max_age_s\": \"1d\"}",
                               &c, &err),
                     0);
    char *dump = cuptimon__config_dump(&c);
    ck_assert_ptr_nonnull(dump);
    ck_assert_ptr_nonnull(strstr(dump, "\"output_dir\": \"/srv/c\""));
    ck_assert_ptr_nonnull(strstr(dump, "\"socket\": null"));
    ck_assert_ptr_nonnull(strstr(dump, "\"flush_period_s\": 0.1"));
    ck_assert_ptr_nonnull(strstr(dump, "\"segment_size\": 8388608"));
    ck_assert_ptr_nonnull(strstr(dump, "\"log_level\": \"notice\""));
    ck_assert_ptr_nonnull(strstr(dump, "\"archive_max_age_s\": 86400"));
    ck_assert_ptr_nonnull(strstr(dump, "\"aggregate\": true"));
    ck_assert_ptr_nonnull(strstr(dump, "\"metrics_file\": null"));
    ck_assert_ptr_nonnull(strstr(dump, "\"metrics_interval_s\": 15.0"));
    write_conf(dump);
    cuptimon__config_defaults(&d);
    ck_assert_msg(cuptimon__config_load(path, &d, &err) == 0, "%s\n%s", err ? err : "", dump);
    ck_assert_int_eq(memcmp(&c, &d, sizeof c), 0);
    char *again = cuptimon__config_dump(&d);
    ck_assert_str_eq(dump, again);
    free(again);
    free(dump);
    /* The defaults too, read over a different configuration: strings are
     * zero-padded, so memcmp tells equal settings. */
    cuptimon__config_defaults(&c);
    dump = cuptimon__config_dump(&c);
    write_conf(dump);
    ck_assert_int_eq(cuptimon__config_load(path, &d, &err), 0);
    ck_assert_int_eq(memcmp(&c, &d, sizeof c), 0);
    free(dump);
}
END_TEST

START_TEST(default_path)
{
    char p[512];
    ck_assert_int_eq(cuptimon__config_default_path(p, sizeof p), 0);
    size_t n = strlen(p), m = strlen("/cuptimon/cuptimond.conf");
    ck_assert(n > m && strcmp(p + n - m, "/cuptimon/cuptimond.conf") == 0);
    if (geteuid() != 0) {
        setenv("XDG_CONFIG_HOME", "/xdg", 1);
        ck_assert_int_eq(cuptimon__config_default_path(p, sizeof p), 0);
        ck_assert_str_eq(p, "/xdg/cuptimon/cuptimond.conf");
    }
    ck_assert_int_eq(cuptimon__config_default_path(p, 8), -ENAMETOOLONG);
}
END_TEST

/* gpu_metrics_set (issue 48): a word that is neither a key nor a CUPTI
 * name is refused before anything runs, the message naming it and the keys;
 * keys are taken in any case. */
START_TEST(gpu_metrics_set_words)
{
    struct cuptimon_config c;
    char *err = NULL;
    ck_assert_int_eq(load_text("{\"gpu_metrics_set\": \"sm_actve, dram_active\"}", &c, &err),
                     -EINVAL);
    ck_assert_ptr_nonnull(err);
    ck_assert_ptr_nonnull(strstr(err, "gpu_metrics_set: 'sm_actve' is not a metric"));
    ck_assert_ptr_nonnull(strstr(err, "sm_active, sm_occupancy, tensor_active, dram_active"));
    free(err);
    ck_assert_int_eq(
        load_text("{\"gpu_metrics_set\": \"SM_Active,DRAM_ACTIVE,Sm_Clock\"}", &c, &err), 0);
    ck_assert_ptr_null(err);
    /* A CUPTI name is the chip's to check, when sampling starts. */
    ck_assert_int_eq(
        load_text("{\"gpu_metrics_set\": \"lts__t_bytes.sum.per_second, "
                  "TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed\"}",
                  &c, &err),
        0);
    ck_assert_int_eq(cuptimon__gpm_known_find("Tensor_Active"),
                     cuptimon__gpm_known_find("tensor_active"));
    ck_assert_int_eq(cuptimon__gpm_known_find("sm__pipe_tensor_cycles_active_realtime.avg.pct_of_"
                                              "peak_sustained_elapsed"),
                     cuptimon__gpm_known_find("tensor_active"));
    ck_assert_int_eq(cuptimon__gpm_known_find("sm_actve"), -1);
    ck_assert_int_eq(cuptimon__gpm_is_cupti_name("sm_actve"), 0);
    ck_assert_int_eq(cuptimon__gpm_is_cupti_name("__x"), 0);
    ck_assert_int_eq(cuptimon__gpm_is_cupti_name("SM__x"), 0);
    ck_assert_int_eq(cuptimon__gpm_is_cupti_name("dram__throughput.avg"), 1);
}
END_TEST

/* The sets the H100 measured (docs/gpu-runs/20261207-h100-sandbox-pm-cost):
 * costly exactly when the non-realtime tensor pipe counter (sm__ or smsp__)
 * is configured with SM active or warps active. */
static const struct {
    const char *set;
    int costly;
} judged[] = {
    {"tensor_active,sm_active", 1},
    {"sm_occupancy, TENSOR_ACTIVE, dram_active", 1},
    {"smsp__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,"
     "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
     1},
    {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,"
     "sm__warps_active.avg.pct_of_peak_sustained_elapsed",
     1},
    {"sm_active,sm_occupancy,dram_active,dram_read_bytes,dram_write_bytes,gr_engine_active,"
     "pcie_rx_bytes,pcie_tx_bytes,sm_clock",
     0},
    {"tensor_active,dram_active,dram_read_bytes,dram_write_bytes,gr_engine_active,pcie_rx_bytes,"
     "pcie_tx_bytes,sm_clock",
     0},
    {"tensor_active", 0},
    {"sm_active,sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed", 0},
    {"TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed,"
     "TPC.TriageCompute.tpc__warps_active_realtime.avg.pct_of_peak_sustained_elapsed,"
     "TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
     0},
};

START_TEST(gpu_metrics_set_judged)
{
    struct cuptimon_gpm_judgement j;
    ck_assert_int_eq(cuptimon__gpm_set_judge(judged[_i].set, &j), 0);
    ck_assert_msg(j.costly == judged[_i].costly, "%s: judged %s", judged[_i].set,
                  j.costly ? "costly" : "not costly");
    if (j.costly)
        ck_assert_ptr_nonnull(strstr(j.why_costly, "in one configuration"));
    ck_assert_int_eq(cuptimon__gpm_set_judge("sm_active,no_such,also_bad", &j), -EINVAL);
    ck_assert_uint_eq(j.nunknown, 2);
    ck_assert_str_eq(j.unknown, "'no_such', 'also_bad'");
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("config");
    TCase *t = tcase_create("config");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, defaults);
    tcase_add_test(t, full_valid_file);
    tcase_add_test(t, aggregate_values);
    tcase_add_test(t, empty_object_and_nulls);
    tcase_add_loop_test(t, bad_value, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_loop_test(t, bad_value_from_command_line, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(t, bad_value_example_message);
    tcase_add_test(t, one_bad_key_keeps_everything);
    tcase_add_test(t, unknown_key);
    tcase_add_test(t, syntax_errors);
    tcase_add_test(t, sizes_with_suffixes);
    tcase_add_test(t, durations);
    tcase_add_test(t, cap_must_hold_a_segment);
    tcase_add_test(t, missing_file);
    tcase_add_test(t, set_from_command_line);
    tcase_add_test(t, dump_reads_back);
    tcase_add_test(t, default_path);
    tcase_add_test(t, gpu_metrics_set_words);
    tcase_add_loop_test(t, gpu_metrics_set_judged, 0, (int)(sizeof judged / sizeof judged[0]));
    suite_add_tcase(s, t);
    return s;
}
