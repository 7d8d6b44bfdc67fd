/* Unit tests of the per-kind record delta (archive/rdelta.h) and of the
 * chunk codec that uses it (CUPTIMON_CODEC_ZSTD_RDELTA): round trips on the
 * real H200 buffers, what it saves against plain zstd, hostile encoded
 * forms, the check on write and its fallback, damaged chunks, and archives
 * that mix old and new chunks. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "archive/archive.h"
#include "archive/decode.h"
#include "archive/rdelta.h"
#include "cuptimon-proto.h"
#include "tests/unit/testlib.h"

static const char *const files[] = {"phase0-buf0.bin.zst", "phase0-buf1.bin.zst",
                                    "phase0-buf2.bin.zst", "phase0-buf3.bin.zst",
                                    "phase1-buf4.bin.zst", "phase1-buf5.bin.zst"};

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cuptimon-rdelta-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* The walk sizes the daemon has for a CUDA 13.0 producer. */
static void sizes_13_0(uint16_t sizes[CUPTIMON_RDELTA_KINDS])
{
    struct cuptimon_layout l;
    ck_assert_int_eq(cuptimon__layout_init(&l, 130001, NULL), 0);
    memcpy(sizes, l.size, sizeof l.size);
}

/* Encodes len bytes at src, checks that the encoded form verifies against
 * them and decodes to them (and not into less room), and returns the bytes
 * walked. */
static size_t round_trip(const uint16_t *sizes, const uint8_t *src, size_t len)
{
    uint8_t *enc = malloc(CUPTIMON_RDELTA_BOUND(len)), *dec = malloc(len + 1);
    size_t walked, back = 0;
    size_t n = cuptimon__rdelta_encode(sizes, src, len, 0, enc, &walked);
    ck_assert_uint_ge(n, len + 12);
    ck_assert_uint_le(n, CUPTIMON_RDELTA_BOUND(len));
    ck_assert_int_eq(cuptimon__rdelta_length(enc, n), (int64_t)len);
    ck_assert_int_eq(cuptimon__rdelta_verify(enc, n, src, len), 0);
    ck_assert_int_eq(cuptimon__rdelta_decode(enc, n, dec, len, &back), 0);
    ck_assert_uint_eq(back, len);
    ck_assert_int_eq(memcmp(dec, src, len), 0);
    if (len > 0) {
        ck_assert_int_eq(cuptimon__rdelta_decode(enc, n, dec, len - 1, &back), -EBADMSG);
        ck_assert_int_eq(cuptimon__rdelta_verify(enc, n, src, len - 1), -EBADMSG);
    }
    free(enc);
    free(dec);
    return walked;
}

START_TEST(real_buffers_round_trip_whole)
{
    uint16_t sizes[CUPTIMON_RDELTA_KINDS];
    sizes_13_0(sizes);
    for (int i = 0; i < 6; i++) {
        size_t len;
        uint8_t *buf = cuptimon__test_load_real(files[i], &len);
        /* Every record of the real buffers is of a kind the walk knows:
         * all of it is transformed, none passed through. */
        ck_assert_uint_eq(round_trip(sizes, buf, len), len);
        /* Every prefix too: a record cut short ends the walk there, and
         * the rest goes through as it is. */
        for (size_t cut = 0; cut < 1000; cut += 37)
            round_trip(sizes, buf, cut);
        size_t end = 0;
        for (;;) {
            uint32_t k;
            memcpy(&k, buf + end, 4);
            if (end + sizes[k] > len - 100)
                break;
            end += sizes[k];
        }
        ck_assert_uint_eq(round_trip(sizes, buf, len - 100), end);
        free(buf);
    }
}
END_TEST

