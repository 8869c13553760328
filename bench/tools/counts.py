#!/usr/bin/env python3
"""Parsers and the RESULTS.md section for bench/count.sh.

    counts.py strace FILE                 JSON {syscall: calls} from `strace -c -o FILE`
    counts.py ir FILE                     total instructions (Ir) of a callgrind output file
    counts.py section --meta TSV --out RESULTS.md
        writes the "Counting the costs" section from count.sh's meta.tsv into RESULTS.md,
        replacing the previous one (between the count.sh markers) or appending it.
"""
import argparse
import json
import re
import subprocess
import sys

BEGIN = "<!-- count.sh:begin -->"
END = "<!-- count.sh:end -->"


def strace_calls(path):
    calls = {}
    with open(path) as f:
        for line in f:
            tokens = line.split()
            if len(tokens) < 5 or not re.match(r"^[\d.]+$", tokens[0]) or tokens[-1] == "total":
                continue
            # % time, seconds, usecs/call, calls, [errors], syscall
            calls[tokens[-1]] = calls.get(tokens[-1], 0) + int(tokens[3])
    return calls


def callgrind_ir(path):
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise SystemExit(f"{path}: no summary/totals line")


def short_name(raw):
    """'/long/path/crates/http1/src/x.rs:sepia_http1::f [/obj]' -> 'http1/src/x.rs: sepia_http1::f'."""
    name = re.sub(r" \[[^\]]*\]$", "", raw.strip())
    where, sep, fn = name.partition(":")
    if not sep:
        return name
    parts = where.split("/")
    return "/".join(parts[-3:]) + ": " + fn


def top_functions(path):
    """(Ir, function) pairs by self cost, from callgrind_annotate (99% of the total)."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=99.9", path],
                         capture_output=True, text=True, check=False).stdout
    rows, in_table = [], False
    for line in out.splitlines():
        if "file:function" in line:
            in_table = True
            continue
        if not in_table or line.startswith("---"):
            continue
        if not line.strip():
            break  # the per-function table ends; source annotations follow
        m = re.match(r"^\s*([\d,]+)\s+\([\s\d.]+%\)\s+(.*)$", line)
        if m:
            rows.append((int(m.group(1).replace(",", "")), short_name(m.group(2))))
    return rows


def per_request_top(base_rows, run_rows, n, limit=20):
    """Functions by self Ir per request, the baseline run's cost of each subtracted."""
    cost = {}
    for ir, fn in run_rows:
        cost[fn] = cost.get(fn, 0) + ir
    for ir, fn in base_rows:
        cost[fn] = cost.get(fn, 0) - ir
    ranked = sorted(((c / n, fn) for fn, c in cost.items() if c > 0), reverse=True)
    return ranked[:limit]


def read_meta(path):
    meta = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("\t")
            meta.setdefault(key, []).append(value)
    return meta


# The callgrind runs count.sh can make (--cg-cases), in the order they are reported.
KINDS = ("hit", "miss", "nostore", "vary")


def section(meta):
    one = lambda k, d="": meta.get(k, [d])[-1]  # noqa: E731
    lines = [BEGIN, "## Counting the costs (bench/count.sh)", ""]
    lines += [f"- date: {one('date')}; Sepia: {one('sepia')}", f"- command: `{one('command')}`", ""]
    hit_n, miss_n = int(one("strace_hit_n", "0")), int(one("strace_miss_n", "0"))
    hit50_n = int(one("strace_hit50_n", "0"))
    if hit_n or miss_n:
        hit = json.loads(one("strace_hit", "{}"))
        hit50 = json.loads(one("strace_hit50", "{}"))
        miss = json.loads(one("strace_miss", "{}"))
        lines += ["### Syscalls per request (`strace -c -f`)", "",
                  f"Keep-alive hit, one client: `{one('strace_hit_cmd')}` "
                  f"({one('strace_hit_note')}); 50 clients: `{one('strace_hit50_cmd')}` "
                  f"({one('strace_hit50_note')}); "
                  f"miss: `{one('strace_miss_cmd')}` ({one('strace_miss_note')}). "
                  "Every thread of Sepia is traced; the counts cover the whole load window.", "",
                  "| syscall | per hit, c=1 | per hit, c=50 | per miss |", "|---|---:|---:|---:|"]
        names = sorted(set(hit) | set(hit50) | set(miss),
                       key=lambda n: (-hit.get(n, 0), -miss.get(n, 0), n))
        per = lambda d, n, k: f"{d.get(n, 0) / k:.3f}" if k else "—"  # noqa: E731
        for n in names:
            lines.append(f"| {n} | {per(hit, n, hit_n)} | {per(hit50, n, hit50_n)} | "
                         f"{per(miss, n, miss_n)} |")
        total = lambda d, k: per({"t": sum(d.values())}, "t", k)  # noqa: E731
        lines.append(f"| **total** | **{total(hit, hit_n)}** | **{total(hit50, hit50_n)}** | "
                     f"**{total(miss, miss_n)}** |")
        lines.append("")
    if meta.get("ir_base"):
        base = int(one("ir_base"))
        lines += ["### Instructions per request (`valgrind --tool=callgrind`)", "",
                  "Sepia runs under callgrind three times: start, 2 priming GETs of /1k, stop "
                  "(the baseline); the same plus N keep-alive hits; the same plus N misses. "
                  "Instructions per request = (run − baseline) ÷ N."
                  + (f" Every run, the baseline too: {one('cg_fill')}." if meta.get("cg_fill")
                     else ""), "",
                  "| run | requests | instructions (Ir) | Ir per request |", "|---|---:|---:|---:|",
                  f"| baseline | 0 | {base:,} | — |"]
        for kind in KINDS:
            if meta.get(f"ir_{kind}"):
                ir, n = int(one(f"ir_{kind}")), int(one(f"ir_{kind}_n"))
                lines.append(f"| {kind}: `{one(f'ir_{kind}_cmd')}` | {n:,} | {ir:,} | "
                             f"**{(ir - base) / n:,.0f}** |")
        lines.append("")
        split = lambda rows: [(int(r.partition(" ")[0]), r.partition(" ")[2]) for r in rows]  # noqa: E731
        base_rows = split(meta.get("top_base", []))
        for kind in KINDS:
            tops = meta.get(f"top_{kind}")
            if tops:
                n = int(one(f"ir_{kind}_n"))
                lines += [f"Top functions by self cost per {kind} (the baseline's cost of each "
                          "subtracted):", "", "| Ir/req | function |", "|---:|---|"]
                for ir, fn in per_request_top(base_rows, split(tops), n):
                    lines.append(f"| {ir:,.0f} | `{fn[:150]}` |")
                lines.append("")
    for note in meta.get("note", []):
        lines.append(f"- {note}")
    lines += ["", END, ""]
    return "\n".join(lines)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "strace":
        print(json.dumps(strace_calls(sys.argv[2]), sort_keys=True))
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "ir":
        print(callgrind_ir(sys.argv[2]))
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "top":
        for ir, fn in top_functions(sys.argv[2]):
            print(ir, fn)
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["section"])
    ap.add_argument("--meta", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    text = section(read_meta(args.meta))
    try:
        with open(args.out) as f:
            old = f.read()
    except FileNotFoundError:
        old = ""
    start, end = old.find(BEGIN), old.find(END)
    if start >= 0 and end > start:
        new = old[:start] + text.rstrip("\n") + old[end + len(END):]
    else:
        new = old.rstrip("\n") + "\n\n" + text
    with open(args.out, "w") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
