//! Requests a proxy must refuse rather than forward (RFC 9112 §6.3, §5, §2.2; RFC 9110 §5.5):
//! each is sent raw, must be answered with an error and `Connection: close`, the connection
//! must then close, and the origin must never receive it.

use std::time::Duration;

use sepia_e2e::fixtures::reverse;
use sepia_e2e::RawClient;

/// Sends `raw` and asserts it is refused with one of `allowed` before reaching the origin.
fn assert_refused(raw: &[u8], allowed: &[u16]) {
    let (origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    // The proxy may close while we are still writing a large head; the answer is what counts.
    let _ = client.try_send(raw);
    let shown = String::from_utf8_lossy(&raw[..raw.len().min(200)]).into_owned();
    let r = client
        .try_read_response()
        .unwrap_or_else(|e| panic!("no response to {shown:?}: {e}"));
    assert!(
        allowed.contains(&r.status),
        "{shown:?}: got {} (wanted one of {allowed:?})\n{}",
        r.status,
        r.raw_head
    );
    assert!(
        r.has_token("connection", "close"),
        "{shown:?}: no Connection: close\n{}",
        r.raw_head
    );
    assert!(
        client.wait_closed(Duration::from_secs(5)),
        "{shown:?}: connection left open"
    );
    assert_eq!(
        origin.heads_seen(),
        0,
        "{shown:?} reached the origin: {:#?}",
        origin.requests()
    );
}

/// For invalid chunked bodies after a valid head: the origin may see the head, but never a
/// complete request; the client gets 400 or a closed connection, never a 200.
fn assert_bad_body_refused(raw: &[u8]) {
    let (origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    let _ = client.try_send(raw);
    let shown = String::from_utf8_lossy(raw).into_owned();
    if let Ok(r) = client.try_read_response() {
        assert_ne!(r.status, 200, "{shown:?} was answered 200");
        assert!(r.status >= 400, "{shown:?} was answered {}", r.status);
    }
    assert!(
        client.wait_closed(Duration::from_secs(5)),
        "{shown:?}: connection left open"
    );
    assert_eq!(
        origin.request_count(),
        0,
        "{shown:?} reached the origin whole"
    );
}

#[test]
fn content_length_with_transfer_encoding() {
    assert_refused(
        b"POST /echo HTTP/1.1\r\nHost: app\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        &[400],
    );
}

#[test]
fn two_differing_content_lengths() {
    assert_refused(
        b"POST /echo HTTP/1.1\r\nHost: app\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        &[400],
    );
}

#[test]
fn content_length_not_a_number() {
    assert_refused(
        b"POST /echo HTTP/1.1\r\nHost: app\r\nContent-Length: 5x\r\n\r\nhello",
        &[400],
    );
}

#[test]
fn transfer_encoding_not_ending_in_chunked() {
    assert_refused(
        b"POST /echo HTTP/1.1\r\nHost: app\r\nTransfer-Encoding: gzip\r\n\r\nhello",
        &[400],
    );
}

#[test]
fn transfer_coding_other_than_chunked_before_chunked() {
    assert_refused(
        b"POST /echo HTTP/1.1\r\nHost: app\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        &[400, 501],
    );
}

#[test]
fn whitespace_before_colon() {
    assert_refused(b"GET / HTTP/1.1\r\nHost : app\r\n\r\n", &[400]);
}

#[test]
fn obs_fold_line() {
    assert_refused(
        b"GET / HTTP/1.1\r\nHost: app\r\nX-Folded: a\r\n b\r\n\r\n",
        &[400],
    );
}

#[test]
fn nul_in_header_value() {
    assert_refused(
        b"GET / HTTP/1.1\r\nHost: app\r\nX-Nul: a\0b\r\n\r\n",
        &[400],
    );
}

#[test]
fn bare_cr_in_header_value() {
    assert_refused(b"GET / HTTP/1.1\r\nHost: app\r\nX-Cr: a\rb\r\n\r\n", &[400]);
}

#[test]
fn invalid_request_line() {
    assert_refused(b"GET /a b HTTP/1.1\r\nHost: app\r\n\r\n", &[400]);
}

#[test]
fn missing_host_in_http11() {
    assert_refused(b"GET / HTTP/1.1\r\nUser-Agent: t\r\n\r\n", &[400]);
}

#[test]
fn head_larger_than_the_limit() {
    let mut raw = b"GET / HTTP/1.1\r\nHost: app\r\nX-Big: ".to_vec();
    raw.extend(std::iter::repeat_n(b'a', 70 * 1024));
    raw.extend_from_slice(b"\r\n\r\n");
    assert_refused(&raw, &[431]);
}

#[test]
fn more_headers_than_the_limit() {
    let mut raw = b"GET / HTTP/1.1\r\nHost: app\r\n".to_vec();
    for i in 0..150 {
        raw.extend_from_slice(format!("X-H-{i}: v\r\n").as_bytes());
    }
    raw.extend_from_slice(b"\r\n");
    assert_refused(&raw, &[431]);
}

#[test]
fn chunk_size_not_hex() {
    assert_bad_body_refused(
        b"POST /echo HTTP/1.1\r\nHost: app\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    );
}

#[test]
fn chunk_size_overflowing_64_bits() {
    assert_bad_body_refused(
        b"POST /echo HTTP/1.1\r\nHost: app\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nhello\r\n0\r\n\r\n",
    );
}

#[test]
fn configured_limits_are_enforced() {
    let extra = "[limits]\nmax_request_head = 4096\nmax_headers = 10\n";
    let cases: [(Vec<u8>, u16); 3] = [
        (
            format!(
                "GET / HTTP/1.1\r\nHost: app\r\nX-Big: {}\r\n\r\n",
                "a".repeat(5000)
            )
            .into_bytes(),
            431,
        ),
        (
            format!(
                "GET / HTTP/1.1\r\nHost: app\r\n{}\r\n",
                (0..12).map(|i| format!("X-{i}: v\r\n")).collect::<String>()
            )
            .into_bytes(),
            431,
        ),
        (
            format!(
                "GET / HTTP/1.1\r\nHost: app\r\n{}\r\n",
                (0..8).map(|i| format!("X-{i}: v\r\n")).collect::<String>()
            )
            .into_bytes(),
            200,
        ),
    ];
    for (raw, want) in cases {
        let (origin, sepia) = sepia_e2e::fixtures::reverse_with(extra);
        let mut client = RawClient::connect(sepia.addr());
        let _ = client.try_send(&raw);
        let r = client.read_response();
        assert_eq!(r.status, want, "{} byte head: {}", raw.len(), r.raw_head);
        assert_eq!(origin.heads_seen(), usize::from(want == 200));
    }
}
