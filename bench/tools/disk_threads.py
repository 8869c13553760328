#!/usr/bin/env python3
"""CPU seconds of each thread of PID, summed by thread name: `disk_threads.py PID` prints
one JSON object {name: seconds} (bench/disk.sh diffs two of them around a run)."""
import json, os, sys

CLK = os.sysconf("SC_CLK_TCK")
pid = sys.argv[1]
out = {}
for tid in os.listdir(f"/proc/{pid}/task"):
    try:
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            t = f.read()
    except OSError:
        continue
    name = t[t.index("(") + 1 : t.rindex(")")]
    fields = t[t.rindex(")") + 2 :].split()
    out[name] = round(out.get(name, 0) + (int(fields[11]) + int(fields[12])) / CLK, 2)
print(json.dumps(out))
