/*
 * cuptimonctl top and cuptimonctl metrics: the daemon's live aggregates.
 *
 * top asks the daemon {"op":"top", "by", "sort", filters, "n"} every
 * interval and shows the answer: full screen when stdout is a terminal
 * (plain ANSI escapes and termios, no curses: the alternate screen, the
 * cursor hidden, the whole frame written at once), a plain table when it
 * is not or with --once, the daemon's JSON with --json.  The terminal is
 * put back on every way out: q, SIGINT, SIGTERM, SIGHUP, an error, and
 * around a suspend (^Z).
 *
 * Every string shown comes from a producer (kernel names, labels): control
 * characters and invalid UTF-8 are replaced before they reach the
 * terminal, so a name cannot move the cursor or change its modes.
 */
#include "config.h"

#include "top.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "archive/json-get.h"
#include "ctl.h"
#include "cuptimon-proto.h"

/* ---- text ----------------------------------------------------------------------------- */

/* A growing frame, written in one go. */
struct out {
    char *p;
    size_t len, cap;
};

static void out_add(struct out *o, const char *s, size_t n)
{
    if (o->len + n + 1 > o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 8192;
        char *np;
        while (nc < o->len + n + 1)
            nc *= 2;
        np = realloc(o->p, nc);
        if (np == NULL)
            return;
        o->p = np;
        o->cap = nc;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void out_printf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(struct out *o, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n > 0)
        out_add(o, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* Copies s into a terminal-safe string: control characters and invalid
 * UTF-8 become '?'.  *cols gets its width in columns (one per character,
 * which is right for the names and labels of GPU jobs). */
static char *safe_text(const char *s, size_t *cols)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), i = 0, o = 0, w = 0;
    char *r = malloc(n + 1);

    if (r == NULL) {
        *cols = 0;
        return NULL;
    }
    while (i < n) {
        size_t l = 0;
        uint32_t cp = 0;
        if (u[i] < 0x80) {
            r[o++] = u[i] < 0x20 || u[i] == 0x7f ? '?' : (char)u[i];
            i++;
            w++;
            continue;
        }
        if ((u[i] & 0xe0) == 0xc0) {
            l = 2;
            cp = u[i] & 0x1f;
        } else if ((u[i] & 0xf0) == 0xe0) {
            l = 3;
            cp = u[i] & 0x0f;
        } else if ((u[i] & 0xf8) == 0xf0) {
            l = 4;
            cp = u[i] & 0x07;
        }
        if (l == 0 || i + l > n) {
            r[o++] = '?';
            i++;
            w++;
            continue;
        }
        size_t k;
        for (k = 1; k < l && (u[i + k] & 0xc0) == 0x80; k++)
            cp = (cp << 6) | (u[i + k] & 0x3f);
        /* Overlong forms, surrogates, C1 controls: replaced. */
        if (k < l || (l == 2 && cp < 0xa0) || (l == 3 && cp < 0x800) || (l == 4 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
            r[o++] = '?';
            i++;
            w++;
            continue;
        }
        memcpy(r + o, u + i, l);
        o += l;
        i += l;
        w++;
    }
    r[o] = '\0';
    *cols = w;
    return r;
}

/* Byte offset of column c in a safe string. */
static size_t col_offset(const char *s, size_t c)
{
    size_t i = 0;
    while (s[i] && c > 0) {
        i++;
        while (((unsigned char)s[i] & 0xc0) == 0x80)
            i++;
        c--;
    }
    return i;
}

static size_t text_cols(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80)
            w++;
    return w;
}

/* Removes [from, to) of s in place and puts rep there. */
static void splice(char *s, size_t from, size_t to, const char *rep)
{
    size_t rl = strlen(rep), tail = strlen(s + to);
    memmove(s + from + rl, s + to, tail + 1);
    memcpy(s + from, rep, rl);
}

/* A safe copy cut to width columns, "..." marking the cut. */
static char *cut(const char *text, size_t width)
{
    size_t cols;
    char *s = safe_text(text, &cols);

    if (s == NULL || cols <= width)
        return s;
    if (width <= 3) {
        s[col_offset(s, width)] = '\0';
        return s;
    }
    s[col_offset(s, width - 3)] = '\0';
    strcat(s, "...");
    return s;
}

/*
 * A demangled name shortened to width columns, in steps that each keep
 * the most telling part: the parameter list goes first, then the return
 * type, then template arguments ("<...>"), then the namespaces, and
 * finally the end is cut ("...").  Returns a malloc'd safe string.
 */
static char *shorten(const char *name, size_t width)
{
    size_t cols, depth, i, len;
    char *s = safe_text(name, &cols);

    if (s == NULL || cols <= width)
        return s;
    /* 1. The parameter list: from the first '(' outside <...>, unless the
     * name starts with it (operator(), lambdas print oddly). */
    for (i = 0, depth = 0; s[i]; i++) {
        if (s[i] == '<')
            depth++;
        else if (s[i] == '>' && depth > 0)
            depth--;
        else if (s[i] == '(' && depth == 0 && i > 0) {
            s[i] = '\0';
            break;
        }
    }
    if (text_cols(s) <= width)
        return s;
    /* 2. The return type: up to the last space outside <...>. */
    for (i = 0, depth = 0, len = 0; s[i]; i++) {
        if (s[i] == '<')
            depth++;
        else if (s[i] == '>' && depth > 0)
            depth--;
        else if (s[i] == ' ' && depth == 0)
            len = i + 1;
    }
    if (len > 0 && s[len])
        memmove(s, s + len, strlen(s + len) + 1);
    if (text_cols(s) <= width)
        return s;
    /* 3. Template arguments: each outermost <...> becomes <...>. */
    for (i = 0; s[i]; i++) {
        if (s[i] != '<')
            continue;
        size_t j = i + 1;
        for (depth = 1; s[j] && depth > 0; j++) {
            if (s[j] == '<')
                depth++;
            else if (s[j] == '>')
                depth--;
        }
        if (depth == 0 && j - i > 5) {
            splice(s, i + 1, j - 1, "...");
            i += 4;
        }
    }
    if (text_cols(s) <= width)
        return s;
    /* 4. Namespaces and classes: keep the last component. */
    for (i = 0, depth = 0, len = 0; s[i]; i++) {
        if (s[i] == '<')
            depth++;
        else if (s[i] == '>' && depth > 0)
            depth--;
        else if (s[i] == ':' && s[i + 1] == ':' && depth == 0)
            len = i + 2;
    }
    if (len > 0 && s[len])
        memmove(s, s + len, strlen(s + len) + 1);
    if (text_cols(s) <= width)
        return s;
    /* 5. Cut. */
    {
        char *c = cut(s, width);
        free(s);
        return c;
    }
}

/* A whole line: cut at w columns, not padded (a terminal line is cleared
 * to its end by the caller; a plain line ends where its text ends). */
static void out_line(struct out *o, const char *text, size_t w)
{
    size_t cols;
    char *s = safe_text(text, &cols);

    if (s == NULL)
        return;
    if (cols > w)
        s[col_offset(s, w)] = '\0';
    out_add(o, s, strlen(s));
    free(s);
}

/* Left-aligned and padded (or cut) to exactly w columns. */
static void out_cell(struct out *o, const char *text, size_t w)
{
    size_t cols;
    char *s = safe_text(text, &cols);

    if (s == NULL)
        return;
    if (cols > w) {
        s[col_offset(s, w)] = '\0';
        cols = w;
    }
    out_add(o, s, strlen(s));
    for (; cols < w; cols++)
        out_add(o, " ", 1);
    free(s);
}

static void fmt_ns(char *b, size_t n, uint64_t ns)
{
    if (ns >= 100000000000ull)
        snprintf(b, n, "%.0fs", (double)ns / 1e9);
    else if (ns >= 1000000000ull)
        snprintf(b, n, "%.2fs", (double)ns / 1e9);
    else if (ns >= 1000000ull)
        snprintf(b, n, "%.1fms", (double)ns / 1e6);
    else if (ns >= 1000ull)
        snprintf(b, n, "%.1fus", (double)ns / 1e3);
    else
        snprintf(b, n, "%" PRIu64 "ns", ns);
}

/* Exact below 100000, then three significant digits or so. */
static void fmt_count(char *b, size_t n, uint64_t v)
{
    if (v >= 1000000000000ull)
        snprintf(b, n, "%.0fG", (double)v / 1e9);
    else if (v >= 1000000000ull)
        snprintf(b, n, "%.2fG", (double)v / 1e9);
    else if (v >= 1000000ull)
        snprintf(b, n, "%.2fM", (double)v / 1e6);
    else if (v >= 100000ull)
        snprintf(b, n, "%.1fk", (double)v / 1e3);
    else
        snprintf(b, n, "%" PRIu64, v);
}

static void fmt_bytes(char *b, size_t n, double v, const char *suffix)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int i = 0;
    while (v >= 1024 && i < 5) {
        v /= 1024;
        i++;
    }
    snprintf(b, n, i ? "%.1f%s%s" : "%.0f%s%s", v, u[i], suffix);
}

