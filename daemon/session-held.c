/*
 * What each process's CUPTI holds behind running work (issue 33), as the
 * shim reports it in HELD messages (cuptimon-proto.h): the oldest record
 * not complete yet ("the head": the kernel, copy or memset that every later
 * record waits on, since CUPTI completes records in launch order), since
 * when, how much waits behind it, and how far the pool grew to keep it.
 *
 * The daemon keeps the last report of each session, shows it (status,
 * top, the Prometheus file), and logs once per head that has held a
 * process's records for inflight_warn_s, so that an operator chasing a
 * straggler, a hang or a persistent kernel finds it in the first command
 * they type.  The report is the producer's word: every count is checked
 * against the pool it describes, and its name is cleaned before it is
 * shown anywhere.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon.h"
#include "archive/demangle.h"
#include "archive/stats.h"

/* The kind's word, for status and the log. */
static const char *held_kind(uint32_t kind)
{
    switch (kind) {
    case 1:
    case 22: return "memcpy";
    case 2: return "memset";
    case 3:
    case 10: return "kernel";
    default: return "activity";
    }
}

/* A short description of the head: "kernel NAME", "memcpy of 4194304
 * bytes", ... into out. */
static void held_what(const struct session *s, char *out, size_t n)
{
    const struct cuptimon_held *h = &s->held;
    if (h->kind == 3 || h->kind == 10)
        snprintf(out, n, "kernel %s", s->held_name ? s->held_name : "(name not known)");
    else if (h->bytes)
        snprintf(out, n, "%s of %" PRIu64 " bytes", held_kind(h->kind), h->bytes);
    else
        snprintf(out, n, "%s (kind %" PRIu32 ")", held_kind(h->kind), h->kind);
}

static double age_s(uint64_t since_ns, int64_t now_ns)
{
    return since_ns && (int64_t)since_ns < now_ns ? (double)(now_ns - (int64_t)since_ns) / 1e9 : 0;
}

int session_held_msg(struct session *s, const uint8_t *body, size_t len, char *why, size_t whylen)
{
    struct cuptimon_held m;
    if (cuptimon__held_decode(body, len, &m) < 0) {
        snprintf(why, whylen, "HELD with a bad body (ignored)");
        return -1;
    }
    /* Counts are held to the pool they describe; times to now. */
    uint64_t pool_bytes = (uint64_t)s->nslots * s->slot_size;
    int64_t now = unix_ns_now();
    if (m.slots_max != s->nslots || m.buffers > s->nslots || m.held_bytes > pool_bytes ||
        m.records > m.held_bytes / 8 || (m.kind == 0) != (m.since_ns == 0) ||
        (int64_t)m.since_ns > now + 1000000000ll) {
        snprintf(why, whylen,
                 "HELD report does not fit the pool (%u slots of %" PRIu64
                 " bytes) or the clock (ignored)",
                 s->nslots, s->slot_size);
        return -1;
    }
    if (m.name_len == 0 || m.kind == 0) {
        free(s->held_name);
        s->held_name = NULL;
    } else {
        char raw[CUPTIMON_HELD_NAME_MAX + 1];
        memcpy(raw, body + CUPTIMON_HELD_SIZE, m.name_len);
        raw[m.name_len] = '\0';
        /* The last name's report comes every second while it is held:
         * demangled and cleaned once. */
        if (!s->held_raw || strcmp(s->held_raw, raw) != 0) {
            struct cuptimon_demangler *dm = NULL;
            const char *dn = raw;
            if (cuptimon__demangler_new(4, &dm) == 0)
                dn = cuptimon__demangle(dm, raw);
            free(s->held_name);
            free(s->held_raw);
            s->held_name = cuptimon__stats_clean_text(dn, 1);
            s->held_raw = strdup(raw);
            cuptimon__demangler_free(dm);
        }
    }
    if (m.name_len == 0) {
        free(s->held_raw);
        s->held_raw = NULL;
    }
    s->held = m;
    s->held_unix_ns = now;
    if (s->d->agg) {
        char what[128];
        held_what(s, what, sizeof what);
        struct cuptimon_agg_held ah = {.since_ns = m.since_ns,
                                       .records = m.records,
                                       .bytes = m.held_bytes,
                                       .grown_bytes = (uint64_t)m.grown * s->slot_size,
                                       .what = what};
        cuptimon__agg_session_held(s->d->agg, s->id, &ah);
    }
    session_held_check(s);
    return 0;
}

void session_held_check(struct session *s)
{
    const struct cuptimon_held *h = &s->held;
    double warn = s->d->conf.inflight_warn_s, age = age_s(h->since_ns, unix_ns_now());
    char what[700];
    /* A collective in flight that long (issue 46): one line per collective. */
    if (warn > 0 && s->d->agg && s->conn &&
        cuptimon__agg_nccl_late(s->d->agg, s->id, warn, what, sizeof what))
        log_warn("inflight", "session %" PRIu64 " (pid %d%s%s): %s", s->id, (int)s->peer.pid,
                 s->label[0] ? ", " : "", s->label, what);
    if (s->held_unix_ns == 0 || !s->conn)
        return;
    if (h->kind && warn > 0 && age >= warn && s->held_warned_since != h->since_ns) {
        s->held_warned_since = h->since_ns;
        held_what(s, what, sizeof what);
        log_warn("inflight",
                 "session %" PRIu64 " (pid %d%s%s): %s has held this process's activity records "
                 "for %.0f s (device %" PRIu32 ", stream %" PRIu32 ", correlation id %" PRIu32
                 "): %" PRIu64 " records (%.1f MiB) in %" PRIu32
                 " buffers wait behind it; CUPTI hands them over when it ends",
                 s->id, (int)s->peer.pid, s->label[0] ? ", " : "", s->label, what, age,
                 h->device_id, h->stream_id, h->correlation_id, h->records,
                 (double)h->held_bytes / (1 << 20), h->buffers);
    }
    if (!s->cap_logged && h->slots_max > h->slots_base && h->slots_out >= h->slots_max) {
        s->cap_logged = 1;
        log_warn("inflight",
                 "session %" PRIu64 " (pid %d%s%s): its buffer pool reached its cap (%" PRIu32
                 " slots, %.0f MiB): CUPTI drops the records it has no buffer for, and counts them",
                 s->id, (int)s->peer.pid, s->label[0] ? ", " : "", s->label, h->slots_max,
                 (double)h->slots_max * (double)s->slot_size / (1 << 20));
    }
}

