/*
 * What cuptimonctl decode and stats share of reading an archive, so that
 * the two commands choose, read and report alike: the options that choose
 * what is read (--from, --to, --pid, --label, --read-all) and their
 * errors, the sessions found under ARCHIVE_DIR, and the reading of one
 * session (opening it, its damage as found, its strings and layout
 * generations, each chunk walked by the layouts it was written with, the
 * session's damage counts), and the file the output goes to.  Every
 * message starts with the command's name, prog ("cuptimonctl decode").
 *
 * What the two do differently on purpose stays in each command: what they
 * say of meta.json and of records not decoded (decode gives the account of
 * each kind, for the trace's reader; stats one line, its tables say the
 * rest), which of CUPTI's drops they count, and their progress lines.
 */
#ifndef CUPTIMON_CLI_READ_H
#define CUPTIMON_CLI_READ_H

#include <stdint.h>

#include "archive/archive.h"
#include "archive/session.h"
#include "cuptimon-proto.h"

struct cuptimon_archive_reader;
struct cuptimon_archive_chunk;
struct cuptimon_archive_stats;
struct cuptimon_walk;

/*
 * --from passes over the chunks completed more than this before it.  A
 * chunk is one CUPTI buffer, and CUPTI writes a record into a buffer only
 * once its activity has ended (the record holds the end time); the shim
 * samples the chunk's clock pair (cupti_ts, unix_ns) when CUPTI hands the
 * buffer over, later still.  In the chunk's own clock mapping, the one
 * cuptimon__ev_in_range() uses, every record of a chunk thus ends at or
 * before the chunk's unix_ns, and a chunk completed before
 * from - CUPTIMON_CLI_SKIP_MARGIN_NS holds no record that --from keeps for
 * its time.  The margin covers CUPTI's error in putting GPU times on the
 * CPU clock (microseconds) many times over.  A producer that stamps its
 * buffers otherwise (bench/replay-producer maps a replayed buffer's first
 * record to its completion: its records end up to ~0.1 s after it) is
 * caught, not trusted: decode counts and reports a read chunk holding a
 * record that ends later than its completion plus the margin, naming
 * --read-all.
 *
 * Nothing bounds the other side: a buffer completed long after --to can
 * hold a record that started before it (a long kernel, a buffer that
 * filled slowly, buffers completed out of order), so --to passes nothing
 * over.  What passing over gives up, and --read-all keeps: the records
 * without a time (external correlations, NVTX marker data, records whose
 * times CUPTI left 0), which --from/--to keep wherever they lie, are not
 * read in such a chunk: an event launched more than the margin before
 * --from that ended after it (a long kernel, a long synchronisation) is
 * kept, but the external correlation record of its launch may lie in a
 * chunk passed over, and it then lacks its external id and annotation;
 * decode's summary's counts by kind lack those records; and records_decoded
 * and the undecodable counts cover the chunks read (each session's
 * chunks_skipped and records_skipped, and the summary's range_skip, say
 * what was passed over).
 */
#define CUPTIMON_CLI_SKIP_MARGIN_NS 1000000000ull

/* ---- choosing what is read ---------------------------------------------- */

#define CUPTIMON_CLI_PICKS_MAX 64

struct cuptimon_cli_select {
    const char *prog;  /* names the command in the messages */
    uint64_t from, to; /* --from (when have_from), --to (0: none) */
    int have_from, read_all;
    uint32_t pid[CUPTIMON_CLI_PICKS_MAX];
    const char *label[CUPTIMON_CLI_PICKS_MAX];
    int npid, nlabel;
    int pid_hit[CUPTIMON_CLI_PICKS_MAX], label_hit[CUPTIMON_CLI_PICKS_MAX];
};

/*
 * Takes option c of the command's getopt_long() table with its argument:
 * 'F' --from=T, 'T' --to=T, 'p' --pid=P, 'l' --label=L, 'A' --read-all
 * (the letters each command's table gives them).  Returns 1 when taken, 0
 * when c is none of them, or -1 after saying what is wrong with arg (the
 * command then exits 2).
 */
int cuptimon__cli_select_opt(struct cuptimon_cli_select *sel, int c, const char *arg);

/* After the options: 0, or -1 after saying that --to is not after --from
 * (exit 2). */
int cuptimon__cli_select_check(const struct cuptimon_cli_select *sel);

/* Whether any --pid or --label was given. */
int cuptimon__cli_select_picks(const struct cuptimon_cli_select *sel);

/* 1 when no --pid/--label was given or the producer info describes
 * matches one of them (marking the values that matched), else 0. */
int cuptimon__cli_select_picked(struct cuptimon_cli_select *sel,
                                const struct cuptimon_proc_info *info);

/* Says of each --pid and --label value that matched no session that where
 * (ARCHIVE_DIR, "the window") has none; 1 when one did not match (the
 * command then fails before writing anything: its output would silently
 * lack what was asked for), else 0. */
int cuptimon__cli_select_unmatched(const struct cuptimon_cli_select *sel, const char *where);

/* Chunks completed before this hold no record that --from keeps for its
 * time (CUPTIMON_CLI_SKIP_MARGIN_NS says why, and what is given up): 0,
 * none may be passed over, without --from or with --read-all. */
uint64_t cuptimon__cli_select_skip_before(const struct cuptimon_cli_select *sel);

/* ---- sessions ----------------------------------------------------------- */

/* The session directories under root (one session directory, or an output
 * root holding many) into *dirs (cuptimon__archive_free_list()) and their
 * number into *n: 0, or 1 after saying why there are none (the exit
 * status). */
int cuptimon__cli_find_sessions(const char *prog, const char *root, char ***dirs, size_t *n);

