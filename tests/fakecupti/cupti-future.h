/*
 * cupti-future.h: the CUPTI activity records newer than the CUDA 13.0 headers this
 * tree is built against, as the test double emits them.  They are the double's own
 * declarations, written independently of cuptimon's layout table (proto/layouts.c):
 * tests/unit/fakecupti-test.c holds them against the facts with their sources
 * (../shared/reference/cupti-layouts-13x.md), tests/unit/test-layouts.c holds the
 * table against them, and the double's records decode correctly only if both agree.
 *
 * 13.1-13.3, header-derived: rust-bindgen's layout of the real CUPTI 13.2.1 and 13.3.0
 * headers (public repository tinrab/singe, singe-cupti-sys/src/cupti_sys_130201.rs and
 * cupti_sys_130300.rs), with CUPTI's packing (packed, 8-byte aligned records):
 *   - Kernel11 (13.1, 13.2): Kernel10 up to isDeviceLaunched (208), Kernel10's
 *     padding3[7] kept, priority (216), padding4: 224 bytes.  NVIDIA's reference page
 *     omits padding3; a transcription of it (216 bytes, priority at 212) was wrong.
 *   - Kernel12 (13.3): Kernel11's members and padding, executionModel (224), padding5:
 *     232 bytes.
 * 13.4, UNVERIFIED (no header-derived source; NVIDIA's reference pages, whose padding is
 * incomplete, by the same pattern of appending after the last padding):
 *   - Kernel13: Kernel12 plus sourceGraphId (232), padding6, sourceGraphNodeId (240):
 *     248 bytes.
 *   - Memcpy7: Memcpy6 plus sourceGraphId (96), pad3, sourceGraphNodeId (104): 112.
 *   - Memset5: Memset4 plus sourceGraphId (88), pad3, sourceGraphNodeId (96): 104.
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
    uint8_t padding3[7];                                                                           \
    int32_t priority;                                                                              \
    uint32_t padding4;

typedef struct FC_PACKED {
    FC_KERNEL11_MEMBERS
} fc_ActivityKernel11;

typedef struct FC_PACKED {
    FC_KERNEL11_MEMBERS
    uint32_t executionModel;
    uint32_t padding5;
} fc_ActivityKernel12;

typedef struct FC_PACKED {
    FC_KERNEL11_MEMBERS
    uint32_t executionModel;
    uint32_t padding5;
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
_Static_assert(sizeof(fc_ActivityKernel11) == 224, "Kernel11 is 224 bytes");
_Static_assert(sizeof(fc_ActivityKernel12) == 232, "Kernel12 is 232 bytes");
_Static_assert(sizeof(fc_ActivityKernel13) == 248, "Kernel13 is 248 bytes");
_Static_assert(sizeof(fc_ActivityMemcpy7) == 112, "Memcpy7 is 112 bytes");
_Static_assert(sizeof(fc_ActivityMemset5) == 104, "Memset5 is 104 bytes");

#endif
