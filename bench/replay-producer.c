/*
 * replay-producer: a producer that costs almost nothing itself, for
 * measuring the daemon at node scale (issue 20).  It speaks the shim's
 * protocol to the producer socket (hello with a sealed memfd pool, then
 * BUFFER_READY / BUFFER_RELEASE), with every slot holding a real CUPTI
 * buffer from the H200 (tests/data/cupti-13.0-h200), announced at a
 * given record rate.  The daemon cannot tell it from a shim: it reads,
 * archives and aggregates the same bytes.  Where a buffer is due and every
 * slot is still held by the daemon, its records count as dropped, as CUPTI
 * drops records when the shim has no buffer to give (the job never waits).
 *
 * usage: replay-producer --socket PATH --buffer FILE.bin.zst --records N
 *                        [--rate R] [--slots S] [--report FILE]
 *                        [--sparse --slot-size Z]   (a pool of holes, Z-byte slots)
 *                        [--window-buffer FILE.bin.zst] [--kernel-rate K]
 * --window-buffer: a buffer with runtime and driver API records (phase 1),
 * replayed instead of --buffer while the daemon has extra kinds enabled
 * (a trace window's ENABLE .. DISABLE), as a shim's CUPTI would then hand
 * over.  With it every replay is made fresh: correlation ids are shifted
 * past the previous replay's (the buffer's clock maps its first record to
 * the moment it is announced, as in every replay), so a window over replayed buffers keeps
 * what it would keep of a real job's (launch -> kernel pairs inside the
 * window, a set of distinct API calls that grows with the window).
 * --kernel-rate: announce buffers at K kernel records/s (instead of --rate
 * records of every kind).
 * --device N: every kernel, copy and memset on device N of the process
 * (the capture's are all on 0): producers given different devices are
 * jobs on different GPUs of a node, as the daemon's per-GPU views then see
 * them, rather than all on one.
 * --vary: each buffer announced is a prefix of the replayed one, cut at a
 * record boundary between half and all of its records (a pseudo-random
 * draw per buffer, the same sequence every run), as a shim's buffers vary
 * with how far CUPTI filled them before a flush; what grows a per-session
 * output buffer chunk by chunk (issue 49).
 * Prints (or writes) one JSON line: records_sent, records_dropped, buffers,
 * wall_s.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "archive/decode.h"
#include "load-zst.h"
#include "cuptimon-proto.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* SIGTERM ends the replay (the report is still written). */
static volatile sig_atomic_t stop;
static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

/* Sends one frame, with fd passed when fd >= 0. */
static int send_frame(int sock, uint16_t type, const void *body, size_t len, int fd)
{
    struct cuptimon_buf b = {0};
    if (cuptimon__frame_append(&b, type, body, len) < 0)
        return -ENOMEM;
    struct iovec iov = {.iov_base = b.data, .iov_len = b.len};
    char cbuf[CMSG_SPACE(sizeof(int))] = {0};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        mh.msg_control = cbuf;
        mh.msg_controllen = sizeof cbuf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    size_t off = 0;
    int rc = 0;
    while (off < b.len) {
        iov.iov_base = b.data + off;
        iov.iov_len = b.len - off;
        ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            break;
        }
        off += (size_t)n;
        mh.msg_control = NULL;
        mh.msg_controllen = 0;
    }
    cuptimon__buf_free(&b);
    return rc;
}

/* Reads what the socket has into in; returns 0, or -1 at EOF or error. */
static int read_some(int sock, struct cuptimon_buf *in)
{
    if (cuptimon__buf_reserve(in, 65536) < 0)
        return -1;
    ssize_t n = recv(sock, in->data + in->len, 65536, MSG_DONTWAIT);
    if (n == 0)
        return -1;
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    in->len += (size_t)n;
    return 0;
}

/* A buffer to replay: its bytes, its record counts, and where its
 * correlation ids lie (to shift them per replay). */
struct replay {
    uint8_t *buf;
    size_t len;
    uint64_t records, kernels;
    uint64_t first_ts;  /* the earliest start of a record in it */
    uint64_t span_ns;   /* from first_ts to the latest end */
    uint32_t max_corr;  /* the highest correlation id in it */
    uint32_t *corr_off; /* byte offsets of the correlation id fields */
    uint32_t *corr_val; /* their values in the file */
    size_t ncorr;
    uint32_t *ends; /* ends[i]: the byte offset after record i (--vary) */
    size_t nends;
};

