/* The always-on archive: CRC32C, chunk headers, the writer and the reader.
 * The format is described in archive.h. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zstd.h>

#include <json-c/json.h>

#include "archive.h"
#include "hash.h"
#include "cuptimon-proto.h"
#include "json-get.h"
#include "proto/util.h"
#include "rdelta.h"

/* ---- CRC32C (Castagnoli) -------------------------------------------------
 * The SSE4.2 instruction does 8 bytes a cycle; the table is the fallback
 * for CPUs without it. */

static uint32_t crc_table[8][256];
static int crc_hw = -1;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
#else
    crc_hw = 0;
#endif
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw_run(uint32_t crc, const uint8_t *p,
                                                             size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

uint32_t cuptimon__crc32c(uint32_t crc, const void *buf, size_t len)
{
    if (crc_hw < 0)
        crc_init();
    const uint8_t *p = buf;
    crc = ~crc;
#if defined(__x86_64__)
    if (crc_hw)
        return ~crc_hw_run(crc, p, len);
#endif
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= crc;
        crc = crc_table[7][v & 0xff] ^ crc_table[6][(v >> 8) & 0xff] ^
              crc_table[5][(v >> 16) & 0xff] ^ crc_table[4][(v >> 24) & 0xff] ^
              crc_table[3][(v >> 32) & 0xff] ^ crc_table[2][(v >> 40) & 0xff] ^
              crc_table[1][(v >> 48) & 0xff] ^ crc_table[0][v >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

/* ---- chunk header ------------------------------------------------------- */

void cuptimon__chunk_hdr_encode(uint8_t out[CUPTIMON_CHUNK_HDR_SIZE],
                                const struct cuptimon_chunk_hdr *h)
{
    memcpy(out, CUPTIMON_CHUNK_MAGIC, 8);
    cuptimon__put_u32(out + 8, h->codec == CUPTIMON_CODEC_ZSTD_RDELTA
                                   ? CUPTIMON_CHUNK_VERSION_RDELTA
                                   : CUPTIMON_CHUNK_VERSION);
    cuptimon__put_u32(out + 12, CUPTIMON_CHUNK_HDR_SIZE);
    cuptimon__put_u64(out + 16, h->index);
    cuptimon__put_u32(out + 24, h->stream_id);
    cuptimon__put_u32(out + 28, h->codec);
    cuptimon__put_u64(out + 32, h->context);
    cuptimon__put_u64(out + 40, h->cupti_ts);
    cuptimon__put_u64(out + 48, h->unix_ns);
    cuptimon__put_u64(out + 56, h->raw_size);
    cuptimon__put_u64(out + 64, h->stored_size);
    cuptimon__put_u64(out + 72, h->dropped);
    cuptimon__put_u64(out + 80, h->records);
    cuptimon__put_u32(out + 88, h->payload_crc);
    cuptimon__put_u32(out + 92, cuptimon__crc32c(0, out, 92));
}

int cuptimon__chunk_hdr_decode(const uint8_t in[CUPTIMON_CHUNK_HDR_SIZE],
                               struct cuptimon_chunk_hdr *h)
{
    if (memcmp(in, CUPTIMON_CHUNK_MAGIC, 8) != 0)
        return -EBADMSG;
    if (cuptimon__get_u32(in + 92) != cuptimon__crc32c(0, in, 92))
        return -EBADMSG;
    h->version = cuptimon__get_u32(in + 8);
    h->header_size = cuptimon__get_u32(in + 12);
    if (h->version != CUPTIMON_CHUNK_VERSION && h->version != CUPTIMON_CHUNK_VERSION_RDELTA)
        return -EPROTO;
    if (h->header_size != CUPTIMON_CHUNK_HDR_SIZE)
        return -EBADMSG;
    h->index = cuptimon__get_u64(in + 16);
    h->stream_id = cuptimon__get_u32(in + 24);
    h->codec = cuptimon__get_u32(in + 28);
    h->context = cuptimon__get_u64(in + 32);
    h->cupti_ts = cuptimon__get_u64(in + 40);
    h->unix_ns = cuptimon__get_u64(in + 48);
    h->raw_size = cuptimon__get_u64(in + 56);
    h->stored_size = cuptimon__get_u64(in + 64);
    h->dropped = cuptimon__get_u64(in + 72);
    h->records = cuptimon__get_u64(in + 80);
    h->payload_crc = cuptimon__get_u32(in + 88);
    h->header_crc = cuptimon__get_u32(in + 92);
    if (h->raw_size > CUPTIMON_CHUNK_MAX_RAW || h->stored_size > CUPTIMON_CHUNK_MAX_RAW)
        return -EBADMSG;
    if (h->codec == CUPTIMON_CODEC_RAW && h->stored_size != h->raw_size)
        return -EBADMSG;
    if (h->codec != CUPTIMON_CODEC_RAW && h->codec != CUPTIMON_CODEC_ZSTD &&
        h->codec != CUPTIMON_CODEC_ZSTD_RDELTA)
        return -EBADMSG;
    /* The transform came with version 2: a version-1 chunk naming it is
     * damaged. */
    if (h->codec == CUPTIMON_CODEC_ZSTD_RDELTA && h->version != CUPTIMON_CHUNK_VERSION_RDELTA)
        return -EBADMSG;
    return 0;
}

/* ---- writer ------------------------------------------------------------- */

struct cuptimon_aw_scratch {
    ZSTD_CCtx *cctx;
    uint8_t *zbuf;
    size_t zcap;
};

struct cuptimon_archive_writer {
    char dir[512];
    int seg_fd;
    uint32_t seg_index;
    uint64_t seg_bytes, seg_max;
    int str_fd;
    uint32_t cupti_version; /* for the segment headers; 0: not known */
    int level;
    struct cuptimon_aw_scratch own; /* used when none is lent */
    struct cuptimon_aw_scratch *lent;
    uint64_t total;
    /* The per-kind record delta: the walk's sizes (have_sizes: set) and
     * chunks that fell back to plain zstd. */
    uint16_t sizes[CUPTIMON_RDELTA_KINDS];
    int have_sizes;
    uint64_t rdelta_fallbacks;
};

void (*cuptimon__aw_rdelta_test_hook)(uint8_t *buf, size_t n);

/* What compressing needs, sized for a chunk of raw bytes: a zstd context
 * (made once; zstd keeps its tables between chunks) and an output buffer
 * of ZSTD_compressBound of at least CUPTIMON_AW_SCRATCH_MIN_RAW, else of
 * the chunk's size rounded up to a power of two.  A grow frees the old
 * buffer and allocates the new one: nothing in it is worth copying.  So a
 * writer, or a worker lending one scratch to every session it serves,
 * allocates once for any number of chunks up to that size, and at most 6
 * more times up to CUPTIMON_CHUNK_MAX_RAW (issue 49: a realloc whenever a
 * chunk came out a few bytes longer than the last copied 4 MiB each time
 * on a heap that earlier sessions had left fragmented).  Returns 0, or
 * -ENOMEM with the scratch as it was. */
static int scratch_fit(struct cuptimon_aw_scratch *sc, size_t raw)
{
    if (!sc->cctx && !(sc->cctx = ZSTD_createCCtx()))
        return -ENOMEM;
    if (ZSTD_compressBound(raw) <= sc->zcap)
        return 0;
    size_t want = CUPTIMON_AW_SCRATCH_MIN_RAW;
    while (want < raw)
        want *= 2;
    size_t cap = ZSTD_compressBound(want);
    uint8_t *nb = malloc(cap);
    if (!nb)
        return -ENOMEM;
    free(sc->zbuf);
    sc->zbuf = nb;
    sc->zcap = cap;
    return 0;
}

static void scratch_release(struct cuptimon_aw_scratch *sc)
{
    ZSTD_freeCCtx(sc->cctx);
    free(sc->zbuf);
    memset(sc, 0, sizeof *sc);
}

struct cuptimon_aw_scratch *cuptimon__aw_scratch_new(void)
{
    return calloc(1, sizeof(struct cuptimon_aw_scratch));
}

void cuptimon__aw_scratch_trim(struct cuptimon_aw_scratch *sc, size_t keep_raw)
{
    if (sc && sc->zcap > ZSTD_compressBound(keep_raw)) {
        free(sc->zbuf);
        sc->zbuf = NULL;
        sc->zcap = 0;
    }
}

void cuptimon__aw_scratch_free(struct cuptimon_aw_scratch *sc)
{
    if (!sc)
        return;
    scratch_release(sc);
    free(sc);
}

void cuptimon__aw_lend(struct cuptimon_archive_writer *w, struct cuptimon_aw_scratch *sc)
{
    w->lent = sc;
}

int cuptimon__write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int open_segment(struct cuptimon_archive_writer *w)
{
    char path[600];
    snprintf(path, sizeof path, "%s/seg-%06u.cpt", w->dir, w->seg_index);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0)
        return -errno;
    uint8_t h[CUPTIMON_SEG_HDR_SIZE] = {0};
    memcpy(h, CUPTIMON_SEG_MAGIC, 8);
    cuptimon__put_u32(h + 8, CUPTIMON_SEG_VERSION);
    cuptimon__put_u32(h + 12, w->cupti_version);
    int rc = cuptimon__write_all(fd, h, sizeof h);
    if (rc < 0) {
        close(fd);
        unlink(path);
        return rc;
    }
    if (w->seg_fd >= 0)
        close(w->seg_fd);
    w->seg_fd = fd;
    w->seg_bytes = sizeof h;
    w->total += sizeof h;
    return 0;
}

int cuptimon__aw_meta(struct cuptimon_archive_writer *w, const char *meta_json)
{
    char tmp[600], path[600];
    snprintf(tmp, sizeof tmp, "%s/.meta.json.tmp", w->dir);
    snprintf(path, sizeof path, "%s/meta.json", w->dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0)
        return -errno;
    int rc = cuptimon__write_all(fd, meta_json, strlen(meta_json));
    if (rc == 0)
        rc = cuptimon__write_all(fd, "\n", 1);
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc < 0)
        unlink(tmp);
    return rc;
}

/* meta.json's cupti_version, or 0 when it has none in range. */
static uint32_t meta_cupti_version(const char *meta_json)
{
    json_object *o = json_tokener_parse(meta_json);
    int64_t v = cuptimon__json_int_strict(o, "cupti_version", 0);

    json_object_put(o);
    return v > 0 && v <= UINT32_MAX ? (uint32_t)v : 0;
}

/* What a failed aw_open made, taken away again: the files it creates and
 * the directory (one it created), removed only if nothing else is in it.  A
 * session that is refused (out of descriptors, say) and tries again then
 * leaves no empty session behind for decode and retention to find. */
static void remove_partial(const char *dir)
{
    static const char *const names[] = {".meta.json.tmp", "meta.json", "strings.bin",
                                        "seg-000000.cpt"};
    char path[600];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) < (int)sizeof path)
            unlink(path);
    rmdir(dir);
}

