/*
 * The part of CUPTI's C ABI that cuptimon uses, declared by the project so
 * that nothing in the product includes a CUDA header.
 *
 * cuptimon never links libcupti: the shim finds the copy in the process at
 * run time and resolves its entry points with dlsym, and the daemon only
 * reads record bytes through the layout tables of proto/layouts.h.  What it
 * needs from CUPTI's headers is therefore small and stable: a few
 * enumerator values (activity kinds, flags, result codes, callback ids),
 * the handle and callback types, the common record header, and the
 * prototypes of the entry points it calls.  CUPTI does not renumber an
 * enumerator or change an entry point's signature between releases (a
 * changed function gets a new name), so one declaration serves every CUDA
 * 12.x and 13.x.  A distribution can build cuptimon without the toolkit,
 * and a build does not depend on which toolkit happens to be installed.
 *
 * Names and values are CUPTI's own, so the code reads like any CUPTI
 * client.  Each value is given once, in the lists below;
 * tests/unit/test-cupti-abi.c compiles the same lists against the real
 * headers of the toolkit configure found and fails (at compile time) on
 * any value, size, offset or prototype that differs.  Adding something
 * here: add it to its list, and it is checked.
 *
 * Defining CUPTIMON_CUPTI_ABI_LISTS_ONLY before including this file gives
 * only the lists (no declarations), for that test, which also includes
 * the real headers.
 */
#ifndef CUPTIMON_CUPTI_ABI_H
#define CUPTIMON_CUPTI_ABI_H

/*
 * CUPTI 13.2+ (multiple subscribers, per-subscriber _v2 calls and
 * user-defined activity records, "UDR"): the CUPTIMON_CUPTI_V2_* lists
 * below, transcribed from the project's reference
 * (shared/reference/cupti-v2.md), which names for each fact its sources:
 *  - prototypes and callback types: NVIDIA's Activity API reference
 *    (docs.nvidia.com/cupti/api/group__CUPTI__ACTIVITY__API.html) and the
 *    rust-bindgen output of the CUPTI 13.3.0 headers (tinrab/singe,
 *    singe-cupti-sys/src/cupti_sys_130300.rs), which agree;
 *  - struct members, their order and LP64 sizes: the same 13.3.0 bindings
 *    and the 13.2 struct pages (structCUpti__SubscriberParams.html,
 *    structCUpti__ActivityConfig.html; 13.4's pKindOptions from the 13.4
 *    developer preview's structCUpti__ActivityConfig.html and
 *    structCUpti__ActivityApiCbidOptions.html); SubscriberParams' padding
 *    is from JAX's and PyTorch's mirrors (40 bytes either way);
 *  - attribute values 11-23 and the field-id enums: explicit values in the
 *    13.3.0 bindings (13.2.1's agree for the attributes), enumerator names
 *    as NVIDIA's reference and the singe wrapper spell them;
 *  - result codes 14 and 39: the 13.0.1 bindings (iopsystems/cupti-rs),
 *    checked below against the installed 13.0 headers.
 * The installed CUDA 13.0 headers predate everything in the V2 lists, so
 * tests/unit/test-cupti-abi.c compares them only when configure finds a
 * 13.3 or later toolkit (CUPTI_API_VERSION >= 130300) and says so in its
 * log otherwise; until then the sizes the reference gives are asserted
 * here.  Field widths inside a user-defined record are not taken from
 * any of this: the sources disagree (the header's comments say 64-bit
 * correlation, context and stream ids, PyTorch measured 32-bit ones), so
 * the shim reads offsets and widths from the layout CUPTI reports with
 * each buffer (ppRecordLayouts), never from a table.
 *
 * CUPTIMON_CUPTI_ABI_V2_ONLY: declare only the 13.2+ part, for a file that
 * includes CUPTI headers older than 13.3 (the test double); with 13.3 or
 * later headers it then declares nothing (the headers do).
 */

#include <stddef.h>
#include <stdint.h>

/* Enumerators, per CUPTI enum type: X(name, value). */
/* clang-format off */
#define CUPTIMON_CUPTI_RESULT_VALUES(X)                                                            \
    X(CUPTI_SUCCESS, 0)                                                                            \
    X(CUPTI_ERROR_INVALID_PARAMETER, 1)                                                            \
    X(CUPTI_ERROR_INVALID_OPERATION, 7)                                                            \
    X(CUPTI_ERROR_MAX_LIMIT_REACHED, 12)                                                           \
    X(CUPTI_ERROR_NOT_COMPATIBLE, 14)                                                              \
    X(CUPTI_ERROR_NOT_INITIALIZED, 15)                                                             \
    X(CUPTI_ERROR_QUEUE_EMPTY, 18)                                                                 \
    X(CUPTI_ERROR_INVALID_KIND, 21)                                                                \
    X(CUPTI_ERROR_NOT_SUPPORTED, 27)                                                               \
    X(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, 39)                                          \
    X(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED, 43)                                                    \
    X(CUPTI_ERROR_UNKNOWN, 999)
/* clang-format on */

/* clang-format off */
#define CUPTIMON_CUPTI_ACTIVITY_KIND_VALUES(X)                                                     \
    X(CUPTI_ACTIVITY_KIND_INVALID, 0)                                                              \
    X(CUPTI_ACTIVITY_KIND_MEMCPY, 1)                                                               \
    X(CUPTI_ACTIVITY_KIND_MEMSET, 2)                                                               \
    X(CUPTI_ACTIVITY_KIND_KERNEL, 3)                                                               \
    X(CUPTI_ACTIVITY_KIND_DRIVER, 4)                                                               \
    X(CUPTI_ACTIVITY_KIND_RUNTIME, 5)                                                              \
    X(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 10)                                                   \
    X(CUPTI_ACTIVITY_KIND_MARKER, 12)                                                              \
    X(CUPTI_ACTIVITY_KIND_MARKER_DATA, 13)                                                         \
    X(CUPTI_ACTIVITY_KIND_OVERHEAD, 17)                                                            \
    X(CUPTI_ACTIVITY_KIND_MEMCPY2, 22)                                                             \
    X(CUPTI_ACTIVITY_KIND_CUDA_EVENT, 36)                                                          \
    X(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, 38)                                                     \
    X(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, 39)
/* clang-format on */

/* clang-format off */
#define CUPTIMON_CUPTI_ACTIVITY_OBJECT_KIND_VALUES(X)                                              \
    X(CUPTI_ACTIVITY_OBJECT_PROCESS, 1)                                                            \
    X(CUPTI_ACTIVITY_OBJECT_THREAD, 2)
