#!/usr/bin/env python3
"""What a request waiting on a slow origin costs Sepia in memory, per request.

    pending_memory.py --bin NAME=PATH [--bin NAME=PATH ...] [--peer haproxy|nginx ...]
                      [--n 2000] [--reps 3] [--port-base 29400]

One asyncio process plays both ends: an origin that reads each request head and answers only
when told to, and N clients that each open a connection to Sepia and send one GET for a URL
of their own (a cache miss, so every request reaches the origin), after a first request on
the same connection that the cache answers (one of the warm-up's objects). Each binary in
turn (one worker, pinned to CPU 1, bench/peers/sepia.toml with a 64 MiB cache): warmed with 200
requests the origin answers at once, its RSS read (/proc, VmRSS) one second later; then the N
requests are sent and held at the origin, the RSS read again one second after the origin has
received them all; then the origin answers and every response is checked (200, its 1 KiB
body). Printed per binary and repetition: (RSS held - RSS before) / N, and the median.
`--peer` measures haproxy or nginx the same way (bench/peers/haproxy.cfg with its cache,
bench/peers/nginxcache.conf; one worker each, the RSS summed over nginx's master and worker).
Only 127.0.0.1 is contacted.
"""
import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time

from proc import rss_bytes, tree

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BODY = b"x" * 1024


class Origin:
    """Answers every request with 200 and a 1 KiB body, at once or when `release` is set."""

    def __init__(self):
        self.hold = False
        self.release = asyncio.Event()
        self.pending = 0

    async def serve(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if self.hold and b" /pending-" in head:
                    self.pending += 1
                    await self.release.wait()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n"
                             b"Cache-Control: max-age=3600\r\n\r\n" + BODY)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def get(port, *paths):
    """GETs each path in turn on one keep-alive connection; whether every answer was right."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    ok = True
    for path in paths:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")))
        body = await reader.readexactly(length)
        ok = ok and head.startswith(b"HTTP/1.1 200") and body == BODY
    writer.close()
    return ok


def render(template, out, port, origin_port, run):
    with open(f"{BENCH}/peers/{template}") as f:
        text = f.read()
    for key, value in (("@RUN@", run), ("@PORT@", port), ("@ORIGIN@", origin_port),
                       ("@CACHE_MB@", 64)):
        text = text.replace(key, str(value))
    with open(out, "w") as f:
        f.write(text)


def command(binary, port, origin_port, run):
    """How to start `binary` (a Sepia build, or `haproxy` / `nginx` for a peer) on `port`."""
    if binary == "haproxy":
        os.makedirs(f"{run}/haproxy", exist_ok=True)
        render("haproxy.cfg", f"{run}/haproxy/haproxy.cfg", port, origin_port, run)
        return ["haproxy", "-db", "-f", f"{run}/haproxy/haproxy.cfg"]
    if binary == "nginx":
        # nginx's worker runs as nobody: the private temporary directory must let it in.
        os.chmod(run, 0o755)
        os.makedirs(f"{run}/nginxcache/tmp", exist_ok=True)
        render("nginxcache.conf", f"{run}/nginxcache/nginx.conf", port, origin_port, run)
        return ["nginx", "-p", f"{run}/nginxcache/", "-c", f"{run}/nginxcache/nginx.conf",
                "-g", "daemon off;"]
    conf = f"{run}/sepia-{port}.toml"
    render("sepia.toml", conf, port, origin_port, run)
    return [binary, "--config", conf]


async def measure(binary, port, origin, origin_port, n, rep, run):
    proc = subprocess.Popen(["taskset", "-c", "1", *command(binary, port, origin_port, run)],
                            env=dict(os.environ, SEPIA_LOG="error"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                if await get(port, "/warm-0"):
                    break
            except OSError:
                await asyncio.sleep(0.05)
        else:
            raise RuntimeError(f"{binary} did not answer on port {port} (exit code {proc.poll()})")
        origin.hold = False
        for i in range(200):
            await get(port, f"/warm-{rep}-{i}")
        await asyncio.sleep(1)
        pids = tree(proc.pid)  # nginx's master and worker
        before = rss_bytes(pids)
        origin.hold, origin.pending = True, 0
        origin.release = asyncio.Event()
        tasks = []
        for i in range(n):
            # A first request answered at once, then the one held: the connection has served
            # a request before, as a keep-alive client's has. The first is a hit on an object
            # the warm-up stored: a new URL would be stored too, and each stored object (its
            # body, head and index entries) would be counted as part of a waiting request.
            name = f"{rep}-{time.time()}-{i}"
            tasks.append(asyncio.create_task(get(port, f"/warm-{rep}-{i % 200}",
                                                 f"/pending-{name}")))
            if i % 200 == 199:
                await asyncio.sleep(0.05)  # the listen backlog never overflows
        deadline = time.time() + 60
        while origin.pending < n and time.time() < deadline:
            await asyncio.sleep(0.05)
        if origin.pending < n:
            raise RuntimeError(f"only {origin.pending} of {n} requests reached the origin")
        await asyncio.sleep(1)
        held = rss_bytes(pids)
        origin.release.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        bad = sum(1 for r in results if r is not True)
        if bad:
            raise RuntimeError(f"{bad} of {n} responses were not the origin's 200")
        return (held - before) / n
    finally:
        proc.terminate()
        proc.wait()


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--peer", action="append", default=[], choices=["haproxy", "nginx"])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--port-base", type=int, default=29400)
    a = ap.parse_args()
    # Connections the origin still holds when the run ends are cancelled: not worth a trace.
    asyncio.get_running_loop().set_exception_handler(
        lambda loop, ctx: None if isinstance(ctx.get("exception"), asyncio.CancelledError)
        else loop.default_exception_handler(ctx))
    bins = [b.split("=", 1) for b in a.bin] + [[p, p] for p in a.peer]
    if not bins:
        ap.error("nothing to measure: give --bin or --peer")
    origin = Origin()
    server = await asyncio.start_server(origin.serve, "127.0.0.1", a.port_base, backlog=4096)
    per = {name: [] for name, _ in bins}
    with tempfile.TemporaryDirectory() as run:
        for rep in range(a.reps):
            for k, (name, path) in enumerate(bins):
                b = await measure(path, a.port_base + 1 + k, origin, a.port_base, a.n, rep, run)
                per[name].append(b)
                print(f"rep {rep + 1} {name}: {b:,.0f} B per pending request", flush=True)
    server.close()
    for name, values in per.items():
        print(f"{name}: median {statistics.median(values):,.0f} B per pending request "
              f"({', '.join(f'{v:,.0f}' for v in values)}), {a.n} held")


if __name__ == "__main__":
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sys.exit(asyncio.run(main()))
