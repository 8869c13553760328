//! The in-memory store: sharded index, global byte budget, S3-FIFO eviction per shard.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use bytes::Bytes;

use crate::body_file::{BodyFile, FileHome, FileSlots};
use crate::config::StoreConfig;
use crate::fill::{
    DetachReason, FillShared, FillTarget, FillTicket, FillWriter, FinishOutcome, NotStoredReason,
};
use crate::object::Object;
use crate::shard::{Earned, Evicted, Shard, ShardState, ShardWrite};
use crate::stats::{bump, StoreStats};
use crate::store::{Lookup, Store};

/// What [`MemoryStore::probe`] found.
pub(crate) enum Probe<M> {
    Hit(Arc<Object<M>>),
    /// Variants are stored, none selected.
    Stored,
    /// Nothing stored under the key; memory's hash of it, for [`MemoryStore::promote`].
    Absent(KeyHash),
}

/// Memory's hash of a primary key, as [`MemoryStore::probe`] computed it: a promotion
/// right after the probe does not hash the key again.
#[derive(Clone, Copy)]
pub(crate) struct KeyHash(u64);

/// A sharded in-memory cache of complete responses with request collapsing.
///
/// Cheap to clone (a handle to shared state); share one per process.
///
/// *Budget.* Bytes are accounted globally (one atomic) rather than per shard, so that an
/// object up to `max_object_bytes` always fits even when it is larger than a shard's share
/// of the budget. An insertion first *reserves* its bytes (a compare-and-swap that never
/// lets the total pass the budget), evicting by S3-FIFO within whichever shard holds the
/// most bytes, one shard lock at a time. So the accounted total never exceeds the budget,
/// and shards stay near their fair share of it.
///
/// *Hashing.* A key is hashed once, with SipHash-1-3 under a per-store random key
/// (`std`'s `RandomState`): keys are URIs chosen by clients, and a predictable hash would
/// let them pile every key into one bucket. The hash picks the shard and is reused inside
/// the shard's table.
pub struct MemoryStore<M> {
    inner: Arc<Inner<M>>,
}

impl<M> Clone for MemoryStore<M> {
    fn clone(&self) -> Self {
        MemoryStore {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<M> std::fmt::Debug for MemoryStore<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.inner.shards.len())
            .field("budget_bytes", &self.inner.budget.load(Relaxed))
            .field("max_object_bytes", &self.inner.max_object)
            .field("used_bytes", &self.inner.used.load(Relaxed))
            .finish()
    }
}

struct Inner<M> {
    shards: Box<[Shard<M>]>,
    mask: usize,
    hasher: RandomState,
    /// Bytes reserved by stored objects (always `<= budget`).
    used: AtomicU64,
    /// Changed only by a configuration reload ([`MemoryStore::set_budget`]); a relaxed load
    /// per reservation costs what reading a plain field does on x86 and ARM.
    budget: AtomicU64,
    max_object: u64,
    next_fill_id: AtomicU64,
    /// Bodies at least this long go into sealed files (`u64::MAX`: never).
    body_file_min: u64,
    files: Arc<FileSlots>,
    file_home: FileHome,
    body_file_errors: AtomicU64,
    /// Given every object that leaves by eviction, with its primary key and whether it earned
    /// a lower tier (see `Removed::earned`). Called with at most one shard lock held: it must
    /// not block nor call back into the store (the disk tier only queues them).
    on_evict: Option<EvictHook<M>>,
}

/// See `Inner::on_evict`.
pub(crate) type EvictHook<M> = Arc<dyn Fn(Bytes, Arc<Object<M>>, bool) + Send + Sync>;

