//! The three HTTP-date formats of RFC 9110 §5.6.7, parsed by hand on bytes.
//!
//! ```text
//! IMF-fixdate  = day-name "," SP day SP month SP year SP time-of-day SP GMT
//!                Sun, 06 Nov 1994 08:49:37 GMT        (29 bytes)
//! rfc850-date  = day-name-l "," SP day "-" month "-" 2DIGIT SP time-of-day SP GMT
//!                Sunday, 06-Nov-94 08:49:37 GMT       (30 to 33 bytes)
//! asctime-date = day-name SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP time-of-day SP year
//!                Sun Nov  6 08:49:37 1994             (24 bytes)
//! ```
//!
//! The three lengths never overlap, so the length alone picks the format, and the preferred
//! format (nearly every date a cache sees) costs one length test before its own checks.
//!
//! What this accepts beyond the letter of the grammar, and why:
//! - Letter case in day names, month names and `GMT`: "Although all date formats are specified
//!   to be case-sensitive, a cache recipient SHOULD match the field value case-insensitively"
//!   (RFC 9111 §4.2).
//! - A day name that is not the weekday of the date. RFC 9110 §5.6.7 gives day-name the
//!   semantics of RFC 5322 §3.3, where matching the date is a requirement on the *generator*
//!   ("MUST be the day implied by the date"); nothing tells a recipient to reject, and §5.6.7
//!   encourages recipients "to be robust in parsing timestamps". The day name is redundant, so
//!   the date wins. It must still be one of the seven names, in the form its format uses.
//! - `23:59:60`, the leap second the grammar allows ("00:00:00 - 23:59:60"), read as 23:59:59:
//!   the nearest earlier second this representation has (RFC 9111 §4.2 asks exactly that of
//!   an `Expires` date).
//!
//! What it refuses: any other zone than `GMT` (RFC 9111 §4.2: "SHOULD consider a date with a
//! zone abbreviation other than "GMT" to be invalid"), extra or missing whitespace inside the
//! value ("A sender MUST NOT generate additional whitespace in an HTTP-date beyond that
//! specifically included as SP in the grammar"), trailing bytes, impossible calendar dates
//! (31 April, 29 February of a common year), times past 23:59:60, and dates before 1970 or
//! after 9999, which the `u64` seconds of this crate do not represent. Surrounding whitespace
//! is the caller's to trim (it is not part of a field value, RFC 9110 §5.5).

/// Seconds in a day; HTTP-dates have no leap seconds once parsed (see the module notes).
const DAY: u64 = 86_400;

