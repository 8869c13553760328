//! The disk tier's ghost: fingerprints of objects that left memory without earning a disk
//! place, remembered for about as many bytes as the disks hold, so that an object evicted a
//! second time within that horizon is written (issue 21: "seen again via the ghost queue").
//!
//! Memory's own S3-FIFO ghost remembers evictions for about the size of the memory tier: an
//! object asked for again after that was a miss, came back through the small queue and left
//! unearned again, never reaching a disk that could have held it for much longer. On a Zipf
//! trace with a 64 MiB memory and a 1 GiB disk, the disk then added 4 points of hit ratio
//! where the disk could hold the whole working set (bench/RESULTS.md, 2026-11-26).
//!
//! Two generations of 32-bit fingerprints, each holding at most half the horizon's bytes:
//! when the current one is full it becomes the old one and the old one is dropped (a FIFO
//! horizon of one to two halves, with no per-entry order to keep). A fingerprint collision
//! only writes an object that had not earned it. About 10 bytes per remembered object,
//! capped at [`MAX_ENTRIES`] per generation.

use std::collections::HashSet;

/// Fingerprints per generation at most (~160 MiB for both at the cap): a horizon beyond
/// this many objects is not remembered whole.
const MAX_ENTRIES: usize = 8 << 20;

pub(crate) struct DiskGhost {
    current: HashSet<u32>,
    old: HashSet<u32>,
    /// Bytes of the objects remembered in `current`.
    current_bytes: u64,
    /// Bytes a generation may remember: half the horizon.
    half: u64,
}

impl DiskGhost {
    /// A ghost whose horizon is `horizon_bytes` of evicted objects.
    pub(crate) fn new(horizon_bytes: u64) -> Self {
        DiskGhost {
            current: HashSet::new(),
            old: HashSet::new(),
            current_bytes: 0,
            half: (horizon_bytes / 2).max(1),
        }
    }

    /// Whether `hash` left memory unearned within the horizon; if not, remembers it (an
    /// object of `size` bytes). A `true` forgets it: it is being written now.
    pub(crate) fn seen_again(&mut self, hash: u64, size: u64) -> bool {
        let fp = (hash >> 32) as u32 ^ hash as u32;
        if self.current.remove(&fp) || self.old.remove(&fp) {
            return true;
        }
        if self.current_bytes >= self.half || self.current.len() >= MAX_ENTRIES {
            self.old = std::mem::take(&mut self.current);
            self.current_bytes = 0;
        }
        self.current.insert(fp);
        self.current_bytes += size;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_eviction_within_the_horizon_is_seen_and_an_old_one_is_not() {
        let mut g = DiskGhost::new(1_000);
        assert!(!g.seen_again(1, 100));
        assert!(g.seen_again(1, 100), "the second eviction is seen");
        assert!(
            !g.seen_again(1, 100),
            "seen once, then forgotten (it was written)"
        );
        // Fill past two generations (500 bytes each): key 1's memory goes.
        for k in 10..30 {
            assert!(!g.seen_again(k, 100));
        }
        assert!(!g.seen_again(1, 100), "beyond the horizon");
        // Generations of 500 bytes: 28 and 29 are in the current one, 23 to 27 in the old
        // one (both seen), 22 went with the generation before.
        assert!(g.seen_again(29, 100));
        assert!(g.seen_again(25, 100));
        assert!(!g.seen_again(22, 100));
    }
}
