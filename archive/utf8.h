/*
 * UTF-8 validation, shared by the trace writer's JSON strings
 * (archive/trace.c) and the daemon's Prometheus label values
 * (daemon/aggregate-prom.c), so that both accept and replace the same bytes;
 * and the width of characters on a terminal, for cuptimonctl's tables.
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

/*
 * The code point of the well-formed sequence of len bytes at s (len from
 * cuptimon__utf8_len(), 1 to 4).
 */
unsigned long cuptimon__utf8_cp(const unsigned char *s, size_t len);

/*
 * The columns a terminal gives code point cp: 0 for combining marks and
 * zero-width characters, 2 for East Asian wide and fullwidth characters
 * (CJK, Hangul, kana, fullwidth forms, most emoji), else 1.  A compact
 * table of the common ranges, the same on every machine (wcwidth() depends
 * on the locale, and a C locale knows no wide character); control
 * characters are the caller's to replace (they get 1).
 */
int cuptimon__ucs_width(unsigned long cp);

#endif
