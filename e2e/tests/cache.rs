//! The HTTP cache (RFC 9111) seen from outside: what is stored and reused, what is not, and how
//! stored responses are revalidated, purged, invalidated and served partially. The key evidence
//! of a hit is the origin's request count: a response served from the cache never reaches it.
//! Origin routes for these tests are described in `src/origin_cache_routes.rs`.

use std::io;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use sepia_e2e::fixtures::{reverse, reverse_with};
use sepia_e2e::{
    pattern, sha256_hex, wait_until, Origin, RawClient, Response, Sepia, REVALIDATE_BODY,
};

/// Sends one request (`METHOD PATH`, `Host: app`, the `extra` field lines) on a new connection
/// and reads the response.
fn send(sepia: &Sepia, method: &str, path: &str, extra: &[(&str, &str)]) -> Response {
    let mut client = RawClient::connect(sepia.addr());
    client.send(request(method, path, extra).as_bytes());
    if method == "HEAD" {
        client.read_head_response()
    } else {
        client.read_response()
    }
}

fn get(sepia: &Sepia, path: &str) -> Response {
    send(sepia, "GET", path, &[])
}

fn request(method: &str, path: &str, extra: &[(&str, &str)]) -> String {
    let fields: String = extra.iter().map(|(n, v)| format!("{n}: {v}\r\n")).collect();
    format!("{method} {path} HTTP/1.1\r\nHost: app\r\n{fields}\r\n")
}

/// Asserts the origin has received exactly `n` requests, listing them otherwise.
#[track_caller]
fn assert_origin_requests(origin: &Origin, n: usize, when: &str) {
    let seen = origin.requests();
    assert_eq!(
        seen.len(),
        n,
        "{when}: origin requests {:?}",
        seen.iter()
            .map(|r| format!("{} {}", r.method, r.target))
            .collect::<Vec<_>>()
    );
}

fn cache_status(r: &Response) -> &str {
    r.header("cache-status").unwrap_or("")
}

/// Asserts that reading a response fails because the connection ended early (EOF or reset),
/// not because nothing arrived before the timeout.
#[track_caller]
fn assert_aborted(client: &mut RawClient, who: &str) {
    client.set_read_timeout(Duration::from_secs(10));
    match client.try_read_response() {
        Ok(r) => panic!(
            "{who}: got a complete response (status {}, {} body bytes, {:?}) from a fill whose \
             origin died mid-body",
            r.status,
            r.body.len(),
            r.header("cache-status")
        ),
        Err(e) => assert!(
            matches!(
                e.kind(),
                io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
            ),
            "{who}: expected an aborted connection, got {e} ({:?})",
            e.kind()
        ),
    }
}

#[test]
fn hundred_concurrent_clients_of_a_slow_cold_object_share_one_origin_fetch() {
    const CLIENTS: usize = 100;
    const LEN: usize = 256 * 1024;
    let (origin, sepia) = reverse();
    let path = format!("/slow-cacheable/{LEN}/1000");
    let wire = request("GET", &path, &[]);
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            let wire = wire.clone();
            let addr = sepia.addr();
            std::thread::spawn(move || {
                let mut client = RawClient::connect(addr);
                barrier.wait();
                client.send(wire.as_bytes());
                let r = client.read_response();
                (
                    r.status,
                    r.body.len(),
                    sha256_hex(&r.body),
                    cache_status(&r).to_string(),
                )
            })
        })
        .collect();
    let results: Vec<_> = clients
        .into_iter()
        .map(|c| c.join().expect("client thread"))
        .collect();
    let want = sha256_hex(&pattern(LEN));
    for (i, (status, len, digest, cs)) in results.iter().enumerate() {
        assert_eq!(
            (*status, *len, digest.as_str()),
            (200, LEN, want.as_str()),
            "client {i} ({cs})"
        );
    }
    assert_origin_requests(&origin, 1, "100 concurrent GETs of one cold URL");
    let collapsed = results.iter().filter(|r| r.3.contains("collapsed")).count();
    eprintln!("{collapsed} of {CLIENTS} clients were served from the fill in progress");
    assert!(
        collapsed > 0,
        "no client was collapsed onto the 1 s fill: {:?}",
        results.iter().map(|r| &r.3).collect::<Vec<_>>()
    );
}

