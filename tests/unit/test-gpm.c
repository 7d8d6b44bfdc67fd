/* Unit tests of the GPU metrics sessions (archive/gpm.c): meta.json and the
 * sample encoding written as the daemon writes them, through the archive
 * writer, and read back exactly; what the reader refuses or counts
 * (damaged meta.json members, chunks of a wrong size, impossible times,
 * infinite values, a process session); the counter tracks of a trace
 * (trace.c); the statistics of cuptimonctl stats --report gpu; and the
 * readers that use them: cuptimonctl decode and stats (cli/, built in)
 * and the window writer (daemon/window-write.c, built in), over a process
 * session made of a real H200 buffer; and the sampler's map from a job's
 * GPU UUID to the node's ordinal (daemon/gpm.c, built in), final once the
 * sampler knows it will learn no more.  Expected values are computed here
 * from the samples each test makes, never from what the code wrote. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "archive/archive.h"
#include "archive/decode.h"
#include "archive/gpm.h"
#include "archive/json-get.h"
#include "archive/strtab.h"
#include "proto/cuptimon-proto.h"
#include "archive/trace.h"
#include "cli/cli.h"
#include "daemon/gpm.h"
#include "daemon/window-write.h"
#include "proto/util.h"
#include "tests/unit/testlib.h"

#define MS UINT64_C(1000000)
/* Sample times: around the real H200 buffer's kernels (1796208557.09 s). */
#define T0 UINT64_C(1796208557000000000)

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cuptimon-gpm-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* ---- writing sessions ------------------------------------------------------ */

static const char *const keys[] = {"sm_active", "dram_read", "pcie_write", "tensor_active"};
static const char *const labels[] = {"SM active", "DRAM read", "PCIe write", "Tensor active"};
static const char *const units[] = {"%", "B/s", "B/s", "%"};

static void meta_init(struct cuptimon_gpm_meta *m, int ordinal, uint32_t nmetrics)
{
    memset(m, 0, sizeof *m);
    m->ordinal = ordinal;
    snprintf(m->name, sizeof m->name, "NVIDIA H200");
    snprintf(m->uuid, sizeof m->uuid, "GPU-7f3a9c1e-0000-4000-8000-00000000000%d", ordinal % 10);
    snprintf(m->pci_bus_id, sizeof m->pci_bus_id, "0000:%02x:00.0", 0x18 + ordinal);
    snprintf(m->chip, sizeof m->chip, "GH100");
    m->interval_ns = 10 * MS;
    m->start_unix_ns = T0;
    m->nmetrics = nmetrics;
    for (uint32_t i = 0; i < nmetrics; i++) {
        struct cuptimon_gpm_metric *mt = &m->metric[i];
        if (i < 4) {
            snprintf(mt->key, sizeof mt->key, "%s", keys[i]);
            snprintf(mt->label, sizeof mt->label, "%s", labels[i]);
            snprintf(mt->unit, sizeof mt->unit, "%s", units[i]);
        } else {
            snprintf(mt->key, sizeof mt->key, "m%u", i);
            snprintf(mt->label, sizeof mt->label, "Metric %u", i);
        }
        snprintf(mt->cupti, sizeof mt->cupti, "gpu__metric_%u.avg", i);
    }
}

/* n samples of 10 ms from T0 + at; value k of sample i: (i + 1) * 1.25 +
 * 1000 k (exact in binary). */
static struct cuptimon_gpm_sample *samples(size_t n, uint64_t at, uint32_t nmetrics)
{
    struct cuptimon_gpm_sample *s = calloc(n ? n : 1, sizeof *s);
    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i < n; i++) {
        s[i].start_ns = T0 + at + i * 10 * MS;
        s[i].end_ns = s[i].start_ns + 10 * MS;
        for (uint32_t k = 0; k < nmetrics; k++)
            s[i].value[k] = (double)(i + 1) * 1.25 + 1000.0 * k;
    }
    return s;
}

/* Writes a session of m in dir: per_chunk samples a chunk, as the daemon
 * writes them (zstd level level, segments rotated past seg_max). */
static void write_session(const char *dir, const struct cuptimon_gpm_meta *m,
                          const struct cuptimon_gpm_sample *s, size_t n, size_t per_chunk,
                          int level, uint64_t seg_max)
{
    struct cuptimon_archive_writer *w;
    char *meta = cuptimon__gpm_meta_json(m, "node1", "test"), *err = NULL;
    uint32_t stride = CUPTIMON_GPM_SAMPLE_SIZE(m->nmetrics);
    uint8_t *buf = malloc(per_chunk * stride + 1);

    ck_assert_ptr_nonnull(meta);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(cuptimon__aw_open(dir, meta, seg_max, level, &w, &err), 0);
    free(err);
    for (size_t i = 0, idx = 0; i < n; i += per_chunk, idx++) {
        size_t k = n - i < per_chunk ? n - i : per_chunk;
        struct cuptimon_chunk_hdr h;
        cuptimon__gpm_encode(buf, s + i, k, m->nmetrics);
        memset(&h, 0, sizeof h);
        h.index = idx;
        h.cupti_ts = h.unix_ns = s[i + k - 1].end_ns + MS;
        h.raw_size = k * stride;
        h.records = k;
        ck_assert_int_eq(cuptimon__aw_chunk(w, &h, buf), 0);
    }
    cuptimon__aw_close(w);
    free(buf);
    free(meta);
}

/* Appends a chunk of len bytes whose header counts records, as given, to
 * the session's first segment (the writer makes only chunks that hold
 * together: this one is written by hand). */
static void append_chunk(const char *dir, uint64_t index, const uint8_t *data, size_t len,
                         uint64_t records)
{
    char path[400];
    uint8_t hb[CUPTIMON_CHUNK_HDR_SIZE];
    struct cuptimon_chunk_hdr h;
    FILE *f;

    snprintf(path, sizeof path, "%s/seg-000000.cpt", dir);
    f = fopen(path, "ab");
    ck_assert_ptr_nonnull(f);
    memset(&h, 0, sizeof h);
    h.version = CUPTIMON_CHUNK_VERSION;
    h.header_size = CUPTIMON_CHUNK_HDR_SIZE;
    h.index = index;
    h.codec = CUPTIMON_CODEC_RAW;
    h.cupti_ts = h.unix_ns = T0 + 10000 * MS;
    h.raw_size = h.stored_size = len;
    h.records = records;
    h.payload_crc = cuptimon__crc32c(0, data, len);
    cuptimon__chunk_hdr_encode(hb, &h);
    ck_assert_uint_eq(fwrite(hb, 1, sizeof hb, f), sizeof hb);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, strlen(text), f), strlen(text));
    ck_assert_int_eq(fclose(f), 0);
}

/* ---- reading back ---------------------------------------------------------- */

struct got {
    struct cuptimon_gpm_sample *s;
    size_t n, cap;
    struct cuptimon_gpm_meta m;
    int stop_at; /* return 7 at this sample (1-based); 0: never */
};

static int collect(void *ud, const struct cuptimon_gpm_meta *m, const struct cuptimon_gpm_sample *s)
{
    struct got *g = ud;
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->s = realloc(g->s, g->cap * sizeof *g->s);
        ck_assert_ptr_nonnull(g->s);
    }
    g->s[g->n++] = *s;
    g->m = *m;
    return g->stop_at && (int)g->n == g->stop_at ? 7 : 0;
}

static int read_dir(const char *dir, uint64_t from, uint64_t to, struct got *g,
                    struct cuptimon_gpm_read_stats *st)
{
    char why[512] = "";
    memset(st, 0, sizeof *st);
    return cuptimon__gpm_read(dir, from, to, collect, g, st, why, sizeof why);
}

static void same_sample(const struct cuptimon_gpm_sample *a, const struct cuptimon_gpm_sample *b,
                        uint32_t n)
{
    ck_assert_uint_eq(a->start_ns, b->start_ns);
    ck_assert_uint_eq(a->end_ns, b->end_ns);
    for (uint32_t k = 0; k < n; k++)
        ck_assert_msg(memcmp(&a->value[k], &b->value[k], sizeof(double)) == 0 ||
                          (isnan(a->value[k]) && isnan(b->value[k])),
                      "value %u: %.17g != %.17g", k, a->value[k], b->value[k]);
}

START_TEST(meta_round_trip)
{
    struct cuptimon_gpm_meta m, r;
    char why[256] = "";
    meta_init(&m, 3, 32);
    char *text = cuptimon__gpm_meta_json(&m, "node1", "0.9");
    ck_assert_ptr_nonnull(text);
    ck_assert_int_eq(cuptimon__gpm_is_meta(text), 1);
    ck_assert_int_eq(cuptimon__gpm_meta_parse(text, &r, why, sizeof why), 0);
    ck_assert_int_eq(r.ordinal, 3);
    ck_assert_str_eq(r.name, m.name);
    ck_assert_str_eq(r.uuid, m.uuid);
    ck_assert_str_eq(r.pci_bus_id, m.pci_bus_id);
    ck_assert_str_eq(r.chip, "GH100");
    ck_assert_str_eq(r.hostname, "node1");
    ck_assert_uint_eq(r.interval_ns, 10 * MS);
    ck_assert_uint_eq(r.start_unix_ns, T0);
    ck_assert_uint_eq(r.nmetrics, 32);
    for (uint32_t i = 0; i < 32; i++) {
        ck_assert_str_eq(r.metric[i].key, m.metric[i].key);
        ck_assert_str_eq(r.metric[i].label, m.metric[i].label);
        ck_assert_str_eq(r.metric[i].unit, m.metric[i].unit);
        ck_assert_str_eq(r.metric[i].cupti, m.metric[i].cupti);
    }
    json_object *o = json_tokener_parse(text);
    ck_assert_ptr_nonnull(o);
    ck_assert_str_eq(cuptimon__json_str(o, "kind", ""), "gpu_metrics");
    ck_assert_int_eq(cuptimon__json_int(o, "archive_version", 0), 1);
    ck_assert_str_eq(cuptimon__json_str(o, "clock", ""), "unix_ns");
    ck_assert_str_eq(cuptimon__json_str(o, "daemon_version", ""), "0.9");
    json_object_put(o);
    free(text);
    /* Without a hostname: left out, read back as "". */
    text = cuptimon__gpm_meta_json(&m, NULL, NULL);
    ck_assert_int_eq(cuptimon__gpm_meta_parse(text, &r, why, sizeof why), 0);
    ck_assert_str_eq(r.hostname, "");
    free(text);
}
END_TEST

