use super::grammar::{civil_from_days, days_from_civil, days_in_month};
use super::*;
use crate::fields::FieldList;

// 1994-11-06T08:49:37Z, the RFC's example date.
const EXAMPLE: u64 = 784_111_777;
// 2026-06-15T12:00:00Z, the clock of the tables below.
const NOW: u64 = 1_781_524_800;
// 9999-12-31T23:59:59Z, the last representable second.
const LAST: u64 = 253_402_300_799;

/// Seconds since the epoch of a UTC date and time.
fn at(year: u64, month: u64, day: u64, hour: u64, minute: u64, second: u64) -> u64 {
    days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second
}

#[derive(Clone, Copy, Debug)]
enum Format {
    Imf,
    Rfc850,
    Asctime,
}

/// `t` written in `format`, as a conforming sender would.
fn render(t: u64, format: Format) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const LONG: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = t / 86_400;
    let (year, month, day) = civil_from_days(days);
    let (weekday, month) = ((days % 7) as usize, MONTHS[month as usize - 1]);
    let secs = t % 86_400;
    let time = format!("{:02}:{:02}:{:02}", secs / 3_600, secs / 60 % 60, secs % 60);
    match format {
        Format::Imf => format!("{}, {day:02} {month} {year} {time} GMT", DAYS[weekday]),
        Format::Rfc850 => format!(
            "{}, {day:02}-{month}-{:02} {time} GMT",
            LONG[weekday],
            year % 100
        ),
        Format::Asctime => format!("{} {month} {day:>2} {time} {year}", DAYS[weekday]),
    }
}

fn check_table(cases: &[(&str, Option<u64>)]) {
    for (value, expected) in cases {
        assert_eq!(
            parse_http_date(value.as_bytes(), NOW),
            *expected,
            "{value:?}"
        );
    }
}

#[test]
fn three_formats_their_range_and_the_calendar() {
    check_table(&[
        // The RFC's three examples (§5.6.7).
        ("Sun, 06 Nov 1994 08:49:37 GMT", Some(EXAMPLE)),
        ("Sunday, 06-Nov-94 08:49:37 GMT", Some(EXAMPLE)),
        ("Sun Nov  6 08:49:37 1994", Some(EXAMPLE)),
        // Surrounding whitespace is not part of the value (RFC 9110 §5.5).
        (" \tSun, 06 Nov 1994 08:49:37 GMT \t", Some(EXAMPLE)),
        ("  Sun Nov  6 08:49:37 1994 ", Some(EXAMPLE)),
        // asctime's date3 also allows two digits.
        ("Sun Nov 06 08:49:37 1994", Some(EXAMPLE)),
        ("Sun Nov 16 08:49:37 1994", Some(EXAMPLE + 10 * 86_400)),
        // Range ends.
        ("Thu, 01 Jan 1970 00:00:00 GMT", Some(0)),
        ("Fri, 31 Dec 9999 23:59:59 GMT", Some(LAST)),
        ("Wed, 31 Dec 1969 23:59:59 GMT", None),
        ("Mon, 01 Jan 1900 00:00:00 GMT", None),
        ("Wed Dec 31 23:59:59 1969", None),
        // Leap years: 2024 and 2000 are, 2023 and 2100 are not.
        (
            "Thu, 29 Feb 2024 12:00:00 GMT",
            Some(at(2024, 2, 29, 12, 0, 0)),
        ),
        (
            "Tue, 29 Feb 2000 00:00:00 GMT",
            Some(at(2000, 2, 29, 0, 0, 0)),
        ),
        (
            "Wed, 01 Mar 2023 00:00:00 GMT",
            Some(at(2023, 3, 1, 0, 0, 0)),
        ),
        ("Wed, 29 Feb 2023 00:00:00 GMT", None),
        ("Mon, 29 Feb 2100 00:00:00 GMT", None),
        ("Thu Feb 29 12:00:00 2024", Some(at(2024, 2, 29, 12, 0, 0))),
        ("Wed Feb 29 12:00:00 2023", None),
        // Out-of-range fields.
        ("Thu, 31 Apr 2026 00:00:00 GMT", None),
        ("Thu, 32 Jan 2026 00:00:00 GMT", None),
        ("Thu, 00 Jan 2026 00:00:00 GMT", None),
        ("Thu, 01 Foo 2026 00:00:00 GMT", None),
        ("Thu, 01 Jan 2026 24:00:00 GMT", None),
        ("Thu, 01 Jan 2026 00:60:00 GMT", None),
        ("Thu, 01 Jan 2026 00:00:61 GMT", None),
        ("Sun Nov  0 08:49:37 1994", None),
    ]);
}

