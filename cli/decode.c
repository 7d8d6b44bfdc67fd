/*
 * cuptimonctl decode ARCHIVE_DIR [--from T] [--to T] [-o trace.json]
 *                   [--summary] [--summary-out FILE] [--top N] [--no-flows]
 *
 * Reads one archive session directory, or every session under an output
 * root, and writes one Chrome/Perfetto trace with one process per session,
 * kernel names resolved through the session's strings file.  Damage
 * (corrupt chunks, torn tails, damaged segment headers, unusable files,
 * duplicated chunks, damaged strings or meta.json) is passed over by the
 * reader, which hands the first of each kind to report_damage() here; the
 * counts go to standard error and to the trace's otherData and the summary.
 */
#include "config.h"

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "archive/decode.h"
#include "archive/archive.h"
#include "archive/demangle.h"
#include "archive/session.h"
#include "archive/strtab.h"
#include "archive/summary.h"
#include "archive/trace.h"
#include "cuptimon-proto.h"

static void usage(FILE *f)
{
    fputs("Usage: cuptimonctl decode ARCHIVE_DIR [OPTION]...\n"
          "Turn the always-on archive into a Chrome/Perfetto trace (JSON), with kernel\n"
          "names, one process per producer session.\n"
          "\n"
          "ARCHIVE_DIR is one session directory (the one holding meta.json) or an output\n"
          "root holding many; every session found is decoded into the same trace.\n"
          "\n"
          "  -o, --output=FILE      write the trace to FILE (default: standard output);\n"
          "                         a regular FILE appears complete or not at all;\n"
          "                         a device or FIFO (/dev/null) is written in place;\n"
          "                         a FILE ending in .gz is written gzipped\n"
          "      --from=T           keep only events that end at or after T\n"
          "      --to=T             keep only events that start before T\n"
          "      --summary          print the summary JSON (counts by kind, top kernels by\n"
          "                         GPU time, dropped and undecodable counts) to standard\n"
          "                         output, or to standard error when the trace goes there\n"
          "      --summary-out=FILE write the summary JSON to FILE\n"
          "      --top=N            kernels in the summary's top list (default 20)\n"
          "      --no-flows         no launch -> kernel/memcpy/memset flow arrows\n"
          "  -h, --help             show this help\n"
          "\n"
          "T is Unix time: an integer of 10^12 or more is nanoseconds\n"
          "(1796208557090027706); an integer below that, or a number with a decimal point,\n"
          "is seconds (1796208557, 1796208557.090027706); a unit suffix ns, us, ms or s\n"
          "makes it explicit (1796208557090ms).\n"
          "\n"
          "Trace timestamps are microseconds (three decimals: nanosecond precision) since\n"
          "otherData.base_unix_ns: --from when given, else the earliest record of the\n"
          "sessions' first chunks rounded down to a whole second.\n"
          "\n"
          "Exit status: 0 on success (also when corrupt chunks were skipped: they are\n"
          "reported on standard error and in the output), 1 on failure, 2 on bad usage.\n",
          f);
}

int cuptimon__cli_parse_time(const char *s, uint64_t *ns)
{
    uint64_t ip = 0, frac = 0, mult;
    unsigned fdigits = 0;
    int have_dot = 0, have_digit = 0;
    const char *p = s;

    if (s == NULL || *s == '\0')
        return -EINVAL;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (ip > (UINT64_MAX - 9) / 10)
            return -EINVAL;
        ip = ip * 10 + (uint64_t)(*p - '0');
        have_digit = 1;
    }
    if (*p == '.') {
        have_dot = 1;
        for (p++; *p >= '0' && *p <= '9'; p++) {
            if (fdigits < 9) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                fdigits++;
            }
            have_digit = 1;
        }
    }
    if (!have_digit)
        return -EINVAL;
    if (strcmp(p, "ns") == 0)
        mult = 1;
    else if (strcmp(p, "us") == 0)
        mult = 1000;
    else if (strcmp(p, "ms") == 0)
        mult = 1000000;
    else if (strcmp(p, "s") == 0)
        mult = 1000000000;
    else if (*p == '\0')
        mult = (have_dot || ip < 1000000000000ull) ? 1000000000 : 1;
    else
        return -EINVAL;
    /* The fraction, as ns of the unit: frac / 10^fdigits * mult. */
    while (fdigits < 9) {
        frac *= 10;
        fdigits++;
    }
    if (ip > UINT64_MAX / mult)
        return -EINVAL;
    ip *= mult;
    frac = frac * (mult / 1000000000 ? mult / 1000000000 : 1) /
           (mult < 1000000000 ? 1000000000 / mult : 1);
    if (ip > UINT64_MAX - frac)
        return -EINVAL;
    *ns = ip + frac;
    return 0;
}

