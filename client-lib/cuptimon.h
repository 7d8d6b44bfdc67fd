/*
 * libcuptimon: the cuptimon shim's public C API.
 *
 * Most jobs never call any of this: the shim starts by itself when loaded
 * with CUDA_INJECTION64_PATH=libcuptimon.so or LD_PRELOAD=libcuptimon.so.
 * A program that links the library may call cuptimon_init() instead.
 * Every function is safe to call at any time from any thread, before or
 * after init, with or without a daemon; none of them blocks on the daemon.
 */
#ifndef CUPTIMON_H
#define CUPTIMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CUPTIMON_API __attribute__((visibility("default")))
#else
#define CUPTIMON_API
#endif

/* Starts the shim (idempotent).  Returns 0, or a negative errno when CUPTI
 * could not be loaded or refused; the job carries on untraced either way. */
CUPTIMON_API int cuptimon_init(void);

/* Hands off what CUPTI holds (waiting up to half of timeout_ms for the work
 * still running to end, then forcing out what still runs, counted), waits
 * at most timeout_ms for the daemon to take it, then stops tracing.  Also
 * run at exit. */
CUPTIMON_API void cuptimon_shutdown(int timeout_ms);

/* Asks CUPTI for the buffers whose records are complete now.  wait != 0:
 * asks again until every buffer CUPTI held at the call is back (the work
 * launched before it has ended), for at most a second, and returns
 * -ETIMEDOUT when work still ran then.  Never forces CUPTI (that would lose
 * the records of running work).  Returns 0 or a negative errno. */
CUPTIMON_API int cuptimon_flush(int wait);

/* User annotations: a named range on the calling thread, carried to GPU
 * work through CUPTI external correlation ids.  Outside a trace window
 * they cost a few nanoseconds and are never an error. */
CUPTIMON_API int cuptimon_push_annotation(const char *name);
CUPTIMON_API int cuptimon_pop_annotation(void);

/* Training steps without torch.profiler: ends the calling thread's
 * previous step (when it is still its innermost annotation) and pushes
 * annotation "ProfilerStep#N", N counting the calls in this process from 0
 * (outside a window too, so numbers stay those of the job's steps).
 * Traces show it as Kineto shows torch.profiler's steps.  Returns N, or
 * -EBUSY (annotations pushed after the previous step are still open: pop
 * them first), or a negative errno from the push.  cuptimon_step_end()
 * ends the open step (0 when there is none). */
CUPTIMON_API int64_t cuptimon_step(void);
CUPTIMON_API int cuptimon_step_end(void);

/* Names a CUDA graph node so that its replayed kernels carry the label. */
CUPTIMON_API int cuptimon_label_graph_node(uint64_t graph_node_id, const char *name);

struct cuptimon_status {
    uint32_t struct_size;   /* set by the caller to sizeof(struct cuptimon_status) */
    int started;            /* CUPTI callbacks registered */
    int connected;          /* a daemon session is up */
    uint32_t cupti_version; /* CUPTI API version, 0 when not loaded */
    uint64_t buffers_completed;
    uint64_t buffers_sent;
    uint64_t buffers_released;
    uint64_t buffers_lost;      /* in flight when a daemon went away */
    uint64_t requests_declined; /* CUPTI asked for a buffer, the pool was empty */
    uint64_t dropped_records;   /* CUPTI's count */
    uint64_t foreign_buffers;   /* completions of buffers the shim does not own */
    uint64_t connects;          /* sessions opened (1 + reconnects) */
    uint32_t pool_slots;
    uint32_t pool_free;
    uint64_t slot_size;
};

/* Fills *st (st->struct_size must be set).  Returns 0 or -EINVAL. */
CUPTIMON_API int cuptimon_get_status(struct cuptimon_status *st);

/* Library version, e.g. "0.1.0". */
CUPTIMON_API const char *cuptimon_version(void);

#ifdef __cplusplus
}
#endif
#endif
