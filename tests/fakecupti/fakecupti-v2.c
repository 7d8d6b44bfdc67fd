/*
 * fakecupti-v2.c: the test double's CUPTI 13.2+ multi-subscriber API with
 * user-defined records (UDR), as shared/reference/cupti-v2.md documents it
 * (the "Multi-subscriber protocol", the "UDR record/buffer format" and the
 * pitfalls it lists).  fakecupti.h says what it models and what not.
 *
 * The contract, in brief:
 *  - cuptiSubscribe_v2 with allowMultipleSubscribers: the first subscriber
 *    decides for all (attribute MULTIPLE_SUBSCRIBER_STATE: 2 unset, 0 one
 *    subscriber only, 1 several); a later subscriber that asks otherwise,
 *    or any after a first that disallowed, gets
 *    MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED with the first one's name;
 *  - v1 and v2 do not mix: once a subscriber exists, the global activity
 *    calls fail (fc_v1_gate), and once the global activity API was used,
 *    cuptiSubscribe_v2 fails; the process cannot go back;
 *  - each subscriber has its own callbacks, buffers (per launching thread),
 *    enabled kinds, field selections, attributes, dropped counts and
 *    external correlation stacks; records reach only the subscribers that
 *    enabled their kind, each laid out as its selection says: KIND first
 *    (offset 0, 4 bytes), then the selected fields in selection order (or
 *    id order: FAKECUPTI_UDR_ORDER=id) at natural alignment, the record
 *    rounded up to 8 bytes;
 *  - the completion callback gets ppRecordLayouts indexed by kind (an entry
 *    for every kind the subscriber enabled, NULL for the rest) from 13.3
 *    on (13.2 leaves it empty); the layouts live in memory that is made
 *    inaccessible when the callback returns, and the NAME of a kernel
 *    record points into CUPTI-owned memory that is readable only while a
 *    completion callback runs: a client that keeps either pointer faults;
 *  - cuptiActivityFlushAll flushes every subscriber (flag 0: only buffers
 *    whose records have all ended; FORCED: all, records still running
 *    handed over with end 0).
 */
#include "config.h"

#include "fakecupti.h"
#include "fakecupti-int.h"

#define CUPTIMON_CUPTI_ABI_V2_ONLY
#include "cupti-abi.h"

#include "cupti-future.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define V2_MAX_SUBS   8
#define V2_KINDS      64 /* activity kinds a subscriber may enable */
#define V2_MAX_FIELDS 48 /* field ids of one kind */
#define V2_EXT_KINDS  CUPTI_EXTERNAL_CORRELATION_KIND_SIZE
#define V2_EXT_DEPTH  64
#define V2_LAYOUTS_N  60u /* CUPTI_ACTIVITY_KIND_COUNT of 13.3: ppRecordLayouts' length */
#define V2_ARENA      (64u << 10)
#define V2_ARENAS     8
#define V2_NAMES_SIZE (1u << 20)
#define V2_NAMES_TAB  4096u

/* ---------------------------------------------------------------- fields */

/* One field id of a kind: where the predefined record the fake GPU writes
 * keeps it (src_off < 0: the double never writes this kind, only its
 * layout is modelled), its width there, and its width in a user-defined
 * record by the header's documented type (udr_w) or, with
 * FAKECUPTI_UDR_WIDTHS=struct, the predefined struct's (what PyTorch
 * measured on one build).
 *
 * The per-kind tables below look alike because every kind's fields do: a
 * line is one field id's facts, from the headers and NVIDIA's documents.
 * They are the double's own on purpose, not client-lib/v2-fields.c's
 * selection or proto/layouts.c's tables: the double is the model those
 * are tested against, and sharing them would test the shim by itself. */
struct fdef {
    int16_t src_off;
    uint8_t src_w, udr_w;
    uint8_t how;     /* F_PLAIN, F_CACHE_REQ, F_CACHE_EXE, F_NAME, F_QUEUED, F_SUBMITTED, F_TID */
    uint8_t min_gen; /* kernel fields only: 10 isDeviceLaunched, 11 priority, 12 executionModel */
};
enum {
    F_NONE = 0,
    F_PLAIN,
    F_CACHE_REQ,
    F_CACHE_EXE,
    F_NAME,
    F_QUEUED,
    F_SUBMITTED,
    F_TID,
};

#define K9(m)  (int16_t) offsetof(CUpti_ActivityKernel9, m), sizeof(((CUpti_ActivityKernel9 *)0)->m)
#define MC5(m) (int16_t) offsetof(CUpti_ActivityMemcpy5, m), sizeof(((CUpti_ActivityMemcpy5 *)0)->m)
#define MC6(m) (int16_t) offsetof(CUpti_ActivityMemcpy6, m), sizeof(((CUpti_ActivityMemcpy6 *)0)->m)
#define MS4(m) (int16_t) offsetof(CUpti_ActivityMemset4, m), sizeof(((CUpti_ActivityMemset4 *)0)->m)
#define API(m) (int16_t) offsetof(CUpti_ActivityAPI, m), sizeof(((CUpti_ActivityAPI *)0)->m)
#define EXT(m)                                                                                     \
    (int16_t) offsetof(CUpti_ActivityExternalCorrelation, m),                                      \
        sizeof(((CUpti_ActivityExternalCorrelation *)0)->m)
#define NONE(w) -1, w

static const struct fdef kernel_fields[] = {
    [KERNEL_FIELD_KIND] = {K9(kind), 4, F_PLAIN, 0},
    [KERNEL_FIELD_CACHE_CONFIG_REQUESTED] = {K9(cacheConfig), 1, F_CACHE_REQ, 0},
    [KERNEL_FIELD_CACHE_CONFIG_EXECUTED] = {K9(cacheConfig), 1, F_CACHE_EXE, 0},
    [KERNEL_FIELD_SHARED_MEMORY_CONFIG] = {K9(sharedMemoryConfig), 1, F_PLAIN, 0},
    [KERNEL_FIELD_REGISTERS_PER_THREAD] = {K9(registersPerThread), 2, F_PLAIN, 0},
    [KERNEL_FIELD_PARTITIONED_GLOBAL_CACHE_REQUESTED] = {K9(partitionedGlobalCacheRequested), 4,
                                                         F_PLAIN, 0},
    [KERNEL_FIELD_PARTITIONED_GLOBAL_CACHE_EXECUTED] = {K9(partitionedGlobalCacheExecuted), 4,
                                                        F_PLAIN, 0},
    [KERNEL_FIELD_START] = {K9(start), 8, F_PLAIN, 0},
    [KERNEL_FIELD_END] = {K9(end), 8, F_PLAIN, 0},
    [KERNEL_FIELD_COMPLETED] = {K9(completed), 8, F_PLAIN, 0},
    [KERNEL_FIELD_DEVICE_ID] = {K9(deviceId), 4, F_PLAIN, 0},
    [KERNEL_FIELD_CONTEXT_ID] = {K9(contextId), 8, F_PLAIN, 0},
    [KERNEL_FIELD_STREAM_ID] = {K9(streamId), 8, F_PLAIN, 0},
    [KERNEL_FIELD_GRID_X] = {K9(gridX), 4, F_PLAIN, 0},
    [KERNEL_FIELD_GRID_Y] = {K9(gridY), 4, F_PLAIN, 0},
    [KERNEL_FIELD_GRID_Z] = {K9(gridZ), 4, F_PLAIN, 0},
    [KERNEL_FIELD_BLOCK_X] = {K9(blockX), 4, F_PLAIN, 0},
    [KERNEL_FIELD_BLOCK_Y] = {K9(blockY), 4, F_PLAIN, 0},
    [KERNEL_FIELD_BLOCK_Z] = {K9(blockZ), 4, F_PLAIN, 0},
    [KERNEL_FIELD_STATIC_SHARED_MEMORY] = {K9(staticSharedMemory), 4, F_PLAIN, 0},
    [KERNEL_FIELD_DYNAMIC_SHARED_MEMORY] = {K9(dynamicSharedMemory), 4, F_PLAIN, 0},
    [KERNEL_FIELD_LOCAL_MEMORY_PER_THREAD] = {K9(localMemoryPerThread), 4, F_PLAIN, 0},
    [KERNEL_FIELD_CORRELATION_ID] = {K9(correlationId), 8, F_PLAIN, 0},
    [KERNEL_FIELD_GRID_ID] = {K9(gridId), 8, F_PLAIN, 0},
    [KERNEL_FIELD_NAME] = {K9(name), 8, F_NAME, 0},
    [KERNEL_FIELD_QUEUED] = {K9(queued), 8, F_QUEUED, 0},
    [KERNEL_FIELD_SUBMITTED] = {K9(submitted), 8, F_SUBMITTED, 0},
    [KERNEL_FIELD_LAUNCH_TYPE] = {K9(launchType), 1, F_PLAIN, 0},
    [KERNEL_FIELD_IS_SHARED_MEMORY_CARVEOUT_REQUESTED] = {K9(isSharedMemoryCarveoutRequested), 1,
                                                          F_PLAIN, 0},
    [KERNEL_FIELD_SHARED_MEMORY_CARVEOUT_REQUESTED] = {K9(sharedMemoryCarveoutRequested), 1,
                                                       F_PLAIN, 0},
    [KERNEL_FIELD_SHARED_MEMORY_EXECUTED] = {K9(sharedMemoryExecuted), 4, F_PLAIN, 0},
    [KERNEL_FIELD_GRAPH_NODE_ID] = {K9(graphNodeId), 8, F_PLAIN, 0},
    [KERNEL_FIELD_SHMEM_LIMIT_CONFIG] = {K9(shmemLimitConfig), 4, F_PLAIN, 0},
    [KERNEL_FIELD_GRAPH_ID] = {K9(graphId), 4, F_PLAIN, 0},
    [KERNEL_FIELD_ACCESS_POLICY_WINDOW] = {K9(pAccessPolicyWindow), 8, F_PLAIN, 0},
    [KERNEL_FIELD_CHANNEL_ID] = {K9(channelID), 4, F_PLAIN, 0},
    [KERNEL_FIELD_CHANNEL_TYPE] = {K9(channelType), 4, F_PLAIN, 0},
    [KERNEL_FIELD_CLUSTER_X] = {K9(clusterX), 4, F_PLAIN, 0},
    [KERNEL_FIELD_CLUSTER_Y] = {K9(clusterY), 4, F_PLAIN, 0},
    [KERNEL_FIELD_CLUSTER_Z] = {K9(clusterZ), 4, F_PLAIN, 0},
    [KERNEL_FIELD_CLUSTER_SCHEDULING_POLICY] = {K9(clusterSchedulingPolicy), 4, F_PLAIN, 0},
    [KERNEL_FIELD_LOCAL_MEMORY_TOTAL] = {K9(localMemoryTotal_v2), 8, F_PLAIN, 0},
    [KERNEL_FIELD_MAX_POTENTIAL_CLUSTER_SIZE] = {K9(maxPotentialClusterSize), 4, F_PLAIN, 0},
    [KERNEL_FIELD_MAX_ACTIVE_CLUSTERS] = {K9(maxActiveClusters), 4, F_PLAIN, 0},
    [KERNEL_FIELD_IS_DEVICE_LAUNCHED] = {(int16_t)offsetof(CUpti_ActivityKernel10,
                                                           isDeviceLaunched),
                                         1, 1, F_PLAIN, 10},
    [KERNEL_FIELD_LAUNCH_PRIORITY] = {(int16_t)offsetof(fc_ActivityKernel11, priority), 4, 4,
                                      F_PLAIN, 11},
    [KERNEL_FIELD_EXECUTION_MODEL] = {(int16_t)offsetof(fc_ActivityKernel12, executionModel), 4, 4,
                                      F_PLAIN, 12},
};

