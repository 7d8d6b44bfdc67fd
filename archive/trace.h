/*
 * A streaming Chrome trace-event JSON writer for decoded CUPTI events,
 * loadable by Perfetto UI and chrome://tracing:
 *
 *   {"traceEvents":[ ...one event per line... ],
 *    "displayTimeUnit":"ns",
 *    "distributedInfo":{"rank":R,"world_size":W},
 *    "otherData":{"base_unix_ns":B, ...}}
 *
 * Events are written as they come through a fixed output buffer, never
 * kept: a trace of any size takes bounded memory (per process a few small
 * bounded tables: tracks seen, names resolved, and the set-associative
 * correlation tables behind the flow arrows and annotations).  JSON is
 * written by hand here -- json-c's object model allocates per event and
 * this is the one place that runs at millions of events per second.
 *
 * Timestamps: "ts" and "dur" are microseconds with exactly three
 * fractional digits (ns precision), printed from integers, relative to
 * otherData.base_unix_ns (the caller's base, e.g. the window start).  A
 * relative base keeps the numbers small enough that viewers parsing them
 * as doubles keep every nanosecond; absolute epoch microseconds would
 * not.  Events before the base get negative ts.
 *
 * Tracks, per process (pid = the producer's pid; a pid that two processes
 * of one trace share is replaced by 0x40000000 + process index):
 *  - CPU API calls (runtime, driver) on tid = the record's thread id;
 *  - GPU work (kernels, memcpy, memset, CUDA events, device overheads) on a
 *    synthetic tid per (device, stream), named "GPU d stream s":
 *    0x80000000 | (device & 15) << 27 | (stream & 0x7fffff) << 4 | 1;
 *  - synchronization records (which carry no thread or device) on a
 *    synthetic tid per (context, stream): same layout with context in place
 *    of device and low nibble 3, named "CUDA sync ctx c stream s".
 *  Synthetic tids have bit 31 and bit 0 set, which real thread ids (Linux
 *  tids below 2^22, or 8-byte aligned pthread_t values) never have.
 *
 * Flow arrows ("ph":"s" at the API call, "ph":"f" with "bp":"e" at the
 * GPU work, cat/name "ac2g") link each launch to its kernel, memcpy or
 * memset by correlation id; the id is (process index << 32) | correlation
 * id, i.e. the correlation id scoped per process.  A pair is written when
 * both ends have been seen, so no arrow dangles; ends further apart than
 * the correlation tables hold (16384 ids of one counter; ids numbered
 * apart share the table's ways) lose their arrow.
 *
 * External correlation records (annotations) are not events: their kind
 * and id go into the args of the API call and GPU work they correlate to.
 * User annotation ranges (the push/pop times the daemon archived in the
 * string table) are written when a process ends, as Kineto draws them:
 * "user_annotation" X slices on the pushing thread's track (args
 * "External id", "depth", "parent external id", "clipped", "open") and a
 * "gpu_user_annotation" X slice per annotation and GPU track from the
 * first start to the last end of the GPU work (kernels, copies, memsets)
 * whose launch carried it (args "External id").
 * NVTX markers are "b"/"e" async events scoped per process
 * ("id2":{"local":...}) or "i" instants; marker data (color, category,
 * payload) goes into the args of the marker it follows.
 *
 * GPU metrics (archive/gpm.h; cuptimon__trace_add_gpu) are counter events
 * ("ph":"C", "cat":"gpu_metrics") in a process of their own per device
 * (host, ordinal, UUID): pid 0x48000000 + ordinal (+ 0x10000 per other
 * device of the trace with that ordinal), named "GPU d metrics (NAME)",
 * labelled with host, chip, PCI bus id and UUID, and sorted after every
 * process (sort index 0x50000000 + ordinal), as Kineto puts its "GPU d"
 * processes after the CPU ones.  Not in the processes that ran on the
 * device: GPU work is drawn inside each process (on its "GPU d stream s"
 * tracks), and counters belong to one process in both viewers, so a GPU
 * that several processes share would get its counters once per process;
 * one process per device keeps one track per device and metric.  Each
 * metric is one counter track: the event is named "GPU d LABEL" and its
 * one argument is the unit in parentheses ("(%)"; "value" when the metric
 * has none), so that Perfetto, which names a track by the event and the
 * key, shows "GPU 0 SM active (%)", and chrome://tracing shows the name
 * with the unit as its series.  Values: each sample is an event at its
 * start with its value ("%.10g"); a run of samples ends with a 0 at the
 * end of its last sample, where the next sample starts more than half the
 * session's sampling interval (at least 1 us) after it, where a sample
 * has no value for the metric (NaN), and at the session's end: a counter
 * holds its last value until the next event, so without it a gap (the
 * sampler paused, or a metric CUPTI did not give) would be drawn as the
 * last value held, and the last sample would seem to last to the end of
 * the trace.  A 0 inside a run is a measured 0; one at a run's end reads
 * as "not sampled from here" (otherData.gpu_metrics lists the devices and
 * their sample counts).
 */
