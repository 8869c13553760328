//! Engine tests of space: the room kept for checkpoints as records change size, the size
//! lowered between starts, records re-written by reclaims, and keys homed on another disk.

use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::engine::{DiskEngine, IsHome};
use super::tests::{cfg, check, check_small, dir_bytes, open, put, try_put};
use super::{DiskConfig, LockWait};

/// Everything the disk keeps in `dir` takes at most `size` bytes.
fn assert_within(dir: &Path, size: u64) {
    let used = dir_bytes(dir);
    assert!(used <= size, "{used} > {size}");
}

/// Writes `n` records of a few dozen bytes (keys `t0`...), checked by `check_small`.
fn put_tiny(e: &DiskEngine, n: usize) {
    for i in 0..n {
        let key = format!("t{i}");
        assert!(try_put(e, &key, key.as_bytes().repeat(8)), "queued {key}");
        if i % 2_000 == 0 {
            e.sync(false);
        }
    }
}

/// Writes records of 32 KiB bodies (keys `L<i>` for `i` in `range`), and waits for them.
fn put_large(e: &DiskEngine, range: std::ops::Range<usize>) {
    for i in range {
        assert!(try_put(e, &format!("L{i}"), vec![i as u8; 32 << 10]));
        if i % 10 == 0 {
            e.sync(false);
        }
    }
    e.sync(false);
}

/// A disk of tiny records needs a checkpoint far larger than a fixed share of its size:
/// the reserve follows the records' average size, so the checkpoint is written (the
/// segments give way) and the directory still stays within the size.
#[test]
fn a_disk_of_tiny_records_keeps_its_checkpoint_within_the_size() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path());
    let size = c.size_bytes;
    let e = open(c);
    put_tiny(&e, 40_000);
    e.sync(false);
    let before = e.stats().checkpoints;
    e.sync(true);
    let s = e.stats();
    assert_eq!(
        s.checkpoints,
        before + 1,
        "the checkpoint was written: {s:?}"
    );
    let checkpoint = std::fs::metadata(dir.path().join("checkpoint"))
        .unwrap()
        .len();
    assert!(
        checkpoint > size / 32,
        "{checkpoint}: larger than the old fixed reserve's half"
    );
    assert_within(dir.path(), size);
    drop(e);
    let e = open(cfg(dir.path()));
    assert!(
        check_small(&e, "t39999"),
        "the newest record survives the restart"
    );
    assert_within(dir.path(), size);
}

/// Records of 16 KiB: the checkpoint's reserve is a fraction of a percent, so the segments
/// take nearly the whole size (a fixed `size / 32` kept 3 % of it unused).
#[test]
fn a_disk_of_16_kib_records_fills_nearly_its_whole_size() {
    let dir = tempfile::tempdir().unwrap();
    let c = DiskConfig {
        size_bytes: 16 << 20,
        ..cfg(dir.path())
    };
    let size = c.size_bytes;
    let e = open(c);
    let mut most = 0;
    for i in 0..1_200 {
        assert!(try_put(&e, &format!("m{i}"), vec![i as u8; 16 << 10]));
        if i % 20 == 0 {
            e.sync(false);
            most = most.max(e.stats().bytes);
        }
    }
    e.sync(true);
    assert!(most as f64 >= size as f64 * 0.985, "{most} of {size}");
    assert_within(dir.path(), size);
}

/// Tiny records, a checkpoint of them, then large records: the checkpoint on disk is far
/// larger than the large records' own would be, and is kept room for until the next one
/// replaces it. The directory stays within the size and the next checkpoint is written.
#[test]
fn a_shift_from_tiny_to_large_records_keeps_room_for_the_old_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path());
    let size = c.size_bytes;
    let e = open(c);
    put_tiny(&e, 40_000);
    e.sync(true);
    let before = e.stats().checkpoints;
    for round in 0..40 {
        put_large(&e, round * 10..round * 10 + 10);
        assert_within(dir.path(), size);
    }
    e.sync(true);
    assert_eq!(
        e.stats().checkpoints,
        before + 1,
        "the next checkpoint fits"
    );
    assert_within(dir.path(), size);
}