#[test]
fn origin_dying_mid_body_aborts_the_client_and_stores_nothing() {
    let (origin, sepia) = reverse();
    // Control: the same proxy stores a complete response of the same kind.
    get(&sepia, "/cc/max-age=60/complete");
    get(&sepia, "/cc/max-age=60/complete");
    assert_origin_requests(&origin, 1, "GET, GET of a complete storable response");
    let path = "/die-cacheable/0";
    for attempt in 1..=2 {
        let mut client = RawClient::connect(sepia.addr());
        client.send(request("GET", path, &[]).as_bytes());
        assert_aborted(&mut client, &format!("request {attempt}"));
        assert_origin_requests(&origin, 1 + attempt, "each GET after an incomplete fill");
    }
}

#[test]
fn clients_collapsed_on_a_fill_whose_origin_dies_are_all_aborted() {
    let (origin, sepia) = reverse();
    // The origin sends the head and 1000 of 100000 bytes, then waits 1.5 s before closing.
    let path = "/die-cacheable/1500";
    let mut first = RawClient::connect(sepia.addr());
    first.send(request("GET", path, &[]).as_bytes());
    assert!(
        wait_until(Duration::from_secs(5), || origin.request_count() == 1),
        "the first request never reached the origin"
    );
    // Let the proxy publish the response head to the store before the second client asks.
    std::thread::sleep(Duration::from_millis(200));
    let mut second = RawClient::connect(sepia.addr());
    second.send(request("GET", path, &[]).as_bytes());
    assert_aborted(&mut first, "the client that started the fill");
    assert_aborted(&mut second, "the client collapsed onto the fill");
    assert_origin_requests(&origin, 1, "two collapsed GETs");
    // Nothing was stored: the next GET goes to the origin again.
    let mut third = RawClient::connect(sepia.addr());
    third.send(request("GET", path, &[]).as_bytes());
    assert!(
        wait_until(Duration::from_secs(5), || origin.request_count() == 2),
        "the GET after an aborted fill did not reach the origin: {} requests",
        origin.request_count()
    );
}

#[test]
fn vary_variants_are_stored_apart_and_served_to_matching_clients() {
    let (origin, sepia) = reverse();
    let path = "/vary-lang/greeting";
    for (i, lang) in ["en", "fr", "en", "fr"].into_iter().enumerate() {
        let r = send(&sepia, "GET", path, &[("Accept-Language", lang)]);
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), format!("lang={lang}"), "request {i} ({lang})");
        let want = if i < 2 { i + 1 } else { 2 };
        assert_origin_requests(&origin, want, &format!("after request {i} ({lang})"));
    }
}

#[test]
fn purge_removes_a_stored_response_and_reports_what_it_did() {
    let (origin, sepia) = reverse();
    let path = "/cc/max-age=60/purge-me";
    let stored = get(&sepia, path);
    assert_eq!(stored.status, 200);
    assert_eq!(get(&sepia, path).body, stored.body);
    assert_origin_requests(&origin, 1, "GET, GET (hit)");

    let purged = send(&sepia, "PURGE", path, &[]);
    assert_eq!(
        purged.status, 200,
        "PURGE of a stored URL: {}",
        purged.raw_head
    );
    assert_origin_requests(&origin, 1, "PURGE is answered by the cache");
    let refetched = get(&sepia, path);
    assert_eq!(refetched.status, 200);
    assert_origin_requests(&origin, 2, "GET after PURGE");
    assert_eq!(refetched.header("x-serial"), Some("2"));

    let missing = send(&sepia, "PURGE", "/cc/max-age=60/never-stored", &[]);
    assert_eq!(missing.status, 404, "PURGE of an uncached URL");
    assert_origin_requests(&origin, 2, "PURGE of an uncached URL");
}

