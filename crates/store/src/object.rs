//! The stored object: a complete, immutable response ready to be written to a client.

use std::borrow::Cow;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::body_file::BodyFile;

/// Fixed per-object bookkeeping estimate charged against the byte budget on top of the
/// payload: the `Arc<Object>` allocation, the caller's metadata (the proxy's stored entry
/// and its field spans), the body's chunk list, the slot in the eviction queues, the index
/// entry, the keys' handles, and the allocator's rounding. Measured, not derived: a 64 MiB
/// budget filled with 1 KiB responses beyond eviction grew the process by 105 MiB when this
/// was 256, and by 69 MiB at 1,024 (bench/RESULTS.md, 2026-11-24). Charged per object so a
/// flood of tiny objects cannot hold far more real memory than the budget says.
pub const OBJECT_OVERHEAD_BYTES: u64 = 1024;

/// Per-chunk estimate (one `Bytes` handle plus its share of the chunk list).
pub const CHUNK_OVERHEAD_BYTES: u64 = 32;

/// Where a stored body lives.
#[derive(Debug, Clone)]
pub enum Body {
    /// The chunks it arrived in: slices of the origin's read buffers, never re-copied.
    /// Served with vectored writes.
    Chunks(Arc<[Bytes]>),
    /// A file never written again (large bodies, see `body_file.rs`): served with `sendfile(2)`.
    File(Arc<BodyFile>),
}

impl Body {
    /// The bytes as chunks: borrowed when in memory, read back from a file body (off the
    /// hot path: a hit sends a file with sendfile instead).
    pub fn to_chunks(&self) -> io::Result<Cow<'_, [Bytes]>> {
        match self {
            Body::Chunks(c) => Ok(Cow::Borrowed(c)),
            Body::File(f) => Ok(Cow::Owned(vec![f.read_all()?])),
        }
    }

    /// Number of pieces the body is accounted as (chunks, or one for a file).
    fn pieces(&self) -> usize {
        match self {
            Body::Chunks(c) => c.len(),
            Body::File(_) => 1,
        }
    }
}

/// The parts of `chunks` that hold bytes `start..end` of their concatenation: slices that
/// share the chunks' memory, nothing copied.
pub fn slice_chunks(chunks: &[Bytes], start: u64, end: u64) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut offset = 0u64;
    for chunk in chunks {
        let (lo, hi) = (offset, offset + chunk.len() as u64);
        offset = hi;
        if hi <= start || lo >= end || start >= end {
            continue;
        }
        let from = (start.max(lo) - lo) as usize;
        let to = (end.min(hi) - lo) as usize;
        out.push(chunk.slice(from..to));
    }
    out
}

/// A complete cached response.
///
/// Immutable once built: a hit hands out an `Arc<Object<M>>`, so serving it is a
/// reference-count increment and a vectored write of [`Object::head`] followed by the
/// [`Object::body`] chunks (or `sendfile` of its file), with no copy. Revalidation (RFC 9111 §4.3.4, a 304 updating the
/// stored headers) does not mutate an object: the store swaps in a new `Object` that shares
/// the same body chunks (see `update`).
#[derive(Debug)]
pub struct Object<M> {
    head: Bytes,
    body: Body,
    body_len: u64,
    meta: M,
    secondary: Bytes,
    /// Set by the first hit that tries to move the body into a file (see
    /// `MemoryStore::lookup`), so that concurrent or later hits never try again, even
    /// when that try failed.
    file_tried: AtomicBool,
    /// A disk record holds exactly this object (it was read from one, or written to one):
    /// the tiered store does not write it again while the disk still indexes its key.
    on_disk: AtomicBool,
    /// That disk's hash of the key (`DiskEngine::hash`), set before `on_disk`: evicting
    /// the object asks the disk's index with it instead of hashing the key again.
    disk_hash: AtomicU64,
    /// This handle was made by the lookup that read it from disk (the copy kept in memory
    /// is another handle): the proxy logs that hit as one from disk.
    just_read: bool,
}

impl<M> Object<M> {
    pub(crate) fn new(head: Bytes, body: Body, body_len: u64, meta: M, secondary: Bytes) -> Self {
        Object {
            head,
            body,
            body_len,
            meta,
            secondary,
            file_tried: AtomicBool::new(false),
            on_disk: AtomicBool::new(false),
            disk_hash: AtomicU64::new(0),
            just_read: false,
        }
    }

