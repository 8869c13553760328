//! The tiered store: the conformance suite, plus demotion, disk hits, hand-over on a bad
//! disk copy, restart and purge.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::conformance::{
    self, any, body_of, expect_hit, expect_miss, pattern, read_all, runtime, store_object,
    write_body, Meta,
};
use crate::{
    Admission, DiskConfig, FillError, Lookup, Object, Store, StoreConfig, StoreStats, TieredConfig,
    TieredStore,
};

/// A tiered store with its disk directory, removed with it.
pub(crate) struct Tiered {
    pub(crate) store: TieredStore<Meta>,
    pub(crate) dir: tempfile::TempDir,
}

/// A small disk taking earned objects only: the tests place objects on it by earning
/// (`demote`); `Admission::Fill` has tests of its own.
pub(crate) fn disk_cfg(dir: &std::path::Path) -> DiskConfig {
    DiskConfig {
        admission: Admission::Earned,
        segment_bytes: 256 << 10,
        write_buffer_bytes: 64 << 10,
        flush_interval: Duration::from_millis(20),
        ..DiskConfig::new(dir, 16 << 20)
    }
}

pub(crate) fn tiered_in(dir: tempfile::TempDir, budget: u64, max: u64, shards: usize) -> Tiered {
    let memory = memory_cfg(budget, max, shards);
    let cfg = pool_reads(TieredConfig::new(memory, vec![disk_cfg(dir.path())]));
    open_loaded(dir, cfg)
}

pub(crate) fn memory_cfg(budget: u64, max: u64, shards: usize) -> StoreConfig {
    StoreConfig {
        budget_bytes: budget,
        max_object_bytes: max,
        shards,
        ..StoreConfig::default()
    }
}

/// Opens `cfg` (its disks in `dir`) and waits until the first disk's index is loaded.
pub(crate) fn open_loaded(dir: tempfile::TempDir, cfg: TieredConfig) -> Tiered {
    let store = TieredStore::open(cfg);
    assert!(store.disks()[0].wait_loaded(Duration::from_secs(10)));
    Tiered { store, dir }
}

pub(crate) fn tiered(budget: u64, max: u64) -> Tiered {
    tiered_in(tempfile::tempdir().unwrap(), budget, max, 1)
}

impl Store<Meta> for Tiered {
    fn lookup(&self, primary: &[u8], select: &dyn Fn(&Object<Meta>) -> bool) -> Lookup<Meta> {
        self.store.lookup(primary, select)
    }
    fn lookup_no_fill(
        &self,
        primary: &[u8],
        select: &dyn Fn(&Object<Meta>) -> bool,
    ) -> Option<Arc<Object<Meta>>> {
        Store::lookup_no_fill(&self.store, primary, select)
    }
    fn refresh(&self, primary: &[u8], select: &dyn Fn(&Object<Meta>) -> bool) -> Lookup<Meta> {
        Store::refresh(&self.store, primary, select)
    }
    fn purge(&self, primary: &[u8]) -> usize {
        Store::purge(&self.store, primary)
    }
    fn remove_variant(&self, primary: &[u8], secondary: &[u8]) -> bool {
        Store::remove_variant(&self.store, primary, secondary)
    }
    fn update(
        &self,
        primary: &[u8],
        old: &Arc<Object<Meta>>,
        head: Bytes,
        meta: Meta,
    ) -> Option<Arc<Object<Meta>>> {
        Store::update(&self.store, primary, old, head, meta)
    }
    fn stats(&self) -> StoreStats {
        self.store.stats()
    }
    fn set_memory_budget(&self, bytes: u64) {
        self.store.set_memory_budget(bytes);
    }
}

mod suite {
    use super::tiered;
    crate::conformance::conformance_suite!(tiered);
}

/// Stores `key`, hits it (so it earns a disk place), then pushes it out of memory.
pub(crate) fn demote(t: &Tiered, key: &[u8], body: &[u8]) {
    conformance::expect_stored(store_object(t, key, b"", body, 5));
    earn_and_push_out(t, key, 0);
}

