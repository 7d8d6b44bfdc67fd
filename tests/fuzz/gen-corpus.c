/*
 * Writes the seed corpus of the fuzz targets: gen-corpus DIR fills DIR/frame/,
 * DIR/strings/, DIR/ranges/ and DIR/gpm/ (all must exist) with valid inputs
 * (ok-*) and inputs each decoder must reject (bad-*).  The committed
 * files under tests/fuzz/corpus are its output; replay.sh checks that they
 * still match, so after a layout change (and version bump) regenerate with
 *   tests/fuzz/gen-corpus $(top_srcdir)/tests/fuzz/corpus
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "archive/gpm.h"
#include "cuptimon-proto.h"

static const char *outdir;
static int failed;

static void put(const char *sub, const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%s", outdir, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) {
        fprintf(stderr, "gen-corpus: cannot write %s: %s\n", path, strerror(errno));
        failed = 1;
    }
}

static void put_buf(const char *sub, const char *name, struct cuptimon_buf *b)
{
    put(sub, name, b->data, b->len);
    b->len = 0;
}

static void must(int rc)
{
    if (rc < 0) {
        fprintf(stderr, "gen-corpus: encoder failed: %s\n", strerror(-rc));
        exit(1);
    }
}

/* A header written field by field, for the headers the encoder cannot make. */
static void raw_hdr(uint8_t *p, uint32_t magic, uint16_t version, uint16_t type, uint32_t length,
                    uint32_t flags)
{
    cuptimon__put_u32(p, magic);
    cuptimon__put_u16(p + 4, version);
    cuptimon__put_u16(p + 6, type);
    cuptimon__put_u32(p + 8, length);
    cuptimon__put_u32(p + 12, flags);
}

static void strings_batch(struct cuptimon_buf *b)
{
    must(cuptimon__strings_begin(b));
    must(cuptimon__strings_add(b, 0x00007f3a10002000ull, "_Z6kernelPfi", 12));
    must(cuptimon__strings_add(b, 0x00007f3a10002100ull, "", 0));
    must(cuptimon__strings_add(b, 0x00007f3a10002200ull, "cudaLaunchKernel", 16));
}

/* One entry by hand: ptr, len, then `n` bytes of s (the caller says
 * whether a terminator is among them). */
static void raw_entry(struct cuptimon_buf *b, uint64_t ptr, uint32_t len, const void *s, size_t n)
{
    uint8_t h[CUPTIMON_STRING_ENTRY_HDR];
    cuptimon__put_u64(h, ptr);
    cuptimon__put_u32(h + 8, len);
    must(cuptimon__buf_append(b, h, sizeof h));
    must(cuptimon__buf_append(b, s, n));
}

static void raw_strings_hdr(struct cuptimon_buf *b, uint32_t count, uint32_t reserved)
{
    uint8_t h[CUPTIMON_STRINGS_HDR_SIZE];
    cuptimon__put_u32(h, count);
    cuptimon__put_u32(h + 4, reserved);
    b->len = 0;
    must(cuptimon__buf_append(b, h, sizeof h));
}

