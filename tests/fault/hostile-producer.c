/*
 * hostile-producer: a producer that lies.  It speaks the cuptimon protocol
 * to the daemon's producer socket directly (no shim) and runs one named
 * case per invocation, each on its own connection(s): hellos without a
 * pool, with unsealed, short or non-memfd pools, with absurd geometry, with
 * a pid that is not its own; data-path messages out of order, out of range,
 * repeated, malformed or unknown; wrong protocol versions, oversized
 * headers, floods of messages and of connections, and extra fds.
 *
 * Each case checks what the daemon answered (the reply, the release or the
 * lack of one, its own session in `status`, meta.json, fds it must have
 * closed) and exits 0 when the daemon behaved, 1 with "FAIL: ..." when it
 * did not, 2 for bad usage.  A case this kernel cannot try exits 0 after a
 * line "SKIP CASE: why" (and "skipped:" instead of "ok:").  Lines "expect-log: TEXT" on stdout name what
 * the daemon must have logged; tests/fault/hostile.sh greps for them and
 * checks that the daemon stayed alive and kept serving real producers.
 *
 * Usage: hostile-producer --socket P --control-socket C [--count N]
 *                         [--hold-ms MS] CASE
 *        hostile-producer --list
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cuptimon-proto.h"
#include "layouts.h"

#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002u
#endif
#ifndef F_ADD_SEALS
#define F_ADD_SEALS   1033
#define F_GET_SEALS   1034
#define F_SEAL_SEAL   0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW   0x0004
#endif

#define SLOT     4096u /* the smallest slot the daemon accepts: keeps pools tiny */
#define NSLOTS   4u
#define REPLY_MS 5000

static const char *opt_socket, *opt_control;
static long opt_count = -1, opt_hold_ms = -1;
static const char *case_name = "?";

/* ---- reporting ---------------------------------------------------------- */

