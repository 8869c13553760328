//! The cache's request state machine: key → lookup → hit (serve), stale (revalidate), miss
//! (fetch, store while relaying), pending (collapse onto another request's fill), plus PURGE
//! and invalidation by unsafe methods (RFC 9111 §4.4). Follows the wiring in
//! `crates/cache-policy/NOTES.md`.

use std::cell::RefCell;
use std::sync::Arc;

use bytes::Bytes;
use sepia_cache_policy::{
    evaluate, invalidations, is_error_status, is_safe_method, is_storable_stored, primary_key,
    select_for_update, usable_on_error, validators, vary_key_of, CacheStatus, Decision, Fields,
    Forward, RequestCacheControl, RevalidateReason, StoredMeta, VaryKey,
};
use sepia_http1::{BodyFraming, HeaderId, Method, RequestHead};
use sepia_observe::ResultCode;
use sepia_store::{FillReader, FillWriter, FinishOutcome, Lookup, Object};

use super::serve::{serve_fill, serve_object};
use super::{
    background, freshened, publish_response, republish, unix_now, Cache, HeadFields, Meta,
};
use crate::client::{local_error, ClientSide};
use crate::exchange::{
    fetch, forward, relay_response, settle_unrelayed, Fetched, Origins, Outcome, Upstream,
};
use crate::heads::Conditionals;
use crate::shared::Shared;

/// Name this cache uses in Cache-Status (RFC 9211 §2).
pub const CACHE_NAME: &str = "sepia";

/// Handles a request through the cache (or passes it when caching is off). `authority` and
/// `target` form the cache key (RFC 9111 §2).
///
/// Every path but a hit awaits its work boxed: a connection's task holds the largest future
/// of its request path for its whole life, so only the hit path (no allocation) stays inline
/// and an idle or hit-serving connection's task stays small. The other paths allocate anyway.
pub async fn handle(
    shared: &Arc<Shared>,
    cs: &mut ClientSide,
    req: &RequestHead,
    up: Upstream<'_>,
    authority: &[u8],
    target: &[u8],
) -> Outcome {
    let Some(cache) = shared.cache.as_ref() else {
        return Box::pin(forward(shared, cs, req, up)).await;
    };
    let mut key = std::mem::take(&mut cs.key);
    primary_key(b"http", authority, target, &mut key);
    let outcome = route(shared, cache, cs, req, up, &key).await;
    cs.key = key;
    outcome
}

async fn route(
    shared: &Arc<Shared>,
    cache: &Cache,
    cs: &mut ClientSide,
    req: &RequestHead,
    up: Upstream<'_>,
    key: &[u8],
) -> Outcome {
    if req.method_raw() == b"PURGE" {
        return purge(cache, cs, req, key);
    }
    if !is_safe_method(req.method_raw()) {
        let outcome = Box::pin(forward(shared, cs, req, up)).await;
        if outcome.local.is_none() && outcome.status != 0 {
            let resp = HeadFields(cs.resp.headers());
            let stale = invalidations(
                req.method_raw(),
                outcome.status,
                key,
                resp.first(HeaderId::Location),
                resp.first(HeaderId::ContentLocation),
            );
            for k in stale.iter() {
                cache.store.purge(k);
            }
        }
        return outcome;
    }
    // A GET or HEAD with a body is passed through whole: answering it from the cache would leave
    // its body unread on the connection, to be parsed as the next request (a desync a hit and a
    // miss would frame differently, RFC 9112 §11.2).
    if !matches!(req.method, Method::Get | Method::Head) || req.body_framing() != BodyFraming::Empty
    {
        return Box::pin(forward(shared, cs, req, up)).await;
    }
    let fields = HeadFields(req.headers());
    let rcc = RequestCacheControl::parse(&fields);
    let now = unix_now();
    let scratch = RefCell::new(Vec::new());
    let select = |o: &Object<Meta>| {
        o.meta()
            .meta
            .vary_matches(o.secondary(), &fields, &mut scratch.borrow_mut())
    };
    // HEAD and Range requests are answered from a stored response but never start a fill:
    // neither would give the cache a complete body to store.
    let partial = req.method == Method::Head || req.headers().get(HeaderId::Range).is_some();
    let lookup = if partial {
        match cache.store.lookup_no_fill(key, select) {
            Some(obj) => Lookup::Hit(obj),
            None if rcc.only_if_cached() => return gateway_timeout(),
            None => return Box::pin(pass(shared, cs, req, up, Forward::UriMiss)).await,
        }
    } else {
        cache.store.lookup(key, select)
    };
    match lookup {
        Lookup::Hit(obj) => match evaluate(&obj.meta().meta, &rcc, now, &cache.policy) {
            Decision::StaleWhileRevalidate(f) if !partial => {
                // RFC 5861 §3: serve the stale copy now; one background request refreshes it.
                if let Lookup::Miss(writer) = cache.store.refresh(key, select) {
                    start_background_revalidation(shared, cs, req, &up, key, &obj, writer);
                }
                let status = CacheStatus::hit(f.ttl()).with_detail("stale-while-revalidate");
                serve_object(shared, cs, req, &obj, now, ResultCode::TcpMemHit, status).await
            }
            Decision::Fresh(f) | Decision::StaleAllowed(f) | Decision::StaleWhileRevalidate(f) => {
                let status = CacheStatus::hit(f.ttl());
                serve_object(shared, cs, req, &obj, now, ResultCode::TcpMemHit, status).await
            }
            Decision::GatewayTimeout => gateway_timeout(),
            Decision::Revalidate { .. } if partial => {
                Box::pin(pass(shared, cs, req, up, Forward::Stale)).await
            }
            Decision::Revalidate { reason, .. } => {
                let fwd = if reason == RevalidateReason::RequestNoCache {
                    Forward::Request
                } else {
                    Forward::Stale
                };
                match cache.store.refresh(key, select) {
                    Lookup::Miss(writer) => {
                        Box::pin(revalidate(
                            shared, cache, cs, req, up, key, obj, writer, &rcc, fwd,
                        ))
                        .await
                    }
                    Lookup::Pending(reader) => {
                        Box::pin(collapse(shared, cs, req, up, reader)).await
                    }
                    Lookup::Hit(obj) => {
                        serve_object(
                            shared,
                            cs,
                            req,
                            &obj,
                            now,
                            ResultCode::TcpMemHit,
                            CacheStatus::hit(obj.meta().meta.freshness(now).ttl()),
                        )
                        .await
                    }
                }
            }
        },
        Lookup::Miss(writer) if rcc.only_if_cached() => {
            writer.release();
            gateway_timeout()
        }
        Lookup::Miss(writer) => Box::pin(fill(shared, cache, cs, req, up, key, writer)).await,
        Lookup::Pending(reader) => Box::pin(collapse(shared, cs, req, up, reader)).await,
    }
}

