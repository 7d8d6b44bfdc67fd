/*
 * cupti-probe: what real CUPTI does at the edges that cuptimon depends on,
 * measured, so that tests/fakecupti can model it.  Prints one line per
 * event ("E<n> ..."), in the order they happen.
 *
 *  E0  versions: cuptiGetVersion, which v2-era entry points the library
 *      exports, the stride cuptiActivityGetNextRecord walks per kind.
 *  E1  a plain flush (flag 0) while a kernel runs: is its buffer held back,
 *      are records already in it (the shim owns the memory and can look),
 *      does a record written after that flush go into the same buffer, and
 *      when does the held buffer arrive (by itself, or at the next flush
 *      after the kernel ended)?
 *  E2  back-to-back long kernels on one stream, launches paced so that one
 *      always runs, plain flushes every 10 ms: does anything arrive while a
 *      kernel is always running?
 *  E3  a forced flush while a kernel runs: what its record holds, and
 *      whether its completion is delivered afterwards.
 *  E4  correlation ids and record order of runtime calls, a direct driver
 *      launch, copies, memsets and kernels.
 *  E5  (cupti-probe --held S, alone) the shim's setting: 4 MiB buffers,
 *      kernels, copies and memsets, a plain flush a second; one kernel of
 *      S seconds on one stream (none: S = 0) while another launches tiny
 *      kernels flat out for S + 1 s.  Twice a second, a walk of every
 *      buffer CUPTI holds, by record sizes, as the shim's held view does:
 *      records written, the first incomplete one (kind, correlation id,
 *      stream); one line per buffer handed back; the launch rate.
 *
 * Build (no GPU needed): nvcc -O2 -arch=sm_90 -o cupti-probe cupti-probe.cu
 *   -I$CUDA/include -L$CUDA/lib -lcupti -lcuda -ldl
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CK(x)                                                                                      \
    do {                                                                                           \
        CUptiResult r_ = (x);                                                                      \
        if (r_ != CUPTI_SUCCESS) {                                                                 \
            const char *m_ = "";                                                                   \
            cuptiGetResultString(r_, &m_);                                                         \
            printf("CUPTI error %d (%s) at %s\n", (int)r_, m_, #x);                                \
        }                                                                                          \
    } while (0)

#define NBUF 64
static size_t BUFSZ = 256 * 1024;
static int e5_quiet; /* E5: one summary line per buffer handed back */

static uint8_t *bufs[NBUF];
static volatile int held[NBUF]; /* handed to CUPTI, not back yet */
static volatile uint64_t handed_at[NBUF];
static int nbufs;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t t0;
static const char *phase = "E?";

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double ms(uint64_t t)
{
    return t ? (double)(int64_t)(t - t0) / 1e6 : -1.0;
}

static int buf_index(const uint8_t *b)
{
    for (int i = 0; i < nbufs; i++)
        if (bufs[i] == b)
            return i;
    return -1;
}

static void CUPTIAPI on_request(uint8_t **buffer, size_t *size, size_t *maxrec)
{
    pthread_mutex_lock(&mu);
    int i = nbufs < NBUF ? nbufs++ : -1;
    if (i >= 0) {
        bufs[i] = (uint8_t *)aligned_alloc(8, BUFSZ);
        memset(bufs[i], 0, BUFSZ);
        held[i] = 1;
        handed_at[i] = now_ns();
    }
    pthread_mutex_unlock(&mu);
    *buffer = i >= 0 ? bufs[i] : NULL;
    *size = i >= 0 ? BUFSZ : 0;
    *maxrec = 0;
    printf("%s request buf#%d at %.3f ms\n", phase, i, ms(now_ns()));
    fflush(stdout);
}

static const char *kname(uint32_t k)
{
    switch (k) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "kernel";
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "memcpy";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "memset";
    case CUPTI_ACTIVITY_KIND_RUNTIME: return "runtime";
    case CUPTI_ACTIVITY_KIND_DRIVER: return "driver";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return "sync";
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return "overhead";
    default: return "other";
    }
}