START_TEST(unknown_kind_and_tail_pass_through)
{
    uint16_t sizes[CUPTIMON_RDELTA_KINDS];
    sizes_13_0(sizes);
    size_t len;
    uint8_t *buf = cuptimon__test_load_real(files[4], &len);
    /* A record of a kind with no size, a third of the way in: the walk
     * stops at it, and the rest is kept as it is, still reversible. */
    size_t at = 0;
    while (at < len / 3) {
        uint32_t k;
        memcpy(&k, buf + at, 4);
        at += sizes[k];
    }
    uint32_t odd = 60;
    memcpy(buf + at, &odd, 4);
    ck_assert_uint_eq(round_trip(sizes, buf, len), at);
    /* A kind at or above the table's end, and a size that is not one. */
    odd = 0x80000000u | 10; /* an incomplete record, as CUPTI flags them */
    memcpy(buf + at, &odd, 4);
    ck_assert_uint_eq(round_trip(sizes, buf, len), at);
    uint16_t bad[CUPTIMON_RDELTA_KINDS];
    memcpy(bad, sizes, sizeof bad);
    bad[10] = 12; /* not a multiple of 8: never walked by */
    size_t k10 = 0;
    for (uint32_t k = 0; memcpy(&k, buf + k10, 4), k != 10;)
        k10 += sizes[k];
    ck_assert_uint_gt(k10, 0); /* the buffer starts with API records */
    ck_assert_uint_eq(round_trip(bad, buf, len), k10);
    /* No sizes at all: nothing walked, still a round trip. */
    ck_assert_uint_eq(round_trip(NULL, buf, len), 0);
    free(buf);
}
END_TEST

/* A small valid encoded form: three records of kind 5 (40 bytes) and two
 * of kind 1 (16 bytes, as a table could say), then 8 bytes of tail. */
static size_t small_form(uint8_t *enc, uint8_t *raw, size_t *rawlen)
{
    uint16_t sizes[CUPTIMON_RDELTA_KINDS] = {[5] = 40, [1] = 16};
    size_t off = 0;
    for (int i = 0; i < 5; i++) {
        uint32_t k = i % 2 ? 1 : 5;
        memset(raw + off, 0, sizes[k]);
        memcpy(raw + off, &k, 4);
        for (size_t w = 8; w < sizes[k]; w += 8)
            cuptimon__put_u64(raw + off + w, 1000u * (unsigned)i + w);
        off += sizes[k];
    }
    memcpy(raw + off, "TAILTAIL", 8);
    *rawlen = off + 8;
    size_t walked;
    size_t n = cuptimon__rdelta_encode(sizes, raw, *rawlen, 0, enc, &walked);
    ck_assert_uint_eq(walked, off);
    ck_assert_uint_eq(n, *rawlen + 5 + 12 + 16); /* 5 records, 2 kinds */
    return n;
}

/* Decodes a copy of the n bytes at enc (so that a sanitizer sees any read
 * past them) into room for 400 bytes. */
static int decode_copy(const uint8_t *enc, size_t n)
{
    uint8_t *b = malloc(n ? n : 1), out[400];
    memcpy(b, enc, n);
    size_t len;
    int rc = cuptimon__rdelta_decode(b, n, out, sizeof out, &len);
    free(b);
    return rc;
}

START_TEST(hostile_encoded_forms_are_refused)
{
    uint8_t enc[400], raw[300], m[400];
    size_t rawlen, n = small_form(enc, raw, &rawlen);
    ck_assert_int_eq(decode_copy(enc, n), 0);
    /* Truncated anywhere: the trailer read from the wrong place. */
    /* Cut short: too short for a trailer, or cut anywhere in the trailer
     * and the kinds, refused.  (Shorter cuts read records as a trailer:
     * refused or decoded within their bytes, as the fuzz target checks.) */
    for (size_t cut = 0; cut < n; cut++)
        if (cut < 12 || cut >= 150)
            ck_assert_msg(decode_copy(enc, cut) == -EBADMSG, "cut to %zu of %zu", cut, n);
    size_t tr = n - 12 - 16, seq = 152; /* the kinds table; the kind sequence */
#define MUT(at, v)                                                                                 \
    do {                                                                                           \
        memcpy(m, enc, n);                                                                         \
        cuptimon__put_u32(m + (at), (v));                                                          \
        ck_assert_int_eq(decode_copy(m, n), -EBADMSG);                                             \
        ck_assert_int_eq(cuptimon__rdelta_verify(m, n, raw, rawlen), -EBADMSG);                    \
    } while (0)
    MUT(n - 12, 65); /* more kinds than there are */
    MUT(n - 12, 40); /* a table longer than the form */
    MUT(n - 8, 160); /* the prefix: past the records, not their sum */
    MUT(n - 8, 144);
    MUT(n - 8, 400);
    MUT(n - 4, 6); /* the records: one more (a tail byte for a kind), */
    MUT(n - 4, 4); /* one less, more than the form holds */
    MUT(n - 4, 300);
    MUT(tr, 64);    /* a kind past the table */
    MUT(tr, 5);     /* kind 1 -> 5: a kind twice */
    MUT(tr + 4, 0); /* sizes: 0, not a multiple of 8, too large */
    MUT(tr + 4, 12);
    MUT(tr + 4, 4104);
    MUT(tr + 12, 48); /* kind 5 says 48, or 8: the records no longer fill P */
    MUT(tr + 12, 8);
#undef MUT
    /* A kind in the sequence that the table does not name, or past it. */
    for (int bad = 0; bad < 2; bad++) {
        memcpy(m, enc, n);
        m[seq + 1] = bad ? 63 : 2;
        ck_assert_int_eq(decode_copy(m, n), -EBADMSG);
    }
    /* The records' bytes themselves are anything: a form whose trailer and
     * kinds hold decodes (to other records; the chunk CRC is what catches
     * damage to them), and verifies against the records it came from no
     * longer. */
    memcpy(m, enc, n);
    m[20] ^= 0xff;
    ck_assert_int_eq(decode_copy(m, n), 0);
    ck_assert_int_eq(cuptimon__rdelta_verify(m, n, raw, rawlen), -EBADMSG);
    memcpy(m, enc, n);
    m[seq + 5] ^= 0xff; /* the tail */
    ck_assert_int_eq(decode_copy(m, n), 0);
    ck_assert_int_eq(cuptimon__rdelta_verify(m, n, raw, rawlen), -EBADMSG);
    ck_assert_int_eq(cuptimon__rdelta_verify(enc, n, raw, rawlen), 0);
}
END_TEST