int cuptimon__aw_open(const char *dir, const char *meta_json, uint64_t seg_max, int level,
                      struct cuptimon_archive_writer **out, char **err)
{
    struct cuptimon_archive_writer *w = calloc(1, sizeof *w);
    int rc, created = 0;
    if (!w)
        return -ENOMEM;
    w->seg_fd = w->str_fd = -1;
    w->seg_max = seg_max < (1u << 20) ? (1u << 20) : seg_max;
    w->level = level;
    if (snprintf(w->dir, sizeof w->dir, "%s", dir) >= (int)sizeof w->dir) {
        rc = -ENAMETOOLONG;
        goto fail;
    }
    struct stat st;
    created = stat(dir, &st) < 0 && errno == ENOENT;
    if ((rc = cuptimon__mkdir_p(dir, 0750)) < 0)
        goto fail;
    if ((rc = cuptimon__aw_meta(w, meta_json)) < 0)
        goto fail;
    w->cupti_version = meta_cupti_version(meta_json);
    char path[600];
    snprintf(path, sizeof path, "%s/strings.bin", dir);
    w->str_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (w->str_fd < 0) {
        rc = -errno;
        goto fail;
    }
    uint8_t h[CUPTIMON_STR_HDR_SIZE] = {0};
    memcpy(h, CUPTIMON_STR_MAGIC, 8);
    cuptimon__put_u32(h + 8, CUPTIMON_STR_VERSION);
    if ((rc = cuptimon__write_all(w->str_fd, h, sizeof h)) < 0)
        goto fail;
    if ((rc = open_segment(w)) < 0)
        goto fail;
    *out = w;
    return 0;
fail:
    if (err && asprintf(err, "archive: cannot create %s: %s", dir, strerror(-rc)) < 0)
        *err = NULL;
    cuptimon__aw_close(w);
    if (created)
        remove_partial(dir);
    return rc;
}

/* n bytes at src compressed into the scratch's buffer (sized by
 * scratch_fit for the chunk's raw size): their size, or 0 when they cannot
 * be (a zstd error, or a transformed chunk that does not fit in the raw
 * chunk's bound, so that compressing it would not pay). */
static size_t compress_to_zbuf(const struct cuptimon_archive_writer *w,
                               struct cuptimon_aw_scratch *sc, const uint8_t *src, size_t n)
{
    /* The level's parameters, with a window over the whole chunk (up to
     * 8 MiB): the record delta's columns of one field lie a column apart,
     * past level 1's 512 KiB window.  On the H200 buffers' transformed
     * chunks 79x instead of 71x, and zstd no slower (bench-archive,
     * docs/BENCHMARKS.md).  A one-shot frame costs the reader no window
     * buffer; a streaming reader's is at most 8 MiB. */
    unsigned wlog = 10; /* zstd's least window */
    while (wlog < 23 && ((size_t)1 << wlog) < n)
        wlog++;
    size_t z = ZSTD_CCtx_reset(sc->cctx, ZSTD_reset_session_and_parameters);
    if (!ZSTD_isError(z))
        z = ZSTD_CCtx_setParameter(sc->cctx, ZSTD_c_compressionLevel, w->level);
    if (!ZSTD_isError(z))
        z = ZSTD_CCtx_setParameter(sc->cctx, ZSTD_c_windowLog, (int)wlog);
    if (!ZSTD_isError(z))
        z = ZSTD_compress2(sc->cctx, sc->zbuf, sc->zcap, src, n);
    return ZSTD_isError(z) ? 0 : z;
}

