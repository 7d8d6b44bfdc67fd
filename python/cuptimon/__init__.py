"""cuptimon: the node's always-on CUPTI tracing, from Python.

A pure-Python package (standard library only) with three parts:

* **In-process** calls into the shim, libcuptimon.so, through ctypes
  (the copy already in the process, injected or preloaded, or one loaded
  by :func:`start_collection`): :func:`annotate`, :func:`label_graph_node`,
  :func:`shim_status`, :func:`shim_flush`.
* **The daemon** (cuptimond) over its control socket: :func:`status`,
  :func:`flush`, trace windows over any processes chosen by selectors
  (:func:`begin_window`, :func:`end_window`, :func:`trace_window`...).
* **PyTorch's monitor API** (``torch.profiler``'s experimental CUPTI
  monitor) with the same names and result shapes: switch with
  ``import cuptimon as monitor``.  See :mod:`cuptimon.monitor`.

``python -m cuptimon status`` is a small cuptimonctl.  Errors are
:class:`CuptimonError` (a RuntimeError) subclasses: :class:`DaemonError`
carries the daemon's message, :class:`NoDaemonError` names the socket.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from . import _shim
from ._annotate import annotate
from ._control import Client, default_control_socket, request
from ._errors import (CuptimonError, DaemonError, DaemonTimeoutError, NoDaemonError,
                      ProtocolError, ShimError)
from .monitor import (CuptimonMonitor, begin_trace_window, enable_hes_early, end_trace_window,
                      get_monitor, is_hes_enabled, monitor_stats, pop_user_annotation,
                      prepare_trace_window, push_user_annotation, start_collection,
                      start_trace_window, stop_collection)
from .daemon import (TraceWindow, annotations_of, begin_window, end_window, flush, ping,
                      prepare_window, read_trace, start_window, status, trace_window, windows)

__version__ = "0.1.0"

step = _shim.step
step_end = _shim.step_end

__all__ = [
    # errors
    "CuptimonError", "DaemonError", "NoDaemonError", "DaemonTimeoutError", "ProtocolError",
    "ShimError",
    # in-process
    "annotate", "step", "step_end", "label_graph_node", "shim_status", "shim_flush", "shim_loaded", "load_shim",
    # daemon
    "Client", "request", "default_control_socket", "status", "ping", "flush", "windows",
    "prepare_window", "begin_window", "start_window", "end_window", "trace_window",
    "TraceWindow", "read_trace", "annotations_of",
    # PyTorch's monitor API
    "CuptimonMonitor", "start_collection", "stop_collection", "monitor_stats", "get_monitor",
    "prepare_trace_window", "start_trace_window", "begin_trace_window", "end_trace_window",
    "push_user_annotation", "pop_user_annotation", "enable_hes_early", "is_hes_enabled",
    "torch_integration",
]


def label_graph_node(graph_node_id: int, name: str) -> int:
    """Names a CUDA graph node (its CUgraphNode id, as in CUPTI records'
    graphNodeId) so that the kernels it replays carry ``name`` in traces
    (cuptimon_label_graph_node).  Returns 0, or a negative errno when the
    shim is not loaded (-ENODEV) or refused; never raises."""
    return _shim.label_graph_node(graph_node_id, name)


def shim_status() -> Optional[Dict[str, Any]]:
    """The shim's counters in this process (cuptimon_get_status): started,
    connected, cupti_version, buffers_completed/sent/released/lost,
    requests_declined, dropped_records, foreign_buffers, connects,
    pool_slots, pool_free, slot_size, plus "library" (its path) and
    "version".  None when the shim is not loaded in this process."""
    return _shim.status()


def shim_flush(forced: bool = False) -> int:
    """Asks CUPTI in this process to complete its buffers now
    (cuptimon_flush); the shim hands them to the daemon.  Returns 0 or a
    negative errno (-ENODEV without a shim)."""
    return _shim.flush(forced)


def shim_loaded() -> bool:
    """True when libcuptimon.so is loaded in this process."""
    return _shim.loaded()


def load_shim(path: Optional[str] = None, start: bool = True) -> Dict[str, Any]:
    """Loads libcuptimon.so into this process if it is not there yet
    (``path``, else $CUPTIMON_LIB, else by name) and, with ``start``, calls
    cuptimon_init().  Returns :func:`shim_status`.  Raises ShimError."""
    _shim.load(path)
    if start:
        rc = _shim.init()
        if rc < 0:
            import os
            raise ShimError(f"cuptimon_init() failed: {os.strerror(-rc)}")
    return _shim.status() or {}


from . import torch_integration  # noqa: E402  (never imports torch)
