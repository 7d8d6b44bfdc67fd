/*
 * Producer sessions: one per process running the shim.  A session keeps
 * the producer's pool memfd, reads each BUFFER_READY's bytes from it and
 * archives them on a worker thread, then releases the slot.  Every length,
 * index and offset a producer sends is checked, and the pool itself is
 * read so that nothing its owner does to it can fault the daemon:
 * producers are untrusted.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "archive/strtab.h"
#include "archive/json-get.h"

#define QUEUE_MAX 65536u
/* The most a session's work item reads before the next session's turn. */
#define BATCH_MAX_BYTES (32ull << 20)
/* The most a counter a producer reports may claim (see claim()). */
#define CLAIM_MAX SESSION_CLAIM_MAX

static void session_maybe_free(struct session *s);
static void start_work(struct session *s);
static char *meta_json(struct session *s);
static void turns_run(struct daemon *d);
static int peer_gone(pid_t pid);
static void refused_count(struct session *s, const struct cuptimon_msg_hdr *h, const uint8_t *body);
static uint64_t claim(struct session *s, const char *what, uint64_t v, uint64_t max);
static uint64_t sat_add(uint64_t a, uint64_t b);
static void on_flush_timer(uv_timer_t *t);
static void on_hello_timeout(uv_timer_t *t);
static int session_evict_silent_except(struct daemon *d, const struct session *keep);
#define HELLO_TIMEOUT_MS 2000
/* Out of descriptors, a connection silent this long makes room for a new
 * one: a shim says hello as soon as it connects, so only a client that
 * holds connections open loses them. */
#define EVICT_MIN_AGE_MS 100

int64_t unix_ns_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

size_t session_count(const struct daemon *d)
{
    size_t n = 0;
    for (const struct session *s = d->sessions; s; s = s->next)
        n++;
    return n;
}

int session_idle(const struct session *s)
{
    return !s->working && s->qlen == 0;
}

/* ---- archive work (worker threads) ------------------------------------- */

/* Each worker's copy of the slot it is reading, grown to the largest slot
 * it has read; kept between batches only up to SLOT_COPY_KEEP.  Mapped,
 * not malloc'd: an unmapped copy is back with the system at once (malloc
 * may keep it, and a sanitizer's quarantine does). */
#define SLOT_COPY_KEEP (16u << 20)
#define COPY_HUGE      ((size_t)2 << 20)
static _Thread_local struct {
    uint8_t *p;
    size_t cap;
} slot_copy;

/* The valid bytes of a slot, copied out of the producer's memfd with
 * pread.  The daemon does not map pools: a producer can punch pages out of
 * its memfd (or, on a node short of memory, have a fault on it fail), and a
 * read through a mapping would then kill the daemon with SIGBUS or charge
 * it the memory of every hole it touched.  pread of a hole reads zeros and
 * allocates nothing.  A hole inside the valid part (CUPTI wrote there, so
 * an honest producer has none) is counted as a sign of a hostile
 * producer: a whole page of the file inside the valid part that reads as
 * zeros (see zero_page).  Returns the bytes or NULL with errno set. */
static void slot_copy_drop(void)
{
    if (slot_copy.p)
        munmap(slot_copy.p, slot_copy.cap);
    slot_copy.p = NULL;
    slot_copy.cap = 0;
}

/* Whether a whole 4 KiB page of the file (at file offset off + i) inside
 * p[0, len) is all zeros: what a page punched out of the pool reads as.
 * Honest CUPTI data has none: every page holds the start of a record, whose
 * kind is never 0, and a check of an honest page ends at its first
 * non-zero word.  (lseek(SEEK_HOLE) said the same, but walks the page cache
 * to the pool's first hole, the whole pool when it has none: 6 % of the
 * daemon's CPU at full rate.) */
static int zero_page(const uint8_t *p, size_t len, off_t off)
{
    size_t i = (size_t)((4096 - (off & 4095)) & 4095);
    for (; i + 4096 <= len; i += 4096) {
        const uint8_t *q = p + i;
        size_t j = 0;
        uint64_t w = 0;
        while (j < 4096) {
            memcpy(&w, q + j, 8);
            if (w)
                break;
            j += 8;
        }
        if (j == 4096)
            return 1;
    }
    return 0;
}

