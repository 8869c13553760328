//! Disk tier settings and counters.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// One disk (a directory the engine owns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskConfig {
    /// Directory for the segment files, the checkpoint and the `meta` file (created if missing).
    pub path: PathBuf,
    /// Every byte the engine keeps in `path` (segments, summaries, checkpoints) stays within this.
    pub size_bytes: u64,
    /// Segment size (the unit of FIFO reclaim); a record larger than this gets a segment of
    /// its own, as large as it needs.
    pub segment_bytes: u64,
    /// Aggregation buffer: records are written in pieces of about this size.
    pub write_buffer_bytes: usize,
    /// The buffer is written at least this often: the most a kill -9 can lose.
    pub flush_interval: Duration,
    /// The index is checkpointed this often...
    pub checkpoint_interval: Duration,
    /// ...or after this many bytes were written, whichever comes first.
    pub checkpoint_every_bytes: u64,
    /// Bytes written per day at most (flash endurance); demotions beyond it are skipped.
    pub write_budget_bytes_per_day: Option<u64>,
    /// Which objects leaving memory the disk takes (see [`Admission`]).
    pub admission: Admission,
    /// Objects waiting to be written may hold at most this many bytes; more are dropped.
    pub queue_bytes: u64,
    /// How long after the open a lookup may wait for the checkpoint to become loadable
    /// rather than miss (see `DiskEngine::maybe_has`): recovery reads the summaries written
    /// after the checkpoint first, well under a millisecond after a clean stop; far more
    /// means something is wrong, and lookups go back to missing.
    pub publish_wait: Duration,
}

impl DiskConfig {
    /// Defaults for a disk of `size_bytes` at `path`.
    pub fn new(path: impl Into<PathBuf>, size_bytes: u64) -> Self {
        DiskConfig {
            path: path.into(),
            size_bytes,
            segment_bytes: 16 << 20,
            write_buffer_bytes: 1 << 20,
            flush_interval: Duration::from_secs(1),
            checkpoint_interval: Duration::from_secs(60),
            checkpoint_every_bytes: 1 << 30,
            write_budget_bytes_per_day: None,
            admission: Admission::Fill,
            queue_bytes: 32 << 20,
            publish_wait: Duration::from_millis(100),
        }
    }

    /// The most descriptors this disk holds open: a segment file per `segment_bytes` of its
    /// size (a larger record's segment is as large as it, so never more), and its lock,
    /// `meta`, checkpoint and directory.
    pub fn open_files(&self) -> u64 {
        self.size_bytes / self.segment_bytes.max(1) + 4
    }

    /// Room kept for the next index checkpoint: half again the larger of the index's own
    /// checkpoint now (`index_bytes`, what `Index::dump_bytes` says) and the checkpoint of
    /// the records a full disk would hold at their average size so far (`records` records
    /// taking `record_bytes`, blended with a guess of 64 records of 4 KiB: 17 bytes each,
    /// `Index::dump_shard`), plus the fixed part. The checkpoint on disk stays until the
    /// next replaces it (`recover::write_checkpoint`), so it is kept room for besides
    /// ([`DiskConfig::data_capacity`]).
    ///
    /// Why not a fixed share of the size: a checkpoint is ~0.1 % of the records it indexes
    /// at 15 KiB a record, so the `size / 32` kept before left 3 % of every disk unused, and
    /// that 3 % was the replayer's margin over LRU at 64 + 384 MiB (bench/RESULTS.md,
    /// twelfth stop). A checkpoint that does not fit after all (records far smaller than
    /// the average so far) is skipped, never written past the size.
    pub(crate) fn next_checkpoint_room(
        &self,
        records: u64,
        record_bytes: u64,
        index_bytes: u64,
    ) -> u64 {
        const ENTRY: u64 = 17; // a 16-byte slot and its bit in the occupancy bitmap
        let average = ((record_bytes + (64 << 12)) / (records + 64)).max(64);
        let full = ENTRY * (self.size_bytes / average);
        ((CHECKPOINT_FIXED + full.max(index_bytes)) * 3 / 2).max(16 << 10)
    }

    /// Space for segments: the size less the meta file, the checkpoint on disk
    /// (`checkpoint` bytes) and the room kept for the next one (`next`, see
    /// [`DiskConfig::next_checkpoint_room`]).
    pub(crate) fn data_capacity(&self, checkpoint: u64, next: u64) -> u64 {
        self.size_bytes
            .saturating_sub(META_BYTES + checkpoint + next)
    }

    /// [`DiskConfig::data_capacity`] of an empty disk, before recovery knows better.
    pub(crate) fn initial_capacity(&self) -> u64 {
        self.data_capacity(0, self.next_checkpoint_room(0, 0, 0))
    }
}

/// A checkpoint's header and shard directory, rounded up.
const CHECKPOINT_FIXED: u64 = 4 << 10;

/// What the `meta` file takes on disk (one block).
pub(crate) const META_BYTES: u64 = 4096;

/// Which objects leaving memory a disk takes. Earned ones always (hit while in memory, or
/// seen leaving unearned before: `tiered.rs`, `disk_ghost.rs`); this decides the rest.
///
/// Why `Fill` is the default: space a disk has never used serves nobody. With earned
/// objects only, an object asked for a second time after memory forgot it is a miss even
/// when the disk had room for it, and on the replayer's Zipf trace that left a 384 MiB disk
/// a third empty and its hit ratio 5 points below LRU of the same total size
/// (bench/RESULTS.md, 2026-11-26 and 2026-11-27).
///
/// What it costs: unearned objects are written only into room the disk would not have to
/// reclaim, so they never push anything out. A full disk stays full (each new segment
/// reclaims the oldest) and then takes earned objects only; room comes back only by a
/// partly filled segment sealed at a stop (at most a segment per restart) or a reclaim that
/// freed more than a segment (a large object's). So the extra writes are about one disk's
/// worth when it first fills, and little after; each day within half the write budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Admission {
    /// While the disk has room it would not have to reclaim, every object leaving memory is
    /// written: unearned ones within half the day's write budget, while the disk index is
    /// loaded, and only into the first half of the write queue, which leaves the other half
    /// to earned ones. Once the disk is full, only earned ones.
    #[default]
    Fill,
    /// Only earned objects, from the start: for devices whose writes are scarcer than
    /// their space.
    Earned,
}

