//! The trailer section of a chunked message (RFC 9112 §7.1.2): parsed into (name, value) slices
//! of the section [`ChunkedDecoder`](crate::ChunkedDecoder) hands out, with the fields that must
//! never be trailers removed.
//!
//! Why remove them: RFC 9110 §6.5.1 forbids a sender to generate a trailer field unless the
//! field's definition permits it, and a recipient to merge one into the header section unless
//! the definition says how; RFC 9112 §7.1.2 lets a recipient that removes the chunked coding
//! "selectively retain or discard" trailer fields. Not every recipient obeys: an origin that
//! merges trailers into the header section would see, say, a second Content-Length or Host that
//! the proxy never checked (a smuggling vector), or a client-supplied X-Forwarded-For that the
//! proxy replaced in the header section. So the proxy forwards only fields that may be trailers.

use bytes::Bytes;

use crate::error::ChunkError;
use crate::fields::split_field_line;
use crate::header_id::HeaderId;

/// Whether a field named `name` may be forwarded in a trailer section (ASCII case-insensitive,
/// RFC 9110 §5.1). A field is refused when a recipient needs it before the content, the
/// categories RFC 9110 §6.5.1 names ("message framing, routing, authentication, request
/// modifiers, response controls, or content format"; RFC 7230 §4.1.2 listed examples of each),
/// or when it is connection-specific (§7.6.1). Refused, with where each is defined:
///
/// * framing: Content-Length (RFC 9110 §8.6), Transfer-Encoding (RFC 9112 §6.1);
/// * routing and forwarding: Host (§7.2), Max-Forwards (§7.6.2), Via (§7.6.3), Forwarded
///   (RFC 7239) and X-Forwarded-For, which the proxy itself writes into the header section;
/// * request modifiers: the controls Cache-Control (RFC 9111 §5.2) and the targeted
///   CDN-Cache-Control (RFC 9213), Expect (§10.1.1), Pragma
///   (RFC 9111 §5.4), Range (§14.2), TE (§10.1.4); the conditionals If-Match, If-None-Match,
///   If-Modified-Since, If-Unmodified-Since, If-Range (§13.1); the proactive negotiation fields
///   Accept, Accept-Charset, Accept-Encoding, Accept-Language (§12.5), which select the response
///   a cache then stores under the header section's values;
/// * authentication: Authorization, WWW-Authenticate (§11.6), Proxy-Authorization,
///   Proxy-Authenticate (§11.7), Cookie, Set-Cookie (RFC 6265);
/// * response control data: Age, Expires (RFC 9111 §5.1, §5.3), Date (§6.6.1), Location
///   (§10.2.2), Retry-After (§10.2.3), Vary (§12.5.5), Warning (RFC 9111 §5.5, obsolete);
/// * content format and representation metadata: Content-Type (§8.3), Content-Encoding (§8.4),
///   Content-Language (§8.5), Content-Location (§8.7: it says which resource the content
///   represents, which caches act on, RFC 9111 §4.4), Last-Modified (§8.8.2: caches compute
///   freshness from it; unlike ETag its definition does not permit trailers), Content-Range
///   (§14.4);
/// * connection-specific: Connection, Keep-Alive, Proxy-Connection, Upgrade (§7.6.1, §7.8) and
///   Trailer (§6.6.2, it announces the trailers themselves).
///
/// Everything else is allowed, in particular the fields whose definitions grant the trailer
/// section: ETag (§8.8.3), Accept-Ranges (§14.3), Authentication-Info and
/// Proxy-Authentication-Info when the scheme allows (§11.6.3, §11.7.3), Content-Digest and
/// Repr-Digest (RFC 9530), and extension fields (Server-Timing, checksums, gRPC status): the
/// proxy cannot know their definitions, §6.5.1 puts the burden on their sender.
///
/// Fields the message's Connection header lists are hop-by-hop too (§7.6.1); this function does
/// not see the header section, so the caller drops those ([`Trailers::retain`]).
pub fn allowed_in_trailers(name: &[u8]) -> bool {
    match HeaderId::from_name(name) {
        HeaderId::Other => !FORBIDDEN_OTHER_NAMES
            .iter()
            .any(|forbidden| name.eq_ignore_ascii_case(forbidden)),
        id => id_allowed_in_trailers(id),
    }
}

