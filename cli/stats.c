/*
 * cuptimonctl stats ARCHIVE_DIR [--from T] [--to T] [--pid P] [--label L]
 *                  [--report LIST] [--format table|csv|json] [-o FILE]
 * cuptimonctl stats --window ID [...]
 *
 * The tables `nsys stats` gives, from the always-on archive, offline: per
 * kernel name, per memory operation (time and bytes), per runtime/driver
 * call, per process.  The archive is read as `decode` reads it, through
 * the same code (cli/read.h: the options that choose what is read, the
 * handling of damage, each chunk's layouts, --from passing over the chunks
 * completed more than a second before it), and the events go to the
 * statistics engine (archive/stats.h) instead of a trace.  --window asks
 * the daemon for an ended window's processes and times and reads their
 * archive over the window's range.
 *
 * The table and CSV writers here also print the end-window reply's top
 * kernels (cli/main.c), from the rows the daemon sends.
 */
#include "config.h"

#include "cli.h"
#include "read.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "archive/archive.h"
#include "archive/decode.h"
#include "archive/demangle.h"
#include "archive/gpm.h"
#include "archive/json-get.h"
#include "archive/session.h"
#include "archive/stats.h"
#include "archive/strtab.h"
#include "archive/utf8.h"
#include "ctl.h"
#include "cuptimon-proto.h"

#define PROG "cuptimonctl stats"

/* --report gpu: the GPU metrics sessions (archive/gpm.h), beside the
 * engine's reports (a bit none of them uses). */
#define REPORT_GPU (1u << 16)

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: cuptimonctl stats ARCHIVE_DIR [OPTION]...\n"
            "  or:  cuptimonctl stats --window=ID [OPTION]...\n"
            "Summary tables of the always-on archive, as nsys stats gives them: GPU time\n"
            "per kernel name, per memory operation (time and bytes), per runtime/driver\n"
            "call, and per process; offline, no daemon needed (but for --window).\n"
            "\n"
            "ARCHIVE_DIR is one session directory (the one holding meta.json) or an output\n"
            "root holding many; every session found is counted.\n"
            "\n"
            "      --report=LIST      reports, comma-separated: kernels, memory, api,\n"
            "                         processes, nccl, gpu, or all (default\n"
            "                         kernels,memory,processes)\n"
            "      --format=FMT       table (default: aligned for a terminal), csv (one\n"
            "                         header row per report, the report's name first,\n"
            "                         times in ns, sizes in bytes) or json\n"
            "  -o, --output=FILE      write to FILE (default: standard output); a regular\n"
            "                         FILE appears complete or not at all\n"
            "      --from=T           count only events that end at or after T\n"
            "      --to=T             count only events that start before T\n"
            "      --pid=P            count only the sessions of process P (repeatable)\n"
            "      --label=L          count only the sessions labelled L (CUPTIMON_LABEL;\n"
            "                         repeatable; with --pid: either matches)\n"
            "      --window=ID        the processes and the time range of trace window ID\n"
            "                         (asks the daemon; the window must have ended): its\n"
            "                         processes' archive from its start to its end, which\n"
            "                         holds its API calls; --from/--to/--pid/--label narrow\n"
            "      --top=N            at most N rows per report (default: all)\n"
            "      --exact-limit=N    values kept for exact medians (default %" PRIu64 ",\n"
            "                         8 bytes each); past it, the rows with the most values\n"
            "                         take their medians from a histogram, within %.2f%%\n"
            "                         (marked ~); 0: every median from a histogram\n"
            "      --read-all         with --from: read every chunk, also those completed\n"
            "                         before it (as decode --read-all)\n"
            "  -q, --quiet            no progress line (shown only when standard error is\n"
            "                         a terminal)\n"
            "  -h, --help             show this help\n"
            "\n"
            "T is Unix time, as decode takes it: an integer of 10^12 or more is\n"
            "nanoseconds, a smaller one or one with a decimal point seconds; a suffix\n"
            "ns, us, ms or s makes the unit explicit.  An event that overlaps the range\n"
            "counts whole.  Only records with a complete time count (a record CUPTI handed\n"
            "over unfinished at a forced flush has no duration); they and the records\n"
            "CUPTI dropped are counted under the tables.  Names are demangled; on a\n"
            "terminal, long names are shortened in the middle to fit its width.\n"
            "\n"
            "The nccl report: per NCCL function and communicator, the operations the\n"
            "shim recorded as NCCL's profiler plugin: count, bytes (nccl-tests' size: the\n"
            "larger of the send and receive buffers), time (the kernel's, by the GPU's\n"
            "globaltimer, else NCCL's start to its completion), algorithm bandwidth\n"
            "(bytes / time) and bus bandwidth by nccl-tests' formulas (all-reduce\n"
            "2(n-1)/n, all-gather, reduce-scatter and all-to-all (n-1)/n, others 1).\n"
            "\n"
            "The gpu report: per GPU and metric of cuptimond's GPU metrics sessions, the\n"
            "samples with a value, the time they cover (clipped to --from/--to), and\n"
            "the mean and median weighted by that time, min and max.  It covers every\n"
            "GPU, or with --pid/--label/--window the GPUs the chosen processes' work\n"
            "ran on: the node's GPUs, by the UUID each process recorded for its device\n"
            "ordinals (CUDA_VISIBLE_DEVICES renumbers them), else by the ordinal.\n"
            "\n"
            "Exit status: 0 on success (also when damaged chunks were skipped: they are\n"
            "reported on standard error), 1 on failure, 2 on bad usage.\n",
            CUPTIMON_STATS_EXACT_DEFAULT, CUPTIMON_STATS_MED_ERROR * 100);
}

/* ---- tables --------------------------------------------------------------- */

enum cfmt {
    F_NUM,  /* an integer, thousands separated in a table */
    F_ID,   /* an integer as is (a pid) */
    F_DEC,  /* one decimal */
    F_MED,  /* one decimal, ~ in a table when the row's med_exact is false */
    F_PCT,  /* a percentage, one decimal */
    F_RANK, /* an integer, or nothing (null) */
    F_STR,  /* text, or nothing (null) */
    F_TIME, /* Unix ns: local time in a table */
    F_VAL,  /* a measured value (double): in a table, two decimals, or an SI prefix */
    F_VMED, /* F_VAL, ~ in a table when the row's med_exact is false */
    F_SECS, /* ns: seconds with three decimals in a table */
};

struct col {
    const char *key;
    const char *head; /* table */
    const char *csv;  /* CSV header */
    enum cfmt f;
};

/* A column whose table and CSV headers are the same. */
#define COL(key, head, f)                                                                          \
    {                                                                                              \
        key, head, head, f                                                                         \
    }

