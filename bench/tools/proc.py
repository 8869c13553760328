#!/usr/bin/env python3
"""Process-tree accounting for bench/run.sh, read straight from /proc.

    proc.py tree PID   the PID and all its descendants, one per line
    proc.py cpu PID    utime+stime of the whole tree in seconds (threads included: the
                       per-process /proc/PID/stat figures already sum every thread)
    proc.py rss PID    VmRSS of the whole tree in bytes

A target's cost is measured over every process it runs (varnish's manager and child,
nginx's master and worker), so none of its work hides in a helper process.
"""
import os
import sys

CLK_TCK = os.sysconf("SC_CLK_TCK")


def stat_fields(pid):
    """Fields of /proc/PID/stat after the command name (which may hold spaces)."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    return text[text.rindex(")") + 2 :].split()


def children_map():
    kids = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(stat_fields(entry)[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def tree(root):
    kids = children_map()
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if not os.path.exists(f"/proc/{pid}"):
            continue
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def cpu_seconds(pids):
    ticks = 0
    for pid in pids:
        try:
            fields = stat_fields(pid)
        except OSError:
            continue
        # after "pid (comm) ": state=0 ppid=1 ... utime=11 stime=12
        ticks += int(fields[11]) + int(fields[12])
    return ticks / CLK_TCK


def rss_bytes(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            continue
    return total


def main(argv):
    if len(argv) != 3 or argv[1] not in ("tree", "cpu", "rss"):
        sys.exit(__doc__)
    pids = tree(int(argv[2]))
    if argv[1] == "tree":
        print("\n".join(map(str, pids)))
    elif argv[1] == "cpu":
        print(f"{cpu_seconds(pids):.2f}")
    else:
        print(rss_bytes(pids))


if __name__ == "__main__":
    main(sys.argv)
