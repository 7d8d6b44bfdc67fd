/*
 * fakecupti.h: the libcupti test double (libcupti-fake.so) and its fake CUDA API.
 *
 * There is no GPU in CI.  libcupti-fake.so exports the CUPTI 13.0 activity API with the
 * prototypes of the real <cupti.h> (the implementation includes it, so the compiler checks
 * every signature) and behaves like the real library as far as a test can tell:
 *
 *   - records use the real CUPTI 13.0 structs (CUpti_ActivityKernel10 216 bytes, Memcpy6 96,
 *     Memset4 88, API 40, ExternalCorrelation 24), packed back to back in the client's
 *     buffer; cuptiActivityGetNextRecord walks them by the kind at offset 0 and the struct
 *     size (CUPTI_ERROR_MAX_LIMIT_REACHED at validSize, CUPTI_ERROR_INVALID_KIND for an
 *     unknown kind or a truncated record);
 *   - the buffer-request callback is called on the launching thread, with the double's
 *     lock held (like CUPTI, the request blocks other launching threads); a NULL/0 answer
 *     drops the record and counts it for cuptiActivityGetNumDroppedRecords;
 *   - buffers are per thread by default, like CUPTI 13.0
 *     (CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER defaults to 1): each launching thread
 *     fills its own buffer, so a client has one buffer out per launching thread plus the
 *     ones waiting for completion.  Set the attribute to 0 for one global buffer;
 *   - GPU records (kernel, memcpy, memset) are written into the buffer at launch,
 *     incomplete, as on the H200 (docs/gpu-runs/20261204-h200-probe): kind with bit 31 set,
 *     start/end/completed 0.  They are completed (times filled in, kind clean) once their
 *     work has ended, in launch order: a record whose work still runs holds back every
 *     later one, on any stream.  API and external-correlation records are complete as
 *     written;
 *   - a buffer is closed when it is full (or cannot take the next record) and by every
 *     flush; records after that go into a new buffer.  Closed buffers are completed in the
 *     order they were closed, on the double's completion thread (its "CUPTI worker"), one
 *     at a time, with ctx NULL, streamId 0: a full one once all its records are complete;
 *     one a flush closed only by a later flush that finds it complete — nothing is
 *     delivered without a flush, as on the H200.  The completion callback is called
 *     WITHOUT the double's lock held; it is read at delivery time, so a second
 *     cuptiActivityRegisterCallbacks takes over buffers that were handed out under the
 *     first (as measured on the H200);
 *   - cuptiActivityFlushAll(0) closes every current buffer that holds records and delivers
 *     the closed buffers in order up to the first that holds a record not complete yet;
 *     that one and all after it stay queued until a later flush finds them complete.
 *     cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) delivers every buffer, the
 *     records whose work still runs with times 0 (counted in records_incomplete), and
 *     never completes those later.  Both return only after the completion thread has
 *     returned from the completion callback of every buffer they delivered.  Flushing
 *     from inside a request/completion callback is refused with
 *     CUPTI_ERROR_INVALID_OPERATION (it would deadlock) and a warning on stderr.  Without
 *     a completion thread (after the library destructor ran) the flush delivers inline on
 *     the caller's thread.  Without registered callbacks it returns
 *     CUPTI_ERROR_INVALID_OPERATION, as documented;
 *   - cuptiActivityFlushPeriod(ms) makes the completion thread close, every ms, the
 *     current buffers that are full (cannot take one more kernel record); they are
 *     delivered once their records are complete;
 *   - record order in the buffer follows the real H200 capture in tests/data: for one
 *     launch, [ExternalCorrelation per kind] [GPU record] [driver API] [runtime API], since
 *     CUPTI reserves the GPU record at launch and writes API records at API exit (the
 *     nested driver call exits first); FAKECUPTI_API_ORDER puts the runtime record first;
 *   - one correlation id per fake launch on all its records (the nested driver call has
 *     its runtime call's id), never 0.  By default one process-wide counter from 1 numbers
 *     the launches in the order they are made; CUPTI promises unique ids only, and the
 *     FAKECUPTI_CORR_* knobs number as it may: per kind, out of order, wrapping at 2^32;
 *   - ExternalCorrelation records (one per external kind that has an id pushed on the
 *     calling thread, with the innermost id) are emitted only when the kind
 *     EXTERNAL_CORRELATION is enabled AND the launch produces at least one API record: the
 *     header documents them as preceding API records; do not rely on more;
 *   - timestamps: CLOCK_REALTIME ns (CUPTI's Linux default), or the callback registered with
 *     cuptiActivityRegisterTimestampCallback (API times are sampled through it; GPU times
 *     are mapped into it with a rate of 1 ns per unit);
 *   - the fake GPU executes each stream's work in order (a kernel lasts 1-5 us, a 4 KiB
 *     copy about 1.4 us); streams run concurrently; work on a stream starts after the API
 *     call that launched it returned.  A launch blocks while its stream is more than 2 ms of
 *     work ahead of the wall clock (a full launch queue), so GPU times stay near real time.
 *
 * fork(): the child has no completion thread until it needs one, and forgets every buffer
 * that was out at the fork (the parent completes those); its own records go to new buffers.
 *
 * Internal calls never go through exported symbols, so an LD_PRELOADed shim that
 * interposes cupti* entry points does not see the double's own calls.
 *
 * Environment (read at the moment it matters, so a test may setenv() between calls):
 *   FAKECUPTI_VERSION=N           cuptiGetVersion returns N (default 130001), and GPU
 *                                 records take the struct versions that CUPTI release
 *                                 writes (CUDA 12.x: Kernel9, Memcpy5/6; 13.0 Kernel10;
 *                                 13.1 Kernel11; 13.3 Kernel12; 13.4+ Kernel13, Memcpy7,
 *                                 Memset5; see fc_gen in fakecupti.c).  The layouts are
 *                                 fixed by the value at the first record written or
 *                                 walked (until fakecupti_reset); cuptiGetVersion reads
 *                                 it at every call.
 *   FAKECUPTI_CUDA=R              be CUDA release R (11.8, 12.0 ... 12.9, 12.9.1, 13.0,
 *                                 13.0.1 ... 13.5; fc_cudas in fakecupti.c) instead:
 *                                 cuptiGetVersion numbers as R does (12.0 and 12.1 report
 *                                 18, as 11.8 does) and records take R's structs (11.8:
 *                                 Kernel8).  Overrides FAKECUPTI_VERSION.
 *
 * cuptiActivityGetStructSize (CUPTI 13.2+) is exported, declared below; emulating a
 * release before 13.2 it answers CUPTI_ERROR_API_NOT_IMPLEMENTED, as if absent.
 *   FAKECUPTI_COMPLETE_DELAY_US=N the completion thread sleeps N us before each completion
 *                                 callback (a slow CUPTI: buffers come back late).
 *   FAKECUPTI_LOG=1               trace API calls and buffer events on stderr ("fakecupti: ").
 *                                 2 also traces each launch.  Read once, at load.
 *   FAKECUPTI_DROP_QUEUE=stream   count dropped GPU records under (fakecuda_context(device),
 *                                 streamId) instead of the global queue (NULL, 0).  By
 *                                 default every drop is counted under (NULL, 0), where a
 *                                 client that asks with the completion callback's (ctx,
 *                                 streamId) finds it: CUDA >= 6.0 buffers are global.
 *   FAKECUPTI_HW_TRACE=1          cuptiActivityEnableHWTrace(1) succeeds (a Blackwell);
 *                                 default CUPTI_ERROR_NOT_SUPPORTED, like the H200.
 *
 * Correlation ids and API records (read at the first launch after load or
 * fakecupti_reset; a bad value is named on stderr and the default used):
 *   FAKECUPTI_CORR_START=N        the counter's first id (1..4294967295, default 1).  A
 *                                 counter wraps from 4294967295 to 1 (0 means "no
 *                                 correlation" in CUPTI's records and is never handed out).
 *   FAKECUPTI_CORR_RANGES=K,C,S   kernels, copies and memsets each from their own counter,
 *                                 starting at K, C and S (each wrapping as above); the API
 *                                 calls of a launch share its id.  Overrides _START.
 *   FAKECUPTI_CORR_SHUFFLE=B      out of order: each block of B consecutive ids of a counter
 *                                 (B a power of two, 2..1048576) goes to its B launches in
 *                                 bit-reversed order.  1 or unset: in order.
 *   FAKECUPTI_DROP_API=N          every Nth launch that has API records on loses them (its
 *                                 runtime, driver and ExternalCorrelation records) while its
 *                                 GPU record is written, as when CUPTI had no buffer for them
 *                                 at API exit; they count as dropped (global queue, NULL/0)
 *                                 and in fakecuda_last_result().  0 or unset: none.
 *   FAKECUPTI_API_ORDER=O         driver-first (default: the nested driver record, then the
 *                                 runtime record), runtime-first, or alternate (launches with
 *                                 API records on take turns, the first driver-first).
 *   FAKECUPTI_RT_LEAD_NS=N        each runtime call spends N ns (0 to 10^9) before its nested
 *                                 driver call starts, as on a GPU when the runtime loads a
 *                                 module lazily or stages a pageable copy first: a call begun
 *                                 just before a window's start has its driver call inside.
 *                                 The first launch after load does not wait.  0 or unset: none.
 *                                 default CUPTI_ERROR_NOT_SUPPORTED, like the H200.  Also
 *                                 the _v2 attribute ENABLE_HES; =mig: it answers
 *                                 CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED.
 *
 * CUPTI 13.2+ multiple subscribers and user-defined records (fakecupti-v2.c; the _v2 entry
 * points answer CUPTI_ERROR_NOT_SUPPORTED below the version that brought them: 13.2 for
 * subscribe, attributes, callbacks and enable/disable, 13.3 for the rest), as documented in
 * shared/reference/cupti-v2.md:
 *   - cuptiSubscribe_v2: the first subscriber decides whether others may join
 *     (allowMultipleSubscribers; attribute MULTIPLE_SUBSCRIBER_STATE 2 unset / 0 / 1); one
 *     that may not gets CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED and the first one's
 *     name in oldSubscriberName ("CUPTI for NAME").  At most 8 subscribers.
 *   - v1 and v2 do not mix, and the process does not go back: after a subscriber existed,
 *     cuptiActivityRegisterCallbacks/Enable/Disable answer MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
 *     and cuptiGetTimestamp, Push/PopExternalCorrelationId, GetNumDroppedRecords,
 *     EnableRuntimeApi/DriverApi and RegisterTimestampCallback NOT_COMPATIBLE; after the
 *     global activity API was used, cuptiSubscribe_v2 answers MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED.
 *   - Per subscriber: callbacks, buffers (per launching thread), enabled kinds, field
 *     selections, attributes (USER_DEFINED_RECORDS, only before its first enable;
 *     KERNEL_LATENCY_TIMESTAMPS: queued/submitted before start; ZEROED_OUT_ACTIVITY_BUFFER;
 *     THREAD_ID_TYPE), dropped counts, external correlation stacks, per-cbid API filters
 *     (EnableRuntimeApi_v2/DriverApi_v2: NOT_COMPATIBLE under user-defined records before
 *     13.4; 13.4's pKindOptions allow/deny lists).  The fake GPU writes a record once per
 *     subscriber that enabled its kind.
 *   - User-defined records: KIND at offset 0, then the selected fields in selection order
 *     (FAKECUPTI_UDR_ORDER=id: id order) at natural alignment, rounded up to 8 bytes; widths
 *     as the headers' comments document them (64-bit kernel context, stream and correlation
 *     ids, API thread and correlation ids; FAKECUPTI_UDR_WIDTHS=struct: the predefined
 *     struct's widths, as PyTorch measured on one build).  KIND must come first in a
 *     selection, ids must be known and unique; CDP_KERNEL, PREEMPTION, MODULE,
 *     DEVICE_ATTRIBUTE, FUNCTION and MEMORY refuse (NOT_SUPPORTED).
 *   - The completion callback gets CUpti_BufferCallbackCompleteInfo with ppRecordLayouts
 *     indexed by kind (60 entries; one for each kind the subscriber enabled; none before
 *     13.3).  They are valid only during the callback: afterwards their memory is
 *     inaccessible, and so is the kernel NAME a user-defined record points to (a copy CUPTI
 *     owns, one per name): a client that keeps either pointer faults.
 *   - cuptiActivityFlushAll flushes every subscriber: flag 0 only buffers whose GPU records
 *     have all ended, FORCED all of them, with a record still running handed over with end
 *     (and a start still to come) 0.  cuptiUnsubscribe completes the subscriber's buffers.
 *   - Statistics and fakecuda_last_result() describe the first live subscriber (normally
 *     the shim); fakecupti_get_subscriber_stats() any one by name.
 *   Not modelled: the TIMESTAMP_CALLBACK attribute (NOT_SUPPORTED), graph-level trace,
 *   fork() while subscribed, a selection changed without the flush CUPTI requires.
 *   FAKECUPTI_V2_FAIL=subscribe|udr  cuptiSubscribe_v2 / the USER_DEFINED_RECORDS attribute
 *                                 answer CUPTI_ERROR_UNKNOWN (a v2 error, for fallback tests).
 */