/// Hits `key`, in memory, so that it earns a disk place, then pushes it out of memory (by
/// fillers of their own for each `round` of one key: the earlier ones may be on disk).
pub(crate) fn earn_and_push_out(t: &Tiered, key: &[u8], round: usize) {
    expect_hit(t.lookup(key, &any));
    conformance::expect_stored(store_object(t, b"/once", b"", &pattern(100, 1), 0));
    // Fillers hit once each reach the main queue too and push the key out of it.
    for i in 0..64 {
        let filler = format!("/filler/{key:?}/{round}/{i}");
        conformance::expect_stored(store_object(
            t,
            filler.as_bytes(),
            b"",
            &pattern(4000, 2),
            0,
        ));
        assert!(t.lookup(filler.as_bytes(), &any).is_hit());
    }
    assert!(
        Store::lookup_no_fill(&t.store, key, &any).is_none(),
        "pushed out of memory"
    );
    t.store.disks()[0].sync(false);
}

pub(crate) async fn read_pending(
    t: &Tiered,
    key: &[u8],
) -> Result<(Bytes, Vec<u8>, Meta), FillError> {
    let Lookup::Pending(reader) = t.lookup(key, &any) else {
        panic!("expected a disk read for {key:?}");
    };
    read_reader(reader).await
}

/// What a disk read's fill gives its reader: head, body and metadata.
pub(crate) async fn read_reader(
    mut reader: crate::FillReader<Meta>,
) -> Result<(Bytes, Vec<u8>, Meta), FillError> {
    let head = reader.head().await?;
    let (body, end) = read_all(&mut reader).await;
    end?;
    Ok((head.object.head().clone(), body, *head.object.meta()))
}

#[test]
fn an_earned_eviction_is_served_from_disk_then_from_memory() {
    let t = tiered(64 << 10, 32 << 10);
    let body = pattern(20_000, 3);
    demote(&t, b"/hot", &body);
    // A one-hit wonder leaves memory without a disk copy.
    assert!(matches!(t.lookup(b"/once", &any), Lookup::Miss(_)));
    let got = runtime()
        .block_on(read_pending(&t, b"/hot"))
        .expect("served from disk");
    assert_eq!(
        (got.0, got.1, got.2),
        (conformance::head("t"), body.clone(), 5)
    );
    let hit = expect_hit(t.lookup(b"/hot", &any));
    assert_eq!(body_of(&hit), body, "promoted back into memory");
    let s = t.stats();
    assert!(s.disk_hits >= 1 && s.disk_writes >= 1, "{s:?}");
}

#[test]
fn a_corrupt_disk_copy_hands_the_fill_to_the_requester() {
    let t = tiered(64 << 10, 32 << 10);
    demote(&t, b"/bad", &pattern(20_000, 4));
    for id in crate::disk::segment_ids(t.dir.path()) {
        let path = t.dir.path().join(format!("{id:08x}.seg"));
        let mut b = std::fs::read(&path).unwrap();
        for byte in b.iter_mut() {
            *byte ^= 0x5a;
        }
        std::fs::write(&path, b).unwrap();
    }
    runtime().block_on(async {
        let Lookup::Pending(mut reader) = t.lookup(b"/bad", &any) else {
            panic!("expected a disk read");
        };
        assert_eq!(reader.head().await.err(), Some(FillError::Released));
        let writer = reader.take_writer().expect("the fill is handed over");
        let fresh = pattern(300, 9);
        conformance::expect_stored(write_body(writer, "origin", 6, b"", &fresh, 100));
        let hit = expect_hit(t.lookup(b"/bad", &any));
        assert_eq!(
            (body_of(&hit), *hit.meta()),
            (fresh, 6),
            "the origin's response is stored"
        );
    });
    assert!(t.stats().disk_checksum_failures >= 1);
}

