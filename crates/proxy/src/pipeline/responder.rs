//! The seam between the pipeline and a front end: everything the pipeline asks of the client
//! side to answer a request. A front end owns its connection and its wire format; the
//! pipeline only says what to answer. The h1 front end implements this over its connection;
//! the HTTP/2 front end will implement it over one stream.

use std::time::Duration;

use bytes::Bytes;
use sepia_store::Object;

use crate::cache::Meta;
use crate::model::{
    BodyLength, Downstream, Gone, LocalAnswer, RequestView, ResponseView, Trailers,
};
use crate::transport::Conn;

/// How a stored object answers this request: whole, a part of it (RFC 9110 §14), or the
/// answer to a conditional (§13.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HitPlan {
    /// The stored response as it is (200, or whatever status it has).
    Full,
    /// 206 with bytes `start..=end`.
    Partial { start: u64, end: u64 },
    /// 304: the client's validators match (§15.4.5).
    NotModified,
    /// 412: a precondition failed (§15.5.13).
    PreconditionFailed,
    /// 416: no requested range overlaps the content (§15.5.17).
    Unsatisfiable,
}

impl HitPlan {
    /// The status sent for an object stored with `stored`.
    pub fn status(self, stored: u16) -> u16 {
        match self {
            HitPlan::Full => stored,
            HitPlan::Partial { .. } => 206,
            HitPlan::NotModified => 304,
            HitPlan::PreconditionFailed => 412,
            HitPlan::Unsatisfiable => 416,
        }
    }
}

/// What goes with a stored object to the client besides the object itself.
#[derive(Clone, Copy, Debug)]
pub struct StoredAnswer<'a> {
    pub plan: HitPlan,
    /// A HEAD request: the head only (RFC 9110 §9.3.2).
    pub head_only: bool,
    /// The Age value (RFC 9111 §5.1).
    pub age: u64,
    /// The length of the representation, which a `Content-Range` states (RFC 9110 §14.4):
    /// the stored body's, or for a stored piece (RFC 9111 §3.3) the whole one's.
    pub representation_len: u64,
    /// Where the stored body starts in the representation: 0 but for a piece.
    pub body_offset: u64,
    /// The Cache-Status value (RFC 9211).
    pub cache_status: &'a [u8],
}

/// A CONNECT tunnel's traffic, once it closed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tunneled {
    /// Bytes from the client to the origin.
    pub up: u64,
    /// Bytes from the origin to the client.
    pub down: u64,
}

/// What the pipeline asks of the front end. A response is either one call (`send_stored`,
/// `send_local`, `tunnel`) or a start (`start_fill`, `start_relayed`) followed by
/// `send_data` calls and one `send_end`. A front end may hold the head of a started response
/// back and send it with the first piece of content (one gather write).
pub trait Responder: Downstream {
    /// The request type of this front end.
    type Request: RequestView;

    /// A complete stored object, answered as `answer` says.
    async fn send_stored(
        &mut self,
        obj: &Object<Meta>,
        answer: &StoredAnswer<'_>,
    ) -> Result<(), Gone>;

    /// Starts the answer from an object still being filled (a collapsed request), whose body
    /// follows as it arrives.
    async fn start_fill(
        &mut self,
        obj: &Object<Meta>,
        length: BodyLength,
        answer: &StoredAnswer<'_>,
    ) -> Result<(), Gone>;

    /// Starts a response relayed from an origin, adding the Cache-Status value when not empty.
    async fn start_relayed(
        &mut self,
        head: &impl ResponseView,
        length: BodyLength,
        cache_status: &[u8],
    ) -> Result<(), Gone>;

    /// One piece of the started response's content: a `Bytes` (the store's chunk, the
    /// origin's read) that a front end which queues content (HTTP/2) keeps without a copy.
    async fn send_data(&mut self, data: &Bytes) -> Result<(), Gone>;

    /// The end of the started response's content, with its trailer fields.
    async fn send_end(&mut self, trailers: &Trailers) -> Result<(), Gone>;

    /// An answer Sepia makes itself; with `close`, the connection closes after it.
    async fn send_local(&mut self, answer: LocalAnswer, close: bool) -> Result<(), Gone>;

    /// CONNECT (RFC 9110 §9.3.6): tells the client the tunnel is open, then carries bytes
    /// both ways until either side closes or nothing moves for `idle`.
    async fn tunnel(&mut self, origin: Conn, idle: Duration) -> Result<Tunneled, Gone>;

    /// The bytes written to the client for this request so far, heads included.
    fn bytes_sent(&self) -> u64;
}
