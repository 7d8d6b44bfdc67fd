/* cuptimond internals: the daemon, its connections and sessions. */
#ifndef CUPTIMON_DAEMON_H
#define CUPTIMON_DAEMON_H

#include <json-c/json.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "aggregate.h"
#include "gpm.h"
#include "archive/archive.h"
#include "conf.h"
#include "retention.h"
#include "cuptimon-proto.h"
#include "proto/util.h"
#include "log.h"

struct daemon;
struct conn;

typedef void (*conn_msg_cb)(struct conn *c, const struct cuptimon_msg_hdr *h, const uint8_t *body,
                            int fd);
typedef void (*conn_close_cb)(struct conn *c);

/* One accepted socket, driven by a uv_poll_t so that the daemon reads with
 * recvmsg itself: it decides which message may carry an fd (the hello) and
 * closes any other. */
struct conn {
    uv_poll_t poll;
    int fd;
    int closing;
    int write_dead; /* the peer stopped reading (EPIPE...): read what it sent, then close */
    int accept_fd;  /* an fd may still arrive (before the hello) */
    int pending_fd; /* received with the bytes now in `in` */
    int fd_lost;    /* an fd was sent, but we had no descriptor for it */
    int watching;   /* current uv_poll events */
    /* Reading is paused before a message the owner cannot take yet
     * (may_take says so; conn_resume goes on): the peer's bytes wait in
     * its socket, and in `in` from that message on. */
    int paused;
    int (*may_take)(struct conn *c, const struct cuptimon_msg_hdr *h);
    struct cuptimon_peer peer;
    int restricted; /* control: this peer may see and act on its own uid's sessions only */
    struct cuptimon_buf in, out;
    size_t out_max;
    conn_msg_cb on_msg;
    conn_close_cb on_close;
    void *owner;
    struct daemon *d;
};

struct conn *conn_new(struct daemon *d, int fd, conn_msg_cb on_msg, conn_close_cb on_close,
                      void *owner);
/* Frames and queues one message; returns 0 or -errno (the connection is
 * closed when its output grows past out_max: the peer is not reading). */
