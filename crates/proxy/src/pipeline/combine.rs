//! Judging a `206` as a piece of its representation (RFC 9111 §3.3) and combining it with the
//! stored piece (§3.4): for the range requests of `pieces.rs` and the completions of
//! `completion.rs`.
//!
//! A `206` is kept when it carries exactly the one range its `Content-Range` announces, with
//! a complete length, under a strong validator, and is storable as the incomplete `200` it
//! stands for. It is combined with the stored piece when both carry the same strong validator
//! and their bytes overlap or touch; the combination's fields are the stored ones updated with
//! the new response's, as a `304` updates them (§3.4 refers to §3.2): a `206` answering
//! `If-Range` need not repeat the fields that describe the representation (RFC 9110
//! §15.3.7), so such a `206` is never kept on its own.

use bytes::Bytes;
use sepia_cache_policy::{
    freshen_headers, is_storable_piece, is_strong_validator, same_strong_validator, vary_key_of,
    FieldList, Fields, Piece, StoredFieldFilter, StoredMeta, VaryKey,
};
use sepia_store::{slice_chunks, Object};

use super::query::Query;
use crate::cache::{stored_body, unix_now, Meta};
use crate::model::{BodyLength, HeaderId, RequestView, ResponseView};
use crate::upstream::Fetched;

/// What a `206` is judged against.
pub(super) struct Judging<'a> {
    pub q: &'a Query<'a>,
    /// When the request was sent (RFC 9111 §4.2.3).
    pub request_time: u64,
    /// The stored piece of the same representation, if one was found.
    pub stored: Option<&'a Object<Meta>>,
    /// It may be kept without a stored piece to combine with: it did not answer `If-Range`.
    pub alone: bool,
}

/// A `206` judged worth keeping: what it is stored as.
pub(super) struct NewPiece {
    pub meta: StoredMeta,
    /// The stored fields: the stored piece's updated with the new ones, or the `206`'s own.
    pub fields: FieldList,
    pub secondary: Bytes,
    /// The bytes the `206` carries.
    pub received: Piece,
    /// The bytes stored: those received and those kept of the stored piece.
    pub piece: Piece,
    /// Bytes of the stored piece that come before the received ones, and after them.
    pub before: Vec<Bytes>,
    pub after: Vec<Bytes>,
}

/// Judges the `206` in `fetched`; with the stored bytes around it read when it is combined
/// (from a body file, on a blocking thread).
pub(super) async fn judge_piece(
    req: &impl RequestView,
    fetched: &Fetched<'_>,
    j: &Judging<'_>,
) -> Option<NewPiece> {
    let (mut new, around) = judge(req, fetched, j)?;
    if let (Some(stored), Some((before_end, after_start))) = (j.stored, around) {
        let chunks = stored_body(stored).await.ok()?;
        new.before = slice_chunks(&chunks, 0, before_end);
        new.after = slice_chunks(&chunks, after_start, stored.body_len());
    }
    Some(new)
}

/// The piece a `206` is kept as, and, when it is combined with the stored piece, where in the
/// stored bytes those before it end and those after it start.
fn judge(
    req: &impl RequestView,
    fetched: &Fetched<'_>,
    j: &Judging<'_>,
) -> Option<(NewPiece, Option<(u64, u64)>)> {
    if !fetched.end_is_certain() {
        return None;
    }
    let resp = fetched.head();
    let fields = resp.fields();
    let length = match fetched.body_length() {
        BodyLength::Known(n) => Some(n),
        BodyLength::None | BodyLength::Unknown => None,
    };
    let received = Piece::of_response(&fields, length)?;
    let combined = j.stored.and_then(|s| combinable(s, &fields, &received));
    let kept = match (combined, j.stored) {
        (Some(_), Some(stored)) => {
            let updated = freshen_headers(&stored.meta().layout.fields(stored.head()), &fields);
            StoredFieldFilter::new(&updated, true).stored_fields()
        }
        _ if j.alone => StoredFieldFilter::new(&fields, true).stored_fields(),
        _ => return None,
    };
    let (q, now) = (j.q, unix_now());
    let meta = StoredMeta::from_response(206, &kept, j.request_time, now, q.key, q.policy);
    let request_fields = req.fields();
    let storable = is_storable_piece(b"GET", &request_fields, &meta, q.policy);
    let mut secondary = Vec::new();
    let vary = vary_key_of(&meta.vary, &request_fields, &mut secondary);
    let other_variant =
        combined.is_some() && j.stored.is_some_and(|s| s.secondary()[..] != secondary[..]);
    if !storable.is_storable()
        || vary == VaryKey::Never
        || other_variant
        || !is_strong_validator(meta.etag.as_deref())
        || !meta.is_worth_storing()
    {
        return None;
    }
    let (piece, around) = match combined {
        Some((old, union)) => (union, Some(old.around(&received))),
        None => (received, None),
    };
    let new = NewPiece {
        meta,
        fields: kept,
        secondary: Bytes::from(secondary),
        received,
        piece,
        before: Vec::new(),
        after: Vec::new(),
    };
    Some((new, around))
}

/// The stored piece and the combination, when the received bytes may be combined with it:
/// the same strong validator (§3.4), and no gap between them.
fn combinable(
    stored: &Object<Meta>,
    fields: &impl Fields,
    received: &Piece,
) -> Option<(Piece, Piece)> {
    let entry = stored.meta();
    let old = entry.piece?;
    let etag = fields.first(HeaderId::ETag);
    if !same_strong_validator(entry.meta.etag.as_deref(), etag) {
        return None;
    }
    Some((old, received.combined(&old)?))
}
