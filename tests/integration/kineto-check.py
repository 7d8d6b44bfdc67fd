#!/usr/bin/env python3
"""Checks a cuptimon trace against Kineto's dialect, with torch.profiler's
own trace as the reference (tests/data/kineto-ref/torch-2.11-h200.json.gz,
recorded on the H200 by tests/gpu/kineto-ref.py).  What is checked:

- the top level: schemaVersion, baseTimeNanoseconds (an integer, Unix ns),
  displayTimeUnit, and distributedInfo written so that HTA's rank pattern
  ("rank":\\s+N) finds it;
- every category cuptimon writes for CUDA work is one Kineto uses, with the
  same event phase;
- for kernels, copies, memsets, runtime and driver calls: every arg key the
  reference's events of that category carry is on cuptimon's (except the
  ones listed in NOT_YET, which need device properties);
- flows: each "s" ac2g has its "f" (binding point "e") with the same id;
- each launch is one event: no two launch calls share a correlation id;
- copies and memsets carry "memory bandwidth (GB/s)" equal to bytes/dur;
- process metadata: every process with events has process_name,
  process_labels (starting with Kineto's "CPU") and process_sort_index,
  each with the reference's keys and arg types, once.

- deviceProperties: a list of at least one device (exactly N with
  --devices N), each with the reference's keys, in its order, and types.

- with --annotations (a trace of annotated work): user_annotation and
  gpu_user_annotation slices as the reference has them (phase, arg keys
  but NOT_YET's), each GPU slice on a track with GPU work and named as a
  CPU slice is, and "ProfilerStep#N" steps when --steps is given.

usage: kineto-check.py REFERENCE TRACE [--ranks N] [--devices N] [--no-metadata]
                       [--annotations [--steps]]
(either file may be .gz).  --no-metadata leaves the process metadata and
deviceProperties out (for traces recorded before cuptimon wrote them
Kineto's way, such as cuptimon-h200-after).
Exits 1 with one line per failure.
"""
import collections
import gzip
import json
import re
import sys

# Kineto's kernel args that need the device's SM count and occupancy
# calculator; cuptimon does not write them yet (issue 18).
NOT_YET = {"kernel": {"queued", "blocks per SM", "warps per SM", "est. achieved occupancy %"},
           # PyTorch's own: the RecordFunction's handle and the event's index
           # in Kineto's CPU event list; cuptimon sees neither.
           "user_annotation": {"Record function id", "Ev Idx"}}
CUDA_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver")
ANNOT_CATS = ("user_annotation", "gpu_user_annotation")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        text = f.read()
    return text, json.loads(text)


