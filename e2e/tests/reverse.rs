//! Reverse (accelerator) mode: methods, body framings in both directions, large bodies,
//! pipelining, HTTP/1.0 clients, origin connection reuse, routing and load balancing.

use std::time::Duration;

use sepia_e2e::fixtures::{reverse, reverse_with};
use sepia_e2e::{curl, free_addr, pattern, reverse_config, sha256_hex, Origin, RawClient, Sepia};

/// 8 MiB: far more than any socket or proxy buffer, so bodies must really stream.
const LARGE: usize = 8 * 1024 * 1024;

#[test]
fn get_with_content_length_response() {
    let (origin, sepia) = reverse();
    let out = curl(&[&format!("{}/bytes/100000", sepia.url())]);
    out.assert_status(200);
    assert_eq!(out.body.len(), 100_000);
    assert!(
        out.body == pattern(100_000),
        "body differs from the origin's"
    );
    let seen = origin.single_request();
    assert_eq!(
        (seen.method.as_str(), seen.target.as_str()),
        ("GET", "/bytes/100000")
    );
}

#[test]
fn get_with_chunked_response() {
    let (_origin, sepia) = reverse();
    let out = curl(&[&format!("{}/chunked/100000", sepia.url())]);
    out.assert_status(200);
    assert!(
        out.body == pattern(100_000),
        "chunked body differs ({} bytes)",
        out.body.len()
    );
}

#[test]
fn get_with_close_delimited_response() {
    let (_origin, sepia) = reverse();
    let out = curl(&[&format!("{}/close/100000", sepia.url())]);
    out.assert_status(200);
    assert!(
        out.body == pattern(100_000),
        "close-delimited body differs ({} bytes)",
        out.body.len()
    );
}

