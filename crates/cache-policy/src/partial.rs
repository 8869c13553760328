//! Partial content a cache keeps and completes (RFC 9111 §3.3–3.4): the piece of a
//! representation a `206` carries, whether two pieces may be combined, and the one range that
//! would complete a piece.
//!
//! A piece is kept only when the `206` says exactly which bytes it carries: one
//! `Content-Range` with a known complete length (RFC 9110 §14.4) and content of exactly that
//! range's length. Pieces are combined only when both carry the same strong validator: "If
//! the stored response has the same strong validator as the new response, the cache MAY
//! combine them" (RFC 9111 §3.4, RFC 9110 §8.8.1) — a weak one says nothing about bytes.

use crate::etag::EntityTag;
use crate::fields::Fields;
use crate::range::parse_content_range;
use sepia_http1::HeaderId;

/// Bytes `first..=last` of a representation of `complete` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub first: u64,
    /// Inclusive.
    pub last: u64,
    /// The complete length of the representation.
    pub complete: u64,
}

impl Piece {
    /// The piece a `206` carries, judged from its fields and the length of its content
    /// (`None` for content whose length was not announced): `None` unless it has exactly one
    /// valid `Content-Range` with a complete length and its content is that range's length.
    /// A multipart `206` has no `Content-Range` of its own (RFC 9110 §14.6), so never counts.
    pub fn of_response<F: Fields>(fields: &F, content_length: Option<u64>) -> Option<Piece> {
        let mut lines = fields.known(HeaderId::ContentRange);
        let value = lines.next()?;
        if lines.next().is_some() {
            return None;
        }
        let range = parse_content_range(value)?;
        let piece = Piece {
            first: range.first,
            last: range.last,
            complete: range.complete_length?,
        };
        (content_length == Some(piece.len())).then_some(piece)
    }

    /// The number of bytes it holds.
    pub fn len(&self) -> u64 {
        self.last - self.first + 1
    }

    /// Never: a piece holds at least one byte. (For the `len` lint.)
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether it is the whole representation.
    pub fn is_complete(&self) -> bool {
        self.first == 0 && self.last + 1 == self.complete
    }

    /// Whether bytes `start..=end` all lie in it.
    pub fn holds(&self, start: u64, end: u64) -> bool {
        self.first <= start && end <= self.last
    }

    /// The piece made of both when they belong to the same representation length and overlap
    /// or touch; `None` when a gap would remain between them.
    pub fn combined(&self, other: &Piece) -> Option<Piece> {
        if self.complete != other.complete {
            return None;
        }
        let touch = self.first <= other.last.saturating_add(1)
            && other.first <= self.last.saturating_add(1);
        touch.then_some(Piece {
            first: self.first.min(other.first),
            last: self.last.max(other.last),
            complete: self.complete,
        })
    }

    /// Where, in this (stored) piece's bytes, those before `new` end and those after `new`
    /// start: a combination of the two (see [`Piece::combined`]) is this piece's bytes
    /// `0..before_end`, then `new`'s, then this piece's `after_start..len`.
    pub fn around(&self, new: &Piece) -> (u64, u64) {
        let before_end = new.first.saturating_sub(self.first).min(self.len());
        let after_start = (new.last + 1).saturating_sub(self.first).min(self.len());
        (before_end, after_start.max(before_end))
    }

    /// The one range (`first`, `last`) whose bytes would make it complete: the tail after a
    /// piece that starts the representation, or the head before one that ends it. `None`
    /// when it is complete or when bytes are missing on both sides (two ranges would need a
    /// multipart answer, which Sepia does not parse).
    pub fn missing(&self) -> Option<(u64, u64)> {
        let starts = self.first == 0;
        let ends = self.last + 1 == self.complete;
        match (starts, ends) {
            (true, false) => Some((self.last + 1, self.complete - 1)),
            (false, true) => Some((0, self.first - 1)),
            _ => None,
        }
    }
}

/// Whether two `ETag` values are the same strong validator (RFC 9110 §8.8.3.2): what lets a
/// cache combine a stored piece with a new response (RFC 9111 §3.4).
pub fn same_strong_validator(stored: Option<&[u8]>, new: Option<&[u8]>) -> bool {
    match (
        stored.and_then(EntityTag::parse),
        new.and_then(EntityTag::parse),
    ) {
        (Some(a), Some(b)) => a.strong_eq(&b),
        _ => false,
    }
}

