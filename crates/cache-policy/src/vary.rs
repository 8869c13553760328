//! `Vary` and the secondary cache key (RFC 9111 §4.1).
//!
//! At store time the response's `Vary` is parsed once into [`Vary`]: the
//! selecting field names lowercased, sorted and de-duplicated, so the order a
//! server lists them in (`Foo, Bar` vs `Bar, Foo`) does not matter. For each
//! request the proxy writes the secondary key with [`secondary_key`] into a
//! reused buffer and compares bytes.
//!
//! Key format, one component per selecting field, in name order:
//! `name ":" normalised-value "\n"` when the request has the field and
//! `name "\n"` when it does not, so "absent" never equals "empty".
//!
//! Normalisation (§4.1 allows any that preserves semantics):
//! - every field: list members of all lines are trimmed and joined with `,`,
//!   so `1, 2` on one line equals `1` and `2` on two lines and ` 1,2 `;
//! - `Accept-Language` and `Accept-Encoding`: members are also lowercased,
//!   stripped of inner whitespace and sorted, because language tags and
//!   content codings are case-insensitive and members of equal weight carry
//!   no order (RFC 9110 §12.4.2, §12.5.3, §12.5.4). More than
//!   [`MAX_SORTED_MEMBERS`] members are kept in received order.

use bytes::Bytes;
use sepia_http1::HeaderId;

use crate::fields::{all_members, list_members, trim_ows, Fields};

/// Members of a sorted field beyond this count are not sorted (bounded stack
/// space, no allocation).
pub const MAX_SORTED_MEMBERS: usize = 32;

/// A stored response's `Vary`, parsed once at store time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Vary {
    /// No `Vary` (or only empty lines): every request matches.
    #[default]
    None,
    /// A `*` member anywhere: no request ever matches (§4.1).
    Star,
    /// Selecting field names: lowercased, sorted, unique, joined with `,`.
    Fields(Bytes),
}

impl Vary {
    /// Parses every `Vary` line of a response.
    pub fn parse<F: Fields>(response: &F) -> Self {
        let mut names: Vec<Vec<u8>> = Vec::new();
        for member in response.known(HeaderId::Vary).flat_map(list_members) {
            if member == b"*" {
                return Vary::Star;
            }
            names.push(member.to_ascii_lowercase());
        }
        if names.is_empty() {
            return Vary::None;
        }
        names.sort_unstable();
        names.dedup();
        Vary::Fields(Bytes::from(names.join(&b","[..])))
    }

    /// Whether `name` (lowercase) is one of the selecting fields.
    pub fn names_field(&self, name: &[u8]) -> bool {
        match self {
            Vary::Fields(names) => names.split(|&b| b == b',').any(|n| n == name),
            _ => false,
        }
    }
}

/// What [`vary_key`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VaryKey {
    /// The response has no `Vary`: the primary key alone selects it.
    None,
    /// `Vary: *`: the response can never be selected, do not store it.
    Never,
    /// The secondary key was written to the output buffer.
    Key,
}

/// Parses the response's `Vary` and writes the request's secondary key into
/// `out` (cleared first). For store time; lookups should keep the parsed
/// [`Vary`] and call [`secondary_key`].
pub fn vary_key<V: Fields, R: Fields>(response: &V, request: &R, out: &mut Vec<u8>) -> VaryKey {
    vary_key_of(&Vary::parse(response), request, out)
}

/// [`vary_key`] for a response whose `Vary` is parsed already (as [`crate::StoredMeta`] holds it).
pub fn vary_key_of<R: Fields>(vary: &Vary, request: &R, out: &mut Vec<u8>) -> VaryKey {
    out.clear();
    match vary {
        Vary::None => VaryKey::None,
        Vary::Star => VaryKey::Never,
        Vary::Fields(names) => {
            secondary_key(names, request, out);
            VaryKey::Key
        }
    }
}

