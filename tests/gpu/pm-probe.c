/*
 * pm-probe: answers the design questions of issue 34 (device-level PM
 * sampling in cuptimond) with CUPTI's PM Sampling API, CUDA 12.6+ / 13.0.
 * See docs/reference-pmsampling.md for what it is for and what it found.
 *
 *   pm-probe host   [--chip GH100] [--list FILE] [--metrics a,b,...]
 *                   [--set core|all]
 *       Host-only (no GPU, no driver): supported chips, base metrics of the
 *       chip for PM sampling, max metrics per pass, validity/properties of
 *       the candidate metrics, and which of them fit in one pass.
 *
 *   pm-probe device [--dev N] [--ctx none|primary|create] [--no-cuinit]
 *                   [--no-profinit] [--hwbuf BYTES] [--ms N] [--list FILE]
 *                   [--interval-ns N] [--set core|all]
 *       The bring-up sequence step by step, each step's result code and
 *       time, the GPU memory this process and the device use after each
 *       step (NVML, dlopen'ed), whether a context exists, then a short
 *       sampling run.
 *
 *   pm-probe sample [--dev N] [--interval-ns N] [--trigger time|sysclk]
 *                   [--hwbuf BYTES] [--max-samples N] [--decode-ms N]
 *                   [--first-decode-ms N] [--append oldest|latest]
 *                   [--duration-ms N] [--stop-file F] [--ready F]
 *                   [--csv F] [--phases-from F] [--metrics a,b,...]
 *                   [--set core|all]
 *       Samples until the duration passes, the stop file appears or
 *       SIGINT/SIGTERM, decoding every decode-ms; reports decode results,
 *       overflow, gaps, timestamp domains and decode CPU cost; optional CSV
 *       of every sample and per-phase means against pm-load's phase lines.
 *
 * Every CUPTI call is printed as "STEP name rc=N CUPTI_ERROR_x (ms)" and
 * the probe goes on after a failure wherever that makes sense.  Results
 * meant for the summary are printed as "RESULT key value...".
 *
 * Written in C; cupti_profiler_host.h includes <string>, so the build puts
 * an empty file named "string" on the include path (see pm-probe.sh).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cupti.h>
#include <cupti_target.h>
#include <cupti_profiler_target.h>
#include <cupti_profiler_host.h>
#include <cupti_pmsampling.h>

/* ------------------------------------------------------------------ utils */

static uint64_t clk_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static uint64_t rt_ns(void)
{
    return clk_ns(CLOCK_REALTIME);
}
static uint64_t mono_ns(void)
{
    return clk_ns(CLOCK_MONOTONIC);
}
static double now_ms(void)
{
    return (double)mono_ns() / 1e6;
}
static double cpu_ms(void)
{
    return (double)clk_ns(CLOCK_PROCESS_CPUTIME_ID) / 1e6;
}

static const char *cstr(CUptiResult r)
{
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
        return "?";
    return s;
}

static CUptiResult logres(const char *step, CUptiResult r, double t0)
{
    printf("STEP %-44s rc=%d %s (%.1f ms)\n", step, (int)r, cstr(r), now_ms() - t0);
    fflush(stdout);
    return r;
}
#define CK(step, expr)                                                                             \
    ({                                                                                             \
        double t0_ = now_ms();                                                                     \
        CUptiResult r_ = (expr);                                                                   \
        logres((step), r_, t0_);                                                                   \
    })

static void result(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("RESULT ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    fflush(stdout);
}

static volatile sig_atomic_t g_stop;
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static int file_exists(const char *p)
{
    struct stat st;
    return p && stat(p, &st) == 0;
}

static void write_file(const char *p, const char *text)
{
    if (!p)
        return;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
    rename(tmp, p);
}

/* -------------------------------------------- CUDA driver (dlopen'ed) */
/* Not linked: the host mode must run where no driver exists. */
static struct {
    void *h;
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetPCIBusId)(char *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*DevicePrimaryCtxGetState)(CUdevice, unsigned *, int *);
    CUresult (*CtxCreate_v2)(CUcontext *, unsigned, CUdevice);
    CUresult (*CtxCreate_v4)(CUcontext *, void *, unsigned, CUdevice);
    CUresult (*CtxDestroy)(CUcontext);
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*GetErrorName)(CUresult, const char **);
} drv;

static int drv_load(void)
{
    if (drv.h)
        return 0;
    drv.h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!drv.h) {
        printf("INFO libcuda.so.1 not loadable: %s\n", dlerror());
        return -1;
    }
#define SYM(field, name) *(void **)&drv.field = dlsym(drv.h, name)
    SYM(Init, "cuInit");
    SYM(DriverGetVersion, "cuDriverGetVersion");
    SYM(DeviceGetCount, "cuDeviceGetCount");
    SYM(DeviceGet, "cuDeviceGet");
    SYM(DeviceGetName, "cuDeviceGetName");
    SYM(DeviceGetPCIBusId, "cuDeviceGetPCIBusId");
    SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    SYM(DevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState");
    SYM(CtxCreate_v2, "cuCtxCreate_v2");
    SYM(CtxCreate_v4, "cuCtxCreate_v4");
    SYM(CtxDestroy, "cuCtxDestroy_v2");
    SYM(CtxGetCurrent, "cuCtxGetCurrent");
    SYM(GetErrorName, "cuGetErrorName");
#undef SYM
    return 0;
}

static const char *custr(CUresult r)
{
    const char *s = NULL;
    if (drv.GetErrorName && drv.GetErrorName(r, &s) == CUDA_SUCCESS && s)
        return s;
    return "?";
}

static CUresult culog(const char *step, CUresult r, double t0)
{
    printf("STEP %-44s rc=%d %s (%.1f ms)\n", step, (int)r, custr(r), now_ms() - t0);
    fflush(stdout);
    return r;
}
#define CU(step, expr)                                                                             \
    ({                                                                                             \
        double t0_ = now_ms();                                                                     \
        CUresult r_ = (expr);                                                                      \
        culog((step), r_, t0_);                                                                    \
    })

/* ------------------------------------------------------ NVML (dlopen'ed) */
typedef void *nvmlDevice_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t; /* nvml.h's nvmlProcessInfo_t (= _v2 layout) */
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
static struct {
    void *h;
    int ok;
    nvmlDevice_t dev;
    int (*Init)(void);
    int (*ByIndex)(unsigned, nvmlDevice_t *);
    int (*ByPci)(const char *, nvmlDevice_t *);
    int (*Procs)(nvmlDevice_t, unsigned *, nvmlProcessInfo_t *);
    int (*Mem)(nvmlDevice_t, nvmlMemory_t *);
    const char *(*Err)(int);
} nv;

