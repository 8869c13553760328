//! The head a hit sends, serialised once when a response is stored, and where its stored
//! fields sit inside it.
//!
//! The store keeps a response's head in the form the h1 front end writes first on a hit (status
//! line and field lines, one slice of a gather write); the layout records where the status's
//! reason and each field's name and value sit, so that another front end (HTTP/2's HEADERS)
//! or the 304 merge reads them without parsing the bytes again.
//!
//! The stored fields are needed again only off the hot path: to freshen them with a 304
//! (RFC 9111 §3.2, §4.3.4), to answer a conditional request with a 304 or a range request
//! with a 206 from the object. They are read back through byte spans of the head instead of
//! being kept a second time as a field list: that copy cost three allocations and about
//! 750 bytes per stored response (dhat, 1 KiB objects from the bench origin), a quarter of
//! the memory a small object held.

use bytes::{BufMut, Bytes, BytesMut};
use sepia_cache_policy::Fields;
use sepia_http1::{put_status_line, HeaderId, Version, CRLF};

/// Byte offsets of one field line in the stored head: the name starts at `name`, the value
/// at `value` (after `": "`) and ends at `end` (before CRLF).
#[derive(Clone, Copy, Debug)]
struct LineSpan {
    name: u32,
    value: u32,
    end: u32,
}

impl LineSpan {
    fn name(self) -> std::ops::Range<usize> {
        self.name as usize..self.value as usize - 2
    }

    fn value(self) -> std::ops::Range<usize> {
        self.value as usize..self.end as usize
    }
}

/// Where the reason phrase and the stored field lines sit in a stored head.
#[derive(Debug)]
pub struct HeadLayout {
    reason: (u32, u32),
    lines: Box<[LineSpan]>,
}

impl HeadLayout {
    /// Appends the layout to `out` for a persistent store: the reason's span, each line's
    /// name and value lengths (the lines follow one another, so their positions follow), and
    /// which line is the first `Content-Type` (0: none). [`HeadLayout::decode`] reads it back
    /// against the head without parsing the head again.
    pub fn encode(&self, head: &[u8], out: &mut Vec<u8>) {
        put_varint(out, self.reason.0);
        put_varint(out, self.reason.1);
        for l in &*self.lines {
            put_varint(out, l.value - 2 - l.name);
            put_varint(out, l.end - l.value);
        }
        let content_type = self.content_type_line(head).map_or(0, |i| i + 1);
        put_varint(out, u32::try_from(content_type).unwrap_or(0));
    }

    /// The layout of `lines` field lines that [`HeadLayout::encode`] wrote at the start of
    /// `bytes` (advanced past it), for `head`, the head it was encoded with: its status code,
    /// the layout and the first `Content-Type` value. One more line, the `Via` that
    /// [`build`] appends, may follow the stored lines. `None` unless `head` is exactly that
    /// shape: every span lies in the head, and the separators (`": "`, CRLF) sit where the
    /// spans say, so a layout that does not belong to this head is refused, never misread.
    pub fn decode(
        head: &Bytes,
        lines: usize,
        bytes: &mut &[u8],
    ) -> Option<(u16, HeadLayout, Option<Bytes>)> {
        let reason = (take_varint(bytes)?, take_varint(bytes)?);
        let (reason_start, reason_end) = (reason.0 as usize, reason.1 as usize);
        let version = Version::Http11.as_bytes();
        let code = head
            .get(..reason_start.checked_sub(1)?)?
            .strip_prefix(version)?
            .strip_prefix(b" ")?;
        // As `build` writes it: three digits for any valid code (RFC 9110 §15).
        let &[a, b, c] = code else { return None };
        if ![a, b, c].iter().all(u8::is_ascii_digit)
            || head.get(reason_start - 1) != Some(&b' ')
            || reason_end < reason_start
            || head.get(reason_end..reason_end + 2)? != CRLF
        {
            return None;
        }
        let status = u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0');
        // A field line takes at least 4 bytes (": ", CRLF): a larger count is not this head's
        // (and would ask the allocator for gigabytes).
        if lines > head.len() / 4 {
            return None;
        }
        let mut at = reason_end;
        let mut spans = Vec::with_capacity(lines);
        // Each line: name, ": ", value, CRLF, right after the previous line's CRLF.
        for _ in 0..lines {
            let name = at + 2;
            let value = name.checked_add(take_varint(bytes)? as usize)? + 2;
            let end = value.checked_add(take_varint(bytes)? as usize)?;
            if head.get(value - 2..value)? != b": " || head.get(end..end + 2)? != CRLF {
                return None;
            }
            spans.push(LineSpan {
                name: offset(name),
                value: offset(value),
                end: offset(end),
            });
            at = end;
        }
        // At most one more line (the appended `Via`), ending the head.
        let rest = &head[at + 2..];
        if !rest.is_empty()
            && (rest.iter().position(|&b| b == b'\n') != Some(rest.len() - 1)
                || !rest.ends_with(CRLF))
        {
            return None;
        }
        let layout = HeadLayout {
            reason: (offset(reason_start), offset(reason_end)),
            lines: spans.into_boxed_slice(),
        };
        let content_type = match take_varint(bytes)? as usize {
            0 => None,
            n => {
                let line = *layout.lines.get(n - 1)?;
                if !head[line.name()].eq_ignore_ascii_case(b"content-type") {
                    return None;
                }
                Some(head.slice(line.value()))
            }
        };
        Some((status, layout, content_type))
    }