static const uint8_t *read_slot(struct session *s, const struct cuptimon_buffer_ready *m)
{
    off_t off = (off_t)m->slot * (off_t)s->slot_size;
    size_t len = (size_t)m->valid_size, done = 0;
    if (len > slot_copy.cap) {
        /* In 2 MiB pages where the kernel has them: a copy of a 32 MiB
         * slot in 4 KiB pages takes 8192 page faults each time it is
         * mapped again, and on a virtual machine those cost more than the
         * copy (16 producers of 32 MiB buffers made the daemon's workers
         * so slow that a producer beside them dropped 57% of its records;
         * in huge pages, none: tests/fault/fair-users.sh). */
        size_t page = len >= COPY_HUGE ? COPY_HUGE : 4096;
        size_t cap = (len + page - 1) & ~(page - 1);
        void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        if (page == COPY_HUGE)
            (void)madvise(p, cap, MADV_HUGEPAGE);
        slot_copy_drop();
        slot_copy.p = p;
        slot_copy.cap = cap;
    }
    while (done < len) {
        ssize_t n = pread(s->pool_fd, slot_copy.p + done, len - done, off + (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return NULL;
        if (n == 0) { /* cannot happen: the memfd is sealed against shrinking */
            errno = EIO;
            return NULL;
        }
        done += (size_t)n;
    }
    if (zero_page(slot_copy.p, len, off))
        atomic_fetch_add(&s->pool_holes, 1);
    return slot_copy.p;
}

/* Live aggregates, on the worker: a STRINGS batch fills the session's
 * table (only this session's worker touches it, one batch at a time, in
 * the order the producer sent strings and chunks), a chunk is walked once
 * more into the aggregates right after it was written. */
static void agg_item(struct session *s, const struct aw_item *it, const uint8_t *data)
{
    if (it->is_layouts) {
        /* The buffers after it are laid out as it says (on_layouts checked
         * it; this is the worker's copy, in order with the chunks). */
        struct cuptimon_strings_iter iter;
        uint64_t ptr;
        const char *str;
        size_t n;
        if (cuptimon__strings_iter_init(&iter, it->strings, it->strings_len) < 0 ||
            cuptimon__strings_next(&iter, &ptr, &str, &n) != 1)
            return;
        json_object *m = json_object_new_object(), *rl = json_tokener_parse(str);
        if (m == NULL || rl == NULL) {
            json_object_put(m);
            json_object_put(rl);
            return;
        }
        json_object_object_add(m, "record_layouts", rl);
        json_object_object_add(m, "user_defined_records", json_object_new_boolean(1));
        (void)cuptimon__layout_init_meta(&s->layout, s->cupti_version, NULL, m);
        json_object_put(m);
        return;
    }
    if (it->is_strings) {
        struct cuptimon_strings_iter iter;
        uint64_t ptr;
        const char *str;
        size_t n;
        if (s->names == NULL ||
            cuptimon__strings_iter_init(&iter, it->strings, it->strings_len) < 0)
            return;
        while (cuptimon__strings_next(&iter, &ptr, &str, &n) == 1)
            cuptimon__strtab_put(s->names, ptr, str, n); /* refusals are counted there */
        /* The devices' UUIDs may be among them: a kernel that runs long
         * before any record came is then shown busy on the right GPU. */
        if (s->d->agg)
            cuptimon__agg_session_devices(s->d->agg, s->id, s->names);
        return;
    }
    const struct cuptimon_buffer_ready *m = &it->ready;
    struct cuptimon_clock clk = {.cupti_ts = m->cupti_ts, .unix_ns = m->realtime_ns};
    cuptimon__agg_add_buffer(s->d->agg, s->id, &s->layout, s->names, data, m->valid_size, &clk);
}

/* Each item of the batch in turn: a STRINGS batch into the archive (and
 * the aggregates' table), a buffer copied out of the pool, written, then
 * walked into the aggregates while the copy is at hand. */
static void work_cb(uv_work_t *w)
{
    struct session *s = w->data;
    /* A failure leaves the older meta.json; the session's end writes it again. */
    if (s->work_meta && s->aw)
        cuptimon__aw_meta(s->aw, s->work_meta);
    if (s->aw)
        cuptimon__aw_lend(s->aw, s->work_scratch);
    for (size_t i = 0; i < s->work_len; i++) {
        struct aw_item *it = &s->work_items[i];
        if (it->is_strings) {
            if (s->d->agg)
                agg_item(s, it, NULL);
            it->result = s->aw ? cuptimon__aw_strings(s->aw, it->strings, it->strings_len)
                               : -ENOENT; /* no archive: it could not be created */
            continue;
        }
        const struct cuptimon_buffer_ready *m = &it->ready;
        const uint8_t *data = read_slot(s, m);
        if (!data) {
            it->result = -errno;
            continue;
        }
        if (!s->aw) {
            it->result = -ENOENT;
        } else {
            struct cuptimon_chunk_hdr h = {
                .index = m->seq,
                .stream_id = m->stream_id,
                .context = m->context,
                .cupti_ts = m->cupti_ts,
                .unix_ns = m->realtime_ns,
                .raw_size = m->valid_size,
                .dropped = m->dropped,
                .records = m->records,
            };
            /* The sizes the walk goes by now (the layout changes on
             * the loop between batches, and on this thread when a batch
             * brings LAYOUTS): the per-kind record delta walks the chunk
             * by them. */
            cuptimon__aw_set_record_sizes(s->aw, s->layout.size);
            it->result = cuptimon__aw_chunk(s->aw, &h, data);
            if (it->result == 0)
                it->strings_len = h.stored_size; /* reported back to the loop */
        }
        if (s->d->agg)
            agg_item(s, it, data);
    }
    /* A copy larger than an ordinary slot is not kept: a producer with
     * huge slots must not leave each worker holding one. */
    if (slot_copy.cap > SLOT_COPY_KEEP)
        slot_copy_drop();
    if (s->aw)
        cuptimon__aw_lend(s->aw, NULL);
    cuptimon__aw_scratch_trim(s->work_scratch, SLOT_COPY_KEEP);
}

/* The loop thread's side of the scratch: one taken for a work item (made
 * when none is free; NULL without memory, and the writer then uses its
 * own), and given back when the item is done. */
static struct cuptimon_aw_scratch *scratch_take(struct daemon *d)
{
    if (d->nscratch_free > 0)
        return d->scratch_free[--d->nscratch_free];
    struct cuptimon_aw_scratch **nf =
        realloc(d->scratch_free, (d->nscratch + 1) * sizeof *d->scratch_free);
    if (nf == NULL)
        return NULL;
    d->scratch_free = nf;
    struct cuptimon_aw_scratch *sc = cuptimon__aw_scratch_new();
    if (sc != NULL)
        d->nscratch++;
    return sc;
}

static void scratch_give(struct daemon *d, struct cuptimon_aw_scratch *sc)
{
    if (sc != NULL) /* room: scratch_take made it for each one made */
        d->scratch_free[d->nscratch_free++] = sc;
}

void session_scratch_free(struct daemon *d)
{
    while (d->nscratch_free > 0)
        cuptimon__aw_scratch_free(d->scratch_free[--d->nscratch_free]);
    free(d->scratch_free);
    d->scratch_free = NULL;
    d->nscratch = 0;
}

static void release_slot(struct session *s, const struct cuptimon_buffer_ready *m, int status)
{
    s->slot_held[m->slot] = 0;
    s->nheld--;
    if (!s->conn)
        return;
    struct cuptimon_buffer_release r = {.slot = m->slot, .status = (uint32_t)status, .seq = m->seq};
    uint8_t body[CUPTIMON_BUFFER_RELEASE_SIZE];
    cuptimon__buffer_release_encode(body, &r);
    conn_send(s->conn, CUPTIMON_MSG_BUFFER_RELEASE, body, sizeof body);
}

/* The counters only the loop knows, for the aggregates (drops, losses). */
static void agg_counters(struct session *s)
{
    if (s->d->agg && s->hello)
        cuptimon__agg_session(s->d->agg, s->id, NULL, s->dropped_records,
                              s->shim_lost + s->write_errors);
}

static void after_work_cb(uv_work_t *w, int status)
{
    struct session *s = w->data;
    struct daemon *d = s->d;
    s->working = 0;
    d->archive_inflight--;
    if (s->aw) {
        /* The writer is the worker's only while it works. */
        uint64_t fb = cuptimon__aw_rdelta_fallbacks(s->aw);
        d->rdelta_fallbacks += fb - s->rdelta_fallbacks;
        s->rdelta_fallbacks = fb;
    }
    scratch_give(d, s->work_scratch);
    s->work_scratch = NULL;
    free(s->work_meta);
    s->work_meta = NULL;
    session_layout_refresh(s); /* a measured size that came while it worked */
    for (size_t i = 0; i < s->work_len; i++) {
        struct aw_item *it = &s->work_items[i];
        if (status < 0 && it->result == 0)
            it->result = status;
        if (it->is_strings) {
            if (it->result < 0 && s->strings_errors++ == 0)
                log_err("archive", "session %" PRIu64 " (pid %d): cannot write strings: %s", s->id,
                        (int)s->peer.pid,
                        s->aw ? strerror(-it->result) : "the session has no archive");
            free(it->strings);
        } else {
            if (it->result == 0) {
                s->chunks_written++;
                s->bytes_archived += it->ready.valid_size;
                s->bytes_stored += it->strings_len;
                daemon_wrote(s->d, it->strings_len + CUPTIMON_CHUNK_HDR_SIZE);
            } else {
                s->write_errors++;
                if (s->write_errors == 1 || s->write_errors % 1000 == 0)
                    log_err("archive",
                            "session %" PRIu64 " (pid %d): cannot write chunk %" PRIu64
                            " to %s: %s (%" PRIu64 " failed so far; still serving)",
                            s->id, (int)s->peer.pid, it->ready.seq, s->archive_dir,
                            it->result == -ENOENT ? "the session has no archive"
                                                  : strerror(-it->result),
                            s->write_errors);
            }
            /* The bytes are in the file (or could not be): the slot goes
             * back to the producer either way, so the job never stalls. */
            release_slot(s, &it->ready, it->result < 0 ? -it->result : 0);
        }
        s->items_done++;
    }
    s->work_len = 0;
    /* Buffers went back: a producer paused at max_pool_bytes is read on. */
    if (s->conn && s->conn->paused && s->nheld < s->take_slots)
        conn_resume(s->conn);
    uint64_t holes = atomic_load(&s->pool_holes);
    if (holes && s->holes_logged == 0)
        log_warn("session",
                 "session %" PRIu64 " (pid %d uid %u): a buffer it announced lies over "
                 "pages punched out of its pool (a page of zeros), which an honest shim never "
                 "writes; status counts them as pool_holes",
                 s->id, (int)s->peer.pid, (unsigned)s->peer.uid);
    s->holes_logged = holes;
    agg_counters(s);
    if (s->conn)
        flush_progress(s->d, s, 0, 0, 0);
    start_work(s);
    session_maybe_free(s);
    turns_run(d); /* the worker it had is free for the next in turn */
}

/* What an item asks of a worker, in bytes read. */
static uint64_t item_bytes(const struct aw_item *it)
{
    return it->is_strings ? it->strings_len : it->ready.valid_size;
}

/* ---- turns on the worker pool ------------------------------------------ */

/* At most as many archive items run at once as libuv's pool has threads
 * (archive_inflight_max; the window writer, retention and the loss-report
 * scan queue behind them, never more than that many items deep).  Sessions
 * with work wait in their user's line, and users take turns: one item of
 * the first session in one user's line, then the next user's.  A user
 * with 200 sessions gets a turn in a round, not 200: per session turns
 * (each session one item in libuv's FIFO) gave that user the pool. */
static unsigned archive_inflight_max(void)
{
    /* libuv's pool: UV_THREADPOOL_SIZE threads (4 unless set; libuv reads
     * it once, at its first work item, and caps it at 1024). */
    static unsigned n;
    if (n == 0) {
        const char *v = getenv("UV_THREADPOOL_SIZE");
        long k = v ? strtol(v, NULL, 10) : 0;
        n = k > 0 ? (k > 1024 ? 1024u : (unsigned)k) : 4u;
    }
    return n;
}

struct turn_user {
    uint32_t uid;
    struct session *head, *tail;
    struct turn_user *prev, *next; /* the ring */
};

static void submit_work(struct session *s);

/* Puts s at the end of its user's line; a user new to the ring goes last
 * in the round.  Returns -ENOMEM (s then waits for its next enqueue). */
static int turn_wait(struct session *s)
{
    struct daemon *d = s->d;
    struct turn_user *u = d->turns;
    if (u)
        do {
            if (u->uid == (uint32_t)s->peer.uid)
                goto found;
            u = u->next;
        } while (u != d->turns);
    if ((u = calloc(1, sizeof *u)) == NULL)
        return -ENOMEM;
    u->uid = (uint32_t)s->peer.uid;
    if (d->turns == NULL) {
        u->prev = u->next = u;
        d->turns = u;
    } else { /* before the one whose turn is next: last in the round */
        u->next = d->turns;
        u->prev = d->turns->prev;
        u->prev->next = u;
        d->turns->prev = u;
    }
found:
    s->turn_next = NULL;
    if (u->tail)
        u->tail->turn_next = s;
    else
        u->head = s;
    u->tail = s;
    s->turn_waiting = 1;
    return 0;
}

/* Starts work for the users whose turn it is while the pool has room. */
static void turns_run(struct daemon *d)
{
    while (d->archive_inflight < archive_inflight_max() && d->turns) {
        struct turn_user *u = d->turns;
        struct session *s = u->head;
        u->head = s->turn_next;
        if (u->head == NULL) { /* its line is empty: out of the ring */
            u->tail = NULL;
            if (u->next == u) {
                d->turns = NULL;
            } else {
                u->prev->next = u->next;
                u->next->prev = u->prev;
                d->turns = u->next;
            }
            free(u);
        } else {
            d->turns = u->next;
        }
        s->turn_waiting = 0;
        s->turn_next = NULL;
        submit_work(s);
    }
}

static void start_work(struct session *s)
{
    struct daemon *d = s->d;
    if (s->working || s->turn_waiting || s->qlen == 0)
        return;
    /* Nobody waits and a worker is free: no line to stand in. */
    if (d->turns == NULL && d->archive_inflight < archive_inflight_max()) {
        submit_work(s);
        return;
    }
    if (turn_wait(s) < 0) {
        submit_work(s); /* no memory for a line: out of turn rather than never */
        return;
    }
    turns_run(d);
}

static void submit_work(struct session *s)
{
    /* Hand the queue to one work item, up to BATCH_MAX_BYTES of it (one
     * buffer at least): a session's writes stay in order, and one batch
     * costs one thread hop.  The bound keeps turns short: a session that
     * announces huge buffers takes its turns like the others instead of
     * holding a worker for seconds (four such sessions made an honest
     * producer beside them drop 24% of its records). */
    size_t n = 0;
    uint64_t bytes = 0;
    /* The layout check's news first: the worker reads the layout, and
     * writes meta.json before the batch's chunks (session-layout.c). */
    session_layout_refresh(s);
    if (s->meta_dirty) {
        s->meta_dirty = 0;
        free(s->work_meta);
        s->work_meta = meta_json(s);
    }
    while (n < s->qlen && (n == 0 || bytes + item_bytes(&s->queue[n]) <= BATCH_MAX_BYTES))
        bytes += item_bytes(&s->queue[n++]);
    free(s->work_items);
    if (n == s->qlen) {
        s->work_items = s->queue;
        s->queue = NULL;
        s->qcap = 0;
    } else {
        s->work_items = malloc(n * sizeof *s->work_items);
        if (s->work_items) {
            memcpy(s->work_items, s->queue, n * sizeof *s->work_items);
            memmove(s->queue, s->queue + n, (s->qlen - n) * sizeof *s->queue);
        } else { /* no memory to split it: the whole queue, one long turn */
            s->work_items = s->queue;
            s->queue = NULL;
            s->qcap = 0;
            n = s->qlen;
        }
    }
    s->work_len = n;
    s->qlen -= n;
    s->work.data = s;
    s->working = 1;
    s->d->archive_inflight++;
    s->work_scratch = scratch_take(s->d);
    if (uv_queue_work(s->d->loop, &s->work, work_cb, after_work_cb) < 0) {
        for (size_t i = 0; i < s->work_len; i++)
            s->work_items[i].result = -EAGAIN;
        after_work_cb(&s->work, 0);
    }
}

static int enqueue(struct session *s, const struct aw_item *it)
{
    if (s->qlen + s->work_len >= QUEUE_MAX)
        return -ENOBUFS;
    if (s->qlen == s->qcap) {
        size_t cap = s->qcap ? s->qcap * 2 : 16;
        struct aw_item *nq = realloc(s->queue, cap * sizeof *nq);
        if (!nq)
            return -ENOMEM;
        s->queue = nq;
        s->qcap = cap;
    }
    s->queue[s->qlen++] = *it;
    s->items_queued++;
    start_work(s);
    return 0;
}

/* ---- messages from the producer ---------------------------------------- */

static void protocol_error(struct session *s, const char *what)
{
    /* Bounded: a peer that floods bad messages must not flood the log. */
    s->protocol_errors++;
    if (s->protocol_errors <= 10 || s->protocol_errors % 1000 == 0)
        log_warn("session", "session %" PRIu64 " (pid %d): %s%s", s->id, (int)s->peer.pid, what,
                 s->protocol_errors == 10  ? " (further errors of this session: every 1000th)"
                 : s->protocol_errors > 10 ? " (1000 more)"
                                           : "");
}

/* Takes the pool fd when it is what a shim sends: a memfd on shmem (not
 * hugetlbfs, whose pages can run out under a reader; not a file or a
 * device), sealed against shrinking and growing, of the size the hello
 * gives.  Returns 0 (the session owns fd) or -errno with why filled. */
static int take_pool(struct session *s, int fd, char *why, size_t whylen)
{
    struct stat sb;
    struct statfs fs;
    int seals = fcntl(fd, F_GET_SEALS);
    int need = F_SEAL_SHRINK | F_SEAL_GROW;
    if (seals < 0 || (seals & need) != need) {
        snprintf(why, whylen,
                 "the pool fd is not a memfd sealed against shrink and grow (seals 0x%x); "
                 "refusing it",
                 seals < 0 ? 0 : seals);
        return -EPERM;
    }
    if (fstatfs(fd, &fs) < 0 || fs.f_type != TMPFS_MAGIC) {
        snprintf(why, whylen,
                 "the pool fd is not on shmem (filesystem type 0x%lx%s); only an ordinary "
                 "memfd is accepted",
                 (unsigned long)fs.f_type,
                 (unsigned long)fs.f_type == (unsigned long)HUGETLBFS_MAGIC ? ", hugetlbfs" : "");
        return -EPERM;
    }
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) ||
        (uint64_t)sb.st_size != (uint64_t)s->nslots * s->slot_size) {
        snprintf(why, whylen, "the pool is %lld bytes, but the hello says %u slots x %" PRIu64,
                 (long long)sb.st_size, s->nslots, s->slot_size);
        return -EINVAL;
    }
    s->pool_fd = fd;
    s->pool_size = (size_t)sb.st_size;
    return 0;
}

