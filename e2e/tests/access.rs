//! Access rules (`[[acl]]` and `[[http_access]]`) with the real binary: every ACL type, rule
//! order, negation and the default deny, through curl and raw sockets. Each case checks the
//! status the client got and whether the origin saw the request.

use std::net::TcpListener;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sepia_e2e::{curl, free_addr, EchoServer, Origin, RawClient, Sepia};

/// One forward listener (plus `extra_listen`), no cache (so every allowed request reaches the
/// origin), CONNECT to `connect_port`, and the given ACLs and rules. `TZ=UTC` pins the zone
/// `time` ACLs are read in.
fn proxy(extra_listen: &str, connect_port: u16, rules: &str) -> Sepia {
    let config = format!(
        "[server]\nworkers = 1\nshutdown_grace = \"1s\"\n\n\
         [[listen]]\naddress = \"{}\"\nmode = \"forward\"\n\n{extra_listen}\
         [access_log]\npath = \"stdout\"\nformat = \"squid\"\n\n\
         [cache]\nenabled = false\n\n\
         [forward]\nconnect_ports = [{connect_port}]\n\n{rules}",
        free_addr()
    );
    Sepia::start_with_env(&config, &[("TZ", "UTC")])
}

/// `[[acl]]` of `ty` named `name` with `values` (TOML array text) and `extra` keys.
fn acl(name: &str, ty: &str, values: &str, extra: &str) -> String {
    format!("[[acl]]\nname = \"{name}\"\ntype = \"{ty}\"\nvalues = {values}\n{extra}\n")
}

/// `[[http_access]]` with `action` over `acls` (TOML array text).
fn rule(action: &str, acls: &str) -> String {
    format!("[[http_access]]\naction = \"{action}\"\nacl = {acls}\n\n")
}

/// GETs `url` through `sepia` with curl (plus `args`); returns the status and whether the
/// origin saw a new request.
fn get(sepia: &Sepia, origin: &Origin, url: &str, args: &[&str]) -> (u16, bool) {
    let before = origin.request_count();
    let proxy = sepia.url();
    let mut all = vec!["-x", proxy.as_str()];
    all.extend_from_slice(args);
    all.push(url);
    let out = curl(&all);
    (out.status, origin.request_count() > before)
}

/// Asserts each `(url, curl args, expected status)`; a 200 must have reached the origin and
/// anything else must not have.
fn expect(sepia: &Sepia, origin: &Origin, cases: &[(&str, &[&str], u16)]) {
    for (url, args, want) in cases {
        let (status, reached) = get(sepia, origin, url, args);
        assert_eq!(status, *want, "{url} {args:?}\n{}", sepia.stdout());
        assert_eq!(
            reached,
            *want == 200,
            "{url} {args:?}: origin reached = {reached}"
        );
    }
}

#[test]
fn src_allows_listed_clients_including_ipv6_loopback() {
    let origin = Origin::start();
    let v6 = match TcpListener::bind("[::1]:0") {
        Ok(l) => l.local_addr().unwrap().port(),
        Err(e) => {
            println!("SKIPPED: IPv6 loopback [::1] is not available here ({e})");
            return;
        }
    };
    let listen_v6 = format!("[[listen]]\naddress = \"[::1]:{v6}\"\nmode = \"forward\"\n\n");
    let rules = acl("v6_loopback", "src", "[\"::1\"]", "") + &rule("allow", "[\"v6_loopback\"]");
    let sepia = proxy(&listen_v6, 443, &rules);
    let url = format!("{}/src", origin.url());
    // Through the IPv4 listener the client is 127.0.0.1: not listed, denied.
    expect(&sepia, &origin, &[(&url, &[], 403)]);
    let before = origin.request_count();
    let out = curl(&["-x", &format!("http://[::1]:{v6}"), &url]);
    assert_eq!(out.status, 200, "{out:?}");
    assert_eq!(origin.request_count(), before + 1);
}

#[test]
fn src_ipv4_network_and_negation() {
    let origin = Origin::start();
    let rules = acl("loopback", "src", "[\"127.0.0.0/8\"]", "")
        + &rule("deny", "[\"!loopback\"]")
        + &rule("allow", "[\"all\"]");
    let sepia = proxy("", 443, &rules);
    expect(
        &sepia,
        &origin,
        &[(&format!("{}/a", origin.url()), &[], 200)],
    );
    // The same rules with the negation flipped refuse the loopback client.
    let rules = acl("loopback", "src", "[\"127.0.0.0/8\"]", "")
        + &rule("deny", "[\"loopback\"]")
        + &rule("allow", "[\"all\"]");
    let sepia = proxy("", 443, &rules);
    expect(
        &sepia,
        &origin,
        &[(&format!("{}/a", origin.url()), &[], 403)],
    );
}

