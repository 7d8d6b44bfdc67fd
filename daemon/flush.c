/*
 * The flush barrier: asks a set of sessions (every one, or those listed) to
 * hand over their CUPTI buffers now, and calls back once each of them has
 * answered with FLUSH_DONE and what it sent up to then is written to the
 * archive, or once the timeout passed (the sessions still missing are then
 * "late"; those that disconnected meanwhile are "gone").  cuptimonctl
 * flush, the windows' start and end, and the daemon's stop all wait on it;
 * session.c reports each session's progress through flush_progress().
 *
 * A fence barrier (FLUSH_FENCE) waits for more: until every buffer CUPTI
 * was given before the barrier began is back in each session, i.e. until
 * the records of all work launched before it, including work still running
 * then, are archived.  CUPTI never hands over a record of running work
 * except incomplete, at a forced flush, losing its completion
 * (docs/gpu-runs/20261204-h200-probe), so the daemon never forces it: it
 * repeats plain fence flushes, 10 ms apart and backing off to 200 ms, while
 * a shim answers "pending", until none does or the timeout passes.  A
 * session still pending then is "running" (its late records still reach
 * the archive, once, when its work ends); one that never answered is
 * "late".
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "daemon.h"

enum {
    FW_WAIT_DONE,
    FW_FENCE_AGAIN, /* the shim said its fence is pending: ask again at the retry */
    FW_WAIT_WRITES,
    FW_COMPLETE,
    FW_GONE
};

#define FENCE_RETRY_MIN_MS 10
#define FENCE_RETRY_MAX_MS 200

struct fw_entry {
    uint64_t session;
    pid_t pid;
    int state;
    int answered; /* a FLUSH_DONE came (then still pending: running work) */
    int taken;    /* another CUPTI client holds the process's buffers */
    uint64_t target;
};

struct flush_wait {
    struct daemon *d;
    uint64_t id;
    int mode;       /* CUPTIMON_FLUSH_* */
    uint32_t fence; /* the fence number (mode FENCE) */
    struct fw_entry *e;
    size_t n, pending;
    uv_timer_t timer, retry;
    int retry_on;
    uint64_t retry_ms;
    uint64_t fence_flushes; /* fence flushes sent after the first */
    flush_all_cb cb;
    void *ud;
    int64_t started_ns;
    int finished;
    struct flush_wait *next;
};

/* Barrier ids are daemon-wide and start at 1 (a session's periodic flush
 * sends 0), so that a FLUSH_DONE names the one barrier it answers.  Fence
 * numbers too: a shim takes a new number for a new fence. */
static uint64_t flush_ids;
static uint32_t fence_numbers;

/* Both timers share the barrier; it is freed when the second has closed. */
static void fw_timer_closed(uv_handle_t *h)
{
    struct flush_wait *w = h->data;
    if (++w->finished < 3)
        return;
    free(w->e);
    free(w);
}

static struct session *find_session(struct daemon *d, uint64_t id);

/* What s's CUPTI holds behind running work now, as status shows it (its
 * in_flight object, taken from session_held_status), or NULL: nothing. */
static json_object *held_behind(const struct session *s)
{
    json_object *st = json_object_new_object(), *f = NULL;
    if (!st)
        return NULL;
    session_held_status(s, st);
    if (json_object_object_get_ex(st, "in_flight", &f))
        json_object_get(f);
    json_object_put(st);
    return f;
}

