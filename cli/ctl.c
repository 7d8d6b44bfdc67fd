/*
 * cuptimonctl's control client (see ctl.h).
 */
#include "config.h"

#include "ctl.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
