/* Unit tests of the statistics engine (archive/stats.c) and of the tables
 * cuptimonctl stats prints (cli/stats.c).  Each test makes its own events
 * from a seeded generator and computes what the tables must say from the
 * values it made (sorting them, two-pass moments in long double, interval
 * union by sorting), never from what the engine wrote. */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "archive/cbid.h"
#include "archive/demangle.h"
#include "archive/json-get.h"
#include "archive/stats.h"
#include "archive/strtab.h"
#include "archive/utf8.h"
#include "cli/cli.h"
#include "tests/unit/testlib.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* What a row must say of the values v[0, n). */
struct expect {
    uint64_t n, total, min, max;
    double median, stddev;
};

static struct expect expect_of(const uint64_t *v, size_t n)
{
    struct expect e = {.n = n, .min = UINT64_MAX};
    uint64_t *s = malloc(n * sizeof(*s));
    long double mean = 0, ss = 0;

    ck_assert_ptr_nonnull(s);
    memcpy(s, v, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_u64);
    for (size_t i = 0; i < n; i++) {
        e.total += v[i];
        mean += v[i];
    }
    mean /= (long double)n;
    for (size_t i = 0; i < n; i++)
        ss += ((long double)v[i] - mean) * ((long double)v[i] - mean);
    e.min = s[0];
    e.max = s[n - 1];
    e.median = n % 2 ? (double)s[n / 2] : ((double)s[n / 2 - 1] + (double)s[n / 2]) / 2;
    e.stddev = n > 1 ? (double)sqrtl(ss / (long double)(n - 1)) : 0;
    free(s);
    return e;
}

static struct cuptimon_ev kernel_ev(uint64_t ptr, uint64_t start, uint64_t dur)
{
    struct cuptimon_ev ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CUPTIMON_EV_KERNEL;
    ev.cupti_kind = 10;
    ev.start = start;
    ev.end = start + dur;
    ev.u.kernel.name_ptr = ptr;
    return ev;
}

static const struct cuptimon_clock identity = {0, 0};

static struct cuptimon_proc_info proc(uint32_t pid, const char *label, int64_t rank)
{
    struct cuptimon_proc_info p = {.pid = pid,
                                   .label = label,
                                   .hostname = "node1",
                                   .rank = rank,
                                   .local_rank = -1,
                                   .world_size = -1};
    return p;
}

/* The row of rows whose key is name, or a failure. */
static json_object *row_named(json_object *rows, const char *key, const char *name)
{
    for (size_t i = 0; i < json_object_array_length(rows); i++) {
        json_object *r = json_object_array_get_idx(rows, i);
        if (strcmp(cuptimon__json_str(r, key, ""), name) == 0)
            return r;
    }
    ck_abort_msg("no row named '%s'", name);
    return NULL;
}

static void check_row(json_object *r, const char *unit, const char *count, const struct expect *e,
                      int exact)
{
    char k[32];
    snprintf(k, sizeof k, "total_%s", unit);
    ck_assert_uint_eq(cuptimon__json_uint(r, k, 0), e->total);
    ck_assert_uint_eq(cuptimon__json_uint(r, count, 0), e->n);
    snprintf(k, sizeof k, "min_%s", unit);
    ck_assert_uint_eq(cuptimon__json_uint(r, k, 0), e->min);
    snprintf(k, sizeof k, "max_%s", unit);
    ck_assert_uint_eq(cuptimon__json_uint(r, k, 0), e->max);
    snprintf(k, sizeof k, "avg_%s", unit);
    ck_assert_double_eq_tol(cuptimon__json_double(r, k, -1), (double)e->total / (double)e->n,
                            1e-9 * (double)e->total / (double)e->n);
    snprintf(k, sizeof k, "stddev_%s", unit);
    ck_assert_double_eq_tol(cuptimon__json_double(r, k, -1), e->stddev, 1e-9 * e->stddev + 1e-9);
    snprintf(k, sizeof k, "med_%s", unit);
    if (exact) {
        ck_assert_double_eq(cuptimon__json_double(r, k, -1), e->median);
        ck_assert(cuptimon__json_bool(r, "med_exact", 0));
    } else {
        double m = cuptimon__json_double(r, k, -1);
        ck_assert_msg(fabs(m - e->median) <= e->median * CUPTIMON_STATS_MED_ERROR + 1e-9,
                      "median %.3f, true %.3f: beyond the %.4f bound", m, e->median,
                      CUPTIMON_STATS_MED_ERROR);
        ck_assert(!cuptimon__json_bool(r, "med_exact", 1));
    }
}

/* ---- kernels ---------------------------------------------------------------- */

/* Two processes name the same kernel through different pointers (each has
 * its own address space): one row, by the demangled name.  Durations from
 * three shapes (uniform, a few repeated values, one huge outlier), counts
 * odd and even. */
