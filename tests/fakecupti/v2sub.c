/*
 * A second CUPTI subscriber inside the workload (cuptimon-workload
 * --v2-subscriber NAME): the role of PyTorch's own CUPTI monitor or a v2
 * Kineto beside cuptimon.  It subscribes with allowMultipleSubscribers,
 * asks for user-defined kernel and memcpy records of a few fields (a
 * selection of its own, unlike cuptimon's), and checks what it receives:
 * only its kinds, in its layout, each launch once, kernel names readable in
 * the completion callback.  --v2-first-disallow NAME subscribes before
 * cuptimon can (before cuInit) and allows no other subscriber.
 */
#include "config.h"

#include "fakecupti.h"
#include "v2sub.h"

#define CUPTIMON_CUPTI_ABI_V2_ONLY
#include "cupti-abi.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXCORR (1u << 22)

static struct {
    CUpti_SubscriberHandle h;
    const char *name;
    pthread_mutex_t mu;
    uint8_t *seen; /* by correlation id: 1 kernel, 2 memcpy */
    uint64_t kernels, memcpys, foreign, duplicates, bad_layout, bad_name, buffers;
    int subscribed;
    CUptiResult rc;
} v = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void CUPTIAPI rq(uint8_t **buffer, size_t *size, size_t *maxrec,
                        CUpti_BufferCallbackRequestInfo *info)
{
    (void)info;
    *maxrec = 0;
    *size = 1u << 20;
    *buffer = aligned_alloc(8, *size);
    if (*buffer)
        memset(*buffer, 0, *size);
    else
        *size = 0;
}

static uint64_t rd(const uint8_t *p, size_t w)
{
    uint64_t x = 0;
    memcpy(&x, p, w < 8 ? w : 8);
    return x;
}

static void CUPTIAPI done(uint8_t *buffer, size_t size, size_t valid,
                          CUpti_BufferCallbackCompleteInfo *info)
{
    (void)size;
    pthread_mutex_lock(&v.mu);
    v.buffers++;
    for (size_t off = 0; off + 4 <= valid;) {
        uint32_t kind = (uint32_t)rd(buffer + off, 4);
        const CUpti_ActivityRecordLayout *l =
            info && kind < info->numRecordLayouts ? info->ppRecordLayouts[kind] : NULL;
        if (l == NULL) {
            v.foreign++; /* a kind it did not enable, or no layout: cannot go on */
            break;
        }
        uint64_t corr = 0, name = 0;
        int fields = 0;
        for (size_t i = 0; i < l->numFields; i++) {
            const CUpti_ActivityFieldLayoutEntry *e = &l->pEntries[i];
            uint64_t x = rd(buffer + off + e->offset, e->size);
            if ((kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
                 e->fieldId == KERNEL_FIELD_CORRELATION_ID) ||
                (kind == CUPTI_ACTIVITY_KIND_MEMCPY && e->fieldId == MEMCPY_FIELD_CORRELATION_ID))
                corr = x;
            if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && e->fieldId == KERNEL_FIELD_NAME)
                name = x;
            fields++;
        }
        /* Its selections: kernel KIND, CORRELATION_ID, START, END, NAME;
         * memcpy KIND, CORRELATION_ID, BYTES. */
        if ((kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && fields != 5) ||
            (kind == CUPTI_ACTIVITY_KIND_MEMCPY && fields != 3) ||
            (kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && kind != CUPTI_ACTIVITY_KIND_MEMCPY))
            v.bad_layout++;
        if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            const char *nm = (const char *)(uintptr_t)name;
            if (nm == NULL || nm[0] != '_')
                v.bad_name++; /* the workload's names are mangled ones */
            v.kernels++;
        } else if (kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            v.memcpys++;
        }
        if (corr == 0 || corr >= MAXCORR || !v.seen) {
            v.bad_layout++;
        } else {
            uint8_t bit = kind == CUPTI_ACTIVITY_KIND_MEMCPY ? 2 : 1;
            if (v.seen[corr] & bit)
                v.duplicates++;
            v.seen[corr] |= bit;
        }
        off += l->recordSize;
    }
    pthread_mutex_unlock(&v.mu);
    free(buffer);
}

