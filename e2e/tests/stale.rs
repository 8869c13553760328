//! Serving stale responses (RFC 5861): `stale-while-revalidate` answers at once from the stale
//! copy and refreshes it in the background, once; without it a stale response is revalidated
//! before the client is answered.

use std::time::Duration;

use sepia_e2e::fixtures::reverse;
use sepia_e2e::{wait_until, RawClient, Response, Sepia};

fn get(sepia: &Sepia, path: &str) -> Response {
    let mut client = RawClient::connect(sepia.addr());
    client.send(format!("GET {path} HTTP/1.1\r\nHost: app\r\n\r\n").as_bytes());
    client.read_response()
}

#[test]
fn stale_while_revalidate_serves_stale_then_refreshes_in_the_background() {
    let (origin, sepia) = reverse();
    // max-age=3: long enough that the refreshed copy is surely still fresh when asked for
    // again, with the proxy's whole-second clock.
    let path = "/cc/max-age=3,stale-while-revalidate=60/swr";
    let first = get(&sepia, path);
    assert_eq!(first.status, 200);
    assert_eq!(origin.request_count(), 1);
    std::thread::sleep(Duration::from_millis(4100));

    // Stale but within the window: answered from the cache without waiting for the origin.
    let stale = get(&sepia, path);
    assert_eq!(stale.status, 200);
    assert_eq!(stale.body, first.body, "the stale copy itself");
    let status = stale.header("cache-status").unwrap_or("");
    assert!(
        status.contains("hit") && status.contains("stale-while-revalidate"),
        "{status}"
    );
    // ... and exactly one background request refreshes it.
    assert!(
        wait_until(Duration::from_secs(5), || origin.request_count() == 2),
        "no background revalidation reached the origin"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        origin.request_count(),
        2,
        "one refresh, not one per request"
    );

    // The refreshed copy is fresh: a plain hit (the stale copy would still say
    // stale-while-revalidate; Age is too coarse, in whole seconds, to compare reliably).
    let fresh = get(&sepia, path);
    let status = fresh.header("cache-status").unwrap_or("");
    assert!(
        status.contains("hit") && !status.contains("stale"),
        "{status}"
    );
    assert!(fresh.header("age").is_some(), "Age on a hit");
    assert_eq!(origin.request_count(), 2);
}

#[test]
fn without_stale_while_revalidate_a_stale_response_waits_for_the_origin() {
    let (origin, sepia) = reverse();
    let path = "/cc/max-age=1/plain-stale";
    get(&sepia, path);
    std::thread::sleep(Duration::from_millis(2100));
    let again = get(&sepia, path);
    assert_eq!(again.status, 200);
    assert_eq!(
        origin.request_count(),
        2,
        "revalidated (or refetched) before answering"
    );
    let status = again.header("cache-status").unwrap_or("");
    assert!(status.contains("fwd=stale"), "{status}");
}
