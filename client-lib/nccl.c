/*
 * The shim as NCCL's profiler plugin (issue 46): every collective and
 * point-to-point operation of every communicator becomes one record of
 * cuptimon's own kind (CUPTIMON_KIND_NCCL, cuptimon-proto.h), which the IO
 * thread puts into a pool slot and hands to the daemon as it does CUPTI's
 * buffers.
 *
 * NCCL calls the plugin on its own threads: the user's (communicator init,
 * collective start and stop: the enqueue) and its proxy thread (kernel
 * channel start, stop and GPU timer).  None of that may wait or allocate:
 *  - an event is an entry of a preallocated array, claimed with one
 *    compare-and-swap (a few tries at most; a full array costs the event,
 *    counted, and NCCL gets a NULL handle, which it accepts);
 *  - a kernel channel is not an object: its handle is its collective's
 *    handle with the low bit set, so a channel costs two atomic adds;
 *  - a finished operation is copied into a bounded lock-free queue
 *    (Vyukov's, as ranges.c's) that the IO thread drains; a full queue costs
 *    the record, counted in the next buffer's `dropped`.
 * A collective is finished when NCCL has stopped it (NCCL's stop means
 * "enqueued", README "Profiling of collective and p2p operations") and
 * every kernel channel it announced has stopped (the GPU is done with it),
 * the reference counting NCCL's README and its Inspector use.  With no
 * kernel channels (v1/v2, which have none; v1-v3 p2p, which say no channel
 * count; or nChannels 0) the stop ends it.
 *
 * Every entry point returns ncclSuccess whatever it is given (NCCL's rule:
 * profiler errors must not change NCCL's behaviour; only init may fail, and
 * that disables the plugin).  What is wrong with an input (a NULL
 * descriptor, a handle that is not one of ours, an event type this build
 * does not know, a string cut to its field) is counted and said once by the
 * IO thread, never on NCCL's thread.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "nccl-abi.h"
#include "mpq.h"
#include "shim.h"

#define NCCL_EVENTS 8192u /* operations in flight at once, per process */
#define NCCL_COMMS  256u  /* communicators alive at once */
#define NCCL_FLY    64u   /* collectives in flight per communicator the state view tells apart */
#define NCCL_QUEUE  8192u /* finished records waiting for the IO thread (power of two) */
#define EV_TRIES    16

/* Collectives one communicator has in flight, by the shim's own ordinal of
 * its collectives (NCCL's sequence numbers are per function). */
struct fly {
    _Atomic uint64_t ord1; /* ordinal + 1; 0: free */
    _Atomic uint64_t seq, start_ns;
    char func[CUPTIMON_NCCL_STR];
};

struct ncomm {
    _Atomic int used;
    uint8_t version, trunc;
    /* id, name and rank are set (v4+: at init; v1-v3: by the first
     * operation, whose events alone carry them); released after them, so
     * that the IO thread reads them whole. */
    _Atomic int named;
    uint64_t id;
    int32_t rank, nranks, nnodes;
    char name[CUPTIMON_NCCL_NAME];
    _Atomic uint64_t ord_next;  /* collectives started */
    _Atomic uint64_t p2p_next;  /* p2p operations started */
    _Atomic uint64_t completed; /* collectives finished */
    _Atomic uint64_t bytes;     /* their bytes (count x element size) */
    _Atomic uint64_t last_seq1; /* the last finished collective's seq + 1 */
    char last_func[CUPTIMON_NCCL_STR];
    _Atomic uint64_t changed; /* moves at every start and finish: the IO thread sends the state */
    uint64_t sent;            /* IO thread: `changed` when it last sent the state */
    struct fly fly[NCCL_FLY];
};

struct nev {
    _Atomic uint32_t busy;
    _Atomic int32_t refs;
    _Atomic uint32_t ch_started, ch_done;
    _Atomic uint64_t gpu_start, gpu_end, host_end;
    struct ncomm *comm;
    uint64_t ord; /* the collective's ordinal in its communicator (+1; 0: p2p) */
    struct cuptimon_nccl_rec rec;
};

typedef CUPTIMON_MPQ_SLOT(struct cuptimon_nccl_rec) qslot;

static struct nev evs[NCCL_EVENTS];
static _Atomic uint32_t ev_next;
static struct ncomm comms[NCCL_COMMS];
static qslot queue[NCCL_QUEUE];
static struct cuptimon_mpq q = CUPTIMON_MPQ_OVER(queue);
static _Atomic int q_ready;

/* What was lost or refused, for the IO thread to count and say. */
static _Atomic uint64_t lost_since;    /* records lost since the last buffer (its `dropped`) */
static _Atomic uint64_t lost_events;   /* the event array was full */
static _Atomic uint64_t lost_queue;    /* the queue was full */
static _Atomic uint64_t bad_handles;   /* a handle that is not one of ours */
static _Atomic uint64_t bad_descr;     /* NULL descriptor or context */
static _Atomic uint64_t unknown_types; /* an event type this build does not record */
static _Atomic uint64_t truncated;     /* a string cut to its field */
static _Atomic uint64_t lost_comms;    /* communicators past NCCL_COMMS */
static _Atomic uint64_t recorded;      /* records queued */
static _Atomic int active;             /* some communicator initialised the plugin */
static _Atomic uint32_t newest_version;
static long long last_collect_ms;

/* What the shim did about NCCL_PROFILER_PLUGIN, for the hello (status). */
static char plugin_state[16] = "unset";
static char plugin_user[160];

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint32_t my_tid(void)
{
    static __thread uint32_t tid;
    if (!tid)
        tid = (uint32_t)syscall(SYS_gettid);
    return tid;
}

