/*
 * UTF-8 validation, shared by the trace writer's JSON strings
 * (archive/trace.c) and the daemon's Prometheus label values
 * (daemon/aggregate-prom.c), so that both accept and replace the same bytes.
 */
#ifndef CUPTIMON_UTF8_H
#define CUPTIMON_UTF8_H

#include <stddef.h>

/*
 * The length (1 to 4) of the well-formed UTF-8 sequence at s, where n >= 1
 * bytes are left, or 0 when there is none: a stray continuation byte, a
 * truncated sequence, an overlong form, a surrogate (U+D800..U+DFFF) or a
 * code point past U+10FFFF.  An ASCII byte (NUL included) is a sequence of 1.
 */
size_t cuptimon__utf8_len(const unsigned char *s, size_t n);

#endif
