#!/usr/bin/env python3
"""Turn one wrk or ab run into one JSON line of bench/run/results.jsonl.

run.sh samples the target's CPU seconds (proc.py cpu) and the origin's request counter
(nginx stub_status) just before and just after the load generator, then calls this with the
load generator's output. It derives req/s, p50/p99 latency, CPU-µs per request, the target's
CPU share and the verdict: a hit run must leave the origin's counter unchanged (the counter
read itself adds one), a miss run must reach the origin once per request.
"""
import argparse
import json
import re
import sys

UNIT_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0, "h": 3600000.0}


def parse_wrk(text):
    out = {"errors": 0, "non2xx": 0}
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+),", text)
    if m:
        out["requests"] = int(m.group(1))
        out["seconds"] = float(m.group(2)) * UNIT_MS[m.group(3)] / 1000.0
    m = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if m:
        out["rps"] = float(m.group(1))
    for pct, key in (("50", "p50_ms"), ("99", "p99_ms")):
        m = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s|m|h)\s*$", text, re.M)
        if m:
            out[key] = float(m.group(1)) * UNIT_MS[m.group(2)]
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        out["errors"] = sum(int(x) for x in m.groups())
        out["timeouts"] = int(m.group(4))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        out["non2xx"] = int(m.group(1))
    return out


def parse_ab(text):
    out = {"errors": 0, "non2xx": 0}
    patterns = {
        "requests": r"Complete requests:\s+(\d+)",
        "seconds": r"Time taken for tests:\s+([\d.]+) seconds",
        "rps": r"Requests per second:\s+([\d.]+)",
        "errors": r"Failed requests:\s+(\d+)",
        "non2xx": r"Non-2xx responses:\s+(\d+)",
        "keepalive": r"Keep-Alive requests:\s+(\d+)",
        "p50_ms": r"^\s+50%\s+(\d+)",
        "p99_ms": r"^\s+99%\s+(\d+)",
    }
    for key, pat in patterns.items():
        m = re.search(pat, text, re.M)
        if m:
            out[key] = float(m.group(1)) if "." in m.group(1) else int(m.group(1))
    return out


def verdict(kind, rec):
    reqs = rec.get("requests", 0)
    origin = rec.get("origin_requests")
    if not reqs:
        return "NO REQUESTS"
    if origin is None:
        return "origin count unknown"
    if kind == "miss":
        return "miss" if origin >= 0.99 * reqs else "NOT ALL MISSES"
    if kind == "mix":
        return "mix" if 0.4 * reqs <= origin <= 0.6 * reqs else "NOT HALF HITS"
    return "hit" if origin == 0 else "NOT A HIT"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", choices=("wrk", "ab"), required=True)
    ap.add_argument("--output", required=True, help="the load generator's stdout")
    ap.add_argument("--jsonl", required=True)
    ap.add_argument("--case", required=True)
    ap.add_argument("--kind", choices=("hit", "miss", "mix", "close", "ab", "idle"), required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--rep", type=int, required=True)
    ap.add_argument("--cpu0", type=float, required=True)
    ap.add_argument("--cpu1", type=float, required=True)
    ap.add_argument("--origin0", type=int)
    ap.add_argument("--origin1", type=int)
    ap.add_argument("--cmd", required=True)
    ap.add_argument("--extra", action="append", default=[], help="key=value (numbers parsed)")
    args = ap.parse_args()

    with open(args.output) as f:
        text = f.read()
    rec = parse_wrk(text) if args.tool == "wrk" else parse_ab(text)
    rec.update(case=args.case, kind=args.kind, target=args.target, rep=args.rep, cmd=args.cmd)
    rec["cpu_s"] = round(args.cpu1 - args.cpu0, 3)
    if rec.get("requests"):
        rec["cpu_us_per_req"] = round(rec["cpu_s"] * 1e6 / rec["requests"], 2)
    if rec.get("seconds"):
        rec["cpu_share"] = round(rec["cpu_s"] / rec["seconds"], 3)
    if args.origin0 is not None and args.origin1 is not None:
        rec["origin_requests"] = args.origin1 - args.origin0 - 1
    for item in args.extra:
        key, _, value = item.partition("=")
        try:
            rec[key] = float(value) if "." in value else int(value)
        except ValueError:
            rec[key] = value
    rec["verdict"] = verdict(args.kind, rec)
    with open(args.jsonl, "a") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")
    print(
        f"  {args.target:<10} {args.case:<16} rep {args.rep}: "
        f"{rec.get('rps', 0):>10,.0f} req/s  p50 {rec.get('p50_ms', 0):.2f} ms  "
        f"p99 {rec.get('p99_ms', 0):.2f} ms  {rec.get('cpu_us_per_req', 0):.1f} CPU-µs/req  "
        f"cpu {100 * rec.get('cpu_share', 0):.0f}%  origin {rec.get('origin_requests')}  "
        f"errors {rec['errors']}+{rec['non2xx']}  {rec['verdict']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
