/*
 * cuptimond.conf: defaults, the JSON file, command-line overrides, and the
 * effective configuration printed back.  Every key is described once, in
 * the table below; the parser, the error messages, the dump and the list
 * of known keys all come from it.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <json-c/json.h>

#include "conf.h"
#include "gpm-set.h"
#include "log.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif

enum key_type {
    T_PATH,    /* absolute path, "" / null = the built-in rule */
    T_SECONDS, /* double seconds; number, or text with a unit */
    T_SIZE,    /* uint64 bytes; number, or text with K/M/G/T */
    T_COUNT,   /* integer */
    T_GROUP,   /* group name or gid, null = none */
    T_LEVEL,   /* syslog level name */
    T_BOOL,    /* int 0/1; JSON true/false, or text yes/no/true/false */
    T_WORDS,   /* words of [A-Za-z0-9_.-] separated by commas; "" / null = the default */
};

struct key {
    const char *name;
    enum key_type type;
    size_t off;  /* of the field in struct cuptimon_config */
    size_t size; /* T_PATH: the char array's size; numbers: the field's size */
    double min, max;
    unsigned flags;
    const char *note; /* appended to the range in error messages; for a T_PATH,
                       * what null stands for */
};

#define F_WHOLE 1u /* T_SECONDS stored as uint64_t: whole seconds only */
#define F_PAGE  2u /* T_SIZE: a multiple of 4096 */

#define FIELD(f) offsetof(struct cuptimon_config, f), sizeof(((struct cuptimon_config *)0)->f)

static const struct key keys[] = {
    {"socket", T_PATH, FIELD(socket), 0, 0, 0, NULL},
    {"control_socket", T_PATH, FIELD(control_socket), 0, 0, 0, NULL},
    {"output_dir", T_PATH, FIELD(output_dir), 0, 0, 0, NULL},
    {"flush_period_s", T_SECONDS, FIELD(flush_period_s), 0, 3600, 0, "0 = never"},
    {"flush_timeout_s", T_SECONDS, FIELD(flush_timeout_s), 0.01, 600, 0, NULL},
    {"segment_size", T_SIZE, FIELD(segment_size), 1 << 20, 64.0 * (1ull << 30), 0, NULL},
    {"compress_level", T_COUNT, FIELD(compress_level), 0, 19, 0, "0 = store raw"},
    {"archive_max_bytes", T_SIZE, FIELD(archive_max_bytes), 0, (double)(1ull << 50), 0,
     "0 = no byte cap"},
    {"archive_max_age_s", T_SECONDS, FIELD(archive_max_age_s), 0, 10 * 366 * 86400.0, F_WHOLE,
     "0 = no age cap"},
    {"retention_period_s", T_SECONDS, FIELD(retention_period_s), 1, 3600, 0, NULL},
    {"window_max_events", T_COUNT, FIELD(window_max_events), 1000, 1e12, 0, NULL},
    {"window_gzip_level", T_COUNT, FIELD(window_gzip_level), 0, 9, 0, "0 = plain JSON"},
    {"window_per_process", T_BOOL, FIELD(window_per_process), 0, 0, 0, NULL},
    {"window_end_timeout_s", T_SECONDS, FIELD(window_end_timeout_s), 0.01, 3600, 0, NULL},
    {"inflight_warn_s", T_SECONDS, FIELD(inflight_warn_s), 0, 86400, 0, "0 = never"},
    {"control_idle_timeout_s", T_SECONDS, FIELD(control_idle_s), 1, 86400, 0, NULL},
    {"control_group", T_GROUP, FIELD(control_group), 0, 0, 0, NULL},
    {"log_level", T_LEVEL, FIELD(log_level), 0, 0, 0, NULL},
    {"shim_pool_slots", T_COUNT, FIELD(shim_pool_slots), 2, 4096, 0, NULL},
    {"shim_slot_size", T_SIZE, FIELD(shim_slot_size), 64 << 10, 256 << 20, F_PAGE, NULL},
    {"max_pool_bytes", T_SIZE, FIELD(max_pool_bytes), 1 << 20, (double)(1ull << 40), F_PAGE, NULL},
    {"max_sessions_per_user", T_COUNT, FIELD(max_sessions_per_user), 0, 1e6, 0, "0 = no cap"},
    {"max_controls_per_user", T_COUNT, FIELD(max_controls_per_user), 0, 1e6, 0, "0 = no cap"},
    {"aggregate", T_BOOL, FIELD(aggregate), 0, 0, 0, NULL},
    {"metrics_file", T_PATH, FIELD(metrics_file), 0, 0, 0, "none"},
    {"metrics_interval_s", T_SECONDS, FIELD(metrics_interval_s), 1, 3600, 0, NULL},
    {"gpu_metrics", T_BOOL, FIELD(gpu_metrics), 0, 0, 0, NULL},
    {"gpu_metrics_interval_s", T_SECONDS, FIELD(gpu_metrics_interval_s), 0.001, 60, 0, NULL},
    {"gpu_metrics_window_interval_s", T_SECONDS, FIELD(gpu_metrics_window_interval_s), 0, 60, 0,
     "0 = the same as gpu_metrics_interval_s"},
    {"gpu_metrics_retry_s", T_SECONDS, FIELD(gpu_metrics_retry_s), 0.1, 3600, 0, NULL},
    {"gpu_metrics_set", T_WORDS, FIELD(gpu_metrics_set), 0, 0, 0, "the default set"},
    {"gpu_metrics_yield_to", T_WORDS, FIELD(gpu_metrics_yield_to), 0, 0, 0, "none"},
    {"gpu_metrics_libcupti", T_PATH, FIELD(gpu_metrics_libcupti), 0, 0, 0, "the search"},
    {"gpu_metrics_libcuda", T_PATH, FIELD(gpu_metrics_libcuda), 0, 0, 0, "libcuda.so.1"},
};
#define NKEYS (sizeof keys / sizeof keys[0])

