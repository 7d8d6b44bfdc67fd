/* Unit tests of the archive: CRC32C, chunk headers, writer and reader,
 * rotation, compression, and what the reader does with damaged files. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/archive.h"
#include "cuptimon-proto.h"
#include "tests/unit/testlib.h"

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cuptimon-archive-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static void session_dir(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/archive/%s", tmpdir, name);
}

START_TEST(crc32c_known_vectors)
{
    /* The check value of CRC-32C (iSCSI) for "123456789". */
    ck_assert_uint_eq(cuptimon__crc32c(0, "123456789", 9), 0xe3069283u);
    ck_assert_uint_eq(cuptimon__crc32c(0, "", 0), 0);
    /* Incremental equals one-shot, across every split of an odd length. */
    uint8_t buf[37];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 7 + 3);
    uint32_t whole = cuptimon__crc32c(0, buf, sizeof buf);
    for (size_t k = 0; k <= sizeof buf; k++)
        ck_assert_uint_eq(cuptimon__crc32c(cuptimon__crc32c(0, buf, k), buf + k, sizeof buf - k),
                          whole);
}
END_TEST

START_TEST(chunk_header_layout)
{
    struct cuptimon_chunk_hdr h = {.index = 0x0102030405060708ull, .stream_id = 7,
                                   .codec = CUPTIMON_CODEC_RAW, .context = 0xaabbccddull,
                                   .cupti_ts = 11, .unix_ns = 12, .raw_size = 4096,
                                   .stored_size = 4096, .dropped = 3, .records = 99,
                                   .payload_crc = 0xdeadbeef};
    uint8_t b[CUPTIMON_CHUNK_HDR_SIZE];
    cuptimon__chunk_hdr_encode(b, &h);
    ck_assert_int_eq(memcmp(b, "CPTMCHNK", 8), 0);
    ck_assert_uint_eq(b[8], 1);                   /* version */
    ck_assert_uint_eq(b[12], 96);                 /* header size */
    ck_assert_uint_eq(b[16], 0x08);               /* index, little-endian */
    ck_assert_uint_eq(b[23], 0x01);
    ck_assert_uint_eq(b[24], 7);                  /* stream */
    ck_assert_uint_eq(b[57], 0x10);               /* raw_size 4096 = 0x1000 */
    ck_assert_uint_eq(cuptimon__get_u32(b + 88), 0xdeadbeef);
    struct cuptimon_chunk_hdr d;
    ck_assert_int_eq(cuptimon__chunk_hdr_decode(b, &d), 0);
    ck_assert_uint_eq(d.index, h.index);
    ck_assert_uint_eq(d.context, h.context);
    ck_assert_uint_eq(d.records, 99);
    /* Any flipped bit in the header is caught. */
    for (size_t i = 0; i < CUPTIMON_CHUNK_HDR_SIZE; i++) {
        b[i] ^= 0x10;
        ck_assert_int_lt(cuptimon__chunk_hdr_decode(b, &d), 0);
        b[i] ^= 0x10;
    }
    /* A raw chunk whose sizes disagree is refused even with a good CRC. */
    h.stored_size = 4000;
    cuptimon__chunk_hdr_encode(b, &h);
    ck_assert_int_eq(cuptimon__chunk_hdr_decode(b, &d), -EBADMSG);
}
END_TEST

struct strs {
    int n;
    uint64_t ptr[8];
    char s[8][64];
};

static int collect_str(void *ud, uint64_t ptr, const char *s, size_t len)
{
    struct strs *st = ud;
    ck_assert_uint_eq(strlen(s), len);
    if (st->n < 8) {
        st->ptr[st->n] = ptr;
        snprintf(st->s[st->n], sizeof st->s[0], "%s", s);
    }
    st->n++;
    return 0;
}

static void write_strings(struct cuptimon_archive_writer *w)
{
    struct cuptimon_buf b = {0};
    cuptimon__strings_begin(&b);
    cuptimon__strings_add(&b, 0x1000, "_Z5scaleILi2EEvPfi", 18);
    cuptimon__strings_add(&b, 0x2000, "_ZN2ns7add_oneEPfi", 18);
    ck_assert_int_eq(cuptimon__aw_strings(w, b.data, b.len), 0);
    cuptimon__buf_free(&b);
}

/* Writes the six real buffers as chunks 0..5 at the given level; returns
 * the raw bytes written. */
