//! The HTTP/2 front end, reached by prior-knowledge h2c (`listen[].h2c = true`): real HTTP/2
//! clients (curl, h2load) and hand-framed attackers (`e2e/scripts/h2_attacks.py`, Debian
//! python3-h2) against the real binary and a real origin. Every stream goes through the
//! same pipeline as an HTTP/1.1 request: the same cache (a fill in one protocol is a hit in
//! the other), the same log. What an attacker tries must end with its connection told to go
//! away or closed, while another client is still served.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sepia_e2e::{curl, free_addr, pattern, reverse_config, sha256_hex, Origin, RawClient, Sepia};

/// The client idle limit of these tests: what bounds an attacker that sends no request.
const CLIENT_IDLE: u64 = 3;

/// A reverse proxy with h2c on its listener, the combined log format (which writes the
/// protocol version), short client and origin limits, and `extra` appended.
fn h2c_proxy(extra: &str) -> (Origin, Sepia) {
    h2c_proxy_waiting(3, extra)
}

/// [`h2c_proxy`] whose origins may take `origin_wait` seconds to answer.
fn h2c_proxy_waiting(origin_wait: u64, extra: &str) -> (Origin, Sepia) {
    let origin = Origin::start();
    let config = reverse_config(&free_addr(), &[&origin.url()])
        .replace("mode = \"reverse\"\n", "mode = \"reverse\"\nh2c = true\n")
        .replace("format = \"squid\"", "format = \"combined\"")
        + &format!(
            "[timeouts]\nclient_idle = \"{CLIENT_IDLE}s\"\n\
             origin_first_byte = \"{origin_wait}s\"\n{extra}"
        );
    (origin, Sepia::start(&config))
}

/// curl over HTTP/2 with prior knowledge.
fn h2(url: &str, args: &[&str]) -> sepia_e2e::CurlOutput {
    let mut all = vec!["--http2-prior-knowledge"];
    all.extend_from_slice(args);
    all.push(url);
    curl(&all)
}

#[track_caller]
fn assert_http2(out: &sepia_e2e::CurlOutput) {
    assert!(
        out.headers.starts_with("HTTP/2 "),
        "not an HTTP/2 response:\n{}\n{}",
        out.headers,
        out.stderr
    );
}

#[test]
fn a_miss_then_a_hit_over_h2_and_the_cache_is_shared_with_h1() {
    let (origin, sepia) = h2c_proxy("");
    let url = format!("{}/cacheable/shared", sepia.url());
    let miss = h2(&url, &[]);
    miss.assert_status(200);
    assert_http2(&miss);
    assert_eq!(origin.request_count(), 1);
    let hit = h2(&url, &[]);
    hit.assert_status(200);
    assert_eq!(hit.body, miss.body);
    assert_eq!(
        origin.request_count(),
        1,
        "the h2 repeat went to the origin"
    );
    assert!(hit.header("age").is_some(), "{}", hit.headers);
    assert!(
        hit.header("cache-status").unwrap().contains("hit"),
        "{}",
        hit.headers
    );
    // Filled over h2, a hit over h1; then filled over h1, a hit over h2.
    let h1 = curl(&[&url]);
    h1.assert_status(200);
    assert_eq!(h1.body, miss.body);
    assert_eq!(
        origin.request_count(),
        1,
        "the h1 request missed an h2 fill"
    );
    let other = format!("{}/cacheable/filled-by-h1", sepia.url());
    curl(&[&other]).assert_status(200);
    assert_eq!(origin.request_count(), 2);
    let from_h1 = h2(&other, &[]);
    from_h1.assert_status(200);
    assert_http2(&from_h1);
    assert_eq!(
        origin.request_count(),
        2,
        "the h2 request missed an h1 fill"
    );
    // What the origin saw of the h2 request: an ordinary h1 request, Host from :authority.
    let seen = &origin.requests()[0];
    assert_eq!(
        (seen.method.as_str(), seen.target.as_str()),
        ("GET", "/cacheable/shared")
    );
    assert_eq!(seen.header("host"), Some(sepia.addr().to_string().as_str()));
}

