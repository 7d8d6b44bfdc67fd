/* Unit tests of the live aggregates (daemon/aggregate.c): exact counts and
 * totals over synthetic records built with the real CUDA 13.0 structs and
 * over the real H200 buffers, the busy union of known intervals, the
 * percentiles of a known distribution, the top-N bound, the query parser,
 * the Prometheus text (every line parsed, label escaping, promtool when
 * installed), the atomic file write, threads, and the cost per record. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include <cupti_activity.h>

#include "daemon/aggregate.h"
#include "archive/decode.h"
#include "archive/strtab.h"
#include "proto/cuptimon-proto.h"
#include "tests/unit/testlib.h"

#define PTR(v) ((const char *)(uintptr_t)(v))
#define S_NS   1000000000ull

static void layout_13(struct cuptimon_layout *l)
{
    uint32_t sizes[CUPTIMON_KIND_SLOTS];

    memset(sizes, 0, sizeof(sizes));
    sizes[1] = sizeof(CUpti_ActivityMemcpy6);
    sizes[2] = sizeof(CUpti_ActivityMemset4);
    sizes[3] = sizeof(CUpti_ActivityKernel10);
    sizes[4] = sizeof(CUpti_ActivityAPI);
    sizes[5] = sizeof(CUpti_ActivityAPI);
    sizes[10] = sizeof(CUpti_ActivityKernel10);
    sizes[22] = sizeof(CUpti_ActivityMemcpyPtoP4);
    ck_assert_int_eq(cuptimon__layout_init(l, 130001, sizes), 0);
}

/* ---- synthetic buffers ------------------------------------------------------ */

struct tbuf {
    uint8_t *p;
    size_t len, cap;
};

static void tb_put(struct tbuf *b, const void *rec, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->cap + n) * 2;
        b->p = realloc(b->p, b->cap);
        ck_assert_ptr_nonnull(b->p);
    }
    memcpy(b->p + b->len, rec, n);
    b->len += n;
}

static void add_kernel(struct tbuf *b, uint64_t name, uint32_t dev, uint64_t start, uint64_t end)
{
    CUpti_ActivityKernel10 k;

    memset(&k, 0, sizeof(k));
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = start;
    k.end = end;
    k.deviceId = dev;
    k.contextId = 1;
    k.streamId = 7;
    k.gridX = k.gridY = k.gridZ = 1;
    k.blockX = k.blockY = k.blockZ = 1;
    k.name = PTR(name);
    tb_put(b, &k, sizeof(k));
}

static void add_memcpy(struct tbuf *b, int kind, uint32_t dev, uint64_t bytes, uint64_t start,
                       uint64_t end)
{
    CUpti_ActivityMemcpy6 m;

    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = (uint8_t)kind;
    m.bytes = bytes;
    m.start = start;
    m.end = end;
    m.deviceId = dev;
    tb_put(b, &m, sizeof(m));
}

static void add_memset(struct tbuf *b, uint32_t dev, uint64_t bytes, uint64_t start, uint64_t end)
{
    CUpti_ActivityMemset4 m;

    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.bytes = bytes;
    m.start = start;
    m.end = end;
    m.deviceId = dev;
    tb_put(b, &m, sizeof(m));
}

/* A whole second some time before now, so that the records are neither
 * in the future nor older than the ring. */
static uint64_t base_sec(void)
{
    return (uint64_t)time(NULL) - 100;
}

static struct cuptimon_agg *new_agg(unsigned top_n)
{
    struct cuptimon_agg_limits lim = {.top_n = top_n};
    struct cuptimon_agg *a;

    ck_assert_int_eq(cuptimon__agg_new(&lim, &a), 0);
    return a;
}

static json_object *query(struct cuptimon_agg *a, int by, int sort, uint64_t now_sec, int lag)
{
    struct cuptimon_agg_query q;
    json_object *o;

    memset(&q, 0, sizeof(q));
    q.by = by;
    q.sort = sort;
    q.n = 1000;
    q.now_ns = (int64_t)(now_sec * S_NS);
    q.lag_s = lag;
    o = cuptimon__agg_json(a, &q);
    ck_assert_ptr_nonnull(o);
    return o;
}

static json_object *jget(json_object *o, const char *k)
{
    json_object *v = NULL;
    ck_assert_msg(json_object_object_get_ex(o, k, &v), "no \"%s\" in %s", k,
                  json_object_to_json_string(o));
    return v;
}

static uint64_t ju(json_object *o, const char *k)
{
    return (uint64_t)json_object_get_int64(jget(o, k));
}

static double jd(json_object *o, const char *k)
{
    return json_object_get_double(jget(o, k));
}

static json_object *rows(json_object *o)
{
    return jget(o, "rows");
}

/* The row whose "name" is name, or NULL. */
static json_object *row_named(json_object *o, const char *name)
{
    json_object *r = rows(o);
    for (size_t i = 0; i < json_object_array_length(r); i++) {
        json_object *x = json_object_array_get_idx(r, i), *n;
        if (json_object_object_get_ex(x, "name", &n) &&
            strcmp(json_object_get_string(n), name) == 0)
            return x;
    }
    return NULL;
}

static json_object *device0(json_object *o)
{
    json_object *d = jget(o, "devices");
    ck_assert_uint_ge(json_object_array_length(d), 1);
    return json_object_array_get_idx(d, 0);
}

/* ---- histogram ------------------------------------------------------------------ */

START_TEST(hist_buckets_are_within_a_sixteenth)
{
    for (uint64_t v = 0; v < 100000; v++) {
        unsigned i = cuptimon__agg_hist_index(v);
        ck_assert_uint_le(cuptimon__agg_hist_low(i), v);
        ck_assert_uint_gt(cuptimon__agg_hist_low(i + 1), v);
    }
    for (uint64_t v = 1; v < (1ull << 38); v = v * 3 + 1) {
        unsigned i = cuptimon__agg_hist_index(v);
        uint64_t mid = cuptimon__agg_hist_mid(i);
        double err = mid > v ? (double)(mid - v) / (double)v : (double)(v - mid) / (double)v;
        ck_assert_uint_lt(i, CUPTIMON_AGG_HIST_BUCKETS);
        ck_assert_msg(err <= 1.0 / 16, "v %" PRIu64 " mid %" PRIu64, v, mid);
    }
    ck_assert_uint_eq(cuptimon__agg_hist_index(0), 0);
    ck_assert_uint_eq(cuptimon__agg_hist_index(7), 7);
    ck_assert_uint_eq(cuptimon__agg_hist_index(UINT64_MAX), CUPTIMON_AGG_HIST_BUCKETS - 1);
}
END_TEST

/* ---- exact counts over synthetic buffers ------------------------------------------ */

static struct cuptimon_strtab *names3(void)
{
    struct cuptimon_strtab *t;
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &t), 0);
    ck_assert_int_eq(cuptimon__strtab_put(t, 0x1000, "_Z5scaleILi2EEvPfi", 18), 0);
    ck_assert_int_eq(cuptimon__strtab_put(t, 0x2000, "_Z5scaleILi3EEvPfi", 18), 0);
    ck_assert_int_eq(cuptimon__strtab_put(t, 0x3000, "_ZN2ns7add_oneEPfi", 18), 0);
    return t;
}