/* clang-format on */

/* clang-format off */
#define CUPTIMON_CUPTI_ACTIVITY_FLAG_VALUES(X)                                                     \
    X(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, 1)                                                         \
    X(CUPTI_ACTIVITY_FLAG_MARKER_START, 2)                                                         \
    X(CUPTI_ACTIVITY_FLAG_MARKER_END, 4)
/* clang-format on */

/* clang-format off */
#define CUPTIMON_CUPTI_EXTERNAL_CORRELATION_KIND_VALUES(X)                                         \
    X(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 4)
/* clang-format on */

/* clang-format off */
#define CUPTIMON_CUPTI_ACTIVITY_ATTRIBUTE_VALUES(X)                                                \
    X(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, 5)
/* clang-format on */

/* clang-format off */
#define CUPTIMON_CUPTI_THREAD_ID_TYPE_VALUES(X) X(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM, 1)
/* clang-format on */

/* clang-format off */
#define CUPTIMON_CUPTI_CALLBACK_DOMAIN_VALUES(X) X(CUPTI_CB_DOMAIN_RESOURCE, 3)
/* clang-format on */

/* Callback ids the shim turns off in the runtime and driver API kinds (the
 * calls frameworks make thousands of times a step).  Ids are appended to,
 * never renumbered, in cupti_runtime_cbid.h and cupti_driver_cbid.h. */
/* clang-format off */
#define CUPTIMON_CUPTI_RUNTIME_CBID_VALUES(X)                                                      \
    X(CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020, 10)                                         \
    X(CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020, 16)                                            \
    X(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 17)                                            \
    X(CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020, 133)                                         \
    X(CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020, 134)                                \
    X(CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020, 136)
/* clang-format on */

/* clang-format off */
#define CUPTIMON_CUPTI_DRIVER_CBID_VALUES(X)                                                       \
    X(CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, 304)                                                \
    X(CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState, 392)                                     \
    X(CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute, 686)
/* clang-format on */

/* Macros (not enumerators) CUPTI defines: X(name, value). */
/* clang-format off */
#define CUPTIMON_CUPTI_MACRO_VALUES(X)                                                             \
    X(CUPTI_TIMESTAMP_UNKNOWN, 0)                                                                  \
    X(CUPTI_SUBSCRIBER_NAME_MAX_LEN, 53)                                                           \
    X(CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN, 64)
/* clang-format on */

/* Enum types, all int-sized (each CUPTI enum ends in a FORCE_INT member of
 * 0x7fffffff): X(type). */
/* clang-format off */
#define CUPTIMON_CUPTI_ENUM_TYPES(X)                                                               \
    X(CUptiResult)                                                                                 \
    X(CUpti_ActivityKind)                                                                          \
    X(CUpti_ActivityObjectKind)                                                                    \
    X(CUpti_ActivityFlag)                                                                          \
    X(CUpti_ExternalCorrelationKind)                                                               \
    X(CUpti_ActivityAttribute)                                                                     \
    X(CUpti_ActivityThreadIdType)                                                                  \
    X(CUpti_CallbackDomain)
/* clang-format on */

/* The record header every activity record starts with: S(type, size,
 * alignment), F(type, member, offset, size). */
#define CUPTIMON_CUPTI_STRUCTS(S, F)                                                               \
    S(CUpti_Activity, 8, 8)                                                                        \
    F(CUpti_Activity, kind, 0, 4)

/* Callback types: X(return type, name, parameter list). */
/* clang-format off */
#define CUPTIMON_CUPTI_CALLBACK_TYPES(X)                                                           \
    X(void, CUpti_BuffersCallbackRequestFunc,                                                      \
      (uint8_t **buffer, size_t *size, size_t *maxNumRecords))                                  \
    X(void, CUpti_BuffersCallbackCompleteFunc,                                                     \
      (CUcontext context, uint32_t streamId, uint8_t *buffer, size_t size, size_t validSize))     \
    X(uint64_t, CUpti_TimestampCallbackFunc, (void))                                               \
    X(void, CUpti_CallbackFunc,                                                                    \
      (void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata))
/* clang-format on */

/* The entry points the shim resolves in the process's libcupti (dlsym) or
 * interposes (client-lib/mux.c): X(return type, name, parameter list). */
/* clang-format off */
#define CUPTIMON_CUPTI_FUNCTIONS(X)                                                                \
    X(CUptiResult, cuptiGetVersion, (uint32_t *version))                                          \
    X(CUptiResult, cuptiGetResultString, (CUptiResult result, const char **str))                   \
    X(CUptiResult, cuptiGetTimestamp, (uint64_t *timestamp))                                      \
    X(CUptiResult, cuptiFinalize, (void))                                                          \
    X(CUptiResult, cuptiSetThreadIdType, (CUpti_ActivityThreadIdType type))                        \
    X(CUptiResult, cuptiActivityRegisterCallbacks,                                                 \
      (CUpti_BuffersCallbackRequestFunc funcBufferRequested,                                       \
       CUpti_BuffersCallbackCompleteFunc funcBufferCompleted))                                     \
    X(CUptiResult, cuptiActivityRegisterTimestampCallback,                                         \
      (CUpti_TimestampCallbackFunc funcTimestamp))                                                 \
    X(CUptiResult, cuptiActivityEnable, (CUpti_ActivityKind kind))                                 \
    X(CUptiResult, cuptiActivityDisable, (CUpti_ActivityKind kind))                                \
    X(CUptiResult, cuptiActivityFlushAll, (uint32_t flag))                                         \
    X(CUptiResult, cuptiActivityGetNextRecord,                                                     \
      (uint8_t *buffer, size_t validBufferSizeBytes, CUpti_Activity **record))                   \
    X(CUptiResult, cuptiActivityGetNumDroppedRecords,                                              \
      (CUcontext context, uint32_t streamId, size_t *dropped))                                    \
    X(CUptiResult, cuptiActivitySetAttribute,                                                      \
      (CUpti_ActivityAttribute attr, size_t *valueSize, void *value))                             \
    X(CUptiResult, cuptiActivityPushExternalCorrelationId,                                         \
      (CUpti_ExternalCorrelationKind kind, uint64_t id))                                           \
    X(CUptiResult, cuptiActivityPopExternalCorrelationId,                                          \
      (CUpti_ExternalCorrelationKind kind, uint64_t *lastId))                                     \
    X(CUptiResult, cuptiActivityEnableRuntimeApi, (CUpti_CallbackId cbid, uint8_t enable))         \
    X(CUptiResult, cuptiActivityEnableDriverApi, (CUpti_CallbackId cbid, uint8_t enable))         \
    X(CUptiResult, cuptiSubscribe_v2,                                                              \
      (CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata,            \
       CUpti_SubscriberParams *pParams))                                                           \
    X(CUptiResult, cuptiUnsubscribe, (CUpti_SubscriberHandle subscriber))
