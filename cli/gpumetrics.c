/*
 * cuptimonctl gpu-metrics [status|pause|resume]: the daemon's sampling of
 * each GPU's hardware counters (issue 34; daemon/gpm.c), and the
 * operator's way to hand the counters to another profiler (Nsight Compute,
 * nsys --gpu-metrics-devices, DCGM profiling) and take them back.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "cli.h"
#include "ctl.h"
#include "archive/json-get.h"

static void usage(FILE *f)
{
    fprintf(f, "Usage: cuptimonctl gpu-metrics [status] [--json]\n"
               "       cuptimonctl gpu-metrics pause [--device=N] [--for=SECONDS]\n"
               "       cuptimonctl gpu-metrics resume [--device=N]\n"
               "The daemon samples every GPU's hardware counters (SM active, occupancy, tensor\n"
               "pipe, DRAM and PCIe/NVLink throughput, SM clock) with CUPTI's PM sampling and\n"
               "archives them beside the processes' activity.  Only one profiler can hold a\n"
               "GPU's counters: pause hands them to another (Nsight Compute, nsys\n"
               "--gpu-metrics-devices, DCGM profiling) and resume takes them back.  The daemon\n"
               "also yields by itself while a process named in gpu_metrics_yield_to runs\n"
               "(ncu by default), and tries again while another profiler holds them.\n"
               "\n"
               "  status       each GPU: sampling, paused, busy (another profiler holds the\n"
               "               counters), failed or off, and why; the metrics with their\n"
               "               mean over the last second\n"
               "  pause        release the counters (all GPUs, or --device=N); --for=S\n"
               "               resumes by itself after S seconds, and status says until\n"
               "               when (operators only)\n"
               "  resume       sample again (operators only)\n"
               "pause and resume print the status as the command leaves it: paused, or\n"
               "starting again (the sampler releases or takes the counters within a moment).\n"
               "Each GPU's line also shows what sampling costs: the daemon's CPU decoding its\n"
               "counters and the raw records the GPU wrote for it, over the last 10 s.\n"
               "  --json       the daemon's answer as JSON\n");
}

static void value(char *out, size_t n, double v, const char *unit)
{
    static const char *const si[] = {"", "K", "M", "G", "T", "P"};
    int k = 0;
    if (strcmp(unit, "%") == 0) {
        snprintf(out, n, "%.1f%%", v);
        return;
    }
    while (fabs(v) >= 1000 && k < 5) {
        v /= 1000;
        k++;
    }
    snprintf(out, n, "%.3g %s%s", v, si[k], unit);
}

static void print_status(json_object *st)
{
    json_object *devs = cuptimon__json_get(st, "devices");
    const char *state = cuptimon__json_str(st, "state", "off");
    printf("GPU metrics: %s", state);
    if (strcmp(state, "on") != 0 && strcmp(state, "paused") != 0)
        printf(" (%s)", cuptimon__json_str(st, "why", "-"));
    else
        printf(", every %g ms (%g ms while a window is open)",
               cuptimon__json_double(st, "interval_s", 0) * 1e3,
               cuptimon__json_double(st, "window_interval_s", 0) * 1e3);
    printf("\n");
    for (size_t i = 0; devs && i < json_object_array_length(devs); i++) {
        json_object *d = json_object_array_get_idx(devs, i), *ms = cuptimon__json_get(d, "metrics");
        printf("  GPU %" PRId64 " %s (%s, %s): %s: %s%s%s\n", cuptimon__json_int(d, "device", 0),
               cuptimon__json_str(d, "name", ""), cuptimon__json_str(d, "chip", "?"),
               cuptimon__json_str(d, "pci_bus_id", ""), cuptimon__json_str(d, "state", ""),
               cuptimon__json_str(d, "why", ""),
               cuptimon__json_get(d, "pending") ? "; pending: " : "",
               cuptimon__json_str(d, "pending", ""));
        if (*cuptimon__json_str(d, "unknown_metrics", ""))
            printf("      unknown (not a key or CUPTI metric name; see cuptimond.conf(5)): %s\n",
                   cuptimon__json_str(d, "unknown_metrics", ""));
        if (*cuptimon__json_str(d, "not_sampled", ""))
            printf("      not available here: %s\n", cuptimon__json_str(d, "not_sampled", ""));
        /* The sampler's own cost, over the last 10 s (issue 48). */
        json_object *cpu = cuptimon__json_get(d, "decode_cpu_pct"),
                    *raw = cuptimon__json_get(d, "raw_bytes_per_s");
        if (cpu || raw) {
            char rb[32] = "not told by CUPTI";
            if (raw)
                value(rb, sizeof rb, json_object_get_double(raw), "B/s");
            printf("      cost: %.2f %% of a CPU core decoding, raw records %s (over the last "
                   "10 s; logged past %g %% or %g MiB/s)%s\n",
                   cpu ? json_object_get_double(cpu) : 0.0, rb,
                   cuptimon__json_double(d, "cost_bound_cpu_pct", 0),
                   cuptimon__json_double(d, "cost_bound_raw_bytes_per_s", 0) / 1048576,
                   cuptimon__json_bool(d, "costly_set", 0) ? "; a known-costly set" : "");
        } else if (cuptimon__json_bool(d, "costly_set", 0)) {
            printf("      cost: a known-costly set (cuptimond.conf(5)); measured after 10 s\n");
        }
        printf("      %" PRId64 " samples, %" PRId64 " overflows, %" PRId64 " errors, %.2f s of "
               "CPU decoding; archive %s\n",
               cuptimon__json_int(d, "samples", 0), cuptimon__json_int(d, "overflows", 0),
               cuptimon__json_int(d, "decode_errors", 0) + cuptimon__json_int(d, "eval_errors", 0),
               cuptimon__json_double(d, "decode_cpu_s", 0),
               *cuptimon__json_str(d, "archive", "") ? cuptimon__json_str(d, "archive", "") : "-");
        for (size_t k = 0; ms && k < json_object_array_length(ms); k++) {
            json_object *m = json_object_array_get_idx(ms, k),
                        *v = cuptimon__json_get(m, "last_1s");
            char b[32] = "-";
            if (v)
                value(b, sizeof b, json_object_get_double(v), cuptimon__json_str(m, "unit", ""));
            printf("      %-28s %12s\n", cuptimon__json_str(m, "label", ""), b);
        }
    }
}