int cuptimon__v2sub_start(const char *name, int allow_others)
{
    CUpti_SubscriberParams_13_2 p = {.structSize = sizeof p,
                                     .subscriberName = name,
                                     .allowMultipleSubscribers = (uint8_t)(allow_others != 0)};
    static const int ksel[] = {KERNEL_FIELD_KIND, KERNEL_FIELD_CORRELATION_ID, KERNEL_FIELD_START,
                               KERNEL_FIELD_END, KERNEL_FIELD_NAME};
    static const int msel[] = {MEMCPY_FIELD_KIND, MEMCPY_FIELD_CORRELATION_ID, MEMCPY_FIELD_BYTES};
    uint8_t one = 1;
    size_t sz = 1;

    v.name = name;
    v.seen = calloc(MAXCORR, 1);
    v.rc = cuptiSubscribe_v2(&v.h, NULL, NULL, (CUpti_SubscriberParams *)(void *)&p);
    if (v.rc != CUPTI_SUCCESS || !v.seen) {
        fprintf(stderr, "v2sub: cuptiSubscribe_v2(%s) failed: %d\n", name, (int)v.rc);
        return -1;
    }
    if (cuptiActivityRegisterCallbacks_v2(v.h, rq, done) != CUPTI_SUCCESS ||
        cuptiActivitySetAttribute_v2(
            v.h, (CUpti_ActivityAttribute)CUPTI_ACTIVITY_ATTR_USER_DEFINED_RECORDS, &sz, &one) !=
            CUPTI_SUCCESS)
        return -1;
    CUpti_ActivityConfig c = {.structSize = CUPTIMON_ACTIVITY_CONFIG_SIZE_13_2};
    c.fieldSelection = (CUpti_ActivityFieldSelection){
        .structSize = sizeof c.fieldSelection, .numFields = 5, .pFieldIds = (int *)ksel};
    if (cuptiActivityEnable_v2(v.h, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, &c) != CUPTI_SUCCESS)
        return -1;
    c.fieldSelection.numFields = 3;
    c.fieldSelection.pFieldIds = (int *)msel;
    if (cuptiActivityEnable_v2(v.h, CUPTI_ACTIVITY_KIND_MEMCPY, &c) != CUPTI_SUCCESS)
        return -1;
    v.subscribed = 1;
    return 0;
}

void cuptimon__v2sub_report(FILE *f, uint32_t first_corr, uint32_t last_corr)
{
    uint64_t outside = 0;
    if (!v.name)
        return;
    /* Everything it traced is in (the workload waited for the fake GPU). */
    if (v.subscribed)
        cuptiActivityFlushAll(0);
    pthread_mutex_lock(&v.mu);
    for (uint64_t c = 1; v.seen && c < MAXCORR; c++) {
        if (v.seen[c] && (c < first_corr || c > last_corr))
            outside++;
    }
    fprintf(f,
            "  \"v2_subscriber\": {\"name\": \"%s\", \"subscribed\": %s, \"result\": %d, "
            "\"buffers\": %llu, \"kernels\": %llu, \"memcpys\": %llu, \"foreign\": %llu, "
            "\"duplicates\": %llu, \"bad_layout\": %llu, \"bad_name\": %llu, "
            "\"outside\": %llu},\n",
            v.name, v.subscribed ? "true" : "false", (int)v.rc, (unsigned long long)v.buffers,
            (unsigned long long)v.kernels, (unsigned long long)v.memcpys,
            (unsigned long long)v.foreign, (unsigned long long)v.duplicates,
            (unsigned long long)v.bad_layout, (unsigned long long)v.bad_name,
            (unsigned long long)outside);
    pthread_mutex_unlock(&v.mu);
}