START_TEST(kernels_exact)
{
    struct cuptimon_strtab *n0, *n1;
    struct cuptimon_demangler *dm;
    struct cuptimon_stats *st;
    static const char *const mangled[] = {"_Z5scaleILi2EEvPfi", "_ZN2ns7add_oneEPfi", "plain_c"};
    static const char *const shown[] = {"void scale<2>(float*, int)", "ns::add_one(float*, int)",
                                        "plain_c"};
    static const size_t count[] = {1001, 2000, 1};
    uint64_t *vals[3];
    uint64_t t = 1000000, grand = 0;

    rng_state = 0x1234567;
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &n0), 0);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &n1), 0);
    ck_assert_int_eq(cuptimon__demangler_new(0, &dm), 0);
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(cuptimon__strtab_put(n0, 0x1000 + k, mangled[k], strlen(mangled[k])), 0);
        ck_assert_int_eq(cuptimon__strtab_put(n1, 0x9000 + k, mangled[k], strlen(mangled[k])), 0);
    }
    ck_assert_int_eq(cuptimon__stats_new(NULL, &st), 0);
    struct cuptimon_proc_info p0 = proc(100, "a", 0), p1 = proc(200, "b", 1);
    ck_assert_int_eq(cuptimon__stats_add_process(st, &p0, n0, dm), 0);
    ck_assert_int_eq(cuptimon__stats_add_process(st, &p1, n1, dm), 1);
    for (int k = 0; k < 3; k++) {
        vals[k] = malloc(count[k] * sizeof(uint64_t));
        for (size_t i = 0; i < count[k]; i++) {
            uint64_t d = k == 0 ? 1000 + rnd() % 4001 : k == 1 ? 2000 + 500 * (rnd() % 4) : 77;
            if (k == 0 && i == 500)
                d = 900000000000ull; /* 15 minutes */
            int p = (int)(i % 2);
            struct cuptimon_ev ev = kernel_ev((p ? 0x9000u : 0x1000u) + (unsigned)k, t, d);
            cuptimon__stats_event(st, p, &ev, &identity);
            vals[k][i] = d;
            t += d + 100;
        }
    }
    json_object *rows = cuptimon__stats_rows(st, CUPTIMON_STATS_KERNELS, 0);
    ck_assert_ptr_nonnull(rows);
    ck_assert_uint_eq(json_object_array_length(rows), 3);
    struct expect e[3];
    for (int k = 0; k < 3; k++) {
        e[k] = expect_of(vals[k], count[k]);
        grand += e[k].total;
    }
    for (int k = 0; k < 3; k++) {
        json_object *r = row_named(rows, "name", shown[k]);
        check_row(r, "ns", "instances", &e[k], 1);
        ck_assert_double_eq_tol(cuptimon__json_double(r, "time_pct", -1),
                                100.0 * (double)e[k].total / (double)grand, 1e-9);
    }
    /* By total time, largest first. */
    ck_assert_str_eq(cuptimon__json_str(json_object_array_get_idx(rows, 0), "name", ""), shown[0]);
    ck_assert_str_eq(cuptimon__json_str(json_object_array_get_idx(rows, 2), "name", ""), shown[2]);
    json_object_put(rows);
    /* top_n */
    rows = cuptimon__stats_rows(st, CUPTIMON_STATS_KERNELS, 2);
    ck_assert_uint_eq(json_object_array_length(rows), 2);
    json_object_put(rows);
    json_object *info = cuptimon__stats_info_json(st);
    ck_assert_uint_eq(cuptimon__json_uint(info, "kernels", 0), 1001 + 2000 + 1);
    ck_assert_uint_eq(cuptimon__json_uint(info, "kernel_ns", 0), grand);
    ck_assert_uint_eq(cuptimon__json_uint(info, "kernel_names", 0), 3);
    ck_assert_uint_eq(
        cuptimon__json_uint(cuptimon__json_get(info, "medians"), "approximate_medians", 9), 0);
    json_object_put(info);
    for (int k = 0; k < 3; k++)
        free(vals[k]);
    cuptimon__stats_free(st);
    cuptimon__demangler_free(dm);
    cuptimon__strtab_free(n0);
    cuptimon__strtab_free(n1);
}
END_TEST

/* Every median from a histogram (--exact-limit=0): within the stated
 * relative error of the true median, whatever the spread (log-uniform
 * over five decades, a tight cluster, values below 128 that the histogram
 * holds exactly, a median where the bins are widest); everything else
 * exact. */