static void e5_complete(int i, uint64_t t, const uint8_t *buffer, size_t valid);

static void CUPTIAPI on_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                 size_t valid)
{
    (void)size;
    uint64_t t = now_ns();
    pthread_mutex_lock(&mu);
    int i = buf_index(buffer);
    if (i >= 0)
        held[i] = 0;
    pthread_mutex_unlock(&mu);
    if (e5_quiet) {
        e5_complete(i, t, buffer, valid);
        return;
    }
    printf("%s complete buf#%d at %.3f ms valid %zu ctx %p stream %u\n", phase, i, ms(t), valid,
           (void *)ctx, stream);
    CUpti_Activity *r = NULL;
    uint8_t *prev = NULL;
    uint32_t prevkind = 0;
    while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
        if (prev)
            printf("%s   stride %s %ld\n", phase, kname(prevkind), (long)((uint8_t *)r - prev));
        prev = (uint8_t *)r;
        prevkind = r->kind;
        switch (r->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)r;
            printf("%s   kernel corr %u stream %u start %.3f end %.3f completed %.3f dur %.3f ms "
                   "name %s\n",
                   phase, k->correlationId, k->streamId, ms(k->start), ms(k->end),
                   ms(k->completed), k->end && k->start ? (k->end - k->start) / 1e6 : -1.0,
                   k->name ? k->name : "(null)");
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)r;
            printf("%s   memcpy corr %u copyKind %u start %.3f end %.3f\n", phase, m->correlationId,
                   m->copyKind, ms(m->start), ms(m->end));
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)r;
            printf("%s   memset corr %u start %.3f end %.3f\n", phase, m->correlationId,
                   ms(m->start), ms(m->end));
            break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: {
            CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)r;
            printf("%s   %s cbid %u corr %u start %.3f end %.3f tid %u\n", phase, kname(r->kind),
                   a->cbid, a->correlationId, ms(a->start), ms(a->end), a->threadId);
            break;
        }
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
            CUpti_ActivitySynchronization2 *s = (CUpti_ActivitySynchronization2 *)r;
            printf("%s   sync type %u corr %u start %.3f end %.3f\n", phase, (unsigned)s->type,
                   s->correlationId, ms(s->start), ms(s->end));
            break;
        }
        default: printf("%s   kind %u\n", phase, (unsigned)r->kind);
        }
    }
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped);
    if (dropped)
        printf("%s   dropped %zu\n", phase, dropped);
    fflush(stdout);
}

/* What CUPTI has written so far into the buffers it holds: the last
 * non-zero byte of each (the buffers were zeroed when handed out). */
static void peek(const char *what)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nbufs; i++) {
        if (!held[i])
            continue;
        size_t last = 0;
        for (size_t o = 0; o < BUFSZ; o++)
            if (bufs[i][o])
                last = o + 1;
        uint32_t kind0 = 0;
        memcpy(&kind0, bufs[i], 4);
        printf("%s peek(%s) buf#%d held, written up to byte %zu, first kind %u\n", phase, what, i,
               last, kind0);
    }
    pthread_mutex_unlock(&mu);
    fflush(stdout);
}

static void flush(uint32_t flag, const char *what)
{
    uint64_t a = now_ns();
    printf("%s flush(%s) begin at %.3f ms\n", phase, what, ms(a));
    fflush(stdout);
    CK(cuptiActivityFlushAll(flag));
    printf("%s flush(%s) returned at %.3f ms\n", phase, what, ms(now_ns()));
    fflush(stdout);
}

__global__ void spin(long long ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while ((long long)(now - start) < ns);
}

__global__ void tiny(int *p)
{
    if (p)
        p[threadIdx.x] += 1;
}

static void sleep_ms(double m)
{
    struct timespec ts = {(time_t)(m / 1000), (long)((m - (time_t)(m / 1000) * 1000) * 1e6)};
    nanosleep(&ts, NULL);
}


