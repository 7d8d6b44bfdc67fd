"""The daemon's node-wide operations: status, flush and trace windows over
any processes, chosen by selectors.

A trace window adds the CPU-side runtime and driver API calls, external
correlation (annotations), overheads, CUDA events and synchronization to the
always-on kinds in the selected processes, and writes one Chrome/Perfetto
trace of all of them, filtered like PyTorch's monitor: API calls that start
in the window and the GPU work they launched.

Selectors (combined with AND, as ``cuptimonctl begin-window``):

* ``pid``: a process id or a list of them (at most 64);
* ``uid``: the processes of one user;
* ``job``: ``SLURM_JOB_ID`` or ``TORCHELASTIC_RUN_ID``;
* ``rank``: ``RANK``;
* ``label``: ``CUPTIMON_LABEL``;
* ``all=True``: every process of the node (also those that start during
  the window).

Processes that start during a window and match its selector are included.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import threading
from typing import Any, Dict, Iterable, List, Optional, Union

from . import _kinds
from ._control import LONG_TIMEOUT_S, Client
from ._errors import CuptimonError

__all__ = [
    "status", "flush", "ping", "windows", "prepare_window", "begin_window", "start_window",
    "end_window", "read_trace", "read_trace_doc", "annotations_of", "mark_enclosing",
    "trace_window", "TraceWindow",
]

PidArg = Union[int, Iterable[int], None]


def _client(socket_path, timeout) -> Client:
    return Client(socket_path, timeout)


def status(*, socket_path: Optional[str] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
    """The daemon's status (``cuptimonctl status --json``): ``{"daemon": {...},
    "sessions": [{pid, uid, label, job, connected, cupti_version,
    buffers_received, bytes_archived, dropped_records, ...}, ...]}``."""
    return _client(socket_path, timeout).call("status")


def ping(*, socket_path: Optional[str] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
    """Asks the daemon for its version: ``{"version": "0.1.0"}``."""
    return _client(socket_path, timeout).call("ping")


def flush(forced: bool = False, timeout_s: Optional[float] = None, *,
          socket_path: Optional[str] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
    """Makes every session hand over CUPTI's complete buffers now and waits
    until they are archived (``cuptimonctl flush``).  ``forced``: also wait
    until every process has handed over all the work it launched before the
    flush, work still running included (``cuptimonctl flush
    --wait-running``; CUPTI itself is never forced, which would lose the
    records of running work).  ``timeout_s``: how long the daemon waits
    (default its own, see cuptimond --help); sessions that do not answer in
    time are listed in the reply's "late", those whose work still ran in
    "running".

    Returns ``{"flush_id", "fence", "sessions", "completed", "late": [pids],
    "running": [pids], "gone": [pids], "cupti_taken": [pids], "elapsed_ms",
    "fence_flushes"}``."""
    if timeout_s is not None:
        timeout_s = float(timeout_s)
    if timeout is None:
        timeout = max(30.0, (timeout_s or 0) + 10.0)
    return _client(socket_path, timeout).call("flush", forced=bool(forced), timeout_s=timeout_s)


def windows(*, socket_path: Optional[str] = None, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
    """Every window the daemon knows, newest first (``cuptimonctl windows``)."""
    return _client(socket_path, timeout).call("windows").get("windows", [])


def _selector(pid: PidArg, uid: Optional[int], job: Optional[str], rank: Any,
              label: Optional[str], all: bool) -> Dict[str, Any]:
    sel: Dict[str, Any] = {}
    if pid is not None:
        pids = [int(pid)] if isinstance(pid, int) else [int(p) for p in pid]
        if not pids:
            raise ValueError("pid= is an empty list")
        sel["pids"] = pids
    if uid is not None:
        sel["uid"] = int(uid)
    if job is not None:
        sel["job"] = str(job)
    if rank is not None:
        sel["rank"] = str(rank)
    if label is not None:
        sel["label"] = str(label)
    if all and sel:
        raise ValueError("all=True cannot be combined with another selector")
    if not sel and not all:
        raise ValueError("choose the processes: pid=, uid=, job=, rank=, label= or all=True")
    return sel


def _at_ns(at: Union[float, int, _dt.datetime, None]) -> Optional[int]:
    if at is None:
        return None
    if isinstance(at, _dt.datetime):
        if at.tzinfo is None:
            at = at.astimezone()
        return int(at.timestamp() * 1e9)
    v = float(at)
    # As cuptimonctl --at: below 10^12 it is seconds, above nanoseconds.
    return int(v * 1e9) if v < 1e12 else int(v)


def _open(op: str, pid: PidArg, uid, job, rank, label, all, activities, duration_s, at,
          output, socket_path, timeout) -> Dict[str, Any]:
    fields = _selector(pid, uid, job, rank, label, all)
    kinds = _kinds.request_kinds(activities)
    if kinds is not None:
        fields["activities"] = kinds
    if duration_s is not None:
        fields["duration_s"] = float(duration_s)
    at_ns = _at_ns(at)
    if at_ns is not None:
        fields["at_unix_ns"] = at_ns
    if output is not None:
        # The daemon writes it: a relative path is relative to us, not to it.
        fields["output"] = os.path.abspath(os.fspath(output))
    if timeout is None and op == "window_begin":
        timeout = LONG_TIMEOUT_S
    return _client(socket_path, timeout).call(op, **fields)


def prepare_window(pid: PidArg = None, *, uid: Optional[int] = None, job: Optional[str] = None,
                   rank: Any = None, label: Optional[str] = None, all: bool = False,
                   activities: Optional[Iterable[Any]] = None, duration_s: Optional[float] = None,
                   at: Union[float, _dt.datetime, None] = None, output: Optional[str] = None,
                   socket_path: Optional[str] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
    """Prepares a window: enables its extra kinds in the selected processes
    now; :func:`start_window` starts it later (``cuptimonctl
    prepare-window``).  ``activities``: the kinds to trace (names such as
    ``"kernel"``, ``"runtime"``, or CUpti_ActivityKind numbers; default
    kernel, memcpy, memset, runtime, driver, external_correlation, overhead,
    cuda_event, synchronization).  ``duration_s``: the window ends by itself
    that long after its start.  ``output``: the trace path (default
    OUTPUT_DIR/windows/window-ID-TIME.json of the daemon).

    Returns the window (a dict with "window" (its id), "state", "pids",
    "kinds", "output", times in Unix ns...).  Raises DaemonError (code
    ENOENT) when the selector matches no session, EBUSY when a selected
    process is in another open window."""
    return _open("window_prepare", pid, uid, job, rank, label, all, activities, duration_s, at,
                 output, socket_path, timeout)


def begin_window(pid: PidArg = None, *, uid: Optional[int] = None, job: Optional[str] = None,
                 rank: Any = None, label: Optional[str] = None, all: bool = False,
                 activities: Optional[Iterable[Any]] = None, duration_s: Optional[float] = None,
                 at: Union[float, _dt.datetime, None] = None, output: Optional[str] = None,
                 socket_path: Optional[str] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
    """Prepares and starts a window (``cuptimonctl begin-window``); returns
    once it is active (after the selected processes flushed what they had).
    With ``at`` (Unix seconds, or a datetime) the start happens at that time
    on the daemon's clock and this returns at once with the window prepared:
    send the same ``at`` to every node for windows that line up.  See
    :func:`prepare_window` for the arguments."""
    return _open("window_begin", pid, uid, job, rank, label, all, activities, duration_s, at,
                 output, socket_path, timeout)


def start_window(window: Optional[int] = None, *, socket_path: Optional[str] = None,
                 timeout: Optional[float] = None) -> Dict[str, Any]:
    """Starts a prepared window (default: the newest); returns it active."""
    return _client(socket_path, timeout if timeout is not None else LONG_TIMEOUT_S).call(
        "window_start", window=None if window is None else int(window))


def end_window(window: Optional[int] = None, *, socket_path: Optional[str] = None,
               timeout: Optional[float] = None) -> Dict[str, Any]:
    """Ends a window (default: the newest): the daemon disables the extra
    kinds, force-flushes the processes, writes the trace and returns the
    window with "state": "done", "output" (the trace path), "start_unix_ns",
    "end_unix_ns" and "summary" ({"processes": [{pid, events, kernels,
    dropped_records, late...}], ...}).  A window that ended by itself
    (duration_s) returns its result.  Raises DaemonError (code ENOENT,
    "there is no window N") for an unknown id, and (code EIO) when the trace
    could not be written."""
    t = LONG_TIMEOUT_S if timeout is None else max(float(timeout), 1.0)
    return _client(socket_path, t).call("window_end", window=None if window is None else int(window))


def read_trace_doc(path: str) -> Dict[str, Any]:
    """The whole window trace file: {"traceEvents": [...], "otherData":
    {"base_unix_ns": ..., ...}, ...}."""
    with open(path, "rb") as f:
        doc = json.load(f)
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    return doc


def read_trace(path: str, pid: PidArg = None) -> List[Dict[str, Any]]:
    """The Chrome trace events (dicts) of a window trace file, only those of
    ``pid`` (one or a list) when given.  Timestamps ("ts", "dur") are in
    microseconds from the trace's ``otherData.base_unix_ns``."""
    return _select(read_trace_doc(path).get("traceEvents", []), pid)


