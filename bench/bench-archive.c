/*
 * bench-archive: the always-on archive's write and read paths on the real
 * H200 buffers (tests/data/cupti-13.0-h200), per zstd level, side by side
 * in one run: MB/s of CUPTI bytes per core for writing (compress + CRC +
 * write) and reading (read + CRC + decompress), and the compression ratio.
 *
 * usage: bench-archive [--dir DIR] [--seconds S] [--levels 0,1,3]
 * DIR should be on tmpfs (default /dev/shm) so that the disk is not what is
 * measured.  Prints one JSON object per level and phase.
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

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint8_t *load(const char *name, size_t *len)
{
    char path[600];
    snprintf(path, sizeof path, "%s/cupti-13.0-h200/%s", TEST_DATA_DIR, name);
    uint8_t *out = bench_load_zst("bench-archive", path, len);
    if (!out)
        exit(1);
    return out;
}

int main(int argc, char **argv)
{
    static const char *const files[] = {"phase0-buf0.bin.zst", "phase0-buf1.bin.zst",
                                        "phase0-buf2.bin.zst", "phase0-buf3.bin.zst",
                                        "phase1-buf4.bin.zst", "phase1-buf5.bin.zst"};
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
    uint8_t *buf[6];
    size_t len[6];
    for (int i = 0; i < 6; i++)
        buf[i] = load(files[i], &len[i]);

    for (char *sv = NULL, *t = strtok_r(levels, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
        int level = atoi(t);
        /* The two mixes separately: kernel/memcpy/memset only (phase 0),
         * and with runtime/driver API records (phase 1). */
        for (int mix = 0; mix < 2; mix++) {
            int lo = mix ? 4 : 0, hi = mix ? 6 : 4;
            char dir[600];
            snprintf(dir, sizeof dir, "%s/cuptimon-bench-%d-%d-%d", base, (int)getpid(), level,
                     mix);
            struct cuptimon_archive_writer *w;
            char *err = NULL;
            if (cuptimon__aw_open(dir, "{}", 1ull << 40, level, &w, &err) < 0) {
                fprintf(stderr, "bench-archive: %s\n", err ? err : "cannot open");
                return 1;
            }
            uint64_t raw = 0, chunks = 0;
            double c0 = cpu_now();
            while (cpu_now() - c0 < seconds) {
                for (int i = lo; i < hi; i++) {
                    struct cuptimon_chunk_hdr h = {.index = chunks++, .raw_size = len[i]};
                    if (cuptimon__aw_chunk(w, &h, buf[i]) < 0) {
                        fprintf(stderr, "bench-archive: write failed (is %s full?)\n", dir);
                        return 1;
                    }
                    raw += len[i];
                }
            }
            double wcpu = cpu_now() - c0;
            uint64_t stored = cuptimon__aw_bytes(w);
            cuptimon__aw_close(w);

            struct cuptimon_archive_reader *r;
            if (cuptimon__archive_open(dir, &r, &err) < 0) {
                fprintf(stderr, "bench-archive: %s\n", err ? err : "cannot read back");
                return 1;
            }
            struct cuptimon_archive_chunk c;
            uint64_t rraw = 0, rchunks = 0;
            c0 = cpu_now();
            while (cuptimon__archive_next(r, &c) == 1) {
                rraw += c.hdr.raw_size;
                rchunks++;
            }
            double rcpu = cpu_now() - c0;
            const struct cuptimon_archive_stats *st = cuptimon__archive_stats(r);
            int ok = rchunks == chunks && st->corrupt_chunks == 0;
            cuptimon__archive_close(r);
            char cmd[700];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
            if (system(cmd) != 0)
                fprintf(stderr, "bench-archive: could not remove %s\n", dir);
            printf("{\"bench\":\"archive\",\"level\":%d,\"mix\":\"%s\",\"chunks\":%llu,"
                   "\"raw_mb\":%.1f,\"ratio\":%.2f,\"write_mb_s_per_core\":%.0f,"
                   "\"read_mb_s_per_core\":%.0f,\"read_back_ok\":%s}\n",
                   level, mix ? "kernel+memcpy+memset+runtime+driver" : "kernel+memcpy+memset",
                   (unsigned long long)chunks, (double)raw / 1e6, (double)raw / (double)stored,
                   (double)raw / 1e6 / wcpu, (double)rraw / 1e6 / rcpu, ok ? "true" : "false");
            if (!ok)
                return 1;
        }
    }
    for (int i = 0; i < 6; i++)
        free(buf[i]);
    return 0;
}