/// A snapshot of one disk's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Objects in the index.
    pub objects: u64,
    /// Bytes of segments on disk (reserved for the one being written).
    pub bytes: u64,
    /// RAM held by the index tables.
    pub index_bytes: u64,
    /// Record reads (lookups that found a candidate in the index).
    pub reads: u64,
    /// Reads that returned a verified object with the right key.
    pub hits: u64,
    /// Records written (demotions and re-insertions).
    pub writes: u64,
    /// Bytes written to segments.
    pub write_bytes: u64,
    /// Hot records re-written at the head when their segment was reclaimed.
    pub reinserted: u64,
    /// Demotions skipped by the daily write budget.
    pub budget_skips: u64,
    /// Records of unearned objects written into room the disk had not used
    /// ([`Admission::Fill`]), and their bytes: part of `writes` and `write_bytes`.
    pub fill_writes: u64,
    pub fill_write_bytes: u64,
    /// Demotions dropped because the write queue was full.
    pub queue_drops: u64,
    /// Demotions not written because their body, in a file of the memory tier's
    /// (`cache.sendfile_dir`), could not be read.
    pub unreadable_bodies: u64,
    /// Records that failed a checksum (dropped from the index; a miss).
    pub checksum_failures: u64,
    /// I/O faults (ENOSPC, EIO, files gone or truncated).
    pub faults: u64,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// 1 when the disk was given up after a fault.
    pub failed: u64,
    /// 1 while the index is being loaded.
    pub loading: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) bytes: AtomicU64,
    /// Space for segments now (`DiskConfig::data_capacity` at the records held), published
    /// by the writer.
    pub(crate) capacity: AtomicU64,
    pub(crate) reads: AtomicU64,
    pub(crate) hits: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) write_bytes: AtomicU64,
    pub(crate) reinserted: AtomicU64,
    pub(crate) budget_skips: AtomicU64,
    pub(crate) fill_writes: AtomicU64,
    pub(crate) fill_write_bytes: AtomicU64,
    pub(crate) queue_drops: AtomicU64,
    pub(crate) unreadable_bodies: AtomicU64,
    pub(crate) checksum_failures: AtomicU64,
    pub(crate) faults: AtomicU64,
    pub(crate) checkpoints: AtomicU64,
    pub(crate) failed: AtomicBool,
    pub(crate) loading: AtomicBool,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> DiskStats {
        DiskStats {
            bytes: self.bytes.load(Relaxed),
            reads: self.reads.load(Relaxed),
            hits: self.hits.load(Relaxed),
            writes: self.writes.load(Relaxed),
            write_bytes: self.write_bytes.load(Relaxed),
            reinserted: self.reinserted.load(Relaxed),
            budget_skips: self.budget_skips.load(Relaxed),
            fill_writes: self.fill_writes.load(Relaxed),
            fill_write_bytes: self.fill_write_bytes.load(Relaxed),
            queue_drops: self.queue_drops.load(Relaxed),
            unreadable_bodies: self.unreadable_bodies.load(Relaxed),
            checksum_failures: self.checksum_failures.load(Relaxed),
            faults: self.faults.load(Relaxed),
            checkpoints: self.checkpoints.load(Relaxed),
            failed: u64::from(self.failed.load(Relaxed)),
            loading: u64::from(self.loading.load(Relaxed)),
            ..DiskStats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DiskConfig;

    /// The room for the next checkpoint follows the records' average size: small beside
    /// large records, large beside tiny ones, and never less than the index's own now.
    #[test]
    fn the_checkpoint_room_follows_the_records_average_size() {
        let c = DiskConfig::new("/x", 1 << 30);
        let share = |records, bytes, index| {
            c.next_checkpoint_room(records, bytes, index) as f64 / (1u64 << 30) as f64
        };
        // 15 KiB records (the replayer's average): 0.16 % of the disk (with the checkpoint
        // on disk, ~0.3 %), where size/32 kept 3.1 %.
        let mid = share(10_000, 10_000 * (15 << 10), 170_000);
        assert!(mid < 0.002, "{mid}");
        // With no records, 4 KiB is assumed: 0.6 %.
        assert!(
            (0.005..0.007).contains(&share(0, 0, 0)),
            "{}",
            share(0, 0, 0)
        );
        // 200-byte records: a checkpoint of 5.4M entries, and half again: 13 % (with the
        // checkpoint on disk, a fifth).
        let tiny = share(1_000_000, 200_000_000, 17_000_000);
        assert!((0.1..0.15).contains(&tiny), "{tiny}");
        // An index larger than the average predicts (dead records inflating it) counts.
        let big_index = share(10_000, 10_000 * (15 << 10), 100 << 20);
        assert!(big_index > 0.14, "{big_index}");
        assert_eq!(
            DiskConfig::new("/x", 64 << 10).next_checkpoint_room(0, 0, 0),
            16 << 10
        );
        let room = c.next_checkpoint_room(0, 0, 0);
        assert_eq!(
            c.initial_capacity(),
            c.size_bytes - room - super::META_BYTES
        );
    }
}