static const struct fdef memcpy_fields[] = {
    [MEMCPY_FIELD_KIND] = {MC5(kind), 4, F_PLAIN, 0},
    [MEMCPY_FIELD_COPY_KIND] = {MC5(copyKind), 1, F_PLAIN, 0},
    [MEMCPY_FIELD_SRC_KIND] = {MC5(srcKind), 1, F_PLAIN, 0},
    [MEMCPY_FIELD_DST_KIND] = {MC5(dstKind), 1, F_PLAIN, 0},
    [MEMCPY_FIELD_FLAGS] = {MC5(flags), 1, F_PLAIN, 0},
    [MEMCPY_FIELD_BYTES] = {MC5(bytes), 8, F_PLAIN, 0},
    [MEMCPY_FIELD_START] = {MC5(start), 8, F_PLAIN, 0},
    [MEMCPY_FIELD_END] = {MC5(end), 8, F_PLAIN, 0},
    [MEMCPY_FIELD_DEVICE_ID] = {MC5(deviceId), 4, F_PLAIN, 0},
    [MEMCPY_FIELD_CONTEXT_ID] = {MC5(contextId), 4, F_PLAIN, 0},
    [MEMCPY_FIELD_STREAM_ID] = {MC5(streamId), 4, F_PLAIN, 0},
    [MEMCPY_FIELD_CORRELATION_ID] = {MC5(correlationId), 8, F_PLAIN, 0},
    [MEMCPY_FIELD_GRAPH_NODE_ID] = {MC5(graphNodeId), 8, F_PLAIN, 0},
    [MEMCPY_FIELD_GRAPH_ID] = {MC5(graphId), 4, F_PLAIN, 0},
    [MEMCPY_FIELD_CHANNEL_ID] = {MC5(channelID), 4, F_PLAIN, 0},
    [MEMCPY_FIELD_CHANNEL_TYPE] = {MC5(channelType), 4, F_PLAIN, 0},
    [MEMCPY_FIELD_IS_DEVICE_LAUNCHED] = {MC6(isDeviceLaunched), 1, F_PLAIN, 0},
    [MEMCPY_FIELD_COPY_COUNT] = {MC6(copyCount), 8, F_PLAIN, 0},
};

static const struct fdef memset_fields[] = {
    [MEMSET_FIELD_KIND] = {MS4(kind), 4, F_PLAIN, 0},
    [MEMSET_FIELD_VALUE] = {MS4(value), 4, F_PLAIN, 0},
    [MEMSET_FIELD_BYTES] = {MS4(bytes), 8, F_PLAIN, 0},
    [MEMSET_FIELD_START] = {MS4(start), 8, F_PLAIN, 0},
    [MEMSET_FIELD_END] = {MS4(end), 8, F_PLAIN, 0},
    [MEMSET_FIELD_DEVICE_ID] = {MS4(deviceId), 4, F_PLAIN, 0},
    [MEMSET_FIELD_CONTEXT_ID] = {MS4(contextId), 4, F_PLAIN, 0},
    [MEMSET_FIELD_STREAM_ID] = {MS4(streamId), 4, F_PLAIN, 0},
    [MEMSET_FIELD_CORRELATION_ID] = {MS4(correlationId), 8, F_PLAIN, 0},
    [MEMSET_FIELD_FLAGS] = {MS4(flags), 2, F_PLAIN, 0},
    [MEMSET_FIELD_MEMORY_KIND] = {MS4(memoryKind), 2, F_PLAIN, 0},
    [MEMSET_FIELD_GRAPH_NODE_ID] = {MS4(graphNodeId), 8, F_PLAIN, 0},
    [MEMSET_FIELD_GRAPH_ID] = {MS4(graphId), 4, F_PLAIN, 0},
    [MEMSET_FIELD_CHANNEL_ID] = {MS4(channelID), 4, F_PLAIN, 0},
    [MEMSET_FIELD_CHANNEL_TYPE] = {MS4(channelType), 4, F_PLAIN, 0},
    [MEMSET_FIELD_IS_DEVICE_LAUNCHED] = {MS4(isDeviceLaunched), 1, F_PLAIN, 0},
};

/* "threadId and correlationId changed from 32-bit to 64-bit" in
 * user-defined API records (NVIDIA's usage guide, 2.5). */
static const struct fdef api_fields[] = {
    [API_FIELD_KIND] = {API(kind), 4, F_PLAIN, 0},
    [API_FIELD_CBID] = {API(cbid), 4, F_PLAIN, 0},
    [API_FIELD_START] = {API(start), 8, F_PLAIN, 0},
    [API_FIELD_END] = {API(end), 8, F_PLAIN, 0},
    [API_FIELD_PROCESS_ID] = {API(processId), 4, F_PLAIN, 0},
    [API_FIELD_THREAD_ID] = {API(threadId), 8, F_TID, 0},
    [API_FIELD_CORRELATION_ID] = {API(correlationId), 8, F_PLAIN, 0},
    [API_FIELD_RETURN_VALUE] = {API(returnValue), 4, F_PLAIN, 0},
};

static const struct fdef ext_fields[] = {
    [EXTERNAL_CORRELATION_FIELD_KIND] = {EXT(kind), 4, F_PLAIN, 0},
    [EXTERNAL_CORRELATION_FIELD_EXTERNAL_KIND] = {EXT(externalKind), 4, F_PLAIN, 0},
    [EXTERNAL_CORRELATION_FIELD_EXTERNAL_ID] = {EXT(externalId), 8, F_PLAIN, 0},
    [EXTERNAL_CORRELATION_FIELD_CORRELATION_ID] = {EXT(correlationId), 4, F_PLAIN, 0},
};

/* Kinds the fake GPU never writes: only their layouts are modelled. */
static const struct fdef memcpy2_fields[] = {
    [MEMCPY2_FIELD_KIND] = {NONE(4), 4, F_PLAIN, 0},
    [MEMCPY2_FIELD_COPY_KIND] = {NONE(1), 1, F_PLAIN, 0},
    [MEMCPY2_FIELD_SRC_KIND] = {NONE(1), 1, F_PLAIN, 0},
    [MEMCPY2_FIELD_DST_KIND] = {NONE(1), 1, F_PLAIN, 0},
    [MEMCPY2_FIELD_FLAGS] = {NONE(1), 1, F_PLAIN, 0},
    [MEMCPY2_FIELD_BYTES] = {NONE(8), 8, F_PLAIN, 0},
    [MEMCPY2_FIELD_START] = {NONE(8), 8, F_PLAIN, 0},
    [MEMCPY2_FIELD_END] = {NONE(8), 8, F_PLAIN, 0},
    [MEMCPY2_FIELD_DEVICE_ID] = {NONE(4), 4, F_PLAIN, 0},
    [MEMCPY2_FIELD_CONTEXT_ID] = {NONE(4), 4, F_PLAIN, 0},
    [MEMCPY2_FIELD_STREAM_ID] = {NONE(4), 4, F_PLAIN, 0},
    [MEMCPY2_FIELD_SRC_DEVICE_ID] = {NONE(4), 4, F_PLAIN, 0},
    [MEMCPY2_FIELD_SRC_CONTEXT_ID] = {NONE(4), 4, F_PLAIN, 0},
    [MEMCPY2_FIELD_DST_DEVICE_ID] = {NONE(4), 4, F_PLAIN, 0},
    [MEMCPY2_FIELD_DST_CONTEXT_ID] = {NONE(4), 4, F_PLAIN, 0},
    [MEMCPY2_FIELD_CORRELATION_ID] = {NONE(4), 8, F_PLAIN, 0},
    [MEMCPY2_FIELD_GRAPH_NODE_ID] = {NONE(8), 8, F_PLAIN, 0},
    [MEMCPY2_FIELD_GRAPH_ID] = {NONE(4), 4, F_PLAIN, 0},
    [MEMCPY2_FIELD_CHANNEL_ID] = {NONE(4), 4, F_PLAIN, 0},
    [MEMCPY2_FIELD_CHANNEL_TYPE] = {NONE(4), 4, F_PLAIN, 0},
};

