/* Unit tests of the decoder: layouts by CUPTI version, every field of
 * every decoded kind (records built with the real CUDA 13.0 structs),
 * the walker on damaged and random input, the string table, demangling,
 * callback-id names, the clock map, and the real H200 buffers. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti_activity.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include "archive/cbid.h"
#include "archive/decode.h"
#include "cuptimon-proto.h"
#include "archive/demangle.h"
#include "archive/strtab.h"
#include "tests/unit/testlib.h"

#define PTR(v) ((const char *)(uintptr_t)(v))

/* The record sizes the shim announces (client-lib/io.c), as an array. */
static void shim_sizes(uint32_t sizes[CUPTIMON_KIND_SLOTS])
{
    memset(sizes, 0, sizeof(uint32_t) * CUPTIMON_KIND_SLOTS);
    sizes[1] = sizeof(CUpti_ActivityMemcpy6);
    sizes[2] = sizeof(CUpti_ActivityMemset4);
    sizes[3] = sizeof(CUpti_ActivityKernel10);
    sizes[4] = sizeof(CUpti_ActivityAPI);
    sizes[5] = sizeof(CUpti_ActivityAPI);
    sizes[10] = sizeof(CUpti_ActivityKernel10);
    sizes[12] = sizeof(CUpti_ActivityMarker2);
    sizes[13] = sizeof(CUpti_ActivityMarkerData2);
    sizes[17] = sizeof(CUpti_ActivityOverhead3);
    sizes[22] = sizeof(CUpti_ActivityMemcpyPtoP4);
    sizes[36] = sizeof(CUpti_ActivityCudaEvent2);
    sizes[38] = sizeof(CUpti_ActivitySynchronization2);
    sizes[39] = sizeof(CUpti_ActivityExternalCorrelation);
}

static void layout_13(struct cuptimon_layout *l)
{
    uint32_t sizes[CUPTIMON_KIND_SLOTS];
    shim_sizes(sizes);
    ck_assert_int_eq(cuptimon__layout_init(l, 130001, sizes), 0);
}

/* Decodes exactly one record placed at an odd offset of a heap buffer
 * (unaligned on purpose) and checks the walk accounted for all of it. */
static void decode_one(const void *rec, size_t size, struct cuptimon_ev *ev)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st;
    struct cuptimon_walk w;
    uint8_t *buf = malloc(size + 1);

    layout_13(&l);
    memcpy(buf + 1, rec, size);
    memset(&st, 0, sizeof(st));
    memset(ev, 0xa5, sizeof(*ev));
    cuptimon__walk_begin(&w, &l, buf + 1, size, &st);
    ck_assert_int_eq(cuptimon__walk_next(&w, ev), 1);
    struct cuptimon_ev dummy;
    ck_assert_int_eq(cuptimon__walk_next(&w, &dummy), 0);
    ck_assert_uint_eq(st.records, 1);
    ck_assert_uint_eq(st.decoded_bytes, size);
    ck_assert_uint_eq(st.undecodable_bytes, 0);
    free(buf);
}

/* ---- layouts ------------------------------------------------------------ */

START_TEST(layout_table_is_the_13_0_header)
{
    struct cuptimon_layout l;
    uint32_t t[CUPTIMON_KIND_SLOTS];

    ck_assert_int_eq(cuptimon__layout_init(&l, 130001, NULL), 0);
    ck_assert_int_eq(l.version_known, 1);
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 216);
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_KERNEL], 216);
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_MEMCPY], 96);
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_MEMSET], 88);
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_RUNTIME], 40);
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_DRIVER], 40);
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_MEMCPY2], sizeof(CUpti_ActivityMemcpyPtoP4));
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION],
                      sizeof(CUpti_ActivityExternalCorrelation));
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_OVERHEAD], sizeof(CUpti_ActivityOverhead3));
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_CUDA_EVENT], sizeof(CUpti_ActivityCudaEvent2));
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION],
                      sizeof(CUpti_ActivitySynchronization2));
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_MARKER], sizeof(CUpti_ActivityMarker2));
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_MARKER_DATA], sizeof(CUpti_ActivityMarkerData2));
    ck_assert_int_eq(l.state[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], CUPTIMON_KIND_DECODED);
    /* Kinds without a layout here and without an announced size stop a walk. */
    ck_assert_int_eq(l.state[CUPTI_ACTIVITY_KIND_NAME], CUPTIMON_KIND_UNKNOWN);
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_NAME], 0);
    ck_assert_uint_eq(l.size[0], 0);
    for (unsigned k = 0; k < CUPTIMON_KIND_SLOTS; k++)
        ck_assert_uint_eq(l.size[k] % 8, 0);

    /* Every version of the 13.0 release uses the table; 13.1 is another
     * release (Kernel11, the same size), 12.8 another again (Kernel9). */
    ck_assert_int_eq(cuptimon__layout_init(&l, 130000, NULL), 0);
    ck_assert_str_eq(l.release->cuda, "13.0");
    ck_assert_int_eq(cuptimon__layout_init(&l, 130099, NULL), 0);
    ck_assert_str_eq(l.release->cuda, "13.0");
    ck_assert_int_eq(cuptimon__layout_init(&l, 130100, NULL), 0);
    ck_assert_str_eq(l.rec[CUPTI_ACTIVITY_KIND_KERNEL]->name, "CUpti_ActivityKernel11");
    ck_assert_int_eq(cuptimon__layout_init(&l, 26, NULL), 0);
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 208);

    ck_assert_int_eq(cuptimon__layout_table(130001, t), 0);
    ck_assert_uint_eq(t[10], 216);
    ck_assert_uint_eq(t[11], 0);
    ck_assert_int_eq(cuptimon__layout_table(140000, t), -EPROTONOSUPPORT);
    ck_assert_uint_eq(t[10], 0);
    ck_assert_str_eq(cuptimon__kind_name(10), "CONCURRENT_KERNEL");
    ck_assert_ptr_null(cuptimon__kind_name(1000));
}
END_TEST

START_TEST(layout_announced_sizes)
{
    struct cuptimon_layout l;
    uint32_t sizes[CUPTIMON_KIND_SLOTS];

    /* Agreeing sizes, plus a kind not decoded here (NAME, 11) announced. */
    shim_sizes(sizes);
    sizes[CUPTI_ACTIVITY_KIND_NAME] = 24;
    ck_assert_int_eq(cuptimon__layout_init(&l, 130001, sizes), 0);
    ck_assert_int_eq(l.state[CUPTI_ACTIVITY_KIND_NAME], CUPTIMON_KIND_UNSUPPORTED);
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_NAME], 24);

    /* A disagreeing size: unknown layout, walked by the announced size. */
    shim_sizes(sizes);
    sizes[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] = 224;
    ck_assert_int_eq(cuptimon__layout_init(&l, 130001, sizes), 1);
    ck_assert_int_eq(l.state[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], CUPTIMON_KIND_BAD_LAYOUT);
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 224);
    ck_assert_int_eq(l.state[CUPTI_ACTIVITY_KIND_MEMCPY], CUPTIMON_KIND_DECODED);

    /* Absurd announced sizes are never used to walk. */
    shim_sizes(sizes);
    sizes[CUPTI_ACTIVITY_KIND_MEMCPY] = 97;       /* not a multiple of 8 */
    sizes[CUPTI_ACTIVITY_KIND_MEMSET] = 1u << 20; /* too big */
    sizes[CUPTI_ACTIVITY_KIND_STREAM] = 4;        /* too small */
    ck_assert_int_eq(cuptimon__layout_init(&l, 130001, sizes), 1);
    ck_assert_int_eq(l.state[CUPTI_ACTIVITY_KIND_MEMCPY], CUPTIMON_KIND_BAD_LAYOUT);
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_MEMCPY], 0);
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_MEMSET], 0);
    ck_assert_int_eq(l.state[CUPTI_ACTIVITY_KIND_STREAM], CUPTIMON_KIND_UNKNOWN);

    /* Unknown versions decode nothing. */
    shim_sizes(sizes);
    ck_assert_int_eq(cuptimon__layout_init(&l, 120000, sizes), -EPROTONOSUPPORT);
    ck_assert_int_eq(l.version_known, 0);
    ck_assert_int_eq(l.state[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], CUPTIMON_KIND_BAD_VERSION);
    ck_assert_int_eq(cuptimon__layout_init(&l, 140000, NULL), -EPROTONOSUPPORT);
    ck_assert_int_eq(l.state[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], CUPTIMON_KIND_UNKNOWN);
    ck_assert_int_eq(cuptimon__layout_init(&l, 0, NULL), -EPROTONOSUPPORT);
}
END_TEST

/* ---- every field of every kind ----------------------------------------- */

static void fill_kernel(CUpti_ActivityKernel10 *k, CUpti_ActivityKind kind)
{
    memset(k, 0, sizeof(*k));
    k->kind = kind;
    k->cacheConfig.both = 0x21;
    k->sharedMemoryConfig = 3;
    k->registersPerThread = 40;
    k->partitionedGlobalCacheRequested = CUPTI_ACTIVITY_PARTITIONED_GLOBAL_CACHE_CONFIG_ON;
    k->partitionedGlobalCacheExecuted = CUPTI_ACTIVITY_PARTITIONED_GLOBAL_CACHE_CONFIG_OFF;
    k->start = 1796208557090027706ull;
    k->end = 1796208557090028730ull;
    k->completed = 1796208557090028800ull;
    k->deviceId = 3;
    k->contextId = 5;
    k->streamId = 7;
    k->gridX = 11;
    k->gridY = 12;
    k->gridZ = 13;
    k->blockX = 21;
    k->blockY = 22;
    k->blockZ = -23;
    k->staticSharedMemory = 4096;
    k->dynamicSharedMemory = 1024;
    k->localMemoryPerThread = 16;
    k->localMemoryTotal = 65536;
    k->correlationId = 4242;
    k->gridId = -5;
    k->name = PTR(0x5615ff2c56d0ull);
    k->reserved0 = (void *)(uintptr_t)0xdeadbeefull;
    k->queued = 1796208557090000001ull;
    k->submitted = 1796208557090000002ull;
    k->launchType = CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE;
    k->isSharedMemoryCarveoutRequested = 1;
    k->sharedMemoryCarveoutRequested = 50;
    k->padding = 0x77;
    k->sharedMemoryExecuted = 98304;
    k->graphNodeId = 0x123456789abcull;
    k->shmemLimitConfig = CUPTI_FUNC_SHMEM_LIMIT_OPTIN;
    k->graphId = 99;
    k->pAccessPolicyWindow = (CUaccessPolicyWindow *)(uintptr_t)0x7000ull;
    k->channelID = 31;
    k->channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
    k->clusterX = 2;
    k->clusterY = 3;
    k->clusterZ = 4;
    k->clusterSchedulingPolicy = 5;
    k->localMemoryTotal_v2 = 0x100000000ull;
    k->maxPotentialClusterSize = 8;
    k->maxActiveClusters = 9;
    k->isDeviceLaunched = 1;
}

