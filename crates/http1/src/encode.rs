//! Building what Sepia sends: heads appended to one reused buffer and chunk framing built on the
//! stack, so a response goes out as one vectored write with no formatting machinery involved.

use bytes::{BufMut, BytesMut};

use crate::fields::list_elements;
use crate::types::Version;

pub const CRLF: &[u8] = b"\r\n";
/// The last-chunk with an empty trailer section (RFC 9112 §7.1).
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Appends `method SP target SP version CRLF` (RFC 9112 §3).
pub fn put_request_line(buf: &mut BytesMut, method: &[u8], target: &[u8], version: Version) {
    let version = version.as_bytes();
    buf.reserve(method.len() + target.len() + version.len() + 4);
    buf.put_slice(method);
    buf.put_u8(b' ');
    buf.put_slice(target);
    buf.put_u8(b' ');
    buf.put_slice(version);
    buf.put_slice(CRLF);
}

/// Appends `version SP status SP reason CRLF` (RFC 9112 §4; the second SP is required even
/// with an empty reason). Three-digit codes are written by hand.
pub fn put_status_line(buf: &mut BytesMut, version: Version, status: u16, reason: &[u8]) {
    let version = version.as_bytes();
    buf.reserve(version.len() + reason.len() + 8);
    buf.put_slice(version);
    buf.put_u8(b' ');
    if (100..=999).contains(&status) {
        let digit = |n: u16| b'0' + (n % 10) as u8;
        buf.put_slice(&[digit(status / 100), digit(status / 10), digit(status)]);
    } else {
        // Not a valid status code (RFC 9110 §15); written as is rather than silently altered.
        buf.put_slice(itoa::Buffer::new().format(status).as_bytes());
    }
    buf.put_u8(b' ');
    buf.put_slice(reason);
    buf.put_slice(CRLF);
}

/// Appends `name: value CRLF`.
pub fn put_header(buf: &mut BytesMut, name: &[u8], value: &[u8]) {
    buf.reserve(name.len() + value.len() + 4);
    buf.put_slice(name);
    buf.put_slice(b": ");
    buf.put_slice(value);
    buf.put_slice(CRLF);
}

/// Appends `name: <decimal value> CRLF`, formatting on the stack.
pub fn put_header_u64(buf: &mut BytesMut, name: &[u8], value: u64) {
    put_header(buf, name, itoa::Buffer::new().format(value).as_bytes());
}

/// Appends the Transfer-Encoding of a body that goes out chunked: the codings other than
/// chunked listed in `received` (the values of a valid message's Transfer-Encoding lines, in
/// order), then chunked as the final coding: `Transfer-Encoding: gzip, chunked`, or just
/// `Transfer-Encoding: chunked` when no other coding was received. This is how a recipient
/// that removed the received chunked framing (or had none: a close-delimited body) and chunks
/// the body anew passes on the codings it cannot remove, making "corresponding changes ... to
/// the Transfer-Encoding field value" (RFC 9112 §6.1); chunked is applied once, last.
pub fn put_transfer_encoding<'a>(buf: &mut BytesMut, received: impl IntoIterator<Item = &'a [u8]>) {
    buf.put_slice(b"Transfer-Encoding: ");
    let codings = received.into_iter().flat_map(list_elements);
    for coding in codings.filter(|c| !c.eq_ignore_ascii_case(b"chunked")) {
        buf.reserve(coding.len() + 2);
        buf.put_slice(coding);
        buf.put_slice(b", ");
    }
    buf.put_slice(b"chunked");
    buf.put_slice(CRLF);
}

/// Appends trailer fields as field lines, `name: value CRLF` each (RFC 9112 §7.1.2), for the
/// chunked writer: the caller writes the last-chunk (`0 CRLF`) before them and the final
/// [`CRLF`] after them ([`LAST_CHUNK`] is the whole end when there are no trailers). Nothing is
/// checked: pass fields that are valid and allowed in trailers, as
/// [`Trailers::iter`](crate::Trailers::iter) yields them.
pub fn put_trailers<N: AsRef<[u8]>, V: AsRef<[u8]>>(
    buf: &mut BytesMut,
    fields: impl IntoIterator<Item = (N, V)>,
) {
    for (name, value) in fields {
        put_header(buf, name.as_ref(), value.as_ref());
    }
}

/// Appends the empty line that ends a head.
pub fn end_head(buf: &mut BytesMut) {
    buf.put_slice(CRLF);
}

/// A chunk-size line `<hex>\r\n` (RFC 9112 §7.1) built on the stack.
#[derive(Clone, Copy, Debug)]
pub struct ChunkSizeLine {
    bytes: [u8; 18],
    len: u8,
}