/// A miss: fetch the response and store it while relaying it. One boxed future for both steps
/// (a box each cost an allocation and a copy of their state on every miss).
async fn fill(
    shared: &Shared,
    cache: &Cache,
    cs: &mut ClientSide,
    req: &RequestHead,
    up: Upstream<'_>,
    key: &[u8],
    writer: FillWriter<Meta>,
) -> Outcome {
    let request_time = unix_now();
    match fetch(shared, cs, req, &up, &Conditionals::STRIP).await {
        Ok(fetched) => {
            let fwd = Forward::UriMiss;
            store_and_relay(
                shared,
                cache,
                cs,
                req,
                key,
                writer,
                fetched,
                request_time,
                fwd,
            )
            .await
        }
        Err(outcome) => {
            writer.abort();
            outcome
        }
    }
}

/// Prepares the conditional request for a background revalidation and starts it.
fn start_background_revalidation(
    shared: &Arc<Shared>,
    cs: &ClientSide,
    req: &RequestHead,
    up: &Upstream<'_>,
    key: &[u8],
    obj: &Arc<Object<Meta>>,
    writer: FillWriter<Meta>,
) {
    let (target, host) = match &up.origins {
        Origins::Route(state) => {
            let Some(i) = shared.routes.iter().position(|r| std::ptr::eq(r, *state)) else {
                return;
            };
            let first = state
                .origins
                .first()
                .map(|o| o.authority.clone())
                .unwrap_or_default();
            (
                background::Target::Route(i),
                up.host.map_or(first, Bytes::copy_from_slice),
            )
        }
        Origins::Host { host, port } => (
            background::Target::Host((*host).to_owned(), *port),
            Bytes::copy_from_slice(up.host.unwrap_or_default()),
        ),
        Origins::Diverted(d) => (
            background::Target::Diverted(**d),
            Bytes::copy_from_slice(up.host.unwrap_or_default()),
        ),
    };
    let v = validators(&obj.meta().meta);
    let cond = Conditionals {
        strip: true,
        if_none_match: v.if_none_match,
        if_modified_since: v.if_modified_since,
    };
    let mut head = bytes::BytesMut::with_capacity(512);
    crate::heads::origin_request(
        &mut head,
        req,
        up.target,
        &host,
        &shared.config.headers,
        &shared.via,
        &cs.info,
        &cond,
    );
    background::spawn(
        shared.clone(),
        key.to_vec(),
        head.freeze(),
        target,
        obj.clone(),
        writer,
    );
}

