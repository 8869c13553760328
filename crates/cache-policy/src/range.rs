//! Serving byte ranges of a complete stored response (RFC 9110 §14) and
//! `If-Range` (RFC 9110 §13.1.5).
//!
//! Only a single `bytes` range is served as 206. Several ranges would need a
//! `multipart/byteranges` body, which is not implemented: such requests, and
//! syntactically invalid ones or other units, get the full 200 response,
//! which RFC 9110 §14.2 permits ("A server MAY ignore the Range header
//! field").

use crate::dates::parse_http_date;
use crate::etag::EntityTag;
use crate::fields::{list_members, trim_ows, Fields};
use crate::stored::StoredMeta;
use sepia_http1::HeaderId;

/// One `bytes` range-spec (RFC 9110 §14.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteRange {
    /// `first-last`.
    FromTo(u64, u64),
    /// `first-`.
    From(u64),
    /// `-suffix-length`.
    Suffix(u64),
}

/// A parsed `Range` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeRequest {
    /// No `Range` field.
    None,
    /// Exactly one valid `bytes` range.
    Single(ByteRange),
    /// Several ranges, another unit, or invalid syntax: answer with the whole
    /// representation.
    Ignore,
}

/// Parses the `Range` field (first line only; a repeated `Range` is
/// ignored as invalid).
pub fn parse_range<R: Fields>(request: &R) -> RangeRequest {
    let mut lines = request.known(HeaderId::Range);
    let Some(value) = lines.next() else {
        return RangeRequest::None;
    };
    if lines.next().is_some() {
        return RangeRequest::Ignore;
    }
    parse_range_value(value).map_or(RangeRequest::Ignore, RangeRequest::Single)
}

/// Parses `bytes=range-spec` when it holds exactly one range.
pub fn parse_range_value(value: &[u8]) -> Option<ByteRange> {
    let value = trim_ows(value);
    let eq = memchr::memchr(b'=', value)?;
    if !trim_ows(&value[..eq]).eq_ignore_ascii_case(b"bytes") {
        return None;
    }
    let mut specs = list_members(&value[eq + 1..]);
    let spec = specs.next()?;
    if specs.next().is_some() {
        return None;
    }
    let dash = memchr::memchr(b'-', spec)?;
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    match (parse_u64(first), parse_u64(last)) {
        (Some(first), Some(last)) if first <= last => Some(ByteRange::FromTo(first, last)),
        (Some(first), None) if last.is_empty() => Some(ByteRange::From(first)),
        (None, Some(suffix)) if first.is_empty() => Some(ByteRange::Suffix(suffix)),
        _ => None,
    }
}

fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// How to answer a request from a complete stored response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeOutcome {
    /// 200 with the whole content.
    Full,
    /// 206 with bytes `start..=end` and `Content-Range: bytes start-end/len`.
    Partial {
        /// First byte offset.
        start: u64,
        /// Last byte offset, inclusive.
        end: u64,
    },
    /// 416 with `Content-Range: bytes */len` (RFC 9110 §15.5.17).
    Unsatisfiable,
}

/// Resolves one range against the content length (RFC 9110 §14.1.1–§14.1.2).
pub fn resolve_range(range: ByteRange, length: u64) -> RangeOutcome {
    let last_byte = match length.checked_sub(1) {
        Some(last) => last,
        None => return RangeOutcome::Unsatisfiable,
    };
    match range {
        ByteRange::FromTo(first, last) if first <= last_byte => RangeOutcome::Partial {
            start: first,
            end: last.min(last_byte),
        },
        ByteRange::From(first) if first <= last_byte => RangeOutcome::Partial {
            start: first,
            end: last_byte,
        },
        ByteRange::Suffix(suffix) if suffix > 0 => RangeOutcome::Partial {
            start: length.saturating_sub(suffix),
            end: last_byte,
        },
        _ => RangeOutcome::Unsatisfiable,
    }
}

/// Decides whether to answer a request from a complete stored response with
/// the whole content, a single range, or 416.
///
/// Ranges are served only for `GET` and a stored 200 (RFC 9110 §14.2). With
/// `If-Range` (§13.1.5) the range is served only if the validator matches:
/// an entity-tag must match the stored one with strong comparison; a date
/// must equal the stored `Last-Modified` exactly, and that `Last-Modified`
/// must be strong, i.e. at least one second before `Date` (§8.8.2.2).
/// Otherwise, including for an invalid `If-Range`, the whole content is sent.
pub fn range_for_stored<R: Fields>(
    method: &[u8],
    request: &R,
    stored: &StoredMeta,
    length: u64,
) -> RangeOutcome {
    if method != b"GET" || stored.status != 200 {
        return RangeOutcome::Full;
    }
    let RangeRequest::Single(range) = parse_range(request) else {
        return RangeOutcome::Full;
    };
    if let Some(if_range) = request.first(HeaderId::IfRange) {
        if !if_range_matches(if_range, stored) {
            return RangeOutcome::Full;
        }
    }
    resolve_range(range, length)
}