static const char *const level_names[] = {"emerg",   "alert",  "crit", "err",
                                          "warning", "notice", "info", "debug"};

void cuptimon__config_defaults(struct cuptimon_config *c)
{
    memset(c, 0, sizeof *c);
    c->flush_period_s = 1.0;
    c->flush_timeout_s = 5.0;
    c->segment_size = 64ull << 20;
    c->compress_level = 1;
    c->archive_max_bytes = 10ull << 30;
    c->archive_max_age_s = 7 * 86400;
    c->retention_period_s = 10.0;
    c->window_max_events = 50000000;
    c->window_end_timeout_s = 10.0;
    c->inflight_warn_s = 60.0;
    c->control_idle_s = 60.0;
    c->log_level = LOG_INFO;
    c->shim_pool_slots = 16;
    c->shim_slot_size = 4ull << 20;
    c->max_pool_bytes = 1ull << 30;
    c->max_sessions_per_user = 256;
    c->max_controls_per_user = 32;
    c->aggregate = 1;
    c->metrics_interval_s = 15.0;
    c->gpu_metrics = 1;
    c->gpu_metrics_interval_s = 0.1;
    c->gpu_metrics_window_interval_s = 0.01;
    c->gpu_metrics_retry_s = 30;
    snprintf(c->gpu_metrics_yield_to, sizeof c->gpu_metrics_yield_to, "%s",
             "ncu,nv-nsight-cu-cl,dcgmproftester,dcgmproftester1");
}