static const struct fdef overhead_fields[] = {
    [OVERHEAD_FIELD_KIND] = {NONE(4), 4, F_PLAIN, 0},
    [OVERHEAD_FIELD_OVERHEAD_KIND] = {NONE(4), 4, F_PLAIN, 0},
    [OVERHEAD_FIELD_PROCESS_ID] = {NONE(4), 4, F_PLAIN, 0},
    [OVERHEAD_FIELD_THREAD_ID] = {NONE(4), 8, F_PLAIN, 0},
    [OVERHEAD_FIELD_START] = {NONE(8), 8, F_PLAIN, 0},
    [OVERHEAD_FIELD_END] = {NONE(8), 8, F_PLAIN, 0},
    [OVERHEAD_FIELD_CORRELATION_ID] = {NONE(4), 4, F_PLAIN, 0},
    [OVERHEAD_FIELD_OVERHEAD_DATA] = {NONE(8), 8, F_PLAIN, 0},
};

static const struct fdef cuda_event_fields[] = {
    [CUDA_EVENT_FIELD_KIND] = {NONE(4), 4, F_PLAIN, 0},
    [CUDA_EVENT_FIELD_CORRELATION_ID] = {NONE(4), 4, F_PLAIN, 0},
    [CUDA_EVENT_FIELD_CONTEXT_ID] = {NONE(4), 4, F_PLAIN, 0},
    [CUDA_EVENT_FIELD_STREAM_ID] = {NONE(4), 4, F_PLAIN, 0},
    [CUDA_EVENT_FIELD_EVENT_ID] = {NONE(4), 4, F_PLAIN, 0},
    [CUDA_EVENT_FIELD_DEVICE_ID] = {NONE(4), 4, F_PLAIN, 0},
    [CUDA_EVENT_FIELD_DEVICE_TIMESTAMP] = {NONE(8), 8, F_PLAIN, 0},
    [CUDA_EVENT_FIELD_CUDA_EVENT_SYNC_ID] = {NONE(8), 8, F_PLAIN, 0},
};

static const struct fdef sync_fields[] = {
    [SYNCHRONIZATION_FIELD_KIND] = {NONE(4), 4, F_PLAIN, 0},
    [SYNCHRONIZATION_FIELD_TYPE] = {NONE(4), 4, F_PLAIN, 0},
    [SYNCHRONIZATION_FIELD_START] = {NONE(8), 8, F_PLAIN, 0},
    [SYNCHRONIZATION_FIELD_END] = {NONE(8), 8, F_PLAIN, 0},
    [SYNCHRONIZATION_FIELD_CORRELATION_ID] = {NONE(4), 4, F_PLAIN, 0},
    [SYNCHRONIZATION_FIELD_CONTEXT_ID] = {NONE(4), 4, F_PLAIN, 0},
    [SYNCHRONIZATION_FIELD_STREAM_ID] = {NONE(4), 4, F_PLAIN, 0},
    [SYNCHRONIZATION_FIELD_CUDA_EVENT_ID] = {NONE(4), 4, F_PLAIN, 0},
    [SYNCHRONIZATION_FIELD_CUDA_EVENT_SYNC_ID] = {NONE(8), 8, F_PLAIN, 0},
    [SYNCHRONIZATION_FIELD_RETURN_VALUE] = {NONE(4), 4, F_PLAIN, 0},
};

static const struct fdef marker_fields[] = {
    [MARKER_FIELD_KIND] = {NONE(4), 4, F_PLAIN, 0},
    [MARKER_FIELD_FLAGS] = {NONE(4), 4, F_PLAIN, 0},
    [MARKER_FIELD_TIMESTAMP] = {NONE(8), 8, F_PLAIN, 0},
    [MARKER_FIELD_ID] = {NONE(4), 4, F_PLAIN, 0},
    [MARKER_FIELD_PROCESS_ID] = {NONE(4), 4, F_PLAIN, 0},
    [MARKER_FIELD_THREAD_ID] = {NONE(8), 8, F_PLAIN, 0},
    [MARKER_FIELD_NAME] = {NONE(8), 8, F_PLAIN, 0},
    [MARKER_FIELD_DOMAIN] = {NONE(8), 8, F_PLAIN, 0},
};

static const struct fdef marker_data_fields[] = {
    [MARKER_DATA_FIELD_KIND] = {NONE(4), 4, F_PLAIN, 0},
    [MARKER_DATA_FIELD_FLAGS] = {NONE(4), 4, F_PLAIN, 0},
    [MARKER_DATA_FIELD_ID] = {NONE(4), 4, F_PLAIN, 0},
    [MARKER_DATA_FIELD_PAYLOAD_KIND] = {NONE(4), 4, F_PLAIN, 0},
    [MARKER_DATA_FIELD_PAYLOAD] = {NONE(8), 8, F_PLAIN, 0},
    [MARKER_DATA_FIELD_COLOR] = {NONE(4), 4, F_PLAIN, 0},
    [MARKER_DATA_FIELD_CATEGORY] = {NONE(4), 4, F_PLAIN, 0},
    [MARKER_DATA_FIELD_CUPTI_DOMAIN_ID] = {NONE(4), 4, F_PLAIN, 0},
};

#define FIELDS(a)                                                                                  \
    {                                                                                              \
        a, sizeof(a) / sizeof(a[0])                                                                \
    }
struct ftab {
    const struct fdef *f;
    unsigned n;
};

static struct ftab fields_of(uint32_t kind)
{
    static const struct ftab none = {NULL, 0};
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return (struct ftab)FIELDS(kernel_fields);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return (struct ftab)FIELDS(memcpy_fields);
    case CUPTI_ACTIVITY_KIND_MEMCPY2: return (struct ftab)FIELDS(memcpy2_fields);
    case CUPTI_ACTIVITY_KIND_MEMSET: return (struct ftab)FIELDS(memset_fields);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return (struct ftab)FIELDS(api_fields);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return (struct ftab)FIELDS(ext_fields);
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return (struct ftab)FIELDS(overhead_fields);
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: return (struct ftab)FIELDS(cuda_event_fields);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return (struct ftab)FIELDS(sync_fields);
    case CUPTI_ACTIVITY_KIND_MARKER: return (struct ftab)FIELDS(marker_fields);
    case CUPTI_ACTIVITY_KIND_MARKER_DATA: return (struct ftab)FIELDS(marker_data_fields);
    default: return none;
    }
}

/* Kinds whose records cannot be user-defined (NVIDIA's usage guide 2.5). */
static int udr_unsupported(uint32_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_CDP_KERNEL:
    case CUPTI_ACTIVITY_KIND_PREEMPTION:
    case CUPTI_ACTIVITY_KIND_MODULE:
    case CUPTI_ACTIVITY_KIND_DEVICE_ATTRIBUTE:
    case CUPTI_ACTIVITY_KIND_FUNCTION:
    case CUPTI_ACTIVITY_KIND_MEMORY: return 1;
    default: return 0;
    }
}

/* ---------------------------------------------------------------- state */

struct lfield {
    uint16_t id, off, w;
};

struct layout { /* one kind's user-defined record, as a subscriber selected it */
    uint16_t n, size;
    struct lfield f[V2_MAX_FIELDS];
};

struct v2buf { /* a subscriber's current buffer of one launching thread */
    uint8_t *base;
    size_t size, valid, nrec, maxrec;
    uint64_t max_end; /* the latest end time of the GPU records in it */
    uint32_t tid;
};

struct sub {
    int live;
    char name[CUPTI_SUBSCRIBER_NAME_MAX_LEN + 1];
    CUpti_BuffersCallbackRequestFunc_v2 req;
    CUpti_BuffersCallbackCompleteFunc_v2 done;
    uint8_t enabled[V2_KINDS];
    uint8_t udr, latency, zeroed, tid_system;
    struct layout lay[V2_KINDS];                   /* user-defined layout per enabled kind */
    uint8_t rt_ovr[CUPTI_RUNTIME_TRACE_CBID_SIZE]; /* 0 follow the kind, 1 on, 2 off */
    uint8_t drv_ovr[CUPTI_DRIVER_TRACE_CBID_SIZE];
    size_t dropped;
    struct v2buf *bufs; /* indexed by the launching thread's number */
    size_t nbufs;
    struct fakecupti_stats st;
};

static struct {
    int mode;            /* fc_api_mode */
    uint8_t state;       /* MULTIPLE_SUBSCRIBER_STATE: 2 unset, 0 one only, 1 several */
    uint8_t hes;         /* ENABLE_HES */
    uint8_t graph_level; /* ENABLE_MULTI_SUBSCRIBER_GRAPH_TRACE */
    int any_enabled;     /* a subscriber enabled a kind (HES and graph level are fixed then) */
    int first;           /* index of the subscriber that decided the state */
    char first_name[CUPTI_SUBSCRIBER_NAME_MAX_LEN + 1];
    struct sub subs[V2_MAX_SUBS];
    /* Kernel names as CUPTI owns them: one copy per distinct name, written
     * through a private mapping and handed out at addresses of a second
     * mapping of the same memory, readable only while a completion
     * callback runs. */
    uint8_t *names_rw, *names_ro;
    size_t names_used;
    struct {
        const char *app;
        uint32_t off;
    } names_tab[V2_NAMES_TAB];
    int names_readers;
    void *arenas[V2_ARENAS]; /* layouts of past completions, PROT_NONE */
    unsigned arena_next;
    uint32_t next_tix;
} v = {.state = 2};

static pthread_mutex_t readers_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t tix_key;
static pthread_once_t tix_once = PTHREAD_ONCE_INIT;
static __thread uint32_t t_tix; /* this thread's number + 1 */
static __thread struct {
    uint64_t ids[V2_EXT_DEPTH];
    unsigned n;
} t_ext[V2_MAX_SUBS][V2_EXT_KINDS];

