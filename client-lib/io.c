/*
 * The shim's IO thread: the only code in the job that touches the daemon's
 * socket.  It connects (and reconnects with backoff), sends the hello with
 * the pool fd, forwards queued strings and BUFFER_READY messages in order,
 * and carries out the daemon's commands.  A missing or slow daemon costs
 * the job nothing but the pool filling up (then CUPTI drops and counts).
 */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

#define BACKOFF_MIN_MS    100
#define BACKOFF_MAX_MS    5000
#define EXIT_RETRY_MS     20
#define STRINGS_BATCH_MAX (512u << 10)

#define THREAD_NAMES_MAX 512
#define COLLECT_BATCH    4 /* buffers per pass of the IO loop (collect) */

struct io {
    struct shim *s;
    int fd;
    struct cuptimon_buf out, in;
    long long next_attempt;
    int backoff_ms;
    int busy_backoff_ms; /* after "out of descriptors" refusals in a row */
    int stop;
    int refused_logged;
    uint64_t session;
    /* Bytes of this connection's stream that the socket took: a slot's
     * BUFFER_READY reached the daemon's socket once this passes its
     * frame_end (struct shim_slot_info). */
    uint64_t sent_pos;
    int stopped_connected; /* connected when the IO thread stopped */
    /* Thread names already sent in this session: tid and a hash of comm. */
    struct {
        uint32_t tid, hash;
    } named[THREAD_NAMES_MAX];
    unsigned nnamed;
    uint64_t named_session;
    int devices_reported; /* the devices' properties are in the string table */
    int ranges;           /* the daemon's HELLO_ACK says it takes RANGES */
    /* The daemon's current fence (FLUSH mode FENCE): its number, and the
     * flush generation it began at (the buffers CUPTI got before it). */
    uint32_t fence;
    uint64_t fence_gen;
    /* CUPTI's v2 path (v2.c): the daemon takes LAYOUTS; the layout
     * generation the connection described last; a daemon that does not
     * take LAYOUTS is left (once its buffers are back) for a new hello
     * describing the next generation. */
    int layouts, acked; /* acked: the HELLO_ACK came (says whether it takes LAYOUTS) */
    int held;           /* the daemon's HELLO_ACK says it takes HELD */
    int held_declines;  /* ... with the shim's declines (CUPTIMON_HELD_DECLINES) */
    long long held_ms;  /* when the last HELD report was considered */
    uint64_t sent_gen;
    int renew, renew_logged;
};

static struct io io_state;

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cuptimon__io_wake(struct shim *s)
{
    uint64_t one = 1;
    if (s->wake_fd >= 0) {
        ssize_t w = write(s->wake_fd, &one, sizeof one);
        (void)w;
    }
}

static void signal_drained_locked(struct shim *s)
{
    if (s->ring_len == 0 && atomic_load(&s->in_flight) == 0)
        pthread_cond_broadcast(&s->drained);
}

/* ---- the hello ---------------------------------------------------------- */

static void add_env(json_object *o, const char *key, const char *env)
{
    const char *v = getenv(env);
    if (v && *v)
        json_object_object_add(o, key, json_object_new_string(v));
}

static char *hello_json(struct shim *s, uint64_t gen)
{
    json_object *o = json_object_new_object(), *job = json_object_new_object();
    json_object *sizes = json_object_new_object(), *kinds = json_object_new_array();
    json_object *pool = json_object_new_object();
    char host[256] = "", exe[512] = "";
    gethostname(host, sizeof host - 1);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0)
        exe[n] = '\0';
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);

    json_object_object_add(o, "pid", json_object_new_int64(getpid()));
    json_object_object_add(o, "io_tid", json_object_new_int64((int64_t)syscall(SYS_gettid)));
    json_object_object_add(o, "uid", json_object_new_int64(getuid()));
    json_object_object_add(o, "hostname", json_object_new_string(host));
    json_object_object_add(o, "exe", json_object_new_string(exe));
    json_object_object_add(o, "shim_version", json_object_new_string(PACKAGE_VERSION));
    json_object_object_add(o, "cupti_version", json_object_new_int64(s->cupti.version));
    json_object_object_add(o, "cupti_path", json_object_new_string(s->cupti.path));
    json_object_object_add(o, "start_unix_ns",
                           json_object_new_int64((int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec));
    /* The record sizes of the runtime CUPTI's release, as this shim reads
     * them (none when it does not know the version), where the running
     * libcupti was not measured yet, and its measured sizes where it was
     * (record_sizes_measured, the per-session check; those measured later
     * follow in the string table, CUPTIMON_RECORD_SIZE_KEY).  The daemon
     * decodes only kinds whose size agrees with its own table for that
     * version.  On CUPTI's v2 path the records are user-defined: their
     * layouts, not the release's sizes (v2.c). */
    if (s->v2)
        cuptimon__v2_hello(s, o, gen);
    else
        json_object_object_add(o, "activity_api", json_object_new_string("v1"));
    if (!s->v2 && s->v1_reason[0])
        json_object_object_add(o, "activity_api_note", json_object_new_string(s->v1_reason));
    json_object *measured = json_object_new_object(), *by = json_object_new_object();
    for (unsigned k = 1; k < CUPTIMON_LAYOUT_KINDS && !s->v2; k++) {
        char key[12];
        snprintf(key, sizeof key, "%u", k);
        if (s->rec_size[k] != 0) {
            json_object_object_add(sizes, key, json_object_new_int64(s->rec_size[k]));
            json_object_object_add(measured, key, json_object_new_int64(s->rec_size[k]));
            json_object_object_add(by, key,
                                   json_object_new_string(s->rec_size_by[k] == SHIM_SIZE_BY_STRIDE
                                                              ? "stride"
                                                              : "struct_size"));
        } else if (s->cupti.release != NULL && s->cupti.release->kinds[k] != NULL) {
            json_object_object_add(sizes, key,
                                   json_object_new_int64(s->cupti.release->kinds[k]->size));
        }
    }
    if (s->v2) {
        json_object_put(sizes); /* v2.c announced its own */
        json_object_put(measured);
        json_object_put(by);
    } else {
        if (s->cupti.release != NULL)
            json_object_object_add(o, "cupti_release",
                                   json_object_new_string(s->cupti.release->cuda));
        json_object_object_add(o, "record_sizes", sizes);
        json_object_object_add(o, "record_sizes_measured", measured);
        json_object_object_add(o, "record_sizes_by", by);
    }
    for (int i = 0; i < s->nkinds; i++)
        json_object_array_add(kinds, json_object_new_int64(s->kinds[i]));
    json_object_object_add(o, "kinds", kinds);
    json_object_object_add(pool, "slots", json_object_new_int64(s->nslots));
    json_object_object_add(pool, "slot_size", json_object_new_int64((int64_t)s->slot_size));
    /* The resident slots; the rest grow the pool while CUPTI holds
     * buffers behind running work, up to the cap (held.c). */
    json_object_object_add(pool, "resident_slots", json_object_new_int64(s->nbase));
    json_object_object_add(pool, "cap_from", json_object_new_string(s->pool_cap_why));
    json_object_object_add(o, "pool", pool);
    add_env(job, "slurm_job_id", "SLURM_JOB_ID");
    add_env(job, "rank", "RANK");
    add_env(job, "local_rank", "LOCAL_RANK");
    add_env(job, "world_size", "WORLD_SIZE");
    add_env(job, "torchelastic_run_id", "TORCHELASTIC_RUN_ID");
    add_env(job, "label", "CUPTIMON_LABEL");
    json_object_object_add(o, "job", job);
    /* Totals so far: a reconnecting shim tells the new daemon what was lost. */
    json_object *cnt = json_object_new_object();
    json_object_object_add(cnt, "buffers_lost",
                           json_object_new_int64((int64_t)atomic_load(&s->buffers_lost)));
    json_object_object_add(cnt, "requests_declined",
                           json_object_new_int64((int64_t)atomic_load(&s->requests_declined)));
    json_object_object_add(cnt, "connects",
                           json_object_new_int64((int64_t)atomic_load(&s->connects)));
    json_object_object_add(o, "counters", cnt);
    /* It answers FLUSH mode FENCE (cuptimon-proto.h). */
    json_object_object_add(o, "fence", json_object_new_boolean(1));
    /* Whose NCCL profiler plugin the job runs (nccl.c): "shim", "user"
     * (the job named its own: NCCL loads one, so cuptimon sees no
     * collectives), "off" (CUPTIMON_NCCL=0) or "unset". */
    const char *user = NULL;
    json_object *nc = json_object_new_object();
    json_object_object_add(nc, "plugin",
                           json_object_new_string(cuptimon__nccl_plugin_state(&user)));
    if (user && *user)
        json_object_object_add(nc, "user_plugin", json_object_new_string(user));
    json_object_object_add(o, "nccl", nc);

    char *txt = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
    return txt;
}

