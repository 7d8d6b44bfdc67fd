/*
 * The shim: CUPTI's side.  It loads the process's libcupti, owns the
 * activity buffers in a sealed memfd pool, and on each completed buffer
 * interns the name strings it points to and queues BUFFER_READY for the IO
 * thread (io.c).  It lives in someone else's process: it never exits, never
 * aborts, never prints to stdout, never blocks a CUDA thread on the daemon,
 * and allocates nothing on the per-buffer path except when a name is new.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cuptimon.h"
#include "shim.h"

struct shim cuptimon__shim = {.pool_fd = -1, .wake_fd = -1};

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static int start_state;            /* 0 never tried, 1 running, -errno failed */
static int forked_child;           /* set in a fork child: the shim is inert there */
static _Atomic int annotations_on; /* a window has external correlation on */
/* CUPTI writes system thread ids (gettid) in API records; else the low 32
 * bits of pthread_self(), which annotation ranges then use too. */
static _Atomic int tid_system;

#define DEFAULT_SLOTS 16u
/* The exit hand-off's bound: how long, at most, a job's exit waits for the
 * daemon to take what is left (doc/libcuptimon.7). */
#define DEFAULT_EXIT_TIMEOUT_MS 1000
#define MAX_EXIT_TIMEOUT_MS     60000
#define DEFAULT_SLOT_SIZE       (4ull << 20)
/* The pool's cap (issue 33; doc/libcuptimon.7): 1 GiB, the most the daemon
 * takes by default (cuptimond.conf max_pool_bytes), and where PyTorch's own
 * CUPTI monitor warns about its unbounded pool; less where the job's memory
 * limit is small: the resident slots and an eighth of its cgroup's limit or
 * of the node's RAM (pool_cap_slots). */
#define DEFAULT_POOL_MAX  (1ull << 30)
#define POOL_MAX_FRACTION 8
#define MAX_POOL_BYTES    (4ull << 30)
/* The daemon takes at most this many slots (daemon/session.c). */
#define MAX_POOL_SLOTS 4096u
#define INTERN_CAP     (1u << 16)

void cuptimon__log(const char *fmt, ...)
{
    /* One line to stderr, prefixed, written with a single write(2) so that
     * it does not interleave with the job's own output mid-line. */
    char line[512];
    int n = snprintf(line, sizeof line, "cuptimon[%d]: ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    n += m;
    if ((size_t)n > sizeof line - 2)
        n = sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
}

/* ---- configuration ------------------------------------------------------ */

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -EINVAL;
    switch (*end) {
    case 'k':
    case 'K':
        v <<= 10;
        end++;
        break;
    case 'm':
    case 'M':
        v <<= 20;
        end++;
        break;
    case 'g':
    case 'G':
        v <<= 30;
        end++;
        break;
    default: break;
    }
    if (*end == 'i' || *end == 'B')
        end++;
    if (*end == 'B')
        end++;
    if (*end)
        return -EINVAL;
    *out = v;
    return 0;
}

static int parse_kinds(struct shim *s, const char *list)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    s->nkinds = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ", ", &save); tok;
         tok = strtok_r(NULL, ", ", &save)) {
        uint32_t kind = 0;
        if (cuptimon__kind_parse(tok, &kind) < 0) {
            cuptimon__log("CUPTIMON_ACTIVITIES: unknown activity kind '%s' (ignored); known: %s",
                          tok, cuptimon__kind_words());
            continue;
        }
        if (s->nkinds < (int)(sizeof s->kinds / sizeof s->kinds[0]))
            s->kinds[s->nkinds++] = kind;
    }
    return s->nkinds > 0 ? 0 : -EINVAL;
}

static void add_socket(struct shim *s, const char *path)
{
    if (s->nsockets >= SHIM_MAX_SOCKETS || strlen(path) >= sizeof s->sockets[0])
        return;
    for (int i = 0; i < s->nsockets; i++)
        if (strcmp(s->sockets[i], path) == 0)
            return;
    snprintf(s->sockets[s->nsockets++], sizeof s->sockets[0], "%s", path);
}