def _select(events: Iterable[Dict[str, Any]], pid: PidArg) -> List[Dict[str, Any]]:
    if pid is None:
        return list(events)
    pids = {int(pid)} if isinstance(pid, int) else {int(p) for p in pid}
    return [e for e in events if isinstance(e, dict) and e.get("pid") in pids]


GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
API_CATEGORIES = ("cuda_runtime", "cuda_driver")


def mark_enclosing(events: List[Dict[str, Any]], ranges: Iterable[Any], base_ns: int) -> int:
    """Sets ``args["enclosing annotation"]`` on the GPU events (kernels,
    copies, memsets) that carry no annotation of their own but whose launch
    call (the runtime/driver event of the same correlation id) started
    inside an annotation range of any thread of the process: the innermost
    (latest-started) range that was open at that time.  ``ranges``:
    (name, start_ns, end_ns, ...) in CLOCK_REALTIME ns; ``base_ns``: the
    trace's otherData.base_unix_ns.  Returns how many events were marked.

    This is by time, across threads: CUPTI's external correlation (the
    "annotation" arg) only tags what the pushing thread launches, while
    e.g. PyTorch's autograd engine launches backward's kernels from its own
    thread, inside the caller's "backward" range."""
    import heapq

    rs = sorted((int(r[1]), int(r[2]), str(r[0])) for r in ranges)
    if not rs:
        return 0
    launch: Dict[Any, int] = {}
    for e in events:
        if e.get("cat") in API_CATEGORIES and e.get("ph") == "X":
            c = (e.get("args") or {}).get("correlation")
            if c is None:
                continue
            t = base_ns + int(round(float(e.get("ts", 0)) * 1000))
            if c not in launch or t < launch[c]:
                launch[c] = t
    todo = []
    for e in events:
        if e.get("cat") in GPU_CATEGORIES and e.get("ph") == "X":
            a = e.get("args") or {}
            if a.get("annotation") is not None:
                continue
            t = launch.get(a.get("correlation"))
            if t is not None:
                todo.append((t, id(e), e))
    todo.sort(key=lambda x: (x[0], x[1]))
    heap: List[Any] = []
    i = marked = 0
    for t, _, e in todo:
        while i < len(rs) and rs[i][0] <= t:
            heapq.heappush(heap, (-rs[i][0], rs[i][1], i, rs[i][2]))
            i += 1
        while heap and heap[0][1] < t:
            heapq.heappop(heap)
        if heap:
            e.setdefault("args", {})["enclosing annotation"] = heap[0][3]
            marked += 1
    return marked


