/*
 * Unit test of the libcupti test double (tests/fakecupti): records walk back out with
 * cuptiActivityGetNextRecord, drops are counted when the request callback declines,
 * flush delivers partial buffers and waits for the completion callbacks, callbacks can be
 * replaced, external correlation, attributes, several launching threads.
 *
 * Every test starts from fakecupti_reset(), so the suite also runs with CK_FORK=no (as
 * under valgrind).
 */
#include "config.h"

#include "fakecupti.h"
#include "cupti-future.h"
#include "tests/unit/testlib.h"

#include <check.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- a CUPTI client */

struct rec {
    uint32_t kind;
    size_t buf; /* index of the buffer it came in */
    union {
        CUpti_ActivityKernel10 k;
        CUpti_ActivityMemcpy6 m;
        CUpti_ActivityMemset4 s;
        CUpti_ActivityAPI a;
        CUpti_ActivityExternalCorrelation e;
    } u;
};

struct bufinfo {
    size_t size, valid, nrec;
    int tail_byte;   /* first byte after validSize, -1 if none */
    int second_pair; /* completed to the second callback pair */
};

static struct {
    pthread_mutex_t mu;
    struct rec *recs;
    size_t n, cap;
    struct bufinfo *bufs;
    size_t nbufs, capbufs;
    int bad_walk;
    int completed_on_caller;
    pthread_t caller;
    CUptiResult flush_in_callback;
} col = {.mu = PTHREAD_MUTEX_INITIALIZER};

static size_t rq_size;
static size_t rq_maxrec;
static int rq_decline;
static int rq_dirty;
static atomic_int dn_flush; /* call cuptiActivityFlushAll from the completion callback */
static atomic_int requests;

static uint8_t *_Atomic rq_first; /* the first buffer handed out since setup */

static void CUPTIAPI rq(uint8_t **buffer, size_t *size, size_t *maxNumRecords)
{
    atomic_fetch_add(&requests, 1);
    if (rq_decline) {
        *buffer = NULL;
        *size = 0;
        *maxNumRecords = 0;
        return;
    }
    *buffer = aligned_alloc(8, rq_size);
    if (*buffer)
        memset(*buffer, rq_dirty ? 0xab : 0, rq_size);
    uint8_t *none = NULL;
    atomic_compare_exchange_strong(&rq_first, &none, *buffer);
    *size = rq_size;
    *maxNumRecords = rq_maxrec;
}

static void collect(uint8_t *buffer, size_t size, size_t validSize, int second)
{
    CUpti_Activity *r = NULL;
    size_t sum = 0, nrec = 0, bi;
    CUptiResult st;

    pthread_mutex_lock(&col.mu);
    if (pthread_equal(pthread_self(), col.caller))
        col.completed_on_caller = 1;
    bi = col.nbufs;
    if (col.nbufs == col.capbufs) {
        col.capbufs = col.capbufs ? col.capbufs * 2 : 64;
        col.bufs = realloc(col.bufs, col.capbufs * sizeof *col.bufs);
    }
    while ((st = cuptiActivityGetNextRecord(buffer, validSize, &r)) == CUPTI_SUCCESS) {
        struct rec *x;
        size_t sz;

        if (col.n == col.cap) {
            col.cap = col.cap ? col.cap * 2 : 1024;
            col.recs = realloc(col.recs, col.cap * sizeof *col.recs);
        }
        x = &col.recs[col.n++];
        memset(x, 0, sizeof *x);
        x->kind = r->kind;
        x->buf = bi;
        switch (r->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: sz = sizeof x->u.k; break;
        case CUPTI_ACTIVITY_KIND_MEMCPY: sz = sizeof x->u.m; break;
        case CUPTI_ACTIVITY_KIND_MEMSET: sz = sizeof x->u.s; break;
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: sz = sizeof x->u.a; break;
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: sz = sizeof x->u.e; break;
        default:
            sz = 0;
            col.bad_walk = 1;
            break;
        }
        memcpy(&x->u, r, sz);
        if ((uint8_t *)r != buffer + sum)
            col.bad_walk = 1;
        sum += sz;
        nrec++;
    }
    if (st != CUPTI_ERROR_MAX_LIMIT_REACHED || sum != validSize)
        col.bad_walk = 1;
    col.bufs[bi] = (struct bufinfo){.size = size,
                                    .valid = validSize,
                                    .nrec = nrec,
                                    .tail_byte = validSize < size ? buffer[validSize] : -1,
                                    .second_pair = second};
    col.nbufs++;
    pthread_mutex_unlock(&col.mu);
}

static void CUPTIAPI dn(CUcontext ctx, uint32_t streamId, uint8_t *buffer, size_t size,
                        size_t validSize)
{
    ck_assert_ptr_null(ctx);
    ck_assert_uint_eq(streamId, 0);
    collect(buffer, size, validSize, 0);
    if (atomic_load(&dn_flush))
        col.flush_in_callback = cuptiActivityFlushAll(0);
    free(buffer);
}

static void CUPTIAPI dn2(CUcontext ctx, uint32_t streamId, uint8_t *buffer, size_t size,
                         size_t validSize)
{
    collect(buffer, size, validSize, 1);
    free(buffer);
}

static size_t nbufs(void)
{
    size_t n;

    pthread_mutex_lock(&col.mu);
    n = col.nbufs;
    pthread_mutex_unlock(&col.mu);
    return n;
}

static size_t count_kind(uint32_t kind)
{
    size_t n = 0;

    for (size_t i = 0; i < col.n; i++)
        n += col.recs[i].kind == kind;
    return n;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static size_t nrecs(void)
{
    size_t n;

    pthread_mutex_lock(&col.mu);
    n = col.n;
    pthread_mutex_unlock(&col.mu);
    return n;
}

static int wait_recs(size_t n, int ms)
{
    for (int i = 0; i < ms && nrecs() < n; i++)
        usleep(1000);
    return nrecs() >= n;
}

static int wait_bufs(size_t n, int ms)
{
    for (int i = 0; i < ms; i++) {
        if (nbufs() >= n)
            return 1;
        usleep(1000);
    }
    return nbufs() >= n;
}

static void setup(void)
{
    fakecupti_reset();
    pthread_mutex_lock(&col.mu);
    free(col.recs);
    free(col.bufs);
    col.recs = NULL;
    col.bufs = NULL;
    col.n = col.cap = col.nbufs = col.capbufs = 0;
    col.bad_walk = 0;
    col.completed_on_caller = 0;
    col.caller = pthread_self();
    col.flush_in_callback = CUPTI_SUCCESS;
    pthread_mutex_unlock(&col.mu);
    rq_size = 1u << 16;
    rq_maxrec = 0;
    rq_decline = 0;
    rq_dirty = 0;
    atomic_store(&dn_flush, 0);
    atomic_store(&requests, 0);
    atomic_store(&rq_first, NULL);
}

static void teardown(void)
{
    rq_decline = 0;
    atomic_store(&dn_flush, 0);
    fakecupti_reset(); /* hands every buffer back to dn, which frees it */
    pthread_mutex_lock(&col.mu);
    free(col.recs);
    free(col.bufs);
    col.recs = NULL;
    col.bufs = NULL;
    col.n = col.cap = col.nbufs = col.capbufs = 0;
    pthread_mutex_unlock(&col.mu);
    unsetenv("FAKECUPTI_COMPLETE_DELAY_US");
    unsetenv("FAKECUPTI_DROP_QUEUE");
    unsetenv("FAKECUPTI_VERSION");
    unsetenv("FAKECUPTI_CUDA");
    unsetenv("FAKECUPTI_HW_TRACE");
    unsetenv("FAKECUPTI_CORR_START");
    unsetenv("FAKECUPTI_CORR_RANGES");
    unsetenv("FAKECUPTI_CORR_SHUFFLE");
    unsetenv("FAKECUPTI_DROP_API");
    unsetenv("FAKECUPTI_API_ORDER");
}

static void enable_all(void)
{
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER), CUPTI_SUCCESS);
}

#define PUSH(k, id) cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_##k, id)
#define POP(k, p)   cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_##k, p)

static const char *const K0 = "_Z5scaleILi2EEvPfi";
static const char *const K1 = "_ZN2ns7add_oneEPfi";

/* ---------------------------------------------------------------- tests */