/* ---- connection ------------------------------------------------------- */

static void disconnect(struct io *io, const char *why)
{
    struct shim *s = io->s;
    if (io->fd < 0)
        return;
    shim_debug(s, "daemon connection closed: %s", why);
    close(io->fd);
    io->fd = -1;
    io->ranges = 0;
    io->out.len = 0;
    io->in.len = 0;
    atomic_store(&s->connected, 0);
    /* Buffers the old daemon held are gone with it: reclaim the slots and
     * count them as lost.  Buffers not yet sent stay queued for the next
     * daemon, and so do all strings (a new session needs them again). */
    pthread_mutex_lock(&s->qlock);
    for (uint32_t i = 0; i < s->nslots; i++) {
        if (atomic_load(&s->slot_state[i]) != SLOT_SENT)
            continue;
        atomic_fetch_sub(&s->in_flight, 1);
        atomic_fetch_add(&s->buffers_lost, 1);
        /* Until a hello tells the next daemon, only the shim knows. */
        atomic_fetch_add(&s->unreported_buffers, 1);
        atomic_fetch_add(&s->unreported_records, s->slot_info[i].records);
        cuptimon__slot_recycle(s, i, s->slot_used[i]);
    }
    s->strings_sent = 0;
    pthread_cond_broadcast(&s->drained);
    pthread_mutex_unlock(&s->qlock);
    io->sent_pos = 0;
    io->next_attempt = mono_ms() + io->backoff_ms;
}

static int try_connect(struct io *io)
{
    struct shim *s = io->s;
    int fd = -1, busy = 0, err = 0;
    for (int i = 0; i < s->nsockets && fd < 0; i++) {
        fd = cuptimon__connect(s->sockets[i], 1);
        busy |= fd == -EAGAIN;
        /* A daemon answered there (took the connection, or is there with
         * its queue full): a loss report at exit goes beside it. */
        if (fd >= 0 || fd == -EAGAIN)
            atomic_store(&s->daemon_seen, i + 1);
        if (fd < 0 && (!err || fd == -EAGAIN))
            err = -fd;
    }
    atomic_store(&s->daemon_busy, fd < 0 && busy);
    atomic_store(&s->connect_errno, fd < 0 ? (busy ? EAGAIN : err) : 0);
    if (fd < 0) {
        io->next_attempt = mono_ms() + io->backoff_ms;
        io->backoff_ms = io->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : io->backoff_ms * 2;
        atomic_store(&s->connect_tried, 1); /* after its outcome: drain reads both */
        return -1;
    }
    /* CUPTI 13.2+ says its record sizes itself: into this hello (v1: on
     * the v2 path the layouts CUPTI reports say it). */
    if (!s->v2)
        cuptimon__measure_struct_sizes(s);
    /* The layouts of the first buffer it will send (v2 path). */
    uint64_t gen = 0;
    if (s->v2) {
        pthread_mutex_lock(&s->qlock);
        gen = s->ring_len ? cuptimon__v2_slot_gen_locked(s->ring[s->ring_head].msg.slot) : 0;
        pthread_mutex_unlock(&s->qlock);
        if (gen == 0)
            gen = cuptimon__v2_current_gen(s);
    }
    char *hello = hello_json(s, gen);
    struct cuptimon_buf b = {0};
    int rc = hello ? cuptimon__frame_append(&b, CUPTIMON_MSG_HELLO, hello, strlen(hello)) : -ENOMEM;
    free(hello);
    if (rc == 0) {
        ssize_t n = cuptimon__send_fd(fd, b.data, b.len, s->pool_fd);
        /* ETOOMANYREFS: this user has more descriptors in flight than its
         * limit (many jobs queued to a stopped daemon). */
        rc = n == (ssize_t)b.len ? 0 : n < 0 ? (int)n : -EIO;
    }
    cuptimon__buf_free(&b);
    if (rc < 0) {
        atomic_store(&s->connect_errno, -rc);
        close(fd);
        io->next_attempt = mono_ms() + io->backoff_ms;
        atomic_store(&s->connect_tried, 1);
        return -1;
    }
    io->fd = fd;
    io->backoff_ms = BACKOFF_MIN_MS;
    io->sent_pos = 0;
    io->sent_gen = gen;
    io->layouts = 0;
    io->acked = 0;
    io->held = 0;
    io->held_declines = 0;
    cuptimon__held_reset();
    /* The hello carried the losses of earlier connections. */
    atomic_store(&s->unreported_buffers, 0);
    atomic_store(&s->unreported_records, 0);
    atomic_store(&s->refused, 0);
    atomic_store(&s->connected, 1);
    atomic_store(&s->connect_tried, 1);
    atomic_fetch_add(&s->connects, 1);
    shim_debug(s, "connected to the daemon");
    return 0;
}

