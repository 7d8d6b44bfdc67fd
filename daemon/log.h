/* Daemon logging: syslog levels, one line per message, naming the
 * subsystem ("archive: rotate failed: ..."). Under systemd (JOURNAL_STREAM
 * set) lines carry "<N>" level prefixes that journald understands. */
#ifndef CUPTIMON_LOG_H
#define CUPTIMON_LOG_H

#include <syslog.h>

extern int cuptimon__log_level;
void cuptimon__log_init(int level);
int cuptimon__log_level_parse(const char *s);
void cuptimon__logf(int level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_err(sub, ...)    cuptimon__logf(LOG_ERR, sub, __VA_ARGS__)
#define log_warn(sub, ...)   cuptimon__logf(LOG_WARNING, sub, __VA_ARGS__)
#define log_notice(sub, ...) cuptimon__logf(LOG_NOTICE, sub, __VA_ARGS__)
#define log_info(sub, ...)   cuptimon__logf(LOG_INFO, sub, __VA_ARGS__)
#define log_debug(sub, ...)                                                                        \
    do {                                                                                           \
        if (cuptimon__log_level >= LOG_DEBUG)                                                      \
            cuptimon__logf(LOG_DEBUG, sub, __VA_ARGS__);                                           \
    } while (0)

#endif
