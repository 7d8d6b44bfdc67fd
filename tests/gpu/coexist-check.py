#!/usr/bin/env python3
"""coexist-check: the checks of coexist-case.sh (issue 17), from its work dir.

usage: coexist-check.py WORK_DIR VARIANT...   (prints the report; exit 0 when
                                              every check passed, 1 if not)
       coexist-check.py --self-test          (the checks against synthetic
                                              runs, good and broken)

WORK_DIR holds, per run, RUN/rep.json (torch-loop.py's report), RUN/err,
RUN/rc and RUN/wall_ms, where RUN is noprof (the plan under the injected
shim, no profiler) or VARIANT-MODE for MODE ref (no shim), preload, inject;
ours/PID.N.json (cuptimonctl decode of each session of the daemon's
archive, PID from its meta.json) and d.log (the daemon's log).

Every GPU event (kernel, copy, memset) is placed in its step by its start:
the step whose CLOCK_REALTIME marks (the loop's, around each synchronized
step) hold it, within COEXIST_STEP_SLACK_NS (default 1000) at either end,
and its end too.  Per variant and cycle:
  ref       every event of the profiler's trace inside that cycle's active
            steps (this holds the method itself to account: the marks, the
            clocks, the schedule);
  preload,  the same, and per (step, kind, name) the same counts as ref's
  inject    trace of that cycle; every event's correlation id in cuptimon's
            archive of that process, same kind and name, its start within
            the thresholds below of cuptimon's (both mapped to Unix ns, each
            by its own tool); no correlation id twice.
Per shim run: cuptimon's archive holds per step, kind and name what the
unprofiled run's does, and in the active steps what ref's trace does.
Start agreement, |torch.profiler - cuptimon| per correlation id, per cycle:
median <= COEXIST_MEDIAN_NS (1000), 99th percentile <= COEXIST_P99_NS
(2000), max <= COEXIST_MAX_NS (5000); durations within COEXIST_MAX_NS.
The report also gives the signed median (the two clock mappings' offset),
the spread around it, and how many are within 1 us.
"""
import bisect
import collections
import decimal
import json
import os
import re
import shutil
import sys
import tempfile

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
MODES = ("ref", "preload", "inject")


def env_int(name, default):
    v = os.environ.get(name, "")
    try:
        return int(v) if v else default
    except ValueError:
        sys.stderr.write("coexist-check: %s=%r is not an integer; using %d\n" % (name, v, default))
        return default


def us_to_ns(v):
    """A trace's microseconds (read as Decimal or int) as integer ns."""
    return int((decimal.Decimal(v) * 1000).to_integral_value(rounding=decimal.ROUND_HALF_EVEN))


def load_gpu_events(path):
    """GPU events of a chrome trace: dicts kind, name, start, end (Unix ns),
    corr, pid.  Raises on a missing or unreadable file."""
    with open(path) as f:
        t = json.load(f, parse_float=decimal.Decimal)
    ev = t["traceEvents"] if isinstance(t, dict) else t
    base = 0
    if isinstance(t, dict):
        base = int(t.get("baseTimeNanoseconds") or (t.get("otherData") or {}).get("base_unix_ns") or 0)
    out = []
    for e in ev:
        kind = GPU_CATS.get(e.get("cat"))
        if kind is None or e.get("ph") != "X":
            continue
        s = base + us_to_ns(e["ts"])
        corr = (e.get("args") or {}).get("correlation")
        out.append({"kind": kind, "name": e.get("name", "?"), "start": s,
                    "end": s + us_to_ns(e.get("dur", 0)), "corr": corr, "pid": e.get("pid")})
    return out


