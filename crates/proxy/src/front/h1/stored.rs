//! Writing stored objects in HTTP/1.1: a hit as the pipeline planned it (200, 206, 304, 412,
//! 416), or the head of an object still being filled.
//!
//! A full hit is one gather write: the pre-serialised stored head, a small per-hit block
//! (Content-Length, Age, Cache-Status, Connection) and the body chunks, all `Bytes` shared with
//! the store — nothing is copied or parsed. A large body kept in a sealed file goes out with
//! `sendfile(2)` after the head, so its bytes are not copied either.

use std::io;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use sepia_cache_policy::{write_content_range, Fields, RangeOutcome, NOT_MODIFIED_FIELDS};
use sepia_http1::{put_header, put_header_u64, put_status_line, reason_phrase, Version};
use sepia_store::{slice_chunks, Body, BodyFile, Object};

use super::client_io::ClientIo;
use super::relayed::end_with_persistence;
use crate::cache::Meta;
use crate::model::BodyLength;
use crate::pipeline::{HitPlan, StoredAnswer};
use crate::transport::io::{send_file_within, write_parts_within, MAX_SLICES};

/// How a stored answer goes out besides what the pipeline said.
pub(super) struct Wire<'a> {
    /// The connection stays open after it.
    pub keep: bool,
    pub version: Version,
    /// Sepia's Via value, for heads rebuilt with another status (206).
    pub via: Option<&'a [u8]>,
    /// Each write must progress within this.
    pub limit: Duration,
}

/// What follows the per-hit block of a stored answer.
pub(super) enum After {
    /// Nothing: the head is the whole answer (304, 412, 416, or a HEAD request's).
    Nothing,
    /// The stored head first, then bytes `start..end` of the body.
    Stored { start: u64, end: u64 },
    /// Bytes `start..end` of the body right after the head (a 206's, written whole).
    Body { start: u64, end: u64 },
}

/// Builds the head of a complete stored object's answer as `answer` plans it into `head` and
/// says what goes with it.
pub(super) fn plan_head(
    head: &mut BytesMut,
    obj: &Object<Meta>,
    answer: &StoredAnswer<'_>,
    wire: &Wire<'_>,
) -> After {
    let entry = obj.meta();
    let len = obj.body_len();
    head.clear();
    match answer.plan {
        // RFC 9110 §15.4.5: a 304 carries the fields a 200 would have that describe it.
        HitPlan::NotModified => {
            put_status_line(head, Version::Http11, 304, b"Not Modified");
            for (name, value) in entry.layout.fields(obj.head()).lines() {
                if NOT_MODIFIED_FIELDS
                    .iter()
                    .any(|f| name.eq_ignore_ascii_case(f.as_bytes()))
                {
                    put_header(head, name, value);
                }
            }
            per_hit(head, None, answer, wire);
            After::Nothing
        }
        HitPlan::PreconditionFailed => {
            put_status_line(head, Version::Http11, 412, reason_phrase(412));
            per_hit(head, Some(0), answer, wire);
            After::Nothing
        }
        HitPlan::Full if answer.head_only => {
            per_hit(head, Some(len), answer, wire);
            After::Stored { start: 0, end: 0 }
        }
        HitPlan::Full => {
            per_hit(head, Some(len), answer, wire);
            After::Stored { start: 0, end: len }
        }
        HitPlan::Partial { start, end } => {
            put_status_line(head, Version::Http11, 206, b"Partial Content");
            // The 206's own Content-Range follows; a stored one would contradict it.
            for (name, value) in entry.layout.fields(obj.head()).lines() {
                if !name.eq_ignore_ascii_case(b"content-range") {
                    put_header(head, name, value);
                }
            }
            if let Some(via) = wire.via {
                put_header(head, b"Via", via);
            }
            let range = RangeOutcome::Partial { start, end };
            put_content_range(head, range, answer.representation_len);
            per_hit(head, Some(end - start + 1), answer, wire);
            // Offsets in the representation, made offsets in the stored body (a piece's
            // starts at its first byte).
            let start = start - answer.body_offset;
            let end = if answer.head_only {
                start
            } else {
                end + 1 - answer.body_offset
            };
            After::Body { start, end }
        }
        HitPlan::Unsatisfiable => {
            // A minimal 416 (RFC 9110 §15.5.17), not the stored fields: their freshness would
            // let a downstream cache keep the error in place of the content.
            put_status_line(head, Version::Http11, 416, reason_phrase(416));
            put_content_range(head, RangeOutcome::Unsatisfiable, answer.representation_len);
            per_hit(head, Some(0), answer, wire);
            After::Nothing
        }
    }
}

/// Writes the head planned in `io.head_buf` and what goes with it: the stored head and body
/// slices in one gather write, or a body file with sendfile. Returns the bytes written.
pub(super) async fn write(
    io: &mut ClientIo,
    obj: &Object<Meta>,
    after: After,
    limit: Duration,
) -> io::Result<u64> {
    let (head, start, end): (&[u8], u64, u64) = match &after {
        After::Nothing => (&[], 0, 0),
        After::Stored { start, end } => (obj.head(), *start, *end),
        After::Body { start, end } => (&[], *start, *end),
    };
    let part;
    let body: &[Bytes] = match obj.body() {
        _ if start == end => &[],
        Body::Chunks(chunks) if start == 0 && end == obj.body_len() => chunks,
        Body::Chunks(chunks) => {
            part = slice_chunks(chunks, start, end);
            &part
        }
        Body::File(file) => return write_with_file(io, head, file, start, end, limit).await,
    };
    write_with_body(io, head, body, limit).await
}

