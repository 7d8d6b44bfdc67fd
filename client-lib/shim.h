/* Internal state of the shim, shared by shim.c (CUPTI side) and io.c (the
 * IO thread).  Nothing here is exported from libcuptimon.so. */
#ifndef CUPTIMON_SHIM_H
#define CUPTIMON_SHIM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cupti-abi.h"
#include "cuptimon-proto.h"
#include "layouts.h"
#include "util.h"

#define SHIM_MAX_SOCKETS 4

/* A pool slot's life: FREE -> CUPTI (handed out by the request callback) ->
 * READY (completed, queued) -> SENT (BUFFER_READY on the wire) -> FREE on
 * BUFFER_RELEASE, or FREE counted as lost when the daemon goes away. */
enum slot_state {
    SLOT_FREE = 0,
    SLOT_CUPTI,
    SLOT_READY,
    SLOT_SENT
};

/* Records CUPTI has not completed carry bit 31 in their kind while they sit
 * in a buffer it holds (on the H200: docs/gpu-runs/20261204-h200-probe). */
#define KIND_INCOMPLETE 0x80000000u

struct shim_cupti {
    void *handle;
    char path[512];
    uint32_t version;
    /* The record layouts of the runtime CUPTI's release (proto/layouts.h);
     * NULL when this build does not know the version: names are not kept. */
    const struct cuptimon_cupti_release *release;
    CUptiResult (*GetVersion)(uint32_t *);
    CUptiResult (*GetResultString)(CUptiResult, const char **);
    CUptiResult (*RegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                     CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*Enable)(CUpti_ActivityKind);
    CUptiResult (*Disable)(CUpti_ActivityKind);
    CUptiResult (*FlushAll)(uint32_t);
    CUptiResult (*GetNextRecord)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*GetNumDroppedRecords)(CUcontext, uint32_t, size_t *);
    CUptiResult (*SetAttribute)(CUpti_ActivityAttribute, size_t *, void *);
    CUptiResult (*GetTimestamp)(uint64_t *);
    CUptiResult (*PushExternalCorrelationId)(CUpti_ExternalCorrelationKind, uint64_t);
    CUptiResult (*PopExternalCorrelationId)(CUpti_ExternalCorrelationKind, uint64_t *);
    /* optional (NULL when this libcupti lacks them) */
    cuptimon_get_struct_size_fn GetStructSize; /* 13.2+ */
    CUptiResult (*EnableRuntimeApi)(CUpti_CallbackId, uint8_t);
    CUptiResult (*EnableDriverApi)(CUpti_CallbackId, uint8_t);
    CUptiResult (*SetThreadIdType)(CUpti_ActivityThreadIdType);
};

struct shim_ready {
    struct cuptimon_buffer_ready msg;
};

/* What the IO thread's walk knows of a slot CUPTI holds (held.c): records
 * are appended and completed in order, so each pass continues where the
 * last one stopped.  Reset when the slot is handed out again (req). */
struct shim_scan {
    uint64_t req;
    uint32_t end, done;          /* bytes walked; bytes whose records are complete */
    uint32_t records, done_recs; /* records in [0, end) and in [0, done) */
};

/* What CUPTI holds, as a walk of the held slots found it (held.c). */
struct shim_held {
    int scanned;        /* 0: a held slot could not be walked (unknown layout, v2) */
    int head;           /* 1: some record is incomplete; the oldest is below */
    uint32_t head_slot; /* where it is */
    uint32_t head_off;
    uint64_t head_req;
    int complete_held;        /* some held slot holds only complete records */
    uint32_t buffers;         /* held slots from the head's on (all held ones when no head) */
    uint64_t records, bytes;  /* records in them from the head on, and their bytes */
    struct cuptimon_held msg; /* the HELD message body's fixed part */
    char name[CUPTIMON_HELD_NAME_MAX + 1];
};

/* What the IO thread knows of a slot it framed: its records (from the
 * walk), CUPTI's drop count that its BUFFER_READY carries, and where that
 * frame ends in the connection's byte stream (so that at exit the shim
 * knows whether it reached the socket). */
