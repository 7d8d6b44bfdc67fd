/*
 * CUPTI record layouts by release: the data behind layouts.h.
 *
 * Each struct version is a list of {offset, width} per field, in bytes,
 * for a 64-bit producer.  CUPTI grows a record by appending fields (and
 * turning trailing padding into fields), so each version is written as
 * the one before it plus what it added; where that stops being true a
 * version gets its own full list.  The sources are named per entry; the
 * unit test (tests/unit/test-layouts.c) holds every entry against the
 * installed headers with offsetof/sizeof, or, for versions newer than the
 * installed toolkit, against the test double's declarations of them.
 */
#include "config.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "layouts.h"

/* ---- struct versions (from cupti_activity.h / cupti_activity_deprecated.h
 * of CUDA 13.0 unless said otherwise) ----------------------------------- */

/* CUpti_ActivityKernel9: 208 bytes. */
/* The tables keep their hand layout (one entry per line, lists per macro). */
/* clang-format off */
#define F_KERNEL9 \
    [CUPTIMON_FK_cacheConfig] = {4, 1}, \
    [CUPTIMON_FK_sharedMemoryConfig] = {5, 1}, \
    [CUPTIMON_FK_registersPerThread] = {6, 2}, \
    [CUPTIMON_FK_partitionedGlobalCacheRequested] = {8, 4}, \
    [CUPTIMON_FK_partitionedGlobalCacheExecuted] = {12, 4}, \
    [CUPTIMON_FK_start] = {16, 8}, \
    [CUPTIMON_FK_end] = {24, 8}, \
    [CUPTIMON_FK_completed] = {32, 8}, \
    [CUPTIMON_FK_deviceId] = {40, 4}, \
    [CUPTIMON_FK_contextId] = {44, 4}, \
    [CUPTIMON_FK_streamId] = {48, 4}, \
    [CUPTIMON_FK_gridX] = {52, 4}, \
    [CUPTIMON_FK_gridY] = {56, 4}, \
    [CUPTIMON_FK_gridZ] = {60, 4}, \
    [CUPTIMON_FK_blockX] = {64, 4}, \
    [CUPTIMON_FK_blockY] = {68, 4}, \
    [CUPTIMON_FK_blockZ] = {72, 4}, \
    [CUPTIMON_FK_staticSharedMemory] = {76, 4}, \
    [CUPTIMON_FK_dynamicSharedMemory] = {80, 4}, \
    [CUPTIMON_FK_localMemoryPerThread] = {84, 4}, \
    [CUPTIMON_FK_localMemoryTotal] = {88, 4}, \
    [CUPTIMON_FK_correlationId] = {92, 4}, \
    [CUPTIMON_FK_gridId] = {96, 8}, \
    [CUPTIMON_FK_name] = {104, 8}, \
    [CUPTIMON_FK_queued] = {120, 8}, \
    [CUPTIMON_FK_submitted] = {128, 8}, \
    [CUPTIMON_FK_launchType] = {136, 1}, \
    [CUPTIMON_FK_isSharedMemoryCarveoutRequested] = {137, 1}, \
    [CUPTIMON_FK_sharedMemoryCarveoutRequested] = {138, 1}, \
    [CUPTIMON_FK_sharedMemoryExecuted] = {140, 4}, \
    [CUPTIMON_FK_graphNodeId] = {144, 8}, \
    [CUPTIMON_FK_shmemLimitConfig] = {152, 4}, \
    [CUPTIMON_FK_graphId] = {156, 4}, \
    [CUPTIMON_FK_channelID] = {168, 4}, \
    [CUPTIMON_FK_channelType] = {172, 4}, \
    [CUPTIMON_FK_clusterX] = {176, 4}, \
    [CUPTIMON_FK_clusterY] = {180, 4}, \
    [CUPTIMON_FK_clusterZ] = {184, 4}, \
    [CUPTIMON_FK_clusterSchedulingPolicy] = {188, 4}, \
    [CUPTIMON_FK_localMemoryTotal_v2] = {192, 8}, \
    [CUPTIMON_FK_maxPotentialClusterSize] = {200, 4}, \
    [CUPTIMON_FK_maxActiveClusters] = {204, 4}
