/*
 * The always-on archive: on-disk format, writer and reader.
 *
 * One directory per producer session:
 *   meta.json         identity, CUPTI version, record sizes, clocks, pool
 *   strings.bin       pointer -> name entries, so that kernel names survive
 *   seg-NNNNNN.cpt    append-only segments of chunks, rotated by size
 *
 * A segment starts with a 16-byte file header ("CPTMSEG1", u32 version,
 * u32 cupti_version) followed by chunks.  cupti_version is the producer's
 * CUPTI API version, from meta.json, so that the records of a session whose
 * meta.json is lost can still be decoded; 0 where it is not known (and in
 * segments written before it was kept: the field was reserved, written as 0
 * and never read, so no version bump was needed).  A chunk is a 96-byte header and
 * stored_size payload bytes.  All integers are little-endian.  A chunk's
 * header carries its own CRC32C and one for the payload as stored, so a
 * torn tail after a crash, or a flipped bit, is detected and skipped.
 *
 * A chunk's codec says how its payload holds the records: as they are
 * (RAW), one zstd frame of them (ZSTD), or one zstd frame of them after
 * the per-kind record delta of rdelta.h (ZSTD_RDELTA: the frame holds
 * the records' transform, raw_size bytes, a byte per record and a
 * trailer; at most CUPTIMON_RDELTA_BOUND(raw_size)).  Chunks of codec ZSTD_RDELTA are written as chunk version 2,
 * so that a reader from before it says "a version this reader does not
 * know" rather than "damaged"; RAW and ZSTD chunks stay version 1, and
 * this reader reads both.
 *
 * strings.bin starts with "CPTMSTR1" + u32 version + u32 reserved, then
 * entries: u64 ptr, u32 len, u32 crc32c(ptr, len, bytes), bytes[len].
 *
 * Bump the matching version on any layout change; readers keep reading
 * every older version.
 */
#ifndef CUPTIMON_ARCHIVE_H
#define CUPTIMON_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CUPTIMON_SEG_MAGIC    "CPTMSEG1"
#define CUPTIMON_SEG_VERSION  1u
#define CUPTIMON_SEG_HDR_SIZE 16u

#define CUPTIMON_CHUNK_MAGIC    "CPTMCHNK"
#define CUPTIMON_CHUNK_VERSION  1u
#define CUPTIMON_CHUNK_HDR_SIZE 96u
/* A chunk never holds more than this (the pool's largest slot). */
#define CUPTIMON_CHUNK_MAX_RAW (256u << 20)

/* The version of chunks of codec CUPTIMON_CODEC_ZSTD_RDELTA. */
#define CUPTIMON_CHUNK_VERSION_RDELTA 2u

#define CUPTIMON_STR_MAGIC     "CPTMSTR1"
#define CUPTIMON_STR_VERSION   1u
#define CUPTIMON_STR_HDR_SIZE  16u
#define CUPTIMON_STR_ENTRY_HDR 16u

enum cuptimon_codec {
    CUPTIMON_CODEC_RAW = 0,
    CUPTIMON_CODEC_ZSTD = 1,
    CUPTIMON_CODEC_ZSTD_RDELTA = 2, /* per-kind record delta, then zstd (rdelta.h) */
};

struct cuptimon_chunk_hdr {
    uint32_t version;
    uint32_t header_size;
    uint64_t index;       /* the producer's buffer sequence number */
    uint32_t stream_id;   /* CUPTI streamId of the completion */
    uint32_t codec;       /* enum cuptimon_codec */
    uint64_t context;     /* CUcontext value, opaque */
    uint64_t cupti_ts;    /* CUPTI timestamp at completion ... */
    uint64_t unix_ns;     /* ... and CLOCK_REALTIME next to it */
    uint64_t raw_size;    /* bytes of CUPTI records */
    uint64_t stored_size; /* payload bytes on disk */
    uint64_t dropped;     /* records CUPTI dropped for this ctx/stream */
    uint64_t records;     /* records the shim counted */
    uint32_t payload_crc; /* CRC32C of the stored payload */
    uint32_t header_crc;  /* CRC32C of header bytes [0, 92) */
};

uint32_t cuptimon__crc32c(uint32_t crc, const void *buf, size_t len);

void cuptimon__chunk_hdr_encode(uint8_t out[CUPTIMON_CHUNK_HDR_SIZE],
                                const struct cuptimon_chunk_hdr *h);
/* 0, or -EBADMSG (magic, header CRC, sizes out of range), -EPROTO (a
 * version this reader does not know). */
int cuptimon__chunk_hdr_decode(const uint8_t in[CUPTIMON_CHUNK_HDR_SIZE],
                               struct cuptimon_chunk_hdr *h);

/* Writes all of buf to fd (retrying short writes and EINTR): 0, -errno,
 * or -EIO when the file takes no more. */
int cuptimon__write_all(int fd, const void *buf, size_t len);

/* ---- writer (one per session; called from one thread at a time) ------ */

struct cuptimon_archive_writer;

/* Creates dir (and its parents) and writes meta.json there.  level: zstd
 * compression level for chunk payloads, 0 = store raw.  seg_max: rotate
 * segments past this many bytes. */
