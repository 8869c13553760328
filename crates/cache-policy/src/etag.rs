//! Entity tags and their comparison (RFC 9110 §8.8.3).
//!
//! Parsing is lenient where real servers are sloppy and the meaning is still
//! clear: `w/` is accepted as the weak prefix, and an unquoted tag (`abc`) is
//! compared as if it were quoted (`"abc"`). Comparison is on the opaque part
//! only, so leniency never makes two different opaque values equal.

use crate::fields::{list_members, trim_ows, Fields};

/// A parsed entity-tag, borrowing the opaque part without quotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntityTag<'a> {
    /// `W/` prefix present.
    pub weak: bool,
    /// The opaque value between the quotes.
    pub opaque: &'a [u8],
}

impl<'a> EntityTag<'a> {
    /// Parses one entity-tag; `None` for an empty value or a lone quote.
    pub fn parse(value: &'a [u8]) -> Option<Self> {
        let value = trim_ows(value);
        let (weak, rest) = match value {
            [b'W' | b'w', b'/', rest @ ..] => (true, rest),
            _ => (false, value),
        };
        let opaque = match rest {
            [b'"', inner @ .., b'"'] => inner,
            [b'"'] | [] => return None,
            _ => rest,
        };
        Some(Self { weak, opaque })
    }

    /// Strong comparison: both strong and the same opaque value (§8.8.3.2).
    pub fn strong_eq(&self, other: &EntityTag<'_>) -> bool {
        !self.weak && !other.weak && self.opaque == other.opaque
    }

    /// Weak comparison: the same opaque value, weakness ignored (§8.8.3.2).
    pub fn weak_eq(&self, other: &EntityTag<'_>) -> bool {
        self.opaque == other.opaque
    }
}

/// How list members of `If-Match` / `If-None-Match` are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    /// `If-Match`, `If-Range` (§13.1.1, §13.1.5).
    Strong,
    /// `If-None-Match` (§13.1.2).
    Weak,
}

/// Whether a precondition field (`If-Match` or `If-None-Match`, all lines)
/// matches the current entity-tag: `*` matches whenever a current
/// representation exists, otherwise any listed tag must compare equal.
pub fn field_matches<F: Fields>(
    request: &F,
    name: &[u8],
    current: Option<&[u8]>,
    comparison: Comparison,
) -> bool {
    let current = current.and_then(EntityTag::parse);
    request.values(name).flat_map(list_members).any(|member| {
        if member == b"*" {
            return true;
        }
        match (EntityTag::parse(member), current) {
            (Some(listed), Some(current)) => match comparison {
                Comparison::Strong => listed.strong_eq(&current),
                Comparison::Weak => listed.weak_eq(&current),
            },
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::FieldList;

    #[test]
    fn parsing() {
        let cases: &[(&str, Option<(bool, &str)>)] = &[
            ("\"abc\"", Some((false, "abc"))),
            ("W/\"abc\"", Some((true, "abc"))),
            ("w/\"abc\"", Some((true, "abc"))),
            (" \"abc\" ", Some((false, "abc"))),
            ("\"\"", Some((false, ""))),
            ("abc", Some((false, "abc"))),
            ("\"abcdefü\"", Some((false, "abcdefü"))),
            ("\"", None),
            ("", None),
        ];
        for (value, expected) in cases {
            let got = EntityTag::parse(value.as_bytes()).map(|t| (t.weak, t.opaque));
            assert_eq!(got, expected.map(|(w, o)| (w, o.as_bytes())), "{value:?}");
        }
    }

    #[test]
    fn comparison_table_from_rfc9110() {
        // RFC 9110 §8.8.3.2 example table.
        let cases: &[(&str, &str, bool, bool)] = &[
            ("W/\"1\"", "W/\"1\"", false, true),
            ("W/\"1\"", "W/\"2\"", false, false),
            ("W/\"1\"", "\"1\"", false, true),
            ("\"1\"", "\"1\"", true, true),
        ];
        for (a, b, strong, weak) in cases {
            let a = EntityTag::parse(a.as_bytes()).unwrap();
            let b = EntityTag::parse(b.as_bytes()).unwrap();
            assert_eq!(a.strong_eq(&b), *strong, "{a:?} {b:?}");
            assert_eq!(a.weak_eq(&b), *weak, "{a:?} {b:?}");
        }
    }

    #[test]
    fn list_matching() {
        let cases: &[(&str, Option<&str>, Comparison, bool)] = &[
            ("\"abcdef\"", Some("\"abcdef\""), Comparison::Weak, true),
            (
                "\"1234\", \"abcdef\", \"5678\"",
                Some("\"abcdef\""),
                Comparison::Weak,
                true,
            ),
            (
                "\"1234\", \"5678\"",
                Some("\"abcdef\""),
                Comparison::Weak,
                false,
            ),
            ("W/\"abcdef\"", Some("\"abcdef\""), Comparison::Weak, true),
            (
                "W/\"abcdef\"",
                Some("\"abcdef\""),
                Comparison::Strong,
                false,
            ),
            (
                "\"abcdef\"",
                Some("W/\"abcdef\""),
                Comparison::Strong,
                false,
            ),
            ("abcdef", Some("\"abcdef\""), Comparison::Weak, true),
            ("*", Some("\"x\""), Comparison::Strong, true),
            ("*", None, Comparison::Weak, true),
            ("\"x\"", None, Comparison::Weak, false),
            ("\"a,b\", \"c\"", Some("\"a,b\""), Comparison::Strong, true),
        ];
        for (field, current, comparison, expected) in cases {
            let request = FieldList::from_pairs(&[("If-None-Match", field)]);
            let got = field_matches(
                &request,
                b"if-none-match",
                current.map(str::as_bytes),
                *comparison,
            );
            assert_eq!(got, *expected, "{field:?} vs {current:?} {comparison:?}");
        }
        let two_lines = FieldList::from_pairs(&[("If-Match", "\"a\""), ("If-Match", "\"b\"")]);
        assert!(field_matches(
            &two_lines,
            b"if-match",
            Some(b"\"b\""),
            Comparison::Strong
        ));
        assert!(!field_matches(
            &FieldList::new(),
            b"if-match",
            Some(b"\"b\""),
            Comparison::Strong
        ));
    }
}