/* CUpti_ActivityKernel10: 216 bytes, Kernel9 plus what follows. */
#define F_KERNEL10 \
    F_KERNEL9, \
    [CUPTIMON_FK_isDeviceLaunched] = {208, 1}
/* CUpti_ActivityMemcpy5: 88 bytes. */
#define F_MEMCPY5 \
    [CUPTIMON_FMC_copyKind] = {4, 1}, \
    [CUPTIMON_FMC_srcKind] = {5, 1}, \
    [CUPTIMON_FMC_dstKind] = {6, 1}, \
    [CUPTIMON_FMC_flags] = {7, 1}, \
    [CUPTIMON_FMC_bytes] = {8, 8}, \
    [CUPTIMON_FMC_start] = {16, 8}, \
    [CUPTIMON_FMC_end] = {24, 8}, \
    [CUPTIMON_FMC_deviceId] = {32, 4}, \
    [CUPTIMON_FMC_contextId] = {36, 4}, \
    [CUPTIMON_FMC_streamId] = {40, 4}, \
    [CUPTIMON_FMC_correlationId] = {44, 4}, \
    [CUPTIMON_FMC_runtimeCorrelationId] = {48, 4}, \
    [CUPTIMON_FMC_graphNodeId] = {64, 8}, \
    [CUPTIMON_FMC_graphId] = {72, 4}, \
    [CUPTIMON_FMC_channelID] = {76, 4}, \
    [CUPTIMON_FMC_channelType] = {80, 4}
/* CUpti_ActivityMemcpy6: 96 bytes, Memcpy5 plus what follows. */
#define F_MEMCPY6 \
    F_MEMCPY5, \
    [CUPTIMON_FMC_isDeviceLaunched] = {84, 1}, \
    [CUPTIMON_FMC_copyCount] = {88, 8}
/* CUpti_ActivityMemcpyPtoP3: 88 bytes. */
#define F_MEMCPYPTOP3 \
    [CUPTIMON_FP2P_copyKind] = {4, 1}, \
    [CUPTIMON_FP2P_srcKind] = {5, 1}, \
    [CUPTIMON_FP2P_dstKind] = {6, 1}, \
    [CUPTIMON_FP2P_flags] = {7, 1}, \
    [CUPTIMON_FP2P_bytes] = {8, 8}, \
    [CUPTIMON_FP2P_start] = {16, 8}, \
    [CUPTIMON_FP2P_end] = {24, 8}, \
    [CUPTIMON_FP2P_deviceId] = {32, 4}, \
    [CUPTIMON_FP2P_contextId] = {36, 4}, \
    [CUPTIMON_FP2P_streamId] = {40, 4}, \
    [CUPTIMON_FP2P_srcDeviceId] = {44, 4}, \
    [CUPTIMON_FP2P_srcContextId] = {48, 4}, \
    [CUPTIMON_FP2P_dstDeviceId] = {52, 4}, \
    [CUPTIMON_FP2P_dstContextId] = {56, 4}, \
    [CUPTIMON_FP2P_correlationId] = {60, 4}, \
    [CUPTIMON_FP2P_graphNodeId] = {72, 8}, \
    [CUPTIMON_FP2P_graphId] = {80, 4}
/* CUpti_ActivityMemcpyPtoP4: 96 bytes, MemcpyPtoP3 plus what follows. */
#define F_MEMCPYPTOP4 \
    F_MEMCPYPTOP3, \
    [CUPTIMON_FP2P_channelID] = {84, 4}, \
    [CUPTIMON_FP2P_channelType] = {88, 4}
/* CUpti_ActivityMemset3: 80 bytes. */
#define F_MEMSET3 \
    [CUPTIMON_FMS_value] = {4, 4}, \
    [CUPTIMON_FMS_bytes] = {8, 8}, \
    [CUPTIMON_FMS_start] = {16, 8}, \
    [CUPTIMON_FMS_end] = {24, 8}, \
    [CUPTIMON_FMS_deviceId] = {32, 4}, \
    [CUPTIMON_FMS_contextId] = {36, 4}, \
    [CUPTIMON_FMS_streamId] = {40, 4}, \
    [CUPTIMON_FMS_correlationId] = {44, 4}, \
    [CUPTIMON_FMS_flags] = {48, 2}, \
    [CUPTIMON_FMS_memoryKind] = {50, 2}, \
    [CUPTIMON_FMS_graphNodeId] = {64, 8}, \
    [CUPTIMON_FMS_graphId] = {72, 4}
