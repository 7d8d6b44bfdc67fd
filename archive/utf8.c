/* UTF-8 validation (utf8.h). */
#include "config.h"

#include "utf8.h"

/* The byte ranges are those of the Unicode standard's table of well-formed
 * sequences (chapter 3, table 3-7): the second byte's range after E0, ED,
 * F0 and F4 is what rules out overlong forms, surrogates and code points
 * past U+10FFFF without decoding the code point. */
size_t cuptimon__utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        if (n >= 2 && (s[1] & 0xc0) == 0x80)
            return 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        unsigned lo = 0x80, hi = 0xbf;
        if (c == 0xe0)
            lo = 0xa0; /* overlong */
        if (c == 0xed)
            hi = 0x9f; /* surrogates */
        if (n >= 3 && s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80)
            return 3;
    } else if (c >= 0xf0 && c <= 0xf4) {
        unsigned lo = 0x80, hi = 0xbf;
        if (c == 0xf0)
            lo = 0x90; /* overlong */
        if (c == 0xf4)
            hi = 0x8f; /* > U+10FFFF */
        if (n >= 4 && s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80)
            return 4;
    }
    return 0;
}
