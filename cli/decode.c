/*
 * cuptimonctl decode ARCHIVE_DIR [--from T] [--to T] [-o trace.json]
 *                   [--summary] [--summary-out FILE] [--top N] [--no-flows]
 *                   [--read-all]
 *
 * Reads one archive session directory, or every session under an output
 * root, and writes one Chrome/Perfetto trace with one process per session,
 * kernel names resolved through the session's strings file.  Damage
 * (corrupt chunks, torn tails, damaged segment headers, unusable files,
 * duplicated chunks, damaged strings or meta.json) is passed over by the
 * reader, which hands the first of each kind to cli/read.c's reporter; the
 * counts go to standard error and to the trace's otherData and the summary.
 *
 * With --from, chunks completed well before it are passed over on their
 * header alone (see CUPTIMON_CLI_SKIP_MARGIN_NS in read.h): a 1 s slice of
 * a long archive then reads, decompresses and walks only the chunks that
 * can hold its events.
 */
#include "config.h"

#include "cli.h"
#include "read.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "archive/decode.h"
#include "archive/archive.h"
#include "archive/demangle.h"
#include "archive/gpm.h"
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
          "GPU metrics sessions (cuptimond's per-GPU hardware samples) become counter\n"
          "tracks, a process \"GPU d metrics\" per GPU: the samples over the time the\n"
          "decoded events span (--from/--to replace its ends), of every GPU, or with\n"
          "--pid/--label/--split of the GPUs the chosen processes ran work on (the\n"
          "node's GPUs, by the UUID each process recorded for its device ordinals).\n"
          "A GPU metrics session alone is decoded into its counters.\n"
          "\n"
          "  -o, --output=FILE      write the trace to FILE (default: standard output);\n"
          "                         a regular FILE appears complete or not at all;\n"
          "                         a device or FIFO (/dev/null) is written in place;\n"
          "                         a FILE ending in .gz is written gzipped\n"
          "      --from=T           keep only events that end at or after T; chunks of the\n"
          "                         archive completed more than 1 s before T are passed\n"
          "                         over unread (their records cannot end at or after T)\n"
          "      --to=T             keep only events that start before T\n"
          "      --read-all         with --from: read and decode every chunk, also those\n"
          "                         completed before it (slower; the records without a\n"
          "                         time, such as external correlations, and the counts of\n"
          "                         records decoded then cover the whole archive)\n"
          "      --summary          print the summary JSON (counts by kind, top kernels by\n"
          "                         GPU time, dropped and undecodable counts) to standard\n"
          "                         output, or to standard error when the trace goes there\n"
          "      --summary-out=FILE write the summary JSON to FILE\n"
          "      --top=N            kernels in the summary's top list (default 20)\n"
          "      --no-flows         no launch -> kernel/memcpy/memset flow arrows\n"
          "      --split=rank|process  one trace per rank (sessions without a rank: per\n"
          "                         process) or per process, as Holistic Trace Analysis\n"
          "                         reads a multi-rank job: -o names a directory (made\n"
          "                         when missing), the files are rank-R.json.gz or\n"
          "                         pid-P.json.gz, each with its own distributedInfo\n"
          "      --gzip=N           gzip level of what is written (0: plain JSON; default:\n"
          "                         1 for FILE.gz and --split files, else 0)\n"
          "      --gzip-threads=N   threads that deflate at once (1 to 64; default: the\n"
          "                         processors, at most 4)\n"
          "      --pid=P            decode only the sessions of process P (repeatable)\n"
          "      --label=L          decode only the sessions labelled L (CUPTIMON_LABEL;\n"
          "                         repeatable; with --pid: either matches)\n"
          "  -q, --quiet            no progress line (shown only when standard error is\n"
          "                         a terminal)\n"
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

#define PROG "cuptimonctl decode"

struct session {
    const char *dir;
    struct cuptimon_archive_session as; /* meta.json and strings */
    struct cuptimon_decode_stats dec;
    uint64_t chunks, dropped, kept, filtered;
    int skipping;         /* --from may have passed chunks over */
    uint64_t late;        /* records ending more than the skip margin after their chunk */
    uint64_t late_max_ns; /* ... by at most this */
    struct cuptimon_archive_stats ast;
    int meta_rc;    /* cuptimon__archive_session_meta()'s, on the real pass */
    int group;      /* --split: the index of the first session of its file */
    int skip;       /* not chosen by --pid/--label, or a GPU metrics session */
    int gpm;        /* a GPU metrics session (archive/gpm.h): counters, not records */
    char gname[48]; /* --split: the file's name, without .json[.gz] */
    /* The Unix ns span of the events kept (0, 0: none), and the devices
     * their GPU work ran on: the GPU metrics shown beside them. */
    uint64_t ev_first, ev_last;
    struct cuptimon_gpm_ordinals devs;
};

