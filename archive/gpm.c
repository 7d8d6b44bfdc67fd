/*
 * GPU hardware metrics in the archive (gpm.h): meta.json and the sample
 * encoding for the daemon's sampler, the reader every consumer uses, the
 * counter tracks of a trace, and the statistics of cuptimonctl stats
 * --report gpu.
 */
#include "config.h"

#include "gpm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "archive.h"
#include "cuptimon-proto.h"
#include "strtab.h"
#include "trace.h"

/* A chunk passed over by --from-like skipping must have been completed this
 * long before the range: its samples were mapped with its own clock pair,
 * which a later chunk's may differ from by far less. */
#define SKIP_MARGIN_NS 1000000000ull

static void say(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;

    if (why == NULL || whylen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

/* ---- writing ------------------------------------------------------------- */

char *cuptimon__gpm_meta_json(const struct cuptimon_gpm_meta *m, const char *hostname,
                              const char *daemon_version)
{
    json_object *o = json_object_new_object(), *dev, *ms;
    char *text = NULL;

    if (o == NULL)
        return NULL;
    json_object_object_add(o, "kind", json_object_new_string(CUPTIMON_GPM_KIND));
    json_object_object_add(o, "archive_version", json_object_new_int(CUPTIMON_GPM_VERSION));
    dev = json_object_new_object();
    if (dev != NULL) {
        json_object_object_add(dev, "ordinal", json_object_new_int(m->ordinal));
        json_object_object_add(dev, "name", json_object_new_string(m->name));
        json_object_object_add(dev, "uuid", json_object_new_string(m->uuid));
        json_object_object_add(dev, "pci_bus_id", json_object_new_string(m->pci_bus_id));
        json_object_object_add(dev, "chip", json_object_new_string(m->chip));
    }
    json_object_object_add(o, "device", dev);
    ms = json_object_new_array();
    for (uint32_t i = 0; ms != NULL && i < m->nmetrics && i < CUPTIMON_GPM_METRICS_MAX; i++) {
        json_object *e = json_object_new_object();
        if (e == NULL)
            continue;
        json_object_object_add(e, "key", json_object_new_string(m->metric[i].key));
        json_object_object_add(e, "cupti", json_object_new_string(m->metric[i].cupti));
        json_object_object_add(e, "unit", json_object_new_string(m->metric[i].unit));
        json_object_object_add(e, "label", json_object_new_string(m->metric[i].label));
        json_object_array_add(ms, e);
    }
    json_object_object_add(o, "metrics", ms);
    json_object_object_add(o, "interval_ns", json_object_new_uint64(m->interval_ns));
    json_object_object_add(o, "clock", json_object_new_string("unix_ns"));
    if (daemon_version != NULL)
        json_object_object_add(o, "daemon_version", json_object_new_string(daemon_version));
    if (hostname != NULL)
        json_object_object_add(o, "hostname", json_object_new_string(hostname));
    json_object_object_add(o, "start_unix_ns", json_object_new_uint64(m->start_unix_ns));
    {
        const char *s = json_object_to_json_string_ext(
            o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
        /* A member json-c could not allocate is missing from the text,
         * which the reader then refuses: say so here instead. */
        if (s != NULL && dev != NULL && ms != NULL &&
            json_object_array_length(ms) == (size_t)m->nmetrics)
            text = strdup(s);
    }
    json_object_put(o);
    return text;
}

static void put_double(uint8_t *p, double v)
{
    uint64_t u;

    memcpy(&u, &v, sizeof u);
    cuptimon__put_u64(p, u);
}

static double get_double(const uint8_t *p)
{
    uint64_t u = cuptimon__get_u64(p);
    double v;

    memcpy(&v, &u, sizeof v);
    return v;
}

void cuptimon__gpm_encode(uint8_t *out, const struct cuptimon_gpm_sample *s, size_t n,
                          uint32_t nmetrics)
{
    if (nmetrics > CUPTIMON_GPM_METRICS_MAX)
        nmetrics = CUPTIMON_GPM_METRICS_MAX;
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = out + i * CUPTIMON_GPM_SAMPLE_SIZE(nmetrics);
        cuptimon__put_u64(p, s[i].start_ns);
        cuptimon__put_u64(p + 8, s[i].end_ns);
        for (uint32_t k = 0; k < nmetrics; k++)
            put_double(p + 16 + 8 * k, s[i].value[k]);
    }
}

/* ---- meta.json ----------------------------------------------------------- */

/* "kind": "gpu_metrics" as a member in text that is not valid JSON: the
 * key, optional white space, the colon, optional white space, the value. */
static int kind_in_text(const char *t)
{
    static const char key[] = "\"kind\"", val[] = "\"" CUPTIMON_GPM_KIND "\"";

    for (const char *p = strstr(t, key); p != NULL; p = strstr(p + 1, key)) {
        const char *q = p + sizeof key - 1;
        while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
            q++;
        if (*q++ != ':')
            continue;
        while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
            q++;
        if (strncmp(q, val, sizeof val - 1) == 0)
            return 1;
    }
    return 0;
}

static json_object *parse_text(const char *text)
{
    json_tokener *tok = json_tokener_new();
    json_object *o;
    size_t len = strlen(text);

    if (tok == NULL)
        return NULL;
    o = json_tokener_parse_ex(tok, text, (int)(len > INT32_MAX ? INT32_MAX : len));
    /* Trailing text after the object (other than white space) makes the
     * file something else than what the daemon writes. */
    if (o != NULL && json_tokener_get_error(tok) == json_tokener_success) {
        const char *rest = text + json_tokener_get_parse_end(tok);
        while (*rest == ' ' || *rest == '\t' || *rest == '\n' || *rest == '\r')
            rest++;
        if (*rest != '\0') {
            json_object_put(o);
            o = NULL;
        }
    } else {
        json_object_put(o);
        o = NULL;
    }
    json_tokener_free(tok);
    return o;
}

int cuptimon__gpm_is_meta(const char *meta_json)
{
    json_object *o, *k;
    int yes;

    if (meta_json == NULL)
        return 0;
    o = parse_text(meta_json);
    if (o == NULL)
        return kind_in_text(meta_json);
    yes = json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, "kind", &k) &&
          json_object_is_type(k, json_type_string) &&
          strcmp(json_object_get_string(k), CUPTIMON_GPM_KIND) == 0;
    json_object_put(o);
    return yes;
}

/* A string member into out[size]: 0; -ENOENT when absent (out ""); -EBADMSG
 * when not a string, holding a NUL, or too long. */
static int get_text(json_object *o, const char *key, char *out, size_t size, char *why,
                    size_t whylen, const char *where)
{
    json_object *v;
    size_t n;

    out[0] = '\0';
    if (!json_object_object_get_ex(o, key, &v) || v == NULL)
        return -ENOENT;
    if (!json_object_is_type(v, json_type_string)) {
        say(why, whylen, "%s\"%s\" is not a string", where, key);
        return -EBADMSG;
    }
    n = (size_t)json_object_get_string_len(v);
    if (memchr(json_object_get_string(v), '\0', n) != NULL) {
        say(why, whylen, "%s\"%s\" holds a NUL character", where, key);
        return -EBADMSG;
    }
    if (n >= size) {
        say(why, whylen, "%s\"%s\" is %zu bytes long, more than the %zu it may have", where, key, n,
            size - 1);
        return -EBADMSG;
    }
    memcpy(out, json_object_get_string(v), n + 1);
    return 0;
}

/* An integer member in [lo, hi]: 0; -ENOENT when absent; -EBADMSG. */
static int get_integer(json_object *o, const char *key, int64_t lo, int64_t hi, int64_t *out,
                       char *why, size_t whylen, const char *where)
{
    json_object *v;
    int64_t x;

    if (!json_object_object_get_ex(o, key, &v) || v == NULL)
        return -ENOENT;
    if (!json_object_is_type(v, json_type_int)) {
        say(why, whylen, "%s\"%s\" is not an integer", where, key);
        return -EBADMSG;
    }
    /* json-c keeps an integer above INT64_MAX as unsigned, and clamps it
     * to INT64_MAX for get_int64: every bound here is below that. */
    x = json_object_get_int64(v);
    if (x < lo || x > hi || (x == INT64_MAX && hi == INT64_MAX)) {
        say(why, whylen, "%s\"%s\" is %" PRId64 ", not in %" PRId64 "..%" PRId64, where, key, x, lo,
            hi == INT64_MAX ? INT64_MAX - 1 : hi);
        return -EBADMSG;
    }
    *out = x;
    return 0;
}

static int key_ok(const char *k)
{
    if (*k == '\0')
        return 0;
    for (; *k; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '_'))
            return 0;
    return 1;
}