static void gen_frames(void)
{
    struct cuptimon_buf f = {0}, all = {0}, body = {0};
    uint8_t b[CUPTIMON_BUFFER_READY_SIZE + 1];

    static const char hello[] = "{\"proto\":1,\"pid\":4242,\"slots\":64,\"slot_size\":8388608}";
    must(cuptimon__frame_append(&f, CUPTIMON_MSG_HELLO, hello, strlen(hello)));
    must(cuptimon__buf_append(&all, f.data, f.len));
    put_buf("frame", "ok-hello", &f);

    must(cuptimon__frame_append(&f, CUPTIMON_MSG_BYE, NULL, 0));
    must(cuptimon__buf_append(&all, f.data, f.len));
    put_buf("frame", "ok-bye", &f);

    const struct cuptimon_buffer_ready r = {.slot = 3,
                                            .stream_id = 7,
                                            .valid_size = 8388000,
                                            .context = 0x5555deadbeefull,
                                            .dropped = 2,
                                            .cupti_ts = 1722000000123456789ull,
                                            .realtime_ns = 1722000000123450000ull,
                                            .seq = 41,
                                            .records = 90210};
    cuptimon__buffer_ready_encode(b, &r);
    must(cuptimon__frame_append(&f, CUPTIMON_MSG_BUFFER_READY, b, CUPTIMON_BUFFER_READY_SIZE));
    must(cuptimon__buf_append(&all, f.data, f.len));
    put_buf("frame", "ok-buffer-ready", &f);
    /* One byte short: length 63. */
    must(cuptimon__frame_append(&f, CUPTIMON_MSG_BUFFER_READY, b, CUPTIMON_BUFFER_READY_SIZE - 1));
    put_buf("frame", "bad-buffer-ready-short", &f);

    const struct cuptimon_buffer_release rl = {.slot = 3, .status = 0, .seq = 41};
    cuptimon__buffer_release_encode(b, &rl);
    must(cuptimon__frame_append(&f, CUPTIMON_MSG_BUFFER_RELEASE, b, CUPTIMON_BUFFER_RELEASE_SIZE));
    must(cuptimon__buf_append(&all, f.data, f.len));
    put_buf("frame", "ok-buffer-release", &f);
    b[CUPTIMON_BUFFER_RELEASE_SIZE] = 0;
    must(cuptimon__frame_append(&f, CUPTIMON_MSG_BUFFER_RELEASE, b,
                                CUPTIMON_BUFFER_RELEASE_SIZE + 1));
    put_buf("frame", "bad-buffer-release-long", &f);

    const struct cuptimon_flush fl = {.flush_id = 99, .mode = CUPTIMON_FLUSH_FENCE, .fence = 3};
    cuptimon__flush_encode(b, &fl);
    must(cuptimon__frame_append(&f, CUPTIMON_MSG_FLUSH, b, CUPTIMON_FLUSH_SIZE));
    must(cuptimon__buf_append(&all, f.data, f.len));
    put_buf("frame", "ok-flush", &f);
    cuptimon__put_u32(b + 12, 0); /* a fence flush without its number */
    must(cuptimon__frame_append(&f, CUPTIMON_MSG_FLUSH, b, CUPTIMON_FLUSH_SIZE));
    put_buf("frame", "bad-flush-fence", &f);

    const struct cuptimon_flush_done fd = {.flush_id = 99, .buffers = 5};
    cuptimon__flush_done_encode(b, &fd);
    must(cuptimon__frame_append(&f, CUPTIMON_MSG_FLUSH_DONE, b, CUPTIMON_FLUSH_DONE_SIZE));
    must(cuptimon__buf_append(&all, f.data, f.len));
    put_buf("frame", "ok-flush-done", &f);

    const struct cuptimon_held hd = {.since_ns = 1,
                                     .kind = 10,
                                     .records = 9,
                                     .held_bytes = 1944,
                                     .buffers = 1,
                                     .slots_base = 16,
                                     .slots_max = 256,
                                     .slots_out = 17,
                                     .grown = 1,
                                     .grown_peak = 1,
                                     .name_len = 8};
    uint8_t hb[CUPTIMON_HELD_SIZE + 8];
    cuptimon__held_encode(hb, &hd);
    memcpy(hb + CUPTIMON_HELD_SIZE, "_Z4holdv", 8);
    must(cuptimon__frame_append(&f, CUPTIMON_MSG_HELD, hb, sizeof hb));
    must(cuptimon__buf_append(&all, f.data, f.len));
    put_buf("frame", "ok-held", &f);
    must(cuptimon__frame_append(&f, CUPTIMON_MSG_HELD, hb, sizeof hb - 1));
    put_buf("frame", "bad-held-name", &f);

    strings_batch(&body);
    must(cuptimon__frame_append(&f, CUPTIMON_MSG_STRINGS, body.data, body.len));
    must(cuptimon__buf_append(&all, f.data, f.len));
    put_buf("frame", "ok-strings", &f);
    body.data[body.len - 1] = 'x'; /* last terminator gone */
    must(cuptimon__frame_append(&f, CUPTIMON_MSG_STRINGS, body.data, body.len));
    put_buf("frame", "bad-strings-noterm", &f);

    static const char ctl[] = "{\"op\":\"status\"}";
    static const char ok[] = "{\"sessions\":[]}";
    static const char err[] = "{\"error\":\"ENOENT\",\"message\":\"no session 7\"}";
    must(cuptimon__frame_append(&f, CUPTIMON_MSG_CONTROL, ctl, strlen(ctl)));
    must(cuptimon__frame_append(&f, CUPTIMON_MSG_REPLY_OK, ok, strlen(ok)));
    must(cuptimon__frame_append(&f, CUPTIMON_MSG_REPLY_ERROR, err, strlen(err)));
    must(cuptimon__buf_append(&all, f.data, f.len));
    put_buf("frame", "ok-control-replies", &f);

    put_buf("frame", "ok-stream", &all);

    uint8_t h[CUPTIMON_MSG_HDR_SIZE + 4] = {0};
    raw_hdr(h, 0x4d545044u, CUPTIMON_PROTO_VERSION, CUPTIMON_MSG_BYE, 0, 0);
    put("frame", "bad-magic", h, CUPTIMON_MSG_HDR_SIZE);
    raw_hdr(h, CUPTIMON_PROTO_MAGIC, CUPTIMON_PROTO_VERSION, CUPTIMON_MSG_BYE, 0, 1);
    put("frame", "bad-flags", h, CUPTIMON_MSG_HDR_SIZE);
    raw_hdr(h, CUPTIMON_PROTO_MAGIC, CUPTIMON_PROTO_VERSION + 1, CUPTIMON_MSG_HELLO, 0, 0);
    put("frame", "bad-version", h, CUPTIMON_MSG_HDR_SIZE);
    raw_hdr(h, CUPTIMON_PROTO_MAGIC, CUPTIMON_PROTO_VERSION, CUPTIMON_MSG_STRINGS,
            CUPTIMON_MSG_MAX_BODY + 1, 0);
    put("frame", "bad-too-long", h, CUPTIMON_MSG_HDR_SIZE);
    raw_hdr(h, CUPTIMON_PROTO_MAGIC, CUPTIMON_PROTO_VERSION, CUPTIMON_MSG_BUFFER_READY,
            CUPTIMON_BUFFER_READY_SIZE, 0);
    put("frame", "bad-truncated-body", h, sizeof h);
    raw_hdr(h, CUPTIMON_PROTO_MAGIC, CUPTIMON_PROTO_VERSION, 0x0666, 4, 0);
    memcpy(h + CUPTIMON_MSG_HDR_SIZE, "????", 4);
    put("frame", "bad-unknown-type", h, sizeof h);

    cuptimon__buf_free(&f);
    cuptimon__buf_free(&all);
    cuptimon__buf_free(&body);
}