enum {
    SPLIT_NONE,
    SPLIT_RANK,
    SPLIT_PROCESS
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
    if (as->layout.refuted != NULL) {
        const struct cuptimon_rec_layout *k10 =
            as->layout.refuted->kinds[CUPTIMON_KIND_CONCURRENT_KERNEL];
        fprintf(stderr,
                "cuptimonctl decode: %s: CUPTI API version %u is reported by CUDA %s and by %s; "
                "the record sizes its libcupti measured (kernel: %u bytes, %s's %s: %u) are not "
                "%s's, so it is CUDA %s, which this build does not decode: its records are "
                "counted under an unknown version, walked by the measured sizes\n",
                s->dir, as->info.cupti_version, as->layout.refuted->cuda,
                as->layout.refuted->shared_with,
                (unsigned)(as->layout.measured[CUPTIMON_KIND_CONCURRENT_KERNEL]
                               ? as->layout.measured[CUPTIMON_KIND_CONCURRENT_KERNEL]
                               : as->layout.measured[CUPTIMON_KIND_KERNEL]),
                as->layout.refuted->cuda, k10 ? k10->name : "kernel record",
                k10 ? (unsigned)k10->size : 0u, as->layout.refuted->cuda,
                as->layout.refuted->shared_with);
    } else if (as->layout_rc == -EPROTONOSUPPORT && rc != -EINVAL) {
        fprintf(stderr,
                "cuptimonctl decode: %s: CUPTI API version %u is not one this build decodes "
                "(it decodes %s); its records are counted as undecodable and stay in the "
                "archive for a newer cuptimonctl\n",
                s->dir, as->info.cupti_version, cuptimon__cupti_supported());
    } else if (as->layout_rc > 0) {
        if (as->layout.udr_error[0] != '\0')
            cuptimon__cli_udr_refused(PROG, s->dir, as->layout.udr_error);
        for (unsigned k = 0; k < CUPTIMON_KIND_SLOTS; k++) {
            char why[200];
            if (cuptimon__layout_mismatch(&as->layout, k)) {
                fprintf(stderr,
                        "cuptimonctl decode: %s: %s: the producer's libcupti measured it; its "
                        "records are walked by CUPTI's size and counted as unknown layout, not "
                        "decoded\n",
                        s->dir, cuptimon__layout_mismatch_text(&as->layout, k, why, sizeof(why)));
                continue;
            }
            /* A described kind's problem is in udr_error (said above). */
            if (as->layout.state[k] != CUPTIMON_KIND_BAD_LAYOUT || as->layout.described[k])
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

static json_object *session_json(const struct session *s)
{
    json_object *o = json_object_new_object();

    if (o == NULL)
        return NULL;
    json_object_object_add(o, "dir", json_object_new_string(s->dir));
    json_object_object_add(o, "pid", json_object_new_int64(s->as.info.pid));
    json_object_object_add(o, "cupti_version", json_object_new_int64(s->as.info.cupti_version));
    json_object_object_add(o, "version_known", json_object_new_boolean(s->as.layout.version_known));
    json_object_object_add(o, "user_defined_kinds",
                           json_object_new_int64((int64_t)s->as.layout.user_defined));
    json_object_object_add(o, "chunks", json_object_new_uint64(s->ast.chunks));
    json_object_object_add(o, "segments", json_object_new_uint64(s->ast.segments));
    json_object_object_add(o, "bytes_raw", json_object_new_uint64(s->ast.bytes_raw));
    json_object_object_add(o, "corrupt_chunks", json_object_new_uint64(s->ast.corrupt_chunks));
    json_object_object_add(o, "torn_tails", json_object_new_uint64(s->ast.torn_tails));
    json_object_object_add(o, "skipped_bytes", json_object_new_uint64(s->ast.skipped_bytes));
    json_object_object_add(o, "strings", json_object_new_uint64(s->ast.strings));
    json_object_object_add(o, "corrupt_strings", json_object_new_uint64(s->ast.corrupt_strings));
    json_object_object_add(o, "bad_files", json_object_new_uint64(s->ast.bad_files));
    json_object_object_add(o, "bad_segment_headers",
                           json_object_new_uint64(s->ast.bad_seg_headers));
    json_object_object_add(o, "duplicate_chunks", json_object_new_uint64(s->ast.duplicate_chunks));
    json_object_object_add(o, "meta_damaged",
                           json_object_new_boolean(s->ast.meta_damaged || s->meta_rc < 0));
    json_object_object_add(o, "records_decoded", json_object_new_uint64(s->dec.records));
    json_object_object_add(o, "records_kept", json_object_new_uint64(s->kept));
    json_object_object_add(o, "undecodable_bytes",
                           json_object_new_uint64(s->dec.undecodable_bytes));
    json_object_object_add(o, "dropped_records", json_object_new_uint64(s->dropped));
    if (s->skipping) {
        /* Only where --from passed chunks over, so that every other
         * decode's output stays as it was. */
        json_object_object_add(o, "chunks_skipped", json_object_new_uint64(s->ast.range_chunks));
        json_object_object_add(o, "records_skipped", json_object_new_uint64(s->ast.range_records));
        json_object_object_add(o, "bytes_skipped", json_object_new_uint64(s->ast.range_bytes));
        json_object_object_add(o, "records_late", json_object_new_uint64(s->late));
    }
    return o;
}

/* ---- progress on a terminal ------------------------------------------- */

struct progress {
    int on;
    double t0, last;
    uint64_t total_bytes, bytes, records;
    uint64_t skipped; /* chunks passed over by --from */
};

/* The bytes of the regular files in dir: what reading the session costs. */
static uint64_t dir_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    uint64_t n = 0;
    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) == 0 && S_ISREG(st.st_mode))
            n += (uint64_t)st.st_size;
    }
    closedir(d);
    return n;
}

