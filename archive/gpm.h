/*
 * GPU hardware metrics in the archive (issue 34): what cuptimond's sampler
 * (daemon/gpm.c, CUPTI's PM Sampling API) writes for each GPU of the node,
 * and how decode, the window traces and `cuptimonctl stats --report gpu`
 * read it back.
 *
 * One session directory per device and sampler run, beside the processes'
 * sessions under OUTPUT/archive/, so that the byte and age caps and the
 * reader's damage handling (archive/archive.h) apply to it unchanged:
 *
 *   OUTPUT/archive/<UTC start>-gpu<ordinal>-<run>/   meta.json, seg-*.cpt
 *
 * meta.json is an object with "kind": "gpu_metrics" (a process session's
 * has no "kind"), and:
 *   "archive_version": 1,
 *   "device": {"ordinal": N, "name": "NVIDIA H200", "uuid": "GPU-...",
 *              "pci_bus_id": "0000:00:06.0", "chip": "GH100"},
 *   "metrics": [{"key": "sm_active", "cupti": "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
 *                "unit": "%", "label": "SM active"}, ...]   (1..CUPTIMON_GPM_METRICS_MAX),
 *   "interval_ns": the sampling interval asked for (samples carry their own
 *                  start and end),
 *   "clock": "unix_ns" (sample times are Unix ns, mapped from CUPTI's
 *            timestamps with the pair in each chunk header, as a process
 *            session's records are),
 *   "daemon_version", "hostname", "start_unix_ns".
 *
 * Chunks (archive/archive.h's format): header index = the chunk's number
 * from 0; cupti_ts / unix_ns = a (cuptiGetTimestamp, CLOCK_REALTIME) pair
 * read when the chunk was decoded; records = samples; raw_size = records *
 * CUPTIMON_GPM_SAMPLE_SIZE(nmetrics); context, stream_id, dropped = 0.  The
 * payload is the samples, each:
 *   uint64 start_unix_ns, uint64 end_unix_ns, double value[nmetrics]
 * little-endian, values in the unit meta.json gives (NaN: CUPTI gave no
 * value for that metric in that sample).  Samples in a chunk are in time
 * order and do not overlap; a gap between chunks is a time the device was
 * not sampled (paused, yielded to another profiler, reconfigured).
 *
 * Everything read back is untrusted (an archive may be copied from
 * anywhere): the reader checks meta.json's members, the metric count, each
 * chunk's raw_size against it, and each sample's times (end > start, both
 * below 2^63, in time order within the chunk), and skips what does not
 * hold, counting it.  What the reader takes (cuptimon__gpm_meta_parse):
 *  - "kind" "gpu_metrics", "archive_version" 1 (a later version is refused:
 *    its samples may not be laid out as these), "clock" "unix_ns";
 *  - "device": an object; "ordinal" an integer 0..65535; "name", "uuid",
 *    "pci_bus_id", "chip" strings that fit their fields (or absent: "");
 *  - "metrics": an array of 1..CUPTIMON_GPM_METRICS_MAX objects, each with
 *    "key" of 1..47 bytes of [a-z0-9_], no two alike; "cupti", "unit" and
 *    "label" strings that fit their fields ("label" absent: the key);
 *  - "interval_ns" an integer 1..2^63-1; "start_unix_ns" and "hostname",
 *    when present, an integer below 2^63 and a string of at most 255 bytes.
 * Every string must be free of NUL bytes; members not named here are
 * ignored (a later daemon's additions).  A value that is infinite is
 * no value: it is read as NaN and counted (bad_values); NaN itself is
 * what the format says it is.  Readers show NaN as a gap: no counter
 * value in a trace, no sample of that metric in the statistics.
 */
#ifndef CUPTIMON_GPM_H
#define CUPTIMON_GPM_H

#include <stddef.h>
#include <stdint.h>

#include "proto/util.h"

struct cuptimon_strtab;

#define CUPTIMON_GPM_KIND                  "gpu_metrics"
#define CUPTIMON_GPM_VERSION               1
#define CUPTIMON_GPM_METRICS_MAX           32u
#define CUPTIMON_GPM_SAMPLE_SIZE(nmetrics) (16u + 8u * (uint32_t)(nmetrics))
#define CUPTIMON_GPM_KEY_MAX               48u
#define CUPTIMON_GPM_LABEL_MAX             64u
#define CUPTIMON_GPM_ORDINAL_MAX           65535
#define CUPTIMON_GPM_TIME_MAX              (UINT64_C(1) << 63) /* sample times are below this */

struct json_object;
struct cuptimon_archive_reader;
struct cuptimon_trace;

/* One metric of a device's set. */
struct cuptimon_gpm_metric {
    char key[CUPTIMON_GPM_KEY_MAX];     /* "sm_active": lowercase letters, digits and '_' */
    char cupti[256];                    /* CUPTI's metric name */
    char unit[16];                      /* "%", "B/s", "Hz" */
    char label[CUPTIMON_GPM_LABEL_MAX]; /* "SM active", shown in traces and tables */
};

