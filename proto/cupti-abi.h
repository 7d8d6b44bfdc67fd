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
 * CUPTI 13.2+ user-defined activity records: what NVIDIA's reference says,
 * and what it does not (written 2026-12-04 for issue 16; nothing below is
 * declared, because nothing in the product calls it yet).
 *
 * Found in the reference (docs.nvidia.com, through the project's
 * documentation search):
 *  - The 13.2.1 Activity API page lists the data structures
 *    CUpti_ActivityFieldLayoutEntry, CUpti_ActivityFieldSelection and
 *    CUpti_ActivityConfig ("Activity configuration").
 *    https://docs.nvidia.com/cupti/13.2.1/api/group__CUPTI__ACTIVITY__API.html
 *  - struct CUpti_ActivityConfig { size_t structSize;
 *    CUpti_ActivityFieldSelection fieldSelection; } (13.2/13.3), and in
 *    13.4 a third member void *pKindOptions (a CUpti_ActivityApiOptions *
 *    for RUNTIME/DRIVER cbid filtering, ignored for other kinds); the
 *    client sets structSize.
 *    https://docs.nvidia.com/cupti/api/structCUpti__ActivityConfig.html
 *    https://docs.nvidia.com/cuda/developer-preview/13.4/cupti/api/structCUpti__ActivityConfig.html
 *  - struct CUpti_BufferCallbackCompleteInfo { size_t structSize (set by
 *    CUPTI); uint64_t threadId; CUpti_ActivityRecordLayout
 *    **ppRecordLayouts ("array of record layouts present in the buffer",
 *    for user-defined records); size_t numRecordLayouts; }.
 *    https://docs.nvidia.com/cupti/api/structCUpti__BufferCallbackCompleteInfo.html
 *  - struct CUpti_BufferCallbackRequestInfo begins with size_t structSize.
 *    https://docs.nvidia.com/cupti/api/structCUpti__BufferCallbackRequestInfo.html
 *  - CUDA 13.2 and older (or drivers before r610) allow one activity
 *    subscriber ("Legacy Initialization").
 *    https://docs.nvidia.com/cupti/13.4.0/main/main.html
 *
 * Not found in the reference through that search (the struct pages of
 * CUpti_ActivityFieldSelection, CUpti_ActivityFieldLayoutEntry and
 * CUpti_ActivityRecordLayout, and the Activity API page's function and
 * enum sections, did not come up): the members and their types of those
 * three structs; the numeric value of CUPTI_ACTIVITY_ATTR_USER_DEFINED_RECORDS;
 * the numeric field ids of each kind; the prototypes of
 * cuptiActivityEnable_v2, cuptiActivitySetAttribute_v2,
 * cuptiActivityRegisterCallbacks_v2 and the _v2 buffer callbacks.  An ABI
 * value is never guessed here (a wrong field id would make CUPTI emit, and
 * the daemon decode, the wrong field under the right name), so the shim
 * does not use user-defined records: with every runtime CUPTI it asks for
 * the standard structs and sends the version and record sizes, exactly as
 * before.  The daemon and cuptimonctl already decode a producer's own
 * description of its records (the hello's "record_layouts", by CUPTI member
 * name: archive/decode.h, cuptimon__layout_init_udr), so the shim side is
 * what is left: declare the entry points and structs above once their
 * definitions are transcribed from a 13.2+ cupti_activity.h, add them to
 * these lists (test-cupti-abi.c then checks them against that header),
 * map CUPTI's field ids to the member names of proto/layouts.h, and send
 * ppRecordLayouts in that form.
 */

#include <stddef.h>
#include <stdint.h>

/* Enumerators, per CUPTI enum type: X(name, value). */
/* clang-format off */
#define CUPTIMON_CUPTI_RESULT_VALUES(X)                                                            \
    X(CUPTI_SUCCESS, 0)                                                                            \
    X(CUPTI_ERROR_INVALID_PARAMETER, 1)                                                            \
    X(CUPTI_ERROR_MAX_LIMIT_REACHED, 12)                                                           \
    X(CUPTI_ERROR_NOT_INITIALIZED, 15)
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
#define CUPTIMON_CUPTI_MACRO_VALUES(X) X(CUPTI_TIMESTAMP_UNKNOWN, 0)
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
    X(CUpti_ActivityThreadIdType)
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
    X(uint64_t, CUpti_TimestampCallbackFunc, (void))
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
    X(CUptiResult, cuptiActivityEnableDriverApi, (CUpti_CallbackId cbid, uint8_t enable))
/* clang-format on */

#ifndef CUPTIMON_CUPTI_ABI_LISTS_ONLY

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

#endif /* CUPTIMON_CUPTI_ABI_LISTS_ONLY */
#endif