/// Whether an `ETag` value is a strong validator: a piece without one can never be combined
/// or completed, so it is not worth keeping.
pub fn is_strong_validator(etag: Option<&[u8]>) -> bool {
    etag.and_then(EntityTag::parse).is_some_and(|t| !t.weak)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::FieldList;

    fn piece(first: u64, last: u64, complete: u64) -> Piece {
        Piece {
            first,
            last,
            complete,
        }
    }

    #[test]
    fn a_piece_needs_one_content_range_with_a_complete_length_and_its_exact_content() {
        type Pairs<'a> = &'a [(&'a str, &'a str)];
        let cases: &[(Pairs, Option<u64>, Option<Piece>)] = &[
            (
                &[("Content-Range", "bytes 0-4/10")],
                Some(5),
                Some(piece(0, 4, 10)),
            ),
            (
                &[("content-range", "bytes 5-9/10")],
                Some(5),
                Some(piece(5, 9, 10)),
            ),
            // The content is not the range's length (the suite's inconsistent 206s).
            (&[("Content-Range", "bytes 4-9/10")], Some(5), None),
            (&[("Content-Range", "bytes 0-4/10")], None, None),
            // Unknown complete length: nothing to complete against.
            (&[("Content-Range", "bytes 0-4/*")], Some(5), None),
            (&[("Content-Range", "bytes */10")], Some(0), None),
            (&[("Content-Range", "bytes 4-2/10")], Some(0), None),
            (&[("Content-Range", "bytes 0-10/10")], Some(11), None),
            (
                &[
                    ("Content-Range", "bytes 0-4/10"),
                    ("Content-Range", "bytes 0-4/10"),
                ],
                Some(5),
                None,
            ),
            // A multipart/byteranges 206.
            (
                &[("Content-Type", "multipart/byteranges; boundary=x")],
                Some(99),
                None,
            ),
        ];
        for (fields, length, expected) in cases {
            let list = FieldList::from_pairs(fields);
            assert_eq!(Piece::of_response(&list, *length), *expected, "{fields:?}");
        }
    }

    #[test]
    fn pieces_combine_when_they_overlap_or_touch() {
        let cases = [
            (piece(0, 4, 10), piece(5, 9, 10), Some(piece(0, 9, 10))),
            (piece(5, 9, 10), piece(0, 4, 10), Some(piece(0, 9, 10))),
            (piece(0, 6, 10), piece(3, 8, 10), Some(piece(0, 8, 10))),
            (piece(2, 3, 10), piece(0, 9, 10), Some(piece(0, 9, 10))),
            (piece(0, 3, 10), piece(5, 9, 10), None),
            // Different complete lengths: different representations.
            (piece(0, 4, 10), piece(5, 9, 11), None),
        ];
        for (a, b, expected) in cases {
            assert_eq!(a.combined(&b), expected, "{a:?} + {b:?}");
        }
        assert!(piece(0, 9, 10).is_complete());
        assert!(!piece(0, 8, 10).is_complete());
        assert!(piece(2, 6, 10).holds(2, 6));
        assert!(!piece(2, 6, 10).holds(1, 6));
        assert!(!piece(2, 6, 10).holds(2, 7));
        assert_eq!(piece(2, 6, 10).len(), 5);
    }

    #[test]
    fn a_combination_keeps_the_stored_bytes_around_the_new_ones() {
        // (stored, new, stored bytes kept before, stored bytes kept from)
        let cases = [
            // New after the stored bytes, overlapping: stored 0..5 before, nothing after.
            (piece(0, 6, 10), piece(5, 9, 10), (5, 7)),
            // New before, overlapping: nothing before, stored bytes from offset 3 (byte 6).
            (piece(3, 9, 10), piece(0, 5, 10), (0, 3)),
            // New inside: bytes 2-3 before, 7-9 after.
            (piece(2, 9, 10), piece(4, 6, 10), (2, 5)),
            // New covering it all: nothing kept.
            (piece(2, 6, 10), piece(0, 9, 10), (0, 5)),
            // Touching: all of it before, or all of it after.
            (piece(0, 4, 10), piece(5, 9, 10), (5, 5)),
            (piece(5, 9, 10), piece(0, 4, 10), (0, 0)),
        ];
        for (stored, new, expected) in cases {
            let (before_end, after_start) = stored.around(&new);
            assert_eq!(
                (before_end, after_start),
                expected,
                "{stored:?} around {new:?}"
            );
            let union = stored.combined(&new).expect("they touch");
            let kept = before_end + (stored.len() - after_start);
            assert_eq!(kept + new.len(), union.len(), "{stored:?} + {new:?}");
        }
    }

    #[test]
    fn only_one_missing_range_completes_a_piece() {
        assert_eq!(piece(0, 3, 10).missing(), Some((4, 9)));
        assert_eq!(piece(6, 9, 10).missing(), Some((0, 5)));
        assert_eq!(piece(2, 6, 10).missing(), None);
        assert_eq!(piece(0, 9, 10).missing(), None);
    }

    #[test]
    fn only_the_same_strong_validator_lets_pieces_combine() {
        let s = |v: &'static str| Some(v.as_bytes());
        assert!(same_strong_validator(s("\"a\""), s("\"a\"")));
        assert!(!same_strong_validator(s("\"a\""), s("\"b\"")));
        assert!(!same_strong_validator(s("W/\"a\""), s("W/\"a\"")));
        assert!(!same_strong_validator(s("\"a\""), s("W/\"a\"")));
        assert!(!same_strong_validator(None, s("\"a\"")));
        assert!(!same_strong_validator(s("\"a\""), None));
        assert!(is_strong_validator(s("\"a\"")));
        assert!(!is_strong_validator(s("W/\"a\"")));
        assert!(!is_strong_validator(None));
    }
}
