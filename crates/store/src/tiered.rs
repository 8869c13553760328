//! Memory over disk: [`TieredStore`], the [`Store`] the proxy builds when disks are configured.
//!
//! - A lookup asks memory first. A memory miss whose key the disk index knows (and of which
//!   memory holds no other variant) registers the fill as usual and returns
//!   `Lookup::Pending(reader)`: the io_uring (completed on the event loop that drives it,
//!   `TieredConfig::reads_on`) or a read thread reads and verifies the record and drives
//!   the fill's writer (head, body, finish). Finishing commits the
//!   object into memory (the same admission as any fill: S3-FIFO's small queue, or main if
//!   its ghost is remembered), and requests collapsing on the key meanwhile share the
//!   read. A record
//!   already in the page cache is read by the looking-up worker instead (no fill, nobody
//!   waits): a hit at once, and promoted into memory by the same admission
//!   (`MemoryStore::promote`).
//! - When the disk copy cannot serve (checksum failure, gone, undecodable metadata, disk
//!   failed), the writer is *handed over*: the first reader's `head()` returns
//!   `Err(Released)` and `take_writer()` gives it the writer, so that request fetches from
//!   the origin and fills through it, as after `Lookup::Miss`; the others wait on it.
//! - Which variant: the disk read cannot see the lookup's selector (it runs later, on
//!   another thread), so it publishes the newest disk variant; a request whose Vary does not
//!   match it treats it as for any collapsed fill of another variant. That variant then sits
//!   in memory, and the next lookup for another variant is a plain miss (memory holds a
//!   variant of the key, so the disk is not asked again).
//! - Demotion: objects evicted from memory that earned it (see `s3fifo.rs`: hit while in
//!   the small queue, or re-admitted through the ghost queue), and those leaving unearned a
//!   second time within about the disks' horizon (`disk_ghost.rs`: memory's own ghost
//!   forgets after about memory's size), are queued to their disk's writer thread; a full
//!   queue drops them (counted). Other evictions are queued too while their disk has room it
//!   would not have to reclaim (`Admission::Fill`, `disk/config.rs`), into at most half the
//!   queue, and the writer skips them when writing would reclaim. An object whose disk
//!   record is exactly it (it was read from disk, or written already: `Object::on_disk`) is
//!   not written again while the disk still indexes its key.
//! - `purge` and `remove_variant` remove every disk copy of the key (a tombstone is logged);
//!   `update` after a 304 updates memory, and when the object is not in memory (a disk
//!   copy streamed without being kept) drops the disk copies. A response read from disk is
//!   not the object the read promoted (another handle), so `update` on it takes the second
//!   way. The proxy does not call `update`: its revalidation publishes the freshened
//!   response through a refresh fill (e2e
//!   `a_304_for_a_response_read_from_disk_refreshes_it_once`); `update` is the `Store`
//!   contract the conformance suite checks. `lookup_no_fill` sees memory and the
//!   remembered large bodies (below): it must answer at once, and a disk read does not.
//!
//! # Large bodies
//!
//! A disk body of at least `segment_body_min` (1 MiB) is not read into memory. Its first
//! read after open verifies every chunk checksum (reading the body through the page cache)
//! *before* anything is published: a bad chunk hands the request to the origin rather than
//! cutting a response short. The body is then streamed to that first request (and those
//! collapsed on it) without being committed to memory, and remembered as an object whose
//! body is a `BodyFile` range of the segment file (`BodyFile::in_segment`, sharing the
//! segment's descriptor): later lookups get it as a `Lookup::Hit` at no I/O cost, and the
//! front ends send it with `sendfile(2)` at `BodyFile::offset` (h1 over TCP) or read it back
//! in pieces (TLS, HTTP/2). Memory wins over it: a key with a variant in memory (a refresh
//! committed there) is looked up in memory. At most `max_segment_bodies` (4,096) are
//! remembered, a few hundred bytes of RAM each. Past that, the disk index remembers that
//! the body was verified (one bit of its entry, for the life of the process: segments are
//! written once and never overwritten), so a later lookup reads only the record's prefix
//! (head, metadata, chunk checksums: one `preadv2(RWF_NOWAIT)` of a page on the looking-up
//! thread) and answers a hit whose body is the segment range, sent by `sendfile`. A restart
//! forgets the bit, and the first read after it verifies the body again. What this does not
//! catch: a body changed on the device after it was verified, while Sepia runs.
//!
//! Segment reclaim: segments are never overwritten. Each is one file written once, front to
//! back; reclaiming it unlinks it, and a new segment is a new file (new id, `O_EXCL`). A
//! send in flight holds the `Arc<File>`, so it keeps the bytes that were verified even when
//! the segment goes mid-send. To give the blocks back promptly, the writer tells this store
//! when it reclaims a segment (`DiskEngine::on_reclaim`), and the remembered bodies in it are
//! forgotten: an unlinked segment outlives its reclaim only while a send from it is in
//! flight (then the disk holds a little more than `size` for that long). Purges, and a
//! failed disk, forget them too.
//!
//! # Shutdown
//!
//! Demotion writes only what leaves memory, so without more a site whose hot set fits in
//! memory would restart cold. [`TieredStore::close`] therefore writes the earned objects
//! still in memory (main queue, and small-queue objects hit since they came in) that have no
//! current disk copy, hottest first, shards interleaved, then seals and checkpoints. Bounded:
//! it stops queueing at `close_write_limit` (10 s) and writes no more per disk than the disk
//! holds without reclaiming them again (its segment space minus two segments). It logs how
//! many it wrote and how long it took. Measured on this VM (ext4, 2 cores, page cache):
//! 4,096 objects of 64 KiB (256 MiB) written, sealed and fsynced in 371 ms
//! (`close_writes_bench`).
//!
//! Why at close rather than write-behind when an object earns its place (so that a kill -9
//! would keep it too):
//! - Earning is decided lazily. S3-FIFO promotes a hit object from small to main only when
//!   an eviction pass reaches it, so with a hot set that fits in memory nothing is ever
//!   promoted: a write on promotion would not save the very case this is for. Writing on the
//!   first hit instead puts a queue push (an allocation and a lock) on the hit path, which
//!   today takes only a read lock and bumps a 2-bit counter.
//! - It would write more. Every version of an object replaced while hot would be written:
//!   a hot object with a 60 s freshness lifetime refreshed by a 200 is a new object that
//!   earns again within a minute, about 1,440 writes a day where eviction-time demotion
//!   writes it once when it finally leaves. Objects purged or replaced while in memory
//!   would be written for nothing. Flash endurance is why a full disk takes only earned
//!   objects (issue 21).
//! - What a kill -9 loses is bounded anyway: objects evicted earlier are on disk, and an
//!   orderly stop (SIGTERM, upgrades) goes through `close`.
//!
//! `close` is idempotent (a second call waits for the first and returns) and lookups may go
//! on during and after it: reads from disk keep working, demotions are refused from then on,
//! and purges are still logged (each disk's writer runs until the store is dropped).

