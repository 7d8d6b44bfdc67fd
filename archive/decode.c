/*
 * The decoder: record layouts by CUPTI API version and the buffer walker.
 * See decode.h for the rules; the one rule that shapes this file is that
 * every field is read with memcpy at the offset the compiled CUPTI header
 * gives, and only after the whole record is known to lie in the buffer.
 */
#include "config.h"

#include "decode.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include <cupti_activity.h>

/* Pointer-valued fields (kernel and marker names) are read as 8 bytes:
 * producers are 64-bit processes and so must the daemon be. */
_Static_assert(sizeof(void *) == 8, "cuptimon decodes 64-bit producers only");
_Static_assert(sizeof(CUpti_ActivityKind) == 4, "CUpti_ActivityKind must be 4 bytes");

enum decoder {
    DEC_NONE = 0,
    DEC_KERNEL,
    DEC_MEMCPY,
    DEC_P2P,
    DEC_MEMSET,
    DEC_API,
    DEC_EXT,
    DEC_OVERHEAD,
    DEC_CUDA_EVENT,
    DEC_SYNC,
    DEC_MARKER,
    DEC_MARKER_DATA,
};

/* The CUDA 13.0 table: kind -> struct CUPTI uses for it in 13.0. */
static const struct {
    uint32_t kind;
    uint8_t dec;
    uint16_t size;
} table_13_0[] = {
    {CUPTI_ACTIVITY_KIND_MEMCPY, DEC_MEMCPY, sizeof(CUpti_ActivityMemcpy6)},
    {CUPTI_ACTIVITY_KIND_MEMSET, DEC_MEMSET, sizeof(CUpti_ActivityMemset4)},
    {CUPTI_ACTIVITY_KIND_KERNEL, DEC_KERNEL, sizeof(CUpti_ActivityKernel10)},
    {CUPTI_ACTIVITY_KIND_DRIVER, DEC_API, sizeof(CUpti_ActivityAPI)},
    {CUPTI_ACTIVITY_KIND_RUNTIME, DEC_API, sizeof(CUpti_ActivityAPI)},
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, DEC_KERNEL, sizeof(CUpti_ActivityKernel10)},
    {CUPTI_ACTIVITY_KIND_MARKER, DEC_MARKER, sizeof(CUpti_ActivityMarker2)},
    {CUPTI_ACTIVITY_KIND_MARKER_DATA, DEC_MARKER_DATA, sizeof(CUpti_ActivityMarkerData2)},
    {CUPTI_ACTIVITY_KIND_OVERHEAD, DEC_OVERHEAD, sizeof(CUpti_ActivityOverhead3)},
    {CUPTI_ACTIVITY_KIND_MEMCPY2, DEC_P2P, sizeof(CUpti_ActivityMemcpyPtoP4)},
    {CUPTI_ACTIVITY_KIND_CUDA_EVENT, DEC_CUDA_EVENT, sizeof(CUpti_ActivityCudaEvent2)},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, DEC_SYNC, sizeof(CUpti_ActivitySynchronization2)},
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, DEC_EXT, sizeof(CUpti_ActivityExternalCorrelation)},
};

/* The sizes the issue and the real H200 buffers state; a header that
 * disagrees is not the 13.0 header this table was written for. */
_Static_assert(sizeof(CUpti_ActivityKernel10) == 216, "Kernel10 is 216 bytes in CUDA 13.0");
_Static_assert(sizeof(CUpti_ActivityMemcpy6) == 96, "Memcpy6 is 96 bytes in CUDA 13.0");
_Static_assert(sizeof(CUpti_ActivityMemset4) == 88, "Memset4 is 88 bytes in CUDA 13.0");
_Static_assert(sizeof(CUpti_ActivityAPI) == 40, "ActivityAPI is 40 bytes in CUDA 13.0");

static int size_sane(uint32_t s)
{
    return s >= 8 && s <= CUPTIMON_RECORD_MAX && (s % 8) == 0;
}

