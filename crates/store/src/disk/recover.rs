//! Opening a disk: the meta file (hash key), the checkpoint, and the scan of what was
//! written after it.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use super::engine::Shared;
use super::format::{SummaryEntry, KIND_TOMBSTONE};
use super::index::{Slot, SHARDS};
use super::segment::{self, SegFile};
use super::writer::Writer;

const META_MAGIC: &[u8; 8] = b"SEPIADK1";
const CK_MAGIC: &[u8; 8] = b"SEPIACK2";
/// Magic, crc, watermark segment and offset, next sequence number, shard count and pad.
const CK_FIXED: usize = 40;
/// The fixed part and the shard directory (see [`write_checkpoint`]).
const CK_HEADER: usize = CK_FIXED + 16 * SHARDS;
/// The file holding the disk's hash key; without it the disk's records are not trusted.
const META: &str = "meta";
/// The file holding the index checkpoint.
const CHECKPOINT: &str = "checkpoint";

/// The disk's hash key from its `meta` file, made at random for a new disk. A missing or
/// damaged meta file makes every segment and checkpoint unreadable (their hashes were made
/// under the lost key), so they are removed.
pub(crate) fn meta_key(dir: &Path) -> io::Result<(u64, u64)> {
    if let Some(key) = read_meta(dir) {
        return Ok(key);
    }
    let key = random_key();
    start_empty(dir, key)?;
    Ok(key)
}

/// The disk's `meta` file holds `key`; otherwise (missing, damaged, another key: the disk
/// was disowned by a process that failed with it, see `Shared::fault`) every segment and the
/// checkpoint are removed and a `meta` with `key` is written. For a process that waited for
/// the lock with a key of its own.
pub(crate) fn adopt_key(dir: &Path, key: (u64, u64)) -> io::Result<()> {
    match read_meta(dir) {
        Some(found) if found == key => Ok(()),
        _ => start_empty(dir, key),
    }
}

/// Removes every segment and the checkpoint, then writes `meta` with `key` (last: a start
/// cut short repeats the removal).
fn start_empty(dir: &Path, key: (u64, u64)) -> io::Result<()> {
    for id in segment::list(dir)? {
        fs::remove_file(segment::seg_path(dir, id))?;
    }
    let _ = fs::remove_file(dir.join(CHECKPOINT));
    let mut b = META_MAGIC.to_vec();
    b.extend_from_slice(&key.0.to_le_bytes());
    b.extend_from_slice(&key.1.to_le_bytes());
    b.extend_from_slice(&crc32c::crc32c(&b).to_le_bytes());
    write_durably(dir, META, &b)
}

/// Disowns the disk's records for the next open, which removes them (`meta_key`,
/// `adopt_key`): its `meta` file goes. One already gone is no error.
pub(crate) fn disown(dir: &Path) -> io::Result<()> {
    remove_if_present(&dir.join(META))
}

/// Removes the file at `path`; one already gone is no error.
fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Whether `dir` has no `meta` file at all (not merely one that cannot be read).
pub(crate) fn meta_missing(dir: &Path) -> bool {
    let found = fs::symlink_metadata(dir.join(META));
    matches!(found, Err(e) if e.kind() == io::ErrorKind::NotFound)
}

/// The hash key of a valid `meta` file, without changing anything.
pub(crate) fn read_meta(dir: &Path) -> Option<(u64, u64)> {
    let b = fs::read(dir.join(META)).ok()?;
    let valid = b.len() == 28
        && &b[..8] == META_MAGIC
        && crc32c::crc32c(&b[..24]).to_le_bytes() == b[24..28];
    let k0 = u64::from_le_bytes(b.get(8..16)?.try_into().ok()?);
    let k1 = u64::from_le_bytes(b.get(16..24)?.try_into().ok()?);
    valid.then_some((k0, k1))
}