static void nvml_open(const char *pci_bus_id, int cuda_index)
{
    nv.h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!nv.h) {
        printf("INFO libnvidia-ml.so.1 not loadable: %s\n", dlerror());
        return;
    }
    *(void **)&nv.Init = dlsym(nv.h, "nvmlInit_v2");
    *(void **)&nv.ByIndex = dlsym(nv.h, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&nv.ByPci = dlsym(nv.h, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&nv.Procs = dlsym(nv.h, "nvmlDeviceGetComputeRunningProcesses_v3");
    *(void **)&nv.Mem = dlsym(nv.h, "nvmlDeviceGetMemoryInfo");
    *(void **)&nv.Err = dlsym(nv.h, "nvmlErrorString");
    if (!nv.Init || !nv.ByIndex || !nv.Procs || !nv.Mem)
        return;
    int r = nv.Init();
    if (r) {
        printf("INFO nvmlInit_v2 failed: %d\n", r);
        return;
    }
    r = -1;
    if (pci_bus_id && pci_bus_id[0] && nv.ByPci)
        r = nv.ByPci(pci_bus_id, &nv.dev);
    if (r)
        r = nv.ByIndex((unsigned)(cuda_index < 0 ? 0 : cuda_index), &nv.dev);
    nv.ok = r == 0;
    printf("INFO nvml device handle (%s): %s\n",
           pci_bus_id && pci_bus_id[0] ? pci_bus_id : "by index", nv.ok ? "ok" : "failed");
}

/* One line: what this process and the device use now, and the context state. */
static void mem_report(const char *stage, int cudev_valid, CUdevice cudev)
{
    char ctxs[96] = "ctx=n/a";
    if (drv.h && drv.CtxGetCurrent && drv.DevicePrimaryCtxGetState && cudev_valid) {
        CUcontext cur = NULL;
        unsigned flags = 0;
        int active = -1;
        CUresult a = drv.CtxGetCurrent(&cur);
        CUresult b = drv.DevicePrimaryCtxGetState(cudev, &flags, &active);
        snprintf(ctxs, sizeof ctxs, "current_ctx=%s(rc%d) primary_active=%d(rc%d)",
                 cur ? "yes" : "no", (int)a, active, (int)b);
    }
    if (!nv.ok) {
        printf("MEM %-28s nvml=unavailable %s\n", stage, ctxs);
        fflush(stdout);
        return;
    }
    nvmlMemory_t m = {0};
    int rm = nv.Mem(nv.dev, &m);
    nvmlProcessInfo_t infos[64];
    unsigned n = 64;
    int rp = nv.Procs(nv.dev, &n, infos);
    long long mine = -1;
    unsigned others = 0;
    if (rp == 0) {
        for (unsigned i = 0; i < n; i++) {
            if (infos[i].pid == (unsigned)getpid())
                mine = (long long)infos[i].usedGpuMemory;
            else
                others++;
        }
    }
    printf("MEM %-28s device_used_MiB=%.1f (rc%d) this_pid=%s%.1f%s compute_procs=%u (rc%d) %s\n",
           stage, rm == 0 ? (double)m.used / 1048576.0 : -1.0, rm, mine < 0 ? "not-listed(" : "",
           mine < 0 ? 0.0 : (double)mine / 1048576.0, mine < 0 ? ")" : "MiB", rp == 0 ? n : 0, rp,
           ctxs);
    fflush(stdout);
}

static void smi_apps(const char *stage)
{
    FILE *p = popen(
        "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>&1",
        "r");
    if (!p) {
        printf("SMI %s popen failed\n", stage);
        return;
    }
    char line[512];
    int any = 0;
    while (fgets(line, sizeof line, p)) {
        printf("SMI %s %s", stage, line);
        any = 1;
    }
    int rc = pclose(p);
    if (!any)
        printf("SMI %s (no compute apps listed) rc=%d\n", stage, rc);
    printf("SMI %s this pid is %d\n", stage, (int)getpid());
    fflush(stdout);
}

/* ------------------------------------------------- candidate metric set */
/* Priority order.  Each slot lists alternatives; the first valid one that
 * keeps the set at one pass is used. */
#define MAXALT 4
struct cand {
    const char *role;
    const char *alt[MAXALT];
    int extra; /* 1: only with --set all */
};
static const struct cand CANDS[] = {
    {"sm_active_pct (DCGM SM_ACTIVE)",
     {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
      "TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed"},
     0},
    {"tensor_active_pct (DCGM PIPE_TENSOR_ACTIVE)",
     {"sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
      "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
      "sm__pipe_tensor_op_hmma_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"},
     0},
    {"dram_read_Bps",
     {"dram__bytes_read.sum.per_second",
      "dramc__read_throughput.avg.pct_of_peak_sustained_elapsed"},
     0},
    {"dram_write_Bps",
     {"dram__bytes_write.sum.per_second",
      "dramc__write_throughput.avg.pct_of_peak_sustained_elapsed"},
     0},
    {"dram_throughput_pct (~DCGM DRAM_ACTIVE)",
     {"dram__throughput.avg.pct_of_peak_sustained_elapsed",
      "dramc__throughput.avg.pct_of_peak_sustained_elapsed"},
     0},
    {"gr_active_pct (DCGM GR_ENGINE_ACTIVE)",
     {"gr__cycles_active.avg.pct_of_peak_sustained_elapsed",
      "gr__cycles_active.sum.pct_of_peak_sustained_elapsed"},
     0},
    {"warps_active_pct (DCGM SM_OCCUPANCY)",
     {"sm__warps_active.avg.pct_of_peak_sustained_elapsed",
      "sm__warps_active_realtime.avg.pct_of_peak_sustained_elapsed",
      "tpc__warps_active_realtime.avg.pct_of_peak_sustained_elapsed"},
     0},
    {"sm_clock_Hz", {"gpc__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second"}, 0},
    {"pcie_read_Bps", {"pcie__read_bytes.sum.per_second"}, 0},
    {"pcie_write_Bps", {"pcie__write_bytes.sum.per_second"}, 0},
    {"nvlink_rx_Bps", {"nvlrx__bytes.sum.per_second"}, 0},
    {"nvlink_tx_Bps", {"nvltx__bytes.sum.per_second"}, 0},
    {"sys_clock_Hz", {"sys__cycles_elapsed.avg.per_second"}, 0},
    {"hmma_active_pct",
     {"sm__pipe_tensor_op_hmma_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
      "TPC.TriageCompute.sm__pipe_tensor_op_hmma_cycles_active_realtime.avg.pct_of_peak_sustained_"
      "elapsed"},
     0},
    {"tensor_active_pct, non-realtime counter (compare)",
     {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"},
     0},
    /* extras, lower priority: raw per-sample sums (integrable) and other
     * units, to see how far one pass stretches */
    {"dram_read_bytes (raw sum)", {"dram__bytes_read.sum"}, 0},
    {"dram_write_bytes (raw sum)", {"dram__bytes_write.sum"}, 0},
    {"pcie_read_bytes (raw sum)", {"pcie__read_bytes.sum"}, 1},
    {"pcie_write_bytes (raw sum)", {"pcie__write_bytes.sum"}, 1},
    {"l2_bytes_Bps", {"lts__t_bytes.sum.per_second"}, 1},
    {"l2_throughput_pct", {"lts__throughput.avg.pct_of_peak_sustained_elapsed"}, 1},
    {"sm_throughput_pct", {"sm__throughput.avg.pct_of_peak_sustained_elapsed"}, 1},
    {"fp64_pipe_pct", {"sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed"}, 1},
    {"fma_pipe_pct", {"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed"}, 1},
    {"alu_pipe_pct", {"sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed"}, 1},
    {"inst_executed_pct", {"sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed"}, 1},
    {"shared_pipe_pct",
     {"sm__pipe_shared_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"},
     1},
    {"pcie_throughput_pct", {"pcie__throughput.avg.pct_of_peak_sustained_elapsed"}, 1},
};
#define NCANDS (sizeof CANDS / sizeof CANDS[0])
#define MAXM   64

/* ------------------------------------------------------------ PM state */
struct pm {
    int dev;
    char chip[64];
    uint8_t *avail;
    size_t avail_size;
    CUpti_Profiler_Host_Object *host;
    uint8_t *config;
    size_t config_size;
    size_t passes;
    CUpti_PmSampling_Object *obj;
    uint8_t *cdi, *cdi_blank;
    size_t cdi_size;
    const char *m[MAXM];
    const char *role[MAXM];
    int nm;
};

static void host_deinit(struct pm *p)
{
    if (!p->host)
        return;
    CUpti_Profiler_Host_Deinitialize_Params d = {
        .structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    d.pHostObject = p->host;
    cuptiProfilerHostDeinitialize(&d);
    p->host = NULL;
}

static CUptiResult host_init(struct pm *p, int quiet)
{
    host_deinit(p);
    CUpti_Profiler_Host_Initialize_Params ip = {
        .structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    ip.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    ip.pChipName = p->chip;
    ip.pCounterAvailabilityImage = p->avail;
    CUptiResult r =
        quiet ? cuptiProfilerHostInitialize(&ip)
              : CK("cuptiProfilerHostInitialize(PM_SAMPLING)", cuptiProfilerHostInitialize(&ip));
    if (r == CUPTI_SUCCESS)
        p->host = ip.pHostObject;
    return r;
}

/* Fresh host object, add metrics, build config image, count passes.
 * Returns the AddMetrics/GetConfig result; *passes = 0 on failure. */
static CUptiResult build_config(struct pm *p, const char **m, int n, size_t *passes, int quiet)
{
    *passes = 0;
    CUptiResult r = host_init(p, 1);
    if (r) {
        if (!quiet)
            logres("cuptiProfilerHostInitialize", r, now_ms());
        return r;
    }
    CUpti_Profiler_Host_ConfigAddMetrics_Params ap = {
        .structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    ap.pHostObject = p->host;
    ap.ppMetricNames = m;
    ap.numMetrics = (size_t)n;
    r = quiet ? cuptiProfilerHostConfigAddMetrics(&ap)
              : CK("cuptiProfilerHostConfigAddMetrics", cuptiProfilerHostConfigAddMetrics(&ap));
    if (r)
        return r;
    CUpti_Profiler_Host_GetConfigImageSize_Params sp = {
        .structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    sp.pHostObject = p->host;
    r = cuptiProfilerHostGetConfigImageSize(&sp);
    if (r) {
        logres("cuptiProfilerHostGetConfigImageSize", r, now_ms());
        return r;
    }
    free(p->config);
    p->config = calloc(1, sp.configImageSize);
    p->config_size = sp.configImageSize;
    CUpti_Profiler_Host_GetConfigImage_Params gp = {
        .structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    gp.pHostObject = p->host;
    gp.configImageSize = p->config_size;
    gp.pConfigImage = p->config;
    r = cuptiProfilerHostGetConfigImage(&gp);
    if (r) {
        logres("cuptiProfilerHostGetConfigImage", r, now_ms());
        return r;
    }
    CUpti_Profiler_Host_GetNumOfPasses_Params np = {
        .structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    np.configImageSize = p->config_size;
    np.pConfigImage = p->config;
    r = cuptiProfilerHostGetNumOfPasses(&np);
    if (r) {
        logres("cuptiProfilerHostGetNumOfPasses", r, now_ms());
        return r;
    }
    *passes = np.numOfPasses;
    return CUPTI_SUCCESS;
}

static void metric_props(struct pm *p, const char *name)
{
    CUpti_Profiler_Host_GetMetricProperties_Params pp = {
        .structSize = CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE};
    pp.pHostObject = p->host;
    pp.pMetricName = name;
    CUptiResult r = cuptiProfilerHostGetMetricProperties(&pp);
    if (r) {
        printf("PROP %s rc=%d %s\n", name, (int)r, cstr(r));
        return;
    }
    printf("PROP %s | type=%d hw=%s dim=%s | %s\n", name, (int)pp.metricType,
           pp.pHwUnit ? pp.pHwUnit : "", pp.pDimUnit ? pp.pDimUnit : "",
           pp.pDescription ? pp.pDescription : "");
}

/* Choose a one-pass set from CANDS (or from an explicit list). */
static int choose_metrics(struct pm *p, const char *explicit_list, int all_sets)
{
    const char *names[MAXM][MAXALT];
    const char *roles[MAXM];
    int nslots = 0;
    memset(names, 0, sizeof names);
    if (explicit_list && *explicit_list) {
        char *dup = strdup(explicit_list), *save = NULL;
        for (char *t = strtok_r(dup, ",", &save); t && nslots < MAXM;
             t = strtok_r(NULL, ",", &save)) {
            names[nslots][0] = t;
            roles[nslots] = "explicit";
            nslots++;
        }
    } else {
        for (size_t i = 0; i < NCANDS; i++) {
            if (CANDS[i].extra && !all_sets)
                continue;
            for (int a = 0; a < MAXALT; a++)
                names[nslots][a] = CANDS[i].alt[a];
            roles[nslots] = CANDS[i].role;
            nslots++;
        }
    }
    size_t passes;
    int valid[MAXM][MAXALT];
    memset(valid, 0, sizeof valid);
    /* 1. every alternative alone */
    for (int s = 0; s < nslots; s++) {
        for (int a = 0; a < MAXALT && names[s][a]; a++) {
            CUptiResult r = build_config(p, &names[s][a], 1, &passes, 1);
            valid[s][a] = r == CUPTI_SUCCESS && passes == 1;
            printf("ALONE %-82s rc=%d %s passes=%zu config_bytes=%zu\n", names[s][a], (int)r,
                   cstr(r), passes, r ? 0 : p->config_size);
            if (r == CUPTI_SUCCESS)
                metric_props(p, names[s][a]);
        }
    }
    /* 2. the first valid alternative of every slot, all together */
    const char *all[MAXM];
    int nall = 0;
    for (int s = 0; s < nslots; s++)
        for (int a = 0; a < MAXALT && names[s][a]; a++)
            if (valid[s][a]) {
                all[nall++] = names[s][a];
                break;
            }
    CUptiResult r = build_config(p, all, nall, &passes, 1);
    result("full_set n=%d rc=%d %s passes=%zu", nall, (int)r, cstr(r), passes);
    /* 3. remove one at a time from the full set */
    if (r != CUPTI_SUCCESS || passes != 1) {
        for (int i = 0; i < nall; i++) {
            const char *less[MAXM];
            int k = 0;
            for (int j = 0; j < nall; j++)
                if (j != i)
                    less[k++] = all[j];
            CUptiResult r2 = build_config(p, less, k, &passes, 1);
            printf("WITHOUT %-80s rc=%d passes=%zu\n", all[i], (int)r2, passes);
        }
    }
    /* 4. greedy in priority order, trying alternatives */
    p->nm = 0;
    for (int s = 0; s < nslots; s++) {
        int added = 0;
        for (int a = 0; a < MAXALT && names[s][a] && !added; a++) {
            if (!valid[s][a])
                continue;
            p->m[p->nm] = names[s][a];
            CUptiResult r3 = build_config(p, p->m, p->nm + 1, &passes, 1);
            if (r3 == CUPTI_SUCCESS && passes == 1) {
                p->role[p->nm] = roles[s];
                p->nm++;
                added = 1;
                printf("GREEDY add %-76s -> fits (set of %d)\n", names[s][a], p->nm);
            } else {
                printf("GREEDY add %-76s -> rc=%d passes=%zu: left out\n", names[s][a], (int)r3,
                       passes);
            }
        }
        if (!added)
            result("not_in_set slot=\"%s\"", roles[s]);
    }
    /* final config on p->host */
    r = build_config(p, p->m, p->nm, &passes, 0);
    p->passes = passes;
    result("chosen_set n=%d rc=%d passes=%zu config_bytes=%zu", p->nm, (int)r, passes,
           p->config_size);
    for (int i = 0; i < p->nm; i++)
        result("chosen_metric %d %s role=\"%s\"", i, p->m[i], p->role[i]);
    return r == CUPTI_SUCCESS && passes == 1 ? 0 : -1;
}

static void list_metrics(struct pm *p, const char *path)
{
    if (!p->host && host_init(p, 0))
        return;
    FILE *f = path ? fopen(path, "w") : NULL;
    const char *tn[] = {"counter", "ratio", "throughput"};
    size_t total = 0;
    for (int t = 0; t < 3; t++) {
        CUpti_Profiler_Host_GetBaseMetrics_Params bp = {
            .structSize = CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE};
        bp.pHostObject = p->host;
        bp.metricType = (CUpti_MetricType)t;
        CUptiResult r = CK("cuptiProfilerHostGetBaseMetrics", cuptiProfilerHostGetBaseMetrics(&bp));
        if (r)
            continue;
        result("base_metrics chip=%s type=%s count=%zu avail_image=%s", p->chip, tn[t],
               bp.numMetrics, p->avail ? "yes" : "no");
        total += bp.numMetrics;
        for (size_t i = 0; f && i < bp.numMetrics; i++)
            fprintf(f, "%s %s\n", tn[t], bp.ppMetricNames[i]);
    }
    /* sub-metrics of a few base metrics: shows the legal suffixes */
    const char *subs[] = {"sm__cycles_active", "dram__bytes_read",
                          "sm__pipe_tensor_cycles_active_realtime", "dram__throughput",
                          "gpc__cycles_elapsed"};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        for (int t = 0; t < 3; t++) {
            CUpti_Profiler_Host_GetSubMetrics_Params sp = {
                .structSize = CUpti_Profiler_Host_GetSubMetrics_Params_STRUCT_SIZE};
            sp.pHostObject = p->host;
            sp.metricType = (CUpti_MetricType)t;
            sp.pMetricName = subs[i];
            if (cuptiProfilerHostGetSubMetrics(&sp) != CUPTI_SUCCESS || !sp.numOfSubmetrics)
                continue;
            if (f) {
                fprintf(f, "# submetrics of %s (%s):", subs[i], tn[t]);
                for (size_t k = 0; k < sp.numOfSubmetrics; k++)
                    fprintf(f, " %s", sp.ppSubMetrics[k]);
                fputc('\n', f);
            }
            printf("SUBMETRICS %s (%s): %zu, e.g. %s\n", subs[i], tn[t], sp.numOfSubmetrics,
                   sp.numOfSubmetrics ? sp.ppSubMetrics[0] : "");
            break;
        }
    }
    if (f)
        fclose(f);
    result("base_metrics_total chip=%s %zu", p->chip, total);
}

static void host_common(const char *chip, uint8_t *avail)
{
    CUpti_Profiler_Host_GetSupportedChips_Params sc = {
        .structSize = CUpti_Profiler_Host_GetSupportedChips_Params_STRUCT_SIZE};
    if (CK("cuptiProfilerHostGetSupportedChips", cuptiProfilerHostGetSupportedChips(&sc)) ==
        CUPTI_SUCCESS) {
        printf("RESULT supported_chips n=%zu:", sc.numChips);
        for (size_t i = 0; i < sc.numChips; i++)
            printf(" %s", sc.ppChipNames[i]);
        printf("\n");
    }
    CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params mp = {
        .structSize = CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params_STRUCT_SIZE};
    mp.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    mp.pChipName = chip;
    mp.pCounterAvailabilityImage = avail;
    CUptiResult r = CK("cuptiProfilerHostGetMaxNumHardwareMetricsPerPass",
                       cuptiProfilerHostGetMaxNumHardwareMetricsPerPass(&mp));
    if (r == CUPTI_SUCCESS)
        result("max_hw_metrics_per_pass chip=%s pm_sampling=%zu", chip, mp.maxMetricsPerPass);
    mp.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    if (cuptiProfilerHostGetMaxNumHardwareMetricsPerPass(&mp) == CUPTI_SUCCESS)
        result("max_hw_metrics_per_pass chip=%s range_profiler=%zu", chip, mp.maxMetricsPerPass);
}

/* ------------------------------------------------------------- options */
struct opts {
    int dev;
    const char *chip;
    const char *list;
    const char *metrics;
    int all_sets;
    const char *ctx;
    int no_cuinit, no_profinit;
    size_t hwbuf;
    int ms;
    uint64_t interval_ns;
    int sysclk;
    int max_samples;
    int decode_ms, first_decode_ms;
    int keep_latest;
    int duration_ms;
    const char *stop_file, *ready, *csv, *phases;
};

static int parse(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof *o);
    o->chip = "GH100";
    o->ctx = "none";
    o->hwbuf = 64u << 20;
    o->ms = 1000;
    o->interval_ns = 10000000;
    o->decode_ms = 100;
    o->duration_ms = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (!strcmp(a, name) && v && (i++, 1))
        if (OPT("--dev"))
            o->dev = atoi(v);
        else if (OPT("--chip"))
            o->chip = v;
        else if (OPT("--list"))
            o->list = v;
        else if (OPT("--metrics"))
            o->metrics = v;
        else if (OPT("--set"))
            o->all_sets = !strcmp(v, "all");
        else if (OPT("--ctx"))
            o->ctx = v;
        else if (!strcmp(a, "--no-cuinit"))
            o->no_cuinit = 1;
        else if (!strcmp(a, "--no-profinit"))
            o->no_profinit = 1;
        else if (OPT("--hwbuf"))
            o->hwbuf = strtoull(v, NULL, 0);
        else if (OPT("--ms"))
            o->ms = atoi(v);
        else if (OPT("--interval-ns"))
            o->interval_ns = strtoull(v, NULL, 0);
        else if (OPT("--trigger"))
            o->sysclk = !strcmp(v, "sysclk");
        else if (OPT("--max-samples"))
            o->max_samples = atoi(v);
        else if (OPT("--decode-ms"))
            o->decode_ms = atoi(v);
        else if (OPT("--first-decode-ms"))
            o->first_decode_ms = atoi(v);
        else if (OPT("--append"))
            o->keep_latest = !strcmp(v, "latest");
        else if (OPT("--duration-ms"))
            o->duration_ms = atoi(v);
        else if (OPT("--stop-file"))
            o->stop_file = v;
        else if (OPT("--ready"))
            o->ready = v;
        else if (OPT("--csv"))
            o->csv = v;
        else if (OPT("--phases-from"))
            o->phases = v;
        else {
            fprintf(stderr, "pm-probe: unknown or incomplete option '%s'\n", a);
            return -1;
        }
#undef OPT
    }
    return 0;
}

/* ------------------------------------------------------------ clocks */
static void clock_triplet(const char *stage, uint64_t *rt, uint64_t *cts)
{
    uint64_t c = 0;
    uint64_t r0 = rt_ns();
    CUptiResult r = cuptiGetTimestamp(&c);
    uint64_t r1 = rt_ns();
    uint64_t m = mono_ns();
    if (rt)
        *rt = (r0 + r1) / 2;
    if (cts)
        *cts = c;
    printf("CLOCK %-18s realtime=%" PRIu64 " monotonic=%" PRIu64 " cuptiGetTimestamp=%" PRIu64
           " (rc=%d) cupti_minus_realtime_ns=%" PRId64 " cupti_minus_monotonic_ns=%" PRId64 "\n",
           stage, (r0 + r1) / 2, m, c, (int)r, (int64_t)(c - (r0 + r1) / 2), (int64_t)(c - m));
    fflush(stdout);
}

/* ------------------------------------------------------------ target */
static CUptiResult pm_enable(struct pm *p)
{
    if (!drv.h) {
        printf("INFO no CUDA driver: cuptiPmSamplingEnable skipped\n");
        return CUPTI_ERROR_NOT_INITIALIZED;
    }
    printf("TRY cuptiPmSamplingEnable deviceIndex=%d\n", p->dev);
    CUpti_PmSampling_Enable_Params ep = {.structSize = CUpti_PmSampling_Enable_Params_STRUCT_SIZE};
    ep.deviceIndex = (size_t)p->dev;
    CUptiResult r = CK("cuptiPmSamplingEnable", cuptiPmSamplingEnable(&ep));
    if (r == CUPTI_SUCCESS)
        p->obj = ep.pPmSamplingObject;
    return r;
}

static CUptiResult pm_setconfig(struct pm *p, const struct opts *o)
{
    CUpti_PmSampling_SetConfig_Params sp = {.structSize =
                                                CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE};
    sp.pPmSamplingObject = p->obj;
    sp.configSize = p->config_size;
    sp.pConfig = p->config;
    sp.hardwareBufferSize = o->hwbuf;
    sp.samplingInterval = o->interval_ns;
    sp.triggerMode = o->sysclk ? CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL
                               : CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
    sp.hwBufferAppendMode = o->keep_latest
                                ? CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST
                                : CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
    printf("INFO SetConfig hwbuf=%zu interval=%" PRIu64 " %s append=%s\n", o->hwbuf, o->interval_ns,
           o->sysclk ? "SYSCLK(cycles)" : "TIME(ns)",
           o->keep_latest ? "KEEP_LATEST" : "KEEP_OLDEST");
    return CK("cuptiPmSamplingSetConfig", cuptiPmSamplingSetConfig(&sp));
}

static CUptiResult pm_counter_image(struct pm *p, int max_samples)
{
    CUpti_PmSampling_GetCounterDataSize_Params gp = {
        .structSize = CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE};
    gp.pPmSamplingObject = p->obj;
    gp.pMetricNames = p->m;
    gp.numMetrics = (size_t)p->nm;
    gp.maxSamples = (uint32_t)max_samples;
    CUptiResult r = CK("cuptiPmSamplingGetCounterDataSize", cuptiPmSamplingGetCounterDataSize(&gp));
    if (r)
        return r;
    result("counter_data_image metrics=%d max_samples=%d bytes=%zu bytes_per_sample=%.0f", p->nm,
           max_samples, gp.counterDataSize, (double)gp.counterDataSize / max_samples);
    p->cdi_size = gp.counterDataSize;
    p->cdi = calloc(1, p->cdi_size);
    p->cdi_blank = calloc(1, p->cdi_size);
    CUpti_PmSampling_CounterDataImage_Initialize_Params ip = {
        .structSize = CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    ip.pPmSamplingObject = p->obj;
    ip.counterDataSize = p->cdi_size;
    ip.pCounterData = p->cdi;
    r = CK("cuptiPmSamplingCounterDataImageInitialize",
           cuptiPmSamplingCounterDataImageInitialize(&ip));
    if (r == CUPTI_SUCCESS)
        memcpy(p->cdi_blank, p->cdi, p->cdi_size);
    return r;
}

static CUptiResult pm_start(struct pm *p)
{
    CUpti_PmSampling_Start_Params sp = {.structSize = CUpti_PmSampling_Start_Params_STRUCT_SIZE};
    sp.pPmSamplingObject = p->obj;
    return CK("cuptiPmSamplingStart", cuptiPmSamplingStart(&sp));
}

static CUptiResult pm_stop(struct pm *p)
{
    CUpti_PmSampling_Stop_Params sp = {.structSize = CUpti_PmSampling_Stop_Params_STRUCT_SIZE};
    sp.pPmSamplingObject = p->obj;
    return CK("cuptiPmSamplingStop", cuptiPmSamplingStop(&sp));
}

static void pm_disable(struct pm *p)
{
    if (!p->obj)
        return;
    CUpti_PmSampling_Disable_Params dp = {.structSize =
                                              CUpti_PmSampling_Disable_Params_STRUCT_SIZE};
    dp.pPmSamplingObject = p->obj;
    CK("cuptiPmSamplingDisable", cuptiPmSamplingDisable(&dp));
    p->obj = NULL;
}

static void get_avail(struct pm *p)
{
    CUpti_PmSampling_GetCounterAvailability_Params ap = {
        .structSize = CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE};
    ap.deviceIndex = (size_t)p->dev;
    CUptiResult r = CK("cuptiPmSamplingGetCounterAvailability(size)",
                       cuptiPmSamplingGetCounterAvailability(&ap));
    if (r || !ap.counterAvailabilityImageSize) {
        printf("INFO going on without a counter availability image\n");
        return;
    }
    p->avail_size = ap.counterAvailabilityImageSize;
    p->avail = calloc(1, p->avail_size);
    ap.pCounterAvailabilityImage = p->avail;
    r = CK("cuptiPmSamplingGetCounterAvailability(data)",
           cuptiPmSamplingGetCounterAvailability(&ap));
    result("counter_availability_image bytes=%zu rc=%d", p->avail_size, (int)r);
    if (r) {
        free(p->avail);
        p->avail = NULL;
    }
}

static void get_chip(struct pm *p, const char *fallback)
{
    CUpti_Device_GetChipName_Params cp = {.structSize =
                                              CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    cp.deviceIndex = (size_t)p->dev;
    CUptiResult r = CK("cuptiDeviceGetChipName", cuptiDeviceGetChipName(&cp));
    if (r == CUPTI_SUCCESS && cp.pChipName) {
        snprintf(p->chip, sizeof p->chip, "%s", cp.pChipName);
        result("chip_name device_index=%d %s", p->dev, p->chip);
    } else {
        snprintf(p->chip, sizeof p->chip, "%s", fallback);
        printf("INFO chip name unknown, using %s\n", p->chip);
    }
}

static void device_supported(struct pm *p, int have_dev, CUdevice d)
{
    if (!have_dev) {
        printf("INFO cuptiProfilerDeviceSupported skipped: no CUdevice\n");
        return;
    }
    CUpti_Profiler_DeviceSupported_Params sp = {
        .structSize = CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
    sp.cuDevice = d;
    sp.api = CUPTI_PROFILER_PM_SAMPLING;
    CUptiResult r =
        CK("cuptiProfilerDeviceSupported(PM_SAMPLING)", cuptiProfilerDeviceSupported(&sp));
    if (r == CUPTI_SUCCESS)
        result("device_supported isSupported=%d arch=%d sli=%d vgpu=%d cc=%d cmp=%d wsl=%d "
               "(3=SUPPORTED)",
               sp.isSupported, sp.architecture, sp.sli, sp.vGpu, sp.confidentialCompute, sp.cmp,
               sp.wsl);
    (void)p;
}

/* ------------------------------------------------------------ decode */
struct sample {
    uint64_t s, e;
    double v[MAXM];
};
struct stats {
    size_t samples, decodes, decode_errors, overflow_flags, full_stops, eval_errors, gaps, zero_len;
    double decode_cpu_ms, eval_cpu_ms, decode_wall_ms_max;
    uint64_t first_s, last_e, prev_e, min_len, max_len;
    double sum_len;
    uint64_t max_gap;
    double lag_sum_ms, lag_max_ms; /* realtime at decode - end of newest sample */
    size_t lag_n;
    int last_rc;
    struct sample *keep;
    size_t nkeep, capkeep;
    struct sample last;
    FILE *csv;
    double expect_ns;
};

static void on_sample(struct pm *p, struct stats *st, const struct sample *s)
{
    uint64_t len = s->e > s->s ? s->e - s->s : 0;
    if (!len)
        st->zero_len++;
    if (!st->samples) {
        st->first_s = s->s;
        st->min_len = len;
    }
    if (len < st->min_len)
        st->min_len = len;
    if (len > st->max_len)
        st->max_len = len;
    st->sum_len += (double)len;
    if (st->samples && s->s > st->prev_e) {
        uint64_t gap = s->s - st->prev_e;
        if (gap > st->max_gap)
            st->max_gap = gap;
        if (st->expect_ns > 0 && (double)gap > 0.5 * st->expect_ns)
            st->gaps++;
    }
    st->prev_e = s->e;
    st->last_e = s->e;
    st->last = *s;
    st->samples++;
    if (st->csv) {
        fprintf(st->csv, "%" PRIu64 ",%" PRIu64, s->s, s->e);
        for (int i = 0; i < p->nm; i++)
            fprintf(st->csv, ",%.6g", s->v[i]);
        fputc('\n', st->csv);
    }
    if (st->capkeep) {
        if (st->nkeep == st->capkeep) {
            st->capkeep *= 2;
            st->keep = realloc(st->keep, st->capkeep * sizeof *st->keep);
        }
        st->keep[st->nkeep++] = *s;
    }
}

/* One decode round: decode, evaluate all completed samples, reset image.
 * Repeats while the counter data image was the limit.  Returns the
 * decode result of the last call. */
static CUptiResult decode_round(struct pm *p, struct stats *st, int verbose,
                                CUpti_PmSampling_DecodeStopReason *why)
{
    CUptiResult r;
    int loops = 0;
    do {
        double c0 = cpu_ms(), w0 = now_ms();
        CUpti_PmSampling_DecodeData_Params dp = {
            .structSize = CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE};
        dp.pPmSamplingObject = p->obj;
        dp.pCounterDataImage = p->cdi;
        dp.counterDataImageSize = p->cdi_size;
        r = cuptiPmSamplingDecodeData(&dp);
        double c1 = cpu_ms();
        st->decode_cpu_ms += c1 - c0;
        st->decodes++;
        if (why)
            *why = dp.decodeStopReason;
        if (r != CUPTI_SUCCESS || dp.overflow || verbose || (r != (CUptiResult)st->last_rc)) {
            printf("DECODE t_rt=%" PRIu64 " rc=%d %s stop_reason=%d overflow=%u\n", rt_ns(), (int)r,
                   cstr(r), (int)dp.decodeStopReason, (unsigned)dp.overflow);
            fflush(stdout);
        }
        st->last_rc = (int)r;
        if (r != CUPTI_SUCCESS)
            st->decode_errors++;
        if (dp.overflow)
            st->overflow_flags++;
        CUpti_PmSampling_GetCounterDataInfo_Params ip = {
            .structSize = CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE};
        ip.pCounterDataImage = p->cdi;
        ip.counterDataImageSize = p->cdi_size;
        CUptiResult ri = cuptiPmSamplingGetCounterDataInfo(&ip);
        if (ri) {
            logres("cuptiPmSamplingGetCounterDataInfo", ri, now_ms());
            break;
        }
        if (verbose)
            printf("INFO counter data: total=%zu populated=%zu completed=%zu\n", ip.numTotalSamples,
                   ip.numPopulatedSamples, ip.numCompletedSamples);
        for (size_t i = 0; i < ip.numCompletedSamples; i++) {
            struct sample s;
            memset(&s, 0, sizeof s);
            CUpti_PmSampling_CounterData_GetSampleInfo_Params gp = {
                .structSize = CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE};
            gp.pPmSamplingObject = p->obj;
            gp.pCounterDataImage = p->cdi;
            gp.counterDataImageSize = p->cdi_size;
            gp.sampleIndex = i;
            CUptiResult rs = cuptiPmSamplingCounterDataGetSampleInfo(&gp);
            CUpti_Profiler_Host_EvaluateToGpuValues_Params ep = {
                .structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
            ep.pHostObject = p->host;
            ep.pCounterDataImage = p->cdi;
            ep.counterDataImageSize = p->cdi_size;
            ep.rangeIndex = i;
            ep.ppMetricNames = p->m;
            ep.numMetrics = (size_t)p->nm;
            ep.pMetricValues = s.v;
            CUptiResult re = cuptiProfilerHostEvaluateToGpuValues(&ep);
            if (rs || re) {
                if (st->eval_errors++ < 5)
                    printf("EVAL sample %zu getSampleInfo rc=%d %s evaluate rc=%d %s\n", i, (int)rs,
                           cstr(rs), (int)re, cstr(re));
                continue;
            }
            s.s = gp.startTimestamp;
            s.e = gp.endTimestamp;
            on_sample(p, st, &s);
        }
        if (ip.numCompletedSamples && st->samples) {
            double lag = ((double)rt_ns() - (double)st->last_e) / 1e6;
            if (fabs(lag) < 60000.0) {
                st->lag_sum_ms += lag;
                st->lag_n++;
                if (lag > st->lag_max_ms)
                    st->lag_max_ms = lag;
            }
        }
        /* reset the image: a copy of the freshly initialized one (as XLA
         * does); the API equivalent is CounterDataImageInitialize again */
        memcpy(p->cdi, p->cdi_blank, p->cdi_size);
        st->eval_cpu_ms += cpu_ms() - c1;
        double w = now_ms() - w0;
        if (w > st->decode_wall_ms_max)
            st->decode_wall_ms_max = w;
        if (r == CUPTI_SUCCESS &&
            dp.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL)
            st->full_stops++;
        if (r != CUPTI_SUCCESS ||
            dp.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL)
            break;
    } while (++loops < 1000);
    return r;
}

static void stats_report(const char *tag, struct pm *p, struct stats *st, uint64_t rt_start,
                         uint64_t cts_start, uint64_t rt_stop, uint64_t cts_stop, double wall_ms)
{
    result("%s samples=%zu decodes=%zu decode_errors=%zu overflow_flags=%zu counter_full_stops=%zu "
           "eval_errors=%zu",
           tag, st->samples, st->decodes, st->decode_errors, st->overflow_flags, st->full_stops,
           st->eval_errors);
    if (st->samples) {
        result("%s sample_len_ns min=%" PRIu64 " mean=%.0f max=%" PRIu64
               " zero_len=%zu gaps_over_half_interval=%zu max_gap_ns=%" PRIu64,
               tag, st->min_len, st->sum_len / (double)st->samples, st->max_len, st->zero_len,
               st->gaps, st->max_gap);
        result("%s samples_per_s=%.1f over wall %.0f ms (expected %.1f)", tag,
               st->samples / (wall_ms / 1000.0), wall_ms,
               st->expect_ns > 0 ? 1e9 / st->expect_ns : 0.0);
        result("%s ts first_sample_start=%" PRIu64 " last_sample_end=%" PRIu64, tag, st->first_s,
               st->last_e);
        result("%s ts first_start_minus_realtime_at_Start_ns=%" PRId64
               " first_start_minus_cuptiTs_at_Start_ns=%" PRId64,
               tag, (int64_t)(st->first_s - rt_start), (int64_t)(st->first_s - cts_start));
        result("%s ts last_end_minus_realtime_at_Stop_ns=%" PRId64
               " last_end_minus_cuptiTs_at_Stop_ns=%" PRId64,
               tag, (int64_t)(st->last_e - rt_stop), (int64_t)(st->last_e - cts_stop));
    }
    for (int i = 0; st->samples && i < p->nm; i++)
        result("%s last_sample %-90s %.6g", tag, p->m[i], st->last.v[i]);
    if (st->lag_n)
        result("%s decode_lag_ms (realtime at decode - end of newest sample, if ts are realtime) "
               "mean=%.1f max=%.1f n=%zu",
               tag, st->lag_sum_ms / st->lag_n, st->lag_max_ms, st->lag_n);
    result("%s decode_cpu_ms=%.1f eval_cpu_ms=%.1f per_sample_eval_us=%.2f "
           "decode_round_wall_ms_max=%.1f",
           tag, st->decode_cpu_ms, st->eval_cpu_ms,
           st->samples ? st->eval_cpu_ms * 1000.0 / st->samples : 0.0, st->decode_wall_ms_max);
}

/* --------------------------------------------- per-phase aggregation */
struct phase {
    char name[32];
    uint64_t s, e;
};
static void phases_report(struct pm *p, struct stats *st, const char *path, uint64_t rt_start)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("INFO phases file %s: %s\n", path, strerror(errno));
        return;
    }
    struct phase ph[16];
    int np = 0;
    long long gt_minus_rt = 0;
    int have_gt = 0;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *q;
        if (!strncmp(line, "PMLOAD phase ", 13) && np < 16) {
            struct phase x;
            memset(&x, 0, sizeof x);
            if ((q = strstr(line, "name=")))
                sscanf(q + 5, "%31s", x.name);
            if ((q = strstr(line, "start_rt=")))
                x.s = strtoull(q + 9, NULL, 10);
            if ((q = strstr(line, "end_rt=")))
                x.e = strtoull(q + 7, NULL, 10);
            if (x.s && x.e)
                ph[np++] = x;
        } else if (!strncmp(line, "PMLOAD clock ", 13) && (q = strstr(line, "gt_minus_rt="))) {
            gt_minus_rt = strtoll(q + 12, NULL, 10);
            have_gt = 1;
        }
    }
    fclose(f);
    if (!np || !st->nkeep) {
        printf("INFO no phases (%d) or no samples (%zu) to match\n", np, st->nkeep);
        return;
    }
    /* Which clock are the sample timestamps on?  If the first sample is
     * within 60 s of CLOCK_REALTIME at Start, take them as realtime; else
     * assume GPU globaltimer and shift by pm-load's measured offset. */
    int64_t d = (int64_t)(st->keep[0].s - rt_start);
    int64_t shift = 0;
    const char *how = "sample ts taken as CLOCK_REALTIME";
    if (llabs(d) > 60000000000LL) {
        if (have_gt) {
            shift = -gt_minus_rt;
            how = "sample ts shifted by -(globaltimer - realtime) from pm-load";
        } else {
            how = "sample ts far from realtime and no globaltimer offset: matching will be wrong";
        }
    }
    result("phase_match %s (first_start - realtime_at_Start = %" PRId64
           " ns, globaltimer-realtime=%lld)",
           how, d, gt_minus_rt);
    printf("RESULT phase_means %-8s %6s", "phase", "n");
    for (int i = 0; i < p->nm; i++)
        printf(" m%d", i);
    printf("\n");
    for (int k = -1; k < np; k++) {
        double sum[MAXM] = {0};
        size_t n = 0;
        for (size_t i = 0; i < st->nkeep; i++) {
            uint64_t mid = (st->keep[i].s + st->keep[i].e) / 2 + (uint64_t)shift;
            int in = -1;
            for (int j = 0; j < np; j++)
                if (mid >= ph[j].s && mid <= ph[j].e)
                    in = j;
            if (in != k)
                continue;
            n++;
            for (int m = 0; m < p->nm; m++)
                sum[m] += st->keep[i].v[m];
        }
        printf("RESULT phase_means %-8s %6zu", k < 0 ? "idle" : ph[k].name, n);
        for (int m = 0; m < p->nm; m++)
            printf(" %.4g", n ? sum[m] / (double)n : NAN);
        printf("\n");
    }
    for (int m = 0; m < p->nm; m++)
        printf("RESULT phase_means m%d = %s\n", m, p->m[m]);
    fflush(stdout);
}

/* ------------------------------------------------------------ commands */
static int cmd_host(struct opts *o)
{
    struct pm p;
    memset(&p, 0, sizeof p);
    snprintf(p.chip, sizeof p.chip, "%s", o->chip);
    uint32_t v = 0;
    CK("cuptiGetVersion", cuptiGetVersion(&v));
    result("cupti_api_version %u (header CUPTI_API_VERSION %d)", v, CUPTI_API_VERSION);
    host_common(p.chip, NULL);
    if (host_init(&p, 0) == CUPTI_SUCCESS)
        list_metrics(&p, o->list);
    int rc = choose_metrics(&p, o->metrics, o->all_sets);
    host_deinit(&p);
    return rc ? 1 : 0;
}

struct bringup {
    int have_dev;
    CUdevice cudev;
    CUcontext ctx;
    int ctx_kind; /* 0 none, 1 primary, 2 created */
    int no_driver;
};

static void bring_up(struct pm *p, struct opts *o, struct bringup *b)
{
    memset(b, 0, sizeof *b);
    char bus[32] = "";
    printf("INFO pid=%d uid=%d CUDA_VISIBLE_DEVICES=%s\n", (int)getpid(), (int)getuid(),
           getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "(unset)");
    if (drv_load() == 0) {
        int dv = 0;
        if (drv.DriverGetVersion && drv.DriverGetVersion(&dv) == CUDA_SUCCESS)
            result("driver_cuda_version %d", dv);
        if (!o->no_cuinit) {
            CU("cuInit(0)", drv.Init(0));
            int n = -1;
            CU("cuDeviceGetCount", drv.DeviceGetCount(&n));
            result("cuda_device_count %d", n);
            if (CU("cuDeviceGet", drv.DeviceGet(&b->cudev, o->dev)) == CUDA_SUCCESS) {
                b->have_dev = 1;
                char name[128] = "";
                drv.DeviceGetName(name, sizeof name, b->cudev);
                drv.DeviceGetPCIBusId(bus, sizeof bus, b->cudev);
                result("cuda_device ordinal=%d name=\"%s\" pci=%s", o->dev, name, bus);
            }
        } else {
            printf("INFO --no-cuinit: cuInit is NOT called by the probe\n");
        }
    }
    nvml_open(bus, o->dev);
    mem_report("start", b->have_dev, b->cudev);
    if (b->have_dev && !strcmp(o->ctx, "primary")) {
        CU("cuDevicePrimaryCtxRetain", drv.DevicePrimaryCtxRetain(&b->ctx, b->cudev));
        b->ctx_kind = 1;
        mem_report("after-primary-retain", b->have_dev, b->cudev);
    } else if (b->have_dev && !strcmp(o->ctx, "create")) {
        CUresult r;
        if (drv.CtxCreate_v2)
            r = CU("cuCtxCreate_v2", drv.CtxCreate_v2(&b->ctx, 0, b->cudev));
        else
            r = CU("cuCtxCreate_v4", drv.CtxCreate_v4(&b->ctx, NULL, 0, b->cudev));
        if (r == CUDA_SUCCESS)
            b->ctx_kind = 2;
        mem_report("after-ctx-create", b->have_dev, b->cudev);
    }
    if (!o->no_profinit) {
        CUpti_Profiler_Initialize_Params ip = {.structSize =
                                                   CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
        CK("cuptiProfilerInitialize", cuptiProfilerInitialize(&ip));
    } else {
        printf("INFO --no-profinit: cuptiProfilerInitialize is NOT called\n");
    }
    mem_report("after-profiler-init", b->have_dev, b->cudev);
    p->dev = o->dev;
    if (!drv.h) {
        /* CUPTI 13.0.1 crashes (SIGSEGV) in cuptiDeviceGetChipName when
         * libcuda.so.1 cannot be loaded, instead of returning an error */
        printf("INFO no CUDA driver: target-side calls skipped\n");
        snprintf(p->chip, sizeof p->chip, "%s", o->chip);
        b->no_driver = 1;
        return;
    }
    /* TRY lines come before calls that might not return (crash/hang) */
    printf("TRY cuptiDeviceGetChipName deviceIndex=%d\n", p->dev);
    get_chip(p, o->chip);
    printf("TRY cuptiProfilerDeviceSupported\n");
    device_supported(p, b->have_dev, b->cudev);
    printf("TRY cuptiPmSamplingGetCounterAvailability\n");
    get_avail(p);
    mem_report("after-chip+availability", b->have_dev, b->cudev);
}

static void tear_down(struct pm *p, struct bringup *b)
{
    pm_disable(p);
    host_deinit(p);
    mem_report("after-disable", b->have_dev, b->cudev);
    CUpti_Profiler_DeInitialize_Params dp = {.structSize =
                                                 CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
    CK("cuptiProfilerDeInitialize", cuptiProfilerDeInitialize(&dp));
    if (b->ctx_kind == 1)
        CU("cuDevicePrimaryCtxRelease", drv.DevicePrimaryCtxRelease(b->cudev));
    else if (b->ctx_kind == 2)
        CU("cuCtxDestroy", drv.CtxDestroy(b->ctx));
    mem_report("end", b->have_dev, b->cudev);
}

static int cmd_device(struct opts *o)
{
    struct pm p;
    struct bringup b;
    memset(&p, 0, sizeof p);
    double t_all = now_ms();
    bring_up(&p, o, &b);
    host_common(p.chip, p.avail);
    if (o->list)
        list_metrics(&p, o->list);
    if (choose_metrics(&p, o->metrics, o->all_sets))
        printf("INFO no one-pass metric set; going on with what was built\n");
    if (pm_enable(&p) != CUPTI_SUCCESS) {
        tear_down(&p, &b);
        return 1;
    }
    mem_report("after-enable", b.have_dev, b.cudev);
    o->interval_ns = o->interval_ns ? o->interval_ns : 1000000;
    CUptiResult r = pm_setconfig(&p, o);
    mem_report("after-setconfig", b.have_dev, b.cudev);
    int maxs = 4096;
    if (r == CUPTI_SUCCESS)
        r = pm_counter_image(&p, maxs);
    uint64_t rt0 = 0, c0 = 0, rt1 = 0, c1 = 0;
    if (r == CUPTI_SUCCESS) {
        clock_triplet("before-start", &rt0, &c0);
        r = pm_start(&p);
        mem_report("after-start", b.have_dev, b.cudev);
        smi_apps("while-sampling");
    }
    result("bringup_to_start_ms %.1f", now_ms() - t_all);
    struct stats st;
    memset(&st, 0, sizeof st);
    st.expect_ns = (double)o->interval_ns;
    if (r == CUPTI_SUCCESS) {
        double t0 = now_ms();
        while (now_ms() - t0 < o->ms) {
            usleep(100000);
            decode_round(&p, &st, 0, NULL);
        }
        clock_triplet("before-stop", &rt1, &c1);
        pm_stop(&p);
        CUpti_PmSampling_DecodeStopReason why = CUPTI_PM_SAMPLING_DECODE_STOP_REASON_OTHER;
        for (int i = 0; i < 5; i++) {
            decode_round(&p, &st, 1, &why);
            if (why == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS)
                break;
        }
        stats_report("device", &p, &st, rt0, c0, rt1, c1, now_ms() - t0);
        clock_triplet("end", NULL, NULL);
    }
    tear_down(&p, &b);
    result("device_total_ms %.1f", now_ms() - t_all);
    return r == CUPTI_SUCCESS ? 0 : 1;
}

static int cmd_sample(struct opts *o)
{
    struct pm p;
    struct bringup b;
    memset(&p, 0, sizeof p);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    double t_all = now_ms();
    bring_up(&p, o, &b);
    int rc = 1;
    if (choose_metrics(&p, o->metrics, o->all_sets))
        printf("INFO no one-pass metric set; going on with what was built\n");
    CUptiResult r = pm_enable(&p);
    if (r == CUPTI_SUCCESS)
        r = pm_setconfig(&p, o);
    int maxs = o->max_samples;
    if (!maxs) {
        /* enough for one decode period at 3x margin (sysclk: assume ~1 GHz) */
        double per = o->sysclk ? (double)o->interval_ns : (double)o->interval_ns;
        maxs = (int)(3.0 * o->decode_ms * 1e6 / (per > 0 ? per : 1e6)) + 64;
        if (o->first_decode_ms > o->decode_ms)
            maxs = (int)(3.0 * o->first_decode_ms * 1e6 / (per > 0 ? per : 1e6)) + 64;
        if (maxs > 200000)
            maxs = 200000;
    }
    if (r == CUPTI_SUCCESS)
        r = pm_counter_image(&p, maxs);
    uint64_t rt0 = 0, c0 = 0, rt1 = 0, c1 = 0;
    if (r == CUPTI_SUCCESS) {
        clock_triplet("before-start", &rt0, &c0);
        r = pm_start(&p);
    }
    result("bringup_to_start_ms %.1f", now_ms() - t_all);
    write_file(o->ready, r == CUPTI_SUCCESS ? "ok\n" : "fail\n");
    struct stats st;
    memset(&st, 0, sizeof st);
    st.expect_ns = o->sysclk ? 0 : (double)o->interval_ns;
    if (o->csv) {
        st.csv = fopen(o->csv, "w");
        if (st.csv) {
            /* timestamps exactly as cuptiPmSamplingCounterDataGetSampleInfo
             * returns them; the summary says which clock they are on */
            fprintf(st.csv, "start_ts,end_ts");
            for (int i = 0; i < p.nm; i++)
                fprintf(st.csv, ",%s", p.m[i]);
            fputc('\n', st.csv);
        }
    }
    if (o->phases) {
        st.capkeep = 4096;
        st.keep = malloc(st.capkeep * sizeof *st.keep);
    }
    if (r == CUPTI_SUCCESS) {
        double t0 = now_ms();
        struct rusage ru0, ru1;
        getrusage(RUSAGE_SELF, &ru0);
        double next = t0 + (o->first_decode_ms ? o->first_decode_ms : o->decode_ms);
        while (!g_stop) {
            if (o->duration_ms && now_ms() - t0 >= o->duration_ms)
                break;
            if (o->stop_file && file_exists(o->stop_file))
                break;
            double wait = next - now_ms();
            if (wait > 0) {
                usleep((useconds_t)(wait > 10 ? 10000 : wait * 1000));
                continue;
            }
            decode_round(&p, &st, 0, NULL);
            next += o->decode_ms;
            if (next < now_ms())
                next = now_ms() + o->decode_ms;
        }
        double wall = now_ms() - t0;
        clock_triplet("before-stop", &rt1, &c1);
        pm_stop(&p);
        CUpti_PmSampling_DecodeStopReason why = CUPTI_PM_SAMPLING_DECODE_STOP_REASON_OTHER;
        for (int i = 0; i < 20; i++) {
            decode_round(&p, &st, 1, &why);
            if (why == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS || st.last_rc)
                break;
        }
        getrusage(RUSAGE_SELF, &ru1);
        double ucpu = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) * 1e3 +
                      (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e3;
        double scpu = (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1e3 +
                      (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e3;
        stats_report("sample", &p, &st, rt0, c0, rt1, c1, wall);
        result("sample process_cpu_ms user=%.1f sys=%.1f over %.0f ms wall (%.2f%% of one core)",
               ucpu, scpu, wall, 100.0 * (ucpu + scpu) / wall);
        if (o->sysclk && st.samples)
            result("sysclk_mode interval_cycles=%" PRIu64
                   " mean_sample_ns=%.0f => implied_sysclk_MHz=%.1f",
                   o->interval_ns, st.sum_len / st.samples,
                   (double)o->interval_ns / (st.sum_len / st.samples) * 1e3);
        if (o->phases)
            phases_report(&p, &st, o->phases, rt0);
        rc = st.decode_errors ? 2 : 0;
    }
    if (st.csv)
        fclose(st.csv);
    tear_down(&p, &b);
    return rc;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr,
                "usage: pm-probe host|device|sample [options]   (see the head of pm-probe.c)\n");
        return 2;
    }
    struct opts o;
    if (parse(argc, argv, &o))
        return 2;
    printf("INFO pm-probe %s start realtime=%" PRIu64 "\n", argv[1], rt_ns());
    if (!strcmp(argv[1], "host"))
        return cmd_host(&o);
    if (!strcmp(argv[1], "device"))
        return cmd_device(&o);
    if (!strcmp(argv[1], "sample"))
        return cmd_sample(&o);
    fprintf(stderr, "pm-probe: unknown command %s\n", argv[1]);
    return 2;
}
