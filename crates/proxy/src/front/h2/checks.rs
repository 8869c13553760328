//! What an HTTP/2 request must not carry, because it would mean something else once it is
//! forwarded in HTTP/1.1 (the h2→h1 downgrade smuggling class): such a request is malformed
//! (RFC 9113 §8.1.1), answered 400 and never forwarded.
//!
//! The h2 crate already resets the streams of some malformed requests before they reach
//! Sepia: connection-specific fields, `te` other than `trailers`, upper-case names and names
//! that are not tokens, values with CR, LF or NUL, pseudo-fields repeated, after regular
//! fields, unknown or missing, `:path` in CONNECT, a `content-length` that differs between
//! lines or from the DATA received. Those checks are repeated here where they cost a byte
//! scan (a future h2 release relaxing one must not open a hole); the rest is Sepia's own:
//! whitespace around values, `:path` forms, `:authority` with userinfo or disagreeing with
//! Host, more than one Host.

use http::request::Parts;
use http::Method;

/// Fields that say something about the connection, which HTTP/2 does not carry (RFC 9113
/// §8.2.2): a request with one is malformed, and a response head translated from HTTP/1.1
/// drops them.
pub fn is_connection_specific(name: &[u8]) -> bool {
    const NAMES: [&[u8]; 5] = [
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"upgrade",
    ];
    NAMES.iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// Why the request must be refused, or `None` when it may go on.
pub fn refusal(parts: &Parts) -> Option<&'static str> {
    for (name, value) in &parts.headers {
        if let Some(why) = field_refusal(name.as_str().as_bytes(), value.as_bytes()) {
            return Some(why);
        }
    }
    pseudo_refusal(parts)
        .or_else(|| host_refusal(parts))
        .or_else(|| length_refusal(parts))
}

/// RFC 9113 §8.2.1, §8.2.2: lower-case token names, no control bytes, no whitespace around
/// a value, no connection-specific field, `te` only as `trailers`.
fn field_refusal(name: &[u8], value: &[u8]) -> Option<&'static str> {
    if is_connection_specific(name) {
        return Some("a connection-specific header field (RFC 9113 §8.2.2)");
    }
    if name == b"te" && value != b"trailers" {
        return Some("TE other than \"trailers\" (RFC 9113 §8.2.2)");
    }
    if name.is_empty() || !name.iter().all(|&b| is_lower_tchar(b)) {
        return Some("a header field name that is not a lower-case token (RFC 9113 §8.2.1)");
    }
    if has_control(value) {
        return Some("CR, LF or NUL in a header field value (RFC 9113 §8.2.1)");
    }
    let edge = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    if edge(value.first()) || edge(value.last()) {
        return Some("whitespace around a header field value (RFC 9113 §8.2.1)");
    }
    None
}

/// RFC 9113 §8.3.1, §8.5: the forms `:path` and `:authority` may take.
fn pseudo_refusal(parts: &Parts) -> Option<&'static str> {
    let authority = parts.uri.authority().map(|a| a.as_str().as_bytes());
    if authority.is_some_and(|a| a.contains(&b'@') || has_control(a)) {
        return Some("userinfo or control bytes in :authority (RFC 9113 §8.3.1)");
    }
    if parts.method == Method::CONNECT {
        return match authority {
            None => Some("CONNECT without :authority (RFC 9113 §8.5)"),
            Some(_) => None,
        };
    }
    let path = parts
        .uri
        .path_and_query()
        .map_or(&b""[..], |p| p.as_str().as_bytes());
    let asterisk = path == b"*" && parts.method == Method::OPTIONS;
    if !(path.starts_with(b"/") || asterisk) || has_control(path) {
        return Some(":path is not origin-form (RFC 9113 §8.3.1)");
    }
    None
}

