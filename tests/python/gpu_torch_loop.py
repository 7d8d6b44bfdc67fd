"""A PyTorch training loop through the cuptimon package on a real GPU (run
by tests/python/gpu-torch.sh; not collected by pytest).

    python3 gpu_torch_loop.py MODE RESULT.json
    MODE: injected  the shim came in by CUDA_INJECTION64_PATH at cuInit
          loaded    no shim until start_collection() loads it (CUPTIMON_LIB)

Each step runs forward in torch.profiler.record_function("forward"),
backward in torch.cuda.nvtx.range("backward") and the optimizer in
cuptimon.annotate("optimizer"), with PyTorch's monitor API from cuptimon
(start_collection, begin_trace_window, end_trace_window).  Hard checks
(exit 1 when one fails): the window holds this process's kernels and their
launch calls; every kernel the main thread launched carries an annotation;
each step's "forward" range holds the same number of kernels and no other
kernel runs inside it on its stream; the optimizer's kernels carry
"optimizer" or torch's own "Optimizer.step#..." (the hook also annotates
torch's internal record_function scopes); the kernels that the autograd
engine launches from its device thread (CUPTI's external correlation is per
thread, so they carry no annotation) have "backward" as their enclosing
annotation.
"""

import collections
import json
import os
import sys
import time

import torch

import cuptimon

mode, out_path = sys.argv[1], sys.argv[2]
STEPS = int(os.environ.get("STEPS", "5"))
report = {"mode": mode, "checks": {}, "torch": torch.__version__}
failed = []


def check(name, ok, detail=""):
    report["checks"][name] = {"ok": bool(ok), "detail": detail}
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + str(detail) if detail else ''}", flush=True)
    if not ok:
        failed.append(name)


def maps(word):
    return sorted({ln.split()[-1] for ln in open("/proc/self/maps") if word in ln})