static int parse_metric(json_object *e, uint32_t i, struct cuptimon_gpm_metric *mt, char *why,
                        size_t whylen)
{
    char where[48];
    int rc;

    snprintf(where, sizeof where, "metrics[%u]: ", i);
    if (!json_object_is_type(e, json_type_object)) {
        say(why, whylen, "metrics[%u] is not an object", i);
        return -EBADMSG;
    }
    rc = get_text(e, "key", mt->key, sizeof mt->key, why, whylen, where);
    if (rc == -ENOENT)
        say(why, whylen, "metrics[%u] has no \"key\"", i);
    if (rc < 0)
        return -EBADMSG;
    if (!key_ok(mt->key)) {
        say(why, whylen, "metrics[%u]: the key \"%s\" is not made of a-z, 0-9 and _ only", i,
            mt->key);
        return -EBADMSG;
    }
    if (get_text(e, "cupti", mt->cupti, sizeof mt->cupti, why, whylen, where) == -EBADMSG ||
        get_text(e, "unit", mt->unit, sizeof mt->unit, why, whylen, where) == -EBADMSG)
        return -EBADMSG;
    rc = get_text(e, "label", mt->label, sizeof mt->label, why, whylen, where);
    if (rc == -EBADMSG)
        return -EBADMSG;
    if (rc == -ENOENT || mt->label[0] == '\0')
        memcpy(mt->label, mt->key, sizeof mt->key);
    return 0;
}