/// The refused fields [`HeaderId`] does not know, in lower case.
const FORBIDDEN_OTHER_NAMES: &[&[u8]] = &[
    b"max-forwards",
    b"accept",
    b"accept-charset",
    b"www-authenticate",
    b"cookie",
    b"set-cookie",
    b"retry-after",
    b"warning",
    b"content-encoding",
    b"content-language",
];

/// The verdict for a known field; exhaustive, so a new `HeaderId` needs a decision here.
/// `Other` is decided by name in [`allowed_in_trailers`].
fn id_allowed_in_trailers(id: HeaderId) -> bool {
    use HeaderId::*;
    match id {
        Other | ETag | AcceptRanges | Referer | UserAgent | Server => true,
        ContentLength | TransferEncoding => false,
        Host | Via | Forwarded | XForwardedFor => false,
        CacheControl | CdnCacheControl | Expect | Pragma | Range | Te => false,
        AcceptEncoding | AcceptLanguage => false,
        IfMatch | IfNoneMatch | IfModifiedSince | IfUnmodifiedSince | IfRange => false,
        Authorization | ProxyAuthorization | ProxyAuthenticate => false,
        Age | Expires | Date | Location | Vary => false,
        ContentType | ContentLocation | ContentRange | LastModified => false,
        Connection | KeepAlive | ProxyConnection | Upgrade | Trailer => false,
    }
}

/// The fields of a trailer section that may be forwarded, in the order received, each name and
/// value a slice of the raw section (no bytes copied; values without surrounding whitespace).
/// Names keep the case they arrived in: HTTP/1.1 writes them back as they are
/// ([`put_trailers`](crate::put_trailers)); an HTTP/2 encoder must lower-case them
/// (RFC 9113 §8.2.1). Connection-specific fields, which HTTP/2 forbids (RFC 9113 §8.2.2), are
/// never among them, and neither are pseudo-fields (a name never contains ':').
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trailers {
    fields: Vec<(Bytes, Bytes)>,
    dropped: usize,
}

impl Trailers {
    /// How many fields are kept.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True when no field is kept (then the caller writes no trailer section at all).
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// How many field lines were removed (refused names, or [`Trailers::retain`]), for a log
    /// line or a counter. When it is 0, the raw section is itself a valid encoding of the kept
    /// fields and may be forwarded as it is.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// The kept fields as (name, value), in order. Clone a `Bytes` to keep it (a reference
    /// count, no copy).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&Bytes, &Bytes)> + Clone + '_ {
        self.fields.iter().map(|(name, value)| (name, value))
    }

    /// Keeps only the fields for which `keep(name, value)` is true, counting the others as
    /// dropped: for the fields the message's Connection header lists
    /// (`|name, _| !members.lists(name)` with [`ConnectionMembers`](crate::ConnectionMembers)).
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8], &[u8]) -> bool) {
        let before = self.fields.len();
        self.fields.retain(|(name, value)| keep(name, value));
        self.dropped += before - self.fields.len();
    }

    /// The kept fields as (name, value) pairs, for an encoder of another protocol.
    pub fn into_vec(self) -> Vec<(Bytes, Bytes)> {
        self.fields
    }
}

/// Parses a trailer section as [`ChunkEvent::End`](crate::ChunkEvent::End) hands it out (field
/// lines each ending in CRLF, without the empty line that ends the section; possibly empty) and
/// keeps the fields [`allowed_in_trailers`]. Every line is checked as strictly as a request's
/// field lines: a line without CRLF is `BadLineEnding`; no colon, an empty name, a name byte
/// that is not a tchar (whitespace before the colon, obs-fold), a control byte in the value or
/// an empty line is `BadTrailer`. The decoder already refused all of those, so on its output this
/// fails only if it was handed something else. Allocates only when a field is kept.
pub fn parse_trailers(raw: &Bytes) -> Result<Trailers, ChunkError> {
    let mut trailers = Trailers::default();
    let mut rest: &[u8] = raw;
    while !rest.is_empty() {
        let lf = memchr::memchr(b'\n', rest).ok_or(ChunkError::BadLineEnding)?;
        let line = match rest[..lf].strip_suffix(b"\r") {
            Some(line) => line,
            None => return Err(ChunkError::BadLineEnding),
        };
        let (name, value) = split_field_line(line).ok_or(ChunkError::BadTrailer)?;
        if allowed_in_trailers(name) {
            trailers
                .fields
                .push((raw.slice_ref(name), raw.slice_ref(value)));
        } else {
            trailers.dropped += 1;
        }
        rest = &rest[lf + 1..];
    }
    Ok(trailers)
}

#[cfg(test)]
mod tests;
