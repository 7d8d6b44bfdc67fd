/* Parallel gzip writer: see pgzip.h. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "archive.h"
#include "pgzip.h"

#define PGZ_BLOCK   (1u << 20) /* input bytes a thread deflates */
#define PGZ_DICT    32768u     /* deflate's window: what a block may refer back to */
#define PGZ_THREADS 64

struct pgz_job {
    unsigned char *in;
    size_t in_len;
    unsigned char dict[PGZ_DICT];
    size_t dict_len;
    unsigned char *out;
    size_t out_len;
    int level, last, rc;
    uint32_t crc;
    pthread_t th;
    int threaded; /* th is to be joined */
};

struct cuptimon_pgz {
    int fd, level, threads;
    struct pgz_job *jobs; /* a ring: head is the oldest in flight */
    size_t head, n;
    unsigned char *cur; /* the block being filled */
    size_t cur_len;
    unsigned char dict[PGZ_DICT]; /* the last PGZ_DICT bytes before cur */
    size_t dict_len;
    uint32_t crc;
    uint64_t total;
    int err, finished;
};

int cuptimon__pgz_threads_default(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 4 ? 4 : (int)n;
}

/* Deflates one block: raw deflate (no header), the dictionary first, ended
 * with a sync flush (byte-aligned, not final) or, for the last, finished. */
