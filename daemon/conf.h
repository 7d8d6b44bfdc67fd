/*
 * cuptimond's configuration file: /etc/cuptimon/cuptimond.conf, one JSON
 * object (json-c; comments are allowed), every key optional.  The keys,
 * their defaults, units and ranges are documented in cuptimond.conf(5) and
 * listed once, in the key table of conf.c.
 *
 * The daemon's order is: defaults, then the file, then the command line.
 * On SIGHUP it loads the file into a fresh struct (defaults + file), applies
 * its command-line overrides again with cuptimon__config_set, and switches
 * only when all of that succeeded: a bad new file leaves the old settings.
 *
 * (The file is conf.h, not config.h: a daemon/config.h would shadow the
 * build's config.h for every daemon source that includes "config.h".)
 */
#ifndef CUPTIMON_CONF_H
#define CUPTIMON_CONF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The system daemon's file; SYSCONFDIR is configure's --sysconfdir. */
#define CUPTIMON_CONFIG_NAME "cuptimond.conf"

/* The largest configuration file read (it is a handful of keys). */
#define CUPTIMON_CONFIG_MAX_BYTES (1u << 20)

struct cuptimon_config {
    /* Paths: "" means the built-in rule (see cuptimond(8)); when set they
     * are absolute.  Socket paths fit a sockaddr_un. */
    char socket[108];
    char control_socket[108];
    char output_dir[400];

    double flush_period_s;       /* periodic non-forced flush; 0 = never */
    double flush_timeout_s;      /* how long a flush waits for a session */
    uint64_t segment_size;       /* bytes: rotate archive segments past this */
    int compress_level;          /* zstd level, 0 = store raw */
    uint64_t archive_max_bytes;  /* byte cap of OUTPUT_DIR/archive, 0 = none */
    uint64_t archive_max_age_s;  /* delete segments older than this, 0 = never */
    double retention_period_s;   /* how often the caps are enforced */
    uint64_t window_max_events;  /* a trace window is cut short past this */
    int window_gzip_level;       /* window traces: gzip level 1..9 (.json.gz), 0 = plain JSON */
    int window_per_process;      /* 1: each window also writes one trace per process */
    double window_end_timeout_s; /* a window's end waits this long for work still running */
    double inflight_warn_s;      /* log work that held a process's records this long; 0 = never */
    double control_idle_s;       /* a control connection with no request in progress
                                  * and nothing received this long is closed */

    /* Members of this group may control the daemon.  "" = none (only
     * root, and a user for windows over their own processes). */
    char control_group[64];
    int has_control_gid;
    gid_t control_gid; /* resolved when loaded */

    int log_level; /* LOG_ERR .. LOG_DEBUG (syslog.h) */

    /* Pool geometry the daemon will suggest to shims (not sent yet). */
    uint32_t shim_pool_slots;
    uint64_t shim_slot_size;

    /* Fair shares, against one user (or a runaway job) holding the
     * daemon: the daemon holds at most max_pool_bytes of a producer's pool
     * at once (a larger pool is taken, issue 47: session.c), and a user
     * other than root may hold at most max_sessions_per_user sessions;
     * past that the producer is refused with the reason (its shim logs it
     * and keeps the job running untraced; status lists it). */
    uint64_t max_pool_bytes;
    uint64_t max_sessions_per_user; /* 0 = no cap */
    /* A user who is not an operator may hold at most this many control
     * connections at once; past it a connection is answered with the
     * reason and closed (control.c). */
    uint64_t max_controls_per_user; /* 0 = no cap */

    /* Live per-kernel aggregates, for `cuptimonctl top` and the metrics
     * file.  Read at startup only, like the paths. */
    int aggregate;             /* 1 = keep them (the default), 0 = off */
    char metrics_file[512];    /* Prometheus text file, "" = none */
    double metrics_interval_s; /* how often metrics_file is rewritten */

    /* GPU hardware metrics (daemon/gpm.h) */
    int gpu_metrics;
    double gpu_metrics_interval_s, gpu_metrics_window_interval_s, gpu_metrics_retry_s;
    char gpu_metrics_set[512];
    char gpu_metrics_yield_to[256];
    char gpu_metrics_libcupti[400];
    char gpu_metrics_libcuda[400];
};

/* Fills in every default. */
void cuptimon__config_defaults(struct cuptimon_config *c);

/* Where the daemon looks when no --config is given: SYSCONFDIR/cuptimon/
 * cuptimond.conf for root, else $XDG_CONFIG_HOME/cuptimon/cuptimond.conf
 * (or ~/.config/cuptimon/cuptimond.conf), so that a user's own daemon does
 * not pick up the node's settings.  Returns 0 or -ENAMETOOLONG / -ENOENT
 * (no HOME). */
int cuptimon__config_default_path(char *out, size_t len);

/* Reads the file at path over *c (which the caller set to defaults, or to
 * anything it wants the file to override).  Returns 0; -ENOENT when the
 * file does not exist (*c untouched, *err not set: for the default path
 * that only means "use the defaults"); any other -errno when it cannot be
 * read; -EINVAL when its content is wrong.  On every failure but -ENOENT,
 * *err (when err is not NULL) gets a malloc'd message that starts with the
 * path, names the key and the value and says what is allowed, e.g.
 *   /etc/cuptimon/cuptimond.conf: flush_period_s: -1 is not a number of
 *   seconds in 0..3600
 * On failure *c is left as it was: keys are applied to a copy first. */
int cuptimon__config_load(const char *path, struct cuptimon_config *c, char **err);

/* Sets one key from text, the way a command-line option gives it (numbers,
 * sizes like "64M", durations like "7d", names, yes/no; "" clears a path,
 * "" or "none" the group).  Returns 0, or -EINVAL with *err naming the key, the value
 * and what is allowed; -ENOENT with *err listing the known keys when key is
 * not one.  On failure *c is unchanged. */
int cuptimon__config_set(struct cuptimon_config *c, const char *key, const char *value, char **err);

/* Checks the keys against each other (archive_max_bytes must hold at least
 * one segment).  Returns 0 or -EINVAL with *err.  cuptimon__config_load
 * runs it; run it again after command-line overrides. */
int cuptimon__config_check(const struct cuptimon_config *c, char **err);

/* The effective configuration as a JSON object (pretty-printed, malloc'd,
 * NULL when out of memory), every key present, in a form that
 * cuptimon__config_load accepts back; unset paths and group are null. */
char *cuptimon__config_dump(const struct cuptimon_config *c);

#endif
