//! Invalidation after unsafe requests (RFC 9111 §4.4).

use crate::key::key_origin;
use crate::uri::resolve_reference_key;

/// The safe methods of RFC 9110 §9.2.1. Every other method, including ones
/// the cache does not know (`M-SEARCH`), is unsafe for invalidation.
pub fn is_safe_method(method: &[u8]) -> bool {
    matches!(method, b"GET" | b"HEAD" | b"OPTIONS" | b"TRACE")
}

/// Primary keys to invalidate (all their variants), request target first,
/// without duplicates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Invalidations {
    keys: [Option<Vec<u8>>; 3],
}

impl Invalidations {
    /// Whether nothing is to be invalidated.
    pub fn is_empty(&self) -> bool {
        self.keys.iter().all(Option::is_none)
    }

    /// The keys.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.keys.iter().flatten().map(Vec::as_slice)
    }

    fn add(&mut self, key: Vec<u8>) {
        if self.iter().any(|existing| existing == key.as_slice()) {
            return;
        }
        if let Some(slot) = self.keys.iter_mut().find(|slot| slot.is_none()) {
            *slot = Some(key);
        }
    }
}

/// The keys an unsafe request's response invalidates (§4.4).
///
/// When `method` is unsafe and `status` is non-error (2xx or 3xx), the cache
/// must invalidate the target URI (`request_key`, from
/// [`crate::primary_key`]) and may invalidate the URIs in `Location` and
/// `Content-Location`; it does so only when they have the same origin as the
/// target (§4.4: to avoid denial-of-service by invalidating other sites).
/// Relative references resolve against the target URI (RFC 3986 §5.2).
/// A failed request (4xx/5xx) invalidates nothing.
pub fn invalidations(
    method: &[u8],
    status: u16,
    request_key: &[u8],
    location: Option<&[u8]>,
    content_location: Option<&[u8]>,
) -> Invalidations {
    let mut found = Invalidations::default();
    if is_safe_method(method) || !(200..400).contains(&status) {
        return found;
    }
    found.add(request_key.to_vec());
    let origin = key_origin(request_key);
    for reference in [location, content_location].into_iter().flatten() {
        let mut key = Vec::new();
        if resolve_reference_key(request_key, reference, &mut key) && key_origin(&key) == origin {
            found.add(key);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_methods() {
        for method in ["GET", "HEAD", "OPTIONS", "TRACE"] {
            assert!(is_safe_method(method.as_bytes()), "{method}");
        }
        for method in [
            "POST", "PUT", "DELETE", "PATCH", "M-SEARCH", "get", "CONNECT",
        ] {
            assert!(!is_safe_method(method.as_bytes()), "{method}");
        }
    }

    #[test]
    fn invalidation_table() {
        let target = b"http://h/test/uuid";
        type Case<'a> = (
            &'a str,
            u16,
            Option<&'a str>,
            Option<&'a str>,
            &'a [&'a str],
        );
        let cases: &[Case<'_>] = &[
            ("POST", 200, None, None, &["http://h/test/uuid"]),
            ("PUT", 201, None, None, &["http://h/test/uuid"]),
            ("DELETE", 204, None, None, &["http://h/test/uuid"]),
            ("M-SEARCH", 200, None, None, &["http://h/test/uuid"]),
            ("POST", 302, None, None, &["http://h/test/uuid"]),
            ("POST", 500, Some("/x"), None, &[]),
            ("POST", 404, None, None, &[]),
            ("POST", 100, None, None, &[]),
            ("GET", 200, Some("/x"), None, &[]),
            (
                "POST",
                200,
                Some("/test/uuid/location_target"),
                Some("/test/uuid/content_location_target"),
                &[
                    "http://h/test/uuid",
                    "http://h/test/uuid/location_target",
                    "http://h/test/uuid/content_location_target",
                ],
            ),
            (
                "PUT",
                200,
                None,
                Some("uuid2"),
                &["http://h/test/uuid", "http://h/test/uuid2"],
            ),
            (
                "PUT",
                200,
                Some("http://H:80/a"),
                None,
                &["http://h/test/uuid", "http://h/a"],
            ),
            (
                "PUT",
                200,
                Some("http://other/a"),
                Some("https://h/a"),
                &["http://h/test/uuid"],
            ),
            ("PUT", 200, Some("//other/a"), None, &["http://h/test/uuid"]),
            (
                "PUT",
                200,
                Some(""),
                Some("/test/uuid"),
                &["http://h/test/uuid"],
            ),
            (
                "PUT",
                200,
                Some("mailto:a@b"),
                None,
                &["http://h/test/uuid"],
            ),
        ];
        for (method, status, location, content_location, expected) in cases {
            let found = invalidations(
                method.as_bytes(),
                *status,
                target,
                location.map(str::as_bytes),
                content_location.map(str::as_bytes),
            );
            let keys: Vec<&[u8]> = found.iter().collect();
            let want: Vec<&[u8]> = expected.iter().map(|k| k.as_bytes()).collect();
            assert_eq!(
                keys, want,
                "{method} {status} {location:?} {content_location:?}"
            );
            assert_eq!(found.is_empty(), expected.is_empty());
        }
    }
}