static void check_kernel(const struct cuptimon_ev *ev, CUpti_ActivityKind kind)
{
    ck_assert_uint_eq(ev->type, CUPTIMON_EV_KERNEL);
    ck_assert_uint_eq(ev->cupti_kind, kind);
    ck_assert_uint_eq(ev->u.kernel.cache_config, 0x21);
    ck_assert_uint_eq(ev->u.kernel.shared_memory_config, 3);
    ck_assert_uint_eq(ev->u.kernel.registers_per_thread, 40);
    ck_assert_uint_eq(ev->u.kernel.partitioned_global_cache_requested, 3);
    ck_assert_uint_eq(ev->u.kernel.partitioned_global_cache_executed, 2);
    ck_assert_uint_eq(ev->start, 1796208557090027706ull);
    ck_assert_uint_eq(ev->end, 1796208557090028730ull);
    ck_assert_uint_eq(ev->u.kernel.completed, 1796208557090028800ull);
    ck_assert_uint_eq(ev->device_id, 3);
    ck_assert_uint_eq(ev->context_id, 5);
    ck_assert_uint_eq(ev->stream_id, 7);
    ck_assert_int_eq(ev->u.kernel.grid_x, 11);
    ck_assert_int_eq(ev->u.kernel.grid_y, 12);
    ck_assert_int_eq(ev->u.kernel.grid_z, 13);
    ck_assert_int_eq(ev->u.kernel.block_x, 21);
    ck_assert_int_eq(ev->u.kernel.block_y, 22);
    ck_assert_int_eq(ev->u.kernel.block_z, -23);
    ck_assert_int_eq(ev->u.kernel.static_shared_memory, 4096);
    ck_assert_int_eq(ev->u.kernel.dynamic_shared_memory, 1024);
    ck_assert_uint_eq(ev->u.kernel.local_memory_per_thread, 16);
    ck_assert_uint_eq(ev->u.kernel.local_memory_total, 65536);
    ck_assert_uint_eq(ev->correlation_id, 4242);
    ck_assert_int_eq(ev->u.kernel.grid_id, -5);
    ck_assert_uint_eq(ev->u.kernel.name_ptr, 0x5615ff2c56d0ull);
    ck_assert_uint_eq(ev->u.kernel.queued, 1796208557090000001ull);
    ck_assert_uint_eq(ev->u.kernel.submitted, 1796208557090000002ull);
    ck_assert_uint_eq(ev->u.kernel.launch_type, 1);
    ck_assert_uint_eq(ev->u.kernel.is_shared_memory_carveout_requested, 1);
    ck_assert_uint_eq(ev->u.kernel.shared_memory_carveout_requested, 50);
    ck_assert_uint_eq(ev->u.kernel.shared_memory_executed, 98304);
    ck_assert_uint_eq(ev->graph_node_id, 0x123456789abcull);
    ck_assert_uint_eq(ev->u.kernel.shmem_limit_config, 1);
    ck_assert_uint_eq(ev->graph_id, 99);
    ck_assert_uint_eq(ev->u.kernel.channel_id, 31);
    ck_assert_uint_eq(ev->u.kernel.channel_type, 1);
    ck_assert_uint_eq(ev->u.kernel.cluster_x, 2);
    ck_assert_uint_eq(ev->u.kernel.cluster_y, 3);
    ck_assert_uint_eq(ev->u.kernel.cluster_z, 4);
    ck_assert_uint_eq(ev->u.kernel.cluster_scheduling_policy, 5);
    ck_assert_uint_eq(ev->u.kernel.local_memory_total_v2, 0x100000000ull);
    ck_assert_uint_eq(ev->u.kernel.max_potential_cluster_size, 8);
    ck_assert_uint_eq(ev->u.kernel.max_active_clusters, 9);
    ck_assert_uint_eq(ev->u.kernel.is_device_launched, 1);
}

