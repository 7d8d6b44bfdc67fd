/*
 * The shim on CUPTI's v2 path (CUPTI 13.3 and later, issue 28): its own
 * subscriber, "cuptimon", beside any other (PyTorch's CUPTI monitor, a v2
 * Kineto), with user-defined records that hold only the fields cuptimon
 * reads (v2-fields.c).
 *
 * What changes against the global (v1) path, and what does not:
 *  - start (cuptimon__v2_start): the runtime libcupti must report 13.3 or
 *    later and export every _v2 entry point used here; the multi-subscriber
 *    state must not be 0 (a first subscriber that allows no other); then
 *    cuptiSubscribe_v2 with allowMultipleSubscribers=1, the v2 buffer
 *    callbacks, user-defined records on before any kind, zeroed buffers
 *    and system thread ids as attributes of the subscriber.  Anything else
 *    falls back to the v1 path, said once on stderr (CUPTI 13.2 and older
 *    only in the debug log: nothing is wrong there);
 *  - the shim's CUPTI function pointers (shim_cupti) are pointed at
 *    wrappers that call the _v2 entry points with the subscriber, so that
 *    shim.c and io.c (enable/disable, annotations' external correlation,
 *    timestamps, dropped counts, the record walk) need not know; flushing
 *    stays cuptiActivityFlushAll, which flushes every subscriber;
 *  - the pool, its slot states and the IO thread's hand-off are the v1
 *    path's: a completed buffer becomes BUFFER_READY exactly as there;
 *  - the completion callback does more: ppRecordLayouts and the kernel and
 *    marker names the records point to are valid only during the callback
 *    (the reference, pitfall list), so the callback keeps the layouts
 *    (when they differ from the last ones) and walks the buffer to intern
 *    new names, instead of leaving the walk to the IO thread;
 *  - each buffer goes to the daemon with the layouts CUPTI reported for
 *    it: in the hello, and in a LAYOUTS message before the first buffer of
 *    every change (io.c; cuptimon-proto.h).  The layouts kept are the
 *    union of what CUPTI reported per kind, so that a kind a window
 *    disables does not count as a change.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim.h"
#include "v2-fields.h"

/* The most field entries a kind's layout may have (a later CUPTI's are
 * kept, the decoder ignores names it does not know), kinds a layout
 * generation may describe, and generations kept for the IO thread. */
#define V2_FIELDS 64
#define V2_KINDS  24
#define V2_RING   16
#define V2_NONE   0xffffu

struct v2_field {
    uint16_t id, off, size;
};

struct v2_kind {
    uint16_t kind, n;
    uint32_t size;
    struct v2_field f[V2_FIELDS];
};

/* The layouts of every kind CUPTI has reported so far (the union), as of
 * one change. */
struct v2_gen {
    uint64_t gen;
    unsigned nkinds;
    struct v2_kind k[V2_KINDS];
};

/* What the completion callback's walk needs of a generation, by kind. */
struct v2_walk {
    uint16_t size[CUPTIMON_LAYOUT_KINDS];
    uint16_t name[CUPTIMON_LAYOUT_KINDS];   /* offset of a name pointer, V2_NONE */
    uint16_t domain[CUPTIMON_LAYOUT_KINDS]; /* the marker's domain pointer */
};

struct v2_sym {
    CUptiResult (*Subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
                             CUpti_SubscriberParams *);
    CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle);
#define V2_PTR_(ret, name, params) ret(CUPTIAPI *name) params;
    CUPTIMON_CUPTI_V2_FUNCTIONS(V2_PTR_)
#undef V2_PTR_
};

static struct {
    struct v2_sym f;
    CUpti_SubscriberHandle sub;
    int latency; /* kernel QUEUED/SUBMITTED selected (CUPTIMON_KERNEL_LATENCY) */
    int hes;     /* HES on (CUPTIMON_HW_TRACE) */
    uint32_t hes_flush_ms;
    long long hes_flushed_ms;
    /* under s->qlock */
    struct v2_gen cur;
    struct v2_gen ring[V2_RING];
    uint64_t *slot_gen; /* the generation each READY/SENT slot was completed under */
    /* the intern table: pointers whose string was queued; filled by
     * concurrent completion callbacks with compare-and-swap */
    _Atomic uint64_t *intern;
    uint32_t intern_cap;
    _Atomic uint32_t intern_len;
    _Atomic uint64_t bad_layouts; /* layouts CUPTI reported that the shim could not keep */
    _Atomic int bad_logged;
} v2;

