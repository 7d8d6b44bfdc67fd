/*
 * bench-archive: the always-on archive's write and read paths on the real
 * H200 buffers (tests/data/cupti-13.0-h200), per zstd level and per chunk
 * codec, side by side in one run: CPU per byte of CUPTI records (ns/byte,
 * one core) for writing (transform + compress + CRC + write) and reading
 * (read + CRC + decompress + inverse transform), and the compression
 * ratio (raw bytes over the segment's bytes, chunk headers included).
 * The codecs: "zstd" (codec 1, a writer without record sizes, as every
 * chunk before the per-kind record delta) and "zstd+rdelta" (codec 2, the
 * writer given CUDA 13.0's walk sizes, as the daemon gives its producer's).
 *
 * Built a second time as bench-archive-double (-DBENCH_DOUBLE, where the
 * libcupti test double is built): the same on the double's records, made
 * in-process with the H200 capture's pattern (tests/fakecupti/double-bufs.h).
 *
 * usage: bench-archive [--dir DIR] [--seconds S] [--levels 0,1,3]
 * DIR should be on tmpfs (default /dev/shm) so that the disk is not what is
 * measured.  Prints one JSON object per level, mix and codec, and one per
 * level and mix comparing the two.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "load-zst.h"

#include "archive/archive.h"
#include "archive/decode.h"
#ifdef BENCH_DOUBLE
#include "double-bufs.h"
#define SET "double"
#else
#define SET "h200"
#endif

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#ifndef BENCH_DOUBLE
static uint8_t *load(const char *name, size_t *len)
{
    char path[600];
    snprintf(path, sizeof path, "%s/cupti-13.0-h200/%s", TEST_DATA_DIR, name);
    uint8_t *out = bench_load_zst("bench-archive", path, len);
    if (!out)
        exit(1);
    return out;
}
#endif

struct result {
    double ratio, write_ns_b, read_ns_b;
};

/* Writes bufs[0..n) round and round for seconds of CPU into a session at
 * level (with the walk sizes, or none), reads it back and checks it. */
static int run(const char *base, int level, int mix, const char *codec, const uint16_t *sizes,
               uint8_t *const *bufs, const size_t *lens, int n, double seconds, struct result *res)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/cuptimon-bench-%d-%d-%d-%s", base, (int)getpid(), level, mix,
             codec);
    struct cuptimon_archive_writer *w;
    char *err = NULL;
    if (cuptimon__aw_open(dir, "{}", 1ull << 40, level, &w, &err) < 0) {
        fprintf(stderr, "bench-archive: %s\n", err ? err : "cannot open");
        return 1;
    }
    cuptimon__aw_set_record_sizes(w, sizes);
    uint64_t raw = 0, chunks = 0;
    double c0 = cpu_now();
    while (cpu_now() - c0 < seconds) {
        for (int i = 0; i < n; i++) {
            struct cuptimon_chunk_hdr h = {.index = chunks++, .raw_size = lens[i]};
            if (cuptimon__aw_chunk(w, &h, bufs[i]) < 0) {
                fprintf(stderr, "bench-archive: write failed (is %s full?)\n", dir);
                return 1;
            }
            raw += lens[i];
        }
    }
    double wcpu = cpu_now() - c0;
    uint64_t stored = cuptimon__aw_bytes(w), fallbacks = cuptimon__aw_rdelta_fallbacks(w);
    cuptimon__aw_close(w);

    struct cuptimon_archive_reader *r;
    if (cuptimon__archive_open(dir, &r, &err) < 0) {
        fprintf(stderr, "bench-archive: %s\n", err ? err : "cannot read back");
        return 1;
    }
    struct cuptimon_archive_chunk c;
    uint64_t rraw = 0, rchunks = 0, bad = 0;
    c0 = cpu_now();
    while (cuptimon__archive_next(r, &c) == 1) {
        int i = (int)(c.hdr.index % (uint64_t)n);
        bad += c.hdr.raw_size != lens[i] || memcmp(c.data, bufs[i], lens[i]) != 0;
        rraw += c.hdr.raw_size;
        rchunks++;
    }
    double rcpu = cpu_now() - c0;
    const struct cuptimon_archive_stats *st = cuptimon__archive_stats(r);
    int ok = rchunks == chunks && st->corrupt_chunks == 0 && bad == 0 && fallbacks == 0;
    cuptimon__archive_close(r);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench-archive: could not remove %s\n", dir);
    res->ratio = (double)raw / (double)stored;
    res->write_ns_b = wcpu * 1e9 / (double)raw;
    res->read_ns_b = rcpu * 1e9 / (double)rraw;
    printf("{\"bench\":\"archive\",\"set\":\"%s\",\"level\":%d,\"mix\":\"%s\","
           "\"codec\":\"%s\",\"chunks\":%llu,\"raw_mb\":%.1f,\"ratio\":%.2f,"
           "\"write_ns_per_byte\":%.3f,\"write_mb_s_per_core\":%.0f,"
           "\"read_ns_per_byte\":%.3f,\"read_mb_s_per_core\":%.0f,\"read_back_ok\":%s}\n",
           SET, level, mix ? "kernel+memcpy+memset+runtime+driver" : "kernel+memcpy+memset", codec,
           (unsigned long long)chunks, (double)raw / 1e6, res->ratio, res->write_ns_b,
           (double)raw / 1e6 / wcpu, res->read_ns_b, (double)rraw / 1e6 / rcpu,
           ok ? "true" : "false");
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *base = "/dev/shm";
    double seconds = 1.0;
    char levels[64] = "0,1,3";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--dir") == 0)
            base = argv[i + 1];
        else if (strcmp(argv[i], "--seconds") == 0)
            seconds = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--levels") == 0)
            snprintf(levels, sizeof levels, "%s", argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench-archive [--dir DIR] [--seconds S] [--levels 0,1,3]\n");
            return 2;
        }
    }
    /* The two mixes separately: kernel/memcpy/memset only (phase 0), and
     * with runtime/driver API records (phase 1). */
    uint8_t *buf[2][8];
    size_t len[2][8];
    int nbuf[2];
