//! One disk: shared state, the write queue, and the read path.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use smallvec::SmallVec;

use super::config::{Admission, Counters, DiskConfig, DiskStats};
use super::hash::siphash13;
use super::index::{Index, Loc};
use super::lock::{Busy, DirLock, LockWait};
use super::record_read::{decode_record, read_record, DiskRecord, ReadError, CACHED_READ_MAX};
use super::segment::SegFile;

/// What the engine needs from an object it writes (implemented for `Object<M: Persist>`).
pub(crate) trait Demoted: Send + Sync {
    fn secondary(&self) -> &[u8];
    fn head(&self) -> &[u8];
    fn encode_meta(&self, out: &mut Vec<u8>);
    fn body_chunks(&self) -> io::Result<Cow<'_, [Bytes]>>;
    /// Approximate bytes it will take (for the queue bound and the write budget).
    fn disk_size(&self) -> u64;
    /// Called once its record is placed in the log (written within `flush_interval`), with
    /// the disk's hash of its key.
    fn written(&self, _hash: u64) {}
}

/// Why an object leaving memory is written (`tiered.rs`'s eviction hook).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// It earned its place (hit while in memory), or a clean stop writes it: always, a newer
    /// version of a key already on disk included.
    Earned,
    /// It left memory unearned a second time within the disk ghost's horizon: unless its
    /// key already has a record (written, or placed and about to be indexed).
    SeenAgain,
    /// Unearned, into room the disk has never used ([`Admission::Fill`]): unless its key
    /// already has a record, and only without reclaiming.
    Fill,
}

pub(crate) enum Cmd {
    Write {
        hash: u64,
        primary: Bytes,
        object: Arc<dyn Demoted>,
        size: u64,
        admit: Admit,
    },
    Tombstone {
        hash: u64,
        primary: Bytes,
    },
    /// Flush (and with `true`, checkpoint), then answer.
    Sync(bool, std::sync::mpsc::SyncSender<()>),
    /// Flush, seal the segment being written, checkpoint, then answer (`close`).
    Close(std::sync::mpsc::SyncSender<()>),
    Shutdown,
    /// Stop at once, writing nothing more (tests: what a kill -9 leaves).
    #[cfg(test)]
    Crash,
}

/// How long opening a disk tries a lock held by someone else before it is "in use". A
/// process being forked holds a copy of its parent's descriptors until it execs (close-on-exec
/// acts only then): a process that spawns a child while letting go of a disk (tests do, and an
/// authentication helper may start at any time) holds the lock a little longer.
const LOCK_GRACE: Duration = Duration::from_millis(500);

/// The directory's lock as the writer thread gets it: taken, or held by another process
/// (a binary upgrade's old one) and to be waited for before anything is read or written.
pub(crate) enum Locking {
    Held(DirLock),
    Waiting(Busy),
}

#[derive(Default)]
pub(crate) struct Queue {
    pub(crate) cmds: VecDeque<Cmd>,
    pub(crate) write_bytes: u64,
    /// Tombstones queued but not yet taken by the writer, by key hash: the writer must not
    /// index an older record of such a key (see `Writer::apply_pending`).
    pub(crate) tombstones: HashMap<u64, usize>,
}

