//! Transparent interception, end to end: a client namespace whose port-80 traffic to an origin
//! namespace is routed through a router namespace where Sepia runs, diverted into Sepia by
//! iptables REDIRECT (`mode = "intercept"`) or TPROXY (`mode = "tproxy"`). curl in the client
//! namespace talks to the origin's address as if no proxy were there; the origin records what
//! arrives and from where.
//!
//! Needs root (namespaces, iptables). Where the machine refuses, each test prints
//! `SKIPPED: <reason>` (visible with `cargo test -- --nocapture`) and returns.

use std::time::Duration;

use sepia_e2e::netns::{
    Lab, CLIENT_V4, CLIENT_V6, ORIGIN_V4, ORIGIN_V6, ROUTER_CLIENT_SIDE_V4, ROUTER_ORIGIN_SIDE_V4,
    ROUTER_ORIGIN_SIDE_V6,
};
use sepia_e2e::{curl_in_netns, pattern, CurlOutput, Sepia};

const LOG_WAIT: Duration = Duration::from_secs(10);
const REDIRECT_PORT: u16 = 3129;
const TPROXY_PORT: u16 = 3130;

/// The lab, or `None` after saying plainly why this machine cannot build it.
fn lab_or_skip(test: &str) -> Option<Lab> {
    match Lab::build() {
        Ok(lab) => Some(lab),
        Err(why) => {
            eprintln!("SKIPPED: {test}: cannot build network namespaces here: {why}");
            None
        }
    }
}

/// Applies the diversion rules, or says why the kernel refused them.
fn rules_or_skip(test: &str, applied: Result<(), String>) -> Option<()> {
    match applied {
        Ok(()) => Some(()),
        Err(why) => {
            eprintln!("SKIPPED: {test}: the kernel refused the diversion rules: {why}");
            None
        }
    }
}

/// Sepia listening on both address families with `mode` (and `extra` listener keys).
fn config(mode: &str, port: u16, extra: &str) -> String {
    format!(
        "[server]\nworkers = 1\nshutdown_grace = \"1s\"\n\n\
         [[listen]]\naddress = \"0.0.0.0:{port}\"\nmode = \"{mode}\"\n{extra}\n\
         [[listen]]\naddress = \"[::]:{port}\"\nmode = \"{mode}\"\n{extra}\n\
         [access_log]\npath = \"stdout\"\nformat = \"squid\"\n"
    )
}

fn get(lab: &Lab, url: &str, extra: &[&str]) -> CurlOutput {
    let mut args = vec!["-g"];
    args.extend_from_slice(extra);
    args.push(url);
    curl_in_netns(lab.client.name(), &args)
}

