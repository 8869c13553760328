//! Misses: fetching a response and storing it while it is relayed (RFC 9111 §3), and requests
//! that collapse onto another request's fill of the same URL (one origin request for many).

use bytes::Bytes;
use sepia_cache_policy::{
    is_storable_stored, vary_key_of, CacheStatus, Forward, Storability, StoredMeta, VaryKey,
};
use sepia_observe::ResultCode;
use sepia_store::{FillHead, FillReader, FillWriter, Object};

use super::context::{Ctx, Exchange};
use super::destination::Destination;
use super::hit;
use super::pass::{self, relay};
use super::query::{decided_by, Query};
use super::responder::Responder;
use crate::cache::{publish_response, unix_now, Meta, Publishing, StoringBody, CACHE_NAME};
use crate::model::{Outcome, RequestView, ResponseView};
use crate::state::State;
use crate::upstream::{Conditionals, Fetched};
use sepia_cache_policy::PolicyConfig;

/// A miss: fetch the response and store it while relaying it. One boxed future for both steps
/// (a box each cost an allocation and a copy of their state on every miss).
pub(super) async fn fill<C: Responder>(
    x: &mut Exchange<'_, C>,
    q: &Query<'_>,
    writer: FillWriter<Meta>,
) -> Outcome {
    let request_time = unix_now();
    let cx = x.cx;
    let up = &q.dest.upstream;
    // Taken out of the `Result` in a statement of its own: the `Result` is then not kept in
    // this future's state beside the response it held, through the relay.
    let mut fetched = match pass::fetch_with(cx, x.client, x.origin, up, &Conditionals::STRIP).await
    {
        Ok(fetched) => fetched,
        Err(e) => {
            writer.abort();
            return e.outcome();
        }
    };
    let storing = Storing::miss(q, writer, request_time, Forward::UriMiss);
    store_and_relay(cx, x.client, x.cache_status, &mut fetched, storing).await
}

/// A response that may be stored through `writer`.
pub(super) struct Storing<'a> {
    /// The cache policy of the listener the request came through.
    pub policy: &'a PolicyConfig,
    pub key: &'a [u8],
    pub writer: FillWriter<Meta>,
    /// When the request was sent (RFC 9111 §4.2.3).
    pub request_time: u64,
    /// Why the cache went forward (Cache-Status `fwd`).
    pub fwd: Forward,
    /// The result code when the response is relayed whole.
    pub result: ResultCode,
    /// The request's method is judged as a GET's: a POST response already found reusable for
    /// later GETs (RFC 9110 §9.3.3), whose other storability rules are a GET response's.
    pub judged_as_get: bool,
}

impl<'a> Storing<'a> {
    /// A response to `q` fetched at `request_time` because of `fwd`, logged as a miss.
    pub fn miss(q: &Query<'a>, writer: FillWriter<Meta>, request_time: u64, fwd: Forward) -> Self {
        Storing {
            policy: q.policy,
            key: q.key,
            writer,
            request_time,
            fwd,
            result: ResultCode::TcpMiss,
            judged_as_get: false,
        }
    }
}

/// Relays the fetched response, storing it when the policy allows (RFC 9111 §3). The body is
/// copied once into the store (so a small object does not pin a large read buffer); the copy
/// is abandoned if the relay fails, so nothing incomplete is kept.
pub(super) async fn store_and_relay<C: Responder>(
    cx: Ctx<'_, C::Request>,
    client: &mut C,
    cache_status: &mut Vec<u8>,
    fetched: &mut Fetched<'_>,
    s: Storing<'_>,
) -> Outcome {
    let result = s.result;
    // Decided in a plain function: its locals (the response's metadata among them) are gone
    // before the relay, instead of kept in this future's state through it.
    match start_storing(cx, fetched, s, cache_status) {
        None => {
            relay(cx.state, client, fetched, cache_status, None, result)
                .await
                .outcome
        }
        Some(body) => {
            let stored = (body, &[][..], result);
            relay_storing(cx.state, client, fetched, cache_status, stored)
                .await
                .0
        }
    }
}

