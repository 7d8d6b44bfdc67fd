#!/usr/bin/env python3
"""Compares the tables of a cuptimonctl export (issue 50) with cuptimonctl stats
on the same archive (tests/gpu/export-case.sh).

  export-check.py nsys PREFIX STATS.json KW.json
      PREFIX_cuda_gpu_kern_sum.csv etc., written by `nsys stats --format csv
      --output PREFIX export.sqlite`: nsys' own report scripts on the export.
  export-check.py sqlite EXPORT.sqlite STATS.json KW.json
      the same recipes through Python's sqlite3 (no nsys on the machine).

Per kernel name, memory operation and API call: count, total, median, min,
max equal (both read the same records; both medians exact).  Prints one line
per check and RESULT PASS or RESULT FAIL.
"""
import csv
import json
import re
import sqlite3
import statistics
import sys

fails = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        fails.append(what)


def num(v):
    v = str(v).replace(",", "")
    return float(v) if "." in v else int(v)


def from_nsys(prefix):
    out = {}
    for rep, key in (("cuda_gpu_kern_sum", "Name"), ("cuda_gpu_mem_time_sum", "Operation"),
                     ("cuda_api_sum", "Name")):
        rows = list(csv.DictReader(open("%s_%s.csv" % (prefix, rep))))
        cnt = "Instances" if rep == "cuda_gpu_kern_sum" else ("Count" if "mem" in rep else "Num Calls")
        out[rep] = {r[key]: (num(r[cnt]), num(r["Total Time (ns)"]), num(r["Med (ns)"]),
                             num(r["Min (ns)"]), num(r["Max (ns)"])) for r in rows}
    rows = list(csv.DictReader(open("%s_cuda_gpu_mem_size_sum.csv" % prefix)))
    mb = [k for k in rows[0] if k.startswith("Total")][0] if rows else "Total (MB)"
    out["cuda_gpu_mem_size_sum"] = {r["Operation"]: (num(r["Count"]), num(r[mb])) for r in rows}
    return out, mb


def merge_v(rows):
    """Rows by name with any _vN suffix cut; rows that meet keep count,
    total, min and max (their median is None: not comparable)."""
    out = {}
    for name, v in rows.items():
        base = re.sub(r"_v[0-9]+$", "", name)
        if base in out:
            o = out[base]
            out[base] = (o[0] + v[0], o[1] + v[1], None, min(o[3], v[3]), max(o[4], v[4]))
        else:
            out[base] = v
    return out


def groups(rows):
    by = {}
    for name, v in rows:
        by.setdefault(name, []).append(v)
    return {n: (len(v), sum(v), statistics.median(v), min(v), max(v)) for n, v in by.items()}


def from_sqlite(path):
    db = sqlite3.connect(path)
    strip = ("CASE substr(ids.value, -6, 2) WHEN '_v' THEN substr(ids.value, 1, length(ids.value)-6)"
             " ELSE ids.value END")
    return {
        "cuda_gpu_kern_sum": groups(db.execute(
            "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL AS k"
            " JOIN StringIds AS s ON s.id = k.demangledName")),
        "cuda_gpu_mem_time_sum": groups(db.execute(
            "SELECT '[CUDA memcpy ' || e.label || ']', m.end - m.start FROM"
            " CUPTI_ACTIVITY_KIND_MEMCPY AS m JOIN ENUM_CUDA_MEMCPY_OPER AS e ON e.id = m.copyKind"
            " UNION ALL SELECT '[CUDA memset]', end - start FROM CUPTI_ACTIVITY_KIND_MEMSET")),
        "cuda_api_sum": groups(db.execute(
            "SELECT " + strip + ", r.end - r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r"
            " LEFT JOIN StringIds AS ids ON ids.id = r.nameId")),
        "cuda_gpu_mem_size_sum": {k: (v[0], v[1]) for k, v in groups(db.execute(
            "SELECT '[CUDA memcpy ' || e.label || ']', m.bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY AS m"
            " JOIN ENUM_CUDA_MEMCPY_OPER AS e ON e.id = m.copyKind"
            " UNION ALL SELECT '[CUDA memset]', bytes FROM CUPTI_ACTIVITY_KIND_MEMSET")).items()},
    }


def main():
    mode, src, stats_p, kw_p = sys.argv[1:5]
    st = json.load(open(stats_p))
    if mode == "nsys":
        got, mb = from_nsys(src)
    else:
        got, mb = from_sqlite(src), None
    # API names: nsys' reports cut CUPTI's 4-digit _vNNNN suffix only
    # ("cuMemcpyDtoHAsync_v2" stays, as the driver's symbol is named),
    # cuptimonctl stats cuts every _vN: both sides are cut alike here, and
    # names that then meet compare by count, total, min and max.
    got["cuda_api_sum"] = merge_v(got["cuda_api_sum"])
    for rep, ref_rows, key, cnt in (("cuda_gpu_kern_sum", st["kernels"], "name", "instances"),
                                    ("cuda_gpu_mem_time_sum", st["memory_time"], "operation", "count"),
                                    ("cuda_api_sum", st["api"], "name", "calls")):
        ref = {r[key]: (r[cnt], r["total_ns"], r["med_ns"], r["min_ns"], r["max_ns"]) for r in ref_rows}
        if rep == "cuda_api_sum":
            ref = merge_v(ref)
        mine = got[rep]
        check(set(mine) == set(ref), "%s: the same %d names (%s)" % (
            rep, len(ref), sorted(set(mine) ^ set(ref))[:5]))
        bad = [n for n in ref if n in mine and
               any(a is not None and b is not None and abs(a - b) > (0.5 if i == 2 else 0)
                   for i, (a, b) in enumerate(zip(mine[n], ref[n])))]
        check(not bad, "%s: count, total, median, min, max equal (%s)" % (
            rep, [(n, mine[n], ref[n]) for n in bad[:3]]))
    ref = {r["operation"]: (r["count"], r["total_bytes"]) for r in st["memory_bytes"]}
    mine = got["cuda_gpu_mem_size_sum"]
    if mb:  # nsys gives MB (10^6 bytes), three decimals
        ok = set(mine) == set(ref) and all(
            mine[n][0] == ref[n][0] and abs(mine[n][1] - ref[n][1] / 1e6) < 0.001 for n in ref)
    else:
        ok = mine == ref
    check(ok, "cuda_gpu_mem_size_sum: counts and sizes equal (%s / %s)" % (mine, ref))
    # known-work's own account: every kernel it launched is in the export
    # exactly once (nothing lost, nothing invented), name by name.
    try:
        kw = json.load(open(kw_p))
    except (OSError, ValueError) as e:
        kw = {}
        print("note: the job's report not read: %s" % e)
    if isinstance(kw.get("kernels"), list) and "kernels_total" in kw:
        kern = got["cuda_gpu_kern_sum"]
        total = sum(v[0] for v in kern.values())
        check(total == kw["kernels_total"], "kernels: %d in the export, %d launched (known-work)" % (
            total, kw["kernels_total"]))
        for k in kw["kernels"]:
            name = k.get("demangled") or k.get("mangled")
            if name in kern:
                check(kern[name][0] == k["total"], "%s: %d in the export, %d launched" % (
                    name, kern[name][0], k["total"]))
            else:
                print("note: known-work's name %r is not one of the export's" % name)
    print("RESULT %s (%s)" % ("FAIL" if fails else "PASS",
                              "nsys stats on the export" if mode == "nsys" else "sqlite3 recipes"))


main()
