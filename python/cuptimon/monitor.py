"""PyTorch's experimental CUPTI monitor API (torch.profiler's
``_cupti_monitor``), served by cuptimon.

Switching is a change of import::

    # from torch.profiler import _cupti_monitor as monitor
    import cuptimon as monitor

    monitor.start_collection("/tmp/mon")
    monitor.begin_trace_window()
    with monitor.annotate("step"):          # or push_user_annotation/pop
        train_step()
    result = monitor.end_trace_window()     # events, user_annotations, start_ns, ...
    monitor.stop_collection()

What is different, and why:

* Collection is the node daemon's: the shim (libcuptimon.so) keeps CUPTI
  tracing on and hands raw buffers to cuptimond, which archives and
  decodes them.  ``start_collection`` makes sure the shim runs in this
  process (it is usually injected already) and loads and starts it with
  ctypes otherwise; nothing is decoded in the job.
* Windows select this process by pid.  The daemon writes the window's
  trace (Chrome/Perfetto JSON); ``end_trace_window`` reads this process's
  events back from it.  Its "events" are Chrome trace-event dicts (``ph``,
  ``cat`` = "kernel", "cuda_runtime", "cuda_driver", "gpu_memcpy",
  "gpu_memset", "overhead", "cuda_sync", ..., ``name``, ``ts``/``dur`` in
  µs, ``args`` with "correlation", "annotation"...), not PyTorch's
  decoded-record dicts, filtered the same way (API calls that start in the
  window and the GPU work they launched).  The result adds "trace_path",
  "summary", "window" and "end_ns".
* An event's ``args["annotation"]`` is the range the launching thread had
  pushed (CUPTI external correlation is per thread).  GPU work launched by
  another thread inside a range of this process, such as the kernels
  PyTorch's autograd engine launches for ``loss.backward()`` from its own
  thread, gets ``args["enclosing annotation"]`` instead, from the ranges'
  times; the result's "annotation_ranges" lists them.
* ``push_user_annotation``/``pop_user_annotation`` work whenever the shim is
  loaded (also in windows opened by ``cuptimonctl`` from outside) and return
  None: the external id is chosen inside the shim; the names are in the
  events' args ("annotation") and in the result's "user_annotations".
* ``stop_collection`` ends this process's open window, if any, and flushes;
  tracing stays on (it is the node's), unless ``shutdown=True``.
* ``enable_hes_early`` returns False and does nothing: CUPTI hardware event
  tracing is not supported on Hopper (the H200 answers NOT_SUPPORTED).
* ``buffer_size`` and ``activities`` (the always-on kinds) apply only when
  this call starts the shim (they set CUPTIMON_SLOT_SIZE and
  CUPTIMON_ACTIVITIES for it); ``flush_period_s`` and
  ``annotation_resolver`` are accepted and ignored (the daemon schedules the
  flushes; graph-node names come from :func:`cuptimon.label_graph_node`).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
import time
import warnings
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from . import _kinds, _shim
from ._control import LONG_TIMEOUT_S, Client
from ._errors import CuptimonError, DaemonError, ShimError
from .daemon import _select, annotations_of, mark_enclosing, read_trace_doc

__all__ = [
    "CuptimonMonitor", "start_collection", "stop_collection", "monitor_stats", "get_monitor",
    "prepare_trace_window", "start_trace_window", "begin_trace_window", "end_trace_window",
    "push_user_annotation", "pop_user_annotation", "enable_hes_early", "is_hes_enabled",
]

_ENODEV = 19
_ETIMEDOUT = 110


def _thread_resource() -> Tuple[int, int, int]:
    # As PyTorch: (pid, threading.get_ident() as int32, native thread id).
    opaque = ctypes.c_int32(threading.get_ident() & 0xFFFFFFFF).value
    return os.getpid(), opaque, threading.get_native_id()


class CuptimonMonitor:
    """The monitor of this process (PyTorch's ``CuptiMonitor``).

    Create it with :func:`start_collection`.  ``output_dir``: where window
    traces go (``window-PID-N.json``; default: the daemon's
    OUTPUT_DIR/windows/).  ``activities``: always-on kinds for a shim this
    call starts.  ``buffer_size``: its slot size in bytes.
    ``socket_path``/``timeout``: the daemon's control socket and request
    timeout.  ``connect_timeout_s``: how long to wait for the shim's
    session to reach the daemon (at start, and when a window finds no
    session for this process yet).  ``library``: the libcuptimon.so to load
    when none is in the process (default $CUPTIMON_LIB, then by name).
    """

    def __init__(self, output_dir: Optional[str] = None, *,
                 activities: Optional[Iterable[Any]] = None,
                 buffer_size: Optional[int] = None,
                 flush_period_s: Optional[float] = None,
                 annotation_resolver: Optional[Callable[..., Any]] = None,
                 socket_path: Optional[str] = None,
                 timeout: Optional[float] = None,
                 connect_timeout_s: float = 5.0,
                 library: Optional[str] = None) -> None:
        self.output_dir = os.path.abspath(os.fspath(output_dir)) if output_dir is not None else None
        self.activities = tuple(activities) if activities is not None else None
        self.buffer_size = buffer_size
        self.flush_period_s = flush_period_s
        self.annotation_resolver = annotation_resolver
        self.connect_timeout_s = float(connect_timeout_s)
        self.library = library
        self._client = Client(socket_path, timeout)
        self._lock = threading.RLock()
        self._started = False
        self._always_on: Tuple[int, ...] = _kinds.DEFAULT_ALWAYS_ON
        self._window: Optional[int] = None
        self._window_active = False
        self._window_start_ns = 0
        self._window_extra: Tuple[int, ...] = ()
        self._windows_opened = 0
        self._thread_resource_map: Dict[int, Dict[int, int]] = {}
        self._last_result: Optional[Dict[str, Any]] = None

    # ---- collection ------------------------------------------------------

    def start(self) -> None:
        """Makes sure the shim runs in this process: loads libcuptimon.so if
        it is absent and calls cuptimon_init().  Raises :class:`ShimError`
        when it cannot be loaded or CUPTI cannot be started."""
        with self._lock:
            if self._started:
                raise RuntimeError("cuptimon monitor is already started")
            _shim.load(self.library)
            st = _shim.status() or {}
            saved = {}
            if not st.get("started"):
                env = {}
                if self.activities is not None:
                    env["CUPTIMON_ACTIVITIES"] = _kinds.env_value(self.activities)
                if self.buffer_size:
                    env["CUPTIMON_SLOT_SIZE"] = str(int(self.buffer_size))
                for k, v in env.items():
                    saved[k] = os.environ.get(k)
                    os.environ[k] = v
                self._always_on = _kinds.always_on()
            else:
                self._always_on = _kinds.always_on()
                if self.activities is not None or self.buffer_size:
                    warnings.warn("cuptimon: the shim already runs in this process; "
                                  "activities= and buffer_size= are not applied",
                                  RuntimeWarning, stacklevel=3)
            try:
                rc = _shim.init()
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            if rc < 0:
                raise ShimError(f"cuptimon_init() failed: {os.strerror(-rc)} (is libcupti "
                                "loadable? see CUPTIMON_LIBCUPTI_PATH; CUPTIMON_DEBUG=1 says more)")
            if self.output_dir:
                os.makedirs(self.output_dir, exist_ok=True)
            self._record_thread()
            self._started = True
        self._wait_connected()

    def _wait_connected(self) -> bool:
        st = _shim.status()
        if st and st["connected"]:
            return True
        try:  # no daemon: do not wait for a connection that cannot come
            self._client.call("ping", timeout=2.0)
        except CuptimonError:
            return False
        deadline = time.monotonic() + self.connect_timeout_s
        while time.monotonic() < deadline:
            st = _shim.status()
            if st and st["connected"]:
                return True
            time.sleep(0.01)
        return False

    def stop(self, shutdown: bool = False) -> None:
        """Ends this process's open window, if any (its result is in
        :attr:`last_result`), and force-flushes CUPTI's buffers to the
        daemon.  Tracing stays on, as the node's always-on tracing, unless
        ``shutdown``: then cuptimon_shutdown() stops it for good."""
        with self._lock:
            if not self._started:
                return
            if self._window is not None:
                try:
                    self.end_trace_window(read_events=False)
                except CuptimonError as e:
                    warnings.warn(f"cuptimon: ending the open window failed: {e}",
                                  RuntimeWarning, stacklevel=3)
                    self._clear_window()
            _shim.flush(True)
            if shutdown:
                _shim.shutdown(5000)
            self._started = False

    def flush(self, *, forced: bool = False) -> None:
        """cuptimon_flush(): asks CUPTI for this process's complete buffers
        now; the shim hands them to the daemon.  ``forced``: also wait (at
        most a second) for the work launched so far to end; work still
        running then comes with a later flush, never lost."""
        rc = _shim.flush(forced)
        if rc < 0 and rc not in (-_ENODEV, -_ETIMEDOUT):
            raise ShimError(f"cuptimon_flush failed: {os.strerror(-rc)}")

    @property
    def started(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._started

    @property
    def last_result(self) -> Optional[Dict[str, Any]]:
        """The result of the last ended window (also one ended by stop())."""
        return self._last_result

    def _session(self) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]], Optional[str]]:
        try:
            st = self._client.call("status")
        except CuptimonError as e:
            return None, None, str(e)
        pid = os.getpid()
        mine = [s for s in st.get("sessions", []) if s.get("pid") == pid]
        live = [s for s in mine if s.get("connected")]
        sess = (live or mine or [None])[-1]
        return sess, st.get("daemon"), None

    def stats(self) -> Dict[str, Any]:
        """PyTorch's stats keys, from the shim (cuptimon_get_status) and
        this process's session in the daemon, plus "shim", "session" and
        "daemon_error" (why the daemon could not be asked, or None)."""
        sh = _shim.status() or {}
        sess, daemon, err = self._session()
        sess_d = sess or {}
        with self._lock:
            out_dir = self.output_dir or (os.path.join(daemon["output_dir"], "windows")
                                          if daemon and daemon.get("output_dir") else None)
            return {
                "started": self._started,
                "activities": list(self._always_on),
                "buffers_completed": int(sh.get("buffers_completed", 0)),
                "buffers_allocated": int(sh.get("pool_slots", 0)),
                "buffers_pending": max(0, int(sh.get("buffers_sent", 0))
                                       - int(sh.get("buffers_released", 0))),
                "valid_total_mb": int(sess_d.get("bytes_received", 0)) / (1024 * 1024),
                "dropped_records": max(int(sh.get("dropped_records", 0)),
                                       int(sess_d.get("dropped_records", 0))),
                "raw_chunks_written": int(sess_d.get("chunks_written", 0)),
                "output_dir": out_dir,
                "trace_window_prepared": self._window is not None,
                "trace_window_active": self._window_active,
                "trace_window_start_ns": self._window_start_ns,
                "trace_window_id": self._window,
                "shim": sh or None,
                "session": sess,
                "daemon_error": err,
            }

    # ---- windows ---------------------------------------------------------

    def _record_thread(self) -> None:
        pid, opaque, native = _thread_resource()
        self._thread_resource_map.setdefault(pid, {})[opaque] = native

    def _window_fields(self, activities) -> Dict[str, Any]:
        fields: Dict[str, Any] = {"pids": [os.getpid()]}
        kinds = _kinds.request_kinds(activities)
        if kinds is not None:
            fields["activities"] = kinds
        if self.output_dir:
            self._windows_opened += 1
            fields["output"] = os.path.join(
                self.output_dir, f"window-{os.getpid()}-{self._windows_opened}.json")
        return fields

    def _call_open(self, op: str, fields: Dict[str, Any]) -> Dict[str, Any]:
        # The shim connects on its own thread: right after start (or after a
        # daemon restart) this process may not have a session yet.
        deadline = time.monotonic() + self.connect_timeout_s
        while True:
            try:
                return self._client.call(op, timeout=LONG_TIMEOUT_S, **fields)
            except DaemonError as e:
                if (e.code == "ENOENT" and time.monotonic() < deadline
                        and (_shim.status() or {}).get("started")):
                    time.sleep(0.05)
                    continue
                raise

    def _extra(self, reply: Dict[str, Any]) -> Tuple[int, ...]:
        return tuple(int(k) for k in reply.get("kinds", []) if int(k) not in self._always_on)

    def _require_started(self, what: str) -> None:
        if not self._started:
            raise RuntimeError(f"cuptimon monitor must be started before {what}")

    def prepare_trace_window(self, activities: Optional[Iterable[Any]] = None) -> Tuple[int, ...]:
        """Enables the window's kinds in this process now (default: kernel,
        memcpy, memset, runtime, driver, external_correlation, overhead,
        cuda_event, synchronization); :meth:`start_trace_window` starts it.
        Returns the kinds the window adds to the always-on ones."""
        with self._lock:
            self._require_started("prepare_trace_window")
            if self._window is not None:
                raise RuntimeError("A trace window is already prepared")
            self._record_thread()
            reply = self._call_open("window_prepare", self._window_fields(activities))
            _shim.record_ranges()
            self._window = int(reply["window"])
            self._window_active = False
            self._window_start_ns = 0
            self._window_extra = self._extra(reply)
            return self._window_extra

    def start_trace_window(self) -> None:
        """Starts the prepared window: the daemon flushes this process
        (non-forced) and marks the start time."""
        with self._lock:
            self._require_started("start_trace_window")
            if self._window is None:
                raise RuntimeError("No prepared trace window")
            if self._window_active:
                raise RuntimeError("A trace window is already active")
            self._record_thread()
            reply = self._client.call("window_start", timeout=LONG_TIMEOUT_S, window=self._window)
            self._window_active = True
            self._window_start_ns = int(reply.get("start_unix_ns", 0))

    def begin_trace_window(self, activities: Optional[Iterable[Any]] = None) -> Tuple[int, ...]:
        """Prepares and starts a window over this process in one request.
        Returns the kinds the window adds to the always-on ones."""
        with self._lock:
            self._require_started("begin_trace_window")
            if self._window is not None:
                raise RuntimeError("A trace window is already prepared")
            self._record_thread()
            _shim.record_ranges()
            try:
                reply = self._call_open("window_begin", self._window_fields(activities))
            except BaseException:
                _shim.take_ranges()
                raise
            self._window = int(reply["window"])
            self._window_extra = self._extra(reply)
            self._window_active = reply.get("state") == "active"
            self._window_start_ns = int(reply.get("start_unix_ns", 0))
            return self._window_extra

    def _clear_window(self) -> None:
        _shim.take_ranges()
        self._window = None
        self._window_active = False
        self._window_start_ns = 0
        self._window_extra = ()

    def end_trace_window(self, *, read_events: bool = True) -> Dict[str, Any]:
        """Ends the window and returns PyTorch's result shape::

            {"events": [...],            # this process's trace events
             "extra_activities": [...],  # kinds the window added
             "user_annotations": {id: name},
             "thread_resource_map": {pid: {opaque_tid: native_tid}},
             "start_ns": ...,            # the window's start, Unix ns
             "trace_path": ..., "summary": {...}, "window": id, "end_ns": ...,
             "annotation_ranges": [{"name", "start_ns", "end_ns", "tid"}, ...]}

        A GPU event carries ``args["annotation"]`` when the thread that
        launched it had pushed one (CUPTI external correlation is per
        thread).  Work launched by another thread inside a range of this
        process (PyTorch's autograd engine launches backward's kernels from
        its own thread) gets ``args["enclosing annotation"]``: the innermost
        range of any thread that was open when its launch call started, from
        the push/pop times kept during the window ("annotation_ranges").

        ``read_events=False`` skips reading the trace file back ("events"
        and "user_annotations" are then empty).  When the file cannot be
        read, "events" is empty and "events_error" says why (a warning is
        issued); the window itself is done."""
        with self._lock:
            if self._window is None:
                raise RuntimeError("No prepared trace window")
            self._record_thread()
            wid, extra = self._window, self._window_extra
            trm = {p: dict(m) for p, m in self._thread_resource_map.items()}
            try:
                reply = self._client.call("window_end", timeout=LONG_TIMEOUT_S, window=wid)
            except DaemonError:
                self._clear_window()  # the window is failed or gone
                raise
            ranges = _shim.take_ranges()
            self._clear_window()
        path = reply.get("output")
        events: List[Dict[str, Any]] = []
        result: Dict[str, Any] = {}
        if read_events and path:
            pids = reply.get("pids") or [os.getpid()]
            try:
                doc = read_trace_doc(path)
                events = _select(doc.get("traceEvents", []), pids)
                base = int((doc.get("otherData") or {}).get("base_unix_ns", 0))
                if ranges and base:
                    mark_enclosing(events, ranges, base)
            except (OSError, ValueError) as e:
                result["events_error"] = f"cannot read the window trace {path}: {e}"
                warnings.warn(f"cuptimon: {result['events_error']}", RuntimeWarning, stacklevel=2)
        result.update({
            "events": events,
            "extra_activities": list(extra),
            "user_annotations": annotations_of(events),
            "thread_resource_map": trm,
            "start_ns": int(reply.get("start_unix_ns", 0)),
            "end_ns": int(reply.get("end_unix_ns", 0)),
            "trace_path": path,
            "summary": reply.get("summary"),
            "window": wid,
            "annotation_ranges": [{"name": r[0], "start_ns": r[1], "end_ns": r[2], "tid": r[3]}
                                  for r in ranges],
        })
        self._last_result = result
        return result

    def push_user_annotation(self, name: str) -> None:
        """Opens a named range on this thread (cuptimon_push_annotation):
        the API calls and kernels it launches carry the name in window
        traces.  Returns None (the shim picks the external id)."""
        self._record_thread()
        _shim.push_annotation(name)
        return None

    def pop_user_annotation(self) -> None:
        """Closes this thread's innermost annotation.  Returns None."""
        _shim.pop_annotation()
        return None


