/*
 * The decoder: the buffer walker and the record decoders.  See decode.h
 * for the rules; the one rule that shapes this file is that every field is
 * read with memcpy at the offset the producer's CUPTI release gives
 * (proto/layouts.c, looked up by the version in its hello), and only after
 * the whole record is known to lie in the buffer.  No CUPTI header is
 * included: the daemon decodes releases newer and older than its build.
 */
#include "config.h"

#include "decode.h"
#include "json-get.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cuptimon-proto.h"
#include "layouts.h"

/* Pointer-valued fields (kernel and marker names) are read as 8 bytes:
 * producers are 64-bit processes and so must the daemon be. */
_Static_assert(sizeof(void *) == 8, "cuptimon decodes 64-bit producers only");
_Static_assert(CUPTIMON_LAYOUT_KINDS == CUPTIMON_KIND_SLOTS, "one kind numbering");

static int size_sane(uint32_t s)
{
    return s >= 8 && s <= CUPTIMON_RECORD_MAX && (s % 8) == 0;
}

int cuptimon__layout_init(struct cuptimon_layout *l, uint32_t cupti_version,
                          const uint32_t *announced)
{
    const struct cuptimon_cupti_release *r = cuptimon__cupti_release(cupti_version);
    int mismatch = 0;

    memset(l, 0, sizeof(*l));
    l->cupti_version = cupti_version;
    l->release = r;
    l->version_known = r != NULL;

    if (announced != NULL) {
        for (unsigned k = 0; k < CUPTIMON_KIND_SLOTS; k++)
            if (size_sane(announced[k]))
                l->announced[k] = (uint16_t)announced[k];
    }

    if (r != NULL) {
        for (unsigned k = 1; k < CUPTIMON_KIND_SLOTS; k++) {
            if (r->kinds[k] == NULL)
                continue;
            l->table_size[k] = r->kinds[k]->size;
            l->rec[k] = r->kinds[k];
        }
    }

    for (unsigned k = 0; k < CUPTIMON_KIND_SLOTS; k++) {
        uint16_t a = l->announced[k], t = l->table_size[k];
        if (k == 0) { /* CUPTI_ACTIVITY_KIND_INVALID */
            l->state[k] = CUPTIMON_KIND_UNKNOWN;
        } else if (!l->version_known) {
            l->state[k] = a ? CUPTIMON_KIND_BAD_VERSION : CUPTIMON_KIND_UNKNOWN;
            l->size[k] = a;
        } else if (t != 0 && (a == 0 || a == t)) {
            /* A layout no header confirms waits for the producer's
             * measured size (cuptimon__layout_measured). */
            l->state[k] =
                r->kinds[k]->unverified ? CUPTIMON_KIND_UNCONFIRMED : CUPTIMON_KIND_DECODED;
            l->size[k] = t;
        } else if (t != 0) {
            /* The producer's struct is not the one its release uses: walk
             * over it by its size. */
            l->state[k] = CUPTIMON_KIND_BAD_LAYOUT;
            l->size[k] = a;
            l->rec[k] = NULL;
            mismatch = 1;
        } else {
            l->state[k] = a ? CUPTIMON_KIND_UNSUPPORTED : CUPTIMON_KIND_UNKNOWN;
            l->size[k] = a;
        }
    }
    /* An announced size that was absurd for a kind we decode is also a
     * disagreement, though the table size is used to walk. */
    if (announced != NULL && l->version_known) {
        for (unsigned k = 1; k < CUPTIMON_KIND_SLOTS; k++) {
            if (announced[k] != 0 && !size_sane(announced[k]) && l->table_size[k] != 0) {
                l->state[k] = CUPTIMON_KIND_BAD_LAYOUT;
                l->size[k] = 0; /* unknown: stop rather than guess */
                l->rec[k] = NULL;
                mismatch = 1;
            }
        }
    }
    if (!l->version_known)
        return -EPROTONOSUPPORT;
    return mismatch;
}

/* ---- user-defined records (CUPTI 13.2+) -------------------------------- */

static void udr_fail(struct cuptimon_layout *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void udr_fail(struct cuptimon_layout *l, const char *fmt, ...)
{
    va_list ap;

    if (l->udr_error[0] != '\0')
        return; /* the first problem is the one worth reading */
    va_start(ap, fmt);
    vsnprintf(l->udr_error, sizeof(l->udr_error), fmt, ap);
    va_end(ap);
}

/* An integer member in [lo, hi], or -1 (absent, not an integer, out of range). */
static int64_t udr_int(json_object *o, const char *key, int64_t lo, int64_t hi)
{
    int64_t n = cuptimon__json_integer(o, key, -1); /* lo >= 0: -1 is never in range */
    return n < lo || n > hi ? -1 : n;
}

/* The widths a described field may have.  CUPTI reports each field's
 * width with its layout, and the sources disagree on some of them (64-bit
 * correlation, context and stream ids in the 13.3 header's comments,
 * 32-bit ones measured by PyTorch), so the decoder reads a field at the
 * width described: any of 1, 2, 4 or 8 bytes (a narrower unsigned value
 * is zero-extended, a wider one keeps its low bits, as the table's own
 * reads do).  Pointers (kernel and marker names) must be 8 bytes, and the
 * 12-byte objectId keeps its width. */
static int udr_width_ok(unsigned type, unsigned f, unsigned table_width, int64_t width)
{
    if (table_width == 12)
        return width == 12;
    if ((type == CUPTIMON_REC_KERNEL && f == CUPTIMON_FK_name) ||
        (type == CUPTIMON_REC_MARKER && (f == CUPTIMON_FMK_name || f == CUPTIMON_FMK_domain)))
        return width == 8;
    return width == 1 || width == 2 || width == 4 || width == 8;
}

/* Builds l->own[k] from one kind's description; 0, or -1 after udr_fail. */
static int udr_kind(struct cuptimon_layout *l, uint32_t k, const char *kname, json_object *d,
                    uint32_t size)
{
    unsigned type = cuptimon__rec_type_of_kind(k), nnames;
    const char *const *names = cuptimon__rec_field_names(type, &nnames);
    struct cuptimon_rec_layout *L = &l->own[k];
    json_object *fields;
    size_t n;

    memset(L, 0, sizeof(*L));
    L->name = "user-defined";
    L->type = (uint8_t)type;
    L->size = (uint16_t)size;
    if (!json_object_object_get_ex(d, "fields", &fields) ||
        !json_object_is_type(fields, json_type_array)) {
        udr_fail(l, "kind %u (%s): \"fields\" is missing or not an array", k, kname);
        return -1;
    }
    n = json_object_array_length(fields);
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(fields, i), *nm;
        const char *name;
        int64_t off, width;
        unsigned f, want;

        if (e == NULL || !json_object_is_type(e, json_type_object) ||
            !json_object_object_get_ex(e, "field", &nm) ||
            !json_object_is_type(nm, json_type_string)) {
            udr_fail(l, "kind %u (%s): field entry %zu has no \"field\" name", k, kname, i);
            return -1;
        }
        name = json_object_get_string(nm);
        for (f = 0; f < nnames; f++)
            if (strcmp(names[f], name) == 0)
                break;
        if (f == nnames)
            continue; /* a field this build does not read: a later CUPTI's */
        off = udr_int(e, "offset", 0, CUPTIMON_RECORD_MAX);
        width = udr_int(e, "size", 0, CUPTIMON_RECORD_MAX);
        want = cuptimon__rec_field_width(type, f);
        if (off < 0 || width < 0) {
            udr_fail(l, "kind %u (%s): field %s has no valid \"offset\"/\"size\" (integers 0..%u)",
                     k, kname, names[f], CUPTIMON_RECORD_MAX);
            return -1;
        }
        if (L->f[f].width != 0) {
            udr_fail(l, "kind %u (%s): field %s is described twice", k, kname, names[f]);
            return -1;
        }
        if (!udr_width_ok(type, f, want, width)) {
            udr_fail(l, "kind %u (%s): field %s is %lld bytes wide; the decoder reads %s", k, kname,
                     names[f], (long long)width,
                     want == 12                                   ? "it as 12 bytes"
                     : want == 8 && strcmp(names[f], "name") == 0 ? "a name pointer as 8 bytes"
                     : strcmp(names[f], "domain") == 0            ? "a name pointer as 8 bytes"
                                                                  : "1, 2, 4 or 8 bytes");
            return -1;
        }
        if (off < 4 || (uint64_t)off + (uint64_t)width > size) {
            udr_fail(l,
                     "kind %u (%s): field %s at offset %lld (%lld bytes) is not inside the "
                     "record's bytes 4..%u (the first 4 hold the kind)",
                     k, kname, names[f], (long long)off, (long long)width, size);
            return -1;
        }
        for (unsigned g = 0; g < nnames; g++) {
            const struct cuptimon_field *o = &L->f[g];
            if (o->width != 0 && off < o->off + o->width && o->off < off + width) {
                udr_fail(l, "kind %u (%s): field %s at offset %lld overlaps field %s at %u", k,
                         kname, names[f], (long long)off, names[g], o->off);
                return -1;
            }
        }
        L->f[f].off = (uint16_t)off;
        L->f[f].width = (uint8_t)width;
    }
    return 0;
}

