//! Helpers shared by the fuzz targets: turning fuzzer bytes into read patterns, and a simple
//! whole-buffer reference decoder for chunked bodies to compare the incremental one against.

use sepia_http1::{
    allowed_in_trailers, parse_trailers, put_trailers, Bytes, BytesMut, ChunkError, ChunkEvent,
    ChunkedDecoder, MAX_CHUNK_EXTENSION_BYTES, MAX_TRAILER_BYTES,
};

/// Reads the first two bytes as a split point into the rest (wrapped into range).
pub fn split_input(data: &[u8]) -> Option<(usize, &[u8])> {
    let (prefix, rest) = (data.get(..2)?, &data[2..]);
    let split = usize::from(u16::from_le_bytes([prefix[0], prefix[1]])) % (rest.len() + 1);
    Some((split, rest))
}

/// Piece sizes for feeding a stream, from a one-byte seed (xorshift; sizes 1..=64, now and then
/// large). The same seed always gives the same pattern.
pub struct Pieces(u32);

impl Pieces {
    pub fn new(seed: u8) -> Self {
        Pieces(u32::from(seed).wrapping_mul(2_654_435_761) | 1)
    }

    pub fn next_len(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        if self.0 % 16 == 0 {
            4096
        } else {
            (self.0 % 64) as usize + 1
        }
    }
}

/// What feeding a whole chunked stream to a decoder produced.
#[derive(Debug, PartialEq, Eq)]
pub enum ChunkedOutcome {
    /// The body ended: its data, raw trailers and the bytes left after it.
    Complete {
        data: Vec<u8>,
        trailers: Vec<u8>,
        rest: Vec<u8>,
    },
    /// The input ran out first; `data` is what was decoded so far.
    Incomplete {
        data: Vec<u8>,
    },
    Error,
}

/// Feeds `input` to a `ChunkedDecoder` in pieces of the sizes `next_len` gives.
pub fn decode_incrementally(
    input: &[u8],
    mut next_len: impl FnMut() -> usize,
) -> (ChunkedOutcome, Option<ChunkError>) {
    let mut decoder = ChunkedDecoder::new();
    let mut buf = BytesMut::new();
    let mut data = Vec::new();
    let mut fed = 0;
    loop {
        match decoder.decode(&mut buf) {
            Err(e) => return (ChunkedOutcome::Error, Some(e)),
            Ok(Some(ChunkEvent::Data(d))) => {
                assert!(!d.is_empty(), "empty Data event");
                data.extend_from_slice(&d);
            }
            Ok(Some(ChunkEvent::End { trailers })) => {
                assert!(decoder.is_done());
                // The decoder validated every line, so the filter must accept the section.
                assert!(
                    check_trailers(&trailers),
                    "decoded trailers refused: {trailers:?}"
                );
                buf.extend_from_slice(&input[fed..]);
                let outcome = ChunkedOutcome::Complete {
                    data,
                    trailers: trailers.to_vec(),
                    rest: buf.to_vec(),
                };
                return (outcome, None);
            }
            Ok(None) if fed < input.len() => {
                let end = (fed + next_len().max(1)).min(input.len());
                buf.extend_from_slice(&input[fed..end]);
                fed = end;
            }
            Ok(None) => return (ChunkedOutcome::Incomplete { data }, None),
        }
    }
}

