//! HTTP-date handling (RFC 9110 §5.6.7) on whole seconds since the Unix epoch.
//!
//! Every time in this crate is a `u64` count of seconds since 1970-01-01 UTC:
//! HTTP dates have one-second resolution, the arithmetic of RFC 9111 §4.2.3 is
//! plain integer arithmetic, and callers pass `now` in so tests control time.
//!
//! The parser is the crate's own (`dates/grammar.rs`): all three formats, the RFC 850
//! two-digit year placed relative to `now`, letter case ignored. `httpdate` only formats
//! dates in tests.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::cache_control::parse_delta_seconds;
use crate::fields::{trim_ows, Fields};
use sepia_http1::HeaderId;

mod grammar;
#[cfg(test)]
mod tests;

/// Whole seconds since the Unix epoch; times before it read as 0.
pub fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Parses an HTTP-date in any of the three formats a recipient must accept (RFC 9110 §5.6.7:
/// "A recipient that parses a timestamp value in an HTTP field MUST accept all three HTTP-date
/// formats"), in any letter case (RFC 9111 §4.2), surrounding whitespace ignored.
///
/// `now` places the two-digit year of the obsolete RFC 850 format (more than 50 years in the
/// future → a century earlier, §5.6.7); pass the current time, or for a stored response the
/// time it was received. Dates before 1970 or after 9999, and every variant the notes of
/// `grammar.rs` list as refused, are `None`, as is anything that is not a date.
pub fn parse_http_date(value: &[u8], now: u64) -> Option<u64> {
    grammar::parse(trim_ows(value), now)
}

/// The first line of the well-known field `id` parsed as an HTTP-date (see
/// [`parse_http_date`] for `now`).
///
/// For `Date`, `Expires` and `Last-Modified`: RFC 9111 §4.2.1 allows using the first
/// occurrence of a repeated field.
pub fn first_date<F: Fields>(fields: &F, id: HeaderId, now: u64) -> Option<u64> {
    fields
        .first(id)
        .and_then(|value| parse_http_date(value, now))
}

/// The HTTP-date of a request precondition field, `None` (ignore the field) unless it is
/// exactly one valid date.
///
/// RFC 9110 §13.1.3: "A recipient MUST ignore the If-Modified-Since header field if the
/// received field value is not a valid HTTP-date, the field value has more than one member
/// ..."; §13.1.4 likewise for If-Unmodified-Since "(including when the field value appears to
/// be a list of dates)". Several lines form one list (RFC 9110 §5.3), so a second non-empty
/// line is a second member; within one line a list of dates is not a valid HTTP-date.
pub(crate) fn sole_date<F: Fields>(fields: &F, id: HeaderId, now: u64) -> Option<u64> {
    let mut lines = fields.known(id).map(trim_ows).filter(|v| !v.is_empty());
    let value = lines.next()?;
    if lines.next().is_some() {
        return None;
    }
    parse_http_date(value, now)
}

/// When to retry according to a `Retry-After` value (RFC 9110 §10.2.3: `Retry-After =
/// HTTP-date / delay-seconds`), as seconds since the epoch; `None` if the value is neither.
///
/// A delay counts from `now`, the time the response was received; a delay above 2^31 seconds
/// is capped there (RFC 9111 §1.2.2 treats such delta-seconds the same way).
pub fn retry_after(value: &[u8], now: u64) -> Option<u64> {
    let value = trim_ows(value);
    if let Some(delay) = parse_delta_seconds(value) {
        return Some(now.saturating_add(u64::from(delay)));
    }
    parse_http_date(value, now)
}

/// The time that stands in for "now" where a caller has no clock to pass (2026-01-01T00:00:00Z):
/// it only places a two-digit RFC 850 year, see [`Expires::parse`].
pub const CLOCKLESS_REFERENCE: u64 = 1_767_225_600;

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
    /// Reads the first `Expires` line of a response (RFC 9111 §4.2.1 allows the first of
    /// several); `now` is the time the response was received (see [`parse_http_date`]).
    ///
    /// Anything but a valid HTTP-date is [`Expires::Invalid`]: "A cache recipient MUST
    /// interpret invalid date formats, especially the value "0", as representing a time in
    /// the past (i.e., "already expired")" (RFC 9111 §5.3). That includes an empty value, a
    /// zone other than `GMT` (§4.2) and a date before 1970 (which is in the past anyway).
    pub fn parse_at<F: Fields>(response: &F, now: u64) -> Self {
        match response.first(HeaderId::Expires) {
            None => Expires::Absent,
            Some(value) => parse_http_date(value, now).map_or(Expires::Invalid, Expires::At),
        }
    }

    /// [`Expires::parse_at`] for a caller without the receipt time (storability only asks
    /// whether the field is present): the response's own `Date` stands in for it, or, without
    /// a valid one, [`CLOCKLESS_REFERENCE`]. Only the century of a two-digit RFC 850 year
    /// some 50 years away can come out differently.
    pub fn parse<F: Fields>(response: &F) -> Self {
        // Most responses have no Expires: then there is no Date to read for it.
        if response.first(HeaderId::Expires).is_none() {
            return Expires::Absent;
        }
        let reference = first_date(response, HeaderId::Date, CLOCKLESS_REFERENCE);
        Self::parse_at(response, reference.unwrap_or(CLOCKLESS_REFERENCE))
    }

    /// Whether an `Expires` line was present at all, valid or not; for
    /// storability its presence counts (RFC 9111 §3).
    pub fn is_present(self) -> bool {
        self != Expires::Absent
    }
}
