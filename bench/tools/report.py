#!/usr/bin/env python3
"""Write bench/RESULTS.md from run.sh's results.jsonl and meta.tsv.

    report.py --jsonl run/results.jsonl --meta run/meta.tsv --out RESULTS.md

meta.tsv holds one "key<TAB>value" per line; keys that repeat (case, target, note, version,
start, failed, cmd) keep their order. Every figure quoted is the median over repetitions.
A section written by count.sh between the COUNT_BEGIN/COUNT_END markers of an existing
RESULTS.md is carried over unchanged.

A/B runs (run.sh --sepia-base): the target sepia-base is a second Sepia build. It is not a peer
("best peer" never means it); each case gets the ratio sepia ÷ sepia-base of CPU-µs per request,
the median of the per-repetition ratios, followed by those ratios in repetition order.
"""
import argparse
import json
import os
import statistics
import sys

COUNT_BEGIN = "<!-- count.sh:begin -->"
COUNT_END = "<!-- count.sh:end -->"
SIZES = {"160": "160 B", "1k": "1 KiB", "4k": "4 KiB", "64k": "64 KiB", "1m": "1 MiB"}
GOOD = {"hit", "miss", "mix"}
BASE = "sepia-base"
# Not a proxy (tools/ceiling.c): the floor under a keep-alive hit, never a "best peer".
CEILING = "ceiling"
# Not a proxy (tools/relay.c): the floor under a miss or pass-through request, never a "best peer".
RELAY = "relay"


def read_meta(path):
    meta = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("\t")
            meta.setdefault(key, []).append(value)
    return meta


def one(meta, key, default=""):
    return meta.get(key, [default])[-1]


def case_title(case, meta):
    parts = case.split("-")
    if parts[0] == "hit":
        return f"Keep-alive hit, {SIZES[parts[1]]}, c={parts[2][1:]}"
    if parts[0] == "close":
        return f"`Connection: close` hit (new connection per request), {SIZES[parts[1]]}, c={parts[2][1:]}"
    if case.startswith("miss-full-"):
        return (f"Miss at steady state: every URL new, the cache full and evicting "
                f"(--cache-mb {one(meta, 'cache_mb', '1024')}), 1 KiB, c={parts[2][1:]}")
    if case.startswith("miss-vary-"):
        return (f"Miss at steady state with `Vary: Accept-Encoding` responses, the cache full, "
                f"1 KiB, c={parts[2][1:]}")
    if parts[0] == "nostore":
        return f"Pass-through: one URL answered `no-store`, the cache full, 1 KiB, c={parts[2][1:]}"
    if parts[0] == "mix50":
        return f"50 % hits (100 hot URLs) and 50 % new URLs, the cache full, 1 KiB, c={parts[2][1:]}"
    if parts[0] == "miss":
        return f"Miss, every URL new (`/u/<counter>`), {SIZES[parts[1]]}, c={parts[2][1:]}"
    if parts[0] == "ab":
        k = " -k" if case.endswith("-k") else ""
        return f"`ab -c 10 -n 100000{k}`, {SIZES[parts[1]]} hit"
    if parts[0] == "idle":
        n = int(one(meta, "idle_conns", "10000"))
        return (f"{n:,} idle keep-alive clients on a freshly started target "
                "(RSS growth per connection), meanwhile `wrk -c100` on the 1 KiB hit")
    return case


