/*
 * Unit test of the libcupti test double's CUPTI 13.2+ API
 * (tests/fakecupti/fakecupti-v2.c): the multi-subscriber rules and the
 * v1/v2 mixing errors, per-subscriber buffers, kinds, field selections and
 * external correlation, records laid out as each selection says, layouts
 * and kernel names valid only during the completion callback, 13.4's
 * pKindOptions, and cuptiActivityFlushAll flushing every subscriber (plain:
 * ended records only; forced: running ones with end 0).
 *
 * Every test starts from fakecupti_reset(), so the suite also runs with
 * CK_FORK=no; the tests that expect a fault fork a child of their own.
 */
#include "config.h"

#include "fakecupti.h"
#include "tests/unit/testlib.h"

#define CUPTIMON_CUPTI_ABI_V2_ONLY
#include "cupti-abi.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------------------------------------------------------- a v2 client */

#define MAXREC 20000

struct urec { /* one record as a subscriber received it, by field id */
    uint32_t kind;
    uint64_t f[48];
    uint8_t have[48];
    char name[64];
};

struct client {
    CUpti_SubscriberHandle h;
    struct urec *recs;
    size_t n;
    size_t buffers;
    int layouts_seen[64]; /* kinds with a layout in ppRecordLayouts */
    size_t layout_size[64];
    size_t num_layouts;
    int decline;
    /* what a careless client keeps past the callback */
    CUpti_ActivityRecordLayout **kept_layouts;
    const char *kept_name;
};

static struct client cl[3];

/* Each client has its own request callback, so its buffers are tagged. */
#define RQ(i)                                                                                      \
    static void CUPTIAPI rq##i(uint8_t **buffer, size_t *size, size_t *maxrec,                     \
                               CUpti_BufferCallbackRequestInfo *info)                              \
    {                                                                                              \
        (void)info;                                                                                \
        *maxrec = 0;                                                                               \
        if (cl[i].decline) {                                                                       \
            *buffer = NULL;                                                                        \
            *size = 0;                                                                             \
            return;                                                                                \
        }                                                                                          \
        *buffer = aligned_alloc(8, 65536 + 8);                                                     \
        memset(*buffer, 0, 65536 + 8);                                                             \
        memcpy(*buffer + 65536, &(uint64_t){0xc11e47000 + i}, 8);                                  \
        *size = 65536;                                                                             \
    }
RQ(0)
RQ(1)
RQ(2)

static struct client *client_of_buffer(uint8_t *buf)
{
    uint64_t tag;
    memcpy(&tag, buf + 65536, 8);
    return tag >= 0xc11e47000 && tag < 0xc11e47003 ? &cl[tag - 0xc11e47000] : NULL;
}

static uint64_t rd(const uint8_t *p, size_t w)
{
    uint64_t x = 0;
    memcpy(&x, p, w);
    return x;
}

static void CUPTIAPI done(uint8_t *buffer, size_t size, size_t valid,
                          CUpti_BufferCallbackCompleteInfo *info)
{
    struct client *c = client_of_buffer(buffer);
    (void)size;
    ck_assert_ptr_nonnull(c);
    c->buffers++;
    c->num_layouts = info->numRecordLayouts;
    for (size_t k = 0; k < info->numRecordLayouts && k < 64; k++)
        if (info->ppRecordLayouts[k]) {
            c->layouts_seen[k] = 1;
            c->layout_size[k] = info->ppRecordLayouts[k]->recordSize;
        }
    c->kept_layouts = info->ppRecordLayouts;
    if (info->numRecordLayouts == 0) { /* 13.2: no layouts to read the records by */
        free(buffer);
        return;
    }
    for (size_t off = 0; off < valid;) {
        uint32_t kind = (uint32_t)rd(buffer + off, 4);
        ck_assert_uint_lt(kind, info->numRecordLayouts);
        const CUpti_ActivityRecordLayout *l = info->ppRecordLayouts[kind];
        ck_assert_ptr_nonnull(l);
        ck_assert_uint_lt(c->n, MAXREC);
        struct urec *r = &c->recs[c->n++];
        memset(r, 0, sizeof *r);
        r->kind = kind;
        for (size_t i = 0; i < l->numFields; i++) {
            const CUpti_ActivityFieldLayoutEntry *e = &l->pEntries[i];
            ck_assert_uint_le(e->offset + e->size, l->recordSize);
            r->f[e->fieldId] = rd(buffer + off + e->offset, e->size);
            r->have[e->fieldId] = (uint8_t)e->size;
        }
        if ((kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || kind == CUPTI_ACTIVITY_KIND_KERNEL) &&
            r->have[KERNEL_FIELD_NAME] && r->f[KERNEL_FIELD_NAME]) {
            const char *nm = (const char *)(uintptr_t)r->f[KERNEL_FIELD_NAME];
            size_t len = strnlen(nm, sizeof r->name - 1); /* readable now */
            memcpy(r->name, nm, len);
            r->name[len] = '\0';
            c->kept_name = nm;
        }
        ck_assert_uint_eq(l->recordSize % 8, 0);
        off += l->recordSize;
    }
    free(buffer);
}

