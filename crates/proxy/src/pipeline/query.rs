//! A request the cache looks up, as the steps after the lookup need it.

use sepia_cache_policy::RequestCacheControl;

use super::destination::Destination;

/// A request the cache looks up: its key and destination, and what it says about caching.
pub(super) struct Query<'q> {
    pub key: &'q [u8],
    pub dest: &'q Destination<'q>,
    pub rcc: RequestCacheControl,
    pub now: u64,
    /// A HEAD or Range request: answered from a stored response, but never starting a fill
    /// (neither would give the cache a complete body to store).
    pub partial: bool,
}
