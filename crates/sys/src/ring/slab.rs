//! Read buffers carved from huge pages: a fixed region, advised into transparent huge pages
//! and cut into slots of the pool's size classes, so that a read's buffer is one physically
//! contiguous piece of memory instead of one piece per 4 KiB page.
//!
//! Why: a virtual disk without indirect descriptors (this project's bench machine's
//! virtio-blk) takes one descriptor of its ring per physically separate piece of a read's
//! buffer. Buffers from the allocator came out as 17 pieces per 68 KiB read (not two of
//! their pages adjacent), so the disk held 12–16 reads at once; with about half the buffers
//! in one piece it held 19–25, each read spent half as long in the block layer, and cold
//! 64 KiB hits went from 0.78 to 0.88 of fio's IOPS (bench/RESULTS.md, "Issue 21, thirteenth
//! stop"). Only these buffers get huge pages: the allocator's own huge pages (jemalloc
//! `thp:always`) made hits' p99 3–7× longer under idle-connection churn.
//!
//! The region is mapped once, touched only where a read lands (the kernel faults in a whole
//! huge page where it can, ordinary pages where transparent huge pages are off), and never
//! shrinks: its size is the cap on pooled read buffers. A 2 MiB chunk is given to one size
//! class the first time that class needs a slot and none is free. With every chunk given
//! out, a class that needs one takes a chunk none of whose slots is handed out from another
//! class (so a workload whose record sizes shift is not left with chunks cut for sizes it
//! no longer reads); with none such, a read takes an ordinary buffer, as before.
//!
//! # Soundness
//! The region is a private anonymous mapping owned by the [`Slab`]; it is unmapped only in
//! the slab's `Drop`, which runs once no [`SlabBuf`] holds the slab's `Arc`. Each slot is
//! handed out by [`Slab::take`] to one `SlabBuf` at a time (its offset leaves the free list
//! under the lock and comes back only in that `SlabBuf`'s `Drop`), so the memory a
//! `SlabBuf` points at is its own while it lives. A chunk is cut into slots of another class
//! only while none of its slots is handed out (`ChunkUse::taken` is 0), so no `SlabBuf`
//! points into it. A `SlabBuf` forgotten while the kernel may still write it (the ring
//! giving up on a read) leaks its `Arc` and never gives its slot back, so the region is
//! never unmapped, nor that chunk cut again, under the kernel.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

/// A transparent huge page.
pub(super) const CHUNK: usize = 2 << 20;

/// The region and the free slots of each class.
pub(super) struct Slab {
    /// Where the mapping starts (for `munmap`), its length, and the first chunk (aligned).
    map: NonNull<u8>,
    map_len: usize,
    base: NonNull<u8>,
    chunks: usize,
    free: Mutex<Free>,
    /// Bytes of slots handed out and not given back.
    in_use: Arc<AtomicUsize>,
}

/// What a reader of the slab's bytes needs to know: whether bytes lie in a slot, and
/// whether the slab is more than half handed out, so that bytes kept long (a body the
/// memory tier keeps) should be copied out instead of holding their slot.
#[derive(Clone, Debug)]
pub struct SlabGauge {
    range: std::ops::Range<usize>,
    in_use: Arc<AtomicUsize>,
}

impl SlabGauge {
    /// Whether bytes at `at` hold a slot of a slab more than half handed out.
    pub fn should_copy(&self, at: *const u8) -> bool {
        self.contains(at) && self.in_use.load(Relaxed) > self.range.len() / 2
    }

    /// Whether `at` lies in the slab.
    pub fn contains(&self, at: *const u8) -> bool {
        self.range.contains(&(at as usize))
    }
}

#[derive(Default)]
struct Free {
    /// Free slots (offsets into the region) by class.
    classes: Vec<(usize, Vec<usize>)>,
    /// By chunk given out so far (the first `chunks.len()` of the region): its class, and
    /// how many of its slots are handed out.
    chunks: Vec<ChunkUse>,
}

#[derive(Clone, Copy)]
struct ChunkUse {
    class: usize,
    taken: u32,
}

impl Free {
    /// A chunk for `class`: the next one never given out, else one whose slots are all free
    /// (taken back from its class's free list); `None` when every chunk has a slot out.
    fn chunk_for(&mut self, class: usize, chunks: usize) -> Option<usize> {
        if self.chunks.len() < chunks {
            self.chunks.push(ChunkUse { class, taken: 0 });
            return Some(self.chunks.len() - 1);
        }
        let c = self.chunks.iter().position(|u| u.taken == 0)?;
        let old = self.chunks[c].class;
        if let Some((_, slots)) = self.classes.iter_mut().find(|(k, _)| *k == old) {
            slots.retain(|&at| at / CHUNK != c);
        }
        self.chunks[c].class = class;
        Some(c)
    }
}