fn if_range_matches(if_range: &[u8], stored: &StoredMeta) -> bool {
    let looks_like_etag = if_range.starts_with(b"\"") || if_range.starts_with(b"W/");
    if looks_like_etag {
        let stored_tag = stored.etag.as_deref().and_then(EntityTag::parse);
        return match (EntityTag::parse(if_range), stored_tag) {
            (Some(wanted), Some(current)) => wanted.strong_eq(&current),
            _ => false,
        };
    }
    // The receipt time places an RFC 850 year (RFC 9110 §5.6.7); the clock is not passed here.
    let wanted = parse_http_date(if_range, stored.response_time);
    match (wanted, stored.last_modified, stored.date) {
        (Some(wanted), Some(last_modified), Some(date)) => {
            wanted == last_modified && last_modified < date
        }
        _ => false,
    }
}

/// Writes a `Content-Range` value into `out` (cleared first): `bytes
/// start-end/length` for a partial outcome, `bytes */length` for an
/// unsatisfiable one (RFC 9110 §14.4). Nothing for [`RangeOutcome::Full`].
pub fn write_content_range(outcome: RangeOutcome, length: u64, out: &mut Vec<u8>) {
    out.clear();
    match outcome {
        RangeOutcome::Full => {}
        RangeOutcome::Partial { start, end } => {
            out.extend_from_slice(b"bytes ");
            crate::cache_status::write_decimal(start, out);
            out.push(b'-');
            crate::cache_status::write_decimal(end, out);
            out.push(b'/');
            crate::cache_status::write_decimal(length, out);
        }
        RangeOutcome::Unsatisfiable => {
            out.extend_from_slice(b"bytes */");
            crate::cache_status::write_decimal(length, out);
        }
    }
}

/// A `Content-Range` of a 206 response (RFC 9110 §14.4): for a cache that
/// wants to keep or combine partial content (§3.3 of RFC 9111).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContentRange {
    /// First byte offset.
    pub first: u64,
    /// Last byte offset, inclusive.
    pub last: u64,
    /// Complete length, `None` when sent as `*`.
    pub complete_length: Option<u64>,
}