/// Parses a trimmed HTTP-date into seconds since the Unix epoch.
///
/// `now` (seconds since the epoch) places the two-digit year of the RFC 850 format; the other
/// formats do not depend on it.
pub fn parse(s: &[u8], now: u64) -> Option<u64> {
    match s.len() {
        29 => imf_fixdate(s),
        24 => asctime(s),
        30..=33 => rfc850(s, now),
        _ => None,
    }
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`: nearly every date a cache reads, so written for speed.
/// The year and the time are checked and converted four and eight bytes at a time
/// ([`year4`], [`clock8`]).
fn imf_fixdate(s: &[u8]) -> Option<u64> {
    let s: &[u8; 29] = s.try_into().ok()?;
    if s[3] != b','
        || s[4] != b' '
        || s[7] != b' '
        || s[11] != b' '
        || s[16] != b' '
        || s[25] != b' '
        || fold3(s[26], s[27], s[28]) != GMT
        || !is_day_name(fold3(s[0], s[1], s[2]))
    {
        return None;
    }
    let seconds = clock8(&s[17..25])?;
    let year = year4(&s[12..16])?;
    let month = month(fold3(s[8], s[9], s[10]))?;
    to_unix(year, month, two_digits(s[5], s[6])?, seconds)
}

/// `Sun Nov  6 08:49:37 1994` (or `Nov 06`: date3 allows both), in UTC.
fn asctime(s: &[u8]) -> Option<u64> {
    let s: &[u8; 24] = s.try_into().ok()?;
    if s[3] != b' '
        || s[7] != b' '
        || s[10] != b' '
        || s[19] != b' '
        || !is_day_name(fold3(s[0], s[1], s[2]))
    {
        return None;
    }
    let day = match s[8] {
        b' ' => two_digits(b'0', s[9])?,
        tens => two_digits(tens, s[9])?,
    };
    let seconds = clock8(&s[11..19])?;
    let month = month(fold3(s[4], s[5], s[6]))?;
    to_unix(year4(&s[20..24])?, month, day, seconds)
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`.
fn rfc850(s: &[u8], now: u64) -> Option<u64> {
    // Everything after the day name has a fixed length: ", 06-Nov-94 08:49:37 GMT".
    let (name, rest) = s.split_at(s.len().checked_sub(24)?);
    let rest: &[u8; 24] = rest.try_into().ok()?;
    if rest[0] != b','
        || rest[1] != b' '
        || rest[4] != b'-'
        || rest[8] != b'-'
        || rest[11] != b' '
        || rest[20] != b' '
        || fold3(rest[21], rest[22], rest[23]) != GMT
        || !is_long_day_name(name)
    {
        return None;
    }
    let seconds = clock8(&rest[12..20])?;
    let (day, month) = (
        two_digits(rest[2], rest[3])?,
        month(fold3(rest[5], rest[6], rest[7]))?,
    );
    let year = rfc850_year(two_digits(rest[9], rest[10])?, (month, day, seconds), now)?;
    to_unix(year, month, day, seconds)
}

/// The century of a two-digit year (RFC 9110 §5.6.7): "Recipients of a timestamp value in
/// rfc850-date format, which uses a two-digit year, MUST interpret a timestamp that appears to
/// be more than 50 years in the future as representing the most recent year in the past that
/// had the same last two digits."
///
/// So the year is the one ending in `two_digits` whose timestamp lies in the hundred years
/// that end exactly 50 years after `now`: the latest such year up to now's year + 50, minus a
/// century when, in that very year, `(month, day, seconds of the day)` comes after now's.
/// `None` if that year is past 9999 (only for a `now` thousands of years ahead).
fn rfc850_year(two_digits: u64, in_year: (u64, u64, u64), now: u64) -> Option<u64> {
    let (now_year, now_month, now_day) = civil_from_days(now / DAY);
    let limit = now_year.checked_add(50)?;
    // limit >= 2020 > two_digits, so no underflow.
    let mut year = limit - (limit - two_digits) % 100;
    if year == limit && in_year > (now_month, now_day, now % DAY) {
        year -= 100;
    }
    Some(year)
}

// The SWAR checks below look at up to eight bytes in one `u64` (little-endian: the first
// byte is the lowest); these constants repeat one byte value in every byte.
/// `'0'` in every byte.
const ZEROS: u64 = 0x3030_3030_3030_3030;
/// 6 in every byte.
const SIXES: u64 = 0x0606_0606_0606_0606;
/// The high nibble of every byte.
const HIGH_NIBBLES: u64 = 0xF0F0_F0F0_F0F0_F0F0;

/// Whether every byte of `word` selected by `mask` (0xFF per byte) is an ASCII digit: its high
/// nibble is 3, and stays 3 when 6 is added (so the low nibble is at most 9). A byte whose
/// high nibble is 3 is at most 0x3F, so adding 6 carries into no other byte.
#[inline(always)]
fn digits_at(word: u64, mask: u64) -> bool {
    let high = HIGH_NIBBLES & mask;
    let zeros = ZEROS & mask;
    word & high == zeros && word.wrapping_add(SIXES & mask) & high == zeros
}

/// `hh:mm:ss` as seconds of the day (see [`clock`]), all eight bytes checked at once.
#[inline(always)]
fn clock8(t: &[u8]) -> Option<u64> {
    const DIGITS: u64 = 0xFFFF_00FF_FF00_FFFF;
    const COLONS: u64 = 0x0000_3A00_003A_0000;
    let word = u64::from_le_bytes(t.try_into().ok()?);
    if word & !DIGITS != COLONS || !digits_at(word, DIGITS) {
        return None;
    }
    let v = word - (ZEROS & DIGITS);
    let byte = |i: u32| (v >> (8 * i)) & 0xFF;
    clock(
        byte(0) * 10 + byte(1),
        byte(3) * 10 + byte(4),
        byte(6) * 10 + byte(7),
    )
}

/// Four ASCII digits as a number, checked at once.
#[inline(always)]
fn year4(y: &[u8]) -> Option<u64> {
    let word = u64::from(u32::from_le_bytes(y.try_into().ok()?));
    if !digits_at(word, 0xFFFF_FFFF) {
        return None;
    }
    let v = word - (ZEROS & 0xFFFF_FFFF);
    let byte = |i: u32| (v >> (8 * i)) & 0xFF;
    Some(byte(0) * 1_000 + byte(1) * 100 + byte(2) * 10 + byte(3))
}

/// Hour, minute and second as seconds of the day; the leap second 23:59:60 reads as 23:59:59.
#[inline(always)]
fn clock(hour: u64, minute: u64, second: u64) -> Option<u64> {
    let second = if second == 60 && hour == 23 && minute == 59 {
        59
    } else {
        second
    };
    (hour <= 23 && minute <= 59 && second <= 59).then_some(hour * 3_600 + minute * 60 + second)
}

/// Seconds since the epoch of a calendar date and time of day; `None` for a day the month
/// does not have, or a year outside 1970..=9999.
fn to_unix(year: u64, month: u64, day: u64, seconds: u64) -> Option<u64> {
    // Every month has 28 days; only the rarer 29th to 31st need the calendar.
    if !(1970..=9999).contains(&year) || day == 0 || (day > 28 && day > days_in_month(year, month))
    {
        return None;
    }
    Some(days_from_civil(year, month, day) * DAY + seconds)
}

/// Two ASCII digits as a number.
#[inline]
fn two_digits(tens: u8, ones: u8) -> Option<u64> {
    let (tens, ones) = (tens.wrapping_sub(b'0'), ones.wrapping_sub(b'0'));
    (tens < 10 && ones < 10).then(|| u64::from(tens * 10 + ones))
}

/// Three bytes with ASCII letters lowercased, as one number. Setting bit 0x20 turns `A`-`Z`
/// into `a`-`z` and no other byte into a lowercase letter, so comparing the result with a
/// lowercase name matches exactly that name in any letter case.
#[inline]
fn fold3(a: u8, b: u8, c: u8) -> u32 {
    u32::from_le_bytes([a | 0x20, b | 0x20, c | 0x20, 0])
}

/// A lowercase three-letter name as [`fold3`] gives it.
const fn name(s: &[u8; 3]) -> u32 {
    u32::from_le_bytes([s[0], s[1], s[2], 0])
}

const GMT: u32 = name(b"gmt");

/// `month` (RFC 9110 §5.6.7), any letter case, as 1..=12.
fn month(folded: u32) -> Option<u64> {
    const JAN: u32 = name(b"jan");
    const FEB: u32 = name(b"feb");
    const MAR: u32 = name(b"mar");
    const APR: u32 = name(b"apr");
    const MAY: u32 = name(b"may");
    const JUN: u32 = name(b"jun");
    const JUL: u32 = name(b"jul");
    const AUG: u32 = name(b"aug");
    const SEP: u32 = name(b"sep");
    const OCT: u32 = name(b"oct");
    const NOV: u32 = name(b"nov");
    const DEC: u32 = name(b"dec");
    Some(match folded {
        JAN => 1,
        FEB => 2,
        MAR => 3,
        APR => 4,
        MAY => 5,
        JUN => 6,
        JUL => 7,
        AUG => 8,
        SEP => 9,
        OCT => 10,
        NOV => 11,
        DEC => 12,
        _ => return None,
    })
}

/// `day-name`, any letter case.
fn is_day_name(folded: u32) -> bool {
    const MON: u32 = name(b"mon");
    const TUE: u32 = name(b"tue");
    const WED: u32 = name(b"wed");
    const THU: u32 = name(b"thu");
    const FRI: u32 = name(b"fri");
    const SAT: u32 = name(b"sat");
    const SUN: u32 = name(b"sun");
    matches!(folded, MON | TUE | WED | THU | FRI | SAT | SUN)
}

/// `day-name-l`, any letter case.
fn is_long_day_name(s: &[u8]) -> bool {
    const NAMES: [&[u8]; 7] = [
        b"Monday",
        b"Tuesday",
        b"Wednesday",
        b"Thursday",
        b"Friday",
        b"Saturday",
        b"Sunday",
    ];
    NAMES.iter().any(|name| name.eq_ignore_ascii_case(s))
}

/// Days in a month of the proleptic Gregorian calendar.
pub fn days_in_month(year: u64, month: u64) -> u64 {
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
pub fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year % 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The inverse: `(year, month, day)` of a count of days since 1970-01-01 (Hinnant's
/// `civil_from_days`, unsigned since every count here is after the epoch).
pub fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}