/* What meta.json says of a device's metrics session.  hostname is filled
 * by the reader only: the writer takes it as an argument of
 * cuptimon__gpm_meta_json(). */
struct cuptimon_gpm_meta {
    int ordinal;
    char name[96], uuid[48], pci_bus_id[32], chip[16];
    uint64_t interval_ns, start_unix_ns;
    uint32_t nmetrics;
    struct cuptimon_gpm_metric metric[CUPTIMON_GPM_METRICS_MAX];
    char hostname[256];
};

/* One sample, values in meta order. */
struct cuptimon_gpm_sample {
    uint64_t start_ns, end_ns;
    double value[CUPTIMON_GPM_METRICS_MAX];
};

/* ---- writing (the daemon) ------------------------------------------------ */

/* meta.json's text for m (malloc'd; NULL without memory).  hostname and
 * daemon_version may be NULL (left out); m->hostname is not read. */
char *cuptimon__gpm_meta_json(const struct cuptimon_gpm_meta *m, const char *hostname,
                              const char *daemon_version);
/* Encodes n samples of m->nmetrics values into out (n *
 * CUPTIMON_GPM_SAMPLE_SIZE(m->nmetrics) bytes). */
void cuptimon__gpm_encode(uint8_t *out, const struct cuptimon_gpm_sample *s, size_t n,
                          uint32_t nmetrics);

/* ---- reading ------------------------------------------------------------- */

/* Whether a session's meta.json (text, may be NULL) is a GPU metrics
 * session: 1 yes, 0 no (a process session, or unreadable).  A text that
 * is not valid JSON (a torn or damaged file) is one when it holds the
 * member "kind": "gpu_metrics" as the daemon writes it, so that a damaged
 * GPU metrics session is not taken for a process. */
int cuptimon__gpm_is_meta(const char *meta_json);
/* Parses a GPU metrics session's meta.json: 0, or -EBADMSG with why (a
 * missing or malformed member, no metric, more than the maximum, a key not
 * of the allowed characters or named twice; the rules above). */
int cuptimon__gpm_meta_parse(const char *meta_json, struct cuptimon_gpm_meta *m, char *why,
                             size_t whylen);

struct cuptimon_gpm_read_stats {
    uint64_t chunks;       /* chunks whose samples were read */
    uint64_t samples;      /* samples handed to the callback */
    uint64_t bad_chunks;   /* raw_size not records * the sample size: skipped whole */
    uint64_t bad_samples;  /* end <= start, a time at or past 2^63, or out of order: skipped */
    uint64_t bad_values;   /* infinite values, read as NaN */
    uint64_t out_of_range; /* good samples outside [from_ns, to_ns) */
    uint64_t damaged;      /* chunks the archive reader passed over (CRC, torn, duplicate) */
};

/* Calls fn for each sample of the session in dir whose [start, end)
 * overlaps [from_ns, to_ns) (to_ns 0: no end), in archive order.  fn
 * returns 0 to go on, else the walk stops with that value.  Returns 0, the
 * callback's value, or -errno with why: the directory cannot be opened
 * (the reader's errno), is not a GPU metrics session (-EINVAL) or its
 * meta.json does not parse (-EBADMSG).  st (may be NULL) is added to, not
 * cleared.  Chunks completed (header unix_ns) more than a second before
 * from_ns are passed over unread: their samples ended before it. */
typedef int (*cuptimon_gpm_fn)(void *ud, const struct cuptimon_gpm_meta *m,
                               const struct cuptimon_gpm_sample *s);
int cuptimon__gpm_read(const char *dir, uint64_t from_ns, uint64_t to_ns, cuptimon_gpm_fn fn,
                       void *ud, struct cuptimon_gpm_read_stats *st, char *why, size_t whylen);
/* The same over a reader the caller opened (its damage reports and chunk
 * skipping are the caller's to set) and the meta.json it parsed. */
int cuptimon__gpm_read_chunks(struct cuptimon_archive_reader *r, const struct cuptimon_gpm_meta *m,
                              uint64_t from_ns, uint64_t to_ns, cuptimon_gpm_fn fn, void *ud,
                              struct cuptimon_gpm_read_stats *st);

/* The GPU metrics sessions under an output root or archive directory
 * (as cuptimon__archive_find_sessions() finds sessions), sorted, into
 * *dirs (cuptimon__archive_free_list()).  Only directories named as the
 * daemon names them ("...-gpu<N>-...") are opened, so that a node's
 * thousands of process sessions cost a name comparison each; their
 * meta.json must say "gpu_metrics".  0 or -errno. */
int cuptimon__gpm_find_sessions(const char *root, char ***dirs);

/* ---- a set of devices ---------------------------------------------------- */

