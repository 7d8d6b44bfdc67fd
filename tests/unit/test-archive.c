/* Unit tests of the archive: CRC32C, chunk headers, writer and reader,
 * rotation, compression, and what the reader does with damaged files. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "archive/archive.h"
#include "archive/session.h"
#include "archive/strtab.h"
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
    struct cuptimon_chunk_hdr h = {.index = 0x0102030405060708ull,
                                   .stream_id = 7,
                                   .codec = CUPTIMON_CODEC_RAW,
                                   .context = 0xaabbccddull,
                                   .cupti_ts = 11,
                                   .unix_ns = 12,
                                   .raw_size = 4096,
                                   .stored_size = 4096,
                                   .dropped = 3,
                                   .records = 99,
                                   .payload_crc = 0xdeadbeef};
    uint8_t b[CUPTIMON_CHUNK_HDR_SIZE];
    cuptimon__chunk_hdr_encode(b, &h);
    ck_assert_int_eq(memcmp(b, "CPTMCHNK", 8), 0);
    ck_assert_uint_eq(b[8], 1);     /* version */
    ck_assert_uint_eq(b[12], 96);   /* header size */
    ck_assert_uint_eq(b[16], 0x08); /* index, little-endian */
    ck_assert_uint_eq(b[23], 0x01);
    ck_assert_uint_eq(b[24], 7);    /* stream */
    ck_assert_uint_eq(b[57], 0x10); /* raw_size 4096 = 0x1000 */
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
        struct cuptimon_chunk_hdr h = {
            .index = (uint64_t)i, .raw_size = len, .unix_ns = 1000 + (uint64_t)i, .records = 7};
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
    snprintf(cmd, sizeof cmd,
             "test $(cat %s/archive/zstd/seg-*.cpt | wc -c) -lt "
             "$(($(cat %s/archive/raw/seg-*.cpt | wc -c) / 5))",
             tmpdir, tmpdir);
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

/* ---- hostile and damaged archives (issue 21) ------------------------------
 * Each case damages a session written by the real writer the way a damaged
 * disk or a hostile user can, and checks that the damage costs only what it
 * covers, and that nothing blocks, faults or grows by a claimed size. */