/// 128 random bits from the standard library's randomly keyed hasher (no extra crate).
pub(crate) fn random_key() -> (u64, u64) {
    use std::hash::{BuildHasher, RandomState};
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (
        RandomState::new().hash_one(t),
        RandomState::new().hash_one((t, std::process::id())),
    )
}

/// Writes `name` via a temporary file, fsync and rename, so a crash leaves old or new.
fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join(name))?;
    File::open(dir)?.sync_all()
}

/// The size of the checkpoint file in `dir` (0 when there is none).
pub(crate) fn checkpoint_bytes(dir: &Path) -> u64 {
    fs::metadata(dir.join(CHECKPOINT)).map_or(0, |m| m.len())
}

/// The checkpoint, version 2: the index as it sits in RAM, shard by shard, so that a
/// restart copies tables instead of re-inserting every entry, and each shard is usable
/// as soon as it is loaded (the first hit does not wait for the whole index).
///
/// ```text
/// 0   "SEPIACK2"
/// 8   crc32c of bytes 12..CK_HEADER (the header and the shard directory)
/// 12  watermark segment u32, 16 watermark offset u64: every record before it is reflected
/// 24  next sequence number u64
/// 32  shard count u32, pad u32
/// 40  per shard: byte length u64, crc32c u32, pad u32   (Index::dump_shard's bytes)
/// CK_HEADER: the shards, back to back
/// ```
///
/// Written only if it takes at most `room` bytes: `Ok(Ok(length))` when written,
/// `Ok(Err(length))` when it would not fit.
pub(crate) fn write_checkpoint(
    shared: &Shared,
    mark: (u32, u64),
    next_seq: u64,
    room: u64,
) -> io::Result<Result<u64, u64>> {
    let mut b = Vec::with_capacity(CK_HEADER + 17 * shared.index.len() + 64 * SHARDS);
    b.extend_from_slice(CK_MAGIC);
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(&mark.0.to_le_bytes());
    b.extend_from_slice(&mark.1.to_le_bytes());
    b.extend_from_slice(&next_seq.to_le_bytes());
    b.extend_from_slice(&(SHARDS as u32).to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    b.resize(CK_HEADER, 0);
    for i in 0..SHARDS {
        let from = b.len();
        shared.index.dump_shard(i, &mut b);
        let crc = crc32c::crc32c(&b[from..]);
        let (dir, len) = (CK_FIXED + 16 * i, (b.len() - from) as u64);
        b[dir..dir + 8].copy_from_slice(&len.to_le_bytes());
        b[dir + 8..dir + 12].copy_from_slice(&crc.to_le_bytes());
    }
    if b.len() as u64 > room {
        return Ok(Err(b.len() as u64));
    }
    let crc = crc32c::crc32c(&b[12..CK_HEADER]);
    b[8..12].copy_from_slice(&crc.to_le_bytes());
    write_durably(&shared.cfg.path, CHECKPOINT, &b)?;
    shared.counters.checkpoints.fetch_add(1, Relaxed);
    Ok(Ok(b.len() as u64))
}

/// Removes the checkpoint (its index loaded already): the next start scans every segment
/// summary until a new one is written.
pub(crate) fn remove_checkpoint(dir: &Path) -> io::Result<()> {
    remove_if_present(&dir.join(CHECKPOINT))
}

/// A checkpoint's header, read and verified; the shards are read one by one by [`Checkpoint::load`].
struct Checkpoint {
    file: File,
    mark: (u32, u64),
    next_seq: u64,
    /// Per shard: file offset, length, crc32c.
    shards: Vec<(u64, usize, u32)>,
}

impl Checkpoint {
    fn open(dir: &Path) -> Option<Checkpoint> {
        let file = File::open(dir.join(CHECKPOINT)).ok()?;
        let size = file.metadata().ok()?.len();
        let mut h = vec![0u8; CK_HEADER];
        segment::read_at(&file, &mut h, 0).ok()?;
        let le32 = |at: usize| u32::from_le_bytes(h[at..at + 4].try_into().expect("4"));
        let le64 = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().expect("8"));
        if &h[..8] != CK_MAGIC || crc32c::crc32c(&h[12..]) != le32(8) || le32(32) as usize != SHARDS
        {
            return None;
        }
        let mut at = CK_HEADER as u64;
        let mut shards = Vec::with_capacity(SHARDS);
        for i in 0..SHARDS {
            let len = le64(CK_FIXED + 16 * i);
            shards.push((at, usize::try_from(len).ok()?, le32(CK_FIXED + 16 * i + 8)));
            at = at.checked_add(len)?;
        }
        (at == size).then_some(Checkpoint {
            file,
            mark: (le32(12), le64(16)),
            next_seq: le64(24),
            shards,
        })
    }
}

