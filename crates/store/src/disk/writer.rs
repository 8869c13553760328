//! The writer thread: the aggregation buffer, segment rotation, FIFO reclaim with
//! re-insertion of hot records, tombstones, flushes and checkpoints.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use super::config::META_BYTES;
use super::engine::{Admit, Cmd, Demoted, Locking, Shared};
use super::format::{RecordParts, SummaryEntry, KIND_OBJECT, KIND_TOMBSTONE};
use super::index::Loc;
use super::lock::{Busy, DirLock};
use super::segment::SegFile;

/// The segment being written.
pub(super) struct Active {
    pub(super) seg: Arc<SegFile>,
    /// Bytes reserved for it in the space accounting.
    pub(super) limit: u64,
    /// Logical end: records written plus those in the buffer.
    pub(super) end: u64,
    /// File offset of `buf[0]`.
    pub(super) buf_at: u64,
    pub(super) summary: Vec<SummaryEntry>,
}

/// The sealed segments' file sizes by id (oldest first), and their sum, kept rather than
/// summed when asked: the fill admission asks for each record it writes, and a 1 TiB disk
/// holds 65,536 segments of 16 MiB.
#[derive(Default)]
pub(crate) struct Sealed {
    sizes: BTreeMap<u32, u64>,
    bytes: u64,
}

impl Sealed {
    pub(crate) fn insert(&mut self, id: u32, size: u64) {
        let old = self.sizes.insert(id, size).unwrap_or(0);
        self.bytes = self.bytes - old + size;
    }

    pub(crate) fn remove(&mut self, id: u32) {
        self.bytes -= self.sizes.remove(&id).unwrap_or(0);
    }

    pub(crate) fn oldest(&self) -> Option<u32> {
        self.sizes.keys().next().copied()
    }

