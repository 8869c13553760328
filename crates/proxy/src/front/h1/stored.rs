//! Answering from the cache: a complete stored object (a hit, including 304 to a client's
//! conditional, 206/416 for a Range) or an object still being filled (a collapsed request).
//!
//! A full hit is one gather write: the pre-serialised stored head, a small per-hit block
//! (Content-Length, Age, Cache-Status, Connection) and the body chunks, all `Bytes` shared with
//! the store — nothing is copied or parsed. A large body kept in a sealed file goes out with
//! `sendfile(2)` after the head, so its bytes are not copied either.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use sepia_cache_policy::{
    evaluate_conditionals, range_for_stored, write_content_range, CacheStatus, ConditionalOutcome,
    Fields, RangeOutcome, NOT_MODIFIED_FIELDS,
};
use sepia_http1::{
    end_head, put_header, put_header_u64, put_status_line, reason_phrase, ChunkSizeLine,
    RequestHead, Version, CRLF, LAST_CHUNK,
};
use sepia_observe::ResultCode;
use sepia_store::{Body, BodyFile, BodyLength, FillError, FillHead, FillReader, Object};

use super::flow::CACHE_NAME;
use super::{HeadFields, Meta};
use crate::client::ClientSide;
use crate::exchange::Outcome;
use crate::io::{send_file_within, write_parts_within, MAX_SLICES};
use crate::shared::Shared;

/// Serves a complete stored object. `cache_status` is the Cache-Status value (RFC 9211).
pub async fn serve_object(
    shared: &Shared,
    cs: &mut ClientSide,
    req: &RequestHead,
    obj: &Arc<Object<Meta>>,
    now: u64,
    result: ResultCode,
    cache_status: CacheStatus<'_>,
) -> Outcome {
    // First, so that what follows (a shutdown, for one) is read after the wait.
    crate::burst::let_the_pass_finish().await;
    // Written into a buffer the connection keeps, so a hit allocates nothing for it.
    let mut status_buf = std::mem::take(&mut cs.status_buf);
    status_buf.clear();
    cache_status.write(CACHE_NAME, &mut status_buf);
    let cache_status: &[u8] = &status_buf;
    let entry = obj.meta();
    let keep = req.keep_alive && !cs.shutting_down();
    let age = entry.meta.age_field_value(now);
    let fields = HeadFields(req.headers());
    let mut outcome = Outcome {
        status: entry.meta.status,
        bytes_sent: 0,
        keep_client: keep,
        result,
        peer: None,
        content_type: shared.for_log(|| entry.content_type.clone()),
        local: None,
        body_complete: false,
    };
    let len = obj.body_len();
    let head_only = req.method == sepia_http1::Method::Head;
    cs.head_buf.clear();
    let written = match evaluate_conditionals(req.method_raw(), &fields, &entry.meta) {
        // RFC 9110 §15.4.5: a 304 carries the fields a 200 would have that describe it.
        ConditionalOutcome::NotModified => {
            outcome.status = 304;
            put_status_line(&mut cs.head_buf, Version::Http11, 304, b"Not Modified");
            for (name, value) in entry.layout.fields(obj.head()).lines() {
                if NOT_MODIFIED_FIELDS
                    .iter()
                    .any(|f| name.eq_ignore_ascii_case(f.as_bytes()))
                {
                    put_header(&mut cs.head_buf, name, value);
                }
            }
            per_hit(&mut cs.head_buf, None, age, cache_status, keep, req.version);
            write_parts_within(
                &mut cs.stream,
                &[&cs.head_buf],
                shared.config.timeouts.client_idle,
            )
            .await
            .map(|()| cs.head_buf.len() as u64)
        }
        ConditionalOutcome::PreconditionFailed => {
            outcome.status = 412;
            put_status_line(&mut cs.head_buf, Version::Http11, 412, reason_phrase(412));
            per_hit(
                &mut cs.head_buf,
                Some(0),
                age,
                cache_status,
                keep,
                req.version,
            );
            write_parts_within(
                &mut cs.stream,
                &[&cs.head_buf],
                shared.config.timeouts.client_idle,
            )
            .await
            .map(|()| cs.head_buf.len() as u64)
        }
        ConditionalOutcome::Proceed => {
            match range_for_stored(req.method_raw(), &fields, &entry.meta, len) {
                RangeOutcome::Full => {
                    per_hit(
                        &mut cs.head_buf,
                        Some(len),
                        age,
                        cache_status,
                        keep,
                        req.version,
                    );
                    match (head_only, obj.body()) {
                        (true, _) => write_with_body(cs, obj.head(), &[], shared).await,
                        (false, Body::Chunks(chunks)) => {
                            write_with_body(cs, obj.head(), chunks, shared).await
                        }
                        (false, Body::File(file)) => {
                            write_with_file(cs, obj.head(), file, 0, len, shared).await
                        }
                    }
                }
                RangeOutcome::Partial { start, end } => {
                    outcome.status = 206;
                    let head = status_head(obj, 206, b"Partial Content", shared);
                    let mut range = Vec::with_capacity(48);
                    write_content_range(RangeOutcome::Partial { start, end }, len, &mut range);
                    put_header(&mut cs.head_buf, b"Content-Range", &range);
                    per_hit(
                        &mut cs.head_buf,
                        Some(end - start + 1),
                        age,
                        cache_status,
                        keep,
                        req.version,
                    );
                    match (head_only, obj.body()) {
                        (true, _) => write_with_body(cs, &head, &[], shared).await,
                        (false, Body::Chunks(chunks)) => {
                            let part = slice_chunks(chunks, start, end);
                            write_with_body(cs, &head, &part, shared).await
                        }
                        (false, Body::File(file)) => {
                            write_with_file(cs, &head, file, start, end + 1, shared).await
                        }
                    }
                }
                RangeOutcome::Unsatisfiable => {
                    // A minimal 416 (RFC 9110 §15.5.17), not the stored fields: their freshness
                    // would let a downstream cache keep the error in place of the content.
                    outcome.status = 416;
                    put_status_line(&mut cs.head_buf, Version::Http11, 416, reason_phrase(416));
                    let mut range = Vec::with_capacity(48);
                    write_content_range(RangeOutcome::Unsatisfiable, len, &mut range);
                    put_header(&mut cs.head_buf, b"Content-Range", &range);
                    per_hit(
                        &mut cs.head_buf,
                        Some(0),
                        age,
                        cache_status,
                        keep,
                        req.version,
                    );
                    write_with_body(cs, &[], &[], shared).await
                }
            }
        }
    };
    match written {
        Ok(n) => outcome.bytes_sent = n,
        Err(_) => outcome.keep_client = false,
    }
    cs.status_buf = status_buf;
    outcome
}