#[test]
fn close_delimited_response_then_next_request_on_same_client_connection() {
    // The origin's body ends at its close; the proxy must still frame it for the client so the
    // client's connection stays usable (chunked re-framing) or close it cleanly after the body.
    let (_origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    client.send(b"GET /close/5000 HTTP/1.1\r\nHost: app\r\n\r\n");
    let r = client.read_response();
    assert_eq!(r.status, 200);
    assert!(r.body == pattern(5000));
    if r.header("content-length").is_none() && !r.has_token("transfer-encoding", "chunked") {
        assert!(
            client.wait_closed(Duration::from_secs(5)),
            "close-delimited but not closed"
        );
        return;
    }
    if r.has_token("connection", "close") {
        assert!(client.wait_closed(Duration::from_secs(5)));
        return;
    }
    client.send(b"GET /bytes/10 HTTP/1.1\r\nHost: app\r\n\r\n");
    assert_eq!(client.read_response().body, pattern(10));
}

#[test]
fn head_has_headers_but_no_body_and_connection_stays_in_sync() {
    let (origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    client.send(b"HEAD /bytes/1000 HTTP/1.1\r\nHost: app\r\n\r\n");
    let head = client.read_head_response();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("1000"));
    // Had the proxy sent a body after the HEAD response, this would read it as a status line.
    client.send(b"GET /bytes/10 HTTP/1.1\r\nHost: app\r\n\r\n");
    let next = client.read_response();
    assert_eq!(next.status, 200);
    assert_eq!(next.body, pattern(10));
    assert_eq!(origin.request_count(), 2);

    let out = curl(&["-I", &format!("{}/bytes/1000", sepia.url())]);
    out.assert_status(200);
    // (curl -I writes the head itself to the output file, so only the header is checked.)
    assert_eq!(out.header("content-length").as_deref(), Some("1000"));
}

#[test]
fn post_with_content_length_body() {
    let (origin, sepia) = reverse();
    let out = curl(&[
        "--data-binary",
        "hello, origin",
        &format!("{}/echo", sepia.url()),
    ]);
    out.assert_status(200);
    assert_eq!(out.text(), "hello, origin");
    assert_eq!(out.header("x-method").as_deref(), Some("POST"));
    let seen = origin.single_request();
    assert_eq!(seen.body_len, 13);
    assert_eq!(&seen.body[..], b"hello, origin");
    assert_eq!(
        out.header("x-body-sha256"),
        Some(sha256_hex(b"hello, origin"))
    );
}

#[test]
fn put_with_chunked_body_from_curl() {
    let (origin, sepia) = reverse();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("upload");
    let data = pattern(300_000);
    std::fs::write(&file, &data).unwrap();
    let out = curl(&[
        "-X",
        "PUT",
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        &format!("@{}", file.display()),
        &format!("{}/echo", sepia.url()),
    ]);
    out.assert_status(200);
    assert_eq!(out.header("x-method").as_deref(), Some("PUT"));
    assert_eq!(out.header("x-body-len").as_deref(), Some("300000"));
    assert!(out.body == data, "echoed body differs");
    assert!(
        origin.single_request().body[..] == data[..],
        "origin got a different body"
    );
    assert_eq!(out.header("x-body-sha256"), Some(sha256_hex(&data)));
}

#[test]
fn post_with_raw_chunked_body_extensions_and_trailer() {
    let (origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    client.send(
        b"POST /echo HTTP/1.1\r\nHost: app\r\nTransfer-Encoding: chunked\r\n\r\n\
          5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n",
    );
    let r = client.read_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "hello, world");
    let seen = origin.single_request();
    assert_eq!(seen.body_len, 12);
    // Framing is hop-by-hop: the origin must see a valid framing of the same 12 bytes.
    let chunked = seen
        .headers_named("transfer-encoding")
        .iter()
        .any(|v| v.contains("chunked"));
    assert!(
        chunked || seen.header("content-length") == Some("12"),
        "{seen:#?}"
    );
}

#[test]
fn upload_8_mib_streams_both_ways_unchanged() {
    let (origin, sepia) = reverse();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("upload");
    // A different byte sequence from the download pattern, so a mix-up cannot pass.
    let data: Vec<u8> = pattern(LARGE + 7)
        .into_iter()
        .skip(7)
        .map(|b| b ^ 0x5a)
        .collect();
    std::fs::write(&file, &data).unwrap();
    // curl sends `Expect: 100-continue` for a body this large (RFC 9110 §10.1.1).
    let out = curl(&[
        "--data-binary",
        &format!("@{}", file.display()),
        &format!("{}/echo", sepia.url()),
    ]);
    out.assert_status(200);
    assert_eq!(out.header("x-body-len"), Some(LARGE.to_string()));
    let seen = origin.single_request();
    assert_eq!(seen.body.len(), LARGE);
    assert!(
        seen.body[..] == data[..],
        "the origin received different bytes"
    );
    assert_eq!(out.body.len(), LARGE);
    assert!(out.body == data, "the echoed download differs");
}

#[test]
fn download_8_mib_matches_the_pattern() {
    let (_origin, sepia) = reverse();
    let out = curl(&[&format!("{}/bytes/{LARGE}", sepia.url())]);
    out.assert_status(200);
    assert_eq!(out.body.len(), LARGE);
    assert!(
        out.body == pattern(LARGE),
        "downloaded bytes differ from the pattern"
    );
}

#[test]
fn three_pipelined_requests_are_answered_in_order() {
    let (origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    client.send(
        b"GET /first HTTP/1.1\r\nHost: app\r\n\r\n\
          POST /echo HTTP/1.1\r\nHost: app\r\nContent-Length: 6\r\n\r\nsecond\
          GET /chunked/3000 HTTP/1.1\r\nHost: app\r\n\r\n",
    );
    let first = client.read_response();
    let second = client.read_response();
    let third = client.read_response();
    assert_eq!((first.status, first.text().as_str()), (200, "GET /first"));
    assert_eq!((second.status, second.text().as_str()), (200, "second"));
    assert_eq!(third.status, 200);
    assert!(third.body == pattern(3000));
    assert_eq!(origin.request_count(), 3);
}

#[test]
fn http10_client_gets_http11_status_line_and_a_closed_connection() {
    let (_origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    client.send(b"GET /chunked/5000 HTTP/1.0\r\nHost: app\r\n\r\n");
    let r = client.read_response();
    assert_eq!(r.version, "HTTP/1.1", "{}", r.raw_head);
    assert_eq!(r.status, 200);
    // RFC 9112 §6.1: chunked must not be sent to an HTTP/1.0 recipient.
    assert!(r.header("transfer-encoding").is_none(), "{}", r.raw_head);
    assert!(r.body == pattern(5000));
    assert!(
        client.wait_closed(Duration::from_secs(5)),
        "HTTP/1.0 connection left open"
    );
}

#[test]
fn http10_client_asking_keep_alive_can_send_a_second_request() {
    let (_origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    client.send(b"GET /bytes/100 HTTP/1.0\r\nHost: app\r\nConnection: keep-alive\r\n\r\n");
    let r = client.read_response();
    assert_eq!(r.status, 200);
    assert!(r.body == pattern(100));
    assert!(r.has_token("connection", "keep-alive"), "{}", r.raw_head);
    client.send(b"GET /bytes/20 HTTP/1.0\r\nHost: app\r\n\r\n");
    let second = client.read_response();
    assert_eq!(second.body, pattern(20));
    assert!(client.wait_closed(Duration::from_secs(5)));
}

#[test]
fn curl_http10() {
    let (origin, sepia) = reverse();
    let out = curl(&["-0", &format!("{}/bytes/2000", sepia.url())]);
    out.assert_status(200);
    assert!(out.body == pattern(2000));
    assert_eq!(origin.single_request().target, "/bytes/2000");
}

#[test]
fn sequential_requests_on_one_client_connection_reuse_origin_connections() {
    let (origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    for i in 0..20 {
        client.send(format!("GET /bytes/{} HTTP/1.1\r\nHost: app\r\n\r\n", 100 + i).as_bytes());
        let r = client.read_response();
        assert_eq!(r.status, 200, "request {i}");
        assert_eq!(r.body.len(), 100 + i);
    }
    assert_eq!(origin.request_count(), 20);
    assert!(
        origin.connections() <= 3,
        "origin accepted {} connections for 20 sequential requests",
        origin.connections()
    );
}

#[test]
fn separate_curl_invocations_reuse_origin_connections() {
    let (origin, sepia) = reverse();
    for i in 0..20 {
        curl(&[&format!("{}/r{i}", sepia.url())]).assert_status(200);
    }
    assert_eq!(origin.request_count(), 20);
    assert!(
        origin.connections() < 20,
        "origin accepted {} connections for 20 requests",
        origin.connections()
    );
}

#[test]
fn host_header_picks_the_route() {
    let (exact, wildcard, fallback) = (Origin::start(), Origin::start(), Origin::start());
    let listen = free_addr();
    let config = format!(
        "[server]\nworkers = 1\nshutdown_grace = \"1s\"\n\n\
         [[listen]]\naddress = \"{listen}\"\nmode = \"reverse\"\n\n\
         [[route]]\nhost = \"a.test\"\norigins = [\"{}\"]\n\n\
         [[route]]\nhost = \"*.b.test\"\norigins = [\"{}\"]\n\n\
         [[route]]\nhost = \"*\"\norigins = [\"{}\"]\n",
        exact.url(),
        wildcard.url(),
        fallback.url()
    );
    let sepia = Sepia::start(&config);
    let cases = [
        ("a.test", &exact),
        ("A.TEST:80", &exact),
        ("x.b.test", &wildcard),
        ("deep.x.b.test", &wildcard),
        ("b.test.example", &fallback),
        ("other", &fallback),
    ];
    for (host, origin) in cases {
        let before = origin.request_count();
        curl(&[
            "-H",
            &format!("Host: {host}"),
            &format!("{}/route", sepia.url()),
        ])
        .assert_status(200);
        assert_eq!(
            origin.request_count(),
            before + 1,
            "Host {host} went to the wrong origin"
        );
    }
    assert_eq!(
        exact.request_count() + wildcard.request_count() + fallback.request_count(),
        6
    );
}

#[test]
fn origins_of_a_route_share_the_load_round_robin() {
    let (a, b) = (Origin::start(), Origin::start());
    let (ua, ub) = (a.url(), b.url());
    let sepia = Sepia::start(&reverse_config(&free_addr(), &[&ua, &ub]));
    for i in 0..10 {
        curl(&[&format!("{}/rr{i}", sepia.url())]).assert_status(200);
    }
    assert_eq!(a.request_count() + b.request_count(), 10);
    assert!(
        a.request_count() >= 3 && b.request_count() >= 3,
        "round-robin split 10 requests {} / {}",
        a.request_count(),
        b.request_count()
    );
}

#[test]
fn an_origin_refusing_connections_is_skipped() {
    let live = Origin::start();
    let dead = format!("http://{}", free_addr());
    let live_url = live.url();
    let sepia = Sepia::start(&reverse_config(&free_addr(), &[&dead, &live_url]));
    for i in 0..6 {
        let out = curl(&[&format!("{}/f{i}", sepia.url())]);
        out.assert_status(200);
        assert_eq!(out.text(), format!("GET /f{i}"));
    }
    assert_eq!(live.request_count(), 6);
}

#[test]
fn expect_100_continue_gets_an_interim_response_before_the_body() {
    let (origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    client.send(
        b"POST /echo HTTP/1.1\r\nHost: app\r\nContent-Length: 11\r\nExpect: 100-continue\r\n\r\n",
    );
    let (status, head) = client.read_single_head();
    assert_eq!(
        status, 100,
        "expected 100 Continue before sending the body, got {head}"
    );
    client.send(b"hello world");
    let r = client.read_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "hello world");
    assert_eq!(origin.single_request().body_len, 11);
}

#[test]
fn curl_small_upload_with_expect_header() {
    let (origin, sepia) = reverse();
    let out = curl(&[
        "-H",
        "Expect: 100-continue",
        "--data-binary",
        "expect me",
        &format!("{}/echo", sepia.url()),
    ]);
    out.assert_status(200);
    assert_eq!(out.text(), "expect me");
    assert_eq!(origin.single_request().body_len, 9);
}

#[test]
fn origin_error_status_passes_through() {
    let (_origin, sepia) = reverse_with("");
    let out = curl(&[&format!("{}/status/404", sepia.url())]);
    out.assert_status(404);
    assert_eq!(out.text(), "status 404");
}

#[test]
fn stale_pooled_origin_connection_is_replaced_transparently() {
    // The origin closes its side right after a keep-alive response, without saying so; the
    // proxy's pooled connection is then dead, and a GET (idempotent, RFC 9110 §9.2.2) sent on
    // it must be retried on a fresh connection rather than failing the client.
    let (origin, sepia) = reverse();
    curl(&[&format!("{}/then-close/10", sepia.url())]).assert_status(200);
    assert!(sepia_e2e::wait_until(Duration::from_secs(5), || origin
        .closed_connections()
        >= 1));
    for i in 0..3 {
        let out = curl(&[&format!("{}/then-close/{}", sepia.url(), 20 + i)]);
        out.assert_status(200);
        assert!(out.body == pattern(20 + i));
    }
    assert_eq!(origin.request_count(), 4);
}

#[test]
fn bodiless_statuses_keep_the_connection_in_sync() {
    let (_origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    for status in [204u16, 304] {
        client.send(format!("GET /status/{status} HTTP/1.1\r\nHost: app\r\n\r\n").as_bytes());
        let r = client.read_response();
        assert_eq!(r.status, status);
        assert!(r.body.is_empty());
        assert!(r.header("transfer-encoding").is_none(), "{}", r.raw_head);
    }
    client.send(b"GET /bytes/33 HTTP/1.1\r\nHost: app\r\n\r\n");
    assert_eq!(client.read_response().body, pattern(33));
}

#[test]
fn client_connection_close_is_honoured() {
    let (_origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    client.send(b"GET /bytes/10 HTTP/1.1\r\nHost: app\r\nConnection: close\r\n\r\n");
    let r = client.read_response();
    assert_eq!(r.body, pattern(10));
    assert!(r.has_token("connection", "close"), "{}", r.raw_head);
    assert!(client.wait_closed(Duration::from_secs(5)));
}

#[test]
fn large_head_under_the_limits_is_forwarded_whole() {
    let (origin, sepia) = reverse();
    let mut request = b"GET /big-head HTTP/1.1\r\nHost: app\r\n".to_vec();
    for i in 0..90 {
        request.extend_from_slice(format!("X-Field-{i}: {}\r\n", "v".repeat(500)).as_bytes());
    }
    request.extend_from_slice(b"\r\n");
    assert!(request.len() > 45_000 && request.len() < 60_000);
    let mut client = RawClient::connect(sepia.addr());
    client.send(&request);
    assert_eq!(client.read_response().status, 200);
    let seen = origin.single_request();
    for i in [0, 45, 89] {
        assert_eq!(
            seen.header(&format!("x-field-{i}")),
            Some("v".repeat(500).as_str())
        );
    }
}

#[test]
fn client_dying_mid_upload_never_delivers_a_complete_request() {
    let (origin, sepia) = reverse();
    let mut client = RawClient::connect(sepia.addr());
    client.send(b"POST /echo HTTP/1.1\r\nHost: app\r\nContent-Length: 100000\r\n\r\n");
    client.send(&pattern(30_000));
    assert!(sepia_e2e::wait_until(Duration::from_secs(5), || origin
        .heads_seen()
        == 1));
    drop(client);
    // The proxy must abort the origin side, not pad or end the body: wait for the origin
    // connection to be closed, then check nothing complete arrived.
    assert!(
        sepia_e2e::wait_until(Duration::from_secs(10), || origin.closed_connections() >= 1),
        "origin connection still open after the client vanished mid-upload"
    );
    assert_eq!(origin.request_count(), 0, "{:#?}", origin.requests());
}