/// A checkpoint being loaded, and what decides which of its entries stay out: shared with
/// the lookups while the load runs (`Shared::shard_source`), so that a lookup whose shard is
/// not in yet loads that shard itself (a fraction of a millisecond per million objects on
/// disk) rather than miss: a restart serves disk hits from its first request.
pub(crate) struct ShardSource {
    ck: Checkpoint,
    /// Segment ids on disk: `is_live[id - first]`, or (ids too far apart) a search of `live`.
    first: u32,
    is_live: Vec<bool>,
    live: Vec<u32>,
    /// Shard and tag of every key a later tombstone purged (as `Index::remove_all` matches).
    purged: std::collections::HashSet<(usize, u32)>,
    damaged: AtomicBool,
}

impl ShardSource {
    fn new(
        ck: Checkpoint,
        live: Vec<u32>,
        purged: std::collections::HashSet<(usize, u32)>,
    ) -> Self {
        // One array lookup per entry (a binary search over the segment ids cost ~15 ms per
        // million entries); ids are consecutive but for reclaimed or damaged ones.
        let first = live.first().copied().unwrap_or(0);
        let span = live.last().map_or(0, |&l| (l - first) as usize + 1);
        let mut is_live = vec![false; if span <= 1 << 20 { span } else { 0 }];
        if !is_live.is_empty() {
            for &id in &live {
                is_live[(id - first) as usize] = true;
            }
        }
        ShardSource {
            ck,
            first,
            is_live,
            live,
            purged,
            damaged: AtomicBool::new(false),
        }
    }

    fn keep(&self, shard: usize, s: &Slot) -> bool {
        let live = match self.is_live.get(s.seg().wrapping_sub(self.first) as usize) {
            Some(&known) => known,
            None => self.is_live.is_empty() && self.live.binary_search(&s.seg()).is_ok(),
        };
        live && (self.purged.is_empty() || !self.purged.contains(&(shard, s.tag())))
    }

    /// Loads shard `i` into the index unless another thread claimed it; a damaged shard
    /// marks the whole checkpoint damaged. The shard counts as loaded either way.
    pub(crate) fn load_shard(&self, shared: &Shared, i: usize) {
        let bit = 1u64 << i;
        if shared.shards_claimed.fetch_or(bit, AcqRel) & bit != 0 {
            return;
        }
        let (at, len, crc) = self.ck.shards[i];
        let mut b = vec![0u8; len];
        let ok = segment::read_at(&self.ck.file, &mut b, at).is_ok()
            && crc32c::crc32c(&b) == crc
            && shared
                .index
                .load_shard(i, &b, |s| self.keep(i, s))
                .is_some();
        if !ok {
            self.damaged.store(true, Relaxed);
        }
        // A purge since the start that found this shard not loaded yet: `purge` notes the
        // key before it removes, so either that removal saw the entry or this does.
        let since: Vec<u64> = shared
            .purged_while_loading
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .copied()
            .filter(|&h| shard_tag(h).0 == i)
            .collect();
        for h in since {
            shared.index.remove_all(h);
        }
        shared.shards_loaded.fetch_or(bit, Release);
    }

