#!/usr/bin/env python3
"""bench.py: the job-side GPU benchmark of cuptimon (issue 7), run by run.sh.

    bench.py BUILD_DIR OUT_DIR WORK_DIR

Modes, interleaved run by run (a b bw c d ta tb tc tk, a b bw ...):
  known-work (tests/gpu/known-work, its own launch-loop time "work_ns"):
    a   no tracing
    b   bare CUPTI floor: bench/gpu/build/bare-cupti.so, kernel+memcpy+memset
    bw  bare CUPTI floor with the window kinds (b'), the floor of d
    c   cuptimon always-on (the shim, the daemon running)
    d   cuptimon inside a trace window (begin-window --all before the run,
        end-window after it)
  PyTorch (bench/gpu/torch-launch.py: x.add_(1) loops, perf_counter_ns):
    ta  no tracing      tb  bare CUPTI floor      tc  cuptimon
    tk  torch.profiler (Kineto, activities=[CPU, CUDA])
Per run: the launch-loop time, the child's CPU time (getrusage: user+sys)
and max RSS, the process wall time; for c, d and tc the session's drops
(flush --forced and status --json while the process lingers); for d the
window's summary; for b, bw and tb the floor's own report.
Writes OUT/bench-gpu.json, OUT/bench-gpu.txt and OUT/bench-logs.txt after
every round.  Exit status: 0 when every run ran (targets missed or not is in
the report), 1 when a run failed or the benchmark could not run.

Environment (run.sh passes it through):
  BENCH_GPU_RUNS         runs per mode (default 10)
  BENCH_GPU_BUDGET_S     wall-clock seconds for the warm-up and the rounds
                         (default 330): the torch modes are left out of a
                         round when it would leave too little time for the
                         later rounds' known-work modes; the rounds stop
                         when not even those fit
  BENCH_GPU_MODES        the modes to run (default "a b bw c d ap ta tap tb tc tk")
  BENCH_GPU_KW_ARGS      known-work's arguments (default below)
  BENCH_GPU_TORCH_ARGS   torch-launch.py's arguments (default below)
  BENCH_GPU_LINGER_MS    how long c, d and tc linger after their report
                         for the flush and status (default 600)
  BENCH_GPU_WARMUP       1 (default): one uncounted run of a, c and ta first
  BENCH_GPU_DRYRUN=1     no GPU: the libcupti test double's workload
                         (BUILD_DIR/tests/fakecupti/cuptimon-workload) stands
                         in for known-work; the torch modes are skipped
  BENCH_GPU_DRY_KERNELS  kernels per dry-run workload (default 50000)
  BENCH_GPU_DRY_TORCH=1  (tests of this script) keep the torch modes in a dry
                         run; PYTHON/PYTHONPATH must then give a stand-in torch
  PYTHON                 the python with torch (default python3)
  CUDA_HOME              default /usr/local/cuda
"""
import glob
import json
import os
import platform
import random
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

KW_ARGS_DEFAULT = ("--kernels 100000 --graph-replays 1000 --memcpys 200 --memsets 200 "
                   "--bytes 4096 --no-nvtx --no-annotations --quiet")
TORCH_ARGS_DEFAULT = "--ops 20000 --reps 3 --warmup 2000"

MODES = [
    # key, program, label, floor (the mode it is compared with), injected
    ("a", "kw", "no tracing", None),
    ("b", "kw", "bare CUPTI floor (kernel, memcpy, memset)", "a"),
    ("bw", "kw", "bare CUPTI floor, window kinds (b')", "a"),
    ("c", "kw", "cuptimon always-on, daemon running", "b"),
    ("d", "kw", "cuptimon inside a trace window", "bw"),
    # The daemon samples the GPU's counters (issue 34) during every mode
    # above; these two pause it for their run: a/ap and ta/tap are what the
    # sampling costs the job.
    ("ap", "kw", "no tracing, GPU metrics paused", None),
    ("ta", "torch", "no tracing", None),
    ("tap", "torch", "no tracing, GPU metrics paused", None),
    ("tb", "torch", "bare CUPTI floor (kernel, memcpy, memset)", "ta"),
    ("tc", "torch", "cuptimon always-on, daemon running", "tb"),
    ("tk", "torch", "torch.profiler (Kineto, CPU+CUDA)", "ta"),
]
MODE = {m[0]: m for m in MODES}
TORCH_TIMEOUT_S = 240
KW_TIMEOUT_S = 90
CTL_TIMEOUT_S = 30

T0 = time.time()


def say(msg):
    sys.stdout.write("[bench-gpu +%3ds] %s\n" % (int(time.time() - T0), msg))
    sys.stdout.flush()