/* Copies a string NCCL gave into a fixed field: NULL is empty, a string
 * longer than the field is cut (flagged), never read past the field's
 * length + 1 bytes. */
static void field(char *dst, size_t n, const char *src, uint8_t *flags)
{
    memset(dst, 0, n);
    if (src == NULL)
        return;
    size_t l = strnlen(src, n + 1);
    if (l > n) {
        l = n;
        *flags |= CUPTIMON_NCCL_F_TRUNCATED;
        atomic_fetch_add_explicit(&truncated, 1, memory_order_relaxed);
    }
    memcpy(dst, src, l);
}

/* v1 passes small enums where later versions pass NCCL's strings; named
 * as NCCL 2.23 numbered them (src/include/nccl_common.h, devcomm.h). */
static const char *v1_name(const char *const *names, size_t n, uint8_t v, char *buf)
{
    if (v < n)
        return names[v];
    buf[0] = '#';
    buf[1] = (char)('0' + v / 100);
    buf[2] = (char)('0' + v / 10 % 10);
    buf[3] = (char)('0' + v % 10);
    buf[4] = 0;
    return buf;
}
static const char *const v1_funcs[] = {"Broadcast", "Reduce",   "AllGather", "ReduceScatter",
                                       "AllReduce", "SendRecv", "Send",      "Recv"};
static const char *const v1_types[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",
                                       "ncclInt64",   "ncclUint64",  "ncclFloat16", "ncclFloat32",
                                       "ncclFloat64", "ncclBfloat16"};