int cuptimon__gpm_meta_parse(const char *meta_json, struct cuptimon_gpm_meta *m, char *why,
                             size_t whylen)
{
    json_object *o, *v, *dev, *ms;
    int64_t x;
    int rc = -EBADMSG;

    memset(m, 0, sizeof *m);
    if (meta_json == NULL) {
        say(why, whylen, "no meta.json");
        return -EBADMSG;
    }
    o = parse_text(meta_json);
    if (o == NULL || !json_object_is_type(o, json_type_object)) {
        say(why, whylen, "not a JSON object (damaged or truncated)");
        goto out;
    }
    if (!json_object_object_get_ex(o, "kind", &v) || !json_object_is_type(v, json_type_string) ||
        strcmp(json_object_get_string(v), CUPTIMON_GPM_KIND) != 0) {
        say(why, whylen, "\"kind\" is not \"" CUPTIMON_GPM_KIND "\"");
        goto out;
    }
    if ((rc = get_integer(o, "archive_version", 1, INT32_MAX, &x, why, whylen, "")) < 0) {
        if (rc == -ENOENT)
            say(why, whylen, "no \"archive_version\"");
        rc = -EBADMSG;
        goto out;
    }
    rc = -EBADMSG;
    if (x != CUPTIMON_GPM_VERSION) {
        say(why, whylen,
            "archive_version %" PRId64 " is not the %d this build reads (a newer cuptimond "
            "wrote it)",
            x, CUPTIMON_GPM_VERSION);
        goto out;
    }
    if (!json_object_object_get_ex(o, "clock", &v) || !json_object_is_type(v, json_type_string) ||
        strcmp(json_object_get_string(v), "unix_ns") != 0) {
        say(why, whylen, "\"clock\" is not \"unix_ns\": the sample times cannot be placed");
        goto out;
    }
    if (!json_object_object_get_ex(o, "device", &dev) ||
        !json_object_is_type(dev, json_type_object)) {
        say(why, whylen, "no \"device\" object");
        goto out;
    }
    if ((rc = get_integer(dev, "ordinal", 0, CUPTIMON_GPM_ORDINAL_MAX, &x, why, whylen,
                          "device: ")) < 0) {
        if (rc == -ENOENT)
            say(why, whylen, "device: no \"ordinal\"");
        rc = -EBADMSG;
        goto out;
    }
    rc = -EBADMSG;
    m->ordinal = (int)x;
    if (get_text(dev, "name", m->name, sizeof m->name, why, whylen, "device: ") == -EBADMSG ||
        get_text(dev, "uuid", m->uuid, sizeof m->uuid, why, whylen, "device: ") == -EBADMSG ||
        get_text(dev, "pci_bus_id", m->pci_bus_id, sizeof m->pci_bus_id, why, whylen, "device: ") ==
            -EBADMSG ||
        get_text(dev, "chip", m->chip, sizeof m->chip, why, whylen, "device: ") == -EBADMSG)
        goto out;
    if (!json_object_object_get_ex(o, "metrics", &ms) ||
        !json_object_is_type(ms, json_type_array)) {
        say(why, whylen, "no \"metrics\" array");
        goto out;
    }
    if (json_object_array_length(ms) == 0 ||
        json_object_array_length(ms) > CUPTIMON_GPM_METRICS_MAX) {
        say(why, whylen, "%zu metrics, not 1..%u", json_object_array_length(ms),
            CUPTIMON_GPM_METRICS_MAX);
        goto out;
    }
    m->nmetrics = (uint32_t)json_object_array_length(ms);
    for (uint32_t i = 0; i < m->nmetrics; i++) {
        if (parse_metric(json_object_array_get_idx(ms, i), i, &m->metric[i], why, whylen) < 0)
            goto out;
        for (uint32_t k = 0; k < i; k++)
            if (strcmp(m->metric[k].key, m->metric[i].key) == 0) {
                say(why, whylen, "the key \"%s\" is named twice (metrics %u and %u)",
                    m->metric[i].key, k, i);
                goto out;
            }
    }
    if ((rc = get_integer(o, "interval_ns", 1, INT64_MAX, &x, why, whylen, "")) < 0) {
        if (rc == -ENOENT)
            say(why, whylen, "no \"interval_ns\"");
        rc = -EBADMSG;
        goto out;
    }
    m->interval_ns = (uint64_t)x;
    rc = get_integer(o, "start_unix_ns", 0, INT64_MAX, &x, why, whylen, "");
    if (rc == -EBADMSG)
        goto out;
    m->start_unix_ns = rc == 0 ? (uint64_t)x : 0;
    rc = -EBADMSG;
    if (get_text(o, "hostname", m->hostname, sizeof m->hostname, why, whylen, "") == -EBADMSG)
        goto out;
    rc = 0;
out:
    json_object_put(o);
    if (rc < 0) {
        struct cuptimon_gpm_meta z;
        memset(&z, 0, sizeof z);
        *m = z;
    }
    return rc;
}

