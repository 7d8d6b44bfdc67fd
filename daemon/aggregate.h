/*
 * Live aggregates (issue 12): what `cuptimonctl top` and the Prometheus
 * metrics show, kept by the daemon from the always-on kernel, memcpy and
 * memset records while it archives them.
 *
 * Feeding.  Each archived buffer is walked once more with the decoder
 * (cuptimon__walk_*) on the worker thread that wrote it, and its records
 * are added to:
 *   - per session and per kernel: launches, GPU ns, min/max, and a duration
 *     histogram (HDR-style: 8 linear sub-buckets per power of two, so a
 *     percentile reported as its bucket's midpoint is within 6.25% of the
 *     true value; exact below 8 ns; durations past 2^38 ns, 4.6 minutes,
 *     share the top bucket and are reported as the maximum seen);
 *   - per session: memcpy and memset counts, bytes and GPU ns, records
 *     walked, undecodable bytes, and the handoff latency (buffer completed
 *     in the shim -> aggregated here, right after the archive write);
 *   - per device: the GPU busy time, the union of kernel intervals per 1-s
 *     bucket (overlapping kernels, of one process or several, count once),
 *     for the last 60 s; memcpy bytes by direction and memset bytes, per
 *     1-s bucket and in total.
 * A "kernel" is a (name pointer, device) pair of one session; the JSON and
 * the metrics merge them by name as the reader asks.
 *
 * Bounded memory.  Per session at most 2 * top_n kernels are kept (top_n
 * defaults to 64).  Once the table is full, a new kernel's launches go to
 * that session's "other" (per device) and to a small admission sketch
 * (256 sums of GPU ns by hash); when the sketch says the newcomer took more
 * GPU time than the lightest kept kernel, it replaces that one, which is
 * folded into other.  Totals stay exact, the heavy kernels stay named, and
 * a churn of rare names costs a hash per launch; a kernel admitted late
 * counts from its admission (what it did before is in other).  Output
 * shows the top_n by time and folds the rest into "other" too.  At most
 * max_sessions sessions (default 512; records of sessions beyond are
 * counted, not aggregated; ended ones make room), 16 devices per session
 * and max_devices distinct device ids (default 16; records on others are
 * counted, not aggregated).  Kernel names are interned once for all
 * sessions, at most 16 MiB of them (a name past that shows as its
 * pointer).  For the busy union a device keeps its newest 65536 kernel
 * intervals (merged where they overlap or touch; about 0.3 s of the
 * densest real trace, 1-us kernels back to back); when the list is full
 * the oldest quarter is released, and a later interval over released time
 * is added without a union check: that time is reported as
 * busy_unchecked_ns, the bound of the possible over-count (none when
 * processes do not overlap on a GPU, the case without MPS, and none for
 * one process whose buffers arrive in order).  Worst case, with the
 * defaults:
 *     512 sessions * ((128 + 16) kernels * 1.2 KiB + 2 KiB)  ~=  88 MiB
 *   + 16 MiB of names
 *   +  16 devices  * (65536 * 16 B + 64 KiB + 64 * 216 B)      ~=  18 MiB
 * and typical use (a few processes, tens of kernels, 1-8 GPUs) well under
 * 10 MiB.  Everything is allocated as it is first needed.  The cost of
 * the union is bounded as well: a buffer's kernels are sorted (nearly
 * sorted already: insertion sort) and merged in one pass per 2048
 * records, so out-of-order or hostile timestamps cost at most
 * O(m log m + 65536) per 2048 records, never a memmove per record.
 *
 * Threads.  cuptimon__agg_add_buffer runs on any worker thread, several at
 * once (one per session at a time); the other functions on any thread,
 * typically the loop thread.  Each session has its own lock (held while
 * one of its buffers is walked), the devices share one (held while a
 * buffer's merged intervals are added), and output takes a global lock
 * while it copies.  Names are resolved through the session's string table
 * while its buffer is added (the caller's table, on the thread that also
 * fills it) and copied: output never reads a producer's table.
 *
 * Device ids are the producer's CUDA device ordinals: two processes with
 * different CUDA_VISIBLE_DEVICES name the same GPU differently, and the
 * per-device view adds them up under the ordinal they reported.
 */