int cuptimon__layout_init_udr(struct cuptimon_layout *l, uint32_t cupti_version,
                              const uint32_t *announced, json_object *record_layouts)
{
    int rc = cuptimon__layout_init(l, cupti_version, announced);

    if (record_layouts == NULL)
        return rc;
    if (!json_object_is_type(record_layouts, json_type_object)) {
        udr_fail(l, "record_layouts is not an object; the layout table is used");
        return rc < 0 ? rc : 1;
    }
    json_object_object_foreach(record_layouts, key, d)
    {
        char *end;
        unsigned long k = strtoul(key, &end, 10);
        const char *kname;
        int64_t size;

        if (*end != '\0' || end == key || k == 0 || k >= CUPTIMON_KIND_SLOTS) {
            udr_fail(l, "record_layouts: \"%.40s\" is not an activity kind (1..%u); ignored", key,
                     CUPTIMON_KIND_SLOTS - 1);
            continue;
        }
        kname = cuptimon__kind_name((uint32_t)k) ? cuptimon__kind_name((uint32_t)k) : "?";
        size = d != NULL && json_object_is_type(d, json_type_object)
                   ? udr_int(d, "size", 8, CUPTIMON_RECORD_MAX)
                   : -1;
        l->rec[k] = NULL;
        l->described[k] = 1;
        if (size < 0 || !size_sane((uint32_t)size)) {
            udr_fail(l,
                     "kind %lu (%s): the record \"size\" is missing, outside 8..%u or not a "
                     "multiple of 8",
                     k, kname, CUPTIMON_RECORD_MAX);
            l->state[k] = CUPTIMON_KIND_BAD_LAYOUT;
            l->size[k] = 0; /* unknown: the walk stops there rather than guess */
            continue;
        }
        if (announced != NULL && announced[k] != 0 && announced[k] != size) {
            udr_fail(l, "kind %lu (%s): the described record size %lld is not the announced %u", k,
                     kname, (long long)size, announced[k]);
            l->state[k] = CUPTIMON_KIND_BAD_LAYOUT;
            l->size[k] = 0;
            continue;
        }
        l->size[k] = (uint16_t)size;
        if (cuptimon__rec_type_of_kind((uint32_t)k) == CUPTIMON_REC_NONE) {
            /* Not a kind this build decodes: its size still lets the walk
             * step over it. */
            l->state[k] = CUPTIMON_KIND_UNSUPPORTED;
            continue;
        }
        if (udr_kind(l, (uint32_t)k, kname, d, (uint32_t)size) < 0) {
            l->state[k] = CUPTIMON_KIND_BAD_LAYOUT;
            continue;
        }
        l->state[k] = CUPTIMON_KIND_DECODED;
        l->table_size[k] = (uint16_t)size;
        l->rec[k] = &l->own[k];
        l->user_defined++;
    }
    if (rc == -EPROTONOSUPPORT && l->user_defined == 0)
        return rc;
    /* Every problem left its message in udr_error. */
    return l->udr_error[0] != '\0' || rc > 0 ? 1 : 0;
}

/* ---- the per-session check -------------------------------------------- */