/* Replaces dir/name with a FIFO (nobody ever writes to it). */
static void make_fifo(const char *dir, const char *name)
{
    char p[400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
    ck_assert_int_eq(mkfifo(p, 0600), 0);
}

static int count_chunks(const char *dir, struct cuptimon_archive_stats *st)
{
    struct cuptimon_archive_reader *r;
    struct cuptimon_archive_chunk c;
    int n = 0, rc;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    while ((rc = cuptimon__archive_next(r, &c)) == 1)
        n++;
    ck_assert_int_eq(rc, 0);
    if (st != NULL)
        *st = *cuptimon__archive_stats(r);
    cuptimon__archive_close(r);
    return n;
}

static void flip(const char *path, off_t at, uint8_t mask)
{
    int fd = open(path, O_RDWR);
    uint8_t b;
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, &b, 1, at), 1);
    b ^= mask;
    ck_assert_int_eq(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

START_TEST(fifos_are_refused_not_read)
{
    /* A FIFO as meta.json, strings.bin or a segment hung the reader in
     * open() for ever (nobody writes to it); each is refused at once. */
    char dir[300];
    session_dir(dir, sizeof dir, "fifo");
    write_real(dir, 1, 64u << 20);
    make_fifo(dir, "strings.bin");
    make_fifo(dir, "seg-000001.cpt");
    struct cuptimon_archive_reader *r;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    struct strs st = {0};
    ck_assert_int_eq(cuptimon__archive_strings(r, collect_str, &st), 0);
    ck_assert_int_eq(st.n, 0);
    cuptimon__archive_close(r);
    struct cuptimon_archive_stats as;
    ck_assert_int_eq(count_chunks(dir, &as), 6);
    ck_assert_uint_eq(as.bad_files, 1); /* NEWAPI */
    make_fifo(dir, "meta.json");
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    ck_assert_ptr_null(cuptimon__archive_meta(r));
    cuptimon__archive_close(r);
    ck_assert_int_eq(count_chunks(dir, NULL), 6);
}
END_TEST

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(sparse_segment_costs_what_it_holds)
{
    /* A segment extended by a 4 GiB hole: the reader mapped and scanned it
     * all (8 s, 4.2 GB resident).  Holes are skipped unread now. */
    char dir[300], seg[400];
    session_dir(dir, sizeof dir, "sparse");
    write_real(dir, 1, 64u << 20);
    snprintf(seg, sizeof seg, "%s/seg-000000.cpt", dir);
    ck_assert_int_eq(truncate(seg, file_size(seg) + (4ll << 30)), 0);
    double t0 = now_s();
    struct cuptimon_archive_stats st;
    ck_assert_int_eq(count_chunks(dir, &st), 6);
    double dt = now_s() - t0;
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    ck_assert_msg(dt < 2.0, "reading took %.2f s", dt);
    ck_assert_msg(ru.ru_maxrss < 100 * 1024, "peak RSS %ld KiB", ru.ru_maxrss);
    ck_assert_uint_eq(st.skipped_bytes, 4ull << 30);
    /* A 1 GiB hole between chunks 2 and 3: the chunks after it are found. */
    struct cuptimon_archive_reader *r;
    struct cuptimon_archive_chunk c;
    uint64_t at3 = 0;
    ck_assert_int_eq(truncate(seg, file_size(seg) - (4ll << 30)), 0);
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(cuptimon__archive_next(r, &c), 1);
        at3 = c.offset;
    }
    cuptimon__archive_close(r);
    size_t tail = (size_t)(file_size(seg) - (long)at3);
    uint8_t *buf = malloc(tail);
    int fd = open(seg, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, buf, tail, (off_t)at3), (ssize_t)tail);
    ck_assert_int_eq(ftruncate(fd, (off_t)at3), 0);
    ck_assert_int_eq(pwrite(fd, buf, tail, (off_t)at3 + (1ll << 30)), (ssize_t)tail);
    close(fd);
    free(buf);
    t0 = now_s();
    ck_assert_int_eq(count_chunks(dir, &st), 6);
    dt = now_s() - t0;
    ck_assert_msg(dt < 2.0, "reading took %.2f s", dt);
    ck_assert_uint_eq(st.corrupt_chunks, 1);
    ck_assert_uint_eq(st.skipped_bytes, 1ull << 30);
    /* A forged header (its own CRC good) claiming 200 MiB of payload over a
     * hole: refused by a streamed CRC, without a 200 MiB buffer. */
    struct cuptimon_chunk_hdr fh = {
        .index = 99, .raw_size = 200u << 20, .stored_size = 200u << 20, .payload_crc = 0x12345678};
    uint8_t hb[CUPTIMON_CHUNK_HDR_SIZE];
    cuptimon__chunk_hdr_encode(hb, &fh);
    off_t end = (off_t)file_size(seg);
    fd = open(seg, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, hb, sizeof hb, end), (ssize_t)sizeof hb);
    ck_assert_int_eq(ftruncate(fd, end + (off_t)sizeof hb + (200ll << 20)), 0);
    close(fd);
    ck_assert_int_eq(count_chunks(dir, &st), 6);
    ck_assert_uint_eq(st.corrupt_chunks, 2);
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    ck_assert_msg(ru.ru_maxrss < 100 * 1024, "peak RSS %ld KiB", ru.ru_maxrss);
}
END_TEST

START_TEST(shrinking_segment_is_a_torn_tail)
{
    /* A segment cut short while it is read (a hostile user, or retention)
     * killed the mmap()ing reader with SIGBUS; it is a torn tail now. */
    char dir[300], seg[400];
    session_dir(dir, sizeof dir, "shrink");
    write_real(dir, 0, 64u << 20);
    snprintf(seg, sizeof seg, "%s/seg-000000.cpt", dir);
    struct cuptimon_archive_reader *r;
    struct cuptimon_archive_chunk c;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    ck_assert_int_eq(cuptimon__archive_next(r, &c), 1);
    size_t first = CUPTIMON_SEG_HDR_SIZE + CUPTIMON_CHUNK_HDR_SIZE + (size_t)c.hdr.stored_size;
    ck_assert_int_eq(truncate(seg, (off_t)first + 4096), 0);
    int n = 1, rc;
    while ((rc = cuptimon__archive_next(r, &c)) == 1)
        n++;
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(n, 1);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->torn_tails, 1);
    cuptimon__archive_close(r);
}
END_TEST

