/*
 * fakepm.c: libpm-fake.so, a test double of CUPTI's PM Sampling API, the parts of the
 * Profiler Host/Target API around it and the CUDA driver calls the daemon's GPU metrics
 * sampler makes (daemon/gpm-cupti.h).  fakepm.h documents the model and the knobs.
 *
 * It includes the real CUPTI and CUDA headers, so the compiler checks every signature
 * against the toolkit's.  Every entry point takes one process-wide lock; handles the
 * caller passes in are looked up in the double's tables before they are used, so a stale
 * or made-up handle gets an error, never a crash.
 */
#include "config.h"

#include <cuda.h>
#include <cupti_activity.h>
#include <cupti_result.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <nvperf_target.h>

#include "fakepm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* cuda.h renames cuDeviceGetUuid to cuDeviceGetUuid_v2; a real libcuda exports both. */
#undef cuDeviceGetUuid
CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);

#define MAX_DEVICES 16
#define MAX_HOSTS   64
#define CHIP_LEN    32
#define MAX_PHASES  1024

/* ------------------------------------------------------------------ metrics */

enum mkind {
    PCT,  /* a percentage, 0..100 */
    RATE, /* a rate (bytes/s, Hz) */
    SUM,  /* per-sample total: the integral of its rate signal over the sample */
};

struct metric {
    const char *name;
    enum mkind kind;
    int signal;  /* the metric whose signal it reports: itself, a SUM its rate, an alias */
    int passes;  /* passes it needs alone */
    int nvlink;  /* needs NVLink counters (absent on a single-GPU node) */
    double base; /* the idle value (see fakepm.h) */
};

/* The table's order is the order of values in a counter data image.  Signals are looked up
 * by index: keep M_* in step with the table. */
enum {
    M_SM_ACTIVE,
    M_WARPS,
    M_WARPS_RT,
    M_TENSOR,
    M_TENSOR_RT,
    M_HMMA,
    M_SHARED,
    M_ALU,
    M_FMA,
    M_INST,
    M_FP64,
    M_SM_TPUT,
    M_LTS_TPUT,
    M_DRAM_TPUT,
    M_DRAMC_TPUT,
    M_DRAMC_RD,
    M_DRAMC_WR,
    M_GR,
    M_GR_SUM,
    M_PCIE_TPUT,
    M_DRAM_RD,
    M_DRAM_WR,
    M_PCIE_RD,
    M_PCIE_WR,
    M_NVLRX,
    M_NVLTX,
    M_LTS_BYTES,
    M_GPC_HZ,
    M_SM_HZ,
    M_SYS_HZ,
    M_DRAM_RD_SUM,
    M_DRAM_WR_SUM,
    M_PCIE_RD_SUM,
    M_PCIE_WR_SUM,
    M_NVLRX_SUM,
    M_NVLTX_SUM,
    M_TC_SM_ACTIVE, /* XLA's TPC.TriageCompute group: the same signals, one counter group */
    M_TC_WARPS_RT,
    M_TC_TENSOR_RT,
    NMETRICS
};

#define PE ".avg.pct_of_peak_sustained_elapsed"
static const struct metric metrics[NMETRICS] = {
    [M_SM_ACTIVE] = {"sm__cycles_active" PE, PCT, M_SM_ACTIVE, 1, 0, 0.5},
    [M_WARPS] = {"sm__warps_active" PE, PCT, M_WARPS, 1, 0, 0.25},
    [M_WARPS_RT] = {"sm__warps_active_realtime" PE, PCT, M_WARPS_RT, 1, 0, 0.3},
    [M_TENSOR] = {"sm__pipe_tensor_cycles_active" PE, PCT, M_TENSOR, 1, 0, 0.01},
    [M_TENSOR_RT] = {"sm__pipe_tensor_cycles_active_realtime" PE, PCT, M_TENSOR_RT, 1, 0, 0.02},
    [M_HMMA] = {"TPC.TriageCompute.sm__pipe_tensor_op_hmma_cycles_active_realtime" PE, PCT, M_HMMA,
                1, 0, 0.03},
    [M_SHARED] = {"sm__pipe_shared_cycles_active_realtime" PE, PCT, M_SHARED, 1, 0, 0.04},
    [M_ALU] = {"sm__pipe_alu_cycles_active" PE, PCT, M_ALU, 1, 0, 0.05},
    [M_FMA] = {"sm__pipe_fma_cycles_active" PE, PCT, M_FMA, 1, 0, 0.06},
    [M_INST] = {"sm__inst_executed_realtime" PE, PCT, M_INST, 1, 0, 0.07},
    [M_FP64] = {"sm__pipe_fp64_cycles_active" PE, PCT, M_FP64, 2, 0, 0.08},
    [M_SM_TPUT] = {"sm__throughput" PE, PCT, M_SM_TPUT, 19, 0, 0.9},
    [M_LTS_TPUT] = {"lts__throughput" PE, PCT, M_LTS_TPUT, 4, 0, 0.8},
    [M_DRAM_TPUT] = {"dram__throughput" PE, PCT, M_DRAM_TPUT, 1, 0, 1.5},
    [M_DRAMC_TPUT] = {"dramc__throughput" PE, PCT, M_DRAMC_TPUT, 1, 0, 1.5},
    [M_DRAMC_RD] = {"dramc__read_throughput" PE, PCT, M_DRAMC_RD, 1, 0, 1.0},
    [M_DRAMC_WR] = {"dramc__write_throughput" PE, PCT, M_DRAMC_WR, 1, 0, 0.5},
    [M_GR] = {"gr__cycles_active" PE, PCT, M_GR, 1, 0, 2.0},
    [M_GR_SUM] = {"gr__cycles_active.sum.pct_of_peak_sustained_elapsed", PCT, M_GR, 1, 0, 2.0},
    [M_PCIE_TPUT] = {"pcie__throughput" PE, PCT, M_PCIE_TPUT, 1, 0, 0.1},
    [M_DRAM_RD] = {"dram__bytes_read.sum.per_second", RATE, M_DRAM_RD, 1, 0, 4.8e10},
    [M_DRAM_WR] = {"dram__bytes_write.sum.per_second", RATE, M_DRAM_WR, 1, 0, 2.4e10},
    [M_PCIE_RD] = {"pcie__read_bytes.sum.per_second", RATE, M_PCIE_RD, 1, 0, 1.0e6},
    [M_PCIE_WR] = {"pcie__write_bytes.sum.per_second", RATE, M_PCIE_WR, 1, 0, 2.0e6},
    [M_NVLRX] = {"nvlrx__bytes.sum.per_second", RATE, M_NVLRX, 1, 1, 0},
    [M_NVLTX] = {"nvltx__bytes.sum.per_second", RATE, M_NVLTX, 1, 1, 0},
    [M_LTS_BYTES] = {"lts__t_bytes.sum.per_second", RATE, M_LTS_BYTES, 1, 0, 1.0e11},
    [M_GPC_HZ] = {"gpc__cycles_elapsed.avg.per_second", RATE, M_GPC_HZ, 1, 0, 1.98e9},
    [M_SM_HZ] = {"sm__cycles_elapsed.avg.per_second", RATE, M_SM_HZ, 1, 0, 1.98e9},
    [M_SYS_HZ] = {"sys__cycles_elapsed.avg.per_second", RATE, M_SYS_HZ, 1, 0, 1.6e9},
    [M_DRAM_RD_SUM] = {"dram__bytes_read.sum", SUM, M_DRAM_RD, 1, 0, 0},
    [M_DRAM_WR_SUM] = {"dram__bytes_write.sum", SUM, M_DRAM_WR, 1, 0, 0},
    [M_PCIE_RD_SUM] = {"pcie__read_bytes.sum", SUM, M_PCIE_RD, 1, 0, 0},
    [M_PCIE_WR_SUM] = {"pcie__write_bytes.sum", SUM, M_PCIE_WR, 1, 0, 0},
    [M_NVLRX_SUM] = {"nvlrx__bytes.sum", SUM, M_NVLRX, 1, 1, 0},
    [M_NVLTX_SUM] = {"nvltx__bytes.sum", SUM, M_NVLTX, 1, 1, 0},
    [M_TC_SM_ACTIVE] = {"TPC.TriageCompute.sm__cycles_active" PE, PCT, M_SM_ACTIVE, 1, 0, 0},
    [M_TC_WARPS_RT] = {"TPC.TriageCompute.tpc__warps_active_realtime" PE, PCT, M_WARPS_RT, 1, 0, 0},
    [M_TC_TENSOR_RT] = {"TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime" PE, PCT,
                        M_TENSOR_RT, 1, 0, 0},
};
#undef PE

typedef uint64_t mset; /* a set of metrics: bit i is metrics[i] */
_Static_assert(NMETRICS <= 64, "a metric set is a 64-bit mask");

static int metric_index(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < NMETRICS; i++)
        if (strcmp(metrics[i].name, name) == 0)
            return i;
    return -1;
}

static unsigned popcount(mset s)
{
    return (unsigned)__builtin_popcountll(s);
}

/* The position of metric i among the values of a sample of set s. */
static unsigned slot_of(mset s, int i)
{
    return popcount(s & ((UINT64_C(1) << i) - 1));
}

