/* Unit tests of the trace writer and the summary: JSON escaping, exact
 * timestamps, a golden trace of every kind parsed back with json-c and
 * schema-checked event by event, flows, names, the sink, real H200
 * buffers, and cuptimonctl decode over a real archive (torn tail included). */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>
#include <zlib.h>

#include <cupti_activity.h>

#include "cli/cli.h"
#include "archive/archive.h"
#include "cuptimon-proto.h"
#include "archive/decode.h"
#include "archive/demangle.h"
#include "archive/pgzip.h"
#include "archive/strtab.h"
#include "archive/summary.h"
#include "archive/trace.h"
#include "tests/unit/testlib.h"

#define PTR(v) ((const char *)(uintptr_t)(v))
#define BASE   1796208557000000000ull

/* ---- helpers ------------------------------------------------------------- */

struct membuf {
    char *data;
    size_t len, cap;
    size_t calls, max_chunk;
    size_t fail_after; /* 0: never fail */
};

static int mem_write(void *ud, const void *buf, size_t len)
{
    struct membuf *m = ud;

    m->calls++;
    if (len > m->max_chunk)
        m->max_chunk = len;
    if (m->fail_after && m->len + len > m->fail_after)
        return -ENOSPC;
    if (m->len + len + 1 > m->cap) {
        size_t nc = m->cap ? m->cap : 4096;
        while (nc < m->len + len + 1)
            nc *= 2;
        m->data = realloc(m->data, nc);
        ck_assert_ptr_nonnull(m->data);
        m->cap = nc;
    }
    memcpy(m->data + m->len, buf, len);
    m->len += len;
    m->data[m->len] = '\0';
    return 0;
}

static int null_write(void *ud, const void *buf, size_t len)
{
    struct membuf *m = ud;
    (void)buf;
    m->calls++;
    m->len += len;
    if (len > m->max_chunk)
        m->max_chunk = len;
    return 0;
}

static json_object *parse(const char *text, size_t len)
{
    json_tokener *tok = json_tokener_new_ex(64);
    json_object *o;

    ck_assert_ptr_nonnull(tok);
    o = json_tokener_parse_ex(tok, text, (int)len);
    ck_assert_msg(o != NULL && json_tokener_get_error(tok) == json_tokener_success,
                  "trace does not parse: %s", json_tokener_error_desc(json_tokener_get_error(tok)));
    ck_assert_int_eq((int)json_tokener_get_parse_end(tok), (int)len);
    json_tokener_free(tok);
    return o;
}

static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

static const char *gets(json_object *o, const char *key)
{
    json_object *v = get(o, key);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static int is_num(json_object *v)
{
    return v && (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double));
}

/* A number as ns, from the µs text json-c parsed (exact to the ns for the
 * small relative values the writer produces). */
static int64_t us_ns(json_object *v)
{
    double d = json_object_get_double(v);
    return (int64_t)(d * 1000.0 + (d < 0 ? -0.5 : 0.5));
}

/* Every event is checked against the trace-event format; returns how many
 * events of each phase there were (index by the phase letter). */
struct schema {
    unsigned ph[128];
    unsigned n;
};

static void schema_check(json_object *root, struct schema *sc)
{
    json_object *evs = get(root, "traceEvents");
    size_t n;

    memset(sc, 0, sizeof(*sc));
    ck_assert_ptr_nonnull(evs);
    ck_assert(json_object_is_type(evs, json_type_array));
    /* Kineto's top level: its schema, the time base, ms for display. */
    ck_assert_str_eq(gets(root, "displayTimeUnit"), "ms");
    ck_assert_int_eq(json_object_get_int64(get(root, "schemaVersion")), 1);
    ck_assert(json_object_is_type(get(root, "baseTimeNanoseconds"), json_type_int));
    ck_assert_uint_eq((uint64_t)json_object_get_int64(get(root, "baseTimeNanoseconds")),
                      (uint64_t)json_object_get_int64(get(get(root, "otherData"), "base_unix_ns")));
    ck_assert(json_object_is_type(get(root, "distributedInfo"), json_type_object));
    ck_assert(json_object_is_type(get(root, "otherData"), json_type_object));
    n = json_object_array_length(evs);
    sc->n = (unsigned)n;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(evs, i);
        const char *ph = gets(e, "ph");
        ck_assert_msg(ph != NULL && strlen(ph) == 1, "event %zu: no ph", i);
        ck_assert_msg(strchr("XMsfbei", ph[0]) != NULL, "event %zu: ph %s", i, ph);
        sc->ph[(unsigned char)ph[0]]++;
        ck_assert_msg(json_object_is_type(get(e, "pid"), json_type_int), "event %zu: pid", i);
        ck_assert_msg(gets(e, "name") != NULL, "event %zu: name", i);
        switch (ph[0]) {
        case 'M':
            ck_assert(json_object_is_type(get(e, "args"), json_type_object));
            ck_assert_msg(strcmp(gets(e, "name"), "process_name") == 0 ||
                              strcmp(gets(e, "name"), "process_labels") == 0 ||
                              strcmp(gets(e, "name"), "process_sort_index") == 0 ||
                              strcmp(gets(e, "name"), "thread_name") == 0 ||
                              strcmp(gets(e, "name"), "thread_sort_index") == 0,
                          "event %zu: metadata %s", i, gets(e, "name"));
            if (strncmp(gets(e, "name"), "thread_", 7) == 0)
                ck_assert(json_object_is_type(get(e, "tid"), json_type_int));
            break;
        case 'X':
            ck_assert_msg(is_num(get(e, "ts")) && is_num(get(e, "dur")), "event %zu: ts/dur", i);
            ck_assert_msg(json_object_get_double(get(e, "dur")) >= 0, "event %zu: dur < 0", i);
            ck_assert(json_object_is_type(get(e, "tid"), json_type_int));
            ck_assert(gets(e, "cat") != NULL);
            ck_assert(json_object_is_type(get(e, "args"), json_type_object));
            break;
        case 's':
        case 'f':
            ck_assert(json_object_is_type(get(e, "id"), json_type_int));
            ck_assert(is_num(get(e, "ts")));
            ck_assert(json_object_is_type(get(e, "tid"), json_type_int));
            ck_assert_str_eq(gets(e, "cat"), "ac2g");
            if (ph[0] == 'f')
                ck_assert_str_eq(gets(e, "bp"), "e");
            break;
        case 'b':
        case 'e':
            ck_assert(gets(get(e, "id2"), "local") != NULL);
            ck_assert(is_num(get(e, "ts")));
            break;
        case 'i':
            ck_assert_str_eq(gets(e, "s"), "t");
            ck_assert(is_num(get(e, "ts")));
            ck_assert(json_object_is_type(get(e, "tid"), json_type_int));
            break;
        }
    }
}

/* Each flow start is followed by its end, and both bind to a slice: an X
 * event on the same pid/tid that contains the flow's timestamp. */
static unsigned flows_check(json_object *root)
{
    json_object *evs = get(root, "traceEvents");
    size_t n = json_object_array_length(evs);
    unsigned pairs = 0;

    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(evs, i);
        if (strcmp(gets(e, "ph"), "s") != 0)
            continue;
        ck_assert_uint_lt(i + 1, n);
        json_object *f = json_object_array_get_idx(evs, i + 1);
        ck_assert_str_eq(gets(f, "ph"), "f");
        ck_assert(json_object_get_int64(get(f, "id")) == json_object_get_int64(get(e, "id")));
        for (int k = 0; k < 2; k++) {
            json_object *fe = k ? f : e;
            int64_t ts = us_ns(get(fe, "ts"));
            int64_t tid = json_object_get_int64(get(fe, "tid"));
            int64_t pid = json_object_get_int64(get(fe, "pid"));
            int bound = 0;
            for (size_t j = 0; j < i && !bound; j++) {
                json_object *x = json_object_array_get_idx(evs, j);
                if (strcmp(gets(x, "ph"), "X") != 0 ||
                    json_object_get_int64(get(x, "tid")) != tid ||
                    json_object_get_int64(get(x, "pid")) != pid)
                    continue;
                int64_t xs = us_ns(get(x, "ts")), xd = us_ns(get(x, "dur"));
                if (xs <= ts && ts <= xs + xd)
                    bound = 1;
            }
            ck_assert_msg(bound, "flow %s at %lld on tid %lld binds to no slice",
                          k ? "end" : "start", (long long)ts, (long long)tid);
        }
        pairs++;
    }
    return pairs;
}

/* The first event with this ph and name (or NULL). */
static json_object *find_ev(json_object *root, const char *ph, const char *name)
{
    json_object *evs = get(root, "traceEvents");
    size_t n = json_object_array_length(evs);

    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(evs, i);
        if (strcmp(gets(e, "ph"), ph) == 0 && (name == NULL || strcmp(gets(e, "name"), name) == 0))
            return e;
    }
    return NULL;
}

static int64_t arg_int(json_object *e, const char *key)
{
    json_object *v = get(get(e, "args"), key);
    ck_assert_msg(v != NULL, "no args.%s", key);
    return json_object_get_int64(v);
}

/* Every "ts" and "dur" in the text has exactly three decimals.  One pass over
 * the text by hand: strstr or strchr from each hit would be quadratic under
 * ASan, whose interceptors measure the whole rest of the string at every call
 * (250 s for a trace of 43,000 records). */
static void ts_text_check(const char *text)
{
    static const char *const keys[] = {"\"ts\":", "\"dur\":"};
    for (const char *p = text; *p; p++) {
        if (*p != '"')
            continue;
        for (int k = 0; k < 2; k++) {
            if (strncmp(p, keys[k], strlen(keys[k])) != 0)
                continue;
            const char *q = p + strlen(keys[k]);
            if (*q == '-')
                q++;
            ck_assert(*q >= '0' && *q <= '9');
            while (*q >= '0' && *q <= '9')
                q++;
            ck_assert_msg(*q == '.', "%.40s", p);
            ck_assert(q[1] >= '0' && q[1] <= '9' && q[2] >= '0' && q[2] <= '9' && q[3] >= '0' &&
                      q[3] <= '9');
            ck_assert_msg(q[4] == ',' || q[4] == '}', "%.40s", p);
        }
    }
}

/* ---- escaping and numbers ------------------------------------------------- */

static void esc_is(const char *in, size_t len, const char *want)
{
    char out[256];
    size_t n = cuptimon__json_escape(out, in, len);
    out[n] = '\0';
    ck_assert_str_eq(out, want);
    /* ... and it is JSON that json-c reads. */
    json_object *o = json_tokener_parse(out);
    ck_assert_ptr_nonnull(o);
    ck_assert(json_object_is_type(o, json_type_string));
    json_object_put(o);
}

