/*
 * The per-session layout check (issue 30): the daemon does not trust its
 * layout table (proto/layouts.c) for a producer's records, it holds it
 * against the record sizes the producer's own libcupti was measured to use
 * (cuptiActivityGetStructSize on 13.2+, and on every release the stride of
 * CUPTI's cuptiActivityGetNextRecord in the shim's walk of each buffer).
 * They come in the hello ("record_sizes_measured") and, for kinds first
 * seen later, as string-table entries (cuptimon-proto.h,
 * CUPTIMON_RECORD_SIZE_KEY), which the shim frames before the BUFFER_READY
 * of the first buffer holding such a kind.  A kind whose measured size is
 * not the table's is walked by the measured size and counted as
 * unknown_layout, never decoded (archive/decode.c cuptimon__layout_measured);
 * the mismatch is logged once, shown in status, and archived: meta.json's
 * record_sizes and record_sizes_measured carry the measured sizes, so the
 * offline decode and the windows walk by them too.
 *
 * The session's layout is read by its worker (live aggregates), so it is
 * rebuilt only on the loop while no work item of the session runs
 * (session_layout_refresh, called before a batch is handed to a worker and
 * after one comes back).  meta.json is rewritten by the worker, first in
 * the next batch, so that no chunk holding a newly measured kind reaches
 * the disk before the meta.json that sizes it.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "archive/json-get.h"

static int size_sane(uint32_t s)
{
    return s >= 8 && s <= CUPTIMON_RECORD_MAX && s % 8 == 0;
}

/* Puts kind k's measured size (and how it was measured) into the hello the
 * session keeps, whose members meta.json copies: record_sizes (what the
 * records are walked by, also for a cuptimonctl older than the check) and
 * record_sizes_measured / record_sizes_by. */
static void hello_put(struct session *s, unsigned k, uint32_t size, const char *by)
{
    static const char *const members[] = {"record_sizes", "record_sizes_measured"};
    char key[12];

    snprintf(key, sizeof key, "%u", k);
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++) {
        json_object *o = cuptimon__json_get(s->hello, members[i]);
        if (o == NULL || !json_object_is_type(o, json_type_object)) {
            o = json_object_new_object();
            json_object_object_add(s->hello, members[i], o);
        }
        json_object_object_add(o, key, json_object_new_int64(size));
    }
    if (by != NULL) {
        json_object *o = cuptimon__json_get(s->hello, "record_sizes_by");
        if (o == NULL || !json_object_is_type(o, json_type_object)) {
            o = json_object_new_object();
            json_object_object_add(s->hello, "record_sizes_by", o);
        }
        json_object_object_add(o, key, json_object_new_string(by));
    }
}

/* How kind k was measured, from a {"<kind>": "struct_size"|"stride"}
 * object; NULL when it does not say (or says something else). */
static const char *measured_by(json_object *by, unsigned k)
{
    char key[12];
    const char *v;

    snprintf(key, sizeof key, "%u", k);
    v = cuptimon__json_str(by, key, NULL);
    if (v != NULL && (strcmp(v, "struct_size") == 0 || strcmp(v, "stride") == 0))
        return v;
    return NULL;
}

/* Takes the measured sizes of a hello.  Returns how many kinds were new or
 * changed; *why names the first problem. */
static unsigned take(struct session *s, json_object *o, char *why, size_t whylen)
{
    uint32_t m[CUPTIMON_KIND_SLOTS];
    json_object *by = cuptimon__json_get(o, "record_sizes_by");
    unsigned n = 0;

    cuptimon__layout_sizes_json(cuptimon__json_get(o, "record_sizes_measured"), m);
    for (unsigned k = 1; k < CUPTIMON_KIND_SLOTS; k++) {
        if (m[k] == 0 || m[k] == s->measured[k])
            continue;
        if (!size_sane(m[k])) {
            if (why[0] == '\0')
                snprintf(why, whylen,
                         "measured record size %" PRIu32
                         " for kind %u is not a multiple of 8 in 8..%u (ignored)",
                         m[k], k, CUPTIMON_RECORD_MAX);
            continue;
        }
        if (s->measured[k] != 0 && why[0] == '\0')
            snprintf(why, whylen,
                     "kind %u was measured as %" PRIu32 " bytes, now as %" PRIu32
                     " (the later size is used)",
                     k, s->measured[k], m[k]);
        s->measured[k] = m[k];
        hello_put(s, k, m[k], measured_by(by, k));
        n++;
    }
    return n;
}

/* Logs what the check found that was not logged yet: each kind's mismatch,
 * once, and a release that the sizes refuted. */
