//! Reloading the configuration of a running Sepia (SIGHUP, `sepia reload`) and `sepia check`'s
//! report of what a reload would change: the real binary, real origins, real clients.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use sepia_e2e::{
    curl, forward_config, free_addr, reverse_config, sepia_bin, wait_until, Origin, RawClient,
    Sepia,
};

/// Generous for a loaded two-core machine; polls return as soon as the condition holds.
const WAIT: Duration = Duration::from_secs(15);

/// The port of the origin that answered a GET of `path` through `proxy`.
fn answered_by(proxy: &str, path: &str) -> Option<u16> {
    let out = curl(&[&format!("http://{proxy}{path}")]);
    (out.status == 200)
        .then(|| out.header("X-Origin-Port")?.parse().ok())
        .flatten()
}

fn rewrite(sepia: &Sepia, toml: &str) {
    std::fs::write(sepia.dir().join("sepia.toml"), toml).expect("rewrite the configuration");
}

fn keep_alive_get(client: &mut RawClient, path: &str) -> sepia_e2e::Response {
    client.send(format!("GET {path} HTTP/1.1\r\nHost: site.test\r\n\r\n").as_bytes());
    client.read_response()
}

#[test]
fn a_valid_reload_routes_new_requests_to_the_new_origin_and_keeps_connections() {
    let (a, b) = (Origin::start(), Origin::start());
    let mut sepia = Sepia::start(&reverse_config(&free_addr(), &[&a.url()]));
    let proxy = sepia.addr().to_string();
    let mut client = RawClient::connect(sepia.addr());
    let before = keep_alive_get(&mut client, "/x");
    assert_eq!(
        before.header("X-Origin-Port"),
        Some(a.port().to_string().as_str())
    );

    rewrite(&sepia, &reverse_config(&proxy, &[&b.url()]));
    sepia.send_signal("HUP");
    assert!(
        wait_until(WAIT, || answered_by(&proxy, "/y") == Some(b.port())),
        "new requests never reached the new origin\nstderr:\n{}",
        sepia.stderr()
    );
    // The connection opened before the reload is still served, by the new configuration.
    let after = keep_alive_get(&mut client, "/z");
    assert_eq!(after.status, 200);
    assert_eq!(
        after.header("X-Origin-Port"),
        Some(b.port().to_string().as_str())
    );
    assert!(sepia.stderr().contains("reload done"), "{}", sepia.stderr());
    assert!(sepia.is_running());
}

#[test]
fn an_invalid_reload_is_reported_with_file_line_and_key_and_the_old_configuration_serves() {
    let a = Origin::start();
    let mut sepia = Sepia::start(&reverse_config(&free_addr(), &[&a.url()]));
    let proxy = sepia.addr().to_string();
    let good = reverse_config(&proxy, &[&a.url()]);
    rewrite(&sepia, &format!("{good}[timeouts]\nconect = \"5s\"\n"));
    sepia.send_signal("HUP");
    assert!(
        wait_until(WAIT, || sepia.stderr().contains("reload failed")),
        "no reload error logged\nstderr:\n{}",
        sepia.stderr()
    );
    let stderr = sepia.stderr();
    let line = stderr
        .lines()
        .find(|l| l.contains("reload failed"))
        .unwrap();
    assert!(
        line.contains("sepia.toml:") && line.contains("timeouts.conect"),
        "the error names file:line:key: {line}"
    );
    assert_eq!(answered_by(&proxy, "/still"), Some(a.port()));
    assert!(sepia.is_running());
}

/// A configuration with one reverse listener per address, all routed to `origin`.
fn listeners_config(addrs: &[&str], origin: &str) -> String {
    let first = reverse_config(addrs[0], &[origin]);
    let more: String = addrs[1..]
        .iter()
        .map(|a| format!("[[listen]]\naddress = \"{a}\"\nmode = \"reverse\"\n\n"))
        .collect();
    format!("{first}{more}")
}

#[test]
fn listeners_are_added_and_removed_without_touching_the_others() {
    let a = Origin::start();
    let (kept, removed, added) = (free_addr(), free_addr(), free_addr());
    // `Sepia::start` waits for the first `address =` line: the kept listener.
    let mut sepia = Sepia::start(&listeners_config(&[&kept, &removed], &a.url()));
    let kept = sepia.addr().to_string();
    assert!(wait_until(WAIT, || answered_by(&removed, "/r").is_some()));
    let mut client = RawClient::connect(sepia.addr());
    assert_eq!(keep_alive_get(&mut client, "/1").status, 200);

    rewrite(&sepia, &listeners_config(&[&kept, &added], &a.url()));
    sepia.send_signal("HUP");
    assert!(
        wait_until(WAIT, || answered_by(&added, "/new").is_some()),
        "the added listener never served\nstderr:\n{}",
        sepia.stderr()
    );
    assert!(
        wait_until(WAIT, || std::net::TcpStream::connect(&removed).is_err()),
        "the removed listener still accepts"
    );
    // The untouched listener's connection survived and is served.
    assert_eq!(keep_alive_get(&mut client, "/2").status, 200);
    assert_eq!(answered_by(&kept, "/3"), Some(a.port()));
    assert!(sepia.is_running());
}