class Steps:
    """A run's step marks: which step holds an event."""

    def __init__(self, marks, slack):
        self.marks = [tuple(m) for m in marks]
        self.starts = [m[0] for m in self.marks]
        self.slack = slack

    def place(self, start, end):
        """(step index or a label of where it lies, 'ok' or what is wrong)."""
        m, sl = self.marks, self.slack
        if not m:
            return "no steps", "no step marks"
        i = bisect.bisect_right(self.starts, start) - 1
        cands = []
        if i >= 0 and start <= m[i][1]:
            cands = [i]
        else:
            if i >= 0 and start - m[i][1] <= sl:
                cands.append(i)
            if i + 1 < len(m) and m[i + 1][0] - start <= sl:
                cands.append(i + 1)
        for j in cands:
            if end <= m[j][1] + sl:
                return j, "ok"
        if cands:
            j = cands[0]
            return j, "ends %d ns after step %d's end mark" % (end - m[j][1], j)
        if i < 0:
            return "before step 0", "starts %d ns before step 0" % (m[0][0] - start)
        if i == len(m) - 1:
            return "after step %d" % i, "starts %d ns after step %d" % (start - m[i][1], i)
        return "between steps %d-%d" % (i, i + 1), "starts %d ns after step %d's end, %d ns before " \
            "step %d" % (start - m[i][1], i, m[i + 1][0] - start, i + 1)


def pct(sorted_vals, q):
    if not sorted_vals:
        return None
    k = min(len(sorted_vals) - 1, max(0, int(round(q * (len(sorted_vals) - 1)))))
    return sorted_vals[k]


def counter_lines(want, got, wname, gname, top=8):
    """The keys where two Counters differ, worst first, as text."""
    keys = set(want) | set(got)
    d = [(k, want.get(k, 0), got.get(k, 0)) for k in keys if want.get(k, 0) != got.get(k, 0)]
    d.sort(key=lambda x: (-abs(x[1] - x[2]), str(x[0])))
    out = []
    for k, a, b in d[:top]:
        if isinstance(k, tuple) and len(k) == 3:
            where = ("step %s" % k[0]) if isinstance(k[0], int) else k[0]
            out.append("      %s %s %s: %s %d, %s %d" % (where, k[1], k[2][:100], wname, a, gname, b))
        else:
            out.append("      %s: %s %d, %s %d" % (k, wname, a, gname, b))
    if len(d) > top:
        out.append("      ... %d more differences" % (len(d) - top))
    return out


