/*
 * CUPTI activity record layouts, as data, for every CUPTI release cuptimon
 * knows (CUDA 12.0 through 13.5).
 *
 * CUPTI changes its record structs between minor releases (the kernel
 * record was Kernel9 in 12.x, Kernel10 in 13.0, Kernel11 in 13.1, ...), and
 * one node runs jobs of several releases at once, so neither the shim nor
 * the daemon may take a layout from the header it was compiled against.
 * Instead this table says, for each release (a range of CUPTI API
 * versions, as cuptiGetVersion reports them: 18..28 for CUDA 12.x (12.0
 * and 12.1 report 18, as 11.8 did), 13yyzz from 13.0), which struct CUPTI
 * emits for each activity kind, how
 * long it is, and where each field the decoder reads lies (offset and
 * width in bytes; width 0: the field does not exist in that version and
 * reads as 0).
 *
 * The numbers come from the installed CUDA headers (cupti_activity.h and
 * cupti_activity_deprecated.h) where they reach, from header-derived
 * sources for 13.1-13.3 (named per entry in layouts.c), and from NVIDIA's
 * per-struct reference pages for 13.4 and later, which omit undocumented
 * padding: those entries are marked unverified.  tests/unit/test-layouts.c
 * checks every entry the installed headers can express with offsetof and
 * sizeof, and every other entry against the test double's own
 * declarations (tests/fakecupti/cupti-future.h, itself checked against
 * the facts in ../shared/reference/cupti-layouts-13x.md).  The table is
 * not trusted at run time either: the shim measures the record sizes its
 * libcupti really uses and the daemon decodes a kind only where they agree
 * (archive/decode.h, cuptimon__layout_measured).  Nothing here includes a
 * CUPTI header: the shim uses this table to find name pointers, and the
 * daemon to decode, whatever toolkit they were built with.
 *
 * The field lists below use CUPTI's own member names, so that a test can
 * write offsetof(CUpti_ActivityKernel9, X) for each X.
 */
#ifndef CUPTIMON_LAYOUTS_H
#define CUPTIMON_LAYOUTS_H

#include <stdint.h>

/* CUpti_ActivityKind values cuptimon decodes.  They are ABI: CUPTI never
 * renumbers a kind, so they are spelled out here rather than taken from a
 * header that a headerless build does not have. */
enum {
    CUPTIMON_KIND_MEMCPY = 1,
    CUPTIMON_KIND_MEMSET = 2,
    CUPTIMON_KIND_KERNEL = 3,
    CUPTIMON_KIND_DRIVER = 4,
    CUPTIMON_KIND_RUNTIME = 5,
    CUPTIMON_KIND_CONCURRENT_KERNEL = 10,
    CUPTIMON_KIND_MARKER = 12,
    CUPTIMON_KIND_MARKER_DATA = 13,
    CUPTIMON_KIND_OVERHEAD = 17,
    CUPTIMON_KIND_MEMCPY2 = 22,
    CUPTIMON_KIND_CUDA_EVENT = 36,
    CUPTIMON_KIND_SYNCHRONIZATION = 38,
    CUPTIMON_KIND_EXTERNAL_CORRELATION = 39,
};

/* Kinds are small numbers; a table row is indexed by kind. */
#define CUPTIMON_LAYOUT_KINDS 64u

/* What a record is decoded as. */
enum cuptimon_rec_type {
    CUPTIMON_REC_NONE = 0,
    CUPTIMON_REC_KERNEL,
    CUPTIMON_REC_MEMCPY,
    CUPTIMON_REC_P2P,
    CUPTIMON_REC_MEMSET,
    CUPTIMON_REC_API,
    CUPTIMON_REC_EXT,
    CUPTIMON_REC_OVERHEAD,
    CUPTIMON_REC_CUDA_EVENT,
    CUPTIMON_REC_SYNC,
    CUPTIMON_REC_MARKER,
    CUPTIMON_REC_MARKER_DATA,
    CUPTIMON_REC_TYPES
};

/* The fields the decoder reads, per record type, in CUPTI's names.  A
 * field added by a later struct version goes at the end of its list. */
