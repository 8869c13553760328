//! A request the cache looks up, as the steps after the lookup need it, and the selector of
//! the stored variants it may use.

use std::cell::RefCell;

use sepia_cache_policy::{
    CacheStatus, PolicyConfig, PolicySource, RequestCacheControl, StoredMeta,
};
use sepia_store::{FillWriter, Lookup, Object};

use super::destination::Destination;
use crate::cache::{Cache, Meta};
use crate::model::{Outcome, RequestView};
use sepia_observe::ResultCode;

/// A request the cache looks up: its key and destination, and what it says about caching.
pub(super) struct Query<'q> {
    /// The cache policy of the listener the request came through.
    pub policy: &'q PolicyConfig,
    pub key: &'q [u8],
    pub dest: &'q Destination<'q>,
    pub rcc: RequestCacheControl,
    pub now: u64,
    /// A HEAD or Range request: answered from a stored response, but never starting a fill
    /// (neither would give the cache a complete body to store).
    pub partial: bool,
}

impl<'q> Query<'q> {
    /// The Cache-Status of a hit on `meta` with `ttl` left: with the targeted field that
    /// decided how it is cached, if one did (RFC 9213), as its `detail` (RFC 9211 §2.8).
    pub fn hit_status(&self, meta: &StoredMeta, ttl: i64) -> CacheStatus<'q> {
        decided_by(CacheStatus::hit(ttl), self.policy, meta.source)
    }
}

/// `status` with the targeted field that decided how the response is cached, if one did
/// (RFC 9213), as its `detail` (RFC 9211 §2.8).
pub(super) fn decided_by<'a>(
    status: CacheStatus<'a>,
    policy: &'a PolicyConfig,
    source: PolicySource,
) -> CacheStatus<'a> {
    match policy.targets().deciding(source) {
        Some(field) => status.with_detail(field),
        None => status,
    }
}

/// A writer to store a response under `key`, unless another request is storing one there.
pub(super) fn writer_for(
    req: &impl RequestView,
    cache: &Cache,
    key: &[u8],
) -> Option<FillWriter<Meta>> {
    match selecting(req, |select| cache.store.refresh(key, select)) {
        Lookup::Miss(writer) => Some(writer),
        Lookup::Hit(_) | Lookup::Pending(_) => None,
    }
}

/// Runs `with` with the selector of the stored variants this request may use (its Vary-
/// selected fields, RFC 9111 §4.1). Scoped, so that the selector (which holds a scratch
/// buffer in a `RefCell`) never lives across an await.
pub(super) fn selecting<T>(
    req: &impl RequestView,
    with: impl FnOnce(&dyn Fn(&Object<Meta>) -> bool) -> T,
) -> T {
    let fields = req.fields();
    let scratch = RefCell::new(Vec::new());
    let select = |o: &Object<Meta>| {
        o.meta()
            .meta
            .vary_matches(o.secondary(), &fields, &mut scratch.borrow_mut())
    };
    with(&select)
}

/// RFC 9111 §5.2.1.7: only-if-cached and nothing usable stored. Squid 5.7 logs it
/// `TCP_MISS/504 … HIER_NONE/-`.
pub(super) fn gateway_timeout() -> Outcome {
    Outcome::local(504, "only-if-cached: not in cache").logged_as(ResultCode::TcpMiss)
}
