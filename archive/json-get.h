/*
 * Typed reads of a JSON object's members (json-c), written once.  Every
 * getter takes o == NULL, an o that is not an object, a missing key and a
 * member that is JSON null alike: the member is absent, and the default
 * (or -ENOENT) comes back.
 *
 * Two kinds: the lenient getters (cuptimon__json_int and the like) take
 * json-c's own conversion of whatever the member holds, for JSON this
 * project wrote itself (the daemon's replies); the strict ones
 * (cuptimon__json_str, cuptimon__json_get_int) accept only the type asked
 * for, for JSON a producer wrote (meta.json).
 */
#ifndef CUPTIMON_ARCHIVE_JSON_GET_H
#define CUPTIMON_ARCHIVE_JSON_GET_H

#include <stdint.h>

struct json_object;

/* The member key of o, or NULL when it is absent. */
struct json_object *cuptimon__json_get(struct json_object *o, const char *key);

/* The member when it is a JSON string, else dflt. */
const char *cuptimon__json_str(struct json_object *o, const char *key, const char *dflt);

/* Lenient: json-c's conversion of the member (a number is truncated, a
 * numeric string parsed, a boolean is 0 or 1, other strings and containers
 * are 0), or dflt when it is absent. */
int64_t cuptimon__json_int(struct json_object *o, const char *key, int64_t dflt);
/* As cuptimon__json_int, with negative values as 0. */
uint64_t cuptimon__json_uint(struct json_object *o, const char *key, uint64_t dflt);
double cuptimon__json_double(struct json_object *o, const char *key, double dflt);
/* Lenient: a non-zero number or a non-empty string is true. */
int cuptimon__json_bool(struct json_object *o, const char *key, int dflt);

/*
 * Strict: an integer given as a JSON integer or as a decimal string (the
 * shim passes environment variables through as strings).  Returns 0 with
 * *out set, -ENOENT when the member is absent, or -EINVAL when it is of
 * another type or a string that is not a whole decimal number in range.
 * A JSON integer beyond int64 is clamped, as json-c does.
 */
int cuptimon__json_get_int(struct json_object *o, const char *key, int64_t *out);

/* cuptimon__json_get_int(), with dflt for every failure. */
int64_t cuptimon__json_int_strict(struct json_object *o, const char *key, int64_t dflt);

/* Strictest: the member only when it is a JSON integer, else dflt; for the
 * protocol's messages, whose integers are typed ("4" is refused). */
int64_t cuptimon__json_integer(struct json_object *o, const char *key, int64_t dflt);

#endif
