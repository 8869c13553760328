//! Transparent interception, end to end: a client namespace whose port-80 traffic to an origin
//! namespace is routed through a router namespace where Sepia runs, diverted into Sepia by
//! iptables REDIRECT (`mode = "intercept"`) or TPROXY (`mode = "tproxy"`). curl in the client
//! namespace talks to the origin's address as if no proxy were there; the origin records what
//! arrives and from where.
//!
//! Needs root (namespaces, iptables). Where the machine refuses, each test prints
//! `SKIPPED: <reason>` (visible with `cargo test -- --nocapture`) and returns.

use std::time::Duration;

use sepia_e2e::netns::NsOrigin;
use sepia_e2e::netns::{
    Lab, CLIENT_V4, CLIENT_V6, ORIGIN_V4, ORIGIN_V6, ROUTER_CLIENT_SIDE_V4, ROUTER_ORIGIN_SIDE_V4,
    ROUTER_ORIGIN_SIDE_V6,
};
use sepia_e2e::{curl_in_netns, pattern, CurlOutput, RecordedRequest, Sepia};

const LOG_WAIT: Duration = Duration::from_secs(10);
const REDIRECT_PORT: u16 = 3129;
const TPROXY_PORT: u16 = 3130;

/// A built lab with its origin and Sepia; fields drop in order (Sepia stops first).
struct Setup {
    sepia: Sepia,
    origin: NsOrigin,
    lab: Lab,
}

/// Builds the lab, diverts port 80 into Sepia on `port` (iptables REDIRECT for `"intercept"`,
/// TPROXY for `"tproxy"`, the nftables equivalents for `"nft-intercept"` and `"nft-tproxy"`), starts an origin on `origin_addr` and Sepia with `extra` listener keys. `None`
/// after saying plainly why this machine cannot do it.
fn setup_or_skip(
    test: &str,
    mode: &str,
    port: u16,
    extra: &str,
    origin_addr: &str,
) -> Option<Setup> {
    let lab = match Lab::build() {
        Ok(lab) => lab,
        Err(why) => {
            eprintln!("SKIPPED: {test}: cannot build network namespaces here: {why}");
            return None;
        }
    };
    let rules = match mode {
        "intercept" => lab.redirect(port),
        "tproxy" => lab.tproxy(port),
        // The nftables recipes of docs/INTERCEPTION.md.
        "nft-intercept" => lab.nft("redirect", port),
        _ => lab.nft("tproxy", port),
    };
    if let Err(why) = rules {
        eprintln!("SKIPPED: {test}: the kernel refused the diversion rules: {why}");
        return None;
    }
    // Read by Sepia's resolver when it verifies a Host name (`ip netns exec` mounts it).
    lab.router
        .set_etc_file(
            "hosts",
            "127.0.0.1 localhost\n10.77.2.2 origin.test\n10.77.2.9 elsewhere.test\n",
        )
        .expect("hosts file for the router namespace");
    let origin = lab.origin.start_origin(origin_addr);
    let mode = mode.trim_start_matches("nft-");
    let sepia = Sepia::start_in_netns(lab.router.name(), &config(mode, port, extra));
    Some(Setup { sepia, origin, lab })
}

