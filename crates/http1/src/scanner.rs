//! Finding the end of a head without rescanning: Squid called `headersEnd` twice per request over
//! the same bytes; here no byte is scanned again on a later call, however the head is split across
//! reads.

use std::sync::LazyLock;

use memchr::memmem::Finder;

/// The end of the first empty line in `hay` ("\n\r\n" or "\n\n"), as an offset just past it.
/// Two SIMD substring searches over the head beat stopping at every LF: callgrind showed a
/// `memchr` per line costing more than httparse's own pass.
fn find_terminator(hay: &[u8]) -> Option<usize> {
    static CRLF: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\n\r\n"));
    static LF: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\n\n"));
    let crlf_end = CRLF.find(hay).map(|i| i + 3);
    // A bare-LF terminator counts only if it ends first; no need to look past the CRLF one.
    let lf_end = LF
        .find(&hay[..crlf_end.unwrap_or(hay.len())])
        .map(|i| i + 2);
    match (crlf_end, lf_end) {
        (Some(c), Some(l)) => Some(c.min(l)),
        (c, l) => c.or(l),
    }
}

/// Where the scan stands after the bytes seen so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    /// Before the start line: empty lines here are skipped (RFC 9112 §2.2).
    #[default]
    Leading,
    /// Saw a CR before the start line; an LF makes it an empty line.
    LeadingCr,
    /// Inside a line.
    InLine,
    /// Just after an LF: a line is starting; an immediate LF or CRLF ends the head.
    AfterLf,
    /// After LF CR: an LF ends the head.
    AfterLfCr,
    /// The head ended at `pos`.
    Done,
}

/// Finds the end of a head (the first empty line, RFC 9112 §2.1) incrementally. Line endings may
/// be CRLF or a bare LF (§2.2 allows a recipient to accept LF); bare CRs are left for the parser
/// to reject. State is carried across calls so a terminator split between two reads is found and
/// no byte is searched again on a later call.
#[derive(Clone, Debug, Default)]
pub struct HeadScanner {
    /// Next byte of the buffer to examine.
    pos: usize,
    /// Bytes of empty lines before the start line.
    leading: usize,
    state: State,
}

impl HeadScanner {
    pub fn new() -> Self {
        Self::default()
    }

    /// `buf` is the whole accumulated buffer (same start as before, possibly longer). Returns the
    /// head length (including the final CRLFCRLF / LFLF and any leading empty lines, counted from
    /// `buf[0]`) once complete; calling again after that returns the same length.
    pub fn scan(&mut self, buf: &[u8]) -> Option<usize> {
        while self.pos < buf.len() {
            let byte = buf[self.pos];
            match self.state {
                State::Leading => match byte {
                    b'\n' => {
                        self.pos += 1;
                        self.leading = self.pos;
                    }
                    b'\r' => {
                        self.pos += 1;
                        self.state = State::LeadingCr;
                    }
                    _ => self.state = State::InLine,
                },
                State::LeadingCr => {
                    if byte == b'\n' {
                        self.pos += 1;
                        self.leading = self.pos;
                        self.state = State::Leading;
                    } else {
                        // A lone CR starts the head; the parser will reject it.
                        self.state = State::InLine;
                    }
                }
                State::InLine => {
                    let rest = &buf[self.pos..];
                    if let Some(end) = find_terminator(rest) {
                        self.pos += end;
                        self.state = State::Done;
                    } else {
                        // Remember a terminator that may be completed by the next read.
                        self.state = if rest.ends_with(b"\n") {
                            State::AfterLf
                        } else if rest.ends_with(b"\n\r") {
                            State::AfterLfCr
                        } else {
                            State::InLine
                        };
                        self.pos = buf.len();
                        return None;
                    }
                }
                State::AfterLf => {
                    self.pos += 1;
                    match byte {
                        b'\n' => self.state = State::Done,
                        b'\r' => self.state = State::AfterLfCr,
                        _ => self.state = State::InLine,
                    }
                }
                State::AfterLfCr => {
                    if byte == b'\n' {
                        self.pos += 1;
                        self.state = State::Done;
                    } else {
                        // Not LF, so `InLine` may resume its search at this very byte.
                        self.state = State::InLine;
                    }
                }
                State::Done => break,
            }
        }
        (self.state == State::Done).then_some(self.pos)
    }

    /// How many bytes of empty lines precede the start line (so far).
    pub fn leading(&self) -> usize {
        self.leading
    }

