//! Interpreting the few header fields that decide how a message is framed and whether its
//! connection survives: Content-Length, Transfer-Encoding, Connection, Host, Expect. Each value
//! is looked at once, while the parsed fields are recorded.

use crate::error::ParseError;
use crate::header_id::HeaderId;

/// Splits a comma-separated list (RFC 9110 §5.6.1) into trimmed elements, skipping empty ones
/// as the RFC requires recipients to do.
pub(crate) fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|e| !e.is_empty())
}

/// Removes optional whitespace (SP / HTAB, RFC 9110 §5.6.3) from both ends.
pub(crate) fn trim_ows(s: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = s.iter().position(|b| !is_ows(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !is_ows(b)).map_or(start, |i| i + 1);
    &s[start..end]
}

/// True when the comma-separated `value` lists `token` (case-insensitive).
pub(crate) fn list_contains(value: &[u8], token: &[u8]) -> bool {
    list_elements(value).any(|e| e.eq_ignore_ascii_case(token))
}

/// tchar (RFC 9110 §5.6.2).
pub(crate) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// field-vchar, SP or HTAB (RFC 9110 §5.5): what a field value may contain. obs-text is
/// accepted, as the RFC lets recipients do.
pub(crate) fn is_field_value_byte(b: u8) -> bool {
    b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80
}

/// Splits `field-name ":" OWS field-value OWS` (RFC 9112 §5, without the CRLF) into the name
/// and the value without its surrounding whitespace; `None` when the line is not one: an empty
/// name, a name byte that is not a tchar (whitespace before the colon, a line starting with
/// whitespace as obs-fold does), or a value byte that is not allowed (CR, LF, NUL, other CTLs).
pub(crate) fn split_field_line(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = line.iter().position(|&b| b == b':')?;
    let (name, value) = (&line[..colon], &line[colon + 1..]);
    let valid = !name.is_empty()
        && name.iter().all(|&b| is_tchar(b))
        && value.iter().all(|&b| is_field_value_byte(b));
    valid.then(|| (name, trim_ows(value)))
}

/// Parses a Content-Length value: 1*DIGIT, or a list of identical such values ("5, 5"), which
/// RFC 9110 §8.6 lets a recipient fold into one. Anything else is invalid framing.
fn parse_content_length(value: &[u8]) -> Result<u64, ParseError> {
    let mut result = None;
    for element in value.split(|&b| b == b',').map(trim_ows) {
        if element.is_empty() || !element.iter().all(u8::is_ascii_digit) {
            return Err(ParseError::BadFraming("invalid Content-Length"));
        }
        let mut n: u64 = 0;
        for &d in element {
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(d - b'0')))
                .ok_or(ParseError::BadFraming("Content-Length overflows"))?;
        }
        match result {
            Some(prev) if prev != n => {
                return Err(ParseError::BadFraming("differing Content-Length values"));
            }
            _ => result = Some(n),
        }
    }
    result.ok_or(ParseError::BadFraming("invalid Content-Length"))
}

/// The state of the Transfer-Encoding codings seen so far, in order across all field lines
/// (RFC 9110 §5.3: repeated lines combine in order).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TransferCodings {
    /// A Transfer-Encoding field line was present at all.
    pub present: bool,
    /// How many times chunked was listed.
    pub chunked_count: u32,
    /// The last coding listed was chunked.
    pub last_is_chunked: bool,
    /// A coding other than chunked was listed.
    pub other: bool,
    /// chunked carried parameters (it defines none, RFC 9112 §7.1).
    pub chunked_with_params: bool,
    /// An element was not a transfer-coding (see [`is_transfer_coding`]).
    pub invalid: bool,
}

/// What a valid Transfer-Encoding says of a message's body.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Codings {
    /// chunked is the final coding: the body ends with the last chunk (RFC 9112 §6.3 rule 4).
    pub chunked: bool,
    /// A coding other than chunked is applied to the content (responses only).
    pub other: bool,
}