START_TEST(damaged_segment_header_costs_only_itself)
{
    /* One flipped bit in a segment's file header dropped every chunk of
     * the segment; the chunks carry their own magic and CRCs. */
    char dir[300], seg[400];
    session_dir(dir, sizeof dir, "seghdr");
    write_real(dir, 1, 64u << 20);
    snprintf(seg, sizeof seg, "%s/seg-000000.cpt", dir);
    flip(seg, 3, 0x01);
    struct cuptimon_archive_stats st;
    ck_assert_int_eq(count_chunks(dir, &st), 6);
    ck_assert_uint_eq(st.corrupt_chunks, 0);
    ck_assert_uint_eq(st.bad_seg_headers, 1); /* NEWAPI */
    flip(seg, 3, 0x01);
    flip(seg, 8, 0x02); /* the version */
    ck_assert_int_eq(count_chunks(dir, NULL), 6);
}
END_TEST

START_TEST(unusable_segment_skips_only_itself)
{
    /* A segment that cannot be read (here a directory in its place; a
     * mode 000 file as a user) stopped the whole session. */
    char dir[300], seg[400];
    session_dir(dir, sizeof dir, "unread");
    write_real(dir, 0, 1u << 20); /* one chunk per segment */
    snprintf(seg, sizeof seg, "%s/seg-000002.cpt", dir);
    ck_assert_int_eq(unlink(seg), 0);
    ck_assert_int_eq(mkdir(seg, 0700), 0);
    struct cuptimon_archive_stats st;
    ck_assert_int_eq(count_chunks(dir, &st), 5);
    ck_assert_uint_eq(st.bad_files, 1); /* NEWAPI */
}
END_TEST

START_TEST(duplicated_segment_is_counted_once)
{
    /* A segment copied beside itself was read, and counted, twice. */
    char dir[300], cmd[900];
    session_dir(dir, sizeof dir, "dup");
    write_real(dir, 0, 1u << 20); /* one chunk per segment */
    snprintf(cmd, sizeof cmd, "cp '%s/seg-000003.cpt' '%s/seg-000003-copy.cpt'", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    struct cuptimon_archive_stats st;
    ck_assert_int_eq(count_chunks(dir, &st), 6);
    ck_assert_uint_eq(st.duplicate_chunks, 1); /* NEWAPI */
}
END_TEST

START_TEST(chunks_before_a_bound_are_passed_over_unread)
{
    /* cuptimon__archive_skip_before(): chunks completed before the bound
     * (write_real's unix_ns 1000..1005) are counted from their headers,
     * their payloads not read; the others are returned whole. */
    char dir[300], seg[400];
    session_dir(dir, sizeof dir, "skip");
    uint64_t raw = write_real(dir, 1, 64u << 20);
    snprintf(seg, sizeof seg, "%s/seg-000000.cpt", dir);
    struct cuptimon_archive_reader *r;
    struct cuptimon_archive_chunk c;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    cuptimon__archive_skip_before(r, 1003);
    uint64_t want = 3;
    while (cuptimon__archive_next(r, &c) == 1) {
        ck_assert_uint_eq(c.hdr.index, want);
        want++;
    }
    ck_assert_uint_eq(want, 6);
    const struct cuptimon_archive_stats *st = cuptimon__archive_stats(r);
    ck_assert_uint_eq(st->chunks, 6); /* as a reader of every chunk counts them */
    ck_assert_uint_eq(st->bytes_raw, raw);
    ck_assert_uint_eq(st->range_chunks, 3);
    ck_assert_uint_eq(st->range_records, 3 * 7);
    ck_assert_uint_eq(st->range_dropped, 0);
    ck_assert_uint_eq(st->corrupt_chunks, 0);
    cuptimon__archive_close(r);

    /* Past every chunk: nothing is returned, every byte is accounted for. */
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    cuptimon__archive_skip_before(r, UINT64_MAX);
    ck_assert_int_eq(cuptimon__archive_next(r, &c), 0);
    st = cuptimon__archive_stats(r);
    ck_assert_uint_eq(st->range_chunks, 6);
    ck_assert_uint_eq(st->range_bytes, (uint64_t)file_size(seg) - CUPTIMON_SEG_HDR_SIZE);
    ck_assert_uint_eq(st->range_bytes, st->bytes_stored + 6 * CUPTIMON_CHUNK_HDR_SIZE);
    cuptimon__archive_close(r);

    /* A payload byte flipped in chunk 0: passed over, it is not read, so
     * not found damaged; read, it is. */
    flip(seg, CUPTIMON_SEG_HDR_SIZE + CUPTIMON_CHUNK_HDR_SIZE + 100, 0xff);
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    cuptimon__archive_skip_before(r, 1001);
    int n = 0;
    while (cuptimon__archive_next(r, &c) == 1)
        n++;
    ck_assert_int_eq(n, 5);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->corrupt_chunks, 0);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->range_chunks, 1);
    cuptimon__archive_close(r);
    struct cuptimon_archive_stats all;
    ck_assert_int_eq(count_chunks(dir, &all), 5);
    ck_assert_uint_eq(all.corrupt_chunks, 1);
    ck_assert_uint_eq(all.range_chunks, 0);

    /* A chunk cut short is torn, whether or not it would be passed over. */
    ck_assert_int_eq(truncate(seg, file_size(seg) - 1000), 0);
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    cuptimon__archive_skip_before(r, UINT64_MAX);
    ck_assert_int_eq(cuptimon__archive_next(r, &c), 0);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->range_chunks, 5);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->torn_tails, 1);
    cuptimon__archive_close(r);
}
END_TEST

