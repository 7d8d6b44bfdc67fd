/*
 * cuptimonctl export ARCHIVE_DIR --type sqlite -o FILE [--from T] [--to T]
 *                   [--pid P] [--label L] [--read-all]
 * cuptimonctl export --window ID --type sqlite -o FILE [...]
 *
 * The archive as an SQLite database in the tables and columns of Nsight
 * Systems' own export (`nsys export --type sqlite`), so that the SQL
 * recipes, pandas notebooks and scripts written against that schema run on
 * every job the node archived.  doc/cuptimonctl.1 states the contract
 * (which schema version it follows, every table and how its values are
 * made) and DESIGN-NOTES.md the sources it was taken from.
 *
 * The archive is read as decode and stats read it (cli/read.h: the options
 * that choose what is read, damage passed over and reported, each chunk
 * walked by the layouts it was written with, --from passing over the
 * chunks completed more than a second before it), and each event becomes
 * a row.  Streamed: one transaction per chunk, nothing held but a
 * session's name ids and its open NVTX ranges, so that a month of archive
 * exports in bounded memory.  The database is written to FILE.tmp.PID and
 * renamed over FILE once complete (the indexes made, everything
 * committed), so that FILE appears complete or not at all.
 */
#include "config.h"

#include "cli.h"
#include "ctl.h"
#include "read.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "archive/archive.h"
#include "archive/cbid.h"
#include "archive/decode.h"
#include "archive/demangle.h"
#include "archive/gpm.h"
#include "archive/session.h"
#include "archive/strtab.h"
#include "cuptimon-proto.h"

#define PROG "cuptimonctl export"

/* The Nsight Systems schema version whose tables and columns the export
 * follows (META_DATA_EXPORT's EXPORT_SCHEMA_VERSION), and the version of
 * cuptimon's own tables beside them. */
#define NSYS_SCHEMA_VERSION     "3.16.1"
#define CUPTIMON_SCHEMA_VERSION "1"

/* ENUM_NSYS_EVENT_CLASS ids of the API calls, and ENUM_NSYS_EVENT_TYPE ids
 * of NVTX events, as nsys numbers them. */
#define EVENT_CLASS_CUDA_RUNTIME 0
#define EVENT_CLASS_CUDA_DRIVER  1
#define NVTX_MARK                34
#define NVTX_PUSHPOP_RANGE       59
#define NVTX_STARTEND_RANGE      60
#define NVTX_DOMAIN_CREATE       75

/* NVTX domains a session's markers name, given ids 1.. (0: the default
 * domain; the markers of domains past this many read as its). */
#define DOMAINS_MAX 256

/* SQLite's page cache (KiB): the bound on what the database holds in
 * memory; 32 MiB keeps the pages the inserts and the final index builds
 * go back to, which the default 2 MiB read back from the file. */
#define EXPORT_CACHE_KIB "32768"

/* Open NVTX start markers a session holds until their end comes. */
#define MARK_OPEN_MAX 65536u

static void usage(FILE *f)
{
    fputs("Usage: cuptimonctl export ARCHIVE_DIR --type=sqlite -o FILE [OPTION]...\n"
          "  or:  cuptimonctl export --window=ID --type=sqlite -o FILE [OPTION]...\n"
          "Write the always-on archive as an SQLite database in the tables and columns of\n"
          "Nsight Systems' own export (nsys export --type sqlite), so that its SQL recipes\n"
          "and scripts run on it: CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET, _RUNTIME\n"
          "(runtime and driver calls), _SYNCHRONIZATION, _CUDA_EVENT, NVTX_EVENTS, StringIds,\n"
          "PROCESSES, ThreadNames, TARGET_INFO_GPU, TARGET_INFO_SESSION_START_TIME,\n"
          "GPU_METRICS, TARGET_INFO_GPU_METRICS and the ENUM_* tables; and cuptimon's own\n"
          "CUPTIMON_SESSIONS (each process's rank, label and job, joined by globalPid, and\n"
          "what was dropped, damaged or undecodable), CUPTIMON_DROPS, CUPTIMON_DAMAGE and\n"
          "CUPTIMON_GPU_METRICS.  cuptimonctl(1) gives every table and column.\n"
          "\n"
          "ARCHIVE_DIR is one session directory (the one holding meta.json) or an output\n"
          "root holding many; every session found is exported into the same database.\n"
          "\n"
          "  -t, --type=sqlite      the format (sqlite is the only one)\n"
          "  -o, --output=FILE      the database to write (a regular file): written to\n"
          "                         FILE.tmp.PID and renamed over FILE when complete, so\n"
          "                         that FILE appears complete or not at all\n"
          "      --from=T           export only events that end at or after T\n"
          "      --to=T             export only events that start before T\n"
          "      --pid=P            export only the sessions of process P (repeatable)\n"
          "      --label=L          export only the sessions labelled L (CUPTIMON_LABEL;\n"
          "                         repeatable; with --pid: either matches)\n"
          "      --window=ID        the processes and the time range of trace window ID\n"
          "                         (asks the daemon; the window must have ended)\n"
          "      --read-all         with --from: read every chunk, also those completed\n"
          "                         before it (as decode --read-all)\n"
          "  -q, --quiet            no progress line (shown only when standard error is\n"
          "                         a terminal)\n"
          "  -h, --help             show this help\n"
          "\n"
          "T is Unix time, as decode takes it: an integer of 10^12 or more is\n"
          "nanoseconds, a smaller one or one with a decimal point seconds; a suffix\n"
          "ns, us, ms or s makes the unit explicit.\n"
          "\n"
          "Times are nanoseconds since TARGET_INFO_SESSION_START_TIME.utcEpochNs, which\n"
          "is the base the trace of 'cuptimonctl decode' uses for the same selection\n"
          "(--from, else the first record rounded down to a whole second): start +\n"
          "utcEpochNs is Unix time in ns, and start / 1000 is the trace's ts.\n"
          "\n"
          "Exit status: 0 on success (also when damaged chunks were skipped: they are\n"
          "reported on standard error and in CUPTIMON_SESSIONS and CUPTIMON_DAMAGE),\n"
          "1 on failure (nothing is left at FILE), 2 on bad usage.\n",
          f);
}

/* ---- the schema ------------------------------------------------------------ */

/* Nsight Systems' tables, column by column as its export names and orders
 * them (schema 3.16.1; the kernel's graphId and cluster columns and the
 * memcpy's copyCount are from later versions, additions its versioning
 * rules call non-breaking), then cuptimon's own.  StringIds' unique index
 * on value makes interning a lookup; it is dropped once the export is
 * done. */