static void deflate_job(struct pgz_job *j)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    j->rc = -EIO;
    j->crc = (uint32_t)crc32(0, j->in, (uInt)j->in_len);
    if (deflateInit2(&z, j->level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return;
    if (j->dict_len && deflateSetDictionary(&z, j->dict, (uInt)j->dict_len) != Z_OK)
        goto out;
    size_t cap = deflateBound(&z, (uLong)j->in_len) + 64;
    if ((j->out = malloc(cap)) == NULL) {
        j->rc = -ENOMEM;
        goto out;
    }
    z.next_in = j->in;
    z.avail_in = (uInt)j->in_len;
    z.next_out = j->out;
    z.avail_out = (uInt)cap;
    for (;;) {
        int zr = deflate(&z, j->last ? Z_FINISH : Z_SYNC_FLUSH);
        if (zr == Z_STREAM_ERROR)
            goto out;
        if (j->last ? zr == Z_STREAM_END : z.avail_in == 0 && z.avail_out > 0)
            break;
        if (z.avail_out == 0) { /* past the bound: grow */
            size_t used = cap - z.avail_out;
            unsigned char *o = realloc(j->out, cap * 2);
            if (o == NULL) {
                j->rc = -ENOMEM;
                goto out;
            }
            j->out = o;
            z.next_out = o + used;
            z.avail_out = (uInt)(cap * 2 - used);
            cap *= 2;
        } else if (zr != Z_OK && zr != Z_BUF_ERROR) {
            goto out;
        }
    }
    j->out_len = cap - z.avail_out;
    j->rc = 0;
out:
    deflateEnd(&z);
}

static void *job_thread(void *arg)
{
    deflate_job(arg);
    return NULL;
}

/* Waits for the oldest block in flight and writes it. */
static int retire(struct cuptimon_pgz *g)
{
    struct pgz_job *j = &g->jobs[g->head];
    if (j->threaded)
        pthread_join(j->th, NULL);
    j->threaded = 0;
    if (j->rc < 0 && g->err == 0)
        g->err = j->rc;
    if (g->err == 0) {
        int rc = cuptimon__write_all(g->fd, j->out, j->out_len);
        if (rc < 0)
            g->err = rc;
        g->crc = (uint32_t)crc32_combine(g->crc, j->crc, (z_off_t)j->in_len);
        g->total += j->in_len;
    }
    free(j->in);
    free(j->out);
    j->in = j->out = NULL;
    g->head = (g->head + 1) % (size_t)g->threads;
    g->n--;
    return g->err;
}

/* Hands the current block to a thread (or deflates it here). */
static int submit(struct cuptimon_pgz *g, int last)
{
    if (g->n == (size_t)g->threads && retire(g) < 0)
        return g->err;
    struct pgz_job *j = &g->jobs[(g->head + g->n) % (size_t)g->threads];
    j->in = g->cur;
    j->in_len = g->cur_len;
    memcpy(j->dict, g->dict, g->dict_len);
    j->dict_len = g->dict_len;
    j->out = NULL;
    j->out_len = 0;
    j->level = g->level;
    j->last = last;
    j->threaded = 0;
    g->n++;
    /* The next block's dictionary: the last 32 KiB of the text so far. */
    if (g->cur_len >= PGZ_DICT) {
        memcpy(g->dict, g->cur + g->cur_len - PGZ_DICT, PGZ_DICT);
        g->dict_len = PGZ_DICT;
    } else if (g->cur_len > 0) { /* (the last block may be empty, cur NULL) */
        size_t keep = g->dict_len + g->cur_len > PGZ_DICT ? PGZ_DICT - g->cur_len : g->dict_len;
        memmove(g->dict, g->dict + g->dict_len - keep, keep);
        memcpy(g->dict + keep, g->cur, g->cur_len);
        g->dict_len = keep + g->cur_len;
    }
    g->cur = NULL;
    g->cur_len = 0;
    if (g->threads > 1 && pthread_create(&j->th, NULL, job_thread, j) == 0)
        j->threaded = 1;
    else
        deflate_job(j); /* one thread, or none could be started */
    if (g->threads == 1)
        return retire(g);
    return g->err;
}

int cuptimon__pgz_open(int fd, int level, int threads, struct cuptimon_pgz **out)
{
    /* deflate, no name or time, XFL as zlib writes it (4: fastest, 2:
     * best), OS Unix */
    unsigned char hdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    struct cuptimon_pgz *g;
    *out = NULL;
    if (threads == 0)
        threads = cuptimon__pgz_threads_default();
    if (threads < 1)
        threads = 1;
    if (threads > PGZ_THREADS)
        threads = PGZ_THREADS;
    if ((g = calloc(1, sizeof *g)) == NULL ||
        (g->jobs = calloc((size_t)threads, sizeof *g->jobs)) == NULL) {
        free(g);
        return -ENOMEM;
    }
    g->fd = fd;
    g->level = level < 1 ? 1 : level > 9 ? 9 : level;
    g->threads = threads;
    g->crc = (uint32_t)crc32(0, NULL, 0);
    hdr[8] = g->level == 9 ? 2 : g->level == 1 ? 4 : 0;
    int rc = cuptimon__write_all(fd, hdr, sizeof hdr);
    if (rc < 0) {
        cuptimon__pgz_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

int cuptimon__pgz_write(struct cuptimon_pgz *g, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    if (g->err || g->finished)
        return g->err ? g->err : -EINVAL;
    while (len > 0) {
        /* A full block goes once more text follows it: the last block is
         * the one cuptimon__pgz_finish finds. */
        if (g->cur_len == PGZ_BLOCK && submit(g, 0) < 0)
            return g->err;
        if (g->cur == NULL && (g->cur = malloc(PGZ_BLOCK)) == NULL)
            return g->err = -ENOMEM;
        size_t n = PGZ_BLOCK - g->cur_len < len ? PGZ_BLOCK - g->cur_len : len;
        memcpy(g->cur + g->cur_len, p, n);
        g->cur_len += n;
        p += n;
        len -= n;
    }
    return 0;
}

int cuptimon__pgz_finish(struct cuptimon_pgz *g)
{
    unsigned char tr[8];
    if (g->finished)
        return g->err;
    g->finished = 1;
    if (g->err == 0)
        submit(g, 1); /* cur may be NULL and empty: an empty final block */
    while (g->n > 0)
        retire(g);
    if (g->err)
        return g->err;
    for (int i = 0; i < 4; i++) {
        tr[i] = (unsigned char)(g->crc >> (8 * i));
        tr[4 + i] = (unsigned char)(g->total >> (8 * i)); /* ISIZE: the length mod 2^32 */
    }
    return g->err = cuptimon__write_all(g->fd, tr, sizeof tr);
}

void cuptimon__pgz_free(struct cuptimon_pgz *g)
{
    if (g == NULL)
        return;
    while (g->n > 0) {
        g->err = g->err ? g->err : -ECANCELED; /* nothing more is written */
        retire(g);
    }
    free(g->cur);
    free(g->jobs);
    free(g);
}
