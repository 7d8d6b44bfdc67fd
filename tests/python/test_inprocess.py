"""The in-process API in a fresh Python that loads the shim with ctypes and
drives the libcupti double's fake CUDA API (fakecuda_launch_kernel) to make
kernels, with windows over itself through PyTorch's monitor API."""

import os

PRELUDE = r'''
import ctypes, json, os, sys, time
import cuptimon

fake = ctypes.CDLL(os.environ["FAKECUPTI"], mode=ctypes.RTLD_GLOBAL)
fake.fakecuda_init.restype = ctypes.c_int
fake.fakecuda_launch_kernel.restype = ctypes.c_uint32
fake.fakecuda_launch_kernel.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint32,
                                        ctypes.c_uint64, ctypes.c_uint64]
fake.fakecuda_synchronize.restype = None
libc = ctypes.CDLL(None)
libc.strdup.restype = ctypes.c_void_p
libc.strdup.argtypes = [ctypes.c_char_p]
_names = {}

def launch(name, stream=1, graph_id=0, node=0):
    # Record names must outlive the process's last flush: never freed.
    p = _names.get(name)
    if p is None:
        p = _names[name] = ctypes.cast(libc.strdup(name.encode()), ctypes.c_char_p)
    return fake.fakecuda_launch_kernel(p, 0, stream, graph_id, node)

def kernels(events):
    out = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            key = e["name"] + "|" + str(e.get("args", {}).get("annotation"))
            out[key] = out.get(key, 0) + 1
    return out

def result(**kw):
    print("RESULT " + json.dumps(kw), flush=True)
'''


