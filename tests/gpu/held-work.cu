/*
 * held-work: one kernel that runs for seconds on a stream of its own (a
 * straggler, a collective waiting for another rank, a persistent kernel)
 * while another stream launches a tiny kernel flat out, for
 * tests/gpu/held-case.sh (issue 33).  CUPTI completes records in launch
 * order, so every record launched during the long kernel waits in buffers
 * CUPTI holds until it ends.
 *
 * usage: held-work --report FILE [--hold-s S] [--seconds T] [--copy-every N]
 *                  [--no-warmup]
 *   --hold-s S     the long kernel's length (0: none, the control run)
 *   --seconds T    how long the other stream launches (default S + 1)
 *   --copy-every N a 64 KiB device-to-device copy and a memset after every
 *                  Nth tiny kernel (default 1000; 0: none)
 *   --no-warmup    launch the long kernel before either kernel ran once: CUDA
 *                  then loads the tiny kernel (lazy loading) while the long one
 *                  runs, and on the H100 the tiny kernels ran ~26 a second
 *                  until it ended (the job's own stall, not cuptimon's)
 * The report (JSON) says what was launched: the long kernel's launch time,
 * the tiny kernels, copies and memsets launched, and the times around the
 * launch loop, so that held-check.py can prove each is archived once.
 *
 * Build: nvcc -O2 -arch=sm_90 -o held-work held-work.cu
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

__global__ void held_spin(long long ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while ((long long)(now - start) < ns);
}

__global__ void tiny(int *p)
{
    if (p && threadIdx.x == 0)
        p[blockIdx.x] += 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "held-work: %s: %s\n", #x, cudaGetErrorString(e_));                   \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    double hold_s = 15, seconds = -1;
    long copy_every = 1000;
    int warmup = 1;
    const char *report = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(argv[i], "--report"))
            report = v, i++;
        else if (!strcmp(argv[i], "--hold-s"))
            hold_s = atof(v), i++;
        else if (!strcmp(argv[i], "--seconds"))
            seconds = atof(v), i++;
        else if (!strcmp(argv[i], "--copy-every"))
            copy_every = atol(v), i++;
        else if (!strcmp(argv[i], "--no-warmup"))
            warmup = 0;
        else {
            fprintf(stderr, "held-work: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!report) {
        fprintf(stderr, "usage: held-work --report FILE [--hold-s S] [--seconds T]\n");
        return 2;
    }
    if (seconds < 0)
        seconds = hold_s + 1;
    cudaStream_t hs, ls;
    int *buf;
    char *src, *dst;
    CHECK(cudaStreamCreateWithFlags(&hs, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&ls, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&buf, 4096));
    CHECK(cudaMalloc(&src, 65536));
    CHECK(cudaMalloc(&dst, 65536));
    if (warmup) {
        /* Both kernels loaded and run once, before what is measured (and
         * before hold_before_ns, so held-check.py does not count them). */
        held_spin<<<1, 1, 0, hs>>>(1000);
        tiny<<<1, 32, 0, ls>>>(buf);
    }
    CHECK(cudaDeviceSynchronize());
    /* What the other stream launches runs in microseconds each. */
    uint64_t hold_before = 0, hold_after = 0;
    if (hold_s > 0) {
        hold_before = now_ns();
        held_spin<<<1, 1, 0, hs>>>((long long)(hold_s * 1e9));
        hold_after = now_ns();
        CHECK(cudaGetLastError());
    }
    uint64_t t0 = now_ns(), until = t0 + (uint64_t)(seconds * 1e9), kernels = 0, copies = 0,
             memsets = 0;
    uint64_t per_s[64] = {0};
    while (now_ns() < until) {
        uint64_t sec = (now_ns() - t0) / 1000000000ull;
        if (sec < 64)
            per_s[sec] += 64;
        for (int k = 0; k < 64; k++) {
            tiny<<<1, 32, 0, ls>>>(buf);
            kernels++;
            if (copy_every > 0 && kernels % (uint64_t)copy_every == 0) {
                CHECK(cudaMemcpyAsync(dst, src, 65536, cudaMemcpyDeviceToDevice, ls));
                CHECK(cudaMemsetAsync(dst, 0, 65536, ls));
                copies++;
                memsets++;
            }
        }
    }
    uint64_t t1 = now_ns();
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    uint64_t t2 = now_ns();
    FILE *f = fopen(report, "w");
    if (!f) {
        perror(report);
        return 1;
    }
    fprintf(f,
            "{\"pid\": %d, \"hold_s\": %.3f, \"hold_before_ns\": %llu, \"hold_after_ns\": %llu,\n"
            " \"tiny_kernels\": %llu, \"copies\": %llu, \"memsets\": %llu,\n"
            " \"loop_start_ns\": %llu, \"loop_end_ns\": %llu, \"synced_ns\": %llu,\n"
            " \"launch_rate\": %.0f, \"warmup\": %d, \"launches_per_s\": [",
            (int)getpid(), hold_s, (unsigned long long)hold_before,
            (unsigned long long)hold_after, (unsigned long long)kernels,
            (unsigned long long)copies, (unsigned long long)memsets, (unsigned long long)t0,
            (unsigned long long)t1, (unsigned long long)t2,
            (double)kernels / ((double)(t1 - t0) / 1e9), warmup);
    /* Launches in each second of the loop (in 64s): whether the other
     * stream kept launching while the long kernel ran. */
    for (uint64_t i = 0; i < 64 && i * 1000000000ull < t1 - t0; i++)
        fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)per_s[i]);
    fprintf(f, "]}\n");
    fclose(f);
    printf("held-work: %llu tiny kernels in %.2f s (%.0f/s), hold %.1f s\n",
           (unsigned long long)kernels, (double)(t1 - t0) / 1e9,
           (double)kernels / ((double)(t1 - t0) / 1e9), hold_s);
    return 0;
}
