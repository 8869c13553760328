//! Access-log line formats. These run on the writer task, never on the request path: numbers
//! through `itoa`, the date through a string cached per second, no `format!`, nothing
//! allocated once the output buffer has grown.

use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::json::json_line;
use crate::record::AccessRecord;

/// Which line format the writer produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Squid's native `logformat squid`.
    Squid,
    /// Apache/NCSA combined, as Squid's `logformat combined` minus its trailing `%Ss:%Sh`.
    Combined,
    /// One JSON object per line (see [`format_json`]).
    Json,
}

/// Appends one Squid native line (with `\n`), byte-compatible with Squid 5.7's
/// `%ts.%03tu %6tr %>a %Ss/%03>Hs %<st %rm %ru %[un %Sh/%<a %mt`.
pub fn format_squid(rec: &AccessRecord, out: &mut Vec<u8>) {
    LineFormatter::new(LogFormat::Squid).format(rec, out);
}

/// Appends one combined line (with `\n`):
/// `%>a - %[un [%tl] "%rm %ru HTTP/%rv" %>Hs %<st "%{Referer}>h" "%{User-Agent}>h"`,
/// the time in UTC, quoted fields escaped as Apache's `ap_escape_logitem` does.
pub fn format_combined(rec: &AccessRecord, out: &mut Vec<u8>) {
    LineFormatter::new(LogFormat::Combined).format(rec, out);
}

/// Appends one JSON object and `\n` (JSON Lines): the Squid line's fields plus the HTTP
/// version, Referer and User-Agent. See `json.rs` for the keys and the escaping.
pub fn format_json(rec: &AccessRecord, out: &mut Vec<u8>) {
    LineFormatter::new(LogFormat::Json).format(rec, out);
}

/// Formats records one after another into a caller's buffer, keeping the combined-format date
/// of the last second so that consecutive lines allocate nothing. The writer task owns one.
#[derive(Debug)]
pub struct LineFormatter {
    format: LogFormat,
    clock: DateCache,
}

impl LineFormatter {
    /// A formatter for `format` with an empty date cache.
    pub fn new(format: LogFormat) -> LineFormatter {
        LineFormatter {
            format,
            clock: DateCache::default(),
        }
    }

    /// Appends one line for `rec`, including its `\n`, to `out`.
    pub fn format(&mut self, rec: &AccessRecord, out: &mut Vec<u8>) {
        match self.format {
            LogFormat::Squid => squid_line(rec, out),
            LogFormat::Combined => combined_line(rec, &mut self.clock, out),
            LogFormat::Json => json_line(rec, out),
        }
    }
}

fn squid_line(rec: &AccessRecord, out: &mut Vec<u8>) {
    // `%ts.%03tu`: Squid stamps a line with the time it is logged, when the transaction ends.
    push_logged_at(out, rec);
    let mut num = itoa::Buffer::new();
    out.push(b' ');
    // `%6tr`: milliseconds, right-aligned in 6 columns (printf "%6s"), wider values whole.
    push_padded(out, rec.elapsed.as_millis(), 6, b' ');
    out.push(b' ');
    push_ip(out, rec.client.ip());
    out.push(b' ');
    out.extend_from_slice(rec.result.as_str().as_bytes());
    out.push(b'/');
    push_padded(out, rec.status.into(), 3, b'0');
    out.push(b' ');
    out.extend_from_slice(num.format(rec.bytes_sent).as_bytes());
    out.push(b' ');
    push_unquoted_or_dash(out, Some(&rec.method));
    out.push(b' ');
    push_url(out, rec);
    out.push(b' ');
    push_squid_user(out, rec.user.as_deref());
    out.push(b' ');
    out.extend_from_slice(rec.hierarchy.as_str().as_bytes());
    out.push(b'/');
    match rec.peer {
        Some(ip) => push_ip(out, ip),
        None => out.push(b'-'),
    }
    out.push(b' ');
    push_unquoted_or_dash(out, media_type(rec.content_type.as_deref()));
    out.push(b'\n');
}

