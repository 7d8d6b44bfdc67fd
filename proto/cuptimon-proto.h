/*
 * cuptimon wire protocol: the one header that names every byte that crosses
 * the producer socket and the control socket.
 *
 * ANY change to a header or body layout below, or to the meaning of a field,
 * must bump CUPTIMON_PROTO_VERSION.  Message numbers come in ranges; a number
 * that is retired stays retired and is never given a new meaning.
 *
 * Every message is a fixed 16-byte little-endian header followed by `length`
 * bytes of body.  Data-path bodies (buffer rate) are packed binary structs;
 * session and control bodies are JSON objects (json-c), not NUL-terminated
 * on the wire.
 */
#ifndef CUPTIMON_PROTO_H
#define CUPTIMON_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CUPTIMON_PROTO_MAGIC   0x4d545043u /* "CPTM" little-endian */
#define CUPTIMON_PROTO_VERSION 1u

/* No body may be larger than this; checked before any byte of it is read. */
#define CUPTIMON_MSG_MAX_BODY (1u << 20)

struct cuptimon_msg_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t length; /* body bytes after this header */
    uint32_t flags;  /* reserved, must be 0 */
};
#define CUPTIMON_MSG_HDR_SIZE 16u

/* Message types.  Ranges: 0x01xx session, 0x02xx data path (producer to
 * daemon), 0x03xx commands (daemon to producer), 0x04xx control requests,
 * 0x05xx replies. */
enum cuptimon_msg_type {
    /* session */
    CUPTIMON_MSG_HELLO = 0x0101,     /* producer -> daemon, JSON, carries the pool fd */
    CUPTIMON_MSG_HELLO_ACK = 0x0102, /* daemon -> producer, JSON */
    CUPTIMON_MSG_BYE = 0x0103,       /* producer -> daemon: clean exit; optional JSON body
                                      * {dropped_records, requests_declined, buffers_lost} */

    /* data path */
    CUPTIMON_MSG_BUFFER_READY = 0x0201,   /* struct cuptimon_buffer_ready */
    CUPTIMON_MSG_BUFFER_RELEASE = 0x0202, /* struct cuptimon_buffer_release (daemon -> producer) */
    CUPTIMON_MSG_STRINGS = 0x0203,        /* packed string batch, see below */
    CUPTIMON_MSG_FLUSH_DONE = 0x0204,     /* struct cuptimon_flush_done */
    CUPTIMON_MSG_RANGES = 0x0205,         /* annotation push/pop times, see below; sent only
                                           * to a daemon whose HELLO_ACK has "ranges": true */
    CUPTIMON_MSG_LAYOUTS = 0x0206,        /* JSON, the record layouts of the buffers from
                                           * a sequence number on, see below; sent only to a
                                           * daemon whose HELLO_ACK has "layouts": true */
    CUPTIMON_MSG_HELD = 0x0207,           /* what CUPTI holds behind running work and how
                                           * the pool grew, see below; sent only to a daemon
                                           * whose HELLO_ACK has "held": true */

    /* commands, daemon -> producer */
    CUPTIMON_MSG_FLUSH = 0x0301,   /* struct cuptimon_flush */
    CUPTIMON_MSG_ENABLE = 0x0302,  /* JSON {"kinds":[..]} */
    CUPTIMON_MSG_DISABLE = 0x0303, /* JSON {"kinds":[..]} */
    CUPTIMON_MSG_CONFIG = 0x0304,  /* JSON */

    /* control, cuptimonctl -> daemon */
    CUPTIMON_MSG_CONTROL = 0x0401, /* JSON {"op": "...", ...} */

    /* replies */
    CUPTIMON_MSG_REPLY_OK = 0x0501,    /* JSON */
    CUPTIMON_MSG_REPLY_ERROR = 0x0502, /* JSON {"error": errno-name, "message": text} */
};

/* BUFFER_READY: one completed CUPTI buffer is in pool slot `slot`. */
struct cuptimon_buffer_ready {
    uint32_t slot;
    uint32_t stream_id;   /* CUPTI's streamId argument of the completion callback */
    uint64_t valid_size;  /* bytes of records at the start of the slot */
    uint64_t context;     /* CUcontext pointer value, as an opaque id */
    uint64_t dropped;     /* cuptiActivityGetNumDroppedRecords for that ctx/stream */
    uint64_t cupti_ts;    /* cuptiGetTimestamp() sampled at completion */
    uint64_t realtime_ns; /* CLOCK_REALTIME sampled next to cupti_ts */
    uint64_t seq;         /* per-session buffer sequence number, from 0 */
    uint64_t records;     /* records the shim walked in the buffer */
};
#define CUPTIMON_BUFFER_READY_SIZE 64u