/// The access-log line whose URL field is `url`.
fn log_line_for(sepia: &Sepia, url: &str) -> Vec<String> {
    let found = sepia_e2e::wait_until(LOG_WAIT, || {
        sepia
            .log_lines()
            .iter()
            .any(|l| l.split_whitespace().nth(6) == Some(url))
    });
    assert!(found, "no log line for {url}:\n{}", sepia.stdout());
    sepia
        .log_lines()
        .into_iter()
        .find(|l| l.split_whitespace().nth(6) == Some(url))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Requests whose Host does not name the original destination get 409 and reach no origin.
fn assert_host_mismatches_refused(lab: &Lab, origin: &sepia_e2e::netns::NsOrigin) {
    let before = origin.request_count();
    let url = format!("http://{ORIGIN_V4}/bytes/7");
    for host in [
        "Host: 10.77.2.9",
        "Host: 10.77.2.2:8080",
        "Host: elsewhere.test",
        "Host: nowhere.invalid",
    ] {
        let out = get(lab, &url, &["-H", host]);
        out.assert_status(409);
        assert!(
            out.text().starts_with("409 Conflict\n"),
            "{host}: {}",
            out.text()
        );
        assert!(out.text().contains("Host"), "{host}: {}", out.text());
    }
    assert_eq!(
        origin.request_count(),
        before,
        "a request with a forged Host reached the origin: {:#?}",
        origin.requests()
    );
}

/// A client that connects to Sepia's interception port itself is refused: forwarding to the
/// "original destination", Sepia's own port, would loop.
fn assert_direct_connection_refused(lab: &Lab, origin: &sepia_e2e::netns::NsOrigin, port: u16) {
    let before = origin.request_count();
    let out = get(
        lab,
        &format!("http://{ROUTER_CLIENT_SIDE_V4}:{port}/bytes/3"),
        &[],
    );
    out.assert_status(403);
    assert!(out.text().contains("intercepted"), "{}", out.text());
    assert_eq!(origin.request_count(), before);
}

#[test]
fn redirect_intercepts_port_80_and_verifies_host() {
    let test = "redirect_intercepts_port_80_and_verifies_host";
    let Some(lab) = lab_or_skip(test) else { return };
    let Some(()) = rules_or_skip(test, lab.redirect(REDIRECT_PORT)) else {
        return;
    };
    lab.router
        .set_etc_file(
            "hosts",
            "127.0.0.1 localhost\n10.77.2.2 origin.test\n10.77.2.9 elsewhere.test\n",
        )
        .expect("hosts file for the router namespace");
    let origin = lab.origin.start_origin(&format!("{ORIGIN_V4}:80"));
    let sepia = Sepia::start_in_netns(lab.router.name(), &config("intercept", REDIRECT_PORT, ""));

    // The client asks the origin's address; Sepia answers on its behalf.
    let out = get(&lab, &format!("http://{ORIGIN_V4}/bytes/100"), &[]);
    out.assert_status(200);
    assert_eq!(out.body, pattern(100));
    assert_eq!(out.header("via").as_deref(), Some("1.1 sepia"));
    let seen = origin.single_request();
    assert_eq!(seen.target, "/bytes/100");
    assert_eq!(seen.header("host"), Some(ORIGIN_V4));
    assert_eq!(
        seen.peer.map(|p| p.ip().to_string()).as_deref(),
        Some(ROUTER_ORIGIN_SIDE_V4),
        "REDIRECT: the origin sees the router"
    );

    // A Host name resolving to the destination is accepted and passed on as sent.
    let out = get(
        &lab,
        "http://origin.test/bytes/20",
        &["--resolve", "origin.test:80:10.77.2.2"],
    );
    out.assert_status(200);
    assert_eq!(out.body, pattern(20));
    assert_eq!(origin.requests()[1].header("host"), Some("origin.test"));

    // Cache key http://host/path as for forward requests: the second GET is a hit.
    let url = format!("http://{ORIGIN_V4}/cc/max-age=60/x");
    get(&lab, &url, &[]).assert_status(200);
    let again = get(&lab, &url, &[]);
    again.assert_status(200);
    assert_eq!(origin.request_count(), 3, "{:#?}", origin.requests());
    assert!(
        again
            .header("cache-status")
            .unwrap_or_default()
            .contains("hit"),
        "{}",
        again.headers
    );

    assert_host_mismatches_refused(&lab, &origin);
    assert_direct_connection_refused(&lab, &origin, REDIRECT_PORT);

    // Logged with the client's address and the original destination as the peer (%<a).
    let line = log_line_for(&sepia, &format!("http://{ORIGIN_V4}/bytes/100"));
    assert_eq!(line[2], CLIENT_V4, "{line:?}");
    assert_eq!(line[3], "TCP_MISS/200", "{line:?}");
    assert_eq!(line[8], format!("HIER_DIRECT/{ORIGIN_V4}"), "{line:?}");
    let hit = sepia
        .log_lines()
        .into_iter()
        .filter(|l| l.contains(&url))
        .collect::<Vec<_>>();
    assert!(
        hit.iter().any(|l| l.contains("TCP_MEM_HIT/200")),
        "{hit:#?}"
    );
    let conflicts = sepia
        .log_lines()
        .into_iter()
        .filter(|l| l.contains("/409 "))
        .count();
    assert_eq!(conflicts, 4, "{}", sepia.stdout());
}

#[test]
fn tproxy_spoofs_the_client_address_toward_the_origin() {
    let test = "tproxy_spoofs_the_client_address_toward_the_origin";
    let Some(lab) = lab_or_skip(test) else { return };
    let Some(()) = rules_or_skip(test, lab.tproxy(TPROXY_PORT)) else {
        return;
    };
    let origin = lab.origin.start_origin(&format!("{ORIGIN_V4}:80"));
    // spoof_client defaults to true, as in Squid.
    let sepia = Sepia::start_in_netns(lab.router.name(), &config("tproxy", TPROXY_PORT, ""));

    for path in ["/bytes/1000", "/echo"] {
        let out = get(&lab, &format!("http://{ORIGIN_V4}{path}"), &[]);
        out.assert_status(200);
    }
    let requests = origin.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    for seen in &requests {
        assert_eq!(
            seen.peer.map(|p| p.ip().to_string()).as_deref(),
            Some(CLIENT_V4),
            "TPROXY with spoof_client: the origin sees the client: {seen:#?}"
        );
        assert_eq!(seen.header("host"), Some(ORIGIN_V4));
    }
    let out = get(&lab, &format!("http://{ORIGIN_V4}/bytes/5"), &[]);
    assert_eq!(out.body, pattern(5));

    assert_host_mismatches_refused(&lab, &origin);
    assert_direct_connection_refused(&lab, &origin, TPROXY_PORT);
    let line = log_line_for(&sepia, &format!("http://{ORIGIN_V4}/bytes/1000"));
    assert_eq!(line[2], CLIENT_V4, "{line:?}");
    assert_eq!(line[8], format!("HIER_DIRECT/{ORIGIN_V4}"), "{line:?}");
}

#[test]
fn tproxy_without_spoofing_connects_from_the_router() {
    let test = "tproxy_without_spoofing_connects_from_the_router";
    let Some(lab) = lab_or_skip(test) else { return };
    let Some(()) = rules_or_skip(test, lab.tproxy(TPROXY_PORT)) else {
        return;
    };
    let origin = lab.origin.start_origin(&format!("{ORIGIN_V4}:80"));
    let _sepia = Sepia::start_in_netns(
        lab.router.name(),
        &config("tproxy", TPROXY_PORT, "spoof_client = false\n"),
    );
    let out = get(&lab, &format!("http://{ORIGIN_V4}/bytes/64"), &[]);
    out.assert_status(200);
    assert_eq!(out.body, pattern(64));
    let seen = origin.single_request();
    assert_eq!(
        seen.peer.map(|p| p.ip().to_string()).as_deref(),
        Some(ROUTER_ORIGIN_SIDE_V4)
    );
}

#[test]
fn ipv6_is_intercepted_by_redirect_and_tproxy() {
    let test = "ipv6_is_intercepted_by_redirect_and_tproxy";
    for (mode, port) in [("intercept", REDIRECT_PORT), ("tproxy", TPROXY_PORT)] {
        let Some(lab) = lab_or_skip(test) else { return };
        let rules = match mode {
            "intercept" => lab.redirect(port),
            _ => lab.tproxy(port),
        };
        let Some(()) = rules_or_skip(test, rules) else {
            return;
        };
        let origin = lab.origin.start_origin(&format!("[{ORIGIN_V6}]:80"));
        let sepia = Sepia::start_in_netns(lab.router.name(), &config(mode, port, ""));
        let url = format!("http://[{ORIGIN_V6}]/bytes/300");
        let out = get(&lab, &url, &[]);
        out.assert_status(200);
        assert_eq!(out.body, pattern(300));
        let seen = origin.single_request();
        assert_eq!(seen.header("host"), Some(format!("[{ORIGIN_V6}]").as_str()));
        let want_peer = if mode == "tproxy" {
            CLIENT_V6
        } else {
            ROUTER_ORIGIN_SIDE_V6
        };
        assert_eq!(
            seen.peer.map(|p| p.ip().to_string()).as_deref(),
            Some(want_peer),
            "{mode}"
        );
        // A Host naming another IPv6 address is refused.
        let out = get(&lab, &url, &["-H", "Host: [fd77:2::9]"]);
        out.assert_status(409);
        assert_eq!(origin.request_count(), 1);
        let line = log_line_for(&sepia, &url);
        assert_eq!(line[2], CLIENT_V6, "{line:?}");
        assert_eq!(line[8], format!("HIER_DIRECT/{ORIGIN_V6}"), "{line:?}");
    }
}
