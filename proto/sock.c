/* Socket helpers shared by the shim, the daemon and the CLI: fd passing,
 * peer credentials, connecting, and the blocking control request. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cuptimon-proto.h"

ssize_t cuptimon__send_fd(int sock, const void *buf, size_t len, int fd)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    /* Linux drops an fd attached to an empty stream write. */
    if (fd >= 0 && len == 0)
        return -EINVAL;
    if (fd >= 0) {
        memset(&u, 0, sizeof u);
        msg.msg_control = u.buf;
        msg.msg_controllen = sizeof u.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    ssize_t n;
    do
        n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

ssize_t cuptimon__recv_fd(int sock, void *buf, size_t len, int *fd_out, int *extra_fds)
{
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    /* Room for a few fds so that a peer that sends several does not make
     * the kernel truncate silently (MSG_CTRUNC); all but one get closed. */
    union {
        char buf[CMSG_SPACE(8 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    if (fd_out)
        *fd_out = -1;
    if (extra_fds)
        *extra_fds = 0;
    ssize_t n;
    do
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (fd_out && *fd_out < 0) {
                *fd_out = fd;
            } else {
                close(fd);
                if (extra_fds)
                    (*extra_fds)++;
            }
        }
    }
    /* Truncated with no fd installed: the kernel could not give us one (we
     * are out of descriptors), not a peer that sent too many. */
    if ((msg.msg_flags & MSG_CTRUNC) && fd_out && *fd_out < 0)
        *fd_out = -EMFILE;
    else if ((msg.msg_flags & MSG_CTRUNC) && extra_fds)
        (*extra_fds)++;
    return n;
}

int cuptimon__peer_cred(int sock, struct cuptimon_peer *peer)
{
    struct ucred uc;
    socklen_t l = sizeof uc;
    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &uc, &l) < 0)
        return -errno;
    if (l != sizeof uc)
        return -EPROTO;
    peer->pid = uc.pid;
    peer->uid = uc.uid;
    peer->gid = uc.gid;
    return 0;
}

int cuptimon__sockaddr(struct sockaddr_un *sa, const char *path)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    size_t n = strlen(path);
    if (n == 0)
        return -EINVAL;
    if (n >= sizeof sa->sun_path)
        return -ENAMETOOLONG;
    memcpy(sa->sun_path, path, n + 1);
    return 0;
}

int cuptimon__connect(const char *path, int nonblock)
{
    struct sockaddr_un sa;
    int rc = cuptimon__sockaddr(&sa, path);
    if (rc < 0)
        return rc;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        /* A Unix stream connect either completes or fails at once, except
         * EAGAIN when the listen backlog is full; report that as such. */
        rc = -errno;
        close(fd);
        return rc;
    }
    return fd;
}

int cuptimon__default_runtime_dir(char *out, size_t outlen)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int n;
    if (xdg && xdg[0] == '/')
        n = snprintf(out, outlen, "%s/cuptimon", xdg);
    else if (geteuid() == 0)
        n = snprintf(out, outlen, "%s", CUPTIMON_SYSTEM_RUNTIME_DIR);
    else
        n = snprintf(out, outlen, "/tmp/cuptimon-%u", (unsigned)geteuid());
    return (n < 0 || (size_t)n >= outlen) ? -ENAMETOOLONG : 0;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int wait_fd(int fd, short ev, long long deadline)
{
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = ev};
        int r = poll(&p, 1, (int)(left > 1000000 ? 1000000 : left));
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

int cuptimon__control_call(const char *path, const char *json, int timeout_ms, uint16_t *reply_type,
                           char **reply, size_t *reply_len)
{
    long long deadline = now_ms() + timeout_ms;
    struct cuptimon_buf out = {0}, in = {0};
    int rc, fd = cuptimon__connect(path, 1);
    if (fd < 0)
        return fd;
    rc = cuptimon__frame_append(&out, CUPTIMON_MSG_CONTROL, json, strlen(json));
    if (rc < 0)
        goto done;
    size_t sent = 0;
    while (sent < out.len) {
        ssize_t n = send(fd, out.data + sent, out.len - sent, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if ((rc = wait_fd(fd, POLLOUT, deadline)) < 0)
                goto done;
            continue;
        }
        if (n < 0) {
            rc = -errno;
            goto done;
        }
        sent += (size_t)n;
    }
    struct cuptimon_msg_hdr h;
    for (;;) {
        rc = cuptimon__frame_parse(in.data, in.len, &h);
        if (rc == 0)
            break;
        if (rc != -EAGAIN)
            goto done;
        if ((rc = cuptimon__buf_reserve(&in, 65536)) < 0)
            goto done;
        ssize_t n = recv(fd, in.data + in.len, in.cap - in.len, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if ((rc = wait_fd(fd, POLLIN, deadline)) < 0)
                goto done;
            continue;
        }
        if (n < 0) {
            rc = -errno;
            goto done;
        }
        if (n == 0) {
            rc = -ECONNRESET;
            goto done;
        }
        in.len += (size_t)n;
    }
    if (h.type != CUPTIMON_MSG_REPLY_OK && h.type != CUPTIMON_MSG_REPLY_ERROR) {
        rc = -EPROTO;
        goto done;
    }
    char *body = malloc(h.length + 1);
    if (!body) {
        rc = -ENOMEM;
        goto done;
    }
    memcpy(body, in.data + CUPTIMON_MSG_HDR_SIZE, h.length);
    body[h.length] = '\0';
    *reply = body;
    *reply_len = h.length;
    *reply_type = h.type;
    rc = 0;
done:
    close(fd);
    cuptimon__buf_free(&out);
    cuptimon__buf_free(&in);
    return rc;
}
