/*
 * GPU hardware metrics (issue 34): CUPTI's PM Sampling API on every GPU of
 * the node, from the daemon, never from the jobs.
 *
 * What the H200 showed (docs/gpu-runs/20261205-h200-pm-probe,
 * docs/reference-pmsampling.md) and this code relies on:
 *  - cuInit, then cuptiProfilerInitialize, must come first (without them
 *    CUPTI crashes rather than failing); no CUDA context is needed, and
 *    none is made: the daemon takes no GPU memory (a context would cost
 *    ~520 MiB per GPU);
 *  - the device index is the CUDA ordinal; the chip's metric names come
 *    from the Profiler Host API (libnvperf_host, loaded by libcupti), the
 *    device's counter availability removes what the board lacks (NVLink
 *    on a single-GPU node);
 *  - sample times are CLOCK_REALTIME ns (they agree with cuptiGetTimestamp
 *    to a microsecond, as the kernel records' do); the first sample after
 *    Start spans from up to a second and more before it, and is dropped;
 *  - a second profiler on the device (another sampler, DCGM profiling, ncu
 *    with its own counters) makes SetConfig or the availability query
 *    answer CUPTI_ERROR_HARDWARE_BUSY; while we sample, ncu fails (exit 9):
 *    we yield on request, and when a profiler's process appears;
 *  - once the hardware buffer overflowed (KEEP_OLDEST), every decode
 *    answered OUT_OF_MEMORY and handed over nothing: an overflow is
 *    counted, and where a decode hands over nothing after it the device's
 *    sampling is restarted;
 *  - the cost on the GPU was not measurable at 10 ms (within the run to
 *    run spread), evaluating a sample costs 0.1-0.25 ms of CPU.
 *
 * One thread samples every device: it brings a device up (availability,
 * host configuration of the metric set that fits one pass, enable, config,
 * counter data image, start), decodes it every decode period, evaluates
 * each completed sample, writes them to the device's archive session and
 * keeps the latest for status, top and the metrics file.  A device that is
 * busy or failed is tried again after retry_s; one the operator paused, or
 * that a profiler's process needs, is stopped (its counters released) and
 * started again after.  The loop thread only reads and sets state under
 * the lock.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "gpm.h"
#include "gpm-cupti.h"
#include "gpm-set.h"
#include "log.h"
#include "retention.h"
#include "archive/archive.h"
#include "archive/gpm.h"
#include "proto/util.h"

#define GPM_DEVICES_MAX 64
#define RING            1200 /* samples kept per device for status/top/metrics */
/* CUPTI's hardware buffer per device.  On the H100 under a memory-bound
 * load, 32 MiB at 10 ms overflowed before the first decode, every time
 * (OUT_OF_MEMORY, no sample), whatever the decode period or the counter
 * data image's size (docs/gpu-runs/20261205-h100-held-pm-edges,
 * pm-overflow.txt); 64 MiB holds with a decode every DECODE_NS.  A device
 * that still wedges restarts with twice the buffer, up to HW_BUFFER_MAX. */
#define HW_BUFFER_BYTES (64ull << 20)
#define HW_BUFFER_MAX   (256ull << 20)
/* A decode every 200 ms, whatever the interval: under a memory-bound load
 * the H100 fills the hardware buffer at a rate the interval does not set
 * (at 10 ms, 100 ms and 1 s alike, 64 MiB overflowed before a decode every
 * 500 ms or 1 s, 128 MiB before one a second, and 64 MiB never did with
 * one every 200 ms; docs/gpu-runs/20261206-h100-suite-pm-overflow).  Ten
 * intervals, at least every SCAN_NS, overflowed once or twice in each
 * pm-case.  On a busy GPU (a memory-bound kernel or a GEMM alike)
 * decoding the default set takes 0.4-0.55 of a CPU core at 10 and 100 ms
 * alike, because of one pair: the tensor pipe's counter in a configuration
 * with SM active or occupancy.  Every set without that pair cost the H100
 * 1-2 % of a core (docs/gpu-runs/20261207-h100-sandbox-pm-cost); the
 * sampler's CPU over a pm-case's 84 s is 9.4-12.7 s.  On an idle GPU, a few
 * ms a second. */
#define DECODE_NS 200000000ull
#define SCAN_NS   500000000ull /* look for profilers' processes twice a second */

/* The metrics the daemon knows (keys, CUPTI names, Prometheus names) are
 * gpm-set.c's, shared with the configuration check. */
#define known  cuptimon__gpm_known
#define NKNOWN cuptimon__gpm_nknown
/* Past these, the sampler's cost is logged (once per device and set):
 * decoding a set without the costly pair took 1-2 % of a core per busy
 * H100, with it 40-53 % (docs/gpu-runs/20261207-h100-sandbox-pm-cost); and
 * the triggered samples of the default set are about 67 KB/s at 10 Hz
 * (the Perf SDK's estimate), while the flood that cost that CPU filled 64
 * MiB within 0.5 s. */
#define COST_WARN_CPU_PCT 5.0
#define COST_WARN_RAW_BPS (32.0 * 1048576)
#define COST_WINDOW_NS    10000000000ll /* the status's cost figures: the last 10 s */

enum dev_state {
    DEV_IDLE = 0, /* not started yet */
    DEV_SAMPLING,
    DEV_PAUSED, /* the operator's pause, or yielded to a profiler */
    DEV_BUSY,   /* another profiler holds the counters: tried again later */
    DEV_FAILED, /* an error: tried again later */
    DEV_OFF,    /* cannot be sampled at all (privileges, not supported) */
};
static const char *const state_names[] = {"starting", "sampling", "paused",
                                          "busy",     "failed",   "off"};

struct ring_ent {
    uint64_t start, end;
    double v[CUPTIMON_GPM_METRICS_MAX];
};

struct gpm_dev {
    int ordinal;
    char name[96], uuid[48], pci[32], chip[16];
    enum dev_state state;
    char why[320];
    /* wanted: the operator's pause (until pause_until, 0: resumed), the
     * yield to a profiler's process */
    int paused;
    int64_t pause_until_ns;
    char paused_by[96];
    int yielded;
    char yield_to[96];
    int64_t retry_at_ns;
    /* CUPTI objects (the thread's) */
    void *obj, *host;
    uint8_t *config, *data, *clean;
    size_t config_size, data_size;
    uint32_t max_samples;
    uint64_t interval_ns; /* the running configuration's */
    int64_t started_ns;
    int wedged;         /* overflowed, and the decode that said so handed over nothing */
    uint64_t hw_buffer; /* the hardware buffer's bytes */
    /* the metric set in use: indexes into the wanted set's names */
    uint32_t nm;
    struct cuptimon_gpm_metric m[CUPTIMON_GPM_METRICS_MAX];
    const char *names[CUPTIMON_GPM_METRICS_MAX];
    int prom[CUPTIMON_GPM_METRICS_MAX]; /* index into known[], -1 */
    char dropped_metrics[512];          /* what the chip or board does not have */
    char unknown_metrics[512];          /* words of the set that name no metric */
    /* The sampler's own cost (issue 48): the decode's thread CPU and the
     * raw bytes the GPU wrote to the hardware buffer, over COST_WINDOW_NS
     * windows (the last complete one shown), and whether it was logged. */
    int64_t cost_win_ns;
    uint64_t cost_win_cpu, cost_win_raw, cost_win_raw_ok;
    double cost_cpu_pct, cost_raw_bps; /* -1: not measured yet / not told */
    int cost_warned, costly_set;
    uint64_t raw_bytes; /* written to the hardware buffer, as NVPW's status tells */
    int raw_ok;         /* the record buffer's status is known for this device */
    int nvpw_index;     /* the Perf SDK's index of this device, -1: none */
    /* the archive session */
    struct cuptimon_archive_writer *aw;
    char dir[64];
    uint64_t chunk;
    /* counts (under the lock) */
    uint64_t samples, overflows, decode_errors, eval_errors, first_dropped, write_errors;
    uint64_t decode_cpu_ns;
    int64_t last_sample_end;
    /* the latest samples (under the lock) */
    struct ring_ent *ring;
    size_t ring_head, ring_len;
};

/* The Perf SDK's (nvperf_target.h, its device part): CUPTI's PM sampling
 * runs on its periodic sampler, whose record buffer is the hardware buffer
 * of cuptiPmSamplingSetConfig. */
struct nvpw_buffer_status_params { /* NVPW_GPU_PeriodicSampler_GetRecordBufferStatus_Params */
    size_t structSize;
    void *pPriv;
    size_t deviceIndex;
    size_t totalSize;
    size_t usedSize;
    uint8_t overflow;
};
struct nvpw_count_params { /* NVPW_GetDeviceCount_Params */
    size_t structSize;
    void *pPriv;
    size_t numDevices;
};
struct nvpw_pci_id { /* NVPW_PciBusId */
    uint32_t domain;
    uint16_t bus, device;
};
struct nvpw_pci_params { /* NVPW_Device_GetPciBusIds_Params */
    size_t structSize;
    void *pPriv;
    struct nvpw_pci_id *pBusIds;
    size_t numDevices;
};

