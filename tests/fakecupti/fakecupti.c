/*
 * fakecupti.c: libcupti-fake.so, a test double for CUPTI's activity API plus a fake
 * CUDA API that "launches" work and produces the records a real H200 would, in the
 * record layouts of the CUPTI release it is told to be (CUDA 12.0 to 13.5).  See
 * fakecupti.h for the behaviour, the environment knobs and the threading model.
 *
 * Locking: one recursive mutex (g.mu) guards all state.  It is held while the buffer
 * request callback runs (on the launching thread, like CUPTI), so a request callback may
 * call back into read-only entry points (GetNumDroppedRecords, GetAttribute, ...).  It is
 * NOT held while the completion callback runs on the completion thread.  Every exported
 * function is a thin wrapper over static helpers: internal calls never go through the
 * PLT, so a preloaded shim that interposes cupti* symbols only sees the application's
 * calls.
 */
#include "config.h"

#include "fakecupti.h"
#include "fakecupti-int.h"
#include "cupti-future.h"

#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FC_VERSION_DEFAULT 130001u
#define FC_AHEAD_NS        2000000ull /* a stream may run this far ahead of the clock */
#define FC_MIN_RECORD      sizeof(CUpti_ActivityExternalCorrelation)
#define FC_MAX_RECORD      sizeof(fc_ActivityKernel13)
#define FC_LOCAL_MEM_TOTAL 155713536u /* what the H200 capture reports */
#define FC_EXT_KINDS       CUPTI_EXTERNAL_CORRELATION_KIND_SIZE
#define FC_NATTR           (CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_DEVICE_GRAPHS + 1)

_Static_assert(sizeof(CUpti_ActivityKernel10) == 216, "CUpti_ActivityKernel10 layout");
_Static_assert(sizeof(CUpti_ActivityMemcpy6) == 96, "CUpti_ActivityMemcpy6 layout");
_Static_assert(sizeof(CUpti_ActivityMemset4) == 88, "CUpti_ActivityMemset4 layout");
_Static_assert(sizeof(CUpti_ActivityAPI) == 40, "CUpti_ActivityAPI layout");
_Static_assert(sizeof(CUpti_ActivityExternalCorrelation) == 24,
               "CUpti_ActivityExternalCorrelation layout");

/* ---------------------------------------------------------------- state */

struct fbuf {
    uint8_t *base;
    size_t size, valid, max_records, nrec;
    int sub;      /* a _v2 subscriber's buffer (its index + 1: fakecupti-v2.c), 0 the v1 client's */
    uint32_t tid; /* the thread that filled it (a _v2 subscriber's completion info) */
};

struct qnode {
    struct qnode *next;
    struct fbuf b;
    uint64_t seq;
    int full;  /* closed because it could take no more: the worker completes it */
    int ready; /* a flush found it complete (or forced it): deliver it */
    int swept; /* a buffer filled after a flush closed this one: the worker completes it */
};

/* A GPU record written incomplete.  Real CUPTI reserves a kernel's, copy's or
 * memset's record in the buffer at launch, with bit 31 of its kind set and its
 * timestamps 0, and fills it in once the work has ended and its buffer is closed (by a
 * flush, or full, when its worker completes it), in launch order: a record
 * whose work still runs holds back every later one, on any stream
 * (docs/gpu-runs/20261204-h200-probe). */
#define FC_INCOMPLETE 0x80000000u
struct pend {
    uint8_t *rec;        /* the record, in its buffer */
    const uint8_t *base; /* that buffer */
    uint64_t end_rt;     /* CLOCK_REALTIME at which its work has ended */
    uint64_t t[3];       /* its start, end and completed, to write then */
    uint16_t off[3];     /* where they go in the record (0: no such field) */
};

struct slot { /* slots[0]: the global buffer; 1..: per-thread buffers */
    struct fbuf b;
    int owned; /* a live thread uses this slot */
};

struct dropent {
    CUcontext ctx;
    uint32_t stream;
    size_t n;
};

struct streament {
    uint32_t device, stream;
    uint64_t tail_rt; /* CLOCK_REALTIME ns at which the stream's last work ends */
};

struct devent {
    uint32_t device;
    int64_t next_grid;
};

struct extstack {
    uint64_t *ids;
    size_t n, cap;
};

/* How correlation ids are numbered and API records written
 * (FAKECUPTI_CORR_*, FAKECUPTI_DROP_API, FAKECUPTI_API_ORDER,
 * FAKECUPTI_RT_LEAD_NS): read at the
 * first launch after load or fakecupti_reset. */
struct corrnum {
    int ready;
    int per_kind;          /* kernels, copies, memsets from counters 0, 1, 2; else all from 0 */
    uint32_t first[3];     /* each counter's first id */
    uint64_t block;        /* ids shuffled in blocks of this many (a power of two; 1: in order) */
    uint64_t drawn[3];     /* ids drawn from each counter */
    uint64_t drop_api;     /* every Nth launch with API records loses them (0: none) */
    int order;             /* 0 driver record first, 1 runtime first, 2 alternate */
    uint64_t rt_lead;      /* ns each runtime call spends before its nested driver call */
    uint64_t api_launches; /* launches with an API record on */
};

struct tstate {
    int init;
    int in_callback;
    size_t slot; /* per-thread slot index, 0 = none yet */
    uint32_t last_result;
    uint64_t last_ts;                    /* last API timestamp handed out on this thread */
    CUpti_TimestampCallbackFunc last_tb; /* ... and the timebase it was taken in */
    struct extstack ext[FC_EXT_KINDS];
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;

    CUpti_BuffersCallbackRequestFunc req;
    CUpti_BuffersCallbackCompleteFunc done;

    uint8_t enabled[CUPTI_ACTIVITY_KIND_COUNT];
    uint8_t rt_ovr[CUPTI_RUNTIME_TRACE_CBID_SIZE]; /* 0 follow the kind, 1 on, 2 off */
    uint8_t drv_ovr[CUPTI_DRIVER_TRACE_CBID_SIZE];
    uint64_t attr[FC_NATTR];
    CUpti_ActivityThreadIdType tid_type;

    struct slot *slots;
    size_t nslots;

    struct qnode *qhead, *qtail;
    uint64_t enq_seq, done_seq, inflight_seq;

    struct pend *pend; /* incomplete records, in launch order: [pend_head, pend_head + npend) */
    size_t pend_head, npend, cappend;

    pthread_t worker;
    int running, stop, shutting_down;
    uint32_t period_ms;

    struct dropent *drops;
    size_t ndrops, capdrops;
    struct streament *streams;
    size_t nstreams, capstreams;
    struct devent *devs;
    size_t ndevs, capdevs;

    struct corrnum cn;
    uint64_t rng;
    uint32_t pid;
    int log;
    int warned_dirty, warned_reject;
    struct fakecupti_stats st;
} g = {
    .mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP,
    .cv_work = PTHREAD_COND_INITIALIZER,
    .cv_done = PTHREAD_COND_INITIALIZER,
};

static CUpti_TimestampCallbackFunc _Atomic g_ts_cb;
static pthread_key_t g_key;
static __thread struct tstate t_self;

static const uint64_t attr_default[FC_NATTR] = {
    [CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE] = 3200000,
    [CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_CDP] = 8388608,
    [CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT] = 250,
    [CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_SIZE] = 25000,
    [CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_LIMIT] = 250,
    [CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER] = 0,
    [CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE] = 3,
    [CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE] = 3,
    [CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED] = 0,
    [CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER] = 1,
    [CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_DEVICE_GRAPHS] = 16777216,
};

/* value width of each attribute: size_t, except the three uint8_t flags */
static size_t attr_width(size_t a)
{
    switch (a) {
    case CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER:
    case CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED:
    case CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER: return sizeof(uint8_t);
    default: return sizeof(size_t);
    }
}

/* ---------------------------------------------------------------- helpers */

static void lock(void)
{
    pthread_mutex_lock(&g.mu);
}

static void unlock(void)
{
    pthread_mutex_unlock(&g.mu);
}

__attribute__((format(printf, 2, 3))) static void fc_log(int level, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    int n;

    if (g.log < level)
        return;
    n = snprintf(line, sizeof line, "fakecupti[%u]: ", (unsigned)getpid());
    if (n < 0 || (size_t)n >= sizeof line)
        return;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}

static int env_int(const char *name, long dflt, long *out)
{
    const char *s = getenv(name);
    char *end;
    long v;

    *out = dflt;
    if (!s || !*s)
        return 0;
    errno = 0;
    v = strtol(s, &end, 0);
    if (errno || *end || end == s)
        return -1;
    *out = v;
    return 1;
}