START_TEST(json_escape_cases)
{
    esc_is("void scale<2>(float*, int)", 26, "\"void scale<2>(float*, int)\"");
    esc_is("a\"b\\c/d", 7, "\"a\\\"b\\\\c/d\"");
    esc_is("\n\r\t\b\f", 5, "\"\\n\\r\\t\\b\\f\"");
    esc_is("\x01\x1f", 2, "\"\\u0001\\u001f\"");
    esc_is("x\0y", 3, "\"x\\u0000y\"");
    esc_is("\x7f", 1, "\"\x7f\"");
    /* Valid UTF-8 is kept: é, €, 😀 */
    esc_is("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
    /* Invalid bytes become U+FFFD, one per byte. */
    esc_is("\xff", 1, "\"\\ufffd\"");
    esc_is("a\x80z", 3, "\"a\\ufffdz\"");
    esc_is("\xc0\xaf", 2, "\"\\ufffd\\ufffd\"");                       /* overlong '/' */
    esc_is("\xe0\x80\xaf", 3, "\"\\ufffd\\ufffd\\ufffd\"");            /* overlong */
    esc_is("\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"");            /* surrogate */
    esc_is("\xf4\x90\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* > U+10FFFF */
    esc_is("\xe2\x82", 2, "\"\\ufffd\\ufffd\"");                       /* truncated */
    esc_is("\xc3", 1, "\"\\ufffd\"");
    esc_is("", 0, "\"\"");
}
END_TEST

START_TEST(json_escape_every_byte)
{
    /* All 256 byte values, alone and after each other: always valid JSON. */
    char in[512], out[6 * 512 + 3 + 1];
    for (int i = 0; i < 256; i++) {
        in[2 * i] = (char)i;
        in[2 * i + 1] = (char)(255 - i);
    }
    size_t n = cuptimon__json_escape(out, in, sizeof(in));
    ck_assert_uint_le(n, sizeof(out) - 1);
    out[n] = '\0';
    json_object *o = json_tokener_parse(out);
    ck_assert_ptr_nonnull(o);
    json_object_put(o);
}
END_TEST

START_TEST(format_us_exact)
{
    char b[32];
    ck_assert_uint_eq(cuptimon__format_us(b, 0), 5);
    ck_assert_str_eq(b, "0.000");
    cuptimon__format_us(b, 1);
    ck_assert_str_eq(b, "0.001");
    cuptimon__format_us(b, 999);
    ck_assert_str_eq(b, "0.999");
    cuptimon__format_us(b, 1000);
    ck_assert_str_eq(b, "1.000");
    cuptimon__format_us(b, 1010);
    ck_assert_str_eq(b, "1.010");
    cuptimon__format_us(b, -1);
    ck_assert_str_eq(b, "-0.001");
    cuptimon__format_us(b, -1500);
    ck_assert_str_eq(b, "-1.500");
    cuptimon__format_us(b, 334192055);
    ck_assert_str_eq(b, "334192.055");
    cuptimon__format_us(b, 1796208557090027706ll);
    ck_assert_str_eq(b, "1796208557090027.706");
    cuptimon__format_us(b, INT64_MAX);
    ck_assert_str_eq(b, "9223372036854775.807");
    cuptimon__format_us(b, INT64_MIN);
    ck_assert_str_eq(b, "-9223372036854775.808");
}
END_TEST

/* ---- the golden trace ------------------------------------------------------ */

struct recbuf {
    uint8_t data[8192];
    size_t len;
};

static void add(struct recbuf *b, const void *rec, size_t size)
{
    ck_assert(b->len + size <= sizeof(b->data));
    memcpy(b->data + b->len, rec, size);
    b->len += size;
}

static void build_golden_input(struct recbuf *b)
{
    CUpti_ActivityExternalCorrelation x;
    CUpti_ActivityAPI a;
    CUpti_ActivityKernel10 k;
    CUpti_ActivityMemcpy6 m;
    CUpti_ActivityMemset4 s;
    CUpti_ActivityOverhead3 o;
    CUpti_ActivityCudaEvent2 ce;
    CUpti_ActivitySynchronization2 sy;
    CUpti_ActivityMarker2 mk;
    CUpti_ActivityMarkerData2 md;

    b->len = 0;
    memset(&x, 0, sizeof(x));
    x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    x.externalId = 77;
    x.correlationId = 10;
    add(b, &x, sizeof(x));

    /* The cuLaunchKernel that cudaLaunchKernel made: CUPTI records it
     * first, with the runtime call's correlation id.  Not written. */
    memset(&a, 0, sizeof(a));
    a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    a.cbid = 307; /* cuLaunchKernel */
    a.start = BASE + 2000;
    a.end = BASE + 4000;
    a.processId = 455;
    a.threadId = 3847278592u;
    a.correlationId = 10;
    add(b, &a, sizeof(a));

    memset(&a, 0, sizeof(a));
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = 211; /* cudaLaunchKernel */
    a.start = BASE + 1000;
    a.end = BASE + 5000;
    a.processId = 455;
    a.threadId = 3847278592u;
    a.correlationId = 10;
    add(b, &a, sizeof(a));

    memset(&k, 0, sizeof(k));
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.registersPerThread = 16;
    k.start = BASE + 6000;
    k.end = BASE + 7024;
    k.deviceId = 0;
    k.contextId = 1;
    k.streamId = 7;
    k.gridX = 64;
    k.gridY = 1;
    k.gridZ = 1;
    k.blockX = 256;
    k.blockY = 1;
    k.blockZ = 1;
    k.staticSharedMemory = 128;
    k.correlationId = 10;
    k.name = PTR(0x1000);
    k.graphId = 3;
    k.graphNodeId = 44;
    add(b, &k, sizeof(k));

    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    m.flags = 1;
    m.bytes = 4096;
    m.start = BASE + 8000;
    m.end = BASE + 9500;
    m.contextId = 1;
    m.streamId = 7;
    m.correlationId = 11;
    add(b, &m, sizeof(m));

    /* A driver call that launches nothing (an unknown cbid): counted, not
     * written, as Kineto leaves out cuKernelGetName and the like. */
    a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    a.cbid = 12345678; /* unknown */
    a.start = BASE + 9600;
    a.end = BASE + 9700;
    a.correlationId = 20;
    add(b, &a, sizeof(a));

    /* A launch straight through the driver (a library's cuLaunchKernel):
     * written once the thread's next API call or the end shows that no
     * runtime call holds it. */
    a.cbid = 307; /* cuLaunchKernel */
    a.start = BASE + 10000;
    a.end = BASE + 10500;
    a.correlationId = 12;
    a.returnValue = 1;
    add(b, &a, sizeof(a));

    memset(&s, 0, sizeof(s));
    s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    s.value = 0;
    s.bytes = 4096;
    s.start = BASE + 11000;
    s.end = BASE + 11100;
    s.contextId = 1;
    s.streamId = 13;
    s.correlationId = 12;
    s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    add(b, &s, sizeof(s));

    k.start = BASE + 12000;
    k.end = BASE + 12000;
    k.streamId = 13;
    k.correlationId = 0;
    k.name = PTR(0xdead0);
    k.graphId = 0;
    k.graphNodeId = 0;
    add(b, &k, sizeof(k));

    memset(&o, 0, sizeof(o));
    o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
    o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    o.objectId.pt.processId = 455;
    o.objectId.pt.threadId = 3847278592u;
    o.start = BASE + 13000;
    o.end = BASE + 14000;
    add(b, &o, sizeof(o));

    memset(&ce, 0, sizeof(ce));
    ce.kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
    ce.correlationId = 13;
    ce.contextId = 1;
    ce.streamId = 7;
    ce.eventId = 3;
    ce.deviceTimestamp = BASE + 15000;
    ce.cudaEventSyncId = 99;
    add(b, &ce, sizeof(ce));

    memset(&sy, 0, sizeof(sy));
    sy.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    sy.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    sy.start = BASE + 16000;
    sy.end = BASE + 17000;
    sy.correlationId = 14;
    sy.contextId = 1;
    sy.streamId = 7;
    sy.cudaEventId = 0;
    add(b, &sy, sizeof(sy));

    memset(&mk, 0, sizeof(mk));
    mk.kind = CUPTI_ACTIVITY_KIND_MARKER;
    mk.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
    mk.timestamp = BASE + 18000;
    mk.id = 5;
    mk.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    mk.objectId.pt.processId = 455;
    mk.objectId.pt.threadId = 3847278592u;
    mk.name = PTR(0x2000);
    mk.domain = PTR(0x3000);
    add(b, &mk, sizeof(mk));

    memset(&md, 0, sizeof(md));
    md.kind = CUPTI_ACTIVITY_KIND_MARKER_DATA;
    md.flags = CUPTI_ACTIVITY_FLAG_MARKER_COLOR_ARGB;
    md.id = 5;
    md.payloadKind = CUPTI_METRIC_VALUE_KIND_UINT64;
    md.payload.metricValueUint64 = 42;
    md.color = 0xff00ff00u;
    md.category = 2;
    add(b, &md, sizeof(md));

    mk.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
    mk.timestamp = BASE + 19000;
    mk.name = NULL;
    mk.domain = NULL;
    add(b, &mk, sizeof(mk));

    mk.flags = CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS;
    mk.timestamp = BASE + 19500;
    mk.id = 6;
    mk.name = PTR(0x2000);
    add(b, &mk, sizeof(mk));

    /* A kernel before the base: negative ts, printed exactly. */
    k.start = BASE - 1500;
    k.end = BASE - 500;
    k.streamId = 7;
    k.name = PTR(0x1000);
    add(b, &k, sizeof(k));
}

#define GOLDEN_DEV0                                                                                \
    "0 150109880320 9 0 1024 2048 65536 32 49152 132 65536 232448 233472 NVIDIA H200"
#define GOLDEN_DEV1 "1 150109880320 9 0 1024 2048 65536 32 49152 1000000 65536 232448 233472 Big"

/* The expected trace for build_golden_input(), byte for byte. */
static const char golden[] =
    "{\"schemaVersion\": 1,\n"
    "\"baseTimeNanoseconds\": 1796208557000000000,\n"
    "\"traceEvents\":[\n"
    "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":455,\"tid\":0,\"args\":{\"name\":\"python3.12 "
    "rank 1 (train \\\"A\\\")\"}},\n"
    "{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":455,\"tid\":0,\"args\":{\"labels\":\"CPU, "
    "host node01, rank 1/8, local rank 1, job 1234, train \\\"A\\\", CUPTI 130001\"}},\n"
    "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":455,\"tid\":0,\"args\":{\"sort_index\":"
    "1}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":455,\"tid\":"
    "3847278592,\"ts\":1.000,\"dur\":4.000,\"args\":{\"cbid\":211,\"correlation\":10,\"return "
    "value\":0,\"External id\":77,\"external kind\":\"custom0\"}},\n"
    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":455,\"tid\":2147483761,\"args\":{\"name\":"
    "\"GPU 0 stream 7\"}},\n"
    "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":455,\"tid\":2147483761,\"args\":{\"sort_"
    "index\":100007}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void scale<2>(float*, "
    "int)\",\"pid\":455,\"tid\":2147483761,\"ts\":6.000,\"dur\":1.024,\"args\":{\"device\":0,"
    "\"context\":1,\"stream\":7,\"correlation\":10,\"graph id\":3,\"graph node "
    "id\":44,\"grid\":[64,1,1],\"block\":[256,1,1],\"registers per thread\":16,\"shared "
    "memory\":128,\"dynamic shared memory\":0,\"local memory per thread\":0,\"External "
    "id\":77,\"external kind\":\"custom0\"}},\n"
    "{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":10,\"pid\":455,\"tid\":3847278592,"
    "\"ts\":1.000},\n"
    "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":10,\"pid\":455,\"tid\":"
    "2147483761,\"ts\":6.000},\n"
    "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy DtoH (Device -> "
    "Pinned)\",\"pid\":455,\"tid\":2147483761,\"ts\":8.000,\"dur\":1.500,\"args\":{\"device\":0,"
    "\"context\":1,\"stream\":7,\"correlation\":11,\"graph id\":0,\"graph node "
    "id\":0,\"bytes\":4096,\"memory bandwidth (GB/s)\":2.730,\"copy kind\":2,\"src kind\":3,\"dst "
    "kind\":2,\"flags\":1,\"runtime correlation\":0}},\n"
    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":455,\"tid\":2147483857,\"args\":{\"name\":"
    "\"GPU 0 stream 13\"}},\n"
    "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":455,\"tid\":2147483857,\"args\":{\"sort_"
    "index\":100013}},\n"
    "{\"ph\":\"X\",\"cat\":\"gpu_memset\",\"name\":\"Memset "
    "(Device)\",\"pid\":455,\"tid\":2147483857,\"ts\":11.000,\"dur\":0.100,\"args\":{\"device\":0,"
    "\"context\":1,\"stream\":13,\"correlation\":12,\"graph id\":0,\"graph node "
    "id\":0,\"bytes\":4096,\"memory bandwidth (GB/s)\":40.960,\"value\":0,\"memory "
    "kind\":3,\"flags\":0}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"<unknown kernel "
    "0xdead0>\",\"pid\":455,\"tid\":2147483857,\"ts\":12.000,\"dur\":0.000,\"args\":{\"device\":0,"
    "\"context\":1,\"stream\":13,\"correlation\":0,\"graph id\":0,\"graph node "
    "id\":0,\"grid\":[64,1,1],\"block\":[256,1,1],\"registers per thread\":16,\"shared "
    "memory\":128,\"dynamic shared memory\":0,\"local memory per thread\":0}},\n"
    "{\"ph\":\"X\",\"cat\":\"overhead\",\"name\":\"Buffer "
    "Flush\",\"pid\":455,\"tid\":3847278592,\"ts\":13.000,\"dur\":1.000,\"args\":{\"overhead "
    "kind\":65536,\"object kind\":2,\"process id\":455,\"thread "
    "id\":3847278592,\"correlation\":0}},\n"
    "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"cuda_event\",\"name\":\"cuda_event\",\"pid\":455,\"tid\":"
    "2147483761,\"ts\":15.000,\"args\":{\"device\":0,\"context\":1,\"stream\":7,\"event "
    "id\":3,\"correlation\":13,\"cuda event sync id\":99}},\n"
    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":455,\"tid\":2281701491,\"args\":{\"name\":"
    "\"CUDA sync ctx 1 stream 7\"}},\n"
    "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":455,\"tid\":2281701491,\"args\":{\"sort_"
    "index\":20100000}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_sync\",\"name\":\"Stream "
    "Sync\",\"pid\":455,\"tid\":2281701491,\"ts\":16.000,\"dur\":1.000,\"args\":{\"sync "
    "type\":3,\"correlation\":14,\"context\":1,\"stream\":7,\"event id\":0,\"cuda event sync "
    "id\":0,\"return value\":0}},\n"
    "{\"ph\":\"b\",\"cat\":\"nvtx\",\"name\":\"step "
    "1\",\"id2\":{\"local\":\"0x5\"},\"pid\":455,\"tid\":3847278592,\"ts\":18.000,\"args\":{\"id\":"
    "5,\"flags\":2,\"process id\":455,\"thread "
    "id\":3847278592,\"domain\":\"app\",\"color\":4278255360,\"category\":2,\"payload "
    "kind\":1,\"payload\":42,\"cupti domain id\":0}},\n"
    "{\"ph\":\"e\",\"cat\":\"nvtx\",\"name\":\"step "
    "1\",\"id2\":{\"local\":\"0x5\"},\"pid\":455,\"tid\":3847278592,\"ts\":19.000,\"args\":{\"id\":"
    "5,\"flags\":4,\"process id\":455,\"thread id\":3847278592,\"domain\":\"app\"}},\n"
    "{\"ph\":\"i\",\"cat\":\"nvtx\",\"name\":\"step "
    "1\",\"s\":\"t\",\"pid\":455,\"tid\":3847278592,\"ts\":19.500,\"args\":{\"id\":6,\"flags\":1,"
    "\"process id\":455,\"thread id\":3847278592}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void scale<2>(float*, "
    "int)\",\"pid\":455,\"tid\":2147483761,\"ts\":-1.500,\"dur\":1.000,\"args\":{\"device\":0,"
    "\"context\":1,\"stream\":7,\"correlation\":0,\"graph id\":0,\"graph node "
    "id\":0,\"grid\":[64,1,1],\"block\":[256,1,1],\"registers per thread\":16,\"shared "
    "memory\":128,\"dynamic shared memory\":0,\"local memory per thread\":0}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_driver\",\"name\":\"cuLaunchKernel\",\"pid\":455,\"tid\":"
    "3847278592,\"ts\":10.000,\"dur\":0.500,\"args\":{\"cbid\":307,\"correlation\":12,\"return "
    "value\":1}},\n"
    "{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":12,\"pid\":455,\"tid\":3847278592,"
    "\"ts\":10.000},\n"
    "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":12,\"pid\":455,\"tid\":"
    "2147483857,\"ts\":11.000}\n"
    "],\n"
    "\"displayTimeUnit\": \"ms\",\n"
    "\"deviceProperties\": [\n"
    "  {\"id\": 0, \"name\": \"NVIDIA H200\", \"totalGlobalMem\": 150109880320, \"computeMajor\": "
    "9, \"computeMinor\": 0, \"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": 2048, "
    "\"regsPerBlock\": 65536, \"warpSize\": 32, \"sharedMemPerBlock\": 49152, \"numSms\": 132, "
    "\"regsPerMultiprocessor\": 65536, \"sharedMemPerBlockOptin\": 232448, "
    "\"sharedMemPerMultiprocessor\": 233472}\n"
    "],\n"
    "\"distributedInfo\": { \"rank\": 1, \"world_size\": 8 },\n"
    "\"otherData\":{\"producer\":\"cuptimon "
    "0.1.0\",\"base_unix_ns\":1796208557000000000,\"base_utc\":\"2026-12-02T10:49:17.000000000Z\","
    "\"ts_unit\":\"microseconds since "
    "base_unix_ns\",\"processes\":[{\"pid\":455,\"trace_pid\":455,\"hostname\":\"node01\","
    "\"label\":\"train "
    "\\\"A\\\"\",\"job_id\":\"1234\",\"exe\":\"/usr/bin/"
    "python3.12\",\"rank\":1,\"local_rank\":1,\"world_size\":8,\"cupti_version\":130001}],"
    "\"writer\":{\"events\":26,\"flows\":2,\"untimed_records\":0,\"marker_data_orphans\":0,"
    "\"unknown_kernel_names\":1,\"driver_calls_not_shown\":1,\"nested_driver_launches\":1,\"device_"
    "properties_refused\":1},\"test\":1}}\n";

static void write_golden(struct membuf *mb, struct cuptimon_trace_stats *ts)
{
    struct recbuf b;
    struct cuptimon_layout l;
    struct cuptimon_strtab *st;
    struct cuptimon_demangler *dm;
    struct cuptimon_trace *t;
    struct cuptimon_decode_stats ds;
    struct cuptimon_trace_opts o = {.base_ns = BASE};
    struct cuptimon_proc_info p = {.pid = 455,
                                   .hostname = "node01",
                                   .label = "train \"A\"",
                                   .job_id = "1234",
                                   .exe = "/usr/bin/python3.12",
                                   .rank = 1,
                                   .local_rank = 1,
                                   .world_size = 8,
                                   .cupti_version = 130001};
    struct cuptimon_clock clk = {BASE, BASE};
    json_object *extra = json_object_new_object();

    build_golden_input(&b);
    ck_assert_int_eq(cuptimon__layout_init(&l, 130001, NULL), 0);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &st), 0);
    ck_assert_int_eq(cuptimon__demangler_new(0, &dm), 0);
    ck_assert_int_eq(cuptimon__strtab_put(st, 0x1000, "_Z5scaleILi2EEvPfi", 18), 0);
    ck_assert_int_eq(cuptimon__strtab_put(st, 0x2000, "step 1", 6), 0);
    ck_assert_int_eq(cuptimon__strtab_put(st, 0x3000, "app", 3), 0);
    /* The shim's device strings: device 0 is the reference trace's H200;
     * device 1 claims a million SMs and is refused. */
    ck_assert_int_eq(
        cuptimon__strtab_put(st, CUPTIMON_DEVICE_KEY(0), GOLDEN_DEV0, strlen(GOLDEN_DEV0)), 0);
    ck_assert_int_eq(
        cuptimon__strtab_put(st, CUPTIMON_DEVICE_KEY(1), GOLDEN_DEV1, strlen(GOLDEN_DEV1)), 0);
    ck_assert_int_eq(cuptimon__trace_new(&o, mem_write, mb, &t), 0);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p, st, dm), 0);
    memset(&ds, 0, sizeof(ds));
    ck_assert_int_eq(cuptimon__trace_buffer(t, 0, &l, b.data, b.len, &clk, &ds), 0);
    ck_assert_uint_eq(ds.records, 17);
    ck_assert_uint_eq(ds.undecodable_bytes, 0);
    json_object_object_add(extra, "test", json_object_new_int(1));
    ck_assert_int_eq(cuptimon__trace_finish(t, extra), 0);
    json_object_put(extra);
    cuptimon__trace_stats(t, ts);
    cuptimon__trace_free(t);
    cuptimon__demangler_free(dm);
    cuptimon__strtab_free(st);
}

START_TEST(golden_trace)
{
    struct membuf mb = {0};
    struct cuptimon_trace_stats ts;

    write_golden(&mb, &ts);
    if (getenv("CUPTIMON_PRINT_GOLDEN"))
        fputs(mb.data, stdout);
    if (strcmp(mb.data, golden) != 0) {
        size_t i = 0;
        while (mb.data[i] && mb.data[i] == golden[i])
            i++;
        ck_abort_msg("trace differs from the golden text at byte %zu:\n got: %.120s\nwant: %.120s",
                     i, mb.data + (i > 40 ? i - 40 : 0), golden + (i > 40 ? i - 40 : 0));
    }
    ck_assert_uint_eq(ts.bytes, mb.len);
    ck_assert_uint_eq(ts.flows, 2);
    ck_assert_uint_eq(ts.unknown_names, 1);
    ck_assert_uint_eq(ts.marker_data_orphans, 0);
    free(mb.data);
}
END_TEST