START_TEST(synthetic_exact)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = new_agg(0);
    struct cuptimon_strtab *t = names3();
    struct tbuf b = {0};
    uint64_t s0 = base_sec() * S_NS, total[3] = {0};
    uint64_t names[3] = {0x1000, 0x2000, 0x3000};
    json_object *o, *r, *d, *mc;
    struct cuptimon_agg_ident id = {.pid = 4242, .job = "j7", .rank = "3", .label = "train"};

    layout_13(&l);
    ck_assert_int_eq(cuptimon__agg_session(a, 1, &id, 5, 2), 0);
    /* 300 kernels in turn, durations 1000 + i ns, back to back with 10-ns
     * gaps; a DtoH copy every 50, an HtoD every 60, a memset every 70. */
    uint64_t t0 = s0 + 1000;
    int copies_dtoh = 0, copies_htod = 0, memsets = 0;
    for (int i = 0; i < 300; i++) {
        uint64_t dur = 1000 + (uint64_t)i;
        add_kernel(&b, names[i % 3], 0, t0, t0 + dur);
        total[i % 3] += dur;
        t0 += dur + 10;
        if (i % 50 == 0) {
            add_memcpy(&b, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 0, 4096, t0, t0 + 5);
            copies_dtoh++;
        }
        if (i % 60 == 0) {
            add_memcpy(&b, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 0, 1 << 20, t0, t0 + 5);
            copies_htod++;
        }
        if (i % 70 == 0) {
            add_memset(&b, 0, 8192, t0, t0 + 5);
            memsets++;
        }
    }
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b.p, b.len, NULL),
                     300 + copies_dtoh + copies_htod + memsets);

    o = query(a, CUPTIMON_AGG_BY_KERNEL, CUPTIMON_AGG_SORT_TIME, base_sec() + 100, 2);
    ck_assert_uint_eq(json_object_array_length(rows(o)), 3);
    const char *want[3] = {"void scale<2>(float*, int)", "void scale<3>(float*, int)",
                           "ns::add_one(float*, int)"};
    const char *mangled[3] = {"_Z5scaleILi2EEvPfi", "_Z5scaleILi3EEvPfi", "_ZN2ns7add_oneEPfi"};
    for (int k = 0; k < 3; k++) {
        r = row_named(o, want[k]);
        ck_assert_msg(r != NULL, "no row %s in %s", want[k], json_object_to_json_string(o));
        ck_assert_uint_eq(ju(r, "count"), 100);
        ck_assert_uint_eq(ju(r, "total_ns"), total[k]);
        ck_assert_uint_eq(ju(r, "min_ns"), 1000 + (uint64_t)k);
        ck_assert_uint_eq(ju(r, "max_ns"), 1000 + 297 + (uint64_t)k);
        ck_assert_uint_eq(ju(r, "processes"), 1);
        ck_assert_str_eq(json_object_get_string(jget(r, "mangled")), mangled[k]);
    }
    /* Sorted by time: add_one (the longest of each triple) first. */
    ck_assert_str_eq(json_object_get_string(jget(json_object_array_get_idx(rows(o), 0), "name")),
                     want[2]);
    json_object *node = jget(o, "node");
    ck_assert_uint_eq(ju(node, "kernels"), 300);
    ck_assert_uint_eq(ju(node, "kernel_ns"), total[0] + total[1] + total[2]);
    ck_assert_uint_eq(ju(node, "memcpys"), (uint64_t)(copies_dtoh + copies_htod));
    ck_assert_uint_eq(ju(node, "memcpy_bytes"),
                      (uint64_t)copies_dtoh * 4096 + (uint64_t)copies_htod * (1 << 20));
    ck_assert_uint_eq(ju(node, "memsets"), (uint64_t)memsets);
    ck_assert_uint_eq(ju(node, "memset_bytes"), (uint64_t)memsets * 8192);
    ck_assert_uint_eq(ju(node, "dropped_records"), 5);
    ck_assert_uint_eq(ju(node, "lost_buffers"), 2);
    d = device0(o);
    ck_assert_uint_eq(ju(d, "device"), 0);
    ck_assert_uint_eq(ju(d, "kernels"), 300);
    /* The kernels do not overlap: busy is their sum. */
    ck_assert_uint_eq(ju(d, "busy_ns_total"), total[0] + total[1] + total[2]);
    mc = jget(d, "memcpy");
    ck_assert_uint_eq(ju(jget(mc, "DtoH"), "bytes"), (uint64_t)copies_dtoh * 4096);
    ck_assert_uint_eq(ju(jget(mc, "DtoH"), "count"), (uint64_t)copies_dtoh);
    ck_assert_uint_eq(ju(jget(mc, "HtoD"), "bytes"), (uint64_t)copies_htod * (1 << 20));
    ck_assert_uint_eq(ju(d, "memset_bytes"), (uint64_t)memsets * 8192);
    json_object_put(o);

    /* By process: the identity and the totals. */
    o = query(a, CUPTIMON_AGG_BY_PROCESS, CUPTIMON_AGG_SORT_TIME, base_sec() + 100, 2);
    ck_assert_uint_eq(json_object_array_length(rows(o)), 1);
    r = json_object_array_get_idx(rows(o), 0);
    ck_assert_uint_eq(ju(r, "pid"), 4242);
    ck_assert_str_eq(json_object_get_string(jget(r, "job")), "j7");
    ck_assert_str_eq(json_object_get_string(jget(r, "rank")), "3");
    ck_assert_str_eq(json_object_get_string(jget(r, "label")), "train");
    ck_assert_uint_eq(ju(r, "kernels"), 300);
    ck_assert_uint_eq(ju(r, "kernel_ns"), total[0] + total[1] + total[2]);
    ck_assert_uint_eq(ju(r, "memsets"), (uint64_t)memsets);
    ck_assert_uint_eq(ju(r, "dropped_records"), 5);
    ck_assert_uint_eq(ju(r, "lost_buffers"), 2);
    json_object_put(o);

    /* Filters. */
    struct cuptimon_agg_query q;
    memset(&q, 0, sizeof(q));
    q.lag_s = -1;
    q.pid = 4243;
    o = cuptimon__agg_json(a, &q);
    ck_assert_uint_eq(json_object_array_length(rows(o)), 0);
    ck_assert_uint_eq(ju(jget(o, "node"), "sessions"), 1);
    ck_assert_uint_eq(ju(jget(o, "node"), "sessions_shown"), 0);
    json_object_put(o);
    memset(&q, 0, sizeof(q));
    q.lag_s = -1;
    q.by = CUPTIMON_AGG_BY_KERNEL;
    snprintf(q.rank, sizeof(q.rank), "3");
    snprintf(q.label, sizeof(q.label), "train");
    snprintf(q.job, sizeof(q.job), "j7");
    o = cuptimon__agg_json(a, &q);
    ck_assert_uint_eq(json_object_array_length(rows(o)), 3);
    json_object_put(o);
    snprintf(q.job, sizeof(q.job), "j8");
    o = cuptimon__agg_json(a, &q);
    ck_assert_uint_eq(json_object_array_length(rows(o)), 0);
    json_object_put(o);

    /* A second process with the same kernels: one row per name, two
     * processes, the counts added. */
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 2, &l, t, b.p, b.len, NULL),
                     300 + copies_dtoh + copies_htod + memsets);
    o = query(a, CUPTIMON_AGG_BY_KERNEL, CUPTIMON_AGG_SORT_COUNT, base_sec() + 100, 2);
    ck_assert_uint_eq(json_object_array_length(rows(o)), 3);
    r = row_named(o, want[0]);
    ck_assert_uint_eq(ju(r, "count"), 200);
    ck_assert_uint_eq(ju(r, "total_ns"), 2 * total[0]);
    ck_assert_uint_eq(ju(r, "processes"), 2);
    /* The same intervals on the same device: busy is counted once. */
    d = device0(o);
    ck_assert_uint_eq(ju(d, "kernels"), 600);
    ck_assert_uint_eq(ju(d, "busy_ns_total"), total[0] + total[1] + total[2]);
    ck_assert_uint_eq(ju(d, "busy_unchecked_ns"), 0);
    json_object_put(o);

    cuptimon__agg_forget(a, 2);
    cuptimon__agg_forget(a, 99); /* unknown: ignored */
    o = query(a, CUPTIMON_AGG_BY_KERNEL, CUPTIMON_AGG_SORT_TIME, base_sec() + 100, 2);
    ck_assert_uint_eq(ju(row_named(o, want[0]), "count"), 100);
    ck_assert_uint_eq(ju(jget(o, "node"), "sessions"), 1);
    json_object_put(o);

    free(b.p);
    cuptimon__strtab_free(t);
    cuptimon__agg_free(a);
}
END_TEST

/* Names that arrive after their kernels, and unknown pointers. */
START_TEST(names_resolve_late)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = new_agg(0);
    struct cuptimon_strtab *t;
    struct tbuf b = {0};
    uint64_t s0 = base_sec() * S_NS;
    json_object *o;

    layout_13(&l);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &t), 0);
    add_kernel(&b, 0x1000, 0, s0, s0 + 100);
    add_kernel(&b, 0x5000, 0, s0 + 200, s0 + 300);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b.p, b.len, NULL), 2);
    ck_assert_int_eq(cuptimon__strtab_put(t, 0x1000, "_Z5scaleILi2EEvPfi", 18), 0);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b.p, b.len, NULL), 2);
    o = query(a, CUPTIMON_AGG_BY_KERNEL, CUPTIMON_AGG_SORT_TIME, base_sec() + 100, 2);
    ck_assert_uint_eq(ju(row_named(o, "void scale<2>(float*, int)"), "count"), 2);
    ck_assert_uint_eq(ju(row_named(o, "<unknown kernel 0x5000>"), "count"), 2);
    json_object_put(o);
    /* No string table at all. */
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 2, &l, NULL, b.p, b.len, NULL), 2);
    o = query(a, CUPTIMON_AGG_BY_KERNEL, CUPTIMON_AGG_SORT_TIME, base_sec() + 100, 2);
    ck_assert_uint_eq(ju(row_named(o, "<unknown kernel 0x1000>"), "count"), 1);
    json_object_put(o);
    /* A pointer the producer re-used for another name: what it counted
     * so far goes to other, the new name starts afresh. */
    ck_assert_int_eq(cuptimon__strtab_put(t, 0x1000, "_ZN2ns7add_oneEPfi", 18), 0);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b.p, b.len, NULL), 2);
    struct cuptimon_agg_query q;
    memset(&q, 0, sizeof(q));
    q.lag_s = -1;
    q.by = CUPTIMON_AGG_BY_KERNEL;
    q.pid = -1; /* the identity was never set: pid -1 */
    o = cuptimon__agg_json(a, &q);
    ck_assert_uint_eq(ju(row_named(o, "ns::add_one(float*, int)"), "count"), 1);
    ck_assert_ptr_null(row_named(o, "void scale<2>(float*, int)"));
    json_object *other = NULL;
    for (size_t i = 0; i < json_object_array_length(rows(o)); i++) {
        json_object *x = json_object_array_get_idx(rows(o), i);
        if (json_object_get_boolean(jget(x, "other")))
            other = x;
    }
    ck_assert_ptr_nonnull(other);
    ck_assert_str_eq(json_object_get_string(jget(other, "name")), "other");
    ck_assert_uint_eq(ju(other, "count"), 2);
    json_object_put(o);
    free(b.p);
    cuptimon__strtab_free(t);
    cuptimon__agg_free(a);
}
END_TEST

/* ---- busy union ------------------------------------------------------------------- */

START_TEST(busy_union_of_known_intervals)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = new_agg(0);
    struct tbuf b1 = {0}, b2 = {0}, b3 = {0};
    uint64_t S = base_sec(), s0 = S * S_NS;
    json_object *o, *d, *ser;

    layout_13(&l);
    /* Second S: [0, .2) and [.1, .3) overlap (union .3), [.5, .6): .4 in
     * all; [.9, 1.4) adds .1 to S and .4 to S+1.  Given out of order, and
     * split over two buffers and two processes. */
    add_kernel(&b1, 0x1, 0, s0 + 500000000, s0 + 600000000);
    add_kernel(&b1, 0x1, 0, s0 + 100000000, s0 + 300000000);
    add_kernel(&b2, 0x2, 0, s0 + 900000000, s0 + 1400000000);
    add_kernel(&b2, 0x2, 0, s0, s0 + 200000000);
    /* Another device: its own union. */
    add_kernel(&b3, 0x3, 1, s0, s0 + 250000000);
    /* Kernels wholly inside what is already busy add nothing. */
    add_kernel(&b3, 0x3, 0, s0 + 150000000, s0 + 160000000);
    add_kernel(&b3, 0x3, 0, s0 + 1000000000, s0 + 1100000000);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, NULL, b1.p, b1.len, NULL), 2);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 2, &l, NULL, b2.p, b2.len, NULL), 2);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 2, &l, NULL, b3.p, b3.len, NULL), 3);

    /* now S+3, lag 2: the 1-s window is second S. */
    o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, S + 3, 2);
    ck_assert_uint_eq(json_object_array_length(rows(o)), 2);
    d = device0(o);
    ck_assert_uint_eq(ju(d, "busy_ns_total"), 900000000);
    ck_assert_uint_eq(ju(d, "busy_unchecked_ns"), 0);
    ck_assert_double_eq_tol(jd(d, "busy_1s"), 0.5, 1e-9);
    ck_assert_double_eq_tol(jd(d, "busy_10s"), 0.05, 1e-9);
    ck_assert_double_eq_tol(jd(d, "busy_60s"), 0.5 / 60, 1e-9);
    ser = jget(d, "busy_series");
    ck_assert_uint_eq(json_object_array_length(ser), 60);
    ck_assert_double_eq_tol(json_object_get_double(json_object_array_get_idx(ser, 59)), 0.5, 1e-9);
    ck_assert_double_eq_tol(json_object_get_double(json_object_array_get_idx(ser, 58)), 0, 1e-9);
    json_object_put(o);
    /* lag 1: second S+1 is the last; 10 s: S and S+1. */
    o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, S + 3, 1);
    d = device0(o);
    ck_assert_double_eq_tol(jd(d, "busy_1s"), 0.4, 1e-9);
    ck_assert_double_eq_tol(jd(d, "busy_10s"), 0.09, 1e-9);
    d = json_object_array_get_idx(jget(o, "devices"), 1);
    ck_assert_uint_eq(ju(d, "device"), 1);
    ck_assert_uint_eq(ju(d, "busy_ns_total"), 250000000);
    ck_assert_double_eq_tol(jd(d, "busy_10s"), 0.025, 1e-9);
    json_object_put(o);

    free(b1.p);
    free(b2.p);
    free(b3.p);
    cuptimon__agg_free(a);
}
END_TEST