    /// The sealed segments' bytes on disk.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// A hot record taken out of a reclaimed segment (verified), with its key's hash and its
/// sequence number as its segment's summary gave them.
pub(super) struct Hot {
    pub(super) hash: u64,
    pub(super) seq: u64,
    pub(super) rec: Vec<u8>,
}

/// A written record's index entry, applied once its buffer is on disk; `newest`: see
/// `Writer::place`.
pub(super) struct Pending {
    pub(super) hash: u64,
    pub(super) loc: Loc,
    pub(super) newest: bool,
}

pub(crate) struct Writer {
    pub(crate) shared: Arc<Shared>,
    pub(super) active: Option<Active>,
    pub(super) buf: Vec<u8>,
    /// Index entries for records in `buf`, applied once the buffer is written.
    pub(super) pending: Vec<Pending>,
    pub(crate) seq: u64,
    pub(crate) next_seg: u32,
    /// Sealed segments, oldest first: the FIFO.
    pub(crate) sealed: Sealed,
    /// Hot records taken out of reclaimed segments, to re-append at the head.
    pub(super) reinsert: Vec<Hot>,
    pub(super) last_flush: Instant,
    last_checkpoint: Instant,
    pub(super) bytes_since_checkpoint: u64,
    /// The checkpoint file's size: kept room for until the next one replaces it.
    pub(super) checkpoint_bytes: u64,
    budget_window: (Instant, u64),
}

/// The writer thread: takes the directory's lock (waiting for it when another process
/// holds it), loads the index, then writes until `Shutdown`. The lock is held until this
/// returns (the engine is dropped) or the process ends.
pub(crate) fn run(shared: Arc<Shared>, lock: Locking) {
    let (_lock, waited) = match lock {
        Locking::Held(lock) => (lock, false),
        Locking::Waiting(busy) => match wait_for_lock(&shared, busy) {
            Some(lock) => {
                shared.owns_dir.store(true, Release);
                (lock, true)
            }
            None => {
                // Closed (or failed) before the other process let go: this process never
                // touches the directory. Commands are still answered.
                shared.counters.failed.store(true, Relaxed);
                shared.counters.loading.store(false, Release);
                return idle(&shared);
            }
        },
    };
    let mut w = Writer {
        shared,
        active: None,
        buf: Vec::new(),
        pending: Vec::new(),
        seq: 1,
        next_seg: 0,
        sealed: Sealed::default(),
        reinsert: Vec::new(),
        last_flush: Instant::now(),
        last_checkpoint: Instant::now(),
        bytes_since_checkpoint: 0,
        checkpoint_bytes: 0,
        budget_window: (Instant::now(), 0),
    };
    // A waiting process opened with a key of its own or the holder's; the holder may have
    // failed with the disk and disowned it since. A failure here disowns it again (the lock
    // is ours), and nothing is recovered.
    let adopted = match waited {
        true => super::recover::adopt_key(&w.shared.cfg.path, w.shared.key),
        false => Ok(()),
    };
    let recovered = (adopted.map_err(|e| ("open", e)))
        .and_then(|()| super::recover::recover_in_background(&mut w).map_err(|e| ("recovery", e)));
    // The checkpoint on disk may be larger than this run would make it, and the size or
    // the records' average smaller than the last run's: the segments give way at once.
    w.checkpoint_bytes = super::recover::checkpoint_bytes(&w.shared.cfg.path);
    let recovered = recovered.and_then(|()| w.fit_capacity().map_err(|e| ("recovery", e)));
    if let Err((what, e)) = recovered {
        w.shared.fault(what, &e);
    }
    // Whatever recovery did, no lookup waits for a checkpoint any more.
    w.shared.shards_loaded.store(u64::MAX, Release);
    w.shared.counters.loading.store(false, Release);
    w.publish_bytes();
    w.warn_if_short_of_space();
    w.serve();
}

/// How often a waiting writer tries the other process's lock again.
const LOCK_RETRY: Duration = Duration::from_millis(50);

/// Waits until the process holding the directory lets go (it checkpoints its index when it
/// stops, then exits); `None` when this engine is closed first or the lock file fails.
fn wait_for_lock(shared: &Shared, mut busy: Busy) -> Option<DirLock> {
    let dir = shared.cfg.path.display();
    let holder = busy.holder.map_or("?".to_string(), |p| p.to_string());
    tracing::info!(disk = %dir, holder, "disk cache held by the previous process: serving without it until it lets go");
    let started = Instant::now();
    loop {
        if shared.closed.load(Relaxed) {
            tracing::warn!(disk = %dir, "closed before the previous process let go of the disk cache");
            return None;
        }
        match busy.retry() {
            Ok(Ok(lock)) => {
                let waited_ms = started.elapsed().as_millis() as u64;
                tracing::info!(disk = %dir, waited_ms, "disk cache taken over: loading its index");
                return Some(lock);
            }
            Ok(Err(still)) => busy = still,
            Err(e) => {
                shared.fault("lock", &e);
                return None;
            }
        }
        std::thread::sleep(LOCK_RETRY);
    }
}

/// A writer that never got the directory: answers every command, writes nothing.
fn idle(shared: &Shared) {
    loop {
        let cmd = {
            let mut q = shared.lock_queue();
            loop {
                if let Some(cmd) = q.cmds.pop_front() {
                    take_accounting(&mut q, &cmd);
                    break cmd;
                }
                q = shared.wake.wait(q).unwrap_or_else(PoisonError::into_inner);
            }
        };
        match cmd {
            Cmd::Sync(_, done) | Cmd::Close(done) => drop(done.send(())),
            Cmd::Shutdown => return,
            _ => {}
        }
    }
}

impl Writer {
    fn serve(&mut self) {
        loop {
            let cmd = {
                let mut q = self.shared.lock_queue();
                loop {
                    if let Some(cmd) = q.cmds.pop_front() {
                        take_accounting(&mut q, &cmd);
                        break Some(cmd);
                    }
                    let interval = self.shared.cfg.flush_interval;
                    let waited = self.last_flush.elapsed();
                    if !self.buf.is_empty() && waited >= interval {
                        break None;
                    }
                    let timeout = if self.buf.is_empty() {
                        interval
                    } else {
                        interval - waited
                    };
                    let (guard, res) = self
                        .shared
                        .wake
                        .wait_timeout(q, timeout)
                        .unwrap_or_else(PoisonError::into_inner);
                    q = guard;
                    if res.timed_out() && q.cmds.is_empty() {
                        // Let `handle` flush or checkpoint when due.
                        break None;
                    }
                }
            };
            #[cfg(test)]
            if matches!(cmd, Some(Cmd::Crash)) {
                return;
            }
            let shutdown = matches!(cmd, Some(Cmd::Shutdown));
            if let Err(e) = self.handle(cmd) {
                self.shared.fault("write", &e);
            }
            if shutdown {
                return;
            }
        }
    }