static uint64_t rt_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CUPTI's timestamp: the registered callback's, else CLOCK_REALTIME */
static uint64_t cupti_now(void)
{
    CUpti_TimestampCallbackFunc cb = atomic_load(&g_ts_cb);

    return cb ? cb() : rt_now();
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void thread_exit(void *p);

static struct tstate *self(void)
{
    struct tstate *t = &t_self;

    if (!t->init) {
        t->init = 1;
        pthread_setspecific(g_key, t);
    }
    return t;
}

/* An API timestamp, strictly increasing per thread (within one timebase). */
static uint64_t api_ts(struct tstate *t)
{
    CUpti_TimestampCallbackFunc cb = atomic_load(&g_ts_cb);
    uint64_t ts = cb ? cb() : rt_now();

    if (cb != t->last_tb) {
        t->last_tb = cb;
        t->last_ts = 0;
    }
    if (ts <= t->last_ts)
        ts = t->last_ts + 1;
    t->last_ts = ts;
    return ts;
}

static uint32_t thread_id(void)
{
    if (g.tid_type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
        return (uint32_t)syscall(SYS_gettid);
    return (uint32_t)(uintptr_t)pthread_self(); /* CUPTI's default: pthread_self() */
}

static uint64_t rnd_locked(void)
{
    /* xorshift64*: deterministic per process, good enough for jitter */
    uint64_t x = g.rng ? g.rng : 0x9e3779b97f4a7c15ull;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    g.rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u;

    for (; s && *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    size_t ncap;
    void *p;

    if (need <= *cap)
        return 0;
    ncap = *cap ? *cap * 2 : 8;
    while (ncap < need)
        ncap *= 2;
    p = realloc(*arr, ncap * elem);
    if (!p)
        return -1;
    memset((char *)p + *cap * elem, 0, (ncap - *cap) * elem);
    *arr = p;
    *cap = ncap;
    return 0;
}

/* Which struct version the emulated CUPTI writes for each GPU record kind,
 * by the version cuptiGetVersion reports (FAKECUPTI_VERSION), as each CUDA
 * release does: 12.x Kernel9 (Memcpy5 to 12.6, Memcpy6 from 12.8), 13.0
 * Kernel10, 13.1-13.2 Kernel11, 13.3 Kernel12, 13.4 and later (and any
 * version above 13.x: a "future" CUPTI) Kernel13/Memcpy7/Memset5.  API and
 * external-correlation records never changed.  A version number alone
 * cannot name every release: CUDA 11.8, 12.0 and 12.1 all report 18, and
 * 11.8 writes Kernel8; FAKECUPTI_CUDA names the release instead (fc_cudas). */
struct fc_generation {
    int kernel, memcpy, memset;
    size_t kernel_size, memcpy_size, memset_size;
};

/* The releases FAKECUPTI_CUDA may name: the number each one's
 * cuptiGetVersion reports (cupti_version.h; 12.0 and 12.1 report 18, the
 * number of 11.8, although the 12.0 header lists "v19 : CUDA Toolkit
 * 12.0") and the kernel, memcpy and memset structs it writes. */
static const struct fc_cuda {
    const char *name;
    uint32_t version;
    int kernel, memcpy, memset;
} fc_cudas[] = {
    {"11.8", 18, 8, 5, 4},        {"12.0", 18, 9, 5, 4},      {"12.1", 18, 9, 5, 4},
    {"12.2", 20, 9, 5, 4},        {"12.3", 21, 9, 5, 4},      {"12.4", 22, 9, 5, 4},
    {"12.5", 23, 9, 5, 4},        {"12.6", 24, 9, 5, 4},      {"12.8", 26, 9, 6, 4},
    {"12.9", 27, 9, 6, 4},        {"12.9.1", 28, 9, 6, 4},    {"13.0", 130000, 10, 6, 4},
    {"13.0.1", 130001, 10, 6, 4}, {"13.1", 130100, 11, 6, 4}, {"13.2", 130200, 11, 6, 4},
    {"13.2.1", 130201, 11, 6, 4}, {"13.3", 130300, 12, 6, 4}, {"13.4", 130400, 13, 7, 5},
    {"13.5", 130500, 13, 7, 5},
};

static uint32_t fc_version(void);

/* The release FAKECUPTI_CUDA names, or NULL (unset; an unknown name is
 * reported on stderr once and ignored). */
static const struct fc_cuda *fc_cuda(void)
{
    static _Atomic int warned;
    const char *v = getenv("FAKECUPTI_CUDA");

    if (v == NULL || *v == '\0')
        return NULL;
    for (size_t i = 0; i < sizeof fc_cudas / sizeof fc_cudas[0]; i++)
        if (strcmp(fc_cudas[i].name, v) == 0)
            return &fc_cudas[i];
    if (atomic_exchange(&warned, 1) == 0)
        fprintf(stderr,
                "fakecupti: FAKECUPTI_CUDA=%s is not a release the double knows (11.8, "
                "12.0 ... 13.5); FAKECUPTI_VERSION is used instead\n",
                v);
    return NULL;
}

static size_t kernel_size_of(int gen)
{
    switch (gen) {
    case 8: return sizeof(CUpti_ActivityKernel8);
    case 9: return sizeof(CUpti_ActivityKernel9);
    case 10: return sizeof(CUpti_ActivityKernel10);
    case 11: return sizeof(fc_ActivityKernel11);
    case 12: return sizeof(fc_ActivityKernel12);
    default: return sizeof(fc_ActivityKernel13);
    }
}

static struct fc_generation fc_gen_make(int kernel, int memcpy, int memset)
{
    struct fc_generation gen = {kernel, memcpy, memset, kernel_size_of(kernel), 0, 0};
    gen.memcpy_size = memcpy == 5   ? sizeof(CUpti_ActivityMemcpy5)
                      : memcpy == 6 ? sizeof(CUpti_ActivityMemcpy6)
                                    : sizeof(fc_ActivityMemcpy7);
    gen.memset_size = memset == 4 ? sizeof(CUpti_ActivityMemset4) : sizeof(fc_ActivityMemset5);
    return gen;
}

static struct fc_generation fc_gen_of(uint32_t v)
{
    if (v < 26)
        return fc_gen_make(9, 5, 4);
    if (v < 130000)
        return fc_gen_make(9, 6, 4);
    if (v < 130100)
        return fc_gen_make(10, 6, 4);
    if (v < 130300)
        return fc_gen_make(11, 6, 4);
    if (v < 130400)
        return fc_gen_make(12, 6, 4);
    return fc_gen_make(13, 7, 5);
}

/* The generation is fixed at the first record written or walked: buffers
 * already out must keep being walked by the sizes they were written with
 * (fakecupti_reset forgets it). */
static _Atomic uint32_t fixed; /* kernel | memcpy << 8 | memset << 16, 0 until fixed */

static struct fc_generation fc_gen(void)
{
    uint32_t v = atomic_load_explicit(&fixed, memory_order_relaxed);

    if (v == 0) {
        const struct fc_cuda *c = fc_cuda();
        struct fc_generation gen =
            c ? fc_gen_make(c->kernel, c->memcpy, c->memset) : fc_gen_of(fc_version());
        uint32_t want =
                     (uint32_t)gen.kernel | (uint32_t)gen.memcpy << 8 | (uint32_t)gen.memset << 16,
                 zero = 0;
        atomic_compare_exchange_strong(&fixed, &zero, want);
        v = atomic_load(&fixed);
    }
    return fc_gen_make((int)(v & 0xff), (int)(v >> 8 & 0xff), (int)(v >> 16 & 0xff));
}

static size_t record_size(uint32_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return fc_gen().kernel_size;
    case CUPTI_ACTIVITY_KIND_MEMCPY: return fc_gen().memcpy_size;
    case CUPTI_ACTIVITY_KIND_MEMSET: return fc_gen().memset_size;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    default: return 0;
    }
}

/* ---------------------------------------------------------------- completion thread */

static void deliver(struct qnode *n)
{
    struct tstate *t = self();
    CUpti_BuffersCallbackCompleteFunc cb;
    long delay;

    env_int("FAKECUPTI_COMPLETE_DELAY_US", 0, &delay);
    if (delay > 0)
        sleep_ns((uint64_t)delay * 1000ull);
    if (n->b.sub) {
        t->in_callback++;
        fc_v2_deliver(n->b.sub, n->b.base, n->b.size, n->b.valid, n->b.nrec, n->b.tid);
        t->in_callback--;
        return;
    }
    lock();
    cb = g.done;
    unlock();
    fc_log(1, "complete buffer %p size %zu valid %zu (%zu records)%s", (void *)n->b.base, n->b.size,
           n->b.valid, n->b.nrec, cb ? "" : ": no completion callback, lost");
    if (cb) {
        t->in_callback++;
        cb(NULL, 0, n->b.base, n->b.size, n->b.valid);
        t->in_callback--;
    }
}

/* with g.mu held once: take the queue head, deliver it with the lock released */
static void deliver_one_locked(void)
{
    struct qnode *n = g.qhead;
    int had_cb;

    g.qhead = n->next;
    if (!g.qhead)
        g.qtail = NULL;
    g.st.buffers_pending--;
    g.inflight_seq = n->seq;
    had_cb = g.done != NULL || n->b.sub; /* a subscriber's buffer: counted by fakecupti-v2.c */
    unlock();
    deliver(n);
    lock();
    g.inflight_seq = 0;
    if (n->seq > g.done_seq)
        g.done_seq = n->seq;
    if (had_cb)
        g.st.buffers_completed++;
    else
        g.st.buffers_lost++;
    free(n);
    pthread_cond_broadcast(&g.cv_done);
}

/* ---------------------------------------------------------------- incomplete records */

static void pend_fill(struct pend *p, int complete)
{
    uint32_t kind;

    if (complete)
        for (int i = 0; i < 3; i++)
            if (p->off[i])
                memcpy(p->rec + p->off[i], &p->t[i], sizeof p->t[i]);
    memcpy(&kind, p->rec, sizeof kind);
    kind &= ~FC_INCOMPLETE;
    memcpy(p->rec, &kind, sizeof kind);
}

/* Whether the buffer at base is one CUPTI still fills (not closed by a flush or by
 * filling up). */
static int open_locked(const uint8_t *base)
{
    for (size_t i = 0; i < g.nslots; i++)
        if (g.slots[i].b.base == base)
            return 1;
    return 0;
}

/* Completes, in launch order, the records whose work has ended by now; the first one
 * still running stops it, and so does the first in a buffer CUPTI still fills: CUPTI
 * completes a buffer's records once it is closed (the H100, cupti-probe --held 0: all
 * 4,244 records of the buffer being filled were incomplete, their work long ended,
 * while every closed buffer came complete). */
static void reap_locked(void)
{
    uint64_t now = rt_now();

    while (g.npend && g.pend[g.pend_head].end_rt <= now && !open_locked(g.pend[g.pend_head].base)) {
        pend_fill(&g.pend[g.pend_head], 1);
        g.pend_head++;
        g.npend--;
    }
    if (!g.npend)
        g.pend_head = 0;
    g.st.records_pending = g.npend;
}

/* Whether the buffer at base holds a record that is not complete yet. */
static int incomplete_locked(const uint8_t *base)
{
    for (size_t i = 0; i < g.npend; i++)
        if (g.pend[g.pend_head + i].base == base)
            return 1;
    return 0;
}

/* A forced flush: every record still incomplete goes out as it is, its times 0 and its
 * kind clean, and CUPTI forgets it (its completion is never delivered). */
static void abandon_locked(void)
{
    for (size_t i = 0; i < g.npend; i++)
        pend_fill(&g.pend[g.pend_head + i], 0);
    g.st.records_incomplete += g.npend;
    if (g.npend)
        fc_log(1, "forced flush: %zu record(s) handed over incomplete", g.npend);
    g.npend = g.pend_head = 0;
    g.st.records_pending = 0;
}

/* The queue head may go to the client now: a flush found it complete (or forced it), or
 * it is full and its records are complete (CUPTI's worker). */
static int head_deliverable_locked(void)
{
    struct qnode *h = g.qhead;

    if (!h)
        return 0;
    if (h->ready)
        return 1;
    if (h->full || h->swept) {
        reap_locked();
        return !incomplete_locked(h->b.base);
    }
    return 0;
}

static void enqueue_locked(struct fbuf *b, int full, int ready);

/* periodic flush (cuptiActivityFlushPeriod): close the current buffers that are full;
 * the worker completes them once their records are */
static void periodic_flush_locked(void)
{
    for (size_t i = 0; i < g.nslots; i++) {
        struct fbuf *b = &g.slots[i].b;

        if (b->base && b->valid && b->size - b->valid < FC_MAX_RECORD)
            enqueue_locked(b, 1, 0);
    }
}

static void force_ready_locked(void);

/* CUPTI's worker: delivers the queue head once it may go (above), in order.  A full
 * buffer whose records still run is looked at again every millisecond, and so is one a
 * flush closed once a later buffer has filled (enqueue_locked); until then a buffer a
 * flush closed while a record in it (or before it) ran waits for the next flush, as on
 * the H200, where nothing arrives without one. */
static void *worker_main(void *arg)
{
    (void)arg;
    lock();
    for (;;) {
        while (!head_deliverable_locked() && !g.stop) {
            uint64_t wait_ns = g.qhead && (g.qhead->full || g.qhead->swept) ? 1000000ull
                               : g.period_ms ? (uint64_t)g.period_ms * 1000000ull
                                             : 0;
            if (wait_ns) {
                struct timespec ts;
                uint64_t at = rt_now() + wait_ns;

                ts.tv_sec = (time_t)(at / 1000000000ull);
                ts.tv_nsec = (long)(at % 1000000000ull);
                if (pthread_cond_timedwait(&g.cv_work, &g.mu, &ts) == ETIMEDOUT && g.period_ms)
                    periodic_flush_locked();
            } else {
                pthread_cond_wait(&g.cv_work, &g.mu);
            }
        }
        if (g.stop)
            force_ready_locked(); /* unloading: whatever is queued goes out as it is */
        if (!g.qhead)
            break; /* stop requested and queue drained */
        deliver_one_locked();
    }
    g.running = 0;
    pthread_cond_broadcast(&g.cv_done);
    unlock();
    return NULL;
}

static int start_worker_locked(void)
{
    sigset_t all, old;
    int rc;

    if (g.running)
        return 0;
    if (g.shutting_down)
        return -1;
    g.stop = 0;
    /* like CUPTI's worker, take no signals meant for the application */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&g.worker, NULL, worker_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        fprintf(stderr, "fakecupti: cannot start the completion thread: %s\n", strerror(rc));
        return -1;
    }
    g.running = 1;
    fc_log(1, "completion thread started");
    return 0;
}

/* Stop the completion thread once it has drained the queue.  timed: give up after 2 s
 * (library unload: a completion callback may be stuck on something already gone). */
static void stop_worker(int timed)
{
    pthread_t w;

    lock();
    if (!g.running || pthread_equal(g.worker, pthread_self())) {
        unlock();
        return;
    }
    g.stop = 1;
    w = g.worker;
    pthread_cond_broadcast(&g.cv_work);
    unlock();
    if (timed) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 2;
        if (pthread_timedjoin_np(w, NULL, &ts) != 0) {
            fc_log(1, "completion thread did not stop within 2 s; leaving it");
            return;
        }
    } else {
        pthread_join(w, NULL);
    }
    lock();
    g.stop = 0;
    unlock();
}