static void human_bytes(char *out, size_t len, double b)
{
    const char *u[] = {"B", "kB", "MB", "GB", "TB"};
    int i = 0;
    while (b >= 1000 && i < 4) {
        b /= 1000;
        i++;
    }
    snprintf(out, len, i ? "%.2f %s" : "%.0f %s", b, u[i]);
}

/* Rewrites the progress line at most twice a second (final: now, and ends it). */
static void progress_show(struct progress *p, int final)
{
    double t = cuptimon__cli_mono_s();
    if (!p->on || (!final && t - p->last < 0.5))
        return;
    p->last = t;
    double el = t - p->t0 > 1e-3 ? t - p->t0 : 1e-3;
    double bps = (double)p->bytes / el;
    char done[32], total[32], left[32] = "";
    human_bytes(done, sizeof done, (double)p->bytes);
    human_bytes(total, sizeof total, (double)p->total_bytes);
    if (!final && bps > 0 && p->total_bytes > p->bytes) {
        unsigned s = (unsigned)(((double)(p->total_bytes - p->bytes)) / bps + 0.5);
        snprintf(left, sizeof left, ", %u:%02u left", s / 60, s % 60);
    }
    char skipped[64] = "";
    if (p->skipped)
        snprintf(skipped, sizeof skipped, ", %" PRIu64 " chunks before --from skipped", p->skipped);
    fprintf(stderr, "\rdecode: %.2f M records, %s of %s (%.0f%%), %.2f M records/s%s%s\033[K%s",
            (double)p->records / 1e6, done, total,
            p->total_bytes ? 100.0 * (double)p->bytes / (double)p->total_bytes : 100.0,
            (double)p->records / el / 1e6, left, skipped, final ? "\n" : "");
}

/*
 * --split: names each session's file and groups the sessions of one file.
 * SPLIT_RANK: the sessions of one rank share rank-R; SPLIT_PROCESS, and a
 * session without a rank, get pid-P (pid-P-I for a later session of a pid
 * already named, I its index).  The names are made of numbers only, never
 * of what a producer wrote.  need_meta: meta.json was not read yet.
 */
static int split_groups(struct session *sess, size_t nsess, int split, int need_meta)
{
    for (size_t i = 0; i < nsess; i++) {
        struct session *s = &sess[i];
        struct cuptimon_archive_reader *r;
        if (s->skip) {
            s->group = -1;
            continue;
        }
        if (need_meta && cuptimon__cli_open(PROG, s->dir, NULL, &r) == 0) {
            session_meta(s, cuptimon__archive_meta(r), 0);
            cuptimon__archive_close(r);
        }
        if (split == SPLIT_RANK && s->as.info.rank >= 0)
            snprintf(s->gname, sizeof s->gname, "rank-%lld", (long long)s->as.info.rank);
        else
            snprintf(s->gname, sizeof s->gname, "pid-%u", s->as.info.pid);
        s->group = (int)i;
        for (size_t k = 0; k < i; k++) {
            if (strcmp(sess[k].gname, s->gname) != 0)
                continue;
            if (split == SPLIT_RANK && s->as.info.rank >= 0) {
                s->group = sess[k].group;
            } else {
                size_t n = strlen(s->gname);
                snprintf(s->gname + n, sizeof s->gname - n, "-%zu", i);
            }
            break;
        }
    }
    return 0;
}

