/*
 * The parts of CUPTI's PM Sampling, Profiler Host and Profiler Target APIs
 * (CUPTI 12.6+) and of the CUDA driver API that the daemon's GPU metrics
 * sampler (gpm.c) calls, declared here as the shim's CUPTI subset is
 * (proto/cupti-abi.h): the daemon builds without a CUDA toolkit and
 * reaches libcupti and libcuda at run time, with dlopen.
 *
 * Each parameter struct is CUPTI's, member for member, under names of our
 * own (so that tests/unit/test-gpm-abi.c can include both and compare every
 * offset and size).  CUPTI takes a struct's size in structSize as the end
 * of its last member (CUPTI_PROFILER_STRUCT_SIZE), not sizeof: GPM_SIZE
 * below.  CUPTI only appends members and never renumbers a result, so one
 * declaration serves every release that has these calls.  The facts on the
 * H200 these rely on: docs/reference-pmsampling.md and
 * docs/gpu-runs/20261205-h200-pmprobe.
 */
#ifndef CUPTIMON_GPM_CUPTI_H
#define CUPTIMON_GPM_CUPTI_H

#include <stddef.h>
#include <stdint.h>

#define GPM_SIZE(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))

typedef int gpm_result; /* CUptiResult */
enum {
    GPM_SUCCESS = 0,
    GPM_ERROR_INVALID_PARAMETER = 1,
    GPM_ERROR_INVALID_OPERATION = 7,
    GPM_ERROR_OUT_OF_MEMORY = 8,
    GPM_ERROR_NOT_INITIALIZED = 15,
    GPM_ERROR_HARDWARE_BUSY = 26,
    GPM_ERROR_NOT_SUPPORTED = 27,
    GPM_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED = 33,
    GPM_ERROR_INSUFFICIENT_PRIVILEGES = 35,
    GPM_ERROR_CMP_DEVICE_NOT_SUPPORTED = 42,
    GPM_ERROR_MIG_DEVICE_NOT_SUPPORTED = 43,
    GPM_ERROR_UNKNOWN = 999,
};

/* CUpti_ProfilerType, CUpti_PmSampling_TriggerMode, ..._DecodeStopReason,
 * ..._HardwareBuffer_AppendMode (int-sized enums). */
enum {
    GPM_PROFILER_TYPE_PM_SAMPLING = 1
};
enum {
    GPM_TRIGGER_GPU_SYSCLK_INTERVAL = 0,
    GPM_TRIGGER_GPU_TIME_INTERVAL = 1
};
enum {
    GPM_STOP_REASON_OTHER = 0,
    GPM_STOP_REASON_COUNTER_DATA_FULL = 1,
    GPM_STOP_REASON_END_OF_RECORDS = 2,
};
enum {
    GPM_APPEND_KEEP_OLDEST = 0,
    GPM_APPEND_KEEP_LATEST = 1
};

/* cupti_profiler_target.h */
struct gpm_profiler_init_params { /* CUpti_Profiler_Initialize_Params */
    size_t structSize;
    void *pPriv;
};
/* cupti_target.h */
struct gpm_chip_name_params { /* CUpti_Device_GetChipName_Params */
    size_t structSize;
    void *pPriv;
    size_t deviceIndex;
    const char *pChipName;
};

/* cupti_profiler_host.h */
struct gpm_host_init_params { /* CUpti_Profiler_Host_Initialize_Params */
    size_t structSize;
    void *pPriv;
    int profilerType;
    const char *pChipName;
    const uint8_t *pCounterAvailabilityImage;
    void *pHostObject;
};
struct gpm_host_deinit_params { /* CUpti_Profiler_Host_Deinitialize_Params */
    size_t structSize;
    void *pPriv;
    void *pHostObject;
};
struct gpm_host_add_metrics_params { /* CUpti_Profiler_Host_ConfigAddMetrics_Params */
    size_t structSize;
    void *pPriv;
    void *pHostObject;
    const char **ppMetricNames;
    size_t numMetrics;
};
struct gpm_host_config_size_params { /* CUpti_Profiler_Host_GetConfigImageSize_Params */
    size_t structSize;
    void *pPriv;
    void *pHostObject;
    size_t configImageSize;
};
struct gpm_host_config_params { /* CUpti_Profiler_Host_GetConfigImage_Params */
    size_t structSize;
    void *pPriv;
    void *pHostObject;
    size_t configImageSize;
    uint8_t *pConfigImage;
};
struct gpm_host_passes_params { /* CUpti_Profiler_Host_GetNumOfPasses_Params */
    size_t structSize;
    void *pPriv;
    size_t configImageSize;
    uint8_t *pConfigImage;
    size_t numOfPasses;
};
struct gpm_host_evaluate_params { /* CUpti_Profiler_Host_EvaluateToGpuValues_Params */
    size_t structSize;
    void *pPriv;
    void *pHostObject;
    const uint8_t *pCounterDataImage;
    size_t counterDataImageSize;
    size_t rangeIndex;
    const char **ppMetricNames;
    size_t numMetrics;
    double *pMetricValues;
};