START_TEST(kernel_fields)
{
    CUpti_ActivityKernel10 k;
    struct cuptimon_ev ev;

    fill_kernel(&k, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    decode_one(&k, sizeof(k), &ev);
    check_kernel(&ev, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    /* The serial KERNEL kind uses the same struct. */
    fill_kernel(&k, CUPTI_ACTIVITY_KIND_KERNEL);
    decode_one(&k, sizeof(k), &ev);
    check_kernel(&ev, CUPTI_ACTIVITY_KIND_KERNEL);
}
END_TEST

START_TEST(memcpy_fields)
{
    CUpti_ActivityMemcpy6 m;
    struct cuptimon_ev ev;

    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    m.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
    m.bytes = 4096;
    m.start = 1000000000001ull;
    m.end = 1000000000999ull;
    m.deviceId = 1;
    m.contextId = 2;
    m.streamId = 13;
    m.correlationId = 77;
    m.runtimeCorrelationId = 78;
    m.reserved0 = (void *)(uintptr_t)0x1234;
    m.graphNodeId = 0xabcdef01ull;
    m.graphId = 6;
    m.channelID = 8;
    m.channelType = CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY;
    m.isDeviceLaunched = 1;
    m.copyCount = 3;
    decode_one(&m, sizeof(m), &ev);
    ck_assert_uint_eq(ev.type, CUPTIMON_EV_MEMCPY);
    ck_assert_uint_eq(ev.cupti_kind, CUPTI_ACTIVITY_KIND_MEMCPY);
    ck_assert_uint_eq(ev.u.memcpy.copy_kind, 2);
    ck_assert_uint_eq(ev.u.memcpy.src_kind, 3);
    ck_assert_uint_eq(ev.u.memcpy.dst_kind, 2);
    ck_assert_uint_eq(ev.u.memcpy.flags, 1);
    ck_assert_uint_eq(ev.u.memcpy.bytes, 4096);
    ck_assert_uint_eq(ev.start, 1000000000001ull);
    ck_assert_uint_eq(ev.end, 1000000000999ull);
    ck_assert_uint_eq(ev.device_id, 1);
    ck_assert_uint_eq(ev.context_id, 2);
    ck_assert_uint_eq(ev.stream_id, 13);
    ck_assert_uint_eq(ev.correlation_id, 77);
    ck_assert_uint_eq(ev.u.memcpy.runtime_correlation_id, 78);
    ck_assert_uint_eq(ev.graph_node_id, 0xabcdef01ull);
    ck_assert_uint_eq(ev.graph_id, 6);
    ck_assert_uint_eq(ev.u.memcpy.channel_id, 8);
    ck_assert_uint_eq(ev.u.memcpy.channel_type, 2);
    ck_assert_uint_eq(ev.u.memcpy.is_device_launched, 1);
    ck_assert_uint_eq(ev.u.memcpy.copy_count, 3);
    /* The peer-to-peer fields stay zero for a plain memcpy. */
    ck_assert_uint_eq(ev.u.memcpy.src_device_id, 0);
    ck_assert_uint_eq(ev.u.memcpy.dst_context_id, 0);
}
END_TEST

START_TEST(memcpy_p2p_fields)
{
    CUpti_ActivityMemcpyPtoP4 m;
    struct cuptimon_ev ev;

    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
    m.flags = 1;
    m.bytes = 1u << 30;
    m.start = 2000;
    m.end = 3000;
    m.deviceId = 4;
    m.contextId = 5;
    m.streamId = 6;
    m.srcDeviceId = 4;
    m.srcContextId = 5;
    m.dstDeviceId = 7;
    m.dstContextId = 8;
    m.correlationId = 909;
    m.graphNodeId = 12;
    m.graphId = 13;
    m.channelID = 14;
    m.channelType = CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY;
    decode_one(&m, sizeof(m), &ev);
    ck_assert_uint_eq(ev.type, CUPTIMON_EV_MEMCPY_P2P);
    ck_assert_uint_eq(ev.cupti_kind, CUPTI_ACTIVITY_KIND_MEMCPY2);
    ck_assert_uint_eq(ev.u.memcpy.copy_kind, 10);
    ck_assert_uint_eq(ev.u.memcpy.src_kind, 3);
    ck_assert_uint_eq(ev.u.memcpy.dst_kind, 5);
    ck_assert_uint_eq(ev.u.memcpy.flags, 1);
    ck_assert_uint_eq(ev.u.memcpy.bytes, 1u << 30);
    ck_assert_uint_eq(ev.start, 2000);
    ck_assert_uint_eq(ev.end, 3000);
    ck_assert_uint_eq(ev.device_id, 4);
    ck_assert_uint_eq(ev.context_id, 5);
    ck_assert_uint_eq(ev.stream_id, 6);
    ck_assert_uint_eq(ev.u.memcpy.src_device_id, 4);
    ck_assert_uint_eq(ev.u.memcpy.src_context_id, 5);
    ck_assert_uint_eq(ev.u.memcpy.dst_device_id, 7);
    ck_assert_uint_eq(ev.u.memcpy.dst_context_id, 8);
    ck_assert_uint_eq(ev.correlation_id, 909);
    ck_assert_uint_eq(ev.graph_node_id, 12);
    ck_assert_uint_eq(ev.graph_id, 13);
    ck_assert_uint_eq(ev.u.memcpy.channel_id, 14);
    ck_assert_uint_eq(ev.u.memcpy.channel_type, 2);
}
END_TEST

START_TEST(memset_fields)
{
    CUpti_ActivityMemset4 m;
    struct cuptimon_ev ev;

    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.value = 0xabcd;
    m.bytes = 8192;
    m.start = 500;
    m.end = 600;
    m.deviceId = 2;
    m.contextId = 3;
    m.streamId = 21;
    m.correlationId = 31337;
    m.flags = CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.graphNodeId = 41;
    m.graphId = 42;
    m.channelID = 43;
    m.channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
    m.isDeviceLaunched = 1;
    decode_one(&m, sizeof(m), &ev);
    ck_assert_uint_eq(ev.type, CUPTIMON_EV_MEMSET);
    ck_assert_uint_eq(ev.u.memset.value, 0xabcd);
    ck_assert_uint_eq(ev.u.memset.bytes, 8192);
    ck_assert_uint_eq(ev.start, 500);
    ck_assert_uint_eq(ev.end, 600);
    ck_assert_uint_eq(ev.device_id, 2);
    ck_assert_uint_eq(ev.context_id, 3);
    ck_assert_uint_eq(ev.stream_id, 21);
    ck_assert_uint_eq(ev.correlation_id, 31337);
    ck_assert_uint_eq(ev.u.memset.flags, 1);
    ck_assert_uint_eq(ev.u.memset.memory_kind, 3);
    ck_assert_uint_eq(ev.graph_node_id, 41);
    ck_assert_uint_eq(ev.graph_id, 42);
    ck_assert_uint_eq(ev.u.memset.channel_id, 43);
    ck_assert_uint_eq(ev.u.memset.channel_type, 1);
    ck_assert_uint_eq(ev.u.memset.is_device_launched, 1);
}
END_TEST

START_TEST(api_fields)
{
    CUpti_ActivityAPI a;
    struct cuptimon_ev ev;

    memset(&a, 0, sizeof(a));
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = 211;
    a.start = 1796208557426137076ull;
    a.end = 1796208557426175148ull;
    a.processId = 455;
    a.threadId = 3847278592u;
    a.correlationId = 62060;
    a.returnValue = 7;
    decode_one(&a, sizeof(a), &ev);
    ck_assert_uint_eq(ev.type, CUPTIMON_EV_RUNTIME);
    ck_assert_uint_eq(ev.cupti_kind, CUPTI_ACTIVITY_KIND_RUNTIME);
    ck_assert_uint_eq(ev.u.api.cbid, 211);
    ck_assert_uint_eq(ev.start, 1796208557426137076ull);
    ck_assert_uint_eq(ev.end, 1796208557426175148ull);
    ck_assert_uint_eq(ev.u.api.process_id, 455);
    ck_assert_uint_eq(ev.u.api.thread_id, 3847278592u);
    ck_assert_uint_eq(ev.correlation_id, 62060);
    ck_assert_uint_eq(ev.u.api.return_value, 7);

    a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    a.cbid = 719;
    decode_one(&a, sizeof(a), &ev);
    ck_assert_uint_eq(ev.type, CUPTIMON_EV_DRIVER);
    ck_assert_uint_eq(ev.u.api.cbid, 719);
    ck_assert_uint_eq(ev.u.api.thread_id, 3847278592u);
}
END_TEST

START_TEST(external_correlation_fields)
{
    CUpti_ActivityExternalCorrelation x;
    struct cuptimon_ev ev;

    memset(&x, 0, sizeof(x));
    x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1;
    x.externalId = 0x1122334455667788ull;
    x.correlationId = 5150;
    x.reserved = 0xffffffffu;
    decode_one(&x, sizeof(x), &ev);
    ck_assert_uint_eq(ev.type, CUPTIMON_EV_EXTERNAL_CORRELATION);
    ck_assert_uint_eq(ev.u.ext.external_kind, 4);
    ck_assert_uint_eq(ev.u.ext.external_id, 0x1122334455667788ull);
    ck_assert_uint_eq(ev.correlation_id, 5150);
    ck_assert_uint_eq(ev.start, 0);
    ck_assert_uint_eq(ev.end, 0);
}
END_TEST

START_TEST(overhead_fields)
{
    CUpti_ActivityOverhead3 o;
    struct cuptimon_ev ev;

    memset(&o, 0, sizeof(o));
    o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
    o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    o.objectId.pt.processId = 455;
    o.objectId.pt.threadId = 456;
    o.start = 10;
    o.end = 20;
    o.correlationId = 30;
    o.reserved0 = 0xeeee;
    o.overheadData = (void *)(uintptr_t)0x9999;
    decode_one(&o, sizeof(o), &ev);
    ck_assert_uint_eq(ev.type, CUPTIMON_EV_OVERHEAD);
    ck_assert_uint_eq(ev.u.overhead.overhead_kind, 1u << 16);
    ck_assert_uint_eq(ev.u.overhead.object_kind, CUPTI_ACTIVITY_OBJECT_THREAD);
    ck_assert_uint_eq(ev.u.overhead.object_id.a, 455);
    ck_assert_uint_eq(ev.u.overhead.object_id.b, 456);
    ck_assert_uint_eq(ev.start, 10);
    ck_assert_uint_eq(ev.end, 20);
    ck_assert_uint_eq(ev.correlation_id, 30);
    ck_assert_str_eq(cuptimon__overhead_kind_name(ev.u.overhead.overhead_kind), "Buffer Flush");

    o.objectKind = CUPTI_ACTIVITY_OBJECT_STREAM;
    o.objectId.dcs.deviceId = 1;
    o.objectId.dcs.contextId = 2;
    o.objectId.dcs.streamId = 3;
    decode_one(&o, sizeof(o), &ev);
    ck_assert_uint_eq(ev.u.overhead.object_id.a, 1);
    ck_assert_uint_eq(ev.u.overhead.object_id.b, 2);
    ck_assert_uint_eq(ev.u.overhead.object_id.c, 3);
}
END_TEST

START_TEST(cuda_event_fields)
{
    CUpti_ActivityCudaEvent2 e;
    struct cuptimon_ev ev;

    memset(&e, 0, sizeof(e));
    e.kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
    e.correlationId = 101;
    e.contextId = 102;
    e.streamId = 103;
    e.eventId = 104;
    e.pad = 0xffffffffu;
    e.deviceId = 105;
    e.pad2 = 0xffffffffu;
    e.reserved0 = (void *)(uintptr_t)0x5555;
    e.deviceTimestamp = 1796208557000000106ull;
    e.cudaEventSyncId = 107;
    decode_one(&e, sizeof(e), &ev);
    ck_assert_uint_eq(ev.type, CUPTIMON_EV_CUDA_EVENT);
    ck_assert_uint_eq(ev.correlation_id, 101);
    ck_assert_uint_eq(ev.context_id, 102);
    ck_assert_uint_eq(ev.stream_id, 103);
    ck_assert_uint_eq(ev.u.cuda_event.event_id, 104);
    ck_assert_uint_eq(ev.device_id, 105);
    ck_assert_uint_eq(ev.start, 1796208557000000106ull);
    ck_assert_uint_eq(ev.end, 1796208557000000106ull);
    ck_assert_uint_eq(ev.u.cuda_event.cuda_event_sync_id, 107);
}
END_TEST

START_TEST(sync_fields)
{
    CUpti_ActivitySynchronization2 s;
    struct cuptimon_ev ev;

    memset(&s, 0, sizeof(s));
    s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
    s.start = 201;
    s.end = 202;
    s.correlationId = 203;
    s.contextId = 204;
    s.streamId = 205;
    s.cudaEventId = 206;
    s.cudaEventSyncId = 207;
    s.returnValue = 208;
    s.pad = 0xffffffffu;
    decode_one(&s, sizeof(s), &ev);
    ck_assert_uint_eq(ev.type, CUPTIMON_EV_SYNC);
    ck_assert_uint_eq(ev.u.sync.type, 2);
    ck_assert_uint_eq(ev.start, 201);
    ck_assert_uint_eq(ev.end, 202);
    ck_assert_uint_eq(ev.correlation_id, 203);
    ck_assert_uint_eq(ev.context_id, 204);
    ck_assert_uint_eq(ev.stream_id, 205);
    ck_assert_uint_eq(ev.u.sync.cuda_event_id, 206);
    ck_assert_uint_eq(ev.u.sync.cuda_event_sync_id, 207);
    ck_assert_uint_eq(ev.u.sync.return_value, 208);
    ck_assert_str_eq(cuptimon__sync_type_name(ev.u.sync.type), "Stream Wait Event");
}
END_TEST

START_TEST(marker_fields)
{
    CUpti_ActivityMarker2 m;
    CUpti_ActivityMarkerData2 d;
    struct cuptimon_ev ev;

    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MARKER;
    m.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
    m.timestamp = 301;
    m.id = 302;
    m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    m.objectId.pt.processId = 303;
    m.objectId.pt.threadId = 304;
    m.pad = 0xffffffffu;
    m.name = PTR(0x7f0000001000ull);
    m.domain = PTR(0x7f0000002000ull);
    decode_one(&m, sizeof(m), &ev);
    ck_assert_uint_eq(ev.type, CUPTIMON_EV_MARKER);
    ck_assert_uint_eq(ev.u.marker.flags, 2);
    ck_assert_uint_eq(ev.start, 301);
    ck_assert_uint_eq(ev.end, 301);
    ck_assert_uint_eq(ev.u.marker.id, 302);
    ck_assert_uint_eq(ev.u.marker.object_kind, 2);
    ck_assert_uint_eq(ev.u.marker.object_id.a, 303);
    ck_assert_uint_eq(ev.u.marker.object_id.b, 304);
    ck_assert_uint_eq(ev.u.marker.name_ptr, 0x7f0000001000ull);
    ck_assert_uint_eq(ev.u.marker.domain_ptr, 0x7f0000002000ull);

    memset(&d, 0, sizeof(d));
    d.kind = CUPTI_ACTIVITY_KIND_MARKER_DATA;
    d.flags = CUPTI_ACTIVITY_FLAG_MARKER_COLOR_ARGB;
    d.id = 302;
    d.payloadKind = CUPTI_METRIC_VALUE_KIND_UINT64;
    d.payload.metricValueUint64 = 0x0102030405060708ull;
    d.color = 0xff00ff00u;
    d.category = 9;
    d.cuptiDomainId = 10;
    d.padding = 0xffffffffu;
    decode_one(&d, sizeof(d), &ev);
    ck_assert_uint_eq(ev.type, CUPTIMON_EV_MARKER_DATA);
    ck_assert_uint_eq(ev.u.marker_data.flags, 2);
    ck_assert_uint_eq(ev.u.marker_data.id, 302);
    ck_assert_uint_eq(ev.u.marker_data.payload_kind, CUPTI_METRIC_VALUE_KIND_UINT64);
    ck_assert_uint_eq(ev.u.marker_data.payload, 0x0102030405060708ull);
    ck_assert_uint_eq(ev.u.marker_data.color, 0xff00ff00u);
    ck_assert_uint_eq(ev.u.marker_data.category, 9);
    ck_assert_uint_eq(ev.u.marker_data.cupti_domain_id, 10);
    ck_assert_uint_eq(ev.start, 0);
}
END_TEST

START_TEST(decode_record_checks_size)
{
    struct cuptimon_layout l;
    CUpti_ActivityAPI a;
    struct cuptimon_ev ev;
    uint8_t raw[64];

    layout_13(&l);
    memset(&a, 0, sizeof(a));
    a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    a.cbid = 5;
    memcpy(raw, &a, sizeof(a));
    ck_assert_int_eq(cuptimon__decode_record(&l, raw, sizeof(a), &ev), 0);
    ck_assert_uint_eq(ev.u.api.cbid, 5);
    ck_assert_int_eq(cuptimon__decode_record(&l, raw, sizeof(a) - 8, &ev), -EINVAL);
    ck_assert_int_eq(cuptimon__decode_record(&l, raw, 2, &ev), -EINVAL);
    a.kind = CUPTI_ACTIVITY_KIND_NAME;
    memcpy(raw, &a, sizeof(a));
    ck_assert_int_eq(cuptimon__decode_record(&l, raw, sizeof(a), &ev), -EINVAL);
}
END_TEST

/* ---- walker ------------------------------------------------------------- */

struct recbuf {
    uint8_t data[8192];
    size_t len;
};

static void add(struct recbuf *b, const void *rec, size_t size)
{
    ck_assert(b->len + size <= sizeof(b->data));
    memcpy(b->data + b->len, rec, size);
    b->len += size;
}

static void add_api(struct recbuf *b, CUpti_ActivityKind kind, uint32_t corr)
{
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof(a));
    a.kind = kind;
    a.cbid = 211;
    a.start = 1000 + corr;
    a.end = 2000 + corr;
    a.correlationId = corr;
    add(b, &a, sizeof(a));
}

static void add_kernel(struct recbuf *b, uint32_t corr)
{
    CUpti_ActivityKernel10 k;
    fill_kernel(&k, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    k.correlationId = corr;
    add(b, &k, sizeof(k));
}

/* Walks a buffer (copied to an exactly-sized heap block, so that any read
 * past its end is visible to valgrind) and returns the event count. */
static unsigned walk_all(const struct cuptimon_layout *l, const void *data, size_t len,
                         struct cuptimon_decode_stats *st, uint32_t *corrs, unsigned max)
{
    uint8_t *copy = malloc(len ? len : 1);
    struct cuptimon_walk w;
    struct cuptimon_ev ev;
    unsigned n = 0;

    memcpy(copy, data, len);
    memset(st, 0, sizeof(*st));
    cuptimon__walk_begin(&w, l, copy, len, st);
    while (cuptimon__walk_next(&w, &ev)) {
        if (corrs && n < max)
            corrs[n] = ev.correlation_id;
        n++;
    }
    /* Once done, it stays done. */
    ck_assert_int_eq(cuptimon__walk_next(&w, &ev), 0);
    ck_assert_uint_eq(st->decoded_bytes + st->undecodable_bytes, len);
    ck_assert_uint_eq(st->bytes, len);
    free(copy);
    return n;
}

START_TEST(walk_mixed_buffer)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st;
    struct recbuf b = {.len = 0};
    uint32_t corrs[8];

    layout_13(&l);
    add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, 1);
    add_kernel(&b, 1);
    add_api(&b, CUPTI_ACTIVITY_KIND_DRIVER, 2);
    add_kernel(&b, 2);
    ck_assert_uint_eq(walk_all(&l, b.data, b.len, &st, corrs, 8), 4);
    ck_assert_uint_eq(corrs[0], 1);
    ck_assert_uint_eq(corrs[1], 1);
    ck_assert_uint_eq(corrs[2], 2);
    ck_assert_uint_eq(corrs[3], 2);
    ck_assert_uint_eq(st.by_kind[CUPTI_ACTIVITY_KIND_RUNTIME], 1);
    ck_assert_uint_eq(st.by_kind[CUPTI_ACTIVITY_KIND_DRIVER], 1);
    ck_assert_uint_eq(st.by_kind[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 2);
    ck_assert_uint_eq(st.records, 4);
    ck_assert_uint_eq(st.undecodable_bytes, 0);
    ck_assert_uint_eq(st.buffers, 1);

    /* An empty buffer is fine. */
    ck_assert_uint_eq(walk_all(&l, b.data, 0, &st, NULL, 0), 0);
    ck_assert_uint_eq(st.truncated, 0);
}
END_TEST

START_TEST(walk_truncated_last_record)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st;
    struct recbuf b = {.len = 0};

    layout_13(&l);
    add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, 1);
    add_kernel(&b, 2);
    for (size_t cut = 1; cut < 216; cut++) {
        ck_assert_uint_eq(walk_all(&l, b.data, b.len - cut, &st, NULL, 0), 1);
        ck_assert_uint_eq(st.truncated, 1);
        ck_assert_uint_eq(st.undecodable_bytes, 216 - cut);
        ck_assert_uint_eq(st.decoded_bytes, 40);
    }
}
END_TEST

