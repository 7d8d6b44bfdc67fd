#!/bin/bash
# The demo (tests/demo.sh, what ./demo.sh and make demo run) ends as a
# newcomer needs it to: end-window's reply with the window's top kernels;
# at the end the kernels and processes tables of what ran, then exactly
# three lines: where the trace is (a trace with those kernels), how to open
# it, and the stats command for the archive, which prints the same tables.
. "$top_srcdir/tests/integration/lib.sh"

CUPTIMON_DEMO_OUTPUT=$T/demo bash "$top_srcdir/tests/demo.sh" "$top_builddir" >"$T/demo.txt" 2>&1 ||
    { tail -n 30 "$T/demo.txt"; fail "the demo failed"; }
python3 - "$T/demo.txt" >"$T/cmd.txt" <<'PY' || { tail -n 40 "$T/demo.txt"; fail "the demo's end"; }
import json, os, sys
text = open(sys.argv[1]).read()
lines = text.rstrip("\n").split("\n")
trace, open_it, tables = lines[-3:]
assert trace.startswith("trace:   ") and open_it.startswith("open it: ") and tables.startswith("tables:  "), lines[-3:]
assert "ui.perfetto.dev" in open_it and "chrome://tracing" in open_it, open_it
path = trace.split()[1]
t = json.load(open(path))
assert sum(1 for e in t["traceEvents"] if e.get("cat") == "kernel") == 300000, path
assert lines[-4] == "", lines[-4]  # the tables end, then the three lines
# Above them: the kernels table, then the processes table.
k = max(i for i, l in enumerate(lines) if l.startswith("CUDA kernels by GPU time:"))
p = max(i for i, l in enumerate(lines) if l.startswith("Processes (producer sessions):"))
assert k < p < len(lines) - 4, (k, p)
assert "Time (%)  Total Time (ns)  Instances" in lines[k + 2], lines[k + 2]
assert "PID  Rank  Label" in lines[p + 2], lines[p + 2]
assert len([l for l in lines[p + 4:-4] if l.strip()]) == 2, lines[p + 4:-4]  # two workloads
# end-window's reply ends with the top kernels.
assert "top kernels by GPU time" in text
# The stats command, runnable as printed, prints the same tables.
cmd = tables.split(None, 1)[1].split(" [")[0]
print(cmd)
open(sys.argv[1] + ".tables", "w").write("\n".join(lines[k:-4]) + "\n")
PY
read -r -a cmd <"$T/cmd.txt"
"${cmd[@]}" --report kernels,processes >"$T/again.txt" || fail "the printed stats command failed: ${cmd[*]}"
diff "$T/demo.txt.tables" "$T/again.txt" || fail "the printed stats command gives other tables"
echo "ok"