#[test]
fn dst_checks_the_resolved_address() {
    let origin = Origin::start();
    let port = origin.port();
    let rules =
        acl("origin_ip", "dst", "[\"127.0.0.1/32\"]", "") + &rule("allow", "[\"origin_ip\"]");
    let sepia = proxy("", 443, &rules);
    expect(
        &sepia,
        &origin,
        &[
            // "localhost" comes from /etc/hosts: resolved to 127.0.0.1 before the check.
            (&format!("http://localhost:{port}/dst"), &[], 200),
            (&format!("http://127.0.0.1:{port}/dst"), &[], 200),
            // Another loopback address: not in the ACL, so never contacted.
            (&format!("http://127.0.0.2:{port}/dst"), &[], 403),
        ],
    );
}

#[test]
fn dstdomain_exact_and_suffix_names() {
    let origin = Origin::start();
    let port = origin.port();
    let rules = acl("local_names", "dstdomain", "[\".localhost\"]", "")
        + &acl("literal", "dstdomain", "[\"127.0.0.1\"]", "")
        + &rule("deny", "[\"local_names\"]")
        + &rule("allow", "[\"literal\"]");
    let sepia = proxy("", 443, &rules);
    expect(
        &sepia,
        &origin,
        &[
            // ".localhost" covers the domain itself, in any case, with a trailing dot.
            (&format!("http://localhost:{port}/n"), &[], 403),
            (&format!("http://LocalHost.:{port}/n"), &[], 403),
            (&format!("http://127.0.0.1:{port}/n"), &[], 200),
            // Neither rule matches 127.0.0.2: default deny.
            (&format!("http://127.0.0.2:{port}/n"), &[], 403),
        ],
    );
}

#[test]
fn port_singles_and_ranges() {
    let origin = Origin::start();
    let other = Origin::start();
    let rules = acl("origin_port", "port", &format!("[{}]", origin.port()), "")
        + &acl("wide", "port", "[\"1-1023\"]", "")
        + &rule("allow", "[\"origin_port\"]")
        + &rule("allow", "[\"wide\"]");
    let sepia = proxy("", 443, &rules);
    expect(
        &sepia,
        &origin,
        &[(&format!("{}/p", origin.url()), &[], 200)],
    );
    expect(&sepia, &other, &[(&format!("{}/p", other.url()), &[], 403)]);
}

#[test]
fn method_acl_and_connect_target() {
    let origin = Origin::start();
    let echo = EchoServer::start();
    let rules = acl("post", "method", "[\"POST\"]", "")
        + &acl("connect", "method", "[\"CONNECT\"]", "")
        + &acl("echo_port", "port", &format!("[{}]", echo.port()), "")
        + &rule("deny", "[\"post\"]")
        + &rule("deny", "[\"connect\", \"!echo_port\"]")
        + &rule("allow", "[\"all\"]");
    // connect_ports allows a port the rules refuse: the rules are checked first.
    let sepia = proxy("", 9, &rules);
    let url = format!("{}/m", origin.url());
    expect(
        &sepia,
        &origin,
        &[(&url, &[], 200), (&url, &["--data-binary", "x"], 403)],
    );
    let mut client = RawClient::connect(sepia.addr());
    client.send(b"CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n");
    let r = client.read_response();
    assert_eq!(r.status, 403, "{}", r.raw_head);
    // CONNECT to the echo port passes the rules; connect_ports (only 9) then refuses it: both
    // gates hold.
    let target = echo.addr().to_string();
    let mut client = RawClient::connect(sepia.addr());
    client.send(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes());
    let r = client.read_response();
    assert_eq!(r.status, 403, "{}", r.raw_head);
    assert_eq!(echo.connections(), 0);

    let sepia = proxy("", echo.port(), &rules);
    let mut client = RawClient::connect(sepia.addr());
    client.send(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes());
    let r = client.read_bodiless_response();
    assert_eq!(r.status, 200, "{}", r.raw_head);
    client.send(b"ping");
    assert_eq!(client.read_exact_bytes(4), b"ping");
    assert_eq!(echo.connections(), 1);
}

