//! Helpers shared by the fuzz targets: turning fuzzer bytes into read patterns, a simple
//! whole-buffer reference decoder for chunked bodies to compare the incremental one against,
//! and the HTTP-date oracle ([`http_date`]).

use sepia_http1::{
    allowed_in_trailers, parse_trailers, put_trailers, Bytes, BytesMut, ChunkError, ChunkEvent,
    ChunkedDecoder, MAX_CHUNK_EXTENSION_BYTES, MAX_TRAILER_BYTES,
};

/// Reads the first two bytes as a split point into the rest (wrapped into range).
pub fn split_input(data: &[u8]) -> Option<(usize, &[u8])> {
    let (prefix, rest) = (data.get(..2)?, &data[2..]);
    let split = usize::from(u16::from_le_bytes([prefix[0], prefix[1]])) % (rest.len() + 1);
    Some((split, rest))
}

/// Piece sizes for feeding a stream, from a one-byte seed (xorshift; sizes 1..=64, now and then
/// large). The same seed always gives the same pattern.
pub struct Pieces(u32);

impl Pieces {
    pub fn new(seed: u8) -> Self {
        Pieces(u32::from(seed).wrapping_mul(2_654_435_761) | 1)
    }

    pub fn next_len(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        if self.0 % 16 == 0 {
            4096
        } else {
            (self.0 % 64) as usize + 1
        }
    }
}

/// What feeding a whole chunked stream to a decoder produced.
#[derive(Debug, PartialEq, Eq)]
pub enum ChunkedOutcome {
    /// The body ended: its data, raw trailers and the bytes left after it.
    Complete {
        data: Vec<u8>,
        trailers: Vec<u8>,
        rest: Vec<u8>,
    },
    /// The input ran out first; `data` is what was decoded so far.
    Incomplete {
        data: Vec<u8>,
    },
    Error,
}

/// Feeds `input` to a `ChunkedDecoder` in pieces of the sizes `next_len` gives.
pub fn decode_incrementally(
    input: &[u8],
    mut next_len: impl FnMut() -> usize,
) -> (ChunkedOutcome, Option<ChunkError>) {
    let mut decoder = ChunkedDecoder::new();
    let mut buf = BytesMut::new();
    let mut data = Vec::new();
    let mut fed = 0;
    loop {
        match decoder.decode(&mut buf) {
            Err(e) => return (ChunkedOutcome::Error, Some(e)),
            Ok(Some(ChunkEvent::Data(d))) => {
                assert!(!d.is_empty(), "empty Data event");
                data.extend_from_slice(&d);
            }
            Ok(Some(ChunkEvent::End { trailers })) => {
                assert!(decoder.is_done());
                // The decoder validated every line, so the filter must accept the section.
                assert!(
                    check_trailers(&trailers),
                    "decoded trailers refused: {trailers:?}"
                );
                buf.extend_from_slice(&input[fed..]);
                let outcome = ChunkedOutcome::Complete {
                    data,
                    trailers: trailers.to_vec(),
                    rest: buf.to_vec(),
                };
                return (outcome, None);
            }
            Ok(None) if fed < input.len() => {
                let end = (fed + next_len().max(1)).min(input.len());
                buf.extend_from_slice(&input[fed..end]);
                fed = end;
            }
            Ok(None) => return (ChunkedOutcome::Incomplete { data }, None),
        }
    }
}

/// Filters a trailer section with `parse_trailers` and checks what it kept: only allowed
/// names, as slices of `raw` (no copy), one per line that was not dropped, and written back
/// with `put_trailers` they parse to the same fields with nothing dropped. Returns whether the
/// section was accepted at all (arbitrary bytes may be refused; that must not panic either).
pub fn check_trailers(raw: &Bytes) -> bool {
    let Ok(trailers) = parse_trailers(raw) else {
        return false;
    };
    let lines = raw.iter().filter(|&&b| b == b'\n').count();
    assert_eq!(trailers.len() + trailers.dropped(), lines, "a line lost");
    let range = raw.as_ptr_range();
    for (name, value) in trailers.iter() {
        assert!(allowed_in_trailers(name), "kept a forbidden field {name:?}");
        assert!(
            !name.is_empty() && range.contains(&name.as_ptr()),
            "{name:?}"
        );
        assert!(
            value.is_empty() || range.contains(&value.as_ptr()),
            "{value:?}"
        );
        assert!(name.iter().all(|&b| is_tchar(b)), "{name:?}");
        assert!(value.iter().all(|&b| is_field_byte(b)), "{value:?}");
        assert!(
            !value.starts_with(b" ") && !value.ends_with(b" "),
            "{value:?}"
        );
        assert!(
            !value.starts_with(b"\t") && !value.ends_with(b"\t"),
            "{value:?}"
        );
    }
    let mut written = BytesMut::new();
    put_trailers(&mut written, trailers.iter());
    let again = parse_trailers(&written.freeze()).expect("written trailers parse");
    assert_eq!(again.dropped(), 0);
    assert!(
        again.iter().eq(trailers.iter()),
        "round trip changed the fields"
    );
    true
}

