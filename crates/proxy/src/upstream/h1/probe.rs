//! The HTTP/1.1 exchange of an active health check (`upstream::checks`): one GET on a
//! connection of its own (never a pooled one), which is closed once the response head is in.

use std::io;

use bytes::{Bytes, BytesMut};
use sepia_http1::{ResponseDecoder, ResponseHead};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::transport::Conn;

/// Most bytes of a check's response read before its head must have ended.
const MAX_HEAD: usize = 64 * 1024;

/// The check's request: `GET path` with `Host: host`, asking the origin to close after it
/// (RFC 9112 §9.6), so that neither side keeps a connection nobody will use.
pub fn request(path: &str, host: &str) -> Bytes {
    Bytes::from(format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: sepia-health-check\r\n\
         Accept: */*\r\nConnection: close\r\n\r\n"
    ))
}

/// Sends `request` on `conn` and returns the status of the final response (1xx skipped).
/// The caller bounds the whole by the check's timeout.
pub async fn status(conn: &mut Conn, request: &[u8]) -> io::Result<u16> {
    conn.write_all(request).await?;
    conn.flush().await?;
    let mut buf = BytesMut::with_capacity(4096);
    let mut head = ResponseHead::default();
    let mut decoder = ResponseDecoder::new(sepia_http1::Limits::default());
    loop {
        match decoder.decode(&mut buf, &mut head) {
            Ok(true) if head.status < 200 => continue,
            Ok(true) => return Ok(head.status),
            Ok(false) => {}
            Err(e) => {
                let why = format!("not an HTTP/1.1 response head: {e:?}");
                return Err(io::Error::new(io::ErrorKind::InvalidData, why));
            }
        }
        if buf.len() >= MAX_HEAD {
            let why = "a response head larger than 64 KiB";
            return Err(io::Error::new(io::ErrorKind::InvalidData, why));
        }
        if conn.read_buf(&mut buf).await? == 0 {
            let why = "the origin closed the connection without answering";
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, why));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::net::TcpListener;

    /// An origin that reads a request and writes `answer`, then closes.
    async fn origin(answer: &'static [u8]) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut req = vec![0; 1024];
            let n = s.read(&mut req).await.unwrap();
            assert!(req[..n].starts_with(b"GET /health HTTP/1.1\r\nHost: h.test\r\n"));
            s.write_all(answer).await.unwrap();
        });
        addr
    }

    async fn probe(answer: &'static [u8]) -> io::Result<u16> {
        let addr = origin(answer).await;
        let mut conn = Conn::connect(addr, None, Duration::from_secs(1)).await?;
        status(&mut conn, &request("/health", "h.test")).await
    }

    #[tokio::test]
    async fn reads_the_final_status() {
        let answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(probe(answer).await.unwrap(), 503);
        assert_eq!(probe(b"HTTP/1.0 200 OK\r\n\r\nbody").await.unwrap(), 200);
    }

    #[tokio::test]
    async fn anything_else_is_an_error() {
        let e = probe(b"HTTP/1.1 200 OK\r\n").await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let e = probe(b"SSH-2.0-OpenSSH\r\n\r\n").await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }
}
