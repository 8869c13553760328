//! What request and response decoding share: locating a complete head in the read buffer within
//! the limits, mapping httparse's errors, and recording parsed fields as positions in the head.

use bytes::{Buf, BytesMut};

use crate::error::ParseError;
use crate::fields::FieldSummary;
use crate::header_id::{HeaderId, IdSet};
use crate::header_list::Field;
use crate::scanner::HeadScanner;
use crate::types::Limits;

/// Size of the on-stack array httparse parses header lines into; `Limits::max_headers` above
/// this is capped to it. 128 lines cover real traffic (browsers send ~10-20) at 4 KiB of stack.
pub const MAX_HEADERS_CAP: usize = 128;

/// Drops empty lines before the head and returns the head's length once the buffer holds all
/// of it. Only the first `max_head_bytes` are ever scanned, so a peer streaming garbage costs
/// one pass over at most that many bytes before `HeadTooLarge`.
pub(crate) fn find_head(
    scanner: &mut HeadScanner,
    limits: &Limits,
    buf: &mut BytesMut,
) -> Result<Option<usize>, ParseError> {
    loop {
        let window = buf.len().min(limits.max_head_bytes);
        let found = scanner.scan(&buf[..window]);
        let leading = scanner.take_leading();
        buf.advance(leading);
        if let Some(len) = found {
            return Ok(Some(len - leading));
        }
        if leading == 0 {
            if buf.len() > limits.max_head_bytes {
                scanner.reset();
                return Err(ParseError::HeadTooLarge);
            }
            return Ok(None);
        }
        // Dropping empty lines made room in the window: look at the bytes now inside it.
    }
}

/// httparse's verdicts, in the words of RFC 9112.
pub(crate) fn map_httparse_error(e: httparse::Error) -> ParseError {
    match e {
        // Also covers whitespace before the colon (§5.1), obs-fold (§5.2) and empty names.
        httparse::Error::HeaderName => ParseError::Malformed("invalid field name"),
        // NUL, bare CR and other CTLs in a value (§5.5 of RFC 9110).
        httparse::Error::HeaderValue => ParseError::Malformed("invalid field value"),
        httparse::Error::NewLine => ParseError::Malformed("invalid line ending"),
        httparse::Error::Status => ParseError::Malformed("invalid status-line"),
        httparse::Error::Token => ParseError::Malformed("invalid request-line"),
        httparse::Error::TooManyHeaders => ParseError::TooManyHeaders,
        httparse::Error::Version => ParseError::Malformed("unsupported HTTP version"),
    }
}

/// The length httparse parsed: `Some` when the head it was given is complete there, `None`
/// when it needs more bytes.
pub(crate) fn parsed_length(status: httparse::Result<usize>) -> Result<Option<usize>, ParseError> {
    match status.map_err(map_httparse_error)? {
        httparse::Status::Complete(n) => Ok(Some(n)),
        httparse::Status::Partial => Ok(None),
    }
}

/// A head the scanner delimited must parse to exactly its length.
pub(crate) fn whole(parsed: Option<usize>, head_len: usize) -> Result<(), ParseError> {
    match parsed {
        Some(n) if n == head_len => Ok(()),
        _ => Err(ParseError::Malformed("incomplete head")),
    }
}

/// Where a decoder may parse the buffer directly, without scanning for the end of the head
/// first: a head nothing was scanned of yet (so this happens once per head: a head that
/// arrives in pieces is scanned, never parsed again from the start for each piece), that
/// does not start with empty lines (the scanner drops those). httparse finds the end of the
/// head while it parses; when the whole head has arrived, which is nearly always, the scan
/// for its end is a second pass over the same bytes for nothing (two substring searches:
/// 3 % of a keep-alive hit's instructions, callgrind). `None`: take the general path.
pub(crate) fn direct_window<'b>(
    scanner: &HeadScanner,
    limits: &Limits,
    buf: &'b [u8],
) -> Option<&'b [u8]> {
    let fresh = scanner.is_fresh() && !matches!(buf.first(), None | Some(b'\r' | b'\n'));
    fresh.then(|| &buf[..buf.len().min(limits.max_head_bytes)])
}

/// Records parsed fields as positions in `raw` (no copy, no reference count touched) and notes
/// the framing fields.
pub(crate) fn collect_headers(
    raw: &[u8],
    parsed: &[httparse::Header<'_>],
    out: &mut Vec<Field>,
    present: &mut IdSet,
    summary: &mut FieldSummary,
) -> Result<(), ParseError> {
    for field in parsed {
        let name = field.name.as_bytes();
        if name.is_empty() {
            return Err(ParseError::Malformed("empty field name"));
        }
        let id = HeaderId::from_name(name);
        summary.add(id, field.value)?;
        present.insert(id);
        out.push(Field::within(raw, id, name, field.value));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_head_bytes: usize) -> Limits {
        Limits {
            max_head_bytes,
            max_headers: 10,
        }
    }

    #[test]
    fn empty_lines_are_dropped_as_they_arrive() {
        let mut scanner = HeadScanner::new();
        let mut buf = BytesMut::from(&b"\r\n\r\n\n"[..]);
        assert_eq!(find_head(&mut scanner, &limits(64), &mut buf), Ok(None));
        assert!(buf.is_empty(), "empty lines do not accumulate");
        buf.extend_from_slice(b"\r");
        assert_eq!(find_head(&mut scanner, &limits(64), &mut buf), Ok(None));
        assert_eq!(&buf[..], b"\r", "a CR waits for its LF");
        buf.extend_from_slice(b"\nGET / HTTP/1.1\r\n\r\n");
        assert_eq!(find_head(&mut scanner, &limits(64), &mut buf), Ok(Some(18)));
        assert!(buf.starts_with(b"GET "));
    }

    #[test]
    fn head_size_limit() {
        let head = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"; // 27 bytes
        let mut buf = BytesMut::from(&head[..]);
        assert_eq!(
            find_head(&mut HeadScanner::new(), &limits(27), &mut buf),
            Ok(Some(27))
        );
        let mut buf = BytesMut::from(&head[..]);
        let r = find_head(&mut HeadScanner::new(), &limits(26), &mut buf);
        assert_eq!(r, Err(ParseError::HeadTooLarge));
        // Incomplete but within the limit: wait. One byte more than the limit: refuse.
        let mut buf = BytesMut::from(&head[..20]);
        assert_eq!(
            find_head(&mut HeadScanner::new(), &limits(20), &mut buf),
            Ok(None)
        );
        buf.extend_from_slice(b"x");
        assert_eq!(
            find_head(&mut HeadScanner::new(), &limits(20), &mut buf),
            Err(ParseError::HeadTooLarge)
        );
        // Leading empty lines do not count towards the limit.
        let mut buf = BytesMut::from(&b"\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"[..]);
        assert_eq!(
            find_head(&mut HeadScanner::new(), &limits(27), &mut buf),
            Ok(Some(27))
        );
    }

    #[test]
    fn body_bytes_after_the_head_do_not_count() {
        let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..]);
        buf.extend_from_slice(&[b'x'; 1000]);
        assert_eq!(
            find_head(&mut HeadScanner::new(), &limits(27), &mut buf),
            Ok(Some(27))
        );
    }
}