torch.manual_seed(0)
dev = torch.device("cuda")
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
    torch.nn.Linear(16 * 32 * 32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
lossf = torch.nn.CrossEntropyLoss()
x = torch.randn(64, 3, 32, 32, device=dev)
y = torch.randint(0, 10, (64,), device=dev)


def step():
    with torch.profiler.record_function("forward"):
        loss = lossf(model(x), y)
    with torch.cuda.nvtx.range("backward"):
        loss.backward()
    with cuptimon.annotate("optimizer"):
        opt.step()
        opt.zero_grad(set_to_none=True)


for _ in range(3):  # warm-up: cuDNN/cuBLAS choices, lazy module loading
    step()
torch.cuda.synchronize()
report["shim_before"] = cuptimon.shim_loaded()
report["libcupti"] = maps("libcupti")
check("shim presence before start_collection matches the mode",
      report["shim_before"] == (mode == "injected"), report["shim_before"])

t0 = time.time()
m = cuptimon.start_collection(os.environ.get("WIN_DIR"))
report["start_collection_s"] = time.time() - t0
st = cuptimon.shim_status()
report["shim"] = st
check("the shim runs and is connected", st and st["started"] and st["connected"], st)
check("the torch hook is installed", cuptimon.torch_integration.installed(),
      cuptimon.torch_integration.wrapped())
check("one libcuptimon in the process", len(maps("libcuptimon")) == 1, maps("libcuptimon"))

extra = cuptimon.begin_trace_window()
report["extra_activities"] = list(extra)
for _ in range(STEPS):
    step()
torch.cuda.synchronize()
t0 = time.time()
res = cuptimon.end_trace_window()
report["end_trace_window_s"] = time.time() - t0
report["trace_path"] = res["trace_path"]
ev = res["events"]
pid = os.getpid()
kern = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"]
api = {e["args"]["correlation"]: e for e in ev
       if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
       and "correlation" in e.get("args", {})}
report["events"] = len(ev)
report["kernels"] = len(kern)
check("the window holds kernels of this process",
      kern and all(e["pid"] == pid for e in kern), len(kern))
unlinked = [e for e in kern if e["args"].get("correlation") not in api]
check("every kernel has its launch call", not unlinked, len(unlinked))

by_ann = collections.Counter(str(e["args"].get("annotation")) for e in kern)
report["kernels_by_annotation"] = dict(by_ann)
print("kernels by annotation:", dict(by_ann), flush=True)
# The launching thread of a kernel is its launch call's tid (CUPTI's thread
# id); the main thread is the one that launched the forward kernels.
launch_tid = {}
for e in kern:
    a = api.get(e["args"].get("correlation"))
    launch_tid[id(e)] = a.get("tid") if a else None
tids = collections.Counter(str(launch_tid[id(e)]) for e in kern)
report["kernels_by_launch_tid"] = dict(tids)
fwd_tids = {launch_tid[id(e)] for e in kern if e["args"].get("annotation") == "forward"}
check("the forward kernels come from one thread", len(fwd_tids) == 1, fwd_tids)
main_tid = next(iter(fwd_tids)) if fwd_tids else None
main = [e for e in kern if launch_tid[id(e)] == main_tid]
others = [e for e in kern if launch_tid[id(e)] != main_tid]
report["main_thread_kernels"] = len(main)
report["other_thread_kernels"] = dict(collections.Counter(
    "%s|%s" % (e["args"].get("annotation"), e["args"].get("enclosing annotation")) for e in others))
print("kernels of other threads (annotation|enclosing annotation):",
      report["other_thread_kernels"], flush=True)
no_ann = [e["name"] for e in main if not e["args"].get("annotation")]
check("every kernel launched by the main thread carries an annotation",
      main and not no_ann, collections.Counter(no_ann).most_common(5))
# The autograd engine's thread launches backward's kernels inside the main
# thread's "backward" range: they carry it as the enclosing annotation.
unenclosed = [e["name"] for e in kern if not e["args"].get("annotation")
              and e["args"].get("enclosing annotation") != "backward"]
check("every kernel without an annotation is enclosed by \"backward\"",
      not unenclosed, collections.Counter(unenclosed).most_common(5))
check("other threads' kernels exist (autograd's device thread)", len(others) > 0, len(others))

fwd = collections.defaultdict(list)
for e in kern:
    if e["args"].get("annotation") == "forward":
        fwd[e["args"]["External id"]].append(e)
sizes = sorted(len(v) for v in fwd.values())
report["forward_ranges"] = sizes
check(f"{STEPS} forward ranges of equal size", len(fwd) == STEPS and len(set(sizes)) == 1, sizes)
opt_ok = [e for e in kern if str(e["args"].get("annotation")).startswith(("optimizer", "Optimizer."))]
check("the optimizer's kernels are annotated", len(opt_ok) > 0,
      {k: v for k, v in by_ann.items() if k.startswith(("optimizer", "Optimizer."))})
# Enclosure on the GPU: no kernel of another range runs on a forward
# range's stream between that range's first kernel start and last kernel end.
def ts(e):
    return float(e["ts"])


bad = 0
for k, v in fwd.items():
    s = v[0]["args"].get("stream")
    lo, hi = min(ts(e) for e in v), max(ts(e) + float(e["dur"]) for e in v)
    bad += sum(1 for e in kern if e["args"].get("stream") == s and lo <= ts(e) < hi
               and e["args"].get("External id") != k)
check("no other kernel runs inside a forward range on its stream", bad == 0, bad)
names = collections.defaultdict(collections.Counter)
for e in kern:
    names[str(e["args"].get("annotation"))][e["name"][:60]] += 1
report["kernel_names_by_annotation"] = {k: dict(v.most_common(6)) for k, v in names.items()}
report["user_annotations"] = sorted(set(res["user_annotations"].values()))
report["stats"] = {k: v for k, v in cuptimon.monitor_stats().items() if k not in ("shim", "session")}
cuptimon.stop_collection()
report["failed"] = failed
with open(out_path, "w") as f:
    json.dump(report, f, indent=1, default=str)
print("FAILED: " + ", ".join(failed) if failed else "all checks passed", flush=True)
sys.exit(1 if failed else 0)