void cuptimon__aw_set_record_sizes(struct cuptimon_archive_writer *w, const uint16_t *sizes)
{
    w->have_sizes = sizes != NULL;
    if (sizes)
        memcpy(w->sizes, sizes, sizeof w->sizes);
}

uint64_t cuptimon__aw_rdelta_fallbacks(const struct cuptimon_archive_writer *w)
{
    return w->rdelta_fallbacks;
}

/* The transformed records of the chunk being written: one buffer per
 * thread, not per writer, since the daemon's workers write many sessions'
 * chunks in turn and a buffer per session would cost a slot's size per
 * session.  Sized in powers of two (chunks a few bytes larger than the last
 * cost no new buffer), mapped rather than allocated so that a thread that
 * ends (libuv's workers at exit) leaves no heap block behind, and dropped
 * after a chunk larger than an ordinary slot (a producer with huge slots
 * must not leave each worker holding one). */
#define TSCRATCH_KEEP ((size_t)16 << 20)
static _Thread_local struct {
    uint8_t *p;
    size_t cap;
} tscratch;

static void tscratch_drop(void)
{
    if (tscratch.p)
        munmap(tscratch.p, tscratch.cap);
    tscratch.p = NULL;
    tscratch.cap = 0;
}

static uint8_t *tscratch_get(size_t need)
{
    if (need <= tscratch.cap)
        return tscratch.p;
    size_t cap = 1u << 20;
    while (cap < need)
        cap *= 2;
    void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    tscratch_drop();
    tscratch.p = p;
    tscratch.cap = cap;
    return tscratch.p;
}

/* The chunk's records through the per-kind record delta and zstd into
 * the scratch's buffer: the compressed size, or 0 when the chunk is to be written as
 * plain zstd (the transform walked no record, memory is short, or it was
 * not undone exactly: counted). */
static size_t compress_rdelta(struct cuptimon_archive_writer *w, struct cuptimon_aw_scratch *sc,
                              const uint8_t *data, size_t raw)
{
    /* Only a chunk that is mostly records: a pool of holes (a hostile
     * producer announcing sparse 32 MiB buffers again and again) or a
     * layout the walk does not know would pay a copy of the whole chunk
     * into fresh pages and a verify pass for nothing (tests/fault/fair-users
     * saw the honest producer beside sixteen of them drop 40 % of its
     * records).  The encoder measures the extent first (one read of each
     * record's kind) and writes nothing when it is short: the scratch is
     * then mapped but never touched. */
    uint8_t *t = tscratch_get(CUPTIMON_RDELTA_BOUND(raw));
    if (t == NULL)
        return 0;
    size_t walked, n = cuptimon__rdelta_encode(w->sizes, data, raw, raw / 2, t, &walked);
    size_t z = 0;
    if (n > 0 && walked > 0) {
        if (cuptimon__aw_rdelta_test_hook)
            cuptimon__aw_rdelta_test_hook(t, n);
        z = compress_to_zbuf(w, sc, t, n);
    }
    if (z == 0 || z >= raw) {
        if (tscratch.cap > TSCRATCH_KEEP)
            tscratch_drop();
        return 0;
    }
    /* Never write a chunk that would not read back: the bytes that were
     * compressed are undone by the reader's own inverse, each record
     * compared with the one it must give, before anything is written.
     * One pass, a fraction of what zstd costs (0.12 ns/byte against 0.40
     * for zstd -1 on the transformed H200 buffers). */
    int bad = cuptimon__rdelta_verify(t, n, data, raw) < 0;
    if (tscratch.cap > TSCRATCH_KEEP)
        tscratch_drop();
    if (bad) {
        w->rdelta_fallbacks++;
        return 0;
    }
    return z;
}

int cuptimon__aw_chunk(struct cuptimon_archive_writer *w, struct cuptimon_chunk_hdr *h,
                       const uint8_t *data)
{
    const uint8_t *payload = data;
    h->codec = CUPTIMON_CODEC_RAW;
    h->stored_size = h->raw_size;
    struct cuptimon_aw_scratch *sc = w->lent ? w->lent : &w->own;
    /* Without memory for it, the chunk is stored raw. */
    if (w->level > 0 && h->raw_size > 0 && scratch_fit(sc, h->raw_size) == 0) {
        size_t z = w->have_sizes ? compress_rdelta(w, sc, data, h->raw_size) : 0;
        if (z > 0) {
            payload = sc->zbuf;
            h->codec = CUPTIMON_CODEC_ZSTD_RDELTA;
            h->stored_size = z;
        } else if ((z = compress_to_zbuf(w, sc, data, h->raw_size)) > 0 && z < h->raw_size) {
            /* Store raw when compression does not pay. */
            payload = sc->zbuf;
            h->codec = CUPTIMON_CODEC_ZSTD;
            h->stored_size = z;
        }
    }
    /* The CRC covers the bytes as they go to disk.  The payload is read
     * from the producer's shared memory once, by the compressor or here;
     * a producer that scribbles on it meanwhile only spoils its own chunk,
     * which the CRC then rejects on reading. */
    h->payload_crc = cuptimon__crc32c(0, payload, h->stored_size);
    if (w->seg_bytes > CUPTIMON_SEG_HDR_SIZE &&
        w->seg_bytes + CUPTIMON_CHUNK_HDR_SIZE + h->stored_size > w->seg_max) {
        w->seg_index++;
        int rc = open_segment(w);
        if (rc < 0) {
            w->seg_index--;
            return rc;
        }
    }
    uint8_t hdr[CUPTIMON_CHUNK_HDR_SIZE];
    cuptimon__chunk_hdr_encode(hdr, h);
    struct iovec iov[2] = {{hdr, sizeof hdr}, {(void *)payload, h->stored_size}};
    size_t want = sizeof hdr + h->stored_size, done = 0;
    while (done < want) {
        ssize_t n;
        if (done < sizeof hdr) {
            struct iovec v[2] = {{hdr + done, sizeof hdr - done}, iov[1]};
            n = writev(w->seg_fd, v, 2);
        } else {
            n = write(w->seg_fd, payload + (done - sizeof hdr), want - done);
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int rc = n < 0 ? -errno : -EIO;
            /* Cut the partial chunk off so that the segment ends cleanly. */
            if (ftruncate(w->seg_fd, (off_t)w->seg_bytes) == 0)
                lseek(w->seg_fd, (off_t)w->seg_bytes, SEEK_SET);
            return rc;
        }
        done += (size_t)n;
    }
    w->seg_bytes += want;
    w->total += want;
    return 0;
}

