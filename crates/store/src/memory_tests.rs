//! The memory store: the conformance suite (one shard and many), plus checks of its own
//! accounting that the generic suite cannot see.

use std::sync::Arc;

use bytes::Bytes;

use crate::conformance::{
    any, body_of, expect_hit, expect_miss, expect_pending, expect_stored, pattern, secondary_is,
    store_object, write_body, Meta,
};
use crate::{Body, BodyLength, FileHome, FinishOutcome, Lookup, MemoryStore, StoreConfig};

fn store(budget: u64, max: u64, shards: usize) -> MemoryStore<Meta> {
    MemoryStore::new(StoreConfig {
        budget_bytes: budget,
        max_object_bytes: max,
        shards,
        ..StoreConfig::default()
    })
}

/// A store that keeps bodies of at least `file_min` bytes in sealed files, at most `files`
/// of them at once.
fn file_store(budget: u64, max: u64, file_min: u64, files: usize) -> MemoryStore<Meta> {
    MemoryStore::new(file_config(budget, max, file_min, files))
}

fn file_config(budget: u64, max: u64, file_min: u64, files: usize) -> StoreConfig {
    StoreConfig {
        budget_bytes: budget,
        max_object_bytes: max,
        shards: 4,
        body_file_min: file_min,
        max_body_files: files,
        body_file_home: FileHome::Memory,
    }
}

mod one_shard {
    crate::conformance::conformance_suite!(|budget, max| super::store(budget, max, 1));
}

mod sixteen_shards {
    crate::conformance::conformance_suite!(|budget, max| super::store(budget, max, 16));
}

/// Every non-empty body in a sealed file: the whole suite must hold unchanged.
mod file_bodies {
    crate::conformance::conformance_suite!(|budget, max| super::file_store(
        budget, max, 1, 100_000
    ));
}

/// Every non-empty body in an unnamed file of the temporary directory.
mod file_bodies_in_a_directory {
    crate::conformance::conformance_suite!(|budget, max| {
        let mut store = super::file_store(budget, max, 1, 100_000);
        let home = crate::FileHome::Dir(std::env::temp_dir());
        if home.probe().is_ok() {
            store = crate::MemoryStore::new(crate::StoreConfig {
                body_file_home: home,
                ..super::file_config(budget, max, 1, 100_000)
            });
        } else {
            eprintln!("SKIPPED (memfd instead): no O_TMPFILE in the temporary directory");
        }
        store
    });
}

/// Two file slots for the whole store: bodies past them stay in memory, mixed freely.
mod few_file_slots {
    crate::conformance::conformance_suite!(|budget, max| super::file_store(budget, max, 1, 2));
}

#[test]
fn an_empty_body_never_takes_a_file() {
    let s = file_store(64 * 1024, 32 * 1024, 0, 8);
    expect_stored(store_object(&s, b"/empty", b"", b"", 1));
    let empty = expect_hit(s.lookup(b"/empty", any));
    assert!(matches!(empty.body(), Body::Chunks(c) if c.is_empty()));
    expect_stored(store_object(&s, b"/one", b"", b"x", 1));
    let one = expect_hit(s.lookup(b"/one", any));
    assert!(
        matches!(one.body(), Body::File(_)),
        "a minimum of 0 takes every other body"
    );
    assert_eq!(s.stats().body_files, 1);
}

