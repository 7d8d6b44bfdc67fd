/*
 * bench-decode: decode + Chrome trace JSON writing throughput on the real
 * H200 buffers (tests/data/cupti-13.0-h200), in records per second per
 * core.
 *
 * usage: bench-decode [DATA_DIR] [--seconds S] [--mode MODE] [--mix MIX]
 *
 * The buffers are decompressed once; each mode then runs the same single
 * thread over them again and again for at least S seconds (default 2) and
 * divides the records by the thread's CPU time (CLOCK_THREAD_CPUTIME_ID),
 * so the figure is per core whatever else the machine does.  Modes:
 *   decode        walk + decode only
 *   trace         decode + trace JSON into a sink that discards (the
 *                 writer's formatting cost, no I/O)
 *   trace+summary as trace, also feeding the summary
 *   trace-devnull decode + trace JSON written to /dev/null with write(2)
 *   stats         decode + the statistics engine of cuptimonctl stats (every
 *                 report, its default limits), its tables made at the end
 * on two mixes: "kernel" (the phase-0 buffers: kernels, memcpy, memset)
 * and "api" (the phase-1 buffers: + runtime and driver API records, with
 * launch -> kernel flow arrows).  One JSON object per line on stdout.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include <json-c/json.h>

#include "load-zst.h"

#include "archive/decode.h"
#include "archive/demangle.h"
#include "archive/stats.h"
#include "archive/strtab.h"
#include "archive/summary.h"
#include "archive/trace.h"

#ifndef TEST_DATA_DIR
#define TEST_DATA_DIR "tests/data"
#endif

struct buf {
    uint8_t *data;
    size_t len;
};

static int load(const char *dir, const char *name, struct buf *b)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    b->data = bench_load_zst("bench-decode", path, &b->len);
    return b->data ? 0 : -1;
}

static double now(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct sink {
    uint64_t bytes;
};

static int discard(void *ud, const void *buf, size_t len)
{
    struct sink *s = ud;
    (void)buf;
    s->bytes += len;
    return 0;
}

/* Fills the string table the way the shim would: the three kernel names
 * of dump.cu.txt at the pointers the records carry (told by grid size). */
static void names(const struct buf *bufs, int n, struct cuptimon_strtab *st)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats ds;

    cuptimon__layout_init(&l, 130001, NULL);
    memset(&ds, 0, sizeof(ds));
    for (int i = 0; i < n; i++) {
        struct cuptimon_walk w;
        struct cuptimon_ev ev;
        cuptimon__walk_begin(&w, &l, bufs[i].data, bufs[i].len, &ds);
        while (cuptimon__walk_next(&w, &ev)) {
            if (ev.type != CUPTIMON_EV_KERNEL)
                continue;
            const char *s = ev.u.kernel.grid_x == 64   ? "_Z5scaleILi2EEvPfi"
                            : ev.u.kernel.grid_x == 32 ? "_Z5scaleILi3EEvPfi"
                                                       : "_ZN2ns7add_oneEPfi";
            cuptimon__strtab_put(st, ev.u.kernel.name_ptr, s, strlen(s));
        }
    }
}

enum mode {
    M_DECODE,
    M_TRACE,
    M_TRACE_SUMMARY,
    M_TRACE_DEVNULL,
    M_STATS
};
static const char *mode_name[] = {"decode", "trace", "trace+summary", "trace-devnull", "stats"};