/* The record sizes of a kernel as layouts l give them, for status. */
static uint32_t kernel_bytes(const struct cuptimon_layout *l)
{
    return l->size[CUPTIMON_KIND_CONCURRENT_KERNEL] ? l->size[CUPTIMON_KIND_CONCURRENT_KERNEL]
                                                    : l->size[CUPTIMON_KIND_KERNEL];
}

static char *meta_json(struct session *s)
{
    json_object *m = json_object_new_object();
    json_object_object_foreach(s->hello, k, v)
    {
        json_object_object_add(m, k, json_object_get(v));
    }
    /* pid is the one the kernel vouches for (SO_PEERCRED, in our pid
     * namespace); what the shim said is kept beside it. */
    json_object_object_add(m, "reported_pid", json_object_new_int64(s->reported_pid));
    json_object_object_add(m, "pid", json_object_new_int64(s->peer.pid));
    json_object_object_add(m, "uid", json_object_new_int64(s->peer.uid));
    json_object_object_add(m, "gid", json_object_new_int64(s->peer.gid));
    json_object_object_add(m, "archive_version", json_object_new_int(1));
    json_object_object_add(m, "session_id", json_object_new_int64((int64_t)s->id));
    json_object_object_add(m, "daemon_version", json_object_new_string(PACKAGE_VERSION));
    json_object_object_add(m, "timebase", json_object_new_string("cupti"));
    json_object_object_add(m, "path", json_object_new_string(s->path[0] ? s->path : "v1"));
    json_object_object_add(m, "record_bytes_per_kernel",
                           json_object_new_int64((int64_t)s->kernel_record_bytes));
    json_object_object_add(m, "connected_unix_ns", json_object_new_int64(s->connected_unix_ns));
    if (s->disconnected_unix_ns) {
        json_object_object_add(m, "disconnected_unix_ns",
                               json_object_new_int64(s->disconnected_unix_ns));
        json_object *st = json_object_new_object();
        json_object_object_add(st, "buffers_received",
                               json_object_new_int64((int64_t)s->buffers_received));
        json_object_object_add(st, "chunks_written",
                               json_object_new_int64((int64_t)s->chunks_written));
        json_object_object_add(st, "records", json_object_new_int64((int64_t)s->records));
        json_object_object_add(st, "dropped_records",
                               json_object_new_int64((int64_t)s->dropped_records));
        json_object_object_add(st, "write_errors", json_object_new_int64((int64_t)s->write_errors));
        json_object_object_add(st, "requests_declined",
                               json_object_new_int64((int64_t)s->shim_declined));
        json_object_object_add(st, "completion_p99_ns_max",
                               json_object_new_int64((int64_t)s->completion_p99_ns));
        json_object_object_add(st, "completion_longest_ns",
                               json_object_new_int64((int64_t)s->completion_longest_ns));
        json_object_object_add(st, "exit_incomplete_buffers",
                               json_object_new_int64((int64_t)s->exit_running_buffers));
        json_object_object_add(st, "lost_buffers",
                               json_object_new_int64((int64_t)(s->shim_lost + s->write_errors)));
        session_held_meta(s, st);
        json_object_object_add(m, "final", st);
    }
    char *txt = strdup(json_object_to_json_string_ext(m, JSON_C_TO_STRING_PRETTY));
    json_object_put(m);
    return txt;
}