#ifndef CUPTIMON_AGGREGATE_H
#define CUPTIMON_AGGREGATE_H

#include <stddef.h>
#include <stdint.h>

#include "archive/decode.h"

struct cuptimon_agg;
struct cuptimon_strtab;
struct json_object;

struct cuptimon_agg_limits {
    unsigned top_n;        /* kernels shown (and 2x kept) per session; 0: 64 */
    unsigned max_sessions; /* 0: 512 */
    unsigned max_devices;  /* distinct device ids; 0: 16 */
    /* How far a record's end may lie ahead of the daemon's clock before it
     * is kept out of the busy ring (one from far ahead would push every
     * device's ring past everyone's data); 0: 60 s.  Tests replaying old
     * or future captures set it large. */
    uint32_t future_s;
    /* How long a session that ended (cuptimon__agg_end) is still shown,
     * so that a short job is seen by top and by at least one scrape; 0: 60
     * s.  Ended sessions give their place to new ones when the table is
     * full. */
    uint32_t keep_ended_s;
    /* How long a device's records wait for the node map to list its GPU
     * (node_of said -1), so that they are not counted on the process's
     * ordinal, a wrong GPU under CUDA_VISIBLE_DEVICES; 0: 15 s.  Past it
     * (or past 32768 records a session) they count on that ordinal, and
     * cuptimon__agg_stats says how many did. */
    uint32_t map_wait_s;
};

/* lim may be NULL for the defaults.  0, -EINVAL (a limit absurdly large:
 * top_n > 4096, max_sessions > 65536, max_devices > 1024) or -ENOMEM. */
int cuptimon__agg_new(const struct cuptimon_agg_limits *lim, struct cuptimon_agg **out);
/* Accepts NULL.  No other call may be running. */
void cuptimon__agg_free(struct cuptimon_agg *a);

/*
 * How a process's device becomes the node's GPU.  A record carries the
 * CUDA ordinal its process saw, which under CUDA_VISIBLE_DEVICES is not the
 * node's; the shim sends each ordinal's UUID (CUPTIMON_DEVICE_UUID_KEY).
 * node_of returns the node ordinal of a GPU's UUID, -1 while its list may
 * still gain it (the GPU metrics' device list, being read:
 * cuptimon__gpm_node_of), or -2 once it never will.  Without it, or for a
 * device without a UUID or one node_of does not know, the process's
 * ordinal stands; node_of is asked again at the session's next buffer
 * only after a -1, and the records of a device it said -1 for wait for
 * its answer (map_wait_s, struct cuptimon_agg_limits).  Set it before the
 * first buffer; node_of may be called from any thread that adds a buffer.
 */
void cuptimon__agg_set_node_map(struct cuptimon_agg *a, int (*node_of)(void *ud, const char *uuid),
                                void *ud);

/* Who a session is.  Strings may be NULL (unset); they are copied (cut at
 * the sizes in struct cuptimon_agg_query). */
struct cuptimon_agg_ident {
    int64_t pid;
    uint32_t uid;
    const char *job;   /* SLURM_JOB_ID, else TORCHELASTIC_RUN_ID */
    const char *rank;  /* RANK */
    const char *label; /* CUPTIMON_LABEL */
    const char *exe;
};

/* From a producer's hello (the daemon keeps it as JSON): the layout for
 * cuptimon__agg_add_buffer from its cupti_version and record_sizes (the
 * rule of cuptimonctl decode), and the job, rank and label of its "job"
 * object (job: slurm_job_id, else torchelastic_run_id).  The ident's
 * strings point into hello; pid, uid and exe are the caller's (the pid the
 * kernel vouches for, SO_PEERCRED).  The layout function returns what
 * cuptimon__layout_init returns (the layout is usable whatever it says). */
int cuptimon__agg_layout_from_hello(struct json_object *hello, struct cuptimon_layout *l);
void cuptimon__agg_ident_from_hello(struct json_object *hello, struct cuptimon_agg_ident *id);

