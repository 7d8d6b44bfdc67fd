#!/usr/bin/env python3
"""Checks tests/gpu/held-case.sh's runs (issue 33) and reports their figures.

usage: held-check.py WORKDIR

Per workload W (cuda: held-work.cu, torch: held-torch.py) and run (W-control,
W-hold, W-cap): the workload's report (what it launched), the session's
meta.json, its decoded trace, the job's memory every 0.2 s and cuptimonctl
status every second.  Prints one line per check and the figures; exits 1
when a hard check failed.
"""
import collections
import glob
import json
import multiprocessing
import os
import sys

W = sys.argv[1]
fails = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        fails.append(what)


def load(name, ext):
    p = os.path.join(W, f"{name}.{ext}")
    return json.load(open(p)) if os.path.exists(p) else None


def gpu_events(name, rep):
    """The GPU work the measured part launched: from the long kernel's launch
    (or the launch loop's start) on; a torch run's warm-up is before it."""
    t = load(name, "trace.json") if rep else None
    if t is None:
        return None
    base = int(t["otherData"]["base_unix_ns"])
    since = rep["hold_before_ns"] or rep["loop_start_ns"]
    hold_prefix = rep.get("hold_kernel", "held_spin")
    c = collections.Counter()
    corr = collections.Counter()
    hold_dur = []
    for e in t["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        if base + round(e["ts"] * 1000) < since:
            continue
        cat = e["cat"]
        if cat == "kernel" and e["name"].startswith(hold_prefix):
            c["hold"] += 1
            hold_dur.append(e["dur"] / 1e6)
        else:
            c[cat] += 1
        corr[(cat, e.get("args", {}).get("correlation"))] += 1
    return c, sum(1 for v in corr.values() if v > 1), hold_dur


def mem_samples(name):
    p = os.path.join(W, f"{name}.mem")
    out = []
    for l in open(p) if os.path.exists(p) else []:
        f = l.split()
        if len(f) >= 2:
            out.append((int(f[0]), int(f[1]), int(f[2]) if len(f) > 2 else 0))
    return out


def statuses(name):
    p = os.path.join(W, f"{name}.status")
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []


exits = open(os.path.join(W, "exits.txt")).read() if os.path.exists(os.path.join(W, "exits.txt")) else ""
print(exits.strip())
check("status rc 0" in exits and "daemon exit 0" in exits, "the daemon answered status and stopped cleanly")

workloads = sorted({os.path.basename(p).split("-")[0] for p in glob.glob(os.path.join(W, "*-hold.json"))})
# Each run's trace read side by side (a trace of millions of kernels takes
# a core tens of seconds to load).
runs = [(f"{wl}-{run}", load(f"{wl}-{run}", "json")) for wl in workloads for run in ("control", "hold", "cap")]
with multiprocessing.Pool(len(runs) or 1) as pool:
    events = dict(zip([n for n, _ in runs], pool.starmap(gpu_events, runs)))

for wl in workloads:
    mem = {}
    for run in ("control", "hold", "cap"):
        name = f"{wl}-{run}"
        rep, meta = load(name, "json"), load(name, "meta.json")
        check(f"{name} exit 0" in exits, f"{name}: the workload ran and exited 0")
        ev = events.get(name) if rep else None
        if rep is None or meta is None or ev is None:
            check(False, f"{name}: report, meta.json and trace all there")
            continue
        c, dup, hold_dur = ev
        fin = meta.get("final", {})
        dropped = fin.get("dropped_records", -1)
        # held-work: every tiny kernel, copy and memset; held-torch: adds and
        # fills are kernels, copies are copies.
        want = collections.Counter(kernel=rep["tiny_kernels"] + rep.get("fill_kernels", 0),
                                   gpu_memcpy=rep["copies"], gpu_memset=rep["memsets"],
                                   hold=1 if rep["hold_s"] > 0 else 0)
        launched, archived = sum(want.values()), sum(c[k] for k in want)
        print(f"{name}: launched {launched} ({rep['tiny_kernels']} tiny kernels at {rep['launch_rate']:.0f}/s, "
              f"{rep['copies']} copies, {rep['memsets'] + rep.get('fill_kernels', 0)} memsets/fills, "
              f"hold {rep['hold_s']} s); archived {archived}; dropped by CUPTI {dropped}; "
              f"pool grown peak {fin.get('pool_grown_peak_slots')} slots; "
              f"flushes skipped {fin.get('flushes_skipped')}")
        if rep["hold_s"] > 0:
            # The launches made while the long kernel ran: held-work launches
            # from the loop's start, the long kernel ends hold_s later.
            rate = rep["launch_rate"]
            per_s = rep.get("launches_per_s", [])[:int(rep["hold_s"])]
            print(f"{name}: launch rate over the loop {rate:.0f}/s"
                  + (f"; in the hold's seconds min {min(per_s)}/s, max {max(per_s)}/s" if per_s else ""))
        check(dup == 0, f"{name}: no correlation id archived twice ({dup})")
        samples = mem_samples(name)
        peak_rss = max((r for _, r, _ in samples), default=0)
        peak_shm = max((s for _, _, s in samples), default=0)
        mem[run] = (peak_rss, peak_shm)
        print(f"{name}: job peak VmRSS {peak_rss / 1024:.1f} MiB, peak RssShmem {peak_shm / 1024:.1f} MiB")
        if run in ("control", "hold"):
            check(dropped == 0, f"{name}: CUPTI dropped nothing ({dropped})")
            check(all(c[k] == want[k] for k in ("kernel", "gpu_memcpy", "gpu_memset")),
                  f"{name}: every kernel, copy and memset archived once "
                  f"({c['kernel']}/{want['kernel']}, {c['gpu_memcpy']}/{want['gpu_memcpy']}, "
                  f"{c['gpu_memset']}/{want['gpu_memset']})")
        if run == "hold":
            check(c["hold"] == 1 and hold_dur and abs(hold_dur[0] - rep["hold_s"]) < 0.05 * rep["hold_s"],
                  f"{name}: the long kernel archived once with its true duration ({hold_dur} s)")
            st = statuses(name)
            named = [s for s in st if (s.get("in_flight") or {}).get("name", "").startswith(
                rep.get("hold_kernel", "held_spin")) and s["in_flight"]["age_s"] >= 2]
            if named:
                f = named[-1]["in_flight"]
                print(f"{name}: status during the run: {f['what']} on device {f['device']} stream "
                      f"{f['stream']} (correlation {f['correlation_id']}) for {f['age_s']:.1f} s, "
                      f"{f['records_behind']} records ({f['bytes_behind'] / 2**20:.1f} MiB) in "
                      f"{f['buffers_held']} buffers behind it; pool {named[-1]['pool']}")
                full = -(-f["bytes_behind"] // named[-1]["pool"]["slot_size"])
                print(f"{name}: {f['buffers_held']} buffers hold what {full} full ones could")
            check(len(named) >= 3, f"{name}: status named the running kernel in {len(named)} of {len(st)} samples")
            # The pool's memory as the daemon sees it (its memfd's pages,
            # status every second): its peak, and when it was back to the
            # resident slots after the long kernel ended.
            end = rep["hold_before_ns"] + rep["hold_s"] * 1e9
            pools = [(s["t"], s["pool"]) for s in st if s.get("pool") and "resident_bytes" in s["pool"]]
            peak = max((p["resident_bytes"] for _, p in pools), default=0)
            res = max((p["resident_slots"] * p["slot_size"] for _, p in pools if "resident_slots" in p),
                      default=64 << 20)
            back = [t for t, p in pools if t >= end and p["resident_bytes"] <= res]
            print(f"{name}: the pool's memory peaked at {peak / 2**20:.1f} MiB (resident slots: "
                  f"{res / 2**20:.0f} MiB)")
            if back:
                print(f"{name}: the grown pool's memory was back {(back[0] - end) / 1e9:.2f} s after "
                      f"the long kernel ended (status every second)")
            check(bool(back) or fin.get("pool_grown_peak_slots", 0) == 0,
                  f"{name}: the pool's memory went back to its resident slots")
        if run == "cap":
            check(archived + dropped == launched,
                  f"{name}: archived + dropped = launched ({archived} + {dropped} = {archived + dropped}, "
                  f"launched {launched}): nothing else lost")
            if dropped > 0:
                st = statuses(name)
                check(any((s.get("pool") or {}).get("cap_reached") for s in st),
                      f"{name}: status said the cap was reached ({dropped} dropped)")
            else:
                print(f"{name}: the cap was not reached (nothing dropped)")
    if mem:
        print(f"{wl}: job peak VmRSS control {mem.get('control', (0, 0))[0] / 1024:.1f} MiB, "
              f"hold {mem.get('hold', (0, 0))[0] / 1024:.1f} MiB")
print(f"RESULT {'FAIL' if fails else 'PASS'}, {len(fails)} failed")
sys.exit(1 if fails else 0)