    /// How many stored field lines the layout holds (not counting an appended `Via`).
    pub fn lines(&self) -> usize {
        self.lines.len()
    }

    /// The stored fields, read from `head` (the head this layout was built with).
    pub fn fields<'h>(&'h self, head: &'h [u8]) -> StoredFields<'h> {
        StoredFields {
            head,
            lines: &self.lines,
        }
    }

    /// The reason phrase of the stored status line.
    pub fn reason<'h>(&self, head: &'h [u8]) -> &'h [u8] {
        &head[self.reason.0 as usize..self.reason.1 as usize]
    }

    /// The span of the first stored `Content-Type` value, kept apart by `Entry` for the
    /// access log of every hit.
    pub fn content_type(&self, head: &Bytes) -> Option<Bytes> {
        self.content_type_line(head)
            .map(|i| head.slice(self.lines[i].value()))
    }

    fn content_type_line(&self, head: &[u8]) -> Option<usize> {
        self.lines
            .iter()
            .position(|l| head[l.name()].eq_ignore_ascii_case(b"content-type"))
    }
}

/// The stored fields of one object, as the policy reads fields.
pub struct StoredFields<'h> {
    head: &'h [u8],
    lines: &'h [LineSpan],
}

impl Fields for StoredFields<'_> {
    fn lines<'a>(&'a self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        self.lines
            .iter()
            .map(|l| (&self.head[l.name()], &self.head[l.value()]))
    }
}

/// Fields a hit writes itself: framing and `Age` are per hit; the stored `Date` is never
/// touched (RFC 9111 §4.2.3, §5.1). `Transfer-Encoding` is hop-by-hop and never stored, but a
/// merged field list is checked too.
fn written_per_hit(id: HeaderId) -> bool {
    matches!(
        id,
        HeaderId::Age | HeaderId::ContentLength | HeaderId::TransferEncoding
    )
}

/// Builds the head a hit sends, minus its per-hit fields: the status line, every line
/// `lines()` yields (except [`written_per_hit`] ones), then `Via`; each line ends in CRLF and
/// the final empty line is left to the hit. `lines` is called twice (sizing, then writing),
/// so the head is allocated once at its exact size.
pub fn build<'f, I, L>(
    status: u16,
    reason: &[u8],
    lines: L,
    via: Option<&[u8]>,
) -> (Bytes, HeadLayout)
where
    L: Fn() -> I,
    I: Iterator<Item = (&'f [u8], &'f [u8])>,
{
    let with_ids = || lines().map(|(name, value)| (HeaderId::from_name(name), name, value));
    let (out, layout) = build_with_room(status, reason, with_ids, via, 0);
    (out.freeze(), layout)
}

