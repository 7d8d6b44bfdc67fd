"""``cuptimon.annotate``: a named range as a context manager or decorator."""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from . import _shim

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["annotate"]


class annotate:  # noqa: N801 - used like contextlib's lower-case helpers
    """A user annotation around a block or a function::

        with cuptimon.annotate("forward"):
            y = model(x)

        @cuptimon.annotate("step")
        def step(batch): ...

    Calls cuptimon_push_annotation(name) on entry and
    cuptimon_pop_annotation() on exit, on the calling thread.  In a trace
    window the CUDA API calls and kernels launched inside carry the name
    (args "annotation" of the trace events).  Outside a window the shim
    returns at once; without a shim in the process this is a no-op.  It
    never raises, and the block's exceptions pass through.  One object may
    be entered from several threads and recursively.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> "annotate":
        _shim.push_annotation(self.name)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        _shim.pop_annotation()
        return False

    def __call__(self, func: F) -> F:
        name = self.name

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            _shim.push_annotation(name)
            try:
                return func(*args, **kwargs)
            finally:
                _shim.pop_annotation()

        return wrapper  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"cuptimon.annotate({self.name!r})"
