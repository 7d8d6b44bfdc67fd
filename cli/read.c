/*
 * What cuptimonctl decode and stats share of reading an archive (read.h).
 * Both commands once had their own copy of each piece here; a change made
 * to one copy and not the other left the commands answering differently.
 */
#include "config.h"

#include "read.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "archive/archive.h"
#include "archive/decode.h"
#include "archive/gpm.h"
#include "archive/strtab.h"
#include "cli.h"

/* ---- choosing what is read ---------------------------------------------- */

int cuptimon__cli_select_opt(struct cuptimon_cli_select *sel, int c, const char *arg)
{
    switch (c) {
    case 'p':
    case 'l': {
        char *end;
        unsigned long v = c == 'p' ? strtoul(arg, &end, 10) : 0;
        if (sel->npid + sel->nlabel >= CUPTIMON_CLI_PICKS_MAX) {
            fprintf(stderr, "%s: at most %d --pid and --label values\n", sel->prog,
                    CUPTIMON_CLI_PICKS_MAX);
            return -1;
        }
        if (c == 'p' && (end == arg || *end != '\0' || v == 0 || v > UINT32_MAX || arg[0] == '-' ||
                         arg[0] == '+')) {
            fprintf(stderr, "%s: --pid: '%s' is not a process id\n", sel->prog, arg);
            return -1;
        }
        if (c == 'l' && arg[0] == '\0') {
            fprintf(stderr, "%s: --label: the label is empty\n", sel->prog);
            return -1;
        }
        if (c == 'p')
            sel->pid[sel->npid++] = (uint32_t)v;
        else
            sel->label[sel->nlabel++] = arg;
        return 1;
    }
    case 'F':
    case 'T': {
        uint64_t v;
        if (cuptimon__cli_parse_time(arg, &v) < 0) {
            fprintf(stderr,
                    "%s: --%s: '%s' is not a time (Unix ns, or seconds with a fraction, "
                    "optionally with a unit ns/us/ms/s)\n",
                    sel->prog, c == 'F' ? "from" : "to", arg);
            return -1;
        }
        if (c == 'F') {
            sel->from = v;
            sel->have_from = 1;
        } else {
            sel->to = v;
        }
        return 1;
    }
    case 'A': sel->read_all = 1; return 1;
    default: return 0;
    }
}

int cuptimon__cli_select_check(const struct cuptimon_cli_select *sel)
{
    if (sel->have_from && sel->to != 0 && sel->to <= sel->from) {
        fprintf(stderr, "%s: --to (%" PRIu64 ") must be after --from (%" PRIu64 ")\n", sel->prog,
                sel->to, sel->from);
        return -1;
    }
    return 0;
}

int cuptimon__cli_select_picks(const struct cuptimon_cli_select *sel)
{
    return sel->npid + sel->nlabel > 0;
}

int cuptimon__cli_select_picked(struct cuptimon_cli_select *sel,
                                const struct cuptimon_proc_info *info)
{
    int hit = !cuptimon__cli_select_picks(sel);

    for (int i = 0; i < sel->npid; i++)
        if (info->pid == sel->pid[i])
            hit = sel->pid_hit[i] = 1;
    for (int i = 0; i < sel->nlabel; i++)
        if (info->label && strcmp(info->label, sel->label[i]) == 0)
            hit = sel->label_hit[i] = 1;
    return hit;
}

int cuptimon__cli_select_unmatched(const struct cuptimon_cli_select *sel, const char *where)
{
    int unmatched = 0;

    for (int i = 0; i < sel->npid; i++)
        if (!sel->pid_hit[i]) {
            fprintf(stderr, "%s: --pid %" PRIu32 ": no session of that process in %s\n", sel->prog,
                    sel->pid[i], where);
            unmatched = 1;
        }
    for (int i = 0; i < sel->nlabel; i++)
        if (!sel->label_hit[i]) {
            fprintf(stderr, "%s: --label %s: no session with that label in %s\n", sel->prog,
                    sel->label[i], where);
            unmatched = 1;
        }
    return unmatched;
}

uint64_t cuptimon__cli_select_skip_before(const struct cuptimon_cli_select *sel)
{
    if (sel->have_from && !sel->read_all && sel->from > CUPTIMON_CLI_SKIP_MARGIN_NS)
        return sel->from - CUPTIMON_CLI_SKIP_MARGIN_NS;
    return 0;
}

/* ---- sessions ----------------------------------------------------------- */

