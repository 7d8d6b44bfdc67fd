/* The benchmarks' reader of the real CUPTI buffers (tests/data, zstd
 * frames of known size): one for bench-archive, bench-decode and
 * replay-producer.  Header-only: the benchmarks are single-file programs. */
#ifndef CUPTIMON_BENCH_LOAD_ZST_H
#define CUPTIMON_BENCH_LOAD_ZST_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

/* The decompressed bytes of the zstd file at path (malloc'd, *len set), or
 * NULL after a line on stderr naming prog, the file and the problem. */
static inline uint8_t *bench_load_zst(const char *prog, const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open %s: %s\n", prog, path, strerror(errno));
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *z = n > 0 ? malloc((size_t)n) : NULL;
    if (!z || fread(z, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "%s: cannot read %s\n", prog, path);
        fclose(f);
        free(z);
        return NULL;
    }
    fclose(f);
    unsigned long long raw = ZSTD_getFrameContentSize(z, (size_t)n);
    if (raw == ZSTD_CONTENTSIZE_ERROR || raw == ZSTD_CONTENTSIZE_UNKNOWN || raw > (256u << 20)) {
        fprintf(stderr, "%s: %s: not a zstd frame with a size\n", prog, path);
        free(z);
        return NULL;
    }
    uint8_t *out = malloc(raw ? raw : 1);
    size_t got = out ? ZSTD_decompress(out, raw, z, (size_t)n) : 0;
    free(z);
    if (!out || ZSTD_isError(got)) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, out ? ZSTD_getErrorName(got) : "out of memory");
        free(out);
        return NULL;
    }
    *len = got;
    return out;
}

#endif