int conn_send(struct conn *c, uint16_t type, const void *body, size_t len);
int conn_send_json(struct conn *c, uint16_t type, json_object *o);
int conn_send_error(struct conn *c, const char *error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void conn_close(struct conn *c);
/* Dispatches what waited since may_take paused the connection, and reads
 * on (unless it pauses again). */
void conn_resume(struct conn *c);

/* A queued piece of archive work for a session, done on a worker thread. */
struct aw_item {
    int is_strings;
    int is_layouts; /* a STRINGS body holding one CUPTIMON_LAYOUTS_KEY entry (LAYOUTS) */
    struct cuptimon_buffer_ready ready; /* chunk: which slot */
    uint8_t *strings;                   /* strings: a copy of the STRINGS body */
    size_t strings_len;
    int result; /* 0 written, else -errno */
};

struct flush_wait;

struct session {
    uint64_t id;
    struct daemon *d;
    struct conn *conn; /* NULL once the producer is gone */
    struct cuptimon_peer peer;
    json_object *hello;
    char hostname[256];
    char label[128];
    char exe[256];
    uint32_t cupti_version;
    int64_t reported_pid;
    int64_t connected_unix_ns;
    int64_t disconnected_unix_ns;

    /* the producer's pool: its memfd, read by pread on the workers (a
     * mapping would let the producer fault the daemon: see read_slot) */
    int pool_fd;
    size_t pool_size;
    _Atomic uint64_t pool_holes; /* buffers that lay over punched-out pages */
    uint64_t holes_logged;       /* pool_holes when last looked at, on the loop */
    uint32_t nslots;
    uint64_t slot_size;
    uint8_t *slot_held; /* 1 between BUFFER_READY and our BUFFER_RELEASE */
    /* How many of its buffers the daemon holds at once (issue 47): all of
     * its slots, or fewer where the pool is larger than max_pool_bytes;
     * past that its socket is not read until one goes back (conn.c). */
    uint32_t take_slots, nheld;
    uint64_t reads_paused; /* times it was not read for that (status) */

    /* archive */
    struct cuptimon_archive_writer *aw;
    char archive_dir[700];
    struct aw_item *queue; /* pending items, FIFO */
    size_t qlen, qcap;
    struct aw_item *work_items; /* items being written by the worker */
    size_t work_len;
    uv_work_t work;
    int working;
    int turn_waiting; /* in its user's line for a worker (session.c turns) */
    /* Refused after its process had gone: what it had announced
     * (buffers_received, records, dropped_records) is counted as lost when
     * the connection ends (session.c). */
    int refused_gone;
    struct session *turn_next; /* ... behind it in that line */
    uint64_t items_queued, items_done;

    /* flushes */
    uv_timer_t flush_timer;
    int timer_closed;
    uint64_t next_flush_id;
    int64_t last_flush_unix_ns;

    /* counters */
    uint64_t buffers_received, bytes_received, records, dropped_records;
    uint64_t chunks_written, bytes_archived, bytes_stored, write_errors, protocol_errors;
    uint64_t rdelta_fallbacks; /* its writer's count, as last added to the daemon's */
    uint64_t strings_received, strings_errors;
    uint64_t ranges_received, ranges_dropped; /* RANGES entries; the shim's queue overflows */
    uint64_t shim_lost, shim_declined, shim_foreign;   /* the shim's totals, from FLUSH_DONE */
    uint64_t completion_p99_ns, completion_longest_ns; /* from the shim's BYE */
    uint64_t exit_running_buffers; /* BYE: handed over at exit with work still running */
    int cupti_taken;               /* the shim says another CUPTI client took the callbacks */
    int fence;                     /* the shim answers FLUSH mode FENCE (its hello says so) */
    uint64_t seq_next;             /* one past the highest buffer sequence number received */
    struct window *window;         /* the open window this session is in, if any */
    /* What CUPTI holds in the producer (HELD, issue 33): the last report
     * and when it came (0: none yet), the head kernel's name (demangled,
     * cleaned; NULL for none), and what was logged already. */
    struct cuptimon_held held;
    int64_t held_unix_ns;
    char *held_name, *held_raw; /* shown; as the shim sent it */
    uint64_t held_warned_since; /* the head whose inflight_warn_s line went out */
    /* The pool's cap was reached: logged once (an older shim), or for
     * each episode of declines the shim reported (drop_episodes). */
    uint64_t cap_logged, drop_episodes;

    /* live aggregates: the producer's record layout (from the hello) and
     * its string table, filled on the session's worker from STRINGS items,
     * in order with the chunks whose names they hold.  Both are used only
     * on the worker once the hello is done (NULL names: pointers shown). */
    struct cuptimon_layout layout;
    struct cuptimon_strtab *names;
    /* The per-session layout check (session-layout.c): the record sizes
     * the producer's libcupti was measured to use (hello, RECORD_SIZES);
     * layout_dirty: layout must be rebuilt from them (on the loop, while
     * no work item runs); meta_dirty: meta.json must be rewritten (the
     * next batch's worker writes work_meta first). */
    uint32_t measured[CUPTIMON_KIND_SLOTS];
    int layout_dirty, meta_dirty, refuted_logged;
    unsigned size_changes;    /* a kind measured again, otherwise (logged: the first 10) */
    uint64_t mismatch_logged; /* bit k: kind k's mismatch was logged */
    char *work_meta;
    struct cuptimon_aw_scratch *work_scratch; /* lent to this batch (d->scratch_free) */
    /* CUPTI's v2 path (issue 28): "v1" or "v2+udr", from the hello; the
     * kernel record's size in bytes as the producer's layouts give it (the
     * latest LAYOUTS), for status; layout generations archived so far. */
    char path[16];
    uint32_t kernel_record_bytes;
    uint32_t layout_gens;
    int layouts_logged;

    struct session *next;
};

/* The running values the daemon's parts read, taken from the effective
 * configuration (struct daemon's conf) with the built-in paths filled in. */
struct daemon_config {
    char socket_path[108];
    char control_path[108];
    char output_dir[512];
    double flush_period_s;
    uint64_t segment_bytes;
    int compress_level;
    double flush_timeout_s;
    uint64_t window_max_events;
    double control_idle_s;
    long control_gid; /* members may control the daemon fully; -1: none */
    uint64_t max_pool_bytes;
    uint64_t max_sessions_per_user;
};

/* A configuration key given on the command line.  It is applied over the
 * file with cuptimon__config_set at startup and again at every reload, so
 * that it keeps winning over the file.  The strings are argv's. */
struct daemon_cli_key {
    const char *option; /* the long option, for messages */
    const char *key;
    const char *value;
};

#define DAEMON_MAX_CLI_KEYS  16
#define DAEMON_REFUSALS_KEPT 16
/* The most a producer's count may claim (larger is a lie; session.c). */
#define SESSION_CLAIM_MAX ((uint64_t)1 << 40)

struct daemon {
    uv_loop_t *loop;
    struct daemon_config cfg;
    int listen_fd, control_fd;
    uv_poll_t listen_poll, control_poll;
    uv_signal_t sig_term, sig_int, sig_hup;
    struct session *sessions;
    uint64_t next_session_id;
    uint64_t sessions_total;
    /* Chunks written as plain zstd because their per-kind record delta
     * did not read back exactly (archive.h): never, unless something is
     * broken; in status. */
    uint64_t rdelta_fallbacks;
    int64_t started_unix_ns;
    int stopping, stop_flushed;
    int64_t stop_started_ns;
    struct flush_wait *flush_waits;
    struct window *windows;
    uint64_t next_window_id;
    /* Turns on the worker pool (session.c): users with sessions waiting,
     * a ring served in turn; archive items running now. */
    struct turn_user *turns;
    unsigned archive_inflight;
    /* Compression scratch for the archive items running now, lent to each
     * work item by the loop thread and given back when it is done: at most
     * archive_inflight_max of them ever exist, made once and reused by
     * every session (issue 49), freed at exit (session_scratch_free). */
    struct cuptimon_aw_scratch **scratch_free;
    unsigned nscratch_free, nscratch;
    uv_timer_t stop_timer, watchdog, accept_timer;
    int accept_paused; /* 1 producer, 2 control listener paused (EMFILE) */
    /* Producers may use descriptors below fd_limit - fd_reserve; the rest
     * is kept for the control socket and the daemon's own files (segment
     * rotation, retention, window traces).  fd_limit is INT_MAX when there
     * is no limit. */
    int fd_limit, fd_reserve;
    int activated;
    char archive_root[600];
    uint64_t refused_producers;
    /* The last producers refused, oldest first from refusal_next (status
     * lists them with why, issue 47). */
    struct refusal {
        int64_t unix_ns;
        int pid;
        uint32_t uid;
        char exe[96];
        char why[300];
    } refusals[DAEMON_REFUSALS_KEPT];
    uint64_t refusal_next;
    uint64_t hellos_deferred; /* refused for EMFILE: the shim tries again soon */
    uint64_t silent_closed;   /* connections closed for sending no hello */
    struct ctl *ctls;         /* open control connections (control.c) */
    uv_timer_t ctl_idle_timer;
    int ctl_idle_timer_on;
    uint64_t ctl_idle_closed; /* control connections closed as idle */
    /* Control connections of users other than operators refused at accept
     * (over max_controls_per_user, or on a descriptor in the reserve), and
     * idle ones closed to make room when the daemon ran out (control.c). */
    uint64_t ctl_refused_over_cap, ctl_refused_in_reserve, ctl_evicted;
    struct cuptimon_agg *agg; /* NULL when aggregation is off; set before the loop runs */
    struct lossreport *loss;  /* lossreport.c */
    uv_timer_t metrics_timer;
    int metrics_failing;

    /* configuration file and retention */
    char conf_path[512];
    struct cuptimon_config conf; /* in effect: defaults, file, command line */
    struct daemon_cli_key cli[DAEMON_MAX_CLI_KEYS];
    size_t ncli;
    uint64_t archive_max_bytes, archive_max_age_s;
    double retention_period_s;
    uv_timer_t retention_timer;
    int retention_running;
    uint64_t bytes_since_sweep;
    struct cuptimon_live_set live;
    /* GPU hardware metrics: the sampler thread (gpm.c), NULL only without
     * memory. */
    struct cuptimon_gpm *gpm;
    struct cuptimon_retention_stats last_sweep;
    int64_t last_sweep_ns;
};

/* main.c: re-reads the configuration file; 0, or -errno with *err set (the
 * running configuration is then kept). */
int daemon_reload(struct daemon *d, char **err);
/* Called as archive bytes are written: starts a retention sweep early when
 * enough was written since the last one that the cap could be passed. */
void daemon_wrote(struct daemon *d, uint64_t bytes);

/* session.c */
int64_t unix_ns_now(void); /* CLOCK_REALTIME in ns */
void session_accept(struct daemon *d, int fd);
/* mode: CUPTIMON_FLUSH_*; a FENCE flush goes out as a plain one to a shim
 * that does not take fences (its hello lacks "fence": true). */
void session_request_flush(struct session *s, uint64_t flush_id, int mode, uint32_t fence);
void session_close_all(struct daemon *d);
/* Frees the compression scratch once no work item runs (at exit). */
void session_scratch_free(struct daemon *d);
/* Out of descriptors: closes up to 8 of the oldest connections that have
 * said no hello for a while (keep excepted; NULL: none).  Returns how many
 * were closed (their descriptors are free once the loop has run their
 * close callbacks). */
int session_make_room(struct daemon *d, const struct session *keep);

/* Whether descriptor fd lies in the reserve kept from producers and
 * ordinary users (the last fd_reserve of the table). */
static inline int fd_in_reserve(const struct daemon *d, int fd)
{
    return fd >= d->fd_limit - d->fd_reserve;
}
size_t session_count(const struct daemon *d);
json_object *session_status(const struct session *s);
int session_idle(const struct session *s);

/* session-layout.c: the per-session layout check.  hello: after the
 * session's layout was built from its hello; string: a STRINGS entry
 * under a CUPTIMON_RECORD_SIZE_KEY (0, or -1 with why filled: a protocol
 * error, and the entry is not used); refresh: rebuilds the layout when it
 * is due and no work item runs; status: the check's findings into a
 * session's status object. */
void session_layout_hello(struct session *s);
int session_layout_string(struct session *s, uint64_t key, const char *str, size_t n, char *why,
                          size_t whylen);
void session_layout_refresh(struct session *s);
void session_layout_status(const struct session *s, json_object *o);
/* main.c: the GPU metrics sampler's settings from the configuration. */
void daemon_gpm_config(const struct cuptimon_config *c, struct cuptimon_gpm_config *g);

/* session-held.c: the HELD reports (issue 33).  msg: -1 with why filled
 * for a report that does not fit the session (a protocol error); check:
 * the inflight_warn_s and pool-cap lines, at each report and flush tick;
 * status and meta: their fields in status --json and meta.json's final. */
int session_held_msg(struct session *s, const uint8_t *body, size_t len, char *why, size_t whylen);
void session_held_check(struct session *s);
/* At the hello: says once (the log) when the pool cannot grow, or when the
 * daemon takes less of it at once than its cap (max_pool_bytes). */
void session_pool_hello(struct session *s);
/* The most slots the session's pool may have out (its cap, or less where
 * max_pool_bytes is less). */
uint32_t session_pool_cap(const struct session *s);
void session_held_status(const struct session *s, json_object *o);
void session_held_meta(const struct session *s, json_object *final);
void session_held_free(struct session *s);

/* lossreport.c: the loss reports that exiting shims leave beside the
 * producer socket, and refusals, counted per user for status. */
struct lossreport;
int lossreport_start(struct daemon *d); /* never fatal: reports are then off */
void lossreport_refused(struct daemon *d, uid_t uid);
/* A refused producer that had gone announced these: lost, counted. */
void lossreport_refused_lost(struct daemon *d, uid_t uid, uint64_t records, uint64_t buffers,
                             uint64_t dropped);
json_object *lossreport_status(const struct daemon *d, const struct conn *conn);
void lossreport_free(struct daemon *d); /* after the loop is closed */

/* control.c: the control socket (cuptimonctl's requests). */
void control_accept(struct daemon *d, int fd);
/* Out of descriptors at a control accept: closes a refused control
 * connection still waiting to be closed, else the longest-idle one of a
 * user who is not an operator.  Returns 1 if one was closed (its
 * descriptor is free once the loop has run its close callback), 0 if none
 * qualifies. */
int control_evict_idle(struct daemon *d);
/* Answers what control started that still waits (at shutdown). */
void control_shutdown(struct daemon *d);

/* Replies that come later than the request (control.c). */
struct ctl_reply;
struct ctl_reply *ctl_reply_hold(struct conn *conn);
/* Sends body as REPLY_OK (ok) or REPLY_ERROR and drops the hold. */
void ctl_reply_send(struct ctl_reply *r, int ok, json_object *body);

/* flush.c: the flush barrier.  Starts a flush of every session (control's
 * flush, and the daemon's stop); cb is called once every session answered
 * and what it sent is written, or once timeout_s passed.  mode is
 * CUPTIMON_FLUSH_PLAIN or CUPTIMON_FLUSH_FENCE (flush.c says what a fence
 * waits for); the daemon never asks for a forced one. */
typedef void (*flush_all_cb)(struct daemon *d, void *ud, json_object *result);
int flush_all(struct daemon *d, int mode, double timeout_s, flush_all_cb cb, void *ud);
/* The same for the sessions whose ids are listed (a restricted user's
 * flush, a window's start and end). */
int flush_some(struct daemon *d, int mode, double timeout_s, const uint64_t *ids, size_t nids,
               flush_all_cb cb, void *ud);
/* session.c calls it when a session answered the flush with this id
 * (FLUSH_DONE; fence_pending: it said CUPTIMON_SHIM_FENCE_PENDING), wrote
 * more, or went away (gone = 1). */
void flush_progress(struct daemon *d, struct session *s, uint64_t flush_id, int gone,
                    int fence_pending);
/* Finishes every barrier still waiting, with what it has (shutdown). */
void flush_shutdown(struct daemon *d);

/* window.c: trace windows. */
struct window;
/* The window ops of control.c's op table; each replies on conn, now or
 * once the window's flushes and trace writing are done. */
void window_op_prepare(struct daemon *d, struct conn *conn, json_object *req);
void window_op_begin(struct daemon *d, struct conn *conn, json_object *req);
void window_op_start(struct daemon *d, struct conn *conn, json_object *req);
void window_op_end(struct daemon *d, struct conn *conn, json_object *req);
void window_op_list(struct daemon *d, struct conn *conn, json_object *req);
/* A session finished its hello: a matching open window takes it in. */
void window_session_joined(struct daemon *d, struct session *s);
void window_session_gone(struct daemon *d, struct session *s);
/* Fails every open window and frees them (shutdown). */
void window_shutdown(struct daemon *d);

#endif
