//! HTTP-date handling (RFC 9110 §5.6.7) on whole seconds since the Unix epoch.
//!
//! Every time in this crate is a `u64` count of seconds since 1970-01-01 UTC:
//! HTTP dates have one-second resolution, the arithmetic of RFC 9111 §4.2.3 is
//! plain integer arithmetic, and callers pass `now` in so tests control time.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::fields::{trim_ows, Fields};
use sepia_http1::HeaderId;

/// Whole seconds since the Unix epoch; times before it read as 0.
pub fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Parses an HTTP-date in any of the three formats a recipient must accept
/// (IMF-fixdate, RFC 850, asctime; RFC 9110 §5.6.7).
///
/// Dates before 1970 are rejected like any other invalid date.
pub fn parse_http_date(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(trim_ows(value)).ok()?;
    httpdate::parse_http_date(text).ok().map(unix_seconds)
}

/// The first line of the well-known field `id` parsed as an HTTP-date.
///
/// RFC 9111 §4.2.1 allows using the first occurrence of a repeated field.
pub fn first_date<F: Fields>(fields: &F, id: HeaderId) -> Option<u64> {
    fields.first(id).and_then(parse_http_date)
}

/// The `Expires` field of a response (RFC 9111 §5.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Expires {
    /// No `Expires` line.
    #[default]
    Absent,
    /// Present but not a valid HTTP-date, e.g. `0`: a cache must read it as a
    /// time in the past (§5.3).
    Invalid,
    /// A valid date.
    At(u64),
}

impl Expires {
    /// Reads the first `Expires` line of a response.
    pub fn parse<F: Fields>(response: &F) -> Self {
        match response.first(HeaderId::Expires) {
            None => Expires::Absent,
            Some(value) => parse_http_date(value).map_or(Expires::Invalid, Expires::At),
        }
    }

    /// Whether an `Expires` line was present at all, valid or not; for
    /// storability its presence counts (RFC 9111 §3).
    pub fn is_present(self) -> bool {
        self != Expires::Absent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::FieldList;

    // 1994-11-06T08:49:37Z, the RFC's example date.
    const EXAMPLE: u64 = 784_111_777;

    #[test]
    fn three_date_formats_parse() {
        let cases: &[(&str, Option<u64>)] = &[
            ("Sun, 06 Nov 1994 08:49:37 GMT", Some(EXAMPLE)),
            (" Sun, 06 Nov 1994 08:49:37 GMT ", Some(EXAMPLE)),
            ("Sunday, 06-Nov-94 08:49:37 GMT", Some(EXAMPLE)),
            ("Sun Nov  6 08:49:37 1994", Some(EXAMPLE)),
            ("Thu, 01 Jan 1970 00:00:00 GMT", Some(0)),
            ("0", None),
            ("foo", None),
            ("", None),
            ("Sun, 06 Nov 1994 08:49:37 UTC", None),
            ("Sun, 06 Nov 1994 8:49:37 GMT", None),
        ];
        for (value, expected) in cases {
            assert_eq!(parse_http_date(value.as_bytes()), *expected, "{value:?}");
        }
        assert_eq!(parse_http_date(b"\xff\xfe"), None);
    }

    #[test]
    fn expires_states() {
        let cases: &[(&[(&str, &str)], Expires)] = &[
            (&[], Expires::Absent),
            (&[("Expires", "0")], Expires::Invalid),
            (
                &[("Expires", "Sun, 06 Nov 1994 08:49:37 GMT")],
                Expires::At(EXAMPLE),
            ),
            (
                &[
                    ("Expires", "Sun, 06 Nov 1994 08:49:37 GMT"),
                    ("Expires", "0"),
                ],
                Expires::At(EXAMPLE),
            ),
        ];
        for (pairs, expected) in cases {
            let got = Expires::parse(&FieldList::from_pairs(pairs));
            assert_eq!(got, *expected, "{pairs:?}");
            assert_eq!(got.is_present(), !pairs.is_empty());
        }
    }

    #[test]
    fn first_date_uses_first_line_and_unix_seconds_clamps() {
        let list =
            FieldList::from_pairs(&[("Date", "foo"), ("Date", "Sun, 06 Nov 1994 08:49:37 GMT")]);
        assert_eq!(first_date(&list, HeaderId::Date), None);
        assert_eq!(
            unix_seconds(UNIX_EPOCH + std::time::Duration::from_secs(5)),
            5
        );
        assert_eq!(
            unix_seconds(UNIX_EPOCH - std::time::Duration::from_secs(5)),
            0
        );
    }
}