/*
 * Creates the session (id may be NULL at first) or updates it: id, when
 * not NULL, replaces the identity; dropped (records CUPTI dropped) and
 * lost (buffers lost) are the session's totals so far and replace the
 * previous ones.  Call it at the hello and whenever the counters change.
 * Returns 0, -ENOSPC (max_sessions live ones: not aggregated) or -ENOMEM.
 */
int cuptimon__agg_session(struct cuptimon_agg *a, uint64_t session,
                          const struct cuptimon_agg_ident *id, uint64_t dropped, uint64_t lost);

/* The CUPTI activity API a session uses ("v1", "v2+udr") and the bytes of
 * its kernel records, for the metrics; call it at the hello and when its
 * layouts change.  An unknown session is ignored. */
void cuptimon__agg_session_path(struct cuptimon_agg *a, uint64_t session, const char *path,
                                uint32_t record_bytes_per_kernel);

/* What CUPTI holds in the process behind running work (a HELD report):
 * since_ns, when its oldest incomplete record was first seen (Unix ns; 0:
 * none), what it is (a short text), the records and bytes behind it, and
 * the bytes its pool grew by.  For top and the metrics.  An unknown
 * session is ignored.
 *
 * When it is a kernel (kernel set; device: the process's ordinal), the
 * device counts as busy from since_ns to now in the busy ratios (busy_1s,
 * _10s, _60s, busy_series, cuptimon_gpu_busy_ratio): no record of it
 * arrives while it runs, and a GPU running an 8-s kernel is not idle for
 * 8 s.  Each second of the window is busy for at least the part of it
 * the kernel covered (the union with the records' time, never the sum).
 * The device is the node's GPU through the process's UUIDs
 * (cuptimon__agg_session_devices); one the node map has not named yet is
 * not counted.  The busy totals (busy_ns_total, the _seconds_total
 * counter) stay the records' alone: the kernel's time joins them when
 * its record comes. */
struct cuptimon_agg_held {
    uint64_t since_ns, records, bytes, grown_bytes;
    uint64_t dropping_since_ns; /* CUPTI's requests declined since (0: not now) */
    const char *what;
    int kernel;
    uint32_t device;
};
void cuptimon__agg_session_held(struct cuptimon_agg *a, uint64_t session,
                                const struct cuptimon_agg_held *h);

/* The process sent the UUIDs of its devices (names: its string table, read
 * only during the call, on the thread that fills it): each ordinal with one
 * is mapped to the node's GPU now, as at its first record, so that work
 * held before any record came (cuptimon__agg_session_held) is on the
 * right GPU.  An unknown session is ignored. */
void cuptimon__agg_session_devices(struct cuptimon_agg *a, uint64_t session,
                                   const struct cuptimon_strtab *names);

/*
 * Adds one buffer of session's records (len bytes at buf, walked with the
 * layout l; names, which may be NULL, resolves kernel names and is only
 * read during the call).  clk (may be NULL: identity) maps CUPTI
 * timestamps to Unix ns; its unix_ns is when the shim saw the buffer
 * complete, from which the handoff latency is measured.  A session not
 * yet known is created with an empty identity.  Returns the number of
 * records aggregated (kernels, memcpys, memsets), -ENOSPC (too many
 * sessions: counted, not aggregated) or -ENOMEM (what was added stays).
 */
int cuptimon__agg_add_buffer(struct cuptimon_agg *a, uint64_t session,
                             const struct cuptimon_layout *l, const struct cuptimon_strtab *names,
                             const void *buf, size_t len, const struct cuptimon_clock *clk);

/* The session ended (its last buffer was added): it stays in the views,
 * marked "ended", for keep_ended_s, then goes as if forgotten.  Unknown
 * ids are ignored. */
void cuptimon__agg_end(struct cuptimon_agg *a, uint64_t session);

/* Drops a session now, with everything it added to the per-session views
 * (the devices keep the busy time and bytes it contributed).  Call it, or
 * cuptimon__agg_end, once the session's last buffer was added.  Unknown
 * ids are ignored. */
/* NCCL (issue 46): session's communicators (status), NULL when it has
 * none; and, once per collective, whether one has been in flight for at
 * least warn_s (1, with a line naming it in out), else 0. */
