/*
 * The part of NCCL's profiler plugin ABI that cuptimon uses, declared by the
 * project (as proto/cupti-abi.h does for CUPTI) so that cuptimon builds
 * without NCCL.
 *
 * Source: the NCCL repository, plugins/profiler/README.md and
 * plugins/profiler/example/nccl/profiler.h, profiler_v1.h ... profiler_v6.h
 * (the headers NCCL asks plugins to copy: "plugins should copy the
 * ncclProfiler_vX definitions they support to their internal includes").
 * The member names are NCCL's; the layouts are theirs exactly (LP64), down
 * to the padding the compiler puts between members, which is why every
 * union member is declared even where cuptimon reads none of it: a union's
 * size is its largest member's.  The static asserts at the end hold the
 * sizes and offsets worked out by hand from those headers; a change in the
 * declarations here that moves a byte fails the build.
 *
 * NCCL looks up the symbol ncclProfiler_vN (newest it knows first) in the
 * plugin and calls through the struct it finds.  Each version:
 *  v1 (2.23): init(context, mask); func, datatype, algo, proto are small
 *     enums; each event carries its communicator's name and hash.
 *  v2 (2.24): those become strings; coll carries trafficBytes.
 *  v3 (2.25 to 2.27.2): kernel channel events (no GPU timer yet).
 *  v4 (2.27.3 on): init carries the communicator (name, hash, nodes,
 *     ranks, rank); events no longer do; kernel channels carry the GPU's
 *     globaltimer at start (descriptor) and stop (state args).
 *  v5 (2.28.3 on): type widens to 64 bits, init's comm id moves first, API
 *     events (group/collective/p2p API, kernel launch).
 *  v6 (2.29+): copy-engine collectives (CeColl, CeSync, CeBatch).
 */
#ifndef CUPTIMON_NCCL_ABI_H
#define CUPTIMON_NCCL_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
} ncclResult_t;

typedef enum {
    NCCL_LOG_NONE = 0,
    NCCL_LOG_VERSION = 1,
    NCCL_LOG_WARN = 2,
    NCCL_LOG_INFO = 3,
    NCCL_LOG_ABORT = 4,
    NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file,
                                  int line, const char *fmt, ...);

/* Event types (profiler.h). */
enum {
    ncclProfileGroup = (1 << 0),
    ncclProfileColl = (1 << 1),
    ncclProfileP2p = (1 << 2),
    ncclProfileProxyOp = (1 << 3),
    ncclProfileProxyStep = (1 << 4),
    ncclProfileProxyCtrl = (1 << 5),
    ncclProfileKernelCh = (1 << 6),
    ncclProfileNetPlugin = (1 << 7),
    ncclProfileGroupApi = (1 << 8),
    ncclProfileCollApi = (1 << 9),
    ncclProfileP2pApi = (1 << 10),
    ncclProfileKernelLaunch = (1 << 11),
    ncclProfileCeColl = (1 << 12),
    ncclProfileCeSync = (1 << 13),
    ncclProfileCeBatch = (1 << 14),
};

/* The states cuptimon acts on (profiler.h's ncclProfilerEventState_t; one
 * enum for every version). */
typedef enum {
    ncclProfilerKernelChStop = 22,
    ncclProfilerCeCollStart = 25,
    ncclProfilerCeCollComplete = 26,
} ncclProfilerEventState_t;

/* ---- v1 ---------------------------------------------------------------- */

typedef struct {
    uint8_t type;
    void *parentObj;
    int rank;
    union {
        struct {
            const char *name;
            uint64_t commHash;
            uint64_t seqNumber;
            uint8_t func;
            void const *sendBuff;
            void *recvBuff;
            size_t count;
            int root;
            uint8_t datatype;
            uint32_t op;
            size_t trafficBytes;
            uint8_t nMaxChannels;
            uint8_t nWarps;
            uint8_t algo;
            uint8_t proto;
            int isCollnet;
            int isNvls;
        } coll;
        struct {
            const char *name;
            uint64_t commHash;
            uint8_t func;
            void *buff;
            uint8_t datatype;
            size_t count;
            int peer;
        } p2p;
        struct {
            pid_t pid;
            uint8_t channelId;
            int peer;
            int nSteps;
            int chunkSize;
            int isSend;
        } proxyOp;
        struct {
            int step;
        } proxyStep;
    };
} ncclProfilerEventDescr_v1_t;

