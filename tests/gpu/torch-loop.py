#!/usr/bin/env python3
"""torch-loop: a small PyTorch training loop for cuptimon's GPU suite.

A small conv net + MLP trained with AdamW on random data on cuda: a few
warm-up steps (cuBLAS/cuDNN handles, lazy module loading, allocator), then
--steps measured steps between two torch.cuda.synchronize() calls whose
CLOCK_REALTIME times go into the report.  With --profile the measured steps
(and only they) run under torch.profiler.profile(activities=[CPU, CUDA]) and
its chrome trace is exported to --torch-trace.  With --profile-cycles N the
profiler is started and stopped N times in the middle of the run instead.

Imports nothing but torch and the standard library.  Exit status 0 on
success; any exception is printed and exits 1.
"""
import argparse
import json
import os
import sys
import time
import traceback


def loaded_libs():
    """Paths of libcupti* and libcuptimon* mapped in this process."""
    cupti, shim = set(), set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6:
                    p = parts[-1]
                    base = os.path.basename(p)
                    # libcuptimon shares libcupti's prefix: test it first.
                    if base.startswith("libcuptimon"):
                        shim.add(p)
                    elif base.startswith("libcupti.") or base.startswith("libcupti-"):
                        cupti.add(p)
    except OSError:
        pass
    return sorted(cupti), sorted(shim)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20, help="measured training steps (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up steps before them (default 3)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--width", type=int, default=512, help="MLP width (default 512)")
    ap.add_argument("--mlp-only", action="store_true", help="no convolution (no cuDNN)")
    ap.add_argument("--profile", action="store_true",
                    help="run the measured steps under torch.profiler (CPU + CUDA)")
    ap.add_argument("--torch-trace", metavar="FILE", help="where --profile exports its chrome trace")
    ap.add_argument("--profile-cycles", type=int, default=0, metavar="N",
                    help="instead of --profile: N times, --steps unprofiled steps then --steps "
                         "steps under a torch.profiler started and stopped around them (trace "
                         "FILE.K.json for cycle K), then --steps unprofiled steps")
    ap.add_argument("--cycles-without-profiler", action="store_true",
                    help="with --profile-cycles: the same steps, no profiler (a reference)")
    ap.add_argument("--report", metavar="FILE", help="write a JSON report here")
    ap.add_argument("--linger-s", type=float, default=0.0,
                    help="sleep this long after the report before exiting")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if (a.profile or (a.profile_cycles and not a.cycles_without_profiler)) and not a.torch_trace:
        ap.error("--profile and --profile-cycles need --torch-trace FILE")
    if a.profile and a.profile_cycles:
        ap.error("--profile and --profile-cycles are exclusive")

    t_proc = time.time_ns()
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    t_import = time.time_ns()

    if not torch.cuda.is_available():
        sys.stderr.write("torch-loop: torch.cuda.is_available() is False\n")
        return 3
    dev = torch.device("cuda", 0)
    torch.manual_seed(a.seed)
    torch.backends.cudnn.benchmark = False  # the same kernels in every run

    layers = []
    if not a.mlp_only:
        layers += [nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        feat = 16 * 16 * 16
    else:
        feat = 3 * 32 * 32
    layers += [nn.Flatten(), nn.Linear(feat, a.width), nn.ReLU(), nn.Linear(a.width, a.width),
               nn.ReLU(), nn.Linear(a.width, 10)]
    model = nn.Sequential(*layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(a.batch, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def run_steps(n):
        loss = None
        for _ in range(n):
            loss = step()
        torch.cuda.synchronize()
        return loss

    run_steps(a.warmup)

    cycles = []
    if a.profile_cycles:
        # Unprofiled, then profiled, N times, then unprofiled: torch.profiler
        # starts and stops in the middle of the run, as in a job that takes
        # a profile now and then.
        from torch.profiler import ProfilerActivity, profile
        t0 = time.time_ns()
        loss = None
        for k in range(a.profile_cycles):
            loss = run_steps(a.steps)
            prof = None if a.cycles_without_profiler else profile(
                activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            c0 = time.time_ns()
            if prof is not None:
                prof.__enter__()
            s0 = time.time_ns()
            loss = run_steps(a.steps)
            s1 = time.time_ns()
            trace = None
            if prof is not None:
                prof.__exit__(None, None, None)
                trace = "%s.%d.json" % (a.torch_trace, k)
                prof.export_chrome_trace(trace)
            cycles.append({"profiler_start_ns": c0, "steps_start_ns": s0, "steps_end_ns": s1,
                           "profiler_stop_ns": time.time_ns(), "torch_trace": trace})
        loss = run_steps(a.steps)
        t1 = time.time_ns()
    prof = None
    prof_start = prof_stop = None
    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        prof_start = time.time_ns()
        prof.__enter__()
    if not a.profile_cycles:
        t0 = time.time_ns()
        loss = run_steps(a.steps)
        t1 = time.time_ns()
    export_ns = None
    if prof is not None:
        prof.__exit__(None, None, None)
        prof_stop = time.time_ns()
        prof.export_chrome_trace(a.torch_trace)
        export_ns = time.time_ns() - prof_stop
    final_loss = float(loss.item()) if loss is not None else None

    cupti, shim = loaded_libs()
    rep = {
        "program": "torch-loop",
        "pid": os.getpid(),
        "steps": a.steps,
        "warmup": a.warmup,
        "batch": a.batch,
        "mlp_only": a.mlp_only,
        "process_start_ns": t_proc,
        "import_ns": t_import - t_proc,
        "steps_start_ns": t0,
        "steps_end_ns": t1,
        "start_ns": t0,
        "end_ns": t1,
        "profiler_active": prof is not None or bool(cycles and cycles[0]["torch_trace"]),
        "profile_cycles": cycles,
        "profiler_start_ns": prof_start,
        "profiler_stop_ns": prof_stop,
        "trace_export_ns": export_ns,
        "torch_trace": a.torch_trace if prof is not None else None,
        "final_loss": final_loss,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "device_name": torch.cuda.get_device_name(0),
        "libcupti_loaded": cupti,
        "cuptimon_loaded": shim,
        "cuda_injection64_path": os.environ.get("CUDA_INJECTION64_PATH"),
        "python": sys.version.split()[0],
    }
    if a.report:
        tmp = a.report + ".tmp"
        with open(tmp, "w") as f:
            json.dump(rep, f, indent=1)
        os.rename(tmp, a.report)
    print("torch-loop: pid %d, %d steps in %.1f ms%s, loss %.4f, torch %s, libcupti %s, shim %s" % (
        os.getpid(), a.steps * (2 * a.profile_cycles + 1 if a.profile_cycles else 1), (t1 - t0) / 1e6,
        " under torch.profiler" if prof else
        " with %d torch.profiler cycles" % len(cycles) if cycles and cycles[0]["torch_trace"] else "",
        final_loss if final_loss is not None else float("nan"), torch.__version__,
        ",".join(cupti) or "-", ",".join(shim) or "-"))
    sys.stdout.flush()
    if a.linger_s > 0:
        time.sleep(a.linger_s)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except BaseException:  # noqa: B902 -- the suite wants the traceback and a status
        traceback.print_exc()
        sys.exit(1)