#[test]
fn large_bodies_go_to_files_and_eviction_gives_the_slots_back() {
    let s = file_store(64 * 1024, 32 * 1024, 10_000, 8);
    expect_stored(store_object(&s, b"/small", b"", &pattern(9_999, 1), 1));
    let small = expect_hit(s.lookup(b"/small", any));
    assert!(
        matches!(small.body(), Body::Chunks(_)),
        "below the threshold"
    );
    let stored = expect_stored(store_object(&s, b"/big", b"", &pattern(20_000, 2), 2));
    assert!(
        matches!(stored.body(), Body::Chunks(_)),
        "stored from memory: most objects are never hit"
    );
    assert_eq!(s.stats().body_files, 0);
    let used = s.stats().bytes;
    let big = expect_hit(s.lookup(b"/big", any));
    let Body::File(file) = big.body() else {
        panic!("at the threshold or above: a file from the first hit on")
    };
    assert_eq!(file.len(), 20_000);
    assert_eq!(body_of(&big), pattern(20_000, 2));
    assert!(Arc::ptr_eq(&big, &expect_hit(s.lookup(b"/big", any))));
    assert_eq!(s.stats().body_files, 1);
    assert!(
        s.stats().bytes < used,
        "one file is accounted as one piece, not as its chunks"
    );
    s.assert_consistent(true);
    drop((big, stored));
    // Fill the budget with other large objects, each hit once: /big is evicted and its
    // file closed.
    for i in 0..8u32 {
        let key = format!("/other/{i}").into_bytes();
        drop(store_object(&s, &key, b"", &pattern(20_000, 3), 3));
        drop(s.lookup(&key, any));
    }
    let stats = s.stats();
    assert!(stats.evictions > 0, "{stats:?}");
    assert!(
        stats.body_files <= 3 && stats.body_files <= stats.objects,
        "a 64 KiB budget holds at most three 20 KB objects: {stats:?}"
    );
    assert_eq!(stats.body_file_errors, 0);
    s.assert_consistent(true);
    for i in 0..8u32 {
        s.purge(format!("/other/{i}").as_bytes());
    }
    s.purge(b"/big");
    assert_eq!(s.stats().body_files, 0, "every file closed with its object");
}

#[test]
fn accounting_stays_consistent_through_a_mixed_workload() {
    let s = store(32 * 1024, 8 * 1024, 8);
    let rt = crate::conformance::runtime();
    for i in 0..400u32 {
        let key = format!("/k/{}", i % 97).into_bytes();
        let secondary: &'static [u8] = if i % 3 == 0 { b"gz" } else { b"" };
        match s.lookup(&key, secondary_is(secondary)) {
            Lookup::Hit(obj) if i % 5 == 0 => {
                let grown = Bytes::from(vec![b'h'; 20 + (i as usize % 300)]);
                s.update(&key, &obj, grown, i);
            }
            Lookup::Hit(_) => {}
            Lookup::Miss(w) => match i % 11 {
                0 => w.release(),
                1 => drop(w),
                2 => {
                    let mut b = w.publish_head(
                        Bytes::from_static(b"h"),
                        i,
                        Bytes::new(),
                        BodyLength::Known(99),
                    );
                    b.append(Bytes::from_static(b"short"));
                    assert!(b.finish().is_err());
                }
                _ => {
                    let body = pattern(50 + (i as usize * 37) % 6000, 1);
                    write_body(w, "m", i, secondary, &body, 700);
                }
            },
            Lookup::Pending(mut r) => {
                drop(rt.block_on(r.head()));
            }
        }
        if i % 13 == 0 {
            s.purge(&key);
        }
        if i % 17 == 0 {
            s.remove_variant(&key, b"gz");
        }
        s.assert_consistent(true);
    }
    let stats = s.stats();
    assert!(
        stats.evictions > 0
            && stats.removals > 0
            && stats.aborted_fills > 0
            && stats.released_fills > 0
    );
}

#[test]
fn big_object_makes_room_in_other_shards() {
    // 16 shards of a 20 KiB budget: a shard's share is 1.25 KiB, far less than the 12 KiB
    // object, which must still fit by evicting from the other shards.
    let s = store(20 * 1024, 14 * 1024, 16);
    for i in 0..40 {
        expect_stored(store_object(
            &s,
            format!("/small/{i}").as_bytes(),
            b"",
            &pattern(200, 0),
            0,
        ));
    }
    let before = s.stats();
    assert!(
        before.bytes > 10 * 1024,
        "store is mostly full: {}",
        before.bytes
    );
    let big = expect_stored(store_object(&s, b"/big", b"", &pattern(12 * 1024, 2), 0));
    assert!(Arc::ptr_eq(&big, &expect_hit(s.lookup(b"/big", any))));
    s.assert_consistent(true);
    assert!(s.stats().evictions > 0);
}