/* v1-v3 share the state args. */
typedef union {
    struct {
        size_t transSize;
        int steps;
    } proxyOp;
    struct {
        int appendedProxyOps;
    } proxyCtrl;
} ncclProfilerEventStateArgs_v1_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, int *eActivationMask);
    ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v1_t *eDescr);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_t eState,
                                     ncclProfilerEventStateArgs_v1_t *eStateArgs);
    ncclResult_t (*finalize)(void *context);
} ncclProfiler_v1_t;

/* ---- v2 ---------------------------------------------------------------- */

typedef struct {
    uint8_t type;
    void *parentObj;
    int rank;
    union {
        struct {
            const char *name;
            uint64_t commHash;
            uint64_t seqNumber;
            const char *func;
            void const *sendBuff;
            void *recvBuff;
            size_t count;
            int root;
            const char *datatype;
            size_t trafficBytes;
            uint8_t nMaxChannels;
            uint8_t nWarps;
            const char *algo;
            const char *proto;
        } coll;
        struct {
            const char *name;
            uint64_t commHash;
            const char *func;
            void *buff;
            const char *datatype;
            size_t count;
            int peer;
        } p2p;
        struct {
            pid_t pid;
            uint8_t channelId;
            int peer;
            int nSteps;
            int chunkSize;
            int isSend;
        } proxyOp;
        struct {
            int step;
        } proxyStep;
    };
} ncclProfilerEventDescr_v2_t;

typedef ncclProfilerEventStateArgs_v1_t ncclProfilerEventStateArgs_v2_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, int *eActivationMask);
    ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v2_t *eDescr);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_t eState,
                                     ncclProfilerEventStateArgs_v2_t *eStateArgs);
    ncclResult_t (*finalize)(void *context);
} ncclProfiler_v2_t;

/* ---- v3 ---------------------------------------------------------------- */

typedef struct {
    uint8_t type;
    void *parentObj;
    int rank;
    union {
        struct {
            const char *name;
            uint64_t commHash;
            uint64_t seqNumber;
            const char *func;
            void const *sendBuff;
            void *recvBuff;
            size_t count;
            int root;
            const char *datatype;
            uint8_t nMaxChannels;
            uint8_t nWarps;
            const char *algo;
            const char *proto;
        } coll;
        struct {
            const char *name;
            uint64_t commHash;
            const char *func;
            void *buff;
            const char *datatype;
            size_t count;
            int peer;
        } p2p;
        struct {
            pid_t pid;
            uint8_t channelId;
            int peer;
            int nSteps;
            int chunkSize;
            int isSend;
        } proxyOp;
        struct {
            int step;
        } proxyStep;
        struct {
            uint8_t channelId;
        } kernelCh;
        struct {
            int64_t id;
            void *data;
        } netPlugin;
    };
} ncclProfilerEventDescr_v3_t;

typedef ncclProfilerEventStateArgs_v1_t ncclProfilerEventStateArgs_v3_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, int *eActivationMask);
    ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v3_t *eDescr);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_t eState,
                                     ncclProfilerEventStateArgs_v3_t *eStateArgs);
    ncclResult_t (*finalize)(void *context);
} ncclProfiler_v3_t;

/* ---- v4 ---------------------------------------------------------------- */

typedef struct {
    uint8_t type;
    void *parentObj;
    int rank;
    union {
        struct {
            uint64_t seqNumber;
            const char *func;
            void const *sendBuff;
            void *recvBuff;
            size_t count;
            int root;
            const char *datatype;
            uint8_t nChannels;
            uint8_t nWarps;
            const char *algo;
            const char *proto;
        } coll;
        struct {
            const char *func;
            void *buff;
            const char *datatype;
            size_t count;
            int peer;
            uint8_t nChannels;
        } p2p;
        struct {
            pid_t pid;
            uint8_t channelId;
            int peer;
            int nSteps;
            int chunkSize;
            int isSend;
        } proxyOp;
        struct {
            int step;
        } proxyStep;
        struct {
            uint8_t channelId;
            uint64_t pTimer;
        } kernelCh;
        struct {
            int64_t id;
            void *data;
        } netPlugin;
    };
} ncclProfilerEventDescr_v4_t;