START_TEST(medians_from_histograms)
{
    struct cuptimon_stats_opts o = {.exact_limit = 0};
    struct cuptimon_stats *st;
    struct cuptimon_strtab *names;
    enum {
        N = 20001
    };
    uint64_t *v[4];
    static const char *const nm[] = {"k_wide", "k_tight", "k_small", "k_even"};

    rng_state = 99;
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &names), 0);
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(cuptimon__strtab_put(names, 0x10 + k, nm[k], strlen(nm[k])), 0);
    ck_assert_int_eq(cuptimon__stats_new(&o, &st), 0);
    struct cuptimon_proc_info p = proc(1, NULL, -1);
    ck_assert_int_eq(cuptimon__stats_add_process(st, &p, names, NULL), 0);
    for (int k = 0; k < 4; k++) {
        size_t n = k == 3 ? N - 1 : N;
        v[k] = malloc(N * sizeof(uint64_t));
        for (size_t i = 0; i < n; i++) {
            double u = (double)(rnd() % 1000000) / 1e6;
            uint64_t d = k == 0   ? (uint64_t)(100.0 * pow(10.0, 5.0 * u))
                         : k == 1 ? 123456 + rnd() % 1000
                         : k == 2 ? rnd() % 128
                                  : 1000 + rnd() % 1000000;
            struct cuptimon_ev ev = kernel_ev(0x10 + (unsigned)k, 1000 + i * 10, d);
            cuptimon__stats_event(st, 0, &ev, &identity);
            v[k][i] = d;
        }
    }
    /* The median at the top of the lowest bin of a power of two, where
     * the bins are widest for their values (1/64): only the bin's middle
     * is within the bound there. */
    uint64_t top[1001];
    for (int i = 0; i < 1001; i++) {
        top[i] = i < 500 ? 100 : i == 500 ? (65u << 10) - 1 : 1000000000;
        struct cuptimon_ev ev = kernel_ev(0x20, 1000 + (uint64_t)i * 10, top[i]);
        cuptimon__stats_event(st, 0, &ev, &identity);
    }
    json_object *rows = cuptimon__stats_rows(st, CUPTIMON_STATS_KERNELS, 0);
    struct expect et = expect_of(top, 1001);
    check_row(row_named(rows, "name", "<unknown kernel 0x20>"), "ns", "instances", &et, 0);
    for (int k = 0; k < 4; k++) {
        struct expect e = expect_of(v[k], k == 3 ? N - 1 : N);
        json_object *r = row_named(rows, "name", nm[k]);
        check_row(r, "ns", "instances", &e, 0);
        if (k == 2) /* below 128, a bin holds one value: the median is exact */
            ck_assert_double_eq(cuptimon__json_double(r, "med_ns", -1), e.median);
        free(v[k]);
    }
    json_object_put(rows);
    json_object *info = cuptimon__stats_info_json(st);
    json_object *med = cuptimon__json_get(info, "medians");
    ck_assert_uint_eq(cuptimon__json_uint(med, "values_kept", 9), 0);
    ck_assert_uint_eq(cuptimon__json_uint(med, "approximate_medians", 0), 5);
    ck_assert_uint_eq(cuptimon__json_uint(med, "collapsed", 9), 0);
    json_object_put(info);
    cuptimon__stats_free(st);
    cuptimon__strtab_free(names);
}
END_TEST

/* Values spread over more than the 32 powers of two a histogram spans:
 * the lowest share its lowest bin, and are counted. */
START_TEST(histogram_collapse_is_counted)
{
    struct cuptimon_stats_opts o = {.exact_limit = 0};
    struct cuptimon_stats *st;

    ck_assert_int_eq(cuptimon__stats_new(&o, &st), 0);
    struct cuptimon_proc_info p = proc(1, NULL, -1);
    ck_assert_int_eq(cuptimon__stats_add_process(st, &p, NULL, NULL), 0);
    for (int e = 1; e < 60; e++) {
        struct cuptimon_ev ev = kernel_ev(1, 1, (uint64_t)1 << e);
        cuptimon__stats_event(st, 0, &ev, &identity);
    }
    json_object *info = cuptimon__stats_info_json(st);
    /* 2^1 .. 2^59: the 32 powers of two from 2^28 keep their bins. */
    ck_assert_uint_eq(cuptimon__json_uint(cuptimon__json_get(info, "medians"), "collapsed", 0), 27);
    json_object_put(info);
    json_object *rows = cuptimon__stats_rows(st, CUPTIMON_STATS_KERNELS, 0);
    json_object *r = json_object_array_get_idx(rows, 0);
    ck_assert_uint_eq(cuptimon__json_uint(r, "min_ns", 0), 2);
    ck_assert_uint_eq(cuptimon__json_uint(r, "max_ns", 0), (uint64_t)1 << 59);
    ck_assert_uint_eq(cuptimon__json_uint(r, "instances", 0), 59);
    json_object_put(rows);
    cuptimon__stats_free(st);
}
END_TEST

/* Past the exact limit, the rows with the most values move to histograms,
 * the small ones keep exact medians, and the values kept stay within the
 * limit. */
START_TEST(exact_limit_moves_the_largest)
{
    struct cuptimon_stats_opts o = {.exact_limit = 4096};
    struct cuptimon_stats *st;
    struct cuptimon_strtab *names;
    static const size_t count[] = {50000, 300, 301};
    uint64_t *v[3];

    rng_state = 7;
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &names), 0);
    ck_assert_int_eq(cuptimon__stats_new(&o, &st), 0);
    struct cuptimon_proc_info p = proc(1, NULL, -1);
    ck_assert_int_eq(cuptimon__stats_add_process(st, &p, names, NULL), 0);
    /* The large one first, up to the limit, then all three interleaved:
     * the small ones' growth passes the limit, and the large one (not the
     * one growing) must move. */
    size_t c[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++)
        v[k] = malloc(count[k] * sizeof(uint64_t));
    for (size_t i = 0; i < count[0] + count[1] + count[2]; i++) {
        int k = i < 3000                         ? 0
                : i % 10 == 1 && c[1] < count[1] ? 1
                : i % 10 == 2 && c[2] < count[2] ? 2
                                                 : 0;
        if (c[k] == count[k])
            k = c[1] < count[1] ? 1 : 2;
        uint64_t d = 500 + rnd() % 100000;
        struct cuptimon_ev ev = kernel_ev(0x100 + (unsigned)k, 1000 + i * 200000, d);
        cuptimon__stats_event(st, 0, &ev, &identity);
        v[k][c[k]++] = d;
    }
    json_object *rows = cuptimon__stats_rows(st, CUPTIMON_STATS_KERNELS, 0);
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "<unknown kernel 0x%x>", 0x100 + k);
        struct expect e = expect_of(v[k], count[k]);
        check_row(row_named(rows, "name", name), "ns", "instances", &e, k != 0);
        free(v[k]);
    }
    json_object_put(rows);
    json_object *info = cuptimon__stats_info_json(st);
    json_object *med = cuptimon__json_get(info, "medians");
    ck_assert_uint_le(cuptimon__json_uint(med, "values_kept", UINT64_MAX), 4096);
    ck_assert_uint_eq(cuptimon__json_uint(med, "approximate_medians", 0), 1);
    json_object_put(info);
    cuptimon__stats_free(st);
    cuptimon__strtab_free(names);
}
END_TEST