#[test]
fn update_reaccounts_growth_and_shrink() {
    let s = store(1 << 20, 1 << 16, 4);
    let old = expect_stored(store_object(&s, b"/u", b"", b"body", 1));
    let base = s.stats().bytes;
    let grown = s
        .update(
            b"/u",
            &old,
            Bytes::from(vec![b'x'; old.head().len() + 100]),
            2,
        )
        .unwrap();
    assert_eq!(s.stats().bytes, base + 100);
    let shrunk = s
        .update(
            b"/u",
            &grown,
            Bytes::from(vec![b'x'; old.head().len() - 5]),
            3,
        )
        .unwrap();
    assert_eq!(s.stats().bytes, base - 5);
    assert_eq!(body_of(&shrunk), b"body");
    s.assert_consistent(true);
}

#[test]
fn update_beyond_max_object_size_removes_the_object() {
    let s = store(1 << 20, 2048, 1);
    let old = expect_stored(store_object(&s, b"/u", b"", b"body", 1));
    assert!(s
        .update(b"/u", &old, Bytes::from(vec![b'x'; 4096]), 2)
        .is_none());
    assert!(s.lookup_no_fill(b"/u", any).is_none());
    assert_eq!(s.stats().bytes, 0);
}

#[test]
fn update_growth_that_evicts_itself_returns_none_and_balances() {
    // Budget of exactly one object: growing it cannot be made room for.
    let s = store(1 << 20, 1 << 20, 1);
    let probe = expect_stored(store_object(&s, b"/p", b"", &pattern(1000, 0), 0));
    let size = s.stats().bytes;
    drop(probe);
    let s = store(size, size, 1);
    let old = expect_stored(store_object(&s, b"/p", b"", &pattern(1000, 0), 0));
    let bigger = Bytes::from(vec![b'x'; old.head().len() + 10]);
    assert!(s.update(b"/p", &old, bigger, 1).is_none());
    s.assert_consistent(true);
}

#[test]
fn fills_never_stay_registered() {
    let s = store(1 << 20, 4096, 4);
    let rt = crate::conformance::runtime();
    // Too big with a reader attached, then finished.
    let w = expect_miss(s.lookup(b"/big", any));
    let mut r = expect_pending(s.lookup(b"/big", any));
    let mut b = w.publish_head(
        Bytes::from_static(b"h"),
        0,
        Bytes::new(),
        BodyLength::Unknown,
    );
    b.append(Bytes::from(vec![0; 8192]));
    assert!(matches!(b.finish(), Ok(FinishOutcome::NotStored(_))));
    assert_eq!(
        rt.block_on(crate::conformance::read_all(&mut r)).0.len(),
        8192
    );
    // Released, aborted, purged.
    expect_miss(s.lookup(b"/a", any)).release();
    drop(expect_miss(s.lookup(b"/b", any)));
    let w = expect_miss(s.lookup(b"/c", any));
    s.purge(b"/c");
    assert!(matches!(
        write_body(w, "c", 0, b"", b"c", 1),
        FinishOutcome::NotStored(_)
    ));
    s.assert_consistent(true);
    let stats = s.stats();
    assert_eq!(
        (
            stats.rejected_too_big,
            stats.released_fills,
            stats.aborted_fills
        ),
        (1, 1, 1)
    );
}

#[test]
fn replaced_variant_counts_as_removal_not_eviction() {
    let s = store(1 << 20, 1 << 16, 2);
    expect_stored(store_object(&s, b"/r", b"", b"one", 1));
    let w = expect_miss(s.refresh(b"/r", any));
    expect_stored(write_body(w, "two", 2, b"", b"two", 3));
    let stats = s.stats();
    assert_eq!(
        (
            stats.objects,
            stats.removals,
            stats.evictions,
            stats.insertions
        ),
        (1, 1, 0, 2)
    );
    s.assert_consistent(true);
}