impl<M: Clone + Send + Sync + 'static> MemoryStore<M> {
    /// A store sized by `cfg` (normalised first, see [`StoreConfig::normalized`]).
    pub fn new(cfg: StoreConfig) -> Self {
        Self::with_evict_hook(cfg, None)
    }

    /// A store that hands earned evictions to `on_evict` (the tiered store's demotions).
    pub(crate) fn with_evict_hook(cfg: StoreConfig, on_evict: Option<EvictHook<M>>) -> Self {
        let cfg = cfg.normalized();
        let per_shard = cfg.budget_bytes / cfg.shards as u64;
        let shards = (0..cfg.shards).map(|_| Shard::new(per_shard)).collect();
        MemoryStore {
            inner: Arc::new(Inner {
                shards,
                mask: cfg.shards - 1,
                hasher: RandomState::new(),
                used: AtomicU64::new(0),
                budget: AtomicU64::new(cfg.budget_bytes),
                max_object: cfg.max_object_bytes,
                body_file_min: cfg.body_file_min,
                files: FileSlots::new(cfg.max_body_files),
                file_home: cfg.body_file_home,
                body_file_errors: AtomicU64::new(0),
                next_fill_id: AtomicU64::new(0),
                on_evict,
            }),
        }
    }

    /// Looks up `primary` and the first variant `select` accepts.
    ///
    /// - `Hit`: a stored object; no allocation, a shared (read) lock on one shard.
    /// - `Pending`: nothing stored, but a fill for this key is in progress and its head
    ///   (when already published) passes `select`: stream from it instead of fetching.
    /// - `Miss`: the caller fetches from the origin and fills through the writer.
    ///
    /// `select` judges a variant by its head, metadata and secondary key (for fills in
    /// progress it sees a provisional object with an empty body). It runs under the
    /// shard's lock: it must not call back into the store.
    pub fn lookup(&self, primary: &[u8], select: impl Fn(&Object<M>) -> bool) -> Lookup<M> {
        let hash = self.inner.hasher.hash_one(primary);
        let shard = self.inner.shard(hash);
        // The read lock goes at the end of this statement: a first hit may write a file.
        let hit = shard.read().hit(hash, primary, &select);
        if let Some(object) = hit {
            bump(&shard.counters.hits);
            return Lookup::Hit(self.inner.file_on_first_hit(shard, hash, primary, object));
        }
        let st = shard.write();
        // Re-check: a fill may have committed between the two locks.
        if let Some(object) = st.hit(hash, primary, &select) {
            bump(&shard.counters.hits);
            drop(st);
            return Lookup::Hit(self.inner.file_on_first_hit(shard, hash, primary, object));
        }
        self.join_or_start_fill(st, shard, hash, primary, &select)
    }

    /// Starts a fill for `primary` even though a variant `select` accepts may be stored,
    /// or joins such a fill already in progress: for a stored response that is stale and
    /// must be revalidated or replaced (RFC 9111 §4.3). Concurrent refreshes of one key
    /// collapse onto one origin request like misses do. The writer's object replaces the
    /// stored variant with the same secondary key when it commits. After a 304 the writer
    /// publishes the merged head and appends the stored object's body chunks (cheap
    /// `Bytes` clones) and finishes, so requests waiting on the refresh get the whole
    /// response; it must not abort (that would abort the waiters' clients).
    /// [`MemoryStore::update`] is for revalidations done without a fill. Never `Hit`.
    pub fn refresh(&self, primary: &[u8], select: impl Fn(&Object<M>) -> bool) -> Lookup<M> {
        let hash = self.inner.hasher.hash_one(primary);
        let shard = self.inner.shard(hash);
        self.join_or_start_fill(shard.write(), shard, hash, primary, &select)
    }

    fn join_or_start_fill(
        &self,
        mut st: ShardWrite<'_, M>,
        shard: &Shard<M>,
        hash: u64,
        primary: &[u8],
        select: &dyn Fn(&Object<M>) -> bool,
    ) -> Lookup<M> {
        if let Some(reader) = st.join_fill(hash, primary, select) {
            bump(&shard.counters.collapsed);
            return Lookup::Pending(reader);
        }
        let ticket = FillTicket {
            primary: Bytes::copy_from_slice(primary),
            hash,
            id: self.inner.next_fill_id.fetch_add(1, Relaxed),
        };
        let shared = FillShared::new();
        st.register_fill(&ticket, Arc::clone(&shared));
        drop(st);
        bump(&shard.counters.misses);
        let target: Arc<dyn FillTarget<M>> = Arc::clone(&self.inner) as Arc<dyn FillTarget<M>>;
        Lookup::Miss(FillWriter::new(shared, target, ticket))
    }

    /// Looks up a stored variant without ever starting or joining a fill: for
    /// `only-if-cached` requests (RFC 9111 §5.2.1.7) and administrative reads.
    pub fn lookup_no_fill(
        &self,
        primary: &[u8],
        select: impl Fn(&Object<M>) -> bool,
    ) -> Option<Arc<Object<M>>> {
        match self.probe(primary, &select) {
            Probe::Hit(object) => Some(object),
            Probe::Stored | Probe::Absent(_) => None,
        }
    }

    /// [`MemoryStore::lookup_no_fill`], also saying, when no variant is selected, whether
    /// any is stored: the tiered store asks the disk only when none is (memory is newer),
    /// and this answers both under one lock and one hash (the second question costs a
    /// probe of the locked table only when nothing was selected).
    pub(crate) fn probe(&self, primary: &[u8], select: &dyn Fn(&Object<M>) -> bool) -> Probe<M> {
        let hash = self.inner.hasher.hash_one(primary);
        let shard = self.inner.shard(hash);
        let st = shard.read();
        match st.hit(hash, primary, select) {
            Some(hit) => {
                drop(st);
                bump(&shard.counters.hits);
                Probe::Hit(self.inner.file_on_first_hit(shard, hash, primary, hit))
            }
            None if st.has_primary(hash, primary) => Probe::Stored,
            None => Probe::Absent(KeyHash(hash)),
        }
    }

    /// Removes every variant stored under `primary` (RFC 9111 §4.4 invalidation, PURGE);
    /// returns how many were removed. Fills in progress for the key keep streaming to
    /// their readers but are not committed, and are no longer joined by new lookups: a
    /// response fetched before the purge must not reappear after it.
    pub fn purge(&self, primary: &[u8]) -> usize {
        let hash = self.inner.hasher.hash_one(primary);
        let shard = self.inner.shard(hash);
        let (count, bytes) = shard.write().purge(hash, primary);
        self.inner.release(bytes);
        shard.counters.removals.fetch_add(count as u64, Relaxed);
        count
    }

    /// Removes the one variant of `primary` with this secondary key.
    pub fn remove_variant(&self, primary: &[u8], secondary: &[u8]) -> bool {
        let hash = self.inner.hasher.hash_one(primary);
        let shard = self.inner.shard(hash);
        let freed = shard.write().remove_variant(hash, primary, secondary);
        if let Some(bytes) = freed {
            self.inner.release(bytes);
            bump(&shard.counters.removals);
        }
        freed.is_some()
    }

    /// Replaces the head and metadata of the stored object `old` after a 304 (RFC 9111
    /// §4.3.4), keeping its body chunks (shared, not copied), secondary key, queue
    /// position and hit frequency. Returns the new object, or `None` when `old` is no
    /// longer stored (evicted, purged, replaced) or the new head does not fit (then `old`
    /// is removed if it would exceed the maximum object size, left as is otherwise).
    pub fn update(
        &self,
        primary: &[u8],
        old: &Arc<Object<M>>,
        head: Bytes,
        meta: M,
    ) -> Option<Arc<Object<M>>> {
        let inner = &self.inner;
        let hash = inner.hasher.hash_one(primary);
        let shard = inner.shard(hash);
        let new = Arc::new(old.with_head(head, meta));
        let new_size = new.accounted_size(primary.len());
        let old_size = old.accounted_size(primary.len());
        let mut st = shard.write();
        if !st.contains(hash, primary, old) {
            return None;
        }
        if new_size > inner.max_object {
            if let Some(bytes) = st.remove_object(hash, primary, old) {
                inner.release(bytes);
                bump(&shard.counters.removals);
            }
            return None;
        }
        if new_size > old_size && !inner.reserve_in(&mut st, shard, new_size - old_size) {
            return None;
        }
        // `old` may have been evicted to make room for its own growth.
        match st.replace(hash, primary, old, Arc::clone(&new), new_size) {
            Some(replaced_size) => {
                debug_assert_eq!(replaced_size, old_size);
                if new_size < old_size {
                    inner.release(old_size - new_size);
                }
                Some(new)
            }
            None => {
                if new_size > old_size {
                    inner.release(new_size - old_size);
                }
                None
            }
        }
    }

    /// Changes the byte budget (a configuration reload). Shrinking evicts, fullest shard
    /// first as an insertion would, until the objects fit. Each shard's S3-FIFO keeps the
    /// queue proportions it was built with: only the total is enforced anew.
    pub fn set_budget(&self, bytes: u64) {
        let inner = &self.inner;
        inner.budget.store(bytes, Relaxed);
        while inner.used.load(Relaxed) > bytes {
            let Some(victim) = inner.fullest_shard(0) else {
                return;
            };
            let shard = &inner.shards[victim];
            let Some((freed, evicted)) = shard.write().evict_one() else {
                return;
            };
            inner.release(freed);
            bump(&shard.counters.evictions);
            inner.evicted(evicted);
        }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> StoreStats {
        let mut stats = StoreStats {
            bytes: self.inner.used.load(Relaxed),
            budget_bytes: self.inner.budget.load(Relaxed),
            body_files: self.inner.files.in_use() as u64,
            body_file_errors: self.inner.body_file_errors.load(Relaxed),
            ..StoreStats::default()
        };
        for shard in self.inner.shards.iter() {
            shard.counters.add_to(&mut stats);
            stats.objects += shard.read().len() as u64;
        }
        stats
    }

    /// The stored objects that earned a disk place (in S3-FIFO's main queue, or hit while in
    /// its small one), with their primary keys: what a clean shutdown writes to disk. Shards
    /// interleaved, each hottest first, so a deadline cuts the coldest of every shard.
    pub(crate) fn earned_objects(&self) -> Vec<Earned<M>> {
        let per_shard: Vec<Vec<Earned<M>>> = self
            .inner
            .shards
            .iter()
            .map(|shard| shard.read().earned().collect())
            .collect();
        let total = per_shard.iter().map(Vec::len).sum();
        let mut out = Vec::with_capacity(total);
        let mut iters: Vec<_> = per_shard.into_iter().map(Vec::into_iter).collect();
        while out.len() < total {
            for it in &mut iters {
                out.extend(it.next());
            }
        }
        out
    }

    /// Stores an object read back from the disk tier (a promotion) by the same admission
    /// as a fill's commit (S3-FIFO, its ghost queue), without a fill: nobody waits for it,
    /// so registering one (a write lock, a shared fill state, a ticket) only to commit it
    /// at once cost a 4 KiB disk hit ~1.4 µs (bench/RESULTS.md, 2026-11-27). Skipped
    /// (false) when a variant is stored or a fill for the key is in progress (either is
    /// newer than the disk's copy), or when the object does not fit. `primary` becomes the
    /// stored key as it is (the disk read's slice: no copy); `hash` is what the probe that
    /// found nothing under it answered.
    pub(crate) fn promote(&self, primary: Bytes, hash: KeyHash, object: Object<M>) -> bool {
        let inner = &self.inner;
        let KeyHash(hash) = hash;
        debug_assert_eq!(hash, inner.hasher.hash_one(&primary[..]));
        let shard = inner.shard(hash);
        let size = object.accounted_size(primary.len());
        if size > inner.max_object || shard.read().has_primary_or_fill(hash, &primary) {
            return false;
        }
        // No lock is held while reserving: eviction may need any shard's lock.
        if !inner.reserve(inner.shard_index(hash), size) {
            return false;
        }
        let ghost_key = inner.ghost_key(hash, &primary, object.secondary());
        let mut st = shard.write();
        if st.has_primary_or_fill(hash, &primary) {
            drop(st);
            inner.release(size);
            return false;
        }
        st.insert(hash, &primary, Arc::new(object), size, ghost_key);
        bump(&shard.counters.insertions);
        true
    }

    /// Checks the accounting invariants (tests): the global total equals the sum of the
    /// shards, stays within budget, and no fill is left registered.
    #[cfg(test)]
    pub(crate) fn assert_consistent(&self, expect_no_fills: bool) {
        let mut sum = 0;
        for shard in self.inner.shards.iter() {
            let st = shard.read();
            sum += st.bytes();
            if expect_no_fills {
                assert_eq!(st.inflight_fills(), 0, "a fill was left registered");
            }
        }
        let used = self.inner.used.load(Relaxed);
        assert_eq!(sum, used, "shard bytes vs global accounting");
        assert!(
            used <= self.inner.budget.load(Relaxed),
            "{used} over budget {}",
            self.inner.budget.load(Relaxed)
        );
    }
}