/// Streams an object that is still being filled to a request that collapsed onto the fill.
/// If the fill aborts, the client connection is aborted too: never a clean-looking end.
pub async fn serve_fill(
    shared: &Shared,
    cs: &mut ClientSide,
    req: &RequestHead,
    head: FillHead<Meta>,
    mut reader: FillReader<Meta>,
    now: u64,
    cache_status: CacheStatus<'_>,
) -> Outcome {
    // Written into a buffer the connection keeps, so a hit allocates nothing for it.
    let mut status_buf = std::mem::take(&mut cs.status_buf);
    status_buf.clear();
    cache_status.write(CACHE_NAME, &mut status_buf);
    let cache_status: &[u8] = &status_buf;
    let obj = &head.object;
    let entry = obj.meta();
    let t = &shared.config.timeouts;
    // Without a known length, HTTP/1.1 clients get chunked; HTTP/1.0 ones read until close.
    let (length, chunked) = match (head.length, req.version) {
        (BodyLength::Known(n), _) => (Some(n), false),
        (BodyLength::Unknown, Version::Http11) => (None, true),
        (BodyLength::Unknown, Version::Http10) => (None, false),
    };
    let keep = req.keep_alive && !cs.shutting_down() && (length.is_some() || chunked);
    let mut outcome = Outcome {
        status: entry.meta.status,
        bytes_sent: 0,
        keep_client: keep,
        // Squid's tag for a client served from another's fill (collapsed forwarding).
        result: ResultCode::TcpCfHit,
        peer: None,
        content_type: shared.for_log(|| entry.content_type.clone()),
        local: None,
        body_complete: false,
    };
    cs.head_buf.clear();
    if chunked {
        put_header(&mut cs.head_buf, b"Transfer-Encoding", b"chunked");
    }
    per_hit(
        &mut cs.head_buf,
        length,
        entry.meta.age_field_value(now),
        cache_status,
        keep,
        req.version,
    );
    let mut sent = match write_parts_within(
        &mut cs.stream,
        &[obj.head(), &cs.head_buf],
        t.client_idle,
    )
    .await
    {
        Ok(()) => (obj.head().len() + cs.head_buf.len()) as u64,
        Err(_) => {
            outcome.keep_client = false;
            cs.status_buf = status_buf;
            return outcome;
        }
    };
    loop {
        let next = tokio::time::timeout(t.origin_first_byte, reader.next_chunk()).await;
        let parts: [&[u8]; 3];
        let size;
        let chunk = match next {
            Ok(Ok(Some(chunk))) => chunk,
            Ok(Ok(None)) => {
                if chunked
                    && write_parts_within(&mut cs.stream, &[LAST_CHUNK], t.client_idle)
                        .await
                        .is_err()
                {
                    outcome.keep_client = false;
                }
                break;
            }
            Ok(Err(FillError::Aborted | FillError::Released)) | Err(_) => {
                outcome.keep_client = false;
                outcome.result = ResultCode::TcpMissAborted;
                break;
            }
        };
        if chunked {
            size = ChunkSizeLine::new(chunk.len() as u64);
            parts = [size.as_bytes(), &chunk, CRLF];
        } else {
            parts = [&chunk, &[], &[]];
        }
        if write_parts_within(&mut cs.stream, &parts, t.client_idle)
            .await
            .is_err()
        {
            outcome.keep_client = false;
            outcome.result = ResultCode::TcpMissAborted;
            break;
        }
        sent += parts.iter().map(|p| p.len() as u64).sum::<u64>();
    }
    outcome.bytes_sent = sent;
    cs.status_buf = status_buf;
    outcome
}

