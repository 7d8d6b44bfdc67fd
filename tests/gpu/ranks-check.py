#!/usr/bin/env python3
"""Checks issue 18's promise for a job of several ranks: each rank's trace
from a cuptimon window written with --per-process reads as torch.profiler's
trace of that rank does (tests/gpu/ranks-case.sh records both on the GPU).
Per rank:

- kineto-check.py passes against the rank's own torch.profiler trace
  (--devices 1 --annotations --steps): Kineto's top level, categories, arg
  keys, flows, each launch once, copy bandwidths, metadata, annotation and
  step slices;
- the rank is found as HTA finds it ("rank":\\s+N) and is the file's rank,
  in both; distributedInfo's world_size is the job's, in both;
- the time base: baseTimeNanoseconds puts every event of the rank's trace
  inside the run (after START_NS, before the check);
- the same GPU work: kernels by name, copies and memsets by name, and
  launch calls by name, exactly as many as torch.profiler's trace holds
  for the same steps; as many ProfilerStep#N steps;
- the same annotation ranges: every user_annotation name cuptimon shows is
  one torch.profiler shows (with as many of each), and every one of those
  names that torch's gpu_user_annotation slices carry is on cuptimon's too
  (torch's own, such as Optimizer.step#AdamW.step, are not the job's);
- named threads: every thread with runtime calls has a thread_name;
- the backward pass: every kernel launched on another thread (autograd's
  engine thread) while the job's "backward" annotation was open lies in a
  gpu_user_annotation "backward" slice of its stream that says it was
  attributed by launch time, and there is at least one such kernel (the
  figures of torch.profiler's "backward" GPU slices are printed beside).

usage: ranks-check.py TORCH_FMT CUPTIMON_FMT WORLD_SIZE START_NS
(FMT: a path with "{rank}"; files may be .gz).  Prints one line per check
("ok"/"FAIL"), then RESULT PASS or RESULT FAIL; exits 0 on PASS.
"""
import collections
import gzip
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KINETO_CHECK = os.path.join(HERE, "..", "integration", "kineto-check.py")
STEP = re.compile(r"ProfilerStep#\d+")