_monitor: Optional[CuptimonMonitor] = None
_module_lock = threading.Lock()
_atexit_registered = False


def get_monitor() -> Optional[CuptimonMonitor]:
    """The active monitor (from :func:`start_collection`), or None."""
    return _monitor


def start_collection(output_dir: Optional[str] = None, *,
                     activities: Optional[Iterable[Any]] = None,
                     buffer_size: Optional[int] = None,
                     flush_period_s: Optional[float] = None,
                     annotation_resolver: Optional[Callable[..., Any]] = None,
                     **kwargs: Any) -> CuptimonMonitor:
    """Starts collection in this process and returns the monitor.

    Ensures the shim runs here: if libcuptimon.so is not loaded it is loaded
    with ctypes ($CUPTIMON_LIB, else by name) and cuptimon_init() is called;
    then waits (up to ``connect_timeout_s``, default 5 s) for its session to
    reach the daemon, when a daemon answers.  Other keyword arguments go to
    :class:`CuptimonMonitor` (``socket_path``, ``timeout``,
    ``connect_timeout_s``, ``library``).  Raises RuntimeError when a
    collection is already active, :class:`ShimError` when the shim cannot
    be loaded or started.  When torch is imported, the record_function hook
    is installed (``torch_hooks=False`` to skip; see
    :mod:`cuptimon.torch_integration`)."""
    global _monitor, _atexit_registered
    torch_hooks = kwargs.pop("torch_hooks", True)
    with _module_lock:
        if _monitor is not None:
            raise RuntimeError("cuptimon monitor collection is already active")
        m = CuptimonMonitor(output_dir, activities=activities, buffer_size=buffer_size,
                            flush_period_s=flush_period_s,
                            annotation_resolver=annotation_resolver, **kwargs)
        m.start()
        _monitor = m
        if not _atexit_registered:
            atexit.register(_stop_collection_atexit)
            _atexit_registered = True
    if torch_hooks:
        from . import torch_integration
        try:
            torch_integration.install()
        except Exception:  # never let the optional hook break collection
            pass
    return m


