//! Origins over TLS (issue 20): `https://` route origins verified with `tls_ca`, a refused
//! certificate (another CA, another name) answered 502 and logged, `tls_server_name`, IP
//! literal origins, `tls_insecure_skip_verify`, kept-alive TLS connections, session
//! resumption on a new connection, forward-proxy requests for absolute `https://` URLs, and
//! plain and TLS connections to one address kept apart. The https origin is Python's `ssl` in
//! front of the usual test origin (`TlsOrigin`).

use std::collections::BTreeSet;
use std::time::Duration;

use sepia_e2e::{curl, free_addr, wait_until, Origin, RawClient, Sepia, TestCert, TlsOrigin};
use tempfile::TempDir;

/// A certificate for `localhost` and 127.0.0.1, the plain origin and the TLS front before it.
fn https_origin() -> (TempDir, TestCert, Origin, TlsOrigin) {
    let dir = TempDir::new().unwrap();
    let cert = TestCert::new(dir.path(), "origin", "origin", &["localhost", "127.0.0.1"]);
    let origin = Origin::start();
    let front = TlsOrigin::start(&cert, origin.addr());
    (dir, cert, origin, front)
}

/// A reverse proxy (two workers) whose routes are `routes` (TOML `[[route]]` tables).
fn reverse(routes: &str) -> Sepia {
    let config = format!(
        "[server]\nworkers = 2\nshutdown_grace = \"1s\"\n\n\
         [[listen]]\naddress = \"{}\"\nmode = \"reverse\"\n\n\
         [access_log]\npath = \"stdout\"\nformat = \"squid\"\n\n{routes}",
        free_addr()
    );
    Sepia::start(&config)
}

/// One catch-all route to `origin` with the extra keys `tls`.
fn route(origin: &str, tls: &str) -> String {
    format!("[[route]]\nhost = \"*\"\norigins = [\"{origin}\"]\n{tls}\n")
}

fn ca_key(cert: &TestCert) -> String {
    format!("tls_ca = \"{}\"\n", cert.ca_str())
}

fn get(sepia: &Sepia, path: &str) -> sepia_e2e::CurlOutput {
    curl(&[&format!("{}{path}", sepia.url())])
}

#[test]
fn an_https_route_trusting_its_ca_answers_and_caches() {
    let (_dir, cert, origin, front) = https_origin();
    let sepia = reverse(&route(&front.url_named("localhost"), &ca_key(&cert)));
    let first = get(&sepia, "/cacheable/page");
    first.assert_status(200);
    assert_eq!(first.text(), "/cacheable/page");
    let second = get(&sepia, "/cacheable/page");
    second.assert_status(200);
    let status = second.header("cache-status").unwrap_or_default();
    assert!(status.contains("hit"), "second request not a hit: {status}");
    assert_eq!(origin.request_count(), 1);
    let seen = front.wait_for_connections(1);
    assert_eq!((seen.tls.len(), seen.plain, seen.failed), (1, 0, 0));
}

#[test]
fn a_certificate_from_another_ca_is_refused_with_502() {
    let (_dir, _cert, origin, front) = https_origin();
    let other_dir = TempDir::new().unwrap();
    let other = TestCert::new(other_dir.path(), "other", "other", &["localhost"]);
    let sepia = reverse(&route(&front.url_named("localhost"), &ca_key(&other)));
    let refused = get(&sepia, "/x");
    refused.assert_status(502);
    assert_eq!(
        origin.request_count(),
        0,
        "nothing reaches an unverified origin"
    );
    let logged = wait_until(Duration::from_secs(5), || {
        sepia
            .stderr()
            .contains("TLS handshake with the origin failed")
    });
    assert!(logged, "no reason in Sepia's log:\n{}", sepia.stderr());
    assert!(front.wait_for_connections(1).failed >= 1);
}