static const char schema_sql[] =
    "CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);\n"
    "CREATE UNIQUE INDEX cuptimon_StringIds_value ON StringIds (value);\n"
    "CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);\n"
    "CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);\n"
    "CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT,"
    " localTime TEXT);\n"
    "CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT,"
    " busLocation TEXT, isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER,"
    " memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER, pwGpuId INTEGER,"
    " uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER, ctxswDevPath TEXT,"
    " ctrlDevPath TEXT, revision INTEGER, nodeMask INTEGER, constantMemory INTEGER,"
    " maxIPC INTEGER, maxRegistersPerBlock INTEGER, maxShmemPerBlock INTEGER,"
    " maxShmemPerBlockOptin INTEGER, maxShmemPerSm INTEGER, maxRegistersPerSm INTEGER,"
    " threadsPerWarp INTEGER, asyncEngines INTEGER, maxWarpsPerSm INTEGER,"
    " maxBlocksPerSm INTEGER, maxThreadsPerBlock INTEGER, maxBlockDimX INTEGER,"
    " maxBlockDimY INTEGER, maxBlockDimZ INTEGER, maxGridDimX INTEGER, maxGridDimY INTEGER,"
    " maxGridDimZ INTEGER, computeMajor INTEGER, computeMinor INTEGER, smMajor INTEGER,"
    " smMinor INTEGER);\n"
    "CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);\n"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,"
    " deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,"
    " streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,"
    " demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,"
    " launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL,"
    " gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,"
    " blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,"
    " staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,"
    " localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL,"
    " gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER,"
    " sharedMemoryLimitConfig INTEGER, graphId INTEGER, clusterX INTEGER, clusterY INTEGER,"
    " clusterZ INTEGER, clusterSchedulingPolicy INTEGER, maxPotentialClusterSize INTEGER,"
    " maxActiveClusters INTEGER);\n"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,"
    " deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,"
    " streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,"
    " bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER,"
    " srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER,"
    " dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER,"
    " graphNodeId INTEGER, virtualAddress INTEGER, copyCount INTEGER);\n"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,"
    " deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,"
    " streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,"
    " value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER,"
    " memKind INTEGER);\n"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,"
    " eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,"
    " nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);\n"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL,"
    " end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,"
    " greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,"
    " globalPid INTEGER, syncType INTEGER NOT NULL, eventId INTEGER NOT NULL);\n"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_CUDA_EVENT (timestamp INTEGER, deviceId INTEGER NOT NULL,"
    " contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL,"
    " correlationId INTEGER, globalPid INTEGER, eventId INTEGER NOT NULL,"
    " eventSyncId INTEGER);\n"
    "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,"
    " rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,"
    " endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER,"
    " int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER,"
    " floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);\n"
    "CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER NOT NULL, sourceId INTEGER NOT NULL,"
    " typeName TEXT NOT NULL, metricId INTEGER NOT NULL, metricName TEXT NOT NULL);\n"
    "CREATE TABLE GPU_METRICS (rawTimestamp INTEGER NOT NULL, timestamp INTEGER NOT NULL,"
    " typeId INTEGER NOT NULL, metricId INTEGER NOT NULL, value INTEGER NOT NULL);\n"
    "CREATE TABLE ENUM_NSYS_EVENT_CLASS (id INTEGER NOT NULL PRIMARY KEY, name TEXT,"
    " label TEXT);\n"
    "CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT,"
    " label TEXT);\n"
    "CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT,"
    " label TEXT);\n"
    "CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);\n"
    "CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT,"
    " label TEXT);\n"
    "CREATE TABLE ENUM_CUDA_KERNEL_LAUNCH_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT,"
    " label TEXT);\n"
    "CREATE TABLE ENUM_CUDA_FUNC_CACHE_CONFIG (id INTEGER NOT NULL PRIMARY KEY, name TEXT,"
    " label TEXT);\n"
    "CREATE TABLE ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG (id INTEGER NOT NULL PRIMARY KEY,"
    " name TEXT, label TEXT);\n"
    "INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES"
    " (0,'TRACE_PROCESS_EVENT_CUDA_RUNTIME','CUDA runtime'),"
    " (1,'TRACE_PROCESS_EVENT_CUDA_DRIVER','CUDA driver');\n"
    "INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (34,'NvtxMark','NvtxMark'),"
    " (59,'NvtxPushPopRange','NvtxPushPopRange'),"
    " (60,'NvtxStartEndRange','NvtxStartEndRange'),"
    " (75,'NvtxDomainCreate','NvtxDomainCreate');\n"
    "INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (0,'CUDA_MEMCPY_KIND_UNKNOWN','Unknown'),"
    " (1,'CUDA_MEMCPY_KIND_HTOD','Host-to-Device'),"
    " (2,'CUDA_MEMCPY_KIND_DTOH','Device-to-Host'),"
    " (3,'CUDA_MEMCPY_KIND_HTOA','Host-to-Array'),"
    " (4,'CUDA_MEMCPY_KIND_ATOH','Array-to-Host'),"
    " (5,'CUDA_MEMCPY_KIND_ATOA','Array-to-Array'),"
    " (6,'CUDA_MEMCPY_KIND_ATOD','Array-to-Device'),"
    " (7,'CUDA_MEMCPY_KIND_DTOA','Device-to-Array'),"
    " (8,'CUDA_MEMCPY_KIND_DTOD','Device-to-Device'),"
    " (9,'CUDA_MEMCPY_KIND_HTOH','Host-to-Host'),"
    " (10,'CUDA_MEMCPY_KIND_PTOP','Peer-to-Peer'),"
    " (11,'CUDA_MEMCPY_KIND_UVM_HTOD','Unified Host-to-Device'),"
    " (12,'CUDA_MEMCPY_KIND_UVM_DTOH','Unified Device-to-Host'),"
    " (13,'CUDA_MEMCPY_KIND_UVM_DTOD','Unified Device-to-Device');\n"
    "INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0,'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE','Pageable'),"
    " (1,'CUDA_MEMOPR_MEMORY_KIND_PINNED','Pinned'),"
    " (2,'CUDA_MEMOPR_MEMORY_KIND_DEVICE','Device'),"
    " (3,'CUDA_MEMOPR_MEMORY_KIND_ARRAY','Array'),"
    " (4,'CUDA_MEMOPR_MEMORY_KIND_MANAGED','Managed'),"
    " (5,'CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC','Device Static'),"
    " (6,'CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC','Managed Static'),"
    " (7,'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN','Unknown');\n"
    "INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES"
    " (0,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN','Unknown'),"
    " (1,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE','Event sync'),"
    " (2,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT','Stream wait sync'),"
    " (3,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE','Stream sync'),"
    " (4,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE','Context sync');\n"
    "INSERT INTO ENUM_CUDA_KERNEL_LAUNCH_TYPE VALUES"
    " (0,'CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR','Regular'),"
    " (1,'CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE','Cooperative single device'),"
    " (2,'CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_MULTI_DEVICE','Cooperative multi device');\n"
    "INSERT INTO ENUM_CUDA_FUNC_CACHE_CONFIG VALUES"
    " (0,'CU_FUNC_CACHE_PREFER_NONE','No preference'),"
    " (1,'CU_FUNC_CACHE_PREFER_SHARED','Prefer shared memory'),"
    " (2,'CU_FUNC_CACHE_PREFER_L1','Prefer L1 cache'),"
    " (3,'CU_FUNC_CACHE_PREFER_EQUAL','Prefer equal L1 and shared memory');\n"
    "INSERT INTO ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG VALUES"
    " (0,'CUPTI_FUNC_SHMEM_LIMIT_DEFAULT','Default'),"
    " (1,'CUPTI_FUNC_SHMEM_LIMIT_OPTIN','Opt-in');\n"
    /* cuptimon's own tables. */
    "CREATE TABLE CUPTIMON_SESSIONS (globalPid INTEGER NOT NULL,"
    " pid INTEGER NOT NULL, hostname TEXT, exe TEXT, label TEXT, jobId TEXT, rank INTEGER,"
    " localRank INTEGER, worldSize INTEGER, cuptiVersion INTEGER, sessionDir TEXT NOT NULL,"
    " chunksRead INTEGER NOT NULL, recordsDecoded INTEGER NOT NULL,"
    " recordsExported INTEGER NOT NULL, recordsOutOfRange INTEGER NOT NULL,"
    " recordsIncomplete INTEGER NOT NULL, recordsOtherKinds INTEGER NOT NULL,"
    " droppedRecords INTEGER NOT NULL, undecodableBytes INTEGER NOT NULL,"
    " undecodableCauses TEXT, corruptChunks INTEGER NOT NULL, tornTails INTEGER NOT NULL,"
    " skippedBytes INTEGER NOT NULL, corruptStrings INTEGER NOT NULL,"
    " badFiles INTEGER NOT NULL, duplicateChunks INTEGER NOT NULL,"
    " badSegmentHeaders INTEGER NOT NULL, metaDamaged INTEGER NOT NULL,"
    " chunksBeforeFrom INTEGER NOT NULL, nvtxUnpaired INTEGER NOT NULL);\n"
    "CREATE TABLE CUPTIMON_DROPS (globalPid INTEGER NOT NULL, chunkIndex INTEGER NOT NULL,"
    " completed INTEGER NOT NULL, droppedRecords INTEGER NOT NULL);\n"
    "CREATE TABLE CUPTIMON_DAMAGE (sessionDir TEXT NOT NULL, kind TEXT NOT NULL,"
    " path TEXT NOT NULL, offset INTEGER, what TEXT NOT NULL);\n"
    "CREATE TABLE CUPTIMON_GPU_METRICS (typeId INTEGER NOT NULL, metricId INTEGER NOT NULL,"
    " metricKey TEXT NOT NULL, cuptiMetric TEXT, unit TEXT, hostname TEXT,"
    " deviceOrdinal INTEGER NOT NULL, uuid TEXT, deviceName TEXT, sessionDir TEXT NOT NULL,"
    " samples INTEGER NOT NULL, noValue INTEGER NOT NULL);\n";

/* The indexes, made once every row is in: on the columns the published
 * recipes join and sort on (correlationId, globalPid/globalTid, start). */
static const char index_sql[] =
    "CREATE INDEX cuptimon_kernel_corr ON CUPTI_ACTIVITY_KIND_KERNEL (correlationId);\n"
    "CREATE INDEX cuptimon_kernel_pid ON CUPTI_ACTIVITY_KIND_KERNEL (globalPid);\n"
    "CREATE INDEX cuptimon_kernel_start ON CUPTI_ACTIVITY_KIND_KERNEL (start);\n"
    "CREATE INDEX cuptimon_memcpy_corr ON CUPTI_ACTIVITY_KIND_MEMCPY (correlationId);\n"
    "CREATE INDEX cuptimon_memcpy_start ON CUPTI_ACTIVITY_KIND_MEMCPY (start);\n"
    "CREATE INDEX cuptimon_memset_corr ON CUPTI_ACTIVITY_KIND_MEMSET (correlationId);\n"
    "CREATE INDEX cuptimon_memset_start ON CUPTI_ACTIVITY_KIND_MEMSET (start);\n"
    "CREATE INDEX cuptimon_runtime_corr ON CUPTI_ACTIVITY_KIND_RUNTIME (correlationId);\n"
    "CREATE INDEX cuptimon_runtime_tid ON CUPTI_ACTIVITY_KIND_RUNTIME (globalTid, start);\n"
    "CREATE INDEX cuptimon_sync_corr ON CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (correlationId);\n"
    "CREATE INDEX cuptimon_event_corr ON CUPTI_ACTIVITY_KIND_CUDA_EVENT (correlationId);\n"
    "CREATE INDEX cuptimon_nvtx_tid ON NVTX_EVENTS (globalTid, start);\n"
    "CREATE INDEX cuptimon_gpu_metrics_time ON GPU_METRICS (typeId, metricId, timestamp);\n"
    "DROP INDEX cuptimon_StringIds_value;\n";

enum {
    S_STRING_GET,
    S_STRING_PUT,
    S_KERNEL,
    S_MEMCPY,
    S_MEMSET,
    S_API,
    S_SYNC,
    S_CUDA_EVENT,
    S_NVTX,
    S_DROP,
    S_DAMAGE,
    S_GPM,
    S_STMTS
};

static const char *const stmt_sql[S_STMTS] = {
    [S_STRING_GET] = "SELECT id FROM StringIds WHERE value = ?1",
    [S_STRING_PUT] = "INSERT INTO StringIds (value) VALUES (?1)",
    [S_KERNEL] = "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?1,?2,?3,?4,NULL,?5,?6,?7,?8,?9,"
                 "?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,?23,?24,?25,?26,?27,?28,"
                 "?29,?30,?31,?32,?33,?34)",
    [S_MEMCPY] = "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?1,?2,?3,?4,NULL,?5,?6,?7,?8,?9,"
                 "NULL,?10,?11,?12,?13,?14,?15,NULL,?16,NULL,?17)",
    [S_MEMSET] = "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?1,?2,?3,?4,NULL,?5,?6,?7,?8,?9,"
                 "?10,?11)",
    [S_API] = "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?1,?2,?3,?4,?5,?6,?7,NULL)",
    [S_SYNC] = "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (?1,?2,?3,?4,NULL,?5,?6,"
               "?7,?8,?9)",
    [S_CUDA_EVENT] = "INSERT INTO CUPTI_ACTIVITY_KIND_CUDA_EVENT VALUES (?1,?2,?3,NULL,?4,?5,?6,"
                     "?7,?8)",
    [S_NVTX] = "INSERT INTO NVTX_EVENTS (start, end, eventType, rangeId, text, globalTid,"
               " endGlobalTid, textId, domainId) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)",
    [S_DROP] = "INSERT INTO CUPTIMON_DROPS VALUES (?1,?2,?3,?4)",
    [S_DAMAGE] = "INSERT INTO CUPTIMON_DAMAGE VALUES (?1,?2,?3,?4,?5)",
    [S_GPM] = "INSERT INTO GPU_METRICS VALUES (?1,?2,?3,?4,?5)",
};

/* ---- the database ----------------------------------------------------------- */

struct db {
    sqlite3 *db;
    sqlite3_stmt *st[S_STMTS];
    const char *path; /* the user's FILE, for messages */
    int failed;       /* an error was said; nothing more is written */
    int in_txn;
    int64_t base;    /* Unix ns that time 0 stands for */
    int64_t none_id; /* StringIds' id of "" (names not known) */
    /* Runtime and driver call names by cbid: StringIds ids, 0 not yet. */
    int64_t *api_ids[2];
    unsigned api_n[2];
    const char *dir; /* the session being read, for CUPTIMON_DAMAGE */
};

static void db_error(struct db *d, const char *what)
{
    if (d->failed)
        return;
    d->failed = 1;
    fprintf(stderr, PROG ": writing %s: %s: %s\n", d->path, what,
            d->db ? sqlite3_errmsg(d->db) : "out of memory");
}

static int db_exec(struct db *d, const char *sql, const char *what)
{
    if (d->failed)
        return -1;
    if (sqlite3_exec(d->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        db_error(d, what);
        return -1;
    }
    return 0;
}

/* Runs a prepared insert whose parameters are bound, and resets it. */
static int db_step(struct db *d, int s)
{
    int rc;

    if (d->failed)
        return -1;
    sqlite3_stmt *q = d->st[s];
    rc = sqlite3_step(q);
    sqlite3_reset(q);
    /* The event inserts bind every parameter each time (NULL where a
     * value is absent), so only the others are cleared: clearing cost
     * 2% of an export. */
    if (s >= S_NVTX)
        sqlite3_clear_bindings(q);
    if (rc != SQLITE_DONE) {
        db_error(d, "inserting a row");
        return -1;
    }
    return 0;
}

static void begin(struct db *d)
{
    if (!d->in_txn && db_exec(d, "BEGIN", "beginning a transaction") == 0)
        d->in_txn = 1;
}

static void commit(struct db *d)
{
    if (d->in_txn) {
        d->in_txn = 0;
        db_exec(d, "COMMIT", "committing");
    }
}

/* StringIds' id of s (len bytes), made when new; -1 after an error. */
static int64_t string_id(struct db *d, const char *s, size_t len)
{
    sqlite3_stmt *g = d->st[S_STRING_GET], *p = d->st[S_STRING_PUT];
    int64_t id = -1;
    int rc;

    if (d->failed)
        return -1;
    sqlite3_bind_text(g, 1, s, (int)len, SQLITE_STATIC);
    rc = sqlite3_step(g);
    if (rc == SQLITE_ROW)
        id = sqlite3_column_int64(g, 0);
    sqlite3_reset(g);
    sqlite3_clear_bindings(g);
    if (rc == SQLITE_ROW)
        return id;
    if (rc != SQLITE_DONE) {
        db_error(d, "looking a string up");
        return -1;
    }
    sqlite3_bind_text(p, 1, s, (int)len, SQLITE_STATIC);
    if (db_step(d, S_STRING_PUT) < 0)
        return -1;
    return sqlite3_last_insert_rowid(d->db);
}

static int64_t string_id0(struct db *d, const char *s)
{
    return string_id(d, s, strlen(s));
}

static int db_open(struct db *d, const char *tmp)
{
    /* One thread uses the connection: no mutexes (they cost 5%). */
    if (sqlite3_open_v2(tmp, &d->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        db_error(d, "opening the database");
        return -1;
    }
    /* The file is a temporary one until it is renamed into place: a crash
     * leaves it behind unfinished whatever the journal says, so none is
     * kept, and nothing is synced but the finished file. */
    if (db_exec(d,
                "PRAGMA page_size = 16384; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;"
                " PRAGMA cache_size = "
                "-" EXPORT_CACHE_KIB ";",
                "setting it up") < 0 ||
        db_exec(d, "BEGIN", "creating the tables") < 0 ||
        db_exec(d, schema_sql, "creating the tables") < 0)
        return -1;
    for (int i = 0; i < S_STMTS; i++)
        if (sqlite3_prepare_v2(d->db, stmt_sql[i], -1, &d->st[i], NULL) != SQLITE_OK) {
            db_error(d, "preparing its statements");
            return -1;
        }
    d->none_id = string_id0(d, "");
    return db_exec(d, "COMMIT", "creating the tables");
}

static void db_close(struct db *d)
{
    for (int i = 0; i < S_STMTS; i++)
        sqlite3_finalize(d->st[i]);
    if (d->db != NULL && sqlite3_close(d->db) != SQLITE_OK)
        db_error(d, "closing the database");
    d->db = NULL;
    free(d->api_ids[0]);
    free(d->api_ids[1]);
}

/* ---- sessions ------------------------------------------------------------------ */

struct xsess {
    const char *dir;
    struct cuptimon_archive_session as;
    struct cuptimon_decode_stats dec;
    struct cuptimon_archive_stats ast;
    int skip; /* not chosen by --pid/--label, or a GPU metrics session */
    int gpm;
    int64_t gpid; /* globalPid */
    uint64_t chunks, exported, out_of_range, incomplete, other, dropped, unpaired;
    struct cuptimon_gpm_ordinals devs; /* the devices its exported GPU work ran on */
};

/* A kernel name's three StringIds, per name pointer of the session being
 * read (open addressing; the session's string table bounds it). */
struct kname {
    uint64_t ptr; /* 0: empty */
    int64_t demangled, shortn, mangled;
};

/* An NVTX start marker waiting for its end. */
struct mark {
    uint32_t id, used;
    int64_t start, gtid;
    int64_t text_id, domain;
};

struct reading {
    struct db *d;
    struct xsess *s;
    struct cuptimon_demangler *dm;
    uint64_t from, to; /* Unix ns; 0: none */
    struct kname *kn;
    size_t kn_cap, kn_used;
    struct mark *marks; /* MARK_OPEN_MAX slots by id */
    struct cuptimon_cli_progress *pg;
    size_t idx, nsess;                   /* the session's place, for the progress line */
    uint64_t domain_ptr[DOMAINS_MAX];    /* the session's domains: id i + 1 */
    uint8_t domain_written[DOMAINS_MAX]; /* its NvtxDomainCreate row is in */
    unsigned ndomains;
};

/*
 * globalPid as nsys serializes it: the process id in bits 24..47 (where
 * its recipes read it: globalPid / 0x1000000 % 0x1000000); bits 48..62,
 * which nsys gives to the machine and VM ids, hold the session's place in
 * the export (1-based, modulo 2^15), so that two sessions of one reused
 * pid stay apart (in an export of more than 32767 sessions, two of one pid
 * 32767 places apart would share one: hence no unique key on it in
 * CUPTIMON_SESSIONS, where a failed insert would fail the export).
 * globalTid adds the thread id in bits 0..23.
 */
static int64_t global_pid(size_t idx, uint32_t pid)
{
    return (int64_t)((((uint64_t)(idx + 1) & 0x7fff) << 48) | ((uint64_t)(pid & 0xffffff) << 24));
}

static int64_t global_tid(int64_t gpid, uint32_t tid)
{
    return gpid | (int64_t)(tid & 0xffffff);
}

/* The base name nsys gives a kernel (shortName): the demangled name
 * without return type, scope, template arguments and parameters
 * ("void at::native::(anonymous namespace)::kern<4>(float*)" -> "kern").
 * The parameter list is found from the end (its ')' matched back), since
 * a scope may hold parentheses too ("(anonymous namespace)") and the
 * parameters may ("void (*)(int)"). */
static void base_name(const char *s, size_t *off, size_t *len)
{
    size_t n = strlen(s), end = n, begin;
    int depth = 0;

    while (end > 0 && s[end - 1] == ' ')
        end--;
    if (end > 0 && s[end - 1] == ')') {
        for (size_t i = end; i-- > 0;) {
            if (s[i] == ')')
                depth++;
            else if (s[i] == '(' && --depth == 0) {
                end = i;
                break;
            }
        }
        if (depth != 0)
            end = n; /* unbalanced: no parameter list */
    }
    /* Template arguments right before it. */
    if (end > 0 && s[end - 1] == '>') {
        depth = 0;
        for (size_t i = end; i-- > 0;) {
            if (s[i] == '>')
                depth++;
            else if (s[i] == '<' && --depth == 0) {
                end = i;
                break;
            }
        }
    }
    /* Back to a space or "::" outside template arguments and parentheses. */
    begin = end;
    depth = 0;
    while (begin > 0) {
        char c = s[begin - 1];
        if (c == '>' || c == ')')
            depth++;
        else if (c == '<' || c == '(')
            depth--;
        else if (depth == 0 && (c == ' ' || c == ':' || c == '*' || c == '&'))
            break;
        begin--;
    }
    if (begin == end) { /* nothing sensible: the whole name */
        begin = 0;
        end = n;
    }
    *off = begin;
    *len = end - begin;
}

static struct kname *kname_find(struct reading *rd, uint64_t ptr)
{
    if (rd->kn_used * 2 >= rd->kn_cap) {
        size_t cap = rd->kn_cap ? rd->kn_cap * 2 : 256;
        struct kname *n = calloc(cap, sizeof *n);
        if (n == NULL)
            return NULL;
        for (size_t i = 0; i < rd->kn_cap; i++)
            if (rd->kn[i].ptr != 0) {
                size_t h = (size_t)(rd->kn[i].ptr * 0x9e3779b97f4a7c15ull) & (cap - 1);
                while (n[h].ptr != 0)
                    h = (h + 1) & (cap - 1);
                n[h] = rd->kn[i];
            }
        free(rd->kn);
        rd->kn = n;
        rd->kn_cap = cap;
    }
    size_t h = (size_t)(ptr * 0x9e3779b97f4a7c15ull) & (rd->kn_cap - 1);
    while (rd->kn[h].ptr != 0 && rd->kn[h].ptr != ptr)
        h = (h + 1) & (rd->kn_cap - 1);
    return &rd->kn[h];
}

/* The kernel name's ids: demangled as cuptimonctl stats and decode name it,
 * its base name, and the raw (mangled) name the producer interned. */
static const struct kname *kernel_names(struct reading *rd, uint64_t ptr)
{
    static const struct kname unknown = {0, -1, -1, -1};
    struct kname *k;
    const char *raw, *dem;
    char buf[64];
    size_t off, len;

    if (ptr == 0 || (k = kname_find(rd, ptr)) == NULL)
        return &unknown;
    if (k->ptr == ptr)
        return k;
    raw = rd->s->as.names ? cuptimon__strtab_get(rd->s->as.names, ptr, NULL) : NULL;
    if (raw == NULL) {
        /* As stats names a kernel whose name never came. */
        snprintf(buf, sizeof buf, "<unknown kernel 0x%" PRIx64 ">", ptr);
        raw = buf;
    }
    k->mangled = string_id0(rd->d, raw);
    dem = cuptimon__demangle(rd->dm, raw);
    k->demangled = string_id0(rd->d, dem);
    base_name(dem, &off, &len);
    k->shortn = string_id(rd->d, dem + off, len);
    k->ptr = ptr;
    rd->kn_used++;
    return k;
}

/* StringIds' id of a runtime (drv 0) or driver (1) call's name: CUPTI's
 * full name ("cudaLaunchKernel_v7000"), as nsys stores it (its recipes cut
 * the _vNNNN suffix). */
static int64_t api_name(struct db *d, int drv, uint32_t cbid)
{
    unsigned n = drv ? cuptimon__cbid_driver_count : cuptimon__cbid_runtime_count;
    const char *s;
    char buf[64];

    if (d->api_ids[drv] == NULL) {
        if ((d->api_ids[drv] = calloc(n, sizeof(int64_t))) == NULL)
            return -1;
        d->api_n[drv] = n;
    }
    if (cbid < n && d->api_ids[drv][cbid] != 0)
        return d->api_ids[drv][cbid];
    s = drv ? cuptimon__cbid_driver_full_name(cbid) : cuptimon__cbid_runtime_full_name(cbid);
    if (s == NULL) {
        snprintf(buf, sizeof buf, "<%s API cbid %" PRIu32 ">", drv ? "driver" : "runtime", cbid);
        s = buf;
    }
    int64_t id = string_id0(d, s);
    if (cbid < n && id > 0)
        d->api_ids[drv][cbid] = id;
    return id;
}

/* CUPTI's memory kind (CUpti_ActivityMemoryKind: 0 unknown, 1 pageable ...)
 * as ENUM_CUDA_MEM_KIND numbers it (0 pageable ... 7 unknown). */
static int mem_kind(unsigned k)
{
    return k >= 1 && k <= 7 ? (int)k - 1 : 7;
}

#define B64(st, i, v) sqlite3_bind_int64(st, i, (sqlite3_int64)(v))

static void row_gpu_common(sqlite3_stmt *q, const struct reading *rd, const struct cuptimon_ev *ev,
                           int64_t s, int64_t e)
{
    B64(q, 1, s);
    B64(q, 2, e);
    B64(q, 3, ev->device_id);
    B64(q, 4, ev->context_id);
    B64(q, 5, ev->stream_id);
    B64(q, 6, ev->correlation_id);
    B64(q, 7, rd->s->gpid);
}

/* Writes one event: 1 written, 0 a kind the export has no table for, -1
 * after an error. */
static int write_event(struct reading *rd, const struct cuptimon_ev *ev,
                       const struct cuptimon_clock *clk)
{
    struct db *d = rd->d;
    int64_t s = (int64_t)(cuptimon__clock_map(clk, ev->start) - (uint64_t)d->base);
    int64_t e = (int64_t)(cuptimon__clock_map(clk, ev->end) - (uint64_t)d->base);
    sqlite3_stmt *q;

    switch (ev->type) {
    case CUPTIMON_EV_KERNEL: {
        const struct kname *k = kernel_names(rd, ev->u.kernel.name_ptr);
        if (d->failed)
            return -1;
        q = d->st[S_KERNEL];
        row_gpu_common(q, rd, ev, s, e);
        B64(q, 8, k->demangled > 0 ? k->demangled : d->none_id);
        B64(q, 9, k->shortn > 0 ? k->shortn : d->none_id);
        if (k->mangled > 0)
            B64(q, 10, k->mangled);
        else
            sqlite3_bind_null(q, 10);
        B64(q, 11, ev->u.kernel.launch_type);
        B64(q, 12, ev->u.kernel.cache_config >> 4); /* executed, the high nibble */
        B64(q, 13, ev->u.kernel.registers_per_thread);
        B64(q, 14, ev->u.kernel.grid_x);
        B64(q, 15, ev->u.kernel.grid_y);
        B64(q, 16, ev->u.kernel.grid_z);
        B64(q, 17, ev->u.kernel.block_x);
        B64(q, 18, ev->u.kernel.block_y);
        B64(q, 19, ev->u.kernel.block_z);
        B64(q, 20, ev->u.kernel.static_shared_memory);
        B64(q, 21, ev->u.kernel.dynamic_shared_memory);
        B64(q, 22, ev->u.kernel.local_memory_per_thread);
        B64(q, 23, ev->u.kernel.local_memory_total);
        B64(q, 24, ev->u.kernel.grid_id);
        B64(q, 25, ev->u.kernel.shared_memory_executed);
        if (ev->graph_node_id != 0)
            B64(q, 26, ev->graph_node_id);
        else
            sqlite3_bind_null(q, 26);
        B64(q, 27, ev->u.kernel.shmem_limit_config);
        if (ev->graph_id != 0)
            B64(q, 28, ev->graph_id);
        else
            sqlite3_bind_null(q, 28);
        B64(q, 29, ev->u.kernel.cluster_x);
        B64(q, 30, ev->u.kernel.cluster_y);
        B64(q, 31, ev->u.kernel.cluster_z);
        B64(q, 32, ev->u.kernel.cluster_scheduling_policy);
        B64(q, 33, ev->u.kernel.max_potential_cluster_size);
        B64(q, 34, ev->u.kernel.max_active_clusters);
        return db_step(d, S_KERNEL) < 0 ? -1 : 1;
    }
    case CUPTIMON_EV_MEMCPY:
    case CUPTIMON_EV_MEMCPY_P2P: {
        int p2p = ev->type == CUPTIMON_EV_MEMCPY_P2P;
        q = d->st[S_MEMCPY];
        row_gpu_common(q, rd, ev, s, e);
        B64(q, 8, ev->u.memcpy.bytes);
        B64(q, 9, p2p ? 10 : ev->u.memcpy.copy_kind);
        B64(q, 10, mem_kind(ev->u.memcpy.src_kind));
        B64(q, 11, mem_kind(ev->u.memcpy.dst_kind));
        for (int i = 12; i <= 17; i++)
            sqlite3_bind_null(q, i);
        if (p2p) {
            B64(q, 12, ev->u.memcpy.src_device_id);
            B64(q, 13, ev->u.memcpy.src_context_id);
            B64(q, 14, ev->u.memcpy.dst_device_id);
            B64(q, 15, ev->u.memcpy.dst_context_id);
        }
        if (ev->graph_node_id != 0)
            B64(q, 16, ev->graph_node_id);
        if (!p2p && ev->u.memcpy.copy_count != 0)
            B64(q, 17, ev->u.memcpy.copy_count);
        return db_step(d, S_MEMCPY) < 0 ? -1 : 1;
    }
    case CUPTIMON_EV_MEMSET:
        q = d->st[S_MEMSET];
        row_gpu_common(q, rd, ev, s, e);
        B64(q, 8, ev->u.memset.value);
        B64(q, 9, ev->u.memset.bytes);
        if (ev->graph_node_id != 0)
            B64(q, 10, ev->graph_node_id);
        else
            sqlite3_bind_null(q, 10);
        B64(q, 11, mem_kind(ev->u.memset.memory_kind));
        return db_step(d, S_MEMSET) < 0 ? -1 : 1;
    case CUPTIMON_EV_RUNTIME:
    case CUPTIMON_EV_DRIVER: {
        int drv = ev->type == CUPTIMON_EV_DRIVER;
        int64_t name = api_name(d, drv, ev->u.api.cbid);
        if (name < 0) {
            db_error(d, "naming an API call");
            return -1;
        }
        q = d->st[S_API];
        B64(q, 1, s);
        B64(q, 2, e);
        B64(q, 3, drv ? EVENT_CLASS_CUDA_DRIVER : EVENT_CLASS_CUDA_RUNTIME);
        B64(q, 4, global_tid(rd->s->gpid, ev->u.api.thread_id));
        B64(q, 5, ev->correlation_id);
        B64(q, 6, name);
        B64(q, 7, ev->u.api.return_value);
        return db_step(d, S_API) < 0 ? -1 : 1;
    }
    case CUPTIMON_EV_SYNC:
        q = d->st[S_SYNC];
        row_gpu_common(q, rd, ev, s, e);
        B64(q, 8, ev->u.sync.type);
        B64(q, 9, ev->u.sync.cuda_event_id);
        return db_step(d, S_SYNC) < 0 ? -1 : 1;
    case CUPTIMON_EV_CUDA_EVENT:
        /* One time, the event's completion on the device (0: not taken). */
        q = d->st[S_CUDA_EVENT];
        if (ev->start != 0)
            B64(q, 1, s);
        else
            sqlite3_bind_null(q, 1);
        B64(q, 2, ev->device_id);
        B64(q, 3, ev->context_id);
        B64(q, 4, ev->stream_id);
        B64(q, 5, ev->correlation_id);
        B64(q, 6, rd->s->gpid);
        B64(q, 7, ev->u.cuda_event.event_id);
        B64(q, 8, ev->u.cuda_event.cuda_event_sync_id);
        return db_step(d, S_CUDA_EVENT) < 0 ? -1 : 1;
    default: return 0;
    }
}

/* An NVTX row: start, end (no end: open at the end of the session or a
 * mark), type, the text's StringIds id, the threads, the domain. */
static int nvtx_row(struct reading *rd, int64_t start, const int64_t *end, int type,
                    int64_t range_id, int64_t text_id, int64_t gtid, int64_t end_gtid,
                    int64_t domain)
{
    sqlite3_stmt *q = rd->d->st[S_NVTX];

    /* A domain's first event: before it, the NvtxDomainCreate row (eventType
     * 75: its name, on this thread) by which nsys' recipes name domains. */
    if (domain > 0 && !rd->domain_written[domain - 1]) {
        const char *name = rd->s->as.names ? cuptimon__strtab_get(rd->s->as.names,
                                                                  rd->domain_ptr[domain - 1], NULL)
                                           : NULL;
        int64_t text = string_id0(rd->d, name ? name : "");
        rd->domain_written[domain - 1] = 1;
        if (text < 0 ||
            nvtx_row(rd, start, NULL, NVTX_DOMAIN_CREATE, -1, text, gtid, 0, domain) < 0)
            return -1;
    }
    B64(q, 1, start);
    if (end != NULL)
        B64(q, 2, *end);
    B64(q, 3, type);
    if (range_id >= 0)
        B64(q, 4, range_id);
    /* nsys writes a registered string's id and leaves text NULL; the
     * recipes read COALESCE(text, StringIds.value). */
    B64(q, 6, gtid);
    if (end != NULL)
        B64(q, 7, end_gtid);
    B64(q, 8, text_id);
    B64(q, 9, domain);
    return db_step(rd->d, S_NVTX);
}

/* Whether [s, e) (Unix ns; e 0: open) overlaps the range asked for. */
static int overlaps(const struct reading *rd, uint64_t s, uint64_t e)
{
    if (rd->to != 0 && s >= rd->to)
        return 0;
    if (rd->from != 0 && e != 0 && e < rd->from)
        return 0;
    return 1;
}

/* The id of the NVTX domain a marker names (its name a pointer into the
 * session's strings), 1 up; 0 for the default domain or past DOMAINS_MAX.
 * nvtx_row() writes the domain's own row when it first writes one of its
 * events. */
static int64_t domain_id(struct reading *rd, uint64_t ptr)
{
    if (ptr == 0)
        return 0;
    for (unsigned i = 0; i < rd->ndomains; i++)
        if (rd->domain_ptr[i] == ptr)
            return (int64_t)i + 1;
    if (rd->ndomains == DOMAINS_MAX)
        return 0;
    rd->domain_ptr[rd->ndomains] = ptr;
    rd->domain_written[rd->ndomains] = 0;
    return (int64_t)++rd->ndomains;
}

/* NVTX markers (CUPTI MARKER records): a start waits for its end, by id;
 * an instant is a mark. */
static int write_marker(struct reading *rd, const struct cuptimon_ev *ev,
                        const struct cuptimon_clock *clk)
{
    uint64_t t = cuptimon__clock_map(clk, ev->start);
    uint32_t flags = ev->u.marker.flags;
    uint32_t tid = ev->u.marker.object_kind == 2 /* CUPTI_ACTIVITY_OBJECT_THREAD */
                       ? ev->u.marker.object_id.b
                       : 0;
    int64_t rel = (int64_t)(t - (uint64_t)rd->d->base), gtid = global_tid(rd->s->gpid, tid);
    struct mark *m = &rd->marks[ev->u.marker.id & (MARK_OPEN_MAX - 1)];
    const char *name = ev->u.marker.name_ptr && rd->s->as.names
                           ? cuptimon__strtab_get(rd->s->as.names, ev->u.marker.name_ptr, NULL)
                           : NULL;

    if (flags & 4u) { /* CUPTI_ACTIVITY_FLAG_MARKER_END */
        if (!m->used || m->id != ev->u.marker.id) {
            rd->s->unpaired++;
            return 0;
        }
        m->used = 0;
        if (!overlaps(rd, (uint64_t)(m->start + rd->d->base), t))
            return 0;
        rd->s->exported++;
        return nvtx_row(rd, m->start, &rel,
                        m->gtid == gtid ? NVTX_PUSHPOP_RANGE : NVTX_STARTEND_RANGE, m->id,
                        m->text_id, m->gtid, gtid, m->domain);
    }
    int64_t text_id = string_id0(rd->d, name ? name : "");
    int64_t domain = domain_id(rd, ev->u.marker.domain_ptr);
    if (text_id < 0 || domain < 0)
        return -1;
    if (flags & 2u) {  /* CUPTI_ACTIVITY_FLAG_MARKER_START */
        if (m->used) { /* its slot is taken: that one is written open */
            rd->s->unpaired++;
            if (overlaps(rd, (uint64_t)(m->start + rd->d->base), 0) && ++rd->s->exported &&
                nvtx_row(rd, m->start, NULL, NVTX_PUSHPOP_RANGE, m->id, m->text_id, m->gtid, 0,
                         m->domain) < 0)
                return -1;
        }
        *m = (struct mark){.id = ev->u.marker.id,
                           .used = 1,
                           .start = rel,
                           .gtid = gtid,
                           .text_id = text_id,
                           .domain = domain};
        return 0;
    }
    if (!overlaps(rd, t, t + 1))
        return 0;
    rd->s->exported++;
    return nvtx_row(rd, rel, NULL, NVTX_MARK, -1, text_id, gtid, 0, domain);
}

/* The start markers still open at the end of the session: rows without an
 * end, as nsys writes a range never closed. */
static int marks_flush(struct reading *rd)
{
    for (size_t i = 0; rd->marks != NULL && i < MARK_OPEN_MAX; i++) {
        struct mark *m = &rd->marks[i];
        if (!m->used)
            continue;
        m->used = 0;
        if (overlaps(rd, (uint64_t)(m->start + rd->d->base), 0) && ++rd->s->exported &&
            nvtx_row(rd, m->start, NULL, NVTX_PUSHPOP_RANGE, m->id, m->text_id, m->gtid, 0,
                     m->domain) < 0)
            return -1;
    }
    return 0;
}

/* The strings table's entries the export turns into rows: user annotation
 * ranges (NVTX_EVENTS push/pop ranges on the pushing thread, as
 * torch.autograd.profiler.emit_nvtx shows record_function ranges to
 * nsys), thread names (ThreadNames) and devices (TARGET_INFO_GPU). */
static int each_string(void *ud, uint64_t key, const char *s, size_t len)
{
    struct reading *rd = ud;
    struct db *d = rd->d;

    if (d->failed)
        return -1;
    if (CUPTIMON_RANGE_KEY_CLASS(key) == CUPTIMON_RANGE_BEGIN_KEY(0)) {
        struct cuptimon_range_begin b;
        uint64_t id = key & (CUPTIMON_RANGE_ID_MAX - 1), end = 0;
        const char *es, *nm;
        size_t elen, nlen = 0;
        if (cuptimon__range_begin_parse(s, len, &b) < 0)
            return 0; /* damaged: as decode, not drawn */
        es = cuptimon__strtab_get(rd->s->as.names, CUPTIMON_RANGE_END_KEY(id), &elen);
        if (es != NULL && (cuptimon__range_end_parse(es, elen, &end) < 0 || end < b.unix_ns))
            end = 0;
        if (!overlaps(rd, b.unix_ns, end))
            return 0;
        nm = cuptimon__strtab_get(rd->s->as.names, CUPTIMON_ANNOTATION_KEY(id), &nlen);
        int64_t text = string_id(d, nm ? nm : "", nm ? nlen : 0);
        int64_t rs = (int64_t)(b.unix_ns - (uint64_t)d->base);
        int64_t re = (int64_t)(end - (uint64_t)d->base);
        if (text < 0 ||
            nvtx_row(rd, rs, end ? &re : NULL, NVTX_PUSHPOP_RANGE, (int64_t)id, text,
                     global_tid(rd->s->gpid, b.tid), global_tid(rd->s->gpid, b.tid), 0) < 0)
            return -1;
        return 0;
    }
    if ((key & 0xffffffff00000000ull) == CUPTIMON_THREAD_NAME_KEY(0)) {
        char sql[160];
        int64_t name = string_id(d, s, len);
        if (name < 0)
            return -1;
        snprintf(sql, sizeof sql, "INSERT INTO ThreadNames VALUES (%" PRId64 ", NULL, %" PRId64 ")",
                 name, global_tid(rd->s->gpid, (uint32_t)key));
        return db_exec(d, sql, "writing a thread name");
    }
    if ((key & 0xffffffff00000000ull) == CUPTIMON_DEVICE_KEY(0)) {
        /* "id totalGlobalMem major minor maxThreadsPerBlock
         *  maxThreadsPerMultiprocessor regsPerBlock warpSize sharedMemPerBlock
         *  numSms regsPerMultiprocessor sharedMemPerBlockOptin
         *  sharedMemPerMultiprocessor NAME" (cuptimon-proto.h). */
        unsigned long long v[13];
        int used = 0;
        char text[512], uuid[64] = "";
        const char *u;
        size_t ulen;
        sqlite3_stmt *q;
        if (len >= sizeof text)
            return 0;
        memcpy(text, s, len);
        text[len] = '\0';
        if (sscanf(text, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %n",
                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10],
                   &v[11], &v[12], &used) != 13 ||
            used == 0)
            return 0; /* not as the shim writes it: no row rather than a wrong one */
        u = cuptimon__strtab_get(rd->s->as.names, CUPTIMON_DEVICE_UUID_KEY((uint32_t)key), &ulen);
        if (u != NULL && ulen < sizeof uuid) {
            memcpy(uuid, u, ulen);
            uuid[ulen] = '\0';
        }
        /* One row per device: the same GPU seen by many processes. */
        if (sqlite3_prepare_v2(d->db,
                               "INSERT INTO TARGET_INFO_GPU (vmId, id, name, uuid, totalMemory,"
                               " computeMajor, computeMinor, maxThreadsPerBlock,"
                               " maxRegistersPerBlock, threadsPerWarp, maxShmemPerBlock, smCount,"
                               " maxRegistersPerSm, maxShmemPerBlockOptin, maxShmemPerSm,"
                               " cuDevice, maxWarpsPerSm)"
                               " SELECT 0,?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?1,?15"
                               " WHERE NOT EXISTS (SELECT 1 FROM TARGET_INFO_GPU"
                               " WHERE id = ?1 AND uuid IS ?3)",
                               -1, &q, NULL) != SQLITE_OK) {
            db_error(d, "writing a device");
            return -1;
        }
        B64(q, 1, (uint32_t)key);
        sqlite3_bind_text(q, 2, text + used, -1, SQLITE_STATIC);
        if (uuid[0] != '\0')
            sqlite3_bind_text(q, 3, uuid, -1, SQLITE_STATIC);
        B64(q, 4, v[1]);
        B64(q, 5, v[2]);
        B64(q, 6, v[3]);
        B64(q, 7, v[4]);
        B64(q, 8, v[6]);
        B64(q, 9, v[7]);
        B64(q, 10, v[8]);
        B64(q, 11, v[9]);
        B64(q, 12, v[10]);
        B64(q, 13, v[11]);
        B64(q, 14, v[12]);
        B64(q, 15, v[7] ? v[5] / v[7] : 0);
        int rc = sqlite3_step(q);
        sqlite3_finalize(q);
        if (rc != SQLITE_DONE) {
            db_error(d, "writing a device");
            return -1;
        }
    }
    return 0;
}

/* The reader's damage reports: said as decode and stats say them
 * (cli/read.c), and kept in CUPTIMON_DAMAGE. */
static void report_damage(void *ud, enum cuptimon_archive_damage kind, const char *path,
                          uint64_t offset, const char *what)
{
    static const char *const kinds[CUPTIMON_DAMAGE_KINDS] = {
        "meta", "bad_file", "segment_header", "chunk", "torn_tail", "duplicate", "strings"};
    struct db *d = ud;
    sqlite3_stmt *q = d->st[S_DAMAGE];

    cuptimon__cli_report_damage((void *)PROG, kind, path, offset, what);
    if (d->failed || q == NULL)
        return;
    sqlite3_bind_text(q, 1, d->dir, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, (unsigned)kind < CUPTIMON_DAMAGE_KINDS ? kinds[kind] : "?", -1,
                      SQLITE_STATIC);
    sqlite3_bind_text(q, 3, path, -1, SQLITE_STATIC);
    if (offset != UINT64_MAX)
        B64(q, 4, offset);
    sqlite3_bind_text(q, 5, what, -1, SQLITE_STATIC);
    db_step(d, S_DAMAGE);
}

static int write_session_row(struct db *d, const struct xsess *s)
{
    const struct cuptimon_proc_info *p = &s->as.info;
    char causes[160];
    sqlite3_stmt *q;
    const char *base;
    int rc, i = 1;

    if (d->failed)
        return -1;
    if (sqlite3_prepare_v2(d->db,
                           "INSERT INTO CUPTIMON_SESSIONS VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                           "?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &q, NULL) != SQLITE_OK) {
        db_error(d, "writing a session");
        return -1;
    }
#define TXT(v)                                                                                     \
    do {                                                                                           \
        if ((v) != NULL)                                                                           \
            sqlite3_bind_text(q, i, (v), -1, SQLITE_STATIC);                                       \
        i++;                                                                                       \
    } while (0)
#define NUM(v) B64(q, i++, (v))
#define OPT(v)                                                                                     \
    do {                                                                                           \
        if ((v) >= 0)                                                                              \
            B64(q, i, (v));                                                                        \
        i++;                                                                                       \
    } while (0)
    NUM(s->gpid);
    NUM(p->pid);
    TXT(p->hostname);
    TXT(p->exe);
    TXT(p->label);
    TXT(p->job_id);
    OPT(p->rank);
    OPT(p->local_rank);
    OPT(p->world_size);
    NUM(p->cupti_version);
    TXT(s->dir);
    NUM(s->chunks);
    NUM(s->dec.records);
    NUM(s->exported);
    NUM(s->out_of_range);
    NUM(s->incomplete);
    NUM(s->other);
    NUM(s->dropped);
    NUM(s->dec.undecodable_bytes);
    TXT(s->dec.undecodable_bytes ? cuptimon__undecodable_causes(&s->dec, causes, sizeof causes)
                                 : NULL);
    NUM(s->ast.corrupt_chunks);
    NUM(s->ast.torn_tails);
    NUM(s->ast.skipped_bytes);
    NUM(s->ast.corrupt_strings);
    NUM(s->ast.bad_files);
    NUM(s->ast.duplicate_chunks);
    NUM(s->ast.bad_seg_headers);
    NUM(s->ast.meta_damaged);
    NUM(s->ast.range_chunks);
    NUM(s->unpaired);
#undef TXT
#undef NUM
#undef OPT
    rc = sqlite3_step(q);
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) {
        db_error(d, "writing a session");
        return -1;
    }
    base = p->exe ? strrchr(p->exe, '/') : NULL;
    base = base ? base + 1 : p->exe;
    if (sqlite3_prepare_v2(d->db, "INSERT INTO PROCESSES VALUES (?1,?2,?3)", -1, &q, NULL) !=
        SQLITE_OK) {
        db_error(d, "writing a process");
        return -1;
    }
    B64(q, 1, s->gpid);
    B64(q, 2, p->pid);
    if (base != NULL)
        sqlite3_bind_text(q, 3, base, -1, SQLITE_STATIC);
    rc = sqlite3_step(q);
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) {
        db_error(d, "writing a process");
        return -1;
    }
    return 0;
}