START_TEST(test_version_and_strings)
{
    uint32_t v = 0;
    const char *s = NULL;

    ck_assert_int_eq(cuptiGetVersion(&v), CUPTI_SUCCESS);
    ck_assert_uint_eq(v, 130001);
    setenv("FAKECUPTI_VERSION", "120400", 1);
    ck_assert_int_eq(cuptiGetVersion(&v), CUPTI_SUCCESS);
    ck_assert_uint_eq(v, 120400);
    ck_assert_int_eq(cuptiGetVersion(NULL), CUPTI_ERROR_INVALID_PARAMETER);

    ck_assert_int_eq(cuptiGetResultString(CUPTI_SUCCESS, &s), CUPTI_SUCCESS);
    ck_assert_str_eq(s, "CUPTI_SUCCESS");
    ck_assert_int_eq(cuptiGetResultString(CUPTI_ERROR_MAX_LIMIT_REACHED, &s), CUPTI_SUCCESS);
    ck_assert_str_eq(s, "CUPTI_ERROR_MAX_LIMIT_REACHED");
    ck_assert_int_eq(cuptiGetResultString(CUPTI_ERROR_UNKNOWN, &s), CUPTI_SUCCESS);
    ck_assert_str_eq(s, "CUPTI_ERROR_UNKNOWN");
    ck_assert_int_eq(cuptiGetResultString((CUptiResult)4242, &s), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(cuptiGetResultString(CUPTI_SUCCESS, NULL), CUPTI_ERROR_INVALID_PARAMETER);

    ck_assert_int_eq(cuptiActivityEnableHWTrace(1), CUPTI_ERROR_NOT_SUPPORTED);
    setenv("FAKECUPTI_HW_TRACE", "1", 1);
    ck_assert_int_eq(cuptiActivityEnableHWTrace(1), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_INVALID), CUPTI_ERROR_INVALID_KIND);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_COUNT), CUPTI_ERROR_INVALID_KIND);
    ck_assert_int_eq(cuptiFinalize(), CUPTI_SUCCESS);
}
END_TEST

START_TEST(test_nothing_registered)
{
    struct fakecupti_stats st;
    size_t dropped = 99;

    /* nothing enabled: no record, no correlation id */
    ck_assert_uint_eq(fakecuda_launch_kernel(K0, 0, 1, 0, 0), 0);
    ck_assert_uint_eq(fakecuda_last_result(), 0);
    /* enabled but no callbacks: the records are dropped */
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    ck_assert_uint_eq(fakecuda_launch_kernel(K0, 0, 1, 0, 0), 1);
    ck_assert_uint_eq(fakecuda_last_result(), FAKECUDA_REC_GPU << FAKECUDA_DROPPED_SHIFT);
    fakecupti_get_stats(&st);
    ck_assert_uint_eq(st.kernels, 0);
    ck_assert_uint_eq(st.records_dropped, 1);
    ck_assert_int_eq(st.callbacks_registered, 0);
    ck_assert_int_eq(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped), CUPTI_SUCCESS);
    ck_assert_uint_eq(dropped, 1);
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_ERROR_INVALID_OPERATION);
    ck_assert_int_eq(cuptiActivityRegisterCallbacks(NULL, dn), CUPTI_ERROR_INVALID_PARAMETER);
}
END_TEST

