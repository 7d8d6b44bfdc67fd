#!/usr/bin/env python3
"""The reference for Kineto's dialect (issue 18): the same PyTorch steps
traced twice on a real GPU, once by torch.profiler (its own Kineto trace)
and once by a cuptimon window over exactly those steps, with the same
annotations (torch.profiler.record_function in the one, cuptimon.annotate
in the other).  Both traces are written gzipped; a test compares them field
by field (categories, names, arg keys, flow binding).

usage: kineto-ref.py --mode torch|cuptimon --out FILE.json.gz [--ctl CUPTIMONCTL]
                     [--dist --label L]
The cuptimon mode runs under the shim and needs cuptimonctl and a daemon
(CUPTIMON_CONTROL_SOCKET or the default socket).

--dist makes the process one rank of a job (torch.distributed, gloo, from
RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; a CPU all_reduce of the loss
each step keeps the ranks in step), and "{rank}" in --out is replaced by
the rank.  In cuptimon mode rank 0 then opens one window (--per-process)
over every process labelled L (CUPTIMON_LABEL) once all ranks are warm,
closes it once all have run their steps, and writes each rank's
own trace to --out with its rank ("{rank}" = "all": the window's trace).
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
    ap.add_argument("--dist", action="store_true", help="one rank of a gloo job (see above)")
    ap.add_argument("--label", help="with --dist in cuptimon mode: the window's --label")
    args = ap.parse_args()
    rank = 0
    if args.dist:
        import torch.distributed as dist
        dist.init_process_group("gloo")
        rank = dist.get_rank()
    out = args.out.replace("{rank}", str(rank))

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
        if args.dist:
            t = torch.tensor([loss.item()])
            dist.all_reduce(t)
        return loss.item()

    for _ in range(3):  # warm-up: cuDNN autotuning, allocator
        step()
    torch.cuda.synchronize()
    tmp = out + ".tmp.json"
    if args.mode == "torch":
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                       schedule=schedule(wait=1, warmup=1, active=args.steps - 2, repeat=1),
                       on_trace_ready=lambda p: p.export_chrome_trace(tmp))
        with prof:
            for _ in range(args.steps):
                step()
                prof.step()
    else:
        sel = ["--label", args.label] if args.dist else ["--pid", str(os.getpid())]
        if args.dist:
            dist.barrier()  # every rank warm (and so a session of the daemon's)
        if rank == 0:
            if args.dist:
                sel.append("--per-process")
            begin = subprocess.run([args.ctl, "begin-window", *sel, "--json", "--activities",
                                    "kernel,memcpy,memset,runtime,driver,"
                                    "external_correlation,overhead,cuda_event,synchronization,"
                                    "marker,marker_data"],
                                   capture_output=True, text=True, check=True)
            print("begin-window:", begin.stdout.strip())
            time.sleep(0.2)
        if args.dist:
            dist.barrier()
        for _ in range(args.steps - 2):  # the profiler's active steps
            cuptimon.step()
            step()
        cuptimon.step_end()
        torch.cuda.synchronize()
        if args.dist:
            dist.barrier()
        if rank != 0:
            dist.barrier()  # rank 0 has closed the window: the process may end
            return 0
        end = subprocess.run([args.ctl, "end-window", "--json"], capture_output=True, text=True,
                             check=True)
        print("end-window:", end.stdout.strip())
        reply = json.loads(end.stdout)
        w = reply.get("window") if isinstance(reply.get("window"), dict) else reply
        path = w.get("output") or w.get("trace") or reply.get("output")
        if args.dist:
            for e in w.get("process_traces") or reply.get("process_traces") or []:
                gz_copy(e["path"], args.out.replace("{rank}", str(e.get("rank"))))
            out = args.out.replace("{rank}", "all")
            dist.barrier()
        shutil.copy(path, tmp)
    gz_copy(tmp, out)
    os.unlink(tmp)
    return 0


def gz_copy(src, dst):
    """src (plain or gzipped JSON) to dst, gzipped."""
    with open(src, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    with (gzip.open if gz else open)(src, "rb") as f, gzip.open(dst, "wb", compresslevel=6) as g:
        shutil.copyfileobj(f, g)
    print("wrote", dst, os.path.getsize(dst), "bytes")


if __name__ == "__main__":
    sys.exit(main())
