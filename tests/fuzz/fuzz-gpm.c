/* Fuzz target: a GPU metrics session (archive/gpm.h) as a reader finds it
 * on disk, every byte untrusted.  The input is a 2-byte little-endian
 * length L, L bytes of meta.json, then the chunks of a segment (after a
 * valid segment header, so that the chunk and sample parsers are what get
 * exercised).  Checks: meta.json parses or is refused with a reason; what
 * parses holds the promised limits and survives a round trip through the
 * writer; every sample handed out is well formed and in the range asked
 * for; the counter tracks written from it are valid JSON (json-c parses
 * the whole trace); the statistics stay inside [min, max]. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "archive/archive.h"
#include "archive/gpm.h"
#include "archive/json-get.h"
#include "archive/trace.h"
#include "cuptimon-proto.h"

#include "fuzz-files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int key_ok(const char *k)
{
    if (*k == '\0')
        return 0;
    for (; *k; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '_'))
            return 0;
    return 1;
}

static void meta_holds(const struct cuptimon_gpm_meta *m)
{
    CHECK(m->nmetrics >= 1 && m->nmetrics <= CUPTIMON_GPM_METRICS_MAX);
    CHECK(m->ordinal >= 0 && m->ordinal <= CUPTIMON_GPM_ORDINAL_MAX);
    CHECK(m->interval_ns >= 1 && m->interval_ns < CUPTIMON_GPM_TIME_MAX);
    CHECK(m->start_unix_ns < CUPTIMON_GPM_TIME_MAX);
    CHECK(memchr(m->name, 0, sizeof m->name) && memchr(m->uuid, 0, sizeof m->uuid));
    CHECK(memchr(m->pci_bus_id, 0, sizeof m->pci_bus_id) && memchr(m->chip, 0, sizeof m->chip));
    CHECK(memchr(m->hostname, 0, sizeof m->hostname));
    for (uint32_t i = 0; i < m->nmetrics; i++) {
        const struct cuptimon_gpm_metric *mt = &m->metric[i];
        CHECK(memchr(mt->key, 0, sizeof mt->key) && key_ok(mt->key));
        CHECK(memchr(mt->cupti, 0, sizeof mt->cupti) && memchr(mt->unit, 0, sizeof mt->unit));
        CHECK(memchr(mt->label, 0, sizeof mt->label) && mt->label[0] != '\0');
        for (uint32_t k = 0; k < i; k++)
            CHECK(strcmp(m->metric[k].key, mt->key) != 0);
    }
}

struct walk {
    uint64_t from, to, n;
    struct cuptimon_gpm_stats *gs;
};

static int on_sample(void *ud, const struct cuptimon_gpm_meta *m,
                     const struct cuptimon_gpm_sample *s)
{
    struct walk *w = ud;
    CHECK(s->end_ns > s->start_ns && s->end_ns < CUPTIMON_GPM_TIME_MAX);
    CHECK(s->end_ns > w->from && (w->to == 0 || s->start_ns < w->to));
    for (uint32_t k = 0; k < m->nmetrics; k++)
        CHECK(!isinf(s->value[k]));
    w->n++;
    CHECK(cuptimon__gpm_stats_sample(w->gs, s, w->from, w->to) == 0);
    return 0;
}

/* The trace, kept in memory (bounded by the input's samples). */
struct sink {
    char *p;
    size_t n, cap;
};