START_TEST(duplicate_of_a_chunk_passed_over_is_counted_once)
{
    char dir[300], cmd[900];
    session_dir(dir, sizeof dir, "skipdup");
    write_real(dir, 0, 1u << 20); /* one chunk per segment */
    snprintf(cmd, sizeof cmd, "cp '%s/seg-000001.cpt' '%s/seg-000001-copy.cpt'", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    struct cuptimon_archive_reader *r;
    struct cuptimon_archive_chunk c;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    cuptimon__archive_skip_before(r, 1002);
    int n = 0;
    while (cuptimon__archive_next(r, &c) == 1)
        n++;
    ck_assert_int_eq(n, 4);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->range_chunks, 2);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->duplicate_chunks, 1);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->chunks, 6);
    cuptimon__archive_close(r);
}
END_TEST

START_TEST(damaged_first_string_costs_only_itself)
{
    /* One bit in the first strings.bin entry lost every name after it. */
    char dir[300], p[400];
    session_dir(dir, sizeof dir, "str1");
    write_real(dir, 0, 64u << 20);
    snprintf(p, sizeof p, "%s/strings.bin", dir);
    flip(p, CUPTIMON_STR_HDR_SIZE + CUPTIMON_STR_ENTRY_HDR + 3, 0x04);
    struct cuptimon_archive_reader *r;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    struct strs st = {0};
    ck_assert_int_eq(cuptimon__archive_strings(r, collect_str, &st), 0);
    ck_assert_int_eq(st.n, 1);
    ck_assert_str_eq(st.s[0], "_ZN2ns7add_oneEPfi");
    ck_assert_uint_eq(cuptimon__archive_stats(r)->corrupt_strings, 1);
    cuptimon__archive_close(r);
    /* Its length field damaged: the next entry is found by its CRC. */
    flip(p, CUPTIMON_STR_HDR_SIZE + CUPTIMON_STR_ENTRY_HDR + 3, 0x04);
    flip(p, CUPTIMON_STR_HDR_SIZE + 8, 0x01);
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(cuptimon__archive_strings(r, collect_str, &st), 0);
    ck_assert_int_eq(st.n, 1);
    ck_assert_str_eq(st.s[0], "_ZN2ns7add_oneEPfi");
    cuptimon__archive_close(r);
}
END_TEST