int cuptimon__layout_measured(struct cuptimon_layout *l,
                              const uint32_t measured[CUPTIMON_KIND_SLOTS])
{
    const struct cuptimon_cupti_release *r = l->release;
    int mismatches = 0;

    if (measured == NULL)
        return 0;
    /* A version number two releases report: the row holds only while the
     * sizes agree with it (12.0's 208-byte kernel, not 11.8's 200). */
    if (r != NULL && r->shared_with != NULL) {
        int refuted = 0;
        for (unsigned k = 1; k < CUPTIMON_KIND_SLOTS; k++)
            if (size_sane(measured[k]) && r->kinds[k] != NULL && !l->described[k] &&
                measured[k] != r->kinds[k]->size)
                refuted = 1;
        if (refuted) {
            l->refuted = r;
            l->release = NULL;
            l->version_known = 0;
            for (unsigned k = 1; k < CUPTIMON_KIND_SLOTS; k++) {
                if (l->described[k])
                    continue; /* the producer's own layout does not need the table */
                l->rec[k] = NULL;
                l->table_size[k] = 0;
                l->size[k] = l->announced[k];
                l->state[k] = l->announced[k] ? CUPTIMON_KIND_BAD_VERSION : CUPTIMON_KIND_UNKNOWN;
            }
        }
    }
    for (unsigned k = 1; k < CUPTIMON_KIND_SLOTS; k++) {
        uint32_t m = measured[k];
        if (!size_sane(m))
            continue;
        l->measured[k] = (uint16_t)m;
        switch (l->state[k]) {
        case CUPTIMON_KIND_DECODED:
        case CUPTIMON_KIND_UNCONFIRMED:
            if (l->size[k] == m) {
                l->state[k] = CUPTIMON_KIND_DECODED;
                l->checked[k] = 1;
            } else {
                /* The table (or the description) is wrong for this
                 * libcupti: CUPTI's size walks, nothing is read. */
                l->state[k] = CUPTIMON_KIND_BAD_LAYOUT;
                l->rec[k] = NULL;
                l->size[k] = (uint16_t)m;
                mismatches++;
            }
            break;
        case CUPTIMON_KIND_BAD_LAYOUT:
            l->size[k] = (uint16_t)m;
            mismatches += cuptimon__layout_mismatch(l, k);
            break;
        case CUPTIMON_KIND_UNKNOWN:
            l->state[k] = l->version_known ? CUPTIMON_KIND_UNSUPPORTED : CUPTIMON_KIND_BAD_VERSION;
            l->size[k] = (uint16_t)m;
            break;
        default: /* UNSUPPORTED, BAD_VERSION: walked over by CUPTI's size */
            l->size[k] = (uint16_t)m;
            break;
        }
    }
    return mismatches;
}

int cuptimon__layout_mismatch(const struct cuptimon_layout *l, unsigned k)
{
    return k < CUPTIMON_KIND_SLOTS && l->state[k] == CUPTIMON_KIND_BAD_LAYOUT &&
           l->measured[k] != 0 && l->table_size[k] != 0 && l->measured[k] != l->table_size[k];
}

const char *cuptimon__layout_mismatch_text(const struct cuptimon_layout *l, unsigned k, char *out,
                                           size_t n)
{
    const struct cuptimon_rec_layout *t;
    const char *kn;

    if (k >= CUPTIMON_KIND_SLOTS) {
        snprintf(out, n, "kind %u is no activity kind", k);
        return out;
    }
    t = l->release != NULL ? l->release->kinds[k] : NULL;
    kn = cuptimon__kind_name(k);
    if (l->described[k] || t == NULL)
        snprintf(out, n, "layout mismatch: kind %u, table %u bytes, CUPTI %u (%s: %s)", k,
                 l->table_size[k], l->measured[k], kn ? kn : "?",
                 l->described[k] ? "the producer's own description" : "no table struct");
    else
        snprintf(out, n, "layout mismatch: kind %u, table %u bytes, CUPTI %u (%s: CUDA %s's %s)", k,
                 l->table_size[k], l->measured[k], kn ? kn : "?", l->release->cuda, t->name);
    return out;
}

unsigned cuptimon__layout_sizes_json(json_object *o, uint32_t sizes[CUPTIMON_KIND_SLOTS])
{
    unsigned n = 0;

    memset(sizes, 0, sizeof(uint32_t) * CUPTIMON_KIND_SLOTS);
    if (o == NULL || !json_object_is_type(o, json_type_object))
        return 0;
    json_object_object_foreach(o, key, val)
    {
        char *end;
        unsigned long k = strtoul(key, &end, 10);
        int64_t v = json_object_is_type(val, json_type_int) ? json_object_get_int64(val) : 0;
        if (*end != '\0' || end == key || k >= CUPTIMON_KIND_SLOTS || v <= 0 || v > UINT32_MAX)
            continue;
        sizes[k] = (uint32_t)v;
        n++;
    }
    return n;
}

int cuptimon__record_size_parse(const char *str, size_t n, uint32_t *size, const char **how)
{
    static const char *const hows[] = {"stride", "struct_size"};
    uint32_t v = 0;
    size_t i = 0;

    while (i < n && i < 5 && str[i] >= '0' && str[i] <= '9')
        v = v * 10 + (uint32_t)(str[i++] - '0');
    if (i == 0 || i == 5 || i >= n || str[i] != ' ' || str[0] == '0' || !size_sane(v))
        return -1;
    i++;
    for (size_t h = 0; h < sizeof(hows) / sizeof(hows[0]); h++) {
        size_t len = strlen(hows[h]);
        if (n - i == len && memcmp(str + i, hows[h], len) == 0) {
            *size = v;
            *how = hows[h];
            return 0;
        }
    }
    return -1;
}

int cuptimon__layout_init_meta(struct cuptimon_layout *l, uint32_t cupti_version,
                               const uint32_t *announced, json_object *meta)
{
    json_object *rl = NULL, *only = NULL;
    int rc;

    int udr_only = meta != NULL && json_object_is_type(meta, json_type_object) &&
                   json_object_object_get_ex(meta, "user_defined_records", &only) &&
                   json_object_is_type(only, json_type_boolean) && json_object_get_boolean(only);

    if (meta != NULL && json_object_is_type(meta, json_type_object))
        json_object_object_get_ex(meta, "record_layouts", &rl);
    /* Such a producer's record_sizes are for daemons older than it (its
     * shim announces impossible sizes so that they decode nothing they
     * cannot read): the descriptions say it all. */
    rc = cuptimon__layout_init_udr(l, cupti_version, udr_only ? NULL : announced, rl);
    if (!udr_only)
        return rc;
    /* Every record is one CUPTI laid out as the producer selected: a kind
     * it did not describe has no known size (the table's struct is not
     * what CUPTI wrote), so the walk stops there rather than misread. */
    l->user_defined_only = 1;
    for (unsigned k = 1; k < CUPTIMON_KIND_SLOTS; k++) {
        if (l->described[k])
            continue;
        l->state[k] = CUPTIMON_KIND_UNKNOWN;
        l->size[k] = 0;
        l->table_size[k] = 0;
        l->rec[k] = NULL;
    }
    /* Its records need no table: a CUPTI this build does not know is fine. */
    if (rc == -EPROTONOSUPPORT)
        rc = 0;
    return rc;
}

int cuptimon__layout_table(uint32_t cupti_version, uint32_t sizes[CUPTIMON_KIND_SLOTS])
{
    const struct cuptimon_cupti_release *r = cuptimon__cupti_release(cupti_version);

    memset(sizes, 0, sizeof(uint32_t) * CUPTIMON_KIND_SLOTS);
    if (r == NULL)
        return -EPROTONOSUPPORT;
    for (unsigned k = 1; k < CUPTIMON_KIND_SLOTS; k++)
        if (r->kinds[k] != NULL)
            sizes[k] = r->kinds[k]->size;
    return 0;
}

