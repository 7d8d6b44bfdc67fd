#!/usr/bin/env python3
"""check.py: the checker of cuptimon's GPU suite (tests/gpu).  Standard library only.

  check.py check WORKDIR OUTDIR
      Reads what tests/gpu/run.sh left in WORKDIR (the cases, the programs'
      reports, cuptimonctl's answers, the daemon's archive and the decoded
      traces), runs every check and writes OUTDIR/gpu-report.json and
      OUTDIR/gpu-report.txt.  Exits 0 when every hard check passed, else 1.

  check.py kernel-names TABLE.json
      Dry runs: the kernel table's mangled names, comma-separated.

  check.py dump SESSION_DIR
      Prints what this file's own archive reader finds in one session
      directory (counts by kind, kernels by name): for debugging.

  check.py adapt-workload RAW.json TABLE.json OUT.json [--every M,E] [--graph]
                          [--torch] [--trace TRACE.json]
      Dry runs only: turns the report of the libcupti double's workload
      (tests/fakecupti/cuptimon-workload) into a known-work report (or, with
      --torch, a torch-loop report plus a torch.profiler-like trace), so that
      the same checks run without a GPU.

The archive is read twice, independently: by this file (segments, chunks,
zstd through ctypes, raw CUPTI records at the offsets of the CUPTI headers,
names through strings.bin) and by `cuptimonctl decode` (the project's
decoder: trace.json + summary).  The known work is checked against both.
"""

import collections
import ctypes
import ctypes.util
import glob
import gzip
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------------------
# CUPTI 13.0 layouts (from cupti_activity.h with offsetof; build.sh writes the
# same from the headers it finds to build/cupti-layout.json, preferred).

BUILTIN_LAYOUT = {
    "cupti_api_version": 130001,
    "sizes": {"1": 96, "2": 88, "3": 216, "4": 40, "5": 40, "10": 216, "12": 56, "13": 40,
              "17": 56, "22": 96, "36": 56, "38": 56, "39": 24},
    "kernel": {"start": [16, 8], "end": [24, 8], "deviceId": [40, 4], "contextId": [44, 4],
               "streamId": [48, 4], "correlationId": [92, 4], "name": [104, 8],
               "graphNodeId": [144, 8], "graphId": [156, 4]},
    "memcpy": {"copyKind": [4, 1], "bytes": [8, 8], "start": [16, 8], "end": [24, 8],
               "deviceId": [32, 4], "contextId": [36, 4], "streamId": [40, 4],
               "correlationId": [44, 4], "graphNodeId": [64, 8], "graphId": [72, 4]},
    "memcpy2": {"copyKind": [4, 1], "bytes": [8, 8], "start": [16, 8], "end": [24, 8],
                "deviceId": [32, 4], "contextId": [36, 4], "streamId": [40, 4],
                "correlationId": [60, 4], "graphNodeId": [72, 8], "graphId": [80, 4],
                "srcDeviceId": [44, 4], "dstDeviceId": [52, 4]},
    "memset": {"bytes": [8, 8], "start": [16, 8], "end": [24, 8], "deviceId": [32, 4],
               "contextId": [36, 4], "streamId": [40, 4], "correlationId": [44, 4],
               "graphNodeId": [64, 8], "graphId": [72, 4]},
    "api": {"cbid": [4, 4], "start": [8, 8], "end": [16, 8], "processId": [24, 4],
            "threadId": [28, 4], "correlationId": [32, 4]},
    "external_correlation": {"externalKind": [4, 4], "externalId": [8, 8],
                             "correlationId": [16, 4]},
    "marker": {"flags": [4, 4], "timestamp": [8, 8], "id": [16, 4], "name": [40, 8],
               "domain": [48, 8]},
}

KIND_GROUP = {1: "memcpy", 2: "memset", 3: "kernel", 4: "api", 5: "api", 10: "kernel",
              12: "marker", 22: "memcpy2", 39: "external_correlation"}
KIND_TYPE = {1: "memcpy", 2: "memset", 3: "kernel", 4: "driver", 5: "runtime", 10: "kernel",
             12: "marker", 13: "marker_data", 17: "overhead", 22: "p2p", 36: "cuda_event",
             38: "sync", 39: "ext"}
COPY_KIND = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
             8: "DtoD", 9: "HtoH", 10: "PtoP"}
GPU_TYPES = ("kernel", "memcpy", "memset", "p2p")
U64 = (1 << 64) - 1

# Slack for "GPU time inside the process's wall-clock window": CUPTI maps GPU
# timestamps to CPU time and the suite samples CLOCK_REALTIME around the work.
WINDOW_SLACK_NS = 1000000
# Overlap tolerated between consecutive operations of one stream.
OVERLAP_TOL_NS = 2000
# torch: match ratio below which the (soft) comparison is flagged.
TORCH_RATIO_OK = 0.90
# Per-step placement of GPU events (coexist-check.py's, one copy for both):
# slack at a step's marks, ns.
STEP_SLACK_NS = 1000