static int env_is(const char *name, const char *value)
{
    const char *s = getenv(name);
    return s && strcmp(s, value) == 0;
}

static int fail_injected(const char *what)
{
    return env_is("FAKECUPTI_V2_FAIL", what);
}

static uint32_t gettid_u32(void)
{
    return (uint32_t)syscall(SYS_gettid);
}

static struct sub *sub_of(CUpti_SubscriberHandle h)
{
    uintptr_t p = (uintptr_t)h, b = (uintptr_t)&v.subs[0];
    if (p < b || p >= b + sizeof v.subs || (p - b) % sizeof v.subs[0])
        return NULL;
    struct sub *s = (struct sub *)(void *)h;
    return s->live ? s : NULL;
}

static int sub_index(const struct sub *s)
{
    return (int)(s - v.subs);
}

/* The first live subscriber: the one fakecupti_get_stats describes. */
static struct sub *primary(void)
{
    for (int i = 0; i < V2_MAX_SUBS; i++)
        if (v.subs[i].live)
            return &v.subs[i];
    return NULL;
}

int fc_v2_callbacks_registered(void)
{
    const struct sub *p = primary();
    return p && p->req && p->done;
}

int fc_api_mode(void)
{
    return v.mode;
}

CUptiResult fc_v1_gate(int uses_activity)
{
    CUptiResult rc = CUPTI_SUCCESS;
    fc_lock();
    if (v.mode == 2)
        rc = uses_activity ? CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                           : CUPTI_ERROR_NOT_COMPATIBLE;
    else if (uses_activity)
        v.mode = 1;
    fc_unlock();
    return rc;
}

static uint32_t version(void)
{
    return fc_api_version();
}

/* ---------------------------------------------------------------- layouts */

static int udr_widths_struct(void)
{
    return env_is("FAKECUPTI_UDR_WIDTHS", "struct");
}

static int cmp_id(const void *a, const void *b)
{
    const struct lfield *x = a, *y = b;
    return (int)x->id - (int)y->id;
}

/* Lays out a selection: KIND first at 0, then each field at its natural
 * alignment, in selection order (or id order), the record rounded up to
 * 8.  Returns 0 or a CUPTI error for a bad selection. */
static CUptiResult make_layout(uint32_t kind, const int *ids, size_t n, struct layout *out)
{
    struct ftab t = fields_of(kind);
    uint8_t seen[V2_MAX_FIELDS] = {0};
    size_t off = 0;

    if (t.f == NULL)
        return CUPTI_ERROR_NOT_SUPPORTED;
    memset(out, 0, sizeof *out);
    if (ids == NULL) { /* every field */
        for (unsigned i = 0; i < t.n; i++)
            out->f[out->n++].id = (uint16_t)i;
    } else {
        if (n == 0 || n > t.n || ids[0] != 0)
            return CUPTI_ERROR_INVALID_PARAMETER; /* KIND must come first */
        for (size_t i = 0; i < n; i++) {
            if (ids[i] < 0 || (unsigned)ids[i] >= t.n || seen[ids[i]])
                return CUPTI_ERROR_INVALID_PARAMETER;
            seen[ids[i]] = 1;
            out->f[out->n++].id = (uint16_t)ids[i];
        }
    }
    if (env_is("FAKECUPTI_UDR_ORDER", "id"))
        qsort(out->f + 1, out->n - 1, sizeof out->f[0], cmp_id);
    for (unsigned i = 0; i < out->n; i++) {
        const struct fdef *d = &t.f[out->f[i].id];
        unsigned w = udr_widths_struct() ? d->src_w : d->udr_w;
        off = (off + w - 1) / w * w;
        out->f[i].off = (uint16_t)off;
        out->f[i].w = (uint16_t)w;
        off += w;
    }
    out->size = (uint16_t)((off + 7) / 8 * 8);
    return CUPTI_SUCCESS;
}

/* ---------------------------------------------------------------- names */