/* ---- the view ---------------------------------------------------------------------- */

enum {
    BY_PROCESS,
    BY_KERNEL,
    BY_DEVICE
};
enum {
    SORT_TIME,
    SORT_COUNT,
    SORT_P99
};
static const char *const by_names[] = {"process", "kernel", "device"};
static const char *const sort_names[] = {"time", "count", "p99"};

struct view {
    int by, sort;
    int64_t pid;
    const char *job, *rank, *label;
    double interval;
    size_t width, height;
    int tty;
};

static json_object *top_request(const struct view *v, unsigned n)
{
    json_object *r = json_object_new_object();
    json_object_object_add(r, "op", json_object_new_string("top"));
    json_object_object_add(r, "by", json_object_new_string(by_names[v->by]));
    json_object_object_add(r, "sort", json_object_new_string(sort_names[v->sort]));
    if (v->pid > 0)
        json_object_object_add(r, "pid", json_object_new_int64(v->pid));
    if (v->job)
        json_object_object_add(r, "job", json_object_new_string(v->job));
    if (v->rank)
        json_object_object_add(r, "rank", json_object_new_string(v->rank));
    if (v->label)
        json_object_object_add(r, "label", json_object_new_string(v->label));
    json_object_object_add(r, "n", json_object_new_int64(n < 1 ? 1 : n > 1000 ? 1000 : n));
    return r;
}

/* Ends a row built in r: cut to the width (a terminal must not wrap it),
 * then the end of line. */
static void end_row(struct out *o, const struct view *v, struct out *r, const char *eol)
{
    if (r->p != NULL)
        out_line(o, r->p, v->width);
    out_printf(o, "%s", eol);
    free(r->p);
    memset(r, 0, sizeof(*r));
}

/* Header: node totals, a line per device with its busy bar.  Returns the
 * number of lines. */