#[allow(unsafe_code)]
// SAFETY: the pointers name a mapping the slab owns and that lives as long as it (see the
// module's "Soundness"); the slab itself only hands out offsets, under its lock.
unsafe impl Send for Slab {}
#[allow(unsafe_code)]
// SAFETY: as for `Send`: shared use goes through the lock.
unsafe impl Sync for Slab {}

impl Slab {
    /// A region of `bytes` rounded down to whole chunks; `None` for less than one chunk or
    /// when the mapping fails (reads then take ordinary buffers).
    pub(super) fn new(bytes: usize) -> Option<Arc<Slab>> {
        let chunks = bytes / CHUNK;
        if chunks == 0 {
            return None;
        }
        // One chunk more than needed, so that the chunks start on a huge page's boundary.
        let map_len = (chunks + 1) * CHUNK;
        #[allow(unsafe_code)]
        // SAFETY: a new private anonymous mapping at an address of the kernel's choosing:
        // it overlaps nothing. `MAP_NORESERVE`: pages are committed as reads touch them.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        let map = NonNull::new(map.cast::<u8>())?;
        let base = map.as_ptr().wrapping_add(map.as_ptr().align_offset(CHUNK));
        #[allow(unsafe_code)]
        // SAFETY: advice on a range inside the mapping just made; it changes how pages are
        // backed, never their contents. Refused (transparent huge pages compiled out or
        // off): ordinary pages, which is still correct.
        let _ = unsafe { libc::madvise(base.cast(), chunks * CHUNK, libc::MADV_HUGEPAGE) };
        Some(Arc::new(Slab {
            map,
            map_len,
            base: NonNull::new(base).expect("inside a mapping at a non-null address"),
            chunks,
            free: Mutex::new(Free::default()),
            in_use: Arc::default(),
        }))
    }

    pub(super) fn gauge(&self) -> SlabGauge {
        SlabGauge {
            range: self.range(),
            in_use: Arc::clone(&self.in_use),
        }
    }

    /// The addresses its slots lie in.
    pub(super) fn range(&self) -> std::ops::Range<usize> {
        let start = self.base.as_ptr() as usize;
        start..start + self.chunks * CHUNK
    }

    /// A free slot of `class` bytes, carving a chunk for the class if none is free (a new
    /// one, else an idle one of another class); `None` when every chunk has a slot handed
    /// out and none is free in this class (or `class` is larger than a chunk).
    pub(super) fn take(self: &Arc<Self>, class: usize) -> Option<SlabBuf> {
        if class == 0 || class > CHUNK {
            return None;
        }
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        let at = match free.classes.iter().position(|(c, _)| *c == class) {
            Some(i) => i,
            None => {
                free.classes.push((class, Vec::new()));
                free.classes.len() - 1
            }
        };
        if free.classes[at].1.is_empty() {
            if let Some(c) = free.chunk_for(class, self.chunks) {
                // Highest offsets first: slots are taken from the chunk's start.
                let slots = (0..CHUNK / class).rev().map(|k| c * CHUNK + k * class);
                free.classes[at].1.extend(slots);
            }
        }
        let offset = free.classes[at].1.pop()?;
        free.chunks[offset / CHUNK].taken += 1;
        self.in_use.fetch_add(class, Relaxed);
        Some(SlabBuf {
            slab: Arc::clone(self),
            offset,
            class,
            len: 0,
        })
    }

    fn give(&self, class: usize, offset: usize) {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, slots)) = free.classes.iter_mut().find(|(c, _)| *c == class) {
            slots.push(offset);
            free.chunks[offset / CHUNK].taken -= 1;
            self.in_use.fetch_sub(class, Relaxed);
        }
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        #[allow(unsafe_code)]
        // SAFETY: the mapping made in `new`, whole; no `SlabBuf` is left (each holds an
        // `Arc` of this slab), so nothing points into it any more.
        let _ = unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

/// One slot of a [`Slab`]: `class` bytes, of which the first `len` are the buffer's.
pub(super) struct SlabBuf {
    slab: Arc<Slab>,
    offset: usize,
    class: usize,
    len: usize,
}

impl SlabBuf {
    pub(super) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.slab.base.as_ptr().wrapping_add(self.offset)
    }

    pub(super) fn as_ptr(&self) -> *const u8 {
        self.slab.base.as_ptr().wrapping_add(self.offset)
    }

    /// The first `n` bytes zeroed and made the buffer's (`n` at most the capacity).
    pub(super) fn pad(&mut self, n: usize) {
        assert!(n <= self.class, "padding past the slot");
        #[allow(unsafe_code)]
        // SAFETY: `n` bytes from the slot's start are inside the slot (checked), which is
        // this buffer's alone (see the module's "Soundness").
        unsafe {
            self.as_mut_ptr().write_bytes(0, n);
        }
        self.len = n;
    }

    /// Makes the first `len` bytes the buffer's.
    ///
    /// # Safety
    /// `len` is at most the capacity. (Every byte of a slot is initialised: the mapping
    /// starts zeroed and is only ever written.)
    #[allow(unsafe_code)]
    pub(super) unsafe fn set_len(&mut self, len: usize) {
        debug_assert!(len <= self.class);
        self.len = len;
    }
}