static const char *const kind_names[] = {
    [0] = "INVALID",
    [1] = "MEMCPY",
    [2] = "MEMSET",
    [3] = "KERNEL",
    [4] = "DRIVER",
    [5] = "RUNTIME",
    [6] = "EVENT",
    [7] = "METRIC",
    [8] = "DEVICE",
    [9] = "CONTEXT",
    [10] = "CONCURRENT_KERNEL",
    [11] = "NAME",
    [12] = "MARKER",
    [13] = "MARKER_DATA",
    [14] = "SOURCE_LOCATOR",
    [15] = "GLOBAL_ACCESS",
    [16] = "BRANCH",
    [17] = "OVERHEAD",
    [18] = "CDP_KERNEL",
    [19] = "PREEMPTION",
    [20] = "ENVIRONMENT",
    [21] = "EVENT_INSTANCE",
    [22] = "MEMCPY2",
    [23] = "METRIC_INSTANCE",
    [24] = "INSTRUCTION_EXECUTION",
    [25] = "UNIFIED_MEMORY_COUNTER",
    [26] = "FUNCTION",
    [27] = "MODULE",
    [28] = "DEVICE_ATTRIBUTE",
    [29] = "SHARED_ACCESS",
    [30] = "PC_SAMPLING",
    [31] = "PC_SAMPLING_RECORD_INFO",
    [32] = "INSTRUCTION_CORRELATION",
    [33] = "OPENACC_DATA",
    [34] = "OPENACC_LAUNCH",
    [35] = "OPENACC_OTHER",
    [36] = "CUDA_EVENT",
    [37] = "STREAM",
    [38] = "SYNCHRONIZATION",
    [39] = "EXTERNAL_CORRELATION",
    [40] = "NVLINK",
    [41] = "INSTANTANEOUS_EVENT",
    [42] = "INSTANTANEOUS_EVENT_INSTANCE",
    [43] = "INSTANTANEOUS_METRIC",
    [44] = "INSTANTANEOUS_METRIC_INSTANCE",
    [45] = "MEMORY",
    [46] = "PCIE",
    [47] = "OPENMP",
    [48] = "INTERNAL_LAUNCH_API",
    [49] = "MEMORY2",
    [50] = "MEMORY_POOL",
    [51] = "GRAPH_TRACE",
    [52] = "JIT",
    [53] = "DEVICE_GRAPH_TRACE",
    [54] = "MEM_DECOMPRESS",
};

const char *cuptimon__kind_name(uint32_t kind)
{
    if (kind < sizeof(kind_names) / sizeof(kind_names[0]))
        return kind_names[kind];
    return NULL;
}

static const char *const type_names[CUPTIMON_EV_TYPES] = {
    [CUPTIMON_EV_NONE] = "none",
    [CUPTIMON_EV_KERNEL] = "kernel",
    [CUPTIMON_EV_MEMCPY] = "memcpy",
    [CUPTIMON_EV_MEMCPY_P2P] = "memcpy_p2p",
    [CUPTIMON_EV_MEMSET] = "memset",
    [CUPTIMON_EV_RUNTIME] = "runtime",
    [CUPTIMON_EV_DRIVER] = "driver",
    [CUPTIMON_EV_EXTERNAL_CORRELATION] = "external_correlation",
    [CUPTIMON_EV_OVERHEAD] = "overhead",
    [CUPTIMON_EV_CUDA_EVENT] = "cuda_event",
    [CUPTIMON_EV_SYNC] = "synchronization",
    [CUPTIMON_EV_MARKER] = "marker",
    [CUPTIMON_EV_MARKER_DATA] = "marker_data",
    [CUPTIMON_EV_NCCL] = "nccl",
};

const char *cuptimon__ev_type_name(unsigned type)
{
    if (type < CUPTIMON_EV_TYPES)
        return type_names[type];
    return "unknown";
}

void cuptimon__decode_stats_add(struct cuptimon_decode_stats *into,
                                const struct cuptimon_decode_stats *from)
{
    into->buffers += from->buffers;
    into->bytes += from->bytes;
    into->decoded_bytes += from->decoded_bytes;
    into->undecodable_bytes += from->undecodable_bytes;
    into->records += from->records;
    for (unsigned k = 0; k < CUPTIMON_KIND_SLOTS; k++) {
        into->by_kind[k] += from->by_kind[k];
        into->skipped_by_kind[k] += from->skipped_by_kind[k];
    }
    into->skipped_unsupported += from->skipped_unsupported;
    into->skipped_bad_layout += from->skipped_bad_layout;
    into->skipped_bad_version += from->skipped_bad_version;
    into->skipped_unconfirmed += from->skipped_unconfirmed;
    into->unknown_kind_stops += from->unknown_kind_stops;
    into->stops_unknown_version += from->stops_unknown_version;
    into->stops_unknown_kind += from->stops_unknown_kind;
    into->stops_layout += from->stops_layout;
    if (from->unknown_kind_stops)
        into->unknown_kind_last = from->unknown_kind_last;
    into->truncated += from->truncated;
    into->bad_times += from->bad_times;
    into->nccl += from->nccl;
    into->nccl_bad += from->nccl_bad;
}

const char *cuptimon__undecodable_causes(const struct cuptimon_decode_stats *st, char *out,
                                         size_t n)
{
    const struct {
        uint64_t count;
        const char *name;
    } c[] = {
        {st->skipped_bad_layout + st->stops_layout, "layout mismatch"},
        {st->skipped_bad_version + st->stops_unknown_version, "unknown version"},
        {st->skipped_unconfirmed, "unverified layout"},
        {st->stops_unknown_kind, "unknown kind"},
        {st->skipped_unsupported, "unsupported kind"},
        {st->truncated, "truncated"},
    };
    size_t len = 0;
    int any = 0;

    if (n == 0)
        return out;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        if (c[i].count == 0)
            continue;
        int w = snprintf(out + len, n - len, "%s%s", any ? ", " : "", c[i].name);
        any = 1;
        if (w < 0 || (size_t)w >= n - len)
            break; /* cut short: what fitted stays */
        len += (size_t)w;
    }
    if (!any)
        snprintf(out, n, "none");
    return out;
}

/* ---- field reads ------------------------------------------------------ */

/* Field f of the record r, through the record's layout L (see layouts.h):
 * the offset and width of its CUPTI version; 0 when that version lacks it. */
#define G(P, f)  cuptimon__rec_get(L, r, CUPTIMON_##P##_##f)
#define GS(P, f) ((int32_t)(uint32_t)G(P, f))

/* CUpti_ActivityObjectKindId as three words: processId/threadId for
 * process and thread objects, deviceId/contextId/streamId for the rest
 * (the union's members overlay word for word). */
