#!/usr/bin/env python3
"""held-torch: held-work's scenario (issue 33) as a PyTorch user writes it.

One torch.cuda._sleep of --hold-s seconds on a side stream (a straggler, a
collective waiting for another rank) while the main stream launches a tiny
in-place add flat out for --seconds, with a copy and a fill (memset) every
--copy-every launches.  Writes the same JSON report as held-work.cu, so that
held-check.py reads either; "hold_kernel" names the long kernel's prefix.

Imports nothing but torch and the standard library.
"""
import argparse
import json
import os
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--report", required=True)
    ap.add_argument("--hold-s", type=float, default=15)
    ap.add_argument("--seconds", type=float, default=-1)
    ap.add_argument("--copy-every", type=int, default=1000)
    a = ap.parse_args()
    seconds = a.seconds if a.seconds >= 0 else a.hold_s + 1
    dev = torch.device("cuda")
    x = torch.zeros(32, device=dev)
    src = torch.ones(16384, device=dev)
    dst = torch.empty(16384, device=dev)
    side = torch.cuda.Stream()
    # Warm up: the kernels' modules are loaded before the measured part.
    x.add_(1)
    dst.copy_(src)
    dst.zero_()
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    # _sleep spins for a number of GPU cycles: measure them per second.
    t = time.perf_counter()
    torch.cuda._sleep(200_000_000)
    torch.cuda.synchronize()
    cycles_per_s = 200_000_000 / (time.perf_counter() - t)
    hold_before = hold_after = 0
    if a.hold_s > 0:
        with torch.cuda.stream(side):
            hold_before = time.time_ns()
            torch.cuda._sleep(int(a.hold_s * cycles_per_s))
            hold_after = time.time_ns()
    kernels = copies = memsets = 0
    t0 = time.time_ns()
    until = t0 + int(seconds * 1e9)
    while time.time_ns() < until:
        for _ in range(64):
            x.add_(1)
            kernels += 1
            if a.copy_every > 0 and kernels % a.copy_every == 0:
                dst.copy_(src)  # a device-to-device copy
                dst.zero_()  # a fill: a kernel in torch, not a memset
                copies += 1
                memsets += 1
    t1 = time.time_ns()
    torch.cuda.synchronize()
    t2 = time.time_ns()
    rep = {"pid": os.getpid(), "hold_s": a.hold_s, "hold_kernel": "at::cuda::(anonymous namespace)::spin_kernel",
           "hold_before_ns": hold_before, "hold_after_ns": hold_after, "tiny_kernels": kernels,
           "copies": copies, "memsets": 0, "fill_kernels": memsets, "loop_start_ns": t0, "loop_end_ns": t1,
           "synced_ns": t2, "launch_rate": kernels / ((t1 - t0) / 1e9),
           "cycles_per_s": cycles_per_s}
    with open(a.report, "w") as f:
        json.dump(rep, f)
    print(f"held-torch: {kernels} tiny kernels in {(t1 - t0) / 1e9:.2f} s "
          f"({rep['launch_rate']:.0f}/s), hold {a.hold_s} s")


if __name__ == "__main__":
    main()