impl TransferCodings {
    fn add(&mut self, value: &[u8]) {
        self.present = true;
        for element in list_elements(value) {
            self.invalid |= !is_transfer_coding(element);
            let (name, params) = match element.iter().position(|&b| b == b';') {
                Some(i) => (trim_ows(&element[..i]), true),
                None => (element, false),
            };
            // Transfer-coding names are case-insensitive (RFC 9112 §7).
            let chunked = name.eq_ignore_ascii_case(b"chunked");
            if chunked {
                self.chunked_count += 1;
                self.chunked_with_params |= params;
            } else {
                self.other = true;
            }
            self.last_is_chunked = chunked;
        }
    }

    /// What the codings say of the body, or the error they earn. Both roles refuse what could
    /// frame the body two ways: an element that is not a transfer-coding, an empty list, and
    /// chunked twice, with parameters, or followed by another coding (a recipient that took
    /// that chunked for the framing would end the body elsewhere than one reading to the
    /// close).
    ///
    /// A request whose final coding is not chunked is a 400 (RFC 9112 §6.3 rule 4: "the
    /// message body length cannot be determined reliably"), and one with another coding
    /// before chunked a 501 (§6.1: Sepia forwards no coding it does not understand). A
    /// response may have either (§6.1: "the sender MUST either apply chunked as the final
    /// transfer coding or terminate the message by closing the connection"): its body is
    /// chunked or, without chunked, "determined by reading the connection until it is closed
    /// by the server" (§6.3 rule 4), and [`Codings::other`] says that the content is still
    /// under codings Sepia cannot remove.
    pub(crate) fn framing(&self, request: bool) -> Result<Codings, ParseError> {
        if !self.present {
            return Ok(Codings::default());
        }
        if self.invalid {
            return Err(ParseError::BadFraming("invalid transfer coding"));
        }
        if self.chunked_count > 1 {
            return Err(ParseError::BadFraming("chunked applied more than once"));
        }
        if self.chunked_with_params {
            return Err(ParseError::BadFraming("parameters on chunked"));
        }
        if !self.last_is_chunked {
            if request || self.chunked_count == 1 || !self.other {
                return Err(ParseError::BadFraming(
                    "Transfer-Encoding does not end in chunked",
                ));
            }
            return Ok(Codings {
                chunked: false,
                other: true,
            });
        }
        if self.other && request {
            return Err(ParseError::UnsupportedTransferCoding);
        }
        Ok(Codings {
            chunked: true,
            other: self.other,
        })
    }
}

/// Whether a list element is a transfer-coding (RFC 9110 §10.1.4): a token, then parameters
/// `OWS ";" OWS token BWS "=" BWS token`. A quoted-string parameter value, which the grammar
/// allows, is refused: no registered coding takes parameters, and a comma inside quotes would
/// split the list differently for recipients that do not honour them. A response's codings
/// are passed on to the client, so they must read the same to everyone.
fn is_transfer_coding(element: &[u8]) -> bool {
    let is_token = |s: &[u8]| !s.is_empty() && s.iter().all(|&b| is_tchar(b));
    let mut parts = element.split(|&b| b == b';');
    let name = parts.next().map(trim_ows).unwrap_or_default();
    is_token(name)
        && parts.all(|param| match param.iter().position(|&b| b == b'=') {
            Some(i) => is_token(trim_ows(&param[..i])) && is_token(trim_ows(&param[i + 1..])),
            None => false,
        })
}

/// What the framing- and connection-related fields of one head say, gathered in one pass.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FieldSummary {
    pub content_length: Option<u64>,
    pub codings: TransferCodings,
    pub host_count: u32,
    pub connection_close: bool,
    pub connection_keep_alive: bool,
    pub expect_continue: bool,
}