START_TEST(walk_unknown_kind_in_the_middle)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st;
    struct recbuf b = {.len = 0};
    uint32_t bogus[6] = {CUPTI_ACTIVITY_KIND_NAME, 0, 0, 0, 0, 0};
    uint32_t huge[2] = {0xdeadbeefu, 0};

    layout_13(&l);
    add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, 1);
    add(&b, bogus, sizeof(bogus));
    add_kernel(&b, 2);
    /* NAME has no size here: the walk stops, the rest is undecodable. */
    ck_assert_uint_eq(walk_all(&l, b.data, b.len, &st, NULL, 0), 1);
    ck_assert_uint_eq(st.unknown_kind_stops, 1);
    ck_assert_uint_eq(st.unknown_kind_last, CUPTI_ACTIVITY_KIND_NAME);
    ck_assert_uint_eq(st.undecodable_bytes, sizeof(bogus) + 216);

    /* A kind number out of any range stops it too. */
    b.len = 0;
    add(&b, huge, sizeof(huge));
    add_kernel(&b, 3);
    ck_assert_uint_eq(walk_all(&l, b.data, b.len, &st, NULL, 0), 0);
    ck_assert_uint_eq(st.unknown_kind_last, 0xdeadbeefu);
    ck_assert_uint_eq(st.undecodable_bytes, b.len);

    /* Zeroes (CUPTI's unused buffer tail: kind INVALID) stop it. */
    b.len = 0;
    add_kernel(&b, 4);
    memset(b.data + b.len, 0, 64);
    b.len += 64;
    ck_assert_uint_eq(walk_all(&l, b.data, b.len, &st, NULL, 0), 1);
    ck_assert_uint_eq(st.unknown_kind_stops, 1);
    ck_assert_uint_eq(st.undecodable_bytes, 64);
}
END_TEST

START_TEST(walk_unsupported_kind_with_announced_size)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st;
    struct recbuf b = {.len = 0};
    uint32_t sizes[CUPTIMON_KIND_SLOTS];
    uint8_t name_rec[24] = {0};
    uint32_t k = CUPTI_ACTIVITY_KIND_NAME;

    shim_sizes(sizes);
    sizes[CUPTI_ACTIVITY_KIND_NAME] = sizeof(name_rec);
    ck_assert_int_eq(cuptimon__layout_init(&l, 130001, sizes), 0);
    memcpy(name_rec, &k, 4);
    add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, 1);
    add(&b, name_rec, sizeof(name_rec));
    add_kernel(&b, 2);
    ck_assert_uint_eq(walk_all(&l, b.data, b.len, &st, NULL, 0), 2);
    ck_assert_uint_eq(st.skipped_unsupported, 1);
    ck_assert_uint_eq(st.skipped_by_kind[CUPTI_ACTIVITY_KIND_NAME], 1);
    ck_assert_uint_eq(st.undecodable_bytes, sizeof(name_rec));
}
END_TEST

START_TEST(walk_size_map_disagrees)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st;
    struct recbuf b = {.len = 0};
    uint32_t sizes[CUPTIMON_KIND_SLOTS];
    uint8_t big[224];
    uint32_t corrs[8];

    /* The producer says its kernel records are 224 bytes: a different
     * struct.  They are skipped by 224 bytes, never decoded; the API
     * records around them still are. */
    shim_sizes(sizes);
    sizes[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] = sizeof(big);
    ck_assert_int_eq(cuptimon__layout_init(&l, 130001, sizes), 1);
    memset(big, 0x5a, sizeof(big));
    {
        uint32_t k = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        memcpy(big, &k, 4);
    }
    add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, 1);
    add(&b, big, sizeof(big));
    add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, 2);
    add(&b, big, sizeof(big));
    add_api(&b, CUPTI_ACTIVITY_KIND_DRIVER, 3);
    ck_assert_uint_eq(walk_all(&l, b.data, b.len, &st, corrs, 8), 3);
    ck_assert_uint_eq(corrs[0], 1);
    ck_assert_uint_eq(corrs[1], 2);
    ck_assert_uint_eq(corrs[2], 3);
    ck_assert_uint_eq(st.skipped_bad_layout, 2);
    ck_assert_uint_eq(st.skipped_by_kind[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 2);
    ck_assert_uint_eq(st.by_kind[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 0);
    ck_assert_uint_eq(st.undecodable_bytes, 2 * sizeof(big));
}
END_TEST

START_TEST(walk_unknown_version)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st;
    struct recbuf b = {.len = 0};
    uint32_t sizes[CUPTIMON_KIND_SLOTS];

    add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, 1);
    add_kernel(&b, 1);
    add_kernel(&b, 2);

    /* 14.0 with sizes announced: walked over and counted per kind. */
    shim_sizes(sizes);
    ck_assert_int_eq(cuptimon__layout_init(&l, 140000, sizes), -EPROTONOSUPPORT);
    ck_assert_uint_eq(walk_all(&l, b.data, b.len, &st, NULL, 0), 0);
    ck_assert_uint_eq(st.undecodable_bytes, b.len);
    ck_assert_uint_eq(st.skipped_bad_version, 3);
    ck_assert_uint_eq(st.skipped_by_kind[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 2);
    ck_assert_uint_eq(st.skipped_by_kind[CUPTI_ACTIVITY_KIND_RUNTIME], 1);

    /* 12.0 without sizes: nothing is known, the walk stops at once. */
    ck_assert_int_eq(cuptimon__layout_init(&l, 120000, NULL), -EPROTONOSUPPORT);
    ck_assert_uint_eq(walk_all(&l, b.data, b.len, &st, NULL, 0), 0);
    ck_assert_uint_eq(st.undecodable_bytes, b.len);
    ck_assert_uint_eq(st.unknown_kind_stops, 1);
}
END_TEST

/* ---- the per-session check (issue 30) ----------------------------------- */

/* A kernel record of `size` bytes: a 13.0 kernel (so its fields read as
 * one), then zeros: what a libcupti whose kernel struct is longer than the
 * table says writes, as far as the table can tell. */
static void add_long_kernel(struct recbuf *b, uint32_t corr, size_t size)
{
    uint8_t rec[512] = {0};
    CUpti_ActivityKernel10 k;
    ck_assert_uint_le(size, sizeof rec);
    fill_kernel(&k, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    k.correlationId = corr;
    memcpy(rec, &k, sizeof k);
    add(b, rec, size);
}

START_TEST(measured_sizes_confirm_the_table)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st;
    struct recbuf b = {.len = 0};
    uint32_t m[CUPTIMON_KIND_SLOTS] = {0};

    layout_13(&l);
    m[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] = sizeof(CUpti_ActivityKernel10);
    m[CUPTI_ACTIVITY_KIND_RUNTIME] = sizeof(CUpti_ActivityAPI);
    m[CUPTI_ACTIVITY_KIND_NAME] = 24;   /* a kind not decoded here: now walkable */
    m[CUPTI_ACTIVITY_KIND_MEMCPY] = 12; /* not a sane size: ignored */
    ck_assert_int_eq(cuptimon__layout_measured(&l, m), 0);
    ck_assert_uint_eq(l.checked[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 1);
    ck_assert_uint_eq(l.checked[CUPTI_ACTIVITY_KIND_RUNTIME], 1);
    ck_assert_uint_eq(l.checked[CUPTI_ACTIVITY_KIND_MEMCPY], 0);
    ck_assert_uint_eq(l.measured[CUPTI_ACTIVITY_KIND_MEMCPY], 0);
    ck_assert_uint_eq(l.state[CUPTI_ACTIVITY_KIND_MEMCPY], CUPTIMON_KIND_DECODED);
    ck_assert_uint_eq(l.state[CUPTI_ACTIVITY_KIND_NAME], CUPTIMON_KIND_UNSUPPORTED);
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_NAME], 24);
    ck_assert_int_eq(cuptimon__layout_mismatch(&l, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 0);
    add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, 1);
    add_kernel(&b, 1);
    ck_assert_uint_eq(walk_all(&l, b.data, b.len, &st, NULL, 0), 2);
    ck_assert_uint_eq(st.undecodable_bytes, 0);
    ck_assert_int_eq(cuptimon__layout_measured(&l, NULL), 0);
}
END_TEST