/* close a buffer: queue it for completion; the slot's fbuf is cleared.  full: it can take
 * no more (the worker completes it when its records are); ready: deliver it as it is.
 * A buffer filling up makes CUPTI's worker look at every closed one, those a flush
 * closed included: the H100 (cupti-probe --held 5, docs/gpu-runs/20261205-h100-held-pm-
 * edges) got all 44 buffers a 5-s kernel held, two of them closed by plain flushes before
 * they were full, within 160 ms of the first buffer that filled after it ended, with no
 * flush; with none filling, nothing comes without a flush (the H200, E1). */
static void enqueue_locked(struct fbuf *b, int full, int ready)
{
    struct qnode *n = malloc(sizeof *n);

    if (full)
        for (struct qnode *q = g.qhead; q; q = q->next)
            q->swept = 1;

    if (!n) {
        fprintf(stderr, "fakecupti: out of memory queueing buffer %p: lost\n", (void *)b->base);
        g.st.buffers_lost++;
        memset(b, 0, sizeof *b);
        return;
    }
    n->next = NULL;
    n->b = *b;
    n->seq = ++g.enq_seq;
    n->full = full;
    n->ready = ready;
    n->swept = 0;
    memset(b, 0, sizeof *b);
    if (g.qtail)
        g.qtail->next = n;
    else
        g.qhead = n;
    g.qtail = n;
    g.st.buffers_pending++;
    fc_log(2, "queue buffer %p valid %zu", (void *)n->b.base, n->b.valid);
    if (!g.running)
        start_worker_locked();
    pthread_cond_signal(&g.cv_work);
}

/* with g.mu held exactly once: wait until everything queued up to `ticket` has completed
 * (the caller made those deliverable) */
static void wait_done_locked(uint64_t ticket)
{
    while (g.done_seq < ticket) {
        if (!g.running && start_worker_locked() != 0) {
            if (head_deliverable_locked())
                deliver_one_locked(); /* no completion thread: deliver inline */
            else if (g.inflight_seq)
                pthread_cond_wait(&g.cv_done, &g.mu); /* another thread delivers inline */
            else
                break;
            continue;
        }
        pthread_cond_signal(&g.cv_work);
        pthread_cond_wait(&g.cv_done, &g.mu);
    }
}

/* Everything queued may go, incomplete records as they are (a forced flush). */
static void force_ready_locked(void)
{
    reap_locked();
    abandon_locked();
    for (struct qnode *n = g.qhead; n; n = n->next)
        n->ready = 1;
}

/* cuptiActivityFlushAll, as measured on the H200 (docs/gpu-runs/20261204-h200-probe): every
 * current buffer is closed (records written after it go into new buffers); plain (flag 0),
 * the closed buffers are delivered in fill order up to the first that holds a record not
 * complete yet, which stays queued, with all after it, until a later flush finds it
 * complete; forced, every buffer goes, incomplete records with times 0, never completed
 * after.  include_empty (a forced reset): empty current buffers go back too.  Returns when
 * the completion callback has returned for each buffer delivered. */
static void flush_locked(int forced, int include_empty)
{
    uint64_t ticket = 0;

    for (size_t i = 0; i < g.nslots; i++) {
        struct fbuf *b = &g.slots[i].b;

        if (b->base && (b->valid || include_empty))
            enqueue_locked(b, 0, 0);
    }
    if (forced) {
        force_ready_locked();
        ticket = g.enq_seq;
    } else {
        reap_locked();
        for (struct qnode *n = g.qhead; n; n = n->next) {
            if (!n->ready && incomplete_locked(n->b.base))
                break;
            n->ready = 1;
            ticket = n->seq;
        }
    }
    if (g.npend)
        fc_log(1, "flush: %zu record(s) still running: their buffers are held", g.npend);
    wait_done_locked(ticket);
}

/* ---------------------------------------------------------------- buffers and records */

static void count_drop_locked(CUcontext ctx, uint32_t stream)
{
    size_t i;

    g.st.records_dropped++;
    for (i = 0; i < g.ndrops; i++)
        if (g.drops[i].ctx == ctx && g.drops[i].stream == stream)
            break;
    if (i == g.ndrops) {
        if (grow((void **)&g.drops, &g.capdrops, g.ndrops + 1, sizeof *g.drops) != 0)
            return;
        g.drops[i].ctx = ctx;
        g.drops[i].stream = stream;
        g.drops[i].n = 0;
        g.ndrops++;
    }
    g.drops[i].n++;
}

static void thread_exit(void *p)
{
    struct tstate *t = p;

    for (size_t k = 0; k < FC_EXT_KINDS; k++) {
        free(t->ext[k].ids);
        t->ext[k].ids = NULL;
        t->ext[k].n = t->ext[k].cap = 0;
    }
    if (t->slot) {
        lock();
        if (t->slot < g.nslots) {
            struct slot *s = &g.slots[t->slot];

            /* a thread's buffer is closed when it exits (it goes out at the next flush,
             * when its records are complete); an empty one stays with the slot for the
             * next thread */
            if (s->b.base && s->b.valid)
                enqueue_locked(&s->b, 0, 0);
            s->owned = 0;
        }
        unlock();
        t->slot = 0;
    }
}

/* the slot the calling thread writes into, or (size_t)-1 */
static size_t slot_locked(struct tstate *t)
{
    size_t i;

    if (g.nslots == 0) {
        g.slots = calloc(1, sizeof *g.slots);
        if (!g.slots)
            return (size_t)-1;
        g.nslots = 1;
    }
    if (!g.attr[CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER])
        return 0;
    if (t->slot && t->slot < g.nslots && g.slots[t->slot].owned)
        return t->slot;
    for (i = 1; i < g.nslots; i++)
        if (!g.slots[i].owned)
            break;
    if (i == g.nslots) {
        struct slot *p = realloc(g.slots, (g.nslots + 1) * sizeof *p);

        if (!p)
            return (size_t)-1;
        memset(&p[g.nslots], 0, sizeof *p);
        g.slots = p;
        g.nslots++;
    }
    g.slots[i].owned = 1;
    t->slot = i;
    return i;
}

