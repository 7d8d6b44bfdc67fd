#!/usr/bin/env python3
"""Checks a cuptimon archive against the reports of the workloads that made it.

usage: check-archive.py [--drops-ok] CUPTIMONCTL OUTPUT_DIR REPORT.json...

Decodes OUTPUT_DIR with `cuptimonctl decode` (trace and summary), then for each
workload report (its pid, the records the libcupti double says it emitted,
by kernel name) proves that the trace holds every one of them exactly once:
kernel counts per demangled name, memcpy and memset counts, and no
correlation id seen twice within a process.  Exits 1 with the differences.
A workload whose double dropped records fails, unless --drops-ok (a test
that drops on purpose and checks the count itself): then what the double
recorded must be there exactly once.
"""
import collections
import json
import subprocess
import sys
import tempfile
import os

GPU_CATS = {"kernel": "kernels_recorded", "gpu_memcpy": "memcpys_recorded",
            "gpu_memset": "memsets_recorded"}


def demangle(names):
    if not names:
        return {}
    out = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True,
                         text=True, check=True).stdout.splitlines()
    return dict(zip(names, out))


def main():
    args = sys.argv[1:]
    drops_ok = bool(args) and args[0] == "--drops-ok"
    if drops_ok:
        args = args[1:]
    ctl, root, reports = args[0], args[1], args[2:]
    tmpdir = tempfile.TemporaryDirectory(prefix="cuptimon-check-")  # removed at exit
    tmp = tmpdir.name
    trace_path = os.path.join(tmp, "trace.json")
    summary_path = os.path.join(tmp, "summary.json")
    r = subprocess.run([ctl, "decode", root, "-o", trace_path, "--summary-out", summary_path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: cuptimonctl decode exited {r.returncode}: {r.stderr.strip()}")
    with open(trace_path) as f:
        trace = json.load(f)
    with open(summary_path) as f:
        summary = json.load(f)

    # pid -> category -> count; pid -> demangled name -> count
    cats = collections.defaultdict(collections.Counter)
    names = collections.defaultdict(collections.Counter)
    corr = collections.defaultdict(collections.Counter)
    for ev in trace["traceEvents"]:
        if ev.get("ph") != "X" or ev.get("cat") not in GPU_CATS:
            continue
        pid = ev["pid"]
        cats[pid][ev["cat"]] += 1
        if ev["cat"] == "kernel":
            names[pid][ev["name"]] += 1
        c = ev.get("args", {}).get("correlation")
        if c:
            corr[pid][(ev["cat"], c)] += 1

    problems = []
    for path in reports:
        with open(path) as f:
            rep = json.load(f)
        pid = rep["pid"]
        if rep.get("dropped", 0) and not drops_ok:
            problems.append(f"pid {pid}: the double dropped {rep['dropped']} records "
                            "(the test is sized so that nothing drops)")
        for cat, key in GPU_CATS.items():
            want, got = rep[key], cats[pid][cat]
            if want != got:
                problems.append(f"pid {pid}: {cat}: workload emitted {want}, trace has {got}")
        dm = demangle(sorted(rep["by_name"]))
        for mangled, want in rep["by_name"].items():
            got = names[pid][dm[mangled]]
            if got != want:
                problems.append(f"pid {pid}: kernel {dm[mangled]!r}: emitted {want}, trace has {got}")
        dup = [k for k, n in corr[pid].items() if n > 1]
        if dup:
            problems.append(f"pid {pid}: {len(dup)} correlation ids appear twice, e.g. {dup[:3]}")
        if rep["kernels_recorded"] == 0:
            problems.append(f"pid {pid}: the workload recorded nothing: was the shim loaded?")
    if summary["undecodable"]["bytes"]:
        problems.append(f"the summary reports undecodable bytes: {summary['undecodable']}")
    for s in summary["sessions"]:
        if s["corrupt_chunks"] or s["corrupt_strings"] or s["torn_tails"]:
            problems.append(f"session {s['dir']}: damaged archive: {s}")
    if problems:
        print("\n".join("FAIL: " + p for p in problems))
        sys.exit(1)
    total = sum(sum(c.values()) for c in cats.values())
    print(f"archive check: {len(reports)} process(es), {total} GPU records, all present exactly once")


if __name__ == "__main__":
    main()
