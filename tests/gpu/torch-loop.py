#!/usr/bin/env python3
"""torch-loop: a small PyTorch training loop for cuptimon's GPU suite.

A small conv net + MLP trained with AdamW on random data on cuda: a few
warm-up steps (cuBLAS/cuDNN handles, lazy module loading, allocator), then
--steps measured steps, each synchronized on its own, whose CLOCK_REALTIME
start and end go into the report (step_marks: a checker places each GPU
event in its step by them).  With --profile the measured steps (and only
they) run under torch.profiler.profile(activities=[CPU, CUDA]) and its
chrome trace is exported to --torch-trace.

With --variant (coexist-case.sh) the run follows one fixed plan of
T = max(S*(2N+1), 2S+4R) synchronized, marked steps (S = --steps, N =
--profile-cycles, R = --repeat), whatever the variant, so that every
variant launches the same GPU work as the unprofiled run ("none"):
  manual    N times: S unprofiled steps, then S steps under a
            profile(activities=[CPU, CUDA]) entered and left around them
            (trace FILE.K.json for cycle K); the rest unprofiled;
  cudaonly  the same with activities=[CUDA];
  shapes    the same with record_shapes=True, with_stack=True;
  schedule  S unprofiled steps, then one profile(schedule=schedule(wait=1,
            warmup=1, active=2, repeat=R), on_trace_ready=...) entered for
            the rest of the run, prof.step() after each step; on_trace_ready
            exports cycle K's trace to FILE.K.json;
  none      the same steps, no profiler.
The report's profile_cycles say, per cycle, its trace and the steps it
profiled (the active steps); step_roles says what the profiler did in each
step.  --profile-cycles N without --variant is --variant manual;
--cycles-without-profiler is --variant none.

Imports nothing but torch and the standard library.  Exit status 0 on
success; any exception is printed and exits 1.
"""
import argparse
import json
import os
import sys
import time
import traceback