/* Frames the strings not yet sent.  Called with qlock held. */
static void frame_strings_locked(struct io *io)
{
    struct shim *s = io->s;
    while (s->strings.len > CUPTIMON_STRINGS_HDR_SIZE && s->strings_sent < s->strings.len) {
        size_t from = s->strings_sent < CUPTIMON_STRINGS_HDR_SIZE ? CUPTIMON_STRINGS_HDR_SIZE
                                                                  : s->strings_sent;
        /* Cut at entry boundaries, at most STRINGS_BATCH_MAX per frame. */
        size_t to = from;
        uint32_t count = 0;
        while (to < s->strings.len) {
            uint32_t len = cuptimon__get_u32(s->strings.data + to + 8);
            size_t e = CUPTIMON_STRING_ENTRY_HDR + len + 1;
            if (to - from + e > STRINGS_BATCH_MAX && count > 0)
                break;
            to += e;
            count++;
        }
        uint8_t h[CUPTIMON_STRINGS_HDR_SIZE] = {0};
        cuptimon__put_u32(h, count);
        size_t body = sizeof h + (to - from);
        if (cuptimon__buf_reserve(&io->out, CUPTIMON_MSG_HDR_SIZE + body) < 0)
            break;
        cuptimon__hdr_encode(io->out.data + io->out.len, CUPTIMON_MSG_STRINGS, (uint32_t)body);
        io->out.len += CUPTIMON_MSG_HDR_SIZE;
        cuptimon__buf_append(&io->out, h, sizeof h);
        cuptimon__buf_append(&io->out, s->strings.data + from, to - from);
        s->strings_sent = to;
    }
}

/* A buffer whose layouts are no longer known (more layout changes than the
 * shim keeps before the IO thread could send them): it cannot be
 * described, so it is not sent; its slot goes back, counted as lost. */
static void drop_undescribed(struct io *io, uint32_t slot)
{
    struct shim *s = io->s;
    static int logged;
    atomic_fetch_add(&s->buffers_lost, 1);
    cuptimon__slot_recycle(s, slot, s->slot_used[slot]);
    pthread_mutex_lock(&s->qlock);
    atomic_fetch_sub(&s->in_flight, 1);
    signal_drained_locked(s);
    pthread_mutex_unlock(&s->qlock);
    if (!logged++)
        cuptimon__log("CUPTI changed its record layouts more often than the shim keeps them "
                      "before they reach the daemon; a buffer whose layouts were lost is not "
                      "sent (counted as lost)");
}

/* Whether a BUFFER_READY is out that the daemon has not released. */
static int buffers_out(struct shim *s)
{
    for (uint32_t i = 0; i < s->nslots; i++)
        if (atomic_load(&s->slot_state[i]) == SLOT_SENT)
            return 1;
    return 0;
}

/* Moves what the completion callback queued into the output buffer, at
 * most max buffers; 1 when more are queued.  Each buffer is walked here,
 * off CUPTI's thread and outside our lock (its names interned), and its
 * new strings are framed before it, so that every name reaches the daemon
 * before a buffer that uses it.  The IO loop takes COLLECT_BATCH at a
 * time, sending and reading the daemon's releases between batches: the
 * buffers a long kernel held all complete when it ends (H100: 153 of them,
 * 0.45 s of walking), and the daemon archives the first while the shim
 * walks the rest. */
static void report_devices(struct io *io);
static void report_held(struct io *io);

static int collect(struct io *io, uint32_t max)
{
    struct shim *s = io->s;
    for (uint32_t done = 0;; done++) {
        pthread_mutex_lock(&s->qlock);
        if (s->ring_len > 0 && done == max) {
            pthread_mutex_unlock(&s->qlock);
            return 1;
        }
        if (s->ring_len == 0) {
            frame_strings_locked(io);
            pthread_mutex_unlock(&s->qlock);
            /* After the strings that name them.  A daemon that does not
             * know RANGES (older than the shim) would count each one a
             * protocol error, so they are dropped for it. */
            cuptimon__ranges_frame(s, &io->out, io->ranges);
            return 0;
        }
        struct cuptimon_buffer_ready m = s->ring[s->ring_head].msg;
        /* cuptimon's own records (NCCL's operations) have no CUPTI layout. */
        int own = m.stream_id == CUPTIMON_OWN_RECORDS_STREAM && m.context == 0;
        uint64_t gen = own ? io->sent_gen : s->v2 ? cuptimon__v2_slot_gen_locked(m.slot) : 0;
        if (s->v2 && gen != io->sent_gen && !io->layouts) {
            /* Whether the daemon takes LAYOUTS is in its HELLO_ACK: wait
             * for it.  One older than LAYOUTS: a new hello must describe
             * the new layouts. */
            io->renew = io->acked;
            frame_strings_locked(io);
            pthread_mutex_unlock(&s->qlock);
            return 0;
        }
        atomic_store(&s->slot_state[m.slot], SLOT_SENT);
        s->ring_head = (s->ring_head + 1) % s->nslots;
        s->ring_len--;
        pthread_mutex_unlock(&s->qlock);

        if (s->v2 && gen != io->sent_gen) {
            /* The buffer's layouts before it (cuptimon-proto.h, LAYOUTS). */
            if (cuptimon__v2_frame_layouts(s, &io->out, gen, m.seq) < 0) {
                drop_undescribed(io, m.slot);
                continue;
            }
            io->sent_gen = gen;
        }
        /* v2: counted (and its names interned) in the completion callback. */
        if (!s->v2 && !own)
            m.records = cuptimon__walk_slot(s, m.slot, m.valid_size);
        /* CUDA work was done, so cuInit has returned: the driver answers. */
        if (m.records > 0 && !io->devices_reported)
            report_devices(io);

        uint8_t body[CUPTIMON_BUFFER_READY_SIZE];
        cuptimon__buffer_ready_encode(body, &m);
        pthread_mutex_lock(&s->qlock);
        frame_strings_locked(io);
        pthread_mutex_unlock(&s->qlock);
        int rc = cuptimon__frame_append(&io->out, CUPTIMON_MSG_BUFFER_READY, body, sizeof body);
        s->slot_info[m.slot] =
            (struct shim_slot_info){.records = m.records,
                                    .dropped = m.dropped,
                                    .frame_end = rc == 0 ? io->sent_pos + io->out.len : UINT64_MAX};
        atomic_fetch_add(&s->buffers_sent, 1);
    }
}