/* A session's writer at level 1 in tmpdir/NAME, and the walk sizes the
 * daemon has for a CUDA 13.0 producer in sizes (set on it or not by the
 * caller). */
static struct cuptimon_archive_writer *open_session(const char *name,
                                                    uint16_t sizes[CUPTIMON_RDELTA_KINDS])
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, name);
    struct cuptimon_archive_writer *w;
    ck_assert_int_eq(cuptimon__aw_open(dir, "{\"pid\":1}", 1ull << 30, 1, &w, NULL), 0);
    sizes_13_0(sizes);
    return w;
}

/* Writes the real buffers lo..hi-1 as chunks of a session at level 1,
 * with the 13.0 walk sizes or without; returns the segment's bytes. */
static uint64_t write_mix(const char *name, int lo, int hi, int with_sizes, uint32_t expect_codec)
{
    uint16_t sizes[CUPTIMON_RDELTA_KINDS];
    struct cuptimon_archive_writer *w = open_session(name, sizes);
    if (with_sizes)
        cuptimon__aw_set_record_sizes(w, sizes);
    for (int i = lo; i < hi; i++) {
        size_t len;
        uint8_t *buf = cuptimon__test_load_real(files[i], &len);
        struct cuptimon_chunk_hdr h = {.index = (uint64_t)i, .raw_size = len, .unix_ns = 1};
        ck_assert_int_eq(cuptimon__aw_chunk(w, &h, buf), 0);
        ck_assert_uint_eq(h.codec, expect_codec);
        free(buf);
    }
    ck_assert_uint_eq(cuptimon__aw_rdelta_fallbacks(w), 0);
    uint64_t bytes = cuptimon__aw_bytes(w);
    cuptimon__aw_close(w);
    return bytes;
}

/* Reads a session back: every chunk is the real buffer of its index. */
static void read_back(const char *name, int expect)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, name);
    struct cuptimon_archive_reader *r;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    struct cuptimon_archive_chunk c;
    int n = 0;
    while (cuptimon__archive_next(r, &c) == 1) {
        size_t len;
        uint8_t *want = cuptimon__test_load_real(files[c.hdr.index], &len);
        ck_assert_uint_eq(c.hdr.raw_size, len);
        ck_assert_int_eq(memcmp(c.data, want, len), 0);
        free(want);
        n++;
    }
    ck_assert_int_eq(n, expect);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->corrupt_chunks, 0);
    cuptimon__archive_close(r);
}