use std::borrow::Cow;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use bytes::Bytes;

use crate::config::StoreConfig;
use crate::disk::{DiskConfig, DiskEngine, DiskRecord, DiskStats, Loc, LockWait, ReadPool};
use crate::disk_ghost::DiskGhost;
use crate::fill::FillWriter;
use crate::memory::{EvictHook, KeyHash, MemoryStore, Probe};
use crate::object::{Body, Object};
use crate::stats::StoreStats;
use crate::store::{Lookup, Store};

mod disk_read;
mod homes;
mod open_disks;
use disk_read::{
    fill_from_disk, fill_from_records, newest_usable, segment_object, SegmentBodies, SegmentTarget,
};
use homes::Homes;
use open_disks::{open_disks, open_ring};

/// Metadata the disk tier can store: the proxy implements it for its `Meta` (and rebuilds
/// what it derives from the head in `decode`).
pub trait Persist: Sized {
    /// Appends the encoded metadata of the object whose stored head is `head` to `out`.
    fn encode(&self, head: &[u8], out: &mut Vec<u8>);
    /// Rebuilds the metadata from what `encode` wrote and the stored head; `None` if it
    /// cannot (an object that is then treated as a miss). `bytes` is a slice of the record
    /// read back, as `head` is: parts of it may be kept as slices rather than copied.
    fn decode(head: &Bytes, bytes: &Bytes) -> Option<Self>;
}