/// tchar (RFC 9110 §5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// HTAB, SP, VCHAR, obs-text.
fn is_field_byte(b: u8) -> bool {
    b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80
}

/// RFC 9112 §7.1 decoded the obvious way, on the whole input at once, with the same bounds as
/// `ChunkedDecoder`. It only reports an error once the offending line is complete, so where it
/// says `Incomplete` the incremental decoder may already have failed.
pub fn reference_decode(input: &[u8]) -> ChunkedOutcome {
    let mut data = Vec::new();
    let mut pos = 0;
    loop {
        // chunk-size [ BWS ; chunk-ext ] CRLF
        let Some(lf) = input[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| pos + i)
        else {
            return ChunkedOutcome::Incomplete { data };
        };
        if lf == pos || input[lf - 1] != b'\r' {
            return ChunkedOutcome::Error;
        }
        let line = &input[pos..lf - 1];
        if line.len() > MAX_CHUNK_EXTENSION_BYTES {
            return ChunkedOutcome::Error;
        }
        let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
        if digits == 0 {
            return ChunkedOutcome::Error;
        }
        let mut size: u64 = 0;
        for &d in &line[..digits] {
            let v = (d as char).to_digit(16).unwrap() as u64;
            match size.checked_mul(16) {
                Some(s) => size = s + v,
                None => return ChunkedOutcome::Error,
            }
        }
        let after = &line[digits..];
        let ext = &after[after
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count()..];
        let ext_ok =
            ext.is_empty() || (ext[0] == b';' && ext[1..].iter().all(|&b| is_field_byte(b)));
        // Whitespace is only allowed after at least one digit, and only before ';' or CRLF.
        if !ext_ok {
            return ChunkedOutcome::Error;
        }
        pos = lf + 1;
        if size == 0 {
            break;
        }
        let avail = (input.len() - pos) as u64;
        if avail < size {
            data.extend_from_slice(&input[pos..]);
            return ChunkedOutcome::Incomplete { data };
        }
        let end = pos + size as usize;
        data.extend_from_slice(&input[pos..end]);
        match input.get(end..end + 2) {
            Some(b"\r\n") => pos = end + 2,
            Some(_) => return ChunkedOutcome::Error,
            None if input.get(end).is_some_and(|&b| b != b'\r') => return ChunkedOutcome::Error,
            None => return ChunkedOutcome::Incomplete { data },
        }
    }
    // trailer-section CRLF
    let start = pos;
    let mut line_start = pos;
    loop {
        let Some(lf) = input[line_start..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| line_start + i)
        else {
            if input.len() - start >= MAX_TRAILER_BYTES + 2 {
                return ChunkedOutcome::Error;
            }
            return ChunkedOutcome::Incomplete { data };
        };
        if lf >= start + MAX_TRAILER_BYTES + 2 {
            return ChunkedOutcome::Error;
        }
        if lf == line_start || input[lf - 1] != b'\r' {
            return ChunkedOutcome::Error;
        }
        let line = &input[line_start..lf - 1];
        if line.is_empty() {
            return ChunkedOutcome::Complete {
                data,
                trailers: input[start..line_start].to_vec(),
                rest: input[lf + 1..].to_vec(),
            };
        }
        let field_line_ok = match line.iter().position(|&b| b == b':') {
            Some(colon) if colon > 0 => {
                line[..colon].iter().all(|&b| is_tchar(b))
                    && line[colon + 1..].iter().all(|&b| is_field_byte(b))
            }
            _ => false,
        };
        if !field_line_ok {
            return ChunkedOutcome::Error;
        }
        line_start = lf + 1;
    }
}