#[test]
fn disk_copies_survive_a_restart_and_purge_removes_them() {
    let body = pattern(9000, 5);
    let t = tiered_in(tempfile::tempdir().unwrap(), 64 << 10, 32 << 10, 1);
    demote(&t, b"/keep", &body);
    demote(&t, b"/gone", &body);
    t.store.close();
    let Tiered { store, dir } = t;
    drop(store);
    let t = tiered_in(dir, 64 << 10, 32 << 10, 1);
    assert!(t.stats().disk_objects >= 2);
    let got = runtime()
        .block_on(read_pending(&t, b"/keep"))
        .expect("kept across restart");
    assert_eq!(got.1, body);
    assert!(t.purge(b"/gone") >= 1);
    expect_miss(t.lookup(b"/gone", &any));
    t.store.close();
    let Tiered { store, dir } = t;
    drop(store);
    let t = tiered_in(dir, 64 << 10, 32 << 10, 1);
    expect_miss(t.lookup(b"/gone", &any));
}

/// Reopens the store kept in `t`'s directory (after closing and dropping it).
fn reopen(t: Tiered, budget: u64, max: u64) -> Tiered {
    let Tiered { store, dir } = t;
    drop(store);
    tiered_in(dir, budget, max, 1)
}

#[test]
fn a_clean_shutdown_writes_the_hot_set_that_fits_in_memory() {
    let t = tiered(1 << 20, 64 << 10);
    let bodies: Vec<Vec<u8>> = (0..20).map(|i| pattern(9000 + i * 100, i as u8)).collect();
    for (i, body) in bodies.iter().enumerate() {
        let key = format!("/hot/{i}");
        conformance::expect_stored(store_object(&t, key.as_bytes(), b"", body, i as u32));
        if i % 2 == 0 {
            // Hit once: earned. The odd ones are one-hit wonders and stay off the disk.
            expect_hit(t.lookup(key.as_bytes(), &any));
        }
    }
    assert_eq!(t.stats().disk_writes, 0, "nothing was evicted");
    t.store.close();
    assert_eq!(t.stats().disk_writes, 10, "the ten earned objects");
    let t = reopen(t, 1 << 20, 64 << 10);
    let rt = runtime();
    for (i, body) in bodies.iter().enumerate() {
        let key = format!("/hot/{i}");
        if i % 2 == 1 {
            expect_miss(t.lookup(key.as_bytes(), &any));
            continue;
        }
        let got = rt
            .block_on(read_pending(&t, key.as_bytes()))
            .expect("served from disk");
        assert_eq!((&got.1, got.2), (body, i as u32), "{key}");
        assert_eq!(got.0, conformance::head("t"));
    }
    // Served from disk, now in memory with its disk copy: a second close writes nothing.
    for i in (0..20).step_by(2) {
        expect_hit(t.lookup(format!("/hot/{i}").as_bytes(), &any));
    }
    let before = t.stats().disk_writes;
    t.store.close();
    assert_eq!(
        t.stats().disk_writes,
        before,
        "already on disk: not rewritten"
    );
}

#[test]
fn close_is_idempotent_and_lookups_go_on_during_and_after_it() {
    let t = Arc::new(tiered(1 << 20, 64 << 10));
    let body = pattern(5000, 7);
    for i in 0..50 {
        let key = format!("/k/{i}");
        conformance::expect_stored(store_object(&*t, key.as_bytes(), b"", &body, 1));
        expect_hit(t.lookup(key.as_bytes(), &any));
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The looker says when its first pass is done, so that it is running before the close
    // starts (on a loaded machine it once had not looked at all by the time it was stopped).
    let (first_pass, looking) = std::sync::mpsc::channel();
    let looker = {
        let (t, stop) = (Arc::clone(&t), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut hits = 0;
            loop {
                for i in 0..50 {
                    if let Lookup::Hit(o) = t.lookup(format!("/k/{i}").as_bytes(), &any) {
                        assert_eq!(o.body_len(), 5000);
                        hits += 1;
                    }
                }
                let _ = first_pass.send(());
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
            }
            hits
        })
    };
    looking.recv().expect("the looker's first pass");
    let closers: Vec<_> = (0..3)
        .map(|_| {
            let t = Arc::clone(&t);
            std::thread::spawn(move || t.store.close())
        })
        .collect();
    for c in closers {
        c.join().unwrap();
    }
    t.store.close();
    assert_eq!(
        t.stats().disk_writes,
        50,
        "written once, whatever the callers"
    );
    // After close: lookups, fills and purges still work; a purge is still logged.
    conformance::expect_stored(store_object(&*t, b"/late", b"", &body, 2));
    assert_eq!(t.purge(b"/k/3"), 2, "memory and disk");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(looker.join().unwrap() > 0);
    let t = Arc::into_inner(t).expect("threads joined");
    let t = reopen(t, 1 << 20, 64 << 10);
    expect_miss(t.lookup(b"/k/3", &any));
    expect_miss(t.lookup(b"/late", &any));
    let got = runtime().block_on(read_pending(&t, b"/k/4")).unwrap();
    assert_eq!(got.1, body);
}