static int read_config(struct shim *s)
{
    const char *v;
    s->debug = (v = getenv("CUPTIMON_DEBUG")) && *v && strcmp(v, "0") != 0;
    s->hook = !((v = getenv("CUPTIMON_HOOK")) && strcmp(v, "0") == 0);
    s->nslots = DEFAULT_SLOTS;
    s->slot_size = DEFAULT_SLOT_SIZE;
    if ((v = getenv("CUPTIMON_POOL_SLOTS")) && *v) {
        uint64_t n;
        if (parse_size(v, &n) < 0 || n < 2 || n > 4096)
            cuptimon__log("CUPTIMON_POOL_SLOTS='%s' is not a number in 2..4096; using %u", v,
                          DEFAULT_SLOTS);
        else
            s->nslots = (uint32_t)n;
    }
    if ((v = getenv("CUPTIMON_SLOT_SIZE")) && *v) {
        uint64_t n;
        if (parse_size(v, &n) < 0 || n < (64u << 10) || n > (256u << 20) || n % 4096)
            cuptimon__log("CUPTIMON_SLOT_SIZE='%s' must be 64K..256M and a multiple of 4096; "
                          "using 4M",
                          v);
        else
            s->slot_size = n;
    }
    s->pool_max = 0; /* the default cap (pool_cap) */
    if ((v = getenv("CUPTIMON_POOL_MAX")) && *v) {
        uint64_t n;
        if (parse_size(v, &n) < 0 || n > MAX_POOL_BYTES)
            cuptimon__log("CUPTIMON_POOL_MAX='%s' is not a size up to 4G (for example 512M); "
                          "using the default cap",
                          v);
        else
            s->pool_max = n ? n : 1; /* 0: no growth (at most the resident slots) */
    }
    s->exit_timeout_ms = DEFAULT_EXIT_TIMEOUT_MS;
    if ((v = getenv("CUPTIMON_EXIT_TIMEOUT_MS")) && *v) {
        char *end;
        errno = 0;
        unsigned long n = strtoul(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-' || n > MAX_EXIT_TIMEOUT_MS)
            cuptimon__log("CUPTIMON_EXIT_TIMEOUT_MS='%s' is not a number of ms in 0..%d; using %d",
                          v, MAX_EXIT_TIMEOUT_MS, DEFAULT_EXIT_TIMEOUT_MS);
        else
            s->exit_timeout_ms = (int)n;
    }
    if (parse_kinds(s, (v = getenv("CUPTIMON_ACTIVITIES")) && *v ? v : "kernel,memcpy,memset") < 0)
        parse_kinds(s, "kernel,memcpy,memset");

    /* Socket candidates, tried in turn on each connection attempt: the
     * explicit one, the user's runtime dir, the system daemon's. */
    if ((v = getenv("CUPTIMON_SOCKET")) && *v) {
        add_socket(s, v);
    } else {
        char dir[256], p[300];
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        if (xdg && xdg[0] == '/') {
            snprintf(p, sizeof p, "%s/cuptimon/%s", xdg, CUPTIMON_PRODUCER_SOCKET_NAME);
            add_socket(s, p);
        }
        if (cuptimon__default_runtime_dir(dir, sizeof dir) == 0) {
            snprintf(p, sizeof p, "%s/%s", dir, CUPTIMON_PRODUCER_SOCKET_NAME);
            add_socket(s, p);
        }
        add_socket(s, CUPTIMON_SYSTEM_RUNTIME_DIR "/" CUPTIMON_PRODUCER_SOCKET_NAME);
    }
    return 0;
}

/* ---- libcupti --------------------------------------------------------- */

static int find_loaded_cupti(struct dl_phdr_info *info, size_t size, void *data)
{
    const char *name = info->dlpi_name;
    if (!name || !*name)
        return 0;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    /* libcupti.so[.N...] or a vendor variant like libcupti-xyz.so; never
     * this library (libcuptimon.so shares the prefix). */
    if (strncmp(base, "libcupti", 8) == 0 && (base[8] == '.' || base[8] == '-') &&
        strstr(base, ".so")) {
        snprintf((char *)data, 512, "%s", name);
        return 1;
    }
    return 0;
}

/* Resolves libcupti as DESIGN says: an override, else the copy already in
 * the process (PyTorch wheels ship their own: a second copy would collide
 * with it), else the soname. */
static int load_cupti(struct shim *s)
{
    struct shim_cupti *c = &s->cupti;
    const char *override = getenv("CUPTIMON_LIBCUPTI_PATH");
    char loaded[512] = "";
    if (override && *override) {
        c->handle = dlopen(override, RTLD_NOW | RTLD_GLOBAL);
        if (!c->handle) {
            cuptimon__log("CUPTIMON_LIBCUPTI_PATH='%s' cannot be loaded: %s; not tracing", override,
                          dlerror());
            return -ENOENT;
        }
        snprintf(c->path, sizeof c->path, "%s", override);
    } else {
        dl_iterate_phdr(find_loaded_cupti, loaded);
        if (loaded[0])
            c->handle = dlopen(loaded, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
        if (c->handle) {
            snprintf(c->path, sizeof c->path, "%s", loaded);
        } else {
            /* By soname first (the loader cache, LD_LIBRARY_PATH), then where
             * the CUDA toolkit keeps it, which is often not in the cache. */
            static const char *const names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
            static const char *const dirs[] = {"targets/x86_64-linux/lib", "lib64",
                                               "extras/CUPTI/lib64", "targets/sbsa-linux/lib"};
            for (size_t i = 0; i < 3 && !c->handle; i++) {
                c->handle = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
                if (c->handle)
                    snprintf(c->path, sizeof c->path, "%s", names[i]);
            }
            const char *roots[2] = {getenv("CUDA_HOME"), "/usr/local/cuda"};
            for (size_t r = 0; r < 2 && !c->handle; r++) {
                if (!roots[r] || roots[r][0] != '/')
                    continue;
                for (size_t i = 0; i < 4 && !c->handle; i++) {
                    for (size_t k = 0; k < 2 && !c->handle; k++) {
                        snprintf(c->path, sizeof c->path, "%s/%s/%s", roots[r], dirs[i], names[k]);
                        c->handle = dlopen(c->path, RTLD_NOW | RTLD_GLOBAL);
                    }
                }
            }
            if (!c->handle) {
                cuptimon__log("libcupti not found (looked for libcupti.so.13 in the loader path, "
                              "$CUDA_HOME and /usr/local/cuda; set CUPTIMON_LIBCUPTI_PATH); "
                              "not tracing");
                return -ENOENT;
            }
        }
    }
#define SYM(field, name)                                                                           \
    do {                                                                                           \
        *(void **)&c->field = dlsym(c->handle, name);                                              \
        if (!c->field) {                                                                           \
            cuptimon__log("%s has no %s; not tracing", c->path, name);                             \
            return -ENOSYS;                                                                        \
        }                                                                                          \
    } while (0)
    SYM(GetVersion, "cuptiGetVersion");
    SYM(GetResultString, "cuptiGetResultString");
    SYM(RegisterCallbacks, "cuptiActivityRegisterCallbacks");
    SYM(Enable, "cuptiActivityEnable");
    SYM(Disable, "cuptiActivityDisable");
    SYM(FlushAll, "cuptiActivityFlushAll");
    SYM(GetNextRecord, "cuptiActivityGetNextRecord");
    SYM(GetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
    SYM(SetAttribute, "cuptiActivitySetAttribute");
    SYM(GetTimestamp, "cuptiGetTimestamp");
    SYM(PushExternalCorrelationId, "cuptiActivityPushExternalCorrelationId");
    SYM(PopExternalCorrelationId, "cuptiActivityPopExternalCorrelationId");
#undef SYM
    *(void **)&c->GetStructSize = dlsym(c->handle, "cuptiActivityGetStructSize");
    *(void **)&c->EnableRuntimeApi = dlsym(c->handle, "cuptiActivityEnableRuntimeApi");
    *(void **)&c->EnableDriverApi = dlsym(c->handle, "cuptiActivityEnableDriverApi");
    *(void **)&c->SetThreadIdType = dlsym(c->handle, "cuptiSetThreadIdType");
    if (c->GetVersion(&c->version) != CUPTI_SUCCESS)
        c->version = 0;
    c->release = cuptimon__cupti_release(c->version);
    return 0;
}

static const char *cupti_err(struct shim *s, CUptiResult rc)
{
    const char *str = NULL;
    if (s->cupti.GetResultString && s->cupti.GetResultString(rc, &str) == CUPTI_SUCCESS && str)
        return str;
    return "unknown CUPTI error";
}

/* ---- the pool ----------------------------------------------------------- */

/* Treiber stacks of free slot indexes.  A head packs a tag with the index
 * so that a pop racing a pop+push of the same slot (ABA) fails its CAS.
 * CUPTI may request buffers from several threads at once; no lock. */
static int stack_pop(struct shim *s, _Atomic uint64_t *top)
{
    uint64_t head = atomic_load_explicit(top, memory_order_acquire);
    for (;;) {
        uint32_t idx1 = (uint32_t)head;
        if (idx1 == 0)
            return -1;
        uint32_t next = atomic_load_explicit(&s->free_next[idx1 - 1], memory_order_relaxed);
        uint64_t nhead = ((head >> 32) + 1) << 32 | next;
        if (atomic_compare_exchange_weak_explicit(top, &head, nhead, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            atomic_fetch_sub_explicit(&s->pool_free, 1, memory_order_relaxed);
            return (int)(idx1 - 1);
        }
    }
}

/* A resident slot when one is free; else one past them, which grows the
 * pool's memory by a slot (CUPTI's writes fault its pages in).  The pool
 * grows for buffers CUPTI holds, not for buffers waiting for the daemon:
 * while as many as the resident slots wait (READY or SENT), each slot it
 * grows by takes a credit, and each slot that comes back returns one
 * (slot_recycle), up to the resident slots' number.  A stopped or stalled
 * daemon so costs the job at most its resident pool's memory again, one
 * slower than the job a slot per buffer it drains; and when a long kernel
 * ends, the buffers it held (handed back all at once) are drained while
 * CUPTI fills new ones (H100: 153 held buffers took 0.45 s to reach the
 * daemon, and growing only after a release dropped the 90,408 records
 * launched meanwhile). */
static int slot_pop(struct shim *s)
{
    /* No more out than the daemon takes at once (its max_pool_bytes). */
    uint32_t limit = atomic_load_explicit(&s->slot_limit, memory_order_relaxed);
    if (limit < s->nslots &&
        s->nslots - atomic_load_explicit(&s->pool_free, memory_order_relaxed) >= limit)
        return -1;
    int idx = stack_pop(s, &s->free_head);
    if (idx >= 0)
        return idx;
    int backlog = atomic_load_explicit(&s->in_flight, memory_order_relaxed) >= s->nbase;
    if (backlog) {
        int32_t c = atomic_load_explicit(&s->grow_credit, memory_order_relaxed);
        do {
            if (c <= 0)
                return -1;
        } while (!atomic_compare_exchange_weak_explicit(
            &s->grow_credit, &c, c - 1, memory_order_relaxed, memory_order_relaxed));
    }
    idx = stack_pop(s, &s->grow_head);
    if (idx < 0) {
        if (backlog)
            atomic_fetch_add_explicit(&s->grow_credit, 1, memory_order_relaxed);
        return -1;
    }
    uint32_t n = atomic_fetch_add_explicit(&s->grown, 1, memory_order_relaxed) + 1;
    uint32_t peak = atomic_load_explicit(&s->grown_peak, memory_order_relaxed);
    while (n > peak && !atomic_compare_exchange_weak_explicit(
                           &s->grown_peak, &peak, n, memory_order_relaxed, memory_order_relaxed))
        ;
    return idx;
}

static void slot_free(struct shim *s, uint32_t idx)
{
    _Atomic uint64_t *top = idx < s->nbase ? &s->free_head : &s->grow_head;
    atomic_store_explicit(&s->slot_state[idx], SLOT_FREE, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(top, memory_order_acquire);
    for (;;) {
        atomic_store_explicit(&s->free_next[idx], (uint32_t)head, memory_order_relaxed);
        uint64_t nhead = ((head >> 32) + 1) << 32 | (idx + 1);
        if (atomic_compare_exchange_weak_explicit(top, &head, nhead, memory_order_acq_rel,
                                                  memory_order_acquire))
            break;
    }
    atomic_fetch_add_explicit(&s->pool_free, 1, memory_order_relaxed);
}

void cuptimon__slot_recycle(struct shim *s, uint32_t idx, uint64_t used)
{
    uint8_t *p = s->pool + (size_t)idx * s->slot_size;
    static _Atomic int punch_failed;
    if (used > s->slot_size)
        used = s->slot_size;
    /* A grown slot's pages go back to the system: a hole reads as zeros,
     * which is the pre-zeroed slot CUPTI expects, and costs nothing until
     * CUPTI writes there again. */
    if (idx >= s->nbase && fallocate(s->pool_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                     (off_t)idx * (off_t)s->slot_size, (off_t)s->slot_size) == 0) {
        atomic_fetch_sub_explicit(&s->grown, 1, memory_order_relaxed);
    } else {
        if (idx >= s->nbase) {
            atomic_fetch_sub_explicit(&s->grown, 1, memory_order_relaxed);
            if (!atomic_exchange(&punch_failed, 1))
                cuptimon__log("cannot give a grown pool slot's memory back (fallocate: %s); "
                              "it is zeroed and kept",
                              strerror(errno));
        }
        memset(p, 0, used);
    }
    s->slot_used[idx] = 0;
    slot_free(s, idx);
    if (atomic_load_explicit(&s->grow_credit, memory_order_relaxed) < (int32_t)s->nbase)
        atomic_fetch_add_explicit(&s->grow_credit, 1, memory_order_relaxed); /* slot_pop */
}

/* The job's memory limit: its cgroup's (v2 memory.max, v1
 * memory.limit_in_bytes, the lowest on the way up to the root), else the
 * node's RAM.  0 when none can be read. */
static uint64_t cgroup_limit_at(const char *dir, const char *file)
{
    char path[640], buf[64];
    uint64_t lim = 0;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    if (strncmp(buf, "max", 3) != 0) {
        char *end;
        unsigned long long v = strtoull(buf, &end, 10);
        /* v1 writes a page-rounded LLONG_MAX for "none" */
        if (end != buf && v < (1ull << 60))
            lim = v;
    }
    return lim;
}

static uint64_t memory_limit(char *why, size_t whylen)
{
    uint64_t best = 0;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0) {
        best = (uint64_t)pages * (uint64_t)psz;
        snprintf(why, whylen, "RAM");
    }
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[600];
    /* Where the cgroup file systems are mounted: CUPTIMON_TEST_CGROUP_ROOT
     * lets a test give the limit in files it controls (tests/integration/
     * pool-limits.sh), where the machine lets it make no memory cgroup. */
    const char *mnt = getenv("CUPTIMON_TEST_CGROUP_ROOT");
    if (!mnt || mnt[0] != '/' || strlen(mnt) > 200)
        mnt = "/sys/fs/cgroup";
    while (f && fgets(line, sizeof line, f)) {
        /* "0::/path" (v2) or "N:a,memory,b:/path" (v1) */
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        char *rel = c2 + 1;
        rel[strcspn(rel, "\n")] = '\0';
        const char *file;
        char root[300];
        if (c1[1] == '\0') {
            snprintf(root, sizeof root, "%s", mnt);
            file = "memory.max";
        } else if (strstr(c1 + 1, "memory")) {
            snprintf(root, sizeof root, "%s/memory", mnt);
            file = "memory.limit_in_bytes";
        } else {
            continue;
        }
        char dir[600];
        if (snprintf(dir, sizeof dir, "%s%s", root, rel) >= (int)sizeof dir)
            continue;
        for (;;) {
            uint64_t lim = cgroup_limit_at(dir, file);
            if (lim && (!best || lim < best)) {
                best = lim;
                snprintf(why, whylen, "the cgroup's memory limit");
            }
            char *slash = strrchr(dir, '/');
            if (!slash || (size_t)(slash - dir) < strlen(root))
                break;
            *slash = '\0';
        }
    }
    if (f)
        fclose(f);
    return best;
}

/* How many slots the pool may have, resident and grown (s->nbase
 * resident): the cap counts the whole pool.  Says in pool_cap_why where
 * the cap came from.  Where the job's memory limit rules, the pool may
 * grow by an eighth of it past its resident slots (issue 47: an eighth of
 * the whole, as before, left a container of 512 MiB or less no growth at
 * all behind the 64 MiB resident pool, and so dropped what a long kernel
 * held); 1 GiB in all at most, as by default. */
static uint32_t pool_cap_slots(struct shim *s)
{
    uint64_t cap = DEFAULT_POOL_MAX, resident = (uint64_t)s->nbase * s->slot_size;
    char src[48] = "";
    size_t w = sizeof s->pool_cap_why;
    if (s->pool_max) {
        cap = s->pool_max == 1 ? 0 : s->pool_max;
        if (cap == 0)
            snprintf(s->pool_cap_why, w, "CUPTIMON_POOL_MAX=0");
        else
            snprintf(s->pool_cap_why, w, "CUPTIMON_POOL_MAX, %.1f MiB", (double)cap / (1 << 20));
    } else {
        uint64_t lim = memory_limit(src, sizeof src);
        if (lim && resident + lim / POOL_MAX_FRACTION < cap) {
            cap = resident + lim / POOL_MAX_FRACTION;
            snprintf(s->pool_cap_why, w, "resident + 1/%d of %s, %llu MiB", POOL_MAX_FRACTION, src,
                     (unsigned long long)(lim >> 20));
        } else {
            snprintf(s->pool_cap_why, w, "the default, 1 GiB");
        }
    }
    uint64_t n = cap / s->slot_size;
    if (n > MAX_POOL_SLOTS) {
        n = MAX_POOL_SLOTS;
        size_t l = strlen(s->pool_cap_why);
        snprintf(s->pool_cap_why + l, w - l, "; %u slots at most", MAX_POOL_SLOTS);
    }
    return n < s->nbase ? s->nbase : (uint32_t)n;
}

static int pool_create(struct shim *s)
{
    s->nbase = s->nslots;
    atomic_store(&s->grow_credit, (int32_t)s->nbase);
    s->nslots = pool_cap_slots(s);
    atomic_store(&s->slot_limit, s->nslots);
    size_t total = (size_t)s->nslots * s->slot_size;
    int fd = (int)syscall(SYS_memfd_create, "cuptimon-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    /* Sparse: a page costs memory only once CUPTI writes it. */
    if (ftruncate(fd, (off_t)total) < 0)
        goto fail;
    /* Sealed against shrinking and growing, so that the daemon's reads
     * never meet a pool of another size; F_SEAL_SEAL so nobody changes
     * that.  Punching holes (a grown slot given back) is still allowed. */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
        goto fail;
    void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED)
        goto fail;
    s->pool = p;
    s->pool_fd = fd;
    s->free_next = calloc(s->nslots, sizeof *s->free_next);
    s->slot_state = calloc(s->nslots, sizeof *s->slot_state);
    s->slot_used = calloc(s->nslots, sizeof *s->slot_used);
    s->slot_gen = calloc(s->nslots, sizeof *s->slot_gen);
    s->slot_req = calloc(s->nslots, sizeof *s->slot_req);
    s->slot_info = calloc(s->nslots, sizeof *s->slot_info);
    s->slot_mark = calloc(s->nslots, 1);
    s->scan = calloc(s->nslots, sizeof *s->scan);
    s->scan_order = calloc(s->nslots, sizeof *s->scan_order);
    s->ring = calloc(s->nslots, sizeof *s->ring);
    s->intern = calloc(INTERN_CAP, sizeof *s->intern);
    s->intern_cap = INTERN_CAP;
    if (!s->free_next || !s->slot_state || !s->slot_used || !s->slot_gen || !s->slot_req ||
        !s->slot_info || !s->slot_mark || !s->scan || !s->scan_order || !s->ring || !s->intern)
        return -ENOMEM;
    for (uint32_t i = s->nslots; i-- > 0;)
        slot_free(s, i);
    return 0;
fail:;
    int rc = -errno;
    close(fd);
    return rc;
}

static int slot_of(struct shim *s, const uint8_t *buf)
{
    if (!s->pool || buf < s->pool)
        return -1;
    uint64_t off = (uint64_t)(buf - s->pool);
    if (off >= (uint64_t)s->nslots * s->slot_size || off % s->slot_size)
        return -1;
    return (int)(off / s->slot_size);
}

/* ---- strings ------------------------------------------------------------ */

static uint32_t hash_ptr(uint64_t p)
{
    p ^= p >> 33;
    p *= 0xff51afd7ed558ccdull;
    p ^= p >> 33;
    return (uint32_t)p;
}

/* Interns one name pointer: the first sighting copies the string into the
 * table that the IO thread sends before the buffer.  Runs on the IO thread
 * (the only user of the intern table); the string table is shared with
 * annotation calls, so appending to it takes qlock. */
static void intern(struct shim *s, const char *name)
{
    if (!name)
        return;
    uint64_t p = (uint64_t)(uintptr_t)name;
    uint32_t mask = s->intern_cap - 1, i = hash_ptr(p) & mask;
    while (s->intern[i]) {
        if (s->intern[i] == p)
            return;
        i = (i + 1) & mask;
    }
    /* Keep the table at most 3/4 full; beyond that, names are still sent
     * (duplicates are harmless to the daemon), just not remembered. */
    if (s->intern_len < s->intern_cap / 4 * 3) {
        s->intern[i] = p;
        s->intern_len++;
    }
    size_t len = strnlen(name, CUPTIMON_STRING_MAX_LEN);
    pthread_mutex_lock(&s->qlock);
    if (s->strings.len == 0)
        cuptimon__strings_begin(&s->strings);
    if (cuptimon__strings_add(&s->strings, p, name, len) == 0)
        s->strings_count++;
    pthread_mutex_unlock(&s->qlock);
}

/* Reads the name pointer at field f of a record of the runtime CUPTI's
 * release, when the record has that release's size for its kind.  A
 * record of another size, or any record under a version the table does
 * not know, is counted and never read: its fields could be anywhere. */
static void intern_record(struct shim *s, const CUpti_Activity *rec, size_t size)
{
    uint32_t kind = (uint32_t)rec->kind;
    const struct cuptimon_rec_layout *l;

    if (kind != CUPTIMON_KIND_KERNEL && kind != CUPTIMON_KIND_CONCURRENT_KERNEL &&
        kind != CUPTIMON_KIND_MARKER)
        return;
    l = s->cupti.release ? s->cupti.release->kinds[kind] : NULL;
    if (l == NULL || size != l->size) {
        atomic_fetch_add_explicit(&s->layout_mismatch, 1, memory_order_relaxed);
        return;
    }
    if (l->type == CUPTIMON_REC_KERNEL) {
        intern(s, (const char *)(uintptr_t)cuptimon__rec_get(l, (const uint8_t *)rec,
                                                             CUPTIMON_FK_name));
    } else if (l->type == CUPTIMON_REC_MARKER) {
        intern(s, (const char *)(uintptr_t)cuptimon__rec_get(l, (const uint8_t *)rec,
                                                             CUPTIMON_FMK_name));
        intern(s, (const char *)(uintptr_t)cuptimon__rec_get(l, (const uint8_t *)rec,
                                                             CUPTIMON_FMK_domain));
    }
}

/* The per-session layout check, measured where the shim already walks
 * every buffer (the IO thread, not CUPTI's callback): CUPTI's own walker
 * steps over a record by its kind's size in the running libcupti, so the
 * distance to the next record is that size, and after the last one the
 * distance to the buffer's valid end (the walk ended there with
 * CUPTI_ERROR_MAX_LIMIT_REACHED, which CUPTI returns only when the next
 * record would start at or past it, and a record it returned lies inside).
 * The first stride of a kind is kept and sent to the daemon, which walks
 * and decodes by it (archive/decode.c cuptimon__layout_measured); it
 * replaces a cuptiActivityGetStructSize answer that disagrees (the buffer
 * is what is walked).  A second, different stride cannot come from one
 * libcupti: it is counted, never used.  A load and a compare per record. */
static void announce_size(struct shim *s, uint32_t kind)
{
    /* Through the string table (cuptimon-proto.h, CUPTIMON_RECORD_SIZE_KEY):
     * framed before the BUFFER_READY of the buffer being walked, sent again
     * to every later connection, and needing no answer from the daemon, so
     * a job's last buffers go at exit as before. */
    char v[32];
    snprintf(v, sizeof v, "%u %s", s->rec_size[kind],
             s->rec_size_by[kind] == SHIM_SIZE_BY_STRIDE ? "stride" : "struct_size");
    cuptimon__add_string(s, CUPTIMON_RECORD_SIZE_KEY(kind), v);
}

static void note_stride(struct shim *s, uint32_t kind, size_t size)
{
    if (kind >= CUPTIMON_LAYOUT_KINDS || size == 0 || size > UINT16_MAX)
        return;
    if (s->rec_size_by[kind] == SHIM_SIZE_BY_STRIDE) {
        if (s->rec_size[kind] != size && s->stride_conflicts++ == 0)
            cuptimon__log("kind %u's records are %u bytes apart in one buffer and %zu in "
                          "another; the first is kept (the daemon stops its walks where they "
                          "disagree)",
                          kind, s->rec_size[kind], size);
        return;
    }
    if (s->rec_size_by[kind] == SHIM_SIZE_BY_STRUCT_SIZE && s->rec_size[kind] != size)
        cuptimon__log("cuptiActivityGetStructSize gave %u bytes for kind %u, but CUPTI's walk "
                      "steps %zu; the walk's size is used",
                      s->rec_size[kind], kind, size);
    int changed = s->rec_size[kind] != size;
    s->rec_size[kind] = (uint16_t)size;
    s->rec_size_by[kind] = SHIM_SIZE_BY_STRIDE;
    if (changed)
        announce_size(s, kind);
}

void cuptimon__measure_struct_sizes(struct shim *s)
{
    /* Once, on the IO thread, for every kind the shim may enable (its
     * release's, and the configured ones). */
    if (s->struct_sizes_asked || s->cupti.GetStructSize == NULL || s->cupti.version < 130200)
        return;
    s->struct_sizes_asked = 1;
    for (uint32_t k = 1; k < CUPTIMON_LAYOUT_KINDS && k < CUPTIMON_ACTIVITY_KIND_LIMIT; k++) {
        int wanted = s->cupti.release != NULL && s->cupti.release->kinds[k] != NULL;
        size_t size = 0;
        for (int i = 0; i < s->nkinds && !wanted; i++)
            wanted = s->kinds[i] == k;
        if (!wanted || s->rec_size_by[k] != SHIM_SIZE_BY_NONE ||
            s->cupti.GetStructSize((CUpti_ActivityKind)k, 0, &size) != CUPTI_SUCCESS || size == 0 ||
            size > UINT16_MAX)
            continue;
        s->rec_size[k] = (uint16_t)size;
        s->rec_size_by[k] = SHIM_SIZE_BY_STRUCT_SIZE;
        announce_size(s, k);
    }
}

uint64_t cuptimon__walk_slot(struct shim *s, uint32_t idx, uint64_t valid)
{
    /* One pass over the records: count them, measure their sizes (above)
     * and intern the names they point to (kernel and marker names live in
     * this process's memory).  A record's size is the distance to the next
     * one; a name is read only from a record whose size is that of its
     * kind's struct in the runtime CUPTI's release, so an unknown layout is
     * counted, never misread. */
    uint8_t *buffer = s->pool + (size_t)idx * s->slot_size;
    uint64_t n = 0;
    CUpti_Activity *rec = NULL, *prev = NULL;
    CUptiResult rc = CUPTI_ERROR_MAX_LIMIT_REACHED;
    while (valid && (rc = s->cupti.GetNextRecord(buffer, valid, &rec)) == CUPTI_SUCCESS) {
        if (prev) {
            size_t size = (size_t)((uint8_t *)rec - (uint8_t *)prev);
            note_stride(s, (uint32_t)prev->kind, size);
            intern_record(s, prev, size);
        }
        n++;
        prev = rec;
    }
    if (prev) {
        size_t size = (size_t)(buffer + valid - (uint8_t *)prev);
        if (rc == CUPTI_ERROR_MAX_LIMIT_REACHED)
            note_stride(s, (uint32_t)prev->kind, size);
        intern_record(s, prev, size);
    }
    atomic_fetch_add_explicit(&s->records_walked, n, memory_order_relaxed);
    return n;
}

void CUPTIAPI cuptimon__buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    struct shim *s = &cuptimon__shim;
    int idx = forked_child ? -1 : slot_pop(s);
    *max_records = 0;
    if (idx < 0) {
        /* Declining makes CUPTI drop the records and count them; the job
         * is never made to wait for the daemon. */
        atomic_fetch_add_explicit(&s->requests_declined, 1, memory_order_relaxed);
        if (atomic_load_explicit(&s->declining_since_ns, memory_order_relaxed) == 0) {
            struct timespec ts;
            uint64_t none = 0;
            clock_gettime(CLOCK_REALTIME, &ts);
            atomic_compare_exchange_strong_explicit(&s->declining_since_ns, &none,
                                                    (uint64_t)ts.tv_sec * 1000000000u +
                                                        (uint64_t)ts.tv_nsec,
                                                    memory_order_relaxed, memory_order_relaxed);
        }
        *buffer = NULL;
        *size = 0;
        return;
    }
    if (atomic_load_explicit(&s->declining_since_ns, memory_order_relaxed) != 0)
        atomic_store_explicit(&s->declining_since_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&s->slot_state[idx], SLOT_CUPTI, memory_order_relaxed);
    atomic_store_explicit(&s->slot_gen[idx], atomic_load(&s->flush_gen), memory_order_relaxed);
    /* CUPTI fills its buffers in the order it asks for them (held.c). */
    atomic_store_explicit(&s->slot_req[idx],
                          atomic_fetch_add_explicit(&s->req_next, 1, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    *buffer = s->pool + (size_t)idx * s->slot_size;
    *size = s->slot_size;
}

/* Queues a completed slot for the IO thread (its BUFFER_READY, in order). */
static void queue_slot(struct shim *s, uint32_t idx, uint64_t valid, uint32_t stream_id,
                       uint64_t context, uint64_t dropped, uint64_t ts, uint64_t realtime,
                       uint64_t records)
{
    pthread_mutex_lock(&s->qlock);
    s->slot_used[idx] = valid;
    uint32_t pos = (s->ring_head + s->ring_len) % s->nslots;
    struct cuptimon_buffer_ready *m = &s->ring[pos].msg;
    m->slot = idx;
    m->stream_id = stream_id;
    m->valid_size = valid;
    m->context = context;
    m->dropped = dropped;
    m->cupti_ts = ts;
    m->realtime_ns = realtime;
    m->seq = s->next_seq++;
    m->records = records;
    s->ring_len++;
    atomic_store_explicit(&s->slot_state[idx], SLOT_READY, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->in_flight, 1, memory_order_relaxed);
    pthread_mutex_unlock(&s->qlock);
}

int cuptimon__slot_take(struct shim *s)
{
    if (s->pool == NULL)
        return -1;
    return slot_pop(s);
}

/* A slot of cuptimon's own records (nccl.c): their times are
 * CLOCK_REALTIME, so the buffer's clock pair is (now, now). */
void cuptimon__slot_queue_own(struct shim *s, uint32_t idx, uint64_t valid, uint64_t records,
                              uint64_t dropped, uint64_t now_ns)
{
    queue_slot(s, idx, valid, CUPTIMON_OWN_RECORDS_STREAM, 0, dropped, now_ns, now_ns, records);
    cuptimon__io_wake(s);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    struct shim *s = &cuptimon__shim;
    struct timespec t_in;
    clock_gettime(CLOCK_MONOTONIC, &t_in);
    int idx = slot_of(s, buffer);
    if (idx < 0 || atomic_load_explicit(&s->slot_state[idx], memory_order_relaxed) != SLOT_CUPTI) {
        /* Not a buffer we handed out (another tool's, completed to us after
         * the shim took CUPTI back): never touch or free it; its owner gets
         * it where its callback is known. */
        atomic_fetch_add_explicit(&s->foreign_buffers, 1, memory_order_relaxed);
        cuptimon__mux_foreign(ctx, stream_id, buffer, size, valid);
        return;
    }
    if (valid > s->slot_size)
        valid = s->slot_size;
    if (atomic_load_explicit(&s->slot_gen[idx], memory_order_relaxed) == UINT64_MAX) {
        /* Counted lost to another client, yet completed to the shim: its
         * callbacks are CUPTI's after all (cuptimon__taken_if_held took a
         * held buffer for one completed elsewhere).  Undone. */
        atomic_fetch_sub_explicit(&s->buffers_lost, 1, memory_order_relaxed);
        atomic_store_explicit(&s->slot_gen[idx], 0, memory_order_relaxed);
        atomic_store_explicit(&s->not_taken, 1, memory_order_relaxed);
    }
    size_t dropped = 0;
    if (s->cupti.GetNumDroppedRecords(ctx, stream_id, &dropped) != CUPTI_SUCCESS)
        dropped = 0;
    uint64_t ts = 0;
    s->cupti.GetTimestamp(&ts);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);

    /* The records are walked (counted, names interned) by the IO thread
     * before it hands the buffer on: this callback runs on CUPTI's thread
     * under CUPTI's lock, and a walk of a 4 MiB buffer takes about a
     * millisecond.  Here: a few stores and a wake-up. */
    CUpti_Activity *rec = NULL, *prev = NULL;
    queue_slot(s, (uint32_t)idx, valid, stream_id, (uint64_t)(uintptr_t)ctx, dropped, ts,
               (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec, 0);

    /* Another tool shares CUPTI through us (preloaded): it gets copies of
     * the records of its kinds, outside our lock, before the slot can be
     * released and reused. */
    struct cuptimon_tool_clock clk;
    int have_clock = 0;
    int tool_on = 0;
    for (uint32_t k = 1; k < 64 && !tool_on; k++)
        tool_on = cuptimon__mux_tool_wants(k);
    if (tool_on) {
        uint64_t gen = atomic_load_explicit(&s->slot_gen[idx], memory_order_relaxed);
        have_clock = cuptimon__mux_clock(&clk);
        rec = prev = NULL;
        while (valid && s->cupti.GetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
            if (prev && cuptimon__mux_tool_wants(prev->kind))
                cuptimon__mux_deliver(prev, (size_t)((uint8_t *)rec - (uint8_t *)prev), gen,
                                      have_clock ? &clk : NULL);
            prev = rec;
        }
        if (prev && cuptimon__mux_tool_wants(prev->kind))
            cuptimon__mux_deliver(prev, (size_t)(buffer + valid - (uint8_t *)prev), gen,
                                  have_clock ? &clk : NULL);
    }
    atomic_fetch_add_explicit(&s->dropped_records, dropped, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->buffers_completed, 1, memory_order_relaxed);
    (void)size;
    cuptimon__io_wake(s);
    struct timespec t_out;
    clock_gettime(CLOCK_MONOTONIC, &t_out);
    uint64_t ns = (uint64_t)(t_out.tv_sec - t_in.tv_sec) * 1000000000ull +
                  (uint64_t)(t_out.tv_nsec - t_in.tv_nsec);
    unsigned b = ns ? 63u - (unsigned)__builtin_clzll(ns) : 0;
    atomic_fetch_add_explicit(&s->completion_hist[b < 40 ? b : 39], 1, memory_order_relaxed);
    uint64_t mx = atomic_load_explicit(&s->completion_max_ns, memory_order_relaxed);
    while (ns > mx && !atomic_compare_exchange_weak(&s->completion_max_ns, &mx, ns))
        ;
}

/* The runtime and driver calls PyTorch's monitor leaves out of windows:
 * frequent, and nothing to see in a trace. */
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

int cuptimon__enable_kind(struct shim *s, uint32_t kind, int on)
{
    /* A kind whose struct in this CUPTI release cuptimon does not know
     * would be archived but could not be stepped over when decoding: the
     * walk stops at its first record and loses the rest of the buffer.  So
     * it is not enabled at all.  (Under a version the table does not know
     * at all, nothing decodes now; the raw buffers are kept for a newer
     * cuptimonctl, so kinds are enabled as asked.) */
    if (on && !s->v2 && s->cupti.release != NULL &&
        (kind >= CUPTIMON_LAYOUT_KINDS || s->cupti.release->kinds[kind] == NULL)) {
        cuptimon__log("activity kind %u is not enabled: its record layout in CUPTI %u "
                      "(CUDA %s) is not one this build knows",
                      kind, s->cupti.version, s->cupti.release->cuda);
        return -ENOTSUP;
    }
    cuptimon__mux_note_ours(kind, on);
    if (kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)
        atomic_store(&annotations_on, on);
    /* A kind another tool still wants stays on in CUPTI. */
    if (!on && cuptimon__mux_needed(kind))
        return 0;
    CUptiResult rc =
        on ? s->cupti.Enable((CUpti_ActivityKind)kind) : s->cupti.Disable((CUpti_ActivityKind)kind);
    if (rc != CUPTI_SUCCESS) {
        cuptimon__log("cuptiActivity%s(%u) failed: %s", on ? "Enable" : "Disable", kind,
                      cupti_err(s, rc));
        return -EINVAL;
    }
    if (on && kind == CUPTI_ACTIVITY_KIND_RUNTIME && s->cupti.EnableRuntimeApi)
        for (size_t i = 0; i < sizeof noisy_runtime / sizeof noisy_runtime[0]; i++)
            s->cupti.EnableRuntimeApi(noisy_runtime[i], 0);
    if (on && kind == CUPTI_ACTIVITY_KIND_DRIVER && s->cupti.EnableDriverApi)
        for (size_t i = 0; i < sizeof noisy_driver / sizeof noisy_driver[0]; i++)
            s->cupti.EnableDriverApi(noisy_driver[i], 0);
    return 0;
}

static void cupti_attributes(struct shim *s)
{
    uint8_t one = 1;
    size_t sz = sizeof one;
    /* Pre-zeroed slots: CUPTI then never zeroes a buffer on the job's thread. */
    if (s->cupti.SetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &one) !=
        CUPTI_SUCCESS)
        shim_debug(s, "CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER not supported");
    /* System thread ids (gettid) in API records, as Kineto sets them: the
     * tids then match the process's threads (/proc, py-spy, nsys) and
     * torch.profiler's, and do not change when torch.profiler starts
     * (it sets the same).  CUPTI's default is pthread_self(). */
    if (s->cupti.SetThreadIdType &&
        s->cupti.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) == CUPTI_SUCCESS)
        atomic_store(&tid_system, 1);
    else
        shim_debug(s, "cuptiSetThreadIdType(SYSTEM) not supported; thread ids are pthread_self()");
}

/* A forced flush returns every buffer CUPTI holds.  A slot CUPTI got
 * before it (generation below gen) and still holds after it was completed
 * to someone else: another client replaced the shim's callbacks (a tool
 * that reaches libcupti without going through mux.c).  Those slots are
 * counted as lost, and status says CUPTI was taken.  Returns 1 if so. */
int cuptimon__check_taken(struct shim *s, uint64_t gen)
{
    uint32_t lost = 0;
    /* A subscriber's callbacks are its own (v2.c): nobody can take them. */
    if (s->v2)
        return 0;
    for (uint32_t i = 0; i < s->nslots; i++) {
        uint64_t g = atomic_load(&s->slot_gen[i]);
        /* Claimed with a compare-and-swap: counted once, however many
         * threads check at the same time.  UINT64_MAX marks it lost. */
        if (atomic_load(&s->slot_state[i]) == SLOT_CUPTI && g < gen &&
            atomic_compare_exchange_strong(&s->slot_gen[i], &g, UINT64_MAX))
            lost++;
    }
    if (!lost)
        return atomic_load(&s->cupti_taken);
    atomic_fetch_add(&s->buffers_lost, lost);
    if (!atomic_exchange(&s->cupti_taken, 1))
        cuptimon__log("another CUPTI client took the activity callbacks (%u buffer(s) were "
                      "completed to it); this process is not traced until it lets go. Preload "
                      "the shim (LD_PRELOAD) to share CUPTI with any tool.",
                      lost);
    /* The client may live in an object loaded since the last scan: route
     * its calls to mux.c, so that its stop is seen. */
    cuptimon__mux_hook(s, 1);
    return 1;
}

/* The slots CUPTI was given before generation gen and still holds: after a
 * plain flush, the buffers that hold a record of work still running, or
 * that are held behind one (CUPTI completes records in launch order and
 * returns closed buffers in fill order; docs/gpu-runs/20261204-h200-probe).
 * Zero means every record written before gen has been handed over. */
uint32_t cuptimon__cupti_holds(struct shim *s, uint64_t gen)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->nslots; i++) {
        uint64_t g = atomic_load(&s->slot_gen[i]);
        n += atomic_load(&s->slot_state[i]) == SLOT_CUPTI && g < gen && g != UINT64_MAX;
    }
    return n;
}

/* 1 when slot i holds at least one record and every record in it is
 * complete; 0 when not; -1 when it cannot tell (a kind whose size this
 * build does not know).  The slot is CUPTI's: its bytes are read as they
 * are, a record at a time (records are 8-aligned, so each kind is one
 * aligned load); the slot was zeroed before CUPTI got it, so kind 0 ends. */
/* CUPTI writes the slot meanwhile (it is CUPTI's until completed): the
 * read races with it on purpose, a kind at a time; ThreadSanitizer is told
 * so.  A stale kind can only make a slot look complete a flush early, which
 * cuptimon__taken_if_held's undo covers. */
__attribute__((no_sanitize("thread"))) static int slot_all_complete(const struct shim *s,
                                                                    uint32_t i)
{
    const uint8_t *b = s->pool + (size_t)i * s->slot_size;
    size_t off = 0, n = 0;
    if (!s->cupti.release)
        return -1;
    while (off + sizeof(uint32_t) <= s->slot_size) {
        uint32_t kind =
            __atomic_load_n((const uint32_t *)(const void *)(b + off), __ATOMIC_RELAXED);
        if (kind == 0)
            break;
        if (kind & KIND_INCOMPLETE)
            return 0;
        uint32_t size = cuptimon__record_size(s, kind);
        if (size == 0)
            return -1;
        off += size;
        n++;
    }
    return n > 0;
}

uint32_t cuptimon__record_size(const struct shim *s, uint32_t kind)
{
    const struct cuptimon_cupti_release *r = s->cupti.release;
    if (kind >= CUPTIMON_LAYOUT_KINDS || s->v2)
        return 0;
    /* What CUPTI's own walk stepped (the per-session check) wins over the
     * table; a kind not measured yet has the release's size. */
    if (s->rec_size[kind])
        return s->rec_size[kind];
    return r && r->kinds[kind] ? r->kinds[kind]->size : 0;
}

/* Before a plain flush of generation gen: marks the slots CUPTI got before
 * it whose records are all complete.  CUPTI hands such a buffer over at the
 * next flush (a plain flush closes it, and the first buffer it holds back
 * must hold a record not complete yet), so one still held after the flush
 * went to another client (cuptimon__taken_if_held).  Returns how many. */
uint32_t cuptimon__mark_complete_held(struct shim *s, uint64_t gen)
{
    uint32_t n = 0;
    if (atomic_load(&s->cupti_taken))
        return 0;
    for (uint32_t i = 0; i < s->nslots; i++) {
        uint64_t g = atomic_load(&s->slot_gen[i]);
        s->slot_mark[i] = atomic_load(&s->slot_state[i]) == SLOT_CUPTI && g < gen &&
                          g != UINT64_MAX && slot_all_complete(s, i) == 1;
        n += s->slot_mark[i];
    }
    return n;
}

/* After that flush: a marked slot CUPTI still holds was completed to
 * another client, which took the activity callbacks (a tool that reached
 * libcupti around mux.c).  Found so without a forced flush, which would
 * lose the records of running work. */
int cuptimon__taken_if_held(struct shim *s, uint64_t gen)
{
    for (uint32_t i = 0; i < s->nslots; i++)
        if (s->slot_mark[i] && atomic_load(&s->slot_state[i]) == SLOT_CUPTI &&
            atomic_load(&s->slot_gen[i]) < gen)
            return cuptimon__check_taken(s, gen);
    return atomic_load(&s->cupti_taken);
}

/* A forced flush of its own, then the check above. */
int cuptimon__probe_taken(struct shim *s)
{
    uint64_t gen = atomic_fetch_add(&s->flush_gen, 1) + 1;
    s->cupti.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    return cuptimon__check_taken(s, gen);
}

void cuptimon__retake(struct shim *s, const char *why)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    if (!atomic_load(&s->cupti_taken) || atomic_load(&s->stopping)) {
        pthread_mutex_unlock(&lock);
        return;
    }
    /* What CUPTI holds now was given out by the other client's request
     * callback: a forced flush completes it to that client before the
     * shim's callbacks replace its own. */
    s->cupti.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    cupti_attributes(s);
    CUptiResult cr = s->cupti.RegisterCallbacks(cuptimon__buffer_requested, buffer_completed);
    if (cr != CUPTI_SUCCESS) {
        cuptimon__log("cannot take CUPTI back (%s): cuptiActivityRegisterCallbacks: %s", why,
                      cupti_err(s, cr));
        pthread_mutex_unlock(&lock);
        return;
    }
    cuptimon__mux_forget_kinds();
    for (uint32_t k = 1; k < 64; k++)
        if (cuptimon__mux_ours(k))
            cuptimon__enable_kind(s, k, 1);
    atomic_store(&s->cupti_taken, 0);
    atomic_fetch_add(&s->retakes, 1);
    /* The slots completed to the other client are with nobody now. */
    atomic_store(&s->reclaim_lost, 1);
    pthread_mutex_unlock(&lock);
    cuptimon__io_wake(s);
    cuptimon__log("took CUPTI back (%s); this process is traced again", why);
}

