#!/usr/bin/env python3
"""Simulates Sepia's memory + disk tiers on a trace, for choosing the disk's admission rule.

Memory is S3-FIFO×32 as `sim.py` models it; an object it evicts goes to the disk by the rule
under test, and a memory miss that the disk holds is a disk hit, promoted back into memory by
the same admission as a fill, but for bodies of `sendfile_min` (64 KiB) or more, which are
sent from their segment (the proxy passes `cache.sendfile_min` as the store's
`segment_body_min`). `--promote earned` tries promoting a disk hit only from its record's
second hit since written: +0.14 points here at 64 + 384 MiB, which the replayer did not
reproduce (bench/RESULTS.md, 2026-11-27, eleventh stop). The disk is a log of 16 MiB segments
in its size less the checkpoint on disk and room for the next, which follows the records'
average size (`DiskConfig::next_checkpoint_room`; `size / 32` before the twelfth stop)
(crates/store/src/disk): records are appended, the oldest segment is reclaimed when a new one
would not fit, and its records hit since written are re-appended (FIFO with re-insertion).
Rules (`Admission` in crates/store/src/disk/config.rs):

* `earned` objects evicted from memory's main queue, and those evicted unearned a second time
           within the disk ghost's horizon (memory + disk bytes, two generations:
           crates/store/src/disk_ghost.rs);
* `fill`   the same, plus every other eviction while another segment would open beside the
           ones held (the one being written counted whole) without reclaiming, as
           `has_unused_room` in crates/store/src/disk/log.rs;
* `all`    every eviction (no admission), for the write volume it costs.

Prints object and byte hit ratios and bytes written per request beside LRU of the same total
size. The write queue's drops and the exact record sizes are not modelled (a record is the
body + 300 bytes); at the replayer's default trace this model is within 1 point of the
measured ratios (bench/RESULTS.md, 2026-11-27).

    tiered_sim.py [--requests N] [--objects M] [--pairs 16:128,32:256,...] [--rules fill,earned]
                  [--promote earned|every] [--seed S]
"""

import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim  # noqa: E402
import tracegen  # noqa: E402

MIB = 1 << 20
SEGMENT = 16 * MIB
RECORD_OVERHEAD = 300
SEGMENT_BODY_MIN = 64 * 1024  # cache.sendfile_min's default