/// Shared metadata persists as what it shares (the proxy's `Meta` is an `Arc`).
impl<T: Persist> Persist for Arc<T> {
    fn encode(&self, head: &[u8], out: &mut Vec<u8>) {
        T::encode(self, head, out);
    }
    fn decode(head: &Bytes, bytes: &Bytes) -> Option<Self> {
        T::decode(head, bytes).map(Arc::new)
    }
}

impl Persist for u32 {
    fn encode(&self, _head: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn decode(_head: &Bytes, bytes: &Bytes) -> Option<Self> {
        Some(u32::from_le_bytes(bytes[..].try_into().ok()?))
    }
}

/// Settings of a [`TieredStore`].
#[derive(Debug, Clone)]
pub struct TieredConfig {
    /// The memory tier.
    pub memory: StoreConfig,
    /// The disks (a key lives on one, chosen by rendezvous hashing: `tiered/homes.rs`).
    pub disks: Vec<DiskConfig>,
    /// Threads that read from disk. Each blocking `pread` holds one, so this is the depth of
    /// the device queue a cold cache sees: with 2, 64 KiB hits after a page-cache drop ran at
    /// 3,800/s where fio at depth 64 read 8,800/s from the same file system (bench/RESULTS.md,
    /// "Cold page cache"). An idle thread costs a parked stack.
    pub read_threads: usize,
    /// Disk reads waiting for a thread at most; beyond, a disk-resident key is a miss.
    pub max_queued_reads: usize,
    /// Reads of records not in the page cache go through an io_uring (any number in
    /// flight, driven by `reads_on`; `disk/ring_read.rs`) where the kernel allows it; the
    /// read threads keep the reads it does not make. Falls back to the threads (logged)
    /// without it. Off in [`TieredConfig::new`] (the store's tests drive the threads); the
    /// proxy's `cache.disk_io` turns it on by default.
    pub io_uring: bool,
    /// With `io_uring`: the reads the ring keeps at each disk's device at once; the rest
    /// wait in its queue (see `tiered/open_disks.rs`, `RING_DEPTH`, the default).
    pub ring_depth: usize,
    /// How long [`TieredStore::close`] may spend writing the earned objects still in memory.
    pub close_write_limit: std::time::Duration,
    /// Disk bodies at least this long are served from their segment file (`Body::File`,
    /// sendfile) instead of being read into memory; see "Large bodies".
    pub segment_body_min: u64,
    /// Large disk bodies whose location is remembered at most (one entry each: head and
    /// metadata in memory, the body in the segment).
    pub max_segment_bodies: usize,
    /// Small records in the page cache are read by the looking-up thread itself (`preadv2`
    /// with `RWF_NOWAIT`, never waiting for the device) and answered as a hit; `false` sends
    /// every disk read to the read threads (tests of that path).
    pub cached_reads: bool,
    /// A disk whose directory another process holds: refused, or waited for (a binary
    /// upgrade's new process; see `disk/lock.rs`).
    pub lock_wait: LockWait,
    /// The runtime whose event loop drives the io_uring (`sepia_sys::ring::RingDriver`):
    /// reads complete, are checked and played into their fills on its workers. `None`: a
    /// thread of the store's does that (a store used outside a runtime).
    pub reads_on: Option<tokio::runtime::Handle>,
}

impl TieredConfig {
    /// `memory` over `disks` with 16 read threads.
    pub fn new(memory: StoreConfig, disks: Vec<DiskConfig>) -> Self {
        TieredConfig {
            memory,
            disks,
            read_threads: 16,
            max_queued_reads: 1024,
            io_uring: false,
            ring_depth: open_disks::RING_DEPTH,
            close_write_limit: std::time::Duration::from_secs(10),
            segment_body_min: 1 << 20,
            max_segment_bodies: 4096,
            cached_reads: true,
            lock_wait: LockWait::Fail,
            reads_on: None,
        }
    }
}

impl<M: Persist + Send + Sync> crate::disk::Demoted for Object<M> {
    fn secondary(&self) -> &[u8] {
        Object::secondary(self)
    }
    fn head(&self) -> &[u8] {
        Object::head(self)
    }
    fn encode_meta(&self, out: &mut Vec<u8>) {
        self.meta().encode(self.head(), out);
    }
    fn body_chunks(&self) -> io::Result<Cow<'_, [Bytes]>> {
        self.body().to_chunks()
    }
    fn disk_size(&self) -> u64 {
        self.head().len() as u64 + self.body_len() + self.secondary().len() as u64 + 256
    }
    fn written(&self, hash: u64) {
        self.set_on_disk(hash);
    }
}

