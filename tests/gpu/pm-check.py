#!/usr/bin/env python3
"""Checks tests/gpu/pm-case.sh's run (issue 34) and reports its figures.

usage: pm-check.py WORKDIR

The window's trace (its counter tracks against pm-load's phases and
kernels), the daemon's gpu-metrics status, Nsight Compute's exits with the
counters paused and not, the cost runs, known-work's launches sampled and
not, stats --report gpu and the metrics file.  One line per check; exits 1
when a hard check failed.
"""
import csv
import io
import json
import os
import re
import statistics
import sys

W = sys.argv[1]
fails = []


def check(ok, what, soft=False):
    print(("ok    " if ok else ("SOFT  " if soft else "FAIL  ")) + what)
    if not ok and not soft:
        fails.append(what)


def read(name):
    p = os.path.join(W, name)
    return open(p).read() if os.path.exists(p) else ""


def phases(text):
    """pm-load's phases: name -> (start_ns, end_ns)."""
    out = {}
    for m in re.finditer(r"PMLOAD phase name=(\w+) start_rt=(\d+) end_rt=(\d+)", text):
        out[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return out


exits = read("exits.txt")
print(exits.strip())
check("load-window exit 0" in exits, "pm-load ran under the shim and exited 0")
check("daemon exit 0" in exits, "the daemon stopped cleanly")

st = json.loads(read("gpm-start.json") or "{}")
devs = st.get("devices", [])
check(st.get("state") == "on" and devs and devs[0]["state"] == "sampling",
      f"the daemon samples GPU 0 ({st.get('state')}: {devs[0]['why'] if devs else st.get('why')})")
if devs:
    d = devs[0]
    print(f"GPU 0: {d['name']} {d['chip']} {d['pci_bus_id']} {d['uuid']}; metrics: "
          f"{', '.join(m['key'] for m in d['metrics'])}; not sampled: {d.get('not_sampled', '-')}")
win = json.loads(read("gpm-window.json") or "{}")
if win.get("devices"):
    print(f"while the window was open: every {win['devices'][0]['interval_ms']} ms")
    check(win["devices"][0]["interval_ms"] < st["devices"][0]["interval_ms"],
          "the interval is finer while a window is open")

# The window's trace: counter tracks against the phases and the kernels.
end = json.loads(read("w-end.json") or "{}")
trace_path = end.get("output", "")
ph = phases(read("load-window.out"))
if trace_path and os.path.exists(trace_path):
    t = json.load(open(trace_path))
elif trace_path and os.path.exists(os.path.join(W, "out", "windows", os.path.basename(trace_path))):
    t = json.load(open(os.path.join(W, "out", "windows", os.path.basename(trace_path))))
else:
    t = None
check(t is not None, f"the window's trace is there ({trace_path})")
rows = {}  # phase -> counter track -> its mean over the phase
if t:
    base = int(t["otherData"]["base_unix_ns"])
    series = {}
    kernels = []
    for e in t["traceEvents"]:
        if e.get("ph") == "C" and e.get("cat") == "gpu_metrics":
            (k, v), = e["args"].items()
            series.setdefault(e["name"], []).append((base + round(e["ts"] * 1000), float(v)))
        elif e.get("ph") == "X" and e.get("cat") == "kernel":
            kernels.append((e["name"], base + round(e["ts"] * 1000), base + round((e["ts"] + e["dur"]) * 1000)))
    print("counter tracks: " + ", ".join(f"{k} ({len(v)})" for k, v in sorted(series.items())))
    # The window picks the GPUs of its processes by the UUID each shim sent
    # for its device ordinals: GPU 0's tracks here prove the shim's UUID
    # (cuDeviceGetUuid in the job) reads as the sampler's on a real driver.
    check(any(k.startswith("GPU 0 ") for k in series),
          "the trace has GPU 0's counter tracks (the job's device matched by UUID)")
    # Kept for a look afterwards (pm-case's tarball), and said: samples of a
    # percentage above 100 (CUPTI's evaluated values, stored as they are),
    # with their phase and the SM clock of the same sample.
    with open(os.path.join(W, "window-counters.json"), "w") as f:
        json.dump(series, f)
    clock = dict(series.get("GPU 0 SM clock", []))

    def where(ts):
        return next((f"{n} {(ts - a) / 1e6:+.0f} ms" for n, (a, b) in ph.items() if a <= ts <= b),
                    "between phases")

    for k in sorted(series):
        if not k.startswith("GPU 0 ") or not k.endswith(("active", "(warps active)")):
            continue
        over = [(ts, v) for ts, v in series[k] if v > 100]
        if not over:
            continue
        print(f"above 100 %: {k[6:]} in {len(over)} of {len(series[k])} samples, e.g. " +
              "; ".join(f"{v:.1f} ({where(ts)}, SM clock {clock.get(ts, float('nan')) / 1e6:.0f} MHz)"
                        for ts, v in over[:3]))

    def mean(track, lo, hi):
        """Time-weighted mean of a counter track over [lo, hi]."""
        pts = sorted(series.get(track, []))
        tot = w = 0.0
        for i, (ts, v) in enumerate(pts):
            nxt = pts[i + 1][0] if i + 1 < len(pts) else ts
            a, b = max(ts, lo), min(nxt, hi)
            if b > a:
                tot += v * (b - a)
                w += b - a
        return tot / w if w else float("nan")

    def inner(p):
        a, b = ph[p]
        return a + (b - a) // 10, b - (b - a) // 10

    for p in ("stream", "gemm", "wmma", "h2d", "d2h"):
        if p not in ph:
            continue
        lo, hi = inner(p)
        rows[p] = {k: mean(k, lo, hi) for k in series}
        vals = "  ".join(f"{k[6:]}={v:.4g}" for k, v in sorted(rows[p].items()))
        print(f"phase {p:6s} ({(ph[p][1] - ph[p][0]) / 1e6:.0f} ms): {vals}")
    get = lambda p, k: rows.get(p, {}).get(f"GPU 0 {k}", float("nan"))
    check(get("stream", "DRAM active") > 50 and get("stream", "Tensor pipe active") < 5,
          f"stream phase: DRAM active {get('stream', 'DRAM active'):.1f} % (> 50), tensor pipe "
          f"{get('stream', 'Tensor pipe active'):.1f} % (< 5)")
    check(get("gemm", "Tensor pipe active") > 40 and
          get("gemm", "Tensor pipe active") > 5 * max(get("stream", "Tensor pipe active"), 1),
          f"GEMM phase: tensor pipe active {get('gemm', 'Tensor pipe active'):.1f} % (> 40)")
    check(get("h2d", "PCIe to GPU") > 10e9 and get("h2d", "PCIe to GPU") > 3 * get("h2d", "PCIe from GPU"),
          f"host-to-device copies: PCIe to GPU {get('h2d', 'PCIe to GPU') / 1e9:.1f} GB/s, from "
          f"{get('h2d', 'PCIe from GPU') / 1e9:.1f} GB/s", soft=True)
    check(get("d2h", "PCIe from GPU") > 10e9,
          f"device-to-host copies: PCIe from GPU {get('d2h', 'PCIe from GPU') / 1e9:.1f} GB/s", soft=True)
    # Lined up: the triad kernels lie in the stream phase, and DRAM is
    # high over their span and low in the idle before it.
    tri = [k for k in kernels if k[0].startswith("triad")]
    if tri:
        lo, hi = min(k[1] for k in tri), max(k[2] for k in tri)
        inside = mean("GPU 0 DRAM active", lo + (hi - lo) // 10, hi - (hi - lo) // 10)
        before = mean("GPU 0 DRAM active", lo - 250_000_000, lo - 50_000_000)
        print(f"triad kernels: {len(tri)} from {(lo - ph['stream'][0]) / 1e6:+.1f} ms to "
              f"{(hi - ph['stream'][1]) / 1e6:+.1f} ms of the phase's bounds; DRAM active over "
              f"them {inside:.1f} %, in the 200 ms before {before:.1f} %")
        check(inside > 50 and (before != before or before < 10),
              "the counters line up with the kernels (DRAM high over the triads, low before)")
    # Each GEMM phase's kernels (cuBLAS's nvjet_* or WMMA), over their own
    # span: not the warm-up launches made before the stream phase.
    for p in ("gemm", "wmma"):
        ks = [k for k in kernels if p in ph and ph[p][0] <= k[1] <= ph[p][1]
              and not k[0].startswith(("triad", "fill"))]
        if ks:
            lo, hi = min(k[1] for k in ks), max(k[2] for k in ks)
            print(f"{p} phase: {len(ks)} kernels ({ks[0][0][:40]}); tensor pipe over their span "
                  f"{mean('GPU 0 Tensor pipe active', lo, hi):.1f} %")

# Nsight Compute.
if "ncu not found" in exits:
    check(False, "Nsight Compute is there to run beside the sampler", soft=True)
else:
    check("ncu-paused exit 0" in exits, "with the counters paused, ncu profiles (exit 0)")
    paused = json.loads(read("gpm-paused.json") or "{}")
    if paused.get("devices"):
        print(f"paused: {paused['devices'][0]['state']}: {paused['devices'][0]['why']}")
        check(paused["devices"][0]["state"] == "paused", "status says the GPU is paused")
    y = "ncu-yield exit 0" in exits
    check(y, "without a pause, the daemon yields to ncu's process and ncu profiles (exit 0)", soft=True)
    print("daemon log: " + " | ".join(l.split("gpu-metrics: ", 1)[-1].strip()
                                      for l in read("daemon.log").splitlines() if "gpu-metrics" in l)[:1500])
    after = json.loads(read("gpm-after-ncu.json") or "{}")
    check(bool(after.get("devices")) and after["devices"][0]["state"] == "sampling",
          "sampling again after ncu")
    # Nsight Compute's per-kernel figures (pm-load ref: run's kernels at
    # run's sizes, clocks not locked) against the sampler's phase means:
    # the same kernels back to back, so the two should agree.
    out = read("ncu-paused.out")
    ref = {}
    for r in csv.DictReader(io.StringIO(out[out.find('"ID"'):] if '"ID"' in out else "")):
        name = r.get("Kernel Name", "")
        kind = ("triad" if name.startswith("triad") else "wmma" if name.startswith("wmma")
                else None if name.startswith("fill") else "gemm")
        try:
            ref.setdefault(kind, {})[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            pass
    for phase, kind, track, metric in (
            ("stream", "triad", "DRAM active", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
            ("stream", "triad", "SM active", "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"),
            ("gemm", "gemm", "Tensor pipe active",
             "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"),
            ("wmma", "wmma", "Tensor pipe active",
             "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed")):
        a = rows.get(phase, {}).get(f"GPU 0 {track}")
        b = ref.get(kind, {}).get(metric)
        if a is None or b is None:
            if phase != "wmma" or "wmma" in rows:
                check(False, f"{track} in the {phase} phase vs Nsight Compute's {kind} kernel: "
                      f"{'no sampled value' if a is None else 'no ncu value'}", soft=True)
            continue
        check(abs(a - b) <= 10, f"{track} in the {phase} phase {a:.1f} %, Nsight Compute's {kind} "
              f"kernel {b:.1f} % (within 10 points)", soft=True)


def paired(what, pairs, digits, bound=None):
    """pairs: (sampled, paused) ms, one round each.  Prints the medians and
    the paired ratios; with bound, a soft check on the median ratio."""
    if not pairs:
        check(False, f"{what}: no round with both runs", soft=True)
        return
    ratios = [a / b for a, b in pairs]
    print(f"{what}: sampled {statistics.median(a for a, _ in pairs):.{digits}f} ms, paused "
          f"{statistics.median(b for _, b in pairs):.{digits}f} ms (medians of {len(pairs)}); "
          f"paired ratios {', '.join(f'{r:.4f}' for r in ratios)}")
    if bound:
        med = statistics.median(ratios)
        check(med < bound, f"{what}: no measurable slowdown (median ratio {med:.4f} < {bound:g})",
              soft=True)


# The cost on the GPU: each phase's time with sampling on and paused.
rounds = [(phases(read(f"cost-on-{i}.out")), phases(read(f"cost-off-{i}.out"))) for i in (1, 2, 3)]
for p in ("stream", "gemm", "wmma"):
    pairs = [((a[p][1] - a[p][0]) / 1e6, (b[p][1] - b[p][0]) / 1e6)
             for a, b in rounds if p in a and p in b]
    if pairs:
        paired(f"cost {p}", pairs, 1, 1.02)


# The job's side: known-work's work time (launch-bound) with the counters
# sampled and paused, under the shim (checked) and without it (shown).
def work_ms(name):
    r = read(name)
    return json.loads(r).get("work_ns", 0) / 1e6 if r else 0


for shim, what, bound in (("shim", "known-work under the shim", 1.10),
                          ("bare", "known-work without it", None)):
    pairs = [(work_ms(f"kw-{shim}-on-{i}.json"), work_ms(f"kw-{shim}-off-{i}.json"))
             for i in range(1, 6)]
    paired(what, [(a, b) for a, b in pairs if a and b], 2, bound)
end_st = json.loads(read("gpm-end.json") or "{}")
if end_st.get("devices"):
    d = end_st["devices"][0]
    print(f"sampler: {d['samples']} samples, {d['overflows']} overflows, {d['decode_errors']} "
          f"decode and {d['eval_errors']} evaluation errors, {d['decode_cpu_s']:.2f} s CPU")
    check(d["decode_errors"] == 0 and d["eval_errors"] == 0, "no decode or evaluation errors")

stats = read("stats-gpu.txt")
print("stats --report gpu:\n" + stats[:3000])
check("DRAM" in stats and "Tensor" in stats, "stats --report gpu lists the GPU's metrics")
prom = read("metrics-file.prom") + read("metrics.txt")
fam = sorted(set(re.findall(r"^(cuptimon_gpu_\w+)\{", prom, re.M)))
print("metrics families: " + ", ".join(fam))
check("cuptimon_gpu_prof_sm_active" in fam and "cuptimon_gpu_prof_dram_active" in fam,
      "the metrics file has the DCGM-like families")
top = read("top.txt")
print("top --by device:\n" + top[:800])
check("counters:" in top, "top shows the GPU's counters")
print(f"RESULT {'FAIL' if fails else 'PASS'}, {len(fails)} failed")
sys.exit(1 if fails else 0)