struct cuptimon_gpm {
    pthread_t thread;
    int thread_on;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, reconfigure;
    struct cuptimon_gpm_config cfg;
    int windows;
    char archive_root[512];
    uint64_t segment_bytes;
    int level;
    struct cuptimon_live_set *live;
    struct gpm_api api;
    int up;        /* libraries loaded, cuInit and the profiler initialised */
    char why[640]; /* why not */
    char cupti_path[512];
    int driver_version;
    struct gpm_dev dev[GPM_DEVICES_MAX];
    int ndev;
    /* The node's GPUs' UUIDs by ordinal, listed once cuInit succeeds even
     * where the profiler is refused: cuptimon__gpm_node_of's table. */
    char node_uuid[GPM_DEVICES_MAX][CUPTIMON_UUID_TEXT_SIZE];
    int nnode;
    int node_listed; /* the list is final: bring-up got past cuInit, or gave up */
    int64_t run_ns;  /* the sampler's start, naming its sessions */
    /* The Perf SDK's record buffer status (libnvperf_host, which libcupti
     * loads and samples through): the raw bytes the GPU wrote.  Looked up
     * once a device samples; NULL where the library does not have it. */
    int nvpw_tried;
    int (*nvpw_status)(struct nvpw_buffer_status_params *);
    int (*nvpw_count)(struct nvpw_count_params *);
    int (*nvpw_pci)(struct nvpw_pci_params *);
    char hostname[256];
};

static char *utc_text(char *out, size_t len, int64_t ns);
struct cuptimon_gpm;
struct gpm_dev;
static void nvpw_bind(struct cuptimon_gpm *g, struct gpm_dev *d);
static int64_t raw_used(struct cuptimon_gpm *g, struct gpm_dev *d);

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *err_str(struct cuptimon_gpm *g, gpm_result rc)
{
    const char *s = NULL;
    if (g->api.GetResultString && g->api.GetResultString(rc, &s) == GPM_SUCCESS && s)
        return s;
    return "unknown CUPTI error";
}

/* ---- the libraries ------------------------------------------------------- */

static void *open_first(const char *explicit_path, const char *const *names, size_t n, char *used,
                        size_t usedlen)
{
    void *h = NULL;
    if (explicit_path && explicit_path[0]) {
        h = dlopen(explicit_path, RTLD_NOW | RTLD_LOCAL);
        snprintf(used, usedlen, "%s", explicit_path);
        return h;
    }
    for (size_t i = 0; i < n && !h; i++) {
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h)
            snprintf(used, usedlen, "%s", names[i]);
    }
    return h;
}

#define SYM(h, path, field, name)                                                                  \
    do {                                                                                           \
        *(void **)&a->field = dlsym(a->h, name);                                                   \
        if (!a->field) {                                                                           \
            snprintf(g->why, sizeof g->why,                                                        \
                     "%.300s has no %s (PM sampling needs CUPTI 12.6 or later): no GPU metrics",   \
                     path, name);                                                                  \
            return -ENOSYS;                                                                        \
        }                                                                                          \
    } while (0)