/* Named workload phases (FAKEPM_PHASES): metric, value pairs applied over the idle values. */
struct preset_value {
    int metric;
    double value;
};
static const struct preset {
    const char *name;
    struct preset_value v[16];
} presets[] = {
    {"idle", {{-1, 0}}}, /* every signal at its idle value */
    {"stream",
     {{M_SM_ACTIVE, 98},
      {M_WARPS, 45},
      {M_WARPS_RT, 45},
      {M_TENSOR, 0},
      {M_TENSOR_RT, 0},
      {M_HMMA, 0},
      {M_DRAM_TPUT, 85},
      {M_DRAMC_TPUT, 85},
      {M_DRAMC_RD, 57},
      {M_DRAMC_WR, 28},
      {M_DRAM_RD, 2.72e12},
      {M_DRAM_WR, 1.36e12},
      {M_GR, 100},
      {M_LTS_TPUT, 60},
      {M_SM_TPUT, 30},
      {-1, 0}}},
    {"gemm",
     {{M_SM_ACTIVE, 99},
      {M_WARPS, 12},
      {M_WARPS_RT, 12},
      {M_TENSOR, 94},
      {M_TENSOR_RT, 94},
      {M_HMMA, 0},
      {M_DRAM_TPUT, 25},
      {M_DRAMC_TPUT, 25},
      {M_DRAM_RD, 1.0e12},
      {M_DRAM_WR, 0.2e12},
      {M_GR, 100},
      {M_SM_TPUT, 70},
      {-1, 0}}},
    {"wmma",
     {{M_SM_ACTIVE, 99},
      {M_WARPS, 50},
      {M_WARPS_RT, 50},
      {M_TENSOR, 60},
      {M_TENSOR_RT, 60},
      {M_HMMA, 60},
      {M_DRAM_TPUT, 10},
      {M_DRAMC_TPUT, 10},
      {M_GR, 100},
      {M_SM_TPUT, 55},
      {-1, 0}}},
    {"h2d",
     {{M_SM_ACTIVE, 0},
      {M_GR, 0},
      {M_PCIE_RD, 5.0e10},
      {M_PCIE_TPUT, 80},
      {M_DRAM_WR, 5.0e10},
      {-1, 0}}},
    {"d2h",
     {{M_SM_ACTIVE, 0},
      {M_GR, 0},
      {M_PCIE_WR, 5.0e10},
      {M_PCIE_TPUT, 80},
      {M_DRAM_RD, 5.0e10},
      {-1, 0}}},
};

/* Chips the host API knows (CUPTI 13.0's cuptiProfilerHostGetSupportedChips). */
static const char *const known_chips[] = {
    "GV100", "GV11B", "TU102", "TU104", "TU106", "TU116", "TU117", "GA100", "GA102", "GA103",
    "GA104", "GA106", "GA107", "GA10B", "GH100", "AD102", "AD103", "AD104", "AD106", "AD107",
    "GB100", "GB102", "GB110", "GB10B", "GB202", "GB203", "GB205", "GB206", "GB207", "GB20B",
};

static int chip_known(const char *chip)
{
    for (size_t i = 0; i < sizeof known_chips / sizeof known_chips[0]; i++)
        if (strcmp(known_chips[i], chip) == 0)
            return 1;
    return 0;
}

/* ------------------------------------------------------------------ state */

struct span {
    uint64_t start, end;
};

struct CUpti_PmSampling_Object {
    uint64_t id;
    int dev;
    /* SetConfig */
    int configured;
    mset cfg;
    uint64_t hw_cap; /* samples the hardware buffer holds */
    uint64_t hw_bytes, sample_bytes;
    uint64_t fill_bps;  /* FAKEPM_HW_FILL_BPS: the load's bytes a second beside the samples */
    uint64_t flood_bps; /* FAKEPM_FLOOD_BPS, for a configuration holding the costly pair */
    uint64_t raw_total; /* raw bytes decoded since SetConfig */
    uint64_t interval;
    int keep_latest;
    int reserved; /* holds the device (and lock_fd its lock file, when FAKEPM_DIR is set) */
    int lock_fd;
    /* GetCounterDataSize, for CounterDataImageInitialize */
    int have_cd;
    mset cd;
    uint32_t cd_max;
    /* the current run: sample i of it spans [start(i), t_start + (i+1) * interval) */
    int started;
    uint64_t t_start, lead, next_i;
    uint64_t drained_at; /* Start or the last DecodeData: the fill counts from there */
    /* the hardware buffer: completed samples not decoded yet, oldest at head */
    struct span *ring;
    size_t ring_alloc, ring_head, ring_n;
    int overflow;  /* samples were lost since the last DecodeData */
    int wedged;    /* KEEP_OLDEST overflowed: DecodeData hands over nothing until Start */
    int too_small; /* hardwareBufferSize under FAKEPM_MIN_HW_BUFFER */
    uint64_t lost;
};

struct CUpti_Profiler_Host_Object {
    uint64_t id;
    char chip[CHIP_LEN];
    int have_avail, nvlink; /* from the availability image */
    mset added;
};

struct phase {
    uint64_t start, end;
    mset set;
    double v[NMETRICS];
};

static struct {
    pthread_mutex_t mu;
    int cuda_inited;
    int ndev;
    int prof_inited; /* cuptiProfilerInitialize minus cuptiProfilerDeInitialize calls */
    uint64_t next_id;
    uint64_t decodes; /* DecodeData calls (FAKEPM_DECODE_FAIL_AT) */
    struct CUpti_PmSampling_Object *obj[MAX_DEVICES];
    struct CUpti_Profiler_Host_Object *host[MAX_HOSTS];
    /* the phase script as last parsed */
    char *phase_text;
    struct phase *phases;
    size_t nphases;
    int clock_warned;
    uint64_t clock_file_last; /* the last time read from FAKEPM_CLOCK=@FILE */
    char chip[MAX_DEVICES][CHIP_LEN];
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .next_id = 1};

/* ------------------------------------------------------------------ helpers */

static int log_on(void)
{
    const char *s = getenv("FAKEPM_LOG");
    return s && *s && strcmp(s, "0") != 0;
}

__attribute__((format(printf, 1, 2))) static void lg(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    int n;
    if (!log_on())
        return;
    n = snprintf(line, sizeof line, "fakepm[%u]: ", (unsigned)getpid());
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}

/* Misuse the real library would crash on or that is a bug in the caller: always said. */
__attribute__((format(printf, 1, 2))) static void pm_warn(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "fakepm[%u]: %s\n", (unsigned)getpid(), line);
}

static uint64_t env_u64(const char *name, uint64_t def, uint64_t min, uint64_t max)
{
    const char *s = getenv(name);
    char *end;
    unsigned long long v;
    if (!s || !*s)
        return def;
    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno || *end || s[0] == '-' || v < min || v > max) {
        pm_warn("%s=%s: not a number in [%" PRIu64 ", %" PRIu64 "]; using %" PRIu64, name, s, min,
                max, def);
        return def;
    }
    return v;
}

static const char *env_str(const char *name, const char *def)
{
    const char *s = getenv(name);
    return s && *s ? s : def;
}

static uint64_t real_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
        end++;
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

/* The double's clock (FAKEPM_CLOCK): CLOCK_REALTIME, a fixed value, or a file's. */
static uint64_t now_ns(void)
{
    const char *c = getenv("FAKEPM_CLOCK");
    uint64_t v;
    if (!c || !*c || strcmp(c, "real") == 0)
        return real_now();
    if (c[0] == '@') {
        char buf[64];
        ssize_t n = -1;
        int fd = open(c + 1, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            n = read(fd, buf, sizeof buf - 1);
            close(fd);
        }
        if (n > 0) {
            buf[n] = 0;
            if (parse_u64(buf, &v) == 0) {
                g.clock_file_last = v;
                return v;
            }
        }
        /* Caught between a truncate and a write: the clock stands still. */
        if (g.clock_file_last)
            return g.clock_file_last;
    } else if (parse_u64(c, &v) == 0) {
        return v;
    }
    if (!g.clock_warned)
        pm_warn("FAKEPM_CLOCK=%s: want real, a time in ns or @FILE holding one; using "
                "CLOCK_REALTIME",
                c);
    g.clock_warned = 1;
    return real_now();
}

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}
#define FNV0 UINT64_C(14695981039346656037)

static const char *device_chip(void)
{
    return env_str("FAKEPM_CHIP", "GH100");
}

static int nvlink_present(void)
{
    return env_u64("FAKEPM_NVLINK", 0, 0, 1) != 0;
}

/* The struct-size rule: structSize must cover the struct as the header of CUDA 13.0 has it
 * (CUPTI_PROFILER_STRUCT_SIZE); larger is fine (a newer header). */
#define CHECK_PARAMS(p, type, last)                                                                \
    do {                                                                                           \
        if (!(p)) {                                                                                \
            pm_warn("%s: NULL params", __func__);                                                  \
            return CUPTI_ERROR_INVALID_PARAMETER;                                                  \
        }                                                                                          \
        if ((p)->structSize < CUPTI_PROFILER_STRUCT_SIZE(type, last)) {                            \
            pm_warn("%s: structSize %zu < %zu (" #type "_STRUCT_SIZE)", __func__, (p)->structSize, \
                    (size_t)CUPTI_PROFILER_STRUCT_SIZE(type, last));                               \
            return CUPTI_ERROR_INVALID_PARAMETER;                                                  \
        }                                                                                          \
    } while (0)

/* Target-side calls need cuInit and cuptiProfilerInitialize first. */
static CUptiResult need_profiler(const char *fn)
{
    if (!g.prof_inited) {
        pm_warn("%s before cuptiProfilerInitialize: the real CUPTI crashes here (SIGSEGV); "
                "returning CUPTI_ERROR_NOT_INITIALIZED",
                fn);
        return CUPTI_ERROR_NOT_INITIALIZED;
    }
    return CUPTI_SUCCESS;
}

static struct CUpti_PmSampling_Object *find_obj(const CUpti_PmSampling_Object *o)
{
    if (!o)
        return NULL;
    for (int i = 0; i < MAX_DEVICES; i++)
        if (g.obj[i] == o)
            return g.obj[i];
    return NULL;
}

static struct CUpti_Profiler_Host_Object *find_host(const CUpti_Profiler_Host_Object *h)
{
    if (!h)
        return NULL;
    for (int i = 0; i < MAX_HOSTS; i++)
        if (g.host[i] == h)
            return g.host[i];
    return NULL;
}

/* ------------------------------------------------------------------ images */

/* Config image: header, then the metric names, each NUL-terminated, padded to 8 bytes. */
struct cfg_hdr {
    char magic[8]; /* "FKPMCFG1" */
    uint64_t size;
    uint64_t metrics;
    uint64_t passes;
    char chip[CHIP_LEN];
    uint64_t check; /* FNV-1a of the image with this field 0 */
};
static const char cfg_magic[8] = {'F', 'K', 'P', 'M', 'C', 'F', 'G', '1'};

/* Counter availability image. */
struct avail_img {
    char magic[8]; /* "FKPMAVL1" */
    uint64_t size;
    uint64_t device;
    uint64_t nvlink;
    char chip[CHIP_LEN];
    uint64_t check;
};
static const char avail_magic[8] = {'F', 'K', 'P', 'M', 'A', 'V', 'L', '1'};
#define AVAIL_SIZE 256

