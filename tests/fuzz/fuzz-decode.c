/* Fuzz target: the record decoder and the trace writer over arbitrary
 * bytes, with arbitrary CUPTI versions and claimed record sizes.  The
 * first bytes pick the version and an announced size; the rest is the
 * buffer.  Every byte must be accounted as decoded or undecodable. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/decode.h"
#include "archive/trace.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz-decode: check failed: %s\n", #c);                                \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int sink(void *ud, const void *buf, size_t len)
{
    (void)ud;
    (void)buf;
    (void)len;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    /* Every release in the table (12.x, 13.0, 13.1, 13.3, 13.4, 13.5) and
     * two versions it does not know. */
    static const uint32_t versions[8] = {130001, 26, 19, 130100, 130300, 130400, 130500, 140000};
    uint32_t sizes[CUPTIMON_KIND_SLOTS];
    struct cuptimon_layout l;
    uint32_t version = (data[1] & 4) ? 18 : versions[data[0] & 7]; /* 18: 12.0-12.1 or 11.8 */
    cuptimon__layout_table(version, sizes);
    /* Byte 1 and 2: one kind's announced size is changed (a lying producer). */
    if (data[1] & 1)
        sizes[data[2] % CUPTIMON_KIND_SLOTS] = (uint32_t)data[3] * 8;
    cuptimon__layout_init(&l, version, (data[0] & 8) ? sizes : NULL);
    /* ... or measured so (the per-session check, which may also refute a
     * shared version's release). */
    if (data[1] & 2) {
        uint32_t measured[CUPTIMON_KIND_SLOTS] = {0};
        measured[data[2] % CUPTIMON_KIND_SLOTS] = (uint32_t)data[3] * 8;
        measured[(data[2] + 7) % CUPTIMON_KIND_SLOTS] = (uint32_t)data[3];
        cuptimon__layout_measured(&l, measured);
    }
    const uint8_t *buf = data + 4;
    size_t len = size - 4;
    /* The measured-size string a producer sends (CUPTIMON_RECORD_SIZE_KEY). */
    {
        uint32_t msize;
        const char *how;
        if (cuptimon__record_size_parse((const char *)buf, len < 24 ? len : 24, &msize, &how) == 0)
            CHECK(msize >= 8 && msize <= CUPTIMON_RECORD_MAX && msize % 8 == 0);
    }

    struct cuptimon_decode_stats st;
    memset(&st, 0, sizeof st);
    struct cuptimon_walk w;
    struct cuptimon_ev ev;
    uint64_t n = 0;
    cuptimon__walk_begin(&w, &l, buf, len, &st);
    while (cuptimon__walk_next(&w, &ev)) {
        CHECK(ev.type < CUPTIMON_EV_TYPES);
        n++;
    }
    CHECK(st.decoded_bytes + st.undecodable_bytes == len);
    CHECK(st.records == n);

    /* The same bytes through the trace writer (output discarded). */
    struct cuptimon_trace *t;
    struct cuptimon_trace_opts o = {.base_ns = 0, .buf_size = 4096};
    struct cuptimon_proc_info p = {.pid = 1, .rank = -1, .local_rank = -1, .world_size = -1};
    struct cuptimon_clock clk = {0, 0};
    CHECK(cuptimon__trace_new(&o, sink, NULL, &t) == 0);
    int proc = cuptimon__trace_add_process(t, &p, NULL, NULL);
    CHECK(proc >= 0);
    memset(&st, 0, sizeof st);
    CHECK(cuptimon__trace_buffer(t, proc, &l, buf, len, &clk, &st) == 0);
    CHECK(cuptimon__trace_finish(t, NULL) == 0);
    cuptimon__trace_free(t);
    return 0;
}
