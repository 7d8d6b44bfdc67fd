/*
 * cuptimonctl merge: per-node window traces (from the same --at window run
 * on many nodes) into one trace: timestamps moved onto one base, and
 * processes whose pids collide across nodes given distinct ones.
 *
 * Each input is parsed whole with json-c, so memory is about the size of
 * the largest input; the output is written event by event.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "archive/json-get.h"
#include "cli.h"
#include "cuptimon-proto.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: cuptimonctl merge -o OUTPUT TRACE.json...\n"
            "Merge Chrome/Perfetto traces written by cuptimon (window traces or decoded\n"
            "archives, typically one per node from the same 'begin-window --at T') into\n"
            "one trace.  Timestamps are moved onto the earliest input's base\n"
            "(baseTimeNanoseconds), and a pid seen in more than one input is renumbered\n"
            "in the later ones (otherData.merged_from maps each input's pids; the host is\n"
            "in each process's labels).  The merged distributedInfo has the lowest rank,\n"
            "the largest world size and every rank of the inputs (\"ranks\");\n"
            "deviceProperties has each device id once, as the first input with it has it.\n"
            "\n"
            "  -o, --output=FILE   the merged trace (written beside FILE, then renamed over it)\n"
            "  -h, --help          show this help\n");
}

/* The input's time base: Kineto's baseTimeNanoseconds, or (traces written
 * before cuptimon wrote it) otherData.base_unix_ns. */
static int64_t base_of(json_object *t)
{
    int64_t b = cuptimon__json_int(t, "baseTimeNanoseconds", 0);
    return b ? b : cuptimon__json_int(cuptimon__json_get(t, "otherData"), "base_unix_ns", 0);
}

/* Adds an input's distributedInfo to the merged one: the lowest rank, the
 * largest world size, and every rank seen in "ranks" (a merged multi-rank
 * trace says which ranks it holds). */
static void merge_ranks(json_object *di, json_object *t)
{
    json_object *in = cuptimon__json_get(t, "distributedInfo"), *ranks, *more;
    if (!in)
        return;
    int64_t r = cuptimon__json_int(in, "rank", -1), w = cuptimon__json_int(in, "world_size", -1);
    if (!json_object_object_get_ex(di, "ranks", &ranks)) {
        ranks = json_object_new_array();
        json_object_object_add(di, "ranks", ranks);
    }
    json_object *list = json_object_new_array();
    if (json_object_object_get_ex(in, "ranks", &more) && json_object_is_type(more, json_type_array))
        for (size_t i = 0; i < json_object_array_length(more); i++)
            json_object_array_add(list, json_object_new_int64(json_object_get_int64(
                                            json_object_array_get_idx(more, i))));
    else if (r >= 0)
        json_object_array_add(list, json_object_new_int64(r));
    for (size_t i = 0; i < json_object_array_length(list); i++) {
        int64_t v = json_object_get_int64(json_object_array_get_idx(list, i)), seen = 0;
        for (size_t k = 0; k < json_object_array_length(ranks); k++)
            seen |= json_object_get_int64(json_object_array_get_idx(ranks, k)) == v;
        if (!seen)
            json_object_array_add(ranks, json_object_new_int64(v));
        if (cuptimon__json_int(di, "rank", -1) < 0 || v < cuptimon__json_int(di, "rank", -1))
            json_object_object_add(di, "rank", json_object_new_int64(v));
    }
    json_object_put(list);
    if (w > cuptimon__json_int(di, "world_size", -1))
        json_object_object_add(di, "world_size", json_object_new_int64(w));
}

/* Adds an input's deviceProperties to the merged list: each device id
 * once, as the first input that had it wrote it (one node's processes see
 * the same devices), at most 64. */