    /// This object, marked as the handle of a lookup that read it from disk.
    pub(crate) fn just_read_from_disk(mut self) -> Self {
        self.just_read = true;
        self
    }

    /// Whether the lookup that returned this handle read it from disk (a hit from disk).
    pub fn read_from_disk(&self) -> bool {
        self.just_read
    }

    /// Whether a disk record holds exactly this object (see the field): then the disk's
    /// hash of its key.
    pub(crate) fn on_disk(&self) -> Option<u64> {
        self.on_disk
            .load(Ordering::Acquire)
            .then(|| self.disk_hash.load(Ordering::Relaxed))
    }

    /// Notes that a disk record holds exactly this object, under the disk's `hash` of its key.
    pub(crate) fn set_on_disk(&self, hash: u64) {
        self.disk_hash.store(hash, Ordering::Relaxed);
        self.on_disk.store(true, Ordering::Release);
    }

    /// The pre-serialised response head (status line and header fields, ending with the
    /// empty line) minus the per-hit fields such as `Age` that the proxy adds when serving.
    #[inline]
    pub fn head(&self) -> &Bytes {
        &self.head
    }

    /// The body: the chunks it arrived in (slices of the origin's read buffers, never
    /// re-copied; none for a provisional object, the head of a fill still in progress), or a
    /// sealed file for a large body.
    #[inline]
    pub fn body(&self) -> &Body {
        &self.body
    }

    /// Total body length in bytes (the sum of the chunk lengths for a complete object).
    #[inline]
    pub fn body_len(&self) -> u64 {
        self.body_len
    }

    /// The caller's metadata (freshness times, validators, Vary field names...).
    #[inline]
    pub fn meta(&self) -> &M {
        &self.meta
    }

    /// The secondary cache key (RFC 9111 §4.1: the request header values named by the
    /// response's Vary); empty when the response had no Vary.
    #[inline]
    pub fn secondary(&self) -> &Bytes {
        &self.secondary
    }

    /// A copy of this object with a new head and metadata sharing the same body chunks:
    /// what a 304 response produces (RFC 9111 §4.3.4).
    pub(crate) fn with_head(&self, head: Bytes, meta: M) -> Self {
        Object::new(
            head,
            self.body.clone(),
            self.body_len,
            meta,
            self.secondary.clone(),
        )
    }

    /// A copy of this object with its body in `file` (the same bytes, see `body_file.rs`).
    pub(crate) fn with_file(&self, file: BodyFile) -> Self
    where
        M: Clone,
    {
        let moved = Object::new(
            self.head.clone(),
            Body::File(Arc::new(file)),
            self.body_len,
            self.meta.clone(),
            self.secondary.clone(),
        );
        // The same bytes: a disk copy of the one is a disk copy of the other.
        if let Some(hash) = self.on_disk() {
            moved.set_on_disk(hash);
        }
        moved
    }

    /// The body's chunks if it is in memory, at least `min` bytes long and no hit has
    /// claimed the move into a file yet; claims it. At most one caller ever gets `Some`.
    pub(crate) fn claim_file_move(&self, min: u64) -> Option<&Arc<[Bytes]>> {
        let Body::Chunks(chunks) = &self.body else {
            return None;
        };
        if self.body_len < min || self.body_len == 0 || self.file_tried.load(Ordering::Relaxed) {
            return None;
        }
        (!self.file_tried.swap(true, Ordering::Relaxed)).then_some(chunks)
    }

    /// Bytes charged against the store's budget for this object under `primary`.
    pub(crate) fn accounted_size(&self, primary_len: usize) -> u64 {
        accounted_size(
            self.head.len(),
            self.body_len,
            self.body.pieces(),
            primary_len + self.secondary.len(),
        )
    }
}

