/*
 * Small helpers shared by every layer (see util.h).
 */
#include "config.h"

#include "util.h"

#include <errno.h>
#include <stdio.h>
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

void cuptimon__uuid_text(char out[CUPTIMON_UUID_TEXT_SIZE], const unsigned char u[16])
{
    snprintf(out, CUPTIMON_UUID_TEXT_SIZE,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15]);
}

int cuptimon__uuid_text_ok(const char *text, size_t len)
{
    if (len != CUPTIMON_UUID_TEXT_SIZE - 1 || memcmp(text, "GPU-", 4) != 0)
        return 0;
    for (size_t i = 4; i < len; i++) {
        int dash = i == 12 || i == 17 || i == 22 || i == 27;
        char c = text[i];
        if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return 0;
    }
    return 1;
}
