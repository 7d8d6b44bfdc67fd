/*
 * cuptimonctl decode: the always-on archive -> Chrome/Perfetto trace JSON
 * (+ summary).  Declared in cli.h as well, for cli/main.c.
 */
#ifndef CUPTIMON_CLI_DECODE_H
#define CUPTIMON_CLI_DECODE_H

#include <stdint.h>

/* cuptimonctl decode ...: argv[0] is "decode".  Returns the exit status
 * (0 ok, 1 failure, 2 usage). */
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

#endif
