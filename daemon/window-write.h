/*
 * Writing a trace window: the archive chunks of the selected sessions that
 * arrived during the window, filtered with PyTorch's monitor semantics
 * (_filter_trace_window_events), into one Chrome/Perfetto trace plus a
 * summary.  Runs on a worker thread of the daemon, after every selected
 * session's end fence is passed and written (or timed out: "late", still
 * running work: "running"; daemon/window.c).
 *
 * The filter, for each process, with [start, end] = the window's span
 * (end: spec.end_ns, whatever moment the caller takes for it):
 *  - runtime and driver API records are kept when they start inside
 *    [start, end]; their correlation ids are "retained" (a set: CUPTI
 *    promises unique ids, not one counter in start order, so no range of
 *    ids stands for them);
 *  - kernels, memcpy and memset are kept when their correlation id was
 *    retained, whatever their own times (work launched inside and still
 *    running at the end belongs to the window), or when it is 0 and they
 *    start inside;
 *  - external correlation records are kept (as the annotations of the API
 *    calls and GPU work they correlate to) when their correlation id was
 *    retained;
 *  - everything else (overhead, CUDA events, synchronization, markers) is
 *    kept when it has no start time or starts at or after start (and not
 *    after end).
 * A correlation id is scoped per process.  This is PyTorch's set: GPU work
 * whose API record CUPTI dropped is left out (the drop is counted in the
 * process's dropped records), as is work launched before the window that
 * starts inside it.
 *
 * A process that joins during the window launches its first work before
 * the window's API kinds are on in it, so that work has no API record to
 * be correlated with: for such a process, GPU work whose correlation id
 * belongs to no API record of its archive (inside the window or out) is
 * kept when it starts inside the window.  That is more than PyTorch keeps
 * (doc/cuptimonctl.1 says so).
 */
#ifndef CUPTIMON_WINDOW_WRITE_H
#define CUPTIMON_WINDOW_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "window-output.h"

struct json_object;

struct cuptimon_window_source {
    const char *archive_dir; /* the session's archive directory (meta.json, segments) */
    uint64_t first_chunk;    /* read chunks whose index (producer seq) is >= this ... */
    uint64_t last_chunk;     /* ... and <= this (UINT64_MAX: to the end) */
    int late;                /* the session's final flush did not finish in time */
    int joined;              /* the process joined during the window (see below) */
    int64_t pid;             /* the process and its user, as the kernel named them */
    uint32_t uid;
};

struct cuptimon_window_spec {
    uint64_t id;
    uint64_t start_ns; /* Unix ns */
    uint64_t end_ns;   /* Unix ns */
    const struct cuptimon_window_source *src;
    size_t nsrc;
    const char *output;  /* trace path: written to a temporary name, then renamed */
    uint64_t max_events; /* stop writing past this many events (0: no cap); the summary says so */
    int gzip_level;      /* 1..9: the trace is written gzipped; 0: plain JSON */
    int per_process;     /* also one trace per process beside output (see below) */
    /* Whose trace it is, and where it may go, by window-output.h's rules:
     * user_dir when the user chose the directory (--output); dir, when
     * not NULL, the directory that was checked when the window opened. */
    const struct cuptimon_requester *owner;
    int user_dir;
    const struct cuptimon_outdir_id *dir;
};

/*
 * per_process: each process also gets a complete trace of its own (its
 * distributedInfo, deviceProperties, metadata), beside output, named after
 * it with ".json[.gz]" replaced by ".rank-R.json[.gz]" (the process's rank)
 * or ".pid-P.json[.gz]" (no rank), by the same rules of where and whose;
 * the summary lists them as "process_traces": [{"pid","rank","path"}].
 *
 * Writes the trace and returns 0 with *summary set (a json-c object the
 * caller puts: per process its pid, uid, events by kind, dropped, late,
 * plus the totals and "truncated": true when max_events was reached), or
 * -errno with *err set to a malloc'd message naming what failed.  The
 * trace's otherData names the window, its requester's uid
 * (window_requested_by_uid) and the pid and uid of every process
 * (window_processes).
 */
int cuptimon__window_write(const struct cuptimon_window_spec *w, struct json_object **summary,
                           char **err);

#endif