static uint64_t write_real(const char *dir, int level, uint64_t seg_max)
{
    static const char *const files[] = {"phase0-buf0.bin.zst", "phase0-buf1.bin.zst",
                                        "phase0-buf2.bin.zst", "phase0-buf3.bin.zst",
                                        "phase1-buf4.bin.zst", "phase1-buf5.bin.zst"};
    struct cuptimon_archive_writer *w;
    char *err = NULL;
    ck_assert_int_eq(cuptimon__aw_open(dir, "{\"pid\":1}", seg_max, level, &w, &err), 0);
    write_strings(w);
    uint64_t total = 0;
    for (int i = 0; i < 6; i++) {
        size_t len;
        uint8_t *buf = cuptimon__test_load_real(files[i], &len);
        struct cuptimon_chunk_hdr h = {.index = (uint64_t)i, .raw_size = len,
                                       .unix_ns = 1000 + (uint64_t)i, .records = 7};
        ck_assert_int_eq(cuptimon__aw_chunk(w, &h, buf), 0);
        if (level > 0)
            ck_assert_uint_eq(h.codec, CUPTIMON_CODEC_ZSTD);
        total += len;
        free(buf);
    }
    cuptimon__aw_close(w);
    return total;
}

static void check_real(const char *dir, int expect_chunks)
{
    static const char *const files[] = {"phase0-buf0.bin.zst", "phase0-buf1.bin.zst",
                                        "phase0-buf2.bin.zst", "phase0-buf3.bin.zst",
                                        "phase1-buf4.bin.zst", "phase1-buf5.bin.zst"};
    struct cuptimon_archive_reader *r;
    char *err = NULL;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, &err), 0);
    ck_assert_str_eq(cuptimon__archive_meta(r), "{\"pid\":1}\n");
    struct strs st = {0};
    ck_assert_int_eq(cuptimon__archive_strings(r, collect_str, &st), 0);
    ck_assert_int_eq(st.n, 2);
    ck_assert_uint_eq(st.ptr[1], 0x2000);
    ck_assert_str_eq(st.s[1], "_ZN2ns7add_oneEPfi");
    struct cuptimon_archive_chunk c;
    int n = 0;
    while (cuptimon__archive_next(r, &c) == 1) {
        size_t len;
        uint8_t *want = cuptimon__test_load_real(files[c.hdr.index], &len);
        ck_assert_uint_eq(c.hdr.index, (uint64_t)n);
        ck_assert_uint_eq(c.hdr.raw_size, len);
        ck_assert_uint_eq(c.hdr.unix_ns, 1000 + c.hdr.index);
        ck_assert_int_eq(memcmp(c.data, want, len), 0);
        free(want);
        n++;
    }
    ck_assert_int_eq(n, expect_chunks);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->corrupt_chunks, 0);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->torn_tails, 0);
    cuptimon__archive_close(r);
}