impl ChunkSizeLine {
    pub fn new(len: u64) -> Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let digits = (16 - len.leading_zeros() as usize / 4).max(1);
        let mut bytes = [0u8; 18];
        for (i, slot) in bytes[..digits].iter_mut().enumerate() {
            let shift = 4 * (digits - 1 - i);
            *slot = HEX[((len >> shift) & 0xf) as usize];
        }
        bytes[digits..digits + 2].copy_from_slice(CRLF);
        ChunkSizeLine {
            bytes,
            len: (digits + 2) as u8,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// The canonical reason phrase of a status code (RFC 9110 §15 and the IANA registry), for heads
/// Sepia generates; `b""` for codes without one.
pub fn reason_phrase(status: u16) -> &'static [u8] {
    match status {
        100 => b"Continue",
        101 => b"Switching Protocols",
        102 => b"Processing",
        103 => b"Early Hints",
        200 => b"OK",
        201 => b"Created",
        202 => b"Accepted",
        203 => b"Non-Authoritative Information",
        204 => b"No Content",
        205 => b"Reset Content",
        206 => b"Partial Content",
        207 => b"Multi-Status",
        208 => b"Already Reported",
        226 => b"IM Used",
        300 => b"Multiple Choices",
        301 => b"Moved Permanently",
        302 => b"Found",
        303 => b"See Other",
        304 => b"Not Modified",
        305 => b"Use Proxy",
        307 => b"Temporary Redirect",
        308 => b"Permanent Redirect",
        400 => b"Bad Request",
        401 => b"Unauthorized",
        402 => b"Payment Required",
        403 => b"Forbidden",
        404 => b"Not Found",
        405 => b"Method Not Allowed",
        406 => b"Not Acceptable",
        407 => b"Proxy Authentication Required",
        408 => b"Request Timeout",
        409 => b"Conflict",
        410 => b"Gone",
        411 => b"Length Required",
        412 => b"Precondition Failed",
        413 => b"Content Too Large",
        414 => b"URI Too Long",
        415 => b"Unsupported Media Type",
        416 => b"Range Not Satisfiable",
        417 => b"Expectation Failed",
        421 => b"Misdirected Request",
        422 => b"Unprocessable Content",
        423 => b"Locked",
        424 => b"Failed Dependency",
        425 => b"Too Early",
        426 => b"Upgrade Required",
        428 => b"Precondition Required",
        429 => b"Too Many Requests",
        431 => b"Request Header Fields Too Large",
        451 => b"Unavailable For Legal Reasons",
        500 => b"Internal Server Error",
        501 => b"Not Implemented",
        502 => b"Bad Gateway",
        503 => b"Service Unavailable",
        504 => b"Gateway Timeout",
        505 => b"HTTP Version Not Supported",
        506 => b"Variant Also Negotiates",
        507 => b"Insufficient Storage",
        508 => b"Loop Detected",
        511 => b"Network Authentication Required",
        _ => b"",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Limits, Method, ResponseDecoder, ResponseHead};

    #[test]
    fn builds_a_request_head() {
        let mut buf = BytesMut::new();
        put_request_line(&mut buf, b"GET", b"/x?y", Version::Http11);
        put_header(&mut buf, b"Host", b"example.com");
        put_header_u64(&mut buf, b"Content-Length", 1234567890123);
        end_head(&mut buf);
        assert_eq!(
            &buf[..],
            b"GET /x?y HTTP/1.1\r\nHost: example.com\r\nContent-Length: 1234567890123\r\n\r\n"
        );
    }

    #[test]
    fn trailer_fields_are_written_as_field_lines() {
        let mut buf = BytesMut::new();
        put_trailers(&mut buf, [(&b"X-Checksum"[..], &b"abc"[..]), (b"x-b", b"")]);
        assert_eq!(&buf[..], b"X-Checksum: abc\r\nx-b: \r\n");
        let owned = vec![(
            bytes::Bytes::from_static(b"Server-Timing"),
            bytes::Bytes::from_static(b"total;dur=1"),
        )];
        put_trailers(&mut buf, owned);
        assert!(buf.ends_with(b"x-b: \r\nServer-Timing: total;dur=1\r\n"));
        let before = buf.len();
        put_trailers(&mut buf, std::iter::empty::<(&[u8], &[u8])>());
        assert_eq!(buf.len(), before);
    }

    #[test]
    fn transfer_encoding_keeps_the_other_codings_and_ends_in_chunked() {
        let cases: &[(&[&[u8]], &[u8])] = &[
            (&[], b"Transfer-Encoding: chunked\r\n"),
            (&[b"chunked"], b"Transfer-Encoding: chunked\r\n"),
            (&[b"gzip"], b"Transfer-Encoding: gzip, chunked\r\n"),
            (&[b"gzip, Chunked"], b"Transfer-Encoding: gzip, chunked\r\n"),
            (
                &[b" x-a;level=1 ,, deflate", b"CHUNKED"],
                b"Transfer-Encoding: x-a;level=1, deflate, chunked\r\n",
            ),
        ];
        for (received, want) in cases {
            let mut buf = BytesMut::new();
            put_transfer_encoding(&mut buf, received.iter().copied());
            assert_eq!(&buf[..], *want, "{received:?}");
        }
        // What it writes parses back as chunked over the same codings.
        let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\n"[..]);
        put_transfer_encoding(&mut buf, [&b"gzip"[..]]);
        end_head(&mut buf);
        let mut head = ResponseHead::default();
        assert_eq!(
            ResponseDecoder::new(Limits::default()).decode(&mut buf, &mut head),
            Ok(true)
        );
        assert!(head.chunked && head.transfer_coded);
    }

    #[test]
    fn status_lines() {
        let cases: &[(Version, u16, &[u8], &[u8])] = &[
            (Version::Http11, 200, b"OK", b"HTTP/1.1 200 OK\r\n"),
            (
                Version::Http10,
                404,
                b"Not Found",
                b"HTTP/1.0 404 Not Found\r\n",
            ),
            (Version::Http11, 101, b"", b"HTTP/1.1 101 \r\n"),
            (Version::Http11, 999, b"x", b"HTTP/1.1 999 x\r\n"),
            (Version::Http11, 1000, b"x", b"HTTP/1.1 1000 x\r\n"),
            (Version::Http11, 7, b"x", b"HTTP/1.1 7 x\r\n"),
        ];
        for (version, status, reason, want) in cases {
            let mut buf = BytesMut::new();
            put_status_line(&mut buf, *version, *status, reason);
            assert_eq!(&buf[..], *want);
        }
    }

    #[test]
    fn encoded_heads_parse_back() {
        let mut buf = BytesMut::new();
        put_status_line(&mut buf, Version::Http11, 203, reason_phrase(203));
        put_header_u64(&mut buf, b"Content-Length", 0);
        put_header(&mut buf, b"ETag", b"\"v1\"");
        end_head(&mut buf);
        let mut head = ResponseHead::default();
        assert_eq!(
            ResponseDecoder::new(Limits::default()).decode(&mut buf, &mut head),
            Ok(true)
        );
        assert_eq!(
            (head.status, head.reason()),
            (203, &b"Non-Authoritative Information"[..])
        );
        assert_eq!(
            head.body_framing(Method::Get),
            crate::BodyFraming::Length(0)
        );
        assert_eq!(
            head.headers().get(crate::HeaderId::ETag),
            Some(&b"\"v1\""[..])
        );
    }

    #[test]
    fn chunk_size_lines() {
        let cases: &[(u64, &[u8])] = &[
            (0, b"0\r\n"),
            (1, b"1\r\n"),
            (15, b"f\r\n"),
            (16, b"10\r\n"),
            (0xabc, b"abc\r\n"),
            (4096, b"1000\r\n"),
            (u64::MAX, b"ffffffffffffffff\r\n"),
        ];
        for (len, want) in cases {
            assert_eq!(ChunkSizeLine::new(*len).as_bytes(), *want, "{len}");
        }
    }

    #[test]
    fn chunk_framing_round_trips_through_the_decoder() {
        let mut wire = BytesMut::new();
        for piece in [&b"hello "[..], &[b'z'; 300][..], b"!"] {
            wire.extend_from_slice(ChunkSizeLine::new(piece.len() as u64).as_bytes());
            wire.extend_from_slice(piece);
            wire.extend_from_slice(CRLF);
        }
        wire.extend_from_slice(LAST_CHUNK);
        let mut decoder = crate::ChunkedDecoder::new();
        let mut body = Vec::new();
        while let Some(event) = decoder.decode(&mut wire).unwrap() {
            match event {
                crate::ChunkEvent::Data(d) => body.extend_from_slice(&d),
                crate::ChunkEvent::End { trailers } => assert!(trailers.is_empty()),
            }
        }
        assert!(decoder.is_done() && wire.is_empty());
        assert_eq!(body.len(), 307);
        assert!(body.starts_with(b"hello z") && body.ends_with(b"z!"));
    }

    #[test]
    fn reason_phrases() {
        assert_eq!(reason_phrase(200), b"OK");
        assert_eq!(reason_phrase(431), b"Request Header Fields Too Large");
        assert_eq!(reason_phrase(502), b"Bad Gateway");
        assert_eq!(reason_phrase(299), b"");
        assert_eq!(reason_phrase(0), b"");
        // Every phrase is a valid reason-phrase (RFC 9112 §4: HTAB / SP / VCHAR / obs-text).
        for status in 0..1000 {
            assert!(reason_phrase(status)
                .iter()
                .all(|&b| b == b' ' || b.is_ascii_graphic()));
        }
    }
}