/* ---- the wrappers shim.c and io.c call through shim_cupti ---------------- */

static CUptiResult CUPTIAPI w_enable(CUpti_ActivityKind kind)
{
    struct shim *s = &cuptimon__shim;
    size_t n = 0;
    const struct cuptimon_v2_field *sel = cuptimon__v2_fields((uint32_t)kind, v2.latency, &n);
    int ids[V2_FIELDS];
    if (sel == NULL || n > V2_FIELDS)
        return CUPTI_ERROR_NOT_SUPPORTED; /* no selection: never asked for */
    for (size_t i = 0; i < n; i++)
        ids[i] = sel[i].id;
    CUpti_ActivityConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    /* The struct size the running CUPTI knows: 13.4 added pKindOptions. */
    cfg.structSize = s->cupti.version >= 130400 ? CUPTIMON_ACTIVITY_CONFIG_SIZE_13_4
                                                : CUPTIMON_ACTIVITY_CONFIG_SIZE_13_2;
    cfg.fieldSelection.structSize = sizeof cfg.fieldSelection;
    cfg.fieldSelection.numFields = n;
    cfg.fieldSelection.pFieldIds = ids;
    /* The calls the v1 path turns off (shim.c's noisy_runtime/_driver):
     * 13.4 takes a deny list with the kind; 13.3 has no per-call filter
     * under user-defined records (its EnableRuntimeApi_v2 answers
     * NOT_COMPATIBLE), so there they are recorded. */
    static CUpti_CallbackId rt_noise[] = {
        CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020,
    };
    static CUpti_CallbackId drv_noise[] = {
        CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute,
        CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
        CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
    };
    CUpti_ActivityApiCbidOptions cbo = {.structSize = sizeof cbo, .enable = 0};
    CUpti_ActivityApiOptions ao = {.structSize = sizeof ao, .pCbidOptions = &cbo};
    if (s->cupti.version >= 130400 &&
        (kind == CUPTI_ACTIVITY_KIND_RUNTIME || kind == CUPTI_ACTIVITY_KIND_DRIVER)) {
        int rt = kind == CUPTI_ACTIVITY_KIND_RUNTIME;
        cbo.pCbids = rt ? rt_noise : drv_noise;
        cbo.numCbids =
            rt ? sizeof rt_noise / sizeof rt_noise[0] : sizeof drv_noise / sizeof drv_noise[0];
        cfg.pKindOptions = &ao;
    }
    return v2.f.cuptiActivityEnable_v2(v2.sub, kind, &cfg);
}

static CUptiResult CUPTIAPI w_disable(CUpti_ActivityKind kind)
{
    /* Three arguments (a NULL configuration), as the header declares it. */
    return v2.f.cuptiActivityDisable_v2(v2.sub, kind, NULL);
}

static CUptiResult CUPTIAPI w_dropped(CUcontext ctx, uint32_t stream, size_t *dropped)
{
    /* Per subscriber: ctx and stream are "reserved for future use". */
    (void)ctx;
    (void)stream;
    return v2.f.cuptiActivityGetNumDroppedRecords_v2(v2.sub, NULL, 0, dropped);
}

static CUptiResult CUPTIAPI w_timestamp(uint64_t *t)
{
    return v2.f.cuptiGetTimestamp_v2(v2.sub, t);
}

static CUptiResult CUPTIAPI w_push(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
    return v2.f.cuptiActivityPushExternalCorrelationId_v2(v2.sub, kind, id);
}

static CUptiResult CUPTIAPI w_pop(CUpti_ExternalCorrelationKind kind, uint64_t *id)
{
    return v2.f.cuptiActivityPopExternalCorrelationId_v2(v2.sub, kind, id);
}

static CUptiResult CUPTIAPI w_set_attribute(CUpti_ActivityAttribute a, size_t *size, void *v)
{
    return v2.f.cuptiActivitySetAttribute_v2(v2.sub, a, size, v);
}

static CUptiResult CUPTIAPI w_next_record(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
    return v2.f.cuptiActivityGetNextRecord_v2(v2.sub, buf, valid, rec);
}

/* ---- layouts ------------------------------------------------------------ */

/* Reads CUPTI's layout of one kind into out: 0, or -1 when it cannot be
 * kept (then the kind's records are neither walked nor described).  A
 * record must start with its 4-byte KIND at offset 0 (so that a buffer
 * can be walked), be a multiple of 8 bytes and at most 4 KiB. */
