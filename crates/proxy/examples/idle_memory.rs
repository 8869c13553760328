//! Heap bytes an idle client connection holds, through the real proxy in process: a counting
//! global allocator (stats_alloc, a safe wrapper around the system allocator) keeps the live
//! bytes, and
//! `bench/tools/idle_tls_clients.py` (a separate process, so none of its memory is counted)
//! opens N connections, sends one request on each and holds them idle.
//!
//! `cargo run --release -p sepia-proxy --example idle_memory -- KIND [N]`, KIND one of
//! `h1` (plain HTTP/1.1), `h2c` (plain HTTP/2, prior knowledge), `tls` (HTTP/1.1 over TLS),
//! `h2` (HTTP/2 over TLS). Needs `openssl` (a test certificate) and Debian's `python3-h2`.
//!
//! The process RSS per connection (what bench/tls.sh reports) is these bytes plus the
//! allocator's rounding and page-level effects; this is what the proxy itself asked for.

use std::alloc::System;
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sepia_config::{Config, ListenerTls, LogTarget};
use sepia_observe::AccessLog;
use sepia_proxy::Server;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

mod support;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn main() {
    let mut args = std::env::args().skip(1);
    let kind = args.next().unwrap_or_else(|| "h2".into());
    let n: i64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let dir = tempfile::tempdir().unwrap();
    let tls = matches!(kind.as_str(), "tls" | "h2");
    if tls {
        make_certificate(dir.path());
    }
    let origin = support::start_origin();
    let listen = start_sepia(origin, &kind, dir.path());

    let ready = dir.path().join("ready");
    let tool = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../bench/tools/idle_tls_clients.py"
    );
    let mut client = Command::new("/usr/bin/python3");
    client.args([tool, "--port", &listen.port().to_string(), "--path", "/1k"]);
    client
        .args(["--n", &n.to_string(), "--ready-file"])
        .arg(&ready);
    if kind.starts_with('h') && kind != "h1" {
        client.arg("--h2");
    }
    if !tls {
        client.arg("--plain");
    }
    // A first connection fills the cache, so every held connection's request was a hit.
    let mut warm = client_once(&kind, tool, listen, dir.path());
    let _ = warm.wait();
    std::thread::sleep(Duration::from_millis(300));
    let region = Region::new(GLOBAL);
    let mut child = client.stdout(Stdio::null()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(600);
    while !ready.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    let held = region.change();
    let mut report = String::new();
    std::fs::File::open(&ready)
        .unwrap()
        .read_to_string(&mut report)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    println!("{kind}: {}", report.trim());
    // stats_alloc already adds a realloc's growth to bytes_allocated (and its shrinking to
    // bytes_deallocated); bytes_reallocated is the same amount again.
    let live = held.bytes_allocated as f64 - held.bytes_deallocated as f64;
    let blocks = held.allocations as f64 - held.deallocations as f64;
    println!(
        "  heap held per idle connection: {:.0} B in {:.1} allocations",
        live / n as f64,
        blocks / n as f64
    );
}

/// One connection of the same kind, held until the client is killed; returns the process.
fn client_once(kind: &str, tool: &str, listen: SocketAddr, dir: &Path) -> std::process::Child {
    let ready = dir.join("warm");
    let mut c = Command::new("/usr/bin/python3");
    c.args([tool, "--port", &listen.port().to_string(), "--path", "/1k"]);
    c.args(["--n", "1", "--ready-file"]).arg(&ready);
    if kind != "h1" && kind != "tls" {
        c.arg("--h2");
    }
    if kind == "h1" || kind == "h2c" {
        c.arg("--plain");
    }
    let mut child = c.stdout(Stdio::null()).spawn().unwrap();
    while !ready.exists() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    child
}

fn make_certificate(dir: &Path) {
    let status = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args([
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
        ])
        .args(["-addext", "subjectAltName=DNS:localhost", "-keyout"])
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "openssl could not make a certificate");
}

fn start_sepia(origin: SocketAddr, kind: &str, dir: &Path) -> SocketAddr {
    let listen = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let tls = matches!(kind, "tls" | "h2")
        .then(|| ListenerTls::quick(dir.join("cert.pem"), dir.join("key.pem")));
    let mut config = Config::quick_reverse(
        &listen.to_string(),
        &[format!("http://{origin}")],
        Some(1),
        tls,
    )
    .unwrap();
    config.listeners[0].h2c = kind == "h2c";
    config.access_log.target = LogTarget::Off;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .on_thread_park(sepia_proxy::worker_parks)
        .enable_all()
        .build()
        .unwrap();
    let server =
        runtime.block_on(async { Server::bind(Arc::new(config), AccessLog::disabled()).unwrap() });
    std::thread::spawn(move || runtime.block_on(server.run(std::future::pending())));
    std::thread::sleep(Duration::from_millis(100));
    listen
}
