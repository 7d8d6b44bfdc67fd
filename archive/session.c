/*
 * Reading an archive session's meta.json and strings (see session.h).
 */
#include "config.h"

#include "session.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "archive.h"
#include "cuptimon-proto.h"
#include "json-get.h"
#include "strtab.h"

/*
 * The members of a meta.json that is not valid JSON (a flipped bit, a file
 * cut short): each top-level member this reader uses is looked for by its
 * key and parsed on its own, so that damage elsewhere in the file costs
 * only what it covers.  A key inside a string (escaped quotes) is passed
 * over; the first whole value wins.  NULL when none was found.
 */
static json_object *salvage(const char *text)
{
    static const char *const keys[] = {"pid",
                                       "hostname",
                                       "exe",
                                       "cupti_version",
                                       "record_sizes",
                                       "record_layouts",
                                       "job",
                                       "record_sizes_measured",
                                       "user_defined_records"};
    json_object *o = json_object_new_object();
    json_tokener *tok = json_tokener_new();

    if (o == NULL || tok == NULL) {
        json_object_put(o);
        json_tokener_free(tok);
        return NULL;
    }
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        char pat[32];
        size_t plen = (size_t)snprintf(pat, sizeof(pat), "\"%s\"", keys[i]);
        for (const char *p = text; (p = strstr(p, pat)) != NULL; p++) {
            const char *q = p + plen;
            if (p > text && p[-1] == '\\')
                continue;
            while (isspace((unsigned char)*q))
                q++;
            if (*q++ != ':')
                continue;
            json_tokener_reset(tok);
            json_object *v = json_tokener_parse_ex(tok, q, (int)strnlen(q, 1 << 20));
            if (v != NULL) {
                json_object_object_add(o, keys[i], v);
                break;
            }
        }
    }
    json_tokener_free(tok);
    if (json_object_object_length(o) == 0) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

int cuptimon__archive_session_meta(struct cuptimon_archive_session *s, const char *text)
{
    json_object *job = NULL, *rs = NULL;
    int have_sizes = 0, rc = 0;

    json_object_put(s->meta);
    memset(&s->info, 0, sizeof(s->info));
    memset(s->record_sizes, 0, sizeof(s->record_sizes));
    s->meta = text ? json_tokener_parse(text) : NULL;
    if (s->meta == NULL || !json_object_is_type(s->meta, json_type_object)) {
        json_object_put(s->meta);
        s->meta = text ? salvage(text) : NULL;
        rc = s->meta != NULL ? -EBADMSG : -EINVAL;
    }
    job = cuptimon__json_get(s->meta, "job");
    s->info.pid = (uint32_t)cuptimon__json_int_strict(s->meta, "pid", 0);
    s->info.hostname = cuptimon__json_str(s->meta, "hostname", NULL);
    s->info.exe = cuptimon__json_str(s->meta, "exe", NULL);
    s->info.cupti_version = (uint32_t)cuptimon__json_int_strict(s->meta, "cupti_version", 0);
    s->info.rank = cuptimon__json_int_strict(job, "rank", -1);
    s->info.local_rank = cuptimon__json_int_strict(job, "local_rank", -1);
    s->info.world_size = cuptimon__json_int_strict(job, "world_size", -1);
    s->info.job_id = cuptimon__json_str(job, "slurm_job_id", NULL);
    s->info.label = cuptimon__json_str(job, "label", NULL);
    rs = cuptimon__json_get(s->meta, "record_sizes");
    if (rs != NULL && json_object_is_type(rs, json_type_object)) {
        json_object_object_foreach(rs, key, val)
        {
            char *end;
            unsigned long k = strtoul(key, &end, 10);
            int64_t v = json_object_get_int64(val);
            if (*end != '\0' || end == key || k >= CUPTIMON_KIND_SLOTS || v <= 0 || v > UINT32_MAX)
                continue;
            s->record_sizes[k] = (uint32_t)v;
            have_sizes = 1;
        }
    }
    /* record_layouts: the producer's CUPTI 13.2+ user-defined record
     * layouts, when its shim asked for them (decode.h). */
    s->layout_rc = cuptimon__layout_init_meta(&s->layout, s->info.cupti_version,
                                              have_sizes ? s->record_sizes : NULL, s->meta);
    /* record_sizes_measured: what the producer's libcupti really uses
     * (the per-session check; decode.h cuptimon__layout_measured). */
    if (cuptimon__layout_sizes_json(cuptimon__json_get(s->meta, "record_sizes_measured"),
                                    s->measured) > 0 &&
        cuptimon__layout_measured(&s->layout, s->measured) > 0 && s->layout_rc == 0)
        s->layout_rc = 1;
    return rc;
}

/* The first problem of the layout generations, for the reader to show. */
static void gen_fail(struct cuptimon_archive_session *s, uint64_t seq, const char *what)
{
    if (s->gens_error[0] == '\0')
        snprintf(s->gens_error, sizeof(s->gens_error), "the layouts from buffer %llu on: %s",
                 (unsigned long long)seq, what);
}

