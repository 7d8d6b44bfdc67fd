/*
 * bench-udr: what user-defined records (CUPTI 13.3+'s v2 path, issue 28)
 * save against the fixed records, side by side in one run: archived bytes
 * per record and the daemon's CPU per record, on the real H200 buffers
 * (tests/data/cupti-13.0-h200).
 *
 * usage: bench-udr [DATA_DIR] [--seconds S] [--level L]
 *
 * The "v1" set is the buffers as CUPTI 13.0 wrote them (Kernel10 216
 * bytes, Memcpy6, Memset4, API records).  The "v2+udr" set holds the same
 * records re-encoded as the shim selects them on the v2 path
 * (client-lib/v2-fields.c: the fields the decoder reads), KIND first, each
 * field at its natural alignment in selection order, the record rounded
 * up to 8 bytes, with the widths CUPTI 13.3's header documents (64-bit
 * correlation, context and stream ids of GPU records, thread and
 * correlation ids of API records): the layout the test double reports.  A
 * real 13.3 may lay them out otherwise (it reports its layout, and the
 * daemon decodes by it); the first GPU run should re-measure.
 *
 * For each set, per mix (kernel: the phase-0 buffers; api: phase 1, with
 * runtime and driver records): bytes of records per record, archived
 * bytes per record (a chunk as the daemon writes it: zstd at level L,
 * default 1, the daemon's), and the daemon's CPU per record for what it
 * does with every buffer: the copy out of the pool, the archive write
 * (compress, CRC, write) and the live aggregates' device walk; and, apart,
 * a full decode (what windows and cuptimonctl decode pay).  Single
 * thread, CPU time (CLOCK_THREAD_CPUTIME_ID), at least S seconds each
 * (default 2).  One JSON object per line on stdout, then one with the
 * ratios.
 */
#include "config.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "load-zst.h"

#include "archive/archive.h"
#include "archive/decode.h"
#include "client-lib/v2-fields.h"

#ifndef TEST_DATA_DIR
#define TEST_DATA_DIR "tests/data"
#endif

struct buf {
    uint8_t *data;
    size_t len;
};

struct set {
    const char *path;
    struct buf *bufs;
    int n;
    struct cuptimon_layout layout;
    uint64_t records, bytes;
};

