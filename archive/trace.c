/*
 * The streaming Chrome trace-event writer (see trace.h for the format).
 *
 * Hot path: one event = a handful of table probes and hand-formatted
 * integers into a fixed output buffer.  Each event reserves its worst-case
 * size up front (bounded: names are cut at TRACE_NAME_MAX bytes before
 * escaping), so the formatting code writes without per-byte checks.
 */
#include "config.h"

#include "trace.h"

#include "cuptimon-proto.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "archive.h"
#include "cbid.h"
#include "demangle.h"
#include "gpm.h"
#include "pgzip.h"
#include "strtab.h"
#include "cuptimon-proto.h"
#include "utf8.h"
#include "cupti-abi.h"

/* A display name is cut at this many source bytes (then "..."): no viewer
 * shows more, and it bounds an event's size. */
#define TRACE_NAME_MAX 8192u
/* Worst case of an escaped, cut name with its quotes. */
#define NAME_JSON_MAX (6u * TRACE_NAME_MAX + 16u)
/* Worst case of everything in one event but the name(s). */
#define EVENT_FIXED_MAX 3072u
/* Annotation and graph-node label names in args are cut at this many bytes. */
#define LABEL_MAX   96u
#define BUF_MIN     (2u * (NAME_JSON_MAX + EVENT_FIXED_MAX))
#define BUF_DEFAULT (256u << 10)

/* The correlation tables are set-associative, a set per value of the
 * correlation id's low bits: one counter fills the sets in turn (an entry
 * lives FLOW_SLOTS ids), and ids numbered apart (kernels, copies and
 * memsets from separate ranges, or out of order) that fall in one set at
 * once take its other ways instead of overwriting each other. */
#define FLOW_SLOTS 16384u /* power of two */
#define FLOW_WAYS  4u
#define FLOW_SETS  (FLOW_SLOTS / FLOW_WAYS)
#define EXT_SLOTS  8192u /* external correlations: two kinds per correlation */
#define EXT_WAYS   8u
#define EXT_SETS   (EXT_SLOTS / EXT_WAYS)
#define MARK_SLOTS 4096u
#define NCACHE_MAX 65536u
#define TRACKS_MAX 65536u

/* ---- per-process state ------------------------------------------------ */

#define DRV_PENDING 8

struct nent {     /* resolved kernel name */
    uint64_t ptr; /* 0: empty */
    char *json;   /* escaped, with quotes */
    uint32_t len;
    uint8_t miss; /* the pointer was not in the string table */
};

struct flowent {
    uint32_t corr; /* 0: empty */
    uint32_t tid;
    int64_t ts;    /* ns relative to base */
    int64_t dur;   /* GPU side: the work's duration */
    uint16_t pend; /* GPU side: its annotation is still to be found (ua_gpu) */
    uint16_t rt;   /* API side: a runtime call (its nested driver launch is not written) */
    uint32_t when; /* the table's clock when it was written: the oldest way goes first */
};

struct extent {
    uint32_t corr; /* 0: empty */
    uint32_t kind;
    uint32_t when;
    uint64_t id;
};

struct uaspan {
    uint64_t id; /* 0: empty */
    uint32_t tid;
    uint32_t by_time;    /* some of its work was launched on another thread */
    int64_t first, last; /* ns relative to base: first start, last end */
};

/* A range for attributing work by launch time (xr_*): relative ns, sorted
 * by thread, begin and depth; parent is an index into the same array. */
struct xrange {
    int64_t b, e; /* e: INT64_MAX while open */
    uint64_t id;
    uint32_t tid, parent; /* parent: XR_NONE at a thread's top */
};
struct xthread {
    uint32_t tid;
    uint32_t lo, hi; /* its ranges: [lo, hi) */
};

struct markent {
    uint32_t id;
    uint32_t used;
    uint64_t name_ptr;
    uint64_t domain_ptr;
};

/* A device's properties, as the shim read them from the driver
 * (CUPTIMON_DEVICE_KEY), checked: Kineto's deviceProperties entry. */
struct tdev {
    uint32_t id;
    uint64_t mem;
    uint32_t v[11]; /* computeMajor .. sharedMemPerMultiprocessor, in dev_keys' order */
    char name[96];
};

struct tproc {
    uint32_t pid; /* as written in the trace */
    uint32_t idx;
    struct cuptimon_proc_info info; /* strings owned */
    const struct cuptimon_strtab *names;
    struct cuptimon_demangler *dm;
    uint64_t names_epoch;

    struct nent *nc;
    size_t nc_cap, nc_n;
    struct nent *nc_last;

    uint32_t *tracks; /* open addressing set of tid + 1 (0 = empty) */
    size_t tr_cap, tr_n;
    uint32_t tr_last;

    struct flowent *api_tab, *gpu_tab;
    struct extent *ext_tab;
    uint32_t tab_clock; /* counts the entries written in the tables */
    struct markent *mark_tab;

    /* Driver launches held back until the next API call of their thread:
     * one that a runtime call of the same correlation follows was made
     * inside it and is not written (Kineto shows the launch once). */
    struct drvpend {
        struct cuptimon_ev ev;
        int64_t ts, dur;
    } drv[DRV_PENDING];
    int ndrv;

    struct tdev *devs; /* read at add_process: the string table may be gone at finish */
    size_t ndevs;
    /* Annotation ranges: the GPU span of each (annotation, GPU track),
     * open addressing; the latest time seen, for ranges still open. */
    struct uaspan *ua;
    size_t ua_cap, ua_n;
    int64_t last_ts;
    int has_last;
    /* The ranges again, indexed for work launched on a thread with no
     * annotation of its own (xr_build): built at the first such launch. */
    struct xrange *xr;
    struct xthread *xt;
    uint32_t nxt;
    int xr_built;

    int ended;   /* cuptimon__trace_end_process was called */
    int pending; /* a marker held back for the marker data that may follow */
    struct cuptimon_ev pend_ev;
    int64_t pend_ts;
    int pend_has_data;
    struct cuptimon_ev pend_data;
};

/* A GPU's process of metric counters (cuptimon__trace_add_gpu). */
struct tgpu {
    uint32_t pid;
    int ordinal;
    char *host; /* "" when not known */
    char uuid[48], name[96], pci_bus_id[32], chip[16];
    uint64_t samples;
};

/* A GPU metrics session's counter tracks: per metric the event name and
 * the argument key, as JSON text, and whether a run of samples is open
 * (its last sample's end, where the run's closing 0 goes). */
struct tgpm {
    uint32_t gpu; /* index in gpus */
    uint32_t n;
    uint64_t gap_ns; /* a sample starting more than this after the last one's end opens a new run */
    int ended;
    struct {
        char name[6 * 160 + 8];
        char key[6 * 20 + 8];
        size_t name_len, key_len;
        int open;
        uint64_t last_end;
    } m[CUPTIMON_GPM_METRICS_MAX];
};

struct cuptimon_trace {
    cuptimon_trace_write_fn fn;
    void *ud;
    char *buf;
    size_t pos, cap;
    int err;
    int started;
    int finished;
    uint64_t nev; /* events in traceEvents so far (for separators) */
    struct cuptimon_trace_opts o;
    struct tproc **procs;
    size_t nprocs, procs_cap;
    struct tgpu **gpus; /* GPU metrics: a process per device */
    size_t ngpus, gpus_cap;
    struct tgpm **gsess; /* ... and the counter tracks of each session */
    size_t ngsess, gsess_cap;
    struct cuptimon_trace_stats st;
    char *tmp; /* NAME_JSON_MAX bytes, for names not cached */
    FILE *f;
    int fd;
    struct cuptimon_pgz *gz; /* gzip output, or NULL */
};

/* ---- output buffer ---------------------------------------------------- */

static void flush_out(struct cuptimon_trace *t)
{
    if (t->pos != 0 && t->err == 0) {
        int rc = t->fn(t->ud, t->buf, t->pos);
        if (rc < 0)
            t->err = rc;
        else
            t->st.bytes += t->pos;
    }
    /* After an error output is dropped, so writing stays cheap and bounded
     * while the caller gets the error from every call. */
    t->pos = 0;
}

/* Room for n bytes at the returned pointer; n <= t->cap always. */
static inline char *reserve(struct cuptimon_trace *t, size_t n)
{
    if (t->cap - t->pos < n)
        flush_out(t);
    return t->buf + t->pos;
}

static inline void commit(struct cuptimon_trace *t, char *p)
{
    t->pos = (size_t)(p - t->buf);
}

#define LIT(p, s) (memcpy((p), (s), sizeof(s) - 1), (p) + sizeof(s) - 1)

/* Writes the member ,"key":v at p and moves p past it, with v as an
 * unsigned (FIELD_U) or signed (FIELD_I) decimal, or as microseconds from
 * ns (FIELD_US).  key must be a string literal that needs no escaping: it
 * is pasted into the literal that LIT copies, so a member costs what it
 * did written out by hand: one fixed-size memcpy, then the number. */
#define FIELD_U(p, key, v)  ((p) = u64d(LIT((p), ",\"" key "\":"), (v)))
#define FIELD_I(p, key, v)  ((p) = i64d(LIT((p), ",\"" key "\":"), (v)))
#define FIELD_US(p, key, v) ((p) = usd(LIT((p), ",\"" key "\":"), (v)))

static const char digits2[201] = "0001020304050607080910111213141516171819"
                                 "2021222324252627282930313233343536373839"
                                 "4041424344454647484950515253545556575859"
                                 "6061626364656667686970717273747576777879"
                                 "8081828384858687888990919293949596979899";

static const uint64_t pow10_tab[20] = {1ull,
                                       10ull,
                                       100ull,
                                       1000ull,
                                       10000ull,
                                       100000ull,
                                       1000000ull,
                                       10000000ull,
                                       100000000ull,
                                       1000000000ull,
                                       10000000000ull,
                                       100000000000ull,
                                       1000000000000ull,
                                       10000000000000ull,
                                       100000000000000ull,
                                       1000000000000000ull,
                                       10000000000000000ull,
                                       100000000000000000ull,
                                       1000000000000000000ull,
                                       10000000000000000000ull};

/* Decimal digits, written back to front straight into place: no
 * variable-length memcpy (which would be a libc call per number). */
static inline char *u64d(char *p, uint64_t v)
{
    /* digits = floor(log10(v)) + 1, from the bit length (1233/4096 is
     * log10(2) to 4 digits) and one table compare. */
    unsigned t = ((64u - (unsigned)__builtin_clzll(v | 1)) * 1233u) >> 12;
    unsigned n = t + 1 - ((v | 1) < pow10_tab[t]);
    char *e;

    e = p + n;
    p = e;
    while (v >= 100) {
        unsigned r = (unsigned)(v % 100);
        v /= 100;
        p -= 2;
        memcpy(p, digits2 + 2 * r, 2);
    }
    if (v >= 10) {
        p -= 2;
        memcpy(p, digits2 + 2 * v, 2);
    } else {
        *--p = (char)('0' + v);
    }
    return e;
}

static inline char *i64d(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return u64d(p, (uint64_t)0 - (uint64_t)v);
    }
    return u64d(p, (uint64_t)v);
}

/* ns -> "us.fff", exactly. */
static inline char *usd(char *p, int64_t ns)
{
    uint64_t a;
    unsigned frac;

    if (ns < 0) {
        *p++ = '-';
        a = (uint64_t)0 - (uint64_t)ns;
    } else {
        a = (uint64_t)ns;
    }
    p = u64d(p, a / 1000);
    frac = (unsigned)(a % 1000);
    *p++ = '.';
    *p++ = (char)('0' + frac / 100);
    memcpy(p, digits2 + 2 * (frac % 100), 2);
    return p + 2;
}

size_t cuptimon__format_us(char *out, int64_t ns)
{
    char *e = usd(out, ns);
    *e = '\0';
    return (size_t)(e - out);
}

static inline char *hex64(char *p, uint64_t v)
{
    static const char hx[] = "0123456789abcdef";
    char tmp[16];
    int n = 0;

    do {
        tmp[n++] = hx[v & 15];
        v >>= 4;
    } while (v);
    *p++ = '0';
    *p++ = 'x';
    while (n)
        *p++ = tmp[--n];
    return p;
}

size_t cuptimon__json_escape(char *out, const char *s, size_t len)
{
    static const char hx[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    char *p = out;
    size_t i = 0;

    *p++ = '"';
    while (i < len) {
        unsigned c = u[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            *p++ = (char)c;
            i++;
            continue;
        }
        if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = (char)c;
            i++;
            continue;
        }
        if (c < 0x20) {
            *p++ = '\\';
            switch (c) {
            case '\n': *p++ = 'n'; break;
            case '\r': *p++ = 'r'; break;
            case '\t': *p++ = 't'; break;
            case '\b': *p++ = 'b'; break;
            case '\f': *p++ = 'f'; break;
            default:
                *p++ = 'u';
                *p++ = '0';
                *p++ = '0';
                *p++ = hx[c >> 4];
                *p++ = hx[c & 15];
            }
            i++;
            continue;
        }
        size_t n = cuptimon__utf8_len(u + i, len - i);
        if (n == 0) {
            p = LIT(p, "\\ufffd");
            i++;
            continue;
        }
        memcpy(p, u + i, n);
        p += n;
        i += n;
    }
    *p++ = '"';
    return (size_t)(p - out);
}

/* Escapes a display name, cut at TRACE_NAME_MAX bytes (at a character
 * boundary where the text is UTF-8) with "..." appended.  out holds
 * NAME_JSON_MAX bytes. */
static size_t name_json(char *out, const char *s, size_t len)
{
    size_t n;

    if (len <= TRACE_NAME_MAX)
        return cuptimon__json_escape(out, s, len);
    len = TRACE_NAME_MAX;
    while (len > TRACE_NAME_MAX - 4 && ((unsigned char)s[len] & 0xc0) == 0x80)
        len--;
    n = cuptimon__json_escape(out, s, len);
    memcpy(out + n - 1, "...\"", 4);
    return n + 3;
}

/* ---- sinks ------------------------------------------------------------ */

static int file_write(void *ud, const void *buf, size_t len)
{
    FILE *f = ud;
    if (fwrite(buf, 1, len, f) != len)
        return errno ? -errno : -EIO;
    return 0;
}

static int fd_write(void *ud, const void *buf, size_t len)
{
    return cuptimon__write_all(*(int *)ud, buf, len);
}