/// Parses `bytes first-last/complete-length` (or `/*`). The unsatisfied
/// form `bytes */length` and invalid ranges (last before first, last beyond
/// the complete length) are `None`.
pub fn parse_content_range(value: &[u8]) -> Option<ContentRange> {
    let value = trim_ows(value);
    let space = memchr::memchr(b' ', value)?;
    if !value[..space].eq_ignore_ascii_case(b"bytes") {
        return None;
    }
    let spec = trim_ows(&value[space + 1..]);
    let slash = memchr::memchr(b'/', spec)?;
    let (range, length) = (&spec[..slash], &spec[slash + 1..]);
    let dash = memchr::memchr(b'-', range)?;
    let first = parse_u64(&range[..dash])?;
    let last = parse_u64(&range[dash + 1..])?;
    let complete_length = match length {
        b"*" => None,
        digits => Some(parse_u64(digits)?),
    };
    let valid = first <= last && complete_length.is_none_or(|len| last < len);
    valid.then_some(ContentRange {
        first,
        last,
        complete_length,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PolicyConfig;
    use crate::fields::FieldList;

    #[test]
    fn range_syntax() {
        let cases: &[(&str, Option<ByteRange>)] = &[
            ("bytes=0-1", Some(ByteRange::FromTo(0, 1))),
            ("Bytes = 5-5", Some(ByteRange::FromTo(5, 5))),
            ("bytes= 1-", Some(ByteRange::From(1))),
            ("bytes=-5", Some(ByteRange::Suffix(5))),
            ("bytes=-0", Some(ByteRange::Suffix(0))),
            ("bytes=0-1, 5-6", None),
            ("bytes=2-1", None),
            ("bytes=-", None),
            ("bytes=a-b", None),
            ("bytes=1-2-3", None),
            ("bytes=", None),
            ("items=0-1", None),
            ("0-1", None),
            ("bytes=99999999999999999999-", None),
        ];
        for (value, expected) in cases {
            assert_eq!(parse_range_value(value.as_bytes()), *expected, "{value}");
        }
        let none = FieldList::new();
        assert_eq!(parse_range(&none), RangeRequest::None);
        let twice = FieldList::from_pairs(&[("Range", "bytes=0-1"), ("Range", "bytes=2-3")]);
        assert_eq!(parse_range(&twice), RangeRequest::Ignore);
    }

    #[test]
    fn resolution_against_length() {
        let p = |start, end| RangeOutcome::Partial { start, end };
        let cases: &[(ByteRange, u64, RangeOutcome)] = &[
            (ByteRange::FromTo(0, 1), 11, p(0, 1)),
            (ByteRange::FromTo(5, 500), 11, p(5, 10)),
            (ByteRange::FromTo(11, 20), 11, RangeOutcome::Unsatisfiable),
            (ByteRange::From(1), 11, p(1, 10)),
            (ByteRange::From(11), 11, RangeOutcome::Unsatisfiable),
            (ByteRange::Suffix(1), 11, p(10, 10)),
            (ByteRange::Suffix(50), 11, p(0, 10)),
            (ByteRange::Suffix(0), 11, RangeOutcome::Unsatisfiable),
            (ByteRange::From(0), 0, RangeOutcome::Unsatisfiable),
        ];
        for (range, length, expected) in cases {
            assert_eq!(
                resolve_range(*range, *length),
                *expected,
                "{range:?} of {length}"
            );
        }
    }

    #[test]
    fn if_range_and_method_rules() {
        let config = PolicyConfig::default();
        let t = 1_700_000_000;
        let lm = "Tue, 14 Nov 2023 21:23:20 GMT"; // t - 3000
        let date = "Tue, 14 Nov 2023 22:13:20 GMT"; // t
        let stored = StoredMeta::from_response(
            200,
            &FieldList::from_pairs(&[("ETag", "\"v1\""), ("Last-Modified", lm), ("Date", date)]),
            t,
            t,
            b"http://h/",
            &config,
        );
        let weak_lm = StoredMeta::from_response(
            200,
            &FieldList::from_pairs(&[("Last-Modified", date), ("Date", date)]),
            t,
            t,
            b"http://h/",
            &config,
        );
        let not_ok = StoredMeta {
            status: 404,
            ..stored.clone()
        };
        let partial = RangeOutcome::Partial { start: 0, end: 1 };
        type Case<'a> = (
            &'a str,
            &'a StoredMeta,
            &'a [(&'a str, &'a str)],
            RangeOutcome,
        );
        let cases: &[Case<'_>] = &[
            ("GET", &stored, &[], RangeOutcome::Full),
            ("GET", &stored, &[("Range", "bytes=0-1")], partial),
            (
                "HEAD",
                &stored,
                &[("Range", "bytes=0-1")],
                RangeOutcome::Full,
            ),
            (
                "GET",
                &not_ok,
                &[("Range", "bytes=0-1")],
                RangeOutcome::Full,
            ),
            (
                "GET",
                &stored,
                &[("Range", "bytes=0-1,3-4")],
                RangeOutcome::Full,
            ),
            (
                "GET",
                &stored,
                &[("Range", "bytes=50-")],
                RangeOutcome::Unsatisfiable,
            ),
            (
                "GET",
                &stored,
                &[("Range", "bytes=0-1"), ("If-Range", "\"v1\"")],
                partial,
            ),
            (
                "GET",
                &stored,
                &[("Range", "bytes=0-1"), ("If-Range", "W/\"v1\"")],
                RangeOutcome::Full,
            ),
            (
                "GET",
                &stored,
                &[("Range", "bytes=0-1"), ("If-Range", "\"v2\"")],
                RangeOutcome::Full,
            ),
            (
                "GET",
                &stored,
                &[("Range", "bytes=0-1"), ("If-Range", lm)],
                partial,
            ),
            (
                "GET",
                &stored,
                &[("Range", "bytes=0-1"), ("If-Range", date)],
                RangeOutcome::Full,
            ),
            (
                "GET",
                &stored,
                &[("Range", "bytes=0-1"), ("If-Range", "garbage")],
                RangeOutcome::Full,
            ),
            (
                "GET",
                &weak_lm,
                &[("Range", "bytes=0-1"), ("If-Range", date)],
                RangeOutcome::Full,
            ),
        ];
        for (method, meta, request, expected) in cases {
            let got =
                range_for_stored(method.as_bytes(), &FieldList::from_pairs(request), meta, 11);
            assert_eq!(got, *expected, "{method} {request:?}");
        }
    }

    #[test]
    fn content_range_parsing() {
        let range = |first, last, complete_length| {
            Some(ContentRange {
                first,
                last,
                complete_length,
            })
        };
        let cases: &[(&str, Option<ContentRange>)] = &[
            ("bytes 4-9/10", range(4, 9, Some(10))),
            ("bytes 0-4/*", range(0, 4, None)),
            ("Bytes 0-0/1", range(0, 0, Some(1))),
            ("bytes */10", None),
            ("bytes 5-4/10", None),
            ("bytes 4-10/10", None),
            ("bytes 4-9", None),
            ("items 4-9/10", None),
            ("bytes a-9/10", None),
            ("", None),
        ];
        for (value, expected) in cases {
            assert_eq!(parse_content_range(value.as_bytes()), *expected, "{value}");
        }
    }

    #[test]
    fn content_range_values() {
        let mut out = b"junk".to_vec();
        write_content_range(RangeOutcome::Partial { start: 4, end: 9 }, 10, &mut out);
        assert_eq!(out, b"bytes 4-9/10");
        write_content_range(RangeOutcome::Unsatisfiable, 11, &mut out);
        assert_eq!(out, b"bytes */11");
        write_content_range(RangeOutcome::Full, 11, &mut out);
        assert!(out.is_empty());
    }
}