/* The columns of a distribution, from the keys archive/stats.h gives its
 * rows: the total (headed total_head), the count, and avg, med, min, max
 * and stddev, all in unit ("ns", "bytes"); the time reports first give
 * their share of the time. */
#define DIST_COLS(total_head, unit, count, countkey)                                               \
    COL("total_" unit, total_head " (" unit ")", F_NUM), COL(countkey, count, F_NUM),              \
        COL("avg_" unit, "Avg (" unit ")", F_DEC), COL("med_" unit, "Med (" unit ")", F_MED),      \
        COL("min_" unit, "Min (" unit ")", F_NUM), COL("max_" unit, "Max (" unit ")", F_NUM),      \
        COL("stddev_" unit, "StdDev (" unit ")", F_DEC)
#define TIME_COLS(count, countkey)                                                                 \
    COL("time_pct", "Time (%)", F_PCT), DIST_COLS("Total Time", "ns", count, countkey)

static const struct col kernel_cols[] = {TIME_COLS("Instances", "instances"),
                                         COL("name", "Name", F_STR)};
static const struct col memtime_cols[] = {TIME_COLS("Count", "count"),
                                          COL("operation", "Operation", F_STR)};
static const struct col api_cols[] = {TIME_COLS("Num Calls", "calls"), COL("name", "Name", F_STR)};
static const struct col membytes_cols[] = {DIST_COLS("Total", "bytes", "Count", "count"),
                                           COL("operation", "Operation", F_STR)};
static const struct col proc_cols[] = {COL("pid", "PID", F_ID),
                                       COL("rank", "Rank", F_RANK),
                                       COL("label", "Label", F_STR),
                                       COL("hostname", "Host", F_STR),
                                       COL("gpu_busy_ns", "GPU Busy (ns)", F_NUM),
                                       COL("busy_pct", "Busy (%)", F_PCT),
                                       COL("kernels", "Kernels", F_NUM),
                                       {"first_unix_ns", "First", "First (Unix ns)", F_TIME},
                                       {"last_unix_ns", "Last", "Last (Unix ns)", F_TIME}};

static const struct col nccl_cols[] = {COL("function", "Function", F_STR),
                                       COL("communicator", "Communicator", F_STR),
                                       COL("comm_id", "Comm Id", F_STR),
                                       COL("ranks", "Ranks", F_NUM),
                                       COL("count", "Count", F_NUM),
                                       COL("total_bytes", "Total (bytes)", F_NUM),
                                       COL("total_ns", "Total Time (ns)", F_NUM),
                                       COL("avg_ns", "Avg (ns)", F_DEC),
                                       COL("algbw_gbps", "AlgBW (GB/s)", F_DEC),
                                       COL("busbw_gbps", "BusBW (GB/s)", F_DEC)};

static const struct col gpu_cols[] = {
    COL("device", "Device", F_ID),    COL("name", "GPU", F_STR),
    COL("label", "Metric", F_STR),    COL("unit", "Unit", F_STR),
    COL("samples", "Samples", F_NUM), {"covered_ns", "Covered (s)", "Covered (ns)", F_SECS},
    COL("mean", "Mean", F_VAL),       COL("med", "Med", F_VMED),
    COL("min", "Min", F_VAL),         COL("max", "Max", F_VAL)};

static const struct col *report_cols(enum cuptimon_stats_report r, size_t *n)
{
#define N(a) (*n = sizeof(a) / sizeof((a)[0]), (a))
    switch (r) {
    case CUPTIMON_STATS_KERNELS: return N(kernel_cols);
    case CUPTIMON_STATS_MEMORY_TIME: return N(memtime_cols);
    case CUPTIMON_STATS_MEMORY_BYTES: return N(membytes_cols);
    case CUPTIMON_STATS_API: return N(api_cols);
    case CUPTIMON_STATS_NCCL: return N(nccl_cols);
    default: return N(proc_cols);
    }
#undef N
}

/* A middle text column (label, host) is shortened to this on a terminal;
 * the last one (a name) to what is left of the terminal's width, but not
 * below NAME_MIN. */
#define MID_MAX  24
#define NAME_MIN 20

/* "1234567" -> "1,234,567" into out. */
static void thousands(char *out, size_t len, uint64_t v, const char *frac)
{
    char d[32];
    int n = snprintf(d, sizeof d, "%" PRIu64, v), o = 0;

    for (int i = 0; i < n && (size_t)o + 2 < len; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = d[i];
    }
    out[o] = '\0';
    if (frac)
        snprintf(out + o, len - (size_t)o, "%s", frac);
}

static void one_decimal(char *out, size_t len, double v, int table)
{
    char f[8];
    uint64_t ip;
    unsigned tenth;

    if (!table || !(v >= 0) || v >= 1e19) {
        snprintf(out, len, "%.1f", v);
        return;
    }
    ip = (uint64_t)(v + 0.05);
    tenth = (unsigned)((v + 0.05 - (double)ip) * 10);
    if (tenth > 9)
        tenth = 9;
    snprintf(f, sizeof f, ".%u", tenth);
    thousands(out, len, ip, f);
}

/* Columns s (well-formed UTF-8) takes on a terminal. */
static size_t text_width(const char *s)
{
    size_t n = strlen(s), w = 0;

    for (size_t i = 0; i < n;) {
        size_t l = cuptimon__utf8_len((const unsigned char *)s + i, n - i);
        if (l == 0)
            l = 1;
        w += (size_t)cuptimon__ucs_width(cuptimon__utf8_cp((const unsigned char *)s + i, l));
        i += l;
    }
    return w;
}

/* s shortened in the middle to at most max columns ("head...tail"), or s
 * itself when it fits.  Malloc'd; s is freed when replaced. */
static char *elide(char *s, size_t max)
{
    size_t n = strlen(s), k = 0, hw = 0, tw = 0, head, tail, h = 0, t = n;
    size_t *off, *wid;
    char *out;

    if (text_width(s) <= max || max < 5)
        return s;
    off = malloc((n + 1) * sizeof(*off));
    wid = malloc((n + 1) * sizeof(*wid));
    out = malloc(n + 4);
    if (off == NULL || wid == NULL || out == NULL) {
        free(off);
        free(wid);
        free(out);
        return s;
    }
    for (size_t i = 0; i < n; k++) {
        size_t l = cuptimon__utf8_len((const unsigned char *)s + i, n - i);
        if (l == 0)
            l = 1;
        off[k] = i;
        wid[k] = (size_t)cuptimon__ucs_width(cuptimon__utf8_cp((const unsigned char *)s + i, l));
        i += l;
    }
    off[k] = n;
    head = (max - 3 + 1) / 2;
    tail = max - 3 - head;
    /* Whole characters from the front, then from the back; a zero-width
     * one stays with the character before it. */
    size_t a = 0, b = k;
    while (a < k && hw + wid[a] <= head) {
        hw += wid[a];
        a++;
    }
    while (a > 0 && a < k && wid[a] == 0)
        a--; /* never split a character from its combining marks */
    h = off[a];
    tail = max - 3 - hw; /* what the head left: a wide character may not have fit there */
    while (b > a && tw + wid[b - 1] <= tail) {
        tw += wid[b - 1];
        b--;
    }
    while (b < k && wid[b] == 0)
        b++;
    t = off[b];
    memcpy(out, s, h);
    memcpy(out + h, "...", 3);
    memcpy(out + h + 3, s + t, n - t);
    out[h + 3 + n - t] = '\0';
    free(off);
    free(wid);
    free(s);
    return out;
}