/// [`build`], into a buffer with `room` more bytes of capacity after the head: where the
/// caller copies the body, so that a small object's head and body share one allocation.
/// `lines` yields each line's [`HeaderId`] with it (the codec's, when the lines were parsed),
/// so that the per-hit fields are told apart without comparing names.
pub fn build_with_room<'f, I, L>(
    status: u16,
    reason: &[u8],
    lines: L,
    via: Option<&[u8]>,
    room: usize,
) -> (BytesMut, HeadLayout)
where
    L: Fn() -> I,
    I: Iterator<Item = (HeaderId, &'f [u8], &'f [u8])>,
{
    // "HTTP/1.1 " status " " reason CRLF, the status in as many digits as put_status_line
    // writes (three for any valid code, RFC 9110 §15).
    let status_digits =
        std::iter::successors(Some(status), |n| (*n >= 10).then_some(n / 10)).count();
    let status_line =
        Version::Http11.as_bytes().len() + 2 + status_digits + reason.len() + CRLF.len();
    let (mut count, mut size) = (0, status_line);
    for (_, name, value) in lines().filter(|&(id, _, _)| !written_per_hit(id)) {
        count += 1;
        size += name.len() + value.len() + 4;
    }
    if let Some(via) = via {
        size += 5 + via.len() + CRLF.len();
    }
    let mut out = BytesMut::with_capacity(size + room);
    put_status_line(&mut out, Version::Http11, status, reason);
    let reason_end = out.len() - CRLF.len();
    let mut spans = Vec::with_capacity(count);
    for (_, name, value) in lines().filter(|&(id, _, _)| !written_per_hit(id)) {
        let at = offset(out.len());
        out.put_slice(name);
        out.put_slice(b": ");
        let value_at = offset(out.len());
        out.put_slice(value);
        spans.push(LineSpan {
            name: at,
            value: value_at,
            end: offset(out.len()),
        });
        out.put_slice(CRLF);
    }
    if let Some(via) = via {
        out.put_slice(b"Via: ");
        out.put_slice(via);
        out.put_slice(CRLF);
    }
    // The sizing pass and the writing pass must agree, or the buffer grew (a second
    // allocation, and capacity the store does not account for). The tests run this.
    debug_assert_eq!(out.len(), size, "stored head sized wrongly");
    let layout = HeadLayout {
        reason: (offset(reason_end - reason.len()), offset(reason_end)),
        lines: spans.into_boxed_slice(),
    };
    (out, layout)
}

/// LEB128: seven bits a byte, low first (a length of a field line is one or two bytes).
fn put_varint(out: &mut Vec<u8>, mut n: u32) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// What [`put_varint`] wrote at the start of `bytes` (advanced past it).
#[inline]
fn take_varint(bytes: &mut &[u8]) -> Option<u32> {
    // Nearly every length is below 128: one byte.
    if let Some((&b, rest)) = bytes.split_first() {
        if b < 0x80 {
            *bytes = rest;
            return Some(u32::from(b));
        }
    }
    let mut n = 0u32;
    for shift in (0..35).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        n |= u32::from(b & 0x7f).checked_shl(shift)?;
        if b < 0x80 {
            return Some(n);
        }
    }
    None
}