START_TEST(golden_trace_schema)
{
    struct membuf mb = {0};
    struct cuptimon_trace_stats ts;
    struct schema sc;
    json_object *root, *e, *args, *v;

    write_golden(&mb, &ts);
    root = parse(mb.data, mb.len);
    schema_check(root, &sc);
    ts_text_check(mb.data);
    ck_assert_uint_eq(sc.n, ts.events);
    ck_assert_uint_eq(sc.ph['X'], 9); /* 3 kernels, memcpy, memset, 2 API, overhead, sync */
    ck_assert_uint_eq(sc.ph['s'], 2);
    ck_assert_uint_eq(sc.ph['f'], 2);
    ck_assert_uint_eq(sc.ph['b'], 1);
    ck_assert_uint_eq(sc.ph['e'], 1);
    ck_assert_uint_eq(sc.ph['i'], 2); /* the CUDA event and the NVTX instant */
    ck_assert_uint_eq(flows_check(root), 2);

    /* The process, named as Kineto names it (the command's base name),
     * with rank and label; "CPU" and the rest in its labels. */
    e = find_ev(root, "M", "process_name");
    ck_assert_str_eq(gets(get(e, "args"), "name"), "python3.12 rank 1 (train \"A\")");
    ck_assert_int_eq(json_object_get_int(get(e, "pid")), 455);
    ck_assert_int_eq(json_object_get_int(get(e, "tid")), 0);
    e = find_ev(root, "M", "process_labels");
    ck_assert_str_eq(
        gets(get(e, "args"), "labels"),
        "CPU, host node01, rank 1/8, local rank 1, job 1234, train \"A\", CUPTI 130001");
    e = find_ev(root, "M", "process_sort_index");
    ck_assert_int_eq(json_object_get_int(get(get(e, "args"), "sort_index")), 1);

    /* The kernel: demangled, on GPU 0 stream 7, every arg. */
    e = find_ev(root, "X", "void scale<2>(float*, int)");
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(gets(e, "cat"), "kernel");
    ck_assert_int_eq(us_ns(get(e, "ts")), 6000);
    ck_assert_int_eq(us_ns(get(e, "dur")), 1024);
    args = get(e, "args");
    ck_assert_int_eq(arg_int(e, "device"), 0);
    ck_assert_int_eq(arg_int(e, "context"), 1);
    ck_assert_int_eq(arg_int(e, "stream"), 7);
    ck_assert_int_eq(arg_int(e, "correlation"), 10);
    ck_assert_int_eq(arg_int(e, "graph id"), 3);
    ck_assert_int_eq(arg_int(e, "graph node id"), 44);
    ck_assert_int_eq(arg_int(e, "registers per thread"), 16);
    ck_assert_int_eq(arg_int(e, "shared memory"), 128);
    ck_assert_int_eq(arg_int(e, "External id"), 77);
    ck_assert_str_eq(gets(args, "external kind"), "custom0");
    v = get(args, "grid");
    ck_assert_int_eq(json_object_array_length(v), 3);
    ck_assert_int_eq(json_object_get_int(json_object_array_get_idx(v, 0)), 64);
    v = get(args, "block");
    ck_assert_int_eq(json_object_get_int(json_object_array_get_idx(v, 0)), 256);
    int64_t gpu_tid = json_object_get_int64(get(e, "tid"));
    ck_assert_int_eq(gpu_tid, 0x80000000ll | (7 << 4) | 1);
    /* ... whose track is named. */
    {
        json_object *evs = get(root, "traceEvents");
        int named = 0;
        for (size_t i = 0; i < json_object_array_length(evs); i++) {
            json_object *m = json_object_array_get_idx(evs, i);
            if (strcmp(gets(m, "ph"), "M") == 0 && strcmp(gets(m, "name"), "thread_name") == 0 &&
                json_object_get_int64(get(m, "tid")) == gpu_tid) {
                ck_assert_str_eq(gets(get(m, "args"), "name"), "GPU 0 stream 7");
                named++;
            }
        }
        ck_assert_int_eq(named, 1);
    }

    /* The launch: a CPU thread track, the annotation in its args. */
    e = find_ev(root, "X", "cudaLaunchKernel");
    ck_assert_str_eq(gets(e, "cat"), "cuda_runtime");
    ck_assert_int_eq(json_object_get_int64(get(e, "tid")), 3847278592ll);
    ck_assert_int_eq(arg_int(e, "cbid"), 211);
    ck_assert_int_eq(arg_int(e, "correlation"), 10);
    ck_assert_int_eq(arg_int(e, "External id"), 77);
    ck_assert_int_eq(us_ns(get(e, "ts")), 1000);
    ck_assert_int_eq(us_ns(get(e, "dur")), 4000);
    /* One launch event per launch: the nested cuLaunchKernel (correlation
     * 10) is not written, the direct one (12) is; the unknown driver call
     * is counted, not written. */
    e = find_ev(root, "X", "cuLaunchKernel");
    ck_assert_str_eq(gets(e, "cat"), "cuda_driver");
    ck_assert_int_eq(arg_int(e, "correlation"), 12);
    ck_assert_int_eq(arg_int(e, "return value"), 1);
    ck_assert_ptr_null(find_ev(root, "X", "driver_cbid_12345678"));
    {
        json_object *w = get(get(root, "otherData"), "writer");
        ck_assert_int_eq(json_object_get_int64(get(w, "driver_calls_not_shown")), 1);
        ck_assert_int_eq(json_object_get_int64(get(w, "nested_driver_launches")), 1);
        unsigned launches = 0;
        json_object *evs2 = get(root, "traceEvents");
        for (size_t i = 0; i < json_object_array_length(evs2); i++) {
            json_object *x = json_object_array_get_idx(evs2, i);
            const char *nm = gets(x, "name");
            launches +=
                nm && (strcmp(nm, "cuLaunchKernel") == 0 || strcmp(nm, "cudaLaunchKernel") == 0) &&
                arg_int(x, "correlation") == 10;
        }
        ck_assert_uint_eq(launches, 1);
    }

    /* The flow ids are the correlation ids (process 0). */
    e = find_ev(root, "s", NULL);
    ck_assert_int_eq(json_object_get_int64(get(e, "id")), 10);

    e = find_ev(root, "X", "Memcpy DtoH (Device -> Pinned)");
    ck_assert_str_eq(gets(e, "cat"), "gpu_memcpy");
    ck_assert_int_eq(arg_int(e, "bytes"), 4096);
    ck_assert_int_eq(arg_int(e, "copy kind"), 2);
    ck_assert_int_eq(arg_int(e, "src kind"), 3);
    ck_assert_int_eq(arg_int(e, "dst kind"), 2);
    ck_assert_int_eq(arg_int(e, "flags"), 1);
    e = find_ev(root, "X", "Memset (Device)");
    ck_assert_str_eq(gets(e, "cat"), "gpu_memset");
    ck_assert_int_eq(arg_int(e, "memory kind"), 3);
    ck_assert_int_eq(arg_int(e, "stream"), 13);

    e = find_ev(root, "X", "<unknown kernel 0xdead0>");
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(us_ns(get(e, "dur")), 0);

    e = find_ev(root, "X", "Buffer Flush");
    ck_assert_str_eq(gets(e, "cat"), "overhead");
    ck_assert_int_eq(json_object_get_int64(get(e, "tid")), 3847278592ll);
    ck_assert_int_eq(arg_int(e, "overhead kind"), 1 << 16);

    e = find_ev(root, "i", "cuda_event");
    ck_assert_int_eq(arg_int(e, "event id"), 3);
    ck_assert_int_eq(arg_int(e, "cuda event sync id"), 99);
    ck_assert_int_eq(json_object_get_int64(get(e, "tid")), gpu_tid);

    e = find_ev(root, "X", "Stream Sync");
    ck_assert_str_eq(gets(e, "cat"), "cuda_sync");
    ck_assert_int_eq(arg_int(e, "sync type"), 3);

    /* NVTX: the range's begin carries its marker data, its end the name. */
    e = find_ev(root, "b", "step 1");
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(gets(get(e, "args"), "domain"), "app");
    ck_assert_int_eq(arg_int(e, "color"), 0xff00ff00ll);
    ck_assert_int_eq(arg_int(e, "payload"), 42);
    ck_assert_int_eq(arg_int(e, "category"), 2);
    e = find_ev(root, "e", "step 1");
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(us_ns(get(e, "ts")), 19000);
    e = find_ev(root, "i", "step 1");
    ck_assert_ptr_nonnull(e);

    /* The kernel before the base has a negative ts. */
    ck_assert_ptr_nonnull(strstr(mb.data, "\"ts\":-1.500,\"dur\":1.000"));

    e = get(root, "distributedInfo");
    ck_assert_int_eq(json_object_get_int(get(e, "rank")), 1);
    ck_assert_int_eq(json_object_get_int(get(e, "world_size")), 8);
    e = get(root, "otherData");
    ck_assert(json_object_get_uint64(get(e, "base_unix_ns")) == BASE);
    ck_assert_int_eq(json_object_get_int(get(e, "test")), 1);
    ck_assert_str_eq(gets(e, "base_utc"), "2026-12-02T10:49:17.000000000Z");
    json_object_put(root);
    free(mb.data);
}
END_TEST

/* ---- writer behaviour ----------------------------------------------------- */

static void kernel_ev(struct cuptimon_ev *ev, uint64_t name, uint64_t start, uint32_t corr)
{
    memset(ev, 0, sizeof(*ev));
    ev->type = CUPTIMON_EV_KERNEL;
    ev->cupti_kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    ev->start = start;
    ev->end = start + 1000;
    ev->stream_id = 7;
    ev->correlation_id = corr;
    ev->u.kernel.name_ptr = name;
}

START_TEST(names_long_invalid_and_late)
{
    struct membuf mb = {0};
    struct cuptimon_strtab *st;
    struct cuptimon_trace *t;
    struct cuptimon_trace_opts o = {.base_ns = BASE};
    struct cuptimon_proc_info p = {.pid = 1, .rank = -1, .local_rank = -1, .world_size = -1};
    struct cuptimon_ev ev;
    char *big = malloc(60000);
    json_object *root, *evs;

    ck_assert_int_eq(cuptimon__strtab_new(NULL, &st), 0);
    memset(big, 'a', 60000);
    big[0] = '_'; /* not a mangled name: stays as it is */
    ck_assert_int_eq(cuptimon__strtab_put(st, 0x10, big, 60000), 0);
    ck_assert_int_eq(cuptimon__strtab_put(st, 0x20, "bad\xff\xfe<\"name\">", 13), 0);
    ck_assert_int_eq(cuptimon__trace_new(&o, mem_write, &mb, &t), 0);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p, st, NULL), 0);
    kernel_ev(&ev, 0x10, BASE + 1, 0);
    ck_assert_int_eq(cuptimon__trace_event(t, 0, &ev, NULL), 0);
    kernel_ev(&ev, 0x20, BASE + 2, 0);
    ck_assert_int_eq(cuptimon__trace_event(t, 0, &ev, NULL), 0);
    /* Unknown, then the string arrives: the next event has the name. */
    kernel_ev(&ev, 0x30, BASE + 3, 0);
    ck_assert_int_eq(cuptimon__trace_event(t, 0, &ev, NULL), 0);
    ck_assert_int_eq(cuptimon__strtab_put(st, 0x30, "late_kernel", 11), 0);
    ck_assert_int_eq(cuptimon__trace_event(t, 0, &ev, NULL), 0);
    /* A re-used pointer: the writer's cache follows the table. */
    ck_assert_int_eq(cuptimon__strtab_put(st, 0x30, "reused_kernel", 13), 0);
    ck_assert_int_eq(cuptimon__trace_event(t, 0, &ev, NULL), 0);
    ck_assert_int_eq(cuptimon__trace_finish(t, NULL), 0);
    cuptimon__trace_free(t);

    root = parse(mb.data, mb.len);
    evs = get(root, "traceEvents");
    {
        json_object *e0 = find_ev(root, "X", NULL);
        const char *n0 = gets(e0, "name");
        ck_assert_uint_eq(strlen(n0), 8192 + 3);
        ck_assert_str_eq(n0 + 8192, "...");
    }
    ck_assert_ptr_nonnull(find_ev(root, "X", "bad\xef\xbf\xbd\xef\xbf\xbd<\"name\">"));
    ck_assert_ptr_nonnull(find_ev(root, "X", "<unknown kernel 0x30>"));
    ck_assert_ptr_nonnull(find_ev(root, "X", "late_kernel"));
    ck_assert_ptr_nonnull(find_ev(root, "X", "reused_kernel"));
    ck_assert_uint_gt(json_object_array_length(evs), 5);
    json_object_put(root);
    cuptimon__strtab_free(st);
    free(big);
    free(mb.data);
}
END_TEST

START_TEST(sink_errors_are_sticky)
{
    struct membuf mb = {.fail_after = 300000};
    struct cuptimon_trace *t;
    struct cuptimon_trace_opts o = {.base_ns = BASE, .buf_size = 1};
    struct cuptimon_proc_info p = {.pid = 1, .rank = -1, .local_rank = -1, .world_size = -1};
    struct cuptimon_ev ev;
    int rc = 0, i;

    ck_assert_int_eq(cuptimon__trace_new(&o, mem_write, &mb, &t), 0);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p, NULL, NULL), 0);
    for (i = 0; i < 100000 && rc == 0; i++) {
        kernel_ev(&ev, 0x10, BASE + (uint64_t)i, (uint32_t)i);
        rc = cuptimon__trace_event(t, 0, &ev, NULL);
    }
    ck_assert_int_eq(rc, -ENOSPC);
    ck_assert_int_eq(cuptimon__trace_event(t, 0, &ev, NULL), -ENOSPC);
    ck_assert_int_eq(cuptimon__trace_finish(t, NULL), -ENOSPC);
    ck_assert_int_eq(cuptimon__trace_finish(t, NULL), -EINVAL);
    ck_assert_int_eq(cuptimon__trace_event(t, 0, &ev, NULL), -EINVAL);
    cuptimon__trace_free(t);
    ck_assert_uint_le(mb.len, 300000);
    free(mb.data);

    /* Bad arguments. */
    ck_assert_int_eq(cuptimon__trace_new(&o, NULL, NULL, &t), -EINVAL);
    ck_assert_ptr_null(t);
}
END_TEST

START_TEST(streams_in_bounded_chunks)
{
    /* Half a million events through the writer: the sink sees chunks no
     * bigger than the buffer, so nothing accumulates. */
    struct membuf mb = {0};
    struct cuptimon_trace *t;
    struct cuptimon_trace_opts o = {.base_ns = BASE, .buf_size = 128u << 10};
    struct cuptimon_proc_info p = {.pid = 1, .rank = -1, .local_rank = -1, .world_size = -1};
    struct cuptimon_trace_stats ts;
    struct cuptimon_ev ev;
    struct cuptimon_strtab *st;

    ck_assert_int_eq(cuptimon__strtab_new(NULL, &st), 0);
    ck_assert_int_eq(cuptimon__strtab_put(st, 0x10, "k", 1), 0);
    ck_assert_int_eq(cuptimon__trace_new(&o, null_write, &mb, &t), 0);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p, st, NULL), 0);
    for (uint32_t i = 0; i < 500000; i++) {
        kernel_ev(&ev, 0x10, BASE + i * 2000ull, 0);
        ev.stream_id = i % 64; /* many tracks */
        ck_assert_int_eq(cuptimon__trace_event(t, 0, &ev, NULL), 0);
    }
    ck_assert_int_eq(cuptimon__trace_finish(t, NULL), 0);
    cuptimon__trace_stats(t, &ts);
    cuptimon__trace_free(t);
    cuptimon__strtab_free(st);
    ck_assert_uint_le(mb.max_chunk, 128u << 10);
    ck_assert_uint_gt(mb.calls, 1000);
    ck_assert_uint_eq(ts.bytes, mb.len);
    /* process_name, process_labels ("CPU") and process_sort_index, 2 per track */
    ck_assert_uint_eq(ts.events, 500000 + 3 + 2 * 64);
}
END_TEST