#ifdef BENCH_DOUBLE
    for (int mix = 0; mix < 2; mix++) {
        struct double_buf db[8];
        /* As many launches as the H200's phase 0 (60000 kernels). */
        nbuf[mix] = double_bufs(mix, 60000, 4u << 20, db, 8);
        if (nbuf[mix] <= 0) {
            fprintf(stderr, "bench-archive-double: the test double made no buffers\n");
            return 1;
        }
        for (int i = 0; i < nbuf[mix]; i++) {
            buf[mix][i] = db[i].data;
            len[mix][i] = db[i].len;
        }
    }
#else
    static const char *const files[] = {"phase0-buf0.bin.zst", "phase0-buf1.bin.zst",
                                        "phase0-buf2.bin.zst", "phase0-buf3.bin.zst",
                                        "phase1-buf4.bin.zst", "phase1-buf5.bin.zst"};
    for (int i = 0; i < 6; i++)
        buf[i / 4][i % 4] = load(files[i], &len[i / 4][i % 4]);
    nbuf[0] = 4;
    nbuf[1] = 2;
#endif
    struct cuptimon_layout l;
    if (cuptimon__layout_init(&l, 130001, NULL) != 0) {
        fprintf(stderr, "bench-archive: no CUDA 13.0 layouts\n");
        return 1;
    }

    for (char *sv = NULL, *t = strtok_r(levels, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
        int level = atoi(t);
        for (int mix = 0; mix < 2; mix++) {
            struct result z, d;
            if (run(base, level, mix, "zstd", NULL, buf[mix], len[mix], nbuf[mix], seconds, &z))
                return 1;
            if (level == 0)
                continue; /* stored raw: no codec to compare */
            if (run(base, level, mix, "zstd+rdelta", l.size, buf[mix], len[mix], nbuf[mix], seconds,
                    &d))
                return 1;
            printf("{\"bench\":\"archive-codecs\",\"set\":\"%s\",\"level\":%d,\"mix\":\"%s\","
                   "\"ratio_zstd\":%.2f,\"ratio_rdelta\":%.2f,\"ratio_gain\":%.2f,"
                   "\"write_ns_per_byte_zstd\":%.3f,\"write_ns_per_byte_rdelta\":%.3f,"
                   "\"read_ns_per_byte_zstd\":%.3f,\"read_ns_per_byte_rdelta\":%.3f}\n",
                   SET, level, mix ? "kernel+memcpy+memset+runtime+driver" : "kernel+memcpy+memset",
                   z.ratio, d.ratio, d.ratio / z.ratio, z.write_ns_b, d.write_ns_b, z.read_ns_b,
                   d.read_ns_b);
        }
    }
    for (int mix = 0; mix < 2; mix++)
        for (int i = 0; i < nbuf[mix]; i++)
            free(buf[mix][i]);
    return 0;
}