int cuptimon__config_default_path(char *out, size_t len)
{
    const char *v;
    int n;
    if (geteuid() == 0)
        n = snprintf(out, len, "%s/cuptimon/%s", SYSCONFDIR, CUPTIMON_CONFIG_NAME);
    else if ((v = getenv("XDG_CONFIG_HOME")) && v[0] == '/')
        n = snprintf(out, len, "%s/cuptimon/%s", v, CUPTIMON_CONFIG_NAME);
    else if ((v = getenv("HOME")) && v[0] == '/')
        n = snprintf(out, len, "%s/.config/cuptimon/%s", v, CUPTIMON_CONFIG_NAME);
    else
        return -ENOENT;
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- messages ------------------------------------------------------------ */

static void set_err(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_err(char **err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(err, fmt, ap) < 0)
        *err = NULL;
    va_end(ap);
}

/* Formats a range bound the way a user would write it: 1048576 as 1M. */
static void fmt_bound(char *out, size_t len, const struct key *k, double v)
{
    if (k->type == T_SIZE) {
        static const char units[] = "KMGT";
        uint64_t b = (uint64_t)v;
        int u = -1;
        while (b >= 1024 && b % 1024 == 0 && u < 3) {
            b /= 1024;
            u++;
        }
        if (u >= 0)
            snprintf(out, len, "%llu%c", (unsigned long long)b, units[u]);
        else
            snprintf(out, len, "%llu", (unsigned long long)b);
    } else {
        snprintf(out, len, "%.15g", v);
    }
}

/* What a key accepts, for error messages. */
static void allowed(char *out, size_t len, const struct key *k)
{
    char lo[32], hi[32];
    fmt_bound(lo, sizeof lo, k, k->min);
    fmt_bound(hi, sizeof hi, k, k->max);
    switch (k->type) {
    case T_PATH:
        snprintf(out, len, "is not an absolute path of at most %zu bytes (or null for %s)",
                 k->size - 1, k->note ? k->note : "the default");
        break;
    case T_SECONDS:
        snprintf(out, len,
                 "is not a %snumber of seconds in %s..%s (or a string with a unit: \"500ms\", "
                 "\"30s\", \"5m\", \"12h\", \"7d\", \"1w\")%s%s",
                 k->flags & F_WHOLE ? "whole " : "", lo, hi, k->note ? "; " : "",
                 k->note ? k->note : "");
        break;
    case T_SIZE:
        snprintf(out, len,
                 "is not a size in %s..%s%s (a number of bytes, or a string with a suffix K, M, "
                 "G or T: \"64M\")%s%s",
                 lo, hi, k->flags & F_PAGE ? " and a multiple of 4096" : "", k->note ? "; " : "",
                 k->note ? k->note : "");
        break;
    case T_COUNT:
        snprintf(out, len, "is not a whole number in %s..%s%s%s", lo, hi, k->note ? "; " : "",
                 k->note ? k->note : "");
        break;
    case T_GROUP:
        snprintf(out, len,
                 "is not a group of this system (a name from the group database or a numeric "
                 "gid; null for none)");
        break;
    case T_LEVEL:
        snprintf(out, len, "is not a log level: use err, warning, notice, info or debug");
        break;
    case T_BOOL:
        snprintf(out, len,
                 "is not a yes or no: use true or false (or the strings \"yes\" or "
                 "\"no\")");
        break;
    case T_WORDS:
        snprintf(
            out, len,
            "is not a list of words (letters, digits, '_', '-' and '.') separated by commas, of "
            "at most %zu bytes (or null for %s)",
            k->size - 1, k->note ? k->note : "the default");
        break;
    }
}

/* The edit distance of two short strings, for "did you mean". */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 64;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            if (up + 1 < best)
                best = up + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* Every key of the table, ", "-separated, malloc'd; NULL when out of
 * memory.  Built from the table itself, whole, so that the hint lists
 * each key there is. */
static char *key_list(void)
{
    size_t len = 1;
    for (size_t i = 0; i < NKEYS; i++)
        len += strlen(keys[i].name) + 2;
    char *list = malloc(len), *p = list;
    for (size_t i = 0; list && i < NKEYS; i++)
        p += sprintf(p, "%s%s", i ? ", " : "", keys[i].name);
    return list;
}

static void unknown_key(char **err, const char *where, const char *name)
{
    const char *guess = NULL;
    size_t best = 3;
    for (size_t i = 0; i < NKEYS; i++) {
        size_t d = distance(name, keys[i].name);
        if (d < best) {
            best = d;
            guess = keys[i].name;
        }
    }
    char *known = key_list();
    set_err(err, "%s%sunknown key \"%.100s\"%s%s%s (known keys: %s)", where ? where : "",
            where ? ": " : "", name, guess ? "; did you mean " : "", guess ? guess : "",
            guess ? "?" : "", known ? known : "see cuptimond.conf(5)");
    free(known);
}

/* ---- values -------------------------------------------------------------- */

/* "64M", "4096", "1G": binary multiples.  Whole numbers only. */
static int parse_size_text(const char *s, double *out)
{
    char *end;
    if (!isdigit((unsigned char)s[0]))
        return -EINVAL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -EINVAL;
    double mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1048576.0;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1073741824.0;
        end++;
        break;
    case 't':
    case 'T':
        mul = 1099511627776.0;
        end++;
        break;
    default: break;
    }
    if (mul > 1 && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0))
        end += strlen(end);
    else if (mul == 1 && strcmp(end, "B") == 0)
        end++;
    if (*end)
        return -EINVAL;
    *out = (double)v * mul;
    return 0;
}