/// The per-hit block: framing, Age (RFC 9111 §5.1), Cache-Status (RFC 9211), Connection, and
/// the empty line that ends the head.
fn per_hit(
    out: &mut BytesMut,
    length: Option<u64>,
    age: u64,
    cache_status: &[u8],
    keep: bool,
    version: Version,
) {
    if let Some(n) = length {
        put_header_u64(out, b"Content-Length", n);
    }
    put_header_u64(out, b"Age", age);
    if !cache_status.is_empty() {
        put_header(out, b"Cache-Status", cache_status);
    }
    if !keep {
        put_header(out, b"Connection", b"close");
    } else if version == Version::Http10 {
        put_header(out, b"Connection", b"keep-alive");
    }
    end_head(out);
}

/// The stored head with another status line (206, 416): off the hot path, rebuilt from the
/// stored fields.
fn status_head(obj: &Object<Meta>, status: u16, reason: &[u8], shared: &Shared) -> Bytes {
    let stored = obj.meta().layout.fields(obj.head());
    super::stored_head::build(status, reason, || stored.lines(), shared.via()).0
}

/// The body slices covering bytes `start..=end` of the chunks.
fn slice_chunks(chunks: &[Bytes], start: u64, end: u64) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut offset = 0u64;
    for chunk in chunks {
        let len = chunk.len() as u64;
        let (lo, hi) = (offset, offset + len);
        offset = hi;
        if hi <= start || lo > end {
            continue;
        }
        let from = start.saturating_sub(lo) as usize;
        let to = ((end + 1).min(hi) - lo) as usize;
        out.push(chunk.slice(from..to));
    }
    out
}

/// Writes `head`, the per-hit block in `cs.head_buf`, then the body, in as few gather writes
/// as the slice limit allows. Returns the bytes written.
async fn write_with_body(
    cs: &mut ClientSide,
    head: &[u8],
    body: &[Bytes],
    shared: &Shared,
) -> std::io::Result<u64> {
    let limit = shared.config.timeouts.client_idle;
    let mut total = (head.len() + cs.head_buf.len()) as u64;
    let first = body.len().min(MAX_SLICES - 2);
    let mut parts: [&[u8]; MAX_SLICES] = [&[]; MAX_SLICES];
    parts[0] = head;
    parts[1] = &cs.head_buf;
    for (slot, chunk) in parts[2..].iter_mut().zip(&body[..first]) {
        *slot = chunk;
    }
    write_parts_within(&mut cs.stream, &parts[..2 + first], limit).await?;
    for batch in body[first..].chunks(MAX_SLICES) {
        let mut parts: [&[u8]; MAX_SLICES] = [&[]; MAX_SLICES];
        for (slot, chunk) in parts.iter_mut().zip(batch) {
            *slot = chunk;
        }
        write_parts_within(&mut cs.stream, &parts[..batch.len()], limit).await?;
    }
    total += body.iter().map(|c| c.len() as u64).sum::<u64>();
    Ok(total)
}

/// Writes `head` and the per-hit block in `cs.head_buf` in one gather write, then bytes
/// `start..end` of a body file with sendfile (no copy of the body). Returns the bytes written.
async fn write_with_file(
    cs: &mut ClientSide,
    head: &[u8],
    file: &BodyFile,
    start: u64,
    end: u64,
    shared: &Shared,
) -> std::io::Result<u64> {
    let limit = shared.config.timeouts.client_idle;
    write_parts_within(&mut cs.stream, &[head, &cs.head_buf], limit).await?;
    send_file_within(&cs.stream, file, start, end, limit).await?;
    Ok((head.len() + cs.head_buf.len()) as u64 + (end - start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_slices_cross_chunk_boundaries() {
        let chunks = [
            Bytes::from_static(b"0123"),
            Bytes::from_static(b"4567"),
            Bytes::from_static(b"89"),
        ];
        let joined = |v: Vec<Bytes>| v.iter().flat_map(|b| b.to_vec()).collect::<Vec<u8>>();
        assert_eq!(joined(slice_chunks(&chunks, 0, 9)), b"0123456789");
        assert_eq!(joined(slice_chunks(&chunks, 3, 5)), b"345");
        assert_eq!(joined(slice_chunks(&chunks, 4, 7)), b"4567");
        assert_eq!(joined(slice_chunks(&chunks, 9, 9)), b"9");
        assert_eq!(joined(slice_chunks(&chunks, 0, 0)), b"0");
    }
}
