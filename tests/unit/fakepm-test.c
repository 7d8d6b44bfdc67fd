/*
 * Unit test of the PM sampling double (tests/fakecupti/fakepm.c, libpm-fake.so) against
 * the facts it models (fakepm.h): the exports daemon/gpm-cupti.h needs, the CUDA driver
 * calls, call order, struct sizes, the host API (metrics, NVLink availability, passes),
 * sample times (the first sample's early start, the interval, on a stepped clock and on
 * the real one), counter data full, hardware buffer overflow in both append modes, the
 * scripted phases' values, busy devices (a file, another process), privileges.
 *
 * The clock is the double's virtual one (FAKEPM_CLOCK), stepped by the tests, except in
 * the one test of the real clock.  Every test starts from fakepm_reset(), so the suite
 * also runs with CK_FORK=no (as under valgrind).
 */
#include "config.h"

#include <cuda.h>
#include <cupti_activity.h>
#include <cupti_result.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include "fakepm.h"
#include "daemon/gpm-cupti.h"
#include "tests/unit/testlib.h"

#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#undef cuDeviceGetUuid
CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);

#define MS     UINT64_C(1000000)
#define SEC    UINT64_C(1000000000)
#define T0     UINT64_C(1700000000000000000) /* the virtual clock's start */
#define LEAD   (800 * MS)                    /* FAKEPM_FIRST_SAMPLE_LEAD_NS's default */
#define HWBYTE 1024                          /* FAKEPM_HW_SAMPLE_BYTES's default */

#define PE         ".avg.pct_of_peak_sustained_elapsed"
#define M_SM       "sm__cycles_active" PE
#define M_WARPS    "sm__warps_active" PE
#define M_TENSOR   "sm__pipe_tensor_cycles_active" PE
#define M_TENSOR_R "sm__pipe_tensor_cycles_active_realtime" PE
#define M_DRAM     "dram__throughput" PE
#define M_DRAM_RD  "dram__bytes_read.sum.per_second"
#define M_DRAM_WR  "dram__bytes_write.sum.per_second"
#define M_GR       "gr__cycles_active" PE
#define M_PCIE_RD  "pcie__read_bytes.sum.per_second"
#define M_PCIE_WR  "pcie__write_bytes.sum.per_second"
#define M_NVLRX    "nvlrx__bytes.sum.per_second"
#define M_NVLTX    "nvltx__bytes.sum.per_second"
#define M_GPC_HZ   "gpc__cycles_elapsed.avg.per_second"
#define M_SYS_HZ   "sys__cycles_elapsed.avg.per_second"

/* The brief's metrics that a single-GPU H200 has (not the NVLink two). */
static const char *core[] = {M_SM,      M_WARPS, M_TENSOR,  M_TENSOR_R, M_DRAM,   M_DRAM_RD,
                             M_DRAM_WR, M_GR,    M_PCIE_RD, M_PCIE_WR,  M_GPC_HZ, M_SYS_HZ};
#define NCORE (sizeof core / sizeof core[0])

static const char *knobs[] = {
    "FAKEPM_CLOCK",
    "FAKEPM_DEVICES",
    "FAKEPM_CUINIT_RESULT",
    "FAKEPM_CHIP",
    "FAKEPM_DEVICE_NAME",
    "FAKEPM_DRIVER_VERSION",
    "FAKEPM_NVLINK",
    "FAKEPM_METRICS_PER_PASS",
    "FAKEPM_FIRST_SAMPLE_LEAD_NS",
    "FAKEPM_HW_SAMPLE_BYTES",
    "FAKEPM_SYSCLK_HZ",
    "FAKEPM_OVERFLOW_RESULT",
    "FAKEPM_LOG",
    "FAKEPM_PHASES",
    "FAKEPM_PHASES_FILE",
    "FAKEPM_BUSY_FILE",
    "FAKEPM_DIR",
    "FAKEPM_ADMIN_ONLY",
};

static char tmpdir[64];

static void touch(const char *path, const char *text);

static void clock_set(uint64_t ns)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)ns);
    setenv("FAKEPM_CLOCK", buf, 1);
}

static void setup(void)
{
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++)
        unsetenv(knobs[i]);
    fakepm_reset();
    clock_set(T0);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/fakepm-test.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[128];
    fakepm_reset();
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
}

/* ------------------------------------------------------------------ a client */

static void init_all(void)
{
    CUpti_Profiler_Initialize_Params p = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(cuptiProfilerInitialize(&p), CUPTI_SUCCESS);
}

static CUptiResult avail(size_t dev, uint8_t **img)
{
    CUpti_PmSampling_GetCounterAvailability_Params p = {
        CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE};
    CUptiResult r;
    p.deviceIndex = dev;
    if ((r = cuptiPmSamplingGetCounterAvailability(&p)) != CUPTI_SUCCESS)
        return r;
    ck_assert_uint_gt(p.counterAvailabilityImageSize, 0);
    p.pCounterAvailabilityImage = calloc(1, p.counterAvailabilityImageSize);
    r = cuptiPmSamplingGetCounterAvailability(&p);
    if (img && r == CUPTI_SUCCESS)
        *img = p.pCounterAvailabilityImage;
    else
        free(p.pCounterAvailabilityImage);
    return r;
}

static CUpti_Profiler_Host_Object *host_new(const char *chip, const uint8_t *av)
{
    CUpti_Profiler_Host_Initialize_Params p = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    p.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    p.pChipName = chip;
    p.pCounterAvailabilityImage = av;
    ck_assert_int_eq(cuptiProfilerHostInitialize(&p), CUPTI_SUCCESS);
    return p.pHostObject;
}

