//! How the pipeline sees a message, whatever protocol carried it: a request through
//! [`RequestView`], a response through [`ResponseView`], their header sections through
//! [`FieldView`]. The h1 front end and the h1 origin client implement them over the codec's
//! parsed heads (slices of the read buffer, nothing copied); the h2 front end implements them
//! over a stream's decoded header list (`front/h2/request.rs`).

use bytes::Bytes;
use sepia_cache_policy::Fields;

use sepia_http1::{HeaderId, Method};

/// The protocol version a request arrived with: what the access log prints, and what decides
/// whether a client may be sent what HTTP/1.0 cannot parse.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Version {
    Http10,
    #[default]
    Http11,
    /// HTTP/2 (RFC 9113), logged as `HTTP/2.0`.
    Http2,
}

impl Version {
    /// The major and minor numbers, as the access log writes them.
    pub fn numbers(self) -> (u8, u8) {
        match self {
            Version::Http10 => (1, 0),
            Version::Http11 => (1, 1),
            Version::Http2 => (2, 0),
        }
    }
}

/// The length of a message's content as its sender framed it (RFC 9110 §6.4, §8.6), without
/// saying how: the front end and the origin client choose the framing of their own wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyLength {
    /// No content at all (a GET, a 204, a 304, the answer to a HEAD).
    None,
    /// Exactly this many bytes (possibly zero, which a response must still announce).
    Known(u64),
    /// Content whose end is signalled by the sender (HTTP/1.1 chunked or a close, an HTTP/2
    /// END_STREAM).
    Unknown,
}

/// One field line, as every protocol carries them (RFC 9110 §5): the codec's id for a name it
/// knows, the name as received and the value without surrounding whitespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field<'a> {
    pub id: HeaderId,
    pub name: &'a [u8],
    pub value: &'a [u8],
}

/// A header section. The cache policy reads it through [`Fields`]; the code that forwards a
/// message copies it through [`FieldView::each`].
pub trait FieldView: Fields + Sync {
    /// Every field line, in the order received.
    fn each(&self) -> impl Iterator<Item = Field<'_>> + '_;

    /// Whether the Connection field names `name` (RFC 9110 §7.6.1): such a field is meant
    /// for the previous hop only. The members are parsed once when this is called, then
    /// checked for every field the caller forwards.
    fn connection_names(&self) -> impl Fn(&[u8]) -> bool + '_;

    /// The first value of `id` as a `Bytes` sharing the message's buffer, for the few values
    /// kept after the exchange (the access log's).
    fn shared(&self, id: HeaderId) -> Option<Bytes>;

    /// The bytes the lines `lines` (indices into [`FieldView::each`]) arrived as, when they are
    /// exactly what writing them one by one in the front end's form would produce: a writer
    /// copies such a run at once. `None` when they are not, or the protocol has no such form.
    fn as_received(&self, lines: std::ops::Range<usize>) -> Option<&[u8]> {
        let _ = lines;
        None
    }
}

/// Whether `field` must not be forwarded: hop-by-hop by definition, or named in the message's
/// Connection field (`connection`, from [`FieldView::connection_names`]; RFC 9110 §7.6.1).
pub fn is_hop(field: Field<'_>, connection: &impl Fn(&[u8]) -> bool) -> bool {
    field.id.is_hop_by_hop() || connection(field.name)
}

/// A request as the pipeline sees it (RFC 9110 §3.2, §7.1).
pub trait RequestView {
    fn method(&self) -> Method;
    /// The method as sent (for an extension method, the only name it has).
    fn method_raw(&self) -> &[u8];
    /// The request-target as sent: origin-form, absolute-form or authority-form.
    fn target(&self) -> &[u8];
    fn version(&self) -> Version;
    fn fields(&self) -> impl FieldView + '_;
    /// The Host field, or what stands for it (HTTP/2's `:authority`).
    fn host(&self) -> Option<&[u8]>;
    /// How much content follows the head.
    fn body(&self) -> BodyLength;
    /// The Content-Length the client sent, even zero: methods whose semantics anticipate
    /// content keep an explicit zero toward the origin (RFC 9110 §8.6).
    fn declared_length(&self) -> Option<u64>;
    /// A part of the request (a slice returned by one of the methods above) as a `Bytes` that
    /// outlives the view: for the access log and for targets kept past the request.
    fn share(&self, part: &[u8]) -> Bytes;
}

/// A response head as the pipeline sees it.
pub trait ResponseView {
    fn status(&self) -> u16;
    /// The reason phrase as received; empty where the protocol has none.
    fn reason(&self) -> &[u8];
    fn fields(&self) -> impl FieldView + '_;
    /// The Content-Length the origin sent, kept for the answers that carry it without content
    /// (a HEAD, a 304: RFC 9110 §8.6).
    fn declared_length(&self) -> Option<u64>;
}
