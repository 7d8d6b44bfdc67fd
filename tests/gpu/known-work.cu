/*
 * known-work: a CUDA program whose GPU work is known exactly, for the cuptimon
 * GPU suite (tests/gpu).  It launches K kernels spread over several templated,
 * namespaced, anonymous-namespace, struct-argument and extern "C" kernels on
 * two streams, memcpy H2D / D2H / D2D (and peer-to-peer when two GPUs can
 * reach each other), memsets, a CUDA graph captured from a stream and replayed
 * R times, NVTX ranges, and cuptimon's annotation API when the shim exports
 * it.  It writes a JSON report of exactly what it launched, then synchronises
 * and returns from main (the shim flushes at exit by itself).
 *
 *   nvcc -O2 -lineinfo -gencode arch=compute_90,code=sm_90 \
 *        -gencode arch=compute_90,code=compute_90 known-work.cu -o known-work -ldl
 *
 * Work layout (all counts go into the report):
 *   - individual launch i (0 <= i < K): kernel i % NK on stream (i / NK) % 2;
 *   - the graph: GRAPH_KERNELS kernels captured in order on stream 0
 *     ("s1"), instantiated once, replayed R times on s1;
 *   - memcpy: M of each of H2D, D2H, D2D (pinned host memory, async, stream
 *     j % 2 for the j-th of each kind), and M PtoP when a second device can
 *     be reached;
 *   - memset: M cudaMemsetAsync, stream j % 2.
 *
 * --list-kernels prints the kernel table as JSON without touching CUDA, so it
 * runs on a machine without a GPU.
 */
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the kernels -------------------------------------------------------- */

template <int N> __global__ void scale(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * (float)N;
}

namespace ns {
__global__ void add_one(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += 1.0f;
}
} // namespace ns

namespace {
/* nvcc gives anonymous-namespace kernels a per-file unique name
 * (_GLOBAL__N__<hash>...), so the mangled name is taken from
 * cudaFuncGetName at run time; the demangled form is fixed. */
__global__ void square(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * x[i];
}
} // namespace

struct Affine {
    float a, b;
};

__global__ void affine(float *x, Affine p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = p.a * x[i] + p.b;
}

namespace outer {
namespace inner {
template <typename T> __global__ void fill(T *x, T v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = v;
}
} // namespace inner
} // namespace outer

extern "C" __global__ void c_kernel(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] -= 1.0f;
}

/* ---- the table ------------------------------------------------------------ */

/* mangled: the literal device name (checked against the PTX by build.sh), or
 * NULL when only the run time knows it.  demangled: what a GNU demangler
 * (c++filt, cplus_demangle with DMGL_PARAMS | DMGL_ANSI, __cxa_demangle)
 * makes of it (also checked by build.sh). */
struct kdesc {
    const char *mangled;
    const char *demangled;
    const void *func;
};

enum { K_SCALE2, K_SCALE3, K_ADD_ONE, K_SQUARE, K_AFFINE, K_FILL, K_CKERNEL, NK };

static struct kdesc ktab[NK] = {
    {"_Z5scaleILi2EEvPfi", "void scale<2>(float*, int)", (const void *)scale<2>},
    {"_Z5scaleILi3EEvPfi", "void scale<3>(float*, int)", (const void *)scale<3>},
    {"_ZN2ns7add_oneEPfi", "ns::add_one(float*, int)", (const void *)ns::add_one},
    {NULL, "(anonymous namespace)::square(float*, int)", (const void *)square},
    {"_Z6affinePf6Affinei", "affine(float*, Affine, int)", (const void *)affine},
    {"_ZN5outer5inner4fillIfEEvPT_S2_i", "void outer::inner::fill<float>(float*, float, int)",
     (const void *)outer::inner::fill<float>},
    {"c_kernel", "c_kernel", (const void *)c_kernel},
};

/* The graph's kernels, in capture order. */
static const int graph_kernels[] = {K_SCALE3, K_ADD_ONE, K_FILL, K_AFFINE};
#define GRAPH_KERNELS ((int)(sizeof graph_kernels / sizeof graph_kernels[0]))

/* ---- options and counters -------------------------------------------------- */

