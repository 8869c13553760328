//! A parsed head's header fields (and other parts), kept as positions in the head's frozen
//! buffer.
//!
//! Each field line is three small numbers (its `HeaderId` and where its name and value lie in
//! `raw`), not two `Bytes` slices: cloning a `Bytes` and dropping it again are two atomic
//! read-modify-writes on the buffer's reference count, and a miss parses a request and a
//! response of ten or so fields each. Measured at the time of the change (bench/RESULTS.md,
//! 2026-11-25, "header fields as positions"). Readers borrow the head and get plain slices;
//! the few that must keep a value past the head (the access log's) take a `Bytes` slice of
//! it ([`HeaderList::get_bytes`], or `slice_ref` on the head's `raw()`).

use bytes::Bytes;

use crate::encode::CRLF;
use crate::fields::{list_contains, list_elements};
use crate::header_id::{HeaderId, IdSet};

/// Where a part of a head lies in the head's `raw`: byte offsets `start..end`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span(u32, u32);

impl Span {
    /// The span of `part`, a sub-slice of `whole`, found from the addresses (no byte compared).
    /// An empty part is the empty span wherever it points (the parser may hand out a static
    /// empty string, as for a missing reason phrase).
    ///
    /// # Panics
    /// If a non-empty `part` does not lie within `whole` (a parser bug, never
    /// input-dependent), or `whole` is 4 GiB or longer (heads are limited to far less).
    pub(crate) fn of(whole: &[u8], part: &[u8]) -> Span {
        if part.is_empty() {
            return Span::default();
        }
        // One check for all three conditions (every field of every head comes here): a part
        // before `whole` wraps `start` around, and then `end` below it.
        let start = (part.as_ptr() as usize).wrapping_sub(whole.as_ptr() as usize);
        let end = start.wrapping_add(part.len());
        assert!(
            start < end && end <= whole.len() && end <= u32::MAX as usize,
            "a parsed part lies within its head, below 4 GiB"
        );
        Span(start as u32, end as u32)
    }

    /// The bytes of `raw` this span covers.
    pub(crate) fn get(self, raw: &[u8]) -> &[u8] {
        &raw[self.0 as usize..self.1 as usize]
    }
}

/// Where one field line's name and value lie in its head's `raw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) id: HeaderId,
    name: Span,
    value: Span,
}

impl Field {
    /// The field whose name and value are the sub-slices `name` and `value` of `raw`.
    /// Panics as [`Span::of`] does.
    pub(crate) fn within(raw: &[u8], id: HeaderId, name: &[u8], value: &[u8]) -> Field {
        Field {
            id,
            name: Span::of(raw, name),
            value: Span::of(raw, value),
        }
    }
}

/// One header field line borrowed from its head. The value has no leading or trailing
/// whitespace (RFC 9112 §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    pub id: HeaderId,
    pub name: &'a [u8],
    pub value: &'a [u8],
}

/// The header fields of a parsed head, in the order received.
#[derive(Clone, Copy, Debug)]
pub struct HeaderList<'a> {
    raw: &'a Bytes,
    fields: &'a [Field],
    present: IdSet,
}

impl<'a> HeaderList<'a> {
    /// `present` holds the id of every field in `fields` (it may hold more, never fewer).
    pub(crate) fn new(raw: &'a Bytes, fields: &'a [Field], present: IdSet) -> Self {
        HeaderList {
            raw,
            fields,
            present,
        }
    }

    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Every field line, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Header<'a>> + Clone + 'a {
        let raw: &'a [u8] = self.raw;
        self.fields.iter().map(move |f| Header {
            id: f.id,
            name: f.name.get(raw),
            value: f.value.get(raw),
        })
    }

