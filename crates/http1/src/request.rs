//! Request heads: decoding off a connection's read buffer, with the RFC 9112 strictness that
//! keeps requests from being smuggled past the proxy.

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};

use crate::error::ParseError;
use crate::fields::FieldSummary;
use crate::head::{
    collect_headers, direct_window, find_head, parsed_length, whole, MAX_HEADERS_CAP,
};
use crate::header_id::{HeaderId, IdSet};
use crate::header_list::{Field, HeaderList, Span};
use crate::scanner::HeadScanner;
use crate::types::{BodyFraming, Limits, Method, Version};

/// The four forms of request-target (RFC 9112 §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetForm {
    /// `/path?query` (§3.2.1), what origin servers get.
    Origin,
    /// `http://host/path` (§3.2.2), what forward proxies get.
    Absolute,
    /// `host:port` (§3.2.3), CONNECT only.
    Authority,
    /// `*` (§3.2.4), OPTIONS only.
    Asterisk,
}

/// A parsed request head. Its parts are positions in `raw` (the frozen head buffer), never
/// copies, read through methods that return slices of it. Reused across keep-alive requests:
/// `clear()` keeps the field list's capacity.
#[derive(Clone, Debug, Default)]
pub struct RequestHead {
    /// The whole head, request line through the empty line.
    raw: Bytes,
    pub method: Method,
    method_raw: Span,
    target: Span,
    pub version: Version,
    /// The field lines, as positions in `raw` (see [`HeaderList`]).
    pub(crate) fields: Vec<Field>,
    /// The ids in `fields`.
    present: IdSet,
    /// Validated Content-Length (equal duplicates folded); never set together with `chunked`.
    pub content_length: Option<u64>,
    /// Transfer-Encoding is present and its only coding is chunked.
    pub chunked: bool,
    /// RFC 9112 §9.3: HTTP/1.1 unless "close"; HTTP/1.0 only with "keep-alive".
    pub keep_alive: bool,
    /// `Expect: 100-continue` on an HTTP/1.1 request (RFC 9110 §10.1.1 says to ignore it in
    /// HTTP/1.0).
    pub expect_continue: bool,
}

impl RequestHead {
    /// Empties the head for reuse, keeping the field list's allocation.
    pub fn clear(&mut self) {
        self.raw = Bytes::new();
        self.method = Method::Get;
        self.method_raw = Span::default();
        self.target = Span::default();
        self.version = Version::Http11;
        self.fields.clear();
        self.present = IdSet::default();
        self.content_length = None;
        self.chunked = false;
        self.keep_alive = false;
        self.expect_continue = false;
    }

    /// The method as sent.
    pub fn method_raw(&self) -> &[u8] {
        self.method_raw.get(&self.raw)
    }

    /// The request-target as sent (origin-form, absolute-form, authority-form or `*`).
    pub fn target(&self) -> &[u8] {
        self.target.get(&self.raw)
    }

    /// The whole head as received (private, so that the positions of its parts always refer
    /// to it).
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// The header fields, in the order received.
    pub fn headers(&self) -> HeaderList<'_> {
        HeaderList::new(&self.raw, &self.fields, self.present)
    }

    /// The Host header value (at most one exists in an accepted request).
    pub fn host(&self) -> Option<&[u8]> {
        self.headers().get(HeaderId::Host)
    }

    /// RFC 9112 §6.3 for requests: a request body is there only when Transfer-Encoding or
    /// Content-Length says so (rule 6); a zero length is no body.
    pub fn body_framing(&self) -> BodyFraming {
        match (self.chunked, self.content_length) {
            (true, _) => BodyFraming::Chunked,
            (false, Some(n)) if n > 0 => BodyFraming::Length(n),
            _ => BodyFraming::Empty,
        }
    }

    /// Which form the request-target has; accepted requests always have a valid one.
    pub fn target_form(&self) -> TargetForm {
        target_form(self.method, self.target()).unwrap_or(TargetForm::Origin)
    }
}

/// Reads request heads off a connection's read buffer. Owns a `HeadScanner` and the limits.
#[derive(Clone, Debug)]
pub struct RequestDecoder {
    scanner: HeadScanner,
    limits: Limits,
}

impl RequestDecoder {
    pub fn new(limits: Limits) -> Self {
        RequestDecoder {
            scanner: HeadScanner::new(),
            limits,
        }
    }

    /// `Ok(false)`: need more bytes (only empty lines before the request line may have been
    /// dropped from `buf`, RFC 9112 §2.2). `Ok(true)`: a complete head was split off the front of
    /// `buf` (zero-copy), parsed once into `out` and validated. On `Err` the connection must be
    /// closed after answering `err.status()`; `out` then holds the raw head (when one was
    /// complete) and whatever was parsed before the error.
    pub fn decode(
        &mut self,
        buf: &mut BytesMut,
        out: &mut RequestHead,
    ) -> Result<bool, ParseError> {
        if let Some(window) = direct_window(&self.scanner, &self.limits, buf) {
            out.clear();
            if let Ok(Some((len, summary))) = parse_request(window, out, &self.limits) {
                // The parsed positions are offsets from the start of the buffer, which is where
                // the frozen head starts.
                out.raw = buf.split_to(len).freeze();
                check_request(out, &summary)?;
                return Ok(true);
            }
            // Incomplete or invalid: the general path decides (an invalid head is parsed
            // again there, once complete, and refused with the same error). Nothing parsed
            // here may stay: its positions refer to no frozen head.
            out.clear();
        }
        let Some(len) = find_head(&mut self.scanner, &self.limits, buf)? else {
            return Ok(false);
        };
        self.scanner.reset();
        out.clear();
        let raw = buf.split_to(len).freeze();
        let parsed = parse_request(&raw, out, &self.limits);
        out.raw = raw;
        let (parsed_len, summary) = parsed?.unzip();
        whole(parsed_len, len)?;
        check_request(out, &summary.unwrap_or_default())?;
        Ok(true)
    }
}