#[test]
fn url_regex_and_urlpath_regex() {
    let origin = Origin::start();
    let port = origin.port();
    let rules = acl(
        "secret",
        "url_regex",
        "[\"^http://127\\\\.0\\\\.0\\\\.1:[0-9]+/secret\"]",
        "ignore_case = true",
    ) + &acl("blocked_path", "urlpath_regex", "[\"^/blocked\"]", "")
        + &rule("deny", "[\"secret\"]")
        + &rule("deny", "[\"blocked_path\"]")
        + &rule("allow", "[\"all\"]");
    let sepia = proxy("", 443, &rules);
    expect(
        &sepia,
        &origin,
        &[
            (&format!("http://127.0.0.1:{port}/SECRET/x"), &[], 403),
            (&format!("http://127.0.0.1:{port}/public/secret"), &[], 200),
            (&format!("http://127.0.0.1:{port}/blocked/1"), &[], 403),
            // urlpath_regex sees the path and query only, anchored at the path.
            (
                &format!("http://127.0.0.1:{port}/ok?next=/blocked"),
                &[],
                200,
            ),
        ],
    );
}

/// Seconds since the epoch and today's weekday in UTC (0 = Sunday; 1970-01-01 was a Thursday).
fn utc_now() -> (u64, usize) {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    (secs, ((secs / 86_400 + 4) % 7) as usize)
}

#[test]
fn time_matches_today_and_not_other_days() {
    // Keep clear of midnight so "today" cannot change between the test and the proxy.
    while utc_now().0 % 86_400 > 86_400 - 120 {
        std::thread::sleep(Duration::from_secs(5));
    }
    let (_, today) = utc_now();
    let letters = ['S', 'M', 'T', 'W', 'H', 'F', 'A'];
    let other_days: String = (0..7).filter(|&d| d != today).map(|d| letters[d]).collect();
    let origin = Origin::start();
    let rules = acl("every_day", "time", "[\"SMTWHFA 00:00-24:00\"]", "")
        + &acl("other_days", "time", &format!("[\"{other_days}\"]"), "")
        + &rule("deny", "[\"other_days\"]")
        + &rule("allow", "[\"every_day\"]");
    let sepia = proxy("", 443, &rules);
    expect(
        &sepia,
        &origin,
        &[(&format!("{}/t", origin.url()), &[], 200)],
    );
    // Only the other days allowed: today is refused.
    let rules = acl("other_days", "time", &format!("[\"{other_days}\"]"), "")
        + &rule("allow", "[\"other_days\"]");
    let sepia = proxy("", 443, &rules);
    expect(
        &sepia,
        &origin,
        &[(&format!("{}/t", origin.url()), &[], 403)],
    );
}

#[test]
fn req_header_regex_on_a_named_field() {
    let origin = Origin::start();
    let rules = acl(
        "curl_ua",
        "req_header",
        "[\"^curl/\"]",
        "header = \"User-Agent\"",
    ) + &rule("allow", "[\"curl_ua\"]");
    let sepia = proxy("", 443, &rules);
    let url = format!("{}/h", origin.url());
    expect(
        &sepia,
        &origin,
        &[
            (&url, &[], 200),
            (&url, &["-A", "Mozilla/5.0"], 403),
            (&url, &["-H", "X-Agent: curl/8"], 200),
        ],
    );
}

