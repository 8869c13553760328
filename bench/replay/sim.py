#!/usr/bin/env python3
"""Cache simulations on a trace, for the replayer's baselines.

Every policy keeps objects up to a byte `capacity`; an object is charged `charge(size)` bytes
(by default what Sepia's memory store charges: body + 1 KiB of bookkeeping + head and key, see
`sepia_charge`), and one whose charge exceeds `max_object` or the capacity is never stored.
Every request counts, first-time misses included. Policies:

* `lru`      least recently used; a miss inserts, evicting from the cold end until it fits.
* `s3fifo`   S3-FIFO as Sepia's store implements it (crates/store/src/s3fifo.rs), unsharded:
             a small FIFO of 10 % of the capacity, a main FIFO with reinsertion, 2-bit
             frequencies, a ghost queue of evicted hashes bounded by 90 % of the capacity in
             bytes.
* `s3fifo32` the same, 32 shards as Sepia's memory store runs it: an object lives in the shard
             its hash picks, each shard an S3-FIFO of capacity/32, and room is made by evicting
             from the shard holding the most bytes. This one matches Sepia's measured ratios.
* `belady`   Bélády's furthest-next-use rule with bypass: on a miss, an object never requested
             again is not stored, otherwise objects are evicted furthest next use first (the
             newcomer too, if it is the furthest). Optimal for equal sizes; with sizes it is a
             strong reference, not a proven bound.
* `infinite` unbounded capacity: the compulsory-miss ceiling (1 - unique/requests).

`python3 sim.py --self-test` checks the policies against hand-computed traces.
"""

import heapq
import sys
from collections import OrderedDict, deque

OBJECT_OVERHEAD = 1024  # crates/store/src/object.rs OBJECT_OVERHEAD_BYTES
CHUNK_OVERHEAD = 32  # CHUNK_OVERHEAD_BYTES, per body chunk
HEAD_AND_KEY = 200  # the origin's head as stored (~150 B) and the cache key (~40 B)
CHUNK = 16 * 1024  # a chunk per origin read, at most ~16 KiB on loopback (an estimate)


