#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

int cuptimon__log_level = LOG_INFO;
static int use_prefix;

void cuptimon__log_init(int level)
{
    cuptimon__log_level = level;
    use_prefix = getenv("JOURNAL_STREAM") != NULL;
}

int cuptimon__log_level_parse(const char *s)
{
    static const char *const names[] = {"emerg",   "alert",  "crit", "err",
                                        "warning", "notice", "info", "debug"};
    for (int i = 0; i < 8; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    if (strcmp(s, "error") == 0)
        return LOG_ERR;
    if (strcmp(s, "warn") == 0)
        return LOG_WARNING;
    return -1;
}

void cuptimon__logf(int level, const char *subsys, const char *fmt, ...)
{
    if (level > cuptimon__log_level)
        return;
    static const char *const tags[] = {"emerg",   "alert",  "crit", "error",
                                       "warning", "notice", "info", "debug"};
    char line[2048];
    int n;
    if (use_prefix) {
        n = snprintf(line, sizeof line, "<%d>%s: ", level, subsys);
    } else {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        localtime_r(&ts.tv_sec, &tm);
        n = snprintf(line, sizeof line,
                     "%04d-%02d-%02d %02d:%02d:%02d.%03ld %s %s: ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, tags[level & 7], subsys);
    }
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    n += m;
    if ((size_t)n > sizeof line - 2)
        n = sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
}
