/* Unit tests of the trace window's filter (daemon/window-write.c) and of
 * the set of correlation ids it keeps (daemon/idset.c).
 *
 * The filter: a fake process's timeline (launches of kernels, copies and
 * memsets, each with its API call's time, its GPU times and whether CUPTI
 * wrote its API record) is written into an archive as the daemon would
 * have received it, in chunks by delivery time; a window is written over
 * it; and the trace must hold exactly the work this file computes from
 * the timeline itself (PyTorch's set), whatever the correlation ids are:
 * one counter, a counter per kind, ids out of order, a counter that wraps
 * at 2^32, API records missing, a process that joined mid-window. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include <cupti_activity.h>

#include "archive/archive.h"
#include "daemon/idset.h"
#include "daemon/window-write.h"
#include "tests/unit/testlib.h"

#define MS   1000000ull
#define BASE 1796208557000000000ull

/* ---- the set of ids ---------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The idset tests count mismatches in their loops and assert the count:
 * Check writes a checkpoint for every assertion, and millions of them took
 * 17 s here (10 min under valgrind). */
START_TEST(idset_dense_run_costs_its_table_only)
{
    /* 60 s at 50 k launches/s of one process, one counter: 3 M ids. */
    struct cuptimon_idset s = {0};
    const uint32_t first = 123457, n = 3000000;
    unsigned bad = 0;
    for (uint32_t i = 0; i < n; i++)
        bad += cuptimon__idset_add(&s, first + i) != 0;
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(s.ids, n);
    for (uint32_t i = 0; i < n; i += 997)
        bad += !cuptimon__idset_has(&s, first + i);
    ck_assert_uint_eq(bad, 0);
    ck_assert(!cuptimon__idset_has(&s, first - 1));
    ck_assert(!cuptimon__idset_has(&s, first + n));
    ck_assert(!cuptimon__idset_has(&s, 0));
    /* Full pages hold no bitmap: two partial pages at the ends. */
    ck_assert_uint_le(s.bitmaps, 2);
    ck_assert_uint_lt(cuptimon__idset_bytes(&s), 128u << 10);
    cuptimon__idset_clear(&s);
    ck_assert_uint_eq(cuptimon__idset_bytes(&s), 0);
    ck_assert(!cuptimon__idset_has(&s, first));
}
END_TEST

START_TEST(idset_per_kind_ranges_and_wrap)
{
    /* Kernels, copies and memsets numbered from three counters, one of
     * them wrapping at 2^32: 3 M ids, well under a MiB. */
    struct cuptimon_idset s = {0};
    const uint32_t starts[3] = {2000000000u, 1000000000u, 4294967295u - 500000u};
    unsigned bad = 0;
    for (uint32_t i = 0; i < 1000000; i++)
        for (int r = 0; r < 3; r++)
            bad += cuptimon__idset_add(&s, starts[r] + i + (starts[r] + i < i)) != 0;
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(s.ids, 3000000);
    for (int r = 0; r < 3; r++)
        for (uint32_t i = 0; i < 1000000; i += 101)
            bad += !cuptimon__idset_has(&s, starts[r] + i + (starts[r] + i < i));
    ck_assert_uint_eq(bad, 0);
    ck_assert(!cuptimon__idset_has(&s, 0));
    ck_assert(cuptimon__idset_has(&s, UINT32_MAX) && cuptimon__idset_has(&s, 1)); /* wrapped */
    ck_assert(!cuptimon__idset_has(&s, starts[0] - 1));
    ck_assert(!cuptimon__idset_has(&s, 1000000000u + 1000000));
    ck_assert_uint_lt(cuptimon__idset_bytes(&s), 256u << 10);
    cuptimon__idset_clear(&s);
}
END_TEST

START_TEST(idset_holes_cost_a_bit_per_id_of_span)
{
    /* Every third id (the others went to calls CUPTI did not record, as
     * when the shim leaves a runtime call out): 1 M ids over 3 M, a bit
     * per id of the span plus the table. */
    struct cuptimon_idset s = {0};
    unsigned bad = 0;
    for (uint32_t i = 0; i < 1000000; i++)
        bad += cuptimon__idset_add(&s, 77 + 3 * i) != 0;
    ck_assert_uint_eq(bad, 0);
    for (uint32_t i = 0; i < 3000000; i += 7)
        bad += cuptimon__idset_has(&s, 77 + i) != (i % 3 == 0);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_lt(cuptimon__idset_bytes(&s), 3000000 / 8 + 1024 + (64u << 10));
    cuptimon__idset_clear(&s);
}
END_TEST

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

