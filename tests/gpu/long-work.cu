/*
 * long-work: long kernels always running, for the edges of tracing
 * (tests/gpu/edges-case.sh).  On each of S streams it keeps one kernel of
 * D ms running and the next one queued behind it, for T seconds; every
 * round it also issues a memset and a device-to-device copy on the first
 * stream.  It writes a JSON report of every launch: what (kernel, memcpy,
 * memset), on which stream (index), and the CLOCK_REALTIME ns just before
 * and just after the launch call, so that a window's contents can be
 * checked against what was launched inside it.
 *
 * usage: long-work --report FILE [--streams S] [--kernel-ms D] [--seconds T]
 *                  [--no-sync-exit]
 * --no-sync-exit: exit right after the last launch, with work still running
 * (the process-exit edge); by default it synchronizes first.
 *
 * Build: nvcc -O2 -arch=sm_90 -o long-work long-work.cu
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

__global__ void long_spin(long long ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while ((long long)(now - start) < ns);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
    for (;;) {
        uint64_t n = now_ns();
        if (n >= t)
            return;
        struct timespec d = {(time_t)((t - n) / 1000000000ull), (long)((t - n) % 1000000000ull)};
        nanosleep(&d, NULL);
    }
}

struct launch {
    const char *what;
    int stream;
    uint64_t before, after;
};

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "long-work: %s: %s\n", #x, cudaGetErrorString(e_));                   \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    int nstreams = 3, sync_exit = 1;
    double kernel_ms = 40, seconds = 6;
    const char *report = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(argv[i], "--report"))
            report = v, i++;
        else if (!strcmp(argv[i], "--streams"))
            nstreams = atoi(v), i++;
        else if (!strcmp(argv[i], "--kernel-ms"))
            kernel_ms = atof(v), i++;
        else if (!strcmp(argv[i], "--seconds"))
            seconds = atof(v), i++;
        else if (!strcmp(argv[i], "--no-sync-exit"))
            sync_exit = 0;
        else {
            fprintf(stderr, "usage: long-work --report FILE [--streams S] [--kernel-ms D] "
                            "[--seconds T] [--no-sync-exit]\n");
            return 2;
        }
    }
    if (!report || nstreams < 1 || nstreams > 16 || !(kernel_ms > 0) || !(seconds > 0)) {
        fprintf(stderr, "long-work: bad arguments\n");
        return 2;
    }
    cudaStream_t st[16];
    CHECK(cudaFree(0));
    for (int s = 0; s < nstreams; s++)
        CHECK(cudaStreamCreateWithFlags(&st[s], cudaStreamNonBlocking));
    size_t bytes = 64u << 20;
    void *a = NULL, *b = NULL;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaDeviceSynchronize());

    long long dur = (long long)(kernel_ms * 1e6);
    size_t rounds = (size_t)(seconds * 1000 / kernel_ms) + 1;
    size_t cap = rounds * (size_t)(nstreams + 2) + 8, n = 0;
    struct launch *L = (struct launch *)calloc(cap, sizeof *L);
    uint64_t t0 = now_ns();
    for (size_t r = 0; r < rounds; r++) {
        /* Launch round r half a kernel before round r-1's kernels end: one
         * runs, one waits, on every stream, all the time. */
        sleep_until(t0 + (uint64_t)((double)r * kernel_ms * 1e6) -
                    (r ? (uint64_t)(kernel_ms * 0.5e6) : 0));
        for (int s = 0; s < nstreams; s++) {
            L[n].what = "kernel";
            L[n].stream = s;
            L[n].before = now_ns();
            long_spin<<<1, 1, 0, st[s]>>>(dur);
            L[n++].after = now_ns();
        }
        L[n].what = "memset";
        L[n].stream = 0;
        L[n].before = now_ns();
        CHECK(cudaMemsetAsync(a, (int)(r & 0xff), bytes, st[0]));
        L[n++].after = now_ns();
        L[n].what = "memcpy";
        L[n].stream = 0;
        L[n].before = now_ns();
        CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, st[0]));
        L[n++].after = now_ns();
    }
    uint64_t last = now_ns();
    CHECK(cudaGetLastError());
    if (sync_exit)
        CHECK(cudaDeviceSynchronize());
    FILE *f = fopen(report, "w");
    if (!f) {
        perror(report);
        return 1;
    }
    fprintf(f,
            "{\"pid\": %d, \"streams\": %d, \"kernel_ns\": %lld, \"sync_exit\": %s, "
            "\"last_launch_ns\": %llu, \"launches\": [\n",
            (int)getpid(), nstreams, dur, sync_exit ? "true" : "false",
            (unsigned long long)last);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s{\"what\": \"%s\", \"stream\": %d, \"before\": %llu, \"after\": %llu}",
                i ? ",\n" : "", L[i].what, L[i].stream, (unsigned long long)L[i].before,
                (unsigned long long)L[i].after);
    fprintf(f, "\n]}\n");
    fclose(f);
    return 0;
}
