/*
 * cuptimonctl export (cli/export.c) over a session archive written here
 * from CUPTI's own structs, so that every value it must put in a row is
 * known: the names nsys gives a kernel (demangled, base, mangled) for
 * names whose scope or parameters hold parentheses; CUPTI's NVTX markers
 * paired into push/pop and start/end ranges, marks, a range never ended
 * (end NULL) and an end never started (counted); the API call's class,
 * thread and name; memory kinds in nsys' numbering; records without a
 * complete time and kinds with no table counted, not written; drops per
 * chunk; times since the base, and the globalPid/globalTid encodings.
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cupti_activity.h>
#include <sqlite3.h>

#include "archive/archive.h"
#include "cli/cli.h"
#include "cuptimon-proto.h"
#include "tests/unit/testlib.h"

#define BASE   1796208557000000000ull
#define PTR(x) ((void *)(uintptr_t)(x))
#define TID_A  4242u
#define TID_B  4243u

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

static void marker(struct recbuf *b, uint32_t flags, uint32_t id, uint64_t t, uint32_t tid,
                   uint64_t name, uint64_t domain)
{
    CUpti_ActivityMarker2 mk;

    memset(&mk, 0, sizeof mk);
    mk.kind = CUPTI_ACTIVITY_KIND_MARKER;
    mk.flags = (CUpti_ActivityFlag)flags;
    mk.timestamp = BASE + t;
    mk.id = id;
    mk.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    mk.objectId.pt.processId = 455;
    mk.objectId.pt.threadId = tid;
    mk.name = PTR(name);
    mk.domain = PTR(domain);
    add(b, &mk, sizeof mk);
}

static void build(struct recbuf *b)
{
    CUpti_ActivityKernel10 k;
    CUpti_ActivityAPI a;
    CUpti_ActivityMemcpy6 m;
    CUpti_ActivityExternalCorrelation x;
    CUpti_ActivityCudaEvent2 ce;

    b->len = 0;
    memset(&a, 0, sizeof a);
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = 211; /* cudaLaunchKernel */
    a.start = BASE + 1000;
    a.end = BASE + 5000;
    a.processId = 455;
    a.threadId = TID_A;
    a.correlationId = 10;
    add(b, &a, sizeof a);
    a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    a.cbid = 307; /* cuLaunchKernel */
    a.start = BASE + 2000;
    a.end = BASE + 3000;
    a.correlationId = 11;
    add(b, &a, sizeof a);

    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = BASE + 6000;
    k.end = BASE + 7024;
    k.deviceId = 0;
    k.contextId = 1;
    k.streamId = 7;
    k.correlationId = 10;
    k.gridX = 64;
    k.gridY = k.gridZ = 1;
    k.blockX = 256;
    k.blockY = k.blockZ = 1;
    k.registersPerThread = 16;
    k.name = PTR(0x1000);
    add(b, &k, sizeof k);
    k.start = BASE + 8000;
    k.end = BASE + 9000;
    k.correlationId = 11;
    k.name = PTR(0x1100);
    add(b, &k, sizeof k);
    /* Still running at a forced flush: no end, no row. */
    k.start = BASE + 9500;
    k.end = 0;
    k.correlationId = 12;
    add(b, &k, sizeof k);

    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    m.bytes = 4096;
    m.start = BASE + 10000;
    m.end = BASE + 11000;
    m.streamId = 7;
    m.contextId = 1;
    m.correlationId = 13;
    add(b, &m, sizeof m);

    memset(&ce, 0, sizeof ce);
    ce.kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
    ce.correlationId = 14;
    ce.contextId = 1;
    ce.streamId = 7;
    ce.eventId = 3;
    ce.deviceTimestamp = BASE + 15000;
    ce.cudaEventSyncId = 99;
    add(b, &ce, sizeof ce);

    memset(&x, 0, sizeof x);
    x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    x.externalId = 77;
    x.correlationId = 10;
    add(b, &x, sizeof x);

    /* NVTX: a push/pop range, a start/end range ended on another thread,
     * a mark, an end never started, a start never ended. */
    marker(b, CUPTI_ACTIVITY_FLAG_MARKER_START, 5, 18000, TID_A, 0x2000, 0x3000);
    marker(b, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 7, 18500, TID_A, 0x2200, 0);
    marker(b, CUPTI_ACTIVITY_FLAG_MARKER_END, 5, 19000, TID_A, 0, 0);
    marker(b, CUPTI_ACTIVITY_FLAG_MARKER_START, 6, 20000, TID_A, 0x2100, 0x3000);
    marker(b, CUPTI_ACTIVITY_FLAG_MARKER_END, 6, 21000, TID_B, 0, 0);
    marker(b, CUPTI_ACTIVITY_FLAG_MARKER_END, 9, 22000, TID_A, 0, 0);
    marker(b, CUPTI_ACTIVITY_FLAG_MARKER_START, 8, 23000, TID_B, 0x2000, 0);
}

