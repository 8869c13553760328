//! Message bodies on an HTTP/1.1 wire, for both roles: decoding the incoming framing (RFC 9112
//! §6: Content-Length, chunked, or until close) into pieces of content, and framing content for
//! the outgoing side: raw, or chunked so that content of unknown length can still go out on a
//! persistent connection. Data is never copied: each read lands in the connection's buffer
//! and leaves as a `Bytes` slice of it in a gather write, with the head (or chunk framing) that
//! precedes it.

use std::io;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use sepia_http1::{
    parse_trailers, put_trailers, BodyFraming, ChunkEvent, ChunkSizeLine, ChunkedDecoder,
    LengthDecoder, CRLF, LAST_CHUNK,
};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::model::{BodyLength, BodyPiece, FieldView, Trailers};
use crate::transport::io::{read_more, write_parts_within};

/// Room made in the read buffer before each read of a body: big enough that a large body moves
/// in few syscalls, small enough that thousands of transfers fit in memory.
const BODY_READ_ROOM: usize = 64 * 1024;

/// How an incoming body is delimited, with the decoder's progress.
#[derive(Debug)]
pub enum BodyDecoder {
    Length(LengthDecoder),
    Chunked(ChunkedDecoder),
    UntilClose,
    /// No body, or all of it has been decoded.
    Done,
}

/// Why a body could not be read whole.
#[derive(Debug)]
pub enum BodyReadError {
    /// The sender closed before the body was complete.
    Closed,
    /// Reading failed or timed out.
    Io(io::Error),
    /// The chunked framing or the trailer section was invalid.
    Framing,
}

impl std::fmt::Display for BodyReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyReadError::Closed => f.write_str("the sender closed before the body was complete"),
            BodyReadError::Io(e) => write!(f, "reading the body failed: {e}"),
            BodyReadError::Framing => f.write_str("invalid chunked framing"),
        }
    }
}

impl BodyDecoder {
    pub fn new(framing: BodyFraming) -> BodyDecoder {
        match framing {
            BodyFraming::Empty | BodyFraming::Length(0) => BodyDecoder::Done,
            BodyFraming::Length(n) => BodyDecoder::Length(LengthDecoder::new(n)),
            BodyFraming::Chunked => BodyDecoder::Chunked(ChunkedDecoder::new()),
            BodyFraming::UntilClose => BodyDecoder::UntilClose,
        }
    }

    /// Whether the whole body has been decoded (or there was none).
    pub fn is_done(&self) -> bool {
        matches!(self, BodyDecoder::Done)
    }

    /// The next piece of the body, reading from `src` into `buf` when what `buf` holds is not
    /// enough; each read must progress within `limit`. The trailer section of a chunked body is
    /// parsed and stripped of the fields that must never be trailers (RFC 9110 §6.5.1) and of
    /// those the message's Connection field names (`head`, §7.6.1).
    pub async fn next<R: AsyncRead + Unpin>(
        &mut self,
        src: &mut R,
        buf: &mut BytesMut,
        limit: Duration,
        head: &impl FieldView,
    ) -> Result<BodyPiece, BodyReadError> {
        loop {
            let step = match self {
                BodyDecoder::Done => return Ok(BodyPiece::End(Trailers::default())),
                BodyDecoder::Length(d) => match d.decode(buf) {
                    Some(data) => return Ok(BodyPiece::Data(data)),
                    None if d.is_done() => Some(Bytes::new()),
                    None => None,
                },
                BodyDecoder::Chunked(d) => {
                    match d.decode(buf).map_err(|_| BodyReadError::Framing)? {
                        Some(ChunkEvent::Data(data)) => return Ok(BodyPiece::Data(data)),
                        Some(ChunkEvent::End { trailers }) => Some(trailers),
                        None => None,
                    }
                }
                BodyDecoder::UntilClose if !buf.is_empty() => {
                    return Ok(BodyPiece::Data(buf.split().freeze()))
                }
                BodyDecoder::UntilClose => None,
            };
            if let Some(raw) = step {
                // Done only once the trailers are known good: `Done` means read cleanly.
                let trailers = trailers(&raw, head)?;
                *self = BodyDecoder::Done;
                return Ok(BodyPiece::End(trailers));
            }
            let n = read_more(src, buf, BODY_READ_ROOM, limit)
                .await
                .map_err(BodyReadError::Io)?;
            if n == 0 {
                if matches!(self, BodyDecoder::UntilClose) {
                    // A close-delimited body ends at EOF (RFC 9112 §6.3 rule 8).
                    *self = BodyDecoder::Done;
                    return Ok(BodyPiece::End(Trailers::default()));
                }
                return Err(BodyReadError::Closed);
            }
        }
    }
}