START_TEST(test_walk_records)
{
    uint32_t corr[13];
    int ci = 0;
    uint64_t t0 = now_ns(), t1;
    struct fakecupti_stats st;

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    enable_all();
    for (int i = 0; i < 10; i++) {
        corr[ci++] = fakecuda_launch_kernel(i % 2 ? K1 : K0, 0, 1 + i % 2, 0, 0);
        ck_assert_uint_eq(fakecuda_last_result(),
                          FAKECUDA_REC_GPU | FAKECUDA_REC_RUNTIME | FAKECUDA_REC_DRIVER);
        if (i == 3 || i == 7)
            corr[ci++] = fakecuda_memcpy(4096, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 0, 1);
        if (i == 5)
            corr[ci++] = fakecuda_memset(8192, 7, 0, 2);
    }
    fakecuda_synchronize();
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    t1 = now_ns();

    ck_assert_int_eq(col.bad_walk, 0);
    ck_assert_int_eq(col.completed_on_caller, 0); /* the double's completion thread */
    ck_assert_uint_eq(col.nbufs, 1);
    ck_assert_uint_eq(col.n, 13 * 3);
    ck_assert_uint_eq(count_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 10);
    ck_assert_uint_eq(count_kind(CUPTI_ACTIVITY_KIND_MEMCPY), 2);
    ck_assert_uint_eq(count_kind(CUPTI_ACTIVITY_KIND_MEMSET), 1);
    ck_assert_uint_eq(count_kind(CUPTI_ACTIVITY_KIND_RUNTIME), 13);
    ck_assert_uint_eq(count_kind(CUPTI_ACTIVITY_KIND_DRIVER), 13);
    ck_assert_uint_eq(col.bufs[0].valid, 10 * 216 + 2 * 96 + 88 + 26 * 40);

    /* per launch: GPU record, driver record, runtime record, one correlation id */
    for (int l = 0; l < 13; l++) {
        const struct rec *g = &col.recs[3 * l], *d = &col.recs[3 * l + 1],
                         *r = &col.recs[3 * l + 2];
        uint64_t gs, ge;
        uint32_t gc;

        ck_assert_uint_eq(corr[l], (uint32_t)l + 1);
        ck_assert_uint_eq(d->kind, CUPTI_ACTIVITY_KIND_DRIVER);
        ck_assert_uint_eq(r->kind, CUPTI_ACTIVITY_KIND_RUNTIME);
        if (g->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            gs = g->u.k.start;
            ge = g->u.k.end;
            gc = g->u.k.correlationId;
            ck_assert_uint_eq(r->u.a.cbid, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
            ck_assert_uint_eq(d->u.a.cbid, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
            ck_assert_uint_eq(g->u.k.completed, ge);
            ck_assert_int_eq(g->u.k.contextId, 1);
            ck_assert_int_eq(g->u.k.graphId, 0);
            ck_assert(g->u.k.name == K0 || g->u.k.name == K1);
            if (g->u.k.name == K0) {
                ck_assert_int_eq(g->u.k.gridX, 64);
                ck_assert_int_eq(g->u.k.blockX, 256);
                ck_assert_uint_eq(g->u.k.streamId, 1);
            } else {
                ck_assert_int_eq(g->u.k.gridX, 128);
                ck_assert_uint_eq(g->u.k.streamId, 2);
            }
            ck_assert_uint_ge(ge - gs, 1000);
            ck_assert_uint_le(ge - gs, 5000);
        } else if (g->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            gs = g->u.m.start;
            ge = g->u.m.end;
            gc = g->u.m.correlationId;
            ck_assert_uint_eq(r->u.a.cbid, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020);
            ck_assert_uint_eq(g->u.m.copyKind, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH);
            ck_assert_uint_eq(g->u.m.srcKind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
            ck_assert_uint_eq(g->u.m.dstKind, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE);
            ck_assert_uint_eq(g->u.m.bytes, 4096);
        } else {
            ck_assert_uint_eq(g->kind, CUPTI_ACTIVITY_KIND_MEMSET);
            gs = g->u.s.start;
            ge = g->u.s.end;
            gc = g->u.s.correlationId;
            ck_assert_uint_eq(r->u.a.cbid, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020);
            ck_assert_uint_eq(g->u.s.value, 7);
            ck_assert_uint_eq(g->u.s.bytes, 8192);
            ck_assert_uint_eq(g->u.s.memoryKind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
        }
        ck_assert_uint_eq(gc, corr[l]);
        ck_assert_uint_eq(d->u.a.correlationId, corr[l]);
        ck_assert_uint_eq(r->u.a.correlationId, corr[l]);
        /* [runtime [driver] ] then the GPU work */
        ck_assert_uint_lt(r->u.a.start, d->u.a.start);
        ck_assert_uint_lt(d->u.a.start, d->u.a.end);
        ck_assert_uint_lt(d->u.a.end, r->u.a.end);
        ck_assert_uint_gt(gs, r->u.a.end);
        ck_assert_uint_gt(ge, gs);
        ck_assert_uint_ge(r->u.a.start, t0);
        ck_assert_uint_le(ge, t1);
        ck_assert_uint_eq(r->u.a.processId, (uint32_t)getpid());
        ck_assert_uint_eq(r->u.a.threadId, (uint32_t)(uintptr_t)pthread_self());
    }
    fakecupti_get_stats(&st);
    ck_assert_uint_eq(st.kernels, 10);
    ck_assert_uint_eq(st.runtime_api, 13);
    ck_assert_uint_eq(st.buffers_requested, 1);
    ck_assert_uint_eq(st.buffers_completed, 1);
    ck_assert_uint_eq(st.last_correlation, 13);
    ck_assert_int_eq(st.callbacks_registered, 1);
}
END_TEST

START_TEST(test_walk_errors)
{
    uint8_t buf[512] __attribute__((aligned(8)));
    CUpti_Activity *r = NULL;
    uint32_t kind;

    memset(buf, 0, sizeof buf);
    ck_assert_int_eq(cuptiActivityGetNextRecord(NULL, 8, &r), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(cuptiActivityGetNextRecord(buf, 8, NULL), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(cuptiActivityGetNextRecord(buf, 0, &r), CUPTI_ERROR_MAX_LIMIT_REACHED);
    /* kind 0 (INVALID) and an unknown kind */
    ck_assert_int_eq(cuptiActivityGetNextRecord(buf, 64, &r), CUPTI_ERROR_INVALID_KIND);
    kind = 9999;
    memcpy(buf, &kind, sizeof kind);
    ck_assert_int_eq(cuptiActivityGetNextRecord(buf, 64, &r), CUPTI_ERROR_INVALID_KIND);
    /* a truncated kernel record */
    kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    memcpy(buf, &kind, sizeof kind);
    ck_assert_int_eq(cuptiActivityGetNextRecord(buf, 100, &r), CUPTI_ERROR_INVALID_KIND);
    /* one API record then the end */
    kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    memcpy(buf, &kind, sizeof kind);
    ck_assert_int_eq(cuptiActivityGetNextRecord(buf, 40, &r), CUPTI_SUCCESS);
    ck_assert_ptr_eq(r, (CUpti_Activity *)(void *)buf);
    ck_assert_int_eq(cuptiActivityGetNextRecord(buf, 40, &r), CUPTI_ERROR_MAX_LIMIT_REACHED);
    /* followed by garbage */
    r = NULL;
    ck_assert_int_eq(cuptiActivityGetNextRecord(buf, 48, &r), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityGetNextRecord(buf, 48, &r), CUPTI_ERROR_INVALID_KIND);
}
END_TEST

START_TEST(test_drops)
{
    struct fakecupti_stats st;
    size_t n = 0;

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
    rq_decline = 1;
    for (int i = 0; i < 5; i++) {
        ck_assert_uint_ne(fakecuda_launch_kernel(K0, 0, 3, 0, 0), 0);
        ck_assert_uint_eq(fakecuda_last_result(), (FAKECUDA_REC_GPU | FAKECUDA_REC_RUNTIME)
                                                      << FAKECUDA_DROPPED_SHIFT);
    }
    fakecupti_get_stats(&st);
    ck_assert_uint_eq(st.records_dropped, 10);
    ck_assert_uint_eq(st.requests_declined, 10); /* one request per record */
    ck_assert_uint_eq(st.kernels, 0);
    ck_assert_int_eq(cuptiActivityGetNumDroppedRecords(NULL, 0, &n), CUPTI_SUCCESS);
    ck_assert_uint_eq(n, 10);
    ck_assert_int_eq(cuptiActivityGetNumDroppedRecords(NULL, 0, &n), CUPTI_SUCCESS);
    ck_assert_uint_eq(n, 0); /* reset by the read */
    ck_assert_int_eq(cuptiActivityGetNumDroppedRecords(NULL, 0, NULL),
                     CUPTI_ERROR_INVALID_PARAMETER);

    /* per stream attribution of GPU records */
    setenv("FAKECUPTI_DROP_QUEUE", "stream", 1);
    fakecuda_launch_kernel(K0, 1, 3, 0, 0);
    ck_assert_int_eq(cuptiActivityGetNumDroppedRecords(fakecuda_context(1), 3, &n), CUPTI_SUCCESS);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(cuptiActivityGetNumDroppedRecords(NULL, 0, &n), CUPTI_SUCCESS);
    ck_assert_uint_eq(n, 1); /* the runtime record */
    unsetenv("FAKECUPTI_DROP_QUEUE");

    /* the pool has room again */
    rq_decline = 0;
    fakecuda_launch_kernel(K0, 0, 3, 0, 0);
    ck_assert_uint_eq(fakecuda_last_result(), FAKECUDA_REC_GPU | FAKECUDA_REC_RUNTIME);
    ck_assert_int_eq(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
    ck_assert_uint_eq(col.n, 2);
}
END_TEST

START_TEST(test_flush_partial)
{
    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    rq_size = 1u << 20;
    for (int i = 0; i < 3; i++)
        fakecuda_launch_kernel(K0, 0, 1, 0, 0);
    usleep(20000);
    ck_assert_uint_eq(nbufs(), 0); /* not full: not completed */
    ck_assert_int_eq(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
    ck_assert_uint_eq(col.nbufs, 1);
    ck_assert_uint_eq(col.bufs[0].valid, 3 * 216);
    ck_assert_uint_eq(col.bufs[0].size, 1u << 20);
    ck_assert_int_eq(col.bufs[0].tail_byte, 0); /* zeroed by the double */
    /* nothing left: flush completes nothing */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(col.nbufs, 1);
    ck_assert_int_eq(col.bad_walk, 0);
}
END_TEST

START_TEST(test_flush_waits_for_slow_completion)
{
    uint64_t t0;

    setenv("FAKECUPTI_COMPLETE_DELAY_US", "100000", 1);
    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    fakecuda_launch_kernel(K0, 0, 1, 0, 0);
    t0 = now_ns();
    fakecuda_synchronize(); /* the work has ended: its records complete */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(nbufs(), 1); /* the callback has returned */
    ck_assert_uint_ge(now_ns() - t0, 100000000ull);
    unsetenv("FAKECUPTI_COMPLETE_DELAY_US");
}
END_TEST

START_TEST(test_full_buffers_complete_async)
{
    struct fakecupti_stats st;

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    rq_size = 4096; /* 18 kernel records */
    for (int i = 0; i < 100; i++)
        fakecuda_launch_kernel(K0, 0, 1 + i % 4, 0, 0);
    ck_assert(wait_bufs(5, 5000)); /* without any flush */
    ck_assert_uint_eq(nbufs(), 5);
    for (size_t i = 0; i < 5; i++)
        ck_assert_uint_eq(col.bufs[i].valid, 18 * 216);
    ck_assert_int_eq(col.completed_on_caller, 0);
    fakecuda_synchronize(); /* the work has ended: its records complete */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(col.nbufs, 6);
    ck_assert_uint_eq(col.n, 100);
    fakecupti_get_stats(&st);
    ck_assert_uint_eq(st.buffers_requested, 6);
    ck_assert_uint_eq(st.buffers_completed, 6);
    ck_assert_uint_eq(st.buffers_pending, 0);
    ck_assert_int_eq(col.bad_walk, 0);
}
END_TEST

/* The H200 (docs/gpu-runs/20261204-h200-probe, E1): a plain flush returns no buffer that
 * holds a running kernel, nor any closed after it, even one whose own kernel ended (records
 * complete in launch order); nothing comes without a flush; the next flush after the work
 * ended returns both, complete, with their true times. */
START_TEST(test_plain_flush_holds_running_work)
{
    struct fakecuda_kernel k = {.name = K0, .stream = 1, .duration_ns = 60000000};
    struct fakecupti_stats st;
    uint32_t c1, c2;

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    c1 = fakecuda_launch_kernel_ex(&k);
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(nbufs(), 0);
    c2 = fakecuda_launch_kernel(K1, 0, 2, 0, 0); /* another stream: ends in microseconds */
    usleep(5000);
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(nbufs(), 0);
    fakecupti_get_stats(&st);
    ck_assert_uint_eq(st.records_pending, 2);
    ck_assert_int_eq(atomic_load(&requests), 2); /* the first flush closed the first buffer */
    fakecuda_synchronize();
    usleep(20000);
    ck_assert_uint_eq(nbufs(), 0); /* nothing without a flush */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(col.nbufs, 2);
    ck_assert_uint_eq(col.n, 2);
    ck_assert_uint_eq(col.recs[0].u.k.correlationId, c1);
    ck_assert_uint_eq(col.recs[0].u.k.end - col.recs[0].u.k.start, 60000000);
    ck_assert_uint_eq(col.recs[0].u.k.completed, col.recs[0].u.k.end);
    ck_assert_uint_eq(col.recs[1].u.k.correlationId, c2);
    ck_assert_uint_ne(col.recs[1].u.k.start, 0);
    ck_assert_uint_gt(col.recs[1].u.k.end, col.recs[1].u.k.start);
    fakecupti_get_stats(&st);
    ck_assert_uint_eq(st.records_incomplete, 0);
    ck_assert_int_eq(col.bad_walk, 0);
}
END_TEST

/* The H200 (E3): a forced flush while a kernel runs hands its record over with start, end
 * and completed 0, and its completion never comes, however the next flushes ask. */
START_TEST(test_forced_flush_loses_running_work)
{
    struct fakecuda_kernel k = {.name = K0, .stream = 1, .duration_ns = 60000000};
    struct fakecupti_stats st;
    uint32_t c1;

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    c1 = fakecuda_launch_kernel_ex(&k);
    ck_assert_int_eq(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
    ck_assert_uint_eq(col.nbufs, 1);
    ck_assert_uint_eq(col.n, 1);
    ck_assert_uint_eq(col.recs[0].kind, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); /* clean */
    ck_assert_uint_eq(col.recs[0].u.k.correlationId, c1);
    ck_assert_uint_eq(col.recs[0].u.k.start, 0);
    ck_assert_uint_eq(col.recs[0].u.k.end, 0);
    ck_assert_uint_eq(col.recs[0].u.k.completed, 0);
    fakecupti_get_stats(&st);
    ck_assert_uint_eq(st.records_incomplete, 1);
    fakecuda_synchronize();
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
    ck_assert_uint_eq(col.n, 1);
    ck_assert_int_eq(col.bad_walk, 0);
}
END_TEST

/* CUPTI's worker completes a full buffer by itself, but only once every record in it is
 * complete: a long kernel first in it holds it back. */
START_TEST(test_full_buffer_waits_for_its_records)
{
    struct fakecuda_kernel k = {.name = K0, .stream = 1, .duration_ns = 40000000};
    uint64_t t0 = now_ns();

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    rq_size = 4096; /* 18 kernel records */
    fakecuda_launch_kernel_ex(&k);
    for (int i = 0; i < 18; i++) /* the 19th record closes the first buffer */
        fakecuda_launch_kernel(K1, 0, 2 + i % 4, 0, 0);
    usleep(10000);
    ck_assert_uint_eq(nbufs(), 0);
    ck_assert(wait_recs(18, 5000)); /* without any flush */
    ck_assert_uint_ge(now_ns() - t0, 40000000ull);
    ck_assert_uint_eq(col.nbufs, 1);
    ck_assert_uint_eq(col.recs[0].u.k.end - col.recs[0].u.k.start, 40000000);
    for (size_t i = 0; i < col.n; i++)
        ck_assert_uint_ne(col.recs[i].u.k.end, 0);
    ck_assert_int_eq(col.bad_walk, 0);
}
END_TEST

/* What the shim's in-flight view and its elastic pool depend on (issue 33; the H200:
 * docs/gpu-runs/20261204-h200-probe and shared/reference/cupti-held-buffers.md): while one
 * kernel runs, every buffer filled after its own is held, even full ones whose records'
 * work ended long ago on other streams, so CUPTI keeps asking for new buffers; the
 * running kernel's record sits in its buffer with bit 31 of its kind set, its times 0 and
 * its launch-time fields (correlation id, device, stream, name) written; once it ends, one
 * flush returns every buffer, in fill order, complete. */
START_TEST(test_held_buffers_behind_running_work)
{
    struct fakecuda_kernel k = {.name = K0, .stream = 1, .duration_ns = 80000000};
    CUpti_ActivityKernel10 held;
    uint32_t c1;

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    rq_size = 4096; /* 18 kernel records */
    c1 = fakecuda_launch_kernel_ex(&k);
    for (int i = 0; i < 100; i++) /* 101 records: 5 full buffers and a sixth */
        fakecuda_launch_kernel(K1, 0, 2 + i % 4, 0, 0);
    usleep(20000); /* the short kernels have ended; the long one runs */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(nbufs(), 0);
    ck_assert_int_eq(atomic_load(&requests), 6);
    memcpy(&held, atomic_load(&rq_first), sizeof held);
    ck_assert_uint_eq((uint32_t)held.kind, 0x80000000u | CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    ck_assert_uint_eq(held.correlationId, c1);
    ck_assert_uint_eq(held.streamId, 1);
    ck_assert_uint_eq(held.deviceId, 0);
    ck_assert_ptr_eq(held.name, K0);
    ck_assert_uint_eq(held.start, 0);
    ck_assert_uint_eq(held.end, 0);
    /* The record after it, on another stream, ended long ago: incomplete all the same. */
    memcpy(&held, atomic_load(&rq_first) + sizeof held, sizeof held);
    ck_assert_uint_eq((uint32_t)held.kind, 0x80000000u | CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    ck_assert_uint_eq(held.end, 0);
    fakecuda_synchronize();
    /* The sixth buffer, not full, waits for a flush (the H200: nothing in 600 ms without
     * one).  The five full ones may come once the kernel has ended: not asserted either
     * way (the worker looks at a full head every millisecond; whether CUPTI does without
     * a later buffer filling is not measured). */
    ck_assert(!wait_recs(91, 100));
    ck_assert_uint_le(nbufs(), 5);
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(col.nbufs, 6);
    ck_assert_uint_eq(col.n, 101);
    ck_assert_uint_eq(col.recs[0].u.k.correlationId, c1);
    ck_assert_uint_eq(col.recs[0].u.k.end - col.recs[0].u.k.start, 80000000);
    for (size_t i = 0; i < col.n; i++) {
        ck_assert_uint_ne(col.recs[i].u.k.end, 0);
        if (i)
            ck_assert_uint_gt(col.recs[i].u.k.correlationId, col.recs[i - 1].u.k.correlationId);
    }
    ck_assert_int_eq(col.bad_walk, 0);
}
END_TEST

/* A buffer a plain flush closed while a kernel ran comes back without another flush once
 * the kernel has ended and a later buffer fills (the H100, cupti-probe --held 5: every
 * buffer a 5-s kernel held arrived within 160 ms of the first that filled after it, the
 * flush-closed ones too); until one fills, nothing comes without a flush (the H200).  A
 * double that waits for a flush hides the burst of held buffers that reaches the shim
 * while the job keeps launching. */
START_TEST(test_held_buffers_come_when_one_fills)
{
    struct fakecuda_kernel k = {.name = K0, .stream = 1, .duration_ns = 40000000};
    uint32_t c1;

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    rq_size = 4096; /* 18 kernel records */
    c1 = fakecuda_launch_kernel_ex(&k);
    for (int i = 0; i < 4; i++)
        fakecuda_launch_kernel(K1, 0, 2, 0, 0);
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS); /* closes it: 5 records */
    ck_assert_uint_eq(nbufs(), 0);
    fakecuda_synchronize();
    usleep(20000);
    ck_assert_uint_eq(nbufs(), 0); /* ended, but nothing filled since */
    for (int i = 0; i < 19; i++)   /* the 19th closes the second buffer, full */
        fakecuda_launch_kernel(K1, 0, 2, 0, 0);
    ck_assert(wait_bufs(2, 5000)); /* without a flush */
    ck_assert_uint_eq(col.bufs[0].nrec, 5);
    ck_assert_uint_eq(col.bufs[1].nrec, 18);
    ck_assert_uint_eq(col.recs[0].u.k.correlationId, c1);
    ck_assert_uint_eq(col.recs[0].u.k.end - col.recs[0].u.k.start, 40000000);
    for (size_t i = 0; i < col.n; i++)
        ck_assert_uint_ne(col.recs[i].u.k.end, 0);
    ck_assert_int_eq(col.bad_walk, 0);
}
END_TEST

/* CUPTI completes a buffer's records when the buffer is closed, not as their work ends:
 * in the buffer it is filling, every record stays incomplete until a flush (the H100:
 * cupti-probe --held 0, docs/gpu-runs/20261205-h100-held-pm-edges). */
START_TEST(test_open_buffer_stays_incomplete)
{
    CUpti_ActivityKernel10 rec;

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    rq_size = 1 << 20;
    for (int i = 0; i < 600; i++) /* more than the double keeps pending before it looks */
        fakecuda_launch_kernel(K1, 0, 2, 0, 0);
    fakecuda_synchronize();
    usleep(10000);
    for (int i = 0; i < 600; i += 599) {
        memcpy(&rec, atomic_load(&rq_first) + (size_t)i * sizeof rec, sizeof rec);
        ck_assert_uint_eq((uint32_t)rec.kind, 0x80000000u | CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        ck_assert_uint_eq(rec.end, 0);
    }
    ck_assert_uint_eq(nbufs(), 0);
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(col.n, 600);
    for (size_t i = 0; i < col.n; i++)
        ck_assert_uint_ne(col.recs[i].u.k.end, 0);
}
END_TEST

START_TEST(test_max_records)
{
    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    rq_maxrec = 4;
    for (int i = 0; i < 8; i++)
        fakecuda_launch_kernel(K0, 0, 1, 0, 0);
    ck_assert(wait_bufs(2, 5000));
    ck_assert_uint_eq(col.bufs[0].nrec, 4);
    ck_assert_uint_eq(col.bufs[1].nrec, 4);
}
END_TEST

START_TEST(test_zeroed_out_attribute)
{
    uint8_t one = 1, zero = 0;
    size_t sz = sizeof one;
    struct fakecupti_stats st;

    ck_assert_int_eq(
        cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &one),
        CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    rq_dirty = 1;
    fakecuda_launch_kernel(K0, 0, 1, 0, 0);
    fakecuda_synchronize(); /* the work has ended: its records complete */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    fakecupti_get_stats(&st);
    ck_assert_uint_eq(st.dirty_buffers, 1);
    ck_assert_int_eq(col.bufs[0].tail_byte, 0xab); /* the double did not zero it */
    ck_assert_int_eq(col.bad_walk, 0);

    rq_dirty = 0; /* a clean buffer is fine */
    fakecuda_launch_kernel(K0, 0, 1, 0, 0);
    fakecuda_synchronize(); /* the work has ended: its records complete */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    fakecupti_get_stats(&st);
    ck_assert_uint_eq(st.dirty_buffers, 1);

    sz = sizeof zero; /* back to CUPTI zeroing */
    ck_assert_int_eq(
        cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &zero),
        CUPTI_SUCCESS);
    rq_dirty = 1;
    fakecuda_launch_kernel(K0, 0, 1, 0, 0);
    fakecuda_synchronize(); /* the work has ended: its records complete */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    fakecupti_get_stats(&st);
    ck_assert_uint_eq(st.dirty_buffers, 1);
    ck_assert_int_eq(col.bufs[2].tail_byte, 0);
}
END_TEST

START_TEST(test_attributes)
{
    size_t v = 0, sz = sizeof v;
    uint8_t b = 9;

    ck_assert_int_eq(cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &v),
                     CUPTI_SUCCESS);
    ck_assert_uint_eq(sz, sizeof(size_t));
    ck_assert_uint_eq(v, 3200000);
    v = 8u << 20;
    ck_assert_int_eq(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &v),
                     CUPTI_SUCCESS);
    v = 0;
    ck_assert_int_eq(cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &v),
                     CUPTI_SUCCESS);
    ck_assert_uint_eq(v, 8u << 20);
    v = 4;
    ck_assert_int_eq(
        cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, &sz, &v),
        CUPTI_SUCCESS);
    sz = 4;
    ck_assert_int_eq(cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &v),
                     CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT);
    sz = 1;
    ck_assert_int_eq(
        cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &sz, &b),
        CUPTI_SUCCESS);
    ck_assert_uint_eq(b, 1);
    ck_assert_int_eq(
        cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &b),
        CUPTI_SUCCESS);
    ck_assert_uint_eq(b, 0);
    ck_assert_int_eq(cuptiActivityGetAttribute((CUpti_ActivityAttribute)77, &sz, &b),
                     CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, NULL, &v),
                     CUPTI_ERROR_INVALID_PARAMETER);
}
END_TEST

START_TEST(test_replace_callbacks)
{
    struct fakecupti_stats st;

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    fakecuda_launch_kernel(K0, 0, 1, 0, 0); /* buffer handed out by rq */
    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn2), CUPTI_SUCCESS);
    fakecuda_launch_kernel(K0, 0, 1, 0, 0);
    fakecuda_synchronize(); /* the work has ended: its records complete */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(col.nbufs, 1);
    ck_assert_int_eq(col.bufs[0].second_pair, 1); /* completed to the new pair */
    ck_assert_uint_eq(col.bufs[0].nrec, 2);
    fakecupti_get_stats(&st);
    ck_assert_uint_eq(st.callback_registrations, 2);
}
END_TEST

