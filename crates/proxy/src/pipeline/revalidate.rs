//! A stale (or client-refreshed) stored response, revalidated while the client waits: ask the
//! origin with its validators (RFC 9111 §4.3.1), then serve the freshened copy on 304
//! (§4.3.4), a stale copy on an error where allowed (RFC 5861 §4), or store and relay the new
//! response.

use sepia_observe::metrics::{self, Revalidation};
use std::sync::Arc;

use sepia_cache_policy::{
    is_error_status, select_for_update, usable_on_error, validators, CacheStatus, Forward,
};
use sepia_observe::ResultCode;
use sepia_store::{FillWriter, FinishOutcome, Object};

use super::context::Exchange;
use super::fill::{store_and_relay, Storing};
use super::hit::{self, Served};
use super::pass;
use super::query::Query;
use super::responder::Responder;
use crate::cache::{freshened, republish, unix_now, Meta};
use crate::model::{Outcome, ResponseView};
use crate::upstream::Conditionals;

pub(super) async fn revalidate<C: Responder>(
    x: &mut Exchange<'_, C>,
    q: &Query<'_>,
    obj: Arc<Object<Meta>>,
    writer: FillWriter<Meta>,
    fwd: Forward,
) -> Outcome {
    let entry = obj.meta().clone();
    let v = validators(&entry.meta);
    let cond = Conditionals::validating(v.if_none_match, v.if_modified_since);
    let request_time = unix_now();
    let cx = x.cx;
    let fetched = pass::fetch_with(cx, x.client, x.origin, &q.dest.upstream, &cond).await;
    let mut fetched = match fetched {
        Ok(f) => f,
        Err(e) => {
            metrics::revalidation(Revalidation::Failed);
            if e.is_origin_failure() && usable_on_error(&entry.meta, &q.rcc, unix_now(), q.policy) {
                writer.release();
                let status = CacheStatus::forward(fwd).with_detail("origin-unreachable");
                return hit::serve(x, &obj, stale_served(status, None)).await;
            }
            writer.abort();
            return e.outcome();
        }
    };
    let reply = fetched.head();
    let status = reply.status();
    let origin = Some(fetched.origin_ip());
    if status == 304 && select_for_update(&[&entry.meta], &reply.fields()) == [0] {
        metrics::revalidation(Revalidation::NotModified);
        let now = unix_now();
        let via = cx.state.via();
        let fresh = freshen(q, obj, writer, reply, (request_time, now), via);
        // A 304 has no body: the connection goes back to the pool.
        fetched.release();
        let how = Served {
            now,
            result: ResultCode::TcpRefreshUnmodified,
            cache_status: CacheStatus::forward(fwd).with_fwd_status(304),
            origin,
        };
        return hit::serve(x, &fresh, how).await;
    }
    if status == 304 {
        // A 304 that selects no stored response (RFC 9111 §4.3.4) must not update it, and the
        // client, which may not have sent a conditional, must not receive it either.
        writer.abort();
        metrics::revalidation(Revalidation::Failed);
        let refused = Outcome::local(502, UNSELECTED_304).logged_as(ResultCode::TcpMiss);
        return refused.closing();
    }
    if is_error_status(status) && usable_on_error(&entry.meta, &q.rcc, unix_now(), q.policy) {
        writer.release();
        metrics::revalidation(Revalidation::Failed);
        // Its body is not wanted: unless it was empty, the connection is not reused.
        fetched.release();
        let status = CacheStatus::forward(fwd).with_fwd_status(status);
        return hit::serve(x, &obj, stale_served(status, origin)).await;
    }
    metrics::revalidation(Revalidation::Modified);
    let storing = Storing {
        result: if fwd == Forward::Request {
            ResultCode::TcpClientRefreshMiss
        } else {
            ResultCode::TcpRefreshModified
        },
        ..Storing::miss(q, writer, request_time, fwd)
    };
    store_and_relay(cx, x.client, x.cache_status, &mut fetched, storing).await
}

const UNSELECTED_304: &str = "the origin answered 304 for a response Sepia does not hold";

/// The stored response freshened with a 304's fields (RFC 9111 §4.3.4) and published in place
/// of the stale one, through the refresh fill so that requests collapsed on it receive it too;
/// the old object when that does not commit.
fn freshen(
    q: &Query<'_>,
    obj: Arc<Object<Meta>>,
    writer: FillWriter<Meta>,
    reply: &impl ResponseView,
    times: (u64, u64),
    via: Option<&[u8]>,
) -> Arc<Object<Meta>> {
    let (head, fresh) = freshened(&obj, &reply.fields(), times, q.key, q.policy, via);
    match republish(writer, &obj, head, fresh) {
        Ok(FinishOutcome::Stored(new)) => new,
        _ => obj,
    }
}

/// A stale copy served because the origin failed (RFC 5861 §4).
fn stale_served(cache_status: CacheStatus<'_>, origin: Option<std::net::IpAddr>) -> Served<'_> {
    Served {
        now: unix_now(),
        result: ResultCode::TcpRefreshFailOld,
        cache_status,
        origin,
    }
}
