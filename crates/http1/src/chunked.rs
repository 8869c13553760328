//! Chunked bodies (RFC 9112 §7.1), decoded strictly: this is where request smuggling hides
//! (sizes with junk, bare LFs, missing CRLF after data), so anything irregular is an error.

use bytes::{Buf, Bytes, BytesMut};

use crate::error::ChunkError;
use crate::fields::{is_field_value_byte, split_field_line};

/// Longest chunk-size line accepted (size, whitespace and extensions, without CRLF). Extensions
/// are skipped, so this only bounds the work a peer can make us do per chunk.
pub const MAX_CHUNK_EXTENSION_BYTES: usize = 4096;
/// Largest trailer section accepted (the field lines, without the final empty line). Trailers
/// stay in the read buffer until complete, so this bounds that buffer.
pub const MAX_TRAILER_BYTES: usize = 16 * 1024;

/// What a call to [`ChunkedDecoder::decode`] produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkEvent {
    /// Body bytes (never empty), split off the read buffer without copying.
    Data(Bytes),
    /// The last chunk and the trailer section arrived. `trailers` holds the raw trailer field
    /// lines, each ending in CRLF, validated as field lines; empty when there were none. They
    /// may include fields that must not be trailers: forward only what
    /// [`parse_trailers`](crate::parse_trailers) keeps.
    End { trailers: Bytes },
}

/// Where the decoder stands inside the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// In a chunk-size line: `line` says which part.
    SizeLine(SizeLine),
    /// Inside chunk data.
    Data {
        remaining: u64,
    },
    /// After chunk data: expecting its CR, then its LF.
    DataCr,
    DataLf,
    /// After the last chunk: the trailer section, which stays in the buffer until complete.
    /// `line_start` is where the current trailer line begins, `scanned` how far we looked.
    Trailers {
        line_start: usize,
        scanned: usize,
    },
    Done,
}

/// Progress through one `chunk-size [ chunk-ext ] CRLF` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SizeLine {
    part: Part,
    size: u64,
    /// Bytes of this line consumed so far (bounded by `MAX_CHUNK_EXTENSION_BYTES`).
    len: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// Hex digits; `any` once at least one was seen.
    Digits { any: bool },
    /// BWS after the size.
    Space,
    /// Inside chunk-ext (after ';').
    Extension,
    /// Saw the CR ending the line.
    Cr,
}

const SIZE_LINE_START: SizeLine = SizeLine {
    part: Part::Digits { any: false },
    size: 0,
    len: 0,
};

/// Incremental, zero-copy decoder of a chunked body. Never panics on any input.
#[derive(Clone, Debug)]
pub struct ChunkedDecoder {
    state: State,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedDecoder {
    pub fn new() -> Self {
        ChunkedDecoder {
            state: State::SizeLine(SIZE_LINE_START),
        }
    }

    /// True once the last chunk and the trailer section have been consumed.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes framing from the front of `buf` and returns the next event. `Ok(None)`: need
    /// more bytes (or done: bytes after the body are left for the next message).
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<ChunkEvent>, ChunkError> {
        loop {
            match self.state {
                State::SizeLine(line) => {
                    let Some(size) = self.size_line(line, buf)? else {
                        return Ok(None);
                    };
                    self.state = if size == 0 {
                        State::Trailers {
                            line_start: 0,
                            scanned: 0,
                        }
                    } else {
                        State::Data { remaining: size }
                    };
                }
                State::Data { remaining } => {
                    if buf.is_empty() {
                        return Ok(None);
                    }
                    let n = usize::try_from(remaining).map_or(buf.len(), |r| r.min(buf.len()));
                    let remaining = remaining - n as u64;
                    self.state = if remaining == 0 {
                        State::DataCr
                    } else {
                        State::Data { remaining }
                    };
                    return Ok(Some(ChunkEvent::Data(buf.split_to(n).freeze())));
                }
                State::DataCr | State::DataLf => {
                    let (want, next) = match self.state {
                        State::DataCr => (b'\r', State::DataLf),
                        _ => (b'\n', State::SizeLine(SIZE_LINE_START)),
                    };
                    match buf.first() {
                        None => return Ok(None),
                        Some(&b) if b == want => {
                            buf.advance(1);
                            self.state = next;
                        }
                        Some(_) => return Err(ChunkError::BadLineEnding),
                    }
                }
                State::Trailers {
                    line_start,
                    scanned,
                } => {
                    return self.trailers(line_start, scanned, buf);
                }
                State::Done => return Ok(None),
            }
        }
    }

    /// Consumes the buffered part of a chunk-size line; `Some(size)` once its CRLF arrived.
    fn size_line(
        &mut self,
        mut line: SizeLine,
        buf: &mut BytesMut,
    ) -> Result<Option<u64>, ChunkError> {
        let mut consumed = 0;
        let mut result = None;
        for &b in buf.iter() {
            consumed += 1;
            line.len += 1;
            if line.len > MAX_CHUNK_EXTENSION_BYTES + 2 {
                return Err(ChunkError::ExtensionTooLong);
            }
            line.part = match (line.part, b) {
                (Part::Digits { .. }, _) if b.is_ascii_hexdigit() => {
                    if line.size >> 60 != 0 {
                        return Err(ChunkError::SizeOverflow);
                    }
                    line.size = (line.size << 4) | u64::from(hex_value(b));
                    Part::Digits { any: true }
                }
                (Part::Digits { any: false }, _) => return Err(ChunkError::BadSize),
                (Part::Digits { any: true } | Part::Space, b' ' | b'\t') => Part::Space,
                (Part::Digits { .. } | Part::Space | Part::Extension, b';') => Part::Extension,
                (Part::Digits { .. } | Part::Space | Part::Extension, b'\r') => Part::Cr,
                (Part::Cr, b'\n') => {
                    result = Some(line.size);
                    break;
                }
                (_, b'\n') | (Part::Cr, _) => return Err(ChunkError::BadLineEnding),
                (Part::Extension, _) if is_field_value_byte(b) => Part::Extension,
                _ => return Err(ChunkError::BadSize),
            };
        }
        buf.advance(consumed);
        self.state = State::SizeLine(line);
        Ok(result)
    }

    /// Looks for the end of the trailer section, validating each complete line once.
    fn trailers(
        &mut self,
        mut line_start: usize,
        mut scanned: usize,
        buf: &mut BytesMut,
    ) -> Result<Option<ChunkEvent>, ChunkError> {
        let window = buf.len().min(MAX_TRAILER_BYTES + 2);
        // `get` rather than indexing: a caller that shrank `buf` meanwhile gets no panic.
        while let Some(i) = buf
            .get(scanned..window)
            .and_then(|s| memchr::memchr(b'\n', s))
        {
            let lf = scanned + i;
            if lf == line_start || buf[lf - 1] != b'\r' {
                return Err(ChunkError::BadLineEnding);
            }
            let line = &buf[line_start..lf - 1];
            if line.is_empty() {
                let trailers = buf.split_to(line_start).freeze();
                buf.advance(2);
                self.state = State::Done;
                return Ok(Some(ChunkEvent::End { trailers }));
            }
            if split_field_line(line).is_none() {
                return Err(ChunkError::BadTrailer);
            }
            line_start = lf + 1;
            scanned = lf + 1;
        }
        if window == MAX_TRAILER_BYTES + 2 {
            return Err(ChunkError::TrailersTooLarge);
        }
        self.state = State::Trailers {
            line_start,
            scanned: window,
        };
        Ok(None)
    }
}

fn hex_value(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    }
}

#[cfg(test)]
mod tests;