START_TEST(two_processes_same_pid_and_ranks)
{
    struct membuf mb = {0};
    struct cuptimon_trace *t;
    struct cuptimon_trace_opts o = {.base_ns = BASE};
    struct cuptimon_proc_info p0 = {
        .pid = 77, .hostname = "a", .rank = 3, .local_rank = -1, .world_size = 4};
    struct cuptimon_proc_info p1 = {
        .pid = 77, .hostname = "b", .rank = 2, .local_rank = -1, .world_size = 4};
    struct cuptimon_ev ev;
    json_object *root, *di, *od;

    ck_assert_int_eq(cuptimon__trace_new(&o, mem_write, &mb, &t), 0);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p0, NULL, NULL), 0);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p1, NULL, NULL), 1);
    /* The same correlation id in both: two separate flows, ids scoped. */
    for (int proc = 0; proc < 2; proc++) {
        memset(&ev, 0, sizeof(ev));
        ev.type = CUPTIMON_EV_RUNTIME;
        ev.start = BASE + 100;
        ev.end = BASE + 200;
        ev.correlation_id = 5;
        ev.u.api.cbid = 211;
        ev.u.api.thread_id = 9;
        ev.u.api.process_id = 77;
        ck_assert_int_eq(cuptimon__trace_event(t, proc, &ev, NULL), 0);
        kernel_ev(&ev, 0x10, BASE + 300, 5);
        ck_assert_int_eq(cuptimon__trace_event(t, proc, &ev, NULL), 0);
    }
    ck_assert_int_eq(cuptimon__trace_event(t, 2, &ev, NULL), -EINVAL);
    ck_assert_int_eq(cuptimon__trace_finish(t, NULL), 0);
    cuptimon__trace_free(t);
    root = parse(mb.data, mb.len);
    ck_assert_uint_eq(flows_check(root), 2);
    {
        json_object *evs = get(root, "traceEvents");
        int64_t ids[2];
        int n = 0;
        for (size_t i = 0; i < json_object_array_length(evs); i++) {
            json_object *e = json_object_array_get_idx(evs, i);
            if (strcmp(gets(e, "ph"), "s") == 0 && n < 2)
                ids[n++] = json_object_get_int64(get(e, "id"));
        }
        ck_assert_int_eq(n, 2);
        ck_assert_int_eq(ids[0], 5);
        ck_assert_int_eq(ids[1], (1ll << 32) | 5);
    }
    ck_assert_ptr_nonnull(strstr(mb.data, "\"pid\":1073741825")); /* 0x40000000 + 1 */
    di = get(root, "distributedInfo");
    ck_assert_int_eq(json_object_get_int(get(di, "rank")), 2);
    ck_assert_int_eq(json_object_get_int(get(di, "world_size")), 4);
    ck_assert_int_eq(json_object_array_length(get(di, "ranks")), 2);
    od = get(root, "otherData");
    ck_assert_int_eq(json_object_array_length(get(od, "processes")), 2);
    json_object_put(root);
    free(mb.data);
}
END_TEST

/* Kineto's process metadata when little is known: no executable, no rank.
 * The name falls back to the pid, the sort index is the pid (Kineto's
 * value), and the labels still start with "CPU"; a pid shared with an
 * earlier process is named by its own pid and sorted by the trace's. */
START_TEST(process_metadata_fallbacks)
{
    struct membuf mb = {0};
    struct cuptimon_trace *t;
    struct cuptimon_trace_opts o = {.base_ns = BASE};
    struct cuptimon_proc_info p0 = {.pid = 4242, .rank = -1, .local_rank = -1, .world_size = -1};
    struct cuptimon_proc_info p1 = {.pid = 4242,
                                    .hostname = "h2",
                                    .exe = "noslash",
                                    .rank = -1,
                                    .local_rank = -1,
                                    .world_size = -1};
    json_object *root, *evs;
    const char *want_name[2] = {"pid 4242", "noslash"};
    const char *want_labels[2] = {"CPU", "CPU, host h2, pid 4242"};
    int64_t want_sort[2] = {4242, 0x40000001};
    int seen[3] = {0, 0, 0};

    ck_assert_int_eq(cuptimon__trace_new(&o, mem_write, &mb, &t), 0);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p0, NULL, NULL), 0);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p1, NULL, NULL), 1);
    ck_assert_int_eq(cuptimon__trace_finish(t, NULL), 0);
    cuptimon__trace_free(t);
    root = parse(mb.data, mb.len);
    evs = get(root, "traceEvents");
    for (size_t i = 0; i < json_object_array_length(evs); i++) {
        json_object *e = json_object_array_get_idx(evs, i), *args = get(e, "args");
        int which = json_object_get_int64(get(e, "pid")) == 4242 ? 0 : 1;
        const char *nm = gets(e, "name");
        ck_assert_str_eq(gets(e, "ph"), "M");
        ck_assert_int_eq(json_object_get_int(get(e, "tid")), 0);
        if (strcmp(nm, "process_name") == 0) {
            ck_assert_str_eq(gets(args, "name"), want_name[which]);
            seen[0]++;
        } else if (strcmp(nm, "process_labels") == 0) {
            ck_assert_str_eq(gets(args, "labels"), want_labels[which]);
            seen[1]++;
        } else if (strcmp(nm, "process_sort_index") == 0) {
            ck_assert_int_eq(json_object_get_int64(get(args, "sort_index")), want_sort[which]);
            seen[2]++;
        }
    }
    ck_assert_int_eq(seen[0], 2);
    ck_assert_int_eq(seen[1], 2);
    ck_assert_int_eq(seen[2], 2);
    json_object_put(root);
    free(mb.data);
}
END_TEST

/* deviceProperties from the shim's device strings, which come from the
 * producer: each malformed or out-of-range one is refused and counted,
 * never written; a device seen by two processes is written once; the rest
 * keep Kineto's keys, in its order, as integers. */
START_TEST(device_properties_hostile)
{
    static const char *const bad[] = {
        "2 1 9 0 1 1 1 32 1 1 1 1 1 wrong-id",                  /* key 1: id must be 1 */
        "1 1 9 0 1 1 1 32 1 1 1 1 1 ",                          /* empty name */
        "1 1 9 0 1 1 1 32 1 1 1 1 1",                           /* no name */
        "1 -1 9 0 1 1 1 32 1 1 1 1 1 neg",                      /* a sign */
        "1 99999999999999999999999 9 0 1 1 1 32 1 1 1 1 1 big", /* past 2^64 */
        "1 1125899906842625 9 0 1 1 1 32 1 1 1 1 1 mem",        /* past 2^50 bytes */
        "1 1 100 0 1 1 1 32 1 1 1 1 1 cc",                      /* compute capability 100 */
        "1 1 9 0 1 1 1 32 1 1 1 1 1 a\nb",                      /* a control character */
        "1 1 9 0 1 1 1 32 1 1 1 1 NAME",                        /* 12 numbers */
        "1  1 9 0 1 1 1 32 1 1 1 1 1 two",                      /* two spaces */
        "1 1 9 0 1 1 1 32 1 1 1 1 1 "
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        "xxxxxx",
    };
    static const char *const keys[] = {"id",
                                       "name",
                                       "totalGlobalMem",
                                       "computeMajor",
                                       "computeMinor",
                                       "maxThreadsPerBlock",
                                       "maxThreadsPerMultiprocessor",
                                       "regsPerBlock",
                                       "warpSize",
                                       "sharedMemPerBlock",
                                       "numSms",
                                       "regsPerMultiprocessor",
                                       "sharedMemPerBlockOptin",
                                       "sharedMemPerMultiprocessor"};
    const char *ok = "3 80000000000 8 6 1024 1536 65536 32 49152 84 65536 101376 102400 "
                     "NVIDIA \"A10\" \xff";
    struct cuptimon_trace_opts o = {.base_ns = BASE};
    struct cuptimon_proc_info p = {.pid = 9, .rank = -1, .local_rank = -1, .world_size = -1};
    struct cuptimon_trace_stats ts;
    struct cuptimon_strtab *st[2];
    struct membuf mb = {0};
    struct cuptimon_trace *t;
    json_object *root, *dp, *d;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(cuptimon__strtab_new(NULL, &st[0]), 0);
        ck_assert_int_eq(
            cuptimon__strtab_put(st[0], CUPTIMON_DEVICE_KEY(1), bad[i], strlen(bad[i])), 0);
        mb.len = 0;
        ck_assert_int_eq(cuptimon__trace_new(&o, mem_write, &mb, &t), 0);
        ck_assert_int_eq(cuptimon__trace_add_process(t, &p, st[0], NULL), 0);
        ck_assert_int_eq(cuptimon__trace_finish(t, NULL), 0);
        cuptimon__trace_stats(t, &ts);
        cuptimon__trace_free(t);
        cuptimon__strtab_free(st[0]);
        ck_assert_msg(ts.devices_refused == 1, "not refused: %s", bad[i]);
        root = parse(mb.data, mb.len);
        ck_assert_int_eq(json_object_array_length(get(root, "deviceProperties")), 0);
        json_object_put(root);
    }

    /* Two processes that both know device 3, one of them also device 0. */
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(cuptimon__strtab_new(NULL, &st[k]), 0);
        ck_assert_int_eq(cuptimon__strtab_put(st[k], CUPTIMON_DEVICE_KEY(3), ok, strlen(ok)), 0);
    }
    ck_assert_int_eq(
        cuptimon__strtab_put(st[1], CUPTIMON_DEVICE_KEY(0), GOLDEN_DEV0, strlen(GOLDEN_DEV0)), 0);
    mb.len = 0;
    ck_assert_int_eq(cuptimon__trace_new(&o, mem_write, &mb, &t), 0);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p, st[0], NULL), 0);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p, st[1], NULL), 1);
    /* Read when the process was added: the tables may go before the end. */
    ck_assert_int_eq(cuptimon__trace_end_process(t, 0), 0);
    cuptimon__strtab_free(st[0]);
    ck_assert_int_eq(cuptimon__trace_finish(t, NULL), 0);
    cuptimon__trace_stats(t, &ts);
    cuptimon__trace_free(t);
    cuptimon__strtab_free(st[1]);
    ck_assert_uint_eq(ts.devices_refused, 0);
    root = parse(mb.data, mb.len);
    dp = get(root, "deviceProperties");
    ck_assert_int_eq(json_object_array_length(dp), 2);
    d = json_object_array_get_idx(dp, 0);
    ck_assert_int_eq(json_object_object_length(d), 14);
    {
        size_t i = 0;
        json_object_object_foreach(d, key, val)
        {
            ck_assert_str_eq(key, keys[i]);
            ck_assert(json_object_is_type(val, i == 1 ? json_type_string : json_type_int));
            i++;
        }
    }
    ck_assert_int_eq(json_object_get_int(get(d, "id")), 3);
    ck_assert_str_eq(gets(d, "name"), "NVIDIA \"A10\" \xef\xbf\xbd");
    ck_assert_int_eq(json_object_get_int64(get(d, "totalGlobalMem")), 80000000000ll);
    ck_assert_int_eq(json_object_get_int(get(d, "computeMajor")), 8);
    ck_assert_int_eq(json_object_get_int(get(d, "computeMinor")), 6);
    ck_assert_int_eq(json_object_get_int(get(d, "maxThreadsPerMultiprocessor")), 1536);
    ck_assert_int_eq(json_object_get_int(get(d, "numSms")), 84);
    ck_assert_int_eq(json_object_get_int(get(d, "sharedMemPerBlockOptin")), 101376);
    ck_assert_int_eq(json_object_get_int(get(d, "sharedMemPerMultiprocessor")), 102400);
    d = json_object_array_get_idx(dp, 1);
    ck_assert_int_eq(json_object_get_int(get(d, "id")), 0);
    ck_assert_str_eq(gets(d, "name"), "NVIDIA H200");
    ck_assert_int_eq(json_object_get_int(get(d, "numSms")), 132);
    json_object_put(root);
    free(mb.data);
}
END_TEST

START_TEST(empty_trace)
{
    struct membuf mb = {0};
    struct cuptimon_trace *t;
    json_object *root;
    struct schema sc;

    ck_assert_int_eq(cuptimon__trace_new(NULL, mem_write, &mb, &t), 0);
    ck_assert_int_eq(cuptimon__trace_finish(t, NULL), 0);
    cuptimon__trace_free(t);
    root = parse(mb.data, mb.len);
    schema_check(root, &sc);
    ck_assert_uint_eq(sc.n, 0);
    ck_assert_int_eq(json_object_get_int(get(get(root, "distributedInfo"), "rank")), 0);
    ck_assert_int_eq(json_object_get_int(get(get(root, "distributedInfo"), "world_size")), 1);
    json_object_put(root);
    free(mb.data);
    cuptimon__trace_free(NULL);
}
END_TEST

START_TEST(fd_and_file_sinks)
{
    char path[] = "/tmp/cuptimon-trace-XXXXXX";
    int fd = mkstemp(path);
    struct cuptimon_trace *t;
    struct cuptimon_proc_info p = {.pid = 3, .rank = -1, .local_rank = -1, .world_size = -1};
    struct stat sb;
    char *text;
    FILE *f;
    json_object *root;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(cuptimon__trace_new_fd(NULL, fd, &t), 0);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p, NULL, NULL), 0);
    ck_assert_int_eq(cuptimon__trace_finish(t, NULL), 0);
    cuptimon__trace_free(t);
    ck_assert_int_eq(fstat(fd, &sb), 0);
    text = calloc(1, (size_t)sb.st_size + 1);
    ck_assert_int_eq(pread(fd, text, (size_t)sb.st_size, 0), sb.st_size);
    root = parse(text, (size_t)sb.st_size);
    json_object_put(root);
    free(text);
    close(fd);

    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(cuptimon__trace_new_file(NULL, f, &t), 0);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p, NULL, NULL), 0);
    ck_assert_int_eq(cuptimon__trace_finish(t, NULL), 0);
    cuptimon__trace_free(t);
    fclose(f);
    root = json_object_from_file(path);
    ck_assert_ptr_nonnull(root);
    json_object_put(root);
    unlink(path);
}
END_TEST

/* xorshift64*: a fixed sequence. */
static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

START_TEST(garbage_records_give_valid_json)
{
    /* Records of every kind with random field bytes (names, flags, ids,
     * times, kinds out of range): the trace must still be JSON that parses
     * and passes the schema, with every timestamp printed exactly. */
    static const uint32_t kinds[] = {1, 2, 3, 4, 5, 10, 12, 13, 17, 22, 36, 38, 39};
    struct cuptimon_layout l;
    struct cuptimon_strtab *st;
    struct cuptimon_demangler *dm;
    struct cuptimon_proc_info p = {
        .pid = 9, .hostname = "h\x01\xff", .rank = -1, .local_rank = -1, .world_size = -1};
    struct cuptimon_trace_opts o = {.base_ns = BASE};

    cuptimon__layout_init(&l, 130001, NULL);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &st), 0);
    ck_assert_int_eq(cuptimon__demangler_new(0, &dm), 0);
    rng_state = 7;
    for (int round = 0; round < 40; round++) {
        struct membuf mb = {0};
        struct cuptimon_trace *t;
        struct cuptimon_decode_stats ds;
        struct schema sc;
        static uint8_t buf[32768];
        size_t len = 0;
        json_object *root;

        while (1) {
            uint32_t k = kinds[rnd() % (sizeof(kinds) / sizeof(kinds[0]))];
            size_t sz = l.size[k];
            if (len + sz > sizeof(buf))
                break;
            for (size_t j = 0; j < sz; j++)
                buf[len + j] = (uint8_t)rnd();
            /* Small values for some, so that names, tracks and flows hit. */
            if (rnd() % 2) {
                for (size_t j = 4; j + 8 <= sz; j += 8) {
                    uint64_t v = rnd() % 4 == 0 ? BASE + rnd() % 100000 : rnd() % 8;
                    memcpy(buf + len + j, &v, 8);
                }
            }
            memcpy(buf + len, &k, 4);
            len += sz;
        }
        /* Names with odd bytes for some small pointer values. */
        for (uint64_t ptr = 1; ptr < 8; ptr++) {
            char nm[16];
            for (int j = 0; j < 15; j++)
                nm[j] = (char)(rnd() % 256);
            nm[15] = '\0';
            cuptimon__strtab_put(st, ptr, nm, 15);
        }
        ck_assert_int_eq(cuptimon__trace_new(&o, mem_write, &mb, &t), 0);
        ck_assert_int_eq(cuptimon__trace_add_process(t, &p, st, dm), 0);
        memset(&ds, 0, sizeof(ds));
        ck_assert_int_eq(cuptimon__trace_buffer(t, 0, &l, buf, len, NULL, &ds), 0);
        ck_assert_int_eq(cuptimon__trace_finish(t, NULL), 0);
        cuptimon__trace_free(t);
        ck_assert_uint_eq(ds.undecodable_bytes, 0);
        root = parse(mb.data, mb.len);
        schema_check(root, &sc);
        ts_text_check(mb.data);
        json_object_put(root);
        free(mb.data);
    }
    cuptimon__demangler_free(dm);
    cuptimon__strtab_free(st);
}
END_TEST