/// Checks the incremental decoder against the reference on one input, fed in two ways.
pub fn check_chunked(seed: u8, input: &[u8]) {
    let mut pieces = Pieces::new(seed);
    let (pieced, pieced_err) = decode_incrementally(input, || pieces.next_len());
    let (whole, whole_err) = decode_incrementally(input, || input.len());
    // How the bytes arrive must not change the verdict.
    assert_eq!(pieced, whole, "pieced vs whole");
    assert_eq!(
        pieced_err, whole_err,
        "error kind depends on the read pattern"
    );
    // The filter on arbitrary bytes, not only on what the decoder let through.
    check_trailers(&Bytes::copy_from_slice(input));
    let reference = reference_decode(input);
    match (&reference, &whole) {
        (a, b) if a == b => {}
        // The incremental decoder rejects bad bytes before their line is complete.
        (ChunkedOutcome::Incomplete { .. }, ChunkedOutcome::Error) => {}
        _ => panic!("reference {reference:?} vs decoder {whole:?} ({whole_err:?})"),
    }
    match &whole {
        ChunkedOutcome::Complete {
            data,
            trailers,
            rest,
        } => {
            assert!(data.len() + trailers.len() + rest.len() <= input.len());
        }
        ChunkedOutcome::Incomplete { data } => assert!(data.len() <= input.len()),
        ChunkedOutcome::Error => {}
    }
}

/// The oracle of the `http_date` target: RFC 9110 §5.6.7 dates as the cache's parser must read
/// them, worked out independently of it (its own calendar and formatter, `httpdate` as a second
/// opinion).
pub mod http_date {
    use sepia_cache_policy::{parse_http_date, unix_seconds};

    /// 9999-12-31T23:59:59Z, the last second an HTTP-date's four-digit year can name.
    pub const LAST: u64 = 253_402_300_799;
    /// 2019-12-31T23:59:59Z: with the clock here, the RFC 850 window is 1970-2069, which is
    /// the fixed rule `httpdate` applies, so the two parsers must agree on every RFC 850 date.
    pub const HTTPDATE_CLOCK: u64 = 1_577_836_799;

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

    fn is_leap(year: u64) -> bool {
        year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
    }

    fn month_days(year: u64, month: u64) -> u64 {
        const DAYS: [u64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        DAYS[month as usize - 1] + u64::from(month == 2 && is_leap(year))
    }

    /// A calendar instant: year, month, day, second of the day.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    pub struct Civil {
        pub year: u64,
        pub month: u64,
        pub day: u64,
        pub second: u64,
    }

    /// The calendar instant of `t`, counted the slow, obvious way (400-year cycles, then
    /// years, then months), unlike the crate's arithmetic.
    pub fn civil(t: u64) -> Civil {
        let mut days = t / 86_400;
        let mut year = 1970 + 400 * (days / 146_097);
        days %= 146_097;
        loop {
            let len = if is_leap(year) { 366 } else { 365 };
            if days < len {
                break;
            }
            days -= len;
            year += 1;
        }
        let mut month = 1;
        while days >= month_days(year, month) {
            days -= month_days(year, month);
            month += 1;
        }
        Civil {
            year,
            month,
            day: days + 1,
            second: t % 86_400,
        }
    }

    /// Seconds since the epoch of a calendar instant of 1970 or later.
    pub fn unix(c: Civil) -> u64 {
        let cycles = (c.year - 1970) / 400;
        let mut days = cycles * 146_097;
        for year in 1970 + 400 * cycles..c.year {
            days += if is_leap(year) { 366 } else { 365 };
        }
        for month in 1..c.month {
            days += month_days(c.year, month);
        }
        (days + c.day - 1) * 86_400 + c.second
    }

    /// How to write a date: the format (0 IMF-fixdate, 1 RFC 850, 2 asctime), which letters
    /// to upper- or lowercase (bit i of `case` flips letter i), a day name shifted from the
    /// right one, and a leap second `23:59:60` instead of `23:59:59`.
    #[derive(Clone, Copy, Debug)]
    pub struct Style {
        pub format: u8,
        pub case: u32,
        pub weekday_shift: usize,
        pub leap_second: bool,
    }