/* The driver's entry points. */
static int load_cuda(struct cuptimon_gpm *g)
{
    static const char *const cuda_names[] = {"libcuda.so.1", "libcuda.so"};
    struct gpm_api *a = &g->api;
    char used[512];
    a->cuda = open_first(g->cfg.libcuda, cuda_names, 2, used, sizeof used);
    if (!a->cuda) {
        snprintf(g->why, sizeof g->why,
                 "no CUDA driver (%s cannot be loaded: %s): no GPU metrics on this node",
                 g->cfg.libcuda[0] ? g->cfg.libcuda : "libcuda.so.1", dlerror());
        return -ENOENT;
    }
    SYM(cuda, used, cuInit, "cuInit");
    SYM(cuda, used, cuDeviceGetCount, "cuDeviceGetCount");
    SYM(cuda, used, cuDeviceGet, "cuDeviceGet");
    SYM(cuda, used, cuDeviceGetName, "cuDeviceGetName");
    SYM(cuda, used, cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId");
    SYM(cuda, used, cuDriverGetVersion, "cuDriverGetVersion");
    *(void **)&a->cuDeviceGetUuid = dlsym(a->cuda, "cuDeviceGetUuid_v2");
    if (!a->cuDeviceGetUuid)
        *(void **)&a->cuDeviceGetUuid = dlsym(a->cuda, "cuDeviceGetUuid");
    return 0;
}

/* CUPTI's PM sampling and profiler host entry points. */
static int load_cupti(struct cuptimon_gpm *g)
{
    static const char *const cupti_names[] = {
        "libcupti.so.13",
        "libcupti.so.12",
        "libcupti.so",
        "/usr/local/cuda/lib64/libcupti.so.13",
        "/usr/local/cuda/lib64/libcupti.so.12",
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
        "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so",
        "/usr/local/cuda/targets/sbsa-linux/lib/libcupti.so",
    };
    struct gpm_api *a = &g->api;
    a->cupti = open_first(g->cfg.libcupti, cupti_names, sizeof cupti_names / sizeof *cupti_names,
                          g->cupti_path, sizeof g->cupti_path);
    if (!a->cupti) {
        snprintf(g->why, sizeof g->why,
                 "no libcupti (%s; set gpu_metrics_libcupti in cuptimond.conf): no GPU metrics",
                 g->cfg.libcupti[0] ? g->cfg.libcupti : "looked for libcupti.so.13 and .12");
        return -ENOENT;
    }
#define GPM_SYM(name, sym, params) SYM(cupti, g->cupti_path, name, sym);
    GPM_CUPTI_CALLS(GPM_SYM)
#undef GPM_SYM
    SYM(cupti, g->cupti_path, GetResultString, "cuptiGetResultString");
    SYM(cupti, g->cupti_path, GetTimestamp, "cuptiGetTimestamp");
    return 0;
}
#undef SYM

/* cuInit, the profiler, and the devices. */
static int bring_up_api(struct cuptimon_gpm *g)
{
    struct gpm_api *a = &g->api;
    int rc, n = 0;
    if ((rc = load_cuda(g)) < 0)
        return rc;
    a->cuDriverGetVersion(&g->driver_version);
    if ((rc = a->cuInit(0)) != 0) {
        snprintf(g->why, sizeof g->why, "cuInit failed (CUDA error %d%s): no GPU metrics", rc,
                 rc == 100 ? ", no CUDA device visible to cuptimond" : "");
        return -ENODEV;
    }
    /* Which GPU each UUID is, for the live view of the jobs' devices
     * (cuptimon__gpm_node_of), whether or not the counters may be read. */
    if (a->cuDeviceGetCount(&n) == 0 && n > 0) {
        pthread_mutex_lock(&g->mu);
        for (int i = 0; i < n && i < GPM_DEVICES_MAX; i++) {
            int cd = 0;
            unsigned char u[16];
            if (a->cuDeviceGet(&cd, i) == 0 && a->cuDeviceGetUuid && a->cuDeviceGetUuid(u, cd) == 0)
                cuptimon__uuid_text(g->node_uuid[i], u);
            g->nnode = i + 1;
        }
        g->node_listed = 1; /* the driver's list: a UUID it lacks is not on this node */
        pthread_mutex_unlock(&g->mu);
    }
    n = 0;
    if ((rc = load_cupti(g)) < 0)
        return rc;
    struct gpm_profiler_init_params pi = {.structSize =
                                              GPM_SIZE(struct gpm_profiler_init_params, pPriv)};
    gpm_result cr = a->ProfilerInitialize(&pi);
    if (cr != GPM_SUCCESS) {
        snprintf(g->why, sizeof g->why, "cuptiProfilerInitialize: %s: no GPU metrics",
                 err_str(g, cr));
        return -EIO;
    }
    if (a->cuDeviceGetCount(&n) != 0 || n <= 0) {
        snprintf(g->why, sizeof g->why, "the CUDA driver lists no device: no GPU metrics");
        return -ENODEV;
    }
    pthread_mutex_lock(&g->mu);
    g->ndev = n > GPM_DEVICES_MAX ? GPM_DEVICES_MAX : n;
    for (int i = 0; i < g->ndev; i++) {
        struct gpm_dev *d = &g->dev[i];
        int cd = 0;
        unsigned char u[16];
        d->ordinal = i;
        d->hw_buffer = HW_BUFFER_BYTES;
        d->cost_cpu_pct = d->cost_raw_bps = -1;
        d->nvpw_index = -1;
        if (a->cuDeviceGet(&cd, i) == 0) {
            a->cuDeviceGetName(d->name, sizeof d->name, cd);
            a->cuDeviceGetPCIBusId(d->pci, sizeof d->pci, cd);
            if (a->cuDeviceGetUuid && a->cuDeviceGetUuid(u, cd) == 0)
                cuptimon__uuid_text(d->uuid, u);
        }
        d->name[sizeof d->name - 1] = d->pci[sizeof d->pci - 1] = '\0';
        d->ring = calloc(RING, sizeof *d->ring);
    }
    pthread_mutex_unlock(&g->mu);
    return 0;
}

/* ---- one device ----------------------------------------------------------- */

/* The wanted set's CUPTI names and what they are (known[] for a key, a
 * known CUPTI name or one of its alternatives, or the name itself for
 * another CUPTI name).  A word that is neither a key nor has the form of a
 * CUPTI name is not asked of CUPTI: it goes into unknown (the
 * configuration check refuses it; this is the reload's and the older
 * file's way). */
static uint32_t wanted(const struct cuptimon_gpm *g, struct cuptimon_gpm_metric *m, int *prom,
                       char *unknown, size_t unknown_len)
{
    uint32_t n = 0;
    char buf[sizeof g->cfg.set];
    snprintf(buf, sizeof buf, "%s", g->cfg.set);
    unknown[0] = '\0';
    if (!buf[strspn(buf, ", ")]) {
        for (size_t i = 0; i < NKNOWN && n < CUPTIMON_GPM_METRICS_MAX; i++, n++) {
            snprintf(m[n].key, sizeof m[n].key, "%s", known[i].key);
            snprintf(m[n].cupti, sizeof m[n].cupti, "%s", known[i].cupti);
            snprintf(m[n].unit, sizeof m[n].unit, "%s", known[i].unit);
            snprintf(m[n].label, sizeof m[n].label, "%s", known[i].label);
            prom[n] = (int)i;
        }
        return n;
    }
    for (char *save = NULL, *w = strtok_r(buf, ", ", &save); w && n < CUPTIMON_GPM_METRICS_MAX;
         w = strtok_r(NULL, ", ", &save)) {
        int i = cuptimon__gpm_known_find(w);
        if (i >= 0) {
            snprintf(m[n].key, sizeof m[n].key, "%s", known[i].key);
            /* The key means the default name; a CUPTI name, itself. */
            snprintf(m[n].cupti, sizeof m[n].cupti, "%s",
                     strcasecmp(w, known[i].key) == 0 ? known[i].cupti : w);
            snprintf(m[n].unit, sizeof m[n].unit, "%s", known[i].unit);
            snprintf(m[n].label, sizeof m[n].label, "%s", known[i].label);
            prom[n] = i;
        } else if (!cuptimon__gpm_is_cupti_name(w)) {
            size_t l = strlen(unknown);
            snprintf(unknown + l, unknown_len - l, "%s%s", l ? ", " : "", w);
            continue;
        } else {
            /* A CUPTI name of the operator's: its key is the name with
             * every other character made '_', cut to fit. */
            size_t k = 0;
            for (const char *c = w; *c && k + 1 < sizeof m[n].key; c++)
                m[n].key[k++] = isalnum((unsigned char)*c) ? (char)tolower((unsigned char)*c) : '_';
            m[n].key[k] = '\0';
            snprintf(m[n].cupti, sizeof m[n].cupti, "%s", w);
            snprintf(m[n].unit, sizeof m[n].unit, "%s",
                     strstr(w, ".pct")         ? "%"
                     : strstr(w, "per_second") ? "/s"
                                               : "");
            snprintf(m[n].label, sizeof m[n].label, "%.63s", w);
            prom[n] = -1;
        }
        /* Named twice: once. */
        int dup = 0;
        for (uint32_t j = 0; j < n; j++)
            dup |= strcmp(m[j].key, m[n].key) == 0;
        if (!dup)
            n++;
    }
    return n;
}

static void host_free(struct cuptimon_gpm *g, void **host)
{
    if (*host) {
        struct gpm_host_deinit_params p = {.structSize =
                                               GPM_SIZE(struct gpm_host_deinit_params, pHostObject),
                                           .pHostObject = *host};
        g->api.HostDeinitialize(&p);
        *host = NULL;
    }
}

/* A host object configured for d's metrics: each wanted metric the chip
 * and board have (ConfigAddMetrics accepts it alone), then as many as fit
 * one pass (PM sampling takes nothing else).  Fills d->m/names/nm and the
 * config image.  0, or -errno with d->why. */
static int host_config(struct cuptimon_gpm *g, struct gpm_dev *d, const uint8_t *avail)
{
    struct gpm_api *a = &g->api;
    struct cuptimon_gpm_metric want[CUPTIMON_GPM_METRICS_MAX];
    int prom[CUPTIMON_GPM_METRICS_MAX];
    uint32_t nw = wanted(g, want, prom, d->unknown_metrics, sizeof d->unknown_metrics), keep = 0;
    int ok[CUPTIMON_GPM_METRICS_MAX] = {0};
    d->dropped_metrics[0] = '\0';
    for (uint32_t i = 0; i < nw; i++) {
        struct gpm_host_init_params hi = {.structSize =
                                              GPM_SIZE(struct gpm_host_init_params, pHostObject),
                                          .profilerType = GPM_PROFILER_TYPE_PM_SAMPLING,
                                          .pChipName = d->chip,
                                          .pCounterAvailabilityImage = avail};
        if (a->HostInitialize(&hi) != GPM_SUCCESS) {
            snprintf(d->why, sizeof d->why, "the Profiler Host API does not take chip %s", d->chip);
            return -ENOTSUP;
        }
        const char *one = want[i].cupti;
        struct gpm_host_add_metrics_params am = {
            .structSize = GPM_SIZE(struct gpm_host_add_metrics_params, numMetrics),
            .pHostObject = hi.pHostObject,
            .ppMetricNames = &one,
            .numMetrics = 1};
        ok[i] = a->HostConfigAddMetrics(&am) == GPM_SUCCESS;
        void *h = hi.pHostObject;
        host_free(g, &h);
        if (!ok[i]) {
            size_t l = strlen(d->dropped_metrics);
            snprintf(d->dropped_metrics + l, sizeof d->dropped_metrics - l, "%s%s", l ? ", " : "",
                     want[i].key);
        }
    }
    for (uint32_t i = 0; i < nw; i++)
        if (ok[i])
            keep++;
    /* Fewer until one pass takes them (the chip says how many it can). */
    for (; keep > 0; keep--) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < nw && n < keep; i++) {
            if (!ok[i])
                continue;
            d->m[n] = want[i];
            d->prom[n] = prom[i];
            n++;
        }
        for (uint32_t i = 0; i < n; i++)
            d->names[i] = d->m[i].cupti;
        struct gpm_host_init_params hi = {.structSize =
                                              GPM_SIZE(struct gpm_host_init_params, pHostObject),
                                          .profilerType = GPM_PROFILER_TYPE_PM_SAMPLING,
                                          .pChipName = d->chip,
                                          .pCounterAvailabilityImage = avail};
        if (a->HostInitialize(&hi) != GPM_SUCCESS)
            break;
        struct gpm_host_add_metrics_params am = {
            .structSize = GPM_SIZE(struct gpm_host_add_metrics_params, numMetrics),
            .pHostObject = hi.pHostObject,
            .ppMetricNames = d->names,
            .numMetrics = n};
        struct gpm_host_config_size_params cs = {
            .structSize = GPM_SIZE(struct gpm_host_config_size_params, configImageSize),
            .pHostObject = hi.pHostObject};
        if (a->HostConfigAddMetrics(&am) != GPM_SUCCESS || a->HostGetConfigImageSize(&cs) != 0 ||
            cs.configImageSize == 0) {
            void *h = hi.pHostObject;
            host_free(g, &h);
            continue;
        }
        uint8_t *img = malloc(cs.configImageSize);
        struct gpm_host_config_params ci = {
            .structSize = GPM_SIZE(struct gpm_host_config_params, pConfigImage),
            .pHostObject = hi.pHostObject,
            .configImageSize = cs.configImageSize,
            .pConfigImage = img};
        struct gpm_host_passes_params np = {
            .structSize = GPM_SIZE(struct gpm_host_passes_params, numOfPasses),
            .configImageSize = cs.configImageSize,
            .pConfigImage = img};
        if (!img || a->HostGetConfigImage(&ci) != GPM_SUCCESS ||
            a->HostGetNumOfPasses(&np) != GPM_SUCCESS || np.numOfPasses != 1) {
            free(img);
            void *h = hi.pHostObject;
            host_free(g, &h);
            continue;
        }
        d->host = hi.pHostObject;
        d->config = img;
        d->config_size = cs.configImageSize;
        d->nm = n;
        /* The accepted ones past the first n did not fit one pass. */
        for (uint32_t i = 0, seen = 0; i < nw; i++) {
            if (!ok[i] || seen++ < n)
                continue;
            size_t l = strlen(d->dropped_metrics);
            snprintf(d->dropped_metrics + l, sizeof d->dropped_metrics - l, "%s%s (one pass)",
                     l ? ", " : "", want[i].key);
        }
        return 0;
    }
    snprintf(d->why, sizeof d->why,
             "none of the metrics asked for can be sampled on %.16s (%.120s%s%.80s)", d->chip,
             d->dropped_metrics, d->unknown_metrics[0] ? "; unknown: " : "", d->unknown_metrics);
    return -ENOTSUP;
}

/* Why CUPTI refused, in d->why, and the state that follows. */
static void refused(struct cuptimon_gpm *g, struct gpm_dev *d, const char *call, gpm_result rc)
{
    int64_t now = now_ns();
    switch (rc) {
    case GPM_ERROR_HARDWARE_BUSY:
        d->state = DEV_BUSY;
        snprintf(d->why, sizeof d->why,
                 "another profiler holds the GPU's counters (%s: CUPTI_ERROR_HARDWARE_BUSY: DCGM "
                 "profiling, Nsight Compute or Systems, another sampler); trying again every %g s",
                 call, g->cfg.retry_s);
        d->retry_at_ns = now + (int64_t)(g->cfg.retry_s * 1e9);
        break;
    case GPM_ERROR_INSUFFICIENT_PRIVILEGES:
        d->state = DEV_OFF;
        snprintf(d->why, sizeof d->why,
                 "the driver allows GPU performance counters to administrators only "
                 "(RmProfilingAdminOnly=1), which needs CAP_SYS_ADMIN; cuptimond.service keeps "
                 "no capability (a drop-in with CapabilityBoundingSet=CAP_SYS_ADMIN gives it "
                 "back); or load the driver with NVreg_RestrictProfilingToAdminUsers=0");
        break;
    case GPM_ERROR_NOT_SUPPORTED:
    case GPM_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case GPM_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case GPM_ERROR_MIG_DEVICE_NOT_SUPPORTED:
        d->state = DEV_OFF;
        snprintf(d->why, sizeof d->why,
                 "%s: %s: this GPU or its mode (MIG, vGPU) has no PM sampling", call,
                 err_str(g, rc));
        break;
    default:
        d->state = DEV_FAILED;
        snprintf(d->why, sizeof d->why, "%s: %s; trying again every %g s", call, err_str(g, rc),
                 g->cfg.retry_s);
        d->retry_at_ns = now + (int64_t)(g->cfg.retry_s * 1e9);
        break;
    }
}