struct shim_slot_info {
    uint64_t records, dropped, frame_end;
};

/* Records the exit hand-off could not pass to a daemon (io.c works it out
 * once the IO thread has stopped; lost.c reports it). */
enum shim_loss_reason {
    SHIM_LOSS_NONE = 0,
    SHIM_LOSS_QUEUE_FULL,   /* the daemon's listen queue stayed full */
    SHIM_LOSS_REFUSED,      /* the daemon refused this process */
    SHIM_LOSS_UNSENT,       /* connected, but the socket did not take it all */
    SHIM_LOSS_DISCONNECTED, /* no connection at the end (daemon gone, hello failed) */
};

struct shim_loss {
    uint64_t records, buffers, dropped;
    enum shim_loss_reason reason;
    int err; /* the last connection attempt's errno, for the message */
};

struct shim {
    /* configuration, fixed after start */
    uint32_t nslots; /* all slots, the resident ones (nbase) and those it may grow by */
    uint64_t slot_size;
    uint64_t pool_max; /* CUPTIMON_POOL_MAX in bytes (0: the default cap, 1: none) */
    char sockets[SHIM_MAX_SOCKETS][108];
    int nsockets;
    uint32_t kinds[32];
    int nkinds;
    int debug;
    int exit_timeout_ms; /* the exit hand-off's bound (CUPTIMON_EXIT_TIMEOUT_MS) */

    struct shim_cupti cupti;
    /* CUPTI's v2 path (v2.c): 1 when the shim is its own subscriber with
     * user-defined records; else why not (for the hello and status). */
    int v2;
    int v2_tid_system; /* the subscriber's records carry system thread ids */
    char v1_reason[200];

    /* The pool (issue 33): nslots slots in one sealed memfd.  The first
     * nbase are the resident pool, zeroed and kept when they come back; the
     * others grow it while CUPTI holds buffers behind running work (records
     * complete in launch order), up to the cap pool_cap_why explains, and
     * are punched out of the memfd, their memory given back, as soon as the
     * daemon releases them.  Two free lists, so that a request takes a
     * resident slot whenever one is free. */
    int pool_fd;
    uint8_t *pool;
    uint32_t nbase;
    char pool_cap_why[96];
    _Atomic uint64_t free_head; /* resident slots: (tag << 32) | (index + 1); 0 index = empty */
    _Atomic uint64_t grow_head; /* slots past nbase, the same way */
    _Atomic uint32_t *free_next;
    _Atomic uint32_t grown, grown_peak; /* slots past nbase out now, and most at once */
    _Atomic int32_t grow_credit;        /* slots it may still grow by past a backlog (slot_pop) */
    /* The most slots out at once: nslots, or what the daemon takes at once
     * where its max_pool_bytes is less than the cap (its HELLO_ACK). */
    _Atomic uint32_t slot_limit;
    /* CLOCK_REALTIME ns of the first request declined since one last got a
     * buffer (0: none): CUPTI drops records now (HELD tells the daemon). */
    _Atomic uint64_t declining_since_ns;
    _Atomic uint8_t *slot_state;
    uint64_t *slot_used;        /* valid bytes per slot, for zeroing on release */
    _Atomic uint64_t *slot_gen; /* flush generation when CUPTI got the slot */
    _Atomic uint64_t *slot_req; /* request number when CUPTI got it: CUPTI fills in that order */
    _Atomic uint64_t req_next;
    struct shim_scan *scan; /* the IO thread's walk of each held slot (held.c) */
    uint32_t *scan_order;   /* its scratch: held slots by request number */
    uint8_t *slot_mark;     /* the IO thread's scratch, one byte a slot */
    _Atomic uint64_t flush_gen;
    _Atomic int cupti_taken;      /* another client took the callbacks */
    _Atomic int not_taken;        /* ... yet one of those buffers came back to the shim */
    _Atomic int reclaim_lost;     /* IO thread: free the slots lost to it */
    _Atomic uint64_t retakes;     /* times the shim took CUPTI back */
    int hook;                     /* route other objects' CUPTI calls to mux.c */
    unsigned long long hook_adds; /* dl_iterate_phdr's load count at the last scan */
    _Atomic uint64_t hooked;      /* import slots pointed at mux.c so far */
    _Atomic uint32_t pool_free;

