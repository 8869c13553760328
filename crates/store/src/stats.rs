//! Store counters: relaxed atomics kept per shard (so a hit bumps a counter on the cache
//! line its shard lock already owns) and summed into a [`StoreStats`] snapshot on demand.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A point-in-time snapshot of the store's counters.
///
/// Counters are summed shard by shard without a global lock, so under concurrent traffic
/// the fields are individually exact but not taken at one single instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Lookups answered with a stored object.
    pub hits: u64,
    /// Lookups that found nothing and started a fill (the caller fetches from the origin).
    pub misses: u64,
    /// Lookups that found nothing stored but joined a fill already in progress.
    pub collapsed: u64,
    /// Objects committed into the store.
    pub insertions: u64,
    /// Objects evicted to stay within the byte budget.
    pub evictions: u64,
    /// Objects removed by `purge`, `remove_variant` or replacement by a newer fill.
    pub removals: u64,
    /// Fills not committed because the object exceeded the maximum object size.
    pub rejected_too_big: u64,
    /// Fills that ended in an abort (origin failure, length mismatch, dropped writer).
    pub aborted_fills: u64,
    /// Fills whose writer declared the response not shareable (waiters released).
    pub released_fills: u64,
    /// Bytes currently accounted against the budget.
    pub bytes: u64,
    /// Objects (variants) currently stored.
    pub objects: u64,
    /// The configured byte budget.
    pub budget_bytes: u64,
    /// Bodies currently kept in sealed files (served with sendfile).
    pub body_files: u64,
    /// Large bodies kept in memory because the kernel refused a body file.
    pub body_file_errors: u64,
    /// Disk tier (zero for a memory-only store): objects in the disk indexes.
    pub disk_objects: u64,
    /// Bytes of segment files on the disks.
    pub disk_bytes: u64,
    /// RAM held by the disk indexes.
    pub disk_index_bytes: u64,
    /// Disk records read for lookups.
    pub disk_reads: u64,
    /// Disk reads that returned a verified object of the right key.
    pub disk_hits: u64,
    /// Of the reads from the device (not the worker's own page-cache reads), those made
    /// through the io_uring (`cache.disk_io`): read or failed.
    pub disk_ring_reads: u64,
    /// Records written to disk (demotions and re-insertions).
    pub disk_writes: u64,
    /// Bytes written to disk.
    pub disk_write_bytes: u64,
    /// Of `disk_writes` and `disk_write_bytes`: objects that had not earned a disk place,
    /// written into room the disk had never used (`Admission::Fill`).
    pub disk_fill_writes: u64,
    pub disk_fill_write_bytes: u64,
    /// Demotions skipped: daily write budget spent, the write queue full, or a body in a
    /// file of the memory tier's that could not be read.
    pub disk_write_skips: u64,
    /// Disk records that failed their checksum (served as misses, dropped).
    pub disk_checksum_failures: u64,
    /// Disk I/O faults (ENOSPC, EIO, files gone).
    pub disk_faults: u64,
    /// Disks given up after a fault.
    pub disks_failed: u64,
}

/// One shard's counters.
#[derive(Debug, Default)]
pub(crate) struct ShardCounters {
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) collapsed: AtomicU64,
    pub(crate) insertions: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) removals: AtomicU64,
    pub(crate) rejected_too_big: AtomicU64,
    pub(crate) aborted_fills: AtomicU64,
    pub(crate) released_fills: AtomicU64,
}

#[inline]
pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
}

impl ShardCounters {
    /// Adds this shard's counters into `into`.
    pub(crate) fn add_to(&self, into: &mut StoreStats) {
        into.hits += self.hits.load(Relaxed);
        into.misses += self.misses.load(Relaxed);
        into.collapsed += self.collapsed.load(Relaxed);
        into.insertions += self.insertions.load(Relaxed);
        into.evictions += self.evictions.load(Relaxed);
        into.removals += self.removals.load(Relaxed);
        into.rejected_too_big += self.rejected_too_big.load(Relaxed);
        into.aborted_fills += self.aborted_fills.load(Relaxed);
        into.released_fills += self.released_fills.load(Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_sum_into_the_snapshot() {
        let a = ShardCounters::default();
        let b = ShardCounters::default();
        bump(&a.hits);
        bump(&a.hits);
        bump(&b.hits);
        bump(&b.misses);
        bump(&a.evictions);
        bump(&b.released_fills);
        let mut s = StoreStats::default();
        a.add_to(&mut s);
        b.add_to(&mut s);
        assert_eq!(s.hits, 3);
        assert_eq!(s.misses, 1);
        assert_eq!(s.evictions, 1);
        assert_eq!(s.released_fills, 1);
        assert_eq!(s.insertions, 0);
    }
}
