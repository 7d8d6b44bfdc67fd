/*
 * Sharing CUPTI with another tool in the same process (torch.profiler's
 * Kineto, nsys, ...), when the shim is preloaded (LD_PRELOAD) and so comes
 * first in symbol lookup.
 *
 * CUPTI's activity callbacks are process-global: a second
 * cuptiActivityRegisterCallbacks silently replaces the first.  So the shim
 * exports the activity entry points that tools call and stays CUPTI's one
 * registered client.  It records the other tool's callbacks and kinds,
 * keeps the union of both sides' kinds enabled, and hands the tool complete
 * copies of the records of the kinds it enabled, in buffers from the tool's
 * own request callback, completed through its own completion callback, on
 * its flushes too.  A timestamp callback the tool registers is applied to
 * the copies handed to it, never to CUPTI's timebase, so cuptimon's times
 * stay CLOCK_REALTIME.  cuptiFinalize from the tool detaches the tool only.
 *
 * When the shim is only injected (CUDA_INJECTION64_PATH, loaded RTLD_LOCAL
 * by the driver) its exports interpose on nothing; hook.c then points the
 * other objects' imports of these entry points here (cuptimon__mux_hook).
 * A tool that still reaches libcupti directly (through a dlsym pointer, or
 * from a library loaded after the last scan) takes CUPTI over; io.c finds
 * that out.  While it holds CUPTI, its calls that do come here tell when it
 * lets go: its cuptiFinalize, its forced flush after it disabled kinds, or
 * its registering callbacks again (then it is shared from there on).  The
 * shim then takes CUPTI back (cuptimon__retake).
 */
#include "config.h"

#include <dlfcn.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "cuptimon.h"
#include "shim.h"

#define TOOL_KINDS 64

static struct {
    pthread_mutex_t lock;
    CUpti_BuffersCallbackRequestFunc request;
    CUpti_BuffersCallbackCompleteFunc complete;
    CUpti_TimestampCallbackFunc timestamp;
    uint8_t kinds[TOOL_KINDS]; /* the tool enabled it */
    /* When the tool enabled and disabled each kind (in CUPTI's timebase,
     * which its records carry): it gets the records that start in between, as it would
     * from CUPTI alone. */
    uint64_t on_ns[TOOL_KINDS], off_ns[TOOL_KINDS];
    uint8_t ours[TOOL_KINDS]; /* the shim enabled it */
    uint8_t *buf;             /* the tool's current buffer */
    size_t size, used;
    uint64_t delivered, dropped, buffers;
    int stopping;   /* it disabled kinds while it held CUPTI itself */
    int registered; /* it registered its callbacks through here */
    /* CUPTI's buffers were closed since the tool last disabled a kind (a
     * plain flush at its (re)start, generation start_gen): GPU records in
     * buffers CUPTI got before start_gen were launched before the tool
     * started, and go to cuptimon alone. */
    int start_flushed;
    uint64_t start_gen;
    /* The tool's clock as a line through samples (CUPTI time a, tool time
     * t): the first since it registered its callback, and the latest.  A
     * tool clock need not tick in nanoseconds (Kineto's, with TSC
     * timestamps on, returns raw TSC ticks), so its copies are converted by
     * rate and offset, not shifted by one measured difference. */
    uint64_t clk_a0, clk_t0, clk_a1, clk_t1;
    double clk_rate;
    int clk_n;
} tool = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Sharing through mux.c: the shim runs on the global activity API.  On
 * CUPTI's v2 path (v2.c) each tool has its own subscriber, or is refused
 * by CUPTI itself: calls pass through. */
static int active(void)
{
    return cuptimon_init() == 0 && !cuptimon__shim.v2;
}

/* The real libcupti's function: the shim's handle when it runs, else the
 * next definition in lookup order (the shim could not start: pass through). */
static void *real(const char *name)
{
    struct shim *s = &cuptimon__shim;
    void *f = s->cupti.handle ? dlsym(s->cupti.handle, name) : NULL;
    return f ? f : dlsym(RTLD_NEXT, name);
}

