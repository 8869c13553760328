//! Streaming fill and miss collapsing.
//!
//! A *fill* is one origin response being written into the store while it arrives. The
//! first client to miss gets the [`FillWriter`]; clients that miss on the same key while
//! the fill is in progress get a [`FillReader`] and stream the body as the writer appends
//! it, instead of sending their own request to the origin (request collapsing).
//!
//! The writer's life: [`FillWriter::publish_head`] (or [`FillWriter::release`] when the
//! response turns out not to be storable/shareable) → [`BodyWriter::append`]... →
//! [`BodyWriter::finish`] or [`BodyWriter::abort`]. Dropping either writer aborts.
//!
//! Guarantees (DESIGN.md "Correctness is a feature"):
//! - a reader never sees a clean end of body unless the writer finished with the promised
//!   length; on abort every reader gets [`FillError::Aborted`] at the point it has reached,
//!   so the proxy closes the client connection instead of delivering a short response;
//! - nothing incomplete is ever committed to the store;
//! - readers are woken by the writer's events (`tokio::sync::Notify`), never by polling;
//! - a body that outgrows the maximum object size keeps streaming to the readers already
//!   attached (so they get the whole body) but is not committed, and from then on only
//!   the chunks some attached reader still needs are kept in memory.

mod reader;
mod writer;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use tokio::sync::Notify;

use crate::object::Object;

pub use reader::FillReader;
pub use writer::{BodyWriter, FillWriter};

/// What the writer promises about the body length once it has seen the response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLength {
    /// Content-Length framing (RFC 9112 §6.3): `finish` verifies exactly this many bytes
    /// arrived; a different total aborts the fill.
    Known(u64),
    /// Chunked or close-delimited framing: the writer's `finish` call itself says the body
    /// is complete (the codec saw the last chunk, or the origin closed cleanly where that
    /// is a valid end).
    Unknown,
}

/// The response head of a fill, as published by the writer.
///
/// `object` is a provisional [`Object`] carrying the head, metadata and secondary key with
/// an empty body: it is what `lookup`'s selector is shown for fills in progress, and what a
/// waiting request checks (e.g. its Vary headers) before deciding to share the fill.
#[derive(Debug)]
pub struct FillHead<M> {
    /// Head, metadata and secondary key; `body()` is empty, `body_len()` is the promised
    /// length or 0 when unknown.
    pub object: Arc<Object<M>>,
    /// The body length the writer promised.
    pub length: BodyLength,
    /// The fill replays a copy the store kept (a disk read), not a response arriving from an
    /// origin: the caller judges it as any stored response (RFC 9111 §4.2), not as a fresh one.
    pub stored: bool,
}

impl<M> Clone for FillHead<M> {
    fn clone(&self) -> Self {
        FillHead {
            object: Arc::clone(&self.object),
            length: self.length,
            stored: self.stored,
        }
    }
}

/// Why a reader cannot (or can no longer) read a fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FillError {
    /// The fill ended before its body was complete (origin failure, length mismatch,
    /// writer dropped). Whatever the reader already forwarded is a truncated response: the
    /// client connection must be aborted, not ended cleanly.
    Aborted,
    /// The writer declared the response not shareable (e.g. `private`, `no-store`): the
    /// reader must fetch from the origin on its own.
    Released,
}

impl std::fmt::Display for FillError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FillError::Aborted => "cache fill aborted before the body was complete",
            FillError::Released => "cache fill released: response not shareable",
        })
    }
}

impl std::error::Error for FillError {}

/// Why `finish` refused a body: the fill was aborted and nothing was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishError {
    /// The body did not have the promised Content-Length (RFC 9112 §6.3: the response is
    /// incomplete and must not be cached as if whole, RFC 9111 §3.3).
    LengthMismatch { expected: u64, received: u64 },
}

impl std::fmt::Display for FinishError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FinishError::LengthMismatch { expected, received } => {
                write!(
                    f,
                    "body length mismatch: expected {expected} bytes, received {received}"
                )
            }
        }
    }
}

impl std::error::Error for FinishError {}

/// What a successful `finish` did with the complete body.
#[derive(Debug)]
pub enum FinishOutcome<M> {
    /// Committed: later lookups hit this object.
    Stored(Arc<Object<M>>),
    /// Complete (readers got a clean end) but not committed.
    NotStored(NotStoredReason),
}

/// Why a complete body was not committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotStoredReason {
    /// Larger than the maximum object size.
    TooBig,
    /// The key was purged while the fill was in progress: storing it would resurrect
    /// content the purge meant to remove.
    Purged,
    /// No room could be made within the budget (every other object is itself being
    /// inserted concurrently); rare and harmless: the next miss tries again.
    NoRoom,
}