static double now(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The width 13.3's header documents for a field in a user-defined record:
 * the predefined struct's, but 64-bit ids where its comments say so. */
static unsigned udr_width(unsigned type, const char *name, unsigned table)
{
    int gpu = type == CUPTIMON_REC_KERNEL || type == CUPTIMON_REC_MEMCPY ||
              type == CUPTIMON_REC_MEMSET || type == CUPTIMON_REC_P2P;
    if (strcmp(name, "correlationId") == 0 && (gpu || type == CUPTIMON_REC_API))
        return 8;
    if (type == CUPTIMON_REC_KERNEL && (!strcmp(name, "contextId") || !strcmp(name, "streamId")))
        return 8;
    if (type == CUPTIMON_REC_API && !strcmp(name, "threadId"))
        return 8;
    return table;
}

/* The user-defined layout of a kind as the test double lays it out; its
 * record_layouts entry goes to rl.  0 or -1 (a kind not selected). */
struct ulay {
    unsigned size, n;
    struct {
        unsigned f, off, w;
    } f[64];
};

static int make_layout(uint32_t kind, struct ulay *u, json_object *rl)
{
    size_t n;
    const struct cuptimon_v2_field *sel = cuptimon__v2_fields(kind, 0, &n);
    unsigned type = cuptimon__rec_type_of_kind(kind), nn, off = 4;
    const char *const *names = cuptimon__rec_field_names(type, &nn);
    json_object *d, *fields;
    char key[12];
    if (sel == NULL)
        return -1;
    memset(u, 0, sizeof(*u));
    d = json_object_new_object();
    fields = json_object_new_array();
    for (size_t i = 1; i < n; i++) {
        unsigned f;
        for (f = 0; f < nn && strcmp(names[f], sel[i].name) != 0; f++)
            ;
        unsigned w = udr_width(type, sel[i].name, cuptimon__rec_field_width(type, f));
        if (f == nn || w == 0)
            continue; /* not in the table (processId of an overhead: not in this data) */
        off = (off + w - 1) / w * w;
        u->f[u->n].f = f;
        u->f[u->n].off = off;
        u->f[u->n].w = w;
        u->n++;
        json_object *e = json_object_new_object();
        json_object_object_add(e, "field", json_object_new_string(sel[i].name));
        json_object_object_add(e, "offset", json_object_new_int64(off));
        json_object_object_add(e, "size", json_object_new_int64(w));
        json_object_array_add(fields, e);
        off += w;
    }
    u->size = (off + 7) / 8 * 8;
    json_object_object_add(d, "size", json_object_new_int64(u->size));
    json_object_object_add(d, "fields", fields);
    snprintf(key, sizeof(key), "%u", kind);
    json_object_object_add(rl, key, d);
    return 0;
}

/* The same records, re-encoded in user-defined layouts (kinds without a
 * selection are left out of both sets). */
static int convert(const struct set *in, struct set *out, struct set *kept)
{
    static struct ulay lay[CUPTIMON_KIND_SLOTS];
    static int have[CUPTIMON_KIND_SLOTS];
    json_object *meta = json_object_new_object(), *rl = json_object_new_object();
    for (uint32_t k = 1; k < CUPTIMON_KIND_SLOTS; k++)
        have[k] = make_layout(k, &lay[k], rl) == 0;
    json_object_object_add(meta, "record_layouts", rl);
    json_object_object_add(meta, "user_defined_records", json_object_new_boolean(1));
    if (cuptimon__layout_init_meta(&out->layout, 130300, NULL, meta) != 0 ||
        out->layout.udr_error[0]) {
        fprintf(stderr, "bench-udr: the user-defined layouts do not decode: %s\n",
                out->layout.udr_error);
        return -1;
    }
    json_object_put(meta);
    out->n = kept->n = in->n;
    out->bufs = calloc((size_t)in->n, sizeof(*out->bufs));
    kept->bufs = calloc((size_t)in->n, sizeof(*kept->bufs));
    kept->layout = in->layout;
    for (int i = 0; i < in->n; i++) {
        const uint8_t *p = in->bufs[i].data;
        size_t len = in->bufs[i].len, off = 0;
        uint8_t *o = calloc(1, len), *c = calloc(1, len);
        size_t olen = 0, clen = 0;
        if (!o || !c)
            return -1;
        while (off + 4 <= len) {
            uint32_t kind;
            memcpy(&kind, p + off, 4);
            size_t sz = kind < CUPTIMON_KIND_SLOTS ? in->layout.size[kind] : 0;
            if (sz == 0 || off + sz > len)
                break;
            const struct cuptimon_rec_layout *L = in->layout.rec[kind];
            if (have[kind] && L != NULL) {
                memcpy(o + olen, &kind, 4);
                for (unsigned j = 0; j < lay[kind].n; j++) {
                    uint64_t v = cuptimon__rec_get(L, p + off, lay[kind].f[j].f);
                    memcpy(o + olen + lay[kind].f[j].off, &v, lay[kind].f[j].w);
                }
                olen += lay[kind].size;
                memcpy(c + clen, p + off, sz);
                clen += sz;
                out->records++;
            }
            off += sz;
        }
        out->bufs[i] = (struct buf){o, olen};
        kept->bufs[i] = (struct buf){c, clen};
        out->bytes += olen;
        kept->bytes += clen;
    }
    kept->records = out->records;
    return 0;
}

struct result {
    double archived_per_record, daemon_ns, decode_ns;
};

static int measure(const struct set *s, const char *mix, int level, double seconds,
                   struct result *r)
{
    char dir[] = "/tmp/cuptimon-bench-udr-XXXXXX";
    struct cuptimon_archive_writer *w = NULL;
    struct cuptimon_decode_stats ds;
    uint64_t stored = 0, recs = 0, rounds = 0, seq = 0;
    uint8_t *copy = malloc(8u << 20);
    double c0, c1;
    if (!mkdtemp(dir) || !copy)
        return -1;
    /* What the daemon does with every buffer: the copy out of the pool,
     * the archive write, the aggregates' device walk. */
    c0 = now(CLOCK_THREAD_CPUTIME_ID);
    do {
        if (w == NULL && cuptimon__aw_open(dir, "{}", 64u << 20, level, &w, NULL) < 0)
            return -1;
        for (int i = 0; i < s->n; i++) {
            struct cuptimon_chunk_hdr h = {.index = seq++, .raw_size = s->bufs[i].len};
            struct cuptimon_walk wk;
            struct cuptimon_ev ev;
            memcpy(copy, s->bufs[i].data, s->bufs[i].len);
            if (cuptimon__aw_chunk(w, &h, copy) < 0)
                return -1;
            stored += h.stored_size + CUPTIMON_CHUNK_HDR_SIZE;
            memset(&ds, 0, sizeof(ds));
            cuptimon__walk_begin_device(&wk, &s->layout, copy, s->bufs[i].len, &ds);
            while (cuptimon__walk_next(&wk, &ev))
                ;
            recs += ds.records; /* the device walk returns GPU work, counts all */
        }
        rounds++;
        if (rounds % 16 == 0) { /* keep the disk out of it */
            cuptimon__aw_close(w);
            w = NULL;
            char cmd[96];
            snprintf(cmd, sizeof(cmd), "rm -rf '%s'/seg-* '%s'/strings.bin", dir, dir);
            if (system(cmd) != 0)
                return -1;
        }
    } while (now(CLOCK_THREAD_CPUTIME_ID) - c0 < seconds);
    c1 = now(CLOCK_THREAD_CPUTIME_ID);
    if (w)
        cuptimon__aw_close(w);
    r->archived_per_record = (double)stored / (double)recs;
    r->daemon_ns = (c1 - c0) * 1e9 / (double)recs;
    /* A full decode of every field. */
    uint64_t drecs = 0;
    c0 = now(CLOCK_THREAD_CPUTIME_ID);
    do {
        for (int i = 0; i < s->n; i++) {
            struct cuptimon_walk wk;
            struct cuptimon_ev ev;
            memset(&ds, 0, sizeof(ds));
            cuptimon__walk_begin(&wk, &s->layout, s->bufs[i].data, s->bufs[i].len, &ds);
            while (cuptimon__walk_next(&wk, &ev))
                drecs++;
            if (ds.undecodable_bytes) {
                fprintf(stderr, "bench-udr: %s: undecodable bytes\n", s->path);
                return -1;
            }
        }
    } while (now(CLOCK_THREAD_CPUTIME_ID) - c0 < seconds / 2);
    r->decode_ns = (now(CLOCK_THREAD_CPUTIME_ID) - c0) * 1e9 / (double)drecs;
    printf("{\"bench\":\"udr\",\"mix\":\"%s\",\"path\":\"%s\",\"records\":%llu,"
           "\"record_bytes_per_record\":%.1f,\"archived_bytes_per_record\":%.2f,"
           "\"daemon_cpu_ns_per_record\":%.1f,\"decode_ns_per_record\":%.1f,\"zstd_level\":%d}\n",
           mix, s->path, (unsigned long long)s->records, (double)s->bytes / (double)s->records,
           r->archived_per_record, r->daemon_ns, r->decode_ns, level);
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    free(copy);
    return system(cmd) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    const char *dir = TEST_DATA_DIR "/cupti-13.0-h200";
    double seconds = 2;
    int level = 1;
    static const char *const mixes[2][4] = {
        {"phase0-buf0.bin.zst", "phase0-buf1.bin.zst", "phase0-buf2.bin.zst",
         "phase0-buf3.bin.zst"},
        {"phase1-buf4.bin.zst", "phase1-buf5.bin.zst", NULL, NULL}};
    static const char *const mix_name[2] = {"kernel", "api"};

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else if (strcmp(argv[i], "--level") == 0 && i + 1 < argc) {
            level = atoi(argv[++i]);
        } else if (argv[i][0] != '-') {
            dir = argv[i];
        } else {
            fprintf(stderr, "usage: bench-udr [DATA_DIR] [--seconds S] [--level L]\n");
            return 2;
        }
    }
    if (!(seconds > 0) || level < 0 || level > 19) {
        fprintf(stderr, "bench-udr: --seconds must be > 0 and --level 0..19\n");
        return 2;
    }
    for (int m = 0; m < 2; m++) {
        struct set in = {.path = "v1"}, v1 = {.path = "v1"}, udr = {.path = "v2+udr"};
        struct result a, b;
        in.bufs = calloc(4, sizeof(*in.bufs));
        for (int i = 0; i < 4 && mixes[m][i]; i++) {
            char path[1024];
            snprintf(path, sizeof(path), "%s/%s", dir, mixes[m][i]);
            in.bufs[i].data = bench_load_zst("bench-udr", path, &in.bufs[i].len);
            if (!in.bufs[i].data)
                return 1;
            in.n++;
        }
        cuptimon__layout_init(&in.layout, 130001, NULL);
        if (convert(&in, &udr, &v1) < 0 || measure(&v1, mix_name[m], level, seconds, &a) < 0 ||
            measure(&udr, mix_name[m], level, seconds, &b) < 0) {
            fprintf(stderr, "bench-udr: failed\n");
            return 1;
        }
        printf("{\"bench\":\"udr\",\"mix\":\"%s\",\"v2_over_v1\":{\"record_bytes\":%.3f,"
               "\"archived_bytes\":%.3f,\"daemon_cpu\":%.3f,\"decode_cpu\":%.3f}}\n",
               mix_name[m],
               ((double)udr.bytes / (double)udr.records) / ((double)v1.bytes / (double)v1.records),
               b.archived_per_record / a.archived_per_record, b.daemon_ns / a.daemon_ns,
               b.decode_ns / a.decode_ns);
        fflush(stdout);
    }
    return 0;
}
