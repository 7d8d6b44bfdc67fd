/*
 * Runtime and driver API names by CUPTI callback id.  The tables are
 * generated at build time (archive/gen-cbid.sh -> archive/cbid-names.c) from the
 * cupti_runtime_cbid.h and cupti_driver_cbid.h of the CUDA toolkit the
 * daemon is built against.
 *
 * "full" names are CUPTI's enumerator names without the prefix
 * ("cudaLaunchKernel_v7000", "cuMemcpyDtoH_v2"); "short" names drop the
 * trailing _vNNNN version suffix for display ("cudaLaunchKernel").
 * Unknown ids (newer producers, garbage) give NULL.
 */
#ifndef CUPTIMON_CBID_H
#define CUPTIMON_CBID_H

#include <stdint.h>

extern const char *const cuptimon__cbid_runtime_full[];
extern const char *const cuptimon__cbid_runtime_short[];
extern const unsigned cuptimon__cbid_runtime_count;
extern const char *const cuptimon__cbid_driver_full[];
extern const char *const cuptimon__cbid_driver_short[];
extern const unsigned cuptimon__cbid_driver_count;

static inline const char *cuptimon__cbid_runtime_name(uint32_t cbid)
{
    return cbid < cuptimon__cbid_runtime_count ? cuptimon__cbid_runtime_short[cbid] : 0;
}

static inline const char *cuptimon__cbid_runtime_full_name(uint32_t cbid)
{
    return cbid < cuptimon__cbid_runtime_count ? cuptimon__cbid_runtime_full[cbid] : 0;
}

static inline const char *cuptimon__cbid_driver_name(uint32_t cbid)
{
    return cbid < cuptimon__cbid_driver_count ? cuptimon__cbid_driver_short[cbid] : 0;
}

static inline const char *cuptimon__cbid_driver_full_name(uint32_t cbid)
{
    return cbid < cuptimon__cbid_driver_count ? cuptimon__cbid_driver_full[cbid] : 0;
}

#endif
