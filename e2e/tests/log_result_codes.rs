//! Squid's result codes (`%Ss`) and hierarchy codes (`%Sh/%<a`) in the native access log, one
//! situation each, as Squid 5.7 logs them: a forward proxy with the cache on, driven by curl
//! and raw sockets.

use std::time::Duration;

use sepia_e2e::fixtures::forward_with;
use sepia_e2e::{curl, forward_config, free_addr, EchoServer, Origin, RawClient, Sepia, SquidLine};

const LOG_WAIT: Duration = Duration::from_secs(10);

/// What one line must say: `%Ss/%03>Hs`, `%rm`, the end of `%ru`, `%Sh/%<a`, `%mt`.
struct Want<'a> {
    code_status: &'a str,
    method: &'a str,
    url_end: &'a str,
    hier_peer: &'a str,
    mime: &'a str,
}

#[track_caller]
fn check(lines: &[String], want: &[Want<'_>]) {
    assert_eq!(lines.len(), want.len(), "{lines:#?}");
    for (line, w) in lines.iter().zip(want) {
        let l = SquidLine::parse(line);
        l.assert_layout();
        assert_eq!(l.fields[3], w.code_status, "{line:?}");
        assert_eq!(l.method(), w.method, "{line:?}");
        assert!(
            l.url().ends_with(w.url_end),
            "URL ends with {}: {line:?}",
            w.url_end
        );
        assert_eq!(l.fields[8], w.hier_peer, "{line:?}");
        assert_eq!(l.mime_type(), w.mime, "{line:?}");
        assert_eq!(l.fields[2], "127.0.0.1", "{line:?}");
        assert_eq!(l.user(), "-", "{line:?}");
    }
}

/// `curl -x sepia` for `path` on `origin`, with extra curl arguments; returns the status.
fn get(sepia: &Sepia, origin: &Origin, path: &str, args: &[&str]) -> u16 {
    let url = format!("{}{path}", origin.url());
    let proxy = sepia.url();
    let mut all = vec!["-x", &proxy];
    all.extend_from_slice(args);
    all.push(&url);
    curl(&all).status
}

fn want<'a>(
    code_status: &'a str,
    method: &'a str,
    url_end: &'a str,
    hier_peer: &'a str,
    mime: &'a str,
) -> Want<'a> {
    Want {
        code_status,
        method,
        url_end,
        hier_peer,
        mime,
    }
}

const DIRECT: &str = "HIER_DIRECT/127.0.0.1";
const NONE: &str = "HIER_NONE/-";

#[test]
fn cache_outcomes_get_squid_result_codes() {
    let (origin, sepia) = forward_with(&[443], "");
    let s = |path: &str, args: &[&str]| get(&sepia, &origin, path, args);
    assert_eq!(s("/cacheable/a", &[]), 200);
    assert_eq!(s("/cacheable/a", &[]), 200);
    assert_eq!(s("/cacheable/a", &["-I"]), 200);
    assert_eq!(s("/revalidate/r", &[]), 200);
    assert_eq!(s("/cc/max-age=1/m", &[]), 200);
    // max-age=1: two seconds later both are stale whatever the rounding.
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(s("/revalidate/r", &[]), 200); // the origin answers 304
    assert_eq!(s("/cc/max-age=1/m", &[]), 200); // the origin sends a new 200
    assert_eq!(s("/cacheable/a", &["-H", "Cache-Control: no-cache"]), 200);
    assert_eq!(
        s("/cacheable/cold", &["-H", "Cache-Control: only-if-cached"]),
        504
    );
    assert_eq!(s("/status/404", &[]), 404);
    let lines = sepia.wait_for_log_lines(10, LOG_WAIT);
    let plain = "text/plain"; // what the test origin sends
    check(
        &lines,
        &[
            want("TCP_MISS/200", "GET", "/cacheable/a", DIRECT, plain),
            want("TCP_MEM_HIT/200", "GET", "/cacheable/a", NONE, plain),
            want("TCP_MEM_HIT/200", "HEAD", "/cacheable/a", NONE, plain),
            want("TCP_MISS/200", "GET", "/revalidate/r", DIRECT, plain),
            want("TCP_MISS/200", "GET", "/cc/max-age=1/m", DIRECT, plain),
            want(
                "TCP_REFRESH_UNMODIFIED/200",
                "GET",
                "/revalidate/r",
                DIRECT,
                plain,
            ),
            want(
                "TCP_REFRESH_MODIFIED/200",
                "GET",
                "/cc/max-age=1/m",
                DIRECT,
                plain,
            ),
            want(
                "TCP_CLIENT_REFRESH_MISS/200",
                "GET",
                "/cacheable/a",
                DIRECT,
                plain,
            ),
            // Squid 5.7 logs only-if-cached without a stored response as TCP_MISS/504.
            want("TCP_MISS/504", "GET", "/cacheable/cold", NONE, "text/plain"),
            want("TCP_MISS/404", "GET", "/status/404", DIRECT, "text/plain"),
        ],
    );
    // `%<st` counts the head too: a hit of the same object sends at least its body.
    let miss = SquidLine::parse(&lines[0]);
    let hit = SquidLine::parse(&lines[1]);
    assert!(hit.bytes() > 100 && miss.bytes() > 100, "{lines:#?}");
}