/* The offset of a 4-byte field of a record of kind k: field f_kernel of a
 * kernel, f_copy of a copy, f_set of a memset, f_api of an API record (-1:
 * none), or -1. */
static int field_of(const struct cuptimon_layout *l, uint32_t k, int f_kernel, int f_copy,
                    int f_set, int f_api)
{
    const struct cuptimon_rec_layout *r = k < CUPTIMON_KIND_SLOTS ? l->rec[k] : NULL;
    int f = -1;
    if (!r)
        return -1;
    switch (r->type) {
    case CUPTIMON_REC_KERNEL: f = f_kernel; break;
    case CUPTIMON_REC_MEMCPY: f = f_copy; break;
    case CUPTIMON_REC_MEMSET: f = f_set; break;
    case CUPTIMON_REC_API: f = f_api; break;
    default: return -1;
    }
    return f >= 0 && r->f[f].width == 4 ? r->f[f].off : -1;
}

static int corr_field(const struct cuptimon_layout *l, uint32_t k)
{
    return field_of(l, k, CUPTIMON_FK_correlationId, CUPTIMON_FMC_correlationId,
                    CUPTIMON_FMS_correlationId, CUPTIMON_FAPI_correlationId);
}

static int device_field(const struct cuptimon_layout *l, uint32_t k)
{
    return field_of(l, k, CUPTIMON_FK_deviceId, CUPTIMON_FMC_deviceId, CUPTIMON_FMS_deviceId, -1);
}

/* Loads a buffer to replay; device >= 0 puts its kernels, copies and
 * memsets on that device (--device). */
static int replay_load(struct replay *rp, const char *path, const struct cuptimon_layout *l,
                       long device)
{
    struct cuptimon_decode_stats ds = {0};
    struct cuptimon_walk w;
    struct cuptimon_ev ev;
    uint64_t last_end = 0;
    memset(rp, 0, sizeof *rp);
    rp->buf = bench_load_zst("replay-producer", path, &rp->len);
    if (!rp->buf)
        return -1;
    cuptimon__walk_begin(&w, l, rp->buf, rp->len, &ds);
    while (cuptimon__walk_next(&w, &ev)) {
        if (ev.type == CUPTIMON_EV_KERNEL)
            rp->kernels++;
        if (ev.start && (!rp->first_ts || ev.start < rp->first_ts))
            rp->first_ts = ev.start;
        if (ev.end > last_end)
            last_end = ev.end;
        if (ev.correlation_id > rp->max_corr)
            rp->max_corr = ev.correlation_id;
    }
    rp->records = ds.records ? ds.records : 1;
    rp->span_ns = last_end > rp->first_ts ? last_end - rp->first_ts : 0;
    /* The fields, found by walking the records by their sizes as the
     * walker does (every record starts with its kind). */
    rp->corr_off = calloc(rp->records, sizeof *rp->corr_off);
    rp->corr_val = calloc(rp->records, sizeof *rp->corr_val);
    rp->ends = calloc(rp->records, sizeof *rp->ends);
    if (!rp->corr_off || !rp->corr_val || !rp->ends)
        return -1;
    for (size_t off = 0; off + 4 <= rp->len;) {
        uint32_t k;
        memcpy(&k, rp->buf + off, 4);
        uint16_t sz = k < CUPTIMON_KIND_SLOTS ? l->size[k] : 0;
        if (sz == 0 || off + sz > rp->len)
            break;
        int df = device >= 0 ? device_field(l, k) : -1;
        if (df >= 0) {
            uint32_t dev = (uint32_t)device;
            memcpy(rp->buf + off + df, &dev, 4);
        }
        int f = corr_field(l, k);
        if (f >= 0 && rp->ncorr < rp->records) {
            rp->corr_off[rp->ncorr] = (uint32_t)(off + (size_t)f);
            memcpy(&rp->corr_val[rp->ncorr], rp->buf + off + f, 4);
            rp->ncorr++;
        }
        off += sz;
        if (rp->nends < rp->records)
            rp->ends[rp->nends++] = (uint32_t)off;
    }
    return 0;
}