#[test]
fn purge_from_a_source_outside_purge_allow_is_forbidden_and_removes_nothing() {
    let (origin, sepia) = reverse_with("[cache]\npurge_allow = [\"10.0.0.0/8\"]\n");
    let path = "/cc/max-age=60/protected";
    assert_eq!(get(&sepia, path).status, 200);
    let refused = send(&sepia, "PURGE", path, &[]);
    assert_eq!(
        refused.status, 403,
        "PURGE from 127.0.0.1 with purge_allow = 10/8"
    );
    let after = get(&sepia, path);
    assert_eq!(after.header("x-serial"), Some("1"), "{}", after.raw_head);
    assert_origin_requests(&origin, 1, "GET, refused PURGE, GET (still a hit)");
}

#[test]
fn stale_response_is_revalidated_and_a_304_freshens_the_stored_headers() {
    let (origin, sepia) = reverse();
    let path = "/revalidate/doc";
    let first = get(&sepia, path);
    assert_eq!(first.status, 200);
    assert_eq!(first.header("x-version"), Some("1"));
    assert_origin_requests(&origin, 1, "first GET");

    // max-age=1: after two seconds the stored response is stale whatever the rounding.
    std::thread::sleep(Duration::from_millis(2100));
    let second = get(&sepia, path);
    assert_origin_requests(&origin, 2, "GET of a stale response");
    let conditional = &origin.requests()[1];
    assert!(
        conditional
            .headers_named("if-none-match")
            .iter()
            .any(|v| v.contains("\"v1\"")),
        "revalidation without If-None-Match: \"v1\":\n{}",
        conditional.raw_head
    );
    assert_eq!(second.status, 200, "{}", second.raw_head);
    assert_eq!(second.body, REVALIDATE_BODY, "the stored body after a 304");
    assert_eq!(
        second.header("x-version"),
        Some("2"),
        "headers not freshened from the 304:\n{}",
        second.raw_head
    );

    let third = get(&sepia, path);
    assert_origin_requests(&origin, 2, "GET after the 304 set max-age=60");
    assert_eq!(third.status, 200);
    assert_eq!(third.body, REVALIDATE_BODY);
    assert_eq!(third.header("x-version"), Some("2"), "{}", third.raw_head);
}

#[test]
fn range_requests_are_answered_from_a_stored_response() {
    let (origin, sepia) = reverse();
    let path = "/cc/max-age=60/range-object-0123456789";
    let full = get(&sepia, path);
    assert_eq!(full.status, 200);
    let len = full.body.len();
    assert!(len > 20, "body too short for the test: {len}");

    let part = send(&sepia, "GET", path, &[("Range", "bytes=10-19")]);
    assert_eq!(part.status, 206, "{}", part.raw_head);
    assert_eq!(part.body, full.body[10..20]);
    assert_eq!(
        part.header("content-range"),
        Some(format!("bytes 10-19/{len}").as_str())
    );

    let beyond = send(&sepia, "GET", path, &[("Range", &format!("bytes={len}-"))]);
    assert_eq!(beyond.status, 416, "{}", beyond.raw_head);
    assert_eq!(
        beyond.header("content-range"),
        Some(format!("bytes */{len}").as_str())
    );
    assert_origin_requests(&origin, 1, "GET, then two Range GETs");
}

#[test]
fn hit_carries_age_and_the_origin_date_unchanged() {
    let (origin, sepia) = reverse();
    let path = "/cc/max-age=60/aged";
    let first = get(&sepia, path);
    let origin_date = first
        .header("x-origin-date")
        .expect("origin sent X-Origin-Date")
        .to_string();
    assert_eq!(first.header("date"), Some(origin_date.as_str()));
    let stored_at = Instant::now();
    std::thread::sleep(Duration::from_millis(2050));
    let hit = get(&sepia, path);
    assert_origin_requests(&origin, 1, "GET, then GET two seconds later");
    let age: u64 = hit
        .header("age")
        .unwrap_or_else(|| panic!("a hit without Age:\n{}", hit.raw_head))
        .parse()
        .expect("Age is a number");
    let elapsed = stored_at.elapsed().as_secs();
    assert!(
        (2..=elapsed + 2).contains(&age),
        "Age {age} after {elapsed} s in the cache"
    );
    assert_eq!(
        hit.header("date"),
        Some(origin_date.as_str()),
        "Date must be the origin's: {}",
        hit.raw_head
    );
    assert!(cache_status(&hit).contains("hit"), "{}", hit.raw_head);
}

