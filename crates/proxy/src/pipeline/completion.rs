//! Completing a stored piece (RFC 9111 §3.4): a full `GET` that misses, for a representation
//! of which the cache holds the first or the last bytes under a strong validator, asks the
//! origin only for the missing range, `If-Range` that validator (RFC 9110 §13.1.5). A `206`
//! of exactly that range, with the same strong validator, is combined with the stored bytes:
//! the client gets the complete `200`, which is stored whole. A `200` (the representation
//! changed) is relayed and stored as any miss's. Anything else is dropped and the whole
//! response fetched again: the client asked for all of it.

use std::sync::Arc;

use bytes::Bytes;
use sepia_cache_policy::{
    is_storable_piece, is_strong_validator, same_strong_validator, vary_key_of, CacheStatus,
    Fields, Forward, Piece, StoredMeta, VaryKey,
};
use sepia_observe::ResultCode;
use sepia_store::{FillWriter, Object};

use super::context::{Ctx, Exchange};
use super::fill::{store_and_relay, Storing};
use super::pass;
use super::query::{selecting, Query};
use super::responder::{HitPlan, Responder, StoredAnswer};
use crate::cache::{
    piece_key, publish_response, unix_now, with_piece_key, Cache, Meta, Publishing, StoringBody,
    CACHE_NAME,
};
use crate::model::{BodyLength, BodyPiece, HeaderId, Outcome, RequestView, ResponseView};
use crate::upstream::{Conditionals, Fetched, RangeAsk};

/// A stored piece that one range would complete, with its bytes.
pub(super) struct Completable {
    /// The key it is stored under.
    key: Vec<u8>,
    obj: Arc<Object<Meta>>,
    piece: Piece,
    /// The range that completes it: `first`, `last`.
    missing: (u64, u64),
    chunks: Vec<Bytes>,
}

/// The stored piece of the requested representation that one range request would complete,
/// if there is one: it needs a strong validator to ask `If-Range` with.
pub(super) fn completable(
    cache: &Cache,
    req: &impl RequestView,
    q: &Query<'_>,
) -> Option<Completable> {
    let lookup = |key: &[u8]| selecting(req, |select| cache.store.lookup_no_fill(key, select));
    let obj = with_piece_key(q.key, lookup)?;
    let entry = obj.meta();
    let piece = entry.piece?;
    let missing = piece.missing()?;
    if !is_strong_validator(entry.meta.etag.as_deref()) {
        return None;
    }
    // Read now, so that a body file that cannot be read back costs no origin request.
    let chunks = obj.body().to_chunks().ok()?.into_owned();
    let mut key = Vec::new();
    piece_key(q.key, &mut key);
    Some(Completable {
        key,
        obj,
        piece,
        missing,
        chunks,
    })
}

/// Asks the origin for the missing range of `c` and answers the full `GET` with the completed
/// response; `None` when the answer was not that range (the caller fetches the whole).
pub(super) async fn complete<C: Responder>(
    x: &mut Exchange<'_, C>,
    cache: &Cache,
    q: &Query<'_>,
    writer: FillWriter<Meta>,
    c: Completable,
) -> Result<Outcome, FillWriter<Meta>> {
    let etag = c.obj.meta().meta.etag.clone().unwrap_or_default();
    let range = format!("bytes={}-{}", c.missing.0, c.missing.1);
    let cond = Conditionals {
        range: Some(RangeAsk {
            range: range.as_bytes(),
            if_range: &etag,
        }),
        ..Conditionals::STRIP
    };
    let request_time = unix_now();
    let cx = x.cx;
    let fetched = match pass::fetch_with(cx, x.client, x.origin, &q.dest.upstream, &cond).await {
        Ok(fetched) => fetched,
        Err(e) => {
            writer.abort();
            return Ok(e.outcome());
        }
    };
    if fetched.head().status() == 200 {
        let storing = Storing {
            policy: q.policy,
            key: q.key,
            writer,
            request_time,
            fwd: Forward::Partial,
            result: ResultCode::TcpMiss,
            judged_as_get: false,
        };
        return Ok(store_and_relay(cx, x.client, x.cache_status, fetched, storing).await);
    }
    let Some((meta, secondary)) = judge(cx.req, &fetched, q, &c, request_time) else {
        // Dropped unread: the connection closes.
        return Err(writer);
    };
    let publishing = Publishing {
        meta,
        length: BodyLength::Known(c.piece.complete),
        via: cx.state.via(),
        secondary,
        piece: None,
    };
    let body = publish_response(writer, fetched.head(), publishing);
    let done = Completed { body, c, cache };
    Ok(answer(cx, x.client, x.cache_status, fetched, done).await)
}

