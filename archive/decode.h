/*
 * The decoder: walks raw CUPTI activity buffers that another process
 * produced and turns their records into decoded events.
 *
 * A buffer is CUPTI records packed back to back, each starting with its
 * CUpti_ActivityKind (uint32) and each as long as the struct CUPTI uses for
 * that kind in the producer's CUPTI API version (always a multiple of 8).
 * The layouts (field offsets and record sizes) come from the project's
 * table of CUPTI releases (proto/layouts.h), chosen by the CUPTI API
 * version the producer reported in its hello, so one daemon decodes
 * CUDA 12.x and 13.x producers side by side.  A producer may announce its
 * own per-kind sizes (the hello's record_sizes); a size that disagrees with
 * its release's table marks the kind "unknown layout": its records are
 * walked over and counted, never decoded, because a different size means
 * different offsets and guessing them would misread fields.  The table is
 * checked, not trusted: a producer measures the sizes its libcupti really
 * uses (cuptiActivityGetStructSize, the stride of CUPTI's own walker) and
 * cuptimon__layout_measured applies them, so that a wrong table entry is
 * walked by CUPTI's size and counted, never mis-stepped.  A version no
 * release in the table claims decodes nothing (every record is counted as
 * skipped under an unknown version).
 *
 * Every byte is untrusted: the walker reads only inside the buffer, reads
 * fields with memcpy (buffers need not be aligned), and accounts for every
 * byte as decoded or undecodable.  Pointer fields (kernel and marker names)
 * are pointer VALUES from the producer's address space: they are carried
 * as integers and resolved through the producer's string table
 * (strtab.h), never dereferenced.
 */
#ifndef CUPTIMON_DECODE_H
#define CUPTIMON_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "layouts.h"

/* CUPTI activity kinds are small numbers (54 in CUDA 13.0); a kind at or
 * above this is unknown whatever the producer announces.  The layout
 * table's bound: one number for both. */
#define CUPTIMON_KIND_SLOTS CUPTIMON_LAYOUT_KINDS
/* The largest record size a producer may announce; anything bigger, not a
 * multiple of 8, or smaller than 8 is absurd and ignored. */
#define CUPTIMON_RECORD_MAX 4096u

/* What a decoded event is.  KERNEL covers CUPTI's KERNEL and
 * CONCURRENT_KERNEL kinds (one struct). */
enum cuptimon_ev_type {
    CUPTIMON_EV_NONE = 0,
    CUPTIMON_EV_KERNEL,
    CUPTIMON_EV_MEMCPY,
    CUPTIMON_EV_MEMCPY_P2P,
    CUPTIMON_EV_MEMSET,
    CUPTIMON_EV_RUNTIME,
    CUPTIMON_EV_DRIVER,
    CUPTIMON_EV_EXTERNAL_CORRELATION,
    CUPTIMON_EV_OVERHEAD,
    CUPTIMON_EV_CUDA_EVENT,
    CUPTIMON_EV_SYNC,
    CUPTIMON_EV_MARKER,
    CUPTIMON_EV_MARKER_DATA,
    /* cuptimon's own record of an NCCL operation or communicator state
     * (CUPTIMON_KIND_NCCL, cuptimon-proto.h): start = host start, end =
     * when the GPU finished it (else when NCCL enqueued it), both already
     * Unix ns (the chunk's pair maps them to themselves). */
    CUPTIMON_EV_NCCL,
    CUPTIMON_EV_TYPES
};

/* CUpti_ActivityObjectKindId as raw words: for PROCESS/THREAD objects
 * a = processId, b = threadId; for DEVICE/CONTEXT/STREAM objects
 * a = deviceId, b = contextId, c = streamId. */
struct cuptimon_objid {
    uint32_t a, b, c;
};