    fn handle(&mut self, cmd: Option<Cmd>) -> io::Result<()> {
        let failed = self.shared.failed();
        match cmd {
            Some(Cmd::Write {
                hash,
                primary,
                object,
                admit,
                ..
            }) if !failed => self.write_object(hash, &primary, &*object, admit)?,
            Some(Cmd::Tombstone { hash, primary }) if !failed => {
                self.pending.retain(|p| p.hash != hash);
                let parts = RecordParts {
                    seq: 0,
                    kind: KIND_TOMBSTONE,
                    primary: &primary,
                    secondary: &[],
                    meta: &[],
                    head: &[],
                    body: &[],
                };
                self.append(hash, parts)?;
                // A purge must survive a kill -9: write it now rather than within a second.
                self.flush()?;
            }
            Some(Cmd::Sync(checkpoint, done)) => {
                if !failed {
                    self.flush()?;
                    if checkpoint {
                        self.checkpoint()?;
                    }
                }
                let _ = done.send(());
            }
            Some(Cmd::Close(done)) => {
                if !failed {
                    self.flush()?;
                    self.seal_active()?;
                    self.checkpoint()?;
                }
                let _ = done.send(());
            }
            // After `close`, only if something (a purge) was written since.
            Some(Cmd::Shutdown) if !failed && (self.active.is_some() || !self.buf.is_empty()) => {
                self.flush()?;
                self.seal_active()?;
                self.checkpoint()?;
            }
            _ => {}
        }
        if self.shared.failed() {
            // Nothing buffered will ever be written: dropped, or the serve loop, seeing a
            // buffer past its flush interval, would come straight back here (a busy loop).
            self.buf.clear();
            self.pending.clear();
        } else {
            if !self.buf.is_empty() && self.last_flush.elapsed() >= self.shared.cfg.flush_interval {
                self.flush()?;
            }
            let due = self.last_checkpoint.elapsed() >= self.shared.cfg.checkpoint_interval
                || self.bytes_since_checkpoint >= self.shared.cfg.checkpoint_every_bytes;
            if due && self.bytes_since_checkpoint > 0 {
                self.flush()?;
                self.checkpoint()?;
            }
        }
        Ok(())
    }

    /// Appends a demoted object's record, within the write budget. An unearned one only if
    /// its key has no record yet (one copy is enough: a copy written by `Admission::Fill`
    /// may have been placed while the object was fetched again, and a second record is
    /// written for nothing, and read once by the key's next lookup, which drops the older:
    /// `tiered/disk_read.rs`, `newest_usable`); by `Admission::Fill` only into room
    /// that needs no reclaim, and within the first half of the day's budget, so that
    /// earned objects keep the rest. Skipping those is the admission rule, not counted.
    fn write_object(
        &mut self,
        hash: u64,
        primary: &[u8],
        object: &dyn Demoted,
        admit: Admit,
    ) -> io::Result<()> {
        if admit != Admit::Earned && self.has_record(hash) {
            return Ok(());
        }
        let mut meta = Vec::new();
        object.encode_meta(&mut meta);
        // The body may be in a file of the memory tier's (`cache.sendfile_dir`, maybe
        // another file system): failing to read it is not this disk's fault, and a fault
        // would disown the disk. The object is not written; counted, and logged at the
        // 1st, 2nd, 4th, 8th... time, as a broken directory fails every such body.
        let body = match object.body_chunks() {
            Ok(body) => body,
            Err(e) => {
                let n = 1 + (self.shared.counters.unreadable_bodies).fetch_add(1, Relaxed);
                if n.is_power_of_two() {
                    let disk = self.shared.cfg.path.display();
                    tracing::warn!(%disk, so_far = n, "a body to write to disk could not be read: {e}");
                }
                return Ok(());
            }
        };
        let parts = RecordParts {
            seq: 0,
            kind: KIND_OBJECT,
            primary,
            secondary: object.secondary(),
            meta: &meta,
            head: object.head(),
            body: &body,
        };
        let len = parts.header().record_len();
        let fill = admit == Admit::Fill;
        let room = |w: &mut Self| w.has_unused_room(len) && w.within_budget(len, 2);
        if fill && !room(self) {
            return Ok(());
        }
        if !fill && !self.budget_allows(len) {
            self.shared.counters.budget_skips.fetch_add(1, Relaxed);
            return Ok(());
        }
        if self.append(hash, parts)? {
            if fill {
                self.shared.counters.fill_writes.fetch_add(1, Relaxed);
                self.shared
                    .counters
                    .fill_write_bytes
                    .fetch_add(len, Relaxed);
            }
            object.written(hash);
        }
        Ok(())
    }