struct session {
    const char *dir;
    struct cuptimon_archive_session as; /* meta.json and strings */
    struct cuptimon_decode_stats dec;
    uint64_t chunks, dropped, kept, filtered;
    struct cuptimon_archive_stats ast;
    int meta_rc; /* cuptimon__archive_session_meta()'s, on the real pass */
};

/* Parses meta.json into the session's identity and layout; a meta that
 * cannot be parsed leaves an unknown version (nothing decoded) and, when
 * report is set, says so, as it does for layouts this build cannot use.
 * A meta.json that could not be read at all (text NULL) was reported by
 * the reader already. */
static void session_meta(struct session *s, const char *text, int report)
{
    const struct cuptimon_archive_session *as = &s->as;
    int rc = cuptimon__archive_session_meta(&s->as, text);

    s->meta_rc = rc;
    if (rc == -EINVAL && text != NULL && report)
        fprintf(stderr,
                "cuptimonctl decode: %s/meta.json: not a JSON object, and no member could be "
                "salvaged from it; the session's records are counted but not decoded\n",
                s->dir);
    if (rc == -EBADMSG && report) {
        static const char *const keys[] = {"pid", "hostname", "cupti_version", "record_sizes",
                                           "job"};
        char got[128] = "", lost[128] = "";
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
            char *to = json_object_object_get_ex(as->meta, keys[i], NULL) ? got : lost;
            size_t n = strlen(to);
            snprintf(to + n, sizeof(got) - n, "%s%s", n ? ", " : "", keys[i]);
        }
        fprintf(stderr,
                "cuptimonctl decode: %s/meta.json: damaged (not valid JSON); salvaged %s%s%s\n",
                s->dir, got, lost[0] ? "; lost " : "", lost);
    }
    if (!report)
        return;
    if (as->layout_rc == -EPROTONOSUPPORT && rc != -EINVAL) {
        fprintf(stderr,
                "cuptimonctl decode: %s: CUPTI API version %u is not one this build decodes "
                "(it decodes %s); its records are counted as undecodable and stay in the "
                "archive for a newer cuptimonctl\n",
                s->dir, as->info.cupti_version, cuptimon__cupti_supported());
    } else if (as->layout_rc > 0) {
        for (unsigned k = 0; k < CUPTIMON_KIND_SLOTS; k++) {
            if (as->layout.state[k] != CUPTIMON_KIND_BAD_LAYOUT)
                continue;
            fprintf(stderr,
                    "cuptimonctl decode: %s: kind %u (%s): the producer's record size %u is not "
                    "the %u bytes of its CUPTI release's struct; those records are skipped, "
                    "not decoded\n",
                    s->dir, k, cuptimon__kind_name(k) ? cuptimon__kind_name(k) : "?",
                    as->record_sizes[k], as->layout.table_size[k]);
        }
    }
}

/* The first damage of each kind in a session, on standard error (the
 * session's line after it gives the counts). */
static void report_damage(void *ud, enum cuptimon_archive_damage kind, const char *path,
                          uint64_t offset, const char *what)
{
    (void)ud;
    (void)kind;
    if (offset == UINT64_MAX)
        fprintf(stderr, "cuptimonctl decode: %s: %s\n", path, what);
    else
        fprintf(stderr, "cuptimonctl decode: %s: offset %" PRIu64 ": %s\n", path, offset, what);
}

static int open_session(struct session *s, struct cuptimon_archive_reader **r)
{
    char *err = NULL;
    int rc = cuptimon__archive_open(s->dir, r, &err);

    if (rc < 0) {
        fprintf(stderr, "cuptimonctl decode: %s: %s\n", s->dir, err ? err : strerror(-rc));
        free(err);
        return rc;
    }
    free(err);
    return 0;
}

