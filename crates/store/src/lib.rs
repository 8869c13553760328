//! Sepia's cache storage: a sharded in-memory store of complete responses, with request
//! collapsing and streaming fills, optionally over a persistent disk tier.
//!
//! The store knows nothing of HTTP semantics: it keeps pre-serialised response heads, body
//! chunks and a caller-defined metadata type `M` (the proxy puts the RFC 9111 policy data
//! there: times, validators, Vary names). Keys are bytes built by the caller: a *primary*
//! key (the normalised URI) and, per variant, a *secondary* key (the Vary-selected request
//! header values, empty without Vary; RFC 9111 §4.1).
//!
//! # Using it
//!
//! ```
//! use bytes::Bytes;
//! use sepia_store::{by_secondary, BodyLength, FinishOutcome, Lookup, MemoryStore, StoreConfig};
//!
//! let store: MemoryStore<u32> = MemoryStore::new(StoreConfig::default());
//! match store.lookup(b"http://example.com/", by_secondary(b"")) {
//!     Lookup::Miss(writer) => {
//!         // ... the origin answered; the policy said "storable" ...
//!         let head = Bytes::from_static(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
//!         let mut body = writer.publish_head(head, 42, Bytes::new(), BodyLength::Known(5));
//!         body.append(Bytes::from_static(b"hello"));
//!         assert!(matches!(body.finish(), Ok(FinishOutcome::Stored(_))));
//!     }
//!     _ => unreachable!("empty store"),
//! }
//! let Lookup::Hit(object) = store.lookup(b"http://example.com/", by_secondary(b"")) else {
//!     panic!("stored above")
//! };
//! assert_eq!(object.body_len(), 5);
//! assert_eq!(*object.meta(), 42);
//! ```
//!
//! # API summary
//!
//! - [`MemoryStore::new`]`(StoreConfig)`; [`StoreConfig`] `{ budget_bytes, max_object_bytes,
//!   shards, body_file_min, max_body_files, body_file_home }` (defaults 256 MiB, 16 MiB, 32,
//!   never, 0, memfd).
//! - [`Object::body`] is a [`Body`]: the chunks as they arrived, or, for a body of at least
//!   `body_file_min` bytes that has been hit, a file ([`BodyFile`], made in a [`FileHome`])
//!   for `sendfile(2)`: the first hit of such an object moves its body into a file.
//! - [`MemoryStore::lookup`]`(primary, select) -> Lookup<M>`: [`Lookup::Hit`]`(Arc<Object<M>>)`
//!   (allocation-free), [`Lookup::Miss`]`(FillWriter<M>)` for the first requester,
//!   [`Lookup::Pending`]`(FillReader<M>)` for requests collapsing onto a fill in progress.
//! - [`MemoryStore::refresh`]`(primary, select) -> Lookup<M>` (never `Hit`): start or join a
//!   fill for a stale stored variant; the committed object replaces that variant.
//! - [`MemoryStore::lookup_no_fill`], [`MemoryStore::purge`],
//!   [`MemoryStore::remove_variant`], [`MemoryStore::update`] (after a 304, sharing the body),
//!   [`MemoryStore::stats`]; the object-safe [`Store`] trait has the same operations.
//! - Writer: [`FillWriter::publish_head`]`(head, meta, secondary, BodyLength) -> BodyWriter`
//!   or [`FillWriter::release`] (not shareable: waiters fetch on their own);
//!   [`BodyWriter::append`]`(Bytes)`, [`BodyWriter::finish`] (verifies a known length, commits
//!   unless too big or purged), [`BodyWriter::abort`]. Dropping a writer aborts.
//! - Reader: [`FillReader::head`]`.await` then [`FillReader::next_chunk`]`.await` until
//!   `Ok(None)`; [`FillError::Aborted`] means "abort the client connection",
//!   [`FillError::Released`] means "fetch on your own" — unless
//!   [`FillReader::take_writer`] then returns a writer: the store could not serve what it
//!   started (a bad disk copy); fetch from the origin and fill through that writer.
//! - Disk tier: [`TieredStore::open`]`(TieredConfig { memory: StoreConfig, disks:
//!   Vec<DiskConfig>, read_threads, max_queued_reads })` implements [`Store`] for metadata
//!   implementing [`Persist`] (`encode`, `decode(head, bytes)`). [`DiskConfig::new`]`(path,
//!   size_bytes)` (segments 16 MiB, 1 MiB buffer flushed every 1 s, checkpoint every 60 s
//!   or 1 GiB, optional daily write budget). A memory miss that the disk can answer is
//!   `Lookup::Pending`; [`TieredStore::close`] (or dropping it) flushes and checkpoints.
//!   Layout, recovery and crash guarantees: `disk/mod.rs`; tier semantics: `tiered.rs`.
//!
//! # Guarantees
//!
//! Nothing incomplete is stored; a reader never sees a clean end of an incomplete body; a
//! hit takes one shard's read lock and allocates nothing; the accounted bytes never exceed
//! the budget; objects above the maximum size are never stored but still stream whole to
//! the readers attached to their fill. Eviction is size-aware S3-FIFO per shard (see
//! `s3fifo.rs` for why). Every store must pass the conformance suite in `conformance.rs`.

mod body_file;
mod config;
mod disk;
mod disk_ghost;
mod fill;
mod ghost;
mod memory;
mod object;
mod s3fifo;
mod shard;
mod stats;
mod store;
mod tiered;

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod memory_tests;
#[cfg(test)]
mod tiered_admission_tests;
#[cfg(test)]
mod tiered_homes_tests;
#[cfg(test)]
mod tiered_ring_tests;
#[cfg(test)]
mod tiered_segment_tests;
#[cfg(test)]
mod tiered_tests;

pub use body_file::{BodyFile, FileHome};
pub use config::{StoreConfig, MAX_SHARDS};
pub use disk::{Admission, DiskConfig, DiskEngine, DiskStats, LockWait};
pub use fill::{
    BodyLength, BodyWriter, FillError, FillHead, FillReader, FillWriter, FinishError,
    FinishOutcome, NotStoredReason,
};
pub use memory::MemoryStore;
pub use object::{slice_chunks, Body, Object, CHUNK_OVERHEAD_BYTES, OBJECT_OVERHEAD_BYTES};
pub use stats::StoreStats;
pub use store::{by_secondary, Lookup, Store};
pub use tiered::{Persist, TieredConfig, TieredStore};