static CUptiResult subscribe(int i, const char *name, int allow)
{
    CUpti_SubscriberParams_13_2 p = {
        .structSize = sizeof p, .subscriberName = name, .allowMultipleSubscribers = (uint8_t)allow};
    return cuptiSubscribe_v2(&cl[i].h, NULL, NULL, (CUpti_SubscriberParams *)(void *)&p);
}

static void reg(int i)
{
    static CUpti_BuffersCallbackRequestFunc_v2 const rqs[] = {rq0, rq1, rq2};
    uint8_t one = 1;
    size_t sz = 1;
    ck_assert_int_eq(cuptiActivityRegisterCallbacks_v2(cl[i].h, rqs[i], done), CUPTI_SUCCESS);
    ck_assert_int_eq(
        cuptiActivitySetAttribute_v2(
            cl[i].h, (CUpti_ActivityAttribute)CUPTI_ACTIVITY_ATTR_USER_DEFINED_RECORDS, &sz, &one),
        CUPTI_SUCCESS);
}

static CUptiResult enable(int i, CUpti_ActivityKind kind, const int *ids, size_t n)
{
    CUpti_ActivityConfig c = {.structSize = CUPTIMON_ACTIVITY_CONFIG_SIZE_13_2};
    c.fieldSelection = (CUpti_ActivityFieldSelection){
        .structSize = sizeof c.fieldSelection, .numFields = n, .pFieldIds = (int *)ids};
    return cuptiActivityEnable_v2(cl[i].h, kind, &c);
}

static void setup(void)
{
    fakecupti_reset();
    unsetenv("FAKECUPTI_UDR_ORDER");
    unsetenv("FAKECUPTI_UDR_WIDTHS");
    unsetenv("FAKECUPTI_HW_TRACE");
    unsetenv("FAKECUPTI_V2_FAIL");
    setenv("FAKECUPTI_VERSION", "130300", 1);
    for (int i = 0; i < 3; i++) {
        free(cl[i].recs);
        memset(&cl[i], 0, sizeof cl[i]);
        cl[i].recs = calloc(MAXREC, sizeof *cl[i].recs);
    }
}

static void teardown(void)
{
    fakecupti_reset();
    unsetenv("FAKECUPTI_VERSION");
}

static const int k_sel_a[] = {KERNEL_FIELD_KIND, KERNEL_FIELD_START, KERNEL_FIELD_END,
                              KERNEL_FIELD_CORRELATION_ID, KERNEL_FIELD_NAME};
static const int k_sel_b[] = {KERNEL_FIELD_KIND, KERNEL_FIELD_GRID_X, KERNEL_FIELD_CORRELATION_ID,
                              KERNEL_FIELD_STREAM_ID};
static const int m_sel_b[] = {MEMCPY_FIELD_KIND, MEMCPY_FIELD_BYTES, MEMCPY_FIELD_CORRELATION_ID};

/* ---------------------------------------------------------------- tests */