/* gzip (opts.gzip_level): the text goes through deflate to the fd, on
 * opts.gzip_threads threads (archive/pgzip.c).  A trace of a PyTorch step
 * is about 14x smaller at level 1, and tools read .json.gz directly (HTA,
 * Perfetto, chrome://tracing). */
static int gz_write(void *ud, const void *buf, size_t len)
{
    return cuptimon__pgz_write(ud, buf, len);
}

int cuptimon__trace_new(const struct cuptimon_trace_opts *o, cuptimon_trace_write_fn fn, void *ud,
                        struct cuptimon_trace **out)
{
    struct cuptimon_trace *t;

    *out = NULL;
    if (fn == NULL)
        return -EINVAL;
    t = calloc(1, sizeof(*t));
    if (t == NULL)
        return -ENOMEM;
    if (o != NULL)
        t->o = *o;
    t->cap = t->o.buf_size ? t->o.buf_size : BUF_DEFAULT;
    if (t->cap < BUF_MIN)
        t->cap = BUF_MIN;
    t->buf = malloc(t->cap);
    t->tmp = malloc(NAME_JSON_MAX);
    if (t->buf == NULL || t->tmp == NULL) {
        free(t->buf);
        free(t->tmp);
        free(t);
        return -ENOMEM;
    }
    t->fn = fn;
    t->ud = ud;
    t->fd = -1;
    *out = t;
    return 0;
}

int cuptimon__trace_new_file(const struct cuptimon_trace_opts *o, FILE *f,
                             struct cuptimon_trace **out)
{
    int rc = cuptimon__trace_new(o, file_write, f, out);
    if (rc == 0)
        (*out)->f = f;
    return rc;
}

int cuptimon__trace_new_fd(const struct cuptimon_trace_opts *o, int fd, struct cuptimon_trace **out)
{
    struct cuptimon_trace *t;
    int level = o ? o->gzip_level : 0;
    int rc = cuptimon__trace_new(o, level > 0 ? gz_write : fd_write, NULL, &t);

    if (rc < 0) {
        *out = NULL;
        return rc;
    }
    t->fd = fd;
    t->ud = &t->fd;
    if (level > 0) {
        if ((rc = cuptimon__pgz_open(fd, level, o->gzip_threads, &t->gz)) < 0) {
            cuptimon__trace_free(t);
            *out = NULL;
            return rc;
        }
        t->ud = t->gz;
    }
    *out = t;
    return 0;
}

/* The top of the file, Kineto's way: its schema version and the time base
 * (ts is microseconds since baseTimeNanoseconds, Unix time) before the
 * events, as torch.profiler writes them, so that tools that read the
 * first lines find them.  Returns p past it. */
static char *header(struct cuptimon_trace *t, char *p)
{
    p = LIT(p, "{\"schemaVersion\": 1,\n\"baseTimeNanoseconds\": ");
    p = u64d(p, t->o.base_ns);
    p = LIT(p, ",\n\"traceEvents\":[\n");
    t->started = 1;
    return p;
}

/* Starts an event: writes the header or separator; returns where the
 * event text goes, with room for n bytes. */
static inline char *ev_open(struct cuptimon_trace *t, size_t n)
{
    char *p = reserve(t, n + 96);

    if (!t->started)
        p = header(t, p);
    if (t->nev++)
        p = LIT(p, ",\n");
    t->st.events++;
    return p;
}

/* ---- processes and tracks -------------------------------------------- */

static char *xstrdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void proc_free(struct tproc *P)
{
    if (P == NULL)
        return;
    if (P->nc != NULL)
        for (size_t i = 0; i < P->nc_cap; i++)
            free(P->nc[i].json);
    free(P->nc);
    free(P->tracks);
    free(P->api_tab);
    free(P->gpu_tab);
    free(P->ext_tab);
    free(P->mark_tab);
    free(P->ua); /* a process whose end was never written (a trace freed unfinished) */
    free(P->xr);
    free(P->xt);
    free(P->devs);
    free((char *)P->info.hostname);
    free((char *)P->info.label);
    free((char *)P->info.job_id);
    free((char *)P->info.exe);
    free(P);
}

/* Writes a metadata event: {"ph":"M","name":what,"pid":P[,"tid":T],"args":{key:val}}
 * with val already JSON. */
static void meta_event(struct cuptimon_trace *t, uint32_t pid, int with_tid, uint32_t tid,
                       const char *what, const char *key, const char *val, size_t vlen)
{
    char *p = ev_open(t, vlen + 256);

    p = LIT(p, "{\"ph\":\"M\",\"name\":\"");
    memcpy(p, what, strlen(what));
    p += strlen(what);
    p = LIT(p, "\",\"pid\":");
    p = u64d(p, pid);
    if (with_tid)
        FIELD_U(p, "tid", tid);
    p = LIT(p, ",\"args\":{\"");
    memcpy(p, key, strlen(key));
    p += strlen(key);
    p = LIT(p, "\":");
    memcpy(p, val, vlen);
    p += vlen;
    p = LIT(p, "}}");
    commit(t, p);
}

static void meta_string(struct cuptimon_trace *t, uint32_t pid, int with_tid, uint32_t tid,
                        const char *what, const char *key, const char *s)
{
    size_t n = strlen(s);
    if (n > TRACE_NAME_MAX)
        n = TRACE_NAME_MAX;
    n = name_json(t->tmp, s, n);
    meta_event(t, pid, with_tid, tid, what, key, t->tmp, n);
}

static void meta_int(struct cuptimon_trace *t, uint32_t pid, int with_tid, uint32_t tid,
                     const char *what, int64_t v)
{
    char num[24];
    size_t n = (size_t)(i64d(num, v) - num);
    meta_event(t, pid, with_tid, tid, what, "sort_index", num, n);
}

/* Kineto's deviceProperties keys after id, name and totalGlobalMem, in its
 * order, with the largest value each may take (they come from a producer:
 * a value out of range refuses the device). */
static const struct {
    const char *key;
    uint32_t max;
} dev_keys[11] = {
    {"computeMajor", 99},
    {"computeMinor", 99},
    {"maxThreadsPerBlock", 1u << 20},
    {"maxThreadsPerMultiprocessor", 1u << 20},
    {"regsPerBlock", 1u << 24},
    {"warpSize", 1024},
    {"sharedMemPerBlock", 1u << 30},
    {"numSms", 1u << 16},
    {"regsPerMultiprocessor", 1u << 24},
    {"sharedMemPerBlockOptin", 1u << 30},
    {"sharedMemPerMultiprocessor", 1u << 30},
};

/* A decimal of at most 20 digits at *s, then one space; *s moves past. */
static int dev_num(const char **s, const char *e, uint64_t max, uint64_t *out)
{
    const char *p = *s;
    uint64_t v = 0;
    if (p >= e || *p < '0' || *p > '9')
        return -1;
    while (p < e && *p >= '0' && *p <= '9') {
        if (v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p++ - '0');
    }
    if (v > max || p >= e || *p != ' ')
        return -1;
    *s = p + 1;
    *out = v;
    return 0;
}

/* Parses the shim's device string (cuptimon-proto.h, CUPTIMON_DEVICE_KEY)
 * for device ord: every number in its range, the id the key's, a name of
 * 1 to 95 bytes with no control character.  0, or -1 when anything is off
 * (the string comes from the producer, which may lie). */
static int dev_parse(const char *s, size_t n, uint32_t ord, struct tdev *d)
{
    const char *e = s + n;
    uint64_t v;
    if (dev_num(&s, e, CUPTIMON_DEVICES_MAX - 1, &v) < 0 || v != ord)
        return -1;
    d->id = (uint32_t)v;
    if (dev_num(&s, e, 1ull << 50, &d->mem) < 0)
        return -1;
    for (size_t i = 0; i < 11; i++) {
        if (dev_num(&s, e, dev_keys[i].max, &v) < 0)
            return -1;
        d->v[i] = (uint32_t)v;
    }
    if (e - s < 1 || (size_t)(e - s) >= sizeof d->name)
        return -1;
    for (const char *q = s; q < e; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7f)
            return -1;
    memcpy(d->name, s, (size_t)(e - s));
    d->name[e - s] = '\0';
    return 0;
}

/* The devices names holds (the shim's, see report_devices in the shim). */
static void read_devices(struct cuptimon_trace *t, struct tproc *P,
                         const struct cuptimon_strtab *names)
{
    for (uint32_t d = 0; names && d < CUPTIMON_DEVICES_MAX; d++) {
        size_t n;
        const char *s = cuptimon__strtab_get(names, CUPTIMON_DEVICE_KEY(d), &n);
        struct tdev dv;
        if (s == NULL)
            continue;
        if (dev_parse(s, n, d, &dv) < 0) {
            t->st.devices_refused++;
            continue;
        }
        if (P->devs == NULL && (P->devs = calloc(CUPTIMON_DEVICES_MAX, sizeof *P->devs)) == NULL)
            return;
        P->devs[P->ndevs++] = dv;
    }
}

int cuptimon__trace_add_process(struct cuptimon_trace *t, const struct cuptimon_proc_info *p,
                                const struct cuptimon_strtab *names, struct cuptimon_demangler *dm)
{
    struct tproc *P;
    char text[1024];
    size_t n = 0;

    if (t->finished)
        return -EINVAL;
    if (t->nprocs >= (1u << 20))
        return -E2BIG; /* keeps flow ids below 2^53 */
    if (t->nprocs == t->procs_cap) {
        size_t nc = t->procs_cap ? t->procs_cap * 2 : 8;
        struct tproc **np = realloc(t->procs, nc * sizeof(*np));
        if (np == NULL)
            return -ENOMEM;
        t->procs = np;
        t->procs_cap = nc;
    }
    P = calloc(1, sizeof(*P));
    if (P == NULL)
        return -ENOMEM;
    P->info = *p;
    P->info.hostname = xstrdup(p->hostname);
    P->info.label = xstrdup(p->label);
    P->info.job_id = xstrdup(p->job_id);
    P->info.exe = xstrdup(p->exe);
    if ((p->hostname && !P->info.hostname) || (p->label && !P->info.label) ||
        (p->job_id && !P->info.job_id) || (p->exe && !P->info.exe)) {
        proc_free(P);
        return -ENOMEM;
    }
    P->idx = (uint32_t)t->nprocs;
    P->pid = p->pid;
    for (size_t i = 0; i < t->nprocs; i++)
        if (t->procs[i]->pid == P->pid)
            P->pid = 0x40000000u + P->idx;
    P->names = names;
    P->dm = dm;
    P->names_epoch = cuptimon__strtab_epoch(names);
    t->procs[t->nprocs++] = P;
    read_devices(t, P, names);

    /* Kineto's process metadata: process_name is the command's name
     * ("python3"), here with the rank and label that tell ranks apart in
     * a merged trace; the rest goes into process_labels after Kineto's
     * "CPU".  All three carry "tid":0 as Kineto's do. */
    {
        const char *exe = p->exe && *p->exe ? p->exe : NULL;
        const char *base = exe ? strrchr(exe, '/') : NULL;
        base = base ? base + 1 : exe;
        if (base && *base)
            n += (size_t)snprintf(text + n, sizeof(text) - n, "%.255s", base);
        else
            n += (size_t)snprintf(text + n, sizeof(text) - n, "pid %u", p->pid);
    }
    if (p->rank >= 0 && n < sizeof(text))
        n += (size_t)snprintf(text + n, sizeof(text) - n, " rank %lld", (long long)p->rank);
    if (p->label && *p->label && n < sizeof(text))
        n += (size_t)snprintf(text + n, sizeof(text) - n, " (%.255s)", p->label);
    meta_string(t, P->pid, 1, 0, "process_name", "name", text);

    n = 0;
    text[0] = '\0';
#define ADDL(...)                                                                                  \
    do {                                                                                           \
        if (n < sizeof(text))                                                                      \
            n += (size_t)snprintf(text + n, sizeof(text) - n, __VA_ARGS__);                        \
    } while (0)
    ADDL("CPU");
    if (p->hostname && *p->hostname)
        ADDL(", host %.255s", p->hostname);
    if (p->rank >= 0) {
        ADDL(", rank %lld", (long long)p->rank);
        if (p->world_size >= 0)
            ADDL("/%lld", (long long)p->world_size);
    }
    if (p->local_rank >= 0)
        ADDL(", local rank %lld", (long long)p->local_rank);
    if (p->job_id && *p->job_id)
        ADDL(", job %.255s", p->job_id);
    if (p->label && *p->label)
        ADDL(", %.255s", p->label);
    if (p->cupti_version)
        ADDL(", CUPTI %u", p->cupti_version);
    if (P->pid != p->pid)
        ADDL(", pid %u", p->pid);
#undef ADDL
    meta_string(t, P->pid, 1, 0, "process_labels", "labels", text);
    /* Kineto sorts a CPU process by its pid; a rank, when known, keeps the
     * ranks of a merged trace in order (ranks are far below pids). */
    meta_int(t, P->pid, 1, 0, "process_sort_index", p->rank >= 0 ? p->rank : (int64_t)P->pid);
    return t->err ? t->err : (int)P->idx;
}

/* Emits thread_name/thread_sort_index for a synthetic track the first time
 * it is used.  Returns 1 when the track is new. */
static int track_seen(struct tproc *P, uint32_t tid)
{
    uint32_t key = tid + 1; /* synthetic tids never are 0xffffffff */
    size_t mask, i;

    if (P->tr_last == key)
        return 0;
    if (P->tracks == NULL) {
        P->tr_cap = 64;
        P->tracks = calloc(P->tr_cap, sizeof(*P->tracks));
        if (P->tracks == NULL)
            return 0; /* unnamed track: harmless */
    }
    mask = P->tr_cap - 1;
    for (i = (key * 2654435761u) & mask; P->tracks[i] != 0; i = (i + 1) & mask) {
        if (P->tracks[i] == key) {
            P->tr_last = key;
            return 0;
        }
    }
    if (P->tr_n >= TRACKS_MAX)
        return 0;
    if ((P->tr_n + 1) * 2 > P->tr_cap) {
        size_t ncap = P->tr_cap * 2;
        uint32_t *nt = calloc(ncap, sizeof(*nt));
        if (nt == NULL)
            return 0;
        for (size_t j = 0; j < P->tr_cap; j++) {
            uint32_t k = P->tracks[j];
            if (k == 0)
                continue;
            size_t h = (k * 2654435761u) & (ncap - 1);
            while (nt[h] != 0)
                h = (h + 1) & (ncap - 1);
            nt[h] = k;
        }
        free(P->tracks);
        P->tracks = nt;
        P->tr_cap = ncap;
        mask = ncap - 1;
        for (i = (key * 2654435761u) & mask; P->tracks[i] != 0; i = (i + 1) & mask)
            ;
    }
    P->tracks[i] = key;
    P->tr_n++;
    P->tr_last = key;
    return 1;
}