static void dev_free(struct cuptimon_gpm *g, struct gpm_dev *d)
{
    struct gpm_api *a = &g->api;
    if (d->obj) {
        struct gpm_object_params p = {.structSize =
                                          GPM_SIZE(struct gpm_object_params, pPmSamplingObject),
                                      .pPmSamplingObject = d->obj};
        a->Disable(&p);
        d->obj = NULL;
    }
    host_free(g, &d->host);
    free(d->config);
    free(d->data);
    free(d->clean);
    d->config = d->data = d->clean = NULL;
}

static void archive_close(struct cuptimon_gpm *g, struct gpm_dev *d)
{
    if (!d->aw)
        return;
    cuptimon__aw_close(d->aw);
    d->aw = NULL;
    if (g->live)
        cuptimon__live_set_remove(g->live, d->dir);
}

/* The device's archive session, for its current metric set. */
static void archive_open(struct cuptimon_gpm *g, struct gpm_dev *d)
{
    struct cuptimon_gpm_meta m = {.ordinal = d->ordinal,
                                  .interval_ns = d->interval_ns,
                                  .start_unix_ns = (uint64_t)now_ns(),
                                  .nmetrics = d->nm};
    char path[700], *err = NULL;
    struct tm tm;
    time_t secs = (time_t)(g->run_ns / 1000000000);
    snprintf(m.name, sizeof m.name, "%s", d->name);
    snprintf(m.uuid, sizeof m.uuid, "%s", d->uuid);
    snprintf(m.pci_bus_id, sizeof m.pci_bus_id, "%s", d->pci);
    snprintf(m.chip, sizeof m.chip, "%s", d->chip);
    memcpy(m.metric, d->m, sizeof m.metric[0] * d->nm);
    gmtime_r(&secs, &tm);
    /* A new set (a reload) gets a session of its own: the chunk counter
     * goes on, so that names stay unique within the run. */
    snprintf(d->dir, sizeof d->dir, "%04d%02d%02dT%02d%02d%02dZ-gpu%d-%" PRIu64, tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, d->ordinal, d->chunk);
    snprintf(path, sizeof path, "%s/%s", g->archive_root, d->dir);
    char *meta = cuptimon__gpm_meta_json(&m, g->hostname, PACKAGE_VERSION);
    if (g->live)
        cuptimon__live_set_add(g->live, d->dir);
    if (!meta || cuptimon__aw_open(path, meta, g->segment_bytes, g->level, &d->aw, &err) < 0) {
        log_err("gpu-metrics",
                "GPU %d: cannot open its archive session %s: %s; sampled, not "
                "archived",
                d->ordinal, path, err ? err : "out of memory");
        d->aw = NULL;
        if (g->live)
            cuptimon__live_set_remove(g->live, d->dir);
    }
    free(err);
    free(meta);
}

static uint64_t wanted_interval(const struct cuptimon_gpm *g)
{
    double s = g->windows > 0 && g->cfg.window_interval_s > 0 ? g->cfg.window_interval_s
                                                              : g->cfg.interval_s;
    return (uint64_t)(s * 1e9);
}

static int start_dev(struct cuptimon_gpm *g, struct gpm_dev *d)
{
    struct gpm_api *a = &g->api;
    gpm_result rc;
    if (!d->chip[0]) {
        struct gpm_chip_name_params cn = {.structSize =
                                              GPM_SIZE(struct gpm_chip_name_params, pChipName),
                                          .deviceIndex = (size_t)d->ordinal};
        if ((rc = a->DeviceGetChipName(&cn)) != GPM_SUCCESS || !cn.pChipName) {
            refused(g, d, "cuptiDeviceGetChipName", rc ? rc : GPM_ERROR_UNKNOWN);
            return -1;
        }
        snprintf(d->chip, sizeof d->chip, "%s", cn.pChipName);
    }
    struct gpm_availability_params av = {
        .structSize = GPM_SIZE(struct gpm_availability_params, pCounterAvailabilityImage),
        .deviceIndex = (size_t)d->ordinal};
    if ((rc = a->GetCounterAvailability(&av)) != GPM_SUCCESS) {
        refused(g, d, "cuptiPmSamplingGetCounterAvailability", rc);
        return -1;
    }
    uint8_t *avail =
        av.counterAvailabilityImageSize ? malloc(av.counterAvailabilityImageSize) : NULL;
    av.pCounterAvailabilityImage = avail;
    if (avail && (rc = a->GetCounterAvailability(&av)) != GPM_SUCCESS) {
        free(avail);
        refused(g, d, "cuptiPmSamplingGetCounterAvailability", rc);
        return -1;
    }
    uint32_t old_nm = d->nm;
    char old_keys[CUPTIMON_GPM_METRICS_MAX][CUPTIMON_GPM_KEY_MAX];
    for (uint32_t i = 0; i < old_nm; i++)
        memcpy(old_keys[i], d->m[i].key, sizeof old_keys[i]);
    int hc = host_config(g, d, avail);
    free(avail);
    if (hc < 0) {
        d->state = DEV_OFF;
        return -1;
    }
    struct gpm_enable_params en = {.structSize =
                                       GPM_SIZE(struct gpm_enable_params, pPmSamplingObject),
                                   .deviceIndex = (size_t)d->ordinal};
    if ((rc = a->Enable(&en)) != GPM_SUCCESS) {
        dev_free(g, d);
        refused(g, d, "cuptiPmSamplingEnable", rc);
        return -1;
    }
    d->obj = en.pPmSamplingObject;
    d->interval_ns = wanted_interval(g);
    struct gpm_set_config_params sc = {
        .structSize = GPM_SIZE(struct gpm_set_config_params, hwBufferAppendMode),
        .pPmSamplingObject = d->obj,
        .configSize = d->config_size,
        .pConfig = d->config,
        .hardwareBufferSize = d->hw_buffer,
        .samplingInterval = d->interval_ns,
        .triggerMode = GPM_TRIGGER_GPU_TIME_INTERVAL,
        .hwBufferAppendMode = GPM_APPEND_KEEP_OLDEST};
    if ((rc = a->SetConfig(&sc)) != GPM_SUCCESS) {
        dev_free(g, d);
        refused(g, d, "cuptiPmSamplingSetConfig", rc);
        return -1;
    }
    /* Room for twice a decode period's samples: decoding keeps up. */
    d->max_samples = (uint32_t)(2 * DECODE_NS / d->interval_ns + 16);
    struct gpm_data_size_params ds = {.structSize =
                                          GPM_SIZE(struct gpm_data_size_params, counterDataSize),
                                      .pPmSamplingObject = d->obj,
                                      .pMetricNames = d->names,
                                      .numMetrics = d->nm,
                                      .maxSamples = d->max_samples};
    if ((rc = a->GetCounterDataSize(&ds)) != GPM_SUCCESS || ds.counterDataSize == 0) {
        dev_free(g, d);
        refused(g, d, "cuptiPmSamplingGetCounterDataSize", rc ? rc : GPM_ERROR_UNKNOWN);
        return -1;
    }
    d->data_size = ds.counterDataSize;
    d->data = malloc(d->data_size);
    d->clean = malloc(d->data_size);
    struct gpm_data_init_params di = {.structSize =
                                          GPM_SIZE(struct gpm_data_init_params, pCounterData),
                                      .pPmSamplingObject = d->obj,
                                      .counterDataSize = d->data_size,
                                      .pCounterData = d->data};
    if (!d->data || !d->clean || (rc = a->CounterDataImageInitialize(&di)) != GPM_SUCCESS) {
        dev_free(g, d);
        refused(g, d, "cuptiPmSamplingCounterDataImageInitialize",
                rc ? rc : GPM_ERROR_OUT_OF_MEMORY);
        return -1;
    }
    /* An emptied image is this one again: a copy, not an Initialize per
     * decode (150 ms on the H200 for a large image). */
    memcpy(d->clean, d->data, d->data_size);
    struct gpm_object_params st = {.structSize =
                                       GPM_SIZE(struct gpm_object_params, pPmSamplingObject),
                                   .pPmSamplingObject = d->obj};
    d->started_ns = now_ns();
    if ((rc = a->Start(&st)) != GPM_SUCCESS) {
        dev_free(g, d);
        refused(g, d, "cuptiPmSamplingStart", rc);
        return -1;
    }
    /* A set other than the archived one's: a session of its own. */
    int same = d->aw && old_nm == d->nm;
    for (uint32_t i = 0; same && i < d->nm; i++)
        same = strcmp(old_keys[i], d->m[i].key) == 0;
    if (!same) {
        archive_close(g, d);
        archive_open(g, d);
    }
    nvpw_bind(g, d);
    /* The set judged as the configuration check judges it: a known-costly
     * pair is said once per set (the cost itself is measured below). */
    char names[CUPTIMON_GPM_METRICS_MAX * 80] = "";
    for (uint32_t i = 0; i < d->nm; i++) {
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", i ? "," : "", d->m[i].cupti);
    }
    struct cuptimon_gpm_judgement jd;
    cuptimon__gpm_set_judge(names, &jd);
    if (!same && jd.costly)
        log_warn("gpu-metrics", "GPU %d: a costly metric set: %s", d->ordinal, jd.why_costly);
    pthread_mutex_lock(&g->mu);
    d->costly_set = jd.costly;
    if (!same) {
        d->cost_warned = 0;
        d->cost_win_ns = 0;
    }
    d->state = DEV_SAMPLING;
    snprintf(d->why, sizeof d->why, "sampling %u metrics every %.3g ms", d->nm,
             (double)d->interval_ns / 1e6);
    pthread_mutex_unlock(&g->mu);
    log_info("gpu-metrics", "GPU %d (%s, %s): sampling %u metrics every %.3g ms%s%s", d->ordinal,
             d->name, d->chip, d->nm, (double)d->interval_ns / 1e6,
             d->dropped_metrics[0] ? "; not available: " : "", d->dropped_metrics);
    if (!same && d->unknown_metrics[0]) {
        char keys[400];
        cuptimon__gpm_known_keys(keys, sizeof keys);
        log_warn("gpu-metrics",
                 "GPU %d: gpu_metrics_set names unknown metrics (%s): not sampled; the keys are "
                 "%s (any case), or give a CUPTI metric name",
                 d->ordinal, d->unknown_metrics, keys);
    }
    return 0;
}