/* The table says 216 bytes for 13.0's kernel; the libcupti says 232.  A
 * walk by the table loses step (and says so: a layout mismatch); with the
 * measured size it walks every record, counts the kernels as unknown
 * layout and decodes the rest. */
START_TEST(measured_size_catches_a_wrong_table)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st;
    struct recbuf b = {.len = 0};
    uint32_t m[CUPTIMON_KIND_SLOTS] = {0};
    uint32_t corrs[8];
    char text[200], causes[160];

    add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, 1);
    add_long_kernel(&b, 1, 232);
    add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, 2);
    add_long_kernel(&b, 2, 232);
    add_api(&b, CUPTI_ACTIVITY_KIND_DRIVER, 3);

    /* Unchecked: the walk stops after the first kernel, at the zeros of
     * its tail (no kind there): the cause is named. */
    layout_13(&l);
    walk_all(&l, b.data, b.len, &st, NULL, 0);
    ck_assert_uint_eq(st.unknown_kind_stops, 1);
    ck_assert_uint_eq(st.stops_layout, 1);
    ck_assert_uint_eq(st.stops_unknown_kind + st.stops_unknown_version, 0);
    ck_assert_str_eq(cuptimon__undecodable_causes(&st, causes, sizeof causes), "layout mismatch");

    /* Checked: caught. */
    m[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] = 232;
    m[CUPTI_ACTIVITY_KIND_RUNTIME] = sizeof(CUpti_ActivityAPI);
    ck_assert_int_eq(cuptimon__layout_measured(&l, m), 1);
    ck_assert_int_eq(cuptimon__layout_mismatch(&l, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 1);
    ck_assert_uint_eq(l.state[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], CUPTIMON_KIND_BAD_LAYOUT);
    ck_assert_str_eq(cuptimon__layout_mismatch_text(&l, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, text,
                                                    sizeof text),
                     "layout mismatch: kind 10, table 216 bytes, CUPTI 232 (CONCURRENT_KERNEL: "
                     "CUDA 13.0's CUpti_ActivityKernel10)");
    ck_assert_uint_eq(walk_all(&l, b.data, b.len, &st, corrs, 8), 3);
    ck_assert_uint_eq(corrs[0], 1);
    ck_assert_uint_eq(corrs[1], 2);
    ck_assert_uint_eq(corrs[2], 3);
    ck_assert_uint_eq(st.skipped_bad_layout, 2);
    ck_assert_uint_eq(st.unknown_kind_stops, 0);
    ck_assert_uint_eq(st.undecodable_bytes, 2 * 232);
    ck_assert_str_eq(cuptimon__undecodable_causes(&st, causes, sizeof causes), "layout mismatch");
    /* Applied again (a later RECORD_SIZES): the same. */
    ck_assert_int_eq(cuptimon__layout_measured(&l, m), 1);
    ck_assert_uint_eq(l.size[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 232);
}
END_TEST

/* CUPTI API version 18: CUDA 12.0 and 12.1, or 11.8, told apart by the
 * kernel record (Kernel9 208 bytes, 11.8's Kernel8 200). */
START_TEST(version_18_is_told_apart_by_the_kernel_size)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st;
    struct recbuf b = {.len = 0};
    uint32_t m[CUPTIMON_KIND_SLOTS] = {0};
    char causes[160];

    ck_assert_int_eq(cuptimon__layout_init(&l, 18, NULL), 0);
    ck_assert_str_eq(l.release->cuda, "12.0-12.1");
    m[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] = sizeof(CUpti_ActivityKernel9);
    ck_assert_int_eq(cuptimon__layout_measured(&l, m), 0);
    ck_assert_ptr_nonnull(l.release);
    ck_assert_ptr_null(l.refuted);
    ck_assert_uint_eq(l.checked[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 1);

    ck_assert_int_eq(cuptimon__layout_init(&l, 18, NULL), 0);
    m[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] = sizeof(CUpti_ActivityKernel8);
    m[CUPTI_ACTIVITY_KIND_RUNTIME] = sizeof(CUpti_ActivityAPI);
    cuptimon__layout_measured(&l, m);
    ck_assert_ptr_null(l.release);
    ck_assert_str_eq(l.refuted->shared_with, "11.8");
    ck_assert_int_eq(l.version_known, 0);
    add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, 1);
    add_long_kernel(&b, 1, sizeof(CUpti_ActivityKernel8));
    add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, 2);
    /* Nothing decoded as 12.0's; everything walked by its size. */
    ck_assert_uint_eq(walk_all(&l, b.data, b.len, &st, NULL, 0), 0);
    ck_assert_uint_eq(st.skipped_bad_version, 3);
    ck_assert_uint_eq(st.unknown_kind_stops, 0);
    ck_assert_str_eq(cuptimon__undecodable_causes(&st, causes, sizeof causes), "unknown version");

    /* A version no release shares is never refuted: a mismatch there is
     * a mismatch of one kind. */
    ck_assert_int_eq(cuptimon__layout_init(&l, 19, NULL), 0);
    ck_assert_int_eq(cuptimon__layout_measured(&l, m), 1);
    ck_assert_ptr_nonnull(l.release);
}
END_TEST

/* An unknown version without sizes stops at once, and says why; measured
 * sizes let it walk. */
START_TEST(stop_causes_are_named)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st, sum = {0};
    struct recbuf b = {.len = 0};
    uint32_t m[CUPTIMON_KIND_SLOTS] = {0};
    uint32_t bogus[6] = {CUPTI_ACTIVITY_KIND_NAME, 0, 0, 0, 0, 0};
    char causes[160];

    add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, 1);
    add_kernel(&b, 1);
    ck_assert_int_eq(cuptimon__layout_init(&l, 140000, NULL), -EPROTONOSUPPORT);
    walk_all(&l, b.data, b.len, &st, NULL, 0);
    ck_assert_uint_eq(st.stops_unknown_version, 1);
    ck_assert_str_eq(cuptimon__undecodable_causes(&st, causes, sizeof causes), "unknown version");
    cuptimon__decode_stats_add(&sum, &st);
    m[CUPTI_ACTIVITY_KIND_RUNTIME] = sizeof(CUpti_ActivityAPI);
    m[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] = sizeof(CUpti_ActivityKernel10);
    cuptimon__layout_measured(&l, m);
    walk_all(&l, b.data, b.len, &st, NULL, 0);
    ck_assert_uint_eq(st.unknown_kind_stops, 0);
    ck_assert_uint_eq(st.skipped_bad_version, 2);

    /* A kind number nobody gave a size: "unknown kind". */
    layout_13(&l);
    b.len = 0;
    add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, 1);
    add(&b, bogus, sizeof bogus);
    walk_all(&l, b.data, b.len, &st, NULL, 0);
    ck_assert_uint_eq(st.stops_unknown_kind, 1);
    ck_assert_str_eq(cuptimon__undecodable_causes(&st, causes, sizeof causes), "unknown kind");
    cuptimon__decode_stats_add(&sum, &st);
    ck_assert_uint_eq(sum.stops_unknown_kind, 1);
    ck_assert_uint_eq(sum.stops_unknown_version, 1);
    ck_assert_str_eq(cuptimon__undecodable_causes(&sum, causes, sizeof causes),
                     "unknown version, unknown kind");
    memset(&st, 0, sizeof st);
    ck_assert_str_eq(cuptimon__undecodable_causes(&st, causes, sizeof causes), "none");
    ck_assert_str_eq(cuptimon__undecodable_causes(&sum, causes, 10), "unknown v");
}
END_TEST

/* The measured size as the shim sends it in the string table. */
START_TEST(record_size_strings)
{
    static const char *const bad[] = {
        "",           "224",         "224 ",        " 224 stride",  "0 stride",    "12 stride",
        "224 Stride", "224 stride ", "4104 stride", "99999 stride", "0224 stride", "224  stride",
        "-8 stride",  "224 struct"};
    uint32_t size = 0;
    const char *how = NULL;

    ck_assert_int_eq(cuptimon__record_size_parse("224 stride", 10, &size, &how), 0);
    ck_assert_uint_eq(size, 224);
    ck_assert_str_eq(how, "stride");
    ck_assert_int_eq(cuptimon__record_size_parse("4096 struct_size", 16, &size, &how), 0);
    ck_assert_uint_eq(size, 4096);
    ck_assert_str_eq(how, "struct_size");
    /* Only n bytes are read: no terminator needed, none past n. */
    ck_assert_int_eq(cuptimon__record_size_parse("40 stridexx", 9, &size, &how), 0);
    ck_assert_uint_eq(size, 40);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(cuptimon__record_size_parse(bad[i], strlen(bad[i]), &size, &how) < 0,
                      "\"%s\" was taken", bad[i]);
    /* The key's kind, and keys that are not record sizes. */
    ck_assert_int_eq(CUPTIMON_RECORD_SIZE_KIND(CUPTIMON_RECORD_SIZE_KEY(10)), 10);
    ck_assert_int_eq(CUPTIMON_RECORD_SIZE_KIND(CUPTIMON_RECORD_SIZE_KEY(63)), 63);
    ck_assert_int_eq(CUPTIMON_RECORD_SIZE_KIND(CUPTIMON_DEVICE_KEY(3)), -1);
    ck_assert_int_eq(CUPTIMON_RECORD_SIZE_KIND(CUPTIMON_THREAD_NAME_KEY(10)), -1);
    ck_assert_int_eq(CUPTIMON_RECORD_SIZE_KIND(0xc000000200000040ull), -1);
    ck_assert_int_eq(CUPTIMON_RECORD_SIZE_KIND(0x00007f0012345678ull), -1);
}
END_TEST

