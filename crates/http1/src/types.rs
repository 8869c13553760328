//! Small value types shared by the parser, the body decoders and the encoder.

/// The HTTP/1.x protocol version of a message (RFC 9112 §2.3). Anything other than 1.0 and 1.1
/// is rejected by the decoders, so two variants are enough.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Version {
    Http10,
    #[default]
    Http11,
}

impl Version {
    /// The HTTP-version token as it appears on the wire.
    pub fn as_bytes(self) -> &'static [u8] {
        match self {
            Version::Http10 => b"HTTP/1.0",
            Version::Http11 => b"HTTP/1.1",
        }
    }

    /// From httparse's minor version number (the decoders only ever see 0 or 1).
    pub(crate) fn from_minor(minor: u8) -> Option<Version> {
        match minor {
            0 => Some(Version::Http10),
            1 => Some(Version::Http11),
            _ => None,
        }
    }
}

/// The request methods the proxy treats specially; everything else is `Other` (the exact bytes
/// stay available in `RequestHead::method_raw`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Method {
    #[default]
    Get,
    Head,
    Post,
    Put,
    Delete,
    Connect,
    Options,
    Trace,
    Patch,
    Other,
}

impl Method {
    /// Method names are case-sensitive (RFC 9110 §9.1): `get` is an unknown method, not GET.
    pub fn from_bytes(m: &[u8]) -> Method {
        match m {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"CONNECT" => Method::Connect,
            b"OPTIONS" => Method::Options,
            b"TRACE" => Method::Trace,
            b"PATCH" => Method::Patch,
            _ => Method::Other,
        }
    }

    /// Safe methods (RFC 9110 §9.2.1) are the read-only ones a cache may answer and that do not
    /// invalidate stored responses (RFC 9111 §4.4).
    pub fn is_safe(self) -> bool {
        matches!(
            self,
            Method::Get | Method::Head | Method::Options | Method::Trace
        )
    }
}

/// How the body of a message is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body at all.
    Empty,
    /// Exactly this many bytes follow the head.
    Length(u64),
    /// A chunked body (RFC 9112 §7.1).
    Chunked,
    /// The body runs until the sender closes the connection (responses only, §6.3 rule 8).
    UntilClose,
}

/// Bounds on what a peer may make us buffer for one head.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest head (start line through the empty line) accepted; more is a 431 for requests.
    pub max_head_bytes: usize,
    /// Most header field lines accepted. Capped at [`crate::MAX_HEADERS_CAP`], the size of the
    /// parser's on-stack header array.
    pub max_headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head_bytes: 64 * 1024,
            max_headers: 100,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_are_case_sensitive() {
        let cases: &[(&[u8], Method)] = &[
            (b"GET", Method::Get),
            (b"HEAD", Method::Head),
            (b"POST", Method::Post),
            (b"PUT", Method::Put),
            (b"DELETE", Method::Delete),
            (b"CONNECT", Method::Connect),
            (b"OPTIONS", Method::Options),
            (b"TRACE", Method::Trace),
            (b"PATCH", Method::Patch),
            (b"get", Method::Other),
            (b"Get", Method::Other),
            (b"PROPFIND", Method::Other),
            (b"", Method::Other),
        ];
        for (raw, want) in cases {
            assert_eq!(
                Method::from_bytes(raw),
                *want,
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn safe_methods() {
        let safe = [Method::Get, Method::Head, Method::Options, Method::Trace];
        let unsafe_ = [
            Method::Post,
            Method::Put,
            Method::Delete,
            Method::Connect,
            Method::Patch,
            Method::Other,
        ];
        assert!(safe.iter().all(|m| m.is_safe()));
        assert!(unsafe_.iter().all(|m| !m.is_safe()));
    }

    #[test]
    fn version_bytes() {
        assert_eq!(Version::Http10.as_bytes(), b"HTTP/1.0");
        assert_eq!(Version::Http11.as_bytes(), b"HTTP/1.1");
        assert_eq!(Version::from_minor(0), Some(Version::Http10));
        assert_eq!(Version::from_minor(1), Some(Version::Http11));
        assert_eq!(Version::from_minor(2), None);
    }

    #[test]
    fn default_limits() {
        let l = Limits::default();
        assert_eq!((l.max_head_bytes, l.max_headers), (65536, 100));
    }
}