/* ---- E5 helpers: the shim's walk, by sizes, of what CUPTI has written */
static uint32_t rec_size(uint32_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    default: return 0;
    }
}

struct walked {
    size_t end;          /* bytes walked */
    uint32_t recs, inc;  /* records, incomplete ones */
    long first_inc;      /* offset of the first incomplete record, -1: none */
    uint32_t stop_kind;  /* a kind whose size is unknown stopped the walk (0: none) */
    uint64_t long_recs;  /* kernel records of more than 0.5 s */
};

static struct walked walk_buf(const uint8_t *b, size_t limit)
{
    struct walked w = {0, 0, 0, -1, 0, 0};
    while (w.end + 8 <= limit) {
        uint32_t kind = __atomic_load_n((const uint32_t *)(b + w.end), __ATOMIC_RELAXED);
        if (kind == 0)
            break;
        uint32_t size = rec_size(kind & 0x7fffffffu);
        if (size == 0 || w.end + size > limit) {
            w.stop_kind = kind;
            break;
        }
        if (kind & 0x80000000u) {
            if (w.first_inc < 0)
                w.first_inc = (long)w.end;
            w.inc++;
        } else if ((kind & 0x7fffffffu) == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)(b + w.end);
            if (k->end > k->start && k->end - k->start > 500000000ull)
                w.long_recs++;
        }
        w.recs++;
        w.end += size;
    }
    return w;
}

static void e5_complete(int i, uint64_t t, const uint8_t *buffer, size_t valid)
{
    struct walked w = walk_buf(buffer, valid);
    size_t tail = 0; /* written bytes past valid */
    for (size_t o = valid; buffer && o < BUFSZ; o += 8)
        if (*(const uint64_t *)(buffer + o))
            tail = o + 8 - valid;
    printf("E5 complete buf#%d at %.3f ms valid %zu records %u incomplete %u long-kernels %llu "
           "stop-kind 0x%x written-past-valid %zu\n",
           i, ms(t), valid, w.recs, w.inc, (unsigned long long)w.long_recs, w.stop_kind, tail);
    fflush(stdout);
}

static volatile uint64_t e5_launched;

static void e5_peek(void)
{
    pthread_mutex_lock(&mu);
    int shown = 0;
    for (int i = 0; i < nbufs; i++) {
        if (!held[i])
            continue;
        struct walked w = walk_buf(bufs[i], BUFSZ);
        char head[160] = "";
        if (w.first_inc >= 0) {
            CUpti_ActivityKernel10 k;
            memcpy(&k, bufs[i] + w.first_inc, 8);
            uint32_t kind = (uint32_t)*(const uint32_t *)(bufs[i] + w.first_inc) & 0x7fffffffu;
            if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
                memcpy(&k, bufs[i] + w.first_inc, sizeof k);
                snprintf(head, sizeof head, " head: kernel corr %u stream %u grid %u name %s",
                         k.correlationId, k.streamId, k.gridX, k.name ? k.name : "(null)");
            } else {
                snprintf(head, sizeof head, " head: kind %u", kind);
            }
        }
        printf("E5 peek at %.3f ms launched %llu buf#%d held: %u records (%zu bytes), %u "
               "incomplete, first at %ld, stop-kind 0x%x%s\n",
               ms(now_ns()), (unsigned long long)e5_launched, i, w.recs, w.end, w.inc,
               w.first_inc, w.stop_kind, head);
        shown++;
    }
    if (!shown)
        printf("E5 peek at %.3f ms launched %llu: no buffer held\n", ms(now_ns()),
               (unsigned long long)e5_launched);
    pthread_mutex_unlock(&mu);
    fflush(stdout);
}

/* Pre-zeroed buffers, the callbacks, the GPU kinds the shim enables. */
static void enable_activity(void)
{
    uint8_t one = 1;
    size_t sz = 1;
    CK(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &one));
    CK(cuptiActivityRegisterCallbacks(on_request, on_complete));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
}

static volatile int e5_stop;