static int read_layout(uint32_t kind, const CUpti_ActivityRecordLayout *l, struct v2_kind *out)
{
    size_t stride;
    int have_kind = 0;
    if (l->structSize < sizeof *l || l->recordSize < 8 || l->recordSize > 4096 ||
        l->recordSize % 8 || l->numFields > V2_FIELDS || (l->numFields && !l->pEntries))
        return -1;
    /* pEntries is an array of CUPTI's own entry struct: step by its size. */
    stride = l->numFields ? l->pEntries[0].structSize : sizeof(CUpti_ActivityFieldLayoutEntry);
    if (stride < sizeof(CUpti_ActivityFieldLayoutEntry) || stride > 256 || stride % 8)
        return -1;
    out->kind = (uint16_t)kind;
    out->size = (uint32_t)l->recordSize;
    out->n = 0;
    for (size_t i = 0; i < l->numFields; i++) {
        const CUpti_ActivityFieldLayoutEntry *e =
            (const void *)((const uint8_t *)l->pEntries + i * stride);
        if (e->fieldId == 0) {
            have_kind = e->offset == 0 && e->size == 4;
            continue;
        }
        /* CUPTI reports size 0 for ids that are no field of the kind. */
        if (e->size == 0 || e->fieldId < 0 || e->fieldId > 0xffff || e->offset > 4096 ||
            e->size > 4096)
            continue;
        out->f[out->n++] =
            (struct v2_field){(uint16_t)e->fieldId, (uint16_t)e->offset, (uint16_t)e->size};
    }
    return have_kind ? 0 : -1;
}

static int same_kind(const struct v2_kind *a, const struct v2_kind *b)
{
    return a->size == b->size && a->n == b->n && memcmp(a->f, b->f, a->n * sizeof a->f[0]) == 0;
}

/* The layouts CUPTI reported with one buffer, read without a lock (the
 * completion info is the callback's own). */
struct v2_report {
    unsigned n;
    struct v2_kind k[V2_KINDS];
};

static void read_report(const CUpti_BufferCallbackCompleteInfo *info, struct v2_report *r,
                        struct v2_walk *w)
{
    r->n = 0;
    for (unsigned k = 0; k < CUPTIMON_LAYOUT_KINDS; k++) {
        w->size[k] = 0;
        w->name[k] = w->domain[k] = V2_NONE;
    }
    if (info == NULL || info->structSize < sizeof *info || info->ppRecordLayouts == NULL)
        return;
    for (size_t kind = 1; kind < info->numRecordLayouts && kind < CUPTIMON_LAYOUT_KINDS; kind++) {
        const CUpti_ActivityRecordLayout *l = info->ppRecordLayouts[kind];
        if (l == NULL)
            continue;
        if (r->n == V2_KINDS || read_layout((uint32_t)kind, l, &r->k[r->n]) < 0) {
            atomic_fetch_add(&v2.bad_layouts, 1);
            continue;
        }
        const struct v2_kind *k = &r->k[r->n++];
        w->size[kind] = (uint16_t)k->size;
        int kernel =
            kind == CUPTI_ACTIVITY_KIND_KERNEL || kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        int marker = kind == CUPTI_ACTIVITY_KIND_MARKER;
        for (unsigned j = 0; j < k->n; j++) {
            const struct v2_field *f = &k->f[j];
            if (f->size != 8 || f->off + 8u > k->size)
                continue;
            if ((kernel && f->id == KERNEL_FIELD_NAME) || (marker && f->id == MARKER_FIELD_NAME))
                w->name[kind] = f->off;
            if (marker && f->id == MARKER_FIELD_DOMAIN)
                w->domain[kind] = f->off;
        }
    }
}

/* Merges a buffer's layouts into the current ones (qlock held, the one
 * hold the callback takes to queue the buffer).  A change starts a new
 * generation, kept in the ring for the IO thread.  Costs one comparison
 * per reported kind when nothing changed (every buffer). */