/* Two ranks each given one GPU by CUDA_VISIBLE_DEVICES call it device 0;
 * the UUIDs their shims sent put their work on the node's GPUs 3 and 5
 * (the node map: the GPU metrics' device list).  A UUID the map does not
 * know yet (the sampler still listing the devices) leaves the process's
 * ordinal until it does, and is asked again at the session's next buffer;
 * a session without UUIDs keeps its ordinals. */
struct fake_map {
    int known; /* the list is read: final */
    int asked; /* node_of calls */
};

static int fake_node_of(void *ud, const char *uuid)
{
    struct fake_map *m = ud;
    m->asked++;
    if (!m->known)
        return -1;
    if (strcmp(uuid, "GPU-fa4e0000-0000-4000-8000-000000000003") == 0)
        return 3;
    if (strcmp(uuid, "GPU-fa4e0000-0000-4000-8000-000000000005") == 0)
        return 5;
    return -2;
}

static uint64_t busy_of(json_object *o, uint32_t dev)
{
    json_object *d = jget(o, "devices");
    for (size_t i = 0; i < json_object_array_length(d); i++)
        if (ju(json_object_array_get_idx(d, i), "device") == dev)
            return ju(json_object_array_get_idx(d, i), "busy_ns_total");
    return 0;
}

START_TEST(devices_are_the_nodes_gpus)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = new_agg(0);
    struct cuptimon_strtab *t1, *t2;
    struct tbuf b1 = {0}, b2 = {0}, b3 = {0}, b4 = {0};
    uint64_t S = base_sec(), s0 = S * S_NS;
    struct fake_map map = {0};
    json_object *o;

    layout_13(&l);
    cuptimon__agg_set_node_map(a, fake_node_of, &map);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &t1), 0);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &t2), 0);
    ck_assert_int_eq(cuptimon__strtab_put(t1, CUPTIMON_DEVICE_UUID_KEY(0),
                                          "GPU-fa4e0000-0000-4000-8000-000000000003", 40),
                     0);
    ck_assert_int_eq(cuptimon__strtab_put(t2, CUPTIMON_DEVICE_UUID_KEY(0),
                                          "GPU-fa4e0000-0000-4000-8000-000000000005", 40),
                     0);
    add_kernel(&b1, 0x1, 0, s0, s0 + 100000000);
    add_kernel(&b2, 0x2, 0, s0 + 100000000, s0 + 300000000);
    add_kernel(&b3, 0x1, 0, s0 + 400000000, s0 + 450000000);
    add_kernel(&b4, 0x3, 0, s0 + 600000000, s0 + 670000000); /* a third session: no UUIDs */
    /* Rank 1's first buffer comes before the map knows its GPU: its
     * records wait for it, and are not put on the process's ordinal 0. */
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t1, b1.p, b1.len, NULL), 1);
    o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, S + 3, 2);
    ck_assert_uint_eq(busy_of(o, 0), 0);
    json_object_put(o);
    map.known = 1;
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t1, b3.p, b3.len, NULL), 1);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 2, &l, t2, b2.p, b2.len, NULL), 1);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 3, &l, NULL, b4.p, b4.len, NULL), 1);
    ck_assert_int_eq(map.asked, 3); /* rank 1 twice, rank 2 once */
    o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, S + 3, 2);
    ck_assert_uint_eq(busy_of(o, 0), 70000000); /* no UUID */
    ck_assert_uint_eq(busy_of(o, 3), 100000000 + 50000000);
    ck_assert_uint_eq(busy_of(o, 5), 200000000);
    ck_assert_uint_eq(json_object_array_length(jget(o, "devices")), 3);
    ck_assert_uint_eq(ju(jget(o, "node"), "records_on_process_ordinal"), 0);
    json_object_put(o);
    free(b1.p);
    free(b2.p);
    free(b3.p);
    free(b4.p);
    cuptimon__strtab_free(t1);
    cuptimon__strtab_free(t2);
    cuptimon__agg_free(a);
}
END_TEST

/* A kernel still running (a HELD report: its record comes when it ends)
 * makes its GPU busy from when it was first seen until now, in the busy
 * ratios and series, at least the part of each second it covers; the busy
 * total stays the records'.  Its GPU is the node's, through the UUIDs the
 * process sent, also before any record came (the device is created).
 * Before the fix a GPU running an 8-s kernel read 0 % busy. */
START_TEST(busy_counts_the_kernel_running_now)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = new_agg(0);
    struct cuptimon_strtab *t1, *t2;
    struct tbuf b1 = {0};
    uint64_t S = base_sec(), s0 = S * S_NS;
    struct fake_map map = {.known = 1};
    json_object *o, *d;

    layout_13(&l);
    cuptimon__agg_set_node_map(a, fake_node_of, &map);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &t1), 0);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &t2), 0);
    ck_assert_int_eq(cuptimon__strtab_put(t1, CUPTIMON_DEVICE_UUID_KEY(0),
                                          "GPU-fa4e0000-0000-4000-8000-000000000003", 40),
                     0);
    ck_assert_int_eq(cuptimon__strtab_put(t2, CUPTIMON_DEVICE_UUID_KEY(0),
                                          "GPU-fa4e0000-0000-4000-8000-000000000005", 40),
                     0);
    /* Process 1: 0.1 s of kernels in second S, then one kernel running
     * since S + 1.5 (its ordinal 0 is the node's GPU 3). */
    add_kernel(&b1, 0x1, 0, s0, s0 + 100000000);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t1, b1.p, b1.len, NULL), 1);
    struct cuptimon_agg_held h = {
        .since_ns = s0 + 1500000000, .what = "kernel hold()", .kernel = 1, .device = 0};
    cuptimon__agg_session_held(a, 1, &h);
    /* Process 2: no record yet, only its UUIDs, and a kernel running
     * since S + 2 on its ordinal 0, the node's GPU 5. */
    ck_assert_int_eq(cuptimon__agg_session(a, 2, NULL, 0, 0), 0);
    cuptimon__agg_session_devices(a, 2, t2);
    h.since_ns = s0 + 2 * S_NS;
    cuptimon__agg_session_held(a, 2, &h);

    /* now S + 5, lag 2: the 1-s window is second S + 2. */
    o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, S + 5, 2);
    ck_assert_uint_eq(json_object_array_length(jget(o, "devices")), 2);
    d = device0(o);
    ck_assert_uint_eq(ju(d, "device"), 3);
    ck_assert_double_eq_tol(jd(d, "busy_1s"), 1.0, 1e-9);
    ck_assert_double_eq_tol(jd(d, "busy_10s"), (0.1 + 0.5 + 1.0) / 10, 1e-9);
    ck_assert_double_eq_tol(
        json_object_get_double(json_object_array_get_idx(jget(d, "busy_series"), 58)), 0.5, 1e-9);
    ck_assert_uint_eq(ju(d, "busy_ns_total"), 100000000);
    d = json_object_array_get_idx(jget(o, "devices"), 1);
    ck_assert_uint_eq(ju(d, "device"), 5);
    ck_assert_double_eq_tol(jd(d, "busy_1s"), 1.0, 1e-9);
    ck_assert_double_eq_tol(jd(d, "busy_10s"), 0.1, 1e-9);
    json_object_put(o);
    /* The metrics' gauge too (its window ends 2 s before the real now,
     * long after S + 2: both kernels cover all of it). */
    char *text = cuptimon__agg_prometheus(a);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "cuptimon_gpu_busy_ratio{device=\"3\"} 1.000000\n") &&
                      strstr(text, "cuptimon_gpu_busy_ratio{device=\"5\"} 1.000000\n"),
                  "%s", text);
    free(text);

    /* Work that is not a kernel, or nothing held: the records alone. */
    h.kernel = 0;
    cuptimon__agg_session_held(a, 1, &h);
    h = (struct cuptimon_agg_held){.what = ""};
    cuptimon__agg_session_held(a, 2, &h);
    o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, S + 5, 2);
    d = device0(o);
    ck_assert_double_eq_tol(jd(d, "busy_1s"), 0, 1e-9);
    ck_assert_double_eq_tol(jd(d, "busy_10s"), 0.01, 1e-9);
    json_object_put(o);
    free(b1.p);
    cuptimon__strtab_free(t1);
    cuptimon__strtab_free(t2);
    cuptimon__agg_free(a);
}
END_TEST

/* A UUID the node's final list does not have (a GPU the daemon cannot
 * see) keeps the process's ordinal, and is not looked up again at every
 * buffer of the session. */
START_TEST(device_not_on_the_node_asked_once)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = new_agg(0);
    struct cuptimon_strtab *t;
    struct tbuf b = {0};
    uint64_t S = base_sec(), s0 = S * S_NS;
    struct fake_map map = {.known = 1};
    json_object *o;

    layout_13(&l);
    cuptimon__agg_set_node_map(a, fake_node_of, &map);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &t), 0);
    ck_assert_int_eq(cuptimon__strtab_put(t, CUPTIMON_DEVICE_UUID_KEY(1),
                                          "GPU-fa4e0000-0000-4000-8000-000000000009", 40),
                     0);
    add_kernel(&b, 0x1, 1, s0, s0 + 100000000);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b.p, b.len, NULL), 1);
    ck_assert_int_eq(map.asked, 1);
    o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, S + 3, 2);
    ck_assert_uint_eq(busy_of(o, 1), 100000000); /* the same interval five times */
    json_object_put(o);
    free(b.p);
    cuptimon__strtab_free(t);
    cuptimon__agg_free(a);
}
END_TEST

/* The records of a GPU the map has not named wait for it only so long
 * (map_wait_s) and so many (32768 a session): past either they count on
 * the process's ordinal, counted; a process that ends puts what waits on
 * its GPUs as the map has them then. */
/* An aggregate whose node map is map (map_wait_s 0: the default), and a
 * session's names giving its device 0 the UUID of the node's GPU 3. */
static struct cuptimon_agg *agg_mapped(uint32_t map_wait_s, struct fake_map *map,
                                       struct cuptimon_layout *l, struct cuptimon_strtab **t)
{
    struct cuptimon_agg_limits lim = {.map_wait_s = map_wait_s};
    struct cuptimon_agg *a;