static int flush_out(struct io *io)
{
    while (io->out.len > 0) {
        ssize_t n = send(io->fd, io->out.data, io->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 0;
            return -errno;
        }
        cuptimon__buf_consume(&io->out, (size_t)n);
        io->sent_pos += (uint64_t)n;
    }
    return 0;
}

/* ---- daemon commands ---------------------------------------------------- */

static void on_release(struct io *io, const uint8_t *body, size_t len)
{
    struct shim *s = io->s;
    struct cuptimon_buffer_release m;
    if (cuptimon__buffer_release_decode(body, len, &m) < 0 || m.slot >= s->nslots ||
        atomic_load(&s->slot_state[m.slot]) != SLOT_SENT) {
        shim_debug(s, "ignoring a bad BUFFER_RELEASE");
        return;
    }
    /* Zero what CUPTI wrote (or give a grown slot's memory back), here on
     * the IO thread, so that the slot goes back pre-zeroed and CUPTI never
     * zeroes on the job's thread. */
    atomic_fetch_add(&s->buffers_released, 1);
    cuptimon__slot_recycle(s, m.slot, s->slot_used[m.slot]);
    pthread_mutex_lock(&s->qlock);
    atomic_fetch_sub(&s->in_flight, 1);
    signal_drained_locked(s);
    pthread_mutex_unlock(&s->qlock);
}

/* The process's thread names (comm), for the daemon's traces to name CPU
 * tracks as Kineto and nsys do: sent as strings keyed by tid before a
 * forced flush (a window's), only those not yet sent in this session or
 * renamed since.  A few hundred small /proc reads on the IO thread, never
 * on the job's threads. */
static void report_thread_names(struct io *io)
{
    if (io->named_session != io->session) {
        io->nnamed = 0;
        io->named_session = io->session;
    }
    DIR *dir = opendir("/proc/self/task");
    struct dirent *de;
    while (dir && (de = readdir(dir)) != NULL) {
        char *end, path[64], comm[32];
        unsigned long tid = strtoul(de->d_name, &end, 10);
        if (*end || tid == 0 || tid > UINT32_MAX)
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%lu/comm", tid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, comm, sizeof comm - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (n <= 0)
            continue;
        while (n > 0 && comm[n - 1] == '\n')
            n--;
        comm[n] = '\0';
        uint32_t h = 2166136261u;
        for (ssize_t i = 0; i < n; i++)
            h = (h ^ (uint8_t)comm[i]) * 16777619u;
        unsigned i = 0;
        while (i < io->nnamed && io->named[i].tid != (uint32_t)tid)
            i++;
        if (i < io->nnamed && io->named[i].hash == h)
            continue;
        if (i == io->nnamed) {
            if (io->nnamed == THREAD_NAMES_MAX)
                continue;
            io->nnamed++;
        }
        io->named[i].tid = (uint32_t)tid;
        io->named[i].hash = h;
        cuptimon__add_string(io->s, CUPTIMON_THREAD_NAME_KEY(tid), comm);
    }
    if (dir)
        closedir(dir);
}

/*
 * The devices' properties, for Kineto's deviceProperties: read once from
 * the driver (cuDeviceGetAttribute, as cudaGetDeviceProperties does for
 * Kineto) and sent through the string table, one string per device
 * (CUPTIMON_DEVICE_KEY), so that they reach every session's strings.bin
 * and thus every trace written of it, however long after.  CUPTI's own
 * device record was not used: its layout changed in 13.2 (Device6), its
 * name is a pointer the shim would have to intern, and it lacks
 * sharedMemPerBlockOptin.  Each device's UUID goes as a string of its own
 * (CUPTIMON_DEVICE_UUID_KEY).  Called on the IO thread once CUDA work has been
 * seen (a buffer with records, or a forced flush), i.e. after cuInit
 * returned; the driver is the one already loaded (RTLD_NOLOAD), else
 * whatever the process has (the test double).  Until the driver answers,
 * it is tried again at the next occasion.  The attribute numbers are the
 * driver ABI's (CUdevice_attribute), which never renumbers.
 */