static void merge_locked(const struct v2_report *r)
{
    int changed = 0;
    for (unsigned j = 0; j < r->n; j++) {
        const struct v2_kind *k = &r->k[j];
        unsigned i;
        for (i = 0; i < v2.cur.nkinds && v2.cur.k[i].kind != k->kind; i++)
            ;
        if (i < v2.cur.nkinds && same_kind(&v2.cur.k[i], k))
            continue;
        if (i == V2_KINDS) {
            atomic_fetch_add(&v2.bad_layouts, 1);
            continue;
        }
        v2.cur.k[i] = *k;
        if (i == v2.cur.nkinds)
            v2.cur.nkinds++;
        changed = 1;
    }
    if (!changed)
        return;
    v2.cur.gen++;
    v2.ring[v2.cur.gen % V2_RING] = v2.cur;
}

/* ---- names -------------------------------------------------------------- */

static uint32_t hash_ptr(uint64_t p)
{
    p ^= p >> 33;
    p *= 0xff51afd7ed558ccdull;
    p ^= p >> 33;
    return (uint32_t)p;
}

/* Interns a name pointer from a record, inside the completion callback
 * (CUPTI may free the string once it returns).  Lock-free: completion
 * callbacks may run on several threads; a pointer is queued once, by the
 * callback that claims its slot.  The string table append takes qlock, as
 * on the v1 path, only for a name not seen before. */
static void intern_name(struct shim *s, uint64_t p)
{
    uint32_t mask = v2.intern_cap - 1, i = hash_ptr(p) & mask;
    if (p == 0)
        return;
    for (uint32_t probe = 0; probe < 64; probe++, i = (i + 1) & mask) {
        uint64_t cur = atomic_load_explicit(&v2.intern[i], memory_order_acquire);
        if (cur == p)
            return;
        if (cur != 0)
            continue;
        if (atomic_load_explicit(&v2.intern_len, memory_order_relaxed) >= v2.intern_cap / 4 * 3)
            break; /* full: sent again (duplicates are harmless), not remembered */
        if (atomic_compare_exchange_strong(&v2.intern[i], &cur, p)) {
            atomic_fetch_add_explicit(&v2.intern_len, 1, memory_order_relaxed);
            break;
        }
        if (cur == p)
            return; /* another callback claimed it for this very pointer */
    }
    /* A callback on another thread that meets this pointer now may queue
     * its buffer before the string below is appended: the archive and
     * windows read the whole string table, so only the live aggregates
     * can miss the name for that one buffer. */
    const char *name = (const char *)(uintptr_t)p;
    size_t len = strnlen(name, CUPTIMON_STRING_MAX_LEN);
    pthread_mutex_lock(&s->qlock);
    if (s->strings.len == 0)
        cuptimon__strings_begin(&s->strings);
    if (cuptimon__strings_add(&s->strings, p, name, len) == 0)
        s->strings_count++;
    pthread_mutex_unlock(&s->qlock);
}

/* Counts the records and interns the names they point to, by the record
 * sizes of the layouts just noted.  A kind without a known size ends the
 * walk: nothing after it can be located (the daemon counts those bytes). */
static uint64_t walk_buffer(struct shim *s, const uint8_t *buf, size_t valid,
                            const struct v2_walk *w)
{
    uint64_t n = 0, last = 0;
    for (size_t off = 0; off + 4 <= valid;) {
        uint32_t kind;
        memcpy(&kind, buf + off, 4);
        size_t size = kind < CUPTIMON_LAYOUT_KINDS ? w->size[kind] : 0;
        if (size == 0 || size > valid - off)
            break;
        for (int d = 0; d < 2; d++) {
            uint16_t at = d ? w->domain[kind] : w->name[kind];
            uint64_t p;
            if (at == V2_NONE)
                continue;
            memcpy(&p, buf + off + at, 8);
            /* Consecutive records of one kernel share its name. */
            if (p != last)
                intern_name(s, p);
            last = p;
        }
        n++;
        off += size;
    }
    return n;
}

/* ---- the buffer callbacks ------------------------------------------------ */

static void CUPTIAPI v2_requested(uint8_t **buffer, size_t *size, size_t *max_records,
                                  CUpti_BufferCallbackRequestInfo *info)
{
    (void)info;
    cuptimon__buffer_requested(buffer, size, max_records);
}

static int slot_of(struct shim *s, const uint8_t *buf)
{
    if (!s->pool || buf < s->pool)
        return -1;
    uint64_t off = (uint64_t)(buf - s->pool);
    if (off >= (uint64_t)s->nslots * s->slot_size || off % s->slot_size)
        return -1;
    return (int)(off / s->slot_size);
}

