//! Status code classes that caching depends on.

/// Status codes "heuristically cacheable" by default (RFC 9110 §15.1): a
/// response with one of these may be stored and given a heuristic lifetime
/// without explicit freshness (RFC 9111 §4.2.2).
pub fn is_heuristically_cacheable(status: u16) -> bool {
    matches!(
        status,
        200 | 203 | 204 | 206 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501
    )
}

/// Status codes whose caching requirements this cache implements, for
/// `must-understand` (RFC 9111 §5.2.2.3): every code RFC 9110 §15 defines.
/// Anything else (e.g. 599) with `must-understand` is not stored.
pub fn is_understood(status: u16) -> bool {
    matches!(
        status,
        200..=206 | 300..=305 | 307 | 308 | 400..=417 | 421 | 422 | 426 | 500..=505
    )
}

/// A final status code (RFC 9110 §15): 1xx responses are interim and never
/// stored (RFC 9111 §3).
pub fn is_final(status: u16) -> bool {
    (200..=999).contains(&status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        // (status, heuristic, understood, final)
        let cases: &[(u16, bool, bool, bool)] = &[
            (100, false, false, false),
            (200, true, true, true),
            (201, false, true, true),
            (204, true, true, true),
            (206, true, true, true),
            (299, false, false, true),
            (302, false, true, true),
            (304, false, true, true),
            (306, false, false, true),
            (308, true, true, true),
            (403, false, true, true),
            (404, true, true, true),
            (414, true, true, true),
            (418, false, false, true),
            (499, false, false, true),
            (501, true, true, true),
            (503, false, true, true),
            (599, false, false, true),
        ];
        for &(status, heuristic, understood, fin) in cases {
            assert_eq!(is_heuristically_cacheable(status), heuristic, "{status}");
            assert_eq!(is_understood(status), understood, "{status}");
            assert_eq!(is_final(status), fin, "{status}");
        }
    }
}