START_TEST(test_external_correlation)
{
    uint64_t id = 0;
    uint32_t c1, c2, c3;

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION), CUPTI_SUCCESS);
    ck_assert_int_eq(PUSH(INVALID, 1), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(POP(CUSTOM0, &id), CUPTI_ERROR_QUEUE_EMPTY);
    ck_assert_int_eq(PUSH(CUSTOM0, 42), CUPTI_SUCCESS);
    ck_assert_int_eq(PUSH(CUSTOM0, 43), CUPTI_SUCCESS);
    ck_assert_int_eq(PUSH(CUSTOM2, 7), CUPTI_SUCCESS);
    c1 = fakecuda_launch_kernel(K0, 0, 1, 0, 0);
    ck_assert_uint_eq(fakecuda_last_result(),
                      FAKECUDA_REC_EXTCORR | FAKECUDA_REC_GPU | FAKECUDA_REC_RUNTIME);
    ck_assert_int_eq(POP(CUSTOM2, &id), CUPTI_SUCCESS);
    ck_assert_uint_eq(id, 7);
    ck_assert_int_eq(POP(CUSTOM0, &id), CUPTI_SUCCESS);
    ck_assert_uint_eq(id, 43);
    c2 = fakecuda_launch_kernel(K0, 0, 1, 0, 0);
    ck_assert_int_eq(POP(CUSTOM0, NULL), CUPTI_SUCCESS);
    c3 = fakecuda_launch_kernel(K0, 0, 1, 0, 0);
    ck_assert_uint_eq(fakecuda_last_result(), FAKECUDA_REC_GPU | FAKECUDA_REC_RUNTIME);
    fakecuda_synchronize(); /* the work has ended: its records complete */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);

    ck_assert_uint_eq(col.n, 2 + 3 + 2 + 2);
    /* launch 1: ext CUSTOM0 43, ext CUSTOM2 7, kernel, runtime */
    ck_assert_uint_eq(col.recs[0].kind, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
    ck_assert_uint_eq(col.recs[0].u.e.externalKind, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
    ck_assert_uint_eq(col.recs[0].u.e.externalId, 43);
    ck_assert_uint_eq(col.recs[0].u.e.correlationId, c1);
    ck_assert_uint_eq(col.recs[1].u.e.externalKind, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2);
    ck_assert_uint_eq(col.recs[1].u.e.externalId, 7);
    ck_assert_uint_eq(col.recs[2].kind, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    ck_assert_uint_eq(col.recs[3].kind, CUPTI_ACTIVITY_KIND_RUNTIME);
    ck_assert_uint_eq(col.recs[3].u.a.correlationId, c1);
    /* launch 2: ext CUSTOM0 42 */
    ck_assert_uint_eq(col.recs[4].kind, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
    ck_assert_uint_eq(col.recs[4].u.e.externalId, 42);
    ck_assert_uint_eq(col.recs[4].u.e.correlationId, c2);
    /* launch 3: none */
    ck_assert_uint_eq(col.recs[7].kind, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    ck_assert_uint_eq(col.recs[7].u.k.correlationId, c3);

    /* without an API record there is no ExternalCorrelation record */
    ck_assert_int_eq(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
    ck_assert_int_eq(PUSH(CUSTOM1, 5), CUPTI_SUCCESS);
    fakecuda_launch_kernel(K0, 0, 1, 0, 0);
    ck_assert_uint_eq(fakecuda_last_result(), FAKECUDA_REC_GPU);
}
END_TEST

static uint64_t CUPTIAPI ts_minus_1s(void)
{
    return now_ns() - 1000000000ull;
}

START_TEST(test_timestamp_callback)
{
    uint64_t ts = 0, n;

    ck_assert_int_eq(cuptiGetTimestamp(&ts), CUPTI_SUCCESS);
    n = now_ns();
    ck_assert_uint_le(ts, n);
    ck_assert_uint_lt(n - ts, 100000000ull);
    ck_assert_int_eq(cuptiGetTimestamp(NULL), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(cuptiActivityRegisterTimestampCallback(NULL), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(cuptiActivityRegisterTimestampCallback(ts_minus_1s), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiGetTimestamp(&ts), CUPTI_SUCCESS);
    ck_assert_uint_lt(ts, now_ns() - 900000000ull);

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
    fakecuda_launch_kernel(K0, 0, 1, 0, 0);
    fakecuda_synchronize();
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(col.n, 2);
    n = now_ns() - 1000000000ull;
    ck_assert_uint_lt(col.recs[0].u.k.end, n); /* in the callback's timebase */
    ck_assert_uint_lt(n - col.recs[0].u.k.start, 100000000ull);
    ck_assert_uint_gt(col.recs[0].u.k.start, col.recs[1].u.a.end);
}
END_TEST

START_TEST(test_runtime_api_filter)
{
    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
    ck_assert_int_eq(
        cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 0),
        CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnableDriverApi(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1),
                     CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnableRuntimeApi(0, 1), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_uint_eq(fakecuda_memcpy(64, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 0, 1), 0);
    ck_assert_uint_ne(fakecuda_launch_kernel(K0, 0, 1, 0, 0), 0);
    ck_assert_uint_eq(fakecuda_last_result(), FAKECUDA_REC_RUNTIME | FAKECUDA_REC_DRIVER);
    /* enabling the kind again overrides the per-API setting */
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
    ck_assert_uint_ne(fakecuda_memcpy(64, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 0, 1), 0);
    ck_assert_uint_eq(fakecuda_last_result(), FAKECUDA_REC_RUNTIME);
}
END_TEST

START_TEST(test_kernel_kind_and_graphs)
{
    struct fakecuda_kernel k = {.name = K1,
                                .stream = 5,
                                .grid = {7, 2, 1},
                                .block = {32, 4, 1},
                                .dynamic_shared = 1024,
                                .graph_id = 3,
                                .graph_node_id = (3ull << 32) + 9,
                                .duration_ns = 2500};

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_KERNEL), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
    ck_assert_uint_ne(fakecuda_launch_kernel_ex(&k), 0);
    fakecuda_synchronize(); /* the work has ended: its records complete */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(col.n, 2);
    ck_assert_uint_eq(col.recs[0].kind, CUPTI_ACTIVITY_KIND_KERNEL);
    ck_assert_int_eq(col.recs[0].u.k.gridX, 7);
    ck_assert_int_eq(col.recs[0].u.k.gridY, 2);
    ck_assert_int_eq(col.recs[0].u.k.blockY, 4);
    ck_assert_int_eq(col.recs[0].u.k.dynamicSharedMemory, 1024);
    ck_assert_uint_eq(col.recs[0].u.k.graphId, 3);
    ck_assert_uint_eq(col.recs[0].u.k.graphNodeId, (3ull << 32) + 9);
    ck_assert_uint_eq(col.recs[0].u.k.end - col.recs[0].u.k.start, 2500);
    ck_assert_uint_eq(col.recs[0].u.k.streamId, 5);
    ck_assert_uint_eq(col.recs[1].u.a.cbid, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000);
}
END_TEST

#define NTHREADS   4
#define PER_THREAD 500

static void *launcher(void *arg)
{
    uintptr_t t = (uintptr_t)arg;

    for (int i = 0; i < PER_THREAD; i++)
        fakecuda_launch_kernel((i + (int)t) % 2 ? K0 : K1, 0, 1 + (uint32_t)t, 0, 0);
    return NULL;
}

static void run_threads(void)
{
    pthread_t th[NTHREADS];

    for (uintptr_t t = 0; t < NTHREADS; t++)
        ck_assert_int_eq(pthread_create(&th[t], NULL, launcher, (void *)t), 0);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
}

START_TEST(test_threads)
{
    uint8_t *seen;
    struct fakecupti_stats st;

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
    rq_size = 16384;
    run_threads();
    fakecuda_synchronize(); /* the work has ended: its records complete */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_int_eq(col.bad_walk, 0);
    ck_assert_uint_eq(count_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), NTHREADS * PER_THREAD);
    ck_assert_uint_eq(count_kind(CUPTI_ACTIVITY_KIND_RUNTIME), NTHREADS * PER_THREAD);
    fakecupti_get_stats(&st);
    ck_assert_uint_eq(st.kernels, NTHREADS * PER_THREAD);
    ck_assert_uint_eq(st.records_dropped, 0);
    ck_assert_uint_eq(st.last_correlation, NTHREADS * PER_THREAD);

    /* every correlation id once per kind; per-thread buffers hold one thread each */
    seen = calloc(NTHREADS * PER_THREAD + 1, 1);
    for (size_t i = 0; i < col.n; i++) {
        const struct rec *r = &col.recs[i];

        if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
            ck_assert_uint_ge(r->u.a.correlationId, 1);
            ck_assert_uint_le(r->u.a.correlationId, NTHREADS * PER_THREAD);
            ck_assert_int_eq(seen[r->u.a.correlationId] & 1, 0);
            seen[r->u.a.correlationId] |= 1;
            for (size_t j = 0; j < col.n; j++)
                if (col.recs[j].buf == r->buf && col.recs[j].kind == CUPTI_ACTIVITY_KIND_RUNTIME)
                    ck_assert_uint_eq(col.recs[j].u.a.threadId, r->u.a.threadId);
        } else {
            ck_assert_int_eq(seen[r->u.k.correlationId] & 2, 0);
            seen[r->u.k.correlationId] |= 2;
        }
    }
    for (int c = 1; c <= NTHREADS * PER_THREAD; c++)
        ck_assert_int_eq(seen[c], 3);
    free(seen);
}
END_TEST

START_TEST(test_global_buffer)
{
    uint8_t off = 0;
    size_t sz = sizeof off;

    ck_assert_int_eq(
        cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &sz, &off),
        CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    rq_size = 1u << 20; /* all fits in one */
    run_threads();
    fakecuda_synchronize(); /* the work has ended: its records complete */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(col.nbufs, 1);
    ck_assert_uint_eq(col.n, NTHREADS * PER_THREAD);
    ck_assert_int_eq(atomic_load(&requests), 1);
}
END_TEST

START_TEST(test_thread_exit_completes_its_buffer)
{
    pthread_t th;

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    ck_assert_int_eq(pthread_create(&th, NULL, launcher, (void *)(uintptr_t)0), 0);
    pthread_join(th, NULL);
    /* a full 64 KiB buffer (303 kernel records) goes by itself once its records are
     * complete; the rest, closed at the thread's exit, waits for a flush */
    ck_assert(wait_bufs(1, 10000));
    usleep(20000);
    ck_assert_uint_eq(nbufs(), 1);
    fakecuda_synchronize();
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(nbufs(), 2);
    ck_assert_uint_eq(nrecs(), PER_THREAD);
}
END_TEST

START_TEST(test_flush_from_callback_refused)
{
    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    atomic_store(&dn_flush, 1);
    fakecuda_launch_kernel(K0, 0, 1, 0, 0);
    fakecuda_synchronize(); /* the work has ended: its records complete */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_int_eq(col.flush_in_callback, CUPTI_ERROR_INVALID_OPERATION);
    atomic_store(&dn_flush, 0);
}
END_TEST

START_TEST(test_finalize_returns_buffers)
{
    struct fakecupti_stats st;

    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    rq_maxrec = 1; /* completed at once: slot is empty */
    fakecuda_launch_kernel(K0, 0, 1, 0, 0);
    rq_maxrec = 0;
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
    fakecuda_launch_kernel(K0, 0, 1, 0, 0); /* a partial buffer */
    ck_assert_int_eq(cuptiFinalize(), CUPTI_SUCCESS);
    ck_assert_uint_eq(col.nbufs, 2);
    ck_assert_uint_eq(col.n, 3);
    fakecupti_get_stats(&st);
    ck_assert_int_eq(st.callbacks_registered, 0);
    ck_assert_uint_eq(fakecuda_launch_kernel(K0, 0, 1, 0, 0), 0); /* all disabled */
}
END_TEST

/* ---------------------------------------------------------------- releases */

/* The record layouts and version numbers of the releases the double can be
 * (FAKECUPTI_CUDA), held against the facts, not against cuptimon's table
 * (proto/layouts.c, which tests/unit/test-layouts.c holds against these
 * structs): 11.8-13.0 from the installed headers (cupti_activity.h and
 * cupti_activity_deprecated.h: Kernel8 200 bytes, Kernel9 208, Kernel10
 * 216); 13.1-13.3 from ../shared/reference/cupti-layouts-13x.md, that is
 * rust-bindgen's layout of the real CUPTI 13.2.1 and 13.3.0 headers
 * (tinrab/singe, singe-cupti-sys/src/cupti_sys_130201.rs and
 * cupti_sys_130300.rs): Kernel11 224 bytes with priority at 216, Kernel12
 * 232 with executionModel at 224.  Version numbers: cupti_version.h (12.0
 * and 12.1 report 18, as 11.8 does). */
static const struct fact {
    const char *cuda;
    uint32_t version;
    size_t kernel, memcpy, memset;
    size_t priority, execution_model; /* offsets; 0: not in that struct */
} facts[] = {
    {"11.8", 18, 200, 88, 88, 0, 0},         {"12.0", 18, 208, 88, 88, 0, 0},
    {"12.1", 18, 208, 88, 88, 0, 0},         {"12.2", 20, 208, 88, 88, 0, 0},
    {"12.8", 26, 208, 96, 88, 0, 0},         {"13.0", 130000, 216, 96, 88, 0, 0},
    {"13.1", 130100, 224, 96, 88, 216, 0},   {"13.2", 130200, 224, 96, 88, 216, 0},
    {"13.2.1", 130201, 224, 96, 88, 216, 0}, {"13.3", 130300, 232, 96, 88, 216, 224},
};

START_TEST(test_future_structs_are_the_headers)
{
    ck_assert_uint_eq(sizeof(CUpti_ActivityKernel8), 200);
    ck_assert_uint_eq(sizeof(CUpti_ActivityKernel9), 208);
    ck_assert_uint_eq(sizeof(fc_ActivityKernel11), 224);
    ck_assert_uint_eq(offsetof(fc_ActivityKernel11, isDeviceLaunched), 208);
    ck_assert_uint_eq(offsetof(fc_ActivityKernel11, priority), 216);
    ck_assert_uint_eq(sizeof(fc_ActivityKernel12), 232);
    ck_assert_uint_eq(offsetof(fc_ActivityKernel12, priority), 216);
    ck_assert_uint_eq(offsetof(fc_ActivityKernel12, executionModel), 224);
    /* Kernel11 is Kernel10 up to isDeviceLaunched. */
    ck_assert_uint_eq(offsetof(fc_ActivityKernel11, maxActiveClusters),
                      offsetof(CUpti_ActivityKernel10, maxActiveClusters));
    ck_assert_uint_eq(offsetof(fc_ActivityKernel11, isDeviceLaunched),
                      offsetof(CUpti_ActivityKernel10, isDeviceLaunched));
}
END_TEST

static struct {
    pthread_mutex_t mu;
    size_t stride[CUPTI_ACTIVITY_KIND_COUNT]; /* CUPTI's walk: distance to the next record */
    int conflict;
    uint8_t kernel[512]; /* the first kernel record */
    size_t kernel_len;
} walk = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void note_stride(uint32_t kind, size_t d)
{
    if (kind >= CUPTI_ACTIVITY_KIND_COUNT)
        return;
    if (walk.stride[kind] == 0)
        walk.stride[kind] = d;
    else if (walk.stride[kind] != d)
        walk.conflict = 1;
}

static void CUPTIAPI dn_stride(CUcontext ctx, uint32_t streamId, uint8_t *buffer, size_t size,
                               size_t validSize)
{
    CUpti_Activity *r = NULL, *prev = NULL;

    (void)ctx;
    (void)streamId;
    (void)size;
    pthread_mutex_lock(&walk.mu);
    while (cuptiActivityGetNextRecord(buffer, validSize, &r) == CUPTI_SUCCESS) {
        if (prev)
            note_stride(prev->kind, (size_t)((uint8_t *)r - (uint8_t *)prev));
        prev = r;
    }
    if (prev)
        note_stride(prev->kind, (size_t)(buffer + validSize - (uint8_t *)prev));
    r = NULL;
    while (walk.kernel_len == 0 &&
           cuptiActivityGetNextRecord(buffer, validSize, &r) == CUPTI_SUCCESS)
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            walk.kernel_len = walk.stride[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL];
            if (walk.kernel_len > sizeof walk.kernel)
                walk.kernel_len = sizeof walk.kernel;
            memcpy(walk.kernel, r, walk.kernel_len);
        }
    pthread_mutex_unlock(&walk.mu);
    free(buffer);
}

START_TEST(test_release_layouts_and_versions)
{
    for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++) {
        const struct fact *f = &facts[i];
        uint32_t v = 0;
        int32_t priority;
        uint32_t model;

        fakecupti_reset();
        memset(walk.stride, 0, sizeof walk.stride);
        walk.conflict = 0;
        walk.kernel_len = 0;
        setenv("FAKECUPTI_CUDA", f->cuda, 1);
        ck_assert_int_eq(cuptiGetVersion(&v), CUPTI_SUCCESS);
        ck_assert_msg(v == f->version, "CUDA %s: cuptiGetVersion %u, want %u", f->cuda, v,
                      f->version);
        ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn_stride), CUPTI_SUCCESS);
        enable_all();
        for (int j = 0; j < 3; j++) {
            ck_assert_uint_ne(fakecuda_launch_kernel(K0, 0, 5, 0, 0), 0);
            ck_assert_uint_ne(fakecuda_memcpy(4096, 1, 0, 5), 0);
            ck_assert_uint_ne(fakecuda_memset(4096, 0, 0, 5), 0);
        }
        fakecuda_synchronize();
        ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
        pthread_mutex_lock(&walk.mu);
        ck_assert_msg(!walk.conflict, "CUDA %s: one kind walked at two strides", f->cuda);
        ck_assert_msg(walk.stride[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] == f->kernel,
                      "CUDA %s: kernel records %zu bytes apart, want %zu", f->cuda,
                      walk.stride[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], f->kernel);
        ck_assert_uint_eq(walk.stride[CUPTI_ACTIVITY_KIND_MEMCPY], f->memcpy);
        ck_assert_uint_eq(walk.stride[CUPTI_ACTIVITY_KIND_MEMSET], f->memset);
        ck_assert_uint_eq(walk.stride[CUPTI_ACTIVITY_KIND_RUNTIME], 40);
        ck_assert_uint_eq(walk.stride[CUPTI_ACTIVITY_KIND_DRIVER], 40);
        /* The fields a release added are where the facts put them: the
         * double gives a priority of -1 - stream and executionModel 1. */
        ck_assert_uint_eq(walk.kernel_len, f->kernel);
        if (f->priority) {
            memcpy(&priority, walk.kernel + f->priority, 4);
            ck_assert_int_eq(priority, -1 - 5);
        }
        if (f->execution_model) {
            memcpy(&model, walk.kernel + f->execution_model, 4);
            ck_assert_uint_eq(model, 1);
        }
        pthread_mutex_unlock(&walk.mu);
    }
}
END_TEST