static void host_free(CUpti_Profiler_Host_Object *h)
{
    CUpti_Profiler_Host_Deinitialize_Params p = {
        CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    p.pHostObject = h;
    ck_assert_int_eq(cuptiProfilerHostDeinitialize(&p), CUPTI_SUCCESS);
}

static CUptiResult add(CUpti_Profiler_Host_Object *h, const char **names, size_t n)
{
    CUpti_Profiler_Host_ConfigAddMetrics_Params p = {
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    p.pHostObject = h;
    p.ppMetricNames = names;
    p.numMetrics = n;
    return cuptiProfilerHostConfigAddMetrics(&p);
}

static uint8_t *config_of(CUpti_Profiler_Host_Object *h, size_t *size)
{
    CUpti_Profiler_Host_GetConfigImageSize_Params s = {
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    CUpti_Profiler_Host_GetConfigImage_Params c = {
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    s.pHostObject = h;
    ck_assert_int_eq(cuptiProfilerHostGetConfigImageSize(&s), CUPTI_SUCCESS);
    c.pHostObject = h;
    c.configImageSize = s.configImageSize;
    c.pConfigImage = malloc(s.configImageSize);
    ck_assert_int_eq(cuptiProfilerHostGetConfigImage(&c), CUPTI_SUCCESS);
    *size = s.configImageSize;
    return c.pConfigImage;
}

/* A config image of these metrics, made offline. */
static uint8_t *config(const char **names, size_t n, size_t *size)
{
    CUpti_Profiler_Host_Object *h = host_new("GH100", NULL);
    uint8_t *img;
    ck_assert_int_eq(add(h, names, n), CUPTI_SUCCESS);
    img = config_of(h, size);
    host_free(h);
    return img;
}

static size_t passes(const uint8_t *img, size_t size)
{
    CUpti_Profiler_Host_GetNumOfPasses_Params p = {
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    p.configImageSize = size;
    p.pConfigImage = (uint8_t *)img;
    ck_assert_int_eq(cuptiProfilerHostGetNumOfPasses(&p), CUPTI_SUCCESS);
    return p.numOfPasses;
}

static CUptiResult enable(size_t dev, CUpti_PmSampling_Object **o)
{
    CUpti_PmSampling_Enable_Params p = {CUpti_PmSampling_Enable_Params_STRUCT_SIZE};
    CUptiResult r;
    p.deviceIndex = dev;
    r = cuptiPmSamplingEnable(&p);
    if (r == CUPTI_SUCCESS)
        *o = p.pPmSamplingObject;
    return r;
}

static CUptiResult start(CUpti_PmSampling_Object *o)
{
    CUpti_PmSampling_Start_Params p = {CUpti_PmSampling_Start_Params_STRUCT_SIZE};
    p.pPmSamplingObject = o;
    return cuptiPmSamplingStart(&p);
}

static CUptiResult stop(CUpti_PmSampling_Object *o)
{
    CUpti_PmSampling_Stop_Params p = {CUpti_PmSampling_Stop_Params_STRUCT_SIZE};
    p.pPmSamplingObject = o;
    return cuptiPmSamplingStop(&p);
}

static CUptiResult disable(CUpti_PmSampling_Object *o)
{
    CUpti_PmSampling_Disable_Params p = {CUpti_PmSampling_Disable_Params_STRUCT_SIZE};
    p.pPmSamplingObject = o;
    return cuptiPmSamplingDisable(&p);
}

static CUptiResult set_config(CUpti_PmSampling_Object *o, const uint8_t *img, size_t size,
                              size_t hwbuf, uint64_t interval, int trigger, int append)
{
    CUpti_PmSampling_SetConfig_Params p = {CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE};
    p.pPmSamplingObject = o;
    p.configSize = size;
    p.pConfig = img;
    p.hardwareBufferSize = hwbuf;
    p.samplingInterval = interval;
    p.triggerMode = (CUpti_PmSampling_TriggerMode)trigger;
    p.hwBufferAppendMode = (CUpti_PmSampling_HardwareBuffer_AppendMode)append;
    return cuptiPmSamplingSetConfig(&p);
}

#define TIME   CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL
#define OLDEST CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST
#define LATEST CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST

struct cd {
    uint8_t *img;
    size_t size;
};

static struct cd cd_new(CUpti_PmSampling_Object *o, const char **names, size_t n, uint32_t max)
{
    CUpti_PmSampling_GetCounterDataSize_Params s = {
        CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE};
    struct cd cd;
    s.pPmSamplingObject = o;
    s.pMetricNames = names;
    s.numMetrics = n;
    s.maxSamples = max;
    ck_assert_int_eq(cuptiPmSamplingGetCounterDataSize(&s), CUPTI_SUCCESS);
    cd.size = s.counterDataSize;
    cd.img = malloc(cd.size);
    return cd;
}

static CUptiResult cd_init(CUpti_PmSampling_Object *o, struct cd *cd)
{
    CUpti_PmSampling_CounterDataImage_Initialize_Params p = {
        CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    p.pPmSamplingObject = o;
    p.counterDataSize = cd->size;
    p.pCounterData = cd->img;
    return cuptiPmSamplingCounterDataImageInitialize(&p);
}

static CUptiResult decode(CUpti_PmSampling_Object *o, struct cd *cd, int *reason, int *overflow)
{
    CUpti_PmSampling_DecodeData_Params p = {CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE};
    CUptiResult r;
    p.pPmSamplingObject = o;
    p.pCounterDataImage = cd->img;
    p.counterDataImageSize = cd->size;
    p.decodeStopReason = (CUpti_PmSampling_DecodeStopReason)-1;
    p.overflow = 7;
    r = cuptiPmSamplingDecodeData(&p);
    if (reason)
        *reason = (int)p.decodeStopReason;
    if (overflow)
        *overflow = p.overflow;
    return r;
}

#define FULL CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL
#define EOR  CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS

static void info(const struct cd *cd, size_t *total, size_t *populated, size_t *completed)
{
    CUpti_PmSampling_GetCounterDataInfo_Params p = {
        CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE};
    p.pCounterDataImage = cd->img;
    p.counterDataImageSize = cd->size;
    ck_assert_int_eq(cuptiPmSamplingGetCounterDataInfo(&p), CUPTI_SUCCESS);
    if (total)
        *total = p.numTotalSamples;
    *populated = p.numPopulatedSamples;
    *completed = p.numCompletedSamples;
    ck_assert_uint_eq(p.numPopulatedSamples, p.numCompletedSamples);
}

static size_t count(const struct cd *cd)
{
    size_t pop, comp;
    info(cd, NULL, &pop, &comp);
    return comp;
}

static void sample(CUpti_PmSampling_Object *o, const struct cd *cd, size_t i, uint64_t *start,
                   uint64_t *end)
{
    CUpti_PmSampling_CounterData_GetSampleInfo_Params p = {
        CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE};
    p.pPmSamplingObject = o;
    p.pCounterDataImage = cd->img;
    p.counterDataImageSize = cd->size;
    p.sampleIndex = i;
    ck_assert_int_eq(cuptiPmSamplingCounterDataGetSampleInfo(&p), CUPTI_SUCCESS);
    *start = p.startTimestamp;
    *end = p.endTimestamp;
}

static CUptiResult eval(CUpti_Profiler_Host_Object *h, const struct cd *cd, size_t i,
                        const char **names, size_t n, double *out)
{
    CUpti_Profiler_Host_EvaluateToGpuValues_Params p = {
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    p.pHostObject = h;
    p.pCounterDataImage = cd->img;
    p.counterDataImageSize = cd->size;
    p.rangeIndex = i;
    p.ppMetricNames = names;
    p.numMetrics = n;
    p.pMetricValues = out;
    return cuptiProfilerHostEvaluateToGpuValues(&p);
}

static double value(CUpti_Profiler_Host_Object *h, const struct cd *cd, size_t i, const char *name)
{
    double v = NAN;
    ck_assert_int_eq(eval(h, cd, i, &name, 1, &v), CUPTI_SUCCESS);
    return v;
}

/* A device sampling `names` at `interval` ns, with a counter data image of `max` samples,
 * started at the clock's T0. */
struct sess {
    CUpti_PmSampling_Object *o;
    struct cd cd;
    uint8_t *cfg;
    size_t cfg_size;
};

static struct sess sess_start(const char **names, size_t n, uint64_t interval, size_t hwbuf,
                              int append, uint32_t max)
{
    struct sess s;
    s.cfg = config(names, n, &s.cfg_size);
    ck_assert_int_eq(enable(0, &s.o), CUPTI_SUCCESS);
    ck_assert_int_eq(set_config(s.o, s.cfg, s.cfg_size, hwbuf, interval, TIME, append),
                     CUPTI_SUCCESS);
    s.cd = cd_new(s.o, names, n, max);
    ck_assert_int_eq(cd_init(s.o, &s.cd), CUPTI_SUCCESS);
    ck_assert_int_eq(start(s.o), CUPTI_SUCCESS);
    return s;
}

static void sess_end(struct sess *s)
{
    ck_assert_int_eq(disable(s->o), CUPTI_SUCCESS);
    free(s->cd.img);
    free(s->cfg);
}

/* ------------------------------------------------------------------ tests */

/* Everything the daemon looks up (daemon/gpm-cupti.h) is exported, from the built .so. */
START_TEST(test_exports)
{
#define NAME(name, sym, params) sym,
    static const char *calls[] = {GPM_CUPTI_CALLS(NAME)};
#undef NAME
    static const char *others[] = {
        "cuptiGetResultString", "cuptiGetTimestamp",  "cuInit",          "cuDeviceGetCount",
        "cuDeviceGet",          "cuDeviceGetName",    "cuDeviceGetUuid", "cuDeviceGetUuid_v2",
        "cuDeviceGetPCIBusId",  "cuDriverGetVersion",
    };
    const char *top = getenv("top_builddir");
    char path[4096];
    void *h;
    snprintf(path, sizeof path, "%s/tests/fakecupti/.libs/libpm-fake.so", top ? top : ".");
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "dlopen %s: %s", path, dlerror());
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
        ck_assert_msg(dlsym(h, calls[i]) != NULL, "%s not exported", calls[i]);
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        ck_assert_msg(dlsym(h, others[i]) != NULL, "%s not exported", others[i]);
    dlclose(h);
}
END_TEST

START_TEST(test_cuda_driver)
{
    int n = -1, v = 0;
    CUdevice d = -1;
    char name[64], bus[32];
    CUuuid u0, u1, u1b;

    ck_assert_int_eq(cuDriverGetVersion(&v), CUDA_SUCCESS); /* needs no cuInit */
    ck_assert_int_eq(v, 13000);
    ck_assert_int_eq(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(cuDeviceGet(&d, 0), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(cuInit(1), CUDA_ERROR_INVALID_VALUE);

    setenv("FAKEPM_DEVICES", "0", 1);
    ck_assert_int_eq(cuInit(0), CUDA_ERROR_NO_DEVICE);
    setenv("FAKEPM_DEVICES", "2", 1);
    setenv("FAKEPM_CUINIT_RESULT", "999", 1);
    ck_assert_int_eq(cuInit(0), 999);
    unsetenv("FAKEPM_CUINIT_RESULT");
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);

    ck_assert_int_eq(cuDeviceGetCount(&n), CUDA_SUCCESS);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(cuDeviceGet(&d, 1), CUDA_SUCCESS);
    ck_assert_int_eq(d, 1);
    ck_assert_int_eq(cuDeviceGet(&d, 2), CUDA_ERROR_INVALID_DEVICE);
    ck_assert_int_eq(cuDeviceGetName(name, sizeof name, 0), CUDA_SUCCESS);
    ck_assert_str_eq(name, "NVIDIA H200");
    ck_assert_int_eq(cuDeviceGetName(name, sizeof name, 2), CUDA_ERROR_INVALID_DEVICE);
    ck_assert_int_eq(cuDeviceGetPCIBusId(bus, sizeof bus, 0), CUDA_SUCCESS);
    ck_assert_str_eq(bus, "0000:19:00.0");
    ck_assert_int_eq(cuDeviceGetPCIBusId(bus, sizeof bus, 1), CUDA_SUCCESS);
    ck_assert_str_eq(bus, "0000:3B:00.0");
    ck_assert_int_eq(cuDeviceGetUuid_v2(&u0, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuDeviceGetUuid_v2(&u1, 1), CUDA_SUCCESS);
    ck_assert_int_eq(cuDeviceGetUuid(&u1b, 1), CUDA_SUCCESS);
    ck_assert_int_ne(memcmp(u0.bytes, u1.bytes, 16), 0);
    ck_assert_int_eq(memcmp(u1.bytes, u1b.bytes, 16), 0);
    ck_assert_int_eq((unsigned char)u0.bytes[0], 0xfa);
    ck_assert_int_eq((unsigned char)u1.bytes[15], 1);

    /* The device count is the driver's, fixed once it initialized. */
    setenv("FAKEPM_DEVICES", "5", 1);
    ck_assert_int_eq(cuDeviceGetCount(&n), CUDA_SUCCESS);
    ck_assert_int_eq(n, 2);
}
END_TEST

START_TEST(test_order)
{
    CUpti_Profiler_Initialize_Params pi = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    CUpti_Profiler_DeInitialize_Params pd = {CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
    CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    CUpti_PmSampling_Object *o = NULL, *o2 = NULL;
    struct cd cd;
    uint8_t *cfg;
    size_t cfg_size;
    int reason;

    /* cuptiProfilerInitialize needs cuInit; target calls need cuptiProfilerInitialize. */
    ck_assert_int_eq(cuptiProfilerInitialize(&pi), CUPTI_ERROR_UNKNOWN);
    ck_assert_int_eq(cuptiDeviceGetChipName(&cn), CUPTI_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(enable(0, &o), CUPTI_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(avail(0, NULL), CUPTI_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(cuptiProfilerDeInitialize(&pd), CUPTI_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(cuptiDeviceGetChipName(&cn), CUPTI_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(cuptiProfilerInitialize(&pi), CUPTI_SUCCESS);

    cn.deviceIndex = 0;
    ck_assert_int_eq(cuptiDeviceGetChipName(&cn), CUPTI_SUCCESS);
    ck_assert_str_eq(cn.pChipName, "GH100");
    cn.deviceIndex = 1;
    ck_assert_int_eq(cuptiDeviceGetChipName(&cn), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(enable(1, &o), CUPTI_ERROR_INVALID_PARAMETER);

    /* The host API needs nothing of that (it works offline). */
    cfg = config(core, NCORE, &cfg_size);

    ck_assert_int_eq(enable(0, &o), CUPTI_SUCCESS);
    ck_assert_int_eq(enable(0, &o2), CUPTI_ERROR_INVALID_OPERATION);
    ck_assert_int_eq(start(o), CUPTI_ERROR_INVALID_OPERATION);
    ck_assert_int_eq(stop(o), CUPTI_ERROR_INVALID_OPERATION);
    cd.img = malloc(4096);
    cd.size = 4096;
    ck_assert_int_eq(cd_init(o, &cd), CUPTI_ERROR_INVALID_OPERATION);
    free(cd.img);
    cd = cd_new(o, core, NCORE, 8);
    ck_assert_int_eq(cd_init(o, &cd), CUPTI_SUCCESS);
    ck_assert_int_eq(decode(o, &cd, NULL, NULL), CUPTI_ERROR_INVALID_OPERATION);
    ck_assert_int_eq(set_config(o, cfg, cfg_size, 1 << 20, 10 * MS, TIME, OLDEST), CUPTI_SUCCESS);
    ck_assert_int_eq(decode(o, &cd, &reason, NULL), CUPTI_SUCCESS); /* configured, not started */
    ck_assert_int_eq(reason, EOR);
    ck_assert_uint_eq(count(&cd), 0);
    ck_assert_int_eq(start(o), CUPTI_SUCCESS);
    ck_assert_int_eq(start(o), CUPTI_ERROR_INVALID_OPERATION);
    ck_assert_int_eq(set_config(o, cfg, cfg_size, 1 << 20, 10 * MS, TIME, OLDEST),
                     CUPTI_ERROR_INVALID_OPERATION);
    ck_assert_int_eq(stop(o), CUPTI_SUCCESS);
    ck_assert_int_eq(stop(o), CUPTI_ERROR_INVALID_OPERATION);
    ck_assert_int_eq(disable(o), CUPTI_SUCCESS);

    /* A stale object is refused, not used. */
    ck_assert_int_eq(disable(o), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(start(o), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(decode(o, &cd, NULL, NULL), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(start((CUpti_PmSampling_Object *)&cd), CUPTI_ERROR_INVALID_PARAMETER);

    /* Enabled again: a new object; the old image belongs to the old one. */
    ck_assert_int_eq(enable(0, &o), CUPTI_SUCCESS);
    ck_assert_int_eq(set_config(o, cfg, cfg_size, 1 << 20, 10 * MS, TIME, OLDEST), CUPTI_SUCCESS);
    ck_assert_int_eq(decode(o, &cd, NULL, NULL), CUPTI_ERROR_INVALID_PARAMETER);

    /* The last cuptiProfilerDeInitialize disables what is left. */
    ck_assert_int_eq(cuptiProfilerInitialize(&pi), CUPTI_SUCCESS);
    ck_assert_int_eq(cuptiProfilerDeInitialize(&pd), CUPTI_SUCCESS);
    ck_assert_int_eq(start(o), CUPTI_SUCCESS); /* still enabled */
    ck_assert_int_eq(cuptiProfilerDeInitialize(&pd), CUPTI_SUCCESS);
    ck_assert_int_eq(disable(o), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(enable(0, &o), CUPTI_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(cuptiProfilerInitialize(&pi), CUPTI_SUCCESS);
    ck_assert_int_eq(enable(0, &o), CUPTI_SUCCESS);
    free(cd.img);
    free(cfg);
}
END_TEST

/* structSize: the header's _STRUCT_SIZE is accepted (every other test uses it), one byte
 * less is not, nor NULL; a larger one (a newer header) is. */
#define SMALL(fn, type)                                                                            \
    do {                                                                                           \
        type p_;                                                                                   \
        memset(&p_, 0, sizeof p_);                                                                 \
        p_.structSize = type##_STRUCT_SIZE - 1;                                                    \
        ck_assert_int_eq(fn(&p_), CUPTI_ERROR_INVALID_PARAMETER);                                  \
        ck_assert_int_eq(fn(NULL), CUPTI_ERROR_INVALID_PARAMETER);                                 \
    } while (0)

START_TEST(test_struct_size)
{
    struct {
        CUpti_PmSampling_Enable_Params p;
        char newer_members[64];
    } big;
    CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};

    init_all();
    SMALL(cuptiProfilerInitialize, CUpti_Profiler_Initialize_Params);
    SMALL(cuptiProfilerDeInitialize, CUpti_Profiler_DeInitialize_Params);
    SMALL(cuptiDeviceGetChipName, CUpti_Device_GetChipName_Params);
    SMALL(cuptiProfilerHostInitialize, CUpti_Profiler_Host_Initialize_Params);
    SMALL(cuptiProfilerHostDeinitialize, CUpti_Profiler_Host_Deinitialize_Params);
    SMALL(cuptiProfilerHostConfigAddMetrics, CUpti_Profiler_Host_ConfigAddMetrics_Params);
    SMALL(cuptiProfilerHostGetConfigImageSize, CUpti_Profiler_Host_GetConfigImageSize_Params);
    SMALL(cuptiProfilerHostGetConfigImage, CUpti_Profiler_Host_GetConfigImage_Params);
    SMALL(cuptiProfilerHostGetNumOfPasses, CUpti_Profiler_Host_GetNumOfPasses_Params);
    SMALL(cuptiProfilerHostEvaluateToGpuValues, CUpti_Profiler_Host_EvaluateToGpuValues_Params);
    SMALL(cuptiPmSamplingEnable, CUpti_PmSampling_Enable_Params);
    SMALL(cuptiPmSamplingDisable, CUpti_PmSampling_Disable_Params);
    SMALL(cuptiPmSamplingStart, CUpti_PmSampling_Start_Params);
    SMALL(cuptiPmSamplingStop, CUpti_PmSampling_Stop_Params);
    SMALL(cuptiPmSamplingSetConfig, CUpti_PmSampling_SetConfig_Params);
    SMALL(cuptiPmSamplingGetCounterAvailability, CUpti_PmSampling_GetCounterAvailability_Params);
    SMALL(cuptiPmSamplingGetCounterDataSize, CUpti_PmSampling_GetCounterDataSize_Params);
    SMALL(cuptiPmSamplingCounterDataImageInitialize,
          CUpti_PmSampling_CounterDataImage_Initialize_Params);
    SMALL(cuptiPmSamplingDecodeData, CUpti_PmSampling_DecodeData_Params);
    SMALL(cuptiPmSamplingGetCounterDataInfo, CUpti_PmSampling_GetCounterDataInfo_Params);
    SMALL(cuptiPmSamplingCounterDataGetSampleInfo,
          CUpti_PmSampling_CounterData_GetSampleInfo_Params);

    /* The exact size: the padded tail of DecodeData's struct is not part of it. */
    ck_assert_uint_lt(CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE,
                      sizeof(CUpti_PmSampling_DecodeData_Params));
    ck_assert_int_eq(cuptiDeviceGetChipName(&cn), CUPTI_SUCCESS);

    memset(&big, 0, sizeof big);
    big.p.structSize = sizeof big;
    ck_assert_int_eq(cuptiPmSamplingEnable(&big.p), CUPTI_SUCCESS);
    ck_assert_ptr_nonnull(big.p.pPmSamplingObject);

    /* gpm-cupti.h's sizes are the header's (the daemon passes those). */
    ck_assert_uint_eq(GPM_SIZE(struct gpm_decode_params, overflow),
                      CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE);
    ck_assert_uint_eq(GPM_SIZE(struct gpm_set_config_params, hwBufferAppendMode),
                      CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE);
}
END_TEST

START_TEST(test_host_api)
{
    static const char *bad[] = {M_SM, "sm__pipe_tensor_op_hmma_cycles_active_realtime" PE};
    static const char *nvl[] = {M_NVLRX, M_NVLTX};
    static const char *lts[] = {"lts__throughput" PE};
    static const char *many[] = {
        M_SM,
        M_WARPS,
        M_TENSOR,
        M_TENSOR_R,
        M_DRAM,
        M_DRAM_RD,
        M_DRAM_WR,
        M_GR,
        M_PCIE_RD,
        M_PCIE_WR,
        M_NVLRX,
        M_NVLTX,
        M_GPC_HZ,
        M_SYS_HZ,
        "sm__warps_active_realtime" PE,
        "TPC.TriageCompute.sm__pipe_tensor_op_hmma_cycles_active_realtime" PE,
        "sm__pipe_shared_cycles_active_realtime" PE,
        "pcie__throughput" PE,
        "lts__t_bytes.sum.per_second",
        "sm__cycles_elapsed.avg.per_second",
        "dramc__throughput" PE,
        "dramc__read_throughput" PE,
        "dramc__write_throughput" PE,
    };
    CUpti_Profiler_Host_Initialize_Params hi = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    CUpti_Profiler_Host_GetConfigImageSize_Params gs = {
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    CUpti_Profiler_Host_GetConfigImage_Params gi = {
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    CUpti_Profiler_Host_GetNumOfPasses_Params np = {
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    CUpti_Profiler_Host_Object *h;
    CUpti_PmSampling_Object *o;
    uint8_t *img, *av;
    size_t size, size2;

    /* Offline: no cuInit, no availability image. */
    hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    hi.pChipName = "GH100";
    ck_assert_int_eq(cuptiProfilerHostInitialize(&hi), CUPTI_ERROR_NOT_SUPPORTED);
    hi.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    hi.pChipName = "GX999";
    ck_assert_int_eq(cuptiProfilerHostInitialize(&hi), CUPTI_ERROR_INVALID_PARAMETER);
    hi.pChipName = NULL;
    ck_assert_int_eq(cuptiProfilerHostInitialize(&hi), CUPTI_ERROR_INVALID_PARAMETER);

    h = host_new("GH100", NULL);
    gs.pHostObject = h;
    ck_assert_int_eq(cuptiProfilerHostGetConfigImageSize(&gs), CUPTI_ERROR_INVALID_OPERATION);
    /* An unknown name fails the call, and none of its names is added. */
    ck_assert_int_eq(add(h, bad, 2), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(cuptiProfilerHostGetConfigImageSize(&gs), CUPTI_ERROR_INVALID_OPERATION);
    ck_assert_int_eq(add(h, core, NCORE), CUPTI_SUCCESS);
    ck_assert_int_eq(add(h, core, 3), CUPTI_SUCCESS); /* a set: duplicates collapse */
    img = config_of(h, &size);
    ck_assert_uint_eq(passes(img, size), 1);
    /* Offline, the NVLink metrics are accepted. */
    ck_assert_int_eq(add(h, nvl, 2), CUPTI_SUCCESS);
    free(img);
    img = config_of(h, &size2);
    ck_assert_uint_gt(size2, size);
    /* Too small a buffer. */
    gi.pHostObject = h;
    gi.configImageSize = size2 - 1;
    gi.pConfigImage = img;
    ck_assert_int_eq(cuptiProfilerHostGetConfigImage(&gi), CUPTI_ERROR_INVALID_PARAMETER);
    /* A damaged image. */
    img[size2 - 1] ^= 1;
    np.configImageSize = size2;
    np.pConfigImage = img;
    ck_assert_int_eq(cuptiProfilerHostGetNumOfPasses(&np), CUPTI_ERROR_INVALID_PARAMETER);
    free(img);
    host_free(h);
    ck_assert_int_eq(add(h, core, 1), CUPTI_ERROR_INVALID_PARAMETER); /* stale */

    /* Passes: 22 metrics in one, 23 need two, lts__throughput four on its own. */
    ck_assert_uint_eq(sizeof many / sizeof many[0], 23);
    img = config(many, 22, &size);
    ck_assert_uint_eq(passes(img, size), 1);
    free(img);
    img = config(many, 23, &size);
    ck_assert_uint_eq(passes(img, size), 2);
    free(img);
    img = config(lts, 1, &size);
    ck_assert_uint_eq(passes(img, size), 4);
    setenv("FAKEPM_METRICS_PER_PASS", "5", 1);
    free(img);
    img = config(core, 6, &size);
    ck_assert_uint_eq(passes(img, size), 2);
    unsetenv("FAKEPM_METRICS_PER_PASS");

    /* SetConfig refuses a multi-pass image. */
    init_all();
    ck_assert_int_eq(enable(0, &o), CUPTI_SUCCESS);
    ck_assert_int_eq(set_config(o, img, size, 1 << 20, 10 * MS, TIME, OLDEST),
                     CUPTI_ERROR_NOT_SUPPORTED);
    free(img);

    /* With the device's availability image, a single-GPU node has no NVLink counters. */
    ck_assert_int_eq(avail(0, &av), CUPTI_SUCCESS);
    h = host_new("GH100", av);
    ck_assert_int_eq(add(h, nvl, 1), CUPTI_ERROR_UNKNOWN);
    ck_assert_int_eq(add(h, nvl + 1, 1), CUPTI_ERROR_UNKNOWN);
    ck_assert_int_eq(add(h, core, NCORE), CUPTI_SUCCESS);
    host_free(h);
    hi.pChipName = "GB100";
    hi.pCounterAvailabilityImage = av;
    ck_assert_int_eq(cuptiProfilerHostInitialize(&hi), CUPTI_ERROR_INVALID_PARAMETER);
    free(av);
    setenv("FAKEPM_NVLINK", "1", 1);
    ck_assert_int_eq(avail(0, &av), CUPTI_SUCCESS);
    h = host_new("GH100", av);
    ck_assert_int_eq(add(h, nvl, 2), CUPTI_SUCCESS);
    host_free(h);
    free(av);

    /* A chip this CUPTI does not know is fine with its device's availability image; a
     * config image for it does not fit a GH100. */
    setenv("FAKEPM_CHIP", "GX999", 1);
    ck_assert_int_eq(avail(0, &av), CUPTI_SUCCESS);
    h = host_new("GX999", av);
    ck_assert_int_eq(add(h, core, NCORE), CUPTI_SUCCESS);
    img = config_of(h, &size);
    unsetenv("FAKEPM_CHIP");
    ck_assert_int_eq(set_config(o, img, size, 1 << 20, 10 * MS, TIME, OLDEST),
                     CUPTI_ERROR_INVALID_PARAMETER);
    host_free(h);
    free(av);
    free(img);
}
END_TEST

/* Sample times on the stepped clock: the first sample starts 0.8 s before Start, then one
 * sample per interval, back to back, completed once the clock passes its end. */
START_TEST(test_sample_times)
{
    struct sess s;
    uint64_t st, en, ts, prev_end = 0;
    int reason, overflow;

    init_all();
    s = sess_start(core, NCORE, 10 * MS, 1 << 20, OLDEST, 1000);
    ck_assert_int_eq(cuptiGetTimestamp(&ts), CUPTI_SUCCESS);
    ck_assert_uint_eq(ts, T0);

    clock_set(T0 + 10 * MS - 1);
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, &overflow), CUPTI_SUCCESS);
    ck_assert_int_eq(reason, EOR);
    ck_assert_int_eq(overflow, 0);
    ck_assert_uint_eq(count(&s.cd), 0);

    clock_set(T0 + SEC);
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, &overflow), CUPTI_SUCCESS);
    ck_assert_int_eq(reason, EOR);
    ck_assert_uint_eq(count(&s.cd), 100);
    sample(s.o, &s.cd, 0, &st, &en);
    ck_assert_uint_eq(st, T0 - LEAD);
    ck_assert_uint_eq(en, T0 + 10 * MS);
    for (size_t i = 1; i < 100; i++) {
        sample(s.o, &s.cd, i, &st, &en);
        ck_assert_uint_eq(st, T0 + i * 10 * MS);
        ck_assert_uint_eq(en, st + 10 * MS);
        if (i > 1)
            ck_assert_uint_eq(st, prev_end);
        prev_end = en;
    }
    ck_assert_uint_eq(prev_end, T0 + SEC);

    /* Stop: the sample in progress is never completed; the rest stay decodable. */
    clock_set(T0 + SEC + 25 * MS);
    ck_assert_int_eq(stop(s.o), CUPTI_SUCCESS);
    clock_set(T0 + 2 * SEC);
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, NULL), CUPTI_SUCCESS);
    ck_assert_int_eq(reason, EOR);
    ck_assert_uint_eq(count(&s.cd), 102);
    sample(s.o, &s.cd, 101, &st, &en);
    ck_assert_uint_eq(en, T0 + SEC + 20 * MS);

    /* Start again: a new run, the first sample early again; no lead when turned off. */
    setenv("FAKEPM_FIRST_SAMPLE_LEAD_NS", "0", 1);
    ck_assert_int_eq(start(s.o), CUPTI_SUCCESS);
    clock_set(T0 + 2 * SEC + 30 * MS);
    ck_assert_int_eq(cd_init(s.o, &s.cd), CUPTI_SUCCESS);
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, NULL), CUPTI_SUCCESS);
    ck_assert_uint_eq(count(&s.cd), 3);
    sample(s.o, &s.cd, 0, &st, &en);
    ck_assert_uint_eq(st, T0 + 2 * SEC);
    ck_assert_uint_eq(en, T0 + 2 * SEC + 10 * MS);

    /* Disable works while started. */
    sess_end(&s);
}
END_TEST

/* FAKEPM_CLOCK=@FILE: another process steps the clock through a file. */
START_TEST(test_clock_file)
{
    char path[128], spec[160], tmp[160];
    uint64_t ts;
    FILE *f;

    snprintf(path, sizeof path, "%s/clock", tmpdir);
    snprintf(tmp, sizeof tmp, "%s/clock.new", tmpdir);
    snprintf(spec, sizeof spec, "@%s", path);
    f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%llu\n", (unsigned long long)(T0 + 5 * SEC));
    fclose(f);
    ck_assert_int_eq(rename(tmp, path), 0);
    setenv("FAKEPM_CLOCK", spec, 1);
    ck_assert_int_eq(cuptiGetTimestamp(&ts), CUPTI_SUCCESS);
    ck_assert_uint_eq(ts, T0 + 5 * SEC);
    touch(path, ""); /* caught mid-write: the clock stands still */
    ck_assert_int_eq(cuptiGetTimestamp(&ts), CUPTI_SUCCESS);
    ck_assert_uint_eq(ts, T0 + 5 * SEC);
    touch(path, "1700000007000000000");
    ck_assert_int_eq(cuptiGetTimestamp(&ts), CUPTI_SUCCESS);
    ck_assert_uint_eq(ts, T0 + 7 * SEC);
}
END_TEST

/* SYSCLK trigger: the interval is in SYS clock cycles. */
START_TEST(test_sysclk_interval)
{
    CUpti_PmSampling_Object *o;
    struct cd cd;
    uint8_t *cfg;
    size_t size;
    uint64_t st, en;

    init_all();
    setenv("FAKEPM_FIRST_SAMPLE_LEAD_NS", "0", 1);
    cfg = config(core, NCORE, &size);
    ck_assert_int_eq(enable(0, &o), CUPTI_SUCCESS);
    ck_assert_int_eq(set_config(o, cfg, size, 1 << 20, 1600000,
                                CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL, OLDEST),
                     CUPTI_SUCCESS);
    cd = cd_new(o, core, NCORE, 100);
    ck_assert_int_eq(cd_init(o, &cd), CUPTI_SUCCESS);
    ck_assert_int_eq(start(o), CUPTI_SUCCESS);
    clock_set(T0 + 10 * MS);
    ck_assert_int_eq(decode(o, &cd, NULL, NULL), CUPTI_SUCCESS);
    ck_assert_uint_eq(count(&cd), 10); /* 1.6e6 cycles at 1.6 GHz: 1 ms */
    sample(o, &cd, 3, &st, &en);
    ck_assert_uint_eq(en - st, MS);
    ck_assert_int_eq(set_config(o, cfg, size, 1 << 20, 0, TIME, OLDEST),
                     CUPTI_ERROR_INVALID_OPERATION); /* started */
    ck_assert_int_eq(stop(o), CUPTI_SUCCESS);
    ck_assert_int_eq(set_config(o, cfg, size, 1 << 20, 0, TIME, OLDEST),
                     CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(set_config(o, cfg, size, 1 << 20, MS, 2, OLDEST),
                     CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(set_config(o, cfg, size, 1 << 20, MS, TIME, 2), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(set_config(o, cfg, size, HWBYTE - 1, MS, TIME, OLDEST),
                     CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(set_config(o, cfg, size - 1, 1 << 20, MS, TIME, OLDEST),
                     CUPTI_ERROR_INVALID_PARAMETER);
    free(cd.img);
    free(cfg);
}
END_TEST

/* On the real clock: timestamps are CLOCK_REALTIME, and every sample that ended before a
 * decode is in it. */
START_TEST(test_real_clock)
{
    struct sess s;
    struct timespec a, b, c;
    uint64_t t_before, t_after, t_decode, st, en, ts;
    size_t n;

    unsetenv("FAKEPM_CLOCK");
    init_all();
    clock_gettime(CLOCK_REALTIME, &a);
    s = sess_start(core, NCORE, MS, 1 << 20, OLDEST, 10000);
    clock_gettime(CLOCK_REALTIME, &b);
    t_before = (uint64_t)a.tv_sec * SEC + (uint64_t)a.tv_nsec;
    t_after = (uint64_t)b.tv_sec * SEC + (uint64_t)b.tv_nsec;
    ck_assert_int_eq(cuptiGetTimestamp(&ts), CUPTI_SUCCESS);
    ck_assert_uint_ge(ts, t_after);
    ck_assert_uint_lt(ts, t_after + 10 * SEC);
    usleep(30000);
    clock_gettime(CLOCK_REALTIME, &c);
    t_decode = (uint64_t)c.tv_sec * SEC + (uint64_t)c.tv_nsec;
    ck_assert_int_eq(decode(s.o, &s.cd, NULL, NULL), CUPTI_SUCCESS);
    n = count(&s.cd);
    ck_assert_uint_ge(n, 25);
    sample(s.o, &s.cd, 0, &st, &en);
    ck_assert_uint_ge(st + LEAD, t_before);
    ck_assert_uint_le(st + LEAD, t_after);
    sample(s.o, &s.cd, 1, &st, &en);
    ck_assert_uint_ge(st, t_before + MS);
    ck_assert_uint_le(st, t_after + MS);
    sample(s.o, &s.cd, n - 1, &st, &en);
    ck_assert_uint_gt(en + MS, t_decode); /* nothing that ended before the decode missing */
    ck_assert_uint_eq(en - st, MS);
    sess_end(&s);
}
END_TEST

/* A small counter data image: COUNTER_DATA_FULL while samples remain, re-initialize (or
 * copy back a pristine image) and decode again. */
START_TEST(test_counter_data_full)
{
    struct sess s;
    size_t total, pop, comp;
    uint64_t st, en, last_end;
    uint8_t *pristine;
    int reason;
    double v;
    CUpti_Profiler_Host_Object *h;
    CUpti_PmSampling_CounterData_GetSampleInfo_Params si = {
        CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE};

    init_all();
    setenv("FAKEPM_FIRST_SAMPLE_LEAD_NS", "0", 1);
    s = sess_start(core, NCORE, 10 * MS, 1 << 20, OLDEST, 10);
    h = host_new("GH100", NULL);
    pristine = malloc(s.cd.size);
    memcpy(pristine, s.cd.img, s.cd.size);
    info(&s.cd, &total, &pop, &comp);
    ck_assert_uint_eq(total, 10);
    ck_assert_uint_eq(pop, 0);
    ck_assert_int_eq(eval(h, &s.cd, 0, core, 1, &v), CUPTI_ERROR_INVALID_PARAMETER);

    clock_set(T0 + 250 * MS); /* 25 samples */
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, NULL), CUPTI_SUCCESS);
    ck_assert_int_eq(reason, FULL);
    info(&s.cd, &total, &pop, &comp);
    ck_assert_uint_eq(total, 10);
    ck_assert_uint_eq(comp, 10);
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, NULL), CUPTI_SUCCESS); /* still full */
    ck_assert_int_eq(reason, FULL);
    ck_assert_uint_eq(count(&s.cd), 10);
    sample(s.o, &s.cd, 9, &st, &last_end);
    /* Out of range indexes. */
    si.pPmSamplingObject = s.o;
    si.pCounterDataImage = s.cd.img;
    si.counterDataImageSize = s.cd.size;
    si.sampleIndex = 10;
    ck_assert_int_eq(cuptiPmSamplingCounterDataGetSampleInfo(&si), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(eval(h, &s.cd, 10, core, 1, &v), CUPTI_ERROR_INVALID_PARAMETER);
    si.counterDataImageSize = s.cd.size - 1;
    si.sampleIndex = 0;
    ck_assert_int_eq(cuptiPmSamplingCounterDataGetSampleInfo(&si), CUPTI_ERROR_INVALID_PARAMETER);

    ck_assert_int_eq(cd_init(s.o, &s.cd), CUPTI_SUCCESS); /* empties it */
    ck_assert_uint_eq(count(&s.cd), 0);
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, NULL), CUPTI_SUCCESS);
    ck_assert_int_eq(reason, FULL);
    sample(s.o, &s.cd, 0, &st, &en);
    ck_assert_uint_eq(st, last_end); /* nothing lost between images */
    sample(s.o, &s.cd, 9, &st, &last_end);

    memcpy(s.cd.img, pristine, s.cd.size); /* XLA's way to reset */
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, NULL), CUPTI_SUCCESS);
    ck_assert_int_eq(reason, EOR);
    ck_assert_uint_eq(count(&s.cd), 5);
    sample(s.o, &s.cd, 0, &st, &en);
    ck_assert_uint_eq(st, last_end);
    sample(s.o, &s.cd, 4, &st, &en);
    ck_assert_uint_eq(en, T0 + 250 * MS);

    /* A damaged image is refused. */
    s.cd.img[0] ^= 1;
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, NULL), CUPTI_ERROR_INVALID_PARAMETER);
    host_free(h);
    free(pristine);
    sess_end(&s);
}
END_TEST

/* The counter data image must hold metrics of the config; names must be known. */
START_TEST(test_counter_data_metrics)
{
    static const char *other[] = {"lts__t_bytes.sum.per_second"};
    static const char *unknown[] = {"sm__bogus.avg"};
    CUpti_PmSampling_GetCounterDataSize_Params s = {
        CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE};
    CUpti_Profiler_Host_Object *h;
    struct sess ss;
    struct cd cd;
    double v[NCORE];

    init_all();
    ss = sess_start(core, NCORE, 10 * MS, 1 << 20, OLDEST, 100);
    s.pPmSamplingObject = ss.o;
    s.pMetricNames = unknown;
    s.numMetrics = 1;
    s.maxSamples = 10;
    ck_assert_int_eq(cuptiPmSamplingGetCounterDataSize(&s), CUPTI_ERROR_INVALID_PARAMETER);
    s.pMetricNames = core;
    s.maxSamples = 0;
    ck_assert_int_eq(cuptiPmSamplingGetCounterDataSize(&s), CUPTI_ERROR_INVALID_PARAMETER);

    cd = cd_new(ss.o, other, 1, 10);
    ck_assert_int_eq(cd_init(ss.o, &cd), CUPTI_SUCCESS);
    clock_set(T0 + SEC);
    ck_assert_int_eq(decode(ss.o, &cd, NULL, NULL), CUPTI_ERROR_INVALID_PARAMETER);
    free(cd.img);

    /* A subset of the config is fine; names it lacks do not evaluate. */
    cd = cd_new(ss.o, core, 2, 200);
    ck_assert_int_eq(cd_init(ss.o, &cd), CUPTI_SUCCESS);
    ck_assert_int_eq(decode(ss.o, &cd, NULL, NULL), CUPTI_SUCCESS);
    ck_assert_uint_eq(count(&cd), 100);
    h = host_new("GH100", NULL);
    ck_assert_int_eq(eval(h, &cd, 5, core, 2, v), CUPTI_SUCCESS);
    ck_assert_int_eq(eval(h, &cd, 5, core, 3, v), CUPTI_ERROR_INVALID_METRIC_NAME);
    ck_assert_int_eq(eval(h, &cd, 5, unknown, 1, v), CUPTI_ERROR_INVALID_METRIC_NAME);
    ck_assert_int_eq(eval(NULL, &cd, 5, core, 2, v), CUPTI_ERROR_INVALID_PARAMETER);
    host_free(h);
    free(cd.img);
    sess_end(&ss);
}
END_TEST

/* The hardware buffer holds hardwareBufferSize / 1024 samples.  KEEP_OLDEST: as on the
 * H200, once it overflowed every DecodeData answers CUPTI_ERROR_OUT_OF_MEMORY with
 * overflow=1 and decodes nothing, until sampling starts again; FAKEPM_OVERFLOW_RESULT=oom
 * (the header's account): OUT_OF_MEMORY once, having decoded the first ones kept, and
 * records again once there is room.  KEEP_LATEST keeps the last ones. */
START_TEST(test_overflow)
{
    struct sess s;
    uint64_t st, en;
    int reason, overflow;

    init_all();
    setenv("FAKEPM_FIRST_SAMPLE_LEAD_NS", "0", 1);
    s = sess_start(core, NCORE, 10 * MS, 10 * HWBYTE, OLDEST, 100);
    clock_set(T0 + 100 * MS); /* exactly full: no overflow */
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, &overflow), CUPTI_SUCCESS);
    ck_assert_int_eq(overflow, 0);
    ck_assert_uint_eq(count(&s.cd), 10);
    clock_set(T0 + 350 * MS); /* 25 more: 15 lost */
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(decode(s.o, &s.cd, &reason, &overflow), CUPTI_ERROR_OUT_OF_MEMORY);
        ck_assert_int_eq(overflow, 1);
        ck_assert_int_eq(reason, CUPTI_PM_SAMPLING_DECODE_STOP_REASON_OTHER);
        ck_assert_uint_eq(count(&s.cd), 10); /* nothing decoded, each time */
        clock_set(T0 + (400 + 50 * (uint64_t)i) * MS);
    }
    clock_set(T0 + 600 * MS);
    ck_assert_int_eq(stop(s.o), CUPTI_SUCCESS); /* a new run decodes again */
    ck_assert_int_eq(start(s.o), CUPTI_SUCCESS);
    clock_set(T0 + 600 * MS + 50 * MS);
    ck_assert_int_eq(cd_init(s.o, &s.cd), CUPTI_SUCCESS);
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, &overflow), CUPTI_SUCCESS);
    ck_assert_int_eq(overflow, 0);
    ck_assert_uint_eq(count(&s.cd), 5);
    sample(s.o, &s.cd, 0, &st, &en);
    ck_assert_uint_eq(st, T0 + 600 * MS);
    sess_end(&s);

    setenv("FAKEPM_OVERFLOW_RESULT", "oom", 1);
    clock_set(T0);
    s = sess_start(core, NCORE, 10 * MS, 10 * HWBYTE, OLDEST, 100);
    clock_set(T0 + 100 * MS);
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, &overflow), CUPTI_SUCCESS);
    ck_assert_uint_eq(count(&s.cd), 10);
    clock_set(T0 + 350 * MS); /* 25 more: 15 lost */
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, &overflow), CUPTI_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(overflow, 1);
    ck_assert_int_eq(reason, EOR);
    ck_assert_uint_eq(count(&s.cd), 20);
    sample(s.o, &s.cd, 19, &st, &en);
    ck_assert_uint_eq(st, T0 + 190 * MS); /* the oldest were kept */
    clock_set(T0 + 400 * MS);
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, &overflow), CUPTI_SUCCESS);
    ck_assert_int_eq(overflow, 0); /* reported once */
    ck_assert_uint_eq(count(&s.cd), 25);
    sample(s.o, &s.cd, 20, &st, &en);
    ck_assert_uint_eq(st, T0 + 350 * MS); /* sampling went on after the gap */
    sess_end(&s);

    setenv("FAKEPM_OVERFLOW_RESULT", "success", 1);
    clock_set(T0);
    s = sess_start(core, NCORE, 10 * MS, 10 * HWBYTE, OLDEST, 100);
    clock_set(T0 + 150 * MS);
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, &overflow), CUPTI_SUCCESS);
    ck_assert_int_eq(overflow, 1);
    ck_assert_uint_eq(count(&s.cd), 10);
    sess_end(&s);
    unsetenv("FAKEPM_OVERFLOW_RESULT");

    clock_set(T0);
    s = sess_start(core, NCORE, 10 * MS, 10 * HWBYTE, LATEST, 100);
    clock_set(T0 + 250 * MS);
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, &overflow), CUPTI_SUCCESS);
    ck_assert_int_eq(overflow, 1);
    ck_assert_uint_eq(count(&s.cd), 10);
    sample(s.o, &s.cd, 0, &st, &en);
    ck_assert_uint_eq(st, T0 + 150 * MS);         /* the latest were kept */
    clock_set(T0 + 300 * MS + 5 * 10 * MS * 100); /* far more than the buffer: still fine */
    ck_assert_int_eq(cd_init(s.o, &s.cd), CUPTI_SUCCESS);
    ck_assert_int_eq(decode(s.o, &s.cd, &reason, &overflow), CUPTI_SUCCESS);
    ck_assert_int_eq(overflow, 1);
    ck_assert_uint_eq(count(&s.cd), 10);
    sample(s.o, &s.cd, 9, &st, &en);
    ck_assert_uint_eq(en, T0 + 300 * MS + 5 * 10 * MS * 100);
    sess_end(&s);
}
END_TEST

