//! Segment files: naming, listing, reading summaries, scanning records, sealing.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::format::{
    decode_summary, encode_summary, parse_footer, split_prefix, verify_chunks, verify_prefix,
    Header, SummaryEntry, FOOTER_LEN, HEADER_LEN, KIND_OBJECT, SUMMARY_ENTRY,
};
use super::hash::siphash13;

/// An open segment file. Reads go through `file` with `pread`, so a reader holding the
/// `Arc` keeps reading the bytes it located even after the file is reclaimed (unlinked).
/// The file is shared with the segment-backed bodies sent from it (`BodyFile::in_segment`).
#[derive(Debug)]
pub(crate) struct SegFile {
    pub(crate) id: u32,
    pub(crate) file: std::sync::Arc<File>,
    /// The same file opened with `O_DIRECT` at its first uncached read (see
    /// [`read_uncached_at`]; a descriptor more only for segments read cold); `None` where
    /// the file system refuses it (tmpfs) or the file is gone (reclaimed).
    direct: std::sync::OnceLock<Option<std::sync::Arc<File>>>,
    path: PathBuf,
}

impl SegFile {
    /// The `O_DIRECT` descriptor if an earlier [`SegFile::direct`] tried to open it (`None`:
    /// not tried yet; `Some(None)`: refused).
    pub(crate) fn direct_if_opened(&self) -> Option<Option<&std::sync::Arc<File>>> {
        self.direct.get().map(Option::as_ref)
    }

    /// The `O_DIRECT` descriptor, opened at the first call (see the field).
    pub(crate) fn direct(&self) -> Option<&std::sync::Arc<File>> {
        if let Some(direct) = self.direct.get() {
            return direct.as_ref();
        }
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::DIRECT | OFlags::CLOEXEC;
        let direct = match rustix::fs::open(&self.path, flags, Mode::empty()) {
            // The path names this segment's file unless it was reclaimed: then it may be
            // gone, or (a disk emptied and refilled) another file of the same name.
            Ok(fd) => {
                let file = File::from(fd);
                let same = match (rustix::fs::fstat(&file), rustix::fs::fstat(&*self.file)) {
                    (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
                    _ => false,
                };
                same.then(|| std::sync::Arc::new(file))
            }
            // The file system refuses O_DIRECT (tmpfs), or the file is gone: for good.
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOENT) => None,
            // Out of descriptors or memory: read through the page cache this time.
            Err(_) => return None,
        };
        self.direct.get_or_init(|| direct).as_ref()
    }
}

pub(crate) fn seg_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:08x}.seg"))
}

/// Segment ids found in `dir`, ascending.
pub(crate) fn list(dir: &Path) -> io::Result<Vec<u32>> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".seg")) else {
            continue;
        };
        if let Ok(id) = u32::from_str_radix(stem, 16) {
            if stem.len() == 8 {
                ids.push(id);
            }
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

pub(crate) fn open(dir: &Path, id: u32, create: bool) -> io::Result<SegFile> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(create)
        .open(seg_path(dir, id))?;
    // Records are read at random: no readahead. On a cold page cache, readahead around
    // every 64 KiB record read pages nobody asked for (a sixth of a read thread's time,
    // bench/RESULTS.md 2026-11-27); a read of N bytes still reads them in one request.
    // Only advice: a kernel that refuses it reads as before.
    let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::Random);
    Ok(SegFile {
        id,
        file: std::sync::Arc::new(file),
        direct: std::sync::OnceLock::new(),
        path: seg_path(dir, id),
    })
}

/// `O_DIRECT` wants the file offset, the length and the buffer aligned to the device's
/// logical block; a page satisfies every device Linux supports.
pub(crate) const DIRECT_ALIGN: usize = 4096;

/// Reads exactly `len` bytes at `at` from the device past the page cache (`O_DIRECT`),
/// for a record's first read (and a first re-read after its pages left the page cache, see
/// `reread.rs`): as [`read_new_at`] where the file system refuses it. A cold
/// read through the page cache allocated, charged and inserted a page for every 4 KiB, then
/// copied them out (~20 % of a cold 64 KiB hit's CPU, bench/RESULTS.md 2026-11-27), for
/// pages that most records, read once, never use again: memory holds the small ones it
/// promotes, and a large body read a third time goes through the page cache, which
/// `sendfile` serves its later hits from. No residency check before a first read: such a
/// record is rarely cached (and a `RWF_NOWAIT` check would start reading the pages it asks
/// about); a re-read asks `cachestat`. Cached or
/// dirty pages are still read correctly (the kernel writes dirty ones back first), only not
/// from memory.
pub(crate) fn read_uncached_at(seg: &SegFile, len: usize, at: u64) -> io::Result<bytes::BytesMut> {
    if let Some(direct) = seg.direct() {
        if let Some(b) = read_direct(direct, len, at)? {
            return Ok(b);
        }
    }
    read_new_at(&seg.file, len, at)
}