/* A valid meta.json with one member replaced (the text after "%s" in a
 * template per member). */
#define GOOD_DEVICE                                                                                \
    "\"device\": {\"ordinal\": 1, \"name\": \"NVIDIA H200\", \"uuid\": \"GPU-1\", "                \
    "\"pci_bus_id\": \"0000:19:00.0\", \"chip\": \"GH100\"}"
#define GOOD_METRICS                                                                               \
    "\"metrics\": [{\"key\": \"sm_active\", \"cupti\": \"x\", \"unit\": \"%\", \"label\": \"SM "   \
    "active\"}]"
#define GOOD_HEAD "\"kind\": \"gpu_metrics\", \"archive_version\": 1, \"clock\": \"unix_ns\""
#define GOOD_TAIL "\"interval_ns\": 10000000, \"start_unix_ns\": 5, \"hostname\": \"n\""

START_TEST(meta_damaged_members)
{
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"", "not a JSON object"},
        {"[1, 2]", "not a JSON object"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", " GOOD_METRICS ", " GOOD_TAIL "} x", "not a JSON"},
        {"{\"kind\": \"process\", \"archive_version\": 1, \"clock\": \"unix_ns\", " GOOD_DEVICE
         ", " GOOD_METRICS ", " GOOD_TAIL "}",
         "\"kind\""},
        {"{\"kind\": \"gpu_metrics\", \"clock\": \"unix_ns\", " GOOD_DEVICE ", " GOOD_METRICS
         ", " GOOD_TAIL "}",
         "archive_version"},
        {"{\"kind\": \"gpu_metrics\", \"archive_version\": 2, \"clock\": \"unix_ns\", " GOOD_DEVICE
         ", " GOOD_METRICS ", " GOOD_TAIL "}",
         "archive_version 2"},
        {"{\"kind\": \"gpu_metrics\", \"archive_version\": \"1\", \"clock\": "
         "\"unix_ns\", " GOOD_DEVICE ", " GOOD_METRICS ", " GOOD_TAIL "}",
         "not an integer"},
        {"{\"kind\": \"gpu_metrics\", \"archive_version\": 1, \"clock\": \"cupti\", " GOOD_DEVICE
         ", " GOOD_METRICS ", " GOOD_TAIL "}",
         "clock"},
        {"{" GOOD_HEAD ", \"device\": 3, " GOOD_METRICS ", " GOOD_TAIL "}", "device"},
        {"{" GOOD_HEAD ", \"device\": {\"ordinal\": -1}, " GOOD_METRICS ", " GOOD_TAIL "}",
         "ordinal"},
        {"{" GOOD_HEAD ", \"device\": {\"ordinal\": 65536}, " GOOD_METRICS ", " GOOD_TAIL "}",
         "ordinal"},
        {"{" GOOD_HEAD ", \"device\": {\"ordinal\": 1.5}, " GOOD_METRICS ", " GOOD_TAIL "}",
         "ordinal"},
        {"{" GOOD_HEAD ", \"device\": {\"name\": \"x\"}, " GOOD_METRICS ", " GOOD_TAIL "}",
         "ordinal"},
        {"{" GOOD_HEAD ", \"device\": {\"ordinal\": 0, \"name\": 7}, " GOOD_METRICS ", " GOOD_TAIL
         "}",
         "\"name\" is not a string"},
        {"{" GOOD_HEAD ", \"device\": {\"ordinal\": 0, \"uuid\": \"a\\u0000b\"}, " GOOD_METRICS
         ", " GOOD_TAIL "}",
         "NUL"},
        {"{" GOOD_HEAD
         ", \"device\": {\"ordinal\": 0, \"chip\": \"0123456789abcdef\"}, " GOOD_METRICS
         ", " GOOD_TAIL "}",
         "\"chip\" is 16 bytes long"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", " GOOD_TAIL "}", "metrics"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", \"metrics\": {}, " GOOD_TAIL "}", "metrics"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", \"metrics\": [], " GOOD_TAIL "}", "0 metrics"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", \"metrics\": [3], " GOOD_TAIL "}", "not an object"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", \"metrics\": [{\"unit\": \"%\"}], " GOOD_TAIL "}",
         "no \"key\""},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", \"metrics\": [{\"key\": \"SM\"}], " GOOD_TAIL "}",
         "a-z"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", \"metrics\": [{\"key\": \"\"}], " GOOD_TAIL "}", "a-z"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", \"metrics\": [{\"key\": \"sm active\"}], " GOOD_TAIL "}",
         "a-z"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", \"metrics\": [{\"key\": "
         "\"a23456789012345678901234567890123456789012345678\"}], " GOOD_TAIL "}",
         "48 bytes long"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", \"metrics\": [{\"key\": \"a\"}, {\"key\": \"b\"}, "
         "{\"key\": \"a\"}], " GOOD_TAIL "}",
         "named twice"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", \"metrics\": [{\"key\": \"a\", \"unit\": "
         "\"0123456789abcdef\"}], " GOOD_TAIL "}",
         "\"unit\""},
        {"{" GOOD_HEAD ", " GOOD_DEVICE
         ", \"metrics\": [{\"key\": \"a\", \"label\": [1]}], " GOOD_TAIL "}",
         "\"label\""},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", " GOOD_METRICS "}", "interval_ns"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", " GOOD_METRICS ", \"interval_ns\": 0}", "interval_ns"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", " GOOD_METRICS ", \"interval_ns\": -5}", "interval_ns"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", " GOOD_METRICS
         ", \"interval_ns\": 18446744073709551615}",
         "interval_ns"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", " GOOD_METRICS
         ", \"interval_ns\": 5, \"start_unix_ns\": \"5\"}",
         "start_unix_ns"},
        {"{" GOOD_HEAD ", " GOOD_DEVICE ", " GOOD_METRICS ", \"interval_ns\": 5, \"hostname\": 5}",
         "hostname"},
    };
    struct cuptimon_gpm_meta m;
    char why[512];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        m.ordinal = 99;
        ck_assert_msg(cuptimon__gpm_meta_parse(bad[i].text, &m, why, sizeof why) == -EBADMSG,
                      "case %zu accepted: %s", i, bad[i].text);
        ck_assert_msg(strstr(why, bad[i].why) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, why,
                      bad[i].why);
        ck_assert_int_eq(m.ordinal, 0); /* nothing half-parsed is left */
        ck_assert_uint_eq(m.nmetrics, 0);
    }
    /* 33 metrics: one too many; 32 pass. */
    {
        char text[8192];
        size_t n = (size_t)snprintf(
            text, sizeof text, "{" GOOD_HEAD ", " GOOD_DEVICE ", " GOOD_TAIL ", \"metrics\": [");
        for (int k = 0; k < 33; k++)
            n += (size_t)snprintf(text + n, sizeof text - n, "%s{\"key\": \"m%d\"}", k ? ", " : "",
                                  k);
        snprintf(text + n, sizeof text - n, "]}");
        ck_assert_int_eq(cuptimon__gpm_meta_parse(text, &m, why, sizeof why), -EBADMSG);
        ck_assert_ptr_nonnull(strstr(why, "33 metrics"));
        char *cut = strstr(text, ", {\"key\": \"m32\"}");
        ck_assert_ptr_nonnull(cut);
        memmove(cut, cut + strlen(", {\"key\": \"m32\"}"), strlen(cut + 16) + 1);
        ck_assert_int_eq(cuptimon__gpm_meta_parse(text, &m, why, sizeof why), 0);
        ck_assert_uint_eq(m.nmetrics, 32);
        /* A label absent: the key; members unknown: ignored. */
        ck_assert_str_eq(m.metric[31].label, "m31");
    }
    /* The good one, with a member from a later daemon. */
    ck_assert_int_eq(cuptimon__gpm_meta_parse("{" GOOD_HEAD ", " GOOD_DEVICE ", " GOOD_METRICS
                                              ", " GOOD_TAIL ", \"later\": {\"x\": [1]}}",
                                              &m, why, sizeof why),
                     0);
    ck_assert_int_eq(m.ordinal, 1);
    ck_assert_str_eq(m.metric[0].label, "SM active");
    ck_assert_str_eq(m.hostname, "n");
    ck_assert_uint_eq(m.start_unix_ns, 5);
}
END_TEST

START_TEST(is_meta_kinds)
{
    ck_assert_int_eq(cuptimon__gpm_is_meta(NULL), 0);
    ck_assert_int_eq(cuptimon__gpm_is_meta("{\"pid\": 455, \"cupti_version\": 130001}"), 0);
    ck_assert_int_eq(cuptimon__gpm_is_meta("{\"kind\": \"gpu_metrics\"}"), 1);
    ck_assert_int_eq(cuptimon__gpm_is_meta("{\"kind\": 5}"), 0);
    ck_assert_int_eq(cuptimon__gpm_is_meta("[\"kind\", \"gpu_metrics\"]"), 0);
    /* Damaged (torn) text that still says what it is. */
    ck_assert_int_eq(cuptimon__gpm_is_meta("{\n  \"kind\" :\t\"gpu_metrics\",\n  \"archive_ver"),
                     1);
    ck_assert_int_eq(cuptimon__gpm_is_meta("{\"label\": \"kind\", \"x\": \"gpu_metrics\""), 0);
    ck_assert_int_eq(cuptimon__gpm_is_meta("{\"pid\": 1, \"kind\" \"gpu_metrics\""), 0);
}
END_TEST

START_TEST(read_exact_chunks_segments)
{
    struct cuptimon_gpm_meta m;
    struct cuptimon_gpm_read_stats st;
    char dir[300];
    meta_init(&m, 0, 32);
    struct cuptimon_gpm_sample *s = samples(5000, 0, 32);
    /* Values a compressor will not shrink: every bit of them must come back. */
    for (size_t i = 0; i < 5000; i++)
        for (uint32_t k = 3; k < 32; k++)
            s[i].value[k] = (double)(((i * 32 + k) * 2654435761u) % 1000003) / 7.0;
    for (int level = 0; level <= 1; level++) {
        struct got g = {0};
        snprintf(dir, sizeof dir, "%s/2026-gpu0-%d", tmpdir, level);
        /* 10 chunks of 500 samples (136 kB), segments of 1 MiB. */
        write_session(dir, &m, s, 5000, 500, level, 1u << 20);
        ck_assert_int_eq(read_dir(dir, 0, 0, &g, &st), 0);
        ck_assert_uint_eq(g.n, 5000);
        for (size_t i = 0; i < 5000; i++)
            same_sample(&g.s[i], &s[i], 32);
        ck_assert_uint_eq(st.chunks, 10);
        ck_assert_uint_eq(st.samples, 5000);
        ck_assert_uint_eq(st.bad_chunks + st.bad_samples + st.bad_values + st.out_of_range, 0);
        ck_assert_str_eq(g.m.metric[1].key, "dram_read");
        ck_assert_str_eq(g.m.hostname, "node1");
        free(g.s);
        if (level == 0) {
            /* Stored raw, more than one segment was written. */
            char seg[400];
            struct stat sb;
            snprintf(seg, sizeof seg, "%s/seg-000001.cpt", dir);
            ck_assert_int_eq(stat(seg, &sb), 0);
        }
    }
    free(s);
}
END_TEST