int cuptimon__aw_strings(struct cuptimon_archive_writer *w, const uint8_t *body, size_t len)
{
    struct cuptimon_strings_iter it;
    int rc = cuptimon__strings_iter_init(&it, body, len);
    if (rc < 0)
        return rc;
    struct cuptimon_buf out = {0};
    uint64_t ptr;
    const char *s;
    size_t n;
    while ((rc = cuptimon__strings_next(&it, &ptr, &s, &n)) == 1) {
        uint8_t e[CUPTIMON_STR_ENTRY_HDR];
        cuptimon__put_u64(e, ptr);
        cuptimon__put_u32(e + 8, (uint32_t)n);
        uint32_t crc = cuptimon__crc32c(0, e, 12);
        crc = cuptimon__crc32c(crc, s, n);
        cuptimon__put_u32(e + 12, crc);
        if (cuptimon__buf_append(&out, e, sizeof e) < 0 || cuptimon__buf_append(&out, s, n) < 0) {
            rc = -ENOMEM;
            break;
        }
    }
    if (rc == 0) {
        off_t at = lseek(w->str_fd, 0, SEEK_END);
        rc = cuptimon__write_all(w->str_fd, out.data, out.len);
        if (rc < 0 && at >= 0 && ftruncate(w->str_fd, at) == 0)
            lseek(w->str_fd, at, SEEK_SET);
        else if (rc == 0)
            w->total += out.len;
    }
    cuptimon__buf_free(&out);
    return rc;
}

uint64_t cuptimon__aw_bytes(const struct cuptimon_archive_writer *w)
{
    return w->total;
}

void cuptimon__aw_close(struct cuptimon_archive_writer *w)
{
    if (!w)
        return;
    if (w->seg_fd >= 0)
        close(w->seg_fd);
    if (w->str_fd >= 0)
        close(w->str_fd);
    scratch_release(&w->own);
    free(w);
}

/* ---- reader ------------------------------------------------------------- */

/* Chunks seen, for recognising one read before (a segment copied beside
 * itself): open addressing over a hash of what identifies a chunk. */
struct seen_key {
    uint64_t index, cupti_ts, stored_size;
    uint32_t payload_crc, used;
};

struct seen_set {
    struct seen_key *v;
    size_t cap, n; /* cap: a power of two, or 0 */
};

struct cuptimon_archive_reader {
    char dir[512];
    char *meta;
    char *meta_why;             /* what is wrong with meta.json, to report; NULL: nothing */
    uint32_t seg_cupti_version; /* the segments' CUPTI version, when meta.json is unusable */
    char **segs;
    size_t nsegs, seg;
    int fd;             /* the current segment, or -1 */
    uint64_t size, off; /* its size by fstat() when opened, and where reading is */
    char cur_path[600];
    uint8_t *in; /* a chunk's payload as stored */
    size_t in_cap;
    uint8_t *out; /* ... and decompressed */
    size_t out_cap;
    uint8_t *win; /* the resynchronisation window */
    ZSTD_DCtx *dctx;
    struct seen_set seen;
    cuptimon_archive_report_fn report;
    void *report_ud;
    unsigned reported;    /* bit per enum cuptimon_archive_damage already reported */
    uint64_t skip_before; /* cuptimon__archive_skip_before()'s bound, 0: none */
    struct cuptimon_archive_stats st;
};

/* Reports the first damage of each kind; later ones are only counted. */
__attribute__((format(printf, 5, 6))) static void damage(struct cuptimon_archive_reader *r,
                                                         enum cuptimon_archive_damage kind,
                                                         const char *path, uint64_t offset,
                                                         const char *fmt, ...)
{
    char what[512];
    va_list ap;

    if (r->report == NULL || (r->reported & (1u << kind)))
        return;
    r->reported |= 1u << kind;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    r->report(r->report_ud, kind, path, offset, what);
}

static const char *file_type(mode_t m)
{
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISSOCK(m))
        return "a socket";
    return "of an unknown type";
}

/*
 * Opens path for reading only if it is a regular file: O_NOFOLLOW refuses a
 * symbolic link (a loop among them too), O_NONBLOCK keeps a FIFO from
 * blocking the open, and fstat() then refuses anything but a regular file
 * before a byte is read.  Returns the fd with *size set, or -errno with
 * why (when not NULL) describing it: -EINVAL for a file that is not a
 * regular one, -ELOOP for a symbolic link, else the open's error.
 */
static int open_regular(const char *path, uint64_t *size, char *why, size_t whylen)
{
    struct stat sb;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);

    if (fd < 0) {
        int rc = -errno;
        if (why != NULL)
            snprintf(why, whylen, "%s",
                     rc == -ELOOP ? "a symbolic link (not followed)" : strerror(-rc));
        return rc;
    }
    if (fstat(fd, &sb) < 0) {
        int rc = -errno;
        if (why != NULL)
            snprintf(why, whylen, "%s", strerror(-rc));
        close(fd);
        return rc;
    }
    if (!S_ISREG(sb.st_mode)) {
        if (why != NULL)
            snprintf(why, whylen, "%s, not a regular file", file_type(sb.st_mode));
        close(fd);
        return -EINVAL;
    }
    *size = (uint64_t)sb.st_size;
    return fd;
}

/* pread() of up to len bytes at off: the bytes read (fewer at the end of
 * the file, as when it shrank since fstat()), or -errno. */