static const char *const v1_algos[] = {
    "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
static const char *const v1_protos[] = {"LL", "LL128", "SIMPLE"};
#define NAMES(a) (a), sizeof(a) / sizeof((a)[0])

/* ---- the queue to the IO thread ----------------------------------------- */

static void queue_init(void)
{
    int z = 0;
    if (!atomic_compare_exchange_strong(&q_ready, &z, 2))
        return;
    cuptimon__mpq_init(&q);
    atomic_store(&q_ready, 1);
}

static void lost(_Atomic uint64_t *why)
{
    atomic_fetch_add_explicit(why, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&lost_since, 1, memory_order_relaxed);
}

static void put(const struct cuptimon_nccl_rec *r)
{
    uint64_t pos;
    if (atomic_load_explicit(&q_ready, memory_order_acquire) != 1 ||
        cuptimon__mpq_put(&q, r, &pos) < 0) {
        lost(&lost_queue); /* full: the IO thread is behind */
        return;
    }
    atomic_fetch_add_explicit(&recorded, 1, memory_order_relaxed);
    /* Every quarter of the queue, the IO thread is woken (one non-blocking
     * eventfd write per 2048 records): at tens of thousands of collectives
     * a second its once-a-second pass would come too late. */
    if (((pos + 1) & (NCCL_QUEUE / 4 - 1)) == 0)
        cuptimon__io_wake(&cuptimon__shim);
}

static int take(struct cuptimon_nccl_rec *r)
{
    return cuptimon__mpq_take(&q, r);
}

uint32_t cuptimon__nccl_pending(void)
{
    return cuptimon__mpq_pending(&q);
}

/* ---- events ------------------------------------------------------------- */

static struct nev *ev_get(void)
{
    for (int i = 0; i < EV_TRIES; i++) {
        uint32_t k = atomic_fetch_add_explicit(&ev_next, 1, memory_order_relaxed) % NCCL_EVENTS;
        uint32_t z = 0;
        if (atomic_compare_exchange_strong_explicit(&evs[k].busy, &z, 1, memory_order_acquire,
                                                    memory_order_relaxed))
            return &evs[k];
    }
    lost(&lost_events);
    return NULL;
}

/* A handle NCCL gives back: one of ours (an event, or an event with the low
 * bit set for one of its kernel channels), in use; else NULL, counted. */
static struct nev *ev_of(void *h, int *channel)
{
    uintptr_t p = (uintptr_t)h, base = (uintptr_t)evs;
    *channel = (int)(p & 1);
    p &= ~(uintptr_t)3; /* the channel bit, NO_WAIT_BIT */
    if (h == NULL)
        return NULL;
    if (p < base || p >= base + sizeof evs || (p - base) % sizeof(struct nev) != 0) {
        atomic_fetch_add_explicit(&bad_handles, 1, memory_order_relaxed);
        return NULL;
    }
    struct nev *e = (struct nev *)p;
    if (atomic_load_explicit(&e->busy, memory_order_acquire) != 1) {
        atomic_fetch_add_explicit(&bad_handles, 1, memory_order_relaxed);
        return NULL;
    }
    return e;
}

static void fly_done(struct ncomm *c, const struct nev *e)
{
    if (c == NULL || e->ord == 0)
        return;
    struct fly *f = &c->fly[(e->ord - 1) % NCCL_FLY];
    uint64_t want = e->ord;
    atomic_compare_exchange_strong(&f->ord1, &want, 0);
    memcpy(c->last_func, e->rec.func, CUPTIMON_NCCL_STR);
    atomic_store_explicit(&c->last_seq1, e->rec.seq + 1, memory_order_release);
    atomic_fetch_add_explicit(&c->completed, 1, memory_order_relaxed);
    unsigned sz = cuptimon__nccl_type_size(e->rec.datatype);
    atomic_fetch_add_explicit(&c->bytes, e->rec.count * sz, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->changed, 1, memory_order_release);
}

/* The last reference went: the operation is finished. */
static void ev_finish(struct nev *e, uint8_t extra_flags)
{
    struct cuptimon_nccl_rec r = e->rec;
    r.flags |= extra_flags;
    r.host_end = atomic_load_explicit(&e->host_end, memory_order_acquire);
    r.gpu_start = atomic_load_explicit(&e->gpu_start, memory_order_relaxed);
    r.gpu_end = atomic_load_explicit(&e->gpu_end, memory_order_relaxed);
    uint32_t done = atomic_load_explicit(&e->ch_done, memory_order_relaxed);
    r.channels_seen = done > 255 ? 255 : (uint8_t)done;
    if (r.gpu_start && r.gpu_end)
        r.flags |= CUPTIMON_NCCL_F_GPU_TIMES;
    if (r.host_end)
        r.flags |= CUPTIMON_NCCL_F_COMPLETED;
    if (r.what == CUPTIMON_NCCL_COLL || r.what == CUPTIMON_NCCL_CE_COLL)
        fly_done(e->comm, e);
    put(&r);
    atomic_store_explicit(&e->busy, 0, memory_order_release);
}

/* Finishes an event NCCL has not (its communicator or the process ends):
 * only while its references are still NCCL's, by a CAS from the value
 * read, so that a concurrent last unref cannot finish it a second time. */
static void ev_force(struct nev *e)
{
    int32_t r = atomic_load(&e->refs);
    if (atomic_load_explicit(&e->busy, memory_order_acquire) == 1 && r > 0 && r < 0x40000000 &&
        atomic_compare_exchange_strong(&e->refs, &r, 0x40000000))
        ev_finish(e, CUPTIMON_NCCL_F_UNFINISHED);
}

static void ev_unref(struct nev *e, int n)
{
    if (atomic_fetch_sub_explicit(&e->refs, n, memory_order_acq_rel) == n)
        ev_finish(e, 0);
}

/* ---- communicators ------------------------------------------------------ */

static struct ncomm *comm_new(uint8_t version, uint64_t id, const char *name, int nnodes,
                              int nranks, int rank)
{
    for (uint32_t i = 0; i < NCCL_COMMS; i++) {
        int z = 0;
        if (!atomic_compare_exchange_strong(&comms[i].used, &z, 2))
            continue;
        struct ncomm *c = &comms[i];
        c->version = version;
        c->id = id;
        c->rank = rank;
        c->nranks = nranks;
        c->nnodes = nnodes;
        c->trunc = 0;
        field(c->name, sizeof c->name, name, &c->trunc);
        atomic_store(&c->ord_next, 0);
        atomic_store(&c->p2p_next, 0);
        atomic_store(&c->completed, 0);
        atomic_store(&c->bytes, 0);
        atomic_store(&c->last_seq1, 0);
        memset(c->last_func, 0, sizeof c->last_func);
        for (uint32_t k = 0; k < NCCL_FLY; k++)
            atomic_store(&c->fly[k].ord1, 0);
        atomic_store_explicit(&c->named, version > 3, memory_order_release);
        c->sent = 0;
        atomic_store(&c->changed, 1); /* a new communicator: its state goes out once */
        atomic_store(&c->used, 1);
        return c;
    }
    atomic_fetch_add(&lost_comms, 1);
    return NULL;
}

static ncclResult_t init_common(void **context, int *mask, uint8_t version, uint64_t id,
                                const char *name, int nnodes, int nranks, int rank)
{
    if (context == NULL || mask == NULL) {
        atomic_fetch_add(&bad_descr, 1);
        return ncclInvalidArgument; /* NCCL then runs without the plugin */
    }
    queue_init();
    *context = comm_new(version, id, name, nnodes, nranks, rank);
    /* The operations and the GPU's view of them: kernel channels (v3+)
     * say when the GPU finished; copy-engine collectives (v6). */
    *mask = ncclProfileColl | ncclProfileP2p | (version >= 3 ? ncclProfileKernelCh : 0) |
            (version >= 5 ? ncclProfileCollApi | ncclProfileP2pApi : 0) |
            (version >= 6 ? ncclProfileCeColl : 0);
    uint32_t v = atomic_load(&newest_version);
    while (version > v && !atomic_compare_exchange_weak(&newest_version, &v, version))
        ;
    atomic_store(&active, 1);
    return ncclSuccess;
}

static void state_record(struct ncomm *c, struct cuptimon_nccl_rec *r, uint64_t now);

static ncclResult_t finalize_common(void *context)
{
    struct ncomm *c = context;
    if (c == NULL)
        return ncclSuccess;
    if (c < comms || c >= comms + NCCL_COMMS || atomic_load(&c->used) != 1) {
        atomic_fetch_add(&bad_handles, 1);
        return ncclSuccess;
    }
    /* Operations NCCL never finished (an aborted communicator): recorded as
     * they are, flagged, rather than lost. */
    for (uint32_t i = 0; i < NCCL_EVENTS; i++) {
        struct nev *e = &evs[i];
        if (atomic_load_explicit(&e->busy, memory_order_acquire) == 1 && e->comm == c)
            ev_force(e);
    }
    /* Its last state (nothing in flight any more) goes out with the next
     * buffer. */
    struct cuptimon_nccl_rec r;
    if (atomic_load_explicit(&c->named, memory_order_acquire)) {
        state_record(c, &r, now_ns());
        put(&r);
    }
    atomic_store(&c->used, 0);
    return ncclSuccess;
}

/* ---- starting an operation ---------------------------------------------- */

/* One descriptor, whatever the version, as the common path reads it. */
struct op {
    uint64_t type;
    void *parent;
    int rank;
    const char *func, *datatype, *algo, *proto, *name;
    uint64_t seq, count, comm_hash;
    int root;
    uint8_t nchannels, nwarps, has_hash;
    uint8_t api; /* a CollApi/P2pApi event (v5+): 1, 2 when graph-captured */
    uint64_t ptimer;
};

/* The handles of API events (v5+): no object, one of two markers that say
 * whether the user's call was captured into a CUDA graph; NCCL passes it
 * as the parent of the collective it starts for that call. */
static const char api_plain, api_captured;

/* The handle of a Group event: no object either.  NCCL up to 2.27 (v1-v4)
 * starts a Group event for each kernel plan whether or not the mask asks
 * for one, and starts the plan's Coll and P2p events only under a non-NULL
 * group handle (src/plugin/profiler.cc, ncclProfilerStartTaskEvents: `if
 * (plan->groupEventHandle && enable)`): a NULL one would cost every
 * operation of the job. */
static const char group_marker;

static int api_marker(const void *h)
{
    return h == &api_plain || h == &api_captured || h == &group_marker;
}

/* An operation that waits for no kernel channel (v1-v3 p2p, which say no
 * channel count; nChannels 0; graph-captured) is finished at NCCL's stop,
 * and its entry may be reused; NCCL may still start kernel channels under
 * its handle (v3 does for p2p, from the proxy thread).  Its handle carries
 * bit 1 so that such a channel is told apart and ignored, rather than
 * counted against whichever operation took the entry since. */
#define NO_WAIT_BIT ((uintptr_t)2)

static ncclResult_t start_common(void *context, void **handle, const struct op *o, uint8_t ver)
{
    struct ncomm *c = context;
    if (handle == NULL)
        return ncclSuccess;
    *handle = NULL;
    if (o->api) {
        *handle = (void *)(o->api == 2 ? &api_captured : &api_plain);
        return ncclSuccess;
    }
    if (o->type == ncclProfileGroup) {
        *handle = (void *)&group_marker;
        return ncclSuccess;
    }
    if (o->type == ncclProfileKernelCh) {
        int ch;
        if ((uintptr_t)o->parent & NO_WAIT_BIT)
            return ncclSuccess; /* its operation did not wait for channels */
        struct nev *p = ev_of(o->parent, &ch);
        if (p == NULL || ch)
            return ncclSuccess;
        /* The channel's reference keeps its collective alive until the
         * channel stops. */
        atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->ch_started, 1, memory_order_relaxed);
        if (o->ptimer) {
            uint64_t g = atomic_load_explicit(&p->gpu_start, memory_order_relaxed);
            while ((g == 0 || o->ptimer < g) &&
                   !atomic_compare_exchange_weak_explicit(
                       &p->gpu_start, &g, o->ptimer, memory_order_relaxed, memory_order_relaxed))
                ;
        }
        *handle = (void *)((uintptr_t)p | 1);
        return ncclSuccess;
    }
    uint8_t what = o->type == ncclProfileColl                 ? CUPTIMON_NCCL_COLL
                   : o->type == ncclProfileP2p                ? CUPTIMON_NCCL_P2P
                   : o->type == ncclProfileCeColl && ver >= 6 ? CUPTIMON_NCCL_CE_COLL
                                                              : 0;
    if (what == 0) {
        atomic_fetch_add_explicit(&unknown_types, 1, memory_order_relaxed);
        return ncclSuccess;
    }
    if (c != NULL && (c < comms || c >= comms + NCCL_COMMS || atomic_load(&c->used) != 1)) {
        atomic_fetch_add_explicit(&bad_handles, 1, memory_order_relaxed);
        c = NULL;
    }
    struct nev *e = ev_get();
    if (e == NULL)
        return ncclSuccess;
    struct cuptimon_nccl_rec *r = &e->rec;
    memset(r, 0, sizeof *r);
    e->comm = c;
    e->ord = 0;
    atomic_store_explicit(&e->ch_started, 0, memory_order_relaxed);
    atomic_store_explicit(&e->ch_done, 0, memory_order_relaxed);
    atomic_store_explicit(&e->gpu_start, 0, memory_order_relaxed);
    atomic_store_explicit(&e->gpu_end, 0, memory_order_relaxed);
    atomic_store_explicit(&e->host_end, 0, memory_order_relaxed);
    r->what = what;
    r->version = ver;
    r->host_start = now_ns();
    r->tid = my_tid();
    r->rank = o->rank;
    r->count = o->count;
    r->root = o->root;
    r->nchannels = o->nchannels;
    r->nwarps = o->nwarps;
    field(r->func, sizeof r->func, o->func, &r->flags);
    field(r->datatype, sizeof r->datatype, o->datatype, &r->flags);
    field(r->algo, sizeof r->algo, o->algo, &r->flags);
    field(r->proto, sizeof r->proto, o->proto, &r->flags);
    if (c != NULL) {
        r->comm_id = c->id;
        r->nranks = c->nranks;
        r->nnodes = c->nnodes;
        memcpy(r->comm_name, c->name, sizeof r->comm_name);
        r->flags |= c->trunc;
    }
    if (o->has_hash) { /* v1-v3: the communicator rides in each event */
        r->comm_id = o->comm_hash;
        field(r->comm_name, sizeof r->comm_name, o->name, &r->flags);
        /* ... and only there: init said nothing of it.  The context takes
         * the first operation's (NCCL enqueues a communicator's operations
         * on one thread), so that its state records name it; its size
         * stays unknown (0).  Before this the states are held back
         * (cuptimon__nccl_collect) rather than sent for a communicator 0
         * of rank -1 that does not exist. */
        if (c != NULL && !atomic_load_explicit(&c->named, memory_order_relaxed) &&
            o->comm_hash != 0) {
            c->rank = o->rank;
            field(c->name, sizeof c->name, o->name, &c->trunc);
            c->id = o->comm_hash;
            atomic_store_explicit(&c->named, 1, memory_order_release);
            atomic_fetch_add_explicit(&c->changed, 1, memory_order_release);
        }
    }
    /* Captured into a CUDA graph: NCCL reports the capture, and its
     * kernel runs at each replay, with no event of NCCL's: it is not in
     * flight, and no kernel channel will finish it. */
    int captured = o->parent == &api_captured;
    if (captured)
        r->flags |= CUPTIMON_NCCL_F_CAPTURED;
    if (what == CUPTIMON_NCCL_P2P) {
        r->seq = c ? atomic_fetch_add_explicit(&c->p2p_next, 1, memory_order_relaxed) + 1 : 0;
    } else {
        r->seq = o->seq;
        if (c != NULL && !captured) {
            e->ord = atomic_fetch_add_explicit(&c->ord_next, 1, memory_order_relaxed) + 1;
            struct fly *f = &c->fly[(e->ord - 1) % NCCL_FLY];
            atomic_store_explicit(&f->ord1, 0, memory_order_relaxed);
            atomic_store_explicit(&f->seq, r->seq, memory_order_relaxed);
            atomic_store_explicit(&f->start_ns, r->host_start, memory_order_relaxed);
            memcpy(f->func, r->func, sizeof f->func);
            atomic_store_explicit(&f->ord1, e->ord, memory_order_release);
            atomic_fetch_add_explicit(&c->changed, 1, memory_order_release);
        }
    }
    /* One reference for NCCL's stop, one more until every announced kernel
     * channel has stopped (only where NCCL reports channels: v3+). */
    int wait_kernel = ver >= 3 && o->nchannels > 0 && what != CUPTIMON_NCCL_CE_COLL && !captured;
    if (!wait_kernel)
        r->flags |= CUPTIMON_NCCL_F_NO_KERNEL;
    atomic_store_explicit(&e->refs, 1 + wait_kernel, memory_order_release);
    *handle = wait_kernel ? (void *)e : (void *)((uintptr_t)e | NO_WAIT_BIT);
    return ncclSuccess;
}