#[test]
fn proxy_auth_without_credentials_gets_a_407_challenge() {
    let origin = Origin::start();
    let rules = acl("local", "src", "[\"127.0.0.0/8\"]", "")
        + &acl("users", "proxy_auth", "[\"REQUIRED\"]", "")
        + &rule("allow", "[\"local\", \"users\"]");
    let sepia = proxy("", 443, &rules);
    let url = format!("{}/auth", origin.url());
    let out = curl(&["-x", &sepia.url(), &url]);
    assert_eq!(out.status, 407, "{out:?}");
    assert_eq!(
        out.header("proxy-authenticate").as_deref(),
        Some("Basic realm=\"Sepia\""),
        "{}",
        out.headers
    );
    // A raw client keeps its connection across the challenge, as a browser retrying with
    // credentials does.
    let authority = origin.addr().to_string();
    let mut client = RawClient::connect(sepia.addr());
    for _ in 0..2 {
        client.send(format!("GET {url} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes());
        let r = client.read_response();
        assert_eq!(r.status, 407, "{}", r.raw_head);
    }
    assert_eq!(origin.request_count(), 0);
    let lines = sepia.wait_for_log_lines(3, Duration::from_secs(5));
    assert!(
        lines.iter().all(|l| l.contains(" TCP_DENIED/407 ")),
        "{lines:#?}"
    );
}

#[test]
fn first_match_wins_and_no_match_denies() {
    let origin = Origin::start();
    let url = format!("{}/order", origin.url());
    let get_acl =
        acl("get", "method", "[\"GET\"]", "") + &acl("local", "src", "[\"127.0.0.1\"]", "");
    // allow before deny: allowed.
    let sepia = proxy(
        "",
        443,
        &(get_acl.clone() + &rule("allow", "[\"get\"]") + &rule("deny", "[\"local\"]")),
    );
    expect(&sepia, &origin, &[(&url, &[], 200)]);
    // deny before allow: denied.
    let sepia = proxy(
        "",
        443,
        &(get_acl.clone() + &rule("deny", "[\"local\"]") + &rule("allow", "[\"get\"]")),
    );
    expect(&sepia, &origin, &[(&url, &[], 403)]);
    // A rule needs all its ACLs; none matching means deny (not Squid's "opposite of the last").
    let sepia = proxy("", 443, &(get_acl + &rule("deny", "[\"get\", \"!local\"]")));
    expect(&sepia, &origin, &[(&url, &[], 403)]);
    let lines = sepia.wait_for_log_lines(1, Duration::from_secs(5));
    assert!(lines[0].contains(" TCP_DENIED/403 "), "{lines:#?}");
}

#[test]
fn rules_govern_reverse_listeners_too() {
    let origin = Origin::start();
    let config = format!(
        "[server]\nworkers = 1\nshutdown_grace = \"1s\"\n\n\
         [[listen]]\naddress = \"{}\"\nmode = \"reverse\"\n\n\
         [[route]]\nhost = \"*\"\norigins = [\"{}\"]\n\n\
         [cache]\nenabled = false\n\n{}{}{}",
        free_addr(),
        origin.url(),
        acl(
            "private",
            "url_regex",
            "[\"^http://intranet\\\\.example/private\"]",
            ""
        ),
        rule("deny", "[\"private\"]"),
        rule("allow", "[\"all\"]"),
    );
    let sepia = Sepia::start(&config);
    for (path, want) in [("/private/x", 403), ("/public", 200)] {
        let out = curl(&[
            "-H",
            "Host: intranet.example",
            &format!("{}{path}", sepia.url()),
        ]);
        assert_eq!(out.status, want, "{path}: {out:?}");
    }
    // The URL the rules see is built from Host: another host's /private is not matched.
    let out = curl(&[
        "-H",
        "Host: www.example",
        &format!("{}/private/x", sepia.url()),
    ]);
    assert_eq!(out.status, 200, "{out:?}");
    assert_eq!(origin.request_count(), 2);
}

#[test]
fn bad_rules_stop_the_load_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sepia.toml");
    let cases = [
        (
            rule("allow", "[\"nobody\"]"),
            6,
            "key 'http_access[0].acl[0]': unknown ACL \"nobody\"",
        ),
        (
            acl("a", "src", "[\"10.0.0.1/8\"]", "") + &rule("allow", "[\"a\"]"),
            7,
            "host bits",
        ),
        (
            acl("a", "srcdomain", "[\"x\"]", "") + &rule("allow", "[\"a\"]"),
            6,
            "unknown ACL type",
        ),
        (
            acl("a", "time", "[\"MTWHF 18:00-08:00\"]", "") + &rule("allow", "[\"a\"]"),
            7,
            "ends before it starts",
        ),
        (
            "[forward]\nallow = [\"10.0.0.0/8\"]\n\n".to_string() + &rule("allow", "[\"all\"]"),
            5,
            "use an [[acl]] of type \"src\"",
        ),
    ];
    for (rules, line, want) in cases {
        let config =
            format!("[[listen]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n{rules}");
        std::fs::write(&path, &config).unwrap();
        let out = std::process::Command::new(sepia_e2e::sepia_bin())
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{config}");
        let place = format!("{}:{line}: ", path.display());
        assert!(
            stderr.contains(&place) && stderr.contains(want),
            "{config}\n{stderr}"
        );
    }
}
