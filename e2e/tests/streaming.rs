//! Bodies are streamed in bounded memory in both directions, and many clients are served at
//! once. Memory is read from /proc (peak RSS of the sepia process) while a reader or writer
//! deliberately lags, which is when a proxy that buffers whole bodies would balloon.

use std::io::Write;
use std::time::Duration;

use sepia_e2e::fixtures::reverse;
use sepia_e2e::{fill_pattern, pattern, RawClient};

/// 64 MiB: much more than any reasonable per-connection buffer.
const HUGE: usize = 64 * 1024 * 1024;
/// What a streaming proxy may add to its peak RSS while moving one huge body.
const ALLOWED_GROWTH_KIB: u64 = 24 * 1024;

#[test]
fn download_to_a_slow_reader_is_streamed_in_bounded_memory() {
    let (_origin, sepia) = reverse();
    let baseline = sepia.peak_rss_kib();
    let mut client = RawClient::connect(sepia.addr());
    client.send(format!("GET /bytes/{HUGE} HTTP/1.1\r\nHost: app\r\n\r\n").as_bytes());
    let (status, head) = client.read_single_head();
    assert_eq!(status, 200, "{head}");
    // Not reading for a while: the origin can send far faster than we take.
    std::thread::sleep(Duration::from_millis(1500));
    let lagging_peak = sepia.peak_rss_kib();
    let body = client.read_exact_bytes(HUGE);
    assert!(body == pattern(HUGE), "downloaded bytes differ");
    let peak = sepia.peak_rss_kib();
    eprintln!("download: peak RSS {baseline} KiB before, {lagging_peak} lagging, {peak} after");
    assert!(
        lagging_peak.max(peak) < baseline + ALLOWED_GROWTH_KIB,
        "peak RSS grew from {baseline} KiB to {lagging_peak} (lagging) / {peak} KiB for one {HUGE}-byte download"
    );
}

#[test]
fn upload_to_a_slow_origin_is_streamed_in_bounded_memory() {
    let (origin, sepia) = reverse();
    let baseline = sepia.peak_rss_kib();
    let mut client = RawClient::connect(sepia.addr());
    client.send(
        format!("POST /slow-sink/1500 HTTP/1.1\r\nHost: app\r\nContent-Length: {HUGE}\r\n\r\n")
            .as_bytes(),
    );
    let mut writer = client.writer_handle();
    let uploader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 256 * 1024];
        let mut offset = 0;
        while offset < HUGE {
            let len = buf.len().min(HUGE - offset);
            fill_pattern(offset, &mut buf[..len]);
            writer.write_all(&buf[..len]).expect("upload");
            offset += len;
        }
    });
    let r = client.read_response();
    uploader.join().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), format!("received {HUGE}"));
    assert!(
        origin.single_request().body[..] == pattern(HUGE)[..],
        "origin got different bytes"
    );
    let peak = sepia.peak_rss_kib();
    eprintln!("upload: peak RSS {baseline} KiB before, {peak} after");
    assert!(
        peak < baseline + ALLOWED_GROWTH_KIB,
        "peak RSS grew from {baseline} KiB to {peak} KiB for one {HUGE}-byte upload"
    );
}

#[test]
fn many_concurrent_keep_alive_clients() {
    let (origin, sepia) = reverse();
    let addr = sepia.addr();
    let clients: Vec<_> = (0..16)
        .map(|c| {
            std::thread::spawn(move || {
                let mut client = RawClient::connect(addr);
                for r in 0..10 {
                    let len = 1000 + c * 100 + r;
                    client
                        .send(format!("GET /bytes/{len} HTTP/1.1\r\nHost: app\r\n\r\n").as_bytes());
                    let response = client.read_response();
                    assert_eq!(response.status, 200, "client {c} request {r}");
                    assert!(
                        response.body == pattern(len),
                        "client {c} request {r}: wrong body"
                    );
                }
            })
        })
        .collect();
    for client in clients {
        client.join().expect("a client failed");
    }
    assert_eq!(origin.request_count(), 160);
    assert!(
        origin.connections() <= 16,
        "{} origin connections for 16 clients",
        origin.connections()
    );
}