static ncclResult_t stop_event(void *handle)
{
    int ch;
    if (api_marker(handle))
        return ncclSuccess;
    struct nev *e = ev_of(handle, &ch);
    if (e == NULL)
        return ncclSuccess;
    if (ch) {
        /* A kernel channel: its own reference, and when it is the last
         * channel the collective announced, the kernel's. */
        uint64_t t = now_ns();
        uint32_t done = atomic_fetch_add_explicit(&e->ch_done, 1, memory_order_acq_rel) + 1;
        uint64_t h = atomic_load_explicit(&e->host_end, memory_order_relaxed);
        while (t > h && !atomic_compare_exchange_weak_explicit(
                            &e->host_end, &h, t, memory_order_release, memory_order_relaxed))
            ;
        ev_unref(e, 1 + (done == e->rec.nchannels));
        return ncclSuccess;
    }
    e->rec.host_stop = now_ns();
    ev_unref(e, 1);
    return ncclSuccess;
}

static ncclResult_t state_common(void *handle, int state, uint64_t ptimer)
{
    int ch;
    if (api_marker(handle))
        return ncclSuccess;
    struct nev *e = ev_of(handle, &ch);
    if (e == NULL || !ch || state != ncclProfilerKernelChStop || ptimer == 0)
        return ncclSuccess;
    uint64_t g = atomic_load_explicit(&e->gpu_end, memory_order_relaxed);
    while (ptimer > g && !atomic_compare_exchange_weak_explicit(
                             &e->gpu_end, &g, ptimer, memory_order_relaxed, memory_order_relaxed))
        ;
    return ncclSuccess;
}

