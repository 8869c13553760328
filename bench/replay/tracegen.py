#!/usr/bin/env python3
"""Deterministic synthetic request traces for the cache-effectiveness replayer.

A trace is N requests over a catalogue of M objects:

* a share `one_hit` of the M objects are *one-hit wonders*: each is requested exactly once, at
  a uniformly random position in the trace;
* the other objects are *popular*: the remaining requests pick among them by Zipf popularity,
  P(rank k) proportional to 1 / k**alpha (ranks are shuffled onto object ids, so popularity is
  independent of id and of size). Zipf's tail also yields objects requested once or never, so
  the trace's real unique-object count and one-hit share are measured and printed, not assumed.

Sizes (independent of popularity), in bytes, at least 1:

* with probability 1 - tail_share: lognormal, median `median` bytes, shape `sigma`
  (mean = median * exp(sigma**2 / 2));
* with probability tail_share: Pareto, scale `tail_min` bytes, shape `tail_alpha`, cut at
  `max_size` (a heavy tail: most of the bytes, few of the objects).

Everything comes from one `random.Random(seed)`, so the same options give the same trace on any
machine with the same Python major version (3.x's Random is stable across releases).

File format (text, one request per line after a header line):

    # sepia-trace {"n": ..., "m": ..., ...}        <- parameters and summary, JSON
    <object id> <size in bytes>                     <- one line per request, in trace order

Use as a module (`generate`, `read_trace`) or as a program:

    tracegen.py --out trace.txt [--requests N] [--objects M] [--alpha A] [--seed S] ...
"""

import argparse
import bisect
import itertools
import json
import math
import random
import sys

KiB = 1024
MiB = 1024 * 1024

DEFAULTS = dict(
    requests=200_000,
    objects=50_000,
    alpha=0.9,
    one_hit=0.5,
    seed=21,
    median=4 * KiB,
    sigma=1.0,
    tail_share=0.04,
    tail_min=64 * KiB,
    tail_alpha=1.3,
    max_size=8 * MiB,
)


def object_size(rng, p):
    """One object's size from the lognormal body / Pareto tail mixture."""
    if rng.random() < p["tail_share"]:
        # Pareto: tail_min / U**(1/alpha), U uniform in (0, 1].
        u = 1.0 - rng.random()
        size = p["tail_min"] / u ** (1.0 / p["tail_alpha"])
    else:
        size = rng.lognormvariate(math.log(p["median"]), p["sigma"])
    return max(1, min(int(size), p["max_size"]))


def mixture_mean(p):
    """Expected object size of the mixture, analytically (the cut tail integrated exactly)."""
    body = p["median"] * math.exp(p["sigma"] ** 2 / 2)
    a, xm, cap = p["tail_alpha"], p["tail_min"], p["max_size"]
    # E[min(X, cap)] for Pareto(xm, a): integral of the survival function from 0 to cap.
    if a == 1.0:
        tail = xm + xm * math.log(cap / xm)
    else:
        tail = xm + xm * (1 - (xm / cap) ** (a - 1)) / (a - 1)
    return (1 - p["tail_share"]) * body + p["tail_share"] * tail


def generate(**opts):
    """Returns (params, sizes, requests): sizes[id] in bytes, requests a list of ids."""
    p = dict(DEFAULTS)
    p.update({k: v for k, v in opts.items() if v is not None})
    n, m = p["requests"], p["objects"]
    rng = random.Random(p["seed"])
    sizes = [object_size(rng, p) for _ in range(m)]

    ids = list(range(m))
    rng.shuffle(ids)
    n_ohw = min(int(round(p["one_hit"] * m)), n)
    ohw, popular = ids[:n_ohw], ids[n_ohw:]
    if not popular and n > n_ohw:
        sys.exit("trace: no popular objects left for the non-one-hit requests")

    # Zipf over the popular objects: popular[0] is rank 1 (ids were shuffled above).
    weights = [1.0 / (k ** p["alpha"]) for k in range(1, len(popular) + 1)]
    cum = list(itertools.accumulate(weights))
    total = cum[-1] if cum else 0.0
    requests = []
    for _ in range(n - n_ohw):
        r = bisect.bisect_left(cum, rng.random() * total)
        requests.append(popular[min(r, len(popular) - 1)])
    # One-hit wonders at distinct uniformly random positions; popular requests fill the rest
    # in the order drawn.
    trace = [None] * n
    for pos, oid in zip(rng.sample(range(n), n_ohw), ohw):
        trace[pos] = oid
    it = iter(requests)
    requests = [oid if oid is not None else next(it) for oid in trace]
    return p, sizes, requests