#ifndef CUPTIMON_TRACE_H
#define CUPTIMON_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "decode.h"

struct cuptimon_strtab;
struct cuptimon_demangler;
struct json_object;

/* Who a process is; strings may be NULL and are copied. */
struct cuptimon_proc_info {
    uint32_t pid;
    const char *hostname;
    const char *label;
    const char *job_id;
    const char *exe; /* the executable's path (meta.json "exe"); its base name names the process */
    int64_t rank;    /* -1: unknown */
    int64_t local_rank; /* -1: unknown */
    int64_t world_size; /* -1: unknown */
    uint32_t cupti_version;
};

struct cuptimon_trace_opts {
    uint64_t base_ns;       /* Unix ns that ts 0 stands for */
    int no_flows;           /* 1: no launch -> GPU flow arrows */
    size_t buf_size;        /* output buffer bytes; 0: 256 KiB */
    int gzip_level;         /* cuptimon__trace_new_fd: 1..9 writes gzip; 0: plain JSON */
    int gzip_threads;       /* threads deflating at once; 0: the processors, at most 4 */
    const char *trace_name; /* Kineto's traceName (the path), NULL: none; must outlive t */
    /* Annotation ranges are clipped to [range_from_ns, range_to_ns] (Unix
     * ns; 0: no bound), a window's span. */
    uint64_t range_from_ns, range_to_ns;
};

/* Writes all of buf or fails: 0 or -errno. */
typedef int (*cuptimon_trace_write_fn)(void *ud, const void *buf, size_t len);

struct cuptimon_trace;

struct cuptimon_trace_stats {
    uint64_t events;              /* trace events written, metadata and flows included */
    uint64_t flows;               /* flow arrows (s+f pairs) */
    uint64_t untimed;             /* records with no start time, not written */
    uint64_t marker_data_orphans; /* marker data with no marker just before */
    uint64_t unknown_names;       /* kernels whose name pointer was not in the table */
    uint64_t driver_hidden;       /* driver calls that launch nothing, not written (Kineto's way) */
    uint64_t driver_nested;       /* driver launches inside a runtime call, not written */
    uint64_t devices_refused; /* device property strings that did not parse or were out of range */
    uint64_t ua_by_time;      /* GPU work given to an annotation by its launch's thread and time */
    uint64_t ua_ambiguous;    /* ... left out: ranges of several other threads were open then */
    uint64_t bytes;           /* bytes handed to the sink */
    uint64_t counters;        /* GPU metric counter events (in events too) */
    uint64_t nccl_ops;        /* NCCL collectives and p2p operations (record_param_comms) */
};

int cuptimon__trace_new(const struct cuptimon_trace_opts *o, cuptimon_trace_write_fn fn, void *ud,
                        struct cuptimon_trace **out);
/* Sinks for a stdio stream (fwrite; the caller closes it) and an fd
 * (write(2) with EINTR/short-write handling; the caller closes it). */
int cuptimon__trace_new_file(const struct cuptimon_trace_opts *o, FILE *f,
                             struct cuptimon_trace **out);
int cuptimon__trace_new_fd(const struct cuptimon_trace_opts *o, int fd,
                           struct cuptimon_trace **out);