static int all_zero(const uint8_t *p, size_t n)
{
    const uint64_t *w = (const uint64_t *)(const void *)p;
    size_t i;

    for (i = 0; i < n / 8; i++)
        if (w[i])
            return 0;
    for (i = n & ~(size_t)7; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* ask the client for a buffer for slot si (g.mu held, on the launching thread) */
static int request_locked(struct tstate *t, size_t si, size_t need)
{
    CUpti_BuffersCallbackRequestFunc req = g.req;
    uint8_t *buf = NULL;
    size_t size = 0, maxrec = 0;
    struct fbuf *b;

    g.st.buffers_requested++;
    t->in_callback++;
    req(&buf, &size, &maxrec);
    t->in_callback--;
    if (!buf || size == 0) {
        g.st.requests_declined++;
        fc_log(2, "buffer request declined");
        return 0;
    }
    if (((uintptr_t)buf % ACTIVITY_RECORD_ALIGNMENT) || size < need) {
        struct fbuf rb = {.base = buf, .size = size};

        g.st.buffers_rejected++;
        if (!g.warned_reject++)
            fprintf(stderr,
                    "fakecupti: request callback returned an unusable buffer %p size "
                    "%zu (needs %d-byte alignment and room for a %zu-byte record); "
                    "completing it back empty\n",
                    (void *)buf, size, ACTIVITY_RECORD_ALIGNMENT, need);
        enqueue_locked(&rb, 0, 1);
        return 0;
    }
    if (g.attr[CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER]) {
        if (!all_zero(buf, size)) {
            g.st.dirty_buffers++;
            if (!g.warned_dirty++)
                fprintf(stderr,
                        "fakecupti: buffer %p is not zeroed although "
                        "CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER is set\n",
                        (void *)buf);
        }
    } else {
        memset(buf, 0, size);
    }
    b = &g.slots[si].b;
    if (b->base) /* a nested request filled the slot meanwhile */
        enqueue_locked(b, 1, 0);
    b->base = buf;
    b->size = size;
    b->valid = 0;
    b->nrec = 0;
    b->max_records = maxrec;
    fc_log(1, "got buffer %p size %zu maxNumRecords %zu (slot %zu)", (void *)buf, size, maxrec, si);
    return 1;
}

/* Records a GPU record just copied to rec (in the buffer at base) as incomplete: its kind
 * gets bit 31 and its times 0 until reap_locked fills them in. */
static int push_pend_locked(const struct pend *p, const uint8_t *base, uint8_t *rec)
{
    struct pend e = *p;
    uint32_t kind;

    if (g.pend_head && g.pend_head + g.npend == g.cappend) {
        memmove(g.pend, g.pend + g.pend_head, g.npend * sizeof *g.pend);
        g.pend_head = 0;
    }
    if (grow((void **)&g.pend, &g.cappend, g.pend_head + g.npend + 1, sizeof *g.pend) != 0)
        return -1;
    e.rec = rec;
    e.base = base;
    for (int i = 0; i < 3; i++)
        if (e.off[i]) {
            memcpy(&e.t[i], rec + e.off[i], sizeof e.t[i]);
            memset(rec + e.off[i], 0, sizeof e.t[i]);
        }
    memcpy(&kind, rec, sizeof kind);
    kind |= FC_INCOMPLETE;
    memcpy(rec, &kind, sizeof kind);
    g.pend[g.pend_head + g.npend++] = e;
    g.st.records_pending = g.npend;
    return 0;
}

/* write one record for the calling thread; returns 1 written, 0 dropped.  p: a GPU record,
 * written incomplete (struct pend) and completed when its work has ended */
static int put_locked(struct tstate *t, const void *rec, size_t sz, CUcontext dctx,
                      uint32_t dstream, const struct pend *p)
{
    size_t si;
    struct fbuf *b;
    uint32_t kind;

    if (fc_api_mode() == 2)
        return fc_v2_put_locked(rec, sz); /* the subscribers' buffers */
    if (!g.req || (si = slot_locked(t)) == (size_t)-1) {
        count_drop_locked(dctx, dstream);
        return 0;
    }
    if (g.npend >= 256)
        reap_locked(); /* keeps the list of incomplete records short */
    b = &g.slots[si].b;
    if (b->base && (b->size - b->valid < sz || (b->max_records && b->nrec >= b->max_records)))
        enqueue_locked(b, 1, 0);
    if (!b->base) {
        if (!request_locked(t, si, sz)) {
            count_drop_locked(dctx, dstream);
            return 0;
        }
        b = &g.slots[si].b;
    }
    memcpy(b->base + b->valid, rec, sz);
    if (p && push_pend_locked(p, b->base, b->base + b->valid) < 0) {
        memset(b->base + b->valid, 0, sz);
        count_drop_locked(dctx, dstream);
        return 0;
    }
    b->valid += sz;
    b->nrec++;
    memcpy(&kind, rec, sizeof kind);
    switch (kind & ~FC_INCOMPLETE) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: g.st.kernels++; break;
    case CUPTI_ACTIVITY_KIND_MEMCPY: g.st.memcpys++; break;
    case CUPTI_ACTIVITY_KIND_MEMSET: g.st.memsets++; break;
    case CUPTI_ACTIVITY_KIND_RUNTIME: g.st.runtime_api++; break;
    case CUPTI_ACTIVITY_KIND_DRIVER: g.st.driver_api++; break;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: g.st.external_correlation++; break;
    default: break;
    }
    /* full: hand it to the completion thread now */
    if ((b->max_records && b->nrec >= b->max_records) || b->size - b->valid < FC_MIN_RECORD)
        enqueue_locked(b, 1, 0);
    return 1;
}

/* ---------------------------------------------------------------- the fake GPU */

static struct streament *stream_locked(uint32_t device, uint32_t stream, int create)
{
    for (size_t i = 0; i < g.nstreams; i++)
        if (g.streams[i].device == device && g.streams[i].stream == stream)
            return &g.streams[i];
    if (!create || grow((void **)&g.streams, &g.capstreams, g.nstreams + 1, sizeof *g.streams) != 0)
        return NULL;
    g.streams[g.nstreams] = (struct streament){.device = device, .stream = stream};
    return &g.streams[g.nstreams++];
}

static int64_t next_grid_locked(uint32_t device)
{
    size_t i;

    for (i = 0; i < g.ndevs; i++)
        if (g.devs[i].device == device)
            return g.devs[i].next_grid++;
    if (grow((void **)&g.devs, &g.capdevs, g.ndevs + 1, sizeof *g.devs) != 0)
        return 0;
    g.devs[i] = (struct devent){.device = device, .next_grid = 2};
    g.ndevs++;
    return 1;
}

/* a launch blocks while its stream is too far ahead of the clock (a full launch queue) */
static void throttle(uint32_t device, uint32_t stream)
{
    struct streament *s;
    uint64_t tail = 0, now;

    lock();
    s = stream_locked(device, stream, 0);
    if (s)
        tail = s->tail_rt;
    unlock();
    now = rt_now();
    if (tail > now + FC_AHEAD_NS)
        sleep_ns(tail - FC_AHEAD_NS - now);
}

CUcontext fakecuda_context(uint32_t device)
{
    return (CUcontext)(uintptr_t)(0xc0de0000u + 0x100u * ((uintptr_t)device + 1));
}

enum op {
    OP_KERNEL,
    OP_MEMCPY,
    OP_MEMSET
};

struct launch {
    enum op op;
    const struct fakecuda_kernel *k;
    uint64_t bytes;
    int copy_kind;
    uint32_t value;
    uint32_t device, stream;
    CUpti_CallbackId rt_cbid, drv_cbid;
};

static int api_on_locked(CUpti_ActivityKind kind, CUpti_CallbackId cbid)
{
    uint8_t ovr = kind == CUPTI_ACTIVITY_KIND_RUNTIME ? g.rt_ovr[cbid] : g.drv_ovr[cbid];

    if (fc_api_mode() == 2)
        return fc_v2_api_on_locked(kind, cbid);
    return ovr == 1 || (ovr == 0 && g.enabled[kind]);
}

static void derive_config(const char *name, int32_t grid[3], int32_t block[3])
{
    /* the three kernels of tests/data/cupti-13.0-h200/dump.cu.txt, else by a hash */
    static const struct {
        const char *name;
        int32_t g, b;
    } known[] = {
        {"_Z5scaleILi2EEvPfi", 64, 256},
        {"_Z5scaleILi3EEvPfi", 32, 128},
        {"_ZN2ns7add_oneEPfi", 128, 256},
    };
    uint32_t h;

    grid[1] = grid[2] = block[1] = block[2] = 1;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (name && strcmp(name, known[i].name) == 0) {
            grid[0] = known[i].g;
            block[0] = known[i].b;
            return;
        }
    h = hash_str(name);
    grid[0] = 16 << (h % 5);
    block[0] = 64 << ((h >> 8) % 4);
}

static void memcpy_kinds(int ck, uint8_t *src, uint8_t *dst)
{
    enum {
        U = CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN,
        H = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
        D = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
        A = CUPTI_ACTIVITY_MEMORY_KIND_ARRAY
    };
    static const uint8_t map[][2] = {
        [CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN] = {U, U}, [CUPTI_ACTIVITY_MEMCPY_KIND_HTOD] = {H, D},
        [CUPTI_ACTIVITY_MEMCPY_KIND_DTOH] = {D, H},    [CUPTI_ACTIVITY_MEMCPY_KIND_HTOA] = {H, A},
        [CUPTI_ACTIVITY_MEMCPY_KIND_ATOH] = {A, H},    [CUPTI_ACTIVITY_MEMCPY_KIND_ATOA] = {A, A},
        [CUPTI_ACTIVITY_MEMCPY_KIND_ATOD] = {A, D},    [CUPTI_ACTIVITY_MEMCPY_KIND_DTOA] = {D, A},
        [CUPTI_ACTIVITY_MEMCPY_KIND_DTOD] = {D, D},    [CUPTI_ACTIVITY_MEMCPY_KIND_HTOH] = {H, H},
        [CUPTI_ACTIVITY_MEMCPY_KIND_PTOP] = {D, D},
    };

    if (ck < 0 || (size_t)ck >= sizeof map / sizeof map[0])
        ck = CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN;
    *src = map[ck][0];
    *dst = map[ck][1];
}

static uint32_t channel_of(uint32_t stream)
{
    return 1 + (stream ? (stream - 1) % 8 : 0);
}

/* the FAKECUDA_REC_* bit of a record written, or of a record dropped */
static uint32_t mark(int written, uint32_t bit)
{
    return written ? bit : bit << FAKECUDA_DROPPED_SHIFT;
}

/* A GPU record goes into the buffer incomplete; its work ends at end_rt. */
#define PUT_GPU_AT(r, o_completed)                                                                 \
    put_locked(t, &(r), sizeof(r), gctx, gstream,                                                  \
               &(struct pend){.end_rt = end_rt,                                                    \
                              .off = {offsetof(__typeof__(r), start),                              \
                                      offsetof(__typeof__(r), end), (o_completed)}})
#define PUT_GPU(r)    PUT_GPU_AT(r, 0)
#define PUT_KERNEL(r) PUT_GPU_AT(r, offsetof(__typeof__(r), completed))

/* A knob's value in [lo, hi], else dflt with a warning. */
static uint64_t knob(const char *name, const char *s, uint64_t lo, uint64_t hi, uint64_t dflt)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno || end == s || *s == '-' || *end || v < lo || v > hi) {
        fprintf(stderr, "fakecupti: %s=%s: not a number in [%llu, %llu]; using %llu\n", name, s,
                (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)dflt);
        return dflt;
    }
    return v;
}

static void corr_config_locked(void)
{
    struct corrnum *c = &g.cn;
    const char *s;

    memset(c, 0, sizeof *c);
    c->ready = 1;
    c->first[0] = c->first[1] = c->first[2] = 1;
    c->block = 1;
    if ((s = getenv("FAKECUPTI_CORR_START")) && *s)
        c->first[0] = (uint32_t)knob("FAKECUPTI_CORR_START", s, 1, UINT32_MAX, 1);
    if ((s = getenv("FAKECUPTI_CORR_RANGES")) && *s) {
        const char *p = s;
        uint32_t f[3];
        int ok = 1;

        for (int i = 0; i < 3 && ok; i++) {
            char *end;
            unsigned long long v;

            errno = 0;
            v = strtoull(p, &end, 0);
            ok = !errno && end != p && *p != '-' && v >= 1 && v <= UINT32_MAX &&
                 *end == (i < 2 ? ',' : '\0');
            f[i] = (uint32_t)v;
            p = end + 1;
        }
        if (ok) {
            c->per_kind = 1;
            memcpy(c->first, f, sizeof f);
        } else {
            fprintf(stderr,
                    "fakecupti: FAKECUPTI_CORR_RANGES=%s: want the first ids of kernels, copies "
                    "and memsets, K,C,S, each in [1, 4294967295]; ignored\n",
                    s);
        }
    }
    if ((s = getenv("FAKECUPTI_CORR_SHUFFLE")) && *s) {
        c->block = knob("FAKECUPTI_CORR_SHUFFLE", s, 1, 1u << 20, 1);
        if (c->block & (c->block - 1)) {
            fprintf(stderr, "fakecupti: FAKECUPTI_CORR_SHUFFLE=%s: not a power of two; ignored\n",
                    s);
            c->block = 1;
        }
    }
    if ((s = getenv("FAKECUPTI_DROP_API")) && *s)
        c->drop_api = knob("FAKECUPTI_DROP_API", s, 0, UINT32_MAX, 0);
    if ((s = getenv("FAKECUPTI_RT_LEAD_NS")) && *s)
        __atomic_store_n(&c->rt_lead, knob("FAKECUPTI_RT_LEAD_NS", s, 0, 1000000000, 0),
                         __ATOMIC_RELAXED);
    if ((s = getenv("FAKECUPTI_API_ORDER")) && *s) {
        if (strcmp(s, "runtime-first") == 0)
            c->order = 1;
        else if (strcmp(s, "alternate") == 0)
            c->order = 2;
        else if (strcmp(s, "driver-first") != 0)
            fprintf(stderr,
                    "fakecupti: FAKECUPTI_API_ORDER=%s: want driver-first, runtime-first or "
                    "alternate; using driver-first\n",
                    s);
    }
}

/* The next correlation id for a launch of op: never 0 (CUPTI's "none"), so
 * a counter wraps from 2^32 - 1 to 1. */
static uint32_t next_corr_locked(enum op op)
{
    struct corrnum *c = &g.cn;
    int k;
    uint64_t n, low, j;

    if (!c->ready)
        corr_config_locked();
    k = c->per_kind ? (op == OP_KERNEL ? 0 : op == OP_MEMCPY ? 1 : 2) : 0;
    n = c->drawn[k]++;
    /* In a block, the launches get its ids in bit-reversed order (a
     * bijection, far from the launches' order). */
    low = n & (c->block - 1);
    j = n - low;
    for (uint64_t b = 1, r = c->block / 2; b < c->block; b <<= 1, r >>= 1)
        if (low & b)
            j += r;
    return (uint32_t)(1 + ((uint64_t)c->first[k] - 1 + j) % UINT32_MAX);
}