fn combined_line(rec: &AccessRecord, clock: &mut DateCache, out: &mut Vec<u8>) {
    push_ip(out, rec.client.ip());
    out.extend_from_slice(b" - ");
    push_apache_user(out, rec.user.as_deref());
    out.extend_from_slice(b" [");
    out.extend_from_slice(clock.combined(rec.start));
    out.extend_from_slice(b"] \"");
    push_quoted(out, &rec.method);
    out.push(b' ');
    push_url_with(out, rec, push_quoted);
    out.extend_from_slice(b" HTTP/");
    out.extend_from_slice(itoa::Buffer::new().format(rec.version_major).as_bytes());
    out.push(b'.');
    out.extend_from_slice(itoa::Buffer::new().format(rec.version_minor).as_bytes());
    out.extend_from_slice(b"\" ");
    push_padded(out, rec.status.into(), 3, b'0');
    out.push(b' ');
    out.extend_from_slice(itoa::Buffer::new().format(rec.bytes_sent).as_bytes());
    out.extend_from_slice(b" \"");
    push_quoted(out, rec.referer.as_deref().unwrap_or(b"-"));
    out.extend_from_slice(b"\" \"");
    push_quoted(out, rec.user_agent.as_deref().unwrap_or(b"-"));
    out.extend_from_slice(b"\"\n");
}

/// Time since the epoch; a clock before 1970 logs as 0 rather than failing.
fn since_epoch(time: SystemTime) -> Duration {
    time.duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// When the transaction ended (Squid's `%ts`), as time since the epoch.
pub(crate) fn logged_at(rec: &AccessRecord) -> Duration {
    since_epoch(rec.start).saturating_add(rec.elapsed)
}

/// Squid's `%mt`: the media type of the Content-Type sent, without parameters. Squid keeps
/// `content_type` as the field value up to the first `;`, tab or space (`HttpReply::
/// hdrCacheInit`), so `text/html; charset=utf-8` logs as `text/html`.
pub(crate) fn media_type(content_type: Option<&[u8]>) -> Option<&[u8]> {
    let value = content_type?;
    let end = value
        .iter()
        .position(|b| matches!(b, b';' | b'\t' | b' '))
        .unwrap_or(value.len());
    Some(&value[..end])
}

/// `value` right-aligned in `width` with `fill` (Squid's `%6tr`, `%03tu`); wider values are
/// written whole.
pub(crate) fn push_padded(out: &mut Vec<u8>, value: u128, width: usize, fill: u8) {
    let mut num = itoa::Buffer::new();
    let digits = num.format(value).as_bytes();
    out.resize(out.len() + width.saturating_sub(digits.len()), fill);
    out.extend_from_slice(digits);
}

/// An IP as Squid writes `%>a`: IPv4-mapped IPv6 (a dual-stack socket's view of an IPv4
/// client) as plain IPv4, IPv6 without brackets.
pub(crate) fn push_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let mut num = itoa::Buffer::new();
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                out.extend_from_slice(num.format(octet).as_bytes());
            }
        }
        IpAddr::V6(v6) => {
            use std::io::Write;
            // Writing into a Vec cannot fail.
            let _ = write!(out, "{v6}");
        }
    }
}

/// `%ru`: the target as received, prefixed with `http://host` when it is origin-form.
fn push_url(out: &mut Vec<u8>, rec: &AccessRecord) {
    if rec.target.is_empty() {
        out.push(b'-');
        return;
    }
    push_url_with(out, rec, push_unquoted);
}

