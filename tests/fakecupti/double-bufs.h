/*
 * The test double's activity buffers, made in-process, for tests and
 * benchmarks that want the double's records as a producer would hand them
 * over (the archive codec's round trip and ratio).  Header-only: a program
 * that includes it links libcupti-fake.la and is built with
 * CUPTI_TEST_CFLAGS.
 *
 * The work is the pattern of cuptimon-workload and of the H200 capture
 * (tests/data/cupti-13.0-h200/dump.cu.txt): three kernel names in turn on
 * two streams, a 4 KiB device-to-host copy every 50 launches and a 4 KiB
 * memset every 70.  Mix 0 enables concurrent kernel, memcpy and memset
 * records (the H200's phase 0); mix 1 adds runtime and driver API records
 * (phase 1).  The fake GPU runs near real time (a kernel lasts 1-5 us), so
 * 20000 items take about 60 ms.
 */
#ifndef CUPTIMON_DOUBLE_BUFS_H
#define CUPTIMON_DOUBLE_BUFS_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#include "fakecupti.h"

struct double_buf {
    uint8_t *data; /* malloc'd, len bytes: the buffer's valid records */
    size_t len;
};

static struct {
    pthread_mutex_t mu;
    struct double_buf *bufs;
    int n, max;
    size_t size;
} double_col = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void CUPTIAPI double_rq(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, double_col.size);
    *size = *buffer ? double_col.size : 0;
    *max_records = 0;
}

static void CUPTIAPI double_dn(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                               size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    pthread_mutex_lock(&double_col.mu);
    if (double_col.n < double_col.max && valid > 0) {
        uint8_t *copy = malloc(valid);
        if (copy) {
            memcpy(copy, buffer, valid);
            double_col.bufs[double_col.n++] = (struct double_buf){copy, valid};
        }
    }
    pthread_mutex_unlock(&double_col.mu);
    free(buffer);
}

/* Runs items launches of mix (0 or 1) through the double with buffers of
 * bufsize bytes and stores at most max completed buffers in out: their
 * number, or -1 when the double refuses (it then says why on stderr). */
static inline int double_bufs(int mix, int items, size_t bufsize, struct double_buf *out, int max)
{
    static const char *const names[] = {"_Z5scaleILi2EEvPfi", "_Z5scaleILi3EEvPfi",
                                        "_ZN2ns7add_oneEPfi"};
    static const CUpti_ActivityKind gpu[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                             CUPTI_ACTIVITY_KIND_MEMCPY,
                                             CUPTI_ACTIVITY_KIND_MEMSET},
                                    api[] = {CUPTI_ACTIVITY_KIND_RUNTIME,
                                             CUPTI_ACTIVITY_KIND_DRIVER};

    fakecupti_reset();
    double_col.bufs = out;
    double_col.n = 0;
    double_col.max = max;
    double_col.size = bufsize;
    if (fakecuda_init() < 0 ||
        cuptiActivityRegisterCallbacks(double_rq, double_dn) != CUPTI_SUCCESS)
        return -1;
    for (size_t i = 0; i < sizeof gpu / sizeof gpu[0]; i++)
        if (cuptiActivityEnable(gpu[i]) != CUPTI_SUCCESS)
            return -1;
    for (size_t i = 0; mix && i < sizeof api / sizeof api[0]; i++)
        if (cuptiActivityEnable(api[i]) != CUPTI_SUCCESS)
            return -1;
    for (int i = 0; i < items; i++) {
        uint32_t stream = 1 + (uint32_t)(i % 2);
        fakecuda_launch_kernel(names[i % 3], 0, stream, 0, 0);
        if (i % 50 == 0)
            fakecuda_memcpy(4096, 2, 0, stream);
        if (i % 70 == 0)
            fakecuda_memset(4096, 0, 0, stream);
    }
    fakecuda_synchronize();
    cuptiActivityFlushAll(0);
    for (size_t i = 0; i < sizeof gpu / sizeof gpu[0]; i++)
        cuptiActivityDisable(gpu[i]);
    for (size_t i = 0; mix && i < sizeof api / sizeof api[0]; i++)
        cuptiActivityDisable(api[i]);
    pthread_mutex_lock(&double_col.mu);
    int n = double_col.n;
    double_col.max = 0;
    pthread_mutex_unlock(&double_col.mu);
    return n;
}

#endif