static inline uint32_t synth_tid(uint32_t hi, uint32_t stream, uint32_t type)
{
    return 0x80000000u | (hi & 15u) << 27 | (stream & 0x7fffffu) << 4 | type;
}

static uint32_t gpu_track(struct cuptimon_trace *t, struct tproc *P, uint32_t dev, uint32_t stream)
{
    uint32_t tid = synth_tid(dev, stream, 1);

    if (track_seen(P, tid)) {
        char name[96];
        if (stream == UINT32_MAX)
            snprintf(name, sizeof(name), "GPU %u", dev);
        else
            snprintf(name, sizeof(name), "GPU %u stream %u", dev, stream);
        meta_string(t, P->pid, 1, tid, "thread_name", "name", name);
        meta_int(t, P->pid, 1, tid, "thread_sort_index",
                 (int64_t)(dev & 15u) * 1000000 + 100000 + (stream & 0x7fffffu) % 100000);
    }
    return tid;
}

/* A CPU thread's track, named the first time it is seen when the shim
 * sent the thread's name (its comm), sorted by tid as Kineto does. */
static uint32_t cpu_track(struct cuptimon_trace *t, struct tproc *P, uint32_t tid)
{
    size_t n;
    const char *nm;
    if (tid & 0x80000000u || !track_seen(P, tid))
        return tid;
    if (P->names && (nm = cuptimon__strtab_get(P->names, CUPTIMON_THREAD_NAME_KEY(tid), &n))) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(n < 48 ? n : 48), nm);
        meta_string(t, P->pid, 1, tid, "thread_name", "name", name);
    }
    meta_int(t, P->pid, 1, tid, "thread_sort_index", (int64_t)tid);
    return tid;
}

static uint32_t sync_track(struct cuptimon_trace *t, struct tproc *P, uint32_t ctx, uint32_t stream)
{
    uint32_t tid = synth_tid(ctx, stream, 3);

    if (track_seen(P, tid)) {
        char name[96];
        if (stream == UINT32_MAX)
            snprintf(name, sizeof(name), "CUDA sync ctx %u", ctx);
        else
            snprintf(name, sizeof(name), "CUDA sync ctx %u stream %u", ctx, stream);
        meta_string(t, P->pid, 1, tid, "thread_name", "name", name);
        meta_int(t, P->pid, 1, tid, "thread_sort_index", (int64_t)20000000 + (ctx & 15u) * 100000);
    }
    return tid;
}

/* ---- names ------------------------------------------------------------ */

static void nc_clear(struct tproc *P)
{
    for (size_t i = 0; i < P->nc_cap; i++) {
        free(P->nc[i].json);
        P->nc[i].json = NULL;
        P->nc[i].ptr = 0;
    }
    P->nc_n = 0;
    P->nc_last = NULL;
}

static inline size_t nc_hash(uint64_t p)
{
    p ^= p >> 33;
    p *= 0xff51afd7ed558ccdull;
    p ^= p >> 33;
    return (size_t)p;
}

/* Formats the display name for a kernel name pointer into out
 * (NAME_JSON_MAX bytes).  *miss = 1 when the pointer was unknown. */
static size_t kernel_name_json(struct tproc *P, uint64_t ptr, char *out, int *miss)
{
    size_t len = 0;
    const char *s = cuptimon__strtab_get(P->names, ptr, &len);

    if (s == NULL) {
        char tmp[64];
        char *e = LIT(tmp, "<unknown kernel ");
        e = hex64(e, ptr);
        *e++ = '>';
        *miss = 1;
        return cuptimon__json_escape(out, tmp, (size_t)(e - tmp));
    }
    *miss = 0;
    if (P->dm != NULL && s[0] == '_') {
        const char *d = cuptimon__demangle(P->dm, s);
        if (d != s)
            return name_json(out, d, strlen(d));
    }
    return name_json(out, s, len);
}

struct name_ref {
    const char *json;
    size_t len;
};

/* Rehashes the name cache into twice the slots; 0 or -ENOMEM. */
static int nc_grow(struct tproc *P)
{
    size_t ncap = P->nc_cap * 2;
    struct nent *nn = calloc(ncap, sizeof(*nn));

    if (nn == NULL)
        return -ENOMEM;
    for (size_t j = 0; j < P->nc_cap; j++) {
        if (P->nc[j].ptr == 0)
            continue;
        size_t h = nc_hash(P->nc[j].ptr) & (ncap - 1);
        while (nn[h].ptr != 0)
            h = (h + 1) & (ncap - 1);
        nn[h] = P->nc[j];
    }
    free(P->nc);
    P->nc = nn;
    P->nc_cap = ncap;
    P->nc_last = NULL;
    return 0;
}

static struct nent *nc_slot(struct tproc *P, uint64_t ptr)
{
    size_t mask = P->nc_cap - 1, i = nc_hash(ptr) & mask;

    while (P->nc[i].ptr != 0 && P->nc[i].ptr != ptr)
        i = (i + 1) & mask;
    return &P->nc[i];
}

/* The JSON display name of a kernel name pointer.  The result points into
 * the cache or into t->tmp (valid until t->tmp is used again). */
static struct name_ref kernel_name(struct cuptimon_trace *t, struct tproc *P, uint64_t ptr)
{
    struct name_ref r;
    struct nent *e;
    int miss;

    if (P->names_epoch != cuptimon__strtab_epoch(P->names)) {
        nc_clear(P);
        P->names_epoch = cuptimon__strtab_epoch(P->names);
    }
    e = P->nc_last;
    if (e != NULL && e->ptr == ptr && !e->miss) {
        r.json = e->json;
        r.len = e->len;
        return r;
    }
    if (P->nc == NULL) {
        P->nc = calloc(64, sizeof(*P->nc));
        P->nc_cap = P->nc ? 64 : 0;
    }
    e = NULL;
    if (P->nc_cap != 0 && ptr != 0) {
        e = nc_slot(P, ptr);
        if (e->ptr == ptr) {
            /* A cached miss is re-checked: the string may have arrived
             * since; when it has, this slot is refreshed below. */
            if (!e->miss || cuptimon__strtab_get(P->names, ptr, NULL) == NULL) {
                if (e->miss)
                    t->st.unknown_names++;
                P->nc_last = e;
                r.json = e->json;
                r.len = e->len;
                return r;
            }
        } else if (P->nc_n >= NCACHE_MAX) {
            e = NULL;
        } else if ((P->nc_n + 1) * 2 > P->nc_cap) {
            e = nc_grow(P) == 0 ? nc_slot(P, ptr) : NULL;
        }
    }
    r.len = kernel_name_json(P, ptr, t->tmp, &miss);
    r.json = t->tmp;
    if (miss)
        t->st.unknown_names++;
    if (e != NULL) {
        char *copy = malloc(r.len);
        if (copy != NULL) {
            memcpy(copy, t->tmp, r.len);
            if (e->ptr == ptr) {
                free(e->json); /* refreshing a former miss */
            } else {
                e->ptr = ptr;
                P->nc_n++;
            }
            e->json = copy;
            e->len = (uint32_t)r.len;
            e->miss = (uint8_t)miss;
            P->nc_last = e;
            r.json = copy;
        }
    }
    return r;
}

/* A marker or domain name: rare, not cached, not demangled. */
static size_t plain_name_json(struct tproc *P, uint64_t ptr, const char *dflt, char *out)
{
    size_t len = 0;
    const char *s = cuptimon__strtab_get(P->names, ptr, &len);

    if (s == NULL)
        return cuptimon__json_escape(out, dflt, strlen(dflt));
    return name_json(out, s, len);
}

/* ---- correlation tables ------------------------------------------------ */

/* The flow tables, on a process's first event; the annotation and marker
 * tables when the first such record arrives. */
static int tables_alloc(struct tproc *P)
{
    if (P->api_tab != NULL)
        return 0;
    /* A set is two cache lines: aligned, it touches no third. */
    if (posix_memalign((void **)&P->api_tab, 64, FLOW_SLOTS * sizeof(*P->api_tab)) != 0)
        P->api_tab = NULL;
    if (posix_memalign((void **)&P->gpu_tab, 64, FLOW_SLOTS * sizeof(*P->gpu_tab)) != 0)
        P->gpu_tab = NULL;
    if (P->api_tab != NULL)
        memset(P->api_tab, 0, FLOW_SLOTS * sizeof(*P->api_tab));
    if (P->gpu_tab != NULL)
        memset(P->gpu_tab, 0, FLOW_SLOTS * sizeof(*P->gpu_tab));
    if (P->api_tab == NULL || P->gpu_tab == NULL) {
        free(P->api_tab);
        free(P->gpu_tab);
        P->api_tab = P->gpu_tab = NULL;
        return -ENOMEM;
    }
    return 0;
}

/* The ways of corr's set (EXT_WAYS entries from *set) that hold its
 * external correlations, in the order they came: at most 2. */
static int ext_get(const struct tproc *P, uint32_t corr, struct extent **set, unsigned w[2])
{
    struct extent *s;
    int n = 0;

    if (corr == 0 || P->ext_tab == NULL)
        return 0;
    s = *set = &P->ext_tab[(corr & (EXT_SETS - 1)) * EXT_WAYS];
    for (unsigned i = 0; i < EXT_WAYS && n < 2; i++)
        if (s[i].corr == corr)
            w[n++] = i;
    if (n == 2 && P->tab_clock - s[w[1]].when > P->tab_clock - s[w[0]].when) {
        unsigned x = w[0];
        w[0] = w[1];
        w[1] = x;
    }
    return n;
}

static char *ext_args(char *p, const struct tproc *P, uint32_t corr)
{
    struct extent *set = NULL;
    unsigned ways[2];
    int n;

    if (corr == 0 || P->ext_tab == NULL)
        return p;
    n = ext_get(P, corr, &set, ways);

    for (int w = 0; w < n; w++) {
        const struct extent *e = &set[ways[w]];
        const char *kn;
        p = w ? LIT(p, ",\"external id 2\":") : LIT(p, ",\"External id\":"); /* Kineto's key */
        p = u64d(p, e->id);
        p = w ? LIT(p, ",\"external kind 2\":") : LIT(p, ",\"external kind\":");
        kn = cuptimon__external_kind_name(e->kind);
        if (kn != NULL) {
            *p++ = '"';
            memcpy(p, kn, strlen(kn));
            p += strlen(kn);
            *p++ = '"';
        } else {
            p = u64d(p, e->kind);
        }
        /* A user annotation (cuptimon_push_annotation: kind CUSTOM1) has
         * its name in the producer's string table. */
        size_t nlen;
        const char *nm;
        if (e->kind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1 && P->names &&
            (nm = cuptimon__strtab_get(P->names, CUPTIMON_ANNOTATION_KEY(e->id), &nlen))) {
            p = LIT(p, ",\"annotation\":");
            p += cuptimon__json_escape(p, nm, nlen > LABEL_MAX ? LABEL_MAX : nlen);
        }
    }
    return p;
}

/* Keeps an external correlation: in its correlation's way of that kind,
 * else in a free way of the set or the one written longest ago.  A third
 * kind for one correlation replaces its second. */
static void ext_put(struct tproc *P, const struct cuptimon_ev *ev)
{
    uint32_t corr = ev->correlation_id;
    struct extent *s, *v = NULL;
    unsigned have[2];

    if (corr == 0)
        return;
    if (P->ext_tab == NULL) {
        P->ext_tab = calloc(EXT_SLOTS, sizeof(*P->ext_tab));
        if (P->ext_tab == NULL)
            return; /* the annotation is lost, nothing else */
    }
    s = &P->ext_tab[(corr & (EXT_SETS - 1)) * EXT_WAYS];
    for (unsigned w = 0; w < EXT_WAYS && v == NULL; w++)
        if (s[w].corr == corr && s[w].kind == ev->u.ext.external_kind)
            v = &s[w];
    if (v != NULL) {
        v->id = ev->u.ext.external_id;
        return;
    }
    if (ext_get(P, corr, &s, have) == 2) {
        v = &s[have[1]];
    } else {
        v = &s[0];
        for (unsigned w = 0; w < EXT_WAYS; w++) {
            if (s[w].corr == 0) {
                v = &s[w];
                break;
            }
            if (P->tab_clock - s[w].when > P->tab_clock - v->when)
                v = &s[w];
        }
    }
    v->corr = corr;
    v->kind = ev->u.ext.external_kind;
    v->id = ev->u.ext.external_id;
    v->when = P->tab_clock++;
}

/* Corr's set in a flow table, and its home way there: one counter keeps
 * every entry in its home way, where the table was direct-mapped before,
 * so that a lookup or a write usually looks at one entry. */
static inline struct flowent *flow_set(struct flowent *tab, uint32_t corr, unsigned *home)
{
    *home = (corr / FLOW_SETS) & (FLOW_WAYS - 1);
    return &tab[(corr & (FLOW_SETS - 1)) * FLOW_WAYS];
}

/* The entry of corr in a flow table, or NULL. */
static inline struct flowent *flow_find(struct flowent *tab, uint32_t corr)
{
    unsigned h;
    struct flowent *s = flow_set(tab, corr, &h);
    if (s[h].corr == corr)
        return &s[h];
    for (unsigned w = 0; w < FLOW_WAYS; w++)
        if (s[w].corr == corr)
            return &s[w];
    return NULL;
}

/* The entry to write corr into: its own; else its home way when that is
 * free or holds an entry older than a table's worth of writes (one
 * counter's entry of FLOW_SLOTS ids before); else a free way of the set
 * or the one written longest ago. */