START_TEST(end_process_frees_and_refuses)
{
    struct membuf mb = {0};
    struct cuptimon_trace *t;
    struct cuptimon_proc_info p = {.pid = 1, .rank = -1, .local_rank = -1, .world_size = -1};
    struct cuptimon_ev ev;
    json_object *root;

    ck_assert_int_eq(cuptimon__trace_new(NULL, mem_write, &mb, &t), 0);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p, NULL, NULL), 0);
    /* A marker held for its data is written when the process ends. */
    memset(&ev, 0, sizeof(ev));
    ev.type = CUPTIMON_EV_MARKER;
    ev.start = ev.end = BASE + 5;
    ev.u.marker.flags = 1;
    ev.u.marker.id = 3;
    ck_assert_int_eq(cuptimon__trace_event(t, 0, &ev, NULL), 0);
    kernel_ev(&ev, 0x10, BASE + 10, 1);
    ck_assert_int_eq(cuptimon__trace_event(t, 0, &ev, NULL), 0);
    memset(&ev, 0, sizeof(ev));
    ev.type = CUPTIMON_EV_MARKER;
    ev.start = ev.end = BASE + 20;
    ev.u.marker.flags = 1;
    ev.u.marker.id = 4;
    ck_assert_int_eq(cuptimon__trace_event(t, 0, &ev, NULL), 0);
    ck_assert_int_eq(cuptimon__trace_end_process(t, 0), 0);
    ck_assert_int_eq(cuptimon__trace_event(t, 0, &ev, NULL), -EINVAL);
    ck_assert_int_eq(cuptimon__trace_end_process(t, 5), -EINVAL);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p, NULL, NULL), 1);
    ck_assert_int_eq(cuptimon__trace_finish(t, NULL), 0);
    cuptimon__trace_free(t);
    root = parse(mb.data, mb.len);
    {
        json_object *evs = get(root, "traceEvents");
        unsigned inst = 0;
        for (size_t i = 0; i < json_object_array_length(evs); i++)
            inst += strcmp(gets(json_object_array_get_idx(evs, i), "ph"), "i") == 0;
        ck_assert_uint_eq(inst, 2);
    }
    json_object_put(root);
    free(mb.data);
}
END_TEST

/* ---- the real H200 buffers through the writer -------------------------------- */

/* The three kernel name pointers of the dumps, told apart by grid size. */
static void real_names(const uint8_t *buf, size_t len, struct cuptimon_strtab *st)
{
    struct cuptimon_layout l;
    struct cuptimon_decode_stats ds;
    struct cuptimon_walk w;
    struct cuptimon_ev ev;

    cuptimon__layout_init(&l, 130001, NULL);
    memset(&ds, 0, sizeof(ds));
    cuptimon__walk_begin(&w, &l, buf, len, &ds);
    while (cuptimon__walk_next(&w, &ev)) {
        if (ev.type != CUPTIMON_EV_KERNEL)
            continue;
        const char *n = ev.u.kernel.grid_x == 64   ? "_Z5scaleILi2EEvPfi"
                        : ev.u.kernel.grid_x == 32 ? "_Z5scaleILi3EEvPfi"
                                                   : "_ZN2ns7add_oneEPfi";
        cuptimon__strtab_put(st, ev.u.kernel.name_ptr, n, strlen(n));
    }
}

START_TEST(real_buffer_trace)
{
    struct membuf mb = {0};
    size_t len;
    uint8_t *buf = cuptimon__test_load_real("phase1-buf4.bin.zst", &len);
    struct cuptimon_strtab *st;
    struct cuptimon_demangler *dm;
    struct cuptimon_layout l;
    struct cuptimon_trace *t;
    struct cuptimon_trace_stats ts;
    struct cuptimon_decode_stats ds;
    struct cuptimon_trace_opts o = {.base_ns = 1796208557000000000ull};
    struct cuptimon_proc_info p = {.pid = 455,
                                   .hostname = "h200",
                                   .rank = 0,
                                   .local_rank = 0,
                                   .world_size = 1,
                                   .cupti_version = 130001};
    struct cuptimon_clock clk = {0, 0};
    struct schema sc;
    json_object *root, *evs;
    unsigned kernels = 0, rt = 0, drv = 0, named = 0;

    ck_assert_int_eq(cuptimon__strtab_new(NULL, &st), 0);
    ck_assert_int_eq(cuptimon__demangler_new(0, &dm), 0);
    real_names(buf, len, st);
    cuptimon__layout_init(&l, 130001, NULL);
    ck_assert_int_eq(cuptimon__trace_new(&o, mem_write, &mb, &t), 0);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p, st, dm), 0);
    memset(&ds, 0, sizeof(ds));
    ck_assert_int_eq(cuptimon__trace_buffer(t, 0, &l, buf, len, &clk, &ds), 0);
    ck_assert_int_eq(cuptimon__trace_finish(t, NULL), 0);
    cuptimon__trace_stats(t, &ts);
    cuptimon__trace_free(t);
    ck_assert_uint_eq(ds.records, 13954 + 280 + 200 + 13955 + 14434);
    ck_assert_uint_eq(ts.unknown_names, 0);

    root = parse(mb.data, mb.len);
    schema_check(root, &sc);
    ts_text_check(mb.data);
    evs = get(root, "traceEvents");
    for (size_t i = 0; i < json_object_array_length(evs); i++) {
        json_object *e = json_object_array_get_idx(evs, i);
        const char *cat = gets(e, "cat");
        if (cat == NULL)
            continue;
        if (strcmp(cat, "kernel") == 0) {
            const char *n = gets(e, "name");
            kernels++;
            named += strcmp(n, "void scale<2>(float*, int)") == 0 ||
                     strcmp(n, "void scale<3>(float*, int)") == 0 ||
                     strcmp(n, "ns::add_one(float*, int)") == 0;
        } else if (strcmp(cat, "cuda_runtime") == 0) {
            rt++;
        } else if (strcmp(cat, "cuda_driver") == 0) {
            drv++;
        }
    }
    ck_assert_uint_eq(kernels, 13954);
    ck_assert_uint_eq(named, 13954);
    ck_assert_uint_eq(rt, 14434);
    /* The buffer's 13955 driver records are the runtime's and libraries'
     * queries (cuKernelGetName, ...), none a launch: Kineto shows none of
     * them, and they are counted instead. */
    ck_assert_uint_eq(drv, 0);
    ck_assert_uint_eq(ts.driver_hidden, 13955);
    ck_assert_uint_eq(ts.driver_nested, 0);
    /* Nearly every kernel/memcpy/memset has its launch in the same buffer. */
    ck_assert_uint_eq(sc.ph['s'], ts.flows);
    ck_assert_uint_eq(sc.ph['f'], ts.flows);
    ck_assert_uint_gt(ts.flows, 13954 + 280 + 200 - 10);
    ck_assert_ptr_nonnull(find_ev(root, "X", "cudaLaunchKernel"));
    ck_assert_ptr_nonnull(find_ev(root, "X", "cudaMemcpyAsync"));
    ck_assert_ptr_nonnull(find_ev(root, "X", "cudaMemsetAsync"));
    ck_assert_ptr_null(find_ev(root, "X", "cuKernelGetName"));
    json_object_put(root);
    cuptimon__demangler_free(dm);
    cuptimon__strtab_free(st);
    free(buf);
    free(mb.data);
}
END_TEST

/* ---- the summary ------------------------------------------------------------ */

START_TEST(summary_counts_and_top)
{
    struct cuptimon_summary *s;
    struct cuptimon_strtab *st0, *st1;
    struct cuptimon_demangler *dm;
    struct cuptimon_proc_info p = {
        .pid = 1, .hostname = "h", .rank = 0, .local_rank = -1, .world_size = 2};
    struct cuptimon_decode_stats ds;
    struct cuptimon_ev ev;
    json_object *o, *k, *top, *e;

    ck_assert_int_eq(cuptimon__summary_new(&s), 0);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &st0), 0);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &st1), 0);
    ck_assert_int_eq(cuptimon__demangler_new(0, &dm), 0);
    cuptimon__strtab_put(st0, 0x10, "_Z5scaleILi2EEvPfi", 18);
    cuptimon__strtab_put(st0, 0x20, "_ZN2ns7add_oneEPfi", 18);
    /* The same kernel at another address in another process. */
    cuptimon__strtab_put(st1, 0x99, "_Z5scaleILi2EEvPfi", 18);
    ck_assert_int_eq(cuptimon__summary_add_process(s, &p, st0, dm), 0);
    p.pid = 2;
    p.rank = 1;
    ck_assert_int_eq(cuptimon__summary_add_process(s, &p, st1, dm), 1);

    for (int i = 0; i < 10; i++) { /* scale<2>: 10 x 100 ns in proc 0 */
        kernel_ev(&ev, 0x10, 1000, 0);
        ev.end = ev.start + 100;
        cuptimon__summary_event(s, 0, &ev);
    }
    for (int i = 0; i < 5; i++) { /* scale<2>: 5 x 300 ns in proc 1 */
        kernel_ev(&ev, 0x99, 1000, 0);
        ev.end = ev.start + 300;
        cuptimon__summary_event(s, 1, &ev);
    }
    kernel_ev(&ev, 0x20, 1000, 0); /* add_one: 1 x 5000 ns */
    ev.end = ev.start + 5000;
    cuptimon__summary_event(s, 0, &ev);
    kernel_ev(&ev, 0x77, 1000, 0); /* unknown: 1 x 10 ns */
    ev.end = ev.start + 10;
    cuptimon__summary_event(s, 0, &ev);
    memset(&ev, 0, sizeof(ev));
    ev.type = CUPTIMON_EV_MEMCPY;
    ev.start = 10;
    ev.end = 60;
    cuptimon__summary_event(s, 0, &ev);
    ev.type = CUPTIMON_EV_RUNTIME;
    cuptimon__summary_event(s, 1, &ev);
    memset(&ds, 0, sizeof(ds));
    ds.undecodable_bytes = 123;
    ds.skipped_bad_layout = 2;
    ds.skipped_by_kind[10] = 2;
    ds.truncated = 1;
    ds.unknown_kind_stops = ds.stops_unknown_version = 1;
    cuptimon__summary_decode_stats(s, &ds);
    cuptimon__summary_dropped(s, 17);
    cuptimon__summary_set(s, "archive", json_object_new_string("x"));

    o = cuptimon__summary_json(s, 2);
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(json_object_get_int(get(get(o, "records"), "kernel")), 17);
    ck_assert_int_eq(json_object_get_int(get(get(o, "records"), "memcpy")), 1);
    ck_assert_int_eq(json_object_get_int(get(get(o, "records"), "runtime")), 1);
    ck_assert_int_eq(json_object_get_int(get(get(o, "gpu_time_ns"), "memcpy")), 50);
    k = get(o, "kernels");
    ck_assert_int_eq(json_object_get_int(get(k, "count")), 17);
    ck_assert_int_eq(json_object_get_int(get(k, "total_ns")), 1000 + 1500 + 5000 + 10);
    ck_assert_int_eq(json_object_get_int(get(k, "distinct")), 3);
    top = get(k, "top");
    ck_assert_int_eq(json_object_array_length(top), 2);
    e = json_object_array_get_idx(top, 0);
    ck_assert_str_eq(gets(e, "name"), "ns::add_one(float*, int)");
    ck_assert_int_eq(json_object_get_int(get(e, "total_ns")), 5000);
    e = json_object_array_get_idx(top, 1);
    ck_assert_str_eq(gets(e, "name"), "void scale<2>(float*, int)");
    ck_assert_int_eq(json_object_get_int(get(e, "count")), 15);
    ck_assert_int_eq(json_object_get_int(get(e, "total_ns")), 2500);
    ck_assert_int_eq(json_object_get_int(get(e, "mean_ns")), 166);
    ck_assert_int_eq(json_object_get_int(get(e, "min_ns")), 100);
    ck_assert_int_eq(json_object_get_int(get(e, "max_ns")), 300);
    ck_assert_int_eq(json_object_get_int(get(o, "dropped_records")), 17);
    ck_assert_int_eq(json_object_get_int(get(get(o, "undecodable"), "bytes")), 123);
    ck_assert_int_eq(json_object_get_int(get(get(o, "undecodable"), "unknown_layout_records")), 2);
    ck_assert_int_eq(json_object_get_int(get(get(o, "undecodable"), "truncated_buffers")), 1);
    /* The causes named, not only counted (issue 30). */
    ck_assert_str_eq(gets(get(o, "undecodable"), "causes"),
                     "layout mismatch, unknown version, truncated");
    ck_assert_int_eq(
        json_object_get_int(get(get(get(o, "undecodable"), "stops_by_cause"), "unknown_version")),
        1);
    ck_assert_int_eq(json_object_get_int(
                         get(get(get(o, "undecodable"), "skipped_by_kind"), "CONCURRENT_KERNEL")),
                     2);
    ck_assert_int_eq(json_object_array_length(get(o, "processes")), 2);
    ck_assert_str_eq(gets(o, "archive"), "x");
    json_object_put(o);

    /* The full list has the unknown kernel by its pointer. */
    o = cuptimon__summary_json(s, 10);
    top = get(get(o, "kernels"), "top");
    ck_assert_int_eq(json_object_array_length(top), 3);
    ck_assert_str_eq(gets(json_object_array_get_idx(top, 2), "name"), "<unknown kernel 0x77>");
    json_object_put(o);

    cuptimon__summary_free(s);
    cuptimon__strtab_free(st0);
    cuptimon__strtab_free(st1);
    cuptimon__demangler_free(dm);
}
END_TEST

/* ---- cuptimonctl decode ------------------------------------------------------- */

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/cuptimon-decode-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(parse_time_forms)
{
    uint64_t v;
    ck_assert_int_eq(cuptimon__cli_parse_time("1796208557090027706", &v), 0);
    ck_assert(v == 1796208557090027706ull);
    ck_assert_int_eq(cuptimon__cli_parse_time("1796208557", &v), 0);
    ck_assert(v == 1796208557000000000ull);
    ck_assert_int_eq(cuptimon__cli_parse_time("1796208557.090027706", &v), 0);
    ck_assert(v == 1796208557090027706ull);
    ck_assert_int_eq(cuptimon__cli_parse_time("1796208557.5", &v), 0);
    ck_assert(v == 1796208557500000000ull);
    ck_assert_int_eq(cuptimon__cli_parse_time("1796208557.0900277061234", &v), 0);
    ck_assert(v == 1796208557090027706ull);
    ck_assert_int_eq(cuptimon__cli_parse_time("1796208557090ms", &v), 0);
    ck_assert(v == 1796208557090000000ull);
    ck_assert_int_eq(cuptimon__cli_parse_time("1796208557090027us", &v), 0);
    ck_assert(v == 1796208557090027000ull);
    ck_assert_int_eq(cuptimon__cli_parse_time("1.5ms", &v), 0);
    ck_assert(v == 1500000ull);
    ck_assert_int_eq(cuptimon__cli_parse_time("12ns", &v), 0);
    ck_assert(v == 12);
    ck_assert_int_eq(cuptimon__cli_parse_time("7s", &v), 0);
    ck_assert(v == 7000000000ull);
    ck_assert_int_eq(cuptimon__cli_parse_time("", &v), -EINVAL);
    ck_assert_int_eq(cuptimon__cli_parse_time("abc", &v), -EINVAL);
    ck_assert_int_eq(cuptimon__cli_parse_time("1.2.3", &v), -EINVAL);
    ck_assert_int_eq(cuptimon__cli_parse_time("-5", &v), -EINVAL);
    ck_assert_int_eq(cuptimon__cli_parse_time("5h", &v), -EINVAL);
    ck_assert_int_eq(cuptimon__cli_parse_time("99999999999999999999", &v), -EINVAL);
    ck_assert_int_eq(cuptimon__cli_parse_time("99999999999s", &v), -EINVAL);
}
END_TEST