#[test]
fn head_is_answered_from_a_stored_get() {
    let (origin, sepia) = reverse();
    let path = "/cc/max-age=60/head-object";
    let full = get(&sepia, path);
    assert_eq!(full.status, 200);
    let mut client = RawClient::connect(sepia.addr());
    client.send(request("HEAD", path, &[]).as_bytes());
    let head = client.read_head_response();
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-length"),
        Some(full.body.len().to_string().as_str())
    );
    // Had a body followed the HEAD response, this would read it as a status line.
    client.send(request("GET", path, &[]).as_bytes());
    let next = client.read_response();
    assert_eq!(next.status, 200);
    assert_eq!(next.body, full.body);
    assert_origin_requests(&origin, 1, "GET, HEAD, GET");
}

#[test]
fn unsafe_method_invalidates_the_stored_response() {
    let (origin, sepia) = reverse();
    let path = "/cc/max-age=60/invalidate-me";
    get(&sepia, path);
    get(&sepia, path);
    assert_origin_requests(&origin, 1, "GET, GET (hit)");
    let post = send(&sepia, "POST", path, &[("Content-Length", "0")]);
    assert_eq!(post.status, 200);
    assert_origin_requests(&origin, 2, "POST goes to the origin");
    let after = get(&sepia, path);
    assert_eq!(after.text(), format!("GET {path}"));
    assert_origin_requests(&origin, 3, "GET after a successful POST (RFC 9111 §4.4)");
}

#[test]
fn no_store_and_private_responses_are_never_served_from_the_cache() {
    let (origin, sepia) = reverse();
    // Control: the same route with plain max-age is stored (one origin request for two GETs).
    get(&sepia, "/cc/max-age=60/control");
    get(&sepia, "/cc/max-age=60/control");
    assert_origin_requests(&origin, 1, "GET, GET of a max-age=60 response");
    let mut expected = 1;
    for path in [
        "/cc/no-store/a",
        "/cc/private/b",
        "/cc/private,max-age=60/c",
        "/cc/max-age=60,no-store/d",
    ] {
        for _ in 0..2 {
            expected += 1;
            let r = get(&sepia, path);
            assert_eq!(r.status, 200);
            assert_eq!(
                r.header("x-serial"),
                Some(expected.to_string().as_str()),
                "{path} served from the cache:\n{}",
                r.raw_head
            );
        }
        assert_origin_requests(&origin, expected, path);
    }
}

#[test]
fn responses_to_authorized_requests_are_reused_only_when_public() {
    let (origin, sepia) = reverse();
    let auth = [("Authorization", "Basic dXNlcjpwYXNzd29yZA==")];
    // RFC 9111 §3.5: without public (or s-maxage, must-revalidate) a shared cache must not use
    // a response to a request with Authorization for any later request.
    let path = "/cc/max-age=60/authorized";
    for n in 1..=2 {
        send(&sepia, "GET", path, &auth);
        assert_origin_requests(&origin, n, "GETs with Authorization, response max-age=60");
    }
    let path = "/cc/max-age=60,public/authorized-public";
    for _ in 0..2 {
        let r = send(&sepia, "GET", path, &auth);
        assert_eq!(r.header("x-serial"), Some("3"), "{}", r.raw_head);
    }
    assert_origin_requests(&origin, 3, "GETs with Authorization, response public");
}

