/* The per-kind record delta on the test double's records (both mixes of
 * tests/fakecupti/double-bufs.h): every buffer reads back exactly through
 * the archive, and the codec takes at most half of plain zstd's bytes. */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "archive/decode.h"
#include "archive/rdelta.h"
#include "double-bufs.h"
#include "tests/unit/testlib.h"

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cuptimon-rdelta-double-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Writes the buffers as a session (with the walk sizes or without), reads
 * it back, checks every byte, and returns the session's segment bytes. */
static uint64_t write_read(const char *name, const struct double_buf *b, int n,
                           const uint16_t *sizes)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, name);
    struct cuptimon_archive_writer *w;
    ck_assert_int_eq(cuptimon__aw_open(dir, "{}", 1ull << 30, 1, &w, NULL), 0);
    cuptimon__aw_set_record_sizes(w, sizes);
    for (int i = 0; i < n; i++) {
        struct cuptimon_chunk_hdr h = {.index = (uint64_t)i, .raw_size = b[i].len};
        ck_assert_int_eq(cuptimon__aw_chunk(w, &h, b[i].data), 0);
        ck_assert_uint_eq(h.codec, sizes ? CUPTIMON_CODEC_ZSTD_RDELTA : CUPTIMON_CODEC_ZSTD);
    }
    ck_assert_uint_eq(cuptimon__aw_rdelta_fallbacks(w), 0);
    uint64_t bytes = cuptimon__aw_bytes(w);
    cuptimon__aw_close(w);
    struct cuptimon_archive_reader *r;
    ck_assert_int_eq(cuptimon__archive_open(dir, &r, NULL), 0);
    struct cuptimon_archive_chunk c;
    int got = 0;
    while (cuptimon__archive_next(r, &c) == 1) {
        ck_assert_uint_lt(c.hdr.index, (uint64_t)n);
        ck_assert_uint_eq(c.hdr.raw_size, b[c.hdr.index].len);
        ck_assert_int_eq(memcmp(c.data, b[c.hdr.index].data, c.hdr.raw_size), 0);
        got++;
    }
    ck_assert_int_eq(got, n);
    ck_assert_uint_eq(cuptimon__archive_stats(r)->corrupt_chunks, 0);
    cuptimon__archive_close(r);
    return bytes;
}

START_TEST(double_mixes_round_trip_at_half_the_bytes)
{
    struct cuptimon_layout l;
    ck_assert_int_eq(cuptimon__layout_init(&l, 130001, NULL), 0); /* the double's default */
    for (int mix = 0; mix < 2; mix++) {
        struct double_buf b[8];
        int n = double_bufs(mix, 30000, 1u << 20, b, 8);
        ck_assert_int_ge(n, 2);
        char zname[16], dname[16];
        snprintf(zname, sizeof zname, "z%d", mix);
        snprintf(dname, sizeof dname, "d%d", mix);
        uint64_t z = write_read(zname, b, n, NULL), d = write_read(dname, b, n, l.size);
        ck_assert_msg(d * 2 <= z, "mix %d: %llu bytes against plain zstd's %llu", mix,
                      (unsigned long long)d, (unsigned long long)z);
        for (int i = 0; i < n; i++)
            free(b[i].data);
    }
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("rdelta-double");
    TCase *t = tcase_create("double");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 60);
    tcase_add_test(t, double_mixes_round_trip_at_half_the_bytes);
    suite_add_tcase(s, t);
    return s;
}