/*
 * One strings.bin entry under CUPTIMON_LAYOUTS_KEY(seq): the record
 * layouts of the chunks from index seq on (cuptimon-proto.h).  Each is
 * checked as meta.json's are (cuptimon__layout_init_meta, with meta.json's
 * CUPTI version and its "user_defined_records"), and kept in seq order.
 * Past CUPTIMON_LAYOUT_GENERATIONS_MAX, or for an entry that is not a JSON
 * object, the chunks from its seq on decode nothing (counted as
 * undecodable): an earlier generation would misread them.
 */
static int add_gen(struct cuptimon_archive_session *s, uint64_t seq, const char *text, size_t len)
{
    json_tokener *tok = json_tokener_new();
    json_object *rl = tok ? json_tokener_parse_ex(tok, text, (int)len) : NULL, *m = NULL;
    struct cuptimon_layout *l = NULL;
    size_t i;

    json_tokener_free(tok);
    for (i = 0; i < s->ngens; i++)
        if (s->gens[i].from_seq == seq) {
            gen_fail(s, seq, "described twice (the first is used)");
            json_object_put(rl);
            return 0;
        }
    if (s->ngens >= CUPTIMON_LAYOUT_GENERATIONS_MAX) {
        gen_fail(s, seq,
                 "more layout changes than a session may have; later chunks are not "
                 "decoded");
        if (seq < s->gens_cut)
            s->gens_cut = seq;
        json_object_put(rl);
        return 0;
    }
    l = malloc(sizeof(*l));
    m = json_object_new_object();
    if (l == NULL || m == NULL) {
        free(l);
        json_object_put(m);
        json_object_put(rl);
        return -ENOMEM;
    }
    if (rl == NULL || !json_object_is_type(rl, json_type_object)) {
        /* Nothing can be said of these chunks' records: none decodes. */
        gen_fail(s, seq, "not a JSON object; those chunks are not decoded");
        json_object_put(rl);
        rl = json_object_new_object();
    }
    json_object_object_add(m, "record_layouts", rl);
    json_object_object_add(m, "user_defined_records", json_object_new_boolean(1));
    (void)cuptimon__layout_init_meta(l, s->info.cupti_version, NULL, m);
    json_object_put(m);
    if (l->udr_error[0] != '\0')
        gen_fail(s, seq, l->udr_error);
    struct cuptimon_layout_gen *g = realloc(s->gens, (s->ngens + 1) * sizeof(*g));
    if (g == NULL) {
        free(l);
        return -ENOMEM;
    }
    s->gens = g;
    for (i = s->ngens; i > 0 && s->gens[i - 1].from_seq > seq; i--)
        s->gens[i] = s->gens[i - 1];
    s->gens[i] = (struct cuptimon_layout_gen){.from_seq = seq, .layout = l};
    s->ngens++;
    return 0;
}

static int put_entry(void *ud, uint64_t ptr, const char *str, size_t len)
{
    struct cuptimon_archive_session *s = ud;

    if (CUPTIMON_RANGE_KEY_CLASS(ptr) == CUPTIMON_LAYOUTS_KEY_CLASS)
        return add_gen(s, ptr & ~CUPTIMON_LAYOUTS_KEY_CLASS, str, len) == -ENOMEM ? -ENOMEM : 0;
    return cuptimon__strtab_put_cb(s->names, ptr, str, len);
}

int cuptimon__archive_session_strings(struct cuptimon_archive_session *s,
                                      struct cuptimon_archive_reader *r)
{
    int rc;

    if (s->names == NULL && (rc = cuptimon__strtab_new(NULL, &s->names)) < 0)
        return rc;
    /* Read again (another pass over the session): from scratch. */
    for (size_t i = 0; i < s->ngens; i++)
        free(s->gens[i].layout);
    free(s->gens);
    s->gens = NULL;
    s->ngens = 0;
    s->gens_error[0] = '\0';
    s->gens_cut = UINT64_MAX;
    return cuptimon__archive_strings(r, put_entry, s);
}

const struct cuptimon_layout *cuptimon__archive_session_layout(
    const struct cuptimon_archive_session *s, uint64_t chunk_index)
{
    /* Decodes nothing: chunks past the generations an archive may hold. */
    static struct cuptimon_layout none;
    size_t lo = 0, hi = s->ngens;

    if (s->gens_cut != 0 && chunk_index >= s->gens_cut)
        return &none;
    /* The last generation that starts at or before the chunk. */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->gens[mid].from_seq <= chunk_index)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? &s->layout : s->gens[lo - 1].layout;
}

void cuptimon__archive_session_clear(struct cuptimon_archive_session *s)
{
    if (s == NULL)
        return;
    cuptimon__strtab_free(s->names);
    json_object_put(s->meta);
    for (size_t i = 0; i < s->ngens; i++)
        free(s->gens[i].layout);
    free(s->gens);
    memset(s, 0, sizeof(*s));
}
