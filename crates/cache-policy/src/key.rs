//! The primary cache key: the normalised target URI (RFC 9111 §2).
//!
//! Two request targets that RFC 9110 §4.2.3 and RFC 3986 §6.2.2 / §6.2.3 call
//! equivalent produce the same key: scheme and host are case-insensitive, the
//! default port is the same as no port, an empty path is `/`, and
//! percent-encoded unreserved characters are the characters themselves. The
//! query is kept byte for byte: applications give it meaning we cannot know.
//!
//! The key is written into a caller-owned buffer so the hot path reuses one
//! allocation across requests.

/// Writes the primary cache key `scheme://host[:port]/path[?query]` into `out`
/// (cleared first).
///
/// `target` is the request-target as received: origin-form (`/a?b`, with
/// `scheme` and `authority` from the connection and `Host`) or absolute-form
/// (`http://h/a?b`, as a forward proxy receives it; then its own scheme and
/// authority win, RFC 9112 §3.2.2). Userinfo is dropped and a fragment, which
/// a request-target cannot carry, is ignored.
pub fn primary_key(scheme: &[u8], authority: &[u8], target: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let (scheme, authority, path_and_query) = match split_absolute(target) {
        Some(parts) => parts,
        None => (scheme, authority, target),
    };
    write_origin(scheme, authority, out);
    write_path_and_query(path_and_query, out);
}

/// The `scheme://authority` prefix of a key written by [`primary_key`].
pub fn key_origin(key: &[u8]) -> &[u8] {
    let after_scheme = memchr::memmem::find(key, b"://").map_or(0, |i| i + 3);
    let end = key[after_scheme..]
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .map_or(key.len(), |i| after_scheme + i);
    &key[..end]
}

/// Splits an absolute-form target into scheme, authority and the rest.
pub(crate) fn split_absolute(target: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let colon = scheme_end(target)?;
    let rest = target[colon + 1..].strip_prefix(b"//")?;
    let authority_end = rest
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    Some((
        &target[..colon],
        &rest[..authority_end],
        &rest[authority_end..],
    ))
}

/// Index of the `:` ending a URI scheme (RFC 3986 §3.1), if `uri` starts with
/// one.
pub(crate) fn scheme_end(uri: &[u8]) -> Option<usize> {
    let first = *uri.first()?;
    if !first.is_ascii_alphabetic() {
        return None;
    }
    let end = uri
        .iter()
        .position(|&b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))?;
    (uri[end] == b':').then_some(end)
}

