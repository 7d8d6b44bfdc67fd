/*
 * The fields the shim asks CUPTI for on the v2 path: those the decoder,
 * the trace writer and the live aggregates read (archive/trace.c,
 * archive/summary.c, daemon/aggregate*.c), no more.  A user-defined
 * record costs what it selects: a kernel record of these fields is about
 * half of Kernel12's 224 bytes.  Left out on purpose: fields nothing reads
 * (cache and shared memory configuration, partitioned cache, channel,
 * grid id, local memory totals, cluster scheduling, priority), and those
 * CUPTI does not offer as user-defined fields (the memcpy's
 * runtimeCorrelationId; objectKind/objectId, which overhead and marker
 * records give as processId and threadId instead).
 */
#include "config.h"

#include "v2-fields.h"

#include "cupti-abi.h"

#define KERNEL_COMMON                                                                              \
    {KERNEL_FIELD_KIND, NULL}, {KERNEL_FIELD_START, "start"}, {KERNEL_FIELD_END, "end"},           \
        {KERNEL_FIELD_DEVICE_ID, "deviceId"}, {KERNEL_FIELD_CONTEXT_ID, "contextId"},              \
        {KERNEL_FIELD_STREAM_ID, "streamId"}, {KERNEL_FIELD_CORRELATION_ID, "correlationId"},      \
        {KERNEL_FIELD_NAME, "name"}, {KERNEL_FIELD_GRID_X, "gridX"},                               \
        {KERNEL_FIELD_GRID_Y, "gridY"}, {KERNEL_FIELD_GRID_Z, "gridZ"},                            \
        {KERNEL_FIELD_BLOCK_X, "blockX"}, {KERNEL_FIELD_BLOCK_Y, "blockY"},                        \
        {KERNEL_FIELD_BLOCK_Z, "blockZ"},                                                          \
        {KERNEL_FIELD_REGISTERS_PER_THREAD, "registersPerThread"},                                 \
        {KERNEL_FIELD_STATIC_SHARED_MEMORY, "staticSharedMemory"},                                 \
        {KERNEL_FIELD_DYNAMIC_SHARED_MEMORY, "dynamicSharedMemory"},                               \
        {KERNEL_FIELD_LOCAL_MEMORY_PER_THREAD, "localMemoryPerThread"},                            \
        {KERNEL_FIELD_CLUSTER_X, "clusterX"}, {KERNEL_FIELD_CLUSTER_Y, "clusterY"},                \
        {KERNEL_FIELD_CLUSTER_Z, "clusterZ"}, {KERNEL_FIELD_LAUNCH_TYPE, "launchType"},            \
        {KERNEL_FIELD_IS_DEVICE_LAUNCHED, "isDeviceLaunched"}, {KERNEL_FIELD_GRAPH_ID, "graphId"}, \
    {                                                                                              \
        KERNEL_FIELD_GRAPH_NODE_ID, "graphNodeId"                                                  \
    }

static const struct cuptimon_v2_field kernel[] = {KERNEL_COMMON};
/* Kineto's "queued"/"submitted" args (opt-in: 16 bytes a kernel). */
static const struct cuptimon_v2_field kernel_latency[] = {
    KERNEL_COMMON, {KERNEL_FIELD_QUEUED, "queued"}, {KERNEL_FIELD_SUBMITTED, "submitted"}};

static const struct cuptimon_v2_field memcpy_[] = {
    {MEMCPY_FIELD_KIND, NULL},
    {MEMCPY_FIELD_COPY_KIND, "copyKind"},
    {MEMCPY_FIELD_SRC_KIND, "srcKind"},
    {MEMCPY_FIELD_DST_KIND, "dstKind"},
    {MEMCPY_FIELD_FLAGS, "flags"},
    {MEMCPY_FIELD_BYTES, "bytes"},
    {MEMCPY_FIELD_START, "start"},
    {MEMCPY_FIELD_END, "end"},
    {MEMCPY_FIELD_DEVICE_ID, "deviceId"},
    {MEMCPY_FIELD_CONTEXT_ID, "contextId"},
    {MEMCPY_FIELD_STREAM_ID, "streamId"},
    {MEMCPY_FIELD_CORRELATION_ID, "correlationId"},
    {MEMCPY_FIELD_GRAPH_NODE_ID, "graphNodeId"},
    {MEMCPY_FIELD_GRAPH_ID, "graphId"},
    {MEMCPY_FIELD_COPY_COUNT, "copyCount"},
};

