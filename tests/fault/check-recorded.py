#!/usr/bin/env python3
"""Checks an archive against workload reports when CUPTI was allowed to drop.

usage: check-recorded.py CUPTIMONCTL OUTPUT_DIR REPORT.json...

tests/integration/check-archive.py proves that the trace holds every record
the libcupti double wrote into a buffer (kernels_recorded, memcpys_recorded,
memsets_recorded, per kernel name, no correlation id twice), and also insists
that nothing was dropped, because its tests are sized so.  Under a fault
(a stopped daemon, a full pool) drops are expected: records CUPTI dropped
were never written into a buffer, so they are not in the *_recorded counts
and cuptimon never accepted them.  This wrapper states that, copies each
report with "dropped" moved aside (kept as "dropped_by_fault"), and runs the
same check: every record that reached a buffer is in the archive exactly
once.
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    ctl, root, reports = sys.argv[1], sys.argv[2], sys.argv[3:]
    here = os.path.dirname(os.path.abspath(__file__))
    check_py = os.path.join(here, "..", "integration", "check-archive.py")
    with tempfile.TemporaryDirectory(prefix="cuptimon-recorded-") as tmp:
        sys.exit(check(ctl, root, reports, check_py, tmp))


def check(ctl, root, reports, check_py, tmp):
    copies = []
    dropped = 0
    for i, path in enumerate(reports):
        with open(path) as f:
            rep = json.load(f)
        dropped += rep.get("dropped", 0)
        rep["dropped_by_fault"] = rep.get("dropped", 0)
        rep["dropped"] = 0
        out = os.path.join(tmp, f"report-{i}.json")
        with open(out, "w") as f:
            json.dump(rep, f)
        copies.append(out)
    r = subprocess.run([sys.executable, check_py, ctl, root] + copies)
    if r.returncode == 0:
        print(f"check-recorded: {len(reports)} report(s); {dropped} record(s) dropped by CUPTI "
              "before reaching a buffer (never accepted); every recorded one is archived")
    return r.returncode


if __name__ == "__main__":
    main()
