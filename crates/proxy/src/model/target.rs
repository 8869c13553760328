//! Where a request goes: request-target forms (RFC 9112 §3.2, the same in every protocol's
//! proxy requests), authorities (RFC 3986 §3.2) and URI schemes with their default ports.

use bytes::Bytes;

/// A URI scheme Sepia serves (RFC 9110 §4.2). The scheme is part of the cache key and gives the
/// port of an authority that names none; it comes from the request's URL when the client sent
/// absolute-form, else from the listener the request arrived on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    Http,
    /// A request that arrived over TLS, or an absolute `https://` URL.
    Https,
}

impl Scheme {
    /// The scheme as it appears in URLs and cache keys (lower case, RFC 3986 §3.1).
    pub fn as_bytes(self) -> &'static [u8] {
        match self {
            Scheme::Http => b"http",
            Scheme::Https => b"https",
        }
    }

    /// The port an authority without one means (RFC 9110 §4.2.1).
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// The scheme a URL names, compared case-insensitively (RFC 3986 §3.1); `None` for a
    /// scheme Sepia cannot forward to. An `https://` target is fetched over TLS (RFC 9110
    /// §4.2.2), never in clear text.
    pub fn from_url(name: &[u8]) -> Option<Scheme> {
        if name.eq_ignore_ascii_case(b"http") {
            Some(Scheme::Http)
        } else if name.eq_ignore_ascii_case(b"https") {
            Some(Scheme::Https)
        } else {
            None
        }
    }
}

/// `host[:port]`, with an IPv6 literal's brackets removed from `host`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Authority<'a> {
    pub host: &'a [u8],
    pub port: Option<u16>,
}

/// Splits an authority (a Host value, or CONNECT's authority-form). `None` when malformed:
/// empty host, userinfo, a bad port, or unbalanced IPv6 brackets.
pub fn split_authority(a: &[u8]) -> Option<Authority<'_>> {
    if a.is_empty() || a.contains(&b'@') {
        return None;
    }
    let (host, rest) = if a[0] == b'[' {
        let close = a.iter().position(|&b| b == b']')?;
        (&a[1..close], &a[close + 1..])
    } else {
        match a.iter().rposition(|&b| b == b':') {
            Some(i) => (&a[..i], &a[i..]),
            None => (a, &a[a.len()..]),
        }
    };
    if host.is_empty()
        || host
            .iter()
            .any(|&b| b <= b' ' || b == b'/' || b == b'[' || b == b']')
    {
        return None;
    }
    let port = match rest {
        [] => None,
        [b':'] => None, // "host:" means the default port (RFC 3986 §3.2.3)
        [b':', digits @ ..] => Some(parse_port(digits)?),
        _ => return None,
    };
    Some(Authority { host, port })
}

fn parse_port(digits: &[u8]) -> Option<u16> {
    if digits.is_empty() || digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut n: u32 = 0;
    for &d in digits {
        n = n * 10 + u32::from(d - b'0');
    }
    u16::try_from(n).ok().filter(|&p| p != 0)
}

/// An absolute-form `scheme://authority/path?query` target, as slices of the request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbsoluteTarget {
    pub scheme: Scheme,
    pub authority: Bytes,
    /// The origin-form to send to the origin: path and query, "/" when the path is empty.
    pub origin_form: Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetError {
    /// Not absolute-form at all (e.g. origin-form sent to a forward proxy).
    NotAbsolute,
    /// A scheme this proxy does not speak toward origins (see [`Scheme`]).
    UnsupportedScheme,
    /// Absolute-form whose authority is missing or malformed.
    BadAuthority,
}