START_TEST(walk_bad_times_are_counted)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st;
    struct recbuf b = {.len = 0};
    CUpti_ActivityAPI a;

    layout_13(&l);
    memset(&a, 0, sizeof(a));
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.start = 100;
    a.end = 50;
    add(&b, &a, sizeof(a));
    ck_assert_uint_eq(walk_all(&l, b.data, b.len, &st, NULL, 0), 1);
    ck_assert_uint_eq(st.bad_times, 1);
}
END_TEST

/* xorshift64*: a fixed, portable sequence. */
static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

START_TEST(walk_random_bytes)
{
    static const uint32_t kinds[] = {1, 2, 3, 4, 5, 10, 12, 13, 17, 22, 36, 38, 39, 11, 0, 64, 7};
    struct cuptimon_layout l13, l14, lbad;
    uint32_t sizes[CUPTIMON_KIND_SLOTS];
    uint64_t total_rec = 0;

    layout_13(&l13);
    shim_sizes(sizes);
    ck_assert_int_eq(cuptimon__layout_init(&l14, 140000, sizes), -EPROTONOSUPPORT);
    sizes[10] = 8; /* disagrees, tiny */
    sizes[11] = 24;
    ck_assert_int_eq(cuptimon__layout_init(&lbad, 130001, sizes), 1);

    rng_state = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 4000; i++) {
        size_t len = (size_t)(rnd() % 4097);
        uint8_t *buf = malloc(len ? len : 1);
        struct cuptimon_decode_stats st;
        const struct cuptimon_layout *l = i % 3 == 0 ? &l13 : i % 3 == 1 ? &l14 : &lbad;

        for (size_t j = 0; j < len; j++)
            buf[j] = (uint8_t)rnd();
        /* Half the buffers get plausible kinds at plausible offsets, so that
         * the decoders (not just the kind check) see garbage fields. */
        if (i % 2 == 0) {
            for (size_t off = 0; off + 4 <= len; off += 8 * (1 + rnd() % 30)) {
                uint32_t k = kinds[rnd() % (sizeof(kinds) / sizeof(kinds[0]))];
                memcpy(buf + off, &k, 4);
            }
        }
        total_rec += walk_all(l, buf, len, &st, NULL, 0);
        free(buf);
    }
    /* Something was decoded (the structured half), and every byte was
     * accounted for (checked in walk_all). */
    ck_assert_uint_gt(total_rec, 0);
}
END_TEST

START_TEST(walk_structured_random_records)
{
    /* Valid sequences of records of every decoded kind with random field
     * bytes: every record decodes, nothing is left over. */
    static const uint32_t kinds[] = {1, 2, 3, 4, 5, 10, 12, 13, 17, 22, 36, 38, 39};
    struct cuptimon_layout l;

    layout_13(&l);
    rng_state = 42;
    for (int i = 0; i < 500; i++) {
        uint8_t buf[16384];
        size_t len = 0;
        unsigned n = 0;
        struct cuptimon_decode_stats st;
        for (;;) {
            uint32_t k = kinds[rnd() % (sizeof(kinds) / sizeof(kinds[0]))];
            size_t sz = l.size[k];
            if (len + sz > sizeof(buf))
                break;
            for (size_t j = 0; j < sz; j++)
                buf[len + j] = (uint8_t)rnd();
            memcpy(buf + len, &k, 4);
            len += sz;
            n++;
            if (rnd() % 40 == 0)
                break;
        }
        ck_assert_uint_eq(walk_all(&l, buf, len, &st, NULL, 0), n);
        ck_assert_uint_eq(st.undecodable_bytes, 0);
    }
}
END_TEST

/* ---- clock, range ------------------------------------------------------- */

START_TEST(clock_map_and_range)
{
    struct cuptimon_clock id = {1000, 1000};
    struct cuptimon_clock shift = {1000, 5000};
    struct cuptimon_clock back = {5000, 1000};
    struct cuptimon_ev ev;

    ck_assert_uint_eq(cuptimon__clock_map(&id, 1796208557090027706ull), 1796208557090027706ull);
    ck_assert_uint_eq(cuptimon__clock_map(&shift, 1500), 5500);
    ck_assert_uint_eq(cuptimon__clock_map(&back, 5500), 1500);
    ck_assert_uint_eq(cuptimon__clock_map(&shift, 0), 0);
    ck_assert_uint_eq(cuptimon__clock_map(NULL, 77), 77);

    memset(&ev, 0, sizeof(ev));
    ev.type = CUPTIMON_EV_KERNEL;
    ev.start = 100;
    ev.end = 200;
    ck_assert_int_eq(cuptimon__ev_in_range(&ev, NULL, 0, 0), 1);
    ck_assert_int_eq(cuptimon__ev_in_range(&ev, NULL, 150, 0), 1);
    ck_assert_int_eq(cuptimon__ev_in_range(&ev, NULL, 200, 0), 1);
    ck_assert_int_eq(cuptimon__ev_in_range(&ev, NULL, 201, 0), 0);
    ck_assert_int_eq(cuptimon__ev_in_range(&ev, NULL, 0, 100), 0);
    ck_assert_int_eq(cuptimon__ev_in_range(&ev, NULL, 0, 101), 1);
    ck_assert_int_eq(cuptimon__ev_in_range(&ev, &shift, 4100, 4201), 1);
    ck_assert_int_eq(cuptimon__ev_in_range(&ev, &shift, 4201, 0), 0);
    /* No time of its own: always kept. */
    ev.type = CUPTIMON_EV_EXTERNAL_CORRELATION;
    ev.start = ev.end = 0;
    ck_assert_int_eq(cuptimon__ev_in_range(&ev, NULL, 500, 600), 1);
}
END_TEST

/* ---- strtab --------------------------------------------------------------- */

START_TEST(strtab_basics)
{
    struct cuptimon_strtab *t;
    struct cuptimon_strtab_stats st;
    size_t len = 0;
    uint64_t e0;
    char buf[64];

    ck_assert_int_eq(cuptimon__strtab_new(NULL, &t), 0);
    ck_assert_ptr_null(cuptimon__strtab_get(t, 0x1000, NULL));
    ck_assert_int_eq(cuptimon__strtab_put(t, 0x1000, "_Z5scaleILi2EEvPfi", 18), 0);
    ck_assert_str_eq(cuptimon__strtab_get(t, 0x1000, &len), "_Z5scaleILi2EEvPfi");
    ck_assert_uint_eq(len, 18);
    /* Not NUL-terminated input is copied and terminated. */
    memcpy(buf, "abcdef", 6);
    ck_assert_int_eq(cuptimon__strtab_put(t, 0x2000, buf, 3), 0);
    ck_assert_str_eq(cuptimon__strtab_get(t, 0x2000, NULL), "abc");
    /* Same string again: no change, no epoch bump. */
    e0 = cuptimon__strtab_epoch(t);
    ck_assert_int_eq(cuptimon__strtab_put(t, 0x2000, "abc", 3), 0);
    ck_assert_uint_eq(cuptimon__strtab_epoch(t), e0);
    /* A re-used address gets the new string, and the epoch moves. */
    ck_assert_int_eq(cuptimon__strtab_put(t, 0x2000, "xyz!", 4), 0);
    ck_assert_str_eq(cuptimon__strtab_get(t, 0x2000, &len), "xyz!");
    ck_assert_uint_eq(len, 4);
    ck_assert_uint_gt(cuptimon__strtab_epoch(t), e0);
    /* Pointer 0 is refused; empty strings are fine. */
    ck_assert_int_eq(cuptimon__strtab_put(t, 0, "x", 1), -EINVAL);
    ck_assert_int_eq(cuptimon__strtab_put(t, 0x3000, "", 0), 0);
    ck_assert_str_eq(cuptimon__strtab_get(t, 0x3000, NULL), "");
    ck_assert_int_eq(cuptimon__strtab_put_cb(t, 0x4000, "cb", 2), 0);
    ck_assert_str_eq(cuptimon__strtab_get(t, 0x4000, NULL), "cb");
    cuptimon__strtab_stats(t, &st);
    ck_assert_uint_eq(st.entries, 4);
    ck_assert_uint_eq(st.replaced, 1);
    ck_assert_uint_eq(st.refused, 1);
    ck_assert_uint_eq(st.bytes, 18 + 4 + 0 + 2);
    cuptimon__strtab_free(t);
    cuptimon__strtab_free(NULL);
}
END_TEST

START_TEST(strtab_many_and_limits)
{
    struct cuptimon_strtab *t;
    struct cuptimon_strtab_limits lim = {.max_entries = 1000, .max_bytes = 20000, .max_len = 100};
    struct cuptimon_strtab_stats st;
    char name[64], big[200];

    ck_assert_int_eq(cuptimon__strtab_new(NULL, &t), 0);
    /* Pointer-like keys (aligned, clustered) across several growths. */
    for (uint64_t i = 0; i < 100000; i++) {
        int n = snprintf(name, sizeof(name), "kernel_%llu", (unsigned long long)i);
        ck_assert_int_eq(cuptimon__strtab_put(t, 0x5615ff000000ull + i * 16, name, (size_t)n), 0);
    }
    for (uint64_t i = 0; i < 100000; i += 997) {
        snprintf(name, sizeof(name), "kernel_%llu", (unsigned long long)i);
        ck_assert_str_eq(cuptimon__strtab_get(t, 0x5615ff000000ull + i * 16, NULL), name);
    }
    ck_assert_ptr_null(cuptimon__strtab_get(t, 0x5615ff000008ull, NULL));
    cuptimon__strtab_free(t);

    ck_assert_int_eq(cuptimon__strtab_new(&lim, &t), 0);
    memset(big, 'x', sizeof(big));
    ck_assert_int_eq(cuptimon__strtab_put(t, 1, big, 101), -E2BIG);
    ck_assert_int_eq(cuptimon__strtab_put(t, 1, big, 100), 0);
    for (uint64_t i = 2; i <= 1000; i++)
        ck_assert_int_eq(cuptimon__strtab_put(t, i, big, 10), 0);
    ck_assert_int_eq(cuptimon__strtab_put(t, 5000, big, 1), -E2BIG); /* entries */
    cuptimon__strtab_stats(t, &st);
    ck_assert_uint_eq(st.entries, 1000);
    ck_assert_uint_eq(st.refused, 2);
    cuptimon__strtab_free(t);

    lim.max_entries = 0;
    lim.max_bytes = 250;
    ck_assert_int_eq(cuptimon__strtab_new(&lim, &t), 0);
    ck_assert_int_eq(cuptimon__strtab_put(t, 1, big, 100), 0);
    ck_assert_int_eq(cuptimon__strtab_put(t, 2, big, 100), 0);
    ck_assert_int_eq(cuptimon__strtab_put(t, 3, big, 100), -E2BIG); /* bytes */
    ck_assert_int_eq(cuptimon__strtab_put(t, 2, big, 60), 0);       /* replace, smaller */
    ck_assert_int_eq(cuptimon__strtab_put(t, 3, big, 50), 0);
    cuptimon__strtab_free(t);
}
END_TEST