static void log_findings(struct session *s)
{
    char text[200];

    if (s->layout.refuted != NULL && !s->refuted_logged) {
        s->refuted_logged = 1;
        log_warn("session",
                 "session %" PRIu64 " (pid %d): CUPTI API version %" PRIu32
                 " is reported by CUDA %s and by %s, and its measured record sizes are not %s's: "
                 "it is CUDA %s, which this build does not decode; its records are archived, "
                 "walked by the measured sizes and counted under an unknown version",
                 s->id, (int)s->peer.pid, s->cupti_version, s->layout.refuted->cuda,
                 s->layout.refuted->shared_with, s->layout.refuted->cuda,
                 s->layout.refuted->shared_with);
    }
    for (unsigned k = 1; k < CUPTIMON_KIND_SLOTS; k++) {
        if (!cuptimon__layout_mismatch(&s->layout, k) || (s->mismatch_logged >> k & 1))
            continue;
        s->mismatch_logged |= 1ull << k;
        log_warn("session",
                 "session %" PRIu64 " (pid %d): %s: its records are archived and walked by "
                 "CUPTI's size, not decoded (counted as unknown_layout); this build's layout "
                 "table is wrong for CUPTI %" PRIu32 " (a cuptimonctl whose table is right can "
                 "decode the archive later)",
                 s->id, (int)s->peer.pid,
                 cuptimon__layout_mismatch_text(&s->layout, k, text, sizeof text),
                 s->cupti_version);
    }
}

void session_layout_refresh(struct session *s)
{
    if (!s->layout_dirty || s->working || s->hello == NULL)
        return;
    s->layout_dirty = 0;
    cuptimon__agg_layout_from_hello(s->hello, &s->layout);
    cuptimon__layout_measured(&s->layout, s->measured);
    log_findings(s);
    /* meta.json follows, on the worker with the next batch. */
    s->meta_dirty = 1;
}

void session_layout_hello(struct session *s)
{
    char why[160] = "";

    /* The layout was built from the hello's record_sizes, which a shim
     * that measures already gives as measured; the check confirms them. */
    take(s, s->hello, why, sizeof why);
    cuptimon__layout_measured(&s->layout, s->measured);
    log_findings(s);
    if (why[0] != '\0')
        log_warn("session", "session %" PRIu64 " (pid %d): hello: %s", s->id, (int)s->peer.pid,
                 why);
}

int session_layout_string(struct session *s, uint64_t key, const char *str, size_t n, char *why,
                          size_t whylen)
{
    int k = CUPTIMON_RECORD_SIZE_KIND(key);
    uint32_t size;
    const char *by;

    if (k <= 0 || cuptimon__record_size_parse(str, n, &size, &by) < 0) {
        snprintf(why, whylen,
                 "record size string for kind %d is not \"BYTES stride|struct_size\" with BYTES a "
                 "multiple of 8 in 8..%u: \"%.40s\" (ignored)",
                 k, CUPTIMON_RECORD_MAX, str);
        return -1;
    }
    why[0] = '\0';
    if (s->measured[k] == size)
        return 0; /* the same again: a new connection's copy, or the hello's */
    /* Not the producer's fault: its libcupti's two answers disagreed
     * (cuptiActivityGetStructSize, then the stride it walks by). */
    if (s->measured[k] != 0 && s->size_changes++ < 10)
        log_warn("session",
                 "session %" PRIu64 " (pid %d): kind %d was measured as %" PRIu32
                 " bytes, now as %" PRIu32 " (%s); the later size is used",
                 s->id, (int)s->peer.pid, k, s->measured[k], size, by);
    s->measured[k] = size;
    hello_put(s, (unsigned)k, size, by);
    s->layout_dirty = 1;
    session_layout_refresh(s); /* now, unless a worker holds the layout */
    return 0;
}

void session_layout_status(const struct session *s, json_object *o)
{
    const struct cuptimon_layout *l = &s->layout;
    json_object *checked = json_object_new_array(), *mismatch = json_object_new_array();
    json_object *unverified = json_object_new_array();
    const struct cuptimon_cupti_release *r = l->release;
    char text[240];

    for (unsigned k = 1; k < CUPTIMON_KIND_SLOTS; k++) {
        if (l->checked[k])
            json_object_array_add(checked, json_object_new_int((int)k));
        if (cuptimon__layout_mismatch(l, k))
            json_object_array_add(mismatch, json_object_new_string(cuptimon__layout_mismatch_text(
                                                l, k, text, sizeof text)));
        /* A table entry no header confirms, for a kind this session
         * records (its records were measured). */
        if (r != NULL && r->kinds[k] != NULL && r->kinds[k]->unverified != NULL &&
            !l->described[k] && l->measured[k] != 0) {
            const char *kn = cuptimon__kind_name(k);
            snprintf(text, sizeof text, "kind %u (%s): %s is unverified (%s); its size %s", k,
                     kn ? kn : "?", r->kinds[k]->name, r->kinds[k]->unverified,
                     l->checked[k] ? "is confirmed by this libcupti: decoded"
                                   : "disagrees with this libcupti: not decoded");
            json_object_array_add(unverified, json_object_new_string(text));
        }
    }
    json_object_object_add(o, "layout_checked", checked);
    json_object_object_add(o, "layout_mismatch", mismatch);
    json_object_object_add(o, "layout_unverified", unverified);
    if (l->refuted != NULL) {
        snprintf(text, sizeof text,
                 "CUPTI API version %" PRIu32 " is %s's and %s's; the measured record sizes are "
                 "not %s's: CUDA %s, not decoded",
                 s->cupti_version, l->refuted->cuda, l->refuted->shared_with, l->refuted->cuda,
                 l->refuted->shared_with);
        json_object_object_add(o, "release_refuted", json_object_new_string(text));
    }
}
