//! Range requests and the pieces of representations the cache keeps for them (RFC 9111 §3.3):
//! a `GET` with a `Range` that no complete stored response answers is answered from a stored
//! piece holding the bytes it asks for, or forwarded; a single-range `206` with a strong
//! validator coming back is kept as a piece, combined with the stored one when both carry the
//! same strong validator (§3.4), and stored as the complete response once the pieces cover
//! the whole representation.
//!
//! Pieces live under their own key (`cache::piece_key`): a lookup for a whole response never
//! finds one, so a piece can only ever be answered in part. Completing a piece on a full `GET`
//! is `completion.rs`.

use sepia_cache_policy::{evaluate, CacheStatus, Decision, Fields, Forward};
use sepia_observe::ResultCode;
use sepia_store::Object;

use super::combine::{judge_piece, Judging};
use super::context::{Ctx, Exchange};
use super::fill::{relay_storing, store_and_relay, Storing};
use super::hit::{self, Served};
use super::pass::{self, relay};
use super::query::{gateway_timeout, selecting, writer_for, Query};
use super::responder::{HitPlan, Responder};
use crate::cache::{piece_key, publish_combined, unix_now, Cache, Meta, Publishing, CACHE_NAME};
use crate::model::{BodyLength, HeaderId, Outcome, RequestView, ResponseView};
use crate::upstream::Fetched;

/// A `GET` with a `Range` and no complete stored response to answer it.
pub(super) async fn answer_range<C: Responder>(
    x: &mut Exchange<'_, C>,
    cache: &Cache,
    q: &Query<'_>,
) -> Outcome {
    let mut key = Vec::new();
    piece_key(q.key, &mut key);
    let stored = match cache.may_hold_pieces() {
        true => selecting(x.cx.req, |select| cache.store.lookup_no_fill(&key, select)),
        false => None,
    };
    // A piece purged by a prefix or tag ban since it was stored is not one.
    let stored = stored.filter(|obj| !cache.bans.condemns(q.key, obj));
    if let Some(obj) = &stored {
        if let Some(status) = answerable(x.cx.req, q, obj) {
            return hit::serve(x, obj, Served::hit(q.now, status)).await;
        }
    }
    if q.rcc.only_if_cached() {
        return gateway_timeout();
    }
    let fwd = if stored.is_some() {
        Forward::Partial
    } else {
        Forward::UriMiss
    };
    let request_time = unix_now();
    let cx = x.cx;
    let fetched = match pass::fetch(cx, x.client, x.origin, &q.dest.upstream).await {
        Ok(fetched) => fetched,
        Err(e) => return e.outcome(),
    };
    let kept = Kept {
        cache,
        q,
        piece_key: &key,
        stored: stored.as_deref(),
        request_time,
        fwd,
    };
    keep_and_relay(cx, x.client, x.cache_status, fetched, kept).await
}

/// The Cache-Status of answering the request from the stored piece `obj`, if it can: usable
/// without the origin, and the answer (a range, 304, 412 or 416) needs no byte it lacks.
fn answerable<'q>(
    req: &impl RequestView,
    q: &Query<'q>,
    obj: &Object<Meta>,
) -> Option<CacheStatus<'q>> {
    let entry = obj.meta();
    let piece = entry.piece?;
    let ttl = match evaluate(&entry.meta, &q.rcc, q.now, q.policy) {
        Decision::Fresh(f) | Decision::StaleAllowed(f) => f.ttl(),
        // No background refresh of pieces: a stale one is fetched again.
        _ => return None,
    };
    let fits = match hit::plan(req, &entry.meta, piece.complete) {
        HitPlan::Partial { start, end } => piece.holds(start, end),
        HitPlan::Full => false,
        HitPlan::NotModified | HitPlan::PreconditionFailed | HitPlan::Unsatisfiable => true,
    };
    fits.then(|| q.hit_status(&entry.meta, ttl))
}

/// What a range request's answer may be kept as.
struct Kept<'a> {
    cache: &'a Cache,
    q: &'a Query<'a>,
    piece_key: &'a [u8],
    /// The stored piece found, fresh or not.
    stored: Option<&'a Object<Meta>>,
    request_time: u64,
    fwd: Forward,
}

/// Relays the origin's answer to a range request, keeping it when it may be: a `200` as the
/// complete response, a single-range `206` as a piece (combined with the stored one when
/// they share a strong validator).
async fn keep_and_relay<C: Responder>(
    cx: Ctx<'_, C::Request>,
    client: &mut C,
    cache_status: &mut Vec<u8>,
    mut fetched: Fetched<'_>,
    k: Kept<'_>,
) -> Outcome {
    let status = fetched.head().status();
    if status == 200 {
        // The whole representation: no piece of it is needed any more, and one of an older
        // representation must not outlive it.
        k.cache.store.purge(k.piece_key);
        if let Some(writer) = writer_for(cx.req, k.cache, k.q.key) {
            let storing = Storing::miss(k.q, writer, k.request_time, k.fwd);
            return store_and_relay(cx, client, cache_status, &mut fetched, storing).await;
        }
    }
    let forwarded = CacheStatus::forward(k.fwd).with_fwd_status(status);
    let judging = Judging {
        q: k.q,
        request_time: k.request_time,
        stored: k.stored,
        // A 206 answering If-Range may leave out the fields describing the representation.
        alone: !cx.req.fields().contains(HeaderId::IfRange),
    };
    let new = match status {
        206 => judge_piece(cx.req, &fetched, &judging).await,
        _ => None,
    };
    let whole = new.as_ref().is_some_and(|n| n.piece.is_complete());
    let key = if whole { k.q.key } else { k.piece_key };
    if new.is_some() && !whole {
        // Before the fill starts: a purge meanwhile must see it (`Cache::purge`).
        k.cache.keeping_pieces();
    }
    let writer = new.as_ref().and_then(|_| writer_for(cx.req, k.cache, key));
    let (Some(new), Some(writer)) = (new, writer) else {
        cache_status.clear();
        forwarded.write(CACHE_NAME, cache_status);
        let relayed = relay(
            cx.state,
            client,
            &mut fetched,
            cache_status,
            None,
            ResultCode::TcpMiss,
        );
        return relayed.await.outcome;
    };
    let publishing = Publishing {
        meta: new.meta,
        length: BodyLength::Known(new.piece.len()),
        via: cx.state.via(),
        secondary: new.secondary,
        piece: (!whole).then_some(new.piece),
    };
    let mut body = publish_combined(writer, &new.fields, publishing);
    // The stored bytes before the new ones go in first; those after, once the new ones are in.
    for chunk in &new.before {
        body.append(chunk);
    }
    cache_status.clear();
    forwarded.with_stored().write(CACHE_NAME, cache_status);
    let stored = (body, &new.after[..], ResultCode::TcpMiss);
    let (outcome, committed) =
        relay_storing(cx.state, client, &mut fetched, cache_status, stored).await;
    if committed && whole {
        // The complete response replaces the pieces it was made of.
        k.cache.store.purge(k.piece_key);
    }
    outcome
}