/* CUpti_ActivityMemset4: 88 bytes, Memset3 plus what follows. */
#define F_MEMSET4 \
    F_MEMSET3, \
    [CUPTIMON_FMS_channelID] = {76, 4}, \
    [CUPTIMON_FMS_channelType] = {80, 4}, \
    [CUPTIMON_FMS_isDeviceLaunched] = {84, 1}
/* CUpti_ActivityMarker: 48 bytes. */
#define F_MARKER \
    [CUPTIMON_FMK_flags] = {4, 4}, \
    [CUPTIMON_FMK_timestamp] = {8, 8}, \
    [CUPTIMON_FMK_id] = {16, 4}, \
    [CUPTIMON_FMK_objectKind] = {20, 4}, \
    [CUPTIMON_FMK_objectId] = {24, 12}, \
    [CUPTIMON_FMK_name] = {40, 8}
/* CUpti_ActivityMarker2: 56 bytes, Marker plus what follows. */
#define F_MARKER2 \
    F_MARKER, \
    [CUPTIMON_FMK_domain] = {48, 8}
/* CUpti_ActivityMarkerData: 32 bytes. */
#define F_MARKERDATA \
    [CUPTIMON_FMD_flags] = {4, 4}, \
    [CUPTIMON_FMD_id] = {8, 4}, \
    [CUPTIMON_FMD_payloadKind] = {12, 4}, \
    [CUPTIMON_FMD_payload] = {16, 8}, \
    [CUPTIMON_FMD_color] = {24, 4}, \
    [CUPTIMON_FMD_category] = {28, 4}
/* CUpti_ActivityMarkerData2: 40 bytes, MarkerData plus what follows. */
#define F_MARKERDATA2 \
    F_MARKERDATA, \
    [CUPTIMON_FMD_cuptiDomainId] = {32, 4}
/* CUpti_ActivityOverhead2: 48 bytes. */
#define F_OVERHEAD2 \
    [CUPTIMON_FOVH_overheadKind] = {4, 4}, \
    [CUPTIMON_FOVH_objectKind] = {8, 4}, \
    [CUPTIMON_FOVH_objectId] = {12, 12}, \
    [CUPTIMON_FOVH_start] = {24, 8}, \
    [CUPTIMON_FOVH_end] = {32, 8}, \
    [CUPTIMON_FOVH_correlationId] = {40, 4}
/* CUpti_ActivityOverhead3: 56 bytes, Overhead2 plus what follows. */
#define F_OVERHEAD3 \
    F_OVERHEAD2
/* CUpti_ActivityCudaEvent: 24 bytes. */
#define F_CUDAEVENT \
    [CUPTIMON_FEV_correlationId] = {4, 4}, \
    [CUPTIMON_FEV_contextId] = {8, 4}, \
    [CUPTIMON_FEV_streamId] = {12, 4}, \
    [CUPTIMON_FEV_eventId] = {16, 4}
/* CUpti_ActivityCudaEvent2: 56 bytes, CudaEvent plus what follows. */
#define F_CUDAEVENT2 \
    F_CUDAEVENT, \
    [CUPTIMON_FEV_deviceId] = {24, 4}, \
    [CUPTIMON_FEV_deviceTimestamp] = {40, 8}, \
    [CUPTIMON_FEV_cudaEventSyncId] = {48, 8}
/* CUpti_ActivitySynchronization: 40 bytes. */
#define F_SYNCHRONIZATION \
    [CUPTIMON_FSYNC_type] = {4, 4}, \
    [CUPTIMON_FSYNC_start] = {8, 8}, \
    [CUPTIMON_FSYNC_end] = {16, 8}, \
    [CUPTIMON_FSYNC_correlationId] = {24, 4}, \
    [CUPTIMON_FSYNC_contextId] = {28, 4}, \
    [CUPTIMON_FSYNC_streamId] = {32, 4}, \
    [CUPTIMON_FSYNC_cudaEventId] = {36, 4}
