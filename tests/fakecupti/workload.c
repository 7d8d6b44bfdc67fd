/*
 * cuptimon-workload: a fake CUDA job for tests.  It links libcupti-fake.so (so the double
 * is already loaded when an injected shim looks for libcupti), calls fakecuda_init() (which
 * loads CUDA_INJECTION64_PATH like the driver's cuInit), launches kernels, copies and
 * memsets through the fake CUDA API, waits for the fake GPU, optionally writes a JSON
 * report, and returns from main.  It never calls cuptimon: the shim flushes at exit on its
 * own.
 *
 * Work item i (0 <= i < --kernels) is kernel names[i % nnames] on device i % D and stream
 * 1 + (i / D) % S (so with one device: stream 1 + i % S); after it, on the same stream, a
 * 4 KiB device-to-host copy when i % M == 0 and a 4 KiB memset when i % K == 0 (the pattern
 * of tests/data/cupti-13.0-h200/dump.cu.txt).  With --threads T, thread t launches the
 * items i with i % T == t.  With --rate R, item i is launched R^-1 * i seconds after the
 * start.
 */
#include "config.h"

#include "fakecupti.h"
#include "v2sub.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PROG          "cuptimon-workload"
#define DEFAULT_NAMES "_Z5scaleILi2EEvPfi,_Z5scaleILi3EEvPfi,_ZN2ns7add_oneEPfi"

static struct {
    uint64_t kernels, memcpy_every, memset_every, bytes;
    uint32_t streams, devices, threads;
    double rate;
    uint64_t graph_id;
    const char *report;
    const char *log;
    const char *launch_log; /* --launch-log */
    const char *wait_file;  /* --wait-file */
    const char *stop_file;  /* --stop-file */
    uint64_t annotate;      /* wrap every N launches in a cuptimon annotation */
    uint64_t bare;          /* --bare-threads: the last K threads never annotate */
    int (*push)(const char *);
    int (*pop)(void);
    int64_t (*step)(void);
    int steps, nest; /* --steps, --nest */
    const char *range_log;
    uint64_t linger_ms;
    uint64_t kernel_ns; /* --kernel-us: every kernel lasts this long (0: the double's 1-5 us) */
    uint64_t hold_ns;   /* --hold-us: first a kernel this long on a stream of its own */
    int no_sync;        /* --no-sync: return from main with the GPU still busy */
    int no_init, quiet;
    const char *v2sub, *v2first; /* --v2-subscriber, --v2-first-disallow */
    /* Kernel names live until the process exits: the shim reads them through the
     * record's name pointer, possibly in its exit-time flush after main returned. */
    char *names_buf;
    const char **names;
    size_t nnames;
    struct timespec t0;
} opt = {
    .kernels = 1000,
    .memcpy_every = 50,
    .memset_every = 70,
    .bytes = 4096,
    .streams = 2,
    .devices = 1,
    .threads = 1,
};

struct worker {
    pthread_t tid;
    uint32_t index;
    uint64_t kernels, memcpys, memsets;
    uint64_t *by_name; /* kernel records written, per name */
    uint64_t *launched_by_name;
    uint32_t first_corr, last_corr;
    char *log; /* --log lines of this thread (open_memstream) */
    size_t log_len;
    FILE *logf;
    FILE *llogf; /* --launch-log */
    char *llog;
    size_t llog_len;
    FILE *rlogf; /* --range-log */
    char *rlog;
    size_t rlog_len;
};