/* CUPTI 13.2's cuptiActivityGetStructSize, as NVIDIA's reference describes
 * it: version 0 is the running CUPTI, another 13.x version that one's, an
 * older version CUPTI_ERROR_NOT_SUPPORTED. */
START_TEST(test_struct_size)
{
    size_t sz = 0;

    setenv("FAKECUPTI_CUDA", "13.2", 1);
    ck_assert_int_eq(cuptiActivityGetStructSize(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 0, &sz),
                     CUPTI_SUCCESS);
    ck_assert_uint_eq(sz, 224);
    ck_assert_int_eq(cuptiActivityGetStructSize(CUPTI_ACTIVITY_KIND_KERNEL, 130300, &sz),
                     CUPTI_SUCCESS);
    ck_assert_uint_eq(sz, 232);
    ck_assert_int_eq(cuptiActivityGetStructSize(CUPTI_ACTIVITY_KIND_MEMCPY, 0, &sz), CUPTI_SUCCESS);
    ck_assert_uint_eq(sz, 96);
    ck_assert_int_eq(cuptiActivityGetStructSize(CUPTI_ACTIVITY_KIND_RUNTIME, 0, &sz),
                     CUPTI_SUCCESS);
    ck_assert_uint_eq(sz, 40);
    ck_assert_int_eq(cuptiActivityGetStructSize(CUPTI_ACTIVITY_KIND_MEMCPY, 26, &sz),
                     CUPTI_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(cuptiActivityGetStructSize(CUPTI_ACTIVITY_KIND_MEMCPY, 0, NULL),
                     CUPTI_ERROR_INVALID_PARAMETER);
    /* Before 13.2 there is no such entry point. */
    setenv("FAKECUPTI_CUDA", "13.1", 1);
    ck_assert_int_eq(cuptiActivityGetStructSize(CUPTI_ACTIVITY_KIND_MEMCPY, 0, &sz),
                     CUPTI_ERROR_API_NOT_IMPLEMENTED);
}
END_TEST

/* The correlation id of a collected record, 0 for kinds without one. */
static uint32_t rec_corr(const struct rec *x)
{
    switch (x->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return x->u.k.correlationId;
    case CUPTI_ACTIVITY_KIND_MEMCPY: return x->u.m.correlationId;
    case CUPTI_ACTIVITY_KIND_MEMSET: return x->u.s.correlationId;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return x->u.a.correlationId;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return x->u.e.correlationId;
    default: return 0;
    }
}

/* Every record of correlation corr, by kind: the kinds' bits. */
static uint64_t kinds_of(uint32_t corr)
{
    uint64_t k = 0;
    for (size_t i = 0; i < col.n; i++)
        if (rec_corr(&col.recs[i]) == corr)
            k |= 1ull << col.recs[i].kind;
    return k;
}

/* Kernels, copies and memsets numbered from their own counters; the
 * memsets' counter wraps at 2^32 to 1, never 0. */
START_TEST(test_corr_per_kind_ranges)
{
    uint32_t k[10], c[10], m[10];
    struct fakecupti_stats st;

    setenv("FAKECUPTI_CORR_RANGES", "1000,2000000000,4294967290", 1);
    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    enable_all();
    for (int i = 0; i < 10; i++) {
        k[i] = fakecuda_launch_kernel(K0, 0, 1, 0, 0);
        c[i] = fakecuda_memcpy(4096, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 0, 1);
        m[i] = fakecuda_memset(4096, 0, 0, 1);
    }
    fakecuda_synchronize(); /* the work has ended: its records complete */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    for (int i = 0; i < 10; i++) {
        uint32_t want_m = i < 6 ? 4294967290u + (uint32_t)i : (uint32_t)i - 5;
        ck_assert_uint_eq(k[i], 1000 + (uint32_t)i);
        ck_assert_uint_eq(c[i], 2000000000u + (uint32_t)i);
        ck_assert_uint_eq(m[i], want_m);
        /* each launch's records carry its id */
        ck_assert_uint_eq(kinds_of(k[i]), 1ull << CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL |
                                              1ull << CUPTI_ACTIVITY_KIND_RUNTIME |
                                              1ull << CUPTI_ACTIVITY_KIND_DRIVER);
        ck_assert_uint_eq(kinds_of(c[i]), 1ull << CUPTI_ACTIVITY_KIND_MEMCPY |
                                              1ull << CUPTI_ACTIVITY_KIND_RUNTIME |
                                              1ull << CUPTI_ACTIVITY_KIND_DRIVER);
        ck_assert_uint_eq(kinds_of(m[i]), 1ull << CUPTI_ACTIVITY_KIND_MEMSET |
                                              1ull << CUPTI_ACTIVITY_KIND_RUNTIME |
                                              1ull << CUPTI_ACTIVITY_KIND_DRIVER);
    }
    ck_assert_uint_eq(kinds_of(0), 0);
    fakecupti_get_stats(&st);
    ck_assert_uint_eq(st.last_correlation, 4);

    /* A bad value is refused by name and numbering stays one counter. */
    fakecupti_reset();
    setenv("FAKECUPTI_CORR_RANGES", "1000,0,5", 1);
    ck_assert_uint_eq(fakecuda_launch_kernel(K0, 0, 1, 0, 0), 0); /* nothing enabled */
    enable_all();
    ck_assert_uint_eq(fakecuda_launch_kernel(K0, 0, 1, 0, 0), 1);
    ck_assert_uint_eq(fakecuda_memset(64, 0, 0, 1), 2);
}
END_TEST

START_TEST(test_corr_start_wraps)
{
    uint32_t want[5] = {4294967294u, 4294967295u, 1, 2, 3};

    setenv("FAKECUPTI_CORR_START", "4294967294", 1);
    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    enable_all();
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq(i % 2 ? fakecuda_memcpy(64, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 0, 1)
                                : fakecuda_launch_kernel(K1, 0, 1, 0, 0),
                          want[i]);
    fakecuda_synchronize(); /* the work has ended: its records complete */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(col.n, 15);
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq(__builtin_popcountll(kinds_of(want[i])), 3);
}
END_TEST

START_TEST(test_corr_shuffled)
{
    uint32_t id[64];
    int seen[65] = {0}, out_of_order = 0;

    setenv("FAKECUPTI_CORR_SHUFFLE", "16", 1);
    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    enable_all();
    for (int i = 0; i < 64; i++) {
        id[i] = fakecuda_launch_kernel(K0, 0, 1, 0, 0);
        ck_assert_uint_ge(id[i], 1);
        ck_assert_uint_le(id[i], 64);
        /* a permutation inside each block of 16 launches */
        ck_assert_uint_eq((id[i] - 1) / 16, (uint32_t)i / 16);
        ck_assert_int_eq(seen[id[i]]++, 0);
        out_of_order += i > 0 && id[i] < id[i - 1];
    }
    ck_assert_int_ge(out_of_order, 16);
    fakecuda_synchronize(); /* the work has ended: its records complete */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    for (int i = 0; i < 64; i++)
        ck_assert_uint_eq(__builtin_popcountll(kinds_of(id[i])), 3);

    /* Not a power of two: in order, with a warning. */
    fakecupti_reset();
    setenv("FAKECUPTI_CORR_SHUFFLE", "12", 1);
    enable_all();
    for (uint32_t i = 1; i <= 20; i++)
        ck_assert_uint_eq(fakecuda_launch_kernel(K0, 0, 1, 0, 0), i);
}
END_TEST

/* Every third launch loses its API records (and its external
 * correlation, written with them), counted as CUPTI counts a record it
 * had no buffer for; its GPU record is kept. */
START_TEST(test_drop_api)
{
    struct fakecupti_stats st;
    size_t n = 0;
    uint32_t id[9];

    setenv("FAKECUPTI_DROP_API", "3", 1);
    ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
    enable_all();
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION), CUPTI_SUCCESS);
    ck_assert_int_eq(PUSH(CUSTOM0, 77), CUPTI_SUCCESS);
    for (int i = 0; i < 9; i++) {
        unsigned api = FAKECUDA_REC_RUNTIME | FAKECUDA_REC_DRIVER | FAKECUDA_REC_EXTCORR;
        id[i] = fakecuda_launch_kernel(K0, 0, 1, 0, 0);
        ck_assert_uint_eq(fakecuda_last_result(),
                          FAKECUDA_REC_GPU | (i % 3 == 2 ? api << FAKECUDA_DROPPED_SHIFT : api));
    }
    fakecuda_synchronize(); /* the work has ended: its records complete */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    for (int i = 0; i < 9; i++)
        ck_assert_uint_eq(kinds_of(id[i]),
                          i % 3 == 2 ? 1ull << CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                                     : 1ull << CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL |
                                           1ull << CUPTI_ACTIVITY_KIND_RUNTIME |
                                           1ull << CUPTI_ACTIVITY_KIND_DRIVER |
                                           1ull << CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
    fakecupti_get_stats(&st);
    ck_assert_uint_eq(st.records_dropped, 9);
    ck_assert_uint_eq(st.kernels, 9);
    ck_assert_uint_eq(st.runtime_api, 6);
    ck_assert_int_eq(cuptiActivityGetNumDroppedRecords(NULL, 0, &n), CUPTI_SUCCESS);
    ck_assert_uint_eq(n, 9);
}
END_TEST