/// Writes the head of an object still being filled, whose body follows framed as `chunked`
/// says. Returns the bytes written.
pub(super) async fn write_fill_head(
    io: &mut ClientIo,
    obj: &Object<Meta>,
    length: BodyLength,
    chunked: bool,
    answer: &StoredAnswer<'_>,
    wire: &Wire<'_>,
) -> io::Result<u64> {
    let head = &mut io.head_buf;
    head.clear();
    if chunked {
        put_header(head, b"Transfer-Encoding", b"chunked");
    }
    let known = match length {
        BodyLength::Known(n) => Some(n),
        BodyLength::None => Some(0),
        BodyLength::Unknown => None,
    };
    per_hit(head, known, answer, wire);
    write_with_body(io, obj.head(), &[], wire.limit).await
}

/// The per-hit block: framing, Age (RFC 9111 §5.1), Cache-Status (RFC 9211), Connection, and
/// the empty line that ends the head.
fn per_hit(out: &mut BytesMut, length: Option<u64>, answer: &StoredAnswer<'_>, wire: &Wire<'_>) {
    if let Some(n) = length {
        put_header_u64(out, b"Content-Length", n);
    }
    put_header_u64(out, b"Age", answer.age);
    if !answer.cache_status.is_empty() {
        put_header(out, b"Cache-Status", answer.cache_status);
    }
    end_with_persistence(out, wire.keep, wire.version);
}

fn put_content_range(out: &mut BytesMut, range: RangeOutcome, len: u64) {
    let mut value = Vec::with_capacity(48);
    write_content_range(range, len, &mut value);
    put_header(out, b"Content-Range", &value);
}

/// Writes `head`, the per-hit block in `io.head_buf`, then the body, in as few gather writes
/// as the slice limit allows. Returns the bytes written.
async fn write_with_body(
    io: &mut ClientIo,
    head: &[u8],
    body: &[Bytes],
    limit: Duration,
) -> io::Result<u64> {
    let mut total = (head.len() + io.head_buf.len()) as u64;
    let first = body.len().min(MAX_SLICES - 2);
    let mut parts: [&[u8]; MAX_SLICES] = [&[]; MAX_SLICES];
    parts[0] = head;
    parts[1] = &io.head_buf;
    for (slot, chunk) in parts[2..].iter_mut().zip(&body[..first]) {
        *slot = chunk;
    }
    write_parts_within(&mut io.conn, &parts[..2 + first], limit).await?;
    for batch in body[first..].chunks(MAX_SLICES) {
        let mut parts: [&[u8]; MAX_SLICES] = [&[]; MAX_SLICES];
        for (slot, chunk) in parts.iter_mut().zip(batch) {
            *slot = chunk;
        }
        write_parts_within(&mut io.conn, &parts[..batch.len()], limit).await?;
    }
    total += body.iter().map(|c| c.len() as u64).sum::<u64>();
    Ok(total)
}

/// How much of a body file a connection that cannot take the file itself (TLS) reads back
/// per write: memory per such response stays bounded whatever the body's size.
const FILE_PIECE: u64 = 256 * 1024;

/// Bytes `start..end` of a body that lies at `file.offset()` in its file (a disk-cache
/// segment, see sepia_store's `BodyFile::in_segment`), with `sendfile(2)`: what
/// `send_file_within` does for a file holding only the body. Fails with `TimedOut` when the
/// peer stops reading for `limit` between two progresses.
async fn send_range_within(
    stream: &tokio::net::TcpStream,
    file: &BodyFile,
    start: u64,
    end: u64,
    limit: Duration,
) -> io::Result<()> {
    debug_assert!(start <= end && end <= file.len());
    let base = file.offset();
    let mut offset = i64::try_from(base + start).map_err(io::Error::other)?;
    let end = i64::try_from(base + end).map_err(io::Error::other)?;
    while offset < end {
        let count = (end - offset).min(1 << 30) as usize;
        let sent = stream.async_io(tokio::io::Interest::WRITABLE, || {
            nix::sys::sendfile::sendfile64(stream, file, Some(&mut offset), count)
                .map_err(io::Error::from)
        });
        match crate::transport::io::within(limit, sent).await {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes `head` and the per-hit block in `io.head_buf` in one gather write, then bytes
/// `start..end` of a body file: with sendfile on plain TCP (no copy of the body), else read
/// back a piece at a time, the first piece in the head's write. Returns the bytes written.
async fn write_with_file(
    io: &mut ClientIo,
    head: &[u8],
    file: &BodyFile,
    start: u64,
    end: u64,
    limit: Duration,
) -> io::Result<u64> {
    let written = (head.len() + io.head_buf.len()) as u64 + (end - start);
    if io.conn.tcp().is_some() {
        write_parts_within(&mut io.conn, &[head, &io.head_buf], limit).await?;
        if let Some(tcp) = io.conn.tcp() {
            if file.offset() == 0 {
                send_file_within(tcp, file, start, end, limit).await?;
            } else {
                send_range_within(tcp, file, start, end, limit).await?;
            }
        }
        return Ok(written);
    }
    let first_end = end.min(start + FILE_PIECE);
    let first = file.read_range(start, first_end)?;
    write_parts_within(&mut io.conn, &[head, &io.head_buf, &first], limit).await?;
    let mut at = first_end;
    while at < end {
        let next = end.min(at + FILE_PIECE);
        let piece = file.read_range(at, next)?;
        write_parts_within(&mut io.conn, &[&piece], limit).await?;
        at = next;
    }
    Ok(written)
}