/*
 * One decoded record.  Fields common to several kinds sit at the top;
 * the rest are in the union member named after the type.  Times are
 * CUPTI timestamps (ns in CUPTI's timebase, not yet mapped to Unix time:
 * see cuptimon__clock_map); for kinds with one timestamp (CUDA event
 * device timestamp, marker timestamp) start == end == it; kinds without a
 * time (external correlation, marker data) have start == end == 0.
 */
struct cuptimon_ev {
    uint16_t type;       /* enum cuptimon_ev_type */
    uint16_t cupti_kind; /* the record's CUpti_ActivityKind */
    uint32_t correlation_id;
    uint64_t start;
    uint64_t end;
    /* GPU work, CUDA events, synchronization (device_id is 0 where the
     * record has none: synchronization). */
    uint32_t device_id;
    uint32_t context_id;
    uint32_t stream_id;
    uint32_t graph_id;
    uint64_t graph_node_id;
    union {
        struct {
            uint64_t name_ptr; /* producer pointer value: look up, never dereference */
            int64_t grid_id;
            uint64_t completed, queued, submitted;
            uint64_t local_memory_total_v2;
            int32_t grid_x, grid_y, grid_z;
            int32_t block_x, block_y, block_z;
            int32_t static_shared_memory;
            int32_t dynamic_shared_memory;
            uint32_t local_memory_per_thread;
            uint32_t local_memory_total;
            uint32_t shared_memory_executed;
            uint32_t partitioned_global_cache_requested;
            uint32_t partitioned_global_cache_executed;
            uint32_t shmem_limit_config;
            uint32_t channel_id, channel_type;
            uint32_t cluster_x, cluster_y, cluster_z;
            uint32_t cluster_scheduling_policy;
            uint32_t max_potential_cluster_size, max_active_clusters;
            uint16_t registers_per_thread;
            uint8_t cache_config; /* requested in the low nibble, executed in the high */
            uint8_t shared_memory_config;
            uint8_t launch_type;
            uint8_t is_shared_memory_carveout_requested;
            uint8_t shared_memory_carveout_requested;
            uint8_t is_device_launched;
        } kernel;
        struct { /* MEMCPY and MEMCPY_P2P */
            uint64_t bytes;
            uint64_t copy_count;                    /* MEMCPY only */
            uint32_t runtime_correlation_id;        /* MEMCPY only */
            uint32_t src_device_id, src_context_id; /* MEMCPY_P2P only */
            uint32_t dst_device_id, dst_context_id; /* MEMCPY_P2P only */
            uint32_t channel_id, channel_type;
            uint8_t copy_kind, src_kind, dst_kind, flags;
            uint8_t is_device_launched; /* MEMCPY only */
        } memcpy;
        struct {
            uint64_t bytes;
            uint32_t value;
            uint32_t channel_id, channel_type;
            uint16_t flags, memory_kind;
            uint8_t is_device_launched;
        } memset;
        struct { /* RUNTIME and DRIVER */
            uint32_t cbid;
            uint32_t process_id;
            uint32_t thread_id;
            uint32_t return_value;
        } api;
        struct {
            uint64_t external_id;
            uint32_t external_kind;
        } ext;
        struct {
            uint32_t overhead_kind;
            uint32_t object_kind;
            struct cuptimon_objid object_id;
        } overhead;
        struct {
            uint64_t cuda_event_sync_id;
            uint32_t event_id;
        } cuda_event;
        struct {
            uint64_t cuda_event_sync_id;
            uint32_t type; /* CUpti_ActivitySynchronizationType */
            uint32_t cuda_event_id;
            uint32_t return_value;
        } sync;
        struct {
            uint64_t name_ptr;   /* producer pointer value (0 on range ends) */
            uint64_t domain_ptr; /* producer pointer value */
            uint32_t flags;      /* CUPTI_ACTIVITY_FLAG_MARKER_* */
            uint32_t id;
            uint32_t object_kind;
            struct cuptimon_objid object_id;
        } marker;
        struct {
            /* The record's bytes in the walked buffer (valid while it is):
             * cuptimon__nccl_rec_decode reads the rest. */
            const uint8_t *raw;
            uint32_t tid;
            uint8_t what; /* CUPTIMON_NCCL_* */
        } nccl;
        struct {
            uint64_t payload; /* raw CUpti_MetricValue bits */
            uint32_t flags, id, payload_kind, color, category, cupti_domain_id;
        } marker_data;
    } u;
};