/* The tables keep their hand layout (one entry per line, lists per macro). */
/* clang-format off */
#define CUPTIMON_KERNEL_FIELDS(X)                                                               \
    X(cacheConfig) X(sharedMemoryConfig) X(registersPerThread)                                  \
    X(partitionedGlobalCacheRequested) X(partitionedGlobalCacheExecuted) X(start) X(end)        \
    X(completed) X(deviceId) X(contextId) X(streamId) X(gridX) X(gridY) X(gridZ) X(blockX)       \
    X(blockY) X(blockZ) X(staticSharedMemory) X(dynamicSharedMemory) X(localMemoryPerThread)    \
    X(localMemoryTotal) X(correlationId) X(gridId) X(name) X(queued) X(submitted) X(launchType) \
    X(isSharedMemoryCarveoutRequested) X(sharedMemoryCarveoutRequested)                         \
    X(sharedMemoryExecuted) X(graphNodeId) X(shmemLimitConfig) X(graphId) X(channelID)          \
    X(channelType) X(clusterX) X(clusterY) X(clusterZ) X(clusterSchedulingPolicy)               \
    X(localMemoryTotal_v2) X(maxPotentialClusterSize) X(maxActiveClusters)                      \
    X(isDeviceLaunched) X(priority) X(executionModel) X(sourceGraphId) X(sourceGraphNodeId)
#define CUPTIMON_MEMCPY_FIELDS(X)                                                               \
    X(copyKind) X(srcKind) X(dstKind) X(flags) X(bytes) X(start) X(end) X(deviceId)             \
    X(contextId) X(streamId) X(correlationId) X(runtimeCorrelationId) X(graphNodeId) X(graphId) \
    X(channelID) X(channelType) X(isDeviceLaunched) X(copyCount) X(sourceGraphId)      \
    X(sourceGraphNodeId)
#define CUPTIMON_P2P_FIELDS(X)                                                                  \
    X(copyKind) X(srcKind) X(dstKind) X(flags) X(bytes) X(start) X(end) X(deviceId)             \
    X(contextId) X(streamId) X(srcDeviceId) X(srcContextId) X(dstDeviceId) X(dstContextId)      \
    X(correlationId) X(graphNodeId) X(graphId) X(channelID) X(channelType)
#define CUPTIMON_MEMSET_FIELDS(X)                                                               \
    X(value) X(bytes) X(start) X(end) X(deviceId) X(contextId) X(streamId) X(correlationId)     \
    X(flags) X(memoryKind) X(graphNodeId) X(graphId) X(channelID) X(channelType)                \
    X(isDeviceLaunched) X(sourceGraphId) X(sourceGraphNodeId)
#define CUPTIMON_API_FIELDS(X)                                                                  \
    X(cbid) X(start) X(end) X(processId) X(threadId) X(correlationId) X(returnValue)
#define CUPTIMON_EXT_FIELDS(X) X(externalKind) X(externalId) X(correlationId)
/* objectId is CUpti_ActivityObjectKindId: 12 bytes, read as three words.
 * processId and threadId are in user-defined records only (CUPTI 13.2+
 * offers them instead of objectKind/objectId): no table struct has them. */
#define CUPTIMON_OVERHEAD_FIELDS(X)                                                             \
    X(overheadKind) X(objectKind) X(objectId) X(start) X(end) X(correlationId) X(processId)     \
    X(threadId)
#define CUPTIMON_CUDA_EVENT_FIELDS(X)                                                           \
    X(correlationId) X(contextId) X(streamId) X(eventId) X(deviceId) X(deviceTimestamp)         \
    X(cudaEventSyncId)
#define CUPTIMON_SYNC_FIELDS(X)                                                                 \
    X(type) X(start) X(end) X(correlationId) X(contextId) X(streamId) X(cudaEventId)            \
    X(cudaEventSyncId) X(returnValue)
#define CUPTIMON_MARKER_FIELDS(X)                                                               \
    X(flags) X(timestamp) X(id) X(objectKind) X(objectId) X(name) X(domain) X(processId)        \
    X(threadId)
#define CUPTIMON_MARKER_DATA_FIELDS(X)                                                          \
    X(flags) X(id) X(payloadKind) X(payload) X(color) X(category) X(cuptiDomainId)

