//! Forward mode: absolute-form requests, CONNECT tunnels, and the access rules
//! (`[forward] allow` and `connect_ports`).

use std::io::Write;
use std::time::Duration;

use sepia_e2e::fixtures::{forward, forward_with};
use sepia_e2e::{curl, forward_config, free_addr, pattern, EchoServer, Origin, RawClient, Sepia};

const LARGE: usize = 8 * 1024 * 1024;

#[test]
fn absolute_form_get_is_sent_to_the_origin_in_origin_form() {
    let (origin, sepia) = forward();
    let authority = origin.addr().to_string();
    let mut client = RawClient::connect(sepia.addr());
    client.send(
        format!(
            "GET http://{authority}/bytes/100?q=1 HTTP/1.1\r\nHost: {authority}\r\n\
             Proxy-Connection: keep-alive\r\n\r\n"
        )
        .as_bytes(),
    );
    let r = client.read_response();
    assert_eq!(r.status, 200);
    assert!(r.body == pattern(100));
    let seen = origin.single_request();
    // RFC 9112 §3.2.1: toward an origin server the target is origin-form.
    assert_eq!(seen.target, "/bytes/100?q=1", "{}", seen.raw_head);
    assert_eq!(seen.header("host"), Some(authority.as_str()));
    assert!(
        seen.header("proxy-connection").is_none(),
        "{}",
        seen.raw_head
    );
    assert!(
        seen.headers_named("via").join(",").contains("sepia"),
        "{}",
        seen.raw_head
    );
}

#[test]
fn curl_through_the_proxy_with_every_response_framing() {
    let (origin, sepia) = forward();
    let proxy = sepia.url();
    for path in ["/bytes/70000", "/chunked/70000", "/close/70000"] {
        let out = curl(&["-x", &proxy, &format!("{}{path}", origin.url())]);
        out.assert_status(200);
        assert!(
            out.body == pattern(70_000),
            "{path}: body differs ({} bytes)",
            out.body.len()
        );
    }
    let head = curl(&["-x", &proxy, "-I", &format!("{}/bytes/70000", origin.url())]);
    head.assert_status(200);
    assert_eq!(head.header("content-length").as_deref(), Some("70000"));
    assert_eq!(origin.request_count(), 4);
}

#[test]
fn post_and_chunked_put_through_the_proxy() {
    let (origin, sepia) = forward();
    let proxy = sepia.url();
    let url = format!("{}/echo", origin.url());
    let out = curl(&["-x", &proxy, "--data-binary", "form body", &url]);
    out.assert_status(200);
    assert_eq!(out.text(), "form body");
    let out = curl(&[
        "-x",
        &proxy,
        "-X",
        "PUT",
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        "chunked body",
        &url,
    ]);
    out.assert_status(200);
    assert_eq!(out.text(), "chunked body");
    let requests = origin.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        (requests[0].method.as_str(), requests[0].body_len),
        ("POST", 9)
    );
    assert_eq!(
        (requests[1].method.as_str(), requests[1].body_len),
        ("PUT", 12)
    );
}

#[test]
fn eight_mib_both_ways_through_the_forward_proxy() {
    let (origin, sepia) = forward();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("upload");
    let data: Vec<u8> = pattern(LARGE).into_iter().rev().collect();
    std::fs::write(&file, &data).unwrap();
    let up = curl(&[
        "-x",
        &sepia.url(),
        "--data-binary",
        &format!("@{}", file.display()),
        &format!("{}/echo", origin.url()),
    ]);
    up.assert_status(200);
    assert_eq!(up.header("x-body-len"), Some(LARGE.to_string()));
    assert!(
        origin.single_request().body[..] == data[..],
        "origin got different bytes"
    );
    assert!(up.body == data, "echoed bytes differ");
    let down = curl(&[
        "-x",
        &sepia.url(),
        &format!("{}/chunked/{LARGE}", origin.url()),
    ]);
    down.assert_status(200);
    assert_eq!(down.body.len(), LARGE);
    assert!(down.body == pattern(LARGE), "downloaded bytes differ");
}

