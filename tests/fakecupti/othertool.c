/*
 * cuptimon-othertool: a job that also runs its own CUPTI tool, the way
 * torch.profiler's Kineto does: mid-run it registers its own activity
 * callbacks (after the shim), enables kinds, registers a timestamp callback
 * with its own timebase, flushes, disables and finalizes, twice.  It checks
 * what its callbacks received and writes a JSON report; the test compares
 * that with what it launched and with cuptimon's archive.
 *
 * usage: cuptimon-othertool REPORT [N_BEFORE M_PROFILED K_AFTER]
 *
 * OTHERTOOL_DIRECT=1: in the first round the tool registers its callbacks
 * and its timestamp callback through pointers from dlsym() (as a tool that
 * reaches libcupti without the import slots the shim routes to itself), so
 * an injected shim loses CUPTI to it until it lets go.
 * OTHERTOOL_KINETO_STOP=1: each round ends as Kineto's stop does (disable
 * its kinds, then a forced flush; no cuptiFinalize).
 * OTHERTOOL_LATE_LIB=PATH: after the two rounds, dlopen PATH (a tool in a
 * library loaded after the shim started), wait 3 s, and profile M_PROFILED
 * more kernels with it; the report's "late" says what it received.
 * OTHERTOOL_HOLD=FILE: in the first round, once its kernels are launched,
 * the tool writes FILE.holding and waits (up to 60 s) for FILE to exist.
 * OTHERTOOL_TSC=1: the tool's clock ticks 2.5 times per nanosecond from
 * an epoch (as Kineto's does with TSC timestamps: raw ticks, not ns), and
 * the report lists each profiled kernel's (correlation id, start) as the
 * tool received it, with the clock's parameters, so that the test can map
 * the tool's times back and hold them against cuptimon's record.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>

#include <cupti.h>

#include "fakecupti.h"

#define TOOL_EPOCH 1000000000000000ull /* the tool's clock: realtime + this */
#define MAX_OWNED  256
#define MAX_STARTS 8192

static int tsc_clock;     /* OTHERTOOL_TSC */
static uint64_t tsc_base; /* realtime at start: tick 0 of the TSC-like clock */

static struct {
    uint8_t *owned[MAX_OWNED];
    int nowned;
    uint64_t kernels, runtime, other, foreign, bad_time;
    uint32_t corr_lo, corr_hi; /* the profiled launches' correlation ids */
    uint64_t in_range;
    uint64_t min_ts;
    uint32_t nstarts;
    uint32_t start_corr[MAX_STARTS];
    uint64_t start_ts[MAX_STARTS];
} t;

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t CUPTIAPI tool_clock(void)
{
    uint64_t rt = realtime_ns();
    if (tsc_clock)
        return TOOL_EPOCH + (rt - tsc_base) * 5 / 2;
    return rt + TOOL_EPOCH;
}

static void CUPTIAPI request(uint8_t **buf, size_t *size, size_t *max)
{
    *size = 64u << 10;
    *buf = aligned_alloc(8, *size);
    memset(*buf, 0, *size);
    *max = 0;
    if (t.nowned < MAX_OWNED)
        t.owned[t.nowned++] = *buf;
}

static void CUPTIAPI complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                              size_t valid)
{
    int mine = 0;
    for (int i = 0; i < t.nowned; i++)
        if (t.owned[i] == buf)
            mine = 1;
    if (!mine) {
        /* Kineto says "bufferCompleted called with unknown buffer" here. */
        t.foreign++;
        return;
    }
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            t.kernels++;
            if (k->correlationId >= t.corr_lo && k->correlationId <= t.corr_hi)
                t.in_range++;

            if (k->start < TOOL_EPOCH)
                t.bad_time++;
            if (t.nstarts < MAX_STARTS) {
                t.start_corr[t.nstarts] = k->correlationId;
                t.start_ts[t.nstarts++] = k->start;
            }
            if (!t.min_ts || k->start < t.min_ts)
                t.min_ts = k->start;
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
            t.runtime++;
        } else {
            t.other++;
        }
    }
    (void)ctx;
    (void)stream;
    (void)size;
}

static const char *const names[] = {"_Z5scaleILi2EEvPfi", "_ZN2ns7add_oneEPfi"};

static uint32_t launch(uint64_t n)
{
    uint32_t last = 0;
    for (uint64_t i = 0; i < n; i++)
        last = fakecuda_launch_kernel(names[i & 1], 0, 1 + (uint32_t)(i & 1), 0, 0);
    return last;
}

static int check(CUptiResult rc, const char *what)
{
    if (rc != CUPTI_SUCCESS) {
        fprintf(stderr, "cuptimon-othertool: %s failed: %d\n", what, (int)rc);
        return -1;
    }
    return 0;
}

/* Round 1 with OTHERTOOL_DIRECT: straight to the libcupti in the process. */
static CUptiResult register_direct(void)
{
    CUptiResult (*reg)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) =
        (CUptiResult(*)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc))dlsym(
            RTLD_DEFAULT, "cuptiActivityRegisterCallbacks");
    CUptiResult (*ts)(CUpti_TimestampCallbackFunc) = (CUptiResult(*)(
        CUpti_TimestampCallbackFunc))dlsym(RTLD_DEFAULT, "cuptiActivityRegisterTimestampCallback");
    if (!reg || !ts)
        return CUPTI_ERROR_UNKNOWN;
    CUptiResult rc = reg(request, complete);
    return rc != CUPTI_SUCCESS ? rc : ts(tool_clock);
}