static void report_devices(struct io *io)
{
    typedef int (*count_fn)(int *);
    typedef int (*attr_fn)(int *, int, int);
    typedef int (*name_fn)(char *, int, int);
    typedef int (*mem_fn)(size_t *, int);
    typedef int (*uuid_fn)(unsigned char *, int);
    enum {
        A_MAX_THREADS_PER_BLOCK = 1,
        A_MAX_SHARED_MEMORY_PER_BLOCK = 8,
        A_WARP_SIZE = 10,
        A_MAX_REGISTERS_PER_BLOCK = 12,
        A_MULTIPROCESSOR_COUNT = 16,
        A_MAX_THREADS_PER_MULTIPROCESSOR = 39,
        A_COMPUTE_CAPABILITY_MAJOR = 75,
        A_COMPUTE_CAPABILITY_MINOR = 76,
        A_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
        A_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
        A_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    };
    static const int attrs[] = {
        A_COMPUTE_CAPABILITY_MAJOR,
        A_COMPUTE_CAPABILITY_MINOR,
        A_MAX_THREADS_PER_BLOCK,
        A_MAX_THREADS_PER_MULTIPROCESSOR,
        A_MAX_REGISTERS_PER_BLOCK,
        A_WARP_SIZE,
        A_MAX_SHARED_MEMORY_PER_BLOCK,
        A_MULTIPROCESSOR_COUNT,
        A_MAX_REGISTERS_PER_MULTIPROCESSOR,
        A_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        A_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
    };
    if (io->devices_reported)
        return;
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    void *from = h ? h : RTLD_DEFAULT;
    count_fn get_count = (count_fn)dlsym(from, "cuDeviceGetCount");
    attr_fn get_attr = (attr_fn)dlsym(from, "cuDeviceGetAttribute");
    name_fn get_name = (name_fn)dlsym(from, "cuDeviceGetName");
    mem_fn get_mem = (mem_fn)dlsym(from, "cuDeviceTotalMem_v2");
    uuid_fn get_uuid = (uuid_fn)dlsym(from, "cuDeviceGetUuid_v2");
    if (!get_uuid)
        get_uuid = (uuid_fn)dlsym(from, "cuDeviceGetUuid");
    int n = 0;
    if (!get_count || !get_attr || !get_name || !get_mem) {
        io->devices_reported = 1; /* no driver to ask: nothing to wait for */
        shim_debug(io->s, "no CUDA driver entry points: no device properties");
    } else if (get_count(&n) == 0) {
        /* CUdevice is the ordinal for every device the driver lists. */
        for (int d = 0; d < n && d < (int)CUPTIMON_DEVICES_MAX; d++) {
            char name[96] = "", text[256];
            size_t mem = 0;
            int v[sizeof attrs / sizeof attrs[0]],
                ok = get_mem(&mem, d) == 0 && get_name(name, sizeof name, d) == 0;
            for (size_t i = 0; ok && i < sizeof attrs / sizeof attrs[0]; i++)
                ok = get_attr(&v[i], attrs[i], d) == 0;
            if (!ok)
                continue;
            name[sizeof name - 1] = '\0';
            snprintf(text, sizeof text, "%d %zu %d %d %d %d %d %d %d %d %d %d %d %s", d, mem, v[0],
                     v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], name);
            cuptimon__add_string(io->s, CUPTIMON_DEVICE_KEY(d), text);
            /* The node's GPU behind this ordinal (CUDA_VISIBLE_DEVICES
             * renumbers): what matches it to the daemon's GPU metrics. */
            unsigned char u[16];
            if (get_uuid && get_uuid(u, d) == 0) {
                cuptimon__uuid_text(text, u);
                cuptimon__add_string(io->s, CUPTIMON_DEVICE_UUID_KEY(d), text);
            }
        }
        io->devices_reported = 1;
        shim_debug(io->s, "device properties of %d device(s) sent", n);
    }
    if (h)
        dlclose(h);
}

static void on_flush(struct io *io, const uint8_t *body, size_t len)
{
    struct shim *s = io->s;
    struct cuptimon_flush f;
    if (cuptimon__flush_decode(body, len, &f) < 0)
        return;
    int forced = f.mode == CUPTIMON_FLUSH_FORCED, fence = f.mode == CUPTIMON_FLUSH_FENCE;
    int new_fence = fence && f.fence != io->fence;
    if (forced || new_fence) {
        /* A window ends (or an operator waits): its trace names the threads
         * and devices as they are now. */
        report_thread_names(io);
        report_devices(io);
    }
    uint64_t before = atomic_load(&s->buffers_completed);
    uint64_t gen = atomic_fetch_add(&s->flush_gen, 1) + 1;
    int do_flush = 1;
    struct shim_held h;
    cuptimon__held_scan(s, &h);
    if (new_fence) {
        /* A new fence: what CUPTI was given before this flush must come back. */
        io->fence = f.fence;
        io->fence_gen = gen;
    } else if (fence && atomic_load(&s->pool_free) < (s->nslots + 3) / 4) {
        /* Each flush closes the buffers CUPTI fills now, and while work
         * launched before the fence runs they are held behind it: the
         * daemon's repeated fence flushes must not take the last quarter of
         * the pool from the job.  The periodic flush still comes. */
        do_flush = 0;
    }
    if (do_flush && !forced && !fence && cuptimon__held_skip(s, &h, mono_ms())) {
        /* The same work as at the last flush still holds every buffer
         * after its own: this flush would close one more buffer behind it,
         * a slot gone for nothing while it runs.  A window's end (a fence)
         * still looks as often as it asks, within its bound. */
        do_flush = 0;
        atomic_fetch_add(&s->flushes_skipped, 1);
    }
    /* cuptiActivityFlushAll delivers the buffers through the completion
     * callback before it returns, so everything it produced is queued
     * when FLUSH_DONE is framed after it.  Only the daemon of an older
     * protocol asks for a forced one. */
    /* NCCL's finished operations so far go with this flush (a window's
     * end holds them). */
    cuptimon__nccl_collect(s, 1, mono_ms());
    uint32_t marked = do_flush && !forced ? cuptimon__mark_complete_held(s, gen) : 0;
    if (do_flush) {
        s->cupti.FlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
        cuptimon__held_flushed(s, &h, mono_ms());
    }
    if (forced)
        cuptimon__check_taken(s, gen);
    else if (marked)
        cuptimon__taken_if_held(s, gen);
    collect(io, UINT32_MAX);
    struct cuptimon_flush_done d = {
        .flush_id = f.flush_id,
        .buffers = atomic_load(&s->buffers_completed) - before,
        .buffers_lost = atomic_load(&s->buffers_lost),
        .requests_declined = atomic_load(&s->requests_declined),
        .foreign_buffers = atomic_load(&s->foreign_buffers),
        .flags =
            (atomic_load(&s->cupti_taken) ? CUPTIMON_SHIM_CUPTI_TAKEN : 0) |
            (fence && cuptimon__cupti_holds(s, io->fence_gen) ? CUPTIMON_SHIM_FENCE_PENDING : 0)};
    uint8_t out[CUPTIMON_FLUSH_DONE_SIZE];
    cuptimon__flush_done_encode(out, &d);
    cuptimon__frame_append(&io->out, CUPTIMON_MSG_FLUSH_DONE, out, sizeof out);
    report_held(io);
}

/* What CUPTI holds now, to a daemon that takes HELD: at each flush, and
 * once a second between them (io_main). */
static void report_held(struct io *io)
{
    struct shim_held h;
    if (!io->held)
        return;
    io->held_ms = mono_ms();
    cuptimon__held_scan(io->s, &h);
    if (io->held_declines) {
        /* CUPTI drops records while its requests are declined, and counts
         * them only when it hands over the buffers it holds: the daemon
         * shows that it drops meanwhile (issue 47). */
        h.msg.flags |= CUPTIMON_HELD_DECLINES;
        h.msg.declined = atomic_load(&io->s->requests_declined);
        h.msg.declining_since_ns = atomic_load(&io->s->declining_since_ns);
    }
    cuptimon__held_frame(io->s, &h, &io->out, io->held_ms);
}