/* Records without a complete time are in no row, and counted. */
START_TEST(incomplete_records_are_counted_not_shown)
{
    struct cuptimon_stats *st;
    struct cuptimon_ev ev;

    ck_assert_int_eq(cuptimon__stats_new(NULL, &st), 0);
    struct cuptimon_proc_info p = proc(1, NULL, -1);
    ck_assert_int_eq(cuptimon__stats_add_process(st, &p, NULL, NULL), 0);
    ev = kernel_ev(1, 1000, 50);
    cuptimon__stats_event(st, 0, &ev, &identity);
    ev.end = 0; /* still running at a forced flush */
    cuptimon__stats_event(st, 0, &ev, &identity);
    ev.end = 999; /* ends before it starts */
    cuptimon__stats_event(st, 0, &ev, &identity);
    ev.type = CUPTIMON_EV_MEMSET;
    cuptimon__stats_event(st, 0, &ev, &identity);
    cuptimon__stats_dropped(st, 0, 17);
    json_object *rows = cuptimon__stats_rows(st, CUPTIMON_STATS_KERNELS, 0);
    ck_assert_uint_eq(json_object_array_length(rows), 1);
    ck_assert_uint_eq(cuptimon__json_uint(json_object_array_get_idx(rows, 0), "instances", 0), 1);
    json_object_put(rows);
    rows = cuptimon__stats_rows(st, CUPTIMON_STATS_MEMORY_TIME, 0);
    ck_assert_uint_eq(json_object_array_length(rows), 0);
    json_object_put(rows);
    json_object *info = cuptimon__stats_info_json(st);
    ck_assert_uint_eq(cuptimon__json_uint(cuptimon__json_get(info, "incomplete"), "kernel", 0), 2);
    ck_assert_uint_eq(cuptimon__json_uint(cuptimon__json_get(info, "incomplete"), "memory", 0), 1);
    ck_assert_uint_eq(cuptimon__json_uint(info, "dropped_records", 0), 17);
    json_object_put(info);
    rows = cuptimon__stats_rows(st, CUPTIMON_STATS_PROCESSES, 0);
    ck_assert_uint_eq(cuptimon__json_uint(json_object_array_get_idx(rows, 0), "dropped_records", 0),
                      17);
    json_object_put(rows);
    cuptimon__stats_free(st);
}
END_TEST

/* Past names_max, further names share one "(other ...)" row, counted. */
START_TEST(names_past_the_cap_share_a_row)
{
    struct cuptimon_stats_opts o = {.exact_limit = CUPTIMON_STATS_EXACT_DEFAULT, .names_max = 2};
    struct cuptimon_stats *st;
    uint64_t other[] = {10, 20, 30, 40, 50};

    ck_assert_int_eq(cuptimon__stats_new(&o, &st), 0);
    struct cuptimon_proc_info p = proc(1, NULL, -1);
    ck_assert_int_eq(cuptimon__stats_add_process(st, &p, NULL, NULL), 0);
    struct cuptimon_ev ev = kernel_ev(1, 1000, 1000000);
    cuptimon__stats_event(st, 0, &ev, &identity);
    ev = kernel_ev(2, 1000, 999999);
    cuptimon__stats_event(st, 0, &ev, &identity);
    for (int i = 0; i < 5; i++) {
        ev = kernel_ev(3 + (unsigned)i % 3, 1000, other[i]);
        cuptimon__stats_event(st, 0, &ev, &identity);
    }
    json_object *rows = cuptimon__stats_rows(st, CUPTIMON_STATS_KERNELS, 0);
    ck_assert_uint_eq(json_object_array_length(rows), 3);
    struct expect e = expect_of(other, 5);
    check_row(row_named(rows, "name", "(other kernel names)"), "ns", "instances", &e, 1);
    json_object_put(rows);
    json_object *info = cuptimon__stats_info_json(st);
    ck_assert_uint_eq(cuptimon__json_uint(cuptimon__json_get(info, "other_rows"), "kernels", 0), 5);
    ck_assert_uint_eq(cuptimon__json_uint(info, "kernels", 0), 7);
    json_object_put(info);
    cuptimon__stats_free(st);
}
END_TEST

/* ---- memory, API ------------------------------------------------------------------ */