static void gen_strings(void)
{
    struct cuptimon_buf b = {0};

    must(cuptimon__strings_begin(&b));
    put_buf("strings", "ok-empty", &b);

    must(cuptimon__strings_begin(&b));
    must(cuptimon__strings_add(&b, 0x00005555aaaa0000ull, "memcpy HtoD", 11));
    put_buf("strings", "ok-one", &b);

    strings_batch(&b);
    put_buf("strings", "ok-several", &b);

    char *big = malloc(CUPTIMON_STRING_MAX_LEN + 2);
    if (!big)
        exit(1);
    memset(big, 'k', CUPTIMON_STRING_MAX_LEN + 1);
    big[CUPTIMON_STRING_MAX_LEN + 1] = '\0';
    must(cuptimon__strings_begin(&b));
    must(cuptimon__strings_add(&b, 1, big, CUPTIMON_STRING_MAX_LEN));
    put_buf("strings", "ok-max-len", &b);

    raw_strings_hdr(&b, 1, 0);
    raw_entry(&b, 1, CUPTIMON_STRING_MAX_LEN + 1, big, CUPTIMON_STRING_MAX_LEN + 2);
    put_buf("strings", "bad-over-max-len", &b);
    free(big);

    static const uint8_t four[4] = {1, 0, 0, 0};
    put("strings", "bad-short-header", four, sizeof four);

    raw_strings_hdr(&b, 0, 1);
    put_buf("strings", "bad-reserved", &b);

    raw_strings_hdr(&b, 2, 0);
    raw_entry(&b, 9, 2, "ab", 3);
    put_buf("strings", "bad-count-too-large", &b);

    raw_strings_hdr(&b, 0xffffffffu, 0);
    raw_entry(&b, 9, 0, "", 1);
    put_buf("strings", "bad-count-huge", &b);

    raw_strings_hdr(&b, 1, 0);
    raw_entry(&b, 9, 3, "abcd", 4);
    put_buf("strings", "bad-noterm", &b);

    raw_strings_hdr(&b, 1, 0);
    raw_entry(&b, 9, 3, "a\0c", 4);
    put_buf("strings", "bad-embedded-nul", &b);

    raw_strings_hdr(&b, 1, 0);
    raw_entry(&b, 9, 2, "ab\0X", 4);
    put_buf("strings", "bad-trailing", &b);

    raw_strings_hdr(&b, 2, 0);
    raw_entry(&b, 9, 13, "abcdefghijklm", 14);
    must(cuptimon__buf_append(&b, "\x02\0\0\0\0", 5));
    put_buf("strings", "bad-truncated-hdr", &b);

    raw_strings_hdr(&b, 1, 0);
    raw_entry(&b, 9, 10, "abcde", 5);
    put_buf("strings", "bad-truncated-body", &b);

    cuptimon__buf_free(&b);
}

