//! The reading side of a fill: a request that collapsed onto another request's miss.

use std::pin::pin;
use std::sync::Arc;

use bytes::Bytes;

use super::{FillError, FillHead, FillShared, FillState, Phase, FREE_READER};
use crate::object::{Body, Object};

/// A request waiting on (and then streaming) a fill started by another request.
///
/// Obtained from `lookup` as `Lookup::Pending`. Call [`FillReader::head`] to see the
/// response head and decide whether it may be shared with this request (Vary, RFC 9111
/// §4.1); then [`FillReader::next_chunk`] until `Ok(None)`. Each reader starts at the first
/// body byte however late it joined. Dropping the reader detaches it.
pub struct FillReader<M> {
    shared: Arc<FillShared<M>>,
    pub(super) slot: usize,
    next: u64,
    /// The fill's writer, when it was handed to this reader (see `take_writer`).
    handoff: Option<super::FillWriter<M>>,
}

impl<M> std::fmt::Debug for FillReader<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FillReader")
            .field("slot", &self.slot)
            .field("next", &self.next)
            .finish()
    }
}

/// What one look at the fill state says a reader should do.
enum Step<T> {
    Ready(T),
    Wait,
}

impl<M> FillReader<M> {
    pub(super) fn new(shared: Arc<FillShared<M>>, slot: usize) -> Self {
        FillReader {
            shared,
            slot,
            next: 0,
            handoff: None,
        }
    }

    /// Waits until the writer publishes the response head (or gives up on the fill).
    ///
    /// `Err(Released)`: the response is not shareable, fetch on your own.
    /// `Err(Aborted)`: the fill failed; whether to retry or answer with an error is the
    /// caller's decision (no body byte has been given to this reader by `head`).
    ///
    /// A store that started the fill itself (the tiered store reading a disk copy) may find
    /// it cannot serve it: one reader then gets `Err(Released)` *and* the fill's writer from
    /// [`FillReader::take_writer`]: it fetches from the origin and fills through it exactly
    /// as after `Lookup::Miss`, and the other readers get that response.
    pub async fn head(&mut self) -> Result<FillHead<M>, FillError> {
        let got = self
            .wait(|_, st| match (&st.head, st.phase) {
                (_, Phase::Aborted) => Step::Ready(Err((FillError::Aborted, None))),
                (_, Phase::Released) => Step::Ready(Err((FillError::Released, None))),
                (Some(head), _) => Step::Ready(Ok(head.clone())),
                (None, _) => match st.handoff.take() {
                    Some(writer) => Step::Ready(Err((FillError::Released, Some(writer)))),
                    None => Step::Wait,
                },
            })
            .await;
        got.map_err(|(err, writer)| {
            self.handoff = writer;
            err
        })
    }

    /// After [`FillReader::head`] returned `Released`: the fill's writer, if it was handed
    /// to this reader (the store could not serve the response it started to). Fetch from
    /// the origin and fill through it; other requests are waiting on it. `None`: the
    /// response is simply not shareable, fetch on your own.
    pub fn take_writer(&mut self) -> Option<super::FillWriter<M>> {
        self.handoff.take()
    }

    /// Waits for the whole fill and returns it as a complete object (its head, metadata and
    /// every body chunk), for a caller that wants the stored response as a hit would see it
    /// rather than a stream: a disk read (`FillHead::stored`) arrives whole anyway. Call it
    /// before reading any chunk.
    pub async fn into_object(mut self) -> Result<Arc<Object<M>>, FillError>
    where
        M: Clone,
    {
        let head = self.head().await?;
        let mut chunks = Vec::new();
        let mut len = 0u64;
        while let Some(chunk) = self.next_chunk().await? {
            len += chunk.len() as u64;
            chunks.push(chunk);
        }
        let o = &head.object;
        Ok(Arc::new(Object::new(
            o.head().clone(),
            Body::Chunks(chunks.into()),
            len,
            o.meta().clone(),
            o.secondary().clone(),
        )))
    }

    /// The next body chunk, waiting for the writer if this reader has caught up.
    ///
    /// `Ok(None)` is the clean end: the writer finished and the body had its promised
    /// length. `Err(Aborted)` means the body will never be complete: abort the client
    /// connection rather than end the response (a short body must not look whole).
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>, FillError> {
        let slot = self.slot;
        self.wait(|next, st| match st.phase {
            Phase::Aborted => Step::Ready(Err(FillError::Aborted)),
            Phase::Released => Step::Ready(Err(FillError::Released)),
            Phase::Open | Phase::Complete => {
                // Chunks below `first_chunk` are only dropped once every attached reader
                // (this one included) is past them; should that ever fail, the body can no
                // longer be delivered whole, which is an abort, never a wrong chunk.
                let Some(index) = next.checked_sub(st.first_chunk) else {
                    return Step::Ready(Err(FillError::Aborted));
                };
                if let Some(chunk) = st.chunks.get(index as usize) {
                    let chunk = chunk.clone();
                    *next += 1;
                    st.readers[slot] = *next;
                    Step::Ready(Ok(Some(chunk)))
                } else if st.phase == Phase::Complete {
                    Step::Ready(Ok(None))
                } else {
                    Step::Wait
                }
            }
        })
        .await
    }

    /// Runs `check` under the state lock until it is ready, sleeping on the fill's
    /// notifier in between. The waiter is registered *before* the state is inspected, so
    /// an event that lands between the check and the sleep still wakes it (no lost
    /// wake-ups, no polling).
    async fn wait<T>(
        &mut self,
        mut check: impl FnMut(&mut u64, &mut FillState<M>) -> Step<T>,
    ) -> T {
        loop {
            let mut notified = pin!(self.shared.notify.notified());
            notified.as_mut().enable();
            let step = {
                let mut st = self.shared.lock();
                check(&mut self.next, &mut st)
            };
            match step {
                Step::Ready(value) => return value,
                Step::Wait => notified.await,
            }
        }
    }
}

impl<M> Drop for FillReader<M> {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.readers[self.slot] = FREE_READER;
        st.active_readers -= 1;
        if st.oversize {
            // Nothing will be committed; keep only what the remaining readers still need.
            st.trim_read_chunks();
        }
        // A handed-over writer nobody is left to take would keep the fill (and itself, a
        // reference cycle) alive: drop it, outside the lock (dropping it aborts the fill).
        let orphan = if st.active_readers == 0 {
            st.handoff.take()
        } else {
            None
        };
        drop(st);
        drop(orphan);
    }
}