#[test]
fn lenient_in_letter_case_day_name_and_leap_second() {
    check_table(&[
        // The leap second of the grammar ("23:59:60") is the second before the next day.
        (
            "Wed, 31 Dec 2008 23:59:60 GMT",
            Some(at(2008, 12, 31, 23, 59, 59)),
        ),
        (
            "Wednesday, 31-Dec-08 23:59:60 GMT",
            Some(at(2008, 12, 31, 23, 59, 59)),
        ),
        (
            "Wed Dec 31 23:59:60 2008",
            Some(at(2008, 12, 31, 23, 59, 59)),
        ),
        ("Wed, 31 Dec 2008 12:00:60 GMT", None),
        // Letter case of day, month and GMT (RFC 9111 §4.2: match case-insensitively).
        ("SUN, 06 NOV 1994 08:49:37 GMT", Some(EXAMPLE)),
        ("sun, 06 nov 1994 08:49:37 gmt", Some(EXAMPLE)),
        ("Sun, 06 Nov 1994 08:49:37 gMT", Some(EXAMPLE)),
        ("SUNDAY, 06-NOV-94 08:49:37 GMT", Some(EXAMPLE)),
        ("sunday, 06-nov-94 08:49:37 gmt", Some(EXAMPLE)),
        ("SUN NOV  6 08:49:37 1994", Some(EXAMPLE)),
        // A day name that is not the date's weekday: the date wins (see grammar.rs).
        ("Mon, 06 Nov 1994 08:49:37 GMT", Some(EXAMPLE)),
        ("Friday, 06-Nov-94 08:49:37 GMT", Some(EXAMPLE)),
        ("Thu Nov  6 08:49:37 1994", Some(EXAMPLE)),
        // ... but it must be a day name, in its format's form.
        ("Xyz, 06 Nov 1994 08:49:37 GMT", None),
        ("Sunday, 06 Nov 1994 08:49:37 GMT", None),
        ("Sun, 06-Nov-94 08:49:37 GMT", None),
        ("Sundai, 06-Nov-94 08:49:37 GMT", None),
        ("Sunday Nov  6 08:49:37 1994", None),
    ]);
}

#[test]
fn strict_in_zone_shape_whitespace_and_trailing_bytes() {
    check_table(&[
        // Other zones (§4.2: invalid), other shapes.
        ("Sun, 06 Nov 1994 08:49:37 UTC", None),
        ("Sun, 06 Nov 1994 08:49:37 +0000", None),
        ("Sun, 06 Nov 1994 08:49:37 AEST", None),
        ("Sunday, 06-Nov-94 08:49:37 UTC", None),
        ("Sun Nov  6 08:49:37 1994 GMT", None),
        ("Sun 06 Nov 1994 08:49:37 GMT", None),
        ("Sun, 06 Nov 94 08:49:37 GMT", None),
        ("Sun, 06-Nov-1994 08:49:37 GMT", None),
        ("Sun, 06 Nov 1994 08.49.37 GMT", None),
        ("Sun, 06 Nov 1994 8:49:37 GMT", None),
        ("Sun, 6 Nov 1994 08:49:37 GMT", None),
        ("Sun Nov 6 08:49:37 1994", None),
        ("1994-11-06T08:49:37Z", None),
        // Extra whitespace inside (§5.6.7: a sender MUST NOT generate it) and trailing bytes.
        ("Sun,  06 Nov 1994 08:49:37 GMT", None),
        ("Sun, 06  Nov  1994 08:49:37 GMT", None),
        ("Sun, 06 Nov 1994 08:49:37  GMT", None),
        ("Sun,\t06 Nov 1994 08:49:37 GMT", None),
        ("Sunday,  06-Nov-94 08:49:37 GMT", None),
        ("Sun Nov   6 08:49:37 1994", None),
        ("Sun, 06 Nov 1994 08:49:37 GMTx", None),
        (
            "Sun, 06 Nov 1994 08:49:37 GMT, Mon, 07 Nov 1994 08:49:37 GMT",
            None,
        ),
        ("Sun Nov  6 08:49:37 1994x", None),
        ("Sunday, 06-Nov-94 08:49:37 GMT;", None),
        // Not dates.
        ("0", None),
        ("-1", None),
        ("", None),
        ("foo", None),
        ("Sun, 06 Nov 1994 08:49:3x GMT", None),
        ("Sun, 06 Nov 1994 08:49:+7 GMT", None),
        ("Sun, 0\u{e9} Nov 1994 08:49:37 GMT", None),
    ]);
    assert_eq!(parse_http_date(b"\xff\xfe", NOW), None);
    assert_eq!(
        parse_http_date(b"Sun, 06 Nov 1994 08:49:37 G\xcdT", NOW),
        None
    );
}

