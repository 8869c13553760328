//! The tiered store's large bodies: sent from their segment files once verified, remembered
//! (`SegmentBodies`), never sent when a chunk fails its checksum, and never preferred to a
//! newer response of their key (in memory, or written to disk since).

use std::sync::Arc;

use crate::conformance::{
    self, any, expect_hit, expect_miss, pattern, runtime, store_object, Meta,
};
use crate::tiered_tests::{
    disk_cfg, memory_cfg, open_loaded, pool_reads, read_pending, read_reader, Tiered,
};
use crate::{FillError, Lookup, Object, Store, TieredConfig};

/// A store whose disk bodies of 64 KiB and more are served from their segment files.
fn tiered_segments(dir: tempfile::TempDir) -> Tiered {
    let memory = memory_cfg(1 << 20, 512 << 10, 1);
    let mut cfg = pool_reads(TieredConfig::new(memory, vec![disk_cfg(dir.path())]));
    cfg.segment_body_min = 64 << 10;
    open_loaded(dir, cfg)
}

/// Stores `body` under `key`, hits it, and writes it to disk by a clean shutdown; reopens.
fn large_on_disk(key: &[u8], body: &[u8]) -> Tiered {
    let t = tiered_segments(tempfile::tempdir().unwrap());
    conformance::expect_stored(store_object(&t, key, b"", body, 4));
    expect_hit(t.lookup(key, &any));
    t.store.close();
    let Tiered { store, dir } = t;
    drop(store);
    tiered_segments(dir)
}

fn file_bytes(o: &Object<Meta>) -> (u64, Vec<u8>) {
    let crate::Body::File(f) = o.body() else {
        panic!("a segment-backed body expected")
    };
    (f.offset(), f.read_all().unwrap().to_vec())
}

#[test]
fn a_large_disk_body_is_served_from_its_segment_file() {
    let body = pattern(300_000, 8);
    let t = large_on_disk(b"/big", &body);
    let first = runtime()
        .block_on(read_pending(&t, b"/big"))
        .expect("the first read streams it");
    assert_eq!((first.1, first.2), (body.clone(), 4));
    assert_eq!(t.stats().objects, 0, "not read into memory");
    let hit = expect_hit(t.lookup(b"/big", &any));
    let (offset, bytes) = file_bytes(&hit);
    assert!(offset > 0, "a range of the segment file");
    assert_eq!(bytes, body);
    assert_eq!(hit.body_len(), 300_000);
    assert_eq!(hit.head(), &conformance::head("t"));
    assert_eq!(*hit.meta(), 4);
    let seen = Store::lookup_no_fill(&t.store, b"/big", &any).expect("only-if-cached sees it");
    assert!(Arc::ptr_eq(&seen, &hit));
    // A 304 updates the head it is served with.
    let new = t
        .update(b"/big", &hit, conformance::head("304"), 5)
        .expect("updated");
    let again = expect_hit(t.lookup(b"/big", &any));
    assert!(Arc::ptr_eq(&new, &again));
    assert_eq!(
        (again.head(), *again.meta()),
        (&conformance::head("304"), 5)
    );
    assert_eq!(file_bytes(&again).1, body);
    // A purge forgets it.
    assert!(t.purge(b"/big") >= 1);
    expect_miss(t.lookup(b"/big", &any));
}

#[test]
fn a_reclaimed_segment_keeps_the_bytes_of_a_body_being_sent() {
    let body = pattern(300_000, 9);
    let t = large_on_disk(b"/big", &body);
    runtime().block_on(read_pending(&t, b"/big")).unwrap();
    let sending = expect_hit(t.lookup(b"/big", &any));
    let seg_dir_before = crate::disk::segment_ids(t.dir.path());
    // Earned evictions until every old segment is reclaimed.
    for i in 0..400 {
        let key = format!("/fill/{i}");
        conformance::expect_stored(store_object(
            &t,
            key.as_bytes(),
            b"",
            &pattern(60_000, 1),
            0,
        ));
        expect_hit(t.lookup(key.as_bytes(), &any));
    }
    t.store.disks()[0].sync(false);
    let after = crate::disk::segment_ids(t.dir.path());
    assert!(
        seg_dir_before.iter().all(|id| !after.contains(id)),
        "{seg_dir_before:?} vs {after:?}"
    );
    assert!(
        !matches!(t.lookup(b"/big", &any), Lookup::Hit(_)),
        "forgotten with its segment"
    );
    assert_eq!(
        file_bytes(&sending).1,
        body,
        "the unlinked file still holds it"
    );
}