/* One cell, malloc'd ("" for a missing value). */
static char *cell(json_object *row, const struct col *c, int table)
{
    json_object *v = cuptimon__json_get(row, c->key);
    char buf[64];

    if (v == NULL)
        return strdup(table && c->f != F_NUM ? "-" : "");
    switch (c->f) {
    case F_NUM:
        if (table)
            thousands(buf, sizeof buf, json_object_get_uint64(v), NULL);
        else
            snprintf(buf, sizeof buf, "%" PRIu64, json_object_get_uint64(v));
        break;
    case F_ID:
    case F_RANK: snprintf(buf, sizeof buf, "%" PRId64, json_object_get_int64(v)); break;
    case F_MED:
    case F_DEC:
        one_decimal(buf + 1, sizeof buf - 1, json_object_get_double(v), table);
        if (c->f == F_MED && table && !cuptimon__json_bool(row, "med_exact", 1)) {
            buf[0] = '~';
            return strdup(buf);
        }
        return strdup(buf + 1);
    case F_PCT: snprintf(buf, sizeof buf, "%.1f", json_object_get_double(v)); break;
    case F_VAL:
    case F_VMED: {
        double d = json_object_get_double(v);
        /* In a table, rates in B/s reach 10^12: from 10,000 on, an SI
         * prefix with four significant digits ("1.290T" B/s). */
        static const char si[] = "kMGTPE";
        int e = 0;
        if (!table) {
            snprintf(buf + 1, sizeof buf - 1, "%.10g", d);
        } else if (fabs(d) < 10000) {
            snprintf(buf + 1, sizeof buf - 1, "%.2f", d);
        } else {
            while (fabs(d) >= 1000 && e < 6) {
                d /= 1000;
                e++;
            }
            if (fabs(d) >= 1000)
                snprintf(buf + 1, sizeof buf - 1, "%.3e", d * 1e18);
            else
                snprintf(buf + 1, sizeof buf - 1, "%.*f%c",
                         fabs(d) < 10    ? 3
                         : fabs(d) < 100 ? 2
                                         : 1,
                         d, si[e - 1]);
        }
        if (c->f == F_VMED && table && !cuptimon__json_bool(row, "med_exact", 1)) {
            buf[0] = '~';
            return strdup(buf);
        }
        return strdup(buf + 1);
    }
    case F_SECS: {
        uint64_t ns = json_object_get_uint64(v);
        if (table)
            snprintf(buf, sizeof buf, "%" PRIu64 ".%03u", ns / 1000000000u,
                     (unsigned)(ns % 1000000000u / 1000000u));
        else
            snprintf(buf, sizeof buf, "%" PRIu64, ns);
        break;
    }
    case F_TIME: {
        uint64_t ns = json_object_get_uint64(v);
        if (!table) {
            snprintf(buf, sizeof buf, "%" PRIu64, ns);
        } else if (ns == 0) {
            snprintf(buf, sizeof buf, "-");
        } else {
            time_t s = (time_t)(ns / 1000000000u);
            struct tm tm;
            size_t k = 0;
            if (localtime_r(&s, &tm) != NULL)
                k = strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
            snprintf(buf + k, sizeof buf - k, ".%03u", (unsigned)(ns % 1000000000u / 1000000u));
        }
        break;
    }
    case F_STR:
        /* Text for a terminal: its control characters replaced too. */
        return table ? cuptimon__stats_clean_text(json_object_get_string(v), 1)
                     : strdup(json_object_get_string(v));
    }
    return strdup(buf);
}

