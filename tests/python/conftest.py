"""Fixtures for the cuptimon Python package tests.

Run through ``make check`` (tests/python/pytest.sh starts a private
cuptimond and sets CUPTIMON_TEST_DAEMON=1, CUPTIMON_CONTROL_SOCKET,
CUPTIMON_SOCKET, top_builddir...).  Run directly, with top_builddir set
(``top_builddir=BUILD top_srcdir=. PYTHONPATH=python pytest tests/python``),
the session starts its own daemon.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.environ.get("top_srcdir") or os.path.dirname(os.path.dirname(HERE))
PKGDIR = os.path.join(SRCDIR, "python")
if PKGDIR not in sys.path:
    sys.path.insert(0, PKGDIR)


class Build:
    """Paths into the build tree."""

    def __init__(self, top):
        self.top = top
        self.cuptimond = os.path.join(top, "daemon", "cuptimond")
        self.ctl = os.path.join(top, "cli", "cuptimonctl")
        self.shim = os.path.join(top, "client-lib", ".libs", "libcuptimon.so")
        self.fakecupti = os.path.join(top, "tests", "fakecupti", ".libs", "libcupti-fake.so")
        self.workload = os.path.join(top, "tests", "fakecupti", "cuptimon-workload")
        self.asan_rt = os.environ.get("CUPTIMON_TEST_ASAN_RT", "")


@pytest.fixture(scope="session")
def build():
    top = os.environ.get("top_builddir")
    if not top:
        pytest.skip("top_builddir is not set (run through make check)")
    b = Build(os.path.abspath(top))
    for p in (b.cuptimond, b.shim, b.fakecupti, b.workload):
        if not os.path.exists(p):
            pytest.skip(f"{p} is not built (make check TESTS= builds it)")
    return b


class Daemon:
    """The daemon under test: its sockets and output directory."""

    def __init__(self, control, producer, output, proc=None):
        self.control = control
        self.producer = producer
        self.output = output
        self.proc = proc

    def env(self, **extra):
        """An environment for child processes that talk to this daemon."""
        e = dict(os.environ)
        e["CUPTIMON_CONTROL_SOCKET"] = self.control
        e["CUPTIMON_SOCKET"] = self.producer
        e["PYTHONPATH"] = PKGDIR + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
        e["PYTHONDONTWRITEBYTECODE"] = "1"
        for k in ("CUDA_INJECTION64_PATH", "LD_PRELOAD", "CUPTIMON_LIB",
                  "CUPTIMON_LIBCUPTI_PATH", "CUPTIMON_LABEL", "CUPTIMON_ACTIVITIES"):
            e.pop(k, None)
        e.update({k: str(v) for k, v in extra.items()})
        return e


def _wait_answer(control, proc, seconds=10.0):
    import cuptimon
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            cuptimon.status(socket_path=control, timeout=1.0)
            return
        except cuptimon.CuptimonError:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"cuptimond exited with {proc.returncode} at startup")
            time.sleep(0.05)
    raise RuntimeError(f"cuptimond did not answer on {control}")


@pytest.fixture(scope="session")
def daemon(build):
    if os.environ.get("CUPTIMON_TEST_DAEMON") == "1":
        d = Daemon(os.environ["CUPTIMON_CONTROL_SOCKET"], os.environ["CUPTIMON_SOCKET"],
                   os.environ.get("CUPTIMON_TEST_OUTPUT", ""))
        _wait_answer(d.control, None)
        yield d
        return
    tmp = tempfile.mkdtemp(prefix="cuptimon-pytest.")
    d = Daemon(os.path.join(tmp, "control.sock"), os.path.join(tmp, "producer.sock"),
               os.path.join(tmp, "out"))
    log = open(os.path.join(tmp, "daemon.log"), "wb")
    d.proc = subprocess.Popen([build.cuptimond, "--socket", d.producer, "--control-socket",
                               d.control, "--output-dir", d.output, "--flush-period", "0.3"],
                              stdout=log, stderr=log)
    old = {k: os.environ.get(k) for k in ("CUPTIMON_CONTROL_SOCKET", "CUPTIMON_SOCKET")}
    os.environ["CUPTIMON_CONTROL_SOCKET"] = d.control
    os.environ["CUPTIMON_SOCKET"] = d.producer
    try:
        _wait_answer(d.control, d.proc)
        yield d
    finally:
        d.proc.terminate()
        try:
            d.proc.wait(10)
        except subprocess.TimeoutExpired:
            d.proc.kill()
        log.close()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def wait_for(pred, seconds=10.0, step=0.05):
    """Polls pred() until it is true (returns its value) or time is up (None)."""
    deadline = time.monotonic() + seconds
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            return None
        time.sleep(step)


def session_of(daemon, pid):
    """The daemon's connected session of pid, or None."""
    import cuptimon
    st = cuptimon.status(socket_path=daemon.control)
    for s in st.get("sessions", []):
        if s.get("pid") == pid and s.get("connected"):
            return s
    return None


@pytest.fixture
def workload(build, daemon):
    """Starts cuptimon-workload processes under the shim (injected like the
    CUDA driver does it); each is waited for (or killed) at teardown."""
    procs = []

    def start(*args, env=None):
        e = daemon.env(CUDA_INJECTION64_PATH=build.shim, **(env or {}))
        p = subprocess.Popen([build.workload, "--quiet", *map(str, args)], env=e,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append(p)
        return p

    yield start
    for p in procs:
        ended = p.poll()
        if ended is None:
            p.kill()
        out, err = p.communicate()
        if ended not in (None, 0):  # shown with the test's report if it fails
            print(f"workload pid {p.pid} exited with {ended}: {err.decode(errors='replace')[-4000:]}")


@pytest.fixture
def inproc(build, daemon, tmp_path):
    """Runs a Python script in a fresh interpreter that talks to the test
    daemon, with the shim to load (CUPTIMON_LIB) and the libcupti double
    (CUPTIMON_LIBCUPTI_PATH).  Returns (returncode, stdout, stderr); the
    script may print one JSON line starting with 'RESULT ' (parsed into the
    4th element)."""

    def run(code, timeout=120, **env):
        script = tmp_path / f"script-{len(list(tmp_path.iterdir()))}.py"
        script.write_text(code)
        e = daemon.env(CUPTIMON_LIB=build.shim, CUPTIMON_LIBCUPTI_PATH=build.fakecupti,
                       FAKECUPTI=build.fakecupti, **env)
        if build.asan_rt:
            e["LD_PRELOAD"] = build.asan_rt
            e["ASAN_OPTIONS"] = "detect_leaks=0"
        p = subprocess.run([sys.executable, str(script)], env=e, capture_output=True,
                           text=True, timeout=timeout)
        result = None
        for line in p.stdout.splitlines():
            if line.startswith("RESULT "):
                result = json.loads(line[len("RESULT "):])
        if p.returncode != 0:
            print(p.stdout)
            print(p.stderr, file=sys.stderr)
        return p.returncode, p.stdout, p.stderr, result

    return run