/* How the walker treats a kind (enum values are stable within a build only). */
enum cuptimon_kind_state {
    CUPTIMON_KIND_UNKNOWN = 0, /* size unknown: walking stops here */
    CUPTIMON_KIND_DECODED,     /* table layout, decoded */
    CUPTIMON_KIND_UNSUPPORTED, /* size announced, kind not decoded here: skipped */
    CUPTIMON_KIND_BAD_LAYOUT,  /* announced size disagrees with the table: skipped */
    CUPTIMON_KIND_BAD_VERSION, /* unknown CUPTI version, size announced: skipped */
    /* A table layout no header confirms (layouts.h, unverified) whose size
     * the producer has not measured: walked by the table's size, not
     * decoded until cuptimon__layout_measured confirms it. */
    CUPTIMON_KIND_UNCONFIRMED,
};

/* The layouts for one producer: its CUPTI version and record sizes. */
struct cuptimon_layout {
    uint32_t cupti_version;
    int version_known;                            /* 1 when a release claims the version */
    const struct cuptimon_cupti_release *release; /* NULL when not known */
    uint16_t size[CUPTIMON_KIND_SLOTS];           /* walk size, 0 = unknown */
    uint16_t table_size[CUPTIMON_KIND_SLOTS];     /* this build's size, 0 = not decoded */
    uint16_t announced[CUPTIMON_KIND_SLOTS];      /* producer's size, 0 = none/absurd */
    uint8_t state[CUPTIMON_KIND_SLOTS];           /* enum cuptimon_kind_state */
    const struct cuptimon_rec_layout *rec[CUPTIMON_KIND_SLOTS]; /* decoded kinds' layouts */
    /* The producer's measured sizes (cuptimon__layout_measured), 0 where
     * none: checked[k] when kind k's measured size is the size it is
     * decoded by (the table's, or a described one), so that its layout is
     * confirmed for this session. */
    uint16_t measured[CUPTIMON_KIND_SLOTS];
    uint8_t checked[CUPTIMON_KIND_SLOTS];
    /* The release the version named, when a measured size showed the
     * producer to be the other release of a shared version number (CUPTI
     * API version 18 with 11.8's 200-byte kernel record); release is then
     * NULL and the version unknown. */
    const struct cuptimon_cupti_release *refuted;
    /* CUPTI 13.2+ user-defined records (cuptimon__layout_init_udr): kinds
     * whose layout the producer described decode through own[] (rec[k]
     * points into this struct, so a layout is never copied by value). */
    unsigned user_defined; /* kinds decoded through a described layout */
    int user_defined_only; /* every record is user-defined: undescribed kinds unknown */
    char udr_error[256];   /* the first problem found in it, "" when none */
    unsigned char described[CUPTIMON_KIND_SLOTS]; /* the producer described kind k */
    struct cuptimon_rec_layout own[CUPTIMON_KIND_SLOTS];
};

/*
 * Builds the layouts for a producer.  announced (may be NULL) holds
 * CUPTIMON_KIND_SLOTS sizes indexed by kind, 0 where the producer said
 * nothing.  Returns 0; -EPROTONOSUPPORT when the CUPTI version is not one
 * this build knows (the layout is still usable: nothing is decoded, kinds
 * with an announced size are walked over and counted); or 1 when at least
 * one announced size disagreed with the table (those kinds are
 * CUPTIMON_KIND_BAD_LAYOUT; see state[]).
 */
int cuptimon__layout_init(struct cuptimon_layout *l, uint32_t cupti_version,
                          const uint32_t *announced);