impl<M> Inner<M> {
    #[inline]
    fn shard(&self, hash: u64) -> &Shard<M> {
        &self.shards[self.shard_index(hash)]
    }

    /// Reserves `size` bytes if that keeps the total within the budget.
    fn try_reserve(&self, size: u64) -> bool {
        self.used
            .fetch_update(Relaxed, Relaxed, |used| {
                used.checked_add(size)
                    .filter(|&total| total <= self.budget.load(Relaxed))
            })
            .is_ok()
    }

    fn release(&self, size: u64) {
        self.used.fetch_sub(size, Relaxed);
    }

    /// Reserves `size` bytes, evicting only from `st` (the locked `shard`) as needed; for
    /// `update`, which must keep its shard locked. False if the shard ran out of victims.
    fn reserve_in(&self, st: &mut ShardState<M>, shard: &Shard<M>, size: u64) -> bool {
        loop {
            if self.try_reserve(size) {
                return true;
            }
            match st.evict_one() {
                Some((freed, evicted)) => {
                    self.release(freed);
                    bump(&shard.counters.evictions);
                    self.evicted(evicted);
                }
                None => return false,
            }
        }
    }

    /// Reserves `size` bytes, evicting one object at a time from the shard holding the
    /// most bytes (the home shard on ties), taking one shard lock at a time. Choosing the
    /// fullest shard keeps shards near their fair share of the budget, so each shard's
    /// S3-FIFO judges its own objects against a population of the expected size instead of
    /// a shard sacrificing its hot objects while others hold cold ones. False when nothing
    /// is left to evict (the budget is held by reservations in flight).
    fn reserve(&self, home: usize, size: u64) -> bool {
        loop {
            if self.try_reserve(size) {
                return true;
            }
            let Some(victim) = self.fullest_shard(home) else {
                return self.try_reserve(size);
            };
            let shard = &self.shards[victim];
            let evicted = shard.write().evict_one();
            if let Some((freed, evicted)) = evicted {
                self.release(freed);
                bump(&shard.counters.evictions);
                self.evicted(evicted);
            }
        }
    }

