//! The same requests through Squid (5.7 from Debian) and through Sepia, both forward proxies
//! in front of one test origin, and their native-format access-log lines compared field by
//! field: the same ten fields, each of the same shape (`%ts.%03tu`, `%6tr` padding, client IP,
//! `CODE/status`, bytes, method, URL, user, `HIER/peer`, media type), and the same values
//! where the two must agree: result code, status, method, URL, user, hierarchy, peer, and the
//! content type of responses that come from the origin.
//!
//! What may differ, and why:
//! * `%<st` (bytes sent): the heads differ (Squid adds `X-Cache`, its own `Via`, …), so only
//!   "a positive number" is compared.
//! * `%tr` and `%ts`: timing; the timestamps must be within a minute of each other.
//! * `%mt` of responses a proxy makes itself (403, 504): Squid sends its HTML error pages,
//!   Sepia a short `text/plain` text.
//! * The method of a request that cannot be parsed: Squid logs the first word it read, Sepia
//!   logs `NONE`; both log the URL `error:invalid-request` and `NONE_NONE/400`.
//!
//! Squid comes from Debian (`scripts/test.sh` installs the `squid` package). Where it is not
//! installed or cannot start, the test prints `SKIPPED: <reason>` and returns.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use sepia_e2e::{
    curl, forward_config, free_addr, EchoServer, Origin, RawClient, Sepia, Squid, SquidLine,
};

const LOG_WAIT: Duration = Duration::from_secs(10);

/// Squid as a forward proxy on `addr`: loopback clients only, memory cache only, CONNECT
/// only to `connect_port`.
fn start_squid(bin: &std::path::Path, connect_port: u16) -> Result<Squid, String> {
    let addr: SocketAddr = free_addr().parse().unwrap();
    let site = format!(
        "http_port {addr}\n\
         cache_mem 16 MB\n\
         acl localnet src 127.0.0.0/8\n\
         acl allowed_connect port {connect_port}\n\
         acl CONNECT method CONNECT\n\
         http_access deny CONNECT !allowed_connect\n\
         http_access allow localnet\n\
         http_access deny all\n"
    );
    Squid::start(bin, addr, &site)
}