static ssize_t pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;

    while (got < len) {
        ssize_t n = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* Reads a whole regular file of at most max bytes (NUL-terminated). */
static int read_file(const char *path, size_t max, char **out, size_t *len, char *why,
                     size_t whylen)
{
    uint64_t size;
    int fd = open_regular(path, &size, why, whylen);

    if (fd < 0)
        return fd;
    if (size > max) {
        if (why != NULL)
            snprintf(why, whylen, "%" PRIu64 " bytes, more than the %zu a reader takes", size, max);
        close(fd);
        return -EFBIG;
    }
    char *buf = malloc((size_t)size + 1);
    if (buf == NULL) {
        close(fd);
        return -ENOMEM;
    }
    ssize_t n = pread_full(fd, buf, (size_t)size, 0);
    close(fd);
    if (n < 0) {
        if (why != NULL)
            snprintf(why, whylen, "%s", strerror((int)-n));
        free(buf);
        return (int)n;
    }
    buf[n] = '\0';
    *out = buf;
    if (len)
        *len = (size_t)n;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_seg_name(const char *name)
{
    size_t n = strlen(name);
    return n >= 9 && strncmp(name, "seg-", 4) == 0 && strcmp(name + n - 4, ".cpt") == 0;
}

/* meta.json and strings.bin are written whole by the daemon and hold
 * kilobytes; this only bounds what a damaged one costs. */
#define META_MAX ((size_t)64 << 20)

/* The CUPTI version the first intact segment header names, or 0. */
static uint32_t segments_cupti_version(const struct cuptimon_archive_reader *r)
{
    for (size_t i = 0; i < r->nsegs; i++) {
        char path[600];
        uint8_t h[CUPTIMON_SEG_HDR_SIZE];
        uint64_t size;
        snprintf(path, sizeof path, "%s/%s", r->dir, r->segs[i]);
        int fd = open_regular(path, &size, NULL, 0);
        if (fd < 0)
            continue;
        ssize_t n = pread_full(fd, h, sizeof h, 0);
        close(fd);
        if (n == (ssize_t)sizeof h && memcmp(h, CUPTIMON_SEG_MAGIC, 8) == 0 &&
            cuptimon__get_u32(h + 8) == CUPTIMON_SEG_VERSION && cuptimon__get_u32(h + 12) != 0)
            return cuptimon__get_u32(h + 12);
    }
    return 0;
}

int cuptimon__archive_open(const char *dir, struct cuptimon_archive_reader **out, char **err)
{
    struct cuptimon_archive_reader *r = calloc(1, sizeof *r);
    int rc, have_strings = 0;
    char path[600], why[256];
    struct stat sb;

    if (!r)
        return -ENOMEM;
    r->fd = -1;
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    snprintf(path, sizeof path, "%s/meta.json", dir);
    rc = read_file(path, META_MAX, &r->meta, NULL, why, sizeof why);
    if (rc == -ENOMEM) {
        free(r);
        return rc;
    }
    if (rc < 0 && asprintf(&r->meta_why, "%s", rc == -ENOENT ? "missing" : why) < 0)
        r->meta_why = NULL;
    DIR *dh = opendir(dir);
    if (!dh) {
        rc = -errno;
        if (err && asprintf(err, "cannot list %s: %s", dir, strerror(-rc)) < 0)
            *err = NULL;
        cuptimon__archive_close(r);
        return rc;
    }
    size_t cap = 0;
    for (struct dirent *e; (e = readdir(dh));) {
        if (strcmp(e->d_name, "strings.bin") == 0)
            have_strings = 1;
        if (!is_seg_name(e->d_name))
            continue;
        if (r->nsegs == cap) {
            cap = cap ? cap * 2 : 16;
            char **ns = realloc(r->segs, cap * sizeof *ns);
            if (!ns)
                break;
            r->segs = ns;
        }
        if ((r->segs[r->nsegs] = strdup(e->d_name)) != NULL)
            r->nsegs++;
    }
    closedir(dh);
    if (r->meta == NULL && r->nsegs == 0 && !have_strings) {
        rc = lstat(path, &sb) == 0 ? -EINVAL : -ENOENT;
        if (err && asprintf(err, "%s is not a cuptimon archive session: %s: %s", dir, path,
                            r->meta_why ? r->meta_why : "unreadable") < 0)
            *err = NULL;
        cuptimon__archive_close(r);
        return rc;
    }
    if (r->nsegs)
        qsort(r->segs, r->nsegs, sizeof *r->segs, cmp_str);
    if (r->meta == NULL) {
        /* What is known without meta.json: the CUPTI version the segments
         * name, and the pid in the directory's name, which the daemon
         * makes YYYYMMDDTHHMMSSZ-PID-SESSION. */
        const char *base = strrchr(r->dir, '/') ? strrchr(r->dir, '/') + 1 : r->dir;
        unsigned pid = 0;
        unsigned long long sid;
        char z;
        if (sscanf(base, "%*8[0-9]T%*6[0-9]%c-%u-%llu", &z, &pid, &sid) != 3 || z != 'Z')
            pid = 0;
        r->st.meta_damaged = 1;
        r->seg_cupti_version = segments_cupti_version(r);
        if (r->seg_cupti_version != 0 && asprintf(&r->meta, "{\"cupti_version\":%u,\"pid\":%u}\n",
                                                  r->seg_cupti_version, pid) < 0)
            r->meta = NULL;
    }
    r->dctx = ZSTD_createDCtx();
    *out = r;
    return 0;
}

void cuptimon__archive_set_report(struct cuptimon_archive_reader *r, cuptimon_archive_report_fn fn,
                                  void *ud)
{
    char path[600];

    r->report = fn;
    r->report_ud = ud;
    if (r->meta_why == NULL)
        return;
    snprintf(path, sizeof path, "%s/meta.json", r->dir);
    if (r->seg_cupti_version != 0)
        damage(r, CUPTIMON_DAMAGE_META, path, UINT64_MAX,
               "%s: the session's identity is unknown (its pid is taken from the directory's "
               "name); its records are decoded as of CUPTI API version %u, which its "
               "segments name",
               r->meta_why, r->seg_cupti_version);
    else
        damage(r, CUPTIMON_DAMAGE_META, path, UINT64_MAX,
               "%s: the session's identity and CUPTI version are unknown, so its records are "
               "counted but not decoded",
               r->meta_why);
}

static void close_segment(struct cuptimon_archive_reader *r)
{
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    r->size = r->off = 0;
}

void cuptimon__archive_close(struct cuptimon_archive_reader *r)
{
    if (!r)
        return;
    close_segment(r);
    for (size_t i = 0; i < r->nsegs; i++)
        free(r->segs[i]);
    free(r->segs);
    free(r->meta);
    free(r->meta_why);
    free(r->in);
    free(r->out);
    free(r->win);
    free(r->seen.v);
    ZSTD_freeDCtx(r->dctx);
    free(r);
}

const char *cuptimon__archive_meta(const struct cuptimon_archive_reader *r)
{
    return r->meta;
}

void cuptimon__archive_skip_before(struct cuptimon_archive_reader *r, uint64_t unix_ns)
{
    r->skip_before = unix_ns;
}

const struct cuptimon_archive_stats *cuptimon__archive_stats(
    const struct cuptimon_archive_reader *r)
{
    return &r->st;
}

/* Whether an entry of strings.bin starts at off and is whole and intact;
 * *n gets its string length. */
static int string_entry_ok(const uint8_t *p, size_t len, size_t off, uint32_t *n)
{
    if (off + CUPTIMON_STR_ENTRY_HDR > len)
        return 0;
    *n = cuptimon__get_u32(p + off + 8);
    if (*n > CUPTIMON_STRING_MAX_LEN || *n > len - off - CUPTIMON_STR_ENTRY_HDR)
        return 0;
    const uint8_t *s = p + off + CUPTIMON_STR_ENTRY_HDR;
    uint32_t c = cuptimon__crc32c(cuptimon__crc32c(0, p + off, 12), s, *n);
    return c == cuptimon__get_u32(p + off + 12) && memchr(s, '\0', *n) == NULL;
}

int cuptimon__archive_strings(struct cuptimon_archive_reader *r,
                              int (*fn)(void *ud, uint64_t ptr, const char *s, size_t len),
                              void *ud)
{
    char path[600], why[256], *buf;
    size_t len;
    snprintf(path, sizeof path, "%s/strings.bin", r->dir);
    int rc = read_file(path, META_MAX, &buf, &len, why, sizeof why);
    if (rc == -ENOENT)
        return 0;
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0) {
        r->st.bad_files++;
        damage(r, CUPTIMON_DAMAGE_BAD_FILE, path, UINT64_MAX,
               "%s: the session's kernel names are missing", why);
        return 0;
    }
    const uint8_t *p = (const uint8_t *)buf;
    size_t off = CUPTIMON_STR_HDR_SIZE;
    if (len < CUPTIMON_STR_HDR_SIZE || memcmp(p, CUPTIMON_STR_MAGIC, 8) != 0 ||
        cuptimon__get_u32(p + 8) != CUPTIMON_STR_VERSION) {
        /* Entries carry their own CRC: look for them after the header. */
        r->st.corrupt_strings++;
        damage(r, CUPTIMON_DAMAGE_STRINGS, path, 0,
               "a damaged strings file header; entries are looked for by their CRC");
    }
    /*
     * Entries are not self-delimiting: after a damaged one, every later
     * offset is tried as an entry until one whose CRC holds.  Each try
     * costs its claimed length; the budget (a multiple of the file's size)
     * keeps a file crafted to make every try expensive from costing more.
     */
    uint64_t budget = (uint64_t)len * 16 + (1u << 20);
    rc = 0;
    while (off < len && rc == 0) {
        uint32_t n;
        if (string_entry_ok(p, len, off, &n)) {
            char tmp[CUPTIMON_STRING_MAX_LEN + 1];
            memcpy(tmp, p + off + CUPTIMON_STR_ENTRY_HDR, n);
            tmp[n] = '\0';
            r->st.strings++;
            rc = fn(ud, cuptimon__get_u64(p + off), tmp, n);
            off += CUPTIMON_STR_ENTRY_HDR + n;
            continue;
        }
        size_t bad = off;
        int found = 0;
        r->st.corrupt_strings++;
        for (off++; off < len && budget > 0; off++) {
            uint64_t cost = CUPTIMON_STR_ENTRY_HDR;
            if (off + CUPTIMON_STR_ENTRY_HDR <= len &&
                cuptimon__get_u32(p + off + 8) <= CUPTIMON_STRING_MAX_LEN)
                cost += cuptimon__get_u32(p + off + 8);
            budget -= budget < cost ? budget : cost;
            if ((found = string_entry_ok(p, len, off, &n)))
                break;
        }
        if (!found) {
            damage(r, CUPTIMON_DAMAGE_STRINGS, path, bad,
                   "a damaged or torn entry; no intact entry after it (%zu bytes passed over)",
                   len - bad);
            break;
        }
        damage(r, CUPTIMON_DAMAGE_STRINGS, path, bad,
               "a damaged entry; reading goes on at the next intact one, at offset %zu", off);
    }
    free(buf);
    return rc < 0 ? rc : 0;
}

/* ---- segments ---------------------------------------------------------------- */

static size_t seen_slot(const struct seen_set *s, const struct seen_key *k)
{
    uint64_t hash = cuptimon__mix64(
        k->index ^ cuptimon__mix64(k->cupti_ts ^ cuptimon__mix64(k->stored_size ^ k->payload_crc)));
    size_t i = (size_t)hash;

    for (i &= s->cap - 1;; i = (i + 1) & (s->cap - 1)) {
        const struct seen_key *e = &s->v[i];
        if (!e->used || (e->index == k->index && e->cupti_ts == k->cupti_ts &&
                         e->stored_size == k->stored_size && e->payload_crc == k->payload_crc))
            return i;
    }
}

/* 1: the chunk was seen before; 0: first time (now remembered); -ENOMEM.
 * A chunk is its buffer index, completion time, size and payload CRC: the
 * same buffer written twice agrees on all four, two buffers never do. */
static int seen_add(struct seen_set *s, const struct cuptimon_chunk_hdr *h)
{
    struct seen_key k = {h->index, h->cupti_ts, h->stored_size, h->payload_crc, 1};

    if ((s->n + 1) * 2 > s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 256;
        struct seen_key *nv = calloc(ncap, sizeof *nv), *old = s->v;
        if (nv == NULL)
            return -ENOMEM;
        size_t ocap = s->cap;
        s->v = nv;
        s->cap = ncap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i].used)
                s->v[seen_slot(s, &old[i])] = old[i];
        free(old);
    }
    size_t i = seen_slot(s, &k);
    if (s->v[i].used)
        return 1;
    s->v[i] = k;
    s->n++;
    return 0;
}

