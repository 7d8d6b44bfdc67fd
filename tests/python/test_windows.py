"""Trace windows over real workload processes (the fake CUDA job under the
injected shim), opened with the selector API."""

import os
import time

import pytest

import cuptimon
from conftest import session_of, wait_for


def kernels_of(events, pid):
    return [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"
            and e.get("pid") == pid]


def test_window_by_pid(daemon, workload):
    p = workload("--kernels", 120000, "--rate", 20000)
    assert wait_for(lambda: session_of(daemon, p.pid), 10), "the workload did not connect"
    time.sleep(0.3)
    w = cuptimon.begin_window(pid=p.pid)
    assert w["state"] == "active" and w["pids"] == [p.pid]
    assert w["start_unix_ns"] > 0
    time.sleep(0.6)
    r = cuptimon.end_window(w["window"])
    assert r["state"] == "done" and r["window"] == w["window"]
    path = r["output"]
    assert os.path.isfile(path), path
    events = cuptimon.read_trace(path)
    kern = kernels_of(events, p.pid)
    assert len(kern) > 1000, f"only {len(kern)} kernels of pid {p.pid} in {path}"
    assert {e["pid"] for e in events if "pid" in e} == {p.pid}
    # Launched in the window: their launch API calls are there as well.  As
    # in PyTorch's monitor, a runtime or a driver call in the window keeps
    # its GPU work: a launch whose cudaLaunchKernel began just before the
    # start but whose cuLaunchKernel began inside has only the driver call.
    api = {e["args"]["correlation"] for e in events
           if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("pid") == p.pid}
    assert {e["args"]["correlation"] for e in kern} <= api
    summ = {x["pid"]: x for x in r["summary"]["processes"]}
    assert summ[p.pid]["kernels"] == len(kern)
    # Ending again returns the result.
    assert cuptimon.end_window(w["window"])["output"] == path
    assert any(x["window"] == w["window"] and x["state"] == "done" for x in cuptimon.windows())
    p.wait(30)
    assert p.returncode == 0, p.stderr.read()


def test_trace_window_by_label_with_output(daemon, workload, tmp_path):
    # They linger, so that a loaded machine's slow start still finds them.
    a = workload("--kernels", 120000, "--rate", 20000, "--linger-ms", 5000,
                 env={"CUPTIMON_LABEL": "pytest-a"})
    b = workload("--kernels", 120000, "--rate", 20000, "--linger-ms", 5000,
                 env={"CUPTIMON_LABEL": "pytest-b"})
    assert wait_for(lambda: session_of(daemon, a.pid) and session_of(daemon, b.pid), 10)
    out = tmp_path / "label-window.json"
    with cuptimon.trace_window(label="pytest-a", output=str(out),
                               activities=["kernel", "runtime", "driver"]) as w:
        assert w.window is not None and w.result is None
        assert w.begin_reply["pids"] == [a.pid]
        # A process in an open window cannot be in another one.
        with pytest.raises(cuptimon.DaemonError) as ei:
            cuptimon.begin_window(pid=a.pid)
        assert ei.value.code == "EBUSY" and "already in open window" in str(ei.value)
        time.sleep(0.5)
    assert w.result["state"] == "done"
    assert w.trace_path == str(out) and out.is_file()
    assert kernels_of(w.events(a.pid), a.pid)
    assert not w.events(b.pid)
    assert sorted(w.result["kinds"]) == [4, 5, 10]


def test_prepare_then_start(daemon, workload):
    p = workload("--kernels", 120000, "--rate", 20000)
    assert wait_for(lambda: session_of(daemon, p.pid), 10)
    w = cuptimon.prepare_window(pid=[p.pid])
    assert w["state"] == "prepared"
    s = cuptimon.start_window(w["window"])
    assert s["state"] == "active"
    time.sleep(0.4)
    r = cuptimon.end_window()  # the newest
    assert r["window"] == w["window"] and r["state"] == "done"
    assert kernels_of(cuptimon.read_trace(r["output"], pid=p.pid), p.pid)


def test_window_with_duration_ends_by_itself(daemon, workload):
    p = workload("--kernels", 120000, "--rate", 20000)
    assert wait_for(lambda: session_of(daemon, p.pid), 10)
    w = cuptimon.begin_window(pid=p.pid, duration_s=0.4)
    done = wait_for(lambda: [x for x in cuptimon.windows()
                             if x["window"] == w["window"] and x["state"] == "done"], 20)
    assert done, "the window did not end by itself"
    r = cuptimon.end_window(w["window"])
    assert r["state"] == "done" and os.path.isfile(r["output"])


def test_trace_window_ends_when_the_block_raises(daemon, workload):
    p = workload("--kernels", 120000, "--rate", 20000)
    assert wait_for(lambda: session_of(daemon, p.pid), 10)
    with pytest.raises(KeyError):
        with cuptimon.trace_window(pid=p.pid) as w:
            raise KeyError("boom")
    assert w.result is not None and w.result["state"] == "done"