#[test]
fn a_large_body_failing_its_checksum_is_never_sent() {
    let body = pattern(300_000, 10);
    let t = large_on_disk(b"/big", &body);
    let ids = crate::disk::segment_ids(t.dir.path());
    let path = t.dir.path().join(format!("{:08x}.seg", ids[0]));
    let mut b = std::fs::read(&path).unwrap();
    let at = b
        .windows(64)
        .position(|w| w == &body[200_000..200_064])
        .unwrap();
    b[at] ^= 1;
    std::fs::write(&path, b).unwrap();
    runtime().block_on(async {
        let Lookup::Pending(mut reader) = t.lookup(b"/big", &any) else {
            panic!("expected a disk read");
        };
        assert_eq!(reader.head().await.err(), Some(FillError::Released));
        assert!(reader.take_writer().is_some(), "handed to the origin");
    });
    assert!(t.stats().disk_checksum_failures >= 1);
    expect_miss(t.lookup(b"/big", &any));
}

#[test]
fn memory_answers_before_the_remembered_segment_bodies() {
    let body = pattern(300_000, 10);
    let t = large_on_disk(b"/big", &body);
    runtime().block_on(read_pending(&t, b"/big")).unwrap();
    expect_hit(t.lookup(b"/big", &any));
    let disk_hits = t.stats().disk_hits;
    // Another key in memory while a segment body is remembered: a memory hit.
    conformance::expect_stored(store_object(&t, b"/small", b"", &pattern(1000, 3), 7));
    let small = expect_hit(t.lookup(b"/small", &any));
    assert!(matches!(small.body(), crate::Body::Chunks(_)));
    assert_eq!(t.stats().disk_hits, disk_hits, "not a disk hit");
    // A refresh of the large key committed in memory is newer than its segment body.
    let writer = expect_miss(Store::refresh(&t.store, b"/big", &any));
    let fresh = pattern(2000, 11);
    conformance::expect_stored(conformance::write_body(writer, "t", 6, b"", &fresh, 1000));
    let hit = expect_hit(t.lookup(b"/big", &any));
    assert_eq!(*hit.meta(), 6);
    assert!(matches!(hit.body(), crate::Body::Chunks(_)));
    assert_eq!(
        t.stats().disk_hits,
        disk_hits,
        "memory's variant, not the segment's"
    );
    let seen = Store::lookup_no_fill(&t.store, b"/big", &any).expect("in memory");
    assert!(Arc::ptr_eq(&seen, &hit));
}

/// A store of 1 MiB of memory over a disk in `dir`, bodies from 64 KiB sent from their
/// segments, at most `remembered` of them remembered (see `SegmentBodies`).
fn open_for_segment_bodies(dir: tempfile::TempDir, remembered: usize) -> Tiered {
    let memory = memory_cfg(1 << 20, 512 << 10, 1);
    let cfg = TieredConfig {
        segment_body_min: 64 << 10,
        max_segment_bodies: remembered,
        ..TieredConfig::new(memory, vec![disk_cfg(dir.path())])
    };
    open_loaded(dir, cfg)
}

/// Closes `t` (writing what memory earned, checkpointing) and opens its disk again.
fn reopen_for_segment_bodies(t: Tiered, remembered: usize) -> Tiered {
    t.store.close();
    let Tiered { store, dir } = t;
    drop(store);
    open_for_segment_bodies(dir, remembered)
}

/// A store as [`open_for_segment_bodies`] that holds `body` under "/big" on disk only
/// (stored, hit, written at the close, and the store opened again).
fn big_body_on_disk(body: &[u8], remembered: usize) -> Tiered {
    let t = open_for_segment_bodies(tempfile::tempdir().unwrap(), remembered);
    conformance::expect_stored(store_object(&t, b"/big", b"", body, 4));
    expect_hit(t.lookup(b"/big", &any));
    reopen_for_segment_bodies(t, remembered)
}

#[test]
fn a_verified_large_body_is_sent_from_its_segment_after_reading_only_its_prefix() {
    // Nothing remembered: every hit after the first finds the body by the index.
    let body = pattern(300_000, 12);
    let t = big_body_on_disk(&body, 0);
    // Not verified by this process yet: a read thread checks every chunk first.
    let first = runtime().block_on(read_pending(&t, b"/big")).unwrap();
    assert_eq!(first.1, body);
    for _ in 0..2 {
        let Lookup::Hit(hit) = t.lookup(b"/big", &any) else {
            panic!("a verified body in the page cache is a hit at once");
        };
        assert!(hit.read_from_disk());
        assert_eq!((hit.head(), *hit.meta()), (&conformance::head("t"), 4));
        let (offset, bytes) = file_bytes(&hit);
        assert!(offset > 0, "a range of the segment file");
        assert_eq!(bytes, body);
    }
    assert_eq!(t.stats().objects, 0, "not read into memory");
    // Out of the page cache (where the file system lets it go: not on tmpfs), a `sendfile`
    // would wait for the device on the worker: the body goes through a read thread.
    let evicted = evict_segments(t.dir.path(), &body);
    if evicted {
        let again = runtime().block_on(read_pending(&t, b"/big")).unwrap();
        assert_eq!(again.1, body);
    }
    // A restart forgets what was verified: the first read checks the chunks again.
    let t = reopen_for_segment_bodies(t, 0);
    assert!(matches!(t.lookup(b"/big", &any), Lookup::Pending(_)));
}

