"""The control protocol: one request frame to cuptimond, one reply.

A frame is a 16-byte little-endian header followed by ``length`` bytes of
body (proto/cuptimon-proto.h)::

    u32 magic   0x4d545043 ("CPTM")
    u16 version 1
    u16 type    0x0401 CONTROL (request), 0x0501 REPLY_OK, 0x0502 REPLY_ERROR
    u32 length  body bytes
    u32 flags   0

Control bodies are JSON objects, ``{"op": "status"}`` and so on; a
REPLY_ERROR body is ``{"error": ERRNO_NAME, "message": TEXT, ...}``.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import struct
import time
from typing import Any, Dict, Optional

from ._errors import DaemonError, DaemonTimeoutError, NoDaemonError, ProtocolError

__all__ = [
    "MAGIC", "VERSION", "MSG_CONTROL", "MSG_REPLY_OK", "MSG_REPLY_ERROR",
    "encode_frame", "decode_header", "default_control_socket", "Client", "request",
    "DEFAULT_TIMEOUT_S", "LONG_TIMEOUT_S",
]

MAGIC = 0x4D545043
VERSION = 1
MSG_CONTROL = 0x0401
MSG_REPLY_OK = 0x0501
MSG_REPLY_ERROR = 0x0502
HEADER = struct.Struct("<IHHII")
HEADER_SIZE = HEADER.size  # 16
#: The protocol's largest body (CUPTIMON_MSG_MAX_BODY); requests must fit.
MAX_BODY = 1 << 20
#: Replies up to this size are accepted (a big window summary may exceed
#: the request limit; a bad header is caught by the magic anyway).
MAX_REPLY_BODY = 64 << 20

#: Default timeout of a request, as cuptimonctl's --timeout.
DEFAULT_TIMEOUT_S = 10.0
#: Ops that wait for flushes and the trace writing (window start/end) get at
#: least this long, as in cuptimonctl.
LONG_TIMEOUT_S = 120.0

SYSTEM_RUNTIME_DIR = "/run/cuptimon"
CONTROL_SOCKET_NAME = "control.sock"
PRODUCER_SOCKET_NAME = "producer.sock"


def encode_frame(msg_type: int, body: bytes) -> bytes:
    """Returns header + body for one frame of type ``msg_type``."""
    return HEADER.pack(MAGIC, VERSION, msg_type, len(body), 0) + body


def decode_header(data: bytes, max_body: int = MAX_REPLY_BODY):
    """Parses a 16-byte header; returns ``(type, length)``.

    Raises :class:`ProtocolError` for a bad magic, version, flags or size."""
    if len(data) != HEADER_SIZE:
        raise ProtocolError(f"short frame header ({len(data)} bytes)")
    magic, version, msg_type, length, flags = HEADER.unpack(data)
    if magic != MAGIC:
        raise ProtocolError(f"bad frame magic 0x{magic:08x} (not a cuptimon daemon?)")
    if version != VERSION:
        raise ProtocolError(f"the daemon speaks protocol version {version}, this "
                            f"package speaks {VERSION}")
    if flags != 0:
        raise ProtocolError(f"bad frame flags 0x{flags:x}")
    if length > max_body:
        raise ProtocolError(f"reply body of {length} bytes is over the {max_body}-byte limit")
    return msg_type, length


def runtime_dir() -> str:
    """The runtime directory a daemon of this user defaults to:
    ``$XDG_RUNTIME_DIR/cuptimon``, else ``/run/cuptimon`` for root, else
    ``/tmp/cuptimon-UID`` (cuptimon__default_runtime_dir)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    if xdg.startswith("/"):
        return xdg + "/cuptimon"
    if os.geteuid() == 0:
        return SYSTEM_RUNTIME_DIR
    return f"/tmp/cuptimon-{os.geteuid()}"


def default_control_socket() -> str:
    """The control socket cuptimonctl would use.

    ``$CUPTIMON_CONTROL_SOCKET`` when set, else ``RUNTIME/control.sock``
    (see :func:`runtime_dir`); a user without a daemon of their own (no
    socket there) talks to the node's, ``/run/cuptimon/control.sock``, when
    that exists."""
    env = os.environ.get("CUPTIMON_CONTROL_SOCKET")
    if env:
        return env
    path = os.path.join(runtime_dir(), CONTROL_SOCKET_NAME)
    system = os.path.join(SYSTEM_RUNTIME_DIR, CONTROL_SOCKET_NAME)
    if not os.path.exists(path) and os.path.exists(system):
        return system
    return path


