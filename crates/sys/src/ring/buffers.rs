//! Read buffers used again: a large read's bytes are handed out as a `Bytes` that owns its
//! buffer, and the buffer comes back here when the last handle on it goes (the response
//! sent, or the object that kept it evicted from memory).
//!
//! Why: a fresh buffer's pages are not mapped yet, and the kernel maps them (zeroed, one
//! fault each) while it pins them for the read. On cold 64 KiB hits that was 5–8 % of the
//! CPU's samples (`do_anonymous_page` under the read's `__get_user_pages`): the allocator
//! handed out never-touched pages for about a fifth of each buffer even with its purging
//! off. With buffers used again, those samples halved and a cold 64 KiB hit went from 49.2
//! to 43.6 CPU-µs (medians of six interleaved pairs; bench/RESULTS.md, "Issue 21, ninth
//! stop").
//!
//! Pooled classes come first from the slab (`slab.rs`): slots in huge pages, one
//! physically contiguous piece per read. Once it is used up, from here:
//!
//! Buffers come in the allocator's own size classes (four per power of two, as jemalloc's:
//! a 64 KiB record's 68–76 KiB reads all take 80 KiB, which is what the allocator would
//! hold for any of them), from [`POOLED_MIN`] up to [`POOLED_MAX`]. A read gets a buffer of
//! exactly its class, which [`held_bytes`] tells the caller deciding whether to keep the
//! buffer or copy out of it, and each class keeps at most [`PER_CLASS`] free ones, within
//! the pool's byte cap. Smaller reads (a page fault or two) take fresh buffers. Page-sized
//! classes (the first cut) split the reads of 64 KiB records over three classes whose free
//! lists drifted apart: one full while another ran dry, and 30 % of the reads took fresh
//! buffers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use bytes::Bytes;

use super::slab::{Slab, SlabBuf};

/// Free buffers by class, at most `max_bytes` of them, and the huge-page slab that pooled
/// classes come from first (`slab.rs`).
pub(super) struct BufferPool {
    free: Mutex<Free>,
    max_bytes: usize,
    slab: Option<Arc<Slab>>,
}

/// A read's buffer: a slot of the slab, or an allocation of its own.
pub(super) enum ReadBuf {
    Slab(SlabBuf),
    Heap(Vec<u8>),
}

impl ReadBuf {
    pub(super) fn as_ptr(&self) -> *const u8 {
        match self {
            ReadBuf::Slab(b) => b.as_ptr(),
            ReadBuf::Heap(v) => v.as_ptr(),
        }
    }

    pub(super) fn as_mut_ptr(&mut self) -> *mut u8 {
        match self {
            ReadBuf::Slab(b) => b.as_mut_ptr(),
            ReadBuf::Heap(v) => v.as_mut_ptr(),
        }
    }

    /// The first `n` bytes zeroed and made the buffer's (`n` at most the capacity).
    pub(super) fn pad(&mut self, n: usize) {
        match self {
            ReadBuf::Slab(b) => b.pad(n),
            ReadBuf::Heap(v) => v.resize(n, 0),
        }
    }

    /// Makes the first `len` bytes the buffer's.
    ///
    /// # Safety
    /// `len` is at most the capacity, and the bytes past those already the buffer's, up to
    /// `len`, were written (by the kernel's read, reaped).
    #[allow(unsafe_code)]
    pub(super) unsafe fn set_len(&mut self, len: usize) {
        match self {
            // SAFETY: the caller's promise.
            ReadBuf::Slab(b) => unsafe { b.set_len(len) },
            // SAFETY: the caller's promise.
            ReadBuf::Heap(v) => unsafe { v.set_len(len) },
        }
    }
}

#[derive(Default)]
struct Free {
    classes: HashMap<usize, Vec<Vec<u8>>>,
    bytes: usize,
}

/// Buffers smaller than this are not pooled.
pub(super) const POOLED_MIN: usize = 32 << 10;
/// Nor larger ones (a rare 1 MiB chunk read would pin its size).
pub(super) const POOLED_MAX: usize = 256 << 10;
/// Free buffers kept per class.
const PER_CLASS: usize = 128;
const PAGE: usize = 4096;

/// The bytes a read buffer of `capacity` holds: its class. Above a page, four classes per
/// power of two (for `capacity` in (2^k, 2^(k+1)], multiples of 2^(k-2)).
pub fn held_bytes(capacity: usize) -> usize {
    if capacity <= PAGE {
        return PAGE;
    }
    let k = usize::BITS - 1 - (capacity - 1).leading_zeros();
    capacity.next_multiple_of(1 << (k - 2))
}

impl BufferPool {
    /// A pool of at most `max_bytes` of free buffers, with a slab of `slab_bytes` (none
    /// below a huge page).
    pub(super) fn new(max_bytes: usize, slab_bytes: usize) -> Arc<BufferPool> {
        Arc::new(BufferPool {
            free: Mutex::new(Free::default()),
            max_bytes,
            slab: Slab::new(slab_bytes),
        })
    }

    /// The slab's gauge (none without a slab).
    pub(super) fn slab_gauge(&self) -> Option<super::slab::SlabGauge> {
        self.slab.as_ref().map(|s| s.gauge())
    }

