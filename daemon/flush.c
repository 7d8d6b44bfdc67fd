/*
 * The flush barrier: asks a set of sessions (every one, or those listed) to
 * hand over their CUPTI buffers now, and calls back once each of them has
 * answered with FLUSH_DONE and what it sent up to then is written to the
 * archive, or once the timeout passed (the sessions still missing are then
 * "late"; those that disconnected meanwhile are "gone").  cuptimonctl
 * flush, the windows' start and end, and the daemon's stop all wait on it;
 * session.c reports each session's progress through flush_progress().
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "daemon.h"

enum {
    FW_WAIT_DONE,
    FW_WAIT_WRITES,
    FW_COMPLETE,
    FW_GONE
};

struct fw_entry {
    uint64_t session;
    pid_t pid;
    int state;
    uint64_t target;
};

struct flush_wait {
    struct daemon *d;
    uint64_t id;
    int forced;
    struct fw_entry *e;
    size_t n, pending;
    uv_timer_t timer;
    flush_all_cb cb;
    void *ud;
    int64_t started_ns;
    int finished;
    struct flush_wait *next;
};

/* Barrier ids are daemon-wide and start at 1 (a session's periodic flush
 * sends 0), so that a FLUSH_DONE names the one barrier it answers. */
static uint64_t flush_ids;

static void fw_timer_closed(uv_handle_t *h)
{
    struct flush_wait *w = h->data;
    free(w->e);
    free(w);
}

static void fw_finish(struct flush_wait *w)
{
    if (w->finished)
        return;
    w->finished = 1;
    struct daemon *d = w->d;
    for (struct flush_wait **pp = &d->flush_waits; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    json_object *r = json_object_new_object(), *late = json_object_new_array(),
                *gone = json_object_new_array();
    size_t completed = 0;
    for (size_t i = 0; i < w->n; i++) {
        if (w->e[i].state == FW_COMPLETE)
            completed++;
        else if (w->e[i].state == FW_GONE)
            json_object_array_add(gone, json_object_new_int64(w->e[i].pid));
        else
            json_object_array_add(late, json_object_new_int64(w->e[i].pid));
    }
    json_object_object_add(r, "flush_id", json_object_new_int64((int64_t)w->id));
    json_object_object_add(r, "forced", json_object_new_boolean(w->forced));
    json_object_object_add(r, "sessions", json_object_new_int64((int64_t)w->n));
    json_object_object_add(r, "completed", json_object_new_int64((int64_t)completed));
    json_object_object_add(r, "late", late);
    json_object_object_add(r, "gone", gone);
    json_object_object_add(r, "elapsed_ms",
                           json_object_new_double((double)(unix_ns_now() - w->started_ns) / 1e6));
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, fw_timer_closed);
    w->cb(d, w->ud, r);
    json_object_put(r);
}

static void fw_timeout(uv_timer_t *t)
{
    fw_finish(t->data);
}

static void fw_check(struct flush_wait *w, struct session *s, uint64_t flush_id, int gone)
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

void flush_progress(struct daemon *d, struct session *s, uint64_t flush_id, int gone)
{
    for (struct flush_wait *w = d->flush_waits, *next; w; w = next) {
        next = w->next;
        fw_check(w, s, flush_id, gone);
        if (w->pending == 0)
            fw_finish(w);
    }
}

int flush_all(struct daemon *d, int forced, double timeout_s, flush_all_cb cb, void *ud)
{
    return flush_some(d, forced, timeout_s, NULL, 0, cb, ud);
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

int flush_some(struct daemon *d, int forced, double timeout_s, const uint64_t *ids, size_t nids,
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
    w->forced = forced;
    w->cb = cb;
    w->ud = ud;
    w->started_ns = unix_ns_now();
    uv_timer_init(d->loop, &w->timer);
    w->timer.data = w;
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
            session_request_flush(s, w->id, forced);
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