static const struct cuptimon_v2_field memcpy2[] = {
    {MEMCPY2_FIELD_KIND, NULL},
    {MEMCPY2_FIELD_COPY_KIND, "copyKind"},
    {MEMCPY2_FIELD_SRC_KIND, "srcKind"},
    {MEMCPY2_FIELD_DST_KIND, "dstKind"},
    {MEMCPY2_FIELD_FLAGS, "flags"},
    {MEMCPY2_FIELD_BYTES, "bytes"},
    {MEMCPY2_FIELD_START, "start"},
    {MEMCPY2_FIELD_END, "end"},
    {MEMCPY2_FIELD_DEVICE_ID, "deviceId"},
    {MEMCPY2_FIELD_CONTEXT_ID, "contextId"},
    {MEMCPY2_FIELD_STREAM_ID, "streamId"},
    {MEMCPY2_FIELD_SRC_DEVICE_ID, "srcDeviceId"},
    {MEMCPY2_FIELD_SRC_CONTEXT_ID, "srcContextId"},
    {MEMCPY2_FIELD_DST_DEVICE_ID, "dstDeviceId"},
    {MEMCPY2_FIELD_DST_CONTEXT_ID, "dstContextId"},
    {MEMCPY2_FIELD_CORRELATION_ID, "correlationId"},
    {MEMCPY2_FIELD_GRAPH_NODE_ID, "graphNodeId"},
    {MEMCPY2_FIELD_GRAPH_ID, "graphId"},
};

static const struct cuptimon_v2_field memset_[] = {
    {MEMSET_FIELD_KIND, NULL},
    {MEMSET_FIELD_VALUE, "value"},
    {MEMSET_FIELD_BYTES, "bytes"},
    {MEMSET_FIELD_START, "start"},
    {MEMSET_FIELD_END, "end"},
    {MEMSET_FIELD_DEVICE_ID, "deviceId"},
    {MEMSET_FIELD_CONTEXT_ID, "contextId"},
    {MEMSET_FIELD_STREAM_ID, "streamId"},
    {MEMSET_FIELD_CORRELATION_ID, "correlationId"},
    {MEMSET_FIELD_FLAGS, "flags"},
    {MEMSET_FIELD_MEMORY_KIND, "memoryKind"},
    {MEMSET_FIELD_GRAPH_NODE_ID, "graphNodeId"},
    {MEMSET_FIELD_GRAPH_ID, "graphId"},
};

static const struct cuptimon_v2_field api[] = {
    {API_FIELD_KIND, NULL},
    {API_FIELD_CBID, "cbid"},
    {API_FIELD_START, "start"},
    {API_FIELD_END, "end"},
    {API_FIELD_PROCESS_ID, "processId"},
    {API_FIELD_THREAD_ID, "threadId"},
    {API_FIELD_CORRELATION_ID, "correlationId"},
    {API_FIELD_RETURN_VALUE, "returnValue"},
};

static const struct cuptimon_v2_field ext[] = {
    {EXTERNAL_CORRELATION_FIELD_KIND, NULL},
    {EXTERNAL_CORRELATION_FIELD_EXTERNAL_KIND, "externalKind"},
    {EXTERNAL_CORRELATION_FIELD_EXTERNAL_ID, "externalId"},
    {EXTERNAL_CORRELATION_FIELD_CORRELATION_ID, "correlationId"},
};

static const struct cuptimon_v2_field overhead[] = {
    {OVERHEAD_FIELD_KIND, NULL},
    {OVERHEAD_FIELD_OVERHEAD_KIND, "overheadKind"},
    {OVERHEAD_FIELD_PROCESS_ID, "processId"},
    {OVERHEAD_FIELD_THREAD_ID, "threadId"},
    {OVERHEAD_FIELD_START, "start"},
    {OVERHEAD_FIELD_END, "end"},
    {OVERHEAD_FIELD_CORRELATION_ID, "correlationId"},
};

