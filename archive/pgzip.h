/*
 * A gzip writer that deflates on several threads, as pigz does: the text is
 * cut into 1 MiB blocks, each deflated on a thread of its own with the 32
 * KiB before it as dictionary and ended on a byte boundary (a sync flush),
 * the last one finished; the blocks are written in order, so the file is
 * one ordinary gzip member (one deflate stream, one CRC-32 made of the
 * blocks' with crc32_combine) that every reader takes.  Traces are written
 * at several hundred MB a second and zlib's level 1 deflates about 400 MB a
 * second on one core: with one thread the writer spends most of its time
 * there.
 *
 * Not thread-safe: one writer calls it.  Errors are -errno (-EIO for a
 * deflate failure) and sticky.
 */
#ifndef CUPTIMON_PGZIP_H
#define CUPTIMON_PGZIP_H

#include <stddef.h>

struct cuptimon_pgz;

/* Writes a gzip stream to fd (not closed here) at level 1..9 with up to
 * threads deflating at once (<= 1: in the caller, block by block; 0 asks
 * for cuptimon__pgz_threads_default()). */
int cuptimon__pgz_open(int fd, int level, int threads, struct cuptimon_pgz **out);
int cuptimon__pgz_write(struct cuptimon_pgz *g, const void *buf, size_t len);
/* Deflates what is left, writes the trailer.  0 or the first error. */
int cuptimon__pgz_finish(struct cuptimon_pgz *g);
/* Waits for the threads still running and frees g (NULL: nothing). */
void cuptimon__pgz_free(struct cuptimon_pgz *g);
/* The processors online, at most 4 (at least 1): past 4 the text to
 * deflate comes no faster (16 cores of the H200 host: 2.79x at 4 threads,
 * 2.55x at 8; docs/BENCHMARKS.md). */
int cuptimon__pgz_threads_default(void);

#endif
