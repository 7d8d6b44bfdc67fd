/* The archive writer's allocations per chunk, counted (issue 49).  The
 * writer used to realloc its compression buffer whenever a chunk came out a
 * few bytes longer than the largest before it; on a daemon that had served
 * sessions for a while each such realloc copied 4 MiB into freshly faulted
 * pages and doubled the daemon's CPU per record.  These tests count, through
 * this program's own malloc, calloc and realloc (which hand on to glibc's),
 * every heap allocation of BIG bytes or more made while chunks are written:
 * a bound on them, not a time.  Under AddressSanitizer, which owns malloc
 * itself, nothing is counted: the chunks are still written (and checked
 * for memory errors there), the bounds are not. */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "tests/unit/testlib.h"

#if defined(__SANITIZE_ADDRESS__)
#define NO_HOOK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NO_HOOK 1
#endif
#endif

/* An allocation this large is a buffer for a chunk (or zstd's tables),
 * never bookkeeping. */
#define BIG ((size_t)64 << 10)

static volatile int counting;
static volatile unsigned long big_allocs;

/* Whether this program's malloc is the one called: not under
 * AddressSanitizer (NO_HOOK) nor under valgrind, which put their own in
 * its place; there the chunks are still written, the counts not checked. */
static int hook_live(void);
#define ck_assert_allocs_le(n, bound)                                                              \
    do {                                                                                           \
        if (hook_live())                                                                           \
            ck_assert_uint_le(n, bound);                                                           \
    } while (0)
#define ck_assert_allocs_eq(n, want)                                                               \
    do {                                                                                           \
        if (hook_live())                                                                           \
            ck_assert_uint_eq(n, want);                                                            \
    } while (0)

#ifndef NO_HOOK
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);

void *malloc(size_t n)
{
    if (counting && n >= BIG)
        big_allocs++;
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    if (counting && size != 0 && n >= BIG / size)
        big_allocs++;
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    if (counting && n >= BIG)
        big_allocs++;
    return __libc_realloc(p, n);
}

void free(void *p)
{
    __libc_free(p);
}
#endif

static int hook_live(void)
{
    static int live = -1;
    if (live < 0) {
        unsigned long before = big_allocs;
        counting = 1;
        void *volatile p = malloc(BIG);
        counting = 0;
        free(p);
        /* valgrind's malloc serves some of the calls (libzstd's) even
         * where this one still sees its own program's. */
        const char *pre = getenv("LD_PRELOAD");
        live = big_allocs != before && !(pre && strstr(pre, "vgpreload"));
        big_allocs = before;
        if (!live)
            fputs("test-aw-alloc: malloc is not this program's (a sanitizer or valgrind): "
                  "allocations not counted\n",
                  stderr);
    }
    return live;
}

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cuptimon-awalloc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Record-like bytes that compress as CUPTI buffers do: 216-byte records
 * whose fields step a little from one record to the next. */
static uint8_t *records(size_t len)
{
    uint8_t *b = malloc(len);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i + 8 <= len; i += 8) {
        uint64_t rec = i / 216, field = (i % 216) / 8;
        uint64_t v = field * 0x1000 + rec * (field + 1) + (rec * 2654435761u >> 20) % 7;
        memcpy(b + i, &v, 8);
    }
    return b;
}

static void write_chunk(struct cuptimon_archive_writer *w, uint64_t index, const uint8_t *data,
                        size_t len)
{
    struct cuptimon_chunk_hdr h = {.index = index, .raw_size = len, .records = len / 216};
    ck_assert_int_eq(cuptimon__aw_chunk(w, &h, data), 0);
    ck_assert_uint_eq(h.codec, CUPTIMON_CODEC_ZSTD); /* the buffer was there */
}

/* One session whose buffers each come out one record longer than the last,
 * as a shim's do when CUPTI fills them a little further each time: the
 * writer sizes its buffer once.  Today's main made one realloc per chunk
 * (64 here). */
START_TEST(growing_chunks_allocate_once)
{
    enum {
        N = 64
    };
    size_t base = (size_t)1 << 20, top = base + N * 216;
    uint8_t *data = records(top);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/s1", tmpdir);
    struct cuptimon_archive_writer *w = NULL;
    ck_assert_int_eq(cuptimon__aw_open(dir, "{\"pid\":1}", 64u << 20, 1, &w, NULL), 0);
    big_allocs = 0;
    counting = 1;
    for (unsigned i = 0; i < N; i++)
        write_chunk(w, i, data, base + (size_t)i * 216);
    counting = 0;
    /* The output buffer once, and zstd's context and tables. */
    ck_assert_allocs_le(big_allocs, 3);
    cuptimon__aw_close(w);
    free(data);
}
END_TEST

/* Sessions coming and going, served by one worker that lends every one
 * the same scratch: the allocations do not grow with the sessions.  (On
 * today's main each session's writer made its own context and buffer, and
 * grew the buffer as above.) */
START_TEST(lent_scratch_serves_every_session)
{
    enum {
        SESSIONS = 16,
        CHUNKS = 8
    };
    size_t top = CUPTIMON_AW_SCRATCH_MIN_RAW;
    uint8_t *data = records(top + 216 * SESSIONS);
    struct cuptimon_aw_scratch *sc = cuptimon__aw_scratch_new();
    ck_assert_ptr_nonnull(sc);
    big_allocs = 0;
    for (unsigned s = 0; s < SESSIONS; s++) {
        char dir[300];
        snprintf(dir, sizeof dir, "%s/s%u", tmpdir, s);
        struct cuptimon_archive_writer *w = NULL;
        ck_assert_int_eq(cuptimon__aw_open(dir, "{\"pid\":1}", 64u << 20, 1, &w, NULL), 0);
        cuptimon__aw_lend(w, sc);
        counting = 1;
        for (unsigned i = 0; i < CHUNKS; i++) /* 256 KiB up to the whole 4 MiB */
            write_chunk(w, i, data, top - (size_t)(CHUNKS - 1 - i) * (top / CHUNKS) + 216 * s);
        counting = 0;
        cuptimon__aw_lend(w, NULL);
        cuptimon__aw_close(w);
    }
    /* Every chunk up to CUPTIMON_AW_SCRATCH_MIN_RAW is served by the first
     * sizing, so 16 sessions cost what one does: the buffer, the context
     * and its tables.  (The last chunk of each session is 216 * s bytes
     * over 4 MiB: one power-of-two grow, once, is allowed.) */
    ck_assert_allocs_le(big_allocs, 4);
    /* A trim below what it holds gives the buffer back, and the next chunk
     * sizes it again, once. */
    cuptimon__aw_scratch_trim(sc, (size_t)1 << 20);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/again", tmpdir);
    struct cuptimon_archive_writer *w = NULL;
    ck_assert_int_eq(cuptimon__aw_open(dir, "{\"pid\":1}", 64u << 20, 1, &w, NULL), 0);
    cuptimon__aw_lend(w, sc);
    big_allocs = 0;
    counting = 1;
    write_chunk(w, 0, data, top / 2);
    write_chunk(w, 1, data, top / 2 + 216);
    counting = 0;
    ck_assert_allocs_eq(big_allocs, 1);
    cuptimon__aw_close(w);
    cuptimon__aw_scratch_free(sc);
    free(data);
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("aw-alloc");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, growing_chunks_allocate_once);
    tcase_add_test(tc, lent_scratch_serves_every_session);
    suite_add_tcase(s, tc);
    return s;
}