/// Filters a trailer section with `parse_trailers` and checks what it kept: only allowed
/// names, as slices of `raw` (no copy), one per line that was not dropped, and written back
/// with `put_trailers` they parse to the same fields with nothing dropped. Returns whether the
/// section was accepted at all (arbitrary bytes may be refused; that must not panic either).
pub fn check_trailers(raw: &Bytes) -> bool {
    let Ok(trailers) = parse_trailers(raw) else {
        return false;
    };
    let lines = raw.iter().filter(|&&b| b == b'\n').count();
    assert_eq!(trailers.len() + trailers.dropped(), lines, "a line lost");
    let range = raw.as_ptr_range();
    for (name, value) in trailers.iter() {
        assert!(allowed_in_trailers(name), "kept a forbidden field {name:?}");
        assert!(
            !name.is_empty() && range.contains(&name.as_ptr()),
            "{name:?}"
        );
        assert!(
            value.is_empty() || range.contains(&value.as_ptr()),
            "{value:?}"
        );
        assert!(name.iter().all(|&b| is_tchar(b)), "{name:?}");
        assert!(value.iter().all(|&b| is_field_byte(b)), "{value:?}");
        assert!(
            !value.starts_with(b" ") && !value.ends_with(b" "),
            "{value:?}"
        );
        assert!(
            !value.starts_with(b"\t") && !value.ends_with(b"\t"),
            "{value:?}"
        );
    }
    let mut written = BytesMut::new();
    put_trailers(&mut written, trailers.iter());
    let again = parse_trailers(&written.freeze()).expect("written trailers parse");
    assert_eq!(again.dropped(), 0);
    assert!(
        again.iter().eq(trailers.iter()),
        "round trip changed the fields"
    );
    true
}

/// tchar (RFC 9110 §5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// HTAB, SP, VCHAR, obs-text.
fn is_field_byte(b: u8) -> bool {
    b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80
}

/// RFC 9112 §7.1 decoded the obvious way, on the whole input at once, with the same bounds as
/// `ChunkedDecoder`. It only reports an error once the offending line is complete, so where it
/// says `Incomplete` the incremental decoder may already have failed.
pub fn reference_decode(input: &[u8]) -> ChunkedOutcome {
    let mut data = Vec::new();
    let mut pos = 0;
    loop {
        // chunk-size [ BWS ; chunk-ext ] CRLF
        let Some(lf) = input[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| pos + i)
        else {
            return ChunkedOutcome::Incomplete { data };
        };
        if lf == pos || input[lf - 1] != b'\r' {
            return ChunkedOutcome::Error;
        }
        let line = &input[pos..lf - 1];
        if line.len() > MAX_CHUNK_EXTENSION_BYTES {
            return ChunkedOutcome::Error;
        }
        let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
        if digits == 0 {
            return ChunkedOutcome::Error;
        }
        let mut size: u64 = 0;
        for &d in &line[..digits] {
            let v = (d as char).to_digit(16).unwrap() as u64;
            match size.checked_mul(16) {
                Some(s) => size = s + v,
                None => return ChunkedOutcome::Error,
            }
        }
        let after = &line[digits..];
        let ext = &after[after
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count()..];
        let ext_ok =
            ext.is_empty() || (ext[0] == b';' && ext[1..].iter().all(|&b| is_field_byte(b)));
        // Whitespace is only allowed after at least one digit, and only before ';' or CRLF.
        if !ext_ok {
            return ChunkedOutcome::Error;
        }
        pos = lf + 1;
        if size == 0 {
            break;
        }
        let avail = (input.len() - pos) as u64;
        if avail < size {
            data.extend_from_slice(&input[pos..]);
            return ChunkedOutcome::Incomplete { data };
        }
        let end = pos + size as usize;
        data.extend_from_slice(&input[pos..end]);
        match input.get(end..end + 2) {
            Some(b"\r\n") => pos = end + 2,
            Some(_) => return ChunkedOutcome::Error,
            None if input.get(end).is_some_and(|&b| b != b'\r') => return ChunkedOutcome::Error,
            None => return ChunkedOutcome::Incomplete { data },
        }
    }
    // trailer-section CRLF
    let start = pos;
    let mut line_start = pos;
    loop {
        let Some(lf) = input[line_start..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| line_start + i)
        else {
            if input.len() - start >= MAX_TRAILER_BYTES + 2 {
                return ChunkedOutcome::Error;
            }
            return ChunkedOutcome::Incomplete { data };
        };
        if lf >= start + MAX_TRAILER_BYTES + 2 {
            return ChunkedOutcome::Error;
        }
        if lf == line_start || input[lf - 1] != b'\r' {
            return ChunkedOutcome::Error;
        }
        let line = &input[line_start..lf - 1];
        if line.is_empty() {
            return ChunkedOutcome::Complete {
                data,
                trailers: input[start..line_start].to_vec(),
                rest: input[lf + 1..].to_vec(),
            };
        }
        let field_line_ok = match line.iter().position(|&b| b == b':') {
            Some(colon) if colon > 0 => {
                line[..colon].iter().all(|&b| is_tchar(b))
                    && line[colon + 1..].iter().all(|&b| is_field_byte(b))
            }
            _ => false,
        };
        if !field_line_ok {
            return ChunkedOutcome::Error;
        }
        line_start = lf + 1;
    }
}

