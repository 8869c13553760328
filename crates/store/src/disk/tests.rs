//! Engine tests: round trips, restarts, torn writes, bit flips, lost files, space, faults.

use std::borrow::Cow;
use std::io;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::engine::{Demoted, DiskEngine};
use super::segment;
use super::DiskConfig;

pub(crate) struct TestObj {
    pub(crate) head: Bytes,
    pub(crate) body: Vec<Bytes>,
}

impl Demoted for TestObj {
    fn secondary(&self) -> &[u8] {
        b""
    }
    fn head(&self) -> &[u8] {
        &self.head
    }
    fn encode_meta(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"meta");
    }
    fn body_chunks(&self) -> io::Result<Cow<'_, [Bytes]>> {
        Ok(Cow::Borrowed(&self.body))
    }
    fn disk_size(&self) -> u64 {
        self.body.iter().map(|b| b.len() as u64).sum::<u64>() + 128
    }
}

/// The body every test writes for `key`: a function of the key, so any body read back can
/// be checked byte for byte without remembering what was written.
pub(crate) fn body_for(key: &str) -> Vec<u8> {
    let seed = super::hash::siphash13((7, 7), key.as_bytes());
    let len = 100 + (seed % 9000) as usize;
    (0..len)
        .map(|i| (seed >> (i % 56)) as u8 ^ i as u8)
        .collect()
}

pub(crate) fn put(e: &DiskEngine, key: &str) {
    assert!(try_put(e, key, body_for(key)), "queued {key}");
}

pub(super) fn try_put(e: &DiskEngine, key: &str, body: Vec<u8>) -> bool {
    let obj = TestObj {
        head: Bytes::from(format!("HEAD {key}")),
        body: body.chunks(3000).map(Bytes::copy_from_slice).collect(),
    };
    e.enqueue_write(Bytes::copy_from_slice(key.as_bytes()), Arc::new(obj))
}

/// `Some(true)`: found and byte-identical; `None`: a miss; panics on a wrong byte.
pub(crate) fn check(e: &DiskEngine, key: &str) -> Option<bool> {
    let recs = e.read_all(key.as_bytes(), u64::MAX);
    let rec = recs.iter().max_by_key(|r| r.seq)?;
    assert_eq!(rec.head, format!("HEAD {key}").as_bytes(), "head of {key}");
    assert_eq!(&rec.meta[..], b"meta");
    let body: Vec<u8> = rec.body.iter().flat_map(|b| b.iter().copied()).collect();
    assert!(
        body == body_for(key),
        "body of {key} differs from what was written"
    );
    Some(true)
}

/// Like `check` for the tiny records of `crashed_log`.
pub(super) fn check_small(e: &DiskEngine, key: &str) -> bool {
    let recs = e.read_all(key.as_bytes(), u64::MAX);
    let Some(rec) = recs.iter().max_by_key(|r| r.seq) else {
        return false;
    };
    let body: Vec<u8> = rec.body.iter().flat_map(|b| b.iter().copied()).collect();
    assert!(rec.head == format!("HEAD {key}").as_bytes() && body == key.as_bytes().repeat(8));
    true
}

pub(crate) fn cfg(dir: &Path) -> DiskConfig {
    DiskConfig {
        segment_bytes: 64 << 10,
        write_buffer_bytes: 16 << 10,
        flush_interval: Duration::from_millis(50),
        ..DiskConfig::new(dir, 4 << 20)
    }
}

pub(super) fn open(c: DiskConfig) -> DiskEngine {
    let e = DiskEngine::open(c).expect("open");
    assert!(e.wait_loaded(Duration::from_secs(10)));
    e
}

pub(super) fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

#[test]
fn round_trip_and_clean_restart_from_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(cfg(dir.path()));
    for i in 0..100 {
        put(&e, &format!("k{i}"));
    }
    e.sync(false);
    for i in 0..100 {
        assert_eq!(check(&e, &format!("k{i}")), Some(true), "k{i}");
    }
    assert_eq!(check(&e, "absent"), None);
    assert_eq!(e.purge(b"k7"), 1);
    assert_eq!(check(&e, "k7"), None);
    e.close();
    drop(e);
    let e = open(cfg(dir.path()));
    assert_eq!(e.stats().objects, 99);
    for i in (0..100).filter(|&i| i != 7) {
        assert_eq!(
            check(&e, &format!("k{i}")),
            Some(true),
            "k{i} after restart"
        );
    }
    assert_eq!(check(&e, "k7"), None, "a purge survives a restart");
}

