//! The S3-FIFO ghost queue: hashes of objects recently evicted from the small queue.
//!
//! An object that comes back while its hash is still here was evicted too early (it was
//! not a one-hit wonder after all), so it is re-admitted straight into the main queue.
//! Only 64-bit key hashes are kept, never the objects or their keys; the queue is bounded
//! by the summed sizes of the objects it remembers (the size of the main queue, as in the
//! S3-FIFO paper, measured in bytes because our objects differ in size).

use std::collections::VecDeque;

use hashbrown::HashTable;

/// One remembered eviction, in FIFO order.
struct GhostRecord {
    key: u64,
    seq: u64,
    size: u64,
}

pub(crate) struct Ghost {
    fifo: VecDeque<GhostRecord>,
    /// key hash -> sequence number of its newest record; a record whose sequence differs
    /// was superseded (re-remembered) or taken, and only its bytes are still counted.
    live: HashTable<(u64, u64)>,
    bytes: u64,
    capacity: u64,
    next_seq: u64,
}

impl Ghost {
    pub(crate) fn new(capacity_bytes: u64) -> Self {
        Ghost {
            fifo: VecDeque::new(),
            live: HashTable::new(),
            bytes: 0,
            capacity: capacity_bytes,
            next_seq: 0,
        }
    }

    /// Remembers that the object with hash `key` and accounted `size` was just evicted.
    pub(crate) fn remember(&mut self, key: u64, size: u64) {
        if size > self.capacity {
            return;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        match self.live.find_mut(key, |&(k, _)| k == key) {
            Some(entry) => entry.1 = seq,
            None => {
                self.live.insert_unique(key, (key, seq), |&(k, _)| k);
            }
        }
        self.fifo.push_back(GhostRecord { key, seq, size });
        self.bytes += size;
        while self.bytes > self.capacity {
            let Some(old) = self.fifo.pop_front() else {
                break;
            };
            self.bytes -= old.size;
            if let Ok(entry) = self
                .live
                .find_entry(old.key, |&(k, s)| k == old.key && s == old.seq)
            {
                entry.remove();
            }
        }
    }

    /// Whether `key` is remembered; a remembered key is forgotten (it is being re-admitted).
    pub(crate) fn take(&mut self, key: u64) -> bool {
        match self.live.find_entry(key, |&(k, _)| k == key) {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }

    #[cfg(test)]
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_until_taken() {
        let mut g = Ghost::new(1000);
        g.remember(1, 100);
        assert!(!g.take(2));
        assert!(g.take(1));
        assert!(!g.take(1), "a taken key is forgotten");
    }

    #[test]
    fn oldest_forgotten_when_over_capacity() {
        let mut g = Ghost::new(300);
        for key in 1..=4 {
            g.remember(key, 100);
        }
        assert!(g.bytes() <= 300);
        assert!(!g.take(1), "oldest record dropped");
        assert!(g.take(2));
        assert!(g.take(3));
        assert!(g.take(4));
    }

    #[test]
    fn re_remembering_refreshes_the_key() {
        let mut g = Ghost::new(300);
        g.remember(1, 100);
        g.remember(2, 100);
        g.remember(1, 100); // newer record for key 1
        g.remember(3, 100); // pushes out the first record of key 1 only
        assert!(g.take(1), "the newer record keeps key 1 alive");
        assert!(g.take(2));
        assert!(g.take(3));
    }

    #[test]
    fn larger_than_capacity_is_not_remembered() {
        let mut g = Ghost::new(50);
        g.remember(9, 51);
        assert!(!g.take(9));
        assert_eq!(g.bytes(), 0);
    }
}