static void CUPTIAPI v2_completed(uint8_t *buffer, size_t size, size_t valid,
                                  CUpti_BufferCallbackCompleteInfo *info)
{
    struct shim *s = &cuptimon__shim;
    struct timespec t_in, t_out, rt;
    struct v2_walk w;
    struct v2_report report;
    size_t dropped = 0;
    uint64_t ts = 0, gen;
    (void)size;
    clock_gettime(CLOCK_MONOTONIC, &t_in);
    int idx = slot_of(s, buffer);
    if (idx < 0 || atomic_load_explicit(&s->slot_state[idx], memory_order_relaxed) != SLOT_CUPTI) {
        /* Not a buffer of ours: in multi-subscriber mode CUPTI completes
         * each subscriber's own buffers to it, so this is counted only. */
        atomic_fetch_add_explicit(&s->foreign_buffers, 1, memory_order_relaxed);
        return;
    }
    if (valid > s->slot_size)
        valid = s->slot_size;
    /* This buffer's layouts, and by them its names, now, while their
     * memory is CUPTI's to keep; no lock for that. */
    read_report(info, &report, &w);
    uint64_t n = walk_buffer(s, buffer, valid, &w);
    if (v2.f.cuptiActivityGetNumDroppedRecords_v2(v2.sub, NULL, 0, &dropped) != CUPTI_SUCCESS)
        dropped = 0;
    v2.f.cuptiGetTimestamp_v2(v2.sub, &ts);
    clock_gettime(CLOCK_REALTIME, &rt);

    pthread_mutex_lock(&s->qlock);
    merge_locked(&report);
    gen = v2.cur.gen;
    s->slot_used[idx] = valid;
    v2.slot_gen[idx] = gen;
    uint32_t pos = (s->ring_head + s->ring_len) % s->nslots;
    struct cuptimon_buffer_ready *m = &s->ring[pos].msg;
    m->slot = (uint32_t)idx;
    m->stream_id = 0;
    m->valid_size = valid;
    m->context = 0;
    m->dropped = dropped;
    m->cupti_ts = ts;
    m->realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
    m->seq = s->next_seq++;
    m->records = n;
    s->ring_len++;
    atomic_store_explicit(&s->slot_state[idx], SLOT_READY, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->in_flight, 1, memory_order_relaxed);
    pthread_mutex_unlock(&s->qlock);
    atomic_fetch_add_explicit(&s->records_walked, n, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->dropped_records, dropped, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->buffers_completed, 1, memory_order_relaxed);
    cuptimon__io_wake(s);
    clock_gettime(CLOCK_MONOTONIC, &t_out);
    uint64_t ns = (uint64_t)(t_out.tv_sec - t_in.tv_sec) * 1000000000ull +
                  (uint64_t)(t_out.tv_nsec - t_in.tv_nsec);
    unsigned b = ns ? 63u - (unsigned)__builtin_clzll(ns) : 0;
    atomic_fetch_add_explicit(&s->completion_hist[b < 40 ? b : 39], 1, memory_order_relaxed);
    uint64_t mx = atomic_load_explicit(&s->completion_max_ns, memory_order_relaxed);
    while (ns > mx && !atomic_compare_exchange_weak(&s->completion_max_ns, &mx, ns))
        ;
}

/* ---- start --------------------------------------------------------------- */

static const char *err_str(struct shim *s, CUptiResult rc)
{
    const char *str = NULL;
    if (s->cupti.GetResultString && s->cupti.GetResultString(rc, &str) == CUPTI_SUCCESS && str)
        return str;
    return "unknown CUPTI error";
}

static int env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* Why the v1 path is used, once: on stderr when v2 was possible and
 * something stood in the way, else only in the debug log; the hello
 * carries it for status. */
static int fall_back(struct shim *s, int loud, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fall_back(struct shim *s, int loud, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->v1_reason, sizeof s->v1_reason, fmt, ap);
    va_end(ap);
    if (loud)
        cuptimon__log("CUPTI's v2 path is not used: %s; tracing with the global activity API",
                      s->v1_reason);
    else
        shim_debug(s, "CUPTI's v2 path is not used: %s", s->v1_reason);
    return -1;
}

static int set_u8(CUpti_SubscriberHandle sub, CUpti_ActivityAttribute a, uint8_t v)
{
    size_t sz = sizeof v;
    return v2.f.cuptiActivitySetAttribute_v2(sub, a, &sz, &v);
}

