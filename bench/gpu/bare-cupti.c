/*
 * bare-cupti: the "bare CUPTI floor" of the job-side benchmark (bench/gpu).
 *
 * A CUDA injection library (CUDA_INJECTION64_PATH=bare-cupti.so) that turns on
 * the same CUPTI activity kinds as cuptimon and handles CUPTI's buffers in the
 * least work possible: a request gets a slot from a small preallocated,
 * pre-zeroed pool (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER is set, as
 * the shim does, so CUPTI never zeroes on the job's thread); a completion
 * zeroes the bytes CUPTI wrote and puts the slot back.  Nothing is read,
 * copied or sent.  Whatever the job pays under it is what CUPTI itself costs
 * for those kinds: the floor the shim is measured against.
 *
 * Kinds: CONCURRENT_KERNEL, MEMCPY, MEMSET (cuptimon's always-on set); with
 * BARE_CUPTI_WINDOW_KINDS=1 also RUNTIME, DRIVER, EXTERNAL_CORRELATION,
 * OVERHEAD, CUDA_EVENT, SYNCHRONIZATION (what a cuptimon trace window adds),
 * with the same noisy runtime/driver callbacks filtered out as the shim
 * filters (client-lib/shim.c, noisy_runtime / noisy_driver).
 *
 * libcupti is dlopen'ed as the shim does it: $CUPTIMON_LIBCUPTI_PATH, else a
 * libcupti already loaded in the process (PyTorch's wheel copy), else
 * libcupti.so.13 by soname, else $CUDA_HOME/targets/x86_64-linux/lib and
 * /usr/local/cuda/targets/x86_64-linux/lib.
 *
 * At exit: a forced flush (cuptiActivityFlushAll), then, with
 * BARE_CUPTI_REPORT=FILE, a one-object JSON report of what happened (which
 * libcupti, buffers, records CUPTI dropped, requests declined).
 *
 * Environment: BARE_CUPTI_WINDOW_KINDS=1, BARE_CUPTI_SLOTS (default 16),
 * BARE_CUPTI_SLOT_SIZE (bytes, default 4 MiB: the shim's defaults),
 * BARE_CUPTI_REPORT=FILE, BARE_CUPTI_DEBUG=1 (a line on stderr at start).
 *
 * Build (no GPU needed; nothing is linked against libcupti):
 *   gcc -O2 -shared -fPIC -I/usr/local/cuda/include bare-cupti.c -o bare-cupti.so -ldl -lpthread
 */
#define _GNU_SOURCE
#include <cupti.h>

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define BARE_API __attribute__((visibility("default")))

typedef CUptiResult(CUPTIAPI *register_fn)(CUpti_BuffersCallbackRequestFunc,
                                           CUpti_BuffersCallbackCompleteFunc);
typedef CUptiResult(CUPTIAPI *kind_fn)(CUpti_ActivityKind);
typedef CUptiResult(CUPTIAPI *flush_fn)(uint32_t);
typedef CUptiResult(CUPTIAPI *dropped_fn)(CUcontext, uint32_t, size_t *);
typedef CUptiResult(CUPTIAPI *setattr_fn)(CUpti_ActivityAttribute, size_t *, void *);
typedef CUptiResult(CUPTIAPI *version_fn)(uint32_t *);
typedef CUptiResult(CUPTIAPI *api_fn)(CUpti_CallbackId, uint8_t);

static struct {
    void *handle;
    char path[512];
    uint32_t version;
    register_fn RegisterCallbacks;
    kind_fn Enable;
    flush_fn FlushAll;
    dropped_fn GetNumDroppedRecords;
    setattr_fn SetAttribute;
    version_fn GetVersion;
    api_fn EnableRuntimeApi, EnableDriverApi;

    uint8_t *pool;
    size_t nslots, slot_size;
    pthread_mutex_t lock;
    uint32_t *free_stack; /* slot indexes; free_len of them are free */
    size_t free_len;

