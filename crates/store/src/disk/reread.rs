//! Which reads of a large record go past the page cache (`O_DIRECT`), and the small
//! table that remembers records read that way twice.
//!
//! Why: a read through the page cache of pages that are not there allocates, charges and
//! inserts a page per 4 KiB and copies them out; a 64 KiB verified record re-read after its
//! pages were evicted cost ~25 % more CPU per hit than its first read past the page cache
//! (0.75 of fio's direct IOPS against 0.87, bench/RESULTS.md 2026-11-27). Large bodies are
//! not promoted into memory (they leave by `sendfile` from their segment, which needs their
//! pages cached), so the page cache is their only memory tier: a record read past it every
//! time would never get back into it. Hence a doorkeeper, as in the memory tier's ghost
//! queue: a large record's first read, and its first uncached re-read, go past the page
//! cache; a record found uncached a second time since it was verified is hot, and is read
//! through the page cache so that its later hits are warm.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::index::Loc;
use super::record_read::CACHED_READ_MAX;
use super::segment::SegFile;

/// Records re-read past the page cache, by a 64-bit fingerprint of key hash and location,
/// direct-mapped (a newer record takes an older one's slot: the older is then read past the
/// page cache once more at its next uncached read, nothing worse). Lock-free: one atomic
/// swap per uncached re-read.
pub(crate) struct Rereads {
    slots: Box<[AtomicU64]>,
    shift: u32,
}

impl Rereads {
    /// A table sized for a disk of `disk_bytes`: a slot per 64 KiB of disk, between 1,024
    /// and 65,536 slots (8 KiB to 512 KiB).
    pub(crate) fn for_disk(disk_bytes: u64) -> Rereads {
        let n = (disk_bytes / (64 << 10))
            .clamp(1 << 10, 1 << 16)
            .next_power_of_two();
        Rereads {
            slots: (0..n).map(|_| AtomicU64::new(0)).collect(),
            shift: 64 - n.trailing_zeros(),
        }
    }

    /// Whether the record `(hash, seg, offset)` was noted before; notes it.
    pub(crate) fn seen_before(&self, hash: u64, seg: u32, offset: u64) -> bool {
        // Never 0, the empty slot's value.
        let print = (hash ^ (u64::from(seg) << 32) ^ (offset >> 4)) | 1;
        let slot = print.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift;
        self.slots[slot as usize].swap(print, Relaxed) == print
    }

    /// Whether the read of the record at `loc` (of key hash `hash`, in `seg`) goes past the
    /// page cache (see `segment::read_uncached_at`): only records above what the workers
    /// read themselves; their first read in this process; later, a read of one whose pages
    /// are not all cached (`cachestat`), unless it was read so before since verified (see
    /// the module's docs). Where `cachestat` is refused, verified records are read through
    /// the page cache.
    pub(crate) fn read_past_cache(&self, seg: &SegFile, loc: &Loc, hash: u64) -> bool {
        if loc.len <= CACHED_READ_MAX {
            return false;
        }
        if !loc.verified {
            return true;
        }
        match sepia_sys::cachestat::all_cached(&seg.file, loc.offset, loc.len) {
            Ok(false) => !self.seen_before(hash, loc.seg, loc.offset),
            Ok(true) | Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_seen_the_second_time_and_records_apart_are_not() {
        let r = Rereads::for_disk(1 << 30);
        assert_eq!(r.slots.len(), 16_384);
        assert!(!r.seen_before(0xdead_beef_1234_5678, 3, 4096));
        assert!(r.seen_before(0xdead_beef_1234_5678, 3, 4096));
        assert!(r.seen_before(0xdead_beef_1234_5678, 3, 4096));
        // Same key, another record of it (an older copy elsewhere): another fingerprint.
        assert!(!r.seen_before(0xdead_beef_1234_5678, 4, 4096));
        assert!(!r.seen_before(0xdead_beef_1234_5678, 3, 8192));
        assert!(!r.seen_before(0x1111_2222_3333_4444, 3, 4096));
    }

    #[test]
    fn the_table_stays_within_its_bounds_and_forgets_rather_than_confuses() {
        assert_eq!(Rereads::for_disk(0).slots.len(), 1 << 10);
        assert_eq!(Rereads::for_disk(1 << 40).slots.len(), 1 << 16);
        let r = Rereads::for_disk(0);
        // Many more records than slots: every lookup indexes within the table, and a
        // record never noted is never reported as seen (only forgotten ones are missed).
        for i in 0..100_000u64 {
            let hash = i.wrapping_mul(0x2545_F491_4F6C_DD1D);
            assert!(!r.seen_before(hash, 1, 0), "record {i}");
        }
    }
}
