// pm-load: a GPU workload with known phases, for pm-probe (issue 34).
//
//   pm-load calibrate             iteration counts for ~2 s per phase (wmma ~1 s)
//   pm-load run S G [W] [--activity]
//                                 idle 0.3 s, stream phase (S triad
//                                 iterations, memory bound), idle 0.5 s,
//                                 gemm phase (G fp16 GEMMs on tensor cores),
//                                 and when the gemm phase is cuBLAS (Hopper
//                                 GMMA) idle 0.5 s + wmma phase (W GEMMs of
//                                 the WMMA kernel: HMMA, mma.sync), then
//                                 idle 0.5 s, h2d phase (64 pinned 256 MiB
//                                 host-to-device copies), idle 0.5 s, d2h
//                                 phase (64 device-to-host), idle 0.3 s
//                                 (PCIe direction vs pcie__read/write_bytes);
//                                 --activity also keeps CUPTI
//                                 kernel activity tracing on in this process
//                                 (what cuptimon's shim does in every job)
//   pm-load small                 2 triads + 2 WMMA GEMMs, small (for ncu)
//   pm-load ref                   2 of each kernel of `run`, at run's sizes:
//                                 Nsight Compute's per-kernel figures to hold
//                                 the sampled phases against (pm-case)
//   pm-load clock                 GPU %globaltimer vs CLOCK_REALTIME vs
//                                 cuptiGetTimestamp, in one process
//
// Output lines start with "PMLOAD ": "PMLOAD phase name=... start_rt=NS
// end_rt=NS wall_ms=..." (CLOCK_REALTIME ns) and "PMLOAD clock ...
// gt_minus_rt=NS" are read by pm-probe --phases-from.
//
// The GEMM phase uses cuBLAS (libcublas.so.13, dlopen'ed) when it loads and
// a shared-memory WMMA kernel (sm_90 tensor cores) when it does not.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cublas_v2.h> /* types and enums only: the library is dlopen'ed */
#include <cupti.h>     /* types only: libcupti is dlopen'ed for --activity/clock */
#include <dlfcn.h>
#include <inttypes.h>
#include <mma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

using namespace nvcuda;

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "PMLOAD error %s at %s:%d: %s\n", #x, __FILE__, __LINE__,              \
                    cudaGetErrorString(e_));                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static uint64_t rt_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

// ---------------------------------------------------------------- kernels
__global__ void triad(float4 *__restrict__ a, const float4 *__restrict__ b, const float4 *__restrict__ c,
                      size_t n, float s)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float4 x = b[i], y = c[i];
        a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
    }
}

__global__ void fill_half(half *p, size_t n, float v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = __float2half(v * (float)((i * 2654435761u) % 17) / 17.0f);
}

__global__ void fill_float4(float4 *p, size_t n, float v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = make_float4(v, v, v, v);
}

// C[MxN] (row major, fp32) = A[MxK] (row major) * B (stored as N rows of K,
// i.e. column major KxN); M, N multiples of 64, K multiple of 32.
#define BM 64
#define BN 64
#define BK 32
#define LDS (BK + 8)
__global__ void __launch_bounds__(128) wmma_gemm(const half *__restrict__ A, const half *__restrict__ B,
                                                 float *__restrict__ C, int M, int N, int K)
{
    __shared__ __align__(128) half As[BM * LDS];
    __shared__ __align__(128) half Bs[BN * LDS];
    int warp = threadIdx.x / 32;
    int wm = warp / 2, wn = warp % 2;
    int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            wmma::fill_fragment(acc[i][j], 0.0f);
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int t = threadIdx.x; t < BM * BK / 8; t += 128) {
            int r = t / (BK / 8), c = (t % (BK / 8)) * 8;
            *(uint4 *)&As[r * LDS + c] = *(const uint4 *)&A[(size_t)(bm + r) * K + k0 + c];
            *(uint4 *)&Bs[r * LDS + c] = *(const uint4 *)&B[(size_t)(bn + r) * K + k0 + c];
        }
        __syncthreads();
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b[2];
            for (int i = 0; i < 2; i++)
                wmma::load_matrix_sync(a[i], &As[(wm * 32 + i * 16) * LDS + kk], LDS);
            for (int j = 0; j < 2; j++)
                wmma::load_matrix_sync(b[j], &Bs[(wn * 32 + j * 16) * LDS + kk], LDS);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++)
                    wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            wmma::store_matrix_sync(&C[(size_t)(bm + wm * 32 + i * 16) * N + bn + wn * 32 + j * 16], acc[i][j], N,
                                    wmma::mem_row_major);
}

__global__ void read_globaltimer(unsigned long long *out)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    *out = t;
}

