/*
 * Typed reads of JSON members (see json-get.h).
 */
#include "config.h"

#include "json-get.h"

#include <errno.h>
#include <stdlib.h>

#include <json-c/json.h>

json_object *cuptimon__json_get(json_object *o, const char *key)
{
    json_object *v;

    /* json_object_object_get_ex() itself answers 0 for a non-object, and
     * sets v to NULL for a member that is JSON null. */
    if (o == NULL || key == NULL || !json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

const char *cuptimon__json_str(json_object *o, const char *key, const char *dflt)
{
    json_object *v = cuptimon__json_get(o, key);

    return v != NULL && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : dflt;
}

int64_t cuptimon__json_int(json_object *o, const char *key, int64_t dflt)
{
    json_object *v = cuptimon__json_get(o, key);

    return v != NULL ? json_object_get_int64(v) : dflt;
}

uint64_t cuptimon__json_uint(json_object *o, const char *key, uint64_t dflt)
{
    json_object *v = cuptimon__json_get(o, key);

    /* json_object_get_uint64() gives 0 for a negative value. */
    return v != NULL ? json_object_get_uint64(v) : dflt;
}

double cuptimon__json_double(json_object *o, const char *key, double dflt)
{
    json_object *v = cuptimon__json_get(o, key);

    return v != NULL ? json_object_get_double(v) : dflt;
}

int cuptimon__json_bool(json_object *o, const char *key, int dflt)
{
    json_object *v = cuptimon__json_get(o, key);

    return v != NULL ? json_object_get_boolean(v) != 0 : dflt;
}

int cuptimon__json_get_int(json_object *o, const char *key, int64_t *out)
{
    json_object *v = cuptimon__json_get(o, key);
    const char *s;
    char *end;
    long long x;

    if (v == NULL)
        return -ENOENT;
    if (json_object_is_type(v, json_type_int)) {
        *out = json_object_get_int64(v);
        return 0;
    }
    if (!json_object_is_type(v, json_type_string))
        return -EINVAL;
    s = json_object_get_string(v);
    errno = 0;
    x = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0')
        return -EINVAL;
    *out = x;
    return 0;
}

int64_t cuptimon__json_int_strict(json_object *o, const char *key, int64_t dflt)
{
    int64_t v;

    return cuptimon__json_get_int(o, key, &v) == 0 ? v : dflt;
}

int64_t cuptimon__json_integer(json_object *o, const char *key, int64_t dflt)
{
    json_object *v = cuptimon__json_get(o, key);

    return v != NULL && json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : dflt;
}