/* An API-side record (external correlation, driver or runtime call):
 * written, or dropped and counted as CUPTI counts a record it had no
 * buffer for.  Returns 1 written, 0 dropped. */
static int put_api_locked(struct tstate *t, const void *rec, size_t sz, int drop)
{
    if (drop) {
        count_drop_locked(NULL, 0);
        return 0;
    }
    return put_locked(t, rec, sz, NULL, 0, NULL);
}

static uint32_t do_launch(const struct launch *L)
{
    struct tstate *t = self();
    CUcontext gctx = NULL;
    uint32_t gstream = 0, corr = 0, res = 0, gpu_kind = 0;
    uint64_t t0, t1, t2, t3, rt3, dur, start_rt, end_rt;
    int64_t off;
    int rt_on, drv_on, ext_on, api_drop = 0, rt_first = 0;
    struct streament *s;
    const char *dq;

    t->last_result = 0;
    throttle(L->device, L->stream);
    t0 = api_ts(t);
    /* Read without the lock: set once, at the first launch (which does not
     * wait), before any launch reads it. */
    uint64_t lead = __atomic_load_n(&g.cn.rt_lead, __ATOMIC_RELAXED);
    if (lead)
        sleep_ns(lead);

    lock();
    switch (L->op) {
    case OP_KERNEL:
        if (g.enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL])
            gpu_kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        else if (g.enabled[CUPTI_ACTIVITY_KIND_KERNEL])
            gpu_kind = CUPTI_ACTIVITY_KIND_KERNEL;
        dur = L->k->duration_ns ? L->k->duration_ns : 1000 + rnd_locked() % 4001;
        break;
    case OP_MEMCPY:
        if (g.enabled[CUPTI_ACTIVITY_KIND_MEMCPY])
            gpu_kind = CUPTI_ACTIVITY_KIND_MEMCPY;
        if (L->copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ||
            L->copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP)
            dur = 1000 + L->bytes / 2000 + rnd_locked() % 401; /* ~2 TB/s */
        else
            dur = 1200 + L->bytes / 25 + rnd_locked() % 401; /* ~25 GB/s over PCIe */
        break;
    default:
        if (g.enabled[CUPTI_ACTIVITY_KIND_MEMSET])
            gpu_kind = CUPTI_ACTIVITY_KIND_MEMSET;
        dur = 1200 + L->bytes / 2000 + rnd_locked() % 401;
        break;
    }
    rt_on = api_on_locked(CUPTI_ACTIVITY_KIND_RUNTIME, L->rt_cbid);
    drv_on = api_on_locked(CUPTI_ACTIVITY_KIND_DRIVER, L->drv_cbid);
    ext_on = (rt_on || drv_on) && g.enabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION];
    if (gpu_kind || rt_on || drv_on)
        g.st.last_correlation = corr = next_corr_locked(L->op);
    if (rt_on || drv_on) {
        g.cn.api_launches++;
        api_drop = g.cn.drop_api && g.cn.api_launches % g.cn.drop_api == 0;
        rt_first = g.cn.order == 1 || (g.cn.order == 2 && g.cn.api_launches % 2 == 0);
    }

    /* API call: [t0 runtime [t1 driver t2] t3]; the work starts after t3 */
    t1 = api_ts(t);
    t2 = api_ts(t);
    t3 = api_ts(t);
    rt3 = atomic_load(&g_ts_cb) ? rt_now() : t3;
    off = (int64_t)(t3 - rt3);
    start_rt = rt3 + 800 + rnd_locked() % 1201;
    s = stream_locked(L->device, L->stream, 1);
    if (s) {
        uint64_t gap = 150 + rnd_locked() % 351;

        if (s->tail_rt + gap > start_rt)
            start_rt = s->tail_rt + gap;
    }
    end_rt = start_rt + dur;
    if (s)
        s->tail_rt = end_rt;

    if (corr && (dq = getenv("FAKECUPTI_DROP_QUEUE")) && strcmp(dq, "stream") == 0) {
        gctx = fakecuda_context(L->device);
        gstream = L->stream;
    }

    if (ext_on) {
        for (uint32_t k = 1; k < FC_EXT_KINDS; k++) {
            CUpti_ActivityExternalCorrelation r;

            if (!t->ext[k].n)
                continue;
            memset(&r, 0, sizeof r);
            r.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
            r.externalKind = (CUpti_ExternalCorrelationKind)k;
            r.externalId = t->ext[k].ids[t->ext[k].n - 1];
            r.correlationId = corr;
            res |= mark(put_api_locked(t, &r, sizeof r, api_drop), FAKECUDA_REC_EXTCORR);
        }
    }
    if (ext_on && fc_api_mode() == 2) /* each subscriber's own stacks */
        res |= fc_v2_ext_locked(corr, L->rt_cbid, L->drv_cbid);

    if (gpu_kind && L->op == OP_KERNEL) {
        const struct fakecuda_kernel *k = L->k;
        int32_t grid[3], block[3];
        uint64_t start = (uint64_t)((int64_t)start_rt + off),
                 end = (uint64_t)((int64_t)end_rt + off);

        derive_config(k->name, grid, block);
        for (int i = 0; i < 3; i++) {
            if (k->grid[i] > 0)
                grid[i] = k->grid[i];
            if (k->block[i] > 0)
                block[i] = k->block[i];
        }
        /* The fields every kernel record version has, filled alike. */
#define FILL_KERNEL(r)                                                                             \
    do {                                                                                           \
        memset(&(r), 0, sizeof(r));                                                                \
        (r).kind = (CUpti_ActivityKind)gpu_kind;                                                   \
        (r).registersPerThread = 16;                                                               \
        (r).partitionedGlobalCacheRequested =                                                      \
            CUPTI_ACTIVITY_PARTITIONED_GLOBAL_CACHE_CONFIG_NOT_SUPPORTED;                          \
        (r).partitionedGlobalCacheExecuted =                                                       \
            CUPTI_ACTIVITY_PARTITIONED_GLOBAL_CACHE_CONFIG_NOT_SUPPORTED;                          \
        (r).start = start;                                                                         \
        (r).end = end;                                                                             \
        (r).completed = end;                                                                       \
        (r).deviceId = L->device;                                                                  \
        (r).contextId = L->device + 1;                                                             \
        (r).streamId = L->stream;                                                                  \
        (r).gridX = grid[0];                                                                       \
        (r).gridY = grid[1];                                                                       \
        (r).gridZ = grid[2];                                                                       \
        (r).blockX = block[0];                                                                     \
        (r).blockY = block[1];                                                                     \
        (r).blockZ = block[2];                                                                     \
        (r).staticSharedMemory = 0;                                                                \
        (r).dynamicSharedMemory = k->dynamic_shared;                                               \
        (r).localMemoryPerThread = 0;                                                              \
        (r).localMemoryTotal = FC_LOCAL_MEM_TOTAL;                                                 \
        (r).correlationId = corr;                                                                  \
        (r).gridId = next_grid_locked(L->device);                                                  \
        (r).name = k->name;                                                                        \
        (r).reserved0 = NULL;                                                                      \
        (r).queued = CUPTI_TIMESTAMP_UNKNOWN;                                                      \
        (r).submitted = CUPTI_TIMESTAMP_UNKNOWN;                                                   \
        (r).launchType = CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR;                                       \
        (r).sharedMemoryExecuted =                                                                 \
            k->dynamic_shared > 32768 ? (uint32_t)(((uint32_t)k->dynamic_shared + 8191u) & ~8191u) \
                                      : 32768u;                                                    \
        (r).graphNodeId = k->graph_node_id;                                                        \
        (r).shmemLimitConfig = CUPTI_FUNC_SHMEM_LIMIT_DEFAULT;                                     \
        (r).graphId = (uint32_t)k->graph_id;                                                       \
        (r).pAccessPolicyWindow = NULL;                                                            \
        (r).channelID = channel_of(L->stream);                                                     \
        (r).channelType = CUPTI_CHANNEL_TYPE_COMPUTE;                                              \
        (r).clusterSchedulingPolicy = 1;                                                           \
        (r).localMemoryTotal_v2 = FC_LOCAL_MEM_TOTAL;                                              \
    } while (0)
        /* Later versions' fields get values no other field has (a priority
         * of -1 - stream, graph ids offset by 7), so that a decoder reading
         * the wrong offset shows it. */
        switch (fc_gen().kernel) {
        case 8: {
            CUpti_ActivityKernel8 r;
            FILL_KERNEL(r);
            res |= mark(PUT_KERNEL(r), FAKECUDA_REC_GPU);
            break;
        }
        case 9: {
            CUpti_ActivityKernel9 r;
            FILL_KERNEL(r);
            res |= mark(PUT_KERNEL(r), FAKECUDA_REC_GPU);
            break;
        }
        case 10: {
            CUpti_ActivityKernel10 r;
            FILL_KERNEL(r);
            r.isDeviceLaunched = 0;
            res |= mark(PUT_KERNEL(r), FAKECUDA_REC_GPU);
            break;
        }
        case 11: {
            fc_ActivityKernel11 r;
            FILL_KERNEL(r);
            r.priority = -1 - (int32_t)L->stream;
            res |= mark(PUT_KERNEL(r), FAKECUDA_REC_GPU);
            break;
        }
        case 12: {
            fc_ActivityKernel12 r;
            FILL_KERNEL(r);
            r.priority = -1 - (int32_t)L->stream;
            r.executionModel = 1;
            res |= mark(PUT_KERNEL(r), FAKECUDA_REC_GPU);
            break;
        }
        default: {
            fc_ActivityKernel13 r;
            FILL_KERNEL(r);
            r.priority = -1 - (int32_t)L->stream;
            r.executionModel = 1;
            r.sourceGraphId = k->graph_id ? (uint32_t)k->graph_id + 7 : 0;
            r.sourceGraphNodeId = k->graph_node_id ? k->graph_node_id + 7 : 0;
            res |= mark(PUT_KERNEL(r), FAKECUDA_REC_GPU);
            break;
        }
        }
#undef FILL_KERNEL
    } else if (gpu_kind && L->op == OP_MEMCPY) {
        uint8_t src, dst;
        uint64_t start = (uint64_t)((int64_t)start_rt + off),
                 end = (uint64_t)((int64_t)end_rt + off);

        memcpy_kinds(L->copy_kind, &src, &dst);
#define FILL_MEMCPY(r)                                                                             \
    do {                                                                                           \
        memset(&(r), 0, sizeof(r));                                                                \
        (r).kind = CUPTI_ACTIVITY_KIND_MEMCPY;                                                     \
        (r).copyKind = (uint8_t)L->copy_kind;                                                      \
        (r).srcKind = src;                                                                         \
        (r).dstKind = dst;                                                                         \
        (r).flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;                                              \
        (r).bytes = L->bytes;                                                                      \
        (r).start = start;                                                                         \
        (r).end = end;                                                                             \
        (r).deviceId = L->device;                                                                  \
        (r).contextId = L->device + 1;                                                             \
        (r).streamId = L->stream;                                                                  \
        (r).correlationId = corr;                                                                  \
        (r).runtimeCorrelationId = 0; /* 0 in the H200 capture */                                  \
        (r).reserved0 = NULL;                                                                      \
        (r).graphNodeId = 0;                                                                       \
        (r).graphId = 0;                                                                           \
        (r).channelID = 12;                                                                        \
        (r).channelType = CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY;                                         \
    } while (0)
        switch (fc_gen().memcpy) {
        case 5: {
            CUpti_ActivityMemcpy5 r;
            FILL_MEMCPY(r);
            res |= mark(PUT_GPU(r), FAKECUDA_REC_GPU);
            break;
        }
        case 6: {
            CUpti_ActivityMemcpy6 r;
            FILL_MEMCPY(r);
            r.copyCount = 1;
            res |= mark(PUT_GPU(r), FAKECUDA_REC_GPU);
            break;
        }
        default: {
            fc_ActivityMemcpy7 r;
            FILL_MEMCPY(r);
            r.copyCount = 1;
            res |= mark(PUT_GPU(r), FAKECUDA_REC_GPU);
            break;
        }
        }
#undef FILL_MEMCPY
    } else if (gpu_kind) {
        uint64_t start = (uint64_t)((int64_t)start_rt + off),
                 end = (uint64_t)((int64_t)end_rt + off);
#define FILL_MEMSET(r)                                                                             \
    do {                                                                                           \
        memset(&(r), 0, sizeof(r));                                                                \
        (r).kind = CUPTI_ACTIVITY_KIND_MEMSET;                                                     \
        (r).value = L->value;                                                                      \
        (r).bytes = L->bytes;                                                                      \
        (r).start = start;                                                                         \
        (r).end = end;                                                                             \
        (r).deviceId = L->device;                                                                  \
        (r).contextId = L->device + 1;                                                             \
        (r).streamId = L->stream;                                                                  \
        (r).correlationId = corr;                                                                  \
        (r).flags = CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC;                                              \
        (r).memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;                                        \
        (r).reserved0 = NULL;                                                                      \
        (r).graphNodeId = 0;                                                                       \
        (r).graphId = 0;                                                                           \
        (r).channelID = channel_of(L->stream);                                                     \
        (r).channelType = CUPTI_CHANNEL_TYPE_COMPUTE;                                              \
    } while (0)
        if (fc_gen().memset == 4) {
            CUpti_ActivityMemset4 r;
            FILL_MEMSET(r);
            res |= mark(PUT_GPU(r), FAKECUDA_REC_GPU);
        } else {
            fc_ActivityMemset5 r;
            FILL_MEMSET(r);
            res |= mark(PUT_GPU(r), FAKECUDA_REC_GPU);
        }
#undef FILL_MEMSET
    }

    /* The nested driver call ends first, so its record usually comes
     * first; FAKECUPTI_API_ORDER puts the runtime record first. */
    for (int i = 0; i < 2; i++) {
        int rt = (i == 0) == rt_first;
        CUpti_ActivityAPI r;

        if (!(rt ? rt_on : drv_on))
            continue;
        memset(&r, 0, sizeof r);
        r.kind = rt ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
        r.cbid = rt ? L->rt_cbid : L->drv_cbid;
        r.start = rt ? t0 : t1;
        r.end = rt ? t3 : t2;
        r.processId = g.pid;
        r.threadId = thread_id();
        r.correlationId = corr;
        r.returnValue = 0; /* cudaSuccess, CUDA_SUCCESS */
        res |= mark(put_api_locked(t, &r, sizeof r, api_drop),
                    rt ? FAKECUDA_REC_RUNTIME : FAKECUDA_REC_DRIVER);
    }
    unlock();

    t->last_result = res;
    fc_log(2, "launch op %d dev %u stream %u corr %u result 0x%x", (int)L->op, L->device, L->stream,
           corr, res);
    return corr;
}