/* "1.5", "500ms", "30s", "5m", "12h", "7d", "1w". */
static int parse_seconds_text(const char *s, double *out)
{
    char *end;
    if (!(isdigit((unsigned char)s[0]) || s[0] == '.' ||
          (s[0] == '-' && (isdigit((unsigned char)s[1]) || s[1] == '.'))))
        return -EINVAL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v))
        return -EINVAL;
    static const struct {
        const char *unit;
        double mul;
    } units[] = {{"", 1},     {"s", 1},    {"ms", 0.001}, {"m", 60},
                 {"min", 60}, {"h", 3600}, {"d", 86400},  {"w", 604800}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].unit) == 0) {
            *out = v * units[i].mul;
            return 0;
        }
    }
    return -EINVAL;
}

static int parse_count_text(const char *s, double *out)
{
    char *end;
    if (!(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1]))))
        return -EINVAL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return -EINVAL;
    *out = (double)v;
    return 0;
}

static int resolve_group(const char *name, gid_t *gid)
{
    char *end;
    if (isdigit((unsigned char)name[0])) {
        errno = 0;
        unsigned long v = strtoul(name, &end, 10);
        if (errno || *end || v >= (gid_t)-1)
            return -EINVAL;
        *gid = (gid_t)v;
        return 0;
    }
    /* A group name as useradd(8) allows it. */
    for (const char *p = name; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '.' ||
              (*p == '$' && p[1] == '\0')) ||
            (p == name && *p == '-'))
            return -EINVAL;
    size_t cap = 1024;
    for (;;) {
        struct group gr, *res = NULL;
        char *buf = malloc(cap);
        if (!buf)
            return -ENOMEM;
        int rc = getgrnam_r(name, &gr, buf, cap, &res);
        if (rc == ERANGE && cap < (1u << 20)) {
            free(buf);
            cap *= 4;
            continue;
        }
        if (rc == 0 && res)
            *gid = res->gr_gid;
        free(buf);
        return rc == 0 && res ? 0 : -ENOENT;
    }
}

/* A value as the key's parser sees it: text (from the command line or a
 * JSON string), a JSON number, a JSON boolean (in is_int), or JSON null. */
struct value {
    enum {
        V_NULL,
        V_TEXT,
        V_NUMBER,
        V_BOOL,
        V_OTHER
    } kind;
    const char *text;
    size_t text_len;
    double number;
    int is_int;
    int64_t i64;
    char shown[96]; /* how the value is quoted in a message */
};

/* Applies v to key k of c.  Returns 0 or -EINVAL (message in *err, which
 * starts with where and the key). */