    ck_assert_int_eq(cuptimon__agg_new(&lim, &a), 0);
    layout_13(l);
    cuptimon__agg_set_node_map(a, fake_node_of, map);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, t), 0);
    ck_assert_int_eq(cuptimon__strtab_put(*t, CUPTIMON_DEVICE_UUID_KEY(0),
                                          "GPU-fa4e0000-0000-4000-8000-000000000003", 40),
                     0);
    return a;
}

static uint64_t own_ordinal(struct cuptimon_agg *a)
{
    struct cuptimon_agg_stats st;
    cuptimon__agg_stats(a, &st);
    return st.own_ordinal;
}

START_TEST(waiting_for_the_map_is_bounded_in_time)
{
    struct cuptimon_layout l;
    struct cuptimon_strtab *t;
    struct tbuf b1 = {0}, b2 = {0}, b3 = {0};
    uint64_t S = base_sec(), s0 = S * S_NS;
    struct fake_map map = {0};
    struct cuptimon_agg *a = agg_mapped(1, &map, &l, &t);
    json_object *o;

    add_kernel(&b1, 0x1, 0, s0, s0 + 10000000);
    add_kernel(&b2, 0x1, 0, s0 + 20000000, s0 + 50000000);
    add_kernel(&b3, 0x1, 0, s0 + 60000000, s0 + 160000000);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b1.p, b1.len, NULL), 1);
    ck_assert_uint_eq(own_ordinal(a), 0);
    usleep(1100000); /* past map_wait_s: only that it passed matters */
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b2.p, b2.len, NULL), 1);
    o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, S + 3, 2);
    ck_assert_uint_eq(busy_of(o, 0), 10000000 + 30000000);
    ck_assert_uint_eq(ju(jget(o, "node"), "records_on_process_ordinal"), 2);
    json_object_put(o);
    /* The map answers at last: later records go on the node's GPU. */
    map.known = 1;
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b3.p, b3.len, NULL), 1);
    o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, S + 3, 2);
    ck_assert_uint_eq(busy_of(o, 3), 100000000);
    ck_assert_uint_eq(busy_of(o, 0), 40000000);
    json_object_put(o);
    ck_assert_uint_eq(own_ordinal(a), 2);
    free(b1.p);
    free(b2.p);
    free(b3.p);
    cuptimon__strtab_free(t);
    cuptimon__agg_free(a);
}
END_TEST

START_TEST(waiting_for_the_map_is_bounded_in_records)
{
    struct cuptimon_layout l;
    struct cuptimon_strtab *t;
    struct tbuf b = {0}, b2 = {0};
    uint64_t S = base_sec() - 10, s0 = S * S_NS;
    struct fake_map map = {0};
    struct cuptimon_agg *a = agg_mapped(0, &map, &l, &t);
    json_object *o;
    const unsigned n = 40000, cap = 32768;

    for (unsigned i = 0; i < n; i++)
        add_kernel(&b, 0x1, 0, s0 + i * 5000ull, s0 + i * 5000ull + 3000);
    add_kernel(&b2, 0x1, 0, s0 + n * 5000ull, s0 + n * 5000ull + 3000);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b.p, b.len, NULL), (int)n);
    ck_assert_uint_eq(own_ordinal(a), n - cap);
    map.known = 1;
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b2.p, b2.len, NULL), 1);
    o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, S + 3, 2);
    ck_assert_uint_eq(busy_of(o, 3), (cap + 1) * 3000ull);
    ck_assert_uint_eq(busy_of(o, 0), (n - cap) * 3000ull);
    json_object_put(o);
    free(b.p);
    free(b2.p);
    cuptimon__strtab_free(t);
    cuptimon__agg_free(a);
}
END_TEST

START_TEST(waiting_for_the_map_ends_with_the_process)
{
    struct cuptimon_layout l;
    struct cuptimon_strtab *t;
    struct tbuf b = {0};
    uint64_t S = base_sec(), s0 = S * S_NS;
    struct fake_map map = {0};
    struct cuptimon_agg *a = agg_mapped(0, &map, &l, &t);
    json_object *o;

    add_kernel(&b, 0x1, 0, s0, s0 + 10000000);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b.p, b.len, NULL), 1);
    cuptimon__agg_end(a, 1);
    o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, S + 3, 2);
    ck_assert_uint_eq(busy_of(o, 0), 10000000);
    json_object_put(o);
    ck_assert_uint_eq(own_ordinal(a), 1);
    /* A buffer after the end does not wait: nothing would release it. */
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b.p, b.len, NULL), 1);
    ck_assert_uint_eq(own_ordinal(a), 2);
    free(b.p);
    cuptimon__strtab_free(t);
    cuptimon__agg_free(a);
}
END_TEST

/* Many disjoint intervals, past the device's interval budget, in order
 * and then a late one: the total stays exact in order, and what could not
 * be checked is reported. */
START_TEST(busy_many_intervals)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = new_agg(0);
    struct tbuf b = {0}, late = {0};
    uint64_t S = base_sec() - 10, s0 = S * S_NS, sum = 0;
    json_object *o, *d;

    layout_13(&l);
    /* 100000 kernels of 3 us every 5 us over 0.5 s. */
    for (uint64_t i = 0; i < 100000; i++) {
        add_kernel(&b, 0x1, 0, s0 + i * 5000, s0 + i * 5000 + 3000);
        sum += 3000;
    }
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, NULL, b.p, b.len, NULL), 100000);
    o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, S + 3, 2);
    d = device0(o);
    ck_assert_uint_eq(ju(d, "busy_ns_total"), sum);
    ck_assert_uint_eq(ju(d, "busy_unchecked_ns"), 0);
    ck_assert_double_eq_tol(jd(d, "busy_1s"), 0.3, 1e-9);
    json_object_put(o);
    /* An old gap filled late: over released intervals, so unchecked. */
    add_kernel(&late, 0x1, 0, s0 + 3000, s0 + 5000);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, NULL, late.p, late.len, NULL), 1);
    o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, S + 3, 2);
    d = device0(o);
    ck_assert_uint_eq(ju(d, "busy_ns_total"), sum + 2000);
    ck_assert_uint_eq(ju(d, "busy_unchecked_ns"), 2000);
    json_object_put(o);
    free(b.p);
    free(late.p);
    cuptimon__agg_free(a);
}
END_TEST

/* ---- percentiles ------------------------------------------------------------------- */

START_TEST(percentiles_of_a_known_distribution)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = new_agg(0);
    struct tbuf b = {0};
    uint64_t s0 = base_sec() * S_NS, t = s0;
    json_object *o, *r;

    layout_13(&l);
    /* Durations 1, 2, ..., 10000 us, shuffled by a fixed permutation. */
    for (uint64_t i = 0; i < 10000; i++) {
        uint64_t dur = ((i * 7919) % 10000 + 1) * 1000;
        add_kernel(&b, 0x1, 0, t, t + dur);
        t += dur;
    }
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, NULL, b.p, b.len, NULL), 10000);
    o = query(a, CUPTIMON_AGG_BY_KERNEL, CUPTIMON_AGG_SORT_P99, base_sec() + 100, 2);
    r = json_object_array_get_idx(rows(o), 0);
    ck_assert_uint_eq(ju(r, "count"), 10000);
    ck_assert_uint_eq(ju(r, "min_ns"), 1000);
    ck_assert_uint_eq(ju(r, "max_ns"), 10000000);
    struct {
        const char *k;
        double want;
    } p[] = {{"p50_ns", 5000000}, {"p90_ns", 9000000}, {"p99_ns", 9900000}};
    for (int i = 0; i < 3; i++) {
        double got = (double)ju(r, p[i].k), err = (got - p[i].want) / p[i].want;
        ck_assert_msg(err < 0.0625 && err > -0.0625, "%s %.0f, want %.0f +- 6.25%%", p[i].k, got,
                      p[i].want);
    }
    json_object_put(o);
    o = query(a, CUPTIMON_AGG_BY_PROCESS, CUPTIMON_AGG_SORT_P99, base_sec() + 100, 2);
    r = json_object_array_get_idx(rows(o), 0);
    ck_assert_uint_ge(ju(r, "p99_ns"), 9900000 * 15 / 16);
    ck_assert_uint_le(ju(r, "p99_ns"), 9900000 * 17 / 16);
    json_object_put(o);
    free(b.p);
    cuptimon__agg_free(a);
}
END_TEST

/* ---- the top-N bound ---------------------------------------------------------------- */

START_TEST(top_n_bound_with_other)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = new_agg(4); /* keeps 8, shows 4 */
    struct cuptimon_strtab *t;
    struct tbuf b = {0};
    uint64_t s0 = base_sec() * S_NS, tt = s0, total = 0, count = 0;
    json_object *o, *r;
    char nm[32];

    layout_13(&l);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &t), 0);
    /* 20 names; name k launched 10 * (k + 1) times for 100 ns, and the four
     * heaviest (16..19) come last, after the table is full: they are
     * admitted once they outweigh the lightest kept name, and count from
     * then on. */
    for (int k = 0; k < 20; k++) {
        snprintf(nm, sizeof(nm), "kernel_%02d", k);
        ck_assert_int_eq(cuptimon__strtab_put(t, 0x100 + (uint64_t)k, nm, strlen(nm)), 0);
        for (int i = 0; i < 10 * (k + 1); i++) {
            add_kernel(&b, 0x100 + (uint64_t)k, 0, tt, tt + 100);
            tt += 200;
            total += 100;
            count++;
        }
    }
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b.p, b.len, NULL), (int)count);
    o = query(a, CUPTIMON_AGG_BY_KERNEL, CUPTIMON_AGG_SORT_TIME, base_sec() + 100, 2);
    /* Kept: at most 8 names plus other. */
    ck_assert_uint_le(json_object_array_length(rows(o)), 9);
    for (int k = 16; k < 20; k++) {
        snprintf(nm, sizeof(nm), "kernel_%02d", k);
        r = row_named(o, nm);
        ck_assert_msg(r != NULL, "%s missing", nm);
        ck_assert_uint_le(ju(r, "count"), 10 * (uint64_t)(k + 1));
        ck_assert_uint_ge(ju(r, "count"), 5 * (uint64_t)(k + 1));
    }
    /* The lightest, first seen, were folded away. */
    ck_assert_ptr_null(row_named(o, "kernel_00"));
    ck_assert_ptr_null(row_named(o, "kernel_01"));
    uint64_t sum_c = 0, sum_t = 0;
    int others = 0;
    for (size_t i = 0; i < json_object_array_length(rows(o)); i++) {
        r = json_object_array_get_idx(rows(o), i);
        sum_c += ju(r, "count");
        sum_t += ju(r, "total_ns");
        others += json_object_get_boolean(jget(r, "other"));
    }
    ck_assert_int_eq(others, 1);
    ck_assert_uint_eq(sum_c, count);
    ck_assert_uint_eq(sum_t, total);
    json_object_put(o);
    /* n = 4 rows: the rest is summed. */
    struct cuptimon_agg_query q;
    memset(&q, 0, sizeof(q));
    q.lag_s = -1;
    q.by = CUPTIMON_AGG_BY_KERNEL;
    q.n = 4;
    o = cuptimon__agg_json(a, &q);
    ck_assert_uint_eq(json_object_array_length(rows(o)), 4);
    sum_c = 0;
    for (size_t i = 0; i < 4; i++)
        sum_c += ju(json_object_array_get_idx(rows(o), i), "count");
    ck_assert_uint_eq(sum_c + ju(jget(o, "rest"), "count"), count);
    json_object_put(o);

    /* Prometheus: at most top_n named series plus other per process. */
    char *text = cuptimon__agg_prometheus(a);
    ck_assert_ptr_nonnull(text);
    int series = 0, other = 0;
    for (char *p = text; (p = strstr(p, "\ncuptimon_kernel_launches_total{")) != NULL; p++) {
        series++;
        char *eol = strchr(p + 1, '\n');
        if (memmem(p, (size_t)(eol - p), "kernel=\"other\"", 14) != NULL)
            other++;
    }
    ck_assert_int_eq(series, 5);
    ck_assert_int_eq(other, 1);
    free(text);

    struct cuptimon_agg_stats st;
    cuptimon__agg_stats(a, &st);
    ck_assert_uint_eq(st.folded, 12);
    ck_assert_uint_eq(st.aggregated, count);
    free(b.p);
    cuptimon__strtab_free(t);
    cuptimon__agg_free(a);
}
END_TEST