START_TEST(round_trip_raw_and_zstd)
{
    char dir[300];
    session_dir(dir, sizeof dir, "raw");
    write_real(dir, 0, 64u << 20);
    check_real(dir, 6);
    session_dir(dir, sizeof dir, "zstd");
    write_real(dir, 1, 64u << 20);
    check_real(dir, 6);
    /* Compression pays on real buffers: the zstd session is far smaller. */
    char cmd[800];
    snprintf(cmd, sizeof cmd, "test $(cat %s/archive/zstd/seg-*.cpt | wc -c) -lt "
                              "$(($(cat %s/archive/raw/seg-*.cpt | wc -c) / 5))", tmpdir, tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(rotation_by_size)
{
    char dir[300], seg[400];
    session_dir(dir, sizeof dir, "rot");
    /* Raw chunks of up to 4 MiB with a 1 MiB cap: one chunk per segment. */
    write_real(dir, 0, 1u << 20);
    for (int i = 0; i < 6; i++) {
        snprintf(seg, sizeof seg, "%s/seg-%06d.cpt", dir, i);
        ck_assert_msg(access(seg, F_OK) == 0, "missing %s", seg);
    }
    check_real(dir, 6);
}
END_TEST

static long file_size(const char *p)
{
    struct stat sb;
    ck_assert_int_eq(stat(p, &sb), 0);
    return (long)sb.st_size;
}

START_TEST(torn_tail_is_skipped)
{
    char dir[300], seg[400];
    session_dir(dir, sizeof dir, "torn");
    write_real(dir, 1, 64u << 20);
    snprintf(seg, sizeof seg, "%s/seg-000000.cpt", dir);
    /* Cut the last chunk in half, as a crash mid-write would. */
    ck_assert_int_eq(truncate(seg, file_size(seg) - 1000), 0);
    struct cuptimon_archive_reader *r;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    struct cuptimon_archive_chunk c;
    int n = 0;
    while (cuptimon__archive_next(r, &c) == 1)
        n++;
    ck_assert_int_eq(n, 5);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->torn_tails, 1);
    cuptimon__archive_close(r);
}
END_TEST

START_TEST(corrupt_chunk_is_skipped_and_the_next_reads)
{
    char dir[300], seg[400];
    session_dir(dir, sizeof dir, "bad");
    write_real(dir, 0, 64u << 20);
    snprintf(seg, sizeof seg, "%s/seg-000000.cpt", dir);
    /* Flip one payload byte of the first chunk. */
    int fd = open(seg, O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t b;
    off_t at = CUPTIMON_SEG_HDR_SIZE + CUPTIMON_CHUNK_HDR_SIZE + 5000;
    ck_assert_int_eq(pread(fd, &b, 1, at), 1);
    b ^= 0xff;
    ck_assert_int_eq(pwrite(fd, &b, 1, at), 1);
    close(fd);
    struct cuptimon_archive_reader *r;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    struct cuptimon_archive_chunk c;
    int n = 0;
    uint64_t first = 99;
    while (cuptimon__archive_next(r, &c) == 1) {
        if (n == 0)
            first = c.hdr.index;
        n++;
    }
    ck_assert_int_eq(n, 5);
    ck_assert_uint_eq(first, 1);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->corrupt_chunks, 1);
    cuptimon__archive_close(r);
}
END_TEST

START_TEST(corrupt_compressed_chunk_is_skipped)
{
    char dir[300], seg[400];
    session_dir(dir, sizeof dir, "zbad");
    struct cuptimon_archive_writer *w;
    ck_assert_int_eq(cuptimon__aw_open(dir, "{}", 64u << 20, 3, &w, NULL), 0);
    uint8_t data[65536];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i / 100);
    for (int i = 0; i < 3; i++) {
        struct cuptimon_chunk_hdr h = {.index = (uint64_t)i, .raw_size = sizeof data};
        ck_assert_int_eq(cuptimon__aw_chunk(w, &h, data), 0);
        ck_assert_uint_eq(h.codec, CUPTIMON_CODEC_ZSTD);
    }
    cuptimon__aw_close(w);
    /* Rewrite chunk 1's header to claim one byte more of raw data, with
     * good CRCs: it decompresses to the wrong size and must be refused. */
    snprintf(seg, sizeof seg, "%s/seg-000000.cpt", dir);
    int fd = open(seg, O_RDWR);
    uint8_t hb[CUPTIMON_CHUNK_HDR_SIZE];
    off_t off = CUPTIMON_SEG_HDR_SIZE;
    struct cuptimon_chunk_hdr h;
    ck_assert_int_eq(pread(fd, hb, sizeof hb, off), (ssize_t)sizeof hb);
    ck_assert_int_eq(cuptimon__chunk_hdr_decode(hb, &h), 0);
    off += CUPTIMON_CHUNK_HDR_SIZE + (off_t)h.stored_size;
    ck_assert_int_eq(pread(fd, hb, sizeof hb, off), (ssize_t)sizeof hb);
    ck_assert_int_eq(cuptimon__chunk_hdr_decode(hb, &h), 0);
    h.raw_size++;
    cuptimon__chunk_hdr_encode(hb, &h);
    ck_assert_int_eq(pwrite(fd, hb, sizeof hb, off), (ssize_t)sizeof hb);
    close(fd);
    struct cuptimon_archive_reader *r;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    struct cuptimon_archive_chunk c;
    uint64_t seen[4];
    int n = 0;
    while (cuptimon__archive_next(r, &c) == 1) {
        ck_assert_int_eq(memcmp(c.data, data, sizeof data), 0);
        seen[n++] = c.hdr.index;
    }
    ck_assert_int_eq(n, 2);
    ck_assert_uint_eq(seen[0], 0);
    ck_assert_uint_eq(seen[1], 2);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->corrupt_chunks, 1);
    cuptimon__archive_close(r);
}
END_TEST