#[test]
fn sequential_absolute_form_requests_reuse_origin_connections() {
    let (origin, sepia) = forward();
    let authority = origin.addr().to_string();
    let mut client = RawClient::connect(sepia.addr());
    for i in 0..10 {
        client.send(
            format!("GET http://{authority}/n{i} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes(),
        );
        assert_eq!(client.read_response().text(), format!("GET /n{i}"));
    }
    assert!(
        origin.connections() < 10,
        "{} origin connections",
        origin.connections()
    );
}

#[test]
fn connect_tunnel_carries_bytes_both_ways() {
    let echo = EchoServer::start();
    let (_origin, sepia) = forward_with(&[echo.port()], "");
    let target = echo.addr().to_string();
    let mut client = RawClient::connect(sepia.addr());
    client.send(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes());
    let r = client.read_bodiless_response();
    assert_eq!(
        (r.version.as_str(), r.status),
        ("HTTP/1.1", 200),
        "{}",
        r.raw_head
    );
    // Write from another thread while reading, so neither side's buffers can deadlock us.
    let data = pattern(1024 * 1024);
    let sent = data.clone();
    let mut writer = client.writer_handle();
    let sender = std::thread::spawn(move || {
        for chunk in sent.chunks(7919) {
            writer.write_all(chunk).unwrap();
        }
    });
    let back = client.read_exact_bytes(data.len());
    sender.join().unwrap();
    assert!(back == data, "tunnelled bytes differ");
    assert_eq!(echo.connections(), 1);
    // Closing our side ends the tunnel: the echo server half-closes, and so must the proxy.
    client.shutdown_write();
    assert!(
        client.wait_closed(Duration::from_secs(10)),
        "tunnel not closed after both sides ended"
    );
}

#[test]
fn curl_over_a_connect_tunnel() {
    let origin = Origin::start();
    // connect_ports must name the origin's port for curl -p to tunnel to it.
    let config = forward_config(&free_addr(), &["127.0.0.0/8"], &[origin.port()]);
    let sepia = Sepia::start(&config);
    let out = curl(&[
        "-p",
        "-x",
        &sepia.url(),
        &format!("{}/bytes/5000", origin.url()),
    ]);
    out.assert_status(200);
    assert!(out.body == pattern(5000));
    assert!(
        out.headers
            .to_ascii_lowercase()
            .contains("200 connection established"),
        "{}",
        out.headers
    );
    // Through a tunnel the origin sees curl's own request, untouched by the proxy.
    assert!(origin.single_request().header("via").is_none());
}

#[test]
fn connect_to_a_port_not_allowed_is_refused() {
    let echo = EchoServer::start();
    let (_origin, sepia) = forward_with(&[443], "");
    let target = echo.addr().to_string();
    let mut client = RawClient::connect(sepia.addr());
    client.send(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes());
    let r = client.read_response();
    assert_eq!(r.status, 403, "{}", r.raw_head);
    assert_eq!(
        echo.connections(),
        0,
        "the proxy connected to a forbidden port"
    );
}

#[test]
fn client_outside_allow_is_refused() {
    let origin = Origin::start();
    let echo = EchoServer::start();
    let config = forward_config(&free_addr(), &["10.0.0.0/8"], &[echo.port()]);
    let sepia = Sepia::start(&config);
    let out = curl(&["-x", &sepia.url(), &format!("{}/secret", origin.url())]);
    assert_eq!(out.status, 403, "{out:?}");
    let target = echo.addr().to_string();
    let mut client = RawClient::connect(sepia.addr());
    client.send(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes());
    assert_eq!(client.read_response().status, 403);
    assert_eq!(origin.heads_seen(), 0);
    assert_eq!(echo.connections(), 0);
}

#[test]
fn hostnames_are_resolved() {
    let (origin, sepia) = forward();
    let url = format!("http://localhost:{}/named", origin.port());
    let out = curl(&["-x", &sepia.url(), &url]);
    out.assert_status(200);
    assert_eq!(out.text(), "GET /named");
    assert_eq!(
        origin.single_request().header("host"),
        Some(format!("localhost:{}", origin.port()).as_str())
    );
}

#[test]
fn connect_to_a_closed_port_is_answered_with_an_error() {
    let closed: u16 = free_addr().rsplit(':').next().unwrap().parse().unwrap();
    let (_origin, sepia) = forward_with(&[closed], "");
    let mut client = RawClient::connect(sepia.addr());
    client.send(
        format!("CONNECT 127.0.0.1:{closed} HTTP/1.1\r\nHost: 127.0.0.1:{closed}\r\n\r\n")
            .as_bytes(),
    );
    let r = client.read_response();
    assert!(
        (502..=504).contains(&r.status),
        "CONNECT to a closed port: {}",
        r.raw_head
    );
}

#[test]
fn absolute_form_to_a_dead_origin_is_502() {
    let (_origin, sepia) = forward();
    let out = curl(&["-x", &sepia.url(), &format!("http://{}/x", free_addr())]);
    assert_eq!(out.status, 502, "{out:?}");
}
