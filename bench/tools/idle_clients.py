#!/usr/bin/env python3
"""Open N keep-alive connections to a proxy, send one GET on each, read each full response,
then hold every connection open and idle until SIGTERM.

    idle_clients.py --port P --path /1k --n 10000 --ready-file F

When all connections have been served (or failed), a JSON line {"ok", "failed", "seconds"} is
written to the ready file; run.sh then measures the proxy's RSS growth per held connection and
runs wrk against it to show the other clients are still served at full speed. Connections are
opened in batches so the proxy's listen backlog never overflows.
"""
import argparse
import json
import os
import selectors
import signal
import socket
import sys
import time


class Conn:
    __slots__ = ("sock", "buf", "sent")

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.sent = False


def response_complete(buf):
    """True once a whole response (head + Content-Length body or last chunk) is in buf."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return False
    head = buf[:end].lower()
    body = len(buf) - end - 4
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip() == b"content-length":
            return body >= int(value.strip())
        if name.strip() == b"transfer-encoding" and b"chunked" in value:
            return buf.endswith(b"0\r\n\r\n")
    return False


def serve_batch(port, request, count, timeout):
    """Open `count` connections, one request each; return (held sockets, failures)."""
    sel = selectors.DefaultSelector()
    held, failed = [], 0
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        sel.register(s, selectors.EVENT_WRITE, Conn(s))
    deadline = time.monotonic() + timeout
    pending = count
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1.0):
            conn = key.data
            try:
                if not conn.sent:
                    err = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise OSError(err, os.strerror(err))
                    conn.sock.sendall(request)
                    conn.sent = True
                    sel.modify(conn.sock, selectors.EVENT_READ, conn)
                    continue
                chunk = conn.sock.recv(65536)
                if not chunk:
                    raise OSError("closed before the response ended")
                conn.buf += chunk
                if not response_complete(conn.buf):
                    continue
                sel.unregister(conn.sock)
                conn.buf = b""
                held.append(conn.sock)
            except OSError:
                sel.unregister(conn.sock)
                conn.sock.close()
                failed += 1
            pending -= 1
    for key in list(sel.get_map().values()):
        key.fileobj.close()
        failed += 1
    sel.close()
    return held, failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--path", default="/1k")
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per batch")
    ap.add_argument("--ready-file", required=True)
    args = ap.parse_args()

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    request = (
        f"GET {args.path} HTTP/1.1\r\nHost: 127.0.0.1:{args.port}\r\n"
        "User-Agent: bench-idle\r\n\r\n"
    ).encode()
    started = time.monotonic()
    held, failed = [], 0
    while len(held) + failed < args.n and not stop:
        count = min(args.batch, args.n - len(held) - failed)
        got, bad = serve_batch(args.port, request, count, args.timeout)
        held += got
        failed += bad
    report = {"ok": len(held), "failed": failed, "seconds": round(time.monotonic() - started, 2)}
    with open(args.ready_file + ".tmp", "w") as f:
        f.write(json.dumps(report) + "\n")
    os.rename(args.ready_file + ".tmp", args.ready_file)
    while not stop:
        signal.pause()
    for s in held:
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
