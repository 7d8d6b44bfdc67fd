/* cuptimonctl's subcommands that live in their own files. */
#ifndef CUPTIMON_CLI_H
#define CUPTIMON_CLI_H

/* cuptimonctl decode ...: argv[0] is "decode". Returns the exit status. */
int cuptimon__cli_decode(int argc, char **argv);

/* cuptimonctl merge -o OUT TRACE...: argv[0] is "merge". */
int cuptimon__cli_merge(int argc, char **argv);

#endif