START_TEST(memory_by_kind_time_and_bytes)
{
    struct cuptimon_stats *st;
    uint64_t dt[3][64], db[3][64];
    size_t n[3] = {0, 0, 0};
    static const char *const op[] = {"[CUDA memcpy Host-to-Device]", "[CUDA memcpy Peer-to-Peer]",
                                     "[CUDA memset]"};

    rng_state = 5;
    ck_assert_int_eq(cuptimon__stats_new(NULL, &st), 0);
    struct cuptimon_proc_info p = proc(1, NULL, -1);
    ck_assert_int_eq(cuptimon__stats_add_process(st, &p, NULL, NULL), 0);
    for (int i = 0; i < 150; i++) {
        int k = i % 3;
        struct cuptimon_ev ev;
        uint64_t d = 100 + rnd() % 5000, b = 1 + rnd() % 100000;
        memset(&ev, 0, sizeof ev);
        ev.start = 1000 + (uint64_t)i * 10000;
        ev.end = ev.start + d;
        if (k == 0) {
            ev.type = CUPTIMON_EV_MEMCPY;
            ev.u.memcpy.copy_kind = 1; /* HtoD */
            ev.u.memcpy.bytes = b;
        } else if (k == 1) {
            ev.type = CUPTIMON_EV_MEMCPY_P2P;
            ev.u.memcpy.copy_kind = 8;
            ev.u.memcpy.bytes = b;
        } else {
            ev.type = CUPTIMON_EV_MEMSET;
            ev.u.memset.bytes = b;
        }
        cuptimon__stats_event(st, 0, &ev, &identity);
        dt[k][n[k]] = d;
        db[k][n[k]++] = b;
    }
    json_object *t = cuptimon__stats_rows(st, CUPTIMON_STATS_MEMORY_TIME, 0);
    json_object *b = cuptimon__stats_rows(st, CUPTIMON_STATS_MEMORY_BYTES, 0);
    ck_assert_uint_eq(json_object_array_length(t), 3);
    ck_assert_uint_eq(json_object_array_length(b), 3);
    for (int k = 0; k < 3; k++) {
        struct expect et = expect_of(dt[k], n[k]), eb = expect_of(db[k], n[k]);
        check_row(row_named(t, "operation", op[k]), "ns", "count", &et, 1);
        check_row(row_named(b, "operation", op[k]), "bytes", "count", &eb, 1);
    }
    json_object_put(t);
    json_object_put(b);
    cuptimon__stats_free(st);
}
END_TEST

START_TEST(api_by_call_name)
{
    struct cuptimon_stats *st;
    struct cuptimon_ev ev;
    uint64_t launch[3] = {300, 100, 200};

    ck_assert_int_eq(cuptimon__stats_new(NULL, &st), 0);
    struct cuptimon_proc_info p = proc(1, NULL, -1);
    ck_assert_int_eq(cuptimon__stats_add_process(st, &p, NULL, NULL), 0);
    memset(&ev, 0, sizeof ev);
    ev.type = CUPTIMON_EV_RUNTIME;
    ev.u.api.cbid = 211; /* cudaLaunchKernel */
    for (int i = 0; i < 3; i++) {
        ev.start = 1000 + (uint64_t)i * 1000;
        ev.end = ev.start + launch[i];
        cuptimon__stats_event(st, 0, &ev, &identity);
    }
    ev.type = CUPTIMON_EV_DRIVER;
    ev.u.api.cbid = 999999;
    cuptimon__stats_event(st, 0, &ev, &identity);
    json_object *rows = cuptimon__stats_rows(st, CUPTIMON_STATS_API, 0);
    ck_assert_uint_eq(json_object_array_length(rows), 2);
    struct expect e = expect_of(launch, 3);
    check_row(row_named(rows, "name", cuptimon__cbid_runtime_name(211)), "ns", "calls", &e, 1);
    ck_assert_uint_eq(
        cuptimon__json_uint(row_named(rows, "name", "<driver API cbid 999999>"), "calls", 0), 1);
    json_object_put(rows);
    cuptimon__stats_free(st);
}
END_TEST

/* ---- processes ------------------------------------------------------------------ */

struct iv {
    uint64_t s, e;
};

static int cmp_iv(const void *a, const void *b)
{
    const struct iv *x = a, *y = b;
    return x->s < y->s ? -1 : x->s > y->s;
}

/* The union's length, by sorting: the test's own count. */
static uint64_t union_len(const struct iv *in, size_t n)
{
    struct iv *v = malloc(n * sizeof(*v));
    uint64_t total = 0, cs = 0, ce = 0;
    memcpy(v, in, n * sizeof(*v));
    qsort(v, n, sizeof(*v), cmp_iv);
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || v[i].s > ce) {
            total += ce - cs;
            cs = v[i].s;
            ce = v[i].e;
        } else if (v[i].e > ce) {
            ce = v[i].e;
        }
    }
    total += ce - cs;
    free(v);
    return total;
}

/* GPU busy time is the union of the process's GPU work (kernels on
 * concurrent streams overlap; API calls are CPU time and do not count),
 * first and last activity its earliest start and latest end, in Unix ns
 * through each chunk's clock pair. */
