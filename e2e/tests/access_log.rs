//! The access log: one line per request, Squid native format by default
//! (`%ts.%03tu %6tr %>a %Ss/%03>Hs %<st %rm %ru %[un %Sh/%<a %mt`), or combined.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sepia_e2e::fixtures::reverse;
use sepia_e2e::{curl, free_addr, reverse_config, Origin, Sepia, SquidLine};

const LOG_WAIT: Duration = Duration::from_secs(10);

/// Checks a Squid native line for a forward request that went to the origin.
fn assert_miss(line: &str, method: &str, path: &str, status: u16, min_bytes: u64) -> SquidLine {
    let l = SquidLine::parse(line);
    l.assert_layout();
    let secs: u64 = l.fields[0].split_once('.').unwrap().0.parse().unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(
        secs.abs_diff(now) < 120,
        "timestamp {secs} vs now {now}: {line:?}"
    );
    assert!(l.elapsed_ms() < 30_000, "{line:?}");
    assert_eq!(l.fields[2], "127.0.0.1", "client address: {line:?}");
    assert_eq!(l.fields[3], format!("TCP_MISS/{status:03}"), "{line:?}");
    assert!(l.bytes() >= min_bytes, "size < {min_bytes}: {line:?}");
    assert_eq!(l.method(), method, "{line:?}");
    assert!(
        l.url().ends_with(path),
        "URL should end with {path}: {line:?}"
    );
    assert_eq!(l.user(), "-", "{line:?}");
    assert_eq!(l.fields[8], "HIER_DIRECT/127.0.0.1", "{line:?}");
    l
}

#[test]
fn squid_line_per_request_on_stdout() {
    let (origin, sepia) = reverse();
    curl(&[&format!("{}/bytes/1234", sepia.url())]).assert_status(200);
    curl(&["--data-binary", "abc", &format!("{}/echo", sepia.url())]).assert_status(200);
    curl(&[&format!("{}/status/404", sepia.url())]).assert_status(404);
    let lines = sepia.wait_for_log_lines(3, LOG_WAIT);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let first = assert_miss(&lines[0], "GET", "/bytes/1234", 200, 1234);
    assert_miss(&lines[1], "POST", "/echo", 200, 3);
    let third = assert_miss(&lines[2], "GET", "/status/404", 404, 10);
    assert_eq!(first.mime_type(), "application/octet-stream");
    assert_eq!(third.mime_type(), "text/plain");
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
        assert_miss(line, "GET", &format!("/k{i}"), 200, 1);
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
    assert_miss(text.lines().next().unwrap(), "GET", "/to-file", 200, 1);
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

#[test]
fn combined_format_escapes_quotes_like_apache() {
    let origin = Origin::start();
    let config = reverse_config(&free_addr(), &[&origin.url()])
        .replace("format = \"squid\"", "format = \"combined\"");
    let sepia = Sepia::start(&config);
    curl(&[
        "-A",
        "say \"hi\" \\o/",
        "-e",
        "http://ref.example/?q=\"x\"",
        &format!("{}/quoted", sepia.url()),
    ])
    .assert_status(200);
    let line = &sepia.wait_for_log_lines(1, LOG_WAIT)[0];
    assert!(
        line.ends_with(" \"http://ref.example/?q=\\\"x\\\"\" \"say \\\"hi\\\" \\\\o/\""),
        "{line:?}"
    );
    // Apache's `%t`: [dd/Mon/yyyy:hh:mm:ss +0000].
    let t = line.split_once(" [").unwrap().1.split_once("] ").unwrap().0;
    assert_eq!(t.len(), 26, "{line:?}");
    assert!(t.ends_with(" +0000"), "{line:?}");
}

/// Parses every line of `text` as one JSON object.
fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect()
}