/* BUFFER_RELEASE: the daemon is done with a slot (its bytes are written). */
struct cuptimon_buffer_release {
    uint32_t slot;
    uint32_t status; /* 0 archived, else a positive errno: not archived (counted) */
    uint64_t seq;
};
#define CUPTIMON_BUFFER_RELEASE_SIZE 16u

/* FLUSH: ask the producer to call cuptiActivityFlushAll and then send
 * FLUSH_DONE with the same id after every buffer that flush produced.
 *
 * mode PLAIN: cuptiActivityFlushAll(0), which hands over only buffers whose
 * records are complete (docs/gpu-runs/20261204-h200-probe).  FORCED: with
 * CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, which also hands over the records of
 * work still running, incomplete, and loses their completion: the daemon
 * never asks for it (an older daemon did, at a window's end).  FENCE: a
 * plain flush that also answers whether every buffer CUPTI was given
 * before the fence numbered `fence` (nonzero; the first FENCE flush with a
 * new number sets it) is back: FLUSH_DONE's CUPTIMON_SHIM_FENCE_PENDING
 * when not.  The daemon repeats a FENCE flush with the same number until it
 * is not pending or its bound passes.  Only sent to a shim whose hello says
 * "fence": true (a shim without it refuses mode 2, and `fence` must be 0 in
 * the other modes), so no version bump. */
enum {
    CUPTIMON_FLUSH_PLAIN = 0,
    CUPTIMON_FLUSH_FORCED = 1,
    CUPTIMON_FLUSH_FENCE = 2,
};
struct cuptimon_flush {
    uint64_t flush_id;
    uint32_t mode;
    uint32_t fence;
};
#define CUPTIMON_FLUSH_SIZE 16u

/* FLUSH_DONE also carries the shim's running totals of what the daemon
 * cannot see for itself. */
struct cuptimon_flush_done {
    uint64_t flush_id;
    uint64_t buffers;           /* buffers completed during that flush */
    uint64_t buffers_lost;      /* slots reclaimed when a daemon went away */
    uint64_t requests_declined; /* CUPTI asked for a buffer, the pool was empty */
    uint64_t foreign_buffers;   /* completions of buffers the shim does not own */
    uint64_t flags;             /* CUPTIMON_SHIM_* below */
};
#define CUPTIMON_FLUSH_DONE_SIZE 48u
/* Another CUPTI client took the activity callbacks (the shim was injected,
 * not preloaded, so it could not share): buffers CUPTI held were completed
 * elsewhere. */
#define CUPTIMON_SHIM_CUPTI_TAKEN 0x1ull
/* Another tool shares CUPTI through the preloaded shim right now. */
#define CUPTIMON_SHIM_SHARING 0x2ull
/* Answering a FENCE flush: CUPTI still holds buffers it was given before the
 * fence (they hold records of work still running). */
#define CUPTIMON_SHIM_FENCE_PENDING 0x4ull

/*
 * HELD body (issue 33): what CUPTI holds in the producer's pool, from the
 * shim's walk of the slots CUPTI has (the records in them, complete or
 * not), and how its pool grew.  CUPTI completes records in launch order
 * and hands back buffers in fill order, so one piece of work still
 * running holds every record launched after it, on any stream, in
 * buffers CUPTI keeps: the "head" is the oldest record not complete yet,
 * the work everything else waits on.  Fields are read from its record as
 * CUPTI wrote it at launch (its times are not there yet).  Sent when the
 * report changes, and every second while something is held; the fixed
 * part, then name_len bytes of the head kernel's name as the shim read it
 * in its own memory (not NUL-terminated; 0 for copies and memsets or when
 * it could not be read).
 *   uint64 cupti_ts, realtime_ns  sampled together when the report was made
 *   uint64 since_ns     CLOCK_REALTIME when the shim first saw this head as
 *                       the oldest incomplete record (0: no head)
 *   uint64 bytes        a copy's or memset's bytes (0 otherwise)
 *   uint64 records      records in the held buffers from the head on, the
 *                       head included
 *   uint64 held_bytes   their bytes
 *   uint64 flushes_skipped   plain flushes the shim did not make: they could
 *                       only have closed one more buffer behind the head
 *   uint32 kind         the head's activity kind (0: no head), bit 31 clear
 *   uint32 correlation_id, device_id, context_id, stream_id
 *   uint32 buffers      buffers CUPTI holds from the head's on
 *   uint32 slots_base   the resident pool's slots
 *   uint32 slots_max    the most the pool may grow to (the cap)
 *   uint32 slots_out    slots not free now (CUPTI's, queued, the daemon's)
 *   uint32 grown        slots past the resident ones out now (their memory
 *                       is the pool's growth; it goes back when they do)
 *   uint32 grown_peak   the most of those out at once since the start
 *   uint32 flags        CUPTIMON_HELD_*
 *   uint16 name_len     at most CUPTIMON_HELD_NAME_MAX
 *   uint16 reserved     0
 * With CUPTIMON_HELD_DECLINES in flags (sent only to a daemon whose
 * HELLO_ACK has "held_declines": true; issue 47), CUPTIMON_HELD_EXT_SIZE
 * more bytes follow the fixed part, before the name:
 *   uint64 declined     CUPTI's requests for a buffer the shim declined
 *                       since it started (the pool at its cap)
 *   uint64 declining_since_ns  CLOCK_REALTIME of the first decline since a
 *                       request last got a buffer (0: none declined since):
 *                       CUPTI is dropping records now, and counts them only
 *                       when it hands the buffers it holds over
 */