#ifndef CUPTIMON_FAKECUPTI_H
#define CUPTIMON_FAKECUPTI_H

#include <stddef.h>
#include <stdint.h>
#include <cupti.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- fake CUDA API (what the "application" calls) ---- */

/* Emulates the CUDA driver's tool injection at cuInit: if CUDA_INJECTION64_PATH is set,
 * dlopen(RTLD_NOW) it and call its `int InitializeInjection(void)` (the return value is
 * logged and otherwise ignored, as the driver does).  Once per process: later calls return
 * the first result.  Returns 0 (also when the variable is unset), or -1 with a message on
 * stderr when the library cannot be loaded or has no InitializeInjection. */
int fakecuda_init(void);

/* A kernel launch: cudaLaunchKernel (or cudaGraphLaunch when graph_id != 0).  Emits, as
 * enabled: the kernel record (kind CONCURRENT_KERNEL if enabled, else KERNEL), the driver
 * record cuLaunchKernel (cuGraphLaunch), the runtime record cudaLaunchKernel_v7000
 * (cudaGraphLaunch_v10000), preceded by ExternalCorrelation records.  `name` is stored as
 * the record's `name` pointer: it must stay valid until the buffers have been consumed
 * (for a shim, until the process exits).  Grid/block are derived from a hash of the name.
 * Returns the launch's correlation id, or 0 when no record kind for it was enabled (then
 * no id is consumed).  A non-zero id does not mean the records were written: they may
 * have been dropped; see fakecuda_last_result(). */