static void put(struct cuptimon_buf *sb, uint64_t ptr, const char *s)
{
    ck_assert_int_eq(cuptimon__strings_add(sb, ptr, s, strlen(s)), 0);
}

static void make_session(const char *dir)
{
    struct cuptimon_archive_writer *w;
    struct cuptimon_chunk_hdr h;
    struct cuptimon_buf sb = {0};
    struct recbuf b;
    char *err = NULL;

    ck_assert_int_eq(cuptimon__aw_open(dir,
                                       "{\"pid\": 455, \"hostname\": \"node01\", \"exe\": "
                                       "\"/usr/bin/python3.12\", \"cupti_version\": 130001, "
                                       "\"job\": {\"rank\": \"3\", \"label\": \"train\"}}",
                                       64u << 20, 1, &w, &err),
                     0);
    free(err);
    ck_assert_int_eq(cuptimon__strings_begin(&sb), 0);
    put(&sb, 0x1000, "_ZN2at6native12_GLOBAL__N_14kernILi4EEEvPf");
    put(&sb, 0x1100, "_Z3fooIiEvPFviE");
    put(&sb, 0x2000, "step 1");
    put(&sb, 0x2100, "async");
    put(&sb, 0x2200, "mark");
    put(&sb, 0x3000, "app");
    put(&sb, CUPTIMON_THREAD_NAME_KEY(TID_A), "pt_main_thread");
    /* The shim's device strings (cuptimon-proto.h). */
    put(&sb, CUPTIMON_DEVICE_KEY(0),
        "0 150109880320 9 0 1024 2048 65536 32 49152 132 65536 232448 233472 NVIDIA H200");
    put(&sb, CUPTIMON_DEVICE_UUID_KEY(0), "GPU-12345678-1234-1234-1234-123456789abc");
    ck_assert_int_eq(cuptimon__aw_strings(w, sb.data, sb.len), 0);
    build(&b);
    memset(&h, 0, sizeof h);
    h.cupti_ts = h.unix_ns = BASE + 100000;
    h.raw_size = b.len;
    h.dropped = 3;
    ck_assert_int_eq(cuptimon__aw_chunk(w, &h, b.data), 0);
    cuptimon__aw_close(w);
    cuptimon__buf_free(&sb);
}

static int run_export(const char **args, int n)
{
    char *argv[16];
    for (int i = 0; i < n; i++)
        argv[i] = (char *)args[i];
    argv[n] = NULL;
    return cuptimon__cli_export(NULL, n, argv);
}

static sqlite3 *db;

/* The one row (or value) a query gives, its columns joined by '|'. */
static const char *q(const char *sql)
{
    static char out[1024];
    sqlite3_stmt *st;
    size_t n = 0;
    int rows = 0;

    out[0] = '\0';
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    while (sqlite3_step(st) == SQLITE_ROW) {
        for (int i = 0; i < sqlite3_column_count(st); i++) {
            const unsigned char *t = sqlite3_column_text(st, i);
            n += (size_t)snprintf(out + n, sizeof out - n, "%s%s",
                                  i      ? "|"
                                  : rows ? "\n"
                                         : "",
                                  t ? (const char *)t : "NULL");
        }
        rows++;
    }
    sqlite3_finalize(st);
    return out;
}