class Client:
    """A control-socket client.  Each :meth:`call` opens a connection,
    sends one CONTROL frame and reads one reply (the daemon answers every
    request on its own connection, as cuptimonctl does).

    ``socket_path``: the control socket (default
    :func:`default_control_socket`, resolved at each call).  ``timeout``:
    seconds a call may take (default 10; window start and end get at least
    120 s, since they wait for flushes and the trace writing).
    """

    def __init__(self, socket_path: Optional[str] = None,
                 timeout: Optional[float] = None) -> None:
        self.socket_path = os.fspath(socket_path) if socket_path is not None else None
        self.timeout = timeout

    def resolve_path(self) -> str:
        """The socket path this client talks to."""
        return self.socket_path or default_control_socket()

    def call(self, op: str, timeout: Optional[float] = None, **fields: Any) -> Dict[str, Any]:
        """Sends ``{"op": op, **fields}`` (fields that are None are left out)
        and returns the decoded REPLY_OK body.

        Raises :class:`DaemonError` with the daemon's message for a
        REPLY_ERROR, :class:`NoDaemonError` when nothing listens,
        :class:`DaemonTimeoutError` when no reply comes in time and
        :class:`ProtocolError` for a reply that is not a cuptimon frame."""
        req: Dict[str, Any] = {"op": op}
        req.update({k: v for k, v in fields.items() if v is not None})
        if timeout is None:
            timeout = self.timeout
        if timeout is None:
            timeout = DEFAULT_TIMEOUT_S
        return self.request(req, timeout)

    def request(self, req: Dict[str, Any], timeout: float = DEFAULT_TIMEOUT_S) -> Dict[str, Any]:
        """Sends the request object ``req`` as is; see :meth:`call`."""
        path = self.resolve_path()
        body = json.dumps(req, separators=(",", ":")).encode()
        if len(body) > MAX_BODY:
            raise ValueError(f"the request is {len(body)} bytes, over the protocol's "
                             f"{MAX_BODY}-byte limit")
        msg_type, reply = _exchange(path, encode_frame(MSG_CONTROL, body), float(timeout))
        try:
            obj = json.loads(reply.decode("utf-8", "replace")) if reply else {}
        except ValueError as e:
            raise ProtocolError(f"the daemon's reply on {path} is not JSON: "
                                f"{reply[:200]!r}") from e
        if not isinstance(obj, dict):
            raise ProtocolError(f"the daemon's reply on {path} is not a JSON object")
        if msg_type == MSG_REPLY_ERROR:
            msg = obj.get("message") or obj.get("error") or "the daemon refused the request"
            raise DaemonError(str(msg), code=obj.get("error"), reply=obj, socket_path=path)
        if msg_type != MSG_REPLY_OK:
            raise ProtocolError(f"unexpected reply type 0x{msg_type:04x} from {path}")
        return obj


def _exchange(path: str, frame: bytes, timeout: float):
    deadline = time.monotonic() + timeout

    def left() -> float:
        t = deadline - time.monotonic()
        if t <= 0:
            raise socket.timeout()
        return t

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.settimeout(left())
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as e:
            raise NoDaemonError(path, e.errno, os.strerror(e.errno)) from None
        except socket.timeout:
            raise DaemonTimeoutError(f"connecting to the cuptimon daemon on {path} timed out "
                                     f"after {timeout:g} s", path) from None
        except OSError as e:
            if e.errno in (errno.ENAMETOOLONG, errno.EINVAL) or "too long" in str(e):
                raise ValueError(f"control socket path is too long for a Unix socket: {path}") from e
            if e.errno == errno.EACCES:
                raise DaemonError(f"cannot connect to {path}: permission denied",
                                  code="EACCES", socket_path=path) from e
            raise NoDaemonError(path, e.errno, os.strerror(e.errno) if e.errno else str(e)) from None
        try:
            sock.settimeout(left())
            sock.sendall(frame)
            hdr = _recv_exact(sock, HEADER_SIZE, left, path)
            msg_type, length = decode_header(hdr)
            body = _recv_exact(sock, length, left, path)
        except socket.timeout:
            raise DaemonTimeoutError(f"no reply from the cuptimon daemon on {path} within "
                                     f"{timeout:g} s", path) from None
        except (BrokenPipeError, ConnectionResetError) as e:
            raise ProtocolError(f"the daemon on {path} closed the connection: {e}") from None
        return msg_type, body
    finally:
        sock.close()


def _recv_exact(sock: socket.socket, n: int, left, path: str) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        sock.settimeout(left())
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ProtocolError(f"the daemon on {path} closed the connection before a whole "
                                f"reply arrived ({len(buf)} of {n} bytes)")
        buf += chunk
    return bytes(buf)


def request(op: str, *, socket_path: Optional[str] = None, timeout: Optional[float] = None,
            **fields: Any) -> Dict[str, Any]:
    """Sends one control request and returns the daemon's reply (a dict).

    ``cuptimon.request("status")`` is ``cuptimonctl status --json``.  See
    :meth:`Client.call` for the errors."""
    return Client(socket_path, timeout).call(op, **fields)