/* A daemon message's JSON body, or NULL when it is not JSON (or out of
 * memory); the caller puts it. */
static json_object *parse_body(const uint8_t *body, size_t len)
{
    json_tokener *tok = json_tokener_new();
    json_object *o = tok ? json_tokener_parse_ex(tok, (const char *)body, (int)len) : NULL;
    if (tok)
        json_tokener_free(tok);
    return o;
}

static void on_enable(struct io *io, const uint8_t *body, size_t len, int on)
{
    json_object *o = parse_body(body, len), *kinds;
    if (o && json_object_object_get_ex(o, "kinds", &kinds) &&
        json_object_is_type(kinds, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(kinds); i++) {
            int64_t k = json_object_get_int64(json_object_array_get_idx(kinds, i));
            if (k > 0 && k < CUPTIMON_ACTIVITY_KIND_LIMIT)
                cuptimon__enable_kind(io->s, (uint32_t)k, on);
        }
    }
    json_object_put(o);
}

/* Whether a refusal says "try again": the daemon was out of descriptors
 * when the hello came (EMFILE), which passes in moments. */
static int refusal_is_transient(const uint8_t *body, size_t len)
{
    json_object *o = parse_body(body, len), *e;
    int transient = o && json_object_object_get_ex(o, "error", &e) &&
                    json_object_is_type(e, json_type_string) &&
                    strcmp(json_object_get_string(e), "EMFILE") == 0;
    json_object_put(o);
    return transient;
}

static void on_error(struct io *io, const uint8_t *body, size_t len)
{
    int transient = refusal_is_transient(body, len);
    if (!io->refused_logged && !transient) {
        cuptimon__log("the daemon refused this process: %.*s", (int)(len > 300 ? 300 : len),
                      (const char *)body);
        io->refused_logged = 1;
    }
    disconnect(io, transient ? "out of descriptors" : "refused");
    if (transient) {
        /* Tried again on a backoff of its own: connecting succeeds each
         * time, which resets the connect backoff. */
        int b = io->busy_backoff_ms ? io->busy_backoff_ms : BACKOFF_MIN_MS;
        io->next_attempt = mono_ms() + b;
        io->busy_backoff_ms = b * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b * 2;
        return;
    }
    atomic_store(&io->s->refused, 1);
    io->backoff_ms = BACKOFF_MAX_MS * 6;
    io->next_attempt = mono_ms() + io->backoff_ms;
}

static void dispatch_input(struct io *io);

static void read_input(struct io *io)
{
    /* Messages that came before the daemon hung up are acted on first: the
     * releases of buffers it archived, and the reason it refused us. */
    const char *gone = NULL;
    for (;;) {
        if (cuptimon__buf_reserve(&io->in, 65536) < 0) {
            disconnect(io, "out of memory");
            return;
        }
        ssize_t n = recv(io->fd, io->in.data + io->in.len, io->in.cap - io->in.len, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            gone = n == 0 ? "daemon closed the connection" : strerror(errno);
            break;
        }
        io->in.len += (size_t)n;
    }
    dispatch_input(io);
    if (gone)
        disconnect(io, gone); /* nothing if a message closed it already */
}

static int ack_says(const uint8_t *body, size_t len, const char *what)
{
    json_object *o = parse_body(body, len), *v;
    int yes = o && json_object_object_get_ex(o, what, &v) &&
              json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
    json_object_put(o);
    return yes;
}

/* A daemon whose max_pool_bytes is less than the pool's cap takes only so
 * many of its buffers at once (its HELLO_ACK's pool_slots): the shim keeps
 * no more out than that (slot_pop), so that what CUPTI holds behind running
 * work never waits on the daemon's socket, and says so once. */
static void on_pool_limit(struct io *io, const uint8_t *body, size_t len)
{
    struct shim *s = io->s;
    json_object *o = parse_body(body, len), *v;
    int64_t n = 0, max = 0;
    if (o && json_object_object_get_ex(o, "pool_slots", &v) &&
        json_object_is_type(v, json_type_int))
        n = json_object_get_int64(v);
    if (o && json_object_object_get_ex(o, "max_pool_bytes", &v) &&
        json_object_is_type(v, json_type_int))
        max = json_object_get_int64(v);
    json_object_put(o);
    uint32_t limit = n >= 2 && n < (int64_t)s->nslots ? (uint32_t)n : s->nslots;
    if (limit != atomic_load(&s->slot_limit) && limit < s->nslots)
        cuptimon__log("the daemon takes at most %.1f MiB of this process's buffers at once "
                      "(its max_pool_bytes): the pool is kept to %u slots of %.1f MiB "
                      "(%.1f MiB) rather than the %.1f MiB of its cap (%s)",
                      (double)max / (1 << 20), limit, (double)s->slot_size / (1 << 20),
                      (double)limit * (double)s->slot_size / (1 << 20),
                      (double)s->nslots * (double)s->slot_size / (1 << 20), s->pool_cap_why);
    atomic_store(&s->slot_limit, limit);
}

static void dispatch_input(struct io *io)
{
    for (;;) {
        struct cuptimon_msg_hdr h;
        int rc = cuptimon__frame_parse(io->in.data, io->in.len, &h);
        if (rc == -EAGAIN)
            return;
        if (rc < 0) {
            cuptimon__log("bad message from the daemon (%s); reconnecting", strerror(-rc));
            disconnect(io, "protocol error");
            return;
        }
        const uint8_t *body = io->in.data + CUPTIMON_MSG_HDR_SIZE;
        switch (h.type) {
        case CUPTIMON_MSG_BUFFER_RELEASE: on_release(io, body, h.length); break;
        case CUPTIMON_MSG_FLUSH: on_flush(io, body, h.length); break;
        case CUPTIMON_MSG_ENABLE:
        case CUPTIMON_MSG_DISABLE:
            on_enable(io, body, h.length, h.type == CUPTIMON_MSG_ENABLE);
            break;
        case CUPTIMON_MSG_HELLO_ACK:
            io->busy_backoff_ms = 0;
            io->ranges = ack_says(body, h.length, "ranges");
            io->layouts = ack_says(body, h.length, "layouts");
            io->held = ack_says(body, h.length, "held");
            io->held_declines = io->held && ack_says(body, h.length, "held_declines");
            on_pool_limit(io, body, h.length);
            io->acked = 1;
            break;
        case CUPTIMON_MSG_CONFIG: break;
        case CUPTIMON_MSG_REPLY_ERROR: on_error(io, body, h.length); return;
        default: shim_debug(io->s, "ignoring daemon message type 0x%04x", h.type); break;
        }
        if (io->fd < 0)
            return;
        cuptimon__buf_consume(&io->in, CUPTIMON_MSG_HDR_SIZE + h.length);
    }
}