/// The logged URL through a format's `escape`: the target as received, with `http://host`
/// (`https://host` over TLS)
/// in front when it is origin-form and the Host is known (reverse mode), as Squid logs
/// accelerated requests.
pub(crate) fn push_url_with(
    out: &mut Vec<u8>,
    rec: &AccessRecord,
    escape: fn(&mut Vec<u8>, &[u8]),
) {
    if let Some(host) = rec
        .scheme_host
        .as_ref()
        .filter(|_| rec.target.starts_with(b"/"))
    {
        out.extend_from_slice(if rec.tls { b"https://" } else { b"http://" });
        escape(out, host);
    }
    escape(out, &rec.target);
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";
pub(crate) const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";

/// `seconds.milliseconds` of when the record is logged (Squid's `%ts.%03tu`; JSON's `ts`).
pub(crate) fn push_logged_at(out: &mut Vec<u8>, rec: &AccessRecord) {
    let logged = logged_at(rec);
    out.extend_from_slice(itoa::Buffer::new().format(logged.as_secs()).as_bytes());
    out.push(b'.');
    push_padded(out, logged.subsec_millis().into(), 3, b'0');
}

/// A byte that goes into a quoted field (Apache's log quoting, a JSON string) unchanged.
pub(crate) fn is_plain_quoted(b: &u8) -> bool {
    (b' '..0x7f).contains(b) && *b != b'"' && *b != b'\\'
}

/// A space-separated field: kept as received except that spaces and control characters
/// become `%XX`, so one record stays one line with a fixed number of fields.
fn push_unquoted(out: &mut Vec<u8>, field: &[u8]) {
    let needs_escape = |b: &u8| *b <= b' ' || *b == 0x7f;
    if !field.iter().any(needs_escape) {
        out.extend_from_slice(field);
        return;
    }
    for &b in field {
        if needs_escape(&b) {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        } else {
            out.push(b);
        }
    }
}

fn push_unquoted_or_dash(out: &mut Vec<u8>, field: Option<&[u8]>) {
    match field {
        Some(field) if !field.is_empty() => push_unquoted(out, field),
        _ => out.push(b'-'),
    }
}

/// Squid's `%[un` (`QuoteMimeBlob`): CR and LF as `\r` `\n`, a backslash doubled, and
/// control bytes, bytes from 0x7F, `%`, `[` and `]` as `%xx`. Squid leaves a space as it is,
/// which splits the field; Sepia writes it `%20` so a line always has ten fields.
fn push_squid_user(out: &mut Vec<u8>, user: Option<&[u8]>) {
    let Some(user) = user.filter(|u| !u.is_empty()) else {
        out.push(b'-');
        return;
    };
    for &b in user {
        match b {
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0..=0x20 | 0x7f.. | b'%' | b'[' | b']' => out.extend_from_slice(&[
                b'%',
                HEX_LOWER[usize::from(b >> 4)],
                HEX_LOWER[usize::from(b & 15)],
            ]),
            _ => out.push(b),
        }
    }
}

/// Apache's `%u`: `-` without a user, `""` for an empty one, else escaped like the quoted
/// fields. Apache leaves a space as it is; Sepia writes it `\x20` so the field stays one
/// token for the tools that split on spaces.
fn push_apache_user(out: &mut Vec<u8>, user: Option<&[u8]>) {
    match user {
        None => out.push(b'-'),
        Some([]) => out.extend_from_slice(b"\"\""),
        Some(user) => {
            for (i, part) in user.split(|b| *b == b' ').enumerate() {
                if i > 0 {
                    out.extend_from_slice(b"\\x20");
                }
                push_quoted(out, part);
            }
        }
    }
}

/// Inside a `"…"` field, Apache's `ap_escape_logitem`: `"` and `\` backslash-escaped,
/// backspace, LF, CR, tab and vertical tab in C notation, and any other byte that is not
/// printable ASCII (controls, DEL, and every byte from 0x80) as `\xhh`, so the quotes always
/// delimit the field and the line is plain ASCII.
fn push_quoted(out: &mut Vec<u8>, field: &[u8]) {
    if field.iter().all(is_plain_quoted) {
        out.extend_from_slice(field);
        return;
    }
    for &b in field {
        match b {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x0b => out.extend_from_slice(b"\\v"),
            _ if is_plain_quoted(&b) => out.push(b),
            _ => out.extend_from_slice(&[
                b'\\',
                b'x',
                HEX_LOWER[usize::from(b >> 4)],
                HEX_LOWER[usize::from(b & 15)],
            ]),
        }
    }
}

/// The combined format's `22/Nov/2026:07:34:00 +0000`, rebuilt only when the second changes.
#[derive(Debug)]
struct DateCache {
    second: Option<u64>,
    text: [u8; 26],
}

impl Default for DateCache {
    fn default() -> Self {
        DateCache {
            second: None,
            text: *b"01/Jan/1970:00:00:00 +0000",
        }
    }
}

/// httpdate formats years up to 9999 only (and panics beyond); clamp to its last second.
const LAST_FORMATTABLE_SECOND: u64 = 253_402_300_799;

impl DateCache {
    fn combined(&mut self, time: SystemTime) -> &[u8] {
        let second = since_epoch(time).as_secs().min(LAST_FORMATTABLE_SECOND);
        if self.second != Some(second) {
            self.second = Some(second);
            // IMF-fixdate (RFC 9110 §5.6.7) has fixed columns:
            // "Sun, 22 Nov 2026 07:34:00 GMT" -> day 5..7, month 8..11, year 12..16, time 17..25.
            let imf = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(second));
            let imf = imf.as_bytes();
            let text = &mut self.text;
            text[0..2].copy_from_slice(&imf[5..7]);
            text[3..6].copy_from_slice(&imf[8..11]);
            text[7..11].copy_from_slice(&imf[12..16]);
            text[12..20].copy_from_slice(&imf[17..25]);
        }
        &self.text
    }
}

#[cfg(test)]
#[path = "format_tests.rs"]
pub(crate) mod tests;