static struct {
    long kernels, replays, memcpys, memsets, linger_ms;
    size_t bytes;
    int device, quiet, no_graph, no_nvtx, no_annotations, list;
    const char *report;
} opt = {200, 5, 4, 4, 0, 1 << 20, 0, 0, 0, 0, 0, 0, NULL};

enum { MK_HTOD, MK_DTOH, MK_DTOD, MK_PTOP, NMK };
static const char *const mk_name[NMK] = {"HtoD", "DtoH", "DtoD", "PtoP"};

static struct {
    long launches[NK][2];       /* individual launches per kernel and stream */
    long graph_per_replay[NK];  /* kernels of this name per graph replay */
    long graph_replays;
    long memcpy_count[NMK][2];
    unsigned long long memcpy_bytes[NMK];
    long memset_count[2];
    unsigned long long memset_bytes;
    long nvtx_ranges, nvtx_marks, annotations;
    const char *annotation_via;
    char runtime_name[NK][1024];
    unsigned long long stream_id[2];
    int stream_id_ok;
    int peer_device;
    char errors[4096];
    int nerrors;
} st = {};

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void note_error(const char *fmt, ...)
{
    size_t len = strlen(st.errors);
    va_list ap;
    if (len + 2 >= sizeof st.errors)
        return;
    if (len)
        st.errors[len++] = '\n';
    va_start(ap, fmt);
    vsnprintf(st.errors + len, sizeof st.errors - len, fmt, ap);
    va_end(ap);
    st.nerrors++;
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "known-work: %s failed at line %d: %s\n", #call, __LINE__,             \
                    cudaGetErrorString(e_));                                                       \
            exit(3);                                                                               \
        }                                                                                          \
    } while (0)

/* ---- cuptimon annotations (resolved at run time; optional) ------------------ */

typedef int (*push_fn)(const char *);
typedef int (*pop_fn)(void);
static push_fn ann_push;
static pop_fn ann_pop;

static int find_cuptimon(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *name = info->dlpi_name;
    if (name && strstr(name, "libcuptimon")) {
        snprintf((char *)data, 512, "%s", name);
        return 1;
    }
    return 0;
}

static void resolve_annotations(void)
{
    char path[512] = "";
    st.annotation_via = "absent";
    if (opt.no_annotations) {
        st.annotation_via = "disabled";
        return;
    }
    ann_push = (push_fn)dlsym(RTLD_DEFAULT, "cuptimon_push_annotation");
    ann_pop = (pop_fn)dlsym(RTLD_DEFAULT, "cuptimon_pop_annotation");
    if (ann_push && ann_pop) {
        st.annotation_via = "RTLD_DEFAULT";
        return;
    }
    /* Injected with CUDA_INJECTION64_PATH the shim is usually loaded
     * RTLD_LOCAL: find it among the loaded objects. */
    dl_iterate_phdr(find_cuptimon, path);
    if (path[0]) {
        void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
        if (h) {
            ann_push = (push_fn)dlsym(h, "cuptimon_push_annotation");
            ann_pop = (pop_fn)dlsym(h, "cuptimon_pop_annotation");
            if (ann_push && ann_pop) {
                st.annotation_via = "loaded-object";
                return;
            }
        }
    }
    ann_push = NULL;
    ann_pop = NULL;
}

static void range_push(const char *name)
{
    if (!opt.no_nvtx) {
        nvtxRangePushA(name);
        st.nvtx_ranges++;
    }
    if (ann_push) {
        ann_push(name);
        st.annotations++;
    }
}

static void range_pop(void)
{
    if (!opt.no_nvtx)
        nvtxRangePop();
    if (ann_pop)
        ann_pop();
}

/* ---- work ------------------------------------------------------------------ */