    /// Logs when the file system cannot hold the disk's `size`: the disk would fail with
    /// ENOSPC before it is full and be given up (sooner with `Admission::Fill`, which fills
    /// an empty disk at once). Told once, at open; the disk is used all the same.
    fn warn_if_short_of_space(&self) {
        let Ok(fs) = rustix::fs::statvfs(&self.shared.cfg.path) else {
            return;
        };
        let free = fs.f_bavail.saturating_mul(fs.f_frsize);
        let held = self.sealed.bytes();
        let size = self.shared.cfg.size_bytes;
        if held.saturating_add(free) < size {
            tracing::warn!(
                disk = %self.shared.cfg.path.display(),
                size,
                held,
                free,
                "the file system has less free space than this disk's size: the disk will fail when the file system fills; lower its size"
            );
        }
    }

    pub(super) fn budget_allows(&mut self, size: u64) -> bool {
        self.within_budget(size, 1)
    }

    /// Takes `size` bytes from the day's write budget if that keeps the day's writes within
    /// `1 / share` of it.
    fn within_budget(&mut self, size: u64, share: u64) -> bool {
        let Some(budget) = self.shared.cfg.write_budget_bytes_per_day else {
            return true;
        };
        let (start, used) = &mut self.budget_window;
        if start.elapsed() >= Duration::from_secs(86_400) {
            (*start, *used) = (Instant::now(), 0);
        }
        if *used + size > budget / share {
            return false;
        }
        *used += size;
        true
    }

    pub(super) fn checkpoint(&mut self) -> io::Result<()> {
        let mut mark = self.mark();
        self.last_checkpoint = Instant::now();
        self.bytes_since_checkpoint = 0;
        loop {
            // The old checkpoint stays until the new one replaces it: both must fit beside
            // the segments (the one being written counted whole) within the size.
            let used = self.held_bytes() + self.checkpoint_bytes + META_BYTES;
            let room = self.shared.cfg.size_bytes.saturating_sub(used);
            match super::recover::write_checkpoint(&self.shared, mark, self.seq, room)? {
                Ok(written) => {
                    self.checkpoint_bytes = written;
                    break;
                }
                // Records smaller than the room kept for it assumed (it follows them only
                // as segments open): the oldest segments give way.
                Err(_) if self.sealed.oldest().is_some() => {
                    self.reclaim_oldest()?;
                    self.place_reinserts()?;
                    // Every record before the mark must be in the index it dumps.
                    self.flush()?;
                    mark = self.mark();
                }
                Err(bytes) => {
                    let disk = self.shared.cfg.path.display();
                    tracing::warn!(%disk, bytes, "index checkpoint does not fit within the disk's size: skipped");
                    break;
                }
            }
        }
        self.publish_bytes();
        Ok(())
    }