struct Disks {
    /// The disks that opened, in configured order.
    engines: Vec<Arc<DiskEngine>>,
    /// Which of them a key lives on.
    homes: Homes,
    pool: ReadPool,
    /// What drives the ring (declared first: it stops first), and the ring.
    #[allow(dead_code, reason = "held for its Drop, which stops it")]
    ring_driver: Option<sepia_sys::ring::RingDriver>,
    ring: Option<Arc<sepia_sys::ring::ReadRing>>,
    /// The ring's huge-page read buffers (`ReadRing::slab_gauge`).
    slab: Option<sepia_sys::ring::SlabGauge>,
}

impl Disks {
    fn index_for_key(&self, primary: &[u8]) -> Option<usize> {
        self.homes.home(primary)
    }

    fn for_key(&self, primary: &[u8]) -> Option<&Arc<DiskEngine>> {
        self.index_for_key(primary).map(|i| &self.engines[i])
    }
}

/// What `TieredStore::close` wrote.
#[derive(Debug, Default)]
struct CloseWrites {
    earned: usize,
    on_disk: usize,
    /// Queued for writing; of those, `unreadable` were not written (their body file could
    /// not be read).
    written: usize,
    unreadable: u64,
    bytes: u64,
    left: usize,
    elapsed: std::time::Duration,
}

/// The memory store over one or more disks (see the module docs).
pub struct TieredStore<M> {
    memory: MemoryStore<M>,
    disks: Arc<Disks>,
    close_write_limit: std::time::Duration,
    segment_body_min: u64,
    /// See `TieredConfig::cached_reads`.
    cached_reads: bool,
    bodies: Arc<SegmentBodies<M>>,
    segment_hits: AtomicU64,
    /// Held while `close` runs; true once it ran.
    closed: std::sync::Mutex<bool>,
}

impl<M> std::fmt::Debug for TieredStore<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TieredStore")
            .field("disks", &self.disks.engines)
            .finish()
    }
}

