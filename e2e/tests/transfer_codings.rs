//! Responses whose content is under a transfer coding other than chunked (RFC 9112 §6.1):
//! `Transfer-Encoding: gzip` with the body delimited by the close (§6.3 rule 4), or
//! `gzip, chunked`. Sepia cannot remove the gzip coding, so it relays the coded bytes to
//! HTTP/1.1 clients under `Transfer-Encoding: gzip, chunked` (its own chunked replacing the
//! origin's framing, the connection kept), answers HTTP/1.0 clients 502 (they cannot receive
//! Transfer-Encoding at all), and never stores such a response: the origin sees every request.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use sepia_e2e::{curl, free_addr, reverse_config, RawClient, Response, Sepia};

/// `hello, transfer-coded world\n` compressed by gzip (RFC 1952), as Python's
/// `gzip.compress(..., mtime=0)` writes it.
const GZIPPED: &[u8] = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\xcb\x48\xcd\xc9\xc9\xd7\x51\
\x28\x29\x4a\xcc\x2b\x4e\x4b\x2d\xd2\x4d\xce\x4f\x49\x4d\x51\x28\xcf\x2f\xca\x49\xe1\x02\x00\xf2\
\x4b\x45\x95\x1c\x00\x00\x00";
const PLAIN: &str = "hello, transfer-coded world\n";

/// An origin on a raw socket that answers every connection's request with `head` and `body`
/// and closes: the close is what ends a body whose final coding is not chunked. It records
/// the request heads it received.
struct RawOrigin {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
}

impl RawOrigin {
    fn start(head: &str, body: Vec<u8>) -> RawOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let response = [head.as_bytes(), &body].concat();
        let seen = Arc::clone(&heads);
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let head = read_head(&mut conn);
                seen.lock().unwrap().push(head);
                let _ = conn.write_all(&response);
                // Dropping the socket closes it: the end of a close-delimited body.
            }
        });
        RawOrigin { addr, heads }
    }

    fn requests(&self) -> usize {
        self.heads.lock().unwrap().len()
    }

    fn sepia(&self) -> Sepia {
        Sepia::start(&reverse_config(
            &free_addr(),
            &[&format!("http://{}", self.addr)],
        ))
    }
}

/// Reads one request head (through the empty line); GETs carry no content.
fn read_head(conn: &mut TcpStream) -> String {
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

const GZIP_UNTIL_CLOSE: &str = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\
    Cache-Control: max-age=3600\r\nContent-Type: text/plain\r\nX-Origin: raw\r\n\r\n";

fn get(client: &mut RawClient, path: &str) -> Response {
    client.send(format!("GET {path} HTTP/1.1\r\nHost: app\r\n\r\n").as_bytes());
    client.read_response()
}

/// The response carries the gzip bytes as sent, named by `gzip, chunked`, and says it was
/// neither a hit nor stored.
#[track_caller]
fn assert_relayed_coded(r: &Response) {
    assert_eq!(r.status, 200, "{}", r.raw_head);
    assert_eq!(
        r.headers_named("transfer-encoding"),
        ["gzip, chunked"],
        "{}",
        r.raw_head
    );
    assert_eq!(r.body, GZIPPED, "the coded bytes, unchanged");
    assert!(r.header("content-length").is_none(), "{}", r.raw_head);
    assert!(r.header("connection").is_none(), "{}", r.raw_head);
    assert_eq!(r.header("x-origin"), Some("raw"), "{}", r.raw_head);
    let cache_status = r.header("cache-status").unwrap_or_default();
    assert!(
        cache_status.contains("fwd=") && !cache_status.contains("stored"),
        "{}",
        r.raw_head
    );
}

#[test]
fn a_close_delimited_gzip_body_is_relayed_chunked_on_a_kept_connection_and_never_stored() {
    let origin = RawOrigin::start(GZIP_UNTIL_CLOSE, GZIPPED.to_vec());
    let sepia = origin.sepia();
    let mut client = RawClient::connect(sepia.addr());
    let first = get(&mut client, "/coded");
    assert_relayed_coded(&first);
    // Chunked by Sepia, the body's end is the last chunk: the same connection carries on.
    let second = get(&mut client, "/coded");
    assert_relayed_coded(&second);
    assert_eq!(origin.requests(), 2, "the second request is not a hit");
}

#[test]
fn a_gzip_then_chunked_body_is_relayed_with_its_coding_and_never_stored() {
    let mut chunked = Vec::new();
    for piece in GZIPPED.chunks(20) {
        chunked.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        chunked.extend_from_slice(piece);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let origin = RawOrigin::start(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\
         Cache-Control: max-age=3600\r\nX-Origin: raw\r\n\r\n",
        chunked,
    );
    let sepia = origin.sepia();
    let mut client = RawClient::connect(sepia.addr());
    assert_relayed_coded(&get(&mut client, "/coded-chunked"));
    assert_relayed_coded(&get(&mut client, "/coded-chunked"));
    assert_eq!(origin.requests(), 2, "the second request is not a hit");
}

#[test]
fn content_length_beside_a_transfer_coding_is_ignored_and_dropped() {
    // RFC 9112 §6.3 rule 3: Transfer-Encoding overrides Content-Length; the body runs to the
    // close, not to the 3 bytes claimed, and the length is not passed on.
    let origin = RawOrigin::start(
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: gzip\r\nX-Origin: raw\r\n\r\n",
        GZIPPED.to_vec(),
    );
    let sepia = origin.sepia();
    let mut client = RawClient::connect(sepia.addr());
    assert_relayed_coded(&get(&mut client, "/claimed-length"));
}

#[test]
fn curl_decodes_what_sepia_relays() {
    let origin = RawOrigin::start(GZIP_UNTIL_CLOSE, GZIPPED.to_vec());
    let sepia = origin.sepia();
    let url = format!("http://{}/coded", sepia.addr());
    // Asking for transfer decoding, curl removes both codings Sepia names.
    let decoded = curl(&["--tr-encoding", "-H", "Host: app", &url]);
    decoded.assert_status(200);
    assert_eq!(decoded.text(), PLAIN);
    // Without asking, it sees the same field (whether it then decodes the gzip coding
    // depends on its version).
    let plain = curl(&["-H", "Host: app", &url]);
    plain.assert_status(200);
    assert_eq!(
        plain.header("transfer-encoding").as_deref(),
        Some("gzip, chunked")
    );
    assert_eq!(origin.requests(), 2);
}

#[test]
fn an_http10_client_gets_502_instead_of_a_transfer_coded_body() {
    // RFC 9112 §6.1: "A server MUST NOT send a response containing Transfer-Encoding unless
    // the corresponding request indicates HTTP/1.1", and without the field the gzip bytes
    // would be taken for the content.
    let origin = RawOrigin::start(GZIP_UNTIL_CLOSE, GZIPPED.to_vec());
    let sepia = origin.sepia();
    let mut client = RawClient::connect(sepia.addr());
    client.send(b"GET /coded HTTP/1.0\r\nHost: app\r\n\r\n");
    let r = client.read_response();
    assert_eq!(r.status, 502, "{}", r.raw_head);
    assert!(r.header("transfer-encoding").is_none(), "{}", r.raw_head);
    assert!(r.text().contains("transfer coding"), "{}", r.text());
    assert_eq!(origin.requests(), 1);
    // An HTTP/1.1 client asking afterwards still gets the response (nothing was stored).
    let mut client = RawClient::connect(sepia.addr());
    assert_relayed_coded(&get(&mut client, "/coded"));
    assert_eq!(origin.requests(), 2);
}