/// A record a little smaller than the disk's space for segments while it holds large
/// records (but larger than an empty disk's, with its 4 KiB guess): it is skipped, and the
/// disk does not fail.
#[test]
fn a_record_that_fits_only_beside_large_records_is_skipped_not_a_fault() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(cfg(dir.path()));
    put_large(&e, 0..200);
    let capacity = e.shared.counters.capacity.load(Relaxed);
    let empty = e.shared.cfg.initial_capacity();
    assert!(empty < capacity, "{empty} < {capacity}");
    put(&e, "before");
    e.sync(false);
    let held = e.stats().objects;
    let body = ((empty + capacity) / 2 - 4096) as usize;
    assert!(try_put(&e, "huge", vec![7u8; body]));
    // Larger than the disk's space, even: skipped too.
    assert!(try_put(
        &e,
        "huger",
        vec![7u8; capacity as usize + (64 << 10)]
    ));
    e.sync(false);
    let s = e.stats();
    assert_eq!((s.faults, s.failed), (0, 0), "{s:?}");
    assert_eq!(s.objects, held, "nothing reclaimed for them: {s:?}");
    assert_eq!(check(&e, "before"), Some(true));
}

/// A disk reopened with a smaller size gives the difference back at the open, before any
/// write.
#[test]
fn a_disk_reopened_smaller_reclaims_at_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(cfg(dir.path()));
    for i in 0..750 {
        put(&e, &format!("k{i}"));
        if i % 50 == 0 {
            e.sync(false);
        }
    }
    e.sync(true);
    assert!(dir_bytes(dir.path()) > 3 << 20, "{}", dir_bytes(dir.path()));
    drop(e);
    let smaller = DiskConfig {
        size_bytes: 2 << 20,
        ..cfg(dir.path())
    };
    let e = open(smaller);
    assert_within(dir.path(), 2 << 20);
    assert_eq!(check(&e, "k749"), Some(true), "the newest records stay");
    assert_eq!(check(&e, "k0"), None, "the oldest went");
}

/// A disk reopened far smaller than its checkpoint of tiny records: the checkpoint goes
/// (its index is loaded) and a new one is written, the directory within the new size, and
/// the disk takes records again.
#[test]
fn a_disk_reopened_smaller_than_its_checkpoint_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(cfg(dir.path()));
    put_tiny(&e, 40_000);
    e.sync(true);
    drop(e);
    let checkpoint = std::fs::metadata(dir.path().join("checkpoint"))
        .unwrap()
        .len();
    let size = 256 << 10;
    assert!(checkpoint > size / 2, "{checkpoint}");
    let e = open(DiskConfig {
        size_bytes: size,
        ..cfg(dir.path())
    });
    assert_within(dir.path(), size);
    assert_eq!(
        e.stats().checkpoints,
        1,
        "a new checkpoint replaced the old"
    );
    for i in 0..20 {
        put(&e, &format!("k{i}"));
    }
    e.sync(true);
    assert_eq!(check(&e, "k19"), Some(true));
    assert_eq!(e.stats().checkpoints, 2);
    assert_within(dir.path(), size);
}

/// A hot record that the open's reclaim re-writes is indexed before the disk counts as
/// loaded: a purge right after the open finds it on a disk that is not the key's home.
#[test]
fn a_record_rewritten_at_the_open_is_indexed_before_purges_look() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(cfg(dir.path()));
    put(&e, "hot");
    e.sync(false);
    assert_eq!(check(&e, "hot"), Some(true));
    for i in 0..750 {
        put(&e, &format!("k{i}"));
        if i % 50 == 0 {
            e.sync(false);
        }
    }
    e.sync(true);
    drop(e);
    let e = open(DiskConfig {
        size_bytes: 2 << 20,
        flush_interval: Duration::from_secs(5),
        ..cfg(dir.path())
    });
    assert!(e.stats().reinserted >= 1, "hot re-written at the open");
    assert_eq!(e.purge_if_held(b"hot"), 1);
    e.sync(false);
    assert_eq!(check(&e, "hot"), None, "purged");
}

