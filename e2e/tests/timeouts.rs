//! Failures and timeouts: dead and hung origins, an origin dying mid-body, slow and idle
//! clients. Each timeout is configured short (1 s) and asserted with a generous upper bound.

use std::time::{Duration, Instant};

use sepia_e2e::fixtures::reverse_with;
use sepia_e2e::{curl, free_addr, pattern, reverse_config, Origin, RawClient, Sepia};

#[test]
fn dead_origin_gives_502_with_a_small_body() {
    let dead = format!("http://{}", free_addr());
    let sepia = Sepia::start(&reverse_config(&free_addr(), &[&dead]));
    let started = Instant::now();
    let out = curl(&[&format!("{}/anything", sepia.url())]);
    assert_eq!(out.status, 502, "{out:?}");
    assert!(!out.body.is_empty(), "502 without an explanation");
    assert!(
        out.body.len() < 4096,
        "502 body of {} bytes",
        out.body.len()
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn hung_origin_gives_504_after_origin_first_byte() {
    let (origin, sepia) = reverse_with("[timeouts]\norigin_first_byte = \"1s\"\n");
    let mut client = RawClient::connect(sepia.addr());
    let started = Instant::now();
    client.send(b"GET /hang HTTP/1.1\r\nHost: app\r\n\r\n");
    let r = client.read_response();
    let elapsed = started.elapsed();
    assert_eq!(r.status, 504, "{}", r.raw_head);
    assert!(
        elapsed >= Duration::from_millis(900),
        "504 after only {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_secs(3),
        "504 after {elapsed:?}, configured 1s"
    );
    assert_eq!(origin.request_count(), 1);
}

#[test]
fn slow_origin_within_origin_first_byte_is_served() {
    let (_origin, sepia) = reverse_with("[timeouts]\norigin_first_byte = \"5s\"\n");
    let out = curl(&[&format!("{}/delay/300", sepia.url())]);
    out.assert_status(200);
    assert_eq!(out.text(), "delayed");
}

#[test]
fn client_sending_half_a_head_gets_408() {
    let (origin, sepia) = reverse_with("[timeouts]\nrequest_head = \"1s\"\n");
    let mut client = RawClient::connect(sepia.addr());
    let started = Instant::now();
    client.send(b"GET /slow HTTP/1.1\r\nHost: app\r\nX-Partial: ");
    let r = client.read_response();
    let elapsed = started.elapsed();
    assert_eq!(r.status, 408, "{}", r.raw_head);
    assert!(
        elapsed < Duration::from_secs(3),
        "408 after {elapsed:?}, configured 1s"
    );
    assert!(client.wait_closed(Duration::from_secs(5)));
    assert_eq!(origin.heads_seen(), 0);
}

/// A reverse Sepia with `extra_toml` and a keep-alive client that had one response from it.
fn served_once(extra_toml: &str) -> (Origin, Sepia, RawClient) {
    let (origin, sepia) = reverse_with(extra_toml);
    let mut client = RawClient::connect(sepia.addr());
    client.send(b"GET /bytes/10 HTTP/1.1\r\nHost: app\r\n\r\n");
    assert_eq!(client.read_response().body, pattern(10));
    (origin, sepia, client)
}

#[test]
fn idle_client_connection_is_closed_after_client_idle() {
    let (_origin, _sepia, mut client) = served_once("[timeouts]\nclient_idle = \"1s\"\n");
    let idle_from = Instant::now();
    assert!(
        client.wait_closed(Duration::from_secs(5)),
        "idle connection kept past 5s"
    );
    assert!(
        idle_from.elapsed() >= Duration::from_millis(800),
        "closed after {:?}",
        idle_from.elapsed()
    );
}

#[test]
fn a_connection_idle_long_enough_to_be_parked_is_served_again() {
    // A busy connection first (requests while its idle timer runs), then silence past the
    // point where it is parked (one to two seconds), then another request on the same socket.
    let (origin, sepia) = reverse_with("[timeouts]\nclient_idle = \"30s\"\n");
    let mut client = RawClient::connect(sepia.addr());
    for _ in 0..5 {
        client.send(b"GET /bytes/10 HTTP/1.1\r\nHost: app\r\n\r\n");
        assert_eq!(client.read_response().body, pattern(10));
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_millis(2_500));
    client.send(b"GET /bytes/20 HTTP/1.1\r\nHost: app\r\n\r\n");
    assert_eq!(client.read_response().body, pattern(20));
    assert_eq!(origin.request_count(), 6);
}

#[test]
fn a_parked_connection_closes_at_client_idle_not_before() {
    // Past IDLE_RELEASE (1 s) the connection is parked, and its deadline is a second of the
    // server's idle clock: closed no earlier than client_idle, at most about a second later.
    let (_origin, _sepia, mut client) = served_once("[timeouts]\nclient_idle = \"3s\"\n");
    let idle_from = Instant::now();
    assert!(
        client.wait_closed(Duration::from_secs(10)),
        "parked connection kept past 10s"
    );
    let idle = idle_from.elapsed();
    assert!(
        idle >= Duration::from_millis(2_900),
        "closed after {idle:?}"
    );
    assert!(
        idle <= Duration::from_millis(5_500),
        "closed after {idle:?}"
    );
}

#[test]
fn many_parked_connections_are_each_served_again() {
    // More idle clients than the parking lot takes events at once (256), all woken together,
    // some of them twice (their slots reused), and clients that close while parked.
    let (origin, sepia) = reverse_with("[timeouts]\nclient_idle = \"30s\"\n");
    let mut clients: Vec<RawClient> = (0..600)
        .map(|_| {
            let mut client = RawClient::connect(sepia.addr());
            client.send(b"GET /bytes/10 HTTP/1.1\r\nHost: app\r\n\r\n");
            assert_eq!(client.read_response().body, pattern(10));
            client
        })
        .collect();
    clients.truncate(550); // 50 clients close while parked
    for round in 0..2 {
        std::thread::sleep(Duration::from_millis(2_500));
        for client in &mut clients {
            client.send(b"GET /bytes/20 HTTP/1.1\r\nHost: app\r\n\r\n");
        }
        for (i, client) in clients.iter_mut().enumerate() {
            let body = client.read_response().body;
            assert_eq!(body, pattern(20), "client {i}, round {round}");
        }
    }
    assert!(origin.request_count() >= 1);
}

#[test]
fn sigterm_closes_a_parked_connection_at_once() {
    let (_origin, mut sepia, mut client) = served_once("[timeouts]\nclient_idle = \"60s\"\n");
    // Parked after one to two seconds without a request.
    std::thread::sleep(Duration::from_millis(2_500));
    let started = Instant::now();
    sepia.send_signal("TERM");
    assert!(client.wait_closed(Duration::from_secs(5)), "still open");
    assert!(
        started.elapsed() < Duration::from_millis(700),
        "closed {:?} after SIGTERM",
        started.elapsed()
    );
    assert!(sepia.terminate(Duration::from_secs(5)).is_some());
}

#[test]
fn sigterm_closes_a_waiting_keep_alive_connection_after_a_last_request_wait() {
    // A connection waiting for its next request (not parked yet) gets half a second for a
    // request already on its way, then is closed: not when the grace period (1 s here) ends,
    // nor once it is parked.
    let (_origin, mut sepia) = reverse_with("");
    let mut client = RawClient::connect(sepia.addr());
    client.send(b"GET /bytes/10 HTTP/1.1\r\nHost: app\r\n\r\n");
    assert_eq!(client.read_response().body, pattern(10));
    let started = Instant::now();
    sepia.send_signal("TERM");
    assert!(client.wait_closed(Duration::from_secs(5)), "still open");
    let closed = started.elapsed();
    assert!(
        closed >= Duration::from_millis(400) && closed < Duration::from_millis(900),
        "closed {closed:?} after SIGTERM"
    );
    assert!(sepia.terminate(Duration::from_secs(5)).is_some());
}

#[test]
fn a_request_sent_just_after_sigterm_on_a_kept_connection_is_answered_and_closes_it() {
    // A busy client's next request crossing the start of shutdown is served, not lost: the
    // answer says `Connection: close`, then the connection ends in order.
    let (_origin, mut sepia) = reverse_with("");
    let mut client = RawClient::connect(sepia.addr());
    client.send(b"GET /bytes/10 HTTP/1.1\r\nHost: app\r\n\r\n");
    assert_eq!(client.read_response().body, pattern(10));
    sepia.send_signal("TERM");
    std::thread::sleep(Duration::from_millis(100));
    client.send(b"GET /bytes/20 HTTP/1.1\r\nHost: app\r\n\r\n");
    let answer = client.read_response();
    assert_eq!(answer.body, pattern(20));
    assert!(
        answer.has_token("Connection", "close"),
        "{}",
        answer.raw_head
    );
    assert!(client.wait_closed(Duration::from_secs(5)), "still open");
    assert!(sepia.terminate(Duration::from_secs(5)).is_some());
}

#[test]
fn origin_dying_mid_body_is_not_passed_off_as_complete() {
    let (_origin, sepia) = reverse_with("");
    let mut client = RawClient::connect(sepia.addr());
    client.send(b"GET /die-mid-body HTTP/1.1\r\nHost: app\r\n\r\n");
    // Either no response, or one whose body ends short (a truncated Content-Length body or a
    // chunked body without its last chunk): never a complete message.
    match client.try_read_response() {
        Ok(r) => panic!(
            "got a complete response of {} bytes:\n{}",
            r.body.len(),
            r.raw_head
        ),
        Err(e) => assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
            ),
            "unexpected error {e}"
        ),
    }
    let out = curl(&[&format!("{}/die-mid-body", sepia.url())]);
    assert_ne!(out.exit_code, 0, "curl saw a complete response: {out:?}");
    assert!(out.body.len() < 100_000);
}