static void rd_objid(const struct cuptimon_rec_layout *L, const uint8_t *r, unsigned f,
                     struct cuptimon_objid *o)
{
    o->a = cuptimon__rec_word(L, r, f, 0);
    o->b = cuptimon__rec_word(L, r, f, 1);
    o->c = cuptimon__rec_word(L, r, f, 2);
}

/* A user-defined record has processId and threadId where the predefined
 * one has objectKind and objectId: the same thing, as a thread object
 * (CUPTI_ACTIVITY_OBJECT_THREAD, 2; PROCESS, 1, without a thread). */
static void udr_object(const struct cuptimon_rec_layout *L, const uint8_t *r, unsigned objid,
                       unsigned pid, unsigned tid, uint32_t *kind, struct cuptimon_objid *o)
{
    if (L->f[objid].width != 0 || (L->f[pid].width == 0 && L->f[tid].width == 0))
        return;
    *kind = L->f[tid].width ? 2u : 1u;
    o->a = (uint32_t)cuptimon__rec_get(L, r, pid);
    o->b = (uint32_t)cuptimon__rec_get(L, r, tid);
    o->c = 0;
}

/* A kernel's common fields and name; dec_kernel goes on from them. */
static void dec_kernel_common(const struct cuptimon_rec_layout *L, const uint8_t *r,
                              struct cuptimon_ev *ev)
{
    ev->type = CUPTIMON_EV_KERNEL;
    ev->correlation_id = (uint32_t)G(FK, correlationId);
    ev->start = G(FK, start);
    ev->end = G(FK, end);
    ev->device_id = (uint32_t)G(FK, deviceId);
    ev->context_id = (uint32_t)G(FK, contextId);
    ev->stream_id = (uint32_t)G(FK, streamId);
    ev->graph_id = (uint32_t)G(FK, graphId);
    ev->graph_node_id = G(FK, graphNodeId);
    ev->u.kernel.name_ptr = G(FK, name);
}

static void dec_kernel(const struct cuptimon_rec_layout *L, const uint8_t *r,
                       struct cuptimon_ev *ev)
{
    dec_kernel_common(L, r, ev);
    ev->u.kernel.grid_id = (int64_t)G(FK, gridId);
    ev->u.kernel.completed = G(FK, completed);
    ev->u.kernel.queued = G(FK, queued);
    ev->u.kernel.submitted = G(FK, submitted);
    ev->u.kernel.local_memory_total_v2 = G(FK, localMemoryTotal_v2);
    ev->u.kernel.grid_x = GS(FK, gridX);
    ev->u.kernel.grid_y = GS(FK, gridY);
    ev->u.kernel.grid_z = GS(FK, gridZ);
    ev->u.kernel.block_x = GS(FK, blockX);
    ev->u.kernel.block_y = GS(FK, blockY);
    ev->u.kernel.block_z = GS(FK, blockZ);
    ev->u.kernel.static_shared_memory = GS(FK, staticSharedMemory);
    ev->u.kernel.dynamic_shared_memory = GS(FK, dynamicSharedMemory);
    ev->u.kernel.local_memory_per_thread = (uint32_t)G(FK, localMemoryPerThread);
    ev->u.kernel.local_memory_total = (uint32_t)G(FK, localMemoryTotal);
    ev->u.kernel.shared_memory_executed = (uint32_t)G(FK, sharedMemoryExecuted);
    ev->u.kernel.partitioned_global_cache_requested =
        (uint32_t)G(FK, partitionedGlobalCacheRequested);
    ev->u.kernel.partitioned_global_cache_executed =
        (uint32_t)G(FK, partitionedGlobalCacheExecuted);
    ev->u.kernel.shmem_limit_config = (uint32_t)G(FK, shmemLimitConfig);
    ev->u.kernel.channel_id = (uint32_t)G(FK, channelID);
    ev->u.kernel.channel_type = (uint32_t)G(FK, channelType);
    ev->u.kernel.cluster_x = (uint32_t)G(FK, clusterX);
    ev->u.kernel.cluster_y = (uint32_t)G(FK, clusterY);
    ev->u.kernel.cluster_z = (uint32_t)G(FK, clusterZ);
    ev->u.kernel.cluster_scheduling_policy = (uint32_t)G(FK, clusterSchedulingPolicy);
    ev->u.kernel.max_potential_cluster_size = (uint32_t)G(FK, maxPotentialClusterSize);
    ev->u.kernel.max_active_clusters = (uint32_t)G(FK, maxActiveClusters);
    ev->u.kernel.registers_per_thread = (uint16_t)G(FK, registersPerThread);
    ev->u.kernel.cache_config = (uint8_t)G(FK, cacheConfig);
    ev->u.kernel.shared_memory_config = (uint8_t)G(FK, sharedMemoryConfig);
    ev->u.kernel.launch_type = (uint8_t)G(FK, launchType);
    ev->u.kernel.is_shared_memory_carveout_requested =
        (uint8_t)G(FK, isSharedMemoryCarveoutRequested);
    ev->u.kernel.shared_memory_carveout_requested = (uint8_t)G(FK, sharedMemoryCarveoutRequested);
    ev->u.kernel.is_device_launched = (uint8_t)G(FK, isDeviceLaunched);
}

static void dec_memcpy(const struct cuptimon_rec_layout *L, const uint8_t *r,
                       struct cuptimon_ev *ev)
{
    ev->type = CUPTIMON_EV_MEMCPY;
    ev->correlation_id = (uint32_t)G(FMC, correlationId);
    ev->start = G(FMC, start);
    ev->end = G(FMC, end);
    ev->device_id = (uint32_t)G(FMC, deviceId);
    ev->context_id = (uint32_t)G(FMC, contextId);
    ev->stream_id = (uint32_t)G(FMC, streamId);
    ev->graph_id = (uint32_t)G(FMC, graphId);
    ev->graph_node_id = G(FMC, graphNodeId);
    ev->u.memcpy.bytes = G(FMC, bytes);
    ev->u.memcpy.copy_count = G(FMC, copyCount);
    ev->u.memcpy.runtime_correlation_id = (uint32_t)G(FMC, runtimeCorrelationId);
    ev->u.memcpy.channel_id = (uint32_t)G(FMC, channelID);
    ev->u.memcpy.channel_type = (uint32_t)G(FMC, channelType);
    ev->u.memcpy.copy_kind = (uint8_t)G(FMC, copyKind);
    ev->u.memcpy.src_kind = (uint8_t)G(FMC, srcKind);
    ev->u.memcpy.dst_kind = (uint8_t)G(FMC, dstKind);
    ev->u.memcpy.flags = (uint8_t)G(FMC, flags);
    ev->u.memcpy.is_device_launched = (uint8_t)G(FMC, isDeviceLaunched);
}