/* The Perf SDK's entry points, from the libnvperf_host that libcupti
 * loaded (never loading one of our own), and d's index among its devices
 * (by PCI bus id: CUDA's ordinals are fastest first, NVPW's are not
 * documented).  Without them the raw bytes are "not told". */
static void nvpw_bind(struct cuptimon_gpm *g, struct gpm_dev *d)
{
    if (!g->nvpw_tried) {
        void *h = dlopen("libnvperf_host.so", RTLD_NOW | RTLD_NOLOAD);
        char path[600];
        const char *slash = strrchr(g->cupti_path, '/');
        if (!h && slash) {
            snprintf(path, sizeof path, "%.*s/libnvperf_host.so", (int)(slash - g->cupti_path),
                     g->cupti_path);
            h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
        }
        if (!h)
            h = g->api.cupti; /* a CUPTI that carries the Perf SDK inside */
        *(void **)&g->nvpw_status = dlsym(h, "NVPW_GPU_PeriodicSampler_GetRecordBufferStatus");
        *(void **)&g->nvpw_count = dlsym(h, "NVPW_GetDeviceCount");
        *(void **)&g->nvpw_pci = dlsym(h, "NVPW_Device_GetPciBusIds");
        g->nvpw_tried = 1;
        if (!g->nvpw_status || !g->nvpw_count || !g->nvpw_pci)
            log_info("gpu-metrics",
                     "the Perf SDK's record buffer status is not reachable from %s: "
                     "the raw bytes decoded are not shown",
                     g->cupti_path);
    }
    d->nvpw_index = -1;
    if (!g->nvpw_status || !g->nvpw_count || !g->nvpw_pci)
        return;
    struct nvpw_count_params c = {.structSize = GPM_SIZE(struct nvpw_count_params, numDevices)};
    if (g->nvpw_count(&c) != 0 || c.numDevices == 0 || c.numDevices > 4096)
        return;
    struct nvpw_pci_id *ids = calloc(c.numDevices, sizeof *ids);
    struct nvpw_pci_params p = {.structSize = GPM_SIZE(struct nvpw_pci_params, numDevices),
                                .pBusIds = ids,
                                .numDevices = c.numDevices};
    unsigned dom = 0, bus = 0, dev = 0;
    if (ids && g->nvpw_pci(&p) == 0 && sscanf(d->pci, "%x:%x:%x", &dom, &bus, &dev) == 3)
        for (size_t i = 0; i < c.numDevices; i++)
            if (ids[i].domain == dom && ids[i].bus == bus && ids[i].device == dev)
                d->nvpw_index = (int)i;
    free(ids);
}

/* The record buffer's used bytes now, or -1. */
static int64_t raw_used(struct cuptimon_gpm *g, struct gpm_dev *d)
{
    if (d->nvpw_index < 0)
        return -1;
    struct nvpw_buffer_status_params p = {.structSize =
                                              GPM_SIZE(struct nvpw_buffer_status_params, overflow),
                                          .deviceIndex = (size_t)d->nvpw_index};
    if (g->nvpw_status(&p) != 0 || p.usedSize > p.totalSize)
        return -1;
    return (int64_t)p.usedSize;
}

/* After a decode: the cost window, and the one log line when the
 * sampler's cost passes its bounds.  Under the lock. */
static void cost_account(struct gpm_dev *d, int64_t now)
{
    if (!d->cost_win_ns) {
        d->cost_win_ns = now;
        d->cost_win_cpu = d->decode_cpu_ns;
        d->cost_win_raw = d->raw_bytes;
        d->cost_win_raw_ok = (uint64_t)d->raw_ok;
        return;
    }
    int64_t span = now - d->cost_win_ns;
    if (span < COST_WINDOW_NS)
        return;
    d->cost_cpu_pct = 100.0 * (double)(d->decode_cpu_ns - d->cost_win_cpu) / (double)span;
    d->cost_raw_bps = d->raw_ok && d->cost_win_raw_ok
                          ? (double)(d->raw_bytes - d->cost_win_raw) * 1e9 / (double)span
                          : -1;
    d->cost_win_ns = now;
    d->cost_win_cpu = d->decode_cpu_ns;
    d->cost_win_raw = d->raw_bytes;
    d->cost_win_raw_ok = (uint64_t)d->raw_ok;
    if (!d->cost_warned &&
        (d->cost_cpu_pct > COST_WARN_CPU_PCT || d->cost_raw_bps > COST_WARN_RAW_BPS)) {
        d->cost_warned = 1;
        char raw[64] = "not told";
        if (d->cost_raw_bps >= 0)
            snprintf(raw, sizeof raw, "%.1f MiB/s", d->cost_raw_bps / 1048576);
        log_warn("gpu-metrics",
                 "GPU %d: decoding its counters costs %.1f %% of a CPU core (bound %.0f %%), raw "
                 "records %s (bound %.0f MiB/s) over the last %.0f s%s; logged once per set "
                 "(cuptimonctl gpu-metrics status shows it)",
                 d->ordinal, d->cost_cpu_pct, COST_WARN_CPU_PCT, raw, COST_WARN_RAW_BPS / 1048576,
                 (double)span / 1e9,
                 d->costly_set ? "; the set holds a known-costly pair (cuptimond.conf(5))" : "");
    }
}

/* Decodes what the device has sampled since the last time, evaluates it,
 * archives it and keeps it for status.  Returns the samples taken. */
