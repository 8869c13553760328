//! Reading a record: which read a lookup makes (`read_record`), how its bytes become a
//! verified [`DiskRecord`] (`decode_record`, shared with the io_uring's reads), a large body
//! chunk by chunk, and how a failed read is told apart (a bad record, a miss for now, a
//! failing disk).

use std::io;

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::format::{
    split_prefix, verify_chunks, verify_prefix, Header, CHUNK, HEADER_LEN, KIND_OBJECT,
};
use super::index::Loc;
use super::segment::{read_cached_at, read_new_at, read_uncached_at, SegFile};

pub(crate) enum ReadError {
    Corrupt,
    /// The record's segment is not open yet (the index is loading): a miss, nothing wrong.
    NotOpen,
    /// Reading the record would wait for the device (or it is too large to read inline).
    WouldBlock,
    Io(io::Error),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        // A record that the index places beyond the end of its file: the file was truncated
        // under us. That is a fault of the disk, not one bad record.
        ReadError::Io(e)
    }
}

/// A verified record read back from disk.
#[derive(Debug, Clone)]
pub(crate) struct DiskRecord {
    pub(crate) seq: u64,
    /// The key, a slice of the record as read (a promotion keeps it without a copy).
    pub(crate) primary: Bytes,
    pub(crate) secondary: Bytes,
    pub(crate) meta: Bytes,
    pub(crate) head: Bytes,
    /// The body, read and verified; empty when it was left in the file (`in_file`).
    pub(crate) body: Vec<Bytes>,
    pub(crate) body_len: u64,
    /// Where the body lies in its segment, for bodies of at least `read_all`'s
    /// `segment_from` bytes: to be served from the segment file.
    pub(crate) in_file: Option<InFile>,
    pub(crate) hash: u64,
    pub(crate) seg: u32,
    pub(crate) offset: u64,
}

/// A record's body in its segment file.
#[derive(Debug, Clone)]
pub(crate) struct InFile {
    pub(crate) file: Arc<std::fs::File>,
    /// File offset of the body's first byte.
    pub(crate) at: u64,
    /// One CRC32C per `CHUNK` of the body.
    pub(crate) crcs: Vec<u8>,
    /// The body was read and verified already (it was within the first read).
    pub(crate) verified: bool,
}

impl InFile {
    /// Reads and verifies chunk `index` of a body of `len` bytes.
    pub(crate) fn chunk(&self, index: u64, len: u64) -> Result<Bytes, ReadError> {
        let from = index * CHUNK;
        let n = (len - from).min(CHUNK);
        let b = read_new_at(&self.file, n as usize, self.at + from)?;
        if !verify_chunks(&self.crcs, index, &b) {
            return Err(ReadError::Corrupt);
        }
        Ok(b.freeze())
    }
}

/// Records read on a worker thread when cached (see `DiskEngine::read_all_cached`): one
/// read of this size from the page cache costs about what a hand-off to a read thread does.
pub(crate) const CACHED_READ_MAX: u64 = 64 * 1024;

/// A record's prefix from the page cache (`None`: it would wait for the device): one read
/// of a page, which holds the prefix of nearly every record, and a second for a longer one.
pub(super) fn read_prefix_cached(seg: &SegFile, loc: &Loc) -> Result<Option<BytesMut>, ReadError> {
    const GUESS: u64 = 4096;
    let first = if loc.len == 0 {
        GUESS
    } else {
        loc.len.min(GUESS)
    };
    let mut b = BytesMut::zeroed(first as usize);
    if !read_cached_at(&seg.file, &mut b, loc.offset)? {
        return Ok(None);
    }
    let h = Header::parse(&b).ok_or(ReadError::Corrupt)?;
    let len = usize::try_from(h.prefix_len()).map_err(|_| ReadError::Corrupt)?;
    if len > b.len() {
        b = BytesMut::zeroed(len);
        if !read_cached_at(&seg.file, &mut b, loc.offset)? {
            return Ok(None);
        }
    }
    b.truncate(len);
    Ok(Some(b))
}

/// Reads a large body chunk by chunk, verifying each.
pub(super) fn read_body(
    seg: &SegFile,
    at: u64,
    len: u64,
    crcs: &[u8],
) -> Result<Vec<Bytes>, ReadError> {
    let mut out = Vec::with_capacity(len.div_ceil(CHUNK) as usize);
    let mut done = 0;
    while done < len {
        let n = (len - done).min(CHUNK);
        let b = read_new_at(&seg.file, n as usize, at + done)?;
        if !verify_chunks(crcs, done / CHUNK, &b) {
            return Err(ReadError::Corrupt);
        }
        out.push(b.freeze());
        done += n;
    }
    Ok(out)
}

/// Reads at least this long have their key, metadata and head copied out (see
/// `decode_record`).
const COPY_FIXED_FROM: usize = 32 << 10;

