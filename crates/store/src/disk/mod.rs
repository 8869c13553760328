//! The persistent disk tier: one [`DiskEngine`] per configured disk (a directory).
//!
//! # Layout
//!
//! ```text
//! PATH/meta            magic, the 128-bit key of the index hash (SipHash-1-3), CRC32C
//! PATH/checkpoint      the index at a moment (see Recovery), with its CRC32C
//! PATH/0000002a.seg    segment 42: records, then (once sealed) its summary and footer
//! ```
//!
//! Segments are written sequentially, oldest id first out (FIFO), each `segment_bytes`
//! (16 MiB) unless one record needs more (it then gets a segment of its own: no object size
//! limit below the disk's). One file per segment: reclaiming one is an `unlink`, and a read
//! in flight keeps its open file, so it never sees bytes of a later segment. Everything the
//! engine keeps in PATH (segments reserved at their full size while written, two
//! checkpoints while one replaces the other, the meta file) stays within `size_bytes`. The
//! space kept for checkpoints is the one on disk plus room for the next, which follows the
//! records' average size (17 bytes of index per record a full disk would hold, half again:
//! `DiskConfig::next_checkpoint_room`): 0.3 % of a disk of 15 KiB records, a fifth of one
//! of 200-byte records. A checkpoint that would not fit is skipped, not written past the
//! size; segments over the space at an open (a smaller size, a larger checkpoint) are
//! reclaimed at once.
//!
//! # Records (little-endian, 16-byte aligned)
//!
//! ```text
//! 0  magic "SPR1"   4  crc32c   8  seq u64   16 kind u8 (1 object, 2 tombstone) + 3 pad
//! 20 primary len   24 secondary len   28 meta len   32 head len   (u32 each)
//! 36 chunk size u32 (1 MiB)   40 body len u64
//! 48 primary key, secondary key, metadata (Persist), head, one crc32c per 1 MiB body chunk
//!    body (contiguous, so sendfile sends it from the segment: `tiered.rs`, "Large bodies"), zero padding
//! ```
//!
//! The record CRC (hardware CRC32C) covers everything before the body including the chunk
//! checksums; each body chunk is checked against its own, so a range verifies only the
//! chunks it reads. A sealed segment ends with a summary (per record: 64-bit key hash, seq,
//! offset, length, kind) and a 40-byte footer (magic, CRC of summary and footer, count,
//! summary offset, segment id).
//!
//! # Writing
//!
//! A writer thread per disk takes objects from a bounded queue (memory evictions that earned
//! a disk place, others while the disk has room it has not used (`Admission::Fill`), and at
//! a clean shutdown the earned objects still in memory, see `tiered.rs`), encodes them into a 1 MiB aggregation buffer, and writes
//! it with `pwrite` when full and at least every `flush_interval` (1 s). Records become
//! visible in the index only once written. Purges log a tombstone and are written at once.
//! When a new segment needs room the oldest is reclaimed: its records that were hit since
//! written (one bit in the index) are re-appended at the head with their own sequence
//! number (unless their key has a newer record), the rest leave the index. A daily write
//! budget (optional) skips demotions beyond it.
//!
//! # Index
//!
//! 16 bytes per object in RAM (`index.rs`): a 32-bit tag, segment, offset and length, a
//! hit bit and a verified bit (the body passed its checksums in this process); 64 shards of open-addressing tables at 57-85 % load. Measured with 1,000,000
//! objects: 23.9 B/object in the tables (25.2 B by RSS) while growing, 20.0 B after loading
//! a checkpoint (`bench_tests.rs`). The tag only narrows the search: every read checks the
//! full primary key stored in the record, so a collision is a miss, never another object.
//!
//! # Recovery
//!
//! [`DiskEngine::open`] returns at once; the writer thread loads the index while lookups
//! proceed (what is not loaded yet misses; purges meanwhile are remembered). It opens and
//! registers the segments written after the checkpoint's watermark and reads their
//! summaries (the last one, unsealed after a crash, is scanned record by record —
//! header, CRC and body checksums — up to the first record that fails, cut there and
//! sealed), publishes the checkpoint to lookups, opens and registers the segments before the
//! watermark (each only has its footer checked: one small read; a lookup meanwhile opens
//! the segment it reads for itself), then loads the checkpoint (written every `checkpoint_interval` /
//! `checkpoint_every_bytes` and at close) shard by shard: each of the 64 shards is stored as
//! its table sits in RAM (an occupancy bitmap and the entries in slot order, with its own
//! CRC32C), so loading one is a copy, and it serves lookups as soon as it is in; a lookup
//! whose shard is not in yet loads that shard itself (`ShardSource`, published before the
//! earlier segments are opened; 1/64 of the checkpoint, once), and a lookup in the
//! moment before that publication waits for it (at most 100 ms after the open), so a
//! restart serves disk hits from its first request. Entries of segments that are
//! gone, and entries a later tombstone purged, stay out. Last, the later summaries are
//! applied in order (inserts and tombstones). A damaged checkpoint shard makes the index
//! rebuilt from every summary; a sealed segment from before the watermark with a damaged
//! footer is deleted rather than re-indexed (re-indexing could bring back purged records);
//! damage inside its records is found when they are read (their CRCs). Measured with
//! 1,000,000 objects (`bench_tests.rs`, 200-byte bodies) on this 2-core VM: the whole index
//! in 24 ms after a clean shutdown (48 ms when every entry was re-inserted), and through the
//! binary the first disk hit ~10 ms after exec at a million objects in 240 segments (medians
//! 9.9-13.5 ms over two runs, with late first answers in some starts)
//! (`bench/disk.sh peers`, bench/RESULTS.md, "Issue 21, fourteenth stop").