#define CUPTIMON_HELD_SIZE     112u
#define CUPTIMON_HELD_EXT_SIZE 16u
#define CUPTIMON_HELD_NAME_MAX 512u
/* A held slot could not be walked (a kind whose record size the shim does
 * not know, or CUPTI's v2 path): the counts are of the slots walked. */
#define CUPTIMON_HELD_UNSCANNED 0x1u
/* The declines follow the fixed part (above). */
#define CUPTIMON_HELD_DECLINES 0x2u
struct cuptimon_held {
    uint64_t cupti_ts, realtime_ns, since_ns, bytes, records, held_bytes, flushes_skipped;
    uint64_t declined, declining_since_ns; /* with CUPTIMON_HELD_DECLINES */
    uint32_t kind, correlation_id, device_id, context_id, stream_id, buffers;
    uint32_t slots_base, slots_max, slots_out, grown, grown_peak, flags;
    uint16_t name_len;
};

/*
 * STRINGS body: uint32 count, uint32 reserved, then `count` entries of
 *   uint64 ptr; uint32 len; char bytes[len]; '\0'
 * Entries are not padded.  `ptr` is the address of the string in the
 * producer (the value stored in records); `len` excludes the terminator,
 * which must be present.
 */
/* Keys in the string table that are not pointers (user-space pointers
 * never have bit 63 or 62 set): the name of user annotation `id` (the
 * external correlation id the shim pushed, kind CUSTOM1), and the label of
 * CUDA graph node `node`. */
#define CUPTIMON_ANNOTATION_KEY(id) (0x8000000000000000ull | (uint64_t)(id))
#define CUPTIMON_GRAPH_LABEL_KEY(node)                                                             \
    (0x4000000000000000ull | ((uint64_t)(node)&0x3fffffffffffffffull))
/* The name (comm) of thread `tid` (a system thread id), as the shim read
 * it from /proc/self/task/TID/comm: both high bits set. */
#define CUPTIMON_THREAD_NAME_KEY(tid) (0xc000000000000000ull | (uint64_t)(uint32_t)(tid))
/* The properties of CUDA device `ordinal` as the shim read them from the
 * driver (bit 32 set, so never a thread's key): 13 decimal numbers and the
 * name, separated by single spaces, in Kineto's deviceProperties order:
 *   id totalGlobalMem computeMajor computeMinor maxThreadsPerBlock
 *   maxThreadsPerMultiprocessor regsPerBlock warpSize sharedMemPerBlock
 *   numSms regsPerMultiprocessor sharedMemPerBlockOptin
 *   sharedMemPerMultiprocessor NAME
 * (the name runs to the end of the string). */
#define CUPTIMON_DEVICE_KEY(ordinal) (0xc000000100000000ull | (uint64_t)(uint32_t)(ordinal))
#define CUPTIMON_DEVICES_MAX         64u
/* The UUID of CUDA device `ordinal` (the process's ordinal, which under
 * CUDA_VISIBLE_DEVICES is not the node's), as the shim read it from the
 * driver (cuDeviceGetUuid), written as nvidia-smi and the daemon's GPU
 * metrics write it: "GPU-" and 32 hex digits in groups 8-4-4-4-12 (bit 34
 * set, so never another key above).  Readers match a process's devices to
 * the node's GPUs by it. */
#define CUPTIMON_DEVICE_UUID_KEY(ordinal) (0xc000000400000000ull | (uint64_t)(uint32_t)(ordinal))
/* The record size of activity kind `kind` (< 64) as the producer's libcupti
 * was measured to use it (the per-session layout check, issue 30; bit 33
 * set, so never a thread's or a device's key): "BYTES HOW" in decimal, HOW
 * "stride" (the step of CUPTI's cuptiActivityGetNextRecord in the shim's
 * walk of a buffer) or "struct_size" (cuptiActivityGetStructSize, CUPTI
 * 13.2+).  The shim adds one when it measures a kind anew, so it is framed
 * before the BUFFER_READY of the buffer that showed it and sent again to
 * every new connection, as every string is; the daemon walks and decodes
 * that kind by it from then on (archive/decode.h, cuptimon__layout_measured).
 * The hello's record_sizes_measured holds those measured before it.  A
 * daemon older than this keeps them in strings.bin, unread. */
