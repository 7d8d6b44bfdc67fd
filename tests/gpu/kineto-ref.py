#!/usr/bin/env python3
"""The reference for Kineto's dialect (issue 18): the same PyTorch steps
traced twice on a real GPU, once by torch.profiler (its own Kineto trace)
and once by a cuptimon window over exactly those steps, with the same
annotations (torch.profiler.record_function in the one, cuptimon.annotate
in the other).  Both traces are written gzipped; a test compares them field
by field (categories, names, arg keys, flow binding).

usage: kineto-ref.py --mode torch|cuptimon --out FILE.json.gz [--ctl CUPTIMONCTL]
The cuptimon mode runs under the shim and needs cuptimonctl and a daemon
(CUPTIMON_CONTROL_SOCKET or the default socket).
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("torch", "cuptimon"), required=True)
    ap.add_argument("--out", required=True, help="the trace, gzipped")
    ap.add_argument("--ctl", default="cuptimonctl")
    ap.add_argument("--steps", type=int, default=6)
    args = ap.parse_args()

    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(16 * 32 * 32, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x_host = torch.randn(64, 3, 32, 32).pin_memory()
    y_host = torch.randint(0, 10, (64,)).pin_memory()

    if args.mode == "torch":
        from torch.profiler import ProfilerActivity, profile, record_function, schedule
        annotate = record_function
    else:
        import cuptimon
        annotate = cuptimon.annotate

    def step():
        with annotate("copy_in"):
            x = x_host.to(dev, non_blocking=True)
            y = y_host.to(dev, non_blocking=True)
        with annotate("forward"):
            loss = nn.functional.cross_entropy(model(x), y)
        with annotate("backward"):
            opt.zero_grad(set_to_none=True)
            loss.backward()
        with annotate("optimizer"):
            opt.step()
        ev = torch.cuda.Event()
        ev.record()
        ev.synchronize()
        return loss.item()

    for _ in range(3):  # warm-up: cuDNN autotuning, allocator
        step()
    torch.cuda.synchronize()
    tmp = args.out + ".tmp.json"
    if args.mode == "torch":
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                       schedule=schedule(wait=1, warmup=1, active=args.steps - 2, repeat=1),
                       on_trace_ready=lambda p: p.export_chrome_trace(tmp))
        with prof:
            for _ in range(args.steps):
                step()
                prof.step()
    else:
        begin = subprocess.run([args.ctl, "begin-window", "--pid", str(os.getpid()), "--json",
                                "--activities", "kernel,memcpy,memset,runtime,driver,"
                                "external_correlation,overhead,cuda_event,synchronization,"
                                "marker,marker_data"],
                               capture_output=True, text=True, check=True)
        print("begin-window:", begin.stdout.strip())
        time.sleep(0.2)
        for _ in range(args.steps - 2):  # the profiler's active steps
            step()
        torch.cuda.synchronize()
        end = subprocess.run([args.ctl, "end-window", "--json"], capture_output=True, text=True,
                             check=True)
        print("end-window:", end.stdout.strip())
        reply = json.loads(end.stdout)
        path = reply.get("output") or reply.get("trace")
        shutil.copy(path, tmp)
    with open(tmp, "rb") as f, gzip.open(args.out, "wb", compresslevel=6) as g:
        shutil.copyfileobj(f, g)
    os.unlink(tmp)
    print("wrote", args.out, os.path.getsize(args.out), "bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