struct json_object *cuptimon__agg_nccl_json(struct cuptimon_agg *a, uint64_t session);
int cuptimon__agg_nccl_late(struct cuptimon_agg *a, uint64_t session, double warn_s, char *out,
                            size_t n);
void cuptimon__agg_forget(struct cuptimon_agg *a, uint64_t session);

enum cuptimon_agg_by {
    CUPTIMON_AGG_BY_PROCESS = 0,
    CUPTIMON_AGG_BY_KERNEL,
    CUPTIMON_AGG_BY_DEVICE,
};
enum cuptimon_agg_sort {
    CUPTIMON_AGG_SORT_TIME = 0,
    CUPTIMON_AGG_SORT_COUNT,
    CUPTIMON_AGG_SORT_P99,
};

/* What cuptimon__agg_json shows.  Zero-initialised means: by process,
 * sorted by GPU time, no filter, 20 rows, now, a lag of 2 s. */
struct cuptimon_agg_query {
    int by;          /* enum cuptimon_agg_by */
    int sort;        /* enum cuptimon_agg_sort */
    int64_t pid;     /* 0: any */
    char job[128];   /* "": any */
    char rank[32];   /* "": any */
    char label[128]; /* "": any */
    /* Only the sessions of one user: the caller's, for a control client
     * that is not an operator (daemon/control.c sets it; no request key
     * does).  It narrows the rows and the node totals alike; the devices
     * stay the node's, as a GPU's busy time is one union that names no
     * process. */
    int one_uid;  /* 0: every user's sessions */
    uint32_t uid; /* the user, when one_uid */
    unsigned n;   /* rows; 0: 20; at most 1000 */
    /* The busy windows end lag_s seconds before now (data reaches the
     * daemon when the shim hands a buffer over; the default flush period
     * is 1 s).  now_ns 0: the current time; lag_s < 0: the default 2. */
    int64_t now_ns;
    int lag_s;
};

/*
 * Fills *q from a request {"op":"top", "by":"process"|"kernel"|"device",
 * "sort":"time"|"count"|"p99", "pid":P, "job":J, "rank":R, "label":L,
 * "n":N} (every key optional; rank may be a number or a string).  Returns
 * 0, or -EINVAL with *err (when err is not NULL) a malloc'd message naming
 * the key, the value and what is allowed.
 */
int cuptimon__agg_query_from_json(struct json_object *req, struct cuptimon_agg_query *q,
                                  char **err);

/*
 * The view as JSON (the caller puts it), or NULL on allocation failure:
 *   {"now_unix_ns": T, "window_end_unix_ns": E, "by": "kernel", "sort": "time",
 *    "node": {"sessions": S (live), "sessions_ended": E, "sessions_shown": M,
 *             (these and the sums below over q->uid's sessions only, when
 *             q->one_uid; not_aggregated_records is always the node's),
 *             "kernels": K, "kernel_ns": T,
 *             "memcpy_bytes": B, "memcpys": C, "memset_bytes": B, "memsets": C,
 *             "records": R, "dropped_records": D, "lost_buffers": L,
 *             "not_aggregated_records": X},
 *    "devices": [{"device": 0, "busy_1s": r, "busy_10s": r, "busy_60s": r,
 *                 "busy_series": [60 ratios, oldest first], "busy_ns_total": T,
 *                 "busy_unchecked_ns": E, "busy_unchecked_ns_60s": E,
 *                 "kernels": K, "kernel_ns": T,
 *                 "memcpy": {"HtoD": {"bytes": B, "count": C, "bytes_per_s": r}, ...},
 *                 "memset_bytes": B, "memsets": C}, ...],
 *    (busy_* and bytes_per_s over the 1, 10 or 60 s ending at window_end;
 *     bytes and count since the daemon started),
 *    "rows": [...], "total_rows": N, "rest": {"rows": R, "count": C, "total_ns": T}}
 * The header members (node, devices) are always there; rows depend on by:
 *   process: {"session", "pid", "uid", "job", "rank", "label", "exe", "ended", "kernels",
 *             "kernel_ns", "p50_ns", "p90_ns", "p99_ns", "memcpys", "memcpy_bytes",
 *             "memsets", "memset_bytes", "records", "dropped_records",
 *             "lost_buffers", "handoff_p50_ns", "handoff_p99_ns", "handoff_max_ns"}
 *   kernel:  {"name" (demangled, full), "mangled", "count", "total_ns", "mean_ns",
 *             "min_ns", "max_ns", "p50_ns", "p90_ns", "p99_ns", "processes", "other"}
 *            merged by name over the sessions that match the filters; "other"
 *            (true) is the row of what the per-session bound folded away.
 *   device:  the same objects as "devices" (the session filters do not apply:
 *            a device's busy time is one union over every process).
 * Rows are sorted as q->sort asks (devices by id) and cut at q->n; "rest"
 * sums what was cut.
 */