#define CUPTIMON_RECORD_SIZE_KEY(kind) (0xc000000200000000ull | (uint64_t)(uint8_t)(kind))
#define CUPTIMON_RECORD_SIZE_KIND(key)                                                             \
    (((uint64_t)(key) & ~0x3full) == 0xc000000200000000ull ? (int)((key)&0x3f) : -1)
/* Annotation ranges as the daemon archives them (strings.bin, from RANGES
 * messages; the shim never sends these keys): the begin of annotation `id`
 * (id < 2^60), "BEGIN_UNIX_NS TID DEPTH PARENT_ID" in decimal, and its end,
 * "END_UNIX_NS".  Bits 61 and 60 tell them from the keys above. */
#define CUPTIMON_RANGE_ID_MAX         (1ull << 60)
#define CUPTIMON_RANGE_BEGIN_KEY(id)  (0xe000000000000000ull | (uint64_t)(id))
#define CUPTIMON_RANGE_END_KEY(id)    (0xf000000000000000ull | (uint64_t)(id))
#define CUPTIMON_RANGE_KEY_CLASS(key) ((uint64_t)(key)&0xf000000000000000ull)
/*
 * User-defined record layouts that change during a session (CUPTI 13.3+'s
 * v2 path, issue 28).  A shim that asks CUPTI for user-defined records
 * describes them in its hello ("record_layouts", archive/decode.h) and,
 * when CUPTI reports other layouts for a later buffer (a window enabled a
 * kind, or CUPTI changed one), sends LAYOUTS before that buffer's
 * BUFFER_READY:
 *   {"seq": N, "record_layouts": {...}}
 * meaning: the buffers with sequence numbers from N on (until the next
 * LAYOUTS) hold records laid out as record_layouts says (every kind, not
 * only the changed ones).  N is below 2^60 and not below a sequence number
 * the daemon has seen.  The daemon archives it in strings.bin under the
 * key CUPTIMON_LAYOUTS_KEY(N), the text being the record_layouts object,
 * so that decode and windows read each chunk (whose index is its buffer's
 * sequence number) with the layouts it was written with; it refuses these
 * keys in STRINGS.  An archive keeps at most CUPTIMON_LAYOUT_GENERATIONS_MAX
 * of them; a session that changes layouts more often has its later
 * chunks counted as undecodable, never misread.
 */
#define CUPTIMON_LAYOUTS_KEY_CLASS      0xd000000000000000ull
#define CUPTIMON_LAYOUTS_KEY(seq)       (CUPTIMON_LAYOUTS_KEY_CLASS | (uint64_t)(seq))
#define CUPTIMON_LAYOUTS_SEQ_MAX        (1ull << 60)
#define CUPTIMON_LAYOUT_GENERATIONS_MAX 256u
#define CUPTIMON_STRINGS_HDR_SIZE       8u
#define CUPTIMON_STRING_ENTRY_HDR       12u
#define CUPTIMON_STRING_MAX_LEN         65535u

/*
 * RANGES body: the pushes and pops of user annotations (cuptimon_push_annotation,
 * cuptimon_step), so that traces can draw them as ranges:
 *   uint32 count; uint32 dropped  -- entries the shim could not queue
 *                                    since the previous batch (its queue
 *                                    was full), saturating;
 *   uint64 cupti_ts; uint64 realtime_ns   -- sampled together when framed,
 *   then `count` entries of 32 bytes:
 *   uint64 ts        cuptiGetTimestamp() at the push or pop (CUPTI's
 *                    timebase: mapped with the pair above, as a chunk's
 *                    records are with theirs);
 *   uint64 id        the annotation's external correlation id (1..2^60-1);
 *   uint64 parent    the id of the annotation it is nested in on that
 *                    thread, 0 for an outermost one;
 *   uint32 tid       the system thread id of the pushing thread;
 *   uint16 depth     nesting depth on that thread, 0 = outermost;
 *   uint8  what      1 push (begin), 2 pop (end);
 *   uint8  reserved (0).
 */
#define CUPTIMON_RANGES_HDR_SIZE  24u
#define CUPTIMON_RANGE_ENTRY_SIZE 32u
#define CUPTIMON_RANGES_MAX_COUNT                                                                  \
    ((CUPTIMON_MSG_MAX_BODY - CUPTIMON_RANGES_HDR_SIZE) / CUPTIMON_RANGE_ENTRY_SIZE)