/* Opens the next segment that is a regular, readable file with room for a
 * header; 1, or 0 when there is none left. */
static int open_next_segment(struct cuptimon_archive_reader *r)
{
    close_segment(r);
    while (r->seg < r->nsegs) {
        char why[256];
        uint8_t h[CUPTIMON_SEG_HDR_SIZE];
        uint64_t size;
        snprintf(r->cur_path, sizeof r->cur_path, "%s/%s", r->dir, r->segs[r->seg++]);
        int fd = open_regular(r->cur_path, &size, why, sizeof why);
        if (fd < 0) {
            r->st.bad_files++;
            damage(r, CUPTIMON_DAMAGE_BAD_FILE, r->cur_path, UINT64_MAX,
                   "%s: its chunks are lost, the next segment is read", why);
            continue;
        }
        r->st.segments++;
        ssize_t n = size < CUPTIMON_SEG_HDR_SIZE ? (ssize_t)size : pread_full(fd, h, sizeof h, 0);
        if (n < 0) {
            close(fd);
            r->st.bad_files++;
            damage(r, CUPTIMON_DAMAGE_BAD_FILE, r->cur_path, 0,
                   "unreadable (%s): its chunks are lost, the next segment is read",
                   strerror((int)-n));
            continue;
        }
        if ((size_t)n < CUPTIMON_SEG_HDR_SIZE) {
            close(fd);
            if (n > 0) {
                r->st.torn_tails++;
                r->st.skipped_bytes += (uint64_t)n;
                damage(r, CUPTIMON_DAMAGE_TORN, r->cur_path, 0,
                       "the segment ends inside its header (%zd bytes): a torn tail", n);
            }
            continue;
        }
        r->fd = fd;
        r->size = size;
        r->off = CUPTIMON_SEG_HDR_SIZE;
        if (memcmp(h, CUPTIMON_SEG_MAGIC, 8) != 0 ||
            cuptimon__get_u32(h + 8) != CUPTIMON_SEG_VERSION) {
            /* Every chunk carries its own magic, version and CRCs, so a
             * damaged file header costs only itself: the chunks after it
             * are read where they check out. */
            r->st.bad_seg_headers++;
            if (memcmp(h, CUPTIMON_SEG_MAGIC, 8) != 0)
                damage(r, CUPTIMON_DAMAGE_SEG_HEADER, r->cur_path, 0,
                       "a damaged segment header (no " CUPTIMON_SEG_MAGIC " magic); its chunks "
                       "are read where their own headers and CRCs check out");
            else
                damage(r, CUPTIMON_DAMAGE_SEG_HEADER, r->cur_path, 0,
                       "a segment header of version %u, which this reader does not know "
                       "(damaged?); its chunks are read where their own headers and CRCs "
                       "check out",
                       cuptimon__get_u32(h + 8));
        }
        return 1;
    }
    return 0;
}

/* The current segment cannot be read further: count what is left of it as
 * passed over. */
static void give_up_segment(struct cuptimon_archive_reader *r)
{
    if (r->size > r->off)
        r->st.skipped_bytes += r->size - r->off;
    r->off = r->size;
}

#define RESYNC_WIN ((size_t)1 << 20)

/* The offset of the next chunk magic at or after from, or the segment's
 * size when there is none.  The file is read through one window; the holes
 * of a sparse file (zeros, which the magic is not) are skipped by
 * SEEK_DATA/SEEK_HOLE without reading them, so a segment claiming many
 * gigabytes that it does not hold costs no time or memory. */