/// The `O_DIRECT` read of [`read_uncached_at`]: the aligned blocks around the range, one
/// `pread`, the range sliced out without a copy. `None` when the file system refused the
/// read (`EINVAL`) or it came short (the caller then reads through the page cache, which
/// reports a short file properly).
fn read_direct(direct: &File, len: usize, at: u64) -> io::Result<Option<bytes::BytesMut>> {
    use rustix::io::{pread, Errno};
    let (start, skip, span) = direct_span(at, len);
    let (mut v, base) = direct_buffer(span);
    let read = if v.len() == base {
        // The aligned spare capacity is exactly the span: the read fills it, unzeroed.
        pread(direct, rustix::buffer::spare_capacity(&mut v), start)
    } else {
        pread(direct, &mut v[base..base + span], start)
    };
    match read {
        Ok(n) if n >= skip + len => {}
        Ok(_) | Err(Errno::INVAL | Errno::INTR) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let mut blocks = bytes::BytesMut::from(bytes::Bytes::from(v));
    let _ = blocks.split_to(base);
    Ok(Some(range_of_blocks(blocks, skip, len)))
}

/// The whole blocks an `O_DIRECT` read of `len` bytes at `at` reads: where they start,
/// where the range starts in them (`skip`), and how many bytes they span.
pub(crate) fn direct_span(at: u64, len: usize) -> (u64, usize, usize) {
    let start = at - at % DIRECT_ALIGN as u64;
    let skip = (at - start) as usize;
    (start, skip, (skip + len).next_multiple_of(DIRECT_ALIGN))
}

/// Whether a buffer of `held` bytes read around a `len`-byte range is kept as the range's
/// storage, rather than the range copied out of it: only when the rest adds little (a
/// small record would hold three pages for a few hundred bytes).
pub(crate) fn keep_blocks(held: usize, len: usize) -> bool {
    held - len <= len / 4
}

/// The `len` bytes `skip` bytes into `blocks`, as a direct read returned them: in place,
/// or copied out (`keep_blocks`).
pub(crate) fn range_of_blocks(
    mut blocks: bytes::BytesMut,
    skip: usize,
    len: usize,
) -> bytes::BytesMut {
    if !keep_blocks(blocks.capacity(), len) {
        return bytes::BytesMut::from(&blocks[skip..skip + len]);
    }
    let _ = blocks.split_to(skip);
    blocks.truncate(len);
    blocks
}

/// A buffer for a direct read of `span` bytes, and where in it the read goes (`base`,
/// aligned). Preferably its length is `base` and its spare capacity exactly `span`, so the
/// read need not zero it first (the memset was ~10 % of a read thread's samples on cold
/// 64 KiB hits, bench/RESULTS.md 2026-11-27); the allocator places a buffer where it likes
/// (jemalloc offsets large ones by cache lines), and the exact spare capacity comes from
/// shrinking the padded buffer, which the allocator may do in place or not. Otherwise, a
/// zeroed buffer with a block to spare (length past `base + span`).
fn direct_buffer(span: usize) -> (Vec<u8>, usize) {
    let mut v: Vec<u8> = Vec::with_capacity(span + DIRECT_ALIGN);
    let base = v.as_ptr().align_offset(DIRECT_ALIGN);
    v.resize(base, 0);
    v.shrink_to(base + span);
    if v.capacity() == base + span && v.as_ptr().wrapping_add(base).align_offset(DIRECT_ALIGN) == 0
    {
        return (v, base);
    }
    // Not `vec![0; n]`: that is calloc (see `read_new_at`).
    #[allow(clippy::slow_vector_initialization)]
    let v = {
        let mut v: Vec<u8> = Vec::with_capacity(span + DIRECT_ALIGN);
        v.resize(span + DIRECT_ALIGN, 0);
        v
    };
    let base = v.as_ptr().align_offset(DIRECT_ALIGN);
    (v, base)
}

/// Reads exactly `buf.len()` bytes at `at`, or fails (short file = `UnexpectedEof`).
pub(crate) fn read_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<()> {
    file.read_exact_at(buf, at)
}

/// Reads exactly `len` bytes at `at` into a new buffer that is never zero-filled first
/// (the read writes every byte). A zeroed buffer of a large record came from `calloc`,
/// which jemalloc zeroes by `madvise(MADV_DONTNEED)` on recycled memory: the read then
/// faulted every page in again, a third of a read thread's time on cold 64 KiB hits
/// (bench/RESULTS.md, 2026-11-27).
pub(crate) fn read_new_at(file: &File, len: usize, at: u64) -> io::Result<bytes::BytesMut> {
    let mut v: Vec<u8> = Vec::with_capacity(len);
    while v.len() < len {
        // Reads into (and extends `v` over) its spare capacity, at most `len - v.len()`.
        let done = v.len() as u64;
        match rustix::io::pread(file, rustix::buffer::spare_capacity(&mut v), at + done) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(bytes::BytesMut::from(bytes::Bytes::from(v)))
}

/// [`read_at`] only if the bytes are in the page cache (`preadv2` with `RWF_NOWAIT`, Linux
/// 4.14): `Ok(false)` when reading them would wait for the device, so that a worker thread can
/// read a cached record itself and leave the ones that would block to the read threads.
/// Asked first with `cachestat(2)` where the kernel has it (6.5): a `RWF_NOWAIT` read that
/// misses starts reading the pages before it fails, so the worker would submit the device
/// request itself, one per lookup (see `sepia_sys::cachestat`).
pub(crate) fn read_cached_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<bool> {
    use rustix::io::{preadv2, ReadWriteFlags};
    if let Ok(false) = sepia_sys::cachestat::all_cached(file, at, buf.len() as u64) {
        return Ok(false);
    }
    let mut done = 0;
    while done < buf.len() {
        let mut parts = [io::IoSliceMut::new(&mut buf[done..])];
        match preadv2(file, &mut parts, at + done as u64, ReadWriteFlags::NOWAIT) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => done += n,
            Err(rustix::io::Errno::AGAIN) => return Ok(false),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}

/// Where a sealed segment's summary starts, from its footer alone (one small read), or
/// `None` if the footer is missing or does not fit the file's size (a truncated file).
pub(crate) fn summary_at(seg: &SegFile, size: u64) -> io::Result<Option<u64>> {
    if size < FOOTER_LEN as u64 {
        return Ok(None);
    }
    let mut footer = [0u8; FOOTER_LEN];
    read_at(&seg.file, &mut footer, size - FOOTER_LEN as u64)?;
    let Some((count, summary_at)) = parse_footer(&footer, seg.id) else {
        return Ok(None);
    };
    let len = count
        .checked_mul(SUMMARY_ENTRY as u64)
        .map(|n| n + FOOTER_LEN as u64);
    if len.is_none_or(|len| summary_at.checked_add(len) != Some(size)) {
        return Ok(None);
    }
    Ok(Some(summary_at))
}

/// Whether the `len` bytes at `at` are all in the page cache, so that a `sendfile` of them
/// will not wait for the device on a worker thread: `cachestat(2)` counts their pages
/// (Linux 6.5), then one byte of every 256 KiB and the last byte are read with
/// `RWF_NOWAIT`, which fails for a page still being read in (reads fill the cache in whole
/// runs, so the pages between probes are there too). Without `cachestat`, the probes alone
/// (then a page evicted alone makes the send wait for it, and a probe that misses starts
/// reading its page).
pub(crate) fn resident(file: &File, at: u64, len: u64) -> bool {
    const STEP: u64 = 256 << 10;
    if len == 0 {
        return true;
    }
    // `cachestat` counts pages that are present, also those still being read in, for
    // which a `sendfile` would wait: it answers a miss without side effects, and the
    // probes below (of present pages: they read nothing in) answer the rest.
    if let Ok(false) = sepia_sys::cachestat::all_cached(file, at, len) {
        return false;
    }
    let probes = (0..len)
        .step_by(STEP as usize)
        .chain(std::iter::once(len - 1));
    let mut byte = [0u8; 1];
    for off in probes {
        if !matches!(read_cached_at(file, &mut byte, at + off), Ok(true)) {
            return false;
        }
    }
    true
}

/// The summary of a sealed segment, or `None` if it has no valid footer and summary.
pub(crate) fn read_summary(seg: &SegFile) -> io::Result<Option<(Vec<SummaryEntry>, u64)>> {
    let size = seg.file.metadata()?.len();
    let Some(summary_at) = summary_at(seg, size)? else {
        return Ok(None);
    };
    let mut b = vec![0u8; (size - summary_at) as usize];
    read_at(&seg.file, &mut b, summary_at)?;
    Ok(decode_summary(&b).map(|e| (e, summary_at)))
}

/// Scans records from `from` until the first one that is torn or fails its checksums;
/// returns the valid records and where they end. Reads the data (the records' bodies are
/// verified too): used only for the one segment that was being written, or a damaged one.
pub(crate) fn scan(
    seg: &SegFile,
    key: (u64, u64),
    from: u64,
) -> io::Result<(Vec<SummaryEntry>, u64)> {
    let size = seg.file.metadata()?.len();
    let mut entries = Vec::new();
    let mut at = from;
    let mut header = [0u8; HEADER_LEN];
    while at + HEADER_LEN as u64 <= size {
        read_at(&seg.file, &mut header, at)?;
        let Some(h) = Header::parse(&header) else {
            break;
        };
        let len = h.record_len();
        if at.checked_add(len).is_none_or(|end| end > size) {
            break;
        }
        let mut rec = vec![0u8; len as usize];
        read_at(&seg.file, &mut rec, at)?;
        if !record_ok(&h, &rec) {
            break;
        }
        let primary = split_prefix(&h, &rec).primary;
        entries.push(SummaryEntry {
            hash: siphash13(key, primary),
            seq: h.seq,
            offset: at,
            len,
            kind: h.kind,
        });
        at += len;
    }
    Ok((entries, at))
}

fn record_ok(h: &Header, rec: &[u8]) -> bool {
    let Some(v) = verify_prefix(rec) else {
        return false;
    };
    if v != *h {
        return false;
    }
    if h.kind != KIND_OBJECT {
        return true;
    }
    let p = split_prefix(h, rec);
    let start = h.prefix_len() as usize;
    verify_chunks(p.chunk_crcs, 0, &rec[start..start + h.body_len as usize])
}

/// Writes the summary and footer after the records ending at `end`, cutting off anything
/// beyond (a torn tail), and syncs: the segment is sealed. Returns the file's new size.
pub(crate) fn seal(seg: &SegFile, end: u64, entries: &[SummaryEntry]) -> io::Result<u64> {
    let summary = encode_summary(seg.id, end, entries);
    seg.file.set_len(end)?;
    seg.file.write_all_at(&summary, end)?;
    seg.file.sync_data()?;
    Ok(end + summary.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn read_new_at_reads_exactly_the_range_and_refuses_a_short_file() {
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        let b = read_new_at(&f, 70_000, 12_345).unwrap();
        assert_eq!(&b[..], &data[12_345..82_345]);
        assert_eq!(read_new_at(&f, 0, 5).unwrap().len(), 0);
        let short = read_new_at(&f, 1_000, 199_500).unwrap_err();
        assert_eq!(short.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn an_uncached_read_returns_exactly_the_range_at_any_alignment() {
        // /var/tmp is a disk file system where there is one; tmpfs refuses O_DIRECT, and
        // the read then goes through the page cache: the same bytes either way.
        let dir = tempfile::tempdir_in("/var/tmp")
            .or_else(|_| tempfile::tempdir())
            .unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(seg_path(dir.path(), 7), &data).unwrap();
        let seg = open(dir.path(), 7, false).unwrap();
        let direct = seg.direct().is_some();
        for (at, len) in [
            (0, 4096),
            (12_345, 70_000),
            (4096, 65_536),
            (299_000, 1_000),
            (5, 3),
        ] {
            let b = read_uncached_at(&seg, len, at as u64).unwrap();
            assert_eq!(&b[..], &data[at..at + len], "{len} bytes at {at}");
            if let Some(f) = seg.direct() {
                let d = read_direct(f, len, at as u64)
                    .unwrap()
                    .expect("a direct read");
                assert_eq!(&d[..], &data[at..at + len], "direct: {len} bytes at {at}");
            }
        }
        let short = read_uncached_at(&seg, 2_000, 299_500).unwrap_err();
        assert_eq!(
            short.kind(),
            io::ErrorKind::UnexpectedEof,
            "direct: {direct}"
        );
    }

    #[test]
    fn an_uncached_read_of_a_replaced_file_reads_the_segments_own_bytes() {
        let dir = tempfile::tempdir_in("/var/tmp")
            .or_else(|_| tempfile::tempdir())
            .unwrap();
        std::fs::write(seg_path(dir.path(), 3), vec![b'a'; 100_000]).unwrap();
        let seg = open(dir.path(), 3, false).unwrap();
        // Reclaimed, and another file under its name: never read in its place.
        std::fs::remove_file(seg_path(dir.path(), 3)).unwrap();
        std::fs::write(seg_path(dir.path(), 3), vec![b'b'; 100_000]).unwrap();
        let b = read_uncached_at(&seg, 70_000, 1_000).unwrap();
        assert!(b.iter().all(|&c| c == b'a'));
        assert!(seg.direct().is_none());
    }
}
