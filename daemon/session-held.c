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
#include "archive/json-get.h"
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
        memcpy(raw, body + cuptimon__held_size(&m), m.name_len);
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
    /* The shim's declines (CUPTIMON_HELD_DECLINES): CUPTI drops records
     * now, and counts them only when it hands the buffers it holds over;
     * the count of declines is the live one (FLUSH_DONE's is periodic). */
    if ((m.flags & CUPTIMON_HELD_DECLINES) &&
        (m.declined > SESSION_CLAIM_MAX || (int64_t)m.declining_since_ns > now + 1000000000ll ||
         (m.declining_since_ns && !m.declined))) {
        snprintf(why, whylen, "HELD declines do not fit the clock or their count (ignored)");
        return -1;
    }
    if ((m.flags & CUPTIMON_HELD_DECLINES) && m.declined > s->shim_declined)
        s->shim_declined = m.declined;
    if (m.declining_since_ns && !s->held.declining_since_ns)
        s->drop_episodes++;
    s->held = m;
    s->held_unix_ns = now;
    if (s->d->agg) {
        char what[128];
        held_what(s, what, sizeof what);
        struct cuptimon_agg_held ah = {.since_ns = m.since_ns,
                                       .records = m.records,
                                       .bytes = m.held_bytes,
                                       .grown_bytes = (uint64_t)m.grown * s->slot_size,
                                       .dropping_since_ns = m.declining_since_ns,
                                       .what = what,
                                       .kernel = m.kind == 3 || m.kind == 10,
                                       .device = m.device_id};
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
    /* Once per episode of declines (a shim that reports them), else once
     * when the pool is full (an older shim). */
    uint32_t cap = session_pool_cap(s);
    if (h->declining_since_ns ? s->cap_logged < s->drop_episodes
                              : !s->cap_logged && h->slots_out >= cap) {
        s->cap_logged = h->declining_since_ns ? s->drop_episodes : 1;
        log_warn("inflight",
                 "session %" PRIu64 " (pid %d%s%s): its buffer pool is at its cap (%" PRIu32
                 " slots, %.1f MiB%s%s): CUPTI drops the records it has no buffer for; it counts "
                 "them when it hands the buffers it holds over (status: DROPPED)",
                 s->id, (int)s->peer.pid, s->label[0] ? ", " : "", s->label, cap,
                 (double)cap * (double)s->slot_size / (1 << 20), cap > h->slots_base ? "" : ", ",
                 cap > h->slots_base ? "" : "it cannot grow");
    }
}

uint32_t session_pool_cap(const struct session *s)
{
    return s->take_slots && s->take_slots < s->nslots ? s->take_slots : s->nslots;
}

/* Why the pool cannot grow past its resident slots, into why ("" when it
 * can): the shim's cap (CUPTIMON_POOL_MAX=0, a cap not above them) or the
 * daemon's max_pool_bytes. */
static void pool_no_growth(const struct session *s, uint32_t resident, char *why, size_t n)
{
    json_object *hp = NULL, *from = NULL;
    why[0] = '\0';
    if (resident == 0 || session_pool_cap(s) > resident)
        return;
    if (s->take_slots < s->nslots)
        snprintf(why, n, "max_pool_bytes (%.1f MiB) leaves it no room past them",
                 (double)s->d->cfg.max_pool_bytes / (1 << 20));
    else if (s->hello && json_object_object_get_ex(s->hello, "pool", &hp) &&
             json_object_object_get_ex(hp, "cap_from", &from) &&
             json_object_is_type(from, json_type_string)) {
        /* The producer's words, logged: cleaned of controls and bounded. */
        char *clean = cuptimon__stats_clean_text(json_object_get_string(from), 1);
        snprintf(why, n, "its cap (%.96s) is not above them", clean ? clean : "?");
        free(clean);
    } else
        snprintf(why, n, "its cap is not above them");
}

static uint32_t hello_resident(const struct session *s)
{
    json_object *hp = NULL;
    int64_t r = 0;
    if (s->hello && json_object_object_get_ex(s->hello, "pool", &hp))
        r = cuptimon__json_integer(hp, "resident_slots", 0);
    return r > 0 && r <= (int64_t)s->nslots ? (uint32_t)r : 0;
}

void session_pool_hello(struct session *s)
{
    char why[200];
    uint32_t resident = hello_resident(s);
    if (s->take_slots < s->nslots)
        log_notice(
            "session",
            "session %" PRIu64 " (pid %d): its pool may grow to %.1f MiB (%u slots of %" PRIu64
            " bytes), more than max_pool_bytes (%.1f MiB): the daemon takes %u of its "
            "buffers at once, and the shim keeps its pool to that",
            s->id, (int)s->peer.pid, (double)s->nslots * (double)s->slot_size / (1 << 20),
            s->nslots, s->slot_size, (double)s->d->cfg.max_pool_bytes / (1 << 20), s->take_slots);
    pool_no_growth(s, resident, why, sizeof why);
    if (why[0])
        log_warn("session",
                 "session %" PRIu64 " (pid %d): its buffer pool cannot grow past its %u resident "
                 "slots (%.1f MiB): %s; while work runs for long, CUPTI drops what finds no "
                 "buffer, and counts it",
                 s->id, (int)s->peer.pid, resident,
                 (double)resident * (double)s->slot_size / (1 << 20), why);
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
    /* The most it may have out: max_slots, or what the daemon takes at
     * once where max_pool_bytes is less (the shim keeps to it). */
    uint32_t cap = session_pool_cap(s), resident = hello_resident(s);
    char why[200];
    json_object_object_add(pool, "cap_slots", json_object_new_int64(cap));
    json_object_object_add(pool, "cap_bytes",
                           json_object_new_int64((int64_t)((uint64_t)cap * s->slot_size)));
    if (cap < s->nslots)
        json_object_object_add(pool, "cap_limited_by", json_object_new_string("max_pool_bytes"));
    pool_no_growth(s, resident, why, sizeof why);
    json_object_object_add(pool, "can_grow", json_object_new_boolean(!why[0]));
    if (why[0])
        json_object_object_add(pool, "cannot_grow", json_object_new_string(why));
    if (!s->held_unix_ns && resident)
        json_object_object_add(pool, "resident_slots", json_object_new_int64(resident));
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
        /* Reached: CUPTI is being declined now (the shim says so), or the
         * pool was full at a report, or grew to its cap. */
        int dropping = h->declining_since_ns != 0;
        json_object_object_add(
            pool, "cap_reached",
            json_object_new_boolean(dropping || s->cap_logged || h->slots_out >= cap ||
                                    (cap > h->slots_base && h->grown_peak + h->slots_base >= cap)));
        if (dropping)
            json_object_object_add(pool, "dropping_since_unix_ns",
                                   json_object_new_int64((int64_t)h->declining_since_ns));
        json_object_object_add(pool, "declines_reported",
                               json_object_new_boolean((h->flags & CUPTIMON_HELD_DECLINES) != 0));
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
