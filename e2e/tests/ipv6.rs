//! IPv6 on the loopback `[::1]`: listeners, reverse routes to `http://[::1]:port` origins,
//! forward requests to `http://[::1]:port/`, CONNECT to `[::1]:port`, the access log, and a
//! cache hit keyed by a bracketed authority.
//!
//! Where the machine has no IPv6 loopback, each test prints `SKIPPED: <reason>` and returns.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use sepia_e2e::{curl, pattern, EchoServer, Origin, RawClient, Sepia};

const LOG_WAIT: Duration = Duration::from_secs(10);

/// A free `[::1]:PORT`, or `None` after saying why there is none.
fn free_v6_or_skip(test: &str) -> Option<SocketAddr> {
    match TcpListener::bind("[::1]:0").and_then(|l| l.local_addr()) {
        Ok(addr) => Some(addr),
        Err(e) => {
            eprintln!("SKIPPED: {test}: no IPv6 loopback here (bind [::1]:0: {e})");
            None
        }
    }
}

const SERVER: &str = "[server]\nworkers = 1\nshutdown_grace = \"1s\"\n\n";
const LOG: &str = "[access_log]\npath = \"stdout\"\nformat = \"squid\"\n";

/// The access-log lines, each split into its fields, once `n` have been written.
fn log_fields(sepia: &Sepia, n: usize) -> Vec<Vec<String>> {
    sepia
        .wait_for_log_lines(n, LOG_WAIT)
        .iter()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn reverse_listener_and_origin_on_ipv6_loopback() {
    let Some(listen) = free_v6_or_skip("reverse_listener_and_origin_on_ipv6_loopback") else {
        return;
    };
    let origin = Origin::start_on("[::1]:0");
    let sepia = Sepia::start(&format!(
        "{SERVER}[[listen]]\naddress = \"{listen}\"\nmode = \"reverse\"\n\n{LOG}\n\
         [[route]]\nhost = \"*\"\norigins = [\"http://[::1]:{}\"]\nhost_header = \"origin\"\n",
        origin.port()
    ));
    let out = curl(&["-g", &format!("http://{}/bytes/4321", sepia.addr())]);
    out.assert_status(200);
    assert_eq!(out.body, pattern(4321));
    let seen = origin.single_request();
    // host_header = "origin": the origin's authority, bracketed (RFC 3986 §3.2.2).
    assert_eq!(
        seen.header("host"),
        Some(format!("[::1]:{}", origin.port()).as_str())
    );
    assert_eq!(seen.header("x-forwarded-for"), Some("::1"));
    assert_eq!(
        seen.peer.map(|p| p.ip().to_string()).as_deref(),
        Some("::1")
    );

    let line = &log_fields(&sepia, 1)[0];
    assert_eq!(line[2], "::1", "client address: {line:?}");
    assert_eq!(line[3], "TCP_MISS/200", "{line:?}");
    assert_eq!(line[8], "HIER_DIRECT/::1", "{line:?}");
}

#[test]
fn forward_proxy_on_ipv6_fetches_caches_and_tunnels() {
    let Some(listen) = free_v6_or_skip("forward_proxy_on_ipv6_fetches_caches_and_tunnels") else {
        return;
    };
    let origin = Origin::start_on("[::1]:0");
    let echo = EchoServer::start_on("[::1]:0");
    let sepia = Sepia::start(&format!(
        "{SERVER}[[listen]]\naddress = \"{listen}\"\nmode = \"forward\"\n\n{LOG}\n\
         [forward]\nallow = [\"::1/128\"]\nconnect_ports = [{}]\n",
        echo.port()
    ));
    let proxy = format!("http://{}", sepia.addr());
    let authority = format!("[::1]:{}", origin.port());

    let out = curl(&["-g", "-x", &proxy, &format!("http://{authority}/bytes/99")]);
    out.assert_status(200);
    assert_eq!(out.body, pattern(99));
    let seen = origin.single_request();
    assert_eq!(seen.target, "/bytes/99");
    assert_eq!(seen.header("host"), Some(authority.as_str()));

    // Stored under http://[::1]:port/...: the second request is a hit.
    let cached = format!("http://{authority}/cc/max-age=60/six");
    curl(&["-g", "-x", &proxy, &cached]).assert_status(200);
    let again = curl(&["-g", "-x", &proxy, &cached]);
    again.assert_status(200);
    assert_eq!(again.text(), "GET /cc/max-age=60/six");
    assert_eq!(origin.request_count(), 2, "{:#?}", origin.requests());

    // CONNECT to a bracketed IPv6 authority.
    let target = format!("[::1]:{}", echo.port());
    let mut client = RawClient::connect(sepia.addr());
    client.send(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes());
    let r = client.read_bodiless_response();
    assert_eq!(r.status, 200, "{}", r.raw_head);
    let data = pattern(10_000);
    client.writer_handle().write_all(&data).unwrap();
    assert!(
        client.read_exact_bytes(data.len()) == data,
        "tunnelled bytes differ"
    );
    assert_eq!(echo.connections(), 1);
    client.shutdown_write();
    assert!(client.wait_closed(Duration::from_secs(10)));

    let lines = log_fields(&sepia, 4);
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line[2], "::1", "client address: {line:?}");
        // A hit involves no origin: Squid logs HIER_NONE/- for it.
        let peer = if i == 2 {
            "HIER_NONE/-"
        } else {
            "HIER_DIRECT/::1"
        };
        assert_eq!(line[8], peer, "{line:?}");
    }
    assert_eq!(lines[0][6], format!("http://{authority}/bytes/99"));
    assert_eq!(lines[1][3], "TCP_MISS/200", "{:?}", lines[1]);
    assert_eq!(lines[2][3], "TCP_MEM_HIT/200", "{:?}", lines[2]);
    assert_eq!(lines[3][3], "TCP_TUNNEL/200", "{:?}", lines[3]);
    assert_eq!(lines[3][5], "CONNECT", "{:?}", lines[3]);
    assert_eq!(lines[3][6], target, "{:?}", lines[3]);
}