/* A CSV field: quoted when it holds a comma, a quote or a line break. */
static void csv_field(FILE *f, const char *s)
{
    if (strpbrk(s, ",\"\r\n") == NULL) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* Prints rows with the columns cols: a table, or CSV whose lines start with
 * name. */
static int print_rows(FILE *f, const char *name, const struct col *cols, size_t ncol,
                      struct json_object *rows, int csv, unsigned width, const char *indent)
{
    size_t nrow = rows ? json_object_array_length(rows) : 0;
    char **cells = calloc((nrow + 1) * ncol, sizeof(*cells));
    size_t *w = calloc(ncol, sizeof(*w));
    int rc = 0;

    if (cells == NULL || w == NULL) {
        free(cells);
        free(w);
        return -ENOMEM;
    }
    for (size_t i = 0; i < nrow; i++)
        for (size_t c = 0; c < ncol; c++) {
            char **p = &cells[i * ncol + c];
            *p = cell(json_object_array_get_idx(rows, i), &cols[c], !csv);
            if (*p == NULL) {
                rc = -ENOMEM;
                goto out;
            }
        }
    if (csv) {
        fputs("Report", f);
        for (size_t c = 0; c < ncol; c++) {
            fputc(',', f);
            csv_field(f, cols[c].csv);
        }
        fputc('\n', f);
        for (size_t i = 0; i < nrow; i++) {
            fputs(name, f);
            for (size_t c = 0; c < ncol; c++) {
                fputc(',', f);
                csv_field(f, cells[i * ncol + c]);
            }
            fputc('\n', f);
        }
        goto out;
    }
    /* On a terminal, text columns are shortened: those in the middle to
     * MID_MAX, the last to what the others leave of the width. */
    for (size_t c = 0; c < ncol; c++) {
        w[c] = text_width(cols[c].head);
        for (size_t i = 0; i < nrow; i++) {
            char **p = &cells[i * ncol + c];
            if (width && cols[c].f == F_STR && c + 1 < ncol)
                *p = elide(*p, MID_MAX);
            size_t tw = text_width(*p);
            if (tw > w[c])
                w[c] = tw;
        }
    }
    if (width && cols[ncol - 1].f == F_STR) {
        size_t used = strlen(indent);
        for (size_t c = 0; c + 1 < ncol; c++)
            used += w[c] + 2;
        size_t room = width > used + NAME_MIN ? width - used : NAME_MIN;
        w[ncol - 1] = text_width(cols[ncol - 1].head);
        for (size_t i = 0; i < nrow; i++) {
            char **p = &cells[i * ncol + ncol - 1];
            *p = elide(*p, room);
            size_t tw = text_width(*p);
            if (tw > w[ncol - 1])
                w[ncol - 1] = tw;
        }
    }
    for (size_t line = 0; line < nrow + 2; line++) {
        fputs(indent, f);
        for (size_t c = 0; c < ncol; c++) {
            const char *s = line == 0   ? cols[c].head
                            : line == 1 ? NULL
                                        : cells[(line - 2) * ncol + c];
            size_t tw = s ? text_width(s) : w[c], pad = w[c] > tw ? w[c] - tw : 0;
            int left = cols[c].f == F_STR, last = c + 1 == ncol;
            if (c > 0)
                fputs("  ", f);
            if (s == NULL) {
                for (size_t k = 0; k < w[c]; k++)
                    fputc('-', f);
                continue;
            }
            if (!left)
                fprintf(f, "%*s", (int)pad, "");
            fputs(s, f);
            if (left && !last)
                fprintf(f, "%*s", (int)pad, "");
        }
        fputc('\n', f);
    }
out:
    for (size_t i = 0; i < nrow * ncol; i++)
        free(cells[i]);
    free(cells);
    free(w);
    return rc;
}

int cuptimon__cli_stats_print(FILE *f, enum cuptimon_stats_report r, struct json_object *rows,
                              int csv, unsigned width, const char *indent)
{
    size_t ncol;
    const struct col *cols = report_cols(r, &ncol);

    return print_rows(f, cuptimon__stats_report_name(r), cols, ncol, rows, csv, width, indent);
}

unsigned cuptimon__cli_term_width(FILE *f)
{
    struct winsize ws;
    const char *cols = getenv("COLUMNS");

    if (!isatty(fileno(f)))
        return 0;
    if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    if (cols != NULL && atoi(cols) > 0)
        return (unsigned)atoi(cols);
    return 80;
}

/* ---- reading the archive ------------------------------------------------------ */

struct ssess {
    const char *dir;
    struct cuptimon_archive_session as;
    struct cuptimon_decode_stats dec;
    struct cuptimon_archive_stats ast;
    uint64_t chunks, kept;
    int skip; /* not chosen by --pid/--label, or a GPU metrics session */
    int gpm;  /* a GPU metrics session: the gpu report's, never counted as records */
    struct cuptimon_gpm_ordinals devs; /* the devices its counted GPU work ran on */
};

/* Said after a session --window cannot open for want of permission. */
#define WINDOW_EACCES                                                                              \
    " (--window reads the window's processes' archive, which only root, the daemon's user and "    \
    "its group may read)"

/* meta.json into s; with report, says what makes records undecodable.
 * Shorter than decode's session_meta() on purpose, not a copy to merge:
 * decode gives the reader of a trace the account of each kind, while here
 * one line says why and count_one() one line how many bytes are in no
 * table. */
static void session_meta(struct ssess *s, const char *text, int report)
{
    const struct cuptimon_archive_session *as = &s->as;
    int rc = cuptimon__archive_session_meta(&s->as, text);

    if (!report)
        return;
    if (rc == -EINVAL && text != NULL)
        fprintf(stderr,
                PROG ": %s/meta.json: not a JSON object, and no member could be salvaged "
                     "from it; the session's records are counted as undecodable\n",
                s->dir);
    else if (rc == -EBADMSG)
        fprintf(stderr,
                PROG ": %s/meta.json: damaged (not valid JSON); what could be salvaged is used\n",
                s->dir);
    if (as->layout_rc == -EPROTONOSUPPORT && rc != -EINVAL)
        fprintf(stderr,
                PROG ": %s: CUPTI API version %u is not one this build decodes (it decodes "
                     "%s); its records are counted as undecodable\n",
                s->dir, as->info.cupti_version, cuptimon__cupti_supported());
    else if (as->layout_rc > 0 && as->layout.udr_error[0] != '\0')
        fprintf(stderr, PROG ": %s: the producer's user-defined record layouts: %s\n", s->dir,
                as->layout.udr_error);
    else if (as->layout_rc > 0)
        fprintf(stderr,
                PROG ": %s: some of the producer's record sizes are not those of its CUPTI "
                     "release; those records are counted as undecodable, not read\n",
                s->dir);
}

struct range {
    uint64_t from, to, skip_before;
};

/* Counts session s into the engine: 0, 1 when it could not be opened
 * (reported, passed over), or -ENOMEM. */
static int count_one(struct ssess *s, struct cuptimon_stats *st, struct cuptimon_demangler *dm,
                     const struct range *rg, struct cuptimon_cli_progress *pg, size_t idx, size_t n,
                     int window)
{
    struct cuptimon_archive_reader *r;
    struct cuptimon_archive_chunk ch;
    struct cuptimon_walk w;
    int proc, rc;

    if (cuptimon__cli_read_open(PROG, s->dir, window ? WINDOW_EACCES : NULL, rg->skip_before, &r) <
        0)
        return 1;
    session_meta(s, cuptimon__archive_meta(r), 1);
    if (cuptimon__cli_read_strings(PROG, s->dir, &s->as, r) < 0) {
        cuptimon__archive_close(r);
        return -ENOMEM;
    }
    proc = cuptimon__stats_add_process(st, &s->as.info, s->as.names, dm);
    if (proc < 0) {
        cuptimon__archive_close(r);
        return -ENOMEM;
    }
    while ((rc = cuptimon__cli_read_next(r, &s->as, &s->dec, &ch, &w)) == 1) {
        struct cuptimon_clock clk = {ch.hdr.cupti_ts, ch.hdr.unix_ns};
        struct cuptimon_ev ev;

        s->chunks++;
        /* The drops a buffer's header counts happened before it was
         * completed: those of the buffers completed in the range (and the
         * margin after it, as records may end after --to). */
        if (ch.hdr.unix_ns >= rg->from &&
            (rg->to == 0 || ch.hdr.unix_ns < rg->to + CUPTIMON_CLI_SKIP_MARGIN_NS))
            cuptimon__stats_dropped(st, proc, ch.hdr.dropped);
        pg->records += ch.hdr.records;
        cuptimon__cli_progress_show(pg, "stats", idx + 1, n, 0);
        while (cuptimon__walk_next(&w, &ev)) {
            if ((rg->from || rg->to) && !cuptimon__ev_in_range(&ev, &clk, rg->from, rg->to))
                continue;
            s->kept++;
            if (ev.type == CUPTIMON_EV_KERNEL || ev.type == CUPTIMON_EV_MEMCPY ||
                ev.type == CUPTIMON_EV_MEMCPY_P2P || ev.type == CUPTIMON_EV_MEMSET)
                cuptimon__gpm_ordinals_add(&s->devs, ev.device_id);
            cuptimon__stats_event(st, proc, &ev, &clk);
        }
    }
    cuptimon__cli_read_close(PROG, s->dir, r, rc, &s->ast);
    cuptimon__cli_read_damage(PROG, s->dir, &s->ast);
    if (s->dec.undecodable_bytes)
        fprintf(stderr, PROG ": %s: %" PRIu64 " byte(s) of records not decoded (in no table)\n",
                s->dir, s->dec.undecodable_bytes);
    return 0;
}

/* ---- the gpu report ----------------------------------------------------------- */

struct gpu_walk {
    struct cuptimon_gpm_stats *gs;
    const struct range *rg;
};

static int gpu_sample(void *ud, const struct cuptimon_gpm_meta *m,
                      const struct cuptimon_gpm_sample *s)
{
    const struct gpu_walk *gw = ud;

    (void)m;
    return cuptimon__gpm_stats_sample(gw->gs, s, gw->rg->from, gw->rg->to);
}

/* Adds GPU metrics session dir to gs when its device is in devs: 0; 1 when
 * it could not be read (said, passed over); -ENOMEM. */
static int gpu_one(const char *dir, struct cuptimon_gpm_stats *gs, const struct range *rg,
                   const struct cuptimon_gpm_devset *devs, struct cuptimon_gpm_read_stats *gst,
                   int window)
{
    struct cuptimon_archive_reader *r;
    struct cuptimon_archive_stats ast;
    struct cuptimon_gpm_meta *m;
    struct gpu_walk gw = {gs, rg};
    char why[320];
    int rc;

    if (cuptimon__cli_read_open(PROG, dir, window ? WINDOW_EACCES : NULL, rg->skip_before, &r) < 0)
        return 1;
    if ((m = malloc(sizeof *m)) == NULL) {
        cuptimon__archive_close(r);
        return -ENOMEM;
    }
    if (cuptimon__gpm_meta_parse(cuptimon__archive_meta(r), m, why, sizeof why) < 0) {
        fprintf(stderr, PROG ": %s/meta.json: %s; its GPU metrics are left out\n", dir, why);
        cuptimon__archive_close(r);
        free(m);
        return 1;
    }
    if (!cuptimon__gpm_devset_has(devs, (uint32_t)m->ordinal, m->uuid)) {
        cuptimon__archive_close(r);
        free(m);
        return 0;
    }
    rc = cuptimon__gpm_stats_session(gs, m);
    if (rc == 0)
        rc = cuptimon__gpm_read_chunks(r, m, rg->from, rg->to, gpu_sample, &gw, gst);
    cuptimon__cli_read_close(PROG, dir, r, rc, &ast);
    cuptimon__cli_read_damage(PROG, dir, &ast);
    free(m);
    return rc == -ENOMEM ? rc : 0;
}

/* ---- output --------------------------------------------------------------------- */

static const char *const report_title[] = {
    [CUPTIMON_STATS_KERNELS] = "CUDA kernels by GPU time",
    [CUPTIMON_STATS_MEMORY_TIME] = "Memory operations by GPU time",
    [CUPTIMON_STATS_MEMORY_BYTES] = "Memory operations by size",
    [CUPTIMON_STATS_API] = "CUDA runtime and driver API calls by time",
    [CUPTIMON_STATS_PROCESSES] = "Processes (producer sessions)",
    [CUPTIMON_STATS_NCCL] = "NCCL operations by function and communicator",
};

/* The lines under the tables: what they do not hold, and why. */
static void notes(FILE *f, json_object *info, json_object *procs, unsigned reports)
{
    json_object *med = cuptimon__json_get(info, "medians");
    json_object *inc = cuptimon__json_get(info, "incomplete");
    json_object *oth = cuptimon__json_get(info, "other_rows");
    uint64_t v;

    if (cuptimon__json_uint(med, "approximate_medians", 0) > 0)
        fprintf(f,
                "~ marks a median read from a histogram, within %.2f%% of the true one: the "
                "selection holds more values than --exact-limit=%" PRIu64 " keeps.\n",
                cuptimon__json_double(med, "relative_error", 0) * 100,
                cuptimon__json_uint(med, "exact_limit", 0));
    if ((v = cuptimon__json_uint(med, "collapsed", 0)) > 0)
        fprintf(f,
                "%" PRIu64 " value(s) lay more than 2^32 times below their row's largest and "
                "share its histogram's lowest bin: a median among them is not within the bound.\n",
                v);
    if ((v = cuptimon__json_uint(inc, "kernel", 0) + cuptimon__json_uint(inc, "memory", 0) +
             cuptimon__json_uint(inc, "api", 0)) > 0)
        fprintf(f,
                "%" PRIu64 " record(s) without a complete time (handed over unfinished at a "
                "forced flush) are in no table.\n",
                v);
    if ((v = cuptimon__json_uint(info, "dropped_records", 0)) > 0)
        fprintf(f,
                "CUPTI dropped %" PRIu64 " record(s) (it had no buffer to write them to): "
                "they are in no table.\n",
                v);
    if ((v = cuptimon__json_uint(oth, "kernels", 0) + cuptimon__json_uint(oth, "api", 0)) > 0)
        fprintf(f,
                "The (other ...) rows hold %" PRIu64 " record(s) of the names past the first "
                "%" PRIu64 " of a report.\n",
                v, cuptimon__json_uint(oth, "names_max", 0));
    for (size_t i = 0; (reports & CUPTIMON_STATS_BIT(CUPTIMON_STATS_PROCESSES)) && procs &&
                       i < json_object_array_length(procs);
         i++) {
        json_object *p = json_object_array_get_idx(procs, i);
        if ((v = cuptimon__json_uint(p, "busy_uncertain_ns", 0)) > 0)
            fprintf(f,
                    "pid %" PRId64 ": its GPU busy time may be up to %" PRIu64 " ns more (work "
                    "that arrived long out of time order).\n",
                    cuptimon__json_int(p, "pid", 0), v);
    }
}

/* The gpu report: its rows (NULL: not asked for) and what they rest on. */
struct gpu_out {
    json_object *rows;
    uint64_t sessions; /* GPU metrics sessions found */
    int window;
};

static int samples_in(json_object *rows)
{
    for (size_t i = 0; rows && i < json_object_array_length(rows); i++)
        if (cuptimon__json_uint(json_object_array_get_idx(rows, i), "samples", 0) > 0)
            return 1;
    return 0;
}

static const char *gpu_none(const struct gpu_out *g)
{
    if (g->sessions == 0)
        return g->window ? "no GPU metrics session beside the window's processes' archive"
                         : "the archive holds no GPU metrics: cuptimond writes a GPU metrics "
                           "session per GPU while its sampler runs";
    return "no GPU metric sample in the selection";
}

/* counted: the processes' records were read (not so for the gpu report
 * alone): without them the engine's counts would be zeros that read as an
 * empty archive, so info leaves them out and says records_read false. */
static int write_output(FILE *f, struct cuptimon_stats *st, unsigned reports, int format,
                        size_t top, json_object *extra, unsigned width, const struct gpu_out *gpu,
                        int counted)
{
    json_object *rows[CUPTIMON_STATS_REPORTS] = {NULL},
                *info = counted ? cuptimon__stats_info_json(st) : json_object_new_object();
    int rc = 0;

    if (info == NULL)
        return -ENOMEM;
    json_object_object_add(info, "records_read", json_object_new_boolean(counted));
    for (unsigned r = 0; r < CUPTIMON_STATS_REPORTS; r++) {
        if (!(reports & CUPTIMON_STATS_BIT(r)))
            continue;
        rows[r] = cuptimon__stats_rows(st, r, top);
        if (rows[r] == NULL) {
            rc = -ENOMEM;
            goto out;
        }
    }
    if (format == 'j') {
        json_object *o = json_object_new_object();
        if (o == NULL) {
            rc = -ENOMEM;
            goto out;
        }
        for (unsigned r = 0; r < CUPTIMON_STATS_REPORTS; r++)
            if (rows[r] != NULL)
                json_object_object_add(o, cuptimon__stats_report_name(r), json_object_get(rows[r]));
        if (gpu->rows != NULL) {
            json_object_object_add(o, "gpu", json_object_get(gpu->rows));
            json_object_object_add(info, "gpu_metrics_sessions",
                                   json_object_new_uint64(gpu->sessions));
        }
        json_object_object_foreach(extra, key, val)
        {
            json_object_object_add(info, key, json_object_get(val));
        }
        json_object_object_add(o, "info", json_object_get(info));
        fputs(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                    JSON_C_TO_STRING_NOSLASHESCAPE),
              f);
        fputc('\n', f);
        json_object_put(o);
        goto out;
    }
    for (unsigned r = 0; r < CUPTIMON_STATS_REPORTS; r++) {
        if (rows[r] == NULL)
            continue;
        if (format == 't') {
            size_t n = json_object_array_length(rows[r]);
            fprintf(f, "%s%s:", r ? "\n" : "", report_title[r]);
            if (r == CUPTIMON_STATS_KERNELS) {
                char a[32], b[32], t[32];
                thousands(a, sizeof a, cuptimon__json_uint(info, "kernel_names", 0), NULL);
                thousands(b, sizeof b, cuptimon__json_uint(info, "kernels", 0), NULL);
                thousands(t, sizeof t, cuptimon__json_uint(info, "kernel_ns", 0), NULL);
                fprintf(f, " %s name(s), %s instance(s), %s ns", a, b, t);
            }
            if (top && n == top)
                fprintf(f, " (the first %zu rows)", top);
            fputs("\n\n", f);
            if (n == 0) {
                fputs(r == CUPTIMON_STATS_API
                          ? "  (no runtime or driver API records in the selection: the archive "
                            "holds them only\n  inside trace windows, 'cuptimonctl "
                            "begin-window')\n"
                          : "  (none in the selection)\n",
                      f);
                continue;
            }
        }
        rc = cuptimon__cli_stats_print(f, r, rows[r], format == 'c', width,
                                       format == 't' ? " " : "");
        if (rc < 0)
            goto out;
    }
    if (gpu->rows != NULL) {
        int any = samples_in(gpu->rows);
        if (format == 't') {
            fprintf(f, "%sGPU metrics by device (time-weighted):",
                    reports & CUPTIMON_STATS_ALL ? "\n" : "");
            fprintf(f, " %" PRIu64 " session(s)\n\n", gpu->sessions);
            if (!any) {
                fprintf(f, "  (%s)\n", gpu_none(gpu));
            } else {
                rc = print_rows(f, "gpu", gpu_cols, sizeof gpu_cols / sizeof gpu_cols[0], gpu->rows,
                                0, width, " ");
                if (rc < 0)
                    goto out;
            }
        } else if (format == 'c') {
            if (!any)
                fprintf(stderr, PROG ": gpu: %s\n", gpu_none(gpu));
            rc = print_rows(f, "gpu", gpu_cols, sizeof gpu_cols / sizeof gpu_cols[0], gpu->rows, 1,
                            0, "");
            if (rc < 0)
                goto out;
        }
    }
    if (format == 't') {
        /* Under the tables, after a blank line, when there is anything to say. */
        char *nb = NULL;
        size_t nlen = 0;
        FILE *m = open_memstream(&nb, &nlen);
        if (m == NULL) {
            rc = -ENOMEM;
            goto out;
        }
        notes(m, info, rows[CUPTIMON_STATS_PROCESSES], reports);
        if (fclose(m) != 0) {
            free(nb);
            rc = -ENOMEM;
            goto out;
        }
        if (nlen > 0)
            fprintf(f, "\n%s", nb);
        free(nb);
    } else {
        notes(stderr, info, rows[CUPTIMON_STATS_PROCESSES], reports);
    }
out:
    for (unsigned r = 0; r < CUPTIMON_STATS_REPORTS; r++)
        json_object_put(rows[r]);
    json_object_put(info);
    return rc;
}