/// RFC 9113 §8.3.1: Host and `:authority`, when both are sent, name the same thing; a
/// second Host would let the origin pick another one than Sepia did.
fn host_refusal(parts: &Parts) -> Option<&'static str> {
    let mut hosts = parts.headers.get_all(http::header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Some("more than one Host field");
    }
    match (parts.uri.authority(), host) {
        (Some(a), Some(h)) if !a.as_str().as_bytes().eq_ignore_ascii_case(h.as_bytes()) => {
            Some("Host differs from :authority (RFC 9113 §8.3.1)")
        }
        _ => None,
    }
}

/// RFC 9110 §8.6: every Content-Length line states the same decimal number.
fn length_refusal(parts: &Parts) -> Option<&'static str> {
    let mut first = None;
    for value in parts.headers.get_all(http::header::CONTENT_LENGTH) {
        let Some(n) = parse_length(value.as_bytes()) else {
            return Some("an invalid Content-Length");
        };
        if first.is_some_and(|f| f != n) {
            return Some("Content-Length lines that differ");
        }
        first = Some(n);
    }
    None
}

/// A Content-Length value: decimal digits only, without overflow.
pub fn parse_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    value.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

fn has_control(bytes: &[u8]) -> bool {
    bytes.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0))
}

/// A token character (RFC 9110 §5.6.2) that is not an upper-case letter.
fn is_lower_tchar(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, uri: &str, fields: &[(&str, &str)]) -> Parts {
        let mut b = http::Request::builder().method(method).uri(uri);
        for (n, v) in fields {
            b = b.header(*n, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn ordinary_requests_pass() {
        let ok = [
            parts("GET", "http://a.test/x?y", &[("accept", "*/*")]),
            parts("GET", "http://a.test/", &[("host", "A.test")]),
            parts("POST", "http://a.test/", &[("content-length", "5")]),
            parts("OPTIONS", "http://a.test/", &[]),
            parts("CONNECT", "a.test:443", &[]),
            parts("GET", "http://a.test/", &[("te", "trailers")]),
        ];
        for p in &ok {
            assert_eq!(refusal(p), None, "{p:?}");
        }
    }

    #[test]
    fn downgrade_dangers_are_refused() {
        let bad = [
            parts("GET", "http://a.test/", &[("transfer-encoding", "chunked")]),
            parts("GET", "http://a.test/", &[("connection", "close")]),
            parts("GET", "http://a.test/", &[("keep-alive", "5")]),
            parts("GET", "http://a.test/", &[("proxy-connection", "x")]),
            parts("GET", "http://a.test/", &[("upgrade", "websocket")]),
            parts("GET", "http://a.test/", &[("te", "gzip")]),
            parts("GET", "http://a.test/", &[("x-a", " padded")]),
            parts("GET", "http://a.test/", &[("x-a", "padded\t")]),
            parts("GET", "http://a.test/", &[("host", "b.test")]),
            parts(
                "GET",
                "http://a.test/",
                &[("host", "a.test"), ("host", "a.test")],
            ),
            parts(
                "POST",
                "http://a.test/",
                &[("content-length", "5"), ("content-length", "6")],
            ),
            parts("POST", "http://a.test/", &[("content-length", "+5")]),
            parts("GET", "http://u@a.test/", &[]),
        ];
        for p in &bad {
            assert!(refusal(p).is_some(), "{p:?} passed");
        }
    }

    #[test]
    fn field_bytes_the_h2_crate_also_refuses() {
        assert!(field_refusal(b"X-Upper", b"1").is_some());
        assert!(field_refusal(b"x a", b"1").is_some());
        assert!(field_refusal(b"x-a", b"1\r\nx-b: 2").is_some());
        assert!(field_refusal(b"x-a", b"1\0").is_some());
        assert!(field_refusal(b"", b"1").is_some());
        assert_eq!(field_refusal(b"x-a", b"a b"), None);
    }

    #[test]
    fn lengths() {
        assert_eq!(parse_length(b"0"), Some(0));
        assert_eq!(parse_length(b"18446744073709551615"), None);
        assert_eq!(
            parse_length(b"1844674407370955161"),
            Some(1_844_674_407_370_955_161)
        );
        assert_eq!(parse_length(b"1 "), None);
        assert_eq!(parse_length(b""), None);
    }
}