class Checker:
    def __init__(self, work, variants, out=sys.stdout):
        self.w = work
        self.variants = variants
        self.out = out
        self.slack = env_int("COEXIST_STEP_SLACK_NS", 1000)
        self.med_ns = env_int("COEXIST_MEDIAN_NS", 1000)
        self.p99_ns = env_int("COEXIST_P99_NS", 2000)
        self.max_ns = env_int("COEXIST_MAX_NS", 5000)
        self.fails = []
        self.n = 0

    def say(self, s):
        self.out.write(s + "\n")

    def check(self, ok, what, detail=()):
        self.n += 1
        self.say(("PASS " if ok else "FAIL ") + what)
        if not ok:
            self.fails.append(what)
            for line in detail:
                self.say(line)
        return ok

    def run_of(self, name):
        """(report or None, why) of one run."""
        d = os.path.join(self.w, name)
        try:
            rc = int(open(os.path.join(d, "rc")).read().strip())
        except (OSError, ValueError):
            rc = None
        try:
            err = open(os.path.join(d, "err"), errors="replace").read()
        except OSError:
            err = ""
        try:
            rep = json.load(open(os.path.join(d, "rep.json")))
        except (OSError, ValueError) as e:
            rep = None
            why = str(e)
        ok = rc == 0 and rep is not None
        tail = ["      | " + x for x in err.strip().splitlines()[-12:]]
        self.check(ok, "%s: ran (exit %s, report %s)" % (name, rc, "present" if rep else "missing: " + why),
                   tail)
        return rep if ok else None, err

    def place_all(self, steps, evs):
        """Counter of (bucket, kind, name) and the events not inside a step."""
        c, bad = collections.Counter(), []
        for e in evs:
            b, why = steps.place(e["start"], e["end"])
            c[(b, e["kind"], e["name"])] += 1
            if why != "ok":
                bad.append((e, b, why))
        return c, bad

    def main(self):
        s = self.say
        s("coexist-check: step slack %d ns; start agreement per cycle: median <= %d ns, p99 <= %d ns, "
          "max <= %d ns (COEXIST_STEP_SLACK_NS, COEXIST_MEDIAN_NS, COEXIST_P99_NS, COEXIST_MAX_NS)"
          % (self.slack, self.med_ns, self.p99_ns, self.max_ns))
        self.ours = collections.defaultdict(list)
        sess = sorted(os.listdir(os.path.join(self.w, "ours"))) if os.path.isdir(os.path.join(self.w, "ours")) else []
        bad = []
        for f in sess:
            # ours/PID.N.json: one session, decoded on its own
            try:
                pid = int(f.split(".")[0])
                self.ours[pid] += load_gpu_events(os.path.join(self.w, "ours", f))
            except (OSError, ValueError, KeyError) as e:
                bad.append("%s: %s" % (f, e))
        self.check(sess and not bad, "cuptimon's archive decoded: %d sessions, %d unreadable%s"
                   % (len(sess), len(bad), (": " + "; ".join(bad[:3])) if bad else ""))
        try:
            self.dlog = open(os.path.join(self.w, "d.log"), errors="replace").read()
        except OSError:
            self.dlog = ""
        self.noprof = None
        rep, _ = self.run_of("noprof")
        if rep:
            steps = Steps(rep["step_marks"], self.slack)
            mine = self.ours.get(rep["pid"], [])
            c, _ = self.place_all(steps, mine)
            kinds = collections.Counter(e["kind"] for e in mine)
            self.check(kinds["kernel"] > 0, "noprof: cuptimon archived %s of the unprofiled run (%d steps)"
                       % (dict(kinds), len(rep["step_marks"])))
            self.noprof = {"rep": rep, "kinds": kinds,
                           "steps": collections.Counter({k: v for k, v in c.items() if isinstance(k[0], int)})}
        per = []
        for v in self.variants:
            s("== variant %s ==" % v)
            n0, f0 = self.n, len(self.fails)
            self.variant(v)
            per.append("%s %d/%d" % (v, self.n - n0 - (len(self.fails) - f0), self.n - n0))
        s("checks passed per variant: " + ", ".join(per))
        s("timings (wall ms per run): " + ", ".join(
            "%s %s" % (n, self.wall(n)) for n in ["noprof"] + ["%s-%s" % (v, m) for v in self.variants
                                                            for m in MODES]))
        s("RESULT %s" % ("PASS (%d checks)" % self.n if not self.fails else
                          "FAIL (%d of %d checks failed: %s)" % (len(self.fails), self.n,
                                                                 "; ".join(f[:60] for f in self.fails[:6]))))
        return 0 if not self.fails else 1

    def wall(self, name):
        try:
            return open(os.path.join(self.w, name, "wall_ms")).read().strip()
        except OSError:
            return "-"

    def trace_cycles(self, name, rep):
        """Per cycle: (its steps, its GPU events) or (steps, None, why)."""
        out = []
        for c in rep.get("profile_cycles", []):
            try:
                path = c["torch_trace"]
                # a copy of the work dir elsewhere (coexist-work.tar.gz): the
                # trace beside the report
                if not os.path.exists(path):
                    path = os.path.join(self.w, name, os.path.basename(path))
                out.append((c["steps"], load_gpu_events(path), None))
            except (OSError, ValueError, KeyError, TypeError) as e:
                out.append((c.get("steps", []), None, str(e)))
        return out

    def expected_cycles(self, rep):
        p = rep.get("plan") or {}
        return p.get("repeat") if rep.get("variant") == "schedule" else p.get("cycles")

    def variant(self, v):
        ref = None
        for m in MODES:
            name = "%s-%s" % (v, m)
            rep, err = self.run_of(name)
            if not rep:
                continue
            steps = Steps(rep["step_marks"], self.slack)
            if self.noprof:
                nt = len(self.noprof["rep"]["step_marks"])
                self.check(len(rep["step_marks"]) == nt, "%s: ran the plan's %d steps (noprof %d)"
                           % (name, len(rep["step_marks"]), nt))
            cyc = self.trace_cycles(name, rep)
            want = self.expected_cycles(rep)
            self.check(len(cyc) == want, "%s: %d profiler cycles, the plan %s" % (name, len(cyc), want))
            if v == "schedule":
                calls = rep.get("trace_ready_calls", [])
                got = [c.get("after_step") for c in calls]
                exp = [c["steps"][-1] for c in rep.get("profile_cycles", [])]
                self.check(got == exp, "%s: on_trace_ready called after steps %s, the schedule's cycles "
                           "end at %s" % (name, got, exp))
            per_cycle = []
            for k, (csteps, evs, why) in enumerate(cyc):
                tag = "%s cycle %d (steps %s-%s)" % (name, k, csteps[0] if csteps else "?",
                                                   csteps[-1] if csteps else "?")
                if evs is None:
                    self.check(False, "%s: torch.profiler's trace readable: %s" % (tag, why))
                    per_cycle.append(None)
                    continue
                c, bad = self.place_all(steps, evs)
                active = set(csteps)
                stray = list(bad)
                for e in evs:
                    b, why = steps.place(e["start"], e["end"])
                    if why == "ok" and b not in active:
                        stray.append((e, b, "in step %d, not one of the cycle's (%s)"
                                      % (b, rep.get("step_roles", [])[b] if b < len(rep.get("step_roles", []))
                                         else "?")))
                kinds = collections.Counter(e["kind"] for e in evs)
                t0 = steps.marks[0][0] if steps.marks else 0
                detail = ["      %s %s: %s (starts at +%.3f ms of the plan, correlation %s)" % (
                    e["kind"], e["name"][:80], why, (e["start"] - t0) / 1e6, e["corr"]) for e, b, why in stray[:8]]
                if len(stray) > 8:
                    where = collections.Counter(str(b) for _, b, _ in stray)
                    detail.append("      ... %d in all, by where: %s" % (len(stray), dict(where.most_common(8))))
                self.check(kinds["kernel"] > 0 and not stray,
                           "%s: %s, every one inside the cycle's active steps (%d outside)"
                           % (tag, dict(kinds), len(stray)), detail)
                per_cycle.append((csteps, evs, c))
                if m == "ref":
                    continue
                if ref is not None and k < len(ref) and ref[k] is not None:
                    rc = ref[k][2]
                    self.check(c == rc, "%s: per step, kind and name the same as ref's trace (%d events, ref %d)"
                               % (tag, sum(c.values()), sum(rc.values())),
                               counter_lines(rc, c, "ref", m))
                else:
                    self.check(False, "%s: no reference trace of this cycle to compare with" % tag)
                self.agreement(tag, rep["pid"], evs)
            if m == "ref":
                ref = per_cycle
                continue
            self.archive(name, rep, steps, ref)
            pid = rep["pid"]
            self.check("(pid %d): another CUPTI client took" % pid not in self.dlog,
                       "%s: the daemon never saw CUPTI taken from pid %d" % (name, pid))
            if m == "inject":
                self.check("took the activity callbacks" not in err, "%s: the shim never lost CUPTI" % name)
                self.check("routed" in err, "%s: the shim routed the job's CUPTI imports to itself: %s" % (
                    name, next((x for x in err.splitlines() if "routed" in x), "(no line)")))

    def agreement(self, tag, pid, evs):
        mine = collections.defaultdict(list)
        for e in self.ours.get(pid, []):
            mine[(e["kind"], e["corr"])].append(e)
        seen = collections.Counter((e["kind"], e["corr"]) for e in evs)
        twice = [k for k, n in seen.items() if n > 1]
        self.check(not twice, "%s: no correlation id twice in torch.profiler's trace (%d twice)" % (tag, len(twice)),
                   ["      %s correlation %s: %d times" % (k[0], k[1], seen[k]) for k in twice[:8]])
        missing, wrong, d, dd = [], [], [], []
        for e in evs:
            o = mine.get((e["kind"], e["corr"]))
            if not o or len(o) != 1:
                missing.append((e, len(o) if o else 0))
                continue
            o = o[0]
            if o["name"] != e["name"]:
                wrong.append((e, o))
            d.append(e["start"] - o["start"])
            dd.append(abs((e["end"] - e["start"]) - (o["end"] - o["start"])))
        self.check(not missing, "%s: each event's correlation id once in cuptimon's archive of pid %d (%d of %d not)"
                   % (tag, pid, len(missing), len(evs)),
                   ["      %s %s correlation %s: %d records in cuptimon's archive" % (
                       e["kind"], e["name"][:80], e["corr"], n) for e, n in missing[:8]])
        self.check(not wrong, "%s: the same name in both for each correlation id (%d differ)" % (tag, len(wrong)),
                   ["      correlation %s: torch.profiler %s, cuptimon %s" % (e["corr"], e["name"][:70], o["name"][:70])
                    for e, o in wrong[:8]])
        if not d:
            self.check(False, "%s: start agreement: no event matched by correlation id" % tag)
            return
        a = sorted(abs(x) for x in d)
        sd = sorted(d)
        med, p99, mx = pct(a, 0.5), pct(a, 0.99), a[-1]
        off = pct(sd, 0.5)
        spread = (pct(sd, 0.99) - pct(sd, 0.01))
        within = sum(1 for x in a if x <= 1000)
        worst = sorted(zip(d, range(len(d))), key=lambda x: -abs(x[0]))[:5]
        matched = [e for e in evs if mine.get((e["kind"], e["corr"])) and len(mine[(e["kind"], e["corr"])]) == 1]
        detail = ["      worst: " + ", ".join("%s corr %s %+d ns" % (matched[i]["name"][:40], matched[i]["corr"], x)
                                            for x, i in worst)]
        self.check(med <= self.med_ns and p99 <= self.p99_ns and mx <= self.max_ns and max(dd) <= self.max_ns,
                   "%s: |torch.profiler - cuptimon| start per correlation id over %d events: median %d ns, "
                   "p99 %d ns, max %d ns (signed median %+d ns, p1-p99 spread %d ns, %d within 1 us); "
                   "duration max %d ns" % (tag, len(d), med, p99, mx, off, spread, within, max(dd)), detail)

    def archive(self, name, rep, steps, ref):
        """cuptimon's own archive of a shim run: everything, in its steps."""
        mine = self.ours.get(rep["pid"], [])
        kinds = collections.Counter(e["kind"] for e in mine)
        c, _ = self.place_all(steps, mine)
        c = collections.Counter({k: v for k, v in c.items() if isinstance(k[0], int)})
        if self.noprof:
            self.check(kinds == self.noprof["kinds"], "%s: cuptimon archived %s, the unprofiled run %s"
                       % (name, dict(kinds), dict(self.noprof["kinds"])))
            self.check(c == self.noprof["steps"], "%s: cuptimon's archive per step, kind and name the same as "
                       "the unprofiled run's (%d events in steps, noprof %d)" % (
                           name, sum(c.values()), sum(self.noprof["steps"].values())),
                       counter_lines(self.noprof["steps"], c, "noprof", "here"))
        for k, cy in enumerate(ref or []):
            if cy is None:
                continue
            active = set(cy[0])
            mc = collections.Counter({x: n for x, n in c.items() if x[0] in active})
            self.check(mc == cy[2], "%s: cuptimon's archive in cycle %d's steps the same per step, kind and name "
                       "as ref's trace (%d, ref %d)" % (name, k, sum(mc.values()), sum(cy[2].values())),
                       counter_lines(cy[2], mc, "ref", "cuptimon"))


