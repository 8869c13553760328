#!/usr/bin/env python3
"""Where a replay's misses differ from LRU's (issue 21: memory + disk below LRU?).

    misses.py --trace T --log ACCESS_LOG --capacity 288MiB [--memory 32MiB]

Replays the trace through the LRU simulation of `sim.py` (same capacity and per-object
charge as the replayer's baseline) beside the result codes of one real run (the JSON access
log replay.py leaves in its run directory: the last run made), request by request in log
order, and sorts the requests where the two disagree by what the object's history was at
that request:

* `2nd request`: the object had been asked for once before. Sepia writes an object to disk
  only when it leaves memory having earned it (a hit while in memory) or leaves unearned a
  second time within the disk ghost's horizon, so a second request that comes after memory
  evicted the first copy is a miss by design; LRU keeps every object it saw.
* `3rd+ request`: asked for twice or more before (it could have earned a place), by how many
  bytes of distinct objects were requested since its last request (its reuse distance) in
  multiples of memory's size.

Also counts, for Sepia's misses LRU also missed, and for Sepia's hits LRU missed (where
frequency beats recency). Log order is the order the clients' requests were answered, within
a few requests of trace order.
"""
import argparse, json, os, re, sys
from collections import Counter, OrderedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim  # noqa: E402
from tracegen import read_trace  # noqa: E402
from replay import parse_size, HIT_CODES  # noqa: E402


def is_hit(code):
    return code.endswith("_HIT") or code in HIT_CODES


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--capacity", type=parse_size, required=True)
    ap.add_argument("--memory", type=parse_size, default=None)
    a = ap.parse_args()
    _, _, sizes = read_trace(a.trace)
    log = []
    with open(a.log, errors="replace") as f:
        for line in f:
            rec = json.loads(line)
            m = re.search(r"/o/(\d+)$", rec.get("url") or "")
            if m:
                log.append((int(m.group(1)), rec["result"]))
    cap, mem = a.capacity, a.memory or a.capacity
    lru, used = OrderedDict(), 0
    seen = Counter()
    # reuse distance: bytes of the distinct objects requested since the object's last request
    # (a Fenwick tree over request positions holding each object's charge at its last one)
    n_req = len(log)
    tree = [0] * (n_req + 1)

    def add(i, v):
        i += 1
        while i <= n_req:
            tree[i] += v
            i += i & -i

    def prefix(i):  # sum of positions < i
        t = 0
        while i > 0:
            t += tree[i]
            i -= i & -i
        return t

    last = {}
    out = Counter()
    out_bytes = Counter()
    total_bytes = 0
    codes = Counter()
    for pos, (oid, code) in enumerate(log):
        size = sizes[oid]
        c = sim.sepia_charge(size)
        depth = None
        if oid in last:
            depth = prefix(pos) - prefix(last[oid] + 1)
            add(last[oid], -c)
        add(pos, c)
        last[oid] = pos
        lru_hit = oid in lru
        if lru_hit:
            lru.move_to_end(oid)
        elif c <= cap:
            lru[oid] = None
            used += c
            while used > cap:
                k, _ = lru.popitem(last=False)
                used -= sim.sepia_charge(sizes[k])
        s_hit = is_hit(code)
        total_bytes += size
        codes[code] += 1
        n = seen[oid]
        seen[oid] += 1
        if lru_hit and not s_hit:
            if n == 1:
                kind = "LRU hit, Sepia miss: 2nd request"
            else:
                band = min(int(depth / mem), 8) if depth is not None else -1
                kind = f"LRU hit, Sepia miss: 3rd+ request, reuse distance {band}-{band + 1}x memory" if band < 8 else "LRU hit, Sepia miss: 3rd+ request, reuse distance >= 8x memory"
            kinds = (kind, "LRU hit, Sepia miss (all)")
        elif s_hit and not lru_hit:
            kinds = ("Sepia hit, LRU miss",)
        elif s_hit:
            kinds = ("both hit",)
        else:
            kinds = ("both miss",)
        for k in kinds:
            out[k] += 1
            out_bytes[k] += size
    total = len(log)
    print(f"{total} requests; Sepia codes {dict(codes)}")
    print(f"  {'':<75} {'requests':>8}  {'share':>6}  {'of bytes':>8}")
    for k in sorted(out):
        print(f"  {k:<75} {out[k]:>8}  {100 * out[k] / total:5.1f} %  {100 * out_bytes[k] / total_bytes:6.1f} %")


if __name__ == "__main__":
    main()