static size_t draw_header(struct out *o, const struct view *v, json_object *t, const char *err)
{
    json_object *node = cuptimon__json_get(t, "node"), *devs = cuptimon__json_get(t, "devices");
    char host[128] = "", when[32], kt[32], kc[32], mb[32], ms[32];
    size_t lines = 0, nd = devs ? json_object_array_length(devs) : 0;
    time_t now = time(NULL);
    struct tm tm;
    const char *nl = v->tty ? "\033[K\n" : "\n";

    gethostname(host, sizeof(host) - 1);
    localtime_r(&now, &tm);
    strftime(when, sizeof(when), "%H:%M:%S", &tm);
    fmt_count(kc, sizeof(kc), cuptimon__json_uint(node, "kernels", 0));
    fmt_ns(kt, sizeof(kt), cuptimon__json_uint(node, "kernel_ns", 0));
    fmt_bytes(mb, sizeof(mb), (double)cuptimon__json_uint(node, "memcpy_bytes", 0), "");
    fmt_bytes(ms, sizeof(ms), (double)cuptimon__json_uint(node, "memset_bytes", 0), "");
    {
        char line[512], ended[32] = "", whose[48] = "";
        if (cuptimon__json_uint(node, "sessions_ended", 0) > 0)
            snprintf(ended, sizeof(ended), " (+%" PRIu64 " ended)",
                     cuptimon__json_uint(node, "sessions_ended", 0));
        /* The daemon shows a user who is not an operator their own
         * processes only: the totals are theirs, not the node's. */
        if (cuptimon__json_get(t, "only_uid") != NULL)
            snprintf(whose, sizeof(whose), " of uid %" PRIu64,
                     cuptimon__json_uint(t, "only_uid", 0));
        snprintf(line, sizeof(line),
                 "cuptimon top - %s %s  sessions%s %" PRIu64 "%s  kernels %s (%s GPU)  memcpy %s  "
                 "memset %s  dropped %" PRIu64 "  lost %" PRIu64,
                 host, when, whose, cuptimon__json_uint(node, "sessions", 0), ended, kc, kt, mb, ms,
                 cuptimon__json_uint(node, "dropped_records", 0),
                 cuptimon__json_uint(node, "lost_buffers", 0));
        out_line(o, line, v->width);
        out_printf(o, "%s", nl);
        lines++;
    }
    for (size_t i = 0; i < nd; i++) {
        json_object *d = json_object_array_get_idx(devs, i), *mc = cuptimon__json_get(d, "memcpy");
        double b1 = cuptimon__json_double(d, "busy_1s", 0),
               b10 = cuptimon__json_double(d, "busy_10s", 0);
        size_t bar = v->width > 100 ? 40 : v->width > 60 ? v->width - 60 : 10, fill;
        char line[512], rates[160] = "";
        fill = (size_t)(b1 * (double)bar + 0.5);
        if (fill > bar)
            fill = bar;
        if (mc != NULL) {
            json_object_object_foreach(mc, dir, x)
            {
                char r[32];
                fmt_bytes(r, sizeof(r), cuptimon__json_double(x, "bytes_per_s", 0), "/s");
                size_t l = strlen(rates);
                snprintf(rates + l, sizeof(rates) - l, "%s%s %s", l ? "  " : "", dir, r);
            }
        }
        struct out row = {0};
        out_printf(&row, "GPU %-3" PRId64 " [", cuptimon__json_int(d, "device", 0));
        for (size_t k = 0; k < bar; k++)
            out_add(&row, k < fill ? "|" : " ", 1);
        snprintf(line, sizeof(line), "] %5.1f%%  10s %5.1f%%%s%s", 100 * b1, 100 * b10,
                 rates[0] ? "  " : "", rates);
        out_line(&row, line, sizeof(line));
        end_row(o, v, &row, nl);
        lines++;
    }
    if (nd == 0) {
        out_line(o, "no GPU activity aggregated yet", v->width);
        out_printf(o, "%s", nl);
        lines++;
    }
    if (v->tty) {
        char line[256];
        snprintf(line, sizeof(line),
                 "by %s, sorted by %s, every %gs   keys: p k d group  t c 9 sort  q quit",
                 by_names[v->by], sort_names[v->sort], v->interval);
        out_line(o, line, v->width);
        out_printf(o, "%s", nl);
        lines++;
    }
    if (err != NULL && *err) {
        if (v->tty)
            out_printf(o, "\033[1m");
        out_line(o, err, v->width);
        out_printf(o, "%s%s", v->tty ? "\033[0m" : "", nl);
        lines++;
    }
    out_printf(o, "%s", nl);
    lines++;
    return lines;
}

/* The table's heading: a full-width inverse bar on a terminal. */
static void heading(struct out *o, const struct view *v, const char *text)
{
    if (v->tty) {
        out_printf(o, "\033[7m");
        out_cell(o, text, v->width);
        out_printf(o, "\033[0m\033[K\n");
    } else {
        out_line(o, text, v->width);
        out_printf(o, "\n");
    }
}

/* The table, at most max rows. */
/* "     SM 43%  occupancy 20%  tensor 0%  DRAM 85% ..." for device dev from
 * the reply's gpu_metrics (the last second's means); 0 when there are none. */
static int gpu_counters(json_object *gm, int64_t dev, char *out, size_t n)
{
    static const struct {
        const char *key, *label;
        int pct;
    } show[] = {{"sm_active", "SM", 1},
                {"sm_occupancy", "occupancy", 1},
                {"tensor_active", "tensor", 1},
                {"dram_active", "DRAM", 1},
                {"pcie_rx_bytes", "PCIe rx", 0},
                {"pcie_tx_bytes", "tx", 0},
                {"nvlink_rx_bytes", "NVLink rx", 0},
                {"nvlink_tx_bytes", "tx", 0},
                {"sm_clock", "clock", 0}};
    size_t o = 0;
    for (size_t i = 0; gm && i < json_object_array_length(gm); i++) {
        json_object *d = json_object_array_get_idx(gm, i), *m = cuptimon__json_get(d, "last_1s");
        if (cuptimon__json_int(d, "device", -2) != dev)
            continue;
        o = (size_t)snprintf(out, n, "     counters:");
        for (size_t k = 0; m && k < sizeof show / sizeof show[0] && o < n; k++) {
            json_object *v = cuptimon__json_get(m, show[k].key);
            char b[32];
            if (!v)
                continue;
            if (show[k].pct)
                snprintf(b, sizeof b, "%.0f%%", json_object_get_double(v));
            else if (strcmp(show[k].key, "sm_clock") == 0)
                snprintf(b, sizeof b, "%.0f MHz", json_object_get_double(v) / 1e6);
            else
                fmt_bytes(b, sizeof b, json_object_get_double(v), "/s");
            o += (size_t)snprintf(out + o, n - o, "  %s %s", show[k].label, b);
        }
        if (o <= strlen("     counters:"))
            o = (size_t)snprintf(out, n, "     counters: %s",
                                 cuptimon__json_str(d, "state", "not sampled"));
        return 1;
    }
    return 0;
}

