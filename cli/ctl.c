/*
 * cuptimonctl's control client (see ctl.h).
 */
#include "config.h"

#include "ctl.h"

#include <errno.h>
#include <json-c/json.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "archive/archive.h"
#include "archive/json-get.h"
#include "cuptimon-proto.h"

int cuptimon__ctl_set_path(struct cuptimon_ctl *c, const char *arg, const char *cmd)
{
    if (!*arg || strlen(arg) >= sizeof(c->path)) {
        fprintf(stderr, "%s: --control-socket '%s' must be 1..%zu bytes\n", cmd, arg,
                sizeof(c->path) - 1);
        return -1;
    }
    snprintf(c->path, sizeof(c->path), "%s", arg);
    return 0;
}

int cuptimon__ctl_resolve(struct cuptimon_ctl *c, char *err, size_t errlen)
{
    const char *env = getenv("CUPTIMON_CONTROL_SOCKET");
    char dir[256];

    if (c->path[0])
        return 0;
    if (env && *env) {
        if (strlen(env) >= sizeof(c->path)) {
            snprintf(err, errlen, "CUPTIMON_CONTROL_SOCKET is too long (%zu bytes; at most %zu)",
                     strlen(env), sizeof(c->path) - 1);
            return -1;
        }
        snprintf(c->path, sizeof(c->path), "%s", env);
        return 0;
    }
    if (cuptimon__default_runtime_dir(dir, sizeof(dir)) < 0 ||
        snprintf(c->path, sizeof(c->path), "%s/%s", dir, CUPTIMON_CONTROL_SOCKET_NAME) >=
            (int)sizeof(c->path)) {
        c->path[0] = '\0';
        snprintf(err, errlen, "cannot work out the control socket; pass --control-socket");
        return -1;
    }
    /* A user without a daemon of their own talks to the node's. */
    if (access(c->path, F_OK) != 0 &&
        access(CUPTIMON_SYSTEM_RUNTIME_DIR "/" CUPTIMON_CONTROL_SOCKET_NAME, F_OK) == 0)
        snprintf(c->path, sizeof(c->path), "%s",
                 CUPTIMON_SYSTEM_RUNTIME_DIR "/" CUPTIMON_CONTROL_SOCKET_NAME);
    return 0;
}

json_object *cuptimon__ctl_call(struct cuptimon_ctl *c, json_object *req, char *err, size_t errlen,
                                int *refused)
{
    uint16_t type;
    char *reply = NULL;
    size_t len;
    json_object *o, *m;
    int rc;

    if (refused != NULL)
        *refused = 0;
    if (cuptimon__ctl_resolve(c, err, errlen) < 0)
        return NULL;
    rc =
        cuptimon__control_call(c->path, json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN),
                               c->timeout_ms, &type, &reply, &len);
    if (rc == -ENOENT || rc == -ECONNREFUSED) {
        snprintf(err, errlen,
                 "the daemon is not running: nothing listens on %s (%s). Start it with "
                 "'cuptimond' (or 'systemctl start cuptimond'), or pass --control-socket.",
                 c->path, strerror(-rc));
        return NULL;
    }
    if (rc < 0) {
        snprintf(err, errlen, "talking to the daemon on %s failed: %s", c->path,
                 rc == -ETIMEDOUT ? "no reply in time (see cuptimonctl --timeout)" : strerror(-rc));
        return NULL;
    }
    o = json_tokener_parse(reply);
    if (o == NULL) {
        snprintf(err, errlen, "the daemon's reply is not JSON: %.200s", reply);
        free(reply);
        return NULL;
    }
    free(reply);
    if (type != CUPTIMON_MSG_REPLY_OK) {
        snprintf(err, errlen, "the daemon refused: %s",
                 json_object_object_get_ex(o, "message", &m) ? json_object_get_string(m)
                                                             : json_object_get_string(o));
        json_object_put(o);
        if (refused != NULL)
            *refused = 1;
        return NULL;
    }
    return o;
}

/* ---- --window: stats and export ------------------------------------------ */

static int by_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Asks the daemon for window id: its range into *from and *to, and its
 * sessions' archive directories into *dirs.  0, or the exit status. */
int cuptimon__cli_window_lookup(struct cuptimon_ctl *ctl, const char *prog, long long id,
                                uint64_t *from, uint64_t *to, char ***dirs)
{
    json_object *req = json_object_new_object(), *r, *ws, *w = NULL, *procs;
    char err[600];
    size_t n = 0;
    int ret = 1;

    *dirs = NULL;
    if (req == NULL)
        return 1;
    json_object_object_add(req, "op", json_object_new_string("windows"));
    r = cuptimon__ctl_call(ctl, req, err, sizeof err, NULL);
    json_object_put(req);
    if (r == NULL) {
        fprintf(stderr, "%s: --window %lld: %s\n", prog, id, err);
        return 1;
    }
    ws = cuptimon__json_get(r, "windows");
    for (size_t i = 0;
         ws && json_object_is_type(ws, json_type_array) && i < json_object_array_length(ws); i++)
        if (cuptimon__json_int(json_object_array_get_idx(ws, i), "window", 0) == id)
            w = json_object_array_get_idx(ws, i);
    if (w == NULL) {
        fprintf(stderr,
                "%s: --window %lld: the daemon has no such window that you may see "
                "('cuptimonctl windows' lists them)\n",
                prog, id);
        goto out;
    }
    if (strcmp(cuptimon__json_str(w, "state", ""), "done") != 0) {
        fprintf(stderr,
                "%s: --window %lld: the window is %s; its archive is read once it has "
                "ended and its trace is written ('cuptimonctl end-window %lld')\n",
                prog, id, cuptimon__json_str(w, "state", "?"), id);
        goto out;
    }
    *from = cuptimon__json_uint(w, "start_unix_ns", 0);
    *to = cuptimon__json_uint(w, "end_unix_ns", 0) + 1; /* the window keeps its end */
    procs = cuptimon__json_get(cuptimon__json_get(w, "summary"), "processes");
    n = procs && json_object_is_type(procs, json_type_array) ? json_object_array_length(procs) : 0;
    *dirs = calloc(n + 1, sizeof(**dirs));
    if (*dirs == NULL)
        goto out;
    for (size_t i = 0, k = 0; i < n; i++) {
        const char *d = cuptimon__json_str(json_object_array_get_idx(procs, i), "archive", NULL);
        if (d != NULL && d[0] != '\0' && ((*dirs)[k] = strdup(d)) != NULL)
            k++;
    }
    if ((*dirs)[0] == NULL) {
        fprintf(stderr, "%s: --window %lld: the window holds no process\n", prog, id);
        goto out;
    }
    /* In the order the archive's own listing gives them: the same tables
     * as the archive read over the window's range, to the last bit. */
    for (n = 0; (*dirs)[n] != NULL; n++)
        ;
    qsort(*dirs, n, sizeof(**dirs), by_path);
    ret = 0;
out:
    if (ret != 0) {
        cuptimon__archive_free_list(*dirs);
        *dirs = NULL;
    }
    json_object_put(r);
    return ret;
}
