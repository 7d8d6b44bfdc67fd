#!/usr/bin/env python3
"""Reads pm-overflow.sh candidates' pm-candidates.txt (issue 48): per set
and load, the sampler's process CPU (% of one core, median of the rows and
their range); per set and phase, SM active, occupancy and the tensor pipe
(phase means at 100 ms) against the current default's (cur).  The last line,
"CHOSEN name", is the cheapest candidate whose three agree with cur's within
3 points in the stream, GEMM and WMMA phases and whose median cost under
load is at most 1.5 % of a core ("CHOSEN none" otherwise).

usage: pm-candidates.py pm-candidates.txt"""
import re
import statistics
import sys

KEY = {  # CUPTI base counter -> the daemon's key
    "sm__cycles_active": "sm_active",
    "sm__warps_active": "sm_occupancy",
    "sm__warps_active_realtime": "sm_occupancy",
    "tpc__warps_active_realtime": "sm_occupancy",
    "sm__pipe_tensor_cycles_active": "tensor_active",
    "sm__pipe_tensor_cycles_active_realtime": "tensor_active",
}
THREE = ("sm_active", "sm_occupancy", "tensor_active")


def base(name):
    m = re.search(r"([a-z0-9]+__[a-z0-9_]+)", name)
    return m.group(1) if m else name


def main(path):
    cost = {}  # (set, load) -> [pct]
    means = {}  # set -> {phase: {key: value}}
    cur = None
    mnames = {}
    rows = {}
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        m = re.match(r"== cost-(\w+)-(\w+)-\d+ rc=", line)
        if m:
            cur = ("cost", m.group(2), m.group(1))
            continue
        m = re.match(r"== values-(\w+) rc=", line)
        if m:
            cur = ("values", m.group(1))
            mnames, rows = {}, {}
            means[m.group(1)] = {}
            continue
        if not cur:
            continue
        m = re.search(r"process_cpu_ms .*\(([0-9.]+)% of one core\)", line)
        if m and cur[0] == "cost":
            cost.setdefault((cur[1], cur[2]), []).append(float(m.group(1)))
            continue
        if cur[0] != "values":
            continue
        m = re.match(r"RESULT phase_means m(\d+) = (\S+)", line)
        if m:
            mnames[int(m.group(1))] = m.group(2)
            k = KEY.get(base(m.group(2)))
            if k:
                for ph, vals in rows.items():
                    if int(m.group(1)) < len(vals):
                        means[cur[1]].setdefault(ph, {})[k] = vals[int(m.group(1))]
            continue
        m = re.match(r"RESULT phase_means (\w+)\s+(\d+)((?:\s+\S+)+)$", line)
        if m and m.group(1) != "phase":
            rows[m.group(1)] = [float(x) for x in m.group(3).split()]
    sets = sorted({s for s, _ in cost}, key=lambda s: (s != "cur", s))
    print("cost: the sampler's process CPU, % of one core (median [min, max] of the rows)")
    med = {}
    for s in sets:
        cells = []
        for load in ("idle", "stream", "gemm"):
            v = cost.get((s, load), [])
            if v:
                med[(s, load)] = statistics.median(v)
                cells.append(f"{load} {med[(s, load)]:6.2f} [{min(v):.2f}, {max(v):.2f}]")
            else:
                cells.append(f"{load}      -")
        print(f"  {s:8s} " + "  ".join(cells))
    print("values: phase means at 100 ms (SM active / occupancy / tensor pipe, %)")
    for s in sets:
        for ph in ("stream", "gemm", "wmma"):
            v = means.get(s, {}).get(ph, {})
            print(f"  {s:8s} {ph:7s} " + " / ".join(f"{v.get(k, float('nan')):6.1f}" for k in THREE))
    chosen = "none"
    ref = means.get("cur", {})
    for s in sorted(sets, key=lambda s: max(med.get((s, l), 1e9) for l in ("stream", "gemm"))):
        if s == "cur":
            continue
        load_cost = max(med.get((s, l), 1e9) for l in ("stream", "gemm"))
        diffs = [abs(means.get(s, {}).get(ph, {}).get(k, 1e9) - ref.get(ph, {}).get(k, -1e9))
                 for ph in ("stream", "gemm", "wmma") for k in THREE]
        worst = max(diffs) if diffs else 1e9
        print(f"  {s}: cost under load {load_cost:.2f} %, largest difference from cur {worst:.2f} points")
        if chosen == "none" and load_cost <= 1.5 and worst <= 3:
            chosen = s
    print(f"CHOSEN {chosen}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