/* ---- reading ------------------------------------------------------------- */

int cuptimon__gpm_read_chunks(struct cuptimon_archive_reader *r, const struct cuptimon_gpm_meta *m,
                              uint64_t from_ns, uint64_t to_ns, cuptimon_gpm_fn fn, void *ud,
                              struct cuptimon_gpm_read_stats *st)
{
    const uint32_t stride = CUPTIMON_GPM_SAMPLE_SIZE(m->nmetrics);
    struct cuptimon_gpm_read_stats local;
    struct cuptimon_archive_chunk c;
    struct cuptimon_gpm_sample s;
    uint64_t damaged0;
    int rc, stop = 0;

    if (st == NULL) {
        memset(&local, 0, sizeof local);
        st = &local;
    }
    if (m->nmetrics == 0 || m->nmetrics > CUPTIMON_GPM_METRICS_MAX)
        return -EINVAL;
    {
        const struct cuptimon_archive_stats *a = cuptimon__archive_stats(r);
        damaged0 = a->corrupt_chunks + a->torn_tails + a->duplicate_chunks;
    }
    memset(&s, 0, sizeof s);
    while ((rc = cuptimon__archive_next(r, &c)) == 1) {
        uint64_t prev_end = 0;
        /* records * stride == raw_size, without overflow: records is
         * untrusted and may be anything. */
        if (c.hdr.raw_size % stride != 0 || c.hdr.records != c.hdr.raw_size / stride) {
            st->bad_chunks++;
            continue;
        }
        st->chunks++;
        for (uint64_t i = 0; i < c.hdr.records; i++) {
            const uint8_t *p = c.data + i * stride;
            s.start_ns = cuptimon__get_u64(p);
            s.end_ns = cuptimon__get_u64(p + 8);
            if (s.end_ns <= s.start_ns || s.end_ns >= CUPTIMON_GPM_TIME_MAX ||
                s.start_ns < prev_end) {
                st->bad_samples++;
                continue;
            }
            prev_end = s.end_ns;
            for (uint32_t k = 0; k < m->nmetrics; k++) {
                double v = get_double(p + 16 + 8 * k);
                if (isinf(v)) {
                    v = NAN;
                    st->bad_values++;
                }
                s.value[k] = v;
            }
            if (s.end_ns <= from_ns || (to_ns != 0 && s.start_ns >= to_ns)) {
                st->out_of_range++;
                continue;
            }
            st->samples++;
            if ((stop = fn(ud, m, &s)) != 0)
                goto out;
        }
    }
out : {
    const struct cuptimon_archive_stats *a = cuptimon__archive_stats(r);
    st->damaged += a->corrupt_chunks + a->torn_tails + a->duplicate_chunks - damaged0;
}
    return stop != 0 ? stop : rc;
}

/* Opens dir and parses its meta.json: 0, or -errno with why. */
static int open_session(const char *dir, uint64_t from_ns, struct cuptimon_archive_reader **r,
                        struct cuptimon_gpm_meta *m, char *why, size_t whylen)
{
    char *err = NULL, reason[256];
    const char *text;
    int rc = cuptimon__archive_open(dir, r, &err);

    if (rc < 0) {
        say(why, whylen, "%s", err ? err : strerror(-rc));
        free(err);
        return rc;
    }
    text = cuptimon__archive_meta(*r);
    if (!cuptimon__gpm_is_meta(text)) {
        say(why, whylen, "%s: not a GPU metrics session", dir);
        rc = -EINVAL;
    } else if (cuptimon__gpm_meta_parse(text, m, reason, sizeof reason) < 0) {
        say(why, whylen, "%s/meta.json: %s", dir, reason);
        rc = -EBADMSG;
    }
    if (rc < 0) {
        cuptimon__archive_close(*r);
        *r = NULL;
        return rc;
    }
    if (from_ns > SKIP_MARGIN_NS)
        cuptimon__archive_skip_before(*r, from_ns - SKIP_MARGIN_NS);
    return 0;
}

int cuptimon__gpm_read(const char *dir, uint64_t from_ns, uint64_t to_ns, cuptimon_gpm_fn fn,
                       void *ud, struct cuptimon_gpm_read_stats *st, char *why, size_t whylen)
{
    struct cuptimon_archive_reader *r;
    struct cuptimon_gpm_meta *m = malloc(sizeof *m);
    int rc;

    if (m == NULL)
        return -ENOMEM;
    rc = open_session(dir, from_ns, &r, m, why, whylen);
    if (rc == 0) {
        rc = cuptimon__gpm_read_chunks(r, m, from_ns, to_ns, fn, ud, st);
        if (rc == -ENOMEM)
            say(why, whylen, "%s: out of memory", dir);
        cuptimon__archive_close(r);
    }
    free(m);
    return rc;
}