START_TEST(codec_round_trips_and_pays_on_real_buffers)
{
    /* Phase 0 (kernels, copies, memsets) and phase 1 (with API records),
     * each written both ways: the new codec reads back exactly and takes
     * at most 1/2 of plain zstd's bytes (headers and the strings file
     * included), and the phase-0 mix at least 30 times less than raw. */
    uint64_t raw0 = 0, raw1 = 0;
    for (int i = 0; i < 6; i++) {
        size_t len;
        free(cuptimon__test_load_real(files[i], &len));
        *(i < 4 ? &raw0 : &raw1) += len;
    }
    uint64_t z0 = write_mix("z0", 0, 4, 0, CUPTIMON_CODEC_ZSTD);
    uint64_t d0 = write_mix("d0", 0, 4, 1, CUPTIMON_CODEC_ZSTD_RDELTA);
    uint64_t z1 = write_mix("z1", 4, 6, 0, CUPTIMON_CODEC_ZSTD);
    uint64_t d1 = write_mix("d1", 4, 6, 1, CUPTIMON_CODEC_ZSTD_RDELTA);
    read_back("z0", 4);
    read_back("d0", 4);
    read_back("z1", 2);
    read_back("d1", 2);
    ck_assert_msg(d0 * 2 <= z0, "phase 0: %llu bytes against zstd's %llu", (unsigned long long)d0,
                  (unsigned long long)z0);
    ck_assert_msg(d1 * 2 <= z1, "phase 1: %llu bytes against zstd's %llu", (unsigned long long)d1,
                  (unsigned long long)z1);
    ck_assert_msg(d0 * 30 <= raw0, "phase 0: %llu bytes of %llu raw", (unsigned long long)d0,
                  (unsigned long long)raw0);
    /* zstd's window over the whole chunk: 79x (70.5x with level 1's own
     * 512 KiB window, which misses matches a column apart). */
    ck_assert_msg(d0 * 75 <= raw0, "phase 0: %.1fx, not 75x: is zstd's window the chunk's?",
                  (double)raw0 / (double)d0);
}
END_TEST

START_TEST(old_and_new_chunks_read_side_by_side)
{
    /* One session whose writer had no sizes for its first chunks (as
     * every writer before this codec) and got them later: both kinds of
     * chunk, version 1 and 2, read back in order. */
    uint16_t sizes[CUPTIMON_RDELTA_KINDS];
    struct cuptimon_archive_writer *w = open_session("mixed", sizes);
    for (int i = 0; i < 6; i++) {
        size_t len;
        uint8_t *buf = cuptimon__test_load_real(files[i], &len);
        cuptimon__aw_set_record_sizes(w, i % 2 ? sizes : NULL);
        struct cuptimon_chunk_hdr h = {.index = (uint64_t)i, .raw_size = len};
        ck_assert_int_eq(cuptimon__aw_chunk(w, &h, buf), 0);
        ck_assert_uint_eq(h.codec, i % 2 ? CUPTIMON_CODEC_ZSTD_RDELTA : CUPTIMON_CODEC_ZSTD);
        free(buf);
    }
    cuptimon__aw_close(w);
    read_back("mixed", 6);
}
END_TEST

START_TEST(chunk_header_version_goes_with_the_codec)
{
    struct cuptimon_chunk_hdr h = {.codec = CUPTIMON_CODEC_ZSTD_RDELTA,
                                   .raw_size = 100,
                                   .stored_size = 10},
                              d;
    uint8_t b[CUPTIMON_CHUNK_HDR_SIZE];
    cuptimon__chunk_hdr_encode(b, &h);
    ck_assert_uint_eq(cuptimon__get_u32(b + 8), CUPTIMON_CHUNK_VERSION_RDELTA);
    ck_assert_int_eq(cuptimon__chunk_hdr_decode(b, &d), 0);
    ck_assert_uint_eq(d.codec, CUPTIMON_CODEC_ZSTD_RDELTA);
    ck_assert_uint_eq(d.version, 2);
    /* The codec in a version-1 header (good CRC) is damage. */
    cuptimon__put_u32(b + 8, CUPTIMON_CHUNK_VERSION);
    cuptimon__put_u32(b + 92, cuptimon__crc32c(0, b, 92));
    ck_assert_int_eq(cuptimon__chunk_hdr_decode(b, &d), -EBADMSG);
    /* Plain zstd chunks stay version 1, which older readers read. */
    h.codec = CUPTIMON_CODEC_ZSTD;
    cuptimon__chunk_hdr_encode(b, &h);
    ck_assert_uint_eq(cuptimon__get_u32(b + 8), CUPTIMON_CHUNK_VERSION);
    /* A codec past the known ones, and a version past 2. */
    cuptimon__put_u32(b + 28, 3);
    cuptimon__put_u32(b + 92, cuptimon__crc32c(0, b, 92));
    ck_assert_int_eq(cuptimon__chunk_hdr_decode(b, &d), -EBADMSG);
    cuptimon__put_u32(b + 8, 3);
    cuptimon__put_u32(b + 92, cuptimon__crc32c(0, b, 92));
    ck_assert_int_eq(cuptimon__chunk_hdr_decode(b, &d), -EPROTO);
}
END_TEST