/// One request, sent the same way to either proxy.
enum Request {
    Curl(&'static str, &'static [&'static str]),
    Connect(u16),
    Raw(&'static [u8]),
}

impl Request {
    /// Sends it through the proxy at `proxy`; returns the status the client saw.
    fn send(&self, proxy: SocketAddr, origin: &Origin, echo: &EchoServer) -> u16 {
        match self {
            Request::Curl(path, args) => {
                let url = format!("{}{path}", origin.url());
                let proxy = format!("http://{proxy}");
                let mut all = vec!["-x", proxy.as_str()];
                all.extend_from_slice(args);
                all.push(&url);
                curl(&all).status
            }
            Request::Connect(port) => {
                let target = format!("127.0.0.1:{port}");
                let mut client = RawClient::connect(proxy);
                client.send(
                    format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes(),
                );
                if *port != echo.port() {
                    return client.read_response().status;
                }
                let status = client.read_bodiless_response().status;
                if status == 200 {
                    client.send(b"ping");
                    assert_eq!(client.read_exact_bytes(4), b"ping");
                    client.shutdown_write();
                    assert!(client.wait_closed(LOG_WAIT));
                }
                status
            }
            Request::Raw(bytes) => {
                let mut client = RawClient::connect(proxy);
                client.send(bytes);
                client.read_response().status
            }
        }
    }
}

/// Which of the values that may differ are skipped for one request (see the module doc).
#[derive(Clone, Copy, PartialEq)]
enum Made {
    /// The response comes from the origin (or the cache): every value must agree.
    ByOrigin,
    /// The proxy answered itself: its own error page, so `%mt` differs.
    ByProxy,
    /// Unparsable: `%mt` and `%rm` differ.
    Unparsed,
}

#[test]
fn squid_and_sepia_write_the_same_native_log_lines() {
    let Some(bin) = Squid::binary() else {
        println!("SKIPPED: squid is not installed (scripts/test.sh installs Debian's squid)");
        return;
    };
    let version = Command::new(&bin)
        .arg("-v")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .unwrap_or_default();
    if !version.contains("Version 5.7") {
        println!("note: comparing with {version:?}; the reference is Squid 5.7");
    }
    let origin = Origin::start();
    let echo = EchoServer::start();
    let squid = match start_squid(&bin, echo.port()) {
        Ok(s) => s,
        Err(why) => {
            println!("SKIPPED: {why}");
            return;
        }
    };
    let sepia = Sepia::start(&forward_config(
        &free_addr(),
        &["127.0.0.0/8"],
        &[echo.port()],
    ));

    // The cacheable object carries a Date: Squid 5.7 revalidates a stored response that has
    // none on every request (TCP_REFRESH_MODIFIED), where Sepia takes its age from when it
    // arrived (RFC 9111 §4.2.3) and serves it fresh.
    let requests: [(Request, u16, Made); 8] = [
        (
            Request::Curl("/cc/max-age=60/compare", &[]),
            200,
            Made::ByOrigin,
        ),
        (
            Request::Curl("/cc/max-age=60/compare", &[]),
            200,
            Made::ByOrigin,
        ),
        (
            Request::Curl("/cc/max-age=60/compare", &["-I"]),
            200,
            Made::ByOrigin,
        ),
        (Request::Curl("/status/404", &[]), 404, Made::ByOrigin),
        (
            Request::Curl("/cacheable/cold", &["-H", "Cache-Control: only-if-cached"]),
            504,
            Made::ByProxy,
        ),
        (Request::Connect(echo.port()), 200, Made::ByOrigin),
        (Request::Connect(1), 403, Made::ByProxy),
        (Request::Raw(b"GARBAGE\r\n\r\n"), 400, Made::Unparsed),
    ];
    for (i, (request, status, _)) in requests.iter().enumerate() {
        for (name, proxy) in [("squid", squid.addr()), ("sepia", sepia.addr())] {
            assert_eq!(
                request.send(proxy, &origin, &echo),
                *status,
                "request {i} via {name}"
            );
        }
        // One line each before the next request, so the two logs stay in the same order.
        squid.wait_for_log_lines(i + 1);
        sepia.wait_for_log_lines(i + 1, LOG_WAIT);
    }
    let squid_lines = squid.wait_for_log_lines(requests.len());
    let sepia_lines = sepia.wait_for_log_lines(requests.len(), LOG_WAIT);
    assert_eq!(
        squid_lines.len(),
        sepia_lines.len(),
        "{squid_lines:#?}\n{sepia_lines:#?}"
    );
    for (i, (_, _, made)) in requests.iter().enumerate() {
        compare(&squid_lines[i], &sepia_lines[i], *made);
    }
    println!("squid: {squid_lines:#?}\nsepia: {sepia_lines:#?}");
}

/// Compares one Squid line with Sepia's line for the same request.
fn compare(squid: &str, sepia: &str, made: Made) {
    let ctx = format!("\n squid: {squid:?}\n sepia: {sepia:?}");
    let (q, s) = (SquidLine::parse(squid), SquidLine::parse(sepia));
    q.assert_layout();
    s.assert_layout();
    assert_eq!(q.fields.len(), s.fields.len(), "field count{ctx}");
    // `%>a`
    assert_eq!(q.fields[2], s.fields[2], "client{ctx}");
    // `%Ss/%03>Hs`
    assert_eq!(q.code(), s.code(), "result code{ctx}");
    assert_eq!(q.status(), s.status(), "status{ctx}");
    // `%<st`: the heads differ, so only both positive.
    assert!(q.bytes() > 0 && s.bytes() > 0, "bytes{ctx}");
    if made != Made::Unparsed {
        assert_eq!(q.method(), s.method(), "method{ctx}");
    }
    assert_eq!(q.url(), s.url(), "URL{ctx}");
    assert_eq!(q.user(), s.user(), "user{ctx}");
    assert_eq!(q.hierarchy(), s.hierarchy(), "hierarchy{ctx}");
    assert_eq!(q.peer(), s.peer(), "peer{ctx}");
    if made == Made::ByOrigin {
        assert_eq!(q.mime_type(), s.mime_type(), "content type{ctx}");
    }
    let secs = |l: &SquidLine| -> u64 { l.fields[0].split_once('.').unwrap().0.parse().unwrap() };
    assert!(secs(&q).abs_diff(secs(&s)) < 60, "timestamps{ctx}");
}
