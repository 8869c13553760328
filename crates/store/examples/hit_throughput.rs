//! Measures the cost of a cache hit: `cargo run --release -p sepia-store --example hit_throughput`.
//!
//! Prints nanoseconds per `lookup` hit on one thread over many keys, and on N threads
//! either spread over many keys or all hitting one hot key (the worst case for the
//! shard's lock word and the object's reference count).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use sepia_store::{by_secondary, BodyLength, Lookup, MemoryStore, StoreConfig};

const KEYS: usize = 10_000;
const HITS_PER_THREAD: usize = 2_000_000;

fn main() {
    let store: MemoryStore<u64> = MemoryStore::new(StoreConfig::default());
    let keys: Arc<Vec<Vec<u8>>> = Arc::new(
        (0..KEYS)
            .map(|i| format!("http://example.com/static/asset-{i}.js").into_bytes())
            .collect(),
    );
    for key in keys.iter() {
        let Lookup::Miss(writer) = store.lookup(key, by_secondary(b"")) else {
            unreachable!()
        };
        let head = Bytes::from_static(b"HTTP/1.1 200 OK\r\nContent-Length: 512\r\n\r\n");
        let mut body = writer.publish_head(head, 0, Bytes::new(), BodyLength::Known(512));
        body.append(Bytes::from(vec![b'x'; 512]));
        body.finish().expect("complete");
    }
    let threads: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2);
    // Optional second argument: run only the scenarios whose label contains it; third:
    // hits per thread (small values let `valgrind --tool=callgrind` count instructions).
    let only = std::env::args().nth(2).unwrap_or_default();
    let hits_per_thread: usize = std::env::args()
        .nth(3)
        .and_then(|a| a.parse().ok())
        .unwrap_or(HITS_PER_THREAD);
    for (label, n, hot) in [
        ("1 thread, 10k keys", 1, false),
        ("N threads, 10k keys", threads, false),
        ("N threads, 1 hot key", threads, true),
    ] {
        if !label.contains(only.as_str()) {
            continue;
        }
        let start = Instant::now();
        let handles: Vec<_> = (0..n)
            .map(|t| {
                let store = store.clone();
                let keys = Arc::clone(&keys);
                std::thread::spawn(move || {
                    let mut hits = 0usize;
                    for i in 0..hits_per_thread {
                        let key = if hot {
                            &keys[0]
                        } else {
                            &keys[(i * 7919 + t * 13) % KEYS]
                        };
                        if let Lookup::Hit(o) = store.lookup(key, by_secondary(b"")) {
                            black_box(o.body_len());
                            hits += 1;
                        }
                    }
                    hits
                })
            })
            .collect();
        let hits: usize = handles.into_iter().map(|h| h.join().expect("thread")).sum();
        let elapsed = start.elapsed();
        println!(
            "{label} (N={n}): {hits} hits in {:.1} ms: {:.1} ns per hit per thread, {:.1} M hits/s total",
            elapsed.as_secs_f64() * 1e3,
            elapsed.as_nanos() as f64 * n as f64 / hits as f64,
            hits as f64 / elapsed.as_secs_f64() / 1e6
        );
    }
}
