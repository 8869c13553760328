//! The tiered store reading disk records through its io_uring (`cache.disk_io =
//! "io_uring"`): small records through the page cache, a large record's first read past it
//! (whole blocks, which may run past the end of the segment file), the same bytes as the
//! read threads give.

use std::time::Duration;

use crate::conformance::{self, any, expect_hit, pattern, runtime, store_object};
use crate::tiered_tests::{demote, disk_cfg, read_pending, Tiered};
use crate::{Store, StoreConfig, TieredConfig, TieredStore};

/// A store over a disk in `dir` whose reads go to the ring (none by the worker itself);
/// `None` where this kernel refuses io_uring (then there is nothing to test here).
fn ring_store(dir: tempfile::TempDir, budget: u64, segment_from: u64) -> Option<Tiered> {
    let memory = StoreConfig {
        budget_bytes: budget,
        max_object_bytes: budget / 2,
        shards: 1,
        ..StoreConfig::default()
    };
    let cfg = TieredConfig {
        io_uring: true,
        cached_reads: false,
        segment_body_min: segment_from,
        ..TieredConfig::new(memory, vec![disk_cfg(dir.path())])
    };
    let store = TieredStore::open(cfg);
    assert!(store.disks()[0].wait_loaded(Duration::from_secs(10)));
    store.ring_reads()?;
    Some(Tiered { store, dir })
}

/// A disk directory where `O_DIRECT` works if anywhere here (not tmpfs).
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/var/tmp")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

#[test]
fn a_small_record_is_read_by_the_ring() {
    let Some(t) = ring_store(disk_dir(), 64 << 10, 1 << 20) else {
        return;
    };
    let body = pattern(20_000, 6);
    demote(&t, b"/small", &body);
    let got = runtime().block_on(read_pending(&t, b"/small")).unwrap();
    assert_eq!((got.1, got.2), (body.clone(), 5));
    assert_eq!(t.store.ring_reads(), Some(1));
    // Promoted by the usual admission: the next hit is from memory.
    let again = expect_hit(t.lookup(b"/small", &any));
    assert_eq!(again.body().to_chunks().unwrap().concat(), body);
}

/// Keys and their bodies.
type Bodies = [(&'static [u8], Vec<u8>); 2];

/// Two large records written into one segment, the store reopened (nothing verified).
fn two_large_reopened(len: usize) -> Option<(Tiered, Bodies)> {
    let bodies = [
        (&b"/a"[..], pattern(len, 7)),
        (&b"/b"[..], pattern(len + 5, 8)),
    ];
    let t = ring_store(disk_dir(), 1 << 20, 64 << 10)?;
    for (key, body) in &bodies {
        conformance::expect_stored(store_object(&t, key, b"", body, 4));
        expect_hit(t.lookup(key, &any));
    }
    t.store.close();
    let Tiered { store, dir } = t;
    drop(store);
    Some((ring_store(dir, 1 << 20, 64 << 10).unwrap(), bodies))
}

#[test]
fn large_first_reads_by_the_ring_past_the_page_cache_give_every_byte() {
    // The first read of a segment opens its `O_DIRECT` descriptor on a read thread, the
    // second goes to the ring. Read in both orders, so that the ring reads the record that
    // ends its segment (but for the summary and footer), at a different offset within a
    // block for each length: the direct read's whole blocks run past the end of the file.
    for len in [100_000, 100_001, 101_017, 103_500] {
        for order in [[0, 1], [1, 0]] {
            let Some((t, bodies)) = two_large_reopened(len) else {
                return;
            };
            for (i, &which) in order.iter().enumerate() {
                let (key, body) = &bodies[which];
                let got = runtime().block_on(read_pending(&t, key)).unwrap();
                assert!(&got.1 == body, "{len}: the bytes stored");
                let by_ring = t.store.ring_reads();
                assert_eq!(by_ring, Some(i as u64), "{len}: the ring reads the second");
                // Remembered, and sent from the segment file from now on.
                let hit = expect_hit(t.lookup(key, &any));
                let crate::Body::File(f) = hit.body() else {
                    panic!("a segment-backed body expected")
                };
                assert!(f.read_all().unwrap() == body);
            }
            let s = t.stats();
            assert_eq!((s.disks_failed, s.disk_checksum_failures), (0, 0), "{len}");
        }
    }
}