/// Writes `scheme://host[:port]` normalised.
pub(crate) fn write_origin(scheme: &[u8], authority: &[u8], out: &mut Vec<u8>) {
    extend_lowercase(scheme, out);
    out.extend_from_slice(b"://");
    // Userinfo is not part of the origin (RFC 9110 §4.2.4).
    let host_port = match authority.iter().rposition(|&b| b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    let (host, port) = split_port(host_port);
    extend_lowercase(host, out);
    if let Some(port) = port {
        if !port.is_empty() && !is_default_port(scheme, port) {
            out.push(b':');
            out.extend_from_slice(port);
        }
    }
}

/// Appends `bytes` lowercased (one copy, then an in-place pass, which is
/// faster than pushing byte by byte).
fn extend_lowercase(bytes: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(bytes);
    out[start..].make_ascii_lowercase();
}

/// Splits `host[:port]`, leaving the colons of an IPv6 literal alone.
fn split_port(host_port: &[u8]) -> (&[u8], Option<&[u8]>) {
    let search_from = if host_port.first() == Some(&b'[') {
        host_port.iter().position(|&b| b == b']').unwrap_or(0)
    } else {
        0
    };
    match host_port[search_from..].iter().rposition(|&b| b == b':') {
        Some(i) => {
            let colon = search_from + i;
            (&host_port[..colon], Some(&host_port[colon + 1..]))
        }
        None => (host_port, None),
    }
}

/// Whether `port` is the default for `scheme` (80 for http, 443 for https),
/// comparing numerically so `080` counts too.
fn is_default_port(scheme: &[u8], port: &[u8]) -> bool {
    let default = if scheme.eq_ignore_ascii_case(b"http") {
        80
    } else if scheme.eq_ignore_ascii_case(b"https") {
        443
    } else {
        return false;
    };
    port.len() <= 5
        && port.iter().all(u8::is_ascii_digit)
        && port.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0')) == default
}

/// Writes the path (empty → `/`, percent-encoding normalised) and the query
/// unchanged; a fragment is dropped.
pub(crate) fn write_path_and_query(path_and_query: &[u8], out: &mut Vec<u8>) {
    // Request targets are short: plain scans beat memchr's setup cost here.
    let without_fragment = match path_and_query.iter().position(|&b| b == b'#') {
        Some(hash) => &path_and_query[..hash],
        None => path_and_query,
    };
    let (path, query) = match without_fragment.iter().position(|&b| b == b'?') {
        Some(q) => (&without_fragment[..q], Some(&without_fragment[q..])),
        None => (without_fragment, None),
    };
    if path.is_empty() {
        out.push(b'/');
    } else {
        normalise_percent_encoding(path, out);
    }
    if let Some(query) = query {
        out.extend_from_slice(query);
    }
}

/// Decodes percent-encoded unreserved characters and uppercases the hex
/// digits of the rest (RFC 3986 §6.2.2.1, §6.2.2.2). Malformed escapes are
/// copied as they are.
fn normalise_percent_encoding(input: &[u8], out: &mut Vec<u8>) {
    let mut rest = input;
    while let Some(pos) = rest.iter().position(|&b| b == b'%') {
        out.extend_from_slice(&rest[..pos]);
        let escape = &rest[pos..];
        match (
            escape.get(1).copied().and_then(hex_value),
            escape.get(2).copied().and_then(hex_value),
        ) {
            (Some(hi), Some(lo)) => {
                let decoded = hi << 4 | lo;
                if is_unreserved(decoded) {
                    out.push(decoded);
                } else {
                    out.extend_from_slice(&[
                        b'%',
                        HEX_UPPER[usize::from(hi)],
                        HEX_UPPER[usize::from(lo)],
                    ]);
                }
                rest = &escape[3..];
            }
            _ => {
                out.push(b'%');
                rest = &escape[1..];
            }
        }
    }
    out.extend_from_slice(rest);
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `unreserved` of RFC 3986 §2.3.
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(scheme: &str, authority: &str, target: &str) -> String {
        let mut out = Vec::new();
        primary_key(
            scheme.as_bytes(),
            authority.as_bytes(),
            target.as_bytes(),
            &mut out,
        );
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn equivalent_targets_share_a_key() {
        let cases: &[(&str, &str, &str, &str)] = &[
            ("http", "example.com", "/a", "http://example.com/a"),
            ("HTTP", "Example.COM:80", "/a", "http://example.com/a"),
            ("http", "example.com:080", "/a", "http://example.com/a"),
            ("https", "example.com:443", "/a", "https://example.com/a"),
            ("https", "example.com:80", "/a", "https://example.com:80/a"),
            (
                "http",
                "example.com:8080",
                "/a",
                "http://example.com:8080/a",
            ),
            ("http", "example.com:", "/a", "http://example.com/a"),
            ("http", "example.com", "", "http://example.com/"),
            ("http", "example.com", "?q=1", "http://example.com/?q=1"),
            (
                "http",
                "example.com",
                "/%7esmith/%7E",
                "http://example.com/~smith/~",
            ),
            (
                "http",
                "example.com",
                "/%41%2d%5f%2e",
                "http://example.com/A-_.",
            ),
            (
                "http",
                "example.com",
                "/a%2fb%3a%20",
                "http://example.com/a%2Fb%3A%20",
            ),
            (
                "http",
                "example.com",
                "/100%/%zz%4",
                "http://example.com/100%/%zz%4",
            ),
            (
                "http",
                "example.com",
                "/p?Q=%7e&B=a",
                "http://example.com/p?Q=%7e&B=a",
            ),
            ("http", "user:pw@Example.com", "/", "http://example.com/"),
            ("http", "[::1]:80", "/", "http://[::1]/"),
            ("http", "[::1]:81", "/", "http://[::1]:81/"),
            ("http", "[::1]", "/", "http://[::1]/"),
            // Absolute-form wins over Host.
            (
                "http",
                "ignored",
                "HTTP://Other.example:80/x?y",
                "http://other.example/x?y",
            ),
            ("http", "ignored", "https://o.example", "https://o.example/"),
            ("http", "h", "/a#frag", "http://h/a"),
        ];
        for (scheme, authority, target, expected) in cases {
            assert_eq!(
                key(scheme, authority, target),
                *expected,
                "{scheme} {authority} {target}"
            );
        }
    }

    #[test]
    fn different_queries_differ() {
        assert_ne!(key("http", "h", "/a?test=1"), key("http", "h", "/a?test=2"));
        assert_ne!(key("http", "h", "/a"), key("http", "h", "/a?"));
    }

    #[test]
    fn buffer_is_reused() {
        let mut out = Vec::with_capacity(64);
        primary_key(b"http", b"example.com", b"/a/long/path", &mut out);
        let capacity = out.capacity();
        let ptr = out.as_ptr();
        primary_key(b"http", b"example.com", b"/b", &mut out);
        assert_eq!(out, b"http://example.com/b");
        assert_eq!((out.capacity(), out.as_ptr()), (capacity, ptr));
    }

    #[test]
    fn key_origin_prefix() {
        let cases: &[(&str, &str)] = &[
            ("http://example.com/a?b", "http://example.com"),
            ("http://example.com:81/", "http://example.com:81"),
            ("http://example.com", "http://example.com"),
        ];
        for (key, origin) in cases {
            assert_eq!(key_origin(key.as_bytes()), origin.as_bytes(), "{key}");
        }
    }

    #[test]
    fn scheme_detection() {
        assert_eq!(scheme_end(b"http://x"), Some(4));
        assert_eq!(scheme_end(b"svn+ssh:x"), Some(7));
        assert_eq!(scheme_end(b"/a:b"), None);
        assert_eq!(scheme_end(b"1a:b"), None);
        assert_eq!(scheme_end(b"abc"), None);
        assert_eq!(split_absolute(b"mailto:x"), None);
    }
}
