//! Read access to a message's header fields, and the list syntax shared by most
//! of the fields this crate reads.
//!
//! The crate never owns the proxy's parsed heads: it reads them through the
//! [`Fields`] trait so that the hot path works on borrowed slices of the read
//! buffer. [`FieldList`] is the small owned implementation used by tests and by
//! the 304 merge (RFC 9111 §4.3.4), whose output has to be owned.

use bytes::Bytes;
use sepia_http1::HeaderId;

/// Read access to a message's header fields.
///
/// Field names are compared ASCII case-insensitively (RFC 9110 §5.1). Several
/// field lines with the same name form one comma-separated list, in order
/// (RFC 9110 §5.3), which is why [`Fields::values`] yields every line rather
/// than a single joined value: callers split each line with [`list_members`]
/// and never have to allocate a joined copy.
pub trait Fields {
    /// Every field line as `(name, value)`, in received order.
    fn lines<'a>(&'a self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a;

    /// Every field line value with this name, in order.
    ///
    /// The default scans [`Fields::lines`]. For the well-known fields the
    /// policy reads, [`Fields::known`] is the lookup to use.
    fn values<'a>(&'a self, name: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.lines()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// Every field line as `(id, name, value)`, in received order, `id` being
    /// [`HeaderId::from_name`] of the name. The default classifies each name;
    /// an implementation that classified names when it parsed them overrides it
    /// (deciding which of a response's fields are stored compares ids then, not
    /// names: callgrind, bench/RESULTS.md).
    fn lines_with_ids<'a>(&'a self) -> impl Iterator<Item = (HeaderId, &'a [u8], &'a [u8])> + 'a {
        self.lines()
            .map(|(name, value)| (HeaderId::from_name(name), name, value))
    }

    /// Every line value of a well-known field, in order. The default looks the
    /// field up by [`HeaderId::name`]; an implementation that classified names
    /// when it parsed them overrides it to compare ids: the policy reads a
    /// dozen fields per request, and classifying the name again for each
    /// lookup was most of the cost of reading them (callgrind, bench/RESULTS.md).
    fn known<'a>(&'a self, id: HeaderId) -> impl Iterator<Item = &'a [u8]> + 'a {
        debug_assert!(id != HeaderId::Other, "Other names no field");
        self.values(id.name())
    }

    /// The first line's value of a well-known field, trimmed of surrounding
    /// whitespace.
    ///
    /// For singleton fields such as `Date` or `Expires`, RFC 9111 §4.2.1 lets a
    /// cache use the first occurrence when several are present.
    fn first(&self, id: HeaderId) -> Option<&[u8]> {
        self.known(id).next().map(trim_ows)
    }

    /// The first line's value with this name, trimmed: [`Fields::first`] for any
    /// name (a field the codec does not classify, or a name read from a message).
    fn first_named<'a>(&'a self, name: &'a [u8]) -> Option<&'a [u8]> {
        self.values(name).next().map(trim_ows)
    }

    /// Whether at least one line of this well-known field is present.
    fn contains(&self, id: HeaderId) -> bool {
        self.known(id).next().is_some()
    }
}

/// An owned, ordered list of field lines backed by [`Bytes`].
///
/// Cloning a line is a reference-count bump, so lines taken from a frozen read
/// buffer are kept without copying.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldList {
    lines: Vec<(Bytes, Bytes)>,
}

impl FieldList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a list from string pairs; meant for tests and fixed headers.
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        let mut list = Self::with_capacity(pairs.len());
        for (name, value) in pairs {
            list.push(
                Bytes::copy_from_slice(name.as_bytes()),
                Bytes::copy_from_slice(value.as_bytes()),
            );
        }
        list
    }

    /// An empty list with room for `lines` lines.
    pub fn with_capacity(lines: usize) -> Self {
        Self {
            lines: Vec::with_capacity(lines),
        }
    }

    /// Appends one field line.
    pub fn push(&mut self, name: Bytes, value: Bytes) {
        self.lines.push((name, value));
    }

    /// Number of field lines.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether the list has no lines.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The lines as owned `Bytes` pairs, e.g. to serialise them.
    pub fn iter(&self) -> impl Iterator<Item = &(Bytes, Bytes)> {
        self.lines.iter()
    }

    /// Consumes the list, returning its lines.
    pub fn into_lines(self) -> Vec<(Bytes, Bytes)> {
        self.lines
    }
}

impl Fields for FieldList {
    fn lines<'a>(&'a self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        self.lines.iter().map(|(n, v)| (n.as_ref(), v.as_ref()))
    }
}

/// Trims optional whitespace (SP / HTAB, RFC 9110 §5.6.3) from both ends.
pub fn trim_ows(mut value: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = value {
        value = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = value {
        value = rest;
    }
    value
}

/// The members of one comma-separated list line (RFC 9110 §5.6.1).
///
/// Commas inside quoted strings (RFC 9110 §5.6.4) do not split, so
/// `no-cache="a, b"` stays one member. Members are trimmed of whitespace and
/// empty members are skipped, as the list syntax requires recipients to do.
pub fn list_members(line: &[u8]) -> ListMembers<'_> {
    ListMembers { rest: line }
}