/* ---- the versioned entry points ----------------------------------------- */

static ncclResult_t init_v1(void **context, int *mask)
{
    return init_common(context, mask, 1, 0, NULL, 0, 0, -1);
}
static ncclResult_t init_v2(void **context, int *mask)
{
    return init_common(context, mask, 2, 0, NULL, 0, 0, -1);
}
static ncclResult_t init_v3(void **context, int *mask)
{
    return init_common(context, mask, 3, 0, NULL, 0, 0, -1);
}
static ncclResult_t init_v4(void **context, int *mask, const char *name, uint64_t hash, int nnodes,
                            int nranks, int rank, ncclDebugLogger_t logfn)
{
    (void)logfn;
    return init_common(context, mask, 4, hash, name, nnodes, nranks, rank);
}
static ncclResult_t init_v5(void **context, uint64_t id, int *mask, const char *name, int nnodes,
                            int nranks, int rank, ncclDebugLogger_t logfn)
{
    (void)logfn;
    return init_common(context, mask, 5, id, name, nnodes, nranks, rank);
}
static ncclResult_t init_v6(void **context, uint64_t id, int *mask, const char *name, int nnodes,
                            int nranks, int rank, ncclDebugLogger_t logfn)
{
    (void)logfn;
    return init_common(context, mask, 6, id, name, nnodes, nranks, rank);
}