/* Exports session s: 0; 1 when it could not be opened (said, passed over);
 * -1 after an error (said). */
static int export_one(struct db *d, struct xsess *s, struct reading *rd, uint64_t skip_before)
{
    struct cuptimon_archive_reader *r;
    struct cuptimon_archive_chunk ch;
    struct cuptimon_walk w;
    int rc;

    if (cuptimon__cli_read_open(PROG, s->dir, NULL, skip_before, &r) < 0)
        return 1;
    d->dir = s->dir;
    cuptimon__archive_set_report(r, report_damage, d);
    cuptimon__archive_session_meta(&s->as, cuptimon__archive_meta(r));
    if (s->as.layout_rc == -EPROTONOSUPPORT)
        fprintf(stderr,
                PROG ": %s: CUPTI API version %u is not one this build decodes (it decodes %s); "
                     "its records are counted as undecodable (CUPTIMON_SESSIONS)\n",
                s->dir, s->as.info.cupti_version, cuptimon__cupti_supported());
    if (cuptimon__cli_read_strings(PROG, s->dir, &s->as, r) < 0) {
        cuptimon__archive_close(r);
        fprintf(stderr, PROG ": out of memory\n");
        return -1;
    }
    rd->s = s;
    rd->kn_used = 0;
    if (rd->kn != NULL)
        memset(rd->kn, 0, rd->kn_cap * sizeof *rd->kn);
    memset(rd->marks, 0, MARK_OPEN_MAX * sizeof *rd->marks);
    rd->ndomains = 0;
    begin(d);
    if (s->as.names != NULL)
        cuptimon__strtab_each(s->as.names, each_string, rd);
    commit(d);
    while (!d->failed && (rc = cuptimon__cli_read_next(r, &s->as, &s->dec, &ch, &w)) == 1) {
        struct cuptimon_clock clk = {ch.hdr.cupti_ts, ch.hdr.unix_ns};
        struct cuptimon_ev ev;

        s->chunks++;
        s->dropped += ch.hdr.dropped;
        rd->pg->records += ch.hdr.records;
        cuptimon__cli_progress_show(rd->pg, "export", rd->idx + 1, rd->nsess, 0);
        begin(d);
        if (ch.hdr.dropped != 0) {
            sqlite3_stmt *q = d->st[S_DROP];
            B64(q, 1, s->gpid);
            B64(q, 2, ch.hdr.index);
            B64(q, 3, (int64_t)(ch.hdr.unix_ns - (uint64_t)d->base));
            B64(q, 4, ch.hdr.dropped);
            db_step(d, S_DROP);
        }
        while (!d->failed && cuptimon__walk_next(&w, &ev)) {
            if (ev.type == CUPTIMON_EV_MARKER) {
                if (write_marker(rd, &ev, &clk) < 0)
                    break;
                continue;
            }
            if (ev.type == CUPTIMON_EV_MARKER_DATA || ev.type == CUPTIMON_EV_EXTERNAL_CORRELATION ||
                ev.type == CUPTIMON_EV_OVERHEAD) {
                s->other++; /* no table of nsys's holds them as CUPTI gives them */
                continue;
            }
            if ((rd->from || rd->to) && !cuptimon__ev_in_range(&ev, &clk, rd->from, rd->to)) {
                s->out_of_range++;
                continue;
            }
            /* As stats counts them: a record CUPTI handed over unfinished
             * at a forced flush has no end, and nsys's tables no row for
             * one. */
            if (ev.type != CUPTIMON_EV_CUDA_EVENT &&
                (ev.start == 0 || ev.end == 0 || ev.end < ev.start)) {
                s->incomplete++;
                continue;
            }
            rc = write_event(rd, &ev, &clk);
            if (rc < 0)
                break;
            s->exported += (uint64_t)rc;
            s->other += (uint64_t)(rc == 0);
            if (rc == 1 && (ev.type == CUPTIMON_EV_KERNEL || ev.type == CUPTIMON_EV_MEMCPY ||
                            ev.type == CUPTIMON_EV_MEMCPY_P2P || ev.type == CUPTIMON_EV_MEMSET))
                cuptimon__gpm_ordinals_add(&s->devs, ev.device_id);
        }
        commit(d);
    }
    if (d->failed) {
        cuptimon__archive_close(r);
        return -1;
    }
    begin(d);
    marks_flush(rd);
    commit(d);
    cuptimon__cli_read_close(PROG, s->dir, r, rc, &s->ast);
    d->dir = NULL;
    s->dropped += s->ast.range_dropped;
    cuptimon__cli_read_damage(PROG, s->dir, &s->ast);
    if (s->dec.undecodable_bytes) {
        char causes[160];
        fprintf(stderr,
                PROG ": %s: %" PRIu64 " byte(s) of records not decoded, because of: %s "
                     "(CUPTIMON_SESSIONS has the counts)\n",
                s->dir, s->dec.undecodable_bytes,
                cuptimon__undecodable_causes(&s->dec, causes, sizeof causes));
    }
    return write_session_row(d, s);
}