#[test]
fn head_post_ranges_and_304_over_h2() {
    let (origin, sepia) = h2c_proxy("");
    let base = sepia.url();
    // HEAD: the length, no content.
    let head = h2(&format!("{base}/bytes/5000"), &["-I"]);
    head.assert_status(200);
    assert_eq!(head.header("content-length").as_deref(), Some("5000"));
    // curl -I writes the head where the body would go: no 5000 bytes of content after it.
    assert!(
        head.body.len() < 1000,
        "{} bytes after a HEAD",
        head.body.len()
    );
    // POST: the content streams to the origin, framed by its length.
    let body = pattern(3 * 1024 * 1024 + 17);
    let file = sepia.dir().join("upload");
    std::fs::write(&file, &body).unwrap();
    let at_file = format!("@{}", file.display());
    let post = h2(&format!("{base}/echo"), &["--data-binary", &at_file]);
    post.assert_status(200);
    assert_eq!(post.header("x-body-len").as_deref(), Some("3145745"));
    assert!(post.body == body, "the echoed body differs");
    let seen = origin
        .requests()
        .into_iter()
        .find(|r| r.path() == "/echo")
        .unwrap();
    assert_eq!(seen.header("content-length"), Some("3145745"));
    assert_eq!(sha256_hex(&seen.body), sha256_hex(&body));
    // A range of a stored representation: 206 from the cache.
    let url = format!("{base}/ranged/1000/r");
    h2(&url, &[]).assert_status(200);
    let before = origin.request_count();
    let part = h2(&url, &["-r", "100-199"]);
    part.assert_status(206);
    assert_eq!(
        part.header("content-range").as_deref(),
        Some("bytes 100-199/1000")
    );
    assert!(part.body == pattern(1000)[100..200]);
    assert_eq!(
        origin.request_count(),
        before,
        "the range was not served from the cache"
    );
    // A HEAD hit: the stored length, no content.
    let stored = format!("{base}/cacheable/head");
    h2(&stored, &[]).assert_status(200);
    let before = origin.request_count();
    let head_hit = h2(&stored, &["-I"]);
    head_hit.assert_status(200);
    assert!(head_hit.header("cache-status").unwrap().contains("hit"));
    assert!(head_hit.header("content-length").is_some());
    assert_eq!(origin.request_count(), before);
    // No requested range overlaps the stored content: 416 from the cache.
    let beyond = h2(&url, &["-r", "5000-5100"]);
    beyond.assert_status(416);
    assert_eq!(
        beyond.header("content-range").as_deref(),
        Some("bytes */1000")
    );
    // A conditional request the cache answers 304.
    let url = format!("{base}/cc/max-age=60");
    let full = h2(&url, &[]);
    full.assert_status(200);
    let etag = full.header("etag").unwrap();
    let not_modified = h2(&url, &["-H", &format!("If-None-Match: {etag}")]);
    not_modified.assert_status(304);
    assert!(not_modified.body.is_empty());
    assert_eq!(not_modified.header("etag"), Some(etag));
}

#[test]
fn the_access_log_names_the_protocol() {
    let (_origin, sepia) = h2c_proxy("");
    h2(&format!("{}/bytes/10", sepia.url()), &[]).assert_status(200);
    curl(&[&format!("{}/bytes/11", sepia.url())]).assert_status(200);
    let lines = sepia.wait_for_log_lines(2, Duration::from_secs(10));
    let h2_line = lines.iter().find(|l| l.contains("/bytes/10")).unwrap();
    let h1_line = lines.iter().find(|l| l.contains("/bytes/11")).unwrap();
    assert!(h2_line.contains("/bytes/10 HTTP/2.0\" 200 "), "{h2_line}");
    assert!(h1_line.contains("/bytes/11 HTTP/1.1\" 200 "), "{h1_line}");
}

#[test]
fn without_h2c_the_preface_is_an_invalid_request() {
    let origin = Origin::start();
    let sepia = Sepia::start(&reverse_config(&free_addr(), &[&origin.url()]));
    let mut client = RawClient::connect(sepia.addr());
    client.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    let r = client.read_response();
    assert_eq!(r.status, 400);
    assert!(client.wait_closed(Duration::from_secs(5)));
    let out = h2(&format!("{}/bytes/10", sepia.url()), &[]);
    assert_ne!(out.status, 200, "h2c served without listen.h2c");
    assert_eq!(origin.heads_seen(), 0);
    // HTTP/1.1 on an h2c listener is unchanged.
    let (_o, h2c) = h2c_proxy("");
    let mut client = RawClient::connect(h2c.addr());
    client.send(
        b"GET /bytes/10 HTTP/1.1\r\nHost: app\r\n\r\nGET /bytes/20 HTTP/1.1\r\nHost: app\r\n\r\n",
    );
    assert_eq!(client.read_response().body, pattern(10));
    assert_eq!(client.read_response().body, pattern(20));
}