/* "         held 3.02s by kernel hold(), 11.2 MiB behind it" for process
 * row r, whose oldest work has held its records for age seconds, within
 * the width: a kernel's name is shortened as the KERNEL column's are. */
static void held_note(struct out *o, const struct view *v, json_object *r, double age)
{
    const char *what = cuptimon__json_str(r, "inflight_what", "?");
    char d[32], hb[32], pre[64], post[64], line[1024];
    size_t used, room;
    char *w;
    int kernel = strncmp(what, "kernel ", 7) == 0;

    fmt_ns(d, sizeof(d), (uint64_t)(age * 1e9));
    fmt_bytes(hb, sizeof(hb), (double)cuptimon__json_uint(r, "inflight_held_bytes", 0), "");
    snprintf(pre, sizeof(pre), "%9sheld %s by %s", "", d, kernel ? "kernel " : "");
    snprintf(post, sizeof(post), ", %s behind it", hb);
    used = strlen(pre) + strlen(post);
    room = v->width > used + 10 ? v->width - used : 10;
    w = kernel ? shorten(what + 7, room) : cut(what, room);
    snprintf(line, sizeof(line), "%s%s%s", pre, w ? w : "?", post);
    free(w);
    out_line(o, line, v->width);
}

char *cuptimon__cli_cut(const char *text, size_t width)
{
    return cut(text, width);
}

void cuptimon__cli_nccl_line(json_object *c, char *out, size_t len)
{
    json_object *l = cuptimon__json_get(c, "last_completed"),
                *f = cuptimon__json_get(c, "in_flight");
    char last[160] = "none completed", fly[192] = "none in flight", age[32];
    /* Names come from the job (NCCL's plugin calls): shown safe. */
    char *name = cut(cuptimon__json_str(c, "name", ""), 48);
    char *lf = l ? cut(cuptimon__json_str(l, "function", "?"), 32) : NULL;
    char *ff = f ? cut(cuptimon__json_str(f, "function", "?"), 32) : NULL;
    if (l)
        snprintf(last, sizeof last, "last completed %s #%" PRIu64, lf ? lf : "?",
                 cuptimon__json_uint(l, "seq", 0));
    if (f) {
        fmt_ns(age, sizeof age, (uint64_t)(cuptimon__json_double(f, "age_s", 0) * 1e9));
        snprintf(fly, sizeof fly, "in flight %s #%" PRIu64 " for %s", ff ? ff : "?",
                 cuptimon__json_uint(f, "seq", 0), age);
    }
    /* NCCL's plugin v1-v3 never says a communicator's size (ranks 0). */
    int64_t ranks = cuptimon__json_int(c, "ranks", 0);
    char of[32] = "";
    if (ranks > 0)
        snprintf(of, sizeof of, " of %" PRId64, ranks);
    snprintf(out, len, "NCCL %s%s(%s) rank %" PRId64 "%s: %s; %s", name && *name ? name : "",
             name && *name ? " " : "", cuptimon__json_str(c, "comm_id", "?"),
             cuptimon__json_int(c, "rank", 0), of, last, fly);
    free(name);
    free(lf);
    free(ff);
}