struct json_object *cuptimon__agg_json(struct cuptimon_agg *a, const struct cuptimon_agg_query *q);

/*
 * The Prometheus text exposition format (version 0.0.4) of everything,
 * malloc'd, or NULL on allocation failure:
 *   cuptimon_kernel_seconds_total, cuptimon_kernel_launches_total
 *       {pid, job, rank, label, device, kernel}: counters; kernel is the
 *       demangled name (cut at 200 bytes), at most top_n per session and
 *       device, the rest as kernel="other";
 *   cuptimon_gpu_busy_ratio{device}: gauge, the busy fraction of the last
 *       10 s ending 2 s ago; cuptimon_gpu_busy_seconds_total{device}: the
 *       counter to rate() instead;
 *   cuptimon_memcpy_bytes_total{device, direction},
 *       cuptimon_memset_bytes_total{device}: counters;
 *   cuptimon_dropped_records_total, cuptimon_lost_buffers_total
 *       {pid, job, rank, label}: counters;
 *   cuptimon_handoff_latency_seconds{pid, job, rank, label, quantile}:
 *       summary (0.5, 0.99, _sum, _count);
 *   cuptimon_sessions: gauge, the live sessions aggregated (the series of
 *       one that ended stay, with their final values, for keep_ended_s).
 * Label values are escaped (\\, \", \n) and made valid UTF-8.
 */
char *cuptimon__agg_prometheus(struct cuptimon_agg *a);
/* The same, limited to the sessions of user uid (uid < 0: every user's):
 * the per-session families and cuptimon_sessions count only that user's
 * processes; the per-device families stay the node's (they name no
 * process). */
char *cuptimon__agg_prometheus_of(struct cuptimon_agg *a, int64_t uid);

/* Writes cuptimon__agg_prometheus() to path atomically for node_exporter's
 * textfile collector: into path.tmp in the same directory (a name the
 * collector, which reads *.prom, ignores), mode 0640, then renamed over
 * path (no fsync: it is rewritten every interval), with extra (the GPU
 * metrics' families, may be NULL) after it.  0 or -errno (path.tmp is
 * removed on failure). */
int cuptimon__agg_write_prometheus(struct cuptimon_agg *a, const char *path, const char *extra);

/* Counters of the aggregate itself, for status and tests. */
struct cuptimon_agg_stats {
    uint64_t sessions, buffers, records, aggregated;
    uint64_t not_aggregated; /* records of sessions or devices over the bounds */
    uint64_t folded;         /* kernels folded into "other" by the bound */
    uint64_t bad_times;      /* kernels with end < start or far in the future */
    uint64_t late_ns;        /* busy time older than the 64-s ring (totals only) */
    uint64_t own_ordinal;    /* device records counted on the process's ordinal:
                                the node map did not list their GPU in time */
    uint64_t bytes;          /* memory held by the aggregate (approximate) */
};
void cuptimon__agg_stats(struct cuptimon_agg *a, struct cuptimon_agg_stats *st);

/* The histogram, exposed for tests: the bucket of a duration, a bucket's
 * lowest value and the value it reports (its midpoint, clamped). */
#define CUPTIMON_AGG_HIST_BUCKETS 288u
unsigned cuptimon__agg_hist_index(uint64_t ns);
uint64_t cuptimon__agg_hist_low(unsigned idx);
uint64_t cuptimon__agg_hist_mid(unsigned idx);

#endif
