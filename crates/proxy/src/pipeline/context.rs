//! What one request carries through the pipeline: the shared state, what is known of its
//! connection, the request itself, the front end answering it, and the buffers its connection
//! lends it (by `&mut`: nothing is taken out and put back by hand).

use std::sync::Arc;

use sepia_config::Mode;

use super::responder::Responder;
use crate::model::{ClientInfo, Scheme};
use crate::state::State;
use crate::transport::intercept::Divert;
use crate::upstream;

/// A client connection as the pipeline sees it, fixed when it is accepted.
pub struct ConnInfo {
    pub client: ClientInfo,
    /// The kind of listener it arrived on.
    pub mode: Mode,
    /// Where an intercepted connection was going (`NotDiverted` on other listeners).
    pub divert: Divert,
    /// The client may use this listener when no `[[http_access]]` rules say otherwise
    /// (`forward.allow`; reverse listeners serve everyone).
    pub allowed: bool,
    /// The scheme clients use to reach the listener: what an origin-form request's URL has.
    pub scheme: Scheme,
    /// The listener's index in the configuration (its cache policy: `Cache::policy`).
    pub listener: usize,
}

impl ConnInfo {
    /// Whether `state`'s configuration lets this connection's client use its listener
    /// (`allowed`): at accept, and again after a reload.
    pub fn allowed_by(state: &State, mode: Mode, client: std::net::IpAddr) -> bool {
        mode == Mode::Reverse || state.config.forward.client_allowed(client)
    }
}

/// Buffers a connection reuses for every request on it, so that a hit allocates nothing.
#[derive(Default)]
pub struct Buffers {
    /// The cache key (and the URL the access rules see).
    pub key: Vec<u8>,
    /// The Cache-Status value of the response (RFC 9211).
    pub cache_status: Vec<u8>,
    /// The origin exchange's buffers.
    pub origin: upstream::Scratch,
}

/// The request and what it shares with its connection and the server: read-only, and copied
/// freely, so that holding it never keeps the exchange's buffers borrowed.
pub struct Ctx<'a, R> {
    pub state: &'a Arc<State>,
    pub conn: &'a ConnInfo,
    pub req: &'a R,
}

impl<R> Clone for Ctx<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for Ctx<'_, R> {}

/// One request on its way through the pipeline.
pub struct Exchange<'a, C: Responder> {
    pub cx: Ctx<'a, C::Request>,
    pub client: &'a mut C,
    pub cache_status: &'a mut Vec<u8>,
    pub origin: &'a mut upstream::Scratch,
    /// The user the request authenticated as (`[auth]` and a `proxy_auth` ACL), for the
    /// access log's `%un`.
    pub user: Option<Arc<str>>,
}