static void launch(int k, float *x, int n, cudaStream_t s)
{
    dim3 block(256), grid((unsigned)((n + 255) / 256));
    switch (k) {
    case K_SCALE2: scale<2><<<grid, block, 0, s>>>(x, n); break;
    case K_SCALE3: scale<3><<<grid, block, 0, s>>>(x, n); break;
    case K_ADD_ONE: ns::add_one<<<grid, block, 0, s>>>(x, n); break;
    case K_SQUARE: square<<<grid, block, 0, s>>>(x, n); break;
    case K_AFFINE: {
        Affine p = {0.5f, 0.25f};
        affine<<<grid, block, 0, s>>>(x, p, n);
        break;
    }
    case K_FILL: outer::inner::fill<float><<<grid, block, 0, s>>>(x, 1.0f, n); break;
    case K_CKERNEL: c_kernel<<<grid, block, 0, s>>>(x, n); break;
    }
}

static void json_str(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
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

static void print_table(FILE *f)
{
    fprintf(f, "{\"kernels\": [");
    for (int k = 0; k < NK; k++) {
        fprintf(f, "%s\n  {\"index\": %d, \"mangled\": ", k ? "," : "", k);
        json_str(f, ktab[k].mangled);
        fprintf(f, ", \"demangled\": ");
        json_str(f, ktab[k].demangled);
        int in_graph = 0;
        for (int g = 0; g < GRAPH_KERNELS; g++)
            in_graph += graph_kernels[g] == k;
        fprintf(f, ", \"per_graph_replay\": %d}", in_graph);
    }
    fprintf(f, "\n]}\n");
}

static int write_report(const char *path, uint64_t t_proc, uint64_t t0, uint64_t t1,
                        int ndev, const cudaDeviceProp *prop, int drv, int rtv)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "known-work: cannot write %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    const char *label = getenv("CUPTIMON_LABEL"), *rank = getenv("RANK");
    fprintf(f, "{\n  \"program\": \"known-work\",\n  \"schema\": 1,\n");
    fprintf(f, "  \"pid\": %ld,\n", (long)getpid());
    fprintf(f, "  \"label\": ");
    json_str(f, label);
    fprintf(f, ",\n  \"rank\": ");
    json_str(f, rank);
    fprintf(f, ",\n  \"device\": %d,\n  \"device_count\": %d,\n  \"device_name\": ", opt.device,
            ndev);
    json_str(f, prop->name);
    fprintf(f, ",\n  \"compute_capability\": \"%d.%d\",\n", prop->major, prop->minor);
    fprintf(f, "  \"driver_version\": %d,\n  \"runtime_version\": %d,\n", drv, rtv);
    fprintf(f, "  \"process_start_ns\": %llu,\n", (unsigned long long)t_proc);
    fprintf(f, "  \"start_ns\": %llu,\n  \"end_ns\": %llu,\n", (unsigned long long)t0,
            (unsigned long long)t1);
    fprintf(f, "  \"work_ns\": %llu,\n", (unsigned long long)(t1 - t0));
    fprintf(f, "  \"options\": {\"kernels\": %ld, \"graph_replays\": %ld, \"memcpys\": %ld, "
               "\"memsets\": %ld, \"bytes\": %zu},\n",
            opt.kernels, opt.no_graph ? 0 : opt.replays, opt.memcpys, opt.memsets, opt.bytes);
    fprintf(f, "  \"streams\": [{\"name\": \"s1\", \"id\": %llu}, {\"name\": \"s2\", \"id\": "
               "%llu}],\n  \"stream_ids_known\": %s,\n",
            st.stream_id[0], st.stream_id[1], st.stream_id_ok ? "true" : "false");
    long total = 0;
    fprintf(f, "  \"kernels\": [");
    for (int k = 0; k < NK; k++) {
        long indiv = st.launches[k][0] + st.launches[k][1];
        long graph = st.graph_per_replay[k] * st.graph_replays;
        total += indiv + graph;
        fprintf(f, "%s\n    {\"index\": %d, \"mangled\": ", k ? "," : "", k);
        json_str(f, ktab[k].mangled ? ktab[k].mangled : st.runtime_name[k]);
        fprintf(f, ", \"mangled_literal\": %s, \"mangled_runtime\": ",
                ktab[k].mangled ? "true" : "false");
        json_str(f, st.runtime_name[k][0] ? st.runtime_name[k] : NULL);
        fprintf(f, ", \"demangled\": ");
        json_str(f, ktab[k].demangled);
        fprintf(f, ",\n     \"launches\": %ld, \"graph_per_replay\": %ld, \"graph_total\": %ld, "
                   "\"total\": %ld, \"by_stream\": {\"s1\": %ld, \"s2\": %ld}}",
                indiv, st.graph_per_replay[k], graph, indiv + graph,
                st.launches[k][0] + graph, st.launches[k][1]);
    }
    fprintf(f, "\n  ],\n  \"kernels_total\": %ld,\n", total);
    fprintf(f, "  \"graph\": {\"replays\": %ld, \"kernels_per_replay\": %d, \"stream\": \"s1\", "
               "\"total_kernels\": %ld},\n",
            st.graph_replays, st.graph_replays ? GRAPH_KERNELS : 0,
            st.graph_replays * (st.graph_replays ? GRAPH_KERNELS : 0));
    fprintf(f, "  \"memcpy\": {");
    for (int m = 0; m < NMK; m++)
        fprintf(f, "%s\n    \"%s\": {\"count\": %ld, \"bytes\": %llu, \"by_stream\": {\"s1\": %ld, "
                   "\"s2\": %ld}}",
                m ? "," : "", mk_name[m], st.memcpy_count[m][0] + st.memcpy_count[m][1],
                st.memcpy_bytes[m], st.memcpy_count[m][0], st.memcpy_count[m][1]);
    fprintf(f, "\n  },\n  \"peer_device\": %d,\n", st.peer_device);
    fprintf(f, "  \"memset\": {\"count\": %ld, \"bytes\": %llu, \"by_stream\": {\"s1\": %ld, "
               "\"s2\": %ld}},\n",
            st.memset_count[0] + st.memset_count[1], st.memset_bytes, st.memset_count[0],
            st.memset_count[1]);
    fprintf(f, "  \"nvtx\": {\"ranges\": %ld},\n", st.nvtx_ranges);
    fprintf(f, "  \"annotations\": {\"via\": \"%s\", \"pushed\": %ld},\n", st.annotation_via,
            st.annotations);
    fprintf(f, "  \"errors\": ");
    json_str(f, st.errors);
    fprintf(f, "\n}\n");
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "known-work: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
"Usage: known-work [OPTION]...\n"
"CUDA work whose every kernel, copy and memset is known, for the cuptimon GPU suite.\n"
"\n"
"  -k, --kernels K        individual kernel launches (default 200)\n"
"  -r, --graph-replays R  replays of the captured CUDA graph (default 5)\n"
"  -G, --no-graph         no CUDA graph\n"
"  -m, --memcpys M        copies of each kind H2D, D2H, D2D (and PtoP) (default 4)\n"
"  -s, --memsets M        memsets (default 4)\n"
"  -b, --bytes B          bytes per copy and memset (default 1048576)\n"
"  -d, --device D         device to use (default 0)\n"
"  -o, --report FILE      write the JSON report to FILE (atomically, after the work)\n"
"  -l, --linger-ms MS     sleep MS ms after the report before exiting (default 0)\n"
"      --no-nvtx          no NVTX ranges\n"
"      --no-annotations   do not call cuptimon_push/pop_annotation\n"
"      --list-kernels     print the kernel table as JSON (no CUDA) and exit\n"
"  -q, --quiet            no summary line\n"
"  -h, --help             this help\n");
}

