//! Origin routes that answer ranges (RFC 9110 §14) of a representation of pattern bytes, for
//! the tests of the pieces a cache keeps and completes (RFC 9111 §3.3–3.4). Each response
//! carries `X-Serial: N` (the origin's request count when it answered).
//!
//! | path | behaviour |
//! |---|---|
//! | `/ranged/N/...` | N pattern bytes, max-age=60, `ETag: "ranged-N"` (strong), `Accept-Ranges: bytes`; one `Range` (`a-b`, `a-`, `-s`) answered 206 with `Content-Range`, unless an `If-Range` names another tag; anything else 200 |
//! | `/ranged-weak/N/...` | the same with the weak `ETag: W/"ranged-N"` (an `If-Range` never matches it: RFC 9110 §13.1.5) |
//! | `/ranged-changing/N/...` | the same with `ETag: "ranged-N-SERIAL"`: a new representation on every request |
//! | `/ranged-bare/N/...` | like `/ranged/`, with `Content-Type: application/x-sepia-test` and `X-Representation: r1`, both left out of a 206 that answers `If-Range` (RFC 9110 §15.3.7 allows it) |
//! | `/ranged-dying/N/...` | like `/ranged/`, but a 206 that answers `If-Range` sends half its content and closes |

use std::io::{self, Write};
use std::net::TcpStream;

use crate::origin::RecordedRequest;
use crate::origin_routes::{number, split_path, Reply};
use crate::pattern::fill_pattern;

/// Answers `req` if its path is one of the range routes; `None` leaves it to the others.
pub(crate) fn respond(
    req: &RecordedRequest,
    out: &mut TcpStream,
    common: &str,
    serial: usize,
) -> Option<io::Result<Reply>> {
    let (first, rest) = split_path(req.path());
    let n = number(rest);
    let (etag, weak) = match first {
        "ranged" => (format!("\"ranged-{n}\""), false),
        "ranged-weak" => (format!("W/\"ranged-{n}\""), true),
        "ranged-changing" => (format!("\"ranged-{n}-{serial}\""), false),
        "ranged-bare" | "ranged-dying" => (format!("\"ranged-{n}\""), false),
        _ => return None,
    };
    let if_range_ok = req
        .header("if-range")
        .is_none_or(|v| !weak && v.trim() == etag);
    let range = req
        .header("range")
        .filter(|_| if_range_ok)
        .and_then(|v| byte_range(v, n));
    let answers_if_range = range.is_some() && req.header("if-range").is_some();
    let representation = match first {
        "ranged-bare" if answers_if_range => "",
        "ranged-bare" => "Content-Type: application/x-sepia-test\r\nX-Representation: r1\r\n",
        _ => "Content-Type: application/octet-stream\r\n",
    };
    let fields = format!(
        "{common}X-Serial: {serial}\r\nCache-Control: max-age=60\r\nETag: {etag}\r\n\
         Accept-Ranges: bytes\r\n{representation}"
    );
    let (status, start, end, extra) = match range {
        Some((a, b)) => (
            "206 Partial Content",
            a,
            b + 1,
            format!("Content-Range: bytes {a}-{b}/{n}\r\n"),
        ),
        None => ("200 OK", 0, n, String::new()),
    };
    let mut message = format!(
        "HTTP/1.1 {status}\r\n{fields}{extra}Content-Length: {}\r\n\r\n",
        end - start
    )
    .into_bytes();
    let dies = first == "ranged-dying" && answers_if_range;
    let sent = if dies { (end - start) / 2 } else { end - start };
    if req.method != "HEAD" {
        let at = message.len();
        message.resize(at + sent, 0);
        fill_pattern(start, &mut message[at..]);
    }
    let reply = if dies { Reply::Close } else { Reply::KeepAlive };
    Some(out.write_all(&message).map(|()| reply))
}

/// The one satisfiable range of a `Range` value over `n` bytes: `first`, `last` (inclusive).
fn byte_range(value: &str, n: usize) -> Option<(usize, usize)> {
    let spec = value.trim().strip_prefix("bytes=")?;
    if spec.contains(',') || n == 0 {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let (first, last) = match (a.trim(), b.trim()) {
        ("", suffix) => (n.saturating_sub(suffix.parse().ok()?), n - 1),
        (a, "") => (a.parse().ok()?, n - 1),
        (a, b) => (a.parse().ok()?, b.parse::<usize>().ok()?.min(n - 1)),
    };
    (first <= last && first < n).then_some((first, last))
}

#[cfg(test)]
mod tests {
    use super::byte_range;

    #[test]
    fn ranges_of_ten_bytes() {
        assert_eq!(byte_range("bytes=0-4", 10), Some((0, 4)));
        assert_eq!(byte_range("bytes=5-", 10), Some((5, 9)));
        assert_eq!(byte_range("bytes=-3", 10), Some((7, 9)));
        assert_eq!(byte_range("bytes=8-20", 10), Some((8, 9)));
        assert_eq!(byte_range("bytes=10-", 10), None);
        assert_eq!(byte_range("bytes=0-1,3-4", 10), None);
    }
}