START_TEST(session_without_meta_is_found_and_read)
{
    /* A missing or looping meta.json dropped the session without a word:
     * it is found, its chunks are read, and the reason is reported. */
    char dir[300], p[400];
    session_dir(dir, sizeof dir, "nometa");
    write_real(dir, 1, 64u << 20);
    snprintf(p, sizeof p, "%s/meta.json", dir);
    ck_assert_int_eq(unlink(p), 0);
    char **list;
    ck_assert_int_eq(cuptimon__archive_find_sessions(tmpdir, &list), 0);
    ck_assert_ptr_nonnull(list[0]);
    ck_assert_str_eq(list[0], dir);
    cuptimon__archive_free_list(list);
    struct cuptimon_archive_stats st;
    ck_assert_int_eq(count_chunks(dir, &st), 6);
    ck_assert_uint_eq(st.meta_damaged, 1); /* NEWAPI */
    ck_assert_int_eq(symlink("meta.json", p), 0);
    ck_assert_int_eq(count_chunks(dir, &st), 6);
    struct cuptimon_archive_reader *r;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    ck_assert_ptr_null(cuptimon__archive_meta(r)); /* no CUPTI version known to the writer */
    cuptimon__archive_close(r);
    /* Segments name the CUPTI version meta.json gave the writer, so that a
     * session without its meta.json is still decoded. */
    session_dir(dir, sizeof dir, "20261203T124540Z-25339-1");
    struct cuptimon_archive_writer *w;
    ck_assert_int_eq(
        cuptimon__aw_open(dir, "{\"pid\":1,\"cupti_version\":130001}", 1u << 20, 0, &w, NULL), 0);
    cuptimon__aw_close(w);
    snprintf(p, sizeof p, "%s/meta.json", dir);
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    ck_assert_ptr_nonnull(cuptimon__archive_meta(r));
    ck_assert_str_eq(cuptimon__archive_meta(r), "{\"cupti_version\":130001,\"pid\":25339}\n");
    cuptimon__archive_close(r);
}
END_TEST

START_TEST(damaged_meta_is_salvaged)
{
    /* A meta.json that is not valid JSON lost the CUPTI version, and with
     * it every record; the members that still parse are kept. */
    static const char good[] = "{\n  \"pid\":25339,\n  \"hostname\":\"vm\",\n"
                               "  \"exe\":\"\\\"pid\\\":7\",\n  \"cupti_version\":130001,\n"
                               "  \"record_sizes\":{\n    \"10\":216\n  },\n  \"job\":{\n"
                               "    \"rank\":\"3\"\n  }\n}\n";
    struct cuptimon_archive_session as;
    memset(&as, 0, sizeof as);
    ck_assert_int_eq(cuptimon__archive_session_meta(&as, good), 0);
    ck_assert_uint_eq(as.info.cupti_version, 130001);
    /* A flipped byte between two members, and a file cut short. */
    char bad[sizeof good];
    memcpy(bad, good, sizeof good);
    *strstr(bad, "\"vm\",") = '\x01';
    ck_assert_int_lt(cuptimon__archive_session_meta(&as, bad), 0);
    ck_assert_uint_eq(as.info.cupti_version, 130001);
    ck_assert_uint_eq(as.info.pid, 25339);
    ck_assert_int_eq(as.info.rank, 3);
    ck_assert_uint_eq(as.record_sizes[10], 216);
    ck_assert_int_eq(as.layout.version_known, 1);
    memcpy(bad, good, sizeof good);
    *strstr(bad, "  \"job\"") = '\0';
    ck_assert_int_lt(cuptimon__archive_session_meta(&as, bad), 0);
    ck_assert_uint_eq(as.info.cupti_version, 130001);
    ck_assert_int_eq(as.info.rank, -1);
    ck_assert_int_eq(cuptimon__archive_session_meta(&as, "[1]"), -EINVAL);
    ck_assert_int_eq(cuptimon__archive_session_meta(&as, "garbage"), -EINVAL);
    cuptimon__archive_session_clear(&as);
}
END_TEST

