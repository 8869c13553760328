//! The writer's log: placing records in segments through the aggregation buffer, rotating
//! and sealing segments, and FIFO reclaim with re-insertion of hot records.

use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use super::format::{self, RecordParts, SummaryEntry, FOOTER_LEN, KIND_OBJECT, SUMMARY_ENTRY};
use super::index::Loc;
use super::segment::{self, SegFile};
use super::writer::{Active, Hot, Pending, Writer};

impl Active {
    /// Whether a record of `len` bytes still fits, with its summary entry and the footer.
    fn takes(&self, len: u64) -> bool {
        let summary = (self.summary.len() as u64 + 1) * SUMMARY_ENTRY as u64;
        self.end + len + summary + FOOTER_LEN as u64 <= self.limit
    }
}

impl Writer {
    /// Encodes a record into the buffer, rotating segments as needed, then re-appends the
    /// hot records a reclaim took out (`take_hot`), each within the write budget and only
    /// if its key has no other record by then. Checked here, after this record is pending,
    /// since the reclaim ran while it was being placed: records are reclaimed oldest first
    /// and never copied past a newer one, so another record of the key is a newer response
    /// (or, rarely, another key with the same tag: then this one is a miss later, never a
    /// wrong answer), and a copy kept alive by its hits would outlive it once that one,
    /// never read, is dropped at its own reclaim. False when the record could not be
    /// placed (larger than the disk).
    pub(super) fn append(&mut self, hash: u64, mut parts: RecordParts<'_>) -> io::Result<bool> {
        parts.seq = self.seq;
        self.seq += 1;
        let start = self.buf.len();
        let h = format::encode(&parts, &mut self.buf);
        let encoded = self.buf.split_off(start);
        let placed = self.place(hash, h.kind, h.seq, encoded, true)?;
        self.place_reinserts()?;
        Ok(placed)
    }

    /// Re-appends the hot records a reclaim took out (see [`Writer::append`]).
    pub(super) fn place_reinserts(&mut self) -> io::Result<()> {
        while let Some(hot) = self.reinsert.pop() {
            if self.has_record(hot.hash) || !self.budget_allows(hot.rec.len() as u64) {
                continue;
            }
            self.place(hot.hash, KIND_OBJECT, hot.seq, hot.rec, false)?;
            self.shared.counters.reinserted.fetch_add(1, Relaxed);
        }
        Ok(())
    }

    /// Whether the disk still has room it has never used: another segment (one for a record
    /// of `len` bytes) would open beside the sealed ones and the one being written (counted
    /// whole) without reclaiming. What [`Admission::Fill`](super::config::Admission) writes
    /// unearned objects into. Room left in the segment being written does not count: once
    /// the disk is full, filling that segment with unearned objects would make the next one
    /// reclaim.
    pub(super) fn has_unused_room(&self, len: u64) -> bool {
        self.held_bytes() + self.segment_limit(len) <= self.shared.counters.capacity.load(Relaxed)
    }

    /// The size of a segment opened for a record of `len` bytes: the usual size, or the
    /// record's own with its summary entry and footer when it is larger.
    fn segment_limit(&self, len: u64) -> u64 {
        let own = len + (SUMMARY_ENTRY + FOOTER_LEN) as u64;
        self.shared.cfg.segment_bytes.max(own)
    }

    /// Places an encoded record; `newest`: it is its key's newest response (a record just
    /// appended, not a hot one copied forward with its old sequence number), so indexing it
    /// drops the key's older entries (`Writer::apply_pending`). A hot copy is never placed
    /// while its key has a newer record (`place_reinserts` skips those), so for copies the
    /// flag guards only against another key with the same tag.
    fn place(
        &mut self,
        hash: u64,
        kind: u8,
        seq: u64,
        rec: Vec<u8>,
        newest: bool,
    ) -> io::Result<bool> {
        let len = rec.len() as u64;
        if self.active.as_ref().is_some_and(|a| !a.takes(len)) {
            self.seal_active()?;
        }
        if self.active.is_none() && !self.open_segment(len)? {
            self.shared.counters.budget_skips.fetch_add(1, Relaxed);
            return Ok(false);
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
            let loc = Loc {
                seg: a.seg.id,
                offset,
                len,
                hit: false,
                verified: false,
            };
            self.pending.push(Pending { hash, loc, newest });
        }
        self.buf.extend_from_slice(&rec);
        self.shared.counters.writes.fetch_add(1, Relaxed);
        self.shared.counters.write_bytes.fetch_add(len, Relaxed);
        self.bytes_since_checkpoint += len;
        if self.buf.len() >= self.shared.cfg.write_buffer_bytes {
            self.flush()?;
        }
        Ok(true)
    }