/* clang-format on */

/* ---- CUPTI 13.2+ / 13.3+: multiple subscribers and user-defined records
 * (the header comment names the sources).  Checked against a toolkit's
 * headers only from CUPTI_API_VERSION 130300 on (13.4's additions from
 * 130400 on). */

/* CUpti_ActivityAttribute values added in 13.2 (names as in 13.3). */
/* clang-format off */
#define CUPTIMON_CUPTI_V2_ATTRIBUTE_VALUES(X)                                                      \
    X(CUPTI_ACTIVITY_ATTR_USER_DEFINED_RECORDS, 11)                                                \
    X(CUPTI_ACTIVITY_ATTR_MULTIPLE_SUBSCRIBER_STATE, 12)                                           \
    X(CUPTI_ACTIVITY_ATTR_ENABLE_HES, 13)                                                          \
    X(CUPTI_ACTIVITY_ATTR_ENABLE_ALLOCATION_SOURCE_TRACKING, 14)                                   \
    X(CUPTI_ACTIVITY_ATTR_ENABLE_KERNEL_LATENCY_TIMESTAMPS, 15)                                    \
    X(CUPTI_ACTIVITY_ATTR_ENABLE_ALL_SYNC_RECORDS, 16)                                             \
    X(CUPTI_ACTIVITY_ATTR_ENABLE_CUDA_EVENT_DEVICE_TIMESTAMPS, 17)                                 \
    X(CUPTI_ACTIVITY_ATTR_ENABLE_KERNEL_LAUNCH_ATTRIBUTES, 18)                                     \
    X(CUPTI_ACTIVITY_ATTR_ENABLE_DEVICE_GRAPH_TRACE, 19)                                           \
    X(CUPTI_ACTIVITY_ATTR_ENABLE_MULTI_SUBSCRIBER_GRAPH_TRACE, 20)                                 \
    X(CUPTI_ACTIVITY_ATTR_THREAD_ID_TYPE, 21)                                                      \
    X(CUPTI_ACTIVITY_ATTR_TIMESTAMP_CALLBACK, 22)                                                  \
    X(CUPTI_ACTIVITY_ATTR_ENABLE_CIG_MODE, 23)
/* clang-format on */

/* The user-defined record field ids of the kinds cuptimon enables, per
 * CUPTI enum type: F(enum type, list).  KIND is 0 in every kind and must
 * come first in a selection. */
/* clang-format off */
#define CUPTIMON_CUPTI_KERNEL_FIELD_VALUES(X)                                                      \
    X(KERNEL_FIELD_KIND, 0) X(KERNEL_FIELD_CACHE_CONFIG_REQUESTED, 1)                              \
    X(KERNEL_FIELD_CACHE_CONFIG_EXECUTED, 2) X(KERNEL_FIELD_SHARED_MEMORY_CONFIG, 3)               \
    X(KERNEL_FIELD_REGISTERS_PER_THREAD, 4) X(KERNEL_FIELD_PARTITIONED_GLOBAL_CACHE_REQUESTED, 5)  \
    X(KERNEL_FIELD_PARTITIONED_GLOBAL_CACHE_EXECUTED, 6) X(KERNEL_FIELD_START, 7)                  \
    X(KERNEL_FIELD_END, 8) X(KERNEL_FIELD_COMPLETED, 9) X(KERNEL_FIELD_DEVICE_ID, 10)              \
    X(KERNEL_FIELD_CONTEXT_ID, 11) X(KERNEL_FIELD_STREAM_ID, 12) X(KERNEL_FIELD_GRID_X, 13)        \
    X(KERNEL_FIELD_GRID_Y, 14) X(KERNEL_FIELD_GRID_Z, 15) X(KERNEL_FIELD_BLOCK_X, 16)              \
    X(KERNEL_FIELD_BLOCK_Y, 17) X(KERNEL_FIELD_BLOCK_Z, 18)                                        \
    X(KERNEL_FIELD_STATIC_SHARED_MEMORY, 19) X(KERNEL_FIELD_DYNAMIC_SHARED_MEMORY, 20)             \
    X(KERNEL_FIELD_LOCAL_MEMORY_PER_THREAD, 21) X(KERNEL_FIELD_CORRELATION_ID, 22)                 \
    X(KERNEL_FIELD_GRID_ID, 23) X(KERNEL_FIELD_NAME, 24) X(KERNEL_FIELD_QUEUED, 25)                \
    X(KERNEL_FIELD_SUBMITTED, 26) X(KERNEL_FIELD_LAUNCH_TYPE, 27)                                  \
    X(KERNEL_FIELD_IS_SHARED_MEMORY_CARVEOUT_REQUESTED, 28)                                        \
    X(KERNEL_FIELD_SHARED_MEMORY_CARVEOUT_REQUESTED, 29) X(KERNEL_FIELD_SHARED_MEMORY_EXECUTED, 30) \
    X(KERNEL_FIELD_GRAPH_NODE_ID, 31) X(KERNEL_FIELD_SHMEM_LIMIT_CONFIG, 32)                       \
    X(KERNEL_FIELD_GRAPH_ID, 33) X(KERNEL_FIELD_ACCESS_POLICY_WINDOW, 34)                          \
    X(KERNEL_FIELD_CHANNEL_ID, 35) X(KERNEL_FIELD_CHANNEL_TYPE, 36) X(KERNEL_FIELD_CLUSTER_X, 37)  \
    X(KERNEL_FIELD_CLUSTER_Y, 38) X(KERNEL_FIELD_CLUSTER_Z, 39)                                    \
    X(KERNEL_FIELD_CLUSTER_SCHEDULING_POLICY, 40) X(KERNEL_FIELD_LOCAL_MEMORY_TOTAL, 41)           \
    X(KERNEL_FIELD_MAX_POTENTIAL_CLUSTER_SIZE, 42) X(KERNEL_FIELD_MAX_ACTIVE_CLUSTERS, 43)         \
    X(KERNEL_FIELD_IS_DEVICE_LAUNCHED, 44) X(KERNEL_FIELD_LAUNCH_PRIORITY, 45)                     \
    X(KERNEL_FIELD_EXECUTION_MODEL, 46)