/* The earliest mapped record start in a session's first chunk, or 0. */
static uint64_t first_time(struct session *s)
{
    struct cuptimon_archive_reader *r;
    struct cuptimon_archive_chunk c;
    struct cuptimon_decode_stats st;
    uint64_t best = 0;

    if (open_session(s, &r) < 0)
        return 0;
    /* The same layouts as the real pass (which reports their problems). */
    session_meta(s, cuptimon__archive_meta(r), 0);
    if (cuptimon__archive_next(r, &c) == 1) {
        struct cuptimon_clock clk = {c.hdr.cupti_ts, c.hdr.unix_ns};
        struct cuptimon_walk w;
        struct cuptimon_ev ev;
        memset(&st, 0, sizeof(st));
        cuptimon__walk_begin(&w, &s->as.layout, c.data, (size_t)c.hdr.raw_size, &st);
        while (cuptimon__walk_next(&w, &ev)) {
            uint64_t t = cuptimon__clock_map(&clk, ev.start);
            if (t != 0 && (best == 0 || t < best))
                best = t;
        }
        if (best == 0)
            best = c.hdr.unix_ns;
    }
    cuptimon__archive_close(r);
    return best;
}

static json_object *session_json(const struct session *s)
{
    json_object *o = json_object_new_object();

    if (o == NULL)
        return NULL;
    json_object_object_add(o, "dir", json_object_new_string(s->dir));
    json_object_object_add(o, "pid", json_object_new_int64(s->as.info.pid));
    json_object_object_add(o, "cupti_version", json_object_new_int64(s->as.info.cupti_version));
    json_object_object_add(o, "version_known", json_object_new_boolean(s->as.layout.version_known));
    json_object_object_add(o, "chunks", json_object_new_uint64(s->ast.chunks));
    json_object_object_add(o, "segments", json_object_new_uint64(s->ast.segments));
    json_object_object_add(o, "bytes_raw", json_object_new_uint64(s->ast.bytes_raw));
    json_object_object_add(o, "corrupt_chunks", json_object_new_uint64(s->ast.corrupt_chunks));
    json_object_object_add(o, "torn_tails", json_object_new_uint64(s->ast.torn_tails));
    json_object_object_add(o, "skipped_bytes", json_object_new_uint64(s->ast.skipped_bytes));
    json_object_object_add(o, "strings", json_object_new_uint64(s->ast.strings));
    json_object_object_add(o, "corrupt_strings", json_object_new_uint64(s->ast.corrupt_strings));
    json_object_object_add(o, "bad_files", json_object_new_uint64(s->ast.bad_files));
    json_object_object_add(o, "bad_segment_headers", json_object_new_uint64(s->ast.bad_seg_headers));
    json_object_object_add(o, "duplicate_chunks", json_object_new_uint64(s->ast.duplicate_chunks));
    json_object_object_add(o, "meta_damaged",
                           json_object_new_boolean(s->ast.meta_damaged || s->meta_rc < 0));
    json_object_object_add(o, "records_decoded", json_object_new_uint64(s->dec.records));
    json_object_object_add(o, "records_kept", json_object_new_uint64(s->kept));
    json_object_object_add(o, "undecodable_bytes", json_object_new_uint64(s->dec.undecodable_bytes));
    json_object_object_add(o, "dropped_records", json_object_new_uint64(s->dropped));
    return o;
}

struct out_file {
    struct cuptimon_outfile f;
    int fd;
    int is_file; /* not standard output */
};

static int out_open(struct out_file *o, const char *path)
{
    o->fd = -1;
    o->is_file = 0;
    if (path == NULL || strcmp(path, "-") == 0) {
        o->fd = STDOUT_FILENO;
        return 0;
    }
    int rc = cuptimon__outfile_open(&o->f, path, 0644);
    if (rc < 0) {
        fprintf(stderr, "cuptimonctl decode: cannot write %s: %s\n", path, strerror(-rc));
        return rc;
    }
    o->fd = o->f.fd;
    o->is_file = 1;
    return 0;
}