#[test]
fn json_lines_hold_the_request_values() {
    let origin = Origin::start();
    let config = reverse_config(&free_addr(), &[&origin.url()])
        .replace("format = \"squid\"", "format = \"json\"");
    let sepia = Sepia::start(&config);
    curl(&[
        "-A",
        "agent \"q\"\t\u{e9}",
        "-e",
        "http://ref.example/",
        &format!("{}/bytes/321", sepia.url()),
    ])
    .assert_status(200);
    curl(&[&format!("{}/cacheable/j", sepia.url())]).assert_status(200);
    curl(&[&format!("{}/cacheable/j", sepia.url())]).assert_status(200);
    let mut raw = sepia_e2e::RawClient::connect(sepia.addr());
    raw.send(b"GET /raw HTTP/1.1\r\nHost: app\r\nUser-Agent: a\xffb\r\nConnection: close\r\n\r\n");
    assert_eq!(raw.read_response().status, 200);
    sepia.wait_for_log_lines(4, LOG_WAIT);
    let lines = json_lines(&sepia.stdout());
    assert_eq!(lines.len(), 4, "{}", sepia.stdout());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let first = &lines[0];
    let ts = first["ts"].as_f64().expect("ts is a number");
    assert!((ts - now).abs() < 120.0, "{first}");
    assert!(first["elapsed_ms"].as_u64().is_some(), "{first}");
    assert_eq!(first["client"], "127.0.0.1");
    assert_eq!(first["result"], "TCP_MISS");
    assert_eq!(first["status"], 200);
    assert!(first["bytes"].as_u64().unwrap() > 321, "{first}");
    assert_eq!(first["method"], "GET");
    assert!(
        first["url"].as_str().unwrap().ends_with("/bytes/321"),
        "{first}"
    );
    assert_eq!(first["http_version"], "1.1");
    assert!(first["user"].is_null());
    assert_eq!(first["hierarchy"], "HIER_DIRECT");
    assert_eq!(first["peer"], "127.0.0.1");
    assert_eq!(first["mime_type"], "application/octet-stream");
    assert_eq!(first["referer"], "http://ref.example/");
    assert_eq!(first["user_agent"], "agent \"q\"\t\u{e9}");
    assert_eq!(lines[1]["result"], "TCP_MISS");
    assert_eq!(lines[2]["result"], "TCP_MEM_HIT");
    assert_eq!(lines[2]["hierarchy"], "HIER_NONE");
    assert!(lines[2]["peer"].is_null(), "{}", lines[2]);
    // A byte that is not UTF-8 (obs-text, RFC 9110 §5.5): still valid JSON, with U+FFFD.
    assert_eq!(lines[3]["user_agent"], "a\u{fffd}b", "{}", lines[3]);
}

#[test]
fn sigusr1_reopens_the_log_file_after_a_rename() {
    let origin = Origin::start();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let rotated = dir.path().join("access.log.1");
    let config = reverse_config(&free_addr(), &[&origin.url()]).replace(
        "path = \"stdout\"",
        &format!("path = \"{}\"", log.display()),
    );
    let sepia = Sepia::start(&config);
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    for i in 0..3 {
        curl(&[&format!("{}/before/{i}", sepia.url())]).assert_status(200);
    }
    assert!(
        sepia_e2e::wait_until(LOG_WAIT, || read(&log).lines().count() >= 3),
        "{}",
        read(&log)
    );
    // logrotate's default: rename, then signal. Requests between the two still go to the
    // renamed file through the open descriptor.
    std::fs::rename(&log, &rotated).unwrap();
    curl(&[&format!("{}/between", sepia.url())]).assert_status(200);
    assert!(sepia_e2e::wait_until(LOG_WAIT, || read(&rotated)
        .lines()
        .count()
        >= 4));
    sepia.send_signal("USR1");
    assert!(
        sepia_e2e::wait_until(LOG_WAIT, || log.exists()),
        "SIGUSR1 did not recreate {}; stderr: {}",
        log.display(),
        sepia.stderr()
    );
    for i in 0..2 {
        curl(&[&format!("{}/after/{i}", sepia.url())]).assert_status(200);
    }
    assert!(sepia_e2e::wait_until(LOG_WAIT, || read(&log)
        .lines()
        .count()
        >= 2));
    // A second rotation works the same way.
    std::fs::rename(&log, dir.path().join("access.log.0")).unwrap();
    sepia.send_signal("USR1");
    assert!(sepia_e2e::wait_until(LOG_WAIT, || log.exists()));
    curl(&[&format!("{}/third", sepia.url())]).assert_status(200);
    assert!(sepia_e2e::wait_until(LOG_WAIT, || read(&log)
        .lines()
        .count()
        >= 1));

    let paths = |p: &std::path::Path| -> Vec<String> {
        read(p)
            .lines()
            .map(|l| {
                let l = SquidLine::parse(l);
                let url = l.url();
                url[url.find("//").unwrap() + 2..]
                    .split_once('/')
                    .unwrap()
                    .1
                    .to_string()
            })
            .collect()
    };
    assert_eq!(
        paths(&rotated),
        ["before/0", "before/1", "before/2", "between"]
    );
    assert_eq!(
        paths(&dir.path().join("access.log.0")),
        ["after/0", "after/1"]
    );
    assert_eq!(paths(&log), ["third"]);
    assert!(
        sepia.stderr().contains("reopening the access log"),
        "{}",
        sepia.stderr()
    );
}

#[test]
fn sigusr1_with_stdout_log_is_harmless() {
    let (_origin, mut sepia) = reverse();
    curl(&[&format!("{}/one", sepia.url())]).assert_status(200);
    sepia.wait_for_log_lines(1, LOG_WAIT);
    sepia.send_signal("USR1");
    std::thread::sleep(Duration::from_millis(200));
    assert!(sepia.is_running(), "SIGUSR1 must not stop sepia");
    curl(&[&format!("{}/two", sepia.url())]).assert_status(200);
    let lines = sepia.wait_for_log_lines(2, LOG_WAIT);
    assert!(lines[1].contains("/two "), "{lines:?}");
}