/* ---- GPU metrics ------------------------------------------------------------- */

struct gpm_walk {
    struct db *d;
    int64_t type_id;
    int64_t metric_id[CUPTIMON_GPM_METRICS_MAX];
    uint64_t samples, no_value, in_txn;
};

static int gpm_sample(void *ud, const struct cuptimon_gpm_meta *m,
                      const struct cuptimon_gpm_sample *smp)
{
    struct gpm_walk *g = ud;
    struct db *d = g->d;
    sqlite3_stmt *q = d->st[S_GPM];

    /* Batches of 4096 samples per transaction (a sample carries every
     * metric of its device). */
    if (g->in_txn++ % 4096 == 0) {
        commit(d);
        begin(d);
    }
    g->samples++;
    for (uint32_t i = 0; i < m->nmetrics; i++) {
        if (smp->value[i] != smp->value[i]) { /* NaN: no value in that sample */
            g->no_value++;
            continue;
        }
        B64(q, 1, smp->start_ns);
        B64(q, 2, (int64_t)(smp->start_ns - (uint64_t)d->base));
        B64(q, 3, g->type_id);
        B64(q, 4, g->metric_id[i]);
        sqlite3_bind_double(q, 5, smp->value[i]);
        if (db_step(d, S_GPM) < 0)
            return -1;
    }
    return 0;
}