    /// Opens a new segment with room for a record of `len`, reclaiming old ones for space.
    /// False when even an empty disk could not hold it.
    fn open_segment(&mut self, len: u64) -> io::Result<bool> {
        let limit = self.segment_limit(len);
        // Nothing is reclaimed for a record that would not fit even once every segment went
        // (the room kept for the checkpoint follows the records, so that is less than the
        // space now when they are large).
        let cfg = &self.shared.cfg;
        let emptied = cfg.data_capacity(self.checkpoint_bytes, cfg.next_checkpoint_room(0, 0, 0));
        if limit > emptied {
            return Ok(false);
        }
        while self.sealed.bytes() + limit > self.capacity() {
            if self.sealed.oldest().is_none() {
                return Ok(false);
            }
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

    /// Reclaims the oldest segments while those held take more than the space for segments
    /// (after recovery: the size lowered, or the checkpoint on disk larger than this run
    /// keeps room for), then re-appends their hot records.
    pub(super) fn fit_capacity(&mut self) -> io::Result<()> {
        let fits = |w: &Self| w.held_bytes() <= w.capacity();
        // The checkpoint goes first (its index is loaded already, and may be what takes
        // the room: the size lowered below it), and a new one replaces it below.
        let over = !fits(self);
        if over {
            self.drop_checkpoint()?;
        }
        while !fits(self) && self.sealed.oldest().is_some() {
            self.reclaim_oldest()?;
        }
        self.place_reinserts()?;
        // Indexed before the disk counts as loaded, so that a purge meanwhile finds them.
        self.flush()?;
        if over {
            self.checkpoint()?;
        }
        self.publish_bytes();
        Ok(())
    }

    /// Drops the oldest segment; its records that were hit since written are kept for
    /// re-appending at the head (FIFO with re-insertion), the rest leave the index.
    pub(super) fn reclaim_oldest(&mut self) -> io::Result<()> {
        let Some(id) = self.sealed.oldest() else {
            return Err(io::Error::other("no segment to reclaim"));
        };
        let seg = self
            .shared
            .segs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        self.sealed.remove(id);
        if let Some(seg) = seg {
            match segment::read_summary(&seg)? {
                Some((entries, _)) => self.take_hot(&seg, &entries)?,
                None => {
                    self.shared.index.retain(|s| s.seg() != id);
                }
            }
        }
        std::fs::remove_file(segment::seg_path(&self.shared.cfg.path, id))?;
        if let Some(hook) = &*self
            .shared
            .on_reclaim
            .read()
            .unwrap_or_else(PoisonError::into_inner)
        {
            hook(id);
        }
        self.publish_bytes();
        Ok(())
    }

    /// Takes the hot records (hit since written, small) of a segment being reclaimed out of
    /// the index, for `append` to re-append. A re-appended record keeps its sequence number:
    /// it is the same response, and a lookup serves the newest record of a key by that
    /// number (`tiered/disk_read.rs`, `newest_usable`), so a copy never outranks a newer
    /// response written meanwhile.
    fn take_hot(&mut self, seg: &SegFile, entries: &[SummaryEntry]) -> io::Result<()> {
        let small = self.shared.cfg.segment_bytes / 2;
        for e in entries.iter().filter(|e| e.kind == KIND_OBJECT) {
            let Some(loc) = self.shared.index.remove_exact(e.hash, seg.id, e.offset) else {
                continue;
            };
            if !loc.hit || e.len > small {
                continue;
            }
            let mut rec = vec![0u8; e.len as usize];
            segment::read_at(&seg.file, &mut rec, e.offset)?;
            let verified = format::verify_prefix(&rec);
            // A key another disk is home to now (`tiered/homes.rs`) is not kept here: its
            // lookups go there, and purges reach this disk only while its index holds it.
            let here = |h| self.shared.is_home(format::split_prefix(h, &rec).primary);
            if verified.as_ref().is_some_and(here) {
                self.reinsert.push(Hot {
                    hash: e.hash,
                    seq: e.seq,
                    rec,
                });
            }
        }
        Ok(())
    }

    pub(super) fn seal_active(&mut self) -> io::Result<()> {
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
        // The records just indexed change the room kept for the checkpoint.
        self.publish_bytes();
        Ok(())
    }

    /// Indexes the written records, except those of keys with a tombstone still queued (a
    /// purge that came after them); under the queue lock, so a purge cannot slip between.
    /// A key's newest record replaces its older entries: only the newest is ever served
    /// (`tiered/disk_read.rs`, `newest_usable`), and a key is written again when it is
    /// fetched again before its first copy is indexed (a fill through a small memory tier
    /// left 1.32 entries per object, each costing index RAM until a lookup or a reclaim
    /// dropped it: bench/RESULTS.md, "Issue 21, fourteenth stop"). Another key with the same
    /// tag loses its entry too (a later miss, never a wrong answer; about one write in
    /// 2^38 / keys), as `place_reinserts` accepts.
    fn apply_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let q = self.shared.lock_queue();
        for p in self.pending.drain(..) {
            if !q.tombstones.contains_key(&p.hash) {
                self.shared.index.add(p.hash, p.loc, p.newest);
            }
        }
    }
}