#[test]
fn tunnels_refusals_and_parse_errors_get_squid_result_codes() {
    let echo = EchoServer::start();
    let (origin, sepia) = forward_with(&[echo.port()], "[cache]\npurge_allow = [\"10.0.0.0/8\"]\n");
    let target = echo.addr().to_string();

    let mut tunnel = RawClient::connect(sepia.addr());
    tunnel.send(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes());
    assert_eq!(tunnel.read_bodiless_response().status, 200);
    tunnel.send(b"ping");
    assert_eq!(tunnel.read_exact_bytes(4), b"ping");
    tunnel.shutdown_write();
    assert!(tunnel.wait_closed(LOG_WAIT));
    sepia.wait_for_log_lines(1, LOG_WAIT);

    let mut refused = RawClient::connect(sepia.addr());
    refused.send(b"CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n");
    assert_eq!(refused.read_response().status, 403);
    sepia.wait_for_log_lines(2, LOG_WAIT);

    let purge_url = format!("{}/cacheable/p", origin.url());
    let proxy = sepia.url();
    curl(&["-x", &proxy, "-X", "PURGE", &purge_url]).assert_status(403);
    sepia.wait_for_log_lines(3, LOG_WAIT);

    let mut garbage = RawClient::connect(sepia.addr());
    garbage.send(b"GARBAGE\r\n\r\n");
    assert_eq!(garbage.read_response().status, 400);
    sepia.wait_for_log_lines(4, LOG_WAIT);

    let mut origin_form = RawClient::connect(sepia.addr());
    origin_form.send(b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(origin_form.read_response().status, 400);
    let lines = sepia.wait_for_log_lines(5, LOG_WAIT);

    let tunnel_peer = "HIER_DIRECT/127.0.0.1";
    check(
        &lines,
        &[
            want("TCP_TUNNEL/200", "CONNECT", &target, tunnel_peer, "-"),
            want(
                "TCP_DENIED/403",
                "CONNECT",
                "127.0.0.1:1",
                NONE,
                "text/plain",
            ),
            want(
                "TCP_DENIED/403",
                "PURGE",
                "/cacheable/p",
                NONE,
                "text/plain",
            ),
            want(
                "NONE_NONE/400",
                "NONE",
                "error:invalid-request",
                NONE,
                "text/plain",
            ),
            want("NONE_NONE/400", "GET", "/x", NONE, "text/plain"),
        ],
    );
    let tunnel = SquidLine::parse(&lines[0]);
    assert_eq!(
        tunnel.url(),
        target,
        "CONNECT logs the authority as received"
    );
    assert!(
        tunnel.bytes() >= 4,
        "the tunnelled bytes count: {}",
        tunnel.line
    );
}

#[test]
fn clients_outside_forward_allow_are_logged_denied() {
    let origin = Origin::start();
    let config = forward_config(&free_addr(), &["10.0.0.0/8"], &[443]);
    let sepia = Sepia::start(&config);
    assert_eq!(get(&sepia, &origin, "/x", &[]), 403);
    let lines = sepia.wait_for_log_lines(1, LOG_WAIT);
    check(
        &lines,
        &[want("TCP_DENIED/403", "GET", "/x", NONE, "text/plain")],
    );
    assert_eq!(origin.request_count(), 0);
}

#[test]
fn a_client_served_from_another_clients_fill_is_a_collapsed_hit() {
    let (origin, sepia) = forward_with(&[443], "");
    let path = "/slow-cacheable/4000/800";
    let sepia = std::sync::Arc::new(sepia);
    let first = {
        let (sepia, url) = (sepia.clone(), origin.url());
        std::thread::spawn(move || {
            let proxy = sepia.url();
            curl(&["-x", &proxy, &format!("{url}{path}")]).status
        })
    };
    // The second client arrives while the first fill is still streaming.
    assert!(sepia_e2e::wait_until(LOG_WAIT, || origin.request_count() == 1));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(get(&sepia, &origin, path, &[]), 200);
    assert_eq!(first.join().unwrap(), 200);
    let mut lines = sepia.wait_for_log_lines(2, LOG_WAIT);
    lines.sort_by_key(|l| SquidLine::parse(l).fields[3].clone());
    let mime = "application/octet-stream";
    check(
        &lines,
        &[
            want("TCP_CF_HIT/200", "GET", path, NONE, mime),
            want("TCP_MISS/200", "GET", path, DIRECT, mime),
        ],
    );
    assert_eq!(origin.request_count(), 1);
}