#[test]
fn a_lookup_at_once_after_the_open_finds_the_checkpoints_objects() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(cfg(dir.path()));
    for i in 0..50 {
        put(&e, &format!("k{i}"));
    }
    e.close();
    drop(e);
    // No `wait_loaded`: the lookup races the writer thread's recovery and waits for the
    // checkpoint to become loadable instead of missing. A generous bound, so that a loaded
    // test machine cannot make it flaky; with 0 the lookup misses.
    let e = DiskEngine::open(DiskConfig {
        publish_wait: Duration::from_secs(10),
        ..cfg(dir.path())
    })
    .expect("open");
    assert!(
        e.maybe_has(e.hash(b"k17")),
        "the first lookup after the open"
    );
    assert_eq!(check(&e, "k17"), Some(true));
    assert!(!e.maybe_has(e.hash(b"absent")));
}

/// While the index loads, the checkpoint's entries are published before the segments they
/// point into are registered (`recover`, step 3): a lookup then opens the segment it reads
/// for itself rather than miss; and a record past the end of a segment recovery has not
/// checked yet (truncated) is a miss, not a fault of the whole disk.
#[test]
fn a_lookup_while_loading_reads_a_segment_recovery_has_not_registered_yet() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(cfg(dir.path()));
    for i in 0..50 {
        put(&e, &format!("k{i}"));
    }
    e.sync(false);
    let loc = e.shared.index.candidates(e.hash(b"k17"))[0];
    let unregister = || {
        e.shared
            .segs
            .write()
            .unwrap()
            .remove(&loc.seg)
            .expect("registered")
    };
    let seg = unregister();
    e.shared.counters.loading.store(true, Relaxed);
    assert_eq!(check(&e, "k17"), Some(true), "opened for the read");
    assert!(
        e.shared.seg(loc.seg).is_none(),
        "and left to recovery to register"
    );
    e.shared.counters.loading.store(false, Relaxed);
    e.shared.segs.write().unwrap().insert(loc.seg, seg);
    assert_eq!(check(&e, "k17"), Some(true));
    e.shared.counters.loading.store(true, Relaxed);
    let path = segment::seg_path(dir.path(), loc.seg);
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(loc.offset).unwrap();
    assert_eq!(check(&e, "k17"), None, "past the end: a miss");
    assert!(!e.failed(), "not a fault while loading");
    e.shared.counters.loading.store(false, Relaxed);
}

#[test]
fn crash_loses_at_most_the_buffer_and_purges_survive() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(cfg(dir.path()));
    for i in 0..200 {
        put(&e, &format!("k{i}"));
    }
    e.sync(false);
    e.purge(b"k3");
    e.sync(true);
    // Purged after the checkpoint that holds it: the tombstone in a later segment must
    // keep the checkpoint's entry out.
    e.purge(b"k5");
    e.sync(false);
    put(&e, "unflushed");
    e.crash();
    let e = open(cfg(dir.path()));
    for i in (0..200).filter(|&i| i != 3 && i != 5) {
        assert_eq!(check(&e, &format!("k{i}")), Some(true), "k{i} was flushed");
    }
    assert_eq!(check(&e, "k3"), None);
    assert_eq!(check(&e, "k5"), None, "purged after the checkpoint");
    // Written after the crash, on top of the recovered log.
    put(&e, "after");
    e.sync(false);
    assert_eq!(check(&e, "after"), Some(true));
}

/// A key written twice keeps one index entry after a crash too: recovery replays the
/// summaries in log order, and a fresh write replaces its key's older entry there as it did
/// when it was written (without a checkpoint, and after one that holds the older record).
#[test]
fn a_key_written_twice_is_indexed_once_after_a_crash() {
    for checkpoint_between in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let e = open(cfg(dir.path()));
        put(&e, "k");
        e.sync(checkpoint_between);
        put(&e, "k");
        put(&e, "other");
        e.sync(false);
        e.crash();
        let e = open(cfg(dir.path()));
        let entries = e.shared.index.candidates(e.hash(b"k")).len();
        assert_eq!(entries, 1, "checkpoint between: {checkpoint_between}");
        assert_eq!(check(&e, "k"), Some(true));
        assert_eq!(check(&e, "other"), Some(true));
    }
}

