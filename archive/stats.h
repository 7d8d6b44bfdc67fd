/*
 * The statistics engine: the tables `nsys stats` gives, from decoded
 * events, for `cuptimonctl stats` (offline, over an archive) and the
 * daemon's end-window reply (the window's top kernels).
 *
 * Reports (each an array of JSON row objects, cuptimon__stats_rows()):
 *   kernels       per kernel name (demangled; the same name in several
 *                 processes is one row): time_pct, total_ns, instances,
 *                 avg_ns, med_ns, min_ns, max_ns, stddev_ns, name
 *   memory_time   per copy kind ("[CUDA memcpy Host-to-Device]", ...) and
 *                 memset: time_pct, total_ns, count, avg_ns, med_ns,
 *                 min_ns, max_ns, stddev_ns, operation
 *   memory_bytes  the same operations by size: total_bytes, count,
 *                 avg_bytes, med_bytes, min_bytes, max_bytes,
 *                 stddev_bytes, operation
 *   api           per runtime/driver call name: time_pct, total_ns, calls,
 *                 avg_ns, ..., name
 *   nccl          per NCCL function and communicator (issue 46): function,
 *                 communicator (name), comm_id, ranks, count, total_bytes
 *                 (nccl-tests' size: the larger of the send and receive
 *                 buffers), total_ns, avg_ns, algbw_gbps (bytes / time),
 *                 busbw_gbps (algbw times nccl-tests' factor: 2(n-1)/n for
 *                 all-reduce, (n-1)/n for all-gather, reduce-scatter and
 *                 all-to-all, 1 for the others); the time of each operation
 *                 is its kernel's (GPU globaltimer, first channel start to
 *                 last channel stop), else from NCCL's start to its
 *                 completion seen on the host; operations with neither
 *                 (not completed) are counted incomplete
 *   processes     per producer session with a timed event: pid, rank, label,
 *                 hostname, gpu_busy_ns, busy_pct, kernels, first_unix_ns,
 *                 last_unix_ns (and busy_uncertain_ns, see below)
 * Rows are sorted by total time (bytes), then count, then name; every row
 * with a median also says med_exact.  stddev is the sample standard
 * deviation (n - 1; 0 for one instance), as `nsys stats` gives it.
 *
 * Only records with a complete time count (start and end set, end >=
 * start): CUPTI hands over a record still running at a forced flush with
 * its end 0, and such a record has no duration to report.  The others are
 * counted (cuptimon__stats_info_json(): "incomplete").
 *
 * Memory is bounded whatever the number of records:
 *  - medians are exact while the values kept for them (8 bytes each) stay
 *    within opts.exact_limit (CUPTIMON_STATS_EXACT_DEFAULT: 8 Mi values,
 *    64 MiB); past it, the rows holding the most values, largest first,
 *    move to a log-linear histogram until a quarter of the limit is free.
 *    A histogram has 64 bins per power of two (values below 128 have a bin
 *    each, so stay exact), and a median read from it is within
 *    CUPTIMON_STATS_MED_ERROR (1/128, 0.78%) of the true median: the bin's
 *    middle is never further than half a bin (1/128 of the value) from
 *    any value in it.  A row's histogram holds the bins between its
 *    smallest and largest value, at most 2048 (32 powers of two, 16 KiB;
 *    a few hundred bins for a kernel's durations); values more than 2^32
 *    times below the largest go to its lowest bin ("collapsed" in the
 *    info: the median is within the bound unless it fell among them).
 *    Count, total, avg, min, max and stddev stay exact (stddev by
 *    Welford's method in double precision).
 *  - at most opts.names_max (CUPTIMON_STATS_NAMES_DEFAULT, 8192) rows per
 *    report; the records of further names go to one row named
 *    "(other kernel names)" / "(other API calls)", counted in the info.
 *  - a process's GPU busy time is the union of its kernels', copies' and
 *    memsets' intervals, merged as they come in a sorted list of at most
 *    4096 disjoint intervals; past that, the earliest half is added up and
 *    forgotten, and a later record that starts before what was forgotten
 *    is counted only from there on: the part before is
 *    busy_uncertain_ns (the busy time may be that much larger).  Records
 *    come nearly in time order, and a busy GPU's intervals merge into few,
 *    so this stays 0 in practice.
 * At the defaults: at most 64 MiB of exact values, and histograms of at
 * most 8192 x 16 KiB per report (128 MiB in the worst case of every row
 * spreading over 32 powers of two; a few KiB a row in practice), plus
 * the names.
 *
 * Not thread-safe: one engine per thread.  No allocation is made per
 * event beyond the growth of value arrays and tables.
 */