def test_monitor_api_end_to_end(inproc):
    rc, out, err, r = inproc(PRELUDE + r'''
res = {}
res["loaded_before"] = cuptimon.shim_loaded()
try:
    cuptimon.begin_trace_window()
    res["begin_without_collection"] = "no error"
except RuntimeError as e:
    res["begin_without_collection"] = str(e)
m = cuptimon.start_collection()
res["same_monitor"] = cuptimon.get_monitor() is m
try:
    cuptimon.start_collection()
except RuntimeError as e:
    res["second_start"] = str(e)
st = cuptimon.shim_status()
res["shim"] = {k: st[k] for k in ("started", "connected", "cupti_version", "library")}
res["init"] = fake.fakecuda_init()

# Outside a window (the shim loaded): annotations are cheap and not traced.
n = 100000
t0 = time.perf_counter()
for _ in range(n):
    with cuptimon.annotate("outside"):
        pass
res["outside_us"] = (time.perf_counter() - t0) / n * 1e6
with cuptimon.annotate("outside"):
    launch("_Z6beforev")
fake.fakecuda_synchronize()

res["extra"] = list(cuptimon.begin_trace_window())
res["stats_in_window"] = {k: v for k, v in cuptimon.monitor_stats().items()
                          if k.startswith("trace_window")}
res["label_rc"] = cuptimon.label_graph_node((5 << 32) + 7, "my-graph-node")

@cuptimon.annotate("backward")
def backward():
    launch("_Z8backwardv")

for i in range(20):
    with cuptimon.annotate("forward"):
        launch("_Z7forwardv")
    backward()
    cuptimon.push_user_annotation("optimizer")
    with cuptimon.annotate("inner"):
        launch("_Z5innerv")
    launch("_Z4stepv")
    cuptimon.pop_user_annotation()
    launch("_Z5plainv")
launch("_Z5graphv", graph_id=5, node=(5 << 32) + 7)
fake.fakecuda_synchronize()
w = cuptimon.end_trace_window()
res["keys"] = sorted(w)
res["kernels"] = kernels(w["events"])
res["pids"] = sorted({e["pid"] for e in w["events"] if "pid" in e})
res["mypid"] = os.getpid()
res["user_annotations"] = sorted(set(w["user_annotations"].values()))
res["graph_labels"] = sorted({e["args"].get("graph node label") for e in w["events"]
                              if e.get("cat") == "kernel" and "graph node label" in e.get("args", {})})
res["trace_path"] = w["trace_path"]
res["trace_exists"] = os.path.isfile(w["trace_path"])
res["start_ns"] = w["start_ns"]
res["extra_activities"] = w["extra_activities"]
res["trm"] = {str(k): len(v) for k, v in w["thread_resource_map"].items()}
res["summary_kernels"] = w["summary"]["processes"][0]["kernels"]
stats = cuptimon.monitor_stats()
res["stats_keys"] = sorted(stats)
res["stats_session_pid"] = (stats["session"] or {}).get("pid")
final = cuptimon.stop_collection()
res["final_started"] = final["started"]
res["after_stop"] = cuptimon.get_monitor() is None
result(**res)
''')
    assert rc == 0, err
    assert r["loaded_before"] is False
    assert "not active" in r["begin_without_collection"]
    assert r["same_monitor"] and "already active" in r["second_start"]
    assert r["shim"]["started"] and r["shim"]["connected"] and r["shim"]["cupti_version"] == 130001
    assert r["shim"]["library"].startswith(os.path.dirname(os.environ.get("top_builddir", "/")))
    assert r["init"] == 0
    print(f"annotate with the shim loaded, outside a window: {r['outside_us']:.3f} us")
    assert r["outside_us"] < 20, f"annotate costs {r['outside_us']:.2f} us outside a window"
    # The window adds the API kinds, external correlation and the NVTX (marker)
    # kinds to the always-on ones.
    assert set(r["extra"]) == {4, 5, 12, 13, 17, 36, 38, 39}
    assert r["extra_activities"] == r["extra"]
    assert r["stats_in_window"]["trace_window_prepared"] and r["stats_in_window"]["trace_window_active"]
    assert r["label_rc"] == 0
    # PyTorch's keys, plus cuptimon's.
    assert {"events", "extra_activities", "user_annotations", "thread_resource_map",
            "start_ns", "trace_path", "summary"} <= set(r["keys"])
    assert r["pids"] == [r["mypid"]]
    assert r["trace_exists"] and r["start_ns"] > 0
    assert r["trm"] == {str(r["mypid"]): 1}
    k = r["kernels"]
    assert not any(key.startswith("before") for key in k), k
    assert k.get("forward()|forward") == 20, k
    assert k.get("backward()|backward") == 20, k
    assert k.get("inner()|inner") == 20, k
    assert k.get("step()|optimizer") == 20, k
    assert k.get("plain()|None") == 20, k
    assert r["summary_kernels"] == sum(k.values())
    assert r["user_annotations"] == ["backward", "forward", "inner", "optimizer"]
    assert r["graph_labels"] == ["my-graph-node"]
    assert {"started", "activities", "buffers_completed", "dropped_records", "output_dir",
            "trace_window_prepared", "trace_window_active", "trace_window_start_ns",
            "shim", "session"} <= set(r["stats_keys"])
    assert r["stats_session_pid"] == r["mypid"]
    assert r["final_started"] is False and r["after_stop"]


def test_prepare_start_and_window_errors(inproc, tmp_path):
    outdir = tmp_path / "mon"
    rc, out, err, r = inproc(PRELUDE + r'''
res = {}
cuptimon.start_collection(sys.argv[1] if len(sys.argv) > 1 else os.environ["OUTDIR"])
fake.fakecuda_init()
try:
    cuptimon.end_trace_window()
except RuntimeError as e:
    res["end_without"] = str(e)
try:
    cuptimon.start_trace_window()
except RuntimeError as e:
    res["start_without"] = str(e)
res["extra"] = list(cuptimon.prepare_trace_window(["kernel", "runtime", "external_correlation"]))
try:
    cuptimon.prepare_trace_window()
except RuntimeError as e:
    res["prepare_twice"] = str(e)
launch("_Z8preparedv")      # after prepare, before start: filtered out
fake.fakecuda_synchronize()
time.sleep(0.05)
cuptimon.start_trace_window()
try:
    cuptimon.start_trace_window()
except RuntimeError as e:
    res["start_twice"] = str(e)
with cuptimon.annotate("in"):
    for _ in range(10):
        launch("_Z7startedv")
fake.fakecuda_synchronize()
w = cuptimon.end_trace_window()
res["kernels"] = kernels(w["events"])
res["path"] = w["trace_path"]
res["exists"] = os.path.isfile(w["trace_path"])
# A second window, left open: stop_collection ends it.
cuptimon.begin_trace_window()
launch("_Z4lastv")
fake.fakecuda_synchronize()
res["stopped"] = cuptimon.stop_collection()["trace_window_prepared"]
windows = [x for x in cuptimon.windows() if os.getpid() in x["pids"]]
res["states"] = sorted(x["state"] for x in windows)
res["hes"] = cuptimon.enable_hes_early()
result(**res)
''', OUTDIR=str(outdir))
    assert rc == 0, err
    assert "No prepared trace window" in r["end_without"]
    assert "No prepared trace window" in r["start_without"]
    assert set(r["extra"]) == {5, 39}
    assert "already prepared" in r["prepare_twice"]
    assert "already active" in r["start_twice"]
    assert r["kernels"] == {"started()|in": 10}, r["kernels"]
    assert r["exists"] and os.path.dirname(r["path"]) == str(outdir)
    assert os.path.basename(r["path"]).startswith("window-")
    assert r["stopped"] is False
    assert r["states"] == ["done", "done"]
    assert r["hes"] is False