/* ---- start and stop ----------------------------------------------------- */

static void at_exit(void)
{
    cuptimon_shutdown(cuptimon__shim.exit_timeout_ms);
}

static void in_child(void)
{
    /* The IO thread does not exist in a fork child, and CUDA cannot be used
     * there either: the shim goes inert (the pool is the parent's). */
    forked_child = 1;
}

/* NVTX ranges reach CUPTI only through NVTX's injection hook, which NVTX
 * reads from NVTX_INJECTION64_PATH at a process's first NVTX call.  When
 * nothing set it (a tool such as nsys sets its own: that one is never
 * replaced) and CUPTIMON_NVTX is not 0, it is pointed at the libcupti in
 * use, by the file that holds it, so that NVTX loads that very copy.  The
 * ranges are recorded only while the marker kinds are on (in windows). */
static void arrange_nvtx(struct shim *s)
{
    const char *v = getenv("CUPTIMON_NVTX");
    Dl_info info;
    void *entry;
    if (getenv("NVTX_INJECTION64_PATH")) {
        shim_debug(s, "NVTX_INJECTION64_PATH is set already; left as it is");
        return;
    }
    if (v && strcmp(v, "0") == 0)
        return;
    entry = dlsym(s->cupti.handle, "InitializeInjectionNvtx2");
    if (!entry || !dladdr(entry, &info) || !info.dli_fname || info.dli_fname[0] != '/') {
        shim_debug(s, "%s has no NVTX injection entry point; NVTX ranges are not recorded",
                   s->cupti.path);
        return;
    }
    /* This runs at load (preloaded) or at cuInit (injected), before a
     * job's first NVTX call in all but odd cases; a job that called NVTX
     * earlier keeps NVTX off, nothing worse. */
    if (setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0) == 0)
        shim_debug(s, "NVTX_INJECTION64_PATH=%s", info.dli_fname);
}