static uint64_t cupti_now(void);

int cuptimon__mux_tool_wants(uint32_t kind)
{
    return kind < TOOL_KINDS && tool.on_ns[kind] && tool.complete;
}

/* The runtime CUPTI's layout of a record of this kind and size, or NULL
 * (an unknown release or size: its fields are not touched). */
static const struct cuptimon_rec_layout *layout_of(uint32_t kind, size_t size)
{
    const struct cuptimon_cupti_release *r = cuptimon__shim.cupti.release;
    const struct cuptimon_rec_layout *l = r && kind < CUPTIMON_LAYOUT_KINDS ? r->kinds[kind] : NULL;
    return l && l->size == size ? l : NULL;
}

/* Each record type's timestamp fields, its start first (a table, so that
 * a type with times cannot be left out by a missing case). */
struct time_fields {
    unsigned n;
    unsigned f[5];
};

static const struct time_fields time_fields_of[CUPTIMON_REC_TYPES] = {
    [CUPTIMON_REC_KERNEL] = {5,
                             {CUPTIMON_FK_start, CUPTIMON_FK_end, CUPTIMON_FK_completed,
                              CUPTIMON_FK_queued, CUPTIMON_FK_submitted}},
    [CUPTIMON_REC_MEMCPY] = {2, {CUPTIMON_FMC_start, CUPTIMON_FMC_end}},
    [CUPTIMON_REC_P2P] = {2, {CUPTIMON_FP2P_start, CUPTIMON_FP2P_end}},
    [CUPTIMON_REC_MEMSET] = {2, {CUPTIMON_FMS_start, CUPTIMON_FMS_end}},
    [CUPTIMON_REC_API] = {2, {CUPTIMON_FAPI_start, CUPTIMON_FAPI_end}},
    [CUPTIMON_REC_OVERHEAD] = {2, {CUPTIMON_FOVH_start, CUPTIMON_FOVH_end}},
    [CUPTIMON_REC_SYNC] = {2, {CUPTIMON_FSYNC_start, CUPTIMON_FSYNC_end}},
    [CUPTIMON_REC_CUDA_EVENT] = {1, {CUPTIMON_FEV_deviceTimestamp}},
    [CUPTIMON_REC_MARKER] = {1, {CUPTIMON_FMK_timestamp}},
};

static const struct time_fields *time_fields(const struct cuptimon_rec_layout *l)
{
    return (unsigned)l->type < CUPTIMON_REC_TYPES ? &time_fields_of[l->type] : &time_fields_of[0];
}

/* The record's start time (its first timestamp field), 0 when it has
 * none or its layout is unknown. */
static uint64_t rec_start(const CUpti_Activity *rec, size_t size)
{
    const struct cuptimon_rec_layout *l = layout_of(rec->kind, size);
    const struct time_fields *tf = l ? time_fields(l) : NULL;
    if (!tf || tf->n == 0)
        return 0;
    return cuptimon__rec_get(l, (const uint8_t *)rec, tf->f[0]);
}

void cuptimon__mux_note_ours(uint32_t kind, int on)
{
    if (kind < TOOL_KINDS)
        tool.ours[kind] = (uint8_t)on;
}

int cuptimon__mux_needed(uint32_t kind)
{
    return kind < TOOL_KINDS && tool.kinds[kind];
}

/* Now in CUPTI's timebase, the one its records carry: CLOCK_REALTIME
 * unless a client registered a timestamp callback with CUPTI itself. */