/* Where a launch's runtime record lies against its nested driver record. */
static int runtime_before_driver(uint32_t corr)
{
    int rt = -1, drv = -1;
    for (size_t i = 0; i < col.n; i++) {
        if (rec_corr(&col.recs[i]) != corr)
            continue;
        if (col.recs[i].kind == CUPTI_ACTIVITY_KIND_RUNTIME)
            rt = (int)i;
        if (col.recs[i].kind == CUPTI_ACTIVITY_KIND_DRIVER)
            drv = (int)i;
    }
    ck_assert(rt >= 0 && drv >= 0);
    return rt < drv;
}

START_TEST(test_api_order)
{
    static const char *const orders[] = {NULL, "driver-first", "runtime-first", "alternate",
                                         "sideways"};
    for (size_t o = 0; o < sizeof orders / sizeof orders[0]; o++) {
        uint32_t id[6];
        teardown();
        setup();
        if (orders[o])
            setenv("FAKECUPTI_API_ORDER", orders[o], 1);
        ck_assert_int_eq(cuptiActivityRegisterCallbacks(rq, dn), CUPTI_SUCCESS);
        enable_all();
        for (int i = 0; i < 6; i++)
            id[i] = i % 2 ? fakecuda_memset(64, 0, 0, 1) : fakecuda_launch_kernel(K0, 0, 1, 0, 0);
        fakecuda_synchronize(); /* the work has ended: its records complete */
        ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
        for (int i = 0; i < 6; i++) {
            /* alternate: the second launch of each pair has its runtime record first */
            int want = o == 2 || (o == 3 && i % 2 == 1);
            ck_assert_msg(runtime_before_driver(id[i]) == want, "%s: launch %d",
                          orders[o] ? orders[o] : "(unset)", i);
        }
    }
}
END_TEST