/* A churn of 300 rare names, round robin, and one heavy kernel that first
 * appears when the table is long full: the heavy one is named (nearly all
 * of its launches), the totals are exact, and the churn is cheap. */
START_TEST(top_n_churn)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = new_agg(4);
    struct cuptimon_strtab *t;
    struct tbuf b = {0};
    uint64_t s0 = base_sec() * S_NS, tt = s0, total = 0, count = 0, heavy = 0;
    json_object *o, *r;
    char nm[32];

    layout_13(&l);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &t), 0);
    for (int k = 0; k <= 300; k++) {
        snprintf(nm, sizeof(nm), k == 300 ? "heavy" : "rare_%03d", k);
        ck_assert_int_eq(cuptimon__strtab_put(t, 0x1000 + (uint64_t)k, nm, strlen(nm)), 0);
    }
    for (int round = 0; round < 40; round++) {
        for (int k = 0; k < 300; k++) {
            add_kernel(&b, 0x1000 + (uint64_t)k, 0, tt, tt + 100);
            tt += 100;
            total += 100;
            count++;
            if (round >= 10 && k % 10 == 0) {
                add_kernel(&b, 0x1000 + 300, 0, tt, tt + 5000);
                tt += 5000;
                total += 5000;
                count++;
                heavy++;
            }
        }
    }
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b.p, b.len, NULL), (int)count);
    o = query(a, CUPTIMON_AGG_BY_KERNEL, CUPTIMON_AGG_SORT_TIME, base_sec() + 100, 2);
    ck_assert_uint_le(json_object_array_length(rows(o)), 9);
    r = json_object_array_get_idx(rows(o), 0);
    ck_assert_str_eq(json_object_get_string(jget(r, "name")), "heavy");
    ck_assert_uint_ge(ju(r, "count"), heavy - 2);
    uint64_t sum_c = 0, sum_t = 0;
    for (size_t i = 0; i < json_object_array_length(rows(o)); i++) {
        sum_c += ju(json_object_array_get_idx(rows(o), i), "count");
        sum_t += ju(json_object_array_get_idx(rows(o), i), "total_ns");
    }
    ck_assert_uint_eq(sum_c, count);
    ck_assert_uint_eq(sum_t, total);
    json_object_put(o);
    free(b.p);
    cuptimon__strtab_free(t);
    cuptimon__agg_free(a);
}
END_TEST

/* Bounds on sessions and devices. */
START_TEST(session_and_device_bounds)
{
    struct cuptimon_agg_limits lim = {.max_sessions = 2, .max_devices = 2};
    struct cuptimon_layout l;
    struct cuptimon_agg *a;
    struct tbuf b = {0};
    uint64_t s0 = base_sec() * S_NS;
    struct cuptimon_agg_stats st;

    layout_13(&l);
    ck_assert_int_eq(cuptimon__agg_new(&lim, &a), 0);
    for (uint32_t dev = 0; dev < 4; dev++)
        add_kernel(&b, 0x1, dev, s0, s0 + 100);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, NULL, b.p, b.len, NULL), 4);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 2, &l, NULL, b.p, b.len, NULL), 4);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 3, &l, NULL, b.p, b.len, NULL), -ENOSPC);
    ck_assert_int_eq(cuptimon__agg_session(a, 4, NULL, 0, 0), -ENOSPC);
    cuptimon__agg_stats(a, &st);
    ck_assert_uint_eq(st.sessions, 2);
    ck_assert_uint_eq(st.records, 12);
    /* Session 3's four, and two devices too many for each of the others. */
    ck_assert_uint_eq(st.not_aggregated, 4 + 2 + 2);
    cuptimon__agg_forget(a, 1);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 3, &l, NULL, b.p, b.len, NULL), 4);
    json_object *o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, base_sec() + 100, 2);
    ck_assert_uint_eq(json_object_array_length(rows(o)), 2);
    json_object_put(o);
    free(b.p);
    cuptimon__agg_free(a);
}
END_TEST

/* A session that ended is shown for keep_ended_s, then goes; a full table
 * makes room for a live one by dropping the oldest ended. */
START_TEST(ended_sessions_linger)
{
    struct cuptimon_agg_limits lim = {.max_sessions = 2, .keep_ended_s = 1};
    struct cuptimon_layout l;
    struct cuptimon_agg *a;
    struct tbuf b = {0};
    uint64_t s0 = base_sec() * S_NS;
    struct cuptimon_agg_ident id = {.pid = 11};
    json_object *o, *r;
    char *text;

    layout_13(&l);
    ck_assert_int_eq(cuptimon__agg_new(&lim, &a), 0);
    add_kernel(&b, 0x1, 0, s0, s0 + 100);
    ck_assert_int_eq(cuptimon__agg_session(a, 1, &id, 0, 0), 0);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, NULL, b.p, b.len, NULL), 1);
    id.pid = 12;
    ck_assert_int_eq(cuptimon__agg_session(a, 2, &id, 0, 0), 0);
    cuptimon__agg_end(a, 1);
    cuptimon__agg_end(a, 77); /* unknown: ignored */
    o = query(a, CUPTIMON_AGG_BY_PROCESS, 0, base_sec() + 100, 2);
    ck_assert_uint_eq(ju(jget(o, "node"), "sessions"), 1);
    ck_assert_uint_eq(ju(jget(o, "node"), "sessions_ended"), 1);
    ck_assert_uint_eq(json_object_array_length(rows(o)), 2);
    r = json_object_array_get_idx(rows(o), 0);
    ck_assert_uint_eq(ju(r, "pid"), 11); /* the one with GPU time first */
    ck_assert(json_object_get_boolean(jget(r, "ended")));
    ck_assert_uint_eq(ju(r, "kernels"), 1);
    json_object_put(o);
    text = cuptimon__agg_prometheus(a);
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_sessions 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_kernel_launches_total{pid=\"11\""));
    free(text);
    /* The table is full (2): a third, live, session takes the ended one's place. */
    id.pid = 13;
    ck_assert_int_eq(cuptimon__agg_session(a, 3, &id, 0, 0), 0);
    o = query(a, CUPTIMON_AGG_BY_PROCESS, 0, base_sec() + 100, 2);
    ck_assert_uint_eq(json_object_array_length(rows(o)), 2);
    ck_assert_uint_eq(ju(jget(o, "node"), "sessions_ended"), 0);
    json_object_put(o);
    /* And without pressure, an ended one goes after keep_ended_s. */
    cuptimon__agg_end(a, 2);
    o = query(a, CUPTIMON_AGG_BY_PROCESS, 0, base_sec() + 100, 2);
    ck_assert_uint_eq(json_object_array_length(rows(o)), 2);
    json_object_put(o);
    usleep(1200000);
    o = query(a, CUPTIMON_AGG_BY_PROCESS, 0, base_sec() + 100, 2);
    ck_assert_uint_eq(json_object_array_length(rows(o)), 1);
    ck_assert_uint_eq(ju(json_object_array_get_idx(rows(o), 0), "pid"), 13);
    json_object_put(o);
    free(b.p);
    cuptimon__agg_free(a);
}
END_TEST

START_TEST(bad_times_and_the_future)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = new_agg(0);
    struct tbuf b = {0};
    uint64_t now = (uint64_t)time(NULL) * S_NS;
    json_object *o, *d;
    struct cuptimon_agg_stats st;

    layout_13(&l);
    add_kernel(&b, 0x1, 0, now - 5 * S_NS, now - 5 * S_NS + 1000);       /* fine */
    add_kernel(&b, 0x1, 0, now + 3600 * S_NS, now + 3600 * S_NS + 1000); /* far ahead */
    add_kernel(&b, 0x1, 0, 2000, 1000);                                  /* ends before it starts */
    add_kernel(&b, 0x1, 0, 1000, 5000);                                  /* 1970: before the ring */
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, NULL, b.p, b.len, NULL), 4);
    o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, now / S_NS, 0);
    d = device0(o);
    ck_assert_uint_eq(ju(d, "kernels"), 4);
    /* The ring was not moved an hour ahead: the first kernel is in it. */
    ck_assert_double_eq_tol(jd(d, "busy_10s"), 1000.0 / 10e9, 1e-15);
    ck_assert_uint_eq(ju(d, "busy_ns_total"), 1000 + 4000);
    json_object_put(o);
    cuptimon__agg_stats(a, &st);
    ck_assert_uint_eq(st.bad_times, 2);
    ck_assert_uint_eq(st.late_ns, 4000);
    free(b.p);
    cuptimon__agg_free(a);
}
END_TEST

/* ---- the real H200 buffers --------------------------------------------------------- */

/* dump.cu.txt launches scale<2> with 64 blocks, scale<3> with 32 and
 * add_one with 128: the grid tells which name a pointer is. */
