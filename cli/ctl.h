/*
 * cuptimonctl's one control client: where the daemon's control socket is,
 * and one request/reply over it.  main.c holds the client the global
 * options (--control-socket, --timeout) fill in and hands it to the
 * commands; top and metrics may still name another socket with their own
 * -c.
 */
#ifndef CUPTIMON_CLI_CTL_H
#define CUPTIMON_CLI_CTL_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

struct cuptimon_ctl {
    char path[108]; /* the control socket; "" until set or resolved */
    int timeout_ms; /* how long one request may wait for the reply */
};

/* The default: no socket chosen yet, 10 s per request. */
#define CUPTIMON_CTL_INIT                                                                          \
    {                                                                                              \
        .path = "", .timeout_ms = 10000                                                            \
    }

/* Sets the socket from a --control-socket argument; cmd names the command
 * in the error ("cuptimonctl" or "cuptimonctl top").  Returns 0, or -1
 * after saying why (empty, or too long for a socket address). */
int cuptimon__ctl_set_path(struct cuptimon_ctl *c, const char *arg, const char *cmd);

/* Works out the socket unless one was set: $CUPTIMON_CONTROL_SOCKET, else
 * RUNTIME/control.sock, else the node's (the system runtime directory) when
 * the user has none of their own.  Returns 0, or -1 with err set to one
 * line saying why. */
int cuptimon__ctl_resolve(struct cuptimon_ctl *c, char *err, size_t errlen);

/* Sends one request (resolving the socket first if need be) and returns the parsed
 * reply when the daemon said REPLY_OK.  Otherwise returns NULL with err
 * set to one line saying why (not running, no reply, refused: with the
 * daemon's message) and *refused (when not NULL) set to 1 if the daemon
 * answered with an error, 0 if it could not be reached. */
struct json_object *cuptimon__ctl_call(struct cuptimon_ctl *c, struct json_object *req, char *err,
                                       size_t errlen, int *refused);

/* Asks the daemon for window id (stats and export --window): its range
 * into *from and *to (to: one past its end), and its processes' archive
 * directories into *dirs (cuptimon__archive_free_list()), in the order
 * the archive's own listing gives them.  0, or the exit status after
 * saying why (no daemon, no such window, not ended, no process). */
int cuptimon__cli_window_lookup(struct cuptimon_ctl *ctl, const char *prog, long long id,
                                uint64_t *from, uint64_t *to, char ***dirs);

#endif
