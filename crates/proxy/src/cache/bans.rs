//! Purges by URL prefix and by tag, applied lazily (Varnish's bans): the store cannot list
//! its keys, so a purge that names many objects is remembered as a ban, and a stored object
//! is checked against the bans issued since it was stored, or since it was last checked,
//! when a lookup finds it. A condemned object is purged then and the lookup is a miss.
//!
//! The hit path pays one atomic load and a comparison while no ban is newer than the
//! object. Objects stay in the store (and its counts) until a lookup finds them or they are
//! evicted. Bans are kept for the process's life (a few bytes each).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{PoisonError, RwLock};

use sepia_cache_policy::Fields;
use sepia_store::Object;

use super::entry::{Meta, BAN_GENERATION as GENERATION};

/// What a ban condemns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ban {
    /// Objects whose cache key (the normalised URL) starts with these bytes.
    Prefix(Vec<u8>),
    /// Objects stored with this tag in one of the tag fields.
    Tag(Vec<u8>),
}

/// The bans, in the order they were issued, with the fields tags are read from.
pub struct Bans {
    list: RwLock<Vec<(u64, Ban)>>,
    tag_fields: Vec<String>,
}

impl Bans {
    pub fn new(tag_fields: Vec<String>) -> Bans {
        Bans {
            list: RwLock::new(Vec::new()),
            tag_fields,
        }
    }

    /// Issues `ban`; returns its generation.
    pub fn add(&self, ban: Ban) -> u64 {
        let mut list = self.list.write().unwrap_or_else(PoisonError::into_inner);
        let generation = GENERATION.fetch_add(1, Relaxed) + 1;
        list.push((generation, ban));
        generation
    }

    /// Bans issued so far.
    pub fn len(&self) -> usize {
        self.list
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether a ban issued after `obj` was stored (or last checked) condemns it. One that
    /// none condemns is marked checked up to now.
    #[inline]
    pub fn condemns(&self, key: &[u8], obj: &Object<Meta>) -> bool {
        let now = GENERATION.load(Relaxed);
        let born = obj.meta().born.load(Relaxed);
        born < now && self.check(key, obj, born, now)
    }

    #[cold]
    fn check(&self, key: &[u8], obj: &Object<Meta>, born: u64, now: u64) -> bool {
        let list = self.list.read().unwrap_or_else(PoisonError::into_inner);
        let start = list.partition_point(|(g, _)| *g <= born);
        let condemned = list[start..].iter().any(|(g, ban)| {
            *g <= now
                && match ban {
                    Ban::Prefix(prefix) => key.starts_with(prefix),
                    Ban::Tag(tag) => self.tagged(obj, tag),
                }
        });
        if !condemned {
            obj.meta().born.fetch_max(now, Relaxed);
        }
        condemned
    }

    /// Whether one of the tag fields of the stored head lists `tag` (space- or
    /// comma-separated, as `Surrogate-Key` and `Cache-Tag` are).
    fn tagged(&self, obj: &Object<Meta>, tag: &[u8]) -> bool {
        let entry = obj.meta();
        let fields = entry.layout.fields(obj.head());
        let lines = fields.lines().filter(|(name, _)| {
            self.tag_fields
                .iter()
                .any(|f| name.eq_ignore_ascii_case(f.as_bytes()))
        });
        for (_, value) in lines {
            let mut tags = value.split(|b| *b == b' ' || *b == b',' || *b == b'\t');
            if tags.any(|t| t == tag) {
                return true;
            }
        }
        false
    }
}
