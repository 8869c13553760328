#!/usr/bin/env python3
"""Open N keep-alive TLS connections to a proxy, send one GET on each and read its response,
then hold every connection open and idle until SIGTERM (bench/tls.sh's idle case).

    idle_tls_clients.py --port P --path /1k --n 10000 --ready-file F

Connections are opened one after another (each handshake and response completes before the
next), so the proxy's backlog never overflows. When done, a JSON line {"ok", "failed",
"seconds"} is written to the ready file.
"""
import argparse
import json
import os
import signal
import socket
import ssl
import time


def one(ctx, port, request):
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    s = ctx.wrap_socket(raw, server_hostname="localhost")
    s.sendall(request)
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise OSError("closed")
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            raise OSError("closed mid-body")
        body += chunk
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--path", default="/1k")
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--ready-file", required=True)
    args = ap.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    request = f"GET {args.path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
    started = time.monotonic()
    held, failed = [], 0
    while len(held) + failed < args.n and not stop:
        try:
            held.append(one(ctx, args.port, request))
        except OSError:
            failed += 1
    report = {"ok": len(held), "failed": failed, "seconds": round(time.monotonic() - started, 2)}
    with open(args.ready_file + ".tmp", "w") as f:
        f.write(json.dumps(report) + "\n")
    os.rename(args.ready_file + ".tmp", args.ready_file)
    while not stop:
        signal.pause()


if __name__ == "__main__":
    main()
