//! Origin routes for the cache tests: responses a cache may store (RFC 9111 §3), with the
//! freshness, validators and Vary the tests choose by path, plus slow and dying fills. Each
//! carries `X-Serial: N` (the origin's request count when it answered), so a test can tell a
//! stored copy from a fresh origin answer by content as well as by the origin's request count.
//!
//! | path | behaviour |
//! |---|---|
//! | `/cc/VALUE/...` | 200 with `Cache-Control: VALUE` (none when VALUE is `-`), `ETag: "cc"`, `Date` (now), `X-Origin-Date` (the same), body `METHOD TARGET` |
//! | `/slow-cacheable/N/MS` | 200, max-age=60, `Content-Length: N`, head at once, then N pattern bytes spread over MS ms |
//! | `/die-cacheable/MS` | 200, max-age=60, announces Content-Length 100000, sends 1000 bytes, waits MS ms, closes |
//! | `/vary-lang/...` | 200, max-age=60, `Vary: Accept-Language`, body `lang=VALUE` (the request's Accept-Language) |
//! | `/aged/...` | 200, max-age=600, `Age: 30`, `ETag: "aged"` (a response that spent 30 s in an upstream cache) |
//! | `/fields-from-request/...` | 200 with a `Date` (now) and, for every request field `X-Set-NAME: VALUE`, a response field `NAME: VALUE` (how a test chooses Cache-Control, CDN-Cache-Control, ... per request), body `METHOD TARGET` |
//! | `/posted/...` | 200, max-age=60, `Content-Location:` the request's target (a POST's answer a later GET may reuse, RFC 9110 §9.3.3), body `METHOD TARGET` |
//! | `/posted-elsewhere/...` | the same with `Content-Location: /elsewhere` |
//! | `/keyed/SIZE/ID` | 200, max-age=3600, `X-Body-Digest` (SHA-256, hex), body `pattern::keyed_body(ID, SIZE)`: a body no other key has |
//! | `/revalidate/...` | with `If-None-Match: "v1"`: 304, `ETag: "v1"`, `X-Version: 2`, max-age=60; otherwise 200, max-age=1, `ETag: "v1"`, `X-Version: 1` |

use std::io::{self, Write};
use std::net::TcpStream;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::origin::RecordedRequest;
use crate::origin_routes::{fixed, number, split_path, write_pattern, Reply};
use crate::pattern::fill_pattern;

/// Pieces a slow body is written in (the pause between them is the route's MS / PIECES).
const SLOW_PIECES: usize = 16;

/// Waits until the wall clock is in the first tenth of a second. The origin's `Date` has
/// whole seconds, so a response sent late in a second is already nearly a second old to the
/// cache: a test that needs a `max-age=1` response (`/revalidate/...`) still fresh a moment
/// later sends its requests just after this.
pub fn just_after_a_second_starts() {
    let now = std::time::SystemTime::now();
    let into = now
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_millis();
    if into > 100 {
        std::thread::sleep(std::time::Duration::from_millis(u64::from(1_010 - into)));
    }
}

/// Body of a `/revalidate/...` 200.
pub const REVALIDATE_BODY: &[u8] = b"version one body";