/*
 * cuptimon__layout_init, then the producer's own description of its
 * records (a hello's / meta.json's "record_layouts", built by a shim from
 * CUPTI 13.2+'s user-defined activity records) on top: for each kind it
 * describes, the record size and each field's offset and size, decoded
 * without a table, so that a CUPTI released after this build decodes.
 * The description comes from the producer and is checked like any other
 * producer input: {"<kind>": {"size": N, "fields": [{"field": "gridX",
 * "offset": O, "size": S}, ...]}, ...}, field names being CUPTI's member
 * names (layouts.h); a name this build does not know is ignored; every
 * field must lie after the 4-byte kind, inside the record, once,
 * overlapping no other, 1, 2, 4 or 8 bytes wide (the decoder reads it at
 * that width; a name pointer must be 8 bytes, objectId 12).  A kind with any problem
 * is CUPTIMON_KIND_BAD_LAYOUT (walked over by its size when that is sane,
 * counted, never decoded) and the first problem, naming the kind and the
 * field, is in l->udr_error.  record_layouts NULL: exactly
 * cuptimon__layout_init.  Returns as cuptimon__layout_init does, except
 * that a version this build does not know is no longer -EPROTONOSUPPORT
 * once a kind decodes through a described layout, and any problem in the
 * description returns 1.
 */
struct json_object;
int cuptimon__layout_init_udr(struct cuptimon_layout *l, uint32_t cupti_version,
                              const uint32_t *announced, struct json_object *record_layouts);

/*
 * The per-session check: measured[k] (CUPTIMON_KIND_SLOTS entries, 0 where
 * not measured) is the size of kind k's record in the producer's running
 * libcupti, as cuptiActivityGetStructSize gives it or as CUPTI's own
 * cuptiActivityGetNextRecord steps.  On a layout from cuptimon__layout_init
 * (or _udr): a kind decoded at that size is confirmed (checked[k]); one
 * decoded at another size becomes CUPTIMON_KIND_BAD_LAYOUT, walked over by
 * the measured size and counted, never decoded (the table is wrong for this
 * libcupti); an unverified table layout (CUPTIMON_KIND_UNCONFIRMED) is
 * decoded once its size is confirmed so; a kind no size was known for is
 * walked over by it.  A release
 * whose version number another release shares (shared_with) holds only
 * while no measured size of a kind it decodes disagrees with it; otherwise
 * it is dropped (l->refuted) and the version counts as unknown.  Sizes that
 * are not sane are ignored.  Returns the number of kinds whose measured
 * size disagrees with the size they were to be decoded by.
 */
int cuptimon__layout_measured(struct cuptimon_layout *l,
                              const uint32_t measured[CUPTIMON_KIND_SLOTS]);

/* 1 when kind k's measured size disagrees with the table's (or a
 * described) size for it: a layout mismatch, for status and messages. */
int cuptimon__layout_mismatch(const struct cuptimon_layout *l, unsigned k);

/* "layout mismatch: kind 10, table 216 bytes, CUPTI 224
 * (CONCURRENT_KERNEL: CUDA 13.1-13.2's CUpti_ActivityKernel11)" for kind
 * k of a layout where cuptimon__layout_mismatch(l, k); out (n bytes) is
 * returned. */
const char *cuptimon__layout_mismatch_text(const struct cuptimon_layout *l, unsigned k, char *out,
                                           size_t n);

/* The sizes of a {"<kind>": bytes, ...} object (a hello's or meta.json's
 * record_sizes or record_sizes_measured) into sizes[CUPTIMON_KIND_SLOTS]:
 * 0 where a kind is absent, out of range, or not an integer in
 * 1..UINT32_MAX (absurd sizes are left to the layout functions to
 * refuse).  o may be NULL or not an object.  Returns how many were set. */
struct json_object;
unsigned cuptimon__layout_sizes_json(struct json_object *o, uint32_t sizes[CUPTIMON_KIND_SLOTS]);