def med(recs, key):
    vals = [r[key] for r in recs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def fmt_num(v, digits=0):
    if v is None:
        return "—"
    return f"{v:,.{digits}f}"


def fmt_ms(v):
    if v is None:
        return "—"
    return f"{v:.0f} ms" if v >= 100 else f"{v:.2f} ms"


def fmt_bytes(v):
    if v is None:
        return "—"
    return f"{v / 1024:,.1f} KiB" if v >= 10240 else f"{v:,.0f} B"


def summarise(recs):
    """Medians and the combined verdict of one target's repetitions of one case."""
    verdicts = sorted({r["verdict"] for r in recs})
    s = {
        "reps": len(recs),
        "rps": med(recs, "rps"),
        "p50": med(recs, "p50_ms"),
        "p99": med(recs, "p99_ms"),
        "cpu": med(recs, "cpu_us_per_req"),
        "share": med(recs, "cpu_share"),
        "origin": max((r.get("origin_requests") or 0) for r in recs),
        "errors": sum(r.get("errors", 0) + r.get("non2xx", 0) for r in recs),
        "verdict": ", ".join(verdicts),
        "valid": all(v in GOOD for v in verdicts),
        "rss_per_conn": med(recs, "rss_per_conn"),
        "held": med(recs, "held_after"),
        "opened": med(recs, "idle_ok"),
    }
    return s


def ratio(a, b):
    return f"{a / b:.2f}×" if a is not None and b else "—"


def ab_ratios(by_target):
    """sepia ÷ sepia-base CPU-µs/req, paired by repetition: (median, [per rep], valid) or None."""
    cpu = {}
    for t in ("sepia", BASE):
        cpu[t] = {r["rep"]: r["cpu_us_per_req"] for r in by_target.get(t, [])
                  if r.get("cpu_us_per_req")}
    reps = sorted(set(cpu["sepia"]) & set(cpu[BASE]))
    if not reps:
        return None
    # rounded as printed, so the verdict (does the spread straddle 1.0?) reads off the figures
    ratios = [round(cpu["sepia"][k] / cpu[BASE][k], 2) for k in reps]
    valid = all(summarise(by_target[t])["valid"] for t in ("sepia", BASE))
    return statistics.median(ratios), ratios, valid


def ab_verdict(ratios, short=False):
    if len(ratios) < 2:
        return "1 rep" if short else "one repetition: no spread"
    if min(ratios) <= 1.0 <= max(ratios):
        return "within noise"
    if max(ratios) < 1.0:
        return "lower" if short else "sepia lower in every repetition"
    return "higher" if short else "sepia higher in every repetition"


def fmt_ab(ab, short=False):
    """`0.98 (0.95, 1.03, 0.98)`: the median, then the ratio of each repetition in order."""
    if ab is None:
        return "—"
    median, ratios, valid = ab
    text = f"{median:.2f} ({', '.join(f'{r:.2f}' for r in ratios)})"
    if short:
        return f"{text} {ab_verdict(ratios, short=True)}" + ("" if valid else " ✗")
    return (f"**{median:.2f}** ({', '.join(f'{r:.2f}' for r in ratios)}): {ab_verdict(ratios)}"
            + ("" if valid else " (a verdict was not the expected one: not comparable)"))


def comparison(stats, peers, idle):
    """One line: Sepia against the best valid peer on req/s, CPU-µs/req (and RSS/conn)."""
    sepia = stats.get("sepia")
    valid = {p: stats[p] for p in peers if p in stats and stats[p]["valid"]}
    if not sepia or not valid:
        return ""
    best_rps = max(valid, key=lambda p: valid[p]["rps"] or 0)
    best_cpu = min(valid, key=lambda p: valid[p]["cpu"] or float("inf"))
    caveat = "" if sepia["valid"] else f" (Sepia's rows are **{sepia['verdict']}**: not comparable)"
    line = (f"Sepia ÷ best peer: req/s **{ratio(sepia['rps'], valid[best_rps]['rps'])}** "
            f"(best: {best_rps}), CPU-µs/req **{ratio(sepia['cpu'], valid[best_cpu]['cpu'])}** "
            f"(best: {best_cpu}; lower is better)")
    if idle:
        have = {p: s for p, s in valid.items() if s["rss_per_conn"] is not None}
        if have and sepia["rss_per_conn"] is not None:
            best_rss = min(have, key=lambda p: have[p]["rss_per_conn"])
            line += (f", RSS/conn **{ratio(sepia['rss_per_conn'], have[best_rss]['rss_per_conn'])}**"
                     f" (best: {best_rss})")
    return line + caveat + "\n"


def case_table(case, by_target, targets, peers, meta):
    idle = case.startswith("idle")
    head = "| target | req/s | p50 | p99 | CPU-µs/req | target CPU | origin reqs | errors | verdict |"
    rule = "|---|---:|---:|---:|---:|---:|---:|---:|---|"
    if idle:
        head += " RSS/conn | held |"
        rule += "---:|---:|"
    lines = [f"### {case_title(case, meta)}", "", f"case `{case}`", "", head, rule]
    stats = {}
    for t in targets:
        recs = by_target.get(t)
        if not recs:
            continue
        s = stats[t] = summarise(recs)
        verdict = s["verdict"] if s["valid"] else f"**{s['verdict']}**"
        row = (f"| {t} | {fmt_num(s['rps'])} | {fmt_ms(s['p50'])} | {fmt_ms(s['p99'])} | "
               f"{fmt_num(s['cpu'], 1)} | {fmt_num(100 * s['share'] if s['share'] else None)}% | "
               f"{s['origin']:,} | {s['errors']:,} | {verdict} |")
        if idle:
            row += f" {fmt_bytes(s['rss_per_conn'])} | {fmt_num(s['held'])}/{fmt_num(s['opened'])} |"
        lines.append(row)
    line = comparison(stats, peers, idle)
    if "sepia" in stats and CEILING in stats and stats[CEILING]["valid"]:
        line += (f"Sepia ÷ the ceiling server (tools/ceiling.c), CPU-µs/req: "
                 f"**{ratio(stats['sepia']['cpu'], stats[CEILING]['cpu'])}**\n")
    if RELAY in stats and stats[RELAY]["valid"]:
        floors = [f"{t} {ratio(stats[t]['cpu'], stats[RELAY]['cpu'])}"
                  for t in stats if t not in (RELAY, CEILING) and stats[t]["valid"]]
        if floors:
            line += ("÷ the relay floor (tools/relay.c), CPU-µs/req: **" + ", ".join(floors) + "**\n")
    if "sepia" in stats and BASE in stats:
        line += (("\n" if line else "") + "A/B, sepia ÷ sepia-base CPU-µs/req (median of the "
                 "repetitions' ratios, then each repetition's; lower is better): "
                 f"{fmt_ab(ab_ratios(by_target))}\n")
    lines += ["", line]
    return "\n".join(lines), stats


def summary_table(grouped, cases, targets, peers):
    ab = "sepia" in targets and BASE in targets
    lines = ["| case (req/s / CPU-µs per request) | " + " | ".join(targets) + " | Sepia CPU ÷ best peer |"
             + (" sepia ÷ sepia-base CPU (per rep) |" if ab else ""),
             "|---|" + "---:|" * len(targets) + "---:|" + ("---:|" if ab else "")]
    for case in cases:
        stats = {t: summarise(recs) for t, recs in grouped.get(case, {}).items()}
        cells = []
        for t in targets:
            s = stats.get(t)
            if not s:
                cells.append("—")
                continue
            mark = "" if s["valid"] else " ✗"
            cells.append(f"{fmt_num(s['rps'])} / {fmt_num(s['cpu'], 1)}{mark}")
        valid = [stats[p]["cpu"] for p in peers if p in stats and stats[p]["valid"] and stats[p]["cpu"]]
        sep = stats.get("sepia")
        r = ratio(sep["cpu"], min(valid)) if sep and valid else "—"
        row = f"| `{case}` | " + " | ".join(cells) + f" | {r} |"
        if ab:
            row += f" {fmt_ab(ab_ratios(grouped.get(case, {})), short=True)} |"
        lines.append(row)
    idle = {t: summarise(recs) for t, recs in grouped.get("idle", {}).items()}
    if idle:
        cells = [f"{t} {fmt_bytes(idle[t]['rss_per_conn'])}" for t in targets if t in idle]
        lines += ["", "RSS growth per idle keep-alive connection (`idle` case): " + ", ".join(cells) + "."]
    lines.append("")
    lines.append("✗ = the verdict was not the expected one (a \"hit\" run reached the origin, a "
                 "miss run did not, or no requests completed): see the case table.")
    if ab:
        lines.append("")
        lines.append("sepia ÷ sepia-base CPU: the A/B of two Sepia builds, CPU-µs per request of "
                     "sepia over sepia-base in the same repetition; first the median of those "
                     "ratios, then each repetition's in order. Below 1.0 sepia is cheaper; when "
                     "the repetitions' ratios straddle 1.0 the difference is within noise, and "
                     "\"lower\" (\"higher\") means sepia was cheaper (dearer) in every repetition.")
    return "\n".join(lines)


# Sections kept verbatim when the report is rewritten: count.sh's, and measurements taken by
# hand with the commands they quote (allocation counts, allocator trials).
CARRIED = [(COUNT_BEGIN, COUNT_END), ("<!-- measurements:begin -->", "<!-- measurements:end -->")]


def carried_count_section(out_path):
    if not os.path.exists(out_path):
        return ""
    with open(out_path) as f:
        text = f.read()
    kept = []
    for begin, end_marker in CARRIED:
        start, end = text.find(begin), text.find(end_marker)
        if start >= 0 and end > start:
            kept.append(text[start : end + len(end_marker)] + "\n")
    return "\n".join(kept)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jsonl", required=True)
    ap.add_argument("--meta", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    meta = read_meta(args.meta)
    records = []
    if os.path.exists(args.jsonl):
        with open(args.jsonl) as f:
            records = [json.loads(line) for line in f if line.strip()]
    cases = meta.get("case", [])
    targets = [t for t in meta.get("target", []) if any(r["target"] == t for r in records)]
    peers = [t for t in targets if t not in ("sepia", BASE, CEILING, RELAY)]
    grouped = {}
    for r in records:
        grouped.setdefault(r["case"], {}).setdefault(r["target"], []).append(r)

    quick = one(meta, "quick") == "1"
    out = ["# Sepia benchmark results", ""]
    if quick:
        out += ["> **SMOKE RUN (`--quick`)** — one repetition of short runs, taken while other "
                "engineers were compiling on this 2-core machine. It proves the harness works end "
                "to end; the figures are noise-dominated and are **not** a measurement.", ""]
    out += [
        f"- date: {one(meta, 'date')}",
        f"- machine: {one(meta, 'machine')}",
        f"- command: `{one(meta, 'command')}`",
        f"- Sepia: {one(meta, 'sepia_commit')}",
    ]
    if "sepia_base" in meta:
        out.append(f"- sepia-base (A/B: the build sepia is compared with): {one(meta, 'sepia_base')}")
    out += [
        f"- repetitions: {one(meta, 'reps')} (interleaved: repetition 1 of every case and target, "
        f"then repetition 2, ...), wrk duration {one(meta, 'duration')} s, medians quoted",
        f"- load before / after: {one(meta, 'load_before')} / {one(meta, 'load_after')}",
        f"- wall time of the run: {one(meta, 'elapsed')}",
        "",
        "Method: origin nginx on CPU 0 beside the load generator (wrk -t1 or ab); each target an "
        "accelerator of that origin pinned to CPU 1 with one worker (every thread re-pinned with "
        "`taskset -a -p`). CPU-µs/req is the target's utime+stime over all its processes "
        "(/proc/PID/stat) across the run, divided by the requests completed; \"target CPU\" is that "
        "CPU time over the run's wall time (well below 100%, something else was the limit: the load "
        "generator, or other work on the same core). \"origin reqs\" is the growth of the origin's stub_status request counter during "
        "the run: 0 proves every request of a hit case was a hit.",
        "",
        "## Summary",
        "",
        summary_table(grouped, [c for c in cases if c in grouped], targets, peers),
        "",
        "## Cases",
        "",
    ]
    for case in cases:
        if case in grouped:
            table, _ = case_table(case, grouped[case], targets, peers, meta)
            out += [table, ""]
    out += ["## Targets", "", "| target | version | started as |", "|---|---|---|"]
    versions = dict(v.split("=", 1) for v in meta.get("version", []))
    starts = dict(v.split("=", 1) for v in meta.get("start", []))
    for t in meta.get("target", []):
        out.append(f"| {t} | {versions.get(t, '—')} | `{starts.get(t, '—')}` |")
    out += ["", "Configs: `bench/peers/` (rendered into the run directory with its ports and paths).",
            "", "## Exact commands", ""]
    for c in meta.get("cmd", []):
        label, _, command = c.partition(": ")
        out.append(f"- {label}: `{command}`")
    out += ["", "## Notes", ""]
    out += [f"- {n}" for n in meta.get("failed", [])]
    out += [f"- {n}" for n in meta.get("note", [])]
    out.append("")
    count = carried_count_section(args.out)
    if count:
        out += [count]
    with open(args.out, "w") as f:
        f.write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