static int start(void)
{
    struct shim *s = &cuptimon__shim;
    int rc;
    read_config(s);
    if ((rc = load_cupti(s)) < 0)
        return rc;
    arrange_nvtx(s);
    pthread_mutex_init(&s->qlock, NULL);
    pthread_cond_init(&s->drained, NULL);
    if ((rc = pool_create(s)) < 0) {
        cuptimon__log("cannot create the %u x %llu-byte buffer pool: %s; not tracing", s->nslots,
                      (unsigned long long)s->slot_size, strerror(-rc));
        return rc;
    }
    cuptimon__ranges_init();
    /* NCCL's profiler plugin is this library, unless the job named one
     * (nccl.c); NCCL reads the variable at its first communicator's init,
     * after CUDA's (which started the shim). */
    Dl_info self;
    if (dladdr((void *)start, &self) && self.dli_fname)
        cuptimon__nccl_setup(self.dli_fname);
    /* CUPTI 13.3+: its own subscriber beside any other (v2.c); else, or
     * when that is not possible, the global activity API. */
    if (cuptimon__v2_start(s) == 0) {
        atomic_store(&tid_system, s->v2_tid_system);
    } else {
        cupti_attributes(s);
        CUptiResult cr = s->cupti.RegisterCallbacks(cuptimon__buffer_requested, buffer_completed);
        if (cr != CUPTI_SUCCESS) {
            cuptimon__log("cuptiActivityRegisterCallbacks failed: %s; not tracing",
                          cupti_err(s, cr));
            return -EBUSY;
        }
        if (getenv("CUPTIMON_KERNEL_LATENCY") || getenv("CUPTIMON_HW_TRACE"))
            cuptimon__log("CUPTIMON_KERNEL_LATENCY and CUPTIMON_HW_TRACE apply on CUPTI's v2 "
                          "path only (CUPTI 13.3 and later); ignored");
    }
    for (int i = 0; i < s->nkinds; i++)
        cuptimon__enable_kind(s, s->kinds[i], 1);
    if ((rc = cuptimon__io_start(s)) < 0) {
        cuptimon__log("cannot start the IO thread: %s; not tracing", strerror(-rc));
        for (int i = 0; i < s->nkinds; i++)
            cuptimon__enable_kind(s, s->kinds[i], 0);
        return rc;
    }
    pthread_atfork(NULL, NULL, in_child);
    atexit(at_exit);
    /* Other libraries' CUPTI activity calls now come to mux.c, injected as
     * well as preloaded, so that a tool started later shares CUPTI. */
    cuptimon__mux_hook(s, 1);
    /* On the v2 path the records describe themselves (their layouts). */
    if (s->cupti.release == NULL && !s->v2)
        cuptimon__log("CUPTI API version %u (%s) is not one this build knows (it knows %s): "
                      "buffers are still handed to the daemon and archived, but kernel and "
                      "marker names are not kept and the records are not decoded; a newer "
                      "cuptimon knows more releases",
                      s->cupti.version, s->cupti.path, cuptimon__cupti_supported());
    shim_debug(s, "tracing with %s (CUPTI %u, CUDA %s layouts), pool %u x %llu bytes",
               s->cupti.path, s->cupti.version,
               s->cupti.release ? s->cupti.release->cuda : "unknown", s->nslots,
               (unsigned long long)s->slot_size);
    return 0;
}