#define META_FMT                                                                                   \
    "{\"pid\": %u, \"hostname\": \"node01\", \"exe\": \"/opt/app/bin/train\", "                    \
    "\"cupti_version\": %u, "                                                                      \
    "\"record_sizes\": {\"1\": 96, \"2\": 88, \"3\": 216, \"4\": 40, \"5\": 40, \"10\": 216},"     \
    "\"job\": {\"rank\": \"%d\", \"local_rank\": \"0\", \"world_size\": \"2\", "                   \
    "\"slurm_job_id\": \"777\", \"label\": \"lbl%d\"}}"

/* Writes a session archive from a real buffer (cut to len bytes), with
 * the kernel names in its strings file; returns the segment path. */
static void make_session(const char *dir, unsigned pid, int rank, const char *file, size_t cut,
                         uint32_t cupti_version)
{
    struct cuptimon_archive_writer *w;
    struct cuptimon_chunk_hdr h;
    struct cuptimon_strtab *st;
    struct cuptimon_buf sb = {0};
    char meta[1024], *err = NULL;
    size_t len;
    uint8_t *buf = cuptimon__test_load_real(file, &len);
    static const char *names[] = {"_Z5scaleILi2EEvPfi", "_Z5scaleILi3EEvPfi", "_ZN2ns7add_oneEPfi"};

    snprintf(meta, sizeof(meta), META_FMT, pid, cupti_version, rank, rank);
    ck_assert_int_eq(cuptimon__aw_open(dir, meta, 64u << 20, 1, &w, &err), 0);
    free(err);
    ck_assert_int_eq(cuptimon__strtab_new(NULL, &st), 0);
    real_names(buf, len, st);
    ck_assert_int_eq(cuptimon__strings_begin(&sb), 0);
    /* The shim sends each (pointer, name) once; recover them via the grid. */
    {
        struct cuptimon_layout l;
        struct cuptimon_decode_stats ds;
        struct cuptimon_walk wk;
        struct cuptimon_ev ev;
        uint64_t seen[3] = {0};
        cuptimon__layout_init(&l, 130001, NULL);
        memset(&ds, 0, sizeof(ds));
        cuptimon__walk_begin(&wk, &l, buf, len, &ds);
        while (cuptimon__walk_next(&wk, &ev)) {
            if (ev.type != CUPTIMON_EV_KERNEL)
                continue;
            int g = ev.u.kernel.grid_x == 64 ? 0 : ev.u.kernel.grid_x == 32 ? 1 : 2;
            if (seen[g])
                continue;
            seen[g] = ev.u.kernel.name_ptr;
            ck_assert_int_eq(
                cuptimon__strings_add(&sb, ev.u.kernel.name_ptr, names[g], strlen(names[g])), 0);
        }
    }
    ck_assert_int_eq(cuptimon__aw_strings(w, sb.data, sb.len), 0);
    memset(&h, 0, sizeof(h));
    h.index = 0;
    h.stream_id = 0;
    h.cupti_ts = 1796208557500000000ull;
    h.unix_ns = 1796208557500000000ull;
    h.raw_size = cut ? cut : len;
    h.dropped = 5;
    ck_assert_int_eq(cuptimon__aw_chunk(w, &h, buf), 0);
    cuptimon__aw_close(w);
    cuptimon__buf_free(&sb);
    cuptimon__strtab_free(st);
    free(buf);
}

static void append_garbage_to_segment(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[1024];
    int done = 0;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "seg-", 4) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "ab");
        ck_assert_ptr_nonnull(f);
        /* A chunk header cut short: a torn tail. */
        fwrite(CUPTIMON_CHUNK_MAGIC, 1, 8, f);
        for (int i = 0; i < 40; i++)
            fputc(i, f);
        fclose(f);
        done = 1;
    }
    closedir(d);
    ck_assert(done);
}

static int run_decode(const char **args, int n)
{
    char *argv[16];
    for (int i = 0; i < n; i++)
        argv[i] = (char *)args[i];
    argv[n] = NULL;
    return cuptimon__cli_decode(n, argv);
}

START_TEST(cli_decode_archive)
{
    char root[300], s0[400], s1[400], out[400], sum[400];
    json_object *tr, *sm, *k, *od, *sess;
    struct schema sc;
    unsigned kernels = 0, procs = 0;

    snprintf(root, sizeof(root), "%s/archive", tmpdir);
    snprintf(s0, sizeof(s0), "%s/a", root);
    snprintf(s1, sizeof(s1), "%s/b", root);
    snprintf(out, sizeof(out), "%s/trace.json", tmpdir);
    snprintf(sum, sizeof(sum), "%s/summary.json", tmpdir);
    make_session(s0, 1001, 0, "phase0-buf3.bin.zst", 0, 130001);
    /* The second session: phase 1 cut inside a record (truncated). */
    make_session(s1, 1002, 1, "phase1-buf4.bin.zst", 100000, 130001);
    append_garbage_to_segment(s0);

    {
        const char *args[] = {"decode", root, "-o", out, "--summary-out", sum, "--top", "5"};
        ck_assert_int_eq(run_decode(args, 8), 0);
    }
    tr = json_object_from_file(out);
    ck_assert_ptr_nonnull(tr);
    schema_check(tr, &sc);
    {
        json_object *evs = get(tr, "traceEvents");
        for (size_t i = 0; i < json_object_array_length(evs); i++) {
            json_object *e = json_object_array_get_idx(evs, i);
            const char *cat = gets(e, "cat");
            if (cat && strcmp(cat, "kernel") == 0)
                kernels++;
            if (strcmp(gets(e, "ph"), "M") == 0 && strcmp(gets(e, "name"), "process_name") == 0)
                procs++;
        }
    }
    ck_assert_uint_eq(procs, 2);
    ck_assert_ptr_nonnull(find_ev(tr, "X", "void scale<2>(float*, int)"));
    ck_assert_ptr_nonnull(find_ev(tr, "X", "ns::add_one(float*, int)"));
    ck_assert_ptr_null(find_ev(tr, "X", "<unknown kernel 0x5615ff2c56d0>"));
    {
        json_object *pn = find_ev(tr, "M", "process_name");
        /* Kineto's way: the command's name (meta.json's exe), here with
         * the rank and label; the host in the labels, after "CPU". */
        ck_assert_str_eq(gets(get(pn, "args"), "name"), "train rank 0 (lbl0)");
        ck_assert_int_eq(json_object_get_int(get(pn, "tid")), 0);
        pn = find_ev(tr, "M", "process_labels");
        ck_assert_str_eq(gets(get(pn, "args"), "labels"),
                         "CPU, host node01, rank 0/2, local rank 0, job 777, lbl0, CUPTI 130001");
    }
    od = get(tr, "otherData");
    sess = get(od, "sessions");
    ck_assert_int_eq(json_object_array_length(sess), 2);
    {
        json_object *a = json_object_array_get_idx(sess, 0);
        ck_assert_int_eq(json_object_get_int(get(a, "torn_tails")) +
                             json_object_get_int(get(a, "corrupt_chunks")),
                         1);
        ck_assert_int_eq(json_object_get_int(get(a, "records_decoded")), 2592 + 51 + 37);
        json_object *b = json_object_array_get_idx(sess, 1);
        ck_assert_int_gt(json_object_get_int(get(b, "undecodable_bytes")), 0);
    }
    ck_assert_int_eq(json_object_array_length(get(get(tr, "distributedInfo"), "ranks")), 2);
    ck_assert_int_eq(json_object_get_int(get(get(tr, "distributedInfo"), "world_size")), 2);
    /* Base: the earliest first-chunk record, rounded down to the second. */
    ck_assert(json_object_get_uint64(get(od, "base_unix_ns")) == 1796208557000000000ull);

    sm = json_object_from_file(sum);
    ck_assert_ptr_nonnull(sm);
    k = get(sm, "kernels");
    ck_assert_int_eq(json_object_get_int(get(k, "count")), (int)kernels);
    ck_assert_int_eq(json_object_get_int(get(get(sm, "records"), "kernel")), (int)kernels);
    ck_assert_int_eq(kernels, 2592 + 332);
    ck_assert_int_eq(json_object_get_int(get(get(sm, "records"), "memcpy")), 51 + 7);
    ck_assert_int_eq(json_object_get_int(get(get(sm, "records"), "runtime")), 344);
    ck_assert_int_eq(json_object_array_length(get(k, "top")), 3);
    ck_assert_int_eq(json_object_get_int(get(sm, "dropped_records")), 10);
    ck_assert_int_gt(json_object_get_int(get(get(sm, "undecodable"), "bytes")), 0);
    ck_assert_int_eq(json_object_get_int(get(get(sm, "undecodable"), "truncated_buffers")), 1);
    ck_assert_int_eq(json_object_array_length(get(sm, "sessions")), 2);
    json_object_put(tr);
    json_object_put(sm);

    /* A time window: only kernels overlapping it, base = --from. */
    {
        const char *args[] = {
            "decode", s0, "-o", out, "--from", "1796208557.41", "--to", "1796208557420000000"};
        ck_assert_int_eq(run_decode(args, 8), 0);
    }
    tr = json_object_from_file(out);
    ck_assert_ptr_nonnull(tr);
    schema_check(tr, &sc);
    {
        json_object *evs = get(tr, "traceEvents");
        unsigned win = 0;
        for (size_t i = 0; i < json_object_array_length(evs); i++) {
            json_object *e = json_object_array_get_idx(evs, i);
            const char *cat = gets(e, "cat");
            if (!cat || strcmp(cat, "kernel") != 0)
                continue;
            win++;
            int64_t ts = us_ns(get(e, "ts")), dur = us_ns(get(e, "dur"));
            ck_assert_int_ge(ts + dur, 0);
            ck_assert_int_lt(ts, 10000000);
        }
        ck_assert_uint_gt(win, 0);
        ck_assert_uint_lt(win, 2592);
    }
    ck_assert(json_object_get_uint64(get(get(tr, "otherData"), "base_unix_ns")) ==
              1796208557410000000ull);
    json_object_put(tr);

    /* Usage errors. */
    {
        const char *a1[] = {"decode"};
        const char *a2[] = {"decode", root, "--from", "yesterday"};
        const char *a3[] = {"decode", root, "--bogus"};
        const char *a4[] = {"decode", root, "--from", "10", "--to", "5"};
        const char *a5[] = {"decode", "/nonexistent/cuptimon", "-o", out};
        const char *a6[] = {"decode", "--help"};
        ck_assert_int_eq(run_decode(a1, 1), 2);
        ck_assert_int_eq(run_decode(a2, 4), 2);
        ck_assert_int_eq(run_decode(a3, 3), 2);
        ck_assert_int_eq(run_decode(a4, 6), 2);
        ck_assert_int_eq(run_decode(a5, 4), 1);
        ck_assert_int_eq(run_decode(a6, 2), 0);
    }
}
END_TEST

START_TEST(cli_decode_unknown_version)
{
    char s0[400], out[400], sum[400];
    json_object *sm;

    snprintf(s0, sizeof(s0), "%s/v14", tmpdir);
    snprintf(out, sizeof(out), "%s/trace.json", tmpdir);
    snprintf(sum, sizeof(sum), "%s/summary.json", tmpdir);
    make_session(s0, 1003, 0, "phase0-buf3.bin.zst", 0, 140000);
    {
        const char *args[] = {"decode", s0, "-o", out, "--summary-out", sum};
        ck_assert_int_eq(run_decode(args, 6), 0);
    }
    sm = json_object_from_file(sum);
    ck_assert_ptr_nonnull(sm);
    ck_assert_int_eq(json_object_get_int(get(get(sm, "records"), "kernel")), 0);
    ck_assert_int_eq(json_object_get_int(get(get(sm, "undecodable"), "bytes")), 568024);
    /* Kinds with a size in meta are walked over and counted. */
    ck_assert_int_eq(json_object_get_int(get(get(sm, "undecodable"), "unknown_version_records")),
                     2592 + 51 + 37);
    json_object_put(sm);
}
END_TEST

/* ---- annotation ranges -------------------------------------------------- */

static void put_range(struct cuptimon_strtab *st, uint64_t id, const char *name, uint64_t begin,
                      uint32_t tid, uint32_t depth, uint64_t parent, uint64_t end)
{
    char text[CUPTIMON_RANGE_TEXT_MAX];
    struct cuptimon_range_begin b = {
        .unix_ns = begin, .tid = tid, .depth = depth, .parent = parent};
    size_t n;
    if (name)
        ck_assert_int_eq(cuptimon__strtab_put(st, CUPTIMON_ANNOTATION_KEY(id), name, strlen(name)),
                         0);
    n = cuptimon__range_begin_format(text, &b);
    ck_assert_int_eq(cuptimon__strtab_put(st, CUPTIMON_RANGE_BEGIN_KEY(id), text, n), 0);
    if (end) {
        n = cuptimon__range_end_format(text, end);
        ck_assert_int_eq(cuptimon__strtab_put(st, CUPTIMON_RANGE_END_KEY(id), text, n), 0);
    }
}

static void ext_rec(struct recbuf *b, uint32_t corr, uint64_t id)
{
    CUpti_ActivityExternalCorrelation x;
    memset(&x, 0, sizeof(x));
    x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1;
    x.externalId = id;
    x.correlationId = corr;
    add(b, &x, sizeof(x));
}

static void kernel_rec(struct recbuf *b, uint32_t corr, uint32_t stream, uint64_t start,
                       uint64_t end)
{
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof(k));
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = start;
    k.end = end;
    k.contextId = 1;
    k.streamId = stream;
    k.correlationId = corr;
    k.name = PTR(0x1000);
    add(b, &k, sizeof(k));
}

/* Writes the records of b of process 455 (CUPTI 13.0, names and ranges
 * in st, which it frees) into mb with opts o; returns the parsed trace,
 * and the writer's stats in ts when given. */
static json_object *range_run(const struct cuptimon_trace_opts *o, struct cuptimon_strtab *st,
                              const struct recbuf *b, struct membuf *mb,
                              struct cuptimon_trace_stats *ts)
{
    struct cuptimon_layout l;
    struct cuptimon_trace *t;
    struct cuptimon_decode_stats ds;
    struct cuptimon_proc_info p = {
        .pid = 455, .rank = -1, .local_rank = -1, .world_size = -1, .cupti_version = 130001};
    struct cuptimon_clock clk = {BASE, BASE};

    ck_assert_int_eq(cuptimon__layout_init(&l, 130001, NULL), 0);
    ck_assert_int_eq(cuptimon__trace_new(o, mem_write, mb, &t), 0);
    ck_assert_int_eq(cuptimon__trace_add_process(t, &p, st, NULL), 0);
    memset(&ds, 0, sizeof(ds));
    ck_assert_int_eq(cuptimon__trace_buffer(t, 0, &l, b->data, b->len, &clk, &ds), 0);
    ck_assert_int_eq(cuptimon__trace_end_process(t, 0), 0);
    ck_assert_int_eq(cuptimon__trace_finish(t, NULL), 0);
    if (ts)
        cuptimon__trace_stats(t, ts);
    cuptimon__trace_free(t);
    cuptimon__strtab_free(st);
    ts_text_check(mb->data);
    return parse(mb->data, mb->len);
}