START_TEST(test_init_errors)
{
    /* the once-per-process injection: a library without InitializeInjection */
    setenv("CUDA_INJECTION64_PATH", "/nonexistent/libnothing.so", 1);
    ck_assert_int_eq(fakecuda_init(), -1);
    unsetenv("CUDA_INJECTION64_PATH");
    ck_assert_int_eq(fakecuda_init(), -1); /* the first result sticks */
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("fakecupti");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_version_and_strings);
    tcase_add_test(tc, test_nothing_registered);
    tcase_add_test(tc, test_walk_records);
    tcase_add_test(tc, test_walk_errors);
    tcase_add_test(tc, test_drops);
    tcase_add_test(tc, test_flush_partial);
    tcase_add_test(tc, test_flush_waits_for_slow_completion);
    tcase_add_test(tc, test_full_buffers_complete_async);
    tcase_add_test(tc, test_plain_flush_holds_running_work);
    tcase_add_test(tc, test_forced_flush_loses_running_work);
    tcase_add_test(tc, test_full_buffer_waits_for_its_records);
    tcase_add_test(tc, test_held_buffers_behind_running_work);
    tcase_add_test(tc, test_open_buffer_stays_incomplete);
    tcase_add_test(tc, test_held_buffers_come_when_one_fills);
    tcase_add_test(tc, test_max_records);
    tcase_add_test(tc, test_zeroed_out_attribute);
    tcase_add_test(tc, test_attributes);
    tcase_add_test(tc, test_replace_callbacks);
    tcase_add_test(tc, test_external_correlation);
    tcase_add_test(tc, test_timestamp_callback);
    tcase_add_test(tc, test_runtime_api_filter);
    tcase_add_test(tc, test_kernel_kind_and_graphs);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_global_buffer);
    tcase_add_test(tc, test_thread_exit_completes_its_buffer);
    tcase_add_test(tc, test_flush_from_callback_refused);
    tcase_add_test(tc, test_finalize_returns_buffers);
    tcase_add_test(tc, test_future_structs_are_the_headers);
    tcase_add_test(tc, test_release_layouts_and_versions);
    tcase_add_test(tc, test_struct_size);
    tcase_add_test(tc, test_init_errors);
    tcase_add_test(tc, test_corr_per_kind_ranges);
    tcase_add_test(tc, test_corr_start_wraps);
    tcase_add_test(tc, test_corr_shuffled);
    tcase_add_test(tc, test_drop_api);
    tcase_add_test(tc, test_api_order);
    suite_add_tcase(s, tc);
    return s;
}