def summarize(p, sizes, requests):
    """Trace statistics, stored in the header and printed."""
    counts = {}
    for oid in requests:
        counts[oid] = counts.get(oid, 0) + 1
    uniq = len(counts)
    once = sum(1 for c in counts.values() if c == 1)
    cat = sorted(sizes)
    req_bytes = sum(sizes[o] for o in requests)
    uniq_bytes = sum(sizes[o] for o in counts)
    return dict(
        size_distribution=(
            f"lognormal(median {p['median']} B, sigma {p['sigma']}) w.p. {1 - p['tail_share']:g}, "
            f"Pareto(min {p['tail_min']} B, shape {p['tail_alpha']}) cut at {p['max_size']} B "
            f"w.p. {p['tail_share']:g}"
        ),
        size_mean_expected=round(mixture_mean(p)),
        size_mean_catalogue=round(sum(sizes) / len(sizes)),
        size_median_catalogue=cat[len(cat) // 2],
        size_p99_catalogue=cat[min(len(cat) - 1, int(len(cat) * 0.99))],
        size_max_catalogue=cat[-1],
        requests=len(requests),
        unique_objects=uniq,
        one_hit_objects=once,
        one_hit_share_of_unique=round(once / uniq, 4) if uniq else 0,
        request_bytes=req_bytes,
        unique_bytes=uniq_bytes,
        compulsory_object_hit_ceiling=round(1 - uniq / len(requests), 6),
        compulsory_byte_hit_ceiling=round(1 - uniq_bytes / req_bytes, 6),
    )


def write_trace(path, p, sizes, requests):
    header = dict(params=p, summary=summarize(p, sizes, requests))
    with open(path, "w") as f:
        f.write("# sepia-trace " + json.dumps(header) + "\n")
        f.writelines(f"{o} {sizes[o]}\n" for o in requests)
    return header


def read_trace(path):
    """Returns (header, requests, sizes): requests a list of ids, sizes a dict id -> bytes."""
    requests, sizes = [], {}
    with open(path) as f:
        first = f.readline()
        if not first.startswith("# sepia-trace "):
            sys.exit(f"{path}: not a sepia trace")
        header = json.loads(first[len("# sepia-trace "):])
        for line in f:
            oid, size = line.split()
            oid = int(oid)
            requests.append(oid)
            sizes[oid] = int(size)
    return header, requests, sizes


def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="trace file to write")
    ap.add_argument("--requests", "-n", type=int, help=f"N (default {DEFAULTS['requests']})")
    ap.add_argument("--objects", "-m", type=int, help=f"M (default {DEFAULTS['objects']})")
    ap.add_argument("--alpha", type=float, help=f"Zipf exponent (default {DEFAULTS['alpha']})")
    ap.add_argument("--one-hit", type=float, dest="one_hit",
                    help=f"share of the M objects requested exactly once (default {DEFAULTS['one_hit']})")
    ap.add_argument("--seed", type=int, help=f"random seed (default {DEFAULTS['seed']})")
    ap.add_argument("--median", type=int, help="lognormal median size, bytes")
    ap.add_argument("--sigma", type=float, help="lognormal shape")
    ap.add_argument("--tail-share", type=float, dest="tail_share", help="share of objects in the Pareto tail")
    ap.add_argument("--tail-min", type=int, dest="tail_min", help="Pareto scale, bytes")
    ap.add_argument("--tail-alpha", type=float, dest="tail_alpha", help="Pareto shape")
    ap.add_argument("--max-size", type=int, dest="max_size", help="largest object, bytes")
    a = vars(ap.parse_args())
    out = a.pop("out")
    p, sizes, requests = generate(**a)
    h = write_trace(out, p, sizes, requests)
    print_summary(h)


def print_summary(h):
    s = h["summary"]
    print(f"trace: {s['requests']} requests, {s['unique_objects']} unique objects "
          f"({s['one_hit_objects']} requested once, {s['one_hit_share_of_unique']:.0%}); "
          f"Zipf alpha {h['params']['alpha']}, seed {h['params']['seed']}")
    print(f"sizes: {s['size_distribution']}")
    print(f"       mean {human(s['size_mean_expected'])} expected, {human(s['size_mean_catalogue'])} in the "
          f"catalogue; median {human(s['size_median_catalogue'])}, p99 {human(s['size_p99_catalogue'])}, "
          f"max {human(s['size_max_catalogue'])}")
    print(f"bytes: {human(s['request_bytes'])} requested, working set {human(s['unique_bytes'])}; "
          f"compulsory-miss ceiling: object {s['compulsory_object_hit_ceiling']:.4f}, "
          f"byte {s['compulsory_byte_hit_ceiling']:.4f}")


if __name__ == "__main__":
    main()