/// From large records to tiny ones: the room kept for the next checkpoint follows them
/// only as segments open, so a checkpoint may outgrow it; the oldest segments then give
/// way and it is written, not skipped.
#[test]
fn a_shift_from_large_to_tiny_records_does_not_skip_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let c = DiskConfig {
        segment_bytes: 2 << 20,
        ..cfg(dir.path())
    };
    let size = 16 << 20;
    let e = open(DiskConfig {
        size_bytes: size,
        ..c
    });
    put_large(&e, 0..560);
    e.sync(true);
    for round in 0..40 {
        for i in 0..300 {
            let key = format!("t{round}_{i}");
            assert!(try_put(&e, &key, key.as_bytes().to_vec()));
        }
        e.sync(false);
        let before = e.stats().checkpoints;
        e.sync(true);
        assert_eq!(e.stats().checkpoints, before + 1, "round {round}");
        assert_within(dir.path(), size);
    }
}

/// The records a checkpoint's reclaim re-writes are in the index it dumps: a kill -9 after
/// it keeps them (the checkpoint's mark says every record before it is in the index).
#[test]
fn a_record_rewritten_to_make_room_for_a_checkpoint_survives_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let c = DiskConfig {
        segment_bytes: 2 << 20,
        size_bytes: 16 << 20,
        ..cfg(dir.path())
    };
    let e = open(c.clone());
    put(&e, "hot"); // small: a re-write of it stays in the buffer
    e.sync(false);
    assert_eq!(check(&e, "hot"), Some(true)); // hit: re-written when its segment goes
    put_large(&e, 0..470);
    assert_eq!(
        e.stats().reinserted,
        0,
        "not reclaimed by the large records"
    );
    e.sync(true);
    let rewritten = (0..60).any(|round| {
        for i in 0..300 {
            let key = format!("t{round}_{i}");
            assert!(try_put(&e, &key, key.as_bytes().to_vec()));
        }
        e.sync(false);
        e.sync(true);
        e.stats().reinserted > 0
    });
    assert!(rewritten, "a checkpoint's reclaim re-wrote the hot record");
    // The segment it went to is sealed (recovery then trusts the checkpoint for the records
    // before its mark), then a kill.
    put_large(&e, 1000..1080);
    e.crash();
    let e = open(c);
    assert_eq!(check(&e, "hot"), Some(true), "kept");
}

/// Among several disks, a hot record of a key another disk is home to is not re-written at
/// its segment's reclaim; one of a key this disk is home to is.
#[test]
fn a_hot_record_of_a_key_homed_elsewhere_is_not_rewritten_at_reclaim() {
    let dir = tempfile::tempdir().unwrap();
    let is_home: IsHome = Box::new(|primary| primary != b"elsewhere");
    let e = DiskEngine::open_homed(cfg(dir.path()), LockWait::Fail, Some(is_home));
    let e = e.expect("open");
    assert!(e.wait_loaded(Duration::from_secs(10)));
    put(&e, "elsewhere");
    put(&e, "here");
    e.sync(false);
    assert_eq!(check(&e, "elsewhere"), Some(true)); // both hit: hot
    assert_eq!(check(&e, "here"), Some(true));
    for i in 0..900 {
        put(&e, &format!("cold{i}"));
        if i % 50 == 0 {
            e.sync(false);
        }
    }
    e.sync(false);
    assert_eq!(
        check(&e, "cold0"),
        None,
        "the first segments were reclaimed"
    );
    assert_eq!(check(&e, "here"), Some(true), "re-written");
    assert_eq!(check(&e, "elsewhere"), None, "not re-written");
}