/* ---- demangling ---------------------------------------------------------- */

START_TEST(demangle_cached)
{
    struct cuptimon_demangler *d;
    struct cuptimon_demangle_stats st;
    const char *a, *b;

    ck_assert_int_eq(cuptimon__demangler_new(0, &d), 0);
    a = cuptimon__demangle(d, "_Z5scaleILi2EEvPfi");
    ck_assert_str_eq(a, "void scale<2>(float*, int)");
    ck_assert_str_eq(cuptimon__demangle(d, "_Z5scaleILi3EEvPfi"), "void scale<3>(float*, int)");
    ck_assert_str_eq(cuptimon__demangle(d, "_ZN2ns7add_oneEPfi"), "ns::add_one(float*, int)");
    b = cuptimon__demangle(d, "_Z5scaleILi2EEvPfi");
    ck_assert_ptr_eq(a, b); /* from the cache */
    /* Names that do not demangle stay as they are. */
    ck_assert_str_eq(cuptimon__demangle(d, "my_c_kernel"), "my_c_kernel");
    ck_assert_str_eq(cuptimon__demangle(d, "_Z"), "_Z");
    ck_assert_str_eq(cuptimon__demangle(d, "_ZZZZ garbage"), "_ZZZZ garbage");
    ck_assert_str_eq(cuptimon__demangle(d, ""), "");
    ck_assert_ptr_null(cuptimon__demangle(d, NULL));
    cuptimon__demangler_stats(d, &st);
    ck_assert_uint_eq(st.hits, 1);
    ck_assert_uint_eq(st.misses, 7);
    ck_assert_uint_eq(st.entries, 7);
    cuptimon__demangler_free(d);
}
END_TEST

START_TEST(demangle_full_cache)
{
    struct cuptimon_demangler *d;
    struct cuptimon_demangle_stats st;
    char name[64];

    ck_assert_int_eq(cuptimon__demangler_new(4, &d), 0);
    for (int i = 0; i < 50; i++) {
        snprintf(name, sizeof(name), "_Z%dk%dv", i < 10 ? 2 : 3, i);
        const char *r = cuptimon__demangle(d, name);
        ck_assert_ptr_nonnull(r);
    }
    ck_assert_str_eq(cuptimon__demangle(d, "_Z5scaleILi2EEvPfi"), "void scale<2>(float*, int)");
    ck_assert_str_eq(cuptimon__demangle(d, "plain"), "plain");
    cuptimon__demangler_stats(d, &st);
    ck_assert_uint_eq(st.entries, 4);
    ck_assert_uint_gt(st.uncached, 40);
    cuptimon__demangler_free(d);
}
END_TEST

/* ---- callback ids ---------------------------------------------------------- */

START_TEST(cbid_names)
{
    ck_assert_str_eq(cuptimon__cbid_runtime_name(211), "cudaLaunchKernel");
    ck_assert_str_eq(cuptimon__cbid_runtime_full_name(211), "cudaLaunchKernel_v7000");
    ck_assert_str_eq(cuptimon__cbid_runtime_name(1), "cudaDriverGetVersion");
    ck_assert_str_eq(cuptimon__cbid_runtime_full_name(1), "cudaDriverGetVersion_v3020");
    ck_assert_str_eq(cuptimon__cbid_runtime_name(41), "cudaMemcpyAsync");
    ck_assert_str_eq(cuptimon__cbid_runtime_name(51), "cudaMemsetAsync");
    ck_assert_str_eq(cuptimon__cbid_driver_name(719), "cuKernelGetName");
    ck_assert_str_eq(cuptimon__cbid_driver_name(1), "cuInit");
    ck_assert_str_eq(cuptimon__cbid_driver_name(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2),
                     "cuMemcpyDtoH");
    ck_assert_str_eq(cuptimon__cbid_driver_full_name(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2),
                     "cuMemcpyDtoH_v2");
    ck_assert_str_eq(cuptimon__cbid_driver_name(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel),
                     "cuLaunchKernel");
    ck_assert_ptr_null(cuptimon__cbid_runtime_name(0));
    /* The table is committed (archive/cbid-names.c), not generated from the
     * headers this test is built with: ids past its end are unknown.
     * tests/unit/cbid-names.sh compares it with the installed headers. */
    ck_assert_ptr_null(cuptimon__cbid_runtime_name(cuptimon__cbid_runtime_count));
    ck_assert_ptr_null(cuptimon__cbid_runtime_name(0xffffffffu));
    ck_assert_ptr_null(cuptimon__cbid_driver_name(cuptimon__cbid_driver_count + 5));
    /* A display name is the full name less exactly one trailing _vNNNN
     * (cudaStreamGetCaptureInfo_v2_v11030 -> cudaStreamGetCaptureInfo_v2,
     * which is the API's real name). */
    for (unsigned i = 1; i < cuptimon__cbid_runtime_count; i++) {
        const char *f = cuptimon__cbid_runtime_full_name(i), *n = cuptimon__cbid_runtime_name(i);
        if (f == NULL) {
            ck_assert_ptr_null(n);
            continue;
        }
        size_t fl = strlen(f), nl = strlen(n);
        ck_assert_msg(strncmp(f, n, nl) == 0, "%s / %s", f, n);
        if (nl < fl) {
            ck_assert_msg(f[nl] == '_' && f[nl + 1] == 'v' && f[nl + 2] >= '0' && f[nl + 2] <= '9',
                          "%s / %s", f, n);
            for (size_t j = nl + 2; j < fl; j++)
                ck_assert_msg(f[j] >= '0' && f[j] <= '9', "%s / %s", f, n);
        }
    }
    ck_assert_str_eq(
        cuptimon__cbid_runtime_name(CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_v11030),
        "cudaStreamGetCaptureInfo_v2");
}
END_TEST

/* ---- the real H200 buffers ------------------------------------------------ */

struct real_counts {
    uint64_t kind[CUPTIMON_KIND_SLOTS];
    uint64_t name_ptrs[8];
    unsigned nptrs;
    uint64_t ptr_by_grid[3]; /* grid 64, 32, 128 */
    uint64_t kmin, kmax;
};

static void decode_real(const char *file, struct real_counts *rc, int check_ptrs)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st;
    struct cuptimon_walk w;
    struct cuptimon_ev ev;
    size_t len;
    uint8_t *buf = cuptimon__test_load_real(file, &len);

    layout_13(&l);
    memset(&st, 0, sizeof(st));
    cuptimon__walk_begin(&w, &l, buf, len, &st);
    while (cuptimon__walk_next(&w, &ev)) {
        rc->kind[ev.cupti_kind]++;
        ck_assert_uint_ge(ev.end, ev.start);
        if (ev.type != CUPTIMON_EV_KERNEL)
            continue;
        if (rc->kmin == 0 || ev.start < rc->kmin)
            rc->kmin = ev.start;
        if (ev.end > rc->kmax)
            rc->kmax = ev.end;
        ck_assert_uint_eq(ev.u.kernel.grid_y, 1);
        ck_assert_uint_eq(ev.u.kernel.block_z, 1);
        if (!check_ptrs)
            continue;
        unsigned i;
        for (i = 0; i < rc->nptrs; i++)
            if (rc->name_ptrs[i] == ev.u.kernel.name_ptr)
                break;
        if (i == rc->nptrs) {
            ck_assert_uint_lt(rc->nptrs, 8);
            rc->name_ptrs[rc->nptrs++] = ev.u.kernel.name_ptr;
        }
        /* dump.cu.txt launches scale<2> with 64x256, scale<3> with 32x128,
         * add_one with 128x256: the grid tells which name a pointer is. */
        int g = ev.u.kernel.grid_x == 64 ? 0 : ev.u.kernel.grid_x == 32 ? 1 : 2;
        if (g == 2)
            ck_assert_int_eq(ev.u.kernel.grid_x, 128);
        ck_assert_int_eq(ev.u.kernel.block_x, g == 1 ? 128 : 256);
        if (rc->ptr_by_grid[g] == 0)
            rc->ptr_by_grid[g] = ev.u.kernel.name_ptr;
        ck_assert_uint_eq(rc->ptr_by_grid[g], ev.u.kernel.name_ptr);
    }
    ck_assert_uint_eq(st.undecodable_bytes, 0);
    ck_assert_uint_eq(st.decoded_bytes, len);
    free(buf);
}

/* The device walk (what the live aggregates read, issue 49) gives, of the
 * real H200 buffers, exactly the full walk's kernels, copies and memsets, in
 * order, with the fields it promises equal to the full decode's (and the
 * rest of the event untouched), and the same counts but bad_times. */
START_TEST(walk_device_matches_full)
{
    static const char *files[] = {"phase0-buf0.bin.zst", "phase0-buf3.bin.zst"};
    struct cuptimon_layout l;

    layout_13(&l);
    for (int i = 0; i < 2; i++) {
        size_t len;
        uint8_t *buf = cuptimon__test_load_real(files[i], &len);
        struct cuptimon_decode_stats sf, sd;
        struct cuptimon_walk wf, wd;
        struct cuptimon_ev ef, ed;
        unsigned kernels = 0, copies = 0, memsets = 0;

        memset(&sf, 0, sizeof(sf));
        memset(&sd, 0, sizeof(sd));
        cuptimon__walk_begin(&wf, &l, buf, len, &sf);
        cuptimon__walk_begin_device(&wd, &l, buf, len, &sd);
        while (cuptimon__walk_next(&wf, &ef)) {
            if (ef.type != CUPTIMON_EV_KERNEL && ef.type != CUPTIMON_EV_MEMCPY &&
                ef.type != CUPTIMON_EV_MEMCPY_P2P && ef.type != CUPTIMON_EV_MEMSET)
                continue;
            memset(&ed, 0xa5, sizeof(ed)); /* what it does not write stays */
            ck_assert_int_eq(cuptimon__walk_next(&wd, &ed), 1);
            ck_assert_uint_eq(ed.type, ef.type);
            ck_assert_uint_eq(ed.cupti_kind, ef.cupti_kind);
            ck_assert_uint_eq(ed.start, ef.start);
            ck_assert_uint_eq(ed.end, ef.end);
            ck_assert_uint_eq(ed.device_id, ef.device_id);
            ck_assert_uint_eq(ed.correlation_id, 0xa5a5a5a5u);
            if (ef.type == CUPTIMON_EV_KERNEL) {
                ck_assert_uint_eq(ed.u.kernel.name_ptr, ef.u.kernel.name_ptr);
                ck_assert_uint_ne(ed.u.kernel.name_ptr, 0);
                kernels++;
            } else if (ef.type == CUPTIMON_EV_MEMSET) {
                ck_assert_uint_eq(ed.u.memset.bytes, ef.u.memset.bytes);
                memsets++;
            } else {
                ck_assert_uint_eq(ed.u.memcpy.bytes, ef.u.memcpy.bytes);
                ck_assert_uint_eq(ed.u.memcpy.copy_kind, ef.u.memcpy.copy_kind);
                copies++;
            }
        }
        ck_assert_int_eq(cuptimon__walk_next(&wd, &ed), 0);
        ck_assert_uint_gt(kernels, 0);
        ck_assert_uint_gt(copies + memsets, 0);
        sf.bad_times = sd.bad_times = 0;
        ck_assert_int_eq(memcmp(&sf, &sd, sizeof(sf)), 0);
        free(buf);
    }
}
END_TEST

