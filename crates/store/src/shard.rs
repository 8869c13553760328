//! One shard of the memory store: the key index, the eviction policy and the fills in
//! progress for the keys that hash to it, all behind one lock.
//!
//! Keys map as in RFC 9111 §4.1: a primary key (the normalised URI) to one or more
//! variants, each told apart by its secondary key (the Vary-selected request headers).

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;
use hashbrown::HashTable;
use smallvec::{smallvec, SmallVec};

use crate::fill::{FillReader, FillShared, FillTicket, Join};
use crate::object::Object;
use crate::s3fifo::{Removed, S3Fifo, SlotId};
use crate::stats::ShardCounters;

/// A stored variant as the eviction policy holds it: enough to find its index entry again
/// when the policy evicts it.
pub(crate) struct Stored<M> {
    pub(crate) object: Arc<Object<M>>,
    primary: Bytes,
    hash: u64,
}

/// An evicted object that earned a place in a lower tier, with its primary key.
pub(crate) type Earned<M> = (Bytes, Arc<Object<M>>);

/// An evicted object with its primary key, and whether it earned a lower tier.
pub(crate) type Evicted<M> = (Bytes, Arc<Object<M>>, bool);

/// All variants stored under one primary key.
struct IndexEntry {
    hash: u64,
    primary: Bytes,
    variants: SmallVec<[SlotId; 2]>,
}

/// One fill in progress. `purged`: a purge of this key happened after the fill started,
/// so it must not be committed (nor joined by new requests).
struct InflightFill<M> {
    id: u64,
    shared: Arc<FillShared<M>>,
    purged: bool,
}

/// The fills in progress under one primary key (usually one; more when variants or a purge
/// made later requests start their own).
struct InflightEntry<M> {
    hash: u64,
    primary: Bytes,
    fills: Vec<InflightFill<M>>,
}

pub(crate) struct ShardState<M> {
    index: HashTable<IndexEntry>,
    policy: S3Fifo<Stored<M>>,
    inflight: HashTable<InflightEntry<M>>,
}

/// A shard: its lock and its counters. Aligned to its own cache lines so that two shards'
/// lock words and hit counters never share one (no false sharing between cores).
#[repr(align(128))]
pub(crate) struct Shard<M> {
    state: RwLock<ShardState<M>>,
    /// Bytes stored in this shard, published on every write unlock, so that the store
    /// can pick an eviction victim shard without taking every lock.
    bytes: AtomicU64,
    pub(crate) counters: ShardCounters,
}

/// Exclusive access to a shard's state; publishes the shard's byte total on release.
pub(crate) struct ShardWrite<'a, M> {
    guard: RwLockWriteGuard<'a, ShardState<M>>,
    bytes: &'a AtomicU64,
}

impl<M> Deref for ShardWrite<'_, M> {
    type Target = ShardState<M>;
    fn deref(&self) -> &ShardState<M> {
        &self.guard
    }
}

impl<M> DerefMut for ShardWrite<'_, M> {
    fn deref_mut(&mut self) -> &mut ShardState<M> {
        &mut self.guard
    }
}

impl<M> Drop for ShardWrite<'_, M> {
    fn drop(&mut self) {
        self.bytes.store(self.guard.bytes(), Relaxed);
    }
}

impl<M> Shard<M> {
    pub(crate) fn new(capacity_bytes: u64) -> Self {
        Shard {
            state: RwLock::new(ShardState {
                index: HashTable::new(),
                policy: S3Fifo::new(capacity_bytes),
                inflight: HashTable::new(),
            }),
            bytes: AtomicU64::new(0),
            counters: ShardCounters::default(),
        }
    }

    /// Shared access (hits). Every mutation leaves the state consistent before anything
    /// that could panic (the caller's selector) runs, so a poisoned lock is still usable.
    #[inline]
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, ShardState<M>> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Exclusive access (misses, commits, evictions, purges).
    pub(crate) fn write(&self) -> ShardWrite<'_, M> {
        ShardWrite {
            guard: self.state.write().unwrap_or_else(PoisonError::into_inner),
            bytes: &self.bytes,
        }
    }

    /// Bytes stored in this shard as of its last write unlock.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Relaxed)
    }
}

