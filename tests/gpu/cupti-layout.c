/*
 * Prints, as JSON, the CUPTI record layouts that tests/gpu/check.py reads
 * archives with: record sizes by activity kind and the field offsets it uses,
 * taken from the CUPTI headers this is compiled against (offsetof/sizeof).
 * check.py carries the CUDA 13.0 values built in and uses this file's output
 * (tests/gpu/build/cupti-layout.json, written by build.sh) when present.
 */
#include <stddef.h>
#include <stdio.h>

#include <cupti_activity.h>
#include <cupti_version.h>

#define F(T, f)                                                                                    \
    printf("%s\"%s\": [%zu, %zu]", first++ ? ", " : "", #f, offsetof(T, f), sizeof(((T *)0)->f))

int main(void)
{
    int first;
    printf("{\n  \"cupti_api_version\": %d,\n", CUPTI_API_VERSION);
    printf("  \"sizes\": {\"%d\": %zu, \"%d\": %zu, \"%d\": %zu, \"%d\": %zu, \"%d\": %zu, "
           "\"%d\": %zu, \"%d\": %zu, \"%d\": %zu, \"%d\": %zu, \"%d\": %zu, \"%d\": %zu, "
           "\"%d\": %zu, \"%d\": %zu},\n",
           CUPTI_ACTIVITY_KIND_MEMCPY, sizeof(CUpti_ActivityMemcpy6), CUPTI_ACTIVITY_KIND_MEMSET,
           sizeof(CUpti_ActivityMemset4), CUPTI_ACTIVITY_KIND_KERNEL,
           sizeof(CUpti_ActivityKernel10), CUPTI_ACTIVITY_KIND_DRIVER, sizeof(CUpti_ActivityAPI),
           CUPTI_ACTIVITY_KIND_RUNTIME, sizeof(CUpti_ActivityAPI),
           CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, sizeof(CUpti_ActivityKernel10),
           CUPTI_ACTIVITY_KIND_MARKER, sizeof(CUpti_ActivityMarker2),
           CUPTI_ACTIVITY_KIND_MARKER_DATA, sizeof(CUpti_ActivityMarkerData2),
           CUPTI_ACTIVITY_KIND_OVERHEAD, sizeof(CUpti_ActivityOverhead3),
           CUPTI_ACTIVITY_KIND_MEMCPY2, sizeof(CUpti_ActivityMemcpyPtoP4),
           CUPTI_ACTIVITY_KIND_CUDA_EVENT, sizeof(CUpti_ActivityCudaEvent2),
           CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, sizeof(CUpti_ActivitySynchronization2),
           CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, sizeof(CUpti_ActivityExternalCorrelation));
    printf("  \"kernel\": {");
    first = 0;
    F(CUpti_ActivityKernel10, start);
    F(CUpti_ActivityKernel10, end);
    F(CUpti_ActivityKernel10, deviceId);
    F(CUpti_ActivityKernel10, contextId);
    F(CUpti_ActivityKernel10, streamId);
    F(CUpti_ActivityKernel10, correlationId);
    F(CUpti_ActivityKernel10, name);
    F(CUpti_ActivityKernel10, graphNodeId);
    F(CUpti_ActivityKernel10, graphId);
    printf("},\n  \"memcpy\": {");
    first = 0;
    F(CUpti_ActivityMemcpy6, copyKind);
    F(CUpti_ActivityMemcpy6, bytes);
    F(CUpti_ActivityMemcpy6, start);
    F(CUpti_ActivityMemcpy6, end);
    F(CUpti_ActivityMemcpy6, deviceId);
    F(CUpti_ActivityMemcpy6, contextId);
    F(CUpti_ActivityMemcpy6, streamId);
    F(CUpti_ActivityMemcpy6, correlationId);
    F(CUpti_ActivityMemcpy6, graphNodeId);
    F(CUpti_ActivityMemcpy6, graphId);
    printf("},\n  \"memcpy2\": {");
    first = 0;
    F(CUpti_ActivityMemcpyPtoP4, copyKind);
    F(CUpti_ActivityMemcpyPtoP4, bytes);
    F(CUpti_ActivityMemcpyPtoP4, start);
    F(CUpti_ActivityMemcpyPtoP4, end);
    F(CUpti_ActivityMemcpyPtoP4, deviceId);
    F(CUpti_ActivityMemcpyPtoP4, contextId);
    F(CUpti_ActivityMemcpyPtoP4, streamId);
    F(CUpti_ActivityMemcpyPtoP4, correlationId);
    F(CUpti_ActivityMemcpyPtoP4, graphNodeId);
    F(CUpti_ActivityMemcpyPtoP4, graphId);
    F(CUpti_ActivityMemcpyPtoP4, srcDeviceId);
    F(CUpti_ActivityMemcpyPtoP4, dstDeviceId);
    printf("},\n  \"memset\": {");
    first = 0;
    F(CUpti_ActivityMemset4, bytes);
    F(CUpti_ActivityMemset4, start);
    F(CUpti_ActivityMemset4, end);
    F(CUpti_ActivityMemset4, deviceId);
    F(CUpti_ActivityMemset4, contextId);
    F(CUpti_ActivityMemset4, streamId);
    F(CUpti_ActivityMemset4, correlationId);
    F(CUpti_ActivityMemset4, graphNodeId);
    F(CUpti_ActivityMemset4, graphId);
    printf("},\n  \"api\": {");
    first = 0;
    F(CUpti_ActivityAPI, cbid);
    F(CUpti_ActivityAPI, start);
    F(CUpti_ActivityAPI, end);
    F(CUpti_ActivityAPI, processId);
    F(CUpti_ActivityAPI, threadId);
    F(CUpti_ActivityAPI, correlationId);
    printf("},\n  \"external_correlation\": {");
    first = 0;
    F(CUpti_ActivityExternalCorrelation, externalKind);
    F(CUpti_ActivityExternalCorrelation, externalId);
    F(CUpti_ActivityExternalCorrelation, correlationId);
    printf("},\n  \"marker\": {");
    first = 0;
    F(CUpti_ActivityMarker2, flags);
    F(CUpti_ActivityMarker2, timestamp);
    F(CUpti_ActivityMarker2, id);
    F(CUpti_ActivityMarker2, name);
    F(CUpti_ActivityMarker2, domain);
    printf("}\n}\n");
    return 0;
}