/* CUpti_ActivitySynchronization2: 56 bytes, Synchronization plus what follows. */
#define F_SYNCHRONIZATION2 \
    F_SYNCHRONIZATION, \
    [CUPTIMON_FSYNC_cudaEventSyncId] = {40, 8}, \
    [CUPTIMON_FSYNC_returnValue] = {48, 4}
/* CUpti_ActivityAPI: 40 bytes. */
#define F_API \
    [CUPTIMON_FAPI_cbid] = {4, 4}, \
    [CUPTIMON_FAPI_start] = {8, 8}, \
    [CUPTIMON_FAPI_end] = {16, 8}, \
    [CUPTIMON_FAPI_processId] = {24, 4}, \
    [CUPTIMON_FAPI_threadId] = {28, 4}, \
    [CUPTIMON_FAPI_correlationId] = {32, 4}, \
    [CUPTIMON_FAPI_returnValue] = {36, 4}
/* CUpti_ActivityExternalCorrelation: 24 bytes. */
#define F_EXTERNALCORRELATION \
    [CUPTIMON_FEXT_externalKind] = {4, 4}, \
    [CUPTIMON_FEXT_externalId] = {8, 8}, \
    [CUPTIMON_FEXT_correlationId] = {16, 4}

/* ---- struct versions newer than the CUDA 13.0 headers ------------------
 *
 * 13.1-13.3 from header-derived sources: rust-bindgen's layout of the real
 * CUPTI 13.2.1 and 13.3.0 headers (#[repr(C, packed(8))], as
 * PACKED_ALIGNMENT lays them out) in the public repository tinrab/singe,
 * singe-cupti-sys/src/cupti_sys_130201.rs and cupti_sys_130300.rs.
 * NVIDIA's per-struct reference pages leave out the undocumented padding,
 * and a table built from them (Kernel11 216 bytes with priority at 212)
 * made every 13.1+ buffer decode to nothing (issue 30).
 *
 * 13.4's structs: no header-derived source was found.  They are written
 * from the reference pages by the same pattern (appended after the
 * previous struct's last padding) and marked unverified; the decoder reads
 * none of their new fields, and the per-session check measures their
 * sizes before a record of them is decoded. */

/* CUpti_ActivityKernel11 (13.1, 13.2): Kernel10's members and its
 * padding3[7] (209..215) after isDeviceLaunched, then int32 priority at
 * 216 and padding4 (220): 224 bytes.  Source: cupti_sys_130201.rs
 * (CUPTI 13.2.1 header). */
#define F_KERNEL11 \
    F_KERNEL10, \
    [CUPTIMON_FK_priority] = {216, 4}
/* CUpti_ActivityKernel12 (13.3): Kernel11's members and padding, then
 * uint32 executionModel at 224 and padding5 (228): 232 bytes.  Source:
 * cupti_sys_130300.rs (CUPTI 13.3.0 header). */
#define F_KERNEL12 \
    F_KERNEL11, \
    [CUPTIMON_FK_executionModel] = {224, 4}
/* CUpti_ActivityKernel13 (13.4): UNVERIFIED.  Kernel12 plus sourceGraphId,
 * padding6 and sourceGraphNodeId (reference page); taken after Kernel12's
 * padding5, the pattern of Memcpy7/Memset5: sourceGraphId at 232,
 * sourceGraphNodeId at 240, 248 bytes.  Every field the decoder reads lies
 * in the Kernel12 prefix. */
#define F_KERNEL13 \
    F_KERNEL12, \
    [CUPTIMON_FK_sourceGraphId] = {232, 4}, \
    [CUPTIMON_FK_sourceGraphNodeId] = {240, 8}
/* CUpti_ActivityMemcpy7 (13.4): UNVERIFIED.  Memcpy6 plus sourceGraphId,
 * pad3, sourceGraphNodeId (reference page): 112 bytes. */
#define F_MEMCPY7 \
    F_MEMCPY6, \
    [CUPTIMON_FMC_sourceGraphId] = {96, 4}, \
    [CUPTIMON_FMC_sourceGraphNodeId] = {104, 8}