#[test]
fn h2load_many_concurrent_streams() {
    let (_origin, sepia) = h2c_proxy("");
    let url = format!("{}/cacheable/load", sepia.url());
    let out = Command::new("h2load")
        .args(["-n", "4000", "-c", "2", "-m", "128", &url])
        .output()
        .expect("run h2load (Debian nghttp2-client)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("requests: 4000 total, 4000 started, 4000 done, 4000 succeeded, 0 failed"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("status codes: 4000 2xx"), "{text}");
}

#[test]
fn a_connection_answering_hits_is_not_idle() {
    // Hits are answered on the connection's own task, never as a task of their own: they
    // must still count as activity, or a busy connection would be told to go away after
    // `client_idle`. Two hits a second for twice the idle limit, on one connection.
    let (_origin, sepia) = h2c_proxy("");
    let url = format!("{}/cacheable/busy", sepia.url());
    assert_eq!(h2(&url, &[]).status, 200);
    let seconds = (2 * CLIENT_IDLE).to_string();
    let out = Command::new("h2load")
        .args(["-c", "1", "-m", "1", "--rps", "2", "-D", &seconds, &url])
        .output()
        .expect("run h2load (Debian nghttp2-client)");
    let text = String::from_utf8_lossy(&out.stdout);
    let done: u64 = text
        .split(" started, ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(done >= 2 * 2 * CLIENT_IDLE - 2, "{text}");
    assert!(text.contains("succeeded, 0 failed"), "{text}");
}

/// Runs `h2_attacks.py MODE ARG` against `sepia` in the background.
fn attack(sepia: &Sepia, mode: &str, arg: &str) -> Child {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/h2_attacks.py");
    Command::new("/usr/bin/python3")
        .args([
            script,
            "127.0.0.1",
            &sepia.addr().port().to_string(),
            mode,
            arg,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run /usr/bin/python3 (Debian python3-h2)")
}

/// The attacker's report (one JSON object), as `"key": value` text to search.
fn report(child: Child) -> String {
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && text.starts_with('{'),
        "attack script failed: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Another client's requests (h2 and h1) succeed while the attack runs.
fn bystander_is_served(sepia: &Sepia, attacker: &mut Child) -> usize {
    let mut served = 0;
    let started = Instant::now();
    while attacker.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(60) {
        let out = h2(&format!("{}/bytes/1000", sepia.url()), &["--max-time", "5"]);
        out.assert_status(200);
        assert!(out.body == pattern(1000));
        curl(&[&format!("{}/bytes/100", sepia.url())]).assert_status(200);
        served += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    served
}

#[test]
fn the_downgrade_corpus_is_refused_and_never_reaches_the_origin() {
    let (origin, sepia) = h2c_proxy("");
    let text = report(attack(&sepia, "downgrade", ""));
    // Each case: a 400 from Sepia, a stream reset or the connection ended (h2 crate checks).
    let results = text.split("\"results\": {").nth(1).unwrap();
    let mut cases = 0;
    for case in results.trim_end_matches(['}', '\n']).split(", ") {
        let (name, outcome) = case.split_once(": ").unwrap();
        let outcome = outcome.trim_matches('"');
        if name == "\"control\"" {
            assert_eq!(
                outcome, "200",
                "a valid request after the corpus failed: {text}"
            );
            continue;
        }
        cases += 1;
        let refused = outcome == "400"
            || outcome.starts_with("rst:")
            || outcome.starts_with("goaway:")
            || outcome == "closed";
        assert!(refused, "{name} was not refused ({outcome}): {text}");
    }
    assert!(cases >= 40, "{text}");
    // The origin saw the control request only: nothing of any refused one.
    let seen: Vec<String> = origin.requests().iter().map(|r| r.target.clone()).collect();
    assert_eq!(seen, ["/ok"], "{text}");
    assert_eq!(
        origin.heads_seen(),
        1,
        "an incomplete request reached the origin"
    );
}

#[test]
fn rapid_reset_ends_the_connection() {
    let (_origin, sepia) = h2c_proxy("");
    let mut attacker = attack(&sepia, "rapid-reset", "");
    bystander_is_served(&sepia, &mut attacker);
    let text = report(attacker);
    assert!(text.contains("\"closed\": true"), "{text}");
    h2(&format!("{}/bytes/10", sepia.url()), &[]).assert_status(200);
}

#[test]
fn a_continuation_flood_ends_the_connection() {
    let (_origin, sepia) = h2c_proxy("");
    let mut attacker = attack(&sepia, "continuation", "");
    bystander_is_served(&sepia, &mut attacker);
    let text = report(attacker);
    assert!(text.contains("\"closed\": true"), "{text}");
    // Closed long before the 2000 frames (32 MB of header block) were all taken.
    let sent: u64 = field(&text, "sent");
    assert!(sent < 2000, "{text}");
}

/// A number from the report.
fn field(text: &str, key: &str) -> u64 {
    let at = text.find(&format!("\"{key}\": ")).unwrap() + key.len() + 4;
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap_or_else(|_| panic!("{key} in {text}"))
}

/// A control-frame flood from a client that never reads: memory stays bounded (the h2 crate
/// stops reading while its answer is unsent) and the connection, which carries no request,
/// is closed once idle.
fn control_flood_is_closed(mode: &str) {
    let (_origin, sepia) = h2c_proxy("");
    let rss_before = sepia.rss_kib();
    let mut attacker = attack(&sepia, mode, "4");
    let served = bystander_is_served(&sepia, &mut attacker);
    assert!(served > 0);
    let text = report(attacker);
    assert!(text.contains("\"closed\": true"), "{text}");
    // Closed by the control-frame budget (front/h2/meter.rs) while flooding, long before the
    // 4 s flood would end or the connection would count as idle.
    let number = |key: &str| -> f64 {
        let after = text.split(&format!("\"{key}\": ")).nth(1).unwrap();
        after.split([',', '}']).next().unwrap().parse().unwrap()
    };
    assert!(number("flood_seconds") < 2.0, "{text}");
    assert!(number("seconds") < (CLIENT_IDLE + 5 + 3) as f64, "{text}");
    assert!(
        sepia.stderr().contains("PING, SETTINGS or PRIORITY frames"),
        "{}",
        sepia.stderr()
    );
    let grown = sepia.rss_kib().saturating_sub(rss_before);
    assert!(
        grown < 64 * 1024,
        "RSS grew by {grown} KiB under a {mode} flood"
    );
}

#[test]
fn a_ping_flood_is_closed() {
    control_flood_is_closed("ping");
}

#[test]
fn a_settings_flood_is_closed() {
    control_flood_is_closed("settings");
}

#[test]
fn streams_past_the_limit_are_refused_and_the_connection_still_closes() {
    let (_origin, sepia) = h2c_proxy("");
    let mut attacker = attack(&sepia, "stream-limit", "/hang");
    bystander_is_served(&sepia, &mut attacker);
    let text = report(attacker);
    assert_eq!(field(&text, "advertised"), 128, "{text}");
    assert_eq!(field(&text, "refused"), 10, "{text}");
    assert!(field(&text, "first_refused") > 2 * 128, "{text}");
    // The 128 hanging streams end at the origin limit (504), then the idle connection goes.
    assert!(text.contains("\"closed\": true"), "{text}");
}

#[test]
fn a_zero_window_reader_loses_its_stream_then_its_connection() {
    let (_origin, sepia) = h2c_proxy("");
    let mut attacker = attack(&sepia, "slow-reader", "/bytes/8000000");
    bystander_is_served(&sepia, &mut attacker);
    let text = report(attacker);
    assert_eq!(field(&text, "data"), 0, "DATA beyond a zero window: {text}");
    assert!(text.contains("\"outcome\": \"rst:2\""), "{text}");
    assert!(text.contains("\"closed\": true"), "{text}");
}

#[test]
fn connect_over_h2_tunnels_and_forward_requests_are_proxied() {
    let echo = sepia_e2e::EchoServer::start();
    let origin = Origin::start();
    let config = sepia_e2e::forward_config(&free_addr(), &["127.0.0.0/8"], &[echo.addr().port()])
        .replace("mode = \"forward\"\n", "mode = \"forward\"\nh2c = true\n");
    let sepia = Sepia::start(&config);
    let targets = format!("{},{}", echo.addr(), origin.addr());
    let text = report(attack(&sepia, "connect", &targets));
    assert!(text.contains("\"status\": \"200\""), "{text}");
    assert!(text.contains("\"echoed\": \"ping over h2\""), "{text}");
    // A forward request over h2: :scheme, :authority and :path make the absolute URL.
    assert!(text.contains("\"get\": \"200\""), "{text}");
    let seen = origin.single_request();
    assert_eq!(seen.target, "/bytes/300");
    assert_eq!(
        seen.header("host"),
        Some(origin.addr().to_string().as_str())
    );
    let lines = sepia.wait_for_log_lines(2, Duration::from_secs(10));
    assert!(
        lines
            .iter()
            .any(|l| l.contains("TCP_TUNNEL") && l.contains("CONNECT")),
        "{lines:?}"
    );
}

#[test]
fn shutdown_sends_goaway_and_lets_open_streams_finish() {
    let (origin, mut sepia) = h2c_proxy("");
    let url = format!("{}/delay/700", sepia.url());
    let slow = std::thread::spawn(move || h2(&url, &["-v"]));
    assert!(sepia_e2e::wait_until(Duration::from_secs(5), || origin
        .heads_seen()
        == 1));
    let started = Instant::now();
    let status = sepia.terminate(Duration::from_secs(10));
    assert!(status.is_some(), "sepia did not exit");
    let out = slow.join().unwrap();
    out.assert_status(200);
    assert_eq!(out.text(), "delayed");
    // curl -v reports the GOAWAY it read before the connection closed.
    assert!(
        out.stderr.to_ascii_lowercase().contains("goaway"),
        "{}",
        out.stderr
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn large_bodies_flow_and_a_body_cut_short_is_reset_not_ended() {
    let (_origin, sepia) = h2c_proxy("");
    let big = h2(&format!("{}/bytes/8000000", sepia.url()), &[]);
    big.assert_status(200);
    assert_eq!(big.body.len(), 8_000_000);
    assert_eq!(sha256_hex(&big.body), sha256_hex(&pattern(8_000_000)));
    // The origin announces 100000 bytes and closes after 1000: the client must see the
    // stream fail (RST_STREAM), never a clean end of a short body.
    let cut = h2(&format!("{}/die-mid-body", sepia.url()), &[]);
    assert_ne!(cut.exit_code, 0, "a cut body ended cleanly: {}", cut.stderr);
    assert!(cut.body.len() < 100_000);
    // The connection's other streams are unaffected: a new request still works.
    h2(&format!("{}/bytes/10", sepia.url()), &[]).assert_status(200);
}

#[test]
fn trailer_fields_cross_in_both_directions_without_forbidden_ones() {
    // An origin that reads one chunked request whole, then answers with trailers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("\r\n0\r\n") || !seen.ends_with(b"\r\n\r\n")
        {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
        let response: &[u8] =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nCache-Control: no-store\r\n\r\n\
            5\r\nworld\r\n0\r\nX-Resp-Sum: 2\r\nContent-Length: 99\r\n\r\n";
        conn.write_all(response).unwrap();
        tx.send(seen).unwrap();
        let _ = conn.read(&mut buf);
    });
    let config = reverse_config(&free_addr(), &[&origin])
        .replace("mode = \"reverse\"\n", "mode = \"reverse\"\nh2c = true\n");
    let sepia = Sepia::start(&config);
    let text = report(attack(&sepia, "trailers", ""));
    let seen = String::from_utf8_lossy(&rx.recv_timeout(Duration::from_secs(10)).unwrap())
        .to_ascii_lowercase();
    // Toward the origin: chunked content, the trailer kept, the forbidden one dropped.
    assert!(seen.contains("transfer-encoding: chunked"), "{seen}");
    assert!(
        seen.contains("5\r\nhello\r\n0\r\nx-req-sum: 1\r\n\r\n"),
        "{seen}"
    );
    assert!(!seen.contains("99"), "{seen}");
    // Toward the client: the content, then the trailer fields but Content-Length.
    assert!(text.contains("\"status\": \"200\""), "{text}");
    assert!(text.contains("\"body\": \"world\""), "{text}");
    assert!(
        text.contains("\"trailers\": {\"x-resp-sum\": \"2\"}"),
        "{text}"
    );
}

#[test]
fn a_header_list_over_max_request_head_is_431_and_the_connection_goes_on() {
    let (origin, sepia) = h2c_proxy("[limits]\nmax_request_head = 8192\n");
    let text = report(attack(&sepia, "big-head", "20000"));
    assert!(text.contains("\"big\": \"431\""), "{text}");
    assert!(text.contains("\"small\": \"200\""), "{text}");
    let seen: Vec<String> = origin.requests().iter().map(|r| r.target.clone()).collect();
    assert_eq!(seen, ["/small"]);
    // Within the limit, a large field goes through.
    let text = report(attack(&sepia, "big-head", "6000"));
    assert!(text.contains("\"big\": \"200\""), "{text}");
}

#[test]
fn an_idle_connection_gets_goaway_after_client_idle() {
    let (_origin, sepia) = h2c_proxy("");
    let text = report(attack(&sepia, "idle", ""));
    assert!(text.contains("\"status\": \"200\""), "{text}");
    // GOAWAY with NO_ERROR (RFC 9113 §6.8), then the connection closes.
    assert!(text.contains("\"goaway\": 0"), "{text}");
    assert!(text.contains("\"closed\": true"), "{text}");
    let seconds: f64 = text
        .split("\"seconds\": ")
        .nth(1)
        .unwrap()
        .trim_end_matches(['}', '\n'])
        .parse()
        .unwrap();
    assert!(seconds >= (CLIENT_IDLE as f64) - 0.5, "{text}");
    // A client that acknowledges the GOAWAY's PING sees the close at once, not after the
    // grace a client that never reads gets.
    assert!(seconds < (CLIENT_IDLE + 2) as f64, "{text}");
}

#[test]
fn a_stream_reset_by_the_client_stops_its_origin_wait() {
    // The origin never answers and Sepia would wait 30 s for it: only the client's
    // RST_STREAM ends the request early (Downstream::gone over h2).
    let (origin, sepia) = h2c_proxy_waiting(30, "");
    let attacker = attack(&sepia, "reset-after", "/hang");
    assert!(sepia_e2e::wait_until(Duration::from_secs(5), || origin
        .heads_seen()
        == 1));
    let started = Instant::now();
    // Logged long before the client's connection closes (6 s after the reset).
    let lines = sepia.wait_for_log_lines(1, Duration::from_secs(4));
    assert!(started.elapsed() < Duration::from_secs(4));
    assert!(
        lines[0].contains("\"GET http://app/hang HTTP/2.0\""),
        "{lines:?}"
    );
    report(attacker);
}

#[test]
fn a_client_waiting_for_100_continue_gets_it_then_sends_its_content() {
    let (origin, sepia) = h2c_proxy("");
    let text = report(attack(&sepia, "expect-continue", ""));
    assert!(text.contains("\"statuses\": [\"100\", \"200\"]"), "{text}");
    assert!(text.contains("\"body\": \"hello\""), "{text}");
    let seen = origin.single_request();
    assert_eq!(&seen.body[..], b"hello");
    assert_eq!(
        seen.header("expect"),
        None,
        "Expect is answered by Sepia, not forwarded"
    );
}

#[test]
fn a_large_hit_kept_in_a_body_file_is_read_back_for_h2() {
    // HTTP/2 frames its content, so a body file cannot go out with sendfile: it is read back.
    let (origin, sepia) = h2c_proxy("[cache]\nsendfile_min = \"64KiB\"\n");
    let len = 1_000_003;
    let url = format!("{}/slow-cacheable/{len}/0", sepia.url());
    let want = sha256_hex(&pattern(len));
    let miss = h2(&url, &[]);
    miss.assert_status(200);
    assert_eq!(sha256_hex(&miss.body), want);
    // The fill is committed just after its last byte was relayed.
    assert!(sepia_e2e::wait_until(Duration::from_secs(5), || {
        let hit = h2(&url, &[]);
        hit.header("cache-status")
            .unwrap_or_default()
            .contains("hit")
            && sha256_hex(&hit.body) == want
    }));
    let part = h2(&url, &["-r", "999990-"]);
    part.assert_status(206);
    assert!(part.body == pattern(len)[999_990..]);
    assert_eq!(origin.request_count(), 1);
    // The body is in a file: an unnamed one among the proxy's descriptors.
    let unnamed = std::fs::read_dir(format!("/proc/{}/fd", sepia.pid()))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|t| t.to_string_lossy().ends_with(" (deleted)"))
        .count();
    assert_eq!(unnamed, 1, "the stored body is not in a file");
}