START_TEST(idset_agrees_with_a_sorted_array)
{
    /* Clusters of every density, the last page of the id space, and
     * repeated adds, against a sorted array. */
    enum {
        N = 200000
    };
    uint32_t *ref = malloc(N * sizeof *ref);
    struct cuptimon_idset s = {0};
    size_t n = 0;
    unsigned bad = 0; /* counted, asserted after each loop (Check writes per assertion) */
    ck_assert_ptr_nonnull(ref);
    while (n < N) {
        uint32_t base = (uint32_t)rnd();
        unsigned len = (unsigned)(rnd() % 6000), step = 1 + (unsigned)(rnd() % 700);
        if (rnd() % 5 == 0)
            base = UINT32_MAX - (uint32_t)(rnd() % 5000);
        for (unsigned i = 0; i < len && n < N; i++) {
            uint32_t id = base + i * step;
            ref[n++] = id;
            bad += cuptimon__idset_add(&s, id) != 0;
            if (rnd() % 3 == 0)
                bad += cuptimon__idset_add(&s, id) != 0; /* again */
        }
    }
    ck_assert_uint_eq(bad, 0);
    qsort(ref, n, sizeof *ref, cmp_u32);
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++)
        if (ref[i] != 0 && (i == 0 || ref[i] != ref[i - 1]))
            distinct++;
    ck_assert_uint_eq(s.ids, distinct);
    for (size_t i = 0; i < n; i++)
        bad += cuptimon__idset_has(&s, ref[i]) != (ref[i] != 0);
    for (int i = 0; i < 400000; i++) {
        uint32_t id = (uint32_t)rnd();
        if (rnd() % 2)
            id = ref[rnd() % n] + (uint32_t)(rnd() % 3) - 1;
        int want = id != 0 && bsearch(&id, ref, n, sizeof *ref, cmp_u32) != NULL;
        bad += cuptimon__idset_has(&s, id) != want;
    }
    ck_assert_uint_eq(bad, 0);
    cuptimon__idset_clear(&s);
    free(ref);
}
END_TEST

START_TEST(idset_scattered_ids_bounded_per_id)
{
    /* Ids scattered on purpose (a hostile producer) cost a bounded amount
     * each (a table entry, the table at most half full), not a page each. */
    struct cuptimon_idset s = {0};
    const unsigned n = 100000;
    unsigned bad = 0;
    for (unsigned i = 0; i < n; i++)
        bad += cuptimon__idset_add(&s, (uint32_t)(i * 2654435761u) | 1u) != 0;
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_le(cuptimon__idset_bytes(&s), 128u * n + 4096);
    for (unsigned i = 0; i < n; i += 7)
        bad += !cuptimon__idset_has(&s, (uint32_t)(i * 2654435761u) | 1u);
    ck_assert_uint_eq(bad, 0);
    cuptimon__idset_clear(&s);
}
END_TEST

/* ---- a fake process's timeline ------------------------------------------------ */

/* The window, in ms after BASE: prepared (the API kinds reach the
 * process, the first chunk) at 200, started at 300, ended at 700; the API
 * kinds are off again at 750; the last chunk is delivered before 800.
 * Chunks are cut every 100 ms of delivery time. */
#define PREPARE_MS 200
#define START_MS   300
#define END_MS     700
#define OFF_MS     750
#define LAST_MS    800
#define CHUNK_MS   100

enum numbering {
    ONE,
    PER_KIND,
    SHUFFLED,
    WRAPS
};

struct scenario {
    const char *name;
    enum numbering num;
    unsigned drop_every; /* every Nth launch's API records are missing */
    int joined;          /* the process starts at 350 ms, its API kinds come at 450 */
    uint64_t drv_lead;   /* each runtime call's nested driver call starts this many ns
                          * after it (0: no driver records) */
};

struct launch {
    char kind;       /* 'k' kernel, 'c' copy, 's' memset */
    uint64_t t;      /* the API call's start, ns after BASE */
    uint64_t gs, ge; /* the GPU work's */
    uint32_t corr;
    int api;      /* its API record (and external correlation) was written */
    uint64_t ext; /* its annotation's external id */
};

struct numberer {
    enum numbering num;
    uint64_t k[3];       /* ids drawn per counter */
    uint32_t wrap_after; /* WRAPS: ids before 2^32 */
};