static uint64_t cupti_now(void)
{
    uint64_t t = 0;
    struct shim *s = &cuptimon__shim;
    if (s->cupti.GetTimestamp && s->cupti.GetTimestamp(&t) == CUPTI_SUCCESS && t)
        return t;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Maps a CUPTI timestamp onto the tool's clock: through the latest sample,
 * at the fitted rate.  Differences are taken in integers first so that the
 * double only carries the (small) distance to the sample. */
static uint64_t to_tool(const struct cuptimon_tool_clock *c, uint64_t v)
{
    int64_t d = (int64_t)(v - c->a);
    return c->t + (uint64_t)(int64_t)((double)d * c->rate + (d >= 0 ? 0.5 : -0.5));
}

/* Moves a record's timestamps (those that are set) onto the tool's clock. */
static void convert(uint8_t *rec, const struct cuptimon_rec_layout *l,
                    const struct cuptimon_tool_clock *c)
{
    const struct time_fields *tf = time_fields(l);
    for (unsigned i = 0; i < tf->n; i++) {
        const struct cuptimon_field *fl = &l->f[tf->f[i]];
        uint64_t v;
        if (fl->width != 8)
            continue;
        memcpy(&v, rec + fl->off, 8);
        if (v == 0 || v == (uint64_t)CUPTI_TIMESTAMP_UNKNOWN)
            continue;
        v = to_tool(c, v);
        memcpy(rec + fl->off, &v, 8);
    }
}

/* Hands the tool its current buffer.  Called with tool.lock held. */
static void complete_locked(void)
{
    if (!tool.buf)
        return;
    uint8_t *b = tool.buf;
    size_t size = tool.size, used = tool.used;
    tool.buf = NULL;
    tool.size = tool.used = 0;
    tool.buffers++;
    tool.complete(NULL, 0, b, size, used);
}

/* Gets the tool a buffer if it has none.  Called with tool.lock held. */
static int ensure_buffer_locked(size_t need)
{
    if (tool.buf)
        return 0;
    uint8_t *b = NULL;
    size_t sz = 0, maxrec = 0;
    tool.request(&b, &sz, &maxrec);
    /* The tool's own zeroing choice does not matter here: every byte we
     * hand it is a whole record we wrote. */
    if (!b || sz < need)
        return -1;
    tool.buf = b;
    tool.size = sz;
    tool.used = 0;
    return 0;
}

/* Called from the shim's completion callback for each record the tool
 * wants: a copy goes into the tool's buffer, on its clock when it has one. */
void cuptimon__mux_deliver(const CUpti_Activity *rec, size_t size, uint64_t gen,
                           const struct cuptimon_tool_clock *clk)
{
    uint32_t k = rec->kind;
    uint64_t t0 = rec_start(rec, size);
    int api = k == CUPTI_ACTIVITY_KIND_RUNTIME || k == CUPTI_ACTIVITY_KIND_DRIVER;
    /* API calls by their start; GPU work by its buffer (mux_enable): its
     * start time says nothing about its launch. */
    if (k >= TOOL_KINDS || (!api && gen < tool.start_gen) ||
        (t0 && ((api && t0 < tool.on_ns[k]) || (tool.off_ns[k] && t0 > tool.off_ns[k]))))
        return;
    pthread_mutex_lock(&tool.lock);
    if (!tool.complete) {
        pthread_mutex_unlock(&tool.lock);
        return;
    }
    if (tool.buf && tool.used + size > tool.size)
        complete_locked();
    if (ensure_buffer_locked(size) < 0) {
        tool.dropped++;
        pthread_mutex_unlock(&tool.lock);
        return;
    }
    uint8_t *dst = tool.buf + tool.used;
    memcpy(dst, rec, size);
    if (clk) {
        const struct cuptimon_rec_layout *l = layout_of(k, size);
        if (l)
            convert(dst, l, clk);
    }
    tool.used += size;
    tool.delivered++;
    pthread_mutex_unlock(&tool.lock);
}

/* One sample of (CUPTI time, tool time): the tool's clock read between two
 * reads of CUPTI's, paired with their midpoint.  Up to three tries, the
 * tightest kept; with good_ns set, the first whose bracket is at most
 * good_ns ends the search (one try in the common case). */
static void clock_sample(CUpti_TimestampCallbackFunc f, uint64_t *a, uint64_t *t, uint64_t good_ns)
{
    uint64_t best = UINT64_MAX;
    *a = *t = 0;
    for (int i = 0; i < 3 && best > good_ns; i++) {
        uint64_t x = cupti_now(), y = f(), z = cupti_now();
        if (z - x < best) {
            best = z - x;
            *a = x + (z - x) / 2;
            *t = y;
        }
    }
}

/* Starts a fit for a newly registered tool clock: two samples 2 ms apart
 * give a first rate, which later samples refine. */
static void clock_start(CUpti_TimestampCallbackFunc f)
{
    struct timespec pause = {0, 2000000};
    uint64_t a0 = 0, t0 = 0, a1 = 0, t1 = 0;

    clock_sample(f, &a0, &t0, 0);
    nanosleep(&pause, NULL);
    clock_sample(f, &a1, &t1, 0);
    pthread_mutex_lock(&tool.lock);
    tool.clk_a0 = a0, tool.clk_t0 = t0;
    tool.clk_a1 = a1, tool.clk_t1 = t1;
    tool.clk_rate = a1 > a0 ? (double)(int64_t)(t1 - t0) / (double)(a1 - a0) : 1.0;
    tool.clk_n = 2;
    pthread_mutex_unlock(&tool.lock);
}

/* The tool's clock now, for the records of one completed buffer, when the
 * tool registered a timestamp callback through the shim.  Each call takes
 * a fresh sample: the line runs from the first sample to it, so the rate
 * is measured over an ever longer span and the offset is current.  This
 * runs at every completion, so a sample whose reads bracket the tool's
 * within CLOCK_GOOD_NS is taken at once; the best of three is sought only
 * for a sample that was interrupted. */
#define CLOCK_GOOD_NS 250
int cuptimon__mux_clock(struct cuptimon_tool_clock *c)
{
    CUpti_TimestampCallbackFunc f = tool.timestamp;
    uint64_t a = 0, t = 0;
    if (!f || !tool.complete)
        return 0;
    clock_sample(f, &a, &t, CLOCK_GOOD_NS);
    pthread_mutex_lock(&tool.lock);
    if (tool.clk_n == 0 || a <= tool.clk_a0) {
        /* No fit yet (a callback registered before the shim could sample
         * it): a rate of 1, CUPTI's own unit, until there is. */
        tool.clk_a0 = a, tool.clk_t0 = t, tool.clk_rate = 1.0;
    } else if (a - tool.clk_a0 >= 1000000) {
        tool.clk_rate = (double)(int64_t)(t - tool.clk_t0) / (double)(a - tool.clk_a0);
    }
    tool.clk_a1 = a, tool.clk_t1 = t;
    tool.clk_n++;
    c->a = a;
    c->t = t;
    c->rate = tool.clk_rate;
    pthread_mutex_unlock(&tool.lock);
    return 1;
}

/* ---- the interposed entry points ---------------------------------------- */

static int taken(void)
{
    return atomic_load(&cuptimon__shim.cupti_taken) != 0;
}

static CUptiResult CUPTIAPI mux_register(CUpti_BuffersCallbackRequestFunc req,
                                         CUpti_BuffersCallbackCompleteFunc done)
{
    if (!active()) {
        CUptiResult (*f)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) =
            (CUptiResult(*)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc))
                real("cuptiActivityRegisterCallbacks");
        CUptiResult rc = f ? f(req, done) : CUPTI_ERROR_NOT_INITIALIZED;
        static int told;
        if (rc != CUPTI_SUCCESS && cuptimon__shim.v2 && !told++)
            cuptimon__log("another tool's cuptiActivityRegisterCallbacks got CUPTI error %d: CUPTI "
                          "does not let its global activity API and subscribers mix, and "
                          "cuptimon is a subscriber in this process (CUPTI %u).  Use a tool "
                          "that subscribes itself (CUPTI 13.3+), or run the job with "
                          "CUPTIMON_CUPTI_API=v1",
                          (int)rc, cuptimon__shim.cupti.version);
        return rc;
    }
    if (!req || !done)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&tool.lock);
    if (tool.buf)
        complete_locked();
    tool.request = req;
    tool.complete = done;
    tool.registered = 1;
    tool.stopping = 0;
    pthread_mutex_unlock(&tool.lock);
    shim_debug(&cuptimon__shim, "another CUPTI client registered activity callbacks: sharing");
    /* It held CUPTI with callbacks registered behind the shim's back; from
     * here on it is shared like any other tool. */
    if (taken())
        cuptimon__retake(&cuptimon__shim, "the other tool registered its callbacks again");
    return CUPTI_SUCCESS;
}

