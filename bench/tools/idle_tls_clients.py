#!/usr/bin/env python3
"""Open N keep-alive TLS connections to a proxy, send one GET on each and read its response,
then hold every connection open and idle until SIGTERM (bench/tls.sh's idle cases).

    idle_tls_clients.py --port P --path /1k --n 10000 --ready-file F [--h2] [--plain]

With --h2 each connection negotiates h2 by ALPN and its request is one HTTP/2 stream (the
`h2` package: Debian's python3-h2, so run it with /usr/bin/python3).

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


def connect(ctx, port):
    """A connection to the proxy: TLS unless `ctx` is None (--plain)."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return raw if ctx is None else ctx.wrap_socket(raw, server_hostname="localhost")


def one(ctx, port, request):
    s = connect(ctx, port)
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


def one_h2(ctx, port, path):
    import h2.config
    import h2.connection
    import h2.events

    s = connect(ctx, port)
    if ctx is not None and s.selected_alpn_protocol() != "h2":
        raise OSError("h2 was not negotiated")
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    headers = [(":method", "GET"), (":path", path), (":authority", "localhost"),
               (":scheme", "http" if ctx is None else "https")]
    conn.send_headers(1, headers, end_stream=True)
    s.sendall(conn.data_to_send())
    while True:
        data = s.recv(65536)
        if not data:
            raise OSError("closed")
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.DataReceived):
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            if isinstance(event, h2.events.StreamEnded):
                s.sendall(conn.data_to_send())
                return s, conn
        s.sendall(conn.data_to_send())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--path", default="/1k")
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--ready-file", required=True)
    ap.add_argument("--h2", action="store_true")
    ap.add_argument("--plain", action="store_true",
                    help="plain TCP: HTTP/1.1, or with --h2 HTTP/2 with prior knowledge (h2c)")
    args = ap.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if args.h2:
        ctx.set_alpn_protocols(["h2"])
    if args.plain:
        ctx = None
    request = f"GET {args.path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
    started = time.monotonic()
    held, failed = [], 0
    while len(held) + failed < args.n and not stop:
        try:
            if args.h2:
                held.append(one_h2(ctx, args.port, args.path))
            else:
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
