//! The writing side of a fill: the request that missed and fetches from the origin.

use std::sync::Arc;

use bytes::Bytes;

use super::{
    BodyLength, DetachReason, FillHead, FillShared, FillTarget, FillTicket, FinishError,
    FinishOutcome, NotStoredReason, Phase,
};
use crate::object::{accounted_size, Body, Object, CHUNK_OVERHEAD_BYTES};

/// What both writer states hold; its owner aborts the fill when dropped unfinished.
struct WriterCore<M> {
    shared: Arc<FillShared<M>>,
    target: Arc<dyn FillTarget<M>>,
    ticket: FillTicket,
}

impl<M> WriterCore<M> {
    fn abort(self) {
        self.shared.end(Phase::Aborted);
        self.target.detach(&self.ticket, DetachReason::Aborted);
    }
}

/// The first request to miss on a key: it fetches from the origin and fills the store.
///
/// Concurrent misses on the same key wait on this fill as [`super::FillReader`]s. Next
/// step: [`FillWriter::publish_head`] once the origin's response head is known and judged
/// storable, or [`FillWriter::release`] when it is not, so the waiters fetch on their own.
/// Dropping it (or [`FillWriter::abort`]) aborts the fill: waiters get `Aborted`.
pub struct FillWriter<M> {
    core: Option<WriterCore<M>>,
}

impl<M> std::fmt::Debug for FillWriter<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ticket = self.core.as_ref().map(|c| &c.ticket);
        f.debug_struct("FillWriter")
            .field("ticket", &ticket)
            .finish()
    }
}

impl<M: Clone + Send + Sync + 'static> FillWriter<M> {
    pub(crate) fn new(
        shared: Arc<FillShared<M>>,
        target: Arc<dyn FillTarget<M>>,
        ticket: FillTicket,
    ) -> Self {
        FillWriter {
            core: Some(WriterCore {
                shared,
                target,
                ticket,
            }),
        }
    }

    /// Publishes the response head so waiting readers can inspect it, and moves on to the
    /// body.
    ///
    /// `head` is the serialised status line and header fields exactly as a hit will send
    /// them (minus per-hit fields like `Age`); `meta` is the caller's policy metadata;
    /// `secondary` the Vary-derived secondary key (empty without Vary, RFC 9111 §4.1);
    /// `length` the framing the origin promised. A `Known` length already over the maximum
    /// object size marks the fill too big at once (it still streams to attached readers).
    pub fn publish_head(
        self,
        head: Bytes,
        meta: M,
        secondary: Bytes,
        length: BodyLength,
    ) -> BodyWriter<M> {
        self.publish(head, meta, secondary, length, false)
    }

    /// [`FillWriter::publish_head`] for a fill that replays a copy the store kept (a disk
    /// read): readers see `FillHead::stored` and judge its freshness themselves.
    pub fn publish_stored_head(
        self,
        head: Bytes,
        meta: M,
        secondary: Bytes,
        length: BodyLength,
    ) -> BodyWriter<M> {
        self.publish(head, meta, secondary, length, true)
    }

    fn publish(
        mut self,
        head: Bytes,
        meta: M,
        secondary: Bytes,
        length: BodyLength,
        stored: bool,
    ) -> BodyWriter<M> {
        let core = self
            .core
            .take()
            .expect("a FillWriter always holds its core until consumed");
        let max = core.target.max_object_bytes();
        let keys_len = core.ticket.primary.len() + secondary.len();
        let base_size = accounted_size(head.len(), 0, 0, keys_len);
        let promised = match length {
            BodyLength::Known(n) => n,
            BodyLength::Unknown => 0,
        };
        let oversize = accounted_size(head.len(), promised, 0, keys_len) > max;
        let object = Arc::new(Object::new(
            head,
            Body::Chunks(Arc::from(Vec::new())),
            promised,
            meta,
            secondary,
        ));
        {
            let mut st = core.shared.lock();
            st.head = Some(FillHead {
                object,
                length,
                stored,
            });
            st.oversize = oversize;
        }
        core.shared.notify.notify_waiters();
        if oversize {
            core.target.detach(&core.ticket, DetachReason::TooBig);
        }
        BodyWriter {
            core: Some(core),
            length,
            received: 0,
            chunks: 0,
            base_size,
            max,
            oversize,
            on_disk: None,
        }
    }

    /// Declares the response not storable/shareable (e.g. `Cache-Control: private` or
    /// `no-store`, RFC 9111 §3 and §5.2.2): every waiting reader gets `Released` and must
    /// fetch on its own. The caller relays its own response directly.
    pub fn release(mut self) {
        if let Some(core) = self.core.take() {
            core.shared.end(Phase::Released);
            core.target.detach(&core.ticket, DetachReason::Released);
        }
    }

    /// A reader attached to this fill (the tiered store's requester while a disk read
    /// drives this writer).
    pub(crate) fn join(&self) -> Option<super::FillReader<M>> {
        self.core.as_ref().and_then(|c| c.shared.join_any())
    }

    /// Hands this fill over to one of its readers before any head was published: the
    /// store could not serve it after all (a disk copy was corrupt, gone, or not
    /// decodable). The first reader to wait for the head gets `Released` and the writer
    /// (`FillReader::take_writer`); the others keep waiting for the head that writer will
    /// publish. With no reader attached, the fill is aborted.
    pub(crate) fn hand_off(mut self) {
        let Some(core) = self.core.take() else { return };
        let shared = Arc::clone(&core.shared);
        let writer = FillWriter { core: Some(core) };
        let mut st = shared.lock();
        if st.active_readers == 0 || st.phase != Phase::Open || st.head.is_some() {
            drop(st);
            drop(writer); // aborts
            return;
        }
        st.handoff = Some(writer);
        drop(st);
        shared.notify.notify_waiters();
    }

    /// Gives up before the head (origin unreachable, bad response): waiting readers get
    /// `Aborted`. Same as dropping the writer.
    pub fn abort(mut self) {
        if let Some(core) = self.core.take() {
            core.abort();
        }
    }
}