/// Decodes and verifies the record at `loc` from `prefix`, its bytes as [`read_record`]
/// read them (the whole record, or its prefix: then a body below `segment_from` is read
/// here, chunk by chunk). `Ok(None)`: a valid record of another key (a tag collision).
pub(super) fn decode_record(
    seg: &SegFile,
    loc: &Loc,
    prefix: Bytes,
    primary: &[u8],
    hash: u64,
    segment_from: u64,
    prefix_only: bool,
) -> Result<Option<DiskRecord>, ReadError> {
    let h = verify_prefix(&prefix).ok_or(ReadError::Corrupt)?;
    if h.kind != KIND_OBJECT || (loc.len > 0 && h.record_len() != loc.len) {
        return Err(ReadError::Corrupt);
    }
    let p = split_prefix(&h, &prefix);
    if p.primary != primary {
        return Ok(None);
    }
    let lens = [
        p.primary.len(),
        p.secondary.len(),
        p.meta.len(),
        p.head.len(),
    ];
    let prefix_len = h.prefix_len() as usize;
    let body_at = loc.offset + prefix_len as u64;
    // A body to be sent from the segment by a worker must be in the page cache: a
    // `sendfile` of evicted pages would stall the event loop on the device.
    if prefix_only && !super::segment::resident(&seg.file, body_at, h.body_len) {
        return Err(ReadError::WouldBlock);
    }
    // The body within the first read (every small record): verified where it lies.
    let body_len = h.body_len as usize;
    let whole = prefix.len() >= prefix_len + body_len;
    if whole && !verify_chunks(p.chunk_crcs, 0, &prefix[prefix_len..prefix_len + body_len]) {
        return Err(ReadError::Corrupt);
    }
    let in_file = (h.body_len >= segment_from || prefix_only).then(|| InFile {
        file: Arc::clone(&seg.file),
        at: body_at,
        crcs: p.chunk_crcs.to_vec(),
        verified: prefix_only || whole,
    });
    let body = if whole {
        vec![prefix.slice(prefix_len..prefix_len + body_len)]
    } else if in_file.is_some() {
        Vec::new()
    } else {
        read_body(seg, body_at, h.body_len, p.chunk_crcs)?
    };
    // Key, metadata and head are copied out of the read's buffer (a few hundred bytes, one
    // allocation): what outlives the response, such as the Content-Type an access log
    // record holds until its batch is written, must not keep the whole buffer alive. With
    // the head a slice of it, 64 KiB cold hits kept ~60 % of their 80 KiB read buffers
    // out of the ring's pool, and hundreds of MB resident (bench/RESULTS.md, 2026-11-27).
    // Small records (a buffer of a page or two) keep their slices: no copy on the 4 KiB
    // hit path.
    let fixed_len: usize = lens.iter().sum();
    let fixed_range = HEADER_LEN..HEADER_LEN + fixed_len;
    let mut fixed = match prefix.len() >= COPY_FIXED_FROM {
        true => Bytes::copy_from_slice(&prefix[fixed_range]),
        false => prefix.slice(fixed_range),
    };
    Ok(Some(DiskRecord {
        seq: h.seq,
        primary: fixed.split_to(lens[0]),
        secondary: fixed.split_to(lens[1]),
        meta: fixed.split_to(lens[2]),
        head: fixed.split_to(lens[3]),
        body,
        body_len: h.body_len,
        in_file,
        hash,
        seg: loc.seg,
        offset: loc.offset,
    }))
}

/// The bytes of the record at `loc` that [`decode_record`] decodes: the whole record
/// up to 4 chunks, else its prefix (the body follows), read as the lookup may; past the
/// page cache with `past_cache` (`Rereads::read_past_cache`).
pub(super) fn read_record(
    seg: &SegFile,
    loc: &Loc,
    prefix_only: bool,
    cached_only: bool,
    past_cache: bool,
) -> Result<BytesMut, ReadError> {
    let whole = loc.len > 0 && loc.len <= 4 * CHUNK;
    let len = loc.len as usize;
    if prefix_only {
        return read_prefix_cached(seg, loc)?.ok_or(ReadError::WouldBlock);
    }
    if !whole {
        let b = read_new_at(&seg.file, HEADER_LEN, loc.offset)?;
        let h = Header::parse(&b).ok_or(ReadError::Corrupt)?;
        return Ok(read_new_at(&seg.file, h.prefix_len() as usize, loc.offset)?);
    }
    if cached_only {
        // `preadv2` wants initialised memory: malloc and memset, not calloc (see
        // `read_new_at`).
        let mut b = BytesMut::with_capacity(len);
        b.resize(len, 0);
        if !read_cached_at(&seg.file, &mut b, loc.offset)? {
            return Err(ReadError::WouldBlock);
        }
        return Ok(b);
    }
    if past_cache {
        return Ok(read_uncached_at(seg, len, loc.offset)?);
    }
    // A small record (kept in the page cache: a kernel without `cachestat` has the worker's
    // `RWF_NOWAIT` attempt reading it in already, and a small record's blocks hold its
    // neighbours' too), a cached one, or a hot one (see `reread.rs`).
    Ok(read_new_at(&seg.file, len, loc.offset)?)
}
