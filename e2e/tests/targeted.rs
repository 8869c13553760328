//! Targeted cache control (RFC 9213): a listener obeys the first valid field of its target list
//! (`CDN-Cache-Control` by default on reverse listeners) instead of Cache-Control and Expires,
//! forwards it unchanged, and says in Cache-Status which field decided.

use sepia_e2e::fixtures::{forward, reverse};
use sepia_e2e::{Origin, RawClient, Response, Sepia};

/// A GET of `path` whose response carries the fields `set` (the origin copies `X-Set-NAME`).
fn get(sepia: &Sepia, path: &str, set: &[(&str, &str)]) -> Response {
    let fields: String = set
        .iter()
        .map(|(n, v)| format!("X-Set-{n}: {v}\r\n"))
        .collect();
    let mut client = RawClient::connect(sepia.addr());
    client.send(format!("GET {path} HTTP/1.1\r\nHost: app\r\n{fields}\r\n").as_bytes());
    client.read_response()
}

fn requests(origin: &Origin) -> usize {
    origin.requests().len()
}

#[test]
fn cdn_cache_control_overrides_cache_control_on_a_reverse_listener() {
    let (origin, sepia) = reverse();
    let set = [
        ("Cache-Control", "no-store"),
        ("CDN-Cache-Control", "max-age=60"),
    ];
    let path = "/fields-from-request/cdn-stores";
    let first = get(&sepia, path, &set);
    assert_eq!(first.status, 200);
    assert_eq!(
        first.header("cdn-cache-control"),
        Some("max-age=60"),
        "forwarded unchanged"
    );
    assert_eq!(
        first.header("cache-control"),
        Some("no-store"),
        "browsers still see theirs"
    );
    let second = get(&sepia, path, &set);
    assert_eq!(requests(&origin), 1, "the second request was a hit");
    let status = second.header("cache-status").unwrap_or_default();
    assert!(
        status.contains("hit") && status.contains("detail=cdn-cache-control"),
        "{status}"
    );
    assert_eq!(second.header("cdn-cache-control"), Some("max-age=60"));
}

#[test]
fn cdn_cache_control_no_store_wins_over_a_cacheable_cache_control() {
    let (origin, sepia) = reverse();
    let set = [
        ("Cache-Control", "max-age=60"),
        ("CDN-Cache-Control", "no-store"),
    ];
    let path = "/fields-from-request/cdn-no-store";
    get(&sepia, path, &set);
    get(&sepia, path, &set);
    assert_eq!(requests(&origin), 2, "nothing was stored");
}

#[test]
fn an_invalid_targeted_field_is_ignored() {
    let (origin, sepia) = reverse();
    // Not a Structured Field Dictionary: keys are lower case (RFC 8941 §3.1.2).
    let set = [
        ("Cache-Control", "max-age=60"),
        ("CDN-Cache-Control", "No-Store"),
    ];
    let path = "/fields-from-request/cdn-invalid";
    get(&sepia, path, &set);
    let second = get(&sepia, path, &set);
    assert_eq!(requests(&origin), 1, "Cache-Control governed");
    let status = second.header("cache-status").unwrap_or_default();
    assert!(!status.contains("detail"), "{status}");
}

#[test]
fn a_forward_listener_obeys_no_targeted_field_by_default() {
    let (origin, sepia) = forward();
    let url = format!("{}/fields-from-request/cdn-forward", origin.url());
    let fetch = || {
        let mut client = RawClient::connect(sepia.addr());
        client.send(
            format!(
                "GET {url} HTTP/1.1\r\nHost: x\r\nX-Set-Cache-Control: no-store\r\n\
                 X-Set-CDN-Cache-Control: max-age=60\r\n\r\n"
            )
            .as_bytes(),
        );
        client.read_response()
    };
    assert_eq!(fetch().status, 200);
    assert_eq!(fetch().status, 200);
    assert_eq!(requests(&origin), 2, "Cache-Control: no-store governed");
}

#[test]
fn a_configured_target_list_is_obeyed_in_order() {
    let origin = Origin::start();
    let config = format!(
        "[[listen]]\naddress = \"{}\"\nmode = \"reverse\"\n\
         targeted_cache_control = [\"Sepia-Cache-Control\", \"CDN-Cache-Control\"]\n\
         [[route]]\nhost = \"*\"\norigins = [\"{}\"]\n",
        sepia_e2e::free_addr(),
        origin.url()
    );
    let sepia = Sepia::start(&config);
    let set = [
        ("CDN-Cache-Control", "no-store"),
        ("Sepia-Cache-Control", "max-age=60"),
    ];
    let path = "/fields-from-request/own-field";
    get(&sepia, path, &set);
    let second = get(&sepia, path, &set);
    assert_eq!(
        requests(&origin),
        1,
        "Sepia-Cache-Control came first and allowed storing"
    );
    let status = second.header("cache-status").unwrap_or_default();
    assert!(status.contains("detail=sepia-cache-control"), "{status}");
}