/* A user other than root and the daemon's own may hold at most
 * max_sessions_per_user sessions at once: past that, one user's runaway
 * (or hostile) processes would take the descriptors of everyone's.
 * Returns 1 with why filled when s is one too many. */
static int over_user_cap(const struct session *s, char *why, size_t whylen)
{
    const struct daemon *d = s->d;
    uint64_t cap = d->cfg.max_sessions_per_user, n = 0;
    if (cap == 0 || s->peer.uid == 0 || s->peer.uid == geteuid())
        return 0;
    for (const struct session *o = d->sessions; o; o = o->next)
        if (o != s && o->conn && o->hello && o->peer.uid == s->peer.uid)
            n++;
    if (n < cap)
        return 0;
    snprintf(why, whylen,
             "uid %u already has %" PRIu64 " sessions, as many as "
             "max_sessions_per_user allows",
             (unsigned)s->peer.uid, n);
    return 1;
}

static void on_hello(struct session *s, const uint8_t *body, size_t len, int fd)
{
    struct daemon *d = s->d;
    char why[300];
    /* EMFILE tells the shim to try again on its usual backoff; anything
     * else is a refusal it waits out (30 s). */
    const char *refusal = "EINVAL";
    json_tokener *tok = json_tokener_new();
    json_object *o = json_tokener_parse_ex(tok, (const char *)body, (int)len);
    int complete = json_tokener_get_error(tok) == json_tokener_success &&
                   json_tokener_get_parse_end(tok) == len;
    json_tokener_free(tok);
    json_object *pool;
    if (!o || !complete || !json_object_is_type(o, json_type_object)) {
        snprintf(why, sizeof why, "the hello is not a JSON object");
        goto refuse;
    }
    if (fd < 0 && s->conn && s->conn->fd_lost) {
        snprintf(why, sizeof why,
                 "the daemon is out of file descriptors and could not take the "
                 "pool fd (EMFILE); the shim tries again");
        refusal = "EMFILE";
        /* Make room for that try: connections that have said nothing
         * go first, as at accept. */
        session_make_room(d, s);
        goto refuse;
    }
    if (fd < 0) {
        snprintf(why, sizeof why, "the hello carried no pool fd");
        goto refuse;
    }
    /* Descriptors come lowest first, so a pool fd this high means that
     * fewer than fd_reserve are left: they are not for producers. */
    if (fd_in_reserve(d, fd)) {
        snprintf(why, sizeof why,
                 "the daemon is out of file descriptors for producers (it keeps the "
                 "last %d of %d for the operator and its own files); the shim tries again",
                 d->fd_reserve, d->fd_limit);
        refusal = "EMFILE";
        session_make_room(d, s);
        goto refuse;
    }
    if (!json_object_object_get_ex(o, "pool", &pool)) {
        snprintf(why, sizeof why, "the hello has no \"pool\"");
        goto refuse;
    }
    int64_t slots = cuptimon__json_integer(pool, "slots", -1);
    int64_t slot_size = cuptimon__json_integer(pool, "slot_size", -1);
    if (slots < 1 || slots > 4096 || slot_size < 4096 || slot_size > (256 << 20) || slot_size % 8) {
        snprintf(why, sizeof why,
                 "pool geometry %" PRId64 " x %" PRId64 " is out of range "
                 "(1..4096 slots of 4 KiB..256 MiB)",
                 slots, slot_size);
        goto refuse;
    }
    /* A pool larger than max_pool_bytes is taken, not refused (issue 47:
     * CUPTIMON_POOL_MAX, CUPTIMON_POOL_SLOTS and CUPTIMON_SLOT_SIZE are the
     * job's to set): the daemon holds at most max_pool_bytes of it at once,
     * two buffers at least, and reads no more BUFFER_READY while it does.
     * The HELLO_ACK says so (pool_slots), and a shim that reads it keeps no
     * more slots out than that; one that does not waits on its socket. */
    s->take_slots = (uint32_t)slots;
    if ((uint64_t)slots * (uint64_t)slot_size > d->cfg.max_pool_bytes) {
        uint64_t n = d->cfg.max_pool_bytes / (uint64_t)slot_size;
        s->take_slots = n < 2 ? 2 : (uint32_t)n;
    }
    if (over_user_cap(s, why, sizeof why))
        goto refuse;
    s->nslots = (uint32_t)slots;
    s->slot_size = (uint64_t)slot_size;
    if (take_pool(s, fd, why, sizeof why) < 0)
        goto refuse;
    fd = -1;
    s->slot_held = calloc(s->nslots, 1);
    s->hello = o;
    s->reported_pid = cuptimon__json_integer(o, "pid", -1);
    s->cupti_version = (uint32_t)cuptimon__json_integer(o, "cupti_version", 0);
    json_object *fv;
    s->fence = json_object_object_get_ex(o, "fence", &fv) &&
               json_object_is_type(fv, json_type_boolean) && json_object_get_boolean(fv);
    snprintf(s->hostname, sizeof s->hostname, "%s", cuptimon__json_str(o, "hostname", ""));
    snprintf(s->exe, sizeof s->exe, "%s", cuptimon__json_str(o, "exe", ""));
    json_object *job, *cnt;
    if (json_object_object_get_ex(o, "counters", &cnt)) {
        int64_t lost = cuptimon__json_integer(cnt, "buffers_lost", 0);
        int64_t declined = cuptimon__json_integer(cnt, "requests_declined", 0);
        s->shim_lost = lost > 0 && (uint64_t)lost <= CLAIM_MAX ? (uint64_t)lost : 0;
        s->shim_declined = declined > 0 && (uint64_t)declined <= CLAIM_MAX ? (uint64_t)declined : 0;
    }
    if (json_object_object_get_ex(o, "job", &job))
        snprintf(s->label, sizeof s->label, "%s", cuptimon__json_str(job, "label", ""));
    /* The archive is opened before anything else counts the session, so
     * that a daemon out of descriptors can still send the producer away
     * to try again (as for the pool fd) rather than serve it unarchived. */
    struct tm tm;
    time_t secs = (time_t)(s->connected_unix_ns / 1000000000);
    gmtime_r(&secs, &tm);
    if (snprintf(s->archive_dir, sizeof s->archive_dir, "%s/%04d%02d%02dT%02d%02d%02dZ-%d-%" PRIu64,
                 d->archive_root, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, (int)s->peer.pid, s->id) >= (int)sizeof s->archive_dir)
        s->archive_dir[0] = '\0'; /* cannot happen: the root is bounded at startup */
    cuptimon__agg_layout_from_hello(o, &s->layout);
    /* Which of CUPTI's activity APIs the shim uses, and the bytes of its
     * kernel records, for status. */
    {
        json_object *v;
        int v2 = json_object_object_get_ex(o, "activity_api", &v) &&
                 json_object_is_type(v, json_type_string) &&
                 strcmp(json_object_get_string(v), "v2") == 0;
        snprintf(s->path, sizeof s->path, "%s",
                 v2 ? (s->layout.user_defined_only ? "v2+udr" : "v2") : "v1");
        s->kernel_record_bytes = kernel_bytes(&s->layout);
    }
    char *meta = meta_json(s), *err = NULL;
    /* Retention never touches a live session's newest segment. */
    cuptimon__live_set_add(&d->live, s->archive_dir + strlen(d->archive_root) + 1);
    int arc = cuptimon__aw_open(s->archive_dir, meta, d->cfg.segment_bytes, d->cfg.compress_level,
                                &s->aw, &err);
    free(meta);
    if (arc == -EMFILE || arc == -ENFILE) {
        snprintf(why, sizeof why,
                 "the daemon is out of file descriptors and could not create the "
                 "session's archive (%s); the shim tries again",
                 arc == -EMFILE ? "EMFILE" : "ENFILE");
        free(err);
        s->aw = NULL;
        /* Its descriptor back at once, not when the session is freed (the
         * rest goes then): the daemon is short of them. */
        close(s->pool_fd);
        s->pool_fd = -1;
        s->hello = NULL; /* o is put at refuse */
        refusal = "EMFILE";
        session_make_room(d, s);
        goto refuse;
    }
    if (arc < 0) {
        /* Keep the session (the producer must still get its slots back),
         * but say loudly that it is not being archived. */
        log_err("archive", "%s; session %" PRIu64 " (pid %d) is not archived",
                err ? err : "cannot open the archive", s->id, (int)s->peer.pid);
        free(err);
        s->aw = NULL;
    }
    /* The layout is usable whatever the version: unknown kinds are only
     * counted.  The table is NULL only without memory (pointers shown). */
    session_layout_hello(s); /* the per-session check of the table */
    if (d->agg) {
        struct cuptimon_agg_ident id = {.pid = s->peer.pid, .uid = s->peer.uid, .exe = s->exe};
        cuptimon__agg_ident_from_hello(o, &id);
        if (cuptimon__strtab_new(NULL, &s->names) < 0)
            s->names = NULL;
        int arc2 = cuptimon__agg_session(d->agg, s->id, &id, 0, s->shim_lost);
        cuptimon__agg_session_path(d->agg, s->id, s->path, s->kernel_record_bytes);
        if (arc2 == -ENOSPC)
            log_warn("aggregate",
                     "session %" PRIu64 " (pid %d) is not aggregated: too many "
                     "sessions (it is archived as usual)",
                     s->id, (int)s->peer.pid);
    }

    json_object *ack = json_object_new_object();
    json_object_object_add(ack, "session", json_object_new_int64((int64_t)s->id));
    json_object_object_add(ack, "daemon_version", json_object_new_string(PACKAGE_VERSION));
    json_object_object_add(ack, "archive", json_object_new_string(s->archive_dir));
    json_object_object_add(ack, "ranges", json_object_new_boolean(1));  /* send RANGES */
    json_object_object_add(ack, "layouts", json_object_new_boolean(1)); /* send LAYOUTS */
    json_object_object_add(ack, "held", json_object_new_boolean(1));    /* send HELD */
    /* HELD may carry the shim's declines (CUPTIMON_HELD_DECLINES). */
    json_object_object_add(ack, "held_declines", json_object_new_boolean(1));
    if (s->take_slots < s->nslots) {
        json_object_object_add(ack, "pool_slots", json_object_new_int64(s->take_slots));
        json_object_object_add(ack, "max_pool_bytes",
                               json_object_new_int64((int64_t)d->cfg.max_pool_bytes));
    }
    conn_send_json(s->conn, CUPTIMON_MSG_HELLO_ACK, ack);
    json_object_put(ack);
    /* The producer may be gone already (a job that exits right after
     * cuInit): the session then ends as usual, its buffers still written. */
    if (s->conn)
        s->conn->accept_fd = 0;
    log_info("session",
             "session %" PRIu64 ": pid %d uid %u (%s%s%s) CUPTI %u, pool %u x %" PRIu64
             ", archive %s",
             s->id, (int)s->peer.pid, (unsigned)s->peer.uid, s->exe, s->label[0] ? ", " : "",
             s->label, s->cupti_version, s->nslots, s->slot_size, s->archive_dir);
    session_pool_hello(s);
    if (s->layout.udr_error[0] != '\0')
        log_warn("session",
                 "session %" PRIu64 " (pid %d): its user-defined record layouts are refused "
                 "(%s): records of that kind are archived but counted as undecodable, never "
                 "misread",
                 s->id, (int)s->peer.pid, s->layout.udr_error);
    if (s->layout.release == NULL && s->layout.user_defined == 0 && !s->layout.user_defined_only)
        log_warn("session",
                 "session %" PRIu64 " (pid %d): CUPTI API version %u is not one this build "
                 "decodes (it decodes %s): its buffers are archived as they come but not "
                 "decoded, so windows and top show none of its records (a newer cuptimonctl "
                 "can decode the archive later)",
                 s->id, (int)s->peer.pid, s->cupti_version, cuptimon__cupti_supported());

    window_session_joined(d, s);
    uv_timer_stop(&s->flush_timer); /* the hello timeout */
    /* Stagger the periodic flushes of the sessions over the period. */
    uint64_t period = (uint64_t)(d->cfg.flush_period_s * 1000);
    if (period > 0) {
        uint64_t first =
            (uint64_t)((double)period *
                       ((double)((s->id * 0x9e3779b97f4a7c15ull) >> 11) / (double)(1ull << 53)));
        uv_timer_start(&s->flush_timer, on_flush_timer, first ? first : 1, period);
    }
    return;
refuse:
    if (fd >= 0)
        close(fd);
    log_warn("session", "refused a producer, pid %d uid %u: %s", (int)s->peer.pid,
             (unsigned)s->peer.uid, why);
    /* Out of descriptors is a moment's wait, not a refusal of the job: the
     * shim is back in a few hundred ms, and each try would count again. */
    if (strcmp(refusal, "EMFILE") == 0) {
        s->d->hellos_deferred++;
    } else {
        struct refusal *r = &d->refusals[d->refusal_next++ % DAEMON_REFUSALS_KEPT];
        s->d->refused_producers++;
        lossreport_refused(s->d, s->peer.uid);
        *r = (struct refusal){
            .unix_ns = unix_ns_now(), .pid = (int)s->peer.pid, .uid = (uint32_t)s->peer.uid};
        snprintf(r->exe, sizeof r->exe, "%s",
                 o && json_object_is_type(o, json_type_object) ? cuptimon__json_str(o, "exe", "")
                                                               : "");
        snprintf(r->why, sizeof r->why, "%s", why);
    }
    if (s->conn)
        conn_send_error(s->conn, refusal, "%s", why);
    json_object_put(o);
    /* A job that exited before its hello was read left its last buffers'
     * BUFFER_READYs in the socket: its shim counted them as the daemon's,
     * so they are counted here, to the end of what it sent.  A live one
     * reads the refusal and counts what it had not handed over itself. */
    if (s->conn && strcmp(refusal, "EMFILE") != 0 && peer_gone(s->peer.pid)) {
        s->refused_gone = 1;
        return;
    }
    if (s->conn)
        conn_close(s->conn);
}

