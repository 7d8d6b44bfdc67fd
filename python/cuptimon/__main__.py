"""``python -m cuptimon``: a small cuptimonctl in Python.

    python -m cuptimon status [--json]
    python -m cuptimon flush [--wait-running] [--timeout-s S]
    python -m cuptimon begin-window [--all | --pid P ... | --uid U | --job J | --rank R | --label L]
                                    [--activities LIST] [--duration S] [--at T] [--output FILE] [--json]
    python -m cuptimon prepare-window ...      (the same options)
    python -m cuptimon start-window [ID] [--json]
    python -m cuptimon end-window [ID] [--json]
    python -m cuptimon windows [--json]

Global options: ``-c/--control-socket PATH`` (default: as cuptimonctl),
``-t/--timeout SECONDS``.  Exit status: 0 on success, 1 when the daemon said
no or is not running, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional

from . import daemon as W
from ._errors import CuptimonError, DaemonError


def _dump(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=False))


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _print_status(st: Dict[str, Any]) -> None:
    d = st.get("daemon", {})
    print(f"cuptimond {d.get('version', '?')} (pid {d.get('pid', '?')}), up "
          f"{d.get('uptime_s', 0):.0f} s, protocol {d.get('protocol', '?')}")
    print(f"  control {d.get('control_socket', '?')}, producers {d.get('producer_socket', '?')}")
    print(f"  archive {d.get('archive_dir', '?')}")
    sessions = st.get("sessions", [])
    print(f"sessions: {len(sessions)}")
    for s in sessions:
        ident = []
        if s.get("label"):
            ident.append(f"label {s['label']}")
        job = s.get("job") or {}
        if job.get("rank") is not None:
            ident.append(f"rank {job['rank']}")
        if job.get("slurm_job_id"):
            ident.append(f"job {job['slurm_job_id']}")
        print(f"  pid {s.get('pid'):<8} uid {s.get('uid'):<6} "
              f"{'connected' if s.get('connected') else 'gone     '} "
              f"buffers {s.get('buffers_received', 0):<7} "
              f"archived {_fmt_bytes(s.get('bytes_archived', 0)):<10} "
              f"dropped {s.get('dropped_records', 0)}"
              + (f"  {' '.join(ident)}" if ident else "")
              + (f"  {s.get('exe')}" if s.get("exe") else ""))


def _print_window(w: Dict[str, Any]) -> None:
    pids = w.get("pids", [])
    print(f"window {w.get('window')}: {w.get('state')}, {len(pids)} process(es) {pids}")
    s, e = w.get("start_unix_ns", 0), w.get("end_unix_ns", 0)
    if s:
        line = f"  started {s / 1e9:.3f}"
        if e:
            line += f", ended {e / 1e9:.3f} ({(e - s) / 1e9:.3f} s)"
        print(line)
    elif w.get("at_unix_ns"):
        print(f"  starts at {w['at_unix_ns'] / 1e9:.3f}")
    print(f"  trace: {w.get('output')}")
    summ = w.get("summary") or {}
    for p in summ.get("processes", []):
        print(f"  pid {p.get('pid'):<8} events {p.get('events', 0):<9} kernels "
              f"{p.get('kernels', 0):<8} dropped {p.get('dropped_records', 0)}"
              + (" (late: its last flush did not finish in time)" if p.get("late") else ""))
    if summ.get("truncated"):
        print("  the window reached its size cap and was cut short")
    if w.get("error"):
        print(f"  error: {w['error']}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m cuptimon",
                                description="Talk to the node's cuptimon daemon (a small "
                                            "cuptimonctl).")
    p.add_argument("-c", "--control-socket", metavar="PATH",
                   help="the daemon's control socket (default: $CUPTIMON_CONTROL_SOCKET, else "
                        "RUNTIME/control.sock, as cuptimonctl)")
    p.add_argument("-t", "--timeout", type=float, metavar="SECONDS",
                   help="how long to wait for the daemon (default 10; window start/end 120)")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    sub.required = True

    s = sub.add_parser("status", help="the daemon and its sessions")
    s.add_argument("--json", action="store_true", help="print the raw reply")

    s = sub.add_parser("flush", help="hand over CUPTI's buffers now and wait until archived")
    s.add_argument("--wait-running", "--forced", dest="forced", action="store_true",
                   help="also wait for the work still running (never forces CUPTI)")
    s.add_argument("--timeout-s", type=float, metavar="S", help="how long the daemon waits")
    s.add_argument("--json", action="store_true")

    for name, what in (("begin-window", "prepare and start a trace window"),
                       ("prepare-window", "prepare a window (enable early, start later)")):
        s = sub.add_parser(name, help=what)
        g = s.add_argument_group("selector (combined with AND)")
        g.add_argument("--all", action="store_true", help="every process of the node")
        g.add_argument("--pid", type=int, action="append", metavar="PID",
                       help="a process (repeat for more)")
        g.add_argument("--uid", type=int)
        g.add_argument("--job", help="SLURM_JOB_ID or TORCHELASTIC_RUN_ID")
        g.add_argument("--rank", help="RANK")
        g.add_argument("--label", help="CUPTIMON_LABEL")
        s.add_argument("--activities", metavar="LIST",
                       help="kinds to trace, comma-separated names or numbers")
        s.add_argument("--duration", type=float, metavar="S", help="end by itself after S s")
        s.add_argument("--at", type=float, metavar="T",
                       help="start at Unix time T (seconds, or ns above 1e12)")
        s.add_argument("--output", metavar="FILE", help="the trace path")
        s.add_argument("--json", action="store_true")

    for name, what in (("start-window", "start a prepared window"),
                       ("end-window", "end a window, write its trace")):
        s = sub.add_parser(name, help=what)
        s.add_argument("window", nargs="?", type=int, metavar="ID", help="default: the newest")
        s.add_argument("--json", action="store_true")

    s = sub.add_parser("windows", help="list the windows")
    s.add_argument("--json", action="store_true")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    """The CLI's entry point; returns the exit status."""
    args = _parser().parse_args(argv)
    common = {"socket_path": args.control_socket, "timeout": args.timeout}
    try:
        if args.cmd == "status":
            st = W.status(**common)
            _dump(st) if args.json else _print_status(st)
        elif args.cmd == "flush":
            r = W.flush(args.forced, args.timeout_s, **common)
            if args.json:
                _dump(r)
            else:
                print(f"flushed {r.get('completed', 0)} of {r.get('sessions', 0)} session(s) in "
                      f"{r.get('elapsed_ms', 0):.1f} ms"
                      + (f"; late: {r['late']}" if r.get("late") else "")
                      + (f"; gone: {r['gone']}" if r.get("gone") else ""))
        elif args.cmd in ("begin-window", "prepare-window"):
            fn = W.begin_window if args.cmd == "begin-window" else W.prepare_window
            acts = [a for a in args.activities.split(",") if a] if args.activities else None
            try:
                r = fn(args.pid, uid=args.uid, job=args.job, rank=args.rank, label=args.label,
                       all=args.all, activities=acts, duration_s=args.duration, at=args.at,
                       output=args.output, **common)
            except ValueError as e:
                print(f"python -m cuptimon {args.cmd}: {e}", file=sys.stderr)
                return 2
            _dump(r) if args.json else _print_window(r)
        elif args.cmd in ("start-window", "end-window"):
            fn = W.start_window if args.cmd == "start-window" else W.end_window
            r = fn(args.window, **common)
            _dump(r) if args.json else _print_window(r)
        elif args.cmd == "windows":
            ws = W.windows(**common)
            if args.json:
                _dump({"windows": ws})
            else:
                for w in ws:
                    _print_window(w)
                if not ws:
                    print("no windows")
    except DaemonError as e:
        print(f"cuptimon: the daemon refused: {e}", file=sys.stderr)
        return 1
    except CuptimonError as e:
        print(f"cuptimon: {e}", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"cuptimon: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