CUPTIMON_API int cuptimon_init(void)
{
    if (forked_child)
        return -ECHILD;
    pthread_mutex_lock(&start_lock);
    if (start_state == 0) {
        int rc = start();
        start_state = rc < 0 ? rc : 1;
    }
    int st = start_state;
    pthread_mutex_unlock(&start_lock);
    return st == 1 ? 0 : st;
}

/* Called by the CUDA driver at cuInit when CUDA_INJECTION64_PATH names us.
 * The return value is ignored by the driver; 1 means "initialized". */
CUPTIMON_API int InitializeInjection(void);
CUPTIMON_API int InitializeInjection(void)
{
    cuptimon_init();
    return 1;
}

/* Plain flushes, a few milliseconds apart, until CUPTI has given back every
 * buffer it held at the call (the work launched before it has ended and its
 * records are complete: CUPTI hands a record over only then,
 * docs/gpu-runs/20261204-h200-probe), for at most budget_ms.  Returns how
 * many it still holds (0: all back; also when another client holds them,
 * since nothing would come back). */
static uint32_t wait_cupti(struct shim *s, int budget_ms)
{
    uint64_t gen = atomic_fetch_add(&s->flush_gen, 1) + 1;
    struct timespec t0, now;
    long pause_us = 500;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (atomic_load(&s->cupti_taken))
            return 0;
        s->cupti.FlushAll(0);
        uint32_t held = cuptimon__cupti_holds(s, gen);
        if (held == 0)
            return 0;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 >= budget_ms)
            return held;
        struct timespec p = {0, pause_us * 1000};
        nanosleep(&p, NULL);
        pause_us = pause_us * 2 > 20000 ? 20000 : pause_us * 2;
    }
}