#define CUPTIMON_CUPTI_MEMCPY_FIELD_VALUES(X)                                                      \
    X(MEMCPY_FIELD_KIND, 0) X(MEMCPY_FIELD_COPY_KIND, 1) X(MEMCPY_FIELD_SRC_KIND, 2)               \
    X(MEMCPY_FIELD_DST_KIND, 3) X(MEMCPY_FIELD_FLAGS, 4) X(MEMCPY_FIELD_BYTES, 5)                  \
    X(MEMCPY_FIELD_START, 6) X(MEMCPY_FIELD_END, 7) X(MEMCPY_FIELD_DEVICE_ID, 8)                   \
    X(MEMCPY_FIELD_CONTEXT_ID, 9) X(MEMCPY_FIELD_STREAM_ID, 10) X(MEMCPY_FIELD_CORRELATION_ID, 11) \
    X(MEMCPY_FIELD_GRAPH_NODE_ID, 12) X(MEMCPY_FIELD_GRAPH_ID, 13) X(MEMCPY_FIELD_CHANNEL_ID, 14)  \
    X(MEMCPY_FIELD_CHANNEL_TYPE, 15) X(MEMCPY_FIELD_IS_DEVICE_LAUNCHED, 16)                        \
    X(MEMCPY_FIELD_COPY_COUNT, 17)
#define CUPTIMON_CUPTI_MEMCPY2_FIELD_VALUES(X)                                                     \
    X(MEMCPY2_FIELD_KIND, 0) X(MEMCPY2_FIELD_COPY_KIND, 1) X(MEMCPY2_FIELD_SRC_KIND, 2)            \
    X(MEMCPY2_FIELD_DST_KIND, 3) X(MEMCPY2_FIELD_FLAGS, 4) X(MEMCPY2_FIELD_BYTES, 5)               \
    X(MEMCPY2_FIELD_START, 6) X(MEMCPY2_FIELD_END, 7) X(MEMCPY2_FIELD_DEVICE_ID, 8)                \
    X(MEMCPY2_FIELD_CONTEXT_ID, 9) X(MEMCPY2_FIELD_STREAM_ID, 10)                                  \
    X(MEMCPY2_FIELD_SRC_DEVICE_ID, 11) X(MEMCPY2_FIELD_SRC_CONTEXT_ID, 12)                         \
    X(MEMCPY2_FIELD_DST_DEVICE_ID, 13) X(MEMCPY2_FIELD_DST_CONTEXT_ID, 14)                         \
    X(MEMCPY2_FIELD_CORRELATION_ID, 15) X(MEMCPY2_FIELD_GRAPH_NODE_ID, 16)                         \
    X(MEMCPY2_FIELD_GRAPH_ID, 17) X(MEMCPY2_FIELD_CHANNEL_ID, 18) X(MEMCPY2_FIELD_CHANNEL_TYPE, 19)
#define CUPTIMON_CUPTI_MEMSET_FIELD_VALUES(X)                                                      \
    X(MEMSET_FIELD_KIND, 0) X(MEMSET_FIELD_VALUE, 1) X(MEMSET_FIELD_BYTES, 2)                      \
    X(MEMSET_FIELD_START, 3) X(MEMSET_FIELD_END, 4) X(MEMSET_FIELD_DEVICE_ID, 5)                   \
    X(MEMSET_FIELD_CONTEXT_ID, 6) X(MEMSET_FIELD_STREAM_ID, 7) X(MEMSET_FIELD_CORRELATION_ID, 8)   \
    X(MEMSET_FIELD_FLAGS, 9) X(MEMSET_FIELD_MEMORY_KIND, 10) X(MEMSET_FIELD_GRAPH_NODE_ID, 11)     \
    X(MEMSET_FIELD_GRAPH_ID, 12) X(MEMSET_FIELD_CHANNEL_ID, 13) X(MEMSET_FIELD_CHANNEL_TYPE, 14)   \
    X(MEMSET_FIELD_IS_DEVICE_LAUNCHED, 15)
#define CUPTIMON_CUPTI_API_FIELD_VALUES(X)                                                         \
    X(API_FIELD_KIND, 0) X(API_FIELD_CBID, 1) X(API_FIELD_START, 2) X(API_FIELD_END, 3)            \
    X(API_FIELD_PROCESS_ID, 4) X(API_FIELD_THREAD_ID, 5) X(API_FIELD_CORRELATION_ID, 6)            \
    X(API_FIELD_RETURN_VALUE, 7)
#define CUPTIMON_CUPTI_EXTERNAL_CORRELATION_FIELD_VALUES(X)                                        \
    X(EXTERNAL_CORRELATION_FIELD_KIND, 0) X(EXTERNAL_CORRELATION_FIELD_EXTERNAL_KIND, 1)           \
    X(EXTERNAL_CORRELATION_FIELD_EXTERNAL_ID, 2) X(EXTERNAL_CORRELATION_FIELD_CORRELATION_ID, 3)
#define CUPTIMON_CUPTI_OVERHEAD_FIELD_VALUES(X)                                                    \
    X(OVERHEAD_FIELD_KIND, 0) X(OVERHEAD_FIELD_OVERHEAD_KIND, 1) X(OVERHEAD_FIELD_PROCESS_ID, 2)   \
    X(OVERHEAD_FIELD_THREAD_ID, 3) X(OVERHEAD_FIELD_START, 4) X(OVERHEAD_FIELD_END, 5)             \
    X(OVERHEAD_FIELD_CORRELATION_ID, 6) X(OVERHEAD_FIELD_OVERHEAD_DATA, 7)
#define CUPTIMON_CUPTI_CUDA_EVENT_FIELD_VALUES(X)                                                  \
    X(CUDA_EVENT_FIELD_KIND, 0) X(CUDA_EVENT_FIELD_CORRELATION_ID, 1)                              \
    X(CUDA_EVENT_FIELD_CONTEXT_ID, 2) X(CUDA_EVENT_FIELD_STREAM_ID, 3)                             \
    X(CUDA_EVENT_FIELD_EVENT_ID, 4) X(CUDA_EVENT_FIELD_DEVICE_ID, 5)                               \
    X(CUDA_EVENT_FIELD_DEVICE_TIMESTAMP, 6) X(CUDA_EVENT_FIELD_CUDA_EVENT_SYNC_ID, 7)
