#!/usr/bin/env python3
"""torch-launch: a launch-heavy PyTorch loop for cuptimon's job-side benchmark.

Many tiny ops on one small CUDA tensor (x.add_(1), --ops times), between two
torch.cuda.synchronize() calls, timed inside Python with
time.perf_counter_ns().  After --warmup ops (allocator, lazy module loading,
and with --kineto one profiled warm-up so that the profiler's one-time start
is not in a measured loop), the loop is measured --reps times; with --kineto
each measured loop runs in its own torch.profiler.profile(activities=[CPU,
CUDA]) (Kineto), entered before the first synchronize and left after the
second, and the time to leave it (the profiler's collection) is reported
apart.  Writes a JSON report (--report, atomically), then sleeps --linger-s.

Imports nothing but torch and the standard library.  Exit status 0 on
success; any exception is printed and exits 1.
"""
import argparse
import json
import os
import statistics
import sys
import time
import traceback


def loaded_libs():
    """libcupti*, libcuptimon* and bare-cupti objects mapped in this process."""
    cupti, shim, bare = set(), set(), set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6:
                    p = parts[-1]
                    base = os.path.basename(p)
                    if base.startswith("libcuptimon"):
                        shim.add(p)
                    elif base.startswith("libcupti.") or base.startswith("libcupti-"):
                        cupti.add(p)
                    elif base.startswith("bare-cupti"):
                        bare.add(p)
    except OSError:
        pass
    return sorted(cupti), sorted(shim), sorted(bare)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, default=20000, help="ops per measured loop (default 20000)")
    ap.add_argument("--reps", type=int, default=3, help="measured loops (default 3)")
    ap.add_argument("--warmup", type=int, default=2000, help="warm-up ops (default 2000)")
    ap.add_argument("--kineto", action="store_true",
                    help="run each measured loop under torch.profiler (CPU + CUDA)")
    ap.add_argument("--report", metavar="FILE", help="write a JSON report here")
    ap.add_argument("--linger-s", type=float, default=0.0,
                    help="sleep this long after the report before exiting")
    a = ap.parse_args()

    t_proc = time.time_ns()
    import torch
    t_import = time.time_ns()
    if not torch.cuda.is_available():
        sys.stderr.write("torch-launch: torch.cuda.is_available() is False\n")
        return 3
    dev = torch.device("cuda", 0)
    x = torch.zeros(16, device=dev)
    torch.cuda.synchronize()
    t_cuda = time.time_ns()

    profile = ProfilerActivity = None
    if a.kineto:
        from torch.profiler import ProfilerActivity, profile

    def loop(n):
        for _ in range(n):
            x.add_(1)

    # Warm-up: the same ops; under --kineto also one profiled loop.
    loop(a.warmup)
    torch.cuda.synchronize()
    if a.kineto:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            loop(max(1, a.warmup // 4))
            torch.cuda.synchronize()

    reps, stops = [], []
    for _ in range(a.reps):
        prof = None
        if a.kineto:
            prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            prof.__enter__()
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        loop(a.ops)
        torch.cuda.synchronize()
        t1 = time.perf_counter_ns()
        reps.append(t1 - t0)
        if prof is not None:
            s0 = time.perf_counter_ns()
            prof.__exit__(None, None, None)
            stops.append(time.perf_counter_ns() - s0)
    expect = float(a.warmup + (a.warmup // 4 if a.kineto else 0) + a.ops * a.reps)
    value = float(x[0].item())

    cupti, shim, bare = loaded_libs()
    rep = {
        "program": "torch-launch",
        "pid": os.getpid(),
        "ops": a.ops,
        "reps": a.reps,
        "warmup": a.warmup,
        "kineto": a.kineto,
        "loop_ns": reps,
        "loop_ns_median": int(statistics.median(reps)) if reps else None,
        "ns_per_op_median": statistics.median(reps) / a.ops if reps and a.ops else None,
        "profiler_stop_ns": stops,
        "result_ok": value == expect,
        "process_start_ns": t_proc,
        "import_ns": t_import - t_proc,
        "cuda_init_ns": t_cuda - t_import,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "device_name": torch.cuda.get_device_name(0),
        "libcupti_loaded": cupti,
        "cuptimon_loaded": shim,
        "bare_cupti_loaded": bare,
        "cuda_injection64_path": os.environ.get("CUDA_INJECTION64_PATH"),
        "python": sys.version.split()[0],
    }
    if a.report:
        tmp = a.report + ".tmp"
        with open(tmp, "w") as f:
            json.dump(rep, f, indent=1)
        os.rename(tmp, a.report)
    print("torch-launch: pid %d, %d x %d ops, median %.1f ms (%.2f us/op)%s" % (
        os.getpid(), a.reps, a.ops, (rep["loop_ns_median"] or 0) / 1e6, (rep["ns_per_op_median"] or 0) / 1e3,
        " under torch.profiler" if a.kineto else ""))
    sys.stdout.flush()
    if a.linger_s > 0:
        time.sleep(a.linger_s)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except BaseException:  # noqa: B902 -- the benchmark wants the traceback and a status
        traceback.print_exc()
        sys.exit(1)
