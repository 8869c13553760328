//! The command line: `sepia check`, the quick-start subcommands, the built-in default, and
//! stopping on SIGTERM.

use std::process::Command;
use std::time::Duration;

use sepia_e2e::{curl, free_addr, reverse_config, sepia_bin, Origin, Sepia};

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Run {
    let out = Command::new(sepia_bin())
        .args(args)
        .output()
        .expect("run sepia");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn check(config: &str) -> (Run, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sepia.toml");
    std::fs::write(&path, config).unwrap();
    let path = path.display().to_string();
    (run(&["check", "--config", &path]), path)
}

#[test]
fn check_accepts_a_valid_file() {
    let config = reverse_config("127.0.0.1:8080", &["http://127.0.0.1:9"])
        + "[timeouts]\nconnect = \"5s\"\norigin_first_byte = \"60s\"\n\n\
           [limits]\nmax_request_head = 65536\nmax_headers = 100\n\n\
           [headers]\nvia = true\nx_forwarded_for = \"append\"\n";
    let (out, _) = check(&config);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let said = format!("{}{}", out.stdout, out.stderr).to_lowercase();
    assert!(
        said.contains("ok") || said.contains("valid"),
        "nothing said: {said:?}"
    );
}

#[test]
fn check_names_file_line_and_key_of_an_error() {
    let cases = [
        // (config, line of the error, text the message must contain)
        (
            "[server]\nworkers = 1\n\n[timeouts]\nconect = \"5s\"\n",
            5,
            "conect",
        ),
        ("[server]\nworkers = \"many\"\n", 2, "workers"),
        (
            "[server]\nworkers = 1\n[timeouts]\nconnect = \"soon\"\n",
            4,
            "connect",
        ),
        (
            "[[listen]]\naddress = \"127.0.0.1:1\"\nmode = \"sideways\"\n",
            3,
            "mode",
        ),
    ];
    for (config, line, key) in cases {
        let (out, path) = check(config);
        assert!(
            matches!(out.code, Some(c) if c != 0),
            "{config:?} accepted: {}",
            out.stdout
        );
        assert!(
            out.stderr.contains(&format!("{path}:{line}")),
            "{config:?}: wanted {path}:{line} in {:?}",
            out.stderr
        );
        assert!(
            out.stderr.contains(key),
            "{config:?}: wanted {key} in {:?}",
            out.stderr
        );
    }
}

#[test]
fn check_without_a_config_is_an_error() {
    let out = run(&["check"]);
    assert!(matches!(out.code, Some(c) if c != 0));
    assert!(!out.stderr.is_empty());
}

#[test]
fn starting_with_an_invalid_config_fails_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[server]\nwrokers = 2\n").unwrap();
    let out = run(&["--config", &path.display().to_string()]);
    assert!(matches!(out.code, Some(c) if c != 0));
    assert!(out.stderr.contains("wrokers"), "{:?}", out.stderr);
}

#[test]
fn quick_start_reverse() {
    let origin = Origin::start();
    let listen = free_addr();
    let url = origin.url();
    let sepia = Sepia::start_args(&[
        "reverse",
        "--listen",
        &listen,
        "--origin",
        &url,
        "--workers",
        "1",
    ]);
    let out = curl(&[&format!("{}/quick", sepia.url())]);
    out.assert_status(200);
    assert_eq!(out.text(), "GET /quick");
    assert_eq!(origin.request_count(), 1);
}

#[test]
fn quick_start_reverse_with_two_origins() {
    let (a, b) = (Origin::start(), Origin::start());
    let (ua, ub) = (a.url(), b.url());
    let listen = free_addr();
    let sepia = Sepia::start_args(&[
        "reverse",
        "--listen",
        &listen,
        "--origin",
        &ua,
        "--origin",
        &ub,
        "--workers",
        "1",
    ]);
    for i in 0..4 {
        curl(&[&format!("{}/q{i}", sepia.url())]).assert_status(200);
    }
    assert!(
        a.request_count() > 0 && b.request_count() > 0,
        "{} / {}",
        a.request_count(),
        b.request_count()
    );
}

#[test]
fn quick_start_forward() {
    let origin = Origin::start();
    let listen = free_addr();
    let sepia = Sepia::start_args(&["forward", "--listen", &listen, "--workers", "1"]);
    let out = curl(&["-x", &sepia.url(), &format!("{}/fwd", origin.url())]);
    out.assert_status(200);
    assert_eq!(out.text(), "GET /fwd");
}

#[test]
fn sigterm_stops_the_process_cleanly() {
    let origin = Origin::start();
    let url = origin.url();
    let mut sepia = Sepia::start(&reverse_config(&free_addr(), &[&url]));
    curl(&[&format!("{}/before", sepia.url())]).assert_status(200);
    let status = sepia
        .terminate(Duration::from_secs(5))
        .expect("still running 5s after SIGTERM");
    assert!(status.success(), "exit status {status}");
}

#[test]
fn no_arguments_runs_the_default_forward_proxy_on_3128() {
    if std::net::TcpListener::bind("127.0.0.1:3128").is_err() {
        eprintln!("port 3128 is in use here; skipping the built-in default check");
        return;
    }
    let origin = Origin::start();
    let sepia = Sepia::start_default("127.0.0.1:3128".parse().unwrap());
    let out = curl(&["-x", &sepia.url(), &format!("{}/default", origin.url())]);
    out.assert_status(200);
    assert_eq!(out.text(), "GET /default");
}

#[test]
fn sigterm_lets_an_in_flight_request_finish() {
    let origin = Origin::start();
    let url = origin.url();
    let mut sepia = Sepia::start(
        &(reverse_config(&free_addr(), &[&url])
            .replace("shutdown_grace = \"1s\"", "shutdown_grace = \"5s\"")),
    );
    let mut client = sepia_e2e::RawClient::connect(sepia.addr());
    client.send(b"GET /delay/700 HTTP/1.1\r\nHost: app\r\n\r\n");
    assert!(sepia_e2e::wait_until(Duration::from_secs(5), || origin
        .request_count()
        == 1));
    let pid = sepia.pid().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let r = client.read_response();
    assert_eq!((r.status, r.text().as_str()), (200, "delayed"));
    let status = sepia
        .terminate(Duration::from_secs(8))
        .expect("still running after the drain");
    assert!(status.success(), "exit status {status}");
    // Once stopped it no longer listens.
    assert!(std::net::TcpStream::connect(sepia.addr()).is_err());
}

#[test]
fn a_listen_port_in_use_is_reported() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = run(&[
        "reverse",
        "--listen",
        &addr,
        "--origin",
        "http://127.0.0.1:9",
    ]);
    assert!(
        matches!(out.code, Some(c) if c != 0),
        "started on a taken port"
    );
    let stderr = out.stderr.to_ascii_lowercase();
    assert!(stderr.contains("in use"), "{:?}", out.stderr);
    // The harness relies on this message to retry on a fresh port.
    let sepia = Sepia::start(&reverse_config(&addr, &["http://127.0.0.1:9"]));
    assert_ne!(sepia.addr().to_string(), addr);
}
