/*
 * Small helpers shared by every layer (see util.h).
 */
#include "config.h"

#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* mkdir(2) that takes an existing directory as success.  EEXIST alone
 * would also accept a file of that name, and the caller would fail later,
 * further from the cause. */
static int mkdir_one(const char *path, mode_t mode)
{
    struct stat st;

    if (mkdir(path, mode) == 0)
        return 0;
    if (errno != EEXIST)
        return -errno;
    if (stat(path, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int cuptimon__mkdir_p(const char *path, mode_t mode)
{
    char *tmp, *p;
    int rc = 0;

    if (path == NULL || *path == '\0')
        return -EINVAL;
    tmp = strdup(path);
    if (tmp == NULL)
        return -ENOMEM;
    /* Each prefix that ends before a '/', then the whole path; the first
     * character is skipped so that an absolute path does not try "". */
    for (p = tmp + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        rc = mkdir_one(tmp, mode);
        *p = '/';
        if (rc < 0)
            goto out;
    }
    rc = mkdir_one(tmp, mode);
out:
    free(tmp);
    return rc;
}