static int close_to(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (fabs(b) > 1 ? fabs(b) : 1);
}

#define ASSERT_VALUE(h, cd, i, name, want)                                                         \
    do {                                                                                           \
        double v_ = value(h, cd, i, name), w_ = (want);                                            \
        ck_assert_msg(close_to(v_, w_), "sample %zu %s: %.12g, want %.12g", (size_t)(i), name, v_, \
                      w_);                                                                         \
    } while (0)

/* Scripted phases: a sample inside a phase reads the phase's values, the idle values
 * elsewhere; one across a boundary the time-weighted mean; .sum metrics the integral. */
START_TEST(test_phases)
{
    static const char *names[] = {M_SM,
                                  M_TENSOR_R,
                                  M_TENSOR,
                                  M_DRAM,
                                  M_DRAM_RD,
                                  M_PCIE_RD,
                                  "dram__bytes_read.sum",
                                  M_GR,
                                  "gr__cycles_active.sum.pct_of_peak_sustained_elapsed"};
    const size_t n = sizeof names / sizeof names[0];
    char env[512], path[128];
    CUpti_Profiler_Host_Object *h;
    struct sess s;
    FILE *f;
    double v[9];

    init_all();
    /* Before Start: gemm (the first sample starts 0.8 s early and sees 0.8 s of it). */
    snprintf(env, sizeof env,
             "%llu %llu gemm; %llu %llu stream;%llu %llu " M_DRAM "=42 " M_TENSOR_R "=150\n"
             "%llu - h2d",
             (unsigned long long)(T0 - SEC), (unsigned long long)T0,
             (unsigned long long)(T0 + 100 * MS), (unsigned long long)(T0 + 1100 * MS),
             (unsigned long long)(T0 + 1100 * MS), (unsigned long long)(T0 + 1150 * MS),
             (unsigned long long)(T0 + 5 * SEC));
    setenv("FAKEPM_PHASES", env, 1);
    s = sess_start(names, n, 100 * MS, 1 << 20, OLDEST, 100);
    h = host_new("GH100", NULL);
    clock_set(T0 + 2 * SEC);
    ck_assert_int_eq(decode(s.o, &s.cd, NULL, NULL), CUPTI_SUCCESS);
    ck_assert_uint_eq(count(&s.cd), 20);

    /* Sample 0: [T0-0.8s, T0+0.1s): 0.8 s of gemm, 0.1 s idle. */
    ASSERT_VALUE(h, &s.cd, 0, M_TENSOR_R, (0.8 * 94 + 0.1 * 0.02) / 0.9);
    ASSERT_VALUE(h, &s.cd, 0, M_SM, (0.8 * 99 + 0.1 * 0.5) / 0.9);
    /* Samples 1..10: stream. */
    for (size_t i = 1; i <= 10; i++) {
        ASSERT_VALUE(h, &s.cd, i, M_DRAM, 85);
        ASSERT_VALUE(h, &s.cd, i, M_TENSOR_R, 0);
        ASSERT_VALUE(h, &s.cd, i, M_DRAM_RD, 2.72e12);
        ASSERT_VALUE(h, &s.cd, i, "dram__bytes_read.sum", 2.72e12 * 0.1);
        ASSERT_VALUE(h, &s.cd, i, M_PCIE_RD, 1e6);
        ASSERT_VALUE(h, &s.cd, i, M_GR, 100);
        ASSERT_VALUE(h, &s.cd, i, "gr__cycles_active.sum.pct_of_peak_sustained_elapsed", 100);
    }
    /* Sample 11, [1.1 s, 1.2 s): half dram=42 (tensor clamped to 100), half idle. */
    ASSERT_VALUE(h, &s.cd, 11, M_DRAM, (42 + 1.5) / 2);
    ASSERT_VALUE(h, &s.cd, 11, M_TENSOR_R, (100 + 0.02) / 2);
    ASSERT_VALUE(h, &s.cd, 11, M_TENSOR, 0.01); /* not set by the phase */
    /* Idle after. */
    ASSERT_VALUE(h, &s.cd, 15, M_SM, 0.5);
    ASSERT_VALUE(h, &s.cd, 15, M_DRAM_RD, 4.8e10);
    ASSERT_VALUE(h, &s.cd, 15, "dram__bytes_read.sum", 4.8e10 * 0.1);

    /* All at once, in the order asked. */
    ck_assert_int_eq(eval(h, &s.cd, 5, names, n, v), CUPTI_SUCCESS);
    ck_assert(close_to(v[0], 98) && close_to(v[1], 0) && close_to(v[3], 85));
    for (size_t i = 0; i < 20; i++)
        for (size_t k = 0; k < n; k++)
            if (strstr(names[k], "pct_of_peak")) {
                double x = value(h, &s.cd, i, names[k]);
                ck_assert(x >= 0 && x <= 100);
            }

    /* A phases file, read at each decode, wins over the environment. */
    snprintf(path, sizeof path, "%s/phases", tmpdir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "# START END settings\n%llu %llu idle " M_PCIE_RD "=3e10\n",
            (unsigned long long)(T0 + 2 * SEC), (unsigned long long)(T0 + 3 * SEC));
    fclose(f);
    setenv("FAKEPM_PHASES_FILE", path, 1);
    clock_set(T0 + 3 * SEC);
    ck_assert_int_eq(cd_init(s.o, &s.cd), CUPTI_SUCCESS);
    ck_assert_int_eq(decode(s.o, &s.cd, NULL, NULL), CUPTI_SUCCESS);
    ck_assert_uint_eq(count(&s.cd), 10);
    ASSERT_VALUE(h, &s.cd, 3, M_PCIE_RD, 3e10);
    ASSERT_VALUE(h, &s.cd, 3, M_DRAM, 1.5);
    ASSERT_VALUE(h, &s.cd, 3, M_SM, 0.5);
    host_free(h);
    sess_end(&s);
}
END_TEST