/* Closes; on success renames the temporary file into place, else removes it. */
static int out_close(struct out_file *o, int ok, const char *path)
{
    if (!o->is_file)
        return 0;
    o->is_file = 0;
    int rc = cuptimon__outfile_commit(&o->f, ok, 0);
    if (rc < 0 && ok)
        fprintf(stderr, "cuptimonctl decode: writing %s: %s\n", path, strerror(-rc));
    return rc;
}

static int decode_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"from", required_argument, NULL, 'F'},
        {"to", required_argument, NULL, 'T'},
        {"summary", no_argument, NULL, 'S'},
        {"summary-out", required_argument, NULL, 'U'},
        {"top", required_argument, NULL, 'N'},
        {"no-flows", no_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out_path = NULL, *summary_path = NULL;
    uint64_t from = 0, to = 0;
    int have_from = 0, want_summary = 0, no_flows = 0, c, ret = 1;
    unsigned top = 20;
    char **dirs = NULL;
    size_t nsess = 0;
    struct session *sess = NULL;
    struct cuptimon_demangler *dm = NULL;
    struct cuptimon_trace *tr = NULL;
    struct cuptimon_summary *sum = NULL;
    struct cuptimon_trace_opts topts;
    struct cuptimon_decode_stats total;
    struct out_file of = {.fd = -1};
    json_object *extra = NULL, *jsess = NULL;
    int rc;

    /* 0, not 1: glibc then re-initialises getopt completely, which a
     * second parse (after cuptimonctl's own, or in tests) needs. */
    optind = 0;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            out_path = optarg;
            break;
        case 'F':
        case 'T': {
            uint64_t v;
            if (cuptimon__cli_parse_time(optarg, &v) < 0) {
                fprintf(stderr,
                        "cuptimonctl decode: --%s: '%s' is not a time (Unix ns, or seconds with "
                        "a fraction, optionally with a unit ns/us/ms/s)\n",
                        c == 'F' ? "from" : "to", optarg);
                return 2;
            }
            if (c == 'F') {
                from = v;
                have_from = 1;
            } else {
                to = v;
            }
            break;
        }
        case 'S':
            want_summary = 1;
            break;
        case 'U':
            summary_path = optarg;
            break;
        case 'N': {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            if (*end != '\0' || end == optarg || v == 0 || v > 100000) {
                fprintf(stderr, "cuptimonctl decode: --top: '%s' is not a count (1..100000)\n",
                        optarg);
                return 2;
            }
            top = (unsigned)v;
            break;
        }
        case 'n':
            no_flows = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "Try 'cuptimonctl decode --help' for more information.\n");
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr,
                "cuptimonctl decode: %s\nTry 'cuptimonctl decode --help' for more "
                "information.\n",
                optind >= argc ? "ARCHIVE_DIR is missing" : "only one ARCHIVE_DIR is taken");
        return 2;
    }
    if (have_from && to != 0 && to <= from) {
        fprintf(stderr,
                "cuptimonctl decode: --to (%" PRIu64 ") must be after --from (%" PRIu64 ")\n", to,
                from);
        return 2;
    }

    rc = cuptimon__archive_find_sessions(argv[optind], &dirs);
    if (rc < 0) {
        fprintf(stderr, "cuptimonctl decode: %s: %s\n", argv[optind], strerror(-rc));
        return 1;
    }
    while (dirs[nsess] != NULL)
        nsess++;
    if (nsess == 0) {
        fprintf(stderr,
                "cuptimonctl decode: %s: no archive sessions (directories with a "
                "meta.json) found\n",
                argv[optind]);
        cuptimon__archive_free_list(dirs);
        return 1;
    }
    sess = calloc(nsess, sizeof(*sess));
    memset(&total, 0, sizeof(total));
    if (sess == NULL || cuptimon__demangler_new(0, &dm) < 0 || cuptimon__summary_new(&sum) < 0)
        goto oom;
    for (size_t i = 0; i < nsess; i++)
        sess[i].dir = dirs[i];

    memset(&topts, 0, sizeof(topts));
    topts.no_flows = no_flows;
    /* FILE.gz (FILE.json.gz) is written gzipped, at level 1: a trace shrinks
     * about 14x and the tools read it as is. */
    if (out_path && strcmp(out_path, "-") != 0) {
        size_t n = strlen(out_path);
        topts.trace_name = out_path;
        if (n > 3 && strcmp(out_path + n - 3, ".gz") == 0)
            topts.gzip_level = 1;
    }
    /* Annotation ranges are clipped to --from/--to as a window's are. */
    topts.range_from_ns = have_from ? from : 0;
    topts.range_to_ns = to;
    if (have_from) {
        topts.base_ns = from;
    } else {
        uint64_t best = 0;
        for (size_t i = 0; i < nsess; i++) {
            uint64_t t = first_time(&sess[i]);
            if (t != 0 && (best == 0 || t < best))
                best = t;
        }
        topts.base_ns = best - best % 1000000000u;
    }
    if (out_open(&of, out_path) < 0)
        goto out;
    if (cuptimon__trace_new_fd(&topts, of.fd, &tr) < 0)
        goto oom;
    jsess = json_object_new_array();
    if (jsess == NULL)
        goto oom;

    for (size_t i = 0; i < nsess; i++) {
        struct session *s = &sess[i];
        struct cuptimon_archive_reader *r;
        struct cuptimon_archive_chunk ch;
        int tproc, sproc;

        if (open_session(s, &r) < 0)
            continue;
        cuptimon__archive_set_report(r, report_damage, NULL);
        session_meta(s, cuptimon__archive_meta(r), 1);
        if (cuptimon__strtab_new(NULL, &s->as.names) < 0) {
            cuptimon__archive_close(r);
            goto oom;
        }
        rc = cuptimon__archive_session_strings(&s->as, r);
        if (rc < 0)
            fprintf(stderr,
                    "cuptimonctl decode: %s: reading strings: %s (names may be "
                    "missing)\n",
                    s->dir, strerror(-rc));
        tproc = cuptimon__trace_add_process(tr, &s->as.info, s->as.names, dm);
        sproc = cuptimon__summary_add_process(sum, &s->as.info, s->as.names, dm);
        if (tproc < 0 || sproc < 0) {
            cuptimon__archive_close(r);
            fprintf(stderr, "cuptimonctl decode: writing the trace: %s\n",
                    strerror(tproc < 0 ? -tproc : -sproc));
            goto out;
        }
        while ((rc = cuptimon__archive_next(r, &ch)) == 1) {
            struct cuptimon_clock clk = {ch.hdr.cupti_ts, ch.hdr.unix_ns};
            struct cuptimon_walk w;
            struct cuptimon_ev ev;

            s->chunks++;
            s->dropped += ch.hdr.dropped;
            cuptimon__walk_begin(&w, &s->as.layout, ch.data, (size_t)ch.hdr.raw_size, &s->dec);
            rc = 0;
            while (cuptimon__walk_next(&w, &ev)) {
                if ((from || to) && !cuptimon__ev_in_range(&ev, &clk, from, to)) {
                    s->filtered++;
                    continue;
                }
                s->kept++;
                cuptimon__summary_event(sum, sproc, &ev);
                rc = cuptimon__trace_event(tr, tproc, &ev, &clk);
                if (rc < 0)
                    break;
            }
            if (rc < 0) {
                fprintf(stderr, "cuptimonctl decode: writing the trace: %s\n", strerror(-rc));
                cuptimon__archive_close(r);
                goto out;
            }
        }
        if (rc < 0)
            fprintf(stderr,
                    "cuptimonctl decode: %s: reading: %s (the rest of this session "
                    "is skipped)\n",
                    s->dir, strerror(-rc));
        s->ast = *cuptimon__archive_stats(r);
        cuptimon__archive_close(r);
        rc = cuptimon__trace_end_process(tr, tproc);
        if (rc < 0) {
            fprintf(stderr, "cuptimonctl decode: writing the trace: %s\n", strerror(-rc));
            goto out;
        }
        cuptimon__summary_dropped(sum, s->dropped);
        cuptimon__decode_stats_add(&total, &s->dec);
        if (s->ast.corrupt_chunks || s->ast.torn_tails || s->ast.corrupt_strings ||
            s->ast.bad_files || s->ast.bad_seg_headers || s->ast.duplicate_chunks)
            fprintf(stderr,
                    "cuptimonctl decode: %s: skipped %" PRIu64 " corrupt chunk(s), %" PRIu64
                    " torn tail(s), %" PRIu64 " byte(s) while resynchronising, %" PRIu64
                    " corrupt string(s), %" PRIu64 " unusable file(s), %" PRIu64
                    " duplicate chunk(s); %" PRIu64 " damaged segment header(s)\n",
                    s->dir, s->ast.corrupt_chunks, s->ast.torn_tails, s->ast.skipped_bytes,
                    s->ast.corrupt_strings, s->ast.bad_files, s->ast.duplicate_chunks,
                    s->ast.bad_seg_headers);
        if (s->dec.undecodable_bytes)
            fprintf(stderr,
                    "cuptimonctl decode: %s: %" PRIu64 " byte(s) of records not decoded "
                    "(%" PRIu64 " of unsupported kinds, %" PRIu64 " of unknown layout, %" PRIu64
                    " under an unknown CUPTI version, %" PRIu64 " buffer(s) cut at an unknown "
                    "kind, %" PRIu64 " truncated)\n",
                    s->dir, s->dec.undecodable_bytes, s->dec.skipped_unsupported,
                    s->dec.skipped_bad_layout, s->dec.skipped_bad_version,
                    s->dec.unknown_kind_stops, s->dec.truncated);
        json_object_array_add(jsess, session_json(s));
    }
    cuptimon__summary_decode_stats(sum, &total);

    extra = json_object_new_object();
    if (extra == NULL)
        goto oom;
    json_object_object_add(extra, "sessions", json_object_get(jsess));
    if (from || to) {
        json_object *rg = json_object_new_object();
        json_object_object_add(rg, "from_unix_ns", json_object_new_uint64(from));
        if (to)
            json_object_object_add(rg, "to_unix_ns", json_object_new_uint64(to));
        json_object_object_add(extra, "range", rg);
    }
    rc = cuptimon__trace_finish(tr, extra);
    if (rc < 0) {
        fprintf(stderr, "cuptimonctl decode: writing the trace%s%s: %s\n", of.is_file ? " to " : "",
                of.is_file ? out_path : "", strerror(-rc));
        goto out;
    }
    if (out_close(&of, 1, out_path) < 0)
        goto out;

    if (want_summary || summary_path) {
        cuptimon__summary_set(sum, "sessions", json_object_get(jsess));
        if (summary_path) {
            FILE *f = fopen(summary_path, "w");
            if (f == NULL) {
                fprintf(stderr, "cuptimonctl decode: cannot create %s: %s\n", summary_path,
                        strerror(errno));
                goto out;
            }
            rc = cuptimon__summary_write(sum, f, top);
            if (fclose(f) != 0 && rc == 0)
                rc = -errno;
            if (rc < 0) {
                fprintf(stderr, "cuptimonctl decode: writing %s: %s\n", summary_path,
                        strerror(-rc));
                goto out;
            }
        }
        if (want_summary) {
            FILE *f = (out_path == NULL || strcmp(out_path, "-") == 0) ? stderr : stdout;
            if (cuptimon__summary_write(sum, f, top) < 0 || fflush(f) != 0) {
                fprintf(stderr, "cuptimonctl decode: writing the summary: %s\n", strerror(errno));
                goto out;
            }
        }
    }
    ret = 0;
    goto out;

oom:
    fprintf(stderr, "cuptimonctl decode: out of memory\n");
out:
    out_close(&of, 0, out_path);
    json_object_put(extra);
    json_object_put(jsess);
    cuptimon__trace_free(tr);
    cuptimon__summary_free(sum);
    cuptimon__demangler_free(dm);
    for (size_t i = 0; sess != NULL && i < nsess; i++)
        cuptimon__archive_session_clear(&sess[i].as);
    free(sess);
    if (dirs != NULL)
        cuptimon__archive_free_list(dirs);
    return ret;
}

int cuptimon__cli_decode(int argc, char **argv)
{
    /* getopt names argv[0] in its messages: make that the command. */
    char **av = calloc((size_t)argc + 1, sizeof(*av));
    int rc;

    if (av == NULL) {
        fprintf(stderr, "cuptimonctl decode: out of memory\n");
        return 1;
    }
    if (argc < 1) {
        free(av);
        usage(stderr);
        return 2;
    }
    memcpy(av, argv, (size_t)argc * sizeof(*av));
    av[0] = (char *)"cuptimonctl decode";
    rc = decode_main(argc, av);
    free(av);
    return rc;
}
