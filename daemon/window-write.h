/*
 * Writing a trace window: the archive chunks of the selected sessions that
 * arrived during the window, filtered with PyTorch's monitor semantics
 * (_filter_trace_window_events), into one Chrome/Perfetto trace plus a
 * summary.  Runs on a worker thread of the daemon, after every selected
 * session's final forced flush is written (or timed out: "late").
 *
 * The filter, for each process, with start = the window's start:
 *  - runtime and driver API records are kept when they start at or after
 *    start (and before end); their correlation ids are "retained";
 *  - kernels, memcpy and memset are kept when their correlation id was
 *    retained, or when it is 0 and they start at or after start;
 *  - external correlation records are kept (as the annotations of the API
 *    calls and GPU work they correlate to) when their correlation id was
 *    retained;
 *  - everything else (overhead, CUDA events, synchronization, markers) is
 *    kept when it has no start time or starts at or after start.
 * A correlation id is scoped per process.
 *
 * A process that joins during the window launches its first kernels before
 * the window's API kinds are on in it, so they have no API record to be
 * correlated with: for such a process, GPU work whose correlation id is
 * below the first API call's is kept when it starts inside the window.
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