/// Writes the secondary key of `request` for the selecting field `names`
/// (as held by [`Vary::Fields`]) into `out` (cleared first). Allocates only
/// if `out` must grow.
pub fn secondary_key<R: Fields>(names: &[u8], request: &R, out: &mut Vec<u8>) {
    out.clear();
    for name in names.split(|&b| b == b',').filter(|n| !n.is_empty()) {
        out.extend_from_slice(name);
        if request.first_named(name).is_some() {
            out.push(b':');
            if is_sorted_field(name) {
                write_sorted_members(request, name, out);
            } else {
                write_joined_members(request, name, out);
            }
        }
        out.push(b'\n');
    }
}

/// Whether a stored variant may be used for `request` (RFC 9111 §4.1).
///
/// Byte-equal keys match. Beyond that, when the response varies on
/// `Accept-Language` and said which language it is in (`Content-Language`),
/// the request matches if that language is among its most preferred ones
/// (highest q, RFC 9110 §12.5.4, basic filtering of RFC 4647 §3.3.1): the
/// server would select this same representation. `scratch` receives the
/// request's key.
pub fn vary_matches<R: Fields>(
    vary: &Vary,
    content_language: Option<&[u8]>,
    stored_key: &[u8],
    request: &R,
    scratch: &mut Vec<u8>,
) -> bool {
    let names = match vary {
        Vary::None => return true,
        Vary::Star => return false,
        Vary::Fields(names) => names,
    };
    secondary_key(names, request, scratch);
    if scratch.as_slice() == stored_key {
        return true;
    }
    let Some(language) = content_language.and_then(|l| list_members(l).next()) else {
        return false;
    };
    let stored = stored_key.split(|&b| b == b'\n');
    let requested = scratch.split(|&b| b == b'\n');
    stored.zip(requested).all(|(s, r)| {
        s == r
            || (s.starts_with(b"accept-language:")
                && r.strip_prefix(b"accept-language:")
                    .is_some_and(|value| prefers_language(value, language)))
    })
}

fn is_sorted_field(name: &[u8]) -> bool {
    name == b"accept-language" || name == b"accept-encoding"
}

fn write_joined_members<R: Fields>(request: &R, name: &[u8], out: &mut Vec<u8>) {
    for (i, member) in all_members(request, name).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(member);
    }
}

fn write_sorted_members<R: Fields>(request: &R, name: &[u8], out: &mut Vec<u8>) {
    let mut members: [&[u8]; MAX_SORTED_MEMBERS] = [&[]; MAX_SORTED_MEMBERS];
    let mut count = 0;
    for member in all_members(request, name) {
        if count == MAX_SORTED_MEMBERS {
            // Too many to sort on the stack: fall back to received order.
            count = usize::MAX;
            break;
        }
        members[count] = member;
        count += 1;
    }
    if count == usize::MAX {
        for (i, member) in all_members(request, name).enumerate() {
            write_compact_member(i, member, out);
        }
        return;
    }
    let members = &mut members[..count];
    members.sort_unstable_by(|a, b| compact_lowercase(a).cmp(compact_lowercase(b)));
    for (i, member) in members.iter().enumerate() {
        write_compact_member(i, member, out);
    }
}

fn write_compact_member(index: usize, member: &[u8], out: &mut Vec<u8>) {
    if index > 0 {
        out.push(b',');
    }
    out.extend(compact_lowercase(member));
}

/// A member without whitespace, lowercased, as bytes.
fn compact_lowercase(member: &[u8]) -> impl Iterator<Item = u8> + '_ {
    member
        .iter()
        .filter(|&&b| b != b' ' && b != b'\t')
        .map(u8::to_ascii_lowercase)
}

/// Whether `language` is matched by one of the highest-weighted language
/// ranges of a normalised `Accept-Language` value.
fn prefers_language(accept_language: &[u8], language: &[u8]) -> bool {
    let ranges = || {
        accept_language.split(|&b| b == b',').map(|member| {
            let mut parts = member.split(|&b| b == b';');
            let range = parts.next().unwrap_or_default();
            let weight = parts
                .find_map(|p| p.strip_prefix(b"q="))
                .map_or(Some(1000), parse_qvalue);
            (range, weight)
        })
    };
    let Some(best) = ranges().filter_map(|(_, w)| w).max() else {
        return false;
    };
    if best == 0 {
        return false;
    }
    let language = trim_ows(language);
    ranges().any(|(range, weight)| {
        weight == Some(best)
            && (range == b"*"
                || range.eq_ignore_ascii_case(language)
                || (language.len() > range.len()
                    && language[..range.len()].eq_ignore_ascii_case(range)
                    && language[range.len()] == b'-'))
    })
}

