#!/usr/bin/env python3
"""What the block device under a directory did while this ran: reads per second, KiB per
read, how long each read spent in the block layer (from /sys/dev/block/M:m/stat), and how many
reads the device's driver held at once on average (sampled from .../inflight every 20 ms).

bench/disk.sh cold runs it around fio's and Sepia's cold runs (issue 21): the same device gave
fio 11-22 reads in flight at one moment and 32-46 at another, and the hits/s a proxy reaches
from a cold cache follow what the device holds, not only the proxy's CPU.

Usage: device_depth.py --path DIR [--name CASE]   (runs until SIGTERM or SIGINT, then prints
one JSON line)
"""
import argparse
import json
import os
import signal
import time


def device_dir(path):
    st = os.stat(path)
    return f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"


def read_stat(dev):
    # Documentation/block/stat.rst: reads completed, reads merged, sectors read, ms reading, ...
    f = open(f"{dev}/stat").read().split()
    return int(f[0]), int(f[2]), int(f[3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--path", required=True)
    ap.add_argument("--name", default="")
    args = ap.parse_args()
    dev = device_dir(args.path)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    t0, s0 = time.monotonic(), read_stat(dev)
    depth = []
    while not stop:
        depth.append(int(open(f"{dev}/inflight").read().split()[0]))
        time.sleep(0.02)
    t1, s1 = time.monotonic(), read_stat(dev)
    reads = s1[0] - s0[0]
    out = {
        "case": f"device-{args.name}" if args.name else "device",
        "device": os.path.basename(os.path.realpath(dev)),
        "seconds": round(t1 - t0, 2),
        "reads_per_s": round(reads / max(t1 - t0, 1e-9)),
        "kib_per_read": round((s1[1] - s0[1]) / 2 / max(reads, 1), 1),
        "block_layer_ms_per_read": round((s1[2] - s0[2]) / max(reads, 1), 2),
        "driver_inflight_mean": round(sum(depth) / max(len(depth), 1), 1),
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