//! # Crash guarantees
//!
//! After kill -9 (or a torn write anywhere), nothing corrupt, truncated or belonging to
//! another key is returned: a record failing its CRC or chunk checksums is a miss and is
//! dropped from the index; a record of another key is skipped. Lost on kill -9: the
//! aggregation buffer (at most `flush_interval` of demotions, 1 s); nothing already
//! written, since the page cache survives the process. On power loss: what was not yet
//! written back by the kernel; sealed segments and checkpoints are fsynced, the open
//! segment is not (its torn tail is cut by the scan). A purge survives kill -9 (its
//! tombstone is written at once). A purge removes every index entry sharing the key's
//! 32-bit tag in its shard (about one other key per 500,000 purges among 1M keys): a miss.
//!
//! # Faults
//!
//! Any write or read error (ENOSPC, EIO, a segment deleted or truncated under us, the
//! directory gone; a deleted segment is noticed by its link count at each flush) is logged,
//! counted, and marks the disk failed: its index is emptied, lookups miss, writes are
//! dropped, and (by the process holding the directory's lock) its `meta` file is removed,
//! so that the next open starts it empty (purges made after the fault never reached it;
//! see `Shared::fault`). Nothing panics, and no caller waits on disk I/O (the writer has
//! its own thread, reads complete on the event loop that drives the io_uring, or in
//! `ReadPool`).
//!
//! # Reads off the event loop
//!
//! A record in the page cache is read by the looking-up worker itself with
//! `preadv2(RWF_NOWAIT)` (rustix; measured 3.3 µs per 64 KiB cached read, `EAGAIN` when the
//! read would wait for the device): records up to 64 KiB whole, and for a larger body this
//! process verified before, only its prefix (the body then leaves by `sendfile`). A
//! `RWF_NOWAIT` read of uncached pages starts reading them in (readahead) before it fails,
//! so the worker asks `cachestat(2)` first (`sepia_sys::cachestat`, Linux 6.5; ~0.4 µs):
//! a lookup never submits a device read itself. Reads that would block, and the first read
//! of a large body (every chunk verified), go to the io_uring (`ring_read.rs`, driven by
//! the proxy's event loop, up to 1,024 reads or 64 MiB in flight, one submission per turn
//! of the loop; `cache.disk_io =
//! "io_uring"`, the default) or the read threads (`pool.rs`, 16 by default, bounded
//! queue), which also take the reads the ring does not make (records over a chunk, keys
//! with several records, a segment's first read past the page cache).
//! Measured on cold 4 KiB hits: 26–33 CPU-µs per hit with the ring against 40–42 with the
//! threads (bench/RESULTS.md, 2026-11-27).
//!
//! A record's first read off the event loop, for records above 64 KiB not verified yet,
//! goes past the page cache (`O_DIRECT`, `segment.rs` `read_uncached_at`, or the ring with
//! an aligned buffer): no page allocated, inserted and copied out for a record that is
//! either promoted into memory or, once verified, sent by `sendfile` from the page cache.
//! So does a verified record's first re-read after its pages left the page cache; a second
//! one goes through the page cache, for its later hits (`reread.rs`). Small records are
//! read through the page cache.
//!
mod config;
mod engine;
mod format;
mod hash;
mod index;
mod lock;
mod log;
mod pool;
mod record_read;
mod recover;
mod reread;
mod ring_read;
mod segment;
mod writer;

pub use config::{Admission, DiskConfig, DiskStats};
pub use engine::DiskEngine;
pub(crate) use engine::{Demoted, IsHome};
pub(crate) use format::CHUNK;
pub(crate) use index::Loc;
pub use lock::LockWait;
pub(crate) use pool::ReadPool;
pub(crate) use record_read::{DiskRecord, InFile};
pub(crate) use segment::resident;

/// Segment ids in `dir` (tests of the layers above).
#[cfg(test)]
pub(crate) fn segment_ids(dir: &std::path::Path) -> Vec<u32> {
    segment::list(dir).unwrap()
}

#[cfg(test)]
mod bench_tests;
#[cfg(test)]
mod kill_tests;
#[cfg(test)]
mod space_tests;
#[cfg(test)]
mod tests;