/* Whether process pid has ended (no such process, or a zombie).  A process
 * the daemon may not see counts as alive: it is never counted twice. */
static int peer_gone(pid_t pid)
{
    char path[64], buf[256];
    if (pid <= 0)
        return 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ESRCH;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); /* the state follows the (comm) */
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* What a refused, gone producer had announced: counted, never archived. */
static void refused_count(struct session *s, const struct cuptimon_msg_hdr *h, const uint8_t *body)
{
    struct cuptimon_buffer_ready m;
    if (h->type != CUPTIMON_MSG_BUFFER_READY ||
        cuptimon__buffer_ready_decode(body, h->length, &m) < 0)
        return;
    /* Bounded as on_buffer_ready bounds them, with the largest slot a pool
     * may have (no pool was taken). */
    uint64_t size = m.valid_size < (256u << 20) ? m.valid_size : 256u << 20;
    s->buffers_received++;
    s->records = sat_add(s->records, claim(s, "BUFFER_READY records", m.records, size / 8));
    s->dropped_records =
        sat_add(s->dropped_records, claim(s, "BUFFER_READY dropped", m.dropped, CLAIM_MAX));
}

/* Counters are the producer's word: each claim is checked for range before
 * it is shown (status, top) or stored (meta.json), so that a lie cannot
 * print as a negative count or a quadrillion records.  A claim past max
 * is refused (0 is used) with a protocol error naming it. */
static uint64_t claim(struct session *s, const char *what, uint64_t v, uint64_t max)
{
    if (v <= max)
        return v;
    char why[160];
    snprintf(why, sizeof why, "%s %" PRIu64 " is implausible (more than %" PRIu64 "); ignored",
             what, v, max);
    protocol_error(s, why);
    return 0;
}

/* a + b, held at INT64_MAX: every counter is shown as a signed JSON int. */
static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return b > (uint64_t)INT64_MAX - a ? (uint64_t)INT64_MAX : a + b;
}

static void on_buffer_ready(struct session *s, const uint8_t *body, size_t len)
{
    struct cuptimon_buffer_ready m;
    char why[200];
    if (cuptimon__buffer_ready_decode(body, len, &m) < 0) {
        protocol_error(s, "BUFFER_READY with a bad body size");
        return;
    }
    if (m.slot >= s->nslots || m.valid_size > s->slot_size) {
        snprintf(why, sizeof why,
                 "BUFFER_READY slot %u size %" PRIu64 " is outside the pool "
                 "(%u slots of %" PRIu64 ")",
                 m.slot, m.valid_size, s->nslots, s->slot_size);
        protocol_error(s, why);
        return;
    }
    if (s->slot_held[m.slot]) {
        snprintf(why, sizeof why, "BUFFER_READY for slot %u, which the daemon still holds", m.slot);
        protocol_error(s, why);
        return;
    }
    s->slot_held[m.slot] = 1;
    s->nheld++;
    if (m.seq + 1 > s->seq_next)
        s->seq_next = m.seq + 1;
    s->buffers_received++;
    s->bytes_received += m.valid_size;
    /* A record is at least 8 bytes (its kind and 8-byte alignment). */
    s->records += claim(s, "BUFFER_READY records", m.records, m.valid_size / 8);
    s->dropped_records =
        sat_add(s->dropped_records, claim(s, "BUFFER_READY dropped", m.dropped, CLAIM_MAX));
    struct aw_item it = {.ready = m};
    int rc = enqueue(s, &it);
    if (rc < 0) {
        s->write_errors++;
        release_slot(s, &m, -rc);
    }
}

