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

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <zlib.h>

#include "cbid.h"
#include "demangle.h"
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
#define LABEL_MAX 96u
#define BUF_MIN (2u * (NAME_JSON_MAX + EVENT_FIXED_MAX))
#define BUF_DEFAULT (256u << 10)

#define FLOW_SLOTS 16384u /* power of two */
#define EXT_SLOTS 4096u
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
    int64_t ts; /* ns relative to base */
};

struct extent {
    uint32_t corr;
    uint32_t kind;
    uint64_t id;
};

struct markent {
    uint32_t id;
    uint32_t used;
    uint64_t name_ptr;
    uint64_t domain_ptr;
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
    struct extent (*ext_tab)[2];
    struct markent *mark_tab;

    /* Driver launches held back until the next API call of their thread:
     * one that a runtime call of the same correlation follows was made
     * inside it and is not written (Kineto shows the launch once). */
    struct drvpend {
        struct cuptimon_ev ev;
        int64_t ts, dur;
    } drv[DRV_PENDING];
    int ndrv;

    int ended;   /* cuptimon__trace_end_process was called */
    int pending; /* a marker held back for the marker data that may follow */
    struct cuptimon_ev pend_ev;
    int64_t pend_ts;
    int pend_has_data;
    struct cuptimon_ev pend_data;
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
    struct cuptimon_trace_stats st;
    char *tmp; /* NAME_JSON_MAX bytes, for names not cached */
    FILE *f;
    int fd;
    struct gz_sink *gz; /* gzip output, or NULL */
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
#define FIELD_U(p, key, v) ((p) = u64d(LIT((p), ",\"" key "\":"), (v)))
#define FIELD_I(p, key, v) ((p) = i64d(LIT((p), ",\"" key "\":"), (v)))
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
            case '\n':
                *p++ = 'n';
                break;
            case '\r':
                *p++ = 'r';
                break;
            case '\t':
                *p++ = 't';
                break;
            case '\b':
                *p++ = 'b';
                break;
            case '\f':
                *p++ = 'f';
                break;
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
    int fd = *(int *)ud;
    const char *p = buf;

    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (w == 0)
            return -EIO;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* gzip (opts.gzip_level): the text goes through deflate to the fd.  A trace
 * of a PyTorch step is about 14x smaller at level 1, and tools read
 * .json.gz directly (HTA, Perfetto, chrome://tracing). */
struct gz_sink {
    z_stream z;
    int fd;
    unsigned char out[1 << 16];
};

static int gz_pump(struct gz_sink *g, int flush)
{
    int zr;
    do {
        g->z.next_out = g->out;
        g->z.avail_out = sizeof g->out;
        zr = deflate(&g->z, flush);
        if (zr == Z_STREAM_ERROR)
            return -EIO;
        size_t have = sizeof g->out - g->z.avail_out;
        int rc = have ? fd_write(&g->fd, g->out, have) : 0;
        if (rc < 0)
            return rc;
    } while (g->z.avail_out == 0 || (flush == Z_FINISH && zr != Z_STREAM_END));
    return 0;
}

static int gz_write(void *ud, const void *buf, size_t len)
{
    struct gz_sink *g = ud;
    const unsigned char *p = buf;
    while (len > 0) {
        uInt n = len > (1u << 30) ? 1u << 30 : (uInt)len;
        g->z.next_in = (unsigned char *)p;
        g->z.avail_in = n;
        int rc = gz_pump(g, Z_NO_FLUSH);
        if (rc < 0)
            return rc;
        p += n;
        len -= n;
    }
    return 0;
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
        struct gz_sink *g = calloc(1, sizeof *g);
        /* windowBits 15 + 16: a gzip header and trailer, not zlib's */
        if (g == NULL || deflateInit2(&g->z, level > 9 ? 9 : level, Z_DEFLATED, 15 + 16, 8,
                                      Z_DEFAULT_STRATEGY) != Z_OK) {
            free(g);
            cuptimon__trace_free(t);
            *out = NULL;
            return -ENOMEM;
        }
        g->fd = fd;
        t->gz = g;
        t->ud = g;
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
    free((char *)P->info.hostname);
    free((char *)P->info.label);
    free((char *)P->info.job_id);
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
    if ((p->hostname && !P->info.hostname) || (p->label && !P->info.label) ||
        (p->job_id && !P->info.job_id)) {
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

    /* "host pid 1234 rank 3 (label)" */
    n += (size_t)snprintf(text + n, sizeof(text) - n, "%s pid %u",
                          p->hostname && *p->hostname ? p->hostname : "?", p->pid);
    if (p->rank >= 0 && n < sizeof(text))
        n += (size_t)snprintf(text + n, sizeof(text) - n, " rank %lld", (long long)p->rank);
    if (p->label && *p->label && n < sizeof(text))
        n += (size_t)snprintf(text + n, sizeof(text) - n, " (%s)", p->label);
    meta_string(t, P->pid, 0, 0, "process_name", "name", text);

    n = 0;
    text[0] = '\0';
#define ADDL(...)                                                                                  \
    do {                                                                                           \
        if (n < sizeof(text))                                                                      \
            n += (size_t)snprintf(text + n, sizeof(text) - n, __VA_ARGS__);                        \
    } while (0)
    if (p->rank >= 0) {
        ADDL("rank %lld", (long long)p->rank);
        if (p->world_size >= 0)
            ADDL("/%lld", (long long)p->world_size);
    }
    if (p->local_rank >= 0)
        ADDL("%slocal rank %lld", n ? ", " : "", (long long)p->local_rank);
    if (p->job_id && *p->job_id)
        ADDL("%sjob %s", n ? ", " : "", p->job_id);
    if (p->label && *p->label)
        ADDL("%s%s", n ? ", " : "", p->label);
    if (p->cupti_version)
        ADDL("%sCUPTI %u", n ? ", " : "", p->cupti_version);
    if (P->pid != p->pid)
        ADDL("%spid %u", n ? ", " : "", p->pid);
#undef ADDL
    if (n)
        meta_string(t, P->pid, 0, 0, "process_labels", "labels", text);
    meta_int(t, P->pid, 0, 0, "process_sort_index",
             p->rank >= 0 ? p->rank : (int64_t)1000000 + P->idx);
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
    P->api_tab = calloc(FLOW_SLOTS, sizeof(*P->api_tab));
    P->gpu_tab = calloc(FLOW_SLOTS, sizeof(*P->gpu_tab));
    if (P->api_tab == NULL || P->gpu_tab == NULL) {
        free(P->api_tab);
        free(P->gpu_tab);
        P->api_tab = P->gpu_tab = NULL;
        return -ENOMEM;
    }
    return 0;
}

static char *ext_args(char *p, const struct tproc *P, uint32_t corr)
{
    const struct extent *e;

    if (corr == 0 || P->ext_tab == NULL)
        return p;
    e = P->ext_tab[corr & (EXT_SLOTS - 1)];
    for (int w = 0; w < 2; w++) {
        const char *kn;
        if (e[w].corr != corr)
            break;
        p = w ? LIT(p, ",\"external id 2\":") : LIT(p, ",\"External id\":"); /* Kineto's key */
        p = u64d(p, e[w].id);
        p = w ? LIT(p, ",\"external kind 2\":") : LIT(p, ",\"external kind\":");
        kn = cuptimon__external_kind_name(e[w].kind);
        if (kn != NULL) {
            *p++ = '"';
            memcpy(p, kn, strlen(kn));
            p += strlen(kn);
            *p++ = '"';
        } else {
            p = u64d(p, e[w].kind);
        }
        /* A user annotation (cuptimon_push_annotation: kind CUSTOM1) has
         * its name in the producer's string table. */
        size_t nlen;
        const char *nm;
        if (e[w].kind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1 && P->names &&
            (nm = cuptimon__strtab_get(P->names, CUPTIMON_ANNOTATION_KEY(e[w].id), &nlen))) {
            p = LIT(p, ",\"annotation\":");
            p += cuptimon__json_escape(p, nm, nlen > LABEL_MAX ? LABEL_MAX : nlen);
        }
    }
    return p;
}

static void ext_put(struct tproc *P, const struct cuptimon_ev *ev)
{
    struct extent *e;

    if (ev->correlation_id == 0)
        return;
    if (P->ext_tab == NULL) {
        P->ext_tab = calloc(EXT_SLOTS, sizeof(*P->ext_tab));
        if (P->ext_tab == NULL)
            return; /* the annotation is lost, nothing else */
    }
    e = P->ext_tab[ev->correlation_id & (EXT_SLOTS - 1)];
    if (e[0].corr != ev->correlation_id || e[0].kind == ev->u.ext.external_kind) {
        e[0].corr = ev->correlation_id;
        e[0].kind = ev->u.ext.external_kind;
        e[0].id = ev->u.ext.external_id;
        e[1].corr = 0;
    } else {
        e[1].corr = ev->correlation_id;
        e[1].kind = ev->u.ext.external_kind;
        e[1].id = ev->u.ext.external_id;
    }
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

static void flow_gpu(struct cuptimon_trace *t, struct tproc *P, uint32_t corr, uint32_t tid,
                     int64_t ts)
{
    struct flowent *a, *g;

    if (corr == 0 || t->o.no_flows || P->api_tab == NULL)
        return;
    a = &P->api_tab[corr & (FLOW_SLOTS - 1)];
    if (a->corr == corr) {
        flow_pair(t, P, corr, a, tid, ts);
        return;
    }
    g = &P->gpu_tab[corr & (FLOW_SLOTS - 1)];
    g->corr = corr;
    g->tid = tid;
    g->ts = ts;
}

static void flow_api(struct cuptimon_trace *t, struct tproc *P, uint32_t corr, uint32_t tid,
                     int64_t ts)
{
    struct flowent *a, *g;

    if (corr == 0 || t->o.no_flows || P->api_tab == NULL)
        return;
    a = &P->api_tab[corr & (FLOW_SLOTS - 1)];
    a->corr = corr;
    a->tid = tid;
    a->ts = ts;
    g = &P->gpu_tab[corr & (FLOW_SLOTS - 1)];
    if (g->corr == corr) {
        flow_pair(t, P, corr, a, g->tid, g->ts);
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

static void w_kernel(struct cuptimon_trace *t, struct tproc *P, const struct cuptimon_ev *ev,
                     int64_t ts, int64_t dur)
{
    /* The track first: naming a new track uses t->tmp, which may hold the
     * kernel's name. */
    uint32_t tid = gpu_track(t, P, ev->device_id, ev->stream_id);
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
    flow_gpu(t, P, ev->correlation_id, tid, ts);
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
    flow_gpu(t, P, ev->correlation_id, tid, ts);
}

static void w_memset(struct cuptimon_trace *t, struct tproc *P, const struct cuptimon_ev *ev,
                     int64_t ts, int64_t dur)
{
    uint32_t tid = gpu_track(t, P, ev->device_id, ev->stream_id);
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
    flow_gpu(t, P, ev->correlation_id, tid, ts);
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
    flow_api(t, P, ev->correlation_id, tid, ts);
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
    case 653: /* cuLaunchKernelEx_ptsz */
        return 1;
    default:
        return 0;
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
 * calls are traced; the nested one ends first, so it comes first) is left
 * out for the runtime call, so that each launch is one event. */
static void w_api(struct cuptimon_trace *t, struct tproc *P, const struct cuptimon_ev *ev,
                  int64_t ts, int64_t dur)
{
    uint32_t tid = ev->u.api.thread_id;
    if (ev->type == CUPTIMON_EV_RUNTIME) {
        drv_release(t, P, 0, tid, ev->correlation_id);
        api_write(t, P, ev, ts, dur);
        return;
    }
    if (!driver_launch(ev->u.api.cbid)) {
        t->st.driver_hidden++;
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
    default:
        break;
    }
    return p;
}

/* The track for a record located by a CUpti_ActivityObjectKindId. */
static uint32_t object_track(struct cuptimon_trace *t, struct tproc *P, uint32_t kind,
                             const struct cuptimon_objid *o)
{
    switch (kind) {
    case 1:
    case 2:
        return cpu_track(t, P, o->b ? o->b : P->pid);
    case 3:
    case 4:
        return gpu_track(t, P, o->a, UINT32_MAX);
    case 5:
        return gpu_track(t, P, o->a, o->c);
    default:
        return P->pid;
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
    case CUPTIMON_EV_EXTERNAL_CORRELATION:
        ext_put(P, ev);
        return t->err;
    case CUPTIMON_EV_MARKER_DATA:
        t->st.marker_data_orphans++;
        return t->err;
    case CUPTIMON_EV_NONE:
        return t->err;
    default:
        break;
    }
    if (ev->start == 0) {
        t->st.untimed++;
        return t->err;
    }
    ts = rel(t, clk, ev->start);
    if (ev->end >= ev->start)
        dur = (int64_t)(ev->end - ev->start);

    switch (ev->type) {
    case CUPTIMON_EV_KERNEL:
        w_kernel(t, P, ev, ts, dur);
        break;
    case CUPTIMON_EV_MEMCPY:
    case CUPTIMON_EV_MEMCPY_P2P:
        w_memcpy(t, P, ev, ts, dur);
        break;
    case CUPTIMON_EV_MEMSET:
        w_memset(t, P, ev, ts, dur);
        break;
    case CUPTIMON_EV_RUNTIME:
    case CUPTIMON_EV_DRIVER:
        w_api(t, P, ev, ts, dur);
        break;
    case CUPTIMON_EV_OVERHEAD:
        w_overhead(t, P, ev, ts, dur);
        break;
    case CUPTIMON_EV_CUDA_EVENT:
        w_cuda_event(t, P, ev, ts);
        break;
    case CUPTIMON_EV_SYNC:
        w_sync(t, P, ev, ts, dur);
        break;
    case CUPTIMON_EV_MARKER:
        if (P->mark_tab == NULL)
            P->mark_tab = calloc(MARK_SLOTS, sizeof(*P->mark_tab)); /* NULL: ends unnamed */
        P->pend_ev = *ev;
        P->pend_ts = ts;
        P->pend_has_data = 0;
        P->pending = 1;
        break;
    default:
        break;
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
    if (P->nc != NULL)
        for (size_t i = 0; i < P->nc_cap; i++)
            free(P->nc[i].json);
    free(P->nc);
    free(P->tracks);
    free(P->api_tab);
    free(P->gpu_tab);
    free(P->ext_tab);
    free(P->mark_tab);
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
        if (!t->procs[i]->ended)
            drv_release(t, t->procs[i], 1, 0, 0);
    }
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
    PUT_LIT(t, "\"distributedInfo\": ");
    text = json_object_to_json_string_ext(di, JSON_C_TO_STRING_SPACED |
                                                  JSON_C_TO_STRING_NOSLASHESCAPE);
    put_text(t, text, strlen(text));
    PUT_LIT(t, ",\n\"otherData\":");
    text =
        json_object_to_json_string_ext(od, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    put_text(t, text, strlen(text));
    PUT_LIT(t, "}\n");
    json_object_put(di);
    json_object_put(od);
    flush_out(t);
    if (t->gz != NULL && t->err == 0) {
        t->gz->z.next_in = NULL;
        t->gz->z.avail_in = 0;
        t->err = gz_pump(t->gz, Z_FINISH);
    }
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
    free(t->buf);
    free(t->tmp);
    if (t->gz != NULL) {
        deflateEnd(&t->gz->z);
        free(t->gz);
    }
    free(t);
}