/* CUpti_ActivityMemset5 (13.4): UNVERIFIED.  Memset4 plus sourceGraphId,
 * pad3, sourceGraphNodeId (reference page): 104 bytes. */
#define F_MEMSET5 \
    F_MEMSET4, \
    [CUPTIMON_FMS_sourceGraphId] = {88, 4}, \
    [CUPTIMON_FMS_sourceGraphNodeId] = {96, 8}

/* Memcpy6 and Memset4 as CUDA 12.x emitted them: 13.0 turned their
 * trailing uint32 pad2 into isDeviceLaunched plus 3 pad bytes, without a
 * new version number.  Same size and offsets, one field fewer. */
#define F_MEMCPY6_12 \
    F_MEMCPY5, \
    [CUPTIMON_FMC_copyCount] = {88, 8}
#define F_MEMSET4_12 \
    F_MEMSET3, \
    [CUPTIMON_FMS_channelID] = {76, 4}, \
    [CUPTIMON_FMS_channelType] = {80, 4}
/* clang-format on */

/* ---- the layouts ------------------------------------------------------- */

#define LAYOUT(var, struct_name, rec_type, bytes, fields)                                          \
    static const struct cuptimon_rec_layout var = {struct_name, rec_type, bytes, NULL, {fields}}
/* A layout no header-derived source confirms (see above). */
#define UNVERIFIED "13.4: from NVIDIA's reference page only, no header-derived source"
#define LAYOUT_UNVERIFIED(var, struct_name, rec_type, bytes, fields)                               \
    static const struct cuptimon_rec_layout var = {                                                \
        struct_name, rec_type, bytes, UNVERIFIED, {fields}}

LAYOUT(kernel9, "CUpti_ActivityKernel9", CUPTIMON_REC_KERNEL, 208, F_KERNEL9);
LAYOUT(kernel10, "CUpti_ActivityKernel10", CUPTIMON_REC_KERNEL, 216, F_KERNEL10);
LAYOUT(kernel11, "CUpti_ActivityKernel11", CUPTIMON_REC_KERNEL, 224, F_KERNEL11);
LAYOUT(kernel12, "CUpti_ActivityKernel12", CUPTIMON_REC_KERNEL, 232, F_KERNEL12);
LAYOUT_UNVERIFIED(kernel13, "CUpti_ActivityKernel13", CUPTIMON_REC_KERNEL, 248, F_KERNEL13);
LAYOUT(memcpy5, "CUpti_ActivityMemcpy5", CUPTIMON_REC_MEMCPY, 88, F_MEMCPY5);
LAYOUT(memcpy6_12, "CUpti_ActivityMemcpy6 (12.x)", CUPTIMON_REC_MEMCPY, 96, F_MEMCPY6_12);
LAYOUT(memcpy6, "CUpti_ActivityMemcpy6", CUPTIMON_REC_MEMCPY, 96, F_MEMCPY6);
LAYOUT_UNVERIFIED(memcpy7, "CUpti_ActivityMemcpy7", CUPTIMON_REC_MEMCPY, 112, F_MEMCPY7);
LAYOUT(p2p4, "CUpti_ActivityMemcpyPtoP4", CUPTIMON_REC_P2P, 96, F_MEMCPYPTOP4);
LAYOUT(memset4_12, "CUpti_ActivityMemset4 (12.x)", CUPTIMON_REC_MEMSET, 88, F_MEMSET4_12);
LAYOUT(memset4, "CUpti_ActivityMemset4", CUPTIMON_REC_MEMSET, 88, F_MEMSET4);
LAYOUT_UNVERIFIED(memset5, "CUpti_ActivityMemset5", CUPTIMON_REC_MEMSET, 104, F_MEMSET5);
LAYOUT(marker2, "CUpti_ActivityMarker2", CUPTIMON_REC_MARKER, 56, F_MARKER2);
LAYOUT(marker_data1, "CUpti_ActivityMarkerData", CUPTIMON_REC_MARKER_DATA, 32, F_MARKERDATA);
LAYOUT(marker_data2, "CUpti_ActivityMarkerData2", CUPTIMON_REC_MARKER_DATA, 40, F_MARKERDATA2);
LAYOUT(overhead2, "CUpti_ActivityOverhead2", CUPTIMON_REC_OVERHEAD, 48, F_OVERHEAD2);
LAYOUT(overhead3, "CUpti_ActivityOverhead3", CUPTIMON_REC_OVERHEAD, 56, F_OVERHEAD3);
LAYOUT(cuda_event1, "CUpti_ActivityCudaEvent", CUPTIMON_REC_CUDA_EVENT, 24, F_CUDAEVENT);
LAYOUT(cuda_event2, "CUpti_ActivityCudaEvent2", CUPTIMON_REC_CUDA_EVENT, 56, F_CUDAEVENT2);
LAYOUT(sync1, "CUpti_ActivitySynchronization", CUPTIMON_REC_SYNC, 40, F_SYNCHRONIZATION);
LAYOUT(sync2, "CUpti_ActivitySynchronization2", CUPTIMON_REC_SYNC, 56, F_SYNCHRONIZATION2);
LAYOUT(api, "CUpti_ActivityAPI", CUPTIMON_REC_API, 40, F_API);
LAYOUT(ext, "CUpti_ActivityExternalCorrelation", CUPTIMON_REC_EXT, 24, F_EXTERNALCORRELATION);