static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage: " PROG " [OPTION]...\n"
        "A fake CUDA job: launches kernels, copies and memsets through the fake CUDA API of\n"
        "libcupti-fake.so (the libcupti test double), so that a cuptimon shim injected with\n"
        "CUDA_INJECTION64_PATH (or LD_PRELOAD) traces them as it would a real job.\n"
        "\n"
        "  -n, --kernels N        kernels to launch (default 1000)\n"
        "  -N, --names LIST       comma-separated kernel names, launched in turn (default\n"
        "                         " DEFAULT_NAMES ")\n"
        "  -s, --streams S        streams per device: item i goes to stream 1 + (i / D) %% S\n"
        "                         (default 2)\n"
        "  -d, --devices D        devices: item i goes to device i %% D (default 1)\n"
        "  -m, --memcpy-every M   a 4 KiB device-to-host copy after item i when i %% M == 0\n"
        "                         (default 50; 0 = none)\n"
        "  -e, --memset-every K   a 4 KiB memset after item i when i %% K == 0 (default 70;\n"
        "                         0 = none)\n"
        "  -b, --bytes B          size of each copy and memset (default 4096)\n"
        "  -r, --rate R           launches per second over all threads (default 0: as fast\n"
        "                         as possible)\n"
        "  -t, --threads T        launching threads; thread t launches items i %% T == t\n"
        "                         (default 1)\n"
        "  -g, --graph-id G       launch the kernels as nodes of CUDA graph G (graphId G,\n"
        "                         graphNodeId (G << 32) + 1 + i %% nnames; default 0: none)\n"
        "  -o, --report FILE      write a JSON report to FILE at the end\n"
        "      --annotate N       wrap every N launches in a cuptimon annotation \"step K\"\n"
        "                         (through the injected shim's cuptimon_push_annotation)\n"
        "      --bare-threads K   the last K of the --threads never annotate (with\n"
        "                         --annotate/--nest: a helper thread, as autograd's)\n"
        "      --steps            with --annotate: cuptimon_step() every N launches instead\n"
        "                         (annotations \"ProfilerStep#K\")\n"
        "      --nest             wrap each launch in an annotation \"inner\" (with --annotate:\n"
        "                         nested in the step)\n"
        "      --range-log FILE   with --steps/--nest: one line per step/push/pop, the tid and\n"
        "                         CLOCK_REALTIME ns before and after the call (and the step\n"
        "                         number, the correlation id of the launch before a pop)\n"
        "      --log FILE         write one line per kernel launch: correlation id and\n"
        "                         CLOCK_REALTIME ns before and after the launch call\n"
        "      --launch-log FILE  write one line per launch of a kernel, copy or memset:\n"
        "                         K, C or S, the correlation id, CLOCK_REALTIME ns before\n"
        "                         and after the call, and fakecuda_last_result() (which of\n"
        "                         its records were written or dropped)\n"
        "      --wait-file FILE   start launching only once FILE exists (after cuInit: an\n"
        "                         injected shim connects meanwhile)\n"
        "      --stop-file FILE   stop launching once FILE exists (checked every 64 items),\n"
        "                         then end as after the last of --kernels\n"
        "  -l, --linger-ms MS     sleep MS ms before exiting (default 0); SIGUSR1 ends the\n"
        "                         sleep at once (a normal exit)\n"
        "      --kernel-us US     every kernel runs US microseconds (default: 1-5 us)\n"
        "      --hold-us US       first launch kernel \"_Z4holdv\" of US microseconds on a\n"
        "                         stream of its own (after the --streams): CUPTI completes\n"
        "                         records in launch order, so it holds every later one\n"
        "      --no-sync          return from main without waiting for the fake GPU: work\n"
        "                         still runs while the process exits\n"
        "  -I, --no-init          do not call fakecuda_init (no CUDA_INJECTION64_PATH load)\n"
        "      --v2-subscriber NAME  after cuInit, a CUPTI 13.3+ subscriber of its own (as\n"
        "                         PyTorch's CUPTI monitor) beside the shim's, with user-\n"
        "                         defined kernel and memcpy records; the report says what\n"
        "                         it received\n"
        "      --v2-first-disallow NAME  before cuInit, a subscriber that allows no other\n"
        "  -q, --quiet            no summary line on stdout\n"
        "  -h, --help             this help\n"
        "\n"
        "After the launches it waits for the fake GPU (like cudaDeviceSynchronize; not with\n"
        "--no-sync) and returns from main; a shim flushes at exit by itself.\n");
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (!s || !*s || *s == '-')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || *end || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_names(const char *list)
{
    size_t n = 1;
    char *p;

    free(opt.names_buf);
    free(opt.names);
    opt.names_buf = strdup(list);
    if (!opt.names_buf)
        return -1;
    for (p = opt.names_buf; *p; p++)
        n += *p == ',';
    opt.names = calloc(n, sizeof *opt.names);
    if (!opt.names)
        return -1;
    opt.nnames = 0;
    for (p = opt.names_buf;;) {
        char *comma = strchr(p, ',');

        if (comma)
            *comma = '\0';
        if (!*p)
            return -1; /* empty name */
        opt.names[opt.nnames++] = p;
        if (!comma)
            break;
        p = comma + 1;
    }
    return 0;
}