static int apply(struct cuptimon_config *c, const struct key *k, const struct value *v,
                 const char *where, char **err)
{
    char *field = (char *)c + k->off;
    char what[320];
    double num = 0;
    int ok = 0;

    /* Strings are stored zero-padded, so that two configurations compare
     * equal with memcmp exactly when their settings are the same. */
    switch (k->type) {
    case T_PATH:
        if (v->kind == V_NULL || (v->kind == V_TEXT && v->text_len == 0)) {
            memset(field, 0, k->size);
            return 0;
        }
        if (v->kind == V_TEXT && v->text[0] == '/' && strlen(v->text) == v->text_len &&
            v->text_len < k->size) {
            memset(field, 0, k->size);
            memcpy(field, v->text, v->text_len);
            return 0;
        }
        break;
    case T_WORDS: {
        if (v->kind == V_NULL || (v->kind == V_TEXT && v->text_len == 0)) {
            memset(field, 0, k->size);
            return 0;
        }
        int good = v->kind == V_TEXT && strlen(v->text) == v->text_len && v->text_len < k->size;
        for (size_t i = 0; good && i < v->text_len; i++) {
            char ch = v->text[i];
            good = isalnum((unsigned char)ch) || ch == '_' || ch == '.' || ch == '-' || ch == ',' ||
                   ch == ' ';
        }
        if (good) {
            memset(field, 0, k->size);
            memcpy(field, v->text, v->text_len);
            return 0;
        }
        break;
    }
    case T_GROUP: {
        gid_t gid;
        if (v->kind == V_NULL ||
            (v->kind == V_TEXT && (v->text_len == 0 || strcmp(v->text, "none") == 0))) {
            memset(field, 0, k->size);
            c->has_control_gid = 0;
            c->control_gid = 0;
            return 0;
        }
        if (v->kind == V_NUMBER && v->is_int && v->i64 >= 0 && v->i64 < (gid_t)-1) {
            memset(field, 0, k->size);
            snprintf(field, k->size, "%lld", (long long)v->i64);
            c->has_control_gid = 1;
            c->control_gid = (gid_t)v->i64;
            return 0;
        }
        if (v->kind == V_TEXT && strlen(v->text) == v->text_len && v->text_len < k->size &&
            resolve_group(v->text, &gid) == 0) {
            memset(field, 0, k->size);
            memcpy(field, v->text, v->text_len);
            c->has_control_gid = 1;
            c->control_gid = gid;
            return 0;
        }
        break;
    }
    case T_LEVEL: {
        int level = v->kind == V_TEXT ? cuptimon__log_level_parse(v->text) : -1;
        if (level >= 0) {
            c->log_level = level;
            return 0;
        }
        break;
    }
    case T_BOOL: {
        int yes = -1;
        const char *t = v->kind == V_TEXT && strlen(v->text) == v->text_len ? v->text : "";
        if (v->kind == V_BOOL)
            yes = v->is_int;
        else if (strcmp(t, "yes") == 0 || strcmp(t, "true") == 0)
            yes = 1;
        else if (strcmp(t, "no") == 0 || strcmp(t, "false") == 0)
            yes = 0;
        if (yes >= 0) {
            memcpy(field, &yes, sizeof yes);
            return 0;
        }
        break;
    }
    case T_SECONDS:
    case T_SIZE:
    case T_COUNT:
        if (v->kind == V_NUMBER) {
            num = v->number;
            ok = 1;
        } else if (v->kind == V_TEXT && strlen(v->text) == v->text_len) {
            ok = (k->type == T_SECONDS ? parse_seconds_text(v->text, &num)
                  : k->type == T_SIZE  ? parse_size_text(v->text, &num)
                                       : parse_count_text(v->text, &num)) == 0;
        }
        /* Every key's range is within 0..2^50, so past this check num
         * converts to uint64_t exactly when it is whole (NaN fails it). */
        if (!ok || !(num >= k->min && num <= k->max))
            break;
        if ((k->type != T_SECONDS || (k->flags & F_WHOLE)) && num != (double)(uint64_t)num)
            break;
        if ((k->flags & F_PAGE) && (uint64_t)num % 4096 != 0)
            break;
        /* Fields are reached through the table's offsets: copy, rather than
         * cast a char pointer to a wider type. */
        if (k->type == T_SECONDS && !(k->flags & F_WHOLE)) {
            memcpy(field, &num, sizeof num);
        } else if (k->size == sizeof(uint64_t)) {
            uint64_t u = (uint64_t)num;
            memcpy(field, &u, sizeof u);
        } else if (k->size == sizeof(uint32_t)) {
            uint32_t u = (uint32_t)num;
            memcpy(field, &u, sizeof u);
        } else {
            return -EINVAL; /* a table entry of an unsupported width */
        }
        return 0;
    }
    allowed(what, sizeof what, k);
    set_err(err, "%s%s%s: %s %s", where ? where : "", where ? ": " : "", k->name, v->shown, what);
    return -EINVAL;
}