static void touch(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* "Another profiler holds the device": HARDWARE_BUSY from GetCounterAvailability and
 * SetConfig while the file exists, re-checked at each call. */
START_TEST(test_busy_file)
{
    CUpti_PmSampling_Object *o0, *o1;
    char path[128];
    uint8_t *cfg;
    size_t size;

    setenv("FAKEPM_DEVICES", "2", 1);
    init_all();
    snprintf(path, sizeof path, "%s/busy", tmpdir);
    setenv("FAKEPM_BUSY_FILE", path, 1);
    cfg = config(core, NCORE, &size);
    ck_assert_int_eq(avail(0, NULL), CUPTI_SUCCESS);
    touch(path, "");
    ck_assert_int_eq(avail(0, NULL), CUPTI_ERROR_HARDWARE_BUSY);
    ck_assert_int_eq(avail(1, NULL), CUPTI_ERROR_HARDWARE_BUSY);
    ck_assert_int_eq(enable(0, &o0), CUPTI_SUCCESS);
    ck_assert_int_eq(enable(1, &o1), CUPTI_SUCCESS);
    ck_assert_int_eq(set_config(o0, cfg, size, 1 << 20, MS, TIME, OLDEST),
                     CUPTI_ERROR_HARDWARE_BUSY);
    touch(path, "1\n");
    ck_assert_int_eq(avail(0, NULL), CUPTI_SUCCESS);
    ck_assert_int_eq(avail(1, NULL), CUPTI_ERROR_HARDWARE_BUSY);
    ck_assert_int_eq(set_config(o1, cfg, size, 1 << 20, MS, TIME, OLDEST),
                     CUPTI_ERROR_HARDWARE_BUSY);
    ck_assert_int_eq(set_config(o0, cfg, size, 1 << 20, MS, TIME, OLDEST), CUPTI_SUCCESS);
    /* This process samples device 0 now: it is busy for the availability query. */
    ck_assert_int_eq(avail(0, NULL), CUPTI_ERROR_HARDWARE_BUSY);
    unlink(path);
    ck_assert_int_eq(set_config(o1, cfg, size, 1 << 20, MS, TIME, OLDEST), CUPTI_SUCCESS);
    ck_assert_int_eq(disable(o0), CUPTI_SUCCESS);
    ck_assert_int_eq(avail(0, NULL), CUPTI_SUCCESS);
    free(cfg);
}
END_TEST

START_TEST(test_privileges)
{
    CUpti_PmSampling_Object *o;
    uint8_t *cfg;
    size_t size;

    init_all();
    cfg = config(core, NCORE, &size);
    setenv("FAKEPM_ADMIN_ONLY", "1", 1); /* RmProfilingAdminOnly=1 */
    ck_assert_int_eq(avail(0, NULL),
                     geteuid() == 0 ? CUPTI_SUCCESS : CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
    setenv("FAKEPM_ADMIN_ONLY", "all", 1);
    ck_assert_int_eq(avail(0, NULL), CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
    ck_assert_int_eq(enable(0, &o), CUPTI_SUCCESS);
    ck_assert_int_eq(set_config(o, cfg, size, 1 << 20, MS, TIME, OLDEST),
                     CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
    unsetenv("FAKEPM_ADMIN_ONLY");
    ck_assert_int_eq(set_config(o, cfg, size, 1 << 20, MS, TIME, OLDEST), CUPTI_SUCCESS);
    free(cfg);
}
END_TEST

static void wait_byte(int fd, char want)
{
    char c = 0;
    ck_assert_int_eq(read(fd, &c, 1), 1);
    ck_assert_int_eq(c, want);
}

/* A child process samples device 0: this one's GetCounterAvailability and SetConfig on it
 * get HARDWARE_BUSY (its Enable succeeds), device 1 is free; once the child disabled,
 * device 0 is free too.  Without FAKEPM_DIR the processes do not see each other. */
START_TEST(test_other_process)
{
    int up[2], down[2], status;
    CUpti_PmSampling_Object *o, *o1;
    uint8_t *cfg;
    size_t size;
    pid_t pid;

    for (int with_dir = 1; with_dir >= 0; with_dir--) {
        if (!with_dir) { /* a fresh start for the second round */
            teardown();
            setup();
        }
        setenv("FAKEPM_DEVICES", "2", 1);
        if (with_dir)
            setenv("FAKEPM_DIR", tmpdir, 1);
        cfg = config(core, NCORE, &size);
        ck_assert_int_eq(pipe(up), 0);
        ck_assert_int_eq(pipe(down), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            CUpti_PmSampling_Object *co = NULL;
            char c;
            int ok = 1;
            init_all();
            ok &= enable(0, &co) == CUPTI_SUCCESS;
            ok &= set_config(co, cfg, size, 1 << 20, MS, TIME, OLDEST) == CUPTI_SUCCESS;
            ok &= start(co) == CUPTI_SUCCESS;
            c = ok ? 'r' : 'x';
            if (write(up[1], &c, 1) != 1 || read(down[0], &c, 1) != 1)
                _exit(2);
            ok &= disable(co) == CUPTI_SUCCESS;
            c = ok ? 'd' : 'x';
            _exit(write(up[1], &c, 1) == 1 && ok ? 0 : 1);
        }
        wait_byte(up[0], 'r');
        init_all();
        ck_assert_int_eq(enable(0, &o), CUPTI_SUCCESS);
        ck_assert_int_eq(enable(1, &o1), CUPTI_SUCCESS);
        ck_assert_int_eq(avail(1, NULL), CUPTI_SUCCESS);
        ck_assert_int_eq(set_config(o1, cfg, size, 1 << 20, MS, TIME, OLDEST), CUPTI_SUCCESS);
        if (with_dir) {
            ck_assert_int_eq(avail(0, NULL), CUPTI_ERROR_HARDWARE_BUSY);
            ck_assert_int_eq(set_config(o, cfg, size, 1 << 20, MS, TIME, OLDEST),
                             CUPTI_ERROR_HARDWARE_BUSY);
        } else {
            ck_assert_int_eq(avail(0, NULL), CUPTI_SUCCESS);
            ck_assert_int_eq(set_config(o, cfg, size, 1 << 20, MS, TIME, OLDEST), CUPTI_SUCCESS);
        }
        ck_assert_int_eq(write(down[1], "g", 1), 1);
        wait_byte(up[0], 'd');
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ck_assert_int_eq(set_config(o, cfg, size, 1 << 20, MS, TIME, OLDEST), CUPTI_SUCCESS);
        close(up[0]);
        close(up[1]);
        close(down[0]);
        close(down[1]);
        free(cfg);
    }
}
END_TEST

START_TEST(test_result_strings_and_log)
{
    const char *s = NULL;
    struct sess ss;
    ck_assert_int_eq(cuptiGetResultString(CUPTI_ERROR_HARDWARE_BUSY, &s), CUPTI_SUCCESS);
    ck_assert_str_eq(s, "CUPTI_ERROR_HARDWARE_BUSY");
    ck_assert_int_eq(cuptiGetResultString(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, &s), CUPTI_SUCCESS);
    ck_assert_str_eq(s, "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");
    ck_assert_int_eq(cuptiGetResultString(CUPTI_ERROR_UNKNOWN, &s), CUPTI_SUCCESS);
    ck_assert_str_eq(s, "CUPTI_ERROR_UNKNOWN");
    ck_assert_int_eq(cuptiGetResultString((CUptiResult)12345, &s), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(cuptiGetResultString(CUPTI_SUCCESS, NULL), CUPTI_ERROR_INVALID_PARAMETER);
    ck_assert_int_eq(cuptiGetTimestamp(NULL), CUPTI_ERROR_INVALID_PARAMETER);

    /* The log does not change what happens. */
    setenv("FAKEPM_LOG", "1", 1);
    init_all();
    ss = sess_start(core, NCORE, 10 * MS, 1 << 20, OLDEST, 100);
    clock_set(T0 + SEC);
    ck_assert_int_eq(decode(ss.o, &ss.cd, NULL, NULL), CUPTI_SUCCESS);
    ck_assert_uint_eq(count(&ss.cd), 100);
    sess_end(&ss);
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("fakepm");
    TCase *tc = tcase_create("pm-sampling-double");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_exports);
    tcase_add_test(tc, test_cuda_driver);
    tcase_add_test(tc, test_order);
    tcase_add_test(tc, test_struct_size);
    tcase_add_test(tc, test_host_api);
    tcase_add_test(tc, test_sample_times);
    tcase_add_test(tc, test_clock_file);
    tcase_add_test(tc, test_sysclk_interval);
    tcase_add_test(tc, test_real_clock);
    tcase_add_test(tc, test_counter_data_full);
    tcase_add_test(tc, test_counter_data_metrics);
    tcase_add_test(tc, test_overflow);
    tcase_add_test(tc, test_phases);
    tcase_add_test(tc, test_busy_file);
    tcase_add_test(tc, test_privileges);
    tcase_add_test(tc, test_other_process);
    tcase_add_test(tc, test_result_strings_and_log);
    suite_add_tcase(s, tc);
    return s;
}
