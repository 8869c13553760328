//! Passive origin health with the real binary: consecutive connection failures mark an origin
//! down (visible in the admin listener's `/metrics` and in Sepia's log); requests skip it; a
//! route whose origins are all down answers 503 at once, with Retry-After and without trying to
//! connect, or a stale copy where `stale-if-error` allows (RFC 5861 §4); after the time down
//! one trial request brings a restarted origin back.

use std::time::{Duration, Instant};

use sepia_e2e::fixtures::with_admin;
use sepia_e2e::{
    curl, free_addr, reverse_config, wait_until, CurlOutput, Origin, RawClient, Sepia,
};

/// Consecutive failures that mark an origin down (the default), and how long it stays down.
const FAIL_AFTER: usize = 3;
const DOWN_FOR: Duration = Duration::from_secs(5);

/// A reverse proxy to `origins` with an admin listener; returns the admin base URL too.
fn start(origins: &[&str]) -> (Sepia, String) {
    let config = reverse_config(&free_addr(), origins)
        + &format!("[route.health]\ndown_for = \"{}s\"\n\n", DOWN_FOR.as_secs());
    with_admin(&config, "")
}

fn get(sepia: &Sepia, path: &str) -> CurlOutput {
    curl(&["-m", "20", &format!("{}{path}", sepia.url())])
}

/// `sepia_origin_up` for `origin` ("host:port") of the catch-all route, if scraped.
fn origin_up(base: &str, origin: &str) -> Option<f64> {
    let text = curl(&[&format!("{base}/metrics")]).text();
    let name = format!("sepia_origin_up{{route=\"*\",origin=\"{origin}\"}} ");
    let line = text.lines().find(|l| l.starts_with(&name))?;
    line[name.len()..].trim().parse().ok()
}

#[test]
fn a_refusing_origin_is_marked_down_and_skipped_without_errors() {
    let live = Origin::start();
    let dead = free_addr();
    let (sepia, base) = start(&[&format!("http://{dead}"), &live.url()]);
    assert_eq!(origin_up(&base, &dead), Some(1.0), "up until it fails");
    // Round-robin starts on the dead origin every other request; each of those fails over to
    // the live one, so no client sees an error.
    for i in 0..4 * FAIL_AFTER {
        get(&sepia, &format!("/hello/{i}")).assert_status(200);
    }
    assert_eq!(origin_up(&base, &dead), Some(0.0), "marked down");
    assert_eq!(origin_up(&base, &live.addr().to_string()), Some(1.0));
    assert!(
        sepia.stderr().contains("marked down"),
        "the transition is logged: {}",
        sepia.stderr()
    );
    // While down it is skipped: every request goes straight to the live origin.
    let before = live.request_count();
    for i in 0..6 {
        get(&sepia, &format!("/hello/after-{i}")).assert_status(200);
    }
    assert_eq!(live.request_count() - before, 6);
    let stats = curl(&[&format!("{base}/stats")])
        .text()
        .replace([' ', '\n'], "");
    assert!(
        stats.contains(&format!("\"origin\":\"{dead}\"")) && stats.contains("\"up\":false"),
        "/stats lists the origin as down: {stats}"
    );
}

#[test]
fn all_origins_down_answers_503_at_once_then_a_restarted_origin_comes_back() {
    let addr = free_addr();
    let (sepia, base) = start(&[&format!("http://{addr}")]);
    for i in 0..FAIL_AFTER {
        // Refused at once (502); on a loaded machine a connect may time out instead (504).
        let r = get(&sepia, &format!("/hello/{i}"));
        assert!(
            r.exit_code == 0 && matches!(r.status, 502 | 504),
            "{} {}",
            r.status,
            r.text()
        );
    }
    let down_since = Instant::now();
    assert_eq!(origin_up(&base, &addr), Some(0.0));
    // The origin comes back on the same address: counted, so a connect attempt would show.
    let origin = Origin::start_on(&addr);
    // Timed on a connection already open, so that only Sepia's answer is measured.
    let mut client = RawClient::connect(sepia.addr());
    let started = Instant::now();
    client.send(b"GET /hello/down HTTP/1.1\r\nHost: app\r\n\r\n");
    let r = client.read_response();
    let took = started.elapsed();
    assert_eq!(r.status, 503);
    assert!(took < Duration::from_millis(200), "took {took:?}");
    assert!(r.header("retry-after").is_some(), "Retry-After on the 503");
    assert!(r.text().contains("down"), "{}", r.text());
    assert_eq!(
        origin.connections(),
        0,
        "no connection attempted while down"
    );
    assert!(
        wait_until(Duration::from_secs(5), || sepia
            .stdout()
            .contains("TCP_MISS/503")),
        "the 503 is logged: {}",
        sepia.stdout()
    );
    // After the time down one trial goes through, succeeds, and brings it back up.
    let back = wait_until(DOWN_FOR * 3, || get(&sepia, "/hello/trial").status == 200);
    assert!(back, "the restarted origin never came back");
    assert!(down_since.elapsed() >= DOWN_FOR - Duration::from_secs(1));
    assert_eq!(origin_up(&base, &addr), Some(1.0));
    assert!(sepia.stderr().contains("up again"), "{}", sepia.stderr());
    get(&sepia, "/hello/after").assert_status(200);
}

#[test]
fn a_stale_copy_with_stale_if_error_is_served_while_the_origin_is_down() {
    let origin = Origin::start();
    let addr = origin.addr().to_string();
    let (sepia, base) = start(&[&origin.url()]);
    let path = "/cc/max-age=1,stale-if-error=600/sie";
    let first = get(&sepia, path);
    first.assert_status(200);
    drop(origin);
    std::thread::sleep(Duration::from_millis(2100));
    // Stale and the origin refuses: the stale copy, through the failures that mark it down
    // and while it is down.
    for _ in 0..FAIL_AFTER + 3 {
        let r = get(&sepia, path);
        r.assert_status(200);
        assert_eq!(r.text(), first.text(), "the stored copy");
        assert!(r.header("age").is_some(), "Age on a stale copy");
    }
    assert_eq!(origin_up(&base, &addr), Some(0.0));
    // Without a stored copy the route answers 503.
    get(&sepia, "/hello/none").assert_status(503);
}