/* The GPU metrics session dir into GPU_METRICS, as nsys lays its GPU
 * metrics out: one typeId per device session (TARGET_INFO_GPU_METRICS
 * names it "GPU ordinal name"), one metricId per metric across the
 * export (the same metric key, the same id).  0, or -1 after an error. */
static int export_gpm(struct db *d, const char *dir, int64_t type_id, uint64_t from, uint64_t to,
                      const struct cuptimon_gpm_devset *devs)
{
    struct gpm_walk g = {.d = d, .type_id = type_id};
    struct cuptimon_gpm_read_stats gst;
    struct cuptimon_gpm_meta *m = malloc(sizeof *m);
    struct cuptimon_archive_reader *r;
    char why[320], tname[200];
    int rc;

    if (m == NULL) {
        fprintf(stderr, PROG ": out of memory\n");
        return -1;
    }
    if (cuptimon__cli_read_open(PROG, dir, NULL, 0, &r) < 0) {
        free(m);
        return 0;
    }
    d->dir = dir;
    cuptimon__archive_set_report(r, report_damage, d);
    if (cuptimon__gpm_meta_parse(cuptimon__archive_meta(r), m, why, sizeof why) < 0) {
        fprintf(stderr, PROG ": %s/meta.json: %s; its GPU metrics are left out\n", dir, why);
        cuptimon__archive_close(r);
        free(m);
        return 0;
    }
    if (devs != NULL && !cuptimon__gpm_devset_has(devs, (uint32_t)m->ordinal, m->uuid)) {
        cuptimon__archive_close(r);
        free(m);
        return 0;
    }
    snprintf(tname, sizeof tname, "GPU %d %s", m->ordinal, m->name);
    begin(d);
    for (uint32_t i = 0; i < m->nmetrics && !d->failed; i++) {
        char sql[512];
        sqlite3_stmt *q;
        /* The metric's id: that of the same key already in the export. */
        snprintf(sql, sizeof sql,
                 "SELECT coalesce((SELECT metricId FROM CUPTIMON_GPU_METRICS WHERE metricKey ="
                 " ?1 LIMIT 1), (SELECT coalesce(max(metricId), -1) + 1 FROM"
                 " CUPTIMON_GPU_METRICS))");
        if (sqlite3_prepare_v2(d->db, sql, -1, &q, NULL) != SQLITE_OK) {
            db_error(d, "writing the GPU metrics");
            break;
        }
        sqlite3_bind_text(q, 1, m->metric[i].key, -1, SQLITE_STATIC);
        if (sqlite3_step(q) == SQLITE_ROW)
            g.metric_id[i] = sqlite3_column_int64(q, 0);
        sqlite3_finalize(q);
        if (sqlite3_prepare_v2(d->db,
                               "INSERT INTO CUPTIMON_GPU_METRICS VALUES (?1,?2,?3,?4,?5,?6,?7,?8,"
                               "?9,?10,0,0)",
                               -1, &q, NULL) != SQLITE_OK) {
            db_error(d, "writing the GPU metrics");
            break;
        }
        B64(q, 1, type_id);
        B64(q, 2, g.metric_id[i]);
        sqlite3_bind_text(q, 3, m->metric[i].key, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 4, m->metric[i].cupti, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 5, m->metric[i].unit, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 6, m->hostname, -1, SQLITE_STATIC);
        B64(q, 7, m->ordinal);
        sqlite3_bind_text(q, 8, m->uuid, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 9, m->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 10, dir, -1, SQLITE_STATIC);
        rc = sqlite3_step(q);
        sqlite3_finalize(q);
        if (rc != SQLITE_DONE) {
            db_error(d, "writing the GPU metrics");
            break;
        }
        if (sqlite3_prepare_v2(d->db, "INSERT INTO TARGET_INFO_GPU_METRICS VALUES (?1,?2,?3,?4,?5)",
                               -1, &q, NULL) != SQLITE_OK) {
            db_error(d, "writing the GPU metrics");
            break;
        }
        B64(q, 1, type_id);
        B64(q, 2, m->ordinal);
        sqlite3_bind_text(q, 3, tname, -1, SQLITE_STATIC);
        B64(q, 4, g.metric_id[i]);
        sqlite3_bind_text(q, 5, m->metric[i].label, -1, SQLITE_STATIC);
        rc = sqlite3_step(q);
        sqlite3_finalize(q);
        if (rc != SQLITE_DONE)
            db_error(d, "writing the GPU metrics");
    }
    commit(d);
    memset(&gst, 0, sizeof gst);
    rc = d->failed ? -1 : cuptimon__gpm_read_chunks(r, m, from, to, gpm_sample, &g, &gst);
    commit(d);
    {
        struct cuptimon_archive_stats ast;
        cuptimon__cli_read_close(PROG, dir, r, rc < 0 && !d->failed ? rc : 0, &ast);
        cuptimon__cli_read_damage(PROG, dir, &ast);
    }
    if (!d->failed) {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "UPDATE CUPTIMON_GPU_METRICS SET samples = %" PRIu64 ", noValue = %" PRIu64
                 " WHERE typeId = %" PRId64,
                 g.samples, g.no_value, type_id);
        db_exec(d, sql, "writing the GPU metrics");
    }
    if (gst.bad_chunks || gst.bad_samples || gst.bad_values)
        fprintf(stderr,
                PROG ": %s: GPU metrics: skipped %" PRIu64 " chunk(s) whose size is not a whole "
                     "number of samples and %" PRIu64 " sample(s) with impossible or "
                     "out-of-order times; %" PRIu64 " infinite value(s) read as no value\n",
                dir, gst.bad_chunks, gst.bad_samples, gst.bad_values);
    free(m);
    return d->failed ? -1 : 0;
}