def sepia_charge(size):
    """Bytes Sepia's memory store charges an object with a body of `size` bytes (estimate)."""
    return size + OBJECT_OVERHEAD + HEAD_AND_KEY + CHUNK_OVERHEAD * max(1, -(-size // CHUNK))


def plain_charge(size):
    return size


class Result:
    def __init__(self):
        self.requests = self.hits = self.bytes = self.hit_bytes = 0

    def add(self, hit, size):
        self.requests += 1
        self.bytes += size
        if hit:
            self.hits += 1
            self.hit_bytes += size

    @property
    def object_ratio(self):
        return self.hits / self.requests if self.requests else 0.0

    @property
    def byte_ratio(self):
        return self.hit_bytes / self.bytes if self.bytes else 0.0

    def __repr__(self):
        return f"hits {self.hits}/{self.requests} ({self.object_ratio:.4f}), bytes {self.byte_ratio:.4f}"


def lru(requests, sizes, capacity, max_object=None, charge=sepia_charge):
    limit = min(capacity, max_object or capacity)
    cache, used, res = OrderedDict(), 0, Result()
    for oid in requests:
        size = sizes[oid]
        if oid in cache:
            cache.move_to_end(oid)
            res.add(True, size)
            continue
        res.add(False, size)
        c = charge(size)
        if c > limit:
            continue
        while used + c > capacity:
            _, old = cache.popitem(last=False)
            used -= old
        cache[oid] = c
        used += c
    return res


class S3FifoShard:
    """One S3-FIFO instance (crates/store/src/s3fifo.rs and ghost.rs) of `capacity` bytes."""

    def __init__(self, capacity):
        self.small_target = capacity // 10
        self.ghost_cap = capacity - self.small_target
        # oid -> [charge, freq, queue 's' or 'm']; each live oid is in exactly one queue.
        self.live, self.small, self.main = {}, deque(), deque()
        self.used = {"s": 0, "m": 0}
        self.ghost, self.ghost_live, self.ghost_seq, self.ghost_bytes = deque(), {}, 0, 0

    def bytes(self):
        return self.used["s"] + self.used["m"]

    def _remember(self, oid, c):
        if c > self.ghost_cap:
            return  # as ghost.rs: an object larger than the ghost queue is not remembered
        self.ghost_seq += 1
        self.ghost_live[oid] = self.ghost_seq
        self.ghost.append((oid, self.ghost_seq, c))
        self.ghost_bytes += c
        while self.ghost_bytes > self.ghost_cap and self.ghost:
            old, seq, oc = self.ghost.popleft()
            self.ghost_bytes -= oc
            if self.ghost_live.get(old) == seq:
                del self.ghost_live[old]

    def evict_one(self):
        """Evicts one object by the S3-FIFO rules: (oid, earned), where earned means it left
        the main queue (what Sepia's disk tier calls earning a disk place); None when empty."""
        while True:
            from_small = self.small and (self.used["s"] >= self.small_target or not self.main)
            q = self.small if from_small else self.main
            if not q:
                return None
            oid = q.popleft()
            entry = self.live[oid]
            c, freq, _ = entry
            if from_small:
                if freq >= 1:  # hit while in small: promote to main
                    entry[1], entry[2] = 0, "m"
                    self.used["s"] -= c
                    self.used["m"] += c
                    self.main.append(oid)
                    continue
                self._remember(oid, c)
            elif freq > 0:  # main: reinsert with one less
                entry[1] = freq - 1
                self.main.append(oid)
                continue
            self.used[entry[2]] -= c
            del self.live[oid]
            return oid, entry[2] == "m"

    def hit(self, oid):
        entry = self.live.get(oid)
        if entry is None:
            return False
        entry[1] = min(entry[1] + 1, 3)
        return True

    def insert(self, oid, c):
        q = "m" if self.ghost_live.pop(oid, None) is not None else "s"
        self.live[oid] = [c, 0, q]
        self.used[q] += c
        (self.main if q == "m" else self.small).append(oid)


def s3fifo(requests, sizes, capacity, max_object=None, charge=sepia_charge, shards=1, seed=0):
    """S3-FIFO; with `shards` > 1 as Sepia's memory store runs it: each object in the shard
    its (random) hash picks, each shard an S3-FIFO of capacity/shards, and room made by
    evicting from whichever shard holds the most bytes (crates/store/src/memory.rs)."""
    limit = min(capacity, max_object or capacity)
    parts = [S3FifoShard(capacity // shards) for _ in range(shards)]
    salt = seed * 0x9E3779B97F4A7C15
    res, total = Result(), 0
    for oid in requests:
        size = sizes[oid]
        home = parts[hash((salt, oid)) % shards] if shards > 1 else parts[0]
        if home.hit(oid):
            res.add(True, size)
            continue
        res.add(False, size)
        c = charge(size)
        if c > limit:
            continue
        while total + c > capacity:
            victim = max(parts, key=S3FifoShard.bytes) if shards > 1 else home
            before = victim.bytes()
            if victim.evict_one() is None:
                break
            total -= before - victim.bytes()
        home.insert(oid, c)
        total += c
    return res


def s3fifo_sharded(requests, sizes, capacity, max_object=None, charge=sepia_charge, seed=0):
    return s3fifo(requests, sizes, capacity, max_object, charge, shards=32, seed=seed)


def next_uses(requests):
    """next_use[i] = index of the next request for requests[i], or len(requests) if none."""
    n = len(requests)
    nxt, seen = [n] * n, {}
    for i in range(n - 1, -1, -1):
        oid = requests[i]
        nxt[i] = seen.get(oid, n)
        seen[oid] = i
    return nxt


def belady(requests, sizes, capacity, max_object=None, charge=sepia_charge, nxt=None):
    limit = min(capacity, max_object or capacity)
    n = len(requests)
    nxt = nxt or next_uses(requests)
    cache, used, heap, res = {}, 0, [], Result()  # cache: oid -> (next use, charge)
    for i, oid in enumerate(requests):
        size = sizes[oid]
        hit = oid in cache
        res.add(hit, size)
        if hit:
            c = cache[oid][1]
        else:
            c = charge(size)
            if c > limit or nxt[i] == n:
                continue
            used += c
        cache[oid] = (nxt[i], c)
        heapq.heappush(heap, (-nxt[i], oid))
        if nxt[i] == n:  # a hit that is never requested again: drop it now
            del cache[oid]
            used -= c
        while used > capacity:
            neg, victim = heapq.heappop(heap)
            if cache.get(victim, (None,))[0] != -neg:
                continue  # stale heap entry
            used -= cache.pop(victim)[1]
    return res


def infinite(requests, sizes, *_args, **_kw):
    seen, res = set(), Result()
    for oid in requests:
        res.add(oid in seen, sizes[oid])
        seen.add(oid)
    return res


POLICIES = {"lru": lru, "s3fifo": s3fifo, "s3fifo32": s3fifo_sharded, "belady": belady,
            "infinite": infinite}


def self_test():
    """Hand-computed traces; unit charge (charge = size) so the arithmetic is visible."""
    ok = True

    def check(name, got, hits, hit_bytes=None):
        nonlocal ok
        good = got.hits == hits and (hit_bytes is None or got.hit_bytes == hit_bytes)
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} {name}: {got}"
              + ("" if good else f"  (expected {hits} hits, {hit_bytes} hit bytes)"))

    ones = {k: 1 for k in "abcdefg"}
    # LRU, capacity 3, unit sizes: a b c a d b e a b c
    #   a m, b m, c m, a H (order b c a), d m evicts b (c a d), b m evicts c (a d b),
    #   e m evicts a (d b e), a m evicts d (b e a), b H (e a b), c m evicts e (a b c)
    check("lru cap 3", lru(list("abcadbeabc"), ones, 3, charge=plain_charge), 2)
    # Bélády, capacity 3, same trace: a b c m, a H, d: next uses b@5 a@7 c@9 d@never ->
    #   d bypassed; b H, e bypassed (never again), a H, b H, c H  -> 5 hits
    check("belady cap 3", belady(list("abcadbeabc"), ones, 3, charge=plain_charge), 5)
    # Sizes: a=5 b=3 c=2, capacity 6, LRU: a m, b m (evicts a: 5+3>6), c m (b c = 5),
    #   b H, a m (evicts c then b: 5 alone), b m (evicts a), c m (b c), c H -> 2 hits, 2+3 bytes
    sz = {"a": 5, "b": 3, "c": 2}
    check("lru sized cap 6", lru(list("abcbabcc"), sz, 6, charge=plain_charge), 2, 5)
    # Too big for max_object: never stored, never a hit.
    check("lru max_object", lru(list("aaaa"), {"a": 10}, 100, max_object=9, charge=plain_charge), 0)
    # Infinite: compulsory misses only.
    check("infinite", infinite(list("abcadbeabc"), ones), 10 - 5)
    # S3-FIFO, capacity 10 (small target 1, ghost 9), unit sizes. Scan of one-hit wonders
    #   with a hot object: 'h' is hit while in small, so it is promoted to main on its way
    #   out and survives a long scan; LRU of the same size loses it.
    trace = ["h", "h"] + [f"x{i}" for i in range(30)] + ["h"]
    sizes = {k: 1 for k in trace}
    check("s3fifo keeps a hot object through a scan", s3fifo(trace, sizes, 10, charge=plain_charge), 2)
    check("lru loses it", lru(trace, sizes, 10, charge=plain_charge), 1)
    # S3-FIFO ghost: 'g' requested once, evicted from small by a scan (ghost remembers it),
    #   requested again -> miss, admitted to main; a further scan does not evict it (the scan
    #   passes through small), so its third request hits.
    trace = ["g"] + [f"y{i}" for i in range(12)] + ["g"] + [f"z{i}" for i in range(20)] + ["g"]
    sizes = {k: 1 for k in trace}
    check("s3fifo ghost re-admits to main", s3fifo(trace, sizes, 10, charge=plain_charge), 1)
    # Every policy's hits <= Bélády's on a random trace with equal sizes; all <= infinite.
    import random
    rng = random.Random(7)
    trace = [rng.randrange(40) for _ in range(3000)]
    sizes = {k: 1 for k in range(40)}
    b = belady(trace, sizes, 10, charge=plain_charge).hits
    for name in ("lru", "s3fifo"):
        h = POLICIES[name](trace, sizes, 10, charge=plain_charge).hits
        good = h <= b
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} {name} {h} <= belady {b} (equal sizes, cap 10)")
    inf = infinite(trace, sizes).hits
    ok &= b <= inf
    print(f"{'ok  ' if b <= inf else 'FAIL'} belady {b} <= infinite {inf}")
    # A capacity holding everything reaches the ceiling under every policy.
    for name in ("lru", "s3fifo", "s3fifo32", "belady"):
        h = POLICIES[name](trace, sizes, 40, charge=plain_charge).hits
        ok &= h == inf
        print(f"{'ok  ' if h == inf else 'FAIL'} {name} with room for all: {h} == {inf}")
    print("self-test passed" if ok else "self-test FAILED")
    return ok


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(0 if self_test() else 1)
    sys.exit("usage: sim.py --self-test   (the replayer imports this module)")