/* At the end of tracing: wait for the work launched so far, within
 * budget_ms; only then a forced flush, for the buffers of work that still
 * runs: CUPTI hands those records over with no times and never completes
 * them.  A forced flush at once would lose every kernel, copy or memset
 * still running when tracing ends. */
static void drain_cupti(struct shim *s, int budget_ms)
{
    uint32_t held = wait_cupti(s, budget_ms);
    if (held) {
        atomic_fetch_add(&s->exit_running_buffers, held);
        cuptimon__log("%u CUPTI buffer(s) still held work that ran %d ms after tracing "
                      "ended; their records are handed over without times",
                      held, budget_ms);
    }
    s->cupti.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

CUPTIMON_API void cuptimon_shutdown(int timeout_ms)
{
    struct shim *s = &cuptimon__shim;
    if (forked_child)
        return;
    pthread_mutex_lock(&start_lock);
    int running = start_state == 1;
    pthread_mutex_unlock(&start_lock);
    if (!running || atomic_exchange(&s->stopping, 1))
        return;
    /* Hand off everything CUPTI holds, then give the IO thread a bounded
     * time to pass it to the daemon and see it written; NCCL's operations
     * still in flight go with it, flagged unfinished. */
    drain_cupti(s, timeout_ms / 2);
    cuptimon__nccl_exit();
    cuptimon__io_drain(s, timeout_ms);
    cuptimon__io_stop(s);
    /* What did not reach a daemon within the bound is still counted: on
     * stderr, and in a report that the daemon shows in its status. */
    struct shim_loss loss;
    cuptimon__io_exit_loss(s, &loss);
    if (loss.buffers > 0)
        cuptimon__loss_report(s, &loss);
}

CUPTIMON_API int cuptimon_flush(int wait)
{
    struct shim *s = &cuptimon__shim;
    if (cuptimon_init() < 0)
        return -ENODEV;
    if (wait)
        return wait_cupti(s, 1000) == 0 ? 0 : -ETIMEDOUT;
    return s->cupti.FlushAll(0) == CUPTI_SUCCESS ? 0 : -EIO;
}

/* User annotations ride on CUPTI external correlation ids (kind CUSTOM1,
 * as PyTorch's monitor uses), and only while a window has external
 * correlation on: outside one they are a load and a branch.  The name goes
 * to the daemon through the string table, keyed by the id; the push and
 * pop times go through the range queue (ranges.c), with the thread, the
 * nesting and the enclosing annotation, so that traces draw ranges. */
static _Atomic uint64_t next_annotation = 1;
static __thread int annotation_depth;
/* The ids this thread has pushed, innermost last (deeper nesting is still
 * correlated, only its parent is not known: recorded as 0). */
#define ANNOTATION_STACK 64
static __thread uint64_t annotation_stack[ANNOTATION_STACK];
static __thread uint32_t annotation_tid;
/* cuptimon_step's open ProfilerStep on this thread: annotation_calls
 * just after its push (0: none). */
static __thread int step_depth;
static _Atomic uint64_t step_next;

void cuptimon__add_string(struct shim *s, uint64_t key, const char *name)
{
    size_t len = strnlen(name, 256);
    pthread_mutex_lock(&s->qlock);
    if (s->strings.len == 0)
        cuptimon__strings_begin(&s->strings);
    if (cuptimon__strings_add(&s->strings, key, name, len) == 0)
        s->strings_count++;
    pthread_mutex_unlock(&s->qlock);
    cuptimon__io_wake(s);
}

static uint32_t range_tid(void)
{
    if (annotation_tid == 0)
        annotation_tid = atomic_load_explicit(&tid_system, memory_order_relaxed)
                             ? (uint32_t)syscall(SYS_gettid)
                             : (uint32_t)(uintptr_t)pthread_self();
    return annotation_tid;
}

/* Queues a push or pop of annotation id at depth d of this thread. */
static void range_note(struct shim *s, uint8_t what, uint64_t id, int d)
{
    struct cuptimon_range_ev ev = {.id = id, .tid = range_tid(), .what = what};
    ev.depth = (uint16_t)(d > UINT16_MAX ? UINT16_MAX : d);
    ev.parent = d > 0 && d <= ANNOTATION_STACK ? annotation_stack[d - 1] : 0;
    if (s->cupti.GetTimestamp == NULL || s->cupti.GetTimestamp(&ev.ts) != CUPTI_SUCCESS)
        return;
    if (cuptimon__range_note(&ev) == 0 && cuptimon__ranges_pending() == 8192)
        cuptimon__io_wake(s); /* half full: one wake, not one per entry */
}

/* Every push, made or not (outside a window it does nothing), is counted
 * in annotation_calls, and annotation_real has bit L set when the push at
 * level L was made: a pop then undoes exactly its own push, so a scope
 * that began before a window and ends inside it pops nothing, and one
 * that began inside and ends after still pops its own.  Levels from
 * REAL_LEVELS up are not tracked: pushes there count only when made. */
#define REAL_LEVELS 256
static __thread int annotation_calls;
static __thread uint64_t annotation_real[REAL_LEVELS / 64];

static void level_set(int lvl, int real)
{
    uint64_t bit = 1ull << (lvl % 64);
    if (real)
        annotation_real[lvl / 64] |= bit;
    else
        annotation_real[lvl / 64] &= ~bit;
}

CUPTIMON_API int cuptimon_push_annotation(const char *name)
{
    struct shim *s = &cuptimon__shim;
    int lvl = annotation_calls;
    if (!atomic_load_explicit(&annotations_on, memory_order_relaxed) || !name || forked_child) {
        if (lvl < REAL_LEVELS) {
            level_set(lvl, 0);
            annotation_calls++;
        }
        return 0;
    }
    uint64_t id = atomic_fetch_add(&next_annotation, 1);
    cuptimon__add_string(s, CUPTIMON_ANNOTATION_KEY(id), name);
    int made = s->cupti.PushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, id) ==
               CUPTI_SUCCESS;
    if (lvl < REAL_LEVELS)
        level_set(lvl, made);
    if (lvl < REAL_LEVELS || made)
        annotation_calls++;
    if (!made)
        return -EIO;
    range_note(s, CUPTIMON_RANGE_BEGIN, id, annotation_depth);
    if (annotation_depth < ANNOTATION_STACK)
        annotation_stack[annotation_depth] = id;
    annotation_depth++;
    return 0;
}