int cuptimon__layout_init(struct cuptimon_layout *l, uint32_t cupti_version,
                          const uint32_t *announced)
{
    int mismatch = 0;

    memset(l, 0, sizeof(*l));
    l->cupti_version = cupti_version;
    l->version_known =
        cupti_version >= CUPTIMON_CUPTI_VERSION_MIN && cupti_version <= CUPTIMON_CUPTI_VERSION_MAX;

    if (announced != NULL) {
        for (unsigned k = 0; k < CUPTIMON_KIND_SLOTS; k++)
            if (size_sane(announced[k]))
                l->announced[k] = (uint16_t)announced[k];
    }

    if (l->version_known) {
        for (size_t i = 0; i < sizeof(table_13_0) / sizeof(table_13_0[0]); i++) {
            uint32_t k = table_13_0[i].kind;
            l->table_size[k] = table_13_0[i].size;
            l->decoder[k] = table_13_0[i].dec;
        }
    }

    for (unsigned k = 0; k < CUPTIMON_KIND_SLOTS; k++) {
        uint16_t a = l->announced[k], t = l->table_size[k];
        if (k == CUPTI_ACTIVITY_KIND_INVALID) {
            l->state[k] = CUPTIMON_KIND_UNKNOWN;
        } else if (!l->version_known) {
            l->state[k] = a ? CUPTIMON_KIND_BAD_VERSION : CUPTIMON_KIND_UNKNOWN;
            l->size[k] = a;
        } else if (t != 0 && (a == 0 || a == t)) {
            l->state[k] = CUPTIMON_KIND_DECODED;
            l->size[k] = t;
        } else if (t != 0) {
            /* The producer's struct is not ours: walk over it by its size. */
            l->state[k] = CUPTIMON_KIND_BAD_LAYOUT;
            l->size[k] = a;
            l->decoder[k] = DEC_NONE;
            mismatch = 1;
        } else {
            l->state[k] = a ? CUPTIMON_KIND_UNSUPPORTED : CUPTIMON_KIND_UNKNOWN;
            l->size[k] = a;
        }
    }
    /* An announced size that was absurd for a kind we decode is also a
     * disagreement, though the table size is used to walk. */
    if (announced != NULL && l->version_known) {
        for (unsigned k = 1; k < CUPTIMON_KIND_SLOTS; k++) {
            if (announced[k] != 0 && !size_sane(announced[k]) && l->table_size[k] != 0) {
                l->state[k] = CUPTIMON_KIND_BAD_LAYOUT;
                l->size[k] = 0; /* unknown: stop rather than guess */
                l->decoder[k] = DEC_NONE;
                mismatch = 1;
            }
        }
    }
    if (!l->version_known)
        return -EPROTONOSUPPORT;
    return mismatch;
}

void cuptimon__layout_table(uint32_t sizes[CUPTIMON_KIND_SLOTS])
{
    memset(sizes, 0, sizeof(uint32_t) * CUPTIMON_KIND_SLOTS);
    for (size_t i = 0; i < sizeof(table_13_0) / sizeof(table_13_0[0]); i++)
        sizes[table_13_0[i].kind] = table_13_0[i].size;
}

static const char *const kind_names[] = {
    [0] = "INVALID",
    [1] = "MEMCPY",
    [2] = "MEMSET",
    [3] = "KERNEL",
    [4] = "DRIVER",
    [5] = "RUNTIME",
    [6] = "EVENT",
    [7] = "METRIC",
    [8] = "DEVICE",
    [9] = "CONTEXT",
    [10] = "CONCURRENT_KERNEL",
    [11] = "NAME",
    [12] = "MARKER",
    [13] = "MARKER_DATA",
    [14] = "SOURCE_LOCATOR",
    [15] = "GLOBAL_ACCESS",
    [16] = "BRANCH",
    [17] = "OVERHEAD",
    [18] = "CDP_KERNEL",
    [19] = "PREEMPTION",
    [20] = "ENVIRONMENT",
    [21] = "EVENT_INSTANCE",
    [22] = "MEMCPY2",
    [23] = "METRIC_INSTANCE",
    [24] = "INSTRUCTION_EXECUTION",
    [25] = "UNIFIED_MEMORY_COUNTER",
    [26] = "FUNCTION",
    [27] = "MODULE",
    [28] = "DEVICE_ATTRIBUTE",
    [29] = "SHARED_ACCESS",
    [30] = "PC_SAMPLING",
    [31] = "PC_SAMPLING_RECORD_INFO",
    [32] = "INSTRUCTION_CORRELATION",
    [33] = "OPENACC_DATA",
    [34] = "OPENACC_LAUNCH",
    [35] = "OPENACC_OTHER",
    [36] = "CUDA_EVENT",
    [37] = "STREAM",
    [38] = "SYNCHRONIZATION",
    [39] = "EXTERNAL_CORRELATION",
    [40] = "NVLINK",
    [41] = "INSTANTANEOUS_EVENT",
    [42] = "INSTANTANEOUS_EVENT_INSTANCE",
    [43] = "INSTANTANEOUS_METRIC",
    [44] = "INSTANTANEOUS_METRIC_INSTANCE",
    [45] = "MEMORY",
    [46] = "PCIE",
    [47] = "OPENMP",
    [48] = "INTERNAL_LAUNCH_API",
    [49] = "MEMORY2",
    [50] = "MEMORY_POOL",
    [51] = "GRAPH_TRACE",
    [52] = "JIT",
    [53] = "DEVICE_GRAPH_TRACE",
    [54] = "MEM_DECOMPRESS",
};