uint32_t fakecuda_launch_kernel(const char *name, uint32_t device, uint32_t stream,
                                uint64_t graph_id, uint64_t graph_node_id);

struct fakecuda_kernel {
    const char *name;
    uint32_t device, stream;
    int32_t grid[3], block[3]; /* 0 = derived from the name */
    int32_t dynamic_shared;    /* bytes */
    uint64_t graph_id, graph_node_id;
    uint64_t duration_ns; /* 0 = 1000..5000 ns, pseudo-random */
};
/* The same with an explicit launch configuration. */
uint32_t fakecuda_launch_kernel_ex(const struct fakecuda_kernel *k);

/* cudaMemcpyAsync_v3020 (driver: cuMemcpyHtoDAsync_v2 / DtoH / DtoD / cuMemcpyAsync) and a
 * CUpti_ActivityMemcpy6 record; copy_kind is a CUpti_ActivityMemcpyKind (1 HtoD, 2 DtoH,
 * 8 DtoD, 9 HtoH...), which also sets srcKind/dstKind (host side pageable). */
uint32_t fakecuda_memcpy(uint64_t bytes, int copy_kind, uint32_t device, uint32_t stream);

/* cudaMemsetAsync_v3020 (driver: cuMemsetD8Async) and a CUpti_ActivityMemset4 record
 * (device memory). */