#[test]
fn space_stays_within_size_and_hot_records_are_reinserted() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path());
    let size = c.size_bytes;
    let e = open(c);
    put(&e, "hot");
    e.sync(false);
    for round in 0..6 {
        assert_eq!(
            check(&e, "hot"),
            Some(true),
            "hot kept by re-insertion, round {round}"
        );
        for i in 0..300 {
            put(&e, &format!("cold{round}-{i}"));
            if i % 50 == 0 {
                e.sync(false);
            }
        }
        e.sync(true);
        assert!(
            dir_bytes(dir.path()) <= size,
            "{} > {size}",
            dir_bytes(dir.path())
        );
    }
    let s = e.stats();
    assert!(s.reinserted >= 1, "{s:?}");
    assert_eq!(check(&e, "cold0-0"), None, "the oldest cold records went");
    assert_eq!(check(&e, "cold5-299"), Some(true));
}

/// Builds a log whose last segment is unsealed (a crash mid-write) and returns its path.
fn crashed_log(dir: &Path, keys: usize) -> std::path::PathBuf {
    let e = open(cfg(dir));
    for i in 0..keys {
        let key = format!("k{i}");
        assert!(try_put(&e, &key, key.as_bytes().repeat(8)));
    }
    e.sync(false);
    e.crash();
    let last = *segment::list(dir).unwrap().last().unwrap();
    segment::seg_path(dir, last)
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn torn_write_at_every_offset_of_the_last_segment_is_never_served() {
    let base = tempfile::tempdir().unwrap();
    let last = crashed_log(base.path(), 4);
    let full = std::fs::metadata(&last).unwrap().len();
    let name = last.file_name().unwrap().to_owned();
    let mut found_at = Vec::new();
    assert!(full < 1024, "a small segment: {full} bytes");
    for cut in 0..=full {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(base.path(), dir.path());
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join(&name))
            .unwrap()
            .set_len(cut)
            .unwrap();
        let e = open(cfg(dir.path()));
        let found = (0..4).filter(|i| check_small(&e, &format!("k{i}"))).count();
        found_at.push(found);
        assert!(dir_bytes(dir.path()) <= cfg(dir.path()).size_bytes);
    }
    assert_eq!(found_at.first(), Some(&0));
    assert_eq!(found_at.last(), Some(&4));
    assert!(
        found_at.windows(2).all(|w| w[0] <= w[1]),
        "a longer prefix never loses records"
    );
}

#[test]
fn random_bit_flips_are_misses_never_wrong_bytes() {
    let base = tempfile::tempdir().unwrap();
    let e = open(cfg(base.path()));
    for i in 0..150 {
        put(&e, &format!("k{i}"));
    }
    e.close();
    drop(e);
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut misses = 0;
    for _trial in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(base.path(), dir.path());
        for id in segment::list(dir.path()).unwrap() {
            let path = segment::seg_path(dir.path(), id);
            let mut b = std::fs::read(&path).unwrap();
            for _ in 0..8 {
                let at = (next() % b.len() as u64) as usize;
                b[at] ^= 1 << (next() % 8);
            }
            std::fs::write(&path, b).unwrap();
        }
        let e = open(cfg(dir.path()));
        misses += (0..150)
            .filter(|i| check(&e, &format!("k{i}")).is_none())
            .count();
    }
    assert!(misses > 0, "the flips must have hit something");
}

#[test]
fn deleted_and_truncated_segments_and_a_damaged_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(cfg(dir.path()));
    for i in 0..150 {
        put(&e, &format!("k{i}"));
    }
    e.close();
    drop(e);
    let ids = segment::list(dir.path()).unwrap();
    assert!(ids.len() >= 3);
    std::fs::remove_file(segment::seg_path(dir.path(), ids[0])).unwrap();
    let p = segment::seg_path(dir.path(), ids[1]);
    let len = std::fs::metadata(&p).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let e = open(cfg(dir.path()));
    let found = (0..150)
        .filter(|i| check(&e, &format!("k{i}")).is_some())
        .count();
    assert!(found > 0 && found < 150, "{found}");
    e.close();
    drop(e);
    let ck = dir.path().join("checkpoint");
    let mut b = std::fs::read(&ck).unwrap();
    let at = b.len() / 2;
    b[at] ^= 0x10;
    std::fs::write(&ck, b).unwrap();
    let e = open(cfg(dir.path()));
    let again = (0..150)
        .filter(|i| check(&e, &format!("k{i}")).is_some())
        .count();
    assert_eq!(
        again, found,
        "without a checkpoint the summaries give the same index"
    );
}