static void on_strings(struct session *s, const uint8_t *body, size_t len)
{
    struct cuptimon_strings_iter iter;
    uint64_t ptr;
    const char *str;
    size_t n;
    int rc = cuptimon__strings_iter_init(&iter, body, len);
    uint32_t count = 0;
    while (rc == 0 && (rc = cuptimon__strings_next(&iter, &ptr, &str, &n)) == 1) {
        char why[200];
        count++;
        rc = 0;
        /* Layout generations come only from LAYOUTS (checked and bounded). */
        if (CUPTIMON_RANGE_KEY_CLASS(ptr) == CUPTIMON_LAYOUTS_KEY_CLASS) {
            rc = -EPERM;
            break;
        }
        /* A record size the producer measured (session-layout.c): applied
         * before the buffers that follow this batch are walked. */
        if (CUPTIMON_RECORD_SIZE_KIND(ptr) >= 0 &&
            session_layout_string(s, ptr, str, n, why, sizeof why) < 0)
            protocol_error(s, why);
    }
    if (rc == -EPERM) {
        protocol_error(s, "STRINGS batch holds a layouts key, which only LAYOUTS may set "
                          "(ignored whole)");
        return;
    }
    if (rc < 0) {
        protocol_error(s, "STRINGS batch is malformed (ignored whole)");
        return;
    }
    struct aw_item it = {.is_strings = 1, .strings = malloc(len), .strings_len = len};
    if (!it.strings)
        return;
    memcpy(it.strings, body, len);
    s->strings_received += count;
    if (enqueue(s, &it) < 0)
        free(it.strings);
}

/* LAYOUTS (cuptimon-proto.h): the record layouts of the buffers from a
 * sequence number on.  Checked as a hello's are, archived in strings.bin
 * in order with the chunks (CUPTIMON_LAYOUTS_KEY), and used by the live
 * aggregates from those buffers on.  Past CUPTIMON_LAYOUT_GENERATIONS_MAX,
 * one more entry that describes nothing makes every later chunk of the
 * session undecodable rather than misread, and the rest are ignored. */
static void on_layouts(struct session *s, const uint8_t *body, size_t len)
{
    json_tokener *tok = json_tokener_new();
    json_object *o = tok ? json_tokener_parse_ex(tok, (const char *)body, (int)len) : NULL, *rl;
    int complete = tok && json_tokener_get_error(tok) == json_tokener_success &&
                   json_tokener_get_parse_end(tok) == len;
    struct cuptimon_buf b = {0};
    char why[200];
    json_tokener_free(tok);
    int64_t seq = cuptimon__json_integer(o, "seq", -1);
    if (!o || !complete || !json_object_is_type(o, json_type_object) || seq < 0 ||
        (uint64_t)seq >= CUPTIMON_LAYOUTS_SEQ_MAX ||
        !json_object_object_get_ex(o, "record_layouts", &rl) ||
        !json_object_is_type(rl, json_type_object)) {
        protocol_error(s, "LAYOUTS is not {\"seq\": N, \"record_layouts\": {...}} (ignored)");
        goto out;
    }
    if ((uint64_t)seq < s->seq_next) {
        snprintf(why, sizeof why,
                 "LAYOUTS for buffer %" PRId64 ", but buffer %" PRIu64 " came already (ignored)",
                 seq, s->seq_next - 1);
        protocol_error(s, why);
        goto out;
    }
    if (s->layout_gens > CUPTIMON_LAYOUT_GENERATIONS_MAX) {
        protocol_error(s, "LAYOUTS past the most a session may have (ignored)");
        goto out;
    }
    const char *text = s->layout_gens == CUPTIMON_LAYOUT_GENERATIONS_MAX
                           ? "{}"
                           : json_object_to_json_string_ext(rl, JSON_C_TO_STRING_PLAIN);
    size_t tlen = strlen(text);
    if (tlen > CUPTIMON_STRING_MAX_LEN) {
        protocol_error(s, "LAYOUTS describes more than a string entry holds (ignored)");
        goto out;
    }
    if (s->layout_gens == CUPTIMON_LAYOUT_GENERATIONS_MAX) {
        log_warn("session",
                 "session %" PRIu64 " (pid %d): its record layouts changed more than %u times; "
                 "its buffers from %" PRId64 " on are archived but not decoded",
                 s->id, (int)s->peer.pid, CUPTIMON_LAYOUT_GENERATIONS_MAX, seq);
    } else {
        /* Checked here too, for status and the log; the decoder checks the
         * archived copy again. */
        struct cuptimon_layout *l = malloc(sizeof(*l));
        json_object *m = json_object_new_object();
        if (l && m) {
            json_object_object_add(m, "record_layouts", json_object_get(rl));
            json_object_object_add(m, "user_defined_records", json_object_new_boolean(1));
            (void)cuptimon__layout_init_meta(l, s->cupti_version, NULL, m);
            s->kernel_record_bytes = kernel_bytes(l);
            if (s->d->agg)
                cuptimon__agg_session_path(s->d->agg, s->id, s->path, s->kernel_record_bytes);
            if (l->udr_error[0] != '\0' && !s->layouts_logged++)
                log_warn("session",
                         "session %" PRIu64 " (pid %d): its record layouts from buffer %" PRId64
                         " on are refused in part (%s): records of that kind are archived but "
                         "counted as undecodable, never misread",
                         s->id, (int)s->peer.pid, seq, l->udr_error);
        }
        free(l);
        json_object_put(m);
    }
    if (cuptimon__strings_begin(&b) < 0 ||
        cuptimon__strings_add(&b, CUPTIMON_LAYOUTS_KEY((uint64_t)seq), text, tlen) < 0) {
        cuptimon__buf_free(&b);
        goto out;
    }
    struct aw_item it = {.is_strings = 1, .is_layouts = 1, .strings = b.data, .strings_len = b.len};
    s->layout_gens++;
    if (enqueue(s, &it) < 0)
        cuptimon__buf_free(&b);
out:
    json_object_put(o);
}

/* A RANGES batch becomes string-table entries (CUPTIMON_RANGE_BEGIN_KEY /
 * _END_KEY, times mapped to Unix ns with the batch's clock pair, as a
 * chunk's records are with its own), archived in strings.bin with the
 * names: window traces and decode read them from there. */
static void on_ranges(struct session *s, const uint8_t *body, size_t len)
{
    struct cuptimon_ranges_hdr h;
    struct cuptimon_buf b = {0};
    if (cuptimon__ranges_parse(body, len, &h) < 0) {
        protocol_error(s, "RANGES batch is malformed (ignored whole)");
        return;
    }
    if (h.dropped) {
        if (s->ranges_dropped == 0)
            log_warn("session",
                     "session %" PRIu64 " (pid %d): the shim's annotation range queue "
                     "was full; %" PRIu32 " pushes/pops are missing from traces (counted)",
                     s->id, (int)s->peer.pid, h.dropped);
        s->ranges_dropped += h.dropped;
    }
    if (h.count == 0)
        return;
    struct cuptimon_clock clk = {.cupti_ts = h.cupti_ts, .unix_ns = h.realtime_ns};
    if (cuptimon__strings_begin(&b) < 0)
        return;
    for (uint32_t i = 0; i < h.count; i++) {
        struct cuptimon_range_ev r;
        char text[CUPTIMON_RANGE_TEXT_MAX];
        size_t n;
        cuptimon__range_get(body, i, &r);
        uint64_t t = cuptimon__clock_map(&clk, r.ts);
        if (r.what == CUPTIMON_RANGE_BEGIN) {
            struct cuptimon_range_begin rb = {
                .unix_ns = t, .tid = r.tid, .depth = r.depth, .parent = r.parent};
            n = cuptimon__range_begin_format(text, &rb);
            if (cuptimon__strings_add(&b, CUPTIMON_RANGE_BEGIN_KEY(r.id), text, n) < 0)
                break;
        } else {
            n = cuptimon__range_end_format(text, t);
            if (cuptimon__strings_add(&b, CUPTIMON_RANGE_END_KEY(r.id), text, n) < 0)
                break;
        }
    }
    s->ranges_received += h.count;
    struct aw_item it = {.is_strings = 1, .strings = b.data, .strings_len = b.len};
    if (enqueue(s, &it) < 0)
        cuptimon__buf_free(&b);
}

static void on_flush_done(struct session *s, const uint8_t *body, size_t len)
{
    struct cuptimon_flush_done f;
    if (cuptimon__flush_done_decode(body, len, &f) < 0) {
        protocol_error(s, "FLUSH_DONE with a bad body size");
        return;
    }
    s->last_flush_unix_ns = unix_ns_now();
    s->shim_lost = claim(s, "FLUSH_DONE buffers_lost", f.buffers_lost, CLAIM_MAX);
    s->shim_declined = claim(s, "FLUSH_DONE requests_declined", f.requests_declined, CLAIM_MAX);
    s->shim_foreign = claim(s, "FLUSH_DONE foreign_buffers", f.foreign_buffers, CLAIM_MAX);
    if ((f.flags & CUPTIMON_SHIM_CUPTI_TAKEN) && !s->cupti_taken)
        log_warn("session",
                 "session %" PRIu64 " (pid %d): another CUPTI client took the activity "
                 "callbacks; the process is no longer traced (preload the shim to share CUPTI)",
                 s->id, (int)s->peer.pid);
    else if (!(f.flags & CUPTIMON_SHIM_CUPTI_TAKEN) && s->cupti_taken)
        log_info("session",
                 "session %" PRIu64 " (pid %d): the shim has CUPTI back; the process "
                 "is traced again",
                 s->id, (int)s->peer.pid);
    s->cupti_taken = (f.flags & CUPTIMON_SHIM_CUPTI_TAKEN) != 0;
    agg_counters(s);
    flush_progress(s->d, s, f.flush_id, 0, (f.flags & CUPTIMON_SHIM_FENCE_PENDING) != 0);
}