#[test]
fn a_remembered_segment_body_out_of_the_page_cache_is_not_sent_by_a_lookup_that_cannot_read() {
    let body = pattern(300_000, 13);
    let t = big_body_on_disk(&body, 4096);
    // Read back once (past the page cache): remembered as served from its segment.
    let first = runtime().block_on(read_pending(&t, b"/big")).unwrap();
    assert_eq!(first.1, body);
    if !evict_segments(t.dir.path(), &body) {
        return; // a file system that keeps its pages (tmpfs): nothing to check
    }
    // A range, HEAD or `only-if-cached` lookup would `sendfile` on the worker, waiting
    // for the device: it misses instead.
    assert!(t.lookup_no_fill(b"/big", &any).is_none());
    // A full lookup reads it on a read thread: past the page cache the first time it is
    // found evicted (a record read twice is not hot yet: `disk/reread.rs`)...
    let again = runtime().block_on(read_pending(&t, b"/big")).unwrap();
    assert_eq!(again.1, body);
    assert!(t.lookup_no_fill(b"/big", &any).is_none());
    // ...and through it the second time, so that its later hits are sent from it.
    let third = runtime().block_on(read_pending(&t, b"/big")).unwrap();
    assert_eq!(third.1, body);
    let found = t
        .lookup_no_fill(b"/big", &any)
        .expect("in the page cache now");
    assert_eq!(file_bytes(&found).1, body);
}

/// Drops the disk's segment files from the page cache; true when `body` left it (it stays
/// on file systems that ignore the advice, such as tmpfs).
fn evict_segments(dir: &std::path::Path, body: &[u8]) -> bool {
    use nix::fcntl::{posix_fadvise, PosixFadviseAdvice};
    let mut gone = false;
    for id in crate::disk::segment_ids(dir) {
        let path = dir.join(format!("{id:08x}.seg"));
        let file = std::fs::File::open(path).unwrap();
        file.sync_all().unwrap();
        posix_fadvise(&file, 0, 0, PosixFadviseAdvice::POSIX_FADV_DONTNEED).unwrap();
        let len = file.metadata().unwrap().len();
        gone |= !crate::disk::resident(&file, 0, len.min(body.len() as u64));
    }
    gone
}

/// A remembered segment body is not served once the index holds a newer record of its key
/// (refreshed, earned in memory, pushed out to disk), even when a lookup while the newer
/// one was still being written remembered the old body again: the index decides. (The
/// remembered body used to be served before the index was asked.)
#[test]
fn a_newer_response_written_to_disk_replaces_a_remembered_segment_body() {
    let old = pattern(300_000, 21);
    let t = big_body_on_disk(&old, 4096);
    let first = runtime().block_on(read_pending(&t, b"/big")).unwrap();
    assert_eq!(first.1, old);
    assert!(t.lookup_no_fill(b"/big", &any).is_some(), "remembered");
    let new = pattern(300_000, 22);
    let writer = expect_miss(Store::refresh(&t.store, b"/big", &any));
    conformance::expect_stored(conformance::write_body(writer, "t", 6, b"", &new, 1000));
    expect_hit(t.lookup(b"/big", &any));
    // Hit fillers (2.4 MB) push it out of memory's 1 MiB; it goes to disk, earned.
    for i in 0..300 {
        let filler = format!("/filler/{i}");
        let body = pattern(8000, 2);
        conformance::expect_stored(store_object(&t, filler.as_bytes(), b"", &body, 0));
        expect_hit(t.lookup(filler.as_bytes(), &any));
    }
    // Perhaps before the new record is indexed: then the old one is read and remembered.
    match t.lookup(b"/big", &any) {
        Lookup::Pending(reader) => drop(runtime().block_on(read_reader(reader))),
        other => drop(other),
    }
    t.store.disks()[0].sync(false);
    if let Some(seen) = t.lookup_no_fill(b"/big", &any) {
        assert!(
            file_bytes(&seen).1 == new,
            "never the old body once the new one is indexed"
        );
    }
    let served = match t.lookup(b"/big", &any) {
        Lookup::Hit(object) => file_bytes(&object).1,
        Lookup::Pending(reader) => runtime().block_on(read_reader(reader)).unwrap().1,
        Lookup::Miss(_) => panic!("the new response is on disk"),
    };
    assert!(served == new, "the newer response is served");
}
