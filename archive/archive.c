/* The always-on archive: CRC32C, chunk headers, the writer and the reader.
 * The format is described in archive.h. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zstd.h>

#include "archive.h"
#include "cuptimon-proto.h"
#include "proto/util.h"

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
    cuptimon__put_u32(out + 8, CUPTIMON_CHUNK_VERSION);
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
    if (h->version != CUPTIMON_CHUNK_VERSION)
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
    if (h->codec != CUPTIMON_CODEC_RAW && h->codec != CUPTIMON_CODEC_ZSTD)
        return -EBADMSG;
    return 0;
}

/* ---- writer ------------------------------------------------------------- */

struct cuptimon_archive_writer {
    char dir[512];
    int seg_fd;
    uint32_t seg_index;
    uint64_t seg_bytes, seg_max;
    int str_fd;
    int level;
    ZSTD_CCtx *cctx;
    uint8_t *zbuf;
    size_t zcap;
    uint64_t total;
};

static int write_all(int fd, const void *buf, size_t len)
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
    int rc = write_all(fd, h, sizeof h);
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
    int rc = write_all(fd, meta_json, strlen(meta_json));
    if (rc == 0)
        rc = write_all(fd, "\n", 1);
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc < 0)
        unlink(tmp);
    return rc;
}

int cuptimon__aw_open(const char *dir, const char *meta_json, uint64_t seg_max, int level,
                      struct cuptimon_archive_writer **out, char **err)
{
    struct cuptimon_archive_writer *w = calloc(1, sizeof *w);
    int rc;
    if (!w)
        return -ENOMEM;
    w->seg_fd = w->str_fd = -1;
    w->seg_max = seg_max < (1u << 20) ? (1u << 20) : seg_max;
    w->level = level;
    if (snprintf(w->dir, sizeof w->dir, "%s", dir) >= (int)sizeof w->dir) {
        rc = -ENAMETOOLONG;
        goto fail;
    }
    if ((rc = cuptimon__mkdir_p(dir, 0750)) < 0)
        goto fail;
    if ((rc = cuptimon__aw_meta(w, meta_json)) < 0)
        goto fail;
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
    if ((rc = write_all(w->str_fd, h, sizeof h)) < 0)
        goto fail;
    if ((rc = open_segment(w)) < 0)
        goto fail;
    if (level > 0 && !(w->cctx = ZSTD_createCCtx())) {
        rc = -ENOMEM;
        goto fail;
    }
    *out = w;
    return 0;
fail:
    if (err && asprintf(err, "archive: cannot create %s: %s", dir, strerror(-rc)) < 0)
        *err = NULL;
    cuptimon__aw_close(w);
    return rc;
}