#[test]
fn directory_gone_fails_the_disk_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(cfg(dir.path()));
    put(&e, "a");
    e.sync(false);
    std::fs::remove_dir_all(dir.path()).unwrap();
    for i in 0..50 {
        try_put(&e, &format!("k{i}"), vec![1; 5000]);
    }
    e.sync(true);
    let s = e.stats();
    assert_eq!(s.failed, 1, "{s:?}");
    assert!(s.faults >= 1);
    assert_eq!(check(&e, "a"), None, "a failed disk serves nothing");
    assert!(!e.enqueue_write(
        Bytes::from_static(b"x"),
        Arc::new(TestObj {
            head: Bytes::new(),
            body: vec![]
        })
    ));
}

/// Gives `e`'s disk up as an I/O error in `what` would (`Shared::fault`).
fn inject_fault(e: &DiskEngine, what: &str) {
    e.shared
        .fault(what, &io::Error::other("injected for the test"));
}

/// A failed disk writes nothing more, so a purge made after the fault never reaches it: its
/// records must not be trusted at the next open (`Shared::fault`).
#[test]
fn a_failed_disk_starts_empty_so_a_purge_it_missed_cannot_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(cfg(dir.path()));
    put(&e, "purged");
    put(&e, "kept");
    e.sync(true);
    assert_eq!(check(&e, "purged"), Some(true));
    inject_fault(&e, "write");
    e.purge(b"purged");
    drop(e);
    let e = open(cfg(dir.path()));
    assert_eq!(
        check(&e, "purged"),
        None,
        "a purge the failed disk missed is undone"
    );
    assert_eq!(
        check(&e, "kept"),
        None,
        "the failed disk's records are disowned"
    );
    assert_eq!(e.stats().failed, 0, "a fresh disk");
    put(&e, "new");
    e.sync(false);
    assert_eq!(check(&e, "new"), Some(true));
}

#[test]
fn write_budget_skips_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(DiskConfig {
        write_budget_bytes_per_day: Some(20_000),
        ..cfg(dir.path())
    });
    for i in 0..20 {
        put(&e, &format!("k{i}"));
    }
    e.sync(false);
    let s = e.stats();
    assert!(
        s.budget_skips > 0 && s.write_bytes <= 20_000 + 16 * 1024,
        "{s:?}"
    );
}

#[test]
fn a_second_engine_on_a_directory_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(cfg(dir.path()));
    let e = DiskEngine::open(cfg(dir.path())).expect_err("two engines on one directory");
    assert_eq!(e.kind(), io::ErrorKind::ResourceBusy);
    assert!(e.to_string().contains("in use by another Sepia"), "{e}");
    drop(first);
    drop(open(cfg(dir.path())));
}

/// A binary upgrade: the new process's engine waits for the old one, touching nothing, then
/// loads the index the old one checkpointed at close, with what was queued meanwhile.
#[test]
fn a_waiting_engine_takes_over_once_the_holder_closes() {
    let dir = tempfile::tempdir().unwrap();
    let old = open(cfg(dir.path()));
    put(&old, "before");
    old.sync(false);
    let new = DiskEngine::open_with(cfg(dir.path()), super::LockWait::Wait).expect("open");
    assert_eq!(
        check(&new, "before"),
        None,
        "read before the lock was taken"
    );
    assert!(
        !new.wait_loaded(Duration::from_millis(200)),
        "loaded while held"
    );
    put(&old, "late");
    new.purge(b"before");
    old.close();
    drop(old);
    assert!(new.wait_loaded(Duration::from_secs(10)));
    assert_eq!(check(&new, "late"), Some(true));
    assert_eq!(
        check(&new, "before"),
        None,
        "the purge made while waiting was lost"
    );
}

/// A disk held by `old`, with `kept` written and checkpointed, and `new` waiting for its
/// lock (a binary upgrade's new process).
fn held_and_waiting() -> (tempfile::TempDir, DiskEngine, DiskEngine) {
    let dir = tempfile::tempdir().unwrap();
    let old = open(cfg(dir.path()));
    put(&old, "kept");
    old.sync(true);
    let new = DiskEngine::open_with(cfg(dir.path()), super::LockWait::Wait).expect("open");
    (dir, old, new)
}