static void dec_p2p(const struct cuptimon_rec_layout *L, const uint8_t *r, struct cuptimon_ev *ev)
{
    ev->type = CUPTIMON_EV_MEMCPY_P2P;
    ev->correlation_id = (uint32_t)G(FP2P, correlationId);
    ev->start = G(FP2P, start);
    ev->end = G(FP2P, end);
    ev->device_id = (uint32_t)G(FP2P, deviceId);
    ev->context_id = (uint32_t)G(FP2P, contextId);
    ev->stream_id = (uint32_t)G(FP2P, streamId);
    ev->graph_id = (uint32_t)G(FP2P, graphId);
    ev->graph_node_id = G(FP2P, graphNodeId);
    ev->u.memcpy.bytes = G(FP2P, bytes);
    ev->u.memcpy.src_device_id = (uint32_t)G(FP2P, srcDeviceId);
    ev->u.memcpy.src_context_id = (uint32_t)G(FP2P, srcContextId);
    ev->u.memcpy.dst_device_id = (uint32_t)G(FP2P, dstDeviceId);
    ev->u.memcpy.dst_context_id = (uint32_t)G(FP2P, dstContextId);
    ev->u.memcpy.channel_id = (uint32_t)G(FP2P, channelID);
    ev->u.memcpy.channel_type = (uint32_t)G(FP2P, channelType);
    ev->u.memcpy.copy_kind = (uint8_t)G(FP2P, copyKind);
    ev->u.memcpy.src_kind = (uint8_t)G(FP2P, srcKind);
    ev->u.memcpy.dst_kind = (uint8_t)G(FP2P, dstKind);
    ev->u.memcpy.flags = (uint8_t)G(FP2P, flags);
}

static void dec_memset(const struct cuptimon_rec_layout *L, const uint8_t *r,
                       struct cuptimon_ev *ev)
{
    ev->type = CUPTIMON_EV_MEMSET;
    ev->correlation_id = (uint32_t)G(FMS, correlationId);
    ev->start = G(FMS, start);
    ev->end = G(FMS, end);
    ev->device_id = (uint32_t)G(FMS, deviceId);
    ev->context_id = (uint32_t)G(FMS, contextId);
    ev->stream_id = (uint32_t)G(FMS, streamId);
    ev->graph_id = (uint32_t)G(FMS, graphId);
    ev->graph_node_id = G(FMS, graphNodeId);
    ev->u.memset.bytes = G(FMS, bytes);
    ev->u.memset.value = (uint32_t)G(FMS, value);
    ev->u.memset.channel_id = (uint32_t)G(FMS, channelID);
    ev->u.memset.channel_type = (uint32_t)G(FMS, channelType);
    ev->u.memset.flags = (uint16_t)G(FMS, flags);
    ev->u.memset.memory_kind = (uint16_t)G(FMS, memoryKind);
    ev->u.memset.is_device_launched = (uint8_t)G(FMS, isDeviceLaunched);
}

static void dec_api(const struct cuptimon_rec_layout *L, const uint8_t *r, uint32_t kind,
                    struct cuptimon_ev *ev)
{
    ev->type = kind == CUPTIMON_KIND_RUNTIME ? CUPTIMON_EV_RUNTIME : CUPTIMON_EV_DRIVER;
    ev->correlation_id = (uint32_t)G(FAPI, correlationId);
    ev->start = G(FAPI, start);
    ev->end = G(FAPI, end);
    ev->u.api.cbid = (uint32_t)G(FAPI, cbid);
    ev->u.api.process_id = (uint32_t)G(FAPI, processId);
    ev->u.api.thread_id = (uint32_t)G(FAPI, threadId);
    ev->u.api.return_value = (uint32_t)G(FAPI, returnValue);
}

static void dec_ext(const struct cuptimon_rec_layout *L, const uint8_t *r, struct cuptimon_ev *ev)
{
    ev->type = CUPTIMON_EV_EXTERNAL_CORRELATION;
    ev->correlation_id = (uint32_t)G(FEXT, correlationId);
    ev->u.ext.external_kind = (uint32_t)G(FEXT, externalKind);
    ev->u.ext.external_id = G(FEXT, externalId);
}

static void dec_overhead(const struct cuptimon_rec_layout *L, const uint8_t *r,
                         struct cuptimon_ev *ev)
{
    ev->type = CUPTIMON_EV_OVERHEAD;
    ev->correlation_id = (uint32_t)G(FOVH, correlationId);
    ev->start = G(FOVH, start);
    ev->end = G(FOVH, end);
    ev->u.overhead.overhead_kind = (uint32_t)G(FOVH, overheadKind);
    ev->u.overhead.object_kind = (uint32_t)G(FOVH, objectKind);
    rd_objid(L, r, CUPTIMON_FOVH_objectId, &ev->u.overhead.object_id);
    udr_object(L, r, CUPTIMON_FOVH_objectId, CUPTIMON_FOVH_processId, CUPTIMON_FOVH_threadId,
               &ev->u.overhead.object_kind, &ev->u.overhead.object_id);
}

static void dec_cuda_event(const struct cuptimon_rec_layout *L, const uint8_t *r,
                           struct cuptimon_ev *ev)
{
    ev->type = CUPTIMON_EV_CUDA_EVENT;
    ev->correlation_id = (uint32_t)G(FEV, correlationId);
    ev->start = ev->end = G(FEV, deviceTimestamp);
    ev->device_id = (uint32_t)G(FEV, deviceId);
    ev->context_id = (uint32_t)G(FEV, contextId);
    ev->stream_id = (uint32_t)G(FEV, streamId);
    ev->u.cuda_event.event_id = (uint32_t)G(FEV, eventId);
    ev->u.cuda_event.cuda_event_sync_id = G(FEV, cudaEventSyncId);
}

static void dec_sync(const struct cuptimon_rec_layout *L, const uint8_t *r, struct cuptimon_ev *ev)
{
    ev->type = CUPTIMON_EV_SYNC;
    ev->correlation_id = (uint32_t)G(FSYNC, correlationId);
    ev->start = G(FSYNC, start);
    ev->end = G(FSYNC, end);
    ev->context_id = (uint32_t)G(FSYNC, contextId);
    ev->stream_id = (uint32_t)G(FSYNC, streamId);
    ev->u.sync.type = (uint32_t)G(FSYNC, type);
    ev->u.sync.cuda_event_id = (uint32_t)G(FSYNC, cudaEventId);
    ev->u.sync.cuda_event_sync_id = G(FSYNC, cudaEventSyncId);
    ev->u.sync.return_value = (uint32_t)G(FSYNC, returnValue);
}