static inline struct flowent *flow_take(struct tproc *P, struct flowent *tab, uint32_t corr)
{
    unsigned h;
    struct flowent *s = flow_set(tab, corr, &h), *v = &s[h];
    if (v->corr != corr && v->corr != 0 && P->tab_clock - v->when < FLOW_SLOTS) {
        struct flowent *free_way = NULL, *oldest = v;
        v = NULL;
        for (unsigned w = 0; w < FLOW_WAYS; w++) {
            if (s[w].corr == corr) {
                v = &s[w];
                break;
            }
            if (s[w].corr == 0) {
                if (free_way == NULL)
                    free_way = &s[w];
            } else if (P->tab_clock - s[w].when > P->tab_clock - oldest->when) {
                oldest = &s[w];
            }
        }
        if (v == NULL)
            v = free_way != NULL ? free_way : oldest;
    }
    v->when = P->tab_clock++;
    return v;
}

static void flow_pair(struct cuptimon_trace *t, struct tproc *P, uint32_t corr,
                      const struct flowent *api, uint32_t gpu_tid, int64_t gpu_ts)
{
    uint64_t id = (uint64_t)P->idx << 32 | corr;
    char *p = ev_open(t, 512);

    p = LIT(p, "{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":");
    p = u64d(p, id);
    FIELD_U(p, "pid", P->pid);
    FIELD_U(p, "tid", api->tid);
    FIELD_US(p, "ts", api->ts);
    p = LIT(p, "}");
    commit(t, p);

    p = ev_open(t, 512);
    p = LIT(p, "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":");
    p = u64d(p, id);
    FIELD_U(p, "pid", P->pid);
    FIELD_U(p, "tid", gpu_tid);
    FIELD_US(p, "ts", gpu_ts);
    p = LIT(p, "}");
    commit(t, p);
    t->st.flows++;
}

static void ua_late(struct cuptimon_trace *t, struct tproc *P, const struct flowent *g,
                    const struct flowent *api);

/* GPU work corr on track tid: its flow from the launch, now if the launch
 * was seen, else when it is (flow_api).  pend: its annotation is still to
 * be found then (ua_gpu could not tell yet). */
static void flow_gpu(struct cuptimon_trace *t, struct tproc *P, uint32_t corr, uint32_t tid,
                     int64_t ts, int64_t dur, int pend)
{
    struct flowent *a, *g;

    if (corr == 0 || P->api_tab == NULL || (t->o.no_flows && !pend))
        return;
    a = flow_find(P->api_tab, corr);
    if (a != NULL) {
        if (!t->o.no_flows)
            flow_pair(t, P, corr, a, tid, ts);
        return;
    }
    g = flow_take(P, P->gpu_tab, corr);
    g->corr = corr;
    g->tid = tid;
    g->ts = ts;
    g->dur = dur;
    g->pend = (uint16_t)pend;
}

static void flow_api(struct cuptimon_trace *t, struct tproc *P, uint32_t corr, uint32_t tid,
                     int64_t ts, int rt)
{
    struct flowent *a, *g;

    if (corr == 0 || P->api_tab == NULL)
        return;
    /* Kept without flows too: ua_gpu finds a launch's thread and time here,
     * and w_api whether a runtime call of this correlation was written. */
    a = flow_take(P, P->api_tab, corr);
    a->corr = corr;
    a->tid = tid;
    a->ts = ts;
    a->rt = (uint16_t)rt;
    g = flow_find(P->gpu_tab, corr);
    if (g != NULL) {
        if (!t->o.no_flows)
            flow_pair(t, P, corr, a, g->tid, g->ts);
        if (g->pend)
            ua_late(t, P, g, a);
        g->corr = 0;
    }
}

/* ---- events ------------------------------------------------------------ */

static inline int64_t rel(const struct cuptimon_trace *t, const struct cuptimon_clock *c,
                          uint64_t v)
{
    return (int64_t)(cuptimon__clock_map(c, v) - t->o.base_ns);
}

/* "pid":P,"tid":T,"ts":S,"dur":D */
static inline char *ptsd(char *p, uint32_t pid, uint32_t tid, int64_t ts, int64_t dur)
{
    FIELD_U(p, "pid", pid);
    FIELD_U(p, "tid", tid);
    FIELD_US(p, "ts", ts);
    FIELD_US(p, "dur", dur < 0 ? 0 : dur);
    return p;
}

static inline char *gpu_common_args(char *p, const struct tproc *P, const struct cuptimon_ev *ev)
{
    p = LIT(p, ",\"args\":{\"device\":");
    p = u64d(p, ev->device_id);
    FIELD_U(p, "context", ev->context_id);
    FIELD_U(p, "stream", ev->stream_id);
    FIELD_U(p, "correlation", ev->correlation_id);
    FIELD_U(p, "graph id", ev->graph_id);
    FIELD_U(p, "graph node id", ev->graph_node_id);
    size_t nlen;
    const char *nm;
    if (ev->graph_node_id && P->names &&
        (nm = cuptimon__strtab_get(P->names, CUPTIMON_GRAPH_LABEL_KEY(ev->graph_node_id), &nlen))) {
        p = LIT(p, ",\"graph node label\":");
        p += cuptimon__json_escape(p, nm, nlen > LABEL_MAX ? LABEL_MAX : nlen);
    }
    return p;
}

/* ---- annotation ranges ------------------------------------------------ */

/* The user annotation (kind CUSTOM1) that correlation corr carries, or 0. */
static uint64_t ua_of(const struct tproc *P, uint32_t corr)
{
    const struct extent *e;
    if (corr == 0 || P->ext_tab == NULL)
        return 0;
    e = &P->ext_tab[(corr & (EXT_SETS - 1)) * EXT_WAYS];
    for (unsigned w = 0; w < EXT_WAYS; w++)
        if (e[w].corr == corr && e[w].kind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1)
            return e[w].id;
    return 0;
}

static inline size_t ua_hash(uint64_t id, uint32_t tid, size_t cap)
{
    uint64_t h = (id ^ ((uint64_t)tid << 40)) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

/* Widens the GPU span of annotation id on track tid by [ts, ts + dur]:
 * Kineto's gpu_user_annotation, from the first start to the last end of
 * the work of one annotation on one stream.  by_time: the work was
 * attributed by its launch's thread and time (xr_find), not by CUPTI's
 * external correlation.  Bounded: past UA_SPANS_MAX spans, new ones are
 * not drawn. */
#define UA_SPANS_MAX (1u << 20)
static void ua_widen(struct tproc *P, uint64_t id, uint32_t tid, int64_t ts, int64_t dur,
                     int by_time)
{
    struct uaspan *u;
    int64_t end; /* hostile times can overflow: saturate */
    if (__builtin_add_overflow(ts, dur, &end))
        end = INT64_MAX;
    if (P->ua_n + 1 > P->ua_cap / 4 * 3) {
        size_t cap = P->ua_cap ? P->ua_cap * 2 : 256;
        struct uaspan *n;
        if (P->ua_n >= UA_SPANS_MAX || (n = calloc(cap, sizeof *n)) == NULL) {
            if (P->ua_cap == 0)
                return;
            goto probe; /* full or out of memory: known spans still widen */
        }
        for (size_t i = 0; i < P->ua_cap; i++) {
            size_t j;
            if (!P->ua[i].id)
                continue;
            for (j = ua_hash(P->ua[i].id, P->ua[i].tid, cap); n[j].id; j = (j + 1) & (cap - 1))
                ;
            n[j] = P->ua[i];
        }
        free(P->ua);
        P->ua = n;
        P->ua_cap = cap;
    }
probe:
    for (size_t i = ua_hash(id, tid, P->ua_cap);; i = (i + 1) & (P->ua_cap - 1)) {
        u = &P->ua[i];
        if (u->id == id && u->tid == tid)
            break;
        if (u->id == 0) {
            if (P->ua_n + 1 > P->ua_cap / 4 * 3)
                return;
            u->id = id;
            u->tid = tid;
            u->by_time = (uint32_t)by_time;
            u->first = ts;
            u->last = end;
            P->ua_n++;
            return;
        }
    }
    if (ts < u->first)
        u->first = ts;
    if (end > u->last)
        u->last = end;
    u->by_time |= (uint32_t)by_time;
}

/* ---- work launched on a thread with no annotation of its own ---------- */

/* CUPTI tags a launch with the top of its own thread's annotation stack.
 * Work that a thread with none open launches while another thread has one
 * open (autograd's engine thread runs a backward pass while the main
 * thread waits inside its "backward" annotation) would belong to no
 * gpu_user_annotation.  It is attributed by the launch's time instead: to
 * the innermost range open at the launch on the launching thread itself
 * (its external correlation was not recorded); if that thread has no
 * range at all (a helper thread that never annotates), to the innermost
 * range open then on the one other thread of the process that has one;
 * with several such threads it is ambiguous and left out (counted).  A
 * thread with ranges of its own that launched outside them keeps its work
 * unannotated.  The launch's thread and time come from its runtime (or
 * driver) record; without one nothing is attributed. */
#define XR_NONE UINT32_MAX

static int xr_cmp(const void *a, const void *b)
{
    const struct xrange *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->b != y->b)
        return x->b < y->b ? -1 : 1;
    return x->parent < y->parent ? -1 : x->parent > y->parent; /* depth, while sorting */
}

struct xid {
    uint64_t id;
    uint32_t idx;
};

static int xid_cmp(const void *a, const void *b)
{
    const struct xid *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The innermost range of thread seg open at ts, or XR_NONE.  Ranges of a
 * thread nest: the latest begun at or before ts is open then, or one of
 * its ancestors is, or none is. */
static uint32_t xr_open_at(const struct tproc *P, const struct xthread *seg, int64_t ts)
{
    uint32_t lo = seg->lo, hi = seg->hi;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (P->xr[mid].b <= ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == seg->lo)
        return XR_NONE;
    for (uint32_t k = lo - 1, hops = 0; k != XR_NONE && hops < 4096; k = P->xr[k].parent, hops++)
        if (P->xr[k].e >= ts)
            return k;
    return XR_NONE;
}

static void xr_build(struct cuptimon_trace *t, struct tproc *P);

/* The annotation that work launched on thread tid at ts is attributed to
 * by time, or 0. */
static uint64_t xr_find(struct cuptimon_trace *t, struct tproc *P, uint32_t tid, int64_t ts)
{
    uint32_t hit = XR_NONE;
    if (!P->xr_built)
        xr_build(t, P);
    for (uint32_t i = 0; i < P->nxt; i++) {
        if (P->xt[i].tid != tid)
            continue;
        if ((hit = xr_open_at(P, &P->xt[i], ts)) == XR_NONE)
            return 0;       /* a thread with ranges of its own launched outside them */
        t->st.ua_by_time++; /* its own: the external correlation is missing */
        return P->xr[hit].id;
    }
    for (uint32_t i = 0; i < P->nxt; i++) {
        uint32_t k;
        if (P->xt[i].tid == tid || (k = xr_open_at(P, &P->xt[i], ts)) == XR_NONE)
            continue;
        if (hit != XR_NONE) {
            t->st.ua_ambiguous++;
            return 0;
        }
        hit = k;
    }
    if (hit == XR_NONE)
        return 0;
    t->st.ua_by_time++;
    return P->xr[hit].id;
}

/* GPU work corr on track tid: widens the span of its annotation.
 * Returns 0 when that is still unknown: no external correlation names
 * one and its launch is not seen yet (CUPTI 13.0 completes a kernel's
 * record before its runtime record); flow_api then calls ua_late. */
static int ua_gpu(struct cuptimon_trace *t, struct tproc *P, uint32_t corr, uint32_t tid,
                  int64_t ts, int64_t dur)
{
    uint64_t id = ua_of(P, corr);
    const struct flowent *a;
    if (id != 0) {
        ua_widen(P, id, tid, ts, dur, 0);
        return 1;
    }
    if (corr == 0 || P->api_tab == NULL)
        return 1;
    a = flow_find(P->api_tab, corr);
    if (a == NULL)
        return 0;
    if ((id = xr_find(t, P, a->tid, a->ts)) != 0)
        ua_widen(P, id, tid, ts, dur, 1);
    return 1;
}

/* The launch of GPU work g, whose annotation was unknown, is seen (api):
 * its external correlation, recorded with the launch, or its thread and
 * time now tell. */
static void ua_late(struct cuptimon_trace *t, struct tproc *P, const struct flowent *g,
                    const struct flowent *api)
{
    uint64_t id = ua_of(P, g->corr);
    if (id != 0)
        ua_widen(P, id, g->tid, g->ts, g->dur, 0);
    else if ((id = xr_find(t, P, api->tid, api->ts)) != 0)
        ua_widen(P, id, g->tid, g->ts, g->dur, 1);
}

struct urange {
    uint64_t id, parent;
    uint64_t begin, end; /* Unix ns; end 0: still open when archived */
    uint32_t tid, depth;
};

struct ucollect {
    struct urange *v;
    size_t n, cap;
    const struct cuptimon_strtab *names;
};

static int ua_collect(void *ud, uint64_t key, const char *s, size_t len)
{
    struct ucollect *c = ud;
    struct cuptimon_range_begin b;
    const char *es;
    size_t elen;
    if (CUPTIMON_RANGE_KEY_CLASS(key) != CUPTIMON_RANGE_BEGIN_KEY(0) ||
        cuptimon__range_begin_parse(s, len, &b) < 0)
        return 0; /* another kind of string, or a damaged range: not drawn */
    uint64_t id = key & (CUPTIMON_RANGE_ID_MAX - 1), end = 0;
    if ((es = cuptimon__strtab_get(c->names, CUPTIMON_RANGE_END_KEY(id), &elen)) != NULL &&
        (cuptimon__range_end_parse(es, elen, &end) < 0 || end < b.unix_ns))
        end = 0; /* a damaged end reads as still open */
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        struct urange *v = realloc(c->v, cap * sizeof *v);
        if (v == NULL)
            return -ENOMEM;
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n++] = (struct urange){.id = id,
                                   .parent = b.parent,
                                   .begin = b.unix_ns,
                                   .end = end,
                                   .tid = b.tid,
                                   .depth = b.depth};
    return 0;
}

static int ua_cmp(const void *a, const void *b)
{
    const struct urange *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Indexes the process's ranges for xr_find, once: the string table holds
 * every range when events are written (the archive's strings are read
 * first).  Out of memory: no range, nothing attributed by time. */
static void xr_build(struct cuptimon_trace *t, struct tproc *P)
{
    struct ucollect c = {.names = P->names};
    struct xid *ids = NULL;
    uint32_t n = 0;
    P->xr_built = 1;
    if (P->names == NULL || cuptimon__strtab_each(P->names, ua_collect, &c) < 0 || c.n == 0 ||
        c.n >= XR_NONE)
        goto out;
    P->xr = malloc(c.n * sizeof *P->xr);
    ids = malloc(c.n * sizeof *ids);
    if (P->xr == NULL || ids == NULL)
        goto fail;
    for (size_t i = 0; i < c.n; i++) {
        const struct urange *r = &c.v[i];
        P->xr[n++] = (struct xrange){
            .b = (int64_t)(r->begin - t->o.base_ns),
            .e = r->end ? (int64_t)(r->end - t->o.base_ns) : INT64_MAX,
            .id = r->id,
            .tid = r->tid,
            .parent = r->depth, /* sort key until the parents are found */
        };
    }
    qsort(P->xr, n, sizeof *P->xr, xr_cmp);
    for (uint32_t i = 0; i < n; i++)
        ids[i] = (struct xid){P->xr[i].id, i};
    qsort(ids, n, sizeof *ids, xid_cmp);
    /* Parents by id, from the ranges' begin entries (kept in c, by id). */
    for (size_t i = 0; i < c.n; i++) {
        struct xid key = {c.v[i].id, 0}, *self = bsearch(&key, ids, n, sizeof *ids, xid_cmp), *par;
        if (self == NULL)
            continue;
        key.id = c.v[i].parent;
        par = c.v[i].parent ? bsearch(&key, ids, n, sizeof *ids, xid_cmp) : NULL;
        /* A parent on another thread, or one begun later, is no parent. */
        P->xr[self->idx].parent =
            par && P->xr[par->idx].tid == P->xr[self->idx].tid && par->idx < self->idx ? par->idx
                                                                                       : XR_NONE;
    }
    for (uint32_t i = 0; i < n; i++)
        if (i == 0 || P->xr[i].tid != P->xr[i - 1].tid)
            P->nxt++;
    if ((P->xt = calloc(P->nxt, sizeof *P->xt)) == NULL)
        goto fail;
    P->nxt = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (i == 0 || P->xr[i].tid != P->xr[i - 1].tid)
            P->xt[P->nxt++] = (struct xthread){.tid = P->xr[i].tid, .lo = i};
        P->xt[P->nxt - 1].hi = i + 1;
    }
    goto out;
fail:
    free(P->xr);
    P->xr = NULL;
    P->nxt = 0;
out:
    free(ids);
    free(c.v);
}

static size_t ua_name(const struct tproc *P, uint64_t id, char *out)
{
    size_t len;
    const char *nm = cuptimon__strtab_get(P->names, CUPTIMON_ANNOTATION_KEY(id), &len);
    if (nm == NULL)
        return (size_t)(LIT(out, "\"(unnamed annotation)\"") - out);
    return cuptimon__json_escape(out, nm, len > TRACE_NAME_MAX ? TRACE_NAME_MAX : len);
}

/* Writes the process's annotation ranges, Kineto's way: a user_annotation
 * slice per range on the thread that pushed it (the ranges the daemon
 * archived in the string table, CUPTIMON_RANGE_BEGIN_KEY/_END_KEY), and a
 * gpu_user_annotation slice per annotation and GPU track over the work it
 * launched.  With opts range_from_ns/range_to_ns (a window), a range that
 * ends before the window or begins after it is left out, one that began
 * before it starts at its start and one that ends after it (or is still
 * open) ends at its end, with args "clipped"; without them, a range still
 * open ends at the last event of the process ("open": true). */
static void ua_write(struct cuptimon_trace *t, struct tproc *P)
{
    struct ucollect c = {.names = P->names};
    uint64_t from = t->o.range_from_ns, to = t->o.range_to_ns;
    if (P->names == NULL)
        return;
    if (cuptimon__strtab_each(P->names, ua_collect, &c) < 0)
        c.n = 0; /* out of memory: no ranges rather than some */
    if (c.n)
        qsort(c.v, c.n, sizeof *c.v, ua_cmp);
    for (size_t i = 0; i < c.n; i++) {
        const struct urange *r = &c.v[i];
        uint64_t b = r->begin, e = r->end;
        int cb = 0, ce = 0, open = e == 0;
        if ((to && b > to) || (from && e && e < from))
            continue;
        if (from && b < from) {
            b = from;
            cb = 1;
        }
        if (open) {
            e = to ? to : P->has_last ? t->o.base_ns + (uint64_t)P->last_ts : b;
            ce = to != 0;
        } else if (to && e > to) {
            e = to;
            ce = 1;
        }
        if (e < b)
            e = b;
        uint32_t tid = cpu_track(t, P, r->tid);
        char *p = ev_open(t, EVENT_FIXED_MAX + NAME_JSON_MAX);
        p = LIT(p, "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":");
        p += ua_name(P, r->id, p);
        p = ptsd(p, P->pid, tid, (int64_t)(b - t->o.base_ns), (int64_t)(e - b));
        p = LIT(p, ",\"args\":{\"External id\":");
        p = u64d(p, r->id);
        FIELD_U(p, "depth", r->depth);
        if (r->parent)
            FIELD_U(p, "parent external id", r->parent);
        if (cb || ce)
            p = cb && ce ? LIT(p, ",\"clipped\":\"both\"")
                : cb     ? LIT(p, ",\"clipped\":\"begin\"")
                         : LIT(p, ",\"clipped\":\"end\"");
        if (open)
            p = LIT(p, ",\"open\":true");
        p = LIT(p, "}}");
        commit(t, p);
    }
    free(c.v);
    for (size_t i = 0; i < P->ua_cap; i++) {
        const struct uaspan *u = &P->ua[i];
        if (u->id == 0)
            continue;
        char *p = ev_open(t, EVENT_FIXED_MAX + NAME_JSON_MAX);
        p = LIT(p, "{\"ph\":\"X\",\"cat\":\"gpu_user_annotation\",\"name\":");
        p += ua_name(P, u->id, p);
        p = ptsd(p, P->pid, u->tid, u->first, u->last - u->first);
        p = LIT(p, ",\"args\":{\"External id\":");
        p = u64d(p, u->id);
        if (u->by_time)
            p = LIT(p, ",\"attributed by launch time\":true");
        p = LIT(p, "}}");
        commit(t, p);
    }
}

static void w_kernel(struct cuptimon_trace *t, struct tproc *P, const struct cuptimon_ev *ev,
                     int64_t ts, int64_t dur)
{
    /* The track first: naming a new track uses t->tmp, which may hold the
     * kernel's name. */
    uint32_t tid = gpu_track(t, P, ev->device_id, ev->stream_id);
    int ua_known = ua_gpu(t, P, ev->correlation_id, tid, ts, dur);
    struct name_ref nm = kernel_name(t, P, ev->u.kernel.name_ptr);
    char *p = ev_open(t, EVENT_FIXED_MAX + nm.len);

    p = LIT(p, "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":");
    memcpy(p, nm.json, nm.len);
    p += nm.len;
    p = ptsd(p, P->pid, tid, ts, dur);
    p = gpu_common_args(p, P, ev);
    p = LIT(p, ",\"grid\":[");
    p = i64d(p, ev->u.kernel.grid_x);
    *p++ = ',';
    p = i64d(p, ev->u.kernel.grid_y);
    *p++ = ',';
    p = i64d(p, ev->u.kernel.grid_z);
    p = LIT(p, "],\"block\":[");
    p = i64d(p, ev->u.kernel.block_x);
    *p++ = ',';
    p = i64d(p, ev->u.kernel.block_y);
    *p++ = ',';
    p = i64d(p, ev->u.kernel.block_z);
    p = LIT(p, "],\"registers per thread\":");
    p = u64d(p, ev->u.kernel.registers_per_thread);
    FIELD_I(p, "shared memory", ev->u.kernel.static_shared_memory);
    FIELD_I(p, "dynamic shared memory", ev->u.kernel.dynamic_shared_memory);
    FIELD_U(p, "local memory per thread", ev->u.kernel.local_memory_per_thread);
    if (ev->u.kernel.cluster_x > 1 || ev->u.kernel.cluster_y > 1 || ev->u.kernel.cluster_z > 1) {
        p = LIT(p, ",\"cluster\":[");
        p = u64d(p, ev->u.kernel.cluster_x);
        *p++ = ',';
        p = u64d(p, ev->u.kernel.cluster_y);
        *p++ = ',';
        p = u64d(p, ev->u.kernel.cluster_z);
        *p++ = ']';
    }
    if (ev->u.kernel.launch_type != 0)
        FIELD_U(p, "launch type", ev->u.kernel.launch_type);
    if (ev->u.kernel.is_device_launched) {
        p = LIT(p, ",\"device launched\":1");
    }
    if (ev->u.kernel.queued != 0) {
        FIELD_U(p, "queued", ev->u.kernel.queued);
        FIELD_U(p, "submitted", ev->u.kernel.submitted);
    }
    p = ext_args(p, P, ev->correlation_id);
    p = LIT(p, "}}");
    commit(t, p);
    flow_gpu(t, P, ev->correlation_id, tid, ts, dur, !ua_known);
}

static char *kind_str(char *p, const char *s, unsigned v)
{
    if (s != NULL) {
        memcpy(p, s, strlen(s));
        return p + strlen(s);
    }
    return u64d(p, v);
}

/* ,"memory bandwidth (GB/s)":B as Kineto writes it for copies and memsets:
 * bytes per nanosecond, here with three decimals (0 for a zero duration). */
static char *bandwidth(char *p, uint64_t bytes, int64_t dur)
{
    uint64_t milli = dur > 0 && bytes <= (UINT64_MAX / 1000) ? bytes * 1000 / (uint64_t)dur : 0;
    p = LIT(p, ",\"memory bandwidth (GB/s)\":");
    p = u64d(p, milli / 1000);
    *p++ = '.';
    *p++ = (char)('0' + milli / 100 % 10);
    *p++ = (char)('0' + milli / 10 % 10);
    *p++ = (char)('0' + milli % 10);
    return p;
}

static void w_memcpy(struct cuptimon_trace *t, struct tproc *P, const struct cuptimon_ev *ev,
                     int64_t ts, int64_t dur)
{
    uint32_t tid = gpu_track(t, P, ev->device_id, ev->stream_id);
    int ua_known = ua_gpu(t, P, ev->correlation_id, tid, ts, dur);
    char *p = ev_open(t, EVENT_FIXED_MAX);
    int p2p = ev->type == CUPTIMON_EV_MEMCPY_P2P;

    /* Kineto's naming: "Memcpy DtoH (Device -> Pinned)". */
    p = LIT(p, "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy ");
    p = kind_str(p, cuptimon__memcpy_kind_name(ev->u.memcpy.copy_kind), ev->u.memcpy.copy_kind);
    p = LIT(p, " (");
    p = kind_str(p, cuptimon__memory_kind_name(ev->u.memcpy.src_kind), ev->u.memcpy.src_kind);
    p = LIT(p, " -> ");
    p = kind_str(p, cuptimon__memory_kind_name(ev->u.memcpy.dst_kind), ev->u.memcpy.dst_kind);
    p = LIT(p, ")\"");
    p = ptsd(p, P->pid, tid, ts, dur);
    p = gpu_common_args(p, P, ev);
    FIELD_U(p, "bytes", ev->u.memcpy.bytes);
    p = bandwidth(p, ev->u.memcpy.bytes, dur);
    FIELD_U(p, "copy kind", ev->u.memcpy.copy_kind);
    FIELD_U(p, "src kind", ev->u.memcpy.src_kind);
    FIELD_U(p, "dst kind", ev->u.memcpy.dst_kind);
    FIELD_U(p, "flags", ev->u.memcpy.flags);
    if (p2p) {
        FIELD_U(p, "src device", ev->u.memcpy.src_device_id);
        FIELD_U(p, "src context", ev->u.memcpy.src_context_id);
        FIELD_U(p, "dst device", ev->u.memcpy.dst_device_id);
        FIELD_U(p, "dst context", ev->u.memcpy.dst_context_id);
    } else {
        FIELD_U(p, "runtime correlation", ev->u.memcpy.runtime_correlation_id);
        if (ev->u.memcpy.copy_count > 1)
            FIELD_U(p, "copy count", ev->u.memcpy.copy_count);
    }
    p = ext_args(p, P, ev->correlation_id);
    p = LIT(p, "}}");
    commit(t, p);
    flow_gpu(t, P, ev->correlation_id, tid, ts, dur, !ua_known);
}

static void w_memset(struct cuptimon_trace *t, struct tproc *P, const struct cuptimon_ev *ev,
                     int64_t ts, int64_t dur)
{
    uint32_t tid = gpu_track(t, P, ev->device_id, ev->stream_id);
    int ua_known = ua_gpu(t, P, ev->correlation_id, tid, ts, dur);
    char *p = ev_open(t, EVENT_FIXED_MAX);

    p = LIT(p, "{\"ph\":\"X\",\"cat\":\"gpu_memset\",\"name\":\"Memset (");
    p = kind_str(p, cuptimon__memory_kind_name(ev->u.memset.memory_kind), ev->u.memset.memory_kind);
    p = LIT(p, ")\"");
    p = ptsd(p, P->pid, tid, ts, dur);
    p = gpu_common_args(p, P, ev);
    FIELD_U(p, "bytes", ev->u.memset.bytes);
    p = bandwidth(p, ev->u.memset.bytes, dur);
    FIELD_U(p, "value", ev->u.memset.value);
    FIELD_U(p, "memory kind", ev->u.memset.memory_kind);
    FIELD_U(p, "flags", ev->u.memset.flags);
    p = ext_args(p, P, ev->correlation_id);
    p = LIT(p, "}}");
    commit(t, p);
    flow_gpu(t, P, ev->correlation_id, tid, ts, dur, !ua_known);
}

static void api_write(struct cuptimon_trace *t, struct tproc *P, const struct cuptimon_ev *ev,
                      int64_t ts, int64_t dur)
{
    int rt = ev->type == CUPTIMON_EV_RUNTIME;
    const char *nm = rt ? cuptimon__cbid_runtime_name(ev->u.api.cbid)
                        : cuptimon__cbid_driver_name(ev->u.api.cbid);
    uint32_t tid = cpu_track(t, P, ev->u.api.thread_id); /* before the event is opened */
    char *p = ev_open(t, EVENT_FIXED_MAX);

    p = rt ? LIT(p, "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"")
           : LIT(p, "{\"ph\":\"X\",\"cat\":\"cuda_driver\",\"name\":\"");
    if (nm != NULL) {
        size_t n = strlen(nm); /* generated identifiers: nothing to escape */
        memcpy(p, nm, n);
        p += n;
    } else {
        p = rt ? LIT(p, "runtime_cbid_") : LIT(p, "driver_cbid_");
        p = u64d(p, ev->u.api.cbid);
    }
    *p++ = '"';
    p = ptsd(p, P->pid, tid, ts, dur);
    p = LIT(p, ",\"args\":{\"cbid\":");
    p = u64d(p, ev->u.api.cbid);
    FIELD_U(p, "correlation", ev->correlation_id);
    FIELD_U(p, "return value", ev->u.api.return_value);
    if (ev->u.api.process_id != P->info.pid)
        FIELD_U(p, "process id", ev->u.api.process_id);
    p = ext_args(p, P, ev->correlation_id);
    p = LIT(p, "}}");
    commit(t, p);
    flow_api(t, P, ev->correlation_id, tid, ts, rt);
}

/* The driver calls Kineto shows: those that launch GPU work (cbids of
 * cupti_driver_cbid.h, stable across releases).  The others (the runtime's
 * and libraries' cuKernelGetName, cuFuncGetAttribute, ...: most of the
 * driver records of a PyTorch step) are counted, not written. */
static int driver_launch(uint32_t cbid)
{
    switch (cbid) {
    case 307: /* cuLaunchKernel */
    case 442: /* cuLaunchKernel_ptsz */
    case 477: /* cuLaunchCooperativeKernel */
    case 478: /* cuLaunchCooperativeKernel_ptsz */
    case 514: /* cuGraphLaunch */
    case 515: /* cuGraphLaunch_ptsz */
    case 652: /* cuLaunchKernelEx */
    case 653: /* cuLaunchKernelEx_ptsz */ return 1;
    default: return 0;
    }
}

/* Writes the held-back driver launches of thread tid (of every thread when
 * all is set), except one of correlation drop, which a runtime call made. */
static void drv_release(struct cuptimon_trace *t, struct tproc *P, int all, uint32_t tid,
                        uint32_t drop)
{
    int kept = 0;
    for (int i = 0; i < P->ndrv; i++) {
        struct drvpend *d = &P->drv[i];
        if (!all && d->ev.u.api.thread_id != tid) {
            P->drv[kept++] = *d;
        } else if (drop && d->ev.correlation_id == drop) {
            t->st.driver_nested++;
        } else {
            api_write(t, P, &d->ev, d->ts, d->dur);
        }
    }
    P->ndrv = kept;
}

/* A runtime or driver call, in Kineto's way: a driver call that is not a
 * launch is left out, and a driver launch inside a runtime call (CUPTI
 * records both with one correlation id where the runtime's own driver
 * calls are traced) is left out for the runtime call, so that each launch
 * is one event.  The nested call ends first, so it usually comes first
 * and is held until its thread's next API call shows whether a runtime
 * call of its correlation follows; one that comes after its runtime call
 * (records of one thread are not promised in any order) finds that call
 * in the flow table. */
static void w_api(struct cuptimon_trace *t, struct tproc *P, const struct cuptimon_ev *ev,
                  int64_t ts, int64_t dur)
{
    uint32_t tid = ev->u.api.thread_id;
    const struct flowent *rt;
    if (ev->type == CUPTIMON_EV_RUNTIME) {
        drv_release(t, P, 0, tid, ev->correlation_id);
        api_write(t, P, ev, ts, dur);
        return;
    }
    if (!driver_launch(ev->u.api.cbid)) {
        t->st.driver_hidden++;
        return;
    }
    if (ev->correlation_id != 0 && P->api_tab != NULL &&
        (rt = flow_find(P->api_tab, ev->correlation_id)) != NULL && rt->rt) {
        t->st.driver_nested++;
        return;
    }
    drv_release(t, P, 0, tid, 0);
    if (P->ndrv == DRV_PENDING)
        drv_release(t, P, 1, 0, 0);
    P->drv[P->ndrv++] = (struct drvpend){*ev, ts, dur};
}

static char *objid_args(char *p, uint32_t kind, const struct cuptimon_objid *o)
{
    switch (kind) {
    case 1: /* CUPTI_ACTIVITY_OBJECT_PROCESS */
    case 2: /* CUPTI_ACTIVITY_OBJECT_THREAD */
        FIELD_U(p, "process id", o->a);
        FIELD_U(p, "thread id", o->b);
        break;
    case 3: /* DEVICE */
    case 4: /* CONTEXT */
    case 5: /* STREAM */
        FIELD_U(p, "device", o->a);
        FIELD_U(p, "context", o->b);
        FIELD_U(p, "stream", o->c);
        break;
    default: break;
    }
    return p;
}

/* The track for a record located by a CUpti_ActivityObjectKindId. */
static uint32_t object_track(struct cuptimon_trace *t, struct tproc *P, uint32_t kind,
                             const struct cuptimon_objid *o)
{
    switch (kind) {
    case 1:
    case 2: return cpu_track(t, P, o->b ? o->b : P->pid);
    case 3:
    case 4: return gpu_track(t, P, o->a, UINT32_MAX);
    case 5: return gpu_track(t, P, o->a, o->c);
    default: return P->pid;
    }
}

static void w_overhead(struct cuptimon_trace *t, struct tproc *P, const struct cuptimon_ev *ev,
                       int64_t ts, int64_t dur)
{
    uint32_t tid = object_track(t, P, ev->u.overhead.object_kind, &ev->u.overhead.object_id);
    const char *nm = cuptimon__overhead_kind_name(ev->u.overhead.overhead_kind);
    char *p = ev_open(t, EVENT_FIXED_MAX);

    p = LIT(p, "{\"ph\":\"X\",\"cat\":\"overhead\",\"name\":\"");
    if (nm != NULL) {
        memcpy(p, nm, strlen(nm));
        p += strlen(nm);
    } else {
        p = LIT(p, "overhead_");
        p = u64d(p, ev->u.overhead.overhead_kind);
    }
    *p++ = '"';
    p = ptsd(p, P->pid, tid, ts, dur);
    p = LIT(p, ",\"args\":{\"overhead kind\":");
    p = u64d(p, ev->u.overhead.overhead_kind);
    FIELD_U(p, "object kind", ev->u.overhead.object_kind);
    p = objid_args(p, ev->u.overhead.object_kind, &ev->u.overhead.object_id);
    FIELD_U(p, "correlation", ev->correlation_id);
    p = LIT(p, "}}");
    commit(t, p);
}

static void w_cuda_event(struct cuptimon_trace *t, struct tproc *P, const struct cuptimon_ev *ev,
                         int64_t ts)
{
    uint32_t tid = gpu_track(t, P, ev->device_id, ev->stream_id);
    char *p = ev_open(t, EVENT_FIXED_MAX);

    p = LIT(p, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"cuda_event\",\"name\":\"cuda_event\",\"pid\":");
    p = u64d(p, P->pid);
    FIELD_U(p, "tid", tid);
    FIELD_US(p, "ts", ts);
    p = LIT(p, ",\"args\":{\"device\":");
    p = u64d(p, ev->device_id);
    FIELD_U(p, "context", ev->context_id);
    FIELD_U(p, "stream", ev->stream_id);
    FIELD_U(p, "event id", ev->u.cuda_event.event_id);
    FIELD_U(p, "correlation", ev->correlation_id);
    FIELD_U(p, "cuda event sync id", ev->u.cuda_event.cuda_event_sync_id);
    p = LIT(p, "}}");
    commit(t, p);
}

static void w_sync(struct cuptimon_trace *t, struct tproc *P, const struct cuptimon_ev *ev,
                   int64_t ts, int64_t dur)
{
    uint32_t tid = sync_track(t, P, ev->context_id, ev->stream_id);
    const char *nm = cuptimon__sync_type_name(ev->u.sync.type);
    char *p = ev_open(t, EVENT_FIXED_MAX);

    p = LIT(p, "{\"ph\":\"X\",\"cat\":\"cuda_sync\",\"name\":\"");
    if (nm != NULL) {
        memcpy(p, nm, strlen(nm));
        p += strlen(nm);
    } else {
        p = LIT(p, "sync_");
        p = u64d(p, ev->u.sync.type);
    }
    *p++ = '"';
    p = ptsd(p, P->pid, tid, ts, dur);
    p = LIT(p, ",\"args\":{\"sync type\":");
    p = u64d(p, ev->u.sync.type);
    FIELD_U(p, "correlation", ev->correlation_id);
    FIELD_U(p, "context", ev->context_id);
    FIELD_U(p, "stream", ev->stream_id);
    FIELD_U(p, "event id", ev->u.sync.cuda_event_id);
    FIELD_U(p, "cuda event sync id", ev->u.sync.cuda_event_sync_id);
    FIELD_U(p, "return value", ev->u.sync.return_value);
    p = LIT(p, "}}");
    commit(t, p);
}

/* Writes the held marker (with its marker data, if any). */
static void marker_flush(struct cuptimon_trace *t, struct tproc *P)
{
    const struct cuptimon_ev *ev = &P->pend_ev;
    uint32_t flags = ev->u.marker.flags;
    uint32_t tid;
    uint64_t name_ptr = ev->u.marker.name_ptr, dom_ptr = ev->u.marker.domain_ptr;
    struct markent *m = NULL;
    char ph;
    size_t nlen, dlen;
    char *p;

    if (!P->pending)
        return;
    P->pending = 0;
    tid = object_track(t, P, ev->u.marker.object_kind, &ev->u.marker.object_id);
    if (P->mark_tab != NULL)
        m = &P->mark_tab[ev->u.marker.id & (MARK_SLOTS - 1)];
    if (flags & 2u) { /* CUPTI_ACTIVITY_FLAG_MARKER_START */
        ph = 'b';
        if (m != NULL) {
            m->id = ev->u.marker.id;
            m->used = 1;
            m->name_ptr = name_ptr;
            m->domain_ptr = dom_ptr;
        }
    } else if (flags & 4u) { /* CUPTI_ACTIVITY_FLAG_MARKER_END: no name of its own */
        ph = 'e';
        if (m != NULL && m->used && m->id == ev->u.marker.id) {
            name_ptr = m->name_ptr;
            dom_ptr = m->domain_ptr;
            m->used = 0;
        }
    } else {
        ph = 'i';
    }
    /* Two names go through t->tmp: escape the domain after the name is
     * copied into the event. */
    nlen = plain_name_json(P, name_ptr, "nvtx", t->tmp);
    p = ev_open(t, EVENT_FIXED_MAX + 2 * NAME_JSON_MAX);
    p = LIT(p, "{\"ph\":\"");
    *p++ = ph;
    p = LIT(p, "\",\"cat\":\"nvtx\",\"name\":");
    memcpy(p, t->tmp, nlen);
    p += nlen;
    if (ph == 'i') {
        p = LIT(p, ",\"s\":\"t\"");
    } else {
        p = LIT(p, ",\"id2\":{\"local\":\"");
        p = hex64(p, ev->u.marker.id);
        p = LIT(p, "\"}");
    }
    FIELD_U(p, "pid", P->pid);
    FIELD_U(p, "tid", tid);
    FIELD_US(p, "ts", P->pend_ts);
    p = LIT(p, ",\"args\":{\"id\":");
    p = u64d(p, ev->u.marker.id);
    FIELD_U(p, "flags", flags);
    p = objid_args(p, ev->u.marker.object_kind, &ev->u.marker.object_id);
    if (dom_ptr != 0) {
        dlen = plain_name_json(P, dom_ptr, "?", t->tmp);
        p = LIT(p, ",\"domain\":");
        memcpy(p, t->tmp, dlen);
        p += dlen;
    }
    if (P->pend_has_data) {
        const struct cuptimon_ev *d = &P->pend_data;
        FIELD_U(p, "color", d->u.marker_data.color);
        FIELD_U(p, "category", d->u.marker_data.category);
        FIELD_U(p, "payload kind", d->u.marker_data.payload_kind);
        FIELD_U(p, "payload", d->u.marker_data.payload);
        FIELD_U(p, "cupti domain id", d->u.marker_data.cupti_domain_id);
    }
    p = LIT(p, "}}");
    commit(t, p);
    P->pend_has_data = 0;
}

/* ---- NCCL collectives (issue 46) --------------------------------------- */

/* torch.profiler's name for an NCCL function ("Collective name" of its
 * record_param_comms: c10d's), NCCL's own where it has none. */
static const char *torch_coll_name(const char *f)
{
    static const char *const map[][2] = {
        {"AllReduce", "allreduce"},
        {"Broadcast", "broadcast"},
        {"AllGather", "_allgather_base"},
        {"ReduceScatter", "_reduce_scatter_base"},
        {"Reduce", "reduce"},
        {"Send", "send"},
        {"Recv", "recv"},
        {"AllToAll", "all_to_all"},
        {"Gather", "gather"},
        {"Scatter", "scatter"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(f, map[i][0]) == 0)
            return map[i][1];
    return f;
}

/* c10::toString(ScalarType) of an NCCL datatype, torch.profiler's "dtype". */
static const char *torch_dtype(const char *d)
{
    static const char *const map[][2] = {
        {"ncclInt8", "Char"},
        {"ncclUint8", "Byte"},
        {"ncclInt32", "Int"},
        {"ncclUint32", "UInt32"},
        {"ncclInt64", "Long"},
        {"ncclUint64", "UInt64"},
        {"ncclFloat16", "Half"},
        {"ncclFloat32", "Float"},
        {"ncclFloat64", "Double"},
        {"ncclBfloat16", "BFloat16"},
        {"ncclFloat8e4m3", "Float8_e4m3fn"},
        {"ncclFloat8e5m2", "Float8_e5m2"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(d, map[i][0]) == 0)
            return map[i][1];
    return d;
}

static char *jstr_field(char *p, const char *key, const char *v)
{
    size_t k = strlen(key);
    *p++ = ',';
    *p++ = '"';
    memcpy(p, key, k);
    p += k;
    *p++ = '"';
    *p++ = ':';
    return p + cuptimon__json_escape(p, v, strlen(v));
}

/* An NCCL collective or point-to-point operation as torch.profiler writes
 * one: a record_param_comms CPU op on the thread that enqueued it, spanning
 * NCCL's start and stop of the event (the enqueue, which holds the kernel
 * launch: that launch's flow leads to the NCCL kernel), with Kineto's
 * collective args, then cuptimon's own (communicator, sequence number,
 * algorithm, protocol, channels, when the GPU finished it).  What torch
 * knows and NCCL does not (the process group's global ranks) is left out
 * rather than guessed. */
static void w_nccl(struct cuptimon_trace *t, struct tproc *P, const struct cuptimon_ev *ev,
                   const struct cuptimon_clock *clk, int64_t ts)
{
    struct cuptimon_nccl_rec r;
    struct cuptimon_nccl_text x;
    if (cuptimon__nccl_rec_decode(ev->u.nccl.raw, CUPTIMON_NCCL_REC_SIZE, &r, &x) < 0 ||
        r.what == CUPTIMON_NCCL_COMM_STATE)
        return;
    /* NCCL's count is per rank where torch's message sizes are whole:
     * all-gather's output and reduce-scatter's input are n times it. */
    uint64_t n = r.nranks > 0 ? (uint64_t)r.nranks : 1;
    uint64_t in = strcmp(x.func, "ReduceScatter") == 0 ? r.count * n : r.count;
    uint64_t out = strcmp(x.func, "AllGather") == 0 ? r.count * n : r.count;
    int64_t dur = r.host_stop > r.host_start ? (int64_t)(r.host_stop - r.host_start) : 0;
    uint32_t tid = cpu_track(t, P, r.tid);
    char *p = ev_open(t, EVENT_FIXED_MAX);
    p = LIT(p, "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"record_param_comms\"");
    p = ptsd(p, P->pid, tid, ts, dur);
    p = LIT(p, ",\"args\":{\"Collective name\":");
    const char *cn = torch_coll_name(x.func);
    p += cuptimon__json_escape(p, cn, strlen(cn));
    p = jstr_field(p, "dtype", torch_dtype(x.datatype));
    /* NCCL's plugin v1-v3 never says a communicator's size (nranks 0):
     * no group size then, and no message size that needs it, rather than
     * a guess. */
    int whole_in = r.nranks > 0 || strcmp(x.func, "ReduceScatter") != 0;
    int whole_out = r.nranks > 0 || strcmp(x.func, "AllGather") != 0;
    if (whole_in)
        FIELD_U(p, "In msg nelems", in);
    if (whole_out)
        FIELD_U(p, "Out msg nelems", out);
    if (r.nranks > 0)
        FIELD_I(p, "Group size", r.nranks);
    p = jstr_field(p, "Process Group Name", x.comm_name);
    FIELD_I(p, "Rank", r.rank);
    if (r.what == CUPTIMON_NCCL_P2P)
        FIELD_I(p, "Dst Rank", r.root);
    else if (r.root >= 0)
        FIELD_I(p, "Root", r.root);
    FIELD_U(p, "Seq", r.seq);
    p = jstr_field(p, "NCCL function", x.func);
    p = jstr_field(p, "NCCL datatype", x.datatype);
    p = LIT(p, ",\"NCCL comm id\":\"");
    p = hex64(p, r.comm_id);
    *p++ = '"';
    if (r.nnodes > 0)
        FIELD_I(p, "Nodes", r.nnodes);
    if (x.algo[0])
        p = jstr_field(p, "Algorithm", x.algo);
    if (x.proto[0])
        p = jstr_field(p, "Protocol", x.proto);
    FIELD_U(p, "Channels", r.nchannels);
    if (r.flags & CUPTIMON_NCCL_F_COMPLETED)
        p = LIT(p, ",\"GPU done\":"), p = usd(p, rel(t, clk, r.host_end));
    if (r.flags & CUPTIMON_NCCL_F_GPU_TIMES)
        FIELD_U(p, "GPU globaltimer ns", r.gpu_end - r.gpu_start);
    if (r.flags & CUPTIMON_NCCL_F_UNFINISHED)
        p = LIT(p, ",\"unfinished\":true");
    if (r.flags & CUPTIMON_NCCL_F_CAPTURED)
        p = LIT(p, ",\"graph captured\":true");
    p = LIT(p, "}}");
    commit(t, p);
    t->st.nccl_ops++;
}

int cuptimon__trace_event(struct cuptimon_trace *t, int proc, const struct cuptimon_ev *ev,
                          const struct cuptimon_clock *clk)
{
    struct tproc *P;
    int64_t ts = 0, dur = 0;

    if (proc < 0 || (size_t)proc >= t->nprocs || t->finished)
        return -EINVAL;
    P = t->procs[proc];
    if (P->ended)
        return -EINVAL;
    if (P->api_tab == NULL && tables_alloc(P) < 0)
        return -ENOMEM;
    if (P->pending) {
        if (ev->type == CUPTIMON_EV_MARKER_DATA && ev->u.marker_data.id == P->pend_ev.u.marker.id) {
            P->pend_data = *ev;
            P->pend_has_data = 1;
            marker_flush(t, P);
            return t->err;
        }
        marker_flush(t, P);
    }
    switch (ev->type) {
    case CUPTIMON_EV_EXTERNAL_CORRELATION: ext_put(P, ev); return t->err;
    case CUPTIMON_EV_MARKER_DATA: t->st.marker_data_orphans++; return t->err;
    case CUPTIMON_EV_NONE: return t->err;
    default: break;
    }
    if (ev->start == 0) {
        t->st.untimed++;
        return t->err;
    }
    ts = rel(t, clk, ev->start);
    if (ev->end >= ev->start)
        dur = (int64_t)(ev->end - ev->start);
    int64_t last; /* hostile times can overflow: saturate */
    if (__builtin_add_overflow(ts, dur, &last))
        last = INT64_MAX;
    if (!P->has_last || last > P->last_ts) {
        P->last_ts = last;
        P->has_last = 1;
    }

    switch (ev->type) {
    case CUPTIMON_EV_KERNEL: w_kernel(t, P, ev, ts, dur); break;
    case CUPTIMON_EV_MEMCPY:
    case CUPTIMON_EV_MEMCPY_P2P: w_memcpy(t, P, ev, ts, dur); break;
    case CUPTIMON_EV_MEMSET: w_memset(t, P, ev, ts, dur); break;
    case CUPTIMON_EV_RUNTIME:
    case CUPTIMON_EV_DRIVER: w_api(t, P, ev, ts, dur); break;
    case CUPTIMON_EV_OVERHEAD: w_overhead(t, P, ev, ts, dur); break;
    case CUPTIMON_EV_CUDA_EVENT: w_cuda_event(t, P, ev, ts); break;
    case CUPTIMON_EV_SYNC: w_sync(t, P, ev, ts, dur); break;
    case CUPTIMON_EV_NCCL: w_nccl(t, P, ev, clk, ts); break;
    case CUPTIMON_EV_MARKER:
        if (P->mark_tab == NULL)
            P->mark_tab = calloc(MARK_SLOTS, sizeof(*P->mark_tab)); /* NULL: ends unnamed */
        P->pend_ev = *ev;
        P->pend_ts = ts;
        P->pend_has_data = 0;
        P->pending = 1;
        break;
    default: break;
    }
    return t->err;
}

int cuptimon__trace_end_process(struct cuptimon_trace *t, int proc)
{
    struct tproc *P;

    if (proc < 0 || (size_t)proc >= t->nprocs || t->finished)
        return -EINVAL;
    P = t->procs[proc];
    marker_flush(t, P);
    drv_release(t, P, 1, 0, 0);
    if (!P->ended)
        ua_write(t, P);
    if (P->nc != NULL)
        for (size_t i = 0; i < P->nc_cap; i++)
            free(P->nc[i].json);
    free(P->nc);
    free(P->tracks);
    free(P->api_tab);
    free(P->gpu_tab);
    free(P->ext_tab);
    free(P->mark_tab);
    free(P->ua);
    P->ua = NULL;
    P->ua_cap = P->ua_n = 0;
    free(P->xr);
    free(P->xt);
    P->xr = NULL;
    P->xt = NULL;
    P->nxt = 0;
    P->nc = NULL;
    P->nc_cap = P->nc_n = 0;
    P->nc_last = NULL;
    P->tracks = NULL;
    P->tr_cap = P->tr_n = 0;
    P->tr_last = 0;
    P->api_tab = P->gpu_tab = NULL;
    P->ext_tab = NULL;
    P->mark_tab = NULL;
    P->names = NULL;
    P->dm = NULL;
    P->ended = 1;
    return t->err;
}

int cuptimon__trace_buffer(struct cuptimon_trace *t, int proc, const struct cuptimon_layout *l,
                           const void *buf, size_t len, const struct cuptimon_clock *clk,
                           struct cuptimon_decode_stats *st)
{
    struct cuptimon_walk w;
    struct cuptimon_ev ev;
    int rc = 0;

    cuptimon__walk_begin(&w, l, buf, len, st);
    while (cuptimon__walk_next(&w, &ev)) {
        rc = cuptimon__trace_event(t, proc, &ev, clk);
        if (rc < 0 && rc != t->err)
            return rc; /* a caller error: stop */
    }
    return t->err ? t->err : rc;
}

/* ---- GPU metric counters ---------------------------------------------- */

/* A GPU's metrics process: pid GPU_PID_BASE + its ordinal (+ 0x10000 for
 * each other GPU of the trace that has that ordinal: another host), far
 * above Linux pids (< 2^22) and the writer's own 0x40000000 + process
 * index; sorted after every process (CPU processes sort by rank or pid),
 * by ordinal. */
#define GPU_PID_BASE  0x48000000u
#define GPU_SORT_BASE 0x50000000

/* The writer's number format for a counter value: "%.10g" (ten significant
 * digits), with a decimal comma, should a caller's locale ask for one,
 * made a point. */
static size_t value_text(char *out, size_t n, double v)
{
    int k = snprintf(out, n, "%.10g", v);

    if (k < 0 || (size_t)k >= n) {
        memcpy(out, "0", 2);
        return 1;
    }
    for (int i = 0; i < k; i++)
        if (out[i] == ',')
            out[i] = '.';
    return (size_t)k;
}

static void counter_event(struct cuptimon_trace *t, const struct tgpu *G, const struct tgpm *S,
                          uint32_t i, uint64_t ts_ns, double v)
{
    char num[48];
    size_t nl = value_text(num, sizeof num, v);
    char *p = ev_open(t, S->m[i].name_len + S->m[i].key_len + nl + 160);

    p = LIT(p, "{\"ph\":\"C\",\"cat\":\"gpu_metrics\",\"name\":");
    memcpy(p, S->m[i].name, S->m[i].name_len);
    p += S->m[i].name_len;
    FIELD_U(p, "pid", G->pid);
    FIELD_US(p, "ts", (int64_t)(ts_ns - t->o.base_ns));
    p = LIT(p, ",\"args\":{");
    memcpy(p, S->m[i].key, S->m[i].key_len);
    p += S->m[i].key_len;
    *p++ = ':';
    memcpy(p, num, nl);
    p = LIT(p + nl, "}}");
    commit(t, p);
    t->st.counters++;
}

int cuptimon__trace_add_gpu(struct cuptimon_trace *t, const struct cuptimon_gpm_meta *m)
{
    struct tgpu *G = NULL;
    struct tgpm *S;
    size_t gi;
    char text[600];

    if (t->finished || m->nmetrics == 0 || m->nmetrics > CUPTIMON_GPM_METRICS_MAX ||
        m->ordinal < 0 || m->ordinal > CUPTIMON_GPM_ORDINAL_MAX)
        return -EINVAL;
    if (t->ngsess >= (1u << 20) || t->ngpus >= 4096)
        return -E2BIG;
    for (gi = 0; gi < t->ngpus; gi++) {
        G = t->gpus[gi];
        if (G->ordinal == m->ordinal && strcmp(G->uuid, m->uuid) == 0 &&
            strcmp(G->host, m->hostname) == 0)
            break;
    }
    if (gi == t->ngpus) {
        if (t->ngpus == t->gpus_cap) {
            size_t nc = t->gpus_cap ? t->gpus_cap * 2 : 4;
            struct tgpu **ng = realloc(t->gpus, nc * sizeof(*ng));
            if (ng == NULL)
                return -ENOMEM;
            t->gpus = ng;
            t->gpus_cap = nc;
        }
        G = calloc(1, sizeof(*G));
        if (G == NULL || (G->host = strdup(m->hostname)) == NULL) {
            free(G);
            return -ENOMEM;
        }
        G->ordinal = m->ordinal;
        memcpy(G->uuid, m->uuid, sizeof G->uuid);
        memcpy(G->name, m->name, sizeof G->name);
        memcpy(G->pci_bus_id, m->pci_bus_id, sizeof G->pci_bus_id);
        memcpy(G->chip, m->chip, sizeof G->chip);
        G->uuid[sizeof G->uuid - 1] = G->name[sizeof G->name - 1] = '\0';
        G->pci_bus_id[sizeof G->pci_bus_id - 1] = G->chip[sizeof G->chip - 1] = '\0';
        G->pid = GPU_PID_BASE + (uint32_t)m->ordinal;
        for (size_t k = 0; k < t->ngpus; k++)
            if (t->gpus[k]->pid == G->pid) {
                G->pid += 0x10000u;
                k = (size_t)-1; /* look again from the first */
            }
        t->gpus[t->ngpus++] = G;
        if (G->name[0])
            snprintf(text, sizeof text, "GPU %d metrics (%s)", G->ordinal, G->name);
        else
            snprintf(text, sizeof text, "GPU %d metrics", G->ordinal);
        meta_string(t, G->pid, 1, 0, "process_name", "name", text);
        {
            size_t n = (size_t)snprintf(text, sizeof text, "GPU metrics");
#define ADDG(...)                                                                                  \
    do {                                                                                           \
        if (n < sizeof(text))                                                                      \
            n += (size_t)snprintf(text + n, sizeof(text) - n, __VA_ARGS__);                        \
    } while (0)
            if (G->host[0])
                ADDG(", host %s", G->host);
            if (G->chip[0])
                ADDG(", %s", G->chip);
            if (G->pci_bus_id[0])
                ADDG(", PCI %s", G->pci_bus_id);
            if (G->uuid[0])
                ADDG(", %s", G->uuid);
#undef ADDG
        }
        meta_string(t, G->pid, 1, 0, "process_labels", "labels", text);
        meta_int(t, G->pid, 1, 0, "process_sort_index", GPU_SORT_BASE + (int64_t)G->ordinal);
    }
    if (t->ngsess == t->gsess_cap) {
        size_t nc = t->gsess_cap ? t->gsess_cap * 2 : 4;
        struct tgpm **ns = realloc(t->gsess, nc * sizeof(*ns));
        if (ns == NULL)
            return -ENOMEM;
        t->gsess = ns;
        t->gsess_cap = nc;
    }
    S = calloc(1, sizeof(*S));
    if (S == NULL)
        return -ENOMEM;
    S->gpu = (uint32_t)gi;
    S->n = m->nmetrics;
    S->gap_ns = m->interval_ns / 2 > 1000 ? m->interval_ns / 2 : 1000;
    for (uint32_t i = 0; i < S->n; i++) {
        const struct cuptimon_gpm_metric *mt = &m->metric[i];
        /* "GPU 0 SM active" with the argument "(%)": Perfetto names a
         * counter track by the event's name and the argument's key, "GPU
         * 0 SM active (%)"; chrome://tracing shows the name, and the key
         * as the series. */
        snprintf(text, sizeof text, "GPU %d %.*s", G->ordinal, (int)sizeof mt->label - 1,
                 mt->label[0] ? mt->label : mt->key);
        S->m[i].name_len = cuptimon__json_escape(S->m[i].name, text, strnlen(text, 160));
        if (mt->unit[0])
            snprintf(text, sizeof text, "(%.*s)", (int)sizeof mt->unit - 1, mt->unit);
        else
            snprintf(text, sizeof text, "value");
        S->m[i].key_len = cuptimon__json_escape(S->m[i].key, text, strnlen(text, 20));
    }
    t->gsess[t->ngsess++] = S;
    return t->err ? t->err : (int)(t->ngsess - 1);
}

int cuptimon__trace_gpu_sample(struct cuptimon_trace *t, int h, const struct cuptimon_gpm_sample *s)
{
    struct tgpm *S;
    struct tgpu *G;

    if (h < 0 || (size_t)h >= t->ngsess || t->gsess[h]->ended || t->finished)
        return -EINVAL;
    S = t->gsess[h];
    G = t->gpus[S->gpu];
    if (s->end_ns <= s->start_ns || s->end_ns >= CUPTIMON_GPM_TIME_MAX)
        return t->err; /* the reader never passes one */
    for (uint32_t i = 0; i < S->n; i++) {
        double v = s->value[i];
        if (!isfinite(v)) {
            /* No value: the run ends where the last sample did. */
            if (S->m[i].open)
                counter_event(t, G, S, i, S->m[i].last_end, 0);
            S->m[i].open = 0;
            continue;
        }
        if (S->m[i].open && s->start_ns > S->m[i].last_end + S->gap_ns)
            counter_event(t, G, S, i, S->m[i].last_end, 0);
        counter_event(t, G, S, i, s->start_ns, v);
        S->m[i].open = 1;
        S->m[i].last_end = s->end_ns;
    }
    G->samples++;
    return t->err;
}

int cuptimon__trace_gpu_end(struct cuptimon_trace *t, int h)
{
    struct tgpm *S;

    if (h < 0 || (size_t)h >= t->ngsess || t->gsess[h]->ended || t->finished)
        return -EINVAL;
    S = t->gsess[h];
    for (uint32_t i = 0; i < S->n; i++)
        if (S->m[i].open) {
            counter_event(t, t->gpus[S->gpu], S, i, S->m[i].last_end, 0);
            S->m[i].open = 0;
        }
    S->ended = 1;
    return t->err;
}

/* ---- finish ----------------------------------------------------------- */

static void put_text(struct cuptimon_trace *t, const char *s, size_t n)
{
    while (n > 0) {
        size_t room = t->cap - t->pos, k;
        if (room == 0) {
            flush_out(t);
            continue;
        }
        k = n < room ? n : room;
        memcpy(t->buf + t->pos, s, k);
        t->pos += k;
        s += k;
        n -= k;
    }
}

#define PUT_LIT(t, s) put_text((t), (s), sizeof(s) - 1)

static json_object *jstr_or_null(const char *s)
{
    return s ? json_object_new_string(s) : NULL;
}

/*
 * Kineto's deviceProperties: one entry per device id, with Kineto's keys in
 * its order and spacing, from the first process that knew the device (the
 * processes of one node see the same devices; a trace over nodes with
 * different devices under one id keeps the first).  Written at the end,
 * when every process is known; an empty list when none was.
 */
static void write_devices(struct cuptimon_trace *t)
{
    uint64_t done = 0; /* ids written: CUPTIMON_DEVICES_MAX is 64 */
    int first = 1;

    PUT_LIT(t, "\"deviceProperties\": [");
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct tproc *P = t->procs[i];
        for (size_t k = 0; k < P->ndevs; k++) {
            const struct tdev *d = &P->devs[k];
            if (done & (1ull << d->id))
                continue;
            done |= 1ull << d->id;
            char *p = reserve(t, 6 * sizeof d->name + 1024);
            if (!first)
                *p++ = ',';
            first = 0;
            p = LIT(p, "\n  {\"id\": ");
            p = u64d(p, d->id);
            p = LIT(p, ", \"name\": ");
            p += cuptimon__json_escape(p, d->name, strlen(d->name));
            p = LIT(p, ", \"totalGlobalMem\": ");
            p = u64d(p, d->mem);
            for (size_t j = 0; j < 11; j++) {
                size_t kl = strlen(dev_keys[j].key);
                p = LIT(p, ", \"");
                memcpy(p, dev_keys[j].key, kl);
                p = LIT(p + kl, "\": ");
                p = u64d(p, d->v[j]);
            }
            p = LIT(p, "}");
            commit(t, p);
        }
    }
    PUT_LIT(t, "\n],\n");
}

int cuptimon__trace_finish(struct cuptimon_trace *t, struct json_object *extra)
{
    json_object *di, *od, *procs, *ranks = NULL;
    int64_t rank = -1, world = -1;
    int many = 0;
    const char *text;
    char iso[64];
    time_t secs;
    struct tm tmv;

    if (t->finished)
        return -EINVAL;
    for (size_t i = 0; i < t->nprocs; i++) {
        marker_flush(t, t->procs[i]);
        if (!t->procs[i]->ended) {
            drv_release(t, t->procs[i], 1, 0, 0);
            ua_write(t, t->procs[i]);
        }
    }
    for (size_t i = 0; i < t->ngsess; i++)
        if (!t->gsess[i]->ended)
            cuptimon__trace_gpu_end(t, (int)i);
    t->finished = 1;
    if (!t->started) {
        char *p = reserve(t, 96);
        p = header(t, p);
        commit(t, p);
    }

    di = json_object_new_object();
    od = json_object_new_object();
    procs = json_object_new_array();
    if (di == NULL || od == NULL || procs == NULL) {
        json_object_put(di);
        json_object_put(od);
        json_object_put(procs);
        return -ENOMEM;
    }
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct cuptimon_proc_info *in = &t->procs[i]->info;
        json_object *jp = json_object_new_object();
        if (in->rank >= 0) {
            if (rank < 0) {
                rank = in->rank;
            } else if (in->rank != rank) {
                many = 1;
                if (in->rank < rank)
                    rank = in->rank;
            }
            if (in->world_size > world)
                world = in->world_size;
        }
        if (jp == NULL)
            continue;
        json_object_object_add(jp, "pid", json_object_new_int64(in->pid));
        json_object_object_add(jp, "trace_pid", json_object_new_int64(t->procs[i]->pid));
        if (in->hostname)
            json_object_object_add(jp, "hostname", jstr_or_null(in->hostname));
        if (in->label)
            json_object_object_add(jp, "label", jstr_or_null(in->label));
        if (in->job_id)
            json_object_object_add(jp, "job_id", jstr_or_null(in->job_id));
        if (in->exe)
            json_object_object_add(jp, "exe", jstr_or_null(in->exe));
        if (in->rank >= 0)
            json_object_object_add(jp, "rank", json_object_new_int64(in->rank));
        if (in->local_rank >= 0)
            json_object_object_add(jp, "local_rank", json_object_new_int64(in->local_rank));
        if (in->world_size >= 0)
            json_object_object_add(jp, "world_size", json_object_new_int64(in->world_size));
        if (in->cupti_version)
            json_object_object_add(jp, "cupti_version", json_object_new_int64(in->cupti_version));
        json_object_array_add(procs, jp);
    }
    if (many) {
        ranks = json_object_new_array();
        for (size_t i = 0; ranks && i < t->nprocs; i++)
            if (t->procs[i]->info.rank >= 0)
                json_object_array_add(ranks, json_object_new_int64(t->procs[i]->info.rank));
    }
    json_object_object_add(di, "rank", json_object_new_int64(rank >= 0 ? rank : 0));
    json_object_object_add(di, "world_size", json_object_new_int64(world >= 0 ? world : 1));
    if (ranks != NULL)
        json_object_object_add(di, "ranks", ranks);

    json_object_object_add(od, "producer", json_object_new_string("cuptimon " PACKAGE_VERSION));
    json_object_object_add(od, "base_unix_ns", json_object_new_uint64(t->o.base_ns));
    secs = (time_t)(t->o.base_ns / 1000000000u);
    if (gmtime_r(&secs, &tmv) != NULL) {
        snprintf(iso, sizeof(iso), "%04d-%02d-%02dT%02d:%02d:%02d.%09uZ", tmv.tm_year + 1900,
                 tmv.tm_mon + 1, tmv.tm_mday, tmv.tm_hour, tmv.tm_min, tmv.tm_sec,
                 (unsigned)(t->o.base_ns % 1000000000u));
        json_object_object_add(od, "base_utc", json_object_new_string(iso));
    }
    json_object_object_add(od, "ts_unit",
                           json_object_new_string("microseconds since base_unix_ns"));
    json_object_object_add(od, "processes", procs);
    if (t->ngpus > 0) {
        json_object *gl = json_object_new_array();
        for (size_t i = 0; gl != NULL && i < t->ngpus; i++) {
            const struct tgpu *G = t->gpus[i];
            json_object *g = json_object_new_object();
            if (g == NULL)
                continue;
            json_object_object_add(g, "trace_pid", json_object_new_int64(G->pid));
            json_object_object_add(g, "ordinal", json_object_new_int(G->ordinal));
            json_object_object_add(g, "name", json_object_new_string(G->name));
            json_object_object_add(g, "uuid", json_object_new_string(G->uuid));
            json_object_object_add(g, "pci_bus_id", json_object_new_string(G->pci_bus_id));
            if (G->host[0])
                json_object_object_add(g, "hostname", json_object_new_string(G->host));
            json_object_object_add(g, "samples", json_object_new_uint64(G->samples));
            json_object_array_add(gl, g);
        }
        json_object_object_add(od, "gpu_metrics", gl);
    }
    {
        json_object *w = json_object_new_object();
        if (w != NULL) {
            json_object_object_add(w, "events", json_object_new_uint64(t->st.events));
            json_object_object_add(w, "flows", json_object_new_uint64(t->st.flows));
            json_object_object_add(w, "untimed_records", json_object_new_uint64(t->st.untimed));
            json_object_object_add(w, "marker_data_orphans",
                                   json_object_new_uint64(t->st.marker_data_orphans));
            json_object_object_add(w, "unknown_kernel_names",
                                   json_object_new_uint64(t->st.unknown_names));
            json_object_object_add(w, "driver_calls_not_shown",
                                   json_object_new_uint64(t->st.driver_hidden));
            json_object_object_add(w, "nested_driver_launches",
                                   json_object_new_uint64(t->st.driver_nested));
            json_object_object_add(w, "device_properties_refused",
                                   json_object_new_uint64(t->st.devices_refused));
            if (t->st.counters)
                json_object_object_add(w, "counter_events", json_object_new_uint64(t->st.counters));
            json_object_object_add(od, "writer", w);
        }
    }
    if (extra != NULL && json_object_is_type(extra, json_type_object)) {
        json_object_object_foreach(extra, key, val)
        {
            json_object_object_add(od, key, json_object_get(val));
        }
    }

    /* distributedInfo with a space after each colon, as Kineto writes it:
     * HTA finds the rank with a pattern that needs one. */
    PUT_LIT(t, "\n],\n\"displayTimeUnit\": \"ms\",\n");
    if (t->o.trace_name) {
        PUT_LIT(t, "\"traceName\": ");
        char *p = reserve(t, 6 * strlen(t->o.trace_name) + 16);
        p += cuptimon__json_escape(p, t->o.trace_name, strlen(t->o.trace_name));
        p = LIT(p, ",\n");
        commit(t, p);
    }
    write_devices(t);
    PUT_LIT(t, "\"distributedInfo\": ");
    text = json_object_to_json_string_ext(di,
                                          JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    put_text(t, text, strlen(text));
    PUT_LIT(t, ",\n\"otherData\":");
    text =
        json_object_to_json_string_ext(od, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    put_text(t, text, strlen(text));
    PUT_LIT(t, "}\n");
    json_object_put(di);
    json_object_put(od);
    flush_out(t);
    if (t->gz != NULL && t->err == 0)
        t->err = cuptimon__pgz_finish(t->gz);
    if (t->f != NULL && t->err == 0 && fflush(t->f) != 0)
        t->err = errno ? -errno : -EIO;
    return t->err;
}

void cuptimon__trace_stats(const struct cuptimon_trace *t, struct cuptimon_trace_stats *st)
{
    *st = t->st;
}

void cuptimon__trace_free(struct cuptimon_trace *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nprocs; i++)
        proc_free(t->procs[i]);
    free(t->procs);
    for (size_t i = 0; i < t->ngpus; i++) {
        free(t->gpus[i]->host);
        free(t->gpus[i]);
    }
    free(t->gpus);
    for (size_t i = 0; i < t->ngsess; i++)
        free(t->gsess[i]);
    free(t->gsess);
    free(t->buf);
    free(t->tmp);
    cuptimon__pgz_free(t->gz);
    free(t);
}
