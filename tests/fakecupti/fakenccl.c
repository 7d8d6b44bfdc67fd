/*
 * fakenccl: a double of NCCL's side of the profiler plugin contract
 * (issue 46), so that the shim's plugin is tested without a GPU.
 *
 * As NCCL does (src/plugin/profiler.cc, plugins/profiler/README.md): after
 * CUDA's init (here the test double's, which starts an injected shim), it
 * reads NCCL_PROFILER_PLUGIN, dlopens it as given (a name without '/' as
 * libnccl-profiler-NAME.so), and looks for ncclProfiler_vN from the newest
 * version it knows (--max-version, at most 6) down to 1.  Then, per
 * communicator, init; per collective, on the "user" thread: Coll start,
 * the kernel launch (a fake ncclDevKernel_* on the communicator's stream),
 * Coll stop (NCCL's stop means enqueued); on a "proxy" thread: per channel
 * a KernelCh start with the GPU timer, recordEventState(KernelChStop) with
 * the timer at the end, KernelCh stop.  Point-to-point operations the same
 * way with P2p events.  At the end finalize.  Every operation it drove is
 * written to --log, one line each, so that a test compares the archive with
 * it exactly.
 *
 * Each version as the NCCL that offers it at most drives it (NCCL's
 * src/plugin/profiler.cc of 2.23, 2.24, 2.25-2.27; profiler_v1.cc ..
 * profiler_v3.cc for what a newer NCCL passes an old plugin):
 *  - v1-v4: each operation's kernel plan first starts a Group event (the
 *    mask need not ask for it), and its Coll and P2p events only when the
 *    plugin gave the group a non-NULL handle, with the group as parent;
 *    the group stops after them;
 *  - v1-v3: init(context, mask) and nothing else; each Coll and P2p
 *    carries its communicator's name and hash (init does not); v1 passes
 *    func, datatype, algo and proto as NCCL's enums (nccl_common.h's
 *    numbering), v2+ as strings; Coll says nMaxChannels, P2p no channels;
 *  - v1, v2: no kernel channel event exists (KernelCh is v3's);
 *  - v3: KernelCh start (channelId, no GPU timer) and stop, no state (v3
 *    has no KernelChStop; its state args have no timer), for p2p too;
 *  - v4+: as above; v5+: API events.
 *
 *   --comms N --ranks R --rank r   N communicators of R ranks; this is rank r
 *   --colls K                      collectives per communicator (and K/4 sends)
 *   --lag-ms MS --lag-at I         sleep MS before the collective I of
 *                                  communicator 0 (this rank is behind)
 *   --hang-ms MS                   the last collective of communicator 0
 *                                  stays in flight MS (its kernel runs) before it ends
 *   --hostile                      NULL descriptors, over-long strings, unknown
 *                                  event types, foreign handles, a NULL context
 *   --captured K                   (v5+) the first K collectives of communicator 0
 *                                  are captured into a CUDA graph
 *   --max-version V                the newest plugin version this "NCCL" knows
 *   --log FILE
 *   --bench N                      instead: N collectives of 2 channels each on
 *                                  one communicator, back to back on this thread,
 *                                  and print the plugin's cost per collective
 *                                  (JSON) -- what NCCL's threads pay for it
 */
#include "config.h"

#include <dlfcn.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fakecupti.h"
#include "nccl-abi.h"

static int ncomms = 2, nranks = 2, myrank = 0, ncolls = 50, lag_ms = 0, lag_at = -1, hang_ms = 0;
static int hostile = 0, max_version = 6;
static long bench_n = 0;
static int ncaptured = 0;
static FILE *oplog;
static int version;
static const ncclProfiler_v6_t *p6;
static const ncclProfiler_v5_t *p5;
static const ncclProfiler_v4_t *p4;
static const ncclProfiler_v3_t *p3;
static const ncclProfiler_v2_t *p2;
static const ncclProfiler_v1_t *p1;
/* The communicators, for v1-v3's events, which carry their name and hash. */
#define MAX_COMMS 16
static void *ctx[MAX_COMMS];
static char cname[MAX_COMMS][200];

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The proxy thread: kernel channels of enqueued operations, in order. */
struct work {
    void *handle;
    int nch;
    int hold_ms;
};
static int proxy_pipe[2];