static void dec_marker(const struct cuptimon_rec_layout *L, const uint8_t *r,
                       struct cuptimon_ev *ev)
{
    ev->type = CUPTIMON_EV_MARKER;
    ev->start = ev->end = G(FMK, timestamp);
    ev->u.marker.flags = (uint32_t)G(FMK, flags);
    ev->u.marker.id = (uint32_t)G(FMK, id);
    ev->u.marker.object_kind = (uint32_t)G(FMK, objectKind);
    rd_objid(L, r, CUPTIMON_FMK_objectId, &ev->u.marker.object_id);
    udr_object(L, r, CUPTIMON_FMK_objectId, CUPTIMON_FMK_processId, CUPTIMON_FMK_threadId,
               &ev->u.marker.object_kind, &ev->u.marker.object_id);
    ev->u.marker.name_ptr = G(FMK, name);
    ev->u.marker.domain_ptr = G(FMK, domain);
}

static void dec_marker_data(const struct cuptimon_rec_layout *L, const uint8_t *r,
                            struct cuptimon_ev *ev)
{
    ev->type = CUPTIMON_EV_MARKER_DATA;
    ev->u.marker_data.flags = (uint32_t)G(FMD, flags);
    ev->u.marker_data.id = (uint32_t)G(FMD, id);
    ev->u.marker_data.payload_kind = (uint32_t)G(FMD, payloadKind);
    ev->u.marker_data.payload = G(FMD, payload);
    ev->u.marker_data.color = (uint32_t)G(FMD, color);
    ev->u.marker_data.category = (uint32_t)G(FMD, category);
    ev->u.marker_data.cupti_domain_id = (uint32_t)G(FMD, cuptiDomainId);
}

/* Decodes the record at r through its layout L; r has at least L->size
 * bytes.  Returns 1 when end < start (counted by the caller). */
static inline int decode_one(const struct cuptimon_rec_layout *L, uint32_t kind, const uint8_t *r,
                             struct cuptimon_ev *ev)
{
    memset(ev, 0, sizeof(*ev));
    ev->cupti_kind = (uint16_t)kind;
    switch (L->type) {
    case CUPTIMON_REC_KERNEL: dec_kernel(L, r, ev); break;
    case CUPTIMON_REC_MEMCPY: dec_memcpy(L, r, ev); break;
    case CUPTIMON_REC_P2P: dec_p2p(L, r, ev); break;
    case CUPTIMON_REC_MEMSET: dec_memset(L, r, ev); break;
    case CUPTIMON_REC_API: dec_api(L, r, kind, ev); break;
    case CUPTIMON_REC_EXT: dec_ext(L, r, ev); break;
    case CUPTIMON_REC_OVERHEAD: dec_overhead(L, r, ev); break;
    case CUPTIMON_REC_CUDA_EVENT: dec_cuda_event(L, r, ev); break;
    case CUPTIMON_REC_SYNC: dec_sync(L, r, ev); break;
    case CUPTIMON_REC_MARKER: dec_marker(L, r, ev); break;
    case CUPTIMON_REC_MARKER_DATA: dec_marker_data(L, r, ev); break;
    default: return 0;
    }
    return ev->end < ev->start;
}

int cuptimon__decode_record(const struct cuptimon_layout *l, const uint8_t *rec, size_t size,
                            struct cuptimon_ev *ev)
{
    uint32_t kind;

    if (size < 4)
        return -EINVAL;
    memcpy(&kind, rec, 4);
    if (kind >= CUPTIMON_KIND_SLOTS || l->state[kind] != CUPTIMON_KIND_DECODED ||
        size != l->table_size[kind])
        return -EINVAL;
    decode_one(l->rec[kind], kind, rec, ev);
    return 0;
}

/* ---- walker ----------------------------------------------------------- */

void cuptimon__walk_begin(struct cuptimon_walk *w, const struct cuptimon_layout *l, const void *buf,
                          size_t len, struct cuptimon_decode_stats *st)
{
    w->p = buf;
    w->len = buf ? len : 0;
    w->off = 0;
    w->l = l;
    w->st = st;
    w->done = 0;
    w->device = 0;
    w->prev_kind = 0;
    st->buffers++;
    st->bytes += w->len;
}

void cuptimon__walk_begin_device(struct cuptimon_walk *w, const struct cuptimon_layout *l,
                                 const void *buf, size_t len, struct cuptimon_decode_stats *st)
{
    cuptimon__walk_begin(w, l, buf, len, st);
    w->device = 1;
}

/* The device walk's read of a record of GPU work (cuptimon__walk_begin_device):
 * the few fields the aggregates use, each at its layout's offset, and
 * nothing else written (the full decode zeroes the 192-byte event first,
 * a tenth of the aggregates' time).  Returns 0 for a record of another
 * type (not decoded). */
static inline int dec_device(const struct cuptimon_rec_layout *L, const uint8_t *r,
                             struct cuptimon_ev *ev)
{
    switch (L->type) {
    case CUPTIMON_REC_KERNEL:
        ev->type = CUPTIMON_EV_KERNEL;
        ev->start = G(FK, start);
        ev->end = G(FK, end);
        ev->device_id = (uint32_t)G(FK, deviceId);
        ev->u.kernel.name_ptr = G(FK, name);
        return 1;
    case CUPTIMON_REC_MEMCPY:
        ev->type = CUPTIMON_EV_MEMCPY;
        ev->start = G(FMC, start);
        ev->end = G(FMC, end);
        ev->device_id = (uint32_t)G(FMC, deviceId);
        ev->u.memcpy.bytes = G(FMC, bytes);
        ev->u.memcpy.copy_kind = (uint8_t)G(FMC, copyKind);
        return 1;
    case CUPTIMON_REC_P2P:
        ev->type = CUPTIMON_EV_MEMCPY_P2P;
        ev->start = G(FP2P, start);
        ev->end = G(FP2P, end);
        ev->device_id = (uint32_t)G(FP2P, deviceId);
        ev->u.memcpy.bytes = G(FP2P, bytes);
        ev->u.memcpy.copy_kind = (uint8_t)G(FP2P, copyKind);
        return 1;
    case CUPTIMON_REC_MEMSET:
        ev->type = CUPTIMON_EV_MEMSET;
        ev->start = G(FMS, start);
        ev->end = G(FMS, end);
        ev->device_id = (uint32_t)G(FMS, deviceId);
        ev->u.memset.bytes = G(FMS, bytes);
        return 1;
    default: return 0;
    }
}

/* Ends the walk, counting what is left as undecodable. */
static int walk_stop(struct cuptimon_walk *w)
{
    w->st->undecodable_bytes += w->len - w->off;
    w->off = w->len;
    w->done = 1;
    return 0;
}