START_TEST(export_rows)
{
    char root[] = "/tmp/cuptimon-export-test.XXXXXX", dir[300], path[300];
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(dir, sizeof dir, "%s/s1", root);
    snprintf(path, sizeof path, "%s/x.sqlite", root);
    make_session(dir);
    {
        const char *args[] = {"export", dir, "--type", "sqlite", "-o", path};
        ck_assert_int_eq(run_export(args, 6), 0);
    }
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    /* globalPid: the pid in bits 24..47, the session's place above. */
    ck_assert_str_eq(q("SELECT globalPid, globalPid / 0x1000000 % 0x1000000, rank, label, "
                       "hostname FROM CUPTIMON_SESSIONS"),
                     "281482610343936|455|3|train|node01");
    ck_assert_str_eq(q("SELECT * FROM PROCESSES"), "281482610343936|455|python3.12");
    ck_assert_str_eq(q("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME"),
                     "1796208557000000000");
    /* Kernels: times since the base; the three names. */
    ck_assert_str_eq(q("SELECT k.start, k.end, k.correlationId, d.value, s.value, m.value, gridX, "
                       "blockX, registersPerThread, streamId FROM CUPTI_ACTIVITY_KIND_KERNEL AS k "
                       "JOIN StringIds AS d ON d.id = k.demangledName JOIN StringIds AS s ON "
                       "s.id = k.shortName JOIN StringIds AS m ON m.id = k.mangledName ORDER BY "
                       "k.start"),
                     "6000|7024|10|void at::native::(anonymous namespace)::kern<4>(float*)|kern|"
                     "_ZN2at6native12_GLOBAL__N_14kernILi4EEEvPf|64|256|16|7\n"
                     "8000|9000|11|void foo<int>(void (*)(int))|foo|_Z3fooIiEvPFviE|64|256|16|7");
    /* API calls: class, thread, CUPTI's full name. */
    ck_assert_str_eq(q("SELECT r.start, r.end, eventClass, globalTid % 0x1000000, globalTid / "
                       "0x1000000 * 0x1000000, correlationId, s.value FROM "
                       "CUPTI_ACTIVITY_KIND_RUNTIME AS r JOIN StringIds AS s ON s.id = r.nameId "
                       "ORDER BY r.start"),
                     "1000|5000|0|4242|281482610343936|10|cudaLaunchKernel_v7000\n"
                     "2000|3000|1|4242|281482610343936|11|cuLaunchKernel");
    /* A copy: nsys' memory kinds (device 2, pinned 1). */
    ck_assert_str_eq(q("SELECT start, end, bytes, copyKind, srcKind, dstKind, srcDeviceId FROM "
                       "CUPTI_ACTIVITY_KIND_MEMCPY"),
                     "10000|11000|4096|2|2|1|NULL");
    ck_assert_str_eq(q("SELECT * FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT"),
                     "15000|0|1|NULL|7|14|281482610343936|3|99");
    /* NVTX. */
    ck_assert_str_eq(q("SELECT n.start, n.end, eventType, s.value, globalTid % 0x1000000, "
                       "endGlobalTid % 0x1000000, domainId FROM NVTX_EVENTS AS n JOIN StringIds "
                       "AS s ON s.id = n.textId WHERE eventType != 75 ORDER BY n.start"),
                     "18000|19000|59|step 1|4242|4242|1\n"
                     "18500|NULL|34|mark|4242|NULL|0\n"
                     "20000|21000|60|async|4242|4243|1\n"
                     "23000|NULL|59|step 1|4243|NULL|0");
    /* The domain, as nsys' recipes find it (nvtx_sum: eventType 75). */
    ck_assert_str_eq(q("SELECT n.domainId, s.value, n.globalTid % 0x1000000 FROM NVTX_EVENTS AS n "
                       "JOIN StringIds AS s ON s.id = n.textId WHERE eventType = 75"),
                     "1|app|4242");
    ck_assert_str_eq(q("SELECT s.value, t.globalTid % 0x1000000 FROM ThreadNames AS t JOIN "
                       "StringIds AS s ON s.id = t.nameId"),
                     "pt_main_thread|4242");
    ck_assert_str_eq(q("SELECT id, name, uuid, totalMemory, smCount, computeMajor, computeMinor, "
                       "threadsPerWarp, maxShmemPerBlockOptin, cuDevice FROM TARGET_INFO_GPU"),
                     "0|NVIDIA H200|GPU-12345678-1234-1234-1234-123456789abc|150109880320|132|9|0|"
                     "32|232448|0");
    /* What was not written, counted. */
    ck_assert_str_eq(q("SELECT recordsDecoded, recordsExported, recordsIncomplete, "
                       "recordsOtherKinds, droppedRecords, nvtxUnpaired, chunksRead FROM "
                       "CUPTIMON_SESSIONS"),
                     "15|10|1|1|3|1|1");
    ck_assert_str_eq(q("SELECT chunkIndex, completed, droppedRecords FROM CUPTIMON_DROPS"),
                     "0|100000|3");
    ck_assert_str_eq(q("SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'"),
                     "3.16.1");
    sqlite3_close(db);
    /* --to before the NVTX ranges: only what starts before it. */
    {
        char to[64];
        const char *args[] = {"export", dir, "--type", "sqlite", "-o", path, "--to", to};
        snprintf(to, sizeof to, "%lluns", BASE + 8500);
        ck_assert_int_eq(run_export(args, 8), 0);
    }
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_str_eq(q("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"), "2");
    ck_assert_str_eq(q("SELECT count(*) FROM NVTX_EVENTS"), "0");
    ck_assert_str_eq(q("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY"), "0");
    sqlite3_close(db);
    {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
        ck_assert_int_eq(system(cmd), 0);
    }
}
END_TEST