/* Layouts that change during a session (LAYOUTS, archived as strings.bin
 * entries under CUPTIMON_LAYOUTS_KEY): each chunk decodes with the
 * generation that starts at or before its index; meta.json's before the
 * first; an archive written before them decodes as before. */
START_TEST(layout_generations_apply_by_chunk_index)
{
    char dir[300];
    struct cuptimon_archive_writer *w;
    struct cuptimon_archive_reader *r;
    struct cuptimon_archive_session as;
    struct cuptimon_buf b = {0};
    static const char meta[] =
        "{\"pid\": 7, \"cupti_version\": 130300, \"activity_api\": \"v2\", "
        "\"user_defined_records\": true, \"record_layouts\": {\"10\": {\"size\": 24, "
        "\"fields\": [{\"field\": \"start\", \"offset\": 8, \"size\": 8}]}}}";
    static const char gen5[] = "{\"10\": {\"size\": 32, \"fields\": [{\"field\": \"start\", "
                               "\"offset\": 16, \"size\": 8}]}, \"1\": {\"size\": 16, \"fields\": "
                               "[{\"field\": \"bytes\", \"offset\": 8, \"size\": 8}]}}";

    session_dir(dir, sizeof dir, "gens");
    ck_assert_int_eq(cuptimon__aw_open(dir, meta, 1u << 20, 0, &w, NULL), 0);
    ck_assert_int_eq(cuptimon__strings_begin(&b), 0);
    ck_assert_int_eq(cuptimon__strings_add(&b, CUPTIMON_LAYOUTS_KEY(5), gen5, strlen(gen5)), 0);
    ck_assert_int_eq(cuptimon__strings_add(&b, CUPTIMON_LAYOUTS_KEY(9), "[]", 2), 0);
    ck_assert_int_eq(cuptimon__strings_add(&b, 0x1234, "kernel", 6), 0);
    ck_assert_int_eq(cuptimon__aw_strings(w, b.data, b.len), 0);
    cuptimon__buf_free(&b);
    cuptimon__aw_close(w);

    memset(&as, 0, sizeof as);
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    ck_assert_int_eq(cuptimon__archive_session_meta(&as, cuptimon__archive_meta(r)), 0);
    ck_assert_int_eq(cuptimon__archive_session_strings(&as, r), 0);
    ck_assert_uint_eq(as.ngens, 2);
    /* Before the first generation: meta.json's (24-byte kernels, no
     * copies); from 5: 32-byte kernels and copies; from 9 (not a JSON
     * object): nothing decodes. */
    const struct cuptimon_layout *l0 = cuptimon__archive_session_layout(&as, 4);
    const struct cuptimon_layout *l5 = cuptimon__archive_session_layout(&as, 5);
    const struct cuptimon_layout *l8 = cuptimon__archive_session_layout(&as, 8);
    const struct cuptimon_layout *l9 = cuptimon__archive_session_layout(&as, 1000);
    ck_assert_ptr_eq(l0, &as.layout);
    ck_assert_uint_eq(l0->size[10], 24);
    ck_assert_uint_eq(l0->size[1], 0);
    ck_assert_uint_eq(l5->size[10], 32);
    ck_assert_uint_eq(l5->rec[10]->f[CUPTIMON_FK_start].off, 16);
    ck_assert_uint_eq(l5->size[1], 16);
    ck_assert_ptr_eq(l8, l5);
    ck_assert_uint_eq(l9->size[10], 0);
    ck_assert_uint_eq(l9->user_defined, 0);
    ck_assert_ptr_nonnull(strstr(as.gens_error, "the layouts from buffer 9 on: not a JSON object"));
    /* The names are there as before, the layout entries are not names. */
    size_t len;
    ck_assert_ptr_nonnull(cuptimon__strtab_get(as.names, 0x1234, &len));
    ck_assert_ptr_null(cuptimon__strtab_get(as.names, CUPTIMON_LAYOUTS_KEY(5), &len));
    /* Reading the strings again (another pass) gives the same. */
    ck_assert_int_eq(cuptimon__archive_session_strings(&as, r), 0);
    ck_assert_uint_eq(as.ngens, 2);
    cuptimon__archive_close(r);
    cuptimon__archive_session_clear(&as);
}
END_TEST

