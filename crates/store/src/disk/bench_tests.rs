//! Measurements, not checks (ignored; run them in release mode):
//!
//! ```text
//! cargo test --release -p sepia-store disk::bench_tests -- --ignored --nocapture --test-threads=1
//! ```
//!
//! - `index_bytes_per_object`: 1,000,000 entries, bytes from the tables and from the
//!   process's resident set (`/proc/self/statm`).
//! - `restart_with_a_million_objects` (`SEPIA_BENCH_DROP_CACHES=1`: each open with a cold
//!   page cache; needs root): time from `open` to a fully loaded index after a
//!   clean shutdown (checkpoint), after a crash with a checkpoint of half the objects, and
//!   after a crash with no checkpoint at all (every summary scanned).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::index::{Index, Loc};
use super::tests::TestObj;
use super::{DiskConfig, DiskEngine};

const N: usize = 1_000_000;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

#[test]
#[ignore = "measurement"]
fn index_bytes_per_object() {
    let before = rss_bytes();
    let idx = Index::new();
    for i in 0..N as u64 {
        let hash = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i << 7);
        idx.insert(
            hash,
            Loc {
                seg: (i / 4096) as u32,
                offset: (i % 4096) * 4096,
                len: 4096,
                hit: false,
                verified: false,
            },
        );
    }
    let after = rss_bytes();
    println!(
        "index: {} entries, tables {:.1} B/object, RSS growth {:.1} B/object",
        idx.len(),
        idx.heap_bytes() as f64 / N as f64,
        after.saturating_sub(before) as f64 / N as f64
    );
    assert_eq!(idx.len(), N);
    assert!(idx.heap_bytes() <= 32 * N);
}

fn cfg(dir: &std::path::Path) -> DiskConfig {
    DiskConfig {
        checkpoint_interval: Duration::from_secs(3600),
        checkpoint_every_bytes: u64::MAX,
        ..DiskConfig::new(dir, 2 << 30)
    }
}

fn fill(e: &DiskEngine, from: usize, to: usize) {
    let body = Bytes::from(vec![b'x'; 200]);
    for i in from..to {
        let obj = Arc::new(TestObj {
            head: Bytes::from_static(b"HTTP/1.1 200 OK\r\n\r\n"),
            body: vec![body.clone()],
        });
        let key = Bytes::from(format!("http://example.com/object/{i}"));
        while !e.enqueue_write(key.clone(), obj.clone()) {
            e.sync(false);
        }
    }
    e.sync(false);
}

fn timed_open(dir: &std::path::Path, what: &str) -> DiskEngine {
    // Cold page cache (needs root): SEPIA_BENCH_DROP_CACHES=1.
    if std::env::var_os("SEPIA_BENCH_DROP_CACHES").is_some() {
        let dropped = std::process::Command::new("sh")
            .args(["-c", "sync; echo 3 > /proc/sys/vm/drop_caches"])
            .status();
        println!("page cache dropped: {dropped:?}");
    }
    let start = Instant::now();
    let e = DiskEngine::open(cfg(dir)).unwrap();
    let opened = start.elapsed();
    assert!(e.wait_loaded(Duration::from_secs(120)));
    let s = e.stats();
    println!(
        "{what}: open returned in {:.1} ms, index loaded in {:.0} ms: {} objects, index {:.1} B/object",
        opened.as_secs_f64() * 1e3,
        start.elapsed().as_secs_f64() * 1e3,
        s.objects,
        s.index_bytes as f64 / s.objects.max(1) as f64
    );
    e
}

#[test]
#[ignore = "measurement"]
fn restart_with_a_million_objects() {
    let dir =
        tempfile::tempdir_in(std::env::var("SEPIA_BENCH_DIR").unwrap_or_else(|_| "/tmp".into()))
            .unwrap();
    let e = DiskEngine::open(cfg(dir.path())).unwrap();
    let start = Instant::now();
    fill(&e, 0, N);
    println!(
        "wrote {N} objects in {:.1} s: {:?}",
        start.elapsed().as_secs_f64(),
        e.stats()
    );
    e.close();
    drop(e);
    let e = timed_open(dir.path(), "clean shutdown");
    assert_eq!(e.stats().objects, N as u64);
    // Crash with the checkpoint covering half the objects: the rest come from summaries
    // and the torn tail.
    for i in 0..N / 2 {
        e.purge(format!("http://example.com/object/{i}").as_bytes());
    }
    e.sync(true);
    fill(&e, 0, N / 2);
    e.crash();
    let e = timed_open(dir.path(), "kill -9, checkpoint 500k objects old");
    // A purge drops every entry with the key's 32-bit tag in its shard: with 500k purges
    // among 1M keys, about one other key shares one (a miss, never a wrong object).
    assert!(e.stats().objects >= N as u64 - 10);
    e.crash();
    std::fs::remove_file(dir.path().join("checkpoint")).unwrap();
    let e = timed_open(
        dir.path(),
        "kill -9, no checkpoint (all 1M from segment summaries)",
    );
    assert!(e.stats().objects >= N as u64 - 10);
}