/* The trace of the range test's input: window [from, to] (0: none). */
static json_object *range_trace(uint64_t from, uint64_t to, struct membuf *mb)
{
    struct recbuf b = {.len = 0};
    struct cuptimon_strtab *st;
    struct cuptimon_trace_opts o = {.base_ns = BASE, .range_from_ns = from, .range_to_ns = to};
    CUpti_ActivityMemcpy6 m;

    ck_assert_int_eq(cuptimon__strtab_new(NULL, &st), 0);
    ck_assert_int_eq(cuptimon__strtab_put(st, 0x1000, "k", 1), 0);
    /* Thread 42: "fwd" [1, 20] µs, inside it "inner" [2, 3] µs; "early"
     * [-5, 0.5] µs begins before a window at 0; "late" from 30 µs is still
     * open; "after" begins at 50 µs, past a window ending at 40; "gone"
     * ends before 0.  Annotation 11's begin is damaged. */
    put_range(st, 5, "fwd", BASE + 1000, 42, 0, 0, BASE + 20000);
    put_range(st, 6, "inner", BASE + 2000, 42, 1, 5, BASE + 3000);
    put_range(st, 7, "early", BASE - 5000, 42, 0, 0, BASE + 500);
    put_range(st, 8, "late", BASE + 30000, 43, 0, 0, 0);
    put_range(st, 9, "after", BASE + 50000, 42, 0, 0, BASE + 51000);
    put_range(st, 10, "gone", BASE - 9000, 42, 0, 0, BASE - 8000);
    ck_assert_int_eq(cuptimon__strtab_put(st, CUPTIMON_ANNOTATION_KEY(11), "bad", 3), 0);
    ck_assert_int_eq(cuptimon__strtab_put(st, CUPTIMON_RANGE_BEGIN_KEY(11), "12 x", 4), 0);
    /* GPU work: "fwd" launched a kernel [10, 11] and a copy [12, 12.5] on
     * stream 7, and a kernel [14, 14.25] on stream 9; "inner" a kernel
     * [4, 6] on stream 7; correlation 24 carries no annotation. */
    ext_rec(&b, 20, 5);
    kernel_rec(&b, 20, 7, BASE + 10000, BASE + 11000);
    ext_rec(&b, 21, 5);
    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    m.bytes = 64;
    m.start = BASE + 12000;
    m.end = BASE + 12500;
    m.contextId = 1;
    m.streamId = 7;
    m.correlationId = 21;
    add(&b, &m, sizeof(m));
    ext_rec(&b, 22, 5);
    kernel_rec(&b, 22, 9, BASE + 14000, BASE + 14250);
    ext_rec(&b, 23, 6);
    kernel_rec(&b, 23, 7, BASE + 4000, BASE + 6000);
    kernel_rec(&b, 24, 7, BASE + 33000, BASE + 35000);
    return range_run(&o, st, &b, mb, NULL);
}

/* The event of category cat named name (on track tid when tid != 0), or NULL. */
static json_object *find_slice(json_object *root, const char *cat, const char *name, uint32_t tid,
                               int *count)
{
    json_object *evs = get(root, "traceEvents"), *hit = NULL;
    *count = 0;
    for (size_t i = 0; i < json_object_array_length(evs); i++) {
        json_object *e = json_object_array_get_idx(evs, i);
        const char *c = gets(e, "cat"), *n = gets(e, "name");
        if (c && n && strcmp(c, cat) == 0 && strcmp(n, name) == 0 &&
            (tid == 0 || (uint32_t)json_object_get_int64(get(e, "tid")) == tid)) {
            hit = e;
            (*count)++;
        }
    }
    return hit;
}

static void want_slice(json_object *root, const char *cat, const char *name, uint32_t tid,
                       int64_t ts, int64_t dur, int64_t ext)
{
    int n;
    json_object *e = find_slice(root, cat, name, tid, &n);
    ck_assert_msg(e != NULL && n == 1, "%s %s on %u: %d slices", cat, name, tid, n);
    ck_assert_str_eq(gets(e, "ph"), "X");
    ck_assert_int_eq(json_object_get_int64(get(e, "pid")), 455);
    ck_assert_int_eq(us_ns(get(e, "ts")), ts);
    ck_assert_int_eq(us_ns(get(e, "dur")), dur);
    ck_assert_int_eq(json_object_get_int64(get(get(e, "args"), "External id")), ext);
}

static uint32_t gpu_tid(uint32_t dev, uint32_t stream)
{
    return 0x80000000u | (dev & 15) << 27 | (stream & 0x7fffff) << 4 | 1;
}

START_TEST(annotation_ranges_window)
{
    struct membuf mb = {0};
    json_object *root = range_trace(BASE, BASE + 40000, &mb), *a;
    int n;

    want_slice(root, "user_annotation", "fwd", 42, 1000, 19000, 5);
    want_slice(root, "user_annotation", "inner", 42, 2000, 1000, 6);
    a = get(find_slice(root, "user_annotation", "inner", 42, &n), "args");
    ck_assert_int_eq(json_object_get_int64(get(a, "depth")), 1);
    ck_assert_int_eq(json_object_get_int64(get(a, "parent external id")), 5);
    ck_assert_ptr_null(get(a, "clipped"));
    a = get(find_slice(root, "user_annotation", "fwd", 42, &n), "args");
    ck_assert_int_eq(json_object_get_int64(get(a, "depth")), 0);
    ck_assert_ptr_null(get(a, "parent external id"));
    /* Begun before the window: from its start, to its own end. */
    want_slice(root, "user_annotation", "early", 42, 0, 500, 7);
    a = get(find_slice(root, "user_annotation", "early", 42, &n), "args");
    ck_assert_str_eq(gets(a, "clipped"), "begin");
    /* Still open: to the window's end, on its own thread. */
    want_slice(root, "user_annotation", "late", 43, 30000, 10000, 8);
    a = get(find_slice(root, "user_annotation", "late", 43, &n), "args");
    ck_assert_str_eq(gets(a, "clipped"), "end");
    ck_assert(json_object_get_boolean(get(a, "open")));
    ck_assert_ptr_null(find_slice(root, "user_annotation", "after", 0, &n));
    ck_assert_ptr_null(find_slice(root, "user_annotation", "gone", 0, &n));
    ck_assert_ptr_null(find_slice(root, "user_annotation", "bad", 0, &n));
    /* GPU: per annotation and stream, first start to last end. */
    want_slice(root, "gpu_user_annotation", "fwd", gpu_tid(0, 7), 10000, 2500, 5);
    want_slice(root, "gpu_user_annotation", "fwd", gpu_tid(0, 9), 14000, 250, 5);
    want_slice(root, "gpu_user_annotation", "inner", gpu_tid(0, 7), 4000, 2000, 6);
    find_slice(root, "gpu_user_annotation", "fwd", 0, &n);
    ck_assert_int_eq(n, 2);
    find_slice(root, "gpu_user_annotation", "early", 0, &n);
    ck_assert_int_eq(n, 0);
    /* The pushing threads are tracks of their own, sorted like API threads. */
    ck_assert_ptr_nonnull(strstr(mb.data, "\"name\":\"thread_sort_index\",\"pid\":455,\"tid\":43"));
    json_object_put(root);
    free(mb.data);
}
END_TEST

START_TEST(annotation_ranges_no_window)
{
    struct membuf mb = {0};
    json_object *root = range_trace(0, 0, &mb), *a;
    int n;

    /* Without bounds every range is drawn whole; the open one ends at the
     * process's last event (the kernel ending at 35 µs). */
    want_slice(root, "user_annotation", "early", 42, -5000, 5500, 7);
    want_slice(root, "user_annotation", "after", 42, 50000, 1000, 9);
    want_slice(root, "user_annotation", "gone", 42, -9000, 1000, 10);
    want_slice(root, "user_annotation", "late", 43, 30000, 5000, 8);
    a = get(find_slice(root, "user_annotation", "late", 43, &n), "args");
    ck_assert(json_object_get_boolean(get(a, "open")));
    ck_assert_ptr_null(get(a, "clipped"));
    a = get(find_slice(root, "user_annotation", "early", 42, &n), "args");
    ck_assert_ptr_null(get(a, "clipped"));
    json_object_put(root);
    free(mb.data);
}
END_TEST

static void api_rec(struct recbuf *b, uint32_t corr, uint32_t tid, uint64_t start)
{
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof(a));
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = 211; /* cudaLaunchKernel */
    a.start = start;
    a.end = start + 300;
    a.processId = 455;
    a.threadId = tid;
    a.correlationId = corr;
    add(b, &a, sizeof(a));
}

/* Work launched on a thread with no annotation (autograd's engine thread,
 * 50) while another thread's range is open: given to that range
 * by the launch's time, whichever of the kernel and its runtime record
 * comes first (CUPTI 13.0 writes the kernel first); with flows or not. */
static json_object *by_time_trace(int no_flows, struct membuf *mb, struct cuptimon_trace_stats *ts)
{
    struct recbuf b = {.len = 0};
    struct cuptimon_strtab *st;
    struct cuptimon_trace_opts o = {.base_ns = BASE, .no_flows = no_flows};

    ck_assert_int_eq(cuptimon__strtab_new(NULL, &st), 0);
    ck_assert_int_eq(cuptimon__strtab_put(st, 0x1000, "k", 1), 0);
    /* Thread 42: "backward" [1, 20] us, "bw-inner" [2, 3] us inside it;
     * threads 44 and 45 each have a range open over [32, 38] us; thread
     * 46 has "own" [50, 60] us.  Thread 50, the launcher, has none. */
    put_range(st, 5, "backward", BASE + 1000, 42, 0, 0, BASE + 20000);
    put_range(st, 6, "bw-inner", BASE + 2000, 42, 1, 5, BASE + 3000);
    put_range(st, 7, "a", BASE + 30000, 44, 0, 0, BASE + 40000);
    put_range(st, 8, "b", BASE + 32000, 45, 0, 0, BASE + 38000);
    put_range(st, 9, "own", BASE + 50000, 46, 0, 0, BASE + 60000);
    /* 30: kernel first, launched at 5 us: "backward". */
    kernel_rec(&b, 30, 7, BASE + 8000, BASE + 9000);
    api_rec(&b, 30, 50, BASE + 5000);
    /* 31: launch first, at 2.5 us: the innermost, "bw-inner". */
    api_rec(&b, 31, 50, BASE + 2500);
    kernel_rec(&b, 31, 7, BASE + 10000, BASE + 12000);
    /* 32: at 35 us two other threads have ranges open: nobody's. */
    kernel_rec(&b, 32, 9, BASE + 41000, BASE + 42000);
    api_rec(&b, 32, 50, BASE + 35000);
    /* 33: at 25 us nothing is open. */
    kernel_rec(&b, 33, 9, BASE + 43000, BASE + 44000);
    api_rec(&b, 33, 50, BASE + 25000);
    /* 34: thread 46 at 52 us, inside its own range, the correlation
     * missing: its own range. */
    kernel_rec(&b, 34, 9, BASE + 55000, BASE + 56000);
    api_rec(&b, 34, 46, BASE + 52000);
    /* 36: thread 44, which has ranges of its own, launches outside them
     * at 15 us, inside "backward": its own business, nobody's. */
    kernel_rec(&b, 36, 9, BASE + 45000, BASE + 46000);
    api_rec(&b, 36, 44, BASE + 15000);
    /* 35: the external correlation comes with the launch, after the
     * kernel: "bw-inner" by correlation, not by time. */
    kernel_rec(&b, 35, 9, BASE + 14000, BASE + 15000);
    ext_rec(&b, 35, 6);
    api_rec(&b, 35, 42, BASE + 2200);
    return range_run(&o, st, &b, mb, ts);
}

START_TEST(annotation_by_launch_time)
{
    for (int no_flows = 0; no_flows < 2; no_flows++) {
        struct membuf mb = {0};
        struct cuptimon_trace_stats ts;
        json_object *root = by_time_trace(no_flows, &mb, &ts), *a;
        int n;

        want_slice(root, "gpu_user_annotation", "backward", gpu_tid(0, 7), 8000, 1000, 5);
        a = get(find_slice(root, "gpu_user_annotation", "backward", 0, &n), "args");
        ck_assert(json_object_get_boolean(get(a, "attributed by launch time")));
        want_slice(root, "gpu_user_annotation", "bw-inner", gpu_tid(0, 7), 10000, 2000, 6);
        want_slice(root, "gpu_user_annotation", "bw-inner", gpu_tid(0, 9), 14000, 1000, 6);
        a = get(find_slice(root, "gpu_user_annotation", "bw-inner", gpu_tid(0, 9), &n), "args");
        ck_assert_ptr_null(get(a, "attributed by launch time"));
        want_slice(root, "gpu_user_annotation", "own", gpu_tid(0, 9), 55000, 1000, 9);
        ck_assert_ptr_null(find_slice(root, "gpu_user_annotation", "a", 0, &n));
        ck_assert_ptr_null(find_slice(root, "gpu_user_annotation", "b", 0, &n));
        ck_assert_uint_eq(ts.ua_by_time, 3);
        ck_assert_uint_eq(ts.ua_ambiguous, 1);
        ck_assert_uint_eq(ts.flows, no_flows ? 0 : 7);
        json_object_put(root);
        free(mb.data);
    }
}
END_TEST

/* A runtime launch and the driver launch it made share a correlation id;
 * CUPTI does not promise which record comes first.  Either way the trace
 * shows one launch per correlation id (HTA's queue-length summary asserts
 * on a second one). */
static void drv_rec(struct recbuf *b, uint32_t corr, uint32_t tid, uint64_t start)
{
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof(a));
    a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    a.cbid = 307; /* cuLaunchKernel */
    a.start = start;
    a.end = start + 100;
    a.processId = 455;
    a.threadId = tid;
    a.correlationId = corr;
    add(b, &a, sizeof(a));
}

static int count_cat(json_object *root, const char *cat, uint32_t corr)
{
    json_object *evs = get(root, "traceEvents");
    int n = 0;
    for (size_t i = 0; i < json_object_array_length(evs); i++) {
        json_object *e = json_object_array_get_idx(evs, i);
        const char *c = gets(e, "cat");
        if (c && strcmp(c, cat) == 0 && (corr == 0 || arg_int(e, "correlation") == corr))
            n++;
    }
    return n;
}

START_TEST(nested_driver_launch_either_order)
{
    for (int no_flows = 0; no_flows < 2; no_flows++) {
        struct recbuf b = {.len = 0};
        struct membuf mb = {0};
        struct cuptimon_strtab *st;
        struct cuptimon_trace_stats ts;
        struct cuptimon_trace_opts o = {.base_ns = BASE, .no_flows = no_flows};

        ck_assert_int_eq(cuptimon__strtab_new(NULL, &st), 0);
        /* 40: kernel, runtime, then its driver launch. */
        kernel_rec(&b, 40, 7, BASE + 9000, BASE + 9500);
        api_rec(&b, 40, 50, BASE + 1000);
        drv_rec(&b, 40, 50, BASE + 1100);
        /* 41: the driver launch first (CUPTI 13.0's order of completion). */
        drv_rec(&b, 41, 50, BASE + 2100);
        api_rec(&b, 41, 50, BASE + 2000);
        kernel_rec(&b, 41, 7, BASE + 9600, BASE + 9700);
        /* 42: runtime first, and the thread's next call comes between it
         * and its driver launch. */
        api_rec(&b, 42, 50, BASE + 3000);
        api_rec(&b, 44, 50, BASE + 3500);
        drv_rec(&b, 42, 50, BASE + 3100);
        kernel_rec(&b, 42, 7, BASE + 9800, BASE + 9900);
        kernel_rec(&b, 44, 7, BASE + 9950, BASE + 9990);
        /* 43: a launch straight through the driver: written. */
        drv_rec(&b, 43, 50, BASE + 4000);
        kernel_rec(&b, 43, 9, BASE + 10000, BASE + 10100);
        json_object *root = range_run(&o, st, &b, &mb, &ts);

        for (uint32_t c = 40; c <= 44; c++)
            ck_assert_msg(count_cat(root, "cuda_runtime", c) + count_cat(root, "cuda_driver", c) ==
                              1,
                          "correlation %u: %d runtime and %d driver events", c,
                          count_cat(root, "cuda_runtime", c), count_cat(root, "cuda_driver", c));
        ck_assert_int_eq(count_cat(root, "cuda_driver", 43), 1);
        ck_assert_uint_eq(ts.driver_nested, 3);
        ck_assert_uint_eq(ts.flows, no_flows ? 0 : 5);
        json_object_put(root);
        free(mb.data);
    }
}
END_TEST

/* Correlation ids numbered apart (kernels, copies and memsets from
 * separate counters) can share their low bits while all are in flight:
 * each launch keeps its own annotation and flow arrow. */