#define CUPTIMON_CUPTI_SYNCHRONIZATION_FIELD_VALUES(X)                                             \
    X(SYNCHRONIZATION_FIELD_KIND, 0) X(SYNCHRONIZATION_FIELD_TYPE, 1)                              \
    X(SYNCHRONIZATION_FIELD_START, 2) X(SYNCHRONIZATION_FIELD_END, 3)                              \
    X(SYNCHRONIZATION_FIELD_CORRELATION_ID, 4) X(SYNCHRONIZATION_FIELD_CONTEXT_ID, 5)              \
    X(SYNCHRONIZATION_FIELD_STREAM_ID, 6) X(SYNCHRONIZATION_FIELD_CUDA_EVENT_ID, 7)                \
    X(SYNCHRONIZATION_FIELD_CUDA_EVENT_SYNC_ID, 8) X(SYNCHRONIZATION_FIELD_RETURN_VALUE, 9)
#define CUPTIMON_CUPTI_MARKER_FIELD_VALUES(X)                                                      \
    X(MARKER_FIELD_KIND, 0) X(MARKER_FIELD_FLAGS, 1) X(MARKER_FIELD_TIMESTAMP, 2)                  \
    X(MARKER_FIELD_ID, 3) X(MARKER_FIELD_PROCESS_ID, 4) X(MARKER_FIELD_THREAD_ID, 5)               \
    X(MARKER_FIELD_NAME, 6) X(MARKER_FIELD_DOMAIN, 7)
#define CUPTIMON_CUPTI_MARKER_DATA_FIELD_VALUES(X)                                                 \
    X(MARKER_DATA_FIELD_KIND, 0) X(MARKER_DATA_FIELD_FLAGS, 1) X(MARKER_DATA_FIELD_ID, 2)          \
    X(MARKER_DATA_FIELD_PAYLOAD_KIND, 3) X(MARKER_DATA_FIELD_PAYLOAD, 4)                           \
    X(MARKER_DATA_FIELD_COLOR, 5) X(MARKER_DATA_FIELD_CATEGORY, 6)                                 \
    X(MARKER_DATA_FIELD_CUPTI_DOMAIN_ID, 7)
#define CUPTIMON_CUPTI_V2_FIELD_ENUMS(F)                                                           \
    F(CUpti_ActivityKernelFieldIds, CUPTIMON_CUPTI_KERNEL_FIELD_VALUES)                            \
    F(CUpti_ActivityMemcpyFieldIds, CUPTIMON_CUPTI_MEMCPY_FIELD_VALUES)                            \
    F(CUpti_ActivityMemcpy2FieldIds, CUPTIMON_CUPTI_MEMCPY2_FIELD_VALUES)                          \
    F(CUpti_ActivityMemsetFieldIds, CUPTIMON_CUPTI_MEMSET_FIELD_VALUES)                            \
    F(CUpti_ActivityApiFieldIds, CUPTIMON_CUPTI_API_FIELD_VALUES)                                  \
    F(CUpti_ActivityExternalCorrelationFieldIds, CUPTIMON_CUPTI_EXTERNAL_CORRELATION_FIELD_VALUES) \
    F(CUpti_ActivityOverheadFieldIds, CUPTIMON_CUPTI_OVERHEAD_FIELD_VALUES)                        \
    F(CUpti_ActivityCudaEventFieldIds, CUPTIMON_CUPTI_CUDA_EVENT_FIELD_VALUES)                     \
    F(CUpti_ActivitySynchronizationFieldIds, CUPTIMON_CUPTI_SYNCHRONIZATION_FIELD_VALUES)          \
    F(CUpti_ActivityMarkerFieldIds, CUPTIMON_CUPTI_MARKER_FIELD_VALUES)                            \
    F(CUpti_ActivityMarkerDataFieldIds, CUPTIMON_CUPTI_MARKER_DATA_FIELD_VALUES)
/* clang-format on */

/* The 13.2/13.3 structs, LP64: S(type, size, alignment), F(type, member,
 * offset, size).  CUpti_SubscriberParams' first four members are 13.0's
 * (32 bytes); 13.2 appended allowMultipleSubscribers.  CUpti_ActivityConfig
 * is 32 bytes in 13.2/13.3 (pKindOptions, 13.4, is in the next list). */
/* clang-format off */
#define CUPTIMON_CUPTI_V2_STRUCTS(S, F)                                                            \
    S(CUpti_SubscriberParams, 40, 8)                                                               \
    F(CUpti_SubscriberParams, structSize, 0, 8)                                                    \
    F(CUpti_SubscriberParams, subscriberName, 8, 8)                                                \
    F(CUpti_SubscriberParams, oldSubscriberName, 16, 8)                                            \
    F(CUpti_SubscriberParams, oldSubscriberSize, 24, 8)                                            \
    F(CUpti_SubscriberParams, allowMultipleSubscribers, 32, 1)                                     \
    S(CUpti_ActivityFieldSelection, 24, 8)                                                         \
    F(CUpti_ActivityFieldSelection, structSize, 0, 8)                                              \
    F(CUpti_ActivityFieldSelection, numFields, 8, 8)                                               \
    F(CUpti_ActivityFieldSelection, pFieldIds, 16, 8)                                              \
    F(CUpti_ActivityConfig, structSize, 0, 8)                                                      \
    F(CUpti_ActivityConfig, fieldSelection, 8, 24)                                                 \
    S(CUpti_BufferCallbackRequestInfo, 8, 8)                                                       \
    F(CUpti_BufferCallbackRequestInfo, structSize, 0, 8)                                           \
    S(CUpti_BufferCallbackCompleteInfo, 32, 8)                                                     \
    F(CUpti_BufferCallbackCompleteInfo, structSize, 0, 8)                                          \
    F(CUpti_BufferCallbackCompleteInfo, threadId, 8, 8)                                            \
    F(CUpti_BufferCallbackCompleteInfo, ppRecordLayouts, 16, 8)                                    \
    F(CUpti_BufferCallbackCompleteInfo, numRecordLayouts, 24, 8)                                   \
    S(CUpti_ActivityRecordLayout, 32, 8)                                                           \
    F(CUpti_ActivityRecordLayout, structSize, 0, 8)                                                \
    F(CUpti_ActivityRecordLayout, pEntries, 8, 8)                                                  \
    F(CUpti_ActivityRecordLayout, numFields, 16, 8)                                                \
    F(CUpti_ActivityRecordLayout, recordSize, 24, 8)                                               \
    S(CUpti_ActivityFieldLayoutEntry, 40, 8)                                                       \
    F(CUpti_ActivityFieldLayoutEntry, structSize, 0, 8)                                            \
    F(CUpti_ActivityFieldLayoutEntry, fieldId, 8, 4)                                               \
    F(CUpti_ActivityFieldLayoutEntry, offset, 16, 8)                                               \
    F(CUpti_ActivityFieldLayoutEntry, size, 24, 8)                                                 \
    F(CUpti_ActivityFieldLayoutEntry, alignment, 32, 8)