/// Answers `req` if its path is one of the cache routes; `None` leaves it to the others.
/// `common` is the fields every origin response carries; `serial` the origin's request count.
pub(crate) fn respond(
    req: &RecordedRequest,
    out: &mut TcpStream,
    common: &str,
    serial: usize,
) -> Option<io::Result<Reply>> {
    let (first, rest) = split_path(req.path());
    let head_only = req.method == "HEAD";
    let common = format!("{common}X-Serial: {serial}\r\n");
    let reply = match first {
        "cc" => {
            let value = rest.split('/').next().unwrap_or_default();
            let cc = if value == "-" || value.is_empty() {
                String::new()
            } else {
                format!("Cache-Control: {value}\r\n")
            };
            let date = http_date(SystemTime::now());
            let fields = format!("{cc}ETag: \"cc\"\r\nDate: {date}\r\nX-Origin-Date: {date}\r\n");
            let text = format!("{} {}", req.method, req.target);
            fixed(out, 200, &common, &fields, text.as_bytes(), head_only)
        }
        "keyed" => {
            let mut parts = rest.split('/');
            let size = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            let id = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            let body = crate::pattern::keyed_body(id, size);
            let fields = format!(
                "Cache-Control: max-age=3600\r\nX-Body-Digest: {}\r\nDate: {}\r\n",
                crate::pattern::sha256_hex(&body),
                http_date(SystemTime::now())
            );
            fixed(out, 200, &common, &fields, &body, head_only)
        }
        "fields-from-request" => {
            let mut fields = format!("Date: {}\r\n", http_date(SystemTime::now()));
            for h in &req.headers {
                let set = h.name.len() > 6 && h.name[..6].eq_ignore_ascii_case("x-set-");
                if set {
                    fields.push_str(&format!("{}: {}\r\n", &h.name[6..], h.value));
                }
            }
            let text = format!("{} {}", req.method, req.target);
            fixed(out, 200, &common, &fields, text.as_bytes(), head_only)
        }
        "posted" | "posted-elsewhere" => {
            let location = if first == "posted" {
                req.target.as_str()
            } else {
                "/elsewhere"
            };
            let fields = format!(
                "Cache-Control: max-age=60\r\nContent-Location: {location}\r\nDate: {}\r\n",
                http_date(SystemTime::now())
            );
            let text = format!("{} {}", req.method, req.target);
            fixed(out, 200, &common, &fields, text.as_bytes(), head_only)
        }
        "slow-cacheable" => {
            let n = number(rest);
            let ms = number(rest.split_once('/').map_or("", |(_, ms)| ms));
            slow_body(out, &common, n, Duration::from_millis(ms as u64), head_only)
        }
        "die-cacheable" => die_mid_body(out, &common, Duration::from_millis(number(rest) as u64)),
        "vary-lang" => {
            let lang = req.header("accept-language").unwrap_or("none");
            let text = format!("lang={lang}");
            let fields = "Cache-Control: max-age=60\r\nVary: Accept-Language\r\n";
            fixed(out, 200, &common, fields, text.as_bytes(), head_only)
        }
        "aged" => {
            let fields = "Cache-Control: max-age=600\r\nAge: 30\r\nETag: \"aged\"\r\n";
            fixed(out, 200, &common, fields, b"aged body", head_only)
        }
        "revalidate" => {
            let matches = req
                .headers_named("if-none-match")
                .iter()
                .flat_map(|v| v.split(','))
                .any(|tag| tag.trim() == "\"v1\"");
            if matches {
                let fields = "Cache-Control: max-age=60\r\nETag: \"v1\"\r\nX-Version: 2\r\n";
                fixed(out, 304, &common, fields, b"", true)
            } else {
                let fields = "Cache-Control: max-age=1\r\nETag: \"v1\"\r\nX-Version: 1\r\n";
                fixed(out, 200, &common, fields, REVALIDATE_BODY, head_only)
            }
        }
        _ => return None,
    };
    Some(reply)
}

/// `/slow-cacheable/N/MS`: the head at once, then the body in [`SLOW_PIECES`] timed writes, so
/// that many clients can arrive while the cache is still filling.
fn slow_body(
    out: &mut TcpStream,
    common: &str,
    n: usize,
    over: Duration,
    head_only: bool,
) -> io::Result<Reply> {
    let head = format!(
        "HTTP/1.1 200 OK\r\n{common}Cache-Control: max-age=60\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {n}\r\n\r\n"
    );
    out.write_all(head.as_bytes())?;
    if head_only {
        return Ok(Reply::KeepAlive);
    }
    let piece = n.div_ceil(SLOW_PIECES).max(1);
    let pause = over / SLOW_PIECES as u32;
    let mut buf = vec![0u8; piece];
    let mut offset = 0;
    while offset < n {
        std::thread::sleep(pause);
        let len = piece.min(n - offset);
        fill_pattern(offset, &mut buf[..len]);
        out.write_all(&buf[..len])?;
        offset += len;
    }
    Ok(Reply::KeepAlive)
}

/// `/die-cacheable/MS`: a storable response whose body stops short of its Content-Length
/// (RFC 9112 §8: an incomplete message), after a pause that lets other clients collapse onto
/// the fill.
fn die_mid_body(out: &mut TcpStream, common: &str, pause: Duration) -> io::Result<Reply> {
    let head = format!(
        "HTTP/1.1 200 OK\r\n{common}Cache-Control: max-age=60\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n"
    );
    out.write_all(head.as_bytes())?;
    write_pattern(out, 1000, None)?;
    out.flush()?;
    std::thread::sleep(pause);
    Ok(Reply::Close)
}

/// An IMF-fixdate (RFC 9110 §5.6.7), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
pub(crate) fn http_date(at: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = secs / 86_400;
    let (year, month, day) = civil_from_days(days);
    let in_day = secs % 86_400;
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[month as usize - 1],
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60
    )
}

/// Year, month (1-12) and day (1-31) of the day `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for non-negative inputs).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates_of_known_instants() {
        let cases = [
            (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
            (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT"),
            (951_782_400, "Tue, 29 Feb 2000 00:00:00 GMT"),
            (1_735_689_599, "Tue, 31 Dec 2024 23:59:59 GMT"),
        ];
        for (secs, want) in cases {
            assert_eq!(
                http_date(UNIX_EPOCH + Duration::from_secs(secs)),
                want,
                "{secs}"
            );
        }
    }
}