#[test]
fn the_certificate_must_be_valid_for_the_server_name() {
    let (_dir, cert, origin, front) = https_origin();
    // An IP literal origin is checked against the certificate's IP addresses.
    let by_ip = reverse(&route(&front.url(), &ca_key(&cert)));
    get(&by_ip, "/ip").assert_status(200);
    // tls_server_name replaces the origin's host in SNI and in the check.
    let named = format!("{}tls_server_name = \"localhost\"\n", ca_key(&cert));
    let by_name = reverse(&route(&front.url(), &named));
    get(&by_name, "/named").assert_status(200);
    let wrong = format!("{}tls_server_name = \"wrong.test\"\n", ca_key(&cert));
    let refused = reverse(&route(&front.url(), &wrong));
    get(&refused, "/wrong").assert_status(502);
    let paths: Vec<String> = origin.requests().iter().map(|r| r.target.clone()).collect();
    assert_eq!(paths, ["/ip", "/named"]);
    let logged = wait_until(Duration::from_secs(5), || {
        refused.stderr().contains("wrong.test")
    });
    assert!(
        logged,
        "the refused name is not logged:\n{}",
        refused.stderr()
    );
}

#[test]
fn insecure_skip_verify_accepts_any_certificate_and_warns() {
    let (_dir, _cert, origin, front) = https_origin();
    let keys = "tls_insecure_skip_verify = true\ntls_server_name = \"wrong.test\"\n";
    let sepia = reverse(&route(&front.url(), keys));
    get(&sepia, "/lab").assert_status(200);
    assert_eq!(origin.request_count(), 1);
    assert!(
        sepia.stderr().contains("tls_insecure_skip_verify"),
        "no start-up warning:\n{}",
        sepia.stderr()
    );
}

#[test]
fn one_tls_connection_carries_several_requests() {
    let (_dir, cert, origin, front) = https_origin();
    let sepia = reverse(&route(&front.url_named("localhost"), &ca_key(&cert)));
    for i in 0..5 {
        let out = get(&sepia, &format!("/n{i}"));
        out.assert_status(200);
        assert_eq!(out.text(), format!("GET /n{i}"));
    }
    assert_eq!(origin.request_count(), 5);
    let seen = front.seen();
    assert_eq!(seen.tls.len(), 1, "{seen:?}");
    assert_eq!(origin.connections(), 1);
}

#[test]
fn a_new_connection_resumes_the_tls_session() {
    let (_dir, cert, origin, front) = https_origin();
    let sepia = reverse(&route(&front.url_named("localhost"), &ca_key(&cert)));
    // A body delimited by the close ends that connection; the next request needs a new one.
    let closing = get(&sepia, "/close/10");
    closing.assert_status(200);
    for i in 0..3 {
        get(&sepia, &format!("/after{i}")).assert_status(200);
    }
    let seen = front.wait_for_connections(2);
    assert_eq!(
        seen.tls,
        [false, true],
        "the second handshake resumed the first session"
    );
    assert_eq!(origin.request_count(), 4);
}

