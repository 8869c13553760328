//! Sepia's HTTP/1.1 wire codec (RFC 9112), with no I/O.
//!
//! * Heads are found incrementally ([`HeadScanner`]: no byte scanned twice), split off the read
//!   buffer without copying, parsed once by httparse and kept as [`Bytes`] slices of the frozen
//!   head ([`RequestHead`], [`ResponseHead`]). Known fields are classified once ([`HeaderId`]).
//! * Requests are parsed strictly: everything that could let a request be smuggled past the
//!   proxy (ambiguous framing, whitespace before colons, obs-fold, control bytes) is refused with
//!   the status to answer. Responses are parsed a little more leniently to interoperate with
//!   origins, but never with ambiguous framing.
//! * Bodies: [`LengthDecoder`] and [`ChunkedDecoder`] hand out zero-copy slices.
//! * Encoding: helpers that append heads to a reused buffer and build chunk framing on the stack.

mod chunked;
mod encode;
mod error;
mod fields;
mod head;
mod header_id;
mod length;
mod request;
mod response;
mod scanner;
mod types;

pub use bytes::{Bytes, BytesMut};

pub use chunked::{ChunkEvent, ChunkedDecoder, MAX_CHUNK_EXTENSION_BYTES, MAX_TRAILER_BYTES};
pub use encode::{
    end_head, put_header, put_header_u64, put_request_line, put_status_line, reason_phrase,
    ChunkSizeLine, CRLF, LAST_CHUNK,
};
pub use error::{ChunkError, ParseError};
pub use head::MAX_HEADERS_CAP;
pub use header_id::{Header, HeaderId};
pub use length::LengthDecoder;
pub use request::{RequestDecoder, RequestHead, TargetForm};
pub use response::{ResponseDecoder, ResponseHead};
pub use scanner::HeadScanner;
pub use types::{BodyFraming, Limits, Method, Version};
