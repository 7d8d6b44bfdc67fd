/* cuptimonctl top and cuptimonctl metrics (cli/top.c): the daemon's live
 * aggregates (daemon/aggregate.h), through the control ops "top" and
 * "metrics". */
#ifndef CUPTIMON_CLI_TOP_H
#define CUPTIMON_CLI_TOP_H
#include <stddef.h>

struct cuptimon_ctl;

/* cuptimonctl top ...: argv[0] is "top"; ctl is the client the global
 * options set up (a -c of its own overrides the socket).  Returns the exit
 * status. */
int cuptimon__cli_top(const struct cuptimon_ctl *ctl, int argc, char **argv);

/* One line on an NCCL communicator of a process (an element of status's
 * nccl.communicators or of a top row's nccl), for status and top: its
 * name and id, the rank, the last collective completed and the one in
 * flight with its age, the job's strings made safe for a terminal. */
struct json_object;
void cuptimon__cli_nccl_line(struct json_object *c, char *out, size_t len);

/* text made safe for a terminal (control characters and invalid UTF-8
 * become '?') and cut to width columns; malloc'd, NULL without memory. */
char *cuptimon__cli_cut(const char *text, size_t width);

/* cuptimonctl metrics ...: argv[0] is "metrics"; ctl as for top. */
int cuptimon__cli_metrics(const struct cuptimon_ctl *ctl, int argc, char **argv);

#endif