/// A waiting engine closed first, or failing first, never touches the holder's disk:
/// `Shared::fault` disowns only a disk this process holds.
#[test]
fn a_waiting_engine_closed_first_or_failing_writes_nothing() {
    for fails in [false, true] {
        let (dir, old, new) = held_and_waiting();
        if fails {
            inject_fault(&new, "lock");
        }
        new.close();
        drop(new);
        old.close();
        drop(old);
        let e = open(cfg(dir.path()));
        assert_eq!(check(&e, "kept"), Some(true), "fails: {fails}");
    }
}

/// A binary upgrade after the old process's disk failed: the new process still starts (it
/// waits for the lock with a key of its own), and takes the disk over empty. Before the
/// fault and after it: the new process opens while the old one fails, too.
#[test]
fn an_upgrade_after_the_old_process_failed_with_the_disk_takes_it_over_empty() {
    for fault_first in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let old = open(cfg(dir.path()));
        put(&old, "before");
        old.sync(true);
        let fault = || {
            inject_fault(&old, "write");
        };
        if fault_first {
            fault();
        }
        let new = DiskEngine::open_with(cfg(dir.path()), super::LockWait::Wait)
            .expect("an upgrade is not refused");
        if !fault_first {
            fault();
        }
        drop(old);
        assert!(new.wait_loaded(Duration::from_secs(10)));
        assert_eq!(
            check(&new, "before"),
            None,
            "the disowned disk starts empty"
        );
        assert_eq!(new.stats().failed, 0);
        put(&new, "after");
        new.sync(true);
        assert_eq!(check(&new, "after"), Some(true));
        drop(new);
        let again = open(cfg(dir.path()));
        assert_eq!(check(&again, "after"), Some(true), "kept under the new key");
    }
}

/// A disk a waiting process took over is its own: a fault after the takeover disowns it.
#[test]
fn a_disk_taken_over_and_then_failing_starts_empty() {
    let (dir, old, new) = held_and_waiting();
    old.close();
    drop(old);
    assert!(new.wait_loaded(Duration::from_secs(10)));
    assert_eq!(
        check(&new, "kept"),
        Some(true),
        "taken over with its records"
    );
    inject_fault(&new, "read");
    drop(new);
    let e = open(cfg(dir.path()));
    assert_eq!(
        check(&e, "kept"),
        None,
        "disowned by the process that held it"
    );
}

/// A waiting process that finds the holder's `meta` file damaged (not missing) is refused,
/// as before: the holder's disk may be healthy, and adopting it would empty it.
#[test]
fn a_waiting_open_with_a_damaged_meta_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let old = open(cfg(dir.path()));
    std::fs::write(dir.path().join("meta"), b"damaged").unwrap();
    let refused = DiskEngine::open_with(cfg(dir.path()), super::LockWait::Wait);
    assert_eq!(
        refused.map(|_| ()).unwrap_err().kind(),
        io::ErrorKind::ResourceBusy
    );
    drop(old);
}

fn put_head(e: &DiskEngine, key: &str, head: &'static str) {
    let obj = TestObj {
        head: Bytes::from_static(head.as_bytes()),
        body: vec![Bytes::from(body_for(key))],
    };
    assert!(e.enqueue_write(Bytes::copy_from_slice(key.as_bytes()), Arc::new(obj)));
}

/// The head of `key`'s newest record (highest sequence number), and how many it has.
fn newest_head(e: &DiskEngine, key: &str) -> (Option<Bytes>, usize) {
    let recs = e.read_all(key.as_bytes(), u64::MAX);
    let newest = recs.iter().max_by_key(|r| r.seq).map(|r| r.head.clone());
    (newest, recs.len())
}