impl AsRef<[u8]> for SlabBuf {
    fn as_ref(&self) -> &[u8] {
        #[allow(unsafe_code)]
        // SAFETY: `len` bytes inside this buffer's slot (`pad` and `set_len` keep it within
        // the capacity), initialised (the mapping starts zeroed), and not written while
        // borrowed: the kernel's write ended before the buffer was handed out as bytes, and
        // nothing else holds the slot.
        unsafe {
            std::slice::from_raw_parts(self.as_ptr(), self.len)
        }
    }
}

impl Drop for SlabBuf {
    fn drop(&mut self) {
        self.slab.give(self.class, self.offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_carved_by_class_used_again_and_run_out() {
        let slab = Slab::new(2 * CHUNK).expect("a mapping");
        let class = 80 << 10;
        let per_chunk = CHUNK / class;
        let mut held: Vec<SlabBuf> = (0..per_chunk).map(|_| slab.take(class).unwrap()).collect();
        let mut starts: Vec<usize> = held.iter().map(|b| b.offset).collect();
        starts.sort_unstable();
        starts.dedup();
        assert_eq!(starts.len(), per_chunk, "every slot handed out once");
        // Another class takes the second chunk; then the region is used up for both.
        let other = slab.take(32 << 10).expect("a chunk for the second class");
        assert!(other.offset >= CHUNK);
        assert!(
            slab.take(class).is_none(),
            "no chunk left for the first class"
        );
        // A slot given back is the next one taken.
        let mut b = held.pop().unwrap();
        let at = b.offset;
        b.pad(10);
        drop(b);
        let again = slab.take(class).unwrap();
        assert_eq!(again.offset, at);
        assert!(slab.take(CHUNK + 1).is_none(), "larger than a chunk");
    }

    #[test]
    fn a_chunk_whose_slots_are_all_free_goes_to_a_class_that_needs_one() {
        let slab = Slab::new(2 * CHUNK).unwrap();
        let (a, b) = (80 << 10, 32 << 10);
        let per_chunk = CHUNK / a;
        let mut held: Vec<SlabBuf> = (0..2 * per_chunk).map(|_| slab.take(a).unwrap()).collect();
        assert!(slab.take(b).is_none(), "every chunk has a slot out");
        // The second chunk's slots all come back: it is idle, and `b` takes it over.
        held.retain(|s| s.offset < CHUNK);
        let other = slab.take(b).expect("the idle chunk, for the other class");
        assert!(other.offset >= CHUNK);
        assert!(
            slab.take(a).is_none(),
            "the chunk's slots left the first class's free list"
        );
        let mut more: Vec<SlabBuf> = (1..CHUNK / b).map(|_| slab.take(b).unwrap()).collect();
        more.push(other);
        let mut starts: Vec<usize> = more.iter().chain(&held).map(|s| s.offset).collect();
        starts.sort_unstable();
        starts.dedup();
        assert_eq!(
            starts.len(),
            more.len() + held.len(),
            "no slot handed out twice"
        );
        drop(more);
        let back = slab.take(a).expect("idle again: back to the first class");
        assert!(back.offset >= CHUNK);
        assert!(
            slab.take(b).is_none(),
            "the chunk's slots left the second class's free list"
        );
        assert_eq!(slab.gauge().in_use.load(Relaxed), (per_chunk + 1) * a);
    }

    #[test]
    fn a_buffer_reads_back_what_was_written_and_the_region_outlives_its_slots() {
        let slab = Slab::new(CHUNK).unwrap();
        let mut b = slab.take(64 << 10).unwrap();
        b.pad(3);
        let p = b.as_mut_ptr();
        #[allow(unsafe_code)]
        // SAFETY: inside the slot, which this test holds alone.
        unsafe {
            p.write_bytes(7, 5);
            b.set_len(5);
        }
        drop(slab);
        assert_eq!(b.as_ref(), &[7; 5], "the slot's `Arc` keeps the mapping");
        assert_eq!(b.class, 64 << 10);
    }

    #[test]
    fn the_gauge_says_copy_only_for_slots_of_a_slab_more_than_half_handed_out() {
        let slab = Slab::new(CHUNK).unwrap();
        let gauge = slab.gauge();
        let class = 256 << 10; // eight slots fill the chunk
        let mut held: Vec<SlabBuf> = (0..4).map(|_| slab.take(class).unwrap()).collect();
        let outside = [0u8; 4];
        assert!(
            !gauge.should_copy(held[0].as_ptr()),
            "half handed out: keep"
        );
        held.push(slab.take(class).unwrap());
        assert!(gauge.should_copy(held[0].as_ptr()), "more than half: copy");
        assert!(!gauge.should_copy(outside.as_ptr()), "not a slot: never");
        held.truncate(2);
        assert!(
            !gauge.should_copy(held[0].as_ptr()),
            "slots given back count"
        );
    }
}