static long num(const char *s, long lo, long hi, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "known-work: %s '%s' must be a number in [%ld, %ld]\n", what, s, lo, hi);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    uint64_t t_proc = realtime_ns();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(s, l) (strcmp(a, s) == 0 || strcmp(a, l) == 0)
#define NEED()                                                                                     \
    do {                                                                                           \
        if (!v) {                                                                                  \
            fprintf(stderr, "known-work: %s needs a value\n", a);                                  \
            return 2;                                                                              \
        }                                                                                          \
        i++;                                                                                       \
    } while (0)
        if (ARG("-k", "--kernels")) { NEED(); opt.kernels = num(v, 0, 10000000, a); }
        else if (ARG("-r", "--graph-replays")) { NEED(); opt.replays = num(v, 0, 1000000, a); }
        else if (ARG("-G", "--no-graph")) opt.no_graph = 1;
        else if (ARG("-m", "--memcpys")) { NEED(); opt.memcpys = num(v, 0, 100000, a); }
        else if (ARG("-s", "--memsets")) { NEED(); opt.memsets = num(v, 0, 100000, a); }
        else if (ARG("-b", "--bytes")) { NEED(); opt.bytes = (size_t)num(v, 4, 1L << 30, a); }
        else if (ARG("-d", "--device")) { NEED(); opt.device = (int)num(v, 0, 64, a); }
        else if (ARG("-o", "--report")) { NEED(); opt.report = v; }
        else if (ARG("-l", "--linger-ms")) { NEED(); opt.linger_ms = num(v, 0, 3600000, a); }
        else if (strcmp(a, "--no-nvtx") == 0) opt.no_nvtx = 1;
        else if (strcmp(a, "--no-annotations") == 0) opt.no_annotations = 1;
        else if (strcmp(a, "--list-kernels") == 0) opt.list = 1;
        else if (ARG("-q", "--quiet")) opt.quiet = 1;
        else if (ARG("-h", "--help")) { usage(stdout); return 0; }
        else {
            fprintf(stderr, "known-work: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
#undef ARG
#undef NEED
    }
    if (opt.list) {
        print_table(stdout);
        return 0;
    }
    if (opt.no_graph)
        opt.replays = 0;

    /* ---- set-up (not part of the measured window) ---- */
    int ndev = 0, drv = 0, rtv = 0;
    CK(cudaGetDeviceCount(&ndev));
    if (opt.device >= ndev) {
        fprintf(stderr, "known-work: device %d does not exist (%d devices)\n", opt.device, ndev);
        return 2;
    }
    CK(cudaSetDevice(opt.device));
    CK(cudaFree(0)); /* the context; the shim starts at cuInit */
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rtv));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, opt.device));
    resolve_annotations();
    for (int k = 0; k < NK; k++) {
        const char *nm = NULL;
        if (cudaFuncGetName(&nm, ktab[k].func) == cudaSuccess && nm)
            snprintf(st.runtime_name[k], sizeof st.runtime_name[k], "%s", nm);
        else
            note_error("cudaFuncGetName failed for %s", ktab[k].demangled);
        if (ktab[k].mangled && st.runtime_name[k][0] && strcmp(st.runtime_name[k], ktab[k].mangled))
            note_error("kernel %d: cudaFuncGetName says %s, the table says %s", k,
                       st.runtime_name[k], ktab[k].mangled);
    }
    (void)cudaGetLastError();

    cudaStream_t s[2];
    CK(cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
    st.stream_id_ok = cudaStreamGetId(s[0], &st.stream_id[0]) == cudaSuccess &&
                      cudaStreamGetId(s[1], &st.stream_id[1]) == cudaSuccess;
    (void)cudaGetLastError();

    const int n = 1 << 16;
    float *x[2], *d0, *d1, *peer = NULL;
    void *h0, *h1;
    CK(cudaMalloc(&x[0], n * sizeof(float)));
    CK(cudaMalloc(&x[1], n * sizeof(float)));
    CK(cudaMalloc(&d0, opt.bytes));
    CK(cudaMalloc(&d1, opt.bytes));
    CK(cudaMallocHost(&h0, opt.bytes));
    CK(cudaMallocHost(&h1, opt.bytes));
    memset(h0, 1, opt.bytes);
    st.peer_device = -1;
    for (int p = 0; p < ndev && opt.memcpys > 0; p++) {
        int can = 0;
        if (p == opt.device || cudaDeviceCanAccessPeer(&can, opt.device, p) != cudaSuccess || !can)
            continue;
        if (cudaSetDevice(p) == cudaSuccess && cudaMalloc((void **)&peer, opt.bytes) == cudaSuccess) {
            st.peer_device = p;
        } else {
            peer = NULL;
        }
        CK(cudaSetDevice(opt.device));
        if (peer) {
            cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
            if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
                note_error("cudaDeviceEnablePeerAccess(%d): %s", p, cudaGetErrorString(e));
            (void)cudaGetLastError();
        }
        break;
    }

    /* The graph: captured from s1 before the window (capturing launches
     * nothing). */
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (opt.replays > 0) {
        CK(cudaStreamBeginCapture(s[0], cudaStreamCaptureModeThreadLocal));
        for (int g = 0; g < GRAPH_KERNELS; g++)
            launch(graph_kernels[g], x[0], n, s[0]);
        CK(cudaStreamEndCapture(s[0], &graph));
        CK(cudaGraphInstantiate(&exec, graph, 0));
        CK(cudaGraphUpload(exec, s[0]));
    }
    CK(cudaDeviceSynchronize());

    /* ---- the measured window ---- */
    uint64_t t0 = realtime_ns();
    range_push("known-work:kernels");
    for (long i = 0; i < opt.kernels; i++) {
        int k = (int)(i % NK), si = (int)((i / NK) % 2);
        launch(k, x[si], n, s[si]);
        st.launches[k][si]++;
    }
    CK(cudaGetLastError());
    range_pop();

    range_push("known-work:memcpy");
    for (long j = 0; j < opt.memcpys; j++) {
        int si = (int)(j % 2);
        CK(cudaMemcpyAsync(d0, h0, opt.bytes, cudaMemcpyHostToDevice, s[si]));
        st.memcpy_count[MK_HTOD][si]++;
        st.memcpy_bytes[MK_HTOD] += opt.bytes;
        CK(cudaMemcpyAsync(h1, d0, opt.bytes, cudaMemcpyDeviceToHost, s[si]));
        st.memcpy_count[MK_DTOH][si]++;
        st.memcpy_bytes[MK_DTOH] += opt.bytes;
        CK(cudaMemcpyAsync(d1, d0, opt.bytes, cudaMemcpyDeviceToDevice, s[si]));
        st.memcpy_count[MK_DTOD][si]++;
        st.memcpy_bytes[MK_DTOD] += opt.bytes;
        if (peer) {
            CK(cudaMemcpyPeerAsync(peer, st.peer_device, d0, opt.device, opt.bytes, s[si]));
            st.memcpy_count[MK_PTOP][si]++;
            st.memcpy_bytes[MK_PTOP] += opt.bytes;
        }
    }
    range_pop();

    range_push("known-work:memset");
    for (long j = 0; j < opt.memsets; j++) {
        int si = (int)(j % 2);
        CK(cudaMemsetAsync(d1, 0, opt.bytes, s[si]));
        st.memset_count[si]++;
        st.memset_bytes += opt.bytes;
    }
    range_pop();

    if (exec) {
        range_push("known-work:graph");
        for (long r = 0; r < opt.replays; r++)
            CK(cudaGraphLaunch(exec, s[0]));
        for (int g = 0; g < GRAPH_KERNELS; g++)
            st.graph_per_replay[graph_kernels[g]]++;
        st.graph_replays = opt.replays;
        range_pop();
    }
    CK(cudaStreamSynchronize(s[0]));
    CK(cudaStreamSynchronize(s[1]));
    CK(cudaDeviceSynchronize());
    uint64_t t1 = realtime_ns();

    if (opt.report && write_report(opt.report, t_proc, t0, t1, ndev, &prop, drv, rtv) != 0)
        return 1;
    if (!opt.quiet) {
        long total = 0;
        for (int k = 0; k < NK; k++)
            total += st.launches[k][0] + st.launches[k][1] + st.graph_per_replay[k] * st.graph_replays;
        printf("known-work: pid %ld on %s: %ld kernels (%ld in %ld graph replays), "
               "%ld memcpys, %ld memsets in %.3f ms; annotations %s%s%s\n",
               (long)getpid(), prop.name, total, st.graph_replays * GRAPH_KERNELS, st.graph_replays,
               opt.memcpys * (peer ? 4 : 3), opt.memsets, (double)(t1 - t0) / 1e6,
               st.annotation_via, st.nerrors ? "; errors: " : "", st.errors);
        fflush(stdout);
    }
    if (opt.linger_ms > 0) {
        struct timespec ts = {(time_t)(opt.linger_ms / 1000), (long)(opt.linger_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    /* Resources are left to process teardown on purpose: the shim's exit
     * flush runs like it would for a job that just returns from main. */
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    return 0;
}
