/* cuptimonctl's subcommands that live in their own files. */
#ifndef CUPTIMON_CLI_H
#define CUPTIMON_CLI_H

#include <stdint.h>

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

#endif