#[test]
fn store_is_usable_as_a_trait_object() {
    let s: Arc<dyn crate::Store<Meta>> = Arc::new(store(1 << 20, 1 << 16, 2));
    let w = match s.lookup(b"/t", &any) {
        Lookup::Miss(w) => w,
        other => panic!("{other:?}"),
    };
    expect_stored(write_body(w, "t", 0, b"", b"dyn", 3));
    assert_eq!(body_of(&s.lookup_no_fill(b"/t", &any).unwrap()), b"dyn");
}

/// S3-FIFO's ghost queue through the whole store: an object evicted as a one-hit wonder and
/// stored again soon after is admitted to the main queue, so a stream of new one-hit wonders
/// evicts them and not it. With and without a secondary key (the ghost identity is the
/// primary key's hash alone when there is none).
#[test]
fn an_object_stored_again_soon_after_eviction_outlives_one_hit_wonders() {
    for secondary in [&b""[..], b"gzip"] {
        let s = store(40 * 1024, 8 * 1024, 1);
        let wonders = |prefix: &str, n: usize| {
            for i in 0..n {
                let key = format!("/{prefix}{i}");
                expect_stored(store_object(&s, key.as_bytes(), b"", &[b'w'; 1000], 1));
            }
        };
        let store_twice_seen = || {
            let writer = expect_miss(s.lookup(b"/again", secondary_is(secondary)));
            let outcome = write_body(writer, "t", 1, secondary, &[b'a'; 1000], 1000);
            expect_stored(outcome);
        };
        store_twice_seen();
        // About 19 such objects fit: the twentieth evicts the oldest, which the ghost queue
        // then remembers (it forgets after about as many bytes as the main queue holds).
        wonders("before", 20);
        assert!(
            matches!(
                s.lookup(b"/again", secondary_is(secondary)),
                Lookup::Miss(_)
            ),
            "evicted as a one-hit wonder (secondary {secondary:?})"
        );
        store_twice_seen();
        expect_stored(store_object(&s, b"/control", b"", &[b'c'; 1000], 1));
        wonders("after", 40);
        expect_hit(s.lookup(b"/again", secondary_is(secondary)));
        assert!(
            matches!(s.lookup(b"/control", any), Lookup::Miss(_)),
            "a key seen once is evicted among the wonders"
        );
    }
}

#[test]
fn a_writer_sees_the_head_it_published_as_collapsed_readers_do() {
    let s = store(1 << 20, 4096, 1);
    let w = expect_miss(s.lookup(b"/own", any));
    let head = Bytes::from_static(b"HTTP/1.1 200 OK\r\n");
    let mut b = w.publish_head(
        head.clone(),
        7,
        Bytes::from_static(b"v"),
        BodyLength::Known(3),
    );
    let own = b.object();
    assert_eq!(own.head(), &head);
    assert_eq!(*own.meta(), 7);
    assert_eq!(own.secondary().as_ref(), b"v");
    assert_eq!(own.body_len(), 3, "the promised length");
    b.append(Bytes::from_static(b"abc"));
    assert!(matches!(b.finish(), Ok(FinishOutcome::Stored(_))));
}

#[test]
fn a_smaller_budget_evicts_until_the_objects_fit_and_a_larger_one_admits_more() {
    let s = store(64 * 1024, 8 * 1024, 4);
    for i in 0..50 {
        let key = format!("/o/{i}");
        expect_stored(store_object(&s, key.as_bytes(), b"", &pattern(1000, 0), 0));
    }
    let full = s.stats();
    assert!(full.bytes > 40 * 1024, "filled: {}", full.bytes);
    s.set_budget(16 * 1024);
    let shrunk = s.stats();
    assert!(shrunk.bytes <= 16 * 1024, "still {} bytes", shrunk.bytes);
    assert_eq!(shrunk.budget_bytes, 16 * 1024);
    assert!(shrunk.evictions > full.evictions);
    s.assert_consistent(true);
    s.set_budget(128 * 1024);
    for i in 0..100 {
        let key = format!("/p/{i}");
        expect_stored(store_object(&s, key.as_bytes(), b"", &pattern(1000, 0), 0));
    }
    assert!(s.stats().bytes > 64 * 1024, "the larger budget is used");
    s.assert_consistent(true);
}