static int hook_calls;

static void spoil(uint8_t *buf, size_t n)
{
    hook_calls++;
    /* The last record kind's size in the trailer, off by 8: the form
     * still compresses, but no longer undoes. */
    uint32_t nk = cuptimon__get_u32(buf + n - 12);
    uint8_t *last = buf + n - 12 - 8 * (size_t)nk + 8 * (size_t)(nk - 1);
    cuptimon__put_u32(last + 4, cuptimon__get_u32(last + 4) + 8);
}

START_TEST(a_transform_that_does_not_undo_is_never_written)
{
    uint16_t sizes[CUPTIMON_RDELTA_KINDS];
    struct cuptimon_archive_writer *w = open_session("fallback", sizes);
    cuptimon__aw_set_record_sizes(w, sizes);
    cuptimon__aw_rdelta_test_hook = spoil;
    for (int i = 0; i < 6; i++) {
        size_t len;
        uint8_t *buf = cuptimon__test_load_real(files[i], &len);
        if (i == 3)
            cuptimon__aw_rdelta_test_hook = NULL;
        struct cuptimon_chunk_hdr h = {.index = (uint64_t)i, .raw_size = len};
        ck_assert_int_eq(cuptimon__aw_chunk(w, &h, buf), 0);
        ck_assert_uint_eq(h.codec, i < 3 ? CUPTIMON_CODEC_ZSTD : CUPTIMON_CODEC_ZSTD_RDELTA);
        free(buf);
    }
    ck_assert_int_eq(hook_calls, 3);
    ck_assert_uint_eq(cuptimon__aw_rdelta_fallbacks(w), 3);
    cuptimon__aw_close(w);
    read_back("fallback", 6);
}
END_TEST