/// Parses the request head at the start of `raw` into `out` (every position relative to
/// `raw`'s start; `out.raw` is left to the caller). `None`: `raw` holds only part of a head.
/// Returns the head's length and its framing fields, for [`check_request`].
fn parse_request(
    raw: &[u8],
    out: &mut RequestHead,
    limits: &Limits,
) -> Result<Option<(usize, FieldSummary)>, ParseError> {
    let mut storage = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS_CAP];
    let mut req = httparse::Request::new(&mut []);
    // The default configuration is the strict one: no whitespace before colons, no obs-fold,
    // single spaces in the request line.
    let status = httparse::ParserConfig::default().parse_request_with_uninit_headers(
        &mut req,
        raw,
        &mut storage[..limits.max_headers.min(MAX_HEADERS_CAP)],
    );
    let Some(len) = parsed_length(status)? else {
        return Ok(None);
    };
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(ParseError::Malformed("invalid request-line"));
    };
    out.version =
        Version::from_minor(minor).ok_or(ParseError::Malformed("unsupported HTTP version"))?;
    out.method_raw = Span::of(raw, method.as_bytes());
    out.method = Method::from_bytes(method.as_bytes());
    out.target = Span::of(raw, target.as_bytes());

    let mut summary = FieldSummary::default();
    collect_headers(
        raw,
        req.headers,
        &mut out.fields,
        &mut out.present,
        &mut summary,
    )?;
    Ok(Some((len, summary)))
}

/// The checks of a parsed request head that read its bytes (`out.raw` is set): Host, the
/// target's form, and the framing.
fn check_request(out: &mut RequestHead, summary: &FieldSummary) -> Result<(), ParseError> {
    validate_host(out, summary)?;
    if target_form(out.method, out.target()).is_none() {
        return Err(ParseError::Malformed("invalid request-target"));
    }

    if summary.codings.present {
        // RFC 9112 §6.1: a server MAY reject a request with both, and MUST close anyway.
        if summary.content_length.is_some() {
            return Err(ParseError::BadFraming(
                "both Content-Length and Transfer-Encoding",
            ));
        }
        // §6.1: Transfer-Encoding in HTTP/1.0 means the framing is faulty.
        if out.version == Version::Http10 {
            return Err(ParseError::BadFraming(
                "Transfer-Encoding in an HTTP/1.0 request",
            ));
        }
    }
    out.chunked = summary.codings.framing(true)?.chunked;
    out.content_length = summary.content_length;
    out.keep_alive = summary.keep_alive(out.version);
    out.expect_continue = out.version == Version::Http11 && summary.expect_continue;
    Ok(())
}

/// RFC 9112 §3.2: exactly one Host in HTTP/1.1 (at most one in 1.0), with a valid value.
/// Absolute-form targets are not exempt: the RFC still requires Host then (its value is ignored).
fn validate_host(head: &RequestHead, summary: &FieldSummary) -> Result<(), ParseError> {
    match summary.host_count {
        0 if head.version == Version::Http11 => Err(ParseError::Malformed("missing Host")),
        0 => Ok(()),
        1 => match head.host() {
            Some(host) if host.iter().all(|&b| is_authority_byte(b)) => Ok(()),
            _ => Err(ParseError::Malformed("invalid Host")),
        },
        _ => Err(ParseError::Malformed("more than one Host")),
    }
}

/// Bytes an authority (RFC 3986 §3.2: userinfo-free host and port) may contain: unreserved,
/// pct-encoded, sub-delims, ':' and the IP-literal brackets.
fn is_authority_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=:[]".contains(&b)
}

/// Classifies a target (httparse has already checked it holds only visible bytes), or `None`
/// when its form does not suit the method (RFC 9112 §3.2.3, §3.2.4) or fits no form at all.
fn target_form(method: Method, target: &[u8]) -> Option<TargetForm> {
    if method == Method::Connect {
        // authority-form = uri-host ":" port
        let colon = target.iter().rposition(|&b| b == b':')?;
        let (host, port) = (&target[..colon], &target[colon + 1..]);
        let host_ok = !host.is_empty() && host.iter().all(|&b| is_authority_byte(b));
        let port_ok = !port.is_empty() && port.iter().all(u8::is_ascii_digit);
        return (host_ok && port_ok).then_some(TargetForm::Authority);
    }
    match target.first()? {
        b'/' => Some(TargetForm::Origin),
        b'*' if target.len() == 1 => (method == Method::Options).then_some(TargetForm::Asterisk),
        // absolute-URI begins with scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"
        b if b.is_ascii_alphabetic() => {
            let colon = target.iter().position(|&b| b == b':')?;
            let scheme_ok = target[..colon]
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
            scheme_ok.then_some(TargetForm::Absolute)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
