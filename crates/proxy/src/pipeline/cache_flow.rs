//! The cache's request state machine: key → lookup → hit (serve), stale (revalidate), miss
//! (fetch, store while relaying), pending (collapse onto another request's fill), plus PURGE
//! and invalidation by unsafe methods (RFC 9111 §4.4). Follows the wiring in
//! `crates/cache-policy/NOTES.md`.

use std::sync::Arc;

use sepia_cache_policy::{
    evaluate, is_safe_method, primary_key, CacheStatus, Decision, Fields, Forward,
    RequestCacheControl, RevalidateReason,
};
use sepia_observe::ResultCode;
use sepia_store::{Body, FillError, FillReader, FillWriter, Lookup, Object};

use super::background;
use super::completion;
use super::context::Exchange;
use super::destination::Destination;
use super::fill;
use super::hit::{self, Served};
use super::pass;
use super::pieces;
use super::query::{gateway_timeout, selecting, writer_for, Query};
use super::responder::Responder;
use super::revalidate;
use super::unsafe_method;
use crate::cache::{unix_now, Cache, Meta};
use crate::model::{BodyLength, HeaderId, Method, Outcome, RequestView};

/// Answers a request through the cache (or passes it when caching is off). The cache key
/// is built in `key` from the destination's URL (RFC 9111 §2).
pub(super) async fn answer<C: Responder>(
    x: &mut Exchange<'_, C>,
    key: &mut Vec<u8>,
    dest: &Destination<'_>,
) -> Outcome {
    let state = x.cx.state;
    let Some(cache) = state.cache.as_ref() else {
        return Box::pin(pass::forward(x, dest)).await;
    };
    primary_key(dest.scheme.as_bytes(), dest.authority, dest.target, key);
    let key: &[u8] = key;
    let req = x.cx.req;
    if req.method_raw() == b"PURGE" {
        return purge(x, cache, key);
    }
    if !is_safe_method(req.method_raw()) {
        return Box::pin(unsafe_method::answer(x, cache, key, dest)).await;
    }
    // A GET or HEAD with a body is passed through whole: answering it from the cache would
    // leave its body unread on the connection, to be parsed as the next request (a desync a
    // hit and a miss would frame differently, RFC 9112 §11.2).
    if !matches!(req.method(), Method::Get | Method::Head) || req.body() != BodyLength::None {
        return Box::pin(pass::forward(x, dest)).await;
    }
    let fields = req.fields();
    let q = Query {
        policy: cache.policy(x.cx.conn.listener),
        key,
        dest,
        rcc: RequestCacheControl::parse(&fields),
        now: unix_now(),
        partial: req.method() == Method::Head || fields.contains(HeaderId::Range),
    };
    lookup(x, cache, &q).await
}

/// Looks the request up and answers from what is found.
async fn lookup<C: Responder>(x: &mut Exchange<'_, C>, cache: &Cache, q: &Query<'_>) -> Outcome {
    let found = if q.partial {
        match selecting(x.cx.req, |select| cache.store.lookup_no_fill(q.key, select)) {
            Some(obj) => Lookup::Hit(obj),
            // A range of a response stored whole is not found: one of a stored piece may be.
            None if x.cx.req.method() == Method::Get => {
                return Box::pin(pieces::answer_range(x, cache, q)).await;
            }
            None if q.rcc.only_if_cached() => return gateway_timeout(),
            None => return Box::pin(pass::pass(x, q.dest, Forward::UriMiss)).await,
        }
    } else {
        selecting(x.cx.req, |select| cache.store.lookup(q.key, select))
    };
    match found {
        Lookup::Hit(obj) if cache.bans.condemns(q.key, &obj) => {
            Box::pin(condemned(x, cache, q)).await
        }
        Lookup::Hit(obj) => {
            // Read from disk by this lookup, or a large body the disk tier serves from its
            // segment file: a hit from disk.
            let from_disk =
                obj.read_from_disk() || matches!(obj.body(), Body::File(f) if f.in_disk_segment());
            let code = if from_disk {
                ResultCode::TcpHit
            } else {
                ResultCode::TcpMemHit
            };
            on_stored(x, cache, q, obj, code).await
        }
        Lookup::Miss(writer) if q.rcc.only_if_cached() => {
            writer.release();
            gateway_timeout()
        }
        Lookup::Miss(writer) => miss(x, cache, q, writer).await,
        Lookup::Pending(reader) => Box::pin(pending(x, cache, q, reader)).await,
    }
}

/// A stored copy was purged by a prefix or tag ban issued since it was stored: it goes, and
/// the response is fetched (and stored) anew through the lookup after the purge. Only once:
/// should the store still find a copy, the origin answers this request.
async fn condemned<C: Responder>(x: &mut Exchange<'_, C>, cache: &Cache, q: &Query<'_>) -> Outcome {
    cache.purge(q.key);
    if q.rcc.only_if_cached() {
        return gateway_timeout();
    }
    if q.partial {
        return Box::pin(pass::pass(x, q.dest, Forward::UriMiss)).await;
    }
    match selecting(x.cx.req, |select| cache.store.lookup(q.key, select)) {
        Lookup::Miss(writer) => miss(x, cache, q, writer).await,
        _ => Box::pin(pass::pass(x, q.dest, Forward::Miss)).await,
    }
}