/* Counter data image: header, then capacity records of {start, end, value[n]}, the values
 * in the order of the metrics table. */
struct cd_hdr {
    char magic[8]; /* "FKPMCDI1" */
    uint64_t size;
    uint64_t object;
    uint64_t metrics;
    uint64_t capacity;
    uint64_t check; /* FNV-1a of the fields above */
    uint64_t populated, completed;
};
static const char cd_magic[8] = {'F', 'K', 'P', 'M', 'C', 'D', 'I', '1'};

static size_t names_len(mset s)
{
    size_t n = 0;
    for (int i = 0; i < NMETRICS; i++)
        if (s & (UINT64_C(1) << i))
            n += strlen(metrics[i].name) + 1;
    return (n + 7) & ~(size_t)7;
}

static uint64_t passes_of(mset s)
{
    uint64_t per = env_u64("FAKEPM_METRICS_PER_PASS", 22, 1, 1000);
    uint64_t n = popcount(s), p = (n + per - 1) / per;
    for (int i = 0; i < NMETRICS; i++)
        if ((s & (UINT64_C(1) << i)) && (uint64_t)metrics[i].passes > p)
            p = (uint64_t)metrics[i].passes;
    return p ? p : 1;
}

/* Parses a config image; 0 if it is one the double made, intact. */
static int cfg_parse(const uint8_t *img, size_t size, struct cfg_hdr *h)
{
    uint64_t check, zero = 0;
    if (!img || size < sizeof *h)
        return -1;
    memcpy(h, img, sizeof *h);
    if (memcmp(h->magic, cfg_magic, 8) != 0 || h->size > size || h->size < sizeof *h)
        return -1;
    check = fnv(img, offsetof(struct cfg_hdr, check), FNV0);
    check = fnv(&zero, sizeof zero, check);
    check = fnv(img + sizeof *h, (size_t)h->size - sizeof *h, check);
    if (check != h->check || h->metrics == 0 || (h->metrics >> NMETRICS) != 0)
        return -1;
    h->chip[CHIP_LEN - 1] = 0;
    return 0;
}

static uint64_t cd_check(const struct cd_hdr *h)
{
    return fnv(h, offsetof(struct cd_hdr, check), FNV0);
}

static size_t cd_record(mset s)
{
    return 16 + 8 * (size_t)popcount(s);
}

static size_t cd_size(mset s, uint64_t cap)
{
    return sizeof(struct cd_hdr) + (size_t)cap * cd_record(s);
}