/* "<anything>-gpu<digits>-<anything>" in the last path component. */
static int gpm_name(const char *name)
{
    for (const char *p = strstr(name, "-gpu"); p != NULL; p = strstr(p + 1, "-gpu")) {
        const char *q = p + 4;
        if (*q < '0' || *q > '9')
            continue;
        while (*q >= '0' && *q <= '9')
            q++;
        if (*q == '-')
            return 1;
    }
    return 0;
}

static int dir_is_gpm(const char *dir)
{
    char path[4200];
    struct stat sb;
    char *text;
    ssize_t n;
    int fd, yes = 0;

    if (snprintf(path, sizeof path, "%s/meta.json", dir) >= (int)sizeof path)
        return 0;
    /* As the reader opens it: no link followed, never blocking on a FIFO,
     * a regular file only.  This only sorts the directories; the reading
     * checks again. */
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (text = malloc(65537)) != NULL) {
        n = pread(fd, text, 65536, 0);
        if (n >= 0) {
            text[n] = '\0';
            yes = cuptimon__gpm_is_meta(text);
        }
        free(text);
    }
    close(fd);
    return yes;
}

int cuptimon__gpm_find_sessions(const char *root, char ***dirs)
{
    char **all = NULL;
    size_t n = 0;
    int rc = cuptimon__archive_find_sessions(root, &all);

    *dirs = NULL;
    if (rc < 0)
        return rc;
    for (size_t i = 0; all[i] != NULL; i++) {
        const char *base = strrchr(all[i], '/');
        base = base ? base + 1 : all[i];
        if (gpm_name(base) && dir_is_gpm(all[i]))
            all[n++] = all[i];
        else
            free(all[i]);
    }
    all[n] = NULL;
    *dirs = all;
    return 0;
}

/* ---- device sets --------------------------------------------------------- */

void cuptimon__gpm_ordinals_add(struct cuptimon_gpm_ordinals *o, uint32_t ordinal)
{
    if (ordinal < 256)
        o->bits[ordinal / 64] |= (uint64_t)1 << (ordinal % 64);
}

static void devset_add_uuid(struct cuptimon_gpm_devset *d, const char *text)
{
    for (uint32_t i = 0; i < d->nuuid; i++)
        if (memcmp(d->uuid[i], text, CUPTIMON_UUID_TEXT_SIZE - 1) == 0)
            return;
    if (d->nuuid == CUPTIMON_GPM_DEVSET_UUIDS) {
        d->all = 1; /* more GPUs than a node has: show every one rather than guess */
        return;
    }
    memcpy(d->uuid[d->nuuid], text, CUPTIMON_UUID_TEXT_SIZE - 1);
    d->uuid[d->nuuid++][CUPTIMON_UUID_TEXT_SIZE - 1] = '\0';
}

void cuptimon__gpm_devset_resolve(struct cuptimon_gpm_devset *node,
                                  const struct cuptimon_gpm_ordinals *proc,
                                  const struct cuptimon_strtab *names)
{
    for (uint32_t o = 0; o < 256; o++) {
        const char *text;
        size_t len = 0;

        if (!(proc->bits[o / 64] >> (o % 64) & 1))
            continue;
        text = names ? cuptimon__strtab_get(names, CUPTIMON_DEVICE_UUID_KEY(o), &len) : NULL;
        if (text != NULL && cuptimon__uuid_text_ok(text, len))
            devset_add_uuid(node, text);
        else
            cuptimon__gpm_ordinals_add(&node->ord, o);
    }
}

int cuptimon__gpm_devset_has(const struct cuptimon_gpm_devset *d, uint32_t ordinal,
                             const char *uuid)
{
    if (d == NULL || d->all)
        return 1;
    if (uuid != NULL && uuid[0] != '\0')
        for (uint32_t i = 0; i < d->nuuid; i++)
            if (strcmp(d->uuid[i], uuid) == 0)
                return 1;
    return ordinal < 256 && (d->ord.bits[ordinal / 64] >> (ordinal % 64) & 1);
}

int cuptimon__gpm_devset_empty(const struct cuptimon_gpm_devset *d)
{
    const uint64_t *b = d->ord.bits;
    return !d->all && d->nuuid == 0 && (b[0] | b[1] | b[2] | b[3]) == 0;
}

/* ---- counter tracks ------------------------------------------------------ */

struct trace_walk {
    struct cuptimon_trace *t;
    int h;
};

static int trace_sample(void *ud, const struct cuptimon_gpm_meta *m,
                        const struct cuptimon_gpm_sample *s)
{
    struct trace_walk *tw = ud;

    (void)m;
    return cuptimon__trace_gpu_sample(tw->t, tw->h, s);
}