    /// The first value of the field `id`.
    pub fn get(&self, id: HeaderId) -> Option<&'a [u8]> {
        self.get_all(id).next()
    }

    /// Every value of the field `id`, in order.
    pub fn get_all(&self, id: HeaderId) -> impl Iterator<Item = &'a [u8]> + 'a {
        let raw: &'a [u8] = self.raw;
        let fields = if self.present.contains(id) {
            self.fields
        } else {
            &[]
        };
        fields
            .iter()
            .filter(move |f| f.id == id)
            .map(move |f| f.value.get(raw))
    }

    /// The first value of the field `id` as a slice of the head's buffer that outlives the
    /// head (one reference count taken: for the few values kept past the exchange, such as
    /// the access log's).
    pub fn get_bytes(&self, id: HeaderId) -> Option<Bytes> {
        self.get(id).map(|v| self.raw.slice_ref(v))
    }

    /// The bytes field lines `lines` (indices into [`HeaderList::iter`]) were received as,
    /// when each was exactly `name: value` CRLF and each followed the one before with nothing
    /// between: what writing those lines one by one would produce, as one slice to copy.
    /// `None` otherwise (other whitespace around a value, an empty value, a line of the range
    /// not received next to the previous one, an empty range).
    ///
    /// Relaying a response copies its fields in runs this way: per line, four appends were
    /// most of the cost of writing a relayed head (callgrind, bench/RESULTS.md issue 23).
    pub fn as_received(&self, lines: std::ops::Range<usize>) -> Option<&'a [u8]> {
        let raw: &'a [u8] = self.raw;
        let fields = self.fields.get(lines)?;
        let (first, last) = (fields.first()?, fields.last()?);
        let mut next_line = first.name.0 as usize;
        for f in fields {
            let (name_start, name_end) = (f.name.0 as usize, f.name.1 as usize);
            let (value_start, value_end) = (f.value.0 as usize, f.value.1 as usize);
            let canonical = name_start == next_line
                && value_start == name_end + 2
                && value_end > value_start
                && raw.get(name_end..value_start) == Some(&b": "[..])
                && raw.get(value_end..value_end + 2) == Some(CRLF);
            if !canonical {
                return None;
            }
            next_line = value_end + 2;
        }
        debug_assert!(last.value.1 as usize + 2 == next_line);
        raw.get(first.name.0 as usize..next_line)
    }

    /// True when any Connection field lists `name` as a token (case-insensitive), RFC 9110
    /// §7.6.1.
    pub fn connection_lists(&self, name: &[u8]) -> bool {
        self.get_all(HeaderId::Connection)
            .any(|v| list_contains(v, name))
    }

    /// The Connection members, parsed once for checking many names against them (a proxy
    /// checks every field it forwards, RFC 9110 §7.6.1).
    pub fn connection_members(&self) -> ConnectionMembers<'a> {
        let mut members = ConnectionMembers {
            listed: [&[]; CONNECTION_MEMBERS],
            len: 0,
            overflow: None,
        };
        for member in self.get_all(HeaderId::Connection).flat_map(list_elements) {
            if members.len == CONNECTION_MEMBERS {
                members.overflow = Some(*self);
                break;
            }
            members.listed[members.len] = member;
            members.len += 1;
        }
        members
    }
}

/// Connection members kept by [`ConnectionMembers`]; real messages send one or two
/// (`keep-alive`, `close`, an extension's field).
const CONNECTION_MEMBERS: usize = 8;

/// A head's Connection members ([`HeaderList::connection_members`]). Splitting the
/// Connection values again for every forwarded field was 1.6 % of a miss's instructions
/// (callgrind: `list_contains` for each of the ten fields of a response carrying
/// `Connection: keep-alive`).
#[derive(Clone, Copy, Debug)]
pub struct ConnectionMembers<'a> {
    listed: [&'a [u8]; CONNECTION_MEMBERS],
    len: usize,
    /// More members than fit: the fields are scanned per name instead.
    overflow: Option<HeaderList<'a>>,
}