#[test]
fn rfc850_two_digit_years_follow_the_fifty_year_rule() {
    // RFC 9110 §5.6.7: a timestamp that "appears to be more than 50 years in the future" is
    // "the most recent year in the past that had the same last two digits". NOW is
    // 2026-06-15 12:00:00, so 50 years ahead is 2076-06-15 12:00:00.
    let cases: &[(u64, &str, Option<u64>)] = &[
        (NOW, "Sunday, 06-Nov-94 08:49:37 GMT", Some(EXAMPLE)),
        (NOW, "Monday, 15-Jun-26 12:00:00 GMT", Some(NOW)),
        (
            NOW,
            "Thursday, 18-Aug-50 02:01:18 GMT",
            Some(at(2050, 8, 18, 2, 1, 18)),
        ),
        (
            NOW,
            "Saturday, 01-Jan-00 00:00:00 GMT",
            Some(at(2000, 1, 1, 0, 0, 0)),
        ),
        (
            NOW,
            "Friday, 31-Dec-99 23:59:59 GMT",
            Some(at(1999, 12, 31, 23, 59, 59)),
        ),
        // Exactly 50 years ahead is not more than 50 years: kept.
        (
            NOW,
            "Monday, 15-Jun-76 12:00:00 GMT",
            Some(at(2076, 6, 15, 12, 0, 0)),
        ),
        (
            NOW,
            "Friday, 15-May-76 12:00:00 GMT",
            Some(at(2076, 5, 15, 12, 0, 0)),
        ),
        // One second more, or a later month or day of 2076: a century back.
        (
            NOW,
            "Tuesday, 15-Jun-76 12:00:01 GMT",
            Some(at(1976, 6, 15, 12, 0, 1)),
        ),
        (
            NOW,
            "Wednesday, 16-Jun-76 00:00:00 GMT",
            Some(at(1976, 6, 16, 0, 0, 0)),
        ),
        (
            NOW,
            "Friday, 16-Jul-76 00:00:00 GMT",
            Some(at(1976, 7, 16, 0, 0, 0)),
        ),
        (
            NOW,
            "Saturday, 01-Jan-77 00:00:00 GMT",
            Some(at(1977, 1, 1, 0, 0, 0)),
        ),
        (
            NOW,
            "Tuesday, 01-Jan-75 00:00:00 GMT",
            Some(at(2075, 1, 1, 0, 0, 0)),
        ),
    ];
    for (now, value, expected) in cases {
        assert_eq!(
            parse_http_date(value.as_bytes(), *now),
            *expected,
            "{value:?} at {now}"
        );
    }
}

