//! The codec's parsed header list seen through the protocol-neutral views: the cache policy's
//! `Fields` and the pipeline's `FieldView`. Well-known names are matched by the `HeaderId`
//! the codec assigned at parse time, so no string compare runs for them.

use bytes::{Bytes, BytesMut};
use sepia_cache_policy::Fields;
use sepia_http1::{put_header, HeaderId, HeaderList};

use http::HeaderMap;

use crate::model::{Field, FieldView, Trailers};

/// The trailer fields of an HTTP/2 message (the crate's `HeaderMap`) that may go on (RFC 9110
/// §6.5.1): the one filter both HTTP/2 sides use.
pub fn received_trailers(map: Option<HeaderMap>) -> Trailers {
    let Some(map) = map else {
        return Trailers::default();
    };
    let kept = map
        .iter()
        .filter(|(n, _)| sepia_http1::allowed_in_trailers(n.as_str().as_bytes()))
        .map(|(n, v)| {
            let name = Bytes::copy_from_slice(n.as_str().as_bytes());
            (name, Bytes::copy_from_slice(v.as_bytes()))
        });
    Trailers::new(kept.collect())
}

/// A head's field lines, borrowed.
#[derive(Clone, Copy)]
pub struct H1Fields<'h>(pub HeaderList<'h>);

/// Writes the field lines `run` (indices into [`FieldView::each`]) of `fields` in HTTP/1.1
/// form: copied at once when they arrived in exactly that form (`FieldView::as_received`),
/// else line by line. The bytes are the same either way; per line, the copy saves four
/// appends (callgrind, bench/RESULTS.md issue 23).
pub fn put_run(out: &mut BytesMut, fields: &impl FieldView, run: std::ops::Range<usize>) {
    if run.is_empty() {
        return;
    }
    if let Some(lines) = fields.as_received(run.clone()) {
        out.extend_from_slice(lines);
        return;
    }
    for f in fields.each().skip(run.start).take(run.len()) {
        put_header(out, f.name, f.value);
    }
}

impl Fields for H1Fields<'_> {
    fn lines<'a>(&'a self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        self.0.iter().map(|h| (h.name, h.value))
    }

    fn lines_with_ids<'a>(&'a self) -> impl Iterator<Item = (HeaderId, &'a [u8], &'a [u8])> + 'a {
        self.0.iter().map(|h| (h.id, h.name, h.value))
    }

    fn values<'a>(&'a self, name: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        let id = HeaderId::from_name(name);
        // A known name is found by its id: one bit test when the head lacks it (the Vary
        // secondary key asks for its fields by name on every Vary'd miss).
        let (known, other) = if id == HeaderId::Other {
            (None, Some(self.0.iter()))
        } else {
            (Some(self.0.get_all(id)), None)
        };
        let other = other
            .into_iter()
            .flatten()
            .filter(move |h| h.id == HeaderId::Other && h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value);
        known.into_iter().flatten().chain(other)
    }

    fn known<'a>(&'a self, id: HeaderId) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.0.get_all(id)
    }
}

impl FieldView for H1Fields<'_> {
    fn each(&self) -> impl Iterator<Item = Field<'_>> + '_ {
        self.0.iter().map(|h| Field {
            id: h.id,
            name: h.name,
            value: h.value,
        })
    }

    fn connection_names(&self) -> impl Fn(&[u8]) -> bool + '_ {
        let members = self.0.connection_members();
        move |name| !members.is_empty() && members.lists(name)
    }

    fn shared(&self, id: HeaderId) -> Option<Bytes> {
        self.0.get_bytes(id)
    }

    fn as_received(&self, lines: std::ops::Range<usize>) -> Option<&[u8]> {
        self.0.as_received(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h1::parsed::response;

    fn parsed(raw: &[u8]) -> sepia_http1::ResponseHead {
        response(std::str::from_utf8(raw).unwrap())
    }

    #[test]
    fn values_match_known_and_other_names_case_insensitively() {
        let head = parsed(
            b"HTTP/1.1 200 OK\r\nCache-Control: max-age=5\r\nX-Thing: 1\r\n\
              cache-control: public\r\nx-thing: 2\r\n\r\n",
        );
        let f = H1Fields(head.headers());
        let cc: Vec<&[u8]> = f.known(HeaderId::CacheControl).collect();
        assert_eq!(cc, [&b"max-age=5"[..], b"public"]);
        // By name, known fields are found through their id too.
        let cc: Vec<&[u8]> = f.values(b"CACHE-control").collect();
        assert_eq!(cc, [&b"max-age=5"[..], b"public"]);
        let other: Vec<&[u8]> = f.values(b"X-THING").collect();
        assert_eq!(other, [&b"1"[..], b"2"]);
        assert_eq!(f.first(HeaderId::ETag), None);
    }

    #[test]
    fn connection_names_are_the_members_of_every_connection_line() {
        let head = parsed(
            b"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-A\r\nConnection: x-b\r\nX-A: 1\r\n\r\n",
        );
        let f = H1Fields(head.headers());
        let named = f.connection_names();
        assert!(named(b"x-a") && named(b"X-B") && named(b"Keep-Alive"));
        assert!(!named(b"x-c"));
        let plain = parsed(b"HTTP/1.1 200 OK\r\nX-A: 1\r\n\r\n");
        let none = H1Fields(plain.headers());
        assert!(!none.connection_names()(b"x-a"));
        assert_eq!(none.shared(HeaderId::ETag), None);
    }
}