/// Checks the incremental decoder against the reference on one input, fed in two ways.
pub fn check_chunked(seed: u8, input: &[u8]) {
    let mut pieces = Pieces::new(seed);
    let (pieced, pieced_err) = decode_incrementally(input, || pieces.next_len());
    let (whole, whole_err) = decode_incrementally(input, || input.len());
    // How the bytes arrive must not change the verdict.
    assert_eq!(pieced, whole, "pieced vs whole");
    assert_eq!(
        pieced_err, whole_err,
        "error kind depends on the read pattern"
    );
    // The filter on arbitrary bytes, not only on what the decoder let through.
    check_trailers(&Bytes::copy_from_slice(input));
    let reference = reference_decode(input);
    match (&reference, &whole) {
        (a, b) if a == b => {}
        // The incremental decoder rejects bad bytes before their line is complete.
        (ChunkedOutcome::Incomplete { .. }, ChunkedOutcome::Error) => {}
        _ => panic!("reference {reference:?} vs decoder {whole:?} ({whole_err:?})"),
    }
    match &whole {
        ChunkedOutcome::Complete {
            data,
            trailers,
            rest,
        } => {
            assert!(data.len() + trailers.len() + rest.len() <= input.len());
        }
        ChunkedOutcome::Incomplete { data } => assert!(data.len() <= input.len()),
        ChunkedOutcome::Error => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_agrees_on_seeds() {
        for entry in std::fs::read_dir("corpus/chunked").unwrap() {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            if let Some((&seed, rest)) = bytes.split_first() {
                check_chunked(seed, rest);
            }
        }
    }

    #[test]
    fn reference_basics() {
        let ok = reference_decode(b"3\r\nabc\r\n0\r\nX: y\r\n\r\nrest");
        assert_eq!(
            ok,
            ChunkedOutcome::Complete {
                data: b"abc".to_vec(),
                trailers: b"X: y\r\n".to_vec(),
                rest: b"rest".to_vec()
            }
        );
        assert_eq!(
            reference_decode(b"3\r\nab"),
            ChunkedOutcome::Incomplete {
                data: b"ab".to_vec()
            }
        );
        assert_eq!(reference_decode(b"3\nabc"), ChunkedOutcome::Error);
        check_chunked(7, b"3\r\nabc\r\n0\r\n\r\n");
    }

    #[test]
    fn trailer_filter_basics() {
        let raw = Bytes::from_static(b"Content-Length: 5\r\nX-Ok:  1 \r\nHOST: a\r\n");
        assert!(check_trailers(&raw));
        assert!(check_trailers(&Bytes::new()));
        assert!(!check_trailers(&Bytes::from_static(b"X : 1\r\n")));
        assert!(!check_trailers(&Bytes::from_static(b"X: 1\n")));
        check_chunked(3, b"1\r\na\r\n0\r\nContent-Length: 5\r\nX-Ok: 1\r\n\r\n");
    }
}

/// Asserts that every (name, value) pair is a slice of `raw` (zero-copy), free of line breaks
/// and NUL, and that names are non-empty.
pub fn check_head_slices<'a>(
    raw: &sepia_http1::Bytes,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) {
    let range = raw.as_ptr_range();
    for (name, value) in fields {
        assert!(!name.is_empty());
        for part in [name, value] {
            if !part.is_empty() {
                assert!(range.contains(&part.as_ptr()), "field not a slice of raw");
                assert!(part.len() <= raw.len());
            }
            assert!(
                !part.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0),
                "{part:?}"
            );
        }
    }
}
