//! The writer thread: the aggregation buffer, segment rotation, FIFO reclaim with
//! re-insertion of hot records, tombstones, flushes and checkpoints.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use super::engine::{Cmd, Shared};
use super::format::{
    self, RecordParts, SummaryEntry, FOOTER_LEN, KIND_OBJECT, KIND_TOMBSTONE, SUMMARY_ENTRY,
};
use super::index::Loc;
use super::segment::{self, SegFile};

/// The segment being written.
struct Active {
    seg: Arc<SegFile>,
    /// Bytes reserved for it in the space accounting.
    limit: u64,
    /// Logical end: records written plus those in the buffer.
    end: u64,
    /// File offset of `buf[0]`.
    buf_at: u64,
    summary: Vec<SummaryEntry>,
}

pub(crate) struct Writer {
    pub(crate) shared: Arc<Shared>,
    active: Option<Active>,
    buf: Vec<u8>,
    /// Index entries for records in `buf`, applied once the buffer is written.
    pending: Vec<(u64, Loc)>,
    pub(crate) seq: u64,
    pub(crate) next_seg: u32,
    /// Sealed segments (id -> file size), oldest first: the FIFO.
    pub(crate) sealed: BTreeMap<u32, u64>,
    /// Hot records taken out of reclaimed segments, to re-append at the head.
    reinsert: Vec<Vec<u8>>,
    last_flush: Instant,
    last_checkpoint: Instant,
    bytes_since_checkpoint: u64,
    budget_window: (Instant, u64),
}