enum {
    CUPTIMON_RANGE_BEGIN = 1,
    CUPTIMON_RANGE_END = 2
};

struct cuptimon_range_ev {
    uint64_t ts;
    uint64_t id;
    uint64_t parent;
    uint32_t tid;
    uint16_t depth;
    uint8_t what;
};

struct cuptimon_ranges_hdr {
    uint32_t count;
    uint32_t dropped;
    uint64_t cupti_ts;
    uint64_t realtime_ns;
};

/*
 * NCCL's collectives (issue 46): cuptimon's own record kind.  The shim is
 * NCCL's profiler plugin (client-lib/nccl.c); each collective or
 * point-to-point operation NCCL reports becomes one record of this layout,
 * and the IO thread puts a batch of them into a pool slot and hands it over
 * with BUFFER_READY like a CUPTI buffer, with stream_id
 * CUPTIMON_OWN_RECORDS_STREAM, context 0 and cupti_ts == realtime_ns (the
 * records' times are CLOCK_REALTIME already, so the chunk's pair maps them
 * to themselves); `dropped` counts the operations the shim could not record
 * since the previous such buffer.  The daemon archives the buffer as any
 * other chunk; the decoder (archive/decode.c) knows the kind by its number,
 * which no CUPTI kind comes near (CUPTI's are below 64; bit 31 stays
 * clear, it marks CUPTI's incomplete records).  Every record is
 * self-contained (its communicator's name and size ride in each), so a
 * chunk that retention kept alone still reads whole.
 *
 * Layout, little-endian, CUPTIMON_NCCL_REC_SIZE bytes:
 *   0  u32 kind       CUPTIMON_KIND_NCCL
 *   4  u8  what       CUPTIMON_NCCL_COLL / _P2P / _CE_COLL / _COMM_STATE
 *   5  u8  flags      CUPTIMON_NCCL_F_*
 *   6  u8  nchannels  NCCL's channels for it (v1-v3: nMaxChannels)
 *   7  u8  version    the plugin ABI version NCCL called (1-6)
 *   8  u64 comm_id    the communicator's id (v4: its hash)
 *  16  u64 seq        coll: NCCL's sequence number (NCCL counts each
 *                     function's collectives apart in a communicator);
 *                     p2p: the shim's count of p2p operations in it, from 1
 *  24  u64 count      elements
 *  32  u64 host_start CLOCK_REALTIME ns when NCCL started the event
 *  40  u64 host_stop  when NCCL stopped it (enqueued)
 *  48  u64 host_end   when its last kernel channel stopped (0: not seen)
 *  56  u64 gpu_start  the GPU's globaltimer when its first channel started
 *  64  u64 gpu_end    ... when its last channel stopped (0: not seen)
 *  72  u32 tid        system thread id of the thread that started it
 *  76  i32 rank, 80 i32 nranks, 84 i32 nnodes (0: not known, v1-v3)
 *  88  i32 root       root rank (coll), peer (p2p), -1 where none
 *  92  u8  nwarps, 93 u8 channels seen, 94 u16 reserved (0)
 *  96  char func[16], 112 datatype[16], 128 algo[16], 144 proto[16],
 * 160  char comm_name[64]  each NUL-padded; a string that fills its field
 *                     has no NUL; one that did not fit is cut (flag TRUNC)
 * 224  u64 completed  comm state: collectives completed; else 0
 * 232  u64 bytes      comm state: bytes of them; else 0
 * 240  u64 started    comm state: collectives started (ranks of one
 *                     communicator start the same ones in the same order, so
 *                     the rank that started fewest is the one behind); else 0
 * 248  u64 reserved (0)
 * A COMM_STATE record is a communicator's state when the shim framed the
 * buffer (sent when it changed; once more with nothing in flight when the
 * communicator ends): host_start = then; seq, func = the collective in
 * flight (the oldest started and not finished) and host_stop = when it
 * started (0: none in flight); count = the last finished collective's
 * seq + 1 (0: none) and algo = its function; completed, bytes.
 */