#[test]
fn the_forward_proxy_fetches_absolute_https_urls_over_tls() {
    let (_dir, cert, origin, front) = https_origin();
    let config = format!(
        "[server]\nworkers = 1\nshutdown_grace = \"1s\"\n\n\
         [[listen]]\naddress = \"{}\"\nmode = \"forward\"\n\n\
         [access_log]\npath = \"stdout\"\nformat = \"squid\"\n",
        free_addr()
    );
    // The system's roots, as rustls-native-certs reads them, are the test CA.
    let sepia = Sepia::start_with_env(&config, &[("SSL_CERT_FILE", cert.ca_str())]);
    let url = format!("{}/cacheable/fwd", front.url_named("localhost"));
    let authority = format!("localhost:{}", front.addr().port());
    let request = format!("GET {url} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    let mut client = RawClient::connect(sepia.addr());
    client.send(request.as_bytes());
    let first = client.read_response();
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.text(), "/cacheable/fwd");
    client.send(request.as_bytes());
    let second = client.read_response();
    assert_eq!(second.status, 200);
    let status = second.header("cache-status").unwrap_or_default();
    assert!(status.contains("hit"), "not a hit: {status}");
    assert_eq!(origin.request_count(), 1);
    assert_eq!(origin.single_request().target, "/cacheable/fwd");
    let seen = front.wait_for_connections(1);
    assert_eq!((seen.tls.len(), seen.plain), (1, 0));
    let lines = sepia.wait_for_log_lines(2, Duration::from_secs(5));
    assert!(lines[0].contains(&format!("GET {url} ")), "{}", lines[0]);
    // Without the test CA among the system's roots, the same origin is refused.
    let untrusting = Sepia::start(&config);
    let mut other = RawClient::connect(untrusting.addr());
    let url = format!("{}/cacheable/other", front.url_named("localhost"));
    other.send(format!("GET {url} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes());
    assert_eq!(other.read_response().status, 502);
    assert_eq!(origin.request_count(), 1);
}

#[test]
fn plain_and_tls_connections_to_one_address_never_mix() {
    let (_dir, cert, origin, front) = https_origin();
    // The front takes both TLS and clear text on its one port.
    let plain_url = format!("http://{}", front.addr());
    let routes = format!(
        "[[route]]\nhost = \"plain.test\"\norigins = [\"{plain_url}\"]\n\n\
         [[route]]\nhost = \"tls.test\"\norigins = [\"{}\"]\n{}",
        front.url(),
        ca_key(&cert)
    );
    let sepia = reverse(&routes);
    for host in [
        "plain.test",
        "tls.test",
        "plain.test",
        "tls.test",
        "plain.test",
    ] {
        let out = curl(&[
            "-H",
            &format!("Host: {host}"),
            &format!("{}/{host}", sepia.url()),
        ]);
        out.assert_status(200);
    }
    let seen = front.wait_for_connections(2);
    assert_eq!((seen.plain, seen.tls.len()), (1, 1), "{seen:?}");
    let connections = |host: &str| -> BTreeSet<usize> {
        origin
            .requests()
            .iter()
            .filter(|r| r.header("host") == Some(host))
            .map(|r| r.connection)
            .collect()
    };
    let (plain, tls) = (connections("plain.test"), connections("tls.test"));
    assert_eq!((plain.len(), tls.len()), (1, 1), "{plain:?} {tls:?}");
    assert!(plain.is_disjoint(&tls), "{plain:?} {tls:?}");
    assert_eq!(origin.request_count(), 5);
}

#[test]
fn an_unusable_tls_ca_stops_start_up_and_sepia_check_naming_the_file() {
    let dir = TempDir::new().unwrap();
    let cert = TestCert::new(dir.path(), "origin", "origin", &["localhost"]);
    for (ca, message) in [
        (dir.path().join("missing.pem"), "missing.pem: cannot read"),
        (cert.key.clone(), "origin.key: no usable CA certificate"),
    ] {
        let config = dir.path().join("sepia.toml");
        std::fs::write(
            &config,
            format!(
                "[[listen]]\naddress = \"{}\"\nmode = \"reverse\"\n\n{}",
                free_addr(),
                route(
                    "https://localhost",
                    &format!("tls_ca = \"{}\"\n", ca.display())
                )
            ),
        )
        .unwrap();
        let config = config.to_str().unwrap();
        for args in [&["check", "--config", config][..], &["--config", config]] {
            let out = std::process::Command::new(sepia_e2e::sepia_bin())
                .args(args)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_ne!(out.status.code(), Some(0), "{args:?}: {stderr}");
            assert!(
                stderr.contains(message),
                "{args:?}: {message:?} in {stderr}"
            );
            assert!(stderr.contains("route[0]"), "{args:?}: {stderr}");
        }
    }
}

#[test]
fn a_refused_certificate_fails_over_to_the_next_origin() {
    let (_dir, cert, origin, good) = https_origin();
    let other_dir = TempDir::new().unwrap();
    let other = TestCert::new(other_dir.path(), "other", "other", &["localhost"]);
    let other_origin = Origin::start();
    let bad = TlsOrigin::start(&other, other_origin.addr());
    let routes = format!(
        "[[route]]\nhost = \"*\"\norigins = [\"{}\", \"{}\"]\n{}",
        bad.url_named("localhost"),
        good.url_named("localhost"),
        ca_key(&cert)
    );
    let sepia = reverse(&routes);
    for i in 0..4 {
        get(&sepia, &format!("/f{i}")).assert_status(200);
    }
    assert_eq!(origin.request_count(), 4);
    assert_eq!(other_origin.request_count(), 0);
    assert!(bad.wait_for_connections(1).failed >= 1, "{:?}", bad.seen());
}

#[test]
fn the_handshake_counts_against_timeouts_connect() {
    // A listener that never accepts: the kernel completes the TCP handshake, nobody answers
    // the TLS one.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}", silent.local_addr().unwrap());
    let sepia = reverse(&format!(
        "{}\n[timeouts]\nconnect = \"300ms\"\n",
        route(&url, "tls_insecure_skip_verify = true\n")
    ));
    let started = std::time::Instant::now();
    get(&sepia, "/slow").assert_status(504);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );
    drop(silent);
}