def main(argv):
    ref_path, path = argv[1], argv[2]
    ranks = int(argv[argv.index("--ranks") + 1]) if "--ranks" in argv else None
    _, ref = load(ref_path)
    text, tr = load(path)
    fails = []

    def check(ok, what):
        if not ok:
            fails.append(what)

    check(tr.get("schemaVersion") == 1, f"schemaVersion is {tr.get('schemaVersion')!r}, not 1")
    base = tr.get("baseTimeNanoseconds")
    check(isinstance(base, int) and base > 10**18, f"baseTimeNanoseconds is {base!r}")
    check(tr.get("displayTimeUnit") == ref.get("displayTimeUnit"),
          f"displayTimeUnit {tr.get('displayTimeUnit')!r}, Kineto's {ref.get('displayTimeUnit')!r}")
    m = re.search(r'"rank":\s+(\d+)', text)
    check(m is not None, "HTA's rank pattern (\"rank\":\\s+N) does not match")
    di = tr.get("distributedInfo", {})
    check(m is None or int(m.group(1)) == di.get("rank"),
          f"the first rank HTA finds is {m and m.group(1)}, distributedInfo says {di.get('rank')}")
    if ranks is not None:
        got = sorted({p.get("rank") for p in tr.get("otherData", {}).get("processes", [])})
        check(got == list(range(ranks)), f"the trace's processes have ranks {got}, expected 0..{ranks - 1}")

    def by_cat(d):
        out = collections.defaultdict(list)
        for e in d["traceEvents"]:
            out[e.get("cat")].append(e)
        return out

    rc, oc = by_cat(ref), by_cat(tr)
    ref_ph = {c: {e.get("ph") for e in v} for c, v in rc.items()}
    for c in CUDA_CATS:
        # A driver call is written only when it launched work itself (a
        # library's cuLaunchKernel), which a trace need not have.
        check(c in oc or c == "cuda_driver", f"no {c} events")
        if c in oc and c in rc:
            check({e.get("ph") for e in oc[c]} == ref_ph[c],
                  f"{c}: phases {sorted({e.get('ph') for e in oc[c]})}, Kineto's {sorted(ref_ph[c])}")
            want = set().union(*(set(e.get("args", {})) for e in rc[c])) - NOT_YET.get(c, set())
            # "External id" is on events inside a user annotation only.
            want.discard("External id")
            for e in oc[c]:
                missing = want - set(e.get("args", {}))
                if missing:
                    check(False, f"{c} {e.get('name')!r} lacks Kineto's args {sorted(missing)}")
                    break
    annotated = [e for c in CUDA_CATS for e in oc.get(c, []) if "annotation" in e.get("args", {})]
    check(all("External id" in e["args"] for e in annotated),
          "an annotated event has no \"External id\" (Kineto's spelling)")
    check(not any("external id" in e.get("args", {}) for c in CUDA_CATS for e in oc.get(c, [])),
          "an event has \"external id\" in lower case")

    # Flows.
    starts = {(e["pid"], e["id"]) for e in oc.get("ac2g", []) if e["ph"] == "s"}
    ends = {(e["pid"], e["id"]) for e in oc.get("ac2g", []) if e["ph"] == "f" and e.get("bp") == "e"}
    check(starts and starts == ends, f"ac2g flows: {len(starts)} starts, {len(ends)} bound ends, "
          f"{len(starts ^ ends)} unpaired")

    # One event per launch.
    launches = collections.Counter(
        (e["pid"], e["args"].get("correlation")) for c in ("cuda_runtime", "cuda_driver")
        for e in oc.get(c, []) if "Launch" in e.get("name", ""))
    dup = [k for k, n in launches.items() if n > 1]
    check(not dup, f"{len(dup)} launches are written twice (same correlation id), e.g. {dup[:3]}")

    # Bandwidth.
    for c in ("gpu_memcpy", "gpu_memset"):
        for e in oc.get(c, []):
            a = e.get("args", {})
            bw = a.get("memory bandwidth (GB/s)")
            dur_ns = float(e.get("dur", 0)) * 1000
            want = a.get("bytes", 0) / dur_ns if dur_ns > 0 else 0
            if bw is None or abs(bw - want) > max(0.002, want * 0.01):
                check(False, f"{c} bandwidth {bw!r}, bytes/dur gives {want:.3f}")
                break

    # Process metadata, as Kineto writes it for its CPU process.
    PROC_META = ("process_name", "process_labels", "process_sort_index")
    ref_cpu = {e["pid"] for e in ref["traceEvents"] if e.get("cat") == "cuda_runtime"}
    ref_meta = {e["name"]: e for e in ref["traceEvents"]
                if e.get("ph") == "M" and e.get("name") in PROC_META and e.get("pid") in ref_cpu}
    check(sorted(ref_meta) == sorted(PROC_META), f"the reference's CPU process has {sorted(ref_meta)}")
    meta = collections.defaultdict(list)
    for e in tr["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") in PROC_META:
            meta[(e.get("pid"), e["name"])].append(e)
    pids = {e.get("pid") for e in tr["traceEvents"] if e.get("ph") != "M" and "pid" in e}
    for pid in sorted(pids, key=str) if "--no-metadata" not in argv else []:
        for name in PROC_META:
            evs = meta.get((pid, name), [])
            if len(evs) != 1:
                check(False, f"pid {pid} has {len(evs)} {name} events, not 1")
                continue
            e, r = evs[0], ref_meta.get(name)
            if r is None:
                continue
            # "ts" is Kineto's trace start, which a metadata event needs not carry.
            keys, rkeys = set(e) - {"ts"}, set(r) - {"ts"}
            check(keys == rkeys, f"{name} of pid {pid} has keys {sorted(keys)}, Kineto's {sorted(rkeys)}")
            check(e.get("tid") == 0, f"{name} of pid {pid} has tid {e.get('tid')!r}, Kineto's 0")
            a, ra = e.get("args", {}), r.get("args", {})
            check(set(a) == set(ra) and all(type(a[k]) is type(ra[k]) for k in ra),
                  f"{name} of pid {pid} has args {a}, Kineto's are like {ra}")
            if name == "process_labels":
                lab = str(a.get("labels", ""))
                check(lab == "CPU" or lab.startswith("CPU, "),
                      f"process_labels of pid {pid} is {lab!r}, not Kineto's \"CPU\" first")

    # deviceProperties, as Kineto writes them.
    if "--no-metadata" not in argv:
        rdev = ref["deviceProperties"][0]
        devs = tr.get("deviceProperties")
        want_n = int(argv[argv.index("--devices") + 1]) if "--devices" in argv else None
        check(isinstance(devs, list) and len(devs) >= 1 and (want_n is None or len(devs) == want_n),
              f"deviceProperties is {devs!r}, not a list of {want_n or 'some'} device(s)")
        for d in devs if isinstance(devs, list) else []:
            check(isinstance(d, dict) and list(d) == list(rdev),
                  f"a device has keys {list(d) if isinstance(d, dict) else d!r}, Kineto's {list(rdev)}")
            if isinstance(d, dict):
                bad = [k for k in rdev if k in d and type(d[k]) is not type(rdev[k])]
                check(not bad, f"device {d.get('id')}: {bad} are not of Kineto's types")

    # Annotation ranges.
    if "--annotations" in argv:
        for c in ANNOT_CATS:
            check(c in oc, f"no {c} events")
            if c not in oc or c not in rc:
                continue
            check({e.get("ph") for e in oc[c]} == ref_ph[c],
                  f"{c}: phases {sorted({e.get('ph') for e in oc[c]})}, Kineto's {sorted(ref_ph[c])}")
            want = set().union(*(set(e.get("args", {})) for e in rc[c])) - NOT_YET.get(c, set())
            for e in oc[c]:
                missing = want - set(e.get("args", {}))
                if missing:
                    check(False, f"{c} {e.get('name')!r} lacks Kineto's args {sorted(missing)}")
                    break
        gpu_tracks = {(e["pid"], e["tid"]) for c in ("kernel", "gpu_memcpy", "gpu_memset")
                      for e in oc.get(c, [])}
        cpu_names = {e.get("name") for e in oc.get("user_annotation", [])}
        stray = [e for e in oc.get("gpu_user_annotation", []) if (e["pid"], e["tid"]) not in gpu_tracks]
        check(not stray, f"{len(stray)} gpu_user_annotation slices on tracks without GPU work")
        unnamed = [e for e in oc.get("gpu_user_annotation", []) if e.get("name") not in cpu_names]
        check(not unnamed, f"{len(unnamed)} gpu_user_annotation slices name no user_annotation")
        if "--steps" in argv:
            steps = [e for e in oc.get("user_annotation", [])
                     if re.fullmatch(r"ProfilerStep#\d+", e.get("name", ""))]
            check(steps, "no ProfilerStep#N user_annotation (HTA: \"ProfilerStep not found\")")

    n = {c: len(oc.get(c, [])) for c in CUDA_CATS + ANNOT_CATS}
    if fails:
        for f in fails:
            print("FAIL:", f)
        return 1
    print("kineto-check: Kineto's dialect holds:", ", ".join(f"{v} {k}" for k, v in n.items()),
          f"{len(starts)} flows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
