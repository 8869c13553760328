//! Conformance: storing, selecting, evicting, purging and updating complete objects.

use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::{Body, BodyLength, FinishOutcome, Lookup, NotStoredReason, Store};

pub(crate) fn hit_after_fill<S: Store<Meta>>(make: impl Fn(u64, u64) -> S) {
    let store = make(1 << 20, 1 << 18);
    let body = pattern(5000, 1);
    let stored = expect_stored(store_object(&store, b"/a", b"", &body, 7));
    let hit = expect_hit(store.lookup(b"/a", &any));
    assert!(
        is_stored_object(&hit, &stored),
        "a hit hands out the stored object itself"
    );
    assert!(
        Arc::ptr_eq(&hit, &expect_hit(store.lookup(b"/a", &any))),
        "and so does the next: a body moves into a file once"
    );
    assert_eq!(hit.head(), &head("t"));
    assert_eq!(body_of(&hit), body);
    assert_eq!(hit.body_len(), 5000);
    if let Body::Chunks(chunks) = hit.body() {
        assert_eq!(
            chunks.len(),
            5,
            "chunks kept as they arrived, not copied together"
        );
    }
    assert_eq!(*hit.meta(), 7);
    assert!(hit.secondary().is_empty());
    assert!(
        matches!(store.lookup(b"/b", &any), Lookup::Miss(_)),
        "other keys still miss"
    );
    let s = store.stats();
    assert_eq!((s.hits, s.misses, s.insertions, s.objects), (2, 2, 1, 1));
    assert!(
        s.bytes >= 5000,
        "accounted size covers the body: {}",
        s.bytes
    );
}

/// Sizes cycle through small and large so eviction has to be size-aware.
fn insert_sizes(n: usize, salt: usize) -> impl Iterator<Item = (Vec<u8>, usize)> {
    (0..n).map(move |i| {
        (
            format!("/obj/{salt}/{i}").into_bytes(),
            100 + (i * 7919 + salt * 31) % 8000,
        )
    })
}

pub(crate) fn budget_respected_under_many_inserts<S: Store<Meta>>(make: impl Fn(u64, u64) -> S) {
    let budget = 64 * 1024;
    let store = make(budget, 16 * 1024);
    for (key, len) in insert_sizes(500, 0) {
        expect_stored(store_object(&store, &key, b"", &pattern(len, 0), 0));
        let s = store.stats();
        assert!(
            s.bytes <= budget,
            "{} bytes over budget {budget} after inserting {len}",
            s.bytes
        );
    }
    let s = store.stats();
    assert!(
        s.evictions > 0,
        "500 inserts of ~4 KiB into 64 KiB must evict"
    );
    assert_eq!(s.insertions, 500);
    assert_eq!(s.insertions - s.evictions, s.objects);
    assert!(
        s.bytes > budget / 2,
        "eviction frees what is needed, not everything: {}",
        s.bytes
    );
}

