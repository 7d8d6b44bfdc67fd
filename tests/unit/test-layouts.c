/* Unit tests of the CUPTI layout table (proto/layouts.c): every struct
 * version in it against the compiler's offsetof/sizeof of the installed
 * CUDA headers (cupti_activity.h, cupti_activity_deprecated.h), or, for
 * versions newer than those headers, of the test double's transcription of
 * NVIDIA's reference (tests/fakecupti/cupti-future.h); which struct each
 * release uses; and the decoder reading every field through the table of
 * each version from records whose every byte differs, so that a field read
 * at a wrong offset or into the wrong event member shows. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti_activity.h>
#include <cupti_activity_deprecated.h>

#include <json-c/json.h>

#include "archive/decode.h"
#include "tests/unit/testlib.h"
#include "cupti-future.h"
#include "layouts.h"

/* ---- what the headers say --------------------------------------------- */

/* The members each struct version has, among those the table describes
 * (the rest of a version's table entry must be absent: width 0). */
/* The tables keep their hand layout (one entry per line, lists per macro). */
/* clang-format off */
#define HAS_KERNEL9(X)                                                                          \
    X(cacheConfig) X(sharedMemoryConfig) X(registersPerThread)                                  \
    X(partitionedGlobalCacheRequested) X(partitionedGlobalCacheExecuted) X(start) X(end)        \
    X(completed) X(deviceId) X(contextId) X(streamId) X(gridX) X(gridY) X(gridZ) X(blockX)       \
    X(blockY) X(blockZ) X(staticSharedMemory) X(dynamicSharedMemory) X(localMemoryPerThread)    \
    X(localMemoryTotal) X(correlationId) X(gridId) X(name) X(queued) X(submitted) X(launchType) \
    X(isSharedMemoryCarveoutRequested) X(sharedMemoryCarveoutRequested)                         \
    X(sharedMemoryExecuted) X(graphNodeId) X(shmemLimitConfig) X(graphId) X(channelID)          \
    X(channelType) X(clusterX) X(clusterY) X(clusterZ) X(clusterSchedulingPolicy)               \
    X(localMemoryTotal_v2) X(maxPotentialClusterSize) X(maxActiveClusters)
#define HAS_KERNEL10(X) HAS_KERNEL9(X) X(isDeviceLaunched)
#define HAS_KERNEL11(X) HAS_KERNEL10(X) X(priority)
#define HAS_KERNEL12(X) HAS_KERNEL11(X) X(executionModel)
#define HAS_KERNEL13(X) HAS_KERNEL12(X) X(sourceGraphId) X(sourceGraphNodeId)
#define HAS_MEMCPY5(X)                                                                          \
    X(copyKind) X(srcKind) X(dstKind) X(flags) X(bytes) X(start) X(end) X(deviceId)             \
    X(contextId) X(streamId) X(correlationId) X(runtimeCorrelationId) X(graphNodeId) X(graphId) \
    X(channelID) X(channelType)
#define HAS_MEMCPY6_12(X) HAS_MEMCPY5(X) X(copyCount)
#define HAS_MEMCPY6(X) HAS_MEMCPY6_12(X) X(isDeviceLaunched)
#define HAS_MEMCPY7(X) HAS_MEMCPY6(X) X(sourceGraphId) X(sourceGraphNodeId)
#define HAS_P2P4(X)                                                                             \
    X(copyKind) X(srcKind) X(dstKind) X(flags) X(bytes) X(start) X(end) X(deviceId)             \
    X(contextId) X(streamId) X(srcDeviceId) X(srcContextId) X(dstDeviceId) X(dstContextId)      \
    X(correlationId) X(graphNodeId) X(graphId) X(channelID) X(channelType)
#define HAS_MEMSET4_12(X)                                                                       \
    X(value) X(bytes) X(start) X(end) X(deviceId) X(contextId) X(streamId) X(correlationId)     \
    X(flags) X(memoryKind) X(graphNodeId) X(graphId) X(channelID) X(channelType)
#define HAS_MEMSET4(X) HAS_MEMSET4_12(X) X(isDeviceLaunched)
#define HAS_MEMSET5(X) HAS_MEMSET4(X) X(sourceGraphId) X(sourceGraphNodeId)
#define HAS_API(X) X(cbid) X(start) X(end) X(processId) X(threadId) X(correlationId) X(returnValue)
#define HAS_EXT(X) X(externalKind) X(externalId) X(correlationId)
#define HAS_OVERHEAD(X) X(overheadKind) X(objectKind) X(objectId) X(start) X(end) X(correlationId)
#define HAS_CUDA_EVENT1(X) X(correlationId) X(contextId) X(streamId) X(eventId)
#define HAS_CUDA_EVENT2(X) HAS_CUDA_EVENT1(X) X(deviceId) X(deviceTimestamp) X(cudaEventSyncId)
#define HAS_SYNC1(X)                                                                            \
    X(type) X(start) X(end) X(correlationId) X(contextId) X(streamId) X(cudaEventId)
#define HAS_SYNC2(X) HAS_SYNC1(X) X(cudaEventSyncId) X(returnValue)
#define HAS_MARKER2(X) X(flags) X(timestamp) X(id) X(objectKind) X(objectId) X(name) X(domain)
#define HAS_MARKER_DATA1(X) X(flags) X(id) X(payloadKind) X(payload) X(color) X(category)
#define HAS_MARKER_DATA2(X) HAS_MARKER_DATA1(X) X(cuptiDomainId)
/* clang-format on */

struct expect {
    const char *name; /* the table's name for the version */
    size_t size;
    struct cuptimon_field f[CUPTIMON_FIELDS_MAX];
};

