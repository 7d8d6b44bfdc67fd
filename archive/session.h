/*
 * What an archive session directory says about its producer: meta.json
 * (the process's identity, its CUPTI version and the record sizes it
 * announced, from which the record layouts follow) and strings.bin (the
 * producer's string table).  cuptimonctl decode and the daemon's window
 * writer both read sessions through this, so that a meta.json means the
 * same to both.
 */
#ifndef CUPTIMON_ARCHIVE_SESSION_H
#define CUPTIMON_ARCHIVE_SESSION_H

#include <stdint.h>

#include "decode.h"
#include "trace.h"

struct json_object;
struct cuptimon_archive_reader;
struct cuptimon_strtab;

/* Record layouts that apply from a chunk index on (strings.bin entries
 * under CUPTIMON_LAYOUTS_KEY). */
struct cuptimon_layout_gen {
    uint64_t from_seq;
    struct cuptimon_layout *layout;
};

struct cuptimon_archive_session {
    struct json_object *meta;                   /* parsed meta.json; info's strings point into it */
    struct cuptimon_proc_info info;             /* pid, hostname, job identity, CUPTI version */
    struct cuptimon_layout layout;              /* from the CUPTI version and record_sizes */
    int layout_rc;                              /* what cuptimon__layout_init() returned */
    uint32_t record_sizes[CUPTIMON_KIND_SLOTS]; /* as announced; 0: not announced */
    uint32_t measured[CUPTIMON_KIND_SLOTS];     /* record_sizes_measured; 0: not measured */
    struct cuptimon_strtab *names;              /* strings.bin, once read; NULL before */
    /* Layouts that changed during the session (CUPTI's v2 path), read with
     * the strings, in from_seq order; chunks before the first use layout. */
    struct cuptimon_layout_gen *gens;
    size_t ngens;
    uint64_t gens_cut;    /* chunks from this index on decode nothing (0/UINT64_MAX: none) */
    char gens_error[320]; /* the first problem found in them, "" when none */
};

/*
 * Parses meta.json (text may be NULL: none was found) into s, replacing
 * what an earlier call put there; s->names is left alone.  Integer members
 * may be JSON numbers or decimal strings (the shim passes environment
 * variables through as strings); a member that is neither, or missing,
 * stays unknown (pid 0, rank -1, no hostname).  Returns 0; -EBADMSG when
 * the text is not valid JSON but members were salvaged from it (each of
 * pid, hostname, exe, cupti_version, record_sizes and job that still parses on
 * its own: the damage costs only the members it hit); or -EINVAL when
 * nothing could be used (no text, or not a JSON object): s then describes
 * a producer of unknown CUPTI version, whose records are walked over but
 * not decoded.
 */
int cuptimon__archive_session_meta(struct cuptimon_archive_session *s, const char *text);

/* Reads the strings file of r into s->names, creating the table when it
 * is NULL, and the layout generations it holds into s->gens (after
 * cuptimon__archive_session_meta, whose CUPTI version they need).  Returns 0, -ENOMEM, or what cuptimon__archive_strings()
 * returned (the entries before the failure stay in the table). */
int cuptimon__archive_session_strings(struct cuptimon_archive_session *s,
                                      struct cuptimon_archive_reader *r);

/* The layouts to decode chunk number chunk_index of the session by: the
 * generation that applies to it (read by cuptimon__archive_session_strings,
 * which must come first), else meta.json's. */
const struct cuptimon_layout *cuptimon__archive_session_layout(
    const struct cuptimon_archive_session *s, uint64_t chunk_index);

/* Frees what s holds and zeroes it; s may be half-filled. */
void cuptimon__archive_session_clear(struct cuptimon_archive_session *s);

#endif