int cuptimon__gpm_trace_session(struct cuptimon_trace *t, const char *dir, uint64_t from_ns,
                                uint64_t to_ns, const struct cuptimon_gpm_devset *devs,
                                struct cuptimon_gpm_read_stats *st, char *why, size_t whylen)
{
    struct cuptimon_archive_reader *r;
    struct cuptimon_gpm_meta *m = malloc(sizeof *m);
    struct trace_walk tw = {.t = t};
    int rc, rc2;

    if (m == NULL)
        return -ENOMEM;
    if ((rc = open_session(dir, from_ns, &r, m, why, whylen)) < 0)
        goto out;
    if (!cuptimon__gpm_devset_has(devs, (uint32_t)m->ordinal, m->uuid)) {
        cuptimon__archive_close(r);
        rc = 0;
        goto out;
    }
    tw.h = cuptimon__trace_add_gpu(t, m);
    if (tw.h < 0) {
        rc = tw.h;
        say(why, whylen, "%s: writing the trace: %s", dir, strerror(-rc));
        cuptimon__archive_close(r);
        goto out;
    }
    rc = cuptimon__gpm_read_chunks(r, m, from_ns, to_ns, trace_sample, &tw, st);
    cuptimon__archive_close(r);
    rc2 = cuptimon__trace_gpu_end(t, tw.h);
    if (rc == 0)
        rc = rc2;
    if (rc < 0)
        say(why, whylen, "%s: %s: %s", dir, rc == -ENOMEM ? "reading" : "writing the trace",
            strerror(-rc));
    else
        rc = 1;
out:
    free(m);
    return rc;
}

/* ---- statistics ---------------------------------------------------------- */

/* Histogram bins per power of two; a bin's middle is within 1/128 of any
 * value in it (as archive/stats.c's). */
#define HSUB     64
#define ROWS_MAX 16384u

struct wv { /* a value and the time it held */
    double v;
    uint64_t d;
};

struct hbin {
    int32_t key; /* 0: empty slot; see bin_key() */
    uint64_t w;
};

struct grow {
    char *host;
    int ordinal;
    char uuid[48], name[96];
    struct cuptimon_gpm_metric mt;
    uint64_t seq;        /* creation order: the metric's place in its first session */
    uint64_t n, covered; /* covered saturates; wt, the mean's weight, does not */
    long double wsum, wt;
    double min, max;
    struct wv *v; /* exact: the values and their times */
    size_t vn, vcap;
    struct hbin *h; /* or a histogram (open addressing), never both */
    size_t hn, hcap;
    int hist;
};

struct cuptimon_gpm_stats {
    uint64_t exact_limit, kept, sessions;
    struct grow *rows;
    size_t nrows, cap;
    uint32_t cur[CUPTIMON_GPM_METRICS_MAX]; /* the session's metrics' rows; UINT32_MAX: none */
    uint32_t ncur;
};

int cuptimon__gpm_stats_new(uint64_t exact_limit, struct cuptimon_gpm_stats **out)
{
    struct cuptimon_gpm_stats *st = calloc(1, sizeof *st);

    *out = NULL;
    if (st == NULL)
        return -ENOMEM;
    st->exact_limit = exact_limit;
    *out = st;
    return 0;
}

void cuptimon__gpm_stats_free(struct cuptimon_gpm_stats *st)
{
    if (st == NULL)
        return;
    for (size_t i = 0; i < st->nrows; i++) {
        free(st->rows[i].host);
        free(st->rows[i].v);
        free(st->rows[i].h);
    }
    free(st->rows);
    free(st);
}

uint64_t cuptimon__gpm_stats_sessions(const struct cuptimon_gpm_stats *st)
{
    return st->sessions;
}

int cuptimon__gpm_stats_session(struct cuptimon_gpm_stats *st, const struct cuptimon_gpm_meta *m)
{
    st->ncur = m->nmetrics <= CUPTIMON_GPM_METRICS_MAX ? m->nmetrics : 0;
    st->sessions++;
    for (uint32_t i = 0; i < st->ncur; i++) {
        const struct cuptimon_gpm_metric *mt = &m->metric[i];
        size_t r;
        st->cur[i] = UINT32_MAX;
        for (r = 0; r < st->nrows; r++) {
            const struct grow *g = &st->rows[r];
            if (g->ordinal == m->ordinal && strcmp(g->mt.key, mt->key) == 0 &&
                strcmp(g->uuid, m->uuid) == 0 && strcmp(g->host, m->hostname) == 0)
                break;
        }
        if (r == st->nrows) {
            if (st->nrows >= ROWS_MAX)
                continue; /* its samples are not counted: a hostile set of sessions */
            if (st->nrows == st->cap) {
                size_t nc = st->cap ? st->cap * 2 : 16;
                struct grow *nr = realloc(st->rows, nc * sizeof *nr);
                if (nr == NULL)
                    return -ENOMEM;
                st->rows = nr;
                st->cap = nc;
            }
            struct grow *g = &st->rows[r];
            memset(g, 0, sizeof *g);
            if ((g->host = strdup(m->hostname)) == NULL)
                return -ENOMEM;
            g->ordinal = m->ordinal;
            memcpy(g->uuid, m->uuid, sizeof g->uuid);
            memcpy(g->name, m->name, sizeof g->name);
            g->mt = *mt;
            g->seq = st->nrows;
            g->hist = st->exact_limit == 0;
            st->nrows++;
        }
        st->cur[i] = (uint32_t)r;
    }
    return 0;
}

