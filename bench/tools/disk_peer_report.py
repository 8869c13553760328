#!/usr/bin/env python3
"""Table of `bench/disk.sh peers` results (results.jsonl records with a "target").

    disk_peer_report.py RESULTS.jsonl

Per target and object count (the last fill of each pair wins): fill time and rate, disk
used, then medians over the starts after a clean stop and after kill -9 of: first disk hit,
99 % of the 1,000-object sample answered from disk, index complete; and memory per stored
object = (memory after the start with the index complete - memory of the empty-cache start)
/ objects, as Pss_Anon plus shared memory (the larger of Pss_Shmem and the Shmem the stop
gave back: see disk_peer_restart.py) and as the sum of VmRSS; the memory is the
`index` start's (nothing asked for) when the run has one, else the timed starts' median.
"""
import json, statistics, sys


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def parts(r):
    """(anonymous, shared) bytes of one record: Pss_Anon, and the larger of Pss_Shmem and
    the Shmem its stop gave back (older records: anon+shmem Pss only, as anonymous)."""
    if "anon_bytes" not in r:
        return r.get("anon_shmem_bytes"), 0
    mapped = r["anon_shmem_bytes"] - r["anon_bytes"]
    return r["anon_bytes"], max(mapped, r.get("shmem_freed_bytes") or 0)


def ram(r, empty):
    (a1, s1), (a0, s0) = parts(r), parts(empty)
    if a1 is None or a0 is None:
        return None
    return (a1 + s1) - (a0 + s0)


def fmt_ms(x):
    if x is None:
        return "—"
    return f"{x / 1000:.2f} s" if x >= 1000 else f"{x:.0f} ms"


def main(path):
    groups = {}
    for line in open(path):
        if not line.strip():
            continue
        r = json.loads(line)
        if "target" not in r:
            continue
        key = (r["objects"], r["target"])
        if r["case"] == "empty":
            groups[key] = {"empty": r["r"], "fill": None, "index": None, "clean": [], "crash": []}
        elif key in groups:
            g = groups[key]
            if r["case"] == "fill":
                g["fill"] = r
            elif r["case"] == "index":
                g["index"] = r["r"]
            else:
                g[r["case"].split("-")[0]].append(r["r"])
    print("| objects | target | fill | disk used | start after | first disk hit | 99 % of sample | index complete | RAM per object | RSS per object | starts |")
    print("|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    order = {"sepia": 0, "nginx": 1, "squid": 2, "ats": 3}
    for (n, t) in sorted(groups, key=lambda k: (k[0], order.get(k[1], 9))):
        g = groups[(n, t)]
        f = g["fill"]
        fill = f"{f['seconds']:.0f} s ({n / f['seconds'] / 1000:.1f}k obj/s)" if f else "—"
        used = f"{f['disk_bytes'] / 1e9:.2f} GB" if f else "—"
        for kind, label in (("clean", "clean stop"), ("crash", "kill -9")):
            rs = g[kind]
            if not rs:
                continue
            ok = [r for r in rs if r.get("first_hit_ms") is not None]
            # memory from the start that asked for nothing when there is one (the timed starts
            # hold the 1,000 sample objects in their memory tier too)
            mem = [g["index"]] if g["index"] else ok
            pss = med([ram(r, g["empty"]) / n for r in mem if ram(r, g["empty"]) is not None])
            rss = med([(r["rss_bytes"] - g["empty"]["rss_bytes"]) / n for r in mem])
            hits = med([r.get("sample_hits") for r in rs])
            p99 = med([r.get("p99_ms") for r in rs])
            p99s = fmt_ms(p99) if p99 is not None else f"never ({hits} of 1,000)"
            print(f"| {n:,} | {t} | {fill if kind == 'clean' else ''} | {used if kind == 'clean' else ''} | {label} "
                  f"| {fmt_ms(med([r.get('first_hit_ms') for r in rs]))} | {p99s} "
                  f"| {fmt_ms(med([r.get('index_done_ms') for r in ok]))} "
                  f"| {'—' if pss is None else f'{pss:.1f} B'} | {rss:.1f} B | {len(rs)} |" if rss is not None else
                  f"| {n:,} | {t} | {fill} | {used} | {label} | no hit | | | | | {len(rs)} |")


if __name__ == "__main__":
    main(sys.argv[1])