/* ---------------------------------------------------------------- fake CUDA API */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc;

static void do_init(void)
{
    const char *path = getenv("CUDA_INJECTION64_PATH");
    void *h, *sym;
    int (*fn)(void);
    int r;

    init_rc = 0;
    if (!path || !*path)
        return;
    h = dlopen(path, RTLD_NOW);
    if (!h) {
        fprintf(stderr, "fakecuda: cannot load CUDA_INJECTION64_PATH=%s: %s\n", path, dlerror());
        init_rc = -1;
        return;
    }
    sym = dlsym(h, "InitializeInjection");
    if (!sym) {
        fprintf(stderr, "fakecuda: %s has no InitializeInjection: %s\n", path, dlerror());
        dlclose(h);
        init_rc = -1;
        return;
    }
    fn = (int (*)(void))sym;
    fc_log(1, "calling InitializeInjection of %s", path);
    r = fn();
    fc_log(1, "InitializeInjection returned %d", r);
}

static atomic_int cuda_inited;

int fakecuda_init(void)
{
    pthread_once(&init_once, do_init);
    atomic_store(&cuda_inited, 1);
    return init_rc;
}

/* ---- the driver's device queries ------------------------------------------
 *
 * What the shim asks the driver for Kineto's deviceProperties.  Before
 * cuInit (fakecuda_init) they fail with CUDA_ERROR_NOT_INITIALIZED, as the
 * driver's do.  The node has FAKECUPTI_DEVICES GPUs (default 1, at most
 * 16), each the H200 of the reference trace (tests/data/kineto-ref), but
 * for node GPU n having 132 + n SMs and the name FAKECUPTI_DEVICE_NAME
 * (default "Fake H200") followed by " #n" past GPU 0, so that tests tell
 * them apart, and the UUID fa4e0000-0000-4000-8000-0000000000NN (NN: n in
 * hex), the one tests/fakecupti/fakepm.c gives node GPU n, so that the
 * daemon's GPU metrics and a process's devices name the same GPU alike.
 * CUDA_VISIBLE_DEVICES renumbers as the driver does: a comma-separated list
 * of node ordinals, read up to its first entry that is not one (UUIDs and
 * MIG names are not modelled); the process's device d is the list's d-th.
 */
static int fake_node_devices(void)
{
    long n;
    if (env_int("FAKECUPTI_DEVICES", 1, &n) < 0 || n < 0)
        n = 1;
    return n > 16 ? 16 : (int)n;
}

/* The process's devices: their count, and in node[] each one's node GPU. */
static int fake_visible(int node[16])
{
    int nn = fake_node_devices(), n = 0;
    const char *v = getenv("CUDA_VISIBLE_DEVICES");

    if (v == NULL) {
        for (n = 0; n < nn; n++)
            node[n] = n;
        return n;
    }
    while (n < 16) {
        char *end;
        long x = strtol(v, &end, 10);
        int dup = 0;
        if (end == v || (*end != ',' && *end != '\0') || x < 0 || x >= nn)
            break;
        for (int i = 0; i < n; i++)
            dup |= node[i] == (int)x;
        if (dup)
            break;
        node[n++] = (int)x;
        if (*end == '\0')
            break;
        v = end + 1;
    }
    return n;
}

static int fake_devices(void)
{
    int node[16];
    return fake_visible(node);
}

/* The node GPU of the process's device dev, or -1. */
static int fake_node_of(CUdevice dev)
{
    int node[16], n = fake_visible(node);
    return dev >= 0 && dev < n ? node[dev] : -1;
}

CUresult cuDeviceGetCount(int *count)
{
    if (!atomic_load(&cuda_inited))
        return CUDA_ERROR_NOT_INITIALIZED;
    *count = fake_devices();
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    const char *base = getenv("FAKECUPTI_DEVICE_NAME");
    int n = fake_node_of(dev);
    if (!atomic_load(&cuda_inited))
        return CUDA_ERROR_NOT_INITIALIZED;
    if (n < 0 || !name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (n == 0)
        snprintf(name, (size_t)len, "%s", base ? base : "Fake H200");
    else
        snprintf(name, (size_t)len, "%s #%d", base ? base : "Fake H200", n);
    return CUDA_SUCCESS;
}

/* cuda.h names cuDeviceGetUuid_v2 cuDeviceGetUuid; the driver exports both. */
static CUresult fake_uuid(CUuuid *uuid, CUdevice dev)
{
    static const unsigned char base[16] = {0xfa, 0x4e, 0, 0, 0, 0, 0x40, 0,
                                           0x80, 0,    0, 0, 0, 0, 0,    0};
    int n = fake_node_of(dev);
    if (!atomic_load(&cuda_inited))
        return CUDA_ERROR_NOT_INITIALIZED;
    if (n < 0 || !uuid)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(uuid->bytes, base, 16);
    uuid->bytes[15] = (char)n;
    return CUDA_SUCCESS;
}

#undef cuDeviceGetUuid
CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return fake_uuid(uuid, dev);
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    return fake_uuid(uuid, dev);
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
    if (!atomic_load(&cuda_inited))
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= fake_devices())
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = 150109880320ull;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    if (!atomic_load(&cuda_inited))
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= fake_devices())
        return CUDA_ERROR_INVALID_VALUE;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *pi = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *pi = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132 + fake_node_of(dev); break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *pi = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *pi = 233472; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

uint32_t fakecuda_launch_kernel_ex(const struct fakecuda_kernel *k)
{
    struct launch L = {.op = OP_KERNEL, .k = k, .device = k->device, .stream = k->stream};

    if (k->graph_id) {
        L.rt_cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000;
        L.drv_cbid = CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch;
    } else {
        L.rt_cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
        L.drv_cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
    }
    return do_launch(&L);
}

uint32_t fakecuda_launch_kernel(const char *name, uint32_t device, uint32_t stream,
                                uint64_t graph_id, uint64_t graph_node_id)
{
    struct fakecuda_kernel k = {.name = name,
                                .device = device,
                                .stream = stream,
                                .graph_id = graph_id,
                                .graph_node_id = graph_node_id};

    return fakecuda_launch_kernel_ex(&k);
}

uint32_t fakecuda_memcpy(uint64_t bytes, int copy_kind, uint32_t device, uint32_t stream)
{
    struct launch L = {.op = OP_MEMCPY,
                       .bytes = bytes,
                       .copy_kind = copy_kind,
                       .device = device,
                       .stream = stream,
                       .rt_cbid = CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020};

    switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
        L.drv_cbid = CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2;
        break;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
        L.drv_cbid = CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2;
        break;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
        L.drv_cbid = CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2;
        break;
    default: L.drv_cbid = CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync; break;
    }
    return do_launch(&L);
}

uint32_t fakecuda_memset(uint64_t bytes, uint32_t value, uint32_t device, uint32_t stream)
{
    struct launch L = {.op = OP_MEMSET,
                       .bytes = bytes,
                       .value = value,
                       .device = device,
                       .stream = stream,
                       .rt_cbid = CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
                       .drv_cbid = CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async};

    return do_launch(&L);
}

uint32_t fakecuda_last_result(void)
{
    return self()->last_result;
}

void fakecuda_synchronize(void)
{
    uint64_t tail = 0, now;

    lock();
    for (size_t i = 0; i < g.nstreams; i++)
        if (g.streams[i].tail_rt > tail)
            tail = g.streams[i].tail_rt;
    unlock();
    now = rt_now();
    if (tail >= now)
        sleep_ns(tail - now + 1);
}