/* ---- the command -------------------------------------------------------------- */

static int write_meta(struct db *d)
{
    char sql[1024], utc[64] = "", local[64] = "";
    time_t t = (time_t)(d->base / 1000000000);
    struct tm tm;

    if (gmtime_r(&t, &tm) != NULL)
        strftime(utc, sizeof utc, "%Y-%m-%dT%H:%M:%S", &tm);
    if (localtime_r(&t, &tm) != NULL)
        strftime(local, sizeof local, "%Y-%m-%dT%H:%M:%S%z", &tm);
    snprintf(sql, sizeof sql,
             "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (%" PRId64 ", '%s.%09" PRId64
             "Z', '%s');"
             "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '" NSYS_SCHEMA_VERSION
             "'), ('EXPORT_PRODUCT_VERSION', 'cuptimon " PACKAGE_VERSION
             "'), ('CUPTIMON_SCHEMA_VERSION', '" CUPTIMON_SCHEMA_VERSION "');",
             d->base, utc, d->base % 1000000000, local);
    return db_exec(d, sql, "writing the session start");
}

static int export_main(struct cuptimon_ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        {"type", required_argument, NULL, 't'},
        {"output", required_argument, NULL, 'o'},
        {"from", required_argument, NULL, 'F'},
        {"to", required_argument, NULL, 'T'},
        {"pid", required_argument, NULL, 'p'},
        {"label", required_argument, NULL, 'l'},
        {"window", required_argument, NULL, 'w'},
        {"read-all", no_argument, NULL, 'A'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out_path = NULL, *type = NULL;
    struct cuptimon_cli_select sel = {.prog = PROG};
    struct db d = {0};
    struct reading rd = {0};
    struct cuptimon_outfile of = {.fd = -1};
    struct xsess *sess = NULL;
    struct cuptimon_demangler *dm = NULL;
    char **dirs = NULL, **gdirs = NULL;
    size_t nsess = 0;
    long long window = 0;
    int c, ret = 1, have_of = 0;
    struct cuptimon_cli_progress pg = {.on = isatty(STDERR_FILENO)};

    optind = 0; /* glibc: re-initialises getopt completely */
    while ((c = getopt_long(argc, argv, "t:o:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
        case 'l':
        case 'F':
        case 'T':
        case 'A':
            if (cuptimon__cli_select_opt(&sel, c, optarg) < 0)
                return 2;
            break;
        case 't': type = optarg; break;
        case 'o': out_path = optarg; break;
        case 'w': {
            char *end;
            errno = 0;
            window = strtoll(optarg, &end, 10);
            if (end == optarg || *end != '\0' || errno != 0 || window <= 0 || optarg[0] == '+') {
                fprintf(stderr, PROG ": --window: '%s' is not a window id\n", optarg);
                return 2;
            }
            break;
        }
        case 'q': pg.on = 0; break;
        case 'h': usage(stdout); return 0;
        default: fprintf(stderr, "Try '" PROG " --help' for more information.\n"); return 2;
        }
    }
    if (window ? optind != argc : optind != argc - 1) {
        fprintf(stderr, PROG ": %s\nTry '" PROG " --help' for more information.\n",
                window           ? "--window reads the window's own sessions: give no ARCHIVE_DIR"
                : optind >= argc ? "ARCHIVE_DIR is missing"
                                 : "only one ARCHIVE_DIR is taken");
        return 2;
    }
    if (type == NULL || strcmp(type, "sqlite") != 0) {
        fprintf(stderr,
                PROG ": %s%s%s: sqlite is the only export type (Nsight Systems' SQLite schema); "
                     "give --type=sqlite\n",
                type ? "--type: '" : "--type is missing", type ? type : "", type ? "'" : "");
        return 2;
    }
    if (out_path == NULL || strcmp(out_path, "-") == 0) {
        fprintf(stderr, PROG ": an SQLite database cannot go to standard output: name the file "
                             "with -o FILE\n");
        return 2;
    }
    {
        struct stat st;
        if (stat(out_path, &st) == 0 && !S_ISREG(st.st_mode)) {
            fprintf(stderr,
                    PROG ": -o %s: not a regular file (an SQLite database is written to a "
                         "file, then renamed into place)\n",
                    out_path);
            return 2;
        }
    }
    if (cuptimon__cli_select_check(&sel) < 0)
        return 2;

    if (window) {
        uint64_t wf = 0, wt = 0;
        int rc = cuptimon__cli_window_lookup(ctl, PROG, window, &wf, &wt, &dirs);
        if (rc != 0)
            return rc;
        if (!sel.have_from || sel.from < wf)
            sel.from = wf;
        if (sel.to == 0 || sel.to > wt)
            sel.to = wt;
        sel.have_from = 1;
        if (sel.to <= sel.from) {
            fprintf(stderr,
                    PROG ": --window %lld: --from/--to leave nothing of its range [%" PRIu64
                         ", %" PRIu64 ")\n",
                    window, wf, wt);
            cuptimon__archive_free_list(dirs);
            return 2;
        }
        while (dirs[nsess] != NULL)
            nsess++;
        gdirs = cuptimon__cli_window_gpm_dirs(dirs[0]);
    } else if (cuptimon__cli_find_sessions(PROG, argv[optind], &dirs, &nsess) != 0) {
        return 1;
    }
    sess = calloc(nsess, sizeof *sess);
    rd.marks = calloc(MARK_OPEN_MAX, sizeof *rd.marks);
    if (sess == NULL || rd.marks == NULL || cuptimon__demangler_new(0, &dm) < 0)
        goto oom;
    for (size_t i = 0; i < nsess; i++) {
        sess[i].dir = dirs[i];
        if (!window)
            sess[i].gpm = sess[i].skip = cuptimon__cli_session_is_gpm(dirs[i]);
    }
    /* --pid/--label: a value that matches no session fails before anything
     * is written (the database would silently lack what was asked for). */
    if (cuptimon__cli_select_picks(&sel)) {
        for (size_t i = 0; i < nsess; i++)
            if (!sess[i].gpm)
                sess[i].skip = !cuptimon__cli_session_picked(&sel, sess[i].dir, &sess[i].as, NULL);
        if (cuptimon__cli_select_unmatched(&sel, window ? "the window" : argv[optind]))
            goto out;
    }
    /* The time base: decode's for the same selection. */
    if (sel.have_from) {
        d.base = (int64_t)sel.from;
    } else {
        uint64_t best = 0;
        for (size_t i = 0; i < nsess; i++) {
            if (sess[i].skip)
                continue;
            uint64_t t = cuptimon__cli_first_time(PROG, sess[i].dir, &sess[i].as);
            if (t != 0 && (best == 0 || t < best))
                best = t;
        }
        d.base = (int64_t)(best - best % 1000000000u);
    }

    /* The output file's temporary name, beside it. */
    {
        int rc = cuptimon__outfile_open(&of, out_path, 0644);
        if (rc < 0) {
            fprintf(stderr, PROG ": cannot write %s: %s\n", out_path, strerror(-rc));
            goto out;
        }
        have_of = 1;
    }
    d.path = out_path;
    if (db_open(&d, of.tmp) < 0 || write_meta(&d) < 0)
        goto out;
    rd.d = &d;
    rd.dm = dm;
    rd.pg = &pg;
    rd.nsess = nsess;
    pg.t0 = pg.last = cuptimon__cli_mono_s();
    rd.from = sel.have_from ? sel.from : 0;
    rd.to = sel.to;
    uint64_t skip_before = cuptimon__cli_select_skip_before(&sel);
    int picks = cuptimon__cli_select_picks(&sel) || window;
    struct cuptimon_gpm_devset devs = {.all = !picks};
    int64_t type_id = 0;
    for (size_t i = 0; i < nsess; i++) {
        if (sess[i].skip)
            continue;
        sess[i].gpid = global_pid(i, sess[i].as.info.pid);
        /* The pid for the globalPid: meta.json's, read before the real pass
         * (first_time or the picks); read it here when neither did. */
        if (sess[i].as.meta == NULL) {
            struct cuptimon_archive_reader *r;
            if (cuptimon__cli_open(PROG, sess[i].dir, NULL, &r) == 0) {
                cuptimon__archive_session_meta(&sess[i].as, cuptimon__archive_meta(r));
                cuptimon__archive_close(r);
            }
            sess[i].gpid = global_pid(i, sess[i].as.info.pid);
        }
        rd.idx = i;
        int rc = export_one(&d, &sess[i], &rd, skip_before);
        if (rc < 0)
            goto out;
        if (rc == 0)
            cuptimon__gpm_devset_resolve(&devs, &sess[i].devs, sess[i].as.names);
    }
    /* GPU metrics: of every GPU, or with --pid/--label/--window of the
     * GPUs the chosen processes ran work on, over the range asked for. */
    for (size_t i = 0; window ? gdirs && gdirs[i] : i < nsess; i++) {
        const char *dir = window ? gdirs[i] : sess[i].dir;
        if (!window && !sess[i].gpm)
            continue;
        if (export_gpm(&d, dir, ++type_id, rd.from, rd.to, &devs) < 0)
            goto out;
    }
    cuptimon__cli_progress_show(&pg, "export", nsess, nsess, 1);
    if (pg.on)
        fprintf(stderr, "export: making the indexes\n");
    if (db_exec(&d, index_sql, "making the indexes") < 0)
        goto out;
    db_close(&d);
    if (d.failed)
        goto out;
    {
        int rc = cuptimon__outfile_commit(&of, 1, 1);
        have_of = 0;
        if (rc < 0) {
            fprintf(stderr, PROG ": writing %s: %s\n", out_path, strerror(-rc));
            goto out;
        }
    }
    ret = 0;
    goto out;

oom:
    fprintf(stderr, PROG ": out of memory\n");
out:
    if (d.db != NULL)
        db_close(&d);
    if (have_of)
        cuptimon__outfile_commit(&of, 0, 0);
    cuptimon__demangler_free(dm);
    free(rd.kn);
    free(rd.marks);
    for (size_t i = 0; sess != NULL && i < nsess; i++)
        cuptimon__archive_session_clear(&sess[i].as);
    free(sess);
    cuptimon__archive_free_list(dirs);
    cuptimon__archive_free_list(gdirs);
    return ret;
}

int cuptimon__cli_export(struct cuptimon_ctl *ctl, int argc, char **argv)
{
    char **av;
    int rc;

    if (argc < 1) {
        usage(stderr);
        return 2;
    }
    if ((av = cuptimon__cli_argv(PROG, argc, argv)) == NULL)
        return 1;
    rc = export_main(ctl, argc, av);
    free(av);
    return rc;
}