    int window_kinds, zeroed_attr, started;
    uint32_t kinds[16];
    int nkinds, enable_failures;
    atomic_ullong requested, completed, declined, dropped, bytes, max_valid, foreign;
} B = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int debug_on(void)
{
    const char *v = getenv("BARE_CUPTI_DEBUG");
    return v && *v && strcmp(v, "0") != 0;
}

#define warn(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "bare-cupti: " __VA_ARGS__);                                               \
        fputc('\n', stderr);                                                                       \
    } while (0)

static size_t env_size(const char *name, size_t dflt, size_t lo, size_t hi)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (*end == 'K' || *end == 'k')
        n <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        n <<= 20, end++;
    if (errno || *end || n < lo || n > hi) {
        warn("%s='%s' is not in %zu..%zu; using %zu", name, v, lo, hi, dflt);
        return dflt;
    }
    return (size_t)n;
}

/* ---- libcupti, resolved as the shim resolves it ---------------------------- */

static int find_loaded_cupti(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *name = info->dlpi_name;
    if (!name || !*name)
        return 0;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    /* libcupti.so[.N] or a variant like libcupti-fake.so; never libcuptimon. */
    if (strncmp(base, "libcupti", 8) == 0 && (base[8] == '.' || base[8] == '-') &&
        strstr(base, ".so")) {
        snprintf((char *)data, 512, "%s", name);
        return 1;
    }
    return 0;
}