def annotations_of(events: Iterable[Dict[str, Any]]) -> Dict[int, str]:
    """``{external_id: name}`` of the user annotations (cuptimon_push_annotation,
    CUPTI external correlation kind CUSTOM1) that trace events carry in
    their args ("External id" as Kineto spells it, "external kind": "custom1",
    "annotation"; a second external correlation as "external id 2")."""
    out: Dict[int, str] = {}
    for e in events:
        a = e.get("args") if isinstance(e, dict) else None
        if not a or "annotation" not in a:
            continue
        for kind, key in (("external kind", "External id"), ("external kind 2", "external id 2")):
            if a.get(kind) == "custom1" and key in a:
                try:
                    out[int(a[key])] = str(a["annotation"])
                except (TypeError, ValueError):
                    pass
                break
    return out


class TraceWindow:
    """``with cuptimon.trace_window(...) as w:`` — a window around a block.

    Enter begins the window (:func:`begin_window`), exit ends it
    (:func:`end_window`), also when the block raises (an error while ending
    does not hide the block's own exception).  Without any selector the
    window covers this process.  Afterwards:

    * ``w.window``: the window id; ``w.begin_reply``: the window as begun;
    * ``w.result``: the ended window (see :func:`end_window`), None before;
    * ``w.trace_path``: the trace file;
    * ``w.events(pid=None)``: its events (this window's processes; only
      ``pid``'s when given), read on first use;
    * ``w.annotations()``: ``{external_id: name}`` seen in those events.
    """

    def __init__(self, pid: PidArg = None, *, uid: Optional[int] = None,
                 job: Optional[str] = None, rank: Any = None, label: Optional[str] = None,
                 all: bool = False, activities: Optional[Iterable[Any]] = None,
                 output: Optional[str] = None, socket_path: Optional[str] = None,
                 timeout: Optional[float] = None) -> None:
        if pid is None and uid is None and job is None and rank is None and label is None and not all:
            pid = os.getpid()
        self._args = dict(pid=pid, uid=uid, job=job, rank=rank, label=label, all=all,
                          activities=activities, output=output, socket_path=socket_path,
                          timeout=timeout)
        self._socket_path = socket_path
        self._timeout = timeout
        self.window: Optional[int] = None
        self.begin_reply: Optional[Dict[str, Any]] = None
        self.result: Optional[Dict[str, Any]] = None
        self._events: Optional[List[Dict[str, Any]]] = None
        self._lock = threading.Lock()

    def __enter__(self) -> "TraceWindow":
        self.begin_reply = begin_window(**self._args)
        self.window = int(self.begin_reply["window"])
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self.window is None:
            return False
        try:
            self.result = end_window(self.window, socket_path=self._socket_path,
                                     timeout=self._timeout)
        except CuptimonError:
            if exc_type is None:
                raise
        return False

    @property
    def trace_path(self) -> Optional[str]:
        """The trace file the daemon wrote (None before the end)."""
        src = self.result or self.begin_reply
        return src.get("output") if src else None

    def events(self, pid: PidArg = None) -> List[Dict[str, Any]]:
        """The window's trace events (all its processes), or ``pid``'s."""
        if self.result is None:
            raise CuptimonError("the window has not ended yet")
        with self._lock:
            if self._events is None:
                self._events = read_trace(self.result["output"])
        if pid is None:
            return list(self._events)
        pids = {int(pid)} if isinstance(pid, int) else {int(p) for p in pid}
        return [e for e in self._events if e.get("pid") in pids]

    def annotations(self) -> Dict[int, str]:
        """``{external_id: name}`` of the user annotations in the trace."""
        return annotations_of(self.events())


def trace_window(pid: PidArg = None, **kwargs: Any) -> TraceWindow:
    """``with cuptimon.trace_window(label="train") as w: ...`` — see
    :class:`TraceWindow`.  Takes the selectors and options of
    :func:`begin_window` (no selector: this process)."""
    return TraceWindow(pid, **kwargs)