/* One counter from 1; or a counter per kind (kernels from 1, copies from
 * 10^9, memsets from 2 * 10^9); or one counter whose ids come shuffled in
 * blocks of 1024 (a third of a second here); or one counter that starts
 * wrap_after ids before 2^32 and wraps to 1 (0 is "no correlation"). */
static uint32_t next_id(struct numberer *nb, char kind)
{
    int c = nb->num == PER_KIND ? (kind == 'k' ? 0 : kind == 'c' ? 1 : 2) : 0;
    uint64_t k = nb->k[c]++;
    switch (nb->num) {
    case PER_KIND: return (uint32_t)(1 + (uint64_t)c * 1000000000u + k);
    case SHUFFLED: return (uint32_t)(1 + (k & ~1023ull) + ((k * 397 + 31) & 1023));
    case WRAPS: return (uint32_t)(1 + (UINT32_MAX - 1 - nb->wrap_after + k) % UINT32_MAX);
    default: return (uint32_t)(1 + k);
    }
}

static size_t make_launches(const struct scenario *sc, struct launch **out)
{
    uint64_t from = sc->joined ? 350 : 0, api_on = sc->joined ? 450 : PREPARE_MS;
    /* About 3.17 ids per ms: the counter wraps at 500 ms. */
    struct numberer nb = {.num = sc->num, .wrap_after = (uint32_t)((500 - from) * 317 / 100)};
    size_t cap = 8192, n = 0;
    struct launch *L = calloc(cap, sizeof *L);
    unsigned nth = 0;
    ck_assert_ptr_nonnull(L);
    /* A launch every 0.5 ms; a copy after every third, a memset after
     * every fourth.  Copies and memsets queue 30 and 25 ms behind, so
     * that work launched before the window or after its end is delivered
     * in the window's chunks. */
    for (uint64_t i = from * 2; i < (LAST_MS - 10) * 2; i++) {
        for (int j = 0; j < 3; j++) {
            if ((j == 1 && i % 3) || (j == 2 && i % 4))
                continue;
            ck_assert_uint_lt(n, cap);
            struct launch *l = &L[n++];
            l->kind = "kcs"[j];
            l->t = i * MS / 2 + (uint64_t)j * 100000;
            l->gs = l->t + (j == 0 ? 20000 : j == 1 ? 30 * MS : 25 * MS);
            l->ge = l->gs + 5000;
            if (i == 1300 && j == 0) {
                /* A long kernel launched inside that runs past the end. */
                l->gs = 690 * MS;
                l->ge = 760 * MS;
            }
            l->corr = next_id(&nb, l->kind);
            l->api = l->t >= api_on * MS && l->t < OFF_MS * MS;
            if (l->api && sc->drop_every && ++nth % sc->drop_every == 0)
                l->api = 0;
            l->ext = 1000 + l->t / (50 * MS);
        }
    }
    *out = L;
    return n;
}

/* What the window must hold of launch l: PyTorch's set, computed from the
 * timeline, not from what the writer did. */
static int must_keep_gpu(const struct scenario *sc, const struct launch *l)
{
    int inside = l->t >= START_MS * MS && l->t <= END_MS * MS;
    if (l->api)
        return inside;
    /* A joiner's work launched before the API kinds reached it. */
    return sc->joined && l->t < 450 * MS && l->gs >= START_MS * MS && l->gs <= END_MS * MS;
}

/* ---- the archive ---------------------------------------------------------------- */

struct rec {
    uint64_t at; /* delivery time */
    uint32_t seq;
    uint32_t size;
    union {
        CUpti_ActivityKernel10 k;
        CUpti_ActivityMemcpy6 c;
        CUpti_ActivityMemset4 s;
        CUpti_ActivityAPI a;
        CUpti_ActivityExternalCorrelation x;
    } u;
};

