//! Trailer sections (RFC 9112 §7.1.2) cross Sepia without the fields that must never be
//! trailers (RFC 9110 §6.5.1): a lax origin that merged a request's trailers into its header
//! section would otherwise see a second Content-Length or Host that Sepia never checked, and a
//! lax client would see framing or caching fields the origin's response never had in its head.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use sepia_e2e::{free_addr, reverse_config, RawClient, Sepia};

/// An origin that answers one request with `response` and hands back the request's raw bytes,
/// read up to the end of a chunked body (the empty line after the trailer section).
fn raw_origin(response: &'static [u8]) -> (SocketAddr, mpsc::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !ends_chunked_message(&seen) {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
        conn.write_all(response).unwrap();
        tx.send(seen).unwrap();
        // Keep the connection open until Sepia is done with it.
        let _ = conn.read(&mut buf);
    });
    (addr, rx)
}

/// Whether `bytes` hold a whole head and a whole chunked body after it.
fn ends_chunked_message(bytes: &[u8]) -> bool {
    let Some(head_end) = find(bytes, b"\r\n\r\n") else {
        return false;
    };
    let body = &bytes[head_end + 4..];
    let last = if body.starts_with(b"0\r\n") {
        Some(0)
    } else {
        find(body, b"\r\n0\r\n")
    };
    last.is_some_and(|at| find(&body[at..], b"\r\n\r\n").is_some())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The trailer section of the one chunked message in `raw`, as text.
fn trailer_section(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let (_, body) = text.split_once("\r\n\r\n").expect("a head");
    // The last chunk opens the body or follows the CRLF that ends the chunk before it.
    let after_last_chunk = match body.strip_prefix("0\r\n") {
        Some(rest) => rest,
        None => body.split_once("\r\n0\r\n").expect("a last chunk").1,
    };
    after_last_chunk.to_string()
}

#[test]
fn request_trailers_lose_the_fields_that_must_never_be_trailers() {
    let (origin, seen) = raw_origin(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    let sepia = Sepia::start(&reverse_config(
        &free_addr(),
        &[&format!("http://{origin}")],
    ));
    let mut client = RawClient::connect(sepia.addr());
    client.send(
        b"POST /upload HTTP/1.1\r\nHost: app\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\nhello\r\n0\r\nContent-Length: 5\r\nX-Checksum: abc\r\nHost: evil.example\r\n\
          transfer-encoding: chunked\r\nAuthorization: Basic Zm9vOmJhcg==\r\n\r\n",
    );
    let r = client.read_response();
    assert_eq!(r.status, 200);
    let raw = seen.recv_timeout(Duration::from_secs(10)).unwrap();
    let trailers = trailer_section(&raw);
    assert_eq!(
        trailers,
        "X-Checksum: abc\r\n\r\n",
        "only the allowed trailer reaches the origin; it received:\n{}",
        String::from_utf8_lossy(&raw)
    );
}

#[test]
fn response_trailers_lose_the_fields_that_must_never_be_trailers() {
    let (origin, _seen) = raw_origin(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nCache-Control: no-store\r\n\r\n\
          2\r\nok\r\n0\r\nServer-Timing: total;dur=3\r\nContent-Length: 9\r\n\
          Cache-Control: max-age=3600\r\nSet-Cookie: a=b\r\n\r\n",
    );
    let sepia = Sepia::start(&reverse_config(
        &free_addr(),
        &[&format!("http://{origin}")],
    ));
    let mut conn = TcpStream::connect(sepia.addr()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    conn.write_all(b"POST /x HTTP/1.1\r\nHost: app\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        .unwrap();
    let mut raw = Vec::new();
    let _ = conn.read_to_end(&mut raw);
    let trailers = trailer_section(&raw);
    assert_eq!(
        trailers,
        "Server-Timing: total;dur=3\r\n\r\n",
        "the client got:\n{}",
        String::from_utf8_lossy(&raw)
    );
}
