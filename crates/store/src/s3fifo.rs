//! Size-aware S3-FIFO eviction (Yang et al., "FIFO queues are all you need for cache
//! eviction", SOSP 2023), one instance per shard.
//!
//! Why S3-FIFO and why written here: a hit must not allocate nor take a write lock. In
//! S3-FIFO a hit only bumps a 2-bit frequency counter (an atomic, so it works under the
//! shard's *read* lock); all queue movement happens at eviction time, on the insert path.
//! LRU needs a list move (write lock) per hit, and W-TinyLFU crates keep per-hit sketch and
//! buffer state of their own. The algorithm is ~150 lines, so owning it costs less than
//! adapting a crate whose values and locking model are not ours.
//!
//! Queues: new objects enter the *small* FIFO (10% of the shard's share of the budget).
//! When the small queue is over its share, its oldest object is either promoted to *main*
//! (it was hit at least once since insertion) or evicted, leaving its hash in the *ghost*
//! queue; most one-hit wonders leave here without disturbing main. An object whose hash is
//! still in the ghost queue is admitted straight into main. Main is a FIFO with
//! reinsertion: an object with a non-zero frequency is decremented and moved to the back
//! instead of being evicted. Removed objects leave stale queue entries that are skipped (a
//! generation number tells them apart) and compacted away when they pile up.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

use crate::ghost::Ghost;

/// Frequency saturates here (2 bits, as in the paper).
const MAX_FREQ: u8 = 3;

/// A handle to a cached value: slot index plus the generation that slot had when the value
/// was inserted, so a handle to a removed value can never reach its slot's next occupant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotId {
    index: u32,
    generation: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Queue {
    Small,
    Main,
}

struct Slot<V> {
    value: Option<V>,
    size: u64,
    freq: AtomicU8,
    generation: u32,
    queue: Queue,
    ghost_key: u64,
}

/// A value that left the cache, with the size it was accounted at.
#[derive(Debug)]
pub(crate) struct Removed<V> {
    pub(crate) value: V,
    pub(crate) size: u64,
    /// It was in the main queue: hit while in the small one, or re-admitted by the ghost
    /// queue (its key was seen again). What the disk tier calls "earned a place on disk".
    pub(crate) earned: bool,
}

pub(crate) struct S3Fifo<V> {
    slots: Vec<Slot<V>>,
    free: Vec<u32>,
    small: VecDeque<SlotId>,
    main: VecDeque<SlotId>,
    small_bytes: u64,
    main_bytes: u64,
    live: usize,
    /// Queue entries whose slot was removed (each removal leaves exactly one).
    stale: usize,
    small_target: u64,
    ghost: Ghost,
}

impl<V> S3Fifo<V> {
    /// A policy for a cache of about `capacity_bytes` (this shard's share of the budget).
    pub(crate) fn new(capacity_bytes: u64) -> Self {
        let small_target = capacity_bytes / 10;
        S3Fifo {
            slots: Vec::new(),
            free: Vec::new(),
            small: VecDeque::new(),
            main: VecDeque::new(),
            small_bytes: 0,
            main_bytes: 0,
            live: 0,
            stale: 0,
            small_target,
            ghost: Ghost::new(capacity_bytes - small_target),
        }
    }

    /// Number of values held.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Sum of the sizes of the values held.
    pub(crate) fn bytes(&self) -> u64 {
        self.small_bytes + self.main_bytes
    }

