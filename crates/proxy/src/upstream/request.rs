//! A request as the origin side sends it: where to, with which target and Host, and how its
//! conditionals are edited.

use super::origins::Origins;

/// Where and how a request is sent upstream.
pub struct Upstream<'a> {
    /// The origin-form target to send.
    pub target: &'a [u8],
    /// The Host value to send; `None` sends the authority of the origin the route picked.
    pub host: Option<&'a [u8]>,
    pub origins: Origins<'a>,
}

/// How the client's conditional fields reach the origin. A cache fill strips them (the
/// cache answers them itself from the stored response, RFC 9111 §4.3.2); a revalidation
/// replaces them with the stored response's validators (§4.3.1); completing a stored piece
/// asks for the missing bytes in place of the client's Range (RFC 9111 §3.4).
pub struct Conditionals<'a> {
    pub strip: bool,
    pub if_none_match: Option<&'a [u8]>,
    pub if_modified_since: Option<&'a [u8]>,
    /// Sent in place of the client's Range and If-Range.
    pub range: Option<RangeAsk<'a>>,
}

/// The bytes a cache asks for to complete a stored piece, only if the representation is
/// still the one the piece belongs to.
pub struct RangeAsk<'a> {
    /// The Range value (`bytes=first-last`).
    pub range: &'a [u8],
    /// The If-Range value: the piece's strong entity tag (RFC 9110 §13.1.5), so that a
    /// changed representation comes back whole (200) instead of as a range of other bytes.
    pub if_range: &'a [u8],
}

impl<'a> Conditionals<'a> {
    /// A revalidation's (RFC 9111 §4.3.1): the client's conditionals replaced with the stored
    /// response's validators.
    pub fn validating(
        if_none_match: Option<&'a [u8]>,
        if_modified_since: Option<&'a [u8]>,
    ) -> Conditionals<'a> {
        Conditionals {
            if_none_match,
            if_modified_since,
            ..Conditionals::STRIP
        }
    }
}

impl Conditionals<'static> {
    pub const AS_RECEIVED: Conditionals<'static> = Conditionals {
        strip: false,
        if_none_match: None,
        if_modified_since: None,
        range: None,
    };
    pub const STRIP: Conditionals<'static> = Conditionals {
        strip: true,
        if_none_match: None,
        if_modified_since: None,
        range: None,
    };
}
