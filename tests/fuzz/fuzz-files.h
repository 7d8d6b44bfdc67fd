/*
 * What the fuzz targets that read files (fuzz-archive, fuzz-gpm) share: a
 * check that aborts with the condition, a scratch directory of the
 * process's own (removed at exit), and writing one of its files from two
 * pieces.  Included once per target.
 */
#ifndef CUPTIMON_FUZZ_FILES_H
#define CUPTIMON_FUZZ_FILES_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s: check failed: %s\n", __FILE__, #c);                               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static char dir[64];

/* Removes the scratch directory's files (the targets write no folders) and
 * the directory. */
static void remove_dir(void)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.')
                unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
    }
    rmdir(dir);
}

/* make_dir NAME: creates the scratch directory once, /tmp/NAME-XXXXXX. */
static void make_dir(const char *name)
{
    if (dir[0])
        return;
    snprintf(dir, sizeof dir, "/tmp/%s-XXXXXX", name);
    CHECK(mkdtemp(dir) != NULL);
    atexit(remove_dir);
}

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