impl<M> ShardState<M> {
    /// The first stored variant of `primary` that `select` accepts; a hit is recorded.
    #[inline]
    pub(crate) fn hit<F>(&self, hash: u64, primary: &[u8], select: &F) -> Option<Arc<Object<M>>>
    where
        F: Fn(&Object<M>) -> bool + ?Sized,
    {
        let entry = self.index.find(hash, |e| e.primary == primary)?;
        for &id in &entry.variants {
            if let Some(stored) = self.policy.get(id) {
                if select(&stored.object) {
                    self.policy.touch(id);
                    return Some(Arc::clone(&stored.object));
                }
            }
        }
        None
    }

    /// Joins the oldest fill in progress for `primary` that can still serve a whole
    /// response and whose published head (if any) `select` accepts.
    pub(crate) fn join_fill(
        &self,
        hash: u64,
        primary: &[u8],
        select: &dyn Fn(&Object<M>) -> bool,
    ) -> Option<FillReader<M>> {
        let entry = self.inflight.find(hash, |e| e.primary == primary)?;
        entry
            .fills
            .iter()
            .filter(|f| !f.purged)
            .find_map(|f| match f.shared.try_join(select) {
                Join::Joined(reader) => Some(reader),
                Join::Skip => None,
            })
    }

    /// Registers a new fill in progress.
    pub(crate) fn register_fill(&mut self, ticket: &FillTicket, shared: Arc<FillShared<M>>) {
        let fill = InflightFill {
            id: ticket.id,
            shared,
            purged: false,
        };
        match self
            .inflight
            .find_mut(ticket.hash, |e| e.primary == ticket.primary)
        {
            Some(entry) => entry.fills.push(fill),
            None => {
                let entry = InflightEntry {
                    hash: ticket.hash,
                    primary: ticket.primary.clone(),
                    fills: vec![fill],
                };
                self.inflight.insert_unique(ticket.hash, entry, |e| e.hash);
            }
        }
    }

    /// Whether the fill is still registered and not purged (i.e. may be committed).
    pub(crate) fn fill_committable(&self, ticket: &FillTicket) -> bool {
        self.inflight
            .find(ticket.hash, |e| e.primary == ticket.primary)
            .and_then(|e| e.fills.iter().find(|f| f.id == ticket.id))
            .is_some_and(|f| !f.purged)
    }

    /// Unregisters a fill (committed, aborted, released or too big). Idempotent.
    pub(crate) fn unregister_fill(&mut self, ticket: &FillTicket) {
        if let Ok(mut entry) = self
            .inflight
            .find_entry(ticket.hash, |e| e.primary == ticket.primary)
        {
            let fills = &mut entry.get_mut().fills;
            fills.retain(|f| f.id != ticket.id);
            if fills.is_empty() {
                entry.remove();
            }
        }
    }

    /// Stores a complete variant (the caller has reserved its bytes and removed any variant
    /// with the same secondary key).
    pub(crate) fn insert(
        &mut self,
        hash: u64,
        primary: &Bytes,
        object: Arc<Object<M>>,
        size: u64,
        ghost_key: u64,
    ) {
        let stored = Stored {
            object,
            primary: primary.clone(),
            hash,
        };
        let id = self.policy.insert(stored, size, ghost_key);
        match self.index.find_mut(hash, |e| e.primary == *primary) {
            Some(entry) => entry.variants.push(id),
            None => {
                let entry = IndexEntry {
                    hash,
                    primary: primary.clone(),
                    variants: smallvec![id],
                };
                self.index.insert_unique(hash, entry, |e| e.hash);
            }
        }
    }

    /// Removes the variants of `primary` that `matches` selects; calls `removed` for each.
    fn remove_where(
        &mut self,
        hash: u64,
        primary: &[u8],
        mut matches: impl FnMut(&Stored<M>) -> bool,
        mut removed: impl FnMut(Removed<Stored<M>>),
    ) {
        let Ok(mut entry) = self.index.find_entry(hash, |e| e.primary == primary) else {
            return;
        };
        let policy = &mut self.policy;
        entry.get_mut().variants.retain(|id| match policy.get(*id) {
            Some(stored) if matches(stored) => {
                removed(policy.remove(*id).expect("live variant"));
                false
            }
            Some(_) => true,
            None => false,
        });
        if entry.get().variants.is_empty() {
            entry.remove();
        }
    }