static uint64_t find_magic(struct cuptimon_archive_reader *r, uint64_t from)
{
    uint64_t pos = from;

    if (r->win == NULL && (r->win = malloc(RESYNC_WIN)) == NULL)
        return r->size;
    while (pos + 8 <= r->size) {
        uint64_t end = r->size;
        off_t d = lseek(r->fd, (off_t)pos, SEEK_DATA);
        if (d < 0 && errno == ENXIO)
            return r->size; /* nothing but a hole to the end */
        if (d >= 0 && (uint64_t)d > pos)
            pos = (uint64_t)d;
        if (pos + 8 > r->size)
            return r->size; /* data again only where the file has grown since */
        off_t h = lseek(r->fd, (off_t)pos, SEEK_HOLE);
        if (h >= 0 && (uint64_t)h > pos && (uint64_t)h < end)
            end = (uint64_t)h;
        size_t want = end - pos < RESYNC_WIN ? (size_t)(end - pos) : RESYNC_WIN;
        if (want < 8) {
            pos += want ? want : 1;
            continue;
        }
        ssize_t n = pread_full(r->fd, r->win, want, pos);
        if (n < 8)
            return r->size; /* shrunk, or unreadable: nothing more here */
        const uint8_t *m = memmem(r->win, (size_t)n, CUPTIMON_CHUNK_MAGIC, 8);
        if (m != NULL)
            return pos + (uint64_t)(m - r->win);
        /* The magic may straddle the window's end. */
        pos += (uint64_t)n - 7;
    }
    return r->size;
}

/* After a bad chunk, go to the next chunk magic: chunks are self-delimiting,
 * so one bad chunk costs only itself. */
static void resync(struct cuptimon_archive_reader *r, const char *what)
{
    uint64_t bad = r->off, to = find_magic(r, r->off + 1);

    r->st.corrupt_chunks++;
    r->st.skipped_bytes += to - r->off;
    r->off = to;
    if (to < r->size)
        damage(r, CUPTIMON_DAMAGE_CHUNK, r->cur_path, bad,
               "%s; %" PRIu64 " bytes passed over to the next chunk", what, to - bad);
    else
        damage(r, CUPTIMON_DAMAGE_CHUNK, r->cur_path, bad,
               "%s; no chunk after it in this segment (%" PRIu64 " bytes passed over)", what,
               to - bad);
}

static void torn(struct cuptimon_archive_reader *r, const char *what)
{
    r->st.torn_tails++;
    damage(r, CUPTIMON_DAMAGE_TORN, r->cur_path, r->off,
           "%s: the segment ends inside a chunk (%" PRIu64 " bytes; a crash mid-write, or a "
           "file cut short)",
           what, r->size - r->off);
    give_up_segment(r);
}

static void unreadable(struct cuptimon_archive_reader *r, ssize_t n)
{
    r->st.bad_files++;
    damage(r, CUPTIMON_DAMAGE_BAD_FILE, r->cur_path, r->off,
           "reading the segment failed (%s): the rest of it is lost, the next segment is read",
           strerror((int)-n));
    give_up_segment(r);
}

/* Payloads above this are CRC-checked through the window before being read
 * whole (slots, and so chunks, are 4 MiB or less by default). */
#define CRC_FIRST_ABOVE ((uint64_t)8 << 20)

/* 1 when the len bytes at off have the CRC crc, 0 when not (or the file
 * ends first), -errno when they cannot be read. */
static int crc_streamed(struct cuptimon_archive_reader *r, uint64_t off, uint64_t len, uint32_t crc)
{
    uint32_t c = 0;

    if (r->win == NULL && (r->win = malloc(RESYNC_WIN)) == NULL)
        return -ENOMEM;
    while (len > 0) {
        size_t want = len < RESYNC_WIN ? (size_t)len : RESYNC_WIN;
        ssize_t n = pread_full(r->fd, r->win, want, off);
        if (n < 0)
            return (int)n;
        if ((size_t)n < want)
            return 0;
        c = cuptimon__crc32c(c, r->win, want);
        off += want;
        len -= want;
    }
    return c == crc;
}

/* Remembers the chunk whose header h was read at r->off: 0 the first
 * time; 1 when it was read before (counted, reported, and r->off moved
 * past it); -ENOMEM. */
static int seen_chunk(struct cuptimon_archive_reader *r, const struct cuptimon_chunk_hdr *h)
{
    int dup = seen_add(&r->seen, h);

    if (dup <= 0)
        return dup;
    r->st.duplicate_chunks++;
    damage(r, CUPTIMON_DAMAGE_DUPLICATE, r->cur_path, r->off,
           "chunk %" PRIu64 " was read before (a copied segment?): skipped, not counted twice",
           h->index);
    r->off += CUPTIMON_CHUNK_HDR_SIZE + h->stored_size;
    return 1;
}

static int grow_buf(uint8_t **buf, size_t *cap, uint64_t want)
{
    if (want <= *cap)
        return 0;
    uint8_t *nb = realloc(*buf, (size_t)want);
    if (nb == NULL)
        return -ENOMEM;
    *buf = nb;
    *cap = (size_t)want;
    return 0;
}

/* The reader is past chunk h, which counts as read (decoded or passed
 * over on its header). */
static void chunk_passed(struct cuptimon_archive_reader *r, const struct cuptimon_chunk_hdr *h)
{
    r->off += CUPTIMON_CHUNK_HDR_SIZE + h->stored_size;
    r->st.chunks++;
    r->st.bytes_raw += h->raw_size;
    r->st.bytes_stored += h->stored_size;
}

