//! The admin listener's HTTP/1.1: one request per connection, read whole (a head of at most
//! 16 KiB, a body of at most 64 KiB), answered and closed. Small on purpose: it serves
//! operators and scrapers, never the proxy's traffic.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MAX_HEAD: usize = 16 << 10;
const MAX_BODY: usize = 64 << 10;
/// A client has this long to send its request.
const READ_LIMIT: Duration = Duration::from_secs(10);

/// One admin request.
#[derive(Debug, Default)]
pub struct Request {
    pub method: String,
    /// The path, without the query (which no endpoint reads).
    pub path: String,
    pub authorization: Option<String>,
    pub body: Vec<u8>,
}

/// Reads one request; `None` when the client sent nothing usable.
pub async fn read(stream: &mut TcpStream) -> Option<Request> {
    tokio::time::timeout(READ_LIMIT, read_inner(stream))
        .await
        .ok()
        .flatten()
}

async fn read_inner(stream: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::with_capacity(1024);
    let end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let mut parts = lines.next()?.split(' ');
    let (method, target) = (parts.next()?, parts.next()?);
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    let mut req = Request {
        method: method.to_string(),
        path: path.to_string(),
        ..Request::default()
    };
    let mut length = 0;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().ok().filter(|n| *n <= MAX_BODY)?;
        } else if name.eq_ignore_ascii_case("authorization") {
            req.authorization = Some(value.to_string());
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return None;
        }
    }
    req.body = buf[end + 4..].to_vec();
    while req.body.len() < length {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        req.body.extend_from_slice(&chunk[..n]);
    }
    req.body.truncate(length);
    Some(req)
}

/// An answer.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub extra: Option<&'static str>,
}

impl Response {
    pub fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            content_type,
            body: body.into(),
            extra: None,
        }
    }

    pub fn text(status: u16, body: &str) -> Response {
        Response::new(status, "text/plain; charset=utf-8", format!("{body}\n"))
    }

    pub fn json(status: u16, value: &serde_json::Value) -> Response {
        let mut body = serde_json::to_vec_pretty(value).unwrap_or_default();
        body.push(b'\n');
        Response::new(status, "application/json", body)
    }

    /// Writes it and closes.
    pub async fn send(self, stream: &mut TcpStream, head_only: bool) {
        let reason = match self.status {
            200 => "OK",
            400 => "Bad Request",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "Not Found",
            405 => "Method Not Allowed",
            _ => "Error",
        };
        let extra = self.extra.map_or(String::new(), |e| format!("{e}\r\n"));
        let head = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
             Cache-Control: no-store\r\nConnection: close\r\n{extra}\r\n",
            self.status,
            self.content_type,
            self.body.len()
        );
        let _ = stream.write_all(head.as_bytes()).await;
        if !head_only {
            let _ = stream.write_all(&self.body).await;
        }
        let _ = stream.shutdown().await;
    }
}
