/* cuptimonctl top and cuptimonctl metrics (cli/top.c): the daemon's live
 * aggregates (daemon/aggregate.h), through the control ops "top" and
 * "metrics". */
#ifndef CUPTIMON_CLI_TOP_H
#define CUPTIMON_CLI_TOP_H

struct cuptimon_ctl;

/* cuptimonctl top ...: argv[0] is "top"; ctl is the client the global
 * options set up (a -c of its own overrides the socket).  Returns the exit
 * status. */
int cuptimon__cli_top(const struct cuptimon_ctl *ctl, int argc, char **argv);

/* cuptimonctl metrics ...: argv[0] is "metrics"; ctl as for top. */
int cuptimon__cli_metrics(const struct cuptimon_ctl *ctl, int argc, char **argv);

#endif