    /// Removes the variant of `primary` with this secondary key, if stored.
    pub(crate) fn remove_variant(
        &mut self,
        hash: u64,
        primary: &[u8],
        secondary: &[u8],
    ) -> Option<u64> {
        let mut freed = None;
        self.remove_where(
            hash,
            primary,
            |s| s.object.secondary() == secondary,
            |r| freed = Some(r.size),
        );
        freed
    }

    /// Removes every variant of `primary` and marks its fills in progress as purged (they
    /// finish streaming to their readers but will not be committed). Returns the number
    /// of variants removed and the bytes they were accounted at.
    pub(crate) fn purge(&mut self, hash: u64, primary: &[u8]) -> (usize, u64) {
        let (mut count, mut bytes) = (0, 0);
        self.remove_where(
            hash,
            primary,
            |_| true,
            |r| {
                count += 1;
                bytes += r.size;
            },
        );
        if let Some(entry) = self.inflight.find_mut(hash, |e| e.primary == primary) {
            for fill in &mut entry.fills {
                fill.purged = true;
            }
        }
        (count, bytes)
    }

    /// Evicts one variant by the S3-FIFO rules; returns its accounted size, and the object
    /// with its primary key and whether it earned a place in a lower tier (`Removed::earned`).
    pub(crate) fn evict_one(&mut self) -> Option<(u64, Evicted<M>)> {
        let removed = self.policy.evict()?;
        let stored = &removed.value;
        let policy = &self.policy;
        if let Ok(mut entry) = self
            .index
            .find_entry(stored.hash, |e| e.primary == stored.primary)
        {
            entry
                .get_mut()
                .variants
                .retain(|id| policy.get(*id).is_some());
            if entry.get().variants.is_empty() {
                entry.remove();
            }
        }
        let evicted = (removed.value.primary, removed.value.object, removed.earned);
        Some((removed.size, evicted))
    }