#[test]
fn client_conditional_is_answered_from_the_cache() {
    let (origin, sepia) = reverse();
    let path = "/cc/max-age=60/conditional";
    let full = get(&sepia, path);
    assert_eq!(full.header("etag"), Some("\"cc\""));
    let mut client = RawClient::connect(sepia.addr());
    client.send(request("GET", path, &[("If-None-Match", "\"cc\"")]).as_bytes());
    let not_modified = client.read_response();
    assert_eq!(not_modified.status, 304, "{}", not_modified.raw_head);
    assert!(not_modified.body.is_empty());
    assert_eq!(not_modified.header("etag"), Some("\"cc\""));
    // Had the 304 carried a body, this would read it as a status line.
    client.send(request("GET", path, &[("If-None-Match", "\"other\"")]).as_bytes());
    let changed = client.read_response();
    assert_eq!(changed.status, 200, "{}", changed.raw_head);
    assert_eq!(changed.body, full.body);
    assert_origin_requests(&origin, 1, "GET, conditional GETs answered by the cache");
}

#[test]
fn a_304_from_the_cache_carries_one_age() {
    // RFC 9111 §5.1: Age is the cache's estimate, sent once. The origin's Age (30) is folded
    // into that estimate; the stored copy of it must not go out beside it.
    let (origin, sepia) = reverse();
    let path = "/aged/one-age";
    let full = get(&sepia, path);
    assert_eq!(full.headers_named("age").len(), 1, "{}", full.raw_head);
    let mut client = RawClient::connect(sepia.addr());
    client.send(request("GET", path, &[("If-None-Match", "\"aged\"")]).as_bytes());
    let not_modified = client.read_response();
    assert_eq!(not_modified.status, 304, "{}", not_modified.raw_head);
    let ages = not_modified.headers_named("age");
    assert_eq!(ages.len(), 1, "{}", not_modified.raw_head);
    let age: u64 = ages[0].parse().expect("Age is a number");
    assert!(
        age >= 30,
        "the origin's Age counts: {}",
        not_modified.raw_head
    );
    assert_origin_requests(
        &origin,
        1,
        "GET, then a conditional GET answered by the cache",
    );
}

#[test]
fn disabled_cache_forwards_every_request() {
    let (origin, sepia) = reverse_with("[cache]\nenabled = false\n");
    let path = "/cc/max-age=60/uncached";
    for n in 1..=3 {
        let r = get(&sepia, path);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("x-serial"), Some(n.to_string().as_str()));
        assert!(!cache_status(&r).contains("hit"), "{}", r.raw_head);
    }
    assert_origin_requests(&origin, 3, "three GETs with the cache disabled");
}

#[test]
fn a_post_response_for_its_own_uri_answers_later_gets() {
    // RFC 9110 §9.3.3: explicit freshness and a Content-Location equal to the target URI.
    let (origin, sepia) = reverse();
    let posted = send(&sepia, "POST", "/posted/a", &[("Content-Length", "0")]);
    assert_eq!(posted.status, 200);
    assert_eq!(posted.text(), "POST /posted/a");
    let later = get(&sepia, "/posted/a");
    assert_eq!(later.status, 200);
    assert_eq!(
        later.text(),
        "POST /posted/a",
        "the stored POST response answered the GET"
    );
    assert!(
        cache_status(&later).contains("hit"),
        "{}",
        cache_status(&later)
    );
    assert_origin_requests(&origin, 1, "a GET after a reusable POST");
    // A POST itself is never answered from the cache (it is unsafe).
    send(&sepia, "POST", "/posted/a", &[("Content-Length", "0")]);
    assert_origin_requests(&origin, 2, "a second POST");
}

#[test]
fn a_post_response_for_another_uri_is_not_reused() {
    let (origin, sepia) = reverse();
    send(
        &sepia,
        "POST",
        "/posted-elsewhere/a",
        &[("Content-Length", "0")],
    );
    let later = get(&sepia, "/posted-elsewhere/a");
    assert_eq!(later.text(), "GET /posted-elsewhere/a");
    assert_origin_requests(
        &origin,
        2,
        "a GET after a POST whose Content-Location differs",
    );
}