def load(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        text = f.read()
    return text, json.loads(text)


def counts(tr, cat, name_ok=lambda n: True):
    return collections.Counter(e.get("name") for e in tr["traceEvents"]
                               if e.get("cat") == cat and e.get("ph") == "X"
                               and name_ok(e.get("name", "")))


def diff(a, b):
    """What differs between Counters a (torch) and b (cuptimon), briefly."""
    keys = sorted(set(a) | set(b), key=str)
    d = [f"{k[:60]!s}: torch {a.get(k, 0)} cuptimon {b.get(k, 0)}" for k in keys
         if a.get(k, 0) != b.get(k, 0)]
    return "; ".join(d[:4]) + (f"; and {len(d) - 4} more" if len(d) > 4 else "")


def backward_work(tr):
    """The "backward" user_annotation slices of trace tr, the kernels
    launched inside one of them on another thread than its own, and the
    "backward" gpu_user_annotation slices."""
    ev = tr["traceEvents"]
    bw = [e for e in ev if e.get("cat") == "user_annotation" and e.get("name") == "backward"]
    launch = {(e["pid"], e["args"].get("correlation")): e for e in ev
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "args" in e}
    kernels = []
    for k in ev:
        if k.get("cat") != "kernel":
            continue
        a = launch.get((k["pid"], k.get("args", {}).get("correlation")))
        if a and any(b["pid"] == a["pid"] and b["tid"] != a["tid"] and
                     b["ts"] <= a["ts"] <= b["ts"] + b["dur"] for b in bw):
            kernels.append(k)
    slices = [e for e in ev if e.get("cat") == "gpu_user_annotation" and e.get("name") == "backward"]
    return bw, kernels, slices


def main(argv):
    if len(argv) != 5:
        print(__doc__.split("\n\n")[-1].strip(), file=sys.stderr)
        return 2
    tfmt, cfmt, world, start_ns = argv[1], argv[2], int(argv[3]), int(argv[4])
    fails = 0

    def check(ok, what, detail=""):
        nonlocal fails
        print(("ok   " if ok else "FAIL ") + what + (f" ({detail})" if detail else ""))
        fails += not ok

    for r in range(world):
        tp, cp = tfmt.replace("{rank}", str(r)), cfmt.replace("{rank}", str(r))
        if not (os.path.exists(tp) and os.path.exists(cp)):
            check(False, f"rank {r}: both traces exist", f"{tp}, {cp}")
            continue
        kc = subprocess.run([sys.executable, KINETO_CHECK, tp, cp, "--devices", "1",
                             "--annotations", "--steps"], capture_output=True, text=True)
        check(kc.returncode == 0, f"rank {r}: kineto-check against torch.profiler's rank {r}",
              (kc.stdout + kc.stderr).strip().replace("\n", "; ")[:600])
        (ttext, t), (ctext, c) = load(tp), load(cp)
        for who, text, tr in (("torch", ttext, t), ("cuptimon", ctext, c)):
            m = re.search(r'"rank":\s+(\d+)', text)
            check(m is not None and int(m.group(1)) == r,
                  f"rank {r}: HTA finds rank {r} in {who}'s file", f"found {m and m.group(1)}")
            ws = tr.get("distributedInfo", {}).get("world_size")
            check(ws == world, f"rank {r}: {who}'s distributedInfo world_size is {world}",
                  f"{ws!r}")
        base = c.get("baseTimeNanoseconds")
        ts = [e["ts"] for e in c["traceEvents"] if e.get("ph") == "X" and "ts" in e]
        if isinstance(base, int) and ts:
            lo, hi = base + int(min(ts) * 1000), base + int(max(ts) * 1000)
            check(start_ns <= lo and hi <= time.time_ns(),
                  f"rank {r}: baseTimeNanoseconds puts the events inside the run",
                  f"{(lo - start_ns) / 1e9:.1f} s to {(hi - start_ns) / 1e9:.1f} s after it began")
        else:
            check(False, f"rank {r}: baseTimeNanoseconds and events", f"{base!r}, {len(ts)} events")
        for cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            a, b = counts(t, cat), counts(c, cat)
            check(a == b, f"rank {r}: {cat} by name as torch.profiler's ({sum(a.values())})",
                  diff(a, b))
        launch = lambda n: "Launch" in n  # noqa: E731
        a = counts(t, "cuda_runtime", launch) + counts(t, "cuda_driver", launch)
        b = counts(c, "cuda_runtime", launch) + counts(c, "cuda_driver", launch)
        check(a == b, f"rank {r}: launch calls by name as torch.profiler's ({sum(a.values())})",
              diff(a, b))
        a = counts(t, "user_annotation", STEP.fullmatch)
        b = counts(c, "user_annotation", STEP.fullmatch)
        check(sum(a.values()) == sum(b.values()) > 0,
              f"rank {r}: as many ProfilerStep#N steps ({sum(a.values())})", f"{sum(b.values())}")
        a = counts(t, "user_annotation", lambda n: not STEP.fullmatch(n))
        b = counts(c, "user_annotation", lambda n: not STEP.fullmatch(n))
        extra = {k: v for k, v in b.items() if a.get(k) != v}
        check(b and not extra, f"rank {r}: each annotation name as often as torch.profiler's "
              f"({', '.join(f'{k} {v}' for k, v in sorted(b.items()))})",
              diff({k: a.get(k, 0) for k in extra}, extra))
        # Of the names both push (PyTorch's own, Optimizer.step#..., are
        # not the job's annotations).
        mine = set(b)
        a = set(counts(t, "gpu_user_annotation", lambda n: not STEP.fullmatch(n))) & mine
        b = set(counts(c, "gpu_user_annotation", lambda n: not STEP.fullmatch(n)))
        check(a <= b, f"rank {r}: every gpu_user_annotation name of torch.profiler's "
              f"({', '.join(sorted(a))})", f"cuptimon lacks {sorted(a - b)}")
        bw, kernels, slices = backward_work(c)
        covered = [k for k in kernels if any(
            s["tid"] == k["tid"] and s["ts"] - 0.001 <= k["ts"] and
            k["ts"] + k["dur"] <= s["ts"] + s["dur"] + 0.001 and
            s["args"].get("attributed by launch time") for s in slices)]
        tb = [e for e in t["traceEvents"] if e.get("cat") == "gpu_user_annotation"
              and e.get("name") == "backward"]
        check(kernels and len(covered) == len(kernels),
              f"rank {r}: the backward pass's kernels launched on other threads lie in "
              f"\"backward\" GPU slices ({len(covered)} of {len(kernels)}, from {len(bw)} "
              f"backward ranges; cuptimon's slices span {sum(s['dur'] for s in slices):.0f} us, "
              f"torch.profiler's {sum(e['dur'] for e in tb):.0f} us)",
              f"uncovered {[(k['name'][:40], k['ts']) for k in kernels if k not in covered][:3]}")
        named = {(e["pid"], e["tid"]) for e in c["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "thread_name"}
        callers = {(e["pid"], e["tid"]) for e in c["traceEvents"]
                   if e.get("cat") == "cuda_runtime"}
        check(callers and callers <= named,
              f"rank {r}: every thread with runtime calls is named ({len(callers)})",
              f"unnamed {sorted(callers - named)[:4]}")
    print("RESULT", "PASS" if fails == 0 else "FAIL")
    return 0 if fails == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
