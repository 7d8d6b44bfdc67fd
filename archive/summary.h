/*
 * The per-trace summary: counts by kind, GPU time, the top kernels by GPU
 * time, and what was dropped or could not be decoded, as JSON (json-c):
 *
 *   {"records": {"kernel": N, "memcpy": N, ...},
 *    "gpu_time_ns": {"kernel": T, "memcpy": T, "memset": T},
 *    "kernels": {"count": N, "total_ns": T, "distinct": K,
 *                "top": [{"name": "...", "count": N, "total_ns": T,
 *                         "mean_ns": M, "min_ns": A, "max_ns": B}, ...]},
 *    "dropped_records": D,
 *    "undecodable": {"bytes": B, "unsupported_records": ..., ...},
 *    "processes": [{"pid":..., "hostname":..., "rank":..., "kernels":..., "kernel_ns":...}],
 *    ...members the caller adds (archive stats)}
 *
 * Kernels are aggregated on the hot path by (process, name pointer) and
 * resolved and merged by display name only when the JSON is built.
 */
#ifndef CUPTIMON_SUMMARY_H
#define CUPTIMON_SUMMARY_H

#include <stdint.h>
#include <stdio.h>

#include "decode.h"
#include "trace.h"

struct cuptimon_summary;
struct cuptimon_strtab;
struct cuptimon_demangler;
struct json_object;

int cuptimon__summary_new(struct cuptimon_summary **out);
void cuptimon__summary_free(struct cuptimon_summary *s);

/* Adds a process; names/dm (may be NULL) resolve its kernel names when the
 * JSON is built and must live until then.  Returns the index or -errno. */
int cuptimon__summary_add_process(struct cuptimon_summary *s, const struct cuptimon_proc_info *p,
                                  const struct cuptimon_strtab *names,
                                  struct cuptimon_demangler *dm);

/* Counts one decoded event of process proc. */
void cuptimon__summary_event(struct cuptimon_summary *s, int proc, const struct cuptimon_ev *ev);

/* Adds the walker's counts (undecodable bytes, skipped records, ...). */
void cuptimon__summary_decode_stats(struct cuptimon_summary *s,
                                    const struct cuptimon_decode_stats *st);

/* Records CUPTI reported as dropped (per chunk / buffer). */
void cuptimon__summary_dropped(struct cuptimon_summary *s, uint64_t n);

/* Adds (or replaces) a top-level member; takes the reference to v. */
void cuptimon__summary_set(struct cuptimon_summary *s, const char *key, struct json_object *v);

/* Builds the JSON with the top_n kernels (0: 20); the caller puts it.
 * NULL on allocation failure. */
struct json_object *cuptimon__summary_json(struct cuptimon_summary *s, unsigned top_n);

/* Writes the JSON (pretty) and a newline to f.  0 or -errno. */
int cuptimon__summary_write(struct cuptimon_summary *s, FILE *f, unsigned top_n);

#endif