#[test]
fn close_stops_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let memory = memory_cfg(4 << 20, 64 << 10, 1);
    let mut cfg = pool_reads(TieredConfig::new(memory, vec![disk_cfg(dir.path())]));
    cfg.close_write_limit = Duration::ZERO;
    let store = TieredStore::<Meta>::open(cfg);
    let t = Tiered { store, dir };
    for i in 0..10 {
        let key = format!("/k/{i}");
        conformance::expect_stored(store_object(&t, key.as_bytes(), b"", &pattern(100, 1), 1));
        expect_hit(t.lookup(key.as_bytes(), &any));
    }
    t.store.close();
    assert_eq!(t.stats().disk_writes, 0, "no time to write anything");
}

/// How long a clean shutdown takes to write a hot set: 256 MiB of 64 KiB objects, every one
/// hit once. `cargo test -p sepia-store --release -- --ignored --nocapture close_writes_bench`
#[test]
#[ignore]
fn close_writes_bench() {
    let dir = tempfile::tempdir_in(std::env::var("BENCH_DIR").unwrap_or("/tmp".into())).unwrap();
    let memory = memory_cfg(300 << 20, 1 << 20, 16);
    let disk = DiskConfig::new(dir.path(), 1 << 30);
    let t = open_loaded(dir, pool_reads(TieredConfig::new(memory, vec![disk])));
    let body = pattern(64 << 10, 3);
    for i in 0..4096 {
        let key = format!("/bench/{i}");
        conformance::expect_stored(store_object(&t, key.as_bytes(), b"", &body, 1));
        expect_hit(t.lookup(key.as_bytes(), &any));
    }
    let start = std::time::Instant::now();
    t.store.close();
    let s = t.stats();
    println!(
        "close: {} objects, {} MiB written in {:?}",
        s.disk_writes,
        s.disk_write_bytes >> 20,
        start.elapsed()
    );
}

/// A small tmpfs mounted for one test (root only; `None` where mounting is not allowed).
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

/// Memory keeps serving while the disk fails: `hot` keys are stored and hit.
fn assert_memory_still_serves(t: &Tiered, hot: &[String], body: &[u8]) {
    for key in hot {
        let hit = expect_hit(t.lookup(key.as_bytes(), &any));
        assert_eq!(body_of(&hit), body);
    }
    conformance::expect_stored(store_object(t, b"/after", b"", body, 3));
    expect_hit(t.lookup(b"/after", &any));
}

#[test]
fn a_full_disk_fails_the_disk_and_memory_keeps_serving() {
    let Some(fs) = Tmpfs::mount("2m") else {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    };
    // The disk is configured larger than the file system holds: writes meet ENOSPC.
    let store_dir = tempfile::tempdir_in(fs.0.path()).unwrap();
    let t = tiered_in(store_dir, 1 << 20, 64 << 10, 1);
    let body = pattern(50_000, 6);
    let mut keys = Vec::new();
    for i in 0..200 {
        let key = format!("/k/{i}");
        conformance::expect_stored(store_object(&t, key.as_bytes(), b"", &body, 1));
        expect_hit(t.lookup(key.as_bytes(), &any));
        keys.push(key);
    }
    t.store.disks()[0].sync(false);
    let s = t.stats();
    assert_eq!(s.disks_failed, 1, "{s:?}");
    assert!(s.disk_faults >= 1, "{s:?}");
    assert_eq!(s.disk_objects, 0, "a failed disk's index is emptied");
    // Whatever memory still holds is served; evicted keys are plain misses.
    let in_memory: Vec<String> = keys
        .iter()
        .filter(|k| Store::lookup_no_fill(&t.store, k.as_bytes(), &any).is_some())
        .cloned()
        .collect();
    assert!(!in_memory.is_empty());
    assert_memory_still_serves(&t, &in_memory, &body);
    expect_miss(t.lookup(b"/k/0", &any));
    t.store.close();
    drop(t);
    drop(fs);
}