static void real_names(const uint8_t *buf, size_t len, struct cuptimon_strtab *t)
{
    static const char *mangled[3] = {"_Z5scaleILi2EEvPfi", "_Z5scaleILi3EEvPfi",
                                     "_ZN2ns7add_oneEPfi"};
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st;
    struct cuptimon_walk w;
    struct cuptimon_ev ev;

    layout_13(&l);
    memset(&st, 0, sizeof(st));
    cuptimon__walk_begin(&w, &l, buf, len, &st);
    while (cuptimon__walk_next(&w, &ev)) {
        if (ev.type != CUPTIMON_EV_KERNEL)
            continue;
        int g = ev.u.kernel.grid_x == 64 ? 0 : ev.u.kernel.grid_x == 32 ? 1 : 2;
        if (cuptimon__strtab_get(t, ev.u.kernel.name_ptr, NULL) == NULL)
            ck_assert_int_eq(
                cuptimon__strtab_put(t, ev.u.kernel.name_ptr, mangled[g], strlen(mangled[g])), 0);
    }
}

static struct cuptimon_agg *real_agg(void)
{
    /* The capture's timestamps are from when it was made: accept them
     * whatever this machine's clock says. */
    struct cuptimon_agg_limits lim = {.future_s = UINT32_MAX};
    struct cuptimon_agg *a;
    ck_assert_int_eq(cuptimon__agg_new(&lim, &a), 0);
    return a;
}

static void check_real(const char *const *files, int nfiles, uint64_t kernels, uint64_t memcpys,
                       uint64_t memsets)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = real_agg();
    struct cuptimon_strtab *t;
    uint64_t sum_dur = 0, kmin = UINT64_MAX, kmax = 0;
    json_object *o, *d;
    static const char *want[3] = {"void scale<2>(float*, int)", "void scale<3>(float*, int)",
                                  "ns::add_one(float*, int)"};

    layout_13(&l);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &t), 0);
    for (int i = 0; i < nfiles; i++) {
        size_t len;
        uint8_t *buf = cuptimon__test_load_real(files[i], &len);
        struct cuptimon_decode_stats st;
        struct cuptimon_walk w;
        struct cuptimon_ev ev;
        real_names(buf, len, t);
        memset(&st, 0, sizeof(st));
        cuptimon__walk_begin(&w, &l, buf, len, &st);
        while (cuptimon__walk_next(&w, &ev)) {
            if (ev.type != CUPTIMON_EV_KERNEL)
                continue;
            sum_dur += ev.end - ev.start;
            if (ev.start < kmin)
                kmin = ev.start;
            if (ev.end > kmax)
                kmax = ev.end;
        }
        ck_assert_int_ge(cuptimon__agg_add_buffer(a, 1, &l, t, buf, len, NULL), 1);
        free(buf);
    }
    o = query(a, CUPTIMON_AGG_BY_KERNEL, CUPTIMON_AGG_SORT_TIME, kmax / S_NS + 3, 0);
    ck_assert_uint_eq(json_object_array_length(rows(o)), 3);
    uint64_t c = 0, tot = 0;
    for (int k = 0; k < 3; k++) {
        json_object *r = row_named(o, want[k]);
        ck_assert_msg(r != NULL, "no %s", want[k]);
        c += ju(r, "count");
        tot += ju(r, "total_ns");
        /* Launched in turn: a third each, give or take one. */
        ck_assert_uint_le(ju(r, "count"), kernels / 3 + 1);
        ck_assert_uint_ge(ju(r, "count"), kernels / 3);
        ck_assert_uint_le(ju(r, "p50_ns"), ju(r, "p90_ns"));
        ck_assert_uint_le(ju(r, "p90_ns"), ju(r, "p99_ns"));
        ck_assert_uint_le(ju(r, "p99_ns"), ju(r, "max_ns"));
    }
    ck_assert_uint_eq(c, kernels);
    ck_assert_uint_eq(tot, sum_dur);
    json_object *node = jget(o, "node");
    ck_assert_uint_eq(ju(node, "kernels"), kernels);
    ck_assert_uint_eq(ju(node, "memcpys"), memcpys);
    ck_assert_uint_eq(ju(node, "memcpy_bytes"), memcpys * 4096);
    ck_assert_uint_eq(ju(node, "memsets"), memsets);
    ck_assert_uint_eq(ju(node, "memset_bytes"), memsets * 4096);
    d = device0(o);
    ck_assert_uint_eq(ju(d, "kernels"), kernels);
    ck_assert_uint_eq(ju(jget(jget(d, "memcpy"), "DtoH"), "bytes"), memcpys * 4096);
    /* Busy: no more than the span, no more than the sum of the kernels
     * (two streams overlap), and every bit of it checked. */
    ck_assert_uint_le(ju(d, "busy_ns_total"), kmax - kmin);
    ck_assert_uint_le(ju(d, "busy_ns_total"), sum_dur);
    ck_assert_uint_gt(ju(d, "busy_ns_total"), sum_dur / 2);
    ck_assert_uint_eq(ju(d, "busy_unchecked_ns"), 0);
    printf("real %s..: %" PRIu64 " kernels, %.3f s of kernel time, GPU busy %.3f s of a %.3f s "
           "span (%.1f%%)\n",
           files[0], kernels, (double)sum_dur / 1e9, (double)ju(d, "busy_ns_total") / 1e9,
           (double)(kmax - kmin) / 1e9,
           100.0 * (double)ju(d, "busy_ns_total") / (double)(kmax - kmin));
    json_object_put(o);
    cuptimon__strtab_free(t);
    cuptimon__agg_free(a);
}

static const char *const phase0[] = {"phase0-buf0.bin.zst", "phase0-buf1.bin.zst",
                                     "phase0-buf2.bin.zst", "phase0-buf3.bin.zst"};
static const char *const phase1[] = {"phase1-buf4.bin.zst", "phase1-buf5.bin.zst"};

START_TEST(real_phase0)
{
    check_real(phase0, 4, 60000, 1200, 858);
}
END_TEST

START_TEST(real_phase1)
{
    check_real(phase1, 2, 27909, 559, 399);
}
END_TEST

/* Union: the real buffers given in reverse order, and twice, give the
 * same busy time as in order. */
START_TEST(real_busy_order_does_not_matter)
{
    struct cuptimon_layout l;
    uint64_t busy[3];
    json_object *o;

    layout_13(&l);
    for (int pass = 0; pass < 3; pass++) {
        struct cuptimon_agg *a = real_agg();
        for (int k = 0; k < 4; k++) {
            int i = pass == 1 ? 3 - k : k;
            size_t len;
            uint8_t *buf = cuptimon__test_load_real(phase0[i], &len);
            cuptimon__agg_add_buffer(a, 1, &l, NULL, buf, len, NULL);
            if (pass == 2)
                cuptimon__agg_add_buffer(a, 2, &l, NULL, buf, len, NULL);
            free(buf);
        }
        o = query(a, CUPTIMON_AGG_BY_DEVICE, 0, 1796208557 + 10, 0);
        busy[pass] = ju(device0(o), "busy_ns_total");
        json_object_put(o);
        cuptimon__agg_free(a);
    }
    ck_assert_uint_eq(busy[0], busy[1]);
    ck_assert_uint_eq(busy[0], busy[2]);
}
END_TEST

/* ---- queries ------------------------------------------------------------------------ */

START_TEST(query_from_json)
{
    struct cuptimon_agg_query q;
    char *err = NULL;
    json_object *r;

    r = json_tokener_parse("{\"op\":\"top\",\"by\":\"kernel\",\"sort\":\"p99\",\"pid\":12,"
                           "\"job\":\"J\",\"rank\":3,\"label\":\"L\",\"n\":7}");
    ck_assert_int_eq(cuptimon__agg_query_from_json(r, &q, &err), 0);
    ck_assert_ptr_null(err);
    ck_assert_int_eq(q.by, CUPTIMON_AGG_BY_KERNEL);
    ck_assert_int_eq(q.sort, CUPTIMON_AGG_SORT_P99);
    ck_assert_int_eq(q.pid, 12);
    ck_assert_str_eq(q.job, "J");
    ck_assert_str_eq(q.rank, "3");
    ck_assert_str_eq(q.label, "L");
    ck_assert_uint_eq(q.n, 7);
    json_object_put(r);

    r = json_tokener_parse("{\"op\":\"top\"}");
    ck_assert_int_eq(cuptimon__agg_query_from_json(r, &q, &err), 0);
    ck_assert_int_eq(q.by, CUPTIMON_AGG_BY_PROCESS);
    ck_assert_uint_eq(q.n, 0);
    json_object_put(r);

    static const char *bad[] = {"{\"by\":\"thread\"}", "{\"sort\":1}", "{\"pid\":-3}",
                                "{\"pid\":\"12\"}",    "{\"n\":0}",    "{\"n\":1001}",
                                "{\"label\":[1]}",     "[1]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = json_tokener_parse(bad[i]);
        ck_assert_int_eq(cuptimon__agg_query_from_json(r, &q, &err), -EINVAL);
        ck_assert_ptr_nonnull(err);
        free(err);
        err = NULL;
        json_object_put(r);
    }
    r = json_tokener_parse("{\"by\":\"thread\"}");
    cuptimon__agg_query_from_json(r, &q, &err);
    ck_assert_str_eq(err, "\"by\": \"thread\" is not one of \"process\", \"kernel\", \"device\"");
    free(err);
    json_object_put(r);
}
END_TEST

START_TEST(hello_helpers)
{
    struct cuptimon_layout l;
    struct cuptimon_agg_ident id;
    json_object *h;

    h = json_tokener_parse("{\"cupti_version\":130001,\"record_sizes\":{\"1\":96,\"2\":88,"
                           "\"10\":216,\"11\":24,\"x\":8,\"70\":8},"
                           "\"job\":{\"torchelastic_run_id\":\"te\",\"rank\":\"2\","
                           "\"label\":\"w\"}}");
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(cuptimon__agg_layout_from_hello(h, &l), 0);
    ck_assert_int_eq(l.state[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], CUPTIMON_KIND_DECODED);
    ck_assert_int_eq(l.state[CUPTI_ACTIVITY_KIND_NAME], CUPTIMON_KIND_UNSUPPORTED);
    memset(&id, 0, sizeof(id));
    cuptimon__agg_ident_from_hello(h, &id);
    ck_assert_str_eq(id.job, "te");
    ck_assert_str_eq(id.rank, "2");
    ck_assert_str_eq(id.label, "w");
    json_object_put(h);

    h = json_tokener_parse("{\"cupti_version\":130001,\"record_sizes\":{\"10\":224},"
                           "\"job\":{\"slurm_job_id\":\"77\",\"torchelastic_run_id\":\"te\"}}");
    ck_assert_int_eq(cuptimon__agg_layout_from_hello(h, &l), 1);
    ck_assert_int_eq(l.state[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], CUPTIMON_KIND_BAD_LAYOUT);
    cuptimon__agg_ident_from_hello(h, &id);
    ck_assert_str_eq(id.job, "77");
    ck_assert_ptr_null(id.rank);
    json_object_put(h);

    /* No hello fields at all: an unknown version, nothing decoded. */
    h = json_tokener_parse("{}");
    ck_assert_int_eq(cuptimon__agg_layout_from_hello(h, &l), -EPROTONOSUPPORT);
    cuptimon__agg_ident_from_hello(h, &id);
    ck_assert_ptr_null(id.job);
    json_object_put(h);
}
END_TEST

