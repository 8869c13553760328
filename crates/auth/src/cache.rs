//! The verified-credentials cache: Basic token → user (or "rejected") for a while, so that a
//! browser sending the same Proxy-Authorization on every request costs one hash or helper
//! round trip per `credentials_ttl`, not one per request (Squid's `credentialsttl`).
//!
//! Keyed by the raw base64 token bytes: a lookup neither decodes nor allocates (the map's
//! `Box<[u8]>` keys borrow as `[u8]`), and a hit clones an `Arc<str>`. Every entry carries the
//! backend's generation (bumped when an htpasswd file is re-read), so a changed or removed user
//! takes effect at once instead of after the TTL. Time is passed in, so tests control it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Most remembered valid tokens. A proxy's users rarely exceed this; when full, expired entries
/// go first and then arbitrary ones (they are re-verified on next use, nothing breaks).
const MAX_VALID: usize = 16_384;
/// Most remembered rejected tokens: kept apart and smaller, so a password-guessing client can
/// fill only this map, never push out real users.
const MAX_REJECTED: usize = 4_096;

/// What the cache knows about a token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Cached {
    /// Verified recently as this user.
    Valid(Arc<str>),
    /// Rejected recently.
    Rejected,
    /// Not known, expired or from an older generation: verify it.
    Miss,
}

#[derive(Debug)]
struct Entry<T> {
    value: T,
    expires: Instant,
    generation: u64,
}

#[derive(Debug, Default)]
struct Maps {
    valid: HashMap<Box<[u8]>, Entry<Arc<str>>>,
    rejected: HashMap<Box<[u8]>, Entry<()>>,
}

#[derive(Debug)]
pub(crate) struct CredentialsCache {
    maps: Mutex<Maps>,
    ttl: Duration,
    negative_ttl: Duration,
    max_valid: usize,
    max_rejected: usize,
}

impl CredentialsCache {
    /// A zero `ttl` or `negative_ttl` turns that half of the cache off.
    pub(crate) fn new(ttl: Duration, negative_ttl: Duration) -> CredentialsCache {
        CredentialsCache::with_limits(ttl, negative_ttl, MAX_VALID, MAX_REJECTED)
    }

    fn with_limits(
        ttl: Duration,
        negative_ttl: Duration,
        max_valid: usize,
        max_rejected: usize,
    ) -> CredentialsCache {
        CredentialsCache {
            maps: Mutex::default(),
            ttl,
            negative_ttl,
            max_valid,
            max_rejected,
        }
    }

    /// Allocation-free.
    pub(crate) fn get(&self, token: &[u8], now: Instant, generation: u64) -> Cached {
        let maps = self.lock();
        let fresh = |expires: Instant, entry_generation: u64| {
            now < expires && entry_generation == generation
        };
        if let Some(entry) = maps.valid.get(token) {
            if fresh(entry.expires, entry.generation) {
                return Cached::Valid(Arc::clone(&entry.value));
            }
        }
        if let Some(entry) = maps.rejected.get(token) {
            if fresh(entry.expires, entry.generation) {
                return Cached::Rejected;
            }
        }
        Cached::Miss
    }

    pub(crate) fn insert_valid(&self, token: &[u8], user: Arc<str>, now: Instant, generation: u64) {
        if self.ttl.is_zero() {
            return;
        }
        let mut maps = self.lock();
        maps.rejected.remove(token);
        let entry = Entry {
            value: user,
            expires: now + self.ttl,
            generation,
        };
        insert_bounded(
            &mut maps.valid,
            token,
            entry,
            self.max_valid,
            now,
            generation,
        );
    }

    pub(crate) fn insert_rejected(&self, token: &[u8], now: Instant, generation: u64) {
        if self.negative_ttl.is_zero() {
            return;
        }
        let mut maps = self.lock();
        maps.valid.remove(token);
        let entry = Entry {
            value: (),
            expires: now + self.negative_ttl,
            generation,
        };
        insert_bounded(
            &mut maps.rejected,
            token,
            entry,
            self.max_rejected,
            now,
            generation,
        );
    }

    /// The maps stay consistent whatever panicked while holding the lock (every update is a
    /// single insert or remove), so a poisoned lock is simply taken over.
    fn lock(&self) -> std::sync::MutexGuard<'_, Maps> {
        self.maps.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[cfg(test)]
    fn len(&self) -> (usize, usize) {
        let maps = self.lock();
        (maps.valid.len(), maps.rejected.len())
    }
}

