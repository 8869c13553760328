//! HTTP/2 to origins (issue 20): a route with `http2 = true` speaks h2 to an `https://` origin
//! that picks it in ALPN and h2c (prior knowledge) to an `http://` one; many concurrent
//! requests share one origin connection; request content reaches the origin intact; an origin
//! that only speaks http/1.1 still works; a response cut short fails at the client. The origin
//! is nginx (`NginxOrigin`) in front of the usual test origin.

use std::collections::BTreeSet;

use sepia_e2e::{curl, free_addr, sha256_hex, NginxEntry, NginxOrigin, Origin, Sepia, TestCert};
use tempfile::TempDir;

struct Lab {
    _dir: TempDir,
    cert: TestCert,
    origin: Origin,
    nginx: NginxOrigin,
}

fn lab() -> Lab {
    let dir = TempDir::new().unwrap();
    let cert = TestCert::new(dir.path(), "origin", "origin", &["localhost", "127.0.0.1"]);
    let origin = Origin::start();
    let nginx = NginxOrigin::start(&cert, origin.addr());
    Lab {
        _dir: dir,
        cert,
        origin,
        nginx,
    }
}

/// A reverse proxy (two workers) with one catch-all route to `origin` and the extra `keys`.
fn reverse(origin: &str, keys: &str) -> Sepia {
    let config = format!(
        "[server]\nworkers = 2\nshutdown_grace = \"1s\"\n\n\
         [[listen]]\naddress = \"{}\"\nmode = \"reverse\"\n\n\
         [access_log]\npath = \"stdout\"\nformat = \"squid\"\n\n\
         [[route]]\nhost = \"*\"\norigins = [\"{origin}\"]\n{keys}\n",
        free_addr()
    );
    Sepia::start(&config)
}

/// A route over TLS to the listener `port` of the lab's nginx, with `http2 = true` or not.
fn tls_route(lab: &Lab, port: u16, http2: bool) -> Sepia {
    let keys = format!("tls_ca = \"{}\"\nhttp2 = {http2}\n", lab.cert.ca_str());
    reverse(&format!("https://localhost:{port}"), &keys)
}

fn get(sepia: &Sepia, path: &str) -> sepia_e2e::CurlOutput {
    curl(&[&format!("{}{path}", sepia.url())])
}

fn protocols(entries: &[NginxEntry]) -> BTreeSet<String> {
    entries.iter().map(|e| e.protocol.clone()).collect()
}

#[test]
fn a_miss_over_h2_is_cached_and_its_hit_served() {
    let lab = lab();
    let sepia = tls_route(&lab, lab.nginx.h2.port(), true);
    let first = get(&sepia, "/cacheable/page");
    first.assert_status(200);
    assert_eq!(first.text(), "/cacheable/page");
    let second = get(&sepia, "/cacheable/page");
    second.assert_status(200);
    assert_eq!(second.text(), "/cacheable/page");
    let status = second.header("cache-status").unwrap_or_default();
    assert!(status.contains("hit"), "second request not a hit: {status}");
    assert_eq!(lab.origin.request_count(), 1);
    let entries = lab.nginx.wait_for_entries(1);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].protocol, "HTTP/2.0");
    assert_eq!(
        (entries[0].method.as_str(), entries[0].status),
        ("GET", 200)
    );
}

#[test]
fn without_the_opt_in_an_h2_origin_is_spoken_to_in_http1() {
    let lab = lab();
    let sepia = tls_route(&lab, lab.nginx.h2.port(), false);
    get(&sepia, "/plain").assert_status(200);
    let entries = lab.nginx.wait_for_entries(1);
    assert_eq!(
        protocols(&entries),
        BTreeSet::from(["HTTP/1.1".to_string()])
    );
}

#[test]
fn concurrent_requests_share_one_origin_connection() {
    let lab = lab();
    let sepia = tls_route(&lab, lab.nginx.h2.port(), true);
    // Warm: the connection exists (and its SETTINGS are known) before the burst.
    get(&sepia, "/warm").assert_status(200);
    let urls: Vec<String> = (0..24)
        .map(|i| format!("{}/delay/300?n={i}", sepia.url()))
        .collect();
    let threads: Vec<_> = urls
        .into_iter()
        .map(|url| std::thread::spawn(move || curl(&[&url])))
        .collect();
    for t in threads {
        t.join().unwrap().assert_status(200);
    }
    let entries = lab.nginx.wait_for_entries(25);
    assert_eq!(entries.len(), 25, "{entries:?}");
    assert_eq!(
        protocols(&entries),
        BTreeSet::from(["HTTP/2.0".to_string()])
    );
    let connections: BTreeSet<u64> = entries.iter().map(|e| e.connection).collect();
    assert!(
        connections.len() == 1,
        "25 requests (24 at once) over {} origin connections, not one",
        connections.len()
    );
}

