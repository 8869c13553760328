//! Which objects leaving memory the disk takes (`Admission`): earned ones always; unearned
//! ones while the disk has room it would not have to reclaim (`Fill`, the default), within
//! half the day's write budget; none with `Earned` (the other tests' setting).

use crate::conformance::{self, any, pattern, runtime, store_object};
use crate::tiered_tests::{
    demote, disk_cfg, earn_and_push_out, memory_cfg, open_loaded, pool_reads, read_pending, Tiered,
};
use crate::{Admission, DiskConfig, Lookup, Store, TieredConfig};

/// 64 KiB of memory over a disk of `disk_bytes` (256 KiB segments) admitting by `admission`.
fn over_disk(admission: Admission, disk_bytes: u64, budget_per_day: Option<u64>) -> Tiered {
    over_disk_in(
        tempfile::tempdir().unwrap(),
        admission,
        disk_bytes,
        budget_per_day,
    )
}

fn over_disk_in(
    dir: tempfile::TempDir,
    admission: Admission,
    disk_bytes: u64,
    budget_per_day: Option<u64>,
) -> Tiered {
    let memory = memory_cfg(64 << 10, 32 << 10, 1);
    let disk = DiskConfig {
        admission,
        size_bytes: disk_bytes,
        write_budget_bytes_per_day: budget_per_day,
        ..disk_cfg(dir.path())
    };
    open_loaded(dir, pool_reads(TieredConfig::new(memory, vec![disk])))
}

/// Stores one-hit objects `/o/{from..to}` of 20,000 bytes: each is pushed out of memory,
/// unearned, by the ones after it. Returns the disk's writes after they were written.
fn one_hit_wonders(t: &Tiered, from: usize, to: usize) -> u64 {
    for i in from..to {
        let key = format!("/o/{i}");
        conformance::expect_stored(store_object(t, key.as_bytes(), b"", &body(i), 1));
        if i % 8 == 7 {
            t.store.disks()[0].sync(false);
        }
    }
    t.store.disks()[0].sync(false);
    t.stats().disk_writes
}

fn body(i: usize) -> Vec<u8> {
    pattern(20_000, i as u8)
}

#[test]
fn an_empty_disk_takes_unearned_objects_until_full_then_only_earned_ones() {
    // 2 MiB: about 1.9 MiB of segments, some 90 records of 20 KB.
    let t = over_disk(Admission::Fill, 2 << 20, None);
    let written = one_hit_wonders(&t, 0, 200);
    assert!(
        (40..150).contains(&written),
        "unearned objects fill the disk, and stop at full: {written} of 200 written"
    );
    let s = t.stats();
    assert_eq!(
        (s.disk_fill_writes, s.disk_fill_write_bytes),
        (written, s.disk_write_bytes),
        "all of them counted as fill writes"
    );
    assert_eq!(
        one_hit_wonders(&t, 200, 260),
        written,
        "a full disk takes no more unearned objects"
    );
    // Nothing was reclaimed to make room for them: the first one is still there, whole.
    let got = runtime()
        .block_on(read_pending(&t, b"/o/0"))
        .expect("on disk");
    assert_eq!(got.1, body(0));
    // Earned objects are still written, reclaiming the oldest segments: some 140 records
    // of 4 KB, two segments' worth.
    for i in 0..160 {
        let key = format!("/e/{i}");
        conformance::expect_stored(store_object(&t, key.as_bytes(), b"", &body(i)[..4000], 1));
        assert!(t.lookup(key.as_bytes(), &any).is_hit());
    }
    t.store.disks()[0].sync(false);
    let s = t.stats();
    assert!(s.disk_writes > written + 100, "{written} then {s:?}");
    // The segment being written now has room, but the disk is full: none of 60 unearned
    // objects goes into it (it would only make the next segment reclaim).
    one_hit_wonders(&t, 260, 320);
    for i in 260..320 {
        let key = format!("/o/{i}");
        let found = t.lookup(key.as_bytes(), &any);
        assert!(
            !matches!(found, Lookup::Pending(_)),
            "{key} was written to a full disk"
        );
    }
}

#[test]
fn unearned_objects_take_at_most_half_the_days_write_budget() {
    // Room for all of them, budget for about 50 (24 of them unearned).
    let budget = 1_000_000;
    let t = over_disk(Admission::Fill, 16 << 20, Some(budget));
    let written = one_hit_wonders(&t, 0, 100);
    let bytes = t.stats().disk_write_bytes;
    assert!((20..=25).contains(&written), "{written}");
    assert!(bytes <= budget / 2, "{bytes} bytes of unearned objects");
    demote(&t, b"/earned", &pattern(9_000, 7));
    let after = t.stats();
    assert_eq!(
        after.disk_write_skips, 0,
        "earned objects use the rest: {after:?}"
    );
    let got = runtime().block_on(read_pending(&t, b"/earned"));
    assert_eq!(got.expect("on disk").1, pattern(9_000, 7));
}