#define CUPTIMON_F_ENUM_(p, m) p##m,
#define CUPTIMON_FK_(m) CUPTIMON_F_ENUM_(CUPTIMON_FK_, m)
#define CUPTIMON_FMC_(m) CUPTIMON_F_ENUM_(CUPTIMON_FMC_, m)
#define CUPTIMON_FP2P_(m) CUPTIMON_F_ENUM_(CUPTIMON_FP2P_, m)
#define CUPTIMON_FMS_(m) CUPTIMON_F_ENUM_(CUPTIMON_FMS_, m)
#define CUPTIMON_FAPI_(m) CUPTIMON_F_ENUM_(CUPTIMON_FAPI_, m)
#define CUPTIMON_FEXT_(m) CUPTIMON_F_ENUM_(CUPTIMON_FEXT_, m)
#define CUPTIMON_FOVH_(m) CUPTIMON_F_ENUM_(CUPTIMON_FOVH_, m)
#define CUPTIMON_FEV_(m) CUPTIMON_F_ENUM_(CUPTIMON_FEV_, m)
#define CUPTIMON_FSYNC_(m) CUPTIMON_F_ENUM_(CUPTIMON_FSYNC_, m)
#define CUPTIMON_FMK_(m) CUPTIMON_F_ENUM_(CUPTIMON_FMK_, m)
#define CUPTIMON_FMD_(m) CUPTIMON_F_ENUM_(CUPTIMON_FMD_, m)

/* Field indices: CUPTIMON_FK_name is the kernel record's name field, and
 * so on (K kernel, MC memcpy, P2P peer copy, MS memset, API, EXT external
 * correlation, OVH overhead, EV CUDA event, SYNC, MK marker, MD marker
 * data). */
enum { CUPTIMON_KERNEL_FIELDS(CUPTIMON_FK_) CUPTIMON_FK_COUNT };
enum { CUPTIMON_MEMCPY_FIELDS(CUPTIMON_FMC_) CUPTIMON_FMC_COUNT };
enum { CUPTIMON_P2P_FIELDS(CUPTIMON_FP2P_) CUPTIMON_FP2P_COUNT };
enum { CUPTIMON_MEMSET_FIELDS(CUPTIMON_FMS_) CUPTIMON_FMS_COUNT };
enum { CUPTIMON_API_FIELDS(CUPTIMON_FAPI_) CUPTIMON_FAPI_COUNT };
enum { CUPTIMON_EXT_FIELDS(CUPTIMON_FEXT_) CUPTIMON_FEXT_COUNT };
enum { CUPTIMON_OVERHEAD_FIELDS(CUPTIMON_FOVH_) CUPTIMON_FOVH_COUNT };
enum { CUPTIMON_CUDA_EVENT_FIELDS(CUPTIMON_FEV_) CUPTIMON_FEV_COUNT };
enum { CUPTIMON_SYNC_FIELDS(CUPTIMON_FSYNC_) CUPTIMON_FSYNC_COUNT };
enum { CUPTIMON_MARKER_FIELDS(CUPTIMON_FMK_) CUPTIMON_FMK_COUNT };
enum { CUPTIMON_MARKER_DATA_FIELDS(CUPTIMON_FMD_) CUPTIMON_FMD_COUNT };

/* The longest field list (the kernel's). */
#define CUPTIMON_FIELDS_MAX 48
/* clang-format on */
_Static_assert(CUPTIMON_FK_COUNT <= CUPTIMON_FIELDS_MAX, "kernel fields fit");

/* Where a field lies in a record: width 0 means "not in this version". */
struct cuptimon_field {
    uint16_t off;
    uint8_t width;
};

/* One struct version, e.g. CUpti_ActivityKernel9. */
struct cuptimon_rec_layout {
    const char *name; /* CUPTI's struct name */
    uint8_t type;     /* enum cuptimon_rec_type */
    uint16_t size;    /* sizeof the struct: the record's length in a buffer */
    /* NULL when a header (the installed toolkit's, or a header-derived
     * source named in layouts.c) gives this layout; else why it is not
     * confirmed.  Shown by status, decode and the man page: the per-session
     * check measures such a record's size, but not where its own new fields
     * lie (the decoder reads none of them: they come after the verified
     * prefix of an earlier struct). */
    const char *unverified;
    struct cuptimon_field f[CUPTIMON_FIELDS_MAX];
};