impl<M: Persist + Clone + Send + Sync + 'static> TieredStore<M> {
    /// Opens the disks (each loads its index in the background; lookups meanwhile miss on
    /// what is not loaded yet). A disk that cannot be opened is logged and left out.
    pub fn open(mut cfg: TieredConfig) -> Self {
        let disks = std::mem::take(&mut cfg.disks);
        let disk_bytes = disks.iter().map(|d| d.size_bytes).sum::<u64>();
        let (engines, homes) =
            open_disks(disks, cfg.lock_wait, false).expect("only busy disks are errors");
        TieredStore::with_engines(cfg, engines, homes, disk_bytes)
    }

    /// [`TieredStore::open`], except that a disk another Sepia holds is an error (naming
    /// it and its holder) rather than left out: a start must not quietly run without its
    /// disk, nor ever share it.
    pub fn try_open(mut cfg: TieredConfig) -> io::Result<Self> {
        let disks = std::mem::take(&mut cfg.disks);
        let disk_bytes = disks.iter().map(|d| d.size_bytes).sum::<u64>();
        let (engines, homes) = open_disks(disks, cfg.lock_wait, true)?;
        Ok(TieredStore::with_engines(cfg, engines, homes, disk_bytes))
    }

    fn with_engines(
        cfg: TieredConfig,
        engines: Vec<Arc<DiskEngine>>,
        homes: Homes,
        disk_bytes: u64,
    ) -> Self {
        let depth = cfg.ring_depth.min(1 << 16) * engines.len() * usize::from(cfg.io_uring);
        let (ring, ring_driver) =
            open_ring(depth, cfg.max_queued_reads, cfg.reads_on.as_ref()).unzip();
        let slab = ring.as_ref().and_then(|r| r.slab_gauge());
        let disks = Arc::new(Disks {
            homes,
            pool: ReadPool::new(cfg.read_threads, cfg.max_queued_reads),
            ring,
            ring_driver,
            slab,
            engines,
        });
        let for_hook = Arc::clone(&disks);
        let horizon = cfg.memory.budget_bytes + disk_bytes;
        let ghost = Mutex::new(DiskGhost::new(horizon));
        let hook: EvictHook<M> = Arc::new(move |primary: Bytes, object: Arc<Object<M>>, earned| {
            let Some(disk) = for_hook.for_key(&primary) else {
                return;
            };
            // An object read from the disk (or written to it) knows the disk's hash of its
            // key: a promoted object evicted again costs no second hash of the key.
            let (hash, was_on_disk) = match object.on_disk() {
                Some(hash) => (hash, true),
                None => (disk.hash(&primary), false),
            };
            // An earned response fetched from the origin is written whatever the disk holds
            // (it may be newer): no index probe.
            if earned && !was_on_disk {
                disk.enqueue_write(primary, object);
                return;
            }
            // The key on disk: the disk copy is this object, or (unearned) one copy is
            // enough. (A copy written by `Admission::Fill` may have landed while this one was
            // fetched again: a second record would be written for nothing, and read once
            // more by the key's next lookup, which drops the older one from the index.)
            if disk.maybe_has(hash) {
                return;
            }
            if earned {
                disk.enqueue_write(primary, object);
                return;
            }
            // Unearned: written if it left memory unearned once before, within about the
            // disks' horizon (see `disk_ghost.rs`), or into room the disk has never used
            // (`Admission::Fill`).
            let size = object.head().len() as u64 + object.body_len();
            let again = ghost
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .seen_again(hash, size);
            if again {
                disk.enqueue_seen_again(primary, object);
            } else {
                disk.enqueue_unearned(primary, object);
            }
        });
        let hook = (!disks.engines.is_empty()).then_some(hook);
        let bodies = Arc::new(SegmentBodies::new(cfg.max_segment_bodies));
        for (i, disk) in disks.engines.iter().enumerate() {
            let bodies = Arc::clone(&bodies);
            disk.on_reclaim(Box::new(move |seg| bodies.drop_segment(i, seg)));
        }
        TieredStore {
            memory: MemoryStore::with_evict_hook(cfg.memory, hook),
            disks,
            close_write_limit: cfg.close_write_limit,
            segment_body_min: cfg.segment_body_min,
            cached_reads: cfg.cached_reads,
            bodies,
            segment_hits: AtomicU64::new(0),
            closed: std::sync::Mutex::new(false),
        }
    }

    /// The index among [`TieredStore::disks`] of the disk `primary` lives on, if it opened.
    #[cfg(test)]
    pub(crate) fn home_of(&self, primary: &[u8]) -> Option<usize> {
        self.disks.index_for_key(primary)
    }

    /// The disks, for their counters, `sync`, `wait_loaded` and `close`.
    pub fn disks(&self) -> &[Arc<DiskEngine>] {
        &self.disks.engines
    }

    /// Disk reads the io_uring made (`None`: reads use the threads only).
    pub fn ring_reads(&self) -> Option<u64> {
        self.disks.ring.as_ref().map(|r| r.completed())
    }

    /// A clean shutdown: writes the earned objects still in memory that have no disk copy
    /// (see "Shutdown" in the module docs; at most `close_write_limit`, and no more per disk
    /// than it holds without reclaiming them again), then flushes, seals and checkpoints
    /// every disk. Blocking: call it off the event loop. Idempotent (a second call waits for
    /// the first), and lookups may go on meanwhile and after: they are served from memory
    /// and disk as before; only demotions stop.
    pub fn close(&self) {
        let mut closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        if *closed {
            return;
        }
        if !self.disks.engines.is_empty() {
            let r = self.write_earned();
            tracing::info!(
                queued = r.written,
                unreadable = r.unreadable,
                bytes = r.bytes,
                earned = r.earned,
                already_on_disk = r.on_disk,
                left = r.left,
                ms = r.elapsed.as_millis() as u64,
                "disk cache: wrote the earned objects still in memory"
            );
        }
        for d in &self.disks.engines {
            d.close();
        }
        *closed = true;
    }

    /// Queues the earned in-memory objects without a current disk copy, hottest first, and
    /// waits until they are written (within the limit).
    fn write_earned(&self) -> CloseWrites {
        let start = Instant::now();
        let deadline = start + self.close_write_limit;
        let earned = self.memory.earned_objects();
        let mut r = CloseWrites {
            earned: earned.len(),
            ..CloseWrites::default()
        };
        let unreadable = || -> u64 {
            let disks = self.disks.engines.iter();
            disks.map(|d| d.stats().unreadable_bodies).sum()
        };
        let unreadable_before = unreadable();
        let mut room: Vec<u64> = self.disks.engines.iter().map(|d| d.room_bytes()).collect();
        for (primary, object) in earned {
            let Some(i) = self.disks.index_for_key(&primary) else {
                r.left += 1; // its disk did not open
                continue;
            };
            let disk = &self.disks.engines[i];
            if object.on_disk().is_some_and(|hash| disk.maybe_has(hash)) {
                r.on_disk += 1;
                continue;
            }
            let size = crate::disk::Demoted::disk_size(&*object);
            if size > room[i] || Instant::now() >= deadline {
                r.left += 1;
                continue;
            }
            if disk.write_before(primary, object, deadline) {
                room[i] -= size;
                r.written += 1;
                r.bytes += size;
            } else {
                r.left += 1;
            }
        }
        // What is queued is written by `DiskEngine::close` (flush, seal, checkpoint).
        for d in &self.disks.engines {
            d.sync(false);
        }
        r.unreadable = unreadable() - unreadable_before;
        r.elapsed = start.elapsed();
        r
    }

    /// Memory first; a memory miss the disk may answer becomes a fill driven by a disk read.
    pub fn lookup(&self, primary: &[u8], select: &dyn Fn(&Object<M>) -> bool) -> Lookup<M> {
        // Memory first, by its read-locked hit path alone: a memory hit pays nothing for the
        // disk tier (before, the remembered segment bodies were asked first: a read lock and
        // a hash of their map on every hit while it held any). Memory wins over a segment
        // body anyway (see "Large bodies"), so asking it first changes no answer; a miss
        // pays one more read-locked probe before it registers its fill below.
        let memory_hash = match self.memory.probe(primary, select) {
            Probe::Hit(object) => return Lookup::Hit(object),
            // Memory holds a variant, newer than any on disk: memory decides.
            Probe::Stored => return self.memory.lookup(primary, select),
            Probe::Absent(hash) => hash,
        };
        if let Some(object) = self.segment_body(primary, select) {
            return Lookup::Hit(object);
        }
        let on_disk = self.disks.for_key(primary).and_then(|disk| {
            let hash = disk.hash(primary);
            let locs = disk.locate(hash);
            (!locs.is_empty()).then_some((disk, hash, locs))
        });
        let Some((disk, hash, locs)) = on_disk else {
            return self.memory.lookup(primary, select);
        };
        // A record in the page cache is read here, before any fill is registered: a
        // hand-off to a read thread and the wake-up back cost more than the read
        // (bench/RESULTS.md, 2026-11-26). Small records are read whole; a large body this
        // process verified before is sent from its segment, only its prefix read.
        if self.cached_reads {
            if let Some(records) = disk.read_all_cached(primary, hash, &locs, self.segment_body_min)
            {
                return self.serve_cached(disk, records, primary, memory_hash, select);
            }
        }
        let writer = match self.memory.lookup(primary, select) {
            Lookup::Miss(writer) => writer,
            found => return found,
        };
        self.read_off_loop(primary, disk, hash, &locs, writer)
    }

    /// Hands `primary`'s disk read (its records at `locs`) to the io_uring, which reads one
    /// whole record, or to a read thread; the fill's `writer` is driven from there. A miss
    /// when their queue is full.
    fn read_off_loop(
        &self,
        primary: &[u8],
        disk: &Arc<DiskEngine>,
        hash: u64,
        locs: &[Loc],
        writer: FillWriter<M>,
    ) -> Lookup<M> {
        // The ring's read, if it makes this one; a ring whose driver ended on its own (no
        // answer on its room) leaves every read to the threads.
        let ring = (self.disks.ring.as_ref())
            .and_then(|ring| Some((ring, disk.ring_read(locs, hash)?)))
            .and_then(|(ring, r)| Some((ring, ring.has_room()?, r)));
        let has_room = match &ring {
            Some((_, room, _)) => *room,
            None => self.disks.pool.has_room(),
        };
        if !has_room {
            return Lookup::Miss(writer);
        }
        let Some(reader) = writer.join() else {
            return Lookup::Miss(writer);
        };
        let disk_index = self.disks.index_for_key(primary).expect("a disk was found");
        let disk = Arc::clone(disk);
        let key = Bytes::copy_from_slice(primary);
        let bodies = Arc::clone(&self.bodies);
        let segment_from = self.segment_body_min;
        if let Some((ring, _, r)) = ring {
            let record = r.record;
            let slab = self.disks.slab.clone();
            let read = sepia_sys::ring::Read {
                file: r.file,
                at: r.at,
                len: r.len,
                need: r.need,
                align: r.align,
                fallback: r.fallback,
                done: Box::new(move |bytes| {
                    let records =
                        disk.ring_records(&record, &key, hash, segment_from, bytes, slab.as_ref());
                    let to = SegmentTarget {
                        bodies: &bodies,
                        disk_index,
                        from: segment_from,
                    };
                    fill_from_records(&disk, &key, records, writer, &to);
                }),
            };
            ring.submit(read);
            return Lookup::Pending(reader);
        }
        self.disks.pool.spawn(Box::new(move || {
            let to = SegmentTarget {
                bodies: &bodies,
                disk_index,
                from: segment_from,
            };
            fill_from_disk(&disk, &key, writer, &to)
        }));
        Lookup::Pending(reader)
    }

    /// Answers a lookup from records read on this thread (`read_all_cached`): the newest
    /// usable one, if the selector takes it, becomes a hit. A small one is promoted into
    /// memory by the usual admission (unless memory holds the key or a fill for it by
    /// now, both newer); a large verified body is sent
    /// from its segment file and not kept in memory. Nothing usable: the memory lookup's
    /// answer, a miss unless another request is filling the key.
    fn serve_cached(
        &self,
        disk: &DiskEngine,
        records: Vec<DiskRecord>,
        primary: &[u8],
        memory_hash: KeyHash,
        select: &dyn Fn(&Object<M>) -> bool,
    ) -> Lookup<M> {
        let Some((meta, mut rec)) = newest_usable(disk, records) else {
            return self.memory.lookup(primary, select);
        };
        if let Some(in_file) = rec.in_file.take_if(|f| f.verified) {
            let object = segment_object(in_file, &rec, meta);
            if !select(&object) {
                return self.memory.lookup(primary, select);
            }
            self.segment_hits.fetch_add(1, Relaxed);
            return Lookup::Hit(Arc::new(object.just_read_from_disk()));
        }
        let chunks: Arc<[Bytes]> = rec.body.into();
        let object = Object::new(
            rec.head.clone(),
            Body::Chunks(Arc::clone(&chunks)),
            rec.body_len,
            meta.clone(),
            rec.secondary.clone(),
        );
        if !select(&object) {
            return self.memory.lookup(primary, select);
        }
        // Promoted by memory's admission (see `MemoryStore::promote`); the memory copy is
        // another handle on the same chunks, and the disk record is this object: evicting
        // it again need not rewrite it.
        let kept = Object::new(
            rec.head,
            Body::Chunks(chunks),
            rec.body_len,
            meta,
            rec.secondary,
        );
        kept.set_on_disk(rec.hash);
        self.memory.promote(rec.primary, memory_hash, kept);
        Lookup::Hit(Arc::new(object.just_read_from_disk()))
    }

    /// A large disk body remembered as served from its segment file, for a key of which
    /// memory holds no variant (the caller's probe said so: memory is newer, a refresh
    /// commits there), and only if its pages
    /// are in the page cache, so that no worker waits for the device in `sendfile`: a full
    /// lookup then reads the body on a read thread instead, which brings it into the page
    /// cache; a lookup that may not read (ranges, HEAD, `only-if-cached`) misses. Its first
    /// read went past the page cache (`read_uncached_at`), so that is common until the
    /// body's second full read, and the pages of any body can be evicted under us. Only
    /// while the disk index holds exactly that record for the key: a newer response written
    /// to disk since (or a purge) makes it forgotten, and the lookup asks the index (as does
    /// every lookup of a key whose index tag another key shares: rare, and only slower).
    fn segment_body(
        &self,
        primary: &[u8],
        select: &dyn Fn(&Object<M>) -> bool,
    ) -> Option<Arc<Object<M>>> {
        let (at, object) = self.bodies.get(primary, select)?;
        let disk = &self.disks.engines[at.disk];
        let locs = disk.locate(at.hash);
        if !matches!(&locs[..], [only] if only.seg == at.seg && only.offset == at.offset) {
            self.bodies.forget_at(primary, at);
            return None;
        }
        if matches!(object.body(), Body::File(f) if !f.resident()) {
            return None;
        }
        self.segment_hits.fetch_add(1, Relaxed);
        Some(object)
    }

    /// Counters of both tiers.
    pub fn stats(&self) -> StoreStats {
        let mut s = self.memory.stats();
        s.disk_hits += self.segment_hits.load(Relaxed);
        s.disk_ring_reads = self.ring_reads().unwrap_or(0);
        for d in &self.disks.engines {
            let d: DiskStats = d.stats();
            s.disk_objects += d.objects;
            s.disk_bytes += d.bytes;
            s.disk_index_bytes += d.index_bytes;
            s.disk_reads += d.reads;
            s.disk_hits += d.hits;
            s.disk_writes += d.writes;
            s.disk_write_bytes += d.write_bytes;
            s.disk_fill_writes += d.fill_writes;
            s.disk_fill_write_bytes += d.fill_write_bytes;
            s.disk_write_skips += d.budget_skips + d.queue_drops + d.unreadable_bodies;
            s.disk_checksum_failures += d.checksum_failures;
            s.disk_faults += d.faults;
            s.disks_failed += d.failed;
        }
        s
    }

    /// Purges `primary` from its home disk (a tombstone even when not indexed: a write of
    /// it may be queued) and from every other disk whose index holds it: records left there
    /// while the key lived elsewhere (a disk added, or one that did not open at a start:
    /// `tiered/homes.rs`) must not outlive the purge, or they would be served once the key
    /// maps back to them.
    fn purge_disk(&self, primary: &[u8]) -> usize {
        self.bodies.remove(primary);
        let home = self.disks.index_for_key(primary);
        let engines = self.disks.engines.iter().enumerate();
        let purge = |(i, d): (usize, &Arc<DiskEngine>)| {
            if Some(i) == home {
                d.purge(primary)
            } else {
                d.purge_if_held(primary)
            }
        };
        engines.map(purge).sum()
    }
}