def stop_collection(shutdown: bool = False) -> Optional[Dict[str, Any]]:
    """Stops the collection (see :meth:`CuptimonMonitor.stop`) and returns
    its final stats; None when none is active."""
    global _monitor
    with _module_lock:
        m = _monitor
        if m is None:
            return None
        try:
            m.stop(shutdown=shutdown)
            return m.stats()
        finally:
            _monitor = None


def monitor_stats() -> Optional[Dict[str, Any]]:
    """The active monitor's stats, or None."""
    m = _monitor
    return m.stats() if m is not None else None


def _require() -> CuptimonMonitor:
    m = _monitor
    if m is None:
        raise RuntimeError("cuptimon monitor collection is not active (call start_collection)")
    return m


def prepare_trace_window(activities: Optional[Iterable[Any]] = None) -> Tuple[int, ...]:
    """See :meth:`CuptimonMonitor.prepare_trace_window`."""
    return _require().prepare_trace_window(activities)


def start_trace_window() -> None:
    """See :meth:`CuptimonMonitor.start_trace_window`."""
    _require().start_trace_window()


def begin_trace_window(activities: Optional[Iterable[Any]] = None) -> Tuple[int, ...]:
    """See :meth:`CuptimonMonitor.begin_trace_window`."""
    return _require().begin_trace_window(activities)


def end_trace_window(*, read_events: bool = True) -> Dict[str, Any]:
    """See :meth:`CuptimonMonitor.end_trace_window`."""
    return _require().end_trace_window(read_events=read_events)


def push_user_annotation(name: str) -> None:
    """Opens a named annotation range on this thread.  Unlike PyTorch's,
    it works whenever the shim is loaded (collection started here or not),
    returns None, and is a no-op without the shim."""
    m = _monitor
    if m is not None:
        m._record_thread()
    _shim.push_annotation(name)
    return None


def pop_user_annotation() -> None:
    """Closes this thread's innermost annotation range.  Returns None."""
    _shim.pop_annotation()
    return None


def enable_hes_early() -> bool:
    """PyTorch enables CUPTI hardware event tracing (HES) here.  cuptimon
    does not: it is not supported on Hopper GPUs (CUPTI answers
    NOT_SUPPORTED on the H200), and the shim owns CUPTI's configuration.
    This is a no-op that returns False; :func:`is_hes_enabled` stays False."""
    return False


def is_hes_enabled() -> bool:
    """Always False (see :func:`enable_hes_early`)."""
    return False


def _stop_collection_atexit() -> None:
    try:
        stop_collection()
    except Exception:
        pass
