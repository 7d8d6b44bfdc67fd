"""The control client against the real daemon, the socket-path rule, the
framing against fake servers, and the CLI."""

import errno
import json
import os
import socket
import struct
import subprocess
import sys
import threading

import pytest

import cuptimon
from cuptimon import _control


def test_status(daemon):
    st = cuptimon.status()
    assert st["daemon"]["protocol"] == 1
    assert st["daemon"]["control_socket"] == daemon.control
    assert isinstance(st["sessions"], list)
    # Explicit path and a Client say the same.
    assert cuptimon.status(socket_path=daemon.control)["daemon"]["pid"] == st["daemon"]["pid"]
    assert cuptimon.Client(daemon.control).call("status")["daemon"]["pid"] == st["daemon"]["pid"]
    assert cuptimon.request("ping")["version"] == st["daemon"]["version"]


def test_flush(daemon):
    r = cuptimon.flush()
    assert r["fence"] is False
    assert r["completed"] <= r["sessions"]
    assert r["late"] == [] and r["running"] == [] and "elapsed_ms" in r
    r = cuptimon.flush(forced=True, timeout_s=5)
    assert r["fence"] is True


def test_flush_bad_timeout_is_daemon_error(daemon):
    with pytest.raises(cuptimon.DaemonError) as ei:
        cuptimon.flush(timeout_s=1000)
    assert ei.value.code == "EINVAL"
    assert "outside" in str(ei.value)


def test_no_daemon_names_the_path(tmp_path, monkeypatch):
    path = str(tmp_path / "nothing" / "control.sock")
    with pytest.raises(cuptimon.NoDaemonError) as ei:
        cuptimon.status(socket_path=path)
    assert path in str(ei.value)
    assert ei.value.socket_path == path
    assert ei.value.errno == errno.ENOENT
    assert isinstance(ei.value, RuntimeError) and isinstance(ei.value, ConnectionError)
    # Through the environment as well.
    monkeypatch.setenv("CUPTIMON_CONTROL_SOCKET", path)
    with pytest.raises(cuptimon.NoDaemonError, match=path):
        cuptimon.status()


