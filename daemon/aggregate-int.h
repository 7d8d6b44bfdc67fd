/*
 * The live aggregates' internals, shared by the three files that hold them
 * (aggregate.h is the interface): aggregate.c keeps the tables and feeds
 * them, aggregate-query.c builds the JSON view that cuptimonctl top reads,
 * aggregate-prom.c the Prometheus text.  Nothing outside those files may
 * include it.
 */
#ifndef CUPTIMON_AGGREGATE_INT_H
#define CUPTIMON_AGGREGATE_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "aggregate.h"

#define NS_PER_S UINT64_C(1000000000)

/* Devices one session may report; records on more are counted, not kept. */
#define SESSION_DEVICES 16u

/* The busy ring: 64 one-second buckets cover the 60 s shown plus the lag. */
#define RING 64u
/* Kernel pieces a device collects before they are merged into the union. */
#define PEND_MAX 4096u
/* Buckets of the per-session admission sketch (GPU ns of kernels not in
 * the full table, by hash). */
#define CAND 256u

/* Copy directions: CUpti_ActivityMemcpyKind 0..10 (Unknown .. PtoP). */
#define NDIR 11u
/* Device records a session may hold back for the node map (its GPU list
 * being read): 32768 of 40 bytes. */
#define WAIT_EV_MAX 32768u

struct dev_ev;

/* ---- histogram ------------------------------------------------------------ */

struct hist {
    uint64_t count, total, min, max;
    uint32_t b[CUPTIMON_AGG_HIST_BUCKETS];
};

void cuptimon__agg_hist_init(struct hist *h);
void cuptimon__agg_hist_merge(struct hist *into, const struct hist *from);
/* The quantile pm/1000 (pm in per mille). */
uint64_t cuptimon__agg_hist_pct(const struct hist *h, unsigned pm);

/* ---- interned names --------------------------------------------------------- */

struct name {
    struct name *next;
    uint64_t hash;
    uint32_t refs;
    uint32_t len;
    char s[];
};

struct names {
    pthread_mutex_t mu;
    struct name **b;
    size_t nb, n, bytes;
};

uint64_t cuptimon__agg_hash_str(const char *s, size_t len);

/* ---- sessions ------------------------------------------------------------- */

struct kent {
    uint64_t ptr;
    uint32_t dslot;   /* index into the session's devs */
    const char *name; /* interned mangled name, NULL until resolved */
    struct hist h;
};

struct asess {
    uint64_t id;
    pthread_mutex_t mu;
    int refs, dead;   /* under a->mu */
    int64_t ended_ns; /* under a->mu: when cuptimon__agg_end was called, 0 = live */
    /* identity and the caller's counters: under a->mu */
    int64_t pid;
    uint32_t uid;
    char job[128], rank[32], label[128], exe[256];
    char path[16]; /* CUPTI's activity API: "v1", "v2+udr" */
    uint32_t record_bytes_per_kernel;
    uint64_t dropped, lost;
    /* what CUPTI holds behind running work (HELD): since when the oldest
     * record has not completed (Unix ns, 0: none), its name, what waits
     * behind it, and the pool's growth in bytes */
    uint64_t held_since_ns, held_records, held_bytes, grown_bytes;
    uint64_t dropping_since_ns; /* the shim declines CUPTI's requests since (0: not) */
    char held_what[128];
    int held_kernel;   /* the oldest is a kernel, running on held_dev */
    uint32_t held_dev; /* the process's ordinal */
    /* the rest: under mu */
    struct kent **k;
    size_t nk, kcap;
    int32_t *idx; /* open addressing over k[], -1 empty */
    size_t icap;
    struct kent *last;
    uint32_t devs[SESSION_DEVICES];      /* the process's ordinals */
    uint32_t node[SESSION_DEVICES];      /* each one's node GPU (cuptimon__agg_set_node_map) */
    uint8_t unmapped[SESSION_DEVICES];   /* has a UUID node_of may learn (it said -1) */
    struct kent *other[SESSION_DEVICES]; /* folded kernels, per device */
    unsigned ndevs, nunmapped;
    /* Device records of an unmapped ordinal, waiting for the node map
     * (their dev is the slot until then); wait_since: the first one's
     * arrival (the daemon's clock) */
    struct dev_ev *wait_ev;
    size_t nwait, wait_cap;
    int64_t wait_since;
    int no_wait; /* ended (nothing would release them), or the map was too slow */
    uint64_t epoch;
    const struct cuptimon_strtab *seen_tab;
    size_t unresolved;
    uint64_t cand[CAND]; /* admission sketch: ns of kernels waiting outside the table */
    uint64_t min_total;  /* the lightest kept kernel's ns, when min_valid */
    size_t min_idx;
    int min_valid;
    uint64_t buffers, records, undecodable, folded, bad_times;
    uint64_t kernels, kernel_ns;
    uint64_t memcpys, memcpy_bytes, memcpy_ns, memsets, memset_bytes, memset_ns;
    struct hist handoff;
    struct anccl *nccl; /* NCCL_COMMS_SHOWN, allocated at the first NCCL record */
    unsigned nnccl;
    uint64_t nccl_ops, nccl_comms_over, nccl_bad;
};