/* ---- the command -------------------------------------------------------------------- */

/* --report=LIST into a mask of CUPTIMON_STATS_BIT()s; 0 after saying what
 * is wrong. */
static unsigned parse_reports(const char *list)
{
    unsigned m = 0;
    const char *p = list;

    for (;;) {
        size_t n = strcspn(p, ",");
        if (n == 0) {
            fprintf(stderr,
                    PROG ": --report: '%s' has an empty item (reports: kernels, memory, "
                         "api, processes, nccl, gpu, all)\n",
                    list);
            return 0;
        }
        if (n == 7 && strncmp(p, "kernels", n) == 0)
            m |= CUPTIMON_STATS_BIT(CUPTIMON_STATS_KERNELS);
        else if (n == 6 && strncmp(p, "memory", n) == 0)
            m |= CUPTIMON_STATS_BIT(CUPTIMON_STATS_MEMORY_TIME) |
                 CUPTIMON_STATS_BIT(CUPTIMON_STATS_MEMORY_BYTES);
        else if (n == 3 && strncmp(p, "api", n) == 0)
            m |= CUPTIMON_STATS_BIT(CUPTIMON_STATS_API);
        else if (n == 9 && strncmp(p, "processes", n) == 0)
            m |= CUPTIMON_STATS_BIT(CUPTIMON_STATS_PROCESSES);
        else if (n == 3 && strncmp(p, "gpu", n) == 0)
            m |= REPORT_GPU;
        else if (n == 4 && strncmp(p, "nccl", n) == 0)
            m |= CUPTIMON_STATS_BIT(CUPTIMON_STATS_NCCL);
        else if (n == 3 && strncmp(p, "all", n) == 0)
            m |= CUPTIMON_STATS_ALL | REPORT_GPU;
        else {
            fprintf(stderr,
                    PROG ": --report: '%.*s' is not a report (kernels, memory, api, processes, "
                         "nccl, gpu, all)\n",
                    (int)n, p);
            return 0;
        }
        if (p[n] == '\0')
            return m;
        p += n + 1;
    }
}