/// Identity of a fill within its store: where it is registered as in progress.
#[derive(Debug, Clone)]
pub(crate) struct FillTicket {
    pub(crate) primary: Bytes,
    pub(crate) hash: u64,
    pub(crate) id: u64,
}

/// Why a fill stopped being offered to lookups without being committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DetachReason {
    Aborted,
    Released,
    TooBig,
}

/// The store side of a fill: where a complete object goes. A trait so that the fill
/// machinery serves every store (memory now, disk later) unchanged.
pub(crate) trait FillTarget<M>: Send + Sync {
    /// Commits a complete object of a fill that is still registered (or reports why not).
    fn commit(&self, ticket: &FillTicket, object: Object<M>) -> FinishOutcome<M>;
    /// Stops offering the fill to lookups; it will not be committed.
    fn detach(&self, ticket: &FillTicket, reason: DetachReason);
    /// The largest accounted object size the store will commit.
    fn max_object_bytes(&self) -> u64;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Open,
    Complete,
    Aborted,
    Released,
}

/// Marks a free slot in [`FillState::readers`].
const FREE_READER: u64 = u64::MAX;

struct FillState<M> {
    head: Option<FillHead<M>>,
    /// Body chunks from absolute index `first_chunk` on. Before the fill is oversize this
    /// is the whole body (so late readers start from byte 0 and `finish` can commit it).
    chunks: VecDeque<Bytes>,
    first_chunk: u64,
    phase: Phase,
    oversize: bool,
    /// Next absolute chunk index of each attached reader, by reader slot.
    readers: Vec<u64>,
    active_readers: usize,
    /// A writer handed over to the first reader that looks (see `FillWriter::hand_off`).
    handoff: Option<FillWriter<M>>,
}

impl<M> FillState<M> {
    fn end_chunk(&self) -> u64 {
        self.first_chunk + self.chunks.len() as u64
    }

    /// In oversize mode, drops the chunks every attached reader has already read.
    fn trim_read_chunks(&mut self) {
        let min = self.readers.iter().copied().min().unwrap_or(FREE_READER);
        while self.first_chunk < min && self.chunks.pop_front().is_some() {
            self.first_chunk += 1;
        }
    }
}

/// State shared by one fill's writer and readers.
pub(crate) struct FillShared<M> {
    state: Mutex<FillState<M>>,
    notify: Notify,
}

/// Outcome of offering a fill to a lookup.
pub(crate) enum Join<M> {
    Joined(FillReader<M>),
    /// In progress but not joinable (finished, aborted, released, too big, or its head
    /// does not match the selector).
    Skip,
}

impl<M> FillShared<M> {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(FillShared {
            state: Mutex::new(FillState {
                head: None,
                chunks: VecDeque::new(),
                first_chunk: 0,
                phase: Phase::Open,
                oversize: false,
                readers: Vec::new(),
                active_readers: 0,
                handoff: None,
            }),
            notify: Notify::new(),
        })
    }

    /// The state lock. A panic while it is held (only possible in a caller's selector)
    /// leaves the state consistent, so poisoning is ignored.
    fn lock(&self) -> MutexGuard<'_, FillState<M>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Attaches a new reader if the fill can still deliver the whole response from its
    /// first byte and its head (when published) passes `select`.
    pub(crate) fn try_join(self: &Arc<Self>, select: &dyn Fn(&Object<M>) -> bool) -> Join<M> {
        let mut st = self.lock();
        if st.phase != Phase::Open || st.oversize || st.first_chunk != 0 {
            return Join::Skip;
        }
        if let Some(head) = &st.head {
            if !select(&head.object) {
                return Join::Skip;
            }
        }
        let slot = match st.readers.iter().position(|&p| p == FREE_READER) {
            Some(slot) => {
                st.readers[slot] = 0;
                slot
            }
            None => {
                st.readers.push(0);
                st.readers.len() - 1
            }
        };
        st.active_readers += 1;
        drop(st);
        Join::Joined(FillReader::new(Arc::clone(self), slot))
    }

    /// A new reader of this fill (for the writer's own side: the tiered store joins the
    /// requester to the fill it drives from disk). `None` once the fill cannot be joined.
    pub(crate) fn join_any(self: &Arc<Self>) -> Option<FillReader<M>> {
        match self.try_join(&|_| true) {
            Join::Joined(reader) => Some(reader),
            Join::Skip => None,
        }
    }

    /// Sets the final phase and wakes every waiting reader. Aborting drops the buffered
    /// chunks at once: no reader will be given them.
    fn end(&self, phase: Phase) {
        let mut st = self.lock();
        if st.phase != Phase::Open {
            return;
        }
        st.phase = phase;
        if phase != Phase::Complete {
            st.first_chunk = st.end_chunk();
            st.chunks.clear();
        }
        drop(st);
        self.notify.notify_waiters();
    }
}

#[cfg(test)]
mod tests;