fn insert_bounded<T>(
    map: &mut HashMap<Box<[u8]>, Entry<T>>,
    token: &[u8],
    entry: Entry<T>,
    max: usize,
    now: Instant,
    generation: u64,
) {
    if let Some(slot) = map.get_mut(token) {
        *slot = entry;
        return;
    }
    if map.len() >= max {
        map.retain(|_, e| now < e.expires && e.generation == generation);
    }
    if map.len() >= max {
        // Still full of live entries: drop one at random (the map's iteration order is
        // randomly seeded), which costs its owner one re-verification.
        if let Some(victim) = map.keys().next().cloned() {
            map.remove(&victim);
        }
    }
    map.insert(token.into(), entry);
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);
    const FIVE: Duration = Duration::from_secs(5);

    #[test]
    fn valid_entries_live_for_the_ttl() {
        let cache = CredentialsCache::new(HOUR, FIVE);
        let t0 = Instant::now();
        assert_eq!(cache.get(b"tok", t0, 0), Cached::Miss);
        cache.insert_valid(b"tok", "alice".into(), t0, 0);
        assert_eq!(cache.get(b"tok", t0, 0), Cached::Valid("alice".into()));
        let almost = t0 + HOUR - Duration::from_millis(1);
        assert_eq!(cache.get(b"tok", almost, 0), Cached::Valid("alice".into()));
        assert_eq!(cache.get(b"tok", t0 + HOUR, 0), Cached::Miss);
        assert_eq!(cache.get(b"other", t0, 0), Cached::Miss);
    }

    #[test]
    fn rejections_live_for_the_negative_ttl() {
        let cache = CredentialsCache::new(HOUR, FIVE);
        let t0 = Instant::now();
        cache.insert_rejected(b"bad", t0, 0);
        assert_eq!(
            cache.get(b"bad", t0 + Duration::from_secs(4), 0),
            Cached::Rejected
        );
        assert_eq!(cache.get(b"bad", t0 + FIVE, 0), Cached::Miss);
        // A later success replaces the rejection, and the other way round.
        cache.insert_valid(b"bad", "u".into(), t0, 0);
        assert_eq!(cache.get(b"bad", t0, 0), Cached::Valid("u".into()));
        cache.insert_rejected(b"bad", t0, 0);
        assert_eq!(cache.get(b"bad", t0, 0), Cached::Rejected);
        assert_eq!(cache.len(), (0, 1));
    }

    #[test]
    fn a_new_generation_invalidates_everything() {
        let cache = CredentialsCache::new(HOUR, FIVE);
        let t0 = Instant::now();
        cache.insert_valid(b"a", "alice".into(), t0, 7);
        cache.insert_rejected(b"b", t0, 7);
        assert_eq!(cache.get(b"a", t0, 8), Cached::Miss);
        assert_eq!(cache.get(b"b", t0, 8), Cached::Miss);
    }

    #[test]
    fn zero_ttls_disable_caching() {
        let cache = CredentialsCache::new(Duration::ZERO, Duration::ZERO);
        let t0 = Instant::now();
        cache.insert_valid(b"a", "alice".into(), t0, 0);
        cache.insert_rejected(b"b", t0, 0);
        assert_eq!(cache.get(b"a", t0, 0), Cached::Miss);
        assert_eq!(cache.get(b"b", t0, 0), Cached::Miss);
        assert_eq!(cache.len(), (0, 0));
    }

    #[test]
    fn size_is_bounded_and_rejections_cannot_evict_users() {
        let cache = CredentialsCache::with_limits(HOUR, FIVE, 4, 2);
        let t0 = Instant::now();
        for i in 0..4u8 {
            cache.insert_valid(&[b'v', i], "u".into(), t0, 0);
        }
        for i in 0..100u8 {
            cache.insert_rejected(&[b'r', i], t0, 0);
        }
        assert_eq!(cache.len(), (4, 2));
        for i in 0..4u8 {
            assert_eq!(cache.get(&[b'v', i], t0, 0), Cached::Valid("u".into()));
        }
        // Expired entries are dropped before live ones.
        let later = t0 + Duration::from_secs(10);
        cache.insert_rejected(b"fresh", later, 0);
        assert_eq!(cache.len(), (4, 1));
        // Full of live users: one arbitrary user goes, the newcomer stays.
        cache.insert_valid(b"new", "n".into(), t0, 0);
        assert_eq!(cache.len(), (4, 1));
        assert_eq!(cache.get(b"new", t0, 0), Cached::Valid("n".into()));
    }
}