/* The shim's last totals (optional body): drops CUPTI counted after its
 * last completed buffer would otherwise never be reported. */
static void on_bye(struct session *s, const uint8_t *body, size_t len)
{
    if (len == 0)
        return;
    json_tokener *tok = json_tokener_new();
    json_object *o = json_tokener_parse_ex(tok, (const char *)body, (int)len);
    json_tokener_free(tok);
    if (!o || !json_object_is_type(o, json_type_object)) {
        protocol_error(s, "BYE with a body that is not a JSON object (ignored)");
        json_object_put(o);
        return;
    }
    int64_t v;
    if ((v = cuptimon__json_integer(o, "dropped_records", -1)) > 0)
        s->dropped_records =
            sat_add(s->dropped_records, claim(s, "BYE dropped_records", (uint64_t)v, CLAIM_MAX));
    if ((v = cuptimon__json_integer(o, "requests_declined", -1)) >= 0)
        s->shim_declined = claim(s, "BYE requests_declined", (uint64_t)v, CLAIM_MAX);
    if ((v = cuptimon__json_integer(o, "buffers_lost", -1)) >= 0)
        s->shim_lost = claim(s, "BYE buffers_lost", (uint64_t)v, CLAIM_MAX);
    /* Nanoseconds: an hour is past any completion callback's. */
    const uint64_t hour_ns = 3600ull * 1000000000;
    if ((v = cuptimon__json_integer(o, "completion_p99_ns_max", 0)) > 0)
        s->completion_p99_ns = claim(s, "BYE completion_p99_ns_max", (uint64_t)v, hour_ns);
    if ((v = cuptimon__json_integer(o, "completion_longest_ns", 0)) > 0)
        s->completion_longest_ns = claim(s, "BYE completion_longest_ns", (uint64_t)v, hour_ns);
    if ((v = cuptimon__json_integer(o, "exit_running_buffers", 0)) > 0) {
        s->exit_running_buffers = claim(s, "BYE exit_running_buffers", (uint64_t)v, s->nslots);
        log_warn("session",
                 "session %" PRIu64 " (pid %d): %" PRIu64 " buffer(s) held work still running "
                 "when the process ended; CUPTI handed their records over without times",
                 s->id, (int)s->peer.pid, s->exit_running_buffers);
    }
    json_object_put(o);
}

static void on_msg(struct conn *c, const struct cuptimon_msg_hdr *h, const uint8_t *body, int fd)
{
    struct session *s = c->owner;
    if (s->refused_gone) {
        if (fd >= 0)
            close(fd);
        refused_count(s, h, body);
        return;
    }
    if (!s->hello && h->type != CUPTIMON_MSG_HELLO) {
        if (fd >= 0)
            close(fd);
        conn_send_error(c, "EPROTO", "the first message must be HELLO, not %s",
                        cuptimon__type_name(h->type));
        conn_close(c);
        return;
    }
    if (fd >= 0 && h->type != CUPTIMON_MSG_HELLO) {
        close(fd);
        protocol_error(s, "an fd arrived with a message other than HELLO; closed it");
    }
    switch (h->type) {
    case CUPTIMON_MSG_HELLO:
        if (s->hello) {
            if (fd >= 0)
                close(fd);
            protocol_error(s, "a second HELLO (ignored)");
            return;
        }
        on_hello(s, body, h->length, fd);
        break;
    case CUPTIMON_MSG_BUFFER_READY: on_buffer_ready(s, body, h->length); break;
    case CUPTIMON_MSG_STRINGS: on_strings(s, body, h->length); break;
    case CUPTIMON_MSG_RANGES: on_ranges(s, body, h->length); break;
    case CUPTIMON_MSG_LAYOUTS: on_layouts(s, body, h->length); break;
    case CUPTIMON_MSG_FLUSH_DONE: on_flush_done(s, body, h->length); break;
    case CUPTIMON_MSG_BYE: on_bye(s, body, h->length); break;
    case CUPTIMON_MSG_HELD: {
        char why[200];
        if (session_held_msg(s, body, h->length, why, sizeof why) < 0)
            protocol_error(s, why);
        break;
    }
    default: {
        char why[100];
        snprintf(why, sizeof why, "unexpected message %s (0x%04x) ignored",
                 cuptimon__type_name(h->type), h->type);
        protocol_error(s, why);
        break;
    }
    }
}

/* ---- lifetime ----------------------------------------------------------- */

static void on_timer_closed(uv_handle_t *h)
{
    struct session *s = h->data;
    s->timer_closed = 1;
    session_maybe_free(s);
}

static void on_conn_close(struct conn *c)
{
    struct session *s = c->owner;
    s->conn = NULL;
    s->disconnected_unix_ns = unix_ns_now();
    if (s->refused_gone && s->buffers_received) {
        log_warn("session",
                 "refused producer pid %d uid %u had ended: the %" PRIu64 " records (%" PRIu64
                 " buffers) it had announced are lost, counted in status (losses)",
                 (int)s->peer.pid, (unsigned)s->peer.uid, s->records, s->buffers_received);
        lossreport_refused_lost(s->d, s->peer.uid, s->records, s->buffers_received,
                                s->dropped_records);
    }
    if (s->hello)
        log_info("session",
                 "session %" PRIu64 " (pid %d) ended: %" PRIu64 " buffers, %" PRIu64
                 " records, %" PRIu64 " dropped by CUPTI, %" PRIu64 " write errors",
                 s->id, (int)s->peer.pid, s->buffers_received, s->records, s->dropped_records,
                 s->write_errors);
    uv_timer_stop(&s->flush_timer);
    if (!uv_is_closing((uv_handle_t *)&s->flush_timer))
        uv_close((uv_handle_t *)&s->flush_timer, on_timer_closed);
    flush_progress(s->d, s, 0, 1, 0);
    window_session_gone(s->d, s);
    /* Buffers already announced are still archived: the mapping outlives
     * the producer.  The session is freed once its queue is written. */
    session_maybe_free(s);
}

static void session_maybe_free(struct session *s)
{
    if (s->conn || !s->timer_closed || s->working || s->qlen)
        return;
    struct daemon *d = s->d;
    for (struct session **pp = &d->sessions; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    if (s->aw) {
        char *meta = meta_json(s);
        if (meta)
            cuptimon__aw_meta(s->aw, meta);
        free(meta);
        cuptimon__aw_close(s->aw);
    }
    if (s->archive_dir[0])
        cuptimon__live_set_remove(&d->live, s->archive_dir + strlen(d->archive_root) + 1);
    if (s->pool_fd >= 0)
        close(s->pool_fd);
    /* Shown as ended for a while (a short job is seen by top and by a
     * scrape), then dropped by the aggregate itself. */
    if (d->agg)
        cuptimon__agg_end(d->agg, s->id);
    cuptimon__strtab_free(s->names);
    session_held_free(s);
    json_object_put(s->hello);
    free(s->slot_held);
    free(s->queue);
    free(s->work_items);
    free(s->work_meta);
    free(s);
}

/* Closes a connection that has sent no hello in ms, saying so once per
 * thousand; why is "" or what the room is for. */
static void close_silent(struct session *s, int ms, const char *why)
{
    struct daemon *d = s->d;
    if (s->refused_gone) { /* refused and counted, not silent: done reading */
        conn_close(s->conn);
        return;
    }
    if (d->silent_closed++ % 1000 == 0)
        log_warn("session",
                 "closed a connection from pid %d uid %u that sent no hello in %d ms%s "
                 "(%" PRIu64 " so far)",
                 (int)s->peer.pid, (unsigned)s->peer.uid, ms, why, d->silent_closed);
    conn_close(s->conn);
}

static void on_hello_timeout(uv_timer_t *t)
{
    struct session *s = t->data;
    if (s->hello || !s->conn)
        return;
    close_silent(s, HELLO_TIMEOUT_MS, "");
}

int session_make_room(struct daemon *d, const struct session *keep)
{
    int made = 0;
    while (made < 8 && session_evict_silent_except(d, keep))
        made++;
    return made;
}

static int session_evict_silent_except(struct daemon *d, const struct session *keep)
{
    /* The list is newest first: the last match is the oldest. */
    struct session *oldest = NULL;
    int64_t cutoff = unix_ns_now() - (int64_t)EVICT_MIN_AGE_MS * 1000000;
    for (struct session *s = d->sessions; s; s = s->next)
        if (s != keep && s->conn && !s->hello && s->connected_unix_ns <= cutoff)
            oldest = s;
    if (!oldest)
        return 0;
    close_silent(oldest, EVICT_MIN_AGE_MS, ", out of descriptors: to make room for a new one");
    return 1;
}

static void on_flush_timer(uv_timer_t *t)
{
    struct session *s = t->data;
    session_request_flush(s, 0, CUPTIMON_FLUSH_PLAIN, 0);
    /* Work that holds the records of a process that stopped reporting
     * still ages into its warning. */
    session_held_check(s);
}

void session_request_flush(struct session *s, uint64_t flush_id, int mode, uint32_t fence)
{
    if (!s->conn || !s->hello)
        return;
    if (mode == CUPTIMON_FLUSH_FENCE && !s->fence)
        mode = CUPTIMON_FLUSH_PLAIN; /* an older shim: what it has complete now */
    struct cuptimon_flush f = {.flush_id = flush_id, .mode = (uint32_t)mode, .fence = fence};
    uint8_t body[CUPTIMON_FLUSH_SIZE];
    cuptimon__flush_encode(body, &f);
    conn_send(s->conn, CUPTIMON_MSG_FLUSH, body, sizeof body);
}

/* conn.c asks before each message: a BUFFER_READY waits (the connection
 * is not read) while the daemon holds as many of the producer's buffers as
 * it takes at once (take_slots). */
static int may_take(struct conn *c, const struct cuptimon_msg_hdr *h)
{
    struct session *s = c->owner;
    if (h->type != CUPTIMON_MSG_BUFFER_READY || !s->hello || s->refused_gone ||
        s->nheld < s->take_slots)
        return 1;
    s->reads_paused++;
    return 0;
}

void session_accept(struct daemon *d, int fd)
{
    struct session *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return;
    }
    s->d = d;
    s->pool_fd = -1;
    s->id = ++d->next_session_id;
    s->connected_unix_ns = unix_ns_now();
    if (cuptimon__peer_cred(fd, &s->peer) < 0) {
        log_warn("session", "cannot read peer credentials (%s); refusing", strerror(errno));
        close(fd);
        free(s);
        return;
    }
    s->conn = conn_new(d, fd, on_msg, on_conn_close, s);
    if (!s->conn) {
        close(fd);
        free(s);
        return;
    }
    s->conn->peer = s->peer;
    s->conn->accept_fd = 1;
    s->conn->may_take = may_take;
    uv_timer_init(d->loop, &s->flush_timer);
    s->flush_timer.data = s;
    /* A connection that does not say hello soon is closed: idle ones must
     * not hold the daemon's descriptors (anyone may connect). */
    uv_timer_start(&s->flush_timer, on_hello_timeout, HELLO_TIMEOUT_MS, 0);
    s->next = d->sessions;
    d->sessions = s;
    d->sessions_total++;
}

