"""PyTorch integration: ``torch.profiler.record_function`` scopes and
``torch.cuda.nvtx`` ranges as cuptimon annotations.

    import torch
    import cuptimon
    cuptimon.torch_integration.install()     # start_collection() also does it

    with torch.profiler.record_function("forward"):   # -> annotation "forward"
        y = model(x)
    torch.cuda.nvtx.range_push("backward")            # -> annotation "backward"
    y.sum().backward()
    torch.cuda.nvtx.range_pop()

:func:`install` wraps ``record_function.__enter__``/``__exit__`` (which also
covers its use as a decorator) and ``torch.cuda.nvtx.range_push`` /
``range_pop`` (which also covers ``torch.cuda.nvtx.range(...)``) so that
they push and pop a cuptimon annotation on the same thread, inside the
original scope.  The original behaviour (the torch profiler's events, the
NVTX ranges) is unchanged.  In a cuptimon trace window, the API calls and
kernels launched inside such a scope carry its name (args "annotation");
outside a window it costs one ctypes call into the shim, and nothing at all
when the shim is not loaded.

cuptimon never imports torch: :func:`install` does nothing and returns
False unless ``torch`` is already in ``sys.modules``; call it after
``import torch``.  Not covered: ``torch.cuda.nvtx.range_start``/``range_end``
(process-wide ranges that are not nested per thread) and C++-side
``RECORD_FUNCTION`` scopes (e.g. ``_RecordFunctionFast`` in compiled code);
CUPTI's own NVTX capture (``CUPTIMON_ACTIVITIES=...,marker`` with
``NVTX_INJECTION64_PATH``) shows NVTX ranges as markers instead.
"""

from __future__ import annotations

import functools
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple

from . import _shim

__all__ = ["install", "uninstall", "installed"]

_lock = threading.Lock()
# (owner, attribute name, original value) of everything wrapped.
_saved: List[Tuple[Any, str, Any]] = []


def _record_function_class() -> Optional[type]:
    mod = sys.modules.get("torch.autograd.profiler")
    cls = getattr(mod, "record_function", None) if mod is not None else None
    if cls is None:
        prof = sys.modules.get("torch.profiler")
        cls = getattr(prof, "record_function", None) if prof is not None else None
    return cls if isinstance(cls, type) else None


def _wrap_record_function(cls: type) -> None:
    orig_enter = cls.__dict__.get("__enter__", cls.__enter__)
    orig_exit = cls.__dict__.get("__exit__", cls.__exit__)

    @functools.wraps(orig_enter)
    def __enter__(self, *a, **kw):
        r = orig_enter(self, *a, **kw)
        _shim.push_annotation(getattr(self, "name", "record_function"))
        return r

    @functools.wraps(orig_exit)
    def __exit__(self, *a, **kw):
        _shim.pop_annotation()
        return orig_exit(self, *a, **kw)

    _saved.append((cls, "__enter__", cls.__dict__.get("__enter__")))
    _saved.append((cls, "__exit__", cls.__dict__.get("__exit__")))
    cls.__enter__ = __enter__
    cls.__exit__ = __exit__


def _wrap_nvtx(mod: Any) -> bool:
    push, pop = getattr(mod, "range_push", None), getattr(mod, "range_pop", None)
    if not callable(push) or not callable(pop):
        return False

    @functools.wraps(push)
    def range_push(msg, *a, **kw):
        r = push(msg, *a, **kw)
        _shim.push_annotation(msg)
        return r

    @functools.wraps(pop)
    def range_pop(*a, **kw):
        _shim.pop_annotation()
        return pop(*a, **kw)

    _saved.append((mod, "range_push", push))
    _saved.append((mod, "range_pop", pop))
    mod.range_push = range_push
    mod.range_pop = range_pop
    return True


def install(record_function: bool = True, nvtx: bool = True) -> bool:
    """Makes ``torch.profiler.record_function`` scopes (``record_function``)
    and ``torch.cuda.nvtx`` ranges (``nvtx``) push and pop cuptimon
    annotations.  Idempotent.  Returns True when the hook is in place, False
    when torch is not imported (nothing is done; torch is never imported
    here)."""
    if "torch" not in sys.modules:
        return False
    with _lock:
        if _saved:
            return True
        if record_function:
            cls = _record_function_class()
            if cls is not None:
                _wrap_record_function(cls)
        if nvtx:
            mod = sys.modules.get("torch.cuda.nvtx")
            if mod is not None:
                _wrap_nvtx(mod)
        return bool(_saved)


def uninstall() -> None:
    """Restores what :func:`install` wrapped."""
    with _lock:
        while _saved:
            owner, name, orig = _saved.pop()
            if orig is None:
                try:
                    delattr(owner, name)
                except AttributeError:
                    pass
            else:
                setattr(owner, name, orig)


def installed() -> bool:
    """True while the hook is installed."""
    return bool(_saved)


def wrapped() -> Dict[str, bool]:
    """What the hook wraps now: {"record_function": bool, "nvtx": bool}."""
    names = {n for _, n, _ in _saved}
    return {"record_function": "__enter__" in names, "nvtx": "range_push" in names}