static int names_init_locked(void)
{
    if (v.names_rw)
        return 0;
    int fd = (int)syscall(SYS_memfd_create, "fakecupti-names", 0);
    if (fd < 0 || ftruncate(fd, V2_NAMES_SIZE) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    void *rw = mmap(NULL, V2_NAMES_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    void *ro = mmap(NULL, V2_NAMES_SIZE, PROT_NONE, MAP_SHARED, fd, 0);
    close(fd);
    if (rw == MAP_FAILED || ro == MAP_FAILED)
        return -1;
    v.names_rw = rw;
    v.names_ro = ro;
    v.names_used = 8; /* offset 0 means "none" */
    return 0;
}

/* The CUPTI-owned copy of an application's kernel name. */
static uint64_t cupti_name_locked(const char *app)
{
    uint32_t h = (uint32_t)(((uintptr_t)app >> 4) * 2654435761u) % V2_NAMES_TAB;
    if (app == NULL || names_init_locked() != 0)
        return 0;
    for (uint32_t i = 0; i < V2_NAMES_TAB; i++, h = (h + 1) % V2_NAMES_TAB) {
        if (v.names_tab[h].app == app)
            return (uint64_t)(uintptr_t)(v.names_ro + v.names_tab[h].off);
        if (v.names_tab[h].app == NULL) {
            size_t len = strlen(app) + 1;
            if (v.names_used + len > V2_NAMES_SIZE)
                return 0;
            memcpy(v.names_rw + v.names_used, app, len);
            v.names_tab[h].app = app;
            v.names_tab[h].off = (uint32_t)v.names_used;
            v.names_used += (len + 7) & ~(size_t)7;
            return (uint64_t)(uintptr_t)(v.names_ro + v.names_tab[h].off);
        }
    }
    return 0;
}

static void names_readable(int on)
{
    pthread_mutex_lock(&readers_mu);
    v.names_readers += on ? 1 : -1;
    if (v.names_ro && ((on && v.names_readers == 1) || (!on && v.names_readers == 0)))
        mprotect(v.names_ro, V2_NAMES_SIZE, on ? PROT_READ : PROT_NONE);
    pthread_mutex_unlock(&readers_mu);
}

/* ---------------------------------------------------------------- writing records */

static uint64_t rd(const uint8_t *p, unsigned w)
{
    uint64_t x = 0;
    memcpy(&x, p, w); /* little-endian */
    return x;
}

static void wr(uint8_t *p, unsigned w, uint64_t x)
{
    memcpy(p, &x, w);
}

static int kernel_gen(size_t sz)
{
    /* Which kernel struct the fake GPU wrote, by its size and version. */
    if (sz < sizeof(CUpti_ActivityKernel10))
        return 9;
    if (sz < sizeof(fc_ActivityKernel12))
        return version() >= 130100 ? 11 : 10;
    return 12;
}

/* One field's value from a predefined record (0 where it has none). */
static uint64_t field_value(const struct sub *s, uint32_t kind, const uint8_t *rec, size_t sz,
                            unsigned id)
{
    struct ftab t = fields_of(kind);
    const struct fdef *d = &t.f[id];
    if (d->src_off < 0 || (size_t)d->src_off + d->src_w > sz)
        return 0;
    if (t.f == kernel_fields && d->min_gen && kernel_gen(sz) < d->min_gen)
        return 0;
    uint64_t x = rd(rec + d->src_off, d->src_w);
    switch (d->how) {
    case F_CACHE_REQ: return x & 0xf;
    case F_CACHE_EXE: return (x >> 4) & 0xf;
    case F_NAME: return s->udr ? cupti_name_locked((const char *)(uintptr_t)x) : x;
    case F_QUEUED:
    case F_SUBMITTED: {
        /* Latency timestamps (attribute 15): queued and submitted before
         * the kernel started; CUPTI_TIMESTAMP_UNKNOWN (0) without it. */
        uint64_t start = rd(rec + offsetof(CUpti_ActivityKernel9, start), 8);
        if (!s->latency || start < 1000)
            return 0;
        return start - (d->how == F_QUEUED ? 700 : 300);
    }
    case F_TID: return s->tid_system ? gettid_u32() : (uint64_t)(uintptr_t)pthread_self();
    default: return x; /* the widened fields are unsigned ids: zero-extended */
    }
}

static uint32_t tix(void)
{
    if (t_tix == 0) {
        t_tix = ++v.next_tix;
        pthread_setspecific(tix_key, (void *)(uintptr_t)t_tix);
    }
    return t_tix;
}

static void enqueue_buf_locked(struct sub *s, struct v2buf *b)
{
    fc_v2_enqueue_locked(b->base, b->size, b->valid, b->nrec, sub_index(s) + 1, b->tid);
    memset(b, 0, sizeof *b);
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* A buffer for the calling thread from the subscriber's request callback. */
static struct v2buf *buf_locked(struct sub *s, size_t need)
{
    uint32_t i = tix();
    if (i >= s->nbufs) {
        struct v2buf *p = realloc(s->bufs, (i + 8) * sizeof *p);
        if (!p)
            return NULL;
        memset(p + s->nbufs, 0, (i + 8 - s->nbufs) * sizeof *p);
        s->bufs = p;
        s->nbufs = i + 8;
    }
    struct v2buf *b = &s->bufs[i];
    if (b->base && (b->size - b->valid < need || (b->maxrec && b->nrec >= b->maxrec)))
        enqueue_buf_locked(s, b);
    if (b->base)
        return b;
    if (!s->req)
        return NULL;
    uint8_t *buf = NULL;
    size_t size = 0, maxrec = 0;
    CUpti_BufferCallbackRequestInfo info = {.structSize = sizeof info};
    s->st.buffers_requested++;
    fc_in_callback(1);
    s->req(&buf, &size, &maxrec, &info);
    fc_in_callback(-1);
    if (!buf || size == 0) {
        s->st.requests_declined++;
        return NULL;
    }
    if ((uintptr_t)buf % 8 || size < need) {
        s->st.buffers_rejected++;
        fc_v2_enqueue_locked(buf, size, 0, 0, sub_index(s) + 1, gettid_u32());
        return NULL;
    }
    if (s->zeroed) {
        if (!all_zero(buf, size))
            s->st.dirty_buffers++;
    } else {
        memset(buf, 0, size);
    }
    *b = (struct v2buf){.base = buf, .size = size, .maxrec = maxrec, .tid = gettid_u32()};
    return b;
}

static void count_locked(struct sub *s, uint32_t kind, int written)
{
    struct fakecupti_stats *st[2] = {&s->st, s == primary() ? fc_stats_locked() : NULL};
    for (int i = 0; i < 2; i++) {
        if (!st[i])
            continue;
        if (!written) {
            st[i]->records_dropped++;
            continue;
        }
        switch (kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: st[i]->kernels++; break;
        case CUPTI_ACTIVITY_KIND_MEMCPY: st[i]->memcpys++; break;
        case CUPTI_ACTIVITY_KIND_MEMSET: st[i]->memsets++; break;
        case CUPTI_ACTIVITY_KIND_RUNTIME: st[i]->runtime_api++; break;
        case CUPTI_ACTIVITY_KIND_DRIVER: st[i]->driver_api++; break;
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: st[i]->external_correlation++; break;
        default: break;
        }
    }
}

/* The field id of a GPU record's end (end 1) or start (end 0): kernels,
 * copies and memsets; -1 for any other kind. */
static int gpu_time_field(uint32_t kind, int end)
{
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_MEMCPY: return end ? MEMCPY_FIELD_END : MEMCPY_FIELD_START;
    case CUPTI_ACTIVITY_KIND_MEMSET: return end ? MEMSET_FIELD_END : MEMSET_FIELD_START;
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return end ? KERNEL_FIELD_END : KERNEL_FIELD_START;
    default: return -1;
    }
}

/* The end time of a predefined GPU record (0: not a GPU record). */
static uint64_t end_of(uint32_t kind, const uint8_t *rec, size_t sz)
{
    struct ftab t = fields_of(kind);
    int id = gpu_time_field(kind, 1);
    if (id < 0 || t.f[id].src_off + 8 > (int)sz)
        return 0;
    return rd(rec + t.f[id].src_off, 8);
}

/* Writes the record for one subscriber; 1 written, 0 dropped. */
static int put_one_locked(struct sub *s, uint32_t kind, const uint8_t *rec, size_t sz)
{
    uint8_t out[512];
    size_t n = sz;
    const uint8_t *src = rec;
    if (s->udr) {
        const struct layout *l = &s->lay[kind];
        memset(out, 0, l->size);
        for (unsigned i = 0; i < l->n; i++)
            wr(out + l->f[i].off, l->f[i].w, field_value(s, kind, rec, sz, l->f[i].id));
        wr(out, 4, kind);
        n = l->size;
        src = out;
    } else if (kind != rd(rec, 4)) {
        memcpy(out, rec, sz < sizeof out ? sz : sizeof out);
        wr(out, 4, kind);
        src = out;
    }
    struct v2buf *b = buf_locked(s, n);
    if (!b) {
        s->dropped++;
        count_locked(s, kind, 0);
        return 0;
    }
    memcpy(b->base + b->valid, src, n);
    b->valid += n;
    b->nrec++;
    uint64_t end = end_of(kind, rec, sz);
    if (end > b->max_end)
        b->max_end = end;
    count_locked(s, kind, 1);
    if ((b->maxrec && b->nrec >= b->maxrec) || b->size - b->valid < 8)
        enqueue_buf_locked(s, b);
    return 1;
}

static int sub_api_on(const struct sub *s, CUpti_ActivityKind kind, CUpti_CallbackId cbid)
{
    const uint8_t *ovr = kind == CUPTI_ACTIVITY_KIND_RUNTIME ? s->rt_ovr : s->drv_ovr;
    size_t n = kind == CUPTI_ACTIVITY_KIND_RUNTIME ? sizeof s->rt_ovr : sizeof s->drv_ovr;
    uint8_t o = cbid < n ? ovr[cbid] : 0;
    return o == 1 || (o == 0 && s->enabled[kind]);
}

int fc_v2_api_on_locked(CUpti_ActivityKind kind, CUpti_CallbackId cbid)
{
    for (int i = 0; i < V2_MAX_SUBS; i++)
        if (v.subs[i].live && sub_api_on(&v.subs[i], kind, cbid))
            return 1;
    return 0;
}

/* Which subscribers get a record of this kind, and as which kind (a kernel
 * record goes to subscribers of KERNEL and of CONCURRENT_KERNEL alike). */
static uint32_t kind_for(const struct sub *s, uint32_t kind, const uint8_t *rec, size_t sz)
{
    if (kind == CUPTI_ACTIVITY_KIND_KERNEL || kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
        if (s->enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL])
            return CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        return s->enabled[CUPTI_ACTIVITY_KIND_KERNEL] ? CUPTI_ACTIVITY_KIND_KERNEL : 0;
    }
    if (kind == CUPTI_ACTIVITY_KIND_RUNTIME || kind == CUPTI_ACTIVITY_KIND_DRIVER) {
        uint32_t cbid = (uint32_t)rd(rec + offsetof(CUpti_ActivityAPI, cbid), 4);
        (void)sz;
        return sub_api_on(s, (CUpti_ActivityKind)kind, cbid) ? kind : 0;
    }
    return kind < V2_KINDS && s->enabled[kind] ? kind : 0;
}

int fc_v2_put_locked(const void *rec, size_t sz)
{
    uint32_t kind = (uint32_t)rd(rec, 4);
    struct sub *p = primary();
    int first = 0;
    for (int i = 0; i < V2_MAX_SUBS; i++) {
        struct sub *s = &v.subs[i];
        uint32_t k = s->live ? kind_for(s, kind, rec, sz) : 0;
        if (!k)
            continue;
        int w = put_one_locked(s, k, rec, sz);
        if (s == p)
            first = w;
    }
    return first;
}

uint32_t fc_v2_ext_locked(uint32_t corr, CUpti_CallbackId rt_cbid, CUpti_CallbackId drv_cbid)
{
    uint32_t res = 0;
    struct sub *p = primary();
    for (int i = 0; i < V2_MAX_SUBS; i++) {
        struct sub *s = &v.subs[i];
        if (!s->live || !s->enabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION] ||
            !(sub_api_on(s, CUPTI_ACTIVITY_KIND_RUNTIME, rt_cbid) ||
              sub_api_on(s, CUPTI_ACTIVITY_KIND_DRIVER, drv_cbid)))
            continue;
        for (uint32_t k = 1; k < V2_EXT_KINDS; k++) {
            CUpti_ActivityExternalCorrelation r;
            if (!t_ext[i][k].n)
                continue;
            memset(&r, 0, sizeof r);
            r.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
            r.externalKind = (CUpti_ExternalCorrelationKind)k;
            r.externalId = t_ext[i][k].ids[t_ext[i][k].n - 1];
            r.correlationId = corr;
            int w = put_one_locked(s, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, (const uint8_t *)&r,
                                   sizeof r);
            if (s == p)
                res |= w ? FAKECUDA_REC_EXTCORR : FAKECUDA_REC_EXTCORR << FAKECUDA_DROPPED_SHIFT;
        }
    }
    return res;
}

/* ---------------------------------------------------------------- flush and completion */

/* The size of a record of the subscriber's kind in its buffers. */
static size_t rec_size(const struct sub *s, uint32_t kind)
{
    if (kind >= V2_KINDS)
        return 0;
    if (s->udr)
        return s->enabled[kind] ? s->lay[kind].size : 0;
    return fc_record_size(kind);
}

/* A forced flush hands over records still running with end (and a start
 * still to come) 0, as CUPTI does: it never delivers them again. */
static void zero_unfinished(const struct sub *s, struct v2buf *b, uint64_t now)
{
    for (size_t off = 0; off + 4 <= b->valid;) {
        uint32_t kind = (uint32_t)rd(b->base + off, 4);
        size_t n = rec_size(s, kind);
        if (n == 0 || off + n > b->valid)
            break;
        /* The end, then the start, of GPU records only. */
        for (int pass = 0; pass < 2; pass++) {
            int id = gpu_time_field(kind, pass == 0);
            int off_f = -1;
            if (id < 0)
                break;
            unsigned w = 8;
            if (s->udr) {
                for (unsigned i = 0; i < s->lay[kind].n; i++)
                    if (s->lay[kind].f[i].id == id) {
                        off_f = s->lay[kind].f[i].off;
                        w = s->lay[kind].f[i].w;
                    }
            } else {
                off_f = fields_of(kind).f[id].src_off;
            }
            if (off_f >= 0 && rd(b->base + off + (size_t)off_f, w) > now)
                wr(b->base + off + (size_t)off_f, w, 0);
        }
        off += n;
    }
}

void fc_v2_flush_locked(uint32_t flag)
{
    uint64_t now = fc_now();
    int forced = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0;
    for (int i = 0; i < V2_MAX_SUBS; i++) {
        struct sub *s = &v.subs[i];
        for (size_t j = 0; s->live && j < s->nbufs; j++) {
            struct v2buf *b = &s->bufs[j];
            if (!b->base || b->valid == 0)
                continue;
            /* A plain flush returns only buffers whose records have all
             * completed (shared/reference/cupti-flush.md). */
            if (!forced && b->max_end > now)
                continue;
            if (forced && b->max_end > now)
                zero_unfinished(s, b, now);
            enqueue_buf_locked(s, b);
        }
    }
}

/* Layouts for one completion, in memory that becomes inaccessible once the
 * callback returns. */