/// The origin's answer completes the piece: a `206` of exactly the missing range, under the
/// same strong validator, storable, of the same variant. Returns its metadata and secondary
/// key.
fn judge(
    req: &impl RequestView,
    fetched: &Fetched<'_>,
    q: &Query<'_>,
    c: &Completable,
    request_time: u64,
) -> Option<(StoredMeta, Bytes)> {
    let resp = fetched.head();
    let fields = resp.fields();
    let length = match fetched.body_length() {
        BodyLength::Known(n) => Some(n),
        BodyLength::None | BodyLength::Unknown => None,
    };
    let wanted = Piece {
        first: c.missing.0,
        last: c.missing.1,
        complete: c.piece.complete,
    };
    let stored = &c.obj.meta().meta;
    let exact = resp.status() == 206 && Piece::of_response(&fields, length) == Some(wanted);
    if !exact || !same_strong_validator(stored.etag.as_deref(), fields.first(HeaderId::ETag)) {
        return None;
    }
    let meta = StoredMeta::from_response(206, &fields, request_time, unix_now(), q.key, q.policy);
    let request_fields = req.fields();
    let storable = is_storable_piece(b"GET", &request_fields, &meta, q.policy);
    let mut secondary = Vec::new();
    let vary = vary_key_of(&meta.vary, &request_fields, &mut secondary);
    let same_variant = vary != VaryKey::Never && c.obj.secondary()[..] == secondary[..];
    let keep = storable.is_storable() && same_variant && meta.is_worth_storing();
    (keep && fetched.end_is_certain()).then(|| (meta, Bytes::from(secondary)))
}

/// The completed response being stored, and where its stored bytes come from.
struct Completed<'a> {
    body: StoringBody,
    c: Completable,
    cache: &'a Cache,
}

/// Sends the completed response as a `200`: the stored head just published, then the stored
/// bytes and the origin's in order, each stored on the way. Stored whole only if every byte
/// arrived; the client's connection closes if it did not (never a clean-looking end).
async fn answer<C: Responder>(
    cx: Ctx<'_, C::Request>,
    client: &mut C,
    cache_status: &mut Vec<u8>,
    mut fetched: Fetched<'_>,
    done: Completed<'_>,
) -> Outcome {
    let Completed { mut body, c, cache } = done;
    let obj = body.object();
    let entry = obj.meta();
    cache_status.clear();
    let status = CacheStatus::forward(Forward::Partial).with_fwd_status(206);
    status.with_stored().write(CACHE_NAME, cache_status);
    let now = unix_now();
    let answer = StoredAnswer {
        plan: HitPlan::Full,
        head_only: false,
        age: entry.meta.age_field_value(now),
        cache_status,
    };
    let outcome = Outcome::answered(200, ResultCode::TcpMiss)
        .answered_by(fetched.origin_ip())
        .with_content_type(cx.state.for_log(|| entry.content_type.clone()));
    let length = BodyLength::Known(c.piece.complete);
    let mut client_there = client.start_fill(&obj, length, &answer).await.is_ok();
    let stored_first = c.piece.first == 0;
    if stored_first {
        client_there &= send_stored(client, &mut body, &c.chunks, client_there).await;
    }
    let complete = loop {
        match fetched.next_body().await {
            Ok(BodyPiece::Data(data)) => {
                body.append(&data);
                client_there = client_there && client.send_data(&data).await.is_ok();
            }
            Ok(BodyPiece::End(_)) => break true,
            Err(e) => {
                tracing::debug!("completing a piece aborted: {e}");
                break false;
            }
        }
    };
    fetched.release();
    if !complete {
        body.abort();
        return outcome.logged_as(ResultCode::TcpMissAborted).closing();
    }
    if !stored_first {
        client_there &= send_stored(client, &mut body, &c.chunks, client_there).await;
    }
    match body.finish() {
        // The piece it was made from goes.
        Ok(_) => _ = cache.store.purge(&c.key),
        Err(e) => tracing::debug!("completed response not stored: {e}"),
    }
    match client_there && client.send_end(&Default::default()).await.is_ok() {
        true => outcome,
        false => outcome.logged_as(ResultCode::TcpMissAborted).closing(),
    }
}

/// Stores the stored piece's bytes in the new response and sends them to the client if it is
/// still there. Returns whether it still is.
async fn send_stored<C: Responder>(
    client: &mut C,
    body: &mut StoringBody,
    chunks: &[Bytes],
    mut client_there: bool,
) -> bool {
    for chunk in chunks {
        body.append(chunk);
        if client_there {
            client_there = client.send_data(chunk).await.is_ok();
        }
    }
    client_there
}