/* How much later than its chunk's completion ev ends, in the chunk's
 * clock mapping, as cuptimon__ev_in_range() places it; negative: before. */
static int64_t ev_after_completion(const struct cuptimon_ev *ev, const struct cuptimon_clock *clk)
{
    uint64_t st = cuptimon__clock_map(clk, ev->start), end = cuptimon__clock_map(clk, ev->end);

    return (int64_t)((end < st ? st : end) - clk->unix_ns);
}

/* Counts what the reader has been through of the current session (and
 * the sessions before: base) as done. */
static void progress_reader(struct progress *pg, const struct progress *base,
                            const struct cuptimon_archive_stats *st)
{
    pg->bytes = base->bytes + st->bytes_stored + st->chunks * CUPTIMON_CHUNK_HDR_SIZE;
    pg->skipped = base->skipped + st->range_chunks;
}

/* Notes a kept event's time and device: the GPU metrics shown beside the
 * events are those of its span and devices. */
static void note_event(struct session *s, const struct cuptimon_ev *ev,
                       const struct cuptimon_clock *clk)
{
    uint64_t a, b;

    if (ev->start == 0)
        return;
    a = cuptimon__clock_map(clk, ev->start);
    b = ev->end > ev->start ? cuptimon__clock_map(clk, ev->end) : a;
    if (s->ev_first == 0 || a < s->ev_first)
        s->ev_first = a;
    if (b > s->ev_last)
        s->ev_last = b;
    if (ev->type == CUPTIMON_EV_KERNEL || ev->type == CUPTIMON_EV_MEMCPY ||
        ev->type == CUPTIMON_EV_MEMCPY_P2P || ev->type == CUPTIMON_EV_MEMSET)
        cuptimon__gpm_ordinals_add(&s->devs, ev->device_id);
}

/* Decodes session s into trace tr (and the summary): 0; 1 when the
 * session could not be opened (reported, passed over); -ENOMEM; -EIO when
 * writing the trace failed (reported).  skip_before: chunks completed
 * before it are passed over unread (0: none; see CUPTIMON_CLI_SKIP_MARGIN_NS). */
static int decode_one(struct session *s, struct cuptimon_trace *tr, struct cuptimon_summary *sum,
                      struct cuptimon_demangler *dm, uint64_t from, uint64_t to,
                      uint64_t skip_before, struct cuptimon_decode_stats *total,
                      struct progress *pg)
{
    struct cuptimon_archive_reader *r;
    struct cuptimon_archive_chunk ch;
    struct cuptimon_walk w;
    struct progress base = *pg;
    int tproc, sproc, rc;