/* After the shim took CUPTI back: the slots that were completed to the
 * other client came back to nobody; zero them and return them to the pool. */
static void reclaim_lost(struct shim *s)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->nslots; i++) {
        if (atomic_load(&s->slot_state[i]) != SLOT_CUPTI ||
            atomic_load(&s->slot_gen[i]) != UINT64_MAX)
            continue;
        cuptimon__slot_recycle(s, i, s->slot_size);
        n++;
    }
    if (n)
        shim_debug(s, "%u slot(s) lost to the other CUPTI client are back in the pool", n);
}

static void *io_main(void *arg)
{
    struct io *io = arg;
    struct shim *s = io->s;
    long long hook_checked = mono_ms();
    while (!__atomic_load_n(&io->stop, __ATOMIC_ACQUIRE)) {
        long long now = mono_ms();
        /* Exiting with buffers for a daemon that is there but busy: try
         * again soon, within the exit hand-off's bound. */
        if (io->fd < 0 && atomic_load(&s->exiting) && atomic_load(&s->daemon_busy) &&
            io->next_attempt > now + EXIT_RETRY_MS)
            io->next_attempt = now + EXIT_RETRY_MS;
        if (atomic_exchange(&s->reclaim_lost, 0))
            reclaim_lost(s);
        if (atomic_exchange(&s->not_taken, 0) && atomic_exchange(&s->cupti_taken, 0))
            cuptimon__log("a buffer counted lost to another CUPTI client came back to the shim: "
                          "no other client holds CUPTI; this process is traced");
        /* Objects loaded since the last scan get their CUPTI imports routed
         * to the shim too (a cheap check, once a second). */
        if (now - hook_checked >= 1000) {
            hook_checked = now;
            cuptimon__mux_hook(s, 0);
        }
        if (s->v2)
            cuptimon__v2_tick(s, now);
        /* A daemon that takes no LAYOUTS, once it has given back every
         * buffer: a new hello describes the new layouts. */
        if (io->renew && io->fd >= 0 && !buffers_out(s)) {
            if (!io->renew_logged++)
                cuptimon__log("the daemon is older than this shim and does not take record "
                              "layout changes: reconnecting with a new hello at each change "
                              "(a new session each time)");
            disconnect(io, "record layouts changed");
            io->next_attempt = now;
        }
        if (io->fd < 0)
            io->renew = 0;
        if (io->fd < 0 && now >= io->next_attempt)
            try_connect(io);
        if (io->fd >= 0 && now - io->held_ms >= 1000)
            report_held(io);
        int more = 0;
        /* NCCL's operations: only for a daemon (or at exit), so that they
         * never take the pool from CUPTI while none is there; the queue
         * meanwhile holds 8192 and counts what it cannot. */
        if (io->fd >= 0 || atomic_load(&s->exiting))
            cuptimon__nccl_collect(s, atomic_load(&s->exiting), now);
        if (io->fd >= 0) {
            more = collect(io, COLLECT_BATCH);
            if (flush_out(io) < 0)
                disconnect(io, "send failed");
        }
        struct pollfd p[2] = {{.fd = s->wake_fd, .events = POLLIN},
                              {.fd = io->fd, .events = POLLIN}};
        if (io->fd >= 0 && io->out.len)
            p[1].events |= POLLOUT;
        int timeout = 1000;
        if (io->fd < 0) {
            long long left = io->next_attempt - mono_ms();
            timeout = left < 0 ? 0 : left > 1000 ? 1000 : (int)left;
        }
        /* Wake for the next look at the loaded objects, so that it comes a
         * second after the last one, not up to two. */
        long long to_hook = hook_checked + 1000 - mono_ms();
        if (s->hook && to_hook < timeout)
            timeout = to_hook < 0 ? 0 : (int)to_hook;
        long long to_held = io->held_ms + 1000 - mono_ms();
        if (io->fd >= 0 && io->held && to_held < timeout)
            timeout = to_held < 0 ? 0 : (int)to_held;
        if (s->v2 && cuptimon__v2_tick_in(mono_ms()) < timeout)
            timeout = (int)cuptimon__v2_tick_in(mono_ms()); /* HES flushes */
        if (more && io->fd >= 0)
            timeout = 0;
        int r = poll(p, io->fd >= 0 ? 2 : 1, timeout);
        if (r < 0)
            continue;
        if (p[0].revents & POLLIN) {
            uint64_t v;
            ssize_t rr = read(s->wake_fd, &v, sizeof v);
            (void)rr;
        }
        if (io->fd >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
            read_input(io);
    }
    return NULL;
}

int cuptimon__io_start(struct shim *s)
{
    struct io *io = &io_state;
    io->s = s;
    io->fd = -1;
    io->backoff_ms = BACKOFF_MIN_MS;
    s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->wake_fd < 0)
        return -errno;
    /* The thread takes no signals: they belong to the job. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->io_thread, NULL, io_main, io);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -rc;
    pthread_setname_np(s->io_thread, "cuptimon-io");
    s->io_running = 1;
    return 0;
}

int cuptimon__io_drain(struct shim *s, int timeout_ms)
{
    cuptimon__io_wake(s);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    int rc = 0;
    atomic_store(&s->exiting, 1);
    cuptimon__io_wake(s);
    pthread_mutex_lock(&s->qlock);
    /* Wait while connected, or while a daemon is there but has not taken
     * the connection yet (its queue was full), or until the IO thread's
     * first attempt (a job that exits within milliseconds of cuInit); with
     * no daemon at all, go at once: a node without cuptimond costs a job
     * nothing at exit. */
    for (;;) {
        int pending =
            s->ring_len > 0 || atomic_load(&s->in_flight) > 0 || cuptimon__nccl_pending() > 0;
        int connected = atomic_load(&s->connected);
        if (!pending ||
            (!connected && !atomic_load(&s->daemon_busy) && atomic_load(&s->connect_tried)))
            break;
        struct timespec until = dl;
        if (!connected) {
            /* Not signalled when the state changes: look again shortly. */
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            now.tv_nsec += EXIT_RETRY_MS * 1000000L;
            if (now.tv_nsec >= 1000000000) {
                now.tv_sec++;
                now.tv_nsec -= 1000000000;
            }
            if (now.tv_sec < dl.tv_sec || (now.tv_sec == dl.tv_sec && now.tv_nsec < dl.tv_nsec))
                until = now;
        }
        if (pthread_cond_timedwait(&s->drained, &s->qlock, &until) == ETIMEDOUT &&
            until.tv_sec == dl.tv_sec && until.tv_nsec == dl.tv_nsec) {
            rc = -ETIMEDOUT;
            break;
        }
    }
    if (s->ring_len > 0 || atomic_load(&s->in_flight) > 0)
        rc = rc ? rc : -ENOTCONN;
    pthread_mutex_unlock(&s->qlock);
    return rc;
}