def test_stale_socket_is_no_daemon(tmp_path):
    path = str(tmp_path / "stale.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()  # the file stays, nobody listens
    with pytest.raises(cuptimon.NoDaemonError) as ei:
        cuptimon.status(socket_path=path)
    assert ei.value.errno == errno.ECONNREFUSED
    assert path in str(ei.value)


def test_bad_window_id(daemon):
    with pytest.raises(cuptimon.DaemonError) as ei:
        cuptimon.end_window(987654)
    assert str(ei.value) == "there is no window 987654"
    assert ei.value.code == "ENOENT"
    assert ei.value.reply["message"] == "there is no window 987654"
    assert isinstance(ei.value, RuntimeError)
    with pytest.raises(cuptimon.DaemonError, match="there is no window 987654"):
        cuptimon.start_window(987654)


def test_selector_that_matches_nothing(daemon):
    with pytest.raises(cuptimon.DaemonError) as ei:
        cuptimon.begin_window(label="no-such-label-anywhere")
    assert ei.value.code == "ENOENT"
    assert "matches no session" in str(ei.value)


def test_bad_activity_kind(daemon):
    with pytest.raises(ValueError, match="unknown activity kind"):
        cuptimon.begin_window(all=True, activities=["kernel", "bogus"])
    with pytest.raises(cuptimon.DaemonError, match="out of range"):
        cuptimon.prepare_window(all=True, activities=[9999])


def test_selector_is_required():
    with pytest.raises(ValueError, match="choose the processes"):
        cuptimon.begin_window()
    with pytest.raises(ValueError, match="cannot be combined"):
        cuptimon.begin_window(pid=1, all=True)


def test_unknown_op_is_daemon_error(daemon):
    with pytest.raises(cuptimon.DaemonError) as ei:
        cuptimon.request("no_such_op")
    assert ei.value.code == "EOPNOTSUPP"
    assert "unknown op" in str(ei.value)


def test_windows_list(daemon):
    ws = cuptimon.windows()
    assert isinstance(ws, list)


# ---- socket path rule --------------------------------------------------------

def test_default_socket_env_wins(monkeypatch):
    monkeypatch.setenv("CUPTIMON_CONTROL_SOCKET", "/x/y.sock")
    assert cuptimon.default_control_socket() == "/x/y.sock"


def test_default_socket_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("CUPTIMON_CONTROL_SOCKET", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setattr(os.path, "exists", lambda p: False)
    assert cuptimon.default_control_socket() == f"{tmp_path}/cuptimon/control.sock"


def test_default_socket_root_and_user(monkeypatch):
    monkeypatch.delenv("CUPTIMON_CONTROL_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(os.path, "exists", lambda p: False)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert cuptimon.default_control_socket() == "/run/cuptimon/control.sock"
    monkeypatch.setattr(os, "geteuid", lambda: 1234)
    assert cuptimon.default_control_socket() == "/tmp/cuptimon-1234/control.sock"
    # A relative XDG_RUNTIME_DIR is ignored, as cuptimonctl does.
    monkeypatch.setenv("XDG_RUNTIME_DIR", "relative")
    assert cuptimon.default_control_socket() == "/tmp/cuptimon-1234/control.sock"


def test_default_socket_falls_back_to_the_node_daemon(monkeypatch):
    monkeypatch.delenv("CUPTIMON_CONTROL_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 1234)
    monkeypatch.setattr(os.path, "exists", lambda p: p == "/run/cuptimon/control.sock")
    assert cuptimon.default_control_socket() == "/run/cuptimon/control.sock"


# ---- framing against fake servers -------------------------------------------

class FakeServer:
    """A one-connection server that reads a request frame and answers with
    whatever `reply(header, body)` returns (bytes, or None: say nothing)."""

    def __init__(self, path, reply):
        self.path = path
        self.reply = reply
        self.request = None
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(1)
        self.done = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        c, _ = self.sock.accept()
        try:
            hdr = b""
            while len(hdr) < 16:
                hdr += c.recv(16 - len(hdr))
            magic, ver, typ, length, flags = struct.unpack("<IHHII", hdr)
            body = b""
            while len(body) < length:
                body += c.recv(length - len(body))
            self.request = (magic, ver, typ, length, flags, json.loads(body))
            out = self.reply(hdr, body)
            if out is not None:
                c.sendall(out)
            self.done.wait(5)
        finally:
            c.close()
            self.sock.close()


def frame(typ, body, magic=0x4D545043, version=1, flags=0):
    return struct.pack("<IHHII", magic, version, typ, len(body), flags) + body


def test_request_frame_layout(tmp_path):
    srv = FakeServer(str(tmp_path / "s.sock"), lambda h, b: frame(0x0501, b'{"ok":true}'))
    r = cuptimon.request("status", socket_path=srv.path, extra=1, skipped=None)
    srv.done.set()
    assert r == {"ok": True}
    magic, ver, typ, length, flags, body = srv.request
    assert (magic, ver, typ, flags) == (0x4D545043, 1, 0x0401, 0)
    assert body == {"op": "status", "extra": 1}


def test_reply_error_carries_code_and_message(tmp_path):
    srv = FakeServer(str(tmp_path / "s.sock"),
                     lambda h, b: frame(0x0502, b'{"error":"EACCES","message":"uid 5 may not"}'))
    with pytest.raises(cuptimon.DaemonError) as ei:
        cuptimon.status(socket_path=srv.path)
    srv.done.set()
    assert ei.value.code == "EACCES" and str(ei.value) == "uid 5 may not"


@pytest.mark.parametrize("reply,match", [
    (frame(0x0501, b"{}", magic=0x12345678), "magic"),
    (frame(0x0501, b"{}", version=7), "version 7"),
    (frame(0x0501, b"{}", flags=1), "flags"),
    (frame(0x0501, b"not json"), "not JSON"),
    (frame(0x0101, b"{}"), "unexpected reply type"),
    (frame(0x0501, b"{}")[:10], "closed the connection"),
])
def test_bad_replies_are_protocol_errors(tmp_path, reply, match):
    srv = FakeServer(str(tmp_path / "s.sock"), lambda h, b: reply)

    def closer():
        srv.done.set()
    threading.Timer(0.2, closer).start()
    with pytest.raises(cuptimon.ProtocolError, match=match):
        cuptimon.status(socket_path=srv.path, timeout=5)
    srv.done.set()


def test_timeout(tmp_path):
    srv = FakeServer(str(tmp_path / "s.sock"), lambda h, b: None)
    with pytest.raises(cuptimon.DaemonTimeoutError) as ei:
        cuptimon.status(socket_path=srv.path, timeout=0.3)
    srv.done.set()
    assert isinstance(ei.value, TimeoutError)
    assert srv.path in str(ei.value)


def test_header_codec():
    f = _control.encode_frame(0x0401, b"{}")
    assert len(f) == 18 and f[:4] == b"CPTM"
    assert _control.decode_header(f[:16]) == (0x0401, 2)


# ---- CLI ----------------------------------------------------------------------

def run_cli(daemon, *args):
    return subprocess.run([sys.executable, "-m", "cuptimon", *args], env=daemon.env(),
                          capture_output=True, text=True, timeout=60)


def test_cli_status(daemon):
    p = run_cli(daemon, "status")
    assert p.returncode == 0, p.stderr
    assert "cuptimond" in p.stdout and "sessions:" in p.stdout
    p = run_cli(daemon, "status", "--json")
    assert json.loads(p.stdout)["daemon"]["control_socket"] == daemon.control


def test_cli_flush_and_errors(daemon, tmp_path):
    p = run_cli(daemon, "flush", "--forced")
    assert p.returncode == 0 and "flushed" in p.stdout, p.stderr
    p = run_cli(daemon, "end-window", "987654")
    assert p.returncode == 1 and "there is no window 987654" in p.stderr
    p = run_cli(daemon, "-c", str(tmp_path / "none.sock"), "status")
    assert p.returncode == 1 and str(tmp_path / "none.sock") in p.stderr
    p = run_cli(daemon, "begin-window")
    assert p.returncode == 2 and "choose the processes" in p.stderr