static uint64_t realtime_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void pace(uint64_t i)
{
    struct timespec at;
    double when;

    if (opt.rate <= 0)
        return;
    when = (double)i / opt.rate;
    at = opt.t0;
    at.tv_sec += (time_t)when;
    at.tv_nsec += (long)((when - (double)(time_t)when) * 1e9);
    if (at.tv_nsec >= 1000000000L) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR)
        ;
}

static void note_corr(struct worker *w, uint32_t corr)
{
    if (!corr)
        return;
    if (!w->first_corr || corr < w->first_corr)
        w->first_corr = corr;
    if (corr > w->last_corr)
        w->last_corr = corr;
}

/* One --launch-log line for the launch just made. */
static void log_launch(struct worker *w, char kind, uint32_t corr, uint64_t before)
{
    if (w->llogf)
        fprintf(w->llogf, "%c %" PRIu32 " %" PRIu64 " %" PRIu64 " %" PRIu32 "\n", kind, corr,
                before, realtime_ns(), fakecuda_last_result());
}

static void *run_worker(void *arg)
{
    struct worker *w = arg;
    int bare = w->index + opt.bare >= (uint64_t)opt.threads;

    for (uint64_t i = w->index; i < opt.kernels; i += opt.threads) {
        size_t ni = (size_t)(i % opt.nnames);
        if (opt.stop_file && (i / opt.threads) % 64 == 0 && access(opt.stop_file, F_OK) == 0)
            break;
        struct fakecuda_kernel k = {
            .name = opt.names[ni],
            .device = (uint32_t)(i % opt.devices),
            .stream = 1 + (uint32_t)((i / opt.devices) % opt.streams),
            .duration_ns = opt.kernel_ns,
        };
        uint32_t corr;

        if (opt.graph_id) {
            k.graph_id = opt.graph_id;
            k.graph_node_id = (opt.graph_id << 32) + 1 + ni;
        }
        if (!bare && opt.annotate && opt.push && i % opt.annotate == 0) {
            char an[64];
            uint64_t t0 = realtime_ns();
            if (opt.steps) {
                /* The previous step ends and the next begins in one call. */
                int64_t n = opt.step();
                if (w->rlogf)
                    fprintf(w->rlogf, "step %ld %" PRIu64 " %" PRIu64 " %" PRId64 "\n",
                            (long)syscall(SYS_gettid), t0, realtime_ns(), n);
            } else {
                if (i)
                    opt.pop();
                snprintf(an, sizeof an, "step %" PRIu64, i / opt.annotate);
                opt.push(an);
            }
        }
        pace(i);
        if (opt.nest && !bare) {
            uint64_t t0 = realtime_ns();
            opt.push("inner");
            if (w->rlogf)
                fprintf(w->rlogf, "push %ld %" PRIu64 " %" PRIu64 " inner\n",
                        (long)syscall(SYS_gettid), t0, realtime_ns());
        }
        uint64_t before = w->logf || w->llogf ? realtime_ns() : 0;
        corr = fakecuda_launch_kernel_ex(&k);
        if (w->logf)
            fprintf(w->logf, "%" PRIu32 " %" PRIu64 " %" PRIu64 "\n", corr, before, realtime_ns());
        log_launch(w, 'K', corr, before);
        if (opt.nest && !bare) {
            uint64_t t0 = realtime_ns();
            opt.pop();
            if (w->rlogf)
                fprintf(w->rlogf, "pop %ld %" PRIu64 " %" PRIu64 " %" PRIu32 "\n",
                        (long)syscall(SYS_gettid), t0, realtime_ns(), corr);
        }
        w->kernels++;
        w->launched_by_name[ni]++;
        if (fakecuda_last_result() & FAKECUDA_REC_GPU)
            w->by_name[ni]++;
        note_corr(w, corr);
        if (opt.memcpy_every && i % opt.memcpy_every == 0) {
            before = w->llogf ? realtime_ns() : 0;
            corr = fakecuda_memcpy(opt.bytes, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, k.device, k.stream);
            log_launch(w, 'C', corr, before);
            note_corr(w, corr);
            w->memcpys++;
        }
        if (opt.memset_every && i % opt.memset_every == 0) {
            before = w->llogf ? realtime_ns() : 0;
            corr = fakecuda_memset(opt.bytes, 0, k.device, k.stream);
            log_launch(w, 'S', corr, before);
            note_corr(w, corr);
            w->memsets++;
        }
    }
    return NULL;
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static int write_report(const char *path, const struct worker *tot, uint64_t start_ns,
                        uint64_t end_ns)
{
    struct fakecupti_stats st;
    FILE *f = fopen(path, "w");

    if (!f) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fakecupti_get_stats(&st);
    fprintf(f, "{\n");
    fprintf(f, "  \"pid\": %ld,\n", (long)getpid());
    /* What NVTX would read at this process's first NVTX call. */
    const char *nvtx = getenv("NVTX_INJECTION64_PATH");
    fprintf(f, "  \"nvtx_injection64_path\": ");
    if (nvtx)
        json_string(f, nvtx);
    else
        fprintf(f, "null");
    fprintf(f, ",\n");
    fprintf(f, "  \"kernels\": %" PRIu64 ",\n", tot->kernels);
    fprintf(f, "  \"memcpys\": %" PRIu64 ",\n", tot->memcpys);
    fprintf(f, "  \"memsets\": %" PRIu64 ",\n", tot->memsets);
    fprintf(f, "  \"kernels_recorded\": %" PRIu64 ",\n", st.kernels);
    fprintf(f, "  \"memcpys_recorded\": %" PRIu64 ",\n", st.memcpys);
    fprintf(f, "  \"memsets_recorded\": %" PRIu64 ",\n", st.memsets);
    fprintf(f, "  \"runtime_api_recorded\": %" PRIu64 ",\n", st.runtime_api);
    fprintf(f, "  \"driver_api_recorded\": %" PRIu64 ",\n", st.driver_api);
    fprintf(f, "  \"external_correlation_recorded\": %" PRIu64 ",\n", st.external_correlation);
    fprintf(f, "  \"dropped\": %" PRIu64 ",\n", st.records_dropped);
    fprintf(f, "  \"buffers_requested\": %" PRIu64 ",\n", st.buffers_requested);
    fprintf(f, "  \"requests_declined\": %" PRIu64 ",\n", st.requests_declined);
    fprintf(f, "  \"buffers_completed\": %" PRIu64 ",\n", st.buffers_completed);
    fprintf(f, "  \"flushes\": %" PRIu64 ",\n", st.flushes);
    fprintf(f, "  \"dirty_buffers\": %" PRIu64 ",\n", st.dirty_buffers);
    fprintf(f, "  \"callbacks_registered\": %s,\n", st.callbacks_registered ? "true" : "false");
    fprintf(f, "  \"by_name\": {");
    for (size_t i = 0; i < opt.nnames; i++) {
        fprintf(f, "%s\n    ", i ? "," : "");
        json_string(f, opt.names[i]);
        fprintf(f, ": %" PRIu64, tot->by_name[i]);
    }
    fprintf(f, "\n  },\n");
    fprintf(f, "  \"launched_by_name\": {");
    for (size_t i = 0; i < opt.nnames; i++) {
        fprintf(f, "%s\n    ", i ? "," : "");
        json_string(f, opt.names[i]);
        fprintf(f, ": %" PRIu64, tot->launched_by_name[i]);
    }
    fprintf(f, "\n  },\n");
    fprintf(f, "  \"first_correlation\": %" PRIu32 ",\n", tot->first_corr);
    fprintf(f, "  \"last_correlation\": %" PRIu32 ",\n", tot->last_corr);
    cuptimon__v2sub_report(f, tot->first_corr, tot->last_corr);
    fprintf(f, "  \"threads\": %" PRIu32 ",\n", opt.threads);
    fprintf(f, "  \"devices\": %" PRIu32 ",\n", opt.devices);
    fprintf(f, "  \"streams\": %" PRIu32 ",\n", opt.streams);
    fprintf(f, "  \"start_ns\": %" PRIu64 ",\n", start_ns);
    fprintf(f, "  \"end_ns\": %" PRIu64 "\n", end_ns);
    fprintf(f, "}\n");
    if (fclose(f) != 0) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* SIGUSR1 during --linger-ms: exit now, normally (a test's way to end a
 * process it kept alive without killing it). */
static volatile sig_atomic_t linger_over;

static void on_usr1(int sig)
{
    (void)sig;
    linger_over = 1;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"kernels", required_argument, NULL, 'n'},
        {"names", required_argument, NULL, 'N'},
        {"streams", required_argument, NULL, 's'},
        {"devices", required_argument, NULL, 'd'},
        {"memcpy-every", required_argument, NULL, 'm'},
        {"memset-every", required_argument, NULL, 'e'},
        {"bytes", required_argument, NULL, 'b'},
        {"rate", required_argument, NULL, 'r'},
        {"threads", required_argument, NULL, 't'},
        {"graph-id", required_argument, NULL, 'g'},
        {"report", required_argument, NULL, 'o'},
        {"log", required_argument, NULL, 'G'},
        {"launch-log", required_argument, NULL, 'L'},
        {"wait-file", required_argument, NULL, 'W'},
        {"stop-file", required_argument, NULL, 'X'},
        {"annotate", required_argument, NULL, 'A'},
        {"bare-threads", required_argument, NULL, 'B'},
        {"steps", no_argument, NULL, 'S'},
        {"nest", no_argument, NULL, 'E'},
        {"range-log", required_argument, NULL, 'R'},
        {"linger-ms", required_argument, NULL, 'l'},
        {"kernel-us", required_argument, NULL, 'K'},
        {"hold-us", required_argument, NULL, 'H'},
        {"no-sync", no_argument, NULL, 'Y'},
        {"no-init", no_argument, NULL, 'I'},
        {"v2-subscriber", required_argument, NULL, 'V'},
        {"v2-first-disallow", required_argument, NULL, 'F'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    struct worker *ws, tot;
    uint64_t v, start_ns, end_ns;
    int c, rc = 0;

    if (parse_names(DEFAULT_NAMES) != 0) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    while ((c = getopt_long(argc, argv, "n:N:s:d:m:e:b:r:t:g:o:G:L:W:X:A:l:IqhSER:K:YH:", longopts,
                            NULL)) != -1) {
        int bad = 0;

        switch (c) {
        case 'n': bad = parse_u64(optarg, UINT64_MAX / 2, &opt.kernels); break;
        case 'N': bad = parse_names(optarg); break;
        case 's':
            bad = parse_u64(optarg, 1u << 20, &v) || v == 0;
            opt.streams = (uint32_t)v;
            break;
        case 'd':
            bad = parse_u64(optarg, 1u << 10, &v) || v == 0;
            opt.devices = (uint32_t)v;
            break;
        case 'm': bad = parse_u64(optarg, UINT64_MAX, &opt.memcpy_every); break;
        case 'e': bad = parse_u64(optarg, UINT64_MAX, &opt.memset_every); break;
        case 'b': bad = parse_u64(optarg, UINT64_MAX / 2, &opt.bytes); break;
        case 'r': {
            char *end;

            errno = 0;
            opt.rate = strtod(optarg, &end);
            bad = errno || *end || end == optarg || !(opt.rate >= 0);
            break;
        }
        case 't':
            bad = parse_u64(optarg, 4096, &v) || v == 0;
            opt.threads = (uint32_t)v;
            break;
        case 'g': bad = parse_u64(optarg, UINT32_MAX, &opt.graph_id); break;
        case 'o': opt.report = optarg; break;
        case 'G': opt.log = optarg; break;
        case 'L': opt.launch_log = optarg; break;
        case 'W': opt.wait_file = optarg; break;
        case 'X': opt.stop_file = optarg; break;
        case 'A': bad = parse_u64(optarg, 1000000000, &opt.annotate); break;
        case 'B': bad = parse_u64(optarg, 1024, &opt.bare); break;
        case 'S': opt.steps = 1; break;
        case 'E': opt.nest = 1; break;
        case 'R': opt.range_log = optarg; break;
        case 'l': bad = parse_u64(optarg, 86400000, &opt.linger_ms); break;
        case 'K':
            bad = parse_u64(optarg, 60000000, &v);
            opt.kernel_ns = v * 1000;
            break;
        case 'Y': opt.no_sync = 1; break;
        case 'H':
            bad = parse_u64(optarg, 3600000000ull, &v);
            opt.hold_ns = v * 1000;
            break;
        case 'I': opt.no_init = 1; break;
        case 'V': opt.v2sub = optarg; break;
        case 'F': opt.v2first = optarg; break;
        case 'q': opt.quiet = 1; break;
        case 'h': usage(stdout); return 0;
        default: fprintf(stderr, "Try '" PROG " --help' for more information.\n"); return 2;
        }
        if (bad) {
            const char *name = "?";

            for (const struct option *o = longopts; o->name; o++)
                if (o->val == c)
                    name = o->name;
            fprintf(stderr,
                    PROG ": invalid value for --%s: '%s'\n"
                         "Try '" PROG " --help' for more information.\n",
                    name, optarg);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr,
                PROG ": unexpected argument '%s'\n"
                     "Try '" PROG " --help' for more information.\n",
                argv[optind]);
        return 2;
    }

    if (opt.v2first && cuptimon__v2sub_start(opt.v2first, 0) != 0)
        return 1;
    if (!opt.no_init && fakecuda_init() != 0)
        return 1;
    if (opt.v2sub && cuptimon__v2sub_start(opt.v2sub, 1) != 0)
        return 1;
    if (opt.annotate || opt.nest) {
        /* The driver loaded the shim privately (RTLD_LOCAL): find it by its
         * path, the way a program that does not link it would. */
        const char *inj = getenv("CUDA_INJECTION64_PATH");
        void *h = inj ? dlopen(inj, RTLD_NOW | RTLD_NOLOAD) : NULL;
        if (h) {
            *(void **)&opt.push = dlsym(h, "cuptimon_push_annotation");
            *(void **)&opt.pop = dlsym(h, "cuptimon_pop_annotation");
            *(void **)&opt.step = dlsym(h, "cuptimon_step");
        }
        if (!opt.push || !opt.pop || (opt.steps && !opt.step)) {
            fprintf(stderr, PROG ": --annotate: no shim with cuptimon_push_annotation is loaded\n");
            return 1;
        }
    }

    ws = calloc(opt.threads, sizeof *ws);
    if (!ws) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    for (uint32_t t = 0; t < opt.threads; t++) {
        ws[t].index = t;
        ws[t].by_name = calloc(opt.nnames, sizeof *ws[t].by_name);
        ws[t].launched_by_name = calloc(opt.nnames, sizeof *ws[t].launched_by_name);
        if (!ws[t].by_name || !ws[t].launched_by_name) {
            fprintf(stderr, PROG ": out of memory\n");
            return 1;
        }
    }

    for (uint32_t t = 0; opt.log && t < opt.threads; t++)
        ws[t].logf = open_memstream(&ws[t].log, &ws[t].log_len);
    for (uint32_t t = 0; opt.launch_log && t < opt.threads; t++)
        ws[t].llogf = open_memstream(&ws[t].llog, &ws[t].llog_len);
    for (uint32_t t = 0; t < opt.threads && opt.range_log; t++)
        ws[t].rlogf = open_memstream(&ws[t].rlog, &ws[t].rlog_len);
    while (opt.wait_file && access(opt.wait_file, F_OK) != 0) {
        struct timespec ts = {.tv_nsec = 10000000L};
        nanosleep(&ts, NULL);
    }
    start_ns = realtime_ns();
    clock_gettime(CLOCK_MONOTONIC, &opt.t0);
    uint64_t held = 0;
    if (opt.hold_ns) {
        /* A straggler, a collective waiting for another rank, a persistent
         * kernel: every record launched after it waits for it. */
        struct fakecuda_kernel k = {
            .name = "_Z4holdv", .stream = opt.streams + 1, .duration_ns = opt.hold_ns};
        uint64_t before = realtime_ns();
        uint32_t corr = fakecuda_launch_kernel_ex(&k);
        log_launch(&ws[0], 'K', corr, before);
        note_corr(&ws[0], corr);
        held = 1;
    }
    if (opt.threads == 1) {
        run_worker(&ws[0]);
    } else {
        for (uint32_t t = 0; t < opt.threads; t++) {
            int e = pthread_create(&ws[t].tid, NULL, run_worker, &ws[t]);

            if (e) {
                fprintf(stderr, PROG ": pthread_create: %s\n", strerror(e));
                return 1;
            }
        }
        for (uint32_t t = 0; t < opt.threads; t++)
            pthread_join(ws[t].tid, NULL);
    }
    if (!opt.no_sync)
        fakecuda_synchronize();
    end_ns = realtime_ns();
    if (opt.log) {
        FILE *lf = fopen(opt.log, "w");
        for (uint32_t t = 0; t < opt.threads; t++) {
            if (ws[t].logf)
                fclose(ws[t].logf);
            if (lf && ws[t].log)
                fwrite(ws[t].log, 1, ws[t].log_len, lf);
            free(ws[t].log);
        }
        if (!lf || fclose(lf) != 0) {
            fprintf(stderr, PROG ": cannot write %s: %s\n", opt.log, strerror(errno));
            return 1;
        }
    }

    if (opt.launch_log) {
        FILE *lf = fopen(opt.launch_log, "w");
        for (uint32_t t = 0; t < opt.threads; t++) {
            if (ws[t].llogf)
                fclose(ws[t].llogf);
            if (lf && ws[t].llog)
                fwrite(ws[t].llog, 1, ws[t].llog_len, lf);
            free(ws[t].llog);
        }
        if (!lf || fclose(lf) != 0) {
            fprintf(stderr, PROG ": cannot write %s: %s\n", opt.launch_log, strerror(errno));
            return 1;
        }
    }

    if (opt.range_log) {
        FILE *lf = fopen(opt.range_log, "w");
        for (uint32_t t = 0; t < opt.threads; t++) {
            if (ws[t].rlogf)
                fclose(ws[t].rlogf);
            if (lf && ws[t].rlog)
                fwrite(ws[t].rlog, 1, ws[t].rlog_len, lf);
            free(ws[t].rlog);
        }
        if (!lf || fclose(lf) != 0) {
            fprintf(stderr, PROG ": cannot write %s: %s\n", opt.range_log, strerror(errno));
            return 1;
        }
    }

    memset(&tot, 0, sizeof tot);
    tot.by_name = calloc(opt.nnames, sizeof *tot.by_name);
    tot.launched_by_name = calloc(opt.nnames, sizeof *tot.launched_by_name);
    if (!tot.by_name || !tot.launched_by_name) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    tot.kernels = held;
    for (uint32_t t = 0; t < opt.threads; t++) {
        tot.kernels += ws[t].kernels;
        tot.memcpys += ws[t].memcpys;
        tot.memsets += ws[t].memsets;
        for (size_t i = 0; i < opt.nnames; i++) {
            tot.by_name[i] += ws[t].by_name[i];
            tot.launched_by_name[i] += ws[t].launched_by_name[i];
        }
        if (ws[t].first_corr && (!tot.first_corr || ws[t].first_corr < tot.first_corr))
            tot.first_corr = ws[t].first_corr;
        if (ws[t].last_corr > tot.last_corr)
            tot.last_corr = ws[t].last_corr;
        free(ws[t].by_name);
        free(ws[t].launched_by_name);
    }
    free(ws);

    if (opt.report && write_report(opt.report, &tot, start_ns, end_ns) != 0)
        rc = 1;
    if (!opt.quiet) {
        struct fakecupti_stats st;

        fakecupti_get_stats(&st);
        printf(PROG ": pid %ld launched %" PRIu64 " kernels, %" PRIu64 " memcpys, %" PRIu64
                    " memsets in %.3f ms; recorded %" PRIu64 " kernels, %" PRIu64
                    " memcpys, %" PRIu64 " memsets, %" PRIu64 " API records; dropped %" PRIu64
                    "%s\n",
               (long)getpid(), tot.kernels, tot.memcpys, tot.memsets,
               (double)(end_ns - start_ns) / 1e6, st.kernels, st.memcpys, st.memsets,
               st.runtime_api + st.driver_api, st.records_dropped,
               st.callbacks_registered ? "" : " (no CUPTI client registered)");
        fflush(stdout);
    }
    free(tot.by_name);
    free(tot.launched_by_name);
    if (opt.linger_ms) {
        struct timespec ts = {.tv_sec = (time_t)(opt.linger_ms / 1000),
                              .tv_nsec = (long)(opt.linger_ms % 1000) * 1000000L};

        while (!linger_over && nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    return rc;
}