static const struct cuptimon_v2_field cuda_event[] = {
    {CUDA_EVENT_FIELD_KIND, NULL},
    {CUDA_EVENT_FIELD_CORRELATION_ID, "correlationId"},
    {CUDA_EVENT_FIELD_CONTEXT_ID, "contextId"},
    {CUDA_EVENT_FIELD_STREAM_ID, "streamId"},
    {CUDA_EVENT_FIELD_EVENT_ID, "eventId"},
    {CUDA_EVENT_FIELD_DEVICE_ID, "deviceId"},
    {CUDA_EVENT_FIELD_DEVICE_TIMESTAMP, "deviceTimestamp"},
    {CUDA_EVENT_FIELD_CUDA_EVENT_SYNC_ID, "cudaEventSyncId"},
};

static const struct cuptimon_v2_field sync_[] = {
    {SYNCHRONIZATION_FIELD_KIND, NULL},
    {SYNCHRONIZATION_FIELD_TYPE, "type"},
    {SYNCHRONIZATION_FIELD_START, "start"},
    {SYNCHRONIZATION_FIELD_END, "end"},
    {SYNCHRONIZATION_FIELD_CORRELATION_ID, "correlationId"},
    {SYNCHRONIZATION_FIELD_CONTEXT_ID, "contextId"},
    {SYNCHRONIZATION_FIELD_STREAM_ID, "streamId"},
    {SYNCHRONIZATION_FIELD_CUDA_EVENT_ID, "cudaEventId"},
    {SYNCHRONIZATION_FIELD_CUDA_EVENT_SYNC_ID, "cudaEventSyncId"},
    {SYNCHRONIZATION_FIELD_RETURN_VALUE, "returnValue"},
};

static const struct cuptimon_v2_field marker[] = {
    {MARKER_FIELD_KIND, NULL},
    {MARKER_FIELD_FLAGS, "flags"},
    {MARKER_FIELD_TIMESTAMP, "timestamp"},
    {MARKER_FIELD_ID, "id"},
    {MARKER_FIELD_PROCESS_ID, "processId"},
    {MARKER_FIELD_THREAD_ID, "threadId"},
    {MARKER_FIELD_NAME, "name"},
    {MARKER_FIELD_DOMAIN, "domain"},
};

static const struct cuptimon_v2_field marker_data[] = {
    {MARKER_DATA_FIELD_KIND, NULL},
    {MARKER_DATA_FIELD_FLAGS, "flags"},
    {MARKER_DATA_FIELD_ID, "id"},
    {MARKER_DATA_FIELD_PAYLOAD_KIND, "payloadKind"},
    {MARKER_DATA_FIELD_PAYLOAD, "payload"},
    {MARKER_DATA_FIELD_COLOR, "color"},
    {MARKER_DATA_FIELD_CATEGORY, "category"},
    {MARKER_DATA_FIELD_CUPTI_DOMAIN_ID, "cuptiDomainId"},
};

#define SEL(a)                                                                                     \
    do {                                                                                           \
        *n = sizeof(a) / sizeof(a[0]);                                                             \
        return a;                                                                                  \
    } while (0)

const struct cuptimon_v2_field *cuptimon__v2_fields(uint32_t kind, int latency, size_t *n)
{
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        if (latency)
            SEL(kernel_latency);
        SEL(kernel);
    case CUPTI_ACTIVITY_KIND_MEMCPY: SEL(memcpy_);
    case CUPTI_ACTIVITY_KIND_MEMCPY2: SEL(memcpy2);
    case CUPTI_ACTIVITY_KIND_MEMSET: SEL(memset_);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: SEL(api);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: SEL(ext);
    case CUPTI_ACTIVITY_KIND_OVERHEAD: SEL(overhead);
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: SEL(cuda_event);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: SEL(sync_);
    case CUPTI_ACTIVITY_KIND_MARKER: SEL(marker);
    case CUPTI_ACTIVITY_KIND_MARKER_DATA: SEL(marker_data);
    default: *n = 0; return NULL;
    }
}

const char *cuptimon__v2_field_name(uint32_t kind, int id)
{
    size_t n;
    /* The latency selection holds every field of the other. */
    const struct cuptimon_v2_field *f = cuptimon__v2_fields(kind, 1, &n);
    for (size_t i = 0; f && i < n; i++)
        if (f[i].id == id)
            return f[i].name;
    return NULL;
}