#define AT(P, T, m) [CUPTIMON_##P##_##m] = {offsetof(T, m), sizeof(((T *)0)->m)},
#define EXPECT(table_name, P, T, HAS)                                                              \
    {                                                                                              \
        table_name, sizeof(T),                                                                     \
        {                                                                                          \
            HAS(AT_##P##_##T)                                                                      \
        }                                                                                          \
    }

/* One AT_ wrapper per (prefix, struct) pair, since an X-list passes one
 * argument. */
#define DEF_AT(P, T)                                 /* see uses below */
#define AT_FK_CUpti_ActivityKernel9(m)               AT(FK, CUpti_ActivityKernel9, m)
#define AT_FK_CUpti_ActivityKernel10(m)              AT(FK, CUpti_ActivityKernel10, m)
#define AT_FK_fc_ActivityKernel11(m)                 AT(FK, fc_ActivityKernel11, m)
#define AT_FK_fc_ActivityKernel12(m)                 AT(FK, fc_ActivityKernel12, m)
#define AT_FK_fc_ActivityKernel13(m)                 AT(FK, fc_ActivityKernel13, m)
#define AT_FMC_CUpti_ActivityMemcpy5(m)              AT(FMC, CUpti_ActivityMemcpy5, m)
#define AT_FMC_CUpti_ActivityMemcpy6(m)              AT(FMC, CUpti_ActivityMemcpy6, m)
#define AT_FMC_fc_ActivityMemcpy7(m)                 AT(FMC, fc_ActivityMemcpy7, m)
#define AT_FP2P_CUpti_ActivityMemcpyPtoP4(m)         AT(FP2P, CUpti_ActivityMemcpyPtoP4, m)
#define AT_FMS_CUpti_ActivityMemset4(m)              AT(FMS, CUpti_ActivityMemset4, m)
#define AT_FMS_fc_ActivityMemset5(m)                 AT(FMS, fc_ActivityMemset5, m)
#define AT_FAPI_CUpti_ActivityAPI(m)                 AT(FAPI, CUpti_ActivityAPI, m)
#define AT_FEXT_CUpti_ActivityExternalCorrelation(m) AT(FEXT, CUpti_ActivityExternalCorrelation, m)
#define AT_FOVH_CUpti_ActivityOverhead2(m)           AT(FOVH, CUpti_ActivityOverhead2, m)
#define AT_FOVH_CUpti_ActivityOverhead3(m)           AT(FOVH, CUpti_ActivityOverhead3, m)
#define AT_FEV_CUpti_ActivityCudaEvent(m)            AT(FEV, CUpti_ActivityCudaEvent, m)
#define AT_FEV_CUpti_ActivityCudaEvent2(m)           AT(FEV, CUpti_ActivityCudaEvent2, m)
#define AT_FSYNC_CUpti_ActivitySynchronization(m)    AT(FSYNC, CUpti_ActivitySynchronization, m)
#define AT_FSYNC_CUpti_ActivitySynchronization2(m)   AT(FSYNC, CUpti_ActivitySynchronization2, m)
#define AT_FMK_CUpti_ActivityMarker2(m)              AT(FMK, CUpti_ActivityMarker2, m)
#define AT_FMD_CUpti_ActivityMarkerData(m)           AT(FMD, CUpti_ActivityMarkerData, m)
#define AT_FMD_CUpti_ActivityMarkerData2(m)          AT(FMD, CUpti_ActivityMarkerData2, m)

static const struct expect expected[] = {
    EXPECT("CUpti_ActivityKernel9", FK, CUpti_ActivityKernel9, HAS_KERNEL9),
    EXPECT("CUpti_ActivityKernel10", FK, CUpti_ActivityKernel10, HAS_KERNEL10),
    EXPECT("CUpti_ActivityKernel11", FK, fc_ActivityKernel11, HAS_KERNEL11),
    EXPECT("CUpti_ActivityKernel12", FK, fc_ActivityKernel12, HAS_KERNEL12),
    EXPECT("CUpti_ActivityKernel13", FK, fc_ActivityKernel13, HAS_KERNEL13),
    EXPECT("CUpti_ActivityMemcpy5", FMC, CUpti_ActivityMemcpy5, HAS_MEMCPY5),
    /* 12.x's Memcpy6 is 13.0's without isDeviceLaunched (a pad then). */
    EXPECT("CUpti_ActivityMemcpy6 (12.x)", FMC, CUpti_ActivityMemcpy6, HAS_MEMCPY6_12),
    EXPECT("CUpti_ActivityMemcpy6", FMC, CUpti_ActivityMemcpy6, HAS_MEMCPY6),
    EXPECT("CUpti_ActivityMemcpy7", FMC, fc_ActivityMemcpy7, HAS_MEMCPY7),
    EXPECT("CUpti_ActivityMemcpyPtoP4", FP2P, CUpti_ActivityMemcpyPtoP4, HAS_P2P4),
    EXPECT("CUpti_ActivityMemset4 (12.x)", FMS, CUpti_ActivityMemset4, HAS_MEMSET4_12),
    EXPECT("CUpti_ActivityMemset4", FMS, CUpti_ActivityMemset4, HAS_MEMSET4),
    EXPECT("CUpti_ActivityMemset5", FMS, fc_ActivityMemset5, HAS_MEMSET5),
    EXPECT("CUpti_ActivityAPI", FAPI, CUpti_ActivityAPI, HAS_API),
    EXPECT("CUpti_ActivityExternalCorrelation", FEXT, CUpti_ActivityExternalCorrelation, HAS_EXT),
    EXPECT("CUpti_ActivityOverhead2", FOVH, CUpti_ActivityOverhead2, HAS_OVERHEAD),
    EXPECT("CUpti_ActivityOverhead3", FOVH, CUpti_ActivityOverhead3, HAS_OVERHEAD),
    EXPECT("CUpti_ActivityCudaEvent", FEV, CUpti_ActivityCudaEvent, HAS_CUDA_EVENT1),
    EXPECT("CUpti_ActivityCudaEvent2", FEV, CUpti_ActivityCudaEvent2, HAS_CUDA_EVENT2),
    EXPECT("CUpti_ActivitySynchronization", FSYNC, CUpti_ActivitySynchronization, HAS_SYNC1),
    EXPECT("CUpti_ActivitySynchronization2", FSYNC, CUpti_ActivitySynchronization2, HAS_SYNC2),
    EXPECT("CUpti_ActivityMarker2", FMK, CUpti_ActivityMarker2, HAS_MARKER2),
    EXPECT("CUpti_ActivityMarkerData", FMD, CUpti_ActivityMarkerData, HAS_MARKER_DATA1),
    EXPECT("CUpti_ActivityMarkerData2", FMD, CUpti_ActivityMarkerData2, HAS_MARKER_DATA2),
};

static const struct expect *expect_for(const char *name)
{
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        if (strcmp(expected[i].name, name) == 0)
            return &expected[i];
    return NULL;
}

/* ---- the table against the headers ------------------------------------- */

START_TEST(every_table_entry_matches_its_struct)
{
    unsigned n, checked = 0;
    const struct cuptimon_cupti_release *r = cuptimon__cupti_releases(&n);

    ck_assert_uint_ge(n, 8);
    for (unsigned i = 0; i < n; i++) {
        for (unsigned k = 0; k < CUPTIMON_LAYOUT_KINDS; k++) {
            const struct cuptimon_rec_layout *l = r[i].kinds[k];
            const struct expect *e;
            if (l == NULL)
                continue;
            e = expect_for(l->name);
            ck_assert_msg(e != NULL, "CUDA %s kind %u: %s has no header to check it against",
                          r[i].cuda, k, l->name);
            ck_assert_msg(l->size == e->size, "%s: table size %u, struct %zu", l->name, l->size,
                          e->size);
            for (unsigned f = 0; f < CUPTIMON_FIELDS_MAX; f++) {
                ck_assert_msg(l->f[f].off == e->f[f].off && l->f[f].width == e->f[f].width,
                              "%s field %u: table {%u, %u}, struct {%u, %u}", l->name, f,
                              l->f[f].off, l->f[f].width, e->f[f].off, e->f[f].width);
                /* A field lies inside its record. */
                ck_assert_uint_le(l->f[f].off + l->f[f].width, l->size);
            }
            ck_assert_uint_eq(l->size % 8, 0);
            checked++;
        }
    }
    /* 8 releases x 13 kinds, less 13.5's CUDA event. */
    ck_assert_uint_eq(checked, n * 13 - 1);
}
END_TEST

/* The structs a release uses, as the CUPTI release notes and references
 * name them. */
static const char *kind_struct(uint32_t version, unsigned kind)
{
    const struct cuptimon_cupti_release *r = cuptimon__cupti_release(version);
    ck_assert_msg(r != NULL, "version %u has no release", version);
    return r->kinds[kind] ? r->kinds[kind]->name : "(none)";
}

START_TEST(releases_use_the_documented_structs)
{
    ck_assert_str_eq(kind_struct(19, CUPTIMON_KIND_KERNEL), "CUpti_ActivityKernel9");
    ck_assert_str_eq(kind_struct(19, CUPTIMON_KIND_MEMCPY), "CUpti_ActivityMemcpy5");
    ck_assert_str_eq(kind_struct(21, CUPTIMON_KIND_OVERHEAD), "CUpti_ActivityOverhead2");
    ck_assert_str_eq(kind_struct(22, CUPTIMON_KIND_OVERHEAD), "CUpti_ActivityOverhead3");
    ck_assert_str_eq(kind_struct(24, CUPTIMON_KIND_CUDA_EVENT), "CUpti_ActivityCudaEvent");
    ck_assert_str_eq(kind_struct(26, CUPTIMON_KIND_MEMCPY), "CUpti_ActivityMemcpy6 (12.x)");
    ck_assert_str_eq(kind_struct(26, CUPTIMON_KIND_CUDA_EVENT), "CUpti_ActivityCudaEvent2");
    ck_assert_str_eq(kind_struct(28, CUPTIMON_KIND_SYNCHRONIZATION),
                     "CUpti_ActivitySynchronization2");
    ck_assert_str_eq(kind_struct(28, CUPTIMON_KIND_MARKER_DATA), "CUpti_ActivityMarkerData");
    ck_assert_str_eq(kind_struct(130001, CUPTIMON_KIND_CONCURRENT_KERNEL),
                     "CUpti_ActivityKernel10");
    ck_assert_str_eq(kind_struct(130001, CUPTIMON_KIND_MARKER_DATA), "CUpti_ActivityMarkerData2");
    ck_assert_str_eq(kind_struct(130100, CUPTIMON_KIND_KERNEL), "CUpti_ActivityKernel11");
    ck_assert_str_eq(kind_struct(130200, CUPTIMON_KIND_KERNEL), "CUpti_ActivityKernel11");
    ck_assert_str_eq(kind_struct(130300, CUPTIMON_KIND_KERNEL), "CUpti_ActivityKernel12");
    ck_assert_str_eq(kind_struct(130400, CUPTIMON_KIND_KERNEL), "CUpti_ActivityKernel13");
    ck_assert_str_eq(kind_struct(130400, CUPTIMON_KIND_MEMCPY), "CUpti_ActivityMemcpy7");
    ck_assert_str_eq(kind_struct(130400, CUPTIMON_KIND_MEMSET), "CUpti_ActivityMemset5");
    ck_assert_str_eq(kind_struct(130500, CUPTIMON_KIND_CUDA_EVENT), "(none)");
    ck_assert_str_eq(kind_struct(130500, CUPTIMON_KIND_RUNTIME), "CUpti_ActivityAPI");

    /* CUDA 12.0 and 12.1 report 18, as 11.8 does: the row says so, and
     * the two are told apart by the kernel record (Kernel9 208 bytes,
     * 11.8's Kernel8 200). */
    ck_assert_str_eq(kind_struct(18, CUPTIMON_KIND_CONCURRENT_KERNEL), "CUpti_ActivityKernel9");
    ck_assert_str_eq(kind_struct(18, CUPTIMON_KIND_MEMCPY), "CUpti_ActivityMemcpy5");
    ck_assert_str_eq(cuptimon__cupti_release(18)->cuda, "12.0-12.1");
    ck_assert_str_eq(cuptimon__cupti_release(18)->shared_with, "11.8");
    ck_assert_uint_ne(sizeof(CUpti_ActivityKernel8), sizeof(CUpti_ActivityKernel9));
    ck_assert_ptr_null(cuptimon__cupti_release(19)->shared_with);

    /* Versions no release claims. */
    ck_assert_ptr_null(cuptimon__cupti_release(0));
    ck_assert_ptr_null(cuptimon__cupti_release(17)); /* CUDA 11.6 */
    ck_assert_ptr_null(cuptimon__cupti_release(29));
    ck_assert_ptr_null(cuptimon__cupti_release(120800)); /* not how 12.8 numbers itself */
    ck_assert_ptr_null(cuptimon__cupti_release(130600));
    ck_assert_ptr_null(cuptimon__cupti_release(140000));
}
END_TEST

START_TEST(releases_are_ordered_and_disjoint)
{
    unsigned n;
    const struct cuptimon_cupti_release *r = cuptimon__cupti_releases(&n);

    for (unsigned i = 0; i < n; i++) {
        ck_assert_uint_le(r[i].version_min, r[i].version_max);
        if (i > 0)
            ck_assert_uint_gt(r[i].version_min, r[i - 1].version_max);
        ck_assert_ptr_eq(cuptimon__cupti_release(r[i].version_min), &r[i]);
        ck_assert_ptr_eq(cuptimon__cupti_release(r[i].version_max), &r[i]);
        /* KERNEL and CONCURRENT_KERNEL share one struct; so do the APIs. */
        ck_assert_ptr_eq(r[i].kinds[CUPTIMON_KIND_KERNEL],
                         r[i].kinds[CUPTIMON_KIND_CONCURRENT_KERNEL]);
        ck_assert_ptr_eq(r[i].kinds[CUPTIMON_KIND_RUNTIME], r[i].kinds[CUPTIMON_KIND_DRIVER]);
    }
    ck_assert_ptr_nonnull(strstr(cuptimon__cupti_supported(), "12.0"));
    ck_assert_ptr_nonnull(strstr(cuptimon__cupti_supported(), "13.5"));
}
END_TEST

/* Which entries a header (the installed one, or a header-derived source)
 * confirms: every 12.x-13.3 struct; of 13.4's, none of the new ones. */
START_TEST(unverified_entries_are_marked)
{
    unsigned n;
    const struct cuptimon_cupti_release *r = cuptimon__cupti_releases(&n);

    for (unsigned i = 0; i < n; i++) {
        for (unsigned k = 0; k < CUPTIMON_LAYOUT_KINDS; k++) {
            const struct cuptimon_rec_layout *l = r[i].kinds[k];
            int new13_4;
            if (l == NULL)
                continue;
            new13_4 = strcmp(l->name, "CUpti_ActivityKernel13") == 0 ||
                      strcmp(l->name, "CUpti_ActivityMemcpy7") == 0 ||
                      strcmp(l->name, "CUpti_ActivityMemset5") == 0;
            ck_assert_msg((l->unverified != NULL) == new13_4, "CUDA %s kind %u: %s is %s",
                          r[i].cuda, k, l->name,
                          l->unverified ? "marked unverified" : "not marked unverified");
            if (r[i].version_max < 130400)
                ck_assert_ptr_null(l->unverified);
        }
    }
}
END_TEST

/* ---- the decoder through each version's table --------------------------- */

/* A record of `size` bytes whose byte i is i * 7 + 3 (so no two fields of
 * width 2 or more read alike), with the kind word in front. */
static void pattern(uint8_t *rec, size_t size, uint32_t kind)
{
    for (size_t i = 0; i < size; i++)
        rec[i] = (uint8_t)(i * 7 + 3);
    memcpy(rec, &kind, 4);
}

static uint64_t at(const uint8_t *rec, size_t off, size_t width)
{
    uint64_t v = 0;
    memcpy(&v, rec + off, width); /* little-endian, like the producers */
    return v;
}

#define AT_OF(rec, T, m) at(rec, offsetof(T, m), sizeof(((T *)0)->m))

static void decode_as(uint32_t version, const uint8_t *rec, size_t size, struct cuptimon_ev *ev)
{
    struct cuptimon_layout l;
    uint32_t m[CUPTIMON_KIND_SLOTS];
    ck_assert_int_eq(cuptimon__layout_init(&l, version, NULL), 0);
    /* As from a shim that measured its libcupti: the table's sizes,
     * confirmed (13.4's unverified layouts decode only then). */
    ck_assert_int_eq(cuptimon__layout_table(version, m), 0);
    ck_assert_int_eq(cuptimon__layout_measured(&l, m), 0);
    ck_assert_int_eq(cuptimon__decode_record(&l, rec, size, ev), 0);
}

/* The kernel fields every version has, and the ones added later, read
 * back from where the struct T puts them. */
#define CHECK_KERNEL(T, version)                                                                   \
    do {                                                                                           \
        uint8_t rec[sizeof(T)];                                                                    \
        struct cuptimon_ev ev;                                                                     \
        pattern(rec, sizeof rec, CUPTIMON_KIND_CONCURRENT_KERNEL);                                 \
        decode_as(version, rec, sizeof rec, &ev);                                                  \
        ck_assert_uint_eq(ev.type, CUPTIMON_EV_KERNEL);                                            \
        ck_assert_uint_eq(ev.start, AT_OF(rec, T, start));                                         \
        ck_assert_uint_eq(ev.end, AT_OF(rec, T, end));                                             \
        ck_assert_uint_eq(ev.correlation_id, AT_OF(rec, T, correlationId));                        \
        ck_assert_uint_eq(ev.device_id, AT_OF(rec, T, deviceId));                                  \
        ck_assert_uint_eq(ev.context_id, AT_OF(rec, T, contextId));                                \
        ck_assert_uint_eq(ev.stream_id, AT_OF(rec, T, streamId));                                  \
        ck_assert_uint_eq(ev.graph_id, AT_OF(rec, T, graphId));                                    \
        ck_assert_uint_eq(ev.graph_node_id, AT_OF(rec, T, graphNodeId));                           \
        ck_assert_uint_eq(ev.u.kernel.name_ptr, AT_OF(rec, T, name));                              \
        ck_assert_uint_eq((uint32_t)ev.u.kernel.grid_x, AT_OF(rec, T, gridX));                     \
        ck_assert_uint_eq((uint32_t)ev.u.kernel.grid_y, AT_OF(rec, T, gridY));                     \
        ck_assert_uint_eq((uint32_t)ev.u.kernel.grid_z, AT_OF(rec, T, gridZ));                     \
        ck_assert_uint_eq((uint32_t)ev.u.kernel.block_x, AT_OF(rec, T, blockX));                   \
        ck_assert_uint_eq((uint32_t)ev.u.kernel.block_y, AT_OF(rec, T, blockY));                   \
        ck_assert_uint_eq((uint32_t)ev.u.kernel.block_z, AT_OF(rec, T, blockZ));                   \
        ck_assert_uint_eq(ev.u.kernel.registers_per_thread, AT_OF(rec, T, registersPerThread));    \
        ck_assert_uint_eq((uint32_t)ev.u.kernel.dynamic_shared_memory,                             \
                          AT_OF(rec, T, dynamicSharedMemory));                                     \
        ck_assert_uint_eq((uint32_t)ev.u.kernel.static_shared_memory,                              \
                          AT_OF(rec, T, staticSharedMemory));                                      \
        ck_assert_uint_eq(ev.u.kernel.channel_id, AT_OF(rec, T, channelID));                       \
        ck_assert_uint_eq(ev.u.kernel.cluster_z, AT_OF(rec, T, clusterZ));                         \
        ck_assert_uint_eq(ev.u.kernel.max_active_clusters, AT_OF(rec, T, maxActiveClusters));      \
        ck_assert_uint_eq(ev.u.kernel.local_memory_total_v2, AT_OF(rec, T, localMemoryTotal_v2));  \
        ck_assert_uint_eq((uint64_t)ev.u.kernel.grid_id, AT_OF(rec, T, gridId));                   \
    } while (0)

START_TEST(kernel_records_of_every_version)
{
    CHECK_KERNEL(CUpti_ActivityKernel9, 18); /* CUDA 12.0 and 12.1 */
    CHECK_KERNEL(CUpti_ActivityKernel9, 19);
    CHECK_KERNEL(CUpti_ActivityKernel9, 26);
    CHECK_KERNEL(CUpti_ActivityKernel10, 130001);
    CHECK_KERNEL(fc_ActivityKernel11, 130100);
    CHECK_KERNEL(fc_ActivityKernel12, 130300);
    CHECK_KERNEL(fc_ActivityKernel13, 130400);
    CHECK_KERNEL(fc_ActivityKernel13, 130500);

    /* isDeviceLaunched exists from 13.0 on; 12.x reads it as 0 (the byte
     * there belongs to the next field or padding). */
    {
        uint8_t rec[sizeof(CUpti_ActivityKernel9)];
        struct cuptimon_ev ev;
        pattern(rec, sizeof rec, CUPTIMON_KIND_KERNEL);
        decode_as(26, rec, sizeof rec, &ev);
        ck_assert_uint_eq(ev.u.kernel.is_device_launched, 0);
    }
    {
        uint8_t rec[sizeof(fc_ActivityKernel11)];
        struct cuptimon_ev ev;
        pattern(rec, sizeof rec, CUPTIMON_KIND_KERNEL);
        decode_as(130100, rec, sizeof rec, &ev);
        ck_assert_uint_eq(ev.u.kernel.is_device_launched,
                          AT_OF(rec, fc_ActivityKernel11, isDeviceLaunched));
    }
}
END_TEST

#define CHECK_MEMCPY(T, version)                                                                   \
    do {                                                                                           \
        uint8_t rec[sizeof(T)];                                                                    \
        struct cuptimon_ev ev;                                                                     \
        pattern(rec, sizeof rec, CUPTIMON_KIND_MEMCPY);                                            \
        decode_as(version, rec, sizeof rec, &ev);                                                  \
        ck_assert_uint_eq(ev.type, CUPTIMON_EV_MEMCPY);                                            \
        ck_assert_uint_eq(ev.start, AT_OF(rec, T, start));                                         \
        ck_assert_uint_eq(ev.end, AT_OF(rec, T, end));                                             \
        ck_assert_uint_eq(ev.correlation_id, AT_OF(rec, T, correlationId));                        \
        ck_assert_uint_eq(ev.stream_id, AT_OF(rec, T, streamId));                                  \
        ck_assert_uint_eq(ev.u.memcpy.bytes, AT_OF(rec, T, bytes));                                \
        ck_assert_uint_eq(ev.u.memcpy.copy_kind, AT_OF(rec, T, copyKind));                         \
        ck_assert_uint_eq(ev.u.memcpy.src_kind, AT_OF(rec, T, srcKind));                           \
        ck_assert_uint_eq(ev.u.memcpy.dst_kind, AT_OF(rec, T, dstKind));                           \
        ck_assert_uint_eq(ev.u.memcpy.flags, AT_OF(rec, T, flags));                                \
        ck_assert_uint_eq(ev.u.memcpy.channel_type, AT_OF(rec, T, channelType));                   \
    } while (0)

#define CHECK_MEMSET(T, version)                                                                   \
    do {                                                                                           \
        uint8_t rec[sizeof(T)];                                                                    \
        struct cuptimon_ev ev;                                                                     \
        pattern(rec, sizeof rec, CUPTIMON_KIND_MEMSET);                                            \
        decode_as(version, rec, sizeof rec, &ev);                                                  \
        ck_assert_uint_eq(ev.type, CUPTIMON_EV_MEMSET);                                            \
        ck_assert_uint_eq(ev.start, AT_OF(rec, T, start));                                         \
        ck_assert_uint_eq(ev.correlation_id, AT_OF(rec, T, correlationId));                        \
        ck_assert_uint_eq(ev.stream_id, AT_OF(rec, T, streamId));                                  \
        ck_assert_uint_eq(ev.u.memset.bytes, AT_OF(rec, T, bytes));                                \
        ck_assert_uint_eq(ev.u.memset.value, AT_OF(rec, T, value));                                \
        ck_assert_uint_eq(ev.u.memset.memory_kind, AT_OF(rec, T, memoryKind));                     \
        ck_assert_uint_eq(ev.u.memset.channel_id, AT_OF(rec, T, channelID));                       \
    } while (0)

START_TEST(copy_and_memset_records_of_every_version)
{
    CHECK_MEMCPY(CUpti_ActivityMemcpy5, 18);
    CHECK_MEMCPY(CUpti_ActivityMemcpy5, 19);
    CHECK_MEMCPY(CUpti_ActivityMemcpy6, 26);
    CHECK_MEMCPY(CUpti_ActivityMemcpy6, 130001);
    CHECK_MEMCPY(fc_ActivityMemcpy7, 130400);
    CHECK_MEMSET(CUpti_ActivityMemset4, 19);
    CHECK_MEMSET(CUpti_ActivityMemset4, 130001);
    CHECK_MEMSET(fc_ActivityMemset5, 130500);

    /* copyCount appears in 12.8. */
    {
        uint8_t rec[sizeof(CUpti_ActivityMemcpy6)];
        struct cuptimon_ev ev;
        pattern(rec, sizeof rec, CUPTIMON_KIND_MEMCPY);
        decode_as(26, rec, sizeof rec, &ev);
        ck_assert_uint_eq(ev.u.memcpy.copy_count, AT_OF(rec, CUpti_ActivityMemcpy6, copyCount));
        ck_assert_uint_eq(ev.u.memcpy.is_device_launched, 0);
    }
}
END_TEST

START_TEST(cuda_event_and_sync_records_of_every_version)
{
    uint8_t rec[64];
    struct cuptimon_ev ev;

    /* 12.0-12.6: CudaEvent has no device timestamp: no time of its own. */
    pattern(rec, sizeof(CUpti_ActivityCudaEvent), CUPTIMON_KIND_CUDA_EVENT);
    decode_as(19, rec, sizeof(CUpti_ActivityCudaEvent), &ev);
    ck_assert_uint_eq(ev.type, CUPTIMON_EV_CUDA_EVENT);
    ck_assert_uint_eq(ev.u.cuda_event.event_id, AT_OF(rec, CUpti_ActivityCudaEvent, eventId));
    ck_assert_uint_eq(ev.stream_id, AT_OF(rec, CUpti_ActivityCudaEvent, streamId));
    ck_assert_uint_eq(ev.start, 0);
    ck_assert_uint_eq(ev.device_id, 0);

    pattern(rec, sizeof(CUpti_ActivityCudaEvent2), CUPTIMON_KIND_CUDA_EVENT);
    decode_as(26, rec, sizeof(CUpti_ActivityCudaEvent2), &ev);
    ck_assert_uint_eq(ev.start, AT_OF(rec, CUpti_ActivityCudaEvent2, deviceTimestamp));
    ck_assert_uint_eq(ev.u.cuda_event.cuda_event_sync_id,
                      AT_OF(rec, CUpti_ActivityCudaEvent2, cudaEventSyncId));

    pattern(rec, sizeof(CUpti_ActivitySynchronization), CUPTIMON_KIND_SYNCHRONIZATION);
    decode_as(24, rec, sizeof(CUpti_ActivitySynchronization), &ev);
    ck_assert_uint_eq(ev.type, CUPTIMON_EV_SYNC);
    ck_assert_uint_eq(ev.u.sync.cuda_event_id,
                      AT_OF(rec, CUpti_ActivitySynchronization, cudaEventId));
    ck_assert_uint_eq(ev.u.sync.return_value, 0);

    pattern(rec, sizeof(CUpti_ActivityOverhead2), CUPTIMON_KIND_OVERHEAD);
    decode_as(19, rec, sizeof(CUpti_ActivityOverhead2), &ev);
    ck_assert_uint_eq(ev.u.overhead.object_id.c,
                      at(rec, offsetof(CUpti_ActivityOverhead2, objectId) + 8, 4));
    ck_assert_uint_eq(ev.correlation_id, AT_OF(rec, CUpti_ActivityOverhead2, correlationId));

    pattern(rec, sizeof(CUpti_ActivityMarkerData), CUPTIMON_KIND_MARKER_DATA);
    decode_as(28, rec, sizeof(CUpti_ActivityMarkerData), &ev);
    ck_assert_uint_eq(ev.u.marker_data.category, AT_OF(rec, CUpti_ActivityMarkerData, category));
    ck_assert_uint_eq(ev.u.marker_data.cupti_domain_id, 0);
}
END_TEST

/* A record of the size of another release's struct is not decoded as if
 * it were this release's. */
START_TEST(sizes_of_another_release_are_refused)
{
    struct cuptimon_layout l;
    struct cuptimon_ev ev;
    uint8_t rec[sizeof(fc_ActivityKernel13)];

    pattern(rec, sizeof rec, CUPTIMON_KIND_KERNEL);
    ck_assert_int_eq(cuptimon__layout_init(&l, 26, NULL), 0);
    ck_assert_int_eq(cuptimon__decode_record(&l, rec, sizeof(CUpti_ActivityKernel10), &ev),
                     -EINVAL);
    ck_assert_int_eq(cuptimon__layout_init(&l, 130400, NULL), 0);
    ck_assert_int_eq(cuptimon__decode_record(&l, rec, sizeof(fc_ActivityKernel12), &ev), -EINVAL);
    /* 13.4's kernel layout is unverified: not decoded until the
     * producer's measured size confirms it. */
    ck_assert_uint_eq(l.state[CUPTIMON_KIND_KERNEL], CUPTIMON_KIND_UNCONFIRMED);
    ck_assert_int_eq(cuptimon__decode_record(&l, rec, sizeof rec, &ev), -EINVAL);
    {
        uint32_t m[CUPTIMON_KIND_SLOTS] = {0};
        m[CUPTIMON_KIND_KERNEL] = sizeof rec;
        ck_assert_int_eq(cuptimon__layout_measured(&l, m), 0);
        ck_assert_uint_eq(l.state[CUPTIMON_KIND_KERNEL], CUPTIMON_KIND_DECODED);
        ck_assert_int_eq(cuptimon__decode_record(&l, rec, sizeof rec, &ev), 0);
        /* Measured otherwise: a mismatch, never decoded. */
        ck_assert_int_eq(cuptimon__layout_init(&l, 130400, NULL), 0);
        m[CUPTIMON_KIND_KERNEL] = sizeof rec - 8;
        ck_assert_int_eq(cuptimon__layout_measured(&l, m), 1);
        ck_assert_uint_eq(l.state[CUPTIMON_KIND_KERNEL], CUPTIMON_KIND_BAD_LAYOUT);
    }
}
END_TEST

/* ---- user-defined record layouts (CUPTI 13.2+) -------------------------- */

/* A layout description in the hello's "record_layouts" form for one kind:
 * every field of the record type, packed from byte 4 in reverse list
 * order (so that no table struct has this layout), record size rounded up
 * to 8.  offs[i] receives field i's offset. */
static json_object *packed_kind(unsigned type, unsigned *size, unsigned offs[CUPTIMON_FIELDS_MAX])
{
    unsigned n, off = 4;
    const char *const *names = cuptimon__rec_field_names(type, &n);
    json_object *d = json_object_new_object(), *fields = json_object_new_array();

    for (unsigned j = n; j-- > 0;) {
        unsigned w = cuptimon__rec_field_width(type, j);
        json_object *e = json_object_new_object();
        ck_assert_uint_ne(w, 0);
        json_object_object_add(e, "field", json_object_new_string(names[j]));
        json_object_object_add(e, "offset", json_object_new_int(off));
        json_object_object_add(e, "size", json_object_new_int(w));
        json_object_array_add(fields, e);
        offs[j] = off;
        off += w;
    }
    /* A field this build does not know: ignored, not refused. */
    json_object *e = json_object_new_object();
    json_object_object_add(e, "field", json_object_new_string("someFieldOfCupti14"));
    json_object_object_add(e, "offset", json_object_new_int(999));
    json_object_object_add(e, "size", json_object_new_int(3));
    json_object_array_add(fields, e);
    *size = (off + 7) & ~7u;
    json_object_object_add(d, "size", json_object_new_int(*size));
    json_object_object_add(d, "fields", fields);
    return d;
}

/* Writes value v (its low w bytes) at off. */
static void put(uint8_t *rec, unsigned off, unsigned w, uint64_t v)
{
    memcpy(rec + off, &v, w < 8 ? w : 8);
}

START_TEST(user_defined_layouts_decode_without_a_table)
{
    unsigned ksize, csize, msize, koff[CUPTIMON_FIELDS_MAX], coff[CUPTIMON_FIELDS_MAX],
        moff[CUPTIMON_FIELDS_MAX];
    json_object *rl = json_object_new_object();
    struct cuptimon_layout l, table;
    struct cuptimon_decode_stats st;
    struct cuptimon_walk w;
    struct cuptimon_ev ev;
    uint8_t buf[3 * 512];
    size_t len = 0;
    uint32_t kind;

    json_object_object_add(rl, "3", packed_kind(CUPTIMON_REC_KERNEL, &ksize, koff));
    json_object_object_add(rl, "1", packed_kind(CUPTIMON_REC_MEMCPY, &csize, coff));
    json_object_object_add(rl, "2", packed_kind(CUPTIMON_REC_MEMSET, &msize, moff));
    /* A version released after this build: no table row claims it. */
    ck_assert_int_eq(cuptimon__layout_init_udr(&l, 149900, NULL, rl), 0);
    ck_assert_str_eq(l.udr_error, "");
    ck_assert_uint_eq(l.user_defined, 3);
    ck_assert_int_eq(l.state[CUPTIMON_KIND_KERNEL], CUPTIMON_KIND_DECODED);
    ck_assert_uint_eq(l.size[CUPTIMON_KIND_KERNEL], ksize);

    memset(buf, 0, sizeof buf);
    kind = CUPTIMON_KIND_KERNEL;
    memcpy(buf, &kind, 4);
    put(buf, koff[CUPTIMON_FK_start], 8, 1000);
    put(buf, koff[CUPTIMON_FK_end], 8, 2000);
    put(buf, koff[CUPTIMON_FK_gridX], 4, 11);
    put(buf, koff[CUPTIMON_FK_gridY], 4, 12);
    put(buf, koff[CUPTIMON_FK_gridZ], 4, 13);
    put(buf, koff[CUPTIMON_FK_blockX], 4, 21);
    put(buf, koff[CUPTIMON_FK_blockY], 4, 22);
    put(buf, koff[CUPTIMON_FK_blockZ], 4, 23);
    put(buf, koff[CUPTIMON_FK_streamId], 4, 7);
    put(buf, koff[CUPTIMON_FK_correlationId], 4, 4242);
    put(buf, koff[CUPTIMON_FK_name], 8, 0x7f0012345678ull);
    put(buf, koff[CUPTIMON_FK_registersPerThread], 2, 99);
    len = ksize;
    kind = CUPTIMON_KIND_MEMCPY;
    memcpy(buf + len, &kind, 4);
    put(buf + len, coff[CUPTIMON_FMC_bytes], 8, 1u << 20);
    put(buf + len, coff[CUPTIMON_FMC_copyKind], 1, 2);
    put(buf + len, coff[CUPTIMON_FMC_start], 8, 3000);
    put(buf + len, coff[CUPTIMON_FMC_end], 8, 3500);
    put(buf + len, coff[CUPTIMON_FMC_streamId], 4, 8);
    len += csize;
    kind = CUPTIMON_KIND_MEMSET;
    memcpy(buf + len, &kind, 4);
    put(buf + len, moff[CUPTIMON_FMS_bytes], 8, 4096);
    put(buf + len, moff[CUPTIMON_FMS_value], 4, 0xab);
    put(buf + len, moff[CUPTIMON_FMS_start], 8, 4000);
    put(buf + len, moff[CUPTIMON_FMS_end], 8, 4100);
    len += msize;

    memset(&st, 0, sizeof st);
    cuptimon__walk_begin(&w, &l, buf, len, &st);
    ck_assert_int_eq(cuptimon__walk_next(&w, &ev), 1);
    ck_assert_uint_eq(ev.start, 1000);
    ck_assert_uint_eq(ev.end, 2000);
    ck_assert_int_eq(ev.u.kernel.grid_x, 11);
    ck_assert_int_eq(ev.u.kernel.grid_y, 12);
    ck_assert_int_eq(ev.u.kernel.grid_z, 13);
    ck_assert_int_eq(ev.u.kernel.block_x, 21);
    ck_assert_int_eq(ev.u.kernel.block_y, 22);
    ck_assert_int_eq(ev.u.kernel.block_z, 23);
    ck_assert_uint_eq(ev.stream_id, 7);
    ck_assert_uint_eq(ev.correlation_id, 4242);
    ck_assert_uint_eq(ev.u.kernel.name_ptr, 0x7f0012345678ull);
    ck_assert_uint_eq(ev.u.kernel.registers_per_thread, 99);
    ck_assert_int_eq(cuptimon__walk_next(&w, &ev), 1);
    ck_assert_uint_eq(ev.u.memcpy.bytes, 1u << 20);
    ck_assert_uint_eq(ev.u.memcpy.copy_kind, 2);
    ck_assert_uint_eq(ev.start, 3000);
    ck_assert_uint_eq(ev.stream_id, 8);
    ck_assert_int_eq(cuptimon__walk_next(&w, &ev), 1);
    ck_assert_uint_eq(ev.u.memset.bytes, 4096);
    ck_assert_uint_eq(ev.u.memset.value, 0xab);
    ck_assert_uint_eq(ev.end, 4100);
    ck_assert_int_eq(cuptimon__walk_next(&w, &ev), 0);
    ck_assert_uint_eq(st.records, 3);
    ck_assert_uint_eq(st.undecodable_bytes, 0);

    /* The same buffer through a table (13.4, whose kernel is as long as
     * this packed one would be were it not) decodes none of it: the
     * description is what makes it readable. */
    ck_assert_int_eq(cuptimon__layout_init_udr(&table, 149900, NULL, NULL), -EPROTONOSUPPORT);
    memset(&st, 0, sizeof st);
    cuptimon__walk_begin(&w, &table, buf, len, &st);
    ck_assert_int_eq(cuptimon__walk_next(&w, &ev), 0);
    ck_assert_uint_eq(st.records, 0);
    json_object_put(rl);
}
END_TEST

/* Widths come from the description (CUPTI's v2 layouts say 64-bit
 * correlation and stream ids where the structs have 32); a producer that
 * says "user_defined_records" has no table layout for undescribed kinds;
 * user-defined overhead records' processId/threadId are a thread object. */
START_TEST(user_defined_widths_and_only)
{
    json_object *meta =
        json_tokener_parse("{\"user_defined_records\": true, \"record_layouts\": {"
                           "\"10\": {\"size\": 40, \"fields\": ["
                           "{\"field\": \"correlationId\", \"offset\": 8, \"size\": 8},"
                           "{\"field\": \"streamId\", \"offset\": 16, \"size\": 8},"
                           "{\"field\": \"start\", \"offset\": 24, \"size\": 8},"
                           "{\"field\": \"registersPerThread\", \"offset\": 4, \"size\": 1},"
                           "{\"field\": \"cacheConfig\", \"offset\": 5, \"size\": 1},"
                           "{\"field\": \"end\", \"offset\": 32, \"size\": 8}]},"
                           "\"17\": {\"size\": 32, \"fields\": ["
                           "{\"field\": \"overheadKind\", \"offset\": 4, \"size\": 4},"
                           "{\"field\": \"processId\", \"offset\": 8, \"size\": 4},"
                           "{\"field\": \"threadId\", \"offset\": 16, \"size\": 8},"
                           "{\"field\": \"start\", \"offset\": 24, \"size\": 8}]}}}");
    struct cuptimon_layout l;
    struct cuptimon_decode_stats st;
    struct cuptimon_walk w;
    struct cuptimon_ev ev;
    uint8_t buf[40 + 32 + 40] = {0};
    uint32_t kind = CUPTIMON_KIND_CONCURRENT_KERNEL;

    ck_assert_ptr_nonnull(meta);
    ck_assert_int_eq(cuptimon__layout_init_meta(&l, 130300, NULL, meta), 0);
    ck_assert_str_eq(l.udr_error, "");
    ck_assert_int_eq(l.user_defined_only, 1);
    ck_assert_uint_eq(l.user_defined, 2);
    /* Undescribed kinds have no size, although 13.3's table knows them. */
    ck_assert_int_eq(l.state[CUPTIMON_KIND_MEMCPY], CUPTIMON_KIND_UNKNOWN);
    ck_assert_uint_eq(l.size[CUPTIMON_KIND_MEMCPY], 0);
    memcpy(buf, &kind, 4);
    put(buf, 8, 8, 0x123456789ull); /* a correlation id past 32 bits keeps its low bits */
    put(buf, 16, 8, 7);
    put(buf, 24, 8, 1000);
    put(buf, 32, 8, 2000);
    put(buf, 4, 1, 200);
    kind = CUPTIMON_KIND_OVERHEAD;
    memcpy(buf + 40, &kind, 4);
    put(buf + 40, 4, 4, 1u << 16);
    put(buf + 40, 8, 4, 4321);
    put(buf + 40, 16, 8, 98765);
    put(buf + 40, 24, 8, 5000);
    kind = CUPTIMON_KIND_MEMCPY; /* undescribed: the walk stops */
    memcpy(buf + 72, &kind, 4);
    memset(&st, 0, sizeof st);
    cuptimon__walk_begin(&w, &l, buf, sizeof buf, &st);
    ck_assert_int_eq(cuptimon__walk_next(&w, &ev), 1);
    ck_assert_uint_eq(ev.correlation_id, 0x23456789u);
    ck_assert_uint_eq(ev.stream_id, 7);
    ck_assert_uint_eq(ev.start, 1000);
    ck_assert_uint_eq(ev.end, 2000);
    ck_assert_uint_eq(ev.u.kernel.registers_per_thread, 200);
    ck_assert_int_eq(cuptimon__walk_next(&w, &ev), 1);
    ck_assert_uint_eq(ev.type, CUPTIMON_EV_OVERHEAD);
    ck_assert_uint_eq(ev.u.overhead.object_kind, 2); /* a thread */
    ck_assert_uint_eq(ev.u.overhead.object_id.a, 4321);
    ck_assert_uint_eq(ev.u.overhead.object_id.b, 98765);
    ck_assert_int_eq(cuptimon__walk_next(&w, &ev), 0);
    ck_assert_uint_eq(st.unknown_kind_stops, 1);
    ck_assert_uint_eq(st.undecodable_bytes, 40);

    /* Without the flag, the table still decodes what is not described. */
    json_object_object_del(meta, "user_defined_records");
    ck_assert_int_eq(cuptimon__layout_init_meta(&l, 130300, NULL, meta), 0);
    ck_assert_int_eq(l.user_defined_only, 0);
    ck_assert_int_eq(l.state[CUPTIMON_KIND_MEMCPY], CUPTIMON_KIND_DECODED);
    json_object_put(meta);
}
END_TEST

/* Without record_layouts, cuptimon__layout_init_udr is cuptimon__layout_init. */
START_TEST(no_user_defined_layouts_is_the_table)
{
    struct cuptimon_layout a, b;
    uint32_t v[] = {26, 130001, 130400, 149900};

    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        ck_assert_int_eq(cuptimon__layout_init(&a, v[i], NULL),
                         cuptimon__layout_init_udr(&b, v[i], NULL, NULL));
        ck_assert_mem_eq(a.size, b.size, sizeof a.size);
        ck_assert_mem_eq(a.state, b.state, sizeof a.state);
        ck_assert_mem_eq(a.rec, b.rec, sizeof a.rec);
        ck_assert_uint_eq(b.user_defined, 0);
    }
}
END_TEST