int cuptimon__walk_next(struct cuptimon_walk *w, struct cuptimon_ev *ev)
{
    const struct cuptimon_layout *l = w->l;
    struct cuptimon_decode_stats *st = w->st;

    if (w->done)
        return 0;
    for (;;) {
        size_t left = w->len - w->off;
        uint32_t kind;
        size_t size;

        if (left == 0) {
            w->done = 1;
            return 0;
        }
        if (left < 4) {
            st->truncated++;
            return walk_stop(w);
        }
        memcpy(&kind, w->p + w->off, 4);
        if (kind == CUPTIMON_KIND_NCCL) {
            /* cuptimon's own record (NCCL, issue 46): one fixed layout,
             * whatever the producer's CUPTI. */
            struct cuptimon_nccl_rec r;
            if (left < CUPTIMON_NCCL_REC_SIZE) {
                st->truncated++;
                return walk_stop(w);
            }
            const uint8_t *raw = w->p + w->off;
            w->off += CUPTIMON_NCCL_REC_SIZE;
            w->prev_kind = 0;
            if (cuptimon__nccl_rec_decode(raw, CUPTIMON_NCCL_REC_SIZE, &r, NULL) < 0) {
                st->nccl_bad++;
                st->undecodable_bytes += CUPTIMON_NCCL_REC_SIZE;
                continue;
            }
            memset(ev, 0, sizeof(*ev));
            ev->type = CUPTIMON_EV_NCCL;
            ev->cupti_kind = CUPTIMON_KIND_NCCL;
            ev->start = r.host_start;
            ev->end = r.host_end ? r.host_end : r.host_stop ? r.host_stop : r.host_start;
            if (ev->end < ev->start) {
                st->bad_times++;
                ev->end = ev->start;
            }
            ev->u.nccl.raw = raw;
            ev->u.nccl.tid = r.tid;
            ev->u.nccl.what = r.what;
            st->nccl++;
            st->records++;
            st->decoded_bytes += CUPTIMON_NCCL_REC_SIZE;
            return 1;
        }
        if (kind >= CUPTIMON_KIND_SLOTS || l->size[kind] == 0) {
            /* The size of what follows is unknown: nothing after this
             * point can be located, so none of it is read.  Why, as far
             * as the walker can tell: */
            st->unknown_kind_stops++;
            st->unknown_kind_last = kind;
            if (!l->version_known &&
                (kind == 0 || kind >= CUPTIMON_KIND_SLOTS || l->announced[kind] == 0))
                st->stops_unknown_version++;
            else if ((kind == 0 || kind >= CUPTIMON_KIND_SLOTS) && w->prev_kind != 0 &&
                     !l->checked[w->prev_kind])
                st->stops_layout++; /* no kind where one must start: lost step */
            else
                st->stops_unknown_kind++;
            return walk_stop(w);
        }
        w->prev_kind = kind;
        size = l->size[kind];
        if (size > left) {
            st->truncated++;
            return walk_stop(w);
        }
        if (l->state[kind] != CUPTIMON_KIND_DECODED) {
            st->skipped_by_kind[kind]++;
            st->undecodable_bytes += size;
            if (l->state[kind] == CUPTIMON_KIND_BAD_LAYOUT)
                st->skipped_bad_layout++;
            else if (l->state[kind] == CUPTIMON_KIND_BAD_VERSION)
                st->skipped_bad_version++;
            else if (l->state[kind] == CUPTIMON_KIND_UNCONFIRMED)
                st->skipped_unconfirmed++;
            else
                st->skipped_unsupported++;
            w->off += size;
            continue;
        }
        if (w->device) {
            int dev = dec_device(l->rec[kind], w->p + w->off, ev);
            st->by_kind[kind]++;
            st->records++;
            st->decoded_bytes += size;
            w->off += size;
            if (!dev)
                continue;
            ev->cupti_kind = (uint16_t)kind;
            st->bad_times += ev->end < ev->start;
            return 1;
        }
        st->bad_times += (uint64_t)decode_one(l->rec[kind], kind, w->p + w->off, ev);
        st->by_kind[kind]++;
        st->records++;
        st->decoded_bytes += size;
        w->off += size;
        return 1;
    }
}

int cuptimon__ev_in_range(const struct cuptimon_ev *ev, const struct cuptimon_clock *c,
                          uint64_t from, uint64_t to)
{
    uint64_t s, e;

    if (ev->start == 0 && ev->end == 0)
        return 1;
    s = cuptimon__clock_map(c, ev->start);
    e = cuptimon__clock_map(c, ev->end);
    if (e < s)
        e = s;
    if (e < from)
        return 0;
    if (to != 0 && s >= to)
        return 0;
    return 1;
}

/* ---- names ------------------------------------------------------------ */

const char *cuptimon__memcpy_kind_name(unsigned k)
{
    static const char *const n[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                    "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
    return k < sizeof(n) / sizeof(n[0]) ? n[k] : NULL;
}

const char *cuptimon__memory_kind_name(unsigned k)
{
    static const char *const n[] = {"Unknown", "Pageable", "Pinned",        "Device",
                                    "Array",   "Managed",  "Device Static", "Managed Static"};
    return k < sizeof(n) / sizeof(n[0]) ? n[k] : NULL;
}

/* PyTorch's _OVERHEAD_KIND_NAMES, so both tools name overheads alike.  The
 * values are CUpti_ActivityOverheadKind's, which CUPTI never renumbers. */
const char *cuptimon__overhead_kind_name(uint32_t k)
{
    switch (k) {
    case 0: /* CUPTI_ACTIVITY_OVERHEAD_UNKNOWN */ return "Unknown";
    case 1: /* CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER */ return "Driver Compiler";
    case 1u << 16: /* CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH */ return "Buffer Flush";
    case 2u << 16: /* CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION */ return "Instrumentation";
    case 3u << 16: /* CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE */ return "Resource";
    case 4u << 16: /* CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING */
        return "Runtime Triggered Module Loading";
    case 5u << 16: /* CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING */
        return "Lazy Function Loading";
    case 6u << 16: /* CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL */ return "Command Buffer Full";
    case 7u << 16: /* CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST */
        return "Activity Buffer Request";
    case 8u << 16: /* CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT */ return "UVM Activity Init";
    default: return NULL;
    }
}

const char *cuptimon__sync_type_name(unsigned k)
{
    static const char *const n[] = {"Unknown Sync", "Event Sync", "Stream Wait Event",
                                    "Stream Sync", "Context Sync"};
    return k < sizeof(n) / sizeof(n[0]) ? n[k] : NULL;
}

const char *cuptimon__external_kind_name(unsigned k)
{
    static const char *const n[] = {"invalid", "unknown", "openacc",
                                    "custom0", "custom1", "custom2"};
    return k < sizeof(n) / sizeof(n[0]) ? n[k] : NULL;
}