/// A record hit before a newer response of its key was written is not copied forward when
/// its segment is reclaimed, and a copy would keep its sequence number: the newer response
/// stays the one served. (Copies used to get a new number and outrank it.)
#[test]
fn a_reclaimed_hit_record_never_outranks_a_newer_one() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(cfg(dir.path()));
    put_head(&e, "k", "v1");
    e.sync(false);
    let recs = e.read_all(b"k", u64::MAX); // a hit: reclaiming its segment would copy it
    let first_seg = segment::seg_path(dir.path(), recs[0].seg);
    for i in 0..40 {
        put(&e, &format!("between{i}"));
    }
    put_head(&e, "k", "v2");
    e.sync(false);
    // Not read (not hit) until v1's segment is reclaimed.
    let mut i = 0;
    while first_seg.exists() {
        put(&e, &format!("cold{i}"));
        i += 1;
        if i % 5 == 0 {
            e.sync(false);
        }
        assert!(i < 2000, "v1's segment never reclaimed");
    }
    let (head, records) = newest_head(&e, "k");
    assert_eq!(
        head.as_deref(),
        Some(&b"v2"[..]),
        "the newer response is served"
    );
    assert_eq!(records, 1, "the older record was not copied forward");
}

/// A record written again after a purge of its key, then checkpointed, survives a crash:
/// the tombstone before the checkpoint's watermark is in the checkpoint already, and must not
/// keep the newer record out (it did: every tombstone of the watermark's segment counted).
#[test]
fn a_record_written_after_its_purge_survives_a_crash_after_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(cfg(dir.path()));
    put(&e, "k");
    e.sync(false);
    e.purge(b"k");
    put(&e, "k");
    e.sync(true);
    put(&e, "later");
    e.sync(false);
    e.crash();
    let e = open(cfg(dir.path()));
    assert_eq!(check(&e, "k"), Some(true), "written after its purge");
    assert_eq!(check(&e, "later"), Some(true));
}

/// The record whose placement makes the reclaim that takes a hot older record of its key
/// out: the older one is not copied after it (it would outlive it once the newer one,
/// never read, is dropped at its own reclaim).
#[test]
fn a_hot_record_is_not_copied_past_the_newer_record_whose_write_reclaimed_it() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(cfg(dir.path()));
    let capacity = e.shared.counters.capacity.load(Relaxed);
    put_head(&e, "k", "v1");
    e.sync(false);
    let recs = e.read_all(b"k", u64::MAX); // a hit: reclaiming its segment would copy it
    let first_seg = segment::seg_path(dir.path(), recs[0].seg);
    // Fill until 164 KiB more would not fit: a record of 256 KiB then needs a reclaim.
    let mut i = 0;
    while e.stats().bytes + (100 << 10) + (64 << 10) <= capacity {
        put(&e, &format!("cold{i}"));
        i += 1;
        e.sync(false);
    }
    assert!(first_seg.exists(), "nothing reclaimed yet");
    // v2 needs a segment of its own (larger than one): its placement reclaims v1's.
    let obj = TestObj {
        head: Bytes::from_static(b"v2"),
        body: vec![Bytes::from(vec![7u8; 256 << 10])],
    };
    assert!(e.enqueue_write(Bytes::from_static(b"k"), Arc::new(obj)));
    e.sync(false);
    assert!(!first_seg.exists(), "v2's write reclaimed v1's segment");
    let (head, records) = newest_head(&e, "k");
    assert_eq!(head.as_deref(), Some(&b"v2"[..]));
    assert_eq!(records, 1, "v1 was not copied after v2");
}

/// An object whose body lives in a file that cannot be read (the memory tier's
/// `sendfile_dir` gone, say).
struct UnreadableObj;

impl Demoted for UnreadableObj {
    fn secondary(&self) -> &[u8] {
        b""
    }
    fn head(&self) -> &[u8] {
        b"HEAD"
    }
    fn encode_meta(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"meta");
    }
    fn body_chunks(&self) -> io::Result<Cow<'_, [Bytes]>> {
        Err(io::Error::from(io::ErrorKind::NotFound))
    }
    fn disk_size(&self) -> u64 {
        1000
    }
}

/// A body that cannot be read is not the disk's fault: the object is skipped and counted,
/// and the disk goes on taking others.
#[test]
fn an_object_whose_body_cannot_be_read_is_skipped_and_counted_not_a_fault() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(cfg(dir.path()));
    for i in 0..5 {
        let key = Bytes::from(format!("u{i}"));
        assert!(e.enqueue_write(key, Arc::new(UnreadableObj)));
    }
    put(&e, "after");
    e.sync(false);
    let s = e.stats();
    assert_eq!(
        (s.unreadable_bodies, s.faults, s.failed),
        (5, 0, 0),
        "{s:?}"
    );
    assert_eq!(check(&e, "u0"), None);
    assert_eq!(check(&e, "after"), Some(true));
}