# -- self-test ---------------------------------------------------------------
def self_test():
    """Synthetic runs: one good, then the failures issue 17 saw; each must
    fail the checks it should and only those."""
    STEP = 2_000_000
    NAMES = [("kernel", "void gemm<float>(int)"), ("kernel", "relu_kernel"), ("kernel", "relu_kernel"),
             ("memcpy", "Memcpy DtoD (Device -> Device)"), ("memset", "Memset (Device)")]
    T, S = 18, 3
    cat = {v: k for k, v in GPU_CATS.items()}

    def plan(variant):
        if variant == "schedule":
            cyc = []
            for r in range(3):
                cyc.append([S + 4 * r + 2, S + 4 * r + 3])
            return cyc
        return [[S * (2 * k + 1) + i for i in range(S)] for k in range(2)]

    def build(w, broken):
        pids = {}
        ours = []
        t00 = 1_790_000_000_000_000_000
        for run_i, name in enumerate(["noprof"] + ["%s-%s" % (v, m) for v in ("manual", "schedule")
                                                  for m in MODES]):
            d = os.path.join(w, name)
            os.makedirs(d)
            pid = 1000 + run_i
            pids[name] = pid
            base = t00 + run_i * 10_000_000_000
            marks = [[base + i * STEP, base + i * STEP + STEP - 3000] for i in range(T)]
            corr = 100
            evs = []  # per step
            for i, (s0, s1) in enumerate(marks):
                for j, (kind, n) in enumerate(NAMES):
                    st = s0 + 20_000 + j * 100_000
                    corr += 1
                    evs.append({"step": i, "kind": kind, "name": n, "start": st, "end": st + 50_000, "corr": corr})
            variant = name.split("-")[0]
            mode = name.split("-")[-1]
            cycles = []
            if name != "noprof":
                for k, st in enumerate(plan(variant)):
                    path = os.path.join(d, "torch.%d.json" % k)
                    tb = 1_790_857_026_000_000_000
                    tev = []
                    for e in evs:
                        inc = e["step"] in st
                        if broken == "gap" and mode == "preload" and k == 1 and variant == "manual":
                            inc = e["step"] in st or e["step"] in (st[0] - 1, st[0] - 2)
                        if broken == "schedule-warmup" and mode == "inject" and variant == "schedule":
                            inc = inc or e["step"] == st[0] - 1
                        if not inc:
                            continue
                        shift = 0
                        if broken == "shift" and mode == "inject":
                            shift = 3_100_000
                        if broken == "outlier" and mode == "preload" and variant == "manual" \
                                and k == 0 and e["corr"] == 101 + 5 * st[0]:
                            shift = 3_000
                        if broken == "drop" and mode == "inject" and e["name"] == "relu_kernel" \
                                and e["step"] == st[-1]:
                            continue
                        s_ = e["start"] + shift + (170 if mode != "ref" else 0) + (e["corr"] % 7) * 10
                        tev.append({"ph": "X", "cat": cat[e["kind"]], "name": e["name"], "pid": 0, "tid": 7,
                                    "ts": float(decimal.Decimal(s_ - tb) / 1000),
                                    "dur": 50.0, "args": {"correlation": e["corr"]}})
                        tev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid,
                                    "ts": float(decimal.Decimal(s_ - tb - 5000) / 1000), "dur": 3.0,
                                    "args": {"correlation": e["corr"]}})
                    with open(path, "w") as f:
                        json.dump({"schemaVersion": 1, "baseTimeNanoseconds": tb, "traceEvents": tev}, f)
                    cycles.append({"cycle": k, "steps": st, "torch_trace": path})
            calls = [{"cycle": k, "after_step": c["steps"][-1]} for k, c in enumerate(cycles)] \
                if variant == "schedule" else []
            rep = {"pid": pid, "variant": None if name == "noprof" else variant,
                   "plan": {"steps": S, "cycles": 2, "repeat": 3, "total_steps": T},
                   "step_marks": marks, "profile_cycles": cycles, "trace_ready_calls": calls}
            json.dump(rep, open(os.path.join(d, "rep.json"), "w"))
            open(os.path.join(d, "rc"), "w").write("0\n")
            open(os.path.join(d, "wall_ms"), "w").write("%d\n" % (9000 + run_i))
            open(os.path.join(d, "err"), "w").write("cuptimon: routed the job's CUPTI imports\n"
                                                    if mode == "inject" else "")
            if mode != "ref":
                for e in evs:
                    if broken == "lost" and mode == "preload" and e["step"] == 4 and e["kind"] == "memset":
                        continue
                    ours.append(dict(e, pid=pid))
        ob = t00 - 1_000_000_000
        tr = {"schemaVersion": 1, "baseTimeNanoseconds": ob, "otherData": {"base_unix_ns": ob},
              "traceEvents": [{"ph": "X", "cat": cat[e["kind"]], "name": e["name"], "pid": e["pid"],
                               "tid": 2147483761, "ts": "%d.%03d" % divmod(e["start"] - ob, 1000),
                               "dur": 50.0, "args": {"correlation": e["corr"]}} for e in ours]}
        os.makedirs(os.path.join(w, "ours"))
        for pid in sorted(set(e["pid"] for e in ours)):
            # the pid only in the file's name: the checks must not need it in the events
            one = dict(tr, traceEvents=[dict(e, pid=0) for e in tr["traceEvents"] if e["pid"] == pid])
            txt = json.dumps(one)
            # cuptimon writes ts as a bare number with three decimals
            txt = re.sub(r'"ts": "([0-9.]+)"', r'"ts": \1', txt)
            open(os.path.join(w, "ours", "%d.1.json" % pid), "w").write(txt)
        open(os.path.join(w, "d.log"), "w").write("cuptimond: listening\n")

    cases = {
        None: [],
        "gap": ["manual-preload cycle 1 (steps 9-11): {'kernel'", "manual-preload cycle 1 (steps 9-11): per step"],
        "schedule-warmup": ["schedule-inject cycle 0", "schedule-inject cycle 1", "schedule-inject cycle 2"],
        "shift": ["-inject cycle"],
        "outlier": ["manual-preload cycle 0 (steps 3-5): |torch.profiler"],
        "drop": ["-inject cycle"],
        "lost": ["manual-preload: cuptimon archived", "manual-preload: cuptimon's archive per step",
                 "schedule-preload: cuptimon archived", "schedule-preload: cuptimon's archive per step"],
    }
    bad = 0
    for broken, expect in cases.items():
        w = tempfile.mkdtemp(prefix="coexist-selftest.")
        try:
            build(w, broken)
            import io
            buf = io.StringIO()
            ck = Checker(w, ["manual", "schedule"], out=buf)
            rc = ck.main()
            text = buf.getvalue()
            ok = (rc == 0) == (not expect) and all(any(f.startswith(x) or x in f for f in ck.fails) for x in expect)
            if broken == "outlier":
                # only the agreement check of that one cycle fails
                ok = ok and len(ck.fails) == 1 and "max 3" in ck.fails[0]
            if broken == "lost":
                ok = ok and all("cuptimon" in f for f in ck.fails)
            if broken is None:
                ok = ok and text.rstrip().splitlines()[-1].startswith("RESULT PASS")
            print("self-test %-16s %s: %d checks, %d failed" % (broken or "good", "ok" if ok else "WRONG",
                                                                ck.n, len(ck.fails)))
            if not ok or os.environ.get("COEXIST_SELFTEST_VERBOSE"):
                sys.stdout.write(text)
            bad += not ok
        finally:
            shutil.rmtree(w)
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        sys.exit(2)
    sys.exit(Checker(sys.argv[1], sys.argv[2:]).main())