/* 1 when the JSON body {"kinds":[...]} lists kind k. */
static int names_kind(const uint8_t *body, size_t len, long k)
{
    char t[512];
    size_t n = len < sizeof t - 1 ? len : sizeof t - 1;
    memcpy(t, body, n);
    t[n] = '\0';
    for (char *p = strchr(t, '['); p && *p && *p != ']'; p++) {
        if (*p >= '0' && *p <= '9') {
            char *e;
            if (strtol(p, &e, 10) == k)
                return 1;
            p = e - 1;
        }
    }
    return 0;
}

/* Writes rp into a slot with its correlation ids shifted by base. */
static void replay_fill(const struct replay *rp, uint8_t *slot, uint32_t base)
{
    memcpy(slot, rp->buf, rp->len);
    for (size_t i = 0; i < rp->ncorr; i++) {
        uint32_t v = rp->corr_val[i] ? rp->corr_val[i] + base : 0;
        memcpy(slot + rp->corr_off[i], &v, 4);
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {"buffer", required_argument, NULL, 'b'},
        {"records", required_argument, NULL, 'n'},
        {"rate", required_argument, NULL, 'r'},
        {"slots", required_argument, NULL, 'S'},
        {"report", required_argument, NULL, 'o'},
        {"slot-size", required_argument, NULL, 'Z'},
        {"sparse", no_argument, NULL, 'P'},
        {"window-buffer", required_argument, NULL, 'W'},
        {"kernel-rate", required_argument, NULL, 'K'},
        {"vary", no_argument, NULL, 'V'},
        {"device", required_argument, NULL, 'D'},
        {NULL, 0, NULL, 0},
    };
    const char *sock_path = NULL, *buf_path = NULL, *report = NULL, *wbuf_path = NULL;
    double rate = 0, kernel_rate = 0;
    uint64_t want = 100000;
    unsigned slots = 16;
    uint64_t want_slot = 0;
    int sparse = 0, vary = 0, c;
    long device = -1;
    uint64_t draw = 88172645463325252ull; /* xorshift64 state for --vary */
    while ((c = getopt_long(argc, argv, "s:b:n:r:S:o:Z:PW:K:VD:", opts, NULL)) != -1) {
        switch (c) {
        case 's': sock_path = optarg; break;
        case 'b': buf_path = optarg; break;
        case 'n': want = strtoull(optarg, NULL, 10); break;
        case 'r': rate = atof(optarg); break;
        case 'S': slots = (unsigned)atoi(optarg); break;
        case 'o': report = optarg; break;
        case 'Z': want_slot = strtoull(optarg, NULL, 10); break;
        case 'P': sparse = 1; break;
        case 'W': wbuf_path = optarg; break;
        case 'K': kernel_rate = atof(optarg); break;
        case 'V': vary = 1; break;
        case 'D': device = atol(optarg); break;
        default:
            fprintf(stderr, "usage: replay-producer --socket PATH --buffer FILE.bin.zst "
                            "--records N [--rate R] [--slots S] [--report FILE] "
                            "[--window-buffer FILE.bin.zst] [--kernel-rate K] [--vary] "
                            "[--device N]\n");
            return 2;
        }
    }
    if (!sock_path || !buf_path || slots < 2 || slots > 4096) {
        fprintf(stderr, "replay-producer: --socket and --buffer are needed; --slots 2..4096\n");
        return 2;
    }
    /* The records of the buffers, walked as the shim does. */
    struct cuptimon_layout l;
    struct replay rp[2];
    cuptimon__layout_init(&l, 130001, NULL);
    if (replay_load(&rp[0], buf_path, &l, device) < 0 ||
        (wbuf_path && replay_load(&rp[1], wbuf_path, &l, device) < 0))
        return 2;
    uint8_t *buf = rp[0].buf;
    size_t len = rp[0].len;
    uint64_t per_buf = rp[0].records;
    uint64_t slot_size = (len + 4095) & ~(uint64_t)4095;
    if (wbuf_path && rp[1].len > len)
        slot_size = (rp[1].len + 4095) & ~(uint64_t)4095;
    /* --sparse --slot-size Z: a hostile producer's pool, never written
     * (all holes), every byte of each slot announced: what a sparse pool
     * costs the daemon and the producers beside it. */
    if (sparse && want_slot >= 4096) {
        slot_size = (want_slot + 4095) & ~(uint64_t)4095;
        len = slot_size;
        per_buf = 1;
    }

    int mfd = memfd_create("replay-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mfd < 0 || ftruncate(mfd, (off_t)(slots * slot_size)) < 0 ||
        fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
        perror("replay-producer: pool");
        return 1;
    }
    uint8_t *pool = mmap(NULL, slots * slot_size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (pool == MAP_FAILED) {
        perror("replay-producer: mmap");
        return 1;
    }
    for (unsigned i = 0; i < slots && !sparse; i++)
        memcpy(pool + i * slot_size, buf, len);

    int sock = cuptimon__connect(sock_path, 0);
    if (sock < 0) {
        fprintf(stderr, "replay-producer: %s: %s\n", sock_path, strerror(-sock));
        return 1;
    }
    char hello[1024];
    snprintf(hello, sizeof hello,
             "{\"pid\":%ld,\"uid\":%u,\"hostname\":\"bench\",\"exe\":\"replay-producer\","
             "\"cupti_version\":130001,\"record_sizes\":{\"10\":216,\"1\":96,\"2\":88,\"4\":40,"
             "\"5\":40},\"job\":{\"label\":\"replay\"},%s"
             "\"pool\":{\"slots\":%u,\"slot_size\":%" PRIu64 "}}",
             (long)getpid(), (unsigned)getuid(), wbuf_path ? "\"kinds\":[10,1,2]," : "", slots,
             slot_size);
    if (send_frame(sock, CUPTIMON_MSG_HELLO, hello, strlen(hello), mfd) < 0) {
        perror("replay-producer: hello");
        return 1;
    }
    close(mfd);

    uint8_t *held = calloc(slots, 1);
    uint8_t *holds = calloc(slots, 1); /* which buffer a slot holds (fresh replays) */
    int cur = 0;                       /* the buffer replayed now: 1 inside a window */
    uint32_t corr_base = 0;
    uint64_t next_start = 0; /* where the next replay's first record goes (--vary too) */
    uint64_t window_buffers = 0;
    struct cuptimon_buf in = {0};
    uint64_t sent = 0, dropped = 0, seq = 0, buffers = 0;
    unsigned outstanding = 0;
    int acked = 0, dead = 0;
    double t0 = now_s(), next_due = t0;
    double period = rate > 0 ? (double)per_buf / rate : 0;
    if (kernel_rate > 0)
        period = (double)(rp[0].kernels ? rp[0].kernels : 1) / kernel_rate;
    signal(SIGTERM, on_term);
    while (!dead && !stop && (sent + dropped < want || outstanding > 0)) {
        double t = now_s();
        while (acked && sent + dropped < want && (period == 0 || t >= next_due)) {
            unsigned s = 0;
            while (s < slots && held[s])
                s++;
            if (s == slots) {
                if (period == 0)
                    break;          /* as fast as possible: wait for a release */
                dropped += per_buf; /* CUPTI would drop: no buffer to give */
            } else {
                /* The buffer's clock puts its first record at now, or
                 * after the last replay's end where that is later (this
                 * producer can outrun the H200 that made the buffer), so
                 * that time moves on from replay to replay as one GPU's
                 * does.  (The same timestamps every time made each
                 * buffer's kernels overlap every busy interval the daemon
                 * keeps: a merge no real job causes.) */
                uint64_t now_ns = realtime_ns();
                uint64_t at = next_start > now_ns ? next_start : now_ns;
                uint64_t cupti_ts = rp[cur].first_ts - (at - now_ns);
                next_start = at + rp[cur].span_ns + 1000;
                if (wbuf_path) {
                    /* A fresh replay: new correlation ids, and a clock that
                     * puts the buffer's first record at now. */
                    const struct replay *r = &rp[cur];
                    if (holds[s] != cur || corr_base)
                        replay_fill(r, pool + s * slot_size, corr_base);
                    holds[s] = (uint8_t)cur;
                    corr_base += r->max_corr + 1;
                    len = r->len;
                    per_buf = r->records;
                    window_buffers += cur;
                }
                if (vary && !sparse && rp[cur].nends > 1) {
                    const struct replay *r = &rp[cur];
                    draw ^= draw << 13;
                    draw ^= draw >> 7;
                    draw ^= draw << 17;
                    size_t k = r->nends / 2 + (size_t)(draw % (r->nends - r->nends / 2));
                    len = r->ends[k];
                    per_buf = k + 1;
                }
                struct cuptimon_buffer_ready m = {.slot = s,
                                                  .valid_size = len,
                                                  .cupti_ts = cupti_ts,
                                                  .realtime_ns = now_ns,
                                                  .seq = seq++,
                                                  .records = per_buf};
                uint8_t body[CUPTIMON_BUFFER_READY_SIZE];
                cuptimon__buffer_ready_encode(body, &m);
                if (send_frame(sock, CUPTIMON_MSG_BUFFER_READY, body, sizeof body, -1) < 0) {
                    dead = 1;
                    break;
                }
                held[s] = 1;
                outstanding++;
                sent += per_buf;
                buffers++;
            }
            next_due += period;
            if (kernel_rate > 0)
                period = (double)(rp[cur].kernels ? rp[cur].kernels : 1) / kernel_rate;
        }
        int wait_ms = period > 0 ? (int)((next_due - now_s()) * 1000) : 100;
        struct pollfd p = {.fd = sock, .events = POLLIN};
        if (poll(&p, 1,
                 wait_ms < 0     ? 0
                 : wait_ms > 100 ? 100
                                 : wait_ms) > 0 &&
            read_some(sock, &in) < 0)
            dead = 1;
        struct cuptimon_msg_hdr h;
        while (cuptimon__frame_parse(in.data, in.len, &h) == 0) {
            const uint8_t *body = in.data + CUPTIMON_MSG_HDR_SIZE;
            struct cuptimon_buffer_release r;
            if (h.type == CUPTIMON_MSG_HELLO_ACK) {
                acked = 1;
                next_due = now_s();
            } else if (h.type == CUPTIMON_MSG_BUFFER_RELEASE &&
                       cuptimon__buffer_release_decode(body, h.length, &r) == 0 && r.slot < slots &&
                       held[r.slot]) {
                held[r.slot] = 0;
                outstanding--;
            } else if ((h.type == CUPTIMON_MSG_ENABLE || h.type == CUPTIMON_MSG_DISABLE) &&
                       wbuf_path) {
                /* A window's kinds: the API buffer while they are on.  Any
                 * ENABLE that names the runtime kind turns them on. */
                if (h.type == CUPTIMON_MSG_DISABLE)
                    cur = 0;
                else if (names_kind(body, h.length, CUPTIMON_KIND_RUNTIME))
                    cur = 1;
            } else if (h.type == CUPTIMON_MSG_FLUSH) {
                /* Nothing held back: answer at once, as a shim would. */
                struct cuptimon_flush f;
                if (cuptimon__flush_decode(body, h.length, &f) == 0) {
                    struct cuptimon_flush_done d = {.flush_id = f.flush_id};
                    uint8_t out[CUPTIMON_FLUSH_DONE_SIZE];
                    cuptimon__flush_done_encode(out, &d);
                    send_frame(sock, CUPTIMON_MSG_FLUSH_DONE, out, sizeof out, -1);
                }
            } else if (h.type == CUPTIMON_MSG_REPLY_ERROR) {
                fprintf(stderr, "replay-producer: refused: %.*s\n", (int)h.length, body);
                dead = 1;
            }
            cuptimon__buf_consume(&in, CUPTIMON_MSG_HDR_SIZE + h.length);
        }
    }
    send_frame(sock, CUPTIMON_MSG_BYE, NULL, 0, -1);
    close(sock);
    double wall = now_s() - t0;
    FILE *f = report ? fopen(report, "w") : stdout;
    if (!f)
        f = stdout;
    fprintf(f,
            "{\"records_sent\":%" PRIu64 ",\"records_dropped\":%" PRIu64 ",\"buffers\":%" PRIu64
            ",\"records_per_buffer\":%" PRIu64 ",\"window_buffers\":%" PRIu64
            ",\"wall_s\":%.3f,\"failed\":%s}\n",
            sent, dropped, buffers, per_buf, window_buffers, wall, dead ? "true" : "false");
    if (f != stdout)
        fclose(f);
    cuptimon__buf_free(&in);
    free(held);
    free(holds);
    for (int i = 0; i < (wbuf_path ? 2 : 1); i++) {
        free(rp[i].buf);
        free(rp[i].corr_off);
        free(rp[i].corr_val);
        free(rp[i].ends);
    }
    munmap(pool, slots * slot_size);
    return dead ? 1 : 0;
}