    /// `t` written in `style`.
    pub fn render(t: u64, style: Style) -> String {
        let c = civil(t);
        let weekday = ((t / 86_400) as usize + style.weekday_shift) % 7;
        let month = MONTHS[c.month as usize - 1];
        let mut second = c.second % 60;
        if style.leap_second && c.second == 86_399 {
            second = 60;
        }
        let time = format!(
            "{:02}:{:02}:{second:02}",
            c.second / 3_600,
            c.second / 60 % 60
        );
        let text = match style.format % 3 {
            0 => format!(
                "{}, {:02} {month} {} {time} GMT",
                DAYS[weekday], c.day, c.year
            ),
            1 => format!(
                "{}, {:02}-{month}-{:02} {time} GMT",
                LONG[weekday],
                c.day,
                c.year % 100
            ),
            _ => format!("{} {month} {:>2} {time} {}", DAYS[weekday], c.day, c.year),
        };
        let mut letter = 0;
        text.chars()
            .map(|ch| {
                if !ch.is_ascii_alphabetic() {
                    return ch;
                }
                letter += 1;
                if style.case >> (letter % 32) & 1 == 1 {
                    if ch.is_ascii_uppercase() {
                        ch.to_ascii_lowercase()
                    } else {
                        ch.to_ascii_uppercase()
                    }
                } else {
                    ch
                }
            })
            .collect()
    }

    /// What an RFC 850 date of `t`'s calendar day and time, written with two digits of its
    /// year, means with the clock at `now` (RFC 9110 §5.6.7): the year ending in those digits
    /// whose instant lies after now minus 50 years and at most now plus 50 years (tried
    /// one by one), if the calendar and the 1970-9999 range have it.
    pub fn rfc850_meaning(t: u64, now: u64) -> Option<u64> {
        let c = civil(t);
        let n = civil(now);
        let low = Civil {
            year: n.year.saturating_sub(50),
            ..n
        };
        let high = Civil {
            year: n.year + 50,
            ..n
        };
        let year = (0..=102u64)
            .map(|century| century * 100 + c.year % 100)
            .find(|&year| {
                let candidate = Civil { year, ..c };
                low < candidate && candidate <= high
            })?;
        let valid = (1970..=9999).contains(&year) && c.day <= month_days(year, c.month);
        valid.then(|| unix(Civil { year, ..c }))
    }

    fn trim(data: &[u8]) -> &[u8] {
        let start = data.iter().position(|&b| b != b' ' && b != b'\t');
        let end = data.iter().rposition(|&b| b != b' ' && b != b'\t');
        match (start, end) {
            (Some(start), Some(end)) => &data[start..=end],
            _ => &data[..0],
        }
    }

    /// Whether `input` is `t` written in one of the three formats, but for letter case, the
    /// day name (any of the seven, in the format's form), a leap second, asctime's `06`.
    pub fn is_lenient_rendering(input: &[u8], t: u64) -> bool {
        let input = trim(input);
        (0..3).any(|format| {
            (0..7).any(|weekday_shift| {
                [false, true].into_iter().any(|leap_second| {
                    let style = Style {
                        format,
                        case: 0,
                        weekday_shift,
                        leap_second,
                    };
                    let text = render(t, style);
                    let zero_padded = text.replacen("  ", " 0", 1);
                    input.eq_ignore_ascii_case(text.as_bytes())
                        || (format == 2 && input.eq_ignore_ascii_case(zero_padded.as_bytes()))
                })
            })
        })
    }