#define CUPTIMON_KIND_NCCL          0x4e43u
#define CUPTIMON_NCCL_REC_SIZE      256u
#define CUPTIMON_OWN_RECORDS_STREAM 0xffffffffu
#define CUPTIMON_NCCL_STR           16u
#define CUPTIMON_NCCL_NAME          64u
enum {
    CUPTIMON_NCCL_COLL = 1,
    CUPTIMON_NCCL_P2P = 2,
    CUPTIMON_NCCL_CE_COLL = 3,
    CUPTIMON_NCCL_COMM_STATE = 4,
};
#define CUPTIMON_NCCL_F_GPU_TIMES  0x01u /* gpu_start and gpu_end are the kernel's */
#define CUPTIMON_NCCL_F_COMPLETED  0x02u /* every kernel channel stopped (host_end) */
#define CUPTIMON_NCCL_F_TRUNCATED  0x04u /* a string was cut to its field */
#define CUPTIMON_NCCL_F_UNFINISHED 0x08u /* its communicator ended (or the process) first */
#define CUPTIMON_NCCL_F_NO_KERNEL  0x10u /* NCCL reports no kernel channels for it */
/* Recorded into a CUDA graph (plugin v5+: its API event said so): the
 * record is the capture; its kernel runs at each replay (CUPTI's records). */
#define CUPTIMON_NCCL_F_CAPTURED 0x20u
struct cuptimon_nccl_rec {
    uint8_t what, flags, nchannels, version;
    uint64_t comm_id, seq, count;
    uint64_t host_start, host_stop, host_end, gpu_start, gpu_end;
    uint32_t tid;
    int32_t rank, nranks, nnodes, root;
    uint8_t nwarps, channels_seen;
    char func[CUPTIMON_NCCL_STR], datatype[CUPTIMON_NCCL_STR];
    char algo[CUPTIMON_NCCL_STR], proto[CUPTIMON_NCCL_STR];
    char comm_name[CUPTIMON_NCCL_NAME];
    uint64_t completed, bytes, started;
};

/* Default socket names inside the runtime directory. */
#define CUPTIMON_PRODUCER_SOCKET_NAME "producer.sock"
#define CUPTIMON_CONTROL_SOCKET_NAME  "control.sock"
#define CUPTIMON_SYSTEM_RUNTIME_DIR   "/run/cuptimon"

/* Loss reports.  A shim whose exit hand-off ran out of time with buffers no
 * daemon took leaves one small file in this directory beside the producer
 * socket (the daemon makes it, mode 1733); the daemon reads, counts and
 * deletes each one.  The file is one JSON object of at most
 * CUPTIMON_LOSS_REPORT_MAX bytes: {"report": 1, "pid", "records_lost",
 * "buffers_lost", "dropped_records", "reason" (one of the words below),
 * "exit_timeout_ms", "label"}.  Its owner, not its content, says whose it
 * is.  Names starting with '.' are being written (renamed when complete). */
#define CUPTIMON_LOSS_DIR_NAME   "lost"
#define CUPTIMON_LOSS_REPORT_MAX 1024u
#define CUPTIMON_LOSS_REASONS    "queue_full", "refused", "unsent", "disconnected"

/* ---- activity kinds by name (kinds.c) ------------------------------------ */

/* "kernel", "memcpy", ... or a CUpti_ActivityKind number: 0 with *kind set,
 * or -1 for a word that names no kind. */
int cuptimon__kind_parse(const char *word, uint32_t *kind);
/* The accepted words, for error messages. */
const char *cuptimon__kind_words(void);

/* ---- framing ---------------------------------------------------------- */

/* Writes a header for a body of `length` bytes into out[16]. */
void cuptimon__hdr_encode(uint8_t out[CUPTIMON_MSG_HDR_SIZE], uint16_t type, uint32_t length);

/*
 * Parses the header at the start of buf[0..len).  Returns 0 with *hdr set
 * when a whole message (header and body) is present, -EAGAIN when more bytes
 * are needed, and for a bad header: -EBADMSG (magic or flags), -EPROTO
 * (version; hdr->version holds the peer's), -EMSGSIZE (length over max).
 */
int cuptimon__frame_parse(const uint8_t *buf, size_t len, struct cuptimon_msg_hdr *hdr);

/* True when `type` is one of the types above. */
int cuptimon__type_known(uint16_t type);
const char *cuptimon__type_name(uint16_t type);

/* A growable byte buffer used to assemble outgoing frames. */
struct cuptimon_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
};
int cuptimon__buf_reserve(struct cuptimon_buf *b, size_t extra);
int cuptimon__buf_append(struct cuptimon_buf *b, const void *p, size_t n);
void cuptimon__buf_consume(struct cuptimon_buf *b, size_t n);
void cuptimon__buf_free(struct cuptimon_buf *b);

/* Appends a whole frame (header + body) to b. */
int cuptimon__frame_append(struct cuptimon_buf *b, uint16_t type, const void *body, size_t len);

/* ---- data-path bodies ------------------------------------------------- */

void cuptimon__buffer_ready_encode(uint8_t out[CUPTIMON_BUFFER_READY_SIZE],
                                   const struct cuptimon_buffer_ready *m);