#[test]
fn earned_admission_writes_earned_objects_only() {
    let t = over_disk(Admission::Earned, 2 << 20, None);
    assert_eq!(one_hit_wonders(&t, 0, 40), 0);
    demote(&t, b"/earned", &pattern(9_000, 7));
    let got = runtime().block_on(read_pending(&t, b"/earned"));
    assert_eq!(got.expect("on disk").1, pattern(9_000, 7));
    assert_eq!(t.stats().disk_fill_writes, 0);
}

#[test]
fn a_full_disk_reopened_takes_at_most_a_segment_of_unearned_objects() {
    let t = over_disk(Admission::Fill, 2 << 20, None);
    let written = one_hit_wonders(&t, 0, 200);
    t.store.close();
    let Tiered { store, dir } = t;
    drop(store);
    let t = over_disk_in(dir, Admission::Fill, 2 << 20, None);
    assert!(t.stats().disk_objects >= written, "kept across the restart");
    one_hit_wonders(&t, 200, 300);
    // A partly filled segment sealed at the stop may leave room for a segment's worth
    // (256 KiB: 12 records of 20 KB); nothing more.
    let s = t.stats();
    assert!(s.disk_fill_writes <= 12, "{s:?}");
    let got = runtime().block_on(read_pending(&t, b"/o/0"));
    assert_eq!(got.expect("still on disk").1, body(0));
}

#[test]
fn an_object_fetched_again_while_its_first_copy_was_written_is_not_written_twice() {
    let t = over_disk(Admission::Fill, 16 << 20, None);
    for i in 0..300 {
        let key = format!("/o/{i}");
        conformance::expect_stored(store_object(&t, key.as_bytes(), b"", &body(i), 1));
        // The object pushed out a moment ago: its unearned copy may still be queued, so
        // memory and disk both miss and it is fetched (stored) again, to leave memory
        // unearned a second time later.
        if i >= 4 {
            let back = format!("/o/{}", i - 4);
            if let Lookup::Miss(writer) = t.lookup(back.as_bytes(), &any) {
                conformance::expect_stored(conformance::write_body(
                    writer,
                    "t",
                    1,
                    b"",
                    &body(i - 4),
                    1000,
                ));
            }
        }
    }
    t.store.disks()[0].sync(false);
    let s = t.stats();
    assert!(s.disk_objects <= 300, "a key indexed twice: {s:?}");
    assert!(s.disk_objects >= 250, "{s:?}");
}

/// A key written twice (stored, earned, pushed out; stored anew, earned, pushed out again)
/// has two records on disk, but once the newer is indexed the older's entry is gone (only
/// the newest is served): the index counts the key once, and a lookup, on either read
/// path, reads and serves the newer.
#[test]
fn a_key_written_again_is_indexed_once_and_serves_the_newer_record() {
    for cached_reads in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let memory = memory_cfg(64 << 10, 32 << 10, 1);
        let cfg = TieredConfig {
            cached_reads,
            ..TieredConfig::new(memory, vec![disk_cfg(dir.path())])
        };
        let t = open_loaded(dir, cfg);
        let (old, new) = (pattern(20_000, 1), pattern(20_000, 2));
        let indexed = || {
            let disk = &t.store.disks()[0];
            disk.shared.index.candidates(disk.hash(b"/k")).len()
        };
        demote(&t, b"/k", &old);
        assert_eq!(indexed(), 1, "the first record is indexed ({cached_reads})");
        // Fetched anew (a refresh), earned and pushed out: a second record.
        let writer = conformance::expect_miss(t.refresh(b"/k", &any));
        conformance::expect_stored(conformance::write_body(writer, "t", 5, b"", &new, 1000));
        earn_and_push_out(&t, b"/k", 1);
        assert_eq!(
            indexed(),
            1,
            "the newer record took the older's place in the index ({cached_reads})"
        );
        let body = if cached_reads {
            let Lookup::Hit(object) = t.lookup(b"/k", &any) else {
                panic!("a cached record is answered at once");
            };
            object.body().to_chunks().unwrap().concat()
        } else {
            runtime().block_on(read_pending(&t, b"/k")).unwrap().1
        };
        assert!(body == new, "the newer record is served ({cached_reads})");
        assert_eq!(indexed(), 1, "({cached_reads})");
    }
}