#[test]
fn rfc850_years_move_with_the_clock() {
    let cases: &[(u64, &str, Option<u64>)] = &[
        // In 2050, '99 is 2099 and '01 is 2001.
        (
            at(2050, 1, 1, 0, 0, 0),
            "Thursday, 31-Dec-99 00:00:00 GMT",
            Some(at(2099, 12, 31, 0, 0, 0)),
        ),
        (
            at(2050, 1, 1, 0, 0, 0),
            "Monday, 01-Jan-01 00:00:00 GMT",
            Some(at(2001, 1, 1, 0, 0, 0)),
        ),
        // A year the calendar or the representation lacks: invalid, no wrap or panic.
        (
            at(2060, 1, 1, 0, 0, 0),
            "Monday, 29-Feb-00 00:00:00 GMT",
            None,
        ),
        (
            NOW,
            "Tuesday, 29-Feb-00 00:00:00 GMT",
            Some(at(2000, 2, 29, 0, 0, 0)),
        ),
        (
            at(1975, 1, 1, 0, 0, 0),
            "Wednesday, 01-Jan-69 00:00:00 GMT",
            None,
        ),
        (
            at(1975, 1, 1, 0, 0, 0),
            "Wednesday, 01-Jan-25 00:00:00 GMT",
            Some(at(2025, 1, 1, 0, 0, 0)),
        ),
        (0, "Thursday, 01-Jan-70 00:00:00 GMT", Some(0)),
        (0, "Wednesday, 31-Dec-69 23:59:59 GMT", None),
        (LAST, "Friday, 31-Dec-99 23:59:59 GMT", Some(LAST)),
        (
            LAST,
            "Sunday, 01-Jan-50 00:00:00 GMT",
            Some(at(9950, 1, 1, 0, 0, 0)),
        ),
        (LAST, "Friday, 01-Jan-49 00:00:00 GMT", None),
        (u64::MAX, "Friday, 31-Dec-99 23:59:59 GMT", None),
    ];
    for (now, value, expected) in cases {
        assert_eq!(
            parse_http_date(value.as_bytes(), *now),
            *expected,
            "{value:?} at {now}"
        );
    }
    // The other two formats do not depend on the clock.
    for now in [0, NOW, LAST, u64::MAX] {
        assert_eq!(
            parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(EXAMPLE)
        );
        assert_eq!(
            parse_http_date(b"Sun Nov  6 08:49:37 1994", now),
            Some(EXAMPLE)
        );
    }
}

/// Times spread over the whole range (a fixed linear congruential sequence), the range's
/// ends, and every month's last second in leap and common years.
fn sample_times() -> Vec<u64> {
    let mut times: Vec<u64> = vec![0, LAST, EXAMPLE, NOW];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..20_000 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        times.push(x % (LAST + 1));
    }
    for year in [1970u64, 1972, 2000, 2024, 2100, 2400] {
        for month in 1..=12 {
            times.push(at(year, month, days_in_month(year, month), 23, 59, 59));
        }
    }
    times
}

#[test]
fn every_format_round_trips() {
    for t in sample_times() {
        let imf = render(t, Format::Imf);
        assert_eq!(
            imf,
            httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(t))
        );
        assert_eq!(parse_http_date(imf.as_bytes(), NOW), Some(t), "{imf}");
        let asctime = render(t, Format::Asctime);
        assert_eq!(
            parse_http_date(asctime.as_bytes(), NOW),
            Some(t),
            "{asctime}"
        );
        // RFC 850 keeps two digits of the year: parsed with the clock at `t`, it is `t`.
        let rfc850 = render(t, Format::Rfc850);
        assert_eq!(parse_http_date(rfc850.as_bytes(), t), Some(t), "{rfc850}");
        for variant in [
            imf.to_lowercase(),
            imf.to_uppercase(),
            asctime.to_uppercase(),
        ] {
            assert_eq!(
                parse_http_date(variant.as_bytes(), NOW),
                Some(t),
                "{variant}"
            );
        }
    }
}

/// What `httpdate` answers, with its own RFC 850 rule (00-69 → 20xx, 70-99 → 19xx).
fn httpdate_reference(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(trim_ows(value)).ok()?;
    httpdate::parse_http_date(text).ok().map(unix_seconds)
}