static void draw_table(struct out *o, const struct view *v, json_object *t, size_t max)
{
    json_object *rows = cuptimon__json_get(t, "rows");
    size_t n = rows ? json_object_array_length(rows) : 0;
    uint64_t node_ns = cuptimon__json_uint(cuptimon__json_get(t, "node"), "kernel_ns", 0);
    const char *eol = v->tty ? "\033[K\n" : "\n";
    struct out row = {0};
    char line[1024];
    int wide = v->width >= 120;

    if (n > max)
        n = max;
    if (v->by == BY_KERNEL) {
        /* Narrow terminals lose MEAN, P90 and PROCS, not the names. */
        const size_t fixed = wide ? 72 : 46;
        size_t nw = v->width > fixed + 10 ? v->width - fixed : 10;
        if (wide)
            snprintf(line, sizeof(line), "%8s %9s %6s %9s %9s %9s %9s %5s %s", "COUNT", "GPU-TIME",
                     "%TIME", "MEAN", "P50", "P90", "P99", "PROCS", "KERNEL");
        else
            snprintf(line, sizeof(line), "%8s %9s %6s %9s %9s %s", "COUNT", "GPU-TIME", "%TIME",
                     "P50", "P99", "KERNEL");
        heading(o, v, line);
        for (size_t i = 0; i < n; i++) {
            json_object *r = json_object_array_get_idx(rows, i);
            char c[32], tt[32], mean[32], p50[32], p90[32], p99[32], *name;
            uint64_t tot = cuptimon__json_uint(r, "total_ns", 0);
            double pct = node_ns ? 100.0 * (double)tot / (double)node_ns : 0.0;
            fmt_count(c, sizeof(c), cuptimon__json_uint(r, "count", 0));
            fmt_ns(tt, sizeof(tt), tot);
            fmt_ns(mean, sizeof(mean), cuptimon__json_uint(r, "mean_ns", 0));
            fmt_ns(p50, sizeof(p50), cuptimon__json_uint(r, "p50_ns", 0));
            fmt_ns(p90, sizeof(p90), cuptimon__json_uint(r, "p90_ns", 0));
            fmt_ns(p99, sizeof(p99), cuptimon__json_uint(r, "p99_ns", 0));
            if (wide)
                snprintf(line, sizeof(line), "%8s %9s %5.1f%% %9s %9s %9s %9s %5" PRIu64 " ", c, tt,
                         pct, mean, p50, p90, p99, cuptimon__json_uint(r, "processes", 0));
            else
                snprintf(line, sizeof(line), "%8s %9s %5.1f%% %9s %9s ", c, tt, pct, p50, p99);
            out_cell(&row, line, fixed);
            name = shorten(cuptimon__json_str(r, "name", ""), nw);
            if (name != NULL)
                out_add(&row, name, strlen(name));
            free(name);
            end_row(o, v, &row, eol);
        }
    } else if (v->by == BY_PROCESS) {
        /* Narrow terminals lose P50, P90 and MEMCPY, and labels are cut. */
        const size_t lw = wide ? 16 : 12, rw = wide ? 6 : 5;
        const size_t fixed = wide ? 111 : 77;
        if (wide)
            snprintf(line, sizeof(line), "%-8s %-16s %-6s %8s %9s %6s %9s %9s %9s %8s %6s %5s %s",
                     "PID", "LABEL", "RANK", "KERNELS", "GPU-TIME", "%TIME", "P50", "P90", "P99",
                     "MEMCPY", "DROP", "LOST", "JOB/EXE");
        else
            snprintf(line, sizeof(line), "%-8s %-12s %-5s %8s %9s %6s %9s %6s %5s %s", "PID",
                     "LABEL", "RANK", "KERNELS", "GPU-TIME", "%TIME", "P99", "DROP", "LOST",
                     "JOB/EXE");
        heading(o, v, line);
        size_t lines = 0; /* on a terminal: the rows and notes drawn */
        for (size_t i = 0; i < n && (!v->tty || lines < max); i++) {
            json_object *r = json_object_array_get_idx(rows, i);
            char k[32], tt[32], p50[32], p90[32], p99[32], mb[32], dr[32], rest[512];
            uint64_t tot = cuptimon__json_uint(r, "kernel_ns", 0);
            double pct = node_ns ? 100.0 * (double)tot / (double)node_ns : 0.0;
            const char *exe = cuptimon__json_str(r, "exe", ""), *base = strrchr(exe, '/');
            char *safe;
            fmt_count(k, sizeof(k), cuptimon__json_uint(r, "kernels", 0));
            fmt_ns(tt, sizeof(tt), tot);
            fmt_ns(p50, sizeof(p50), cuptimon__json_uint(r, "p50_ns", 0));
            fmt_ns(p90, sizeof(p90), cuptimon__json_uint(r, "p90_ns", 0));
            fmt_ns(p99, sizeof(p99), cuptimon__json_uint(r, "p99_ns", 0));
            fmt_bytes(mb, sizeof(mb), (double)cuptimon__json_uint(r, "memcpy_bytes", 0), "");
            fmt_count(dr, sizeof(dr), cuptimon__json_uint(r, "dropped_records", 0));
            snprintf(line, sizeof(line), "%-8" PRId64 " ", cuptimon__json_int(r, "pid", 0));
            out_cell(&row, line, 9);
            out_cell(&row,
                     *cuptimon__json_str(r, "label", "") ? cuptimon__json_str(r, "label", "") : "-",
                     lw);
            out_cell(&row, " ", 1);
            out_cell(&row,
                     *cuptimon__json_str(r, "rank", "") ? cuptimon__json_str(r, "rank", "") : "-",
                     rw);
            out_cell(&row, " ", 1);
            if (wide)
                snprintf(line, sizeof(line), "%8s %9s %5.1f%% %9s %9s %9s %8s %6s %5" PRIu64 " ", k,
                         tt, pct, p50, p90, p99, mb, dr, cuptimon__json_uint(r, "lost_buffers", 0));
            else
                snprintf(line, sizeof(line), "%8s %9s %5.1f%% %9s %6s %5" PRIu64 " ", k, tt, pct,
                         p99, dr, cuptimon__json_uint(r, "lost_buffers", 0));
            out_cell(&row, line, fixed - 9 - lw - 1 - rw - 1);
            /* The job, then the program's name without its directory. */
            snprintf(rest, sizeof(rest), "%s%s%s%s", cuptimon__json_str(r, "job", ""),
                     *cuptimon__json_str(r, "job", "") ? " " : "", base ? base + 1 : exe,
                     cuptimon__json_bool(r, "ended", 0) ? " (ended)" : "");
            safe = cut(rest, v->width > fixed + 10 ? v->width - fixed : 10);
            if (safe != NULL)
                out_add(&row, safe, strlen(safe));
            free(safe);
            end_row(o, v, &row, eol);
            lines += v->tty;
            /* The work that has held its records for a second or more, on
             * a line of its own under the row: in the JOB/EXE column it
             * was cut to nothing on 80 columns.  On a terminal it takes
             * one of the rows that fit. */
            json_object *age = cuptimon__json_get(r, "inflight_s");
            if (age && json_object_get_double(age) >= 1 && (!v->tty || lines < max)) {
                held_note(o, v, r, json_object_get_double(age));
                out_printf(o, "%s", eol);
                lines += v->tty;
            }
            /* Its NCCL communicators: the last collective completed and
             * the one in flight, which rank waits in what (issue 46). */
            json_object *comms = cuptimon__json_get(r, "nccl");
            for (size_t c = 0; comms && json_object_is_type(comms, json_type_array) &&
                               c < json_object_array_length(comms) && (!v->tty || lines < max);
                 c++) {
                char note[512];
                cuptimon__cli_nccl_line(json_object_array_get_idx(comms, c), note, sizeof note);
                snprintf(line, sizeof line, "%9s%s", "", note);
                out_line(o, line, v->width);
                out_printf(o, "%s", eol);
                lines += v->tty;
            }
        }
    } else {
        snprintf(line, sizeof(line), "%-4s %7s %7s %7s %9s %9s %11s %11s %11s %11s %9s", "GPU",
                 "BUSY1S", "BUSY10S", "BUSY60S", "KERNELS", "GPU-TIME", "HtoD/s", "DtoH/s",
                 "DtoD/s", "other/s", "MEMSET");
        heading(o, v, line);
        for (size_t i = 0; i < n; i++) {
            json_object *r = json_object_array_get_idx(rows, i),
                        *mc = cuptimon__json_get(r, "memcpy");
            char k[32], tt[32], h2d[32], d2h[32], d2d[32], oth[32], msb[32];
            double other = 0;
            fmt_count(k, sizeof(k), cuptimon__json_uint(r, "kernels", 0));
            fmt_ns(tt, sizeof(tt), cuptimon__json_uint(r, "kernel_ns", 0));
            fmt_bytes(h2d, sizeof(h2d),
                      cuptimon__json_double(cuptimon__json_get(mc, "HtoD"), "bytes_per_s", 0), "");
            fmt_bytes(d2h, sizeof(d2h),
                      cuptimon__json_double(cuptimon__json_get(mc, "DtoH"), "bytes_per_s", 0), "");
            fmt_bytes(d2d, sizeof(d2d),
                      cuptimon__json_double(cuptimon__json_get(mc, "DtoD"), "bytes_per_s", 0), "");
            if (mc != NULL) {
                json_object_object_foreach(mc, dir, x)
                {
                    if (strcmp(dir, "HtoD") && strcmp(dir, "DtoH") && strcmp(dir, "DtoD"))
                        other += cuptimon__json_double(x, "bytes_per_s", 0);
                }
            }
            fmt_bytes(oth, sizeof(oth), other, "");
            fmt_bytes(msb, sizeof(msb), (double)cuptimon__json_uint(r, "memset_bytes", 0), "");
            snprintf(line, sizeof(line),
                     "%-4" PRId64 " %6.1f%% %6.1f%% %6.1f%% %9s %9s %11s %11s %11s %11s %9s",
                     cuptimon__json_int(r, "device", 0),
                     100 * cuptimon__json_double(r, "busy_1s", 0),
                     100 * cuptimon__json_double(r, "busy_10s", 0),
                     100 * cuptimon__json_double(r, "busy_60s", 0), k, tt, h2d, d2h, d2d, oth, msb);
            out_line(o, line, v->width);
            out_printf(o, "%s", eol);
            /* The GPU's own counters (the daemon's PM sampling), last second. */
            if (gpu_counters(cuptimon__json_get(t, "gpu_metrics"),
                             cuptimon__json_int(r, "device", -1), line, sizeof(line))) {
                out_line(o, line, v->width);
                out_printf(o, "%s", eol);
            }
        }
    }
    if (rows != NULL && json_object_array_length(rows) == 0) {
        out_line(o, v->by == BY_DEVICE ? "(no devices yet)" : "(nothing matches yet)", v->width);
        out_printf(o, "%s", eol);
    }
}