/// Parses an absolute-form target `t`. The parts returned are parts of `t` made `Bytes` by
/// `share` (a slice of the request head taking a reference), called only when the target is
/// absolute. The scheme is case-insensitive (RFC 3986 §3.1).
pub fn parse_absolute(
    t: &[u8],
    share: impl Fn(&[u8]) -> Bytes,
) -> Result<AbsoluteTarget, TargetError> {
    let colon = t
        .iter()
        .position(|&b| b == b':')
        .ok_or(TargetError::NotAbsolute)?;
    if colon == 0
        || !t[..colon]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b))
    {
        return Err(TargetError::NotAbsolute);
    }
    if !t[colon..].starts_with(b"://") {
        return Err(TargetError::NotAbsolute);
    }
    let scheme = Scheme::from_url(&t[..colon]).ok_or(TargetError::UnsupportedScheme)?;
    let auth_start = colon + 3;
    let auth_end = t[auth_start..]
        .iter()
        .position(|&b| b == b'/' || b == b'?' || b == b'#')
        .map_or(t.len(), |i| auth_start + i);
    let authority = share(&t[auth_start..auth_end]);
    if split_authority(&authority).is_none() {
        return Err(TargetError::BadAuthority);
    }
    // A fragment is never part of a request-target (RFC 9112 §3.2); drop one if a client sent it.
    let end = t[auth_end..]
        .iter()
        .position(|&b| b == b'#')
        .map_or(t.len(), |i| auth_end + i);
    let origin_form = if auth_end == end {
        Bytes::from_static(b"/")
    } else if t[auth_end] == b'?' {
        // "http://h?q" has an empty path: the origin-form is "/?q" (RFC 9112 §3.2.1).
        let mut v = Vec::with_capacity(end - auth_end + 1);
        v.push(b'/');
        v.extend_from_slice(&t[auth_end..end]);
        Bytes::from(v)
    } else {
        share(&t[auth_end..end])
    };
    Ok(AbsoluteTarget {
        scheme,
        authority,
        origin_form,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities() {
        let ok: &[(&[u8], &[u8], Option<u16>)] = &[
            (b"example.com", b"example.com", None),
            (b"example.com:8080", b"example.com", Some(8080)),
            (b"example.com:", b"example.com", None),
            (b"127.0.0.1:3128", b"127.0.0.1", Some(3128)),
            (b"[::1]", b"::1", None),
            (b"[::1]:443", b"::1", Some(443)),
        ];
        for (input, host, port) in ok {
            let a = split_authority(input).unwrap_or_else(|| panic!("{:?}", input));
            assert_eq!((a.host, a.port), (*host, *port));
        }
        let bad: &[&[u8]] = &[
            b"",
            b":80",
            b"user@host",
            b"host:99999",
            b"host:0",
            b"host:8x",
            b"[::1",
            b"[::1]x",
            b"a b",
            b"a/b",
        ];
        for input in bad {
            assert!(
                split_authority(input).is_none(),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn absolute_targets() {
        let cases: &[(&str, &str, &str)] = &[
            ("http://example.com/a/b?c=d", "example.com", "/a/b?c=d"),
            ("HTTP://Example.com:8080", "Example.com:8080", "/"),
            ("http://127.0.0.1:81?q", "127.0.0.1:81", "/?q"),
            ("http://[::1]:80/x#frag", "[::1]:80", "/x"),
            ("https://example.com/s", "example.com", "/s"),
            ("HTTPS://[::1]:8443", "[::1]:8443", "/"),
        ];
        for (input, authority, origin_form) in cases {
            let head = Bytes::copy_from_slice(input.as_bytes());
            let t = parse_absolute(&head, |p| head.slice_ref(p)).unwrap();
            assert_eq!(&t.authority[..], authority.as_bytes(), "{input}");
            assert_eq!(&t.origin_form[..], origin_form.as_bytes(), "{input}");
            let https = input.to_ascii_lowercase().starts_with("https");
            let want = if https { Scheme::Https } else { Scheme::Http };
            assert_eq!(t.scheme, want, "{input}");
        }
    }

    #[test]
    fn non_absolute_targets() {
        let cases: &[(&str, TargetError)] = &[
            ("/index.html", TargetError::NotAbsolute),
            ("*", TargetError::NotAbsolute),
            ("example.com:443", TargetError::NotAbsolute),
            ("httpx://example.com/", TargetError::UnsupportedScheme),
            ("ftp://example.com/", TargetError::UnsupportedScheme),
            ("http:///nohost", TargetError::BadAuthority),
            ("http://user@host/", TargetError::BadAuthority),
        ];
        for (input, err) in cases {
            let head = Bytes::copy_from_slice(input.as_bytes());
            assert_eq!(
                parse_absolute(&head, |p| head.slice_ref(p)),
                Err(*err),
                "{input}"
            );
        }
    }
}
