/*
 * The daemon's GPU hardware metrics (issue 34): every GPU of the node
 * sampled with CUPTI's PM Sampling API on a thread of its own, the samples
 * archived per device (archive/gpm.h) and kept for status, top and the
 * metrics file.  The shim is not involved: the job pays nothing.
 *
 * Everything here is reached from the loop thread; the sampler thread owns
 * CUPTI (its calls take from milliseconds to hundreds of them) and the
 * archive writers, and shares only what the structure's lock guards.
 */
#ifndef CUPTIMON_DAEMON_GPM_H
#define CUPTIMON_DAEMON_GPM_H

#include <stdint.h>

struct json_object;
struct cuptimon_live_set;
struct cuptimon_gpm;

struct cuptimon_gpm_config {
    int enabled;
    double interval_s;        /* always on */
    double window_interval_s; /* while a window is open (0: the same) */
    char set[512]; /* metric keys or CUPTI names, comma-separated ("": the default set) */
    char libcupti[512], libcuda[512]; /* "": the search the man page describes */
    char yield_to[256];               /* process names whose presence yields every device */
    double retry_s;                   /* after a device was busy or failed */
};

/* Starts the sampler (always returns an object; status says why it is
 * off).  archive_root: where its sessions go; live: the set retention
 * keeps the newest segment of.  NULL only without memory. */
struct cuptimon_gpm *cuptimon__gpm_start(const struct cuptimon_gpm_config *cfg,
                                         const char *archive_root, uint64_t segment_bytes,
                                         int compress_level, struct cuptimon_live_set *live);
/* Stops sampling, archives what is decoded, frees everything. */
void cuptimon__gpm_stop(struct cuptimon_gpm *g);
/* A reload: the intervals, the set and the yield list (a changed set
 * starts new sessions). */
void cuptimon__gpm_configure(struct cuptimon_gpm *g, const struct cuptimon_gpm_config *cfg);

/* The operator's pause (device -1: all) for seconds (0: until resumed),
 * and resume.  -ENODEV for a device that is not there. */
int cuptimon__gpm_pause(struct cuptimon_gpm *g, int device, double seconds, const char *who);
int cuptimon__gpm_resume(struct cuptimon_gpm *g, int device);
/* A window opened (+1) or ended (-1): the finer interval while any is. */
void cuptimon__gpm_window(struct cuptimon_gpm *g, int delta);

/* {"state": ..., "why": ..., "devices": [...]} for status and the
 * gpu-metrics op. */
struct json_object *cuptimon__gpm_status(struct cuptimon_gpm *g);
/* The metrics' Prometheus text (malloc'd, "" when nothing was sampled):
 * per device, each metric's mean over the last window_s seconds. */
char *cuptimon__gpm_prometheus(struct cuptimon_gpm *g, double window_s);
/* Per device, the means over the last second and ten (for top). */
struct json_object *cuptimon__gpm_top(struct cuptimon_gpm *g);
/* The node ordinal of the GPU whose UUID is uuid (as cuptimon__uuid_text
 * writes it); -1 while the sampler's thread has not listed the devices yet
 * (it does once cuInit returns, also where the counters are refused); -2
 * once the list is final and has no such device (or there is none: no
 * driver).  g is a struct cuptimon_gpm; for cuptimon__agg_set_node_map.
 * Any thread. */
int cuptimon__gpm_node_of(void *g, const char *uuid);

#endif