    /// Adds a value of `size` bytes. `ghost_key` identifies the object across evictions (a
    /// hash of its keys): if it was recently evicted from the small queue, it goes to main.
    pub(crate) fn insert(&mut self, value: V, size: u64, ghost_key: u64) -> SlotId {
        let queue = if self.ghost.take(ghost_key) {
            Queue::Main
        } else {
            Queue::Small
        };
        let index = match self.free.pop() {
            Some(index) => {
                let slot = &mut self.slots[index as usize];
                slot.value = Some(value);
                slot.size = size;
                slot.freq.store(0, Relaxed);
                slot.queue = queue;
                slot.ghost_key = ghost_key;
                index
            }
            None => {
                let index = u32::try_from(self.slots.len())
                    .expect("more than u32::MAX objects in one shard");
                self.slots.push(Slot {
                    value: Some(value),
                    size,
                    freq: AtomicU8::new(0),
                    generation: 0,
                    queue,
                    ghost_key,
                });
                index
            }
        };
        let id = SlotId {
            index,
            generation: self.slots[index as usize].generation,
        };
        match queue {
            Queue::Small => {
                self.small.push_back(id);
                self.small_bytes += size;
            }
            Queue::Main => {
                self.main.push_back(id);
                self.main_bytes += size;
            }
        }
        self.live += 1;
        id
    }

    fn slot(&self, id: SlotId) -> Option<&Slot<V>> {
        self.slots
            .get(id.index as usize)
            .filter(|s| s.generation == id.generation && s.value.is_some())
    }

    /// The value behind `id`, if it is still held.
    #[inline]
    pub(crate) fn get(&self, id: SlotId) -> Option<&V> {
        self.slot(id).and_then(|s| s.value.as_ref())
    }

    /// Records a hit. Takes `&self`: the frequency is an atomic so hits work under a shared
    /// (read) lock, and it is only written while below the cap, so a hot object's counter
    /// stops bouncing between cores after three hits.
    #[inline]
    pub(crate) fn touch(&self, id: SlotId) {
        if let Some(slot) = self.slot(id) {
            let f = slot.freq.load(Relaxed);
            if f < MAX_FREQ {
                slot.freq.store(f + 1, Relaxed);
            }
        }
    }

    /// Replaces the value behind `id` in place (same queue position and frequency) and
    /// re-accounts it at `size`. Returns the old value, or gives `value` back if `id` is gone.
    pub(crate) fn replace(&mut self, id: SlotId, value: V, size: u64) -> Result<Removed<V>, V> {
        if self.slot(id).is_none() {
            return Err(value);
        }
        let slot = &mut self.slots[id.index as usize];
        let old_size = std::mem::replace(&mut slot.size, size);
        let old = slot.value.replace(value).expect("checked live above");
        let bytes = match slot.queue {
            Queue::Small => &mut self.small_bytes,
            Queue::Main => &mut self.main_bytes,
        };
        *bytes = *bytes - old_size + size;
        Ok(Removed {
            value: old,
            size: old_size,
            earned: slot.queue == Queue::Main,
        })
    }

    /// Removes the value behind `id` (purge, replacement). It does not enter the ghost
    /// queue: it was removed on purpose, not judged cold.
    pub(crate) fn remove(&mut self, id: SlotId) -> Option<Removed<V>> {
        self.slot(id)?;
        let removed = self.free_slot(id.index);
        self.stale += 1;
        if self.stale > 64 && self.stale > self.live {
            self.compact();
        }
        Some(removed)
    }

    /// Evicts one value by the S3-FIFO rules, or `None` when nothing is held.
    pub(crate) fn evict(&mut self) -> Option<Removed<V>> {
        loop {
            let from_small = !self.small.is_empty()
                && (self.small_bytes >= self.small_target || self.main.is_empty());
            let id = if from_small {
                self.small.pop_front()
            } else {
                self.main.pop_front()
            }?;
            if self.slot(id).is_none() {
                self.stale -= 1;
                continue;
            }
            let slot = &mut self.slots[id.index as usize];
            let freq = slot.freq.load(Relaxed);
            if from_small {
                if freq >= 1 {
                    // Hit while in probation: promote, and let it earn its keep in main.
                    slot.freq.store(0, Relaxed);
                    slot.queue = Queue::Main;
                    self.small_bytes -= slot.size;
                    self.main_bytes += slot.size;
                    self.main.push_back(id);
                    continue;
                }
                let (key, size) = (slot.ghost_key, slot.size);
                self.ghost.remember(key, size);
            } else if freq > 0 {
                slot.freq.store(freq - 1, Relaxed);
                self.main.push_back(id);
                continue;
            }
            return Some(self.free_slot(id.index));
        }
    }