pub(crate) fn run(shared: Arc<Shared>) {
    let mut w = Writer {
        shared,
        active: None,
        buf: Vec::new(),
        pending: Vec::new(),
        seq: 1,
        next_seg: 0,
        sealed: BTreeMap::new(),
        reinsert: Vec::new(),
        last_flush: Instant::now(),
        last_checkpoint: Instant::now(),
        bytes_since_checkpoint: 0,
        budget_window: (Instant::now(), 0),
    };
    if let Err(e) = super::recover::recover(&mut w) {
        w.shared.fault("recovery", &e);
    }
    w.shared.counters.loading.store(false, Relaxed);
    w.publish_bytes();
    w.serve();
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
                ..
            }) if !failed => {
                let mut meta = Vec::new();
                object.encode_meta(&mut meta);
                let body = object.body_chunks()?;
                let size = object.disk_size();
                if !self.budget_allows(size) {
                    self.shared.counters.budget_skips.fetch_add(1, Relaxed);
                    return Ok(());
                }
                let parts = RecordParts {
                    seq: 0,
                    kind: KIND_OBJECT,
                    primary: &primary,
                    secondary: object.secondary(),
                    meta: &meta,
                    head: object.head(),
                    body: &body,
                };
                self.append(hash, parts)?;
            }
            Some(Cmd::Tombstone { hash, primary }) if !failed => {
                self.pending.retain(|(h, _)| *h != hash);
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
            Some(Cmd::Shutdown) if !failed => {
                self.flush()?;
                self.seal_active()?;
                self.checkpoint()?;
            }
            _ => {}
        }
        if !self.shared.failed() {
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

    fn budget_allows(&mut self, size: u64) -> bool {
        let Some(budget) = self.shared.cfg.write_budget_bytes_per_day else {
            return true;
        };
        let (start, used) = &mut self.budget_window;
        if start.elapsed() >= Duration::from_secs(86_400) {
            (*start, *used) = (Instant::now(), 0);
        }
        if *used + size > budget {
            return false;
        }
        *used += size;
        true
    }

    /// Encodes a record into the buffer, rotating segments as needed, then re-appends any
    /// hot records that a reclaim took out.
    fn append(&mut self, hash: u64, mut parts: RecordParts<'_>) -> io::Result<()> {
        parts.seq = self.seq;
        self.seq += 1;
        let start = self.buf.len();
        let h = format::encode(&parts, &mut self.buf);
        let encoded = self.buf.split_off(start);
        self.place(hash, h.kind, h.seq, encoded)?;
        while let Some(mut rec) = self.reinsert.pop() {
            let (hash, kind, seq) = self.reseq(&mut rec);
            self.place(hash, kind, seq, rec)?;
            self.shared.counters.reinserted.fetch_add(1, Relaxed);
        }
        Ok(())
    }

    /// Gives a re-inserted record a new sequence number (its checksum covers it).
    fn reseq(&mut self, rec: &mut [u8]) -> (u64, u8, u64) {
        let seq = self.seq;
        self.seq += 1;
        rec[8..16].copy_from_slice(&seq.to_le_bytes());
        let h = format::Header::parse(rec).expect("verified when taken");
        let crc =
            crc32c::crc32c_append(crc32c::crc32c(&rec[..4]), &rec[8..h.prefix_len() as usize]);
        rec[4..8].copy_from_slice(&crc.to_le_bytes());
        let primary = format::split_prefix(&h, rec).primary;
        (
            super::hash::siphash13(self.shared.key, primary),
            h.kind,
            seq,
        )
    }

    fn place(&mut self, hash: u64, kind: u8, seq: u64, rec: Vec<u8>) -> io::Result<()> {
        let len = rec.len() as u64;
        let needed = |a: &Active| {
            a.end + len + (a.summary.len() as u64 + 1) * SUMMARY_ENTRY as u64 + FOOTER_LEN as u64
        };
        if self.active.as_ref().is_some_and(|a| needed(a) > a.limit) {
            self.seal_active()?;
        }
        if self.active.is_none() && !self.open_segment(len)? {
            self.shared.counters.budget_skips.fetch_add(1, Relaxed);
            return Ok(());
        }
        let a = self.active.as_mut().expect("opened above");
        let offset = a.end;
        a.end += len;
        a.summary.push(SummaryEntry {
            hash,
            seq,
            offset,
            len,
            kind,
        });
        if kind == KIND_OBJECT {
            self.pending.push((
                hash,
                Loc {
                    seg: a.seg.id,
                    offset,
                    len,
                    hit: false,
                },
            ));
        }
        self.buf.extend_from_slice(&rec);
        self.shared.counters.writes.fetch_add(1, Relaxed);
        self.shared.counters.write_bytes.fetch_add(len, Relaxed);
        self.bytes_since_checkpoint += len;
        if self.buf.len() >= self.shared.cfg.write_buffer_bytes {
            self.flush()?;
        }
        Ok(())
    }

    /// Opens a new segment with room for a record of `len`, reclaiming old ones for space.
    /// False when even an empty disk could not hold it.
    fn open_segment(&mut self, len: u64) -> io::Result<bool> {
        let limit = self
            .shared
            .cfg
            .segment_bytes
            .max(len + (SUMMARY_ENTRY + FOOTER_LEN) as u64);
        let capacity = self.shared.cfg.data_capacity();
        if limit > capacity {
            return Ok(false);
        }
        while self.sealed.values().sum::<u64>() + limit > capacity {
            self.reclaim_oldest()?;
        }
        let id = self.next_seg;
        self.next_seg += 1;
        let seg = Arc::new(segment::open(&self.shared.cfg.path, id, true)?);
        self.shared
            .segs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, Arc::clone(&seg));
        self.active = Some(Active {
            seg,
            limit,
            end: 0,
            buf_at: 0,
            summary: Vec::new(),
        });
        self.publish_bytes();
        Ok(true)
    }

    /// Drops the oldest segment; its records that were hit since written are kept for
    /// re-appending at the head (FIFO with re-insertion), the rest leave the index.
    fn reclaim_oldest(&mut self) -> io::Result<()> {
        let Some((&id, _)) = self.sealed.iter().next() else {
            return Err(io::Error::other("no segment to reclaim"));
        };
        let seg = self
            .shared
            .segs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        self.sealed.remove(&id);
        if let Some(seg) = seg {
            match segment::read_summary(&seg)? {
                Some((entries, _)) => self.take_hot(&seg, &entries)?,
                None => {
                    self.shared.index.retain(|s| s.seg() != id);
                }
            }
        }
        std::fs::remove_file(segment::seg_path(&self.shared.cfg.path, id))?;
        self.publish_bytes();
        Ok(())
    }

    fn take_hot(&mut self, seg: &SegFile, entries: &[SummaryEntry]) -> io::Result<()> {
        let small = self.shared.cfg.segment_bytes / 2;
        for e in entries.iter().filter(|e| e.kind == KIND_OBJECT) {
            let Some(loc) = self.shared.index.remove_exact(e.hash, seg.id, e.offset) else {
                continue;
            };
            if !loc.hit || e.len > small || !self.budget_allows(e.len) {
                continue;
            }
            let mut rec = vec![0u8; e.len as usize];
            segment::read_at(&seg.file, &mut rec, e.offset)?;
            if format::verify_prefix(&rec).is_some() {
                self.reinsert.push(rec);
            }
        }
        Ok(())
    }

    fn seal_active(&mut self) -> io::Result<()> {
        self.flush()?;
        if let Some(a) = self.active.take() {
            let size = segment::seal(&a.seg, a.end, &a.summary)?;
            self.sealed.insert(a.seg.id, size);
            self.publish_bytes();
        }
        Ok(())
    }

    /// Writes the buffer and makes its records visible in the index.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.last_flush = Instant::now();
        let Some(a) = self.active.as_mut() else {
            return Ok(());
        };
        if !self.buf.is_empty() {
            a.seg.file.write_all_at(&self.buf, a.buf_at)?;
            a.buf_at += self.buf.len() as u64;
            self.buf.clear();
        }
        // A segment unlinked under us (or its directory gone) takes writes silently: check.
        if a.seg.file.metadata()?.nlink() == 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "segment file deleted under the cache",
            ));
        }
        self.apply_pending();
        Ok(())
    }

    /// Indexes the written records, except those of keys with a tombstone still queued (a
    /// purge that came after them); under the queue lock, so a purge cannot slip between.
    fn apply_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let q = self.shared.lock_queue();
        for (hash, loc) in self.pending.drain(..) {
            if !q.tombstones.contains_key(&hash) {
                self.shared.index.insert(hash, loc);
            }
        }
    }

    fn checkpoint(&mut self) -> io::Result<()> {
        let mark = match &self.active {
            Some(a) => (a.seg.id, a.end),
            None => (self.next_seg, 0),
        };
        super::recover::write_checkpoint(&self.shared, mark, self.seq)?;
        self.last_checkpoint = Instant::now();
        self.bytes_since_checkpoint = 0;
        Ok(())
    }

    pub(crate) fn publish_bytes(&self) {
        let active = self.active.as_ref().map_or(0, |a| a.limit);
        self.shared
            .counters
            .bytes
            .store(self.sealed.values().sum::<u64>() + active, Relaxed);
    }

    /// Re-indexes a record found by recovery.
    pub(crate) fn recovered(&mut self, seg: u32, e: &SummaryEntry) {
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
            self.shared.index.insert(
                e.hash,
                Loc {
                    seg,
                    offset: e.offset,
                    len: e.len,
                    hit: false,
                },
            );
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