/* ---- releases ---------------------------------------------------------- */

/* One row: the struct a release emits for each kind it decodes.  The API
 * and external-correlation records have not changed since CUDA 10. */
#define ROW(k, mc, p2p, ms, mk, md, ovh, ev, sy)                                                   \
    {                                                                                              \
        [CUPTIMON_KIND_KERNEL] = k, [CUPTIMON_KIND_CONCURRENT_KERNEL] = k,                         \
        [CUPTIMON_KIND_MEMCPY] = mc, [CUPTIMON_KIND_MEMCPY2] = p2p, [CUPTIMON_KIND_MEMSET] = ms,   \
        [CUPTIMON_KIND_DRIVER] = &api, [CUPTIMON_KIND_RUNTIME] = &api,                             \
        [CUPTIMON_KIND_MARKER] = mk, [CUPTIMON_KIND_MARKER_DATA] = md,                             \
        [CUPTIMON_KIND_OVERHEAD] = ovh, [CUPTIMON_KIND_CUDA_EVENT] = ev,                           \
        [CUPTIMON_KIND_SYNCHRONIZATION] = sy, [CUPTIMON_KIND_EXTERNAL_CORRELATION] = &ext,         \
    }

/* CUPTI API versions, as cuptiGetVersion reports them: CUDA 12.0 and 12.1
 * report 18, the number of 11.8 (the 12.0 header's cupti_version.h lists
 * "v19 : CUDA Toolkit 12.0" yet defines CUPTI_API_VERSION 18); 19 is
 * listed for 12.0, 20 for 12.2, then one per release up to 28 (12.9
 * Update 1; cupti_version.h of 13.0 and NVIDIA's CUPTI Version page); from
 * 13.0 on, 13yyzz with yy the minor release.  18 is told apart from 11.8 by
 * the kernel record the session measures: 12.0's Kernel9 is 208 bytes,
 * 11.8's Kernel8 200 (both in cupti_activity_deprecated.h); the 18 row
 * names 11.8 in shared_with, and archive/decode.c drops it when a measured
 * size disagrees.  Sources for which struct each release emits: the CUPTI
 * release notes (docs.nvidia.com/cupti/release-notes), each release's
 * Activity API reference, and cupti_activity_deprecated.h's "deprecated
 * in CUDA x.y" notes; that 13.4 and 13.5 keep the other kinds' structs
 * rests on the release notes alone (the structs themselves are 13.0's,
 * header-checked, and their sizes are measured per session).  13.5's CUDA
 * event record (CudaEvent3) is not in the reference this table was written
 * from, so 13.5 leaves that kind out: the shim does not enable it there,
 * rather than make the daemon stop at a record it cannot step over. */
#define ROW_12_0                                                                                   \
    ROW(&kernel9, &memcpy5, &p2p4, &memset4_12, &marker2, &marker_data1, &overhead2, &cuda_event1, \
        &sync1)