    /// Empties the slot (its queue entry, if any, becomes stale) and recycles it.
    fn free_slot(&mut self, index: u32) -> Removed<V> {
        let slot = &mut self.slots[index as usize];
        let value = slot.value.take().expect("freeing a live slot");
        slot.generation = slot.generation.wrapping_add(1);
        match slot.queue {
            Queue::Small => self.small_bytes -= slot.size,
            Queue::Main => self.main_bytes -= slot.size,
        }
        self.live -= 1;
        self.free.push(index);
        Removed {
            value,
            size: slot.size,
            earned: slot.queue == Queue::Main,
        }
    }

    /// The values that earned a lower tier (see [`Removed::earned`]) or would when next
    /// judged: those in main, and those in small that were hit since they came in (the
    /// next eviction pass promotes them). Hottest first: main from its tail (the most
    /// recently promoted or reinserted), then the hit ones of small, newest first.
    pub(crate) fn earned(&self) -> impl Iterator<Item = &V> + '_ {
        let main = self.main.iter().rev().filter_map(|&id| self.get(id));
        let small = self.small.iter().rev().filter_map(|&id| {
            let slot = self.slot(id)?;
            (slot.freq.load(Relaxed) >= 1).then_some(slot.value.as_ref()?)
        });
        main.chain(small)
    }

    /// Drops stale queue entries so removals without evictions cannot grow the queues.
    fn compact(&mut self) {
        let slots = &self.slots;
        let live = |id: &SlotId| {
            let s = &slots[id.index as usize];
            s.generation == id.generation && s.value.is_some()
        };
        self.small.retain(live);
        self.main.retain(live);
        self.stale = 0;
    }

    #[cfg(test)]
    fn queue_lengths(&self) -> (usize, usize) {
        (self.small.len(), self.main.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Evicts everything and returns the values in eviction order.
    fn drain(c: &mut S3Fifo<u32>) -> Vec<u32> {
        std::iter::from_fn(|| c.evict().map(|r| r.value)).collect()
    }

    #[test]
    fn unhit_objects_leave_in_fifo_order() {
        let mut c = S3Fifo::new(1000);
        for v in 0..5 {
            c.insert(v, 10, v as u64);
        }
        assert_eq!(drain(&mut c), vec![0, 1, 2, 3, 4]);
        assert_eq!(c.len(), 0);
        assert_eq!(c.bytes(), 0);
    }

    #[test]
    fn hit_objects_outlive_one_hit_wonders() {
        // Table: which inserted values are hit before eviction starts, and which must be
        // the last survivors.
        let cases: &[(&[u32], &[u32])] =
            &[(&[2], &[2]), (&[0, 4], &[0, 4]), (&[1, 2, 3], &[1, 2, 3])];
        for (hit, survivors) in cases {
            let mut c = S3Fifo::new(1000);
            let ids: Vec<SlotId> = (0..6).map(|v| c.insert(v, 100, v as u64)).collect();
            for &h in *hit {
                c.touch(ids[h as usize]);
            }
            let order = drain(&mut c);
            let tail = &order[order.len() - survivors.len()..];
            let mut tail = tail.to_vec();
            tail.sort_unstable();
            assert_eq!(&tail, survivors, "hit {hit:?}: eviction order {order:?}");
        }
    }

    #[test]
    fn ghost_hit_readmits_into_main() {
        let mut c = S3Fifo::new(1000);
        c.insert(1, 100, 11);
        assert_eq!(c.evict().map(|r| r.value), Some(1)); // unhit: evicted, remembered
        c.insert(2, 100, 22);
        c.insert(1, 100, 11); // back while remembered: straight to main
        assert_eq!(c.queue_lengths(), (1, 1));
        // Small is over its 10% share, so the small object (2) goes first even though 1
        // was inserted later.
        assert_eq!(drain(&mut c), vec![2, 1]);
    }

    #[test]
    fn main_reinserts_hit_objects_before_evicting() {
        let mut c = S3Fifo::new(1000);
        let a = c.insert(1, 100, 1);
        let b = c.insert(2, 100, 2);
        c.insert(3, 100, 3);
        c.touch(a);
        c.touch(b);
        // a and b were hit in probation: promoted; the unhit 3 is the victim.
        assert_eq!(c.evict().map(|r| r.value), Some(3));
        assert_eq!(c.queue_lengths(), (0, 2));
        // b is hit again while in main: it is reinserted once, so a (older, unhit since
        // promotion) goes first even though both are in main.
        c.touch(b);
        assert_eq!(c.evict().map(|r| r.value), Some(1));
        assert_eq!(c.evict().map(|r| r.value), Some(2));
        assert!(c.evict().is_none());
    }

    #[test]
    fn earned_lists_main_and_the_hit_ones_of_small_hottest_first() {
        let mut c = S3Fifo::new(1000);
        let ids: Vec<SlotId> = (0..4).map(|v| c.insert(v, 100, v as u64)).collect();
        c.touch(ids[1]);
        c.touch(ids[3]);
        assert_eq!(c.earned().copied().collect::<Vec<_>>(), vec![3, 1]);
        c.touch(ids[0]);
        // 0 (hit) and 1 (hit) are promoted, 2 (unhit) evicted; 3 (hit) is still in small.
        assert_eq!(c.evict().map(|r| r.value), Some(2));
        assert_eq!(c.earned().copied().collect::<Vec<_>>(), vec![1, 0, 3]);
    }

    #[test]
    fn touch_saturates() {
        let mut c = S3Fifo::new(1000);
        let a = c.insert(1, 1, 1);
        for _ in 0..10 {
            c.touch(a);
        }
        assert_eq!(c.slots[0].freq.load(Relaxed), MAX_FREQ);
    }

    #[test]
    fn removed_ids_go_stale_and_slots_are_reused_safely() {
        let mut c = S3Fifo::new(1000);
        let a = c.insert(1, 10, 1);
        let removed = c.remove(a).expect("live");
        assert_eq!((removed.value, removed.size), (1, 10));
        assert!(c.remove(a).is_none(), "double remove");
        let b = c.insert(2, 20, 2);
        assert_eq!(b.index, a.index, "slot reused");
        assert!(
            c.get(a).is_none(),
            "old handle must not see the new occupant"
        );
        assert_eq!(c.get(b), Some(&2));
        c.touch(a); // must not affect b
        assert_eq!(c.slots[b.index as usize].freq.load(Relaxed), 0);
        assert_eq!(drain(&mut c), vec![2]);
        assert_eq!(c.stale, 0);
    }

    #[test]
    fn replace_keeps_position_and_reaccounts() {
        let mut c = S3Fifo::new(1000);
        let a = c.insert(1, 10, 1);
        c.insert(2, 10, 2);
        let old = c.replace(a, 3, 25).expect("live");
        assert_eq!((old.value, old.size), (1, 10));
        assert_eq!(c.bytes(), 35);
        assert_eq!(c.get(a), Some(&3));
        assert_eq!(drain(&mut c), vec![3, 2]);
        assert_eq!(c.replace(a, 9, 1).err(), Some(9));
    }

    #[test]
    fn many_removals_are_compacted() {
        let mut c = S3Fifo::new(1 << 20);
        for round in 0..10u32 {
            let ids: Vec<SlotId> = (0..100)
                .map(|v| c.insert(round * 100 + v, 1, v as u64))
                .collect();
            for id in ids {
                c.remove(id);
            }
        }
        let (small, main) = c.queue_lengths();
        assert!(
            small + main <= 100,
            "stale entries must not pile up: {small}+{main}"
        );
        assert_eq!(c.len(), 0);
        assert_eq!(c.bytes(), 0);
    }
}