/* RANGES bodies and archived range texts (tests/fuzz/fuzz-ranges.c). */
static void gen_ranges(void)
{
    uint8_t b[CUPTIMON_RANGES_HDR_SIZE + 3 * CUPTIMON_RANGE_ENTRY_SIZE];
    const struct cuptimon_ranges_hdr h = {.count = 3,
                                          .dropped = 1,
                                          .cupti_ts = 1796208557000000000ull,
                                          .realtime_ns = 1796208557000000100ull};
    const struct cuptimon_range_ev r[3] = {
        {.ts = 1796208556000000000ull, .id = 1, .tid = 4242, .what = CUPTIMON_RANGE_BEGIN},
        {.ts = 1796208556000001000ull,
         .id = 2,
         .parent = 1,
         .tid = 4242,
         .depth = 1,
         .what = CUPTIMON_RANGE_BEGIN},
        {.ts = 1796208556000002000ull,
         .id = 2,
         .parent = 1,
         .tid = 4242,
         .depth = 1,
         .what = CUPTIMON_RANGE_END},
    };
    cuptimon__ranges_hdr_encode(b, &h);
    for (int i = 0; i < 3; i++)
        cuptimon__range_encode(b + CUPTIMON_RANGES_HDR_SIZE + i * CUPTIMON_RANGE_ENTRY_SIZE, &r[i]);
    put("ranges", "ok-three", b, sizeof b);
    put("ranges", "bad-count", b, sizeof b - 1);
    b[CUPTIMON_RANGES_HDR_SIZE + 30] = 3;
    put("ranges", "bad-what", b, sizeof b);
    put("ranges", "ok-begin-text", "1796208556000000000 4242 1 7", 28);
    put("ranges", "ok-end-text", "1796208556000002000", 19);
    put("ranges", "bad-begin-zero", "01 2 3 4", 8);
}

/* GPU metrics sessions (tests/fuzz/fuzz-gpm.c): a 2-byte length, meta.json,
 * then chunks as the archive writer stores them raw. */
struct gpm_in {
    uint8_t b[1 << 16];
    size_t n;
};

static void gpm_meta(struct gpm_in *in, const char *text)
{
    size_t n = strlen(text);
    in->b[0] = (uint8_t)n;
    in->b[1] = (uint8_t)(n >> 8);
    memcpy(in->b + 2, text, n);
    in->n = 2 + n;
}

