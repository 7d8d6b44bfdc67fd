#!/usr/bin/env python3
"""One rank of nccl-case.sh (issue 46): NCCL collectives on one GPU shared by
the ranks, under the shim as NCCL's profiler plugin.

Runs, with torch.distributed's nccl backend: ITERS rounds of all_reduce,
broadcast, all_gather_into_tensor and reduce_scatter_tensor; then, where
CUDA graphs work, an all_reduce captured into a graph and replayed REPLAYS
times; then one all_reduce before which rank LAG_RANK sleeps LAG_S seconds
(the other rank waits inside it: the case script reads status then).
Writes OUT/rank-R.json: what it issued (per function), NCCL's version, the
device, and the times of the lag.
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

out = sys.argv[1]
iters = int(os.environ.get("ITERS", "50"))
replays = int(os.environ.get("REPLAYS", "5"))
lag_rank = int(os.environ.get("LAG_RANK", "1"))
lag_s = float(os.environ.get("LAG_S", "6"))
rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(0)
dev = torch.device("cuda", 0)
rep = {"rank": rank, "world": world, "nccl_version": ".".join(map(str, torch.cuda.nccl.version())),
       "torch": torch.__version__, "issued": {}, "graph": None, "env": {
           k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "CUPTIMON_", "CUDA_INJ"))}}
issued = rep["issued"]


def note(f, n=1):
    issued[f] = issued.get(f, 0) + n


t0 = time.time()
dist.init_process_group("nccl", device_id=dev)
rep["init_s"] = time.time() - t0
x = torch.ones(1 << 20, device=dev)
g = torch.empty(world << 20, device=dev)
for i in range(iters):
    dist.all_reduce(x)
    note("AllReduce")
    dist.broadcast(x, src=0)
    note("Broadcast")
    dist.all_gather_into_tensor(g, x)
    note("AllGather")
    dist.reduce_scatter_tensor(x, g)
    note("ReduceScatter")
torch.cuda.synchronize()
# CUDA-graph capture: NCCL reports the collective when captured (its
# kernel runs at each replay).
try:
    s = torch.cuda.Stream()
    y = torch.ones(1 << 16, device=dev)
    with torch.cuda.stream(s):
        dist.all_reduce(y)  # warm-up outside the graph
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=s):
            dist.all_reduce(y)
    note("AllReduce", 2)
    for _ in range(replays):
        graph.replay()
    torch.cuda.synchronize()
    rep["graph"] = {"captured": 1, "replays": replays}
except Exception as e:  # noqa: BLE001 - said in the report
    rep["graph"] = {"error": repr(e)[:300]}
dist.barrier()
note("AllReduce")  # the barrier is an all_reduce of one element in c10d's nccl backend
torch.cuda.synchronize()
rep["lag_begin_unix"] = time.time()
if rank == lag_rank:
    time.sleep(lag_s)
dist.all_reduce(x)
note("AllReduce")
torch.cuda.synchronize()
rep["lag_end_unix"] = time.time()
dist.destroy_process_group()
rep["wall_s"] = time.time() - t0
with open(os.path.join(out, "rank-%d.json" % rank), "w") as f:
    json.dump(rep, f, indent=1)
