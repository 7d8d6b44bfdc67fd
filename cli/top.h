/* cuptimonctl top and cuptimonctl metrics (cli/top.c): the daemon's live
 * aggregates (daemon/aggregate.h), through the control ops "top" and
 * "metrics". */
#ifndef CUPTIMON_CLI_TOP_H
#define CUPTIMON_CLI_TOP_H

/* cuptimonctl top ...: argv[0] is "top".  Returns the exit status. */
int cuptimon__cli_top(int argc, char **argv);

/* cuptimonctl metrics ...: argv[0] is "metrics". */
int cuptimon__cli_metrics(int argc, char **argv);

#endif
