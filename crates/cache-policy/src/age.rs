//! The `Age` field (RFC 9111 §5.1) and age calculation (RFC 9111 §4.2.3).

use crate::cache_control::{parse_delta_seconds, DELTA_SECONDS_CAP};
use crate::fields::{trim_ows, Fields};
use sepia_http1::HeaderId;

/// The `Age` field of a received response.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AgeHeader {
    /// No `Age` line.
    #[default]
    Absent,
    /// Anything but exactly one line holding `1*DIGIT`: a list (`0, 0`), two
    /// lines, a sign, a decimal point, a parameter, letters.
    ///
    /// RFC 9111 §4.2.1 encourages treating invalid freshness information as
    /// stale, and §4.2.1 allows a repeated field to make the response stale;
    /// the http-cache-tests `age-parse-*` family requires exactly that, so an
    /// invalid `Age` counts as [`DELTA_SECONDS_CAP`] seconds.
    Invalid,
    /// A valid age in seconds, capped at 2^31 (§1.2.2).
    Seconds(u32),
}

impl AgeHeader {
    /// Reads the `Age` lines of a response.
    pub fn parse<F: Fields>(response: &F) -> Self {
        let mut lines = response.known(HeaderId::Age);
        let Some(first) = lines.next() else {
            return AgeHeader::Absent;
        };
        if lines.next().is_some() {
            return AgeHeader::Invalid;
        }
        parse_delta_seconds(trim_ows(first)).map_or(AgeHeader::Invalid, AgeHeader::Seconds)
    }

    /// `age_value` of §4.2.3: 0 when absent, the cap when invalid.
    pub fn value(self) -> u64 {
        match self {
            AgeHeader::Absent => 0,
            AgeHeader::Invalid => u64::from(DELTA_SECONDS_CAP),
            AgeHeader::Seconds(s) => u64::from(s),
        }
    }
}

/// `corrected_initial_age` of RFC 9111 §4.2.3: the age of the response when
/// it arrived, computed once at store time.
///
/// `date` is the `Date` value, `None` when absent or invalid, in which case
/// the receipt time stands in (RFC 9110 §6.6.1) and the apparent age is 0.
pub fn corrected_initial_age(
    date: Option<u64>,
    age_value: u64,
    request_time: u64,
    response_time: u64,
) -> u64 {
    let date_value = date.unwrap_or(response_time);
    let apparent_age = response_time.saturating_sub(date_value);
    let response_delay = response_time.saturating_sub(request_time);
    let corrected_age_value = age_value.saturating_add(response_delay);
    apparent_age.max(corrected_age_value)
}

/// `current_age` of RFC 9111 §4.2.3, exactly as the formulas give it.
///
/// All times are seconds since the Unix epoch; a clock that went backwards
/// gives a resident time of 0, never an underflow.
pub fn current_age(
    date: Option<u64>,
    age_value: u64,
    request_time: u64,
    response_time: u64,
    now: u64,
) -> u64 {
    let resident_time = now.saturating_sub(response_time);
    corrected_initial_age(date, age_value, request_time, response_time)
        .saturating_add(resident_time)
}

/// The value to send in the `Age` field of a response served from cache
/// (RFC 9111 §5.1), capped at 2^31 as §1.2.2 requires.
pub fn age_field_value(current_age: u64) -> u64 {
    current_age.min(u64::from(DELTA_SECONDS_CAP))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::FieldList;

    #[test]
    fn age_header_parsing_matches_the_suite() {
        let cap = AgeHeader::Invalid;
        let cases: &[(&[&str], AgeHeader)] = &[
            (&[], AgeHeader::Absent),
            (&["0"], AgeHeader::Seconds(0)),
            (&[" 7200 "], AgeHeader::Seconds(7200)),
            (&["99999999999"], AgeHeader::Seconds(DELTA_SECONDS_CAP)),
            (&["abc"], cap),
            (&["-7200"], cap),
            (&["7200.0"], cap),
            (&["7200,0"], cap),
            (&["0, 0"], cap),
            (&["3600, 3600"], cap),
            (&["7200", "0"], cap),
            (&["0", "7200"], cap),
            (&["0", "0"], cap),
            (&["7200;foo=bar"], cap),
            (&["7200;foo=111"], cap),
            (&[""], cap),
        ];
        for (lines, expected) in cases {
            let pairs: Vec<(&str, &str)> = lines.iter().map(|l| ("Age", *l)).collect();
            assert_eq!(
                AgeHeader::parse(&FieldList::from_pairs(&pairs)),
                *expected,
                "{lines:?}"
            );
        }
        assert_eq!(AgeHeader::Absent.value(), 0);
        assert_eq!(AgeHeader::Seconds(30).value(), 30);
        assert_eq!(AgeHeader::Invalid.value(), 1 << 31);
    }

    #[test]
    fn current_age_follows_section_4_2_3() {
        // (date, age, request_time, response_time, now, expected)
        type Case = (Option<u64>, u64, u64, u64, u64, u64);
        let cases: &[Case] = &[
            // Fresh from origin, no delay.
            (Some(1000), 0, 1000, 1000, 1000, 0),
            // Resident time only.
            (Some(1000), 0, 1000, 1000, 1003, 3),
            // Date 7200s in the past: apparent age wins.
            (Some(10_000 - 7200), 0, 10_000, 10_000, 10_000, 7200),
            // Age header plus response delay beats apparent age.
            (Some(1000), 30, 998, 1000, 1003, 30 + 2 + 3),
            // Date in the future (fast origin clock): apparent age 0.
            (Some(1010), 15, 1000, 1000, 1000, 15),
            // No Date: the receipt time stands in.
            (None, 0, 990, 1000, 1005, 10 + 5),
            // Clock went backwards: no underflow.
            (Some(1000), 0, 1000, 1000, 900, 0),
            // Invalid Age is maximally old.
            (Some(1000), 1 << 31, 1000, 1000, 1000, 1 << 31),
        ];
        for &(date, age, req, resp, now, expected) in cases {
            assert_eq!(
                current_age(date, age, req, resp, now),
                expected,
                "{date:?} {age} {req} {resp} {now}"
            );
        }
        assert_eq!(corrected_initial_age(Some(0), 0, 5, 10,), 10);
    }

    #[test]
    fn age_field_value_is_capped() {
        assert_eq!(age_field_value(5), 5);
        assert_eq!(age_field_value(u64::MAX), 2_147_483_648);
    }
}
