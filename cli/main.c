/* cuptimonctl: every operator action on a cuptimon node. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "archive/json-get.h"
#include "cli.h"
#include "ctl.h"
#include "top.h"
#include "cuptimon-proto.h"

/* The control client the global options set up, for every command. */
static struct cuptimon_ctl ctl = CUPTIMON_CTL_INIT;

static void usage(FILE *f)
{
    fprintf(
        f, "Usage: cuptimonctl [--control-socket=PATH] COMMAND [ARG]...\n"
           "Control the cuptimon daemon (cuptimond) of this node, or read its archives.\n"
           "\n"
           "Commands:\n"
           "  status [--json]        daemon version and uptime, and each session: pid, uid,\n"
           "                         label/rank/job, CUPTI version, buffers received, bytes\n"
           "                         archived, dropped records, lost buffers, last flush\n"
           "  flush [--wait-running] [--timeout=S]\n"
           "                         ask every session to hand over its CUPTI buffers now\n"
           "                         and wait until they are archived; --wait-running also\n"
           "                         waits for the work still running to end\n"
           "  begin-window [SELECTOR] [--activities=LIST] [--duration=S] [--at=T] [--output=FILE]\n"
           "                         open a trace window over the selected processes\n"
           "                         (--all, --pid, --uid, --job, --rank, --label, --all-users)\n"
           "                         and start it; see begin-window --help for who may\n"
           "                         trace what\n"
           "  prepare-window ...     the same, enabling the kinds without starting yet\n"
           "  start-window [ID]      start a prepared window\n"
           "  end-window [ID] [--end-timeout=S]\n"
           "                         end a window; prints the trace path and a summary\n"
           "  windows                list windows\n"
           "  top [--by=process|kernel|device] [--sort=time|count|p99] [--once] [--json]\n"
           "                         live GPU work per process, kernel or device (full\n"
           "                         screen on a terminal); see 'cuptimonctl top --help'\n"
           "  metrics                the live aggregates in the Prometheus text format\n"
           "  merge -o OUT TRACE...  combine per-node traces into one (aligned timestamps)\n"
           "  gpu-metrics [status|pause|resume] [--device=N]\n"
           "                         each GPU's hardware counters as the daemon samples them;\n"
           "                         pause hands them to another profiler (ncu, DCGM)\n"
           "  reload                 make the daemon re-read its configuration file\n"
           "  decode ARCHIVE_DIR [--from=T] [--to=T] [-o FILE] [--summary]\n"
           "                         turn an archive (offline, no daemon needed) into a\n"
           "                         Chrome/Perfetto trace; see 'cuptimonctl decode --help'\n"
           "  stats ARCHIVE_DIR [--from=T] [--to=T] [--report=LIST] [--format=FMT]\n"
           "  stats --window=ID ...  tables of GPU time per kernel, memory operation, API\n"
           "                         call and process, as nsys stats gives them (offline but\n"
           "                         for --window); see 'cuptimonctl stats --help'\n"
           "  export ARCHIVE_DIR --type=sqlite -o FILE [--from=T] [--to=T] [--pid=P]\n"
           "  export --window=ID --type=sqlite -o FILE\n"
           "                         the archive as an SQLite database in Nsight Systems'\n"
           "                         export schema; see 'cuptimonctl export --help'\n"
           "\n"
           "Options:\n"
           "  -c, --control-socket=PATH  the daemon's control socket (default:\n"
           "                             $CUPTIMON_CONTROL_SOCKET, else\n"
           "                             RUNTIME/" CUPTIMON_CONTROL_SOCKET_NAME ")\n"
           "  -t, --timeout=SECONDS      how long to wait for the daemon (default 10)\n"
           "  -h, --help                 show this help and exit\n"
           "  -V, --version              show the version and exit\n"
           "\n"
           "RUNTIME is $XDG_RUNTIME_DIR/cuptimon when XDG_RUNTIME_DIR is set, else\n"
           "/run/cuptimon for root, else /tmp/cuptimon-UID.\n"
           "Exit status: 0 on success, 1 when the daemon said no or is not running,\n"
           "2 for bad usage.\n");
}

/* Sends one request; returns the parsed reply (REPLY_OK) or NULL after
 * printing why. */
static json_object *call(json_object *req)
{
    char err[600];
    json_object *o = cuptimon__ctl_call(&ctl, req, err, sizeof err, NULL);
    if (!o)
        fprintf(stderr, "cuptimonctl: %s\n", err);
    return o;
}