// ------------------------------------------------------------- cuBLAS
typedef cublasStatus_t (*create_t)(cublasHandle_t *);
typedef cublasStatus_t (*gemmex_t)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                                   const void *, cudaDataType, int, const void *, cudaDataType, int, const void *,
                                   void *, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
static struct {
    void *h;
    cublasHandle_t handle;
    gemmex_t gemm;
} blas;

static int blas_open(void)
{
    if (getenv("PMLOAD_NO_CUBLAS"))
        return -1;
    blas.h = dlopen("libcublas.so.13", RTLD_NOW);
    if (!blas.h) {
        printf("PMLOAD info cuBLAS not loadable (%s): using the WMMA kernel\n", dlerror());
        return -1;
    }
    create_t create = (create_t)dlsym(blas.h, "cublasCreate_v2");
    blas.gemm = (gemmex_t)dlsym(blas.h, "cublasGemmEx");
    if (!create || !blas.gemm || create(&blas.handle) != CUBLAS_STATUS_SUCCESS) {
        printf("PMLOAD info cuBLAS init failed: using the WMMA kernel\n");
        blas.gemm = NULL;
        return -1;
    }
    return 0;
}

// ---------------------------------------------------------- workload
struct work {
    size_t n4;     // float4 elements per stream array
    float4 *a, *b, *c;
    int gm;        // GEMM size (square)
    half *A, *B, *Ch;
    float *Cf;
    int use_blas;
    int wm;        // WMMA GEMM size
    float *Cw;
    void *pinned;  // 256 MiB pinned host buffer for the PCIe phases
};

static void work_init(struct work *w, size_t bytes_per_array, int gm)
{
    w->n4 = bytes_per_array / sizeof(float4);
    CK(cudaMalloc(&w->a, w->n4 * sizeof(float4)));
    CK(cudaMalloc(&w->b, w->n4 * sizeof(float4)));
    CK(cudaMalloc(&w->c, w->n4 * sizeof(float4)));
    fill_float4<<<1024, 256>>>(w->b, w->n4, 1.0f);
    fill_float4<<<1024, 256>>>(w->c, w->n4, 2.0f);
    w->gm = gm;
    size_t e = (size_t)gm * gm;
    CK(cudaMalloc(&w->A, e * sizeof(half)));
    CK(cudaMalloc(&w->B, e * sizeof(half)));
    CK(cudaMalloc(&w->Ch, e * sizeof(half)));
    CK(cudaMalloc(&w->Cf, e * sizeof(float)));
    w->wm = gm < 4096 ? gm : 4096; // the WMMA phase reuses A and B (top-left part)
    CK(cudaMalloc(&w->Cw, (size_t)w->wm * w->wm * sizeof(float)));
    fill_half<<<1024, 256>>>(w->A, e, 0.5f);
    fill_half<<<1024, 256>>>(w->B, e, 0.25f);
    CK(cudaDeviceSynchronize());
}

static void stream_iter(struct work *w)
{
    triad<<<132 * 8, 512>>>(w->a, w->b, w->c, w->n4, 3.0f);
}

