//! Response heads from origins. Parsed a little more leniently than requests, because a proxy
//! must interoperate with the servers it fronts, but never leniently about the body length.

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

/// A parsed response head; its parts are positions in `raw`. Reusable like `RequestHead`.
#[derive(Clone, Debug, Default)]
pub struct ResponseHead {
    /// The whole head, status line through the empty line (with any obs-fold already replaced
    /// by spaces, see [`ResponseDecoder`]).
    raw: Bytes,
    pub version: Version,
    /// 100..=999 (RFC 9110 §15 reserves 600..999 but origins do send them).
    pub status: u16,
    reason: Span,
    /// The field lines, as positions in `raw` (see [`HeaderList`]).
    pub(crate) fields: Vec<Field>,
    /// The ids in `fields`.
    present: IdSet,
    /// Validated Content-Length; `None` when Transfer-Encoding overrode it.
    pub content_length: Option<u64>,
    /// chunked is the final transfer coding: the body is read by decoding it.
    pub chunked: bool,
    /// A transfer coding other than chunked is applied to the content (RFC 9112 §6.1), either
    /// before chunked or, without chunked, with the body delimited by the close (§6.3 rule
    /// 4). The body's bytes, once any chunked framing is removed, are still in codings Sepia
    /// cannot remove: they can be passed on only with a Transfer-Encoding naming them, to a
    /// recipient that can receive one (HTTP/1.1), and never stored as the content.
    pub transfer_coded: bool,
    /// The connection may be reused after this response as far as its fields say (RFC 9112
    /// §9.3); false when Transfer-Encoding and Content-Length were both present (§6.3 rule 3).
    /// A close-delimited body also ends the connection: see [`ResponseHead::reusable`].
    pub keep_alive: bool,
}

impl ResponseHead {
    /// Empties the head for reuse, keeping the field list's allocation.
    pub fn clear(&mut self) {
        self.raw = Bytes::new();
        self.version = Version::Http11;
        self.status = 0;
        self.reason = Span::default();
        self.fields.clear();
        self.present = IdSet::default();
        self.content_length = None;
        self.chunked = false;
        self.transfer_coded = false;
        self.keep_alive = false;
    }

    /// The reason phrase as sent (possibly empty).
    pub fn reason(&self) -> &[u8] {
        self.reason.get(&self.raw)
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

    /// RFC 9112 §6.3: no body for HEAD, 1xx, 204 and 304 (rule 1), nor for a 2xx to CONNECT
    /// (rule 2: the connection becomes a tunnel, which is the caller's business); chunked wins
    /// over Content-Length (rules 3-4); then Content-Length, even 0 (rule 5: the length must be
    /// forwarded, since without it the client would read until close); else until close
    /// (rule 8, and rule 4 for a final coding other than chunked, which removed any
    /// Content-Length).
    pub fn body_framing(&self, request_method: Method) -> BodyFraming {
        let no_body = request_method == Method::Head
            || (100..200).contains(&self.status)
            || self.status == 204
            || self.status == 304
            || (request_method == Method::Connect && (200..300).contains(&self.status));
        match (no_body, self.chunked, self.content_length) {
            (true, _, _) => BodyFraming::Empty,
            (false, true, _) => BodyFraming::Chunked,
            (false, false, Some(n)) => BodyFraming::Length(n),
            (false, false, None) => BodyFraming::UntilClose,
        }
    }

    /// Whether the origin connection can carry another request after this response's body:
    /// `keep_alive` and the body is not delimited by the close.
    pub fn reusable(&self, request_method: Method) -> bool {
        self.keep_alive && self.body_framing(request_method) != BodyFraming::UntilClose
    }
}

/// Reads response heads off an origin connection's read buffer.
///
/// Leniencies, each allowed by RFC 9112 to a recipient: bare LF line endings (§2.2), several
/// spaces between status-line parts, whitespace between a field name and its colon (§5.1: the
/// proxy must remove it before forwarding, which re-serialising `Header`s does, since the name
/// slice excludes it) and obs-fold (§5.2: replaced by spaces; this copies the head, a rare
/// path). Framing is as strict as for requests, except that Transfer-Encoding with
/// Content-Length means the Transfer-Encoding's framing and no reuse (§6.3 rule 3), and that
/// codings other than chunked are allowed, before chunked or last (see
/// [`ResponseHead::transfer_coded`]).
#[derive(Clone, Debug)]
pub struct ResponseDecoder {
    scanner: HeadScanner,
    limits: Limits,
}

impl ResponseDecoder {
    pub fn new(limits: Limits) -> Self {
        ResponseDecoder {
            scanner: HeadScanner::new(),
            limits,
        }
    }