    /// Where the log ends now: every record before it is in the index or the buffer.
    fn mark(&self) -> (u32, u64) {
        match &self.active {
            Some(a) => (a.seg.id, a.end),
            None => (self.next_seg, 0),
        }
    }

    /// Whether a record of the key of `hash` is indexed, or placed and about to be (its
    /// tag's, as the index matches).
    pub(super) fn has_record(&self, hash: u64) -> bool {
        self.shared.index.contains(hash) || self.pending.iter().any(|p| p.hash == hash)
    }

    /// Bytes of segments on disk: the sealed ones, and the one being written counted whole.
    pub(super) fn held_bytes(&self) -> u64 {
        let active = self.active.as_ref().map_or(0, |a| a.limit);
        self.sealed.bytes() + active
    }

    /// Space for segments now: the size less the meta file, the checkpoint on disk and
    /// room for the next, which follows the records held (`DiskConfig::data_capacity`).
    pub(super) fn capacity(&self) -> u64 {
        let next = self.next_checkpoint_room();
        self.shared.cfg.data_capacity(self.checkpoint_bytes, next)
    }

    /// Room kept for the next checkpoint at the records held now.
    pub(super) fn next_checkpoint_room(&self) -> u64 {
        let written = self.sealed.bytes() + self.active.as_ref().map_or(0, |a| a.end);
        let (records, index_bytes) = self.shared.index.dump_bytes();
        let cfg = &self.shared.cfg;
        cfg.next_checkpoint_room(records, written, index_bytes)
    }

    /// The checkpoint on disk, for `log.rs` to give up when it is outsized.
    pub(super) fn drop_checkpoint(&mut self) -> io::Result<()> {
        super::recover::remove_checkpoint(&self.shared.cfg.path)?;
        self.checkpoint_bytes = 0;
        Ok(())
    }

    /// Publishes the bytes held and the space for segments, for the demotions' admission
    /// (`DiskEngine::enqueue_write`) and the stats.
    pub(crate) fn publish_bytes(&self) {
        let c = &self.shared.counters;
        c.bytes.store(self.held_bytes(), Relaxed);
        c.capacity.store(self.capacity(), Relaxed);
    }

    /// Re-indexes a record found by recovery (a fresh write replacing its key's older
    /// entries, as when it was written).
    pub(crate) fn recovered(&mut self, seg: u32, e: &SummaryEntry) {
        // Applied in log order: a record numbered past every earlier one was a fresh write
        // and replaced its key's older entries when it was indexed (`apply_pending`); a hot
        // record copied forward keeps its old number and does not.
        let newest = e.seq >= self.seq;
        self.seq = self.seq.max(e.seq + 1);
        if e.kind == KIND_TOMBSTONE {
            self.shared.index.remove_all(e.hash);
            return;
        }
        let purged = self
            .shared
            .purged_while_loading
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !purged.contains(&e.hash) {
            let loc = Loc {
                seg,
                offset: e.offset,
                len: e.len,
                hit: false,
                verified: false,
            };
            self.shared.index.add(e.hash, loc, newest);
        }
    }
}

/// The queue's books for a command the writer takes.
fn take_accounting(q: &mut super::engine::Queue, cmd: &Cmd) {
    match cmd {
        Cmd::Write { size, .. } => q.write_bytes -= size,
        Cmd::Tombstone { hash, .. } => {
            if let Some(n) = q.tombstones.get_mut(hash) {
                *n -= 1;
                if *n == 0 {
                    q.tombstones.remove(hash);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod sealed_tests {
    use super::Sealed;

    #[test]
    fn sealed_segments_keep_their_sum() {
        let mut s = Sealed::default();
        s.insert(3, 100);
        s.insert(1, 50);
        s.insert(3, 70); // an id inserted again (recovery's `rescan_all`) replaces its size
        assert_eq!((s.bytes(), s.oldest()), (120, Some(1)));
        s.remove(1);
        s.remove(9); // not there: nothing changes
        assert_eq!((s.bytes(), s.oldest()), (70, Some(3)));
        s.remove(3);
        assert_eq!((s.bytes(), s.oldest()), (0, None));
    }
}