pub(crate) fn budget_respected_under_concurrent_inserts<S: Store<Meta> + 'static>(
    make: impl Fn(u64, u64) -> S,
) {
    let budget = 64 * 1024;
    let store = Arc::new(make(budget, 16 * 1024));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for (key, len) in insert_sizes(200, t + 1) {
                    let writer = match store.lookup(&key, &any) {
                        Lookup::Miss(w) => w,
                        other => panic!("unique keys must miss: {other:?}"),
                    };
                    let outcome = write_body(writer, "t", 0, b"", &pattern(len, 0), 1000);
                    assert!(
                        matches!(
                            outcome,
                            FinishOutcome::Stored(_)
                                | FinishOutcome::NotStored(NotStoredReason::NoRoom)
                        ),
                        "{outcome:?}"
                    );
                    let bytes = store.stats().bytes;
                    assert!(bytes <= budget, "{bytes} over budget {budget}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("inserting thread");
    }
    let s = store.stats();
    assert!(s.bytes <= budget);
    assert_eq!(s.misses, 800);
    assert!(
        s.insertions >= 790,
        "almost every insert finds room: {}",
        s.insertions
    );
}

pub(crate) fn eviction_prefers_one_hit_wonders<S: Store<Meta>>(make: impl Fn(u64, u64) -> S) {
    // Room for 400 objects (enough for a sharded store to run its policy per shard on a
    // realistic population): 200 go in, half of them are hit twice, then 400 one-hit
    // wonders stream through. Under FIFO or LRU-without-hits-protection the early objects
    // would go first; a scan-resistant policy keeps the frequently used ones.
    const CAPACITY: u64 = 400;
    let body = pattern(200, 3);
    let probe = make(1 << 20, 1 << 20);
    expect_stored(store_object(&probe, b"/old/000", b"", &body, 0));
    let size = probe.stats().bytes;
    let budget = CAPACITY * size + size / 2;
    let store = make(budget, 4 * size);

    // Same-length keys: every object is accounted at the same size.
    let key = |prefix: &str, i: usize| format!("/{prefix}/{i:03}").into_bytes();
    for i in 0..200 {
        expect_stored(store_object(&store, &key("old", i), b"", &body, 0));
    }
    for i in (0..200).step_by(2) {
        for _ in 0..2 {
            expect_hit(store.lookup(&key("old", i), &any));
        }
    }
    for i in 0..400 {
        expect_stored(store_object(&store, &key("new", i), b"", &body, 0));
        assert!(store.stats().bytes <= budget);
    }
    let evicted_hot: Vec<usize> = (0..200)
        .step_by(2)
        .filter(|&i| store.lookup_no_fill(&key("old", i), &any).is_none())
        .collect();
    assert!(
        evicted_hot.is_empty(),
        "frequently used objects evicted before one-hit wonders: {evicted_hot:?}"
    );
    // A sharded store evicts per shard (the fullest one), so a few early objects in
    // shards that never became the fullest may outlive later ones; most must be gone.
    let kept_cold = (1..200)
        .step_by(2)
        .filter(|&i| store.lookup_no_fill(&key("old", i), &any).is_some())
        .count();
    assert!(
        kept_cold <= 25,
        "the unhit early objects are the first victims: {kept_cold} of 100 kept"
    );
    let s = store.stats();
    assert_eq!(
        s.objects, CAPACITY,
        "the budget holds exactly {CAPACITY} such objects"
    );
    assert_eq!(s.evictions, 200);
}

pub(crate) fn known_length_too_large_not_stored<S: Store<Meta>>(make: impl Fn(u64, u64) -> S) {
    let store = make(1 << 20, 4096);
    let writer = expect_miss(store.lookup(b"/big", &any));
    let mut w = writer.publish_head(head("big"), 0, Bytes::new(), BodyLength::Known(10_000));
    assert!(
        w.is_too_big(),
        "a declared length over the limit is known too big at once"
    );
    // Not joinable: another request for the key starts its own fetch.
    let other = expect_miss(store.lookup(b"/big", &any));
    drop(other);
    w.append(Bytes::from(pattern(10_000, 0)));
    assert!(matches!(
        w.finish(),
        Ok(FinishOutcome::NotStored(NotStoredReason::TooBig))
    ));
    assert!(store.lookup_no_fill(b"/big", &any).is_none());
    assert_eq!(store.stats().bytes, 0);
    assert!(store.stats().rejected_too_big >= 1);
}

pub(crate) fn vary_variants_side_by_side<S: Store<Meta>>(make: impl Fn(u64, u64) -> S) {
    let store = make(1 << 20, 1 << 18);
    let variants: [(&'static [u8], Meta); 3] = [(b"gzip", 1), (b"br", 2), (b"", 3)];
    for (secondary, meta) in variants {
        expect_stored(store_object(
            &store,
            b"/v",
            secondary,
            &pattern(100, meta as u8),
            meta,
        ));
    }
    for (secondary, meta) in variants {
        let hit = expect_hit(store.lookup(b"/v", &secondary_is(secondary)));
        assert_eq!((hit.secondary().as_ref(), *hit.meta()), (secondary, meta));
        assert_eq!(body_of(&hit), pattern(100, meta as u8));
    }
    assert_eq!(store.stats().objects, 3);
    assert!(matches!(
        store.lookup(b"/v", &secondary_is(b"deflate")),
        Lookup::Miss(_)
    ));
}

pub(crate) fn purge_removes_all_variants<S: Store<Meta>>(make: impl Fn(u64, u64) -> S) {
    let store = make(1 << 20, 1 << 18);
    for secondary in [&b"a"[..], b"b", b"c"] {
        let secondary: &'static [u8] = secondary;
        expect_stored(store_object(&store, b"/p", secondary, b"x", 0));
    }
    expect_stored(store_object(&store, b"/other", b"", b"y", 0));
    assert_eq!(store.purge(b"/p"), 3);
    assert_eq!(store.purge(b"/p"), 0, "nothing left to purge");
    for secondary in [&b"a"[..], b"b", b"c"] {
        let secondary: &'static [u8] = secondary;
        assert!(store
            .lookup_no_fill(b"/p", &secondary_is(secondary))
            .is_none());
    }
    assert!(
        store.lookup_no_fill(b"/other", &any).is_some(),
        "other keys untouched"
    );
    let s = store.stats();
    assert_eq!(s.objects, 1);
    // One small object: its overhead and a few bytes.
    assert!(s.bytes > 0 && s.bytes < crate::OBJECT_OVERHEAD_BYTES + 1000);
}

pub(crate) fn purge_during_fill_prevents_commit<S: Store<Meta>>(make: impl Fn(u64, u64) -> S) {
    let store = make(1 << 20, 1 << 18);
    let writer = expect_miss(store.lookup(b"/p", &any));
    let mut reader = expect_pending(store.lookup(b"/p", &any));
    let mut w = writer.publish_head(head("old"), 1, Bytes::new(), BodyLength::Known(6));
    w.append(Bytes::from_static(b"abc"));
    assert_eq!(store.purge(b"/p"), 0);
    // After the purge a new request must not join the pre-purge fill.
    let fresh = expect_miss(store.lookup(b"/p", &any));
    w.append(Bytes::from_static(b"def"));
    assert!(matches!(
        w.finish(),
        Ok(FinishOutcome::NotStored(NotStoredReason::Purged))
    ));
    // The reader that joined before the purge still gets its complete response.
    let (body, end) = runtime().block_on(read_all(&mut reader));
    assert_eq!((body, end), (b"abcdef".to_vec(), Ok(())));
    assert!(
        store.lookup_no_fill(b"/p", &any).is_none(),
        "purged content must not reappear"
    );
    // The post-purge fill commits normally.
    expect_stored(write_body(fresh, "new", 2, b"", b"new", 10));
    assert_eq!(*expect_hit(store.lookup(b"/p", &any)).meta(), 2);
}

pub(crate) fn remove_variant_removes_only_that_variant<S: Store<Meta>>(
    make: impl Fn(u64, u64) -> S,
) {
    let store = make(1 << 20, 1 << 18);
    expect_stored(store_object(&store, b"/r", b"en", b"hello", 1));
    expect_stored(store_object(&store, b"/r", b"fr", b"bonjour", 2));
    assert!(store.remove_variant(b"/r", b"en"));
    assert!(!store.remove_variant(b"/r", b"en"), "already removed");
    assert!(!store.remove_variant(b"/nope", b"en"));
    assert!(store.lookup_no_fill(b"/r", &secondary_is(b"en")).is_none());
    assert_eq!(
        body_of(&expect_hit(store.lookup(b"/r", &secondary_is(b"fr")))),
        b"bonjour"
    );
    assert_eq!(store.stats().objects, 1);
}

pub(crate) fn update_after_304_shares_body<S: Store<Meta>>(make: impl Fn(u64, u64) -> S) {
    let store = make(1 << 20, 1 << 18);
    let old = expect_stored(store_object(&store, b"/u", b"gz", &pattern(3000, 5), 1));
    let new_head =
        Bytes::from_static(b"HTTP/1.1 200 OK\r\nETag: \"v2\"\r\nX-Longer-Header: yes\r\n\r\n");
    let new = store
        .update(b"/u", &old, new_head.clone(), 2)
        .expect("stored object updates");
    assert_eq!(
        (new.head(), *new.meta(), new.secondary().as_ref()),
        (&new_head, 2, &b"gz"[..])
    );
    match (new.body(), old.body()) {
        (Body::Chunks(new), Body::Chunks(old)) => {
            assert_eq!(new.len(), old.len());
            for (a, b) in new.iter().zip(old.iter()) {
                assert_eq!(a.as_ptr(), b.as_ptr(), "body chunks shared, not copied");
            }
        }
        (Body::File(new), Body::File(old)) => {
            assert!(Arc::ptr_eq(new, old), "body file shared, not copied")
        }
        _ => panic!("an update keeps the body where it is"),
    }
    let hit = expect_hit(store.lookup(b"/u", &secondary_is(b"gz")));
    assert!(is_stored_object(&hit, &new));
    let new = hit;
    assert!(
        store.update(b"/u", &old, head("again"), 3).is_none(),
        "old handle no longer stored"
    );
    store.purge(b"/u");
    assert!(
        store.update(b"/u", &new, head("gone"), 4).is_none(),
        "purged object cannot be updated"
    );
    assert_eq!(
        store.stats().bytes,
        0,
        "purge released the updated object's full size"
    );
}

pub(crate) fn lookup_no_fill_never_starts_a_fill<S: Store<Meta>>(make: impl Fn(u64, u64) -> S) {
    let store = make(1 << 20, 1 << 18);
    assert!(store.lookup_no_fill(b"/n", &any).is_none());
    assert!(store.lookup_no_fill(b"/n", &any).is_none());
    // Had lookup_no_fill registered a fill, this would be Pending.
    let writer = expect_miss(store.lookup(b"/n", &any));
    // And it does not join fills in progress either.
    assert!(store.lookup_no_fill(b"/n", &any).is_none());
    expect_stored(write_body(writer, "n", 0, b"", b"body", 2));
    assert!(store.lookup_no_fill(b"/n", &any).is_some());
    assert_eq!(store.stats().misses, 1);
}

pub(crate) fn refresh_replaces_the_same_variant<S: Store<Meta>>(make: impl Fn(u64, u64) -> S) {
    let store = make(1 << 20, 1 << 18);
    let old = expect_stored(store_object(&store, b"/s", b"", b"version one", 1));
    let writer = expect_miss(store.refresh(b"/s", &any));
    // A concurrent refresh collapses onto it; a plain lookup still hits the stored one.
    let reader = expect_pending(store.refresh(b"/s", &any));
    assert!(is_stored_object(
        &expect_hit(store.lookup(b"/s", &any)),
        &old
    ));
    expect_stored(write_body(writer, "v2", 2, b"", b"version two", 4));
    drop(reader);
    let hit = expect_hit(store.lookup(b"/s", &any));
    assert_eq!((*hit.meta(), body_of(&hit)), (2, b"version two".to_vec()));
    let s = store.stats();
    assert_eq!(
        s.objects, 1,
        "the refreshed object replaced the old variant"
    );
    assert!(
        s.bytes < crate::OBJECT_OVERHEAD_BYTES + 1000,
        "one object's bytes"
    );
}