    /* completion -> IO thread queue, under qlock */
    pthread_mutex_t qlock;
    struct shim_ready *ring; /* nslots entries: at most nslots buffers are ready */
    uint32_t ring_head, ring_len;
    uint64_t next_seq;
    /* every interned string, as encoded STRINGS entries; [0, strings_sent)
     * already went to the current daemon session */
    struct cuptimon_buf strings;
    size_t strings_sent;
    uint64_t strings_count;

    /* interned pointers: open addressing, fixed capacity */
    uint64_t *intern;
    uint32_t intern_cap;
    uint32_t intern_len;

    int wake_fd; /* eventfd: something queued for the IO thread */
    pthread_t io_thread;
    int io_running;
    _Atomic int stopping;
    _Atomic int connected;
    /* The last connection attempt found a daemon whose listen queue was
     * full (EAGAIN): it is there, only busy.  At exit the shim then keeps
     * trying within its hand-off bound; with no daemon it leaves at once. */
    _Atomic int daemon_busy;
    _Atomic int connect_tried; /* the IO thread made its first attempt */
    /* 1 + the index in sockets[] where a daemon last answered (connected,
     * or its queue was full); 0 while none has.  Loss reports go beside it. */
    _Atomic int daemon_seen;
    _Atomic int connect_errno; /* why the last attempt failed (0: it did not) */
    /* Buffers taken back from a daemon that went away, and their records,
     * that no later hello has told a daemon of yet. */
    _Atomic uint64_t unreported_buffers, unreported_records;
    _Atomic int refused;              /* the daemon's last word was a refusal */
    struct shim_slot_info *slot_info; /* nslots entries; the IO thread's */
    _Atomic int exiting;
    pthread_cond_t drained; /* signalled when queue and in-flight both empty */

    /* The per-session layout check (shim.c): per kind, the record size the
     * running libcupti uses, from cuptiActivityGetStructSize (13.2+) or
     * from the stride of its cuptiActivityGetNextRecord in the IO thread's
     * walk of each buffer (rec_size_by: SHIM_SIZE_BY_*).  IO thread only. */
    uint16_t rec_size[CUPTIMON_LAYOUT_KINDS];
    uint8_t rec_size_by[CUPTIMON_LAYOUT_KINDS];
    int struct_sizes_asked;
    uint64_t stride_conflicts; /* a kind seen at a second stride (never used) */

    /* counters (atomics: read by cuptimon_get_status from any thread) */
    _Atomic uint64_t buffers_completed, buffers_sent, buffers_released, buffers_lost;
    _Atomic uint64_t requests_declined, dropped_records, foreign_buffers, connects;
    /* Buffers CUPTI still held at exit when the exit bound had passed: the
     * work in them still ran, and the forced flush handed them over with
     * its records incomplete (no times).  Told to the daemon in the BYE. */
    _Atomic uint64_t exit_running_buffers;
    _Atomic uint64_t records_walked, layout_mismatch;
    /* Plain flushes not made because they could only have closed another
     * buffer behind the same running work (held.c). */
    _Atomic uint64_t flushes_skipped;
    _Atomic uint32_t in_flight; /* READY + SENT slots */
    /* How long the completion callback takes (it runs on CUPTI's thread,
     * under CUPTI's lock): log2 buckets of ns, and the longest. */
    _Atomic uint64_t completion_hist[40];
    _Atomic uint64_t completion_max_ns;
};

extern struct shim cuptimon__shim;

/* io.c */
int cuptimon__io_start(struct shim *s);
void cuptimon__io_wake(struct shim *s);
/* Waits until every queued buffer was handed to the daemon and released, or
 * timeout_ms passed, or no daemon is connected.  Returns 0 when drained. */
int cuptimon__io_drain(struct shim *s, int timeout_ms);
void cuptimon__io_stop(struct shim *s);
/* After cuptimon__io_stop: what did not reach a daemon. */
void cuptimon__io_exit_loss(struct shim *s, struct shim_loss *l);