def test_injected_shim_is_found_without_start_collection(inproc, build):
    # The "driver" loads the shim (CUDA_INJECTION64_PATH at fakecuda_init);
    # cuptimon finds that copy and opens a window over this process with the
    # Pythonic API.
    rc, out, err, r = inproc(PRELUDE + r'''
res = {"before": cuptimon.shim_loaded()}
with cuptimon.annotate("too-early"):   # no shim yet: a no-op
    pass
fake.fakecuda_init()
res["after"] = cuptimon.shim_loaded()
res["library"] = cuptimon.shim_status()["library"]
def connected():
    return cuptimon.shim_status()["connected"]
t0 = time.time()
while not connected() and time.time() - t0 < 10:
    time.sleep(0.01)
with cuptimon.trace_window() as w:
    with cuptimon.annotate("step"):
        for _ in range(5):
            launch("_Z4stepv")
    fake.fakecuda_synchronize()
res["kernels"] = kernels(w.events(os.getpid()))
res["annotations"] = sorted(set(w.annotations().values()))
res["loaded_copies"] = sum(1 for l in open("/proc/self/maps") if "libcuptimon" in l and "r-xp" in l)
result(**res)
''', CUDA_INJECTION64_PATH=build.shim)
    assert rc == 0, err
    assert r["before"] is False and r["after"] is True
    assert r["library"].endswith(".so") or ".so." in r["library"]
    assert r["kernels"] == {"step()|step": 5}, r["kernels"]
    assert r["annotations"] == ["step"]
    assert r["loaded_copies"] == 1


TORCH_STUB = r'''
import types, contextlib
torch = types.ModuleType("torch")
torch.__path__ = []
autograd = types.ModuleType("torch.autograd")
autograd_profiler = types.ModuleType("torch.autograd.profiler")
profiler = types.ModuleType("torch.profiler")
cuda = types.ModuleType("torch.cuda")
nvtx = types.ModuleType("torch.cuda.nvtx")
calls = []

class record_function:
    def __init__(self, name, args=None):
        self.name = name
    def __enter__(self):
        calls.append(("rf-enter", self.name))
        return self
    def __exit__(self, *exc):
        calls.append(("rf-exit", self.name))
        return False
    def __call__(self, fn):
        def wrapped(*a, **k):
            with self:
                return fn(*a, **k)
        return wrapped

def range_push(msg):
    calls.append(("push", msg))
    return 0

def range_pop():
    calls.append(("pop",))
    return 0

autograd_profiler.record_function = record_function
profiler.record_function = record_function
nvtx.range_push, nvtx.range_pop = range_push, range_pop

# As torch/cuda/nvtx.py: range() calls the module's range_push/range_pop.
def _nvtx_range(msg, *args, **kwargs):
    nvtx.range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        nvtx.range_pop()
nvtx.range = contextlib.contextmanager(_nvtx_range)
torch.autograd, torch.profiler, torch.cuda = autograd, profiler, cuda
autograd.profiler = autograd_profiler
cuda.nvtx = nvtx
for m in (torch, autograd, autograd_profiler, profiler, cuda, nvtx):
    sys.modules[m.__name__] = m
'''