/* ---- the terminal -------------------------------------------------------------------- */

static struct termios saved_tio;
static int term_active;
static volatile sig_atomic_t got_quit, got_winch, got_tstp;

static void on_signal(int sig)
{
    if (sig == SIGWINCH)
        got_winch = 1;
    else if (sig == SIGTSTP)
        got_tstp = 1;
    else
        got_quit = sig;
}

static void write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static void term_leave(void)
{
    static const char seq[] = "\033[0m\033[?25h\033[?1049l";
    if (!term_active)
        return;
    write_all(STDOUT_FILENO, seq, sizeof(seq) - 1);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
    term_active = 0;
}

static int term_enter(void)
{
    static const char seq[] = "\033[?1049h\033[?25l\033[H\033[2J";
    struct termios raw;

    if (tcgetattr(STDIN_FILENO, &saved_tio) < 0)
        return -errno;
    raw = saved_tio;
    /* Keys one at a time and not echoed; ^C and ^Z still signal. */
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) < 0)
        return -errno;
    term_active = 1;
    write_all(STDOUT_FILENO, seq, sizeof(seq) - 1);
    return 0;
}

static void term_size(struct view *v)
{
    struct winsize ws;
    const char *c = getenv("COLUMNS"), *l = getenv("LINES");

    v->width = 160;
    v->height = 40;
    if (v->tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
        v->width = ws.ws_col;
        v->height = ws.ws_row;
        return;
    }
    if (c && atoi(c) > 20)
        v->width = (size_t)atoi(c);
    if (l && atoi(l) > 5)
        v->height = (size_t)atoi(l);
}