static size_t decode_dev(struct cuptimon_gpm *g, struct gpm_dev *d)
{
    struct gpm_api *a = &g->api;
    size_t total = 0;
    const uint32_t stride = CUPTIMON_GPM_SAMPLE_SIZE(d->nm);
    /* The raw bytes this decode reads: the buffer's used bytes as it
     * starts (a decode reads what is there, until END_OF_RECORDS; what
     * arrives meanwhile is the next one's). */
    int64_t used = raw_used(g, d);
    if (used >= 0) {
        pthread_mutex_lock(&g->mu);
        d->raw_bytes += (uint64_t)used;
        d->raw_ok = 1;
        pthread_mutex_unlock(&g->mu);
    }
    /* The decode's own CPU: this thread's, around DecodeData and what
     * follows from it (evaluation, archiving). */
    uint64_t c0 = cpu_ns();
    for (int round = 0; round < 64; round++) {
        struct gpm_decode_params dp = {.structSize = GPM_SIZE(struct gpm_decode_params, overflow),
                                       .pPmSamplingObject = d->obj,
                                       .pCounterDataImage = d->data,
                                       .counterDataImageSize = d->data_size};
        gpm_result rc = a->DecodeData(&dp);
        /* A hardware buffer that overflowed (samples lost, counted) still
         * hands over what it kept: CUPTI's header gives OUT_OF_MEMORY for
         * it. */
        if (rc == GPM_ERROR_OUT_OF_MEMORY && dp.overflow)
            rc = GPM_SUCCESS;
        if (rc != GPM_SUCCESS) {
            pthread_mutex_lock(&g->mu);
            /* When and how it failed, for a failure seen once (the H100,
             * INVALID_PARAMETER 1.4 s into a memory-bound phase, then two
             * overflows: most likely the buffer filling between decodes,
             * not ncu's run before it; docs/gpu-runs/
             * 20261206-h100-suite-pm-overflow). */
            if (d->decode_errors++ == 0)
                log_warn("gpu-metrics",
                         "GPU %d: cuptiPmSamplingDecodeData: %s (counted; %.3f s after Start, "
                         "decode round %d, overflow flag %d, %" PRIu64 " samples so far)",
                         d->ordinal, err_str(g, rc), (double)(now_ns() - d->started_ns) / 1e9,
                         round, (int)dp.overflow, d->samples);
            pthread_mutex_unlock(&g->mu);
            break;
        }
        struct gpm_data_info_params in = {
            .structSize = GPM_SIZE(struct gpm_data_info_params, numCompletedSamples),
            .pCounterDataImage = d->data,
            .counterDataImageSize = d->data_size};
        if (a->GetCounterDataInfo(&in) != GPM_SUCCESS)
            in.numCompletedSamples = 0;
        size_t n = in.numCompletedSamples;
        if (n > d->max_samples)
            n = d->max_samples;
        struct cuptimon_gpm_sample *s = n ? calloc(n, sizeof *s) : NULL;
        size_t got = 0;
        uint64_t first_dropped = 0, eval_errors = 0;
        double v[CUPTIMON_GPM_METRICS_MAX];
        for (size_t i = 0; s && i < n; i++) {
            struct gpm_sample_info_params si = {
                .structSize = GPM_SIZE(struct gpm_sample_info_params, endTimestamp),
                .pPmSamplingObject = d->obj,
                .pCounterDataImage = d->data,
                .counterDataImageSize = d->data_size,
                .sampleIndex = i};
            struct gpm_host_evaluate_params ev = {
                .structSize = GPM_SIZE(struct gpm_host_evaluate_params, pMetricValues),
                .pHostObject = d->host,
                .pCounterDataImage = d->data,
                .counterDataImageSize = d->data_size,
                .rangeIndex = i,
                .ppMetricNames = d->names,
                .numMetrics = d->nm,
                .pMetricValues = v};
            if (a->GetSampleInfo(&si) != GPM_SUCCESS || si.endTimestamp <= si.startTimestamp) {
                eval_errors++;
                continue;
            }
            /* The first sample after Start spans from before it (up to a
             * second and more on the H200): not a measurement of now. */
            if ((int64_t)si.startTimestamp < d->started_ns - (int64_t)d->interval_ns) {
                first_dropped++;
                continue;
            }
            if (a->HostEvaluateToGpuValues(&ev) != GPM_SUCCESS) {
                eval_errors++;
                continue;
            }
            s[got].start_ns = si.startTimestamp;
            s[got].end_ns = si.endTimestamp;
            for (uint32_t k = 0; k < d->nm; k++)
                s[got].value[k] = v[k];
            got++;
        }
        memcpy(d->data, d->clean, d->data_size);
        if (got && d->aw) {
            uint8_t *raw = malloc(got * stride);
            uint64_t ts = 0;
            a->GetTimestamp(&ts);
            struct cuptimon_chunk_hdr h = {.index = d->chunk++,
                                           .cupti_ts = ts,
                                           .unix_ns = (uint64_t)now_ns(),
                                           .raw_size = got * stride,
                                           .records = got};
            if (raw) {
                cuptimon__gpm_encode(raw, s, got, d->nm);
                if (cuptimon__aw_chunk(d->aw, &h, raw) < 0) {
                    pthread_mutex_lock(&g->mu);
                    if (d->write_errors++ == 0)
                        log_err("gpu-metrics", "GPU %d: cannot write its samples to %s (counted)",
                                d->ordinal, d->dir);
                    pthread_mutex_unlock(&g->mu);
                }
            }
            free(raw);
        }
        /* An overflow that still decodes goes on, a gap counted (logged
         * the first time); one where CUPTI hands over no sample at all is
         * the wedge the H200 showed after one: counted once, and the
         * caller restarts.  (Not "none kept": the first decode after a
         * Start may keep none, its one sample spanning from before Start.) */
        int overflow = dp.overflow && !d->wedged;
        if (overflow && in.numCompletedSamples == 0)
            d->wedged = 1;
        pthread_mutex_lock(&g->mu);
        d->samples += got;
        if (overflow && (d->wedged || d->overflows == 0))
            log_warn("gpu-metrics",
                     "GPU %d: the hardware buffer overflowed (the sampler fell behind): samples "
                     "lost (counted)%s",
                     d->ordinal, d->wedged ? "; sampling restarts" : "");
        d->overflows += overflow ? 1 : 0;
        d->first_dropped += first_dropped;
        d->eval_errors += eval_errors;
        for (size_t i = 0; i < got; i++) {
            struct ring_ent *r = &d->ring[(d->ring_head + d->ring_len) % RING];
            r->start = s[i].start_ns;
            r->end = s[i].end_ns;
            memcpy(r->v, s[i].value, sizeof r->v);
            if (d->ring_len < RING)
                d->ring_len++;
            else
                d->ring_head = (d->ring_head + 1) % RING;
            d->last_sample_end = (int64_t)s[i].end_ns;
        }
        pthread_mutex_unlock(&g->mu);
        free(s);
        total += got;
        if (dp.decodeStopReason != GPM_STOP_REASON_COUNTER_DATA_FULL)
            break;
    }
    uint64_t c1 = cpu_ns();
    pthread_mutex_lock(&g->mu);
    d->decode_cpu_ns += c1 - c0;
    cost_account(d, now_ns());
    pthread_mutex_unlock(&g->mu);
    return total;
}

/* Releases the device's counters: stop, decode what is left, disable. */
static void stop_dev(struct cuptimon_gpm *g, struct gpm_dev *d, enum dev_state next,
                     const char *why)
{
    if (d->obj) {
        struct gpm_object_params st = {.structSize =
                                           GPM_SIZE(struct gpm_object_params, pPmSamplingObject),
                                       .pPmSamplingObject = d->obj};
        g->api.Stop(&st);
        decode_dev(g, d);
    }
    dev_free(g, d);
    pthread_mutex_lock(&g->mu);
    d->state = next;
    snprintf(d->why, sizeof d->why, "%s", why);
    pthread_mutex_unlock(&g->mu);
}

/* ---- profilers' processes -------------------------------------------------- */

/* A running process whose name (comm) is in the yield list, as "name (pid
 * N)" into out; 0 when none. */