static int parse_count(const char *opt, const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end != '\0' || errno != 0 || v > max) {
        fprintf(stderr, PROG ": --%s: '%s' is not a count (0..%" PRIu64 ")\n", opt, s, max);
        return -1;
    }
    *out = v;
    return 0;
}

static int stats_main(struct cuptimon_ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'}, {"from", required_argument, NULL, 'F'},
        {"to", required_argument, NULL, 'T'},     {"pid", required_argument, NULL, 'p'},
        {"label", required_argument, NULL, 'l'},  {"report", required_argument, NULL, 'r'},
        {"format", required_argument, NULL, 'f'}, {"window", required_argument, NULL, 'w'},
        {"top", required_argument, NULL, 'N'},    {"exact-limit", required_argument, NULL, 'E'},
        {"read-all", no_argument, NULL, 'A'},     {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    const char *out_path = NULL;
    uint64_t exact = CUPTIMON_STATS_EXACT_DEFAULT, top = 0;
    unsigned reports = CUPTIMON_STATS_BIT(CUPTIMON_STATS_KERNELS) |
                       CUPTIMON_STATS_BIT(CUPTIMON_STATS_MEMORY_TIME) |
                       CUPTIMON_STATS_BIT(CUPTIMON_STATS_MEMORY_BYTES) |
                       CUPTIMON_STATS_BIT(CUPTIMON_STATS_PROCESSES);
    int format = 't', c, ret = 1, rc;
    long long window = 0;
    char **dirs = NULL;
    size_t nsess = 0;
    struct ssess *sess = NULL;
    struct cuptimon_demangler *dm = NULL;
    struct cuptimon_stats *st = NULL;
    struct cuptimon_cli_out of = {.fd = -1};
    struct cuptimon_cli_select sel = {.prog = PROG};
    struct cuptimon_cli_progress pg = {.on = isatty(STDERR_FILENO)};
    struct range rg = {0, 0, 0};
    json_object *extra = NULL;
    struct gpu_out gout = {.window = 0};
    struct cuptimon_gpm_stats *gs = NULL;
    char **gdirs = NULL; /* --window: the GPU metrics sessions beside its processes' */

    optind = 0; /* glibc: re-initialises getopt completely */
    while ((c = getopt_long(argc, argv, "o:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
        case 'l':
        case 'F':
        case 'T':
        case 'A':
            if (cuptimon__cli_select_opt(&sel, c, optarg) < 0)
                return 2;
            break;
        case 'r':
            if ((reports = parse_reports(optarg)) == 0)
                return 2;
            break;
        case 'f':
            if (strcmp(optarg, "table") == 0 || strcmp(optarg, "csv") == 0 ||
                strcmp(optarg, "json") == 0) {
                format = optarg[0];
            } else {
                fprintf(stderr, PROG ": --format: '%s' is not table, csv or json\n", optarg);
                return 2;
            }
            break;
        case 'w': {
            char *end;
            errno = 0;
            window = strtoll(optarg, &end, 10);
            if (end == optarg || *end != '\0' || errno != 0 || window <= 0 || optarg[0] == '+') {
                fprintf(stderr, PROG ": --window: '%s' is not a window id\n", optarg);
                return 2;
            }
            break;
        }
        case 'N':
            if (parse_count("top", optarg, 1000000, &top) < 0)
                return 2;
            break;
        case 'E':
            if (parse_count("exact-limit", optarg, (uint64_t)1 << 40, &exact) < 0)
                return 2;
            break;
        case 'q': pg.on = 0; break;
        case 'o': out_path = optarg; break;
        case 'h': usage(stdout); return 0;
        default: fprintf(stderr, "Try '" PROG " --help' for more information.\n"); return 2;
        }
    }
    if (window ? optind != argc : optind != argc - 1) {
        fprintf(stderr, PROG ": %s\nTry '" PROG " --help' for more information.\n",
                window           ? "--window reads the window's own sessions: give no ARCHIVE_DIR"
                : optind >= argc ? "ARCHIVE_DIR is missing"
                                 : "only one ARCHIVE_DIR is taken");
        return 2;
    }
    if (cuptimon__cli_select_check(&sel) < 0)
        return 2;

    if (window) {
        uint64_t wf = 0, wt = 0;
        if ((rc = cuptimon__cli_window_lookup(ctl, PROG, window, &wf, &wt, &dirs)) != 0)
            return rc;
        if (!sel.have_from || sel.from < wf)
            sel.from = wf;
        if (sel.to == 0 || sel.to > wt)
            sel.to = wt;
        sel.have_from = 1;
        if (sel.to <= sel.from) {
            fprintf(stderr,
                    PROG ": --window %lld: --from/--to leave nothing of its range [%" PRIu64
                         ", %" PRIu64 ")\n",
                    window, wf, wt);
            cuptimon__archive_free_list(dirs);
            return 2;
        }
        /* cuptimon__cli_window_lookup() gives at least one (it fails on none). */
        while (dirs[nsess] != NULL)
            nsess++;
    } else if (cuptimon__cli_find_sessions(PROG, argv[optind], &dirs, &nsess) != 0) {
        return 1;
    }
    sess = calloc(nsess, sizeof(*sess));
    if (sess == NULL)
        goto oom;
    /* GPU metrics sessions hold no CUPTI records: the gpu report reads
     * them, nothing else counts them.  A window lists its processes' only;
     * its GPUs' sessions lie beside them. */
    for (size_t i = 0; i < nsess; i++) {
        sess[i].dir = dirs[i];
        if (!window)
            sess[i].gpm = sess[i].skip = cuptimon__cli_session_is_gpm(dirs[i]);
    }
    if (window && (reports & REPORT_GPU) && nsess > 0)
        gdirs = cuptimon__cli_window_gpm_dirs(dirs[0]);
    /* --pid/--label: a value that matches no session fails before anything
     * is written (the tables would silently lack what was asked for). */
    if (cuptimon__cli_select_picks(&sel)) {
        for (size_t i = 0; i < nsess; i++)
            if (!sess[i].gpm)
                sess[i].skip = !cuptimon__cli_session_picked(&sel, sess[i].dir, &sess[i].as,
                                                             window ? WINDOW_EACCES : NULL);
        if (cuptimon__cli_select_unmatched(&sel, window ? "the window" : argv[optind]))
            goto out;
    }
    /* The output first, so that a path that cannot be written fails before
     * the archive is read. */
    if (cuptimon__cli_out_open(PROG, &of, out_path) < 0)
        goto out;

    /* The engine's reports (0 would be all of them: with only gpu asked
     * for, the processes report, which is not printed). */
    unsigned ereports = reports & CUPTIMON_STATS_ALL;
    int gpu_devs = cuptimon__cli_select_picks(&sel) || window; /* the chosen processes' GPUs */
    int read_procs = ereports != 0 || ((reports & REPORT_GPU) && gpu_devs);
    struct cuptimon_stats_opts so = {
        .reports = ereports ? ereports : CUPTIMON_STATS_BIT(CUPTIMON_STATS_PROCESSES),
        .exact_limit = exact};
    if (cuptimon__demangler_new(0, &dm) < 0 || cuptimon__stats_new(&so, &st) < 0)
        goto oom;
    rg.from = sel.have_from ? sel.from : 0;
    rg.to = sel.to;
    rg.skip_before = cuptimon__cli_select_skip_before(&sel);
    pg.t0 = pg.last = cuptimon__cli_mono_s();
    for (size_t i = 0; read_procs && i < nsess; i++) {
        if (sess[i].skip)
            continue;
        rc = count_one(&sess[i], st, dm, &rg, &pg, i, nsess, window != 0);
        if (rc == -ENOMEM)
            goto oom;
    }
    cuptimon__cli_progress_show(&pg, "stats", nsess, nsess, 1);
    if (reports & REPORT_GPU) {
        struct cuptimon_gpm_devset devs = {.all = !gpu_devs};
        struct cuptimon_gpm_read_stats gst;
        memset(&gst, 0, sizeof gst);
        if (cuptimon__gpm_stats_new(CUPTIMON_GPM_EXACT_DEFAULT, &gs) < 0)
            goto oom;
        for (size_t i = 0; i < nsess; i++)
            if (!sess[i].skip)
                cuptimon__gpm_devset_resolve(&devs, &sess[i].devs, sess[i].as.names);
        gout.window = window != 0;
        for (size_t i = 0; window ? gdirs && gdirs[i] : i < nsess; i++) {
            const char *d = window ? gdirs[i] : sess[i].dir;
            if (!window && !sess[i].gpm)
                continue;
            gout.sessions++;
            if (gpu_one(d, gs, &rg, &devs, &gst, window != 0) == -ENOMEM)
                goto oom;
        }
        if (gst.bad_chunks || gst.bad_samples || gst.bad_values)
            fprintf(stderr,
                    PROG ": GPU metrics: skipped %" PRIu64 " chunk(s) whose size is not a whole "
                         "number of samples and %" PRIu64 " sample(s) with impossible or "
                         "out-of-order times; %" PRIu64 " infinite value(s) read as no value\n",
                    gst.bad_chunks, gst.bad_samples, gst.bad_values);
        if ((gout.rows = cuptimon__gpm_stats_rows(gs)) == NULL)
            goto oom;
        while (top && json_object_array_length(gout.rows) > top)
            json_object_array_del_idx(gout.rows, json_object_array_length(gout.rows) - 1, 1);
    }

    extra = json_object_new_object();
    if (extra == NULL)
        goto oom;
    {
        /* sessions: the processes' sessions the selection holds, read or
         * not (the gpu report alone reads none of them). */
        uint64_t chunks = 0, undec = 0, recs = 0, kept = 0, nsel = 0;
        for (size_t i = 0; i < nsess; i++) {
            if (sess[i].skip)
                continue;
            nsel++;
            chunks += sess[i].chunks;
            undec += sess[i].dec.undecodable_bytes;
            recs += sess[i].dec.records;
            kept += sess[i].kept;
        }
        json_object_object_add(extra, "sessions", json_object_new_uint64(nsel));
        if (read_procs) {
            json_object_object_add(extra, "chunks_read", json_object_new_uint64(chunks));
            json_object_object_add(extra, "records_decoded", json_object_new_uint64(recs));
            json_object_object_add(extra, "records_counted", json_object_new_uint64(kept));
            json_object_object_add(extra, "undecodable_bytes", json_object_new_uint64(undec));
        }
        if (sel.have_from || sel.to) {
            json_object_object_add(extra, "from_unix_ns", json_object_new_uint64(rg.from));
            if (sel.to)
                json_object_object_add(extra, "to_unix_ns", json_object_new_uint64(sel.to));
        }
        if (window)
            json_object_object_add(extra, "window", json_object_new_int64(window));
    }
    /* The tables are made in memory (their size is bounded by the rows'
     * caps), then written at once. */
    {
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        if (m == NULL)
            goto oom;
        rc = write_output(m, st, reports, format, (size_t)top, extra,
                          of.is_file ? 0 : cuptimon__cli_term_width(stdout), &gout, read_procs);
        if (fclose(m) != 0 || rc == -ENOMEM) {
            free(buf);
            goto oom;
        }
        rc = cuptimon__write_all(of.fd, buf, len);
        free(buf);
        if (rc < 0) {
            fprintf(stderr, PROG ": writing %s: %s\n", of.is_file ? out_path : "the tables",
                    strerror(-rc));
            goto out;
        }
    }
    if (cuptimon__cli_out_close(PROG, &of, 1, out_path) < 0)
        goto out;
    ret = 0;
    goto out;

oom:
    fprintf(stderr, PROG ": out of memory\n");
out:
    cuptimon__cli_out_close(PROG, &of, 0, out_path);
    json_object_put(extra);
    json_object_put(gout.rows);
    cuptimon__gpm_stats_free(gs);
    cuptimon__archive_free_list(gdirs);
    cuptimon__stats_free(st);
    cuptimon__demangler_free(dm);
    for (size_t i = 0; sess != NULL && i < nsess; i++)
        cuptimon__archive_session_clear(&sess[i].as);
    free(sess);
    cuptimon__archive_free_list(dirs);
    return ret;
}

int cuptimon__cli_stats(struct cuptimon_ctl *ctl, int argc, char **argv)
{
    char **av;
    int rc;

    if (argc < 1) {
        usage(stderr);
        return 2;
    }
    if ((av = cuptimon__cli_argv(PROG, argc, argv)) == NULL)
        return 1;
    rc = stats_main(ctl, argc, av);
    free(av);
    return rc;
}