static int load_cupti(void)
{
    const char *override = getenv("CUPTIMON_LIBCUPTI_PATH");
    char loaded[512] = "";
    if (override && *override) {
        B.handle = dlopen(override, RTLD_NOW | RTLD_GLOBAL);
        if (!B.handle) {
            warn("CUPTIMON_LIBCUPTI_PATH='%s' cannot be loaded: %s", override, dlerror());
            return -1;
        }
        snprintf(B.path, sizeof B.path, "%s", override);
    } else {
        dl_iterate_phdr(find_loaded_cupti, loaded);
        if (loaded[0] && (B.handle = dlopen(loaded, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL)))
            snprintf(B.path, sizeof B.path, "%s", loaded);
        if (!B.handle && (B.handle = dlopen("libcupti.so.13", RTLD_NOW | RTLD_GLOBAL)))
            snprintf(B.path, sizeof B.path, "libcupti.so.13");
        const char *roots[2] = {getenv("CUDA_HOME"), "/usr/local/cuda"};
        for (int r = 0; r < 2 && !B.handle; r++) {
            if (!roots[r] || roots[r][0] != '/')
                continue;
            snprintf(B.path, sizeof B.path, "%s/targets/x86_64-linux/lib/libcupti.so.13", roots[r]);
            B.handle = dlopen(B.path, RTLD_NOW | RTLD_GLOBAL);
        }
        if (!B.handle) {
            warn("libcupti not found (CUPTIMON_LIBCUPTI_PATH, loaded copy, libcupti.so.13, "
                 "$CUDA_HOME, /usr/local/cuda); not tracing");
            return -1;
        }
    }
#define SYM(field, name)                                                                           \
    do {                                                                                           \
        *(void **)&B.field = dlsym(B.handle, name);                                                \
        if (!B.field) {                                                                            \
            warn("%s has no %s; not tracing", B.path, name);                                       \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
    SYM(RegisterCallbacks, "cuptiActivityRegisterCallbacks");
    SYM(Enable, "cuptiActivityEnable");
    SYM(FlushAll, "cuptiActivityFlushAll");
    SYM(GetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
    SYM(SetAttribute, "cuptiActivitySetAttribute");
    SYM(GetVersion, "cuptiGetVersion");
#undef SYM
    *(void **)&B.EnableRuntimeApi = dlsym(B.handle, "cuptiActivityEnableRuntimeApi");
    *(void **)&B.EnableDriverApi = dlsym(B.handle, "cuptiActivityEnableDriverApi");
    if (B.GetVersion(&B.version) != CUPTI_SUCCESS)
        B.version = 0;
    return 0;
}

/* ---- the handler: a pool, nothing else -------------------------------------- */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *max_records = 0;
    atomic_fetch_add_explicit(&B.requested, 1, memory_order_relaxed);
    pthread_mutex_lock(&B.lock);
    if (B.free_len == 0) {
        pthread_mutex_unlock(&B.lock);
        /* Declining makes CUPTI drop records (counted): as the shim does. */
        atomic_fetch_add_explicit(&B.declined, 1, memory_order_relaxed);
        *buffer = NULL;
        *size = 0;
        return;
    }
    uint32_t idx = B.free_stack[--B.free_len];
    pthread_mutex_unlock(&B.lock);
    *buffer = B.pool + (size_t)idx * B.slot_size;
    *size = B.slot_size;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    (void)size;
    if (!buffer || buffer < B.pool || buffer >= B.pool + B.nslots * B.slot_size ||
        (size_t)(buffer - B.pool) % B.slot_size) {
        atomic_fetch_add_explicit(&B.foreign, 1, memory_order_relaxed);
        return;
    }
    size_t dropped = 0;
    if (B.GetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped)
        atomic_fetch_add_explicit(&B.dropped, dropped, memory_order_relaxed);
    if (valid > B.slot_size)
        valid = B.slot_size;
    memset(buffer, 0, valid); /* back pre-zeroed */
    atomic_fetch_add_explicit(&B.completed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&B.bytes, valid, memory_order_relaxed);
    unsigned long long mv = atomic_load_explicit(&B.max_valid, memory_order_relaxed);
    while (valid > mv && !atomic_compare_exchange_weak_explicit(
                             &B.max_valid, &mv, valid, memory_order_relaxed, memory_order_relaxed))
        ;
    uint32_t idx = (uint32_t)((size_t)(buffer - B.pool) / B.slot_size);
    pthread_mutex_lock(&B.lock);
    B.free_stack[B.free_len++] = idx;
    pthread_mutex_unlock(&B.lock);
}

/* The shim's filter (client-lib/shim.c): frequent calls a window leaves out. */
static const CUpti_CallbackId noisy_runtime[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020,
};
static const CUpti_CallbackId noisy_driver[] = {
    CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
};

static void enable(CUpti_ActivityKind k)
{
    CUptiResult rc = B.Enable(k);
    if (rc != CUPTI_SUCCESS) {
        warn("cuptiActivityEnable(%d) failed (%d)", (int)k, (int)rc);
        B.enable_failures++;
        return;
    }
    B.kinds[B.nkinds++] = (uint32_t)k;
    if (k == CUPTI_ACTIVITY_KIND_RUNTIME && B.EnableRuntimeApi)
        for (size_t i = 0; i < sizeof noisy_runtime / sizeof noisy_runtime[0]; i++)
            B.EnableRuntimeApi(noisy_runtime[i], 0);
    if (k == CUPTI_ACTIVITY_KIND_DRIVER && B.EnableDriverApi)
        for (size_t i = 0; i < sizeof noisy_driver / sizeof noisy_driver[0]; i++)
            B.EnableDriverApi(noisy_driver[i], 0);
}

static void write_report(int flush_rc)
{
    const char *path = getenv("BARE_CUPTI_REPORT");
    if (!path || !*path)
        return;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        warn("cannot write %s: %s", tmp, strerror(errno));
        return;
    }
    fprintf(f, "{\"program\": \"bare-cupti\", \"pid\": %ld, \"started\": %s, \"libcupti\": \"",
            (long)getpid(), B.started ? "true" : "false");
    for (const char *p = B.path; *p; p++)
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if ((unsigned char)*p >= 0x20)
            fputc(*p, f);
    fprintf(f, "\", \"cupti_version\": %u, \"window_kinds\": %s, \"kinds\": [", B.version,
            B.window_kinds ? "true" : "false");
    for (int i = 0; i < B.nkinds; i++)
        fprintf(f, "%s%u", i ? ", " : "", B.kinds[i]);
    fprintf(f,
            "], \"enable_failures\": %d, \"zeroed_attr\": %s, \"slots\": %zu, "
            "\"slot_size\": %zu, \"buffers_requested\": %llu, \"buffers_completed\": %llu, "
            "\"requests_declined\": %llu, \"dropped_records\": %llu, \"bytes_completed\": %llu, "
            "\"max_valid\": %llu, \"foreign_buffers\": %llu, \"exit_flush_rc\": %d}\n",
            B.enable_failures, B.zeroed_attr ? "true" : "false", B.nslots, B.slot_size,
            (unsigned long long)atomic_load(&B.requested),
            (unsigned long long)atomic_load(&B.completed),
            (unsigned long long)atomic_load(&B.declined),
            (unsigned long long)atomic_load(&B.dropped), (unsigned long long)atomic_load(&B.bytes),
            (unsigned long long)atomic_load(&B.max_valid),
            (unsigned long long)atomic_load(&B.foreign), flush_rc);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        warn("cannot write %s: %s", path, strerror(errno));
}

static void at_exit(void)
{
    int rc = -1;
    if (B.started)
        rc = (int)B.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    write_report(rc);
}

static int start(void)
{
    const char *w = getenv("BARE_CUPTI_WINDOW_KINDS");
    B.window_kinds = w && *w && strcmp(w, "0") != 0;
    B.nslots = env_size("BARE_CUPTI_SLOTS", 16, 2, 4096);
    B.slot_size = env_size("BARE_CUPTI_SLOT_SIZE", 4u << 20, 64u << 10, 256u << 20);
    B.slot_size = (B.slot_size + 4095) / 4096 * 4096;
    atexit(at_exit); /* the report says what went wrong, if anything did */
    if (load_cupti() < 0)
        return -1;
    /* Anonymous memory is zero: the pool starts pre-zeroed. */
    void *p = mmap(NULL, B.nslots * B.slot_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    B.free_stack = calloc(B.nslots, sizeof *B.free_stack);
    if (p == MAP_FAILED || !B.free_stack) {
        warn("cannot allocate the %zu x %zu-byte pool", B.nslots, B.slot_size);
        return -1;
    }
    B.pool = p;
    for (size_t i = B.nslots; i-- > 0;)
        B.free_stack[B.free_len++] = (uint32_t)i; /* slot 0 on top */
    uint8_t one = 1;
    size_t sz = sizeof one;
    B.zeroed_attr =
        B.SetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &one) == CUPTI_SUCCESS;
    if (B.RegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
        warn("cuptiActivityRegisterCallbacks failed; not tracing");
        return -1;
    }
    enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    enable(CUPTI_ACTIVITY_KIND_MEMCPY);
    enable(CUPTI_ACTIVITY_KIND_MEMSET);
    if (B.window_kinds) {
        enable(CUPTI_ACTIVITY_KIND_RUNTIME);
        enable(CUPTI_ACTIVITY_KIND_DRIVER);
        enable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
        enable(CUPTI_ACTIVITY_KIND_OVERHEAD);
        enable(CUPTI_ACTIVITY_KIND_CUDA_EVENT);
        enable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
    }
    B.started = 1;
    if (debug_on())
        warn("tracing with %s (CUPTI %u), %d kinds%s, pool %zu x %zu bytes, zeroed attr %s", B.path,
             B.version, B.nkinds, B.window_kinds ? " (window set)" : "", B.nslots, B.slot_size,
             B.zeroed_attr ? "set" : "not supported");
    return 0;
}

static void start_once(void)
{
    (void)start();
}

/* Called by the CUDA driver at cuInit (CUDA_INJECTION64_PATH); the driver
 * ignores the value, 1 means "initialized". */
BARE_API int InitializeInjection(void);
BARE_API int InitializeInjection(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, start_once);
    return 1;
}