static int no_descr(void **handle, const void *d)
{
    if (d != NULL)
        return 0;
    if (handle)
        *handle = NULL;
    atomic_fetch_add_explicit(&bad_descr, 1, memory_order_relaxed);
    return 1;
}

static ncclResult_t start_v1(void *context, void **handle, ncclProfilerEventDescr_v1_t *d)
{
    if (no_descr(handle, d))
        return ncclSuccess;
    char b[4][8];
    struct op o = {.type = d->type, .parent = d->parentObj, .rank = d->rank, .root = -1};
    if (d->type == ncclProfileColl) {
        o.func = v1_name(NAMES(v1_funcs), d->coll.func, b[0]);
        o.datatype = v1_name(NAMES(v1_types), d->coll.datatype, b[1]);
        o.algo = v1_name(NAMES(v1_algos), d->coll.algo, b[2]);
        o.proto = v1_name(NAMES(v1_protos), d->coll.proto, b[3]);
        o.name = d->coll.name;
        o.comm_hash = d->coll.commHash;
        o.has_hash = 1;
        o.seq = d->coll.seqNumber;
        o.count = d->coll.count;
        o.root = d->coll.root;
        o.nchannels = d->coll.nMaxChannels;
        o.nwarps = d->coll.nWarps;
    } else if (d->type == ncclProfileP2p) {
        o.func = v1_name(NAMES(v1_funcs), d->p2p.func, b[0]);
        o.datatype = v1_name(NAMES(v1_types), d->p2p.datatype, b[1]);
        o.name = d->p2p.name;
        o.comm_hash = d->p2p.commHash;
        o.has_hash = 1;
        o.count = d->p2p.count;
        o.root = d->p2p.peer;
    }
    return start_common(context, handle, &o, 1);
}

/* v2 and v3 differ only where cuptimon does not read (trafficBytes, kernel
 * channels without a timer). */
#define START_V23(V)                                                                               \
    static ncclResult_t start_v##V(void *context, void **handle,                                   \
                                   ncclProfilerEventDescr_v##V##_t *d)                             \
    {                                                                                              \
        if (no_descr(handle, d))                                                                   \
            return ncclSuccess;                                                                    \
        struct op o = {.type = d->type, .parent = d->parentObj, .rank = d->rank, .root = -1};      \
        if (d->type == ncclProfileColl) {                                                          \
            o.func = d->coll.func;                                                                 \
            o.datatype = d->coll.datatype;                                                         \
            o.algo = d->coll.algo;                                                                 \
            o.proto = d->coll.proto;                                                               \
            o.name = d->coll.name;                                                                 \
            o.comm_hash = d->coll.commHash;                                                        \
            o.has_hash = 1;                                                                        \
            o.seq = d->coll.seqNumber;                                                             \
            o.count = d->coll.count;                                                               \
            o.root = d->coll.root;                                                                 \
            o.nchannels = d->coll.nMaxChannels;                                                    \
            o.nwarps = d->coll.nWarps;                                                             \
        } else if (d->type == ncclProfileP2p) {                                                    \
            o.func = d->p2p.func;                                                                  \
            o.datatype = d->p2p.datatype;                                                          \
            o.name = d->p2p.name;                                                                  \
            o.comm_hash = d->p2p.commHash;                                                         \
            o.has_hash = 1;                                                                        \
            o.count = d->p2p.count;                                                                \
            o.root = d->p2p.peer;                                                                  \
        }                                                                                          \
        return start_common(context, handle, &o, V);                                               \
    }
START_V23(2)
START_V23(3)

/* v4-v6: the same members at the same names (offsets differ by type's
 * width, which the compiler takes care of). */
#define START_V456(V)                                                                              \
    static ncclResult_t start_v##V(void *context, void **handle,                                   \
                                   ncclProfilerEventDescr_v##V##_t *d)                             \
    {                                                                                              \
        if (no_descr(handle, d))                                                                   \
            return ncclSuccess;                                                                    \
        struct op o = {.type = d->type, .parent = d->parentObj, .rank = d->rank, .root = -1};      \
        if (d->type == ncclProfileColl) {                                                          \
            o.func = d->coll.func;                                                                 \
            o.datatype = d->coll.datatype;                                                         \
            o.algo = d->coll.algo;                                                                 \
            o.proto = d->coll.proto;                                                               \
            o.seq = d->coll.seqNumber;                                                             \
            o.count = d->coll.count;                                                               \
            o.root = d->coll.root;                                                                 \
            o.nchannels = d->coll.nChannels;                                                       \
            o.nwarps = d->coll.nWarps;                                                             \
        } else if (d->type == ncclProfileP2p) {                                                    \
            o.func = d->p2p.func;                                                                  \
            o.datatype = d->p2p.datatype;                                                          \
            o.count = d->p2p.count;                                                                \
            o.root = d->p2p.peer;                                                                  \
            o.nchannels = d->p2p.nChannels;                                                        \
        } else if (d->type == ncclProfileKernelCh) {                                               \
            o.ptimer = d->kernelCh.pTimer;                                                         \
        }                                                                                          \
        START_V456_CE_##V;                                                                         \
        START_V456_API_##V;                                                                        \
        return start_common(context, handle, &o, V);                                               \
    }