/* Whether a GPU's pause or resume is still being carried out. */
static int pending_any(json_object *st)
{
    json_object *devs = cuptimon__json_get(st, "devices");
    for (size_t i = 0; devs && i < json_object_array_length(devs); i++)
        if (cuptimon__json_get(json_object_array_get_idx(devs, i), "pending"))
            return 1;
    return 0;
}

int cuptimon__cli_gpu_metrics(struct cuptimon_ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {{"device", required_argument, NULL, 'd'},
                                         {"for", required_argument, NULL, 'f'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int json = 0, opt;
    long device = -1;
    double seconds = 0;
    char *end;
    optind = 0; /* glibc: 0 re-initialises getopt after the global options */
    while ((opt = getopt_long(argc, argv, "d:f:jh", opts, NULL)) != -1) {
        switch (opt) {
        case 'd':
            errno = 0;
            device = strtol(optarg, &end, 10);
            if (errno || *end || end == optarg || device < 0 || device > 1024) {
                fprintf(stderr,
                        "cuptimonctl gpu-metrics: --device '%s' is not a GPU's CUDA "
                        "ordinal (0, 1, ...)\n",
                        optarg);
                return 2;
            }
            break;
        case 'f':
            seconds = strtod(optarg, &end);
            if (*end || end == optarg || !(seconds > 0 && seconds <= 604800)) {
                fprintf(stderr,
                        "cuptimonctl gpu-metrics: --for '%s' must be seconds in (0, "
                        "604800]\n",
                        optarg);
                return 2;
            }
            break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    const char *action = optind < argc ? argv[optind] : "status";
    if (strcmp(action, "status") && strcmp(action, "pause") && strcmp(action, "resume")) {
        fprintf(stderr, "cuptimonctl gpu-metrics: '%s' is not status, pause or resume\n", action);
        return 2;
    }
    if (optind + 1 < argc) {
        fprintf(stderr, "cuptimonctl gpu-metrics: unexpected '%s'\n", argv[optind + 1]);
        return 2;
    }
    json_object *req = json_object_new_object();
    json_object_object_add(req, "op", json_object_new_string("gpu_metrics"));
    json_object_object_add(req, "action", json_object_new_string(action));
    if (device >= 0)
        json_object_object_add(req, "device", json_object_new_int64(device));
    if (seconds > 0)
        json_object_object_add(req, "seconds", json_object_new_double(seconds));
    char err[512];
    json_object *st = cuptimon__ctl_call(ctl, req, err, sizeof err, NULL);
    json_object_put(req);
    if (!st) {
        fprintf(stderr, "cuptimonctl gpu-metrics: %s\n", err);
        return 1;
    }
    /* The state the command leaves: the daemon's sampler releases or takes
     * the counters within a moment (up to hundreds of ms a GPU); status
     * marks a GPU whose command is still pending.  Up to 5 s. */
    for (int tries = 0; strcmp(action, "status") != 0 && tries < 100 && pending_any(st); tries++) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        json_object *q = json_object_new_object();
        json_object_object_add(q, "op", json_object_new_string("gpu_metrics"));
        json_object *again = cuptimon__ctl_call(ctl, q, err, sizeof err, NULL);
        json_object_put(q);
        if (!again)
            break;
        json_object_put(st);
        st = again;
    }
    if (json)
        printf("%s\n", json_object_to_json_string_ext(st, JSON_C_TO_STRING_PRETTY |
                                                              JSON_C_TO_STRING_NOSLASHESCAPE));
    else
        print_status(st);
    json_object_put(st);
    return 0;
}