static void *e5_watch(void *arg)
{
    (void)arg;
    int n = 0;
    while (!e5_stop) {
        sleep_ms(500);
        e5_peek();
        if (++n % 2 == 0) {
            CK(cuptiActivityFlushAll(0));
            printf("E5 plain flush at %.3f ms\n", ms(now_ns()));
            fflush(stdout);
        }
    }
    return NULL;
}

static int e5(double hold_s)
{
    BUFSZ = 4u << 20;
    e5_quiet = 1;
    phase = "E5";
    enable_activity();
    cudaStream_t hs, ls;
    int *d = NULL;
    char *src = NULL, *dst = NULL;
    cudaFree(0);
    cudaStreamCreateWithFlags(&hs, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&ls, cudaStreamNonBlocking);
    cudaMalloc(&d, 4096);
    cudaMalloc(&src, 65536);
    cudaMalloc(&dst, 65536);
    spin<<<1, 1, 0, hs>>>(1000);
    tiny<<<1, 32, 0, ls>>>(d);
    cudaDeviceSynchronize();
    CK(cuptiActivityFlushAll(0));
    pthread_t th;
    pthread_create(&th, NULL, e5_watch, NULL);
    printf("E5 hold %.1f s: launch spin on hs at %.3f\n", hold_s, ms(now_ns()));
    if (hold_s > 0)
        spin<<<1, 1, 0, hs>>>((long long)(hold_s * 1e9));
    uint64_t a = now_ns(), until = a + (uint64_t)((hold_s > 0 ? hold_s + 1 : 3) * 1e9), n = 0;
    while (now_ns() < until) {
        for (int k = 0; k < 64; k++) {
            tiny<<<1, 32, 0, ls>>>(d);
            if (++n % 1000 == 0) {
                cudaMemcpyAsync(dst, src, 65536, cudaMemcpyDeviceToDevice, ls);
                cudaMemsetAsync(dst, 0, 65536, ls);
            }
        }
        e5_launched = n;
    }
    uint64_t b = now_ns();
    printf("E5 launched %llu tiny kernels in %.3f s (%.0f/s); synchronizing\n",
           (unsigned long long)n, (b - a) / 1e9, n / ((b - a) / 1e9));
    cudaDeviceSynchronize();
    printf("E5 synchronized at %.3f\n", ms(now_ns()));
    sleep_ms(1200);
    e5_stop = 1;
    pthread_join(th, NULL);
    flush(0, "plain at the end");
    flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, "forced at the end");
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped);
    printf("E5 end: %d buffers requested, dropped %zu\n", nbufs, dropped);
    return 0;
}