/* ---- Prometheus --------------------------------------------------------------------- */

/* Checks one sample line: name{label="value",...} value.  Returns 0 or
 * the column of the first error. */
static int prom_line_ok(const char *s)
{
    const char *p = s;
    char *end;

    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' || *p == ':'))
        return 1;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '_' || *p == ':')
        p++;
    if (*p == '{') {
        p++;
        while (*p != '}') {
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_'))
                return (int)(p - s) + 1;
            while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                   (*p >= '0' && *p <= '9') || *p == '_')
                p++;
            if (p[0] != '=' || p[1] != '"')
                return (int)(p - s) + 1;
            p += 2;
            while (*p != '"') {
                if (*p == '\0' || *p == '\n')
                    return (int)(p - s) + 1;
                if (*p == '\\') {
                    if (p[1] != '\\' && p[1] != '"' && p[1] != 'n')
                        return (int)(p - s) + 1;
                    p++;
                }
                p++;
            }
            p++;
            if (*p == ',')
                p++;
            else if (*p != '}')
                return (int)(p - s) + 1;
        }
        p++;
    }
    if (*p != ' ')
        return (int)(p - s) + 1;
    p++;
    if (strcmp(p, "NaN") == 0 || strcmp(p, "+Inf") == 0 || strcmp(p, "-Inf") == 0)
        return 0;
    strtod(p, &end);
    if (end == p || *end != '\0')
        return (int)(p - s) + 1;
    return 0;
}

static void check_exposition(char *text)
{
    char *save = NULL, *line, *copy = strdup(text);
    int samples = 0;

    ck_assert_ptr_nonnull(copy);
    ck_assert(text[0] != '\0' && text[strlen(text) - 1] == '\n');
    for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') {
            ck_assert_msg(strncmp(line, "# HELP cuptimon_", 16) == 0 ||
                              strncmp(line, "# TYPE cuptimon_", 16) == 0,
                          "comment line: %s", line);
            continue;
        }
        int col = prom_line_ok(line);
        ck_assert_msg(col == 0, "bad sample line at column %d: %s", col, line);
        samples++;
    }
    ck_assert_int_gt(samples, 0);
    free(copy);
}

static void promtool(const char *text)
{
    char path[] = "/tmp/cuptimon-prom-XXXXXX", cmd[256];
    int fd, rc;

    if (system("command -v promtool >/dev/null 2>&1") != 0) {
        printf("promtool not installed: skipping 'promtool check metrics'\n");
        return;
    }
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    snprintf(cmd, sizeof(cmd), "promtool check metrics < %s", path);
    rc = system(cmd);
    unlink(path);
    ck_assert_msg(rc == 0, "promtool check metrics failed (status %d)", rc);
}

START_TEST(prometheus_text)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = new_agg(0);
    struct cuptimon_strtab *t = names3();
    struct tbuf b = {0};
    uint64_t s0 = (base_sec() + 95) * S_NS;
    static const char weird[] = "weird\"name\\with\nnewline\xff";
    struct cuptimon_agg_ident id = {.pid = 77, .job = "job\"1", .rank = "0", .label = "a\\b"};
    struct cuptimon_clock clk = {.cupti_ts = 0, .unix_ns = 0};
    char *text;

    layout_13(&l);
    ck_assert_int_eq(cuptimon__strtab_put(t, 0x4000, weird, sizeof(weird) - 1), 0);
    ck_assert_int_eq(cuptimon__agg_session(a, 1, &id, 3, 1), 0);
    add_kernel(&b, 0x1000, 0, s0, s0 + 1500000000ull);
    add_kernel(&b, 0x4000, 0, s0 + 2000000000ull, s0 + 2000000100ull);
    add_memcpy(&b, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 0, 1000, s0, s0 + 10);
    add_memset(&b, 0, 64, s0, s0 + 10);
    /* The shim saw the buffer complete within the last second. */
    clk.unix_ns = (uint64_t)time(NULL) * S_NS;
    clk.cupti_ts = clk.unix_ns;
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b.p, b.len, &clk), 4);
    text = cuptimon__agg_prometheus(a);
    ck_assert_ptr_nonnull(text);
    check_exposition(text);
    ck_assert_ptr_nonnull(strstr(text, "# TYPE cuptimon_kernel_seconds_total counter\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE cuptimon_kernel_launches_total counter\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE cuptimon_gpu_busy_ratio gauge\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE cuptimon_sessions gauge\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE cuptimon_handoff_latency_seconds summary\n"));
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_kernel_seconds_total{pid=\"77\",job=\"job\\\"1\","
                                       "rank=\"0\",label=\"a\\\\b\",device=\"0\","
                                       "kernel=\"void scale<2>(float*, int)\"} 1.500000000\n"));
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_kernel_launches_total{pid=\"77\",job=\"job\\\"1\","
                                       "rank=\"0\",label=\"a\\\\b\",device=\"0\","
                                       "kernel=\"weird\\\"name\\\\with\\nnewline"
                                       "\xef\xbf\xbd\"} 1\n"));
    ck_assert_ptr_nonnull(
        strstr(text, "cuptimon_memcpy_bytes_total{device=\"0\",direction=\"HtoD\"} 1000\n"));
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_memset_bytes_total{device=\"0\"} 64\n"));
    ck_assert_ptr_nonnull(
        strstr(text, "cuptimon_gpu_busy_seconds_total{device=\"0\"} 1.500000100\n"));
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_dropped_records_total{pid=\"77\",job=\"job\\\"1\","
                                       "rank=\"0\",label=\"a\\\\b\"} 3\n"));
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_lost_buffers_total{pid=\"77\",job=\"job\\\"1\","
                                       "rank=\"0\",label=\"a\\\\b\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_handoff_latency_seconds_count{pid=\"77\""));
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_sessions 1\n"));
    /* The busy gauge: the 10 s ending 2 s ago hold the 1.5 s kernel. */
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_gpu_busy_ratio{device=\"0\"} 0.15000"));
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_pool_dropping_seconds{pid=\"77\",job=\"job\\\"1\","
                                       "rank=\"0\",label=\"a\\\\b\"} 0.000\n"));
    promtool(text);
    free(text);

    /* At its cap the pool declines CUPTI, which drops records but counts
     * them only when it hands its buffers over (issue 47): the dropped
     * counter stays still, and the gauge says how long it has dropped. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now_ns = (uint64_t)ts.tv_sec * S_NS + (uint64_t)ts.tv_nsec;
    struct cuptimon_agg_held held = {.since_ns = now_ns - 3 * S_NS,
                                     .dropping_since_ns = now_ns - 2500000000ull,
                                     .what = "kernel hold()"};
    cuptimon__agg_session_held(a, 1, &held);
    text = cuptimon__agg_prometheus(a);
    ck_assert_ptr_nonnull(text);
    const char *g = strstr(text, "cuptimon_pool_dropping_seconds{pid=\"77\"");
    double dropping = -1;
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(sscanf(strchr(g, '}') + 1, "%lf", &dropping), 1);
    ck_assert_msg(dropping >= 2.5 && dropping < 30, "dropping for %f s", dropping);
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_dropped_records_total{pid=\"77\",job=\"job\\\"1\","
                                       "rank=\"0\",label=\"a\\\\b\"} 3\n"));
    promtool(text);
    free(text);

    /* An empty aggregate is valid text too. */
    struct cuptimon_agg *e = new_agg(0);
    text = cuptimon__agg_prometheus(e);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_sessions 0\n"));
    promtool(text);
    free(text);
    cuptimon__agg_free(e);

    /* The JSON has the full names. */
    json_object *o = query(a, CUPTIMON_AGG_BY_KERNEL, 0, base_sec() + 100, 2);
    ck_assert_ptr_nonnull(row_named(o, weird));
    json_object_put(o);
    free(b.p);
    cuptimon__strtab_free(t);
    cuptimon__agg_free(a);
}
END_TEST

/* A caller limited to one user (a control client that is not an operator,
 * issue 21): another user's process, label and kernel names are in no
 * row, total or series; the devices stay the node's. */
START_TEST(one_user_only)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = new_agg(0);
    struct cuptimon_strtab *t = names3();
    struct tbuf b = {0}, c = {0};
    uint64_t s0 = (base_sec() + 95) * S_NS;
    struct cuptimon_agg_ident root = {.pid = 10, .uid = 0, .label = "rootjob"};
    struct cuptimon_agg_ident user = {.pid = 20, .uid = 1000, .label = "mine"};
    struct cuptimon_agg_query q;
    json_object *o, *rows;
    char *text;

    layout_13(&l);
    ck_assert_int_eq(cuptimon__agg_session(a, 1, &root, 0, 0), 0);
    ck_assert_int_eq(cuptimon__agg_session(a, 2, &user, 0, 0), 0);
    add_kernel(&b, 0x1000, 0, s0, s0 + 1000);
    add_kernel(&b, 0x1000, 0, s0 + 2000, s0 + 3000);
    add_kernel(&c, 0x3000, 0, s0 + 5000, s0 + 6000);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b.p, b.len, NULL), 2);
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 2, &l, t, c.p, c.len, NULL), 1);

    memset(&q, 0, sizeof(q));
    q.lag_s = -1;
    q.one_uid = 1;
    q.uid = 1000;
    o = cuptimon__agg_json(a, &q);
    ck_assert_ptr_nonnull(o);
    rows = jget(o, "rows");
    ck_assert_int_eq(json_object_array_length(rows), 1);
    ck_assert_int_eq(ju(json_object_array_get_idx(rows, 0), "pid"), 20);
    ck_assert_int_eq(ju(jget(o, "node"), "sessions"), 1);
    ck_assert_int_eq(ju(jget(o, "node"), "kernels"), 1);
    ck_assert_int_eq(json_object_array_length(jget(o, "devices")), 1);
    ck_assert_ptr_null(strstr(json_object_to_json_string(o), "rootjob"));
    json_object_put(o);
    q.by = CUPTIMON_AGG_BY_KERNEL;
    o = cuptimon__agg_json(a, &q);
    ck_assert_ptr_nonnull(o);
    rows = jget(o, "rows");
    ck_assert_int_eq(json_object_array_length(rows), 1);
    ck_assert_ptr_nonnull(row_named(o, "ns::add_one(float*, int)"));
    ck_assert_ptr_null(row_named(o, "void scale<2>(float*, int)"));
    json_object_put(o);

    text = cuptimon__agg_prometheus_of(a, 1000);
    ck_assert_ptr_nonnull(text);
    check_exposition(text);
    ck_assert_ptr_nonnull(strstr(text, "pid=\"20\""));
    ck_assert_ptr_null(strstr(text, "pid=\"10\""));
    ck_assert_ptr_null(strstr(text, "rootjob"));
    ck_assert_ptr_null(strstr(text, "scale<2>"));
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_sessions 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_gpu_busy_seconds_total{device=\"0\"}"));
    free(text);
    /* Every user's, as before. */
    text = cuptimon__agg_prometheus_of(a, -1);
    ck_assert_ptr_nonnull(strstr(text, "pid=\"10\""));
    ck_assert_ptr_nonnull(strstr(text, "cuptimon_sessions 2\n"));
    free(text);
    free(b.p);
    free(c.p);
    cuptimon__strtab_free(t);
    cuptimon__agg_free(a);
}
END_TEST

