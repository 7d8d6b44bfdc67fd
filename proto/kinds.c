/* Activity kind names, shared by the shim (CUPTIMON_ACTIVITIES), the daemon
 * (window --activities) and the CLI, so that every place accepts the same
 * words. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cupti-abi.h"
#include "cuptimon-proto.h"

static const struct {
    const char *name;
    uint32_t kind;
} kinds[] = {
    {"kernel", CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
    {"concurrent_kernel", CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
    {"serial_kernel", CUPTI_ACTIVITY_KIND_KERNEL},
    {"memcpy", CUPTI_ACTIVITY_KIND_MEMCPY},
    {"memcpy2", CUPTI_ACTIVITY_KIND_MEMCPY2},
    {"memset", CUPTI_ACTIVITY_KIND_MEMSET},
    {"runtime", CUPTI_ACTIVITY_KIND_RUNTIME},
    {"driver", CUPTI_ACTIVITY_KIND_DRIVER},
    {"external_correlation", CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION},
    {"overhead", CUPTI_ACTIVITY_KIND_OVERHEAD},
    {"cuda_event", CUPTI_ACTIVITY_KIND_CUDA_EVENT},
    {"synchronization", CUPTI_ACTIVITY_KIND_SYNCHRONIZATION},
    {"marker", CUPTI_ACTIVITY_KIND_MARKER},
    {"marker_data", CUPTI_ACTIVITY_KIND_MARKER_DATA},
};

int cuptimon__kind_parse(const char *word, uint32_t *kind)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(word, kinds[i].name) == 0) {
            *kind = kinds[i].kind;
            return 0;
        }
    }
    char *end;
    unsigned long v = strtoul(word, &end, 10);
    if (*word && !*end && v > 0 && v < CUPTIMON_ACTIVITY_KIND_LIMIT) {
        *kind = (uint32_t)v;
        return 0;
    }
    return -1;
}

const char *cuptimon__kind_words(void)
{
    return "kernel, memcpy, memset, runtime, driver, external_correlation, overhead, "
           "cuda_event, synchronization, marker, marker_data, memcpy2, serial_kernel, "
           "or a CUpti_ActivityKind number";
}