START_TEST(correlation_tables_ids_numbered_apart)
{
    struct recbuf b = {.len = 0};
    struct membuf mb = {0};
    struct cuptimon_strtab *st;
    struct cuptimon_trace_stats ts;
    struct cuptimon_trace_opts o = {.base_ns = BASE};
    const uint32_t corr[4] = {5, 5 + 4096, 5 + 8192, 5 + 16384};

    ck_assert_int_eq(cuptimon__strtab_new(NULL, &st), 0);
    for (int i = 0; i < 4; i++) {
        ext_rec(&b, corr[i], 100 + (uint64_t)i);
        api_rec(&b, corr[i], 50, BASE + 1000 * (uint64_t)(i + 1));
    }
    for (int i = 0; i < 4; i++)
        kernel_rec(&b, corr[i], 7, BASE + 10000 * (uint64_t)(i + 1),
                   BASE + 10000 * (uint64_t)(i + 1) + 500);
    json_object *root = range_run(&o, st, &b, &mb, &ts);
    json_object *evs = get(root, "traceEvents");
    int kernels = 0;
    for (size_t j = 0; j < json_object_array_length(evs); j++) {
        json_object *e = json_object_array_get_idx(evs, j);
        const char *c = gets(e, "cat");
        if (c == NULL || (strcmp(c, "kernel") && strcmp(c, "cuda_runtime")))
            continue;
        int64_t cr = arg_int(e, "correlation");
        int i = 0;
        while (i < 4 && corr[i] != (uint32_t)cr)
            i++;
        ck_assert_int_lt(i, 4);
        ck_assert_msg(json_object_object_get_ex(get(e, "args"), "External id", NULL) &&
                          arg_int(e, "External id") == 100 + i,
                      "%s %" PRId64 ": no or the wrong External id", c, cr);
        kernels += strcmp(c, "kernel") == 0;
    }
    ck_assert_int_eq(kernels, 4);
    ck_assert_uint_eq(ts.flows, 4);
    json_object_put(root);
    free(mb.data);
}
END_TEST

/* ---- the parallel gzip writer ------------------------------------------ */

/* Inflates the gzip file at fd (one member, to its end) into a new buffer. */
static unsigned char *gunzip_fd(int fd, size_t *len)
{
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    unsigned char *in = malloc((size_t)st.st_size + 1), *out = NULL;
    ck_assert_int_eq(pread(fd, in, (size_t)st.st_size, 0), st.st_size);
    z_stream z;
    memset(&z, 0, sizeof z);
    ck_assert_int_eq(inflateInit2(&z, 15 + 16), Z_OK);
    size_t cap = 1 << 16;
    out = malloc(cap);
    z.next_in = in;
    z.avail_in = (uInt)st.st_size;
    int zr;
    do {
        if (z.total_out == cap) {
            cap *= 2;
            out = realloc(out, cap);
        }
        z.next_out = out + z.total_out;
        z.avail_out = (uInt)(cap - z.total_out);
        zr = inflate(&z, Z_NO_FLUSH);
        ck_assert_msg(zr == Z_OK || zr == Z_STREAM_END, "inflate: %d", zr);
    } while (zr != Z_STREAM_END);
    /* One member that ends where the file does (its CRC and length were
     * checked by inflate at Z_STREAM_END). */
    ck_assert_uint_eq(z.avail_in, 0);
    *len = z.total_out;
    inflateEnd(&z);
    free(in);
    return out;
}

START_TEST(pgzip_round_trip)
{
    static const size_t sizes[] = {
        0, 1, 32767, 32768, 1u << 20, (1u << 20) + 1, 3 * (1u << 20) + 12345};
    static const int threads[] = {1, 2, 3, 8};
    size_t big = sizes[sizeof sizes / sizeof sizes[0] - 1];
    unsigned char *text = malloc(big);
    uint64_t x = 88172645463325252ull;
    /* Trace-like text: repeats (so that blocks refer back into the one
     * before) with numbers that differ. */
    for (size_t i = 0; i < big;) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int n = snprintf((char *)text + i, big - i, "{\"ph\":\"X\",\"ts\":%llu},\n",
                         (unsigned long long)(x % 100000));
        i += n > 0 && (size_t)n < big - i ? (size_t)n : big - i;
    }
    for (size_t ti = 0; ti < sizeof threads / sizeof threads[0]; ti++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            char path[] = "/tmp/cuptimon-pgz-XXXXXX";
            int fd = mkstemp(path);
            struct cuptimon_pgz *g;
            size_t len, off = 0, step = 1;
            ck_assert_int_ge(fd, 0);
            unlink(path);
            ck_assert_int_eq(cuptimon__pgz_open(fd, 1, threads[ti], &g), 0);
            /* Writes of every size, from 1 byte to past a block. */
            while (off < sizes[si]) {
                size_t n = step < sizes[si] - off ? step : sizes[si] - off;
                ck_assert_int_eq(cuptimon__pgz_write(g, text + off, n), 0);
                off += n;
                step = step * 7 + 3;
            }
            ck_assert_int_eq(cuptimon__pgz_finish(g), 0);
            cuptimon__pgz_free(g);
            unsigned char *back = gunzip_fd(fd, &len);
            ck_assert_msg(len == sizes[si] && memcmp(back, text, len) == 0,
                          "threads %d, %zu bytes: %zu came back", threads[ti], sizes[si], len);
            free(back);
            close(fd);
        }
    free(text);
}
END_TEST

/* A write error (the fd is read-only) is reported, and sticks. */
START_TEST(pgzip_write_error)
{
    struct cuptimon_pgz *g;
    char buf[4096];
    int fd = open("/dev/null", O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_lt(cuptimon__pgz_open(fd, 1, 2, &g), 0);
    close(fd);
    char path[] = "/tmp/cuptimon-pgz-XXXXXX";
    fd = mkstemp(path);
    unlink(path);
    ck_assert_int_eq(cuptimon__pgz_open(fd, 1, 2, &g), 0);
    memset(buf, 'a', sizeof buf);
    int rc = 0;
    close(fd); /* every later write fails */
    for (int i = 0; i < 1024 && rc == 0; i++)
        rc = cuptimon__pgz_write(g, buf, sizeof buf);
    if (rc == 0)
        rc = cuptimon__pgz_finish(g);
    ck_assert_int_eq(rc, -EBADF);
    ck_assert_int_eq(cuptimon__pgz_finish(g), -EBADF);
    cuptimon__pgz_free(g);
}
END_TEST

START_TEST(range_text_forms)
{
    struct cuptimon_range_begin b;
    uint64_t e;
    char text[CUPTIMON_RANGE_TEXT_MAX];
    struct cuptimon_range_begin big = {UINT64_MAX, UINT32_MAX, 65535, CUPTIMON_RANGE_ID_MAX - 1};
    size_t n = cuptimon__range_begin_format(text, &big);
    ck_assert_uint_lt(n, CUPTIMON_RANGE_TEXT_MAX);
    ck_assert_int_eq(cuptimon__range_begin_parse(text, n, &b), 0);
    ck_assert(b.unix_ns == UINT64_MAX && b.tid == UINT32_MAX && b.depth == 65535 &&
              b.parent == CUPTIMON_RANGE_ID_MAX - 1);
    ck_assert_int_eq(cuptimon__range_begin_parse("1 2 3 4", 7, &b), 0);
    ck_assert(b.unix_ns == 1 && b.tid == 2 && b.depth == 3 && b.parent == 4);
    static const char *bad[] = {"",
                                "1 2 3",
                                "1 2 3 4 ",
                                " 1 2 3 4",
                                "1  2 3 4",
                                "01 2 3 4",
                                "1 4294967296 3 4",
                                "1 2 65536 4",
                                "1 2 3 1152921504606846976",
                                "18446744073709551616 2 3 4",
                                "1 2 3 -4",
                                "1 2 3 4x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(cuptimon__range_begin_parse(bad[i], strlen(bad[i]), &b) == -EBADMSG, "%s",
                      bad[i]);
    ck_assert_int_eq(cuptimon__range_end_parse("0", 1, &e), 0);
    ck_assert_uint_eq(e, 0);
    ck_assert_int_eq(cuptimon__range_end_parse("12 ", 3, &e), -EBADMSG);
    ck_assert_int_eq(cuptimon__range_end_parse("", 0, &e), -EBADMSG);
}
END_TEST

/* ---- --from passes chunks over ---------------------------------------- */

/* Appends one chunk of the records in b, completed at done (the clock pair
 * taken then, in CUPTI's default CLOCK_REALTIME timebase). */
static void skip_chunk(struct cuptimon_archive_writer *w, uint64_t index, uint64_t done,
                       const struct recbuf *b, uint64_t records)
{
    struct cuptimon_chunk_hdr h = {.index = index,
                                   .cupti_ts = done,
                                   .unix_ns = done,
                                   .raw_size = b->len,
                                   .records = records,
                                   .dropped = index + 1};
    ck_assert_int_eq(cuptimon__aw_chunk(w, &h, b->data), 0);
}

/* Runs a decode with standard error to the file err. */
static int run_decode_err(const char **args, int n, const char *err)
{
    int saved = dup(STDERR_FILENO), fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644), rc;

    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    dup2(fd, STDERR_FILENO);
    close(fd);
    rc = run_decode(args, n);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    return rc;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    rewind(f);
    buf = calloc(1, (size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

START_TEST(cli_decode_from_passes_chunks_over)
{
    const uint64_t t0 = BASE + 10000000000ull, s = 1000000000ull;
    char dir[400], out[400], sum[400], err[400], out2[400], sum2[400], from[32];
    struct cuptimon_archive_writer *w;
    struct recbuf b;
    json_object *sm, *ss;
    char *text, *text2, *e;

    snprintf(dir, sizeof(dir), "%s/skip", tmpdir);
    snprintf(out, sizeof(out), "%s/skip.json", tmpdir);
    snprintf(sum, sizeof(sum), "%s/skip-sum.json", tmpdir);
    snprintf(out2, sizeof(out2), "%s/all.json", tmpdir);
    snprintf(sum2, sizeof(sum2), "%s/all-sum.json", tmpdir);
    snprintf(err, sizeof(err), "%s/err", tmpdir);
    ck_assert_int_eq(cuptimon__aw_open(dir, "{\"pid\": 1004, \"cupti_version\": 130001}", 64u << 20,
                                       1, &w, NULL),
                     0);
    /* Chunk 0, completed at t0: a launch's external correlation and its
     * kernel, both before t0.  Chunk 1, at t0 + 3 s: a kernel ending
     * before it.  Chunk 2, at t0 + 4 s: a kernel ending 1.5 s after its
     * buffer was completed, which CUPTI never writes. */
    b.len = 0;
    ext_rec(&b, 1, 77);
    kernel_rec(&b, 1, 7, t0 - 2000000, t0 - 1000000);
    skip_chunk(w, 0, t0, &b, 2);
    b.len = 0;
    kernel_rec(&b, 2, 7, t0 + 2500000000ull, t0 + 2600000000ull);
    skip_chunk(w, 1, t0 + 3 * s, &b, 1);
    b.len = 0;
    kernel_rec(&b, 3, 7, t0 + 3900000000ull, t0 + 5500000000ull);
    skip_chunk(w, 2, t0 + 4 * s, &b, 1);
    cuptimon__aw_close(w);

    /* --from t0 + 2 s passes chunk 0 over (completed more than 1 s before). */
    snprintf(from, sizeof(from), "%" PRIu64 "ns", t0 + 2 * s);
    {
        const char *args[] = {"decode", dir, "-o", out, "--summary-out", sum, "--from", from};
        ck_assert_int_eq(run_decode_err(args, 8, err), 0);
    }
    e = slurp(err);
    ck_assert_msg(strstr(e, "1 record(s) end up to 1.500 s after their buffer was completed") &&
                      strstr(e, "--read-all"),
                  "%s", e);
    free(e);
    sm = json_object_from_file(sum);
    ck_assert_ptr_nonnull(sm);
    ss = json_object_array_get_idx(get(sm, "sessions"), 0);
    ck_assert_int_eq(json_object_get_int(get(ss, "chunks")), 3);
    ck_assert_int_eq(json_object_get_int(get(ss, "chunks_skipped")), 1);
    ck_assert_int_eq(json_object_get_int(get(ss, "records_skipped")), 2);
    ck_assert_int_eq(json_object_get_int(get(ss, "records_decoded")), 2);
    ck_assert_int_eq(json_object_get_int(get(ss, "records_kept")), 2);
    ck_assert_int_eq(json_object_get_int(get(ss, "records_late")), 1);
    /* Drops come from the headers: those of chunk 0 are still counted. */
    ck_assert_int_eq(json_object_get_int(get(ss, "dropped_records")), 1 + 2 + 3);
    ck_assert_int_eq(json_object_get_int(get(get(sm, "range_skip"), "chunks")), 1);
    ck_assert_int_eq(json_object_get_int(get(get(sm, "range_skip"), "records_late")), 1);
    ck_assert(json_object_get_uint64(get(get(sm, "range_skip"), "before_unix_ns")) == t0 + s);
    ck_assert_int_eq(json_object_get_int(get(get(sm, "records"), "kernel")), 2);
    /* What passing over gives up: the untimed record of chunk 0. */
    ck_assert_int_eq(json_object_get_int(get(get(sm, "records"), "external_correlation")), 0);
    json_object_put(sm);

    /* --read-all reads chunk 0 too: the same kernels, no warning (nothing
     * was passed over), and the counts of the whole archive. */
    {
        const char *args[] = {"decode", dir,      "-o", out2,        "--summary-out",
                              sum2,     "--from", from, "--read-all"};
        ck_assert_int_eq(run_decode_err(args, 9, err), 0);
    }
    e = slurp(err);
    ck_assert_ptr_null(strstr(e, "--read-all"));
    free(e);
    sm = json_object_from_file(sum2);
    ck_assert_ptr_nonnull(sm);
    ck_assert(!json_object_object_get_ex(sm, "range_skip", NULL));
    ss = json_object_array_get_idx(get(sm, "sessions"), 0);
    ck_assert_int_eq(json_object_get_int(get(ss, "records_decoded")), 4);
    ck_assert(!json_object_object_get_ex(ss, "chunks_skipped", NULL));
    ck_assert_int_eq(json_object_get_int(get(ss, "dropped_records")), 1 + 2 + 3);
    ck_assert_int_eq(json_object_get_int(get(get(sm, "records"), "kernel")), 2);
    ck_assert_int_eq(json_object_get_int(get(get(sm, "records"), "external_correlation")), 1);
    json_object_put(sm);
    /* The events are the same bytes (the traces' names aside). */
    text = slurp(out);
    text2 = slurp(out2);
    ck_assert_ptr_nonnull(strstr(text, "\"traceName\""));
    *strstr(text, "\"traceName\"") = '\0';
    *strstr(text2, "\"traceName\"") = '\0';
    ck_assert_str_eq(text, text2);
    free(text);
    free(text2);
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("trace");
    TCase *t = tcase_create("trace");
    TCase *c = tcase_create("cli");

    tcase_set_timeout(t, 900); /* the real buffers take ~300 s under ASan */
    tcase_add_test(t, json_escape_cases);
    tcase_add_test(t, annotation_ranges_window);
    tcase_add_test(t, annotation_ranges_no_window);
    tcase_add_test(t, annotation_by_launch_time);
    tcase_add_test(t, nested_driver_launch_either_order);
    tcase_add_test(t, correlation_tables_ids_numbered_apart);
    tcase_add_test(t, pgzip_round_trip);
    tcase_add_test(t, pgzip_write_error);
    tcase_add_test(t, range_text_forms);
    tcase_add_test(t, json_escape_every_byte);
    tcase_add_test(t, format_us_exact);
    tcase_add_test(t, golden_trace);
    tcase_add_test(t, golden_trace_schema);
    tcase_add_test(t, names_long_invalid_and_late);
    tcase_add_test(t, sink_errors_are_sticky);
    tcase_add_test(t, streams_in_bounded_chunks);
    tcase_add_test(t, two_processes_same_pid_and_ranks);
    tcase_add_test(t, process_metadata_fallbacks);
    tcase_add_test(t, device_properties_hostile);
    tcase_add_test(t, empty_trace);
    tcase_add_test(t, fd_and_file_sinks);
    tcase_add_test(t, garbage_records_give_valid_json);
    tcase_add_test(t, end_process_frees_and_refuses);
    tcase_add_test(t, real_buffer_trace);
    tcase_add_test(t, summary_counts_and_top);
    suite_add_tcase(s, t);

    tcase_set_timeout(c, 900);
    tcase_add_checked_fixture(c, setup, teardown);
    tcase_add_test(c, parse_time_forms);
    tcase_add_test(c, cli_decode_archive);
    tcase_add_test(c, cli_decode_unknown_version);
    tcase_add_test(c, cli_decode_from_passes_chunks_over);
    suite_add_tcase(s, c);
    return s;
}