/// Uploads `size` pattern bytes to `/echo` (chunked when `chunked`) and checks the digest the
/// origin computed.
fn upload(sepia: &Sepia, size: usize, chunked: bool) {
    let dir = TempDir::new().unwrap();
    let file = dir.path().join("body");
    let body = sepia_e2e::pattern(size);
    std::fs::write(&file, &body).unwrap();
    let data = format!("@{}", file.display());
    let url = format!("{}/echo", sepia.url());
    let mut args = vec![
        "--data-binary",
        &data,
        "-H",
        "Content-Type: application/octet-stream",
    ];
    if chunked {
        args.extend(["-H", "Transfer-Encoding: chunked"]);
    }
    args.push(&url);
    let out = curl(&args);
    out.assert_status(200);
    assert_eq!(out.header("x-body-sha256"), Some(sha256_hex(&body)));
    assert_eq!(out.body.len(), size);
}

#[test]
fn request_content_reaches_the_origin_intact() {
    let lab = lab();
    let sepia = tls_route(&lab, lab.nginx.h2.port(), true);
    upload(&sepia, 300_000, false);
    upload(&sepia, 200_000, true);
    let entries = lab.nginx.wait_for_entries(2);
    assert_eq!(
        protocols(&entries),
        BTreeSet::from(["HTTP/2.0".to_string()])
    );
    assert!(entries.iter().all(|e| e.method == "POST"), "{entries:?}");
}

#[test]
fn an_origin_speaking_only_http1_still_works() {
    let lab = lab();
    let sepia = tls_route(&lab, lab.nginx.h1.port(), true);
    let first = get(&sepia, "/one");
    first.assert_status(200);
    assert_eq!(first.text(), "GET /one");
    get(&sepia, "/two").assert_status(200);
    upload(&sepia, 100_000, false);
    // A burst after the origin declined h2 goes to HTTP/1.1 connections side by side.
    let threads: Vec<_> = (0..8)
        .map(|i| format!("{}/delay/200?n={i}", sepia.url()))
        .map(|url| std::thread::spawn(move || curl(&[&url])))
        .collect();
    for t in threads {
        t.join().unwrap().assert_status(200);
    }
    let entries = lab.nginx.wait_for_entries(11);
    assert_eq!(entries.len(), 11, "{entries:?}");
    assert_eq!(
        protocols(&entries),
        BTreeSet::from(["HTTP/1.1".to_string()])
    );
}

#[test]
fn a_response_cut_short_reaches_the_client_as_a_failure() {
    let lab = lab();
    let sepia = tls_route(&lab, lab.nginx.h2.port(), true);
    let cut = get(&sepia, "/die-mid-body");
    assert_ne!(cut.exit_code, 0, "a clean end for a cut response: {cut:?}");
    assert!(cut.body.len() < 100_000);
    // Sepia and the origin connection are still fine.
    get(&sepia, "/after").assert_status(200);
    let entries = lab.nginx.wait_for_entries(2);
    assert_eq!(
        protocols(&entries),
        BTreeSet::from(["HTTP/2.0".to_string()])
    );
}

#[test]
fn h2c_with_prior_knowledge_to_a_plain_origin() {
    let lab = lab();
    let sepia = reverse(
        &format!("http://127.0.0.1:{}", lab.nginx.h2c.port()),
        "http2 = true\n",
    );
    let first = get(&sepia, "/cacheable/h2c");
    first.assert_status(200);
    assert_eq!(first.text(), "/cacheable/h2c");
    upload(&sepia, 50_000, false);
    let entries = lab.nginx.wait_for_entries(2);
    assert_eq!(
        protocols(&entries),
        BTreeSet::from(["HTTP/2.0".to_string()])
    );
    let connections: BTreeSet<u64> = entries.iter().map(|e| e.connection).collect();
    assert_eq!(connections.len(), 1, "{entries:?}");
}

#[test]
fn revalidations_go_over_h2_in_the_foreground_and_the_background() {
    let lab = lab();
    let sepia = tls_route(&lab, lab.nginx.h2.port(), true);
    // Foreground: a stale copy is revalidated with If-None-Match; the origin's 304 refreshes it.
    let first = get(&sepia, "/revalidate/h2");
    first.assert_status(200);
    assert_eq!(first.header("x-version").as_deref(), Some("1"));
    // A background refresh (stale-while-revalidate) is a prepared request on its own.
    let swr = "/cc/max-age=1,stale-while-revalidate=60/swr";
    get(&sepia, swr).assert_status(200);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let refreshed = get(&sepia, "/revalidate/h2");
    refreshed.assert_status(200);
    assert_eq!(refreshed.header("x-version").as_deref(), Some("2"));
    assert_eq!(refreshed.body, first.body);
    let stale = get(&sepia, swr);
    stale.assert_status(200);
    let status = stale.header("cache-status").unwrap_or_default();
    assert!(status.contains("stale-while-revalidate"), "{status}");
    let entries = lab.nginx.wait_for_entries(4);
    assert_eq!(entries.len(), 4, "{entries:?}");
    assert_eq!(
        protocols(&entries),
        BTreeSet::from(["HTTP/2.0".to_string()])
    );
    let revalidated = entries
        .iter()
        .any(|e| e.uri == "/revalidate/h2" && e.status == 304);
    assert!(revalidated, "{entries:?}");
    assert_eq!(lab.origin.request_count(), 4);
}