static int find_profiler(const char *list, char *out, size_t outlen)
{
    char names[256];
    DIR *dir;
    struct dirent *de;
    int found = 0;
    snprintf(names, sizeof names, "%s", list);
    if (!names[0] || !(dir = opendir("/proc")))
        return 0;
    while (!found && (de = readdir(dir)) != NULL) {
        char path[300], comm[32];
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        snprintf(path, sizeof path, "/proc/%s/comm", de->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, comm, sizeof comm - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (n <= 0)
            continue;
        comm[n] = '\0';
        comm[strcspn(comm, "\n")] = '\0';
        char buf[256], *save = NULL;
        snprintf(buf, sizeof buf, "%s", names);
        for (char *w = strtok_r(buf, ", ", &save); w; w = strtok_r(NULL, ", ", &save))
            if (strcmp(w, comm) == 0) {
                snprintf(out, outlen, "%.31s (pid %.20s)", comm, de->d_name);
                found = 1;
                break;
            }
    }
    closedir(dir);
    return found;
}

/* ---- the thread -------------------------------------------------------------- */

static void *gpm_main(void *arg)
{
    struct cuptimon_gpm *g = arg;
    int64_t next_scan = 0;
    char profiler[128] = "";
    int up = bring_up_api(g);
    pthread_mutex_lock(&g->mu);
    g->node_listed = 1;
    pthread_mutex_unlock(&g->mu);
    if (up < 0) {
        log_notice("gpu-metrics", "%s", g->why);
        return NULL;
    }
    pthread_mutex_lock(&g->mu);
    g->up = 1;
    pthread_mutex_unlock(&g->mu);
    for (;;) {
        int64_t now = now_ns();
        if (now >= next_scan) {
            next_scan = now + (int64_t)SCAN_NS;
            if (!find_profiler(g->cfg.yield_to, profiler, sizeof profiler))
                profiler[0] = '\0';
        }
        pthread_mutex_lock(&g->mu);
        if (g->stop) {
            pthread_mutex_unlock(&g->mu);
            break;
        }
        int reconf = g->reconfigure;
        g->reconfigure = 0;
        uint64_t interval = wanted_interval(g);
        pthread_mutex_unlock(&g->mu);
        for (int i = 0; i < g->ndev; i++) {
            struct gpm_dev *d = &g->dev[i];
            pthread_mutex_lock(&g->mu);
            if (d->paused && d->pause_until_ns && now >= d->pause_until_ns)
                d->paused = 0;
            int yield = profiler[0] != '\0';
            if (yield && !d->yielded)
                log_notice("gpu-metrics", "GPU %d: yields its counters to %s", d->ordinal,
                           profiler);
            else if (!yield && d->yielded)
                log_notice("gpu-metrics", "GPU %d: %s has gone; sampling again", d->ordinal,
                           d->yield_to);
            d->yielded = yield;
            if (yield)
                snprintf(d->yield_to, sizeof d->yield_to, "%s", profiler);
            int want = !d->paused && !d->yielded;
            char why[200];
            if (d->paused) {
                char when[40] = "resumed";
                if (d->pause_until_ns)
                    utc_text(when, sizeof when, d->pause_until_ns);
                snprintf(why, sizeof why, "paused by %s until %s", d->paused_by, when);
            } else
                snprintf(why, sizeof why, "yielded to %s, which needs the GPU's counters",
                         d->yield_to);
            enum dev_state state = d->state;
            pthread_mutex_unlock(&g->mu);
            if (state == DEV_SAMPLING && (!want || reconf || d->interval_ns != interval)) {
                stop_dev(g, d, want ? DEV_IDLE : DEV_PAUSED, want ? "reconfiguring" : why);
                state = want ? DEV_IDLE : DEV_PAUSED;
                if (!want)
                    log_notice("gpu-metrics", "GPU %d: counters released: %s", d->ordinal, why);
            }
            if (!want) {
                pthread_mutex_lock(&g->mu);
                if (d->state != DEV_OFF) {
                    d->state = DEV_PAUSED;
                    snprintf(d->why, sizeof d->why, "%s", why);
                }
                pthread_mutex_unlock(&g->mu);
                continue;
            }
            if (state == DEV_SAMPLING) {
                decode_dev(g, d);
                /* After a KEEP_OLDEST overflow the H200 decodes nothing
                 * more (OUT_OF_MEMORY each time) until sampling restarts. */
                if (d->wedged) {
                    stop_dev(g, d, DEV_IDLE, "restarting after its hardware buffer overflowed");
                    d->wedged = 0;
                    if (d->hw_buffer < HW_BUFFER_MAX) {
                        d->hw_buffer *= 2;
                        log_notice("gpu-metrics",
                                   "GPU %d: its hardware buffer grows to %" PRIu64 " MiB",
                                   d->ordinal, d->hw_buffer >> 20);
                    }
                }
            } else if (state == DEV_IDLE || state == DEV_PAUSED ||
                       ((state == DEV_BUSY || state == DEV_FAILED) && now >= d->retry_at_ns)) {
                if (start_dev(g, d) < 0) {
                    pthread_mutex_lock(&g->mu);
                    if (d->state == DEV_OFF || d->state == DEV_BUSY || d->state == DEV_FAILED)
                        log_notice("gpu-metrics", "GPU %d: %s", d->ordinal, d->why);
                    pthread_mutex_unlock(&g->mu);
                }
            }
        }
        /* Until the next decode, a command, or the next look at processes. */
        struct timespec until;
        int64_t wake = now + (int64_t)DECODE_NS;
        if (wake > next_scan)
            wake = next_scan;
        until.tv_sec = (time_t)(wake / 1000000000);
        until.tv_nsec = (long)(wake % 1000000000);
        pthread_mutex_lock(&g->mu);
        if (!g->stop && !g->reconfigure)
            pthread_cond_timedwait(&g->cv, &g->mu, &until);
        pthread_mutex_unlock(&g->mu);
    }
    for (int i = 0; i < g->ndev; i++) {
        if (g->dev[i].state == DEV_SAMPLING)
            stop_dev(g, &g->dev[i], DEV_IDLE, "stopped");
        archive_close(g, &g->dev[i]);
    }
    struct gpm_profiler_init_params pi = {.structSize =
                                              GPM_SIZE(struct gpm_profiler_init_params, pPriv)};
    g->api.ProfilerDeInitialize(&pi);
    return NULL;
}

/* ---- the loop's side ----------------------------------------------------------- */

struct cuptimon_gpm *cuptimon__gpm_start(const struct cuptimon_gpm_config *cfg,
                                         const char *archive_root, uint64_t segment_bytes,
                                         int compress_level, struct cuptimon_live_set *live)
{
    struct cuptimon_gpm *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    pthread_mutex_init(&g->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_REALTIME);
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    g->cfg = *cfg;
    snprintf(g->archive_root, sizeof g->archive_root, "%s", archive_root);
    g->segment_bytes = segment_bytes;
    g->level = compress_level;
    g->live = live;
    g->run_ns = now_ns();
    gethostname(g->hostname, sizeof g->hostname - 1);
    if (!cfg->enabled) {
        snprintf(g->why, sizeof g->why, "off in cuptimond.conf (gpu_metrics)");
        g->node_listed = 1; /* no list will come: node_of's misses are final */
        return g;
    }
    snprintf(g->why, sizeof g->why, "starting");
    /* The thread takes no signals: they are the loop's. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    g->thread_on = pthread_create(&g->thread, NULL, gpm_main, g) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!g->thread_on) {
        snprintf(g->why, sizeof g->why, "cannot start the sampler thread");
        g->node_listed = 1;
    } else {
        pthread_setname_np(g->thread, "cuptimond-gpm");
    }
    return g;
}

void cuptimon__gpm_stop(struct cuptimon_gpm *g)
{
    if (!g)
        return;
    if (g->thread_on) {
        pthread_mutex_lock(&g->mu);
        g->stop = 1;
        pthread_cond_signal(&g->cv);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->thread, NULL);
    }
    for (int i = 0; i < g->ndev; i++)
        free(g->dev[i].ring);
    /* The libraries stay loaded: libcupti cannot be unloaded safely. */
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

void cuptimon__gpm_configure(struct cuptimon_gpm *g, const struct cuptimon_gpm_config *cfg)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    int changed = strcmp(g->cfg.set, cfg->set) != 0 || g->cfg.interval_s != cfg->interval_s ||
                  g->cfg.window_interval_s != cfg->window_interval_s;
    /* The libraries and the on/off switch are read at start only. */
    snprintf(g->cfg.set, sizeof g->cfg.set, "%s", cfg->set);
    snprintf(g->cfg.yield_to, sizeof g->cfg.yield_to, "%s", cfg->yield_to);
    g->cfg.interval_s = cfg->interval_s;
    g->cfg.window_interval_s = cfg->window_interval_s;
    g->cfg.retry_s = cfg->retry_s;
    g->reconfigure |= changed;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

int cuptimon__gpm_pause(struct cuptimon_gpm *g, int device, double seconds, const char *who)
{
    int n = 0;
    if (!g)
        return device < 0 ? 0 : -ENODEV;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->ndev; i++) {
        if (device >= 0 && i != device)
            continue;
        g->dev[i].paused = 1;
        g->dev[i].pause_until_ns = seconds > 0 ? now_ns() + (int64_t)(seconds * 1e9) : 0;
        snprintf(g->dev[i].paused_by, sizeof g->dev[i].paused_by, "%s", who);
        n++;
    }
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    /* Every GPU of none is all of them. */
    return n || device < 0 ? 0 : -ENODEV;
}

int cuptimon__gpm_resume(struct cuptimon_gpm *g, int device)
{
    int n = 0;
    if (!g)
        return device < 0 ? 0 : -ENODEV;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->ndev; i++) {
        if (device >= 0 && i != device)
            continue;
        g->dev[i].paused = 0;
        g->dev[i].pause_until_ns = 0;
        /* A device that was busy is tried again now. */
        g->dev[i].retry_at_ns = 0;
        n++;
    }
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return n || device < 0 ? 0 : -ENODEV;
}