    /// Makes the shards loadable by lookups (none is in yet).
    fn publish(self: &Arc<Self>, shared: &Shared) {
        const _: () = assert!(SHARDS == 64, "one bit per shard in a u64");
        shared.shards_claimed.store(0, Relaxed);
        shared.shards_loaded.store(0, Release);
        // After the two stores: a lookup that finds the source finds its shard claimable.
        *shared.lock_shard_source() = Some(Arc::clone(self));
    }

    /// Loads every shard not claimed by a lookup, waits for those that were; false when a
    /// shard was damaged (the index then holds a part of the checkpoint).
    fn load_all(&self, shared: &Shared) -> bool {
        loop {
            let claimed = shared.shards_claimed.load(Acquire);
            if claimed == u64::MAX {
                break;
            }
            self.load_shard(shared, (!claimed).trailing_zeros() as usize);
        }
        while shared.shards_loaded.load(Acquire) != u64::MAX {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        *shared.lock_shard_source() = None;
        !self.damaged.load(Relaxed)
    }
}

/// How much lower than the writer's the recovery thread's CPU priority is (nice steps).
const RECOVERY_NICE_STEPS: i32 = 10;

/// [`recover`] on a thread of its own, which lowers its CPU priority below the event
/// loop's once the checkpoint is published.
///
/// Loading a million objects' index is 20-40 ms of CPU, while lookups already find the
/// published checkpoint (a lookup loads its own shard). A start pinned to one core (or a
/// busy machine) shared that core evenly between the two, and the first requests waited
/// for the loader's time slices (bench/RESULTS.md, "Issue 21, fifteenth stop"). At nice
/// +10 the event loop preempts the loader whenever it has work, and the loader still gets
/// ~10 % of a core that is busy serving. Not before the publication, which the first
/// lookups wait for. A thread of its own, because a thread cannot raise its priority again
/// without privilege and the writer must not stay low after the load.
pub(crate) fn recover_in_background(w: &mut Writer) -> io::Result<()> {
    std::thread::scope(|scope| {
        let loader = std::thread::Builder::new()
            .name("sepia-disk-recovery".into())
            .spawn_scoped(scope, || recover(w))?;
        loader
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Lowers the calling thread's CPU priority by `steps` nice levels (at most to 19), and
/// lets a thread that waits for the CPU have it. On Linux a thread id names one thread for
/// `setpriority(PRIO_PROCESS)` (not POSIX, which would set it for the whole process). A
/// refusal only leaves the priority as it was.
fn lower_priority(steps: i32) {
    let me = rustix::thread::gettid();
    let now = rustix::process::getpriority_process(Some(me)).unwrap_or(0);
    if let Err(e) = rustix::process::setpriority_process(Some(me), (now + steps).min(19)) {
        tracing::debug!("disk recovery: could not lower the thread's priority: {e}");
    }
    // The scheduler weighs a waiting thread against this one when either wakes or a tick
    // comes, not when a priority changes: an event loop woken a moment before (by the
    // publication) waited here up to 1.5 ms for the next tick.
    std::thread::yield_now();
}

/// Rebuilds the writer's view and the index, serving lookups as early as it can:
/// 1. the segments written after the checkpoint's watermark are opened and registered and
///    their summaries read (the torn last one scanned record by record and sealed at its
///    last valid record), so that the checkpoint's entries that a later tombstone purged
///    are left out;
/// 2. the checkpoint's shards become loadable: a lookup whose shard is not in yet loads it;
///    the rest runs at a lower CPU priority ([`recover_in_background`]);
/// 3. the segments before the watermark are opened and registered (meanwhile a lookup
///    opens the one it reads, `Shared::seg_unregistered`: opening a few hundred files took
///    10–28 ms at a million objects, and the first disk hit after a restart waited for
///    it, bench/RESULTS.md, "Issue 21, fourteenth stop"), and each has its footer checked
///    (one small read: the checkpoint holds its entries and the sequence numbers after
///    them); one without a valid footer is deleted with its entries rather than re-scanned
///    (re-indexing it could resurrect purged records; its records read meanwhile were
///    checked one by one, as every record is);
/// 4. the shards no lookup took are loaded;
/// 5. the later summaries are applied in order (inserts and tombstones).
///
/// Without a valid checkpoint every segment's summary is applied.
fn recover(w: &mut Writer) -> io::Result<()> {
    let started = Instant::now();
    let shared = Arc::clone(&w.shared);
    let dir = shared.cfg.path.clone();
    let _ = fs::remove_file(dir.join("checkpoint.tmp"));
    let ck = Checkpoint::open(&dir);
    if ck.is_none() {
        // Nothing for a lookup to wait for: what is on disk is indexed as it is found.
        shared.shards_loaded.store(u64::MAX, Release);
    }
    let ids = segment::list(&dir)?;
    let mark = ck.as_ref().map_or((0, 0), |c| c.mark);
    w.seq = ck.as_ref().map_or(1, |c| c.next_seq);
    // Without a checkpoint every segment is a later one (its summary is the index).
    let split = ck
        .as_ref()
        .map_or(0, |_| ids.partition_point(|&id| id < mark.0));
    let mut later = open_later(w, &ids[split..])?;
    w.next_seg = w.next_seg.max(mark.0);
    // Entries whose segment is gone, or that a later tombstone or a purge since the start
    // removed, stay out (a purge matches by shard and tag, as `Index::remove_all`).
    // Only tombstones after the watermark: the checkpoint holds the effect of those before it
    // (and a record of the key written after such a tombstone, which must stay).
    let purged: std::collections::HashSet<(usize, u32)> = later
        .iter()
        .flat_map(|(id, entries)| entries.iter().map(move |e| (*id, e)))
        .filter(|(id, e)| e.kind == KIND_TOMBSTONE && (*id != mark.0 || e.offset >= mark.1))
        .map(|(_, e)| shard_tag(e.hash))
        .collect();
    let source = ck.map(|c| Arc::new(ShardSource::new(c, ids.clone(), purged)));
    if let Some(source) = &source {
        source.publish(&shared);
    }
    let published_ms = started.elapsed().as_secs_f64() * 1e3;
    // The rest yields to serving (this thread is recovery's own: `recover_in_background`).
    lower_priority(RECOVERY_NICE_STEPS);
    let earlier = open_earlier(w, &ids[..split])?;
    let segments_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut live = check_earlier(w, earlier)?;
    live.extend(later.iter().map(|(id, _)| *id));
    let mut with_ck = false;
    if let Some(source) = source {
        if source.load_all(&shared) {
            with_ck = true;
            // A damaged earlier segment's entries in shards loaded after its removal.
            if live.len() < ids.len() {
                shared
                    .index
                    .retain(|s| live.binary_search(&s.seg()).is_ok());
            }
        } else {
            tracing::warn!(disk = %dir.display(), "damaged checkpoint: rebuilding the index from every segment");
            shared.index.retain(|_| false);
            later = rescan_all(w, &live)?;
        }
    }
    let from_checkpoint = shared.index.len();
    let checkpoint_ms = started.elapsed().as_secs_f64() * 1e3 - segments_ms;
    for (id, entries) in &later {
        let from = if with_ck && *id == mark.0 { mark.1 } else { 0 };
        if !with_ck || *id >= mark.0 {
            for e in entries.iter().filter(|e| e.offset >= from) {
                w.recovered(*id, e);
            }
        }
    }
    tracing::info!(
        disk = %dir.display(),
        objects = shared.index.len(),
        from_checkpoint,
        segments = live.len(),
        published_ms = format!("{published_ms:.1}"),
        segments_ms = format!("{segments_ms:.1}"),
        checkpoint_ms = format!("{checkpoint_ms:.1}"),
        ms = format!("{:.1}", started.elapsed().as_secs_f64() * 1e3),
        "disk cache index loaded"
    );
    Ok(())
}

/// A segment's id and entries, read from its summary or scanned.
type Entries = (u32, Vec<SummaryEntry>);
/// Segments before the watermark, with their sizes.
type Earlier = Vec<(Arc<SegFile>, u64)>;

/// Opens and registers the segments `ids` written before the checkpoint's watermark, with
/// their sizes (only their footers are checked, later).
fn open_earlier(w: &mut Writer, ids: &[u32]) -> io::Result<Earlier> {
    let shared = Arc::clone(&w.shared);
    let mut earlier = Vec::with_capacity(ids.len());
    for &id in ids {
        let seg = Arc::new(segment::open(&shared.cfg.path, id, false)?);
        let size = seg.file.metadata()?.len();
        earlier.push((Arc::clone(&seg), size));
        w.next_seg = w.next_seg.max(id + 1);
        register(&shared, seg);
    }
    Ok(earlier)
}

/// Opens and registers the segments `ids` written after the checkpoint's watermark (all of
/// them without a checkpoint), with the entries of each.
fn open_later(w: &mut Writer, ids: &[u32]) -> io::Result<Vec<Entries>> {
    let shared = Arc::clone(&w.shared);
    let mut later = Vec::with_capacity(ids.len());
    for &id in ids {
        let seg = Arc::new(segment::open(&shared.cfg.path, id, false)?);
        let size = seg.file.metadata()?.len();
        let (entries, size) = later_entries(&seg, size, shared.key)?;
        later.push((id, entries));
        w.sealed.insert(id, size);
        w.next_seg = w.next_seg.max(id + 1);
        register(&shared, seg);
    }
    Ok(later)
}

/// Checks the footers of the segments before the watermark; a damaged one is deleted with
/// its index entries. Returns the ids kept.
fn check_earlier(w: &mut Writer, earlier: Earlier) -> io::Result<Vec<u32>> {
    let shared = Arc::clone(&w.shared);
    let dir = &shared.cfg.path;
    let mut live = Vec::with_capacity(earlier.len());
    for (seg, size) in earlier {
        if segment::summary_at(&seg, size)?.is_none() {
            tracing::warn!(disk = %dir.display(), seg = seg.id, "damaged segment before the checkpoint: removed");
            shared.index.retain(|s| s.seg() != seg.id);
            forget(&shared, seg.id);
            fs::remove_file(segment::seg_path(dir, seg.id))?;
            continue;
        }
        w.sealed.insert(seg.id, size);
        live.push(seg.id);
    }
    Ok(live)
}

/// A later segment's entries: its summary, or (torn, the one being written at a crash) a
/// scan of its records, after which it is sealed. Returns them and the file's size.
fn later_entries(
    seg: &SegFile,
    size: u64,
    key: (u64, u64),
) -> io::Result<(Vec<SummaryEntry>, u64)> {
    match segment::read_summary(seg)? {
        Some((entries, _)) => Ok((entries, size)),
        None => {
            let (entries, end) = segment::scan(seg, key, 0)?;
            let size = segment::seal(seg, end, &entries)?;
            Ok((entries, size))
        }
    }
}

/// Every segment's entries, for a checkpoint found damaged after the segments before its
/// watermark were only footer-checked.
fn rescan_all(w: &mut Writer, live: &[u32]) -> io::Result<Vec<Entries>> {
    let mut all = Vec::with_capacity(live.len());
    for &id in live {
        let Some(seg) = w.shared.seg(id) else {
            continue;
        };
        let size = seg.file.metadata()?.len();
        let (entries, size) = later_entries(&seg, size, w.shared.key)?;
        w.sealed.insert(id, size);
        all.push((id, entries));
    }
    Ok(all)
}

fn forget(shared: &Shared, id: u32) {
    shared
        .segs
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&id);
}

fn register(shared: &Shared, seg: Arc<SegFile>) {
    shared
        .segs
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(seg.id, seg);
}

/// The index shard and tag a key hash lands on (see `index.rs`).
pub(crate) fn shard_tag(hash: u64) -> (usize, u32) {
    (hash as usize % SHARDS, (hash >> 32) as u32)
}
