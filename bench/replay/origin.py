#!/usr/bin/env python3
"""The replayer's origin: `GET /o/<id>` answers the object's body, of the size the trace says.

    origin.py --trace trace.txt --listen 127.0.0.1:PORT

* 200 with `Content-Length`, `Cache-Control: max-age=86400`, `Content-Type:
  application/octet-stream`, `Date`, and a body of deterministic bytes: `body(id, size)`, a
  slice of one 9 MiB pseudo-random pattern starting at an offset derived from the id, so a
  client can check what it got without the origin storing anything.
* `GET /stats` answers JSON `{"requests": R, "bytes": B}`: object requests served and body
  bytes sent since start (the replayer reads it before and after a run).
* unknown ids and paths: 404. HTTP/1.1 keep-alive; one thread per connection (Sepia keeps a
  few pooled connections per worker); the GIL is released while sending, so large bodies go
  at memcpy speed.
"""

import argparse
import email.utils
import json
import random
import socket
import sys
import threading
import time

PATTERN_SEED = 0x5E914
PATTERN_SPAN = 1 << 20  # offsets range over the first MiB of the pattern
_pattern = None


def pattern(max_size):
    global _pattern
    if _pattern is None or len(_pattern) < PATTERN_SPAN + max_size:
        _pattern = random.Random(PATTERN_SEED).randbytes(PATTERN_SPAN + max_size)
    return _pattern


def body_offset(oid):
    return (oid * 2654435761) % PATTERN_SPAN


def body(pat, oid, size):
    """The body of object `oid` (a memoryview into the pattern; no copy)."""
    off = body_offset(oid)
    return memoryview(pat)[off:off + size]


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.bytes = 0


def read_head(conn, buf):
    """Reads one request head; returns (head bytes, leftover) or (None, _) at EOF."""
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            return bytes(buf[:end]), buf[end + 4:]
        chunk = conn.recv(65536)
        if not chunk:
            return None, buf
        buf += chunk


def serve_conn(conn, sizes, pat, stats):
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    date, date_at = email.utils.formatdate(usegmt=True), time.time()
    try:
        while True:
            head, buf = read_head(conn, buf)
            if head is None:
                return
            line = head.split(b"\r\n", 1)[0].split(b" ")
            method, target = line[0], line[1] if len(line) > 1 else b""
            close = b"\r\nconnection: close" in head.lower()
            if time.time() - date_at >= 1:
                date, date_at = email.utils.formatdate(usegmt=True), time.time()
            if target == b"/stats":
                with stats.lock:
                    payload = json.dumps({"requests": stats.requests, "bytes": stats.bytes}).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Cache-Control: no-store\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
                continue
            size = None
            if target.startswith(b"/o/"):
                try:
                    oid = int(target[3:])
                    size = sizes.get(oid)
                except ValueError:
                    pass
            if size is None or method not in (b"GET", b"HEAD"):
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nCache-Control: no-store\r\n\r\n")
                continue
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nDate: %s\r\nCache-Control: max-age=86400\r\n"
                b"Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n"
                % (date.encode(), size))
            if method == b"GET":
                conn.sendall(body(pat, oid, size))
            with stats.lock:
                stats.requests += 1
                stats.bytes += size if method == b"GET" else 0
            if close:
                return
    except (ConnectionError, OSError):
        return
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description="origin for the trace replayer")
    ap.add_argument("--trace", required=True)
    ap.add_argument("--listen", default="127.0.0.1:0", help="host:port (port 0: pick one)")
    ap.add_argument("--port-file", help="write the bound port here once listening")
    a = ap.parse_args()
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from tracegen import read_trace
    _, _, sizes = read_trace(a.trace)
    pat = pattern(max(sizes.values()))
    host, port = a.listen.rsplit(":", 1)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, int(port)))
    srv.listen(1024)
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(srv.getsockname()[1]))
        import os
        os.rename(a.port_file + ".tmp", a.port_file)
    stats = Stats()
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve_conn, args=(conn, sizes, pat, stats), daemon=True).start()


if __name__ == "__main__":
    main()