#ifndef CUPTIMON_STATS_H
#define CUPTIMON_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "decode.h"
#include "trace.h"

struct cuptimon_stats;
struct cuptimon_strtab;
struct cuptimon_demangler;
struct json_object;

/* Reports, for opts.reports and cuptimon__stats_rows(). */
enum cuptimon_stats_report {
    CUPTIMON_STATS_KERNELS = 0,
    CUPTIMON_STATS_MEMORY_TIME,
    CUPTIMON_STATS_MEMORY_BYTES,
    CUPTIMON_STATS_API,
    CUPTIMON_STATS_PROCESSES,
    CUPTIMON_STATS_NCCL,
    CUPTIMON_STATS_REPORTS
};
#define CUPTIMON_STATS_BIT(r) (1u << (r))
#define CUPTIMON_STATS_ALL    ((1u << CUPTIMON_STATS_REPORTS) - 1)

#define CUPTIMON_STATS_EXACT_DEFAULT ((uint64_t)8 << 20)
#define CUPTIMON_STATS_NAMES_DEFAULT 8192u
/* The largest relative error of a median read from a histogram. */
#define CUPTIMON_STATS_MED_ERROR (1.0 / 128)

struct cuptimon_stats_opts {
    unsigned reports;     /* CUPTIMON_STATS_BIT()s; 0: all */
    uint64_t exact_limit; /* values kept for exact medians; 0: none (histograms only) */
    size_t names_max;     /* rows per report; 0: CUPTIMON_STATS_NAMES_DEFAULT */
};

/* opts NULL: every report, the default limits.  0 or -ENOMEM. */
int cuptimon__stats_new(const struct cuptimon_stats_opts *opts, struct cuptimon_stats **out);
void cuptimon__stats_free(struct cuptimon_stats *st);

/* Adds a producer session; names/dm (may be NULL) resolve its kernel
 * names, and must live as long as events of it come.  Returns its index
 * or -errno. */
int cuptimon__stats_add_process(struct cuptimon_stats *st, const struct cuptimon_proc_info *p,
                                const struct cuptimon_strtab *names, struct cuptimon_demangler *dm);

/* Counts one decoded event of process proc (an index from add_process);
 * clk maps its times to Unix ns (for first/last activity and busy time). */
void cuptimon__stats_event(struct cuptimon_stats *st, int proc, const struct cuptimon_ev *ev,
                           const struct cuptimon_clock *clk);

/* Records CUPTI reported dropped for process proc (chunk headers): they
 * are in no table, and the info says how many. */
void cuptimon__stats_dropped(struct cuptimon_stats *st, int proc, uint64_t n);

/* The rows of one report, at most top_n (0: all), as a new JSON array;
 * NULL on allocation failure.  A report not asked for in opts is empty. */
struct json_object *cuptimon__stats_rows(struct cuptimon_stats *st, enum cuptimon_stats_report r,
                                         size_t top_n);

/* What the tables rest on: {"kernels": N, "kernel_ns": T, "kernel_names":
 * K, "incomplete": {"kernel": n, ...}, "dropped_records": D,
 * "other_rows": {"kernels": records, "api": records}, "medians":
 * {"exact_limit": L, "values_kept": V, "approximate_medians": A,
 * "relative_error": E, "collapsed": C}}.  NULL on allocation failure. */
struct json_object *cuptimon__stats_info_json(struct cuptimon_stats *st);

/* The report's name as the CLI and the JSON output call it ("kernels",
 * "memory_time", ...), never NULL for a valid report. */
const char *cuptimon__stats_report_name(enum cuptimon_stats_report r);

/* A malloc'd copy of s in which every byte that is not part of well-formed
 * UTF-8 becomes U+FFFD, as the engine cleans the names it interns (so that
 * they are valid JSON text and merge alike); with controls, so do the
 * control characters (C0, DEL, C1: an escape sequence in a name would act
 * on a terminal), as cuptimonctl prints text to one.  NULL: no memory. */
char *cuptimon__stats_clean_text(const char *s, int controls);

#endif