int cuptimon__archive_next(struct cuptimon_archive_reader *r, struct cuptimon_archive_chunk *c)
{
    for (;;) {
        if (r->fd < 0 || r->off >= r->size) {
            int rc = open_next_segment(r);
            if (rc <= 0)
                return rc;
        }
        uint64_t left = r->size - r->off;
        if (left == 0)
            continue; /* a segment that holds no chunk yet */
        if (left < CUPTIMON_CHUNK_HDR_SIZE) {
            torn(r, "a chunk header is cut short");
            continue;
        }
        uint8_t hb[CUPTIMON_CHUNK_HDR_SIZE];
        ssize_t n = pread_full(r->fd, hb, sizeof hb, r->off);
        if (n < 0) {
            unreadable(r, n);
            continue;
        }
        if ((size_t)n < sizeof hb) {
            torn(r, "the file shrank while it was read");
            continue;
        }
        struct cuptimon_chunk_hdr h;
        int hrc = cuptimon__chunk_hdr_decode(hb, &h);
        if (hrc < 0) {
            resync(r, hrc == -EPROTO ? "a chunk of a version this reader does not know"
                                     : "a damaged chunk header");
            continue;
        }
        if (h.stored_size > left - CUPTIMON_CHUNK_HDR_SIZE) {
            /* The header is intact but its payload was never all written:
             * a crash mid-write.  Skip to the end of this segment. */
            torn(r, "a chunk's payload is cut short");
            continue;
        }
        if (h.unix_ns != 0 && h.unix_ns < r->skip_before) {
            /* Passed over on its header's word: the payload is not read,
             * so damage to it goes unnoticed, as the caller asked. */
            int dup = seen_chunk(r, &h);
            if (dup < 0)
                return dup;
            if (dup)
                continue;
            chunk_passed(r, &h);
            r->st.range_chunks++;
            r->st.range_records += h.records;
            r->st.range_bytes += CUPTIMON_CHUNK_HDR_SIZE + h.stored_size;
            r->st.range_dropped += h.dropped;
            continue;
        }
        /* stored_size is bounded by the format's chunk limit and by what
         * the file holds after the header; a large one must also have its
         * CRC hold before a buffer of that size is taken, so that a forged
         * header over a hole costs a scan, not the memory it claims. */
        if (h.stored_size > CRC_FIRST_ABOVE) {
            int ok =
                crc_streamed(r, r->off + CUPTIMON_CHUNK_HDR_SIZE, h.stored_size, h.payload_crc);
            if (ok == -ENOMEM)
                return ok;
            if (ok < 0) {
                unreadable(r, ok);
                continue;
            }
            if (ok == 0) {
                resync(r, "a chunk whose payload CRC does not match");
                continue;
            }
        }
        if (grow_buf(&r->in, &r->in_cap, h.stored_size) < 0)
            return -ENOMEM;
        n = pread_full(r->fd, r->in, (size_t)h.stored_size, r->off + CUPTIMON_CHUNK_HDR_SIZE);
        if (n < 0) {
            unreadable(r, n);
            continue;
        }
        if ((uint64_t)n < h.stored_size) {
            torn(r, "the file shrank while it was read");
            continue;
        }
        if (cuptimon__crc32c(0, r->in, h.stored_size) != h.payload_crc) {
            resync(r, "a chunk whose payload CRC does not match");
            continue;
        }
        const uint8_t *data = r->in;
        if (h.codec == CUPTIMON_CODEC_ZSTD) {
            /* The writer's frames name their content size: one that is not
             * raw_size is refused before raw_size bytes are taken. */
            if (ZSTD_getFrameContentSize(r->in, h.stored_size) != h.raw_size) {
                r->st.corrupt_chunks++;
                damage(r, CUPTIMON_DAMAGE_CHUNK, r->cur_path, r->off,
                       "a chunk whose compressed payload does not name its size");
                r->off += CUPTIMON_CHUNK_HDR_SIZE + h.stored_size;
                continue;
            }
            if (grow_buf(&r->out, &r->out_cap, h.raw_size) < 0)
                return -ENOMEM;
            size_t z = r->dctx
                           ? ZSTD_decompressDCtx(r->dctx, r->out, h.raw_size, r->in, h.stored_size)
                           : 0;
            if (!r->dctx || ZSTD_isError(z) || z != h.raw_size) {
                r->st.corrupt_chunks++;
                damage(r, CUPTIMON_DAMAGE_CHUNK, r->cur_path, r->off,
                       "a chunk whose compressed payload does not decompress to its size");
                r->off += CUPTIMON_CHUNK_HDR_SIZE + h.stored_size;
                continue;
            }
            data = r->out;
        } else if (h.codec == CUPTIMON_CODEC_ZSTD_RDELTA) {
            /* The frame holds the records' transform: raw_size bytes, a
             * byte per record and the trailer.  A frame that names a size
             * no transform of raw_size bytes has is refused before the
             * buffer is taken. */
            unsigned long long fs = ZSTD_getFrameContentSize(r->in, h.stored_size);
            size_t back = 0;
            if (fs == ZSTD_CONTENTSIZE_ERROR || fs == ZSTD_CONTENTSIZE_UNKNOWN ||
                fs < h.raw_size + 12 || fs > CUPTIMON_RDELTA_BOUND(h.raw_size)) {
                r->st.corrupt_chunks++;
                damage(r, CUPTIMON_DAMAGE_CHUNK, r->cur_path, r->off,
                       "a chunk whose compressed payload does not name its size");
                r->off += CUPTIMON_CHUNK_HDR_SIZE + h.stored_size;
                continue;
            }
            /* Decompressed into out, then undone into in, whose payload is
             * no longer needed: two buffers, as for plain zstd, the one 1/8
             * larger at most. */
            if (grow_buf(&r->out, &r->out_cap, fs) < 0)
                return -ENOMEM;
            size_t z = r->dctx
                           ? ZSTD_decompressDCtx(r->dctx, r->out, (size_t)fs, r->in, h.stored_size)
                           : 0;
            int ok = r->dctx && !ZSTD_isError(z) && z == fs;
            if (ok && grow_buf(&r->in, &r->in_cap, h.raw_size) < 0)
                return -ENOMEM;
            if (!ok || cuptimon__rdelta_decode(r->out, (size_t)fs, r->in, h.raw_size, &back) < 0 ||
                back != h.raw_size) {
                r->st.corrupt_chunks++;
                damage(r, CUPTIMON_DAMAGE_CHUNK, r->cur_path, r->off,
                       "a chunk whose compressed payload does not decompress to its records");
                r->off += CUPTIMON_CHUNK_HDR_SIZE + h.stored_size;
                continue;
            }
            data = r->in;
        }
        int dup = seen_chunk(r, &h);
        if (dup < 0)
            return dup;
        if (dup)
            continue;
        c->hdr = h;
        c->data = data;
        c->segment = r->cur_path;
        c->offset = r->off;
        chunk_passed(r, &h);
        return 1;
    }
}

/* Whether path is a session directory: it holds meta.json (whatever it
 * is), strings.bin or a segment. */
static int is_session_dir(const char *path)
{
    char p[600];
    struct stat sb;

    if (snprintf(p, sizeof p, "%s/meta.json", path) < (int)sizeof p && lstat(p, &sb) == 0)
        return 1;
    DIR *dh = opendir(path);
    if (dh == NULL)
        return 0;
    int yes = 0;
    for (struct dirent *e; !yes && (e = readdir(dh));)
        yes = strcmp(e->d_name, "strings.bin") == 0 || is_seg_name(e->d_name);
    closedir(dh);
    return yes;
}

int cuptimon__archive_find_sessions(const char *root, char ***dirs)
{
    char path[600];
    struct stat sb;
    size_t n = 0, cap = 8;
    char **list = calloc(cap + 1, sizeof *list);
    if (!list)
        return -ENOMEM;
    if (is_session_dir(root)) {
        list[n++] = strdup(root);
        *dirs = list;
        return 0;
    }
    /* An output root holds archive/<session>/; accept the archive dir too. */
    const char *bases[2] = {root, NULL};
    char sub[600];
    snprintf(sub, sizeof sub, "%s/archive", root);
    if (stat(sub, &sb) == 0 && S_ISDIR(sb.st_mode))
        bases[0] = sub;
    DIR *dh = opendir(bases[0]);
    if (!dh) {
        int rc = -errno;
        free(list);
        return rc;
    }
    for (struct dirent *e; (e = readdir(dh));) {
        if (e->d_name[0] == '.')
            continue;
        if (snprintf(path, sizeof path, "%s/%s", bases[0], e->d_name) >= (int)sizeof path ||
            stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) || !is_session_dir(path))
            continue;
        if (n == cap) {
            cap *= 2;
            char **nl = realloc(list, (cap + 1) * sizeof *nl);
            if (!nl)
                break;
            list = nl;
        }
        if ((list[n] = strdup(path)) != NULL)
            n++;
    }
    closedir(dh);
    list[n] = NULL;
    qsort(list, n, sizeof *list, cmp_str);
    *dirs = list;
    return 0;
}

void cuptimon__archive_free_list(char **dirs)
{
    if (!dirs)
        return;
    for (char **p = dirs; *p; p++)
        free(*p);
    free(dirs);
}