static void merge_devices(json_object *devs, json_object *t)
{
    json_object *in = cuptimon__json_get(t, "deviceProperties");
    size_t n = in && json_object_is_type(in, json_type_array) ? json_object_array_length(in) : 0;
    for (size_t i = 0; i < n && json_object_array_length(devs) < 64; i++) {
        json_object *d = json_object_array_get_idx(in, i);
        int64_t id = cuptimon__json_integer(d, "id", -1), have = 0;
        if (id < 0 || !json_object_is_type(d, json_type_object))
            continue;
        for (size_t k = 0; k < json_object_array_length(devs) && !have; k++)
            have = cuptimon__json_integer(json_object_array_get_idx(devs, k), "id", -1) == id;
        if (!have)
            json_object_array_add(devs, json_object_get(d));
    }
}

int cuptimon__cli_merge(int argc, char **argv)
{
    static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *out = NULL;
    int opt;
    optind = 0; /* glibc: 0 re-initialises getopt after the global options */
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        if (opt == 'o')
            out = optarg;
        else if (opt == 'h') {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "Try 'cuptimonctl merge --help' for more information.\n");
            return 2;
        }
    }
    int n = argc - optind;
    if (!out || n < 1) {
        fprintf(stderr,
                "cuptimonctl merge: %s\nTry 'cuptimonctl merge --help' for more information.\n",
                !out ? "-o OUTPUT is required" : "no input traces given");
        return 2;
    }
    /* First pass over the inputs: their bases, and which pids each uses. */
    int64_t base = 0;
    int64_t *bases = calloc((size_t)n, sizeof *bases);
    for (int i = 0; i < n && bases; i++) {
        json_object *t = json_object_from_file(argv[optind + i]);
        if (!t || !json_object_is_type(t, json_type_object)) {
            fprintf(stderr, "cuptimonctl merge: %s is not a JSON trace: %s\n", argv[optind + i],
                    json_util_get_last_err() ? json_util_get_last_err() : "not an object");
            json_object_put(t);
            free(bases);
            return 1;
        }
        bases[i] = base_of(t);
        if (bases[i] && (!base || bases[i] < base))
            base = bases[i];
        json_object_put(t);
    }
    if (!bases)
        return 1;
    struct cuptimon_outfile of;
    int orc = cuptimon__outfile_open(&of, out, 0644);
    /* stdio gets its own descriptor: fclose() then reports write errors,
     * and the commit closes the outfile's. */
    int dfd = orc < 0 ? -1 : dup(of.fd);
    FILE *f = dfd < 0 ? NULL : fdopen(dfd, "w");
    if (!f) {
        fprintf(stderr, "cuptimonctl merge: cannot write %s: %s\n", out,
                strerror(orc < 0 ? -orc : errno));
        if (dfd >= 0)
            close(dfd);
        if (orc == 0)
            cuptimon__outfile_commit(&of, 0, 0);
        free(bases);
        return 1;
    }
    fprintf(f, "{\"schemaVersion\": 1,\n\"baseTimeNanoseconds\": %" PRId64 ",\n\"traceEvents\":[\n",
            base);
    json_object *sources = json_object_new_array(), *used = json_object_new_object();
    json_object *di = json_object_new_object(), *devs = json_object_new_array();
    int first = 1, rc = 0;
    uint64_t events = 0;
    for (int i = 0; i < n; i++) {
        json_object *t = json_object_from_file(argv[optind + i]), *evs;
        if (!t || !json_object_object_get_ex(t, "traceEvents", &evs) ||
            !json_object_is_type(evs, json_type_array)) {
            fprintf(stderr, "cuptimonctl merge: %s has no traceEvents array\n", argv[optind + i]);
            json_object_put(t);
            rc = 1;
            break;
        }
        /* This input's pids: renumber those an earlier input used. */
        json_object *remap = json_object_new_object();
        size_t len = json_object_array_length(evs);
        for (size_t k = 0; k < len; k++) {
            json_object *e = json_object_array_get_idx(evs, k), *pid;
            if (!json_object_object_get_ex(e, "pid", &pid))
                continue;
            char key[32];
            snprintf(key, sizeof key, "%" PRId64, json_object_get_int64(pid));
            json_object *m;
            if (json_object_object_get_ex(remap, key, &m))
                continue;
            int64_t np = json_object_get_int64(pid);
            if (json_object_object_get_ex(used, key, NULL))
                np = ((int64_t)(i + 1) << 24) | (np & 0xffffff);
            json_object_object_add(remap, key, json_object_new_int64(np));
        }
        json_object_object_foreach(remap, rk, rv)
        {
            char key[32];
            snprintf(key, sizeof key, "%" PRId64, json_object_get_int64(rv));
            json_object_object_add(used, rk, json_object_new_boolean(1));
            json_object_object_add(used, key, json_object_new_boolean(1));
        }
        double shift_us = bases[i] && base ? (double)(bases[i] - base) / 1000.0 : 0.0;
        for (size_t k = 0; k < len; k++) {
            json_object *e = json_object_array_get_idx(evs, k), *v;
            if (json_object_object_get_ex(e, "pid", &v)) {
                char key[32];
                snprintf(key, sizeof key, "%" PRId64, json_object_get_int64(v));
                json_object *m;
                if (json_object_object_get_ex(remap, key, &m))
                    json_object_object_add(e, "pid",
                                           json_object_new_int64(json_object_get_int64(m)));
            }
            if (shift_us != 0.0 && json_object_object_get_ex(e, "ts", &v))
                json_object_object_add(
                    e, "ts", json_object_new_double(json_object_get_double(v) + shift_us));
            fputs(first ? "" : ",\n", f);
            fputs(json_object_to_json_string_ext(e, JSON_C_TO_STRING_PLAIN |
                                                        JSON_C_TO_STRING_NOSLASHESCAPE),
                  f);
            first = 0;
            events++;
        }
        json_object *src = json_object_new_object();
        json_object_object_add(src, "file", json_object_new_string(argv[optind + i]));
        json_object_object_add(src, "base_unix_ns", json_object_new_int64(bases[i]));
        json_object_object_add(src, "pids", remap);
        json_object_array_add(sources, src);
        merge_ranks(di, t);
        merge_devices(devs, t);
        json_object_put(t);
    }
    json_object *other = json_object_new_object();
    json_object_object_add(other, "base_unix_ns", json_object_new_int64(base));
    json_object_object_add(other, "merged_from", sources);
    if (cuptimon__json_int(di, "rank", -1) < 0)
        json_object_object_add(di, "rank", json_object_new_int64(0));
    if (cuptimon__json_int(di, "world_size", -1) < 0)
        json_object_object_add(di, "world_size", json_object_new_int64(1));
    /* distributedInfo as Kineto writes it (a space after each colon: HTA's
     * rank pattern needs one). */
    fprintf(f, "\n],\n\"displayTimeUnit\": \"ms\",\n\"deviceProperties\": %s,\n",
            json_object_to_json_string_ext(devs, JSON_C_TO_STRING_SPACED |
                                                     JSON_C_TO_STRING_NOSLASHESCAPE));
    fprintf(f, "\"distributedInfo\": %s,\n",
            json_object_to_json_string_ext(di, JSON_C_TO_STRING_SPACED |
                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
    fprintf(f, "\"otherData\":%s}\n",
            json_object_to_json_string_ext(other, JSON_C_TO_STRING_PLAIN |
                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(other);
    json_object_put(di);
    json_object_put(devs);
    json_object_put(used);
    free(bases);
    int werr = fclose(f) != 0 ? errno : 0;
    int crc = cuptimon__outfile_commit(&of, werr == 0 && rc == 0, 0);
    if (werr || rc != 0 || crc < 0) {
        if (rc == 0)
            fprintf(stderr, "cuptimonctl merge: writing %s failed: %s\n", out,
                    strerror(werr      ? werr
                             : crc < 0 ? -crc
                                       : EIO));
        return 1;
    }
    fprintf(stderr, "cuptimonctl merge: %d trace(s), %" PRIu64 " events -> %s\n", n, events, out);
    return 0;
}