impl<M: Persist + Clone + Send + Sync + 'static> Store<M> for TieredStore<M> {
    fn set_memory_budget(&self, bytes: u64) {
        self.memory.set_budget(bytes);
    }

    fn lookup(&self, primary: &[u8], select: &dyn Fn(&Object<M>) -> bool) -> Lookup<M> {
        TieredStore::lookup(self, primary, select)
    }

    fn lookup_no_fill(
        &self,
        primary: &[u8],
        select: &dyn Fn(&Object<M>) -> bool,
    ) -> Option<Arc<Object<M>>> {
        match self.memory.probe(primary, select) {
            Probe::Hit(object) => Some(object),
            Probe::Stored => None,
            Probe::Absent(_) => self.segment_body(primary, select),
        }
    }

    fn refresh(&self, primary: &[u8], select: &dyn Fn(&Object<M>) -> bool) -> Lookup<M> {
        self.memory.refresh(primary, select)
    }

    fn purge(&self, primary: &[u8]) -> usize {
        self.memory.purge(primary) + self.purge_disk(primary)
    }

    fn remove_variant(&self, primary: &[u8], secondary: &[u8]) -> bool {
        let in_memory = self.memory.remove_variant(primary, secondary);
        self.purge_disk(primary) > 0 || in_memory
    }

    fn update(
        &self,
        primary: &[u8],
        old: &Arc<Object<M>>,
        head: Bytes,
        meta: M,
    ) -> Option<Arc<Object<M>>> {
        if let Some(updated) = self.bodies.update(primary, old, head.clone(), meta.clone()) {
            // A large body served from its segment: the new head is kept in RAM; the disk
            // record keeps the old one (after a restart it is revalidated again, once).
            return Some(updated);
        }
        let updated = self.memory.update(primary, old, head, meta);
        if updated.is_none() {
            self.purge_disk(primary);
        }
        updated
    }

    fn stats(&self) -> StoreStats {
        TieredStore::stats(self)
    }

    fn close(&self) {
        TieredStore::close(self);
    }
}
