/* Fuzz target: the archive reader over an arbitrary segment file (after a
 * valid segment header, so that the chunk parser is what gets exercised)
 * and strings file, and the meta.json parser (with its salvage of damaged
 * JSON) over the strings part as text.  Chunks it returns must be inside
 * the limits the format promises; a second reading with the segment also
 * copied beside itself must return the same chunks (the copy's are
 * duplicates); damage is reported at most once per kind, naming a file. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "archive/archive.h"
#include "archive/session.h"
#include "cuptimon-proto.h"

#include "fuzz-files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count_str(void *ud, uint64_t ptr, const char *s, size_t len)
{
    (void)ptr;
    CHECK(strlen(s) == len);
    (*(uint64_t *)ud)++;
    return 0;
}

static void on_damage(void *ud, enum cuptimon_archive_damage kind, const char *path,
                      uint64_t offset, const char *what)
{
    unsigned *seen = ud;
    CHECK(kind < CUPTIMON_DAMAGE_KINDS);
    CHECK(!(*seen & (1u << kind)));
    *seen |= 1u << kind;
    CHECK(path != NULL && strncmp(path, dir, strlen(dir)) == 0);
    CHECK(what != NULL && what[0] != '\0');
    (void)offset;
}

/* Reads the session; returns the chunks read, and their indexes' sum. */
static uint64_t read_all(size_t size, uint64_t *sum, struct cuptimon_archive_stats *st)
{
    struct cuptimon_archive_reader *r;
    unsigned seen = 0;
    CHECK(cuptimon__archive_open(dir, &r, NULL) == 0);
    cuptimon__archive_set_report(r, on_damage, &seen);
    uint64_t strings = 0;
    CHECK(cuptimon__archive_strings(r, count_str, &strings) == 0);
    CHECK(strings == cuptimon__archive_stats(r)->strings);
    struct cuptimon_archive_chunk c;
    int rc;
    uint64_t n = 0;
    *sum = 0;
    while ((rc = cuptimon__archive_next(r, &c)) == 1) {
        CHECK(c.hdr.raw_size <= CUPTIMON_CHUNK_MAX_RAW);
        CHECK(c.hdr.stored_size <= size);
        if (c.hdr.raw_size)
            CHECK(c.data != NULL);
        n++;
        *sum += c.hdr.index;
    }
    CHECK(rc == 0);
    *st = *cuptimon__archive_stats(r);
    CHECK(st->chunks == n);
    cuptimon__archive_close(r);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        make_dir("cuptimon-fuzz-archive");
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

    char path[128];
    snprintf(path, sizeof path, "%s/seg-000001.cpt", dir);
    unlink(path);
    struct cuptimon_archive_stats st, st2;
    uint64_t sum, sum2;
    uint64_t n = read_all(size, &sum, &st);
    /* The same segment twice: each chunk of the copy is a duplicate. */
    write_file("seg-000001.cpt", hdr, sizeof hdr, data + (size ? 1 : 0) + 0,
               cut > 0 ? cut - (size ? 1 : 0) : 0);
    CHECK(read_all(size, &sum2, &st2) == n);
    CHECK(sum2 == sum);
    CHECK(st2.duplicate_chunks >= n);
    unlink(path);

    /* The strings part as meta.json text. */
    char *text = malloc(size - cut + 1);
    CHECK(text != NULL);
    memcpy(text, data + cut, size - cut);
    text[size - cut] = '\0';
    struct cuptimon_archive_session as;
    memset(&as, 0, sizeof as);
    int mrc = cuptimon__archive_session_meta(&as, text);
    CHECK(mrc == 0 || mrc == -EBADMSG || mrc == -EINVAL);
    CHECK(mrc != -EINVAL || as.meta == NULL);
    /* Whatever "record_layouts" said, no decoded field lies outside its
     * record or over the kind, and a walk of the input through the layout
     * reads inside it (the sanitizers watch). */
    for (unsigned k = 0; k < CUPTIMON_KIND_SLOTS; k++) {
        const struct cuptimon_rec_layout *L = as.layout.rec[k];
        if (L == NULL)
            continue;
        /* Decoded, or a table layout of a release whose sizes the producer
         * has not measured (walked by the table's size, not decoded). */
        CHECK((as.layout.state[k] == CUPTIMON_KIND_DECODED ||
               as.layout.state[k] == CUPTIMON_KIND_UNCONFIRMED) &&
              L->size == as.layout.size[k]);
        for (unsigned f = 0; f < CUPTIMON_FIELDS_MAX; f++)
            CHECK(L->f[f].width == 0 ||
                  (L->f[f].off >= 4 && L->f[f].off + L->f[f].width <= L->size));
    }
    if (as.layout.user_defined > 0) {
        struct cuptimon_decode_stats dst;
        struct cuptimon_walk w;
        struct cuptimon_ev ev;
        memset(&dst, 0, sizeof dst);
        cuptimon__walk_begin(&w, &as.layout, data, size, &dst);
        while (cuptimon__walk_next(&w, &ev) == 1)
            ;
        CHECK(dst.decoded_bytes + dst.undecodable_bytes == size);
    }
    cuptimon__archive_session_clear(&as);
    free(text);
    return 0;
}
