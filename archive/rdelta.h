/*
 * The per-kind record delta: a reversible transform of a buffer of CUPTI
 * records that makes it compress 2.5 to 5 times better (chunk codec
 * CUPTIMON_CODEC_ZSTD_RDELTA, archive.h).
 *
 * CUPTI records of one kind are fixed-size structs whose neighbouring
 * fields change little (timestamps, correlation ids, grid sizes, stream
 * ids), but records of several kinds are interleaved in a buffer, so a
 * generic compressor sees no regular stride.  The transform walks the
 * records as the decoder does (kind at offset 0, size by kind), replaces
 * each 8-byte word of a record with its difference (mod 2^64) from the
 * same word of the previous record of the same kind (a kind's first record
 * from 0), and stores the differences by column: for each kind, all its
 * records' word 0, then all their word 1, and so on (struct of arrays), so
 * that each field's small differences sit together.  The order of the
 * records is kept as one byte per record, its kind.
 *
 * Encoded form, for len bytes of which the first P are R whole records:
 *   [P bytes]    the columns: for each kind walked, ascending, for each of
 *                its words w (size / 8 of them), its records' word w
 *                differences in record order (count_k * size_k bytes)
 *   [R bytes]    the kind of each record, in buffer order
 *   [len - P]    the rest of the buffer as it was: the walk stops at a
 *                kind whose size it does not know, or a record cut short
 *   [8 * nkinds] the kinds walked, ascending: u32 kind, u32 record size
 *   [u32 nkinds] [u32 P] [u32 R]
 * All little-endian.  The sizes travel with the chunk, so the inverse
 * needs nothing else (no meta.json, no layout table).
 *
 * Every byte of an encoded form is untrusted: the inverse checks the
 * trailer (kinds below CUPTIMON_RDELTA_KINDS, no kind twice, sizes of
 * 8..CUPTIMON_RDELTA_RECORD_MAX in steps of 8, P and R within the form),
 * that every kind in the sequence is in the table and that the records'
 * sizes add up to P exactly, and reads and writes nothing outside.
 */
#ifndef CUPTIMON_RDELTA_H
#define CUPTIMON_RDELTA_H

#include <stddef.h>
#include <stdint.h>

/* Kinds are below this (CUPTIMON_KIND_SLOTS, decode.h); record sizes at
 * most this (CUPTIMON_RECORD_MAX). */
#define CUPTIMON_RDELTA_KINDS      64u
#define CUPTIMON_RDELTA_RECORD_MAX 4096u
/* The most the trailer takes. */
#define CUPTIMON_RDELTA_TRAILER_MAX (12u + 8u * CUPTIMON_RDELTA_KINDS)
/* The most an encoded form of len bytes takes: a kind byte per record
 * (records are 8 bytes or more) and the trailer. */
#define CUPTIMON_RDELTA_BOUND(len) ((len) + (len) / 8 + CUPTIMON_RDELTA_TRAILER_MAX)

/* Encodes len bytes of records at src into out (room for
 * CUPTIMON_RDELTA_BOUND(len) bytes; out must not overlap src), walking
 * them by sizes[kind] (0, or a size that is not 8..RECORD_MAX in steps of
 * 8: the kind is not walked).  Returns the encoded length, or 0 with out
 * untouched when the records walked are fewer than min_walk bytes (the
 * writer transforms a chunk only when they are most of it); *walked (may
 * be NULL) gets P, the bytes of records walked, either way. */
size_t cuptimon__rdelta_encode(const uint16_t sizes[CUPTIMON_RDELTA_KINDS], const uint8_t *src,
                               size_t len, size_t min_walk, uint8_t *out, size_t *walked);
/* The length of the records an encoded form of n bytes holds, or -EBADMSG
 * when its trailer is not one (the rest is checked by decoding). */
int64_t cuptimon__rdelta_length(const uint8_t *in, size_t n);

/* Undoes cuptimon__rdelta_encode: the n encoded bytes at in become
 * *len bytes of records at out (room for cap bytes; out must not overlap
 * in).  0, or -EBADMSG when the encoded form is not one or would not fit
 * (out is then partly written). */
int cuptimon__rdelta_decode(const uint8_t *in, size_t n, uint8_t *out, size_t cap, size_t *len);

/* 0 when the n encoded bytes at in decode to exactly the len bytes at
 * raw, else -EBADMSG: cuptimon__rdelta_decode's walk, comparing each
 * record as it is restored instead of keeping it, so that a writer checks
 * its own output without a buffer the size of a chunk. */
int cuptimon__rdelta_verify(const uint8_t *in, size_t n, const uint8_t *raw, size_t len);

#endif