impl<M> Drop for FillWriter<M> {
    fn drop(&mut self) {
        if let Some(core) = self.core.take() {
            core.abort();
        }
    }
}

/// The body stage of a fill: append chunks as they arrive, then finish or abort.
/// Dropping it unfinished aborts the fill.
pub struct BodyWriter<M> {
    core: Option<WriterCore<M>>,
    length: BodyLength,
    received: u64,
    chunks: u64,
    base_size: u64,
    max: u64,
    oversize: bool,
    /// The body is a disk record's (the tiered store): the object is marked so (before it is
    /// committed, so an eviction right after never rewrites it).
    on_disk: Option<u64>,
}

impl<M> std::fmt::Debug for BodyWriter<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyWriter")
            .field("length", &self.length)
            .field("received", &self.received)
            .field("oversize", &self.oversize)
            .finish()
    }
}

impl<M: Clone + Send + Sync + 'static> BodyWriter<M> {
    /// Body bytes appended so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The published head as an object with an empty body (what collapsed readers see): for
    /// a writer that answers its own client from the head it stored.
    pub fn object(&self) -> Arc<Object<M>> {
        let core = self
            .core
            .as_ref()
            .expect("a BodyWriter always holds its core until consumed");
        let st = core.shared.lock();
        Arc::clone(&st.head.as_ref().expect("published before the body").object)
    }

    /// Whether the object has outgrown the maximum object size: it will not be stored,
    /// but attached readers still receive every chunk.
    pub fn is_too_big(&self) -> bool {
        self.oversize
    }

    /// Declares that the body is a disk record's: the committed object is marked on disk.
    pub(crate) fn mark_on_disk(&mut self, hash: u64) {
        self.on_disk = Some(hash);
    }

    /// Declares that the body will not be committed (the tiered store serves a large disk
    /// body from its segment file instead): from now on the fill behaves as one that
    /// outgrew the maximum object size (attached readers get every chunk, nothing is kept
    /// for later ones, nothing is stored).
    pub(crate) fn keep_out_of_store(&mut self) {
        if self.oversize {
            return;
        }
        self.oversize = true;
        let core = self
            .core
            .as_ref()
            .expect("a BodyWriter always holds its core until consumed");
        core.shared.lock().oversize = true;
        core.target.detach(&core.ticket, DetachReason::TooBig);
    }

    /// Appends the next body chunk (a slice of the origin read buffer; not copied) and
    /// wakes the readers waiting for it. Empty chunks are ignored.
    pub fn append(&mut self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        self.received += chunk.len() as u64;
        self.chunks += 1;
        let size = self
            .base_size
            .saturating_add(self.received)
            .saturating_add(CHUNK_OVERHEAD_BYTES.saturating_mul(self.chunks));
        let became_oversize = !self.oversize && size > self.max;
        self.oversize |= became_oversize;
        let core = self
            .core
            .as_ref()
            .expect("a BodyWriter always holds its core until consumed");
        let wake = {
            let mut st = core.shared.lock();
            st.oversize = self.oversize;
            if self.oversize && st.active_readers == 0 {
                // Too big and nobody attached: nothing will ever read this chunk.
                st.first_chunk += 1;
                st.trim_read_chunks();
            } else {
                st.chunks.push_back(chunk);
                if self.oversize {
                    st.trim_read_chunks();
                }
            }
            st.active_readers > 0
        };
        if wake {
            core.shared.notify.notify_waiters();
        }
        if became_oversize {
            core.target.detach(&core.ticket, DetachReason::TooBig);
        }
    }

    /// Declares the body complete. With a `Known` length the total must match, otherwise
    /// the fill is aborted (readers get `Aborted`) and nothing is stored. A complete body
    /// is committed unless too big or purged meanwhile; either way readers then get a
    /// clean end of body.
    pub fn finish(mut self) -> Result<FinishOutcome<M>, FinishError> {
        let core = self
            .core
            .take()
            .expect("a BodyWriter always holds its core until consumed");
        if let BodyLength::Known(expected) = self.length {
            if expected != self.received {
                core.abort();
                return Err(FinishError::LengthMismatch {
                    expected,
                    received: self.received,
                });
            }
        }
        let outcome = if self.oversize {
            FinishOutcome::NotStored(NotStoredReason::TooBig)
        } else {
            let (head, chunks) = {
                let st = core.shared.lock();
                let head = &st.head.as_ref().expect("published before the body").object;
                let chunks: Arc<[Bytes]> = st.chunks.iter().cloned().collect();
                (Arc::clone(head), chunks)
            };
            let object = Object::new(
                head.head().clone(),
                Body::Chunks(chunks),
                self.received,
                head.meta().clone(),
                head.secondary().clone(),
            );
            if let Some(hash) = self.on_disk {
                object.set_on_disk(hash);
            }
            core.target.commit(&core.ticket, object)
        };
        core.shared.end(Phase::Complete);
        Ok(outcome)
    }

    /// Gives up on the body (origin died mid-body, client-side decision): every reader
    /// gets `Aborted` and nothing is stored. Same as dropping the writer.
    pub fn abort(mut self) {
        if let Some(core) = self.core.take() {
            core.abort();
        }
    }

    #[cfg(test)]
    pub(crate) fn buffered_chunks(&self) -> usize {
        let core = self
            .core
            .as_ref()
            .expect("a BodyWriter always holds its core until consumed");
        core.shared.lock().chunks.len()
    }
}

impl<M> Drop for BodyWriter<M> {
    fn drop(&mut self) {
        if let Some(core) = self.core.take() {
            core.abort();
        }
    }
}
