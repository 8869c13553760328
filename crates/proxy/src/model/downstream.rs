//! The seam between the client side and the origin side of a forwarded request: what the
//! origin client needs from the front end while the request travels (its content, a place for
//! interim responses, word that the client went away). The h1 front end implements it over
//! its connection; a background revalidation, which has no client, over nothing.

use bytes::Bytes;

use super::message::ResponseView;
use super::trailers::Trailers;

/// The client went away (or stopped reading within the deadline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gone;

/// A piece of request content, as the front end decoded it from its wire.
#[derive(Debug)]
pub enum BodyPiece {
    Data(Bytes),
    /// The content is complete; these trailer fields follow it (already stripped of the
    /// fields that must never be trailers, RFC 9110 §6.5.1).
    End(Trailers),
}

/// Why the request content could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyError {
    /// The client's framing was invalid: answer 400 and close.
    Framing,
    /// The client closed, failed or stalled before the content was complete.
    Gone,
}

/// The client as the origin side sees it. The methods are called in order: the content
/// (`body_next` until it yields `End`), then `interim` and `gone` while the response head is
/// awaited.
pub trait Downstream {
    /// The client waits for a go-ahead before sending its content (`Expect: 100-continue`,
    /// RFC 9110 §10.1.1): the origin client sends the request head on its own first, and the
    /// front end invites the content when `body_next` is first called.
    fn awaits_continue(&self) -> bool;

    /// The next piece of the request content; a request without content yields `End` at once.
    async fn body_next(&mut self) -> Result<BodyPiece, BodyError>;

    /// An interim (1xx) response from the origin, for the client where its protocol carries
    /// one (RFC 9110 §15.2). Never 100 (the front end answers Expect itself) nor 101 (Sepia
    /// forwards no Upgrade).
    async fn interim(&mut self, head: &impl ResponseView) -> Result<(), Gone>;

    /// Completes when the client has gone away; pending while it is still there. Cancel-safe:
    /// the origin client races it against the origin's answer.
    async fn gone(&mut self);
}