static int cmp_rec(const void *a, const void *b)
{
    const struct rec *x = a, *y = b;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void gpu_rec(struct rec *r, const struct launch *l)
{
    memset(r, 0, sizeof *r);
    r->at = l->ge;
    if (l->kind == 'k') {
        r->size = sizeof r->u.k;
        r->u.k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        r->u.k.start = BASE + l->gs;
        r->u.k.end = BASE + l->ge;
        r->u.k.contextId = 1;
        r->u.k.streamId = 7;
        r->u.k.correlationId = l->corr;
        r->u.k.name = (const char *)(uintptr_t)0x1000;
    } else if (l->kind == 'c') {
        r->size = sizeof r->u.c;
        r->u.c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
        r->u.c.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
        r->u.c.bytes = 4096;
        r->u.c.start = BASE + l->gs;
        r->u.c.end = BASE + l->ge;
        r->u.c.contextId = 1;
        r->u.c.streamId = 7;
        r->u.c.correlationId = l->corr;
    } else {
        r->size = sizeof r->u.s;
        r->u.s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
        r->u.s.bytes = 4096;
        r->u.s.start = BASE + l->gs;
        r->u.s.end = BASE + l->ge;
        r->u.s.contextId = 1;
        r->u.s.streamId = 7;
        r->u.s.correlationId = l->corr;
    }
}

/* Writes the session's archive: the launches' records (plus uncorrelated
 * kernels at 100, 400 and 720 ms), sorted by delivery, in chunks of
 * CHUNK_MS numbered by their delivery time. */
static void write_archive(const char *dir, const struct launch *L, size_t n, uint64_t drv_lead)
{
    size_t cap = 4 * n + 8, nr = 0;
    struct rec *R = calloc(cap, sizeof *R);
    ck_assert_ptr_nonnull(R);
    for (size_t i = 0; i < n; i++) {
        const struct launch *l = &L[i];
        gpu_rec(&R[nr++], l);
        if (!l->api)
            continue;
        struct rec *x = &R[nr++];
        memset(x, 0, sizeof *x);
        x->at = l->t + 3000;
        x->size = sizeof x->u.x;
        x->u.x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
        x->u.x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
        x->u.x.externalId = l->ext;
        x->u.x.correlationId = l->corr;
        struct rec *a = &R[nr++];
        memset(a, 0, sizeof *a);
        a->at = l->t + 3000;
        a->size = sizeof a->u.a;
        a->u.a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
        a->u.a.cbid = l->kind == 'k' ? 211 : l->kind == 'c' ? 41 : 51;
        a->u.a.start = BASE + l->t;
        a->u.a.end = BASE + l->t + 3000;
        a->u.a.processId = 455;
        a->u.a.threadId = 77;
        a->u.a.correlationId = l->corr;
        if (!drv_lead)
            continue;
        /* The nested driver call (cuLaunchKernel, cuMemcpyDtoHAsync_v2,
         * cuMemsetD8Async) ends first, so its record comes first. */
        struct rec *d = &R[nr++];
        *d = *a;
        d->seq = 0;
        d->at = l->t + drv_lead + 1000;
        d->u.a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
        d->u.a.cbid = l->kind == 'k' ? 307 : l->kind == 'c' ? 279 : 296;
        d->u.a.start = BASE + l->t + drv_lead;
        d->u.a.end = BASE + l->t + drv_lead + 1000;
        a->at = d->at + 1;
        a->u.a.end = BASE + l->t + drv_lead + 2000;
    }
    static const uint64_t unc[] = {100, 400, 720};
    for (size_t i = 0; i < 3; i++) {
        struct launch l = {.kind = 'k', .gs = unc[i] * MS, .ge = unc[i] * MS + 5000};
        gpu_rec(&R[nr++], &l);
    }
    for (size_t i = 0; i < nr; i++)
        R[i].seq = (uint32_t)i;
    qsort(R, nr, sizeof *R, cmp_rec);

    struct cuptimon_archive_writer *w;
    char *err = NULL;
    ck_assert_int_eq(
        cuptimon__aw_open(dir, "{\"pid\": 455, \"cupti_version\": 130001}", 64u << 20, 1, &w, &err),
        0);
    free(err);
    uint8_t *buf = malloc(nr * sizeof(R[0].u));
    ck_assert_ptr_nonnull(buf);
    for (size_t i = 0; i < nr;) {
        uint64_t chunk = R[i].at / (CHUNK_MS * MS);
        size_t len = 0;
        for (; i < nr && R[i].at / (CHUNK_MS * MS) == chunk; i++) {
            memcpy(buf + len, &R[i].u, R[i].size);
            len += R[i].size;
        }
        struct cuptimon_chunk_hdr h;
        memset(&h, 0, sizeof h);
        h.index = chunk;
        h.cupti_ts = h.unix_ns = BASE + (chunk + 1) * CHUNK_MS * MS; /* the identity */
        h.raw_size = len;
        ck_assert_int_eq(cuptimon__aw_chunk(w, &h, buf), 0);
    }
    cuptimon__aw_close(w);
    free(buf);
    free(R);
}

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cuptimon-window-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Writes the window over the session in dir and returns the parsed trace
 * (and the summary in *summary). */
static json_object *write_window(const char *dir, int joined, json_object **summary)
{
    char out[300], *err = NULL;
    snprintf(out, sizeof out, "%s/w.json", tmpdir);
    struct cuptimon_requester rq = {.uid = getuid(), .gid = getgid()};
    struct cuptimon_window_source src = {.archive_dir = dir,
                                         .first_chunk = joined ? 0 : PREPARE_MS / CHUNK_MS,
                                         .last_chunk = LAST_MS / CHUNK_MS - 1,
                                         .joined = joined,
                                         .pid = 455,
                                         .uid = getuid()};
    struct cuptimon_window_spec w = {.id = 1,
                                     .start_ns = BASE + START_MS * MS,
                                     .end_ns = BASE + END_MS * MS,
                                     .src = &src,
                                     .nsrc = 1,
                                     .output = out,
                                     .owner = &rq,
                                     .user_dir = 1};
    int rc = cuptimon__window_write(&w, summary, &err);
    ck_assert_msg(rc == 0, "window_write: %d %s", rc, err ? err : "");
    free(err);
    json_object *root = json_object_from_file(out);
    ck_assert_ptr_nonnull(root);
    return root;
}

static const char *kind_cat(char kind)
{
    return kind == 'k' ? "kernel" : kind == 'c' ? "gpu_memcpy" : "gpu_memset";
}

static void check_scenario(const struct scenario *sc)
{
    struct launch *L;
    size_t n = make_launches(sc, &L);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, sc->name);
    write_archive(dir, L, n, sc->drv_lead);
    json_object *summary = NULL, *root = write_window(dir, sc->joined, &summary);

    /* What the trace holds, by correlation id (unique per process). */
    struct seen {
        uint32_t corr;
        char kind; /* GPU work of this kind, 0: none */
        int api;   /* API events */
        int64_t ext;
    } *seen = calloc(n, sizeof *seen);
    ck_assert_ptr_nonnull(seen);
    json_object *evs = json_object_object_get(root, "traceEvents");
    size_t nev = json_object_array_length(evs), uncorrelated = 0, flows = 0, want_flows = 0;
    for (size_t i = 0; i < nev; i++) {
        json_object *e = json_object_array_get_idx(evs, i), *args, *c, *x;
        const char *cat = json_object_get_string(json_object_object_get(e, "cat"));
        const char *ph = json_object_get_string(json_object_object_get(e, "ph"));
        if (cat && ph && !strcmp(cat, "ac2g") && !strcmp(ph, "s"))
            flows++;
        if (!cat || !json_object_object_get_ex(e, "args", &args) ||
            !json_object_object_get_ex(args, "correlation", &c))
            continue;
        uint32_t corr = (uint32_t)json_object_get_int64(c);
        int gpu =
            !strcmp(cat, "kernel") || !strcmp(cat, "gpu_memcpy") || !strcmp(cat, "gpu_memset");
        int api = !strcmp(cat, "cuda_runtime") || !strcmp(cat, "cuda_driver");
        if (!gpu && !api)
            continue;
        if (corr == 0) {
            ck_assert_msg(gpu, "%s: an API call with correlation 0", sc->name);
            uncorrelated++;
            continue;
        }
        size_t j = 0;
        while (j < n && L[j].corr != corr)
            j++;
        ck_assert_msg(j < n, "%s: correlation %" PRIu32 " was never launched", sc->name, corr);
        seen[j].corr = corr;
        if (api) {
            seen[j].api++;
        } else {
            ck_assert_msg(seen[j].kind == 0, "%s: GPU work %" PRIu32 " twice", sc->name, corr);
            ck_assert_str_eq(cat, kind_cat(L[j].kind));
            seen[j].kind = L[j].kind;
            seen[j].ext =
                json_object_object_get_ex(args, "External id", &x) ? json_object_get_int64(x) : -1;
        }
    }
    size_t kept = 0, before = 0, after = 0, noapi = 0;
    for (size_t j = 0; j < n; j++) {
        const struct launch *l = &L[j];
        int want = must_keep_gpu(sc, l);
        int api_in = l->api && l->t >= START_MS * MS && l->t <= END_MS * MS;
        if (want != (seen[j].kind != 0)) {
            if (!want && l->t < START_MS * MS)
                before++;
            else if (!want && l->t > END_MS * MS)
                after++;
            else
                noapi++;
            if (before + after + noapi == 1)
                fprintf(stderr,
                        "%s: %s %" PRIu32 " launched at %.3f ms (API record %s), on the GPU "
                        "%.3f-%.3f ms: %s\n",
                        sc->name, kind_cat(l->kind), l->corr, l->t / 1e6,
                        l->api ? "written" : "missing", l->gs / 1e6, l->ge / 1e6,
                        want ? "missing from the window" : "kept, wrongly");
        }
        kept += seen[j].kind != 0;
        want_flows += seen[j].kind != 0 && api_in;
        ck_assert_msg(seen[j].api == api_in, "%s: launch %" PRIu32 " has %d API events, want %d",
                      sc->name, l->corr, seen[j].api, api_in);
        /* Annotations: those of retained correlations, on their work. */
        if (seen[j].kind && l->api)
            ck_assert_msg(seen[j].ext == (int64_t)l->ext,
                          "%s: %s %" PRIu32 " has External id %" PRId64 ", want %" PRIu64, sc->name,
                          kind_cat(l->kind), l->corr, seen[j].ext, l->ext);
    }
    ck_assert_msg(before + after + noapi == 0,
                  "%s: %zu kept of work launched before the window, %zu of work launched "
                  "after it, %zu other differences (of %zu kept)",
                  sc->name, before, after, noapi, kept);
    ck_assert_msg(kept > 500, "%s: only %zu kept: the test is mis-built", sc->name, kept);
    ck_assert_uint_eq(uncorrelated, 1); /* the one at 400 ms */
    /* A flow arrow from each kept launch to its work. */
    ck_assert_msg(flows == want_flows, "%s: %zu flows, want %zu", sc->name, flows, want_flows);
    json_object_put(root);
    json_object_put(summary);
    free(seen);
    free(L);
}