int main(int argc, char **argv)
{
    t0 = now_ns();
    if (argc == 3 && strcmp(argv[1], "--held") == 0)
        return e5(atof(argv[2]));
    phase = "E0";
    uint32_t v = 0;
    CK(cuptiGetVersion(&v));
    printf("E0 cuptiGetVersion %u\n", v);
    const char *v2names[] = {"cuptiActivityGetStructSize", "cuptiSubscribe_v2",
                             "cuptiActivityEnable_v2", "cuptiActivityGetNextRecord_v2",
                             "cuptiGetTimestamp_v2"};
    for (size_t i = 0; i < sizeof v2names / sizeof v2names[0]; i++)
        printf("E0 dlsym %s: %s\n", v2names[i], dlsym(RTLD_DEFAULT, v2names[i]) ? "yes" : "no");
    Dl_info di;
    if (dladdr((void *)cuptiGetVersion, &di))
        printf("E0 libcupti %s\n", di.dli_fname);
    printf("E0 sizeof Kernel10 %zu Memcpy6 %zu Memset4 %zu API %zu\n",
           sizeof(CUpti_ActivityKernel10), sizeof(CUpti_ActivityMemcpy6),
           sizeof(CUpti_ActivityMemset4), sizeof(CUpti_ActivityAPI));

    enable_activity();

    cudaStream_t s1, s2;
    cudaFree(0);
    cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    int *d = NULL;
    cudaMalloc(&d, 1 << 20);
    /* warm up: module load, first launch */
    spin<<<1, 1, 0, s1>>>(1000);
    tiny<<<1, 32, 0, s1>>>(d);
    cudaDeviceSynchronize();
    flush(0, "warmup");
    flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, "warmup-forced");

    /* ---- E1 */
    phase = "E1";
    printf("E1 launch spin 100ms on s1 at %.3f\n", ms(now_ns()));
    spin<<<1, 1, 0, s1>>>(100000000LL);
    sleep_ms(20);
    peek("running, before flush");
    flush(0, "plain, kernel running");
    peek("after plain flush");
    sleep_ms(10);
    printf("E1 launch tiny on s2 at %.3f\n", ms(now_ns()));
    tiny<<<1, 32, 0, s2>>>(d);
    cudaStreamSynchronize(s2);
    sleep_ms(5);
    peek("tiny done");
    flush(0, "plain, spin still running, tiny done");
    peek("after 2nd plain flush");
    cudaStreamSynchronize(s1);
    printf("E1 spin done at %.3f; waiting 600 ms without flushing\n", ms(now_ns()));
    sleep_ms(600);
    peek("600ms after spin done");
    flush(0, "plain, all done");
    peek("after 3rd plain flush");

    /* ---- E2 */
    phase = "E2";
    printf("E2 start at %.3f\n", ms(now_ns()));
    {
        uint64_t next_flush = now_ns() + 10000000ull;
        for (int k = 0; k < 8; k++) {
            spin<<<1, 1, 0, s1>>>(30000000LL);
            printf("E2 launched spin#%d at %.3f\n", k, ms(now_ns()));
            uint64_t until = now_ns() + 30000000ull;
            while (now_ns() < until) {
                if (now_ns() >= next_flush) {
                    CK(cuptiActivityFlushAll(0));
                    next_flush += 10000000ull;
                }
                sleep_ms(1);
            }
        }
        printf("E2 all launched at %.3f\n", ms(now_ns()));
        cudaStreamSynchronize(s1);
        printf("E2 synchronized at %.3f\n", ms(now_ns()));
        flush(0, "plain after sync");
    }

    /* ---- E3 */
    phase = "E3";
    printf("E3 launch spin 100ms on s1 at %.3f\n", ms(now_ns()));
    spin<<<1, 1, 0, s1>>>(100000000LL);
    sleep_ms(20);
    flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, "forced, kernel running");
    cudaStreamSynchronize(s1);
    printf("E3 spin done at %.3f\n", ms(now_ns()));
    sleep_ms(50);
    flush(0, "plain after");
    flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, "forced after");

    /* ---- E4 */
    phase = "E4";
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
    {
        static int host[1024];
        cudaMemsetAsync(d, 0, 4096, s1);
        cudaMemcpyAsync(d, host, sizeof host, cudaMemcpyHostToDevice, s1);
        tiny<<<1, 32, 0, s1>>>(d);
        tiny<<<1, 32, 0, s2>>>(d);
        cudaMemcpyAsync(host, d, sizeof host, cudaMemcpyDeviceToHost, s1);
        cudaMemsetAsync(d, 1, 4096, s2);
        cudaFunction_t f;
        if (cudaGetFuncBySymbol(&f, (const void *)tiny) == cudaSuccess) {
            int *arg = d;
            void *params[] = {&arg};
            CUresult cr = cuLaunchKernel((CUfunction)f, 1, 1, 1, 32, 1, 1, 0, (CUstream)s1, params,
                                         NULL);
            printf("E4 cuLaunchKernel direct: %d\n", (int)cr);
        }
        tiny<<<1, 32, 0, s1>>>(d);
        cudaStreamSynchronize(s1);
        cudaStreamSynchronize(s2);
        flush(0, "plain");
    }
    CK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME));
    CK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER));
    CK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));

    phase = "END";
    flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, "exit");
    printf("END at %.3f\n", ms(now_ns()));
    return 0;
}