/// `qvalue` (RFC 9110 §12.4.2) in thousandths.
fn parse_qvalue(value: &[u8]) -> Option<u16> {
    let (whole, fraction) = match memchr::memchr(b'.', value) {
        Some(dot) => (&value[..dot], &value[dot + 1..]),
        None => (value, &b""[..]),
    };
    if whole.len() != 1 || fraction.len() > 3 || !fraction.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths: u16 = match whole[0] {
        b'0' => 0,
        b'1' => 1000,
        _ => return None,
    };
    for (i, &d) in fraction.iter().enumerate() {
        thousandths += u16::from(d - b'0') * [100, 10, 1][i];
    }
    (thousandths <= 1000).then_some(thousandths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::FieldList;

    fn vary_of(lines: &[&str]) -> Vary {
        let pairs: Vec<(&str, &str)> = lines.iter().map(|l| ("Vary", *l)).collect();
        Vary::parse(&FieldList::from_pairs(&pairs))
    }

    fn key_for(vary: &[&str], request: &[(&str, &str)]) -> (VaryKey, String) {
        let pairs: Vec<(&str, &str)> = vary.iter().map(|l| ("Vary", *l)).collect();
        let mut out = b"garbage".to_vec();
        let kind = vary_key(
            &FieldList::from_pairs(&pairs),
            &FieldList::from_pairs(request),
            &mut out,
        );
        (kind, String::from_utf8(out).unwrap())
    }

    #[test]
    fn vary_parsing() {
        let fields = |s: &str| Vary::Fields(Bytes::copy_from_slice(s.as_bytes()));
        let cases: &[(&[&str], Vary)] = &[
            (&[], Vary::None),
            (&[""], Vary::None),
            (&["*"], Vary::Star),
            (&["*, *"], Vary::Star),
            (&["*", "*"], Vary::Star),
            (&[", *"], Vary::Star),
            (&["", "*"], Vary::Star),
            (&["*, Foo"], Vary::Star),
            (&["Foo, *"], Vary::Star),
            (&["Foo"], fields("foo")),
            (&["Foo, Bar, Baz"], fields("bar,baz,foo")),
            (&["baz", "FOO,bar, foo"], fields("bar,baz,foo")),
        ];
        for (lines, expected) in cases {
            assert_eq!(vary_of(lines), *expected, "{lines:?}");
        }
        assert!(fields("bar,foo").names_field(b"foo"));
        assert!(!fields("bar,foo").names_field(b"fo"));
        assert!(!Vary::None.names_field(b"foo"));
    }

    #[test]
    fn secondary_keys() {
        type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], VaryKey, &'a str);
        let cases: &[Case<'_>] = &[
            (&[], &[("Foo", "1")], VaryKey::None, ""),
            (&["*"], &[("Foo", "1")], VaryKey::Never, ""),
            (&["Foo"], &[("Foo", "1")], VaryKey::Key, "foo:1\n"),
            (&["Foo"], &[], VaryKey::Key, "foo\n"),
            (&["Foo"], &[("Foo", "")], VaryKey::Key, "foo:\n"),
            (&["Foo"], &[("foo", " 1, 2 ")], VaryKey::Key, "foo:1,2\n"),
            (
                &["Foo"],
                &[("Foo", "1"), ("Foo", "2")],
                VaryKey::Key,
                "foo:1,2\n",
            ),
            (
                &["Foo, Bar"],
                &[("Bar", "abc"), ("Foo", "1")],
                VaryKey::Key,
                "bar:abc\nfoo:1\n",
            ),
            (
                &["Foo, Bar, Baz"],
                &[("Foo", "1"), ("Baz", "789")],
                VaryKey::Key,
                "bar\nbaz:789\nfoo:1\n",
            ),
            (
                &["Accept-Language"],
                &[("Accept-Language", " eN ,   De")],
                VaryKey::Key,
                "accept-language:de,en\n",
            ),
            (
                &["accept-encoding"],
                &[("Accept-Encoding", "GZIP, br ; q=0.5")],
                VaryKey::Key,
                "accept-encoding:br;q=0.5,gzip\n",
            ),
            // Unknown fields keep case and order.
            (&["Foo"], &[("Foo", "B, a")], VaryKey::Key, "foo:B,a\n"),
        ];
        for (vary, request, kind, key) in cases {
            assert_eq!(
                key_for(vary, request),
                (*kind, key.to_string()),
                "{vary:?} {request:?}"
            );
        }
    }

    #[test]
    fn equivalent_requests_share_keys() {
        type Pair<'a> = (&'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], bool);
        let pairs: &[Pair<'_>] = &[
            (&[("Foo", "1, 2")], &[("Foo", "1"), ("Foo", "2")], true),
            (&[("Foo", "1,2")], &[("Foo", " 1, 2 ")], true),
            (
                &[("Accept-Language", "en, de")],
                &[("Accept-Language", "de, en")],
                true,
            ),
            (
                &[("Accept-Language", "en, de")],
                &[("Accept-Language", "eN, De")],
                true,
            ),
            (
                &[("Accept-Language", "en, de")],
                &[("Accept-Language", " en ,   de")],
                true,
            ),
            (&[("Foo", "1")], &[("Foo", "2")], false),
            (&[("Foo", "1")], &[], false),
        ];
        for (a, b, same) in pairs {
            let vary = ["Foo, Accept-Language"];
            assert_eq!(
                key_for(&vary, a) == key_for(&vary, b),
                *same,
                "{a:?} vs {b:?}"
            );
        }
    }

    #[test]
    fn many_members_fall_back_to_received_order() {
        let long: String = (0..40)
            .rev()
            .map(|i| format!("l{i:02}"))
            .collect::<Vec<_>>()
            .join(", ");
        let (_, key) = key_for(&["Accept-Language"], &[("Accept-Language", &long)]);
        assert!(key.starts_with("accept-language:l39,l38,"), "{key}");
    }

    #[test]
    fn matching_with_content_language_selection() {
        let vary = vary_of(&["Accept-Language"]);
        let stored_req = FieldList::from_pairs(&[("Accept-Language", "en, de")]);
        let mut stored_key = Vec::new();
        secondary_key(b"accept-language", &stored_req, &mut stored_key);
        let mut scratch = Vec::new();
        let cases: &[(&str, Option<&str>, bool)] = &[
            ("en, de", None, true),
            ("de, en", None, true),
            ("fr;q=0.5, de;q=1.0", None, false),
            ("fr;q=0.5, de;q=1.0", Some("de"), true),
            ("fr;q=0.5, de;q=1.0", Some("DE"), true),
            ("de-AT;q=0.9, fr", Some("de"), false),
            ("de;q=0.9, fr", Some("de"), false),
            ("de, fr", Some("de-CH"), true),
            ("*", Some("de"), true),
            ("de;q=0", Some("de"), false),
            ("de;q=bogus", Some("de"), false),
        ];
        for (accept, content_language, expected) in cases {
            let request = FieldList::from_pairs(&[("Accept-Language", accept)]);
            let got = vary_matches(
                &vary,
                content_language.map(str::as_bytes),
                &stored_key,
                &request,
                &mut scratch,
            );
            assert_eq!(got, *expected, "{accept} with {content_language:?}");
        }
        let absent = FieldList::new();
        assert!(!vary_matches(
            &vary,
            Some(b"de"),
            &stored_key,
            &absent,
            &mut scratch
        ));
        assert!(vary_matches(&Vary::None, None, b"", &absent, &mut scratch));
        assert!(!vary_matches(&Vary::Star, None, b"", &absent, &mut scratch));
    }

    #[test]
    fn qvalues() {
        let cases: &[(&str, Option<u16>)] = &[
            ("1", Some(1000)),
            ("1.000", Some(1000)),
            ("0.5", Some(500)),
            ("0.25", Some(250)),
            ("0", Some(0)),
            ("1.5", None),
            ("2", None),
            ("0.1234", None),
            ("", None),
            ("x", None),
        ];
        for (value, expected) in cases {
            assert_eq!(parse_qvalue(value.as_bytes()), *expected, "{value}");
        }
    }
}