#[test]
fn an_in_flight_request_survives_a_reload_and_completes() {
    let (a, b) = (Origin::start(), Origin::start());
    let sepia = Sepia::start(&reverse_config(&free_addr(), &[&a.url()]));
    let proxy = sepia.addr().to_string();
    let url = format!("http://{proxy}/delay/3000");
    let slow = std::thread::spawn(move || curl(&[&url]));
    assert!(
        wait_until(WAIT, || a.request_count() >= 1),
        "the slow request reached the origin"
    );
    rewrite(&sepia, &reverse_config(&proxy, &[&b.url()]));
    sepia.send_signal("HUP");
    assert!(wait_until(WAIT, || answered_by(&proxy, "/after") == Some(b.port())));
    let out = slow.join().unwrap();
    out.assert_status(200);
    assert_eq!(out.text(), "delayed");
    assert_eq!(out.header("X-Origin-Port"), Some(a.port().to_string()));
}

fn sepia_cmd(args: &[&str], config: &Path) -> (i32, String) {
    let out = Command::new(sepia_bin())
        .args(args)
        .arg("-c")
        .arg(config)
        .output()
        .expect("run sepia");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn check_lists_what_a_reload_would_change_and_reload_validates_before_signalling() {
    let (a, b) = (Origin::start(), Origin::start());
    let dir = tempfile::TempDir::new().unwrap();
    let pid_file = dir.path().join("sepia.pid");
    let with_pid = |toml: String, workers: u32| {
        let toml = toml.replace("workers = 1", &format!("workers = {workers}"));
        toml.replacen(
            "[server]\n",
            &format!("[server]\npid_file = \"{}\"\n", pid_file.display()),
            1,
        )
    };
    let sepia = Sepia::start(&with_pid(reverse_config(&free_addr(), &[&a.url()]), 1));
    let proxy = sepia.addr().to_string();
    assert!(wait_until(WAIT, || pid_file.exists()), "no pid file");
    // Edit the running file, check it, reload it: as with nginx, the process re-reads the
    // file it was started with.
    let next = sepia.dir().join("sepia.toml");
    std::fs::write(&next, with_pid(reverse_config(&proxy, &[&b.url()]), 2)).unwrap();

    let (code, out) = sepia_cmd(&["check"], &next);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("would change"), "{out}");
    assert!(
        out.contains(&format!(
            "origins: 127.0.0.1:{} -> 127.0.0.1:{}",
            a.port(),
            b.port()
        )),
        "{out}"
    );
    assert!(
        out.contains("server.workers: 1 -> 2 (needs a restart"),
        "{out}"
    );

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, with_pid(reverse_config(&proxy, &["nonsense"]), 1)).unwrap();
    let (code, out) = sepia_cmd(&["reload"], &bad);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("bad.toml:"), "{out}");
    assert_eq!(answered_by(&proxy, "/same"), Some(a.port()));

    let (code, out) = sepia_cmd(&["reload"], &next);
    assert_eq!(code, 0, "{out}");
    assert!(wait_until(WAIT, || answered_by(&proxy, "/moved") == Some(b.port())));
    // The running process logged what needs a restart; `check` now compares with the file
    // it reloaded.
    assert!(
        sepia.stderr().contains("needs a restart"),
        "{}",
        sepia.stderr()
    );
    let (_, out) = sepia_cmd(&["check"], &next);
    assert!(!out.contains("origins:"), "{out}");
}

#[test]
fn a_narrower_forward_allow_applies_to_the_next_request_of_an_open_connection() {
    let a = Origin::start();
    let mut sepia = Sepia::start(&forward_config(&free_addr(), &["127.0.0.0/8"], &[]));
    let proxy = sepia.addr().to_string();
    let target = format!("{}/acl", a.url());
    let get = |client: &mut RawClient| {
        client.send(format!("GET {target} HTTP/1.1\r\nHost: {}\r\n\r\n", a.addr()).as_bytes());
        client.read_response().status
    };
    let mut client = RawClient::connect(sepia.addr());
    assert_eq!(get(&mut client), 200);
    rewrite(&sepia, &forward_config(&proxy, &["10.0.0.0/8"], &[]));
    sepia.send_signal("HUP");
    assert!(
        wait_until(WAIT, || sepia.stderr().contains("reload done")),
        "{}",
        sepia.stderr()
    );
    assert_eq!(
        get(&mut client),
        403,
        "the open connection is judged by the new [forward] allow"
    );
    assert!(sepia.is_running());
}
