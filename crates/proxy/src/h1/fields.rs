//! The policy reads header fields through its `Fields` trait; this adapter serves it from a
//! parsed head's header list. Well-known names are matched by the `HeaderId` the codec
//! assigned at parse time, so no string compare runs for them.

use sepia_cache_policy::Fields;
use sepia_http1::{HeaderId, HeaderList};

pub struct HeadFields<'h>(pub HeaderList<'h>);

impl Fields for HeadFields<'_> {
    fn lines<'a>(&'a self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        self.0.iter().map(|h| (h.name, h.value))
    }

    fn values<'a>(&'a self, name: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        let id = HeaderId::from_name(name);
        self.0
            .iter()
            .filter(move |h| {
                h.id == id && (id != HeaderId::Other || h.name.eq_ignore_ascii_case(name))
            })
            .map(|h| h.value)
    }

    fn known<'a>(&'a self, id: HeaderId) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.0.get_all(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sepia_http1::{BytesMut, Limits, ResponseDecoder, ResponseHead};

    #[test]
    fn values_match_known_and_other_names_case_insensitively() {
        let mut buf = BytesMut::from(
            &b"HTTP/1.1 200 OK\r\nCache-Control: max-age=5\r\nX-Thing: 1\r\n\
               cache-control: public\r\nx-thing: 2\r\n\r\n"[..],
        );
        let mut head = ResponseHead::default();
        assert_eq!(
            ResponseDecoder::new(Limits::default()).decode(&mut buf, &mut head),
            Ok(true)
        );
        let f = HeadFields(head.headers());
        let cc: Vec<&[u8]> = f.known(HeaderId::CacheControl).collect();
        assert_eq!(cc, [&b"max-age=5"[..], b"public"]);
        // By name, known fields are found through their id too.
        let cc: Vec<&[u8]> = f.values(b"CACHE-control").collect();
        assert_eq!(cc, [&b"max-age=5"[..], b"public"]);
        let other: Vec<&[u8]> = f.values(b"X-THING").collect();
        assert_eq!(other, [&b"1"[..], b"2"]);
        assert_eq!(f.first(HeaderId::ETag), None);
    }
}
