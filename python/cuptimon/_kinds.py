"""CUPTI activity kinds by the names cuptimon uses (CUpti_ActivityKind)."""

from __future__ import annotations

import os
from typing import Iterable, List, Optional, Tuple, Union

MEMCPY = 1
MEMSET = 2
KERNEL = 3
DRIVER = 4
RUNTIME = 5
CONCURRENT_KERNEL = 10
MARKER = 12
MARKER_DATA = 13
OVERHEAD = 17
MEMCPY2 = 22
CUDA_EVENT = 36
SYNCHRONIZATION = 38
EXTERNAL_CORRELATION = 39

#: The names the daemon and CUPTIMON_ACTIVITIES accept.
KIND_NAMES = {
    "kernel": CONCURRENT_KERNEL,
    "memcpy": MEMCPY,
    "memset": MEMSET,
    "runtime": RUNTIME,
    "driver": DRIVER,
    "external_correlation": EXTERNAL_CORRELATION,
    "overhead": OVERHEAD,
    "cuda_event": CUDA_EVENT,
    "synchronization": SYNCHRONIZATION,
    "marker": MARKER,
    "marker_data": MARKER_DATA,
    "memcpy2": MEMCPY2,
}
NAMES_BY_KIND = {v: k for k, v in KIND_NAMES.items()}

#: The shim's always-on kinds when CUPTIMON_ACTIVITIES is not set.
DEFAULT_ALWAYS_ON: Tuple[int, ...] = (CONCURRENT_KERNEL, MEMCPY, MEMSET)
#: What a window adds by default (the daemon's default, PyTorch's
#: _default_trace_window_activities).
DEFAULT_WINDOW: Tuple[int, ...] = (CONCURRENT_KERNEL, MEMCPY, MEMSET, RUNTIME, DRIVER,
                                   EXTERNAL_CORRELATION, OVERHEAD, CUDA_EVENT, SYNCHRONIZATION)

Kind = Union[int, str]


def kind_number(k: Kind) -> int:
    """A kind given as a number, a numeric string or a name, as a number.
    Raises ValueError for an unknown name."""
    if isinstance(k, bool):
        raise ValueError(f"not an activity kind: {k!r}")
    if isinstance(k, int):
        return int(k)
    s = str(k).strip().lower()
    if s.isdigit():
        return int(s)
    # Accept cupti-python / CUPTI spellings: "CONCURRENT_KERNEL",
    # "ActivityKind.RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY".
    s = s.rsplit(".", 1)[-1]
    if s.startswith("cupti_activity_kind_"):
        s = s[len("cupti_activity_kind_"):]
    if s == "concurrent_kernel":
        return CONCURRENT_KERNEL
    if s in KIND_NAMES:
        return KIND_NAMES[s]
    raise ValueError(f"unknown activity kind {k!r} (known: {', '.join(KIND_NAMES)}, "
                     "or a CUpti_ActivityKind number)")


def request_kinds(activities: Optional[Iterable[Kind]]) -> Optional[List[Union[int, str]]]:
    """The "activities" field of a window request: numbers as numbers, names
    as the daemon's names, None (the daemon's default) when not given."""
    if activities is None:
        return None
    if isinstance(activities, (str, int)):
        activities = [activities]
    out: List[Union[int, str]] = []
    for a in activities:
        try:
            out.append(int(a))  # enums (IntEnum) and numbers
        except (TypeError, ValueError):
            out.append(kind_number(a))
    if not out:
        return None
    return out


def always_on(env: Optional[str] = None) -> Tuple[int, ...]:
    """The shim's always-on kinds, from CUPTIMON_ACTIVITIES as the shim
    parses it (unknown names are ignored, as the shim does)."""
    if env is None:
        env = os.environ.get("CUPTIMON_ACTIVITIES", "")
    if not env.strip():
        return DEFAULT_ALWAYS_ON
    out = []
    for part in env.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            out.append(kind_number(part))
        except ValueError:
            pass
    return tuple(out) if out else DEFAULT_ALWAYS_ON


def env_value(activities: Iterable[Kind]) -> str:
    """A CUPTIMON_ACTIVITIES value for ``activities``."""
    return ",".join(str(kind_number(a) if not isinstance(a, int) else int(a))
                    for a in activities)