/* Parses a counter data image the double initialized. */
static CUptiResult cd_parse(const uint8_t *img, size_t size, struct cd_hdr *h, const char *fn)
{
    if (!img || size < sizeof *h) {
        pm_warn("%s: no counter data image, or %zu bytes (< %zu)", fn, size, sizeof *h);
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    memcpy(h, img, sizeof *h);
    if (memcmp(h->magic, cd_magic, 8) != 0 || h->check != cd_check(h)) {
        pm_warn("%s: not a counter data image (not initialized with "
                "cuptiPmSamplingCounterDataImageInitialize, or overwritten)",
                fn);
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    if ((h->metrics >> NMETRICS) != 0 || h->size != cd_size(h->metrics, h->capacity)) {
        pm_warn("%s: counter data image header damaged", fn);
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    if (h->size > size) {
        pm_warn("%s: counterDataImageSize %zu < the image's %" PRIu64, fn, size, h->size);
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    if (h->populated > h->capacity || h->completed > h->populated) {
        pm_warn("%s: counter data image header damaged", fn);
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    return CUPTI_SUCCESS;
}

/* ------------------------------------------------------------------ devices, busy */

static int busy_file(int dev)
{
    const char *path = getenv("FAKEPM_BUSY_FILE");
    char buf[256], *p, *end;
    ssize_t n;
    int fd, any = 0;
    if (!path || !*path)
        return 0;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 1; /* empty: every device */
    buf[n] = 0;
    for (p = buf;;) {
        long d;
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == ',')
            p++;
        if (!*p)
            break;
        d = strtol(p, &end, 10);
        if (end == p)
            return 1; /* not a list of devices: every device */
        any = 1;
        if (d == dev)
            return 1;
        p = end;
    }
    return !any;
}

static int lock_path(int dev, char *buf, size_t len)
{
    const char *dir = getenv("FAKEPM_DIR");
    if (!dir || !*dir)
        return -1;
    snprintf(buf, len, "%s/pm-dev%d.lock", dir, dev);
    return 0;
}

/* Another process holds the device (its lock file is locked). */
static int other_process_holds(int dev)
{
    char path[PATH_MAX];
    int fd, held = 0;
    if (lock_path(dev, path, sizeof path) < 0)
        return 0;
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        pm_warn("cannot open %s: %s", path, strerror(errno));
        return 0;
    }
    if (flock(fd, LOCK_SH | LOCK_NB) < 0)
        held = errno == EWOULDBLOCK;
    close(fd);
    return held;
}

/* Takes the device for o (SetConfig); HARDWARE_BUSY if someone else has it. */
static CUptiResult reserve(struct CUpti_PmSampling_Object *o)
{
    char path[PATH_MAX];
    int fd;
    if (o->reserved)
        return CUPTI_SUCCESS;
    if (lock_path(o->dev, path, sizeof path) == 0) {
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0) {
            pm_warn("cannot open %s: %s", path, strerror(errno));
            return CUPTI_ERROR_UNKNOWN;
        }
        /* A process that only checks holds a shared lock for an instant: try a few times
         * before calling the device busy. */
        for (int i = 0;; i++) {
            if (flock(fd, LOCK_EX | LOCK_NB) == 0)
                break;
            if (errno != EWOULDBLOCK || i == 20) {
                close(fd);
                return CUPTI_ERROR_HARDWARE_BUSY;
            }
            usleep(1000);
        }
        o->lock_fd = fd;
    }
    o->reserved = 1;
    return CUPTI_SUCCESS;
}

static void release(struct CUpti_PmSampling_Object *o)
{
    if (o->lock_fd >= 0)
        close(o->lock_fd); /* drops the flock */
    o->lock_fd = -1;
    o->reserved = 0;
}

/* RmProfilingAdminOnly=1: only root profiles (=all: not even root, for tests run as root). */
static int unprivileged(void)
{
    const char *s = getenv("FAKEPM_ADMIN_ONLY");
    if (!s || !*s || strcmp(s, "0") == 0)
        return 0;
    if (strcmp(s, "all") == 0)
        return 1;
    return geteuid() != 0;
}

/* The checks GetCounterAvailability and SetConfig make of the device, in that order. */
static CUptiResult device_free(int dev, const struct CUpti_PmSampling_Object *self, const char *fn)
{
    if (unprivileged()) {
        lg("%s: device %d: profiling is for admins only (FAKEPM_ADMIN_ONLY)", fn, dev);
        return CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
    }
    if (busy_file(dev)) {
        lg("%s: device %d busy (FAKEPM_BUSY_FILE)", fn, dev);
        return CUPTI_ERROR_HARDWARE_BUSY;
    }
    for (int i = 0; i < MAX_DEVICES; i++)
        if (g.obj[i] && g.obj[i] != self && g.obj[i]->dev == dev && g.obj[i]->reserved) {
            lg("%s: device %d busy (this process samples it)", fn, dev);
            return CUPTI_ERROR_HARDWARE_BUSY;
        }
    if (!self && other_process_holds(dev)) {
        lg("%s: device %d busy (another process samples it)", fn, dev);
        return CUPTI_ERROR_HARDWARE_BUSY;
    }
    return CUPTI_SUCCESS;
}

/* ------------------------------------------------------------------ sampling */

static uint64_t sample_start(const struct CUpti_PmSampling_Object *o, uint64_t i)
{
    if (i > 0)
        return o->t_start + i * o->interval;
    return o->t_start > o->lead ? o->t_start - o->lead : 0;
}

static int ring_push(struct CUpti_PmSampling_Object *o, struct span s)
{
    if (o->ring_n == o->ring_alloc) {
        size_t n = o->ring_alloc ? o->ring_alloc * 2 : 64;
        struct span *r;
        if (n > o->hw_cap)
            n = (size_t)o->hw_cap;
        if (n <= o->ring_n)
            return -1;
        r = malloc(n * sizeof *r);
        if (!r)
            return -1;
        for (size_t k = 0; k < o->ring_n; k++)
            r[k] = o->ring[(o->ring_head + k) % o->ring_alloc];
        free(o->ring);
        o->ring = r;
        o->ring_alloc = n;
        o->ring_head = 0;
    }
    o->ring[(o->ring_head + o->ring_n) % o->ring_alloc] = s;
    o->ring_n++;
    return 0;
}

static struct span ring_pop(struct CUpti_PmSampling_Object *o)
{
    struct span s = o->ring[o->ring_head];
    o->ring_head = (o->ring_head + 1) % o->ring_alloc;
    o->ring_n--;
    return s;
}

static void lose(struct CUpti_PmSampling_Object *o, uint64_t n)
{
    if (!n)
        return;
    o->overflow = 1;
    o->lost += n;
    if (!o->keep_latest && strcmp(env_str("FAKEPM_OVERFLOW_RESULT", "wedge"), "wedge") == 0)
        o->wedged = 1;
    lg("device %d: hardware buffer full (%" PRIu64 " samples): %" PRIu64 " %s samples lost", o->dev,
       o->hw_cap, n, o->keep_latest ? "oldest" : "newest");
}

/* Moves the samples the hardware completed by now into the hardware buffer. */
static void advance(struct CUpti_PmSampling_Object *o, uint64_t now)
{
    uint64_t total, fresh, i;
    if (!o->started || now < o->t_start)
        return;
    total = (now - o->t_start) / o->interval; /* samples whose end <= now */
    if (total <= o->next_i)
        return;
    fresh = total - o->next_i;
    i = o->next_i;
    if (!o->keep_latest) {
        /* What an H100 did under a memory-bound load (keep oldest): the
         * buffer filled at a rate the interval does not set (64 MiB within
         * 0.5 s at 10 ms, 100 ms and 1 s alike), emptied by each decode. */
        uint64_t cap = o->hw_cap;
        if (o->fill_bps) {
            double fill = (double)o->fill_bps * (double)(now - o->drained_at) / 1e9;
            uint64_t left = fill >= (double)o->hw_bytes ? 0 : o->hw_bytes - (uint64_t)fill;
            if (left / o->sample_bytes < cap)
                cap = left / o->sample_bytes;
        }
        uint64_t room = cap > o->ring_n ? cap - o->ring_n : 0, take = fresh < room ? fresh : room;
        for (uint64_t k = 0; k < take; k++, i++)
            if (ring_push(
                    o, (struct span){sample_start(o, i), o->t_start + (i + 1) * o->interval}) < 0) {
                take = k;
                break;
            }
        lose(o, fresh - take);
    } else {
        if (fresh > o->hw_cap) {
            lose(o, o->ring_n + (fresh - o->hw_cap));
            o->ring_n = 0;
            o->ring_head = 0;
            i = total - o->hw_cap;
        }
        for (; i < total; i++) {
            if (o->ring_n == o->hw_cap) {
                ring_pop(o);
                lose(o, 1);
            }
            if (ring_push(
                    o, (struct span){sample_start(o, i), o->t_start + (i + 1) * o->interval}) < 0)
                lose(o, 1);
        }
    }
    o->next_i = total;
}

/* ------------------------------------------------------------------ values */

static void phase_apply_preset(struct phase *ph, const struct preset *p)
{
    if (strcmp(p->name, "idle") == 0) {
        for (int i = 0; i < NMETRICS; i++)
            if (metrics[i].signal == i) {
                ph->v[i] = metrics[i].base;
                ph->set |= UINT64_C(1) << i;
            }
        return;
    }
    for (const struct preset_value *v = p->v; v->metric >= 0; v++) {
        ph->v[v->metric] = v->value;
        ph->set |= UINT64_C(1) << v->metric;
    }
}

static int parse_time(const char *s, uint64_t *t, uint64_t open)
{
    if (strcmp(s, "-") == 0 || strcmp(s, "inf") == 0) {
        *t = open;
        return 0;
    }
    return parse_u64(s, t);
}

/* One phase: "START END [PRESET...] [METRIC=VALUE...]". */
static int parse_phase(char *line, struct phase *ph, const char *where)
{
    char *save = NULL, *tok, *a, *b;
    memset(ph, 0, sizeof *ph);
    a = strtok_r(line, " \t\r", &save);
    if (!a || a[0] == '#')
        return 0; /* blank or a comment */
    b = strtok_r(NULL, " \t\r", &save);
    if (!b || parse_time(a, &ph->start, 0) < 0 || parse_time(b, &ph->end, UINT64_MAX) < 0 ||
        ph->end <= ph->start) {
        pm_warn("%s: phase \"%s %s...\": want START_NS END_NS (END > START; - for open)", where, a,
                b ? b : "");
        return -1;
    }
    while ((tok = strtok_r(NULL, " \t\r", &save)) != NULL) {
        char *eq = strchr(tok, '='), *end;
        int m;
        double v;
        if (!eq) {
            size_t k;
            for (k = 0; k < sizeof presets / sizeof presets[0]; k++)
                if (strcmp(presets[k].name, tok) == 0)
                    break;
            if (k == sizeof presets / sizeof presets[0]) {
                pm_warn("%s: unknown phase preset %s (idle, stream, gemm, wmma, h2d, d2h); ignored",
                        where, tok);
                continue;
            }
            phase_apply_preset(ph, &presets[k]);
            continue;
        }
        *eq = 0;
        m = metric_index(tok);
        errno = 0;
        v = strtod(eq + 1, &end);
        if (m < 0 || metrics[m].signal != m || errno || *end || end == eq + 1) {
            pm_warn("%s: %s=%s: want a known rate or percent metric (not a .sum or alias) and a "
                    "number; ignored",
                    where, tok, eq + 1);
            continue;
        }
        if (metrics[m].kind == PCT && (v < 0 || v > 100)) {
            pm_warn("%s: %s=%g is not a percentage; clamped", where, tok, v);
            v = v < 0 ? 0 : 100;
        }
        if (metrics[m].kind == RATE && v < 0) {
            pm_warn("%s: %s=%g is negative; using 0", where, tok, v);
            v = 0;
        }
        ph->v[m] = v;
        ph->set |= UINT64_C(1) << m;
    }
    return 1;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    if (!f)
        return NULL;
    for (;;) {
        if (cap - len < 4096) {
            char *nb = realloc(buf, cap + 65536);
            if (!nb)
                break;
            buf = nb;
            cap += 65536;
        }
        n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
    }
    fclose(f);
    if (buf)
        buf[len] = 0;
    return buf;
}

/* Loads FAKEPM_PHASES then FAKEPM_PHASES_FILE (later phases win); parsed again only when
 * the text changed. */
static void load_phases(void)
{
    const char *env = getenv("FAKEPM_PHASES"), *path = getenv("FAKEPM_PHASES_FILE");
    char *file = path && *path ? read_file(path) : NULL, *text, *line, *save = NULL;
    size_t len = (env ? strlen(env) : 0) + 1 + (file ? strlen(file) : 0) + 1;
    text = malloc(len);
    if (!text) {
        free(file);
        return;
    }
    snprintf(text, len, "%s\n%s", env ? env : "", file ? file : "");
    free(file);
    if (g.phase_text && strcmp(g.phase_text, text) == 0) {
        free(text);
        return;
    }
    free(g.phase_text);
    g.phase_text = text;
    g.nphases = 0;
    if (!g.phases)
        g.phases = malloc(MAX_PHASES * sizeof *g.phases);
    if (!g.phases)
        return;
    {
        char *copy = strdup(text);
        if (!copy)
            return;
        for (line = strtok_r(copy, ";\n", &save); line; line = strtok_r(NULL, ";\n", &save)) {
            if (g.nphases == MAX_PHASES) {
                pm_warn("more than %d phases: the rest ignored", MAX_PHASES);
                break;
            }
            if (parse_phase(line, &g.phases[g.nphases], "FAKEPM_PHASES") > 0)
                g.nphases++;
        }
        free(copy);
    }
    lg("%zu phases loaded", g.nphases);
}

static double signal_at(int sig, uint64_t t)
{
    for (size_t k = g.nphases; k-- > 0;) {
        const struct phase *ph = &g.phases[k];
        if ((ph->set & (UINT64_C(1) << sig)) && ph->start <= t && t < ph->end)
            return ph->v[sig];
    }
    return metrics[sig].base;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The time-weighted mean of a signal over [s, e). */
static double signal_mean(int sig, uint64_t s, uint64_t e)
{
    static uint64_t pts[2 * MAX_PHASES + 2]; /* under g.mu */
    size_t n = 0;
    double acc = 0;
    if (e <= s)
        return signal_at(sig, s);
    pts[n++] = s;
    pts[n++] = e;
    for (size_t k = 0; k < g.nphases; k++) {
        const struct phase *ph = &g.phases[k];
        if (!(ph->set & (UINT64_C(1) << sig)))
            continue;
        if (ph->start > s && ph->start < e)
            pts[n++] = ph->start;
        if (ph->end > s && ph->end < e)
            pts[n++] = ph->end;
    }
    if (n == 2)
        return signal_at(sig, s);
    qsort(pts, n, sizeof pts[0], cmp_u64);
    for (size_t k = 0; k + 1 < n; k++)
        if (pts[k + 1] > pts[k])
            acc += signal_at(sig, pts[k]) * (double)(pts[k + 1] - pts[k]);
    return acc / (double)(e - s);
}

static double metric_value(int m, struct span sp)
{
    double mean = signal_mean(metrics[m].signal, sp.start, sp.end);
    if (metrics[m].kind == SUM)
        return mean * (double)(sp.end - sp.start) / 1e9;
    return mean;
}

/* ------------------------------------------------------------------ result strings */

static const char *result_name(CUptiResult r)
{
    switch ((int)r) {
#define R(x)                                                                                       \
    case x: return #x;
        R(CUPTI_SUCCESS)
        R(CUPTI_ERROR_INVALID_PARAMETER)
        R(CUPTI_ERROR_INVALID_DEVICE)
        R(CUPTI_ERROR_INVALID_CONTEXT)
        R(CUPTI_ERROR_INVALID_EVENT_DOMAIN_ID)
        R(CUPTI_ERROR_INVALID_EVENT_ID)
        R(CUPTI_ERROR_INVALID_EVENT_NAME)
        R(CUPTI_ERROR_INVALID_OPERATION)
        R(CUPTI_ERROR_OUT_OF_MEMORY)
        R(CUPTI_ERROR_HARDWARE)
        R(CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT)
        R(CUPTI_ERROR_API_NOT_IMPLEMENTED)
        R(CUPTI_ERROR_MAX_LIMIT_REACHED)
        R(CUPTI_ERROR_NOT_READY)
        R(CUPTI_ERROR_NOT_COMPATIBLE)
        R(CUPTI_ERROR_NOT_INITIALIZED)
        R(CUPTI_ERROR_INVALID_METRIC_ID)
        R(CUPTI_ERROR_INVALID_METRIC_NAME)
        R(CUPTI_ERROR_QUEUE_EMPTY)
        R(CUPTI_ERROR_INVALID_HANDLE)
        R(CUPTI_ERROR_INVALID_STREAM)
        R(CUPTI_ERROR_INVALID_KIND)
        R(CUPTI_ERROR_INVALID_EVENT_VALUE)
        R(CUPTI_ERROR_DISABLED)
        R(CUPTI_ERROR_INVALID_MODULE)
        R(CUPTI_ERROR_INVALID_METRIC_VALUE)
        R(CUPTI_ERROR_HARDWARE_BUSY)
        R(CUPTI_ERROR_NOT_SUPPORTED)
        R(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED)
        R(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE)
        R(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_NON_P2P_DEVICES)
        R(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS)
        R(CUPTI_ERROR_CDP_TRACING_NOT_SUPPORTED)
        R(CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED)
        R(CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE)
        R(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
        R(CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED)
        R(CUPTI_ERROR_OPENACC_UNDEFINED_ROUTINE)
        R(CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED)
        R(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        R(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES)
        R(CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED)
        R(CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED)
        R(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED)
        R(CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED)
        R(CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED)
        R(CUPTI_ERROR_INVALID_CHIP_NAME)
        R(CUPTI_ERROR_UNKNOWN)
#undef R
    default: return NULL;
    }
}

/* Every entry point: the lock, the call, the log line. */
#define ENTER() pthread_mutex_lock(&g.mu)
#define LEAVE(r)                                                                                   \
    do {                                                                                           \
        CUptiResult r_ = (r);                                                                      \
        pthread_mutex_unlock(&g.mu);                                                               \
        lg("%s -> %d %s", __func__, (int)r_, result_name(r_));                                     \
        return r_;                                                                                 \
    } while (0)

/* ------------------------------------------------------------------ CUPTI: misc */

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str)
{
    const char *s = result_name(result);
    if (!str)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *str = s ? s : "CUPTI_ERROR_UNKNOWN_RESULT_CODE";
    return s ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *timestamp)
{
    if (!timestamp)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *timestamp = now_ns();
    return CUPTI_SUCCESS;
}

/* ------------------------------------------------------------------ profiler target */

static void disable_locked(struct CUpti_PmSampling_Object *o)
{
    for (int i = 0; i < MAX_DEVICES; i++)
        if (g.obj[i] == o)
            g.obj[i] = NULL;
    release(o);
    free(o->ring);
    free(o);
}

static CUptiResult prof_init(CUpti_Profiler_Initialize_Params *p)
{
    CHECK_PARAMS(p, CUpti_Profiler_Initialize_Params, pPriv);
    if (!g.cuda_inited) {
        pm_warn("cuptiProfilerInitialize before cuInit: the real CUPTI returns "
                "CUPTI_ERROR_UNKNOWN (or crashes)");
        return CUPTI_ERROR_UNKNOWN;
    }
    g.prof_inited++;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiProfilerInitialize(CUpti_Profiler_Initialize_Params *pParams)
{
    ENTER();
    LEAVE(prof_init(pParams));
}

static CUptiResult prof_deinit(CUpti_Profiler_DeInitialize_Params *p)
{
    CHECK_PARAMS(p, CUpti_Profiler_DeInitialize_Params, pPriv);
    if (!g.prof_inited)
        return CUPTI_ERROR_NOT_INITIALIZED;
    if (--g.prof_inited == 0)
        for (int i = 0; i < MAX_DEVICES; i++)
            if (g.obj[i]) {
                pm_warn("cuptiProfilerDeInitialize: PM sampling still enabled on device %d: "
                        "disabled",
                        g.obj[i]->dev);
                disable_locked(g.obj[i]);
            }
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiProfilerDeInitialize(CUpti_Profiler_DeInitialize_Params *pParams)
{
    ENTER();
    LEAVE(prof_deinit(pParams));
}

static CUptiResult chip_name(CUpti_Device_GetChipName_Params *p)
{
    CUptiResult r;
    CHECK_PARAMS(p, CUpti_Device_GetChipName_Params, pChipName);
    if ((r = need_profiler("cuptiDeviceGetChipName")) != CUPTI_SUCCESS)
        return r;
    if (p->deviceIndex >= (size_t)g.ndev)
        return CUPTI_ERROR_INVALID_PARAMETER;
    /* CUPTI's string stays valid; the environment's may not (setenv). */
    snprintf(g.chip[p->deviceIndex], CHIP_LEN, "%s", device_chip());
    p->pChipName = g.chip[p->deviceIndex];
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiDeviceGetChipName(CUpti_Device_GetChipName_Params *pParams)
{
    ENTER();
    LEAVE(chip_name(pParams));
}

/* ------------------------------------------------------------------ profiler host */

static CUptiResult host_init(CUpti_Profiler_Host_Initialize_Params *p)
{
    struct CUpti_Profiler_Host_Object *h;
    struct avail_img a;
    int slot;
    CHECK_PARAMS(p, CUpti_Profiler_Host_Initialize_Params, pHostObject);
    if (p->profilerType != CUPTI_PROFILER_TYPE_PM_SAMPLING) {
        pm_warn("cuptiProfilerHostInitialize: profilerType %d: the double has PM sampling only",
                (int)p->profilerType);
        return CUPTI_ERROR_NOT_SUPPORTED;
    }
    if (!p->pChipName || strlen(p->pChipName) >= CHIP_LEN)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (p->pCounterAvailabilityImage) {
        memcpy(&a, p->pCounterAvailabilityImage, sizeof a);
        a.chip[CHIP_LEN - 1] = 0;
        if (memcmp(a.magic, avail_magic, 8) != 0 ||
            a.check != fnv(&a, offsetof(struct avail_img, check), FNV0)) {
            pm_warn("cuptiProfilerHostInitialize: not a counter availability image");
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        if (strcmp(a.chip, p->pChipName) != 0) {
            pm_warn("cuptiProfilerHostInitialize: chip %s, but the availability image is of a %s",
                    p->pChipName, a.chip);
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
    } else if (!chip_known(p->pChipName)) {
        /* A chip newer than this CUPTI needs the device's availability image. */
        lg("cuptiProfilerHostInitialize: unknown chip %s", p->pChipName);
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    for (slot = 0; slot < MAX_HOSTS && g.host[slot]; slot++)
        ;
    if (slot == MAX_HOSTS)
        return CUPTI_ERROR_OUT_OF_MEMORY;
    h = calloc(1, sizeof *h);
    if (!h)
        return CUPTI_ERROR_OUT_OF_MEMORY;
    h->id = g.next_id++;
    snprintf(h->chip, sizeof h->chip, "%s", p->pChipName);
    if (p->pCounterAvailabilityImage) {
        h->have_avail = 1;
        h->nvlink = a.nvlink != 0;
    }
    g.host[slot] = h;
    p->pHostObject = h;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiProfilerHostInitialize(CUpti_Profiler_Host_Initialize_Params *pParams)
{
    ENTER();
    LEAVE(host_init(pParams));
}

static CUptiResult host_deinit(CUpti_Profiler_Host_Deinitialize_Params *p)
{
    struct CUpti_Profiler_Host_Object *h;
    CHECK_PARAMS(p, CUpti_Profiler_Host_Deinitialize_Params, pHostObject);
    if (!(h = find_host(p->pHostObject)))
        return CUPTI_ERROR_INVALID_PARAMETER;
    for (int i = 0; i < MAX_HOSTS; i++)
        if (g.host[i] == h)
            g.host[i] = NULL;
    free(h);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiProfilerHostDeinitialize(CUpti_Profiler_Host_Deinitialize_Params *pParams)
{
    ENTER();
    LEAVE(host_deinit(pParams));
}

static CUptiResult add_metrics(CUpti_Profiler_Host_ConfigAddMetrics_Params *p)
{
    struct CUpti_Profiler_Host_Object *h;
    mset add = 0;
    CHECK_PARAMS(p, CUpti_Profiler_Host_ConfigAddMetrics_Params, numMetrics);
    if (!(h = find_host(p->pHostObject)) || !p->ppMetricNames || !p->numMetrics)
        return CUPTI_ERROR_INVALID_PARAMETER;
    /* All or nothing: a bad name adds none of the call's names. */
    for (size_t k = 0; k < p->numMetrics; k++) {
        int m = metric_index(p->ppMetricNames[k]);
        if (m < 0) {
            lg("cuptiProfilerHostConfigAddMetrics: unknown metric %s",
               p->ppMetricNames[k] ? p->ppMetricNames[k] : "(null)");
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        if (metrics[m].nvlink && h->have_avail && !h->nvlink) {
            lg("cuptiProfilerHostConfigAddMetrics: %s: no NVLink counters on this device",
               metrics[m].name);
            return CUPTI_ERROR_UNKNOWN;
        }
        add |= UINT64_C(1) << m;
    }
    h->added |= add;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiProfilerHostConfigAddMetrics(CUpti_Profiler_Host_ConfigAddMetrics_Params *pParams)
{
    ENTER();
    LEAVE(add_metrics(pParams));
}

static size_t cfg_size(mset s)
{
    return sizeof(struct cfg_hdr) + names_len(s);
}

static CUptiResult config_size(CUpti_Profiler_Host_GetConfigImageSize_Params *p)
{
    struct CUpti_Profiler_Host_Object *h;
    CHECK_PARAMS(p, CUpti_Profiler_Host_GetConfigImageSize_Params, configImageSize);
    if (!(h = find_host(p->pHostObject)))
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (!h->added) {
        pm_warn("cuptiProfilerHostGetConfigImageSize: no metrics added");
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    p->configImageSize = cfg_size(h->added);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiProfilerHostGetConfigImageSize(CUpti_Profiler_Host_GetConfigImageSize_Params *pParams)
{
    ENTER();
    LEAVE(config_size(pParams));
}

static CUptiResult config_image(CUpti_Profiler_Host_GetConfigImage_Params *p)
{
    struct CUpti_Profiler_Host_Object *h;
    struct cfg_hdr hd;
    size_t size, off;
    uint64_t check, zero = 0;
    CHECK_PARAMS(p, CUpti_Profiler_Host_GetConfigImage_Params, pConfigImage);
    if (!(h = find_host(p->pHostObject)) || !p->pConfigImage)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (!h->added) {
        pm_warn("cuptiProfilerHostGetConfigImage: no metrics added");
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    size = cfg_size(h->added);
    if (p->configImageSize < size) {
        pm_warn("cuptiProfilerHostGetConfigImage: configImageSize %zu < %zu", p->configImageSize,
                size);
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    memset(&hd, 0, sizeof hd);
    memcpy(hd.magic, cfg_magic, 8);
    hd.size = size;
    hd.metrics = h->added;
    hd.passes = passes_of(h->added);
    snprintf(hd.chip, sizeof hd.chip, "%s", h->chip);
    memset(p->pConfigImage, 0, size);
    off = sizeof hd;
    for (int i = 0; i < NMETRICS; i++)
        if (h->added & (UINT64_C(1) << i)) {
            size_t n = strlen(metrics[i].name) + 1;
            memcpy(p->pConfigImage + off, metrics[i].name, n);
            off += n;
        }
    check = fnv(&hd, offsetof(struct cfg_hdr, check), FNV0);
    check = fnv(&zero, sizeof zero, check);
    hd.check = fnv(p->pConfigImage + sizeof hd, size - sizeof hd, check);
    memcpy(p->pConfigImage, &hd, sizeof hd);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiProfilerHostGetConfigImage(CUpti_Profiler_Host_GetConfigImage_Params *pParams)
{
    ENTER();
    LEAVE(config_image(pParams));
}

static CUptiResult num_passes(CUpti_Profiler_Host_GetNumOfPasses_Params *p)
{
    struct cfg_hdr hd;
    CHECK_PARAMS(p, CUpti_Profiler_Host_GetNumOfPasses_Params, numOfPasses);
    if (cfg_parse(p->pConfigImage, p->configImageSize, &hd) < 0) {
        pm_warn("cuptiProfilerHostGetNumOfPasses: not a config image");
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    p->numOfPasses = (size_t)hd.passes;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiProfilerHostGetNumOfPasses(CUpti_Profiler_Host_GetNumOfPasses_Params *pParams)
{
    ENTER();
    LEAVE(num_passes(pParams));
}

static CUptiResult evaluate(CUpti_Profiler_Host_EvaluateToGpuValues_Params *p)
{
    struct cd_hdr hd;
    CUptiResult r;
    const uint8_t *rec;
    CHECK_PARAMS(p, CUpti_Profiler_Host_EvaluateToGpuValues_Params, pMetricValues);
    if (!find_host(p->pHostObject) || !p->ppMetricNames || !p->numMetrics || !p->pMetricValues)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if ((r = cd_parse(p->pCounterDataImage, p->counterDataImageSize, &hd,
                      "cuptiProfilerHostEvaluateToGpuValues")) != CUPTI_SUCCESS)
        return r;
    if (p->rangeIndex >= hd.completed) {
        lg("cuptiProfilerHostEvaluateToGpuValues: rangeIndex %zu, %" PRIu64 " samples",
           p->rangeIndex, hd.completed);
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    rec = p->pCounterDataImage + sizeof hd + p->rangeIndex * cd_record(hd.metrics);
    for (size_t k = 0; k < p->numMetrics; k++) {
        int m = metric_index(p->ppMetricNames[k]);
        if (m < 0 || !(hd.metrics & (UINT64_C(1) << m))) {
            lg("cuptiProfilerHostEvaluateToGpuValues: %s is not in the counter data",
               p->ppMetricNames[k] ? p->ppMetricNames[k] : "(null)");
            return CUPTI_ERROR_INVALID_METRIC_NAME;
        }
        memcpy(&p->pMetricValues[k], rec + 16 + 8 * (size_t)slot_of(hd.metrics, m), 8);
    }
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiProfilerHostEvaluateToGpuValues(CUpti_Profiler_Host_EvaluateToGpuValues_Params *pParams)
{
    ENTER();
    LEAVE(evaluate(pParams));
}

/* ------------------------------------------------------------------ PM sampling */

static CUptiResult availability(CUpti_PmSampling_GetCounterAvailability_Params *p)
{
    CUptiResult r;
    struct avail_img a;
    CHECK_PARAMS(p, CUpti_PmSampling_GetCounterAvailability_Params, pCounterAvailabilityImage);
    if ((r = need_profiler("cuptiPmSamplingGetCounterAvailability")) != CUPTI_SUCCESS)
        return r;
    if (p->deviceIndex >= (size_t)g.ndev)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if ((r = device_free((int)p->deviceIndex, NULL, "cuptiPmSamplingGetCounterAvailability")) !=
        CUPTI_SUCCESS)
        return r;
    if (!p->pCounterAvailabilityImage) {
        p->counterAvailabilityImageSize = AVAIL_SIZE;
        return CUPTI_SUCCESS;
    }
    if (p->counterAvailabilityImageSize < AVAIL_SIZE) {
        pm_warn("cuptiPmSamplingGetCounterAvailability: counterAvailabilityImageSize %zu < %d",
                p->counterAvailabilityImageSize, AVAIL_SIZE);
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    memset(&a, 0, sizeof a);
    memcpy(a.magic, avail_magic, 8);
    a.size = AVAIL_SIZE;
    a.device = p->deviceIndex;
    a.nvlink = (uint64_t)nvlink_present();
    snprintf(a.chip, sizeof a.chip, "%s", device_chip());
    a.check = fnv(&a, offsetof(struct avail_img, check), FNV0);
    memset(p->pCounterAvailabilityImage, 0xa5, AVAIL_SIZE);
    memcpy(p->pCounterAvailabilityImage, &a, sizeof a);
    p->counterAvailabilityImageSize = AVAIL_SIZE;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiPmSamplingGetCounterAvailability(CUpti_PmSampling_GetCounterAvailability_Params *pParams)
{
    ENTER();
    LEAVE(availability(pParams));
}

static CUptiResult enable(CUpti_PmSampling_Enable_Params *p)
{
    struct CUpti_PmSampling_Object *o;
    CUptiResult r;
    CHECK_PARAMS(p, CUpti_PmSampling_Enable_Params, pPmSamplingObject);
    if ((r = need_profiler("cuptiPmSamplingEnable")) != CUPTI_SUCCESS)
        return r;
    if (p->deviceIndex >= (size_t)g.ndev)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (g.obj[p->deviceIndex]) {
        lg("cuptiPmSamplingEnable: already enabled on device %zu", p->deviceIndex);
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    o = calloc(1, sizeof *o);
    if (!o)
        return CUPTI_ERROR_OUT_OF_MEMORY;
    o->id = g.next_id++;
    o->dev = (int)p->deviceIndex;
    o->lock_fd = -1;
    g.obj[p->deviceIndex] = o;
    p->pPmSamplingObject = o;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiPmSamplingEnable(CUpti_PmSampling_Enable_Params *pParams)
{
    ENTER();
    LEAVE(enable(pParams));
}

static CUptiResult disable(CUpti_PmSampling_Disable_Params *p)
{
    struct CUpti_PmSampling_Object *o;
    CHECK_PARAMS(p, CUpti_PmSampling_Disable_Params, pPmSamplingObject);
    if (!(o = find_obj(p->pPmSamplingObject)))
        return CUPTI_ERROR_INVALID_PARAMETER;
    disable_locked(o);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiPmSamplingDisable(CUpti_PmSampling_Disable_Params *pParams)
{
    ENTER();
    LEAVE(disable(pParams));
}

static CUptiResult set_config(CUpti_PmSampling_SetConfig_Params *p)
{
    struct CUpti_PmSampling_Object *o;
    struct cfg_hdr hd;
    CUptiResult r;
    uint64_t interval, sample_bytes;
    CHECK_PARAMS(p, CUpti_PmSampling_SetConfig_Params, hwBufferAppendMode);
    if (!(o = find_obj(p->pPmSamplingObject)))
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (o->started) {
        pm_warn("cuptiPmSamplingSetConfig while sampling on device %d", o->dev);
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    if (cfg_parse(p->pConfig, p->configSize, &hd) < 0) {
        pm_warn("cuptiPmSamplingSetConfig: not a config image (or configSize too small)");
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    if (strcmp(hd.chip, device_chip()) != 0) {
        pm_warn("cuptiPmSamplingSetConfig: config image for a %s on a %s", hd.chip, device_chip());
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    if ((unsigned)p->triggerMode > CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL ||
        (unsigned)p->hwBufferAppendMode >
            CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST ||
        p->samplingInterval == 0)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (p->triggerMode == CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL) {
        uint64_t hz = env_u64("FAKEPM_SYSCLK_HZ", 1600000000, 1, UINT64_C(100000000000));
        interval = (uint64_t)((double)p->samplingInterval * 1e9 / (double)hz);
        if (interval == 0)
            interval = 1;
    } else {
        interval = p->samplingInterval;
    }
    sample_bytes = env_u64("FAKEPM_HW_SAMPLE_BYTES", 1024, 1, UINT64_C(1) << 30);
    if (p->hardwareBufferSize < sample_bytes) {
        pm_warn("cuptiPmSamplingSetConfig: hardwareBufferSize %zu holds no sample (%" PRIu64
                " bytes each)",
                p->hardwareBufferSize, sample_bytes);
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    if (hd.passes > 1) {
        lg("cuptiPmSamplingSetConfig: config image needs %" PRIu64 " passes", hd.passes);
        return CUPTI_ERROR_NOT_SUPPORTED;
    }
    if ((r = device_free(o->dev, o, "cuptiPmSamplingSetConfig")) != CUPTI_SUCCESS)
        return r;
    if ((r = reserve(o)) != CUPTI_SUCCESS) {
        lg("cuptiPmSamplingSetConfig: device %d busy (another process samples it)", o->dev);
        return r;
    }
    o->configured = 1;
    o->cfg = hd.metrics;
    o->interval = interval;
    o->hw_cap = p->hardwareBufferSize / sample_bytes;
    o->hw_bytes = p->hardwareBufferSize;
    o->sample_bytes = sample_bytes;
    o->fill_bps = env_u64("FAKEPM_HW_FILL_BPS", 0, 0, UINT64_C(1) << 40);
    /* What the H100 did (docs/gpu-runs/20261207-h100-sandbox-pm-cost): the
     * non-realtime tensor pipe counter configured with SM active or warps
     * active made the GPU write records besides the triggered samples (the
     * Perf SDK's "overflow prevention records") that filled 64 MiB within
     * 0.5 s and cost half a core to decode; every other set, none. */
    o->flood_bps = 0;
    if ((hd.metrics & (UINT64_C(1) << M_TENSOR)) &&
        (hd.metrics & ((UINT64_C(1) << M_SM_ACTIVE) | (UINT64_C(1) << M_WARPS))))
        o->flood_bps = env_u64("FAKEPM_FLOOD_BPS", 0, 0, UINT64_C(1) << 40);
    o->fill_bps += o->flood_bps;
    o->raw_total = 0;
    o->too_small = p->hardwareBufferSize < env_u64("FAKEPM_MIN_HW_BUFFER", 0, 0, UINT64_C(1) << 40);
    o->keep_latest =
        p->hwBufferAppendMode == CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
    /* A new configuration starts with an empty hardware buffer. */
    free(o->ring);
    o->ring = NULL;
    o->ring_alloc = o->ring_head = o->ring_n = 0;
    o->overflow = 0;
    lg("cuptiPmSamplingSetConfig: device %d, %u metrics, interval %" PRIu64
       " ns, hardware buffer %" PRIu64 " samples, %s",
       o->dev, popcount(o->cfg), o->interval, o->hw_cap,
       o->keep_latest ? "keep latest" : "keep oldest");
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiPmSamplingSetConfig(CUpti_PmSampling_SetConfig_Params *pParams)
{
    ENTER();
    LEAVE(set_config(pParams));
}

static CUptiResult start(CUpti_PmSampling_Start_Params *p)
{
    struct CUpti_PmSampling_Object *o;
    CHECK_PARAMS(p, CUpti_PmSampling_Start_Params, pPmSamplingObject);
    if (!(o = find_obj(p->pPmSamplingObject)))
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (!o->configured || o->started) {
        pm_warn("cuptiPmSamplingStart on device %d: %s", o->dev,
                o->started ? "already started" : "no cuptiPmSamplingSetConfig yet");
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    o->started = 1;
    /* The H100's 32 MiB buffer under load: overflowed before the first
     * decode, at any interval (FAKEPM_MIN_HW_BUFFER). */
    o->wedged = o->too_small && !o->keep_latest;
    o->overflow = 0;
    o->ring_n = 0;
    o->ring_head = 0;
    o->t_start = o->drained_at = now_ns();
    o->lead = env_u64("FAKEPM_FIRST_SAMPLE_LEAD_NS", 800000000, 0, UINT64_C(3600000000000));
    o->next_i = 0;
    lg("cuptiPmSamplingStart: device %d at %" PRIu64 " (first sample from %" PRIu64 ")", o->dev,
       o->t_start, sample_start(o, 0));
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiPmSamplingStart(CUpti_PmSampling_Start_Params *pParams)
{
    ENTER();
    LEAVE(start(pParams));
}

static CUptiResult stop(CUpti_PmSampling_Stop_Params *p)
{
    struct CUpti_PmSampling_Object *o;
    CHECK_PARAMS(p, CUpti_PmSampling_Stop_Params, pPmSamplingObject);
    if (!(o = find_obj(p->pPmSamplingObject)))
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (!o->started) {
        pm_warn("cuptiPmSamplingStop on device %d: not started", o->dev);
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    advance(o, now_ns()); /* the sample in progress is not completed: it is lost */
    o->started = 0;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiPmSamplingStop(CUpti_PmSampling_Stop_Params *pParams)
{
    ENTER();
    LEAVE(stop(pParams));
}

static CUptiResult names_to_set(const char **names, size_t n, mset *out, const char *fn)
{
    mset s = 0;
    if (!names || !n)
        return CUPTI_ERROR_INVALID_PARAMETER;
    for (size_t k = 0; k < n; k++) {
        int m = metric_index(names[k]);
        if (m < 0) {
            lg("%s: unknown metric %s", fn, names[k] ? names[k] : "(null)");
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        s |= UINT64_C(1) << m;
    }
    *out = s;
    return CUPTI_SUCCESS;
}

static CUptiResult data_size(CUpti_PmSampling_GetCounterDataSize_Params *p)
{
    struct CUpti_PmSampling_Object *o;
    CUptiResult r;
    mset s;
    CHECK_PARAMS(p, CUpti_PmSampling_GetCounterDataSize_Params, counterDataSize);
    if (!(o = find_obj(p->pPmSamplingObject)) || p->maxSamples == 0)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if ((r = names_to_set(p->pMetricNames, p->numMetrics, &s,
                          "cuptiPmSamplingGetCounterDataSize")) != CUPTI_SUCCESS)
        return r;
    o->have_cd = 1;
    o->cd = s;
    o->cd_max = p->maxSamples;
    p->counterDataSize = cd_size(s, p->maxSamples);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiPmSamplingGetCounterDataSize(CUpti_PmSampling_GetCounterDataSize_Params *pParams)
{
    ENTER();
    LEAVE(data_size(pParams));
}

static CUptiResult data_init(CUpti_PmSampling_CounterDataImage_Initialize_Params *p)
{
    struct CUpti_PmSampling_Object *o;
    struct cd_hdr hd;
    size_t size;
    CHECK_PARAMS(p, CUpti_PmSampling_CounterDataImage_Initialize_Params, pCounterData);
    if (!(o = find_obj(p->pPmSamplingObject)) || !p->pCounterData)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (!o->have_cd) {
        pm_warn("cuptiPmSamplingCounterDataImageInitialize before "
                "cuptiPmSamplingGetCounterDataSize");
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    size = cd_size(o->cd, o->cd_max);
    if (p->counterDataSize < size) {
        pm_warn("cuptiPmSamplingCounterDataImageInitialize: counterDataSize %zu < %zu",
                p->counterDataSize, size);
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    memset(&hd, 0, sizeof hd);
    memcpy(hd.magic, cd_magic, 8);
    hd.size = size;
    hd.object = o->id;
    hd.metrics = o->cd;
    hd.capacity = o->cd_max;
    hd.check = cd_check(&hd);
    memset(p->pCounterData, 0, size);
    memcpy(p->pCounterData, &hd, sizeof hd);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiPmSamplingCounterDataImageInitialize(
    CUpti_PmSampling_CounterDataImage_Initialize_Params *pParams)
{
    ENTER();
    LEAVE(data_init(pParams));
}

/* The hardware buffer's used bytes at now: the samples it holds and what
 * filled it besides them since the last decode, at most its size. */
static uint64_t raw_used(const struct CUpti_PmSampling_Object *o, uint64_t now)
{
    double fill = o->started && now > o->drained_at
                      ? (double)o->fill_bps * (double)(now - o->drained_at) / 1e9
                      : 0;
    double used = (double)o->ring_n * (double)o->sample_bytes + fill;
    return used >= (double)o->hw_bytes ? o->hw_bytes : (uint64_t)used;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Decoding costs the caller's CPU by the raw bytes it reads
 * (FAKEPM_DECODE_NS_PER_MIB), as cuptiPmSamplingDecodeData's did. */
static void burn_decode_cpu(uint64_t raw)
{
    uint64_t per = env_u64("FAKEPM_DECODE_NS_PER_MIB", 0, 0, UINT64_C(10000000000));
    uint64_t want = (uint64_t)((double)per * (double)raw / 1048576.0), t0 = thread_cpu_ns();
    volatile uint64_t x = 0;
    while (want && thread_cpu_ns() - t0 < want)
        for (int i = 0; i < 1000; i++)
            x += (uint64_t)i;
}

static CUptiResult decode(CUpti_PmSampling_DecodeData_Params *p)
{
    struct CUpti_PmSampling_Object *o;
    struct cd_hdr hd;
    CUptiResult r;
    uint64_t moved = 0;
    size_t rec;
    int overflow;
    CHECK_PARAMS(p, CUpti_PmSampling_DecodeData_Params, overflow);
    if (!(o = find_obj(p->pPmSamplingObject)))
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (++g.decodes == env_u64("FAKEPM_DECODE_FAIL_AT", 0, 0, UINT64_MAX)) {
        lg("cuptiPmSamplingDecodeData: device %d: failing as FAKEPM_DECODE_FAIL_AT says", o->dev);
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    if (!o->configured) {
        pm_warn("cuptiPmSamplingDecodeData on device %d before cuptiPmSamplingSetConfig", o->dev);
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    if ((r = cd_parse(p->pCounterDataImage, p->counterDataImageSize, &hd,
                      "cuptiPmSamplingDecodeData")) != CUPTI_SUCCESS)
        return r;
    if (hd.object != o->id) {
        pm_warn("cuptiPmSamplingDecodeData: the counter data image was initialized for another "
                "PM sampling object");
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    if (hd.metrics & ~o->cfg) {
        pm_warn("cuptiPmSamplingDecodeData: the counter data image has metrics the config image "
                "does not");
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    advance(o, now_ns());
    /* The raw records this decode reads: what filled the buffer besides
     * the samples since the last one, and the samples (decoded or left,
     * as the hardware buffer holds them until acknowledged). */
    uint64_t raw = raw_used(o, now_ns());
    o->drained_at = now_ns();
    o->raw_total += raw;
    burn_decode_cpu(raw);
    if (o->wedged) {
        /* What the H200 did: OUT_OF_MEMORY and nothing decoded, every time. */
        p->decodeStopReason = CUPTI_PM_SAMPLING_DECODE_STOP_REASON_OTHER;
        p->overflow = 1;
        o->overflow = 0;
        lg("cuptiPmSamplingDecodeData: device %d: hardware buffer overflowed (keep oldest): "
           "nothing decoded",
           o->dev);
        return CUPTI_ERROR_OUT_OF_MEMORY;
    }
    rec = cd_record(hd.metrics);
    if (o->ring_n && hd.populated < hd.capacity)
        load_phases();
    while (o->ring_n && hd.populated < hd.capacity) {
        struct span sp = ring_pop(o);
        uint8_t *dst = p->pCounterDataImage + sizeof hd + hd.populated * rec;
        size_t slot = 0;
        memcpy(dst, &sp.start, 8);
        memcpy(dst + 8, &sp.end, 8);
        for (int m = 0; m < NMETRICS; m++)
            if (hd.metrics & (UINT64_C(1) << m)) {
                double v = metric_value(m, sp);
                memcpy(dst + 16 + 8 * slot++, &v, 8);
            }
        hd.populated++;
        hd.completed++;
        moved++;
    }
    memcpy(p->pCounterDataImage, &hd, sizeof hd);
    p->decodeStopReason = o->ring_n ? CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL
                                    : CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS;
    overflow = o->overflow;
    p->overflow = (uint8_t)overflow;
    o->overflow = 0;
    lg("cuptiPmSamplingDecodeData: device %d: %" PRIu64 " samples decoded, %zu pending, %s%s",
       o->dev, moved, o->ring_n, o->ring_n ? "COUNTER_DATA_FULL" : "END_OF_RECORDS",
       overflow ? ", overflow" : "");
    if (overflow && !o->keep_latest &&
        strcmp(env_str("FAKEPM_OVERFLOW_RESULT", "wedge"), "oom") == 0)
        return CUPTI_ERROR_OUT_OF_MEMORY;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiPmSamplingDecodeData(CUpti_PmSampling_DecodeData_Params *pParams)
{
    ENTER();
    LEAVE(decode(pParams));
}

static CUptiResult data_info(CUpti_PmSampling_GetCounterDataInfo_Params *p)
{
    struct cd_hdr hd;
    CUptiResult r;
    CHECK_PARAMS(p, CUpti_PmSampling_GetCounterDataInfo_Params, numCompletedSamples);
    if ((r = cd_parse(p->pCounterDataImage, p->counterDataImageSize, &hd,
                      "cuptiPmSamplingGetCounterDataInfo")) != CUPTI_SUCCESS)
        return r;
    p->numTotalSamples = (size_t)hd.capacity;
    p->numPopulatedSamples = (size_t)hd.populated;
    p->numCompletedSamples = (size_t)hd.completed;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiPmSamplingGetCounterDataInfo(CUpti_PmSampling_GetCounterDataInfo_Params *pParams)
{
    ENTER();
    LEAVE(data_info(pParams));
}

static CUptiResult sample_info(CUpti_PmSampling_CounterData_GetSampleInfo_Params *p)
{
    struct cd_hdr hd;
    CUptiResult r;
    const uint8_t *rec;
    CHECK_PARAMS(p, CUpti_PmSampling_CounterData_GetSampleInfo_Params, endTimestamp);
    if (!find_obj(p->pPmSamplingObject))
        return CUPTI_ERROR_INVALID_PARAMETER;
    if ((r = cd_parse(p->pCounterDataImage, p->counterDataImageSize, &hd,
                      "cuptiPmSamplingCounterDataGetSampleInfo")) != CUPTI_SUCCESS)
        return r;
    if (p->sampleIndex >= hd.populated)
        return CUPTI_ERROR_INVALID_PARAMETER;
    rec = p->pCounterDataImage + sizeof hd + p->sampleIndex * cd_record(hd.metrics);
    memcpy(&p->startTimestamp, rec, 8);
    memcpy(&p->endTimestamp, rec + 8, 8);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiPmSamplingCounterDataGetSampleInfo(CUpti_PmSampling_CounterData_GetSampleInfo_Params *pParams)
{
    ENTER();
    LEAVE(sample_info(pParams));
}

/* ------------------------------------------------------------------ CUDA driver */

static int cuda_check_dev(CUdevice dev)
{
    return g.cuda_inited && dev >= 0 && dev < g.ndev;
}

#define CU_ENTER() pthread_mutex_lock(&g.mu)
#define CU_LEAVE(r)                                                                                \
    do {                                                                                           \
        CUresult r_ = (r);                                                                         \
        pthread_mutex_unlock(&g.mu);                                                               \
        lg("%s -> %d", __func__, (int)r_);                                                         \
        return r_;                                                                                 \
    } while (0)

static CUresult cu_init(unsigned int flags)
{
    uint64_t forced = env_u64("FAKEPM_CUINIT_RESULT", 0, 0, INT_MAX);
    uint64_t n = env_u64("FAKEPM_DEVICES", 1, 0, MAX_DEVICES);
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (forced)
        return (CUresult)forced;
    if (n == 0)
        return CUDA_ERROR_NO_DEVICE;
    if (!g.cuda_inited)
        g.ndev = (int)n; /* fixed at the first successful cuInit, as the driver's */
    g.cuda_inited = 1;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuInit(unsigned int Flags)
{
    CU_ENTER();
    CU_LEAVE(cu_init(Flags));
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = (int)env_u64("FAKEPM_DRIVER_VERSION", 13000, 1000, 1000000);
    return CUDA_SUCCESS;
}

static CUresult cu_count(int *count)
{
    if (!g.cuda_inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = g.ndev;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    CU_ENTER();
    CU_LEAVE(cu_count(count));
}

static CUresult cu_get(CUdevice *device, int ordinal)
{
    if (!g.cuda_inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= g.ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    CU_ENTER();
    CU_LEAVE(cu_get(device, ordinal));
}

static CUresult cu_name(char *name, int len, CUdevice dev)
{
    if (!g.cuda_inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!cuda_check_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", env_str("FAKEPM_DEVICE_NAME", "NVIDIA H200"));
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CU_ENTER();
    CU_LEAVE(cu_name(name, len, dev));
}

static CUresult cu_uuid(CUuuid *uuid, CUdevice dev)
{
    /* fa4e0000-0000-4000-8000-0000000000NN, NN the ordinal */
    static const unsigned char base[16] = {0xfa, 0x4e, 0, 0, 0, 0, 0x40, 0,
                                           0x80, 0,    0, 0, 0, 0, 0,    0};
    if (!g.cuda_inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!cuda_check_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(uuid->bytes, base, 16);
    uuid->bytes[15] = (char)dev;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    CU_ENTER();
    CU_LEAVE(cu_uuid(uuid, dev));
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    CU_ENTER();
    CU_LEAVE(cu_uuid(uuid, dev));
}

static CUresult cu_bus(char *pciBusId, int len, CUdevice dev)
{
    /* The bus numbers of an 8-GPU H200 node, then more of the same spacing. */
    static const int bus[8] = {0x19, 0x3b, 0x4c, 0x5d, 0x9b, 0xbb, 0xcb, 0xdb};
    if (!g.cuda_inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!cuda_check_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(pciBusId, (size_t)len, "%04X:%02X:%02X.0", 0, dev < 8 ? bus[dev] : 0xe0 + dev, 0);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    CU_ENTER();
    CU_LEAVE(cu_bus(pciBusId, len, dev));
}

/* ------------------------------------------------------------------ the Perf SDK */

/* CUPTI's PM sampling runs on the Perf SDK's periodic sampler (libnvperf_host, which
 * libcupti loads): its record buffer status is the hardware buffer's.  The double
 * exports the three calls the daemon makes from itself.  Its device order is not
 * CUDA's: the reverse, so that a caller must map by PCI bus id. */
NVPA_Status NVPW_GetDeviceCount(NVPW_GetDeviceCount_Params *p)
{
    if (!p || p->structSize < NVPW_GetDeviceCount_Params_STRUCT_SIZE)
        return NVPA_STATUS_INVALID_ARGUMENT;
    pthread_mutex_lock(&g.mu);
    p->numDevices = g.cuda_inited ? (size_t)g.ndev : 0;
    pthread_mutex_unlock(&g.mu);
    return NVPA_STATUS_SUCCESS;
}

NVPA_Status NVPW_Device_GetPciBusIds(NVPW_Device_GetPciBusIds_Params *p)
{
    NVPA_Status r = NVPA_STATUS_SUCCESS;
    if (!p || p->structSize < NVPW_Device_GetPciBusIds_Params_STRUCT_SIZE || !p->pBusIds)
        return NVPA_STATUS_INVALID_ARGUMENT;
    pthread_mutex_lock(&g.mu);
    if (p->numDevices < (size_t)g.ndev) {
        r = NVPA_STATUS_INVALID_ARGUMENT;
    } else {
        for (int i = 0; i < g.ndev; i++) {
            char bus[32];
            unsigned dom = 0, b = 0, d = 0;
            cu_bus(bus, sizeof bus, g.ndev - 1 - i);
            sscanf(bus, "%x:%x:%x", &dom, &b, &d);
            p->pBusIds[i].domain = dom;
            p->pBusIds[i].bus = (uint16_t)b;
            p->pBusIds[i].device = (uint16_t)d;
        }
    }
    pthread_mutex_unlock(&g.mu);
    return r;
}

/* The Perf SDK's nvperf_device_target.h (not in the CUDA toolkit), member for member. */
typedef struct NVPW_GPU_PeriodicSampler_GetRecordBufferStatus_Params {
    size_t structSize;
    void *pPriv;
    size_t deviceIndex;
    size_t totalSize;
    size_t usedSize;
    NVPA_Bool overflow;
} NVPW_GPU_PeriodicSampler_GetRecordBufferStatus_Params;
#define NVPW_GPU_PeriodicSampler_GetRecordBufferStatus_Params_STRUCT_SIZE                          \
    NVPA_STRUCT_SIZE(NVPW_GPU_PeriodicSampler_GetRecordBufferStatus_Params, overflow)
NVPA_Status NVPW_GPU_PeriodicSampler_GetRecordBufferStatus(
    NVPW_GPU_PeriodicSampler_GetRecordBufferStatus_Params *p);

NVPA_Status NVPW_GPU_PeriodicSampler_GetRecordBufferStatus(
    NVPW_GPU_PeriodicSampler_GetRecordBufferStatus_Params *p)
{
    NVPA_Status r = NVPA_STATUS_ERROR;
    if (!p || p->structSize < NVPW_GPU_PeriodicSampler_GetRecordBufferStatus_Params_STRUCT_SIZE)
        return NVPA_STATUS_INVALID_ARGUMENT;
    pthread_mutex_lock(&g.mu);
    int dev = g.ndev - 1 - (int)p->deviceIndex; /* NVPW's order: the reverse */
    for (int i = 0; i < MAX_DEVICES; i++) {
        struct CUpti_PmSampling_Object *o = g.obj[i];
        if (o && o->dev == dev && o->configured) {
            advance(o, now_ns());
            p->totalSize = o->hw_bytes;
            p->usedSize = raw_used(o, now_ns());
            p->overflow = (NVPA_Bool)(o->overflow || o->wedged);
            r = NVPA_STATUS_SUCCESS;
        }
    }
    pthread_mutex_unlock(&g.mu);
    return r; /* "must be called inside a session" */
}

/* ------------------------------------------------------------------ tests */

void fakepm_reset(void)
{
    pthread_mutex_lock(&g.mu);
    for (int i = 0; i < MAX_DEVICES; i++)
        if (g.obj[i])
            disable_locked(g.obj[i]);
    for (int i = 0; i < MAX_HOSTS; i++) {
        free(g.host[i]);
        g.host[i] = NULL;
    }
    free(g.phase_text);
    free(g.phases);
    g.phase_text = NULL;
    g.phases = NULL;
    g.nphases = 0;
    g.cuda_inited = 0;
    g.ndev = 0;
    g.prof_inited = 0;
    g.clock_warned = 0;
    g.clock_file_last = 0;
    g.decodes = 0;
    pthread_mutex_unlock(&g.mu);
}