void session_close_all(struct daemon *d)
{
    for (struct session *s = d->sessions, *next; s; s = next) {
        next = s->next;
        if (s->conn)
            conn_close(s->conn);
    }
}

json_object *session_status(const struct session *s)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "session", json_object_new_int64((int64_t)s->id));
    json_object_object_add(o, "pid", json_object_new_int64(s->peer.pid));
    json_object_object_add(o, "uid", json_object_new_int64(s->peer.uid));
    json_object_object_add(o, "connected", json_object_new_boolean(s->conn != NULL));
    json_object_object_add(o, "hostname", json_object_new_string(s->hostname));
    json_object_object_add(o, "exe", json_object_new_string(s->exe));
    json_object_object_add(o, "label", json_object_new_string(s->label));
    json_object *job;
    if (s->hello && json_object_object_get_ex(s->hello, "job", &job))
        json_object_object_add(o, "job", json_object_get(job));
    json_object_object_add(o, "cupti_version", json_object_new_int64(s->cupti_version));
    /* The CUDA release whose record layouts decode this session, or
     * "unknown": then its buffers are archived but not decoded. */
    json_object_object_add(o, "cupti_release",
                           json_object_new_string(s->layout.release ? s->layout.release->cuda
                                                  : strcmp(s->path, "v2+udr") == 0
                                                      ? "unknown (self-described)"
                                                      : "unknown"));
    /* CUPTI's activity API the shim uses ("v1", or "v2+udr": its own
     * subscriber with user-defined records), the bytes of one kernel
     * record in it, and how often its layouts changed (LAYOUTS). */
    json_object_object_add(o, "path", json_object_new_string(s->path[0] ? s->path : "v1"));
    json_object_object_add(o, "record_bytes_per_kernel",
                           json_object_new_int64((int64_t)s->kernel_record_bytes));
    json_object_object_add(o, "layout_changes", json_object_new_int64((int64_t)s->layout_gens));
    /* Why a shim that could have used the v2 path did not, and its v2
     * opt-ins (the hello says). */
    static const char *const from_hello[] = {"activity_api_note", "kernel_latency", "hes"};
    for (size_t i = 0; s->hello && i < sizeof from_hello / sizeof from_hello[0]; i++) {
        json_object *v;
        if (json_object_object_get_ex(s->hello, from_hello[i], &v))
            json_object_object_add(o, from_hello[i], json_object_get(v));
    }
    json_object_object_add(o, "buffers_received",
                           json_object_new_int64((int64_t)s->buffers_received));
    /* Buffers that lay over pages punched out of the pool: the producer
     * is broken or hostile (never 0 after one). */
    json_object_object_add(o, "pool_holes",
                           json_object_new_int64((int64_t)atomic_load(&s->pool_holes)));
    json_object_object_add(o, "bytes_received", json_object_new_int64((int64_t)s->bytes_received));
    json_object_object_add(o, "records", json_object_new_int64((int64_t)s->records));
    json_object_object_add(o, "chunks_written", json_object_new_int64((int64_t)s->chunks_written));
    json_object_object_add(o, "bytes_archived", json_object_new_int64((int64_t)s->bytes_archived));
    json_object_object_add(o, "bytes_stored", json_object_new_int64((int64_t)s->bytes_stored));
    json_object_object_add(o, "dropped_records",
                           json_object_new_int64((int64_t)s->dropped_records));
    /* Lost: reclaimed by the shim when a daemon went away, or not written. */
    json_object_object_add(o, "lost_buffers",
                           json_object_new_int64((int64_t)(s->shim_lost + s->write_errors)));
    json_object_object_add(o, "write_errors", json_object_new_int64((int64_t)s->write_errors));
    json_object_object_add(o, "requests_declined",
                           json_object_new_int64((int64_t)s->shim_declined));
    json_object_object_add(o, "foreign_buffers", json_object_new_int64((int64_t)s->shim_foreign));
    /* Work still running when the process ended, past its exit bound: its
     * records came without times (the shim's BYE). */
    json_object_object_add(o, "exit_incomplete_buffers",
                           json_object_new_int64((int64_t)s->exit_running_buffers));
    json_object_object_add(
        o, "cupti", json_object_new_string(s->cupti_taken ? "taken by another tool" : "ours"));
    json_object_object_add(o, "protocol_errors",
                           json_object_new_int64((int64_t)s->protocol_errors));
    json_object_object_add(o, "strings", json_object_new_int64((int64_t)s->strings_received));
    json_object_object_add(o, "annotation_ranges",
                           json_object_new_int64((int64_t)s->ranges_received));
    json_object_object_add(o, "annotation_ranges_dropped",
                           json_object_new_int64((int64_t)s->ranges_dropped));
    json_object_object_add(o, "queued", json_object_new_int64((int64_t)(s->qlen + s->work_len)));
    /* Times the daemon stopped reading the producer while it held as many
     * of its buffers as it takes at once (max_pool_bytes; a shim that
     * keeps to the HELLO_ACK's pool_slots never makes it). */
    json_object_object_add(o, "reads_paused", json_object_new_int64((int64_t)s->reads_paused));
    json_object_object_add(o, "connected_unix_ns", json_object_new_int64(s->connected_unix_ns));
    json_object_object_add(o, "last_flush_unix_ns", json_object_new_int64(s->last_flush_unix_ns));
    json_object_object_add(o, "archive", json_object_new_string(s->archive_dir));
    session_layout_status(s, o);
    session_held_status(s, o);
    /* NCCL (issue 46): whose profiler plugin the job runs (its hello), and
     * the communicators the aggregates know from its records. */
    json_object *nc = json_object_new_object(), *hn = NULL;
    if (s->hello && json_object_object_get_ex(s->hello, "nccl", &hn) &&
        json_object_is_type(hn, json_type_object)) {
        json_object *v;
        if (json_object_object_get_ex(hn, "plugin", &v) && json_object_is_type(v, json_type_string))
            json_object_object_add(nc, "plugin", json_object_new_string(json_object_get_string(v)));
        if (json_object_object_get_ex(hn, "user_plugin", &v) &&
            json_object_is_type(v, json_type_string))
            json_object_object_add(nc, "user_plugin",
                                   json_object_new_string(json_object_get_string(v)));
    }
    json_object *comms = s->d->agg ? cuptimon__agg_nccl_json(s->d->agg, s->id) : NULL;
    if (comms)
        json_object_object_add(nc, "communicators", comms);
    json_object_object_add(o, "nccl", nc);
    return o;
}