impl ConnectionMembers<'_> {
    /// True when `name` is one of the members (case-insensitive).
    pub fn lists(&self, name: &[u8]) -> bool {
        match &self.overflow {
            Some(headers) => headers.connection_lists(name),
            None => self.listed[..self.len]
                .iter()
                .any(|m| m.eq_ignore_ascii_case(name)),
        }
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_as_received_only_when_canonical_and_adjacent() {
        use crate::{Limits, ResponseDecoder, ResponseHead};
        let mut buf = bytes::BytesMut::from(
            &b"HTTP/1.1 200 OK\r\nA: 1\r\nBb: 22\r\nC:  3\r\nD: 4\r\nE: 5 \r\nF:\r\nG: 7\r\n\r\n"[..],
        );
        let mut head = ResponseHead::default();
        assert_eq!(
            ResponseDecoder::new(Limits::default()).decode(&mut buf, &mut head),
            Ok(true)
        );
        let list = head.headers();
        assert_eq!(list.as_received(0..2), Some(&b"A: 1\r\nBb: 22\r\n"[..]));
        assert_eq!(list.as_received(1..2), Some(&b"Bb: 22\r\n"[..]));
        assert_eq!(list.as_received(3..4), Some(&b"D: 4\r\n"[..]));
        assert_eq!(list.as_received(6..7), Some(&b"G: 7\r\n"[..]));
        // Two spaces before a value, one after it, an empty value: written differently.
        assert_eq!(list.as_received(2..3), None);
        assert_eq!(list.as_received(1..4), None);
        assert_eq!(list.as_received(4..5), None);
        assert_eq!(list.as_received(5..6), None);
        // Not next to each other in the head; empty or out of range.
        assert_eq!(list.as_received(2..2), None);
        assert_eq!(list.as_received(6..8), None);
    }

    #[test]
    fn fields_read_back_as_slices_of_raw() {
        let raw =
            Bytes::from_static(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close, x-y\r\n\r\n");
        let host = Field::within(&raw, HeaderId::Host, &raw[16..20], &raw[22..23]);
        let conn = Field::within(&raw, HeaderId::Connection, &raw[25..35], &raw[37..47]);
        let fields = [host, conn];
        let mut present = IdSet::default();
        present.insert(HeaderId::Host);
        present.insert(HeaderId::Connection);
        let list = HeaderList::new(&raw, &fields, present);
        assert_eq!(list.len(), 2);
        let lines: Vec<_> = list.iter().map(|h| (h.id, h.name, h.value)).collect();
        assert_eq!(
            lines,
            [
                (HeaderId::Host, &b"Host"[..], &b"a"[..]),
                (HeaderId::Connection, b"Connection", b"close, x-y"),
            ]
        );
        assert_eq!(list.get(HeaderId::Host), Some(&b"a"[..]));
        assert_eq!(list.get(HeaderId::ETag), None);
        let kept = list.get_bytes(HeaderId::Host).unwrap();
        assert_eq!((&kept[..], kept.as_ptr()), (&b"a"[..], raw[22..].as_ptr()));
        assert!(list.connection_lists(b"X-Y"));
        assert!(!list.connection_lists(b"x"));
        let members = list.connection_members();
        assert!(members.lists(b"X-Y") && members.lists(b"Close") && !members.lists(b"x"));
        assert!(!members.is_empty());
    }

    #[test]
    fn connection_members_past_the_kept_ones_are_still_found() {
        let value = b"a, b, c, d, e, f, g, h, i, j";
        let mut raw_text = b"Connection: ".to_vec();
        raw_text.extend_from_slice(value);
        let raw = Bytes::from(raw_text);
        let conn = Field::within(&raw, HeaderId::Connection, &raw[..10], &raw[12..]);
        let mut present = IdSet::default();
        present.insert(HeaderId::Connection);
        let fields = [conn];
        let members = HeaderList::new(&raw, &fields, present).connection_members();
        for name in [&b"a"[..], b"H", b"i", b"J"] {
            assert!(members.lists(name), "{name:?}");
        }
        assert!(!members.lists(b"k"));
        let none = HeaderList::new(&raw, &[], IdSet::default()).connection_members();
        assert!(none.is_empty() && !none.lists(b"a"));
    }

    #[test]
    #[should_panic(expected = "lies within its head")]
    fn a_slice_outside_raw_is_a_bug() {
        let raw = b"abc";
        let other = b"def";
        assert_eq!(
            Span::of(raw, &other[..0]),
            Span::default(),
            "empty: anywhere"
        );
        Field::within(raw, HeaderId::Other, &other[..], &other[..]);
    }
}