/// The trailer fields of a raw trailer section that may be passed on.
fn trailers(raw: &Bytes, head: &impl FieldView) -> Result<Trailers, BodyReadError> {
    if raw.is_empty() {
        return Ok(Trailers::default());
    }
    let mut fields = parse_trailers(raw).map_err(|_| BodyReadError::Framing)?;
    let named = head.connection_names();
    fields.retain(|name, _| !named(name));
    Ok(Trailers::new(fields.into_vec()))
}

/// How content is framed on the way out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyOut {
    /// As is: the head carries Content-Length, or the connection closes after the body.
    Raw,
    /// Chunked (RFC 9112 §7.1), trailers passed on.
    Chunked,
}

impl BodyOut {
    /// The framing for content of `length` toward a peer that can (`chunked_ok`) or cannot
    /// (an HTTP/1.0 client, RFC 9112 §7.1) parse chunked, and whether the connection can stay
    /// open after it (content of unknown length without chunked ends with the close).
    pub fn for_length(length: BodyLength, chunked_ok: bool) -> (BodyOut, bool) {
        match (length, chunked_ok) {
            (BodyLength::None | BodyLength::Known(_), _) => (BodyOut::Raw, true),
            (BodyLength::Unknown, true) => (BodyOut::Chunked, true),
            (BodyLength::Unknown, false) => (BodyOut::Raw, false),
        }
    }
}

/// Writes `prefix` (a head, or nothing) and one piece of content framed as `out`, in one gather
/// write that must progress within `limit`. Returns the bytes written.
pub async fn write_piece<W: AsyncWrite + Unpin>(
    dst: &mut W,
    prefix: &[u8],
    data: &[u8],
    out: BodyOut,
    limit: Duration,
) -> io::Result<u64> {
    let size;
    let parts: [&[u8]; 4] = match out {
        BodyOut::Raw => [prefix, data, &[], &[]],
        BodyOut::Chunked => {
            size = ChunkSizeLine::new(data.len() as u64);
            [prefix, size.as_bytes(), data, CRLF]
        }
    };
    write_parts_within(dst, &parts, limit).await?;
    Ok(parts.iter().map(|p| p.len() as u64).sum())
}

/// Writes `prefix` and the end of content framed as `out`: for chunked, the last chunk, the
/// trailer fields and the empty line (RFC 9112 §7.1.2); nothing more for raw content. A prefix
/// and raw content with nothing to write cost no system call.
pub async fn write_end<W: AsyncWrite + Unpin>(
    dst: &mut W,
    prefix: &[u8],
    trailers: &Trailers,
    out: BodyOut,
    limit: Duration,
) -> io::Result<u64> {
    let mut lines = BytesMut::new();
    let parts: [&[u8]; 4] = match out {
        BodyOut::Raw => [prefix, &[], &[], &[]],
        BodyOut::Chunked if trailers.is_empty() => [prefix, LAST_CHUNK, &[], &[]],
        BodyOut::Chunked => {
            put_trailers(&mut lines, trailers.iter());
            [prefix, b"0\r\n", &lines, CRLF]
        }
    };
    write_parts_within(dst, &parts, limit).await?;
    Ok(parts.iter().map(|p| p.len() as u64).sum())
}

#[cfg(test)]
mod tests;