CUPTIMON_API int cuptimon_pop_annotation(void)
{
    struct shim *s = &cuptimon__shim;
    /* Pop only what this thread pushed: a window that ended between a push
     * and its pop leaves nothing unbalanced, nor one that began between. */
    if (annotation_calls <= 0)
        return 0;
    int lvl = --annotation_calls;
    if (step_depth > annotation_calls)
        step_depth = 0; /* the step's range was popped as an annotation */
    if (lvl < REAL_LEVELS && !(annotation_real[lvl / 64] >> (lvl % 64) & 1))
        return 0;
    if (annotation_depth <= 0)
        return 0;
    annotation_depth--;
    uint64_t id = 0;
    if (s->cupti.PopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, &id) !=
        CUPTI_SUCCESS)
        return -EIO;
    /* CUPTI's id, not the stack's: the stack stops at ANNOTATION_STACK. */
    range_note(s, CUPTIMON_RANGE_END, id, annotation_depth);
    return 0;
}

CUPTIMON_API int64_t cuptimon_step(void)
{
    uint64_t n = atomic_fetch_add(&step_next, 1);
    char name[40];
    /* The previous step ends here when it is still this thread's innermost
     * annotation; one that other annotations are open above is left to
     * them (a step inside a scope is the caller's mistake to see). */
    if (step_depth > 0) {
        if (step_depth != annotation_calls)
            return -EBUSY;
        cuptimon_pop_annotation();
        step_depth = 0;
    }
    snprintf(name, sizeof name, "ProfilerStep#%llu", (unsigned long long)n);
    int before = annotation_calls;
    int rc = cuptimon_push_annotation(name);
    /* Outside a window too: the step is a level of this thread's scopes
     * either way, and its end is the next step. */
    if (annotation_calls > before)
        step_depth = annotation_calls;
    return rc < 0 ? rc : (int64_t)n;
}

