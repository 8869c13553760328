//! A request body must never be parsed as a request, whichever path the proxy takes: a GET
//! with a body whose URL is cached must not be answered from the cache with its body left on
//! the connection (a hit and a miss would then frame the same bytes differently, RFC 9112
//! §11.2, and the body would run as a second request).

use std::time::Duration;

use sepia_e2e::fixtures::reverse;
use sepia_e2e::{Origin, RawClient};

const SMUGGLED: &str = "GET /secret HTTP/1.1\r\nHost: app\r\n\r\n";
const CACHED: &str = "/cc/max-age=60/smuggle";

fn prime(sepia_addr: std::net::SocketAddr, origin: &Origin) {
    let mut c = RawClient::connect(sepia_addr);
    c.send(format!("GET {CACHED} HTTP/1.1\r\nHost: app\r\n\r\n").as_bytes());
    assert_eq!(c.read_response().status, 200);
    let mut c = RawClient::connect(sepia_addr);
    c.send(format!("GET {CACHED} HTTP/1.1\r\nHost: app\r\n\r\n").as_bytes());
    assert_eq!(c.read_response().status, 200);
    assert_eq!(origin.request_count(), 1, "the URL is cached");
}

/// Sends `request` on one connection and checks that exactly one response comes back and that
/// the origin never saw the smuggled request as a request.
fn assert_one_response_no_smuggling(
    sepia_addr: std::net::SocketAddr,
    origin: &Origin,
    request: &str,
) {
    let mut c = RawClient::connect(sepia_addr);
    c.send(request.as_bytes());
    let first = c.read_response();
    assert_eq!(first.status, 200);
    c.set_read_timeout(Duration::from_millis(800));
    if let Ok(second) = c.try_read_response() {
        panic!(
            "a second response (status {}) came back: the body ran as a request",
            second.status
        );
    }
    let targets: Vec<String> = origin.requests().iter().map(|r| r.target.clone()).collect();
    assert!(
        !targets.iter().any(|t| t == "/secret"),
        "origin saw {targets:?}"
    );
}

#[test]
fn a_cached_get_with_a_content_length_body_is_not_desynchronised() {
    let (origin, sepia) = reverse();
    prime(sepia.addr(), &origin);
    let request = format!(
        "GET {CACHED} HTTP/1.1\r\nHost: app\r\nContent-Length: {}\r\n\r\n{SMUGGLED}",
        SMUGGLED.len()
    );
    assert_one_response_no_smuggling(sepia.addr(), &origin, &request);
}

#[test]
fn a_cached_get_with_a_chunked_body_is_not_desynchronised() {
    let (origin, sepia) = reverse();
    prime(sepia.addr(), &origin);
    let request = format!(
        "GET {CACHED} HTTP/1.1\r\nHost: app\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{SMUGGLED}\r\n0\r\n\r\n",
        SMUGGLED.len()
    );
    assert_one_response_no_smuggling(sepia.addr(), &origin, &request);
}