static const struct scenario scenarios[] = {
    {"one-counter", ONE, 0, 0},
    {"per-kind", PER_KIND, 0, 0},
    {"shuffled", SHUFFLED, 0, 0},
    {"wraps", WRAPS, 0, 0},
    {"api-dropped", ONE, 5, 0},
    {"per-kind-dropped", PER_KIND, 7, 0},
    {"joined", ONE, 0, 1},
    {"joined-per-kind", PER_KIND, 0, 1},
    {"joined-wraps", WRAPS, 0, 1},
    /* A runtime call that spends 2 ms before its driver call (lazy module
     * loading, a pageable copy's staging): the calls begun in the 2 ms
     * before the start have their driver call inside.  Launched before the
     * window, their work is not its own, though a driver record of theirs
     * starts inside (a copy's or memset's driver call is not drawn, so its
     * work was kept with no launch at all). */
    {"driver-inside", ONE, 0, 0, 2 * MS},
    {"driver-inside-dropped", PER_KIND, 5, 0, 2 * MS},
};

START_TEST(window_keeps_pytorchs_set)
{
    check_scenario(&scenarios[_i]);
}
END_TEST

START_TEST(wrap_happens_inside_the_window)
{
    /* The WRAPS scenarios are only a test if the window holds ids from
     * both sides of 2^32. */
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        struct launch *L;
        size_t n, lo = 0, hi = 0;
        if (scenarios[i].num != WRAPS)
            continue;
        n = make_launches(&scenarios[i], &L);
        for (size_t j = 0; j < n; j++)
            if (L[j].api && L[j].t >= START_MS * MS && L[j].t <= END_MS * MS)
                L[j].corr < (1u << 31) ? lo++ : hi++;
        ck_assert_msg(lo > 100 && hi > 100, "%s: %zu ids below 2^31, %zu above", scenarios[i].name,
                      lo, hi);
        free(L);
    }
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("window");
    TCase *ids = tcase_create("idset");
    TCase *f = tcase_create("filter");

    tcase_set_timeout(ids, 120);
    tcase_add_test(ids, idset_dense_run_costs_its_table_only);
    tcase_add_test(ids, idset_per_kind_ranges_and_wrap);
    tcase_add_test(ids, idset_holes_cost_a_bit_per_id_of_span);
    tcase_add_test(ids, idset_agrees_with_a_sorted_array);
    tcase_add_test(ids, idset_scattered_ids_bounded_per_id);
    suite_add_tcase(s, ids);

    tcase_set_timeout(f, 120);
    tcase_add_checked_fixture(f, setup, teardown);
    tcase_add_loop_test(f, window_keeps_pytorchs_set, 0,
                        (int)(sizeof scenarios / sizeof scenarios[0]));
    tcase_add_test(f, wrap_happens_inside_the_window);
    suite_add_tcase(s, f);
    return s;
}
