//! The request pipeline, written once for every protocol: access → destination → cache
//! (lookup, fill, collapse, revalidate, purge, background refresh) or pass or tunnel →
//! upstream → respond → log. It sees the request through `model::RequestView`, answers
//! through the [`Responder`] a front end implements, and sends to origins through
//! `upstream`; it never touches a socket or a wire format.
//!
//! Every path but a hit awaits its work boxed: a connection's task holds the largest future
//! of its request path for its whole life, so only the hit path (no allocation) stays inline
//! and an idle or hit-serving connection's task stays small. The other paths allocate anyway.

mod access;
mod background;
mod cache_flow;
mod combine;
mod completion;
mod connect;
mod context;
mod destination;
mod fill;
mod hit;
mod intercepted;
mod log;
mod pass;
mod pieces;
mod query;
mod request;
mod responder;
mod revalidate;
mod unsafe_method;

use std::sync::Arc;

use bytes::Bytes;
use sepia_observe::metrics::Stamp;

pub use context::{Buffers, ConnInfo};

use self::context::{Ctx, Exchange};
pub use responder::{HitPlan, Responder, StoredAnswer, Tunneled};

use self::log::Timing;
use crate::model::{Gone, Outcome, LOCAL_ANSWER_TYPE};
use crate::state::State;

/// Answers one request and logs it. The front end decides from the outcome (`close`) and
/// what it knows of its own wire whether the connection carries another request.
pub async fn serve<C: Responder>(
    state: &Arc<State>,
    conn: &ConnInfo,
    client: &mut C,
    req: &C::Request,
    buffers: &mut Buffers,
) -> Outcome {
    // The request's time starts when its head is complete (Squid's %tr), not while idle.
    // Read only for the access log: two clock reads are a visible share of a hit.
    let timing = state.log.is_enabled().then(Timing::now);
    let started = state.metrics.then(Stamp::now);
    let Buffers {
        key,
        cache_status,
        origin,
    } = buffers;
    let mut x = Exchange {
        cx: Ctx { state, conn, req },
        client,
        cache_status,
        origin,
        user: None,
    };
    let mut outcome = request::answer(&mut x, key).await;
    if outcome.local.is_some() {
        outcome = send_local(x.client, outcome).await;
    }
    let outcome = outcome.with_bytes_sent(x.client.bytes_sent());
    if let Some(timing) = timing {
        log::record(state, conn, req, x.user.as_deref(), timing, &outcome);
    }
    if let Some(started) = started {
        log::count(conn, req, started, &outcome);
    }
    // The origin's response head and read buffer: given back now (see `release_response`).
    buffers.origin.release_response();
    outcome
}

/// Answers a request the front end refused before it reached the pipeline (an invalid or
/// late head) with `outcome`'s local answer, and logs it.
pub async fn refuse<C: Responder>(
    state: &State,
    conn: &ConnInfo,
    client: &mut C,
    req: &C::Request,
    outcome: Outcome,
) -> Outcome {
    let timing = state.log.is_enabled().then(Timing::now);
    let started = state.metrics.then(Stamp::now);
    let outcome = send_local(client, outcome).await;
    let outcome = outcome.with_bytes_sent(client.bytes_sent());
    if let Some(timing) = timing {
        log::record(state, conn, req, None, timing, &outcome);
    }
    if let Some(started) = started {
        log::count(conn, req, started, &outcome);
    }
    outcome
}

/// Sends the outcome's local answer, if it has one. Awaited only when there is one: most
/// requests have none, and a hit then polls no future for it.
async fn send_local<C: Responder>(client: &mut C, outcome: Outcome) -> Outcome {
    let Some(answer) = outcome.local else {
        return outcome;
    };
    let outcome = outcome.with_content_type(Some(Bytes::from_static(LOCAL_ANSWER_TYPE)));
    let sent = client.send_local(answer, outcome.close).await;
    match sent {
        Ok(()) => outcome,
        Err(Gone) => outcome.closing(),
    }
}
