//! Sepia's HTTP/1.1 wire codec (RFC 9112), with no I/O.
//!
//! * Heads are found incrementally ([`HeadScanner`]: no byte scanned twice), split off the read
//!   buffer without copying, parsed once by httparse and kept as positions in the frozen head
//!   ([`RequestHead`], [`ResponseHead`], [`HeaderList`]): reading a part borrows a slice and
//!   touches no reference count. Known fields are classified once ([`HeaderId`]).
//! * Requests are parsed strictly: everything that could let a request be smuggled past the
//!   proxy (ambiguous framing, whitespace before colons, obs-fold, control bytes) is refused with
//!   the status to answer. Responses are parsed a little more leniently to interoperate with
//!   origins, but never with ambiguous framing.
//! * Bodies: [`LengthDecoder`] and [`ChunkedDecoder`] hand out zero-copy slices.
//! * Trailers: [`parse_trailers`] keeps only the fields allowed as trailers (RFC 9110 §6.5.1).
//! * Encoding: helpers that append heads to a reused buffer and build chunk framing on the stack.
//!
//! Choices where RFC 9112 leaves room, made once here:
//! * Request-line versions other than HTTP/1.0 and HTTP/1.1 are a 400 (not 505): httparse cannot
//!   tell "HTTP/2.0" from garbage, and either way the connection is closed.
//! * `Transfer-Encoding: gzip, chunked` on a request is a 501 (§6.1 "SHOULD respond with 501");
//!   a final coding other than chunked is a 400 (the length cannot be determined, §6.3 rule 4).
//!   On a response both are valid (§6.1: "the sender MUST either apply chunked as the final
//!   transfer coding or terminate the message by closing the connection"): the body is chunked,
//!   or read until the close (§6.3 rule 4), and [`ResponseHead::transfer_coded`] says that the
//!   content is still under codings Sepia cannot remove. The proxy passes those on to HTTP/1.1
//!   clients in `Transfer-Encoding: <codings>, chunked` ([`put_transfer_encoding`]), answers
//!   HTTP/1.0 clients 502, and never stores such a body. Either way, an element that is not a
//!   transfer-coding (a token with token parameters), an empty list, and chunked twice, with
//!   parameters or before another coding are faulty framing.
//! * Transfer-Encoding in an HTTP/1.0 message is faulty framing (§6.1): an error both ways.
//! * Requests: obs-fold, whitespace before a colon and an invalid or repeated Host are 400.
//!   Responses: obs-fold is replaced by spaces (§5.2) and whitespace before a colon is dropped
//!   (§5.1), since origins in the wild send both; CL with TE means chunked and no reuse (§6.3).
//! * Bare LF line endings are accepted in heads (§2.2) but not in chunked framing, where every
//!   line must end in CRLF (those discrepancies are how bodies get smuggled).
//! * `Limits::max_headers` is capped at [`MAX_HEADERS_CAP`] (the parser's on-stack array).

mod chunked;
mod encode;
mod error;
mod fields;
mod head;
mod header_id;
mod header_list;
mod length;
mod request;
mod response;
mod scanner;
mod trailers;
mod types;

pub use bytes::{Bytes, BytesMut};

pub use chunked::{ChunkEvent, ChunkedDecoder, MAX_CHUNK_EXTENSION_BYTES, MAX_TRAILER_BYTES};
pub use encode::{
    end_head, put_header, put_header_u64, put_request_line, put_status_line, put_trailers,
    put_transfer_encoding, reason_phrase, ChunkSizeLine, CRLF, LAST_CHUNK,
};
pub use error::{ChunkError, ParseError};
pub use head::MAX_HEADERS_CAP;
pub use header_id::HeaderId;
pub use header_list::{ConnectionMembers, Header, HeaderList};
pub use length::LengthDecoder;
pub use request::{RequestDecoder, RequestHead, TargetForm};
pub use response::{ResponseDecoder, ResponseHead};
pub use scanner::HeadScanner;
pub use trailers::{allowed_in_trailers, parse_trailers, Trailers};
pub use types::{BodyFraming, Limits, Method, Version};
