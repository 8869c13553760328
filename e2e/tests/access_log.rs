//! The access log: one line per request, Squid native format by default
//! (`%ts.%03tu %6tr %>a %Ss/%03>Hs %<st %rm %ru %[un %Sh/%<a %mt`), or combined.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sepia_e2e::fixtures::reverse;
use sepia_e2e::{curl, free_addr, reverse_config, Origin, Sepia};

const LOG_WAIT: Duration = Duration::from_secs(10);

/// One Squid native line, split into its ten fields.
struct SquidLine<'a> {
    fields: Vec<&'a str>,
    line: &'a str,
}

impl<'a> SquidLine<'a> {
    fn parse(line: &'a str) -> SquidLine<'a> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields.len(), 10, "not a Squid native line: {line:?}");
        SquidLine { fields, line }
    }

    fn assert_request(&self, method: &str, path: &str, status: u16, min_bytes: usize) {
        let f = &self.fields;
        let line = self.line;
        let (secs, millis) = f[0]
            .split_once('.')
            .unwrap_or_else(|| panic!("timestamp in {line:?}"));
        assert_eq!(millis.len(), 3, "{line:?}");
        assert!(millis.bytes().all(|b| b.is_ascii_digit()), "{line:?}");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let ts: u64 = secs
            .parse()
            .unwrap_or_else(|_| panic!("timestamp in {line:?}"));
        assert!(
            ts.abs_diff(now) < 120,
            "timestamp {ts} vs now {now}: {line:?}"
        );
        let elapsed_ms: u64 = f[1]
            .parse()
            .unwrap_or_else(|_| panic!("elapsed in {line:?}"));
        assert!(elapsed_ms < 30_000, "{line:?}");
        assert_eq!(f[2], "127.0.0.1", "client address: {line:?}");
        assert_eq!(f[3], format!("TCP_MISS/{status:03}"), "{line:?}");
        let bytes: usize = f[4].parse().unwrap_or_else(|_| panic!("size in {line:?}"));
        assert!(bytes >= min_bytes, "size {bytes} < {min_bytes}: {line:?}");
        assert_eq!(f[5], method, "{line:?}");
        assert!(
            f[6].ends_with(path),
            "URL {} should end with {path}: {line:?}",
            f[6]
        );
        assert_eq!(f[7], "-", "{line:?}");
        assert!(
            f[8].starts_with("HIER_DIRECT/127.0.0.1"),
            "hierarchy: {line:?}"
        );
    }
}

#[test]
fn squid_line_per_request_on_stdout() {
    let (origin, sepia) = reverse();
    curl(&[&format!("{}/bytes/1234", sepia.url())]).assert_status(200);
    curl(&["--data-binary", "abc", &format!("{}/echo", sepia.url())]).assert_status(200);
    curl(&[&format!("{}/status/404", sepia.url())]).assert_status(404);
    let lines = sepia.wait_for_log_lines(3, LOG_WAIT);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    SquidLine::parse(&lines[0]).assert_request("GET", "/bytes/1234", 200, 1234);
    SquidLine::parse(&lines[1]).assert_request("POST", "/echo", 200, 3);
    SquidLine::parse(&lines[2]).assert_request("GET", "/status/404", 404, 10);
    assert_eq!(
        SquidLine::parse(&lines[0]).fields[9],
        "application/octet-stream"
    );
    assert_eq!(SquidLine::parse(&lines[2]).fields[9], "text/plain");
    assert_eq!(origin.request_count(), 3);
}

#[test]
fn keep_alive_requests_each_get_a_line() {
    let (_origin, sepia) = reverse();
    let mut client = sepia_e2e::RawClient::connect(sepia.addr());
    for i in 0..5 {
        client.send(format!("GET /k{i} HTTP/1.1\r\nHost: app\r\n\r\n").as_bytes());
        assert_eq!(client.read_response().status, 200);
    }
    let lines = sepia.wait_for_log_lines(5, LOG_WAIT);
    assert_eq!(lines.len(), 5, "{lines:#?}");
    for (i, line) in lines.iter().enumerate() {
        SquidLine::parse(line).assert_request("GET", &format!("/k{i}"), 200, 1);
    }
}

#[test]
fn access_log_to_a_file() {
    let origin = Origin::start();
    let url = origin.url();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let config = reverse_config(&free_addr(), &[&url]).replace(
        "path = \"stdout\"",
        &format!("path = \"{}\"", log.display()),
    );
    let sepia = Sepia::start(&config);
    curl(&[&format!("{}/to-file", sepia.url())]).assert_status(200);
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        sepia_e2e::wait_until(LOG_WAIT, || read().lines().count() >= 1),
        "nothing in {}; stdout: {}",
        log.display(),
        sepia.stdout()
    );
    let text = read();
    SquidLine::parse(text.lines().next().unwrap()).assert_request("GET", "/to-file", 200, 1);
    assert!(
        sepia.log_lines().is_empty(),
        "log also went to stdout: {:?}",
        sepia.stdout()
    );
}

#[test]
fn combined_format() {
    let origin = Origin::start();
    let url = origin.url();
    let config = reverse_config(&free_addr(), &[&url])
        .replace("format = \"squid\"", "format = \"combined\"");
    let sepia = Sepia::start(&config);
    curl(&["-A", "e2e-agent/1", &format!("{}/bytes/77", sepia.url())]).assert_status(200);
    let lines = sepia.wait_for_log_lines(1, LOG_WAIT);
    let line = &lines[0];
    assert!(line.starts_with("127.0.0.1 "), "{line:?}");
    // `%r`: the request line; a proxy may log the target as the absolute URI it resolved.
    let (before, after) = line
        .split_once("/bytes/77 HTTP/1.1\" ")
        .expect("request line");
    let target_ok = before.ends_with("\"GET ") || before.contains("\"GET http://");
    assert!(target_ok, "{line:?}");
    assert!(after.starts_with("200 "), "{line:?}");
    assert!(line.contains("\"e2e-agent/1\""), "{line:?}");
}
