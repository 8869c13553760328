//! Proves the hot-path promise of DESIGN.md for the policy: answering a hit
//! (key, request directives, Vary match, freshness decision, client
//! conditionals, range, Age, Cache-Status) allocates nothing once the
//! caller's buffers are warm. Run without the test harness so the counting
//! allocator sees only this thread. Also prints the time per hit decision.

use std::alloc::System;
use std::time::Instant;

use sepia_cache_policy::{
    evaluate, evaluate_conditionals, primary_key, range_for_stored, CacheStatus,
    ConditionalOutcome, Decision, FieldList, PolicyConfig, RangeOutcome, RequestCacheControl,
    StoredMeta,
};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const ROUNDS: u64 = 100_000;

/// One hit, as the proxy would run it; returns something derived from every
/// step so nothing is optimised away.
fn hit(
    request: &FieldList,
    stored: &StoredMeta,
    stored_key: &[u8],
    config: &PolicyConfig,
    now: u64,
    buffers: &mut (Vec<u8>, Vec<u8>, Vec<u8>),
) -> u64 {
    let (key, scratch, status_line) = buffers;
    primary_key(b"http", b"www.example.com", b"/images/logo.png?v=3", key);
    let directives = RequestCacheControl::parse(request);
    assert!(stored.vary_matches(stored_key, request, scratch));
    let decision = evaluate(stored, &directives, now, config);
    let Decision::Fresh(freshness) = decision else {
        panic!("expected a fresh hit, got {decision:?}");
    };
    let conditional = evaluate_conditionals(b"GET", request, stored);
    assert_eq!(conditional, ConditionalOutcome::Proceed);
    let range = range_for_stored(b"GET", request, stored, 4096);
    assert_eq!(range, RangeOutcome::Full);
    status_line.clear();
    CacheStatus::hit(freshness.ttl()).write("sepia", status_line);
    key.len() as u64 + stored.age_field_value(now) + status_line.len() as u64
}

fn main() {
    let now = 1_700_000_000;
    let config = PolicyConfig::default();
    let request = FieldList::from_pairs(&[
        ("Host", "www.example.com"),
        (
            "User-Agent",
            "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
        ),
        ("Accept", "image/avif,image/webp,*/*"),
        ("Accept-Language", "en-US,en;q=0.5"),
        ("Accept-Encoding", "gzip, deflate, br"),
        ("Connection", "keep-alive"),
        ("Referer", "https://www.example.com/"),
        ("Cookie", "session=abc123; theme=dark"),
        ("If-None-Match", "\"5f2b-1a\""),
        ("Cache-Control", "max-stale=10"),
    ]);
    let response = FieldList::from_pairs(&[
        ("Date", "Tue, 14 Nov 2023 22:13:20 GMT"),
        ("Cache-Control", "public, max-age=3600"),
        ("ETag", "\"5f2b-1b\""),
        ("Content-Type", "image/png"),
        ("Content-Length", "4096"),
        ("Vary", "Accept-Encoding"),
    ]);
    let stored = StoredMeta::from_response(
        200,
        &response,
        now,
        now,
        b"http://www.example.com/images/logo.png?v=3",
        &config,
    );
    let mut stored_key = Vec::new();
    sepia_cache_policy::vary_key(&response, &request, &mut stored_key);
    let mut buffers = (
        Vec::with_capacity(256),
        Vec::with_capacity(256),
        Vec::with_capacity(256),
    );

    // Warm-up round outside the measured region.
    let mut checksum = hit(
        &request,
        &stored,
        &stored_key,
        &config,
        now + 1,
        &mut buffers,
    );

    let region = Region::new(GLOBAL);
    let started = Instant::now();
    for round in 0..ROUNDS {
        checksum = checksum.wrapping_add(hit(
            &request,
            &stored,
            &stored_key,
            &config,
            now + 1 + round % 60,
            &mut buffers,
        ));
    }
    let elapsed = started.elapsed();
    let stats = region.change();

    println!(
        "hit path: {} rounds, {:.0} ns per hit, {} allocations, {} reallocations (checksum {checksum})",
        ROUNDS,
        elapsed.as_nanos() as f64 / ROUNDS as f64,
        stats.allocations,
        stats.reallocations
    );
    assert_eq!(stats.allocations, 0, "the hit path must not allocate");
    assert_eq!(stats.reallocations, 0, "the hit path must not reallocate");
}
