//! Byte ranges (RFC 9110 §14) and the pieces a cache keeps of a representation (RFC 9111
//! §3.3–3.4). The input, split at newlines, is read as `Range` values, as `Content-Range`
//! values and as the pieces those describe. Never a panic, and:
//! - a parsed range or content range writes back to text that parses to the same thing;
//! - a range resolved against a length lies inside it, or is unsatisfiable;
//! - a content range has first ≤ last < complete length, and a 206 with it is a piece only
//!   when its content is exactly that long;
//! - two pieces combine only into one holding both, with nothing in it that neither held;
//! - the missing range of a piece, combined with it, makes the whole representation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sepia_cache_policy::{
    parse_content_range, parse_range_value, resolve_range, write_content_range, ByteRange,
    FieldList, Piece, RangeOutcome,
};

fuzz_target!(|data: &[u8]| {
    let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let mut pieces = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        check_range(line, lines.len() as u64 * 37 + i as u64);
        if let Some(piece) = check_content_range(line) {
            pieces.push(piece);
        }
    }
    for a in &pieces {
        check_missing(a);
        for b in &pieces {
            check_combined(a, b);
        }
    }
});

fn check_range(value: &[u8], length: u64) {
    let Some(range) = parse_range_value(value) else {
        return;
    };
    let text = match range {
        ByteRange::FromTo(first, last) => {
            assert!(first <= last, "{range:?}");
            format!("bytes={first}-{last}")
        }
        ByteRange::From(first) => format!("bytes={first}-"),
        ByteRange::Suffix(n) => format!("bytes=-{n}"),
    };
    assert_eq!(parse_range_value(text.as_bytes()), Some(range), "{text}");
    match resolve_range(range, length) {
        RangeOutcome::Partial { start, end } => assert!(start <= end && end < length),
        RangeOutcome::Unsatisfiable => {}
        RangeOutcome::Full => panic!("a single range resolves to a part or nothing"),
    }
}

fn check_content_range(value: &[u8]) -> Option<Piece> {
    let range = parse_content_range(value)?;
    assert!(range.first <= range.last);
    let complete = range.complete_length?;
    assert!(range.last < complete);
    let mut text = Vec::new();
    let part = RangeOutcome::Partial {
        start: range.first,
        end: range.last,
    };
    write_content_range(part, complete, &mut text);
    assert_eq!(parse_content_range(&text), Some(range));
    let value = std::str::from_utf8(value).ok()?;
    let fields = FieldList::from_pairs(&[("Content-Range", value)]);
    let len = range.last - range.first + 1;
    if let Some(more) = len.checked_add(1) {
        assert_eq!(Piece::of_response(&fields, Some(more)), None);
    }
    let piece = Piece::of_response(&fields, Some(len)).expect("consistent: a piece");
    assert_eq!(
        (piece.first, piece.last, piece.complete),
        (range.first, range.last, complete)
    );
    Some(piece)
}

fn check_combined(a: &Piece, b: &Piece) {
    let Some(union) = a.combined(b) else {
        let gap = a.complete != b.complete || a.last + 1 < b.first || b.last + 1 < a.first;
        assert!(gap, "{a:?} and {b:?} touch but did not combine");
        return;
    };
    assert!(union.holds(a.first, a.last) && union.holds(b.first, b.last));
    assert_eq!(union.first, a.first.min(b.first));
    assert_eq!(union.last, a.last.max(b.last));
    assert!(u128::from(union.len()) <= u128::from(a.len()) + u128::from(b.len()));
}

fn check_missing(piece: &Piece) {
    let Some((first, last)) = piece.missing() else {
        return;
    };
    assert!(first <= last && last < piece.complete);
    let rest = Piece {
        first,
        last,
        complete: piece.complete,
    };
    let whole = piece
        .combined(&rest)
        .expect("the missing range touches the piece");
    assert!(whole.is_complete(), "{piece:?} + {rest:?}");
    let sum = u128::from(piece.len()) + u128::from(rest.len());
    assert_eq!(u128::from(whole.len()), sum, "no overlap");
}