/// Iterator returned by [`list_members`].
#[derive(Clone, Debug)]
pub struct ListMembers<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for ListMembers<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        while !self.rest.is_empty() {
            let end = member_end(self.rest);
            let member = trim_ows(&self.rest[..end]);
            self.rest = if end < self.rest.len() {
                &self.rest[end + 1..]
            } else {
                &[]
            };
            if !member.is_empty() {
                return Some(member);
            }
        }
        None
    }
}

/// Index of the first comma outside a quoted string, or the length.
fn member_end(line: &[u8]) -> usize {
    let mut in_quotes = false;
    let mut escaped = false;
    for (i, &b) in line.iter().enumerate() {
        if in_quotes {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_quotes = false;
            }
        } else if b == b'"' {
            in_quotes = true;
        } else if b == b',' {
            return i;
        }
    }
    line.len()
}

/// Every list member of every line with this name, in order (RFC 9110 §5.3).
pub fn all_members<'a, F: Fields>(
    fields: &'a F,
    name: &'a [u8],
) -> impl Iterator<Item = &'a [u8]> + 'a {
    fields.values(name).flat_map(list_members)
}

/// Whether `b` is a `tchar` (RFC 9110 §5.6.2): one table load (the Cache-Status value of
/// every answer checks its name and details byte by byte).
pub fn is_tchar(b: u8) -> bool {
    TCHAR[usize::from(b)]
}

const TCHAR: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        b += 1;
    }
    table
};

/// Whether `value` is a non-empty `token` (RFC 9110 §5.6.2).
pub fn is_token(value: &[u8]) -> bool {
    !value.is_empty() && value.iter().all(|&b| is_tchar(b))
}

/// The inside of a `quoted-string` (RFC 9110 §5.6.4), escapes left in place,
/// or `None` when `value` is not exactly one well-formed quoted string.
pub fn quoted_inner(value: &[u8]) -> Option<&[u8]> {
    let inner = value.strip_prefix(b"\"")?;
    let mut escaped = false;
    for (i, &b) in inner.iter().enumerate() {
        if escaped {
            escaped = false;
        } else if b == b'\\' {
            escaped = true;
        } else if b == b'"' {
            return (i + 1 == inner.len()).then_some(&inner[..i]);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tchar_table_is_the_rfc_set() {
        for b in 0..=255u8 {
            let expected = b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            assert_eq!(is_tchar(b), expected, "{b}");
        }
    }

    #[test]
    fn list_members_split_outside_quotes() {
        let cases: &[(&str, &[&str])] = &[
            ("a, b,c", &["a", "b", "c"]),
            ("  a ,\t b  ", &["a", "b"]),
            (",, a,,", &["a"]),
            ("", &[]),
            (
                r#"no-cache="a, b", max-age=1"#,
                &[r#"no-cache="a, b""#, "max-age=1"],
            ),
            (r#"x="q\"," , y"#, &[r#"x="q\",""#, "y"]),
            (r#"x="unterminated, y"#, &[r#"x="unterminated, y"#]),
        ];
        for (line, expected) in cases {
            let got: Vec<&[u8]> = list_members(line.as_bytes()).collect();
            let want: Vec<&[u8]> = expected.iter().map(|s| s.as_bytes()).collect();
            assert_eq!(got, want, "line {line:?}");
        }
    }

    #[test]
    fn trim_ows_trims_only_space_and_tab() {
        assert_eq!(trim_ows(b" \t a b \t"), b"a b");
        assert_eq!(trim_ows(b"   "), b"");
        assert_eq!(trim_ows(b"\ra\r"), b"\ra\r");
    }

    #[test]
    fn field_list_lookup_is_case_insensitive_and_ordered() {
        let list = FieldList::from_pairs(&[
            ("Cache-Control", "max-age=1"),
            ("Vary", "a"),
            ("cache-control", " no-cache "),
        ]);
        let values: Vec<&[u8]> = list.known(HeaderId::CacheControl).collect();
        assert_eq!(values, vec![&b"max-age=1"[..], &b" no-cache "[..]]);
        assert_eq!(list.first(HeaderId::CacheControl), Some(&b"max-age=1"[..]));
        assert!(list.contains(HeaderId::Vary));
        assert!(!list.contains(HeaderId::ETag));
        let members: Vec<&[u8]> = all_members(&list, b"cache-control").collect();
        assert_eq!(members, vec![&b"max-age=1"[..], &b"no-cache"[..]]);
        assert_eq!(list.len(), 3);
    }

    #[test]
    fn quoted_inner_requires_one_whole_quoted_string() {
        let cases: &[(&str, Option<&str>)] = &[
            (r#""abc""#, Some("abc")),
            (r#""""#, Some("")),
            (r#""a\"b""#, Some(r#"a\"b"#)),
            (r#""abc"x"#, None),
            (r#""abc"#, None),
            ("abc", None),
        ];
        for (value, expected) in cases {
            assert_eq!(
                quoted_inner(value.as_bytes()),
                expected.map(str::as_bytes),
                "{value:?}"
            );
        }
    }

    #[test]
    fn token_syntax() {
        assert!(is_token(b"max-age"));
        assert!(is_token(b"'3600'"));
        assert!(!is_token(b""));
        assert!(!is_token(b"a b"));
        assert!(!is_token(b"a\"b"));
    }
}