static CUptiResult CUPTIAPI mux_enable(CUpti_ActivityKind kind)
{
    CUptiResult (*f)(CUpti_ActivityKind) =
        (CUptiResult(*)(CUpti_ActivityKind))real("cuptiActivityEnable");
    if (!f)
        return CUPTI_ERROR_NOT_INITIALIZED;
    if (!active())
        return f(kind);
    /* While another client holds CUPTI, its enables go through as they
     * would without cuptimon: it may have turned the kind off directly. */
    int held = taken();
    int shared = (unsigned)kind < TOOL_KINDS && tool.ours[kind] && !held;
    if (shared && !tool.kinds[kind] && !tool.start_flushed) {
        /* The kind was already on for cuptimon: what CUPTI holds now was
         * recorded before the tool asked for it (before its first start,
         * or in the gap since its last stop), so it goes to cuptimon
         * alone.  A plain flush closes every buffer CUPTI fills now
         * (records after it go into new ones: docs/gpu-runs/
         * 20261204-h200-probe), so the buffer a GPU record comes in tells
         * whether it was launched before the tool's start.  Once per
         * (re)start, not per kind.  Never a forced flush: it would hand
         * over the work running now incomplete, lost to both. */
        CUptiResult (*flush)(uint32_t) = (CUptiResult(*)(uint32_t))real("cuptiActivityFlushAll");
        tool.start_gen = atomic_fetch_add(&cuptimon__shim.flush_gen, 1) + 1;
        if (flush)
            flush(0);
        tool.start_flushed = 1;
    }
    CUptiResult rc = shared ? CUPTI_SUCCESS : f(kind);
    shim_debug(&cuptimon__shim, "tool: enable kind %u%s: %d", (unsigned)kind,
               shared ? " (already on for cuptimon)"
               : held ? " (it holds CUPTI)"
                      : "",
               (int)rc);
    if (rc == CUPTI_SUCCESS && (unsigned)kind < TOOL_KINDS) {
        tool.kinds[kind] = 1;
        tool.on_ns[kind] = cupti_now();
        tool.off_ns[kind] = 0;
        /* CUPTI asks a client for a buffer as soon as it traces; tools rely
         * on that (Kineto flushes at its stop only if it handed out a
         * buffer), so ask for one now as CUPTI would. */
        pthread_mutex_lock(&tool.lock);
        if (tool.request && !held)
            ensure_buffer_locked(0);
        pthread_mutex_unlock(&tool.lock);
    }
    return rc;
}

