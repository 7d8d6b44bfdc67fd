"""In-process access to libcuptimon.so (the shim) through ctypes.

The shim is usually already in the process: injected by the CUDA driver
(``CUDA_INJECTION64_PATH=.../libcuptimon.so``), preloaded (``LD_PRELOAD``)
or linked.  This module finds that copy (``/proc/self/maps``, then the
soname) and never loads a second one.  Only :func:`load` (used by
``start_collection``) loads it when it is absent: from ``$CUPTIMON_LIB``,
else by name (``libcuptimon.so.0``, ``libcuptimon.so``).

Annotations are the hot path: :func:`push_annotation` and
:func:`pop_annotation` cost one ctypes call when the shim is loaded (the
shim itself returns at once outside a trace window) and a global lookup
when it is not.  They never raise.  While the shim is absent, the process is
looked at again at most every few seconds (with backoff), so a shim that the
driver loads later (at cuInit) is picked up.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from typing import Any, Dict, Optional

from ._errors import ShimError

__all__ = [
    "CuptimonStatus", "find", "load", "loaded", "lib_path", "init", "flush", "shutdown",
    "push_annotation", "pop_annotation", "step", "step_end", "label_graph_node", "status", "version",
]

SONAMES = ("libcuptimon.so.0", "libcuptimon.so")


class CuptimonStatus(ctypes.Structure):
    """``struct cuptimon_status`` of client-lib/cuptimon.h."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("started", ctypes.c_int),
        ("connected", ctypes.c_int),
        ("cupti_version", ctypes.c_uint32),
        ("buffers_completed", ctypes.c_uint64),
        ("buffers_sent", ctypes.c_uint64),
        ("buffers_released", ctypes.c_uint64),
        ("buffers_lost", ctypes.c_uint64),
        ("requests_declined", ctypes.c_uint64),
        ("dropped_records", ctypes.c_uint64),
        ("foreign_buffers", ctypes.c_uint64),
        ("connects", ctypes.c_uint64),
        ("pool_slots", ctypes.c_uint32),
        ("pool_free", ctypes.c_uint32),
        ("slot_size", ctypes.c_uint64),
    ]


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None
# Hot-path entry points, None while the shim is not found.
_push = None
_pop = None
# Next time (monotonic) the hot path may look for the shim again, and the
# current back-off.
_next_probe = 0.0
_probe_interval = 1.0
_PROBE_MAX = 30.0
_monotonic = time.monotonic
_tls = threading.local()
_name_cache: Dict[str, bytes] = {}


def _after_fork_in_child() -> None:
    # A fork while another thread held the lock must not leave it held.
    global _lock, _tls
    _lock = threading.Lock()
    _tls = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _maps_path() -> Optional[str]:
    """The path of a libcuptimon mapping of this process, if any."""
    try:
        with open("/proc/self/maps", "r", errors="replace") as f:
            for line in f:
                if "libcuptimon" not in line:
                    continue
                parts = line.split(None, 5)
                if len(parts) < 6:
                    continue
                path = parts[5].strip()
                if path.endswith(" (deleted)"):
                    continue
                if os.path.basename(path).startswith("libcuptimon.so"):
                    return path
    except OSError:
        pass
    return None


def _setup(lib: ctypes.CDLL) -> None:
    def fn(name, restype, argtypes):
        f = getattr(lib, name, None)
        if f is not None:
            f.restype = restype
            f.argtypes = argtypes
        return f

    fn("cuptimon_init", ctypes.c_int, [])
    fn("cuptimon_shutdown", None, [ctypes.c_int])
    fn("cuptimon_flush", ctypes.c_int, [ctypes.c_int])
    fn("cuptimon_push_annotation", ctypes.c_int, [ctypes.c_char_p])
    fn("cuptimon_pop_annotation", ctypes.c_int, [])
    fn("cuptimon_step", ctypes.c_int64, [])
    fn("cuptimon_step_end", ctypes.c_int, [])
    fn("cuptimon_label_graph_node", ctypes.c_int, [ctypes.c_uint64, ctypes.c_char_p])
    fn("cuptimon_get_status", ctypes.c_int, [ctypes.POINTER(CuptimonStatus)])
    fn("cuptimon_version", ctypes.c_char_p, [])