#[test]
fn accepts_everything_httpdate_accepts_and_only_lenient_variants_more() {
    // With the clock at the end of 2019 the fifty-year window is 1970-2069: httpdate's.
    let now = at(2019, 12, 31, 23, 59, 59);
    for t in sample_times() {
        for format in [Format::Imf, Format::Rfc850, Format::Asctime] {
            let text = render(t, format);
            // Mutations: weekday, day, month, year or time fields, case, stray bytes.
            let shift = if matches!(format, Format::Rfc850) {
                text.find(',').unwrap() - 3
            } else {
                0
            };
            let mutations: &[(usize, &[u8])] = &[
                (0, b"Mon"),
                (0, b"mon"),
                (5, b"31"),
                (5, b"29"),
                (5, b"00"),
                (8, b"Feb"),
                (8, b"FEB"),
                (8, b"Foo"),
                (12, b"1969"),
                (12, b"2100"),
                (17, b"24"),
                (20, b"60"),
                (23, b"60"),
                (26, b"gmt"),
                (7, b"-"),
                (13, b"x"),
            ];
            for &(index, with) in mutations {
                let mut v = text.clone().into_bytes();
                let index = if index == 0 { 0 } else { index + shift };
                if index + with.len() > v.len() {
                    continue;
                }
                v[index..index + with.len()].copy_from_slice(with);
                let ours = parse_http_date(&v, now);
                match (httpdate_reference(&v), ours) {
                    // httpdate never looks at the SP between an RFC 850 date and its time
                    // ("Friday, 31-Dec-21003:59:59 GMT"); that is the one thing it accepts
                    // more.
                    (Some(_), None) => assert!(
                        matches!(format, Format::Rfc850) && v[v.len() - 13] != b' ',
                        "{v:?}"
                    ),
                    (Some(theirs), _) => assert_eq!(ours, Some(theirs), "{v:?}"),
                    (None, None) => {}
                    // Only letter case, the weekday or a leap second may make a difference.
                    (None, Some(t)) => assert!(
                        is_lenient_rendering(&v, t, format),
                        "{:?}",
                        String::from_utf8_lossy(&v)
                    ),
                }
            }
        }
    }
}

/// Whether `input` is `t` written in `format` but for the letter case, the day name (any
/// name, right or wrong), a leap second `23:59:60` for `23:59:59`, and asctime's `06` for ` 6`.
fn is_lenient_rendering(input: &[u8], t: u64, format: Format) -> bool {
    let after_day_name = |s: &[u8]| -> Option<Vec<u8>> {
        let name_end = match format {
            Format::Asctime => 3,
            Format::Imf | Format::Rfc850 => s.iter().position(|&b| b == b',')?,
        };
        let mut rest = s.get(name_end..)?.to_ascii_lowercase();
        if let Some(i) = rest.windows(8).position(|w| w == b"23:59:60") {
            rest[i + 6..i + 8].copy_from_slice(b"59");
        }
        if matches!(format, Format::Asctime) && rest.get(5) == Some(&b'0') {
            rest[5] = b' ';
        }
        Some(rest)
    };
    let canonical = render(t, format);
    after_day_name(input).is_some() && after_day_name(input) == after_day_name(canonical.as_bytes())
}

#[test]
fn expires_states() {
    let cases: &[(&[(&str, &str)], Expires)] = &[
        (&[], Expires::Absent),
        // RFC 9111 §5.3: invalid formats, "especially the value 0", are already expired.
        (&[("Expires", "0")], Expires::Invalid),
        (&[("Expires", "-1")], Expires::Invalid),
        (&[("Expires", "")], Expires::Invalid),
        (&[("Expires", "never")], Expires::Invalid),
        (
            &[("Expires", "Thu, 18 Aug 2050 02:01:18 UTC")],
            Expires::Invalid,
        ),
        (
            &[("Expires", "Thu, 01 Jan 1960 00:00:00 GMT")],
            Expires::Invalid,
        ),
        (
            &[("Expires", "Sun, 06 Nov 1994 08:49:37 GMT")],
            Expires::At(EXAMPLE),
        ),
        (
            &[("Expires", "sun, 06 nov 1994 08:49:37 gmt")],
            Expires::At(EXAMPLE),
        ),
        (
            &[("Expires", "Sunday, 06-Nov-94 08:49:37 GMT")],
            Expires::At(EXAMPLE),
        ),
        (
            &[("Expires", "Sun Nov  6 08:49:37 1994")],
            Expires::At(EXAMPLE),
        ),
        // The first line is the one (§4.2.1).
        (
            &[
                ("Expires", "Sun, 06 Nov 1994 08:49:37 GMT"),
                ("Expires", "0"),
            ],
            Expires::At(EXAMPLE),
        ),
        (
            &[
                ("Expires", "0"),
                ("Expires", "Sun, 06 Nov 1994 08:49:37 GMT"),
            ],
            Expires::Invalid,
        ),
    ];
    for (pairs, expected) in cases {
        let list = FieldList::from_pairs(pairs);
        assert_eq!(Expires::parse_at(&list, NOW), *expected, "{pairs:?}");
        assert_eq!(Expires::parse(&list), *expected, "{pairs:?}");
        assert_eq!(expected.is_present(), !pairs.is_empty());
    }
}