static void human_bytes(char *out, size_t len, double b)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    snprintf(out, len, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

static void human_duration(char *out, size_t len, double s)
{
    if (s < 60)
        snprintf(out, len, "%.0fs", s);
    else if (s < 3600)
        snprintf(out, len, "%dm%02ds", (int)s / 60, (int)s % 60);
    else if (s < 86400)
        snprintf(out, len, "%dh%02dm", (int)s / 3600, (int)s / 60 % 60);
    else
        snprintf(out, len, "%dd%02dh", (int)s / 86400, (int)s / 3600 % 24);
}

/* "gpus:      GPU 0 sampling (SM 43%, tensor 0%, DRAM 12%)" or why not. */
static void gpu_line(json_object *gm)
{
    json_object *devs = cuptimon__json_get(gm, "devices");
    if (!gm)
        return;
    /* "paused": every GPU is, and each one's line says by whom. */
    if (strcmp(cuptimon__json_str(gm, "state", "off"), "on") != 0 &&
        strcmp(cuptimon__json_str(gm, "state", "off"), "paused") != 0) {
        printf("gpus:      metrics %s: %s\n", cuptimon__json_str(gm, "state", "off"),
               cuptimon__json_str(gm, "why", "-"));
        return;
    }
    for (size_t i = 0; devs && i < json_object_array_length(devs); i++) {
        json_object *d = json_object_array_get_idx(devs, i), *ms = cuptimon__json_get(d, "metrics");
        printf("%s GPU %" PRId64 " %s",
               i ? "          " : "gpus:     ", cuptimon__json_int(d, "device", 0),
               cuptimon__json_str(d, "state", ""));
        int shown = 0;
        for (size_t k = 0; ms && k < json_object_array_length(ms); k++) {
            json_object *m = json_object_array_get_idx(ms, k),
                        *v = cuptimon__json_get(m, "last_1s");
            const char *key = cuptimon__json_str(m, "key", "");
            if (!v || (strcmp(key, "sm_active") && strcmp(key, "tensor_active") &&
                       strcmp(key, "dram_active")))
                continue;
            printf("%s%s %.0f%%", shown++ ? ", " : " (", cuptimon__json_str(m, "label", key),
                   json_object_get_double(v));
        }
        printf("%s", shown ? ")" : "");
        if (strcmp(cuptimon__json_str(d, "state", ""), "sampling") != 0)
            printf(": %s", cuptimon__json_str(d, "why", ""));
        printf("\n");
    }
}

/* The work a process's records wait on and what waits behind it (an
 * in_flight object of status, or of a flush's "held"), one line. */
static void print_in_flight(json_object *inf)
{
    char d[24], b[32];
    human_duration(d, sizeof d, cuptimon__json_double(inf, "age_s", 0));
    human_bytes(b, sizeof b, (double)cuptimon__json_int(inf, "bytes_behind", 0));
    printf("waiting %s on %s (device %" PRId64 ", stream %" PRId64 ", correlation %" PRId64
           "): %" PRId64 " records (%s) in %" PRId64 " buffers behind it\n",
           d, cuptimon__json_str(inf, "what", "?"), cuptimon__json_int(inf, "device", 0),
           cuptimon__json_int(inf, "stream", 0), cuptimon__json_int(inf, "correlation_id", 0),
           cuptimon__json_int(inf, "records_behind", 0), b,
           cuptimon__json_int(inf, "buffers_held", 0));
}

static void pool_line(json_object *pool, json_object *s, int64_t now);

/* A session's NCCL (issue 46): a line per communicator (which collective
 * it completed last, which is in flight and for how long), or why there
 * are none to see: the job runs a profiler plugin of its own, or the
 * shim's is off. */
static void nccl_lines(json_object *nc)
{
    const char *plugin = cuptimon__json_str(nc, "plugin", "");
    json_object *comms = cuptimon__json_get(nc, "communicators");
    if (strcmp(plugin, "user") == 0) {
        /* The path is the job's: made safe as a communicator's name is. */
        char *path = cuptimon__cli_cut(cuptimon__json_str(nc, "user_plugin", ""), 200);
        printf("        NCCL runs the job's own profiler plugin (%s): its collectives are not "
               "recorded\n",
               path ? path : "?");
        free(path);
    } else if (strcmp(plugin, "off") == 0) {
        printf("        NCCL: the shim's profiler plugin is off (CUPTIMON_NCCL=0)\n");
    }
    for (size_t i = 0; comms && json_object_is_type(comms, json_type_array) &&
                       i < json_object_array_length(comms);
         i++) {
        char line[512];
        cuptimon__cli_nccl_line(json_object_array_get_idx(comms, i), line, sizeof line);
        printf("        %s\n", line);
    }
}
static void refused_lines(json_object *dm);

static int cmd_status(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int json = 0, opt;
    optind = 0; /* glibc: 0 re-initialises getopt after the global options */
    while ((opt = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
        if (opt == 'j')
            json = 1;
        else if (opt == 'h') {
            printf("Usage: cuptimonctl status [--json]\n"
                   "Show the daemon and its sessions; --json prints the daemon's whole answer.\n"
                   "PATH is the CUPTI API a session's shim uses (v1: the global activity API;\n"
                   "v2+udr: its own CUPTI 13.3+ subscriber with user-defined records), B/K the\n"
                   "bytes of one of its kernel records.\n");
            return 0;
        } else
            return 2;
    }
    json_object *req = json_object_new_object();
    json_object_object_add(req, "op", json_object_new_string("status"));
    json_object *st = call(req);
    json_object_put(req);
    if (!st)
        return 1;
    if (json) {
        printf("%s\n", json_object_to_json_string_ext(st, JSON_C_TO_STRING_PRETTY |
                                                              JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(st);
        return 0;
    }
    json_object *dm, *ss;
    json_object_object_get_ex(st, "daemon", &dm);
    json_object_object_get_ex(st, "sessions", &ss);
    size_t n = ss ? json_object_array_length(ss) : 0, live = 0;
    for (size_t i = 0; i < n; i++)
        if (cuptimon__json_bool(json_object_array_get_idx(ss, i), "connected", 0))
            live++;
    char up[32];
    human_duration(up, sizeof up, cuptimon__json_double(dm, "uptime_s", 0));
    printf("cuptimond %s, pid %" PRId64 ", up %s, %zu session(s) connected, %" PRId64
           " since start\n",
           cuptimon__json_str(dm, "version", ""), cuptimon__json_int(dm, "pid", 0), up, live,
           cuptimon__json_int(dm, "sessions_total", 0));
    printf("producers: %s\narchive:   %s\n", cuptimon__json_str(dm, "producer_socket", ""),
           cuptimon__json_str(dm, "archive_dir", ""));
    gpu_line(cuptimon__json_get(st, "gpu_metrics"));
    refused_lines(dm);
    if (n == 0) {
        printf("\nno sessions: no process runs the shim (CUDA_INJECTION64_PATH=libcuptimon.so).\n");
        json_object_put(st);
        return 0;
    }
    printf("\n%-7s %-8s %-6s %-18s %-7s %-6s %4s %8s %10s %9s %8s %6s %10s\n", "SESSION", "PID",
           "UID", "LABEL/RANK/JOB", "CUPTI", "PATH", "B/K", "BUFFERS", "ARCHIVED", "RECORDS",
           "DROPPED", "LOST", "LAST FLUSH");
    int64_t now = (int64_t)time(NULL) * 1000000000;
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(ss, i), *job = NULL;
        json_object_object_get_ex(s, "job", &job);
        char ident[64] = "", bytes[32], fl[32] = "never";
        const char *label = cuptimon__json_str(s, "label", "");
        if (*label)
            snprintf(ident, sizeof ident, "%s", label);
        if (job && *cuptimon__json_str(job, "rank", ""))
            snprintf(ident + strlen(ident), sizeof ident - strlen(ident), "%srank %s",
                     *ident ? " " : "", cuptimon__json_str(job, "rank", ""));
        if (job && *cuptimon__json_str(job, "slurm_job_id", ""))
            snprintf(ident + strlen(ident), sizeof ident - strlen(ident), "%sjob %s",
                     *ident ? " " : "", cuptimon__json_str(job, "slurm_job_id", ""));
        if (!*ident)
            snprintf(ident, sizeof ident, "-");
        human_bytes(bytes, sizeof bytes, (double)cuptimon__json_int(s, "bytes_archived", 0));
        int64_t lf = cuptimon__json_int(s, "last_flush_unix_ns", 0);
        if (lf > 0) {
            char d[24];
            human_duration(d, sizeof d,
                           (double)(now - lf) / 1e9 < 0 ? 0 : (double)(now - lf) / 1e9);
            snprintf(fl, sizeof fl, "%s ago", d);
        }
        int connected = cuptimon__json_bool(s, "connected", 0);
        /* PATH: CUPTI's activity API (v1, or v2+udr: its own subscriber
         * with user-defined records); B/K: bytes per kernel record. */
        printf("%-7" PRId64 " %-8" PRId64 " %-6" PRId64 " %-18.18s %-7" PRId64 " %-6.6s %4" PRId64
               " %8" PRId64 " %10s %9" PRId64 " %8" PRId64 " %6" PRId64 " %10s%s%s\n",
               cuptimon__json_int(s, "session", 0), cuptimon__json_int(s, "pid", 0),
               cuptimon__json_int(s, "uid", 0), ident, cuptimon__json_int(s, "cupti_version", 0),
               cuptimon__json_str(s, "path", "v1"),
               cuptimon__json_int(s, "record_bytes_per_kernel", 0),
               cuptimon__json_int(s, "buffers_received", 0), bytes,
               cuptimon__json_int(s, "records", 0), cuptimon__json_int(s, "dropped_records", 0),
               cuptimon__json_int(s, "lost_buffers", 0), fl,
               strcmp(cuptimon__json_str(s, "cupti", ""), "taken by another tool") == 0
                   ? " (cupti: taken by another tool)"
               : connected ? ""
                           : " (ended)",
               strcmp(cuptimon__json_str(s, "cupti_release", ""), "unknown") == 0 &&
                       !cuptimon__json_get(s, "release_refuted")
                   ? " (CUPTI version unknown to this build: archived, not decoded, no names)"
                   : "");
        /* What CUPTI holds behind running work (issue 33): the oldest
         * record not complete for a second or more, and how the pool grew
         * to keep what waits behind it. */
        json_object *inf = cuptimon__json_get(s, "in_flight"),
                    *pool = cuptimon__json_get(s, "pool");
        if (inf && cuptimon__json_double(inf, "age_s", 0) >= 1) {
            printf("        ");
            print_in_flight(inf);
        }
        const char *view = pool ? cuptimon__json_str(pool, "in_flight_view", "") : "";
        if (strcmp(view, "partial") == 0)
            printf("        work in flight: partly seen (a buffer CUPTI holds has a record the "
                   "shim cannot step over; its log names it)\n");
        else if (strcmp(view, "unavailable") == 0 && cuptimon__json_int(pool, "grown_slots", 0) > 0)
            printf("        work in flight: not shown on CUPTI's v2 path (CUPTI describes a "
                   "buffer's records only when it completes it)\n");
        if (pool)
            pool_line(pool, s, now);
        nccl_lines(cuptimon__json_get(s, "nccl"));
        /* What the per-session check of the layout table found: the
         * release a shared version number turned out not to be, each kind
         * whose measured record size is not the table's, and the table
         * entries no header confirms. */
        static const char *const findings[] = {"release_refuted", "layout_mismatch",
                                               "layout_unverified"};
        for (size_t f = 0; f < sizeof findings / sizeof findings[0]; f++) {
            json_object *v = cuptimon__json_get(s, findings[f]);
            if (v && json_object_is_type(v, json_type_string))
                printf("        %s\n", json_object_get_string(v));
            for (size_t j = 0;
                 v && json_object_is_type(v, json_type_array) && j < json_object_array_length(v);
                 j++)
                printf("        %s%s\n", f == 2 ? "unverified layout: " : "",
                       json_object_get_string(json_object_array_get_idx(v, j)));
        }
    }
    json_object_put(st);
    return 0;
}

/* The processes whose records a flush could not hand over, after its
 * caller's first words: each one's pid and session, and the work its
 * records wait on (the daemon's "held").  pids: only these (the fence's
 * "running"; NULL: every one in held); one without a view of its work (a
 * shim on CUPTI's v2 path, an older one) is named by its pid alone. */
static void print_held(json_object *held, json_object *pids)
{
    size_t nh = held ? json_object_array_length(held) : 0,
           n = pids ? json_object_array_length(pids) : nh;
    printf(" (those records reach the archive when the work ends):\n");
    for (size_t i = 0; i < n; i++) {
        int64_t pid = pids ? json_object_get_int64(json_object_array_get_idx(pids, i))
                           : cuptimon__json_int(json_object_array_get_idx(held, i), "pid", 0);
        json_object *inf = NULL;
        for (size_t k = 0; !inf && k < nh; k++)
            if (cuptimon__json_int(json_object_array_get_idx(held, k), "pid", 0) == pid)
                inf = json_object_array_get_idx(held, k);
        printf("  pid %" PRId64, pid);
        if (!inf) {
            printf("\n");
            continue;
        }
        printf(", session %" PRId64 ": ", cuptimon__json_int(inf, "session", 0));
        print_in_flight(inf);
    }
}

/* The session's pool (issue 47), in words that say what they mean: the
 * whole pool now and at its peak (resident slots and those it grew by),
 * its cap and where the cap comes from, and, where it cannot grow or is
 * dropping, that and why.  Nothing for a pool that never grew and may. */
static void pool_line(json_object *pool, json_object *s, int64_t now)
{
    double slot = (double)cuptimon__json_int(pool, "slot_size", 0);
    int64_t resident = cuptimon__json_int(pool, "resident_slots", 0),
            grown = cuptimon__json_int(pool, "grown_slots", 0),
            peak = cuptimon__json_int(pool, "grown_peak_slots", 0),
            cap = cuptimon__json_int(pool, "cap_slots", cuptimon__json_int(pool, "max_slots", 0)),
            since = cuptimon__json_int(pool, "dropping_since_unix_ns", 0);
    const char *no_growth = cuptimon__json_str(pool, "cannot_grow", ""),
               *limited = cuptimon__json_str(pool, "cap_limited_by", "");
    int reached = cuptimon__json_bool(pool, "cap_reached", 0);
    char res_b[32], now_b[32], peak_b[32], cap_b[32], max_b[32];
    if (peak == 0 && !*no_growth && !*limited && !reached)
        return;
    human_bytes(res_b, sizeof res_b, slot * (double)resident);
    human_bytes(now_b, sizeof now_b, slot * (double)(resident + grown));
    human_bytes(peak_b, sizeof peak_b, slot * (double)(resident + peak));
    human_bytes(cap_b, sizeof cap_b, slot * (double)cap);
    human_bytes(max_b, sizeof max_b, slot * (double)cuptimon__json_int(pool, "max_slots", 0));
    if (*no_growth)
        printf("        pool %s (%" PRId64 " resident slots), cannot grow: %s\n", res_b, resident,
               no_growth);
    else
        printf("        pool %s now (%s resident + %" PRId64 " slots grown), %s at its peak; cap %s"
               " (%s%s%s%s)\n",
               now_b, res_b, grown, peak_b, cap_b,
               *limited ? "the daemon's max_pool_bytes; the shim's cap: " : "",
               cuptimon__json_str(pool, "cap_from", "?"), *limited ? ", " : "",
               *limited ? max_b : "");
    if (since > 0) {
        char d[24];
        time_t t = (time_t)(since / 1000000000);
        struct tm tm;
        char hm[16];
        localtime_r(&t, &tm);
        strftime(hm, sizeof hm, "%H:%M:%S", &tm);
        human_duration(d, sizeof d, now > since ? (double)(now - since) / 1e9 : 0);
        printf("        dropping since %s (%s ago): no buffer for CUPTI (%" PRId64
               " requests declined so far); CUPTI counts the records it drops when it hands "
               "over the buffers it holds (DROPPED)\n",
               hm, d, cuptimon__json_int(s, "requests_declined", 0));
    } else if (reached) {
        printf("        the pool reached its cap: CUPTI dropped what found no buffer "
               "(DROPPED counts it once CUPTI hands its buffers over)\n");
    }
}

/* The producers the daemon refused lately, and why: each one's job runs
 * untraced (its shim says so on its stderr). */
static void refused_lines(json_object *dm)
{
    json_object *rf = cuptimon__json_get(dm, "refused");
    size_t n = rf ? json_object_array_length(rf) : 0;
    if (n == 0)
        return;
    printf("\nrefused (their jobs run untraced; %" PRId64 " since start, the last %zu here):\n",
           cuptimon__json_int(dm, "refused_producers", 0), n);
    for (size_t i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(rf, i);
        char when[32];
        time_t t = (time_t)(cuptimon__json_int(r, "unix_ns", 0) / 1000000000);
        struct tm tm;
        localtime_r(&t, &tm);
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
        const char *exe = cuptimon__json_str(r, "exe", "");
        printf("  %s pid %" PRId64 " uid %" PRId64 "%s%s: %s\n", when,
               cuptimon__json_int(r, "pid", 0), cuptimon__json_int(r, "uid", 0), *exe ? " " : "",
               exe, cuptimon__json_str(r, "why", ""));
    }
}

static int cmd_flush(int argc, char **argv)
{
    static const struct option opts[] = {
        {"wait-running", no_argument, NULL, 'w'},  {"forced", no_argument, NULL, 'w'},
        {"timeout", required_argument, NULL, 't'}, {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    int fence = 0, json = 0, opt;
    double timeout = 5;
    optind = 0; /* glibc: 0 re-initialises getopt after the global options */
    while ((opt = getopt_long(argc, argv, "wt:jh", opts, NULL)) != -1) {
        char *end;
        switch (opt) {
        case 'w': fence = 1; break;
        case 'j': json = 1; break;
        case 't':
            timeout = strtod(optarg, &end);
            if (*end || !(timeout > 0 && timeout <= 600)) {
                fprintf(stderr, "cuptimonctl flush: --timeout '%s' must be seconds in (0, 600]\n",
                        optarg);
                return 2;
            }
            break;
        case 'h':
            printf("Usage: cuptimonctl flush [--wait-running] [--timeout=S] [--json]\n"
                   "Ask every session for the CUPTI buffers whose records are complete and wait\n"
                   "up to S seconds (default 5) until they are archived.  Records of work still\n"
                   "running stay with CUPTI until it ends, and come with a later flush.\n"
                   "\n"
                   "  --wait-running  also wait, up to S seconds, until each process has handed\n"
                   "                  over every record of the work it launched before the\n"
                   "                  flush, the work still running included (plain flushes are\n"
                   "                  repeated until CUPTI gives back every buffer it held).\n"
                   "  --forced        the same (its older name).  cuptimon never uses CUPTI's\n"
                   "                  forced flush: it hands over the records of running work\n"
                   "                  incomplete and never delivers their completion, so that\n"
                   "                  work would be lost from the archive.\n"
                   "  --timeout=S     how long to wait (default 5 s)\n"
                   "  --json          print the daemon's answer as JSON\n"
                   "\n"
                   "While a kernel runs long, CUPTI holds every record launched after it, on\n"
                   "any stream: a plain flush names each process it could not hand those over\n"
                   "for, the work they wait on and how much waits behind it.\n"
                   "\n"
                   "Exit status: 0 when every session answered and handed over everything (with\n"
                   "--wait-running: of all the work launched before the flush), 1 when some were\n"
                   "late or held records behind work still running (listed; their records reach\n"
                   "the archive when the work ends), 2 on bad usage.\n");
            return 0;
        default: return 2;
        }
    }
    if (ctl.timeout_ms < (int)(timeout * 1000) + 2000)
        ctl.timeout_ms = (int)(timeout * 1000) + 2000;
    json_object *req = json_object_new_object();
    json_object_object_add(req, "op", json_object_new_string("flush"));
    json_object_object_add(req, "fence", json_object_new_boolean(fence));
    json_object_object_add(req, "timeout_s", json_object_new_double(timeout));
    json_object *r = call(req);
    json_object_put(req);
    if (!r)
        return 1;
    json_object *late = cuptimon__json_get(r, "late"), *running = cuptimon__json_get(r, "running");
    size_t nlate = late ? json_object_array_length(late) : 0,
           nrun = running ? json_object_array_length(running) : 0;
    /* A plain flush hands over what is complete; records CUPTI holds
     * behind work still running are not, and a script that reads the
     * archive next must know (the same exit status as --wait-running's
     * timeout, for the same reason). */
    json_object *held = cuptimon__json_get(r, "held");
    size_t nheld = fence || !held ? 0 : json_object_array_length(held);
    if (json) {
        printf("%s\n", json_object_to_json_string_ext(r, JSON_C_TO_STRING_PRETTY));
    } else {
        printf("flush: %" PRId64 " of %" PRId64 " session(s) flushed and archived%s in %.1f ms",
               cuptimon__json_int(r, "completed", 0) - (int64_t)nheld,
               cuptimon__json_int(r, "sessions", 0),
               fence ? ", with all the work launched before it," : "",
               cuptimon__json_double(r, "elapsed_ms", 0));
        if (nlate)
            printf("; late (no answer): %s", json_object_to_json_string(late));
        printf("\n");
        if (nrun) {
            printf("still running work after %g s", timeout);
            print_held(held, running);
        } else if (nheld) {
            printf("not handed over, held by CUPTI behind work still running");
            print_held(held, NULL);
            printf("'cuptimonctl flush --wait-running' waits for them.\n");
        }
    }
    json_object_put(r);
    return nlate || nrun || nheld ? 1 : 0;
}

/* ---- trace windows -------------------------------------------------------- */

static void window_usage(FILE *f, const char *cmd)
{
    fprintf(f,
            "Usage: cuptimonctl %s [SELECTOR] [--activities=LIST] [--duration=S] [--at=T]\n"
            "                          [--output=FILE] [--gzip=N] [--per-process] [--json]\n"
            "Open a trace window over every process that SELECTOR picks (default --all).\n"
            "\n"
            "Selector (combine to narrow):\n"
            "      --all             every session (the default)\n"
            "      --pid=P[,P...]    these processes\n"
            "      --uid=U           processes of this user\n"
            "      --job=J           SLURM_JOB_ID or TORCHELASTIC_RUN_ID J\n"
            "      --rank=R          RANK R\n"
            "      --label=L         CUPTIMON_LABEL L\n"
            "      --all-users       let --job, --rank or --label take sessions of several\n"
            "                        users (see below)\n"
            "Options:\n"
            "      --activities=LIST kinds to trace (default: kernel,memcpy,memset,runtime,\n"
            "                        driver,external_correlation,overhead,cuda_event,\n"
            "                        synchronization; also marker, marker_data, memcpy2)\n"
            "      --duration=S      end the window by itself after S seconds\n"
            "      --at=T            start at absolute time T (Unix seconds, with a fraction,\n"
            "                        or ns): the same command sent to many nodes gives\n"
            "                        windows that line up\n"
            "      --output=FILE     where the daemon writes the trace (default:\n"
            "                        OUTPUT_DIR/windows/window-ID-TIME.json); operators only;\n"
            "                        FILE.gz is written gzipped, any other name plain JSON\n"
            "      --gzip=N          gzip the trace at level N (1-9; 0: plain JSON) and name\n"
            "                        it .json.gz (default: the daemon's window_gzip_level)\n"
            "      --per-process     also write one trace per process beside the trace\n"
            "                        (TRACE.rank-R.json[.gz], or TRACE.pid-P.json[.gz]\n"
            "                        without a rank), each with its own distributedInfo,\n"
            "                        as HTA reads a job (default: window_per_process)\n"
            "      --end-timeout=S   how long the window's end waits for work launched\n"
            "                        inside it that still runs (default: the daemon's\n"
            "                        window_end_timeout_s, 10 s); work still running then\n"
            "                        is named in the answer and reaches the archive, not\n"
            "                        the trace, when it ends\n"
            "      --json            print the daemon's answer as JSON\n"
            "Processes that start during the window and match are included.  End it with\n"
            "'cuptimonctl end-window [ID]', which prints the trace's path and a summary.\n"
            "The window holds the API calls that start inside it and all the GPU work they\n"
            "launched, also work still running at the end: its end waits for that work\n"
            "(CUPTI hands a record over only once the work has ended), up to --end-timeout.\n"
            "\n"
            "Who may trace what (cuptimond(8), AUTHORIZATION):\n"
            "  A user who is not an operator (root, the daemon's user, its control_group)\n"
            "  traces their own processes only, whatever the selector says.\n"
            "  A job id, rank or label is what a process says of itself, so a selector\n"
            "  made only of them takes one user's sessions: the user whose sessions it\n"
            "  matches when the window opens (processes of other users that start later\n"
            "  with the same label stay out).  Where it matches several users' sessions\n"
            "  the window is refused, naming them: add --uid=U, or --all-users.\n"
            "  The trace belongs to the user who asked, and --output may name only a\n"
            "  path that user could write: a new file in a directory they may write, or\n"
            "  a regular file of their own (never another user's file, a link's target,\n"
            "  a device or a FIFO).  The answer lists the uids of the processes taken.\n",
            cmd);
}

/* --end-timeout=S: the window end's bound on waiting for running work. */
static int add_end_timeout(json_object *req, const char *arg)
{
    char *end;
    double v = strtod(arg, &end);
    if (end == arg || *end || !(v > 0 && v <= 3600)) {
        fprintf(stderr, "cuptimonctl: --end-timeout '%s' is not a number of seconds in (0, 3600]\n",
                arg);
        return -EINVAL;
    }
    json_object_object_add(req, "end_timeout_s", json_object_new_double(v));
    return 0;
}

static int parse_when(const char *s, int64_t *ns)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v <= 0)
        return -EINVAL;
    /* Below 10^12 it is seconds, above it nanoseconds. */
    *ns = v < 1e12 ? (int64_t)(v * 1e9) : (int64_t)v;
    return 0;
}

static void print_window(json_object *w)
{
    json_object *pids, *sum;
    int64_t start = cuptimon__json_int(w, "start_unix_ns", 0);
    int64_t end = cuptimon__json_int(w, "end_unix_ns", 0);
    int64_t at = cuptimon__json_int(w, "at_unix_ns", 0);
    json_object_object_get_ex(w, "pids", &pids);
    printf("window %" PRId64 ": %s, %zu process(es) %s\n", cuptimon__json_int(w, "window", 0),
           cuptimon__json_str(w, "state", ""), pids ? json_object_array_length(pids) : 0,
           pids ? json_object_to_json_string_ext(pids, JSON_C_TO_STRING_PLAIN) : "[]");
    /* A label says nothing of whose a process is: the kernel's uids do. */
    json_object *uids = cuptimon__json_get(w, "uids");
    if (uids && json_object_array_length(uids) > 0)
        printf("  of uid(s) %s\n", json_object_to_json_string_ext(uids, JSON_C_TO_STRING_PLAIN));
    if (start)
        printf("  started %.3f", (double)start / 1e9);
    if (end)
        printf(", ended %.3f (%.3f s)", (double)end / 1e9, (double)(end - start) / 1e9);
    if (start)
        printf("\n");
    else if (at)
        printf("  starts at %.3f\n", (double)at / 1e9);
    printf("  trace: %s\n", cuptimon__json_str(w, "output", ""));
    json_object *ew = cuptimon__json_get(w, "end_wait"), *run = cuptimon__json_get(ew, "running");
    if (ew)
        printf("  end: waited %.1f ms for the work launched in it to be handed over\n",
               cuptimon__json_double(ew, "elapsed_ms", 0));
    if (run && json_object_array_length(run) > 0)
        printf("  still running work after %g s (end timeout): pid(s) %s; those records reach "
               "the archive when the work ends, not this trace\n",
               cuptimon__json_double(w, "end_timeout_s", 0),
               json_object_to_json_string_ext(run, JSON_C_TO_STRING_PLAIN));
    json_object *pt = cuptimon__json_get(w, "process_traces");
    for (size_t i = 0;
         pt && json_object_is_type(pt, json_type_array) && i < json_object_array_length(pt); i++) {
        json_object *e = json_object_array_get_idx(pt, i);
        int64_t r = cuptimon__json_integer(e, "rank", -1);
        char rk[32] = "";
        if (r >= 0)
            snprintf(rk, sizeof rk, " rank %" PRId64, r);
        printf("  pid %" PRId64 "%s: %s\n", cuptimon__json_integer(e, "pid", 0), rk,
               cuptimon__json_str(e, "path", ""));
    }
    if (json_object_object_get_ex(w, "summary", &sum)) {
        json_object *procs;
        if (json_object_object_get_ex(sum, "processes", &procs)) {
            for (size_t i = 0; i < json_object_array_length(procs); i++) {
                json_object *p = json_object_array_get_idx(procs, i);
                printf("  pid %-8" PRId64 " events %-9" PRId64 " kernels %-8" PRId64
                       " dropped %" PRId64 "%s\n",
                       cuptimon__json_int(p, "pid", 0), cuptimon__json_int(p, "events", 0),
                       cuptimon__json_int(p, "kernels", 0),
                       cuptimon__json_int(p, "dropped_records", 0),
                       cuptimon__json_bool(p, "late", 0)
                           ? " (late: its last flush did not finish in time)"
                           : "");
            }
        }
        if (cuptimon__json_bool(sum, "truncated", 0))
            printf("  the window reached its size cap and was cut short\n");
        /* Last, the window's top kernels, as 'stats' shows kernels. */
        json_object *tk = cuptimon__json_get(sum, "top_kernels");
        if (tk && json_object_is_type(tk, json_type_array) && json_object_array_length(tk) > 0) {
            json_object *k = cuptimon__json_get(sum, "kernels");
            printf("  top kernels by GPU time (%zu of %" PRId64
                   " name(s); every table: cuptimonctl stats --window %" PRId64 "):\n",
                   json_object_array_length(tk), cuptimon__json_int(k, "distinct", 0),
                   cuptimon__json_int(w, "window", 0));
            fflush(stdout);
            cuptimon__cli_stats_print(stdout, CUPTIMON_STATS_KERNELS, tk, 0,
                                      cuptimon__cli_term_width(stdout), "  ");
            for (size_t i = 0; i < json_object_array_length(tk); i++)
                if (!cuptimon__json_bool(json_object_array_get_idx(tk, i), "med_exact", 1)) {
                    printf("  ~ marks a median read from a histogram, within %.2f%% of the "
                           "true one\n",
                           CUPTIMON_STATS_MED_ERROR * 100);
                    break;
                }
        }
    }
}

static int cmd_window_open(int argc, char **argv, const char *op)
{
    static const struct option opts[] = {{"all", no_argument, NULL, 'a'},
                                         {"pid", required_argument, NULL, 'p'},
                                         {"uid", required_argument, NULL, 'u'},
                                         {"job", required_argument, NULL, 'j'},
                                         {"rank", required_argument, NULL, 'r'},
                                         {"label", required_argument, NULL, 'L'},
                                         {"activities", required_argument, NULL, 'k'},
                                         {"duration", required_argument, NULL, 'd'},
                                         {"at", required_argument, NULL, 'T'},
                                         {"output", required_argument, NULL, 'o'},
                                         {"json", no_argument, NULL, 'J'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"all-users", no_argument, NULL, 'U'},
                                         {"gzip", required_argument, NULL, 'z'},
                                         {"per-process", no_argument, NULL, 'P'},
                                         {"end-timeout", required_argument, NULL, 'E'},
                                         {NULL, 0, NULL, 0}};
    json_object *req = json_object_new_object();
    int opt, json = 0;
    json_object_object_add(req, "op", json_object_new_string(op));
    optind = 0; /* glibc: 0 re-initialises getopt after the global options */
    while ((opt = getopt_long(argc, argv, "ap:u:j:r:L:k:d:T:o:z:E:Jh", opts, NULL)) != -1) {
        char *end;
        switch (opt) {
        case 'a': break;
        case 'U': json_object_object_add(req, "all_users", json_object_new_boolean(1)); break;
        case 'p': {
            json_object *a = json_object_new_array();
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", optarg);
            for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
                long v = strtol(t, &end, 10);
                if (*end || v <= 0) {
                    fprintf(stderr, "cuptimonctl: --pid '%s' is not a process id\n", t);
                    json_object_put(a);
                    json_object_put(req);
                    return 2;
                }
                json_object_array_add(a, json_object_new_int64(v));
            }
            json_object_object_add(req, "pids", a);
            break;
        }
        case 'u': {
            long v = strtol(optarg, &end, 10);
            if (*end || v < 0) {
                fprintf(stderr, "cuptimonctl: --uid '%s' is not a user id\n", optarg);
                json_object_put(req);
                return 2;
            }
            json_object_object_add(req, "uid", json_object_new_int64(v));
            break;
        }
        case 'j': json_object_object_add(req, "job", json_object_new_string(optarg)); break;
        case 'r': json_object_object_add(req, "rank", json_object_new_string(optarg)); break;
        case 'L': json_object_object_add(req, "label", json_object_new_string(optarg)); break;
        case 'k': {
            json_object *a = json_object_new_array();
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", optarg);
            for (char *sv = NULL, *t = strtok_r(buf, ", ", &sv); t; t = strtok_r(NULL, ", ", &sv))
                json_object_array_add(a, json_object_new_string(t));
            json_object_object_add(req, "activities", a);
            break;
        }
        case 'd': {
            double v = strtod(optarg, &end);
            if (*end || !(v > 0)) {
                fprintf(stderr, "cuptimonctl: --duration '%s' is not a number of seconds\n",
                        optarg);
                json_object_put(req);
                return 2;
            }
            json_object_object_add(req, "duration_s", json_object_new_double(v));
            break;
        }
        case 'T': {
            int64_t ns;
            if (parse_when(optarg, &ns) < 0) {
                fprintf(stderr,
                        "cuptimonctl: --at '%s' is not a time (Unix seconds, e.g. "
                        "1796208557.5, or ns)\n",
                        optarg);
                json_object_put(req);
                return 2;
            }
            json_object_object_add(req, "at_unix_ns", json_object_new_int64(ns));
            break;
        }
        case 'o': {
            char path[4096];
            /* The daemon writes it: make a relative path absolute here. */
            if (optarg[0] != '/' && getcwd(path, sizeof path - strlen(optarg) - 2)) {
                strcat(path, "/");
                strcat(path, optarg);
            } else {
                snprintf(path, sizeof path, "%s", optarg);
            }
            json_object_object_add(req, "output", json_object_new_string(path));
            break;
        }
        case 'z': {
            /* Range-checked by the daemon too, which names the bad level. */
            long v = strtol(optarg, &end, 10);
            if (*end || end == optarg || v < 0 || v > 9) {
                fprintf(stderr,
                        "cuptimonctl: --gzip '%s' is not a level from 0 (plain JSON) "
                        "to 9\n",
                        optarg);
                json_object_put(req);
                return 2;
            }
            json_object_object_add(req, "gzip_level", json_object_new_int64(v));
            break;
        }
        case 'P': json_object_object_add(req, "per_process", json_object_new_boolean(1)); break;
        case 'E':
            if (add_end_timeout(req, optarg) < 0) {
                json_object_put(req);
                return 2;
            }
            break;
        case 'J': json = 1; break;
        case 'h':
            window_usage(stdout, argv[0]);
            json_object_put(req);
            return 0;
        default: json_object_put(req); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cuptimonctl %s: unexpected argument '%s'\n", argv[0], argv[optind]);
        json_object_put(req);
        return 2;
    }
    json_object *r = call(req);
    json_object_put(req);
    if (!r)
        return 1;
    if (json)
        printf("%s\n", json_object_to_json_string_ext(r, JSON_C_TO_STRING_PRETTY |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE));
    else
        print_window(r);
    json_object_put(r);
    return 0;
}

static int cmd_window_id(int argc, char **argv, const char *op)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'J'},
                                         {"end-timeout", required_argument, NULL, 'E'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int opt, json = 0, ending = strcmp(op, "window_end") == 0;
    json_object *req = json_object_new_object();
    json_object_object_add(req, "op", json_object_new_string(op));
    optind = 0; /* glibc: 0 re-initialises getopt after the global options */
    while ((opt = getopt_long(argc, argv, ending ? "JE:h" : "Jh", opts, NULL)) != -1) {
        if (opt == 'J') {
            json = 1;
        } else if (opt == 'E' && ending) {
            if (add_end_timeout(req, optarg) < 0) {
                json_object_put(req);
                return 2;
            }
        } else if (opt == 'h') {
            if (ending)
                printf("Usage: cuptimonctl end-window [ID] [--end-timeout=S] [--json]\n"
                       "End window ID (default: the newest): its API kinds are turned off, and\n"
                       "it waits until every process has handed over the records of the work\n"
                       "launched inside the window, work still running included, up to S\n"
                       "seconds (default: what begin-window said, else the daemon's\n"
                       "window_end_timeout_s).  Then the trace is written; its path and a\n"
                       "summary are printed, with the processes whose work still ran at the\n"
                       "bound (their records reach the archive, not the trace).\n");
            else
                printf("Usage: cuptimonctl start-window [ID] [--json]\n"
                       "Start window ID (default: the newest prepared one).\n");
            json_object_put(req);
            return 0;
        } else {
            json_object_put(req);
            return 2;
        }
    }
    if (optind < argc) {
        char *end;
        long long id = strtoll(argv[optind], &end, 10);
        if (*end || id <= 0) {
            fprintf(stderr, "cuptimonctl %s: '%s' is not a window id\n", argv[0], argv[optind]);
            json_object_put(req);
            return 2;
        }
        json_object_object_add(req, "window", json_object_new_int64(id));
    }
    /* Ending waits for every session's last flush and the trace writing. */
    if (ctl.timeout_ms < 120000)
        ctl.timeout_ms = 120000;
    json_object *r = call(req);
    json_object_put(req);
    if (!r)
        return 1;
    if (json)
        printf("%s\n", json_object_to_json_string_ext(r, JSON_C_TO_STRING_PRETTY |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE));
    else
        print_window(r);
    json_object_put(r);
    return 0;
}

static int cmd_windows(int argc, char **argv)
{
    int json = argc > 1 && strcmp(argv[1], "--json") == 0;
    json_object *req = json_object_new_object();
    json_object_object_add(req, "op", json_object_new_string("windows"));
    json_object *r = call(req), *ws;
    json_object_put(req);
    if (!r)
        return 1;
    if (json) {
        printf("%s\n", json_object_to_json_string_ext(r, JSON_C_TO_STRING_PRETTY |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE));
    } else if (json_object_object_get_ex(r, "windows", &ws) && json_object_array_length(ws)) {
        for (size_t i = 0; i < json_object_array_length(ws); i++)
            print_window(json_object_array_get_idx(ws, i));
    } else {
        printf("no windows\n");
    }
    json_object_put(r);
    return 0;
}

/* ---- the command table ---------------------------------------------------
 * One row per command: main() dispatches through it, and the "unknown
 * command" message lists its names, so neither can fall out of date.  op is
 * the daemon operation for the commands that are one request. */
struct command {
    const char *name;
    int (*run)(int argc, char **argv, const struct command *c);
    const char *op;
};

static int run_status(int argc, char **argv, const struct command *c)
{
    (void)c;
    return cmd_status(argc, argv);
}

static int run_flush(int argc, char **argv, const struct command *c)
{
    (void)c;
    return cmd_flush(argc, argv);
}

static int run_window_open(int argc, char **argv, const struct command *c)
{
    return cmd_window_open(argc, argv, c->op);
}

static int run_window_id(int argc, char **argv, const struct command *c)
{
    return cmd_window_id(argc, argv, c->op);
}

static int run_windows(int argc, char **argv, const struct command *c)
{
    (void)c;
    return cmd_windows(argc, argv);
}

static int run_reload(int argc, char **argv, const struct command *c)
{
    (void)argc;
    (void)argv;
    json_object *req = json_object_new_object();
    json_object_object_add(req, "op", json_object_new_string(c->op));
    json_object *r = call(req);
    json_object_put(req);
    if (!r)
        return 1;
    printf("reloaded %s\n", cuptimon__json_str(r, "reloaded", ""));
    json_object_put(r);
    return 0;
}

static int run_live(int argc, char **argv, const struct command *c)
{
    return strcmp(c->name, "top") == 0 ? cuptimon__cli_top(&ctl, argc, argv)
                                       : cuptimon__cli_metrics(&ctl, argc, argv);
}

static int run_merge(int argc, char **argv, const struct command *c)
{
    (void)c;
    return cuptimon__cli_merge(argc, argv);
}

static int run_decode(int argc, char **argv, const struct command *c)
{
    (void)c;
    optind = 0; /* glibc: 0 re-initialises getopt after the global options */
    return cuptimon__cli_decode(argc, argv);
}

static int run_stats(int argc, char **argv, const struct command *c)
{
    (void)c;
    return cuptimon__cli_stats(&ctl, argc, argv);
}

static int run_export(int argc, char **argv, const struct command *c)
{
    (void)c;
    return cuptimon__cli_export(&ctl, argc, argv);
}

static int run_gpu_metrics(int argc, char **argv, const struct command *c)
{
    (void)c;
    return cuptimon__cli_gpu_metrics(&ctl, argc, argv);
}

static int run_help(int argc, char **argv, const struct command *c)
{
    (void)argc;
    (void)argv;
    (void)c;
    usage(stdout);
    return 0;
}

static const struct command commands[] = {
    {"status", run_status, "status"},
    {"flush", run_flush, "flush"},
    {"begin-window", run_window_open, "window_begin"},
    {"prepare-window", run_window_open, "window_prepare"},
    {"start-window", run_window_id, "window_start"},
    {"end-window", run_window_id, "window_end"},
    {"windows", run_windows, "windows"},
    {"top", run_live, "top"},
    {"metrics", run_live, "metrics"},
    {"merge", run_merge, NULL},
    {"reload", run_reload, "reload"},
    {"decode", run_decode, NULL},
    {"stats", run_stats, NULL},
    {"export", run_export, NULL},
    {"gpu-metrics", run_gpu_metrics, "gpu_metrics"},
    {"help", run_help, NULL},
};

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* "status, flush, ..." into buf (cut short, never overrun, if too small). */
static void command_names(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof commands / sizeof commands[0] && used < len; i++) {
        int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", commands[i].name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"control-socket", required_argument, NULL, 'c'},
                                         {"timeout", required_argument, NULL, 't'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, 'V'},
                                         {NULL, 0, NULL, 0}};
    int opt;
    /* Global options stop at the command name. */
    while ((opt = getopt_long(argc, argv, "+c:t:hV", opts, NULL)) != -1) {
        char *end;
        switch (opt) {
        case 'c':
            if (cuptimon__ctl_set_path(&ctl, optarg, "cuptimonctl") < 0)
                return 2;
            break;
        case 't': {
            double t = strtod(optarg, &end);
            if (*end || !(t > 0 && t <= 3600)) {
                fprintf(stderr, "cuptimonctl: --timeout '%s' must be seconds in (0, 3600]\n",
                        optarg);
                return 2;
            }
            ctl.timeout_ms = (int)(t * 1000);
            break;
        }
        case 'h': usage(stdout); return 0;
        case 'V':
            printf("cuptimonctl %s (protocol %u)\n", PACKAGE_VERSION, CUPTIMON_PROTO_VERSION);
            return 0;
        default: fprintf(stderr, "Try 'cuptimonctl --help' for more information.\n"); return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[optind];
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    const struct command *c = find_command(cmd);
    if (c)
        return c->run(sub_argc, sub_argv, c);
    char known[512];
    command_names(known, sizeof known);
    fprintf(stderr,
            "cuptimonctl: unknown command '%s' (commands: %s)\n"
            "Try 'cuptimonctl --help' for more information.\n",
            cmd, known);
    return 2;
}
