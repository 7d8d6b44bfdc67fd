#!/usr/bin/env python3
"""Checks what tests/gpu/edges-case.sh left in its work directory W.

The archive: every kernel, memcpy and memset each long-work process launched
is there exactly once, kernels with their true duration (long-work's spin
kernels run exactly --kernel-ms), across two daemons (a stop and restart in
the middle), a reload, flushes and three windows.

Each window: the API calls in its trace are the launches long-work made
inside it (by long-work's own clock readings around each launch call); every
one of them has its GPU work in the trace, complete, also work still running
at end-window; no GPU work without its launch in the window; nothing cut.
Prints PASS/FAIL lines and a summary; exits 1 on any failure.
"""
import collections
import glob
import json
import os
import sys

W = sys.argv[1]
fails = []


def check(ok, what, detail=""):
    print(("PASS " if ok else "FAIL ") + what + (": " + str(detail) if detail else ""))
    if not ok:
        fails.append(what)


GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
LAUNCH_NAMES = {"kernel": ("cudaLaunchKernel",), "memcpy": ("cudaMemcpyAsync",),
                "memset": ("cudaMemsetAsync",)}
EDGE_NS = 2_000_000  # launches this close to a window's start or end may go either way
# A spin kernel ends D ms after its first instruction; CUPTI's start is when
# it was scheduled.  Two processes time-slice the GPU (no MPS), so a kernel
# may wait one slice (about 2 ms on the H200: 47.3 ms for 45 ms kernels in
# the first run) before its first instruction, and lose one more just
# before its last look at the timer (the H100: 50.357 ms for 45 ms).  A cut
# kernel is shorter than D; longer by up to two slices is the GPU's sharing.
SLICE_NS = 5_000_000
SHARED_NS = 2 * SLICE_NS


def load_trace(path):
    t = json.load(open(path))
    base = int(t["otherData"]["base_unix_ns"])
    return t, base