static void fw_finish(struct flush_wait *w)
{
    if (w->finished)
        return;
    w->finished = 1; /* then 2 and 3 as the timers close */
    struct daemon *d = w->d;
    for (struct flush_wait **pp = &d->flush_waits; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    json_object *r = json_object_new_object(), *late = json_object_new_array(),
                *gone = json_object_new_array(), *running = json_object_new_array(),
                *taken = json_object_new_array(), *held = json_object_new_array();
    size_t completed = 0;
    for (size_t i = 0; i < w->n; i++) {
        const struct fw_entry *e = &w->e[i];
        json_object *pid = json_object_new_int64(e->pid);
        /* Held records matter to a plain flush that completed (it handed
         * over the rest), and to a fence's session still running at the
         * timeout; a fence that completed had everything launched before
         * it, whatever runs now. */
        int run = e->state != FW_COMPLETE && e->state != FW_GONE && e->answered &&
                  e->state != FW_WAIT_WRITES;
        int ask = w->mode == CUPTIMON_FLUSH_FENCE ? run : e->state == FW_COMPLETE;
        struct session *s = ask ? find_session(d, e->session) : NULL;
        json_object *f = s ? held_behind(s) : NULL;
        if (f) {
            json_object_object_add(f, "pid", json_object_new_int64(e->pid));
            json_object_object_add(f, "session", json_object_new_int64((int64_t)e->session));
            json_object_array_add(held, f);
        }
        if (e->state == FW_COMPLETE) {
            completed++;
            if (e->taken)
                json_object_array_add(taken, json_object_get(pid));
            json_object_put(pid);
        } else if (e->state == FW_GONE)
            json_object_array_add(gone, pid);
        else if (run)
            json_object_array_add(running, pid);
        else
            json_object_array_add(late, pid);
    }
    json_object_object_add(r, "flush_id", json_object_new_int64((int64_t)w->id));
    json_object_object_add(r, "fence", json_object_new_boolean(w->mode == CUPTIMON_FLUSH_FENCE));
    json_object_object_add(r, "sessions", json_object_new_int64((int64_t)w->n));
    json_object_object_add(r, "completed", json_object_new_int64((int64_t)completed));
    json_object_object_add(r, "late", late);
    json_object_object_add(r, "gone", gone);
    /* Still running work launched before a fence barrier when it ended:
     * those records reach the archive when the work ends, not before. */
    json_object_object_add(r, "running", running);
    /* Another CUPTI client holds their buffers: nothing to wait for. */
    json_object_object_add(r, "cupti_taken", taken);
    /* What the flush could not hand over: per session whose CUPTI holds
     * records behind running work, that work and what waits behind it
     * (status's in_flight, with pid and session).  A plain flush answers
     * without them; those records reach the archive when the work ends. */
    json_object_object_add(r, "held", held);
    json_object_object_add(r, "fence_flushes", json_object_new_int64((int64_t)w->fence_flushes));
    json_object_object_add(r, "elapsed_ms",
                           json_object_new_double((double)(unix_ns_now() - w->started_ns) / 1e6));
    uv_timer_stop(&w->timer);
    uv_timer_stop(&w->retry);
    uv_close((uv_handle_t *)&w->timer, fw_timer_closed);
    uv_close((uv_handle_t *)&w->retry, fw_timer_closed);
    w->cb(d, w->ud, r);
    json_object_put(r);
}

static void fw_timeout(uv_timer_t *t)
{
    fw_finish(t->data);
}

static void fw_retry(uv_timer_t *t);

/* Asks the sessions whose fence was pending again, later: 10 ms at first,
 * twice as long each time up to 200 ms, so that the job's buffers are not
 * closed at a high rate while its work runs. */
static void fw_retry_arm(struct flush_wait *w)
{
    if (w->retry_on || w->finished)
        return;
    w->retry_on = 1;
    uv_timer_start(&w->retry, fw_retry, w->retry_ms, 0);
    w->retry_ms = w->retry_ms * 2 > FENCE_RETRY_MAX_MS ? FENCE_RETRY_MAX_MS : w->retry_ms * 2;
}

static struct session *find_session(struct daemon *d, uint64_t id)
{
    for (struct session *s = d->sessions; s; s = s->next)
        if (s->id == id)
            return s;
    return NULL;
}

static void fw_retry(uv_timer_t *t)
{
    struct flush_wait *w = t->data;
    w->retry_on = 0;
    for (size_t i = 0; i < w->n; i++) {
        struct fw_entry *e = &w->e[i];
        struct session *s;
        if (e->state != FW_FENCE_AGAIN || !(s = find_session(w->d, e->session)))
            continue;
        e->state = FW_WAIT_DONE;
        w->fence_flushes++;
        session_request_flush(s, w->id, CUPTIMON_FLUSH_FENCE, w->fence);
    }
}

static void fw_check(struct flush_wait *w, struct session *s, uint64_t flush_id, int gone,
                     int fence_pending)
{
    for (size_t i = 0; i < w->n; i++) {
        struct fw_entry *e = &w->e[i];
        if (e->session != s->id || e->state == FW_COMPLETE || e->state == FW_GONE)
            continue;
        if (gone) {
            e->state = FW_GONE;
            w->pending--;
            continue;
        }
        if (e->state == FW_WAIT_DONE && flush_id == w->id) {
            e->answered = 1;
            e->taken = s->cupti_taken;
            if (w->mode == CUPTIMON_FLUSH_FENCE && fence_pending && !s->cupti_taken) {
                e->state = FW_FENCE_AGAIN;
                fw_retry_arm(w);
                continue;
            }
            /* Everything that flush produced arrived before FLUSH_DONE; it
             * is done when what was queued by now is written. */
            e->state = FW_WAIT_WRITES;
            e->target = s->items_queued;
        }
        if (e->state == FW_WAIT_WRITES && s->items_done >= e->target) {
            e->state = FW_COMPLETE;
            w->pending--;
        }
    }
}

void flush_progress(struct daemon *d, struct session *s, uint64_t flush_id, int gone,
                    int fence_pending)
{
    for (struct flush_wait *w = d->flush_waits, *next; w; w = next) {
        next = w->next;
        fw_check(w, s, flush_id, gone, fence_pending);
        if (w->pending == 0)
            fw_finish(w);
    }
}

int flush_all(struct daemon *d, int mode, double timeout_s, flush_all_cb cb, void *ud)
{
    return flush_some(d, mode, timeout_s, NULL, 0, cb, ud);
}

static int selected(const uint64_t *ids, size_t n, uint64_t id)
{
    if (!ids)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

int flush_some(struct daemon *d, int mode, double timeout_s, const uint64_t *ids, size_t nids,
               flush_all_cb cb, void *ud)
{
    struct flush_wait *w = calloc(1, sizeof *w);
    size_t n = session_count(d);
    if (!w)
        return -ENOMEM;
    w->e = calloc(n ? n : 1, sizeof *w->e);
    if (!w->e) {
        free(w);
        return -ENOMEM;
    }
    w->d = d;
    w->id = ++flush_ids;
    w->mode = mode;
    if (mode == CUPTIMON_FLUSH_FENCE && ++fence_numbers == 0)
        ++fence_numbers; /* 0 is no fence */
    w->fence = mode == CUPTIMON_FLUSH_FENCE ? fence_numbers : 0;
    w->retry_ms = FENCE_RETRY_MIN_MS;
    w->cb = cb;
    w->ud = ud;
    w->started_ns = unix_ns_now();
    uv_timer_init(d->loop, &w->timer);
    uv_timer_init(d->loop, &w->retry);
    w->timer.data = w;
    w->retry.data = w;
    w->next = d->flush_waits;
    d->flush_waits = w;
    for (struct session *s = d->sessions; s; s = s->next) {
        if (!s->conn || !s->hello || !selected(ids, nids, s->id))
            continue;
        w->e[w->n++] = (struct fw_entry){.session = s->id, .pid = s->peer.pid};
        w->pending++;
    }
    for (struct session *s = d->sessions; s; s = s->next)
        if (s->conn && s->hello && selected(ids, nids, s->id))
            session_request_flush(s, w->id, mode, w->fence);
    if (w->pending == 0)
        fw_finish(w);
    else
        uv_timer_start(&w->timer, fw_timeout, (uint64_t)(timeout_s * 1000), 0);
    return 0;
}

void flush_shutdown(struct daemon *d)
{
    while (d->flush_waits)
        fw_finish(d->flush_waits);
}
