//! Revalidation in the background (RFC 5861 §3, stale-while-revalidate): the client that found
//! the stale copy is served at once, and this task asks the origin on its own, without a client
//! connection, then freshens or replaces the stored variant through the store's refresh fill
//! (so concurrent requests collapse onto it instead of each revalidating). It goes through the
//! same origin client as every request, so interim responses, errors and the reuse of the
//! origin connection are handled as they are in the foreground.

use sepia_observe::metrics::{self, Revalidation};
use std::sync::Arc;

use bytes::Bytes;
use sepia_cache_policy::{
    is_storable_stored, select_for_update, validators, FieldList, Fields, PolicyConfig, StoredMeta,
};
use sepia_store::{FillWriter, Object};

use super::context::Ctx;
use super::query::Query;
use crate::cache::{freshened, publish_response, republish, unix_now, Meta, Publishing};
use crate::model::{
    BodyError, BodyPiece, Downstream, Gone, HeaderId, RequestView, ResponseView, Trailers,
};
use crate::state::State;
use crate::upstream::{self, Conditionals, OriginRequest, OwnedOrigins};

/// Prepares the conditional request for `obj` now, while the request is at hand, and
/// revalidates in a task of its own.
pub(super) fn start<R: RequestView>(
    cx: Ctx<'_, R>,
    q: &Query<'_>,
    obj: &Arc<Object<Meta>>,
    writer: FillWriter<Meta>,
) {
    let ups = &cx.state.upstreams;
    let up = &q.dest.upstream;
    let Some(origins) = ups.to_owned(&up.origins) else {
        return;
    };
    // A route's Host when the route sends the origin's: its first origin's authority.
    let host = match (&origins, up.host) {
        (_, Some(host)) => Bytes::copy_from_slice(host),
        (OwnedOrigins::Route(i), None) => ups.routes[*i]
            .origins
            .first()
            .map(|o| o.authority.clone())
            .unwrap_or_default(),
        (_, None) => Bytes::new(),
    };
    let v = validators(&obj.meta().meta);
    let cond = Conditionals::validating(v.if_none_match, v.if_modified_since);
    let request = OriginRequest {
        req: cx.req,
        upstream: up,
        cond: &cond,
        client: &cx.conn.client,
        client_scheme: cx.conn.scheme,
    };
    let head = upstream::prepare(ups, request, &host);
    let job = Job {
        state: cx.state.clone(),
        key: q.key.to_vec(),
        head,
        origins,
        obj: obj.clone(),
        listener: cx.conn.listener,
    };
    tokio::spawn(async move {
        // Dropping `writer` on any early return aborts the refresh; the stale copy stays.
        match job.revalidate(writer).await {
            Ok(how) => metrics::revalidation(how),
            Err(why) => {
                metrics::revalidation(Revalidation::Failed);
                tracing::debug!("background revalidation gave up: {why}");
            }
        }
    });
}

/// A background revalidation, owning what it needs.
struct Job {
    state: Arc<State>,
    key: Vec<u8>,
    head: Bytes,
    origins: OwnedOrigins,
    obj: Arc<Object<Meta>>,
    /// The listener whose cache policy the revalidation follows.
    listener: usize,
}

impl Job {
    /// What the origin's answer does to the stored variant.
    fn judge(
        &self,
        policy: &PolicyConfig,
        resp: &impl ResponseView,
        request_time: u64,
    ) -> Result<Verdict, &'static str> {
        let (obj, fields) = (&self.obj, resp.fields());
        let entry = obj.meta();
        if resp.status() == 304 {
            if select_for_update(&[&entry.meta], &fields) != [0] {
                return Err("the 304 selects no stored response");
            }
            let times = (request_time, unix_now());
            let via = self.state.via();
            let (head, fresh) = freshened(obj, &fields, times, &self.key, policy, via);
            return Ok(Verdict::Freshened(head, fresh));
        }
        // A new response replaces the stale one only under the same variant: the request that
        // started this carried no body, no no-store (or it would not have been served stale),
        // and the same Vary-selected fields, so the stored secondary key still applies.
        let stored = entry.layout.fields(obj.head());
        if fields.first(HeaderId::Vary) != stored.first(HeaderId::Vary) {
            return Ok(Verdict::OtherVariant);
        }
        Ok(Verdict::Replace(Box::new(StoredMeta::from_response(
            resp.status(),
            &fields,
            request_time,
            unix_now(),
            &self.key,
            policy,
        ))))
    }

    async fn revalidate(self, writer: FillWriter<Meta>) -> Result<Revalidation, &'static str> {
        let state = &self.state;
        let cache = state.cache.as_ref().ok_or("caching is off")?;
        let ups = &state.upstreams;
        let origins = ups.origins(&self.origins);
        let request_time = unix_now();
        let mut scratch = upstream::Scratch::default();
        let mut nobody = NoClient;
        let mut fetched =
            upstream::fetch_prepared(ups, &origins, &self.head, &mut nobody, &mut scratch)
                .await
                .map_err(|_| "the origin did not answer")?;
        let obj = &self.obj;
        let policy = cache.policy(self.listener);
        let verdict = self.judge(policy, fetched.head(), request_time)?;
        let meta = match verdict {
            Verdict::Freshened(head, fresh) => {
                republish(writer, obj, head, fresh)?;
                // A 304 has no body: the connection goes back to the pool.
                fetched.release();
                return Ok(Revalidation::NotModified);
            }
            Verdict::OtherVariant => {
                writer.release();
                fetched.release();
                return Ok(Revalidation::Modified);
            }
            Verdict::Replace(meta) => *meta,
        };
        // Judged from the metadata just built: the response's fields are not parsed again.
        let storable = is_storable_stored(b"GET", &FieldList::new(), &meta, policy).is_storable();
        if !storable || !meta.is_worth_storing() || !fetched.end_is_certain() {
            writer.release();
            fetched.release();
            return Ok(Revalidation::Modified);
        }
        let publishing = Publishing {
            meta,
            length: fetched.body_length(),
            via: state.via(),
            secondary: obj.secondary().clone(),
            piece: None,
        };
        let mut body = publish_response(writer, fetched.head(), publishing);
        loop {
            match fetched.next_body().await {
                Ok(BodyPiece::Data(data)) => body.append(&data),
                Ok(BodyPiece::End(_)) => break,
                Err(_) => return Err("the new body did not arrive whole"),
            }
        }
        fetched.release();
        body.finish()
            .map_err(|_| "the new body did not match its length")?;
        Ok(Revalidation::Modified)
    }
}

/// What a revalidation's answer does to the stored variant.
enum Verdict {
    /// A 304 freshened it: the new head and entry (RFC 9111 §4.3.4).
    Freshened(Bytes, Meta),
    /// The response varies differently: it is not stored in this variant's place.
    OtherVariant,
    /// A new response, with its metadata, may replace it.
    Replace(Box<StoredMeta>),
}

/// The client side of a background revalidation: there is none. The request has no content,
/// interim responses go nowhere, and nobody can go away.
struct NoClient;

impl Downstream for NoClient {
    fn awaits_continue(&self) -> bool {
        false
    }

    async fn body_next(&mut self) -> Result<BodyPiece, BodyError> {
        Ok(BodyPiece::End(Trailers::default()))
    }

    async fn interim(&mut self, _head: &impl ResponseView) -> Result<(), Gone> {
        Ok(())
    }

    async fn gone(&mut self) {
        std::future::pending::<()>().await;
    }
}