/// Whether a disk is a key's home, by its primary key, among several
/// (`DiskEngine::open_homed`).
pub(crate) type IsHome = Box<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// State shared by the engine handle, the writer thread and readers.
pub(crate) struct Shared {
    pub(crate) cfg: DiskConfig,
    pub(crate) key: (u64, u64),
    /// This process holds the directory's lock: from the open, or once a waiting writer
    /// took it over (`writer::run`; it stays set after the writer lets go at the end, when no
    /// fault can follow). Only then does a fault disown the disk.
    pub(crate) owns_dir: AtomicBool,
    pub(crate) index: Index,
    pub(crate) segs: RwLock<HashMap<u32, Arc<SegFile>>>,
    pub(crate) queue: Mutex<Queue>,
    pub(crate) wake: Condvar,
    pub(crate) counters: Counters,
    /// Keys purged while the index loads, so the loader does not bring them back.
    pub(crate) purged_while_loading: Mutex<HashSet<u64>>,
    /// Index shards in place (one bit each): all but while a checkpoint loads, and none
    /// from the open until recovery knows whether there is a checkpoint (see
    /// `DiskEngine::maybe_has`).
    pub(crate) shards_loaded: AtomicU64,
    /// Until when a lookup waits for a checkpoint to become loadable (`Shared::shard_source`)
    /// rather than miss: the open plus `DiskConfig::publish_wait`.
    pub(crate) publish_by: std::time::Instant,
    /// Shards the loader or a lookup took on while a checkpoint loads.
    pub(crate) shards_claimed: AtomicU64,
    /// The checkpoint being loaded, for lookups whose shard is not in yet.
    pub(crate) shard_source: Mutex<Option<Arc<super::recover::ShardSource>>>,
    /// Set by `close`: demotions are refused from then on.
    pub(crate) closed: std::sync::atomic::AtomicBool,
    /// See `DiskEngine::on_reclaim`.
    #[allow(clippy::type_complexity)]
    pub(crate) on_reclaim: RwLock<Option<Box<dyn Fn(u32) + Send + Sync>>>,
    /// See `DiskEngine::open_homed`.
    pub(crate) is_home: Option<IsHome>,
    /// Large records re-read past the page cache (see `reread.rs`).
    pub(crate) rereads: super::reread::Rereads,
}

impl Shared {
    pub(crate) fn lock_queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn failed(&self) -> bool {
        self.counters.failed.load(Relaxed)
    }

    /// Whether this disk is `primary`'s home (see `DiskEngine::open_homed`).
    pub(crate) fn is_home(&self, primary: &[u8]) -> bool {
        self.is_home.as_ref().is_none_or(|is_home| is_home(primary))
    }

    pub(crate) fn lock_shard_source(
        &self,
    ) -> MutexGuard<'_, Option<Arc<super::recover::ShardSource>>> {
        self.shard_source
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives the disk up: logged once, counted, the index emptied so every lookup misses,
    /// and its records disowned for the next start. A failed disk writes nothing more, so
    /// the purges and invalidations from now on (RFC 9111 §4.4) never reach it: were it
    /// trusted at the next open, a response purged meanwhile would be served again. Its
    /// `meta` file goes (`recover::disown`: one unlink, which works on a full disk too), and
    /// an open without it removes every segment and the checkpoint. Where even that fails
    /// (the device dead, a file system remounted read-only), the log says so. Only while
    /// this process holds the directory's lock (`owns_dir`).
    pub(crate) fn fault(&self, what: &str, err: &io::Error) {
        self.counters.faults.fetch_add(1, Relaxed);
        if !self.counters.failed.swap(true, Relaxed) {
            let path = self.cfg.path.display();
            tracing::error!(
                disk = %path,
                "disk cache failed ({what}): {err}; no longer used, emptied at the next start"
            );
            self.index.retain(|_| false);
            // Only by the process holding the directory's lock: one still waiting for it
            // (a binary upgrade) must not touch the other process's disk.
            if !self.owns_dir.load(Acquire) {
                return;
            }
            if let Err(e) = super::recover::disown(&self.cfg.path) {
                tracing::error!(
                    disk = %path,
                    "the failed disk's records could not be disowned ({e}): the next start \
                     uses them, without the purges made until then"
                );
            }
        }
    }

    pub(crate) fn seg(&self, id: u32) -> Option<Arc<SegFile>> {
        self.segs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned()
    }

    /// Segment `id` opened for one read while recovery has not registered it yet (see
    /// `recover::recover`, step 3): not registered here, so that recovery alone decides
    /// which segments stay (a damaged one is deleted; its records read meanwhile were
    /// checked one by one, and one past a truncated segment's end is a miss meanwhile).
    /// `None`: it could not be opened.
    pub(crate) fn seg_unregistered(&self, id: u32) -> Option<Arc<SegFile>> {
        self.seg(id).or_else(|| {
            super::segment::open(&self.cfg.path, id, false)
                .ok()
                .map(Arc::new)
        })
    }
}

/// A handle to one disk. Dropping it (or [`DiskEngine::close`]) flushes, seals the segment
/// being written and checkpoints the index.
pub struct DiskEngine {
    pub(crate) shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// Held by `close` while it runs, so a second caller waits for the first one's work.
    close_lock: Mutex<()>,
}

impl std::fmt::Debug for DiskEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskEngine")
            .field("path", &self.shared.cfg.path)
            .finish()
    }
}