#[test]
fn an_unreadable_segment_fails_the_disk_at_open_and_memory_keeps_serving() {
    let t = tiered(1 << 20, 64 << 10);
    let body = pattern(20_000, 2);
    let keys: Vec<String> = (0..10).map(|i| format!("/k/{i}")).collect();
    for key in &keys {
        conformance::expect_stored(store_object(&t, key.as_bytes(), b"", &body, 1));
        expect_hit(t.lookup(key.as_bytes(), &any));
    }
    t.store.close();
    let Tiered { store, dir } = t;
    drop(store);
    // A segment replaced by a directory: opening it fails (EISDIR), as an EIO would.
    for id in crate::disk::segment_ids(dir.path()) {
        let path = dir.path().join(format!("{id:08x}.seg"));
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
    }
    let memory = memory_cfg(1 << 20, 64 << 10, 1);
    let store = TieredStore::<Meta>::open(pool_reads(TieredConfig::new(
        memory,
        vec![disk_cfg(dir.path())],
    )));
    store.disks()[0].wait_loaded(Duration::from_secs(10));
    let t = Tiered { store, dir };
    let s = t.stats();
    assert!(s.disks_failed == 1 || s.disk_objects == 0, "{s:?}");
    for key in &keys {
        expect_miss(t.lookup(key.as_bytes(), &any));
    }
    assert_memory_still_serves(&t, &[], &body);
    t.store.close();
}

#[test]
fn a_segment_truncated_under_a_read_fails_the_disk_and_memory_keeps_serving() {
    let t = tiered(64 << 10, 32 << 10);
    let body = pattern(20_000, 4);
    demote(&t, b"/gone", &body);
    conformance::expect_stored(store_object(&t, b"/mem", b"", &body, 1));
    for id in crate::disk::segment_ids(t.dir.path()) {
        let path = t.dir.path().join(format!("{id:08x}.seg"));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
    }
    runtime().block_on(async {
        let Lookup::Pending(mut reader) = t.lookup(b"/gone", &any) else {
            panic!("expected a disk read");
        };
        assert_eq!(reader.head().await.err(), Some(FillError::Released));
        assert!(reader.take_writer().is_some());
    });
    let s = t.stats();
    assert_eq!(s.disks_failed, 1, "{s:?}");
    assert!(s.disk_faults >= 1);
    assert_memory_still_serves(&t, &["/mem".to_string()], &body);
    t.store.close();
}

/// The tests above drive the read threads; this one the worker's own read of a page-cached
/// record (`TieredConfig::cached_reads`).
pub(crate) fn pool_reads(cfg: TieredConfig) -> TieredConfig {
    TieredConfig {
        cached_reads: false,
        ..cfg
    }
}

#[test]
fn a_cached_disk_record_is_a_hit_on_the_looking_up_thread() {
    let dir = tempfile::tempdir().unwrap();
    let memory = memory_cfg(64 << 10, 32 << 10, 1);
    let cfg = TieredConfig::new(memory, vec![disk_cfg(dir.path())]);
    let t = open_loaded(dir, cfg);
    let body = pattern(20_000, 3);
    demote(&t, b"/hot", &body);
    let Lookup::Hit(object) = t.lookup(b"/hot", &any) else {
        panic!("a cached record is answered at once");
    };
    assert!(object.read_from_disk());
    let chunks = object.body().to_chunks().unwrap();
    assert_eq!(chunks.concat(), body);
    // Kept in memory by the usual admission: the next hit is from memory.
    let Lookup::Hit(again) = t.lookup(b"/hot", &any) else {
        panic!("now in memory");
    };
    assert!(!again.read_from_disk());
    assert_eq!(again.body().to_chunks().unwrap().concat(), body);
}