static void install(int sig, void (*h)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = h;
    sigemptyset(&sa.sa_mask);
    /* No SA_RESTART: poll() must return to look at the flags. */
    sigaction(sig, &sa, NULL);
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The full-screen loop.  Returns the exit status. */
static int run_screen(struct cuptimon_ctl *c, struct view *v)
{
    json_object *last = NULL;
    char err[600] = "";
    int status = 0, need_fetch = 1, need_draw = 1;
    double next = 0;

    install(SIGINT, on_signal);
    install(SIGTERM, on_signal);
    install(SIGHUP, on_signal);
    install(SIGQUIT, on_signal);
    install(SIGWINCH, on_signal);
    install(SIGTSTP, on_signal);
    if (term_enter() < 0) {
        fprintf(stderr, "cuptimonctl top: cannot set up the terminal: %s\n", strerror(errno));
        return 1;
    }
    atexit(term_leave);
    term_size(v);
    while (!got_quit) {
        struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
        double now = mono();
        int ms;

        if (got_tstp) {
            /* Put the terminal back while stopped, take it again after. */
            got_tstp = 0;
            term_leave();
            signal(SIGTSTP, SIG_DFL);
            raise(SIGTSTP);
            install(SIGTSTP, on_signal);
            if (term_enter() < 0)
                break;
            got_winch = 1;
        }
        if (got_winch) {
            got_winch = 0;
            term_size(v);
            need_draw = 1;
        }
        if (need_fetch || now >= next) {
            /* Rows that fit below the header. */
            json_object *devs = cuptimon__json_get(last, "devices");
            size_t nd = devs ? json_object_array_length(devs) : 1;
            /* header nd + 3 lines (+1 error), heading, last line empty */
            size_t rows = v->height > nd + 6 ? v->height - nd - 6 : 1;
            json_object *req = top_request(v, (unsigned)rows);
            int refused;
            json_object *t = cuptimon__ctl_call(c, req, err, sizeof(err), &refused);
            json_object_put(req);
            if (t != NULL) {
                json_object_put(last);
                last = t;
                err[0] = '\0';
            } else if (refused && last == NULL) {
                /* The daemon answers but has no aggregates: say so and go. */
                status = 1;
                break;
            }
            next = mono() + v->interval;
            need_fetch = 0;
            need_draw = 1;
        }
        if (need_draw) {
            struct out o = {0};
            size_t used;
            out_printf(&o, "\033[H");
            used = draw_header(&o, v, last, err);
            /* Rows that fit below the header and the table's heading,
             * leaving the last line empty: a newline there would scroll. */
            if (last != NULL && v->height > used + 1)
                draw_table(&o, v, last, v->height > used + 2 ? v->height - used - 2 : 0);
            out_printf(&o, "\033[J");
            if (o.p != NULL)
                write_all(STDOUT_FILENO, o.p, o.len);
            free(o.p);
            need_draw = 0;
        }
        ms = (int)((next - mono()) * 1000);
        if (ms < 0)
            ms = 0;
        if (poll(&pfd, 1, ms) > 0 && (pfd.revents & POLLIN)) {
            char keys[64];
            ssize_t n = read(STDIN_FILENO, keys, sizeof(keys));
            for (ssize_t i = 0; i < n; i++) {
                int by = v->by, sort = v->sort;
                if (keys[i] == 0x1b)
                    break; /* an escape sequence (arrows): ignored whole */
                switch (keys[i]) {
                case 'q':
                case 'Q': got_quit = -1; break;
                case 'p': by = BY_PROCESS; break;
                case 'k': by = BY_KERNEL; break;
                case 'd': by = BY_DEVICE; break;
                case 't': sort = SORT_TIME; break;
                case 'c': sort = SORT_COUNT; break;
                case '9': sort = SORT_P99; break;
                case ' ':
                case 'r': need_fetch = 1; break;
                default: break;
                }
                if (by != v->by || sort != v->sort) {
                    v->by = by;
                    v->sort = sort;
                    need_fetch = 1;
                }
            }
            if (n == 0 && !isatty(STDIN_FILENO))
                got_quit = -1;
        }
    }
    term_leave();
    if (status == 1)
        fprintf(stderr, "cuptimonctl top: %s\n", err);
    json_object_put(last);
    if (got_quit > 0 && got_quit != SIGINT)
        return 128 + got_quit;
    return status;
}

static void top_usage(FILE *f)
{
    fprintf(f, "Usage: cuptimonctl top [--interval=S] [--by=process|kernel|device]\n"
               "                       [--sort=time|count|p99] [--pid=P] [--job=J] [--rank=R]\n"
               "                       [--label=L] [-n ROWS] [--once] [--json] [-c SOCKET]\n"
               "Show the GPU work of the node's processes, as the daemon aggregates it:\n"
               "a header with the node's totals and a busy bar per GPU, then a table by\n"
               "process, by kernel name or by device.  A user who is not an operator (root,\n"
               "the daemon's user, its control_group) sees their own processes only, and\n"
               "totals over them; the GPU lines stay the node's.\n"
               "\n"
               "On a terminal it is full screen and refreshes every S seconds (default 2);\n"
               "keys: p k d group by process, kernel, device; t c 9 sort by GPU time,\n"
               "count, p99 duration; space refreshes; q quits.  When stdout is not a\n"
               "terminal, or with --once, it prints one plain snapshot (with --interval,\n"
               "one every S seconds).  --json prints the daemon's answer, with full kernel\n"
               "names.  Kernel names are demangled, and shortened to fit the width.\n"
               "A process whose records running work has held for a second or more gets\n"
               "a line under its row: \"held 3.02s by kernel NAME, 11.2MiB behind it\".  A\n"
               "kernel still running counts as busy on its GPU until now (CUPTI hands its\n"
               "record over only when it ends).  A process that uses NCCL gets a line per\n"
               "communicator: \"NCCL pg0 (0x...) rank 0 of 2: last completed AllReduce #2;\n"
               "in flight Broadcast #2 for 212s\" (NCCL's sequence numbers, per function).\n"
               "\n"
               "  -i, --interval=S      refresh period in seconds (default 2)\n"
               "  -b, --by=WHAT         process (default), kernel or device\n"
               "  -s, --sort=KEY        time (default), count or p99\n"
               "  -p, --pid=P           only process P\n"
               "  -j, --job=J           only job J (SLURM_JOB_ID or TORCHELASTIC_RUN_ID)\n"
               "  -r, --rank=R          only rank R\n"
               "  -L, --label=L         only CUPTIMON_LABEL L\n"
               "  -n, --rows=N          rows of the table (default: what fits; 20 plain)\n"
               "  -1, --once            one plain snapshot, then exit\n"
               "  -J, --json            print the daemon's JSON, then exit\n"
               "  -c, --control-socket=PATH  the daemon's control socket\n"
               "  -h, --help            show this help\n");
}

int cuptimon__cli_top(const struct cuptimon_ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {{"interval", required_argument, NULL, 'i'},
                                         {"by", required_argument, NULL, 'b'},
                                         {"sort", required_argument, NULL, 's'},
                                         {"pid", required_argument, NULL, 'p'},
                                         {"job", required_argument, NULL, 'j'},
                                         {"rank", required_argument, NULL, 'r'},
                                         {"label", required_argument, NULL, 'L'},
                                         {"rows", required_argument, NULL, 'n'},
                                         {"once", no_argument, NULL, '1'},
                                         {"json", no_argument, NULL, 'J'},
                                         {"control-socket", required_argument, NULL, 'c'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    /* A copy: -c here names another socket for this command only. */
    struct cuptimon_ctl c = *ctl;
    struct view v = {.interval = 2};
    int opt, once = 0, json = 0, interval_given = 0;
    long rows = 0;
    char *end;

    optind = 0; /* glibc: 0 re-initialises getopt after the global options */
    while ((opt = getopt_long(argc, argv, "i:b:s:p:j:r:L:n:1Jc:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'i':
            v.interval = strtod(optarg, &end);
            if (*end || !(v.interval >= 0.1 && v.interval <= 3600)) {
                fprintf(stderr, "cuptimonctl top: --interval '%s' must be seconds in 0.1..3600\n",
                        optarg);
                return 2;
            }
            interval_given = 1;
            break;
        case 'b':
            for (v.by = 0; v.by < 3 && strcmp(optarg, by_names[v.by]) != 0; v.by++)
                ;
            if (v.by == 3) {
                fprintf(stderr, "cuptimonctl top: --by '%s' must be process, kernel or device\n",
                        optarg);
                return 2;
            }
            break;
        case 's':
            for (v.sort = 0; v.sort < 3 && strcmp(optarg, sort_names[v.sort]) != 0; v.sort++)
                ;
            if (v.sort == 3) {
                fprintf(stderr, "cuptimonctl top: --sort '%s' must be time, count or p99\n",
                        optarg);
                return 2;
            }
            break;
        case 'p':
            v.pid = strtoll(optarg, &end, 10);
            if (*end || v.pid <= 0) {
                fprintf(stderr, "cuptimonctl top: --pid '%s' is not a process id\n", optarg);
                return 2;
            }
            break;
        case 'j': v.job = optarg; break;
        case 'r': v.rank = optarg; break;
        case 'L': v.label = optarg; break;
        case 'n':
            rows = strtol(optarg, &end, 10);
            if (*end || rows < 1 || rows > 1000) {
                fprintf(stderr, "cuptimonctl top: --rows '%s' must be 1..1000\n", optarg);
                return 2;
            }
            break;
        case '1': once = 1; break;
        case 'J': json = 1; break;
        case 'c':
            if (cuptimon__ctl_set_path(&c, optarg, "cuptimonctl top") < 0)
                return 2;
            break;
        case 'h': top_usage(stdout); return 0;
        default: fprintf(stderr, "Try 'cuptimonctl top --help' for more information.\n"); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cuptimonctl top: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    {
        char err[600];
        if (cuptimon__ctl_resolve(&c, err, sizeof(err)) < 0) {
            fprintf(stderr, "cuptimonctl: %s\n", err);
            return 1;
        }
    }
    v.tty = !once && !json && isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
    if (v.tty)
        return run_screen(&c, &v);

    /* Plain: one snapshot, or one per interval when asked for. */
    term_size(&v);
    install(SIGINT, on_signal);
    install(SIGTERM, on_signal);
    for (int first = 1; !got_quit; first = 0) {
        char err[600];
        int refused;
        json_object *req = top_request(&v, rows ? (unsigned)rows : json ? 1000 : 20);
        json_object *t = cuptimon__ctl_call(&c, req, err, sizeof(err), &refused);
        json_object_put(req);
        if (t == NULL) {
            fprintf(stderr, "cuptimonctl top: %s\n", err);
            return 1;
        }
        if (json) {
            printf("%s\n", json_object_to_json_string_ext(t, JSON_C_TO_STRING_PRETTY |
                                                                 JSON_C_TO_STRING_NOSLASHESCAPE));
            json_object_put(t);
            return 0;
        } else {
            struct out o = {0};
            if (!first)
                out_printf(&o, "\n");
            draw_header(&o, &v, t, NULL);
            draw_table(&o, &v, t, rows ? (size_t)rows : 1000);
            if (o.p != NULL)
                fputs(o.p, stdout);
            free(o.p);
        }
        json_object_put(t);
        fflush(stdout);
        if (once || !interval_given)
            break;
        struct timespec ts = {.tv_sec = (time_t)v.interval,
                              .tv_nsec = (long)((v.interval - (double)(time_t)v.interval) * 1e9)};
        nanosleep(&ts, NULL);
    }
    return 0;
}

int cuptimon__cli_metrics(const struct cuptimon_ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {{"control-socket", required_argument, NULL, 'c'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    /* A copy: -c here names another socket for this command only. */
    struct cuptimon_ctl c = *ctl;
    char err[600];
    int opt;
    json_object *req, *r, *text;

    optind = 0; /* glibc: 0 re-initialises getopt after the global options */
    while ((opt = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        if (opt == 'c') {
            if (cuptimon__ctl_set_path(&c, optarg, "cuptimonctl metrics") < 0)
                return 2;
        } else if (opt == 'h') {
            printf("Usage: cuptimonctl metrics [-c SOCKET]\n"
                   "Print the daemon's live aggregates in the Prometheus text exposition\n"
                   "format (cuptimon_kernel_seconds_total, cuptimon_gpu_busy_ratio, ...).\n"
                   "A user who is not an operator gets the series of their own processes\n"
                   "and the node's per-GPU series.  For\n"
                   "node_exporter's textfile collector, start cuptimond with --metrics-file (or "
                   "set metrics_file in cuptimond.conf).\n");
            return 0;
        } else {
            fprintf(stderr, "Try 'cuptimonctl metrics --help' for more information.\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cuptimonctl metrics: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (cuptimon__ctl_resolve(&c, err, sizeof(err)) < 0) {
        fprintf(stderr, "cuptimonctl: %s\n", err);
        return 1;
    }
    req = json_object_new_object();
    json_object_object_add(req, "op", json_object_new_string("metrics"));
    r = cuptimon__ctl_call(&c, req, err, sizeof(err), NULL);
    json_object_put(req);
    if (r == NULL) {
        fprintf(stderr, "cuptimonctl metrics: %s\n", err);
        return 1;
    }
    if (!json_object_object_get_ex(r, "text", &text) ||
        !json_object_is_type(text, json_type_string)) {
        fprintf(stderr, "cuptimonctl metrics: the daemon's answer has no \"text\": %.200s\n",
                json_object_to_json_string(r));
        json_object_put(r);
        return 1;
    }
    fputs(json_object_get_string(text), stdout);
    json_object_put(r);
    return fflush(stdout) == 0 ? 0 : 1;
}