/* A chunk of len payload bytes whose header counts records. */
static void gpm_chunk(struct gpm_in *in, uint64_t index, const uint8_t *p, size_t len,
                      uint64_t records)
{
    struct cuptimon_chunk_hdr h;
    memset(&h, 0, sizeof h);
    h.version = CUPTIMON_CHUNK_VERSION;
    h.header_size = CUPTIMON_CHUNK_HDR_SIZE;
    h.index = index;
    h.codec = CUPTIMON_CODEC_RAW;
    h.cupti_ts = h.unix_ns = 1796208558000000000ull + index;
    h.raw_size = h.stored_size = len;
    h.records = records;
    h.payload_crc = cuptimon__crc32c(0, p, len);
    cuptimon__chunk_hdr_encode(in->b + in->n, &h);
    memcpy(in->b + in->n + CUPTIMON_CHUNK_HDR_SIZE, p, len);
    in->n += CUPTIMON_CHUNK_HDR_SIZE + len;
}

static void gpm_samples(struct gpm_in *in, uint64_t index, struct cuptimon_gpm_sample *s, size_t n,
                        uint32_t nm)
{
    uint8_t p[8 * CUPTIMON_GPM_SAMPLE_SIZE(CUPTIMON_GPM_METRICS_MAX)];
    cuptimon__gpm_encode(p, s, n, nm);
    gpm_chunk(in, index, p, n * CUPTIMON_GPM_SAMPLE_SIZE(nm), n);
}