/*
 * Adds a process and writes its metadata events as Kineto does, with
 * "tid":0: process_name (the executable's base name, as torch.profiler
 * writes "python3", then " rank R" and " (label)" when known; "pid N"
 * without an executable), process_labels ("CPU", then host, rank/world,
 * local rank, job, label, CUPTI version) and process_sort_index (the rank,
 * else the pid, Kineto's value).  names and dm
 * (either may be NULL) resolve kernel and marker names and must outlive
 * the writer.  Returns the process index (>= 0) for cuptimon__trace_event,
 * or -errno.
 */
int cuptimon__trace_add_process(struct cuptimon_trace *t, const struct cuptimon_proc_info *p,
                                const struct cuptimon_strtab *names, struct cuptimon_demangler *dm);

/* Writes one decoded event of process proc; clk maps its times (NULL: the
 * identity).  0 or the first error the sink returned (sticky). */
int cuptimon__trace_event(struct cuptimon_trace *t, int proc, const struct cuptimon_ev *ev,
                          const struct cuptimon_clock *clk);

/* Ends a process early: writes its held marker and frees its tables (its
 * identity stays for otherData); its string table and demangler are no
 * longer used after this.  Further events for it get -EINVAL.  Keeps the
 * memory of a trace over many sessions to the sessions open at once. */
int cuptimon__trace_end_process(struct cuptimon_trace *t, int proc);

/* Walks one buffer with layout l and writes every event in it; st gets the
 * walker's counts.  0 or -errno. */
int cuptimon__trace_buffer(struct cuptimon_trace *t, int proc, const struct cuptimon_layout *l,
                           const void *buf, size_t len, const struct cuptimon_clock *clk,
                           struct cuptimon_decode_stats *st);

/*
 * GPU metrics (the layout is above): adds a GPU metrics session of
 * device m (archive/gpm.h; its process is made the first time its device
 * is seen, by host, ordinal and UUID) and returns a handle (>= 0) for
 * its samples, or -errno (-EINVAL: no metrics, or an ordinal out of
 * range).  m is copied.
 */
struct cuptimon_gpm_meta;
struct cuptimon_gpm_sample;
int cuptimon__trace_add_gpu(struct cuptimon_trace *t, const struct cuptimon_gpm_meta *m);
/* Writes one sample of session h (in time order: the reader's).  0 or the
 * sink's error (sticky), -EINVAL for a handle that is not open. */
int cuptimon__trace_gpu_sample(struct cuptimon_trace *t, int h,
                               const struct cuptimon_gpm_sample *s);
/* Ends session h: closes its open runs (cuptimon__trace_finish() ends
 * those still open).  0 or the sink's error, -EINVAL. */
int cuptimon__trace_gpu_end(struct cuptimon_trace *t, int h);

/*
 * Ends the trace: flushes held markers, closes traceEvents, writes
 * displayTimeUnit, distributedInfo (rank/world_size of the processes: one
 * rank when all agree, else the lowest plus a "ranks" list; 0 and 1 when
 * none is known) and otherData (base, the writer's counts, the processes,
 * the GPU metrics devices when there are any, plus every member of extra
 * when not NULL), and flushes the sink.
 * 0 or -errno.  Call once; free afterwards either way.
 */
int cuptimon__trace_finish(struct cuptimon_trace *t, struct json_object *extra);

void cuptimon__trace_stats(const struct cuptimon_trace *t, struct cuptimon_trace_stats *st);
void cuptimon__trace_free(struct cuptimon_trace *t);

/*
 * Writes s[0, len) as a JSON string (with the quotes) into out, which must
 * hold 6 * len + 3 bytes; returns the bytes written.  Quotes, backslashes
 * and control characters are escaped; valid UTF-8 is copied; each byte of
 * an invalid UTF-8 sequence (overlong, surrogate, > U+10FFFF, truncated)
 * becomes \ufffd.
 */
size_t cuptimon__json_escape(char *out, const char *s, size_t len);

/* Formats a signed ns count as microseconds with three decimals
 * ("-1.234", "1796208557.090"); out holds 32 bytes; returns the length. */
size_t cuptimon__format_us(char *out, int64_t ns);

#endif