/* cuptimon's own NCCL records walk whatever the producer's CUPTI is, between
 * CUPTI's records; a damaged one is counted and stepped over, not decoded. */
START_TEST(walk_nccl_records)
{
    struct cuptimon_layout l;
    layout_13(&l);
    uint8_t buf[3 * CUPTIMON_NCCL_REC_SIZE];
    struct cuptimon_nccl_rec r = {.what = CUPTIMON_NCCL_COLL,
                                  .seq = 7,
                                  .host_start = 100,
                                  .host_stop = 150,
                                  .host_end = 300,
                                  .tid = 9,
                                  .root = -1};
    memcpy(r.func, "AllReduce", 9);
    cuptimon__nccl_rec_encode(buf, &r);
    cuptimon__nccl_rec_encode(buf + CUPTIMON_NCCL_REC_SIZE, &r);
    buf[CUPTIMON_NCCL_REC_SIZE + 4] = 99; /* damaged */
    r.what = CUPTIMON_NCCL_P2P;
    r.host_end = 0; /* not completed: ends when enqueued */
    cuptimon__nccl_rec_encode(buf + 2 * CUPTIMON_NCCL_REC_SIZE, &r);
    struct cuptimon_decode_stats st;
    memset(&st, 0, sizeof st);
    struct cuptimon_walk w;
    struct cuptimon_ev ev;
    cuptimon__walk_begin(&w, &l, buf, sizeof buf, &st);
    ck_assert_int_eq(cuptimon__walk_next(&w, &ev), 1);
    ck_assert_int_eq(ev.type, CUPTIMON_EV_NCCL);
    ck_assert(ev.start == 100 && ev.end == 300 && ev.u.nccl.tid == 9 &&
              ev.u.nccl.what == CUPTIMON_NCCL_COLL && ev.u.nccl.raw == buf);
    ck_assert_int_eq(cuptimon__walk_next(&w, &ev), 1);
    ck_assert(ev.u.nccl.what == CUPTIMON_NCCL_P2P && ev.end == 150);
    ck_assert_int_eq(cuptimon__walk_next(&w, &ev), 0);
    ck_assert(st.nccl == 2 && st.nccl_bad == 1 && st.records == 2);
    ck_assert_uint_eq(st.decoded_bytes + st.undecodable_bytes, sizeof buf);
    /* A buffer cut inside a record. */
    memset(&st, 0, sizeof st);
    cuptimon__walk_begin(&w, &l, buf, CUPTIMON_NCCL_REC_SIZE - 8, &st);
    ck_assert_int_eq(cuptimon__walk_next(&w, &ev), 0);
    ck_assert_uint_eq(st.truncated, 1);
}
END_TEST

START_TEST(real_phase0)
{
    static const char *files[] = {"phase0-buf0.bin.zst", "phase0-buf1.bin.zst",
                                  "phase0-buf2.bin.zst", "phase0-buf3.bin.zst"};
    struct real_counts rc;
    struct cuptimon_strtab *t;
    struct cuptimon_demangler *d;
    static const char *mangled[3] = {"_Z5scaleILi2EEvPfi", "_Z5scaleILi3EEvPfi",
                                     "_ZN2ns7add_oneEPfi"};
    static const char *want[3] = {"void scale<2>(float*, int)", "void scale<3>(float*, int)",
                                  "ns::add_one(float*, int)"};

    memset(&rc, 0, sizeof(rc));
    for (int i = 0; i < 4; i++)
        decode_real(files[i], &rc, 1);
    ck_assert_uint_eq(rc.kind[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 60000);
    ck_assert_uint_eq(rc.kind[CUPTI_ACTIVITY_KIND_MEMCPY], 1200);
    ck_assert_uint_eq(rc.kind[CUPTI_ACTIVITY_KIND_MEMSET], 858);
    ck_assert_uint_eq(rc.kind[CUPTI_ACTIVITY_KIND_RUNTIME], 0);
    ck_assert_uint_eq(rc.kmin, 1796208557090027706ull);
    ck_assert_uint_le(rc.kmax, 1796208557424219761ull);
    ck_assert_uint_gt(rc.kmax, 1796208557424219761ull - 100000);
    ck_assert_uint_eq(rc.nptrs, 3);

    /* The shim's string table would hold the three names: every kernel's
     * pointer maps and demangles as the README says. */
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &t), 0);
    ck_assert_int_eq(cuptimon__demangler_new(0, &d), 0);
    for (int g = 0; g < 3; g++)
        ck_assert_int_eq(cuptimon__strtab_put(t, rc.ptr_by_grid[g], mangled[g], strlen(mangled[g])),
                         0);
    for (unsigned i = 0; i < rc.nptrs; i++) {
        const char *s = cuptimon__strtab_get(t, rc.name_ptrs[i], NULL);
        ck_assert_ptr_nonnull(s);
    }
    for (int g = 0; g < 3; g++)
        ck_assert_str_eq(cuptimon__demangle(d, cuptimon__strtab_get(t, rc.ptr_by_grid[g], NULL)),
                         want[g]);
    cuptimon__demangler_free(d);
    cuptimon__strtab_free(t);
}
END_TEST

START_TEST(real_phase1)
{
    struct real_counts rc;

    memset(&rc, 0, sizeof(rc));
    decode_real("phase1-buf4.bin.zst", &rc, 1);
    decode_real("phase1-buf5.bin.zst", &rc, 1);
    ck_assert_uint_eq(rc.kind[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 27909);
    ck_assert_uint_eq(rc.kind[CUPTI_ACTIVITY_KIND_MEMCPY], 559);
    ck_assert_uint_eq(rc.kind[CUPTI_ACTIVITY_KIND_MEMSET], 399);
    ck_assert_uint_eq(rc.kind[CUPTI_ACTIVITY_KIND_DRIVER], 27910);
    ck_assert_uint_eq(rc.kind[CUPTI_ACTIVITY_KIND_RUNTIME], 28867);
    ck_assert_uint_eq(rc.nptrs, 3);
    ck_assert_uint_gt(rc.kmin, 1796208557424219761ull);
}
END_TEST

START_TEST(real_phase1_correlation)
{
    /* Each kernel's correlation id is its cudaLaunchKernel's; each memcpy
     * its cudaMemcpyAsync's; each memset its cudaMemsetAsync's. */
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st;
    struct cuptimon_walk w;
    struct cuptimon_ev ev;
    size_t len;
    uint8_t *buf = cuptimon__test_load_real("phase1-buf4.bin.zst", &len);
    uint32_t *cbid_of = calloc(1u << 20, sizeof(uint32_t));
    uint32_t base = 0;
    uint64_t matched = 0, gpu = 0;

    layout_13(&l);
    memset(&st, 0, sizeof(st));
    cuptimon__walk_begin(&w, &l, buf, len, &st);
    while (cuptimon__walk_next(&w, &ev)) {
        if (ev.type == CUPTIMON_EV_RUNTIME) {
            if (base == 0)
                base = ev.correlation_id;
            ck_assert_uint_ge(ev.correlation_id, base);
            ck_assert_uint_lt(ev.correlation_id - base, 1u << 20);
            cbid_of[ev.correlation_id - base] = ev.u.api.cbid;
        }
    }
    cuptimon__walk_begin(&w, &l, buf, len, &st);
    while (cuptimon__walk_next(&w, &ev)) {
        uint32_t want;
        if (ev.type == CUPTIMON_EV_KERNEL)
            want = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
        else if (ev.type == CUPTIMON_EV_MEMCPY)
            want = CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020;
        else if (ev.type == CUPTIMON_EV_MEMSET)
            want = CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020;
        else
            continue;
        gpu++;
        if (ev.correlation_id >= base && ev.correlation_id - base < (1u << 20) &&
            cbid_of[ev.correlation_id - base] != 0) {
            ck_assert_uint_eq(cbid_of[ev.correlation_id - base], want);
            matched++;
        }
    }
    /* All but the GPU work launched before the buffer began match. */
    ck_assert_uint_gt(matched, gpu - 10);
    free(cbid_of);
    free(buf);
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("decode");
    TCase *t = tcase_create("decode");

    tcase_set_timeout(t, 120);
    tcase_add_test(t, layout_table_is_the_13_0_header);
    tcase_add_test(t, layout_announced_sizes);
    tcase_add_test(t, kernel_fields);
    tcase_add_test(t, memcpy_fields);
    tcase_add_test(t, memcpy_p2p_fields);
    tcase_add_test(t, memset_fields);
    tcase_add_test(t, api_fields);
    tcase_add_test(t, external_correlation_fields);
    tcase_add_test(t, overhead_fields);
    tcase_add_test(t, cuda_event_fields);
    tcase_add_test(t, sync_fields);
    tcase_add_test(t, marker_fields);
    tcase_add_test(t, decode_record_checks_size);
    tcase_add_test(t, walk_mixed_buffer);
    tcase_add_test(t, walk_truncated_last_record);
    tcase_add_test(t, walk_unknown_kind_in_the_middle);
    tcase_add_test(t, walk_unsupported_kind_with_announced_size);
    tcase_add_test(t, walk_size_map_disagrees);
    tcase_add_test(t, walk_unknown_version);
    tcase_add_test(t, measured_sizes_confirm_the_table);
    tcase_add_test(t, measured_size_catches_a_wrong_table);
    tcase_add_test(t, version_18_is_told_apart_by_the_kernel_size);
    tcase_add_test(t, stop_causes_are_named);
    tcase_add_test(t, record_size_strings);
    tcase_add_test(t, walk_bad_times_are_counted);
    tcase_add_test(t, walk_random_bytes);
    tcase_add_test(t, walk_structured_random_records);
    tcase_add_test(t, clock_map_and_range);
    tcase_add_test(t, strtab_basics);
    tcase_add_test(t, strtab_many_and_limits);
    tcase_add_test(t, demangle_cached);
    tcase_add_test(t, demangle_full_cache);
    tcase_add_test(t, cbid_names);
    tcase_add_test(t, real_phase0);
    tcase_add_test(t, walk_device_matches_full);
    tcase_add_test(t, walk_nccl_records);
    tcase_add_test(t, real_phase1);
    tcase_add_test(t, real_phase1_correlation);
    suite_add_tcase(s, t);
    return s;
}
