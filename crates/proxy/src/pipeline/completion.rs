//! Completing a stored piece (RFC 9111 §3.4): a full `GET` that misses, for a representation
//! of which the cache holds the first or the last bytes under a strong validator, asks the
//! origin only for the missing range, `If-Range` that validator (RFC 9110 §13.1.5). A `206`
//! of exactly that range, with the same strong validator, is combined with the stored bytes
//! (its fields updating the stored ones): the client gets the complete `200`, which is stored
//! whole. A `200` (the representation changed) is relayed and stored as any miss's, and the
//! piece goes. Anything else is dropped and the whole response fetched again: the client asked
//! for all of it.

use std::sync::Arc;

use sepia_cache_policy::{is_strong_validator, CacheStatus, Fields, Forward, Piece};
use sepia_observe::ResultCode;
use sepia_store::{FillWriter, Object};

use super::combine::{judge_piece, Judging, NewPiece};
use super::context::{Ctx, Exchange};
use super::fill::{store_and_relay, Storing};
use super::pass;
use super::query::{selecting, Query};
use super::responder::{HitPlan, Responder, StoredAnswer};
use crate::cache::{
    piece_key, publish_combined, unix_now, with_piece_key, Cache, Meta, Publishing, StoringBody,
    CACHE_NAME,
};
use crate::model::{BodyLength, BodyPiece, HeaderId, Outcome, RequestView, ResponseView};
use crate::upstream::{Conditionals, Fetched, RangeAsk};

/// A stored piece that one range would complete.
pub(super) struct Completable {
    /// The key it is stored under.
    key: Vec<u8>,
    obj: Arc<Object<Meta>>,
    /// The range that completes it.
    missing: Piece,
}

/// The stored piece of the requested representation that one range request would complete,
/// if there is one: it needs a strong validator to ask `If-Range` with, and the request must
/// not be one whose answer could not be kept, or that the origin could refuse on its own
/// conditions (`If-Match`, `If-Unmodified-Since`): then the range request would be wasted.
pub(super) fn completable(
    cache: &Cache,
    req: &impl RequestView,
    q: &Query<'_>,
) -> Option<Completable> {
    if !cache.may_hold_pieces() {
        return None;
    }
    let fields = req.fields();
    let refused = [
        HeaderId::Authorization,
        HeaderId::IfMatch,
        HeaderId::IfUnmodifiedSince,
    ];
    if q.rcc.no_store() || refused.iter().any(|&id| fields.contains(id)) {
        return None;
    }
    let lookup = |key: &[u8]| selecting(req, |select| cache.store.lookup_no_fill(key, select));
    let obj = with_piece_key(q.key, lookup)?;
    if cache.bans.condemns(q.key, &obj) {
        return None;
    }
    let entry = obj.meta();
    let piece = entry.piece?;
    let (first, last) = piece.missing()?;
    if !is_strong_validator(entry.meta.etag.as_deref()) {
        return None;
    }
    let mut key = Vec::new();
    piece_key(q.key, &mut key);
    let missing = Piece {
        first,
        last,
        complete: piece.complete,
    };
    Some(Completable { key, obj, missing })
}

/// Asks the origin for the missing range of `c` and answers the full `GET` with the completed
/// response. Gives the writer back when the answer was not that range (the caller then fetches
/// the whole response).
pub(super) async fn complete<C: Responder>(
    x: &mut Exchange<'_, C>,
    cache: &Cache,
    q: &Query<'_>,
    writer: FillWriter<Meta>,
    c: Completable,
) -> Result<Outcome, FillWriter<Meta>> {
    let etag = c.obj.meta().meta.etag.clone().unwrap_or_default();
    let range = format!("bytes={}-{}", c.missing.first, c.missing.last);
    let cond = Conditionals {
        range: Some(RangeAsk {
            range: range.as_bytes(),
            if_range: &etag,
        }),
        ..Conditionals::STRIP
    };
    let request_time = unix_now();
    let cx = x.cx;
    let mut fetched = match pass::fetch_with(cx, x.client, x.origin, &q.dest.upstream, &cond).await
    {
        Ok(fetched) => fetched,
        Err(e) => {
            writer.abort();
            return Ok(e.outcome());
        }
    };
    if fetched.head().status() == 200 {
        // A new representation: the piece of the old one goes.
        cache.store.purge(&c.key);
        let storing = Storing::miss(q, writer, request_time, Forward::Partial);
        return Ok(store_and_relay(cx, x.client, x.cache_status, &mut fetched, storing).await);
    }
    let judging = Judging {
        q,
        request_time,
        stored: Some(&c.obj),
        alone: false,
    };
    let new = match fetched.head().status() {
        206 => judge_piece(cx.req, &fetched, &judging).await,
        _ => None,
    };
    let Some(new) = new.filter(|n| n.received == c.missing && n.piece.is_complete()) else {
        // Dropped unread: the connection closes.
        return Err(writer);
    };
    let publishing = Publishing {
        meta: new.meta.clone(),
        length: BodyLength::Known(new.piece.len()),
        via: cx.state.via(),
        secondary: new.secondary.clone(),
        piece: None,
    };
    let body = publish_combined(writer, &new.fields, publishing);
    let done = Completed { body, new, cache };
    Ok(answer(cx, x.client, x.cache_status, fetched, done, &c).await)
}

/// The completed response being stored, and the stored bytes around the new ones.
struct Completed<'a> {
    body: StoringBody,
    new: NewPiece,
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
    c: &Completable,
) -> Outcome {
    let Completed {
        mut body,
        new,
        cache,
    } = done;
    let obj = body.object();
    let entry = obj.meta();
    cache_status.clear();
    let status = CacheStatus::forward(Forward::Partial).with_fwd_status(206);
    status.with_stored().write(CACHE_NAME, cache_status);
    let answer = StoredAnswer {
        plan: HitPlan::Full,
        head_only: false,
        age: entry.meta.age_field_value(unix_now()),
        cache_status,
        representation_len: new.piece.len(),
        body_offset: 0,
    };
    let outcome = Outcome::answered(200, ResultCode::TcpMiss)
        .answered_by(fetched.origin_ip())
        .with_content_type(cx.state.for_log(|| entry.content_type.clone()));
    let length = BodyLength::Known(new.piece.len());
    let mut client_there = client.start_fill(&obj, length, &answer).await.is_ok();
    client_there = send_stored(client, &mut body, &new.before, client_there).await;
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
    client_there = send_stored(client, &mut body, &new.after, client_there).await;
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

/// Stores bytes of the stored piece in the new response and sends them to the client if it is
/// still there. Returns whether it still is.
async fn send_stored<C: Responder>(
    client: &mut C,
    body: &mut StoringBody,
    chunks: &[bytes::Bytes],
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