static CUptiResult CUPTIAPI mux_disable(CUpti_ActivityKind kind)
{
    CUptiResult (*f)(CUpti_ActivityKind) =
        (CUptiResult(*)(CUpti_ActivityKind))real("cuptiActivityDisable");
    if (!f)
        return CUPTI_ERROR_NOT_INITIALIZED;
    if (!active())
        return f(kind);
    shim_debug(&cuptimon__shim, "tool: disable kind %u", (unsigned)kind);
    if ((unsigned)kind < TOOL_KINDS && tool.kinds[kind]) {
        tool.kinds[kind] = 0;
        tool.off_ns[kind] = cupti_now(); /* records up to now still reach it */
        tool.start_flushed = 0;
    }
    /* A client that never registered through here may be one that holds
     * CUPTI itself: a forced flush after this means it stopped. */
    pthread_mutex_lock(&tool.lock);
    if (taken() || !tool.complete)
        tool.stopping = 1;
    pthread_mutex_unlock(&tool.lock);
    /* Still wanted by cuptimon: stays on in CUPTI, the tool just stops
     * receiving it. */
    return (unsigned)kind < TOOL_KINDS && tool.ours[kind] ? CUPTI_SUCCESS : f(kind);
}

static CUptiResult CUPTIAPI mux_flush(uint32_t flag)
{
    CUptiResult (*f)(uint32_t) = (CUptiResult(*)(uint32_t))real("cuptiActivityFlushAll");
    if (!f)
        return CUPTI_ERROR_NOT_INITIALIZED;
    if (!active())
        return f(flag);
    /* CUPTI completes its buffers to the shim, which copies the tool's
     * records out; then the tool gets its partly filled buffer too.  While
     * the tool shares CUPTI through the shim, its forced flush (Kineto's
     * stop) goes to CUPTI as a plain one: a forced flush would hand the
     * work running now over incomplete and lose its completion, from
     * cuptimon's archive too; that work's records reach the tool later,
     * complete, if it started before the tool stopped.  A tool that holds
     * CUPTI itself flushes as it asked, its buffers being its own, and
     * that forced flush shows whether it does. */
    struct shim *s = &cuptimon__shim;
    int forced = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0;
    int pass_forced = forced && (taken() || !tool.registered);
    uint64_t gen = pass_forced ? atomic_fetch_add(&s->flush_gen, 1) + 1 : 0;
    CUptiResult rc = f(pass_forced ? flag : flag & ~(uint32_t)CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (pass_forced)
        cuptimon__check_taken(s, gen);
    pthread_mutex_lock(&tool.lock);
    if (tool.complete)
        complete_locked();
    shim_debug(&cuptimon__shim,
               "tool: flush(%u): %d; %llu records delivered in %llu buffers, %llu dropped so far",
               flag, (int)rc, (unsigned long long)tool.delivered, (unsigned long long)tool.buffers,
               (unsigned long long)tool.dropped);
    int stopped = tool.stopping && forced;
    if (forced)
        tool.stopping = 0;
    pthread_mutex_unlock(&tool.lock);
    /* A tool that holds CUPTI itself, disabled its kinds and then forced
     * out every buffer (Kineto's stop) has stopped tracing: its buffers
     * are all back with it. */
    if (stopped && taken())
        cuptimon__retake(&cuptimon__shim, "the other tool stopped tracing");
    return rc;
}

static CUptiResult CUPTIAPI mux_timestamp(CUpti_TimestampCallbackFunc cb)
{
    CUptiResult (*f)(CUpti_TimestampCallbackFunc) =
        (CUptiResult(*)(CUpti_TimestampCallbackFunc))real("cuptiActivityRegisterTimestampCallback");
    if (!active())
        return f ? f(cb) : CUPTI_ERROR_NOT_INITIALIZED;
    /* Never CUPTI's timebase: applied to the tool's copies only.  Kineto
     * registers at every start; each registration starts a new fit. */
    tool.timestamp = cb;
    if (cb)
        clock_start(cb);
    shim_debug(&cuptimon__shim, "tool: timestamp callback registered (applied to its copies only)");
    return CUPTI_SUCCESS;
}

static CUptiResult CUPTIAPI mux_finalize(void)
{
    CUptiResult (*f)(void) = (CUptiResult(*)(void))real("cuptiFinalize");
    if (!active())
        return f ? f() : CUPTI_SUCCESS;
    /* A tool that registered its callbacks here shares CUPTI; one that did
     * not may hold it from behind mux.c, which only a forced flush shows:
     * it is finalizing CUPTI, the end of its profiling, where CUPTI itself
     * would flush everything. */
    if (taken() || (!tool.registered && cuptimon__probe_taken(&cuptimon__shim))) {
        /* It held CUPTI itself: let it finalize as it would without
         * cuptimon (that also resets any timebase it set), then take CUPTI
         * back. */
        shim_debug(&cuptimon__shim, "tool: cuptiFinalize while it holds CUPTI");
        CUptiResult rc = f ? f() : CUPTI_SUCCESS;
        cuptimon__retake(&cuptimon__shim, "the other tool finalized CUPTI");
        return rc;
    }
    /* The tool is done with CUPTI; cuptimon is not.  Detach the tool. */
    shim_debug(&cuptimon__shim, "tool: cuptiFinalize (detaching the tool only)");
    pthread_mutex_lock(&tool.lock);
    if (tool.complete)
        complete_locked();
    tool.request = NULL;
    tool.complete = NULL;
    tool.timestamp = NULL;
    tool.clk_n = 0;
    tool.start_flushed = 0;
    tool.registered = 0;
    for (unsigned k = 0; k < TOOL_KINDS; k++) {
        if (tool.kinds[k] && !tool.ours[k]) {
            CUptiResult (*d)(CUpti_ActivityKind) =
                (CUptiResult(*)(CUpti_ActivityKind))real("cuptiActivityDisable");
            if (d)
                d((CUpti_ActivityKind)k);
        }
        tool.kinds[k] = 0;
        tool.on_ns[k] = tool.off_ns[k] = 0;
    }
    pthread_mutex_unlock(&tool.lock);
    return CUPTI_SUCCESS;
}

/* The exported names, for symbol lookup when the shim is preloaded; hook.c
 * uses the local addresses above (taking an exported symbol's address in a
 * shared object goes through its own import table, which another libcupti
 * in the process could satisfy). */
#define EXPORT        __attribute__((visibility("default")))
#define ALIAS(target) __attribute__((alias(#target)))
EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc,
                                                           CUpti_BuffersCallbackCompleteFunc)
    ALIAS(mux_register);