    /// The stored objects that earned a lower tier (see `S3Fifo::earned`), hottest first.
    pub(crate) fn earned(&self) -> impl Iterator<Item = Earned<M>> + '_ {
        self.policy
            .earned()
            .map(|s| (s.primary.clone(), Arc::clone(&s.object)))
    }

    /// Whether any variant of `primary` is stored.
    pub(crate) fn has_primary(&self, hash: u64, primary: &[u8]) -> bool {
        self.index.find(hash, |e| e.primary == primary).is_some()
    }

    /// Whether any variant of `primary` is stored or a fill for it is in progress.
    pub(crate) fn has_primary_or_fill(&self, hash: u64, primary: &[u8]) -> bool {
        self.has_primary(hash, primary)
            || self.inflight.find(hash, |e| e.primary == primary).is_some()
    }

    /// The slot holding exactly this object (pointer identity) under `primary`.
    fn slot_of(&self, hash: u64, primary: &[u8], object: &Arc<Object<M>>) -> Option<SlotId> {
        let entry = self.index.find(hash, |e| e.primary == primary)?;
        entry.variants.iter().copied().find(|&id| {
            self.policy
                .get(id)
                .is_some_and(|s| Arc::ptr_eq(&s.object, object))
        })
    }

    /// Whether exactly this object is still stored under `primary`.
    pub(crate) fn contains(&self, hash: u64, primary: &[u8], object: &Arc<Object<M>>) -> bool {
        self.slot_of(hash, primary, object).is_some()
    }

    /// Swaps `old` for `new` in place (same queue position and hit frequency), accounted at
    /// `size`. Returns the old size, or `None` if `old` is no longer stored.
    pub(crate) fn replace(
        &mut self,
        hash: u64,
        primary: &[u8],
        old: &Arc<Object<M>>,
        new: Arc<Object<M>>,
        size: u64,
    ) -> Option<u64> {
        let id = self.slot_of(hash, primary, old)?;
        let primary = self.policy.get(id)?.primary.clone();
        let stored = Stored {
            object: new,
            primary,
            hash,
        };
        self.policy.replace(id, stored, size).ok().map(|r| r.size)
    }

    /// Removes exactly this object; returns its accounted size.
    pub(crate) fn remove_object(
        &mut self,
        hash: u64,
        primary: &[u8],
        object: &Arc<Object<M>>,
    ) -> Option<u64> {
        let mut freed = None;
        self.remove_where(
            hash,
            primary,
            |s| Arc::ptr_eq(&s.object, object),
            |r| freed = Some(r.size),
        );
        freed
    }

    /// Number of stored variants.
    pub(crate) fn len(&self) -> usize {
        self.policy.len()
    }

    /// Bytes accounted by the stored variants.
    pub(crate) fn bytes(&self) -> u64 {
        self.policy.bytes()
    }

    /// Number of fills in progress (for tests and leak checks).
    #[cfg(test)]
    pub(crate) fn inflight_fills(&self) -> usize {
        self.inflight.iter().map(|e| e.fills.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(secondary: &'static [u8]) -> Arc<Object<u8>> {
        let body: Arc<[Bytes]> = Arc::from(vec![Bytes::from_static(b"body")]);
        Arc::new(Object::new(
            Bytes::from_static(b"head"),
            crate::object::Body::Chunks(body),
            4,
            0,
            Bytes::from_static(secondary),
        ))
    }

    fn state() -> ShardState<u8> {
        ShardState {
            index: HashTable::new(),
            policy: S3Fifo::new(1 << 20),
            inflight: HashTable::new(),
        }
    }

    const KEY: &[u8] = b"/k";
    const HASH: u64 = 42;

    fn select(secondary: &'static [u8]) -> impl Fn(&Object<u8>) -> bool {
        move |o| o.secondary().as_ref() == secondary
    }

    #[test]
    fn variants_are_indexed_under_one_primary_and_evicted_cleanly() {
        let mut st = state();
        let primary = Bytes::from_static(KEY);
        st.insert(HASH, &primary, object(b"a"), 100, 1);
        st.insert(HASH, &primary, object(b"b"), 50, 2);
        assert_eq!((st.len(), st.bytes()), (2, 150));
        assert!(st.hit(HASH, KEY, &select(b"b")).is_some());
        assert!(st.hit(HASH, KEY, &select(b"c")).is_none());
        // The unhit "a" is the victim; the hit "b" is promoted, then evicted last.
        assert_eq!(st.evict_one().map(|e| (e.0, e.1 .2)), Some((100, false)));
        assert!(st.hit(HASH, KEY, &select(b"a")).is_none());
        assert_eq!(
            st.evict_one().map(|e| (e.0, e.1 .2)),
            Some((50, true)),
            "promoted: earned"
        );
        assert!(st.index.is_empty(), "an entry without variants is removed");
        assert!(st.evict_one().is_none());
    }

    #[test]
    fn replace_and_remove_by_identity() {
        let mut st = state();
        let primary = Bytes::from_static(KEY);
        let old = object(b"");
        st.insert(HASH, &primary, Arc::clone(&old), 100, 1);
        let new = object(b"");
        assert_eq!(
            st.replace(HASH, KEY, &old, Arc::clone(&new), 120),
            Some(100)
        );
        assert!(!st.contains(HASH, KEY, &old));
        assert!(st.contains(HASH, KEY, &new));
        assert_eq!(st.replace(HASH, KEY, &old, object(b""), 1), None);
        assert_eq!(st.remove_object(HASH, KEY, &old), None);
        assert_eq!(st.remove_object(HASH, KEY, &new), Some(120));
        assert_eq!((st.len(), st.bytes()), (0, 0));
    }

    #[test]
    fn purge_marks_fills_and_unregister_is_idempotent() {
        let mut st = state();
        let ticket = FillTicket {
            primary: Bytes::from_static(KEY),
            hash: HASH,
            id: 7,
        };
        st.register_fill(&ticket, FillShared::new());
        assert!(st.fill_committable(&ticket));
        assert!(st.join_fill(HASH, KEY, &|_| true).is_some());
        st.insert(HASH, &ticket.primary, object(b"x"), 10, 1);
        assert_eq!(st.purge(HASH, KEY), (1, 10));
        assert!(!st.fill_committable(&ticket), "purged fill must not commit");
        assert!(
            st.join_fill(HASH, KEY, &|_| true).is_none(),
            "nor be joined"
        );
        st.unregister_fill(&ticket);
        st.unregister_fill(&ticket);
        assert_eq!(st.inflight_fills(), 0);
        assert!(!st.fill_committable(&ticket));
    }
}