#define START_V456_API_4 (void)0
/* v5+: API events, for the graph-capture flag their collectives inherit. */
#define START_V456_API_5                                                                           \
    if (d->type == ncclProfileCollApi)                                                             \
        o.api = d->collApi.graphCaptured ? 2 : 1;                                                  \
    else if (d->type == ncclProfileP2pApi)                                                         \
    o.api = d->p2pApi.graphCaptured ? 2 : 1
#define START_V456_API_6 START_V456_API_5
#define START_V456_CE_4  (void)0
#define START_V456_CE_5  (void)0
#define START_V456_CE_6                                                                            \
    if (d->type == ncclProfileCeColl) {                                                            \
        o.func = d->ceColl.func;                                                                   \
        o.datatype = d->ceColl.datatype;                                                           \
        o.algo = "CE";                                                                             \
        o.proto = d->ceColl.syncStrategy;                                                          \
        o.seq = d->ceColl.seqNumber;                                                               \
        o.count = d->ceColl.count;                                                                 \
        o.root = d->ceColl.root;                                                                   \
    }
START_V456(4)
START_V456(5)
START_V456(6)

static ncclResult_t state_v1(void *h, ncclProfilerEventState_t s,
                             ncclProfilerEventStateArgs_v1_t *a)
{
    (void)h, (void)s, (void)a; /* v1-v3: no kernel timer */
    return ncclSuccess;
}
static ncclResult_t state_v4(void *h, ncclProfilerEventState_t s,
                             ncclProfilerEventStateArgs_v4_t *a)
{
    return state_common(h, (int)s, a ? a->kernelCh.pTimer : 0);
}

#define NCCL_EXPORT __attribute__((visibility("default")))
NCCL_EXPORT extern const ncclProfiler_v1_t ncclProfiler_v1;
NCCL_EXPORT extern const ncclProfiler_v2_t ncclProfiler_v2;
NCCL_EXPORT extern const ncclProfiler_v3_t ncclProfiler_v3;
NCCL_EXPORT extern const ncclProfiler_v4_t ncclProfiler_v4;
NCCL_EXPORT extern const ncclProfiler_v5_t ncclProfiler_v5;
NCCL_EXPORT extern const ncclProfiler_v6_t ncclProfiler_v6;
const ncclProfiler_v1_t ncclProfiler_v1 = {"cuptimon", init_v1,  start_v1,
                                           stop_event, state_v1, finalize_common};
const ncclProfiler_v2_t ncclProfiler_v2 = {"cuptimon", init_v2,  start_v2,
                                           stop_event, state_v1, finalize_common};
const ncclProfiler_v3_t ncclProfiler_v3 = {"cuptimon", init_v3,  start_v3,
                                           stop_event, state_v1, finalize_common};
const ncclProfiler_v4_t ncclProfiler_v4 = {"cuptimon", init_v4,  start_v4,
                                           stop_event, state_v4, finalize_common};
const ncclProfiler_v5_t ncclProfiler_v5 = {"cuptimon", init_v5,  start_v5,
                                           stop_event, state_v4, finalize_common};
const ncclProfiler_v6_t ncclProfiler_v6 = {"cuptimon", init_v6,  start_v6,
                                           stop_event, state_v4, finalize_common};

/* ---- the IO thread's side ----------------------------------------------- */

/* A communicator's state: the collective in flight (the oldest started and
 * not finished) and the last finished one (cuptimon-proto.h,
 * CUPTIMON_NCCL_COMM_STATE). */
static void state_record(struct ncomm *c, struct cuptimon_nccl_rec *r, uint64_t now)
{
    memset(r, 0, sizeof *r);
    r->what = CUPTIMON_NCCL_COMM_STATE;
    r->version = c->version;
    r->comm_id = c->id;
    r->rank = c->rank;
    r->nranks = c->nranks;
    r->nnodes = c->nnodes;
    r->root = -1;
    r->flags = c->trunc;
    memcpy(r->comm_name, c->name, sizeof r->comm_name);
    r->host_start = now;
    r->tid = my_tid();
    uint64_t best = 0;
    for (uint32_t k = 0; k < NCCL_FLY; k++) {
        struct fly *f = &c->fly[k];
        uint64_t o = atomic_load_explicit(&f->ord1, memory_order_acquire);
        if (o == 0 || (best && o >= best))
            continue;
        uint64_t seq = atomic_load_explicit(&f->seq, memory_order_relaxed);
        uint64_t st = atomic_load_explicit(&f->start_ns, memory_order_relaxed);
        char fn[CUPTIMON_NCCL_STR];
        memcpy(fn, f->func, sizeof fn);
        if (atomic_load_explicit(&f->ord1, memory_order_acquire) != o)
            continue; /* reused while read */
        best = o;
        r->seq = seq;
        r->host_stop = st;
        memcpy(r->func, fn, sizeof r->func);
    }
    uint64_t l1 = atomic_load_explicit(&c->last_seq1, memory_order_acquire);
    r->count = l1;
    if (l1)
        memcpy(r->algo, c->last_func, sizeof r->algo);
    r->completed = atomic_load_explicit(&c->completed, memory_order_relaxed);
    r->bytes = atomic_load_explicit(&c->bytes, memory_order_relaxed);
    r->started = atomic_load_explicit(&c->ord_next, memory_order_relaxed);
}

static int states_changed(void)
{
    for (uint32_t i = 0; i < NCCL_COMMS; i++)
        if (atomic_load_explicit(&comms[i].used, memory_order_acquire) == 1 &&
            atomic_load_explicit(&comms[i].changed, memory_order_acquire) != comms[i].sent)
            return 1;
    return 0;
}