    fn evicted(&self, (primary, object, earned): Evicted<M>) {
        if let Some(hook) = &self.on_evict {
            hook(primary, object, earned);
        }
    }

    /// The shard with the most bytes (`home` wins ties), or `None` if all are empty.
    fn fullest_shard(&self, home: usize) -> Option<usize> {
        let mut best = (self.shards[home].bytes(), home);
        for (i, shard) in self.shards.iter().enumerate() {
            let bytes = shard.bytes();
            if bytes > best.0 {
                best = (bytes, i);
            }
        }
        (best.0 > 0).then_some(best.1)
    }

    /// A newer response replaces the stored variant with the same secondary key.
    fn remove_same_variant(
        &self,
        st: &mut ShardState<M>,
        shard: &Shard<M>,
        ticket: &FillTicket,
        object: &Object<M>,
    ) {
        if let Some(freed) = st.remove_variant(ticket.hash, &ticket.primary, object.secondary()) {
            self.release(freed);
            bump(&shard.counters.removals);
        }
    }

    /// The object's identity across evictions (S3-FIFO's ghost queue). Without Vary the
    /// primary key alone names it, and its hash is already known: hashing the keys again
    /// was a second SipHash pass per miss.
    fn ghost_key(&self, hash: u64, primary: &[u8], secondary: &[u8]) -> u64 {
        if secondary.is_empty() {
            hash
        } else {
            self.hasher.hash_one((primary, secondary))
        }
    }

