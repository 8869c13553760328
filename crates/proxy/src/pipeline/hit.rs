//! Answering from the cache: a complete stored object (a hit, including 304 to a client's
//! conditional and 206/416 for a Range), or an object still being filled (a collapsed
//! request). The pipeline decides the answer (RFC 9110 §13.2.2 for conditionals, §14 for
//! ranges, RFC 9111 §5.1 for Age, RFC 9211 for Cache-Status); the front end writes it.

use std::net::IpAddr;
use std::sync::Arc;

use sepia_cache_policy::{
    evaluate_conditionals, range_for_stored, CacheStatus, ConditionalOutcome, RangeOutcome,
    StoredMeta,
};
use sepia_observe::ResultCode;
use sepia_store::{BodyLength as StoredLength, FillError, FillHead, FillReader, Object};

use super::context::Exchange;
use super::responder::{HitPlan, Responder, StoredAnswer};
use crate::cache::{Meta, CACHE_NAME};
use crate::model::{BodyLength, Gone, Method, Outcome, RequestView, Trailers};

/// How a stored object came to answer: when (the policy's clock), logged as what, with which
/// Cache-Status, and the origin that confirmed it, if one did.
pub(super) struct Served<'a> {
    pub now: u64,
    pub result: ResultCode,
    pub cache_status: CacheStatus<'a>,
    pub origin: Option<IpAddr>,
}

impl<'a> Served<'a> {
    /// A plain hit.
    pub fn hit(now: u64, cache_status: CacheStatus<'a>) -> Served<'a> {
        Served {
            now,
            result: ResultCode::TcpMemHit,
            cache_status,
            origin: None,
        }
    }

    /// Logged as `result` (a hit from disk is `TCP_HIT`, from memory `TCP_MEM_HIT`).
    pub fn logged_as(self, result: ResultCode) -> Served<'a> {
        Served { result, ..self }
    }
}

/// Serves a complete stored object.
pub(super) async fn serve<C: Responder>(
    x: &mut Exchange<'_, C>,
    obj: &Arc<Object<Meta>>,
    served: Served<'_>,
) -> Outcome {
    // Written into a buffer the connection keeps, so a hit allocates nothing for it.
    x.cache_status.clear();
    served.cache_status.write(CACHE_NAME, x.cache_status);
    let entry = obj.meta();
    let req = x.cx.req;
    // A stored piece is planned against the whole representation's length (RFC 9111 §3.3).
    let (body_offset, length) = entry
        .piece
        .map_or((0, obj.body_len()), |p| (p.first, p.complete));
    let plan = plan(req, &entry.meta, length);
    if entry.piece.is_some() && plan == HitPlan::Full {
        // Never a piece for the whole: its callers only serve ranges it holds (pieces.rs).
        tracing::error!("a stored piece was about to answer a request for the whole");
        return Outcome::local(500, "internal error: partial content for a full request");
    }
    let answer = StoredAnswer {
        plan,
        head_only: req.method() == Method::Head,
        age: entry.meta.age_field_value(served.now),
        cache_status: x.cache_status,
        representation_len: length,
        body_offset,
    };
    let mut outcome = Outcome::answered(plan.status(entry.meta.status), served.result)
        .with_content_type(x.cx.state.for_log(|| entry.content_type.clone()));
    if let Some(origin) = served.origin {
        outcome = outcome.answered_by(origin);
    }
    match x.client.send_stored(obj, &answer).await {
        Ok(()) => outcome,
        Err(Gone) => outcome.closing(),
    }
}

/// What a stored response answers to this request: a conditional is evaluated first (RFC 9110
/// §13.2.2), then a range (§14.2).
pub(super) fn plan(req: &impl RequestView, meta: &StoredMeta, len: u64) -> HitPlan {
    let fields = req.fields();
    match evaluate_conditionals(req.method_raw(), &fields, meta) {
        ConditionalOutcome::NotModified => HitPlan::NotModified,
        ConditionalOutcome::PreconditionFailed => HitPlan::PreconditionFailed,
        ConditionalOutcome::Proceed => match range_for_stored(req.method_raw(), &fields, meta, len)
        {
            RangeOutcome::Full => HitPlan::Full,
            RangeOutcome::Partial { start, end } => HitPlan::Partial { start, end },
            RangeOutcome::Unsatisfiable => HitPlan::Unsatisfiable,
        },
    }
}

/// Streams an object that is still being filled to a request that collapsed onto the fill.
/// If the fill aborts, the client's response is aborted too: never a clean-looking end.
pub(super) async fn serve_fill<C: Responder>(
    x: &mut Exchange<'_, C>,
    head: FillHead<Meta>,
    mut reader: FillReader<Meta>,
    now: u64,
    cache_status: CacheStatus<'_>,
) -> Outcome {
    x.cache_status.clear();
    cache_status.write(CACHE_NAME, x.cache_status);
    let obj = &head.object;
    let entry = obj.meta();
    let answer = StoredAnswer {
        plan: HitPlan::Full,
        head_only: false,
        age: entry.meta.age_field_value(now),
        cache_status: x.cache_status,
        representation_len: obj.body_len(),
        body_offset: 0,
    };
    let length = match head.length {
        StoredLength::Known(n) => BodyLength::Known(n),
        StoredLength::Unknown => BodyLength::Unknown,
    };
    // Squid's tag for a client served from another's fill (collapsed forwarding).
    let outcome = Outcome::answered(entry.meta.status, ResultCode::TcpCfHit)
        .with_content_type(x.cx.state.for_log(|| entry.content_type.clone()));
    if x.client.start_fill(obj, length, &answer).await.is_err() {
        return outcome.closing();
    }
    let outcome = outcome.first_byte_now(x.cx.state.metrics);
    let wait = x.cx.state.config.timeouts.origin_first_byte;
    loop {
        match tokio::time::timeout(wait, reader.next_chunk()).await {
            Ok(Ok(Some(chunk))) => {
                if x.client.send_data(&chunk).await.is_err() {
                    return outcome.logged_as(ResultCode::TcpMissAborted).closing();
                }
            }
            Ok(Ok(None)) => {
                return match x.client.send_end(&Trailers::default()).await {
                    Ok(()) => outcome,
                    Err(Gone) => outcome.closing(),
                };
            }
            Ok(Err(FillError::Aborted | FillError::Released)) | Err(_) => {
                return outcome.logged_as(ResultCode::TcpMissAborted).closing();
            }
        }
    }
}
