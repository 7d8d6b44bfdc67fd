/*
 * A stand-in for libFuzzer's main(): runs LLVMFuzzerTestOneInput once over
 * every regular file in the directories (or the files) named on the command
 * line, so that the fuzz targets also build with any C compiler and replay
 * their corpus under `make check`.  A broken invariant aborts inside the
 * target; a file that cannot be read is an error here.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) < 0 || st.st_size < 0) {
        fprintf(stderr, "replay: cannot stat %s: %s\n", path, strerror(errno));
        fclose(f);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    /* Never NULL, even for an empty file, as under libFuzzer; an exact-size
     * copy so that AddressSanitizer sees any read past the end. */
    uint8_t *data = malloc(size ? size : 1);
    if (!data) {
        fprintf(stderr, "replay: %s: out of memory for %zu bytes\n", path, size);
        fclose(f);
        return -1;
    }
    if (size && fread(data, 1, size, f) != size) {
        fprintf(stderr, "replay: short read on %s\n", path);
        free(data);
        fclose(f);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

static int run_path(const char *path, unsigned *count)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (run_file(path) < 0)
            return -1;
        (*count)++;
        return 0;
    }
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "replay: cannot open directory %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[4096];
        if (snprintf(p, sizeof p, "%s/%s", path, e->d_name) >= (int)sizeof p) {
            fprintf(stderr, "replay: path too long: %s/%s\n", path, e->d_name);
            rc = -1;
            continue;
        }
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(p) < 0)
                rc = -1;
            else
                (*count)++;
        }
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
        return 2;
    }
    unsigned count = 0;
    int rc = 0;
    for (int i = 1; i < argc; i++)
        if (run_path(argv[i], &count) < 0)
            rc = 1;
    printf("%s: %u inputs replayed\n", argv[0], count);
    return rc;
}
