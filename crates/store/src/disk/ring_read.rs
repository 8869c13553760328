//! Disk reads made by an io_uring (`sepia-sys`) instead of the read threads
//! (`cache.disk_io = "io_uring"`): which reads it makes, and how their bytes become
//! records. The ring makes the common read, one record of at most a chunk (1 MiB) read
//! whole; the rest (several variants, larger records, a disk still loading, a segment
//! whose `O_DIRECT` descriptor is not open yet) stays with the read threads.

use std::fs::File;
use std::io;
use std::sync::Arc;

use bytes::Bytes;

use super::engine::DiskEngine;
use super::format::CHUNK;
use super::index::Loc;
use super::record_read::{decode_record, DiskRecord, ReadError, CACHED_READ_MAX};
use super::segment::{direct_span, keep_blocks, SegFile, DIRECT_ALIGN};

/// One read for the ring: `len` bytes at `at` of `file` (at least `need`: whole blocks
/// may run past the end of the file), in a buffer aligned to `align`.
pub(crate) struct RingRead {
    pub(crate) file: Arc<File>,
    pub(crate) at: u64,
    pub(crate) len: usize,
    pub(crate) need: usize,
    pub(crate) align: usize,
    /// For a read past the page cache: the segment's usual descriptor, should the file
    /// system refuse the direct read.
    pub(crate) fallback: Option<Arc<File>>,
    pub(crate) record: RingRecord,
}

/// Where the record lies in what a [`RingRead`] reads: `skip` bytes in, of a buffer
/// holding `held` bytes.
pub(crate) struct RingRecord {
    skip: usize,
    held: usize,
    seg: Arc<SegFile>,
    loc: Loc,
}

impl DiskEngine {
    /// The ring's read of `locs` (the index entries of the key of hash `hash`): one record,
    /// read whole, as a read thread would read it (`record_read::read_record`): past the
    /// page cache where `read_past_cache` says so, else through it. `None`: leave it to the
    /// read threads.
    pub(crate) fn ring_read(&self, locs: &[Loc], hash: u64) -> Option<RingRead> {
        let [loc] = locs else { return None };
        if self.failed() || loc.len == 0 || loc.len > CHUNK {
            return None;
        }
        let seg = self.shared.seg(loc.seg)?;
        let len = loc.len as usize;
        // Opening the `O_DIRECT` descriptor is a system call or three: the read threads do
        // that, not the event loop; later reads of the segment find it open. Asked before
        // `read_past_cache`, which notes a re-read: the threads would note it a second time.
        let opened = seg.direct_if_opened();
        if opened.is_none() && loc.len > CACHED_READ_MAX {
            return None;
        }
        let direct = if self.shared.rereads.read_past_cache(&seg, loc, hash) {
            opened.flatten().cloned()
        } else {
            None
        };
        let fallback = direct.is_some().then(|| Arc::clone(&seg.file));
        let (file, at, skip, span, align) = match direct {
            Some(file) => {
                let (at, skip, span) = direct_span(loc.offset, len);
                (file, at, skip, span, DIRECT_ALIGN)
            }
            None => (Arc::clone(&seg.file), loc.offset, 0, len, 1),
        };
        Some(RingRead {
            file,
            at,
            len: span,
            need: skip + len,
            align,
            fallback,
            record: RingRecord {
                skip,
                held: sepia_sys::ring::held_bytes(span + align - 1),
                seg,
                loc: *loc,
            },
        })
    }

    /// The records the ring's `read` of `r` gives, booked as the read threads book theirs.
    /// `slab`: the ring's huge-page buffers. Once more than half of them are handed out,
    /// bytes read into one are copied out rather than kept: a kept record holds its slot
    /// for as long as the memory tier keeps the object it becomes, and the slab's few
    /// hundred slots would run out (reads then take ordinary buffers, scattered pages).
    pub(crate) fn ring_records(
        &self,
        r: &RingRecord,
        primary: &[u8],
        hash: u64,
        segment_from: u64,
        read: io::Result<Bytes>,
        slab: Option<&sepia_sys::ring::SlabGauge>,
    ) -> Vec<DiskRecord> {
        let mut out = Vec::new();
        let b = match read {
            Ok(b) => b,
            // The ring stopping, or a file system refusing this `O_DIRECT` read: a miss,
            // nothing wrong with the disk.
            Err(e)
                if e.kind() == io::ErrorKind::Interrupted
                    || e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) =>
            {
                return out
            }
            Err(e) => {
                self.read_failed(hash, r.loc.seg, r.loc.offset, ReadError::Io(e));
                return out;
            }
        };
        let copy = slab.is_some_and(|s| s.should_copy(b.as_ptr()));
        let b = record_bytes(b, r.skip, r.loc.len as usize, r.held, copy);
        let read = decode_record(&r.seg, &r.loc, b, primary, hash, segment_from, false);
        self.book_read(&r.loc, hash, read, &mut out);
        out
    }
}

/// The `len` record bytes `skip` bytes into a read's buffer: a slice of it when the buffer
/// is not much larger (`keep_blocks`) and need not be freed (`copy`), else a copy.
fn record_bytes(b: Bytes, skip: usize, len: usize, held: usize, copy: bool) -> Bytes {
    if keep_blocks(held, len) && !copy {
        b.slice(skip..skip + len)
    } else {
        Bytes::copy_from_slice(&b[skip..skip + len])
    }
}

#[cfg(test)]
mod record_bytes_tests {
    use super::*;

    #[test]
    fn a_slab_slot_or_a_much_larger_buffer_is_copied_out_else_sliced() {
        let buf = Bytes::from(vec![7u8; 80 << 10]);
        let inside = |b: &Bytes| buf.as_ptr_range().contains(&b.as_ptr());
        let kept = record_bytes(buf.clone(), 100, 68 << 10, 80 << 10, false);
        assert!(inside(&kept) && kept.len() == 68 << 10);
        let from_slab = record_bytes(buf.clone(), 100, 68 << 10, 80 << 10, true);
        assert!(!inside(&from_slab) && from_slab[..] == buf[100..100 + (68 << 10)]);
        let small = record_bytes(buf.clone(), 0, 300, 80 << 10, false);
        assert!(
            !inside(&small),
            "a few hundred bytes never hold a large buffer"
        );
    }
}
