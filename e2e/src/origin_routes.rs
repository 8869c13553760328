//! What the test origin answers, chosen by the request path. Every response carries
//! `X-Origin-Port` (which origin answered, for round-robin tests) and `X-Conn-Id` (which of its
//! connections carried the request, for reuse tests), and — unless the path says otherwise —
//! `Cache-Control: no-store`, so that a caching proxy forwards every request and connection
//! counts stay meaningful.
//!
//! | path | behaviour |
//! |---|---|
//! | `/echo` | 200, the request body back, `X-Body-Len`, `X-Method`, and `X-Body-Sha256` for bodies up to 1 MiB |
//! | `/head` | 200, the raw request head as the origin saw it |
//! | `/bytes/N` | 200, N pattern bytes with Content-Length |
//! | `/chunked/N` | 200, N pattern bytes, chunked |
//! | `/close/N` | 200, N pattern bytes delimited by closing the connection |
//! | `/then-close/N` | 200 with N pattern bytes and Content-Length, then closes *without*
//! announcing it (a stale pooled connection for the proxy's next request) |
//! | `/slow-sink/MS` | waits MS milliseconds before reading the request body, then echoes its length |
//! | `/hang` | reads the request, never answers (until the origin stops) |
//! | `/die-mid-body` | announces Content-Length 100000, sends 1000 bytes, closes |
//! | `/delay/MS` | 200 after MS milliseconds |
//! | `/status/N` | status N with a short body |
//! | `/hop` | 200 with hop-by-hop fields the proxy must strip, and one it must keep |
//! | `/cacheable/...` | 200 with `Cache-Control: max-age=60` |
//! | `/cc/...`, `/slow-cacheable/...`, `/die-cacheable/...`, `/vary-lang/...`, `/revalidate/...` | storable responses for the cache tests: see `src/origin_cache_routes.rs` |
//! | `/ranged/...`, `/ranged-weak/...` | ranges of a storable representation: see `src/origin_range_routes.rs` |
//! | anything else | 200, body `METHOD TARGET` |

use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::origin::{path_of, RecordedRequest, State};
use crate::pattern::{fill_pattern, sha256_hex};
use crate::{origin_cache_routes, origin_range_routes};

/// Whether the connection may carry another request after this response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    KeepAlive,
    Close,
}

/// Largest echoed body that gets an `X-Body-Sha256`: the tests run unoptimised, where SHA-256
/// costs ~80 ns a byte; larger bodies are compared byte for byte instead (stronger anyway).
const SHA256_LIMIT: usize = 1024 * 1024;

/// Longest a `/hang` request is held open when the origin is never dropped.
const HANG_LIMIT: Duration = Duration::from_secs(60);

/// Writes the response for `req` (whose body is `body`) to `out`.
pub(crate) fn respond(
    req: &RecordedRequest,
    out: &mut TcpStream,
    state: &State,
    closing: bool,
) -> io::Result<Reply> {
    let path = path_of(&req.target);
    let head_only = req.method == "HEAD";
    let common = format!(
        "Server: sepia-e2e-origin\r\nX-Origin-Port: {}\r\nX-Conn-Id: {}\r\n{}",
        out.local_addr()?.port(),
        req.connection,
        if closing { "Connection: close\r\n" } else { "" }
    );
    if let Some(reply) = origin_cache_routes::respond(req, out, &common, state.request_count()) {
        return reply;
    }
    if let Some(reply) = origin_range_routes::respond(req, out, &common, state.request_count()) {
        return reply;
    }
    let no_store = "Cache-Control: no-store\r\n";
    let body = &req.body[..];
    let (first, rest) = split_path(path);
    match first {
        "echo" => {
            let digest = if body.len() <= SHA256_LIMIT {
                format!("X-Body-Sha256: {}\r\n", sha256_hex(body))
            } else {
                String::new()
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\n{common}{no_store}Content-Type: application/octet-stream\r\n\
                 Content-Length: {}\r\nX-Method: {}\r\nX-Body-Len: {}\r\n{digest}\r\n",
                body.len(),
                req.method,
                body.len(),
            );
            send(out, head.as_bytes(), if head_only { b"" } else { body })
        }
        "head" => fixed(
            out,
            200,
            &common,
            no_store,
            req.raw_head.as_bytes(),
            head_only,
        ),
        "bytes" => {
            let n = number(rest);
            let head = format!(
                "HTTP/1.1 200 OK\r\n{common}{no_store}Content-Type: application/octet-stream\r\n\
                 Content-Length: {n}\r\n\r\n"
            );
            out.write_all(head.as_bytes())?;
            if !head_only {
                write_pattern(out, n, None)?;
            }
            Ok(Reply::KeepAlive)
        }
        "chunked" => {
            let n = number(rest);
            let head = format!(
                "HTTP/1.1 200 OK\r\n{common}{no_store}Content-Type: application/octet-stream\r\n\
                 Transfer-Encoding: chunked\r\n\r\n"
            );
            out.write_all(head.as_bytes())?;
            if !head_only {
                write_pattern(out, n, Some(8192))?;
                out.write_all(b"0\r\n\r\n")?;
            }
            Ok(Reply::KeepAlive)
        }
        "close" => {
            let n = number(rest);
            let head = format!(
                "HTTP/1.1 200 OK\r\n{common}{no_store}Content-Type: application/octet-stream\r\n\
                 {}\r\n",
                if closing { "" } else { "Connection: close\r\n" }
            );
            out.write_all(head.as_bytes())?;
            if !head_only {
                write_pattern(out, n, None)?;
            }
            Ok(Reply::Close)
        }
        "then-close" => {
            let n = number(rest);
            let head = format!(
                "HTTP/1.1 200 OK\r\n{common}{no_store}Content-Type: application/octet-stream\r\n\
                 Content-Length: {n}\r\n\r\n"
            );
            out.write_all(head.as_bytes())?;
            if !head_only {
                write_pattern(out, n, None)?;
            }
            Ok(Reply::Close)
        }
        "slow-sink" => {
            let text = format!("received {}", req.body_len);
            fixed(out, 200, &common, no_store, text.as_bytes(), head_only)
        }
        "hang" => {
            let deadline = Instant::now() + HANG_LIMIT;
            while !state.stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(Reply::Close)
        }
        "die-mid-body" => {
            let head = format!(
                "HTTP/1.1 200 OK\r\n{common}{no_store}Content-Type: application/octet-stream\r\n\
                 Content-Length: 100000\r\n\r\n"
            );
            out.write_all(head.as_bytes())?;
            write_pattern(out, 1000, None)?;
            Ok(Reply::Close)
        }
        "delay" => {
            std::thread::sleep(Duration::from_millis(number(rest) as u64));
            fixed(out, 200, &common, no_store, b"delayed", head_only)
        }
        "status" => {
            let status = u16::try_from(number(rest)).unwrap_or(500);
            let text = format!("status {status}");
            fixed(out, status, &common, no_store, text.as_bytes(), head_only)
        }
        "hop" => {
            let hop = format!(
                "{common}{no_store}Connection: X-Origin-Hop\r\nX-Origin-Hop: secret\r\n\
                 Keep-Alive: timeout=5\r\nX-End-To-End: kept\r\n"
            );
            fixed(out, 200, &hop, "", b"hop", head_only)
        }
        "cacheable" => fixed(
            out,
            200,
            &common,
            "Cache-Control: max-age=60\r\n",
            req.target.as_bytes(),
            head_only,
        ),
        _ => {
            let text = format!("{} {}", req.method, req.target);
            fixed(out, 200, &common, no_store, text.as_bytes(), head_only)
        }
    }
}