def test_torch_hook_annotates_record_function_and_nvtx(inproc):
    rc, out, err, r = inproc(PRELUDE + TORCH_STUB + r'''
res = {}
cuptimon.start_collection()          # installs the hook: torch is imported
res["installed"] = cuptimon.torch_integration.installed()
res["wrapped"] = cuptimon.torch_integration.wrapped()
res["idempotent"] = cuptimon.torch_integration.install()
fake.fakecuda_init()
cuptimon.begin_trace_window()
with torch.profiler.record_function("rf-scope"):
    launch("_Z2rfv")

@torch.autograd.profiler.record_function("rf-deco")
def deco():
    launch("_Z4decov")
deco()
torch.cuda.nvtx.range_push("nvtx-scope")
launch("_Z4nvtxv")
torch.cuda.nvtx.range_pop()
with torch.cuda.nvtx.range("ctx-{}", 3):
    launch("_Z3ctxv")
fake.fakecuda_synchronize()
w = cuptimon.end_trace_window()
res["kernels"] = kernels(w["events"])
res["calls"] = calls
cuptimon.torch_integration.uninstall()
res["after_uninstall"] = cuptimon.torch_integration.installed()
res["restored"] = (torch.cuda.nvtx.range_push is range_push and
                   "__enter__" in record_function.__dict__ and
                   record_function.__enter__.__name__ == "__enter__" and
                   not hasattr(record_function.__enter__, "__wrapped__"))
cuptimon.stop_collection()
result(**res)
''')
    assert rc == 0, err
    assert r["installed"] and r["idempotent"]
    assert r["wrapped"] == {"record_function": True, "nvtx": True}
    assert r["kernels"] == {"rf()|rf-scope": 1, "deco()|rf-deco": 1, "nvtx()|nvtx-scope": 1,
                            "ctx()|ctx-3": 1}, r["kernels"]
    # The originals still ran, in order.
    assert r["calls"] == [["rf-enter", "rf-scope"], ["rf-exit", "rf-scope"],
                          ["rf-enter", "rf-deco"], ["rf-exit", "rf-deco"],
                          ["push", "nvtx-scope"], ["pop"], ["push", "ctx-3"], ["pop"]]
    assert r["after_uninstall"] is False and r["restored"]


def test_enclosing_annotation_across_threads(inproc):
    # As PyTorch's autograd engine: the main thread is inside "backward"
    # while another thread launches the kernels.
    rc, out, err, r = inproc(PRELUDE + r'''
import threading
cuptimon.start_collection()
fake.fakecuda_init()
cuptimon.begin_trace_window()

def worker(n, name):
    for _ in range(n):
        launch(name)

with cuptimon.annotate("backward"):
    t = threading.Thread(target=worker, args=(7, "_Z6workerv"))
    t.start(); t.join()
    launch("_Z4mainv")
t = threading.Thread(target=worker, args=(3, "_Z7outsidev"))
t.start(); t.join()
fake.fakecuda_synchronize()
w = cuptimon.end_trace_window()
out = {}
for e in w["events"]:
    if e.get("cat") == "kernel":
        a = e["args"]
        key = "%s|%s|%s" % (e["name"], a.get("annotation"), a.get("enclosing annotation"))
        out[key] = out.get(key, 0) + 1
result(kernels=out, ranges=[x["name"] for x in w["annotation_ranges"]])
cuptimon.stop_collection()
''')
    assert rc == 0, err
    assert r["kernels"] == {"worker()|None|backward": 7, "main()|backward|None": 1,
                            "outside()|None|None": 3}, r["kernels"]
    assert r["ranges"] == ["backward"]


def test_mark_enclosing_innermost():
    from cuptimon.daemon import mark_enclosing
    base = 1_000_000_000

    def api(corr, us):
        return {"ph": "X", "cat": "cuda_runtime", "ts": us, "dur": 1, "args": {"correlation": corr}}

    def kern(corr, **a):
        return {"ph": "X", "cat": "kernel", "ts": 0, "dur": 1,
                "args": dict(correlation=corr, **a)}

    # epoch [0, 100us) holds step-1 [10, 20) and step-2 [30, 40)
    ranges = [("epoch", base, base + 100_000, 1), ("step-1", base + 10_000, base + 20_000, 1),
              ("step-2", base + 30_000, base + 40_000, 1)]
    ev = [api(1, 15), kern(1), api(2, 25), kern(2), api(3, 35), kern(3), api(4, 150), kern(4),
          api(5, 15), kern(5, annotation="own")]
    assert mark_enclosing(ev, ranges, base) == 3
    got = {e["args"]["correlation"]: e["args"].get("enclosing annotation")
           for e in ev if e["cat"] == "kernel"}
    assert got == {1: "step-1", 2: "epoch", 3: "step-2", 4: None, 5: None}