/// Whether `fetched` is to be stored (RFC 9111 §3): its body's way into the store if it is,
/// `None` (and the fill's writer released) if it is only relayed. Either way `cache_status` is
/// written for the client.
fn start_storing<R: RequestView>(
    cx: Ctx<'_, R>,
    fetched: &Fetched<'_>,
    s: Storing<'_>,
    cache_status: &mut Vec<u8>,
) -> Option<StoringBody> {
    let policy = s.policy;
    let resp = fetched.head();
    let fields = resp.fields();
    let now = unix_now();
    let meta =
        StoredMeta::from_response(resp.status(), &fields, s.request_time, now, s.key, policy);
    // Both read the response's Cache-Control, Expires and Vary from the metadata just built.
    let request_fields = cx.req.fields();
    let method = if s.judged_as_get {
        b"GET"
    } else {
        cx.req.method_raw()
    };
    let storable = is_storable_stored(method, &request_fields, &meta, policy);
    // The secondary key is written into the Cache-Status buffer, written anew below, and
    // copied out at its exact size: a fresh `Vec` grew three times per Vary'd miss.
    let vary = vary_key_of(&meta.vary, &request_fields, cache_status);
    let secondary = Bytes::copy_from_slice(cache_status);
    let source = meta.source;
    let mut status = CacheStatus::forward(s.fwd).with_fwd_status(resp.status());
    // A body whose end cannot be told apart from the origin dying (HTTP/1.1 close-delimited,
    // RFC 9112 §8) is relayed, but never stored.
    if !storable.is_storable()
        || vary == VaryKey::Never
        || !meta.is_worth_storing()
        || !fetched.end_is_certain()
    {
        s.writer.release();
        if let Storability::NotStorable(why) = storable {
            status = status.with_detail(why.as_str());
        } else if !fetched.end_is_certain() {
            // Storable by its fields, but its end or its coding cannot be trusted.
            status = status.with_detail("framing");
        }
        cache_status.clear();
        status.write(CACHE_NAME, cache_status);
        return None;
    }
    let publishing = Publishing {
        meta,
        length: fetched.body_length(),
        via: cx.state.via(),
        secondary,
        piece: None,
    };
    let body = publish_response(s.writer, resp, publishing);
    cache_status.clear();
    let status = decided_by(status, policy, source);
    status.with_stored().write(CACHE_NAME, cache_status);
    Some(body)
}

/// Relays the fetched response while its body is stored through `body`, followed by `tail`
/// (stored bytes that come after it in the representation). Commits it only if every byte
/// arrived (the store also checks an announced length). Logged as `result` when complete.
/// Returns the outcome and whether the response was committed.
pub(super) async fn relay_storing<C: Responder>(
    state: &State,
    client: &mut C,
    fetched: &mut Fetched<'_>,
    cache_status: &[u8],
    (mut body, tail, result): (StoringBody, &[Bytes], ResultCode),
) -> (Outcome, bool) {
    let tee = Some(&mut body);
    let relayed = relay(state, client, fetched, cache_status, tee, result).await;
    if !relayed.body_complete {
        body.abort();
        return (relayed.outcome, false);
    }
    for chunk in tail {
        body.append(chunk);
    }
    match body.finish() {
        Ok(_) => (relayed.outcome, true),
        Err(e) => {
            tracing::debug!("not stored: {e}");
            (relayed.outcome, false)
        }
    }
}

/// Another request is already fetching this URL and its response `head` arrived: stream its
/// body as it arrives, unless it is another Vary variant (then fetch on our own).
pub(super) async fn collapse<C: Responder>(
    x: &mut Exchange<'_, C>,
    dest: &Destination<'_>,
    head: FillHead<Meta>,
    reader: FillReader<Meta>,
) -> Outcome {
    let obj = &head.object;
    if !selects(x.cx.req, obj) {
        return Box::pin(pass::pass(x, dest, Forward::VaryMiss)).await;
    }
    let now = unix_now();
    let status = CacheStatus::hit(obj.meta().meta.freshness(now).ttl()).with_collapsed();
    hit::serve_fill(x, head, reader, now, status).await
}

/// Whether `req` selects the variant `obj` (RFC 9111 §4.1): a fill found by key alone may be
/// another variant than the request's Vary fields choose.
pub(super) fn selects(req: &impl RequestView, obj: &Object<Meta>) -> bool {
    let mut scratch = Vec::new();
    let fields = req.fields();
    obj.meta()
        .meta
        .vary_matches(obj.secondary(), &fields, &mut scratch)
}