EXPORT CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind) ALIAS(mux_enable);
EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind) ALIAS(mux_disable);
EXPORT CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t) ALIAS(mux_flush);
EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc)
    ALIAS(mux_timestamp);
EXPORT CUptiResult CUPTIAPI cuptiFinalize(void) ALIAS(mux_finalize);

void cuptimon__mux_hook(struct shim *s, int force)
{
    static const struct cuptimon_hook targets[] = {
        {"cuptiActivityRegisterCallbacks", (void *)mux_register},
        {"cuptiActivityEnable", (void *)mux_enable},
        {"cuptiActivityDisable", (void *)mux_disable},
        {"cuptiActivityFlushAll", (void *)mux_flush},
        {"cuptiActivityRegisterTimestampCallback", (void *)mux_timestamp},
        {"cuptiFinalize", (void *)mux_finalize},
    };
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    if (!s->hook || s->v2) /* v2: nothing to route (active()) */
        return;
    pthread_mutex_lock(&lock);
    if (force || cuptimon__hook_generation() != s->hook_adds) {
        int n = cuptimon__hook_scan(targets, sizeof targets / sizeof targets[0],
                                    (void *)cuptimon__mux_hook, (void *)s->cupti.RegisterCallbacks,
                                    &s->hook_adds);
        if (n > 0) {
            atomic_fetch_add(&s->hooked, (uint64_t)n);
            shim_debug(s, "routed %d CUPTI import(s) of loaded objects to the shim", n);
        } else if (n < 0) {
            shim_debug(s, "could not route CUPTI imports to the shim (mprotect refused)");
        }
    }
    pthread_mutex_unlock(&lock);
}

/* The shim took CUPTI back: whatever the tool enabled while it held CUPTI
 * itself is void; it gets records again from its next enable on. */
void cuptimon__mux_forget_kinds(void)
{
    pthread_mutex_lock(&tool.lock);
    for (unsigned k = 0; k < TOOL_KINDS; k++) {
        tool.kinds[k] = 0;
        tool.on_ns[k] = tool.off_ns[k] = 0;
    }
    tool.stopping = 0;
    tool.start_flushed = 0;
    pthread_mutex_unlock(&tool.lock);
}

int cuptimon__mux_ours(uint32_t kind)
{
    return kind < TOOL_KINDS && tool.ours[kind];
}

int cuptimon__mux_foreign(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    CUpti_BuffersCallbackCompleteFunc done = tool.complete;
    if (!done)
        return 0;
    done(ctx, stream, buf, size, valid);
    return 1;
}