def _adopt(lib: ctypes.CDLL, path: str) -> ctypes.CDLL:
    global _lib, _lib_path, _push, _pop
    if not hasattr(lib, "cuptimon_init"):
        raise ShimError(f"{path} is not libcuptimon (no cuptimon_init)")
    _setup(lib)
    _lib, _lib_path = lib, path
    _push = getattr(lib, "cuptimon_push_annotation", None)
    _pop = getattr(lib, "cuptimon_pop_annotation", None)
    return lib


def find() -> Optional[ctypes.CDLL]:
    """Returns the shim already loaded in this process (a ``ctypes.CDLL``),
    or None.  Never loads a library that is not already mapped."""
    global _next_probe, _probe_interval
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        candidates = []
        path = _maps_path()
        if path:
            candidates.append(path)
        candidates.extend(SONAMES)
        for c in candidates:
            try:
                # RTLD_NOLOAD: only a handle on what is already there.
                lib = ctypes.CDLL(c, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            except OSError:
                continue
            try:
                return _adopt(lib, path or c)
            except ShimError:
                continue
        _next_probe = _monotonic() + _probe_interval
        _probe_interval = min(_probe_interval * 2, _PROBE_MAX)
        return None


def load(path: Optional[str] = None) -> ctypes.CDLL:
    """Returns the shim, loading it when it is not in the process yet.

    Looks, in order: the copy already loaded; ``path``; ``$CUPTIMON_LIB``;
    ``libcuptimon.so.0`` and ``libcuptimon.so`` through the dynamic loader's
    search path.  Loading does not start tracing: call :func:`init`.
    Raises :class:`ShimError` when none can be loaded."""
    lib = find()
    if lib is not None:
        return lib
    tried = []
    env = os.environ.get("CUPTIMON_LIB")
    for c in [p for p in (path, env) if p] + list(SONAMES):
        c = os.fspath(c)
        try:
            lib = ctypes.CDLL(c, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        except OSError as e:
            tried.append(f"{c}: {e}")
            continue
        with _lock:
            if _lib is None:
                _adopt(lib, _maps_path() or c)
            return _lib
    raise ShimError("cannot load libcuptimon.so (set CUPTIMON_LIB to its path): "
                    + "; ".join(tried))


def loaded() -> bool:
    """True when the shim is in this process (it may not be started)."""
    return find() is not None


def lib_path() -> Optional[str]:
    """The path of the shim in use, or None."""
    find()
    return _lib_path


def init() -> int:
    """cuptimon_init(): starts the shim (idempotent).  Returns 0 or a
    negative errno; -ENODEV (as a return value) when the shim is absent."""
    lib = find()
    if lib is None:
        return -19
    return int(lib.cuptimon_init())


def flush(forced: bool = False) -> int:
    """cuptimon_flush(): asks CUPTI for the buffers whose records are
    complete now.  ``forced``: also wait (at most a second) until the work
    launched so far has ended and every buffer CUPTI held is back; CUPTI is
    never forced (that would lose the records of running work).  Returns 0
    or a negative errno (-ENODEV without a shim, -ETIMEDOUT when work still
    ran after the second)."""
    lib = find()
    if lib is None or not hasattr(lib, "cuptimon_flush"):
        return -19
    try:
        return int(lib.cuptimon_flush(1 if forced else 0))
    except Exception:  # pragma: no cover - a foreign-function failure
        return -5


def shutdown(timeout_ms: int = 5000) -> None:
    """cuptimon_shutdown(): hands everything to the daemon (waiting at most
    timeout_ms) and stops tracing in this process for good."""
    lib = find()
    if lib is not None and hasattr(lib, "cuptimon_shutdown"):
        lib.cuptimon_shutdown(int(timeout_ms))


def _encode(name: Any) -> bytes:
    b = _name_cache.get(name) if type(name) is str else None
    if b is None:
        b = str(name).encode("utf-8", "replace").replace(b"\0", b"?")
        if type(name) is str and len(_name_cache) < 4096:
            _name_cache[name] = b
    return b


def _stack() -> list:
    try:
        return _tls.stack
    except AttributeError:
        _tls.stack = []
        return _tls.stack


def push_annotation(name: Any) -> bool:
    """cuptimon_push_annotation(name) on the calling thread.  Returns True
    when the shim was called (the pop will be), False when no shim is
    loaded.  Never raises."""
    f = _push
    if f is None:
        if _monotonic() < _next_probe:
            _stack().append(False)
            return False
        try:
            find()
        except Exception:
            pass
        f = _push
        if f is None:
            _stack().append(False)
            return False
    try:
        f(_encode(name))
    except Exception:
        _stack().append(False)
        return False
    if _ranges is None:
        _stack().append(True)
    else:
        _stack().append((name, _time_ns()))
    return True


def pop_annotation() -> bool:
    """Ends the calling thread's innermost :func:`push_annotation`.  Only
    what this module pushed is popped, so a push made before the shim
    appeared has no effect on the shim's stack.  Never raises."""
    st = _stack()
    if not st:
        return False
    v = st.pop()
    if v is False:
        return False
    f = _pop
    try:
        if f is not None:
            f()
    except Exception:
        return False
    if v is not True:
        r = _ranges
        if r is not None and len(r) < RANGES_MAX:
            r.append((str(v[0]), v[1], _time_ns(), threading.get_native_id()))
    return True


def _call_int(name: str) -> Optional[int]:
    """The shim's C entry point ``name()`` (no arguments, an int back), or
    None when no shim, or one without it, is loaded.  Never raises."""
    lib = find()
    f = getattr(lib, name, None) if lib is not None else None
    if f is None:
        return None
    try:
        return int(f())
    except Exception:
        return None


def step() -> Optional[int]:
    """cuptimon_step(): ends the calling thread's previous step and begins
    annotation ``ProfilerStep#N``, which traces show as torch.profiler's
    steps.  Returns N (counted per process from 0, windows or not), a
    negative errno (-16 EBUSY: annotations pushed since the previous step
    are still open), or None when no shim (or an older one) is loaded.
    Never raises."""
    return _call_int("cuptimon_step")


def step_end() -> Optional[int]:
    """cuptimon_step_end(): ends the calling thread's open step (the last
    one of a loop).  Returns 0, -16 (EBUSY) or None without a shim."""
    return _call_int("cuptimon_step_end")


# ---- annotation ranges ---------------------------------------------------
# While a window of this process is open (cuptimon.monitor), the time of
# every annotation's push and pop is kept, so that the window's result can
# say which range of ANY thread encloses a launch: CUPTI's external
# correlation only tags what the pushing thread itself launches, and
# PyTorch's autograd engine launches backward's kernels from its own
# thread.

RANGES_MAX = 1_000_000
_ranges: Optional[list] = None
_time_ns = time.time_ns


def record_ranges() -> None:
    """Starts keeping (name, start_ns, end_ns, native_tid) of the annotation
    ranges that close from now on (CLOCK_REALTIME ns, as the traces' times)."""
    global _ranges
    _ranges = []


def take_ranges() -> list:
    """Stops keeping ranges and returns those kept."""
    global _ranges
    r, _ranges = _ranges, None
    return r or []


def label_graph_node(graph_node_id: int, name: str) -> int:
    """cuptimon_label_graph_node(): names a CUDA graph node so its replayed
    kernels carry the label in traces.  Returns 0 or a negative errno
    (-ENODEV without a shim).  Never raises."""
    lib = find()
    if lib is None or not hasattr(lib, "cuptimon_label_graph_node"):
        return -19
    try:
        return int(lib.cuptimon_label_graph_node(int(graph_node_id) & (2**64 - 1),
                                                 _encode(name)))
    except Exception:
        return -22


def status() -> Optional[Dict[str, Any]]:
    """cuptimon_get_status() as a dict (the fields of struct
    cuptimon_status, ``started`` and ``connected`` as bools), or None when
    the shim is not loaded."""
    lib = find()
    if lib is None or not hasattr(lib, "cuptimon_get_status"):
        return None
    st = CuptimonStatus()
    st.struct_size = ctypes.sizeof(CuptimonStatus)
    rc = lib.cuptimon_get_status(ctypes.byref(st))
    if rc != 0:
        return None
    out = {name: getattr(st, name) for name, _ in CuptimonStatus._fields_ if name != "struct_size"}
    out["started"] = bool(out["started"])
    out["connected"] = bool(out["connected"])
    out["library"] = _lib_path
    out["version"] = version()
    return out


def version() -> Optional[str]:
    """cuptimon_version() of the loaded shim, or None."""
    lib = find()
    if lib is None or not hasattr(lib, "cuptimon_version"):
        return None
    v = lib.cuptimon_version()
    return v.decode() if v else None