/* cupti_pmsampling.h */
struct gpm_enable_params { /* CUpti_PmSampling_Enable_Params */
    size_t structSize;
    void *pPriv;
    size_t deviceIndex;
    void *pPmSamplingObject;
};
struct gpm_object_params { /* CUpti_PmSampling_{Disable,Start,Stop}_Params */
    size_t structSize;
    void *pPriv;
    void *pPmSamplingObject;
};
struct gpm_set_config_params { /* CUpti_PmSampling_SetConfig_Params */
    size_t structSize;
    void *pPriv;
    void *pPmSamplingObject;
    size_t configSize;
    const uint8_t *pConfig;
    size_t hardwareBufferSize;
    uint64_t samplingInterval;
    int triggerMode;
    int hwBufferAppendMode;
};
struct gpm_availability_params { /* CUpti_PmSampling_GetCounterAvailability_Params */
    size_t structSize;
    void *pPriv;
    size_t deviceIndex;
    size_t counterAvailabilityImageSize;
    uint8_t *pCounterAvailabilityImage;
};
struct gpm_data_size_params { /* CUpti_PmSampling_GetCounterDataSize_Params */
    size_t structSize;
    void *pPriv;
    void *pPmSamplingObject;
    const char **pMetricNames;
    size_t numMetrics;
    uint32_t maxSamples;
    size_t counterDataSize;
};
struct gpm_data_init_params { /* CUpti_PmSampling_CounterDataImage_Initialize_Params */
    size_t structSize;
    void *pPriv;
    void *pPmSamplingObject;
    size_t counterDataSize;
    uint8_t *pCounterData;
};
struct gpm_decode_params { /* CUpti_PmSampling_DecodeData_Params */
    size_t structSize;
    void *pPriv;
    void *pPmSamplingObject;
    uint8_t *pCounterDataImage;
    size_t counterDataImageSize;
    int decodeStopReason;
    uint8_t overflow;
};
struct gpm_data_info_params { /* CUpti_PmSampling_GetCounterDataInfo_Params */
    size_t structSize;
    void *pPriv;
    const uint8_t *pCounterDataImage;
    size_t counterDataImageSize;
    size_t numTotalSamples;
    size_t numPopulatedSamples;
    size_t numCompletedSamples;
};
struct gpm_sample_info_params { /* CUpti_PmSampling_CounterData_GetSampleInfo_Params */
    size_t structSize;
    void *pPriv;
    void *pPmSamplingObject;
    const uint8_t *pCounterDataImage;
    size_t counterDataImageSize;
    size_t sampleIndex;
    uint64_t startTimestamp;
    uint64_t endTimestamp;
};

/* The entry points, as function types, with the library that has each.
 * X(name, symbol, params type) for CUPTI's (all take one params pointer). */
#define GPM_CUPTI_CALLS(X)                                                                         \
    X(ProfilerInitialize, "cuptiProfilerInitialize", struct gpm_profiler_init_params)              \
    X(ProfilerDeInitialize, "cuptiProfilerDeInitialize", struct gpm_profiler_init_params)          \
    X(DeviceGetChipName, "cuptiDeviceGetChipName", struct gpm_chip_name_params)                    \
    X(HostInitialize, "cuptiProfilerHostInitialize", struct gpm_host_init_params)                  \
    X(HostDeinitialize, "cuptiProfilerHostDeinitialize", struct gpm_host_deinit_params)            \
    X(HostConfigAddMetrics, "cuptiProfilerHostConfigAddMetrics",                                   \
      struct gpm_host_add_metrics_params)                                                          \
    X(HostGetConfigImageSize, "cuptiProfilerHostGetConfigImageSize",                               \
      struct gpm_host_config_size_params)                                                          \
    X(HostGetConfigImage, "cuptiProfilerHostGetConfigImage", struct gpm_host_config_params)        \
    X(HostGetNumOfPasses, "cuptiProfilerHostGetNumOfPasses", struct gpm_host_passes_params)        \
    X(HostEvaluateToGpuValues, "cuptiProfilerHostEvaluateToGpuValues",                             \
      struct gpm_host_evaluate_params)                                                             \
    X(Enable, "cuptiPmSamplingEnable", struct gpm_enable_params)                                   \
    X(Disable, "cuptiPmSamplingDisable", struct gpm_object_params)                                 \
    X(Start, "cuptiPmSamplingStart", struct gpm_object_params)                                     \
    X(Stop, "cuptiPmSamplingStop", struct gpm_object_params)                                       \
    X(SetConfig, "cuptiPmSamplingSetConfig", struct gpm_set_config_params)                         \
    X(GetCounterAvailability, "cuptiPmSamplingGetCounterAvailability",                             \
      struct gpm_availability_params)                                                              \
    X(GetCounterDataSize, "cuptiPmSamplingGetCounterDataSize", struct gpm_data_size_params)        \
    X(CounterDataImageInitialize, "cuptiPmSamplingCounterDataImageInitialize",                     \
      struct gpm_data_init_params)                                                                 \
    X(DecodeData, "cuptiPmSamplingDecodeData", struct gpm_decode_params)                           \
    X(GetCounterDataInfo, "cuptiPmSamplingGetCounterDataInfo", struct gpm_data_info_params)        \
    X(GetSampleInfo, "cuptiPmSamplingCounterDataGetSampleInfo", struct gpm_sample_info_params)

struct gpm_api {
    void *cupti, *cuda; /* dlopen handles */
#define GPM_FN(name, sym, params) gpm_result (*name)(params *);
    GPM_CUPTI_CALLS(GPM_FN)
#undef GPM_FN
    gpm_result (*GetResultString)(gpm_result, const char **);
    gpm_result (*GetTimestamp)(uint64_t *);
    /* libcuda (CUresult is an int; CUdevice an int; CUuuid 16 bytes) */
    int (*cuInit)(unsigned int);
    int (*cuDeviceGetCount)(int *);
    int (*cuDeviceGet)(int *, int);
    int (*cuDeviceGetName)(char *, int, int);
    int (*cuDeviceGetUuid)(unsigned char[16], int);
    int (*cuDeviceGetPCIBusId)(char *, int, int);
    int (*cuDriverGetVersion)(int *);
};

#endif