/// How long to wait before reading the body of a request for `path` (`/slow-sink/MS`).
pub(crate) fn pause_before_body(path: &str) -> Option<Duration> {
    match split_path(path) {
        ("slow-sink", ms) => Some(Duration::from_millis(number(ms) as u64)),
        _ => None,
    }
}

/// Splits `/bytes/123?x` into (`bytes`, `123`).
pub(crate) fn split_path(path: &str) -> (&str, &str) {
    let path = path.trim_start_matches('/');
    path.split_once('/').unwrap_or((path, ""))
}

/// The number in a path segment; 0 when absent or invalid.
pub(crate) fn number(segment: &str) -> usize {
    segment
        .split('/')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        304 => "Not Modified",
        400 => "Bad Request",
        404 => "Not Found",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// A small response with Content-Length (none for 1xx/204/304, no body for HEAD).
pub(crate) fn fixed(
    out: &mut TcpStream,
    status: u16,
    common: &str,
    cache: &str,
    body: &[u8],
    head_only: bool,
) -> io::Result<Reply> {
    let bodyless = status == 204 || status == 304;
    let length = if bodyless {
        String::new()
    } else {
        format!("Content-Length: {}\r\n", body.len())
    };
    let head = format!(
        "HTTP/1.1 {status} {}\r\n{common}{cache}Content-Type: text/plain\r\n{length}\r\n",
        reason(status)
    );
    send(
        out,
        head.as_bytes(),
        if head_only || bodyless { b"" } else { body },
    )
}

fn send(out: &mut TcpStream, head: &[u8], body: &[u8]) -> io::Result<Reply> {
    let mut message = Vec::with_capacity(head.len() + body.len());
    message.extend_from_slice(head);
    message.extend_from_slice(body);
    out.write_all(&message)?;
    Ok(Reply::KeepAlive)
}

/// Writes `n` pattern bytes in 64 KiB writes, or as chunks of `chunk` bytes when given.
pub(crate) fn write_pattern(out: &mut TcpStream, n: usize, chunk: Option<usize>) -> io::Result<()> {
    let step = chunk.unwrap_or(64 * 1024);
    let mut buf = vec![0u8; step];
    let mut offset = 0;
    while offset < n {
        let len = step.min(n - offset);
        fill_pattern(offset, &mut buf[..len]);
        if chunk.is_some() {
            let mut framed = format!("{len:x}\r\n").into_bytes();
            framed.extend_from_slice(&buf[..len]);
            framed.extend_from_slice(b"\r\n");
            out.write_all(&framed)?;
        } else {
            out.write_all(&buf[..len])?;
        }
        offset += len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_splitting() {
        let cases = [
            ("/bytes/123", ("bytes", "123")),
            ("/echo", ("echo", "")),
            ("/delay/5/x", ("delay", "5/x")),
            ("/", ("", "")),
        ];
        for (path, want) in cases {
            assert_eq!(split_path(path), want, "{path}");
        }
        assert_eq!(number("42/rest"), 42);
        assert_eq!(number("x"), 0);
        assert_eq!(
            pause_before_body("/slow-sink/250"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(pause_before_body("/echo"), None);
    }
}
