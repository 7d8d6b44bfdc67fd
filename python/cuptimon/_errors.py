"""Exceptions raised by the cuptimon package.

Every exception the package raises on purpose derives from
:class:`CuptimonError`, itself a :class:`RuntimeError` (the type PyTorch's
monitor raises), so ``except RuntimeError`` keeps working for code written
against ``torch.profiler``'s monitor.

    CuptimonError (RuntimeError)
     +-- DaemonError          the daemon answered with REPLY_ERROR
     +-- NoDaemonError        nothing listens on the control socket (also a ConnectionError)
     +-- DaemonTimeoutError   no reply in time (also a TimeoutError)
     +-- ProtocolError        the reply is not a valid cuptimon frame
     +-- ShimError            libcuptimon.so cannot be loaded or started
"""

from __future__ import annotations

from typing import Any, Dict, Optional

__all__ = [
    "CuptimonError",
    "DaemonError",
    "NoDaemonError",
    "DaemonTimeoutError",
    "ProtocolError",
    "ShimError",
]


class CuptimonError(RuntimeError):
    """Base class of every error raised by the cuptimon package."""


class DaemonError(CuptimonError):
    """The daemon refused a request (a REPLY_ERROR frame).

    ``str(err)`` is the daemon's own message.  Attributes:

    * ``code``: the daemon's errno name, e.g. ``"ENOENT"`` (no such window,
      a selector that matches no session), ``"EBUSY"`` (a process is already
      in an open window), ``"EINVAL"`` (a bad argument), ``"EACCES"`` (this
      user may not control the daemon), ``"EIO"`` (writing the trace failed);
    * ``message``: the daemon's message (the same as ``str(err)``);
    * ``reply``: the whole decoded reply body (a dict);
    * ``socket_path``: the control socket that was asked.
    """

    def __init__(self, message: str, code: Optional[str] = None,
                 reply: Optional[Dict[str, Any]] = None,
                 socket_path: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reply = reply if reply is not None else {}
        self.socket_path = socket_path


class NoDaemonError(CuptimonError, ConnectionError):
    """No cuptimond listens on the control socket.

    ``str(err)`` names the socket path; ``socket_path`` holds it and ``errno``
    the connect error (ENOENT: no socket file, ECONNREFUSED: a stale one).
    """

    def __init__(self, socket_path: str, err: Optional[int] = None,
                 detail: str = "") -> None:
        msg = (f"the cuptimon daemon is not running: nothing listens on {socket_path}"
               + (f" ({detail})" if detail else "")
               + "; start it with 'cuptimond' (or 'systemctl start cuptimond'), or pass"
               " socket_path= / set CUPTIMON_CONTROL_SOCKET")
        CuptimonError.__init__(self, msg)
        self.socket_path = socket_path
        self.errno = err
        self.strerror = detail or None

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class DaemonTimeoutError(CuptimonError, TimeoutError):
    """The daemon did not answer within the timeout."""

    def __init__(self, message: str, socket_path: Optional[str] = None) -> None:
        CuptimonError.__init__(self, message)
        self.socket_path = socket_path

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ProtocolError(CuptimonError):
    """The peer's reply is not a valid cuptimon frame or not JSON, or the
    connection closed before a whole reply arrived."""


class ShimError(CuptimonError):
    """libcuptimon.so (the shim) cannot be found, loaded or started."""
