//! Forwarding a request and relaying its response: the pass-through path, and the relay every
//! other path that reaches an origin ends in (a fill tees the body into the store on the way).

use sepia_cache_policy::{CacheStatus, Forward};
use sepia_observe::ResultCode;

use super::context::{Ctx, Exchange};
use super::destination::Destination;
use super::responder::Responder;
use crate::cache::{StoringBody, CACHE_NAME};
use crate::model::{BodyPiece, FieldView, HeaderId, Outcome, ResponseView};
use crate::state::State;
use crate::upstream::{self, Conditionals, FetchError, Fetched, OriginRequest, Upstream};

/// Sends the request upstream, its conditionals as `cond` says, and reads the response head.
/// Borrows only the origin buffers of the exchange, so its client stays usable meanwhile.
pub(super) async fn fetch_with<'s, C: Responder>(
    cx: Ctx<'s, C::Request>,
    client: &mut C,
    origin: &'s mut upstream::Scratch,
    up: &Upstream<'_>,
    cond: &Conditionals<'_>,
) -> Result<Fetched<'s>, FetchError> {
    let request = OriginRequest {
        req: cx.req,
        upstream: up,
        cond,
        client: &cx.conn.client,
        client_scheme: cx.conn.scheme,
    };
    upstream::fetch(&cx.state.upstreams, request, client, origin).await
}

/// [`fetch_with`] the client's conditionals as received.
pub(super) async fn fetch<'s, C: Responder>(
    cx: Ctx<'s, C::Request>,
    client: &mut C,
    origin: &'s mut upstream::Scratch,
    up: &Upstream<'_>,
) -> Result<Fetched<'s>, FetchError> {
    fetch_with(cx, client, origin, up, &Conditionals::AS_RECEIVED).await
}

/// Passes a request through to the origin and relays the answer: no cache involved.
pub(super) async fn forward<C: Responder>(
    x: &mut Exchange<'_, C>,
    dest: &Destination<'_>,
) -> Outcome {
    let cx = x.cx;
    // Out of the `Result` in a statement of its own, as in `fill`: the `Result` is not kept
    // through the relay.
    let mut fetched = match fetch(cx, x.client, x.origin, &dest.upstream).await {
        Ok(fetched) => fetched,
        Err(e) => return e.outcome(),
    };
    relay_passed(cx.state, x.client, &mut fetched).await
}

/// Relays `fetched` as passed through, without a Cache-Status, logged as a miss.
pub(super) async fn relay_passed<C: Responder>(
    state: &State,
    client: &mut C,
    fetched: &mut Fetched<'_>,
) -> Outcome {
    relay(state, client, fetched, &[], None, ResultCode::TcpMiss)
        .await
        .outcome
}

/// Passes the request through without involving the store, saying why in Cache-Status.
pub(super) async fn pass<C: Responder>(
    x: &mut Exchange<'_, C>,
    dest: &Destination<'_>,
    why: Forward,
) -> Outcome {
    let cx = x.cx;
    let mut fetched = match fetch(cx, x.client, x.origin, &dest.upstream).await {
        Ok(fetched) => fetched,
        Err(e) => return e.outcome(),
    };
    let status = CacheStatus::forward(why).with_fwd_status(fetched.head().status());
    x.cache_status.clear();
    status.write(CACHE_NAME, x.cache_status);
    let relayed = relay(
        cx.state,
        x.client,
        &mut fetched,
        x.cache_status,
        None,
        ResultCode::TcpMiss,
    );
    relayed.await.outcome
}

/// How a relay ended.
pub(super) struct Relayed {
    pub outcome: Outcome,
    /// The origin's body was read to its end (what a cache fill may commit), even if the
    /// client stopped reading it.
    pub body_complete: bool,
}

/// Relays the fetched response to the client, logged as `result` when it completes, and
/// releases it (`Fetched::release`). `tee` sees every piece of the body (the store's copy);
/// with one, a client that goes away does not stop the body from being read to its end, so
/// that the fill others read survives it.
///
/// `fetched` is borrowed, not taken, here and in the relays that wrap this one: an
/// async fn keeps an argument taken by value twice in its state (the argument and the local it
/// becomes), and a miss waiting on its origin holds the whole boxed state of the fill.
pub(super) async fn relay<C: Responder>(
    state: &State,
    client: &mut C,
    fetched: &mut Fetched<'_>,
    cache_status: &[u8],
    mut tee: Option<&mut StoringBody>,
    result: ResultCode,
) -> Relayed {
    let head = fetched.head();
    let outcome = Outcome::answered(head.status(), result)
        .answered_by(fetched.origin_ip())
        .with_content_type(state.for_log(|| head.fields().shared(HeaderId::ContentType)));
    let started = client.start_relayed(head, fetched.body_length(), cache_status);
    let mut client_there = started.await.is_ok();
    let outcome = outcome.first_byte_now(state.metrics);
    let mut body_complete = false;
    while client_there || tee.is_some() {
        match fetched.next_body().await {
            Ok(BodyPiece::Data(data)) => {
                if let Some(tee) = tee.as_mut() {
                    tee.append(&data);
                }
                if client_there {
                    client_there = client.send_data(&data).await.is_ok();
                }
            }
            Ok(BodyPiece::End(trailers)) => {
                if client_there {
                    client_there = client.send_end(&trailers).await.is_ok();
                }
                body_complete = true;
                break;
            }
            Err(e) => {
                // The origin failed mid-body: the client must not see a clean end, so its
                // connection closes (and the origin's is dropped).
                tracing::debug!("response relay aborted: {e}");
                client_there = false;
                break;
            }
        }
    }
    fetched.release();
    let outcome = if client_there {
        outcome
    } else {
        outcome.logged_as(ResultCode::TcpMissAborted).closing()
    };
    Relayed {
        outcome,
        body_complete,
    }
}