def env_int(name, dflt, lo, hi):
    v = os.environ.get(name, "")
    if not v:
        return dflt
    try:
        n = int(v)
    except ValueError:
        n = None
    if n is None or n < lo or n > hi:
        say("%s=%r is not a number in %d..%d; using %d" % (name, v, lo, hi, dflt))
        return dflt
    return n


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def tail(path, n=4000):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def stats(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    s = {"n": len(xs), "median": statistics.median(xs), "min": min(xs), "max": max(xs),
         "mean": statistics.mean(xs)}
    if len(xs) >= 2:
        s["stdev"] = statistics.stdev(xs)
        q = statistics.quantiles(xs, n=4, method="inclusive")
        s["p25"], s["p75"] = q[0], q[2]
        s["spread_pct"] = 100.0 * (max(xs) - min(xs)) / s["median"] if s["median"] else None
    return s


class Bench:
    def __init__(self, build, out, work):
        self.B = os.path.abspath(build)
        self.OUT = os.path.abspath(out)
        self.W = os.path.abspath(work)
        self.here = os.path.dirname(os.path.abspath(__file__))
        self.top = os.path.dirname(os.path.dirname(self.here))
        self.dry = os.environ.get("BENCH_GPU_DRYRUN", "0") == "1"
        self.runs = env_int("BENCH_GPU_RUNS", 10, 1, 1000)
        self.budget = env_int("BENCH_GPU_BUDGET_S", 330, 10, 36000)
        self.linger_ms = env_int("BENCH_GPU_LINGER_MS", 600, 100, 60000)
        self.dry_kernels = env_int("BENCH_GPU_DRY_KERNELS", 50000, 1, 10000000)
        self.warmup = os.environ.get("BENCH_GPU_WARMUP", "1") != "0"
        self.kw_args = shlex.split(os.environ.get("BENCH_GPU_KW_ARGS") or KW_ARGS_DEFAULT)
        self.torch_args = shlex.split(os.environ.get("BENCH_GPU_TORCH_ARGS") or TORCH_ARGS_DEFAULT)
        want = (os.environ.get("BENCH_GPU_MODES") or " ".join(m[0] for m in MODES)).split()
        bad = [m for m in want if m not in MODE]
        if bad:
            say("BENCH_GPU_MODES: unknown mode(s) %s ignored (known: %s)" % (
                " ".join(bad), " ".join(m[0] for m in MODES)))
        self.modes = [m[0] for m in MODES if m[0] in want]
        self.py = os.environ.get("PYTHON", "python3")
        self.cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")

        self.daemon = os.path.join(self.B, "daemon", "cuptimond")
        self.ctl_bin = os.path.join(self.B, "cli", "cuptimonctl")
        self.shim = os.path.join(self.B, "client-lib", ".libs", "libcuptimon.so")
        self.bare = os.path.join(self.here, "build", "bare-cupti.so")
        self.kw = os.path.join(self.top, "tests", "gpu", "build", "known-work")
        self.workload = os.path.join(self.B, "tests", "fakecupti", "cuptimon-workload")
        self.fake_cupti = os.path.join(self.B, "tests", "fakecupti", ".libs", "libcupti-fake.so")
        self.torch_prog = os.path.join(self.here, "torch-launch.py")
        self.psock = os.path.join(self.W, "p.sock")
        self.csock = os.path.join(self.W, "c.sock")

        self.dproc = None
        self.child = None
        self.seq = 0
        self.results = {m: [] for m in self.modes}
        self.warmups = []
        self.failures = []
        self.notes = []
        self.rounds_done = 0
        self.rounds_kw_only = 0
        self.torch_ok = None
        self.torch_why = None
        self.machine = {}
        self.kw_ldpath = os.environ.get("LD_LIBRARY_PATH", "")
        self.fatal = None

    # ---- processes ---------------------------------------------------------

    def base_env(self):
        e = dict(os.environ)
        for k in list(e):
            if k.startswith("CUPTIMON_") or k.startswith("BARE_CUPTI_") or k in (
                    "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "RANK", "LOCAL_RANK",
                    "WORLD_SIZE", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"):
                del e[k]
        if "libcuptimon" in e.get("LD_PRELOAD", ""):
            del e["LD_PRELOAD"]
        return e

    def ctl(self, *args, timeout=CTL_TIMEOUT_S):
        cmd = [self.ctl_bin, "--control-socket", self.csock, "--timeout", str(timeout)] + list(args)
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=timeout + 15, stdin=subprocess.DEVNULL)
            return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            return 124, "", "cuptimonctl %s: no answer in %d s" % (args[0], timeout + 15)
        except OSError as e:
            return 127, "", str(e)

    def ctl_json(self, *args, timeout=CTL_TIMEOUT_S):
        rc, out, err = self.ctl(*args, timeout=timeout)
        try:
            j = json.loads(out) if out.strip() else None
        except ValueError:
            j = None
        return rc, j, err.strip()[-500:]

    def spawn(self, d, argv, env, timeout_s, on_ready=None, ready_file=None):
        """Runs argv with env, stdout/stderr into d; returns the run's process
        figures.  on_ready(pid) is called once ready_file exists (while the
        process lingers).  Never waits longer than timeout_s."""
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "cmd"), "w") as f:
            f.write(" ".join(shlex.quote(a) for a in argv) + "\n")
        so = open(os.path.join(d, "stdout"), "wb")
        se = open(os.path.join(d, "stderr"), "wb")
        res = {"rc": None, "timed_out": False}
        t_start = time.monotonic_ns()
        try:
            p = subprocess.Popen(argv, env=env, stdout=so, stderr=se, stdin=subprocess.DEVNULL)
        except OSError as e:
            so.close()
            se.close()
            res["rc"] = 127
            res["error"] = "cannot start %s: %s" % (argv[0], e)
            return res
        self.child = p
        box = {}

        def waiter():
            try:
                _, status, ru = os.wait4(p.pid, 0)
                box["status"], box["ru"] = status, ru
            except ChildProcessError:
                box["status"], box["ru"] = None, None
            box["t"] = time.monotonic_ns()

        th = threading.Thread(target=waiter, daemon=True)
        th.start()
        deadline = time.monotonic() + timeout_s
        readied = False
        while th.is_alive():
            if on_ready and not readied and ready_file and os.path.exists(ready_file):
                readied = True
                try:
                    on_ready(p.pid)
                except Exception as e:  # noqa: BLE001 -- reported, never fatal
                    res["on_ready_error"] = repr(e)
            if time.monotonic() > deadline:
                res["timed_out"] = True
                if "status" not in box:  # not reaped yet: the pid is still ours
                    try:
                        p.kill()
                    except OSError:
                        pass
                th.join(10)
                break
            th.join(0.01)
        so.close()
        se.close()
        self.child = None
        status, ru = box.get("status"), box.get("ru")
        if status is None:
            res["rc"] = 124 if res["timed_out"] else -1
        elif os.WIFEXITED(status):
            res["rc"] = os.WEXITSTATUS(status)
        elif os.WIFSIGNALED(status):
            res["rc"] = 128 + os.WTERMSIG(status)
        p.returncode = res["rc"]
        if res["timed_out"]:
            res["rc"] = 124
        res["pid"] = p.pid
        res["wall_ns"] = box.get("t", time.monotonic_ns()) - t_start
        if ru is not None:
            res["cpu_user_s"] = ru.ru_utime
            res["cpu_sys_s"] = ru.ru_stime
            res["cpu_s"] = ru.ru_utime + ru.ru_stime
            res["maxrss_kb"] = ru.ru_maxrss
            res["minflt"] = ru.ru_minflt
            res["majflt"] = ru.ru_majflt
            res["nvcsw"] = ru.ru_nvcsw
            res["nivcsw"] = ru.ru_nivcsw
        res["readied"] = readied
        return res

    # ---- the daemon --------------------------------------------------------

    def start_daemon(self):
        log = open(os.path.join(self.W, "daemon.log"), "ab")
        self.dproc = subprocess.Popen(
            [self.daemon, "--socket", self.psock, "--control-socket", self.csock,
             "--output-dir", os.path.join(self.W, "out")],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=self.base_env())
        log.close()
        with open(os.path.join(self.W, "daemon.pid"), "w") as f:
            f.write("%d\n" % self.dproc.pid)
        for _ in range(100):
            rc, _, _ = self.ctl("status", "--json", timeout=5)
            if rc == 0:
                return True
            if self.dproc.poll() is not None:
                break
            time.sleep(0.1)
        return False

    def stop_daemon(self):
        p, self.dproc = self.dproc, None
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(45)
            except subprocess.TimeoutExpired:
                say("cuptimond did not stop within 45 s of SIGTERM: killed")
                p.kill()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    pass
        return p.returncode

    # ---- one run -----------------------------------------------------------

    def session_of(self, pid):
        """What the daemon says about pid's session: live status, else the
        archive's meta.json (final)."""
        rc, st, err = self.ctl_json("status", "--json")
        if rc == 0 and st:
            for s in st.get("sessions", []):
                if s.get("pid") == pid:
                    return s, None
            return None, "no session with pid %d in status" % pid
        return None, "status failed (rc %s): %s" % (rc, err)

    def archive_meta(self, pid):
        for m in glob.glob(os.path.join(self.W, "out", "archive", "*-%d-*" % pid, "meta.json")):
            return read_json(m)
        return None

    def run_one(self, mode, rnd, warmup=False):
        _, prog, _, _ = MODE[mode]
        self.seq += 1
        d = os.path.join(self.W, "runs", "%03d-%s%s" % (self.seq, mode, "-warmup" if warmup else ""))
        os.makedirs(d, exist_ok=True)
        rep_path = os.path.join(d, "report.json")
        env = self.base_env()
        inj = None
        if mode in ("b", "bw", "tb"):
            inj = self.bare
            env["BARE_CUPTI_REPORT"] = os.path.join(d, "bare.json")
            if mode == "bw":
                env["BARE_CUPTI_WINDOW_KINDS"] = "1"
        elif mode in ("c", "d", "tc"):
            inj = self.shim
            env["CUPTIMON_SOCKET"] = self.psock
            env["CUPTIMON_LABEL"] = "bench-%s-%d%s" % (mode, rnd, "-warmup" if warmup else "")
        if inj:
            env["CUDA_INJECTION64_PATH"] = inj
            if self.dry:
                env["CUPTIMON_LIBCUPTI_PATH"] = self.fake_cupti
        linger = mode in ("c", "d", "tc")
        if prog == "kw":
            if self.dry:
                argv = [self.workload, "--kernels", str(self.dry_kernels), "--streams", "2",
                        "--memcpy-every", "50", "--memset-every", "70", "--quiet",
                        "--report", rep_path]
            else:
                argv = [self.kw] + self.kw_args + ["--report", rep_path]
                if self.kw_ldpath:
                    env["LD_LIBRARY_PATH"] = self.kw_ldpath
            if linger:
                argv += ["--linger-ms", str(self.linger_ms)]
            timeout = KW_TIMEOUT_S
        else:
            argv = [self.py, self.torch_prog] + self.torch_args + ["--report", rep_path]
            if mode == "tk":
                argv.append("--kineto")
            if linger:
                argv += ["--linger-s", "%.3f" % (self.linger_ms / 1000.0)]
            timeout = TORCH_TIMEOUT_S

        run = {"mode": mode, "round": rnd, "seq": self.seq, "warmup": warmup,
               "started_unix_ns": time.time_ns(), "errors": []}
        if mode in ("ap", "tap"):
            rc, _, err = self.ctl("gpu-metrics", "pause")
            if rc != 0:
                run["errors"].append("gpu-metrics pause failed (rc %s): %s" % (rc, err[-300:]))
        win = None
        if mode == "d":
            rc, j, err = self.ctl_json("begin-window", "--all", "--json")
            if rc != 0 or not j:
                run["errors"].append("begin-window failed (rc %s): %s" % (rc, err))
            else:
                win = j.get("window")
                run["window_id"] = win

        captured = {}

        def on_ready(pid):
            rc, j, err = self.ctl_json("flush", "--forced", "--timeout", "10", "--json")
            captured["flush"] = j if j is not None else {"rc": rc, "error": err}
            s, why = self.session_of(pid)
            captured["session"] = s
            if why:
                captured["session_error"] = why

        res = self.spawn(d, argv, env, timeout, on_ready=on_ready if linger else None,
                         ready_file=rep_path if linger else None)
        run.update(res)
        if res.get("error"):
            run["errors"].append(res["error"])
        if res["rc"] != 0:
            run["errors"].append("exit status %s%s; stderr: %s" % (
                res["rc"], " (timed out after %d s)" % timeout if res["timed_out"] else "",
                tail(os.path.join(d, "stderr"), 600).strip()[-600:]))
        rep = read_json(rep_path)
        if rep is None:
            run["errors"].append("no report from the program")
        else:
            if prog == "kw" and not self.dry:
                run["work_ns"] = rep.get("work_ns")
                run["report"] = {k: rep.get(k) for k in (
                    "pid", "device_name", "driver_version", "runtime_version", "options",
                    "kernels_total", "peer_device", "errors")}
                if rep.get("errors"):
                    run["errors"].append("known-work reported errors: %s" % rep["errors"][:300])
            elif prog == "kw":
                run["work_ns"] = rep["end_ns"] - rep["start_ns"]
                run["report"] = {k: rep.get(k) for k in (
                    "pid", "kernels", "memcpys", "memsets", "kernels_recorded", "runtime_api_recorded",
                    "dropped", "requests_declined", "dirty_buffers", "buffers_completed")}
                if rep.get("dirty_buffers"):
                    run["errors"].append("the test double saw %d buffers that were not zeroed" %
                                         rep["dirty_buffers"])
            else:
                run["work_ns"] = rep.get("loop_ns_median")
                run["work_ns_reps"] = rep.get("loop_ns")
                run["report"] = {k: rep.get(k) for k in (
                    "pid", "ops", "reps", "ns_per_op_median", "profiler_stop_ns", "result_ok",
                    "import_ns", "cuda_init_ns", "torch_version", "cuda_version", "device_name",
                    "libcupti_loaded", "cuptimon_loaded", "bare_cupti_loaded", "python")}
                if rep.get("result_ok") is False:
                    run["errors"].append("the torch loop computed a wrong result")
        if linger:
            run["linger_ms"] = self.linger_ms
            run["wall_minus_linger_ns"] = run.get("wall_ns", 0) - self.linger_ms * 1000000
            run["flush"] = captured.get("flush")
            s = captured.get("session")
            if s is not None:
                run["session"] = s
            else:
                run["session_error"] = captured.get("session_error", "the process ended before the "
                                                    "benchmark saw its report")
            meta = self.archive_meta(res.get("pid", -1))
            if meta:
                run["archive_final"] = meta.get("final")
                run["libcupti"] = meta.get("cupti_path")
                run["cupti_version"] = meta.get("cupti_version")
            elif res["rc"] == 0:
                run["errors"].append("no archive session for pid %s" % res.get("pid"))
            drops = None
            if s is not None:
                drops = {"dropped_records": s.get("dropped_records", 0),
                         "requests_declined": s.get("requests_declined", 0),
                         "lost_buffers": s.get("lost_buffers", 0), "from": "status"}
            elif meta and meta.get("final"):
                drops = {"dropped_records": meta["final"].get("dropped_records", 0),
                         "requests_declined": None, "lost_buffers": None,
                         "from": "archive meta.json (final)"}
            run["drops"] = drops
            nrec = (s or {}).get("records") or ((meta or {}).get("final") or {}).get("records") or 0
            run["records_archived"] = nrec
            if res["rc"] == 0 and not nrec:
                run["errors"].append("cuptimon archived no records for pid %s (stderr: %s)" % (
                    res.get("pid"), tail(os.path.join(d, "stderr"), 300).strip()))
        if mode in ("b", "bw", "tb"):
            br = read_json(os.path.join(d, "bare.json"))
            run["bare"] = br
            if br is None:
                run["errors"].append("bare-cupti wrote no report")
            else:
                run["libcupti"] = br.get("libcupti")
                run["cupti_version"] = br.get("cupti_version")
                if not br.get("started"):
                    run["errors"].append("bare-cupti did not start tracing: %s" %
                                         tail(os.path.join(d, "stderr"), 300).strip())
                elif br.get("enable_failures"):
                    run["errors"].append("bare-cupti could not enable %d activity kind(s): %s" % (
                        br["enable_failures"], tail(os.path.join(d, "stderr"), 300).strip()))
                elif not br.get("buffers_completed"):
                    run["errors"].append("bare-cupti saw no completed buffer (CUPTI recorded nothing?)")
                if br.get("started") and not br.get("zeroed_attr"):
                    self.note_once("CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER was refused in "
                                   "bare-cupti (CUPTI zeroes its buffers itself)")
        if mode == "d" and win is not None:
            rc, j, err = self.ctl_json("end-window", "--json", str(win), timeout=90)
            if rc != 0 or not j:
                # a window left open would take the next processes in: try again
                time.sleep(1)
                rc2, j, err2 = self.ctl_json("end-window", "--json", str(win), timeout=90)
                if rc2 == 0 and j:
                    self.note_once("end-window needed a second try once (first: rc %s: %s)" % (rc, err))
                else:
                    err = "%s; again: rc %s: %s" % (err, rc2, err2)
            if not j:
                run["errors"].append("end-window failed (rc %s): %s" % (rc, err))
            else:
                sm = j.get("summary") or {}
                procs = [p for p in sm.get("processes", []) if p.get("pid") == res.get("pid")]
                run["window"] = {"state": j.get("state"), "records": sm.get("records"),
                                 "events": sm.get("events"), "truncated": sm.get("truncated"),
                                 "process": procs[0] if procs else None,
                                 "duration_ns": (j.get("end_unix_ns") or 0) - (j.get("start_unix_ns") or 0)}
                if j.get("state") != "done":
                    run["errors"].append("the window ended in state %s" % j.get("state"))
                elif not procs:
                    run["errors"].append("the window did not include pid %s" % res.get("pid"))
                outp = j.get("output")
                if outp and outp.startswith(self.W) and os.path.exists(outp):
                    run["window"]["trace_bytes"] = os.path.getsize(outp)
                    os.unlink(outp)
        if mode in ("ap", "tap"):
            # Sampling again before the next run (bring-up takes under a second).
            self.ctl("gpu-metrics", "resume")
            for _ in range(50):
                rc, j, _ = self.ctl_json("gpu-metrics", "--json")
                devs = (j or {}).get("devices") or []
                if rc != 0 or not devs or devs[0].get("state") in ("sampling", "off"):
                    break
                time.sleep(0.1)
        run["ok"] = not run["errors"] and run.get("work_ns") is not None
        if warmup:
            self.warmups.append(run)
        else:
            self.results[mode].append(run)
            if not run["ok"]:
                self.failures.append("%s round %d: %s" % (mode, rnd, "; ".join(run["errors"])))
        msg = "%-3s r%-2d %s" % (mode, rnd, "warm-up " if warmup else "")
        if run.get("work_ns") is not None:
            msg += "loop %.1f ms" % (run["work_ns"] / 1e6)
        if run.get("cpu_s") is not None:
            msg += ", cpu %.2f s, rss %.0f MiB" % (run["cpu_s"], run.get("maxrss_kb", 0) / 1024.0)
        if run.get("drops"):
            msg += ", drops %s/%s" % (run["drops"]["dropped_records"], run["drops"]["requests_declined"])
        if run["errors"]:
            msg += "  ERROR: " + "; ".join(run["errors"])[:300]
        say(msg)
        return run

    def note_once(self, text):
        if text not in self.notes:
            self.notes.append(text)

    # ---- the machine -------------------------------------------------------

    def probe(self):
        m = self.machine
        m["hostname"] = socket.gethostname()
        m["uname"] = " ".join(platform.uname())
        m["nproc"] = os.cpu_count()
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("model name"):
                        m["cpu"] = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
        m["python"] = sys.version.split()[0]
        m["dryrun"] = self.dry
        if shutil.which("nvidia-smi"):
            try:
                r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                                    "persistence_mode,clocks.sm,clocks.max.sm,pstate",
                                    "--format=csv,noheader"], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, timeout=30)
                m["gpu"] = r.stdout.decode("utf-8", "replace").strip().splitlines()
            except (subprocess.TimeoutExpired, OSError) as e:
                m["gpu"] = ["nvidia-smi failed: %s" % e]
        else:
            m["gpu"] = ["nvidia-smi not found"]
        # known-work does not link libcupti: where the loader cannot find
        # libcupti.so.13, point LD_LIBRARY_PATH at the toolkit's copy for
        # every known-work run (all modes alike; never for python).
        if not self.dry:
            have = ""
            try:
                r = subprocess.run(["ldconfig", "-p"], stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, timeout=30)
                for line in r.stdout.decode("utf-8", "replace").splitlines():
                    if "libcupti.so.13 " in line:
                        have = line.split()[-1]
                        break
            except (subprocess.TimeoutExpired, OSError):
                pass
            if not have:
                for dd in ("targets/x86_64-linux/lib", "lib64", "extras/CUPTI/lib64"):
                    p = os.path.join(self.cuda_home, dd)
                    if os.path.exists(os.path.join(p, "libcupti.so.13")):
                        have = os.path.join(p, "libcupti.so.13")
                        self.kw_ldpath = p + (":" + self.kw_ldpath if self.kw_ldpath else "")
                        break
            if not have:
                # a GPU host without the toolkit: the PyTorch wheel's copy
                # (nvidia/cu13/lib), found without importing torch
                code = ("import glob, os, sys\n"
                        "for p in sys.path:\n"
                        "    for g in ('nvidia/cu13/lib', 'nvidia/cuda_cupti/lib', 'nvidia/*/lib'):\n"
                        "        for f in sorted(glob.glob(os.path.join(p, g, 'libcupti.so.13'))):\n"
                        "            print(f); sys.exit(0)\n")
                try:
                    r = subprocess.run([self.py, "-c", code], stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, timeout=60)
                    f = r.stdout.decode("utf-8", "replace").strip().splitlines()
                    if f and os.path.exists(f[0]):
                        have = f[0]
                        p = os.path.dirname(have)
                        self.kw_ldpath = p + (":" + self.kw_ldpath if self.kw_ldpath else "")
                        self.notes.append("known-work's libcupti is the PyTorch wheel's (%s): no "
                                          "libcupti.so.13 in the loader cache or %s" % (have, self.cuda_home))
                except (subprocess.TimeoutExpired, OSError):
                    pass
            m["libcupti_for_known_work"] = have or "not found"
            if not have:
                self.notes.append("libcupti.so.13 not found: b, bw, c and d cannot trace known-work")
        m["known_work_ld_library_path"] = self.kw_ldpath

    # ---- the report --------------------------------------------------------

    def summary(self):
        modes = {}
        for key in self.modes:
            _, prog, label, floor = MODE[key]
            runs = self.results[key]
            ok = [r for r in runs if r["ok"]]
            modes[key] = {
                "program": "torch-launch.py" if prog == "torch" else (
                    "cuptimon-workload (dry run)" if self.dry else "known-work"),
                "label": label, "floor": floor, "runs": runs,
                "n_ok": len(ok), "n_failed": len(runs) - len(ok),
                "work_ns": stats([r.get("work_ns") for r in ok]),
                "cpu_s": stats([r.get("cpu_s") for r in ok]),
                "maxrss_kb": stats([r.get("maxrss_kb") for r in ok]),
                "wall_ns": stats([r.get("wall_minus_linger_ns", r.get("wall_ns")) for r in ok]),
            }
        return modes

    @staticmethod
    def ratio(modes, x, y, field="work_ns"):
        if x not in modes or y not in modes:
            return None
        sx, sy = modes[x][field], modes[y][field]
        if not sx or not sy or not sy["median"]:
            return None
        by_round = {}
        for r in modes[y]["runs"]:
            if r["ok"] and r.get(field):
                by_round[r["round"]] = r[field]
        paired = [r[field] / by_round[r["round"]] for r in modes[x]["runs"]
                  if r["ok"] and r.get(field) is not None and r["round"] in by_round]
        out = {"of_medians": sx["median"] / sy["median"], "n_pairs": len(paired)}
        # a bootstrap 90% interval of the ratio of medians (runs resampled
        # per mode, fixed seed): how far the noise alone moves it
        xs = [r[field] for r in modes[x]["runs"] if r["ok"] and r.get(field) is not None]
        ys = [r[field] for r in modes[y]["runs"] if r["ok"] and r.get(field) is not None]
        if len(xs) >= 3 and len(ys) >= 3:
            rng = random.Random(7)
            bs = sorted(statistics.median(rng.choices(xs, k=len(xs))) /
                        statistics.median(rng.choices(ys, k=len(ys))) for _ in range(2000))
            out["ci90"] = [bs[100], bs[1899]]
        if paired:
            out["paired_median"] = statistics.median(paired)
            out["paired_min"] = min(paired)
            out["paired_max"] = max(paired)
        return out

    def analyse(self, modes):
        R = {}
        for x, y in (("b", "a"), ("bw", "a"), ("c", "a"), ("c", "b"), ("d", "a"), ("d", "bw"),
                     ("d", "c"), ("tb", "ta"), ("tc", "ta"), ("tc", "tb"), ("tk", "ta"),
                     ("tk", "tb"), ("a", "ap"), ("ta", "tap")):
            r = self.ratio(modes, x, y)
            if r:
                R["%s/%s" % (x, y)] = r
        over = {}
        for name, x, y in (("known-work: cuptimon vs none (c/a-1)", "c", "a"),
                           ("known-work: bare CUPTI vs none (b/a-1)", "b", "a"),
                           ("known-work: cuptimon vs bare (c/b-1)", "c", "b"),
                           ("known-work: window vs none (d/a-1)", "d", "a"),
                           ("known-work: window vs bare window kinds (d/bw-1)", "d", "bw"),
                           ("torch: bare CUPTI vs none (tb/ta-1)", "tb", "ta"),
                           ("torch: cuptimon vs none (tc/ta-1)", "tc", "ta"),
                           ("torch: torch.profiler vs none (tk/ta-1)", "tk", "ta"),
                           ("known-work: GPU metrics sampled vs paused (a/ap-1)", "a", "ap"),
                           ("torch: GPU metrics sampled vs paused (ta/tap-1)", "ta", "tap")):
            r = R.get("%s/%s" % (x, y))
            if r:
                over[name] = 100.0 * (r["of_medians"] - 1.0)
        evc = {}
        for name, k in (("cuptimon_on_torch_loop_pct", "tc/ta"), ("torch_profiler_on_torch_loop_pct", "tk/ta"),
                        ("bare_cupti_on_torch_loop_pct", "tb/ta"), ("cuptimon_on_known_work_pct", "c/a")):
            if k in R:
                evc[name] = 100.0 * (R[k]["of_medians"] - 1.0)
        if "cuptimon_on_torch_loop_pct" in evc and "torch_profiler_on_torch_loop_pct" in evc:
            evc["cuptimon_below_torch_profiler"] = (evc["cuptimon_on_torch_loop_pct"] <
                                                    evc["torch_profiler_on_torch_loop_pct"])
        over["e_overhead_vs_c_overhead"] = evc
        added = {}
        for x, y in (("b", "a"), ("c", "a"), ("c", "b"), ("bw", "a"), ("d", "a"), ("d", "bw"),
                     ("tb", "ta"), ("tc", "ta"), ("tc", "tb"), ("tk", "ta")):
            if x in modes and y in modes:
                e = {}
                for f in ("cpu_s", "maxrss_kb"):
                    if modes[x][f] and modes[y][f]:
                        e[f] = modes[x][f]["median"] - modes[y][f]["median"]
                if e:
                    added["%s-%s" % (x, y)] = e
        targets = []

        def target(name, value, ok, detail):
            targets.append({"target": name, "value": value,
                            "status": "n/a" if ok is None else (
                                ok if isinstance(ok, str) else ("pass" if ok else "missed")),
                            "detail": detail})

        r = R.get("c/b")
        if r:
            # A bound this close to 1 is decided by the interval, not the
            # median: at this machine's 30-60 % run-to-run spread the ratio
            # of medians alone lands either side of 1.03 from run to run.
            lo, hi = r["ci90"] if r.get("ci90") else (r["of_medians"], r["of_medians"])
            target("(c)/(b) <= 1.03 for launch throughput (known-work launch loop)",
                   r["of_medians"], "pass" if hi <= 1.03 else "missed" if lo > 1.03 else "unclear",
                   "ratio of medians %.4f (bootstrap 90%% interval %s); paired per round %.4f "
                   "[%.4f..%.4f], %d pairs%s" % (
                       r["of_medians"], "%.4f..%.4f" % tuple(r["ci90"]) if r.get("ci90") else "-",
                       r.get("paired_median", float("nan")),
                       r.get("paired_min", float("nan")), r.get("paired_max", float("nan")),
                       r["n_pairs"],
                       "; the interval holds 1.03: this run cannot tell (more rounds narrow it)"
                       if lo <= 1.03 < hi else ""))
        else:
            target("(c)/(b) <= 1.03 for launch throughput (known-work launch loop)", None, None,
                   "not measured (mode b or c missing or failed)")
        rc_, rk = R.get("tc/ta"), R.get("tk/ta")
        if rc_ and rk:
            oc, ok_ = 100 * (rc_["of_medians"] - 1), 100 * (rk["of_medians"] - 1)
            target("(c)'s overhead below (e)'s (torch.profiler) on the PyTorch loop", oc, oc < ok_,
                   "cuptimon %+.1f%% vs torch.profiler %+.1f%% over no tracing (medians)%s" % (
                       oc, ok_, "; known-work c/a %+.1f%%" % (100 * (R["c/a"]["of_medians"] - 1))
                       if "c/a" in R else ""))
        else:
            target("(c)'s overhead below (e)'s (torch.profiler) on the PyTorch loop", None, None,
                   "not measured: %s" % (self.torch_why or "modes ta, tc or tk missing or failed"))
        cr = [r for k in ("c", "tc") if k in modes for r in modes[k]["runs"] if r["ok"]]
        if cr:
            dr = sum((r.get("drops") or {}).get("dropped_records") or 0 for r in cr)
            de = sum((r.get("drops") or {}).get("requests_declined") or 0 for r in cr)
            lo = sum((r.get("drops") or {}).get("lost_buffers") or 0 for r in cr)
            unknown = sum(1 for r in cr if not r.get("drops") or r["drops"].get("from") != "status")
            target("no drops at the default pool in (c)", dr + de + lo, dr + de + lo == 0,
                   "%d dropped records, %d declined requests, %d lost buffers over %d runs of c/tc"
                   "%s" % (dr, de, lo, len(cr), "; %d run(s) without live status (declined "
                                                "requests unknown there)" % unknown if unknown else ""))
        else:
            target("no drops at the default pool in (c)", None, None, "no successful c run")
        p99 = []
        for r in cr:
            for k, v in (r.get("session") or {}).items():
                if "complet" in k and ("p99" in k or "99" in k) and isinstance(v, (int, float)):
                    p99.append(v)
        if p99:
            target("the shim's completion callback p99 < 20 us", max(p99), max(p99) < 20000,
                   "max over runs of the session's %s (ns)" % [k for k in (cr[0].get("session") or {})
                                                               if "complet" in k])
        else:
            target("the shim's completion callback p99 < 20 us", None, None,
                   "not measured by this benchmark: the shim measures its own completion callback; "
                   "its status carries no such figure yet")
        checks = []

        def check(name, ok, detail):
            checks.append({"check": name, "status": "ok" if ok else "warn", "detail": detail})

        for k in ("b", "bw", "tb"):
            if k in modes and modes[k]["n_ok"]:
                bad = [r["round"] for r in modes[k]["runs"] if r["ok"] and (
                    (r.get("bare") or {}).get("dropped_records") or (r.get("bare") or {}).get("requests_declined"))]
                check("floor %s dropped nothing (else it is cheaper than it should be)" % k, not bad,
                      "rounds with drops: %s" % bad if bad else "0 drops in %d runs" % modes[k]["n_ok"])
        if "d" in modes and modes["d"]["n_ok"]:
            bad, short = [], []
            for r in modes["d"]["runs"]:
                if not r["ok"]:
                    continue
                w = r.get("window") or {}
                rec = w.get("records") or {}
                rep = r.get("report") or {}
                # every kernel the program launched, graph kernels included;
                # the window keeps a kernel only when its launch API call is in
                want = rep.get("kernels") if self.dry else rep.get("kernels_total")
                got = rec.get("kernel") or 0
                if not rec.get("runtime") or w.get("truncated"):
                    bad.append(r["round"])
                elif want and got < want:
                    short.append("round %d: %d of %d" % (r["round"], got, want))
            check("window kinds on for the whole (d) launch loop: every launched kernel in the "
                  "window's trace (with its launch API record), not truncated", not bad and not short,
                  "; ".join((["no runtime API records or truncated in rounds %s" % bad] if bad else []) +
                            (["kernels in the window: %s (the first launches happened before the "
                              "window's kinds reached the process)" % ", ".join(short)] if short else []))
                  or "%d windows, every kernel in" % modes["d"]["n_ok"])
        if "tc" in modes and modes["tc"]["n_ok"]:
            bad = [r["round"] for r in modes["tc"]["runs"] if r["ok"] and
                   len((r.get("report") or {}).get("libcupti_loaded") or []) != 1]
            check("torch + cuptimon: one libcupti in the process (torch's own)", not bad,
                  "rounds with another count: %s" % bad if bad else "ok")
        for k in self.modes:
            n = modes[k]["n_ok"]
            if n < self.runs:
                check("mode %s: %d runs as asked" % (k, self.runs), False,
                      "%d successful runs of %d asked%s" % (n, self.runs,
                                                            " (%s)" % self.torch_why if k.startswith("t") and self.torch_why else ""))
        return R, over, added, targets, checks

    def write_outputs(self, final=False):
        modes = self.summary()
        R, over, added, targets, checks = self.analyse(modes)
        doc = {
            "schema": 1,
            "benchmark": "cuptimon job-side (issue 7): bench/gpu/run.sh",
            "dryrun": self.dry,
            "complete": final and not self.fatal,
            "fatal": self.fatal,
            "started_unix": int(T0),
            "wall_s": round(time.time() - T0, 1),
            "machine": self.machine,
            "config": {
                "runs_per_mode": self.runs, "budget_s": self.budget, "modes": self.modes,
                "order": "interleaved run by run: " + " ".join(self.modes),
                "known_work_args": (["(dry) cuptimon-workload --kernels %d --streams 2 "
                                     "--memcpy-every 50 --memset-every 70" % self.dry_kernels]
                                    if self.dry else self.kw_args),
                "torch_args": self.torch_args, "linger_ms": self.linger_ms,
                "warmup": self.warmup, "python": self.py,
                "shim_pool": "default (CUPTIMON_POOL_SLOTS 16 x CUPTIMON_SLOT_SIZE 4M)",
                "bare_pool": "16 x 4 MiB (BARE_CUPTI_SLOTS, BARE_CUPTI_SLOT_SIZE)",
                "work_ns": "known-work: its report's work_ns (CLOCK_REALTIME around the launches, "
                           "copies, memsets and graph replays up to the final synchronize); "
                           "torch-launch.py: median of its --reps loops (perf_counter_ns between "
                           "two torch.cuda.synchronize)",
                "cpu_s": "the child's getrusage (wait4): user + system, whole process",
                "maxrss_kb": "the child's ru_maxrss",
            },
            "rounds": self.rounds_done, "rounds_known_work_only": self.rounds_kw_only,
            "torch": {"usable": self.torch_ok, "why_not": self.torch_why},
            "modes": modes,
            "ratios": R,
            "overhead_pct": over,
            "added_by_tracing": added,
            "targets": targets,
            "checks": checks,
            "warmup_runs": self.warmups,
            "failures": self.failures,
            "notes": self.notes,
        }
        tmp = os.path.join(self.OUT, "bench-gpu.json.tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=False)
        os.rename(tmp, os.path.join(self.OUT, "bench-gpu.json"))
        txt = self.text(doc)
        tmp = os.path.join(self.OUT, "bench-gpu.txt.tmp")
        with open(tmp, "w") as f:
            f.write(txt)
        os.rename(tmp, os.path.join(self.OUT, "bench-gpu.txt"))
        return doc, txt

    def text(self, doc):
        L = []
        m = doc["machine"]
        L.append("cuptimon job-side GPU benchmark (issue 7)%s%s" % (
            "   [DRY RUN: libcupti test double, no GPU: the figures mean nothing]" if self.dry else "",
            "" if doc["complete"] else "   [INCOMPLETE]"))
        L.append("machine: %s, %s cores (%s); GPU: %s" % (m.get("hostname"), m.get("nproc"),
                                                          m.get("cpu", "?"), "; ".join(m.get("gpu", []))))
        lc = sorted({r.get("libcupti") for k in doc["modes"] for r in doc["modes"][k]["runs"]
                     if r.get("libcupti")})
        L.append("libcupti: %s" % (", ".join(lc) or "?"))
        tv = sorted({(r.get("report") or {}).get("torch_version") for k in doc["modes"]
                     for r in doc["modes"][k]["runs"] if (r.get("report") or {}).get("torch_version")})
        if tv:
            L.append("torch: %s" % ", ".join(tv))
        c = doc["config"]
        L.append("known-work: %s" % " ".join(c["known_work_args"]))
        if any(k.startswith("t") for k in doc["modes"]):
            L.append("torch-launch.py: %s" % " ".join(c["torch_args"]))
        L.append("%d rounds (%d known-work only), %s; wall %.0f s" % (
            doc["rounds"], doc["rounds_known_work_only"], c["order"], doc["wall_s"]))
        L.append("")
        hdr = ("%-3s %-44s %3s %9s %9s %9s %7s %8s %8s %8s %8s %8s" % (
            "", "mode", "n", "median", "min", "max", "spread", "/none", "/floor", "CPU s", "+CPU s",
            "RSS MiB"))

        def rows(prog, title):
            keys = [k for k in doc["modes"] if MODE[k][1] == prog]
            if not keys:
                return
            L.append(title)
            L.append(hdr)
            none = "a" if prog == "kw" else "ta"
            for k in keys:
                md = doc["modes"][k]
                w = md["work_ns"]
                rn = doc["ratios"].get("%s/%s" % (k, none))
                rf = doc["ratios"].get("%s/%s" % (k, md["floor"])) if md["floor"] and md["floor"] != none else None
                cpu = md["cpu_s"]
                cpu_none = doc["modes"].get(none, {}).get("cpu_s")
                rss = md["maxrss_kb"]
                if w:
                    L.append("%-3s %-44s %3d %9.2f %9.2f %9.2f %6.1f%% %8s %8s %8.2f %8s %8.0f" % (
                        k, md["label"][:44], w["n"], w["median"] / 1e6, w["min"] / 1e6, w["max"] / 1e6,
                        w.get("spread_pct") or 0.0,
                        "%.4f" % rn["of_medians"] if rn else "-",
                        "%.4f" % rf["of_medians"] if rf else "-",
                        cpu["median"] if cpu else float("nan"),
                        "%+.2f" % (cpu["median"] - cpu_none["median"]) if cpu and cpu_none and k != none else "-",
                        rss["median"] / 1024.0 if rss else float("nan")))
                else:
                    L.append("%-3s %-44s %3d %s" % (k, md["label"][:44], 0, "(no successful run)"))
            L.append("")

        rows("kw", "known-work launch loop, ms (work_ns); /floor: c vs b, d vs b'(bw)")
        rows("torch", "PyTorch loop (torch-launch.py), ms per loop; /floor: tc vs tb")
        if doc["ratios"]:
            L.append("ratios of medians (90%: bootstrap interval), and paired per round: median [min..max]")
            for k, r in doc["ratios"].items():
                L.append("  %-7s %.4f  90%% %-15s paired %s" % (
                    k, r["of_medians"], "%.4f..%.4f" % tuple(r["ci90"]) if r.get("ci90") else "-",
                    "%.4f [%.4f..%.4f] n=%d" % (r["paired_median"], r["paired_min"], r["paired_max"],
                                                r["n_pairs"]) if r.get("n_pairs") else "-"))
            L.append("")
        if doc["added_by_tracing"]:
            L.append("job-side cost added (difference of medians): CPU s, max RSS MiB")
            for k, e in doc["added_by_tracing"].items():
                L.append("  %-7s %s %s" % (k, "CPU %+.3f s" % e["cpu_s"] if "cpu_s" in e else "",
                                           "RSS %+.1f MiB" % (e["maxrss_kb"] / 1024.0) if "maxrss_kb" in e else ""))
            L.append("")
        L.append("targets")
        for t in doc["targets"]:
            L.append("  %-7s %s" % (t["status"].upper(), t["target"]))
            L.append("          %s" % t["detail"])
        if doc["checks"]:
            L.append("checks")
            for t in doc["checks"]:
                L.append("  %-7s %s: %s" % (t["status"].upper(), t["check"], t["detail"]))
        L.append("")
        if doc["fatal"]:
            L.append("FATAL: %s" % doc["fatal"])
        L.append("failed runs: %d%s" % (len(doc["failures"]), "" if not doc["failures"] else ""))
        for f in doc["failures"][:20]:
            L.append("  " + f[:400])
        for n in doc["notes"]:
            L.append("note: " + n)
        return "\n".join(L) + "\n"

    def write_logs(self):
        with open(os.path.join(self.OUT, "bench-logs.txt"), "w") as f:
            f.write("=== machine\n%s\n" % json.dumps(self.machine, indent=1))
            f.write("\n=== daemon log (tail)\n%s\n" % tail(os.path.join(self.W, "daemon.log"), 20000))
            n = 0
            for d in sorted(glob.glob(os.path.join(self.W, "runs", "*"))):
                name = os.path.basename(d)
                failed = any(name.startswith("%03d-" % r["seq"]) for k in self.results
                             for r in self.results[k] if not r["ok"])
                first = name.startswith("001-") or name.startswith("002-") or "warmup" in name
                if not (failed or first):
                    continue
                n += 1
                if n > 40:
                    break
                f.write("\n=== %s%s\ncmd: %s" % (name, " (FAILED)" if failed else "",
                                                 tail(os.path.join(d, "cmd"), 2000)))
                f.write("--- stdout (tail)\n%s\n--- stderr (tail)\n%s\n" % (
                    tail(os.path.join(d, "stdout"), 3000), tail(os.path.join(d, "stderr"), 6000)))

    # ---- the whole run -----------------------------------------------------

    def main(self):
        need = [self.daemon, self.ctl_bin, self.shim, self.bare]
        need.append(self.workload if self.dry else self.kw)
        missing = [p for p in need if not os.path.exists(p)]
        if missing:
            self.fatal = "missing: %s (build the project, then bench/gpu/build.sh; carry %s)" % (
                ", ".join(missing), "build dir, tests/gpu/build and bench/gpu/build")
            return 1
        self.probe()
        if not self.start_daemon():
            self.fatal = "cuptimond did not answer on %s within 10 s: %s" % (
                self.csock, tail(os.path.join(self.W, "daemon.log"), 600))
            return 1
        say("cuptimond pid %d up; work dir %s%s" % (self.dproc.pid, self.W,
                                                     "; DRY RUN" if self.dry else ""))
        torch_modes = [k for k in self.modes if MODE[k][1] == "torch"]
        kw_modes = [k for k in self.modes if MODE[k][1] == "kw"]
        # BENCH_GPU_DRY_TORCH=1 (tests of this script only): keep the torch
        # modes in a dry run, with PYTHON/PYTHONPATH giving a stand-in torch
        if torch_modes and self.dry and os.environ.get("BENCH_GPU_DRY_TORCH") != "1":
            self.torch_ok, self.torch_why = False, "dry run: no torch modes"
            self.notes.append("dry run: the torch modes are skipped")
            for k in torch_modes:
                self.modes.remove(k)
                del self.results[k]
            torch_modes = []
        if self.warmup:
            for k in ("a", "c"):
                if k in kw_modes:
                    self.run_one(k, 0, warmup=True)
        if torch_modes:
            r = self.run_one("ta", 0, warmup=True)
            self.torch_ok = r["ok"]
            if not r["ok"]:
                self.torch_why = "torch not usable in %s: %s" % (self.py, "; ".join(r["errors"])[:300])
                say(self.torch_why + " -- the torch modes are skipped")
                self.notes.append(self.torch_why)
                self.failures.append("ta warm-up: " + self.torch_why)
                torch_modes = []
        t_kw = t_torch = 0.0
        for rnd in range(1, self.runs + 1):
            left = self.budget - (time.time() - T0)
            do_torch = bool(torch_modes)
            if rnd > 1:
                # known-work first (the headline target): a full round only
                # when it leaves time for every later round's known-work modes
                if do_torch and left < t_kw + t_torch + (self.runs - rnd) * t_kw:
                    do_torch = False
                if left < t_kw:
                    self.notes.append("the budget (%d s) ended the rounds after round %d" % (
                        self.budget, rnd - 1))
                    say("out of budget: stopping after round %d" % (rnd - 1))
                    break
                if not do_torch and torch_modes:
                    self.rounds_kw_only += 1
                    self.note_once("the budget (%d s) left the torch modes out of some rounds" %
                                   self.budget)
                    say("round %d: known-work modes only (%.0f s left, a full round takes %.0f s)" % (
                        rnd, left, t_kw + t_torch))
            s = time.time()
            for k in kw_modes:
                self.run_one(k, rnd)
            t_kw = max(t_kw, time.time() - s)
            if do_torch:
                s = time.time()
                for k in torch_modes:
                    self.run_one(k, rnd)
                t_torch = max(t_torch, time.time() - s)
            self.rounds_done = rnd
            self.write_outputs()
        return 0


def main():
    if len(sys.argv) != 4:
        sys.stderr.write("usage: bench.py BUILD_DIR OUT_DIR WORK_DIR\n")
        return 2
    b = Bench(*sys.argv[1:])

    def on_term(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    rc = 1
    try:
        rc = b.main()
    except SystemExit as e:
        b.fatal = b.fatal or "interrupted (signal %s)" % e.code
        rc = 1
    except Exception as e:  # noqa: BLE001 -- reported in the output
        import traceback
        b.fatal = "bench.py failed: %r\n%s" % (e, traceback.format_exc())
        rc = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if b.child is not None:
            try:
                b.child.kill()
            except OSError:
                pass
        if b.dproc is not None:
            try:
                b.ctl("status", "--json", timeout=5)
            except Exception:  # noqa: BLE001
                pass
            drc = b.stop_daemon()
            b.machine["daemon_exit"] = drc
            if drc not in (0, None):
                b.notes.append("cuptimond exited %s on SIGTERM" % drc)
        try:
            doc, txt = b.write_outputs(final=True)
            b.write_logs()
            sys.stdout.write("\n" + txt)
        except Exception as e:  # noqa: BLE001
            sys.stderr.write("bench.py: cannot write the report: %r\n" % e)
            rc = 1
    if b.fatal:
        sys.stderr.write("bench.py: %s\n" % b.fatal)
        return 1
    if b.failures:
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