START_TEST(read_range_filter)
{
    struct cuptimon_gpm_meta m;
    struct cuptimon_gpm_read_stats st;
    struct got g = {0};
    char dir[300];
    meta_init(&m, 2, 1);
    struct cuptimon_gpm_sample *s = samples(100, 0, 1); /* [T0, T0 + 1 s) */
    snprintf(dir, sizeof dir, "%s/x-gpu2-1", tmpdir);
    write_session(dir, &m, s, 100, 10, 1, 64u << 20);
    /* [from, to) against [start, end): a sample that ends at from, or
     * starts at to, does not overlap; one that straddles an edge does. */
    ck_assert_int_eq(read_dir(dir, T0 + 200 * MS, T0 + 305 * MS, &g, &st), 0);
    ck_assert_uint_eq(g.n, 11); /* samples 20 .. 30 */
    ck_assert_uint_eq(g.s[0].start_ns, T0 + 200 * MS);
    ck_assert_uint_eq(g.s[10].start_ns, T0 + 300 * MS);
    ck_assert_uint_eq(st.out_of_range + st.samples, 100);
    g.n = 0;
    ck_assert_int_eq(read_dir(dir, T0 + 205 * MS, T0 + 300 * MS, &g, &st), 0);
    ck_assert_uint_eq(g.n, 10); /* 20 (straddles from) .. 29 */
    ck_assert_uint_eq(g.s[0].start_ns, T0 + 200 * MS);
    g.n = 0;
    /* to 0: no end. */
    ck_assert_int_eq(read_dir(dir, T0 + 990 * MS, 0, &g, &st), 0);
    ck_assert_uint_eq(g.n, 1);
    g.n = 0;
    /* Chunks completed more than a second before from are not read. */
    ck_assert_int_eq(read_dir(dir, T0 + 5000 * MS, 0, &g, &st), 0);
    ck_assert_uint_eq(g.n, 0);
    ck_assert_uint_eq(st.chunks, 0);
    /* The callback's stop. */
    g.n = 0;
    g.stop_at = 3;
    ck_assert_int_eq(read_dir(dir, 0, 0, &g, &st), 7);
    ck_assert_uint_eq(g.n, 3);
    free(g.s);
    free(s);
}
END_TEST

START_TEST(read_wrong_raw_size)
{
    struct cuptimon_gpm_meta m;
    struct cuptimon_gpm_read_stats st;
    struct got g = {0};
    char dir[300];
    uint8_t buf[4 * CUPTIMON_GPM_SAMPLE_SIZE(2)];
    meta_init(&m, 0, 2);
    struct cuptimon_gpm_sample *s = samples(8, 0, 2);
    snprintf(dir, sizeof dir, "%s/x-gpu0-1", tmpdir);
    write_session(dir, &m, s, 4, 4, 0, 64u << 20);
    cuptimon__gpm_encode(buf, s + 4, 4, 2);
    /* Not a whole number of samples; records not the size's; a size of
     * another metric count; then a good one. */
    append_chunk(dir, 1, buf, sizeof buf - 8, 4);
    append_chunk(dir, 2, buf, sizeof buf, 3);
    append_chunk(dir, 3, buf, 3 * CUPTIMON_GPM_SAMPLE_SIZE(1), 3);
    append_chunk(dir, 4, buf, sizeof buf, UINT64_MAX / 8 + 4); /* records * stride wraps */
    append_chunk(dir, 5, buf, sizeof buf, 4);
    ck_assert_int_eq(read_dir(dir, 0, 0, &g, &st), 0);
    ck_assert_uint_eq(st.bad_chunks, 4);
    ck_assert_uint_eq(st.chunks, 2);
    ck_assert_uint_eq(g.n, 8);
    for (size_t i = 0; i < 8; i++)
        same_sample(&g.s[i], &s[i], 2);
    free(g.s);
    free(s);
}
END_TEST

START_TEST(read_bad_times)
{
    struct cuptimon_gpm_meta m;
    struct cuptimon_gpm_read_stats st;
    struct got g = {0};
    char dir[300];
    meta_init(&m, 0, 1);
    struct cuptimon_gpm_sample *s = samples(8, 0, 1);
    s[1].end_ns = s[1].start_ns;     /* no length */
    s[2].end_ns = s[2].start_ns - 1; /* ends before it starts */
    s[3].start_ns = s[0].start_ns;   /* before the previous sample's end */
    s[3].end_ns = s[0].end_ns;
    s[5].end_ns = CUPTIMON_GPM_TIME_MAX; /* at 2^63 */
    s[6].start_ns = UINT64_MAX - 5;
    s[6].end_ns = UINT64_MAX;
    snprintf(dir, sizeof dir, "%s/x-gpu0-1", tmpdir);
    write_session(dir, &m, s, 8, 8, 0, 64u << 20);
    ck_assert_int_eq(read_dir(dir, 0, 0, &g, &st), 0);
    ck_assert_uint_eq(st.bad_samples, 5);
    ck_assert_uint_eq(g.n, 3);
    same_sample(&g.s[0], &s[0], 1);
    same_sample(&g.s[1], &s[4], 1);
    same_sample(&g.s[2], &s[7], 1);
    free(g.s);
    free(s);
}
END_TEST

START_TEST(read_nan_and_inf)
{
    struct cuptimon_gpm_meta m;
    struct cuptimon_gpm_read_stats st;
    struct got g = {0};
    char dir[300];
    meta_init(&m, 0, 2);
    struct cuptimon_gpm_sample *s = samples(4, 0, 2);
    s[1].value[0] = NAN;
    s[2].value[1] = INFINITY;
    s[3].value[0] = -INFINITY;
    snprintf(dir, sizeof dir, "%s/x-gpu0-1", tmpdir);
    write_session(dir, &m, s, 4, 4, 1, 64u << 20);
    ck_assert_int_eq(read_dir(dir, 0, 0, &g, &st), 0);
    ck_assert_uint_eq(g.n, 4);
    ck_assert_uint_eq(st.bad_values, 2);
    ck_assert(isnan(g.s[1].value[0]));
    ck_assert(g.s[1].value[1] == s[1].value[1]);
    ck_assert(isnan(g.s[2].value[1]) && g.s[2].value[0] == s[2].value[0]);
    ck_assert(isnan(g.s[3].value[0]));
    free(g.s);
    free(s);
}
END_TEST

START_TEST(read_not_gpm_or_damaged)
{
    struct cuptimon_gpm_read_stats st;
    struct got g = {0};
    char dir[300], path[400], why[512] = "";
    struct cuptimon_archive_writer *w;
    char *err = NULL;

    /* A process session. */
    snprintf(dir, sizeof dir, "%s/20261205T000000Z-455-1", tmpdir);
    ck_assert_int_eq(
        cuptimon__aw_open(dir, "{\"pid\": 455, \"cupti_version\": 130001}", 64u << 20, 0, &w, &err),
        0);
    free(err);
    cuptimon__aw_close(w);
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(cuptimon__gpm_read(dir, 0, 0, collect, &g, &st, why, sizeof why), -EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "not a GPU metrics session"));
    /* A GPU metrics session whose meta.json lost a member. */
    struct cuptimon_gpm_meta m;
    meta_init(&m, 1, 1);
    struct cuptimon_gpm_sample *s = samples(3, 0, 1);
    snprintf(dir, sizeof dir, "%s/x-gpu1-1", tmpdir);
    write_session(dir, &m, s, 3, 3, 0, 64u << 20);
    snprintf(path, sizeof path, "%s/meta.json", dir);
    write_text(path, "{\"kind\": \"gpu_metrics\", \"archive_version\": 1, \"clock\": \"unix_ns\", "
                     "\"device\": {\"ordinal\": 1}, \"interval_ns\": 1}");
    ck_assert_int_eq(cuptimon__gpm_read(dir, 0, 0, collect, &g, &st, why, sizeof why), -EBADMSG);
    ck_assert_ptr_nonnull(strstr(why, "metrics"));
    /* Torn: still a GPU metrics session, and refused. */
    write_text(path, "{\"kind\": \"gpu_metrics\", \"archive_vers");
    ck_assert_int_eq(cuptimon__gpm_read(dir, 0, 0, collect, &g, &st, why, sizeof why), -EBADMSG);
    /* No directory. */
    snprintf(dir, sizeof dir, "%s/none", tmpdir);
    ck_assert_int_lt(cuptimon__gpm_read(dir, 0, 0, collect, &g, &st, why, sizeof why), 0);
    ck_assert_uint_eq(g.n, 0);
    free(s);
}
END_TEST

START_TEST(find_sessions_by_name_and_kind)
{
    struct cuptimon_gpm_meta m;
    char root[300], dir[400], **dirs;
    struct cuptimon_archive_writer *w;
    char *err = NULL;
    struct cuptimon_gpm_sample *s = samples(1, 0, 1);

    snprintf(root, sizeof root, "%s/out", tmpdir);
    meta_init(&m, 0, 1);
    snprintf(dir, sizeof dir, "%s/archive/20261205T000001Z-gpu0-1", root);
    write_session(dir, &m, s, 1, 1, 0, 64u << 20);
    m.ordinal = 12;
    snprintf(dir, sizeof dir, "%s/archive/20261205T000000Z-gpu12-2", root);
    write_session(dir, &m, s, 1, 1, 0, 64u << 20);
    /* Named otherwise: not looked at (decode and stats read every meta). */
    snprintf(dir, sizeof dir, "%s/archive/renamed", root);
    write_session(dir, &m, s, 1, 1, 0, 64u << 20);
    /* Named like one, but a process session. */
    snprintf(dir, sizeof dir, "%s/archive/20261205T000000Z-gpu3-1", root);
    ck_assert_int_eq(cuptimon__aw_open(dir, "{\"pid\": 7}", 64u << 20, 0, &w, &err), 0);
    cuptimon__aw_close(w);
    free(err);
    ck_assert_int_eq(cuptimon__gpm_find_sessions(root, &dirs), 0);
    ck_assert_ptr_nonnull(dirs[0]);
    ck_assert_ptr_nonnull(strstr(dirs[0], "T000000Z-gpu12-2"));
    ck_assert_ptr_nonnull(dirs[1]);
    ck_assert_ptr_nonnull(strstr(dirs[1], "T000001Z-gpu0-1"));
    ck_assert_ptr_null(dirs[2]);
    cuptimon__archive_free_list(dirs);
    free(s);
}
END_TEST