    if (cuptimon__cli_read_open(PROG, s->dir, NULL, skip_before, &r) < 0)
        return 1;
    s->skipping = skip_before != 0;
    session_meta(s, cuptimon__archive_meta(r), 1);
    if (cuptimon__cli_read_strings(PROG, s->dir, &s->as, r) < 0) {
        cuptimon__archive_close(r);
        return -ENOMEM;
    }
    tproc = cuptimon__trace_add_process(tr, &s->as.info, s->as.names, dm);
    sproc = cuptimon__summary_add_process(sum, &s->as.info, s->as.names, dm);
    if (tproc < 0 || sproc < 0) {
        cuptimon__archive_close(r);
        fprintf(stderr, "cuptimonctl decode: writing the trace: %s\n",
                strerror(tproc < 0 ? -tproc : -sproc));
        return -EIO;
    }
    while ((rc = cuptimon__cli_read_next(r, &s->as, &s->dec, &ch, &w)) == 1) {
        struct cuptimon_clock clk = {ch.hdr.cupti_ts, ch.hdr.unix_ns};
        struct cuptimon_ev ev;

        s->chunks++;
        s->dropped += ch.hdr.dropped;
        progress_reader(pg, &base, cuptimon__archive_stats(r));
        pg->records += ch.hdr.records;
        progress_show(pg, 0);
        rc = 0;
        while (cuptimon__walk_next(&w, &ev)) {
            if (skip_before && (ev.start != 0 || ev.end != 0)) {
                int64_t late = ev_after_completion(&ev, &clk);
                if (late > (int64_t)CUPTIMON_CLI_SKIP_MARGIN_NS) {
                    s->late++;
                    if ((uint64_t)late > s->late_max_ns)
                        s->late_max_ns = (uint64_t)late;
                }
            }
            if ((from || to) && !cuptimon__ev_in_range(&ev, &clk, from, to)) {
                s->filtered++;
                continue;
            }
            s->kept++;
            note_event(s, &ev, &clk);
            cuptimon__summary_event(sum, sproc, &ev);
            rc = cuptimon__trace_event(tr, tproc, &ev, &clk);
            if (rc < 0)
                break;
        }
        if (rc < 0) {
            fprintf(stderr, "cuptimonctl decode: writing the trace: %s\n", strerror(-rc));
            cuptimon__archive_close(r);
            return -EIO;
        }
    }
    cuptimon__cli_read_close(PROG, s->dir, r, rc, &s->ast);
    /* The drops the headers of the chunks passed over report: a session's
     * count stays that of its whole archive. */
    s->dropped += s->ast.range_dropped;
    progress_reader(pg, &base, &s->ast);
    rc = cuptimon__trace_end_process(tr, tproc);
    if (rc < 0) {
        fprintf(stderr, "cuptimonctl decode: writing the trace: %s\n", strerror(-rc));
        return -EIO;
    }
    cuptimon__summary_dropped(sum, s->dropped);
    cuptimon__decode_stats_add(total, &s->dec);
    cuptimon__cli_read_damage(PROG, s->dir, &s->ast);
    if (s->dec.undecodable_bytes) {
        char causes[160];
        fprintf(stderr,
                "cuptimonctl decode: %s: %" PRIu64 " byte(s) of records not decoded, because of: "
                "%s (records: %" PRIu64 " of a layout mismatch, %" PRIu64
                " under an unknown CUPTI version, %" PRIu64 " of an unverified layout whose size "
                "the producer never measured, %" PRIu64 " of unsupported kinds; buffers cut "
                "short: %" PRIu64 " where the walk lost step (layout mismatch), %" PRIu64
                " under an unknown version, %" PRIu64 " at an unknown kind; %" PRIu64
                " truncated)\n",
                s->dir, s->dec.undecodable_bytes,
                cuptimon__undecodable_causes(&s->dec, causes, sizeof(causes)),
                s->dec.skipped_bad_layout, s->dec.skipped_bad_version, s->dec.skipped_unconfirmed,
                s->dec.skipped_unsupported, s->dec.stops_layout, s->dec.stops_unknown_version,
                s->dec.stops_unknown_kind, s->dec.truncated);
    }
    if (s->late && s->ast.range_chunks)
        fprintf(stderr,
                "cuptimonctl decode: %s: %" PRIu64 " record(s) end up to %.3f s after their "
                "buffer was completed, more than the %.0f s that passing over the chunks "
                "completed before --from allows for: the %" PRIu64 " chunk(s) passed over may "
                "have held events in the range; decode with --read-all to read them\n",
                s->dir, s->late, (double)s->late_max_ns / 1e9,
                (double)CUPTIMON_CLI_SKIP_MARGIN_NS / 1e9, s->ast.range_chunks);
    return 0;
}

/* ---- GPU metrics ------------------------------------------------------ */

static int first_sample(void *ud, const struct cuptimon_gpm_meta *m,
                        const struct cuptimon_gpm_sample *s)
{
    (void)m;
    *(uint64_t *)ud = s->start_ns;
    return 1;
}

/*
 * Writes the counters of the GPU metrics sessions into the trace of group
 * g (every chosen session without --split): their samples that overlap
 * the span of the group's events, with --from and --to in place of its
 * ends when given, of the devices the group's GPU work ran on when
 * --pid, --label or --split chose the processes (else of every device).
 * With no process session chosen at all (a GPU metrics session or an
 * archive of them), every sample within --from/--to.  Each session's
 * account goes into gl.  A session that cannot be read is said and left
 * out; a failed write shows in the trace's finish.
 */