START_TEST(processes_busy_union_and_times)
{
    struct cuptimon_stats *st;
    enum {
        N = 3000
    };
    struct iv *iv = malloc(N * sizeof(*iv));
    const struct cuptimon_clock clk = {.cupti_ts = 1000, .unix_ns = 1796000000000000000ull};
    uint64_t t = 5000, first = UINT64_MAX, last = 0;

    rng_state = 11;
    ck_assert_int_eq(cuptimon__stats_new(NULL, &st), 0);
    struct cuptimon_proc_info p = proc(42, "日本語", 3);
    ck_assert_int_eq(cuptimon__stats_add_process(st, &p, NULL, NULL), 0);
    for (int i = 0; i < N; i++) {
        /* Batches of four (as four streams): starts drift forward, come
         * in no order within a batch, and the work overlaps. */
        uint64_t s = t + rnd() % 3000, d = 1 + rnd() % 4000;
        struct cuptimon_ev ev =
            i % 5 == 4 ? (struct cuptimon_ev){.type = CUPTIMON_EV_MEMSET} : kernel_ev(1, 0, 0);
        ev.start = s;
        ev.end = s + d;
        iv[i] = (struct iv){s, s + d};
        if (i % 4 == 3)
            t += 2000 + rnd() % 6000;
        cuptimon__stats_event(st, 0, &ev, &clk);
        if (s < first)
            first = s;
        if (s + d > last)
            last = s + d;
    }
    /* An API call after the last GPU work: activity, not GPU busy. */
    struct cuptimon_ev api = {.type = CUPTIMON_EV_RUNTIME, .start = last + 10, .end = last + 500};
    cuptimon__stats_event(st, 0, &api, &clk);
    last += 500;
    json_object *rows = cuptimon__stats_rows(st, CUPTIMON_STATS_PROCESSES, 0);
    ck_assert_uint_eq(json_object_array_length(rows), 1);
    json_object *r = json_object_array_get_idx(rows, 0);
    uint64_t busy = union_len(iv, N);
    ck_assert_uint_eq(cuptimon__json_uint(r, "gpu_busy_ns", 0), busy);
    ck_assert_uint_eq(cuptimon__json_uint(r, "busy_uncertain_ns", 9), 0);
    ck_assert_uint_eq(cuptimon__json_uint(r, "first_unix_ns", 0), first - 1000 + clk.unix_ns);
    ck_assert_uint_eq(cuptimon__json_uint(r, "last_unix_ns", 0), last - 1000 + clk.unix_ns);
    ck_assert_uint_eq(cuptimon__json_uint(r, "kernels", 0), N - N / 5);
    ck_assert_double_eq_tol(cuptimon__json_double(r, "busy_pct", 0),
                            100.0 * (double)busy / (double)(last - first), 1e-9);
    ck_assert_int_eq(cuptimon__json_int(r, "pid", 0), 42);
    ck_assert_int_eq(cuptimon__json_int(r, "rank", -1), 3);
    ck_assert_str_eq(cuptimon__json_str(r, "label", ""), "日本語");
    json_object_put(rows);
    /* A session with nothing timed in what was counted is not listed. */
    struct cuptimon_proc_info q = proc(43, NULL, -1);
    ck_assert_int_eq(cuptimon__stats_add_process(st, &q, NULL, NULL), 1);
    struct cuptimon_ev ext = {.type = CUPTIMON_EV_EXTERNAL_CORRELATION};
    cuptimon__stats_event(st, 1, &ext, &clk);
    rows = cuptimon__stats_rows(st, CUPTIMON_STATS_PROCESSES, 0);
    ck_assert_uint_eq(json_object_array_length(rows), 1);
    json_object_put(rows);
    free(iv);
    cuptimon__stats_free(st);
}
END_TEST

/* More disjoint intervals than are kept: the earliest are added up, the
 * total stays exact while records come in order; one that comes long
 * after, starting before what was added up, is counted only from there,
 * and the rest is said to be uncertain. */
START_TEST(busy_past_the_interval_cap)
{
    struct cuptimon_stats *st;
    enum {
        N = 10000
    };
    uint64_t busy = 0;

    ck_assert_int_eq(cuptimon__stats_new(NULL, &st), 0);
    struct cuptimon_proc_info p = proc(1, NULL, -1);
    ck_assert_int_eq(cuptimon__stats_add_process(st, &p, NULL, NULL), 0);
    for (uint64_t i = 0; i < N; i++) {
        struct cuptimon_ev ev = kernel_ev(1, 1000 + i * 100, 10 + i % 7);
        cuptimon__stats_event(st, 0, &ev, &identity);
        busy += 10 + i % 7;
    }
    json_object *rows = cuptimon__stats_rows(st, CUPTIMON_STATS_PROCESSES, 0);
    ck_assert_uint_eq(cuptimon__json_uint(json_object_array_get_idx(rows, 0), "gpu_busy_ns", 0),
                      busy);
    ck_assert_uint_eq(
        cuptimon__json_uint(json_object_array_get_idx(rows, 0), "busy_uncertain_ns", 9), 0);
    json_object_put(rows);
    /* [1050, 1070) lies in the first gap, long forgotten. */
    struct cuptimon_ev late = kernel_ev(1, 1050, 20);
    cuptimon__stats_event(st, 0, &late, &identity);
    rows = cuptimon__stats_rows(st, CUPTIMON_STATS_PROCESSES, 0);
    ck_assert_uint_eq(cuptimon__json_uint(json_object_array_get_idx(rows, 0), "gpu_busy_ns", 0),
                      busy);
    ck_assert_uint_eq(
        cuptimon__json_uint(json_object_array_get_idx(rows, 0), "busy_uncertain_ns", 0), 20);
    json_object_put(rows);
    cuptimon__stats_free(st);
}
END_TEST

/* ---- the tables ------------------------------------------------------------------ */

START_TEST(character_widths)
{
    ck_assert_int_eq(cuptimon__ucs_width('a'), 1);
    ck_assert_int_eq(cuptimon__ucs_width(0x4e2d), 2);  /* 中 */
    ck_assert_int_eq(cuptimon__ucs_width(0xac00), 2);  /* 가 */
    ck_assert_int_eq(cuptimon__ucs_width(0xff21), 2);  /* Ａ fullwidth */
    ck_assert_int_eq(cuptimon__ucs_width(0x1f600), 2); /* 😀 */
    ck_assert_int_eq(cuptimon__ucs_width(0x0301), 0);  /* combining acute */
    ck_assert_int_eq(cuptimon__ucs_width(0x200b), 0);  /* zero-width space */
    ck_assert_int_eq(cuptimon__ucs_width(0x00e9), 1);  /* é */
    ck_assert_int_eq(cuptimon__ucs_width(0x0416), 1);  /* Ж */
}
END_TEST

