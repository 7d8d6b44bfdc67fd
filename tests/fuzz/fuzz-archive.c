/* Fuzz target: the archive reader over an arbitrary segment file (after a
 * valid segment header, so that the chunk parser is what gets exercised).
 * Chunks it returns must be inside the limits the format promises. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/archive.h"
#include "cuptimon-proto.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz-archive: check failed: %s\n", #c);                               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

static int count_str(void *ud, uint64_t ptr, const char *s, size_t len)
{
    (void)ptr;
    CHECK(strlen(s) == len);
    (*(uint64_t *)ud)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/cuptimon-fuzz-archive-%d", (int)getpid());
        mkdir(dir, 0700);
        write_file("meta.json", "{}", 2, NULL, 0);
    }
    uint8_t hdr[CUPTIMON_SEG_HDR_SIZE] = {0};
    memcpy(hdr, CUPTIMON_SEG_MAGIC, 8);
    cuptimon__put_u32(hdr + 8, CUPTIMON_SEG_VERSION);
    /* The first byte splits the input between the segment and strings.bin. */
    size_t cut = size ? (size_t)data[0] * size / 256 : 0;
    write_file("seg-000000.cpt", hdr, sizeof hdr, data + (size ? 1 : 0) + 0,
               cut > 0 ? cut - (size ? 1 : 0) : 0);
    uint8_t shdr[CUPTIMON_STR_HDR_SIZE] = {0};
    memcpy(shdr, CUPTIMON_STR_MAGIC, 8);
    cuptimon__put_u32(shdr + 8, CUPTIMON_STR_VERSION);
    write_file("strings.bin", shdr, sizeof shdr, data + cut, size - cut);

    struct cuptimon_archive_reader *r;
    CHECK(cuptimon__archive_open(dir, &r, NULL) == 0);
    uint64_t strings = 0;
    CHECK(cuptimon__archive_strings(r, count_str, &strings) == 0);
    struct cuptimon_archive_chunk c;
    int rc;
    while ((rc = cuptimon__archive_next(r, &c)) == 1) {
        CHECK(c.hdr.raw_size <= CUPTIMON_CHUNK_MAX_RAW);
        CHECK(c.hdr.stored_size <= size);
        if (c.hdr.raw_size)
            CHECK(c.data != NULL);
    }
    CHECK(rc == 0);
    cuptimon__archive_close(r);
    return 0;
}