    /// High bits pick the shard; the table inside uses the low bits and the top 7.
    #[inline]
    fn shard_index(&self, hash: u64) -> usize {
        (hash >> 32) as usize & self.mask
    }
}

impl<M: Clone> Inner<M> {
    /// Moves the body of a hit `object` of at least `body_file_min` bytes from memory into
    /// a file, the first time it is hit, so that this hit and the next leave with
    /// `sendfile(2)` (see `body_file.rs`). Why on the first hit rather than when the fill
    /// commits: most stored objects are never asked for again, and writing each of them to
    /// a file made a miss of a 64 KiB object cost 78-205 µs instead of 55-65 once the
    /// kernel's writeback throttled the worker (bench/RESULTS.md, 2026-11-26); an object hit
    /// once is likely to be hit again, and its file is written once. The swap keeps the
    /// object's queue position and hit count; if the object was evicted or replaced while
    /// the file was written, this hit is still served from the file, which then goes.
    fn file_on_first_hit(
        &self,
        shard: &Shard<M>,
        hash: u64,
        primary: &[u8],
        object: Arc<Object<M>>,
    ) -> Arc<Object<M>> {
        let Some(chunks) = object.claim_file_move(self.body_file_min) else {
            return object;
        };
        // The copy happens with no lock held.
        let file = match BodyFile::create(chunks, object.body_len(), &self.files, &self.file_home) {
            Ok(Some(file)) => file,
            // Every slot taken: the body stays in memory.
            Ok(None) => return object,
            // The kernel refused (memory limits, a full disk): still served from memory.
            Err(_) => {
                bump(&self.body_file_errors);
                return object;
            }
        };
        let moved = Arc::new(object.with_file(file));
        let old_size = object.accounted_size(primary.len());
        let new_size = moved.accounted_size(primary.len());
        let replaced = shard
            .write()
            .replace(hash, primary, &object, Arc::clone(&moved), new_size);
        if let Some(replaced_size) = replaced {
            debug_assert_eq!(replaced_size, old_size);
            // One piece instead of the chunks: never larger.
            self.release(old_size.saturating_sub(new_size));
        }
        moved
    }
}