/* aggregate.c: the NCCL view of session s as JSON (s->mu held). */
struct json_object *cuptimon__agg_nccl_comms_json(const struct asess *s, int64_t now);

/* ---- NCCL (issue 46) -------------------------------------------------------- */

/* A process's communicators as its NCCL records and states tell them: at
 * most NCCL_COMMS_SHOWN per session (more are counted), each with its
 * operations by function (at most NCCL_FUNCS_SHOWN names; more go to the
 * last, "other"). */
#define NCCL_COMMS_SHOWN 32u
#define NCCL_FUNCS_SHOWN 8u
struct anccl_fn {
    char name[17];
    uint64_t ops, bytes, ns;
};
struct anccl {
    uint64_t id;
    char name[65];
    int32_t rank, nranks, nnodes;
    uint64_t state_ns; /* when the shim made the newest state (0: none yet) */
    uint64_t started, completed, bytes;
    uint64_t last_seq1; /* the last finished collective's seq + 1 */
    char last_func[17];
    uint64_t fly_seq, fly_since; /* the collective in flight (fly_since 0: none) */
    char fly_func[17];
    uint64_t warned_since; /* cuptimon__agg_nccl_late said this one */
    struct anccl_fn fn[NCCL_FUNCS_SHOWN];
};

/* ---- devices -------------------------------------------------------------- */

struct bucket {
    int64_t sec; /* the Unix second held, -1 none */
    uint64_t busy_ns, unchecked_ns;
    uint64_t copy_bytes[NDIR];
    uint32_t copies[NDIR];
    uint64_t memset_bytes;
};

struct iv {
    uint64_t s, e;
};

struct adev {
    uint32_t id;
    int64_t newest; /* newest second with data, -1 none */
    struct bucket ring[RING];
    struct iv *iv; /* kept for the union: sorted, disjoint (not touching), unix ns */
    size_t niv, ivcap;
    struct iv pend[PEND_MAX]; /* pieces of this flush, each inside one second */
    size_t npend;
    uint64_t sealed; /* intervals ending at or before this were released */
    uint64_t busy_total, unchecked_total, late_ns;
    uint64_t kernels, kernel_ns;
    uint64_t copy_bytes[NDIR], copies[NDIR];
    uint64_t memset_bytes, memsets;
};

struct cuptimon_agg {
    pthread_mutex_t mu;     /* sessions table, identities, output */
    pthread_mutex_t dev_mu; /* devices */
    unsigned top_n, max_sessions, max_devices;
    int64_t future_ns;
    int64_t keep_ended_ns;
    int64_t map_wait_ns;
    struct asess **sess;
    size_t nsess, sesscap;
    struct adev **dev;
    size_t ndev;
    struct names names;
    int (*node_of)(void *ud, const char *uuid); /* cuptimon__agg_set_node_map */
    void *node_ud;
    struct cuptimon_demangler *dm; /* output only, under mu */
    /* counters: under mu */
    uint64_t buffers, records, aggregated, not_aggregated, folded, bad_times;
    uint64_t dev_not_aggregated, dev_bad_times, dev_own_ordinal; /* under dev_mu */
};

/* The daemon's clock (CLOCK_REALTIME), in Unix ns. */
int64_t cuptimon__agg_now_ns(void);
void cuptimon__agg_copy_str(char *dst, size_t n, const char *src);
/* Under a->mu. */
void cuptimon__agg_sess_expire(struct cuptimon_agg *a, int64_t now, int room_for_one);
/* Under a->mu. */
size_t cuptimon__agg_sess_live(const struct cuptimon_agg *a);

/* ---- shared by the JSON view and the Prometheus text (aggregate-query.c) ---- */

/* A kernel's demangled name, or its pointer when unresolved; free() it. */
char *cuptimon__agg_display_name(struct cuptimon_agg *a, const struct kent *e);
/* The end (exclusive, Unix s) of the window the busy ratios cover. */
int64_t cuptimon__agg_window_end(const struct cuptimon_agg_query *q);
/* A kernel running on a device now, as the sessions' HELD reports say: the
 * earliest since (Unix ns) per node device. */
struct running {
    uint32_t dev;
    uint64_t since_ns;
};
/* Under a->mu: the devices a live session's held kernel runs on, malloc'd
 * into *out (NULL when none); their number.  Takes each session's mu. */
size_t cuptimon__agg_running(struct cuptimon_agg *a, struct running **out);
/* Under dev_mu: creates the devices of r that have no record yet (a job
 * whose first kernel runs long), within max_devices. */
void cuptimon__agg_running_devices(struct cuptimon_agg *a, const struct running *r, size_t n);
/* The since of device id in r (0: nothing runs on it). */
uint64_t cuptimon__agg_running_since(const struct running *r, size_t n, uint32_t id);
/* Under dev_mu: the busy ratio over [end - w, end) seconds, each second at
 * least as busy as a kernel running since run_since (0: none) until now
 * covers it. */
double cuptimon__agg_busy_ratio(const struct adev *d, int64_t end, unsigned w, uint64_t run_since,
                                int64_t now);
/* Under dev_mu: the device of node id, created if new (NULL past
 * max_devices or out of memory). */
struct adev *cuptimon__agg_dev_get(struct cuptimon_agg *a, uint32_t id);

#endif