uint32_t fakecuda_memset(uint64_t bytes, uint32_t value, uint32_t device, uint32_t stream);

/* What the calling thread's last fakecuda_launch_kernel/_ex/memcpy/memset did with each
 * of its records: FAKECUDA_REC_* bits for records written into a buffer, the same bits
 * shifted by FAKECUDA_DROPPED_SHIFT for records dropped. */
#define FAKECUDA_REC_GPU       0x1u /* kernel, memcpy or memset record */
#define FAKECUDA_REC_RUNTIME   0x2u
#define FAKECUDA_REC_DRIVER    0x4u
#define FAKECUDA_REC_EXTCORR   0x8u /* at least one ExternalCorrelation record */
#define FAKECUDA_DROPPED_SHIFT 8
uint32_t fakecuda_last_result(void);

/* Like cudaDeviceSynchronize on every device: returns when the fake GPU has finished all
 * work launched so far (every record's end time is then in the past). */
void fakecuda_synchronize(void);

/* The opaque CUcontext handle of a device's (fake) primary context; never dereference it.
 * Records carry contextId = device + 1. */
CUcontext fakecuda_context(uint32_t device);

/* CUPTI 13.2's cuptiActivityGetStructSize (newer than the headers this is built with):
 * the size of a kind's predefined record in the running CUPTI (version 0) or in the
 * CUPTI of API version `version` (>= 130000, else CUPTI_ERROR_NOT_SUPPORTED). */