class Disk:
    def __init__(self, size, rule, horizon):
        self.size = size
        self.rule = rule
        self.index = {}  # oid -> [segment, hit since written]
        self.segments = {}  # id -> [(oid, record length)], oldest first (dicts keep order)
        self.sealed = {}  # id -> bytes
        self.active, self.active_end, self.next_id = None, 0, 0
        self.written = 0
        self.ghost = [set(), set()]
        self.ghost_bytes, self.ghost_half = 0, max(1, horizon // 2)

    def seen_again(self, oid, size):
        current, old = self.ghost
        if oid in current or oid in old:
            current.discard(oid)
            old.discard(oid)
            return True
        if self.ghost_bytes >= self.ghost_half:
            self.ghost = [set(), current]
            self.ghost_bytes = 0
        self.ghost[0].add(oid)
        self.ghost_bytes += size
        return False

    @property
    def capacity(self):
        """The size less the checkpoint's reserve and the meta file, as `data_capacity`."""
        written = sum(self.sealed.values()) + self.active_end
        average = max(64, (written + 64 * 4096) // (len(self.index) + 64))
        full = 17 * (self.size // average)
        room = max(16 << 10, 3 * (4096 + max(full, 17 * len(self.index))) // 2)
        on_disk = 4096 + 17 * len(self.index)  # the last checkpoint, about the index now
        return self.size - on_disk - room - 4096

    @staticmethod
    def segment_limit(length):
        return max(SEGMENT, length)

    def has_unused_room(self, length):
        held = sum(self.sealed.values()) + (SEGMENT if self.active is not None else 0)
        return held + self.segment_limit(length) <= self.capacity

    def append(self, oid, length):
        """Places a record, rotating segments as needed; records a reclaim took out are
        re-appended afterwards, as the writer's `reinsert` list is."""
        hot = []
        if self.active is None or self.active_end + length > self.segment_limit(length):
            if self.active is not None:
                self.sealed[self.active] = self.active_end
                self.active = None
            while sum(self.sealed.values()) + self.segment_limit(length) > self.capacity:
                hot += self.reclaim()
            self.active, self.active_end = self.next_id, 0
            self.next_id += 1
            self.segments[self.active] = []
        self.segments[self.active].append((oid, length))
        self.active_end += length
        self.index[oid] = [self.active, False]
        self.written += length
        for oid, length in hot:
            if oid not in self.index:
                self.append(oid, length)

    def reclaim(self):
        """Drops the oldest sealed segment; returns its records hit since written."""
        sid = next(iter(self.sealed))
        del self.sealed[sid]
        hot = []
        for oid, length in self.segments.pop(sid):
            entry = self.index.get(oid)
            if entry is None or entry[0] != sid:
                continue
            del self.index[oid]
            if entry[1] and length <= SEGMENT // 2:
                hot.append((oid, length))
        return hot

    def lookup(self, oid):
        """None when the disk does not hold `oid`, else whether its record was hit before."""
        entry = self.index.get(oid)
        if entry is None:
            return None
        before, entry[1] = entry[1], True
        return before

    def demote(self, oid, size, earned):
        if oid in self.index:
            return  # the disk copy is this object (read from disk, or written already)
        length = size + RECORD_OVERHEAD
        earned = earned or self.seen_again(oid, size)
        if earned or self.rule == "all" or (self.rule == "fill" and self.has_unused_room(length)):
            self.append(oid, length)


def run(requests, sizes, memory, disk_size, rule, shards=32, seed=1, max_object=16 * MIB,
        promote="every"):
    parts = [sim.S3FifoShard(memory // shards) for _ in range(shards)]
    disk = Disk(disk_size, rule, memory + disk_size)
    res, total = sim.Result(), 0
    salt = seed * 0x9E3779B97F4A7C15
    for oid in requests:
        size = sizes[oid]
        home = parts[hash((salt, oid)) % shards]
        if home.hit(oid):
            res.add(True, size)
            continue
        hit_before = disk.lookup(oid)
        on_disk = hit_before is not None
        res.add(on_disk, size)
        charge = sim.sepia_charge(size)
        # A large disk body is sent from its segment, not promoted (tiered.rs, "Large
        # bodies"); with `promote="earned"`, a small one only from its second hit.
        if charge > min(memory, max_object) or (on_disk and size >= SEGMENT_BODY_MIN):
            continue
        if on_disk and promote == "earned" and not hit_before:
            continue
        while total + charge > memory:
            victim = max(parts, key=sim.S3FifoShard.bytes)
            before = victim.bytes()
            out = victim.evict_one()
            if out is None:
                break
            total -= before - victim.bytes()
            disk.demote(out[0], sizes[out[0]], out[1])
        home.insert(oid, charge)
        total += charge
    return res, disk.written


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--objects", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--pairs", default="16:128,32:256,64:384,64:1024",
                    help="memory:disk sizes in MiB, comma-separated")
    ap.add_argument("--rules", default="fill,earned,all")
    ap.add_argument("--promote", default="every", choices=["every", "earned"],
                    help="promote every small disk hit (the store's rule), or only from its "
                         "record's second hit since written (an experiment)")
    a = ap.parse_args()
    _, sizes, requests = tracegen.generate(requests=a.requests, objects=a.objects, seed=a.seed)
    print(f"trace: {a.requests} requests over {a.objects} objects, seed {a.seed}")
    print("| memory + disk | rule | object | byte | LRU object | LRU byte | written per request |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for pair in a.pairs.split(","):
        mem, disk = (int(x) * MIB for x in pair.split(":"))
        lru = sim.lru(requests, sizes, mem + disk, max_object=16 * MIB)
        for rule in a.rules.split(","):
            r, written = run(requests, sizes, mem, disk, rule, promote=a.promote)
            print(f"| {mem // MIB} + {disk // MIB} MiB | {rule} | {100 * r.object_ratio:.2f} % "
                  f"| {100 * r.byte_ratio:.2f} % | {100 * lru.object_ratio:.2f} % "
                  f"| {100 * lru.byte_ratio:.2f} % | {written / len(requests):.0f} B |", flush=True)


if __name__ == "__main__":
    main()
