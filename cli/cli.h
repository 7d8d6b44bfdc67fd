/* cuptimonctl's subcommands that live in their own files. */
#ifndef CUPTIMON_CLI_H
#define CUPTIMON_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "archive/stats.h"

/* cuptimonctl decode ...: the always-on archive -> Chrome/Perfetto trace
 * JSON (+ summary).  argv[0] is "decode".  Returns the exit status (0 ok,
 * 1 failure, 2 usage). */
int cuptimon__cli_decode(int argc, char **argv);

/*
 * Parses a time for --from/--to into Unix ns.  Accepted:
 *   1796208557090027706     an integer >= 10^12 is nanoseconds
 *   1796208557              an integer below 10^12 is seconds
 *   1796208557.090027706    a decimal point means seconds (up to 9 decimals kept)
 *   ...ns / ...us / ...ms / ...s   an explicit unit suffix
 * Returns 0 or -EINVAL.
 */
int cuptimon__cli_parse_time(const char *s, uint64_t *ns);

/* cuptimonctl merge -o OUT TRACE...: argv[0] is "merge". */
int cuptimon__cli_merge(int argc, char **argv);

/* cuptimonctl stats ARCHIVE_DIR ... | --window ID ...: the summary tables of
 * an archive (cli/stats.c); ctl reaches the daemon for --window.  argv[0]
 * is "stats".  Returns the exit status (0 ok, 1 failure, 2 usage). */
struct cuptimon_ctl;
int cuptimon__cli_stats(struct cuptimon_ctl *ctl, int argc, char **argv);

/* cuptimonctl export ARCHIVE_DIR --type sqlite -o FILE ... | --window ID ...:
 * the archive as an SQLite database in Nsight Systems' export schema
 * (cli/export.c).  argv[0] is "export".  Returns the exit status. */
int cuptimon__cli_export(struct cuptimon_ctl *ctl, int argc, char **argv);

/* cuptimonctl gpu-metrics [status|pause|resume] (cli/gpumetrics.c). */
int cuptimon__cli_gpu_metrics(struct cuptimon_ctl *ctl, int argc, char **argv);

/* Writes the rows of one statistics report (archive/stats.h: the JSON
 * objects cuptimon__stats_rows() makes) to f: an aligned table, each line
 * starting with indent, text shortened in the middle to fit width columns
 * (0: never shortened); or, with csv, a header row and one row per row,
 * the report's name first.  0 or -ENOMEM. */
struct json_object;
int cuptimon__cli_stats_print(FILE *f, enum cuptimon_stats_report r, struct json_object *rows,
                              int csv, unsigned width, const char *indent);

/* The columns of the terminal f writes to, or 0 when it is not one. */
unsigned cuptimon__cli_term_width(FILE *f);

#endif