impl DiskEngine {
    /// Opens (or creates) the disk at `cfg.path`. Returns at once: the index is loaded by
    /// the writer thread (lookups meanwhile miss on what is not loaded yet; see
    /// [`DiskEngine::wait_loaded`]). An error means the directory or its meta file is
    /// unusable.
    pub fn open(cfg: DiskConfig) -> io::Result<DiskEngine> {
        DiskEngine::open_with(cfg, LockWait::Fail)
    }

    /// [`DiskEngine::open`], saying what to do when another process holds the directory
    /// (`lock.rs`): refuse (`ErrorKind::ResourceBusy`, naming the holder), or wait for it in
    /// the writer thread, the index empty meanwhile (every lookup misses, demotions queue
    /// and then drop, purges are remembered and logged once the lock is taken).
    pub fn open_with(cfg: DiskConfig, wait: LockWait) -> io::Result<DiskEngine> {
        DiskEngine::open_homed(cfg, wait, None)
    }

    /// [`DiskEngine::open_with`] for one of several disks, saying which keys it is home to
    /// (`tiered/homes.rs`): a hot record of another key is not re-written when its segment
    /// is reclaimed, from the first reclaim on (recovery's included). `None`: every key.
    pub(crate) fn open_homed(
        cfg: DiskConfig,
        wait: LockWait,
        is_home: Option<IsHome>,
    ) -> io::Result<DiskEngine> {
        if cfg.initial_capacity() < 2 * cfg.segment_bytes || cfg.segment_bytes < 4096 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "disk too small for two segments",
            ));
        }
        std::fs::create_dir_all(&cfg.path)?;
        let (lock, key) = match DirLock::acquire_within(&cfg.path, LOCK_GRACE)? {
            Ok(lock) => (Locking::Held(lock), super::recover::meta_key(&cfg.path)?),
            // The holder made the meta file when it opened the disk, and never rewrites a
            // valid one: its key is read, and nothing else is touched, until the lock is ours.
            // No meta file at all: the holder failed with the disk and disowned it (`fault`),
            // so the disk starts empty once the lock is ours, under a key of this process
            // (`recover::adopt_key`, also when the holder disowns it meanwhile). A meta file
            // that cannot be read or is damaged: refused, as the disk may be healthy.
            Err(busy) if wait == LockWait::Wait => match super::recover::read_meta(&cfg.path) {
                Some(key) => (Locking::Waiting(busy), key),
                None if super::recover::meta_missing(&cfg.path) => {
                    (Locking::Waiting(busy), super::recover::random_key())
                }
                None => return Err(busy.error(&cfg.path)),
            },
            Err(busy) => return Err(busy.error(&cfg.path)),
        };
        let publish_by = std::time::Instant::now() + cfg.publish_wait;
        let rereads = super::reread::Rereads::for_disk(cfg.size_bytes);
        let shared = Arc::new(Shared {
            cfg,
            key,
            owns_dir: AtomicBool::new(matches!(lock, Locking::Held(_))),
            index: Index::new(),
            segs: RwLock::new(HashMap::new()),
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            counters: Counters::default(),
            purged_while_loading: Mutex::new(HashSet::new()),
            // A lock held now means recovery starts at once: lookups wait (bounded) for it
            // to publish the checkpoint. One still held elsewhere: the other process serves
            // meanwhile, and lookups here miss.
            shards_loaded: AtomicU64::new(match lock {
                Locking::Held(_) => 0,
                Locking::Waiting(_) => u64::MAX,
            }),
            publish_by,
            shards_claimed: AtomicU64::new(u64::MAX),
            shard_source: Mutex::new(None),
            closed: std::sync::atomic::AtomicBool::new(false),
            on_reclaim: RwLock::new(None),
            is_home,
            rereads,
        });
        shared.counters.loading.store(true, Relaxed);
        let capacity = shared.cfg.initial_capacity();
        shared.counters.capacity.store(capacity, Relaxed);
        let for_thread = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("sepia-disk-writer".into())
            .spawn(move || super::writer::run(for_thread, lock))?;
        Ok(DiskEngine {
            shared,
            writer: Mutex::new(Some(handle)),
            close_lock: Mutex::new(()),
        })
    }

    pub(crate) fn hash(&self, primary: &[u8]) -> u64 {
        siphash13(self.shared.key, primary)
    }

    /// Whether the index may hold `primary`. While the checkpoint loads, a lookup whose
    /// shard is not in yet loads that shard from it on this thread (a read of 1/64 of the
    /// checkpoint: ~0.5 ms per million objects on disk, once per shard, only at a start).
    pub(crate) fn maybe_has(&self, hash: u64) -> bool {
        self.await_shard(hash);
        !self.shared.failed() && self.shared.index.contains(hash)
    }

    /// [`DiskEngine::maybe_has`], answered with the index entries whose tag matches (empty:
    /// no), for [`DiskEngine::read_all_cached`] to read without asking the index again.
    pub(crate) fn locate(&self, hash: u64) -> SmallVec<[Loc; 2]> {
        self.await_shard(hash);
        if self.shared.failed() {
            return SmallVec::new();
        }
        self.shared.index.candidates(hash)
    }

    /// Makes sure `hash`'s index shard is in (see [`DiskEngine::maybe_has`]).
    fn await_shard(&self, hash: u64) {
        let shard = super::recover::shard_tag(hash).0;
        if self.shared.shards_loaded.load(Acquire) & (1 << shard) == 0 {
            if let Some(source) = self.published_source(shard) {
                source.load_shard(&self.shared, shard);
                // Taken by the loader a moment before: it is a copy of well under a
                // millisecond, so wait for it (bounded) rather than miss.
                let until = std::time::Instant::now() + Duration::from_millis(2);
                while self.shared.shards_loaded.load(Acquire) & (1 << shard) == 0
                    && std::time::Instant::now() < until
                {
                    std::thread::yield_now();
                }
            }
        }
    }

    /// The checkpoint being loaded, once recovery has published it. A lookup in the first
    /// milliseconds after the open (while the segment files are registered) waits for that,
    /// at most until `publish_by`: the first request after a restart is then a disk hit
    /// rather than a miss. None once the shard is in, or when there is nothing to load.
    fn published_source(&self, shard: usize) -> Option<Arc<super::recover::ShardSource>> {
        let shared = &self.shared;
        loop {
            if let Some(source) = shared.lock_shard_source().clone() {
                return Some(source);
            }
            if shared.shards_loaded.load(Acquire) & (1 << shard) != 0
                || std::time::Instant::now() >= shared.publish_by
            {
                return None;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Queues an earned object for writing; false (and counted) when the queue is full,
    /// false when the disk failed or was closed.
    pub(crate) fn enqueue_write(&self, primary: Bytes, object: Arc<dyn Demoted>) -> bool {
        self.enqueue(primary, object, Admit::Earned)
    }

    /// [`DiskEngine::enqueue_write`] for an object that left memory unearned a second time.
    pub(crate) fn enqueue_seen_again(&self, primary: Bytes, object: Arc<dyn Demoted>) -> bool {
        self.enqueue(primary, object, Admit::SeenAgain)
    }

    fn enqueue(&self, primary: Bytes, object: Arc<dyn Demoted>, admit: Admit) -> bool {
        if self.shared.closed.load(Relaxed) {
            return false;
        }
        match self.try_enqueue(primary, object, admit) {
            Enqueue::Queued => true,
            Enqueue::Full(_) => {
                self.shared.counters.queue_drops.fetch_add(1, Relaxed);
                false
            }
            Enqueue::Failed => false,
        }
    }

    /// Queues an object that left memory without earning a disk place, if the disk takes
    /// such objects now ([`Admission::Fill`]: room it would not have to reclaim, the write
    /// queue at most half full). A refusal is not counted: it is the admission rule.
    pub(crate) fn enqueue_unearned(&self, primary: Bytes, object: Arc<dyn Demoted>) -> bool {
        // While loading, the disk's size is not known yet (and the writer is busy).
        let loading = self.shared.counters.loading.load(Relaxed);
        if self.shared.cfg.admission != Admission::Fill
            || self.shared.closed.load(Relaxed)
            || loading
        {
            return false;
        }
        matches!(
            self.try_enqueue(primary, object, Admit::Fill),
            Enqueue::Queued
        )
    }

    /// Queues an object for writing during a shutdown: waits for room in the queue until
    /// `deadline`. False when the deadline passed first or the disk failed.
    pub(crate) fn write_before(
        &self,
        primary: Bytes,
        mut object: Arc<dyn Demoted>,
        deadline: std::time::Instant,
    ) -> bool {
        loop {
            match self.try_enqueue(primary.clone(), object, Admit::Earned) {
                Enqueue::Queued => return true,
                Enqueue::Failed => return false,
                Enqueue::Full(back) => object = back,
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            // The writer drains 32 MiB in well under a second; no wake-up is worth a condvar.
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn try_enqueue(&self, primary: Bytes, object: Arc<dyn Demoted>, admit: Admit) -> Enqueue {
        if self.shared.failed() {
            return Enqueue::Failed;
        }
        let size = object.disk_size();
        let hash = self.hash(&primary);
        let cfg = &self.shared.cfg;
        let mut q = self.shared.lock_queue();
        if admit == Admit::Fill {
            // Room never used: what the disk holds (the segment being written counted
            // whole), what is queued and this object, and one more segment, without
            // reclaiming. The writer checks again (`has_unused_room`).
            let held = self.shared.counters.bytes.load(Relaxed) + q.write_bytes + size;
            let room = held + cfg.segment_bytes <= self.shared.counters.capacity.load(Relaxed);
            if !room || q.write_bytes + size > cfg.queue_bytes / 2 {
                return Enqueue::Full(object);
            }
        }
        // An object larger than the whole queue still goes when the queue is empty.
        if q.write_bytes > 0 && q.write_bytes + size > cfg.queue_bytes {
            return Enqueue::Full(object);
        }
        q.write_bytes += size;
        q.cmds.push_back(Cmd::Write {
            hash,
            primary,
            object,
            size,
            admit,
        });
        drop(q);
        self.shared.wake.notify_one();
        Enqueue::Queued
    }

    /// Bytes the disk can take without reclaiming what is written now: its segment space
    /// minus two segments (the one being written and the next).
    pub(crate) fn room_bytes(&self) -> u64 {
        let capacity = self.shared.counters.capacity.load(Relaxed);
        capacity.saturating_sub(2 * self.shared.cfg.segment_bytes)
    }

    /// Removes every record of `primary` from the index now, and logs a tombstone so the
    /// removal survives a restart. Returns how many index entries went.
    pub fn purge(&self, primary: &[u8]) -> usize {
        let hash = self.hash(primary);
        let mut q = self.shared.lock_queue();
        // Noted before removing: the loader checks the notes after installing each
        // checkpoint shard (`recover.rs`), so one of the two sees the entry.
        if self.shared.counters.loading.load(Relaxed) {
            self.shared
                .purged_while_loading
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(hash);
        }
        let removed = self.shared.index.remove_all(hash);
        *q.tombstones.entry(hash).or_default() += 1;
        q.cmds.push_back(Cmd::Tombstone {
            hash,
            primary: Bytes::copy_from_slice(primary),
        });
        drop(q);
        self.shared.wake.notify_one();
        removed
    }

    /// [`DiskEngine::purge`] on a disk that is not `primary`'s home: only when its index
    /// may hold it (or is still loading), so that a purge costs the other disks no
    /// tombstone for keys they never held.
    pub(crate) fn purge_if_held(&self, primary: &[u8]) -> usize {
        let loading = self.shared.counters.loading.load(Relaxed);
        match loading || self.maybe_has(self.hash(primary)) {
            true => self.purge(primary),
            false => 0,
        }
    }

    /// Reads every indexed record of `primary` (blocking I/O: call it off the event loop).
    /// Records failing a checksum are dropped from the index; I/O errors fail the disk.
    /// A body of at least `segment_from` bytes that is not within the first read is left in
    /// the file (`DiskRecord::in_file`): the caller reads and verifies it chunk by chunk.
    pub(crate) fn read_all(&self, primary: &[u8], segment_from: u64) -> Vec<DiskRecord> {
        let hash = self.hash(primary);
        let locs = self.shared.index.candidates(hash);
        self.read_records(primary, hash, &locs, segment_from, false)
            .unwrap_or_default()
    }

    /// [`DiskEngine::read_all`] on the caller's thread, for records in the page cache that
    /// are at most [`CACHED_READ_MAX`] bytes, or whose body this process verified before
    /// (then only the prefix is read: `in_file` is set and verified, `body` empty); `None`
    /// (nothing read that matters) when one is neither or would wait for the device: then
    /// use the read threads. `hash` is `primary`'s ([`DiskEngine::hash`]) and `locs` what
    /// [`DiskEngine::locate`] answered for it.
    pub(crate) fn read_all_cached(
        &self,
        primary: &[u8],
        hash: u64,
        locs: &[Loc],
        segment_from: u64,
    ) -> Option<Vec<DiskRecord>> {
        self.read_records(primary, hash, locs, segment_from, true)
    }

    /// Drops a record that no lookup will serve (a newer record of the same key supersedes
    /// it, or its metadata does not decode) from the index: lookups stop reading it, and
    /// reclaiming its segment does not copy it forward.
    pub(crate) fn drop_unserved(&self, rec: &DiskRecord) {
        self.shared
            .index
            .remove_exact(rec.hash, rec.seg, rec.offset);
    }

    /// Notes that the record's body passed its chunk checksums (see `index.rs`, `VERIFIED`).
    pub(crate) fn mark_verified(&self, hash: u64, seg: u32, offset: u64) {
        self.shared.index.mark_verified(hash, seg, offset);
    }

    /// The records of `primary` at `locs` (its index entries); `None` only with
    /// `cached_only`, when one would block.
    fn read_records(
        &self,
        primary: &[u8],
        hash: u64,
        locs: &[Loc],
        segment_from: u64,
        cached_only: bool,
    ) -> Option<Vec<DiskRecord>> {
        let mut out = Vec::new();
        if self.shared.failed() {
            return Some(out);
        }
        for loc in locs {
            let read = self.read_one(loc, primary, hash, segment_from, cached_only);
            if matches!(read, Err(ReadError::WouldBlock)) {
                return None;
            }
            if self.book_read(loc, hash, read, &mut out) {
                return Some(Vec::new());
            }
        }
        Some(out)
    }

    /// Counts a read of the record at `loc` and keeps it in `out` when it is `primary`'s;
    /// true when the disk failed (then nothing read counts).
    pub(crate) fn book_read(
        &self,
        loc: &Loc,
        hash: u64,
        read: Result<Option<DiskRecord>, ReadError>,
        out: &mut Vec<DiskRecord>,
    ) -> bool {
        self.shared.counters.reads.fetch_add(1, Relaxed);
        match read {
            Ok(Some(rec)) => {
                self.shared.counters.hits.fetch_add(1, Relaxed);
                if !loc.hit {
                    self.shared.index.mark_hit(hash, loc.seg, loc.offset);
                }
                out.push(rec);
                false
            }
            Ok(None) => false,
            Err(e) => self.read_failed(hash, loc.seg, loc.offset, e),
        }
    }

    /// Books a failed read of the record at `seg`/`offset`: a checksum failure drops it
    /// from the index, an I/O error fails the disk (then true).
    pub(crate) fn read_failed(&self, hash: u64, seg: u32, offset: u64, e: ReadError) -> bool {
        match e {
            ReadError::Corrupt => {
                self.shared.counters.checksum_failures.fetch_add(1, Relaxed);
                tracing::warn!(disk = %self.shared.cfg.path.display(), seg, offset, "disk record failed its checksum: dropped");
                self.shared.index.remove_exact(hash, seg, offset);
                false
            }
            ReadError::NotOpen | ReadError::WouldBlock => false,
            // A record past the end of a segment recovery has not footer-checked yet (it
            // deletes a truncated one with its entries, `recover::check_earlier`): a miss
            // while the index loads, not a fault of the disk.
            ReadError::Io(e)
                if e.kind() == std::io::ErrorKind::UnexpectedEof
                    && self.shared.counters.loading.load(Acquire) =>
            {
                false
            }
            ReadError::Io(e) => {
                self.shared.fault("read", &e);
                true
            }
        }
    }

    /// Whether the disk failed (its index is then empty).
    pub(crate) fn failed(&self) -> bool {
        self.shared.failed()
    }

    /// Called with a segment's id when it is reclaimed (its file unlinked): the tiered store
    /// lets go of the bodies it serves from it, so the file's blocks are freed.
    pub(crate) fn on_reclaim(&self, hook: Box<dyn Fn(u32) + Send + Sync>) {
        *self
            .shared
            .on_reclaim
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(hook);
    }

    /// `Ok(None)`: a valid record of another key (a tag collision).
    fn read_one(
        &self,
        loc: &Loc,
        primary: &[u8],
        hash: u64,
        segment_from: u64,
        cached_only: bool,
    ) -> Result<Option<DiskRecord>, ReadError> {
        let small = loc.len > 0 && loc.len <= CACHED_READ_MAX;
        // A large body this process has verified is sent from the segment unread: the
        // worker reads only the record's prefix (head, metadata, chunk checksums).
        let prefix_only = cached_only && !small && loc.verified;
        if cached_only && !small && !prefix_only {
            return Err(ReadError::WouldBlock);
        }
        // While the index loads, the checkpoint's entries are in it before their segments
        // are registered: such an entry's segment is opened for this read, and one that
        // cannot be is a miss for now, not a bad record to drop.
        // `loading` first: once it reads false (after recovery's `Release`), every segment
        // is registered, so a missing one is damage; read after `seg`, recovery could end
        // in between and a good entry be dropped as corrupt.
        let loading = self.shared.counters.loading.load(Acquire);
        let seg = match self.shared.seg(loc.seg) {
            Some(seg) => seg,
            None if loading => self
                .shared
                .seg_unregistered(loc.seg)
                .ok_or(ReadError::NotOpen)?,
            None => return Err(ReadError::Corrupt),
        };
        let past_cache = !cached_only && self.shared.rereads.read_past_cache(&seg, loc, hash);
        let prefix = read_record(&seg, loc, prefix_only, cached_only, past_cache)?;
        let prefix = prefix.freeze();
        decode_record(&seg, loc, prefix, primary, hash, segment_from, prefix_only)
    }

    /// Flushes the write buffer and, with `checkpoint`, writes the index checkpoint; waits.
    pub fn sync(&self, checkpoint: bool) {
        if self.writer_gone() {
            return;
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.shared
            .lock_queue()
            .cmds
            .push_back(Cmd::Sync(checkpoint, tx));
        self.shared.wake.notify_one();
        // The writer answers after the command; a dead writer drops the sender.
        let _ = rx.recv_timeout(Duration::from_secs(30));
    }

    /// Waits until the index is loaded (or `limit` passes); true when loaded.
    pub fn wait_loaded(&self, limit: Duration) -> bool {
        let start = std::time::Instant::now();
        while self.shared.counters.loading.load(Relaxed) {
            if start.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Counter snapshot.
    pub fn stats(&self) -> DiskStats {
        let mut s = self.shared.counters.snapshot();
        s.objects = self.shared.index.len() as u64;
        s.index_bytes = self.shared.index.heap_bytes() as u64;
        s
    }

    /// The directory of this disk.
    pub fn path(&self) -> &PathBuf {
        &self.shared.cfg.path
    }

    /// Flushes, seals the segment being written and checkpoints, as a clean shutdown must;
    /// waits for it. Idempotent, and safe while lookups go on: reads keep working, new
    /// demotions are refused, and purges are still logged (the writer thread runs until the
    /// engine is dropped, so a purge after `close` survives a restart too).
    pub fn close(&self) {
        let _one = self
            .close_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.writer_gone() {
            return;
        }
        if self.shared.closed.swap(true, Relaxed) {
            // Closed before: only what came since (tombstones) needs flushing.
            self.sync(false);
            return;
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.shared.lock_queue().cmds.push_back(Cmd::Close(tx));
        self.shared.wake.notify_one();
        let _ = rx.recv_timeout(Duration::from_secs(60));
    }

    /// Whether the writer thread was stopped (its handle taken by `shutdown`, or by a test's
    /// `crash`): nobody would answer a command, so `close` and `sync` return at once rather
    /// than wait out their timeouts (60 and 30 s).
    fn writer_gone(&self) -> bool {
        self.writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }

    /// Closes, then stops the writer thread.
    fn shutdown(&self) {
        self.close();
        let handle = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            self.shared.lock_queue().cmds.push_back(Cmd::Shutdown);
            self.shared.wake.notify_one();
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
impl DiskEngine {
    /// Stops the writer as a kill -9 would: the buffer is lost, nothing is sealed.
    pub(crate) fn crash(self) {
        let handle = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            self.shared.lock_queue().cmds.push_front(Cmd::Crash);
            self.shared.wake.notify_one();
            let _ = handle.join();
        }
    }
}

impl Drop for DiskEngine {
    fn drop(&mut self) {
        self.shutdown();
    }
}

enum Enqueue {
    Queued,
    Full(Arc<dyn Demoted>),
    Failed,
}
