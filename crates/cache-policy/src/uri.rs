//! Resolving `Location` / `Content-Location` references against the request
//! URI (RFC 3986 §5.2), producing primary cache keys.
//!
//! Only used off the hot path (invalidation, POST storability), so it may
//! allocate for dot-segment removal.

use crate::fields::trim_ows;
use crate::key::{scheme_end, split_absolute, write_origin, write_path_and_query};

/// Resolves `reference` against `base_key` (a key from [`crate::primary_key`])
/// and writes the resulting key into `out` (cleared first).
///
/// Returns `false`, leaving `out` empty, when the reference is not an `http`
/// or `https` URI that a cache could hold, e.g. `mailto:` or a base that is
/// not a key.
pub fn resolve_reference_key(base_key: &[u8], reference: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    let reference = trim_ows(reference);
    let reference = match memchr::memchr(b'#', reference) {
        Some(hash) => &reference[..hash],
        None => reference,
    };
    if let Some((scheme, authority, rest)) = split_absolute(reference) {
        if !is_http_scheme(scheme) {
            return false;
        }
        write_origin(scheme, authority, out);
        let (path, query) = split_query(rest);
        write_resolved(&remove_dot_segments(path), query, out);
        return true;
    }
    if scheme_end(reference).is_some() {
        return false;
    }
    let Some((base_scheme, base_authority, base_rest)) = split_absolute(base_key) else {
        return false;
    };
    if !is_http_scheme(base_scheme) {
        return false;
    }
    if let Some(network_path) = reference.strip_prefix(b"//") {
        let authority_end = network_path
            .iter()
            .position(|&b| b == b'/' || b == b'?')
            .unwrap_or(network_path.len());
        write_origin(base_scheme, &network_path[..authority_end], out);
        let (path, query) = split_query(&network_path[authority_end..]);
        write_resolved(&remove_dot_segments(path), query, out);
        return true;
    }
    write_origin(base_scheme, base_authority, out);
    let (base_path, base_query) = split_query(base_rest);
    let (ref_path, ref_query) = split_query(reference);
    if ref_path.is_empty() {
        let query = if ref_query.is_some() {
            ref_query
        } else {
            base_query
        };
        write_resolved(base_path, query, out);
    } else if ref_path.starts_with(b"/") {
        write_resolved(&remove_dot_segments(ref_path), ref_query, out);
    } else {
        // §5.2.3 merge: everything up to the base's last '/' then the reference.
        let directory = base_path
            .iter()
            .rposition(|&b| b == b'/')
            .map_or(&b"/"[..], |i| &base_path[..=i]);
        let mut merged = Vec::with_capacity(directory.len() + ref_path.len());
        merged.extend_from_slice(directory);
        merged.extend_from_slice(ref_path);
        write_resolved(&remove_dot_segments(&merged), ref_query, out);
    }
    true
}

fn is_http_scheme(scheme: &[u8]) -> bool {
    scheme.eq_ignore_ascii_case(b"http") || scheme.eq_ignore_ascii_case(b"https")
}

/// Splits `path?query` keeping the `?` with the query.
fn split_query(path_and_query: &[u8]) -> (&[u8], Option<&[u8]>) {
    match memchr::memchr(b'?', path_and_query) {
        Some(q) => (&path_and_query[..q], Some(&path_and_query[q..])),
        None => (path_and_query, None),
    }
}

fn write_resolved(path: &[u8], query: Option<&[u8]>, out: &mut Vec<u8>) {
    let mut path_and_query = Vec::with_capacity(path.len() + query.map_or(0, <[u8]>::len));
    path_and_query.extend_from_slice(path);
    if let Some(query) = query {
        path_and_query.extend_from_slice(query);
    }
    write_path_and_query(&path_and_query, out);
}

/// `remove_dot_segments` of RFC 3986 §5.2.4.
pub fn remove_dot_segments(path: &[u8]) -> Vec<u8> {
    let mut output: Vec<u8> = Vec::with_capacity(path.len());
    let mut input: &[u8] = path;
    while !input.is_empty() {
        if let Some(rest) = input.strip_prefix(b"../") {
            input = rest;
        } else if let Some(rest) = input.strip_prefix(b"./") {
            input = rest;
        } else if input.starts_with(b"/./") {
            input = &input[2..];
        } else if input == b"/." {
            input = b"/";
        } else if input.starts_with(b"/../") {
            input = &input[3..];
            pop_segment(&mut output);
        } else if input == b"/.." {
            input = b"/";
            pop_segment(&mut output);
        } else if input == b"." || input == b".." {
            input = b"";
        } else {
            let start = usize::from(input[0] == b'/');
            let end = input[start..]
                .iter()
                .position(|&b| b == b'/')
                .map_or(input.len(), |i| start + i);
            output.extend_from_slice(&input[..end]);
            input = &input[end..];
        }
    }
    output
}

fn pop_segment(output: &mut Vec<u8>) {
    let keep = output.iter().rposition(|&b| b == b'/').unwrap_or(0);
    output.truncate(keep);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_segments_follow_rfc3986_examples() {
        let cases: &[(&str, &str)] = &[
            ("/a/b/c/./../../g", "/a/g"),
            ("mid/content=5/../6", "mid/6"),
            ("/a/./b", "/a/b"),
            ("/a/..", "/"),
            ("/a/.", "/a/"),
            ("/../a", "/a"),
            ("../a", "a"),
            ("..", ""),
            ("/a/b/", "/a/b/"),
            ("", ""),
        ];
        for (input, expected) in cases {
            assert_eq!(
                remove_dot_segments(input.as_bytes()),
                expected.as_bytes(),
                "{input}"
            );
        }
    }

    #[test]
    fn references_resolve_against_the_base() {
        // Base and most cases from RFC 3986 §5.4.1, as keys.
        let base = "http://a/b/c/d;p?q";
        let cases: &[(&str, Option<&str>)] = &[
            ("g", Some("http://a/b/c/g")),
            ("./g", Some("http://a/b/c/g")),
            ("g/", Some("http://a/b/c/g/")),
            ("/g", Some("http://a/g")),
            ("//g", Some("http://g/")),
            ("?y", Some("http://a/b/c/d;p?y")),
            ("g?y", Some("http://a/b/c/g?y")),
            ("#s", Some("http://a/b/c/d;p?q")),
            ("", Some("http://a/b/c/d;p?q")),
            ("..", Some("http://a/b/")),
            ("../g", Some("http://a/b/g")),
            ("../../../g", Some("http://a/g")),
            ("/./g", Some("http://a/g")),
            (" g ", Some("http://a/b/c/g")),
            ("HTTP://A:80/x/../y", Some("http://a/y")),
            ("https://other/z", Some("https://other/z")),
            ("mailto:x@y", None),
            ("ftp://a/b", None),
        ];
        for (reference, expected) in cases {
            let mut out = Vec::new();
            let ok = resolve_reference_key(base.as_bytes(), reference.as_bytes(), &mut out);
            match expected {
                Some(key) => {
                    assert!(ok, "{reference:?} should resolve");
                    assert_eq!(String::from_utf8(out).unwrap(), *key, "{reference:?}");
                }
                None => assert!(!ok && out.is_empty(), "{reference:?} should not resolve"),
            }
        }
    }

    #[test]
    fn base_without_directory_or_scheme() {
        let mut out = Vec::new();
        assert!(resolve_reference_key(b"http://h/", b"loc", &mut out));
        assert_eq!(out, b"http://h/loc");
        assert!(!resolve_reference_key(b"not-a-key", b"loc", &mut out));
        assert!(!resolve_reference_key(b"ftp://h/", b"loc", &mut out));
    }
}