static int sink_write(void *ud, const void *buf, size_t len)
{
    struct sink *k = ud;
    if (k->n + len + 1 > k->cap) {
        size_t nc = (k->n + len + 1) * 2;
        char *np = realloc(k->p, nc);
        CHECK(np != NULL);
        k->p = np;
        k->cap = nc;
    }
    memcpy(k->p + k->n, buf, len);
    k->n += len;
    k->p[k->n] = '\0';
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    make_dir("cuptimon-fuzz-gpm");
    size_t mlen = size >= 2 ? (size_t)data[0] | (size_t)data[1] << 8 : 0;
    size_t off = size >= 2 ? 2 : size;
    if (mlen > size - off)
        mlen = size - off;
    char *text = malloc(mlen + 1);
    CHECK(text != NULL);
    memcpy(text, data + off, mlen);
    text[mlen] = '\0';
    const uint8_t *seg = data + off + mlen;
    size_t seglen = size - off - mlen;

    write_file("meta.json", data + off, mlen, NULL, 0);
    uint8_t hdr[CUPTIMON_SEG_HDR_SIZE] = {0};
    memcpy(hdr, CUPTIMON_SEG_MAGIC, 8);
    cuptimon__put_u32(hdr + 8, CUPTIMON_SEG_VERSION);
    write_file("seg-000000.cpt", hdr, sizeof hdr, seg, seglen);

    int is = cuptimon__gpm_is_meta(text);
    CHECK(is == 0 || is == 1);
    struct cuptimon_gpm_meta *m = malloc(sizeof *m), *m2 = malloc(sizeof *m2);
    CHECK(m != NULL && m2 != NULL);
    char why[512] = "";
    int prc = cuptimon__gpm_meta_parse(text, m, why, sizeof why);
    CHECK(prc == 0 || prc == -EBADMSG);
    if (prc < 0) {
        CHECK(why[0] != '\0' && m->nmetrics == 0);
    } else {
        CHECK(is == 1);
        meta_holds(m);
        /* What the writer makes of it reads back the same. */
        char *again = cuptimon__gpm_meta_json(m, m->hostname[0] ? m->hostname : NULL, NULL);
        CHECK(again != NULL);
        CHECK(cuptimon__gpm_meta_parse(again, m2, why, sizeof why) == 0);
        CHECK(memcmp(m, m2, sizeof *m) == 0);
        free(again);
    }

    /* The samples, over every time and over a range the input picks. */
    for (int pass = 0; pass < 2; pass++) {
        struct walk w = {0};
        struct cuptimon_gpm_read_stats st;
        memset(&st, 0, sizeof st);
        if (pass == 1 && seglen >= 8) {
            w.from = cuptimon__get_u64(seg + seglen - 8) & (CUPTIMON_GPM_TIME_MAX - 1);
            w.to = seglen >= 16 ? cuptimon__get_u64(seg + seglen - 16) : 0;
            if (w.to != 0 && w.to <= w.from)
                w.to = 0;
        }
        CHECK(cuptimon__gpm_stats_new(pass ? 0 : 64, &w.gs) == 0);
        if (prc == 0)
            CHECK(cuptimon__gpm_stats_session(w.gs, m) == 0);
        int rc = cuptimon__gpm_read(dir, w.from, w.to, on_sample, &w, &st, why, sizeof why);
        CHECK(rc == (is ? prc : -EINVAL));
        CHECK(st.samples == w.n);
        if (rc == 0) {
            json_object *rows = cuptimon__gpm_stats_rows(w.gs);
            CHECK(rows != NULL && json_object_array_length(rows) == m->nmetrics);
            for (size_t i = 0; i < json_object_array_length(rows); i++) {
                json_object *r = json_object_array_get_idx(rows, i);
                if (cuptimon__json_uint(r, "samples", 0) == 0)
                    continue;
                double lo = cuptimon__json_double(r, "min", 0),
                       hi = cuptimon__json_double(r, "max", 0);
                double mean = cuptimon__json_double(r, "mean", 0),
                       med = cuptimon__json_double(r, "med", 0);
                double tol = (fabs(lo) + fabs(hi)) * 1e-9;
                CHECK(lo <= hi && med >= lo && med <= hi);
                CHECK(mean >= lo - tol && mean <= hi + tol);
            }
            json_object_put(rows);
        }
        cuptimon__gpm_stats_free(w.gs);
    }

    /* The counter tracks: the trace is valid JSON whatever the labels,
     * units, names and values said. */
    {
        struct sink k = {0};
        struct cuptimon_trace *t;
        struct cuptimon_trace_opts o = {.base_ns = 1796208557000000000ull};
        CHECK(cuptimon__trace_new(&o, sink_write, &k, &t) == 0);
        int rc = cuptimon__gpm_trace_session(t, dir, 0, 0, NULL, NULL, why, sizeof why);
        CHECK(rc == (!is ? -EINVAL : prc < 0 ? prc : 1));
        CHECK(cuptimon__trace_finish(t, NULL) == 0);
        cuptimon__trace_free(t);
        json_tokener *tok = json_tokener_new();
        CHECK(tok != NULL);
        json_object *tr = json_tokener_parse_ex(tok, k.p, (int)k.n);
        CHECK(tr != NULL && json_tokener_get_error(tok) == json_tokener_success);
        CHECK(json_object_is_type(cuptimon__json_get(tr, "traceEvents"), json_type_array));
        json_object_put(tr);
        json_tokener_free(tok);
        free(k.p);
    }
    free(m);
    free(m2);
    free(text);
    return 0;
}
