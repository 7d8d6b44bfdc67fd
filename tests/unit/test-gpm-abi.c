/*
 * daemon/gpm-cupti.h against the toolkit's CUPTI headers: every parameter
 * struct the daemon's GPU metrics sampler passes to CUPTI (its own names,
 * CUPTI's layout), the sizes CUPTI takes in structSize (the end of the last
 * member, CUPTI_PROFILER_STRUCT_SIZE), the enum values and result codes,
 * and each entry point's signature.  A difference fails the build of this
 * test (static assertions), so it fails
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
 * taking one pointer to the CUPTI struct its entry mirrors.  __typeof__ does
 * not evaluate its operand, so the test needs no libcupti to link against
 * (a sanitizer build keeps references an optimising one drops). */
#define CHECK_FN(fn, params)                                                                       \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), CUptiResult (*)(params *)),       \
                   #fn " takes a " #params " *")
CHECK_FN(cuptiProfilerInitialize, CUpti_Profiler_Initialize_Params);
CHECK_FN(cuptiProfilerDeInitialize, CUpti_Profiler_DeInitialize_Params);
CHECK_FN(cuptiDeviceGetChipName, CUpti_Device_GetChipName_Params);
CHECK_FN(cuptiProfilerHostInitialize, CUpti_Profiler_Host_Initialize_Params);
CHECK_FN(cuptiProfilerHostDeinitialize, CUpti_Profiler_Host_Deinitialize_Params);
CHECK_FN(cuptiProfilerHostConfigAddMetrics, CUpti_Profiler_Host_ConfigAddMetrics_Params);
CHECK_FN(cuptiProfilerHostGetConfigImageSize, CUpti_Profiler_Host_GetConfigImageSize_Params);
CHECK_FN(cuptiProfilerHostGetConfigImage, CUpti_Profiler_Host_GetConfigImage_Params);
CHECK_FN(cuptiProfilerHostGetNumOfPasses, CUpti_Profiler_Host_GetNumOfPasses_Params);
CHECK_FN(cuptiProfilerHostEvaluateToGpuValues, CUpti_Profiler_Host_EvaluateToGpuValues_Params);
CHECK_FN(cuptiPmSamplingEnable, CUpti_PmSampling_Enable_Params);
CHECK_FN(cuptiPmSamplingDisable, CUpti_PmSampling_Disable_Params);
CHECK_FN(cuptiPmSamplingStart, CUpti_PmSampling_Start_Params);
CHECK_FN(cuptiPmSamplingStop, CUpti_PmSampling_Stop_Params);
CHECK_FN(cuptiPmSamplingSetConfig, CUpti_PmSampling_SetConfig_Params);
CHECK_FN(cuptiPmSamplingGetCounterAvailability, CUpti_PmSampling_GetCounterAvailability_Params);
CHECK_FN(cuptiPmSamplingGetCounterDataSize, CUpti_PmSampling_GetCounterDataSize_Params);
CHECK_FN(cuptiPmSamplingCounterDataImageInitialize,
         CUpti_PmSampling_CounterDataImage_Initialize_Params);
CHECK_FN(cuptiPmSamplingDecodeData, CUpti_PmSampling_DecodeData_Params);
CHECK_FN(cuptiPmSamplingGetCounterDataInfo, CUpti_PmSampling_GetCounterDataInfo_Params);
CHECK_FN(cuptiPmSamplingCounterDataGetSampleInfo,
         CUpti_PmSampling_CounterData_GetSampleInfo_Params);

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
    int bad = 0;
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