/* v4-v6 share the state args (v6 adds kernelStep, 8 bytes like the rest). */
typedef union {
    struct {
        size_t transSize;
    } proxyStep;
    struct {
        int appendedProxyOps;
    } proxyCtrl;
    struct {
        void *data;
    } netPlugin;
    struct {
        uint64_t pTimer;
    } kernelCh;
} ncclProfilerEventStateArgs_v4_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, int *eActivationMask, const char *commName,
                         uint64_t commHash, int nNodes, int nranks, int rank,
                         ncclDebugLogger_t logfn);
    ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v4_t *eDescr);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_t eState,
                                     ncclProfilerEventStateArgs_v4_t *eStateArgs);
    ncclResult_t (*finalize)(void *context);
} ncclProfiler_v4_t;

/* ---- v5 ---------------------------------------------------------------- */

/* The v5 and v6 descriptors' common members, in their order. */
#define CUPTIMON_NCCL_V5_MEMBERS                                                                   \
    struct {                                                                                       \
        bool graphCaptured;                                                                        \
        int groupDepth;                                                                            \
    } groupApi;                                                                                    \
    struct {                                                                                       \
        const char *func;                                                                          \
        size_t count;                                                                              \
        const char *datatype;                                                                      \
        int root;                                                                                  \
        void *stream;                                                                              \
        bool graphCaptured;                                                                        \
    } collApi;                                                                                     \
    struct {                                                                                       \
        const char *func;                                                                          \
        size_t count;                                                                              \
        const char *datatype;                                                                      \
        void *stream;                                                                              \
        bool graphCaptured;                                                                        \
    } p2pApi;                                                                                      \
    struct {                                                                                       \
        void *stream;                                                                              \
    } kernelLaunch;                                                                                \
    struct {                                                                                       \
        uint64_t seqNumber;                                                                        \
        const char *func;                                                                          \
        void const *sendBuff;                                                                      \
        void *recvBuff;                                                                            \
        size_t count;                                                                              \
        int root;                                                                                  \
        const char *datatype;                                                                      \
        uint8_t nChannels;                                                                         \
        uint8_t nWarps;                                                                            \
        const char *algo;                                                                          \
        const char *proto;                                                                         \
        void *parentGroup;                                                                         \
    } coll;                                                                                        \
    struct {                                                                                       \
        const char *func;                                                                          \
        void *buff;                                                                                \
        const char *datatype;                                                                      \
        size_t count;                                                                              \
        int peer;                                                                                  \
        uint8_t nChannels;                                                                         \
        void *parentGroup;                                                                         \
    } p2p;                                                                                         \
    struct {                                                                                       \
        pid_t pid;                                                                                 \
        uint8_t channelId;                                                                         \
        int peer;                                                                                  \
        int nSteps;                                                                                \
        int chunkSize;                                                                             \
        int isSend;                                                                                \
    } proxyOp;                                                                                     \
    struct {                                                                                       \
        int step;                                                                                  \
    } proxyStep;                                                                                   \
    struct {                                                                                       \
        uint8_t channelId;                                                                         \
        uint64_t pTimer;                                                                           \
    } kernelCh;                                                                                    \
    struct {                                                                                       \
        int64_t id;                                                                                \
        void *data;                                                                                \
    } netPlugin;

typedef struct {
    uint64_t type;
    void *parentObj;
    int rank;
    union {
        CUPTIMON_NCCL_V5_MEMBERS
    };
} ncclProfilerEventDescr_v5_t;

typedef ncclProfilerEventStateArgs_v4_t ncclProfilerEventStateArgs_v5_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask,
                         const char *commName, int nNodes, int nranks, int rank,
                         ncclDebugLogger_t logfn);
    ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v5_t *eDescr);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_t eState,
                                     ncclProfilerEventStateArgs_v5_t *eStateArgs);
    ncclResult_t (*finalize)(void *context);
} ncclProfiler_v5_t;