void cuptimon__gpm_window(struct cuptimon_gpm *g, int delta)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    g->windows += delta;
    if (g->windows < 0)
        g->windows = 0;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* The mean of each metric over samples ending after since (time-weighted
 * by the samples' lengths); returns how many samples. Under the lock. */
static size_t means(const struct gpm_dev *d, int64_t since, double *out)
{
    double w = 0, sum[CUPTIMON_GPM_METRICS_MAX] = {0};
    size_t n = 0;
    for (size_t i = 0; i < d->ring_len; i++) {
        const struct ring_ent *r = &d->ring[(d->ring_head + i) % RING];
        if ((int64_t)r->end <= since)
            continue;
        double len = (double)(r->end - r->start);
        for (uint32_t k = 0; k < d->nm; k++)
            if (!isnan(r->v[k]))
                sum[k] += r->v[k] * len;
        w += len;
        n++;
    }
    for (uint32_t k = 0; k < d->nm; k++)
        out[k] = w > 0 ? sum[k] / w : NAN;
    return n;
}

/* A command the thread has not carried out yet: the operator's pause
 * ("pause") or resume ("resume"), NULL when none.  The thread holds the
 * counters and releasing them takes up to hundreds of ms: the state stays
 * the device's own ("paused" is said once the counters are released), and
 * cuptimonctl waits for the pending command before it prints.  Under the
 * lock. */
static const char *pending(const struct gpm_dev *d, int64_t now)
{
    int paused = d->paused && !(d->pause_until_ns && now >= d->pause_until_ns);
    if (d->state == DEV_OFF)
        return NULL;
    if (paused && d->state != DEV_PAUSED)
        return "pause";
    if (!paused && !d->yielded && d->state == DEV_PAUSED)
        return "resume";
    return NULL;
}

static char *utc_text(char *out, size_t len, int64_t ns)
{
    struct tm tm;
    time_t t = (time_t)(ns / 1000000000);
    gmtime_r(&t, &tm);
    strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return out;
}

/* Why the device is in its state; a pause for a while says until when. */
static void shown_why(const struct gpm_dev *d, int64_t now, char *out, size_t len)
{
    char when[40];
    if (d->state == DEV_PAUSED && d->paused && d->pause_until_ns > now)
        snprintf(out, len, "paused by %s until %s (%.0f s from now)", d->paused_by,
                 utc_text(when, sizeof when, d->pause_until_ns),
                 (double)(d->pause_until_ns - now) / 1e9);
    else
        snprintf(out, len, "%s", d->why);
}

json_object *cuptimon__gpm_status(struct cuptimon_gpm *g)
{
    json_object *o = json_object_new_object(), *devs = json_object_new_array();
    if (!g) {
        json_object_object_add(o, "state", json_object_new_string("off"));
        json_object_object_add(o, "devices", devs);
        return o;
    }
    int64_t now = now_ns();
    pthread_mutex_lock(&g->mu);
    /* Every GPU paused (the operator's or yielded): the node's sampling is. */
    int npaused = 0;
    for (int i = 0; i < g->ndev; i++)
        npaused += g->dev[i].state == DEV_PAUSED;
    json_object_object_add(
        o, "state",
        json_object_new_string(g->up && g->ndev > 0 && npaused == g->ndev ? "paused"
                               : g->up                                    ? "on"
                               : g->cfg.enabled && g->thread_on && !strcmp(g->why, "starting")
                                   ? "starting"
                                   : "off"));
    if (!g->up)
        json_object_object_add(o, "why", json_object_new_string(g->why));
    json_object_object_add(o, "interval_s", json_object_new_double(g->cfg.interval_s));
    json_object_object_add(o, "window_interval_s",
                           json_object_new_double(g->cfg.window_interval_s));
    json_object_object_add(o, "windows_open", json_object_new_int(g->windows));
    if (g->cupti_path[0])
        json_object_object_add(o, "libcupti", json_object_new_string(g->cupti_path));
    for (int i = 0; i < g->ndev; i++) {
        const struct gpm_dev *d = &g->dev[i];
        json_object *x = json_object_new_object(), *ms = json_object_new_array();
        double v[CUPTIMON_GPM_METRICS_MAX];
        size_t n = means(d, now - 1000000000, v);
        json_object_object_add(x, "device", json_object_new_int(d->ordinal));
        json_object_object_add(x, "name", json_object_new_string(d->name));
        json_object_object_add(x, "uuid", json_object_new_string(d->uuid));
        json_object_object_add(x, "pci_bus_id", json_object_new_string(d->pci));
        json_object_object_add(x, "chip", json_object_new_string(d->chip));
        char why[sizeof d->why + 128];
        const char *pend = pending(d, now);
        shown_why(d, now, why, sizeof why);
        json_object_object_add(x, "state", json_object_new_string(state_names[d->state]));
        if (pend)
            json_object_object_add(x, "pending", json_object_new_string(pend));
        json_object_object_add(x, "why", json_object_new_string(why));
        if (d->paused && d->pause_until_ns > now) {
            char when[40];
            json_object_object_add(x, "paused_until_unix_ns",
                                   json_object_new_int64(d->pause_until_ns));
            json_object_object_add(
                x, "paused_until",
                json_object_new_string(utc_text(when, sizeof when, d->pause_until_ns)));
        }
        if (d->dropped_metrics[0])
            json_object_object_add(x, "not_sampled", json_object_new_string(d->dropped_metrics));
        if (d->unknown_metrics[0])
            json_object_object_add(x, "unknown_metrics",
                                   json_object_new_string(d->unknown_metrics));
        /* The sampler's own cost over the last complete 10 s: its decoding
         * thread's CPU, and the raw bytes the GPU wrote for it (absent
         * where CUPTI's Perf SDK does not tell). */
        if (d->cost_cpu_pct >= 0)
            json_object_object_add(x, "decode_cpu_pct", json_object_new_double(d->cost_cpu_pct));
        if (d->cost_raw_bps >= 0)
            json_object_object_add(x, "raw_bytes_per_s", json_object_new_double(d->cost_raw_bps));
        if (d->raw_ok)
            json_object_object_add(x, "raw_bytes", json_object_new_int64((int64_t)d->raw_bytes));
        json_object_object_add(x, "cost_bound_cpu_pct", json_object_new_double(COST_WARN_CPU_PCT));
        json_object_object_add(x, "cost_bound_raw_bytes_per_s",
                               json_object_new_double(COST_WARN_RAW_BPS));
        json_object_object_add(x, "costly_set", json_object_new_boolean(d->costly_set));
        json_object_object_add(x, "interval_ms",
                               json_object_new_double((double)d->interval_ns / 1e6));
        json_object_object_add(x, "samples", json_object_new_int64((int64_t)d->samples));
        json_object_object_add(x, "overflows", json_object_new_int64((int64_t)d->overflows));
        json_object_object_add(x, "hw_buffer_bytes", json_object_new_int64((int64_t)d->hw_buffer));
        json_object_object_add(x, "decode_errors",
                               json_object_new_int64((int64_t)d->decode_errors));
        json_object_object_add(x, "eval_errors", json_object_new_int64((int64_t)d->eval_errors));
        json_object_object_add(x, "write_errors", json_object_new_int64((int64_t)d->write_errors));
        json_object_object_add(x, "decode_cpu_s",
                               json_object_new_double((double)d->decode_cpu_ns / 1e9));
        json_object_object_add(x, "archive", json_object_new_string(d->aw ? d->dir : ""));
        if (d->last_sample_end)
            json_object_object_add(x, "last_sample_unix_ns",
                                   json_object_new_int64(d->last_sample_end));
        for (uint32_t k = 0; k < d->nm; k++) {
            json_object *m = json_object_new_object();
            json_object_object_add(m, "key", json_object_new_string(d->m[k].key));
            json_object_object_add(m, "label", json_object_new_string(d->m[k].label));
            json_object_object_add(m, "unit", json_object_new_string(d->m[k].unit));
            json_object_object_add(m, "cupti", json_object_new_string(d->m[k].cupti));
            if (n && !isnan(v[k]))
                json_object_object_add(m, "last_1s", json_object_new_double(v[k]));
            json_object_array_add(ms, m);
        }
        json_object_object_add(x, "metrics", ms);
        json_object_array_add(devs, x);
    }
    pthread_mutex_unlock(&g->mu);
    json_object_object_add(o, "devices", devs);
    return o;
}

int cuptimon__gpm_node_of(void *gp, const char *uuid)
{
    struct cuptimon_gpm *g = gp;
    int n = -1;

    if (g == NULL || uuid[0] == '\0')
        return -2;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; n < 0 && i < g->nnode; i++)
        if (strcmp(g->node_uuid[i], uuid) == 0)
            n = i;
    if (n < 0 && g->node_listed)
        n = -2;
    pthread_mutex_unlock(&g->mu);
    return n;
}

json_object *cuptimon__gpm_top(struct cuptimon_gpm *g)
{
    json_object *devs = json_object_new_array();
    if (!g)
        return devs;
    int64_t now = now_ns();
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->ndev; i++) {
        const struct gpm_dev *d = &g->dev[i];
        json_object *x = json_object_new_object(), *m1 = json_object_new_object(),
                    *m10 = json_object_new_object();
        double v1[CUPTIMON_GPM_METRICS_MAX], v10[CUPTIMON_GPM_METRICS_MAX];
        size_t n1 = means(d, now - 1000000000, v1), n10 = means(d, now - 10000000000, v10);
        for (uint32_t k = 0; k < d->nm; k++) {
            if (n1 && !isnan(v1[k]))
                json_object_object_add(m1, d->m[k].key, json_object_new_double(v1[k]));
            if (n10 && !isnan(v10[k]))
                json_object_object_add(m10, d->m[k].key, json_object_new_double(v10[k]));
        }
        json_object_object_add(x, "device", json_object_new_int(d->ordinal));
        json_object_object_add(x, "state", json_object_new_string(state_names[d->state]));
        json_object_object_add(x, "last_1s", m1);
        json_object_object_add(x, "last_10s", m10);
        json_object_array_add(devs, x);
    }
    pthread_mutex_unlock(&g->mu);
    return devs;
}

/* A label value for Prometheus: backslash, quote and newline escaped. */
static void prom_label(char *out, size_t n, const char *v)
{
    size_t o = 0;
    for (; *v && o + 3 < n; v++) {
        if (*v == '\\' || *v == '"') {
            out[o++] = '\\';
            out[o++] = *v;
        } else if (*v == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
        } else if ((unsigned char)*v >= 0x20) {
            out[o++] = *v;
        }
    }
    out[o] = '\0';
}

char *cuptimon__gpm_prometheus(struct cuptimon_gpm *g, double window_s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    int64_t now = now_ns();
    if (g) {
        pthread_mutex_lock(&g->mu);
        fprintf(f, "# HELP cuptimon_gpu_metrics_state 1 while the GPU's counters are sampled "
                   "(0: paused, yielded to another profiler, busy, off).\n"
                   "# TYPE cuptimon_gpu_metrics_state gauge\n");
        for (int i = 0; i < g->ndev; i++) {
            char name[200];
            prom_label(name, sizeof name, g->dev[i].name);
            fprintf(f,
                    "cuptimon_gpu_metrics_state{gpu=\"%d\",UUID=\"%s\",modelName=\"%s\",state=\"%"
                    "s\"} %d\n",
                    g->dev[i].ordinal, g->dev[i].uuid, name, state_names[g->dev[i].state],
                    g->dev[i].state == DEV_SAMPLING);
        }
        /* The sampler's own cost (issue 48), as status shows it. */
        for (int pass = 0; pass < 2; pass++) {
            int family = 0;
            for (int i = 0; i < g->ndev; i++) {
                const struct gpm_dev *d = &g->dev[i];
                double v = pass == 0 ? d->cost_cpu_pct / 100 : d->cost_raw_bps;
                if (v < 0)
                    continue;
                const char *mn = pass == 0 ? "cuptimon_gpu_metrics_decode_cpu_cores"
                                           : "cuptimon_gpu_metrics_raw_bytes_per_second";
                if (!family++)
                    fprintf(
                        f, "# HELP %s %s over the last %.0f s (logged past %g).\n# TYPE %s gauge\n",
                        mn,
                        pass == 0 ? "CPU cores the daemon spent decoding the GPU's counters"
                                  : "Raw record bytes the GPU wrote for the daemon's sampling",
                        (double)COST_WINDOW_NS / 1e9,
                        pass == 0 ? COST_WARN_CPU_PCT / 100 : COST_WARN_RAW_BPS, mn);
                char name[200];
                prom_label(name, sizeof name, d->name);
                fprintf(f, "%s{gpu=\"%d\",UUID=\"%s\",modelName=\"%s\"} %.6g\n", mn, d->ordinal,
                        d->uuid, name, v);
            }
        }
        for (size_t k = 0; k < NKNOWN; k++) {
            int family = 0;
            for (int i = 0; i < g->ndev; i++) {
                const struct gpm_dev *d = &g->dev[i];
                double v[CUPTIMON_GPM_METRICS_MAX];
                if (!means(d, now - (int64_t)(window_s * 1e9), v))
                    continue;
                for (uint32_t m = 0; m < d->nm; m++) {
                    if (d->prom[m] != (int)k || isnan(v[m]))
                        continue;
                    if (!family++)
                        fprintf(f, "# HELP %s %s over the last %.0f s, like %s.\n# TYPE %s gauge\n",
                                known[k].prom, known[k].label, window_s, known[k].prom_help,
                                known[k].prom);
                    char name[200];
                    prom_label(name, sizeof name, d->name);
                    fprintf(f, "%s{gpu=\"%d\",UUID=\"%s\",modelName=\"%s\"} %.6g\n", known[k].prom,
                            d->ordinal, d->uuid, name, v[m] * known[k].prom_scale);
                }
            }
        }
        pthread_mutex_unlock(&g->mu);
    }
    fclose(f);
    return text;
}
