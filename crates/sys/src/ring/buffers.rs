//! Read buffers used again: a read's bytes are handed out as a `Bytes` that owns its
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

use std::sync::{Arc, Mutex, PoisonError, Weak};

use bytes::Bytes;

/// Free buffers, at most `max_bytes` of them.
pub(super) struct BufferPool {
    free: Mutex<Free>,
    max_bytes: usize,
}

struct Free {
    buffers: Vec<Vec<u8>>,
    bytes: usize,
}

/// Buffers larger than this are not kept (a rare 1 MiB chunk read would pin its size).
const MAX_KEPT: usize = 256 << 10;

impl BufferPool {
    pub(super) fn new(max_bytes: usize) -> Arc<BufferPool> {
        Arc::new(BufferPool {
            free: Mutex::new(Free {
                buffers: Vec::new(),
                bytes: 0,
            }),
            max_bytes,
        })
    }

    /// An empty buffer of at least `capacity` bytes: a free one not more than twice that
    /// (the newest such), else a new one.
    pub(super) fn take(&self, capacity: usize) -> Vec<u8> {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        let fits = |b: &Vec<u8>| b.capacity() >= capacity && b.capacity() <= 2 * capacity;
        if let Some(i) = free.buffers.iter().rposition(fits) {
            let mut b = free.buffers.swap_remove(i);
            free.bytes -= b.capacity();
            b.clear();
            return b;
        }
        drop(free);
        Vec::with_capacity(capacity)
    }

    fn give(&self, buf: Vec<u8>) {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        if buf.capacity() <= MAX_KEPT && free.bytes + buf.capacity() <= self.max_bytes {
            free.bytes += buf.capacity();
            free.buffers.push(buf);
        }
    }
}

/// `buf` as `Bytes`, its buffer given back to `pool` when the last handle goes.
pub(super) fn pooled(buf: Vec<u8>, pool: &Arc<BufferPool>) -> Bytes {
    Bytes::from_owner(Pooled {
        buf,
        pool: Arc::downgrade(pool),
    })
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

    #[test]
    fn a_buffer_comes_back_when_its_last_handle_goes_and_only_fitting_ones_are_taken() {
        let pool = BufferPool::new(1 << 20);
        let mut buf = pool.take(70_000);
        let at = buf.as_ptr();
        buf.extend_from_slice(&[7; 100]);
        let bytes = pooled(buf, &pool);
        let part = bytes.slice(10..20);
        drop(bytes);
        let other = pool.take(70_000);
        assert_ne!(other.as_ptr(), at, "still held by `part`");
        assert_eq!(&part[..], &[7; 10]);
        drop(part);
        assert_eq!(
            pool.take(200_000).capacity(),
            200_000,
            "too small: a new one"
        );
        let small = pool.take(20_000);
        assert_ne!(small.as_ptr(), at, "more than twice as large: a new one");
        let again = pool.take(70_000);
        assert_eq!(
            (again.as_ptr(), again.len()),
            (at, 0),
            "the same buffer, emptied"
        );
    }

    #[test]
    fn the_pool_keeps_at_most_its_bytes() {
        let pool = BufferPool::new(100_000);
        let bufs: Vec<_> = (0..3).map(|_| pool.take(40_000)).collect();
        for b in bufs {
            drop(pooled(b, &pool));
        }
        let free = pool.free.lock().unwrap();
        assert_eq!((free.buffers.len(), free.bytes), (2, 80_000));
    }
}