impl FieldSummary {
    /// Takes note of one field; only the framing fields can fail here.
    pub(crate) fn add(&mut self, id: HeaderId, value: &[u8]) -> Result<(), ParseError> {
        match id {
            HeaderId::ContentLength => {
                let n = parse_content_length(value)?;
                if self.content_length.is_some_and(|prev| prev != n) {
                    return Err(ParseError::BadFraming("differing Content-Length values"));
                }
                self.content_length = Some(n);
            }
            HeaderId::TransferEncoding => self.codings.add(value),
            HeaderId::Host => self.host_count += 1,
            HeaderId::Connection => {
                for token in list_elements(value) {
                    self.connection_close |= token.eq_ignore_ascii_case(b"close");
                    self.connection_keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            }
            HeaderId::Expect => {
                self.expect_continue |= list_contains(value, b"100-continue");
            }
            _ => {}
        }
        Ok(())
    }

    /// RFC 9112 §9.3: HTTP/1.1 persists unless "close"; HTTP/1.0 only with "keep-alive".
    pub(crate) fn keep_alive(&self, version: crate::Version) -> bool {
        !self.connection_close && (version == crate::Version::Http11 || self.connection_keep_alive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_values() {
        let ok: &[(&[u8], u64)] = &[
            (b"0", 0),
            (b"5", 5),
            (b"005", 5),
            (b"5, 5", 5),
            (b"5,5 ,\t5", 5),
            (b"18446744073709551615", u64::MAX),
        ];
        for (v, n) in ok {
            assert_eq!(
                parse_content_length(v),
                Ok(*n),
                "{:?}",
                String::from_utf8_lossy(v)
            );
        }
        let bad: &[&[u8]] = &[
            b"",
            b"5, 6",
            b"5,",
            b",5",
            b"5,,5",
            b"-1",
            b"+5",
            b"0x10",
            b"5 5",
            b"1e3",
            b"18446744073709551616",
            b"99999999999999999999999",
            b"\xd9\xa5",
        ];
        for v in bad {
            assert!(
                matches!(parse_content_length(v), Err(ParseError::BadFraming(_))),
                "{:?}",
                String::from_utf8_lossy(v)
            );
        }
    }

    #[test]
    fn duplicate_content_length_lines() {
        let mut s = FieldSummary::default();
        s.add(HeaderId::ContentLength, b"7").unwrap();
        s.add(HeaderId::ContentLength, b"7, 7").unwrap();
        assert_eq!(s.content_length, Some(7));
        assert!(s.add(HeaderId::ContentLength, b"8").is_err());
    }

    fn codings(lines: &[&[u8]], request: bool) -> Result<Codings, ParseError> {
        let mut t = TransferCodings::default();
        for l in lines {
            t.add(l);
        }
        t.framing(request)
    }

    #[test]
    fn transfer_codings() {
        use ParseError::*;
        let bad400 = Err(BadFraming("Transfer-Encoding does not end in chunked"));
        let twice = Err(BadFraming("chunked applied more than once"));
        let invalid = Err(BadFraming("invalid transfer coding"));
        let params = Err(BadFraming("parameters on chunked"));
        const fn ok(chunked: bool, other: bool) -> Result<Codings, ParseError> {
            Ok(Codings { chunked, other })
        }
        const NONE: Result<Codings, ParseError> = ok(false, false);
        const CHUNKED: Result<Codings, ParseError> = ok(true, false);
        const CODED_CHUNKED: Result<Codings, ParseError> = ok(true, true);
        const CODED_UNTIL_CLOSE: Result<Codings, ParseError> = ok(false, true);
        type Case = (&'static [&'static [u8]], Result<Codings, ParseError>);
        // Requests.
        let requests: &[Case] = &[
            (&[], NONE),
            (&[b"chunked"], CHUNKED),
            (&[b"Chunked"], CHUNKED),
            (&[b" , chunked ,"], CHUNKED),
            (&[b"gzip, chunked"], Err(UnsupportedTransferCoding)),
            (&[b"gzip", b"chunked"], Err(UnsupportedTransferCoding)),
            (&[b"gzip"], bad400.clone()),
            (&[b"chunked, gzip"], bad400.clone()),
            (&[b"chunked", b"gzip"], bad400.clone()),
            (&[b""], bad400.clone()),
            (&[b"chunked, chunked"], twice.clone()),
            (&[b"chunked", b"chunked"], twice.clone()),
            (&[b"chunked;q=1"], params.clone()),
            (&[b"chunkedx"], bad400.clone()),
            (&[b"g zip, chunked"], invalid.clone()),
        ];
        // Responses: another coding is valid before chunked or, without chunked, last
        // (RFC 9112 §6.1, §6.3 rule 4); everything ambiguous stays refused.
        let responses: &[Case] = &[
            (&[], NONE),
            (&[b"chunked"], CHUNKED),
            (&[b"gzip"], CODED_UNTIL_CLOSE),
            (&[b"GZIP"], CODED_UNTIL_CLOSE),
            (&[b"x-custom;level=9"], CODED_UNTIL_CLOSE),
            (&[b"gzip, deflate"], CODED_UNTIL_CLOSE),
            (&[b"gzip", b""], CODED_UNTIL_CLOSE),
            (&[b"chunkedx"], CODED_UNTIL_CLOSE),
            (&[b"gzip, chunked"], CODED_CHUNKED),
            (&[b"gzip", b"chunked"], CODED_CHUNKED),
            (&[b"gzip ; a = b , chunked"], CODED_CHUNKED),
            (&[b"chunked, gzip"], bad400.clone()),
            (&[b"chunked", b"gzip"], bad400.clone()),
            (&[b"gzip, chunked, gzip"], bad400.clone()),
            (&[b""], bad400.clone()),
            (&[b" , "], bad400.clone()),
            (&[b"chunked", b"chunked"], twice.clone()),
            (&[b"gzip, chunked, chunked"], twice),
            (&[b"chunked;q=1"], params),
            (&[b"g zip"], invalid.clone()),
            (&[b"gzip   chunked"], invalid.clone()),
            (&[b"\"gzip\""], invalid.clone()),
            (&[b"gzip;a=\"x,y\""], invalid.clone()),
            (&[b"gzip;a"], invalid.clone()),
            (&[b"gzip;=b"], invalid.clone()),
            (&[b"gzip;"], invalid.clone()),
            (&[b"gzip/1, chunked"], invalid.clone()),
            (&[b"gzip\xff"], invalid),
        ];
        for (request, cases) in [(true, requests), (false, responses)] {
            for (lines, want) in cases {
                assert_eq!(
                    &codings(lines, request),
                    want,
                    "{lines:?} request={request}"
                );
            }
        }
    }

    #[test]
    fn connection_and_expect_tokens() {
        let mut s = FieldSummary::default();
        s.add(HeaderId::Connection, b"Keep-Alive, X-Foo").unwrap();
        assert!(s.connection_keep_alive && !s.connection_close);
        assert!(s.keep_alive(crate::Version::Http10));
        s.add(HeaderId::Connection, b"foo,CLOSE").unwrap();
        assert!(!s.keep_alive(crate::Version::Http11));
        let plain = FieldSummary::default();
        assert!(plain.keep_alive(crate::Version::Http11));
        assert!(!plain.keep_alive(crate::Version::Http10));
        let mut e = FieldSummary::default();
        e.add(HeaderId::Expect, b"100-Continue").unwrap();
        assert!(e.expect_continue);
        let mut e = FieldSummary::default();
        e.add(HeaderId::Expect, b"100-continuex").unwrap();
        assert!(!e.expect_continue);
    }

    #[test]
    fn list_helpers() {
        assert_eq!(trim_ows(b" \t a b \t"), b"a b");
        assert_eq!(trim_ows(b"  "), b"");
        assert_eq!(
            list_elements(b" a ,, b,").collect::<Vec<_>>(),
            vec![&b"a"[..], b"b"]
        );
        assert!(list_contains(b"x, Upgrade", b"upgrade"));
        assert!(!list_contains(b"x-upgrade", b"upgrade"));
        assert!(is_tchar(b'~') && !is_tchar(b':') && !is_tchar(b' '));
        assert!(is_field_value_byte(b'\t') && is_field_value_byte(0x80));
        assert!(
            !is_field_value_byte(b'\r') && !is_field_value_byte(0) && !is_field_value_byte(0x7f)
        );
    }
}