static void gen_gpm(void)
{
    static struct gpm_in in;
    struct cuptimon_gpm_meta m;
    struct cuptimon_gpm_sample s[8];
    char *meta;

    memset(&m, 0, sizeof m);
    m.ordinal = 1;
    snprintf(m.name, sizeof m.name, "NVIDIA H200");
    snprintf(m.uuid, sizeof m.uuid, "GPU-7f3a9c1e-52d4-4a0b-9d55-3c1e0b2f6a91");
    snprintf(m.pci_bus_id, sizeof m.pci_bus_id, "0000:19:00.0");
    snprintf(m.chip, sizeof m.chip, "GH100");
    m.interval_ns = 10000000;
    m.start_unix_ns = 1796208557000000000ull;
    m.nmetrics = 2;
    snprintf(m.metric[0].key, sizeof m.metric[0].key, "sm_active");
    snprintf(m.metric[0].cupti, sizeof m.metric[0].cupti,
             "sm__cycles_active.avg.pct_of_peak_sustained_elapsed");
    snprintf(m.metric[0].unit, sizeof m.metric[0].unit, "%%");
    snprintf(m.metric[0].label, sizeof m.metric[0].label, "SM active");
    snprintf(m.metric[1].key, sizeof m.metric[1].key, "dram_read");
    snprintf(m.metric[1].cupti, sizeof m.metric[1].cupti, "dram__bytes_read.sum.per_second");
    snprintf(m.metric[1].unit, sizeof m.metric[1].unit, "B/s");
    snprintf(m.metric[1].label, sizeof m.metric[1].label, "DRAM \"read\"\n");
    for (int i = 0; i < 8; i++) {
        memset(&s[i], 0, sizeof s[i]);
        s[i].start_ns = 1796208557000000000ull + (uint64_t)i * 10000000u;
        s[i].end_ns = s[i].start_ns + 10000000u;
        s[i].value[0] = 12.5 * i;
        s[i].value[1] = 1.5e12 / (i + 1);
    }
    meta = cuptimon__gpm_meta_json(&m, "node01", "gen-corpus");
    if (meta == NULL)
        exit(1);

    gpm_meta(&in, meta);
    gpm_samples(&in, 0, s, 4, 2);
    gpm_samples(&in, 1, s + 4, 4, 2);
    put("gpm", "ok-two-chunks", in.b, in.n);

    /* A gap, a metric without a value, infinite values. */
    gpm_meta(&in, meta);
    s[2].value[1] = NAN;
    s[5].value[0] = INFINITY;
    s[6].value[1] = -INFINITY;
    gpm_samples(&in, 0, s, 3, 2);
    gpm_samples(&in, 1, s + 5, 3, 2);
    put("gpm", "ok-gap-nan-inf", in.b, in.n);

    /* Impossible times: no length, ending before the start, out of order,
     * at 2^63. */
    gpm_meta(&in, meta);
    s[1].end_ns = s[1].start_ns;
    s[2].end_ns = s[2].start_ns - 1;
    s[4].start_ns = s[0].start_ns;
    s[6].end_ns = 1ull << 63;
    gpm_samples(&in, 0, s, 8, 2);
    put("gpm", "bad-times", in.b, in.n);
    for (int i = 0; i < 8; i++) {
        s[i].start_ns = 1796208557000000000ull + (uint64_t)i * 10000000u;
        s[i].end_ns = s[i].start_ns + 10000000u;
    }

    /* Chunks whose size is not a whole number of samples, or whose record
     * count disagrees, then a good one. */
    {
        uint8_t p[4 * CUPTIMON_GPM_SAMPLE_SIZE(2)];
        cuptimon__gpm_encode(p, s, 4, 2);
        gpm_meta(&in, meta);
        gpm_chunk(&in, 0, p, sizeof p - 8, 4);
        gpm_chunk(&in, 1, p, sizeof p, 3);
        gpm_chunk(&in, 2, p, sizeof p, UINT64_MAX / 8 + 4);
        gpm_chunk(&in, 3, p, sizeof p, 4);
        put("gpm", "bad-raw-size", in.b, in.n);
    }
    free(meta);

    /* 32 metrics, one of them without a label or unit. */
    m.nmetrics = 32;
    for (unsigned i = 2; i < 32; i++) {
        snprintf(m.metric[i].key, sizeof m.metric[i].key, "m%u", i);
        snprintf(m.metric[i].unit, sizeof m.metric[i].unit, i == 31 ? "" : "Hz");
        snprintf(m.metric[i].label, sizeof m.metric[i].label, i == 31 ? "" : "Metric %u", i);
    }
    for (int i = 0; i < 2; i++)
        for (unsigned k = 0; k < 32; k++)
            s[i].value[k] = k * 0.5 + i;
    meta = cuptimon__gpm_meta_json(&m, NULL, NULL);
    if (meta == NULL)
        exit(1);
    gpm_meta(&in, meta);
    gpm_samples(&in, 0, s, 2, 32);
    put("gpm", "ok-32-metrics", in.b, in.n);
    free(meta);

    /* meta.json that must be refused, with a good chunk behind. */
    static const char *const bad[][2] = {
        {"bad-meta-duplicate-key",
         "{\"kind\": \"gpu_metrics\", \"archive_version\": 1, \"clock\": \"unix_ns\", "
         "\"device\": {\"ordinal\": 0}, \"interval_ns\": 1, \"metrics\": [{\"key\": \"a\"}, "
         "{\"key\": \"a\"}]}"},
        {"bad-meta-key-chars",
         "{\"kind\": \"gpu_metrics\", \"archive_version\": 1, \"clock\": \"unix_ns\", "
         "\"device\": {\"ordinal\": 0}, \"interval_ns\": 1, \"metrics\": [{\"key\": "
         "\"SM-active\"}]}"},
        {"bad-meta-version",
         "{\"kind\": \"gpu_metrics\", \"archive_version\": 2, \"clock\": \"unix_ns\", "
         "\"device\": {\"ordinal\": 0}, \"interval_ns\": 1, \"metrics\": [{\"key\": \"a\"}]}"},
        {"bad-meta-torn", "{\"kind\": \"gpu_metrics\", \"archive_version\": 1, \"clo"},
        {"bad-meta-long-name",
         "{\"kind\": \"gpu_metrics\", \"archive_version\": 1, \"clock\": \"unix_ns\", "
         "\"device\": {\"ordinal\": 0, \"name\": "
         "\"0123456789012345678901234567890123456789012345678901234567890123456789012345678901234"
         "567890123456789\"}, \"interval_ns\": 1, \"metrics\": [{\"key\": \"a\"}]}"},
        {"bad-process-session", "{\"pid\": 455, \"cupti_version\": 130001}"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gpm_meta(&in, bad[i][1]);
        gpm_samples(&in, 0, s, 2, 1);
        put("gpm", bad[i][0], in.b, in.n);
    }
    put("gpm", "empty", "", 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr,
                "usage: %s DIR (with DIR/frame, DIR/strings, DIR/ranges and DIR/gpm present)\n",
                argv[0]);
        return 2;
    }
    outdir = argv[1];
    gen_frames();
    gen_strings();
    gen_ranges();
    gen_gpm();
    return failed;
}