static const struct key *find_key(const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

static void value_from_json(struct value *v, json_object *o)
{
    memset(v, 0, sizeof *v);
    if (!o) {
        v->kind = V_NULL;
        snprintf(v->shown, sizeof v->shown, "null");
        return;
    }
    const char *s =
        json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t n = strlen(s);
    if (n < sizeof v->shown)
        snprintf(v->shown, sizeof v->shown, "%s", s);
    else
        snprintf(v->shown, sizeof v->shown, "%.80s...", s);
    switch (json_object_get_type(o)) {
    case json_type_string:
        v->kind = V_TEXT;
        v->text = json_object_get_string(o);
        v->text_len = (size_t)json_object_get_string_len(o);
        break;
    case json_type_int:
        v->kind = V_NUMBER;
        v->is_int = 1;
        v->i64 = json_object_get_int64(o);
        v->number = (double)v->i64;
        break;
    case json_type_double:
        v->kind = V_NUMBER;
        v->number = json_object_get_double(o);
        v->is_int =
            v->number > -9e15 && v->number < 9e15 && v->number == (double)(int64_t)v->number;
        v->i64 = v->is_int ? (int64_t)v->number : 0;
        break;
    case json_type_boolean:
        v->kind = V_BOOL;
        v->is_int = json_object_get_boolean(o) ? 1 : 0;
        break;
    default: v->kind = V_OTHER; break;
    }
}

int cuptimon__config_check(const struct cuptimon_config *c, char **err)
{
    struct cuptimon_gpm_judgement j;
    if (cuptimon__gpm_set_judge(c->gpu_metrics_set, &j) < 0) {
        char known_keys[400];
        cuptimon__gpm_known_keys(known_keys, sizeof known_keys);
        set_err(err,
                "gpu_metrics_set: %s %s not a metric this daemon knows: give its keys (any case: "
                "%s) or CUPTI metric names (unit__counter.rollup..., e.g. "
                "sm__cycles_active.avg.pct_of_peak_sustained_elapsed), separated by commas",
                j.unknown, j.nunknown > 1 ? "are" : "is", known_keys);
        return -EINVAL;
    }
    if (c->archive_max_bytes != 0 && c->archive_max_bytes < c->segment_size) {
        set_err(err,
                "archive_max_bytes: %llu is smaller than segment_size (%llu): the byte cap must "
                "hold at least one whole segment; raise it, lower segment_size, or use 0 for no "
                "byte cap",
                (unsigned long long)c->archive_max_bytes, (unsigned long long)c->segment_size);
        return -EINVAL;
    }
    return 0;
}

int cuptimon__config_set(struct cuptimon_config *c, const char *key, const char *value, char **err)
{
    const struct key *k = find_key(key);
    if (!k) {
        unknown_key(err, NULL, key);
        return -ENOENT;
    }
    struct value v = {.kind = V_TEXT, .text = value, .text_len = strlen(value)};
    snprintf(v.shown, sizeof v.shown, "'%.80s%s'", value, v.text_len > 80 ? "..." : "");
    struct cuptimon_config tmp = *c;
    int rc = apply(&tmp, k, &v, NULL, err);
    if (rc == 0)
        *c = tmp;
    return rc;
}

/* ---- the file ------------------------------------------------------------ */

static int read_file(const char *path, char **out, size_t *len, char **err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        if (e != ENOENT)
            set_err(err, "%s: cannot open: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    char *buf = NULL;
    int rc = 0;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        set_err(err, "%s: cannot stat: %s", path, strerror(-rc));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        set_err(err, "%s: not a regular file", path);
        goto out;
    }
    if (st.st_size > CUPTIMON_CONFIG_MAX_BYTES) {
        rc = -EFBIG;
        set_err(err, "%s: %lld bytes is too large for a configuration file (at most %u)", path,
                (long long)st.st_size, CUPTIMON_CONFIG_MAX_BYTES);
        goto out;
    }
    /* Read to the end rather than trusting st_size: the file may be
     * rewritten while we read, and a short read is not an error. */
    size_t cap = (size_t)st.st_size + 1, n = 0;
    buf = malloc(cap + 1);
    if (!buf) {
        rc = -ENOMEM;
        goto out;
    }
    for (;;) {
        if (n == cap) {
            if (cap > CUPTIMON_CONFIG_MAX_BYTES) {
                rc = -EFBIG;
                set_err(err, "%s: too large for a configuration file (at most %u bytes)", path,
                        CUPTIMON_CONFIG_MAX_BYTES);
                goto out;
            }
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                rc = -ENOMEM;
                goto out;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            set_err(err, "%s: cannot read: %s", path, strerror(-rc));
            goto out;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        rc = -EINVAL;
        set_err(err, "%s: contains a NUL byte: not a text file", path);
        goto out;
    }
    *out = buf;
    *len = n;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return rc;
}

static void line_col(const char *buf, size_t off, unsigned *line, unsigned *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (buf[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static size_t parse_end(struct json_tokener *tok)
{
#if defined(JSON_C_VERSION_NUM) && JSON_C_VERSION_NUM >= ((0 << 16) | (15 << 8))
    return json_tokener_get_parse_end(tok);
#else
    return (size_t)tok->char_offset;
#endif
}

static int parse_json(const char *path, const char *buf, size_t len, json_object **out, char **err)
{
    size_t blank = 0;
    while (blank < len && isspace((unsigned char)buf[blank]))
        blank++;
    if (blank == len) {
        set_err(err,
                "%s: the file is empty; a configuration is one JSON object, and {} keeps "
                "every default",
                path);
        return -EINVAL;
    }
    struct json_tokener *tok = json_tokener_new();
    if (!tok)
        return -ENOMEM;
    /* The length includes the terminating NUL, which tells json-c that the
     * input ends there (a bare number at the end is then complete). */
    json_object *o = json_tokener_parse_ex(tok, buf, (int)len + 1);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = parse_end(tok);
    unsigned line, col;
    int rc = 0;
    if (!o) {
        if (jerr == json_tokener_continue || jerr == json_tokener_success) {
            /* All input read and the value is still open. */
            line_col(buf, len, &line, &col);
            set_err(err,
                    "%s:%u:%u: JSON syntax error: the file ends inside a value (a missing "
                    "'}' or '\"'?)",
                    path, line, col);
        } else {
            line_col(buf, end < len ? end : len, &line, &col);
            set_err(err, "%s:%u:%u: JSON syntax error: %s (at byte offset %zu)", path, line, col,
                    json_tokener_error_desc(jerr), end);
        }
        rc = -EINVAL;
        goto out;
    }
    /* After the object only white space and comments may follow. */
    for (size_t i = end; i < len; i++) {
        if (buf[i] == '/' && i + 1 < len && buf[i + 1] == '/') {
            while (i < len && buf[i] != '\n')
                i++;
            continue;
        }
        if (buf[i] == '/' && i + 1 < len && buf[i + 1] == '*') {
            const char *close = strstr(buf + i + 2, "*/");
            if (close) {
                i = (size_t)(close - buf) + 1;
                continue;
            }
        }
        if (!isspace((unsigned char)buf[i])) {
            line_col(buf, i, &line, &col);
            set_err(err,
                    "%s:%u:%u: JSON syntax error: text after the end of the configuration "
                    "object (at byte offset %zu)",
                    path, line, col, i);
            json_object_put(o);
            rc = -EINVAL;
            goto out;
        }
    }
    *out = o;
out:
    json_tokener_free(tok);
    return rc;
}

int cuptimon__config_load(const char *path, struct cuptimon_config *c, char **err)
{
    char *buf = NULL;
    size_t len = 0;
    json_object *root = NULL;
    int rc;

    if (err)
        *err = NULL;
    if ((rc = read_file(path, &buf, &len, err)) < 0)
        return rc;
    if ((rc = parse_json(path, buf, len, &root, err)) < 0)
        goto out;
    if (!json_object_is_type(root, json_type_object)) {
        set_err(err,
                "%s: the configuration must be one JSON object ({\"key\": value, ...}), "
                "not %s",
                path, json_type_to_name(json_object_get_type(root)));
        rc = -EINVAL;
        goto out;
    }
    struct cuptimon_config tmp = *c;
    json_object_object_foreach(root, name, val)
    {
        const struct key *k = find_key(name);
        if (!k) {
            unknown_key(err, path, name);
            rc = -EINVAL;
            goto out;
        }
        struct value v;
        value_from_json(&v, val);
        if ((rc = apply(&tmp, k, &v, path, err)) < 0)
            goto out;
    }
    char *cerr = NULL;
    if ((rc = cuptimon__config_check(&tmp, err ? &cerr : NULL)) < 0) {
        set_err(err, "%s: %s", path, cerr ? cerr : "inconsistent keys");
        free(cerr);
        goto out;
    }
    *c = tmp;
out:
    json_object_put(root);
    free(buf);
    return rc;
}

/* ---- the dump ------------------------------------------------------------ */

static json_object *seconds_json(double s)
{
    char buf[40];
    snprintf(buf, sizeof buf, "%.9g", s);
    if (!strpbrk(buf, ".e"))
        strcat(buf, ".0");
    return json_object_new_double_s(s, buf);
}

char *cuptimon__config_dump(const struct cuptimon_config *c)
{
    json_object *o = json_object_new_object();
    if (!o)
        return NULL;
    for (size_t i = 0; i < NKEYS; i++) {
        const struct key *k = &keys[i];
        const char *field = (const char *)c + k->off;
        json_object *v = NULL;
        double d = 0;
        uint64_t u64 = 0;
        uint32_t u32 = 0;
        if (k->size == sizeof d && (k->type == T_SECONDS && !(k->flags & F_WHOLE)))
            memcpy(&d, field, sizeof d);
        else if (k->size == sizeof u64)
            memcpy(&u64, field, sizeof u64);
        else if (k->size == sizeof u32)
            memcpy(&u32, field, sizeof u32);
        switch (k->type) {
        case T_PATH:
        case T_WORDS:
        case T_GROUP: v = field[0] ? json_object_new_string(field) : NULL; break;
        case T_LEVEL: v = json_object_new_string(level_names[c->log_level & 7]); break;
        case T_BOOL: {
            int yes;
            memcpy(&yes, field, sizeof yes);
            v = json_object_new_boolean(yes);
            break;
        }
        case T_SECONDS:
            v = k->flags & F_WHOLE ? json_object_new_int64((int64_t)u64) : seconds_json(d);
            break;
        case T_SIZE:
        case T_COUNT:
            v = json_object_new_int64(k->size == sizeof u64 ? (int64_t)u64 : (int64_t)u32);
            break;
        }
        json_object_object_add(o, k->name, v);
    }
    const char *s = json_object_to_json_string_ext(
        o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    char *out = s ? strdup(s) : NULL;
    json_object_put(o);
    return out;
}