/* Opens session directory dir: 0, or the reader's negative errno after
 * saying why it could not be opened (with eacces_hint, when not NULL,
 * after a permission error). */
int cuptimon__cli_open(const char *prog, const char *dir, const char *eacces_hint,
                       struct cuptimon_archive_reader **r);

/* Whether dir is a GPU metrics session (archive/gpm.h), which decode and
 * stats never read as CUPTI records; read quietly (a session that cannot
 * be opened is taken for a process session, whose reading says why). */
int cuptimon__cli_session_is_gpm(const char *dir);

/* Opens dir and parses its meta.json into as, saying nothing of it (the
 * reading pass does): whether --pid/--label choose the session. */
int cuptimon__cli_session_picked(struct cuptimon_cli_select *sel, const char *dir,
                                 struct cuptimon_archive_session *as, const char *eacces_hint);

/* The earliest record start (Unix ns) in session dir's first chunk, that
 * chunk's completion when it holds no timed record, or 0 (no chunk, or the
 * session cannot be opened: said).  meta.json is parsed into as, quietly.
 * decode and export put their time base at it, rounded down to a second. */
uint64_t cuptimon__cli_first_time(const char *prog, const char *dir,
                                  struct cuptimon_archive_session *as);

/* ---- reading one session ------------------------------------------------ */

/* Opens dir for reading its chunks: its damage is said on standard error
 * as it is found (the first of each kind; cuptimon__cli_read_damage() gives
 * the counts), and chunks completed before skip_before are passed over
 * (0: none).  0, or < 0 after saying why it could not be opened. */
int cuptimon__cli_read_open(const char *prog, const char *dir, const char *eacces_hint,
                            uint64_t skip_before, struct cuptimon_archive_reader **r);

/* The reader's damage report that cuptimon__cli_read_open() sets: the
 * first damage of each kind in a session, on standard error (the
 * session's line after it, cuptimon__cli_read_damage(), gives the counts);
 * ud is the command's name.  A command that keeps the reports too (export)
 * sets its own and calls this from it. */
void cuptimon__cli_report_damage(void *ud, enum cuptimon_archive_damage kind, const char *path,
                                 uint64_t offset, const char *what);

/* Reads the session's strings and layout generations into as (after its
 * meta.json), saying what is wrong with them: 0, or -ENOMEM. */
int cuptimon__cli_read_strings(const char *prog, const char *dir,
                               struct cuptimon_archive_session *as,
                               struct cuptimon_archive_reader *r);

/* The next chunk of r into *ch, with *w begun on its records by the
 * layouts it was written with (they may change during a session on
 * CUPTI's v2 path), counting into dec: cuptimon__archive_next()'s 1, 0 or
 * < 0. */
int cuptimon__cli_read_next(struct cuptimon_archive_reader *r,
                            const struct cuptimon_archive_session *as,
                            struct cuptimon_decode_stats *dec, struct cuptimon_archive_chunk *ch,
                            struct cuptimon_walk *w);

/* Ends reading: says that reading stopped when rc (the last
 * cuptimon__cli_read_next()'s) is an error, copies the reader's counts into
 * *ast and closes r. */
void cuptimon__cli_read_close(const char *prog, const char *dir, struct cuptimon_archive_reader *r,
                              int rc, struct cuptimon_archive_stats *ast);

/* Says what the reader passed over as damaged in the session, when it
 * passed over anything. */
void cuptimon__cli_read_damage(const char *prog, const char *dir,
                               const struct cuptimon_archive_stats *ast);

/* Says that the producer's user-defined record layouts are refused (what:
 * the reason, from meta.json's layouts or a later generation's) and what
 * that costs. */
void cuptimon__cli_udr_refused(const char *prog, const char *dir, const char *what);

/* ---- --window ----------------------------------------------------------- */

/* The GPU metrics sessions beside a window's process session dir (in its
 * parent directory, the archive), or NULL when none or on error. */
char **cuptimon__cli_window_gpm_dirs(const char *dir);

/* ---- output ------------------------------------------------------------- */

/* Where the output goes: standard output, or a file that appears complete
 * or not at all (a device or FIFO is written in place). */
struct cuptimon_cli_out {
    struct cuptimon_outfile f;
    int fd;
    int is_file; /* not standard output */
};

/* path NULL or "-": standard output.  0, or < 0 after saying why path
 * cannot be written. */
int cuptimon__cli_out_open(const char *prog, struct cuptimon_cli_out *o, const char *path);

/* Closes; ok: renames the temporary file into place (saying so when that
 * fails), else removes it.  0 or < 0. */
int cuptimon__cli_out_close(const char *prog, struct cuptimon_cli_out *o, int ok, const char *path);

/* ---- the rest ----------------------------------------------------------- */

/* CLOCK_MONOTONIC in seconds, for the progress lines. */
double cuptimon__cli_mono_s(void);

/* The progress line of stats and export on a terminal (on: standard error
 * is one and -q was not given; t0 and last: cuptimon__cli_mono_s() at the
 * start; records: added up by the caller), rewritten at most twice a
 * second ("WHAT: N M records, session I of N, R M records/s"); final ends
 * it. */
struct cuptimon_cli_progress {
    int on;
    double t0, last;
    uint64_t records;
};
void cuptimon__cli_progress_show(struct cuptimon_cli_progress *p, const char *what, size_t done,
                                 size_t total, int final);

/* A copy of argv (argc entries and a NULL) whose argv[0] is prog, as
 * getopt names argv[0] in its messages; NULL after saying that memory ran
 * out.  Freed with free(). */
char **cuptimon__cli_argv(const char *prog, int argc, char **argv);

#endif