START_TEST(devsets)
{
    struct cuptimon_gpm_devset d = {0};
    ck_assert(cuptimon__gpm_devset_empty(&d));
    cuptimon__gpm_ordinals_add(&d.ord, 0);
    cuptimon__gpm_ordinals_add(&d.ord, 200);
    cuptimon__gpm_ordinals_add(&d.ord, 300); /* out of the set's reach: never in it */
    ck_assert(!cuptimon__gpm_devset_empty(&d));
    ck_assert(cuptimon__gpm_devset_has(&d, 0, "") && cuptimon__gpm_devset_has(&d, 200, NULL));
    ck_assert(!cuptimon__gpm_devset_has(&d, 1, "") && !cuptimon__gpm_devset_has(&d, 300, ""));
    d.all = 1;
    ck_assert(cuptimon__gpm_devset_has(&d, 300, "") && cuptimon__gpm_devset_has(NULL, 5, ""));
}
END_TEST

#define UUID_OF(n) "GPU-fa4e0000-0000-4000-8000-0000000000" n

/* A process under CUDA_VISIBLE_DEVICES=2,1 calls node GPU 2 its device 0:
 * the UUID its shim sent for each ordinal says which GPU's metrics are its
 * (a GPU metrics session names its device by the node's ordinal and UUID).
 * An ordinal without a well-formed UUID (a shim before them, a hostile
 * one) stays an ordinal. */