    /// Same contract as `RequestDecoder::decode`; any error means "answer 502 and close".
    pub fn decode(
        &mut self,
        buf: &mut BytesMut,
        out: &mut ResponseHead,
    ) -> Result<bool, ParseError> {
        if let Some(window) = direct_window(&self.scanner, &self.limits, buf) {
            out.clear();
            if let Ok(Some(len)) = parse_response(window, out, &self.limits) {
                // Positions are offsets from the buffer's start, where the frozen head starts.
                out.raw = buf.split_to(len).freeze();
                return Ok(true);
            }
            // Incomplete, invalid or folded: the general path decides; nothing parsed here
            // may stay (its positions refer to no frozen head).
            out.clear();
        }
        let Some(len) = find_head(&mut self.scanner, &self.limits, buf)? else {
            return Ok(false);
        };
        self.scanner.reset();
        out.clear();
        let raw = buf.split_to(len).freeze();
        let parsed = parse_response(&raw, out, &self.limits).and_then(|n| whole(n, len));
        out.raw = raw;
        if let Err(e) = parsed {
            let Some(unfolded) = unfold_obs_fold(&out.raw) else {
                return Err(e);
            };
            out.clear();
            let parsed =
                parse_response(&unfolded, out, &self.limits).and_then(|n| whole(n, unfolded.len()));
            out.raw = unfolded;
            parsed?;
        }
        Ok(true)
    }
}

fn parser_config() -> httparse::ParserConfig {
    let mut config = httparse::ParserConfig::default();
    config
        .allow_spaces_after_header_name_in_responses(true)
        .allow_multiple_spaces_in_response_status_delimiters(true);
    config
}

/// Parses the response head at the start of `raw` into `out` (every position relative to
/// `raw`'s start; `out.raw` is left to the caller) and returns its length; `None`: `raw`
/// holds only part of a head.
fn parse_response(
    raw: &[u8],
    out: &mut ResponseHead,
    limits: &Limits,
) -> Result<Option<usize>, ParseError> {
    let mut storage = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS_CAP];
    let mut resp = httparse::Response::new(&mut []);
    let status = parser_config().parse_response_with_uninit_headers(
        &mut resp,
        raw,
        &mut storage[..limits.max_headers.min(MAX_HEADERS_CAP)],
    );
    let Some(len) = parsed_length(status)? else {
        return Ok(None);
    };
    let (Some(minor), Some(code)) = (resp.version, resp.code) else {
        return Err(ParseError::Malformed("invalid status-line"));
    };
    out.version =
        Version::from_minor(minor).ok_or(ParseError::Malformed("unsupported HTTP version"))?;
    if code < 100 {
        return Err(ParseError::Malformed("invalid status code"));
    }
    out.status = code;
    out.reason = match resp.reason {
        Some(reason) => Span::of(raw, reason.as_bytes()),
        None => Span::default(),
    };

    let mut summary = FieldSummary::default();
    collect_headers(
        raw,
        resp.headers,
        &mut out.fields,
        &mut out.present,
        &mut summary,
    )?;
    let both = summary.codings.present && summary.content_length.is_some();
    if summary.codings.present && out.version == Version::Http10 {
        // RFC 9112 §6.1: treat the framing as faulty.
        return Err(ParseError::BadFraming(
            "Transfer-Encoding in an HTTP/1.0 response",
        ));
    }
    let codings = summary.codings.framing(false)?;
    out.chunked = codings.chunked;
    out.transfer_coded = codings.other;
    if both {
        // §6.3 rule 3: Transfer-Encoding overrides Content-Length, and a sender "MUST remove the
        // received Content-Length field prior to forwarding such a message".
        out.fields.retain(|h| h.id != HeaderId::ContentLength);
        out.present.remove(HeaderId::ContentLength);
        out.content_length = None;
    } else {
        out.content_length = summary.content_length;
    }
    out.keep_alive = !both && summary.keep_alive(out.version);
    Ok(Some(len))
}

/// If `raw` contains obs-fold (a field line continued on a line starting with SP or HTAB,
/// RFC 9112 §5.2), returns a copy with each fold's CRLF replaced by spaces; `None` otherwise.
/// Whitespace right after the status line is not a fold (§2.2) and stays an error.
fn unfold_obs_fold(raw: &Bytes) -> Option<Bytes> {
    let status_line_end = memchr::memchr(b'\n', raw)?;
    let is_fold = |i: usize| matches!(raw.get(i + 1), Some(b' ' | b'\t'));
    let mut folds = memchr::memchr_iter(b'\n', &raw[status_line_end + 1..])
        .map(|i| i + status_line_end + 1)
        .filter(|&i| is_fold(i))
        .peekable();
    folds.peek()?;
    let mut copy = BytesMut::from(&raw[..]);
    for lf in folds {
        copy[lf] = b' ';
        if lf > 0 && copy[lf - 1] == b'\r' {
            copy[lf - 1] = b' ';
        }
    }
    Some(copy.freeze())
}

#[cfg(test)]
mod tests;