/// The IP address a request reached the origin from.
fn peer_ip(seen: &RecordedRequest) -> String {
    seen.peer.map(|p| p.ip().to_string()).unwrap_or_default()
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
fn assert_host_mismatches_refused(lab: &Lab, origin: &NsOrigin) {
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
fn assert_direct_connection_refused(lab: &Lab, origin: &NsOrigin, port: u16) {
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
    let origin_addr = format!("{ORIGIN_V4}:80");
    let Some(Setup { sepia, origin, lab }) =
        setup_or_skip(test, "intercept", REDIRECT_PORT, "", &origin_addr)
    else {
        return;
    };

    // The client asks the origin's address; Sepia answers on its behalf.
    let out = get(&lab, &format!("http://{ORIGIN_V4}/bytes/100"), &[]);
    out.assert_status(200);
    assert_eq!(out.body, pattern(100));
    assert_eq!(out.header("via").as_deref(), Some("1.1 sepia"));
    let seen = origin.single_request();
    assert_eq!(seen.target, "/bytes/100");
    assert_eq!(seen.header("host"), Some(ORIGIN_V4));
    assert_eq!(
        peer_ip(&seen),
        ROUTER_ORIGIN_SIDE_V4,
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
    let cache_status = again.header("cache-status").unwrap_or_default();
    assert!(cache_status.contains("hit"), "{}", again.headers);

    assert_host_mismatches_refused(&lab, &origin);
    assert_direct_connection_refused(&lab, &origin, REDIRECT_PORT);

    // Logged with the client's address and the original destination as the peer (%<a).
    let line = log_line_for(&sepia, &format!("http://{ORIGIN_V4}/bytes/100"));
    assert_eq!(line[2], CLIENT_V4, "{line:?}");
    assert_eq!(line[3], "TCP_MISS/200", "{line:?}");
    assert_eq!(line[8], format!("HIER_DIRECT/{ORIGIN_V4}"), "{line:?}");
    // Two misses, a miss and a hit, four conflicts, one refusal: nine lines in all.
    let log = sepia.wait_for_log_lines(9, LOG_WAIT);
    assert_eq!(log.len(), 9, "{log:#?}");
    assert!(log[8].contains(" TCP_DENIED/403 "), "{log:#?}");
    let hits = log
        .iter()
        .filter(|l| l.contains(&url) && l.contains("TCP_MEM_HIT/200"));
    assert_eq!(hits.count(), 1, "{log:#?}");
    let conflicts = log.iter().filter(|l| l.contains("/409 ")).count();
    assert_eq!(conflicts, 4, "{log:#?}");

    // An https:// URL is never sent in clear text to the original destination.
    let before = origin.request_count();
    let https = format!("https://{ORIGIN_V4}/bytes/5");
    let out = get(
        &lab,
        &format!("http://{ORIGIN_V4}/"),
        &["--request-target", &https],
    );
    out.assert_status(501);
    assert_eq!(origin.request_count(), before);
}

#[test]
fn tproxy_spoofs_the_client_address_toward_the_origin() {
    let test = "tproxy_spoofs_the_client_address_toward_the_origin";
    let origin_addr = format!("{ORIGIN_V4}:80");
    // spoof_client defaults to true, as in Squid.
    let Some(Setup { sepia, origin, lab }) =
        setup_or_skip(test, "tproxy", TPROXY_PORT, "", &origin_addr)
    else {
        return;
    };
    for path in ["/bytes/1000", "/echo"] {
        get(&lab, &format!("http://{ORIGIN_V4}{path}"), &[]).assert_status(200);
    }
    let requests = origin.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    for seen in &requests {
        let why = format!("TPROXY with spoof_client: the origin sees the client: {seen:#?}");
        assert_eq!(peer_ip(seen), CLIENT_V4, "{why}");
        assert_eq!(seen.header("host"), Some(ORIGIN_V4));
    }
    // A name verified against the destination works through TPROXY as well.
    let out = get(
        &lab,
        "http://origin.test/bytes/5",
        &["--resolve", "origin.test:80:10.77.2.2"],
    );
    out.assert_status(200);
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
    let origin_addr = format!("{ORIGIN_V4}:80");
    let no_spoof = "spoof_client = false\n";
    // Bound, not `..`: an unbound Sepia would be dropped (stopped) at once.
    let Some(Setup {
        sepia: _sepia,
        origin,
        lab,
    }) = setup_or_skip(test, "tproxy", TPROXY_PORT, no_spoof, &origin_addr)
    else {
        return;
    };
    let out = get(&lab, &format!("http://{ORIGIN_V4}/bytes/64"), &[]);
    out.assert_status(200);
    assert_eq!(out.body, pattern(64));
    assert_eq!(peer_ip(&origin.single_request()), ROUTER_ORIGIN_SIDE_V4);
}

#[test]
fn ipv6_is_intercepted_by_redirect_and_tproxy() {
    let test = "ipv6_is_intercepted_by_redirect_and_tproxy";
    let origin_addr = format!("[{ORIGIN_V6}]:80");
    // REDIRECT: the origin sees the router; TPROXY spoofing: the client.
    for (mode, port, want_peer) in [
        ("intercept", REDIRECT_PORT, ROUTER_ORIGIN_SIDE_V6),
        ("tproxy", TPROXY_PORT, CLIENT_V6),
    ] {
        let Some(Setup { sepia, origin, lab }) = setup_or_skip(test, mode, port, "", &origin_addr)
        else {
            return;
        };
        let url = format!("http://[{ORIGIN_V6}]/bytes/300");
        let out = get(&lab, &url, &[]);
        out.assert_status(200);
        assert_eq!(out.body, pattern(300));
        let seen = origin.single_request();
        assert_eq!(seen.header("host"), Some(format!("[{ORIGIN_V6}]").as_str()));
        assert_eq!(peer_ip(&seen), want_peer, "{mode}");
        // A Host naming another IPv6 address is refused.
        let out = get(&lab, &url, &["-H", "Host: [fd77:2::9]"]);
        out.assert_status(409);
        assert_eq!(origin.request_count(), 1);
        let line = log_line_for(&sepia, &url);
        assert_eq!(line[2], CLIENT_V6, "{line:?}");
        assert_eq!(line[8], format!("HIER_DIRECT/{ORIGIN_V6}"), "{line:?}");
    }
}

#[test]
fn nftables_rules_divert_like_iptables() {
    let test = "nftables_rules_divert_like_iptables";
    let origin_addr = format!("{ORIGIN_V4}:80");
    for (mode, port, want_peer) in [
        ("nft-intercept", REDIRECT_PORT, ROUTER_ORIGIN_SIDE_V4),
        ("nft-tproxy", TPROXY_PORT, CLIENT_V4),
    ] {
        let Some(Setup {
            sepia: _sepia,
            origin,
            lab,
        }) = setup_or_skip(test, mode, port, "", &origin_addr)
        else {
            return;
        };
        let out = get(&lab, &format!("http://{ORIGIN_V4}/bytes/77"), &[]);
        out.assert_status(200);
        assert_eq!(out.body, pattern(77), "{mode}");
        assert_eq!(peer_ip(&origin.single_request()), want_peer, "{mode}");
        assert_host_mismatches_refused(&lab, &origin);
    }
}