const char *cuptimon__kind_name(uint32_t kind)
{
    if (kind < sizeof(kind_names) / sizeof(kind_names[0]))
        return kind_names[kind];
    return NULL;
}

static const char *const type_names[CUPTIMON_EV_TYPES] = {
    [CUPTIMON_EV_NONE] = "none",
    [CUPTIMON_EV_KERNEL] = "kernel",
    [CUPTIMON_EV_MEMCPY] = "memcpy",
    [CUPTIMON_EV_MEMCPY_P2P] = "memcpy_p2p",
    [CUPTIMON_EV_MEMSET] = "memset",
    [CUPTIMON_EV_RUNTIME] = "runtime",
    [CUPTIMON_EV_DRIVER] = "driver",
    [CUPTIMON_EV_EXTERNAL_CORRELATION] = "external_correlation",
    [CUPTIMON_EV_OVERHEAD] = "overhead",
    [CUPTIMON_EV_CUDA_EVENT] = "cuda_event",
    [CUPTIMON_EV_SYNC] = "synchronization",
    [CUPTIMON_EV_MARKER] = "marker",
    [CUPTIMON_EV_MARKER_DATA] = "marker_data",
};

const char *cuptimon__ev_type_name(unsigned type)
{
    if (type < CUPTIMON_EV_TYPES)
        return type_names[type];
    return "unknown";
}

void cuptimon__decode_stats_add(struct cuptimon_decode_stats *into,
                                const struct cuptimon_decode_stats *from)
{
    into->buffers += from->buffers;
    into->bytes += from->bytes;
    into->decoded_bytes += from->decoded_bytes;
    into->undecodable_bytes += from->undecodable_bytes;
    into->records += from->records;
    for (unsigned k = 0; k < CUPTIMON_KIND_SLOTS; k++) {
        into->by_kind[k] += from->by_kind[k];
        into->skipped_by_kind[k] += from->skipped_by_kind[k];
    }
    into->skipped_unsupported += from->skipped_unsupported;
    into->skipped_bad_layout += from->skipped_bad_layout;
    into->skipped_bad_version += from->skipped_bad_version;
    into->unknown_kind_stops += from->unknown_kind_stops;
    if (from->unknown_kind_stops)
        into->unknown_kind_last = from->unknown_kind_last;
    into->truncated += from->truncated;
    into->bad_times += from->bad_times;
}

/* ---- field reads ------------------------------------------------------ */