int cuptimon__buffer_ready_decode(const uint8_t *body, size_t len, struct cuptimon_buffer_ready *m);
void cuptimon__buffer_release_encode(uint8_t out[CUPTIMON_BUFFER_RELEASE_SIZE],
                                     const struct cuptimon_buffer_release *m);
int cuptimon__buffer_release_decode(const uint8_t *body, size_t len,
                                    struct cuptimon_buffer_release *m);
void cuptimon__flush_encode(uint8_t out[CUPTIMON_FLUSH_SIZE], const struct cuptimon_flush *m);
int cuptimon__flush_decode(const uint8_t *body, size_t len, struct cuptimon_flush *m);
void cuptimon__flush_done_encode(uint8_t out[CUPTIMON_FLUSH_DONE_SIZE],
                                 const struct cuptimon_flush_done *m);
int cuptimon__flush_done_decode(const uint8_t *body, size_t len, struct cuptimon_flush_done *m);

/* HELD bodies: the fixed part and, with CUPTIMON_HELD_DECLINES, its
 * extension (cuptimon__held_size bytes in all; out has room for
 * CUPTIMON_HELD_SIZE + CUPTIMON_HELD_EXT_SIZE); decode checks the length
 * against name_len (-EBADMSG: short, a length that is not
 * cuptimon__held_size + name_len, a name over CUPTIMON_HELD_NAME_MAX,
 * reserved bytes or flags set that this version does not know, slots_base
 * > slots_max). The name follows them in the body. */
size_t cuptimon__held_size(const struct cuptimon_held *m);
void cuptimon__held_encode(uint8_t *out, const struct cuptimon_held *m);
int cuptimon__held_decode(const uint8_t *body, size_t len, struct cuptimon_held *m);

/* String batches.  The writer appends entries to a buffer that starts with
 * the 8-byte batch header; the reader walks and validates one at a time. */
int cuptimon__strings_begin(struct cuptimon_buf *b);
int cuptimon__strings_add(struct cuptimon_buf *b, uint64_t ptr, const char *s, size_t len);
uint32_t cuptimon__strings_count(const struct cuptimon_buf *b);

struct cuptimon_strings_iter {
    const uint8_t *body;
    size_t len;
    size_t off;
    uint32_t left;
};
/* Returns 0 and sets iterator; -EBADMSG when the batch header is short or
 * claims more entries than the body can hold. */
int cuptimon__strings_iter_init(struct cuptimon_strings_iter *it, const uint8_t *body, size_t len);
/* Returns 1 with *ptr, *s and *slen set, 0 at the end, -EBADMSG on a truncated
 * entry, a missing terminator, an embedded NUL or bytes after the last entry. */
int cuptimon__strings_next(struct cuptimon_strings_iter *it, uint64_t *ptr, const char **s,
                           size_t *slen);

/* RANGES bodies.  The writer encodes the header and each entry in place;
 * the reader validates a whole body first (-EBADMSG: short, a count that
 * disagrees with the length, a reserved byte set, an id of 0 or >= 2^60,
 * an unknown `what`), then reads entry i < count. */
void cuptimon__ranges_hdr_encode(uint8_t out[CUPTIMON_RANGES_HDR_SIZE],
                                 const struct cuptimon_ranges_hdr *h);
void cuptimon__range_encode(uint8_t out[CUPTIMON_RANGE_ENTRY_SIZE],
                            const struct cuptimon_range_ev *r);
int cuptimon__ranges_parse(const uint8_t *body, size_t len, struct cuptimon_ranges_hdr *h);
void cuptimon__range_get(const uint8_t *body, uint32_t i, struct cuptimon_range_ev *r);

/* NCCL records: encode writes CUPTIMON_NCCL_REC_SIZE bytes; decode reads
 * them back (-EBADMSG: another kind, an unknown `what`, a reserved byte
 * set).  Strings come back NUL-terminated (fields + 1 bytes). */
void cuptimon__nccl_rec_encode(uint8_t out[CUPTIMON_NCCL_REC_SIZE],
                               const struct cuptimon_nccl_rec *r);
struct cuptimon_nccl_text {
    char func[CUPTIMON_NCCL_STR + 1], datatype[CUPTIMON_NCCL_STR + 1];
    char algo[CUPTIMON_NCCL_STR + 1], proto[CUPTIMON_NCCL_STR + 1];
    char comm_name[CUPTIMON_NCCL_NAME + 1];
};
int cuptimon__nccl_rec_decode(const uint8_t *in, size_t len, struct cuptimon_nccl_rec *r,
                              struct cuptimon_nccl_text *t);
/* The bytes of one element of an NCCL datatype by its name ("ncclFloat32",
 * "float32", ...), 0 when unknown. */