int cuptimon__aw_chunk(struct cuptimon_archive_writer *w, struct cuptimon_chunk_hdr *h,
                       const uint8_t *data)
{
    const uint8_t *payload = data;
    h->codec = CUPTIMON_CODEC_RAW;
    h->stored_size = h->raw_size;
    if (w->cctx && h->raw_size > 0) {
        size_t bound = ZSTD_compressBound(h->raw_size);
        if (bound > w->zcap) {
            uint8_t *nb = realloc(w->zbuf, bound);
            if (nb) {
                w->zbuf = nb;
                w->zcap = bound;
            }
        }
        if (bound <= w->zcap) {
            size_t z = ZSTD_compressCCtx(w->cctx, w->zbuf, w->zcap, data, h->raw_size, w->level);
            /* Store raw when compression does not pay. */
            if (!ZSTD_isError(z) && z < h->raw_size) {
                payload = w->zbuf;
                h->codec = CUPTIMON_CODEC_ZSTD;
                h->stored_size = z;
            }
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
        rc = write_all(w->str_fd, out.data, out.len);
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
    ZSTD_freeCCtx(w->cctx);
    free(w->zbuf);
    free(w);
}

/* ---- reader ------------------------------------------------------------- */

struct cuptimon_archive_reader {
    char dir[512];
    char *meta;
    char **segs;
    size_t nsegs, seg;
    const uint8_t *map;
    size_t map_len, off;
    char cur_path[600];
    uint8_t *out;
    size_t out_cap;
    ZSTD_DCtx *dctx;
    struct cuptimon_archive_stats st;
};

static int read_file(const char *path, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat sb;
    if (fstat(fd, &sb) < 0 || sb.st_size > (64 << 20)) {
        close(fd);
        return -EFBIG;
    }
    char *buf = malloc((size_t)sb.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)sb.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (!buf)
        return -ENOMEM;
    buf[got] = '\0';
    *out = buf;
    if (len)
        *len = got;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int cuptimon__archive_open(const char *dir, struct cuptimon_archive_reader **out, char **err)
{
    struct cuptimon_archive_reader *r = calloc(1, sizeof *r);
    int rc;
    char path[600];
    if (!r)
        return -ENOMEM;
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    snprintf(path, sizeof path, "%s/meta.json", dir);
    if ((rc = read_file(path, &r->meta, NULL)) < 0) {
        if (err && asprintf(err, "%s is not a cuptimon archive session: cannot read %s: %s", dir,
                            path, strerror(-rc)) < 0)
            *err = NULL;
        free(r);
        return rc;
    }
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
        size_t n = strlen(e->d_name);
        if (n < 9 || strncmp(e->d_name, "seg-", 4) != 0 || strcmp(e->d_name + n - 4, ".cpt") != 0)
            continue;
        if (r->nsegs == cap) {
            cap = cap ? cap * 2 : 16;
            char **ns = realloc(r->segs, cap * sizeof *ns);
            if (!ns)
                break;
            r->segs = ns;
        }
        r->segs[r->nsegs++] = strdup(e->d_name);
    }
    closedir(dh);
    if (r->nsegs)
        qsort(r->segs, r->nsegs, sizeof *r->segs, cmp_str);
    r->dctx = ZSTD_createDCtx();
    *out = r;
    return 0;
}

static void unmap(struct cuptimon_archive_reader *r)
{
    if (r->map && r->map_len)
        munmap((void *)r->map, r->map_len);
    r->map = NULL;
    r->map_len = r->off = 0;
}

void cuptimon__archive_close(struct cuptimon_archive_reader *r)
{
    if (!r)
        return;
    unmap(r);
    for (size_t i = 0; i < r->nsegs; i++)
        free(r->segs[i]);
    free(r->segs);
    free(r->meta);
    free(r->out);
    ZSTD_freeDCtx(r->dctx);
    free(r);
}

const char *cuptimon__archive_meta(const struct cuptimon_archive_reader *r)
{
    return r->meta;
}

const struct cuptimon_archive_stats *cuptimon__archive_stats(const struct cuptimon_archive_reader *r)
{
    return &r->st;
}

int cuptimon__archive_strings(struct cuptimon_archive_reader *r,
                              int (*fn)(void *ud, uint64_t ptr, const char *s, size_t len),
                              void *ud)
{
    char path[600], *buf;
    size_t len;
    snprintf(path, sizeof path, "%s/strings.bin", r->dir);
    int rc = read_file(path, &buf, &len);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return rc;
    const uint8_t *p = (const uint8_t *)buf;
    if (len < CUPTIMON_STR_HDR_SIZE || memcmp(p, CUPTIMON_STR_MAGIC, 8) != 0) {
        r->st.corrupt_strings++;
        free(buf);
        return 0;
    }
    size_t off = CUPTIMON_STR_HDR_SIZE;
    while (off + CUPTIMON_STR_ENTRY_HDR <= len) {
        uint64_t ptr = cuptimon__get_u64(p + off);
        uint32_t n = cuptimon__get_u32(p + off + 8);
        uint32_t crc = cuptimon__get_u32(p + off + 12);
        if (n > CUPTIMON_STRING_MAX_LEN || off + CUPTIMON_STR_ENTRY_HDR + n > len) {
            r->st.corrupt_strings++; /* a torn tail */
            break;
        }
        const char *s = (const char *)p + off + CUPTIMON_STR_ENTRY_HDR;
        uint32_t c = cuptimon__crc32c(cuptimon__crc32c(0, p + off, 12), s, n);
        if (c != crc || memchr(s, '\0', n)) {
            /* Entries are not self-synchronising: stop at the first bad one. */
            r->st.corrupt_strings++;
            break;
        }
        char tmp[CUPTIMON_STRING_MAX_LEN + 1];
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        r->st.strings++;
        if ((rc = fn(ud, ptr, tmp, n)) != 0)
            break;
        off += CUPTIMON_STR_ENTRY_HDR + n;
    }
    free(buf);
    return rc < 0 ? rc : 0;
}

static int map_next_segment(struct cuptimon_archive_reader *r)
{
    unmap(r);
    while (r->seg < r->nsegs) {
        snprintf(r->cur_path, sizeof r->cur_path, "%s/%s", r->dir, r->segs[r->seg++]);
        int fd = open(r->cur_path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        struct stat sb;
        if (fstat(fd, &sb) < 0) {
            int rc = -errno;
            close(fd);
            return rc;
        }
        r->st.segments++;
        if (sb.st_size < (off_t)CUPTIMON_SEG_HDR_SIZE) {
            close(fd);
            if (sb.st_size > 0)
                r->st.torn_tails++;
            continue;
        }
        void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (m == MAP_FAILED)
            return -errno;
        madvise(m, (size_t)sb.st_size, MADV_SEQUENTIAL);
        r->map = m;
        r->map_len = (size_t)sb.st_size;
        if (memcmp(r->map, CUPTIMON_SEG_MAGIC, 8) != 0 ||
            cuptimon__get_u32(r->map + 8) != CUPTIMON_SEG_VERSION) {
            r->st.corrupt_chunks++;
            unmap(r);
            continue;
        }
        r->off = CUPTIMON_SEG_HDR_SIZE;
        return 1;
    }
    return 0;
}

/* After a bad chunk, look for the next chunk magic: chunks are
 * self-delimiting, so one bad chunk costs only itself. */
static void resync(struct cuptimon_archive_reader *r, size_t from)
{
    const uint8_t *p = NULL;
    if (from < r->map_len)
        p = memmem(r->map + from, r->map_len - from, CUPTIMON_CHUNK_MAGIC, 8);
    size_t to = p ? (size_t)(p - r->map) : r->map_len;
    r->st.skipped_bytes += to - r->off;
    r->off = to;
}

int cuptimon__archive_next(struct cuptimon_archive_reader *r, struct cuptimon_archive_chunk *c)
{
    for (;;) {
        if (!r->map || r->off >= r->map_len) {
            int rc = map_next_segment(r);
            if (rc <= 0)
                return rc;
        }
        size_t left = r->map_len - r->off;
        if (left == 0)
            continue; /* a segment that holds no chunk yet */
        if (left < CUPTIMON_CHUNK_HDR_SIZE) {
            r->st.torn_tails++;
            r->st.skipped_bytes += left;
            r->off = r->map_len;
            continue;
        }
        const uint8_t *at = r->map + r->off;
        struct cuptimon_chunk_hdr h;
        if (cuptimon__chunk_hdr_decode(at, &h) < 0) {
            r->st.corrupt_chunks++;
            resync(r, r->off + 1);
            continue;
        }
        if (h.stored_size > left - CUPTIMON_CHUNK_HDR_SIZE) {
            /* The header is intact but its payload was never all written:
             * a crash mid-write.  Skip to the end of this segment. */
            r->st.torn_tails++;
            r->st.skipped_bytes += left;
            r->off = r->map_len;
            continue;
        }
        const uint8_t *payload = at + CUPTIMON_CHUNK_HDR_SIZE;
        if (cuptimon__crc32c(0, payload, h.stored_size) != h.payload_crc) {
            r->st.corrupt_chunks++;
            resync(r, r->off + 1);
            continue;
        }
        const uint8_t *data = payload;
        if (h.codec == CUPTIMON_CODEC_ZSTD) {
            if (h.raw_size > r->out_cap) {
                uint8_t *nb = realloc(r->out, h.raw_size);
                if (!nb)
                    return -ENOMEM;
                r->out = nb;
                r->out_cap = h.raw_size;
            }
            size_t z = r->dctx ? ZSTD_decompressDCtx(r->dctx, r->out, h.raw_size, payload,
                                                     h.stored_size)
                               : 0;
            if (!r->dctx || ZSTD_isError(z) || z != h.raw_size) {
                r->st.corrupt_chunks++;
                r->off += CUPTIMON_CHUNK_HDR_SIZE + h.stored_size;
                continue;
            }
            data = r->out;
        }
        c->hdr = h;
        c->data = data;
        c->segment = r->cur_path;
        c->offset = r->off;
        r->off += CUPTIMON_CHUNK_HDR_SIZE + h.stored_size;
        r->st.chunks++;
        r->st.bytes_raw += h.raw_size;
        r->st.bytes_stored += h.stored_size;
        return 1;
    }
}

int cuptimon__archive_find_sessions(const char *root, char ***dirs)
{
    char path[600];
    struct stat sb;
    size_t n = 0, cap = 8;
    char **list = calloc(cap + 1, sizeof *list);
    if (!list)
        return -ENOMEM;
    snprintf(path, sizeof path, "%s/meta.json", root);
    if (stat(path, &sb) == 0) {
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
        if (snprintf(path, sizeof path, "%s/%s/meta.json", bases[0], e->d_name) >=
                (int)sizeof path ||
            stat(path, &sb) != 0)
            continue;
        if (n == cap) {
            cap *= 2;
            char **nl = realloc(list, (cap + 1) * sizeof *nl);
            if (!nl)
                break;
            list = nl;
        }
        if (asprintf(&list[n], "%s/%s", bases[0], e->d_name) >= 0)
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