VARIANTS = ("manual", "schedule", "cudaonly", "shapes", "none")


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
                    help="instead of --profile: the coexistence plan (see above) with N manual "
                         "cycles (default variant manual; trace FILE.K.json for cycle K)")
    ap.add_argument("--variant", choices=VARIANTS,
                    help="the coexistence plan's variant (see above); N defaults to 2")
    ap.add_argument("--repeat", type=int, default=3, metavar="R",
                    help="--variant schedule: the schedule's repeat (default 3)")
    ap.add_argument("--cycles-without-profiler", action="store_true",
                    help="the coexistence plan with no profiler (--variant none)")
    ap.add_argument("--report", metavar="FILE", help="write a JSON report here")
    ap.add_argument("--linger-s", type=float, default=0.0,
                    help="sleep this long after the report before exiting")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.cycles_without_profiler:
        if a.variant not in (None, "none"):
            ap.error("--cycles-without-profiler is --variant none, not --variant %s" % a.variant)
        a.variant = "none"
    elif a.profile_cycles and not a.variant:
        a.variant = "manual"
    if a.variant and not a.profile_cycles:
        a.profile_cycles = 2
    if a.profile_cycles < 0 or a.repeat < 1 or a.steps < 1:
        ap.error("--profile-cycles %d, --repeat %d, --steps %d: need N >= 0, R >= 1, S >= 1"
                 % (a.profile_cycles, a.repeat, a.steps))
    if (a.profile or (a.variant and a.variant != "none")) and not a.torch_trace:
        ap.error("--profile and --variant %s need --torch-trace FILE" % a.variant)
    if a.profile and a.variant:
        ap.error("--profile and --profile-cycles/--variant are exclusive")

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

    # Every measured step synchronized on its own, between two CLOCK_REALTIME
    # marks: each of its GPU events starts after the first and ends before
    # the second, so a checker can tell which step an event belongs to.
    marks = []

    def marked_step():
        s = time.time_ns()
        loss = step()
        torch.cuda.synchronize()
        marks.append([s, time.time_ns()])
        return loss

    cycles = []
    roles = []
    trace_ready_calls = []
    prof = None
    prof_start = prof_stop = export_ns = None
    loss = None
    if a.variant:
        from torch.profiler import ProfilerAction, ProfilerActivity, profile, schedule
        S, N, R = a.steps, a.profile_cycles, a.repeat
        T = max(S * (2 * N + 1), 2 * S + 4 * R)
        roles = ["none"] * T
        acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
        if a.variant == "cudaonly":
            acts = [ProfilerActivity.CUDA]
        extra = {"record_shapes": True, "with_stack": True} if a.variant == "shapes" else {}

        def trace_path(k):
            return "%s.%d.json" % (a.torch_trace, k)

        t0 = time.time_ns()
        if a.variant in ("manual", "cudaonly", "shapes"):
            # torch.profiler entered and left N times in the middle of the
            # run, as in a job that takes a profile now and then.
            first = {S * (2 * k + 1): k for k in range(N)}
            for i in range(T):
                k = first.get(i)
                if k is not None:
                    prof = profile(activities=acts, **extra)
                    c0 = time.time_ns()
                    prof.__enter__()
                    cur = {"cycle": k, "profiler_start_ns": c0, "steps": []}
                if prof is not None:
                    cur["steps"].append(i)
                    roles[i] = "active %d" % cur["cycle"]
                loss = marked_step()
                if prof is not None and len(cur["steps"]) == S:
                    prof.__exit__(None, None, None)
                    cur["profiler_stop_ns"] = time.time_ns()
                    cur["torch_trace"] = trace_path(cur["cycle"])
                    prof.export_chrome_trace(cur["torch_trace"])
                    cur["export_ns"] = time.time_ns() - cur["profiler_stop_ns"]
                    cycles.append(cur)
                    prof = None
        elif a.variant == "schedule":
            # One profile() over the rest of the run; its schedule decides.
            # torch.profiler's step j (its step_num, 0 at entry) runs under
            # sched(j): the cycles are known before the run, and
            # on_trace_ready must be called once at the end of each.
            sched = schedule(wait=1, warmup=1, active=2, repeat=R)
            cur = None
            for j in range(T - S):
                act = sched(j)
                i = S + j
                if act in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
                    if cur is None:
                        cur = {"cycle": len(cycles), "steps": [], "torch_trace": trace_path(len(cycles))}
                    cur["steps"].append(i)
                    roles[i] = "active %d" % cur["cycle"]
                    if act == ProfilerAction.RECORD_AND_SAVE:
                        cycles.append(cur)
                        cur = None
                elif act == ProfilerAction.WARMUP:
                    roles[i] = "warmup"
                else:
                    roles[i] = "wait" if j < 4 * R else "after"

            def ready(p):
                k = len(trace_ready_calls)
                t = time.time_ns()
                path = trace_path(k)
                p.export_chrome_trace(path)
                trace_ready_calls.append({"cycle": k, "after_step": len(marks) - 1,
                                          "step_num": p.step_num, "torch_trace": path,
                                          "at_ns": t, "export_ns": time.time_ns() - t})

            for i in range(T):
                if i == S:
                    prof = profile(activities=acts, schedule=sched, on_trace_ready=ready)
                    prof_start = time.time_ns()
                    prof.__enter__()
                loss = marked_step()
                if prof is not None:
                    prof.step()
            prof.__exit__(None, None, None)
            prof_stop = time.time_ns()
            prof = None
        else:
            for i in range(T):
                loss = marked_step()
        t1 = time.time_ns()
        for c in cycles:
            c["steps_start_ns"] = marks[c["steps"][0]][0]
            c["steps_end_ns"] = marks[c["steps"][-1]][1]
    else:
        if a.profile:
            from torch.profiler import ProfilerActivity, profile
            prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            prof_start = time.time_ns()
            prof.__enter__()
        t0 = time.time_ns()
        for _ in range(a.steps):
            loss = marked_step()
        t1 = time.time_ns()
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
        "profiler_active": a.profile or bool(a.variant and a.variant != "none"),
        "variant": a.variant,
        "plan": {"steps": a.steps, "cycles": a.profile_cycles, "repeat": a.repeat,
                 "total_steps": len(marks)} if a.variant else None,
        "step_marks": marks,
        "step_roles": roles,
        "profile_cycles": cycles,
        "trace_ready_calls": trace_ready_calls,
        "profiler_start_ns": prof_start,
        "profiler_stop_ns": prof_stop,
        "trace_export_ns": export_ns,
        "torch_trace": a.torch_trace if a.profile else None,
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
        os.getpid(), len(marks), (t1 - t0) / 1e6,
        " under torch.profiler" if a.profile else
        " (%s: %d torch.profiler cycles)" % (a.variant, len(cycles)) if a.variant else "",
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