/* A measured record size as the shim sends it in the string table
 * (cuptimon-proto.h, CUPTIMON_RECORD_SIZE_KEY): "BYTES HOW" (n bytes, not
 * necessarily terminated), BYTES a decimal multiple of 8 in
 * 8..CUPTIMON_RECORD_MAX, HOW "stride" or "struct_size".  Returns 0 with
 * *size and *how (a static string) set, or -1. */
int cuptimon__record_size_parse(const char *str, size_t n, uint32_t *size, const char **how);

/*
 * The layouts of a producer as its hello or meta.json describes them:
 * cuptimon__layout_init_udr with its "record_layouts", and, when it says
 * "user_defined_records": true (a shim on CUPTI's v2 path, where every
 * kind is a user-defined record), no table layout for any kind it did not
 * describe: such a kind's size is unknown (the walk stops at it).
 * Returns as cuptimon__layout_init_udr does, but 0 for an unknown version
 * when it says "user_defined_records" (it needs no table).
 */
int cuptimon__layout_init_meta(struct cuptimon_layout *l, uint32_t cupti_version,
                               const uint32_t *announced, struct json_object *meta);

/* The record sizes of the release that cupti_version belongs to, for a
 * hello or a meta file: fills sizes[CUPTIMON_KIND_SLOTS] (0 for kinds not
 * decoded).  Returns 0, or -EPROTONOSUPPORT (all zeros) when no release in
 * the table claims the version. */
int cuptimon__layout_table(uint32_t cupti_version, uint32_t sizes[CUPTIMON_KIND_SLOTS]);

/* A short name for a CUPTI activity kind ("CONCURRENT_KERNEL"), or NULL. */
const char *cuptimon__kind_name(uint32_t kind);
/* The decoded type's name ("kernel", "memcpy", ...), never NULL. */
const char *cuptimon__ev_type_name(unsigned type);

/* Counters; add up over any number of buffers.  Every byte of every buffer
 * is in exactly one of decoded_bytes and undecodable_bytes. */
struct cuptimon_decode_stats {
    uint64_t buffers;
    uint64_t bytes;
    uint64_t decoded_bytes;
    uint64_t undecodable_bytes;
    uint64_t records;                              /* decoded */
    uint64_t by_kind[CUPTIMON_KIND_SLOTS];         /* decoded, by CUPTI kind */
    uint64_t skipped_by_kind[CUPTIMON_KIND_SLOTS]; /* walked over, not decoded */
    uint64_t skipped_unsupported;                  /* records of kinds not decoded here */
    uint64_t skipped_bad_layout;                   /* records whose announced size disagreed */
    uint64_t skipped_bad_version;                  /* records under an unknown CUPTI version */
    uint64_t skipped_unconfirmed;                  /* records of an unverified, unmeasured layout */
    uint64_t unknown_kind_stops;                   /* buffers cut short at a kind of unknown size */
    uint64_t unknown_kind_last;                    /* the last such kind value, for reports */
    /* unknown_kind_stops by cause: under an unknown CUPTI version (no size
     * announced for the kind); at a kind number whose size nobody gave; at
     * a value that is no activity kind at all, after a record walked by a
     * size the producer never confirmed: the walk lost step there, which is
     * what a wrong table size does (a layout mismatch). */
    uint64_t stops_unknown_version;
    uint64_t stops_unknown_kind;
    uint64_t stops_layout;
    uint64_t truncated; /* buffers ending inside a record */
    uint64_t bad_times; /* decoded records with end < start */
    uint64_t nccl;      /* cuptimon's NCCL records decoded (not in by_kind) */
    uint64_t nccl_bad;  /* ... refused (damaged: counted undecodable, skipped) */
};

void cuptimon__decode_stats_add(struct cuptimon_decode_stats *into,
                                const struct cuptimon_decode_stats *from);

