/*
 * libothertool-late.so: a CUPTI tool in a library that the job loads with
 * dlopen() after the shim started (as a framework imported late would).
 * Its imports of the CUPTI activity calls are not routed to the shim until
 * the shim sees that an object was loaded; cuptimon-othertool loads it,
 * waits past the shim's once-a-second check, then calls latetool_profile().
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#include "fakecupti.h"

#define MAX_OWNED 64

static uint8_t *owned[MAX_OWNED];
static int nowned;
static uint64_t kernels, foreign;

static void CUPTIAPI request(uint8_t **buf, size_t *size, size_t *max)
{
    *size = 64u << 10;
    *buf = aligned_alloc(8, *size);
    if (*buf)
        memset(*buf, 0, *size);
    *max = 0;
    if (*buf && nowned < MAX_OWNED)
        owned[nowned++] = *buf;
}

static void CUPTIAPI complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                              size_t valid)
{
    int mine = 0;
    (void)ctx, (void)stream, (void)size;
    for (int i = 0; i < nowned; i++)
        mine |= owned[i] == buf;
    if (!mine) {
        foreign++;
        return;
    }
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS)
        kernels += rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
}

/* Profiles n kernel launches; returns 0 and what the tool received. */
int latetool_profile(uint64_t n, uint64_t *got, uint64_t *foreign_out);
__attribute__((visibility("default"))) int latetool_profile(uint64_t n, uint64_t *got,
                                                            uint64_t *foreign_out)
{
    kernels = foreign = 0;
    if (cuptiActivityRegisterCallbacks(request, complete) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS)
        return -1;
    for (uint64_t i = 0; i < n; i++)
        fakecuda_launch_kernel("_ZN4late6kernelEv", 0, 1, 0, 0);
    fakecuda_synchronize();
    if (cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != CUPTI_SUCCESS ||
        cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
        cuptiFinalize() != CUPTI_SUCCESS)
        return -1;
    for (int i = 0; i < nowned; i++)
        free(owned[i]);
    nowned = 0;
    *got = kernels;
    *foreign_out = foreign;
    return 0;
}