    /// One fuzz input, read two ways: as the bytes of a field value, and as the description
    /// of a date to write (`t`, style, clock) and read back.
    pub fn check(data: &[u8]) {
        check_bytes(data);
        if data.len() >= 20 {
            let word = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().unwrap());
            let t = word(0) % (LAST + 1);
            let style = Style {
                format: data[8],
                case: u32::from(data[9]) | u32::from(data[10]) << 8,
                weekday_shift: usize::from(data[11] % 7),
                leap_second: data[11] & 0x80 != 0,
            };
            check_round_trip(t, style, word(12) % (LAST + 1));
        }
    }

    /// Arbitrary bytes: no panic, a result in range, the clock only matters for RFC 850, the
    /// same answer as `httpdate` wherever that accepts, and nothing accepted that is not a
    /// lenient rendering of the answer.
    fn check_bytes(data: &[u8]) {
        let ours = parse_http_date(data, HTTPDATE_CLOCK);
        let value = trim(data);
        for now in [0, 1_781_524_800, LAST, u64::MAX] {
            let other = parse_http_date(data, now);
            assert!(other.is_none_or(|t| t <= LAST), "{data:?}");
            if value.len() == 29 || value.len() == 24 {
                assert_eq!(other, ours, "{data:?} depends on the clock");
            }
        }
        // httpdate also trims CR, LF, VT and FF, which are not whitespace in a field value
        // (RFC 9110 §5.5) and which a date never starts or ends with: ours refuses them.
        let other_space = |b: Option<&u8>| b.is_some_and(|b| b"\r\n\x0b\x0c".contains(b));
        if other_space(value.first()) || other_space(value.last()) {
            assert_eq!(ours, None, "{data:?}");
            return;
        }
        let theirs = std::str::from_utf8(value)
            .ok()
            .and_then(|text| httpdate::parse_http_date(text).ok())
            .map(unix_seconds);
        match (ours, theirs) {
            (Some(t), Some(reference)) => assert_eq!(t, reference, "{data:?}"),
            (Some(t), None) => assert!(is_lenient_rendering(value, t), "{data:?} read as {t}"),
            // httpdate never looks at the SP between an RFC 850 date and its time.
            (None, Some(_)) => assert!(
                value.len() >= 30 && value[value.len() - 13] != b' ',
                "{data:?} refused"
            ),
            (None, None) => {}
        }
    }

    /// A date written as a sender (or a sloppy one: case, day name, leap second) would write
    /// it must read back as what it means.
    fn check_round_trip(t: u64, style: Style, now: u64) {
        let text = render(t, style);
        let got = parse_http_date(text.as_bytes(), now);
        let leap = style.leap_second && t % 86_400 == 86_399;
        let expected = match style.format % 3 {
            1 => rfc850_meaning(t, now),
            _ => Some(t),
        };
        assert_eq!(got, expected, "{text:?} at {now} (leap second {leap})");
        if style.format.is_multiple_of(3) && style.case == 0 && style.weekday_shift == 0 && !leap {
            let reference =
                httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(t));
            assert_eq!(text, reference, "the oracle's formatter");
        }
        let padded = format!(" \t{text}\t ");
        assert_eq!(parse_http_date(padded.as_bytes(), now), got, "{padded:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_date_seeds_pass_the_oracle() {
        for entry in std::fs::read_dir("corpus/http_date").unwrap() {
            http_date::check(&std::fs::read(entry.unwrap().path()).unwrap());
        }
        for t in [0, 784_111_777, 951_782_400, http_date::LAST] {
            for format in 0..3u8 {
                let mut input = t.to_le_bytes().to_vec();
                input.extend_from_slice(&[format, 0, 0, 0xff]);
                input.extend_from_slice(&t.to_le_bytes());
                http_date::check(&input);
            }
        }
    }

    #[test]
    fn reference_agrees_on_seeds() {
        for entry in std::fs::read_dir("corpus/chunked").unwrap() {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            if let Some((&seed, rest)) = bytes.split_first() {
                check_chunked(seed, rest);
            }
        }
    }

    #[test]
    fn reference_basics() {
        let ok = reference_decode(b"3\r\nabc\r\n0\r\nX: y\r\n\r\nrest");
        assert_eq!(
            ok,
            ChunkedOutcome::Complete {
                data: b"abc".to_vec(),
                trailers: b"X: y\r\n".to_vec(),
                rest: b"rest".to_vec()
            }
        );
        assert_eq!(
            reference_decode(b"3\r\nab"),
            ChunkedOutcome::Incomplete {
                data: b"ab".to_vec()
            }
        );
        assert_eq!(reference_decode(b"3\nabc"), ChunkedOutcome::Error);
        check_chunked(7, b"3\r\nabc\r\n0\r\n\r\n");
    }

    #[test]
    fn trailer_filter_basics() {
        let raw = Bytes::from_static(b"Content-Length: 5\r\nX-Ok:  1 \r\nHOST: a\r\n");
        assert!(check_trailers(&raw));
        assert!(check_trailers(&Bytes::new()));
        assert!(!check_trailers(&Bytes::from_static(b"X : 1\r\n")));
        assert!(!check_trailers(&Bytes::from_static(b"X: 1\n")));
        check_chunked(3, b"1\r\na\r\n0\r\nContent-Length: 5\r\nX-Ok: 1\r\n\r\n");
    }
}

/// Asserts that every (name, value) pair is a slice of `raw` (zero-copy), free of line breaks
/// and NUL, and that names are non-empty.
pub fn check_head_slices<'a>(
    raw: &sepia_http1::Bytes,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) {
    let range = raw.as_ptr_range();
    for (name, value) in fields {
        assert!(!name.is_empty());
        for part in [name, value] {
            if !part.is_empty() {
                assert!(range.contains(&part.as_ptr()), "field not a slice of raw");
                assert!(part.len() <= raw.len());
            }
            assert!(
                !part.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0),
                "{part:?}"
            );
        }
    }
}