/* NCCL 2.23's enums (src/include/nccl_common.h, nccl.h, devcomm.h), which
 * v1 passes where later versions pass their names. */
static uint8_t v1_enum(const char *const *names, int n, const char *s)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(names[i], s) == 0)
            return (uint8_t)i;
    return 255; /* no name of NCCL's */
}
static const char *const v1_funcs[] = {"Broadcast", "Reduce",   "AllGather", "ReduceScatter",
                                       "AllReduce", "SendRecv", "Send",      "Recv"};
static const char *const v1_types[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",
                                       "ncclInt64",   "ncclUint64",  "ncclFloat16", "ncclFloat32",
                                       "ncclFloat64", "ncclBfloat16"};
static const char *const v1_algos[] = {
    "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
static const char *const v1_protos[] = {"LL", "LL128", "SIMPLE"};
#define V1ENUM(a, s) v1_enum((a), (int)(sizeof(a) / sizeof((a)[0])), (s))

static int comm_of(const void *c)
{
    for (int i = 0; i < MAX_COMMS; i++)
        if (ctx[i] == c)
            return i;
    return 0;
}

/* v1-v3: the members they share, in a layout of their own each. */
#define FILL_V123(D, d, c)                                                                         \
    do {                                                                                           \
        (D).type = (uint8_t)(d)->type;                                                             \
        (D).parentObj = (d)->parentObj;                                                            \
        (D).rank = (d)->rank;                                                                      \
        if ((d)->type == ncclProfileColl) {                                                        \
            (D).coll.name = cname[c];                                                              \
            (D).coll.commHash = 0x1000u + (uint64_t)(c);                                           \
            (D).coll.seqNumber = (d)->coll.seqNumber;                                              \
            (D).coll.sendBuff = (d)->coll.sendBuff;                                                \
            (D).coll.recvBuff = (d)->coll.recvBuff;                                                \
            (D).coll.count = (d)->coll.count;                                                      \
            (D).coll.root = (d)->coll.root;                                                        \
            (D).coll.nMaxChannels = (d)->coll.nChannels;                                           \
            (D).coll.nWarps = (d)->coll.nWarps;                                                    \
        } else if ((d)->type == ncclProfileP2p) {                                                  \
            (D).p2p.name = cname[c];                                                               \
            (D).p2p.commHash = 0x1000u + (uint64_t)(c);                                            \
            (D).p2p.buff = (d)->p2p.buff;                                                          \
            (D).p2p.count = (d)->p2p.count;                                                        \
            (D).p2p.peer = (d)->p2p.peer;                                                          \
        }                                                                                          \
    } while (0)

static ncclResult_t pstart_v123(void *cx, void **h, ncclProfilerEventDescr_v6_t *d)
{
    int c = comm_of(cx);
    if (d->type == ncclProfileKernelCh && version < 3)
        return ncclSuccess; /* no such event before v3 */
    if (version == 1) {
        ncclProfilerEventDescr_v1_t d1;
        memset(&d1, 0, sizeof d1);
        FILL_V123(d1, d, c);
        if (d->type == ncclProfileColl) {
            d1.coll.func = V1ENUM(v1_funcs, d->coll.func);
            d1.coll.datatype = V1ENUM(v1_types, d->coll.datatype);
            d1.coll.op = 0; /* ncclSum */
            d1.coll.trafficBytes = d->coll.count * 4;
            d1.coll.algo = V1ENUM(v1_algos, d->coll.algo);
            d1.coll.proto = V1ENUM(v1_protos, d->coll.proto);
        } else if (d->type == ncclProfileP2p) {
            d1.p2p.func = V1ENUM(v1_funcs, d->p2p.func);
            d1.p2p.datatype = V1ENUM(v1_types, d->p2p.datatype);
        }
        return p1->startEvent(cx, h, &d1);
    }
    if (version == 2) {
        ncclProfilerEventDescr_v2_t d2;
        memset(&d2, 0, sizeof d2);
        FILL_V123(d2, d, c);
        if (d->type == ncclProfileColl) {
            d2.coll.func = d->coll.func;
            d2.coll.datatype = d->coll.datatype;
            d2.coll.trafficBytes = d->coll.count * 4;
            d2.coll.algo = d->coll.algo;
            d2.coll.proto = d->coll.proto;
        } else if (d->type == ncclProfileP2p) {
            d2.p2p.func = d->p2p.func;
            d2.p2p.datatype = d->p2p.datatype;
        }
        return p2->startEvent(cx, h, &d2);
    }
    ncclProfilerEventDescr_v3_t d3;
    memset(&d3, 0, sizeof d3);
    FILL_V123(d3, d, c);
    if (d->type == ncclProfileColl) {
        d3.coll.func = d->coll.func;
        d3.coll.datatype = d->coll.datatype;
        d3.coll.algo = d->coll.algo;
        d3.coll.proto = d->coll.proto;
    } else if (d->type == ncclProfileP2p) {
        d3.p2p.func = d->p2p.func;
        d3.p2p.datatype = d->p2p.datatype;
    } else if (d->type == ncclProfileKernelCh) {
        d3.kernelCh.channelId = d->kernelCh.channelId; /* no timer in v3 */
    }
    return p3->startEvent(cx, h, &d3);
}

static ncclResult_t pstart(void *ctx_, void **h, ncclProfilerEventDescr_v6_t *d)
{
    if (version == 6)
        return p6->startEvent(ctx_, h, d);
    /* v5's descriptor is v6's without the CE members: the same bytes. */
    if (version == 5)
        return p5->startEvent(ctx_, h, (ncclProfilerEventDescr_v5_t *)(void *)d);
    if (version <= 3)
        return pstart_v123(ctx_, h, d);
    ncclProfilerEventDescr_v4_t d4;
    memset(&d4, 0, sizeof d4);
    d4.type = (uint8_t)d->type;
    d4.parentObj = d->parentObj;
    d4.rank = d->rank;
    if (d->type == ncclProfileColl) {
        d4.coll.seqNumber = d->coll.seqNumber;
        d4.coll.func = d->coll.func;
        d4.coll.count = d->coll.count;
        d4.coll.root = d->coll.root;
        d4.coll.datatype = d->coll.datatype;
        d4.coll.nChannels = d->coll.nChannels;
        d4.coll.nWarps = d->coll.nWarps;
        d4.coll.algo = d->coll.algo;
        d4.coll.proto = d->coll.proto;
    } else if (d->type == ncclProfileP2p) {
        d4.p2p.func = d->p2p.func;
        d4.p2p.datatype = d->p2p.datatype;
        d4.p2p.count = d->p2p.count;
        d4.p2p.peer = d->p2p.peer;
        d4.p2p.nChannels = d->p2p.nChannels;
    } else if (d->type == ncclProfileKernelCh) {
        d4.kernelCh.channelId = d->kernelCh.channelId;
        d4.kernelCh.pTimer = d->kernelCh.pTimer;
    }
    return p4->startEvent(ctx_, h, &d4);
}

static ncclResult_t pstop(void *h)
{
    switch (version) {
    case 6: return p6->stopEvent(h);
    case 5: return p5->stopEvent(h);
    case 4: return p4->stopEvent(h);
    case 3: return p3->stopEvent(h);
    case 2: return p2->stopEvent(h);
    default: return p1->stopEvent(h);
    }
}

static ncclResult_t pstate(void *h, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v4_t *a)
{
    /* v1-v3 have no kernel channel state (KernelChStop is v4's): the only
     * state this double sends does not exist there. */
    if (version <= 3)
        return ncclSuccess;
    return version == 6   ? p6->recordEventState(h, s, a)
           : version == 5 ? p5->recordEventState(h, s, a)
                          : p4->recordEventState(h, s, a);
}

static ncclResult_t pinit(void **c, uint64_t id, int *mask, const char *name, int nodes, int ranks,
                          int rank)
{
    switch (version) {
    case 6: return p6->init(c, id, mask, name, nodes, ranks, rank, NULL);
    case 5: return p5->init(c, id, mask, name, nodes, ranks, rank, NULL);
    case 4: return p4->init(c, mask, name, id, nodes, ranks, rank, NULL);
    case 3: return p3->init(c, mask); /* v1-v3: nothing of the communicator */
    case 2: return p2->init(c, mask);
    default: return p1->init(c, mask);
    }
}

static ncclResult_t pfinalize(void *c)
{
    switch (version) {
    case 6: return p6->finalize(c);
    case 5: return p5->finalize(c);
    case 4: return p4->finalize(c);
    case 3: return p3->finalize(c);
    case 2: return p2->finalize(c);
    default: return p1->finalize(c);
    }
}

/* v1-v4: the kernel plan's Group event, before its operations' events
 * (NCCL starts them only under a non-NULL group handle). */
static void *group_start(void *cx)
{
    if (version > 4)
        return (void *)1; /* not this NCCL's hierarchy: no gate */
    ncclProfilerEventDescr_v6_t g;
    memset(&g, 0, sizeof g);
    g.type = ncclProfileGroup;
    void *h = NULL;
    pstart(cx, &h, &g);
    if (h == NULL) {
        static int said;
        if (!said++)
            fprintf(stderr, "fakenccl: the plugin gave a Group event a NULL handle: NCCL "
                            "starts no Coll or P2p event under it\n");
    }
    return h;
}

static void group_stop(void *g)
{
    if (version <= 4 && g != NULL)
        pstop(g);
}

static void *proxy(void *arg)
{
    (void)arg;
    struct work w;
    while (read(proxy_pipe[0], &w, sizeof w) == (ssize_t)sizeof w) {
        if (w.handle == NULL)
            break;
        void *ch[64] = {0};
        for (int c = 0; c < w.nch; c++) {
            ncclProfilerEventDescr_v6_t d;
            memset(&d, 0, sizeof d);
            d.type = ncclProfileKernelCh;
            d.parentObj = w.handle;
            d.rank = myrank;
            d.kernelCh.channelId = (uint8_t)c;
            d.kernelCh.pTimer = now_ns();
            pstart(NULL, &ch[c], &d);
        }
        if (w.hold_ms)
            usleep((useconds_t)w.hold_ms * 1000);
        for (int c = 0; c < w.nch; c++) {
            ncclProfilerEventStateArgs_v4_t a = {.kernelCh = {.pTimer = now_ns()}};
            pstate(ch[c], ncclProfilerKernelChStop, &a);
            pstop(ch[c]);
        }
    }
    return NULL;
}

static const char *const funcs[] = {"AllReduce", "Broadcast", "AllGather", "ReduceScatter"};
static const char *const kernels[] = {
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ncclDevKernel_Broadcast_RING_LL",
    "ncclDevKernel_AllGather_RING_LL", "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL"};

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"comms", 1, 0, 'c'},
                                         {"ranks", 1, 0, 'R'},
                                         {"rank", 1, 0, 'r'},
                                         {"colls", 1, 0, 'k'},
                                         {"lag-ms", 1, 0, 'l'},
                                         {"lag-at", 1, 0, 'a'},
                                         {"hang-ms", 1, 0, 'H'},
                                         {"hostile", 0, 0, 'x'},
                                         {"max-version", 1, 0, 'v'},
                                         {"log", 1, 0, 'L'},
                                         {"bench", 1, 0, 'b'},
                                         {"captured", 1, 0, 'g'},
                                         {0, 0, 0, 0}};
    int o;
    const char *logpath = NULL;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'c': ncomms = atoi(optarg); break;
        case 'R': nranks = atoi(optarg); break;
        case 'r': myrank = atoi(optarg); break;
        case 'k': ncolls = atoi(optarg); break;
        case 'l': lag_ms = atoi(optarg); break;
        case 'a': lag_at = atoi(optarg); break;
        case 'H': hang_ms = atoi(optarg); break;
        case 'x': hostile = 1; break;
        case 'v': max_version = atoi(optarg); break;
        case 'b': bench_n = atol(optarg); break;
        case 'g': ncaptured = atoi(optarg); break;
        case 'L': logpath = optarg; break;
        default: fprintf(stderr, "fakenccl: bad option\n"); return 2;
        }
    }
    oplog = logpath ? fopen(logpath, "w") : NULL;
    if (logpath && !oplog) {
        perror(logpath);
        return 2;
    }
    /* CUDA first, as in any NCCL job: an injected shim starts here. */
    if (fakecuda_init() < 0)
        return 1;
    const char *name = getenv("NCCL_PROFILER_PLUGIN");
    if (name == NULL || !*name || strcmp(name, "none") == 0) {
        fprintf(stderr, "fakenccl: no profiler plugin (NCCL_PROFILER_PLUGIN=%s)\n",
                name ? name : "(unset)");
        return 3;
    }
    char path[600];
    if (strchr(name, '/'))
        snprintf(path, sizeof path, "%s", name);
    else
        snprintf(path, sizeof path, "libnccl-profiler-%s.so", name);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "fakenccl: cannot load profiler plugin %s: %s\n", path, dlerror());
        return 3;
    }
    if (max_version > 6) {
        fprintf(stderr,
                "fakenccl: this double knows plugin versions 1 to 6, not %d; looking "
                "for v6 and older\n",
                max_version);
        max_version = 6;
    }
    if (max_version < 1) {
        fprintf(stderr, "fakenccl: --max-version %d: plugin versions start at 1\n", max_version);
        return 2;
    }
    for (int v = max_version; v >= 1 && !version; v--) {
        char sym[32];
        snprintf(sym, sizeof sym, "ncclProfiler_v%d", v);
        void *s = dlsym(h, sym);
        if (s == NULL)
            continue;
        version = v;
        switch (v) {
        case 6: p6 = s; break;
        case 5: p5 = s; break;
        case 4: p4 = s; break;
        case 3: p3 = s; break;
        case 2: p2 = s; break;
        default: p1 = s; break;
        }
    }
    if (!version) {
        fprintf(stderr, "fakenccl: %s has no ncclProfiler_v1..v%d\n", path, max_version);
        return 3;
    }
    fprintf(stderr, "fakenccl: using ncclProfiler_v%d of %s\n", version, path);

    if (bench_n > 0) {
        /* The plugin's cost on NCCL's threads: everything NCCL calls for a
         * collective of two channels, timed together (the IO thread drains
         * the queue meanwhile, as in a job). */
        void *bctx = NULL;
        int m = 0;
        pinit(&bctx, 0x2000, &m, "bench", 1, 2, 0);
        ctx[0] = bctx;
        snprintf(cname[0], sizeof cname[0], "bench");
        uint64_t t0 = now_ns();
        for (long i = 0; i < bench_n; i++) {
            ncclProfilerEventDescr_v6_t d;
            memset(&d, 0, sizeof d);
            d.type = ncclProfileColl;
            d.coll.seqNumber = (uint64_t)i;
            d.coll.func = "AllReduce";
            d.coll.count = 1024;
            d.coll.root = -1;
            d.coll.datatype = "ncclFloat32";
            d.coll.nChannels = 2;
            d.coll.algo = "RING";
            d.coll.proto = "LL";
            void *ev = NULL, *ch[2] = {NULL, NULL};
            pstart(bctx, &ev, &d);
            pstop(ev);
            for (int c = 0; c < 2; c++) {
                ncclProfilerEventDescr_v6_t k;
                memset(&k, 0, sizeof k);
                k.type = ncclProfileKernelCh;
                k.parentObj = ev;
                k.kernelCh.channelId = (uint8_t)c;
                k.kernelCh.pTimer = 1000 + (uint64_t)i;
                pstart(NULL, &ch[c], &k);
            }
            for (int c = 0; c < 2; c++) {
                ncclProfilerEventStateArgs_v4_t a = {.kernelCh = {.pTimer = 2000 + (uint64_t)i}};
                pstate(ch[c], ncclProfilerKernelChStop, &a);
                pstop(ch[c]);
            }
        }
        uint64_t t1 = now_ns();
        printf("{\"bench\":\"nccl-plugin\",\"version\":%d,\"collectives\":%ld,"
               "\"ns_per_collective\":%.1f}\n",
               version, bench_n, (double)(t1 - t0) / (double)bench_n);
        pfinalize(bctx);
        return 0;
    }
    if (pipe(proxy_pipe) < 0)
        return 1;
    pthread_t pt;
    pthread_create(&pt, NULL, proxy, NULL);

    int masks[MAX_COMMS] = {0};
    for (int c = 0; c < ncomms && c < MAX_COMMS; c++) {
        uint64_t id = 0x1000u + (uint64_t)c;
        snprintf(cname[c], sizeof cname[c], "pg%d", c);
        if (hostile && c == 1) /* a name longer than any field */
            memset(cname[c], 'N', sizeof cname[c] - 1), cname[c][sizeof cname[c] - 1] = 0;
        ncclResult_t r = pinit(&ctx[c], id, &masks[c], cname[c], 1, nranks, myrank);
        if (r != ncclSuccess) {
            fprintf(stderr, "fakenccl: init of communicator %d failed (%d)\n", c, r);
            return 1;
        }
        /* NCCL before 2.25 (v1, v2) has no kernel channel events to ask for;
         * up to 2.24 it starts no P2p event unless Coll is asked too. */
        if (!(masks[c] & ncclProfileColl) || (version >= 3 && !(masks[c] & ncclProfileKernelCh))) {
            fprintf(stderr, "fakenccl: the plugin's mask 0x%x lacks Coll or KernelCh\n", masks[c]);
            return 1;
        }
    }
    if (hostile) {
        /* None of this may crash the job or change what is recorded. */
        void *hd = (void *)0x1;
        if (version == 6)
            p6->startEvent(ctx[0], &hd, NULL);
        else if (version == 5)
            p5->startEvent(ctx[0], &hd, NULL);
        if (hd != NULL)
            fprintf(stderr, "fakenccl: a NULL descriptor left the handle set\n");
        ncclProfilerEventDescr_v6_t d;
        memset(&d, 0, sizeof d);
        d.type = 1u << 20; /* no event type NCCL has */
        pstart(ctx[0], &hd, &d);
        d.type = ncclProfileGroup; /* unasked: NCCL (v1-v4) sends it anyway */
        pstart(ctx[0], &hd, &d);
        int junk[4];
        pstop(junk); /* not a handle of the plugin's */
        pstop((char *)junk + 1);
        ncclProfilerEventStateArgs_v4_t a = {.kernelCh = {.pTimer = 1}};
        pstate(junk, ncclProfilerKernelChStop, &a);
        pstate(NULL, ncclProfilerKernelChStop, NULL);
        if (version >= 5) {
            int m;
            ncclResult_t r = version == 6 ? p6->init(NULL, 1, &m, "x", 1, 1, 0, NULL)
                                          : p5->init(NULL, 1, &m, "x", 1, 1, 0, NULL);
            if (r == ncclSuccess)
                fprintf(stderr, "fakenccl: init with a NULL context pointer succeeded\n");
        }
    }

    uint32_t dev = 0;
    int total = 0;
    for (int i = 0; i < ncolls; i++) {
        for (int c = 0; c < ncomms && c < MAX_COMMS; c++) {
            if (c == 0 && i == lag_at && lag_ms > 0)
                usleep((useconds_t)lag_ms * 1000);
            int f = (i + c) % 4;
            ncclProfilerEventDescr_v6_t d;
            memset(&d, 0, sizeof d);
            d.type = ncclProfileColl;
            d.rank = myrank;
            d.coll.func = funcs[f];
            d.coll.count = 1024u * (uint64_t)(c + 1) + (uint64_t)i;
            d.coll.root = f == 1 ? 0 : -1;
            d.coll.datatype =
                hostile && i == 3 ? "ncclFloat32-with-a-name-too-long" : "ncclFloat32";
            d.coll.nChannels = (uint8_t)(1 + (i % 3));
            d.coll.nWarps = 16;
            d.coll.algo = "RING";
            d.coll.proto = hostile && i == 5 ? NULL : "LL";
            /* NCCL numbers each function's collectives apart. */
            static uint64_t seqs[16][4];
            d.coll.seqNumber = seqs[c][f]++;
            void *ev = NULL, *api = NULL;
            uint64_t t0 = now_ns();
            /* v5+: the user's call is an API event, the collective's parent;
             * the first --captured ones of communicator 0 are recorded into
             * a CUDA graph: NCCL then reports the capture, and no kernel
             * channel (the kernel runs at the graph's replays). */
            int captured = c == 0 && i < ncaptured && version >= 5;
            if (version >= 5) {
                ncclProfilerEventDescr_v6_t a;
                memset(&a, 0, sizeof a);
                a.type = ncclProfileCollApi;
                a.rank = myrank;
                a.collApi.func = funcs[f];
                a.collApi.count = d.coll.count;
                a.collApi.datatype = d.coll.datatype;
                a.collApi.root = d.coll.root;
                a.collApi.graphCaptured = captured;
                pstart(ctx[c], &api, &a);
                d.parentObj = api;
            }
            void *grp = group_start(ctx[c]);
            if (version <= 4)
                d.parentObj = grp;
            if (grp != NULL)
                pstart(ctx[c], &ev, &d);
            if (!captured)
                fakecuda_launch_kernel(kernels[f], dev, (uint32_t)(7 + c), 0, 0);
            /* NCCL up to 2.24 stops the task's event whatever the plugin
             * gave back; later ones only a non-NULL one. */
            if (grp != NULL && (ev != NULL || version <= 2))
                pstop(ev);
            group_stop(grp);
            if (version >= 5)
                pstop(api);
            int last = i == ncolls - 1 && c == 0;
            if (oplog)
                fprintf(oplog, "%s %d %" PRIu64 " %s %" PRIu64 " %zu %d %d %s %" PRIu64 "\n",
                        captured ? "captured" : "coll", c, (uint64_t)(0x1000u + (uint64_t)c),
                        funcs[f], d.coll.seqNumber, d.coll.count, d.coll.root, d.coll.nChannels,
                        hostile && i == 5 ? "-" : "LL", t0);
            /* No kernel channel before v3; none under no event. */
            struct work w = {ev, d.coll.nChannels, last ? hang_ms : 0};
            if (!captured && version >= 3 && ev != NULL &&
                write(proxy_pipe[1], &w, sizeof w) != (ssize_t)sizeof w)
                return 1;
            total++;
            if (i % 4 == 3) {
                memset(&d, 0, sizeof d);
                d.type = ncclProfileP2p;
                d.rank = myrank;
                d.p2p.func = "Send";
                d.p2p.datatype = "ncclBfloat16";
                d.p2p.count = 4096;
                d.p2p.peer = (myrank + 1) % nranks;
                d.p2p.nChannels = 1;
                ev = NULL;
                t0 = now_ns();
                grp = group_start(ctx[c]);
                if (version <= 4)
                    d.parentObj = grp;
                if (grp != NULL)
                    pstart(ctx[c], &ev, &d);
                if (grp != NULL && (ev != NULL || version <= 2))
                    pstop(ev);
                group_stop(grp);
                /* NCCL numbers no p2p operation: the plugin counts them per
                 * communicator from 1. */
                static uint64_t p2ps[16];
                if (oplog)
                    fprintf(oplog, "p2p %d %" PRIu64 " Send %" PRIu64 " 4096 %d 1 - %" PRIu64 "\n",
                            c, (uint64_t)(0x1000u + (uint64_t)c), ++p2ps[c], d.p2p.peer, t0);
                /* v3: NCCL 2.25 reports the p2p's channel too (the proxy's
                 * sub carries the task's handle), though its P2p said no
                 * channel count. */
                struct work w2 = {ev, 1, 0};
                if (version >= 3 && ev != NULL &&
                    write(proxy_pipe[1], &w2, sizeof w2) != (ssize_t)sizeof w2)
                    return 1;
                total++;
            }
        }
    }
    struct work end = {0};
    if (write(proxy_pipe[1], &end, sizeof end) != (ssize_t)sizeof end)
        return 1;
    pthread_join(pt, NULL);
    fakecuda_synchronize();
    for (int c = 0; c < ncomms && c < MAX_COMMS; c++)
        pfinalize(ctx[c]);
    if (oplog)
        fclose(oplog);
    fprintf(stderr, "fakenccl: rank %d drove %d operations\n", myrank, total);
    return 0;
}
