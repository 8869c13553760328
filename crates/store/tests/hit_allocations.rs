//! A cache hit must not allocate (DESIGN.md "no per-request allocation on a hit").
//!
//! Counts every heap allocation made while looking up stored objects, through the inherent
//! API, the `Store` trait object and `lookup_no_fill`, with a counting global allocator.
//! The counter is process-wide, so this file runs without the test harness (no other
//! threads allocating meanwhile); `stats_alloc` provides the allocator wrapper, so no
//! `unsafe` is needed here (the workspace forbids it).

use std::alloc::System;
use std::hint::black_box;
use std::sync::Arc;

use bytes::Bytes;
use sepia_store::{by_secondary, BodyLength, Lookup, MemoryStore, Object, Store, StoreConfig};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const KEYS: usize = 1000;
const ROUNDS: usize = 20;

fn fill(store: &MemoryStore<u64>, key: &[u8], secondary: &'static [u8]) {
    let Lookup::Miss(writer) = store.lookup(key, by_secondary(secondary)) else {
        panic!("fresh key must miss");
    };
    let head = Bytes::from_static(
        b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nVary: Accept-Encoding\r\n\r\n",
    );
    let mut body =
        writer.publish_head(head, 1, Bytes::from_static(secondary), BodyLength::Known(8));
    body.append(Bytes::from_static(b"abcd"));
    body.append(Bytes::from_static(b"efgh"));
    body.finish().expect("complete body");
}

/// Runs `hits` and returns (allocations, reallocations, hits done).
fn count(hits: impl FnOnce() -> usize) -> (usize, usize, usize) {
    let region = Region::new(GLOBAL);
    let n = hits();
    let change = region.change();
    (change.allocations, change.reallocations, n)
}

fn check(name: &str, (allocs, reallocs, hits): (usize, usize, usize), failures: &mut usize) {
    println!(
        "{name}: {hits} hits, {allocs} allocations, {reallocs} reallocations ({:.4} allocations per hit)",
        allocs as f64 / hits as f64
    );
    if allocs != 0 || reallocs != 0 || hits == 0 {
        println!("FAILED: {name} allocated on the hit path");
        *failures += 1;
    }
}

fn main() {
    let store: MemoryStore<u64> = MemoryStore::new(StoreConfig::default());
    let keys: Vec<Vec<u8>> = (0..KEYS)
        .map(|i| format!("http://example.com/object/{i}").into_bytes())
        .collect();
    for key in &keys {
        fill(&store, key, b"gzip");
        fill(&store, key, b"br");
    }
    let dyn_store: Arc<dyn Store<u64>> = Arc::new(store.clone());
    let mut failures = 0;

    // The counter itself must see allocations, or every check below would pass vacuously.
    let control = count(|| {
        black_box(Vec::<u8>::with_capacity(64));
        1
    });
    println!("control: {} allocation(s) counted for one Vec", control.0);
    if control.0 != 1 {
        println!("FAILED: the counting allocator does not count");
        failures += 1;
    }

    let inherent = count(|| {
        let mut hits = 0;
        for _ in 0..ROUNDS {
            for key in &keys {
                if let Lookup::Hit(object) = store.lookup(key, by_secondary(b"br")) {
                    black_box(object.body());
                    hits += 1;
                }
            }
        }
        hits
    });
    check("MemoryStore::lookup", inherent, &mut failures);

    let select = |o: &Object<u64>| o.secondary().as_ref() == b"gzip";
    let via_trait = count(|| {
        let mut hits = 0;
        for _ in 0..ROUNDS {
            for key in &keys {
                if let Lookup::Hit(object) = dyn_store.lookup(key, &select) {
                    black_box(object.head());
                    hits += 1;
                }
            }
        }
        hits
    });
    check("dyn Store::lookup", via_trait, &mut failures);

    let no_fill = count(|| {
        let mut hits = 0;
        for _ in 0..ROUNDS {
            for key in &keys {
                hits += usize::from(
                    black_box(store.lookup_no_fill(key, by_secondary(b"gzip"))).is_some(),
                );
            }
        }
        hits
    });
    check("MemoryStore::lookup_no_fill", no_fill, &mut failures);

    // For contrast (not a requirement): what a miss and fill costs.
    let region = Region::new(GLOBAL);
    fill(&store, b"http://example.com/new", b"");
    println!(
        "miss + fill of a 2-chunk object: {} allocations",
        region.change().allocations
    );

    let passed = 4 - failures;
    println!("{passed} passed, {failures} failed");
    if failures > 0 {
        std::process::exit(1);
    }
}