START_TEST(torn_strings_tail)
{
    char dir[300], p[400];
    session_dir(dir, sizeof dir, "str");
    struct cuptimon_archive_writer *w;
    ck_assert_int_eq(cuptimon__aw_open(dir, "{}", 64u << 20, 0, &w, NULL), 0);
    write_strings(w);
    cuptimon__aw_close(w);
    snprintf(p, sizeof p, "%s/strings.bin", dir);
    ck_assert_int_eq(truncate(p, file_size(p) - 3), 0);
    struct cuptimon_archive_reader *r;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    struct strs st = {0};
    ck_assert_int_eq(cuptimon__archive_strings(r, collect_str, &st), 0);
    ck_assert_int_eq(st.n, 1);
    ck_assert_str_eq(st.s[0], "_Z5scaleILi2EEvPfi");
    ck_assert_uint_eq(cuptimon__archive_stats(r)->corrupt_strings, 1);
    cuptimon__archive_close(r);
}
END_TEST

START_TEST(empty_session_is_not_torn)
{
    /* A producer that never completed a buffer leaves a header-only
     * segment: nothing to read, and nothing damaged. */
    char dir[300];
    session_dir(dir, sizeof dir, "empty");
    struct cuptimon_archive_writer *w;
    ck_assert_int_eq(cuptimon__aw_open(dir, "{}", 1u << 20, 1, &w, NULL), 0);
    cuptimon__aw_close(w);
    struct cuptimon_archive_reader *r;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    struct cuptimon_archive_chunk c;
    ck_assert_int_eq(cuptimon__archive_next(r, &c), 0);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->torn_tails, 0);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->segments, 1);
    cuptimon__archive_close(r);
}
END_TEST

START_TEST(find_sessions_and_errors)
{
    char dir[300];
    session_dir(dir, sizeof dir, "b");
    write_real(dir, 0, 64u << 20);
    session_dir(dir, sizeof dir, "a");
    write_real(dir, 0, 64u << 20);
    char **list;
    ck_assert_int_eq(cuptimon__archive_find_sessions(tmpdir, &list), 0);
    ck_assert_ptr_nonnull(list[0]);
    ck_assert_ptr_nonnull(list[1]);
    ck_assert_ptr_null(list[2]);
    ck_assert(strstr(list[0], "/archive/a") != NULL);
    cuptimon__archive_free_list(list);
    ck_assert_int_eq(cuptimon__archive_find_sessions(dir, &list), 0);
    ck_assert_str_eq(list[0], dir);
    ck_assert_ptr_null(list[1]);
    cuptimon__archive_free_list(list);
    struct cuptimon_archive_reader *r;
    char *err = NULL;
    ck_assert_int_eq(cuptimon__archive_open(tmpdir, &r, &err), -ENOENT);
    ck_assert_ptr_nonnull(err);
    ck_assert(strstr(err, "not a cuptimon archive") != NULL);
    free(err);
    /* Writing where a file blocks the directory fails with a message. */
    char blocker[300];
    snprintf(blocker, sizeof blocker, "%s/file", tmpdir);
    FILE *f = fopen(blocker, "w");
    fclose(f);
    snprintf(dir, sizeof dir, "%s/file/sub", tmpdir);
    struct cuptimon_archive_writer *w;
    err = NULL;
    ck_assert_int_lt(cuptimon__aw_open(dir, "{}", 1u << 20, 0, &w, &err), 0);
    ck_assert_ptr_nonnull(err);
    free(err);
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("archive");
    TCase *t = tcase_create("archive");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 60);
    tcase_add_test(t, crc32c_known_vectors);
    tcase_add_test(t, chunk_header_layout);
    tcase_add_test(t, round_trip_raw_and_zstd);
    tcase_add_test(t, rotation_by_size);
    tcase_add_test(t, torn_tail_is_skipped);
    tcase_add_test(t, corrupt_chunk_is_skipped_and_the_next_reads);
    tcase_add_test(t, corrupt_compressed_chunk_is_skipped);
    tcase_add_test(t, torn_strings_tail);
    tcase_add_test(t, find_sessions_and_errors);
    tcase_add_test(t, empty_session_is_not_torn);
    suite_add_tcase(s, t);
    return s;
}