/* The bin of v, ordered as the values are: 0 holds 0; v > 0 gets
 * 1 + (exponent + 1100) * HSUB + the 1/HSUB step of its mantissa in
 * [0.5, 1); v < 0 the negative of -v's. */
static int32_t bin_key(double v)
{
    int e;
    double f;
    int32_t k;

    if (v == 0)
        return 0;
    f = frexp(fabs(v), &e); /* [0.5, 1) */
    k = 1 + (int32_t)(e + 1100) * HSUB + (int32_t)((f - 0.5) * 2 * HSUB);
    return v < 0 ? -k : k;
}

static double bin_value(int32_t k)
{
    int32_t a = k < 0 ? -k : k, i;
    double v;

    if (k == 0)
        return 0;
    i = a - 1;
    v = ldexp(0.5 + ((double)(i % HSUB) + 0.5) / (2 * HSUB), i / HSUB - 1100);
    return k < 0 ? -v : v;
}

static int hist_add(struct grow *g, int32_t key, uint64_t w)
{
    size_t mask, i;
    /* A stored key is never 0 (that marks an empty slot): stored as key
     * + 1 for key >= 0. */
    int32_t sk = key >= 0 ? key + 1 : key;

    if ((g->hn + 1) * 2 > g->hcap) {
        size_t nc = g->hcap ? g->hcap * 2 : 64;
        struct hbin *nh = calloc(nc, sizeof *nh);
        if (nh == NULL)
            return -ENOMEM;
        for (size_t j = 0; j < g->hcap; j++) {
            if (g->h[j].key == 0)
                continue;
            size_t h = ((uint32_t)g->h[j].key * 2654435761u) & (nc - 1);
            while (nh[h].key != 0)
                h = (h + 1) & (nc - 1);
            nh[h] = g->h[j];
        }
        free(g->h);
        g->h = nh;
        g->hcap = nc;
    }
    mask = g->hcap - 1;
    for (i = ((uint32_t)sk * 2654435761u) & mask; g->h[i].key != 0; i = (i + 1) & mask)
        if (g->h[i].key == sk) {
            g->h[i].w = g->h[i].w + w < g->h[i].w ? UINT64_MAX : g->h[i].w + w;
            return 0;
        }
    g->h[i].key = sk;
    g->h[i].w = w;
    g->hn++;
    return 0;
}

/* Moves a row's kept values into its histogram. */
static int to_hist(struct cuptimon_gpm_stats *st, struct grow *g)
{
    for (size_t i = 0; i < g->vn; i++)
        if (hist_add(g, bin_key(g->v[i].v), g->v[i].d) < 0)
            return -ENOMEM;
    st->kept -= g->vn;
    free(g->v);
    g->v = NULL;
    g->vn = g->vcap = 0;
    g->hist = 1;
    return 0;
}

/* Past the limit: the rows keeping the most go to histograms until a
 * quarter of the limit is free. */
static int make_room(struct cuptimon_gpm_stats *st)
{
    while (st->kept > st->exact_limit - st->exact_limit / 4) {
        struct grow *big = NULL;
        for (size_t i = 0; i < st->nrows; i++)
            if (!st->rows[i].hist && (big == NULL || st->rows[i].vn > big->vn))
                big = &st->rows[i];
        if (big == NULL || to_hist(st, big) < 0)
            return -ENOMEM;
    }
    return 0;
}

static int row_add(struct cuptimon_gpm_stats *st, struct grow *g, double v, uint64_t d)
{
    if (g->n == 0 || v < g->min)
        g->min = v;
    if (g->n == 0 || v > g->max)
        g->max = v;
    g->n++;
    g->covered = g->covered + d < g->covered ? UINT64_MAX : g->covered + d;
    g->wsum += (long double)v * (long double)d;
    g->wt += (long double)d;
    if (g->hist)
        return hist_add(g, bin_key(v), d);
    if (g->vn == g->vcap) {
        size_t nc = g->vcap ? g->vcap * 2 : 64;
        struct wv *nv = realloc(g->v, nc * sizeof *nv);
        if (nv == NULL)
            return -ENOMEM;
        g->v = nv;
        g->vcap = nc;
    }
    g->v[g->vn].v = v;
    g->v[g->vn].d = d;
    g->vn++;
    st->kept++;
    return st->kept > st->exact_limit ? make_room(st) : 0;
}

