/* Connections: framed messages over a Unix stream socket, read with
 * recvmsg from a uv_poll_t so that fd passing stays under our control. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"

#define CONN_OUT_MAX (16u << 20)

static void conn_update(struct conn *c);

static void on_poll_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    if (c->pending_fd >= 0)
        close(c->pending_fd);
    close(c->fd);
    cuptimon__buf_free(&c->in);
    cuptimon__buf_free(&c->out);
    free(c);
}

void conn_close(struct conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    if (c->on_close)
        c->on_close(c);
    uv_poll_stop(&c->poll);
    uv_close((uv_handle_t *)&c->poll, on_poll_closed);
}

static int try_write(struct conn *c)
{
    while (c->out.len) {
        ssize_t n = send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n < 0)
            return -errno;
        cuptimon__buf_consume(&c->out, (size_t)n);
    }
    return 0;
}

static void dispatch(struct conn *c)
{
    size_t off = 0;
    while (!c->closing) {
        struct cuptimon_msg_hdr h;
        int rc = cuptimon__frame_parse(c->in.data + off, c->in.len - off, &h);
        if (rc == -EAGAIN)
            break;
        if (rc < 0) {
            if (rc == -EPROTO)
                conn_send_error(c, "EPROTO",
                                "protocol version %u is not supported; this daemon speaks %u",
                                h.version, CUPTIMON_PROTO_VERSION);
            else
                conn_send_error(c, rc == -EMSGSIZE ? "EMSGSIZE" : "EBADMSG",
                                "bad message header (%s)", strerror(-rc));
            log_warn("conn", "pid %d uid %u: %s; closing", (int)c->peer.pid, (unsigned)c->peer.uid,
                     strerror(-rc));
            try_write(c);
            conn_close(c);
            return;
        }
        if (c->may_take && !c->may_take(c, &h)) {
            c->paused = 1;
            break;
        }
        int fd = c->pending_fd;
        c->pending_fd = -1;
        c->on_msg(c, &h, c->in.data + off + CUPTIMON_MSG_HDR_SIZE, fd);
        off += CUPTIMON_MSG_HDR_SIZE + h.length;
    }
    if (!c->closing)
        cuptimon__buf_consume(&c->in, off);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    struct conn *c = p->data;
    if (status < 0) {
        /* Read what the peer sent before it went away (its last buffers
         * are in our mapping); the read then ends the connection. */
        c->write_dead = 1;
        c->out.len = 0;
        events = UV_READABLE;
        /* libuv stopped the handle before calling us: make conn_update()
         * start it again, or the connection would never see its EOF. */
        c->watching = 0;
    }
    if ((events & UV_WRITABLE) && !c->write_dead) {
        if (try_write(c) < 0) {
            c->write_dead = 1;
            c->out.len = 0;
        }
    }
    if ((events & (UV_READABLE | UV_DISCONNECT)) && !c->paused) {
        for (int round = 0; round < 16 && !c->closing && !c->paused; round++) {
            if (cuptimon__buf_reserve(&c->in, 65536) < 0) {
                conn_close(c);
                return;
            }
            int fd = -1, extra = 0;
            ssize_t n = cuptimon__recv_fd(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len,
                                          c->accept_fd ? &fd : NULL, &extra);
            if (extra)
                log_warn("conn", "pid %d sent %d unexpected file descriptor(s); closed them",
                         (int)c->peer.pid, extra);
            if (fd >= 0) {
                if (c->pending_fd >= 0)
                    close(c->pending_fd);
                c->pending_fd = fd;
            } else if (fd == -EMFILE) {
                c->fd_lost = 1; /* the hello says so, not "carried no fd" */
            }
            if (n == -EAGAIN)
                break;
            if (n <= 0) {
                conn_close(c);
                return;
            }
            c->in.len += (size_t)n;
            dispatch(c);
            if ((size_t)n < 65536)
                break;
        }
    }
    if (!c->closing)
        conn_update(c);
}

static void conn_update(struct conn *c)
{
    int ev = (c->paused ? 0 : UV_READABLE | UV_DISCONNECT) |
             (c->out.len && !c->write_dead ? UV_WRITABLE : 0);
    if (ev != c->watching) {
        c->watching = ev;
        if (ev)
            uv_poll_start(&c->poll, ev, on_poll);
        else
            uv_poll_stop(&c->poll);
    }
}

void conn_resume(struct conn *c)
{
    if (c->closing || !c->paused)
        return;
    c->paused = 0;
    dispatch(c);
    if (!c->closing)
        conn_update(c);
}

struct conn *conn_new(struct daemon *d, int fd, conn_msg_cb on_msg, conn_close_cb on_close,
                      void *owner)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fd = fd;
    c->pending_fd = -1;
    c->d = d;
    c->on_msg = on_msg;
    c->on_close = on_close;
    c->owner = owner;
    c->out_max = CONN_OUT_MAX;
    if (uv_poll_init(d->loop, &c->poll, fd) < 0) {
        free(c);
        return NULL;
    }
    c->poll.data = c;
    conn_update(c);
    return c;
}

int conn_send(struct conn *c, uint16_t type, const void *body, size_t len)
{
    if (c->closing)
        return -ENOTCONN;
    if (c->write_dead)
        return -EPIPE;
    if (c->out.len + len > c->out_max) {
        log_warn("conn", "pid %d does not read its socket (%zu bytes queued); closing",
                 (int)c->peer.pid, c->out.len);
        conn_close(c);
        return -ENOBUFS;
    }
    int rc = cuptimon__frame_append(&c->out, type, body, len);
    if (rc < 0)
        return rc;
    if ((rc = try_write(c)) < 0) {
        /* The peer is gone or not reading: stop writing, but keep reading
         * until EOF, so that messages it sent before are not lost. */
        c->write_dead = 1;
        c->out.len = 0;
        conn_update(c);
        return rc;
    }
    conn_update(c);
    return 0;
}

int conn_send_json(struct conn *c, uint16_t type, json_object *o)
{
    size_t len;
    const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
    return conn_send(c, type, s, len);
}

int conn_send_error(struct conn *c, const char *error, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "error", json_object_new_string(error));
    json_object_object_add(o, "message", json_object_new_string(msg));
    int rc = conn_send_json(c, CUPTIMON_MSG_REPLY_ERROR, o);
    json_object_put(o);
    return rc;
}