int cuptimon__cli_find_sessions(const char *prog, const char *root, char ***dirs, size_t *n)
{
    int rc = cuptimon__archive_find_sessions(root, dirs);

    if (rc < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, root, strerror(-rc));
        return 1;
    }
    for (*n = 0; (*dirs)[*n] != NULL; (*n)++)
        ;
    if (*n == 0) {
        fprintf(stderr, "%s: %s: no archive sessions (directories with a meta.json) found\n", prog,
                root);
        cuptimon__archive_free_list(*dirs);
        *dirs = NULL;
        return 1;
    }
    return 0;
}

int cuptimon__cli_open(const char *prog, const char *dir, const char *eacces_hint,
                       struct cuptimon_archive_reader **r)
{
    char *err = NULL;
    int rc = cuptimon__archive_open(dir, r, &err);

    if (rc < 0)
        fprintf(stderr, "%s: %s: %s%s\n", prog, dir, err ? err : strerror(-rc),
                eacces_hint && rc == -EACCES ? eacces_hint : "");
    free(err);
    return rc < 0 ? rc : 0;
}

int cuptimon__cli_session_is_gpm(const char *dir)
{
    struct cuptimon_archive_reader *r;
    int yes;

    if (cuptimon__archive_open(dir, &r, NULL) < 0)
        return 0;
    yes = cuptimon__gpm_is_meta(cuptimon__archive_meta(r));
    cuptimon__archive_close(r);
    return yes;
}

int cuptimon__cli_session_picked(struct cuptimon_cli_select *sel, const char *dir,
                                 struct cuptimon_archive_session *as, const char *eacces_hint)
{
    struct cuptimon_archive_reader *r;

    if (cuptimon__cli_open(sel->prog, dir, eacces_hint, &r) == 0) {
        cuptimon__archive_session_meta(as, cuptimon__archive_meta(r));
        cuptimon__archive_close(r);
    }
    return cuptimon__cli_select_picked(sel, &as->info);
}

/* A session's meta.json is parsed into as with the same layouts as the
 * real pass (which reports their problems); the first chunk is walked by
 * them. */
uint64_t cuptimon__cli_first_time(const char *prog, const char *dir,
                                  struct cuptimon_archive_session *as)
{
    struct cuptimon_archive_reader *r;
    struct cuptimon_archive_chunk c;
    struct cuptimon_decode_stats st;
    uint64_t best = 0;