impl<M: Send + Sync + 'static> FillTarget<M> for Inner<M> {
    fn commit(&self, ticket: &FillTicket, object: Object<M>) -> FinishOutcome<M> {
        let shard = self.shard(ticket.hash);
        let size = object.accounted_size(ticket.primary.len());
        if size > self.max_object {
            self.detach(ticket, DetachReason::TooBig);
            return FinishOutcome::NotStored(NotStoredReason::TooBig);
        }
        let ghost_key = self.ghost_key(ticket.hash, &ticket.primary, object.secondary());
        let object = Arc::new(object);
        {
            let mut st = shard.write();
            if !st.fill_committable(ticket) {
                st.unregister_fill(ticket);
                return FinishOutcome::NotStored(NotStoredReason::Purged);
            }
            // Free the variant this object supersedes before evicting anything else for it.
            self.remove_same_variant(&mut st, shard, ticket, &object);
        }
        // No lock is held while reserving: eviction may need any shard's lock.
        if !self.reserve(self.shard_index(ticket.hash), size) {
            shard.write().unregister_fill(ticket);
            return FinishOutcome::NotStored(NotStoredReason::NoRoom);
        }
        let mut st = shard.write();
        // The lock was released meanwhile: a purge or a competing commit may have happened.
        if !st.fill_committable(ticket) {
            self.release(size);
            st.unregister_fill(ticket);
            return FinishOutcome::NotStored(NotStoredReason::Purged);
        }
        self.remove_same_variant(&mut st, shard, ticket, &object);
        st.unregister_fill(ticket);
        st.insert(
            ticket.hash,
            &ticket.primary,
            Arc::clone(&object),
            size,
            ghost_key,
        );
        bump(&shard.counters.insertions);
        FinishOutcome::Stored(object)
    }

    fn detach(&self, ticket: &FillTicket, reason: DetachReason) {
        let shard = self.shard(ticket.hash);
        shard.write().unregister_fill(ticket);
        match reason {
            DetachReason::Aborted => bump(&shard.counters.aborted_fills),
            DetachReason::Released => bump(&shard.counters.released_fills),
            DetachReason::TooBig => bump(&shard.counters.rejected_too_big),
        }
    }

    fn max_object_bytes(&self) -> u64 {
        self.max_object
    }
}

impl<M: Clone + Send + Sync + 'static> Store<M> for MemoryStore<M> {
    fn set_memory_budget(&self, bytes: u64) {
        self.set_budget(bytes);
    }

    fn lookup(&self, primary: &[u8], select: &dyn Fn(&Object<M>) -> bool) -> Lookup<M> {
        MemoryStore::lookup(self, primary, select)
    }

    fn lookup_no_fill(
        &self,
        primary: &[u8],
        select: &dyn Fn(&Object<M>) -> bool,
    ) -> Option<Arc<Object<M>>> {
        MemoryStore::lookup_no_fill(self, primary, select)
    }

    fn refresh(&self, primary: &[u8], select: &dyn Fn(&Object<M>) -> bool) -> Lookup<M> {
        MemoryStore::refresh(self, primary, select)
    }

    fn purge(&self, primary: &[u8]) -> usize {
        MemoryStore::purge(self, primary)
    }

    fn remove_variant(&self, primary: &[u8], secondary: &[u8]) -> bool {
        MemoryStore::remove_variant(self, primary, secondary)
    }

    fn update(
        &self,
        primary: &[u8],
        old: &Arc<Object<M>>,
        head: Bytes,
        meta: M,
    ) -> Option<Arc<Object<M>>> {
        MemoryStore::update(self, primary, old, head, meta)
    }

    fn stats(&self) -> StoreStats {
        MemoryStore::stats(self)
    }
}
