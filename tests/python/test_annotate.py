"""annotate() and the other in-process calls in a process without the shim:
no-ops that never raise and cost almost nothing."""

import threading
import time

import pytest

import cuptimon
from cuptimon import _shim


@pytest.fixture(autouse=True)
def no_shim():
    if cuptimon.shim_loaded():
        pytest.skip("libcuptimon is loaded in the pytest process")


def test_annotate_without_shim_is_cheap():
    a = cuptimon.annotate("step")
    n = 100_000
    t0 = time.perf_counter()
    for _ in range(n):
        with cuptimon.annotate("forward"):
            pass
    t1 = time.perf_counter()
    for _ in range(n):
        with a:
            pass
    t2 = time.perf_counter()
    per_new, per_reused = (t1 - t0) / n * 1e6, (t2 - t1) / n * 1e6
    print(f"annotate without shim: {per_new:.3f} us (new object), {per_reused:.3f} us (reused)")
    assert per_new < 20 and per_reused < 20
    assert not _shim._stack(), "unbalanced annotation stack"


def test_push_pop_without_shim():
    for _ in range(10_000):
        assert cuptimon.push_user_annotation("x") is None
    for _ in range(10_001):  # one more pop than pushes: still nothing happens
        assert cuptimon.pop_user_annotation() is None
    assert not _shim._stack()


def test_decorator_passes_values_and_exceptions():
    @cuptimon.annotate("step")
    def f(x, y=1):
        """doc"""
        return x + y

    assert f(1, y=2) == 3
    assert f.__name__ == "f" and f.__doc__ == "doc"

    @cuptimon.annotate("boom")
    def g():
        raise ValueError("inner")

    with pytest.raises(ValueError, match="inner"):
        g()
    with pytest.raises(KeyError):
        with cuptimon.annotate("block"):
            raise KeyError("k")
    assert not _shim._stack()


def test_annotate_odd_names_never_raise():
    for name in ("", "x" * 100_000, "nul\0inside", "ünïcødé", 42, None):
        with cuptimon.annotate(name):
            pass
    assert repr(cuptimon.annotate("a")) == "cuptimon.annotate('a')"


def test_annotate_threads():
    errors = []

    def worker():
        try:
            for _ in range(2000):
                with cuptimon.annotate("t"):
                    pass
            assert not _shim._stack()
        except Exception as e:  # pragma: no cover
            errors.append(e)

    ts = [threading.Thread(target=worker) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_in_process_calls_without_shim():
    assert cuptimon.shim_status() is None
    assert cuptimon.label_graph_node(1, "n") == -19
    assert cuptimon.shim_flush() == -19
    assert cuptimon.enable_hes_early() is False and cuptimon.is_hes_enabled() is False
    assert cuptimon.get_monitor() is None and cuptimon.monitor_stats() is None
    assert cuptimon.stop_collection() is None
    for fn in (cuptimon.begin_trace_window, cuptimon.prepare_trace_window,
               cuptimon.start_trace_window, cuptimon.end_trace_window):
        with pytest.raises(RuntimeError, match="not active"):
            fn()


def test_load_failure_is_shim_error(monkeypatch, tmp_path):
    monkeypatch.setenv("CUPTIMON_LIB", str(tmp_path / "libcuptimon.so"))
    monkeypatch.setattr(_shim, "SONAMES", ("libcuptimon-does-not-exist.so",))
    with pytest.raises(cuptimon.ShimError, match="CUPTIMON_LIB"):
        cuptimon.start_collection()
    assert cuptimon.get_monitor() is None
