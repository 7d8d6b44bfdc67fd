/*
 * Small helpers that every layer uses and that have nothing to do with the
 * wire format: kept apart from cuptimon-proto.h, and in proto/ only
 * because that is the library everyone links.
 */
#ifndef CUPTIMON_UTIL_H
#define CUPTIMON_UTIL_H

#include <stddef.h>
#include <sys/types.h>

/*
 * mkdir -p: creates path and every missing directory above it with mode
 * (before the umask).  Directories that exist already are fine; anything
 * else in the way (a file, a symbolic link to one) is -ENOTDIR.  Returns 0
 * or -errno (-EINVAL for an empty path).
 */
int cuptimon__mkdir_p(const char *path, mode_t mode);

/*
 * A GPU's UUID (the driver's CUuuid bytes) as nvidia-smi, DCGM and the
 * NVIDIA_VISIBLE_DEVICES of containers write it: "GPU-" and 32 lowercase hex
 * digits in groups 8-4-4-4-12, NUL-terminated in out.  The shim and the
 * daemon both write it, and readers match the two by it.
 */
#define CUPTIMON_UUID_TEXT_SIZE 41
void cuptimon__uuid_text(char out[CUPTIMON_UUID_TEXT_SIZE], const unsigned char u[16]);
/* Whether text (len bytes, not NUL-terminated) is such a UUID. */
int cuptimon__uuid_text_ok(const char *text, size_t len);

#endif