/// Passes the request through without involving the store, saying why in Cache-Status.
async fn pass(
    shared: &Shared,
    cs: &mut ClientSide,
    req: &RequestHead,
    up: Upstream<'_>,
    why: Forward,
) -> Outcome {
    match fetch(shared, cs, req, &up, &Conditionals::AS_RECEIVED).await {
        Ok(fetched) => {
            let status = cs.resp.status;
            let mut extra = std::mem::take(&mut cs.status_buf);
            header_line(
                &mut extra,
                CacheStatus::forward(why).with_fwd_status(status),
            );
            let outcome = relay_response(shared, cs, req, fetched, None, &extra).await;
            cs.status_buf = extra;
            outcome
        }
        Err(outcome) => outcome,
    }
}

/// A stale (or client-refreshed) stored response: ask the origin with its validators
/// (RFC 9111 §4.3.1), then serve the freshened copy on 304 (§4.3.4), a stale copy on an error
/// where allowed (RFC 5861 §4), or store and relay the new response.
#[allow(clippy::too_many_arguments)]
async fn revalidate(
    shared: &Shared,
    cache: &Cache,
    cs: &mut ClientSide,
    req: &RequestHead,
    up: Upstream<'_>,
    key: &[u8],
    obj: Arc<Object<Meta>>,
    writer: FillWriter<Meta>,
    rcc: &RequestCacheControl,
    fwd: Forward,
) -> Outcome {
    let entry = obj.meta().clone();
    let v = validators(&entry.meta);
    let cond = Conditionals {
        strip: true,
        if_none_match: v.if_none_match,
        if_modified_since: v.if_modified_since,
    };
    let request_time = unix_now();
    let fetched = match fetch(shared, cs, req, &up, &cond).await {
        Ok(f) => f,
        Err(outcome) => {
            if outcome.local.is_some()
                && usable_on_error(&entry.meta, rcc, unix_now(), &cache.policy)
            {
                writer.release();
                let status = CacheStatus::forward(fwd).with_detail("origin-unreachable");
                return serve_object(
                    shared,
                    cs,
                    req,
                    &obj,
                    unix_now(),
                    ResultCode::TcpRefreshFailOld,
                    status,
                )
                .await;
            }
            writer.abort();
            return outcome;
        }
    };
    let status = cs.resp.status;
    let resp = HeadFields(cs.resp.headers());
    if status == 304 && select_for_update(&[&entry.meta], &resp) == [0] {
        let now = unix_now();
        let times = (request_time, now);
        let (head, fresh) = freshened(&obj, &resp, times, key, &cache.policy, shared.via());
        let origin_ip = fetched.origin.addr.ip();
        settle_unrelayed(shared, req, &cs.resp, fetched);
        // Should the refresh not commit, the old object serves.
        let served = match republish(writer, &obj, head, fresh) {
            Ok(FinishOutcome::Stored(new)) => new,
            _ => obj,
        };
        let status = CacheStatus::forward(fwd).with_fwd_status(304);
        let mut outcome = serve_object(
            shared,
            cs,
            req,
            &served,
            now,
            ResultCode::TcpRefreshUnmodified,
            status,
        )
        .await;
        outcome.peer = Some(origin_ip);
        return outcome;
    }
    if status == 304 {
        // A 304 that selects no stored response (RFC 9111 §4.3.4) must not update it, and the
        // client, which may not have sent a conditional, must not receive it either.
        writer.abort();
        drop(fetched);
        return Outcome::error(
            502,
            "the origin answered 304 for a response Sepia does not hold",
            false,
        );
    }
    if is_error_status(status) && usable_on_error(&entry.meta, rcc, unix_now(), &cache.policy) {
        writer.release();
        let origin_ip = fetched.origin.addr.ip();
        drop(fetched); // its body is not wanted; the connection is not reused
        let status = CacheStatus::forward(fwd).with_fwd_status(status);
        let mut outcome = serve_object(
            shared,
            cs,
            req,
            &obj,
            unix_now(),
            ResultCode::TcpRefreshFailOld,
            status,
        )
        .await;
        outcome.peer = Some(origin_ip);
        return outcome;
    }
    let mut outcome = store_and_relay(
        shared,
        cache,
        cs,
        req,
        key,
        writer,
        fetched,
        request_time,
        fwd,
    )
    .await;
    if outcome.result == ResultCode::TcpMiss {
        outcome.result = if fwd == Forward::Request {
            ResultCode::TcpClientRefreshMiss
        } else {
            ResultCode::TcpRefreshModified
        };
    }
    outcome
}