int cuptimon__aw_open(const char *dir, const char *meta_json, uint64_t seg_max, int level,
                      struct cuptimon_archive_writer **out, char **err);
/* Appends one chunk; h's codec, stored_size and CRCs are filled in here.
 * Returns 0 or -errno (nothing partial stays behind: a failed write is
 * truncated away so that the segment stays readable).  With record sizes
 * set (cuptimon__aw_set_record_sizes) and a compression level, the chunk
 * is written as CUPTIMON_CODEC_ZSTD_RDELTA where the transform walks at
 * least one record and is undone exactly (checked on the bytes that are
 * compressed, before anything is written); where it is not, the chunk is
 * written as plain zstd and counted (cuptimon__aw_rdelta_fallbacks). */
int cuptimon__aw_chunk(struct cuptimon_archive_writer *w, struct cuptimon_chunk_hdr *h,
                       const uint8_t *data);
/* Appends the entries of a validated STRINGS message body. */
int cuptimon__aw_strings(struct cuptimon_archive_writer *w, const uint8_t *body, size_t len);
/* Atomically replaces meta.json. */
int cuptimon__aw_meta(struct cuptimon_archive_writer *w, const char *meta_json);
uint64_t cuptimon__aw_bytes(const struct cuptimon_archive_writer *w);
/* The producer's record size per CUpti_ActivityKind (CUPTIMON_KIND_SLOTS
 * of them, 0 where not known: the walk's sizes, cuptimon_layout.size), for
 * the per-kind record delta of the chunks from now on; NULL: none, the
 * default (chunks are plain zstd: the writer of a GPU metrics session,
 * whose chunks are not CUPTI records).  Sizes change what compresses how
 * well, never what reads back: each chunk carries the sizes it was
 * transformed by. */
void cuptimon__aw_set_record_sizes(struct cuptimon_archive_writer *w, const uint16_t *sizes);
/* Chunks written as plain zstd because their transform was not undone
 * exactly (never, unless something is broken). */
uint64_t cuptimon__aw_rdelta_fallbacks(const struct cuptimon_archive_writer *w);
/* Tests only: when set, called on each transformed buffer before it is
 * compressed and checked, so that a test can damage it. */
extern void (*cuptimon__aw_rdelta_test_hook)(uint8_t *buf, size_t n);
void cuptimon__aw_close(struct cuptimon_archive_writer *w);

/* What compressing a chunk needs (a zstd context and an output buffer),
 * apart from any one writer, so that a thread that serves many sessions
 * makes it once (issue 49).  A writer uses its own unless one is lent to
 * it; either way the buffer is sized once for every chunk up to
 * CUPTIMON_AW_SCRATCH_MIN_RAW bytes, and past that grows by powers of two
 * (never copied).  One thread at a time: lend it for a batch of chunks,
 * then take it back (cuptimon__aw_lend(w, NULL)). */
#define CUPTIMON_AW_SCRATCH_MIN_RAW ((size_t)4 << 20)
struct cuptimon_aw_scratch;
struct cuptimon_aw_scratch *cuptimon__aw_scratch_new(void);
void cuptimon__aw_lend(struct cuptimon_archive_writer *w, struct cuptimon_aw_scratch *sc);
/* Gives the buffer back when it was grown past chunks of keep_raw bytes
 * (a producer with huge slots must not leave every worker holding one). */
void cuptimon__aw_scratch_trim(struct cuptimon_aw_scratch *sc, size_t keep_raw);
void cuptimon__aw_scratch_free(struct cuptimon_aw_scratch *sc);

/* ---- reader ----------------------------------------------------------- */

/*
 * The reader takes every file of a session as untrusted: each is opened
 * without following a symbolic link and without blocking, and must be a
 * regular file (a FIFO, device or directory in its place is refused, not
 * opened for reading); sizes come from fstat() and every read is a pread()
 * checked against them, so a file that shrinks under the reader (a live
 * segment, or a hostile one) ends early instead of faulting, and no buffer
 * is ever larger than what the file holds.  Damage costs what it covers:
 * a damaged segment header or chunk is passed over to the next chunk magic
 * (holes of a sparse file are skipped without reading them), a damaged
 * strings entry to the next entry whose CRC holds, an unreadable segment to
 * the next segment, and a chunk read before (a copied segment) is skipped.
 */

struct cuptimon_archive_chunk {
    struct cuptimon_chunk_hdr hdr;
    const uint8_t *data; /* raw_size bytes of CUPTI records (decompressed) */
    const char *segment; /* file it came from */
    uint64_t offset;     /* offset of the chunk header in that file */
};