#[test]
fn expires_without_a_clock_places_rfc850_years_by_the_date() {
    // 2076-06-15 in RFC 850 form: within 50 years of a 2026-06-15 Date, beyond them of a
    // 2026-01-01 one (the clockless reference).
    let expires = ("Expires", "Monday, 15-Jun-76 12:00:00 GMT");
    let dated = FieldList::from_pairs(&[("Date", "Mon, 15 Jun 2026 12:00:00 GMT"), expires]);
    let undated = FieldList::from_pairs(&[expires]);
    assert_eq!(
        Expires::parse(&dated),
        Expires::At(at(2076, 6, 15, 12, 0, 0))
    );
    assert_eq!(
        Expires::parse(&undated),
        Expires::At(at(1976, 6, 15, 12, 0, 0))
    );
    assert_eq!(
        Expires::parse_at(&undated, NOW),
        Expires::At(at(2076, 6, 15, 12, 0, 0))
    );
}

#[test]
fn first_and_sole_dates() {
    let example = "Sun, 06 Nov 1994 08:49:37 GMT";
    let cases: &[(&[&str], Option<u64>, Option<u64>)] = &[
        (&[], None, None),
        (&[example], Some(EXAMPLE), Some(EXAMPLE)),
        (
            &["Sunday, 06-Nov-94 08:49:37 GMT"],
            Some(EXAMPLE),
            Some(EXAMPLE),
        ),
        (&["foo", example], None, None),
        (&[example, "foo"], Some(EXAMPLE), None),
        (&[example, example], Some(EXAMPLE), None),
        (&[example, ""], Some(EXAMPLE), Some(EXAMPLE)),
        (&[&format!("{example}, {example}")], None, None),
    ];
    for (lines, first, sole) in cases {
        let pairs: Vec<(&str, &str)> = lines.iter().map(|l| ("If-Modified-Since", *l)).collect();
        let list = FieldList::from_pairs(&pairs);
        assert_eq!(
            first_date(&list, HeaderId::IfModifiedSince, NOW),
            *first,
            "{lines:?}"
        );
        assert_eq!(
            sole_date(&list, HeaderId::IfModifiedSince, NOW),
            *sole,
            "{lines:?}"
        );
    }
}

#[test]
fn retry_after_takes_a_date_or_seconds() {
    let cases: &[(&str, Option<u64>)] = &[
        ("120", Some(NOW + 120)),
        (" 0 ", Some(NOW)),
        ("99999999999", Some(NOW + (1 << 31))),
        (
            "Fri, 31 Dec 1999 23:59:59 GMT",
            Some(at(1999, 12, 31, 23, 59, 59)),
        ),
        (
            "Friday, 31-Dec-99 23:59:59 GMT",
            Some(at(1999, 12, 31, 23, 59, 59)),
        ),
        (
            "Fri Dec 31 23:59:59 1999",
            Some(at(1999, 12, 31, 23, 59, 59)),
        ),
        ("-1", None),
        ("1.5", None),
        ("", None),
        ("soon", None),
    ];
    for (value, expected) in cases {
        assert_eq!(retry_after(value.as_bytes(), NOW), *expected, "{value:?}");
    }
    assert_eq!(retry_after(b"5", u64::MAX), Some(u64::MAX));
}

#[test]
fn calendar_helpers_are_inverse() {
    for days in (0..=days_from_civil(9999, 12, 31)).step_by(97) {
        let (y, m, d) = civil_from_days(days);
        assert_eq!(days_from_civil(y, m, d), days);
    }
    assert_eq!(civil_from_days(0), (1970, 1, 1));
    assert_eq!(civil_from_days(NOW / 86_400), (2026, 6, 15));
    assert_eq!(
        unix_seconds(std::time::UNIX_EPOCH - std::time::Duration::from_secs(5)),
        0
    );
}