/*
 * The devices whose metrics a trace shows: those the processes in it ran
 * GPU work on, or all.  A process's records carry the CUDA ordinal it saw,
 * which under CUDA_VISIBLE_DEVICES is not the node's: a process's set holds
 * its own ordinals (cuptimon__gpm_ordinals_add, per record), and
 * cuptimon__gpm_devset_resolve turns them into the node's GPUs by the UUID
 * the shim sent for each (CUPTIMON_DEVICE_UUID_KEY), or keeps the ordinal
 * for a process that sent none (a shim before it).  The GPU metrics of a
 * device are in the set when its UUID is, or its ordinal.
 */
struct cuptimon_gpm_ordinals {
    uint64_t bits[4]; /* ordinals 0..255 (a larger one is in no set) */
};
void cuptimon__gpm_ordinals_add(struct cuptimon_gpm_ordinals *o, uint32_t ordinal);

#define CUPTIMON_GPM_DEVSET_UUIDS 64
struct cuptimon_gpm_devset {
    int all;                          /* every device */
    struct cuptimon_gpm_ordinals ord; /* node ordinals, for processes without UUIDs */
    uint32_t nuuid;                   /* UUIDs of node GPUs; past the room for them, "all" */
    char uuid[CUPTIMON_GPM_DEVSET_UUIDS][CUPTIMON_UUID_TEXT_SIZE];
};
/* Adds to node the GPUs of proc, the ordinals a process's records carry,
 * whose strings (its strings.bin) are names (NULL: none): by UUID where the
 * process sent a well-formed one for the ordinal, else by ordinal. */
void cuptimon__gpm_devset_resolve(struct cuptimon_gpm_devset *node,
                                  const struct cuptimon_gpm_ordinals *proc,
                                  const struct cuptimon_strtab *names);
int cuptimon__gpm_devset_has(const struct cuptimon_gpm_devset *d, uint32_t ordinal,
                             const char *uuid);
int cuptimon__gpm_devset_empty(const struct cuptimon_gpm_devset *d);

/*
 * Writes the samples of the GPU metrics session in dir that overlap
 * [from_ns, to_ns) (to_ns 0: no end) into trace t as counter tracks
 * (cuptimon__trace_add_gpu(), trace.h), when its device is in devs (NULL:
 * any).  Returns 1 when it wrote the session, 0 when its device is not in
 * devs, or -errno with why (cuptimon__gpm_read()'s, or the trace's write
 * error).  st (may be NULL) is added to.
 */
int cuptimon__gpm_trace_session(struct cuptimon_trace *t, const char *dir, uint64_t from_ns,
                                uint64_t to_ns, const struct cuptimon_gpm_devset *devs,
                                struct cuptimon_gpm_read_stats *st, char *why, size_t whylen);

/* ---- statistics (cuptimonctl stats --report gpu) -------------------------- */

/*
 * Per device and metric: samples with a value, the time they cover (each
 * sample clipped to the range asked for), the mean weighted by that time,
 * the time-weighted median (the smallest value at or below which half of
 * the covered time lies: with samples of one length, the lower median of
 * their values), min and max.  Rows are kept per (hostname, ordinal, uuid,
 * metric key), so that sessions of one device over several sampler runs
 * add up.  Medians are exact while the samples kept for them stay within
 * exact_limit (16 bytes each); past it the rows holding the most go to a
 * log-linear histogram (64 bins per power of two, time-weighted), whose
 * median is within 1/128 of the true one (med_exact false).
 */
#define CUPTIMON_GPM_EXACT_DEFAULT ((uint64_t)4 << 20)

struct cuptimon_gpm_stats;

int cuptimon__gpm_stats_new(uint64_t exact_limit, struct cuptimon_gpm_stats **out);
void cuptimon__gpm_stats_free(struct cuptimon_gpm_stats *st);
/* The session whose samples come next (its rows are made here): 0 or
 * -ENOMEM.  m must stay valid while its samples are added. */
int cuptimon__gpm_stats_session(struct cuptimon_gpm_stats *st, const struct cuptimon_gpm_meta *m);
/* Adds a sample of that session, clipped to [from_ns, to_ns) (to_ns 0: no
 * end); a sample outside it adds nothing.  0 or -ENOMEM. */
int cuptimon__gpm_stats_sample(struct cuptimon_gpm_stats *st, const struct cuptimon_gpm_sample *s,
                               uint64_t from_ns, uint64_t to_ns);
/* The rows, sorted by hostname, ordinal, uuid and the metric's place in
 * its first session's set, as a new JSON array of {"hostname", "device",
 * "name", "uuid", "metric", "label", "unit", "samples", "covered_ns",
 * "mean", "med", "med_exact", "min", "max"} (a metric without a sample
 * with a value: samples 0 and the statistics null).  NULL without memory. */
struct json_object *cuptimon__gpm_stats_rows(struct cuptimon_gpm_stats *st);
/* How many sessions were added. */
uint64_t cuptimon__gpm_stats_sessions(const struct cuptimon_gpm_stats *st);

#endif