def test_step_marks_profiler_steps(inproc):
    """cuptimon.step() without torch.profiler: each step is a
    user_annotation "ProfilerStep#N" on the calling thread from one call to
    the next, with the GPU work launched in it under a gpu_user_annotation
    slice; numbers count every call, inside a window or not; a step with
    an annotation still open above it is refused (EBUSY)."""
    rc, out, err, r = inproc(PRELUDE + r'''
import threading
res = {"no_shim": cuptimon.step()}                      # None: no shim loaded yet
cuptimon.start_collection()
res["init"] = fake.fakecuda_init()
res["no_window"] = [cuptimon.step(), cuptimon.step()]   # 0, 1: counted, not traced
cuptimon.begin_trace_window()
marks = []
for i in range(3):
    t0 = time.time_ns()
    marks.append((cuptimon.step(), t0, time.time_ns()))
    with cuptimon.annotate("work"):
        launch("_Z4workv")
    launch("_Z6directv")
cuptimon.push_user_annotation("open")
res["busy"] = cuptimon.step()
cuptimon.pop_user_annotation()
t0 = time.time_ns()
res["end"] = cuptimon.step_end()
marks.append((None, t0, time.time_ns()))
res["end_again"] = cuptimon.step_end()
fake.fakecuda_synchronize()
w = cuptimon.end_trace_window()
res["marks"] = marks
res["tid"] = threading.get_native_id()
res["ua"] = [e for e in w["events"] if e.get("cat") in ("user_annotation", "gpu_user_annotation")]
res["kernels"] = [e for e in w["events"] if e.get("cat") == "kernel"]
doc = json.load(open(w["trace_path"]))
res["base"] = doc["baseTimeNanoseconds"]
cuptimon.stop_collection()
result(**res)
''')
    assert rc == 0, err
    assert r["no_shim"] is None and r["no_window"] == [0, 1] and r["init"] == 0
    assert [m[0] for m in r["marks"][:3]] == [2, 3, 4]
    assert r["busy"] == -16 and r["end"] == 0 and r["end_again"] == 0
    base = r["base"]
    steps = {e["name"]: e for e in r["ua"] if e["cat"] == "user_annotation"
             and e["name"].startswith("ProfilerStep#")}
    assert sorted(steps) == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"], r["ua"]
    for i, n in enumerate((2, 3, 4)):
        e = steps["ProfilerStep#%d" % n]
        assert e["tid"] == r["tid"] and e["args"]["depth"] == 0 and "clipped" not in e["args"]
        b, x = base + round(e["ts"] * 1000), base + round((e["ts"] + e["dur"]) * 1000)
        # Begins inside its step() call, ends inside the next (or step_end).
        assert r["marks"][i][1] - 2000 <= b <= r["marks"][i][2] + 2000, (e, r["marks"][i])
        assert r["marks"][i + 1][1] - 2000 <= x <= r["marks"][i + 1][2] + 2000, (e, r["marks"][i + 1])
        # "work" nested in it; the kernel launched in the step directly
        # is under the step's GPU slice, with its External id.
        work = [w for w in r["ua"] if w["cat"] == "user_annotation" and w["name"] == "work"
                and w["args"].get("parent external id") == e["args"]["External id"]]
        assert len(work) == 1 and work[0]["args"]["depth"] == 1, work
        direct = [k for k in r["kernels"] if k["args"].get("External id") == e["args"]["External id"]]
        assert len(direct) == 1 and direct[0]["name"] == "direct()", direct
        g = [x for x in r["ua"] if x["cat"] == "gpu_user_annotation"
             and x["args"]["External id"] == e["args"]["External id"]]
        assert len(g) == 1 and g[0]["ts"] == direct[0]["ts"] and g[0]["dur"] == direct[0]["dur"], g