static inline uint64_t rdn(const uint8_t *p, size_t n)
{
    switch (n) {
    case 1:
        return p[0];
    case 2: {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case 8: {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    default:
        return 0;
    }
}

/* Reads field f of CUPTI struct T from the record at rec, at the offset and
 * width the compiled header gives. */
#define RD(rec, T, f) rdn((rec) + offsetof(T, f), sizeof(((T *)0)->f))
#define RD32S(rec, T, f) ((int32_t)(uint32_t)RD(rec, T, f))

static void rd_objid(const uint8_t *p, struct cuptimon_objid *o)
{
    o->a = (uint32_t)rdn(p + offsetof(CUpti_ActivityObjectKindId, dcs.deviceId), 4);
    o->b = (uint32_t)rdn(p + offsetof(CUpti_ActivityObjectKindId, dcs.contextId), 4);
    o->c = (uint32_t)rdn(p + offsetof(CUpti_ActivityObjectKindId, dcs.streamId), 4);
}

_Static_assert(offsetof(CUpti_ActivityObjectKindId, pt.processId) ==
                   offsetof(CUpti_ActivityObjectKindId, dcs.deviceId),
               "objid word a");
_Static_assert(offsetof(CUpti_ActivityObjectKindId, pt.threadId) ==
                   offsetof(CUpti_ActivityObjectKindId, dcs.contextId),
               "objid word b");

static void dec_kernel(const uint8_t *r, struct cuptimon_ev *ev)
{
    typedef CUpti_ActivityKernel10 T;
    ev->type = CUPTIMON_EV_KERNEL;
    ev->correlation_id = (uint32_t)RD(r, T, correlationId);
    ev->start = RD(r, T, start);
    ev->end = RD(r, T, end);
    ev->device_id = (uint32_t)RD(r, T, deviceId);
    ev->context_id = (uint32_t)RD(r, T, contextId);
    ev->stream_id = (uint32_t)RD(r, T, streamId);
    ev->graph_id = (uint32_t)RD(r, T, graphId);
    ev->graph_node_id = RD(r, T, graphNodeId);
    ev->u.kernel.name_ptr = RD(r, T, name);
    ev->u.kernel.grid_id = (int64_t)RD(r, T, gridId);
    ev->u.kernel.completed = RD(r, T, completed);
    ev->u.kernel.queued = RD(r, T, queued);
    ev->u.kernel.submitted = RD(r, T, submitted);
    ev->u.kernel.local_memory_total_v2 = RD(r, T, localMemoryTotal_v2);
    ev->u.kernel.grid_x = RD32S(r, T, gridX);
    ev->u.kernel.grid_y = RD32S(r, T, gridY);
    ev->u.kernel.grid_z = RD32S(r, T, gridZ);
    ev->u.kernel.block_x = RD32S(r, T, blockX);
    ev->u.kernel.block_y = RD32S(r, T, blockY);
    ev->u.kernel.block_z = RD32S(r, T, blockZ);
    ev->u.kernel.static_shared_memory = RD32S(r, T, staticSharedMemory);
    ev->u.kernel.dynamic_shared_memory = RD32S(r, T, dynamicSharedMemory);
    ev->u.kernel.local_memory_per_thread = (uint32_t)RD(r, T, localMemoryPerThread);
    ev->u.kernel.local_memory_total = (uint32_t)RD(r, T, localMemoryTotal);
    ev->u.kernel.shared_memory_executed = (uint32_t)RD(r, T, sharedMemoryExecuted);
    ev->u.kernel.partitioned_global_cache_requested =
        (uint32_t)RD(r, T, partitionedGlobalCacheRequested);
    ev->u.kernel.partitioned_global_cache_executed =
        (uint32_t)RD(r, T, partitionedGlobalCacheExecuted);
    ev->u.kernel.shmem_limit_config = (uint32_t)RD(r, T, shmemLimitConfig);
    ev->u.kernel.channel_id = (uint32_t)RD(r, T, channelID);
    ev->u.kernel.channel_type = (uint32_t)RD(r, T, channelType);
    ev->u.kernel.cluster_x = (uint32_t)RD(r, T, clusterX);
    ev->u.kernel.cluster_y = (uint32_t)RD(r, T, clusterY);
    ev->u.kernel.cluster_z = (uint32_t)RD(r, T, clusterZ);
    ev->u.kernel.cluster_scheduling_policy = (uint32_t)RD(r, T, clusterSchedulingPolicy);
    ev->u.kernel.max_potential_cluster_size = (uint32_t)RD(r, T, maxPotentialClusterSize);
    ev->u.kernel.max_active_clusters = (uint32_t)RD(r, T, maxActiveClusters);
    ev->u.kernel.registers_per_thread = (uint16_t)RD(r, T, registersPerThread);
    ev->u.kernel.cache_config = (uint8_t)RD(r, T, cacheConfig);
    ev->u.kernel.shared_memory_config = (uint8_t)RD(r, T, sharedMemoryConfig);
    ev->u.kernel.launch_type = (uint8_t)RD(r, T, launchType);
    ev->u.kernel.is_shared_memory_carveout_requested =
        (uint8_t)RD(r, T, isSharedMemoryCarveoutRequested);
    ev->u.kernel.shared_memory_carveout_requested =
        (uint8_t)RD(r, T, sharedMemoryCarveoutRequested);
    ev->u.kernel.is_device_launched = (uint8_t)RD(r, T, isDeviceLaunched);
}

static void dec_memcpy(const uint8_t *r, struct cuptimon_ev *ev)
{
    typedef CUpti_ActivityMemcpy6 T;
    ev->type = CUPTIMON_EV_MEMCPY;
    ev->correlation_id = (uint32_t)RD(r, T, correlationId);
    ev->start = RD(r, T, start);
    ev->end = RD(r, T, end);
    ev->device_id = (uint32_t)RD(r, T, deviceId);
    ev->context_id = (uint32_t)RD(r, T, contextId);
    ev->stream_id = (uint32_t)RD(r, T, streamId);
    ev->graph_id = (uint32_t)RD(r, T, graphId);
    ev->graph_node_id = RD(r, T, graphNodeId);
    ev->u.memcpy.bytes = RD(r, T, bytes);
    ev->u.memcpy.copy_count = RD(r, T, copyCount);
    ev->u.memcpy.runtime_correlation_id = (uint32_t)RD(r, T, runtimeCorrelationId);
    ev->u.memcpy.channel_id = (uint32_t)RD(r, T, channelID);
    ev->u.memcpy.channel_type = (uint32_t)RD(r, T, channelType);
    ev->u.memcpy.copy_kind = (uint8_t)RD(r, T, copyKind);
    ev->u.memcpy.src_kind = (uint8_t)RD(r, T, srcKind);
    ev->u.memcpy.dst_kind = (uint8_t)RD(r, T, dstKind);
    ev->u.memcpy.flags = (uint8_t)RD(r, T, flags);
    ev->u.memcpy.is_device_launched = (uint8_t)RD(r, T, isDeviceLaunched);
}

static void dec_p2p(const uint8_t *r, struct cuptimon_ev *ev)
{
    typedef CUpti_ActivityMemcpyPtoP4 T;
    ev->type = CUPTIMON_EV_MEMCPY_P2P;
    ev->correlation_id = (uint32_t)RD(r, T, correlationId);
    ev->start = RD(r, T, start);
    ev->end = RD(r, T, end);
    ev->device_id = (uint32_t)RD(r, T, deviceId);
    ev->context_id = (uint32_t)RD(r, T, contextId);
    ev->stream_id = (uint32_t)RD(r, T, streamId);
    ev->graph_id = (uint32_t)RD(r, T, graphId);
    ev->graph_node_id = RD(r, T, graphNodeId);
    ev->u.memcpy.bytes = RD(r, T, bytes);
    ev->u.memcpy.src_device_id = (uint32_t)RD(r, T, srcDeviceId);
    ev->u.memcpy.src_context_id = (uint32_t)RD(r, T, srcContextId);
    ev->u.memcpy.dst_device_id = (uint32_t)RD(r, T, dstDeviceId);
    ev->u.memcpy.dst_context_id = (uint32_t)RD(r, T, dstContextId);
    ev->u.memcpy.channel_id = (uint32_t)RD(r, T, channelID);
    ev->u.memcpy.channel_type = (uint32_t)RD(r, T, channelType);
    ev->u.memcpy.copy_kind = (uint8_t)RD(r, T, copyKind);
    ev->u.memcpy.src_kind = (uint8_t)RD(r, T, srcKind);
    ev->u.memcpy.dst_kind = (uint8_t)RD(r, T, dstKind);
    ev->u.memcpy.flags = (uint8_t)RD(r, T, flags);
}

static void dec_memset(const uint8_t *r, struct cuptimon_ev *ev)
{
    typedef CUpti_ActivityMemset4 T;
    ev->type = CUPTIMON_EV_MEMSET;
    ev->correlation_id = (uint32_t)RD(r, T, correlationId);
    ev->start = RD(r, T, start);
    ev->end = RD(r, T, end);
    ev->device_id = (uint32_t)RD(r, T, deviceId);
    ev->context_id = (uint32_t)RD(r, T, contextId);
    ev->stream_id = (uint32_t)RD(r, T, streamId);
    ev->graph_id = (uint32_t)RD(r, T, graphId);
    ev->graph_node_id = RD(r, T, graphNodeId);
    ev->u.memset.bytes = RD(r, T, bytes);
    ev->u.memset.value = (uint32_t)RD(r, T, value);
    ev->u.memset.channel_id = (uint32_t)RD(r, T, channelID);
    ev->u.memset.channel_type = (uint32_t)RD(r, T, channelType);
    ev->u.memset.flags = (uint16_t)RD(r, T, flags);
    ev->u.memset.memory_kind = (uint16_t)RD(r, T, memoryKind);
    ev->u.memset.is_device_launched = (uint8_t)RD(r, T, isDeviceLaunched);
}

static void dec_api(const uint8_t *r, uint32_t kind, struct cuptimon_ev *ev)
{
    typedef CUpti_ActivityAPI T;
    ev->type = kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTIMON_EV_RUNTIME : CUPTIMON_EV_DRIVER;
    ev->correlation_id = (uint32_t)RD(r, T, correlationId);
    ev->start = RD(r, T, start);
    ev->end = RD(r, T, end);
    ev->u.api.cbid = (uint32_t)RD(r, T, cbid);
    ev->u.api.process_id = (uint32_t)RD(r, T, processId);
    ev->u.api.thread_id = (uint32_t)RD(r, T, threadId);
    ev->u.api.return_value = (uint32_t)RD(r, T, returnValue);
}

static void dec_ext(const uint8_t *r, struct cuptimon_ev *ev)
{
    typedef CUpti_ActivityExternalCorrelation T;
    ev->type = CUPTIMON_EV_EXTERNAL_CORRELATION;
    ev->correlation_id = (uint32_t)RD(r, T, correlationId);
    ev->u.ext.external_kind = (uint32_t)RD(r, T, externalKind);
    ev->u.ext.external_id = RD(r, T, externalId);
}

static void dec_overhead(const uint8_t *r, struct cuptimon_ev *ev)
{
    typedef CUpti_ActivityOverhead3 T;
    ev->type = CUPTIMON_EV_OVERHEAD;
    ev->correlation_id = (uint32_t)RD(r, T, correlationId);
    ev->start = RD(r, T, start);
    ev->end = RD(r, T, end);
    ev->u.overhead.overhead_kind = (uint32_t)RD(r, T, overheadKind);
    ev->u.overhead.object_kind = (uint32_t)RD(r, T, objectKind);
    rd_objid(r + offsetof(T, objectId), &ev->u.overhead.object_id);
}

static void dec_cuda_event(const uint8_t *r, struct cuptimon_ev *ev)
{
    typedef CUpti_ActivityCudaEvent2 T;
    ev->type = CUPTIMON_EV_CUDA_EVENT;
    ev->correlation_id = (uint32_t)RD(r, T, correlationId);
    ev->start = ev->end = RD(r, T, deviceTimestamp);
    ev->device_id = (uint32_t)RD(r, T, deviceId);
    ev->context_id = (uint32_t)RD(r, T, contextId);
    ev->stream_id = (uint32_t)RD(r, T, streamId);
    ev->u.cuda_event.event_id = (uint32_t)RD(r, T, eventId);
    ev->u.cuda_event.cuda_event_sync_id = RD(r, T, cudaEventSyncId);
}

static void dec_sync(const uint8_t *r, struct cuptimon_ev *ev)
{
    typedef CUpti_ActivitySynchronization2 T;
    ev->type = CUPTIMON_EV_SYNC;
    ev->correlation_id = (uint32_t)RD(r, T, correlationId);
    ev->start = RD(r, T, start);
    ev->end = RD(r, T, end);
    ev->context_id = (uint32_t)RD(r, T, contextId);
    ev->stream_id = (uint32_t)RD(r, T, streamId);
    ev->u.sync.type = (uint32_t)RD(r, T, type);
    ev->u.sync.cuda_event_id = (uint32_t)RD(r, T, cudaEventId);
    ev->u.sync.cuda_event_sync_id = RD(r, T, cudaEventSyncId);
    ev->u.sync.return_value = (uint32_t)RD(r, T, returnValue);
}

static void dec_marker(const uint8_t *r, struct cuptimon_ev *ev)
{
    typedef CUpti_ActivityMarker2 T;
    ev->type = CUPTIMON_EV_MARKER;
    ev->start = ev->end = RD(r, T, timestamp);
    ev->u.marker.flags = (uint32_t)RD(r, T, flags);
    ev->u.marker.id = (uint32_t)RD(r, T, id);
    ev->u.marker.object_kind = (uint32_t)RD(r, T, objectKind);
    rd_objid(r + offsetof(T, objectId), &ev->u.marker.object_id);
    ev->u.marker.name_ptr = RD(r, T, name);
    ev->u.marker.domain_ptr = RD(r, T, domain);
}

static void dec_marker_data(const uint8_t *r, struct cuptimon_ev *ev)
{
    typedef CUpti_ActivityMarkerData2 T;
    ev->type = CUPTIMON_EV_MARKER_DATA;
    ev->u.marker_data.flags = (uint32_t)RD(r, T, flags);
    ev->u.marker_data.id = (uint32_t)RD(r, T, id);
    ev->u.marker_data.payload_kind = (uint32_t)RD(r, T, payloadKind);
    ev->u.marker_data.payload = rdn(r + offsetof(T, payload), 8);
    ev->u.marker_data.color = (uint32_t)RD(r, T, color);
    ev->u.marker_data.category = (uint32_t)RD(r, T, category);
    ev->u.marker_data.cupti_domain_id = (uint32_t)RD(r, T, cuptiDomainId);
}
_Static_assert(sizeof(CUpti_MetricValue) == 8, "CUpti_MetricValue is 8 bytes");

/* Decodes the record at r whose kind has decoder dec; r has at least the
 * table size of bytes.  Returns 1 when end < start (counted by the caller). */
static inline int decode_one(unsigned dec, uint32_t kind, const uint8_t *r, struct cuptimon_ev *ev)
{
    memset(ev, 0, sizeof(*ev));
    ev->cupti_kind = (uint16_t)kind;
    switch (dec) {
    case DEC_KERNEL:
        dec_kernel(r, ev);
        break;
    case DEC_MEMCPY:
        dec_memcpy(r, ev);
        break;
    case DEC_P2P:
        dec_p2p(r, ev);
        break;
    case DEC_MEMSET:
        dec_memset(r, ev);
        break;
    case DEC_API:
        dec_api(r, kind, ev);
        break;
    case DEC_EXT:
        dec_ext(r, ev);
        break;
    case DEC_OVERHEAD:
        dec_overhead(r, ev);
        break;
    case DEC_CUDA_EVENT:
        dec_cuda_event(r, ev);
        break;
    case DEC_SYNC:
        dec_sync(r, ev);
        break;
    case DEC_MARKER:
        dec_marker(r, ev);
        break;
    case DEC_MARKER_DATA:
        dec_marker_data(r, ev);
        break;
    default:
        return 0;
    }
    return ev->end < ev->start;
}

int cuptimon__decode_record(const struct cuptimon_layout *l, const uint8_t *rec, size_t size,
                            struct cuptimon_ev *ev)
{
    uint32_t kind;

    if (size < 4)
        return -EINVAL;
    memcpy(&kind, rec, 4);
    if (kind >= CUPTIMON_KIND_SLOTS || l->state[kind] != CUPTIMON_KIND_DECODED ||
        size != l->table_size[kind])
        return -EINVAL;
    decode_one(l->decoder[kind], kind, rec, ev);
    return 0;
}

/* ---- walker ----------------------------------------------------------- */

void cuptimon__walk_begin(struct cuptimon_walk *w, const struct cuptimon_layout *l, const void *buf,
                          size_t len, struct cuptimon_decode_stats *st)
{
    w->p = buf;
    w->len = buf ? len : 0;
    w->off = 0;
    w->l = l;
    w->st = st;
    w->done = 0;
    st->buffers++;
    st->bytes += w->len;
}

/* Ends the walk, counting what is left as undecodable. */
static int walk_stop(struct cuptimon_walk *w)
{
    w->st->undecodable_bytes += w->len - w->off;
    w->off = w->len;
    w->done = 1;
    return 0;
}

int cuptimon__walk_next(struct cuptimon_walk *w, struct cuptimon_ev *ev)
{
    const struct cuptimon_layout *l = w->l;
    struct cuptimon_decode_stats *st = w->st;

    if (w->done)
        return 0;
    for (;;) {
        size_t left = w->len - w->off;
        uint32_t kind;
        size_t size;

        if (left == 0) {
            w->done = 1;
            return 0;
        }
        if (left < 4) {
            st->truncated++;
            return walk_stop(w);
        }
        memcpy(&kind, w->p + w->off, 4);
        if (kind >= CUPTIMON_KIND_SLOTS || l->size[kind] == 0) {
            /* The size of what follows is unknown: nothing after this
             * point can be located, so none of it is read. */
            st->unknown_kind_stops++;
            st->unknown_kind_last = kind;
            return walk_stop(w);
        }
        size = l->size[kind];
        if (size > left) {
            st->truncated++;
            return walk_stop(w);
        }
        if (l->state[kind] != CUPTIMON_KIND_DECODED) {
            st->skipped_by_kind[kind]++;
            st->undecodable_bytes += size;
            if (l->state[kind] == CUPTIMON_KIND_BAD_LAYOUT)
                st->skipped_bad_layout++;
            else if (l->state[kind] == CUPTIMON_KIND_BAD_VERSION)
                st->skipped_bad_version++;
            else
                st->skipped_unsupported++;
            w->off += size;
            continue;
        }
        st->bad_times += (uint64_t)decode_one(l->decoder[kind], kind, w->p + w->off, ev);
        st->by_kind[kind]++;
        st->records++;
        st->decoded_bytes += size;
        w->off += size;
        return 1;
    }
}

int cuptimon__ev_in_range(const struct cuptimon_ev *ev, const struct cuptimon_clock *c,
                          uint64_t from, uint64_t to)
{
    uint64_t s, e;

    if (ev->start == 0 && ev->end == 0)
        return 1;
    s = cuptimon__clock_map(c, ev->start);
    e = cuptimon__clock_map(c, ev->end);
    if (e < s)
        e = s;
    if (e < from)
        return 0;
    if (to != 0 && s >= to)
        return 0;
    return 1;
}

/* ---- names ------------------------------------------------------------ */

const char *cuptimon__memcpy_kind_name(unsigned k)
{
    static const char *const n[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                    "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
    return k < sizeof(n) / sizeof(n[0]) ? n[k] : NULL;
}

const char *cuptimon__memory_kind_name(unsigned k)
{
    static const char *const n[] = {"Unknown", "Pageable", "Pinned",        "Device",
                                    "Array",   "Managed",  "Device Static", "Managed Static"};
    return k < sizeof(n) / sizeof(n[0]) ? n[k] : NULL;
}

/* PyTorch's _OVERHEAD_KIND_NAMES, so both tools name overheads alike. */
const char *cuptimon__overhead_kind_name(uint32_t k)
{
    switch (k) {
    case CUPTI_ACTIVITY_OVERHEAD_UNKNOWN:
        return "Unknown";
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER:
        return "Driver Compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
        return "Buffer Flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
        return "Instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
        return "Resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
        return "Runtime Triggered Module Loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING:
        return "Lazy Function Loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL:
        return "Command Buffer Full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST:
        return "Activity Buffer Request";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT:
        return "UVM Activity Init";
    default:
        return NULL;
    }
}

const char *cuptimon__sync_type_name(unsigned k)
{
    static const char *const n[] = {"Unknown Sync", "Event Sync", "Stream Wait Event",
                                    "Stream Sync", "Context Sync"};
    return k < sizeof(n) / sizeof(n[0]) ? n[k] : NULL;
}

const char *cuptimon__external_kind_name(unsigned k)
{
    static const char *const n[] = {"invalid", "unknown", "openacc",
                                    "custom0", "custom1", "custom2"};
    return k < sizeof(n) / sizeof(n[0]) ? n[k] : NULL;
}