static void gpm_counters(struct session *sess, size_t nsess, int split, size_t g, int picks,
                         const struct cuptimon_cli_select *sel, struct cuptimon_trace *tr,
                         json_object *gl)
{
    struct cuptimon_gpm_devset devs = {.all = !(picks || split)};
    uint64_t lo = 0, hi = 0, first = 0, last = 0;
    size_t nproc = 0, ngpm = 0;

    for (size_t i = 0; i < nsess; i++) {
        const struct session *s = &sess[i];
        if (s->gpm) {
            ngpm++;
            continue;
        }
        if (s->skip || (split && s->group != (int)g))
            continue;
        nproc++;
        if (s->ev_first != 0 && (first == 0 || s->ev_first < first))
            first = s->ev_first;
        if (s->ev_last > last)
            last = s->ev_last;
        cuptimon__gpm_devset_resolve(&devs, &s->devs, s->as.names);
    }
    if (ngpm == 0)
        return;
    if (nproc == 0) {
        devs.all = 1;
        lo = sel->have_from ? sel->from : 0;
        hi = sel->to;
    } else {
        if ((!sel->have_from || !sel->to) && first == 0) {
            fprintf(stderr,
                    PROG ": the GPU metrics are left out: the processes decoded have no event "
                         "that gives their time range (--from and --to give one)\n");
            return;
        }
        lo = sel->have_from ? sel->from : first;
        hi = sel->to ? sel->to : last + 1;
    }
    for (size_t i = 0; i < nsess; i++) {
        const struct session *s = &sess[i];
        struct cuptimon_gpm_read_stats gst;
        char why[640] = "";
        int rc;

        if (!s->gpm)
            continue;
        memset(&gst, 0, sizeof gst);
        rc = cuptimon__gpm_trace_session(tr, s->dir, lo, hi, &devs, &gst, why, sizeof why);
        if (rc < 0)
            fprintf(stderr, PROG ": %s; its GPU metrics are left out\n", why);
        if (gst.bad_chunks || gst.bad_samples || gst.bad_values || gst.damaged)
            fprintf(stderr,
                    PROG ": %s: GPU metrics: skipped %" PRIu64 " damaged chunk(s), %" PRIu64
                         " chunk(s) whose size is not a whole number of samples and %" PRIu64
                         " sample(s) with impossible or out-of-order times; %" PRIu64
                         " infinite value(s) read as no value\n",
                    s->dir, gst.damaged, gst.bad_chunks, gst.bad_samples, gst.bad_values);
        json_object *o = json_object_new_object();
        if (o == NULL)
            continue;
        json_object_object_add(o, "dir", json_object_new_string(s->dir));
        json_object_object_add(o, "shown", json_object_new_boolean(rc > 0));
        json_object_object_add(o, "samples", json_object_new_uint64(gst.samples));
        json_object_object_add(o, "bad_chunks", json_object_new_uint64(gst.bad_chunks));
        json_object_object_add(o, "bad_samples", json_object_new_uint64(gst.bad_samples));
        json_object_object_add(o, "bad_values", json_object_new_uint64(gst.bad_values));
        json_object_object_add(o, "damaged_chunks", json_object_new_uint64(gst.damaged));
        json_object_array_add(gl, o);
    }
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
        {"split", required_argument, NULL, 'P'},
        {"gzip", required_argument, NULL, 'z'},
        {"gzip-threads", required_argument, NULL, 'Z'},
        {"pid", required_argument, NULL, 'p'},
        {"label", required_argument, NULL, 'l'},
        {"quiet", no_argument, NULL, 'q'},
        {"read-all", no_argument, NULL, 'A'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out_path = NULL, *summary_path = NULL;
    uint64_t skip_before = 0;
    int want_summary = 0, no_flows = 0, c, ret = 1;
    int split = SPLIT_NONE, gzip_level = -1, gzip_threads = 0;
    unsigned top = 20;
    char **dirs = NULL;
    size_t nsess = 0, nproc = 0, ngpm;
    struct session *sess = NULL;
    struct cuptimon_demangler *dm = NULL;
    struct cuptimon_trace *tr = NULL;
    struct cuptimon_summary *sum = NULL;
    struct cuptimon_trace_opts topts;
    struct cuptimon_decode_stats total;
    struct cuptimon_cli_out of = {.fd = -1};
    json_object *extra = NULL, *jsess = NULL;
    struct cuptimon_cli_select sel = {.prog = PROG};
    struct progress pg = {.on = isatty(STDERR_FILENO)};
    int rc;

    /* 0, not 1: glibc then re-initialises getopt completely, which a
     * second parse (after cuptimonctl's own, or in tests) needs. */
    optind = 0;
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
        case 'q': pg.on = 0; break;
        case 'o': out_path = optarg; break;
        case 'S': want_summary = 1; break;
        case 'U': summary_path = optarg; break;
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
        case 'n': no_flows = 1; break;
        case 'P':
            if (strcmp(optarg, "rank") == 0) {
                split = SPLIT_RANK;
            } else if (strcmp(optarg, "process") == 0) {
                split = SPLIT_PROCESS;
            } else {
                fprintf(stderr, "cuptimonctl decode: --split: '%s' is not rank or process\n",
                        optarg);
                return 2;
            }
            break;
        case 'z': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end != '\0' || end == optarg || v < 0 || v > 9) {
                fprintf(stderr,
                        "cuptimonctl decode: --gzip: '%s' is not a level from 0 (plain JSON) "
                        "to 9\n",
                        optarg);
                return 2;
            }
            gzip_level = (int)v;
            break;
        }
        case 'Z': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end != '\0' || end == optarg || v < 1 || v > 64) {
                fprintf(stderr,
                        "cuptimonctl decode: --gzip-threads: '%s' is not a number of threads "
                        "from 1 to 64\n",
                        optarg);
                return 2;
            }
            gzip_threads = (int)v;
            break;
        }
        case 'h': usage(stdout); return 0;
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
    if (cuptimon__cli_select_check(&sel) < 0)
        return 2;

    if (split != SPLIT_NONE) {
        struct stat st;
        if (out_path == NULL || strcmp(out_path, "-") == 0) {
            fprintf(stderr, "cuptimonctl decode: --split writes one file per rank or process "
                            "into a directory: give it with -o DIR\n");
            return 2;
        }
        if (mkdir(out_path, 0755) < 0 && errno != EEXIST) {
            fprintf(stderr, "cuptimonctl decode: cannot create the directory %s: %s\n", out_path,
                    strerror(errno));
            return 1;
        }
        if (stat(out_path, &st) < 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr,
                    "cuptimonctl decode: -o %s: not a directory (--split writes one "
                    "file per rank or process into it)\n",
                    out_path);
            return 1;
        }
    }
    if (cuptimon__cli_find_sessions(PROG, argv[optind], &dirs, &nsess) != 0)
        return 1;
    sess = calloc(nsess, sizeof(*sess));
    memset(&total, 0, sizeof(total));
    if (sess == NULL || cuptimon__demangler_new(0, &dm) < 0 || cuptimon__summary_new(&sum) < 0)
        goto oom;
    /* GPU metrics sessions are never decoded as CUPTI records: they become
     * counter tracks beside what the process sessions hold. */
    for (size_t i = 0; i < nsess; i++) {
        sess[i].dir = dirs[i];
        sess[i].gpm = sess[i].skip = cuptimon__cli_session_is_gpm(dirs[i]);
        nproc += !sess[i].gpm;
    }
    ngpm = nsess - nproc;
    if (split && nproc == 0) {
        fprintf(stderr,
                "cuptimonctl decode: --split: %s holds GPU metrics only, no process "
                "session to split by; decode it without --split\n",
                argv[optind]);
        goto out;
    }
    /* --pid/--label: every session's meta.json first, so that a value that
     * matches no session fails before anything is written (the trace would
     * silently lack what was asked for). */
    if (cuptimon__cli_select_picks(&sel)) {
        for (size_t i = 0; i < nsess; i++)
            if (!sess[i].gpm)
                sess[i].skip = !cuptimon__cli_session_picked(&sel, sess[i].dir, &sess[i].as, NULL);
        if (cuptimon__cli_select_unmatched(&sel, argv[optind]))
            goto out;
    }

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
    topts.range_from_ns = sel.have_from ? sel.from : 0;
    topts.range_to_ns = sel.to;
    if (sel.have_from) {
        topts.base_ns = sel.from;
    } else {
        uint64_t best = 0;
        for (size_t i = 0; i < nsess; i++) {
            if (sess[i].skip)
                continue;
            uint64_t t = cuptimon__cli_first_time(PROG, sess[i].dir, &sess[i].as);
            if (t != 0 && (best == 0 || t < best))
                best = t;
        }
        /* No process session to give one: the first GPU metrics sample. */
        for (size_t i = 0; nproc == 0 && i < nsess; i++) {
            uint64_t t = 0;
            if (sess[i].gpm &&
                cuptimon__gpm_read(sess[i].dir, 0, 0, first_sample, &t, NULL, NULL, 0) == 1 &&
                t != 0 && (best == 0 || t < best))
                best = t;
        }
        topts.base_ns = best - best % 1000000000u;
    }
    skip_before = cuptimon__cli_select_skip_before(&sel);
    topts.gzip_threads = gzip_threads;
    if (gzip_level >= 0)
        topts.gzip_level = gzip_level;
    else if (split)
        topts.gzip_level = 1;
    /* One file per group of sessions: with --split, per rank (or per
     * process, for sessions without a rank, and for --split=process), in
     * the sessions' order; else one group of every session. */
    if (split && split_groups(sess, nsess, split, sel.have_from) < 0)
        goto oom;
    jsess = json_object_new_array();
    if (jsess == NULL)
        goto oom;
    pg.t0 = pg.last = cuptimon__cli_mono_s();
    for (size_t i = 0; pg.on && i < nsess; i++)
        if (!sess[i].skip)
            pg.total_bytes += dir_bytes(sess[i].dir);
    for (size_t g = 0; g < nsess; g++) {
        char path[4096];
        const char *opath = out_path;
        json_object *gsess;
        size_t nin = 0;

        if (split) {
            if (sess[g].skip || sess[g].group != (int)g)
                continue; /* not chosen, or not the first session of its group */
            snprintf(path, sizeof path, "%s/%s.json%s", out_path, sess[g].gname,
                     topts.gzip_level > 0 ? ".gz" : "");
            opath = path;
            topts.trace_name = path;
        }
        if (cuptimon__cli_out_open(PROG, &of, opath) < 0)
            goto out;
        if (cuptimon__trace_new_fd(&topts, of.fd, &tr) < 0)
            goto oom;
        if ((gsess = json_object_new_array()) == NULL)
            goto oom;
        for (size_t i = g; i < nsess; i++) {
            struct session *s = &sess[i];
            if (s->skip || (split && s->group != (int)g))
                continue;
            rc = decode_one(s, tr, sum, dm, sel.from, sel.to, skip_before, &total, &pg);
            if (rc == -ENOMEM) {
                json_object_put(gsess);
                goto oom;
            }
            if (rc < 0) {
                json_object_put(gsess);
                goto out;
            }
            if (rc == 0) {
                json_object_array_add(jsess, session_json(s));
                json_object_array_add(gsess, session_json(s));
                nin++;
            }
        }
        extra = json_object_new_object();
        if (extra == NULL) {
            json_object_put(gsess);
            goto oom;
        }
        json_object_object_add(extra, "sessions", gsess);
        if (ngpm > 0) {
            json_object *gl = json_object_new_array();
            if (gl == NULL)
                goto oom;
            gpm_counters(sess, nsess, split, g, cuptimon__cli_select_picks(&sel), &sel, tr, gl);
            json_object_object_add(extra, "gpu_metrics_sessions", gl);
        }
        if (sel.from || sel.to) {
            json_object *rg = json_object_new_object();
            json_object_object_add(rg, "from_unix_ns", json_object_new_uint64(sel.from));
            if (sel.to)
                json_object_object_add(rg, "to_unix_ns", json_object_new_uint64(sel.to));
            json_object_object_add(extra, "range", rg);
        }
        rc = cuptimon__trace_finish(tr, extra);
        json_object_put(extra);
        extra = NULL;
        if (rc < 0) {
            fprintf(stderr, "cuptimonctl decode: writing the trace%s%s: %s\n",
                    of.is_file ? " to " : "", of.is_file ? opath : "", strerror(-rc));
            goto out;
        }
        cuptimon__trace_free(tr);
        tr = NULL;
        if (cuptimon__cli_out_close(PROG, &of, 1, opath) < 0)
            goto out;
        if (split)
            fprintf(stderr, "cuptimonctl decode: %s: %zu session(s) -> %s\n", sess[g].gname, nin,
                    opath);
        if (!split)
            break;
    }
    cuptimon__summary_decode_stats(sum, &total);
    progress_show(&pg, 1);

    if (want_summary || summary_path) {
        cuptimon__summary_set(sum, "sessions", json_object_get(jsess));
        if (skip_before) {
            json_object *sk = json_object_new_object();
            uint64_t n = 0, rec = 0, bytes = 0, late = 0;
            if (sk == NULL)
                goto oom;
            for (size_t i = 0; i < nsess; i++) {
                n += sess[i].ast.range_chunks;
                rec += sess[i].ast.range_records;
                bytes += sess[i].ast.range_bytes;
                late += sess[i].late;
            }
            json_object_object_add(sk, "before_unix_ns", json_object_new_uint64(skip_before));
            json_object_object_add(sk, "margin_ns",
                                   json_object_new_uint64(CUPTIMON_CLI_SKIP_MARGIN_NS));
            json_object_object_add(sk, "chunks", json_object_new_uint64(n));
            json_object_object_add(sk, "records", json_object_new_uint64(rec));
            json_object_object_add(sk, "bytes", json_object_new_uint64(bytes));
            json_object_object_add(sk, "records_late", json_object_new_uint64(late));
            cuptimon__summary_set(sum, "range_skip", sk);
        }
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
    cuptimon__cli_out_close(PROG, &of, 0, out_path);
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
    char **av;
    int rc;

    if (argc < 1) {
        usage(stderr);
        return 2;
    }
    if ((av = cuptimon__cli_argv(PROG, argc, argv)) == NULL)
        return 1;
    rc = decode_main(argc, av);
    free(av);
    return rc;
}
