//! Requests with an unsafe method (RFC 9110 §9.2.1): passed to the origin, then what their
//! success made stale is invalidated (RFC 9111 §4.4), and a POST response that may answer
//! later GETs of its target is stored for them (RFC 9110 §9.3.3).

use sepia_cache_policy::{invalidations, storable_post_response, Fields, Forward};
use sepia_observe::ResultCode;

use super::context::Exchange;
use super::destination::Destination;
use super::fill::{store_and_relay, Storing};
use super::pass;
use super::query::writer_for;
use super::responder::Responder;
use crate::cache::{unix_now, Cache};
use crate::model::{HeaderId, Method, Outcome, RequestView, ResponseView};

pub(super) async fn answer<C: Responder>(
    x: &mut Exchange<'_, C>,
    cache: &Cache,
    key: &[u8],
    dest: &Destination<'_>,
) -> Outcome {
    let request_time = unix_now();
    let cx = x.cx;
    let mut fetched = match pass::fetch(cx, x.client, x.origin, &dest.upstream).await {
        Ok(fetched) => fetched,
        Err(e) => return e.outcome(),
    };
    let reusable = {
        let head = fetched.head();
        let fields = head.fields();
        let stale = invalidations(
            cx.req.method_raw(),
            head.status(),
            key,
            fields.first(HeaderId::Location),
            fields.first(HeaderId::ContentLocation),
        );
        for k in stale.iter() {
            cache.purge(k);
        }
        // "A cached POST response can be reused to satisfy a later GET or HEAD request" when it
        // has explicit freshness and a Content-Location that is its target URI (§9.3.3).
        let policy = cache.policy(cx.conn.listener);
        cx.req.method() == Method::Post
            && storable_post_response(&cx.req.fields(), head.status(), &fields, key, policy)
                .is_storable()
    };
    if reusable {
        if let Some(writer) = writer_for(cx.req, cache, key) {
            let storing = Storing {
                policy: cache.policy(cx.conn.listener),
                key,
                writer,
                request_time,
                fwd: Forward::Method,
                result: ResultCode::TcpMiss,
                judged_as_get: true,
            };
            return store_and_relay(cx, x.client, x.cache_status, &mut fetched, storing).await;
        }
    }
    pass::relay_passed(cx.state, x.client, &mut fetched).await
}
