/*
 * Small helpers that every layer uses and that have nothing to do with the
 * wire format: kept apart from cuptimon-proto.h, and in proto/ only
 * because that is the library everyone links.
 */
#ifndef CUPTIMON_UTIL_H
#define CUPTIMON_UTIL_H

#include <sys/types.h>

/*
 * mkdir -p: creates path and every missing directory above it with mode
 * (before the umask).  Directories that exist already are fine; anything
 * else in the way (a file, a symbolic link to one) is -ENOTDIR.  Returns 0
 * or -errno (-EINVAL for an empty path).
 */
int cuptimon__mkdir_p(const char *path, mode_t mode);

#endif
