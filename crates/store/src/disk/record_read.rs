//! Reading a record's parts: its prefix from the page cache, a large body chunk by chunk,
//! and how a failed read is told apart (a bad record, a miss for now, a failing disk).

use std::io;

use bytes::{Bytes, BytesMut};

use super::format::{verify_chunks, Header, CHUNK};
use super::index::Loc;
use super::segment::{read_cached_at, read_new_at, SegFile};

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