static void gemm_iter(struct work *w)
{
    if (w->use_blas) {
        const float one = 1.0f, zero = 0.0f;
        blas.gemm(blas.handle, CUBLAS_OP_N, CUBLAS_OP_N, w->gm, w->gm, w->gm, &one, w->A, CUDA_R_16F, w->gm, w->B,
                  CUDA_R_16F, w->gm, &zero, w->Ch, CUDA_R_16F, w->gm, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    } else {
        dim3 grid(w->gm / BN, w->gm / BM);
        wmma_gemm<<<grid, 128>>>(w->A, w->B, w->Cf, w->gm, w->gm, w->gm);
    }
}

static void wmma_iter(struct work *w)
{
    dim3 grid(w->wm / BN, w->wm / BM);
    wmma_gemm<<<grid, 128>>>(w->A, w->B, w->Cw, w->wm, w->wm, w->wm);
}

#define PCIE_BYTES ((size_t)256 << 20)
static void h2d_iter(struct work *w)
{
    cudaMemcpyAsync(w->a, w->pinned, PCIE_BYTES, cudaMemcpyHostToDevice, 0);
}
static void d2h_iter(struct work *w)
{
    cudaMemcpyAsync(w->pinned, w->a, PCIE_BYTES, cudaMemcpyDeviceToHost, 0);
}

static double time_iters(struct work *w, void (*f)(struct work *), int n)
{
    CK(cudaDeviceSynchronize());
    uint64_t t0 = rt_ns();
    for (int i = 0; i < n; i++)
        f(w);
    CK(cudaDeviceSynchronize());
    return (double)(rt_ns() - t0) / 1e6;
}

static void phase(struct work *w, const char *name, void (*f)(struct work *), long iters, double per_iter_units,
                  const char *unit)
{
    CK(cudaDeviceSynchronize());
    uint64_t s = rt_ns();
    for (long i = 0; i < iters; i++)
        f(w);
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    uint64_t e = rt_ns();
    double ms = (double)(e - s) / 1e6;
    printf("PMLOAD phase name=%s start_rt=%" PRIu64 " end_rt=%" PRIu64 " wall_ms=%.3f iters=%ld rate=%.1f%s\n", name,
           s, e, ms, iters, per_iter_units * iters / (ms / 1e3), unit);
    fflush(stdout);
}

// ------------------------------------------------------------ CUPTI
static void *cupti_h;
static void *cupti_sym(const char *n)
{
    if (!cupti_h)
        cupti_h = dlopen("libcupti.so.13", RTLD_NOW);
    return cupti_h ? dlsym(cupti_h, n) : NULL;
}

static size_t g_kernel_records;
static void CUPTIAPI buf_req(uint8_t **buf, size_t *size, size_t *max)
{
    *size = 8 << 20;
    *buf = (uint8_t *)aligned_alloc(8, *size);
    *max = 0;
}
static void CUPTIAPI buf_done(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid)
{
    typedef CUptiResult (*next_t)(uint8_t *, size_t, CUpti_Activity **);
    static next_t next = (next_t)cupti_sym("cuptiActivityGetNextRecord");
    CUpti_Activity *r = NULL;
    while (next && next(buf, valid, &r) == CUPTI_SUCCESS)
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL)
            g_kernel_records++;
    free(buf);
}

