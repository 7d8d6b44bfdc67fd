/*
 * What the fuzz targets that read files (fuzz-archive, fuzz-gpm) share: a
 * check that aborts with the condition, and writing one file of the
 * target's scratch directory (dir, which the target creates) from two
 * pieces.  Included once per target.
 */
#ifndef CUPTIMON_FUZZ_FILES_H
#define CUPTIMON_FUZZ_FILES_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s: check failed: %s\n", __FILE__, #c);                               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static char dir[64];

static void write_file(const char *name, const void *a, size_t alen, const void *b, size_t blen)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (alen)
        CHECK(fwrite(a, 1, alen, f) == alen);
    if (blen)
        CHECK(fwrite(b, 1, blen, f) == blen);
    CHECK(fclose(f) == 0);
}

#endif