/* 13.4: CUpti_ActivityConfig.pKindOptions (40 bytes), which for RUNTIME
 * and DRIVER points to CUpti_ActivityApiOptions (a per-cbid allow or deny
 * list under user-defined records). */
#define CUPTIMON_CUPTI_V2_134_STRUCTS(S, F)                                                        \
    S(CUpti_ActivityConfig, 40, 8)                                                                 \
    F(CUpti_ActivityConfig, pKindOptions, 32, 8)                                                   \
    S(CUpti_ActivityApiOptions, 16, 8)                                                             \
    F(CUpti_ActivityApiOptions, structSize, 0, 8)                                                  \
    F(CUpti_ActivityApiOptions, pCbidOptions, 8, 8)                                                \
    S(CUpti_ActivityApiCbidOptions, 32, 8)                                                         \
    F(CUpti_ActivityApiCbidOptions, structSize, 0, 8)                                              \
    F(CUpti_ActivityApiCbidOptions, pCbids, 8, 8)                                                  \
    F(CUpti_ActivityApiCbidOptions, numCbids, 16, 8)                                               \
    F(CUpti_ActivityApiCbidOptions, enable, 24, 1)
/* clang-format on */

/* clang-format off */
#define CUPTIMON_CUPTI_V2_CALLBACK_TYPES(X)                                                        \
    X(void, CUpti_BuffersCallbackRequestFunc_v2,                                                   \
      (uint8_t **buffer, size_t *size, size_t *maxNumRecords,                                      \
       CUpti_BufferCallbackRequestInfo *pBufferRequestInfo))                                       \
    X(void, CUpti_BuffersCallbackCompleteFunc_v2,                                                  \
      (uint8_t *buffer, size_t size, size_t validSize,                                             \
       CUpti_BufferCallbackCompleteInfo *pBufferCompleteInfo))
/* clang-format on */

/* The per-subscriber entry points (13.2: attributes, callbacks, enable;
 * 13.3: the rest).  There is no cuptiActivityFlushAll_v2: in
 * multi-subscriber mode cuptiActivityFlushAll flushes every subscriber. */
/* clang-format off */
#define CUPTIMON_CUPTI_V2_FUNCTIONS(X)                                                             \
    X(CUptiResult, cuptiActivitySetAttribute_v2,                                                   \
      (CUpti_SubscriberHandle subscriber, CUpti_ActivityAttribute attr, size_t *valueSize,         \
       void *value))                                                                               \
    X(CUptiResult, cuptiActivityGetAttribute_v2,                                                   \
      (CUpti_SubscriberHandle subscriber, CUpti_ActivityAttribute attr, size_t *valueSize,         \
       void *value))                                                                               \
    X(CUptiResult, cuptiActivityRegisterCallbacks_v2,                                              \
      (CUpti_SubscriberHandle subscriber,                                                          \
       CUpti_BuffersCallbackRequestFunc_v2 funcBufferRequested,                                    \
       CUpti_BuffersCallbackCompleteFunc_v2 funcBufferCompleted))                                  \
    X(CUptiResult, cuptiActivityEnable_v2,                                                         \
      (CUpti_SubscriberHandle subscriber, CUpti_ActivityKind kind,                                 \
       CUpti_ActivityConfig *pActivityConfig))                                                     \
    X(CUptiResult, cuptiActivityDisable_v2,                                                        \
      (CUpti_SubscriberHandle subscriber, CUpti_ActivityKind kind,                                 \
       CUpti_ActivityConfig *pActivityConfig))                                                     \
    X(CUptiResult, cuptiActivityGetNextRecord_v2,                                                  \
      (CUpti_SubscriberHandle subscriber, uint8_t *buffer, size_t validBufferSizeBytes,            \
       CUpti_Activity **record))                                                                   \
    X(CUptiResult, cuptiActivityGetNumDroppedRecords_v2,                                           \
      (CUpti_SubscriberHandle subscriber, CUcontext context, uint32_t streamId, size_t *dropped))  \
    X(CUptiResult, cuptiGetTimestamp_v2, (CUpti_SubscriberHandle subscriber, uint64_t *timestamp)) \
    X(CUptiResult, cuptiActivityPushExternalCorrelationId_v2,                                      \
      (CUpti_SubscriberHandle subscriber, CUpti_ExternalCorrelationKind kind, uint64_t id))        \
    X(CUptiResult, cuptiActivityPopExternalCorrelationId_v2,                                       \
      (CUpti_SubscriberHandle subscriber, CUpti_ExternalCorrelationKind kind, uint64_t *lastId))   \
    X(CUptiResult, cuptiActivityEnableRuntimeApi_v2,                                               \
      (CUpti_SubscriberHandle subscriber, CUpti_CallbackId cbid, uint8_t enable))                  \
    X(CUptiResult, cuptiActivityEnableDriverApi_v2,                                                \
      (CUpti_SubscriberHandle subscriber, CUpti_CallbackId cbid, uint8_t enable))
/* clang-format on */

#if !defined(CUPTIMON_CUPTI_ABI_LISTS_ONLY) && !defined(CUPTIMON_CUPTI_ABI_V2_ONLY)

/* CUPTI's calling convention: empty except on Windows. */
#ifndef CUPTIAPI
#define CUPTIAPI
#endif

#define CUPTIMON_CUPTI_ENUMERATOR_(name, value) name = value,

typedef enum {
    CUPTIMON_CUPTI_RESULT_VALUES(CUPTIMON_CUPTI_ENUMERATOR_)
    CUPTIMON_CUPTI_RESULT_FORCE_INT_ = 0x7fffffff
} CUptiResult;

typedef enum {
    CUPTIMON_CUPTI_ACTIVITY_KIND_VALUES(CUPTIMON_CUPTI_ENUMERATOR_)
    CUPTIMON_CUPTI_ACTIVITY_KIND_FORCE_INT_ = 0x7fffffff
} CUpti_ActivityKind;

typedef enum {
    CUPTIMON_CUPTI_ACTIVITY_OBJECT_KIND_VALUES(CUPTIMON_CUPTI_ENUMERATOR_)
    CUPTIMON_CUPTI_ACTIVITY_OBJECT_FORCE_INT_ = 0x7fffffff
} CUpti_ActivityObjectKind;