static void *arena_new(void)
{
    void *p = mmap(NULL, V2_ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void arena_retire(void *p)
{
    if (!p)
        return;
    mprotect(p, V2_ARENA, PROT_NONE);
    fc_lock();
    unsigned i = v.arena_next++ % V2_ARENAS;
    void *old = v.arenas[i];
    v.arenas[i] = p;
    fc_unlock();
    if (old)
        munmap(old, V2_ARENA);
}

static void fill_layouts_locked(const struct sub *s, void *arena,
                                CUpti_BufferCallbackCompleteInfo *info)
{
    CUpti_ActivityRecordLayout **pp = arena;
    uint8_t *next = (uint8_t *)arena + V2_LAYOUTS_N * sizeof *pp;
    memset(pp, 0, V2_LAYOUTS_N * sizeof *pp);
    for (uint32_t k = 1; k < V2_LAYOUTS_N && k < V2_KINDS; k++) {
        const struct layout *l = &s->lay[k];
        if (!s->enabled[k] || l->n == 0)
            continue;
        CUpti_ActivityRecordLayout *rl = (void *)next;
        CUpti_ActivityFieldLayoutEntry *e = (void *)(rl + 1);
        if (next + sizeof *rl + l->n * sizeof *e > (uint8_t *)arena + V2_ARENA)
            break;
        rl->structSize = sizeof *rl;
        rl->pEntries = e;
        rl->numFields = l->n;
        rl->recordSize = l->size;
        for (unsigned i = 0; i < l->n; i++)
            e[i] = (CUpti_ActivityFieldLayoutEntry){.structSize = sizeof e[i],
                                                    .fieldId = l->f[i].id,
                                                    .offset = l->f[i].off,
                                                    .size = l->f[i].w,
                                                    .alignment = l->f[i].w};
        pp[k] = rl;
        next = (uint8_t *)(e + l->n);
    }
    info->ppRecordLayouts = pp;
    info->numRecordLayouts = V2_LAYOUTS_N;
}

void fc_v2_deliver(int subi, uint8_t *base, size_t size, size_t valid, size_t nrec, uint32_t tid)
{
    CUpti_BufferCallbackCompleteInfo info = {.structSize = sizeof info, .threadId = tid};
    void *arena = NULL;
    (void)nrec;
    fc_lock();
    struct sub *s = subi >= 1 && subi <= V2_MAX_SUBS ? &v.subs[subi - 1] : NULL;
    CUpti_BuffersCallbackCompleteFunc_v2 done = s && s->live ? s->done : NULL;
    if (done && s->udr && version() >= 130300 && (arena = arena_new()) != NULL)
        fill_layouts_locked(s, arena, &info);
    if (s && !done)
        s->st.buffers_lost++;
    fc_unlock();
    if (!done)
        return;
    names_readable(1);
    done(base, size, valid, &info);
    names_readable(0);
    arena_retire(arena);
    fc_lock();
    s->st.buffers_completed++;
    if (s == primary())
        fc_stats_locked()->buffers_completed++;
    fc_unlock();
}

static void thread_gone(void *p)
{
    uint32_t i = (uint32_t)(uintptr_t)p;
    fc_lock();
    for (int k = 0; k < V2_MAX_SUBS; k++) {
        struct sub *s = &v.subs[k];
        if (s->live && i < s->nbufs && s->bufs[i].base && s->bufs[i].valid)
            enqueue_buf_locked(s, &s->bufs[i]);
    }
    fc_unlock();
}

static void tix_key_make(void)
{
    pthread_key_create(&tix_key, thread_gone);
}

void fc_v2_reset(void)
{
    fc_lock();
    fc_v2_flush_locked(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    fc_wait_all_locked();
    for (int i = 0; i < V2_MAX_SUBS; i++) {
        free(v.subs[i].bufs);
        memset(&v.subs[i], 0, sizeof v.subs[i]);
    }
    for (uint32_t k = 0; k < V2_KINDS; k++)
        fc_enabled_set_locked(k, 0);
    v.mode = 0;
    v.state = 2;
    v.hes = v.graph_level = 0;
    v.any_enabled = 0;
    v.first_name[0] = '\0';
    fc_unlock();
    memset(t_ext, 0, sizeof t_ext);
}

/* ---------------------------------------------------------------- the API */

#define API_EXPORT __attribute__((visibility("default")))

/* 13.2 has subscribers, attributes, callbacks and enable; 13.3 the rest. */
static CUptiResult need(uint32_t since)
{
    return version() >= since ? CUPTI_SUCCESS : CUPTI_ERROR_NOT_SUPPORTED;
}

static void union_enabled_locked(void)
{
    for (uint32_t k = 1; k < V2_KINDS; k++) {
        int on = 0;
        for (int i = 0; i < V2_MAX_SUBS; i++)
            on |= v.subs[i].live && v.subs[i].enabled[k];
        fc_enabled_set_locked(k, on);
    }
}

API_EXPORT CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber,
                                                  CUpti_CallbackFunc callback, void *userdata,
                                                  CUpti_SubscriberParams *pParams);
CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber,
                                       CUpti_CallbackFunc callback, void *userdata,
                                       CUpti_SubscriberParams *pParams)
{
    const CUpti_SubscriberParams_13_2 *p = (const void *)pParams;
    uint8_t allow =
        p && p->structSize >= sizeof(CUpti_SubscriberParams_13_2) ? p->allowMultipleSubscribers : 0;
    const char *name = p && p->subscriberName ? p->subscriberName : "";
    CUptiResult rc = CUPTI_SUCCESS;
    (void)callback;
    (void)userdata;
    if (!subscriber)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (fail_injected("subscribe"))
        return CUPTI_ERROR_UNKNOWN;
    fc_lock();
    /* Before 13.2 there is one subscriber, whatever it asks. */
    if (version() < 130200)
        allow = 0;
    if (v.mode == 1) {
        rc = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; /* the global API is in use */
        name = "(a client of the global activity API)";
        goto out_name;
    }
    if (v.state == 0 || (v.state == 1 && !allow)) {
        rc = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
        name = v.first_name;
        goto out_name;
    }
    int i;
    for (i = 0; i < V2_MAX_SUBS && v.subs[i].live; i++)
        ;
    if (i == V2_MAX_SUBS) {
        rc = CUPTI_ERROR_MAX_LIMIT_REACHED;
        goto out;
    }
    struct sub *s = &v.subs[i];
    free(s->bufs);
    memset(s, 0, sizeof *s);
    s->live = 1;
    snprintf(s->name, sizeof s->name, "%s", name);
    if (v.state == 2) {
        v.state = allow;
        v.first = i;
        snprintf(v.first_name, sizeof v.first_name, "CUPTI for %s", name);
    }
    v.mode = 2;
    *subscriber = (CUpti_SubscriberHandle)s;
    pthread_once(&tix_once, tix_key_make);
    goto out;
out_name:
    if (p && p->oldSubscriberName && p->oldSubscriberSize > 0)
        snprintf(p->oldSubscriberName, p->oldSubscriberSize, "%s", name);
out:
    fc_unlock();
    return rc;
}

API_EXPORT CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber);
CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
    fc_lock();
    struct sub *s = sub_of(subscriber);
    if (!s) {
        fc_unlock();
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    /* Its buffers go back to it first; then it is gone (the process stays
     * in multi-subscriber mode). */
    for (size_t j = 0; j < s->nbufs; j++)
        if (s->bufs[j].base)
            enqueue_buf_locked(s, &s->bufs[j]);
    fc_wait_all_locked();
    memset(s->enabled, 0, sizeof s->enabled);
    s->live = 0;
    union_enabled_locked();
    fc_unlock();
    return CUPTI_SUCCESS;
}

static size_t attr_width(CUpti_ActivityAttribute a)
{
    switch ((int)a) {
    case CUPTI_ACTIVITY_ATTR_THREAD_ID_TYPE: return sizeof(CUpti_ActivityThreadIdType);
    case CUPTI_ACTIVITY_ATTR_TIMESTAMP_CALLBACK: return sizeof(void *);
    case CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER:
    case CUPTI_ACTIVITY_ATTR_USER_DEFINED_RECORDS:
    case CUPTI_ACTIVITY_ATTR_MULTIPLE_SUBSCRIBER_STATE:
    case CUPTI_ACTIVITY_ATTR_ENABLE_HES:
    case CUPTI_ACTIVITY_ATTR_ENABLE_KERNEL_LATENCY_TIMESTAMPS:
    case CUPTI_ACTIVITY_ATTR_ENABLE_MULTI_SUBSCRIBER_GRAPH_TRACE: return 1;
    default: return 0;
    }
}

/* The argument checks cuptiActivitySetAttribute_v2 and GetAttribute_v2
 * share, in one order for both: the version, a known attribute and both
 * pointers, a value size that holds it (*w: the attribute's width). */
static CUptiResult attr_args(CUpti_ActivityAttribute attr, const size_t *valueSize,
                             const void *value, size_t *w)
{
    CUptiResult rc = need(130200);
    *w = attr_width(attr);
    if (rc != CUPTI_SUCCESS)
        return rc;
    if (!valueSize || !value || *w == 0)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (*valueSize < *w)
        return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
    return CUPTI_SUCCESS;
}

API_EXPORT CUptiResult CUPTIAPI cuptiActivitySetAttribute_v2(CUpti_SubscriberHandle subscriber,
                                                             CUpti_ActivityAttribute attr,
                                                             size_t *valueSize, void *value);