/// Budget charge of an object: payload, keys, and the fixed overhead estimates.
/// Used both for complete objects and, incrementally, for fills in progress so that the
/// "too big" decision during a fill is never laxer than the one made at commit (a body moved
/// into a file counts as one piece at commit, so it can only come out smaller).
pub(crate) fn accounted_size(
    head_len: usize,
    body_len: u64,
    chunks: usize,
    keys_len: usize,
) -> u64 {
    OBJECT_OVERHEAD_BYTES
        .saturating_add(head_len as u64)
        .saturating_add(keys_len as u64)
        .saturating_add(body_len)
        .saturating_add(CHUNK_OVERHEAD_BYTES.saturating_mul(chunks as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cross_chunk_boundaries() {
        let chunks = [
            Bytes::from_static(b"0123"),
            Bytes::from_static(b"4567"),
            Bytes::from_static(b"89"),
        ];
        let joined = |v: Vec<Bytes>| v.iter().flat_map(|b| b.to_vec()).collect::<Vec<u8>>();
        assert_eq!(joined(slice_chunks(&chunks, 0, 10)), b"0123456789");
        assert_eq!(joined(slice_chunks(&chunks, 3, 6)), b"345");
        assert_eq!(joined(slice_chunks(&chunks, 4, 8)), b"4567");
        assert_eq!(joined(slice_chunks(&chunks, 9, 10)), b"9");
        assert_eq!(joined(slice_chunks(&chunks, 0, 1)), b"0");
        assert!(slice_chunks(&chunks, 5, 5).is_empty());
        assert_eq!(
            slice_chunks(&chunks, 4, 8).len(),
            1,
            "one whole chunk, one slice"
        );
    }

    fn object(
        head: &'static [u8],
        chunks: &[&'static [u8]],
        secondary: &'static [u8],
    ) -> Object<u8> {
        let body: Arc<[Bytes]> = chunks.iter().map(|c| Bytes::from_static(c)).collect();
        let len = chunks.iter().map(|c| c.len() as u64).sum();
        Object::new(
            Bytes::from_static(head),
            Body::Chunks(body),
            len,
            7,
            Bytes::from_static(secondary),
        )
    }

    /// (head, body chunks, secondary key, primary key length, expected accounted size)
    type SizeCase = (
        &'static [u8],
        &'static [&'static [u8]],
        &'static [u8],
        usize,
        u64,
    );

    #[test]
    fn accounted_size_counts_every_part() {
        let cases: &[SizeCase] = &[
            (b"", &[], b"", 0, OBJECT_OVERHEAD_BYTES),
            (
                b"HTTP/1.1 200 OK\r\n\r\n",
                &[],
                b"",
                4,
                OBJECT_OVERHEAD_BYTES + 19 + 4,
            ),
            (
                b"h",
                &[b"abc", b"de"],
                b"gzip",
                10,
                OBJECT_OVERHEAD_BYTES + 1 + 5 + 4 + 10 + 2 * CHUNK_OVERHEAD_BYTES,
            ),
        ];
        for (head, chunks, secondary, primary_len, expected) in cases {
            let o = object(head, chunks, secondary);
            assert_eq!(o.accounted_size(*primary_len), *expected, "head {head:?}");
        }
    }

    #[test]
    fn with_head_shares_body_and_keeps_secondary() {
        let o = object(b"old", &[b"body"], b"en");
        let n = o.with_head(Bytes::from_static(b"new"), 9);
        assert_eq!(n.head().as_ref(), b"new");
        assert_eq!(*n.meta(), 9);
        assert_eq!(n.secondary().as_ref(), b"en");
        assert_eq!(n.body_len(), 4);
        let (Body::Chunks(a), Body::Chunks(b)) = (&o.body, &n.body) else {
            panic!("chunk bodies")
        };
        assert!(Arc::ptr_eq(a, b), "body chunks must be shared, not copied");
    }

    #[test]
    fn a_body_move_into_a_file_is_claimed_once() {
        let o = object(b"h", &[b"abc", b"de"], b"");
        assert!(o.claim_file_move(6).is_none(), "shorter than the minimum");
        assert!(o.claim_file_move(5).is_some(), "the first claim");
        assert!(
            o.claim_file_move(5).is_none(),
            "never a second, even after a failure"
        );
        let copy = o.with_head(Bytes::from_static(b"h2"), 8);
        assert!(
            copy.claim_file_move(5).is_some(),
            "a new object may try again"
        );
        assert!(object(b"h", &[], b"").claim_file_move(0).is_none(), "empty");
    }

    #[test]
    fn accounted_size_saturates_instead_of_overflowing() {
        assert_eq!(accounted_size(1, u64::MAX, 3, 1), u64::MAX);
    }
}