/* Rewrites chunk `which` of dir's first segment through fn(header). */
static void rewrite_header(const char *dir, int which, void (*fn)(struct cuptimon_chunk_hdr *))
{
    char seg[500];
    snprintf(seg, sizeof seg, "%s/seg-000000.cpt", dir);
    int fd = open(seg, O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t hb[CUPTIMON_CHUNK_HDR_SIZE];
    off_t off = CUPTIMON_SEG_HDR_SIZE;
    struct cuptimon_chunk_hdr h;
    for (int i = 0;; i++) {
        ck_assert_int_eq(pread(fd, hb, sizeof hb, off), (ssize_t)sizeof hb);
        ck_assert_int_eq(cuptimon__chunk_hdr_decode(hb, &h), 0);
        if (i == which)
            break;
        off += CUPTIMON_CHUNK_HDR_SIZE + (off_t)h.stored_size;
    }
    fn(&h);
    cuptimon__chunk_hdr_encode(hb, &h);
    ck_assert_int_eq(pwrite(fd, hb, sizeof hb, off), (ssize_t)sizeof hb);
    close(fd);
}

static void raw_plus_8(struct cuptimon_chunk_hdr *h)
{
    h->raw_size += 8; /* the frame then holds 8 bytes less of trailer than a form has */
}

static void raw_minus_8(struct cuptimon_chunk_hdr *h)
{
    h->raw_size -= 8; /* the trailer then holds one table entry too many */
}

static void raw_much_less(struct cuptimon_chunk_hdr *h)
{
    h->raw_size -= 4096; /* the records no longer fit the room the header gives */
}

START_TEST(damaged_rdelta_chunks_cost_only_themselves)
{
    void (*damage[])(struct cuptimon_chunk_hdr *) = {raw_plus_8, raw_minus_8, raw_much_less};
    for (int k = 0; k < 3; k++) {
        char name[32], dir[400];
        snprintf(name, sizeof name, "dmg%d", k);
        write_mix(name, 0, 4, 1, CUPTIMON_CODEC_ZSTD_RDELTA);
        snprintf(dir, sizeof dir, "%s/%s", tmpdir, name);
        rewrite_header(dir, 1, damage[k]);
        struct cuptimon_archive_reader *r;
        ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
        struct cuptimon_archive_chunk c;
        int n = 0;
        while (cuptimon__archive_next(r, &c) == 1) {
            size_t len;
            uint8_t *want = cuptimon__test_load_real(files[c.hdr.index], &len);
            ck_assert_uint_ne(c.hdr.index, 1);
            ck_assert_int_eq(memcmp(c.data, want, len), 0);
            free(want);
            n++;
        }
        ck_assert_int_eq(n, 3);
        ck_assert_uint_eq(cuptimon__archive_stats(r)->corrupt_chunks, 1);
        cuptimon__archive_close(r);
    }
}
END_TEST

static int extent_hook_calls;

static void count_transform(uint8_t *buf, size_t n)
{
    (void)buf;
    (void)n;
    extent_hook_calls++;
}

START_TEST(a_chunk_mostly_holes_is_not_transformed)
{
    /* A real buffer followed by holes (zeros: kind 0, which the walk
     * stops at), as a sparse producer announces them: with the records
     * less than half of the chunk it goes out as plain zstd and is never
     * transformed (the copy into fresh pages and the verify pass cost a
     * worker more than the holes save); with a short tail it still is. */
    uint16_t sizes[CUPTIMON_RDELTA_KINDS];
    struct cuptimon_archive_writer *w = open_session("holes", sizes);
    cuptimon__aw_set_record_sizes(w, sizes);
    size_t len;
    uint8_t *buf = cuptimon__test_load_real(files[0], &len);
    uint8_t *big = calloc(1, 3 * len);
    ck_assert_ptr_nonnull(big);
    memcpy(big, buf, len);
    /* The walk stops at the holes: asked for more, the encoder says how
     * far it walked and writes nothing. */
    size_t walked = 0, bound = CUPTIMON_RDELTA_BOUND(3 * len);
    uint8_t *enc = malloc(bound);
    ck_assert_ptr_nonnull(enc);
    memset(enc, 0xa5, bound);
    ck_assert_uint_eq(cuptimon__rdelta_encode(sizes, big, 3 * len, len + 1, enc, &walked), 0);
    ck_assert_uint_eq(walked, len);
    for (size_t i = 0; i < bound; i++)
        ck_assert_uint_eq(enc[i], 0xa5);
    free(enc);
    cuptimon__aw_rdelta_test_hook = count_transform;
    extent_hook_calls = 0;
    struct cuptimon_chunk_hdr h = {.index = 0, .raw_size = 3 * len};
    ck_assert_int_eq(cuptimon__aw_chunk(w, &h, big), 0);
    ck_assert_uint_eq(h.codec, CUPTIMON_CODEC_ZSTD);
    ck_assert_int_eq(extent_hook_calls, 0);
    struct cuptimon_chunk_hdr h2 = {.index = 1, .raw_size = len + len / 4};
    ck_assert_int_eq(cuptimon__aw_chunk(w, &h2, big), 0);
    ck_assert_uint_eq(h2.codec, CUPTIMON_CODEC_ZSTD_RDELTA);
    ck_assert_int_eq(extent_hook_calls, 1);
    cuptimon__aw_rdelta_test_hook = NULL;
    cuptimon__aw_close(w);
    free(big);
    free(buf);
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("rdelta");
    TCase *t = tcase_create("codec");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 60);
    tcase_add_test(t, real_buffers_round_trip_whole);
    tcase_add_test(t, unknown_kind_and_tail_pass_through);
    tcase_add_test(t, hostile_encoded_forms_are_refused);
    tcase_add_test(t, codec_round_trips_and_pays_on_real_buffers);
    tcase_add_test(t, old_and_new_chunks_read_side_by_side);
    tcase_add_test(t, chunk_header_version_goes_with_the_codec);
    tcase_add_test(t, a_transform_that_does_not_undo_is_never_written);
    tcase_add_test(t, damaged_rdelta_chunks_cost_only_themselves);
    tcase_add_test(t, a_chunk_mostly_holes_is_not_transformed);
    suite_add_tcase(s, t);
    return s;
}