CUptiResult CUPTIAPI cuptiActivityGetStructSize(CUpti_ActivityKind activityKind, uint32_t version,
                                                size_t *activityStructSize);

/* ---- test introspection ---- */

struct fakecupti_stats {
    /* records written into client buffers, by kind */
    uint64_t kernels; /* CONCURRENT_KERNEL or KERNEL */
    uint64_t memcpys;
    uint64_t memsets;
    uint64_t runtime_api;
    uint64_t driver_api;
    uint64_t external_correlation;
    uint64_t records_dropped;        /* all kinds: no buffer, or no callbacks registered */
    uint64_t buffers_requested;      /* request callback invocations */
    uint64_t requests_declined;      /* ... that returned NULL or size 0 */
    uint64_t buffers_rejected;       /* ... that returned a misaligned or too small buffer
                                       (completed back at once with validSize 0) */
    uint64_t buffers_completed;      /* completion callbacks returned */
    uint64_t buffers_lost;           /* completed while no completion callback was set */
    uint64_t buffers_pending;        /* queued for completion now */
    uint64_t dirty_buffers;          /* not all zero although ZEROED_OUT_ACTIVITY_BUFFER=1 */
    uint64_t flushes;                /* cuptiActivityFlushAll calls that flushed */
    uint64_t callback_registrations; /* successful cuptiActivityRegisterCallbacks calls */
    int callbacks_registered;        /* 1 while a pair of buffer callbacks is registered */
    uint32_t last_correlation;       /* last correlation id handed out (0: none yet) */
    uint64_t records_incomplete;     /* GPU records a forced flush handed over while their
                                        work still ran (times 0; never completed after) */
    uint64_t records_pending;        /* GPU records written, not yet complete, now */
};
void fakecupti_get_stats(struct fakecupti_stats *out);
/* The statistics of the live _v2 subscriber named name (its subscriberName): 0, or -1 when
 * there is none. */
int fakecupti_get_subscriber_stats(const char *name, struct fakecupti_stats *out);

/* Back to the state of a freshly loaded library (for tests that share one process):
 * force-flushes every buffer, empty ones included, to the current completion callback,
 * stops the completion thread, forgets callbacks, enabled kinds, attributes, drop counts,
 * the fake GPU's streams, the calling thread's external correlation stacks, statistics,
 * and the correlation numbering (the FAKECUPTI_CORR_* knobs are read again at the next
 * launch).  Not to be called while other threads launch. */
void fakecupti_reset(void);

#ifdef __cplusplus
}
#endif

#endif /* CUPTIMON_FAKECUPTI_H */
