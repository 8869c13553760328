//! The `Age` field (RFC 9111 §5.1) and age calculation (RFC 9111 §4.2.3).

use crate::cache_control::{parse_delta_seconds, DELTA_SECONDS_CAP};
use crate::fields::{list_members, Fields};
use sepia_http1::HeaderId;

/// The `Age` field of a received response (RFC 9111 §5.1).
///
/// `Age = delta-seconds`, but RFC 9111 §5.1 tells a cache how to read anything else: "a cache
/// encountering a message with a list-based Age field value SHOULD use the first member of the
/// field value, discarding subsequent ones", and "If the field value (after discarding
/// additional members, as per above) is invalid (e.g., it contains something other than a
/// non-negative integer), a cache SHOULD ignore the field."
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AgeHeader {
    /// No `Age` line.
    #[default]
    Absent,
    /// Present, but its first member is not `1*DIGIT` (a sign, a decimal point, a parameter,
    /// letters, a quoted string), or it has no member at all: ignored, so `age_value` is 0
    /// exactly as when the field is absent.
    Invalid,
    /// The first member's value in seconds, capped at 2^31: "If a cache receives a
    /// delta-seconds value greater than the greatest integer it can represent ... the cache
    /// MUST consider the value to be 2147483648 (2^31)" (§1.2.2).
    Seconds(u32),
}

impl AgeHeader {
    /// Reads the `Age` lines of a response.
    ///
    /// Several lines form one list, in order (RFC 9110 §5.3), so the first member of the
    /// first line that has one is the value; empty members are skipped as the list syntax
    /// requires (RFC 9110 §5.6.1). `0, 7200` is 0, `7200, 0` is 7200, lines `0` and `7200`
    /// are 0.
    pub fn parse<F: Fields>(response: &F) -> Self {
        let mut lines = response.known(HeaderId::Age).peekable();
        if lines.peek().is_none() {
            return AgeHeader::Absent;
        }
        match lines.flat_map(list_members).next() {
            Some(first) => {
                parse_delta_seconds(first).map_or(AgeHeader::Invalid, AgeHeader::Seconds)
            }
            None => AgeHeader::Invalid,
        }
    }

    /// `age_value` of §4.2.3: the value in seconds; 0 when the field is absent or ignored.
    pub fn value(self) -> u64 {
        match self {
            AgeHeader::Absent | AgeHeader::Invalid => 0,
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
    fn age_header_follows_section_5_1() {
        use AgeHeader::{Absent, Invalid, Seconds};
        let cases: &[(&[&str], AgeHeader)] = &[
            (&[], Absent),
            (&["0"], Seconds(0)),
            (&[" 7200 "], Seconds(7200)),
            (&["007200"], Seconds(7200)),
            // A list: the first member counts, the rest is discarded.
            (&["7200,0"], Seconds(7200)),
            (&["7200, 0"], Seconds(7200)),
            (&["0,7200"], Seconds(0)),
            (&["0, 7200"], Seconds(0)),
            (&["0, 0"], Seconds(0)),
            (&["3600, 3600"], Seconds(3600)),
            (&["5, abc"], Seconds(5)),
            (&[", 5"], Seconds(5)),
            (&[" ,\t, 5 ,9"], Seconds(5)),
            // Several lines are one list: the first line's first member.
            (&["7200", "0"], Seconds(7200)),
            (&["0", "7200"], Seconds(0)),
            (&["0", "0"], Seconds(0)),
            (&["3600", "3600"], Seconds(3600)),
            (&["1, 2", "3"], Seconds(1)),
            (&["", "5"], Seconds(5)),
            (&["abc", "5"], Invalid),
            // Invalid first member: the field is ignored.
            (&["abc"], Invalid),
            (&["-7200"], Invalid),
            (&["+7200"], Invalid),
            (&["7200.0"], Invalid),
            (&["0.5"], Invalid),
            (&["7200;foo=bar"], Invalid),
            (&["7200;foo=111"], Invalid),
            (&["7200 0"], Invalid),
            (&["\"7200\""], Invalid),
            (&["0x10"], Invalid),
            (&["abc, 5"], Invalid),
            (&["-1, 5"], Invalid),
            (&[""], Invalid),
            (&[" "], Invalid),
            (&[","], Invalid),
            (&["", ""], Invalid),
            // Too large: 2^31 (RFC 9111 §1.2.2), however many digits.
            (&["2147483647"], Seconds(2_147_483_647)),
            (&["2147483648"], Seconds(DELTA_SECONDS_CAP)),
            (&["2147483649"], Seconds(DELTA_SECONDS_CAP)),
            (&["99999999999"], Seconds(DELTA_SECONDS_CAP)),
            (&["18446744073709551616"], Seconds(DELTA_SECONDS_CAP)),
            (
                &["99999999999999999999999999999999999999"],
                Seconds(DELTA_SECONDS_CAP),
            ),
            (&["99999999999, 0"], Seconds(DELTA_SECONDS_CAP)),
        ];
        for (lines, expected) in cases {
            let pairs: Vec<(&str, &str)> = lines.iter().map(|l| ("Age", *l)).collect();
            assert_eq!(
                AgeHeader::parse(&FieldList::from_pairs(&pairs)),
                *expected,
                "{lines:?}"
            );
        }
        assert_eq!(Absent.value(), 0);
        assert_eq!(Invalid.value(), 0);
        assert_eq!(Seconds(30).value(), 30);
        assert_eq!(Seconds(DELTA_SECONDS_CAP).value(), 1 << 31);
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
            // An Age of 2^31 or more (capped) is maximally old.
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