struct reports {
    int n[CUPTIMON_DAMAGE_KINDS];
    uint64_t first_off[CUPTIMON_DAMAGE_KINDS];
    char first_path[CUPTIMON_DAMAGE_KINDS][400];
};

static void on_damage(void *ud, enum cuptimon_archive_damage kind, const char *path,
                      uint64_t offset, const char *what)
{
    struct reports *rp = ud;
    ck_assert_int_lt(kind, CUPTIMON_DAMAGE_KINDS);
    ck_assert(what[0] != '\0');
    if (rp->n[kind]++ == 0) {
        rp->first_off[kind] = offset;
        snprintf(rp->first_path[kind], sizeof rp->first_path[0], "%s", path);
    }
}

START_TEST(damage_is_reported_once_per_kind)
{
    char dir[300], seg[400];
    session_dir(dir, sizeof dir, "report");
    write_real(dir, 0, 64u << 20);
    snprintf(seg, sizeof seg, "%s/seg-000000.cpt", dir);
    /* Two damaged chunks (0 and 2), a torn tail, no meta.json. */
    struct cuptimon_archive_reader *r;
    struct cuptimon_archive_chunk c;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    uint64_t at[6];
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(cuptimon__archive_next(r, &c), 1);
        at[i] = c.offset;
    }
    cuptimon__archive_close(r);
    flip(seg, (off_t)at[0] + 20, 0x01);
    flip(seg, (off_t)at[2] + CUPTIMON_CHUNK_HDR_SIZE + 7, 0x01);
    ck_assert_int_eq(truncate(seg, file_size(seg) - 10), 0);
    char p[400];
    snprintf(p, sizeof p, "%s/meta.json", dir);
    unlink(p);
    struct reports rp;
    memset(&rp, 0, sizeof rp);
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    cuptimon__archive_set_report(r, on_damage, &rp);
    ck_assert_int_eq(rp.n[CUPTIMON_DAMAGE_META], 1);
    ck_assert_str_eq(rp.first_path[CUPTIMON_DAMAGE_META], p);
    int n = 0;
    while (cuptimon__archive_next(r, &c) == 1)
        n++;
    ck_assert_int_eq(n, 3);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->corrupt_chunks, 2);
    ck_assert_int_eq(rp.n[CUPTIMON_DAMAGE_CHUNK], 1);
    ck_assert_uint_eq(rp.first_off[CUPTIMON_DAMAGE_CHUNK], at[0]);
    ck_assert_str_eq(rp.first_path[CUPTIMON_DAMAGE_CHUNK], seg);
    ck_assert_int_eq(rp.n[CUPTIMON_DAMAGE_TORN], 1);
    ck_assert_uint_eq(rp.first_off[CUPTIMON_DAMAGE_TORN], at[5]);
    ck_assert_int_eq(rp.n[CUPTIMON_DAMAGE_DUPLICATE], 0);
    cuptimon__archive_close(r);
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
    tcase_add_test(t, chunks_before_a_bound_are_passed_over_unread);
    suite_add_tcase(s, t);
    /* A reader that blocks or crawls fails here rather than at 60 s. */
    t = tcase_create("hostile");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 15);
    tcase_add_test(t, fifos_are_refused_not_read);
    tcase_add_test(t, sparse_segment_costs_what_it_holds);
    tcase_add_test(t, shrinking_segment_is_a_torn_tail);
    tcase_add_test(t, damaged_segment_header_costs_only_itself);
    tcase_add_test(t, unusable_segment_skips_only_itself);
    tcase_add_test(t, duplicated_segment_is_counted_once);
    tcase_add_test(t, duplicate_of_a_chunk_passed_over_is_counted_once);
    tcase_add_test(t, damaged_first_string_costs_only_itself);
    tcase_add_test(t, session_without_meta_is_found_and_read);
    tcase_add_test(t, damaged_meta_is_salvaged);
    tcase_add_test(t, layout_generations_apply_by_chunk_index);
    tcase_add_test(t, damage_is_reported_once_per_kind); /* NEWAPI */
    suite_add_tcase(s, t);
    return s;
}