__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...)
{
    va_list ap;
    printf("FAIL: %s: ", case_name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    return 1;
}

__attribute__((format(printf, 1, 2))) static void expect_log(const char *fmt, ...)
{
    va_list ap;
    printf("expect-log: ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

/* A case that cannot be tried here (the kernel lacks what it needs) says
 * why on a line "SKIP CASE: why" and returns skip()'s 0: hostile.sh counts
 * and shows those lines, and the run still passes on the other cases. */
static const char *skip_reason;

__attribute__((format(printf, 1, 2))) static int skip(const char *fmt, ...)
{
    static char why[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    skip_reason = why;
    printf("SKIP %s: %s\n", case_name, why);
    fflush(stdout);
    return 0;
}

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
    va_list ap;
    printf("%s: ", case_name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return fail(__VA_ARGS__);                                                              \
    } while (0)

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- connections and frames -------------------------------------------- */

struct pconn {
    int fd;
    struct cuptimon_buf in;
};

static int pconnect(struct pconn *c)
{
    memset(c, 0, sizeof *c);
    c->fd = cuptimon__connect(opt_socket, 0);
    if (c->fd < 0) {
        fprintf(stderr, "hostile-producer: cannot connect to %s: %s\n", opt_socket,
                strerror(-c->fd));
        return -1;
    }
    return 0;
}

static void pclose_(struct pconn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    cuptimon__buf_free(&c->in);
}

/* Sends bytes with nfds descriptors attached (SCM_RIGHTS). */
static int send_raw(struct pconn *c, const void *buf, size_t len, const int *fds, int nfds)
{
    union {
        char buf[CMSG_SPACE(64 * sizeof(int))];
        struct cmsghdr align;
    } u;
    const uint8_t *p = buf;
    size_t done = 0;
    if (nfds > 64)
        return -EINVAL;
    while (done < len) {
        struct iovec iov = {.iov_base = (void *)(p + done), .iov_len = len - done};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        if (nfds > 0 && done == 0) {
            memset(&u, 0, sizeof u);
            msg.msg_control = u.buf;
            msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
            struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
            memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
        }
        ssize_t n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        done += (size_t)n;
    }
    return 0;
}

static int send_msg(struct pconn *c, uint16_t type, const void *body, size_t len, const int *fds,
                    int nfds)
{
    struct cuptimon_buf b = {0};
    int rc = cuptimon__frame_append(&b, type, body, len);
    if (rc == 0)
        rc = send_raw(c, b.data, b.len, fds, nfds);
    cuptimon__buf_free(&b);
    return rc;
}

/* A header with every field under our control. */
static void raw_hdr(uint8_t out[CUPTIMON_MSG_HDR_SIZE], uint32_t magic, uint16_t version,
                    uint16_t type, uint32_t length, uint32_t flags)
{
    cuptimon__put_u32(out, magic);
    cuptimon__put_u16(out + 4, version);
    cuptimon__put_u16(out + 6, type);
    cuptimon__put_u32(out + 8, length);
    cuptimon__put_u32(out + 12, flags);
}

/* Reads one frame: 1 with *h and *body (malloc'd, NUL-terminated), 0 on
 * EOF, -ETIMEDOUT, or -errno. */
static int read_frame(struct pconn *c, struct cuptimon_msg_hdr *h, char **body, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        int rc = cuptimon__frame_parse(c->in.data, c->in.len, h);
        if (rc == 0) {
            *body = malloc(h->length + 1);
            if (!*body)
                return -ENOMEM;
            memcpy(*body, c->in.data + CUPTIMON_MSG_HDR_SIZE, h->length);
            (*body)[h->length] = '\0';
            cuptimon__buf_consume(&c->in, CUPTIMON_MSG_HDR_SIZE + h->length);
            return 1;
        }
        if (rc != -EAGAIN)
            return rc;
        long long left = deadline - now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        if (cuptimon__buf_reserve(&c->in, 65536) < 0)
            return -ENOMEM;
        ssize_t n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == ECONNRESET ? 0 : -errno;
        if (n == 0)
            return 0;
        c->in.len += (size_t)n;
    }
}

/* Commands the daemon sends on its own (periodic flushes, windows). */
static int is_command(uint16_t type)
{
    return type == CUPTIMON_MSG_FLUSH || type == CUPTIMON_MSG_ENABLE ||
           type == CUPTIMON_MSG_DISABLE || type == CUPTIMON_MSG_CONFIG;
}

/* The next frame that is not a daemon command. */
static int read_reply(struct pconn *c, struct cuptimon_msg_hdr *h, char **body, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        long long left = deadline - now_ms();
        int rc = read_frame(c, h, body, left > 0 ? (int)left : 0);
        if (rc <= 0 || !is_command(h->type))
            return rc;
        free(*body);
    }
}

/* The connection must end (EOF) with no frame before it. */
static int expect_eof(struct pconn *c, const char *after)
{
    struct cuptimon_msg_hdr h;
    char *body = NULL;
    int rc = read_frame(c, &h, &body, REPLY_MS);
    if (rc == 1) {
        int r = fail("after %s, expected the daemon to close the connection, got %s (%u bytes): "
                     "%.200s",
                     after, cuptimon__type_name(h.type), h.length, body);
        free(body);
        return r;
    }
    CHECK(rc == 0, "after %s, expected EOF, got %s", after, strerror(-rc));
    return 0;
}

/* The next reply must be REPLY_ERROR {"error": err, "message": ...needle...},
 * and then the daemon must hang up without another frame. */
static int expect_error(struct pconn *c, const char *err, const char *needle)
{
    struct cuptimon_msg_hdr h;
    char *body = NULL;
    int rc = read_reply(c, &h, &body, REPLY_MS);
    CHECK(rc == 1, "expected REPLY_ERROR %s, got %s", err, rc == 0 ? "EOF" : strerror(-rc));
    if (h.type != CUPTIMON_MSG_REPLY_ERROR) {
        rc =
            fail("expected REPLY_ERROR %s, got %s: %.200s", err, cuptimon__type_name(h.type), body);
        free(body);
        return rc;
    }
    json_object *o = json_tokener_parse(body), *v;
    const char *e = o && json_object_object_get_ex(o, "error", &v) ? json_object_get_string(v) : "";
    const char *m =
        o && json_object_object_get_ex(o, "message", &v) ? json_object_get_string(v) : "";
    rc = 0;
    if (strcmp(e, err) != 0 || !strstr(m, needle))
        rc = fail("REPLY_ERROR is %s, want error \"%s\" with a message containing \"%s\"", body,
                  err, needle);
    else
        note("refused: %s: %s", e, m);
    json_object_put(o);
    free(body);
    if (rc)
        return rc;
    return expect_eof(c, "REPLY_ERROR");
}

/* ---- pools and hellos --------------------------------------------------- */

static int make_memfd(off_t size, int seals)
{
    int fd = (int)syscall(SYS_memfd_create, "hostile-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    if (ftruncate(fd, size) < 0 || (seals && fcntl(fd, F_ADD_SEALS, seals) < 0)) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    return fd;
}

static int good_pool(uint32_t slots, uint64_t slot_size)
{
    return make_memfd((off_t)(slots * slot_size), F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
}

/* A hello as the shim sends it, with the pool part and the pid ours to set. */
static void hello_text(char *out, size_t n, const char *pool_frag, long pid)
{
    snprintf(out, n,
             "{\"pid\":%ld,\"uid\":%u,\"hostname\":\"hostile\",\"exe\":\"hostile-producer\","
             "\"cupti_version\":130001,\"record_sizes\":{\"10\":216},"
             "\"job\":{\"label\":\"hostile-%s\"}%s%s}",
             pid, (unsigned)getuid(), case_name, pool_frag[0] ? "," : "", pool_frag);
}

static void pool_frag(char *out, size_t n, uint32_t slots, uint64_t slot_size)
{
    snprintf(out, n, "\"pool\":{\"slots\":%u,\"slot_size\":%" PRIu64 "}", slots, slot_size);
}

struct session {
    struct pconn c;
    int64_t id;
    char archive[700];
    uint8_t *pool;
    uint32_t slots;
    uint64_t slot_size;
    uint64_t seq;
};

/* A well-behaved hello (except for the pid it claims); waits for the ack. */
static int open_session_as(struct session *s, uint32_t slots, uint64_t slot_size, long pid)
{
    char frag[200], hello[1024];
    memset(s, 0, sizeof *s);
    s->slots = slots;
    s->slot_size = slot_size;
    if (pconnect(&s->c) < 0)
        return fail("connect");
    int fd = good_pool(slots, slot_size);
    CHECK(fd >= 0, "memfd: %s", strerror(-fd));
    s->pool = mmap(NULL, slots * slot_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(s->pool != MAP_FAILED, "mmap: %s", strerror(errno));
    pool_frag(frag, sizeof frag, slots, slot_size);
    hello_text(hello, sizeof hello, frag, pid);
    int rc = send_msg(&s->c, CUPTIMON_MSG_HELLO, hello, strlen(hello), &fd, 1);
    close(fd);
    CHECK(rc == 0, "send hello: %s", strerror(-rc));
    struct cuptimon_msg_hdr h;
    char *body = NULL;
    rc = read_reply(&s->c, &h, &body, REPLY_MS);
    CHECK(rc == 1, "no HELLO_ACK: %s", rc == 0 ? "EOF" : strerror(-rc));
    if (h.type != CUPTIMON_MSG_HELLO_ACK) {
        rc = fail("expected HELLO_ACK, got %s: %.200s", cuptimon__type_name(h.type), body);
        free(body);
        return rc;
    }
    json_object *o = json_tokener_parse(body), *v;
    if (o && json_object_object_get_ex(o, "session", &v))
        s->id = json_object_get_int64(v);
    if (o && json_object_object_get_ex(o, "archive", &v))
        snprintf(s->archive, sizeof s->archive, "%s", json_object_get_string(v));
    json_object_put(o);
    free(body);
    CHECK(s->id > 0, "HELLO_ACK without a session id");
    return 0;
}

static int open_session(struct session *s)
{
    return open_session_as(s, NSLOTS, SLOT, (long)getpid());
}

static void close_session(struct session *s)
{
    pclose_(&s->c);
    if (s->pool && s->pool != MAP_FAILED)
        munmap(s->pool, s->slots * s->slot_size);
    s->pool = NULL;
}

static int send_ready(struct session *s, uint32_t slot, uint64_t valid, uint64_t seq)
{
    struct cuptimon_buffer_ready m = {.slot = slot, .valid_size = valid, .seq = seq};
    uint8_t body[CUPTIMON_BUFFER_READY_SIZE];
    cuptimon__buffer_ready_encode(body, &m);
    return send_msg(&s->c, CUPTIMON_MSG_BUFFER_READY, body, sizeof body, NULL, 0);
}

/* Waits for the release of `slot`; any other release first is a failure
 * (the daemon must not release a slot it refused). */
static int expect_release(struct session *s, uint32_t slot, uint64_t seq)
{
    struct cuptimon_msg_hdr h;
    char *body = NULL;
    int rc = read_reply(&s->c, &h, &body, REPLY_MS);
    CHECK(rc == 1, "no BUFFER_RELEASE for slot %u: %s", slot, rc == 0 ? "EOF" : strerror(-rc));
    struct cuptimon_buffer_release r;
    int bad = h.type != CUPTIMON_MSG_BUFFER_RELEASE ||
              cuptimon__buffer_release_decode((const uint8_t *)body, h.length, &r) < 0;
    if (bad) {
        rc = fail("expected BUFFER_RELEASE for slot %u, got %s: %.200s", slot,
                  cuptimon__type_name(h.type), body);
        free(body);
        return rc;
    }
    free(body);
    CHECK(r.slot == slot && r.seq == seq,
          "released slot %u seq %" PRIu64 ", expected slot %u "
          "seq %" PRIu64,
          r.slot, r.seq, slot, seq);
    CHECK(r.status == 0, "slot %u released with status %u (%s), expected 0 (archived)", slot,
          r.status, strerror((int)r.status));
    return 0;
}

/* Nothing but daemon commands may arrive for ms. */
static int expect_silence(struct session *s, int ms, const char *what)
{
    struct cuptimon_msg_hdr h;
    char *body = NULL;
    int rc = read_reply(&s->c, &h, &body, ms);
    if (rc == 1) {
        rc = fail("%s: unexpected %s: %.200s", what, cuptimon__type_name(h.type), body);
        free(body);
        return rc;
    }
    CHECK(rc == -ETIMEDOUT, "%s: the daemon closed the connection (%s)", what,
          rc == 0 ? "EOF" : strerror(-rc));
    return 0;
}

/* ---- what the daemon says about us -------------------------------------- */

static json_object *status_root(void)
{
    uint16_t type = 0;
    char *reply = NULL;
    size_t len = 0;
    int rc =
        cuptimon__control_call(opt_control, "{\"op\":\"status\"}", REPLY_MS, &type, &reply, &len);
    if (rc < 0 || type != CUPTIMON_MSG_REPLY_OK) {
        fprintf(stderr, "hostile-producer: status failed: %s\n", rc < 0 ? strerror(-rc) : reply);
        free(reply);
        return NULL;
    }
    json_object *o = json_tokener_parse(reply);
    free(reply);
    return o;
}

static int64_t jint(json_object *o, const char *key)
{
    json_object *v;
    return o && json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : -1;
}

/* Our session's entry in status (NULL when not listed); *root to put. */
static json_object *my_status(int64_t id, json_object **root)
{
    json_object *ss;
    *root = status_root();
    if (!*root || !json_object_object_get_ex(*root, "sessions", &ss))
        return NULL;
    for (size_t i = 0; i < json_object_array_length(ss); i++) {
        json_object *e = json_object_array_get_idx(ss, i);
        if (jint(e, "session") == id)
            return e;
    }
    return NULL;
}

static int check_counter(int64_t id, const char *key, int64_t want)
{
    json_object *root, *e = my_status(id, &root);
    int64_t got = jint(e, key);
    json_object_put(root);
    CHECK(e, "session %" PRId64 " is not in status", id);
    CHECK(got == want, "status says %s = %" PRId64 " for session %" PRId64 ", expected %" PRId64,
          key, got, id, want);
    return 0;
}

/* A field of the daemon's /proc/PID/status in KiB (its pid from status),
 * or -1. */
static long daemon_kb(const char *field)
{
    json_object *root = status_root(), *dm;
    long pid = root && json_object_object_get_ex(root, "daemon", &dm) ? (long)jint(dm, "pid") : -1;
    json_object_put(root);
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = pid > 0 ? fopen(path, "r") : NULL;
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, strlen(field)) == 0)
            kb = strtol(line + strlen(field), NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

/* The read end sees EOF once every copy of the write end is closed: this is
 * how we see that the daemon closed an fd we passed it. */
static int wait_closed_elsewhere(int rfd, int ms)
{
    long long deadline = now_ms() + ms;
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = rfd, .events = POLLIN};
        if (poll(&p, 1, (int)left) > 0) {
            char b;
            if (read(rfd, &b, 1) == 0)
                return 1;
        }
    }
}

/* ---- cases: the hello --------------------------------------------------- */

/* Sends a hello with the given pool fragment and fd (may be -1) and expects
 * it refused with a message containing needle. */
static int refused_hello(const char *body, int fd, const char *needle)
{
    struct pconn c;
    if (pconnect(&c) < 0)
        return fail("connect");
    int rc =
        send_msg(&c, CUPTIMON_MSG_HELLO, body, strlen(body), fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
    CHECK(rc == 0, "send: %s", strerror(-rc));
    rc = expect_error(&c, "EINVAL", needle);
    pclose_(&c);
    return rc;
}

static int case_hello_no_fd(void)
{
    char frag[200], hello[1024];
    pool_frag(frag, sizeof frag, NSLOTS, SLOT);
    hello_text(hello, sizeof hello, frag, (long)getpid());
    expect_log("refused a producer, pid %d uid %u: the hello carried no pool fd", (int)getpid(),
               (unsigned)getuid());
    return refused_hello(hello, -1, "carried no pool fd");
}

/* The pool fd is the write end of a pipe: refused, and the daemon must have
 * closed its copy (our read end sees EOF). */
static int refused_with_pipe(const char *hello, const char *needle)
{
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
    int rc = refused_hello(hello, p[1], needle);
    close(p[1]);
    if (rc == 0 && !wait_closed_elsewhere(p[0], 3000))
        rc = fail("the daemon kept the fd of a refused hello open");
    close(p[0]);
    return rc;
}

static int case_hello_not_json(void)
{
    expect_log("refused a producer, pid %d uid %u: the hello is not a JSON object", (int)getpid(),
               (unsigned)getuid());
    int rc = refused_with_pipe("{\"pid\": 1, \"pool\": {\"slots\": 4", "not a JSON object");
    if (rc == 0)
        rc = refused_with_pipe("[1, 2, 3]", "not a JSON object");
    if (rc == 0)
        rc = refused_with_pipe("{\"pid\": 1} trailing", "not a JSON object");
    return rc;
}

static int case_hello_no_pool(void)
{
    char hello[1024];
    hello_text(hello, sizeof hello, "", (long)getpid());
    expect_log("refused a producer, pid %d uid %u: the hello has no \"pool\"", (int)getpid(),
               (unsigned)getuid());
    return refused_with_pipe(hello, "has no \"pool\"");
}

static int pool_hello(uint32_t slots, uint64_t slot_size, char *hello, size_t n)
{
    char frag[200];
    pool_frag(frag, sizeof frag, slots, slot_size);
    hello_text(hello, n, frag, (long)getpid());
    return 0;
}

static int case_hello_unsealed(void)
{
    char hello[1024];
    pool_hello(NSLOTS, SLOT, hello, sizeof hello);
    int fd = make_memfd(NSLOTS * SLOT, 0);
    CHECK(fd >= 0, "memfd: %s", strerror(-fd));
    expect_log("refused a producer, pid %d uid %u: the pool fd is not a memfd sealed against "
               "shrink and grow (seals 0x0)",
               (int)getpid(), (unsigned)getuid());
    int rc = refused_hello(hello, fd, "(seals 0x0)");
    close(fd);
    if (rc)
        return rc;
    /* Sealed against shrinking only: it could still grow under the daemon. */
    fd = make_memfd(NSLOTS * SLOT, F_SEAL_SHRINK);
    CHECK(fd >= 0, "memfd: %s", strerror(-fd));
    expect_log("(seals 0x%x)", F_SEAL_SHRINK);
    rc = refused_hello(hello, fd, "sealed against shrink and grow");
    close(fd);
    return rc;
}

static int case_hello_short_pool(void)
{
    char hello[1024];
    pool_hello(NSLOTS, SLOT, hello, sizeof hello);
    /* One slot short: a BUFFER_READY for the last slot would read past the
     * end of the mapping (SIGBUS) if the daemon believed the hello. */
    int fd = good_pool(NSLOTS - 1, SLOT);
    CHECK(fd >= 0, "memfd: %s", strerror(-fd));
    expect_log("the pool is %u bytes, but the hello says %u slots x %u", (NSLOTS - 1) * SLOT,
               NSLOTS, SLOT);
    int rc = refused_hello(hello, fd, "the pool is");
    close(fd);
    if (rc)
        return rc;
    /* Empty, sealed. */
    fd = good_pool(0, SLOT);
    CHECK(fd >= 0, "memfd: %s", strerror(-fd));
    expect_log("the pool is 0 bytes, but the hello says %u slots x %u", NSLOTS, SLOT);
    rc = refused_hello(hello, fd, "the pool is 0 bytes");
    close(fd);
    return rc;
}

static int case_hello_geometry(void)
{
    static const char *const frags[] = {
        "\"pool\":{\"slots\":0,\"slot_size\":4096}",
        "\"pool\":{\"slots\":-1,\"slot_size\":4096}",
        "\"pool\":{\"slots\":4097,\"slot_size\":4096}",
        "\"pool\":{\"slots\":4000000000,\"slot_size\":4096}",
        "\"pool\":{\"slots\":9223372036854775807,\"slot_size\":9223372036854775807}",
        "\"pool\":{\"slots\":4,\"slot_size\":0}",
        "\"pool\":{\"slots\":4,\"slot_size\":1}",
        "\"pool\":{\"slots\":4,\"slot_size\":4095}",
        "\"pool\":{\"slots\":4,\"slot_size\":4100}",
        "\"pool\":{\"slots\":4,\"slot_size\":1099511627776}",
        "\"pool\":{\"slots\":\"4\",\"slot_size\":4096}",
        "\"pool\":{\"slots\":4.5,\"slot_size\":4096}",
        "\"pool\":{\"slot_size\":4096}",
        "\"pool\":[4,4096]",
        "\"pool\":null",
    };
    char hello[1024];
    int rc = 0;
    for (size_t i = 0; i < sizeof frags / sizeof frags[0] && rc == 0; i++) {
        hello_text(hello, sizeof hello, frags[i], (long)getpid());
        int fd = good_pool(NSLOTS, SLOT);
        CHECK(fd >= 0, "memfd: %s", strerror(-fd));
        note("pool %s", frags[i]);
        rc = refused_hello(hello, fd, "out of range");
        close(fd);
    }
    expect_log("pool geometry 4097 x 4096 is out of range");
    expect_log("pool geometry 4 x 4100 is out of range");
    expect_log("pool geometry 4 x 1099511627776 is out of range");
    /* In range, but 4096 slots of 256 MiB is a 1 TiB pool: more than
     * max_pool_bytes (1 GiB by default), which the daemon takes since
     * issue 47 (holding at most that much of it at once), but only with a
     * memfd of that size: the size check must not overflow. */
    if (rc == 0) {
        pool_hello(4096, 256u << 20, hello, sizeof hello);
        int fd = good_pool(NSLOTS, SLOT);
        CHECK(fd >= 0, "memfd: %s", strerror(-fd));
        expect_log("but the hello says 4096 slots x 268435456");
        rc = refused_hello(hello, fd, "but the hello says 4096 slots x 268435456");
        close(fd);
    }
    return rc;
}

static int case_hello_pipe(void)
{
    char hello[1024];
    pool_hello(NSLOTS, SLOT, hello, sizeof hello);
    expect_log("refused a producer, pid %d uid %u: the pool fd is not a memfd", (int)getpid(),
               (unsigned)getuid());
    return refused_with_pipe(hello, "not a memfd");
}

static int case_hello_regular_file(void)
{
    char hello[1024], path[] = "/tmp/hostile-pool.XXXXXX";
    pool_hello(NSLOTS, SLOT, hello, sizeof hello);
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
    unlink(path);
    CHECK(ftruncate(fd, NSLOTS * SLOT) == 0, "ftruncate: %s", strerror(errno));
    expect_log("refused a producer, pid %d uid %u: the pool fd is not a memfd", (int)getpid(),
               (unsigned)getuid());
    int rc = refused_hello(hello, fd, "not a memfd");
    close(fd);
    if (rc)
        return rc;
    /* A character device of any size. */
    fd = open("/dev/zero", O_RDWR | O_CLOEXEC);
    CHECK(fd >= 0, "/dev/zero: %s", strerror(errno));
    rc = refused_hello(hello, fd, "not a memfd");
    close(fd);
    return rc;
}

/* A sealed memfd on hugetlbfs: its pages can be exhausted or punched out
 * under a reader that maps it, which then dies of SIGBUS.  The daemon
 * accepts only shmem. */
static int case_hello_hugetlb(void)
{
    char hello[1024];
    int fd = (int)syscall(SYS_memfd_create, "hostile-huge",
                          MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
    if (fd < 0)
        return skip("memfd_create(MFD_HUGETLB) failed (%s): this kernel has no hugetlbfs memfd "
                    "to offer as a pool",
                    strerror(errno));
    if (ftruncate(fd, 2 << 20) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
        int e = errno;
        close(fd);
        return skip("a hugetlb memfd cannot be sized to 2 MiB and sealed here (%s)", strerror(e));
    }
    pool_hello(1, 2 << 20, hello, sizeof hello);
    expect_log("the pool fd is not on shmem");
    int rc = refused_hello(hello, fd, "hugetlbfs");
    close(fd);
    return rc;
}

/* Buffers announced over pages punched out of the pool (fallocate
 * PUNCH_HOLE): read through a mapping, a hole costs the daemon a page of
 * its own memory (and, on hugetlbfs or a node short of memory, a SIGBUS).
 * Every buffer must still be archived and released, and status must count
 * the holes.  Then a sparse pool as large as max_pool_bytes allows, every
 * byte announced: the daemon must not grow by its size. */
static int case_pool_holes(void)
{
    struct session s;
    int rc = open_session(&s);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < NSLOTS * SLOT; i++)
        s.pool[i] = (uint8_t)(i * 7);
    /* Our fd went with the hello; punch through the mapping instead. */
    CHECK(madvise(s.pool + SLOT, SLOT, MADV_REMOVE) == 0, "madvise(MADV_REMOVE): %s",
          strerror(errno));
    CHECK(send_ready(&s, 0, SLOT, 0) == 0 && send_ready(&s, 1, SLOT, 1) == 0, "send");
    if ((rc = expect_release(&s, 0, 0)) || (rc = expect_release(&s, 1, 1)))
        return rc;
    expect_log("pages punched out of its pool");
    if ((rc = check_counter(s.id, "pool_holes", 1)))
        return rc;
    close_session(&s);

    /* 16 slots of 64 MiB, all holes, every byte announced. */
    long hwm0 = daemon_kb("VmHWM:");
    const uint32_t n = 16;
    const uint64_t size = 64ull << 20;
    if ((rc = open_session_as(&s, n, size, (long)getpid())))
        return rc;
    for (uint32_t i = 0; i < n; i++)
        CHECK(send_ready(&s, i, size, i) == 0, "send");
    for (uint32_t i = 0; i < n; i++)
        if ((rc = expect_release(&s, i, i)))
            return rc;
    long hwm1 = daemon_kb("VmHWM:");
    note("a sparse %u x %" PRIu64 " MiB pool, all announced: daemon peak RSS %ld -> %ld KiB", n,
         size >> 20, hwm0, hwm1);
    CHECK(hwm0 > 0 && hwm1 - hwm0 < 320 * 1024,
          "the daemon's peak RSS grew by %ld KiB for a "
          "sparse pool of %u MiB (it must not grow by the pool's size)",
          hwm1 - hwm0, (unsigned)((n * size) >> 20));
    close_session(&s);
    return 0;
}

/* meta.json's "final" block of the session archived in dir, once the
 * daemon has written it (after the connection ended and its queue was
 * written); NULL after ms.  The daemon replaces meta.json by rename, so a
 * read never sees half of it. */
static json_object *final_meta(const char *dir, int ms, json_object **root)
{
    char path[800];
    snprintf(path, sizeof path, "%s/meta.json", dir);
    long long deadline = now_ms() + ms;
    for (;;) {
        json_object *fin;
        *root = json_object_from_file(path);
        if (*root && json_object_object_get_ex(*root, "final", &fin))
            return fin;
        json_object_put(*root);
        *root = NULL;
        if (now_ms() >= deadline)
            return NULL;
        usleep(20000);
    }
}

/* Counters that lie: a buffer of one 16-byte slot claiming 10^15+1
 * records and UINT64_MAX drops, then a BYE (the shim's final totals)
 * claiming INT64_MAX drops, 10^15 declined requests, 10^18 lost buffers and
 * completion times of two hours and of INT64_MAX ns.  Each claim is past
 * what the daemon accepts (records: valid_size / 8; counts: 2^40; times:
 * an hour), so it is refused: 0 is used for it, a protocol error names the
 * value.  Status, and meta.json's "final" block once the session ended,
 * must show the honest counts only: 1 record, 5 drops, nothing declined,
 * no lost buffer, no completion time, and no negative number. */
static int case_counters_lie(void)
{
    struct session s;
    int rc = open_session(&s);
    if (rc)
        return rc;
    struct cuptimon_buffer_ready m = {.slot = 0,
                                      .valid_size = 16,
                                      .seq = 0,
                                      .records = 1000000000000001ull,
                                      .dropped = UINT64_MAX};
    uint8_t body[CUPTIMON_BUFFER_READY_SIZE];
    cuptimon__buffer_ready_encode(body, &m);
    CHECK(send_msg(&s.c, CUPTIMON_MSG_BUFFER_READY, body, sizeof body, NULL, 0) == 0, "send");
    if ((rc = expect_release(&s, 0, 0)))
        return rc;
    m = (struct cuptimon_buffer_ready){
        .slot = 1, .valid_size = 16, .seq = 1, .records = 1, .dropped = 5};
    cuptimon__buffer_ready_encode(body, &m);
    CHECK(send_msg(&s.c, CUPTIMON_MSG_BUFFER_READY, body, sizeof body, NULL, 0) == 0, "send");
    if ((rc = expect_release(&s, 1, 1)))
        return rc;
    expect_log("BUFFER_READY records 1000000000000001 is implausible");
    expect_log("BUFFER_READY dropped 18446744073709551615 is implausible");
    if ((rc = check_counter(s.id, "records", 1)) ||
        (rc = check_counter(s.id, "dropped_records", 5)))
        return rc;

    char bye[400];
    snprintf(bye, sizeof bye,
             "{\"dropped_records\":%" PRId64 ",\"requests_declined\":1000000000000000,"
             "\"buffers_lost\":1000000000000000000,\"completion_p99_ns_max\":7200000000000,"
             "\"completion_longest_ns\":%" PRId64 "}",
             INT64_MAX, INT64_MAX);
    CHECK(send_msg(&s.c, CUPTIMON_MSG_BYE, bye, strlen(bye), NULL, 0) == 0, "send BYE");
    expect_log("BYE dropped_records %" PRId64 " is implausible", INT64_MAX);
    expect_log("BYE requests_declined 1000000000000000 is implausible");
    expect_log("BYE buffers_lost 1000000000000000000 is implausible");
    expect_log("BYE completion_p99_ns_max 7200000000000 is implausible");
    expect_log("BYE completion_longest_ns %" PRId64 " is implausible", INT64_MAX);
    /* Messages are taken in order: once a buffer announced after the BYE
     * is released, the BYE has been judged. */
    CHECK(send_ready(&s, 2, 0, 2) == 0, "send");
    if ((rc = expect_release(&s, 2, 2)))
        return rc;
    if ((rc = check_counter(s.id, "dropped_records", 5)) ||
        (rc = check_counter(s.id, "protocol_errors", 7)))
        return rc;
    close_session(&s);

    json_object *root, *fin = final_meta(s.archive, REPLY_MS, &root);
    CHECK(fin, "%s/meta.json has no \"final\" block %d ms after the session ended", s.archive,
          REPLY_MS);
    static const struct {
        const char *key;
        int64_t want;
    } want[] = {
        {"records", 1},      {"dropped_records", 5},       {"requests_declined", 0},
        {"lost_buffers", 0}, {"completion_p99_ns_max", 0}, {"completion_longest_ns", 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int64_t got = jint(fin, want[i].key);
        if (got != want[i].want) {
            rc = fail("meta.json's final %s = %" PRId64 ", expected %" PRId64 " (the lie "
                      "refused): %s",
                      want[i].key, got, want[i].want, json_object_to_json_string(fin));
            break;
        }
    }
    if (rc == 0)
        note("meta.json final: %s", json_object_to_json_string(fin));
    json_object_put(root);
    return rc;
}

/* The daemon must keep the pid the kernel vouches for, not the one we say. */
static int case_pid_lie(void)
{
    struct session s;
    int rc = open_session_as(&s, NSLOTS, SLOT, 1);
    if (rc)
        return rc;
    json_object *root, *e = my_status(s.id, &root);
    int64_t pid = jint(e, "pid");
    json_object_put(root);
    CHECK(e, "session %" PRId64 " is not in status", s.id);
    CHECK(pid == getpid(),
          "status says the session's pid is %" PRId64 ", but the peer is %d "
          "(the hello claimed 1)",
          pid, (int)getpid());
    char path[800];
    snprintf(path, sizeof path, "%s/meta.json", s.archive);
    json_object *meta = json_object_from_file(path);
    CHECK(meta, "cannot read %s", path);
    int64_t mpid = jint(meta, "pid"), rpid = jint(meta, "reported_pid");
    json_object_put(meta);
    CHECK(mpid == getpid() && rpid == 1,
          "meta.json has pid %" PRId64 " reported_pid %" PRId64 ", expected pid %d reported_pid 1",
          mpid, rpid, (int)getpid());
    CHECK(strstr(s.archive, "-1-") == NULL || getpid() == 1,
          "the archive directory %s is named "
          "after the claimed pid",
          s.archive);
    note("hello claimed pid 1; status and meta.json say pid %d, reported_pid 1", (int)getpid());
    expect_log("session %" PRId64 ": pid %d uid %u", s.id, (int)getpid(), (unsigned)getuid());
    close_session(&s);
    return 0;
}

/* Extra fds on the hello: the first is the pool, the others are closed. */
static int extra_fds_on_hello(int extra)
{
    int fds[64], pipes[64][2];
    char frag[200], hello[1024];
    struct pconn c;
    CHECK(extra < 64, "too many");
    fds[0] = good_pool(NSLOTS, SLOT);
    CHECK(fds[0] >= 0, "memfd: %s", strerror(-fds[0]));
    for (int i = 0; i < extra; i++) {
        CHECK(pipe2(pipes[i], O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
        fds[1 + i] = pipes[i][1];
    }
    pool_frag(frag, sizeof frag, NSLOTS, SLOT);
    hello_text(hello, sizeof hello, frag, (long)getpid());
    if (pconnect(&c) < 0)
        return fail("connect");
    int rc = send_msg(&c, CUPTIMON_MSG_HELLO, hello, strlen(hello), fds, 1 + extra);
    CHECK(rc == 0, "send: %s", strerror(-rc));
    for (int i = 0; i < 1 + extra; i++)
        close(fds[i]);
    struct cuptimon_msg_hdr h;
    char *body = NULL;
    rc = read_reply(&c, &h, &body, REPLY_MS);
    CHECK(rc == 1 && h.type == CUPTIMON_MSG_HELLO_ACK,
          "a hello with %d extra fds was not "
          "accepted: %s",
          extra, rc == 1 ? body : "no reply");
    free(body);
    int open_left = 0;
    for (int i = 0; i < extra; i++) {
        if (!wait_closed_elsewhere(pipes[i][0], 3000))
            open_left++;
        close(pipes[i][0]);
    }
    pclose_(&c);
    CHECK(open_left == 0, "the daemon kept %d of %d extra fds open", open_left, extra);
    note("hello with %d extra fds accepted, the daemon closed all %d", extra, extra);
    return 0;
}

static int case_hello_extra_fds(void)
{
    expect_log("pid %d sent 3 unexpected file descriptor(s); closed them", (int)getpid());
    int rc = extra_fds_on_hello(3);
    /* More than the daemon's control buffer holds (8): the kernel truncates,
     * and must not leave any of them in the daemon either. */
    if (rc == 0)
        rc = extra_fds_on_hello(40);
    return rc;
}

/* After the hello, every fd is unexpected: on a data message, and on a
 * second hello (which is ignored). */
static int case_fd_after_hello(void)
{
    struct session s;
    int rc = open_session(&s);
    if (rc)
        return rc;
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
    uint8_t fd_body[CUPTIMON_FLUSH_DONE_SIZE];
    struct cuptimon_flush_done f = {.flush_id = 0};
    cuptimon__flush_done_encode(fd_body, &f);
    rc = send_msg(&s.c, CUPTIMON_MSG_FLUSH_DONE, fd_body, sizeof fd_body, &p[1], 1);
    CHECK(rc == 0, "send: %s", strerror(-rc));
    close(p[1]);
    CHECK(wait_closed_elsewhere(p[0], 3000), "the daemon kept an fd sent with FLUSH_DONE open");
    close(p[0]);
    expect_log("pid %d sent 1 unexpected file descriptor(s); closed them", (int)getpid());

    /* A second hello, with a fresh pool: ignored, and its fd closed. */
    char frag[200], hello[1024];
    pool_frag(frag, sizeof frag, NSLOTS, SLOT);
    hello_text(hello, sizeof hello, frag, (long)getpid());
    CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
    rc = send_msg(&s.c, CUPTIMON_MSG_HELLO, hello, strlen(hello), &p[1], 1);
    CHECK(rc == 0, "send: %s", strerror(-rc));
    close(p[1]);
    CHECK(wait_closed_elsewhere(p[0], 3000), "the daemon kept the fd of a second hello open");
    close(p[0]);
    expect_log("session %" PRId64 " (pid %d): a second HELLO (ignored)", s.id, (int)getpid());
    /* Still the same session, still serving. */
    CHECK(send_ready(&s, 0, 0, 0) == 0, "send");
    if ((rc = expect_release(&s, 0, 0)))
        return rc;
    rc = check_counter(s.id, "protocol_errors", 1);
    close_session(&s);
    return rc;
}

/* A producer that sends its hello and is gone before the daemon answers:
 * a job that exits at once, or a daemon that was busy.  The daemon's reply
 * then fails (EPIPE); it must survive that, for a refused hello and for a
 * good one. */
static int case_hello_then_close(void)
{
    char frag[200], hello[1024];
    pool_frag(frag, sizeof frag, NSLOTS, SLOT);
    hello_text(hello, sizeof hello, frag, (long)getpid());
    for (int round = 0; round < 2; round++) {
        struct pconn c;
        if (pconnect(&c) < 0)
            return fail("connect");
        int fd = round == 0 ? -1 : good_pool(NSLOTS, SLOT);
        int rc = send_msg(&c, CUPTIMON_MSG_HELLO, hello, strlen(hello), fd >= 0 ? &fd : NULL,
                          fd >= 0 ? 1 : 0);
        if (fd >= 0)
            close(fd);
        pclose_(&c);
        CHECK(rc == 0, "send: %s", strerror(-rc));
        usleep(300000);
        json_object *root = status_root();
        CHECK(root, "the daemon stopped answering after a producer closed right after %s hello",
              round == 0 ? "a refused" : "a good");
        json_object_put(root);
        note("the daemon survived %s hello whose producer was gone",
             round == 0 ? "a refused" : "a good");
    }
    return 0;
}

/* A producer that never reads its socket and closes right after its last
 * BUFFER_READY: the daemon's HELLO_ACK is still unread in our receive queue,
 * so the kernel reports the daemon's end as reset (EPOLLERR).  The daemon
 * must still take the buffer and then end the session; close-unread.sh
 * checks both (status, meta.json) after this exits. */
static int case_close_unread(void)
{
    char frag[200], hello[1024];
    struct pconn c;
    pool_frag(frag, sizeof frag, NSLOTS, SLOT);
    hello_text(hello, sizeof hello, frag, (long)getpid());
    if (pconnect(&c) < 0)
        return fail("connect");
    int fd = good_pool(NSLOTS, SLOT);
    CHECK(fd >= 0, "memfd: %s", strerror(-fd));
    int rc = send_msg(&c, CUPTIMON_MSG_HELLO, hello, strlen(hello), &fd, 1);
    close(fd);
    CHECK(rc == 0, "send hello: %s", strerror(-rc));
    usleep(300000); /* the daemon answers; we do not read the answer */
    struct cuptimon_buffer_ready m = {.slot = 0, .valid_size = 64, .seq = 0};
    uint8_t body[CUPTIMON_BUFFER_READY_SIZE];
    cuptimon__buffer_ready_encode(body, &m);
    rc = send_msg(&c, CUPTIMON_MSG_BUFFER_READY, body, sizeof body, NULL, 0);
    CHECK(rc == 0, "send: %s", strerror(-rc));
    pclose_(&c);
    printf("close-unread-pid: %d\n", (int)getpid());
    return 0;
}

/* ---- cases: user-defined record layouts (issue 16) ---------------------- */

/* What a shim on CUPTI 13.2+ with user-defined records would send: a hello
 * whose "record_layouts" describes packed records (every field the decoder
 * reads, in reverse order from byte 4: no table struct looks like it) for
 * CONCURRENT_KERNEL, MEMCPY and MEMSET, reporting a CUPTI released after
 * this build (14.99), and buffers of such records whose fields follow
 * udr_value() below (tests/integration/user-defined.sh recomputes them).
 * "hostile" describes the kernel's start past the record's end. */
static const uint32_t udr_kinds[3] = {10, 1, 2};
static const unsigned udr_types[3] = {CUPTIMON_REC_KERNEL, CUPTIMON_REC_MEMCPY,
                                      CUPTIMON_REC_MEMSET};

static json_object *udr_describe(int hostile, unsigned offs[3][CUPTIMON_FIELDS_MAX],
                                 unsigned size[3], unsigned shift)
{
    json_object *rl = json_object_new_object();
    for (int t = 0; t < 3; t++) {
        unsigned n, off = 4 + shift;
        const char *const *names = cuptimon__rec_field_names(udr_types[t], &n);
        json_object *d = json_object_new_object(), *fields = json_object_new_array();
        for (unsigned j = n; j-- > 0;) {
            unsigned w = cuptimon__rec_field_width(udr_types[t], j);
            json_object *e = json_object_new_object();
            json_object_object_add(e, "field", json_object_new_string(names[j]));
            json_object_object_add(e, "offset", json_object_new_int((int)off));
            json_object_object_add(e, "size", json_object_new_int((int)w));
            json_object_array_add(fields, e);
            offs[t][j] = off;
            off += w;
        }
        size[t] = (off + 7) & ~7u;
        if (hostile && t == 0) {
            json_object *e = json_object_array_get_idx(fields, n - 1 - CUPTIMON_FK_start);
            json_object_object_add(e, "offset", json_object_new_int((int)size[t] - 4));
        }
        json_object_object_add(d, "size", json_object_new_int((int)size[t]));
        json_object_object_add(d, "fields", fields);
        char key[16];
        snprintf(key, sizeof key, "%u", udr_kinds[t]);
        json_object_object_add(rl, key, d);
    }
    return rl;
}

static void udr_put(uint8_t *rec, unsigned off, unsigned w, uint64_t v)
{
    memcpy(rec + off, &v, w < 8 ? w : 8);
}

/* Record i: a memset every 11th, else a memcpy every 7th, else a kernel. */
static unsigned udr_type_of(uint64_t i)
{
    return i % 11 == 10 ? 2 : i % 7 == 6 ? 1 : 0;
}

static void udr_record(uint8_t *rec, unsigned t, const unsigned *off, unsigned size, uint64_t i,
                       uint64_t start)
{
    memset(rec, 0, size);
    memcpy(rec, &udr_kinds[t], 4);
    if (t == 0) {
        udr_put(rec, off[CUPTIMON_FK_start], 8, start);
        udr_put(rec, off[CUPTIMON_FK_end], 8, start + 1000 + i % 100);
        udr_put(rec, off[CUPTIMON_FK_gridX], 4, 1 + i % 5);
        udr_put(rec, off[CUPTIMON_FK_gridY], 4, 2);
        udr_put(rec, off[CUPTIMON_FK_gridZ], 4, 3);
        udr_put(rec, off[CUPTIMON_FK_blockX], 4, 32 * (1 + i % 4));
        udr_put(rec, off[CUPTIMON_FK_blockY], 4, 1);
        udr_put(rec, off[CUPTIMON_FK_blockZ], 4, 1);
        udr_put(rec, off[CUPTIMON_FK_registersPerThread], 2, 16 + i % 8);
        udr_put(rec, off[CUPTIMON_FK_dynamicSharedMemory], 4, 256 * (i % 3));
        udr_put(rec, off[CUPTIMON_FK_streamId], 4, 7 + i % 2);
        udr_put(rec, off[CUPTIMON_FK_deviceId], 4, 0);
        udr_put(rec, off[CUPTIMON_FK_contextId], 4, 1);
    } else if (t == 1) {
        udr_put(rec, off[CUPTIMON_FMC_start], 8, start);
        udr_put(rec, off[CUPTIMON_FMC_end], 8, start + 500);
        udr_put(rec, off[CUPTIMON_FMC_bytes], 8, 4096 * (1 + i % 3));
        udr_put(rec, off[CUPTIMON_FMC_copyKind], 1, 1 + i % 2);
        udr_put(rec, off[CUPTIMON_FMC_streamId], 4, 7 + i % 2);
        udr_put(rec, off[CUPTIMON_FMC_contextId], 4, 1);
    } else {
        udr_put(rec, off[CUPTIMON_FMS_start], 8, start);
        udr_put(rec, off[CUPTIMON_FMS_end], 8, start + 300);
        udr_put(rec, off[CUPTIMON_FMS_bytes], 8, 512 * (1 + i % 5));
        udr_put(rec, off[CUPTIMON_FMS_value], 4, i % 256);
        udr_put(rec, off[CUPTIMON_FMS_memoryKind], 2, 3);
        udr_put(rec, off[CUPTIMON_FMS_streamId], 4, 7 + i % 2);
        udr_put(rec, off[CUPTIMON_FMS_contextId], 4, 1);
    }
}

static uint64_t udr_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Reads daemon messages until `slot` is released, answering flushes as the
 * shim does (FLUSH_DONE with the flush's id). */
static int udr_wait_release(struct session *s, uint32_t slot, uint64_t seq)
{
    long long deadline = now_ms() + REPLY_MS;
    for (;;) {
        struct cuptimon_msg_hdr h;
        char *body = NULL;
        long long left = deadline - now_ms();
        int rc = read_frame(&s->c, &h, &body, left > 0 ? (int)left : 0);
        CHECK(rc == 1, "no BUFFER_RELEASE for slot %u: %s", slot, rc == 0 ? "EOF" : strerror(-rc));
        if (h.type == CUPTIMON_MSG_FLUSH) {
            struct cuptimon_flush f;
            struct cuptimon_flush_done d = {0};
            uint8_t out[CUPTIMON_FLUSH_DONE_SIZE];
            if (cuptimon__flush_decode((const uint8_t *)body, h.length, &f) == 0) {
                d.flush_id = f.flush_id;
                cuptimon__flush_done_encode(out, &d);
                send_msg(&s->c, CUPTIMON_MSG_FLUSH_DONE, out, sizeof out, NULL, 0);
            }
            free(body);
            continue;
        }
        if (is_command(h.type)) {
            free(body);
            continue;
        }
        struct cuptimon_buffer_release r;
        int bad = h.type != CUPTIMON_MSG_BUFFER_RELEASE ||
                  cuptimon__buffer_release_decode((const uint8_t *)body, h.length, &r) < 0;
        free(body);
        CHECK(!bad, "expected BUFFER_RELEASE, got %s", cuptimon__type_name(h.type));
        CHECK(r.slot == slot && r.seq == seq && r.status == 0,
              "released slot %u seq %" PRIu64 " status %u, expected slot %u seq %" PRIu64, r.slot,
              r.seq, r.status, slot, seq);
        return 0;
    }
}

/* mode 0: as described; 1: a hostile description; 2: a CUPTI 13.3 v2
 * shim's session whose layouts change half way (LAYOUTS, issue 28), with
 * hostile LAYOUTS and a STRINGS batch that forges one around them. */
static int udr_run(int mode)
{
    unsigned offs[3][CUPTIMON_FIELDS_MAX], size[3], offs2[3][CUPTIMON_FIELDS_MAX], size2[3];
    int hostile = mode == 1;
    json_object *rl = udr_describe(hostile, offs, size, 0), *h = json_object_new_object(), *rs;
    json_object *rl2 = udr_describe(0, offs2, size2, 8);
    const uint32_t slots = 4;
    const uint64_t slot_size = 1u << 20;
    long count = opt_count > 0 ? opt_count : 20000;
    long hold = opt_hold_ms >= 0 ? opt_hold_ms : 3000;
    uint64_t counts[3] = {0, 0, 0}, seq = 0, i = 0;
    struct session s;
    char key[16];

    json_object_object_add(h, "pid", json_object_new_int64((int64_t)getpid()));
    json_object_object_add(h, "uid", json_object_new_int64((int64_t)getuid()));
    json_object_object_add(h, "hostname", json_object_new_string("hostile"));
    json_object_object_add(h, "exe", json_object_new_string("hostile-producer"));
    json_object_object_add(h, "cupti_version", json_object_new_int(mode == 2 ? 130300 : 149900));
    rs = json_object_new_object();
    for (int t = 0; t < 3; t++) {
        snprintf(key, sizeof key, "%u", udr_kinds[t]);
        json_object_object_add(rs, key, json_object_new_int(mode == 2 ? 1 : (int)size[t]));
    }
    json_object_object_add(h, "record_sizes", rs);
    if (mode == 2) {
        /* As the shim on CUPTI's v2 path connects: before its first
         * buffer, so without layouts. */
        json_object_object_add(h, "activity_api", json_object_new_string("v2"));
        json_object_object_add(h, "user_defined_records", json_object_new_boolean(1));
    } else {
        json_object_object_add(h, "record_layouts", json_object_get(rl));
    }
    json_object *job = json_object_new_object();
    char label[80];
    snprintf(label, sizeof label, "hostile-%s", case_name);
    json_object_object_add(job, "label", json_object_new_string(label));
    json_object_object_add(h, "job", job);
    json_object *pool = json_object_new_object();
    json_object_object_add(pool, "slots", json_object_new_int((int)slots));
    json_object_object_add(pool, "slot_size", json_object_new_int64((int64_t)slot_size));
    json_object_object_add(h, "pool", pool);

    memset(&s, 0, sizeof s);
    s.slots = slots;
    s.slot_size = slot_size;
    CHECK(pconnect(&s.c) == 0, "connect");
    int fd = good_pool(slots, slot_size);
    CHECK(fd >= 0, "memfd: %s", strerror(-fd));
    s.pool = mmap(NULL, slots * slot_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(s.pool != MAP_FAILED, "mmap: %s", strerror(errno));
    const char *txt = json_object_to_json_string(h);
    int rc = send_msg(&s.c, CUPTIMON_MSG_HELLO, txt, strlen(txt), &fd, 1);
    close(fd);
    json_object_put(h);
    CHECK(rc == 0, "send hello: %s", strerror(-rc));
    {
        struct cuptimon_msg_hdr hh;
        char *body = NULL;
        rc = read_reply(&s.c, &hh, &body, REPLY_MS);
        CHECK(rc == 1 && hh.type == CUPTIMON_MSG_HELLO_ACK, "no HELLO_ACK");
        json_object *ack = json_tokener_parse(body), *v;
        if (ack && json_object_object_get_ex(ack, "session", &v))
            s.id = json_object_get_int64(v);
        CHECK(mode != 2 || (ack && json_object_object_get_ex(ack, "layouts", &v) &&
                            json_object_get_boolean(v)),
              "the HELLO_ACK does not say \"layouts\"");
        json_object_put(ack);
        free(body);
    }
    if (mode == 2) {
        /* A layout forged through STRINGS, and broken LAYOUTS: refused. */
        struct cuptimon_buf b = {0};
        CHECK(cuptimon__strings_begin(&b) == 0 &&
                  cuptimon__strings_add(&b, CUPTIMON_LAYOUTS_KEY(0), "{}", 2) == 0,
              "strings");
        CHECK(send_msg(&s.c, CUPTIMON_MSG_STRINGS, b.data, b.len, NULL, 0) == 0, "send");
        cuptimon__buf_free(&b);
        CHECK(send_msg(&s.c, CUPTIMON_MSG_LAYOUTS, "{\"seq\": 0", 9, NULL, 0) == 0, "send");
        static const char neg[] = "{\"seq\": -1, \"record_layouts\": {}}";
        CHECK(send_msg(&s.c, CUPTIMON_MSG_LAYOUTS, neg, strlen(neg), NULL, 0) == 0, "send");
        expect_log("STRINGS batch holds a layouts key, which only LAYOUTS may set");
        expect_log("LAYOUTS is not {\"seq\": N, \"record_layouts\": {...}} (ignored)");
    }

    /* count records over `hold` ms, in 30 buffers at most. */
    long batches = 30, per = (count + batches - 1) / batches;
    for (long b = 0; b < batches && (long)i < count; b++) {
        uint32_t slot = (uint32_t)(seq % slots);
        if (mode == 2 && (b == 0 || b == batches / 2)) {
            /* The layouts of the buffers from this one on; half way they
             * change (another offset and size for every kind). */
            json_object *l = json_object_new_object();
            json_object_object_add(l, "seq", json_object_new_int64((int64_t)seq));
            json_object_object_add(l, "record_layouts", json_object_get(b ? rl2 : rl));
            const char *lt = json_object_to_json_string(l);
            CHECK(send_msg(&s.c, CUPTIMON_MSG_LAYOUTS, lt, strlen(lt), NULL, 0) == 0, "send");
            json_object_put(l);
            if (b) {
                memcpy(offs, offs2, sizeof offs);
                memcpy(size, size2, sizeof size);
                /* Too late for the buffers already archived: refused. */
                static const char late[] = "{\"seq\": 0, \"record_layouts\": {}}";
                CHECK(send_msg(&s.c, CUPTIMON_MSG_LAYOUTS, late, strlen(late), NULL, 0) == 0,
                      "send");
                expect_log("LAYOUTS for buffer 0, but buffer %" PRIu64 " came already (ignored)",
                           seq - 1);
            }
        }
        uint8_t *p = s.pool + slot * slot_size;
        uint64_t valid = 0, n = 0, t0 = udr_now_ns();
        for (long k = 0; k < per && (long)i < count; k++, i++, n++) {
            unsigned t = udr_type_of(i);
            CHECK(valid + size[t] <= slot_size, "slot too small");
            udr_record(p + valid, t, offs[t], size[t], i, t0 + (uint64_t)k * 2000);
            valid += size[t];
            counts[t]++;
        }
        struct cuptimon_buffer_ready m = {
            .slot = slot, .valid_size = valid, .seq = seq, .records = n, .cupti_ts = udr_now_ns()};
        m.realtime_ns = m.cupti_ts;
        uint8_t body[CUPTIMON_BUFFER_READY_SIZE];
        cuptimon__buffer_ready_encode(body, &m);
        CHECK(send_msg(&s.c, CUPTIMON_MSG_BUFFER_READY, body, sizeof body, NULL, 0) == 0, "send");
        if ((rc = udr_wait_release(&s, slot, seq)))
            return rc;
        seq++;
        usleep((useconds_t)(hold * 1000 / batches));
    }
    if (mode == 2) {
        if ((rc = check_counter(s.id, "protocol_errors", 4)) ||
            (rc = check_counter(s.id, "layout_changes", 2)))
            return rc;
    }
    const char *bye = "{}";
    send_msg(&s.c, CUPTIMON_MSG_BYE, bye, strlen(bye), NULL, 0);
    close_session(&s);
    json_object_put(rl);
    json_object_put(rl2);
    printf("udr-report: {\"pid\":%ld,\"records\":%" PRIu64 ",\"kernels\":%" PRIu64
           ",\"memcpys\":%" PRIu64 ",\"memsets\":%" PRIu64 ",\"sizes\":[%u,%u,%u]}\n",
           (long)getpid(), i, counts[0], counts[1], counts[2], size[0], size[1], size[2]);
    if (hostile)
        expect_log("its user-defined record layouts are refused (kind 10 (CONCURRENT_KERNEL): "
                   "field start at offset %u (8 bytes) is not inside",
                   size[0] - 4);
    note("%" PRIu64 " records in %" PRIu64 " buffers, packed as described", i, seq);
    return 0;
}

static int case_user_defined(void)
{
    return udr_run(0);
}

static int case_user_defined_hostile(void)
{
    return udr_run(1);
}

static int case_user_defined_layouts(void)
{
    return udr_run(2);
}

/* ---- cases: order and the data path ------------------------------------- */

static int case_ready_before_hello(void)
{
    struct pconn c;
    if (pconnect(&c) < 0)
        return fail("connect");
    struct cuptimon_buffer_ready m = {.slot = 0, .valid_size = 64};
    uint8_t body[CUPTIMON_BUFFER_READY_SIZE];
    cuptimon__buffer_ready_encode(body, &m);
    int rc = send_msg(&c, CUPTIMON_MSG_BUFFER_READY, body, sizeof body, NULL, 0);
    CHECK(rc == 0, "send: %s", strerror(-rc));
    rc = expect_error(&c, "EPROTO", "the first message must be HELLO, not BUFFER_READY");
    pclose_(&c);
    if (rc)
        return rc;
    /* The same for strings and for a type nobody knows. */
    if (pconnect(&c) < 0)
        return fail("connect");
    uint8_t empty[CUPTIMON_STRINGS_HDR_SIZE] = {0};
    send_msg(&c, CUPTIMON_MSG_STRINGS, empty, sizeof empty, NULL, 0);
    rc = expect_error(&c, "EPROTO", "not STRINGS");
    pclose_(&c);
    if (rc)
        return rc;
    if (pconnect(&c) < 0)
        return fail("connect");
    send_msg(&c, 0x7777, "x", 1, NULL, 0);
    rc = expect_error(&c, "EPROTO", "not unknown");
    pclose_(&c);
    return rc;
}

static int case_ready_slot_range(void)
{
    struct session s;
    int rc = open_session(&s);
    if (rc)
        return rc;
    CHECK(send_ready(&s, 99, 100, 0) == 0, "send");
    CHECK(send_ready(&s, NSLOTS, 0, 1) == 0, "send");
    CHECK(send_ready(&s, UINT32_MAX, 16, 2) == 0, "send");
    expect_log("BUFFER_READY slot 99 size 100 is outside the pool (%u slots of %u)", NSLOTS, SLOT);
    expect_log("BUFFER_READY slot %u size 0 is outside the pool", NSLOTS);
    expect_log("BUFFER_READY slot %u size 16 is outside the pool", UINT32_MAX);
    /* The session goes on: a good buffer after them is archived, and only
     * that one is released. */
    memset(s.pool, 0, 64);
    CHECK(send_ready(&s, 1, 64, 3) == 0, "send");
    if ((rc = expect_release(&s, 1, 3)))
        return rc;
    if ((rc = check_counter(s.id, "protocol_errors", 3)) ||
        (rc = check_counter(s.id, "buffers_received", 1)))
        return rc;
    rc = expect_silence(&s, 300, "after the refused slots");
    close_session(&s);
    return rc;
}

static int case_ready_size_range(void)
{
    struct session s;
    int rc = open_session(&s);
    if (rc)
        return rc;
    CHECK(send_ready(&s, 1, SLOT + 1, 0) == 0, "send");
    CHECK(send_ready(&s, 2, UINT64_MAX, 1) == 0, "send");
    CHECK(send_ready(&s, 3, (uint64_t)1 << 40, 2) == 0, "send");
    expect_log("BUFFER_READY slot 1 size %u is outside the pool", SLOT + 1);
    expect_log("BUFFER_READY slot 2 size %" PRIu64 " is outside the pool", UINT64_MAX);
    /* A whole slot is fine. */
    CHECK(send_ready(&s, 1, SLOT, 3) == 0, "send");
    if ((rc = expect_release(&s, 1, 3)))
        return rc;
    /* A body of the wrong size. */
    uint8_t body[CUPTIMON_BUFFER_READY_SIZE + 8] = {0};
    send_msg(&s.c, CUPTIMON_MSG_BUFFER_READY, body, CUPTIMON_BUFFER_READY_SIZE - 1, NULL, 0);
    send_msg(&s.c, CUPTIMON_MSG_BUFFER_READY, body, CUPTIMON_BUFFER_READY_SIZE + 8, NULL, 0);
    send_msg(&s.c, CUPTIMON_MSG_BUFFER_READY, body, 0, NULL, 0);
    expect_log("session %" PRId64 " (pid %d): BUFFER_READY with a bad body size", s.id,
               (int)getpid());
    CHECK(send_ready(&s, 0, 8, 4) == 0, "send");
    if ((rc = expect_release(&s, 0, 4)))
        return rc;
    if ((rc = check_counter(s.id, "protocol_errors", 6)) ||
        (rc = check_counter(s.id, "buffers_received", 2)) ||
        (rc = check_counter(s.id, "bytes_received", SLOT + 8)))
        return rc;
    close_session(&s);
    return 0;
}

static int case_ready_twice(void)
{
    struct session s;
    int rc = open_session(&s);
    if (rc)
        return rc;
    /* Both in one write, so that the daemon sees the second before it can
     * have written and released the first. */
    struct cuptimon_buf b = {0};
    uint8_t body[CUPTIMON_BUFFER_READY_SIZE];
    for (uint64_t seq = 0; seq < 2; seq++) {
        struct cuptimon_buffer_ready m = {.slot = 2, .valid_size = 128, .seq = seq};
        cuptimon__buffer_ready_encode(body, &m);
        cuptimon__frame_append(&b, CUPTIMON_MSG_BUFFER_READY, body, sizeof body);
    }
    rc = send_raw(&s.c, b.data, b.len, NULL, 0);
    cuptimon__buf_free(&b);
    CHECK(rc == 0, "send: %s", strerror(-rc));
    expect_log("BUFFER_READY for slot 2, which the daemon still holds");
    if ((rc = expect_release(&s, 2, 0)))
        return rc;
    if ((rc = expect_silence(&s, 300, "after a slot announced twice")))
        return rc;
    /* Released, the slot may be announced again. */
    CHECK(send_ready(&s, 2, 128, 2) == 0, "send");
    if ((rc = expect_release(&s, 2, 2)))
        return rc;
    rc = check_counter(s.id, "buffers_received", 2);
    if (rc == 0)
        rc = check_counter(s.id, "protocol_errors", 1);
    close_session(&s);
    return rc;
}

/* A slot full of random bytes is archived as it is (the daemon does not
 * parse it); decoding it later must not crash (hostile.sh decodes it). */
static int case_ready_garbage(void)
{
    struct session s;
    int rc = open_session(&s);
    if (rc)
        return rc;
    uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    for (uint32_t i = 0; i < NSLOTS * SLOT; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(s.pool + i, &x, 8);
    }
    /* Plausible kinds at record starts, to reach deeper into the decoder. */
    for (uint32_t i = 0; i < SLOT; i += 216)
        s.pool[i] = (uint8_t)(10 + i % 3);
    for (uint32_t slot = 0; slot < NSLOTS; slot++)
        CHECK(send_ready(&s, slot, SLOT - slot * 100, slot) == 0, "send");
    for (uint32_t slot = 0; slot < NSLOTS; slot++)
        if ((rc = expect_release(&s, slot, slot)))
            return rc;
    note("%u slots of random bytes archived; archive %s", NSLOTS, s.archive);
    printf("garbage-archive: %s\n", s.archive);
    close_session(&s);
    return 0;
}

/* Sends one malformed STRINGS batch; returns 1 (one more to count). */
static int send_bad(struct session *s, const uint8_t *m, size_t n)
{
    send_msg(&s->c, CUPTIMON_MSG_STRINGS, m, n, NULL, 0);
    return 1;
}

/* STRINGS batches that lie; none of them may be taken, a good one is. */
static int case_strings_malformed(void)
{
    struct session s;
    int rc = open_session(&s);
    if (rc)
        return rc;
    uint8_t m[256];
    size_t n;
    int bad = 0;
#define ENTRY(at, ptr, len)                                                                        \
    do {                                                                                           \
        cuptimon__put_u64(m + (at), ptr);                                                          \
        cuptimon__put_u32(m + (at) + 8, len);                                                      \
    } while (0)
    /* 1: no terminator ("hello" then 'X' where the NUL must be) */
    memset(m, 0, sizeof m);
    cuptimon__put_u32(m, 1);
    ENTRY(8, 0x1000, 5);
    memcpy(m + 20, "helloX", 6);
    n = 26;
    bad += send_bad(&s, m, n);
    /* 2: the last entry's bytes run off the end of the body */
    memset(m, 0, sizeof m);
    cuptimon__put_u32(m, 1);
    ENTRY(8, 0x1000, 200);
    memcpy(m + 20, "short", 6);
    n = 26;
    bad += send_bad(&s, m, n);
    /* 3: count 2, one entry */
    memset(m, 0, sizeof m);
    cuptimon__put_u32(m, 2);
    ENTRY(8, 0x1000, 5);
    memcpy(m + 20, "hello", 6);
    n = 26 + 13; /* room for a second header, filled with zeros: len 0, NUL ok... */
    cuptimon__put_u32(m + 26 + 8, 50); /* ...but it claims 50 bytes */
    bad += send_bad(&s, m, n);
    /* 4: count 0, one entry behind it */
    memset(m, 0, sizeof m);
    ENTRY(8, 0x1000, 5);
    memcpy(m + 20, "hello", 6);
    n = 26;
    bad += send_bad(&s, m, n);
    /* 5: count 0xffffffff */
    memset(m, 0, sizeof m);
    cuptimon__put_u32(m, UINT32_MAX);
    ENTRY(8, 0x1000, 5);
    memcpy(m + 20, "hello", 6);
    n = 26;
    bad += send_bad(&s, m, n);
    /* 6: a NUL inside the string */
    memset(m, 0, sizeof m);
    cuptimon__put_u32(m, 1);
    ENTRY(8, 0x1000, 5);
    memcpy(m + 20, "he\0lo", 6);
    n = 26;
    bad += send_bad(&s, m, n);
    /* 7: a length over the protocol's maximum */
    memset(m, 0, sizeof m);
    cuptimon__put_u32(m, 1);
    ENTRY(8, 0x1000, CUPTIMON_STRING_MAX_LEN + 1);
    n = 26;
    bad += send_bad(&s, m, n);
    /* 8: reserved word not zero */
    memset(m, 0, sizeof m);
    cuptimon__put_u32(m, 1);
    cuptimon__put_u32(m + 4, 7);
    ENTRY(8, 0x1000, 5);
    memcpy(m + 20, "hello", 6);
    n = 26;
    bad += send_bad(&s, m, n);
    /* 9: shorter than the batch header */
    bad += send_bad(&s, m, 5);
    /* 10: a good entry followed by trailing bytes */
    memset(m, 0, sizeof m);
    cuptimon__put_u32(m, 1);
    ENTRY(8, 0x1000, 5);
    memcpy(m + 20, "hello", 6);
    n = 26 + 3;
    bad += send_bad(&s, m, n);
#undef ENTRY
    expect_log("session %" PRId64 " (pid %d): STRINGS batch is malformed", s.id, (int)getpid());
    /* A good batch of two. */
    struct cuptimon_buf good = {0};
    cuptimon__strings_begin(&good);
    cuptimon__strings_add(&good, 0x2000, "_Z6goodonev", 11);
    cuptimon__strings_add(&good, 0x3000, "_Z6goodtwov", 11);
    send_msg(&s.c, CUPTIMON_MSG_STRINGS, good.data, good.len, NULL, 0);
    cuptimon__buf_free(&good);
    /* A buffer after them marks the point where all were processed. */
    CHECK(send_ready(&s, 0, 0, 0) == 0, "send");
    if ((rc = expect_release(&s, 0, 0)))
        return rc;
    if ((rc = check_counter(s.id, "protocol_errors", bad)) ||
        (rc = check_counter(s.id, "strings", 2)))
        return rc;
    char path[800];
    snprintf(path, sizeof path, "%s/strings.bin", s.archive);
    close_session(&s);
    /* Only the good batch reaches the archive: header + 2 entries. */
    off_t want = 16 + 2 * (16 + 11);
    struct stat st;
    long long deadline = now_ms() + 3000;
    while ((stat(path, &st) < 0 || st.st_size != want) && now_ms() < deadline)
        usleep(20000);
    CHECK(stat(path, &st) == 0 && st.st_size == want,
          "%s is %lld bytes, expected %lld (only the "
          "good batch)",
          path, (long long)st.st_size, (long long)want);
    note("%d malformed batches refused whole, the good one archived", bad);
    return 0;
}

static int case_unknown_type(void)
{
    struct session s;
    int rc = open_session(&s);
    if (rc)
        return rc;
    send_msg(&s.c, 0x0299, "abc", 3, NULL, 0);
    send_msg(&s.c, 0xffff, NULL, 0, NULL, 0);
    /* Types the producer has no business sending. */
    uint8_t rel[CUPTIMON_BUFFER_RELEASE_SIZE] = {0};
    send_msg(&s.c, CUPTIMON_MSG_BUFFER_RELEASE, rel, sizeof rel, NULL, 0);
    send_msg(&s.c, CUPTIMON_MSG_REPLY_OK, "{}", 2, NULL, 0);
    send_msg(&s.c, CUPTIMON_MSG_CONTROL, "{\"op\":\"status\"}", 15, NULL, 0);
    expect_log("unexpected message unknown (0x0299) ignored");
    expect_log("unexpected message unknown (0xffff) ignored");
    expect_log("unexpected message BUFFER_RELEASE (0x0202) ignored");
    expect_log("unexpected message CONTROL (0x0401) ignored");
    CHECK(send_ready(&s, 3, 16, 0) == 0, "send");
    if ((rc = expect_release(&s, 3, 0)))
        return rc;
    rc = check_counter(s.id, "protocol_errors", 5);
    close_session(&s);
    return rc;
}

/* ---- cases: headers ------------------------------------------------------ */

/* Sends one raw header (+ body bytes) and expects one error reply, then EOF. */
static int bad_header(uint32_t magic, uint16_t version, uint16_t type, uint32_t length,
                      uint32_t flags, const char *err, const char *needle, struct session *after)
{
    struct pconn tmp, *c = after ? &after->c : &tmp;
    if (!after && pconnect(&tmp) < 0)
        return fail("connect");
    uint8_t h[CUPTIMON_MSG_HDR_SIZE + 64];
    raw_hdr(h, magic, version, type, length, flags);
    memset(h + CUPTIMON_MSG_HDR_SIZE, '{', 64);
    int rc = send_raw(c, h, sizeof h, NULL, 0);
    CHECK(rc == 0 || rc == -EPIPE || rc == -ECONNRESET, "send: %s", strerror(-rc));
    rc = expect_error(c, err, needle);
    if (!after)
        pclose_(&tmp);
    return rc;
}

static int case_bad_version(void)
{
    int rc = bad_header(CUPTIMON_PROTO_MAGIC, CUPTIMON_PROTO_VERSION + 1, CUPTIMON_MSG_HELLO, 64, 0,
                        "EPROTO", "", NULL);
    if (rc)
        return rc;
    /* The reply must name both versions. */
    char needle[100];
    snprintf(needle, sizeof needle, "protocol version %u is not supported; this daemon speaks %u",
             65535u, CUPTIMON_PROTO_VERSION);
    if ((rc = bad_header(CUPTIMON_PROTO_MAGIC, 65535, CUPTIMON_MSG_HELLO, 64, 0, "EPROTO", needle,
                         NULL)))
        return rc;
    snprintf(needle, sizeof needle, "protocol version 0 is not supported; this daemon speaks %u",
             CUPTIMON_PROTO_VERSION);
    if ((rc = bad_header(CUPTIMON_PROTO_MAGIC, 0, CUPTIMON_MSG_HELLO, 64, 0, "EPROTO", needle,
                         NULL)))
        return rc;
    /* Mid-session: the session ends the same way. */
    struct session s;
    if ((rc = open_session(&s)))
        return rc;
    snprintf(needle, sizeof needle, "protocol version %u is not supported; this daemon speaks %u",
             CUPTIMON_PROTO_VERSION + 1, CUPTIMON_PROTO_VERSION);
    rc = bad_header(CUPTIMON_PROTO_MAGIC, CUPTIMON_PROTO_VERSION + 1, CUPTIMON_MSG_BUFFER_READY,
                    CUPTIMON_BUFFER_READY_SIZE, 0, "EPROTO", needle, &s);
    close_session(&s);
    expect_log("pid %d uid %u: Protocol error; closing", (int)getpid(), (unsigned)getuid());
    return rc;
}

static int case_bad_header(void)
{
    int rc = bad_header(0x12345678, CUPTIMON_PROTO_VERSION, CUPTIMON_MSG_HELLO, 64, 0, "EBADMSG",
                        "bad message header", NULL);
    if (rc == 0)
        rc = bad_header(CUPTIMON_PROTO_MAGIC, CUPTIMON_PROTO_VERSION, CUPTIMON_MSG_HELLO, 64, 1,
                        "EBADMSG", "bad message header", NULL);
    expect_log("pid %d uid %u: Bad message; closing", (int)getpid(), (unsigned)getuid());
    return rc;
}

static int case_huge_length(void)
{
    /* 2 GiB: refused from the header alone, before any body is awaited. */
    long long t0 = now_ms();
    int rc = bad_header(CUPTIMON_PROTO_MAGIC, CUPTIMON_PROTO_VERSION, CUPTIMON_MSG_HELLO,
                        0x80000000u, 0, "EMSGSIZE", "bad message header", NULL);
    if (rc)
        return rc;
    CHECK(now_ms() - t0 < 2000, "a 2 GiB header took %lld ms to refuse", now_ms() - t0);
    if ((rc = bad_header(CUPTIMON_PROTO_MAGIC, CUPTIMON_PROTO_VERSION, CUPTIMON_MSG_HELLO,
                         UINT32_MAX, 0, "EMSGSIZE", "bad message header", NULL)))
        return rc;
    if ((rc = bad_header(CUPTIMON_PROTO_MAGIC, CUPTIMON_PROTO_VERSION, CUPTIMON_MSG_HELLO,
                         CUPTIMON_MSG_MAX_BODY + 1, 0, "EMSGSIZE", "bad message header", NULL)))
        return rc;
    /* Mid-session, on a data message. */
    struct session s;
    if ((rc = open_session(&s)))
        return rc;
    rc = bad_header(CUPTIMON_PROTO_MAGIC, CUPTIMON_PROTO_VERSION, CUPTIMON_MSG_STRINGS, 0x80000000u,
                    0, "EMSGSIZE", "bad message header", &s);
    close_session(&s);
    expect_log("pid %d uid %u: Message too long; closing", (int)getpid(), (unsigned)getuid());
    if (rc)
        return rc;
    /* The largest legal body, half sent, then the producer goes away: the
     * daemon waits for the rest without harm and forgets it at EOF. */
    struct pconn c;
    if (pconnect(&c) < 0)
        return fail("connect");
    uint8_t *big = malloc(CUPTIMON_MSG_MAX_BODY / 2 + CUPTIMON_MSG_HDR_SIZE);
    CHECK(big, "malloc");
    memset(big, ' ', CUPTIMON_MSG_MAX_BODY / 2 + CUPTIMON_MSG_HDR_SIZE);
    raw_hdr(big, CUPTIMON_PROTO_MAGIC, CUPTIMON_PROTO_VERSION, CUPTIMON_MSG_HELLO,
            CUPTIMON_MSG_MAX_BODY, 0);
    rc = send_raw(&c, big, CUPTIMON_MSG_MAX_BODY / 2 + CUPTIMON_MSG_HDR_SIZE, NULL, 0);
    free(big);
    CHECK(rc == 0, "send: %s", strerror(-rc));
    usleep(200000);
    pclose_(&c);
    return 0;
}

/* ---- cases: floods ------------------------------------------------------- */

/* opt_count valid FLUSH_DONE messages as fast as the socket takes them: the
 * daemon must take them all without closing us or falling over, and serve
 * this session's next buffer after them. */
static int case_flood(void)
{
    long count = opt_count > 0 ? opt_count : 100000;
    struct session s;
    int rc = open_session(&s);
    if (rc)
        return rc;
    struct cuptimon_buf b = {0};
    uint8_t body[CUPTIMON_FLUSH_DONE_SIZE];
    long sent = 0;
    long long t0 = now_ms();
    while (sent < count) {
        b.len = 0;
        for (int i = 0; i < 4096 && sent < count; i++, sent++) {
            struct cuptimon_flush_done f = {.flush_id = (uint64_t)sent + 1000000};
            cuptimon__flush_done_encode(body, &f);
            cuptimon__frame_append(&b, CUPTIMON_MSG_FLUSH_DONE, body, sizeof body);
        }
        rc = send_raw(&s.c, b.data, b.len, NULL, 0);
        if (rc < 0) {
            cuptimon__buf_free(&b);
            return fail("the daemon stopped taking the flood after %ld messages: %s", sent,
                        strerror(-rc));
        }
    }
    cuptimon__buf_free(&b);
    long long t1 = now_ms();
    CHECK(send_ready(&s, 0, 0, 0) == 0, "send");
    if ((rc = expect_release(&s, 0, 0)))
        return rc;
    long long t2 = now_ms();
    note("%ld FLUSH_DONE sent in %lld ms; the buffer after them was released %lld ms later", count,
         t1 - t0, t2 - t1);
    rc = check_counter(s.id, "protocol_errors", 0);
    close_session(&s);
    return rc;
}

/* opt_count invalid BUFFER_READY messages (slot 99): each is refused; how
 * much the daemon logs about them is for the calling script to judge. */
static int case_bad_flood(void)
{
    long count = opt_count > 0 ? opt_count : 100000;
    struct session s;
    int rc = open_session(&s);
    if (rc)
        return rc;
    struct cuptimon_buf b = {0};
    uint8_t body[CUPTIMON_BUFFER_READY_SIZE];
    long sent = 0;
    while (sent < count) {
        b.len = 0;
        for (int i = 0; i < 4096 && sent < count; i++, sent++) {
            struct cuptimon_buffer_ready m = {.slot = 99, .valid_size = 8, .seq = (uint64_t)sent};
            cuptimon__buffer_ready_encode(body, &m);
            cuptimon__frame_append(&b, CUPTIMON_MSG_BUFFER_READY, body, sizeof body);
        }
        if ((rc = send_raw(&s.c, b.data, b.len, NULL, 0)) < 0) {
            cuptimon__buf_free(&b);
            return fail("the daemon stopped reading after %ld messages: %s", sent, strerror(-rc));
        }
    }
    cuptimon__buf_free(&b);
    CHECK(send_ready(&s, 0, 0, (uint64_t)count) == 0, "send");
    if ((rc = expect_release(&s, 0, (uint64_t)count)))
        return rc;
    rc = check_counter(s.id, "protocol_errors", count);
    note("%ld refused BUFFER_READY messages; the good one after them was archived", count);
    close_session(&s);
    return rc;
}

/* opt_count connections that never say hello, held for opt_hold_ms. */
static int case_idle_connections(void)
{
    long count = opt_count > 0 ? opt_count : 100;
    long hold = opt_hold_ms >= 0 ? opt_hold_ms : 3000;
    int *fds = calloc((size_t)count, sizeof *fds);
    CHECK(fds, "calloc");
    long ok = 0, refused = 0;
    for (long i = 0; i < count; i++) {
        fds[i] = cuptimon__connect(opt_socket, 1);
        if (fds[i] >= 0)
            ok++;
        else
            refused++;
    }
    note("%ld idle connections open (%ld refused by the kernel), holding them %ld ms", ok, refused,
         hold);
    usleep((useconds_t)hold * 1000);
    /* How many the daemon hung up on meanwhile (a hello timeout). */
    long hung_up = 0;
    for (long i = 0; i < count; i++) {
        if (fds[i] < 0)
            continue;
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        char c;
        if (poll(&p, 1, 0) > 0 && recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0)
            hung_up++;
        close(fds[i]);
    }
    free(fds);
    printf("idle: open %ld refused %ld hung_up %ld\n", ok, refused, hung_up);
    return 0;
}

/* ---- table -------------------------------------------------------------- */

static const struct {
    const char *name;
    int (*fn)(void);
    const char *what;
} cases[] = {
    {"hello-no-fd", case_hello_no_fd, "HELLO with no pool fd"},
    {"hello-not-json", case_hello_not_json, "HELLO that is not a JSON object"},
    {"hello-no-pool", case_hello_no_pool, "HELLO without pool geometry"},
    {"hello-unsealed", case_hello_unsealed, "unsealed / half-sealed memfd"},
    {"hello-short-pool", case_hello_short_pool, "sealed memfd smaller than slots x slot_size"},
    {"hello-geometry", case_hello_geometry, "absurd pool geometry"},
    {"hello-hugetlb", case_hello_hugetlb, "a sealed hugetlbfs memfd as the pool"},
    {"pool-holes", case_pool_holes, "buffers over punched-out pages; a sparse 1 GiB pool"},
    {"hello-pipe", case_hello_pipe, "a pipe as the pool"},
    {"hello-regular-file", case_hello_regular_file, "a regular file / device as the pool"},
    {"hello-extra-fds", case_hello_extra_fds, "several fds on the hello"},
    {"counters-lie", case_counters_lie, "BUFFER_READY and BYE counters past any real ones"},
    {"pid-lie", case_pid_lie, "a pid in the hello that is not the peer's"},
    {"fd-after-hello", case_fd_after_hello, "fds on later messages, a second HELLO"},
    {"hello-then-close", case_hello_then_close, "a producer gone before the hello's reply"},
    {"close-unread", case_close_unread, "a producer that closes with the daemon's replies unread"},
    {"ready-before-hello", case_ready_before_hello, "data messages before HELLO"},
    {"ready-slot-range", case_ready_slot_range, "BUFFER_READY slot index out of range"},
    {"ready-size-range", case_ready_size_range, "BUFFER_READY valid_size > slot_size, bad body"},
    {"ready-twice", case_ready_twice, "the same slot twice without release"},
    {"ready-garbage", case_ready_garbage, "slots of random bytes"},
    {"strings-malformed", case_strings_malformed, "STRINGS without terminators, lying counts"},
    {"unknown-type", case_unknown_type, "unknown and misdirected message types"},
    {"bad-version", case_bad_version, "a wrong protocol version"},
    {"bad-header", case_bad_header, "bad magic, non-zero flags"},
    {"huge-length", case_huge_length, "a header claiming a 2 GiB body"},
    {"flood", case_flood, "100k valid FLUSH_DONE messages"},
    {"bad-flood", case_bad_flood, "100k refused BUFFER_READY messages"},
    {"idle-connections", case_idle_connections, "connections that never say hello"},
    {"user-defined", case_user_defined, "records packed as its hello's record_layouts say"},
    {"user-defined-layouts", case_user_defined_layouts,
     "a v2 session whose layouts change half way (LAYOUTS), around hostile LAYOUTS"},
    {"user-defined-hostile", case_user_defined_hostile,
     "record_layouts with a field outside its record"},
};

static void usage(FILE *f)
{
    fprintf(f, "Usage: hostile-producer --socket PATH --control-socket PATH [--count N] "
               "[--hold-ms MS] CASE\n"
               "       hostile-producer --list\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {"control-socket", required_argument, NULL, 'c'},
        {"count", required_argument, NULL, 'n'},
        {"hold-ms", required_argument, NULL, 'H'},
        {"list", no_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "s:c:n:H:Lh", opts, NULL)) != -1) {
        switch (opt) {
        case 's': opt_socket = optarg; break;
        case 'c': opt_control = optarg; break;
        case 'n': opt_count = strtol(optarg, NULL, 10); break;
        case 'H': opt_hold_ms = strtol(optarg, NULL, 10); break;
        case 'L':
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                printf("%s\t%s\n", cases[i].name, cases[i].what);
            return 0;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind + 1 != argc || !opt_socket || !opt_control) {
        usage(stderr);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    case_name = argv[optind];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(cases[i].name, case_name) == 0) {
            int rc = cases[i].fn();
            if (rc == 0 && skip_reason)
                printf("skipped: %s (%s)\n", case_name, cases[i].what);
            else if (rc == 0)
                printf("ok: %s (%s)\n", case_name, cases[i].what);
            return rc ? 1 : 0;
        }
    }
    fprintf(stderr, "hostile-producer: unknown case '%s' (see --list)\n", case_name);
    return 2;
}