START_TEST(test_subscriber_rules)
{
    size_t sz = 1;
    uint8_t state = 9;
    char old[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = "";
    ck_assert_int_eq(cuptiActivityGetAttribute_v2(
                         NULL,
                         (CUpti_ActivityAttribute)CUPTI_ACTIVITY_ATTR_MULTIPLE_SUBSCRIBER_STATE,
                         &sz, &state),
                     CUPTI_SUCCESS);
    ck_assert_uint_eq(state, 2); /* nobody decided yet */
    ck_assert_int_eq(subscribe(0, "first", 1), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityGetAttribute_v2(
                         NULL,
                         (CUpti_ActivityAttribute)CUPTI_ACTIVITY_ATTR_MULTIPLE_SUBSCRIBER_STATE,
                         &sz, &state),
                     CUPTI_SUCCESS);
    ck_assert_uint_eq(state, 1);
    ck_assert_int_eq(subscribe(1, "second", 1), CUPTI_SUCCESS);
    /* Every subscriber must pass the same value. */
    CUpti_SubscriberParams_13_2 p = {.structSize = sizeof p,
                                     .subscriberName = "third",
                                     .oldSubscriberName = old,
                                     .oldSubscriberSize = sizeof old};
    ck_assert_int_eq(cuptiSubscribe_v2(&cl[2].h, NULL, NULL, (void *)&p),
                     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    ck_assert_str_eq(old, "CUPTI for first");
    /* The state is not settable. */
    ck_assert_int_eq(cuptiActivitySetAttribute_v2(
                         NULL,
                         (CUpti_ActivityAttribute)CUPTI_ACTIVITY_ATTR_MULTIPLE_SUBSCRIBER_STATE,
                         &sz, &state),
                     CUPTI_ERROR_INVALID_PARAMETER);

    /* A first subscriber that disallows others closes the door. */
    fakecupti_reset();
    ck_assert_int_eq(subscribe(0, "alone", 0), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityGetAttribute_v2(
                         NULL,
                         (CUpti_ActivityAttribute)CUPTI_ACTIVITY_ATTR_MULTIPLE_SUBSCRIBER_STATE,
                         &sz, &state),
                     CUPTI_SUCCESS);
    ck_assert_uint_eq(state, 0);
    p.allowMultipleSubscribers = 1;
    old[0] = '\0';
    ck_assert_int_eq(cuptiSubscribe_v2(&cl[1].h, NULL, NULL, (void *)&p),
                     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    ck_assert_str_eq(old, "CUPTI for alone");

    /* A 13.0-sized parameter block (no allowMultipleSubscribers) or none
     * at all disallows. */
    fakecupti_reset();
    ck_assert_int_eq(cuptiSubscribe_v2(&cl[0].h, NULL, NULL, NULL), CUPTI_SUCCESS);
    ck_assert_int_eq(subscribe(1, "late", 1), CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
}
END_TEST

START_TEST(test_no_mixing)
{
    uint64_t ts;
    size_t dropped;
    ck_assert_int_eq(subscribe(0, "v2", 1), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
                     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    ck_assert_int_eq(cuptiActivityRegisterCallbacks((CUpti_BuffersCallbackRequestFunc)1,
                                                    (CUpti_BuffersCallbackCompleteFunc)1),
                     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    ck_assert_int_eq(cuptiGetTimestamp(&ts), CUPTI_ERROR_NOT_COMPATIBLE);
    ck_assert_int_eq(
        cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 1),
        CUPTI_ERROR_NOT_COMPATIBLE);
    ck_assert_int_eq(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped),
                     CUPTI_ERROR_NOT_COMPATIBLE);
    ck_assert_int_eq(cuptiActivityEnableRuntimeApi(1, 0), CUPTI_ERROR_NOT_COMPATIBLE);
    ck_assert_int_eq(cuptiGetTimestamp_v2(cl[0].h, &ts), CUPTI_SUCCESS);
    /* No way back once a subscriber existed. */
    ck_assert_int_eq(cuptiUnsubscribe(cl[0].h), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
                     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);

    /* The other way: the global activity API first. */
    fakecupti_reset();
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    char old[64] = "";
    CUpti_SubscriberParams_13_2 p = {.structSize = sizeof p,
                                     .subscriberName = "late",
                                     .oldSubscriberName = old,
                                     .oldSubscriberSize = sizeof old,
                                     .allowMultipleSubscribers = 1};
    ck_assert_int_eq(cuptiSubscribe_v2(&cl[0].h, NULL, NULL, (void *)&p),
                     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    ck_assert_str_ne(old, "");
}
END_TEST

START_TEST(test_versions)
{
    uint64_t ts;
    /* 13.0: none of the activity _v2 calls. */
    setenv("FAKECUPTI_VERSION", "130001", 1);
    ck_assert_int_eq(subscribe(0, "x", 1), CUPTI_SUCCESS); /* 13.0's callback subscriber */
    ck_assert_int_eq(enable(0, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, k_sel_a, 5),
                     CUPTI_ERROR_NOT_SUPPORTED);
    /* 13.2: subscribers and UDR (beta), but no GetTimestamp_v2 etc., and
     * no layouts in the completion callback. */
    fakecupti_reset();
    setenv("FAKECUPTI_VERSION", "130201", 1);
    ck_assert_int_eq(subscribe(0, "x", 1), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiGetTimestamp_v2(cl[0].h, &ts), CUPTI_ERROR_NOT_SUPPORTED);
    reg(0);
    ck_assert_int_eq(enable(0, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, k_sel_a, 5), CUPTI_SUCCESS);
    fakecuda_launch_kernel("k", 0, 1, 0, 0);
    fakecuda_synchronize();
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(cl[0].buffers, 1);
    ck_assert_uint_eq(cl[0].num_layouts, 0);
}
END_TEST

START_TEST(test_selection_rules)
{
    static const int no_kind_first[] = {KERNEL_FIELD_START, KERNEL_FIELD_KIND};
    static const int dup[] = {KERNEL_FIELD_KIND, KERNEL_FIELD_START, KERNEL_FIELD_START};
    static const int unknown[] = {KERNEL_FIELD_KIND, 99};
    uint8_t one = 1;
    size_t sz = 1;
    ck_assert_int_eq(subscribe(0, "x", 1), CUPTI_SUCCESS);
    reg(0);
    ck_assert_int_eq(enable(0, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, no_kind_first, 2),
                     CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(enable(0, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, dup, 3),
                     CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(enable(0, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, unknown, 2),
                     CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(enable(0, CUPTI_ACTIVITY_KIND_MODULE, NULL, 0), CUPTI_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(enable(0, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, k_sel_a, 5), CUPTI_SUCCESS);
    /* UDR on before any kind is enabled, not after. */
    ck_assert_int_eq(
        cuptiActivitySetAttribute_v2(
            cl[0].h, (CUpti_ActivityAttribute)CUPTI_ACTIVITY_ATTR_USER_DEFINED_RECORDS, &sz, &one),
        CUPTI_ERROR_INVALID_OPERATION);
    /* HES is fixed once a kind is on. */
    setenv("FAKECUPTI_HW_TRACE", "1", 1);
    ck_assert_int_eq(cuptiActivitySetAttribute_v2(
                         NULL, (CUpti_ActivityAttribute)CUPTI_ACTIVITY_ATTR_ENABLE_HES, &sz, &one),
                     CUPTI_ERROR_INVALID_OPERATION);
}
END_TEST

START_TEST(test_hes_attribute)
{
    uint8_t one = 1, got = 0;
    size_t sz = 1;
    ck_assert_int_eq(cuptiActivitySetAttribute_v2(
                         NULL, (CUpti_ActivityAttribute)CUPTI_ACTIVITY_ATTR_ENABLE_HES, &sz, &one),
                     CUPTI_ERROR_NOT_SUPPORTED); /* a Hopper */
    setenv("FAKECUPTI_HW_TRACE", "mig", 1);
    ck_assert_int_eq(cuptiActivitySetAttribute_v2(
                         NULL, (CUpti_ActivityAttribute)CUPTI_ACTIVITY_ATTR_ENABLE_HES, &sz, &one),
                     CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED);
    setenv("FAKECUPTI_HW_TRACE", "1", 1);
    ck_assert_int_eq(cuptiActivitySetAttribute_v2(
                         NULL, (CUpti_ActivityAttribute)CUPTI_ACTIVITY_ATTR_ENABLE_HES, &sz, &one),
                     CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityGetAttribute_v2(
                         NULL, (CUpti_ActivityAttribute)CUPTI_ACTIVITY_ATTR_ENABLE_HES, &sz, &got),
                     CUPTI_SUCCESS);
    ck_assert_uint_eq(got, 1);
}
END_TEST

/* Two subscribers with their own kinds and selections: each gets exactly
 * its records, laid out as it selected. */
START_TEST(test_two_subscribers_own_records)
{
    enum {
        N = 300
    };
    static const char *names[] = {"_Z3fooPf", "_Z3barPf"};
    uint32_t corr[N];
    ck_assert_int_eq(subscribe(0, "a", 1), CUPTI_SUCCESS);
    ck_assert_int_eq(subscribe(1, "b", 1), CUPTI_SUCCESS);
    reg(0);
    reg(1);
    ck_assert_int_eq(enable(0, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, k_sel_a, 5), CUPTI_SUCCESS);
    ck_assert_int_eq(enable(1, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, k_sel_b, 4), CUPTI_SUCCESS);
    ck_assert_int_eq(enable(1, CUPTI_ACTIVITY_KIND_MEMCPY, m_sel_b, 3), CUPTI_SUCCESS);
    for (int i = 0; i < N; i++) {
        corr[i] = fakecuda_launch_kernel(names[i % 2], 0, 1 + i % 3, 0, 0);
        ck_assert(fakecuda_last_result() & FAKECUDA_REC_GPU);
        if (i % 10 == 0)
            fakecuda_memcpy(4096 * (1 + i % 3), CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 0, 1);
    }
    fakecuda_synchronize();
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);

    /* a: kernels only, its five fields; KIND, START, END, CORRELATION_ID
     * (64-bit, as the header documents) and NAME in selection order. */
    ck_assert_uint_eq(cl[0].n, N);
    ck_assert(cl[0].layouts_seen[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]);
    ck_assert(!cl[0].layouts_seen[CUPTI_ACTIVITY_KIND_MEMCPY]);
    ck_assert_uint_eq(cl[0].layout_size[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 40);
    for (int i = 0; i < N; i++) {
        const struct urec *r = &cl[0].recs[i];
        ck_assert_uint_eq(r->kind, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        ck_assert_uint_eq(r->f[KERNEL_FIELD_CORRELATION_ID], corr[i]);
        ck_assert_uint_eq(r->have[KERNEL_FIELD_CORRELATION_ID], 8);
        ck_assert_uint_lt(r->f[KERNEL_FIELD_START], r->f[KERNEL_FIELD_END]);
        ck_assert_str_eq(r->name, names[i % 2]);
        ck_assert(!r->have[KERNEL_FIELD_GRID_X]);
        /* CUPTI's own copy of the name, not the application's pointer. */
        ck_assert_uint_ne(r->f[KERNEL_FIELD_NAME], (uint64_t)(uintptr_t)names[i % 2]);
    }
    /* b: kernels and copies, its fields only. */
    ck_assert_uint_eq(cl[1].n, N + N / 10);
    ck_assert(cl[1].layouts_seen[CUPTI_ACTIVITY_KIND_MEMCPY]);
    ck_assert_uint_eq(cl[1].layout_size[CUPTI_ACTIVITY_KIND_MEMCPY], 24);
    size_t k = 0, m = 0;
    for (size_t i = 0; i < cl[1].n; i++) {
        const struct urec *r = &cl[1].recs[i];
        if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            ck_assert_uint_eq(r->f[MEMCPY_FIELD_BYTES], 4096 * (1 + (m * 10) % 3));
            m++;
            continue;
        }
        ck_assert_uint_eq(r->f[KERNEL_FIELD_CORRELATION_ID], corr[k]);
        ck_assert_uint_eq(r->f[KERNEL_FIELD_STREAM_ID], 1 + k % 3);
        ck_assert_uint_gt(r->f[KERNEL_FIELD_GRID_X], 0);
        ck_assert(!r->have[KERNEL_FIELD_START] && !r->have[KERNEL_FIELD_NAME]);
        k++;
    }
    ck_assert_uint_eq(k, N);
    ck_assert_uint_eq(m, N / 10);
    struct fakecupti_stats st;
    ck_assert_int_eq(fakecupti_get_subscriber_stats("b", &st), 0);
    ck_assert_uint_eq(st.kernels, N);
    ck_assert_uint_eq(st.memcpys, N / 10);
    fakecupti_get_stats(&st); /* the first subscriber's */
    ck_assert_uint_eq(st.kernels, N);
    ck_assert_uint_eq(st.memcpys, 0);
}
END_TEST

START_TEST(test_field_order_and_widths)
{
    setenv("FAKECUPTI_UDR_ORDER", "id", 1);
    setenv("FAKECUPTI_UDR_WIDTHS", "struct", 1);
    ck_assert_int_eq(subscribe(0, "x", 1), CUPTI_SUCCESS);
    reg(0);
    static const int sel[] = {KERNEL_FIELD_KIND, KERNEL_FIELD_CORRELATION_ID, KERNEL_FIELD_START};
    ck_assert_int_eq(enable(0, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, sel, 3), CUPTI_SUCCESS);
    uint32_t c = fakecuda_launch_kernel("k", 0, 1, 0, 0);
    fakecuda_synchronize();
    cuptiActivityFlushAll(0);
    ck_assert_uint_eq(cl[0].n, 1);
    /* id order puts START (7) before CORRELATION_ID (22); the struct's
     * 32-bit correlation id: 4 + pad 4 + 8 + 4 -> 24. */
    ck_assert_uint_eq(cl[0].layout_size[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 24);
    ck_assert_uint_eq(cl[0].recs[0].have[KERNEL_FIELD_CORRELATION_ID], 4);
    ck_assert_uint_eq(cl[0].recs[0].f[KERNEL_FIELD_CORRELATION_ID], c);
}
END_TEST

/* A client that keeps ppRecordLayouts or a kernel name past the callback
 * faults when it reads them. */
static void keeper_reads(int what)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        volatile uint64_t x = 0;
        if (what == 0)
            x = cl[0].kept_layouts[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]->recordSize;
        else
            x = (uint64_t)cl[0].kept_name[0];
        (void)x;
        _exit(0); /* it did not fault: the test fails */
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    /* A fault: SIGSEGV, or under AddressSanitizer its report and abort. */
    ck_assert_msg(!(WIFEXITED(st) && WEXITSTATUS(st) == 0),
                  "reading a kept %s after the callback did not fault (status 0x%x)",
                  what ? "kernel name" : "ppRecordLayouts", st);
}

START_TEST(test_layouts_and_names_valid_in_callback_only)
{
    ck_assert_int_eq(subscribe(0, "x", 1), CUPTI_SUCCESS);
    reg(0);
    ck_assert_int_eq(enable(0, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, k_sel_a, 5), CUPTI_SUCCESS);
    fakecuda_launch_kernel("_Z6keeperv", 0, 1, 0, 0);
    fakecuda_synchronize();
    cuptiActivityFlushAll(0);
    ck_assert_uint_eq(cl[0].n, 1);
    ck_assert_str_eq(cl[0].recs[0].name, "_Z6keeperv");
    ck_assert_ptr_nonnull(cl[0].kept_layouts);
    ck_assert_ptr_nonnull(cl[0].kept_name);
    keeper_reads(0);
    keeper_reads(1);
}
END_TEST

START_TEST(test_external_correlation_per_subscriber)
{
    static const int api[] = {API_FIELD_KIND, API_FIELD_CBID, API_FIELD_THREAD_ID,
                              API_FIELD_CORRELATION_ID};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(subscribe(i, i ? "b" : "a", 1), CUPTI_SUCCESS);
        reg(i);
        ck_assert_int_eq(enable(i, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, k_sel_b, 4),
                         CUPTI_SUCCESS);
        ck_assert_int_eq(enable(i, CUPTI_ACTIVITY_KIND_RUNTIME, api, 4), CUPTI_SUCCESS);
        ck_assert_int_eq(enable(i, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, NULL, 0),
                         CUPTI_SUCCESS);
    }
    ck_assert_int_eq(cuptiActivityPushExternalCorrelationId_v2(
                         cl[0].h, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 100),
                     CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityPushExternalCorrelationId_v2(
                         cl[1].h, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 200),
                     CUPTI_SUCCESS);
    uint32_t c = fakecuda_launch_kernel("k", 0, 1, 0, 0);
    uint64_t last = 0;
    ck_assert_int_eq(cuptiActivityPopExternalCorrelationId_v2(
                         cl[0].h, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, &last),
                     CUPTI_SUCCESS);
    ck_assert_uint_eq(last, 100);
    ck_assert_int_eq(cuptiActivityPopExternalCorrelationId_v2(
                         cl[0].h, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, &last),
                     CUPTI_ERROR_QUEUE_EMPTY);
    fakecuda_synchronize();
    cuptiActivityFlushAll(0);
    for (int i = 0; i < 2; i++) {
        int ext = 0, rt = 0;
        for (size_t j = 0; j < cl[i].n; j++) {
            const struct urec *r = &cl[i].recs[j];
            if (r->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
                ext++;
                ck_assert_uint_eq(r->f[EXTERNAL_CORRELATION_FIELD_EXTERNAL_ID], i ? 200 : 100);
                ck_assert_uint_eq(r->f[EXTERNAL_CORRELATION_FIELD_EXTERNAL_KIND],
                                  i ? CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0
                                    : CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1);
                ck_assert_uint_eq(r->f[EXTERNAL_CORRELATION_FIELD_CORRELATION_ID], c);
            } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
                rt++;
                /* API thread and correlation ids are 64-bit in UDR. */
                ck_assert_uint_eq(r->have[API_FIELD_THREAD_ID], 8);
                ck_assert_uint_eq(r->have[API_FIELD_CORRELATION_ID], 8);
            }
        }
        ck_assert_int_eq(ext, 1);
        ck_assert_int_eq(rt, 1);
    }
}
END_TEST

START_TEST(test_kind_options_13_4)
{
    static const int api[] = {API_FIELD_KIND, API_FIELD_CBID};
    CUpti_CallbackId deny[] = {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000};
    CUpti_ActivityApiCbidOptions cbo = {
        .structSize = sizeof cbo, .pCbids = deny, .numCbids = 1, .enable = 0};
    CUpti_ActivityApiOptions ao = {.structSize = sizeof ao, .pCbidOptions = &cbo};
    CUpti_ActivityConfig c = {.structSize = CUPTIMON_ACTIVITY_CONFIG_SIZE_13_4,
                              .fieldSelection = {.structSize = sizeof(CUpti_ActivityFieldSelection),
                                                 .numFields = 2,
                                                 .pFieldIds = (int *)api},
                              .pKindOptions = &ao};
    /* 13.3: per-cbid filters are not compatible with UDR, and 13.3 knows
     * no pKindOptions: the launch's runtime record comes. */
    ck_assert_int_eq(subscribe(0, "x", 1), CUPTI_SUCCESS);
    reg(0);
    ck_assert_int_eq(cuptiActivityEnable_v2(cl[0].h, CUPTI_ACTIVITY_KIND_RUNTIME, &c),
                     CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiActivityEnableRuntimeApi_v2(cl[0].h, deny[0], 0),
                     CUPTI_ERROR_NOT_COMPATIBLE);
    fakecuda_launch_kernel("k", 0, 1, 0, 0);
    fakecuda_memcpy(64, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 0, 1);
    fakecuda_synchronize();
    cuptiActivityFlushAll(0);
    ck_assert_uint_eq(cl[0].n, 2);

    /* 13.4: the deny list holds. */
    fakecupti_reset();
    setenv("FAKECUPTI_VERSION", "130400", 1);
    memset(cl[0].recs, 0, sizeof *cl[0].recs);
    cl[0].n = 0;
    ck_assert_int_eq(subscribe(0, "x", 1), CUPTI_SUCCESS);
    reg(0);
    ck_assert_int_eq(cuptiActivityEnable_v2(cl[0].h, CUPTI_ACTIVITY_KIND_RUNTIME, &c),
                     CUPTI_SUCCESS);
    fakecuda_launch_kernel("k", 0, 1, 0, 0);
    fakecuda_memcpy(64, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 0, 1);
    fakecuda_synchronize();
    cuptiActivityFlushAll(0);
    ck_assert_uint_eq(cl[0].n, 1);
    ck_assert_uint_eq(cl[0].recs[0].f[API_FIELD_CBID],
                      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020);
    ck_assert_int_eq(cuptiActivityEnableRuntimeApi_v2(cl[0].h, deny[0], 1), CUPTI_SUCCESS);
}
END_TEST

START_TEST(test_flush_plain_and_forced)
{
    ck_assert_int_eq(subscribe(0, "a", 1), CUPTI_SUCCESS);
    ck_assert_int_eq(subscribe(1, "b", 1), CUPTI_SUCCESS);
    reg(0);
    reg(1);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(enable(i, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, k_sel_a, 5),
                         CUPTI_SUCCESS);
    struct fakecuda_kernel k = {
        .name = "long", .device = 0, .stream = 1, .duration_ns = 400000000ull};
    uint32_t c = fakecuda_launch_kernel_ex(&k);
    /* Still running: a plain flush returns neither subscriber's buffer. */
    ck_assert_int_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    ck_assert_uint_eq(cl[0].buffers + cl[1].buffers, 0);
    /* A forced one returns both, the kernel with end 0, once. */
    ck_assert_int_eq(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
    for (int i = 0; i < 2; i++) {
        ck_assert_uint_eq(cl[i].n, 1);
        ck_assert_uint_eq(cl[i].recs[0].f[KERNEL_FIELD_CORRELATION_ID], c);
        ck_assert_uint_eq(cl[i].recs[0].f[KERNEL_FIELD_END], 0);
    }
    fakecuda_synchronize();
    cuptiActivityFlushAll(0);
    ck_assert_uint_eq(cl[0].n + cl[1].n, 2);
}
END_TEST

START_TEST(test_latency_and_drops)
{
    uint8_t one = 1;
    size_t sz = 1, dropped = 0;
    static const int sel[] = {KERNEL_FIELD_KIND, KERNEL_FIELD_START, KERNEL_FIELD_QUEUED,
                              KERNEL_FIELD_SUBMITTED};
    ck_assert_int_eq(subscribe(0, "a", 1), CUPTI_SUCCESS);
    ck_assert_int_eq(subscribe(1, "b", 1), CUPTI_SUCCESS);
    reg(0);
    reg(1);
    ck_assert_int_eq(
        cuptiActivitySetAttribute_v2(
            cl[0].h, (CUpti_ActivityAttribute)CUPTI_ACTIVITY_ATTR_ENABLE_KERNEL_LATENCY_TIMESTAMPS,
            &sz, &one),
        CUPTI_SUCCESS);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(enable(i, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, sel, 4), CUPTI_SUCCESS);
    cl[1].decline = 1;
    for (int i = 0; i < 5; i++)
        fakecuda_launch_kernel("k", 0, 1, 0, 0);
    fakecuda_synchronize();
    cuptiActivityFlushAll(0);
    ck_assert_uint_eq(cl[0].n, 5);
    for (int i = 0; i < 5; i++) {
        const struct urec *r = &cl[0].recs[i];
        ck_assert_uint_gt(r->f[KERNEL_FIELD_QUEUED], 0);
        ck_assert_uint_le(r->f[KERNEL_FIELD_QUEUED], r->f[KERNEL_FIELD_SUBMITTED]);
        ck_assert_uint_le(r->f[KERNEL_FIELD_SUBMITTED], r->f[KERNEL_FIELD_START]);
    }
    /* b declined every buffer: its records are dropped and counted, a's
     * are not. */
    ck_assert_uint_eq(cl[1].n, 0);
    ck_assert_int_eq(cuptiActivityGetNumDroppedRecords_v2(cl[1].h, NULL, 0, &dropped),
                     CUPTI_SUCCESS);
    ck_assert_uint_eq(dropped, 5);
    ck_assert_int_eq(cuptiActivityGetNumDroppedRecords_v2(cl[0].h, NULL, 0, &dropped),
                     CUPTI_SUCCESS);
    ck_assert_uint_eq(dropped, 0);
    /* Without the attribute: unknown (0). */
    cl[1].decline = 0;
    fakecuda_launch_kernel("k", 0, 1, 0, 0);
    fakecuda_synchronize();
    cuptiActivityFlushAll(0);
    ck_assert_uint_eq(cl[1].n, 1);
    ck_assert_uint_eq(cl[1].recs[0].f[KERNEL_FIELD_QUEUED], 0);
}
END_TEST

START_TEST(test_next_record_v2)
{
    static uint8_t buf[4096];
    CUpti_Activity *r = NULL;
    int n = 0;
    ck_assert_int_eq(subscribe(0, "x", 1), CUPTI_SUCCESS);
    reg(0);
    ck_assert_int_eq(enable(0, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, k_sel_a, 5), CUPTI_SUCCESS);
    /* Three records of its 40-byte layout. */
    for (int i = 0; i < 3; i++)
        memcpy(buf + 40 * i, &(uint32_t){CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL}, 4);
    while (cuptiActivityGetNextRecord_v2(cl[0].h, buf, 120, &r) == CUPTI_SUCCESS) {
        ck_assert_ptr_eq(r, buf + 40 * n);
        n++;
    }
    ck_assert_int_eq(n, 3);
}
END_TEST

START_TEST(test_failure_injection)
{
    setenv("FAKECUPTI_V2_FAIL", "subscribe", 1);
    ck_assert_int_eq(subscribe(0, "x", 1), CUPTI_ERROR_UNKNOWN);
    /* A failed subscribe leaves the process free to use the global API. */
    ck_assert_int_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("fakecupti-v2");
    TCase *tc = tcase_create("v2");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_subscriber_rules);
    tcase_add_test(tc, test_no_mixing);
    tcase_add_test(tc, test_versions);
    tcase_add_test(tc, test_selection_rules);
    tcase_add_test(tc, test_hes_attribute);
    tcase_add_test(tc, test_two_subscribers_own_records);
    tcase_add_test(tc, test_field_order_and_widths);
    tcase_add_test(tc, test_layouts_and_names_valid_in_callback_only);
    tcase_add_test(tc, test_external_correlation_per_subscriber);
    tcase_add_test(tc, test_kind_options_13_4);
    tcase_add_test(tc, test_flush_plain_and_forced);
    tcase_add_test(tc, test_latency_and_drops);
    tcase_add_test(tc, test_next_record_v2);
    tcase_add_test(tc, test_failure_injection);
    suite_add_tcase(s, tc);
    return s;
}
