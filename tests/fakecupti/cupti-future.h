/*
 * cupti-future.h: the CUPTI activity records newer than the CUDA 13.0 headers this
 * tree is built against, as the test double emits them.  Transcribed from NVIDIA's
 * CUPTI API reference (docs.nvidia.com/cupti/api/structCUpti__ActivityKernel11.html,
 * ...Kernel12, ...Kernel13, ...Memcpy7, ...Memset5), member for member, with CUPTI's
 * packing (packed, 8-byte aligned records) and its explicit pads.  They are the
 * double's own declarations, written independently of cuptimon's layout table
 * (proto/layouts.c): tests/unit/test-layouts.c holds the table against them, and the
 * double's records decode correctly only if both agree.
 *
 * Where the reference leaves padding undocumented it is spelled out here:
 *   - Kernel11: isDeviceLaunched (208), padding3[3], priority (212): Kernel10's
 *     padding3[7] became 3 pad bytes and the priority.
 *   - Kernel12: executionModel (216), then padding4 to the 8-byte record size (224).
 *   - Kernel13: Kernel12 plus sourceGraphId (224), padding6, sourceGraphNodeId (232).
 */
#ifndef CUPTIMON_FAKECUPTI_FUTURE_H
#define CUPTIMON_FAKECUPTI_FUTURE_H

#include <stdint.h>
#include <cupti_activity.h>

#define FC_PACKED __attribute__((__packed__)) __attribute__((aligned(8)))

/* Kernel11's members, which Kernel12 and Kernel13 extend (one list, so
 * that the three cannot drift apart). */
#define FC_KERNEL11_MEMBERS                                                                        \
    CUpti_ActivityKind kind;                                                                       \
    union {                                                                                        \
        uint8_t both;                                                                              \
        struct {                                                                                   \
            uint8_t requested : 4;                                                                 \
            uint8_t executed : 4;                                                                  \
        } config;                                                                                  \
    } cacheConfig;                                                                                 \
    uint8_t sharedMemoryConfig;                                                                    \
    uint16_t registersPerThread;                                                                   \
    CUpti_ActivityPartitionedGlobalCacheConfig partitionedGlobalCacheRequested;                    \
    CUpti_ActivityPartitionedGlobalCacheConfig partitionedGlobalCacheExecuted;                     \
    uint64_t start;                                                                                \
    uint64_t end;                                                                                  \
    uint64_t completed;                                                                            \
    uint32_t deviceId;                                                                             \
    uint32_t contextId;                                                                            \
    uint32_t streamId;                                                                             \
    int32_t gridX;                                                                                 \
    int32_t gridY;                                                                                 \
    int32_t gridZ;                                                                                 \
    int32_t blockX;                                                                                \
    int32_t blockY;                                                                                \
    int32_t blockZ;                                                                                \
    int32_t staticSharedMemory;                                                                    \
    int32_t dynamicSharedMemory;                                                                   \
    uint32_t localMemoryPerThread;                                                                 \
    uint32_t localMemoryTotal;                                                                     \
    uint32_t correlationId;                                                                        \
    int64_t gridId;                                                                                \
    const char *name;                                                                              \
    void *reserved0;                                                                               \
    uint64_t queued;                                                                               \
    uint64_t submitted;                                                                            \
    uint8_t launchType;                                                                            \
    uint8_t isSharedMemoryCarveoutRequested;                                                       \
    uint8_t sharedMemoryCarveoutRequested;                                                         \
    uint8_t padding;                                                                               \
    uint32_t sharedMemoryExecuted;                                                                 \
    uint64_t graphNodeId;                                                                          \
    CUpti_FuncShmemLimitConfig shmemLimitConfig;                                                   \
    uint32_t graphId;                                                                              \
    CUaccessPolicyWindow *pAccessPolicyWindow;                                                     \
    uint32_t channelID;                                                                            \
    CUpti_ChannelType channelType;                                                                 \
    uint32_t clusterX;                                                                             \
    uint32_t clusterY;                                                                             \
    uint32_t clusterZ;                                                                             \
    uint32_t clusterSchedulingPolicy;                                                              \
    uint64_t localMemoryTotal_v2;                                                                  \
    uint32_t maxPotentialClusterSize;                                                              \
    uint32_t maxActiveClusters;                                                                    \
    uint8_t isDeviceLaunched;                                                                      \
    uint8_t padding3[3];                                                                           \
    int32_t priority;

typedef struct FC_PACKED {
    FC_KERNEL11_MEMBERS
} fc_ActivityKernel11;

typedef struct FC_PACKED {
    FC_KERNEL11_MEMBERS
    uint32_t executionModel;
    uint32_t padding4;
} fc_ActivityKernel12;

typedef struct FC_PACKED {
    FC_KERNEL11_MEMBERS
    uint32_t executionModel;
    uint32_t padding4;
    uint32_t sourceGraphId;
    uint32_t padding6;
    uint64_t sourceGraphNodeId;
} fc_ActivityKernel13;

typedef struct FC_PACKED {
    CUpti_ActivityKind kind;
    uint8_t copyKind;
    uint8_t srcKind;
    uint8_t dstKind;
    uint8_t flags;
    uint64_t bytes;
    uint64_t start;
    uint64_t end;
    uint32_t deviceId;
    uint32_t contextId;
    uint32_t streamId;
    uint32_t correlationId;
    uint32_t runtimeCorrelationId;
#ifdef CUPTILP64
    uint32_t pad;
#endif
    void *reserved0;
    uint64_t graphNodeId;
    uint32_t graphId;
    uint32_t channelID;
    CUpti_ChannelType channelType;
    uint8_t isDeviceLaunched;
    uint8_t pad2[3];
    uint64_t copyCount;
    uint32_t sourceGraphId;
    uint32_t pad3;
    uint64_t sourceGraphNodeId;
} fc_ActivityMemcpy7;

typedef struct FC_PACKED {
    CUpti_ActivityKind kind;
    uint32_t value;
    uint64_t bytes;
    uint64_t start;
    uint64_t end;
    uint32_t deviceId;
    uint32_t contextId;
    uint32_t streamId;
    uint32_t correlationId;
    uint16_t flags;
    uint16_t memoryKind;
#ifdef CUPTILP64
    uint32_t pad;
#endif
    void *reserved0;
    uint64_t graphNodeId;
    uint32_t graphId;
    uint32_t channelID;
    CUpti_ChannelType channelType;
    uint8_t isDeviceLaunched;
    uint8_t pad2[3];
    uint32_t sourceGraphId;
    uint32_t pad3;
    uint64_t sourceGraphNodeId;
} fc_ActivityMemset5;
_Static_assert(sizeof(fc_ActivityKernel11) == 216, "Kernel11 is 216 bytes");
_Static_assert(sizeof(fc_ActivityKernel12) == 224, "Kernel12 is 224 bytes");
_Static_assert(sizeof(fc_ActivityKernel13) == 240, "Kernel13 is 240 bytes");
_Static_assert(sizeof(fc_ActivityMemcpy7) == 112, "Memcpy7 is 112 bytes");
_Static_assert(sizeof(fc_ActivityMemset5) == 104, "Memset5 is 104 bytes");

#endif
