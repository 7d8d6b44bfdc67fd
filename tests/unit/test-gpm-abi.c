/*
 * daemon/gpm-cupti.h against the toolkit's CUPTI headers: every parameter
 * struct the daemon's GPU metrics sampler passes to CUPTI (its own names,
 * CUPTI's layout), the sizes CUPTI takes in structSize (the end of the last
 * member, CUPTI_PROFILER_STRUCT_SIZE), the enum values and result codes,
 * and each entry point's signature.  A difference fails the build of this
 * test (static assertions, initialisations of typed pointers), so it fails
 * make check.
 */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include "daemon/gpm-cupti.h"

#define CHECK_STRUCT(ours, theirs)                                                                 \
    _Static_assert(sizeof(struct ours) == sizeof(theirs), #ours " has the size of " #theirs)
#define CHECK_MEMBER(ours, theirs, m)                                                              \
    _Static_assert(offsetof(struct ours, m) == offsetof(theirs, m) &&                              \
                       sizeof(((struct ours *)0)->m) == sizeof(((theirs *)0)->m),                  \
                   #ours "." #m " lies where " #theirs "'s does")
#define CHECK_END(ours, theirs, last)                                                              \
    _Static_assert(GPM_SIZE(struct ours, last) == theirs##_STRUCT_SIZE,                            \
                   #ours " ends where " #theirs "_STRUCT_SIZE says")

CHECK_STRUCT(gpm_profiler_init_params, CUpti_Profiler_Initialize_Params);
CHECK_MEMBER(gpm_profiler_init_params, CUpti_Profiler_Initialize_Params, structSize);
CHECK_MEMBER(gpm_profiler_init_params, CUpti_Profiler_Initialize_Params, pPriv);
CHECK_END(gpm_profiler_init_params, CUpti_Profiler_Initialize_Params, pPriv);
CHECK_STRUCT(gpm_chip_name_params, CUpti_Device_GetChipName_Params);
CHECK_MEMBER(gpm_chip_name_params, CUpti_Device_GetChipName_Params, structSize);
CHECK_MEMBER(gpm_chip_name_params, CUpti_Device_GetChipName_Params, pPriv);
CHECK_MEMBER(gpm_chip_name_params, CUpti_Device_GetChipName_Params, deviceIndex);
CHECK_MEMBER(gpm_chip_name_params, CUpti_Device_GetChipName_Params, pChipName);
CHECK_END(gpm_chip_name_params, CUpti_Device_GetChipName_Params, pChipName);
CHECK_STRUCT(gpm_host_init_params, CUpti_Profiler_Host_Initialize_Params);
CHECK_MEMBER(gpm_host_init_params, CUpti_Profiler_Host_Initialize_Params, structSize);
CHECK_MEMBER(gpm_host_init_params, CUpti_Profiler_Host_Initialize_Params, pPriv);
CHECK_MEMBER(gpm_host_init_params, CUpti_Profiler_Host_Initialize_Params, profilerType);
CHECK_MEMBER(gpm_host_init_params, CUpti_Profiler_Host_Initialize_Params, pChipName);
CHECK_MEMBER(gpm_host_init_params, CUpti_Profiler_Host_Initialize_Params,
             pCounterAvailabilityImage);
CHECK_MEMBER(gpm_host_init_params, CUpti_Profiler_Host_Initialize_Params, pHostObject);
CHECK_END(gpm_host_init_params, CUpti_Profiler_Host_Initialize_Params, pHostObject);
CHECK_STRUCT(gpm_host_deinit_params, CUpti_Profiler_Host_Deinitialize_Params);
CHECK_MEMBER(gpm_host_deinit_params, CUpti_Profiler_Host_Deinitialize_Params, structSize);
CHECK_MEMBER(gpm_host_deinit_params, CUpti_Profiler_Host_Deinitialize_Params, pPriv);
CHECK_MEMBER(gpm_host_deinit_params, CUpti_Profiler_Host_Deinitialize_Params, pHostObject);
CHECK_END(gpm_host_deinit_params, CUpti_Profiler_Host_Deinitialize_Params, pHostObject);
CHECK_STRUCT(gpm_host_add_metrics_params, CUpti_Profiler_Host_ConfigAddMetrics_Params);
CHECK_MEMBER(gpm_host_add_metrics_params, CUpti_Profiler_Host_ConfigAddMetrics_Params, structSize);
CHECK_MEMBER(gpm_host_add_metrics_params, CUpti_Profiler_Host_ConfigAddMetrics_Params, pPriv);
CHECK_MEMBER(gpm_host_add_metrics_params, CUpti_Profiler_Host_ConfigAddMetrics_Params, pHostObject);
CHECK_MEMBER(gpm_host_add_metrics_params, CUpti_Profiler_Host_ConfigAddMetrics_Params,
             ppMetricNames);
CHECK_MEMBER(gpm_host_add_metrics_params, CUpti_Profiler_Host_ConfigAddMetrics_Params, numMetrics);
CHECK_END(gpm_host_add_metrics_params, CUpti_Profiler_Host_ConfigAddMetrics_Params, numMetrics);
CHECK_STRUCT(gpm_host_config_size_params, CUpti_Profiler_Host_GetConfigImageSize_Params);
CHECK_MEMBER(gpm_host_config_size_params, CUpti_Profiler_Host_GetConfigImageSize_Params,
             structSize);
CHECK_MEMBER(gpm_host_config_size_params, CUpti_Profiler_Host_GetConfigImageSize_Params, pPriv);
CHECK_MEMBER(gpm_host_config_size_params, CUpti_Profiler_Host_GetConfigImageSize_Params,
             pHostObject);
CHECK_MEMBER(gpm_host_config_size_params, CUpti_Profiler_Host_GetConfigImageSize_Params,
             configImageSize);
CHECK_END(gpm_host_config_size_params, CUpti_Profiler_Host_GetConfigImageSize_Params,
          configImageSize);
CHECK_STRUCT(gpm_host_config_params, CUpti_Profiler_Host_GetConfigImage_Params);
CHECK_MEMBER(gpm_host_config_params, CUpti_Profiler_Host_GetConfigImage_Params, structSize);
CHECK_MEMBER(gpm_host_config_params, CUpti_Profiler_Host_GetConfigImage_Params, pPriv);
CHECK_MEMBER(gpm_host_config_params, CUpti_Profiler_Host_GetConfigImage_Params, pHostObject);
CHECK_MEMBER(gpm_host_config_params, CUpti_Profiler_Host_GetConfigImage_Params, configImageSize);
CHECK_MEMBER(gpm_host_config_params, CUpti_Profiler_Host_GetConfigImage_Params, pConfigImage);
CHECK_END(gpm_host_config_params, CUpti_Profiler_Host_GetConfigImage_Params, pConfigImage);
CHECK_STRUCT(gpm_host_passes_params, CUpti_Profiler_Host_GetNumOfPasses_Params);
CHECK_MEMBER(gpm_host_passes_params, CUpti_Profiler_Host_GetNumOfPasses_Params, structSize);
CHECK_MEMBER(gpm_host_passes_params, CUpti_Profiler_Host_GetNumOfPasses_Params, pPriv);
CHECK_MEMBER(gpm_host_passes_params, CUpti_Profiler_Host_GetNumOfPasses_Params, configImageSize);
CHECK_MEMBER(gpm_host_passes_params, CUpti_Profiler_Host_GetNumOfPasses_Params, pConfigImage);
CHECK_MEMBER(gpm_host_passes_params, CUpti_Profiler_Host_GetNumOfPasses_Params, numOfPasses);
CHECK_END(gpm_host_passes_params, CUpti_Profiler_Host_GetNumOfPasses_Params, numOfPasses);
CHECK_STRUCT(gpm_host_evaluate_params, CUpti_Profiler_Host_EvaluateToGpuValues_Params);
CHECK_MEMBER(gpm_host_evaluate_params, CUpti_Profiler_Host_EvaluateToGpuValues_Params, structSize);
CHECK_MEMBER(gpm_host_evaluate_params, CUpti_Profiler_Host_EvaluateToGpuValues_Params, pPriv);
CHECK_MEMBER(gpm_host_evaluate_params, CUpti_Profiler_Host_EvaluateToGpuValues_Params, pHostObject);
CHECK_MEMBER(gpm_host_evaluate_params, CUpti_Profiler_Host_EvaluateToGpuValues_Params,
             pCounterDataImage);
CHECK_MEMBER(gpm_host_evaluate_params, CUpti_Profiler_Host_EvaluateToGpuValues_Params,
             counterDataImageSize);
CHECK_MEMBER(gpm_host_evaluate_params, CUpti_Profiler_Host_EvaluateToGpuValues_Params, rangeIndex);
CHECK_MEMBER(gpm_host_evaluate_params, CUpti_Profiler_Host_EvaluateToGpuValues_Params,
             ppMetricNames);
CHECK_MEMBER(gpm_host_evaluate_params, CUpti_Profiler_Host_EvaluateToGpuValues_Params, numMetrics);
CHECK_MEMBER(gpm_host_evaluate_params, CUpti_Profiler_Host_EvaluateToGpuValues_Params,
             pMetricValues);
CHECK_END(gpm_host_evaluate_params, CUpti_Profiler_Host_EvaluateToGpuValues_Params, pMetricValues);
CHECK_STRUCT(gpm_enable_params, CUpti_PmSampling_Enable_Params);
CHECK_MEMBER(gpm_enable_params, CUpti_PmSampling_Enable_Params, structSize);
CHECK_MEMBER(gpm_enable_params, CUpti_PmSampling_Enable_Params, pPriv);
CHECK_MEMBER(gpm_enable_params, CUpti_PmSampling_Enable_Params, deviceIndex);
CHECK_MEMBER(gpm_enable_params, CUpti_PmSampling_Enable_Params, pPmSamplingObject);
CHECK_END(gpm_enable_params, CUpti_PmSampling_Enable_Params, pPmSamplingObject);
CHECK_STRUCT(gpm_set_config_params, CUpti_PmSampling_SetConfig_Params);
CHECK_MEMBER(gpm_set_config_params, CUpti_PmSampling_SetConfig_Params, structSize);
CHECK_MEMBER(gpm_set_config_params, CUpti_PmSampling_SetConfig_Params, pPriv);
CHECK_MEMBER(gpm_set_config_params, CUpti_PmSampling_SetConfig_Params, pPmSamplingObject);
CHECK_MEMBER(gpm_set_config_params, CUpti_PmSampling_SetConfig_Params, configSize);
CHECK_MEMBER(gpm_set_config_params, CUpti_PmSampling_SetConfig_Params, pConfig);
CHECK_MEMBER(gpm_set_config_params, CUpti_PmSampling_SetConfig_Params, hardwareBufferSize);
CHECK_MEMBER(gpm_set_config_params, CUpti_PmSampling_SetConfig_Params, samplingInterval);
CHECK_MEMBER(gpm_set_config_params, CUpti_PmSampling_SetConfig_Params, triggerMode);
CHECK_MEMBER(gpm_set_config_params, CUpti_PmSampling_SetConfig_Params, hwBufferAppendMode);
CHECK_END(gpm_set_config_params, CUpti_PmSampling_SetConfig_Params, hwBufferAppendMode);
CHECK_STRUCT(gpm_availability_params, CUpti_PmSampling_GetCounterAvailability_Params);
CHECK_MEMBER(gpm_availability_params, CUpti_PmSampling_GetCounterAvailability_Params, structSize);
CHECK_MEMBER(gpm_availability_params, CUpti_PmSampling_GetCounterAvailability_Params, pPriv);
CHECK_MEMBER(gpm_availability_params, CUpti_PmSampling_GetCounterAvailability_Params, deviceIndex);
CHECK_MEMBER(gpm_availability_params, CUpti_PmSampling_GetCounterAvailability_Params,
             counterAvailabilityImageSize);
CHECK_MEMBER(gpm_availability_params, CUpti_PmSampling_GetCounterAvailability_Params,
             pCounterAvailabilityImage);
CHECK_END(gpm_availability_params, CUpti_PmSampling_GetCounterAvailability_Params,
          pCounterAvailabilityImage);
CHECK_STRUCT(gpm_data_size_params, CUpti_PmSampling_GetCounterDataSize_Params);
CHECK_MEMBER(gpm_data_size_params, CUpti_PmSampling_GetCounterDataSize_Params, structSize);
CHECK_MEMBER(gpm_data_size_params, CUpti_PmSampling_GetCounterDataSize_Params, pPriv);
CHECK_MEMBER(gpm_data_size_params, CUpti_PmSampling_GetCounterDataSize_Params, pPmSamplingObject);
CHECK_MEMBER(gpm_data_size_params, CUpti_PmSampling_GetCounterDataSize_Params, pMetricNames);
CHECK_MEMBER(gpm_data_size_params, CUpti_PmSampling_GetCounterDataSize_Params, numMetrics);
CHECK_MEMBER(gpm_data_size_params, CUpti_PmSampling_GetCounterDataSize_Params, maxSamples);
CHECK_MEMBER(gpm_data_size_params, CUpti_PmSampling_GetCounterDataSize_Params, counterDataSize);
CHECK_END(gpm_data_size_params, CUpti_PmSampling_GetCounterDataSize_Params, counterDataSize);
CHECK_STRUCT(gpm_data_init_params, CUpti_PmSampling_CounterDataImage_Initialize_Params);
CHECK_MEMBER(gpm_data_init_params, CUpti_PmSampling_CounterDataImage_Initialize_Params, structSize);
CHECK_MEMBER(gpm_data_init_params, CUpti_PmSampling_CounterDataImage_Initialize_Params, pPriv);
CHECK_MEMBER(gpm_data_init_params, CUpti_PmSampling_CounterDataImage_Initialize_Params,
             pPmSamplingObject);
CHECK_MEMBER(gpm_data_init_params, CUpti_PmSampling_CounterDataImage_Initialize_Params,
             counterDataSize);
CHECK_MEMBER(gpm_data_init_params, CUpti_PmSampling_CounterDataImage_Initialize_Params,
             pCounterData);
CHECK_END(gpm_data_init_params, CUpti_PmSampling_CounterDataImage_Initialize_Params, pCounterData);
CHECK_STRUCT(gpm_decode_params, CUpti_PmSampling_DecodeData_Params);
CHECK_MEMBER(gpm_decode_params, CUpti_PmSampling_DecodeData_Params, structSize);
CHECK_MEMBER(gpm_decode_params, CUpti_PmSampling_DecodeData_Params, pPriv);
CHECK_MEMBER(gpm_decode_params, CUpti_PmSampling_DecodeData_Params, pPmSamplingObject);
CHECK_MEMBER(gpm_decode_params, CUpti_PmSampling_DecodeData_Params, pCounterDataImage);
CHECK_MEMBER(gpm_decode_params, CUpti_PmSampling_DecodeData_Params, counterDataImageSize);
CHECK_MEMBER(gpm_decode_params, CUpti_PmSampling_DecodeData_Params, decodeStopReason);
CHECK_MEMBER(gpm_decode_params, CUpti_PmSampling_DecodeData_Params, overflow);
CHECK_END(gpm_decode_params, CUpti_PmSampling_DecodeData_Params, overflow);
CHECK_STRUCT(gpm_data_info_params, CUpti_PmSampling_GetCounterDataInfo_Params);
CHECK_MEMBER(gpm_data_info_params, CUpti_PmSampling_GetCounterDataInfo_Params, structSize);
CHECK_MEMBER(gpm_data_info_params, CUpti_PmSampling_GetCounterDataInfo_Params, pPriv);
CHECK_MEMBER(gpm_data_info_params, CUpti_PmSampling_GetCounterDataInfo_Params, pCounterDataImage);
CHECK_MEMBER(gpm_data_info_params, CUpti_PmSampling_GetCounterDataInfo_Params,
             counterDataImageSize);
CHECK_MEMBER(gpm_data_info_params, CUpti_PmSampling_GetCounterDataInfo_Params, numTotalSamples);
CHECK_MEMBER(gpm_data_info_params, CUpti_PmSampling_GetCounterDataInfo_Params, numPopulatedSamples);
CHECK_MEMBER(gpm_data_info_params, CUpti_PmSampling_GetCounterDataInfo_Params, numCompletedSamples);
CHECK_END(gpm_data_info_params, CUpti_PmSampling_GetCounterDataInfo_Params, numCompletedSamples);
CHECK_STRUCT(gpm_sample_info_params, CUpti_PmSampling_CounterData_GetSampleInfo_Params);
CHECK_MEMBER(gpm_sample_info_params, CUpti_PmSampling_CounterData_GetSampleInfo_Params, structSize);
CHECK_MEMBER(gpm_sample_info_params, CUpti_PmSampling_CounterData_GetSampleInfo_Params, pPriv);
CHECK_MEMBER(gpm_sample_info_params, CUpti_PmSampling_CounterData_GetSampleInfo_Params,
             pPmSamplingObject);
CHECK_MEMBER(gpm_sample_info_params, CUpti_PmSampling_CounterData_GetSampleInfo_Params,
             pCounterDataImage);
CHECK_MEMBER(gpm_sample_info_params, CUpti_PmSampling_CounterData_GetSampleInfo_Params,
             counterDataImageSize);
CHECK_MEMBER(gpm_sample_info_params, CUpti_PmSampling_CounterData_GetSampleInfo_Params,
             sampleIndex);
CHECK_MEMBER(gpm_sample_info_params, CUpti_PmSampling_CounterData_GetSampleInfo_Params,
             startTimestamp);
CHECK_MEMBER(gpm_sample_info_params, CUpti_PmSampling_CounterData_GetSampleInfo_Params,
             endTimestamp);
CHECK_END(gpm_sample_info_params, CUpti_PmSampling_CounterData_GetSampleInfo_Params, endTimestamp);
/* Disable, Start and Stop take one struct in gpm-cupti.h; so do
 * cuptiProfilerInitialize and DeInitialize. */
CHECK_STRUCT(gpm_object_params, CUpti_PmSampling_Disable_Params);
CHECK_STRUCT(gpm_object_params, CUpti_PmSampling_Start_Params);
CHECK_STRUCT(gpm_object_params, CUpti_PmSampling_Stop_Params);
CHECK_MEMBER(gpm_object_params, CUpti_PmSampling_Stop_Params, pPmSamplingObject);
CHECK_MEMBER(gpm_object_params, CUpti_PmSampling_Start_Params, pPmSamplingObject);
CHECK_MEMBER(gpm_object_params, CUpti_PmSampling_Disable_Params, pPmSamplingObject);
CHECK_END(gpm_object_params, CUpti_PmSampling_Start_Params, pPmSamplingObject);
CHECK_END(gpm_object_params, CUpti_PmSampling_Stop_Params, pPmSamplingObject);
CHECK_END(gpm_object_params, CUpti_PmSampling_Disable_Params, pPmSamplingObject);
CHECK_STRUCT(gpm_profiler_init_params, CUpti_Profiler_DeInitialize_Params);
CHECK_END(gpm_profiler_init_params, CUpti_Profiler_DeInitialize_Params, pPriv);

_Static_assert((int)GPM_SUCCESS == (int)CUPTI_SUCCESS, "result");
_Static_assert((int)GPM_ERROR_INVALID_PARAMETER == (int)CUPTI_ERROR_INVALID_PARAMETER, "result");
_Static_assert((int)GPM_ERROR_INVALID_OPERATION == (int)CUPTI_ERROR_INVALID_OPERATION, "result");
_Static_assert((int)GPM_ERROR_OUT_OF_MEMORY == (int)CUPTI_ERROR_OUT_OF_MEMORY, "result");
_Static_assert((int)GPM_ERROR_NOT_INITIALIZED == (int)CUPTI_ERROR_NOT_INITIALIZED, "result");
_Static_assert((int)GPM_ERROR_HARDWARE_BUSY == (int)CUPTI_ERROR_HARDWARE_BUSY, "result");
_Static_assert((int)GPM_ERROR_NOT_SUPPORTED == (int)CUPTI_ERROR_NOT_SUPPORTED, "result");
_Static_assert((int)GPM_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED ==
                   (int)CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED,
               "result");
_Static_assert((int)GPM_ERROR_INSUFFICIENT_PRIVILEGES == (int)CUPTI_ERROR_INSUFFICIENT_PRIVILEGES,
               "result");
_Static_assert((int)GPM_ERROR_CMP_DEVICE_NOT_SUPPORTED == (int)CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED,
               "result");
_Static_assert((int)GPM_ERROR_MIG_DEVICE_NOT_SUPPORTED == (int)CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED,
               "result");
_Static_assert((int)GPM_ERROR_UNKNOWN == (int)CUPTI_ERROR_UNKNOWN, "result");
_Static_assert((int)GPM_PROFILER_TYPE_PM_SAMPLING == (int)CUPTI_PROFILER_TYPE_PM_SAMPLING, "enum");
_Static_assert((int)GPM_TRIGGER_GPU_SYSCLK_INTERVAL ==
                   (int)CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL,
               "enum");
_Static_assert((int)GPM_TRIGGER_GPU_TIME_INTERVAL ==
                   (int)CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL,
               "enum");
_Static_assert((int)GPM_STOP_REASON_OTHER == (int)CUPTI_PM_SAMPLING_DECODE_STOP_REASON_OTHER,
               "enum");
_Static_assert((int)GPM_STOP_REASON_COUNTER_DATA_FULL ==
                   (int)CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL,
               "enum");
_Static_assert((int)GPM_STOP_REASON_END_OF_RECORDS ==
                   (int)CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS,
               "enum");
_Static_assert((int)GPM_APPEND_KEEP_OLDEST ==
                   (int)CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST,
               "enum");
_Static_assert((int)GPM_APPEND_KEEP_LATEST ==
                   (int)CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST,
               "enum");
/* The int members stand for CUPTI's enums. */
_Static_assert(sizeof(CUpti_ProfilerType) == sizeof(int) &&
                   sizeof(CUpti_PmSampling_TriggerMode) == sizeof(int) &&
                   sizeof(CUpti_PmSampling_DecodeStopReason) == sizeof(int) &&
                   sizeof(CUpti_PmSampling_HardwareBuffer_AppendMode) == sizeof(int),
               "enums are ints");

/* Each name gpm.c looks up (GPM_CUPTI_CALLS) is, in this order, a function
 * taking one pointer to the CUPTI struct its entry mirrors: initialising a
 * pointer of that type compiles only then. */
static CUptiResult (*const p1)(CUpti_Profiler_Initialize_Params *) = cuptiProfilerInitialize;
static CUptiResult (*const p2)(CUpti_Profiler_DeInitialize_Params *) = cuptiProfilerDeInitialize;
static CUptiResult (*const p3)(CUpti_Device_GetChipName_Params *) = cuptiDeviceGetChipName;
static CUptiResult (*const p4)(CUpti_Profiler_Host_Initialize_Params *) =
    cuptiProfilerHostInitialize;
static CUptiResult (*const p5)(CUpti_Profiler_Host_Deinitialize_Params *) =
    cuptiProfilerHostDeinitialize;
static CUptiResult (*const p6)(CUpti_Profiler_Host_ConfigAddMetrics_Params *) =
    cuptiProfilerHostConfigAddMetrics;
static CUptiResult (*const p7)(CUpti_Profiler_Host_GetConfigImageSize_Params *) =
    cuptiProfilerHostGetConfigImageSize;
static CUptiResult (*const p8)(CUpti_Profiler_Host_GetConfigImage_Params *) =
    cuptiProfilerHostGetConfigImage;
static CUptiResult (*const p9)(CUpti_Profiler_Host_GetNumOfPasses_Params *) =
    cuptiProfilerHostGetNumOfPasses;
static CUptiResult (*const p10)(CUpti_Profiler_Host_EvaluateToGpuValues_Params *) =
    cuptiProfilerHostEvaluateToGpuValues;
static CUptiResult (*const p11)(CUpti_PmSampling_Enable_Params *) = cuptiPmSamplingEnable;
static CUptiResult (*const p12)(CUpti_PmSampling_Disable_Params *) = cuptiPmSamplingDisable;
static CUptiResult (*const p13)(CUpti_PmSampling_Start_Params *) = cuptiPmSamplingStart;
static CUptiResult (*const p14)(CUpti_PmSampling_Stop_Params *) = cuptiPmSamplingStop;
static CUptiResult (*const p15)(CUpti_PmSampling_SetConfig_Params *) = cuptiPmSamplingSetConfig;
static CUptiResult (*const p16)(CUpti_PmSampling_GetCounterAvailability_Params *) =
    cuptiPmSamplingGetCounterAvailability;
static CUptiResult (*const p17)(CUpti_PmSampling_GetCounterDataSize_Params *) =
    cuptiPmSamplingGetCounterDataSize;
static CUptiResult (*const p18)(CUpti_PmSampling_CounterDataImage_Initialize_Params *) =
    cuptiPmSamplingCounterDataImageInitialize;
static CUptiResult (*const p19)(CUpti_PmSampling_DecodeData_Params *) = cuptiPmSamplingDecodeData;
static CUptiResult (*const p20)(CUpti_PmSampling_GetCounterDataInfo_Params *) =
    cuptiPmSamplingGetCounterDataInfo;
static CUptiResult (*const p21)(CUpti_PmSampling_CounterData_GetSampleInfo_Params *) =
    cuptiPmSamplingCounterDataGetSampleInfo;

/* The names, in GPM_CUPTI_CALLS's order, against the functions above. */
static const char *const names[] = {
#define GPM_NAME(name, sym, params) sym,
    GPM_CUPTI_CALLS(GPM_NAME)
#undef GPM_NAME
};
static const char *const expected[] = {
    "cuptiProfilerInitialize",
    "cuptiProfilerDeInitialize",
    "cuptiDeviceGetChipName",
    "cuptiProfilerHostInitialize",
    "cuptiProfilerHostDeinitialize",
    "cuptiProfilerHostConfigAddMetrics",
    "cuptiProfilerHostGetConfigImageSize",
    "cuptiProfilerHostGetConfigImage",
    "cuptiProfilerHostGetNumOfPasses",
    "cuptiProfilerHostEvaluateToGpuValues",
    "cuptiPmSamplingEnable",
    "cuptiPmSamplingDisable",
    "cuptiPmSamplingStart",
    "cuptiPmSamplingStop",
    "cuptiPmSamplingSetConfig",
    "cuptiPmSamplingGetCounterAvailability",
    "cuptiPmSamplingGetCounterDataSize",
    "cuptiPmSamplingCounterDataImageInitialize",
    "cuptiPmSamplingDecodeData",
    "cuptiPmSamplingGetCounterDataInfo",
    "cuptiPmSamplingCounterDataGetSampleInfo",
};
_Static_assert(sizeof names / sizeof names[0] == sizeof expected / sizeof expected[0],
               "every call listed");

int main(void)
{
    const void *fns[] = {(const void *)p1,  (const void *)p2,  (const void *)p3,  (const void *)p4,
                         (const void *)p5,  (const void *)p6,  (const void *)p7,  (const void *)p8,
                         (const void *)p9,  (const void *)p10, (const void *)p11, (const void *)p12,
                         (const void *)p13, (const void *)p14, (const void *)p15, (const void *)p16,
                         (const void *)p17, (const void *)p18, (const void *)p19, (const void *)p20,
                         (const void *)p21};
    int bad = 0;
    (void)fns;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i], expected[i]) != 0) {
            printf("not ok: gpm-cupti.h looks up %s where %s is checked\n", names[i], expected[i]);
            bad = 1;
        }
    if (!bad)
        printf("ok: daemon/gpm-cupti.h matches the toolkit's CUPTI (%zu calls)\n",
               sizeof names / sizeof names[0]);
    return bad;
}