static int activity_on(void)
{
    typedef CUptiResult (*reg_t)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    typedef CUptiResult (*en_t)(CUpti_ActivityKind);
    reg_t reg = (reg_t)cupti_sym("cuptiActivityRegisterCallbacks");
    en_t en = (en_t)cupti_sym("cuptiActivityEnable");
    if (!reg || !en) {
        printf("PMLOAD activity libcupti.so.13 not loadable\n");
        return -1;
    }
    int r1 = reg(buf_req, buf_done);
    int r2 = en(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    printf("PMLOAD activity register rc=%d enable(CONCURRENT_KERNEL) rc=%d\n", r1, r2);
    return r1 || r2 ? -1 : 0;
}

static void activity_off(void)
{
    typedef CUptiResult (*flush_t)(uint32_t);
    flush_t flush = (flush_t)cupti_sym("cuptiActivityFlushAll");
    if (flush)
        flush(1);
    printf("PMLOAD activity kernel_records=%zu\n", g_kernel_records);
}

static void clock_line(int with_cupti)
{
    unsigned long long *d, h = 0;
    CK(cudaMalloc(&d, sizeof *d));
    read_globaltimer<<<1, 1>>>(d);
    CK(cudaDeviceSynchronize());
    uint64_t best_w = UINT64_MAX, best_mid = 0, best_gt = 0;
    for (int i = 0; i < 20; i++) {
        uint64_t t0 = rt_ns();
        read_globaltimer<<<1, 1>>>(d);
        CK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
        uint64_t t1 = rt_ns();
        if (t1 - t0 < best_w) {
            best_w = t1 - t0;
            best_mid = (t0 + t1) / 2;
            best_gt = h;
        }
    }
    CK(cudaFree(d));
    printf("PMLOAD clock gt_ns=%llu rt_mid=%" PRIu64 " window_ns=%" PRIu64 " gt_minus_rt=%" PRId64,
           (unsigned long long)best_gt, best_mid, best_w, (int64_t)(best_gt - best_mid));
    if (with_cupti) {
        typedef CUptiResult (*ts_t)(uint64_t *);
        ts_t ts = (ts_t)cupti_sym("cuptiGetTimestamp");
        uint64_t c = 0;
        if (ts) {
            uint64_t r0 = rt_ns();
            ts(&c);
            uint64_t r1 = rt_ns();
            printf(" cupti_ts=%" PRIu64 " cupti_minus_rt=%" PRId64 " cupti_minus_gt_approx=%" PRId64, c,
                   (int64_t)(c - (r0 + r1) / 2), (int64_t)(c - ((r0 + r1) / 2 + (best_gt - best_mid))));
        } else {
            printf(" cupti_ts=unavailable");
        }
    }
    printf("\n");
    fflush(stdout);
}

static void sleep_ms(int ms) { usleep(ms * 1000); }

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "run";
    int activity = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--activity"))
            activity = 1;
    uint64_t t_start = rt_ns();
    if (activity && activity_on())
        printf("PMLOAD activity could not be enabled; going on\n");
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("PMLOAD device name=\"%s\" sm=%d.%d sms=%d init_ms=%.1f\n", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount, (rt_ns() - t_start) / 1e6);

    if (!strcmp(mode, "clock")) {
        clock_line(1);
        return 0;
    }
    struct work w;
    memset(&w, 0, sizeof w);
    if (!strcmp(mode, "small")) {
        work_init(&w, 64 << 20, 1024);
        w.use_blas = 0;
        stream_iter(&w);
        stream_iter(&w);
        gemm_iter(&w);
        gemm_iter(&w);
        CK(cudaDeviceSynchronize());
        printf("PMLOAD small done\n");
        return 0;
    }
    w.use_blas = blas_open() == 0;
    work_init(&w, (size_t)1 << 30, w.use_blas ? 8192 : 4096);
    if (!strcmp(mode, "ref")) {
        for (int i = 0; i < 2; i++) {
            stream_iter(&w);
            gemm_iter(&w);
            if (w.use_blas)
                wmma_iter(&w);
        }
        CK(cudaDeviceSynchronize());
        printf("PMLOAD ref done gemm=%s\n", w.use_blas ? "cublas" : "wmma");
        return 0;
    }
    double stream_gb = 3.0 * w.n4 * sizeof(float4) / 1e9;
    double gemm_tf = 2.0 * w.gm * (double)w.gm * w.gm / 1e12;
    double wmma_tf = 2.0 * w.wm * (double)w.wm * w.wm / 1e12;
    printf("PMLOAD gemm impl=%s size=%d\n", w.use_blas ? "cublasGemmEx-fp16" : "wmma-fp16-fp32acc", w.gm);
    if (!strcmp(mode, "calibrate")) {
        time_iters(&w, stream_iter, 10);
        time_iters(&w, gemm_iter, 5);
        time_iters(&w, wmma_iter, 5);
        double s = time_iters(&w, stream_iter, 50) / 50;
        double g = time_iters(&w, gemm_iter, 20) / 20;
        double m = time_iters(&w, wmma_iter, 20) / 20;
        long si = (long)(2000.0 / s), gi = (long)(2000.0 / g), wi = w.use_blas ? (long)(1000.0 / m) : 0;
        printf("PMLOAD calib stream_ms_per_iter=%.4f (%.0f GB/s) gemm_ms_per_iter=%.4f (%.1f TFLOP/s) "
               "wmma_ms_per_iter=%.4f (%.1f TFLOP/s)\n",
               s, stream_gb / (s / 1e3), g, gemm_tf / (g / 1e3), m, wmma_tf / (m / 1e3));
        printf("PMLOAD calib stream_iters=%ld gemm_iters=%ld wmma_iters=%ld\n", si < 1 ? 1 : si, gi < 1 ? 1 : gi,
               wi < 0 ? 0 : wi);
        return 0;
    }
    if (strcmp(mode, "run") || argc < 4) {
        fprintf(stderr, "usage: pm-load calibrate | run STREAM_ITERS GEMM_ITERS [WMMA_ITERS] [--activity] | small | ref | clock\n");
        return 2;
    }
    long si = atol(argv[2]), gi = atol(argv[3]);
    long wi = argc > 4 && argv[4][0] != '-' ? atol(argv[4]) : 0;
    time_iters(&w, stream_iter, 3);
    time_iters(&w, gemm_iter, 2);
    time_iters(&w, wmma_iter, 2);
    clock_line(activity);
    sleep_ms(300);
    phase(&w, "stream", stream_iter, si, stream_gb, "GB/s");
    sleep_ms(500);
    phase(&w, "gemm", gemm_iter, gi, gemm_tf, "TFLOP/s");
    if (w.use_blas && wi > 0) {
        sleep_ms(500);
        phase(&w, "wmma", wmma_iter, wi, wmma_tf, "TFLOP/s");
    }
    if (cudaMallocHost(&w.pinned, PCIE_BYTES) == cudaSuccess) {
        memset(w.pinned, 1, PCIE_BYTES);
        sleep_ms(500);
        phase(&w, "h2d", h2d_iter, 64, PCIE_BYTES / 1e9, "GB/s");
        sleep_ms(500);
        phase(&w, "d2h", d2h_iter, 64, PCIE_BYTES / 1e9, "GB/s");
    } else {
        printf("PMLOAD info cudaMallocHost failed: no PCIe phases\n");
        cudaGetLastError();
    }
    sleep_ms(300);
    if (activity)
        activity_off();
    printf("PMLOAD total_ms=%.1f\n", (rt_ns() - t_start) / 1e6);
    return 0;
}