static const struct cuptimon_cupti_release releases[] = {
    {18, 18, "12.0-12.1", "11.8", ROW_12_0},
    {19, 21, "12.0-12.3", NULL, ROW_12_0},
    {22, 25, "12.4-12.6", NULL,
     ROW(&kernel9, &memcpy5, &p2p4, &memset4_12, &marker2, &marker_data1, &overhead3, &cuda_event1,
         &sync1)},
    {26, 28, "12.8-12.9", NULL,
     ROW(&kernel9, &memcpy6_12, &p2p4, &memset4_12, &marker2, &marker_data1, &overhead3,
         &cuda_event2, &sync2)},
    {130000, 130099, "13.0", NULL,
     ROW(&kernel10, &memcpy6, &p2p4, &memset4, &marker2, &marker_data2, &overhead3, &cuda_event2,
         &sync2)},
    {130100, 130299, "13.1-13.2", NULL,
     ROW(&kernel11, &memcpy6, &p2p4, &memset4, &marker2, &marker_data2, &overhead3, &cuda_event2,
         &sync2)},
    {130300, 130399, "13.3", NULL,
     ROW(&kernel12, &memcpy6, &p2p4, &memset4, &marker2, &marker_data2, &overhead3, &cuda_event2,
         &sync2)},
    {130400, 130499, "13.4", NULL,
     ROW(&kernel13, &memcpy7, &p2p4, &memset5, &marker2, &marker_data2, &overhead3, &cuda_event2,
         &sync2)},
    {130500, 130599, "13.5", NULL,
     ROW(&kernel13, &memcpy7, &p2p4, &memset5, &marker2, &marker_data2, &overhead3, NULL, &sync2)},
};
#define NRELEASES (sizeof releases / sizeof releases[0])

const char *cuptimon__cupti_supported(void)
{
    return "CUDA 12.0-12.9 (CUPTI API versions 18-28) and 13.0-13.5 (130000-130599)";
}

/* The test hook (layouts.h): a copy of the releases with one kind's
 * struct replaced by a copy of a different size. */
static struct {
    pthread_once_t once;
    int on;
    struct cuptimon_cupti_release releases[NRELEASES];
    struct cuptimon_rec_layout wrong;
} hook = {.once = PTHREAD_ONCE_INIT};

static void hook_init(void)
{
    const char *v = getenv("CUPTIMON_TEST_LAYOUT_SIZE");
    unsigned long version, kind, size;
    char *end;

    if (v == NULL || *v == '\0')
        return;
    version = strtoul(v, &end, 10);
    if (*end++ != ':')
        return;
    kind = strtoul(end, &end, 10);
    if (*end++ != ':')
        return;
    size = strtoul(end, &end, 10);
    if (*end != '\0' || kind == 0 || kind >= CUPTIMON_LAYOUT_KINDS || size < 8 || size > 4096)
        return;
    memcpy(hook.releases, releases, sizeof releases);
    for (size_t i = 0; i < NRELEASES; i++) {
        struct cuptimon_cupti_release *r = &hook.releases[i];
        if (version < r->version_min || version > r->version_max || r->kinds[kind] == NULL)
            continue;
        hook.wrong = *r->kinds[kind];
        hook.wrong.size = (uint16_t)size;
        for (unsigned k = 0; k < CUPTIMON_LAYOUT_KINDS; k++)
            if (r->kinds[k] == releases[i].kinds[kind])
                r->kinds[k] = &hook.wrong; /* KERNEL and CONCURRENT_KERNEL alike */
        hook.on = 1;
    }
}

const struct cuptimon_cupti_release *cuptimon__cupti_release(uint32_t version)
{
    const struct cuptimon_cupti_release *r = releases;

    pthread_once(&hook.once, hook_init);
    if (hook.on)
        r = hook.releases;
    for (size_t i = 0; i < NRELEASES; i++)
        if (version >= r[i].version_min && version <= r[i].version_max)
            return &r[i];
    return NULL;
}

const struct cuptimon_cupti_release *cuptimon__cupti_releases(unsigned *n)
{
    *n = (unsigned)NRELEASES;
    return releases;
}

/* ---- per-type field names and widths (for user-defined layouts) -------- */

