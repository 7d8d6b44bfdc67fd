/*
 * The per-kind record delta: a reversible transform of a buffer of CUPTI
 * records that makes it compress 2.5 times better (chunk codec
 * CUPTIMON_CODEC_ZSTD_RDELTA, archive.h).
 *
 * CUPTI records of one kind are fixed-size structs whose neighbouring
 * fields change little (timestamps, correlation ids, grid sizes, stream
 * ids), but records of several kinds are interleaved in a buffer, so a
 * generic compressor sees no regular stride.  The transform walks the
 * records as the decoder does (kind at offset 0, size by kind) and
 * replaces each 8-byte word of a record with its difference (mod 2^64)
 * from the same word of the previous record of the same kind; the kind
 * itself (the low 32 bits of word 0) is kept as it is, so that the inverse
 * can walk the transformed bytes.  A kind's first record is kept as it is.
 *
 * Encoded form, n = len + 8 + 8 * nkinds bytes:
 *   [len bytes]  the records, transformed, up to the walked prefix P;
 *                after P (an unknown kind, a size this walk does not
 *                know, or a record cut short) the bytes as they were
 *   [8 * nkinds] the kinds walked, ascending: u32 kind, u32 record size
 *   [u32 nkinds] [u32 P]
 * All little-endian.  The sizes travel with the chunk, so the inverse
 * needs nothing else (no meta.json, no layout table), and the first len
 * bytes are the records' own positions, so the inverse works in place.
 *
 * Every byte of an encoded form is untrusted: the inverse checks the
 * trailer (kinds below CUPTIMON_RDELTA_KINDS, no kind twice, sizes of
 * 8..CUPTIMON_RDELTA_RECORD_MAX in steps of 8, P within len) and that the
 * walk of the prefix lands exactly on P, and reads nothing outside.
 */
#ifndef CUPTIMON_RDELTA_H
#define CUPTIMON_RDELTA_H

#include <stddef.h>
#include <stdint.h>

/* Kinds are below this (CUPTIMON_KIND_SLOTS, decode.h); record sizes at
 * most this (CUPTIMON_RECORD_MAX). */
#define CUPTIMON_RDELTA_KINDS      64u
#define CUPTIMON_RDELTA_RECORD_MAX 4096u
/* The most an encoded form adds to the records' bytes. */
#define CUPTIMON_RDELTA_MAX_EXTRA (8u + 8u * CUPTIMON_RDELTA_KINDS)

/* Encodes len bytes of records at src into out (room for len +
 * CUPTIMON_RDELTA_MAX_EXTRA bytes; out must not overlap src), walking them
 * by sizes[kind] (0, or a size that is not 8..RECORD_MAX in steps of 8:
 * the kind is not walked).  Returns the encoded length; *walked (may be
 * NULL) gets P, the bytes of records transformed. */
size_t cuptimon__rdelta_encode(const uint16_t sizes[CUPTIMON_RDELTA_KINDS], const uint8_t *src,
                               size_t len, uint8_t *out, size_t *walked);

/* Undoes cuptimon__rdelta_encode in place: buf holds n encoded bytes; on
 * success its first *len bytes are the records and 0 is returned; -EBADMSG
 * when the encoded form is not one (buf is then partly changed). */
int cuptimon__rdelta_decode(uint8_t *buf, size_t n, size_t *len);

#endif