    /// An empty buffer of `capacity` bytes rounded up to its class: a slot of the slab for
    /// a pooled class while the slab has one, else a free buffer if any, else a new one.
    pub(super) fn take(&self, capacity: usize) -> ReadBuf {
        let class = held_bytes(capacity);
        if (POOLED_MIN..=POOLED_MAX).contains(&class) {
            if let Some(b) = self.slab.as_ref().and_then(|s| s.take(class)) {
                return ReadBuf::Slab(b);
            }
            let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(mut b) = free.classes.get_mut(&class).and_then(Vec::pop) {
                free.bytes -= class;
                b.clear();
                return ReadBuf::Heap(b);
            }
        }
        ReadBuf::Heap(Vec::with_capacity(class))
    }

    fn give(&self, buf: Vec<u8>) {
        let class = buf.capacity();
        if !(POOLED_MIN..=POOLED_MAX).contains(&class) || held_bytes(class) != class {
            return;
        }
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        if free.bytes + class > self.max_bytes {
            return;
        }
        let kept = free.classes.entry(class).or_default();
        if kept.len() < PER_CLASS {
            kept.push(buf);
            free.bytes += class;
        }
    }
}

/// `buf` as `Bytes`, its buffer given back (to `pool`, or its slot to the slab) when the
/// last handle goes.
pub(super) fn pooled(buf: ReadBuf, pool: &Arc<BufferPool>) -> Bytes {
    match buf {
        ReadBuf::Slab(b) => Bytes::from_owner(b),
        ReadBuf::Heap(buf) => Bytes::from_owner(Pooled {
            buf,
            pool: Arc::downgrade(pool),
        }),
    }
}

struct Pooled {
    buf: Vec<u8>,
    pool: Weak<BufferPool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.give(std::mem::take(&mut self.buf));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heap(b: ReadBuf) -> Vec<u8> {
        match b {
            ReadBuf::Heap(v) => v,
            ReadBuf::Slab(_) => panic!("a slot where an allocation was expected"),
        }
    }

    #[test]
    fn a_buffer_comes_back_when_its_last_handle_goes_and_only_to_its_class() {
        let pool = BufferPool::new(1 << 20, 0);
        let mut buf = heap(pool.take(70_000));
        assert_eq!(buf.capacity(), held_bytes(70_000));
        let at = buf.as_ptr();
        buf.extend_from_slice(&[7; 100]);
        let bytes = pooled(ReadBuf::Heap(buf), &pool);
        let part = bytes.slice(10..20);
        drop(bytes);
        let other = heap(pool.take(70_000));
        assert_ne!(other.as_ptr(), at, "still held by `part`");
        assert_eq!(&part[..], &[7; 10]);
        drop(part);
        let larger = heap(pool.take(90_000));
        assert_ne!(larger.as_ptr(), at, "another class: a new one");
        let again = heap(pool.take(71_000));
        assert_eq!(
            (again.as_ptr(), again.len()),
            (at, 0),
            "the same class, emptied"
        );
        // Small buffers are not kept.
        let small = heap(pool.take(5_000));
        let small_at = small.as_ptr();
        drop(pooled(ReadBuf::Heap(small), &pool));
        let _hold = Vec::<u8>::with_capacity(8_192);
        assert!(
            pool.free.lock().unwrap().bytes == 0,
            "{small_at:?} not pooled"
        );
    }

    #[test]
    fn classes_are_four_per_power_of_two() {
        let classes: Vec<usize> = [1, 4096, 4097, 8191, 69_632, 77_824, 81_920, 81_921, 200_000]
            .into_iter()
            .map(held_bytes)
            .collect();
        let want = [
            4096, 4096, 5120, 8192, 81_920, 81_920, 81_920, 98_304, 229_376,
        ];
        assert_eq!(classes, want);
    }

    #[test]
    fn the_pool_keeps_at_most_its_bytes() {
        let pool = BufferPool::new(100_000, 0);
        let bufs: Vec<_> = (0..3).map(|_| pool.take(40_000)).collect();
        for b in bufs {
            drop(pooled(b, &pool));
        }
        let free = pool.free.lock().unwrap();
        assert_eq!(free.bytes, 2 * held_bytes(40_000));
    }

    #[test]
    fn pooled_classes_come_from_the_slab_until_it_is_used_up() {
        let pool = BufferPool::new(1 << 20, super::super::slab::CHUNK);
        let per_chunk = super::super::slab::CHUNK / held_bytes(70_000);
        let slots: Vec<_> = (0..per_chunk).map(|_| pool.take(70_000)).collect();
        assert!(slots.iter().all(|b| matches!(b, ReadBuf::Slab(_))));
        assert!(
            matches!(pool.take(70_000), ReadBuf::Heap(_)),
            "the slab used up: an allocation"
        );
        assert!(
            matches!(pool.take(5_000), ReadBuf::Heap(_)),
            "below the pooled classes: never a slot"
        );
        // A slot's bytes, handed out and dropped, free the slot for the next read.
        let mut slots = slots;
        let mut b = slots.pop().unwrap();
        let at = b.as_ptr();
        b.pad(4);
        let bytes = pooled(b, &pool);
        assert_eq!(&bytes[..], &[0; 4]);
        drop(bytes);
        let again = pool.take(70_000);
        assert!(matches!(&again, ReadBuf::Slab(_)) && again.as_ptr() == at);
    }
}