void fakecupti_get_stats(struct fakecupti_stats *out)
{
    lock();
    *out = g.st;
    out->callbacks_registered = (g.req != NULL && g.done != NULL) || fc_v2_callbacks_registered();
    unlock();
}

static void defaults_locked(void)
{
    memset(g.enabled, 0, sizeof g.enabled);
    memset(g.rt_ovr, 0, sizeof g.rt_ovr);
    memset(g.drv_ovr, 0, sizeof g.drv_ovr);
    memcpy(g.attr, attr_default, sizeof g.attr);
    g.tid_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
    g.period_ms = 0;
}

void fakecupti_reset(void)
{
    struct tstate *t = self();

    fc_v2_reset();
    lock();
    if (g.done) {
        flush_locked(1, 1);
    } else {
        force_ready_locked();
        wait_done_locked(g.enq_seq);
    }
    unlock();
    stop_worker(0);

    lock();
    /* without a completion callback the queue is dropped on the floor */
    while (g.qhead) {
        struct qnode *n = g.qhead;

        g.qhead = n->next;
        free(n);
    }
    g.qtail = NULL;
    free(g.slots);
    g.slots = NULL;
    g.nslots = 0;
    free(g.drops);
    g.drops = NULL;
    g.ndrops = g.capdrops = 0;
    free(g.streams);
    g.streams = NULL;
    g.nstreams = g.capstreams = 0;
    free(g.devs);
    g.devs = NULL;
    g.ndevs = g.capdevs = 0;
    g.req = NULL;
    g.done = NULL;
    atomic_store(&g_ts_cb, NULL);
    defaults_locked();
    g.enq_seq = g.done_seq = g.inflight_seq = 0;
    atomic_store(&fixed, 0); /* every buffer is back: the next release may differ */
    memset(&g.cn, 0, sizeof g.cn);
    g.rng = 0;
    g.warned_dirty = g.warned_reject = 0;
    memset(&g.st, 0, sizeof g.st);
    unlock();

    for (size_t k = 0; k < FC_EXT_KINDS; k++)
        t->ext[k].n = 0;
    t->slot = 0;
    t->last_result = 0;
    t->last_ts = 0;
}

/* ---------------------------------------------------------------- load, unload, fork */

static void fork_prepare(void)
{
    lock();
}

static void fork_parent(void)
{
    unlock();
}

static void fork_child(void)
{
    pthread_mutexattr_t a;

    /* Only the forking thread exists in the child, and no completion thread.  Every
     * buffer out at the fork (current, queued or being delivered) belongs to the parent,
     * which completes it: the child forgets them (no duplicate completions) and requests
     * new buffers for its own records. */
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&g.mu, &a);
    pthread_mutexattr_destroy(&a);
    pthread_cond_init(&g.cv_work, NULL);
    pthread_cond_init(&g.cv_done, NULL);
    g.running = 0;
    g.stop = 0;
    while (g.qhead) {
        struct qnode *n = g.qhead;

        g.qhead = n->next;
        free(n);
    }
    g.qtail = NULL;
    g.st.buffers_pending = 0;
    g.npend = g.pend_head = 0; /* the parent's records, in the parent's buffers */
    g.st.records_pending = 0;
    g.done_seq = g.enq_seq;
    g.inflight_seq = 0;
    free(g.slots);
    g.slots = NULL;
    g.nslots = 0;
    t_self.slot = 0;
    g.pid = (uint32_t)getpid();
}

__attribute__((constructor)) static void fc_load(void)
{
    long lvl;

    pthread_key_create(&g_key, thread_exit);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    env_int("FAKECUPTI_LOG", 0, &lvl);
    g.log = (int)(lvl < 0 ? 0 : lvl > 9 ? 9 : lvl);
    g.pid = (uint32_t)getpid();
    defaults_locked();
    fc_log(1, "loaded (CUPTI API version %u emulated)", FC_VERSION_DEFAULT);
}

__attribute__((destructor)) static void fc_unload(void)
{
    lock();
    g.shutting_down = 1; /* later flushes deliver inline */
    unlock();
    stop_worker(1);
}

/* ---------------------------------------------------------------- CUPTI API */

/* clang-format off */
#define RESULTS(X) \
    X(CUPTI_SUCCESS) X(CUPTI_ERROR_INVALID_PARAMETER) X(CUPTI_ERROR_INVALID_DEVICE) \
    X(CUPTI_ERROR_INVALID_CONTEXT) X(CUPTI_ERROR_INVALID_EVENT_DOMAIN_ID) \
    X(CUPTI_ERROR_INVALID_EVENT_ID) X(CUPTI_ERROR_INVALID_EVENT_NAME) \
    X(CUPTI_ERROR_INVALID_OPERATION) X(CUPTI_ERROR_OUT_OF_MEMORY) X(CUPTI_ERROR_HARDWARE) \
    X(CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT) X(CUPTI_ERROR_API_NOT_IMPLEMENTED) \
    X(CUPTI_ERROR_MAX_LIMIT_REACHED) X(CUPTI_ERROR_NOT_READY) X(CUPTI_ERROR_NOT_COMPATIBLE) \
    X(CUPTI_ERROR_NOT_INITIALIZED) X(CUPTI_ERROR_INVALID_METRIC_ID) \
    X(CUPTI_ERROR_INVALID_METRIC_NAME) X(CUPTI_ERROR_QUEUE_EMPTY) X(CUPTI_ERROR_INVALID_HANDLE) \
    X(CUPTI_ERROR_INVALID_STREAM) X(CUPTI_ERROR_INVALID_KIND) X(CUPTI_ERROR_INVALID_EVENT_VALUE) \
    X(CUPTI_ERROR_DISABLED) X(CUPTI_ERROR_INVALID_MODULE) X(CUPTI_ERROR_INVALID_METRIC_VALUE) \
    X(CUPTI_ERROR_HARDWARE_BUSY) X(CUPTI_ERROR_NOT_SUPPORTED) \
    X(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED) X(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE) \
    X(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_NON_P2P_DEVICES) \
    X(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS) X(CUPTI_ERROR_CDP_TRACING_NOT_SUPPORTED) \
    X(CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED) X(CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE) \
    X(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) X(CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED) \
    X(CUPTI_ERROR_OPENACC_UNDEFINED_ROUTINE) X(CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED) \
    X(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) \
    X(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES) \
    X(CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED) X(CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED) \
    X(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED) X(CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED) \
    X(CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED) X(CUPTI_ERROR_INVALID_CHIP_NAME) \
    X(CUPTI_ERROR_UNKNOWN)
/* clang-format on */

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str)
{
    if (!str)
        return CUPTI_ERROR_INVALID_PARAMETER;
    switch (result) {
#define CASE(r)                                                                                    \
    case r: *str = #r; return CUPTI_SUCCESS;
        RESULTS(CASE)
#undef CASE
    default: return CUPTI_ERROR_INVALID_PARAMETER;
    }
}

static uint32_t fc_version(void)
{
    const struct fc_cuda *c = fc_cuda();
    long v;

    if (c != NULL)
        return c->version;
    if (env_int("FAKECUPTI_VERSION", FC_VERSION_DEFAULT, &v) <= 0 || v < 0 || v > UINT32_MAX)
        v = FC_VERSION_DEFAULT;
    return (uint32_t)v;
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version)
{
    if (!version)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *version = fc_version();
    return CUPTI_SUCCESS;
}

/* libcupti's NVTX injection entry point, which NVTX calls when
 * NVTX_INJECTION64_PATH names the library.  The double records no NVTX
 * ranges: it exports the symbol so that the shim's NVTX arrangement
 * (client-lib/shim.c arrange_nvtx) can be tested, and refuses the
 * injection (0), which leaves NVTX off in a process that calls it. */
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(void *get_export_table);
int InitializeInjectionNvtx2(void *get_export_table)
{
    (void)get_export_table;
    return 0;
}

CUptiResult CUPTIAPI
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                               CUpti_BuffersCallbackCompleteFunc funcBufferCompleted)
{
    if (!funcBufferRequested || !funcBufferCompleted)
        return CUPTI_ERROR_INVALID_PARAMETER;
    CUptiResult gate = fc_v1_gate(1); /* v1 and v2 do not mix */
    if (gate != CUPTI_SUCCESS)
        return gate;
    lock();
    if (g.req && (g.req != funcBufferRequested || g.done != funcBufferCompleted))
        fc_log(1, "buffer callbacks replaced: buffers out now complete to the new pair");
    g.req = funcBufferRequested;
    g.done = funcBufferCompleted;
    g.st.callback_registrations++;
    unlock();
    fc_log(1, "cuptiActivityRegisterCallbacks(%p, %p)", (void *)(uintptr_t)funcBufferRequested,
           (void *)(uintptr_t)funcBufferCompleted);
    return CUPTI_SUCCESS;
}

static CUptiResult set_kind(CUpti_ActivityKind kind, uint8_t on)
{
    if ((int)kind <= CUPTI_ACTIVITY_KIND_INVALID || (int)kind >= CUPTI_ACTIVITY_KIND_COUNT)
        return CUPTI_ERROR_INVALID_KIND;
    CUptiResult gate = fc_v1_gate(1);
    if (gate != CUPTI_SUCCESS)
        return gate;
    lock();
    g.enabled[kind] = on;
    /* the kind overrides earlier per-API settings */
    if (kind == CUPTI_ACTIVITY_KIND_RUNTIME)
        memset(g.rt_ovr, 0, sizeof g.rt_ovr);
    else if (kind == CUPTI_ACTIVITY_KIND_DRIVER)
        memset(g.drv_ovr, 0, sizeof g.drv_ovr);
    unlock();
    fc_log(1, "cuptiActivity%s(%d)", on ? "Enable" : "Disable", (int)kind);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
    return set_kind(kind, 1);
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
    return set_kind(kind, 0);
}