/* The causes of what was not decoded, named for a reader: "layout
 * mismatch, unknown version" (records of a kind whose size disagreed with
 * the table, or a walk that lost step; records under an unknown CUPTI
 * version; "unverified layout": records of a layout no header confirms,
 * whose size the producer never measured; "unknown kind": buffers cut at a
 * kind of no known size; "unsupported kind": records of kinds not decoded
 * here; "truncated"), or "none".  Writes at most n bytes to out and
 * returns out. */
const char *cuptimon__undecodable_causes(const struct cuptimon_decode_stats *st, char *out,
                                         size_t n);

/* An iterator over one buffer.  The buffer must stay valid while it is
 * used; the stats are updated as it goes and complete when next returns 0. */
struct cuptimon_walk {
    const uint8_t *p;
    size_t len;
    size_t off;
    const struct cuptimon_layout *l;
    struct cuptimon_decode_stats *st;
    int done;
    int device;         /* cuptimon__walk_begin_device */
    uint32_t prev_kind; /* the record before the current one (0: none yet) */
};

void cuptimon__walk_begin(struct cuptimon_walk *w, const struct cuptimon_layout *l, const void *buf,
                          size_t len, struct cuptimon_decode_stats *st);
/* As cuptimon__walk_begin, for the live aggregates, which read every
 * record of GPU work on the node (issue 49): cuptimon__walk_next returns
 * only kernels, copies (MEMCPY and MEMCPY_P2P) and memsets, with type,
 * cupti_kind, start, end, device_id and, of a kernel, u.kernel.name_ptr, of
 * a copy u.memcpy.bytes and copy_kind, of a memset u.memset.bytes; every
 * other field of *ev is left as it was (not zeroed).  Records of other
 * types are counted in the stats as the full walk counts them, except
 * bad_times, which counts only the records returned. */
void cuptimon__walk_begin_device(struct cuptimon_walk *w, const struct cuptimon_layout *l,
                                 const void *buf, size_t len, struct cuptimon_decode_stats *st);
/* 1 with *ev filled, or 0 at the end of the buffer. */
int cuptimon__walk_next(struct cuptimon_walk *w, struct cuptimon_ev *ev);

/* Decodes one record of a known layout at rec (size bytes, the table size
 * for kind): used by the walker, exposed for tests.  Returns 0 or -EINVAL
 * when kind is not decoded or size is not the table size. */
int cuptimon__decode_record(const struct cuptimon_layout *l, const uint8_t *rec, size_t size,
                            struct cuptimon_ev *ev);

/* A (CUPTI timestamp, CLOCK_REALTIME ns) pair sampled together at buffer
 * completion. */
struct cuptimon_clock {
    uint64_t cupti_ts;
    uint64_t unix_ns;
};

/* Maps a record timestamp to Unix ns: t - cupti_ts + unix_ns (the identity
 * with CUPTI's default CLOCK_REALTIME timebase).  0 (no timestamp) stays 0.
 * A function so that a later change can interpolate between several pairs. */
static inline uint64_t cuptimon__clock_map(const struct cuptimon_clock *c, uint64_t t)
{
    if (t == 0 || c == NULL)
        return t;
    return t - c->cupti_ts + c->unix_ns; /* modular on purpose */
}

/* 1 when the event overlaps the Unix-ns range [from, to) (to == 0: no end),
 * or has no time of its own (external correlation, marker data). */
int cuptimon__ev_in_range(const struct cuptimon_ev *ev, const struct cuptimon_clock *c,
                          uint64_t from, uint64_t to);

/* Names for the small enums a trace shows; NULL when out of range. */
const char *cuptimon__memcpy_kind_name(unsigned k);   /* "HtoD", "DtoH", ... */
const char *cuptimon__memory_kind_name(unsigned k);   /* "Pageable", "Device", ... */
const char *cuptimon__overhead_kind_name(uint32_t k); /* PyTorch's names */
const char *cuptimon__sync_type_name(unsigned k);     /* "Event Sync", ... */
const char *cuptimon__external_kind_name(unsigned k); /* "custom0", ... */

#endif