/* lost.c: says what the exit hand-off lost, on stderr and in a loss report
 * the daemon picks up (when a daemon was there). */
void cuptimon__loss_report(struct shim *s, const struct shim_loss *l);

/* Queues one string (key -> name, at most 256 bytes) for the daemon's
 * table: user annotations, graph labels, thread names.  Any thread. */
void cuptimon__add_string(struct shim *s, uint64_t key, const char *name);

/* ranges.c: the queue of annotation pushes and pops.  note: any thread,
 * never blocks (-ENOBUFS when full: counted); frame: the IO thread,
 * appends RANGES frames to out (send 0: discards what is queued). */
void cuptimon__ranges_init(void);
int cuptimon__range_note(const struct cuptimon_range_ev *ev);
uint32_t cuptimon__ranges_pending(void);
uint64_t cuptimon__ranges_dropped(void);
int cuptimon__ranges_frame(struct shim *s, struct cuptimon_buf *out, int send);

/* nccl.c: the shim as NCCL's profiler plugin (issue 46).  setup: names
 * the shim in NCCL_PROFILER_PLUGIN unless the job named a plugin; collect:
 * the IO thread puts the finished operations (and the communicators'
 * states) into a pool slot and queues it (force: now, else at most once a
 * second unless the queue fills); 1 queued, 0 nothing to do, -1 no slot;
 * exit: records what is still in flight, flagged unfinished. */
void cuptimon__nccl_setup(const char *self_path);
int cuptimon__nccl_collect(struct shim *s, int force, long long now_ms);
uint32_t cuptimon__nccl_pending(void);
void cuptimon__nccl_exit(void);
int cuptimon__nccl_active(void);
uint64_t cuptimon__nccl_recorded(void);
uint64_t cuptimon__nccl_lost(void);
uint32_t cuptimon__nccl_version(void);
const char *cuptimon__nccl_plugin_state(const char **user);
/* shim.c: a free pool slot for the IO thread's own records (-1: none), and
 * its hand-over as a BUFFER_READY of CUPTIMON_OWN_RECORDS_STREAM. */
int cuptimon__slot_take(struct shim *s);
void cuptimon__slot_queue_own(struct shim *s, uint32_t idx, uint64_t valid, uint64_t records,
                              uint64_t dropped, uint64_t now_ns);

/* mux.c: sharing CUPTI with another tool (when preloaded) */
int cuptimon__mux_tool_wants(uint32_t kind);
int cuptimon__mux_needed(uint32_t kind);
void cuptimon__mux_note_ours(uint32_t kind, int on);
/* A tool's clock as a line: CUPTI time a is tool time t, and the tool's
 * clock advances rate units per CUPTI nanosecond. */
struct cuptimon_tool_clock {
    uint64_t a, t;
    double rate;
};
int cuptimon__mux_clock(struct cuptimon_tool_clock *c);
/* gen: the flush generation at which CUPTI got the buffer rec is in. */
void cuptimon__mux_deliver(const CUpti_Activity *rec, size_t size, uint64_t gen,
                           const struct cuptimon_tool_clock *clk);
/* Hands a buffer CUPTI completed to the shim but the shim never gave out
 * to the tool whose it is, when that tool's callback is known; 0 if not. */
int cuptimon__mux_foreign(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid);
/* Points other objects' imports of the entry points at mux.c (injected
 * shim; see hook.c).  force: scan even if nothing was loaded since. */
void cuptimon__mux_hook(struct shim *s, int force);
int cuptimon__mux_ours(uint32_t kind);
void cuptimon__mux_forget_kinds(void);

/* hook.c */
struct cuptimon_hook {
    const char *name;
    void *fn;
};
int cuptimon__hook_scan(const struct cuptimon_hook *targets, size_t n, void *self, void *cupti,
                        unsigned long long *adds);
unsigned long long cuptimon__hook_generation(void);

/* v2.c: CUPTI 13.3+'s own subscriber with user-defined records.  start:
 * 0 and s->v2 set (the CUPTI calls of shim_cupti go to the subscriber), or
 * -1 with s->v1_reason said (use the global API).  The layouts of a
 * slot's buffer are generation slot_gen; hello/frame_layouts describe a
 * generation (-ENOENT: no longer kept).  tick: the IO thread's periodic
 * work (HES flushes, one-time warnings). */