/* Says once what NCCL got wrong, or what the shim could not keep. */
static void say_once(void)
{
    static uint64_t said[6];
    struct {
        _Atomic uint64_t *n;
        const char *what;
    } w[] = {
        {&lost_events, "NCCL operations were not recorded: more than 8192 were in flight at once"},
        {&lost_queue, "NCCL records were lost: the shim's queue was full (the IO thread was "
                      "behind or not running)"},
        {&bad_handles, "NCCL passed event handles or contexts that are not the shim's "
                       "(ignored)"},
        {&bad_descr, "NCCL passed a NULL event descriptor, context or handle pointer (ignored)"},
        {&truncated, "NCCL strings longer than their record field were cut (flagged in the "
                     "records)"},
        {&lost_comms, "NCCL communicators past 256 alive at once are not shown in the state "
                      "view (their operations are recorded)"},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        uint64_t n = atomic_load(w[i].n);
        if (n && !said[i]) {
            said[i] = n;
            cuptimon__log("%s (%llu so far; status counts them as dropped records)", w[i].what,
                          (unsigned long long)n);
        }
    }
}

int cuptimon__nccl_collect(struct shim *s, int force, long long now_ms)
{
    if (atomic_load_explicit(&q_ready, memory_order_acquire) != 1)
        return 0;
    say_once();
    uint32_t pending = cuptimon__nccl_pending();
    uint64_t lost_n = atomic_load(&lost_since);
    int changed = states_changed();
    if (pending == 0 && lost_n == 0 && !changed)
        return 0;
    /* A buffer a second, sooner when the queue fills, at every flush
     * (a window's end) and at exit. */
    if (!force && pending < NCCL_QUEUE / 4 && now_ms - last_collect_ms < 1000)
        return 0;
    int idx = cuptimon__slot_take(s);
    if (idx < 0)
        return -1; /* the records wait; a full queue then counts its losses */
    last_collect_ms = now_ms;
    uint8_t *p = s->pool + (size_t)idx * s->slot_size;
    size_t max = s->slot_size / CUPTIMON_NCCL_REC_SIZE;
    size_t n = 0;
    struct cuptimon_nccl_rec r;
    while (n + NCCL_COMMS < max && take(&r))
        cuptimon__nccl_rec_encode(p + n++ * CUPTIMON_NCCL_REC_SIZE, &r);
    uint64_t now = now_ns();
    for (uint32_t i = 0; i < NCCL_COMMS && n < max; i++) {
        struct ncomm *c = &comms[i];
        if (atomic_load_explicit(&c->used, memory_order_acquire) != 1)
            continue;
        uint64_t ch = atomic_load_explicit(&c->changed, memory_order_acquire);
        if (ch == c->sent || !atomic_load_explicit(&c->named, memory_order_acquire))
            continue; /* v1-v3: not named until its first operation */
        c->sent = ch;
        state_record(c, &r, now);
        cuptimon__nccl_rec_encode(p + n++ * CUPTIMON_NCCL_REC_SIZE, &r);
    }
    uint64_t dropped = atomic_exchange(&lost_since, 0);
    cuptimon__slot_queue_own(s, (uint32_t)idx, n * CUPTIMON_NCCL_REC_SIZE, n, dropped, now);
    return 1;
}

/* At the end of tracing: what NCCL has in flight is recorded as it is
 * (flagged unfinished), so that a job that ends inside a collective still
 * says which. */
void cuptimon__nccl_exit(void)
{
    if (atomic_load(&q_ready) != 1)
        return;
    for (uint32_t i = 0; i < NCCL_EVENTS; i++)
        ev_force(&evs[i]);
}

int cuptimon__nccl_active(void)
{
    return atomic_load(&active);
}

uint64_t cuptimon__nccl_recorded(void)
{
    return atomic_load(&recorded);
}

uint64_t cuptimon__nccl_lost(void)
{
    return atomic_load(&lost_events) + atomic_load(&lost_queue);
}

/* ---- being NCCL's plugin -------------------------------------------------- */

/* NCCL dlopens NCCL_PROFILER_PLUGIN as given (a path, or a name it then
 * tries as libnccl-profiler-NAME.so), unset: libnccl-profiler.so.  When
 * the job named none, the shim names itself, by the path it was loaded
 * from, so that NCCL's dlopen finds the copy already in the process (the
 * same object, the same queue).  A user's own plugin (or "none") wins:
 * NCCL loads one plugin only, and the hello says whose it is. */
void cuptimon__nccl_setup(const char *self_path)
{
    const char *cur = getenv("NCCL_PROFILER_PLUGIN");
    const char *off = getenv("CUPTIMON_NCCL");
    if (off && strcmp(off, "0") == 0) {
        snprintf(plugin_state, sizeof plugin_state, "off");
        return;
    }
    if (cur && *cur) {
        if (strstr(cur, "libcuptimon")) {
            snprintf(plugin_state, sizeof plugin_state, "shim");
            return;
        }
        snprintf(plugin_state, sizeof plugin_state, "user");
        snprintf(plugin_user, sizeof plugin_user, "%s", cur);
        return;
    }
    if (self_path == NULL || !*self_path)
        return;
    if (setenv("NCCL_PROFILER_PLUGIN", self_path, 0) == 0)
        snprintf(plugin_state, sizeof plugin_state, "shim");
}

const char *cuptimon__nccl_plugin_state(const char **user)
{
    if (user)
        *user = plugin_user;
    return plugin_state;
}

uint32_t cuptimon__nccl_version(void)
{
    return atomic_load(&newest_version);
}