/* Hostile descriptions: each is refused for its kind with a message that
 * names the kind and the field, and that kind is never decoded. */
START_TEST(hostile_user_defined_layouts_are_refused)
{
    static const struct {
        const char *json;
        const char *says; /* in udr_error */
        unsigned kind;
        unsigned walk_size; /* l.size[kind] after the refusal */
    } cases[] = {
        {"{\"3\":{\"size\":64,\"fields\":[{\"field\":\"start\",\"offset\":60,\"size\":8}]}}",
         "kind 3 (KERNEL): field start at offset 60 (8 bytes) is not inside", 3, 64},
        {"{\"3\":{\"size\":64,\"fields\":[{\"field\":\"gridX\",\"offset\":8,\"size\":3}]}}",
         "kind 3 (KERNEL): field gridX is 3 bytes wide; the decoder reads 1, 2, 4 or 8 bytes", 3,
         64},
        {"{\"3\":{\"size\":64,\"fields\":[{\"field\":\"name\",\"offset\":8,\"size\":4}]}}",
         "kind 3 (KERNEL): field name is 4 bytes wide; the decoder reads a name pointer as 8", 3,
         64},
        {"{\"17\":{\"size\":64,\"fields\":[{\"field\":\"objectId\",\"offset\":8,\"size\":8}]}}",
         "kind 17 (OVERHEAD): field objectId is 8 bytes wide; the decoder reads it as 12", 17, 64},
        {"{\"1\":{\"size\":32,\"fields\":[{\"field\":\"bytes\",\"offset\":8,\"size\":8},"
         "{\"field\":\"bytes\",\"offset\":16,\"size\":8}]}}",
         "kind 1 (MEMCPY): field bytes is described twice", 1, 32},
        {"{\"2\":{\"size\":32,\"fields\":[{\"field\":\"bytes\",\"offset\":8,\"size\":8},"
         "{\"field\":\"start\",\"offset\":12,\"size\":8}]}}",
         "kind 2 (MEMSET): field start at offset 12 overlaps field bytes at 8", 2, 32},
        {"{\"10\":{\"size\":32,\"fields\":[{\"field\":\"start\",\"offset\":0,\"size\":8}]}}",
         "kind 10 (CONCURRENT_KERNEL): field start at offset 0", 10, 32},
        {"{\"10\":{\"size\":32,\"fields\":[{\"field\":\"start\",\"offset\":-8,\"size\":8}]}}",
         "kind 10 (CONCURRENT_KERNEL): field start has no valid", 10, 32},
        {"{\"3\":{\"size\":1000000,\"fields\":[]}}", "kind 3 (KERNEL): the record \"size\"", 3, 0},
        /* Not a multiple of 8: the walk would step out of alignment. */
        {"{\"3\":{\"size\":60,\"fields\":[]}}", "kind 3 (KERNEL): the record \"size\"", 3, 0},
        {"{\"3\":{\"size\":\"64\",\"fields\":[]}}", "kind 3 (KERNEL): the record \"size\"", 3, 0},
        {"{\"3\":{\"size\":64}}", "kind 3 (KERNEL): \"fields\" is missing", 3, 64},
        {"{\"3\":{\"size\":64,\"fields\":[7]}}", "kind 3 (KERNEL): field entry 0 has no", 3, 64},
        {"{\"3\":{\"size\":64,\"fields\":[{\"field\":\"name\",\"offset\":4090,\"size\":8}]}}",
         "kind 3 (KERNEL): field name at offset 4090 (8 bytes) is not inside", 3, 64},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct cuptimon_layout l;
        json_object *rl = json_tokener_parse(cases[i].json);
        ck_assert_ptr_nonnull(rl);
        ck_assert_int_eq(cuptimon__layout_init_udr(&l, 149900, NULL, rl), -EPROTONOSUPPORT);
        ck_assert_int_eq(cuptimon__layout_init_udr(&l, 130001, NULL, rl), 1);
        if (strstr(l.udr_error, cases[i].says) == NULL)
            ck_abort_msg("case %zu: \"%s\" does not say \"%s\"", i, l.udr_error, cases[i].says);
        ck_assert_int_eq(l.state[cases[i].kind], CUPTIMON_KIND_BAD_LAYOUT);
        ck_assert_ptr_null(l.rec[cases[i].kind]);
        ck_assert_uint_eq(l.size[cases[i].kind], cases[i].walk_size);
        ck_assert_uint_eq(l.user_defined, 0);
        /* The other kinds keep the table's layouts. */
        ck_assert_int_eq(l.state[CUPTIMON_KIND_RUNTIME], CUPTIMON_KIND_DECODED);
        json_object_put(rl);
    }

    /* A size that disagrees with the announced record_sizes. */
    {
        struct cuptimon_layout l;
        uint32_t sizes[CUPTIMON_KIND_SLOTS] = {[CUPTIMON_KIND_KERNEL] = 216};
        json_object *rl = json_tokener_parse("{\"3\":{\"size\":64,\"fields\":[]}}");
        ck_assert_int_eq(cuptimon__layout_init_udr(&l, 130001, sizes, rl), 1);
        ck_assert_ptr_nonnull(strstr(l.udr_error, "kind 3 (KERNEL): the described record size 64 "
                                                  "is not the announced 216"));
        ck_assert_uint_eq(l.size[CUPTIMON_KIND_KERNEL], 0);
        /* An absurd announced size is no better a match. */
        sizes[CUPTIMON_KIND_KERNEL] = 5;
        ck_assert_int_eq(cuptimon__layout_init_udr(&l, 149900, sizes, rl), -EPROTONOSUPPORT);
        ck_assert_int_eq(l.state[CUPTIMON_KIND_KERNEL], CUPTIMON_KIND_BAD_LAYOUT);
        ck_assert_ptr_nonnull(strstr(l.udr_error, "is not the announced 5"));
        json_object_put(rl);
    }
    /* Not an object, and a key that is not a kind. */
    {
        struct cuptimon_layout l;
        json_object *rl = json_tokener_parse("[1,2]");
        ck_assert_int_eq(cuptimon__layout_init_udr(&l, 130001, NULL, rl), 1);
        ck_assert_ptr_nonnull(strstr(l.udr_error, "record_layouts is not an object"));
        ck_assert_int_eq(l.state[CUPTIMON_KIND_KERNEL], CUPTIMON_KIND_DECODED);
        json_object_put(rl);
        rl = json_tokener_parse("{\"kernel\":{},\"64\":{}}");
        ck_assert_int_eq(cuptimon__layout_init_udr(&l, 130001, NULL, rl), 1);
        ck_assert_ptr_nonnull(strstr(l.udr_error, "is not an activity kind (1..63)"));
        json_object_put(rl);
    }
}
END_TEST