/* ---- v6 ---------------------------------------------------------------- */

typedef struct {
    uint64_t type;
    void *parentObj;
    int rank;
    union {
        CUPTIMON_NCCL_V5_MEMBERS
        struct {
            uint8_t channelId;
            uint8_t isSend;
            uint8_t peer;
            uint32_t step;
            uint32_t size;
            uint64_t startTs;
            uint64_t readyTs;
        } kernelStep;
        struct {
            uint64_t seqNumber;
            const char *func;
            void const *sendBuff;
            void *recvBuff;
            size_t count;
            int root;
            const char *datatype;
            const char *syncStrategy;
            bool intraBatchSync;
            uint32_t batchSize;
            uint32_t numBatches;
            uint32_t ceSeqNum;
            void *stream;
        } ceColl;
        struct {
            bool isComplete;
            int nRanks;
        } ceCollSync;
        struct {
            int numOps;
            size_t totalBytes;
            bool useIntraSync;
        } ceCollBatch;
    };
} ncclProfilerEventDescr_v6_t;

typedef ncclProfilerEventStateArgs_v4_t ncclProfilerEventStateArgs_v6_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask,
                         const char *commName, int nNodes, int nranks, int rank,
                         ncclDebugLogger_t logfn);
    ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v6_t *eDescr);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_t eState,
                                     ncclProfilerEventStateArgs_v6_t *eStateArgs);
    ncclResult_t (*finalize)(void *context);
} ncclProfiler_v6_t;

/* ---- the layouts, worked out by hand from NCCL's headers (LP64) -------- */
#if defined(__x86_64__) || defined(__aarch64__)
#define CUPTIMON_NCCL_AT(T, m, off) _Static_assert(offsetof(T, m) == (off), #T "." #m)
#define CUPTIMON_NCCL_SIZE(T, n)    _Static_assert(sizeof(T) == (n), "sizeof " #T)
CUPTIMON_NCCL_SIZE(ncclProfilerEventDescr_v1_t, 120);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v1_t, coll.seqNumber, 40);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v1_t, coll.func, 48);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v1_t, coll.count, 72);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v1_t, coll.datatype, 84);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v1_t, coll.nMaxChannels, 104);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v1_t, coll.algo, 106);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v1_t, coll.isNvls, 112);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v1_t, p2p.peer, 72);
CUPTIMON_NCCL_SIZE(ncclProfilerEventDescr_v2_t, 128);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v2_t, coll.datatype, 88);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v2_t, coll.nMaxChannels, 104);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v2_t, coll.proto, 120);
CUPTIMON_NCCL_SIZE(ncclProfilerEventDescr_v3_t, 120);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v3_t, coll.nMaxChannels, 96);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v3_t, coll.proto, 112);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v3_t, p2p.peer, 72);
CUPTIMON_NCCL_SIZE(ncclProfilerEventStateArgs_v1_t, 16);
CUPTIMON_NCCL_SIZE(ncclProfilerEventDescr_v4_t, 104);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v4_t, rank, 16);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v4_t, coll.seqNumber, 24);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v4_t, coll.root, 64);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v4_t, coll.nChannels, 80);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v4_t, coll.proto, 96);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v4_t, p2p.nChannels, 60);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v4_t, kernelCh.pTimer, 32);
CUPTIMON_NCCL_SIZE(ncclProfilerEventStateArgs_v4_t, 8);
CUPTIMON_NCCL_SIZE(ncclProfilerEventDescr_v5_t, 112);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v5_t, coll.nChannels, 80);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v5_t, coll.parentGroup, 104);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v5_t, p2p.parentGroup, 64);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v5_t, collApi.graphCaptured, 64);
CUPTIMON_NCCL_SIZE(ncclProfilerEventDescr_v6_t, 112);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v6_t, ceColl.syncStrategy, 80);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v6_t, ceColl.stream, 104);
CUPTIMON_NCCL_AT(ncclProfilerEventDescr_v6_t, kernelStep.readyTs, 48);
CUPTIMON_NCCL_SIZE(ncclProfiler_v6_t, 48);
#undef CUPTIMON_NCCL_AT
#undef CUPTIMON_NCCL_SIZE
#endif

#endif