struct cuptimon_archive_stats {
    uint64_t segments;
    uint64_t chunks;
    uint64_t bytes_raw;
    uint64_t bytes_stored;
    uint64_t corrupt_chunks; /* bad CRC / bad header, skipped */
    uint64_t torn_tails;     /* segment ended inside a chunk */
    uint64_t skipped_bytes;  /* bytes passed over while resynchronising */
    uint64_t strings;
    uint64_t corrupt_strings;  /* damaged entries (and bytes up to the next good one) */
    uint64_t bad_files;        /* not a regular file, or unreadable: passed over */
    uint64_t bad_seg_headers;  /* a segment whose file header is damaged */
    uint64_t duplicate_chunks; /* a chunk read before (same index, size, CRC, time) */
    uint64_t meta_damaged;     /* 1: meta.json missing, not a regular file or unreadable */
    /* Chunks passed over by cuptimon__archive_skip_before(): counted in
     * chunks, bytes_raw and bytes_stored too, as their headers give them,
     * but their payloads were neither read, CRC-checked nor decompressed. */
    uint64_t range_chunks;
    uint64_t range_records; /* the records their headers count */
    uint64_t range_bytes;   /* their bytes in the segments, headers included */
    uint64_t range_dropped; /* the records their headers say CUPTI dropped */
};

/* Kinds of damage, for the report callback (each kind is reported once
 * per reader: the first occurrence; the stats count them all). */
enum cuptimon_archive_damage {
    CUPTIMON_DAMAGE_META = 0,   /* meta.json missing, not regular, unreadable */
    CUPTIMON_DAMAGE_BAD_FILE,   /* a segment or strings.bin not regular or unreadable */
    CUPTIMON_DAMAGE_SEG_HEADER, /* a segment's file header */
    CUPTIMON_DAMAGE_CHUNK,      /* a chunk header, payload CRC or compressed payload */
    CUPTIMON_DAMAGE_TORN,       /* a segment ending inside a chunk */
    CUPTIMON_DAMAGE_DUPLICATE,  /* a chunk read before */
    CUPTIMON_DAMAGE_STRINGS,    /* strings.bin's header or an entry */
    CUPTIMON_DAMAGE_KINDS
};

/* path: the file; offset: where in it, or UINT64_MAX when that does not
 * apply; what: a sentence saying what was found and what it costs. */
typedef void (*cuptimon_archive_report_fn)(void *ud, enum cuptimon_archive_damage kind,
                                           const char *path, uint64_t offset, const char *what);

struct cuptimon_archive_reader;

/* Opens a session directory: one holding meta.json, or segments or
 * strings.bin without a usable meta.json (cuptimon__archive_meta() is then
 * NULL, and the reason is reported as CUPTIMON_DAMAGE_META).  Returns 0 or
 * -errno (-ENOENT: none of those files is there); *err (when not NULL)
 * gets a malloc'd message naming the problem. */
int cuptimon__archive_open(const char *dir, struct cuptimon_archive_reader **out, char **err);
void cuptimon__archive_close(struct cuptimon_archive_reader *r);

/* Damage found from now on goes to fn (NULL: none, the default); damage
 * found while opening (meta.json) is handed to it at once. */
void cuptimon__archive_set_report(struct cuptimon_archive_reader *r, cuptimon_archive_report_fn fn,
                                  void *ud);

/* meta.json as text (NUL-terminated, owned by the reader), or NULL when
 * the session has none that could be read. */
const char *cuptimon__archive_meta(const struct cuptimon_archive_reader *r);

/* Calls fn for each string entry of strings.bin, in file order; a damaged
 * entry is counted and reported, and reading goes on at the next entry
 * whose CRC holds.  A strings.bin that is missing has no entries; one that
 * is not a regular file, or unreadable, is reported and has none. */
int cuptimon__archive_strings(struct cuptimon_archive_reader *r,
                              int (*fn)(void *ud, uint64_t ptr, const char *s, size_t len),
                              void *ud);

/* Returns 1 with *c filled (valid until the next call), 0 at the end, or
 * -ENOMEM.  Corrupt chunks, torn tails, duplicated chunks and unreadable
 * segments are skipped and counted in the stats (and reported), never
 * returned. */
int cuptimon__archive_next(struct cuptimon_archive_reader *r, struct cuptimon_archive_chunk *c);

/*
 * From now on, chunks whose header gives a completion time (unix_ns)
 * before unix_ns are passed over: their header is read and checked (CRC,
 * sizes, and whether the chunk was read before), their payload is
 * neither read nor decompressed, and cuptimon__archive_next() does not
 * return them; they are counted in the stats' range_* members.  0 (the
 * default) passes over none.  Which chunks may be passed over is the
 * caller's to decide: a chunk's header says when its buffer was
 * completed, which bounds when its records ended (CUPTI writes a record
 * once its activity has ended), not when they started.
 */
void cuptimon__archive_skip_before(struct cuptimon_archive_reader *r, uint64_t unix_ns);

const struct cuptimon_archive_stats *cuptimon__archive_stats(
    const struct cuptimon_archive_reader *r);

/* Lists session directories under an output dir (or the dir itself when it
 * is one), sorted; *dirs is a NULL-terminated malloc'd array.  A session
 * directory is one holding meta.json, strings.bin or a segment, so that a
 * session whose meta.json was lost is still found (and reported). */
int cuptimon__archive_find_sessions(const char *root, char ***dirs);
void cuptimon__archive_free_list(char **dirs);

#endif