int cuptimon__gpm_stats_sample(struct cuptimon_gpm_stats *st, const struct cuptimon_gpm_sample *s,
                               uint64_t from_ns, uint64_t to_ns)
{
    uint64_t a = s->start_ns > from_ns ? s->start_ns : from_ns;
    uint64_t b = to_ns != 0 && s->end_ns > to_ns ? to_ns : s->end_ns;

    if (b <= a)
        return 0;
    for (uint32_t i = 0; i < st->ncur; i++) {
        if (st->cur[i] == UINT32_MAX || isnan(s->value[i]) || isinf(s->value[i]))
            continue;
        if (row_add(st, &st->rows[st->cur[i]], s->value[i], b - a) < 0)
            return -ENOMEM;
    }
    return 0;
}

static int wv_cmp(const void *a, const void *b)
{
    double x = ((const struct wv *)a)->v, y = ((const struct wv *)b)->v;
    return x < y ? -1 : x > y;
}

static int hb_cmp(const void *a, const void *b)
{
    int32_t x = ((const struct hbin *)a)->key, y = ((const struct hbin *)b)->key;
    return x < y ? -1 : x > y;
}

/* The time-weighted median: the smallest value at or below which half of
 * the row's time lies. */
static double row_median(struct grow *g, int *exact)
{
    long double half = g->wt / 2, cum = 0;

    *exact = !g->hist;
    if (!g->hist) {
        qsort(g->v, g->vn, sizeof *g->v, wv_cmp);
        for (size_t i = 0; i < g->vn; i++) {
            cum += (long double)g->v[i].d;
            if (cum >= half)
                return g->v[i].v;
        }
        return g->vn ? g->v[g->vn - 1].v : 0;
    }
    /* Compacts the table into its used slots, sorted by value. */
    size_t n = 0;
    for (size_t i = 0; i < g->hcap; i++)
        if (g->h[i].key != 0)
            g->h[n++] = g->h[i];
    qsort(g->h, n, sizeof *g->h, hb_cmp);
    for (size_t i = 0; i < n; i++) {
        cum += (long double)g->h[i].w;
        if (cum >= half) {
            int32_t k = g->h[i].key;
            double v = bin_value(k > 0 ? k - 1 : k);
            /* The true median lies in the bin, and so inside [min, max]. */
            return v < g->min ? g->min : v > g->max ? g->max : v;
        }
    }
    return g->max;
}

static int row_order(const void *a, const void *b)
{
    const struct grow *x = *(const struct grow *const *)a, *y = *(const struct grow *const *)b;
    int c = strcmp(x->host, y->host);

    if (c != 0)
        return c;
    if (x->ordinal != y->ordinal)
        return x->ordinal < y->ordinal ? -1 : 1;
    if ((c = strcmp(x->uuid, y->uuid)) != 0)
        return c;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

struct json_object *cuptimon__gpm_stats_rows(struct cuptimon_gpm_stats *st)
{
    json_object *a = json_object_new_array();
    struct grow **order = malloc((st->nrows ? st->nrows : 1) * sizeof *order);

    if (a == NULL || order == NULL) {
        json_object_put(a);
        free(order);
        return NULL;
    }
    for (size_t i = 0; i < st->nrows; i++)
        order[i] = &st->rows[i];
    qsort(order, st->nrows, sizeof *order, row_order);
    for (size_t i = 0; i < st->nrows; i++) {
        struct grow *g = order[i];
        json_object *r = json_object_new_object();
        int exact;
        if (r == NULL)
            continue;
        json_object_object_add(r, "hostname", g->host[0] ? json_object_new_string(g->host) : NULL);
        json_object_object_add(r, "device", json_object_new_int(g->ordinal));
        json_object_object_add(r, "name", json_object_new_string(g->name));
        json_object_object_add(r, "uuid", json_object_new_string(g->uuid));
        json_object_object_add(r, "metric", json_object_new_string(g->mt.key));
        json_object_object_add(r, "label", json_object_new_string(g->mt.label));
        json_object_object_add(r, "unit", json_object_new_string(g->mt.unit));
        json_object_object_add(r, "samples", json_object_new_uint64(g->n));
        json_object_object_add(r, "covered_ns", json_object_new_uint64(g->covered));
        if (g->n > 0 && g->wt > 0) {
            double med = row_median(g, &exact);
            long double mean = g->wsum / g->wt;
            /* Rounding of the sums cannot take the mean outside the values. */
            mean = mean < g->min ? g->min : mean > g->max ? g->max : mean;
            json_object_object_add(r, "mean", json_object_new_double((double)mean));
            json_object_object_add(r, "med", json_object_new_double(med));
            json_object_object_add(r, "med_exact", json_object_new_boolean(exact));
            json_object_object_add(r, "min", json_object_new_double(g->min));
            json_object_object_add(r, "max", json_object_new_double(g->max));
        } else {
            json_object_object_add(r, "mean", NULL);
            json_object_object_add(r, "med", NULL);
            json_object_object_add(r, "med_exact", NULL);
            json_object_object_add(r, "min", NULL);
            json_object_object_add(r, "max", NULL);
        }
        json_object_array_add(a, r);
    }
    free(order);
    return a;
}