    /// Returns [`HeadScanner::leading`] and forgets those bytes: the caller must drop exactly that
    /// many bytes from the front of its buffer before the next `scan`. This keeps a peer sending
    /// endless empty lines from growing the buffer.
    pub fn take_leading(&mut self) -> usize {
        let n = self.leading;
        self.pos -= n;
        self.leading = 0;
        n
    }

    /// True when nothing has been scanned since the last reset.
    pub fn is_fresh(&self) -> bool {
        self.pos == 0 && self.leading == 0 && self.state == State::Leading
    }

    /// Forgets everything, ready for the next head.
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scans `input` fed in every possible pair of pieces and checks all agree with `want`.
    fn scan_split_everywhere(input: &[u8], want: Option<usize>) {
        let mut whole = HeadScanner::new();
        assert_eq!(
            whole.scan(input),
            want,
            "whole {:?}",
            String::from_utf8_lossy(input)
        );
        for cut in 0..=input.len() {
            let mut s = HeadScanner::new();
            let first = s.scan(&input[..cut]);
            if first.is_some() {
                assert_eq!(first, want, "cut {cut}");
            }
            assert_eq!(
                s.scan(input),
                want,
                "cut {cut} of {:?}",
                String::from_utf8_lossy(input)
            );
        }
        // Byte by byte: the worst case for split terminators.
        let mut s = HeadScanner::new();
        let mut got = None;
        for end in 1..=input.len() {
            got = s.scan(&input[..end]);
            if got.is_some() {
                break;
            }
        }
        assert_eq!(got, want, "bytewise");
    }

    #[test]
    fn finds_the_end_of_heads() {
        let cases: &[(&[u8], Option<usize>)] = &[
            (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", Some(27)),
            (b"GET / HTTP/1.1\r\nHost: a\r\n\r\nBODY", Some(27)),
            (b"GET / HTTP/1.1\nHost: a\n\nBODY", Some(24)),
            (b"GET / HTTP/1.1\r\nHost: a\n\r\n", Some(26)),
            (b"GET / HTTP/1.1\nHost: a\r\n\n", Some(25)),
            (b"GET / HTTP/1.1\r\n\r\n", Some(18)),
            (b"GET / HTTP/1.1\r\nHost: a\r\n", None),
            (b"GET / HTTP/1.1\r\nHost: a\r\n\r", None),
            (b"GET / HTTP/1.1\r\nHost: a\r\r\n", None),
            (b"GET / HTTP/1.1\r\nX: \r\r\n\r\n", Some(24)),
            (b"GET / HTTP/1.1\r\n\rX\r\n\r\n", Some(22)),
            (b"", None),
            (b"\r\n\r\n", None),
            (b"\r\n\r\nGET / HTTP/1.1\r\n\r\n", Some(22)),
            (b"\n\nGET / HTTP/1.1\n\n", Some(18)),
        ];
        for (input, want) in cases {
            scan_split_everywhere(input, *want);
        }
    }

    #[test]
    fn counts_leading_empty_lines() {
        let mut s = HeadScanner::new();
        assert_eq!(s.scan(b"\r\n\n\r"), None);
        assert_eq!(s.leading(), 3, "the trailing CR is not yet an empty line");
        assert_eq!(s.scan(b"\r\n\n\r\nGET / HTTP/1.1\r\n\r\n"), Some(23));
        assert_eq!(s.leading(), 5);
        // A lone CR followed by a byte other than LF belongs to the head.
        let mut s = HeadScanner::new();
        assert_eq!(s.scan(b"\r\n\rGET / HTTP/1.1\r\n\r\n"), Some(21));
        assert_eq!(s.leading(), 2);
    }

    #[test]
    fn take_leading_rebases_positions() {
        let mut s = HeadScanner::new();
        let mut buf = b"\r\n\r\nGET / HTT".to_vec();
        assert_eq!(s.scan(&buf), None);
        assert_eq!(s.take_leading(), 4);
        buf.drain(..4);
        buf.extend_from_slice(b"P/1.1\r\n\r\n");
        assert_eq!(s.scan(&buf), Some(buf.len()));
        assert_eq!(s.leading(), 0);
    }

    #[test]
    fn done_is_sticky_and_reset_starts_over() {
        let mut s = HeadScanner::new();
        let buf = b"HTTP/1.1 200 OK\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(s.scan(buf), Some(19));
        assert_eq!(s.scan(buf), Some(19));
        s.reset();
        assert_eq!(s.scan(&buf[19..]), Some(buf.len() - 19));
    }
}
