/* splitmix64's finaliser, for the archive library's hash tables: keys
 * (pointers, chunk identities) differ mostly in their middle bits, so their
 * low bits alone hash badly. */
#ifndef CUPTIMON_ARCHIVE_HASH_H
#define CUPTIMON_ARCHIVE_HASH_H

#include <stdint.h>

static inline uint64_t cuptimon__mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

#endif