CUPTIMON_API int cuptimon_step_end(void)
{
    if (step_depth == 0)
        return 0;
    if (step_depth != annotation_calls)
        return -EBUSY;
    step_depth = 0;
    return cuptimon_pop_annotation();
}

CUPTIMON_API int cuptimon_label_graph_node(uint64_t graph_node_id, const char *name)
{
    struct shim *s = &cuptimon__shim;
    if (!name || forked_child || cuptimon_init() < 0)
        return -ENODEV;
    cuptimon__add_string(s, CUPTIMON_GRAPH_LABEL_KEY(graph_node_id), name);
    return 0;
}

CUPTIMON_API int cuptimon_get_status(struct cuptimon_status *st)
{
    struct shim *s = &cuptimon__shim;
    if (!st || st->struct_size < sizeof *st)
        return -EINVAL;
    memset(st, 0, sizeof *st);
    st->struct_size = sizeof *st;
    pthread_mutex_lock(&start_lock);
    st->started = start_state == 1;
    pthread_mutex_unlock(&start_lock);
    st->connected = atomic_load(&s->connected);
    st->cupti_version = s->cupti.version;
    st->buffers_completed = atomic_load(&s->buffers_completed);
    st->buffers_sent = atomic_load(&s->buffers_sent);
    st->buffers_released = atomic_load(&s->buffers_released);
    st->buffers_lost = atomic_load(&s->buffers_lost);
    st->requests_declined = atomic_load(&s->requests_declined);
    st->dropped_records = atomic_load(&s->dropped_records);
    st->foreign_buffers = atomic_load(&s->foreign_buffers);
    st->connects = atomic_load(&s->connects);
    st->pool_slots = s->nslots;
    st->pool_free = atomic_load(&s->pool_free);
    st->slot_size = s->slot_size;
    return 0;
}

CUPTIMON_API const char *cuptimon_version(void)
{
    return PACKAGE_VERSION;
}

/* LD_PRELOAD: the library is loaded before main.  Starting CUPTI here
 * would load libcupti before a framework loads its own copy (PyTorch's
 * wheel ships one), so instead point the driver's injection hook at us:
 * the driver then calls InitializeInjection at cuInit, after the job's own
 * libraries are loaded, and processes that never use CUDA never start the
 * shim at all (which is what a node-wide preload needs). */
__attribute__((constructor)) static void on_load(void)
{
    const char *pre = getenv("LD_PRELOAD");
    if (!pre || !strstr(pre, "libcuptimon"))
        return;
    const char *inj = getenv("CUDA_INJECTION64_PATH");
    Dl_info info;
    if (!dladdr((void *)on_load, &info) || !info.dli_fname)
        return;
    if (!inj || !*inj) {
        setenv("CUDA_INJECTION64_PATH", info.dli_fname, 0);
    } else if (!strstr(inj, "libcuptimon")) {
        /* Another injection tool holds the hook: start now instead. */
        cuptimon_init();
    }
}