void cuptimon__io_stop(struct shim *s)
{
    struct io *io = &io_state;
    if (!s->io_running)
        return;
    __atomic_store_n(&io->stop, 1, __ATOMIC_RELEASE);
    cuptimon__io_wake(s);
    pthread_join(s->io_thread, NULL);
    s->io_running = 0;
    io->stopped_connected = io->fd >= 0;
    /* Annotation ranges queued since the IO thread's last pass (the ring
     * does not wake it for each entry), after the strings naming them. */
    if (io->fd >= 0) {
        pthread_mutex_lock(&s->qlock);
        frame_strings_locked(io);
        pthread_mutex_unlock(&s->qlock);
        cuptimon__ranges_frame(s, &io->out, io->ranges);
    }
    /* What the socket takes now is handed off too; a frame cut in half
     * would make the BYE after it unreadable, so then there is none. */
    if (io->fd >= 0 && flush_out(io) == 0 && io->out.len == 0) {
        /* The last word carries the totals no later message would: what
         * CUPTI dropped since its last completed buffer, declined requests,
         * lost buffers. */
        size_t late = 0;
        if (s->cupti.GetNumDroppedRecords(NULL, 0, &late) != CUPTI_SUCCESS)
            late = 0;
        /* p99 of the completion callback's time, as the upper edge of its
         * log2 bucket (so at most 2x high), and the longest. */
        uint64_t total = 0, seen = 0, p99 = 0;
        for (int i = 0; i < 40; i++)
            total += atomic_load(&s->completion_hist[i]);
        for (int i = 0; i < 40 && total; i++) {
            seen += atomic_load(&s->completion_hist[i]);
            if (seen * 100 >= total * 99) {
                p99 = (2ull << i) - 1;
                break;
            }
        }
        char body[384];
        int n = snprintf(
            body, sizeof body,
            "{\"dropped_records\":%llu,\"requests_declined\":%llu,"
            "\"buffers_lost\":%llu,\"completions\":%llu,"
            "\"completion_p99_ns_max\":%llu,\"completion_longest_ns\":%llu,"
            "\"exit_running_buffers\":%llu}",
            (unsigned long long)late, (unsigned long long)atomic_load(&s->requests_declined),
            (unsigned long long)atomic_load(&s->buffers_lost), (unsigned long long)total,
            (unsigned long long)p99, (unsigned long long)atomic_load(&s->completion_max_ns),
            (unsigned long long)atomic_load(&s->exit_running_buffers));
        struct cuptimon_buf b = {0};
        if (n > 0 && cuptimon__frame_append(&b, CUPTIMON_MSG_BYE, body, (size_t)n) == 0)
            send(io->fd, b.data, b.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        cuptimon__buf_free(&b);
    }
    if (io->fd >= 0)
        close(io->fd);
    io->fd = -1;
    atomic_store(&s->connected, 0);
}

/* Counts the records of a completed slot without touching anything else
 * (the names no longer matter: the slot is going nowhere). */
static uint64_t count_records(struct shim *s, uint32_t idx, uint64_t valid)
{
    uint8_t *buffer = s->pool + (size_t)idx * s->slot_size;
    CUpti_Activity *rec = NULL;
    uint64_t n = 0;
    while (valid && s->cupti.GetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
        n++;
    return n;
}

void cuptimon__io_exit_loss(struct shim *s, struct shim_loss *l)
{
    struct io *io = &io_state;
    int connected = io->stopped_connected;
    memset(l, 0, sizeof *l);
    pthread_mutex_lock(&s->qlock);
    /* Completed but never framed: queued for a connection that never came. */
    for (uint32_t k = 0; k < s->ring_len; k++) {
        const struct cuptimon_buffer_ready *m = &s->ring[(s->ring_head + k) % s->nslots].msg;
        l->buffers++;
        /* cuptimon's own records (NCCL) carry their count; CUPTI's are walked. */
        l->records += m->stream_id == CUPTIMON_OWN_RECORDS_STREAM && m->context == 0
                          ? m->records
                          : count_records(s, m->slot, m->valid_size);
        l->dropped += m->dropped;
    }
    /* NCCL's records still queued (no daemon took a buffer of them). */
    l->records += cuptimon__nccl_pending();
    /* Framed, but its frame did not reach the socket of a live
     * connection.  One that did is the daemon's: it reads its socket to
     * the end and archives what was announced, after the job is gone. */
    for (uint32_t i = 0; i < s->nslots; i++) {
        if (atomic_load(&s->slot_state[i]) != SLOT_SENT)
            continue;
        if (connected && s->slot_info[i].frame_end <= io->sent_pos)
            continue;
        l->buffers++;
        l->records += s->slot_info[i].records;
        l->dropped += s->slot_info[i].dropped;
    }
    pthread_mutex_unlock(&s->qlock);
    l->buffers += atomic_load(&s->unreported_buffers);
    l->records += atomic_load(&s->unreported_records);
    if (!connected) {
        /* No BYE told a daemon of CUPTI's last drops either. */
        size_t late = 0;
        if (s->cupti.GetNumDroppedRecords(NULL, 0, &late) == CUPTI_SUCCESS)
            l->dropped += late;
    }
    l->err = atomic_load(&s->connect_errno);
    if (atomic_load(&s->refused))
        l->reason = SHIM_LOSS_REFUSED;
    else if (!connected && atomic_load(&s->daemon_busy))
        l->reason = SHIM_LOSS_QUEUE_FULL;
    else if (!connected)
        l->reason = SHIM_LOSS_DISCONNECTED;
    else
        l->reason = SHIM_LOSS_UNSENT;
}