typedef enum {
    CUPTIMON_CUPTI_ACTIVITY_FLAG_VALUES(CUPTIMON_CUPTI_ENUMERATOR_)
    CUPTIMON_CUPTI_ACTIVITY_FLAG_FORCE_INT_ = 0x7fffffff
} CUpti_ActivityFlag;

typedef enum {
    CUPTIMON_CUPTI_EXTERNAL_CORRELATION_KIND_VALUES(CUPTIMON_CUPTI_ENUMERATOR_)
    CUPTIMON_CUPTI_EXTERNAL_CORRELATION_KIND_FORCE_INT_ = 0x7fffffff
} CUpti_ExternalCorrelationKind;

typedef enum {
    CUPTIMON_CUPTI_ACTIVITY_ATTRIBUTE_VALUES(CUPTIMON_CUPTI_ENUMERATOR_)
    CUPTIMON_CUPTI_V2_ATTRIBUTE_VALUES(CUPTIMON_CUPTI_ENUMERATOR_)
        CUPTIMON_CUPTI_ACTIVITY_ATTRIBUTE_FORCE_INT_ = 0x7fffffff
} CUpti_ActivityAttribute;

typedef enum {
    CUPTIMON_CUPTI_THREAD_ID_TYPE_VALUES(CUPTIMON_CUPTI_ENUMERATOR_)
    CUPTIMON_CUPTI_THREAD_ID_TYPE_FORCE_INT_ = 0x7fffffff
} CUpti_ActivityThreadIdType;

/* Callback ids are plain integers in CUPTI's API (the enums only name
 * them), so these are constants, not a type. */
enum {
    CUPTIMON_CUPTI_RUNTIME_CBID_VALUES(CUPTIMON_CUPTI_ENUMERATOR_)
    CUPTIMON_CUPTI_DRIVER_CBID_VALUES(CUPTIMON_CUPTI_ENUMERATOR_)
};
typedef uint32_t CUpti_CallbackId;

typedef enum {
    CUPTIMON_CUPTI_CALLBACK_DOMAIN_VALUES(CUPTIMON_CUPTI_ENUMERATOR_)
    CUPTIMON_CUPTI_CALLBACK_DOMAIN_FORCE_INT_ = 0x7fffffff
} CUpti_CallbackDomain;

/* A CUPTI subscriber (cuptiSubscribe_v2). */
typedef struct CUpti_Subscriber_st *CUpti_SubscriberHandle;

#define CUPTI_SUBSCRIBER_NAME_MAX_LEN     53
#define CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN 64

/* cuptiSubscribe_v2's parameters as 13.2 and later have them (13.0 and
 * 13.1: the first four members, 32 bytes; structSize says which). */
typedef struct {
    size_t structSize;
    const char *subscriberName;       /* copied by CUPTI; at most 53 bytes */
    char *oldSubscriberName;          /* out: who is in the way, when refused */
    size_t oldSubscriberSize;         /* at least 64 */
    uint8_t allowMultipleSubscribers; /* 13.2: the first subscriber decides for all */
    uint8_t padding[7];
} CUpti_SubscriberParams;

#define CUPTI_TIMESTAMP_UNKNOWN 0LL

/* Not CUPTI's: the bound on kind numbers cuptimon passes on to CUPTI (a
 * kind asked for by number, in CUPTIMON_ACTIVITIES or a window).  It is
 * CUDA 13.0's CUPTI_ACTIVITY_KIND_COUNT; that count grows with each
 * release, so it is not taken from a header.  A CUPTI that lacks a kind
 * below it refuses to enable it, and the shim says so. */
#define CUPTIMON_ACTIVITY_KIND_LIMIT 56u

/* The driver's context handle, as cuda.h declares it: the shim only passes
 * it through and uses its value as an id. */
typedef struct CUctx_st *CUcontext;

/* Every activity record begins with its kind; CUPTI packs records with
 * 8-byte alignment. */
typedef struct __attribute__((__packed__, __aligned__(8))) {
    CUpti_ActivityKind kind;
} CUpti_Activity;

#define CUPTIMON_CUPTI_CALLBACK_TYPEDEF_(ret, name, params) typedef ret(CUPTIAPI *name) params;
CUPTIMON_CUPTI_CALLBACK_TYPES(CUPTIMON_CUPTI_CALLBACK_TYPEDEF_)

#define CUPTIMON_CUPTI_PROTOTYPE_(ret, name, params) ret CUPTIAPI name params;
CUPTIMON_CUPTI_FUNCTIONS(CUPTIMON_CUPTI_PROTOTYPE_)

/* cuptiActivityGetStructSize, CUPTI 13.2 and later: newer than the headers
 * test-cupti-abi.c checks, so a type here and not in the lists.  From
 * NVIDIA's CUPTI Activity API reference (docs.nvidia.com/cupti/api/
 * group__CUPTI__ACTIVITY__API.html): "cuptiActivityGetStructSize(
 * CUpti_ActivityKind activityKind, uint32_t version, size_t
 * *activityStructSize)", the size of a predefined activity struct; version
 * 0 is the running CUPTI's, a non-zero version below 130000 gives
 * CUPTI_ERROR_NOT_SUPPORTED.  The shim resolves it with dlsym and calls it
 * only where cuptiGetVersion reports 130200 or later (the per-session
 * layout check, client-lib/shim.c). */
typedef CUptiResult(CUPTIAPI *cuptimon_get_struct_size_fn)(CUpti_ActivityKind activityKind,
                                                           uint32_t version,
                                                           size_t *activityStructSize);

/* The declarations above agree with the lists (the lists are what the
 * test checks against CUPTI's headers). */