unsigned cuptimon__rec_type_of_kind(uint32_t kind)
{
    /* The record type the releases' rows give the kind (it is the same in
     * every release that decodes it). */
    for (size_t i = 0; kind < CUPTIMON_LAYOUT_KINDS && i < NRELEASES; i++)
        if (releases[i].kinds[kind] != NULL)
            return releases[i].kinds[kind]->type;
    return CUPTIMON_REC_NONE;
}

#define NAME_(m) #m,
static const char *const names_kernel[] = {CUPTIMON_KERNEL_FIELDS(NAME_)};
static const char *const names_memcpy[] = {CUPTIMON_MEMCPY_FIELDS(NAME_)};
static const char *const names_p2p[] = {CUPTIMON_P2P_FIELDS(NAME_)};
static const char *const names_memset[] = {CUPTIMON_MEMSET_FIELDS(NAME_)};
static const char *const names_api[] = {CUPTIMON_API_FIELDS(NAME_)};
static const char *const names_ext[] = {CUPTIMON_EXT_FIELDS(NAME_)};
static const char *const names_overhead[] = {CUPTIMON_OVERHEAD_FIELDS(NAME_)};
static const char *const names_cuda_event[] = {CUPTIMON_CUDA_EVENT_FIELDS(NAME_)};
static const char *const names_sync[] = {CUPTIMON_SYNC_FIELDS(NAME_)};
static const char *const names_marker[] = {CUPTIMON_MARKER_FIELDS(NAME_)};
static const char *const names_marker_data[] = {CUPTIMON_MARKER_DATA_FIELDS(NAME_)};
#undef NAME_

#define NAMES_(a)                                                                                  \
    {                                                                                              \
        a, (unsigned)(sizeof(a) / sizeof(a[0]))                                                    \
    }
static const struct {
    const char *const *names;
    unsigned n;
} type_names[CUPTIMON_REC_TYPES] = {
    [CUPTIMON_REC_KERNEL] = NAMES_(names_kernel),
    [CUPTIMON_REC_MEMCPY] = NAMES_(names_memcpy),
    [CUPTIMON_REC_P2P] = NAMES_(names_p2p),
    [CUPTIMON_REC_MEMSET] = NAMES_(names_memset),
    [CUPTIMON_REC_API] = NAMES_(names_api),
    [CUPTIMON_REC_EXT] = NAMES_(names_ext),
    [CUPTIMON_REC_OVERHEAD] = NAMES_(names_overhead),
    [CUPTIMON_REC_CUDA_EVENT] = NAMES_(names_cuda_event),
    [CUPTIMON_REC_SYNC] = NAMES_(names_sync),
    [CUPTIMON_REC_MARKER] = NAMES_(names_marker),
    [CUPTIMON_REC_MARKER_DATA] = NAMES_(names_marker_data),
};
#undef NAMES_

const char *const *cuptimon__rec_field_names(unsigned type, unsigned *n)
{
    if (type >= CUPTIMON_REC_TYPES || type_names[type].names == NULL) {
        *n = 0;
        return NULL;
    }
    *n = type_names[type].n;
    return type_names[type].names;
}

/* Every struct version above, for cuptimon__rec_field_width. */
static const struct cuptimon_rec_layout *const all_layouts[] = {
    &kernel9,     &kernel10,    &kernel11,     &kernel12,     &kernel13,   &memcpy5,
    &memcpy6_12,  &memcpy6,     &memcpy7,      &p2p4,         &memset4_12, &memset4,
    &memset5,     &marker2,     &marker_data1, &marker_data2, &overhead2,  &overhead3,
    &cuda_event1, &cuda_event2, &sync1,        &sync2,        &api,        &ext,
};

unsigned cuptimon__rec_field_width(unsigned type, unsigned field)
{
    if (field >= CUPTIMON_FIELDS_MAX)
        return 0;
    /* A field keeps its width in every version that has it (CUPTI appends;
     * test-layouts checks the table), so the first version found says. */
    for (size_t i = 0; i < sizeof all_layouts / sizeof all_layouts[0]; i++)
        if (all_layouts[i]->type == type && all_layouts[i]->f[field].width != 0)
            return all_layouts[i]->f[field].width;
    return 0;
}