    if (cuptimon__cli_open(prog, dir, NULL, &r) < 0)
        return 0;
    cuptimon__archive_session_meta(as, cuptimon__archive_meta(r));
    if (cuptimon__archive_next(r, &c) == 1) {
        struct cuptimon_clock clk = {c.hdr.cupti_ts, c.hdr.unix_ns};
        struct cuptimon_walk w;
        struct cuptimon_ev ev;
        memset(&st, 0, sizeof(st));
        cuptimon__walk_begin(&w, &as->layout, c.data, (size_t)c.hdr.raw_size, &st);
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

/* ---- reading one session ------------------------------------------------ */

void cuptimon__cli_report_damage(void *ud, enum cuptimon_archive_damage kind, const char *path,
                                 uint64_t offset, const char *what)
{
    const char *prog = ud;

    (void)kind;
    if (offset == UINT64_MAX)
        fprintf(stderr, "%s: %s: %s\n", prog, path, what);
    else
        fprintf(stderr, "%s: %s: offset %" PRIu64 ": %s\n", prog, path, offset, what);
}

int cuptimon__cli_read_open(const char *prog, const char *dir, const char *eacces_hint,
                            uint64_t skip_before, struct cuptimon_archive_reader **r)
{
    int rc = cuptimon__cli_open(prog, dir, eacces_hint, r);

    if (rc < 0)
        return rc;
    cuptimon__archive_set_report(*r, cuptimon__cli_report_damage, (void *)prog);
    cuptimon__archive_skip_before(*r, skip_before);
    return 0;
}

void cuptimon__cli_udr_refused(const char *prog, const char *dir, const char *what)
{
    fprintf(stderr,
            "%s: %s: the producer's user-defined record layouts: %s; the records of a kind "
            "whose description is refused are counted as undecodable, never misread\n",
            prog, dir, what);
}

int cuptimon__cli_read_strings(const char *prog, const char *dir,
                               struct cuptimon_archive_session *as,
                               struct cuptimon_archive_reader *r)
{
    int rc;

    if (cuptimon__strtab_new(NULL, &as->names) < 0)
        return -ENOMEM;
    rc = cuptimon__archive_session_strings(as, r);
    if (rc < 0)
        fprintf(stderr, "%s: %s: reading strings: %s (names may be missing)\n", prog, dir,
                strerror(-rc));
    if (as->gens_error[0] != '\0')
        cuptimon__cli_udr_refused(prog, dir, as->gens_error);
    return 0;
}

int cuptimon__cli_read_next(struct cuptimon_archive_reader *r,
                            const struct cuptimon_archive_session *as,
                            struct cuptimon_decode_stats *dec, struct cuptimon_archive_chunk *ch,
                            struct cuptimon_walk *w)
{
    int rc = cuptimon__archive_next(r, ch);

    if (rc == 1)
        cuptimon__walk_begin(w, cuptimon__archive_session_layout(as, ch->hdr.index), ch->data,
                             (size_t)ch->hdr.raw_size, dec);
    return rc;
}

void cuptimon__cli_read_close(const char *prog, const char *dir, struct cuptimon_archive_reader *r,
                              int rc, struct cuptimon_archive_stats *ast)
{
    if (rc < 0)
        fprintf(stderr, "%s: %s: reading: %s (the rest of this session is skipped)\n", prog, dir,
                strerror(-rc));
    *ast = *cuptimon__archive_stats(r);
    cuptimon__archive_close(r);
}

void cuptimon__cli_read_damage(const char *prog, const char *dir,
                               const struct cuptimon_archive_stats *ast)
{
    if (ast->corrupt_chunks || ast->torn_tails || ast->corrupt_strings || ast->bad_files ||
        ast->bad_seg_headers || ast->duplicate_chunks)
        fprintf(stderr,
                "%s: %s: skipped %" PRIu64 " corrupt chunk(s), %" PRIu64 " torn tail(s), %" PRIu64
                " byte(s) while resynchronising, %" PRIu64 " corrupt string(s), %" PRIu64
                " unusable file(s), %" PRIu64 " duplicate chunk(s); %" PRIu64
                " damaged segment header(s)\n",
                prog, dir, ast->corrupt_chunks, ast->torn_tails, ast->skipped_bytes,
                ast->corrupt_strings, ast->bad_files, ast->duplicate_chunks, ast->bad_seg_headers);
}

/* ---- --window ----------------------------------------------------------- */

char **cuptimon__cli_window_gpm_dirs(const char *dir)
{
    char *root = strdup(dir), *slash = root ? strrchr(root, '/') : NULL;
    char **gdirs = NULL;

    if (root == NULL)
        return NULL;
    if (slash != NULL && slash != root)
        *slash = '\0';
    if (slash == NULL || slash == root || cuptimon__gpm_find_sessions(root, &gdirs) < 0)
        gdirs = NULL;
    free(root);
    return gdirs;
}

/* ---- output ------------------------------------------------------------- */

int cuptimon__cli_out_open(const char *prog, struct cuptimon_cli_out *o, const char *path)
{
    int rc;

    o->fd = -1;
    o->is_file = 0;
    if (path == NULL || strcmp(path, "-") == 0) {
        o->fd = STDOUT_FILENO;
        return 0;
    }
    rc = cuptimon__outfile_open(&o->f, path, 0644);
    if (rc < 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", prog, path, strerror(-rc));
        return rc;
    }
    o->fd = o->f.fd;
    o->is_file = 1;
    return 0;
}

int cuptimon__cli_out_close(const char *prog, struct cuptimon_cli_out *o, int ok, const char *path)
{
    int rc;

    if (!o->is_file)
        return 0;
    o->is_file = 0;
    rc = cuptimon__outfile_commit(&o->f, ok, 0);
    if (rc < 0 && ok)
        fprintf(stderr, "%s: writing %s: %s\n", prog, path, strerror(-rc));
    return rc;
}

/* ---- the rest ----------------------------------------------------------- */

double cuptimon__cli_mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

char **cuptimon__cli_argv(const char *prog, int argc, char **argv)
{
    char **av = calloc((size_t)argc + 1, sizeof(*av));

    if (av == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return NULL;
    }
    memcpy(av, argv, (size_t)argc * sizeof(*av));
    av[0] = (char *)prog;
    return av;
}

void cuptimon__cli_progress_show(struct cuptimon_cli_progress *p, const char *what, size_t done,
                                 size_t total, int final)
{
    double t = cuptimon__cli_mono_s();
    if (!p->on || (!final && t - p->last < 0.5))
        return;
    p->last = t;
    double el = t - p->t0 > 1e-3 ? t - p->t0 : 1e-3;
    fprintf(stderr, "\r%s: %.2f M records, session %zu of %zu, %.2f M records/s\033[K%s", what,
            (double)p->records / 1e6, done, total, (double)p->records / el / 1e6,
            final ? "\n" : "");
}
