/* Fuzz target: record layouts that change during a session (CUPTI's v2
 * path).  The input is up to 8 generations, each a u32 sequence number, a
 * u16 length and that many bytes of "record_layouts" JSON, followed by a
 * buffer of records.  They are archived as the daemon archives LAYOUTS
 * (strings.bin entries under CUPTIMON_LAYOUTS_KEY, beside a meta.json of a
 * v2 producer), read back as cuptimonctl decode and windows read them, and
 * the buffer is walked with the layouts of several chunk indexes around
 * each generation's start: every layout the reader returns keeps its
 * fields inside its records and after the kind, and the walk accounts for
 * every byte (decoded or undecodable) without reading outside the buffer
 * (the sanitizers watch). */
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

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz-layouts: check failed: %s\n", #c);                               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void check_layout(const struct cuptimon_layout *l)
{
    for (unsigned k = 0; k < CUPTIMON_KIND_SLOTS; k++) {
        const struct cuptimon_rec_layout *L = l->rec[k];
        if (L == NULL)
            continue;
        CHECK(l->state[k] == CUPTIMON_KIND_DECODED && L->size == l->size[k]);
        for (unsigned f = 0; f < CUPTIMON_FIELDS_MAX; f++)
            CHECK(L->f[f].width == 0 ||
                  (L->f[f].off >= 4 && L->f[f].off + L->f[f].width <= L->size));
    }
    /* A v2 producer's session: an undescribed kind is never decoded. */
    for (unsigned k = 1; k < CUPTIMON_KIND_SLOTS; k++)
        CHECK(l->described[k] || l->state[k] == CUPTIMON_KIND_UNKNOWN);
}

static void walk(const struct cuptimon_layout *l, const uint8_t *buf, size_t len)
{
    struct cuptimon_decode_stats st;
    struct cuptimon_walk w;
    struct cuptimon_ev ev;
    memset(&st, 0, sizeof st);
    cuptimon__walk_begin(&w, l, buf, len, &st);
    while (cuptimon__walk_next(&w, &ev) == 1)
        ;
    CHECK(st.decoded_bytes + st.undecodable_bytes == len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char meta[] = "{\"pid\": 1, \"cupti_version\": 130300, \"activity_api\": \"v2\", "
                               "\"user_defined_records\": true, \"record_layouts\": {}}";
    struct cuptimon_archive_writer *aw = NULL;
    struct cuptimon_archive_reader *r = NULL;
    struct cuptimon_buf b = {0};
    uint64_t seqs[8];
    unsigned n = 0;
    size_t off = 1;

    if (dir[0] == '\0') {
        snprintf(dir, sizeof dir, "%s/fuzz-layouts.%d",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    CHECK(cuptimon__aw_open(dir, meta, 1u << 20, 0, &aw, NULL) == 0);
    CHECK(cuptimon__strings_begin(&b) == 0);
    unsigned want = size ? data[0] % 9 : 0;
    while (n < want && off + 6 <= size) {
        uint32_t seq = cuptimon__get_u32(data + off);
        size_t len = cuptimon__get_u16(data + off + 4);
        off += 6;
        if (len > size - off)
            len = size - off;
        size_t textlen = strnlen((const char *)data + off, len); /* entries hold no NUL */
        CHECK(cuptimon__strings_add(&b, CUPTIMON_LAYOUTS_KEY(seq), (const char *)data + off,
                                    textlen) == 0);
        seqs[n++] = seq;
        off += len;
    }
    if (n > 0)
        CHECK(cuptimon__aw_strings(aw, b.data, b.len) == 0);
    cuptimon__buf_free(&b);
    cuptimon__aw_close(aw);

    const uint8_t *buf = data + (off < size ? off : size);
    size_t blen = off < size ? size - off : 0;
    struct cuptimon_archive_session as;
    memset(&as, 0, sizeof as);
    CHECK(cuptimon__archive_open(dir, &r, NULL) == 0);
    CHECK(cuptimon__archive_session_meta(&as, cuptimon__archive_meta(r)) == 0);
    CHECK(cuptimon__archive_session_strings(&as, r) == 0);
    CHECK(as.ngens <= n && as.ngens <= CUPTIMON_LAYOUT_GENERATIONS_MAX);
    for (size_t i = 1; i < as.ngens; i++)
        CHECK(as.gens[i - 1].from_seq < as.gens[i].from_seq);
    check_layout(&as.layout);
    walk(cuptimon__archive_session_layout(&as, 0), buf, blen);
    for (unsigned i = 0; i < n; i++) {
        uint64_t at[3] = {seqs[i], seqs[i] ? seqs[i] - 1 : 0, seqs[i] + 1};
        for (unsigned j = 0; j < 3; j++) {
            const struct cuptimon_layout *l = cuptimon__archive_session_layout(&as, at[j]);
            check_layout(l);
            walk(l, buf, blen);
        }
    }
    cuptimon__archive_session_clear(&as);
    cuptimon__archive_close(r);
    CHECK(system(cmd) == 0);
    return 0;
}