/// A fill under way for the key: another request's fetch to share, or the store replaying a
/// copy it kept on disk, which is then judged as any stored response (fresh, stale, Vary,
/// conditionals) and logged `TCP_HIT`, Squid's code for a hit from disk.
async fn pending<C: Responder>(
    x: &mut Exchange<'_, C>,
    cache: &Cache,
    q: &Query<'_>,
    mut reader: FillReader<Meta>,
) -> Outcome {
    let wait = x.cx.state.config.timeouts.origin_first_byte;
    let head = match tokio::time::timeout(wait, reader.head()).await {
        Ok(Ok(head)) => head,
        // Nothing stored can answer: `only-if-cached` gets a 504 (RFC 9111 §5.2.1.7) and never
        // reaches the origin.
        Ok(Err(_)) | Err(_) if q.rcc.only_if_cached() => {
            if let Some(writer) = reader.take_writer() {
                writer.release();
            }
            return gateway_timeout();
        }
        // The store could not serve the copy it started to read (a record that failed its
        // checksum, vanished, or a failed disk): fetch through the fill's writer, for every
        // request waiting on it, as after a miss.
        Ok(Err(FillError::Released)) => match reader.take_writer() {
            Some(writer) => return miss(x, cache, q, writer).await,
            None => return Box::pin(pass::pass(x, q.dest, Forward::Miss)).await,
        },
        _ => return Box::pin(pass::pass(x, q.dest, Forward::Miss)).await,
    };
    if !head.stored {
        return fill::collapse(x, q.dest, head, reader).await;
    }
    let obj = match tokio::time::timeout(wait, reader.into_object()).await {
        Ok(Ok(obj)) if !cache.bans.condemns(q.key, &obj) => obj,
        Ok(Ok(_)) => {
            cache.purge(q.key);
            return Box::pin(pass::pass(x, q.dest, Forward::Miss)).await;
        }
        _ => return Box::pin(pass::pass(x, q.dest, Forward::Miss)).await,
    };
    // The disk holds one variant per read (the newest); another request's Vary may not
    // select it (RFC 9111 §4.1).
    if !fill::selects(x.cx.req, &obj) {
        return Box::pin(pass::pass(x, q.dest, Forward::VaryMiss)).await;
    }
    on_stored(x, cache, q, obj, ResultCode::TcpHit).await
}

/// Nothing stored answers a full request: fetch it, or, when a stored piece of it lacks only
/// one range, fetch that range (RFC 9111 §3.4).
async fn miss<C: Responder>(
    x: &mut Exchange<'_, C>,
    cache: &Cache,
    q: &Query<'_>,
    writer: FillWriter<Meta>,
) -> Outcome {
    let writer = match completion::completable(cache, x.cx.req, q) {
        Some(piece) => match Box::pin(completion::complete(x, cache, q, writer, piece)).await {
            Ok(outcome) => return outcome,
            Err(writer) => writer,
        },
        None => writer,
    };
    Box::pin(fill::fill(x, q, writer)).await
}

/// A stored response was found: serve it, serve it while refreshing it in the background,
/// or revalidate it first (RFC 9111 §4.2, §4.3; RFC 5861).
/// `hit` is the result code of a hit from where it was found.
async fn on_stored<C: Responder>(
    x: &mut Exchange<'_, C>,
    cache: &Cache,
    q: &Query<'_>,
    obj: Arc<Object<Meta>>,
    hit: ResultCode,
) -> Outcome {
    match evaluate(&obj.meta().meta, &q.rcc, q.now, q.policy) {
        Decision::StaleWhileRevalidate(f) if !q.partial => {
            // RFC 5861 §3: serve the stale copy now; one background request refreshes it.
            if let Some(writer) = writer_for(x.cx.req, cache, q.key) {
                background::start(x.cx, q, &obj, writer);
            }
            let status = CacheStatus::hit(f.ttl()).with_detail("stale-while-revalidate");
            hit::serve(x, &obj, Served::hit(q.now, status).logged_as(hit)).await
        }
        Decision::Fresh(f) | Decision::StaleAllowed(f) | Decision::StaleWhileRevalidate(f) => {
            let status = q.hit_status(&obj.meta().meta, f.ttl());
            hit::serve(x, &obj, Served::hit(q.now, status).logged_as(hit)).await
        }
        Decision::GatewayTimeout => gateway_timeout(),
        Decision::Revalidate { .. } if q.partial => {
            Box::pin(pass::pass(x, q.dest, Forward::Stale)).await
        }
        Decision::Revalidate { reason, .. } => {
            let fwd = if reason == RevalidateReason::RequestNoCache {
                Forward::Request
            } else {
                Forward::Stale
            };
            Box::pin(refresh(x, cache, q, obj, fwd)).await
        }
    }
}

/// A stored response must be revalidated: do it, or join a refresh already under way.
async fn refresh<C: Responder>(
    x: &mut Exchange<'_, C>,
    cache: &Cache,
    q: &Query<'_>,
    obj: Arc<Object<Meta>>,
    fwd: Forward,
) -> Outcome {
    match selecting(x.cx.req, |select| cache.store.refresh(q.key, select)) {
        Lookup::Miss(writer) => revalidate::revalidate(x, q, obj, writer, fwd).await,
        Lookup::Pending(reader) => Box::pin(pending(x, cache, q, reader)).await,
        Lookup::Hit(obj) => {
            let ttl = obj.meta().meta.freshness(q.now).ttl();
            let status = q.hit_status(&obj.meta().meta, ttl);
            hit::serve(x, &obj, Served::hit(q.now, status)).await
        }
    }
}

/// PURGE removes every stored variant of the URL; allowed only from `cache.purge_allow`.
fn purge<C: Responder>(x: &Exchange<'_, C>, cache: &Cache, key: &[u8]) -> Outcome {
    if !cache.config.purge_allowed(x.cx.conn.client.peer.ip()) {
        return Outcome::local(403, "PURGE is not allowed from your address");
    }
    let answer = if cache.purge(key) > 0 {
        Outcome::local(200, "purged")
    } else {
        Outcome::local(404, "not in cache")
    };
    answer.logged_as(ResultCode::TcpMiss)
}