unsigned cuptimon__nccl_type_size(const char *datatype);

/* The archived form (CUPTIMON_RANGE_BEGIN_KEY / _END_KEY entries).
 * Formatting returns the length written into out[CUPTIMON_RANGE_TEXT_MAX];
 * parsing returns 0, or -EBADMSG for anything but the exact form (decimal
 * fields without sign or leading zeros, one space between, no overflow,
 * a tid that fits 32 bits, a depth 16 bits, a parent below 2^60). */
#define CUPTIMON_RANGE_TEXT_MAX 80u
struct cuptimon_range_begin {
    uint64_t unix_ns;
    uint32_t tid;
    uint32_t depth;
    uint64_t parent;
};
size_t cuptimon__range_begin_format(char *out, const struct cuptimon_range_begin *b);
int cuptimon__range_begin_parse(const char *s, size_t len, struct cuptimon_range_begin *b);
size_t cuptimon__range_end_format(char *out, uint64_t end_unix_ns);
int cuptimon__range_end_parse(const char *s, size_t len, uint64_t *end_unix_ns);

/* ---- sockets ---------------------------------------------------------- */

/* sendmsg the whole of buf with one fd attached (fd < 0: none).  Blocking
 * semantics follow the socket's; returns bytes sent or -errno. */
ssize_t cuptimon__send_fd(int sock, const void *buf, size_t len, int fd);

/*
 * recvmsg into buf.  At most one fd is accepted into *fd_out when fd_out is
 * not NULL (else *fd_out = -1); every other received fd is closed at once,
 * and *extra_fds (when not NULL) is set to how many (a lower bound when the
 * kernel truncated the control data).  *fd_out is -EMFILE when an fd was
 * sent but none could be installed (this process is out of descriptors).
 * Returns bytes read (0 = EOF) or -errno.
 */
ssize_t cuptimon__recv_fd(int sock, void *buf, size_t len, int *fd_out, int *extra_fds);

struct cuptimon_peer {
    pid_t pid;
    uid_t uid;
    gid_t gid;
};
int cuptimon__peer_cred(int sock, struct cuptimon_peer *peer);

/* Builds a sockaddr_un for path; -EINVAL for "", -ENAMETOOLONG when it
 * does not fit. */
struct sockaddr_un;
int cuptimon__sockaddr(struct sockaddr_un *sa, const char *path);

/* Connects a SOCK_STREAM|SOCK_CLOEXEC socket to path (non-blocking when
 * nonblock); returns the fd or -errno. */
int cuptimon__connect(const char *path, int nonblock);

/* ---- output files (proto/outfile.c) ---------------------------------------- */

/* A whole output file: a regular file (or a new path) is written to
 * PATH.tmp.PID and renamed into place at commit, so that it appears
 * complete or not at all; a device, FIFO or pipe at PATH (/dev/null,
 * /dev/stdout) is written in place, never replaced. */
struct cuptimon_outfile {
    int fd;    /* write here */
    char *tmp; /* NULL when writing in place */
    char *path;
};
/* Returns 0 or -errno (-EISDIR for a directory); mode is the new file's. */
int cuptimon__outfile_open(struct cuptimon_outfile *o, const char *path, mode_t mode);
/* Closes; ok: renames into place (after fsync if sync), else removes the
 * temporary file.  Returns 0 or -errno of what failed. */
int cuptimon__outfile_commit(struct cuptimon_outfile *o, int ok, int sync);

/* The runtime directory a daemon of this user defaults to (into out):
 * $XDG_RUNTIME_DIR/cuptimon, else /run/cuptimon for root, else
 * /tmp/cuptimon-UID.  Returns 0 or -ENAMETOOLONG. */
int cuptimon__default_runtime_dir(char *out, size_t outlen);

/* Blocking request/reply helper for control clients: sends one CONTROL
 * frame with body json and reads one reply; *reply is malloc'd (NUL
 * terminated), *reply_type is REPLY_OK or REPLY_ERROR (whose body says
 * why).  timeout_ms bounds the whole call.  Returns 0, or -errno: -ETIMEDOUT,
 * -ECONNRESET when the daemon hangs up, -EPROTO for a reply of another
 * type, the frame parser's errors for a bad header. */
int cuptimon__control_call(const char *path, const char *json, int timeout_ms, uint16_t *reply_type,
                           char **reply, size_t *reply_len);

/* Little-endian helpers. */
static inline void cuptimon__put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void cuptimon__put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void cuptimon__put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t cuptimon__get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t cuptimon__get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t cuptimon__get_u64(const uint8_t *p)
{
    return (uint64_t)cuptimon__get_u32(p) | ((uint64_t)cuptimon__get_u32(p + 4) << 32);
}

#endif
