//! Heap allocations per request through the real proxy, in process: a counting global
//! allocator (stats_alloc, a safe wrapper around the system allocator) measures a
//! steady-state keep-alive cache hit and a miss to a unique URL.
//!
//! The origin and the client run on plain threads with fixed buffers and allocate nothing per
//! request, so every allocation counted is the proxy's (and the runtime's).
//!
//! `cargo run --release -p sepia-proxy --example alloc_per_request [requests] [--log] [--admin]`
//! (`--log` writes the Squid-format access log to /dev/null through the real batched writer;
//! `--admin` configures the admin listener, so every request is counted and timed for its
//! metrics, and scrapes `/metrics` and `/stats` once before measuring)

use std::alloc::System;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use sepia_config::{Config, LogTarget};
use sepia_observe::{AccessLog, AccessLogWriter, LogFormat, LogSink};
use sepia_proxy::Server;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

mod support;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let with_log = std::env::args().any(|a| a == "--log");
    let with_admin = std::env::args().any(|a| a == "--admin");
    let (listen, admin) = start_sepia(support::start_origin(), with_log, with_admin);

    let mut client = Client::connect(listen);
    // Warm up: fill the cache, grow every reused buffer, let the runtime settle.
    for _ in 0..2_000 {
        client.get(b"/hit");
    }
    if let Some(admin) = admin {
        for path in ["/metrics", "/stats"] {
            let answer = scrape(admin, path);
            assert!(answer.starts_with("HTTP/1.1 200"), "{path}: {answer}");
        }
    }
    let region = Region::new(GLOBAL);
    for _ in 0..n {
        client.get(b"/hit");
    }
    let hit = region.change();

    let mut path = [0u8; 32];
    path[..3].copy_from_slice(b"/u/");
    let mut miss_client = Client::connect(listen);
    for i in 0..2_000usize {
        miss_client.get(unique(&mut path, i));
    }
    let region = Region::new(GLOBAL);
    for i in 2_000..2_000 + n {
        miss_client.get(unique(&mut path, i));
    }
    let miss = region.change();

    println!(
        "requests per case: {n}, access log {}, admin listener {}",
        if with_log {
            "on (squid format, /dev/null)"
        } else {
            "off"
        },
        if with_admin {
            "on (metrics counted)"
        } else {
            "off"
        }
    );
    for (case, s) in [
        ("keep-alive hit, 1 KiB", hit),
        ("miss to a unique URL, 1 KiB", miss),
    ] {
        println!(
            "{case}: {:.3} allocations/request ({} allocations, {} reallocations, {} bytes)",
            (s.allocations + s.reallocations) as f64 / n as f64,
            s.allocations,
            s.reallocations,
            s.bytes_allocated
        );
    }
}

/// One admin request (`Connection: close`); the whole answer.
fn scrape(admin: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(admin).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: admin\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// Starts Sepia as an accelerator of `origin` on a thread of its own; returns where it listens
/// and, with `with_admin`, where its admin listener does.
fn start_sepia(
    origin: SocketAddr,
    with_log: bool,
    with_admin: bool,
) -> (SocketAddr, Option<SocketAddr>) {
    let listen = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut config = Config::quick_reverse(
        &listen.to_string(),
        &[format!("http://{origin}")],
        Some(1),
        None,
    )
    .unwrap();
    config.access_log.target = LogTarget::Off;
    if with_admin {
        config = config.with_quick_admin(Some("127.0.0.1:0")).unwrap();
    }
    // One worker, as the binary runs it (a current-thread runtime), on a thread of its own:
    // this thread is the client.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .on_thread_park(sepia_proxy::worker_parks)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(async {
        let log = if with_log {
            let (log, writer) =
                AccessLogWriter::spawn(LogSink::File("/dev/null".into()), LogFormat::Squid)
                    .unwrap();
            std::mem::forget(writer); // runs until the process exits
            log
        } else {
            AccessLog::disabled()
        };
        Server::bind(Arc::new(config), log).unwrap()
    });
    let admin = server.admin_addr();
    std::thread::spawn(move || runtime.block_on(server.run(std::future::pending())));
    std::thread::sleep(Duration::from_millis(100));
    (listen, admin)
}

fn unique(path: &mut [u8; 32], i: usize) -> &[u8] {
    let mut digits = itoa::Buffer::new();
    let d = digits.format(i).as_bytes();
    path[3..3 + d.len()].copy_from_slice(d);
    &path[..3 + d.len()]
}

struct Client {
    stream: TcpStream,
    buf: Box<[u8; 65536]>,
}

impl Client {
    fn connect(addr: std::net::SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buf: Box::new([0; 65536]),
        }
    }

    /// Sends one GET and reads the whole response (Content-Length framed).
    fn get(&mut self, path: &[u8]) {
        let mut req = [0u8; 128];
        let parts: [&[u8]; 3] = [b"GET ", path, b" HTTP/1.1\r\nHost: bench\r\n\r\n"];
        let mut len = 0;
        for p in parts {
            req[len..len + p.len()].copy_from_slice(p);
            len += p.len();
        }
        self.stream.write_all(&req[..len]).unwrap();
        let mut have = 0;
        loop {
            let n = self.stream.read(&mut self.buf[have..]).unwrap();
            assert!(n > 0, "proxy closed the connection");
            have += n;
            if let Some(end) = find(&self.buf[..have], b"\r\n\r\n") {
                let head = &self.buf[..end];
                assert!(
                    head.starts_with(b"HTTP/1.1 200"),
                    "{}",
                    String::from_utf8_lossy(head)
                );
                let cl = content_length(head);
                if have >= end + 4 + cl {
                    assert_eq!(have, end + 4 + cl, "one response per request");
                    return;
                }
            }
        }
    }
}

fn content_length(head: &[u8]) -> usize {
    let at = find(head, b"Content-Length: ").expect("Content-Length") + 16;
    head[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0, |n, d| n * 10 + usize::from(d - b'0'))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