/* The columns s takes, counted here with the same table. */
static size_t columns(const char *s)
{
    size_t n = strlen(s), w = 0;
    for (size_t i = 0; i < n;) {
        size_t l = cuptimon__utf8_len((const unsigned char *)s + i, n - i);
        ck_assert_uint_gt(l, 0);
        w += (size_t)cuptimon__ucs_width(cuptimon__utf8_cp((const unsigned char *)s + i, l));
        i += l;
    }
    return w;
}

static json_object *proc_row(const char *label, uint64_t busy)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "pid", json_object_new_int64(7));
    json_object_object_add(o, "rank", NULL);
    json_object_object_add(o, "label", json_object_new_string(label));
    json_object_object_add(o, "hostname", json_object_new_string("h"));
    json_object_object_add(o, "gpu_busy_ns", json_object_new_uint64(busy));
    json_object_object_add(o, "busy_pct", json_object_new_double(12.34));
    json_object_object_add(o, "kernels", json_object_new_uint64(1234567));
    json_object_object_add(o, "first_unix_ns", json_object_new_uint64(0));
    json_object_object_add(o, "last_unix_ns", json_object_new_uint64(0));
    return o;
}

/* Wide characters count by their width: a column after a label of CJK
 * text starts at the same terminal column on every line. */
START_TEST(table_aligns_wide_characters)
{
    json_object *rows = json_object_new_array();
    char *buf = NULL, *line, *save;
    size_t len = 0, col = 0;
    int lines = 0;

    json_object_array_add(rows, proc_row("训练", 1));
    json_object_array_add(rows, proc_row("ab", 22));
    json_object_array_add(rows, proc_row("é́x", 333)); /* e + acute + combining acute + x */
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(cuptimon__cli_stats_print(f, CUPTIMON_STATS_PROCESSES, rows, 0, 0, " "), 0);
    fclose(f);
    for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save), lines++) {
        /* The terminal column where the Host column starts, after the
         * label: the header's "Host", the rows' "h". */
        char *h = lines == 0 ? strstr(line, "Host") : lines == 1 ? NULL : strstr(line, "  h  ");
        if (lines == 1)
            continue; /* the underline */
        ck_assert_ptr_nonnull(h);
        h += lines == 0 ? 0 : 2;
        char keep = *h;
        *h = '\0';
        size_t c = columns(line);
        *h = keep;
        if (lines == 0)
            col = c;
        ck_assert_uint_eq(c, col);
    }
    ck_assert_int_eq(lines, 5);
    free(buf);
    json_object_put(rows);
}
END_TEST

/* On a terminal, a long name is shortened in the middle to fit its width
 * exactly (counting wide characters as two columns), never splitting a
 * character; in CSV it stays whole. */
START_TEST(long_names_elided_in_the_middle)
{
    json_object *rows = json_object_new_array(), *r = json_object_new_object();
    char name[2048] = "";
    char *buf = NULL;
    size_t len = 0;

    for (int i = 0; i < 40; i++)
        strcat(name, i % 2 ? "核函数" : "kernel_"); /* wide and narrow */
    strcat(name, "END");
    json_object_object_add(r, "time_pct", json_object_new_double(100));
    json_object_object_add(r, "total_ns", json_object_new_uint64(10));
    json_object_object_add(r, "instances", json_object_new_uint64(1));
    json_object_object_add(r, "avg_ns", json_object_new_double(10));
    json_object_object_add(r, "med_ns", json_object_new_double(10));
    json_object_object_add(r, "med_exact", json_object_new_boolean(0));
    json_object_object_add(r, "min_ns", json_object_new_uint64(10));
    json_object_object_add(r, "max_ns", json_object_new_uint64(10));
    json_object_object_add(r, "stddev_ns", json_object_new_double(0));
    json_object_object_add(r, "name", json_object_new_string(name));
    json_object_array_add(rows, r);
    for (unsigned width = 140; width <= 141; width++) {
        FILE *f = open_memstream(&buf, &len);
        ck_assert_int_eq(cuptimon__cli_stats_print(f, CUPTIMON_STATS_KERNELS, rows, 0, width, ""),
                         0);
        fclose(f);
        char *row = strrchr(buf, '\n');
        *row = '\0';
        row = strrchr(buf, '\n') + 1;
        ck_assert_msg(columns(row) == width || columns(row) == width - 1, "%zu columns for %u: %s",
                      columns(row), width, row);
        ck_assert_ptr_nonnull(strstr(row, "kernel_核函数"));
        ck_assert_ptr_nonnull(strstr(row, "..."));
        ck_assert_ptr_nonnull(strstr(row, "核函数END"));
        ck_assert_ptr_nonnull(strstr(row, "~10.0")); /* a median from a histogram */
        free(buf);
        buf = NULL;
    }
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(cuptimon__cli_stats_print(f, CUPTIMON_STATS_KERNELS, rows, 1, 80, ""), 0);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, name));
    ck_assert_ptr_nonnull(strstr(buf, "\nkernels,100.0,10,1,10.0,10.0,10,10,0.0,kernel_"));
    free(buf);
    json_object_put(rows);
}
END_TEST