CUptiResult CUPTIAPI cuptiActivityEnableContext(CUcontext context, CUpti_ActivityKind kind)
{
    if ((int)kind <= CUPTI_ACTIVITY_KIND_INVALID || (int)kind >= CUPTI_ACTIVITY_KIND_COUNT)
        return CUPTI_ERROR_INVALID_KIND;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisableContext(CUcontext context, CUpti_ActivityKind kind)
{
    if ((int)kind <= CUPTI_ACTIVITY_KIND_INVALID || (int)kind >= CUPTI_ACTIVITY_KIND_COUNT)
        return CUPTI_ERROR_INVALID_KIND;
    return CUPTI_SUCCESS;
}

static CUptiResult flush_all(uint32_t flag)
{
    struct tstate *t = self();

    if (t->in_callback) {
        fprintf(stderr, "fakecupti: cuptiActivityFlushAll called from a CUPTI buffer callback: "
                        "refused (CUPTI_ERROR_INVALID_OPERATION), it would deadlock\n");
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    lock();
    if ((!g.req || !g.done) && fc_api_mode() != 2) {
        unlock();
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    g.st.flushes++;
    fc_log(1, "cuptiActivityFlushAll(%u)", flag);
    fc_v2_flush_locked(flag); /* multi-subscriber mode: every subscriber, same flag */
    flush_locked((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0, 0);
    unlock();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
    return flush_all(flag);
}

CUptiResult CUPTIAPI cuptiActivityFlush(CUcontext context, uint32_t streamId, uint32_t flag)
{
    return flush_all(flag); /* deprecated: context and stream are ignored */
}

CUptiResult CUPTIAPI cuptiActivityFlushPeriod(uint32_t time)
{
    lock();
    g.period_ms = time;
    if (time && !g.running)
        start_worker_locked();
    pthread_cond_broadcast(&g.cv_work);
    unlock();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes,
                                                CUpti_Activity **record)
{
    uintptr_t base = (uintptr_t)buffer, p;
    size_t off, sz;
    uint32_t kind;

    if (!buffer || !record)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (*record == NULL) {
        off = 0;
    } else {
        p = (uintptr_t)*record;
        if (p < base || p - base >= validBufferSizeBytes)
            return CUPTI_ERROR_INVALID_PARAMETER;
        off = p - base;
        memcpy(&kind, buffer + off, sizeof kind);
        sz = record_size(kind);
        if (!sz)
            return CUPTI_ERROR_INVALID_KIND;
        off += sz;
    }
    if (off >= validBufferSizeBytes)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    if (validBufferSizeBytes - off < sizeof kind)
        return CUPTI_ERROR_INVALID_KIND;
    memcpy(&kind, buffer + off, sizeof kind);
    sz = record_size(kind);
    if (!sz || validBufferSizeBytes - off < sz)
        return CUPTI_ERROR_INVALID_KIND;
    *record = (CUpti_Activity *)(void *)(buffer + off);
    return CUPTI_SUCCESS;
}

/* CUPTI 13.2's cuptiActivityGetStructSize (NVIDIA's CUPTI Activity API
 * reference): the size of a kind's predefined record in the running CUPTI
 * (version 0) or in the CUPTI of API version `version` (130000 or later,
 * else CUPTI_ERROR_NOT_SUPPORTED).  A libcupti before 13.2 does not export
 * it; the double, which exports it always, answers
 * CUPTI_ERROR_API_NOT_IMPLEMENTED when it emulates one.  Kinds the double
 * never writes get their CUDA 13.0 struct's size, as a real 13.x does. */
CUptiResult CUPTIAPI cuptiActivityGetStructSize(CUpti_ActivityKind activityKind, uint32_t version,
                                                size_t *activityStructSize)
{
    struct fc_generation gen;
    size_t sz;

    if (fc_version() < 130200)
        return CUPTI_ERROR_API_NOT_IMPLEMENTED;
    if (!activityStructSize)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (version != 0 && version < 130000)
        return CUPTI_ERROR_NOT_SUPPORTED;
    gen = version == 0 ? fc_gen() : fc_gen_of(version);
    switch ((int)activityKind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: sz = gen.kernel_size; break;
    case CUPTI_ACTIVITY_KIND_MEMCPY: sz = gen.memcpy_size; break;
    case CUPTI_ACTIVITY_KIND_MEMSET: sz = gen.memset_size; break;
    case CUPTI_ACTIVITY_KIND_MEMCPY2: sz = sizeof(CUpti_ActivityMemcpyPtoP4); break;
    case CUPTI_ACTIVITY_KIND_MARKER: sz = sizeof(CUpti_ActivityMarker2); break;
    case CUPTI_ACTIVITY_KIND_MARKER_DATA: sz = sizeof(CUpti_ActivityMarkerData2); break;
    case CUPTI_ACTIVITY_KIND_OVERHEAD: sz = sizeof(CUpti_ActivityOverhead3); break;
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: sz = sizeof(CUpti_ActivityCudaEvent2); break;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: sz = sizeof(CUpti_ActivitySynchronization2); break;
    default: sz = record_size((uint32_t)activityKind); break;
    }
    if (sz == 0)
        return CUPTI_ERROR_INVALID_KIND;
    *activityStructSize = sz;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId,
                                                       size_t *dropped)
{
    if (!dropped)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *dropped = 0;
    if (fc_v1_gate(0) != CUPTI_SUCCESS)
        return CUPTI_ERROR_NOT_COMPATIBLE;
    lock();
    for (size_t i = 0; i < g.ndrops; i++)
        if (g.drops[i].ctx == context && g.drops[i].stream == streamId) {
            *dropped = g.drops[i].n;
            g.drops[i].n = 0; /* reset on read, like CUPTI */
            break;
        }
    unlock();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t *valueSize,
                                               void *value)
{
    size_t w;

    if (!valueSize || !value || (int)attr < 0 || (size_t)attr >= FC_NATTR)
        return CUPTI_ERROR_INVALID_PARAMETER;
    w = attr_width((size_t)attr);
    if (*valueSize < w)
        return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
    lock();
    if (w == sizeof(uint8_t)) {
        uint8_t v = (uint8_t)g.attr[attr];

        memcpy(value, &v, sizeof v);
    } else {
        size_t v = (size_t)g.attr[attr];

        memcpy(value, &v, sizeof v);
    }
    unlock();
    *valueSize = w;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t *valueSize,
                                               void *value)
{
    size_t w;
    uint64_t v;

    if (!valueSize || !value || (int)attr < 0 || (size_t)attr >= FC_NATTR)
        return CUPTI_ERROR_INVALID_PARAMETER;
    w = attr_width((size_t)attr);
    if (*valueSize < w)
        return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
    if (w == sizeof(uint8_t)) {
        uint8_t b;

        memcpy(&b, value, sizeof b);
        v = b;
    } else {
        size_t s;

        memcpy(&s, value, sizeof s);
        v = s;
    }
    lock();
    g.attr[attr] = v;
    unlock();
    fc_log(1, "cuptiActivitySetAttribute(%d, %llu)", (int)attr, (unsigned long long)v);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *timestamp)
{
    if (!timestamp)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (fc_v1_gate(0) != CUPTI_SUCCESS)
        return CUPTI_ERROR_NOT_COMPATIBLE;
    *timestamp = cupti_now();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc funcTimestamp)
{
    if (!funcTimestamp)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (fc_v1_gate(0) != CUPTI_SUCCESS)
        return CUPTI_ERROR_NOT_COMPATIBLE;
    atomic_store(&g_ts_cb, funcTimestamp);
    fc_log(1, "timestamp callback %p registered", (void *)(uintptr_t)funcTimestamp);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                            uint64_t id)
{
    struct tstate *t = self();
    struct extstack *s;

    if ((int)kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || (int)kind >= FC_EXT_KINDS)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (fc_v1_gate(0) != CUPTI_SUCCESS)
        return CUPTI_ERROR_NOT_COMPATIBLE;
    s = &t->ext[kind];
    if (s->n == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 16;
        uint64_t *p = realloc(s->ids, ncap * sizeof *p);

        if (!p)
            return CUPTI_ERROR_OUT_OF_MEMORY;
        s->ids = p;
        s->cap = ncap;
    }
    s->ids[s->n++] = id;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                           uint64_t *lastId)
{
    struct tstate *t = self();
    struct extstack *s;

    if ((int)kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || (int)kind >= FC_EXT_KINDS)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (fc_v1_gate(0) != CUPTI_SUCCESS)
        return CUPTI_ERROR_NOT_COMPATIBLE;
    s = &t->ext[kind];
    if (!s->n)
        return CUPTI_ERROR_QUEUE_EMPTY;
    s->n--;
    if (lastId)
        *lastId = s->ids[s->n];
    return CUPTI_SUCCESS;
}

static CUptiResult set_api(uint8_t *ovr, size_t n, CUpti_CallbackId cbid, uint8_t enable)
{
    if (cbid == 0 || cbid >= n) /* 0 is the INVALID cbid of both domains */
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (fc_v1_gate(0) != CUPTI_SUCCESS)
        return CUPTI_ERROR_NOT_COMPATIBLE;
    lock();
    ovr[cbid] = enable ? 1 : 2;
    unlock();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable)
{
    return set_api(g.rt_ovr, CUPTI_RUNTIME_TRACE_CBID_SIZE, cbid, enable);
}

CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable)
{
    return set_api(g.drv_ovr, CUPTI_DRIVER_TRACE_CBID_SIZE, cbid, enable);
}

CUptiResult CUPTIAPI cuptiActivityEnableHWTrace(uint8_t enable)
{
    long hw;

    env_int("FAKECUPTI_HW_TRACE", 0, &hw);
    if (!enable || hw == 1)
        return CUPTI_SUCCESS;
    return CUPTI_ERROR_NOT_SUPPORTED; /* the H200 (Hopper) has no HES trace */
}

CUptiResult CUPTIAPI cuptiSetThreadIdType(CUpti_ActivityThreadIdType type)
{
    if ((int)type < 0 || type >= CUPTI_ACTIVITY_THREAD_ID_TYPE_SIZE)
        return CUPTI_ERROR_INVALID_PARAMETER;
    lock();
    g.tid_type = type;
    unlock();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetThreadIdType(CUpti_ActivityThreadIdType *type)
{
    if (!type)
        return CUPTI_ERROR_INVALID_PARAMETER;
    lock();
    *type = g.tid_type;
    unlock();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiFinalize(void)
{
    if (self()->in_callback) {
        fprintf(stderr, "fakecupti: cuptiFinalize called from a CUPTI buffer callback: refused\n");
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    fc_log(1, "cuptiFinalize");
    lock();
    /* detach: every buffer goes back, empty ones included */
    if (g.done) {
        flush_locked(1, 1);
    } else {
        force_ready_locked();
        wait_done_locked(g.enq_seq);
    }
    unlock();
    stop_worker(0);
    lock();
    memset(g.enabled, 0, sizeof g.enabled);
    memset(g.rt_ovr, 0, sizeof g.rt_ovr);
    memset(g.drv_ovr, 0, sizeof g.drv_ovr);
    g.req = NULL;
    g.done = NULL;
    g.period_ms = 0;
    atomic_store(&g_ts_cb, NULL);
    for (size_t i = 0; i < g.ndrops; i++)
        g.drops[i].n = 0;
    unlock();
    return CUPTI_SUCCESS;
}

/* ---------------------------------------------------------------- for fakecupti-v2.c */

void fc_lock(void)
{
    lock();
}

void fc_unlock(void)
{
    unlock();
}

uint64_t fc_now(void)
{
    return cupti_now();
}

uint32_t fc_api_version(void)
{
    return fc_version();
}

size_t fc_record_size(uint32_t kind)
{
    return record_size(kind);
}

void fc_enabled_set_locked(uint32_t kind, int on)
{
    if (kind < CUPTI_ACTIVITY_KIND_COUNT)
        g.enabled[kind] = (uint8_t)(on != 0);
}

void fc_v2_enqueue_locked(uint8_t *base, size_t size, size_t valid, size_t nrec, int sub,
                          uint32_t tid)
{
    struct fbuf b = {
        .base = base, .size = size, .valid = valid, .nrec = nrec, .sub = sub, .tid = tid};

    /* The v2 side decided what is complete (fc_v2_flush_locked): as it is. */
    enqueue_locked(&b, 0, 1);
}

/* Waits for every buffer queued to go that may go now (a held one, whose
 * records still run, stays queued). */
void fc_wait_all_locked(void)
{
    uint64_t ticket = g.done_seq;
    for (struct qnode *n = g.qhead; n && n->ready; n = n->next)
        ticket = n->seq;
    wait_done_locked(ticket);
}

void fc_in_callback(int delta)
{
    self()->in_callback += delta;
}

struct fakecupti_stats *fc_stats_locked(void)
{
    return &g.st;
}