int cuptimon__v2_start(struct shim *s);
uint64_t cuptimon__v2_slot_gen_locked(uint32_t slot); /* qlock held */
uint64_t cuptimon__v2_current_gen(struct shim *s);
struct json_object;
void cuptimon__v2_hello(struct shim *s, struct json_object *o, uint64_t gen);
int cuptimon__v2_frame_layouts(struct shim *s, struct cuptimon_buf *out, uint64_t gen,
                               uint64_t seq);
void cuptimon__v2_tick(struct shim *s, long long now_ms);
long long cuptimon__v2_tick_in(long long now_ms); /* ms until the next tick is due */
int cuptimon__v2_hes(void);

/* held.c: the walk of what CUPTI holds (IO thread), the HELD report, and
 * whether a plain flush could return anything. */
void cuptimon__held_scan(struct shim *s, struct shim_held *h);
/* Appends a HELD frame to out when the report says something new (or
 * something is held and a second passed); 1 when it did. */
int cuptimon__held_frame(struct shim *s, const struct shim_held *h, struct cuptimon_buf *out,
                         long long now_ms);
/* A new connection: its daemon gets the next report whatever it says. */
void cuptimon__held_reset(void);
/* 1 when a periodic flush now should not be made: the same work holds
 * every buffer as at the last flush that ran, which was less than a
 * backoff ago.  flushed: a flush ran. */
int cuptimon__held_skip(struct shim *s, const struct shim_held *h, long long now_ms);
void cuptimon__held_flushed(struct shim *s, const struct shim_held *h, long long now_ms);

/* shim.c */
enum {
    SHIM_SIZE_BY_NONE = 0,
    SHIM_SIZE_BY_STRUCT_SIZE, /* cuptiActivityGetStructSize */
    SHIM_SIZE_BY_STRIDE,      /* cuptiActivityGetNextRecord's step */
};
/* IO thread, before a hello: asks a 13.2+ libcupti for its record sizes. */
void cuptimon__measure_struct_sizes(struct shim *s);
/* Back to the pool once the daemon is done with it (or nobody is): a
 * resident slot is zeroed where CUPTI wrote (used bytes), a grown one
 * punched out of the memfd, so that its memory goes back.  IO thread. */
void cuptimon__slot_recycle(struct shim *s, uint32_t idx, uint64_t used);
/* The size of a kind's records in the running libcupti (measured, else
 * the release's table), 0 when unknown. */
uint32_t cuptimon__record_size(const struct shim *s, uint32_t kind);
/* The buffer request callback (both paths: the v2 one adds an argument). */
void CUPTIAPI cuptimon__buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records);
/* IO thread: walks a completed slot, interns its names; returns records. */
uint64_t cuptimon__walk_slot(struct shim *s, uint32_t idx, uint64_t valid);
int cuptimon__enable_kind(struct shim *s, uint32_t kind, int on);
/* After another client held CUPTI and let go: register the shim's callbacks
 * again and turn its kinds back on. */
void cuptimon__retake(struct shim *s, const char *why);
/* After a forced flush that began at generation gen: did another client
 * take CUPTI (slots it still holds were completed elsewhere)? */
int cuptimon__check_taken(struct shim *s, uint64_t gen);
/* Around a plain flush of generation gen: takeover found without forcing. */
uint32_t cuptimon__mark_complete_held(struct shim *s, uint64_t gen);
int cuptimon__taken_if_held(struct shim *s, uint64_t gen);
/* How many slots CUPTI got before generation gen and holds still. */
uint32_t cuptimon__cupti_holds(struct shim *s, uint64_t gen);
/* The same with a forced flush of its own. */
int cuptimon__probe_taken(struct shim *s);
void cuptimon__log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define shim_debug(s, ...)                                                                         \
    do {                                                                                           \
        if ((s)->debug)                                                                            \
            cuptimon__log(__VA_ARGS__);                                                            \
    } while (0)

#endif