static int run(enum mode m, const char *mix, const struct buf *bufs, int n, double seconds)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats ds;
    struct cuptimon_strtab *st = NULL;
    struct cuptimon_demangler *dm = NULL;
    struct cuptimon_trace *t = NULL;
    struct cuptimon_summary *sum = NULL;
    struct cuptimon_stats *stats = NULL;
    struct cuptimon_trace_opts o = {.base_ns = 1796208557000000000ull};
    struct cuptimon_proc_info p = {.pid = 455,
                                   .hostname = "h200",
                                   .rank = 0,
                                   .local_rank = 0,
                                   .world_size = 1,
                                   .cupti_version = 130001};
    struct cuptimon_clock clk = {0, 0};
    struct sink sink = {0};
    uint64_t records = 0, in_bytes = 0, rounds = 0;
    double c0, w0, c1, w1;
    int fd = -1, proc = 0, sproc = 0, stproc = 0;

    cuptimon__layout_init(&l, 130001, NULL);
    memset(&ds, 0, sizeof(ds));
    if (cuptimon__strtab_new(NULL, &st) < 0 || cuptimon__demangler_new(0, &dm) < 0 ||
        cuptimon__summary_new(&sum) < 0 || cuptimon__stats_new(NULL, &stats) < 0)
        return -1;
    names(bufs, n, st);
    if (m == M_TRACE_DEVNULL) {
        fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || cuptimon__trace_new_fd(&o, fd, &t) < 0)
            return -1;
    } else if (m != M_DECODE && m != M_STATS) {
        if (cuptimon__trace_new(&o, discard, &sink, &t) < 0)
            return -1;
    }
    if (t != NULL)
        proc = cuptimon__trace_add_process(t, &p, st, dm);
    sproc = cuptimon__summary_add_process(sum, &p, st, dm);
    stproc = cuptimon__stats_add_process(stats, &p, st, dm);
    if (proc < 0 || sproc < 0 || stproc < 0)
        return -1;

    c0 = now(CLOCK_THREAD_CPUTIME_ID);
    w0 = now(CLOCK_MONOTONIC);
    do {
        for (int i = 0; i < n; i++) {
            struct cuptimon_walk w;
            struct cuptimon_ev ev;
            cuptimon__walk_begin(&w, &l, bufs[i].data, bufs[i].len, &ds);
            switch (m) {
            case M_DECODE:
                while (cuptimon__walk_next(&w, &ev))
                    records++;
                break;
            case M_TRACE:
            case M_TRACE_DEVNULL:
                while (cuptimon__walk_next(&w, &ev)) {
                    records++;
                    cuptimon__trace_event(t, proc, &ev, &clk);
                }
                break;
            case M_TRACE_SUMMARY:
                while (cuptimon__walk_next(&w, &ev)) {
                    records++;
                    cuptimon__summary_event(sum, sproc, &ev);
                    cuptimon__trace_event(t, proc, &ev, &clk);
                }
                break;
            case M_STATS:
                while (cuptimon__walk_next(&w, &ev)) {
                    records++;
                    cuptimon__stats_event(stats, stproc, &ev, &clk);
                }
                break;
            }
            in_bytes += bufs[i].len;
        }
        rounds++;
    } while (now(CLOCK_THREAD_CPUTIME_ID) - c0 < seconds);
    if (t != NULL && cuptimon__trace_finish(t, NULL) < 0) {
        fprintf(stderr, "bench-decode: trace write failed\n");
        return -1;
    }
    /* The tables (medians) are part of what stats costs. */
    for (int r = 0; m == M_STATS && r < CUPTIMON_STATS_REPORTS; r++) {
        struct json_object *rows = cuptimon__stats_rows(stats, (enum cuptimon_stats_report)r, 0);
        if (rows == NULL) {
            fprintf(stderr, "bench-decode: the stats tables: out of memory\n");
            return -1;
        }
        json_object_put(rows);
    }
    c1 = now(CLOCK_THREAD_CPUTIME_ID);
    w1 = now(CLOCK_MONOTONIC);
    if (t != NULL) {
        struct cuptimon_trace_stats ts;
        cuptimon__trace_stats(t, &ts);
        sink.bytes = ts.bytes;
    }
    printf("{\"bench\":\"decode\",\"mode\":\"%s\",\"mix\":\"%s\",\"rounds\":%llu,"
           "\"records\":%llu,\"input_bytes\":%llu,\"output_bytes\":%llu,\"undecodable_bytes\":%llu,"
           "\"cpu_s\":%.3f,\"wall_s\":%.3f,\"records_per_s_per_core\":%.0f,"
           "\"input_MB_per_s\":%.0f,\"output_MB_per_s\":%.0f,\"ns_per_record\":%.1f}\n",
           mode_name[m], mix, (unsigned long long)rounds, (unsigned long long)records,
           (unsigned long long)in_bytes, (unsigned long long)sink.bytes,
           (unsigned long long)ds.undecodable_bytes, c1 - c0, w1 - w0, (double)records / (c1 - c0),
           (double)in_bytes / (c1 - c0) / 1e6, (double)sink.bytes / (c1 - c0) / 1e6,
           (c1 - c0) * 1e9 / (double)records);
    fflush(stdout);
    cuptimon__trace_free(t);
    cuptimon__summary_free(sum);
    cuptimon__stats_free(stats);
    cuptimon__demangler_free(dm);
    cuptimon__strtab_free(st);
    if (fd >= 0)
        close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = TEST_DATA_DIR "/cupti-13.0-h200";
    double seconds = 2.0;
    const char *only_mode = NULL, *only_mix = NULL;
    static const char *p0[] = {"phase0-buf0.bin.zst", "phase0-buf1.bin.zst", "phase0-buf2.bin.zst",
                               "phase0-buf3.bin.zst"};
    static const char *p1[] = {"phase1-buf4.bin.zst", "phase1-buf5.bin.zst"};
    struct buf b0[4], b1[2];
    int rc = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
            only_mode = argv[++i];
        } else if (strcmp(argv[i], "--mix") == 0 && i + 1 < argc) {
            only_mix = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s [DATA_DIR] [--seconds S] [--mode decode|trace|trace+summary|"
                   "trace-devnull|stats] [--mix kernel|api]\n",
                   argv[0]);
            return 0;
        } else {
            dir = argv[i];
        }
    }
    for (int i = 0; i < 4; i++)
        if (load(dir, p0[i], &b0[i]) < 0)
            return 1;
    for (int i = 0; i < 2; i++)
        if (load(dir, p1[i], &b1[i]) < 0)
            return 1;
    for (int mix = 0; mix < 2 && rc == 0; mix++) {
        const char *mn = mix ? "api" : "kernel";
        if (only_mix && strcmp(only_mix, mn) != 0)
            continue;
        for (int m = M_DECODE; m <= M_STATS && rc == 0; m++) {
            if (only_mode && strcmp(only_mode, mode_name[m]) != 0)
                continue;
            rc = run((enum mode)m, mn, mix ? b1 : b0, mix ? 2 : 4, seconds);
        }
    }
    for (int i = 0; i < 4; i++)
        free(b0[i].data);
    for (int i = 0; i < 2; i++)
        free(b1[i].data);
    return rc == 0 ? 0 : 1;
}