/// Relays the response in `cs.resp`, storing it through `writer` when the policy allows
/// (RFC 9111 §3). The body is copied once into the store (so a small object does not pin a
/// large read buffer); the copy is abandoned if the relay fails, so nothing incomplete is kept.
#[allow(clippy::too_many_arguments)]
async fn store_and_relay(
    shared: &Shared,
    cache: &Cache,
    cs: &mut ClientSide,
    req: &RequestHead,
    key: &[u8],
    writer: FillWriter<Meta>,
    fetched: Fetched,
    request_time: u64,
    fwd: Forward,
) -> Outcome {
    let resp = &cs.resp;
    let fields = HeadFields(resp.headers());
    let meta = StoredMeta::from_response(
        resp.status,
        &fields,
        request_time,
        unix_now(),
        key,
        &cache.policy,
    );
    // Both read the response's Cache-Control, Expires and Vary from the metadata just built.
    let request_fields = HeadFields(req.headers());
    let storable = is_storable_stored(req.method_raw(), &request_fields, &meta, &cache.policy);
    let mut secondary = Vec::new();
    let vary = vary_key_of(&meta.vary, &request_fields, &mut secondary);
    let framing = resp.body_framing(req.method);
    // A close-delimited body cannot be told apart from one cut short by an origin that died
    // (RFC 9112 §8): relay it, but never store it.
    let complete_known = framing != BodyFraming::UntilClose;
    if !storable.is_storable()
        || vary == VaryKey::Never
        || !meta.is_worth_storing()
        || !complete_known
    {
        writer.release();
        let mut status = CacheStatus::forward(fwd).with_fwd_status(resp.status);
        if let sepia_cache_policy::Storability::NotStorable(why) = storable {
            status = status.with_detail(why.as_str());
        }
        let mut extra = std::mem::take(&mut cs.status_buf);
        header_line(&mut extra, status);
        let outcome = relay_response(shared, cs, req, fetched, None, &extra).await;
        cs.status_buf = extra;
        return outcome;
    }
    let via = shared.via();
    let mut body = publish_response(writer, meta, resp, framing, via, Bytes::from(secondary));
    let mut extra = std::mem::take(&mut cs.status_buf);
    header_line(
        &mut extra,
        CacheStatus::forward(fwd)
            .with_fwd_status(resp.status)
            .with_stored(),
    );
    let mut tee = |data: &[u8]| body.append(data);
    let outcome = relay_response(shared, cs, req, fetched, Some(&mut tee), &extra).await;
    cs.status_buf = extra;
    if outcome.body_complete {
        if let Err(e) = body.finish() {
            tracing::debug!("not stored: {e}");
        }
    } else {
        body.abort();
    }
    outcome
}

/// Another request is already fetching this URL: wait for its head, then stream its body as
/// it arrives (one origin request for many clients). If that response cannot be shared
/// (released, a different Vary variant) or does not start in time, fetch on our own.
async fn collapse(
    shared: &Shared,
    cs: &mut ClientSide,
    req: &RequestHead,
    up: Upstream<'_>,
    mut reader: FillReader<Meta>,
) -> Outcome {
    let wait = shared.config.timeouts.origin_first_byte;
    let head = match tokio::time::timeout(wait, reader.head()).await {
        Ok(Ok(head)) => head,
        _ => return Box::pin(pass(shared, cs, req, up, Forward::Miss)).await,
    };
    let mut scratch = Vec::new();
    let obj = &head.object;
    if !obj
        .meta()
        .meta
        .vary_matches(obj.secondary(), &HeadFields(req.headers()), &mut scratch)
    {
        return Box::pin(pass(shared, cs, req, up, Forward::VaryMiss)).await;
    }
    let status = CacheStatus::hit(obj.meta().meta.freshness(unix_now()).ttl()).with_collapsed();
    serve_fill(shared, cs, req, head, reader, unix_now(), status).await
}

/// PURGE removes every stored variant of the URL; allowed only from `cache.purge_allow`.
fn purge(cache: &Cache, cs: &ClientSide, req: &RequestHead, key: &[u8]) -> Outcome {
    let keep = req.keep_alive && req.body_framing() == BodyFraming::Empty;
    if !cache.config.purge_allowed(cs.peer.ip()) {
        return local_error(403, "PURGE is not allowed from your address", keep);
    }
    let mut outcome = if cache.store.purge(key) > 0 {
        local_error(200, "purged", keep)
    } else {
        local_error(404, "not in cache", keep)
    };
    outcome.result = ResultCode::TcpMiss;
    outcome
}

fn gateway_timeout() -> Outcome {
    // RFC 9111 §5.2.1.7: only-if-cached and nothing usable stored. Squid 5.7 logs it
    // `TCP_MISS/504 … HIER_NONE/-`.
    let mut outcome = local_error(504, "only-if-cached: not in cache", true);
    outcome.result = ResultCode::TcpMiss;
    outcome
}

/// Writes a complete `Cache-Status: …\r\n` line for a forwarded response into `out` (the
/// connection's reused buffer, taken out of it for the relay and put back after).
fn header_line(out: &mut Vec<u8>, status: CacheStatus<'_>) {
    out.clear();
    out.extend_from_slice(b"Cache-Status: ");
    status.write(CACHE_NAME, out);
    out.extend_from_slice(b"\r\n");
}
