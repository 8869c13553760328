#!/usr/bin/env python3
"""Send N GETs one after another on one keep-alive HTTP/1.1 connection, each written only
after the previous response was read in full (one request per read on the proxy's side).

    seqclient.py --port P --n 5000 --path /1k          the same URL every time (hits)
    seqclient.py --port P --n 5000 --unique PREFIX     /u/PREFIX-<i> (every request a miss)
    seqclient.py --port P --n 5000 --unique PREFIX --dir v --header 'Accept-Encoding: gzip'
                                                       /v/PREFIX-<i> (Vary'd misses)
    seqclient.py --port P --n 5000 --path /ns/page     one no-store URL (every request passes)
    seqclient.py --port P --n 2000 --unique PREFIX --dir s/4k --first 800
                                                       /s/4k/PREFIX-800 .. -2799 (disk.sh count)

count.sh uses it to count syscalls and instructions per request where ab cannot help
(ab cannot vary the URL). Exits non-zero unless all N responses were 200.
"""
import argparse
import socket
import sys


def read_response(sock, buf):
    """Read one response with a Content-Length body; return (status, leftover bytes)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a response head")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
        if name.strip().lower() == b"transfer-encoding":
            raise ValueError("chunked responses are not supported here")
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed inside a body")
        rest += chunk
    return status, rest[length:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--path", default="/1k")
    ap.add_argument("--unique", help="prefix: request /<dir>/<prefix>-<i> instead of --path")
    ap.add_argument("--dir", default="u", help="the origin's folder for --unique (u, v, ns)")
    ap.add_argument("--first", type=int, default=0, help="--unique: the first <i> (then N in a row)")
    ap.add_argument("--header", action="append", default=[], help="a request field, 'Name: value'")
    args = ap.parse_args()
    sock = socket.create_connection(("127.0.0.1", args.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    host = f"127.0.0.1:{args.port}"
    extra = "".join(f"{h}\r\n" for h in args.header)
    buf, bad = b"", 0
    for i in range(args.first, args.first + args.n):
        path = f"/{args.dir}/{args.unique}-{i}" if args.unique else args.path
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode())
        status, buf = read_response(sock, buf)
        bad += status != 200
    sock.close()
    print(f"{args.n} requests, {bad} not 200")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