def _coexist_check():
    """coexist-check.py as a module (its name has a dash)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("coexist_check", os.path.join(HERE, "coexist-check.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_layout():
    p = os.path.join(HERE, "build", "cupti-layout.json")
    try:
        with open(p) as f:
            lay = json.load(f)
        return lay, p
    except (OSError, ValueError):
        return BUILTIN_LAYOUT, "built-in (CUDA 13.0)"


# ---------------------------------------------------------------------------
# small helpers

def crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_CRC_T = crc32c_table()


def crc32c(data, crc=0):
    c = crc ^ 0xFFFFFFFF
    t = _CRC_T
    for b in data:
        c = (c >> 8) ^ t[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def read_json(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def read_text(path, default=""):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return default


def read_int(path, default=None):
    s = read_text(path, "").strip()
    try:
        return int(s)
    except ValueError:
        return default


def read_env(path):
    out = {}
    for line in read_text(path).splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


class Zstd:
    def __init__(self):
        self.lib = None
        self.why = ""
        names = ["libzstd.so.1", "libzstd.so"]
        found = ctypes.util.find_library("zstd")
        if found:
            names.append(found)
        for n in names:
            try:
                lib = ctypes.CDLL(n)
                lib.ZSTD_decompress.restype = ctypes.c_size_t
                lib.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                                ctypes.c_void_p, ctypes.c_size_t]
                lib.ZSTD_isError.restype = ctypes.c_uint
                lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
                self.lib = lib
                return
            except OSError as e:
                self.why = str(e)
        try:  # Python 3.14+
            from compression import zstd  # noqa: F401
            self.mod = zstd
        except ImportError:
            self.mod = None

    def available(self):
        return self.lib is not None or getattr(self, "mod", None) is not None

    def decompress(self, data, raw_size):
        if self.lib is not None:
            dst = ctypes.create_string_buffer(max(raw_size, 1))
            src = ctypes.create_string_buffer(bytes(data), len(data))
            n = self.lib.ZSTD_decompress(dst, raw_size, src, len(data))
            if self.lib.ZSTD_isError(n):
                raise ValueError("zstd error")
            return dst.raw[:n]
        if getattr(self, "mod", None) is not None:
            return self.mod.decompress(bytes(data))
        raise ValueError("no zstd decompressor (libzstd.so.1 not loadable: %s)" % self.why)


ZSTD = Zstd()


class Demangler:
    """__cxa_demangle from libstdc++ (what Kineto uses), else c++filt."""

    def __init__(self):
        self.cache = {}
        self.fn = None
        self.how = "none"
        for n in ("libstdc++.so.6", ctypes.util.find_library("stdc++")):
            if not n:
                continue
            try:
                lib = ctypes.CDLL(n)
                fn = getattr(lib, "__cxa_demangle")  # (not lib.__x: that is name-mangled here)
                fn.restype = ctypes.c_void_p
                fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.POINTER(ctypes.c_int)]
                self.fn = fn
                self.libc = ctypes.CDLL(None)
                self.libc.free.argtypes = [ctypes.c_void_p]
                self.how = "__cxa_demangle"
                break
            except (OSError, AttributeError):
                continue
        if self.fn is None and shutil.which("c++filt"):
            self.how = "c++filt"

    def __call__(self, name):
        if name is None:
            return None
        if name in self.cache:
            return self.cache[name]
        out = name
        if name.startswith("_Z"):
            if self.fn is not None:
                st = ctypes.c_int(0)
                p = self.fn(name.encode(), None, None, ctypes.byref(st))
                if p and st.value == 0:
                    out = ctypes.string_at(p).decode(errors="replace")
                if p:
                    self.libc.free(p)
            elif self.how == "c++filt":
                try:
                    out = subprocess.run(["c++filt", name], capture_output=True, text=True,
                                         timeout=10).stdout.strip() or name
                except (OSError, subprocess.SubprocessError):
                    pass
        self.cache[name] = out
        return out


DEMANGLE = Demangler()


# ---------------------------------------------------------------------------
# the archive, read independently of the project's reader

CHUNK_FMT = "<8sIIQIIQQQQQQQII"
CHUNK_SIZE = struct.calcsize(CHUNK_FMT)
assert CHUNK_SIZE == 96


class Archive:
    def __init__(self, d, layout):
        self.dir = d
        self.layout = layout
        self.meta = read_json(os.path.join(d, "meta.json"), {}) or {}
        self.strings = {}
        self.stats = collections.Counter()
        self.problems = []
        self.events = []
        self.chunks = []
        self._read_strings()
        self._read_segments()

    @property
    def pid(self):
        return self.meta.get("pid")

    def _read_strings(self):
        p = os.path.join(self.dir, "strings.bin")
        try:
            with open(p, "rb") as f:
                data = f.read()
        except OSError:
            self.problems.append("no strings.bin")
            return
        if len(data) < 16 or data[:8] != b"CPTMSTR1":
            self.stats["corrupt_strings"] += 1
            self.problems.append("strings.bin has a bad header")
            return
        off = 16
        while off + 16 <= len(data):
            ptr, n, crc = struct.unpack_from("<QII", data, off)
            if off + 16 + n > len(data):
                self.stats["corrupt_strings"] += 1
                self.problems.append("strings.bin ends inside an entry at %d" % off)
                break
            s = data[off + 16:off + 16 + n]
            if crc32c(data[off:off + 12] + s) != crc:
                self.stats["corrupt_strings"] += 1
                self.problems.append("strings.bin entry at %d has a bad CRC" % off)
                break
            self.strings[ptr] = s.decode(errors="replace")
            self.stats["strings"] += 1
            off += 16 + n

    def _read_segments(self):
        segs = sorted(glob.glob(os.path.join(self.dir, "seg-*.cpt")))
        for seg in segs:
            with open(seg, "rb") as f:
                data = f.read()
            self.stats["segments"] += 1
            if len(data) < 16 or data[:8] != b"CPTMSEG1":
                self.stats["corrupt_segments"] += 1
                self.problems.append("%s: bad segment header" % os.path.basename(seg))
                continue
            off = 16
            while off < len(data):
                if off + CHUNK_SIZE > len(data):
                    self.stats["torn_tails"] += 1
                    self.problems.append("%s: torn chunk header at %d" % (os.path.basename(seg), off))
                    break
                h = struct.unpack_from(CHUNK_FMT, data, off)
                (magic, ver, hsize, index, stream_id, codec, ctx, cupti_ts, unix_ns, raw_size,
                 stored_size, dropped, records, pcrc, hcrc) = h
                if magic != b"CPTMCHNK" or crc32c(data[off:off + 92]) != hcrc or hsize != 96:
                    self.stats["corrupt_chunks"] += 1
                    self.problems.append("%s: bad chunk header at %d" % (os.path.basename(seg), off))
                    break
                if off + 96 + stored_size > len(data):
                    self.stats["torn_tails"] += 1
                    self.problems.append("%s: torn chunk payload at %d" % (os.path.basename(seg), off))
                    break
                payload = data[off + 96:off + 96 + stored_size]
                off += 96 + stored_size
                if crc32c(payload) != pcrc:
                    self.stats["corrupt_chunks"] += 1
                    self.problems.append("%s: chunk %d payload CRC mismatch" % (os.path.basename(seg), index))
                    continue
                if codec == 1:
                    try:
                        raw = ZSTD.decompress(payload, raw_size)
                    except ValueError as e:
                        self.stats["undecompressable_chunks"] += 1
                        self.problems.append("chunk %d: %s" % (index, e))
                        continue
                elif codec == 0:
                    raw = payload
                else:
                    self.stats["unknown_codec_chunks"] += 1
                    continue
                if len(raw) != raw_size:
                    self.stats["size_mismatch_chunks"] += 1
                self.stats["chunks"] += 1
                self.stats["bytes_raw"] += raw_size
                self.stats["bytes_stored"] += stored_size
                self.stats["dropped"] += dropped
                self.stats["records_announced"] += records
                ch = {"index": index, "stream": stream_id, "ctx": ctx, "cupti_ts": cupti_ts,
                      "unix_ns": unix_ns, "raw": raw_size, "dropped": dropped, "records": records}
                self.chunks.append(ch)
                n = self._walk(raw, len(self.chunks) - 1, cupti_ts, unix_ns)
                if n != records:
                    self.stats["record_count_mismatch_chunks"] += 1

    def _walk(self, raw, ci, cts, uns):
        lay = self.layout
        sizes = {int(k): v for k, v in lay["sizes"].items()}
        off, n = 0, 0
        up = struct.unpack_from
        fmt = {1: "<B", 4: "<I", 8: "<Q"}

        def rd(group, rec_off):
            return {k: up(fmt[s], raw, rec_off + o)[0] for k, (o, s) in lay[group].items()}

        def m(t):
            return ((t - cts + uns) & U64) if t else 0

        while off + 4 <= len(raw):
            kind = up("<I", raw, off)[0]
            size = sizes.get(kind)
            if not size:
                self.stats["unknown_kind_stops"] += 1
                self.problems.append("unknown record kind %d (buffer cut short)" % kind)
                break
            if off + size > len(raw):
                self.stats["truncated_buffers"] += 1
                break
            group = KIND_GROUP.get(kind)
            ev = {"type": KIND_TYPE.get(kind, "kind%d" % kind), "kind": kind, "chunk": ci}
            if group:
                f = rd(group, off)
                ev.update(f)
                if "start" in f:
                    ev["ustart"] = m(f["start"])
                    ev["uend"] = m(f["end"])
                elif "timestamp" in f:
                    ev["ustart"] = ev["uend"] = m(f["timestamp"])
            self.stats["records"] += 1
            self.stats["kind_%s" % ev["type"]] += 1
            self.events.append(ev)
            off += size
            n += 1
        else:
            if off != len(raw):
                self.stats["trailing_bytes"] += len(raw) - off
        return n

    def kernel_name(self, ev):
        return self.strings.get(ev.get("name"))


def find_sessions(root):
    out = []
    for meta in sorted(glob.glob(os.path.join(root, "**", "meta.json"), recursive=True)):
        out.append(os.path.dirname(meta))
    return out


# ---------------------------------------------------------------------------
# decoded traces (cuptimonctl decode) and torch.profiler traces

def load_trace(path):
    """Returns (events, otherData) or (None, error)."""
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rt") as f:
                t = json.load(f)
        else:
            with open(path) as f:
                t = json.load(f)
    except (OSError, ValueError) as e:
        return None, str(e)
    if isinstance(t, list):
        return t, {}
    return t.get("traceEvents", []), t.get("otherData", {}) or {}


def trace_gpu_events(events, base_ns=0):
    """Kernel / memcpy / memset events of a chrome trace, normalised."""
    out = []
    for ev in events:
        if ev.get("ph") != "X":
            continue
        cat = str(ev.get("cat", "")).lower()
        if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            args = ev.get("args", {}) or {}
            ts = float(ev.get("ts", 0))
            dur = float(ev.get("dur", 0))
            out.append({"cat": cat, "name": ev.get("name"), "pid": ev.get("pid"),
                        "tid": ev.get("tid"), "ustart": base_ns + int(round(ts * 1000)),
                        "uend": base_ns + int(round((ts + dur) * 1000)), "args": args})
    return out


def arg(args, *names):
    for n in names:
        if n in args:
            return args[n]
    return None


# ---------------------------------------------------------------------------
# the checks

class Checks:
    def __init__(self):
        self.items = []

    def add(self, name, ok, expected=None, got=None, hard=True, detail=None, skip=False):
        st = "skip" if skip else ("pass" if ok else "fail")
        self.items.append({"name": name, "status": st, "hard": bool(hard),
                           "expected": expected, "got": got, "detail": detail})
        return ok

    def skip(self, name, why, hard=True):
        self.add(name, True, None, None, hard=hard, detail=why, skip=True)


def counter_diff(want, got, top=10):
    keys = set(want) | set(got)
    diffs = [(k, want.get(k, 0), got.get(k, 0)) for k in keys if want.get(k, 0) != got.get(k, 0)]
    diffs.sort(key=lambda d: -abs(d[1] - d[2]))
    return [{"name": k, "expected": a, "got": b} for k, a, b in diffs[:top]]


def match_ratio(a, b):
    ta, tb = sum(a.values()), sum(b.values())
    if max(ta, tb) == 0:
        return 1.0
    common = sum(min(a.get(k, 0), b.get(k, 0)) for k in set(a) | set(b))
    return common / float(max(ta, tb))


class Suite:
    def __init__(self, work, outdir):
        self.work = work
        self.outdir = outdir
        self.c = Checks()
        self.layout, self.layout_src = load_layout()
        self.env = read_env(os.path.join(work, "suite.env"))
        self.dry = self.env.get("dryrun") == "1"
        # CUPTIMON_GPU_STRICT=1: coexistence with torch.profiler is a hard check
        self.strict = self.env.get("strict") == "1"
        self.archives = {}
        self.by_pid = collections.defaultdict(list)
        self.figures = {}
        self.cases = {}
        self.decode_ok = None

    # -- loading ----------------------------------------------------------
    def load_archives(self):
        root = os.path.join(self.work, "out")
        for d in find_sessions(root):
            a = Archive(d, self.layout)
            self.archives[d] = a
            self.by_pid[a.pid].append(a)

    def decoded(self, arch):
        """(events, otherData, summary, rc, err) of cuptimonctl decode for one session."""
        base = os.path.join(self.work, "decode", os.path.basename(arch.dir))
        rc = read_int(base + ".rc")
        err = read_text(base + ".stderr").strip()
        summ = read_json(base + ".summary.json")
        if summ is None:
            summ = read_json(base + ".stdout")
        ev, od = (None, None)
        if rc == 0:
            ev, od = load_trace(base + ".trace.json")
        return ev, od, summ, rc, err

    # -- per-process checks: known-work ----------------------------------
    def check_known(self, case, pname, pdir, shim=True):
        c = self.c
        pre = "%s/%s" % (case, pname)
        rc = read_int(os.path.join(pdir, "rc"))
        c.add(pre + "/exit", rc == 0, 0, rc, detail=read_text(os.path.join(pdir, "stderr"))[-800:] if rc else None)
        rep = read_json(os.path.join(pdir, "report.json"))
        if not c.add(pre + "/report", rep is not None, "report.json", "present" if rep else "missing"):
            return None
        info = {"pid": rep.get("pid"), "rc": rc, "work_ns": rep.get("work_ns"),
                "wall_ns": _wall(pdir)}
        if rep.get("errors"):
            c.add(pre + "/program-errors", False, "", rep["errors"], hard=False)
        sess = self.by_pid.get(rep["pid"], [])
        if not shim:
            c.add(pre + "/no-session-without-shim", len(sess) == 0, 0, len(sess))
            return info
        if not c.add(pre + "/session", len(sess) == 1, 1, len(sess),
                     detail="archive sessions whose meta.json pid is %s" % rep["pid"]):
            return info
        a = sess[0]
        info["archive"] = os.path.basename(a.dir)
        meta = a.meta
        job = meta.get("job", {}) or {}
        penv = read_env(os.path.join(pdir, "proc.env"))
        if penv.get("label"):
            c.add(pre + "/identity", job.get("label") == penv["label"] and
                  (not penv.get("rank") or job.get("rank") == penv["rank"]),
                  {"label": penv.get("label"), "rank": penv.get("rank")},
                  {"label": job.get("label"), "rank": job.get("rank")})
        c.add(pre + "/cupti", int(meta.get("cupti_version", 0)) >= 130000 or self.dry,
              ">= 130000", {"cupti_version": meta.get("cupti_version"),
                            "cupti_path": meta.get("cupti_path")}, hard=False)
        self.check_archive_health(pre, a, pdir)
        kernels = [e for e in a.events if e["type"] == "kernel"]
        # names
        unresolved = [e for e in kernels if a.kernel_name(e) is None]
        c.add(pre + "/kernel-names-resolved", not unresolved, 0, len(unresolved),
              detail="kernel records whose name pointer is not in strings.bin")
        want = collections.Counter({k["demangled"]: k["total"] for k in rep["kernels"] if k["total"]})
        got = collections.Counter(DEMANGLE(a.kernel_name(e) or "?") for e in kernels)
        c.add(pre + "/kernels-exactly-once", want == got, sum(want.values()), sum(got.values()),
              detail={"by_name_differences": counter_diff(want, got),
                      "demangler": DEMANGLE.how} if want != got else None)
        # the raw names CUPTI reported, for every kernel whose mangled name the
        # program knows (literally, or from cudaFuncGetName)
        raw = collections.Counter(a.kernel_name(e) or "?" for e in kernels)
        mang_want = {k["mangled"]: k["total"] for k in rep["kernels"] if k["total"] and k.get("mangled")}
        mang_got = {m: raw.get(m, 0) for m in mang_want}
        unknown = [k["demangled"] for k in rep["kernels"] if k["total"] and not k.get("mangled")]
        c.add(pre + "/kernel-mangled-names", mang_want == mang_got and not unknown, mang_want, mang_got,
              detail={"raw_names_in_archive": sorted(raw), "no_mangled_name_known_for": unknown}
              if mang_want != mang_got or unknown else None)
        keys = collections.Counter((e["correlationId"], e["graphNodeId"]) for e in kernels)
        dups = [k for k, n in keys.items() if n > 1]
        c.add(pre + "/kernels-unique", not dups, 0, len(dups),
              detail="(correlation id, graph node id) seen twice: %s" % dups[:5] if dups else None)
        gpu = [e for e in a.events if e["type"] in GPU_TYPES]
        dev = rep.get("device", 0)
        baddev = [e for e in gpu if e.get("deviceId") != dev]
        c.add(pre + "/device", not baddev, dev, sorted(set(e.get("deviceId") for e in gpu)))
        # graph
        g = rep.get("graph", {}) or {}
        R, G = g.get("replays", 0), g.get("kernels_per_replay", 0)
        gk = [e for e in kernels if e["graphNodeId"]]
        nodes = collections.Counter(e["graphNodeId"] for e in gk)
        gids = set(e["graphId"] for e in gk)
        if R and G:
            c.add(pre + "/graph-kernels", len(gk) == R * G and len(nodes) == G and
                  all(n == R for n in nodes.values()) and len(gids) == 1 and 0 not in gids,
                  {"kernels": R * G, "distinct_nodes": G, "per_node": R, "graph_ids": 1},
                  {"kernels": len(gk), "distinct_nodes": len(nodes),
                   "per_node": sorted(set(nodes.values())), "graph_ids": sorted(gids)[:5]})
            gnames = collections.Counter(DEMANGLE(a.kernel_name(e) or "?") for e in gk)
            gwant = collections.Counter({k["demangled"]: k["graph_total"] for k in rep["kernels"]
                                         if k.get("graph_total")})
            c.add(pre + "/graph-kernel-names", gnames == gwant, dict(gwant), dict(gnames))
        ng = len(kernels) - len(gk)
        launched = sum(k["launches"] for k in rep["kernels"])
        c.add(pre + "/graph-node-ids-only-on-graph-kernels", ng == launched and len(gk) == R * G,
              {"without_node_id": launched, "with_node_id": R * G},
              {"without_node_id": ng, "with_node_id": len(gk)})
        # memcpy / memset
        mc_want = {k: (v["count"], v["bytes"]) for k, v in rep.get("memcpy", {}).items() if v["count"]}
        mc_got = collections.defaultdict(lambda: [0, 0])
        for e in a.events:
            if e["type"] in ("memcpy", "p2p"):
                k = COPY_KIND.get(e["copyKind"], str(e["copyKind"]))
                mc_got[k][0] += 1
                mc_got[k][1] += e["bytes"]
        mc_got = {k: tuple(v) for k, v in mc_got.items()}
        c.add(pre + "/memcpy", mc_want == mc_got, {k: list(v) for k, v in mc_want.items()},
              {k: list(v) for k, v in mc_got.items()}, detail="(count, bytes) by copy kind")
        ms = rep.get("memset", {})
        ms_got = [e for e in a.events if e["type"] == "memset"]
        c.add(pre + "/memset", (ms.get("count", 0), ms.get("bytes", 0)) ==
              (len(ms_got), sum(e["bytes"] for e in ms_got)),
              [ms.get("count", 0), ms.get("bytes", 0)], [len(ms_got), sum(e["bytes"] for e in ms_got)],
              detail="(count, bytes)")
        # streams: each stream the program named must be one CUPTI stream
        # with exactly its kernels (by name), copies (by kind) and memsets
        # (so the operations per stream add up as well).  CUPTI numbers
        # streams its own way (on driver 580 its streamId is
        # cudaStreamGetId's minus one), so the check is that such a
        # one-to-one map exists; the map is in the detail.
        want_by = collections.defaultdict(collections.Counter)
        for k in rep["kernels"]:
            for s, n in k.get("by_stream", {}).items():
                if n:
                    want_by[s][("kernel", k["demangled"])] += n
        for kind, v in rep.get("memcpy", {}).items():
            for s, n in v.get("by_stream", {}).items():
                if n:
                    want_by[s][("memcpy", kind)] += n
        for s, n in ms.get("by_stream", {}).items():
            if n:
                want_by[s][("memset",)] += n
        got_by = collections.defaultdict(collections.Counter)
        for e in gpu:
            if e["type"] == "kernel":
                key = ("kernel", DEMANGLE(a.kernel_name(e) or "?"))
            elif e["type"] in ("memcpy", "p2p"):
                key = ("memcpy", COPY_KIND.get(e["copyKind"], str(e["copyKind"])))
            else:
                key = (e["type"],)
            got_by[e.get("streamId")][key] += 1
        sig = lambda ctr: tuple(sorted(ctr.items()))
        want_sigs = sorted(sig(v) for v in want_by.values())
        got_sigs = sorted(sig(v) for v in got_by.values())
        ids = {x["name"]: x["id"] for x in rep.get("streams", [])} if rep.get("stream_ids_known") else {}
        cupti_of = {}
        for s, v in want_by.items():
            m = [i for i, g in got_by.items() if sig(g) == sig(v)]
            cupti_of["%s (cudaStreamGetId %s)" % (s, ids.get(s, "?"))] = m[0] if len(m) == 1 else m
        c.add(pre + "/stream-attribution", want_sigs == got_sigs, len(want_sigs), len(got_sigs),
              detail={"cupti_stream_of": cupti_of} if want_sigs == got_sigs else
              {"want": [dict((" ".join(k), n) for k, n in x) for x in want_sigs][:4],
               "got": [dict((" ".join(k), n) for k, n in x) for x in got_sigs][:4]})
        # time
        t0, t1 = rep["start_ns"], rep["end_ns"]
        bad_order = [e for e in gpu if e["end"] < e["start"] or not e["start"]]
        c.add(pre + "/timestamps-sane", not bad_order, 0, len(bad_order),
              detail="GPU records with end < start or no start")
        if gpu:
            lo = min(e["ustart"] for e in gpu)
            hi = max(e["uend"] for e in gpu)
            outside = [e for e in gpu if e["ustart"] < t0 - WINDOW_SLACK_NS or e["uend"] > t1 + WINDOW_SLACK_NS]
            c.add(pre + "/timestamps-in-window", not outside,
                  "[%d, %d] +- %d ns" % (t0, t1, WINDOW_SLACK_NS),
                  {"first_start_minus_window_start_ns": lo - t0, "window_end_minus_last_end_ns": t1 - hi,
                   "outside": len(outside)})
        self.check_stream_order(pre, gpu)
        # the project's decoder
        self.check_decoded(pre, a, rep, want, t0, t1)
        info["kernels_archived"] = len(kernels)
        return info

    def check_archive_health(self, pre, a, pdir):
        c = self.c
        st = a.stats
        bad = {k: st[k] for k in ("corrupt_chunks", "torn_tails", "corrupt_strings", "corrupt_segments",
                                  "unknown_kind_stops", "truncated_buffers", "undecompressable_chunks",
                                  "unknown_codec_chunks", "size_mismatch_chunks",
                                  "record_count_mismatch_chunks") if st[k]}
        c.add(pre + "/archive-integrity", not bad, {}, bad, detail=a.problems[:5] or None)
        final = a.meta.get("final", {}) or {}
        counters = a.meta.get("counters", {}) or {}
        live = self.status_session(pdir, a.pid)
        got = {"chunk_dropped": st["dropped"], "final.dropped_records": final.get("dropped_records"),
               "final.write_errors": final.get("write_errors"),
               "status.dropped_records": live.get("dropped_records") if live else None,
               "status.requests_declined": live.get("requests_declined") if live else None,
               "hello.requests_declined": counters.get("requests_declined")}
        ok = all(not v for v in got.values())
        c.add(pre + "/no-drops", ok, "all 0", got)
        c.add(pre + "/session-ended-cleanly", "final" in a.meta and a.meta.get("disconnected_unix_ns"),
              "meta.json final + disconnected_unix_ns", sorted(k for k in ("final", "disconnected_unix_ns")
                                                               if k in a.meta))
        rs = a.meta.get("record_sizes", {}) or {}
        mism = {k: (v, self.layout["sizes"].get(k)) for k, v in rs.items()
                if self.layout["sizes"].get(k) not in (None, v)}
        c.add(pre + "/record-sizes", not mism, "shim sizes == header sizes", mism or "equal", hard=False)

    def status_session(self, pdir, pid):
        """The session of pid in the case's status taken while it ran, if any."""
        case_dir = os.path.dirname(pdir)
        for fn in ("status-during.json", "status-mid.json"):
            st = read_json(os.path.join(case_dir, fn))
            if st:
                for s in st.get("sessions", []):
                    if s.get("pid") == pid:
                        return s
        return {}

    def check_stream_order(self, pre, gpu, hard=True):
        by = collections.defaultdict(list)
        for e in gpu:
            by[(e.get("deviceId"), e.get("contextId"), e.get("streamId"))].append(e)
        worst, corr_bad, n_over = 0, 0, 0
        for evs in by.values():
            evs.sort(key=lambda e: (e["start"], e["end"]))
            for p, q in zip(evs, evs[1:]):
                over = p["end"] - q["start"]
                if over > OVERLAP_TOL_NS:
                    n_over += 1
                worst = max(worst, over)
                if q["correlationId"] < p["correlationId"]:
                    corr_bad += 1
        self.c.add(pre + "/stream-order", n_over == 0 and corr_bad == 0,
                   {"overlaps_over_%dns" % OVERLAP_TOL_NS: 0, "correlation_out_of_order": 0},
                   {"overlaps_over_%dns" % OVERLAP_TOL_NS: n_over, "worst_overlap_ns": worst,
                    "correlation_out_of_order": corr_bad, "streams": len(by)}, hard=hard)

    def check_decoded(self, pre, a, rep, want, t0, t1):
        c = self.c
        ev, od, summ, rc, err = self.decoded(a)
        if rc is None:
            c.skip(pre + "/decode", "run.sh did not decode this session")
            return
        if rc == 2 and "not built" in err:
            c.skip(pre + "/decode", "cuptimonctl decode is not built into this binary: " + err[:200])
            return
        if not c.add(pre + "/decode", rc == 0 and ev is not None, 0, rc, detail=err[-600:] or None):
            return
        base = int(od.get("base_unix_ns", 0) or 0)
        g = trace_gpu_events(ev, base)
        tk = [e for e in g if e["cat"] == "kernel"]
        names = collections.Counter(e["name"] for e in tk)
        c.add(pre + "/trace-kernels", names == want, sum(want.values()), sum(names.values()),
              detail={"by_name_differences": counter_diff(want, names)} if names != want else None)
        cats = collections.Counter(e["cat"] for e in g)
        mc = sum(v["count"] for v in rep.get("memcpy", {}).values())
        ms = rep.get("memset", {}).get("count", 0)
        c.add(pre + "/trace-memcpy-memset", (cats["gpu_memcpy"], cats["gpu_memset"]) == (mc, ms),
              [mc, ms], [cats["gpu_memcpy"], cats["gpu_memset"]])
        R = (rep.get("graph") or {}).get("replays", 0)
        G = (rep.get("graph") or {}).get("kernels_per_replay", 0)
        tg = [e for e in tk if arg(e["args"], "graph node id", "graph_node_id")]
        c.add(pre + "/trace-graph-node-ids", len(tg) == R * G and
              len(set(arg(e["args"], "graph node id", "graph_node_id") for e in tg)) == (G if R else 0),
              {"kernels": R * G, "distinct_nodes": G if R else 0},
              {"kernels": len(tg), "distinct_nodes": len(set(arg(e["args"], "graph node id") for e in tg))})
        devs = set(arg(e["args"], "device") for e in g)
        c.add(pre + "/trace-device", devs <= {rep.get("device", 0)}, [rep.get("device", 0)], sorted(devs, key=str))
        if g:
            outside = [e for e in g if e["ustart"] < t0 - WINDOW_SLACK_NS or e["uend"] > t1 + WINDOW_SLACK_NS]
            c.add(pre + "/trace-timestamps-in-window", not outside, "[start_ns, end_ns] +- 1 ms",
                  {"outside": len(outside), "first_ts_minus_start_ns": min(e["ustart"] for e in g) - t0,
                   "end_minus_last_ns": t1 - max(e["uend"] for e in g)})
        if summ:
            k = summ.get("kernels", {}) or {}
            c.add(pre + "/summary", k.get("count") == sum(want.values()) and
                  not summ.get("dropped_records"),
                  {"kernels.count": sum(want.values()), "dropped_records": 0},
                  {"kernels.count": k.get("count"), "dropped_records": summ.get("dropped_records")})

    # -- extra kinds (runtime, markers, external correlation) ------------
    def check_extra_kinds(self, case, pname, pdir):
        rep = read_json(os.path.join(pdir, "report.json"))
        if not rep:
            return
        sess = self.by_pid.get(rep["pid"], [])
        if len(sess) != 1:
            return
        a = sess[0]
        c = self.c
        pre = "%s/%s" % (case, pname)
        rt = [e for e in a.events if e["type"] in ("runtime", "driver")]
        kern = [e for e in a.events if e["type"] == "kernel"]
        rt_corr = set(e["correlationId"] for e in rt)
        uncorr = [e for e in kern if e["correlationId"] not in rt_corr]
        c.add(pre + "/kernels-have-launch-api-record", bool(rt) and not uncorr, 0,
              {"api_records": len(rt), "kernels_without_api_record": len(uncorr)}, hard=False)
        mk = [e for e in a.events if e["type"] == "marker"]
        names = collections.Counter(a.strings.get(e.get("name")) for e in mk if e.get("name"))
        ranges = (rep.get("nvtx") or {}).get("ranges", 0)
        if ranges:
            c.add(pre + "/nvtx-markers", sum(1 for e in mk if e.get("name")) >= ranges,
                  ">= %d named marker records" % ranges,
                  {"marker_records": len(mk), "names": dict(names)}, hard=False,
                  detail="needs NVTX_INJECTION64_PATH pointing at libcupti (run.sh sets it when it finds one)")
        else:
            c.skip(pre + "/nvtx-markers", "the program pushed no NVTX range", hard=False)
        ext = [e for e in a.events if e["type"] == "ext"]
        c.add(pre + "/annotations", True, None,
              {"api": (rep.get("annotations") or {}).get("via"),
               "pushed": (rep.get("annotations") or {}).get("pushed"),
               "external_correlation_records": len(ext)}, hard=False,
              detail="cuptimon_push/pop_annotation are no-ops today; informational")

    # -- case-level checks ------------------------------------------------
    def check_case_control(self, case, cdir, expect_live):
        c = self.c
        fl = read_json(os.path.join(cdir, "flush.json"))
        if expect_live:
            c.add(case + "/flush-forced", fl is not None and read_int(os.path.join(cdir, "flush.rc")) == 0
                  and not fl.get("late"), {"rc": 0, "late": []},
                  {"rc": read_int(os.path.join(cdir, "flush.rc")),
                   "late": fl.get("late") if fl else None, "completed": fl.get("completed") if fl else None,
                   "sessions": fl.get("sessions") if fl else None,
                   "elapsed_ms": fl.get("elapsed_ms") if fl else None})
            st = read_json(os.path.join(cdir, "status-during.json"))
            live = [s for s in (st or {}).get("sessions", []) if s.get("connected")]
            c.add(case + "/status-during", st is not None and len(live) >= expect_live,
                  ">= %d connected session(s)" % expect_live,
                  [{"pid": s.get("pid"), "label": s.get("label"), "records": s.get("records"),
                    "dropped_records": s.get("dropped_records")} for s in live])

    def known_case(self, case, cdir, shim=True, extra=False, expect_live=0):
        infos = []
        for pdir in sorted(glob.glob(os.path.join(cdir, "p*"))):
            if not os.path.isdir(pdir):
                continue
            info = self.check_known(case, os.path.basename(pdir), pdir, shim=shim)
            if extra:
                self.check_extra_kinds(case, os.path.basename(pdir), pdir)
            if info:
                infos.append(info)
        if shim:
            self.check_case_control(case, cdir, expect_live)
        if expect_live > 1:
            pids = [i["pid"] for i in infos]
            arcs = [i.get("archive") for i in infos]
            self.c.add(case + "/one-session-each", len(set(arcs)) == len(pids) == expect_live and None not in arcs,
                       expect_live, len(set(a for a in arcs if a)))
        return infos

    def overhead_case(self, case, cdir):
        a_runs, b_runs = [], []
        for pdir in sorted(glob.glob(os.path.join(cdir, "p*"))):
            penv = read_env(os.path.join(pdir, "proc.env"))
            shim = penv.get("shim") == "1"
            info = self.check_known(case, os.path.basename(pdir), pdir, shim=shim)
            if info and info.get("rc") == 0 and info.get("wall_ns"):
                (b_runs if shim else a_runs).append(info)
        fig = {}
        if a_runs and b_runs:
            for key in ("wall_ns", "work_ns"):
                ma = statistics.median(i[key] for i in a_runs)
                mb = statistics.median(i[key] for i in b_runs)
                fig[key] = {"no_shim_median": ma, "shim_median": mb,
                            "overhead_ns": mb - ma, "overhead_pct": round(100.0 * (mb - ma) / ma, 2) if ma else None,
                            "no_shim_all": [i[key] for i in a_runs], "shim_all": [i[key] for i in b_runs]}
            fig["runs_each"] = [len(a_runs), len(b_runs)]
            opts = read_env(os.path.join(cdir, "case.env")).get("args", "")
            fig["workload"] = opts
        self.figures["overhead"] = fig
        self.c.add(case + "/overhead-measured", len(a_runs) >= 5 and len(b_runs) >= 5,
                   ">= 5 runs each", [len(a_runs), len(b_runs)], hard=False,
                   detail={k: {kk: vv for kk, vv in v.items() if not kk.endswith("_all")}
                           for k, v in fig.items() if isinstance(v, dict)})

    # -- torch -------------------------------------------------------------
    def torch_proc(self, case, cdir):
        pdirs = [p for p in sorted(glob.glob(os.path.join(cdir, "p*"))) if os.path.isdir(p)]
        return pdirs[0] if pdirs else None

    def torch_trace_kernels(self, path):
        ev, od = load_trace(path)
        if ev is None:
            return None, od
        g = trace_gpu_events(ev)
        return collections.Counter(e["name"] for e in g if e["cat"] == "kernel"), \
            collections.Counter(e["cat"] for e in g)

    def torch_cases(self, cases):
        c = self.c
        ref = None  # case 5: torch.profiler without the shim
        ref_case = cases.get("torch-profile-noshim")
        if ref_case:
            case, cdir = ref_case
            pdir = self.torch_proc(case, cdir)
            rc = read_int(os.path.join(pdir, "rc")) if pdir else None
            rep = read_json(os.path.join(pdir, "report.json")) if pdir else None
            c.add(case + "/exit", rc == 0, 0, rc, detail=read_text(os.path.join(pdir, "stderr"))[-800:] if rc else None)
            k, cats = self.torch_trace_kernels(os.path.join(pdir, "torch-trace.json")) if pdir else (None, None)
            c.add(case + "/torch-trace", bool(k), "a torch.profiler trace with kernels",
                  {"kernels": sum(k.values()) if k else 0, "distinct": len(k) if k else 0,
                   "categories": dict(cats) if isinstance(cats, collections.Counter) else cats})
            if rep:
                c.add(case + "/no-session-without-shim", not self.by_pid.get(rep.get("pid")), 0,
                      len(self.by_pid.get(rep.get("pid"), [])))
                self.figures["torch"] = {"torch_version": rep.get("torch_version"),
                                         "cuda": rep.get("cuda_version"), "device": rep.get("device_name"),
                                         "steps": rep.get("steps")}
            ref = k or None
            if pdir and rep:
                self.torch_ref = (rep, os.path.join(pdir, "torch-trace.json"))
        alone = cases.get("torch-shim")
        if alone:
            case, cdir = alone
            self.torch_under_shim(case, cdir, ref, profiled=False)
        prof = cases.get("torch-profile-shim")
        if prof:
            case, cdir = prof
            self.torch_under_shim(case, cdir, ref, profiled=True)

    def torch_profiled(self, case, pdir, rep, stderr, ref, fig):
        """torch.profiler under the shim: what the profiler's own trace and
        cuptimon's status say (no archive needed)."""
        c = self.c
        k, cats = self.torch_trace_kernels(os.path.join(pdir, "torch-trace.json"))
        c.add(case + "/torch-trace", bool(k), "a torch.profiler trace with kernels",
              {"kernels": sum(k.values()) if k else 0, "error": cats if k is None else None})
        unknown = stderr.count("unknown buffer")
        fig["kineto_unknown_buffer_messages"] = unknown
        if ref:
            r = match_ratio(ref, k or collections.Counter())
            fig["torch_trace_vs_reference_ratio"] = round(r, 4)
        self.torch_vs_reference(case, rep, os.path.join(pdir, "torch-trace.json"), fig)
        live = self.status_session(pdir, rep["pid"])
        said = {k2: v for k2, v in (live or {}).items() if k2 in ("cupti", "foreign_buffers")}
        c.add(case + "/status-cupti-shared",
              bool(live) and live.get("cupti") == "ours", "status says the shim kept CUPTI (shared "
              "with torch.profiler, not taken)", said or "no live session in status", hard=self.strict,
              detail="the shim shares CUPTI when preloaded and, through its import routing, when "
                     "injected; 'taken by another tool' would mean torch.profiler reached libcupti "
                     "around it")

    def torch_vs_reference(self, case, rep, path, fig):
        """torch.profiler's trace under the shim against case 06's (the same
        steps, no shim): the same kernels, copies and memsets per name, and
        per step (by the steps' CLOCK_REALTIME marks in each report), every
        event inside a step.  Hard: cuptimon must not change what another
        tool records (issue 17)."""
        c = self.c
        if not getattr(self, "torch_ref", None):
            c.add(case + "/torch-trace-complete", False, "the reference trace of case 06 (no shim)",
                  "case 06 did not run or left no report")
            return
        cc = _coexist_check()
        rrep, rpath = self.torch_ref
        try:
            mine, theirs = cc.load_gpu_events(path), cc.load_gpu_events(rpath)
        except (OSError, ValueError, KeyError) as e:
            c.add(case + "/torch-trace-complete", False, "both torch.profiler traces readable", str(e))
            return
        a = collections.Counter((e["kind"], e["name"]) for e in theirs)
        b = collections.Counter((e["kind"], e["name"]) for e in mine)
        c.add(case + "/torch-trace-complete", a == b and sum(a.values()) > 0,
              "the reference trace's kernels, copies and memsets per name (case 06, no shim)",
              {"with_shim": dict(collections.Counter(e["kind"] for e in mine)),
               "reference": dict(collections.Counter(e["kind"] for e in theirs))},
              detail={"differences": counter_diff(a, b)})
        marks, rmarks = rep.get("step_marks"), rrep.get("step_marks")
        if not marks and not rmarks and self.dry:
            c.skip(case + "/torch-trace-per-step", "dry run: no step marks", hard=False)
            return
        if not marks or not rmarks or len(marks) != len(rmarks):
            c.add(case + "/torch-trace-per-step", False, "both reports with the same number of step marks",
                  [len(marks or []), len(rmarks or [])])
            return
        counts, outside = [], []
        for evs, m in ((theirs, rmarks), (mine, marks)):
            st = cc.Steps(m, STEP_SLACK_NS)
            cnt, out = collections.Counter(), 0
            for e in evs:
                i, why = st.place(e["start"], e["end"])
                cnt[(i, e["kind"], e["name"])] += 1
                out += why != "ok"
            counts.append(cnt)
            outside.append(out)
        diff = counter_diff(counts[0], counts[1])
        fig["torch_trace_events_outside_steps"] = {"reference": outside[0], "with_shim": outside[1]}
        c.add(case + "/torch-trace-per-step", counts[0] == counts[1] and outside == [0, 0],
              "per step, kind and name the same as case 06's trace, every event inside a step "
              "(+-%d ns of its CLOCK_REALTIME marks)" % STEP_SLACK_NS,
              {"outside_steps": {"reference": outside[0], "with_shim": outside[1]},
               "differences": len(diff)},
              detail={"differences (step, kind, name)": [
                  {"step": d["name"][0], "kind": d["name"][1], "name": d["name"][2],
                   "reference": d["expected"], "with_shim": d["got"]} for d in diff]})

    def torch_under_shim(self, case, cdir, ref, profiled):
        c = self.c
        pdir = self.torch_proc(case, cdir)
        if not pdir:
            c.add(case + "/ran", False, "a process", None)
            return
        rc = read_int(os.path.join(pdir, "rc"))
        stderr = read_text(os.path.join(pdir, "stderr"))
        c.add(case + "/exit", rc == 0, 0, rc, detail=stderr[-1500:] if rc else None)
        rep = read_json(os.path.join(pdir, "report.json"))
        if not c.add(case + "/report", rep is not None, "report.json", "present" if rep else "missing"):
            return
        c.add(case + "/shim-loaded", bool(rep.get("cuptimon_loaded")), True, rep.get("cuptimon_loaded"),
              detail={"libcupti_loaded": rep.get("libcupti_loaded")})
        cupti = rep.get("libcupti_loaded") or []
        real = sorted(set(os.path.realpath(x) for x in cupti))
        c.add(case + "/one-libcupti", len(real) == 1, "one libcupti mapped (torch's own)", cupti,
              detail="DESIGN: the shim shares the libcupti already in the process; a second copy "
                     "collides with other CUPTI users")
        fig = {"status_during": self.status_session(pdir, rep["pid"]) or None, "libcupti": cupti}
        self.figures[case] = fig
        if profiled:
            self.torch_profiled(case, pdir, rep, stderr, ref, fig)
        self.check_case_control(case, cdir, 1)
        sess = self.by_pid.get(rep["pid"], [])
        if not c.add(case + "/session", len(sess) == 1, 1, len(sess)):
            return
        a = sess[0]
        self.check_archive_health(case, a, pdir)
        kern = [e for e in a.events if e["type"] == "kernel"]
        unresolved = [e for e in kern if a.kernel_name(e) is None]
        c.add(case + "/kernel-names-resolved", not unresolved, 0, len(unresolved))
        t0, t1 = rep.get("steps_start_ns", 0), rep.get("steps_end_ns", 0)
        inwin = [e for e in kern if t0 <= e["ustart"] <= t1]
        win = collections.Counter(DEMANGLE(a.kernel_name(e) or "?") for e in inwin)
        fig.update({"kernels_archived": len(kern), "kernels_in_steps": len(inwin),
                    "kernels_before_steps": sum(1 for e in kern if e["ustart"] < t0),
                    "kernels_after_steps": sum(1 for e in kern if e["ustart"] > t1)})
        c.add(case + "/kernels-archived", len(kern) > 0 or profiled, "> 0", len(kern),
              hard=not profiled)
        gpu = [e for e in a.events if e["type"] in GPU_TYPES]
        if not profiled:
            # soft: PyTorch launches onto one stream from several threads
            self.check_stream_order(case, gpu, hard=False)
            ev, od, summ, drc, err = self.decoded(a)
            if drc == 0 and ev is not None:
                tk = [e for e in trace_gpu_events(ev, int((od or {}).get("base_unix_ns", 0) or 0))
                      if e["cat"] == "kernel"]
                c.add(case + "/trace-kernels", len(tk) == len(kern), len(kern), len(tk),
                      detail="kernels in cuptimonctl decode's trace vs records in the archive")
                dwin = collections.Counter(e["name"] for e in tk if t0 <= e["ustart"] <= t1)
                if ref:
                    fig["decoder_names_vs_torch_ratio"] = round(match_ratio(ref, dwin), 4)
            elif drc is not None:
                c.add(case + "/decode", drc == 0, 0, drc, detail=err[-400:])
            if ref:
                r = match_ratio(ref, win)
                fig["match_ratio_vs_torch_profiler"] = round(r, 4)
                fig["top_differences"] = counter_diff(ref, win)
                c.add(case + "/kernels-vs-torch-profiler", r >= TORCH_RATIO_OK,
                      ">= %.2f of torch.profiler's kernels (case torch-profile-noshim)" % TORCH_RATIO_OK,
                      {"ratio": round(r, 4), "cuptimon_steps": sum(win.values()), "torch_profiler": sum(ref.values())},
                      hard=False, detail=counter_diff(ref, win))
            else:
                c.skip(case + "/kernels-vs-torch-profiler", "no reference torch.profiler trace", hard=False)
        else:
            fig["cuptimon_kernels_in_profiled_steps"] = len(inwin)
            fig["cuptimon_kernels_in_profiled_steps_by_name"] = dict(win.most_common(10))

    # -- global -------------------------------------------------------------
    def check_daemon(self):
        c = self.c
        rc = read_int(os.path.join(self.work, "daemon.rc"))
        c.add("daemon/started", self.env.get("daemon_started") == "1", 1, self.env.get("daemon_started"))
        c.add("daemon/stopped-cleanly", rc == 0, 0, rc,
              detail="cuptimond's exit status after SIGTERM (137 = had to be killed)")
        log = read_text(os.path.join(self.work, "daemon.log"))
        errs = [l for l in log.splitlines() if " err " in l or " crit " in l or "warning" in l]
        c.add("daemon/log-clean", not errs, "no err/warning lines", len(errs), hard=False,
              detail=errs[:10] or None)
        dec = read_env(os.path.join(self.work, "decode", "decode.env"))
        self.decode_ok = dec.get("available") == "1"
        c.add("decode/available", self.decode_ok, True, dec.get("why") or dec.get("available") or "not run",
              hard=False)
        if self.decode_ok:
            c.add("decode/documented-argument-order", dec.get("argorder_failed") != "1",
                  "cuptimonctl decode ARCHIVE_DIR -o FILE --summary works",
                  dec.get("argorder_error") or "works", hard=False,
                  detail="run.sh fell back to options before ARCHIVE_DIR" if dec.get("argorder_failed") else None)

    def run(self):
        self.load_archives()
        self.check_daemon()
        cases = {}
        for cdir in sorted(glob.glob(os.path.join(self.work, "cases", "*"))):
            cenv = read_env(os.path.join(cdir, "case.env"))
            name = os.path.basename(cdir)
            cases[cenv.get("kind", name)] = (name, cdir)
            self.cases[name] = cenv
        for kind, (name, cdir) in sorted(cases.items(), key=lambda kv: kv[1][0]):
            cenv = self.cases[name]
            if cenv.get("skipped"):
                if cenv.get("skip_fail") == "1":  # e.g. out of time: the suite is incomplete
                    self.c.add(name + "/ran", False, "the case ran", "not run", detail=cenv["skipped"])
                elif cenv.get("skip_warn") == "1":  # e.g. no torch on this machine
                    self.c.add(name + "/ran", False, "the case ran", "not run", hard=False,
                               detail=cenv["skipped"])
                else:
                    self.c.skip(name, cenv["skipped"])
                continue
            if kind == "known-alone":
                self.known_case(name, cdir, expect_live=1)
            elif kind == "known-extra-kinds":
                self.known_case(name, cdir, extra=True, expect_live=1)
            elif kind == "known-4":
                self.known_case(name, cdir, expect_live=int(cenv.get("procs", 4)))
            elif kind == "overhead":
                self.overhead_case(name, cdir)
        self.torch_cases({k: v for k, v in cases.items() if k.startswith("torch") and
                          not self.cases[v[0]].get("skipped")})
        # Trace windows are proven by window-case.sh (every kernel once, linked
        # to its API call, demangled names) and coexist-case.sh (a window of
        # the torch loop against torch.profiler); this suite's cases run
        # without windows, so it records that rather than checking twice.
        self.c.skip("windows/all", "trace windows are checked by window-case.sh and "
                    "coexist-case.sh, not by this suite", hard=False)
        for name, cdir in ((n, os.path.join(self.work, "cases", n)) for n in self.cases):
            for fn in ("flush.json", "status-during.json", "status-after.json"):
                v = read_json(os.path.join(cdir, fn))
                if v is not None:
                    self.cases[name][fn] = v
        # every archived session belongs to a process the suite started
        known = set()
        for pdir in glob.glob(os.path.join(self.work, "cases", "*", "p*")):
            rep = read_json(os.path.join(pdir, "report.json"))
            if rep:
                known.add(rep.get("pid"))
        # (a node's GPU-metrics archive, gpuN, belongs to no process: no pid)
        strays = [os.path.basename(a.dir) for a in self.archives.values()
                  if a.pid is not None and a.pid not in known]
        self.c.add("archive/no-stray-sessions", not strays, [], strays, hard=False,
                   detail="sessions of processes without a report (e.g. one that crashed before writing it)")
        return self.write()

    def write(self):
        items = self.c.items
        hard_fail = [i for i in items if i["hard"] and i["status"] == "fail"]
        soft_fail = [i for i in items if not i["hard"] and i["status"] == "fail"]
        passed = [i for i in items if i["status"] == "pass"]
        skipped = [i for i in items if i["status"] == "skip"]
        envinfo = {
            "dry_run": self.dry,
            "suite_env": self.env,
            "nvidia_smi_L": read_text(os.path.join(self.work, "env", "nvidia-smi-L.txt")).strip(),
            "driver": read_text(os.path.join(self.work, "env", "driver.txt")).strip(),
            "uname": read_text(os.path.join(self.work, "env", "uname.txt")).strip(),
            "python": sys.version.split()[0],
            "layout": self.layout_src,
            "demangler": DEMANGLE.how,
            "zstd": "ctypes libzstd" if ZSTD.lib is not None else ("compression.zstd" if getattr(ZSTD, "mod", None) else "none"),
        }
        rep = {"suite": "cuptimon-gpu", "generated_unix": time.time(), "environment": envinfo,
               "result": "pass" if not hard_fail else "fail",
               "counts": {"passed": len(passed), "hard_failed": len(hard_fail),
                          "soft_failed": len(soft_fail), "skipped": len(skipped)},
               "figures": self.figures, "cases": self.cases, "checks": items,
               "archives": {os.path.basename(d): {"pid": a.pid, "label": (a.meta.get("job") or {}).get("label"),
                                                  "stats": dict(a.stats),
                                                  "kinds": a.meta.get("kinds")}
                            for d, a in self.archives.items()}}
        os.makedirs(self.outdir, exist_ok=True)
        with open(os.path.join(self.outdir, "gpu-report.json"), "w") as f:
            json.dump(rep, f, indent=1, default=str)
        lines = []
        lines.append("cuptimon GPU suite: %s%s" % ("PASS" if not hard_fail else "FAIL",
                                                  " (DRY RUN: libcupti test double, no GPU)" if self.dry else ""))
        for k in ("nvidia_smi_L", "driver", "uname", "python", "layout", "demangler", "zstd"):
            if envinfo.get(k):
                lines.append("  %-13s %s" % (k + ":", envinfo[k].replace("\n", "\n" + " " * 16)))
        lines.append("")
        if self.figures:
            lines.append("Figures:")
            for k, v in self.figures.items():
                v = _trim(v)
                lines.append("  %s: %s" % (k, json.dumps(v, default=str, sort_keys=True)[:2000]))
            lines.append("")
        lines.append("Checks (FAIL = hard failure, WARN = soft failure, SKIP = not run):")
        for i in items:
            tag = {"pass": "PASS", "skip": "SKIP"}.get(i["status"], "FAIL" if i["hard"] else "WARN")
            s = "  %s %s" % (tag, i["name"])
            if i["status"] != "pass" or i["name"].endswith(("overhead-measured", "kernels-vs-torch-profiler")):
                s += ": expected %s, got %s" % (_short(i["expected"]), _short(i["got"]))
                if i.get("detail"):
                    s += "\n       " + _short(i["detail"], 1500)
            lines.append(s)
        lines.append("")
        lines.append("%d passed, %d failed, %d skipped (%d soft failures among the failed)" % (
            len(passed), len(hard_fail) + len(soft_fail), len(skipped), len(soft_fail)))
        with open(os.path.join(self.outdir, "gpu-report.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        return 0 if not hard_fail else 1


def _trim(v):
    """Figures for the text report: without the bulky members (kept in the JSON)."""
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if k.endswith("_all"):
                continue
            if k == "status_during" and isinstance(x, dict):
                x = {kk: x.get(kk) for kk in ("records", "dropped_records", "foreign_buffers",
                                              "requests_declined", "lost_buffers") if kk in x}
            out[k] = _trim(x)
        return out
    return v


def _short(v, n=400):
    s = v if isinstance(v, str) else json.dumps(v, default=str, sort_keys=True)
    return s if len(s) <= n else s[:n] + "..."


def _wall(pdir):
    a = read_int(os.path.join(pdir, "wall_start_ns"))
    b = read_int(os.path.join(pdir, "wall_end_ns"))
    return b - a if a and b else None


# ---------------------------------------------------------------------------
# dry-run adapter: cuptimon-workload report -> known-work / torch-loop report

ANON_STANDIN = "_ZN12_GLOBAL__N_16squareEPfi"
# known-work --list-kernels, for dry runs on a machine without nvcc.
FALLBACK_TABLE = {"kernels": [
    {"index": 0, "mangled": "_Z5scaleILi2EEvPfi", "demangled": "void scale<2>(float*, int)"},
    {"index": 1, "mangled": "_Z5scaleILi3EEvPfi", "demangled": "void scale<3>(float*, int)"},
    {"index": 2, "mangled": "_ZN2ns7add_oneEPfi", "demangled": "ns::add_one(float*, int)"},
    {"index": 3, "mangled": None, "demangled": "(anonymous namespace)::square(float*, int)"},
    {"index": 4, "mangled": "_Z6affinePf6Affinei", "demangled": "affine(float*, Affine, int)"},
    {"index": 5, "mangled": "_ZN5outer5inner4fillIfEEvPT_S2_i",
     "demangled": "void outer::inner::fill<float>(float*, float, int)"},
    {"index": 6, "mangled": "c_kernel", "demangled": "c_kernel"}]}


def kernel_table(path):
    return read_json(path) or FALLBACK_TABLE


def adapt_workload(raw_path, table_path, out_path, every=(50, 70), graph=False, torch=False,
                   trace=None):
    """Dry runs: the double's workload report -> a known-work report (or, with
    torch, a torch-loop report; trace: also write a torch.profiler-like trace
    of the same kernels).  The workload puts item i (kernel name i % N) on
    stream 1 + i % S and a copy / memset after item i when i % M == 0."""
    raw = read_json(raw_path)
    table = kernel_table(table_path)["kernels"]
    names = [k["mangled"] or ANON_STANDIN for k in table]
    K, S, nn = raw["kernels"], raw.get("streams", 2), len(names)
    per = [[0] * S for _ in range(nn)]
    for i in range(K):
        per[i % nn][i % S] += 1
    if torch:
        rep = {"program": "torch-loop (dry run: cuptimon-workload)", "pid": raw["pid"], "steps": K,
               "start_ns": raw["start_ns"], "end_ns": raw["end_ns"],
               "steps_start_ns": raw["start_ns"], "steps_end_ns": raw["end_ns"],
               "torch_version": "n/a (dry run)", "profiler_active": bool(trace),
               "cuptimon_loaded": bool(raw.get("callbacks_registered")),
               "libcupti_loaded": ["libcupti-fake.so"]}
    else:
        kernels = []
        for idx, k in enumerate(table):
            tot = sum(per[idx])
            kernels.append({"index": idx, "mangled": names[idx], "mangled_literal": bool(k["mangled"]),
                            "demangled": k["demangled"], "launches": 0 if graph else tot,
                            "graph_per_replay": 1 if graph else 0, "graph_total": tot if graph else 0,
                            "total": tot, "by_stream": {"s%d" % (s + 1): per[idx][s] for s in range(S)}})
        b = raw.get("bytes", 4096)
        rep = {"program": "known-work (dry run: cuptimon-workload)", "schema": 1, "pid": raw["pid"],
               "label": os.environ.get("CUPTIMON_LABEL"), "rank": os.environ.get("RANK"),
               "device": 0, "device_count": 1, "device_name": "libcupti test double",
               "start_ns": raw["start_ns"], "end_ns": raw["end_ns"],
               "work_ns": raw["end_ns"] - raw["start_ns"],
               "streams": [{"name": "s%d" % (s + 1), "id": s + 1} for s in range(S)],
               "stream_ids_known": True, "kernels": kernels, "kernels_total": K,
               "graph": {"replays": K // nn if graph else 0, "kernels_per_replay": nn if graph else 0},
               "memcpy": {"DtoH": {"count": raw["memcpys"], "bytes": raw["memcpys"] * b,
                                   "by_stream": _split_every(K, S, every[0])}},
               "memset": {"count": raw["memsets"], "bytes": raw["memsets"] * b,
                          "by_stream": _split_every(K, S, every[1])},
               "nvtx": {"ranges": 0}, "annotations": {"via": "n/a (dry run)", "pushed": 0},
               "errors": ""}
    with open(out_path + ".tmp", "w") as f:
        json.dump(rep, f, indent=1)
    os.rename(out_path + ".tmp", out_path)
    if trace:
        evs = [{"ph": "X", "cat": "kernel", "name": DEMANGLE(names[idx]), "pid": raw["pid"], "tid": 7,
                "ts": 0, "dur": 1, "args": {}}
               for idx in range(nn) for _ in range(sum(per[idx]))]
        with open(trace, "w") as f:
            json.dump({"traceEvents": evs}, f)


def _split_every(K, S, every):
    out = collections.Counter()
    for i in range(0, K, every or K + 1):
        out["s%d" % (i % S + 1)] += 1
    return dict(out)


def dump(d):
    lay, src = load_layout()
    a = Archive(d, lay)
    kinds = collections.Counter(e["type"] for e in a.events)
    names = collections.Counter(DEMANGLE(a.kernel_name(e) or "?") for e in a.events if e["type"] == "kernel")
    print(json.dumps({"dir": d, "layout": src, "pid": a.pid, "stats": a.stats, "kinds": kinds,
                      "kernels": names, "problems": a.problems[:20]}, indent=1, default=str))


def main(argv):
    if len(argv) >= 3 and argv[1] == "check":
        return Suite(argv[2], argv[3] if len(argv) > 3 else argv[2]).run()
    if len(argv) == 3 and argv[1] == "kernel-names":
        print(",".join(k["mangled"] or ANON_STANDIN for k in kernel_table(argv[2])["kernels"]))
        return 0
    if len(argv) == 3 and argv[1] == "dump":
        dump(argv[2])
        return 0
    if len(argv) >= 5 and argv[1] == "adapt-workload":
        opts = argv[5:]
        val = lambda k: opts[opts.index(k) + 1] if k in opts else None  # noqa: E731
        every = tuple(int(x) for x in (val("--every") or "50,70").split(","))
        adapt_workload(argv[2], argv[3], argv[4], every=every, graph="--graph" in opts,
                       torch="--torch" in opts, trace=val("--trace"))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