/* A name's control characters never reach the terminal; in CSV, a name
 * with commas and quotes is one quoted field. */
START_TEST(names_are_safe_on_a_terminal_and_in_csv)
{
    json_object *rows = json_object_new_array(), *r = json_object_new_object();
    char *buf = NULL;
    size_t len = 0;

    json_object_object_add(r, "total_ns", json_object_new_uint64(10));
    json_object_object_add(r, "name", json_object_new_string("a\033[2Jb, \"c\"\x7f"));
    json_object_array_add(rows, r);
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(cuptimon__cli_stats_print(f, CUPTIMON_STATS_KERNELS, rows, 0, 0, ""), 0);
    fclose(f);
    ck_assert_ptr_null(strchr(buf, '\033'));
    ck_assert_ptr_null(strchr(buf, '\x7f'));
    ck_assert_ptr_nonnull(strstr(buf, "a\xef\xbf\xbd[2Jb, \"c\"\xef\xbf\xbd"));
    free(buf);
    f = open_memstream(&buf, &len);
    ck_assert_int_eq(cuptimon__cli_stats_print(f, CUPTIMON_STATS_KERNELS, rows, 1, 0, ""), 0);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, ",\"a\033[2Jb, \"\"c\"\"\x7f\"\n"));
    free(buf);
    json_object_put(rows);
}
END_TEST

/* The CSV header of each report: nsys stats' column names, each row
 * key's unit in its header. */
START_TEST(csv_headers)
{
    static const char *const want[CUPTIMON_STATS_REPORTS] = {
        [CUPTIMON_STATS_KERNELS] = "Report,Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),"
                                   "Min (ns),Max (ns),StdDev (ns),Name\n",
        [CUPTIMON_STATS_MEMORY_TIME] = "Report,Time (%),Total Time (ns),Count,Avg (ns),Med (ns),"
                                       "Min (ns),Max (ns),StdDev (ns),Operation\n",
        [CUPTIMON_STATS_MEMORY_BYTES] = "Report,Total (bytes),Count,Avg (bytes),Med (bytes),"
                                        "Min (bytes),Max (bytes),StdDev (bytes),Operation\n",
        [CUPTIMON_STATS_API] = "Report,Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),"
                               "Min (ns),Max (ns),StdDev (ns),Name\n",
        [CUPTIMON_STATS_PROCESSES] = "Report,PID,Rank,Label,Host,GPU Busy (ns),Busy (%),Kernels,"
                                     "First (Unix ns),Last (Unix ns)\n",
        [CUPTIMON_STATS_NCCL] = "Report,Function,Communicator,Comm Id,Ranks,Count,Total (bytes),"
                                "Total Time (ns),Avg (ns),AlgBW (GB/s),BusBW (GB/s)\n",
    };

    for (unsigned r = 0; r < CUPTIMON_STATS_REPORTS; r++) {
        json_object *rows = json_object_new_array();
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        ck_assert_int_eq(cuptimon__cli_stats_print(f, r, rows, 1, 0, ""), 0);
        fclose(f);
        ck_assert_str_eq(buf, want[r]);
        free(buf);
        json_object_put(rows);
    }
}
END_TEST

/* One cleaning serves the engine and the terminal: malformed UTF-8
 * (a stray byte, a truncated sequence) becomes U+FFFD in both; control
 * characters (C0, DEL, C1) only with controls, as the engine keeps a
 * name's text and only a terminal must not see them. */
START_TEST(text_cleaned_for_json_and_for_a_terminal)
{
    static const char in[] = "a\tb\xff\033[2J\x7f\xc2\x9b\xe2\x82";
    char *json = cuptimon__stats_clean_text(in, 0), *term = cuptimon__stats_clean_text(in, 1);

    ck_assert_str_eq(json, "a\tb\xef\xbf\xbd\033[2J\x7f\xc2\x9b\xef\xbf\xbd\xef\xbf\xbd");
    ck_assert_str_eq(
        term, "a\xef\xbf\xbd"
              "b\xef\xbf\xbd\xef\xbf\xbd[2J\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    free(json);
    free(term);
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("stats");
    TCase *t = tcase_create("engine");
    tcase_add_test(t, kernels_exact);
    tcase_add_test(t, medians_from_histograms);
    tcase_add_test(t, histogram_collapse_is_counted);
    tcase_add_test(t, exact_limit_moves_the_largest);
    tcase_add_test(t, incomplete_records_are_counted_not_shown);
    tcase_add_test(t, names_past_the_cap_share_a_row);
    tcase_add_test(t, memory_by_kind_time_and_bytes);
    tcase_add_test(t, api_by_call_name);
    tcase_add_test(t, processes_busy_union_and_times);
    tcase_add_test(t, busy_past_the_interval_cap);
    suite_add_tcase(s, t);
    t = tcase_create("tables");
    tcase_add_test(t, character_widths);
    tcase_add_test(t, table_aligns_wide_characters);
    tcase_add_test(t, long_names_elided_in_the_middle);
    tcase_add_test(t, names_are_safe_on_a_terminal_and_in_csv);
    tcase_add_test(t, csv_headers);
    tcase_add_test(t, text_cleaned_for_json_and_for_a_terminal);
    suite_add_tcase(s, t);
    return s;
}