/* One CUPTI release: the CUPTI API versions it reports and the struct it
 * emits for each kind (NULL: not decoded). */
struct cuptimon_cupti_release {
    uint32_t version_min, version_max;
    const char *cuda; /* "12.8", "13.0", ... */
    /* Another CUDA release that reports the same CUPTI API version, or
     * NULL: CUDA 11.8 reports 18, as 12.0 and 12.1 do.  Such a row holds
     * only while no record size measured in the session disagrees with it
     * (archive/decode.c cuptimon__layout_measured): 11.8's kernel record
     * (CUpti_ActivityKernel8, 200 bytes) is not 12.0's (Kernel9, 208). */
    const char *shared_with;
    const struct cuptimon_rec_layout *kinds[CUPTIMON_LAYOUT_KINDS];
};

/* The release a CUPTI API version belongs to, or NULL when it is one this
 * build does not know (an older CUDA, or one released after it).
 *
 * Test hook: CUPTIMON_TEST_LAYOUT_SIZE="VERSION:KIND:SIZE" makes the
 * release VERSION belongs to describe KIND's record as SIZE bytes (its
 * fields unchanged): a deliberately wrong table entry, read once per
 * process, so that a test can show the per-session check catching it
 * (tests/integration/layouts.sh).  Nothing else reads it. */
const struct cuptimon_cupti_release *cuptimon__cupti_release(uint32_t version);

/* Every known release, in version order, for tests and documentation;
 * *n is set to their number. */
const struct cuptimon_cupti_release *cuptimon__cupti_releases(unsigned *n);

/* "CUDA 12.0-12.9 (...) and 13.0-13.5 (...)": the versions this build
 * decodes, for messages that name what is supported. */
const char *cuptimon__cupti_supported(void);

/* The record type an activity kind is decoded as (CUPTIMON_REC_NONE for a
 * kind the decoder does not read), whatever the release: CUPTI never
 * renumbers a kind. */
unsigned cuptimon__rec_type_of_kind(uint32_t kind);

/* The CUPTI member names of a record type's fields, in the order of its
 * CUPTIMON_*_FIELDS list (so names[i] is field i); *n is set to their
 * number.  NULL (and *n = 0) for CUPTIMON_REC_NONE or an unknown type. */
const char *const *cuptimon__rec_field_names(unsigned type, unsigned *n);

/* The width in bytes that every struct version in the table gives field i
 * of a record type (1, 2, 4, 8, or 12 for objectId), or 0 when no version
 * has it (a field of user-defined records only).  A user-defined layout
 * (CUPTI 13.2+) gives each field's width itself: the decoder reads it at
 * that width (see cuptimon__layout_init_udr). */
unsigned cuptimon__rec_field_width(unsigned type, unsigned field);

/* The record at rec (already known to be l->size bytes long) read at field
 * i: 0 when the field is absent from this version.  Widths are 1, 2, 4 or
 * 8; any other width reads as 0 here (objectId is read word by word with
 * cuptimon__rec_word). */
static inline uint64_t cuptimon__rec_get(const struct cuptimon_rec_layout *l, const uint8_t *rec,
                                         unsigned i)
{
    const struct cuptimon_field *f = &l->f[i];
    switch (f->width) {
    case 1: return rec[f->off];
    case 2: {
        uint16_t v;
        __builtin_memcpy(&v, rec + f->off, 2);
        return v;
    }
    case 4: {
        uint32_t v;
        __builtin_memcpy(&v, rec + f->off, 4);
        return v;
    }
    case 8: {
        uint64_t v;
        __builtin_memcpy(&v, rec + f->off, 8);
        return v;
    }
    default: return 0;
    }
}

/* Word w (0..2) of a 12-byte field such as objectId; 0 when absent. */
static inline uint32_t cuptimon__rec_word(const struct cuptimon_rec_layout *l, const uint8_t *rec,
                                          unsigned i, unsigned w)
{
    uint32_t v;
    if (l->f[i].width < 4 * (w + 1))
        return 0;
    __builtin_memcpy(&v, rec + l->f[i].off + 4 * w, 4);
    return v;
}

#endif