START_TEST(devsets_by_uuid)
{
    static const char *const bad[] = {
        "GPU-fa4e0000-0000-4000-8000-00000000000", "GPU-fa4e0000-0000-4000-8000-0000000000zz",
        "GPU-fa4e0000+0000-4000-8000-000000000003", "gpu-fa4e0000-0000-4000-8000-000000000003"};
    struct cuptimon_strtab *st;
    struct cuptimon_gpm_ordinals p = {0};
    struct cuptimon_gpm_devset n = {0}, many = {0};

    ck_assert_int_eq(cuptimon__strtab_new(NULL, &st), 0);
    ck_assert_int_eq(cuptimon__strtab_put(st, CUPTIMON_DEVICE_UUID_KEY(0), UUID_OF("02"), 40), 0);
    ck_assert_int_eq(cuptimon__strtab_put(st, CUPTIMON_DEVICE_UUID_KEY(1), UUID_OF("01"), 40), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(
            cuptimon__strtab_put(st, CUPTIMON_DEVICE_UUID_KEY(5 + i), bad[i], strlen(bad[i])), 0);
    cuptimon__gpm_ordinals_add(&p, 0);
    cuptimon__gpm_devset_resolve(&n, &p, st);
    ck_assert(!cuptimon__gpm_devset_empty(&n));
    ck_assert(cuptimon__gpm_devset_has(&n, 2, UUID_OF("02")));
    ck_assert(!cuptimon__gpm_devset_has(&n, 0, UUID_OF("00"))); /* not the node's GPU 0 */
    ck_assert(!cuptimon__gpm_devset_has(&n, 1, UUID_OF("01")));
    /* Ordinal 1 is node GPU 1; 3 has no UUID, 5..8 a malformed one: ordinals. */
    cuptimon__gpm_ordinals_add(&p, 1);
    cuptimon__gpm_ordinals_add(&p, 3);
    for (int i = 5; i < 9; i++)
        cuptimon__gpm_ordinals_add(&p, (uint32_t)i);
    cuptimon__gpm_devset_resolve(&n, &p, st);
    ck_assert_uint_eq(n.nuuid, 2); /* GPU 2's once */
    ck_assert(cuptimon__gpm_devset_has(&n, 1, UUID_OF("01")));
    ck_assert(cuptimon__gpm_devset_has(&n, 3, UUID_OF("03")));
    for (int i = 5; i < 9; i++)
        ck_assert(cuptimon__gpm_devset_has(&n, (uint32_t)i, UUID_OF("99")));
    ck_assert(!cuptimon__gpm_devset_has(&n, 4, UUID_OF("04")));
    /* No strings at all (a session whose strings.bin is gone): ordinals. */
    memset(&n, 0, sizeof n);
    cuptimon__gpm_devset_resolve(&n, &p, NULL);
    ck_assert(cuptimon__gpm_devset_has(&n, 0, UUID_OF("00")));
    ck_assert(!cuptimon__gpm_devset_has(&n, 2, UUID_OF("02")));
    cuptimon__strtab_free(st);
    /* More distinct UUIDs than the set holds: every GPU, not a guess. */
    for (int i = 0; i <= CUPTIMON_GPM_DEVSET_UUIDS; i++) {
        struct cuptimon_gpm_ordinals one = {0};
        char u[CUPTIMON_UUID_TEXT_SIZE];
        unsigned char b[16] = {0};
        b[15] = (unsigned char)i;
        cuptimon__uuid_text(u, b);
        ck_assert_int_eq(cuptimon__strtab_new(NULL, &st), 0);
        ck_assert_int_eq(cuptimon__strtab_put(st, CUPTIMON_DEVICE_UUID_KEY(0), u, strlen(u)), 0);
        cuptimon__gpm_ordinals_add(&one, 0);
        cuptimon__gpm_devset_resolve(&many, &one, st);
        cuptimon__strtab_free(st);
        ck_assert_int_eq(many.all, i == CUPTIMON_GPM_DEVSET_UUIDS);
    }
    ck_assert(cuptimon__gpm_devset_has(&many, 250, ""));
}
END_TEST

/* ---- trace counters ---------------------------------------------------------- */

/* The counter events of a trace for one name: (ts in ns from the base,
 * value, pid) in file order. */
struct cev {
    int64_t ts;
    double v;
    int64_t pid;
};

static size_t counters_of(json_object *tr, const char *name, const char *key, int64_t pid,
                          struct cev *out, size_t max)
{
    json_object *evs = cuptimon__json_get(tr, "traceEvents");
    size_t n = 0;
    for (size_t i = 0; i < json_object_array_length(evs); i++) {
        json_object *e = json_object_array_get_idx(evs, i);
        if (strcmp(cuptimon__json_str(e, "ph", ""), "C") != 0 ||
            strcmp(cuptimon__json_str(e, "name", ""), name) != 0 ||
            (pid >= 0 && cuptimon__json_int(e, "pid", -1) != pid))
            continue;
        ck_assert_str_eq(cuptimon__json_str(e, "cat", ""), "gpu_metrics");
        json_object *args = cuptimon__json_get(e, "args"), *v;
        ck_assert_int_eq(json_object_object_length(args), 1);
        ck_assert(json_object_object_get_ex(args, key, &v));
        ck_assert_uint_lt(n, max);
        out[n].ts = llround(cuptimon__json_double(e, "ts", 0) * 1000);
        out[n].v = json_object_get_double(v);
        out[n].pid = cuptimon__json_int(e, "pid", -1);
        n++;
    }
    return n;
}

static size_t counters(json_object *tr, const char *name, const char *key, struct cev *out,
                       size_t max)
{
    return counters_of(tr, name, key, -1, out, max);
}

static json_object *meta_of(json_object *tr, const char *what, int64_t pid)
{
    json_object *evs = cuptimon__json_get(tr, "traceEvents");
    for (size_t i = 0; i < json_object_array_length(evs); i++) {
        json_object *e = json_object_array_get_idx(evs, i);
        if (strcmp(cuptimon__json_str(e, "ph", ""), "M") == 0 &&
            strcmp(cuptimon__json_str(e, "name", ""), what) == 0 &&
            cuptimon__json_int(e, "pid", -1) == pid)
            return cuptimon__json_get(e, "args");
    }
    return NULL;
}

START_TEST(trace_counter_tracks)
{
    char path[300];
    struct cuptimon_trace *t;
    struct cuptimon_trace_opts o = {.base_ns = T0};
    struct cuptimon_gpm_meta m, m2;
    struct cuptimon_gpm_sample s[6];
    struct cev c[32];
    FILE *f;

    snprintf(path, sizeof path, "%s/t.json", tmpdir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(cuptimon__trace_new_file(&o, f, &t), 0);
    meta_init(&m, 1, 2);
    snprintf(m.metric[1].unit, sizeof m.metric[1].unit, "%s", "");
    snprintf(m.metric[1].label, sizeof m.metric[1].label, "%s", "Odd \"label\"");
    snprintf(m.hostname, sizeof m.hostname, "node1");
    int h = cuptimon__trace_add_gpu(t, &m);
    ck_assert_int_ge(h, 0);
    /* [0,10) 1, [10,20) 2, a gap, [40,50) 3, [50,60) no value, [60,70) 5,
     * [71,80) 6 (1 ms late: within half the interval). */
    static const uint64_t at[6][2] = {{0, 10}, {10, 20}, {40, 50}, {50, 60}, {60, 70}, {71, 80}};
    static const double v[6] = {1, 2, 3, NAN, 5, 6};
    for (int i = 0; i < 6; i++) {
        memset(&s[i], 0, sizeof s[i]);
        s[i].start_ns = T0 + at[i][0] * MS;
        s[i].end_ns = T0 + at[i][1] * MS;
        s[i].value[0] = v[i];
        s[i].value[1] = 0.5;
        ck_assert_int_eq(cuptimon__trace_gpu_sample(t, h, &s[i]), 0);
    }
    ck_assert_int_eq(cuptimon__trace_gpu_end(t, h), 0);
    ck_assert_int_eq(cuptimon__trace_gpu_sample(t, h, &s[0]), -EINVAL);
    /* A second session of the same device: the same process; another
     * device (another ordinal) gets its own; one left open is ended by
     * the finish. */
    meta_init(&m2, 1, 1);
    snprintf(m2.hostname, sizeof m2.hostname, "node1");
    int h2 = cuptimon__trace_add_gpu(t, &m2);
    s[0].start_ns = T0 + 100 * MS;
    s[0].end_ns = T0 + 110 * MS;
    s[0].value[0] = 1e12;
    ck_assert_int_eq(cuptimon__trace_gpu_sample(t, h2, &s[0]), 0);
    meta_init(&m2, 0, 1);
    int h3 = cuptimon__trace_add_gpu(t, &m2);
    ck_assert_int_eq(cuptimon__trace_gpu_sample(t, h3, &s[0]), 0);
    /* The same ordinal on another host: another process. */
    snprintf(m2.hostname, sizeof m2.hostname, "node2");
    m2.ordinal = 1;
    int h4 = cuptimon__trace_add_gpu(t, &m2);
    ck_assert_int_eq(cuptimon__trace_gpu_sample(t, h4, &s[0]), 0);
    m2.nmetrics = 0;
    ck_assert_int_eq(cuptimon__trace_add_gpu(t, &m2), -EINVAL);
    ck_assert_int_eq(cuptimon__trace_finish(t, NULL), 0);
    struct cuptimon_trace_stats ts;
    cuptimon__trace_stats(t, &ts);
    cuptimon__trace_free(t);
    fclose(f);

    json_object *tr = json_object_from_file(path);
    ck_assert_ptr_nonnull(tr);
    size_t n = counters_of(tr, "GPU 1 SM active", "(%)", 0x48000001, c, 32);
    static const struct {
        int64_t ms;
        double v;
    } want[] = {{0, 1},  {10, 2}, {20, 0}, {40, 3},     {50, 0},
                {60, 5}, {71, 6}, {80, 0}, {100, 1e12}, {110, 0}};
    ck_assert_uint_eq(n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(c[i].ts, want[i].ms * (int64_t)MS);
        ck_assert_msg(c[i].v == want[i].v, "%zu: %g != %g", i, c[i].v, want[i].v);
        ck_assert_int_eq(c[i].pid, 0x48000001);
    }
    /* No unit: the key is "value"; the label is escaped. */
    n = counters(tr, "GPU 1 Odd \"label\"", "value", c, 32);
    ck_assert_uint_eq(n, 8); /* 0, 10, 40, 50, 60, 71: values; 20: the gap; 80: the end */
    ck_assert_int_eq(c[1].ts, 10 * (int64_t)MS);
    ck_assert_int_eq(c[2].ts, 20 * (int64_t)MS);
    ck_assert(c[2].v == 0);
    /* Device 0 and node2's device 1. */
    n = counters(tr, "GPU 0 SM active", "(%)", c, 32);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(c[0].pid, 0x48000000);
    n = counters(tr, "GPU 1 SM active", "(%)", c, 32);
    ck_assert_uint_eq(n, 12);
    ck_assert_uint_eq(counters_of(tr, "GPU 1 SM active", "(%)", 0x48010001, c, 32), 2);
    /* The processes: named, labelled, sorted after the CPU processes. */
    json_object *a = meta_of(tr, "process_name", 0x48000001);
    ck_assert_ptr_nonnull(a);
    ck_assert_str_eq(cuptimon__json_str(a, "name", ""), "GPU 1 metrics (NVIDIA H200)");
    a = meta_of(tr, "process_labels", 0x48000001);
    ck_assert_ptr_nonnull(strstr(cuptimon__json_str(a, "labels", ""), "host node1"));
    ck_assert_ptr_nonnull(strstr(cuptimon__json_str(a, "labels", ""), "PCI 0000:19:00.0"));
    a = meta_of(tr, "process_sort_index", 0x48000001);
    ck_assert_int_eq(cuptimon__json_int(a, "sort_index", 0), 0x50000001);
    ck_assert_ptr_nonnull(meta_of(tr, "process_name", 0x48010001));
    /* otherData lists them. */
    json_object *gl = cuptimon__json_get(cuptimon__json_get(tr, "otherData"), "gpu_metrics");
    ck_assert_int_eq(json_object_array_length(gl), 3);
    ck_assert_int_eq(cuptimon__json_int(json_object_array_get_idx(gl, 0), "samples", 0), 7);
    ck_assert_uint_eq(ts.counters, 8 + 8 + 2 + 2 + 2);
    json_object_put(tr);
}
END_TEST

START_TEST(trace_session_by_device)
{
    struct cuptimon_gpm_meta m;
    struct cuptimon_gpm_read_stats st = {0};
    struct cuptimon_trace_opts o = {.base_ns = T0};
    struct cuptimon_trace *t;
    struct cuptimon_gpm_devset d = {0};
    char dir[300], path[300], why[256] = "";
    struct cev c[64];
    FILE *f;

    meta_init(&m, 2, 1);
    struct cuptimon_gpm_sample *s = samples(20, 0, 1);
    snprintf(dir, sizeof dir, "%s/x-gpu2-1", tmpdir);
    write_session(dir, &m, s, 20, 5, 1, 64u << 20);
    snprintf(path, sizeof path, "%s/t.json", tmpdir);
    f = fopen(path, "w");
    ck_assert_int_eq(cuptimon__trace_new_file(&o, f, &t), 0);
    cuptimon__gpm_ordinals_add(&d.ord, 1);
    ck_assert_int_eq(cuptimon__gpm_trace_session(t, dir, 0, 0, &d, &st, why, sizeof why),
                     0); /* not device 2 */
    cuptimon__gpm_ordinals_add(&d.ord, 2);
    ck_assert_int_eq(
        cuptimon__gpm_trace_session(t, dir, T0 + 55 * MS, T0 + 100 * MS, &d, &st, why, sizeof why),
        1);
    ck_assert_uint_eq(st.samples, 5); /* [50,60) .. [90,100) */
    ck_assert_int_eq(cuptimon__trace_finish(t, NULL), 0);
    cuptimon__trace_free(t);
    fclose(f);
    json_object *tr = json_object_from_file(path);
    size_t n = counters(tr, "GPU 2 SM active", "(%)", c, 64);
    ck_assert_uint_eq(n, 6);
    ck_assert_int_eq(c[0].ts, 50 * (int64_t)MS);
    ck_assert(c[0].v == s[5].value[0]);
    ck_assert_int_eq(c[5].ts, 100 * (int64_t)MS);
    ck_assert(c[5].v == 0);
    json_object_put(tr);
    free(s);
}
END_TEST

/* ---- statistics --------------------------------------------------------------- */

static json_object *row_of(json_object *rows, int device, const char *metric)
{
    for (size_t i = 0; i < json_object_array_length(rows); i++) {
        json_object *r = json_object_array_get_idx(rows, i);
        if (cuptimon__json_int(r, "device", -1) == device &&
            strcmp(cuptimon__json_str(r, "metric", ""), metric) == 0)
            return r;
    }
    return NULL;
}

START_TEST(stats_time_weighted)
{
    struct cuptimon_gpm_stats *gs;
    struct cuptimon_gpm_meta m;
    struct cuptimon_gpm_sample s[4];

    ck_assert_int_eq(cuptimon__gpm_stats_new(CUPTIMON_GPM_EXACT_DEFAULT, &gs), 0);
    meta_init(&m, 0, 2);
    ck_assert_int_eq(cuptimon__gpm_stats_session(gs, &m), 0);
    /* Values 10 for 10 ms, 20 for 30 ms, 30 for 10 ms, and a sample with
     * no value for the first metric. */
    static const uint64_t at[4][2] = {{0, 10}, {10, 40}, {40, 50}, {50, 60}};
    static const double v[4] = {10, 20, 30, NAN};
    for (int i = 0; i < 4; i++) {
        memset(&s[i], 0, sizeof s[i]);
        s[i].start_ns = T0 + at[i][0] * MS;
        s[i].end_ns = T0 + at[i][1] * MS;
        s[i].value[0] = v[i];
        s[i].value[1] = 7;
        ck_assert_int_eq(cuptimon__gpm_stats_sample(gs, &s[i], 0, 0), 0);
    }
    json_object *rows = cuptimon__gpm_stats_rows(gs), *r = row_of(rows, 0, "sm_active");
    ck_assert_int_eq(json_object_array_length(rows), 2);
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(cuptimon__json_str(r, "label", ""), "SM active");
    ck_assert_str_eq(cuptimon__json_str(r, "unit", ""), "%");
    ck_assert_str_eq(cuptimon__json_str(r, "name", ""), "NVIDIA H200");
    ck_assert_int_eq(cuptimon__json_int(r, "samples", 0), 3);
    ck_assert_int_eq(cuptimon__json_int(r, "covered_ns", 0), 50 * (int64_t)MS);
    ck_assert_double_eq_tol(cuptimon__json_double(r, "mean", 0), 20.0, 1e-12);
    ck_assert_double_eq(cuptimon__json_double(r, "med", 0), 20.0);
    ck_assert(cuptimon__json_bool(r, "med_exact", 0));
    ck_assert_double_eq(cuptimon__json_double(r, "min", 0), 10.0);
    ck_assert_double_eq(cuptimon__json_double(r, "max", 0), 30.0);
    r = row_of(rows, 0, "dram_read");
    ck_assert_int_eq(cuptimon__json_int(r, "covered_ns", 0), 60 * (int64_t)MS);
    json_object_put(rows);
    cuptimon__gpm_stats_free(gs);

    /* Clipped to [5, 45): 10 for 5 ms, 20 for 30, 30 for 5. */
    ck_assert_int_eq(cuptimon__gpm_stats_new(CUPTIMON_GPM_EXACT_DEFAULT, &gs), 0);
    ck_assert_int_eq(cuptimon__gpm_stats_session(gs, &m), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(cuptimon__gpm_stats_sample(gs, &s[i], T0 + 5 * MS, T0 + 45 * MS), 0);
    rows = cuptimon__gpm_stats_rows(gs);
    r = row_of(rows, 0, "sm_active");
    ck_assert_int_eq(cuptimon__json_int(r, "covered_ns", 0), 40 * (int64_t)MS);
    ck_assert_double_eq_tol(cuptimon__json_double(r, "mean", 0), (50.0 + 600 + 150) / 40, 1e-12);
    r = row_of(rows, 0, "dram_read");
    ck_assert_int_eq(cuptimon__json_int(r, "samples", 0), 3); /* [50,60) is outside */
    json_object_put(rows);
    cuptimon__gpm_stats_free(gs);
}
END_TEST

START_TEST(stats_sessions_add_up_and_sort)
{
    struct cuptimon_gpm_stats *gs;
    struct cuptimon_gpm_meta m;

    ck_assert_int_eq(cuptimon__gpm_stats_new(CUPTIMON_GPM_EXACT_DEFAULT, &gs), 0);
    /* Device 1 first, two runs of device 0 (the second with one more
     * metric), and a metric without any value. */
    meta_init(&m, 1, 1);
    ck_assert_int_eq(cuptimon__gpm_stats_session(gs, &m), 0);
    struct cuptimon_gpm_sample *s = samples(10, 0, 3);
    for (int i = 0; i < 10; i++)
        cuptimon__gpm_stats_sample(gs, &s[i], 0, 0);
    meta_init(&m, 0, 2);
    ck_assert_int_eq(cuptimon__gpm_stats_session(gs, &m), 0);
    for (int i = 0; i < 5; i++) {
        s[i].value[1] = NAN;
        cuptimon__gpm_stats_sample(gs, &s[i], 0, 0);
    }
    meta_init(&m, 0, 3);
    ck_assert_int_eq(cuptimon__gpm_stats_session(gs, &m), 0);
    for (int i = 5; i < 10; i++) {
        s[i].value[1] = NAN;
        cuptimon__gpm_stats_sample(gs, &s[i], 0, 0);
    }
    ck_assert_uint_eq(cuptimon__gpm_stats_sessions(gs), 3);
    json_object *rows = cuptimon__gpm_stats_rows(gs);
    ck_assert_int_eq(json_object_array_length(rows), 4);
    static const struct {
        int dev;
        const char *key;
    } order[] = {{0, "sm_active"}, {0, "dram_read"}, {0, "pcie_write"}, {1, "sm_active"}};
    for (size_t i = 0; i < 4; i++) {
        json_object *r = json_object_array_get_idx(rows, i);
        ck_assert_int_eq(cuptimon__json_int(r, "device", -1), order[i].dev);
        ck_assert_str_eq(cuptimon__json_str(r, "metric", ""), order[i].key);
    }
    json_object *r = json_object_array_get_idx(rows, 0);
    ck_assert_int_eq(cuptimon__json_int(r, "samples", 0), 10);
    /* Values 1.25 .. 12.5, 10 ms each: mean 6.875, lower median 6.25. */
    ck_assert_double_eq_tol(cuptimon__json_double(r, "mean", 0), 6.875, 1e-12);
    ck_assert_double_eq(cuptimon__json_double(r, "med", 0), 6.25);
    r = json_object_array_get_idx(rows, 1);
    ck_assert_int_eq(cuptimon__json_int(r, "samples", 0), 0);
    ck_assert_ptr_null(cuptimon__json_get(r, "mean"));
    r = json_object_array_get_idx(rows, 2);
    ck_assert_int_eq(cuptimon__json_int(r, "samples", 0), 5);
    json_object_put(rows);
    cuptimon__gpm_stats_free(gs);
    free(s);
}
END_TEST

START_TEST(stats_histogram_medians)
{
    struct cuptimon_gpm_stats *gs, *ex;
    struct cuptimon_gpm_meta m;
    struct cuptimon_gpm_sample s;
    uint64_t x = 88172645463325252ull;

    /* One row exact, the other from histograms (limit 0), and a limit
     * that moves the largest row over. */
    ck_assert_int_eq(cuptimon__gpm_stats_new(0, &gs), 0);
    ck_assert_int_eq(cuptimon__gpm_stats_new(1000, &ex), 0);
    meta_init(&m, 0, 4);
    ck_assert_int_eq(cuptimon__gpm_stats_session(gs, &m), 0);
    ck_assert_int_eq(cuptimon__gpm_stats_session(ex, &m), 0);
    memset(&s, 0, sizeof s);
    for (int i = 0; i < 3000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.start_ns = T0 + (uint64_t)i * 10 * MS;
        s.end_ns = s.start_ns + (1 + x % 20) * MS;
        s.value[0] = (double)(x % 100000) / 1000.0; /* 0 .. 100 */
        s.value[1] = -(double)(x % 977) - 0.5;      /* negative */
        s.value[2] = i % 3 ? 0.0 : 3e9;             /* zero most of the time */
        s.value[3] = (double)(x % 1000) * 1e9;      /* large */
        ck_assert_int_eq(cuptimon__gpm_stats_sample(gs, &s, 0, 0), 0);
        if (i >= 100)
            s.value[1] = s.value[2] = s.value[3] = NAN; /* small rows stay exact */
        ck_assert_int_eq(cuptimon__gpm_stats_sample(ex, &s, 0, 0), 0);
    }
    struct cuptimon_gpm_stats *exact;
    ck_assert_int_eq(cuptimon__gpm_stats_new(UINT64_MAX, &exact), 0);
    ck_assert_int_eq(cuptimon__gpm_stats_session(exact, &m), 0);
    x = 88172645463325252ull;
    for (int i = 0; i < 3000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.start_ns = T0 + (uint64_t)i * 10 * MS;
        s.end_ns = s.start_ns + (1 + x % 20) * MS;
        s.value[0] = (double)(x % 100000) / 1000.0;
        s.value[1] = -(double)(x % 977) - 0.5;
        s.value[2] = i % 3 ? 0.0 : 3e9;
        s.value[3] = (double)(x % 1000) * 1e9;
        ck_assert_int_eq(cuptimon__gpm_stats_sample(exact, &s, 0, 0), 0);
    }
    json_object *h = cuptimon__gpm_stats_rows(gs), *e = cuptimon__gpm_stats_rows(exact),
                *mix = cuptimon__gpm_stats_rows(ex);
    for (int k = 0; k < 4; k++) {
        json_object *rh = json_object_array_get_idx(h, (size_t)k);
        json_object *re = json_object_array_get_idx(e, (size_t)k);
        double mh = cuptimon__json_double(rh, "med", 0), me = cuptimon__json_double(re, "med", 0);
        ck_assert(!cuptimon__json_bool(rh, "med_exact", 1));
        ck_assert(cuptimon__json_bool(re, "med_exact", 0));
        ck_assert_msg(fabs(mh - me) <= fabs(me) / 128 + 1e-300, "metric %d: %.17g vs %.17g", k, mh,
                      me);
        /* Everything but the median stays exact. */
        ck_assert_double_eq(cuptimon__json_double(rh, "mean", 0),
                            cuptimon__json_double(re, "mean", 0));
        ck_assert_double_eq(cuptimon__json_double(rh, "max", 0),
                            cuptimon__json_double(re, "max", 0));
        ck_assert_double_eq(cuptimon__json_double(rh, "min", 0),
                            cuptimon__json_double(re, "min", 0));
    }
    /* Metric 2: zero two thirds of the time... by count, not by time: its
     * median is one of its two values, exactly (0 has a bin of its own). */
    double m2 = cuptimon__json_double(json_object_array_get_idx(e, 2), "med", -1);
    ck_assert(m2 == 0 || m2 == 3e9);
    ck_assert_double_eq(cuptimon__json_double(json_object_array_get_idx(h, 2), "med", -1), m2);
    /* The limit moved the largest rows to histograms: the small one kept
     * its values, the medians are within the bound either way. */
    ck_assert(!cuptimon__json_bool(json_object_array_get_idx(mix, 0), "med_exact", 1));
    for (size_t k = 1; k < 4; k++)
        ck_assert(cuptimon__json_bool(json_object_array_get_idx(mix, k), "med_exact", 0));
    json_object_put(h);
    json_object_put(e);
    json_object_put(mix);
    cuptimon__gpm_stats_free(gs);
    cuptimon__gpm_stats_free(ex);
    cuptimon__gpm_stats_free(exact);
}
END_TEST

/* ---- the readers: decode, stats, window --------------------------------------- */

#define PROC_META                                                                                  \
    "{\"pid\": 455, \"hostname\": \"node1\", \"exe\": \"/opt/app/train\", "                        \
    "\"cupti_version\": 130001, "                                                                  \
    "\"record_sizes\": {\"1\": 96, \"2\": 88, \"3\": 216, \"4\": 40, \"5\": 40, \"10\": 216}}"

/* A process session of the real buffer phase0-buf0 (kernels, copies and
 * memsets on device 0, CLOCK_REALTIME times); *first and *last: the span
 * of its records, *dev: their device. */
static void make_process(const char *dir, uint64_t *first, uint64_t *last, uint32_t *dev)
{
    struct cuptimon_archive_writer *w;
    struct cuptimon_chunk_hdr h;
    struct cuptimon_layout l;
    struct cuptimon_decode_stats ds;
    struct cuptimon_walk wk;
    struct cuptimon_ev ev;
    char *err = NULL;
    size_t len;
    uint8_t *buf = cuptimon__test_load_real("phase0-buf0.bin.zst", &len);

    ck_assert_int_eq(cuptimon__aw_open(dir, PROC_META, 64u << 20, 1, &w, &err), 0);
    free(err);
    *first = UINT64_MAX;
    *last = 0;
    *dev = UINT32_MAX;
    cuptimon__layout_init(&l, 130001, NULL);
    memset(&ds, 0, sizeof ds);
    cuptimon__walk_begin(&wk, &l, buf, len, &ds);
    while (cuptimon__walk_next(&wk, &ev)) {
        if (ev.start == 0)
            continue;
        if (ev.start < *first)
            *first = ev.start;
        if (ev.end > *last)
            *last = ev.end;
        if (ev.type == CUPTIMON_EV_KERNEL) {
            ck_assert(*dev == UINT32_MAX || *dev == ev.device_id);
            *dev = ev.device_id;
        }
    }
    ck_assert_uint_gt(*last, *first);
    memset(&h, 0, sizeof h);
    h.cupti_ts = h.unix_ns = *last + MS; /* the identity */
    h.raw_size = len;
    ck_assert_int_eq(cuptimon__aw_chunk(w, &h, buf), 0);
    cuptimon__aw_close(w);
    free(buf);
}

static int run(int (*fn)(int, char **), const char **args, int n)
{
    char *argv[24];
    for (int i = 0; i < n; i++)
        argv[i] = (char *)args[i];
    argv[n] = NULL;
    return fn(n, argv);
}

static int stats_fn(int argc, char **argv)
{
    return cuptimon__cli_stats(NULL, argc, argv);
}

/* The span [lo, hi] of the counter events of name, in ns from the base. */
static size_t counter_span(json_object *tr, const char *name, int64_t *lo, int64_t *hi)
{
    struct cev c[4096];
    size_t n = counters(tr, name, "(%)", c, 4096);
    *lo = INT64_MAX;
    *hi = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        if (c[i].ts < *lo)
            *lo = c[i].ts;
        if (c[i].ts > *hi)
            *hi = c[i].ts;
    }
    return n;
}

/* An archive: the process session and GPU metrics sessions of devices 0
 * (two runs) and 1, every 10 ms over [first - 1 s, last + 1 s). */
struct arch {
    char root[300], proc[400], g0a[400], g0b[400], g1[400];
    uint64_t first, last, t0, mid;
    uint32_t dev;
    size_t n;
};

static void make_archive(struct arch *a)
{
    struct cuptimon_gpm_meta m;
    snprintf(a->root, sizeof a->root, "%s/out", tmpdir);
    snprintf(a->proc, sizeof a->proc, "%s/archive/20261205T000000Z-455-1", a->root);
    snprintf(a->g0a, sizeof a->g0a, "%s/archive/20261205T000000Z-gpu0-1", a->root);
    snprintf(a->g0b, sizeof a->g0b, "%s/archive/20261205T000001Z-gpu0-2", a->root);
    snprintf(a->g1, sizeof a->g1, "%s/archive/20261205T000000Z-gpu1-1", a->root);
    make_process(a->proc, &a->first, &a->last, &a->dev);
    ck_assert_uint_eq(a->dev, 0);
    a->t0 = (a->first - 1000 * MS) / (10 * MS) * (10 * MS);
    a->n = (size_t)((a->last + 1000 * MS - a->t0) / (10 * MS));
    struct cuptimon_gpm_sample *s = samples(a->n, a->t0 - T0, 1);
    a->mid = s[a->n / 2].start_ns;
    meta_init(&m, 0, 1);
    write_session(a->g0a, &m, s, a->n / 2, 25, 1, 64u << 20);
    write_session(a->g0b, &m, s + a->n / 2, a->n - a->n / 2, 25, 1, 64u << 20);
    meta_init(&m, 1, 1);
    write_session(a->g1, &m, s, a->n, 25, 1, 64u << 20);
    free(s);
}

START_TEST(cli_decode_counters)
{
    struct arch a;
    char out[400], from[64], to[64];
    int64_t lo, hi;

    make_archive(&a);
    snprintf(out, sizeof out, "%s/trace.json", tmpdir);
    /* Every GPU, over the span of the events; no session is undecodable. */
    {
        const char *args[] = {"decode", a.root, "-o", out, "-q"};
        ck_assert_int_eq(run(cuptimon__cli_decode, args, 5), 0);
    }
    json_object *tr = json_object_from_file(out), *od = cuptimon__json_get(tr, "otherData");
    ck_assert_ptr_nonnull(tr);
    uint64_t base = (uint64_t)cuptimon__json_int(od, "base_unix_ns", 0);
    ck_assert_uint_eq(base, a.first - a.first % 1000000000u);
    ck_assert_int_eq(json_object_array_length(cuptimon__json_get(od, "sessions")), 1);
    ck_assert_int_eq(json_object_array_length(cuptimon__json_get(od, "gpu_metrics_sessions")), 3);
    size_t n0 = counter_span(tr, "GPU 0 SM active", &lo, &hi);
    /* The samples overlapping [first, last]: starting at most 10 ms before
     * the first event, the run's closing 0 at most 10 ms after the last. */
    ck_assert_uint_gt(n0, 2);
    ck_assert_int_le(lo, (int64_t)(a.first - base));
    ck_assert_int_gt(lo, (int64_t)(a.first - base) - 10 * (int64_t)MS);
    ck_assert_int_ge(hi, (int64_t)(a.last - base));
    ck_assert_int_le(hi, (int64_t)(a.last - base) + 10 * (int64_t)MS);
    /* The two runs of device 0 in one process, the second's first sample
     * at its start. */
    {
        struct cev c[4096];
        size_t n = counters(tr, "GPU 0 SM active", "(%)", c, 4096), seen = 0;
        for (size_t i = 0; i < n; i++)
            if (c[i].ts == (int64_t)(a.mid - base) && c[i].v != 0)
                seen++;
        ck_assert_uint_eq(seen, (a.mid >= a.first && a.mid <= a.last) ? 1 : 0);
        ck_assert_int_eq(c[0].pid, 0x48000000);
    }
    ck_assert_uint_gt(counter_span(tr, "GPU 1 SM active", &lo, &hi), 2);
    json_object_put(tr);

    /* --pid: the GPUs its work ran on only. */
    {
        const char *args[] = {"decode", a.root, "-o", out, "-q", "--pid", "455"};
        ck_assert_int_eq(run(cuptimon__cli_decode, args, 7), 0);
    }
    tr = json_object_from_file(out);
    ck_assert_uint_gt(counter_span(tr, "GPU 0 SM active", &lo, &hi), 2);
    ck_assert_uint_eq(counter_span(tr, "GPU 1 SM active", &lo, &hi), 0);
    json_object_put(tr);

    /* --from/--to replace the span's ends. */
    snprintf(from, sizeof from, "%" PRIu64 "ns", a.first - 500 * MS);
    snprintf(to, sizeof to, "%" PRIu64 "ns", a.first - 400 * MS);
    {
        const char *args[] = {"decode", a.root, "-o", out, "-q", "--from", from, "--to", to};
        ck_assert_int_eq(run(cuptimon__cli_decode, args, 9), 0);
    }
    tr = json_object_from_file(out);
    ck_assert_uint_gt(counter_span(tr, "GPU 1 SM active", &lo, &hi), 9);
    ck_assert_int_ge(lo, -10 * (int64_t)MS);
    ck_assert_int_le(hi, 110 * (int64_t)MS);
    json_object_put(tr);

    /* One GPU metrics session alone: its counters, every sample; base at
     * its first sample's second. */
    {
        const char *args[] = {"decode", a.g1, "-o", out, "-q"};
        ck_assert_int_eq(run(cuptimon__cli_decode, args, 5), 0);
    }
    tr = json_object_from_file(out);
    od = cuptimon__json_get(tr, "otherData");
    base = (uint64_t)cuptimon__json_int(od, "base_unix_ns", 0);
    ck_assert_uint_eq(base, a.t0 - a.t0 % 1000000000u);
    ck_assert_uint_eq(counter_span(tr, "GPU 1 SM active", &lo, &hi), a.n + 1);
    ck_assert_int_eq(json_object_array_length(cuptimon__json_get(od, "sessions")), 0);
    ck_assert_uint_eq(counter_span(tr, "GPU 0 SM active", &lo, &hi), 0);
    json_object_put(tr);

    /* --split has nothing to split a GPU metrics session by. */
    {
        const char *args[] = {"decode", a.g1, "-o", tmpdir, "--split", "rank", "-q"};
        ck_assert_int_eq(run(cuptimon__cli_decode, args, 7), 1);
    }
}
END_TEST

START_TEST(cli_stats_gpu_report)
{
    struct arch a;
    char out[400], from[64], to[64];

    make_archive(&a);
    snprintf(out, sizeof out, "%s/stats.json", tmpdir);
    {
        const char *args[] = {"stats", a.root, "--report", "gpu", "--format",
                              "json",  "-o",   out,        "-q"};
        ck_assert_int_eq(run(stats_fn, args, 9), 0);
    }
    json_object *o = json_object_from_file(out), *rows = cuptimon__json_get(o, "gpu");
    ck_assert_ptr_nonnull(rows);
    ck_assert_int_eq(json_object_array_length(rows), 2);
    json_object *r = row_of(rows, 0, "sm_active");
    ck_assert_int_eq(cuptimon__json_int(r, "samples", 0), (int64_t)a.n); /* both runs */
    ck_assert_int_eq(cuptimon__json_int(r, "covered_ns", 0), (int64_t)(a.n * 10 * MS));
    /* Values (i + 1) * 1.25 for i < n, 10 ms each. */
    ck_assert_double_eq_tol(cuptimon__json_double(r, "mean", 0), (double)(a.n + 1) * 1.25 / 2,
                            1e-9);
    ck_assert_double_eq(cuptimon__json_double(r, "max", 0), (double)a.n * 1.25);
    ck_assert_double_eq(cuptimon__json_double(r, "med", 0), (double)((a.n + 1) / 2) * 1.25);
    ck_assert_int_eq(cuptimon__json_int(cuptimon__json_get(o, "info"), "gpu_metrics_sessions", 0),
                     3);
    ck_assert_ptr_null(cuptimon__json_get(o, "kernels")); /* not asked for */
    json_object_put(o);

    /* --from/--to: 100 ms, clipped. */
    snprintf(from, sizeof from, "%" PRIu64 "ns", a.t0 + 105 * MS);
    snprintf(to, sizeof to, "%" PRIu64 "ns", a.t0 + 205 * MS);
    {
        const char *args[] = {"stats", a.root, "--report", "gpu", "--format", "json", "-o",
                              out,     "-q",   "--from",   from,  "--to",     to};
        ck_assert_int_eq(run(stats_fn, args, 13), 0);
    }
    o = json_object_from_file(out);
    r = row_of(cuptimon__json_get(o, "gpu"), 1, "sm_active");
    ck_assert_int_eq(cuptimon__json_int(r, "samples", 0), 11);
    ck_assert_int_eq(cuptimon__json_int(r, "covered_ns", 0), 100 * (int64_t)MS);
    ck_assert_double_eq(cuptimon__json_double(r, "min", 0), 11 * 1.25);
    json_object_put(o);

    /* --pid: the GPUs of its work; with kernels beside. */
    {
        const char *args[] = {"stats", a.root, "--report", "kernels,gpu", "--format", "json",
                              "-o",    out,    "-q",       "--pid",       "455"};
        ck_assert_int_eq(run(stats_fn, args, 11), 0);
    }
    o = json_object_from_file(out);
    ck_assert_int_eq(json_object_array_length(cuptimon__json_get(o, "gpu")), 1);
    ck_assert_int_gt(json_object_array_length(cuptimon__json_get(o, "kernels")), 0);
    /* A GPU metrics session is no process session. */
    ck_assert_int_eq(cuptimon__json_int(cuptimon__json_get(o, "info"), "sessions", 0), 1);
    json_object_put(o);

    /* The table and CSV. */
    snprintf(out, sizeof out, "%s/stats.txt", tmpdir);
    {
        const char *args[] = {"stats", a.root, "--report", "gpu", "-o", out, "-q"};
        ck_assert_int_eq(run(stats_fn, args, 7), 0);
    }
    {
        FILE *f = fopen(out, "r");
        char text[8192];
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = '\0';
        fclose(f);
        ck_assert_msg(strstr(text, "GPU metrics by device (time-weighted): 3 session(s)") != NULL,
                      "%s", text);
        ck_assert_ptr_nonnull(strstr(text, "Device  GPU          Metric     Unit  Samples"));
        ck_assert_ptr_nonnull(strstr(text, "NVIDIA H200  SM active  %"));
    }
    {
        const char *args[] = {"stats", a.root, "--report", "gpu", "--format",
                              "csv",   "-o",   out,        "-q"};
        ck_assert_int_eq(run(stats_fn, args, 9), 0);
    }
    {
        FILE *f = fopen(out, "r");
        char line[512];
        ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
        ck_assert_str_eq(line, "Report,Device,GPU,Metric,Unit,Samples,Covered (ns),Mean,Med,Min,"
                               "Max\n");
        ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
        ck_assert_msg(strncmp(line, "gpu,0,NVIDIA H200,SM active,%,", 30) == 0, "%s", line);
        fclose(f);
    }
    /* An archive without GPU metrics says so. */
    {
        const char *args[] = {"stats", a.proc, "--report", "gpu", "-o", out, "-q"};
        ck_assert_int_eq(run(stats_fn, args, 7), 0);
        FILE *f = fopen(out, "r");
        char text[4096];
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = '\0';
        fclose(f);
        ck_assert_msg(strstr(text, "(the archive holds no GPU metrics") != NULL, "%s", text);
    }
}
END_TEST

START_TEST(window_counters_of_its_devices)
{
    struct arch a;
    char out[400], *err = NULL;
    json_object *summary = NULL;
    int64_t lo, hi;

    make_archive(&a);
    snprintf(out, sizeof out, "%s/w.json", tmpdir);
    struct cuptimon_requester rq = {.uid = getuid(), .gid = getgid()};
    /* Joined: its GPU work without API records is kept when it starts
     * inside (the buffer holds no API records). */
    struct cuptimon_window_source src = {.archive_dir = a.proc,
                                         .first_chunk = 0,
                                         .last_chunk = UINT64_MAX,
                                         .joined = 1,
                                         .pid = 455,
                                         .uid = getuid()};
    struct cuptimon_window_spec w = {.id = 1,
                                     .start_ns = a.first + 20 * MS,
                                     .end_ns = a.first + 60 * MS,
                                     .src = &src,
                                     .nsrc = 1,
                                     .output = out,
                                     .owner = &rq,
                                     .user_dir = 1,
                                     .per_process = 1};
    ck_assert_uint_gt(a.last, w.end_ns);
    int rc = cuptimon__window_write(&w, &summary, &err);
    ck_assert_msg(rc == 0, "window_write: %d %s", rc, err ? err : "");
    free(err);
    /* Device 0's two runs (the second starts in the window), not device
     * 1's. */
    json_object *gm = cuptimon__json_get(summary, "gpu_metrics");
    ck_assert_uint_ge(a.mid, w.start_ns);
    ck_assert_uint_le(a.mid, w.end_ns);
    ck_assert_int_eq(cuptimon__json_int(gm, "sessions", 0), 2);
    ck_assert_int_ge(cuptimon__json_int(gm, "samples", 0), 4);
    json_object_put(summary);
    json_object *tr = json_object_from_file(out);
    ck_assert_ptr_nonnull(tr);
    /* Device 0's counters over [start, end] (base: the window's start);
     * not device 1's: no work of the window ran there. */
    size_t n = counter_span(tr, "GPU 0 SM active", &lo, &hi);
    ck_assert_uint_ge(n, 5);
    ck_assert_int_le(lo, 0);
    ck_assert_int_gt(lo, -10 * (int64_t)MS);
    ck_assert_int_ge(hi, 40 * (int64_t)MS);
    ck_assert_int_le(hi, 50 * (int64_t)MS);
    ck_assert_uint_eq(counter_span(tr, "GPU 1 SM active", &lo, &hi), 0);
    json_object_put(tr);
    /* The process's own trace has them too. */
    char pout[400];
    snprintf(pout, sizeof pout, "%s/w.pid-455.json", tmpdir);
    tr = json_object_from_file(pout);
    ck_assert_ptr_nonnull(tr);
    ck_assert_uint_eq(counter_span(tr, "GPU 0 SM active", &lo, &hi), n);
    json_object_put(tr);
}
END_TEST

/* ---- the node's GPU list (daemon/gpm.c) ---------------------------------- */

/* node_of until it stops saying "not listed yet" (-1): the sampler's
 * thread lists the devices once bring-up passes cuInit or gives up.  The
 * bound is generous; the verdict is the value, not the time. */
static int node_of_settled(struct cuptimon_gpm *g, const char *uuid)
{
    int n = -1;
    for (int i = 0; i < 2000 && n == -1; i++) {
        n = cuptimon__gpm_node_of(g, uuid);
        if (n == -1)
            usleep(5000);
    }
    return n;
}

static const char *status_why(struct cuptimon_gpm *g, char *out, size_t len)
{
    json_object *st = cuptimon__gpm_status(g), *why = NULL;
    ck_assert_ptr_nonnull(st);
    snprintf(out, len, "%s",
             json_object_object_get_ex(st, "why", &why) ? json_object_get_string(why) : "");
    json_object_put(st);
    return out;
}

static struct cuptimon_gpm_config gpm_cfg(int enabled, const char *lib)
{
    struct cuptimon_gpm_config c;
    memset(&c, 0, sizeof c);
    c.enabled = enabled;
    c.interval_s = 1;
    c.retry_s = 60;
    snprintf(c.libcupti, sizeof c.libcupti, "%s", lib);
    snprintf(c.libcuda, sizeof c.libcuda, "%s", lib);
    return c;
}

/* With gpu_metrics off there is no list and never will be: a job's UUID is
 * not on the node at once (-2), so the aggregator asks once per device,
 * not at every buffer (the case 0830b0f mended). */
START_TEST(node_of_final_when_off)
{
    struct cuptimon_gpm_config c = gpm_cfg(0, "");
    char why[256];
    ck_assert_int_eq(cuptimon__gpm_node_of(NULL, "GPU-00000000-0000-0000-0000-000000000000"), -2);
    struct cuptimon_gpm *g = cuptimon__gpm_start(&c, tmpdir, 1 << 20, 3, NULL);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(cuptimon__gpm_node_of(g, "GPU-00000000-0000-0000-0000-000000000000"), -2);
    ck_assert_int_eq(cuptimon__gpm_node_of(g, ""), -2);
    ck_assert_ptr_nonnull(strstr(status_why(g, why, sizeof why), "gpu_metrics"));
    cuptimon__gpm_stop(g);
}
END_TEST

/* Without a driver the sampler gives up, and its list is final and empty. */
START_TEST(node_of_final_without_driver)
{
    struct cuptimon_gpm_config c = gpm_cfg(1, "/nonexistent/cuptimon-test/libcuda.so.1");
    char why[256];
    struct cuptimon_gpm *g = cuptimon__gpm_start(&c, tmpdir, 1 << 20, 3, NULL);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(node_of_settled(g, "GPU-00000000-0000-0000-0000-000000000000"), -2);
    ck_assert_ptr_nonnull(strstr(status_why(g, why, sizeof why), "/nonexistent/cuptimon-test"));
    cuptimon__gpm_stop(g);
}
END_TEST

#ifdef FAKEPM_SO
/* The double's driver lists two GPUs whose counters are refused (admins
 * only): the list still maps each UUID to its ordinal, and a UUID the node
 * lacks is final (-2), not "ask again". */
START_TEST(node_of_lists_refused_devices)
{
    /* the double's UUIDs: fa4e0000-0000-4000-8000-0000000000NN */
    unsigned char u[16] = {0xfa, 0x4e, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0};
    char t0[CUPTIMON_UUID_TEXT_SIZE], t1[CUPTIMON_UUID_TEXT_SIZE], t9[CUPTIMON_UUID_TEXT_SIZE];
    cuptimon__uuid_text(t0, u);
    u[15] = 1;
    cuptimon__uuid_text(t1, u);
    u[15] = 9;
    cuptimon__uuid_text(t9, u);
    ck_assert_int_eq(setenv("FAKEPM_DEVICES", "2", 1), 0);
    ck_assert_int_eq(setenv("FAKEPM_ADMIN_ONLY", "all", 1), 0);
    struct cuptimon_gpm_config c = gpm_cfg(1, FAKEPM_SO);
    struct cuptimon_gpm *g = cuptimon__gpm_start(&c, tmpdir, 1 << 20, 3, NULL);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(node_of_settled(g, t1), 1);
    ck_assert_int_eq(cuptimon__gpm_node_of(g, t0), 0);
    ck_assert_int_eq(cuptimon__gpm_node_of(g, t9), -2);
    cuptimon__gpm_stop(g);
}
END_TEST
#endif

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("gpm");
    TCase *t = tcase_create("gpm");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, meta_round_trip);
    tcase_add_test(t, meta_damaged_members);
    tcase_add_test(t, is_meta_kinds);
    tcase_add_test(t, read_exact_chunks_segments);
    tcase_add_test(t, read_range_filter);
    tcase_add_test(t, read_wrong_raw_size);
    tcase_add_test(t, read_bad_times);
    tcase_add_test(t, read_nan_and_inf);
    tcase_add_test(t, read_not_gpm_or_damaged);
    tcase_add_test(t, find_sessions_by_name_and_kind);
    tcase_add_test(t, devsets);
    tcase_add_test(t, devsets_by_uuid);
    tcase_add_test(t, trace_counter_tracks);
    tcase_add_test(t, trace_session_by_device);
    tcase_add_test(t, stats_time_weighted);
    tcase_add_test(t, stats_sessions_add_up_and_sort);
    tcase_add_test(t, stats_histogram_medians);
    tcase_add_test(t, cli_decode_counters);
    tcase_add_test(t, cli_stats_gpu_report);
    tcase_add_test(t, window_counters_of_its_devices);
    tcase_add_test(t, node_of_final_when_off);
    tcase_add_test(t, node_of_final_without_driver);
#ifdef FAKEPM_SO
    tcase_add_test(t, node_of_lists_refused_devices);
#endif
    suite_add_tcase(s, t);
    return s;
}
