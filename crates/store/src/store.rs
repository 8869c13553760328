//! The storage interface every store implements (memory now, disk later), so the proxy
//! and the conformance suite are written once against it.

use std::sync::Arc;

use bytes::Bytes;

use crate::fill::{FillReader, FillWriter};
use crate::object::Object;
use crate::stats::StoreStats;

/// The answer to a lookup.
#[derive(Debug)]
pub enum Lookup<M> {
    /// A complete stored variant: serve it.
    Hit(Arc<Object<M>>),
    /// Nothing stored or in progress: fetch from the origin and fill through the writer.
    Miss(FillWriter<M>),
    /// Another request is fetching this key: check its head, then stream from it.
    Pending(FillReader<M>),
}

impl<M> Lookup<M> {
    /// Whether this is a `Hit` (tests and logs; drops nothing).
    pub fn is_hit(&self) -> bool {
        matches!(self, Lookup::Hit(_))
    }
}

/// Operations of a response store.
///
/// Object-safe (selectors are `&dyn Fn`) so the proxy can hold an `Arc<dyn Store<M>>`;
/// concrete stores also offer generic inherent methods with the same names. See
/// [`crate::MemoryStore`] for the semantics of each operation.
pub trait Store<M>: Send + Sync {
    /// Hit, start a fill (miss) or join one in progress (collapsed miss).
    fn lookup(&self, primary: &[u8], select: &dyn Fn(&Object<M>) -> bool) -> Lookup<M>;
    /// A stored variant, never starting or joining a fill.
    fn lookup_no_fill(
        &self,
        primary: &[u8],
        select: &dyn Fn(&Object<M>) -> bool,
    ) -> Option<Arc<Object<M>>>;
    /// Starts or joins a fill although a variant may be stored (stale: revalidate/replace).
    fn refresh(&self, primary: &[u8], select: &dyn Fn(&Object<M>) -> bool) -> Lookup<M>;
    /// Removes all variants of `primary`; fills in progress for it will not be committed.
    fn purge(&self, primary: &[u8]) -> usize;
    /// Removes the variant of `primary` whose secondary key is `secondary`.
    fn remove_variant(&self, primary: &[u8], secondary: &[u8]) -> bool;
    /// Swaps in a new head and metadata for the stored `old`, sharing its body (304).
    fn update(
        &self,
        primary: &[u8],
        old: &Arc<Object<M>>,
        head: Bytes,
        meta: M,
    ) -> Option<Arc<Object<M>>>;
    /// Counter snapshot.
    fn stats(&self) -> StoreStats;
    /// Makes what the store holds durable before the process exits (a disk tier flushes and
    /// checkpoints); lookups may continue meanwhile. Nothing to do for memory alone.
    fn close(&self) {}
    /// Changes the memory tier's byte budget (a configuration reload); shrinking evicts
    /// (demoting to a disk tier as eviction always does).
    fn set_memory_budget(&self, bytes: u64);
}

/// A selector accepting the variant whose secondary key equals `secondary` (the common
/// case: the proxy computed the request's secondary key from the stored Vary names).
pub fn by_secondary<M>(secondary: &[u8]) -> impl Fn(&Object<M>) -> bool + '_ {
    move |object| object.secondary().as_ref() == secondary
}