/* Two sessions of one pid (a pid reused over the archive's life): two
 * globalPids, so that correlation ids never join across them; their one
 * device is one TARGET_INFO_GPU row. */
START_TEST(export_reused_pid)
{
    char root[] = "/tmp/cuptimon-export-test.XXXXXX", dir[300], path[300], cmd[400];
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(dir, sizeof dir, "%s/a", root);
    make_session(dir);
    snprintf(dir, sizeof dir, "%s/b", root);
    make_session(dir);
    snprintf(path, sizeof path, "%s/x.sqlite", root);
    {
        const char *args[] = {"export", root, "--type=sqlite", "-o", path};
        ck_assert_int_eq(run_export(args, 5), 0);
    }
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_str_eq(q("SELECT count(DISTINCT globalPid), count(*), min(pid), max(pid) FROM "
                       "CUPTIMON_SESSIONS"),
                     "2|2|455|455");
    ck_assert_str_eq(q("SELECT count(*) FROM TARGET_INFO_GPU"), "1");
    ck_assert_str_eq(q("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"), "4");
    /* nsys' own join (cuda_kern_exec_sum): one call per kernel. */
    ck_assert_str_eq(q("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r JOIN "
                       "CUPTI_ACTIVITY_KIND_KERNEL AS k ON k.correlationId = r.correlationId AND "
                       "k.globalPid = (r.globalTid & 0xFFFFFFFFFF000000)"),
                     "4");
    sqlite3_close(db);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

Suite *cuptimon__test_suite(void)
{
    Suite *s = suite_create("export");
    TCase *t = tcase_create("export");
    tcase_add_test(t, export_rows);
    tcase_add_test(t, export_reused_pid);
    suite_add_tcase(s, t);
    return s;
}