int cuptimon__v2_start(struct shim *s)
{
    struct shim_cupti *c = &s->cupti;
    const char *api = getenv("CUPTIMON_CUPTI_API");
    char old[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = "";
    CUptiResult rc;

    if (api && strcmp(api, "v1") == 0)
        return fall_back(s, 0, "CUPTIMON_CUPTI_API=v1");
    if (api && *api && strcmp(api, "v2") != 0 && strcmp(api, "auto") != 0)
        cuptimon__log("CUPTIMON_CUPTI_API='%s' is not auto, v1 or v2; using auto", api);
    if (c->version < 130200)
        return fall_back(s, 0, "CUPTI %u predates multiple subscribers (13.3)", c->version);
    if (c->version < 130300)
        return fall_back(s, 1,
                         "CUPTI %u has multiple subscribers and user-defined records as a beta "
                         "only; cuptimon uses them from 13.3 (130300) on",
                         c->version);
    /* Every entry point, or none: a libcupti without one of them is not a
     * 13.3 whatever it reports. */
    *(void **)&v2.f.Subscribe = dlsym(c->handle, "cuptiSubscribe_v2");
    *(void **)&v2.f.Unsubscribe = dlsym(c->handle, "cuptiUnsubscribe");
    const char *missing = !v2.f.Subscribe     ? "cuptiSubscribe_v2"
                          : !v2.f.Unsubscribe ? "cuptiUnsubscribe"
                                              : NULL;
#define V2_SYM_(ret, name, params)                                                                 \
    *(void **)&v2.f.name = dlsym(c->handle, #name);                                                \
    if (!v2.f.name && !missing)                                                                    \
        missing = #name;
    CUPTIMON_CUPTI_V2_FUNCTIONS(V2_SYM_)
#undef V2_SYM_
    if (missing)
        return fall_back(s, 1, "%s (CUPTI %u) has no %s", c->path, c->version, missing);

    uint8_t state = 2;
    size_t sz = sizeof state;
    rc = v2.f.cuptiActivityGetAttribute_v2(NULL, CUPTI_ACTIVITY_ATTR_MULTIPLE_SUBSCRIBER_STATE, &sz,
                                           &state);
    if (rc != CUPTI_SUCCESS)
        return fall_back(s, 1, "the multiple-subscriber state cannot be read (%s)", err_str(s, rc));
    if (state == 0)
        return fall_back(s, 1,
                         "the process's first CUPTI subscriber allows no other (multiple-"
                         "subscriber state 0)");

    /* HES is for all subscribers and must be on before any of them enables
     * a kind (so before subscribing): an opt-in, CUPTIMON_HW_TRACE=1. */
    if (env_on("CUPTIMON_HW_TRACE")) {
        if (c->version < 130400) {
            cuptimon__log("CUPTIMON_HW_TRACE: HES is not turned on with CUPTI %u: 13.4 fixed a "
                          "host heap corruption with HES (NVIDIA's release notes); tracing "
                          "without it",
                          c->version);
        } else if ((rc = set_u8(NULL, CUPTI_ACTIVITY_ATTR_ENABLE_HES, 1)) != CUPTI_SUCCESS) {
            cuptimon__log("CUPTIMON_HW_TRACE: CUPTI refused HES (%s): it needs a Blackwell or "
                          "later GPU, no MPS or MIG, and to be set before any CUDA context and "
                          "any subscriber's first kind; tracing without it",
                          err_str(s, rc));
        } else {
            v2.hes = 1;
        }
    }

    CUpti_SubscriberParams p;
    memset(&p, 0, sizeof p);
    p.structSize = sizeof p;
    p.subscriberName = "cuptimon";
    p.oldSubscriberName = old;
    p.oldSubscriberSize = sizeof old;
    p.allowMultipleSubscribers = 1;
    rc = v2.f.Subscribe(&v2.sub, NULL, NULL, &p);
    if (rc != CUPTI_SUCCESS) {
        old[sizeof old - 1] = '\0';
        return fall_back(s, 1, "cuptiSubscribe_v2 failed (%s)%s%s%s", err_str(s, rc),
                         old[0] ? "; the subscriber in the way: \"" : "", old, old[0] ? "\"" : "");
    }
    /* From here CUPTI is in multi-subscriber mode for the process: a
     * failure unsubscribes, and the v1 path may then be refused too. */
    const char *step = "cuptiActivityRegisterCallbacks_v2";
    rc = v2.f.cuptiActivityRegisterCallbacks_v2(v2.sub, v2_requested, v2_completed);
    if (rc == CUPTI_SUCCESS) {
        step = "the user-defined records attribute";
        rc = set_u8(v2.sub, CUPTI_ACTIVITY_ATTR_USER_DEFINED_RECORDS, 1);
    }
    if (rc != CUPTI_SUCCESS) {
        v2.f.Unsubscribe(v2.sub);
        v2.sub = NULL;
        return fall_back(s, 1, "%s failed (%s)", step, err_str(s, rc));
    }
    /* Pre-zeroed slots, system thread ids: the v1 path's attributes, per
     * subscriber here (the global calls are not compatible with it). */
    if (set_u8(v2.sub, CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, 1) != CUPTI_SUCCESS)
        shim_debug(s, "the zeroed-buffer attribute is not supported");
    CUpti_ActivityThreadIdType tt = CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM;
    sz = sizeof tt;
    s->v2_tid_system = v2.f.cuptiActivitySetAttribute_v2(v2.sub, CUPTI_ACTIVITY_ATTR_THREAD_ID_TYPE,
                                                         &sz, &tt) == CUPTI_SUCCESS;
    /* Kernel latency timestamps, Kineto's queued/submitted: an opt-in
     * (16 bytes a kernel), CUPTIMON_KERNEL_LATENCY=1. */
    if (env_on("CUPTIMON_KERNEL_LATENCY")) {
        if ((rc = set_u8(v2.sub, CUPTI_ACTIVITY_ATTR_ENABLE_KERNEL_LATENCY_TIMESTAMPS, 1)) ==
            CUPTI_SUCCESS)
            v2.latency = 1;
        else
            cuptimon__log("CUPTIMON_KERNEL_LATENCY: CUPTI refused kernel latency timestamps "
                          "(%s); kernels are traced without queued/submitted",
                          err_str(s, rc));
    }
    v2.hes_flush_ms = 100;
    const char *hf = getenv("CUPTIMON_HES_FLUSH_MS");
    if (hf && *hf) {
        char *end;
        unsigned long ms = strtoul(hf, &end, 10);
        if (*end || ms < 10 || ms > 10000)
            cuptimon__log(
                "CUPTIMON_HES_FLUSH_MS='%s' is not a number of ms in 10..10000; using 100", hf);
        else
            v2.hes_flush_ms = (uint32_t)ms;
    }

    v2.slot_gen = calloc(s->nslots, sizeof *v2.slot_gen);
    v2.intern_cap = 1u << 16;
    v2.intern = calloc(v2.intern_cap, sizeof *v2.intern);
    if (!v2.slot_gen || !v2.intern) {
        v2.f.Unsubscribe(v2.sub);
        v2.sub = NULL;
        return fall_back(s, 1, "out of memory");
    }
    /* shim.c and io.c call CUPTI through these from now on. */
    c->Enable = w_enable;
    c->Disable = w_disable;
    c->GetNumDroppedRecords = w_dropped;
    c->GetTimestamp = w_timestamp;
    c->PushExternalCorrelationId = w_push;
    c->PopExternalCorrelationId = w_pop;
    c->SetAttribute = w_set_attribute;
    c->GetNextRecord = w_next_record;
    /* Per-call filters go with the kind (w_enable). */
    c->EnableRuntimeApi = NULL;
    c->EnableDriverApi = NULL;
    s->v2 = 1;
    shim_debug(s, "CUPTI %u: subscribed as \"cuptimon\" with user-defined records%s%s", c->version,
               v2.latency ? ", kernel latency timestamps" : "", v2.hes ? ", HES" : "");
    return 0;
}

/* ---- the IO thread's side ------------------------------------------------ */

/* The record_layouts object of generation gen (qlock held), or NULL when
 * the ring no longer holds it. */
static json_object *layouts_json_locked(uint64_t gen)
{
    const struct v2_gen *g = &v2.ring[gen % V2_RING];
    if (gen == 0 || g->gen != gen)
        return NULL;
    json_object *o = json_object_new_object();
    for (unsigned i = 0; i < g->nkinds; i++) {
        const struct v2_kind *k = &g->k[i];
        json_object *d = json_object_new_object(), *fields = json_object_new_array();
        char key[12];
        for (unsigned j = 0; j < k->n; j++) {
            const char *name = cuptimon__v2_field_name(k->kind, k->f[j].id);
            if (name == NULL)
                continue; /* a field the shim did not select (a later CUPTI's) */
            json_object *e = json_object_new_object();
            json_object_object_add(e, "field", json_object_new_string(name));
            json_object_object_add(e, "offset", json_object_new_int64(k->f[j].off));
            json_object_object_add(e, "size", json_object_new_int64(k->f[j].size));
            json_object_array_add(fields, e);
        }
        json_object_object_add(d, "size", json_object_new_int64(k->size));
        json_object_object_add(d, "fields", fields);
        snprintf(key, sizeof key, "%u", k->kind);
        json_object_object_add(o, key, d);
    }
    return o;
}

uint64_t cuptimon__v2_slot_gen_locked(uint32_t slot)
{
    return v2.slot_gen[slot];
}

void cuptimon__v2_hello(struct shim *s, json_object *o, uint64_t gen)
{
    json_object_object_add(o, "activity_api", json_object_new_string("v2"));
    json_object_object_add(o, "user_defined_records", json_object_new_boolean(1));
    json_object_object_add(o, "subscriber", json_object_new_string("cuptimon"));
    json_object_object_add(o, "kernel_latency", json_object_new_boolean(v2.latency));
    json_object_object_add(o, "hes", json_object_new_boolean(v2.hes));
    pthread_mutex_lock(&s->qlock);
    json_object *rl = layouts_json_locked(gen);
    pthread_mutex_unlock(&s->qlock);
    /* A daemon older than the v2 path knows neither user_defined_records
     * nor LAYOUTS, and would decode an undescribed kind with its table:
     * every kind the shim may enable is announced with an impossible size
     * (the record's own where it is described), which such a daemon
     * refuses to decode rather than misread.  A daemon that knows
     * user_defined_records ignores these sizes. */
    json_object *sizes = json_object_new_object();
    for (uint32_t k = 1; k < CUPTIMON_LAYOUT_KINDS; k++) {
        size_t n;
        char key[12];
        json_object *d;
        if (cuptimon__v2_fields(k, 0, &n) == NULL)
            continue;
        snprintf(key, sizeof key, "%u", k);
        json_object *size = NULL;
        if (rl && json_object_object_get_ex(rl, key, &d))
            json_object_object_get_ex(d, "size", &size);
        json_object_object_add(sizes, key, size ? json_object_get(size) : json_object_new_int64(1));
    }
    json_object_object_add(o, "record_sizes", sizes);
    if (rl)
        json_object_object_add(o, "record_layouts", rl);
}

int cuptimon__v2_frame_layouts(struct shim *s, struct cuptimon_buf *out, uint64_t gen, uint64_t seq)
{
    pthread_mutex_lock(&s->qlock);
    json_object *rl = layouts_json_locked(gen);
    pthread_mutex_unlock(&s->qlock);
    if (rl == NULL)
        return -ENOENT;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "seq", json_object_new_int64((int64_t)seq));
    json_object_object_add(o, "record_layouts", rl);
    const char *txt = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    int rc = cuptimon__frame_append(out, CUPTIMON_MSG_LAYOUTS, txt, strlen(txt));
    json_object_put(o);
    return rc;
}

uint64_t cuptimon__v2_current_gen(struct shim *s)
{
    uint64_t g;
    pthread_mutex_lock(&s->qlock);
    g = v2.cur.gen;
    pthread_mutex_unlock(&s->qlock);
    return g;
}

void cuptimon__v2_tick(struct shim *s, long long now_ms)
{
    if (atomic_load(&v2.bad_layouts) && !atomic_exchange(&v2.bad_logged, 1))
        cuptimon__log("CUPTI reported record layouts the shim cannot keep (no 4-byte kind at "
                      "offset 0, a size out of range, or more kinds than it keeps); those "
                      "records are archived but not decoded");
    /* HES keeps its records in a fixed 128 MB hardware buffer and drops
     * what is not flushed in time: a plain flush (never forced) on the IO
     * thread every CUPTIMON_HES_FLUSH_MS. */
    if (!v2.hes || now_ms - v2.hes_flushed_ms < v2.hes_flush_ms)
        return;
    v2.hes_flushed_ms = now_ms;
    s->cupti.FlushAll(0);
}

long long cuptimon__v2_tick_in(long long now_ms)
{
    if (!v2.hes)
        return 1000;
    long long left = v2.hes_flushed_ms + v2.hes_flush_ms - now_ms;
    return left < 0 ? 0 : left;
}

int cuptimon__v2_hes(void)
{
    return v2.hes;
}
