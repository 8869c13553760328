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
    let value = trim_ows(value);
    // Every store reads two or three dates, nearly always in the preferred format: parsed
    // directly, that is a tenth of what going through `httpdate` (text, then a calendar
    // structure, then a `SystemTime` formatted back to check the weekday) costs.
    if let Some(seconds) = parse_imf_fixdate(value) {
        return Some(seconds);
    }
    let text = std::str::from_utf8(value).ok()?;
    httpdate::parse_http_date(text).ok().map(unix_seconds)
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110 §5.6.7) with a real calendar
/// date from 1970 to 9999 and the weekday that date falls on, as `httpdate` accepts them;
/// `None` for anything else, which the caller hands to `httpdate`.
fn parse_imf_fixdate(s: &[u8]) -> Option<u64> {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let s: &[u8; 29] = s.try_into().ok()?;
    let punctuation = [
        (3, b','),
        (4, b' '),
        (7, b' '),
        (11, b' '),
        (16, b' '),
        (19, b':'),
    ];
    if punctuation.iter().any(|&(i, c)| s[i] != c)
        || s[22] != b':'
        || s[25] != b' '
        || &s[26..] != b"GMT"
    {
        return None;
    }
    let digits = |from: usize, to: usize| {
        s[from..to].iter().try_fold(0u64, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0'))
        })
    };
    let day = digits(5, 7)?;
    let month = MONTHS.iter().position(|m| &s[8..11] == *m)? as u64 + 1;
    let year = digits(12, 16)?;
    let (hour, minute, second) = (digits(17, 19)?, digits(20, 22)?, digits(23, 25)?);
    if !(1970..=9999).contains(&year)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    // 1970-01-01 was a Thursday, the first entry of DAYS.
    if &s[..3] != DAYS[(days % 7) as usize] {
        return None;
    }
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date of 1970 or later (Howard Hinnant's
/// `days_from_civil`, with years counted from March so the leap day ends a year).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year % 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
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

    /// What `httpdate` alone answers: the fast path must never differ from it.
    fn reference(value: &[u8]) -> Option<u64> {
        let text = std::str::from_utf8(trim_ows(value)).ok()?;
        httpdate::parse_http_date(text).ok().map(unix_seconds)
    }

    #[test]
    fn the_fixdate_fast_path_agrees_with_httpdate() {
        // Times spread over the whole range (a fixed linear congruential sequence), the
        // range's ends, and every month's last days in leap and common years.
        let mut times: Vec<u64> = vec![0, 253_402_300_799]; // 9999-12-31T23:59:59Z
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            times.push(x % 253_402_300_800);
        }
        for year in [1970u64, 1972, 2000, 2024, 2100, 2400] {
            for month in 1..=12 {
                let last = days_from_civil(year, month, days_in_month(year, month));
                times.push(last * 86_400 + 86_399);
            }
        }
        for t in times {
            let text = httpdate::fmt_http_date(UNIX_EPOCH + std::time::Duration::from_secs(t));
            assert_eq!(parse_imf_fixdate(text.as_bytes()), Some(t), "{text}");
            // Mutations: another weekday, day, month, year or time field, and stray bytes.
            let mut variants = Vec::new();
            for (at, with) in [
                (0, &b"Mon"[..]),
                (5, b"31"),
                (5, b"30"),
                (5, b"29"),
                (5, b"00"),
                (8, b"Feb"),
                (8, b"Foo"),
                (12, b"1969"),
                (12, b"2100"),
                (17, b"24"),
                (20, b"60"),
                (23, b"60"),
                (26, b"gmt"),
                (7, b"-"),
                (13, b"x"),
            ] {
                let mut v = text.clone().into_bytes();
                v[at..at + with.len()].copy_from_slice(with);
                variants.push(v);
            }
            for v in variants {
                let fast = parse_imf_fixdate(&v);
                assert!(fast.is_none() || fast == reference(&v), "{v:?}");
                assert_eq!(parse_http_date(&v), reference(&v), "{v:?}");
            }
        }
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