#define CUPTIMON_CUPTI_SIZE_CHECK_(type)                                                           \
    _Static_assert(sizeof(type) == 4, #type " is int-sized, as in CUPTI");
CUPTIMON_CUPTI_ENUM_TYPES(CUPTIMON_CUPTI_SIZE_CHECK_)
#define CUPTIMON_CUPTI_STRUCT_CHECK_(type, size, align)                                            \
    _Static_assert(sizeof(type) == (size) && _Alignof(type) == (align), #type "'s "                \
                                                                              "size/alignment");
#define CUPTIMON_CUPTI_FIELD_CHECK_(type, member, off, size)                                       \
    _Static_assert(offsetof(type, member) == (off) && sizeof(((type *)0)->member) == (size),       \
                   #type "." #member "'s offset/size");
CUPTIMON_CUPTI_STRUCTS(CUPTIMON_CUPTI_STRUCT_CHECK_, CUPTIMON_CUPTI_FIELD_CHECK_)
#define CUPTIMON_CUPTI_MACRO_CHECK_(name, value)                                                   \
    _Static_assert((name) == (value), #name " agrees with its list entry");
CUPTIMON_CUPTI_MACRO_VALUES(CUPTIMON_CUPTI_MACRO_CHECK_)

#endif /* the base declarations */

/* ---- the 13.2+ declarations (for the product; and for the test double
 * while the installed headers are older than 13.3) ---------------------- */
#if !defined(CUPTIMON_CUPTI_ABI_LISTS_ONLY) &&                                                     \
    (!defined(CUPTIMON_CUPTI_ABI_V2_ONLY) || !defined(CUPTI_API_VERSION) ||                        \
     CUPTI_API_VERSION < 130300)

#ifndef CUPTIAPI
#define CUPTIAPI
#endif
#define CUPTIMON_CUPTI_V2_ENUMERATOR_(name, value) name = value,

#ifdef CUPTIMON_CUPTI_ABI_V2_ONLY
/* The older header's CUpti_ActivityAttribute lacks them. */
enum {
    CUPTIMON_CUPTI_V2_ATTRIBUTE_VALUES(CUPTIMON_CUPTI_V2_ENUMERATOR_)
};
/* The older header's CUpti_SubscriberParams stops before
 * allowMultipleSubscribers: the 13.2 form, under its own name. */
typedef struct {
    size_t structSize;
    const char *subscriberName;
    char *oldSubscriberName;
    size_t oldSubscriberSize;
    uint8_t allowMultipleSubscribers;
    uint8_t padding[7];
} CUpti_SubscriberParams_13_2;
#endif

#define CUPTIMON_CUPTI_FIELD_ENUM_(type, list)                                                     \
    typedef enum {                                                                                 \
        list(CUPTIMON_CUPTI_V2_ENUMERATOR_)                                                        \
    } type;
CUPTIMON_CUPTI_V2_FIELD_ENUMS(CUPTIMON_CUPTI_FIELD_ENUM_)

/* Input: the fields to collect, KIND first. */
typedef struct {
    size_t structSize;
    size_t numFields;
    int *pFieldIds;
} CUpti_ActivityFieldSelection;

/* 13.4: a per-cbid allow (enable 1) or deny (enable 0) list for RUNTIME
 * and DRIVER, through CUpti_ActivityConfig.pKindOptions. */
typedef struct {
    size_t structSize;
    CUpti_CallbackId *pCbids;
    size_t numCbids;
    uint8_t enable;
} CUpti_ActivityApiCbidOptions;

typedef struct {
    size_t structSize;
    CUpti_ActivityApiCbidOptions *pCbidOptions;
} CUpti_ActivityApiOptions;

/* Input to cuptiActivityEnable_v2: 32 bytes in 13.2/13.3, 40 from 13.4
 * (structSize tells CUPTI which: a client sets the size its CUPTI knows). */
typedef struct {
    size_t structSize;
    CUpti_ActivityFieldSelection fieldSelection;
    void *pKindOptions; /* 13.4 */
} CUpti_ActivityConfig;
#define CUPTIMON_ACTIVITY_CONFIG_SIZE_13_2 offsetof(CUpti_ActivityConfig, pKindOptions)
#define CUPTIMON_ACTIVITY_CONFIG_SIZE_13_4 sizeof(CUpti_ActivityConfig)

/* Output, in the completion callback: where each selected field lies. */
typedef struct {
    size_t structSize;
    int fieldId;
    size_t offset;
    size_t size;
    size_t alignment;
} CUpti_ActivityFieldLayoutEntry;

typedef struct {
    size_t structSize;
    CUpti_ActivityFieldLayoutEntry *pEntries;
    size_t numFields;
    size_t recordSize;
} CUpti_ActivityRecordLayout;

typedef struct {
    size_t structSize;
} CUpti_BufferCallbackRequestInfo;

/* ppRecordLayouts is indexed by activity kind (numRecordLayouts entries,
 * NULL for a kind without a user-defined layout) and, like the name
 * pointers in the records, valid only during the completion callback. */
typedef struct {
    size_t structSize;
    uint64_t threadId;
    CUpti_ActivityRecordLayout **ppRecordLayouts;
    size_t numRecordLayouts;
} CUpti_BufferCallbackCompleteInfo;

#define CUPTIMON_CUPTI_V2_CALLBACK_TYPEDEF_(ret, name, params) typedef ret(CUPTIAPI *name) params;
CUPTIMON_CUPTI_V2_CALLBACK_TYPES(CUPTIMON_CUPTI_V2_CALLBACK_TYPEDEF_)

#define CUPTIMON_CUPTI_V2_PROTOTYPE_(ret, name, params) ret CUPTIAPI name params;
CUPTIMON_CUPTI_V2_FUNCTIONS(CUPTIMON_CUPTI_V2_PROTOTYPE_)

/* The sizes the reference gives (the installed headers cannot say yet). */
#ifdef CUPTIMON_CUPTI_ABI_V2_ONLY
#define CUPTIMON_CUPTI_V2_PARAMS_TYPE_ CUpti_SubscriberParams_13_2
#else
#define CUPTIMON_CUPTI_V2_PARAMS_TYPE_ CUpti_SubscriberParams
#endif
#define CUPTIMON_CUPTI_V2_STRUCT_CHECK_(type, size, align)                                         \
    _Static_assert(sizeof(type) == (size) && _Alignof(type) == (align), #type "'s "                \
                                                                              "size/alignment");
#define CUPTIMON_CUPTI_V2_FIELD_CHECK_(type, member, off, size)                                    \
    _Static_assert(offsetof(type, member) == (off) && sizeof(((type *)0)->member) == (size),       \
                   #type "." #member "'s offset/size");
#define CUpti_SubscriberParams CUPTIMON_CUPTI_V2_PARAMS_TYPE_
CUPTIMON_CUPTI_V2_STRUCTS(CUPTIMON_CUPTI_V2_STRUCT_CHECK_, CUPTIMON_CUPTI_V2_FIELD_CHECK_)
#undef CUpti_SubscriberParams
CUPTIMON_CUPTI_V2_134_STRUCTS(CUPTIMON_CUPTI_V2_STRUCT_CHECK_, CUPTIMON_CUPTI_V2_FIELD_CHECK_)

#endif /* the 13.2+ declarations */
#endif