def gpu_events(t, base):
    out = []
    for e in t["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in GPU_CATS:
            continue
        a = e.get("args", {})
        out.append({"what": GPU_CATS[e["cat"]], "pid": e["pid"], "stream": a.get("stream"),
                    "corr": a.get("correlation"), "start": base + round(float(e["ts"]) * 1000),
                    "dur": round(float(e["dur"]) * 1000), "name": e.get("name")})
    return out


reports = {}
for lab in ("A", "B"):
    try:
        reports[lab] = json.load(open(f"{W}/{lab}.json"))
    except (OSError, ValueError) as e:
        check(False, f"long-work {lab} wrote its report", e)
label_of = {r["pid"]: lab for lab, r in reports.items()}
print(open(f"{W}/exits.txt").read().strip())

# ---- the archive -----------------------------------------------------------
arch = collections.defaultdict(list)
sessions = collections.Counter()
for path in sorted(glob.glob(f"{W}/*.trace.json")):
    t, base = load_trace(path)
    evs = gpu_events(t, base)
    for ev in evs:
        arch[ev["pid"]].append(ev)
    for pid in {ev["pid"] for ev in evs}:
        sessions[pid] += 1
    err = open(path.replace(".trace.json", ".decode.err")).read().strip()
    if err:
        print("  decode of", os.path.basename(path), "said:", err[:300])
    try:
        summ = json.load(open(path.replace(".trace.json", ".summary.json")))
        print("  summary", os.path.basename(path)[:40], json.dumps(summ)[:300])
    except (OSError, ValueError):
        pass

for lab, rep in sorted(reports.items()):
    pid, kns = rep["pid"], rep["kernel_ns"]
    launched = collections.Counter(l["what"] for l in rep["launches"])
    per_stream = sorted(collections.Counter(l["stream"] for l in rep["launches"]
                                            if l["what"] == "kernel").values())
    evs = arch.get(pid, [])
    got = collections.Counter(e["what"] for e in evs)
    tag = f"{lab} (pid {pid}{', exits with work running' if not rep['sync_exit'] else ''})"
    print(f"{tag}: launched {dict(launched)}, archived {dict(got)} over {sessions[pid]} session(s)")
    for what in ("kernel", "memcpy", "memset"):
        check(got[what] == launched[what], f"{tag}: every {what} archived once",
              f"{got[what]} of {launched[what]}")
    kern = [e for e in evs if e["what"] == "kernel"]
    ks = sorted(collections.Counter(e["stream"] for e in kern).values())
    check(ks == per_stream, f"{tag}: kernels per stream as launched", f"{ks} vs {per_stream}")
    keys = {(e["stream"], e["start"]) for e in kern}
    check(len(keys) == len(kern), f"{tag}: no kernel twice", f"{len(kern) - len(keys)} repeated")
    bad = [e["dur"] for e in kern if not (kns * 0.999 <= e["dur"] <= kns + SHARED_NS)]
    longest = max((e["dur"] for e in kern), default=0)
    check(not bad, f"{tag}: every kernel with its true duration ({kns / 1e6:g} ms, the longest "
          f"{longest / 1e6:.3f} ms)", f"{len(bad)} off, e.g. {bad[:5]}")

# ---- the windows ---------------------------------------------------------
for w in (1, 2, 3):
    try:
        end = json.load(open(f"{W}/w{w}-end.json"))
    except (OSError, ValueError) as e:
        check(False, f"window {w} ended", e)
        continue
    s0, s1 = end["start_unix_ns"], end["end_unix_ns"]
    ew = end.get("end_wait", {})
    print(f"window {w}: {(s1 - s0) / 1e9:.3f} s over pids {end['pids']}; end waited "
          f"{ew.get('elapsed_ms')} ms, {ew.get('fence_flushes')} more fence flush(es), "
          f"running {ew.get('running')}, late {ew.get('late')}")
    check(not ew.get("running") and not ew.get("late"),
          f"window {w}: every process handed over its work within the end's bound")
    t, base = load_trace(end["output"])
    evs = gpu_events(t, base)
    api = [e for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cuda_runtime"]
    for pid in end["pids"]:
        lab = label_of.get(pid)
        if lab is None:
            continue
        rep = reports[lab]
        tag = f"window {w}, {lab}"
        for what in ("kernel", "memcpy", "memset"):
            inside = [l for l in rep["launches"] if l["what"] == what
                      and l["before"] >= s0 + EDGE_NS and l["after"] <= s1 - EDGE_NS]
            edge = [l for l in rep["launches"] if l["what"] == what
                    and l["after"] >= s0 - EDGE_NS and l["before"] <= s1 + EDGE_NS]
            calls = {e["args"]["correlation"]: e for e in api if e["pid"] == pid
                     and e["name"] in LAUNCH_NAMES[what]}
            work = [e for e in evs if e["pid"] == pid and e["what"] == what]
            check(len(inside) <= len(calls) <= len(edge),
                  f"{tag}: {what} launches in the window as long-work made them",
                  f"{len(calls)} (inside {len(inside)}, with the edges {len(edge)})")
            corrs = collections.Counter(e["corr"] for e in work)
            check(set(corrs) == set(calls) and all(c == 1 for c in corrs.values()),
                  f"{tag}: each {what} launch's work once, and no other",
                  f"{len(work)} records for {len(calls)} launches; "
                  f"{len(set(corrs) - set(calls))} without their launch, "
                  f"{len(set(calls) - set(corrs))} launches without work")
            if what == "kernel":
                bad = [e["dur"] for e in work if not (rep["kernel_ns"] * 0.999 <= e["dur"]
                                                      <= rep["kernel_ns"] + SHARED_NS)]
                late = [e for e in work if e["start"] + e["dur"] > s1]
                check(not bad, f"{tag}: no kernel cut", f"{len(bad)}: {bad[:5]}")
                print(f"  {tag}: {len(late)} kernel(s) launched inside ran past end-window")
                archived = {(e["stream"], e["start"]) for e in arch.get(pid, [])
                            if e["what"] == "kernel"}
                missing = [e for e in work if (e["stream"], e["start"]) not in archived]
                check(not missing, f"{tag}: every kernel of the window is in the archive",
                      len(missing))

fw = json.load(open(f"{W}/flush-wait.json"))
print("flush --wait-running:", json.dumps({k: fw.get(k) for k in
                                            ("completed", "sessions", "elapsed_ms", "running",
                                             "late", "fence_flushes")}))
check(fw.get("completed") == fw.get("sessions") and not fw.get("running"),
      "flush --wait-running: everything launched before it handed over")
print(f"RESULT: {'PASS' if not fails else 'FAIL'} ({len(fails)} failed)")
sys.exit(1 if fails else 0)