/// A head's length always fits: the codec caps a response head far below 4 GiB.
fn offset(at: usize) -> u32 {
    u32::try_from(at).expect("a stored head is smaller than 4 GiB")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(
        pairs: &'static [(&'static str, &'static str)],
    ) -> Vec<(&'static [u8], &'static [u8])> {
        pairs
            .iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
            .collect()
    }

    fn decoded(head: &Bytes, lines: usize, bytes: &[u8]) -> Option<(u16, HeadLayout)> {
        let mut rest = bytes;
        let (status, layout, _) = HeadLayout::decode(head, lines, &mut rest)?;
        rest.is_empty().then_some((status, layout))
    }

    #[test]
    fn a_built_head_decodes_back_to_the_same_layout() {
        let lines = fields(&[
            ("Content-Type", "text/plain"),
            ("ETag", "\"x: y\""),
            ("X-Empty", ""),
        ]);
        for via in [None, Some(&b"1.1 sepia"[..])] {
            let (head, built) = build(203, b"Non Auth", || lines.iter().copied(), via);
            let mut bytes = Vec::new();
            built.encode(&head, &mut bytes);
            let mut rest = &bytes[..];
            let (status, parsed, content_type) =
                HeadLayout::decode(&head, 3, &mut rest).expect("decodes");
            assert!(rest.is_empty());
            assert_eq!(status, 203);
            assert_eq!(parsed.reason(&head), b"Non Auth");
            let (a, b) = (built.fields(&head), parsed.fields(&head));
            assert!(a.lines().eq(b.lines()));
            assert_eq!(content_type.as_deref(), Some(&b"text/plain"[..]));
            // Another line count, a cut head, a head two lines longer than the stored ones
            // (one more is the appended Via's place) or another head's layout: not this
            // shape.
            assert!(decoded(&head, 2, &bytes).is_none());
            assert!(decoded(&head, 4, &bytes).is_none());
            assert!(decoded(&head.slice(..head.len() - 1), 3, &bytes).is_none());
            let mut longer = head.to_vec();
            longer.extend_from_slice(b"X: y\r\n");
            assert_eq!(
                decoded(&Bytes::from(longer), 3, &bytes).is_none(),
                via.is_some()
            );
            let other = fields(&[("Content-Type", "text/html"), ("ETag", "\"x\""), ("A", "")]);
            let (other, _) = build(203, b"Non Auth", || other.iter().copied(), via);
            assert!(decoded(&other, 3, &bytes).is_none());
        }
        let (head, built) = build(200, b"", || lines[1..].iter().copied(), None);
        let mut bytes = Vec::new();
        built.encode(&head, &mut bytes);
        let mut rest = &bytes[..];
        let (status, _, content_type) = HeadLayout::decode(&head, 2, &mut rest).expect("decodes");
        assert_eq!((status, content_type), (200, None));
        assert!(decoded(&Bytes::from_static(b"HTTP/1.0 200 OK\r\n"), 0, &[13, 15, 0]).is_none());
        assert!(decoded(&Bytes::from_static(b"HTTP/1.1 2x0 OK\r\n"), 0, &[13, 15, 0]).is_none());
        assert!(decoded(&Bytes::from_static(b"HTTP/1.1 200 OK\r\n"), 0, &[13, 15, 0]).is_some());
        // A content-type index naming another line, or past the lines: refused.
        assert!(decoded(
            &Bytes::from_static(b"HTTP/1.1 200 OK\r\nA: b\r\n"),
            1,
            &[13, 15, 1, 1, 1]
        )
        .is_none());
        assert!(decoded(
            &Bytes::from_static(b"HTTP/1.1 200 OK\r\nA: b\r\n"),
            1,
            &[13, 15, 1, 1, 2]
        )
        .is_none());
    }

    /// Whatever the layout's bytes say, decoding answers (a layout or `None`), never panics:
    /// records are checksummed, but a bug elsewhere must not become a crash here.
    #[test]
    fn any_layout_bytes_decode_or_are_refused() {
        let lines = fields(&[("Content-Type", "text/plain"), ("ETag", "\"x\"")]);
        let (head, built) = build(200, b"OK", || lines.iter().copied(), Some(b"1.1 s"));
        let mut good = Vec::new();
        built.encode(&head, &mut good);
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for round in 0..20_000 {
            let mut bytes = good.clone();
            for _ in 0..1 + round % 4 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let at = (seed % bytes.len() as u64) as usize;
                bytes[at] = (seed >> 32) as u8;
            }
            for n in 0..4 {
                let _ = decoded(&head, n, &bytes);
                let _ = decoded(
                    &head.slice(..(seed % head.len() as u64) as usize),
                    n,
                    &bytes,
                );
            }
        }
    }

    #[test]
    fn varints_round_trip() {
        for n in [0, 1, 127, 128, 300, 16_383, 16_384, u32::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, n);
            let mut rest = &out[..];
            assert_eq!(take_varint(&mut rest), Some(n));
            assert!(rest.is_empty());
            assert_eq!(take_varint(&mut &out[..out.len() - 1]), None);
        }
    }

    #[test]
    fn head_holds_status_fields_and_via_and_the_layout_reads_them_back() {
        let lines = fields(&[
            ("Content-Type", "text/plain"),
            ("Age", "7"),
            ("Content-Length", "3"),
            ("ETag", "\"x\""),
            ("X-Empty", ""),
        ]);
        let (head, layout) = build(200, b"Fine", || lines.iter().copied(), Some(b"1.1 sepia"));
        assert_eq!(
            &head[..],
            b"HTTP/1.1 200 Fine\r\nContent-Type: text/plain\r\nETag: \"x\"\r\nX-Empty: \r\nVia: 1.1 sepia\r\n"
        );
        assert_eq!(layout.reason(&head), b"Fine");
        let view = layout.fields(&head);
        let stored: Vec<_> = view.lines().collect();
        assert_eq!(
            stored,
            [
                (&b"Content-Type"[..], &b"text/plain"[..]),
                (b"ETag", b"\"x\""),
                (b"X-Empty", b""),
            ],
            "per-hit fields and our Via are not stored fields"
        );
        assert_eq!(
            layout.fields(&head).first(HeaderId::ETag),
            Some(&b"\"x\""[..])
        );
        assert_eq!(
            layout.content_type(&head).as_deref(),
            Some(&b"text/plain"[..])
        );
    }

    #[test]
    fn a_status_of_any_width_is_sized_exactly() {
        // build's debug assertion checks the sizing pass against what was written.
        for status in [0, 7, 42, 200, 999, 1000, 65535] {
            let (head, layout) = build(status, b"R", std::iter::empty, None);
            assert!(head.starts_with(format!("HTTP/1.1 {status} R\r\n").as_bytes()));
            assert_eq!(layout.reason(&head), b"R");
        }
    }

    #[test]
    fn no_fields_no_via_empty_reason() {
        let (head, layout) = build(204, b"", std::iter::empty, None);
        assert_eq!(&head[..], b"HTTP/1.1 204 \r\n");
        assert_eq!(layout.reason(&head), b"");
        assert_eq!(layout.fields(&head).lines().count(), 0);
        assert_eq!(layout.content_type(&head), None);
    }
}