static void hold(const char *file)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.holding", file);
    FILE *h = fopen(path, "w");
    if (h)
        fclose(h);
    for (int i = 0; i < 6000 && access(file, F_OK) != 0; i++)
        usleep(10000);
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 5) {
        fprintf(stderr, "usage: cuptimon-othertool REPORT [N_BEFORE M_PROFILED K_AFTER]\n");
        return 2;
    }
    uint64_t before = argc == 5 ? strtoull(argv[2], NULL, 10) : 3000;
    uint64_t profiled = argc == 5 ? strtoull(argv[3], NULL, 10) : 2000;
    uint64_t after = argc == 5 ? strtoull(argv[4], NULL, 10) : 3000;
    FILE *f = fopen(argv[1], "w");
    if (!f)
        return 1;
    if (fakecuda_init() < 0)
        return 1;
    tsc_clock = getenv("OTHERTOOL_TSC") && atoi(getenv("OTHERTOOL_TSC"));
    tsc_base = realtime_ns();
    launch(before);
    uint32_t resumed = 0;
    int kineto_stop = getenv("OTHERTOOL_KINETO_STOP") && atoi(getenv("OTHERTOOL_KINETO_STOP"));
    fprintf(f, "{\"pid\": %d, \"profiles\": [", (int)getpid());
    for (int round = 0; round < 2; round++) {
        memset(&t.kernels, 0, sizeof t - offsetof(__typeof__(t), kernels));
        int direct = round == 0 && getenv("OTHERTOOL_DIRECT") && atoi(getenv("OTHERTOOL_DIRECT"));
        if ((direct ? check(register_direct(), "register (direct)")
                    : check(cuptiActivityRegisterCallbacks(request, complete), "register") ||
                          check(cuptiActivityRegisterTimestampCallback(tool_clock),
                                "timestamp callback")) ||
            check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernel") ||
            check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), "enable runtime"))
            return 1;
        /* Buffers may complete while the launches run (when the tool holds
         * CUPTI itself): until the last id is known, any later one counts. */
        t.corr_hi = UINT32_MAX;
        t.corr_lo = launch(1);
        t.corr_hi = launch(profiled - 1);
        fakecuda_synchronize();
        if (round == 0 && getenv("OTHERTOOL_HOLD"))
            hold(getenv("OTHERTOOL_HOLD"));
        if (kineto_stop) {
            /* Kineto's stop: disable its kinds, then force every buffer
             * out; CUPTI stays initialized and its callbacks registered. */
            if (check(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME), "disable runtime") ||
                check(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
                      "disable kernel") ||
                check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush"))
                return 1;
        } else if (check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush") ||
                   check(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME), "disable runtime") ||
                   check(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
                         "disable kernel") ||
                   check(cuptiFinalize(), "finalize")) {
            return 1;
        }
        fprintf(f,
                "%s{\"launched\": %" PRIu64 ", \"kernels\": %" PRIu64 ", \"in_range\": %" PRIu64
                ", \"runtime\": %" PRIu64 ", \"foreign_buffers\": %" PRIu64
                ", \"bad_time\": %" PRIu64 ", \"min_ts\": %" PRIu64 "}",
                round ? ", " : "", profiled, t.kernels, t.in_range, t.runtime, t.foreign,
                t.bad_time, t.min_ts);
        if (tsc_clock) {
            fseek(f, -1, SEEK_CUR); /* reopen the round's object */
            fputs(", \"starts\": [", f);
            for (uint32_t i = 0; i < t.nstarts; i++)
                fprintf(f, "%s[%" PRIu32 ", %" PRIu64 "]", i ? ", " : "", t.start_corr[i],
                        t.start_ts[i]);
            fputs("]}", f);
        }
        for (int i = 0; i < t.nowned; i++)
            free(t.owned[i]);
        t.nowned = 0;
        uint32_t first = launch(1);
        if (round == 0)
            resumed = first;
        launch(after / 2 - 1);
    }
    fputs("]", f);
    uint64_t late_launched = 0;
    const char *late_lib = getenv("OTHERTOOL_LATE_LIB");
    if (late_lib && *late_lib) {
        void *h = dlopen(late_lib, RTLD_NOW | RTLD_LOCAL);
        int (*prof)(uint64_t, uint64_t *, uint64_t *) =
            h ? (int (*)(uint64_t, uint64_t *, uint64_t *))dlsym(h, "latetool_profile") : NULL;
        if (!prof) {
            fprintf(stderr, "cuptimon-othertool: cannot load %s: %s\n", late_lib, dlerror());
            return 1;
        }
        /* Past the shim's once-a-second look at the loaded objects, with
         * room for a loaded machine. */
        usleep(3000000);
        uint64_t got = 0, foreign = 0;
        if (prof(profiled, &got, &foreign) < 0) {
            fprintf(stderr, "cuptimon-othertool: the late tool failed\n");
            return 1;
        }
        late_launched = profiled;
        fprintf(f,
                ", \"late\": {\"launched\": %" PRIu64 ", \"kernels\": %" PRIu64
                ", \"foreign_buffers\": %" PRIu64 "}",
                profiled, got, foreign);
    }
    if (tsc_clock)
        fprintf(f, ", \"tsc\": {\"base_ns\": %" PRIu64 ", \"epoch\": %llu, \"num\": 5, \"den\": 2}",
                tsc_base, (unsigned long long)TOOL_EPOCH);
    fprintf(f,
            ", \"kernels_launched\": %" PRIu64 ", \"first_after_round1\": %" PRIu32
            ", \"launched_after_round1\": %" PRIu64 "}\n",
            before + 2 * profiled + 2 * (after / 2) + late_launched, resumed,
            profiled + 2 * (after / 2) + late_launched);
    fclose(f);
    const char *linger = getenv("OTHERTOOL_LINGER_MS");
    if (linger)
        usleep((useconds_t)atoi(linger) * 1000);
    return 0;
}