/* Every field the decoder reads has one width the table agrees on, but
 * the fields only user-defined records have (overhead and marker
 * processId/threadId, which CUPTI 13.2+ offers instead of objectId). */
START_TEST(every_field_has_a_width)
{
    for (unsigned t = CUPTIMON_REC_KERNEL; t < CUPTIMON_REC_TYPES; t++) {
        unsigned n;
        const char *const *names = cuptimon__rec_field_names(t, &n);
        ck_assert_ptr_nonnull(names);
        for (unsigned i = 0; i < n; i++) {
            int udr_only =
                (t == CUPTIMON_REC_OVERHEAD || t == CUPTIMON_REC_MARKER) &&
                (strcmp(names[i], "processId") == 0 || strcmp(names[i], "threadId") == 0);
            if ((cuptimon__rec_field_width(t, i) == 0) != udr_only)
                ck_abort_msg("type %u field %s: width %u in the table structs", t, names[i],
                             cuptimon__rec_field_width(t, i));
        }
    }
    ck_assert_uint_eq(cuptimon__rec_type_of_kind(CUPTIMON_KIND_CONCURRENT_KERNEL),
                      CUPTIMON_REC_KERNEL);
    ck_assert_uint_eq(cuptimon__rec_type_of_kind(9), CUPTIMON_REC_NONE);
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("layouts");
    TCase *t = tcase_create("table");
    tcase_add_test(t, every_table_entry_matches_its_struct);
    tcase_add_test(t, releases_use_the_documented_structs);
    tcase_add_test(t, releases_are_ordered_and_disjoint);
    tcase_add_test(t, unverified_entries_are_marked);
    suite_add_tcase(s, t);
    t = tcase_create("decode");
    tcase_add_test(t, kernel_records_of_every_version);
    tcase_add_test(t, copy_and_memset_records_of_every_version);
    tcase_add_test(t, cuda_event_and_sync_records_of_every_version);
    tcase_add_test(t, sizes_of_another_release_are_refused);
    suite_add_tcase(s, t);
    t = tcase_create("user-defined");
    tcase_add_test(t, user_defined_layouts_decode_without_a_table);
    tcase_add_test(t, no_user_defined_layouts_is_the_table);
    tcase_add_test(t, user_defined_widths_and_only);
    tcase_add_test(t, hostile_user_defined_layouts_are_refused);
    tcase_add_test(t, every_field_has_a_width);
    suite_add_tcase(s, t);
    return s;
}