CUptiResult CUPTIAPI cuptiActivitySetAttribute_v2(CUpti_SubscriberHandle subscriber,
                                                  CUpti_ActivityAttribute attr, size_t *valueSize,
                                                  void *value)
{
    size_t w;
    uint64_t x = 0;
    CUptiResult rc = attr_args(attr, valueSize, value, &w);
    if (rc != CUPTI_SUCCESS)
        return rc;
    memcpy(&x, value, w);
    fc_lock();
    struct sub *s = sub_of(subscriber);
    switch ((int)attr) {
    case CUPTI_ACTIVITY_ATTR_MULTIPLE_SUBSCRIBER_STATE:
        rc = CUPTI_ERROR_INVALID_PARAMETER; /* chosen at cuptiSubscribe_v2 only */
        break;
    case CUPTI_ACTIVITY_ATTR_ENABLE_HES: {
        /* Global; before any subscriber enables any kind; Blackwell only
         * (FAKECUPTI_HW_TRACE=1), never on MIG (=mig). */
        const char *hw = getenv("FAKECUPTI_HW_TRACE");
        if (v.any_enabled)
            rc = CUPTI_ERROR_INVALID_OPERATION;
        else if (x && hw && strcmp(hw, "mig") == 0)
            rc = CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED;
        else if (x && !(hw && strcmp(hw, "1") == 0))
            rc = CUPTI_ERROR_NOT_SUPPORTED;
        else
            v.hes = (uint8_t)(x != 0);
        break;
    }
    case CUPTI_ACTIVITY_ATTR_ENABLE_MULTI_SUBSCRIBER_GRAPH_TRACE:
        if (v.any_enabled)
            rc = CUPTI_ERROR_INVALID_OPERATION;
        else
            v.graph_level = (uint8_t)(x != 0);
        break;
    case CUPTI_ACTIVITY_ATTR_TIMESTAMP_CALLBACK:
        rc = CUPTI_ERROR_NOT_SUPPORTED; /* not modelled by the double */
        break;
    default:
        if (!s) {
            rc = CUPTI_ERROR_INVALID_PARAMETER;
            break;
        }
        switch ((int)attr) {
        case CUPTI_ACTIVITY_ATTR_USER_DEFINED_RECORDS: {
            int any = 0;
            for (uint32_t k = 0; k < V2_KINDS; k++)
                any |= s->enabled[k];
            if (fail_injected("udr"))
                rc = CUPTI_ERROR_UNKNOWN;
            else if (any)
                rc = CUPTI_ERROR_INVALID_OPERATION; /* before any kind is enabled */
            else
                s->udr = (uint8_t)(x != 0);
            break;
        }
        case CUPTI_ACTIVITY_ATTR_ENABLE_KERNEL_LATENCY_TIMESTAMPS:
            s->latency = (uint8_t)(x != 0);
            break;
        case CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER: s->zeroed = (uint8_t)(x != 0); break;
        case CUPTI_ACTIVITY_ATTR_THREAD_ID_TYPE:
            s->tid_system = x == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM;
            break;
        default: rc = CUPTI_ERROR_INVALID_PARAMETER; break;
        }
    }
    fc_unlock();
    return rc;
}

API_EXPORT CUptiResult CUPTIAPI cuptiActivityGetAttribute_v2(CUpti_SubscriberHandle subscriber,
                                                             CUpti_ActivityAttribute attr,
                                                             size_t *valueSize, void *value);
CUptiResult CUPTIAPI cuptiActivityGetAttribute_v2(CUpti_SubscriberHandle subscriber,
                                                  CUpti_ActivityAttribute attr, size_t *valueSize,
                                                  void *value)
{
    size_t w;
    uint64_t x = 0;
    CUptiResult rc = attr_args(attr, valueSize, value, &w);
    if (rc != CUPTI_SUCCESS)
        return rc;
    fc_lock();
    struct sub *s = sub_of(subscriber);
    switch ((int)attr) {
    case CUPTI_ACTIVITY_ATTR_MULTIPLE_SUBSCRIBER_STATE: x = v.state; break;
    case CUPTI_ACTIVITY_ATTR_ENABLE_HES: x = v.hes; break;
    case CUPTI_ACTIVITY_ATTR_ENABLE_MULTI_SUBSCRIBER_GRAPH_TRACE: x = v.graph_level; break;
    case CUPTI_ACTIVITY_ATTR_USER_DEFINED_RECORDS: x = s ? s->udr : 0; break;
    case CUPTI_ACTIVITY_ATTR_ENABLE_KERNEL_LATENCY_TIMESTAMPS: x = s ? s->latency : 0; break;
    case CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER: x = s ? s->zeroed : 0; break;
    case CUPTI_ACTIVITY_ATTR_THREAD_ID_TYPE: x = s ? s->tid_system : 0; break;
    default: rc = CUPTI_ERROR_INVALID_PARAMETER; break;
    }
    if (rc == CUPTI_SUCCESS && !s && (int)attr != CUPTI_ACTIVITY_ATTR_MULTIPLE_SUBSCRIBER_STATE &&
        (int)attr != CUPTI_ACTIVITY_ATTR_ENABLE_HES &&
        (int)attr != CUPTI_ACTIVITY_ATTR_ENABLE_MULTI_SUBSCRIBER_GRAPH_TRACE)
        rc = CUPTI_ERROR_INVALID_PARAMETER;
    fc_unlock();
    if (rc == CUPTI_SUCCESS) {
        memcpy(value, &x, w);
        *valueSize = w;
    }
    return rc;
}

API_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks_v2(
    CUpti_SubscriberHandle subscriber, CUpti_BuffersCallbackRequestFunc_v2 funcBufferRequested,
    CUpti_BuffersCallbackCompleteFunc_v2 funcBufferCompleted);
CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks_v2(
    CUpti_SubscriberHandle subscriber, CUpti_BuffersCallbackRequestFunc_v2 funcBufferRequested,
    CUpti_BuffersCallbackCompleteFunc_v2 funcBufferCompleted)
{
    CUptiResult rc = need(130200);
    if (rc != CUPTI_SUCCESS)
        return rc;
    if (!funcBufferRequested || !funcBufferCompleted)
        return CUPTI_ERROR_INVALID_PARAMETER;
    fc_lock();
    struct sub *s = sub_of(subscriber);
    if (s) {
        s->req = funcBufferRequested;
        s->done = funcBufferCompleted;
        s->st.callback_registrations++;
    }
    fc_unlock();
    return s ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

/* The argument checks cuptiActivityEnable_v2 and Disable_v2 share, before
 * the subscriber is looked up: the version and a kind in range. */
static CUptiResult kind_args(CUpti_ActivityKind kind)
{
    CUptiResult rc = need(130200);
    if (rc != CUPTI_SUCCESS)
        return rc;
    if ((int)kind <= 0 || (int)kind >= V2_KINDS)
        return CUPTI_ERROR_INVALID_KIND;
    return CUPTI_SUCCESS;
}

/* 13.4's pKindOptions: a per-cbid allow (enable 1) or deny list. */
static CUptiResult kind_options_locked(struct sub *s, CUpti_ActivityKind kind,
                                       const CUpti_ActivityConfig *c)
{
    if (version() < 130400 || c->structSize < sizeof(CUpti_ActivityConfig) || !c->pKindOptions)
        return CUPTI_SUCCESS; /* 13.2/13.3 know no pKindOptions */
    if (kind != CUPTI_ACTIVITY_KIND_RUNTIME && kind != CUPTI_ACTIVITY_KIND_DRIVER)
        return CUPTI_SUCCESS; /* ignored for other kinds */
    const CUpti_ActivityApiOptions *o = c->pKindOptions;
    if (o->structSize < sizeof *o || !o->pCbidOptions)
        return CUPTI_ERROR_INVALID_PARAMETER;
    const CUpti_ActivityApiCbidOptions *cb = o->pCbidOptions;
    if (cb->structSize < sizeof *cb || (cb->numCbids && !cb->pCbids))
        return CUPTI_ERROR_INVALID_PARAMETER;
    uint8_t *ovr = kind == CUPTI_ACTIVITY_KIND_RUNTIME ? s->rt_ovr : s->drv_ovr;
    size_t n = kind == CUPTI_ACTIVITY_KIND_RUNTIME ? sizeof s->rt_ovr : sizeof s->drv_ovr;
    /* An allow list turns every other cbid off; a deny list the listed. */
    memset(ovr, cb->enable ? 2 : 0, n);
    for (size_t i = 0; i < cb->numCbids; i++)
        if (cb->pCbids[i] < n)
            ovr[cb->pCbids[i]] = cb->enable ? 1 : 2;
    return CUPTI_SUCCESS;
}

API_EXPORT CUptiResult CUPTIAPI cuptiActivityEnable_v2(CUpti_SubscriberHandle subscriber,
                                                       CUpti_ActivityKind kind,
                                                       CUpti_ActivityConfig *pActivityConfig);
CUptiResult CUPTIAPI cuptiActivityEnable_v2(CUpti_SubscriberHandle subscriber,
                                            CUpti_ActivityKind kind,
                                            CUpti_ActivityConfig *pActivityConfig)
{
    CUptiResult rc = kind_args(kind);
    if (rc != CUPTI_SUCCESS)
        return rc;
    fc_lock();
    struct sub *s = sub_of(subscriber);
    if (!s) {
        rc = CUPTI_ERROR_INVALID_PARAMETER;
        goto out;
    }
    if (s->udr) {
        const int *ids = NULL;
        size_t n = 0;
        if (udr_unsupported(kind)) {
            rc = CUPTI_ERROR_NOT_SUPPORTED;
            goto out;
        }
        if (pActivityConfig) {
            if (pActivityConfig->structSize < CUPTIMON_ACTIVITY_CONFIG_SIZE_13_2 ||
                pActivityConfig->fieldSelection.structSize < sizeof(CUpti_ActivityFieldSelection)) {
                rc = CUPTI_ERROR_INVALID_PARAMETER;
                goto out;
            }
            ids = pActivityConfig->fieldSelection.pFieldIds;
            n = pActivityConfig->fieldSelection.numFields;
            if (n == 0)
                ids = NULL;
        }
        struct layout l;
        if ((rc = make_layout(kind, ids, n, &l)) != CUPTI_SUCCESS)
            goto out;
        if (pActivityConfig && (rc = kind_options_locked(s, kind, pActivityConfig)) != 0)
            goto out;
        s->lay[kind] = l;
        if (kind == CUPTI_ACTIVITY_KIND_KERNEL || kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            /* one struct for both kernel kinds */
            s->lay[CUPTI_ACTIVITY_KIND_KERNEL + CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL - kind] = l;
        }
    } else if (pActivityConfig && pActivityConfig->fieldSelection.numFields) {
        rc = CUPTI_ERROR_INVALID_OPERATION; /* a field selection needs user-defined records */
        goto out;
    } else if (fc_record_size(kind) == 0) {
        /* a kind the double does not write: enabled, records never come */
    }
    if (kind == CUPTI_ACTIVITY_KIND_RUNTIME || kind == CUPTI_ACTIVITY_KIND_DRIVER) {
        if (!pActivityConfig || version() < 130400 ||
            pActivityConfig->structSize < sizeof(CUpti_ActivityConfig) ||
            !pActivityConfig->pKindOptions)
            memset(kind == CUPTI_ACTIVITY_KIND_RUNTIME ? s->rt_ovr : s->drv_ovr, 0,
                   kind == CUPTI_ACTIVITY_KIND_RUNTIME ? sizeof s->rt_ovr : sizeof s->drv_ovr);
    }
    s->enabled[kind] = 1;
    v.any_enabled = 1;
    union_enabled_locked();
out:
    fc_unlock();
    return rc;
}

API_EXPORT CUptiResult CUPTIAPI cuptiActivityDisable_v2(CUpti_SubscriberHandle subscriber,
                                                        CUpti_ActivityKind kind,
                                                        CUpti_ActivityConfig *pActivityConfig);
CUptiResult CUPTIAPI cuptiActivityDisable_v2(CUpti_SubscriberHandle subscriber,
                                             CUpti_ActivityKind kind,
                                             CUpti_ActivityConfig *pActivityConfig)
{
    CUptiResult rc = kind_args(kind);
    (void)pActivityConfig;
    if (rc != CUPTI_SUCCESS)
        return rc;
    fc_lock();
    struct sub *s = sub_of(subscriber);
    if (s) {
        s->enabled[kind] = 0;
        union_enabled_locked();
    }
    fc_unlock();
    return s ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

API_EXPORT CUptiResult CUPTIAPI cuptiActivityGetNextRecord_v2(CUpti_SubscriberHandle subscriber,
                                                              uint8_t *buffer,
                                                              size_t validBufferSizeBytes,
                                                              CUpti_Activity **record);
CUptiResult CUPTIAPI cuptiActivityGetNextRecord_v2(CUpti_SubscriberHandle subscriber,
                                                   uint8_t *buffer, size_t validBufferSizeBytes,
                                                   CUpti_Activity **record)
{
    CUptiResult rc = need(130300);
    size_t off = 0, sz;
    if (rc != CUPTI_SUCCESS)
        return rc;
    if (!buffer || !record)
        return CUPTI_ERROR_INVALID_PARAMETER;
    fc_lock();
    struct sub *s = sub_of(subscriber);
    if (!s) {
        fc_unlock();
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    if (*record != NULL) {
        uintptr_t p = (uintptr_t)*record;
        if (p < (uintptr_t)buffer || p - (uintptr_t)buffer >= validBufferSizeBytes) {
            fc_unlock();
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        off = p - (uintptr_t)buffer;
        sz = rec_size(s, (uint32_t)rd(buffer + off, 4));
        if (!sz) {
            fc_unlock();
            return CUPTI_ERROR_INVALID_KIND;
        }
        off += sz;
    }
    if (off >= validBufferSizeBytes) {
        fc_unlock();
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    }
    sz = validBufferSizeBytes - off >= 4 ? rec_size(s, (uint32_t)rd(buffer + off, 4)) : 0;
    fc_unlock();
    if (!sz || validBufferSizeBytes - off < sz)
        return CUPTI_ERROR_INVALID_KIND;
    *record = (CUpti_Activity *)(void *)(buffer + off);
    return CUPTI_SUCCESS;
}

API_EXPORT CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords_v2(
    CUpti_SubscriberHandle subscriber, CUcontext context, uint32_t streamId, size_t *dropped);
CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords_v2(CUpti_SubscriberHandle subscriber,
                                                          CUcontext context, uint32_t streamId,
                                                          size_t *dropped)
{
    CUptiResult rc = need(130300);
    (void)context; /* "reserved for future use" */
    (void)streamId;
    if (rc != CUPTI_SUCCESS)
        return rc;
    if (!dropped)
        return CUPTI_ERROR_INVALID_PARAMETER;
    fc_lock();
    struct sub *s = sub_of(subscriber);
    if (s) {
        *dropped = s->dropped;
        s->dropped = 0; /* reset on read, like the global call */
    }
    fc_unlock();
    return s ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

API_EXPORT CUptiResult CUPTIAPI cuptiGetTimestamp_v2(CUpti_SubscriberHandle subscriber,
                                                     uint64_t *timestamp);
CUptiResult CUPTIAPI cuptiGetTimestamp_v2(CUpti_SubscriberHandle subscriber, uint64_t *timestamp)
{
    CUptiResult rc = need(130300);
    if (rc != CUPTI_SUCCESS)
        return rc;
    if (!timestamp)
        return CUPTI_ERROR_INVALID_PARAMETER;
    fc_lock();
    int ok = sub_of(subscriber) != NULL;
    fc_unlock();
    if (!ok)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *timestamp = fc_now(); /* 13.3: cuptiGetTimestamp's clock */
    return CUPTI_SUCCESS;
}

static CUptiResult ext_stack(CUpti_SubscriberHandle subscriber, CUpti_ExternalCorrelationKind kind,
                             int push, uint64_t *id)
{
    CUptiResult rc = need(130300);
    if (rc != CUPTI_SUCCESS)
        return rc;
    if ((int)kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || (int)kind >= V2_EXT_KINDS)
        return CUPTI_ERROR_INVALID_PARAMETER;
    fc_lock();
    struct sub *s = sub_of(subscriber);
    int i = s ? sub_index(s) : -1;
    fc_unlock();
    if (i < 0)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (push) {
        if (t_ext[i][kind].n == V2_EXT_DEPTH)
            return CUPTI_ERROR_OUT_OF_MEMORY;
        t_ext[i][kind].ids[t_ext[i][kind].n++] = *id;
        return CUPTI_SUCCESS;
    }
    if (t_ext[i][kind].n == 0)
        return CUPTI_ERROR_QUEUE_EMPTY;
    t_ext[i][kind].n--;
    if (id)
        *id = t_ext[i][kind].ids[t_ext[i][kind].n];
    return CUPTI_SUCCESS;
}

API_EXPORT CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId_v2(
    CUpti_SubscriberHandle subscriber, CUpti_ExternalCorrelationKind kind, uint64_t id);
CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId_v2(CUpti_SubscriberHandle subscriber,
                                                               CUpti_ExternalCorrelationKind kind,
                                                               uint64_t id)
{
    return ext_stack(subscriber, kind, 1, &id);
}

API_EXPORT CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId_v2(
    CUpti_SubscriberHandle subscriber, CUpti_ExternalCorrelationKind kind, uint64_t *lastId);
CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId_v2(CUpti_SubscriberHandle subscriber,
                                                              CUpti_ExternalCorrelationKind kind,
                                                              uint64_t *lastId)
{
    return ext_stack(subscriber, kind, 0, lastId);
}

static CUptiResult set_api_v2(CUpti_SubscriberHandle subscriber, int runtime, CUpti_CallbackId cbid,
                              uint8_t enable)
{
    CUptiResult rc = need(130300);
    if (rc != CUPTI_SUCCESS)
        return rc;
    fc_lock();
    struct sub *s = sub_of(subscriber);
    size_t n = runtime ? sizeof s->rt_ovr : sizeof s->drv_ovr;
    if (!s || cbid == 0 || cbid >= n)
        rc = CUPTI_ERROR_INVALID_PARAMETER;
    else if (s->udr && version() < 130400)
        rc = CUPTI_ERROR_NOT_COMPATIBLE; /* per-cbid filters under UDR came with 13.4 */
    else
        (runtime ? s->rt_ovr : s->drv_ovr)[cbid] = enable ? 1 : 2;
    fc_unlock();
    return rc;
}

API_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi_v2(CUpti_SubscriberHandle subscriber,
                                                                 CUpti_CallbackId cbid,
                                                                 uint8_t enable);
CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi_v2(CUpti_SubscriberHandle subscriber,
                                                      CUpti_CallbackId cbid, uint8_t enable)
{
    return set_api_v2(subscriber, 1, cbid, enable);
}

API_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableDriverApi_v2(CUpti_SubscriberHandle subscriber,
                                                                CUpti_CallbackId cbid,
                                                                uint8_t enable);
CUptiResult CUPTIAPI cuptiActivityEnableDriverApi_v2(CUpti_SubscriberHandle subscriber,
                                                     CUpti_CallbackId cbid, uint8_t enable)
{
    return set_api_v2(subscriber, 0, cbid, enable);
}

/* ---------------------------------------------------------------- test introspection */

int fakecupti_get_subscriber_stats(const char *name, struct fakecupti_stats *out)
{
    int rc = -1;
    fc_lock();
    for (int i = 0; i < V2_MAX_SUBS; i++) {
        struct sub *s = &v.subs[i];
        if (s->live && strcmp(s->name, name) == 0) {
            *out = s->st;
            out->callbacks_registered = s->req && s->done;
            rc = 0;
            break;
        }
    }
    fc_unlock();
    return rc;
}