void session_held_status(const struct session *s, json_object *o)
{
    const struct cuptimon_held *h = &s->held;
    json_object *pool = json_object_new_object();
    json_object *from = NULL, *hp = NULL;
    int64_t now = unix_ns_now();
    struct stat st;
    json_object_object_add(pool, "slot_size", json_object_new_int64((int64_t)s->slot_size));
    json_object_object_add(pool, "max_slots", json_object_new_int64(s->nslots));
    /* The pool's memory as the system counts it: the memfd's pages, which
     * a grown slot given back no longer has. */
    if (s->pool_fd >= 0 && fstat(s->pool_fd, &st) == 0)
        json_object_object_add(pool, "resident_bytes",
                               json_object_new_int64((int64_t)st.st_blocks * 512));
    if (s->hello && json_object_object_get_ex(s->hello, "pool", &hp) &&
        json_object_object_get_ex(hp, "cap_from", &from))
        json_object_object_add(pool, "cap_from", json_object_get(from));
    if (s->held_unix_ns) {
        json_object_object_add(pool, "resident_slots", json_object_new_int64(h->slots_base));
        json_object_object_add(pool, "slots_out", json_object_new_int64(h->slots_out));
        json_object_object_add(pool, "grown_slots", json_object_new_int64(h->grown));
        json_object_object_add(pool, "grown_peak_slots", json_object_new_int64(h->grown_peak));
        json_object_object_add(pool, "grown_bytes",
                               json_object_new_int64((int64_t)((uint64_t)h->grown * s->slot_size)));
        json_object_object_add(
            pool, "cap_reached",
            json_object_new_boolean(h->slots_max > h->slots_base &&
                                    h->grown_peak + h->slots_base >= h->slots_max));
        json_object_object_add(pool, "flushes_skipped",
                               json_object_new_int64((int64_t)h->flushes_skipped));
        /* The shim could not walk every buffer CUPTI holds (a record it
         * cannot step over): what is in flight may be missing or partial.
         * On CUPTI's v2 path it reads none of them (their layouts come
         * with the completed buffer). */
        json_object_object_add(
            pool, "in_flight_view",
            json_object_new_string(!(h->flags & CUPTIMON_HELD_UNSCANNED) ? "complete"
                                   : strncmp(s->path, "v2", 2) == 0      ? "unavailable"
                                                                         : "partial"));
    }
    json_object_object_add(o, "pool", pool);
    if (!s->held_unix_ns || !s->conn || h->kind == 0)
        return;
    json_object *f = json_object_new_object();
    char what[700];
    held_what(s, what, sizeof what);
    json_object_object_add(f, "what", json_object_new_string(what));
    json_object_object_add(f, "kind", json_object_new_string(held_kind(h->kind)));
    if (s->held_name)
        json_object_object_add(f, "name", json_object_new_string(s->held_name));
    if (h->bytes)
        json_object_object_add(f, "bytes", json_object_new_int64((int64_t)h->bytes));
    json_object_object_add(f, "device", json_object_new_int64(h->device_id));
    json_object_object_add(f, "stream", json_object_new_int64(h->stream_id));
    json_object_object_add(f, "context", json_object_new_int64(h->context_id));
    json_object_object_add(f, "correlation_id", json_object_new_int64(h->correlation_id));
    json_object_object_add(f, "since_unix_ns", json_object_new_int64((int64_t)h->since_ns));
    json_object_object_add(f, "age_s", json_object_new_double(age_s(h->since_ns, now)));
    json_object_object_add(f, "records_behind", json_object_new_int64((int64_t)h->records));
    json_object_object_add(f, "bytes_behind", json_object_new_int64((int64_t)h->held_bytes));
    json_object_object_add(f, "buffers_held", json_object_new_int64(h->buffers));
    json_object_object_add(f, "report_age_s",
                           json_object_new_double(age_s((uint64_t)s->held_unix_ns, now)));
    if (h->flags & CUPTIMON_HELD_UNSCANNED)
        json_object_object_add(f, "partial", json_object_new_boolean(1));
    json_object_object_add(o, "in_flight", f);
}

void session_held_meta(const struct session *s, json_object *final)
{
    if (!s->held_unix_ns)
        return;
    json_object_object_add(final, "pool_grown_peak_slots",
                           json_object_new_int64(s->held.grown_peak));
    json_object_object_add(final, "flushes_skipped",
                           json_object_new_int64((int64_t)s->held.flushes_skipped));
}

void session_held_free(struct session *s)
{
    free(s->held_name);
    free(s->held_raw);
    s->held_name = s->held_raw = NULL;
}