/* Many names, long ones cut to the same label: still one series each. */
START_TEST(prometheus_long_names_stay_unique)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = new_agg(0);
    struct cuptimon_strtab *t;
    struct tbuf b = {0};
    uint64_t s0 = base_sec() * S_NS;
    char name[400];
    char *text;

    layout_13(&l);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &t), 0);
    for (int k = 0; k < 3; k++) {
        memset(name, 'x', sizeof(name));
        snprintf(name + 300, sizeof(name) - 300, "%d", k);
        ck_assert_int_eq(cuptimon__strtab_put(t, 0x10 + (uint64_t)k, name, strlen(name)), 0);
        add_kernel(&b, 0x10 + (uint64_t)k, 0, s0, s0 + 10);
    }
    ck_assert_int_eq(cuptimon__agg_add_buffer(a, 1, &l, t, b.p, b.len, NULL), 3);
    text = cuptimon__agg_prometheus(a);
    check_exposition(text);
    int series = 0;
    for (char *p = text; (p = strstr(p, "\ncuptimon_kernel_launches_total{")) != NULL; p++)
        series++;
    ck_assert_int_eq(series, 1);
    ck_assert_ptr_nonnull(strstr(text, "\"} 3\n"));
    promtool(text);
    free(text);
    free(b.p);
    cuptimon__strtab_free(t);
    cuptimon__agg_free(a);
}
END_TEST

START_TEST(prometheus_file_is_written_atomically)
{
    struct cuptimon_agg *a = new_agg(0);
    char dir[] = "/tmp/cuptimon-agg-XXXXXX", path[300], tmp[310], buf[8192];
    struct stat sb;
    FILE *f;
    size_t n;
    mode_t old;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/cuptimon.prom", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    old = umask(077);
    ck_assert_int_eq(cuptimon__agg_write_prometheus(a, path, NULL), 0);
    ck_assert_int_eq(cuptimon__agg_session(a, 5, NULL, 1, 0), 0);
    ck_assert_int_eq(cuptimon__agg_write_prometheus(a, path, NULL), 0);
    umask(old);
    ck_assert_int_eq(stat(path, &sb), 0);
    /* Every user's processes are in it: not world-readable. */
    ck_assert_uint_eq(sb.st_mode & 0777, 0640);
    ck_assert_int_ne(access(tmp, F_OK), 0);
    f = fopen(path, "r");
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *text = cuptimon__agg_prometheus(a);
    ck_assert_str_eq(buf, text);
    free(text);
    ck_assert_ptr_nonnull(strstr(buf, "cuptimon_sessions 1\n"));
    /* A directory that is not there: an error, nothing left behind. */
    snprintf(path, sizeof(path), "%s/missing/cuptimon.prom", dir);
    ck_assert_int_eq(cuptimon__agg_write_prometheus(a, path, NULL), -ENOENT);
    snprintf(path, sizeof(path), "%s/cuptimon.prom", dir);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rmdir(dir), 0);
    cuptimon__agg_free(a);
}
END_TEST

/* ---- threads ------------------------------------------------------------------------ */

struct thr {
    struct cuptimon_agg *a;
    struct cuptimon_layout *l;
    struct cuptimon_strtab *t;
    const struct tbuf *b;
    uint64_t session;
    int reps;
};

static void *feeder(void *p)
{
    struct thr *x = p;
    for (int i = 0; i < x->reps; i++)
        cuptimon__agg_add_buffer(x->a, x->session, x->l, x->t, x->b->p, x->b->len, NULL);
    return NULL;
}

START_TEST(threads_add_while_reading)
{
    struct cuptimon_layout l;
    struct cuptimon_agg *a = new_agg(0);
    struct cuptimon_strtab *t[4];
    struct tbuf b = {0};
    struct thr x[4];
    pthread_t th[4];
    uint64_t s0 = base_sec() * S_NS;

    layout_13(&l);
    for (int i = 0; i < 1000; i++)
        add_kernel(&b, 0x1000 + (uint64_t)(i % 3) * 0x1000, (uint32_t)(i % 2),
                   s0 + (uint64_t)i * 1000, s0 + (uint64_t)i * 1000 + 500);
    for (int i = 0; i < 4; i++) {
        t[i] = names3();
        x[i] = (struct thr){
            .a = a, .l = &l, .t = t[i], .b = &b, .session = (uint64_t)i + 1, .reps = 200};
        ck_assert_int_eq(pthread_create(&th[i], NULL, feeder, &x[i]), 0);
    }
    for (int k = 0; k < 50; k++) {
        json_object *o = query(a, k % 3, k % 3, base_sec() + 100, 2);
        json_object_put(o);
        free(cuptimon__agg_prometheus(a));
    }
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    json_object *o = query(a, CUPTIMON_AGG_BY_KERNEL, 0, base_sec() + 100, 2);
    ck_assert_uint_eq(ju(jget(o, "node"), "kernels"), 4 * 200 * 1000);
    ck_assert_uint_eq(ju(row_named(o, "ns::add_one(float*, int)"), "count"), 4 * 200 * 333);
    ck_assert_uint_eq(ju(row_named(o, "ns::add_one(float*, int)"), "processes"), 4);
    json_object_put(o);
    for (int i = 0; i < 4; i++)
        cuptimon__strtab_free(t[i]);
    free(b.p);
    cuptimon__agg_free(a);
}
END_TEST

/* ---- cost per record ---------------------------------------------------------------- */

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(bench_phase0)
{
    struct cuptimon_layout l;
    struct cuptimon_strtab *t;
    uint8_t *buf[4];
    size_t len[4];
    uint64_t records = 1;
    int reps = getenv("CUPTIMON_BENCH_REPS") ? atoi(getenv("CUPTIMON_BENCH_REPS")) : 20;
    double t0, walk, agg;

    layout_13(&l);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &t), 0);
    for (int i = 0; i < 4; i++) {
        buf[i] = cuptimon__test_load_real(phase0[i], &len[i]);
        real_names(buf[i], len[i], t);
    }
    /* The walk alone (the decoder's share) and the walk with aggregation,
     * alternated; the fastest pass of each counts (this host runs other
     * things too). */
    walk = agg = 1e9;
    for (int r = 0; r < reps; r++) {
        /* A fresh aggregate each time: every interval is new to the union,
         * as in the daemon. */
        struct cuptimon_agg *a = real_agg();
        uint64_t n = 0;
        t0 = mono();
        for (int i = 0; i < 4; i++) {
            struct cuptimon_decode_stats st;
            struct cuptimon_walk w;
            struct cuptimon_ev ev;
            memset(&st, 0, sizeof(st));
            cuptimon__walk_begin(&w, &l, buf[i], len[i], &st);
            while (cuptimon__walk_next(&w, &ev))
                ;
            n += st.records;
        }
        if (mono() - t0 < walk)
            walk = mono() - t0;
        records = n;
        t0 = mono();
        for (int i = 0; i < 4; i++)
            cuptimon__agg_add_buffer(a, 1, &l, t, buf[i], len[i], NULL);
        if (mono() - t0 < agg)
            agg = mono() - t0;
        cuptimon__agg_free(a);
    }
    printf("aggregate bench (phase 0, %" PRIu64 " records, best of %d): walk %.1f ns/record, "
           "walk + aggregate %.1f ns/record (aggregation %.1f ns/record; %.1f ms CPU per "
           "million records)\n",
           records, reps, walk * 1e9 / (double)records, agg * 1e9 / (double)records,
           (agg - walk) * 1e9 / (double)records, agg * 1e3 / ((double)records / 1e6));
    for (int i = 0; i < 4; i++)
        free(buf[i]);
    cuptimon__strtab_free(t);
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("aggregate");
    TCase *t = tcase_create("aggregate");

    tcase_set_timeout(t, 120);
    tcase_add_test(t, hist_buckets_are_within_a_sixteenth);
    tcase_add_test(t, synthetic_exact);
    tcase_add_test(t, names_resolve_late);
    tcase_add_test(t, busy_union_of_known_intervals);
    tcase_add_test(t, devices_are_the_nodes_gpus);
    tcase_add_test(t, busy_counts_the_kernel_running_now);
    tcase_add_test(t, device_not_on_the_node_asked_once);
    tcase_add_test(t, waiting_for_the_map_is_bounded_in_time);
    tcase_add_test(t, waiting_for_the_map_is_bounded_in_records);
    tcase_add_test(t, waiting_for_the_map_ends_with_the_process);
    tcase_add_test(t, busy_many_intervals);
    tcase_add_test(t, percentiles_of_a_known_distribution);
    tcase_add_test(t, top_n_bound_with_other);
    tcase_add_test(t, top_n_churn);
    tcase_add_test(t, session_and_device_bounds);
    tcase_add_test(t, ended_sessions_linger);
    tcase_add_test(t, bad_times_and_the_future);
    tcase_add_test(t, real_phase0);
    tcase_add_test(t, real_phase1);
    tcase_add_test(t, real_busy_order_does_not_matter);
    tcase_add_test(t, query_from_json);
    tcase_add_test(t, hello_helpers);
    tcase_add_test(t, prometheus_text);
    tcase_add_test(t, one_user_only);
    tcase_add_test(t, prometheus_long_names_stay_unique);
    tcase_add_test(t, prometheus_file_is_written_atomically);
    tcase_add_test(t, threads_add_while_reading);
    tcase_add_test(t, bench_phase0);
    suite_add_tcase(s, t);
    return s;
}
