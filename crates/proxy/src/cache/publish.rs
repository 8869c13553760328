//! Publishing responses into the store: a new response while it is relayed (its head now,
//! its body piece by piece), a stored one freshened by a 304 (RFC 9111 §4.3.4).

use std::io;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use sepia_cache_policy::{
    freshen_headers, Fields, Piece, PolicyConfig, PolicySource, StoredFieldFilter, StoredMeta,
};
use sepia_store::{
    Body, BodyLength as StoredLength, BodyWriter, FillWriter, FinishError, FinishOutcome, Object,
};

use super::entry::{Entry, Meta};
use crate::h1::stored_head;
use crate::model::{BodyLength, HeaderId, ResponseView};

/// Bodies up to this length, announced by Content-Length, are stored in the allocation of
/// their head: one allocation per small object instead of three (head, body, and the shared
/// header a `Bytes` made from a `Vec` allocates when it is first sliced), about 100 bytes
/// less per object and fewer fresh pages touched per miss. Larger ones are not reserved up
/// front: an origin that announces a large body and sends it slowly must not make Sepia hold
/// memory for all of it before it arrives.
const BODY_WITH_HEAD_MAX: u64 = 64 * 1024;

/// A response being stored: its body's bytes are copied into the store as they pass (see
/// [`publish_response`]).
pub struct StoringBody {
    writer: BodyWriter<Meta>,
    /// Room reserved after the head for a small announced body; empty otherwise.
    room: BytesMut,
}

impl StoringBody {
    /// Copies one piece of the body into the store: into the room after the head when it
    /// fits there, else into an allocation of its own.
    pub fn append(&mut self, data: &[u8]) {
        let chunk = if self.room.capacity() - self.room.len() < data.len() {
            Bytes::copy_from_slice(data)
        } else {
            self.room.extend_from_slice(data);
            self.room.split().freeze()
        };
        self.writer.append(chunk);
    }

    /// The stored head as an object with an empty body, for answering a client from it.
    pub fn object(&self) -> Arc<Object<Meta>> {
        self.writer.object()
    }

    /// The body is complete: commit it (the store checks an announced length).
    pub fn finish(self) -> Result<FinishOutcome<Meta>, FinishError> {
        self.writer.finish()
    }

    /// The body will not be complete: nothing is stored.
    pub fn abort(self) {
        self.writer.abort();
    }
}

/// What is stored beside a response's head and body.
pub struct Publishing<'a> {
    pub meta: StoredMeta,
    /// The length of the body that will be appended.
    pub length: BodyLength,
    /// Sepia's Via value.
    pub via: Option<&'a [u8]>,
    /// The Vary-derived secondary key (RFC 9111 §4.1).
    pub secondary: Bytes,
    /// Which bytes of the representation the body is, for a piece (RFC 9111 §3.3).
    pub piece: Option<Piece>,
}

/// Publishes an origin response about to be stored through `writer`: its stored head and
/// entry, keeping the fields a shared cache stores (RFC 9111 §3.1), and the body length the
/// store should expect. The body follows through the returned [`StoringBody`]. A `206` is
/// stored as the incomplete `200` it stands for (§3.3), or as the complete `200` it became
/// when combined with a stored piece (§3.4): its `Content-Range` is written per answer.
pub fn publish_response(
    writer: FillWriter<Meta>,
    resp: &impl ResponseView,
    publishing: Publishing<'_>,
) -> StoringBody {
    let head = (resp.status(), resp.reason());
    publish(writer, head, &resp.fields(), publishing)
}

/// [`publish_response`] for a `206` kept as a piece, alone or combined with a stored one
/// (RFC 9111 §3.3–3.4), given as the fields it keeps: stored as the `200` it stands for,
/// complete or not.
pub fn publish_combined(
    writer: FillWriter<Meta>,
    fields: &impl Fields,
    publishing: Publishing<'_>,
) -> StoringBody {
    // The reason phrase of a 206 is never stored (see below).
    publish(writer, (206, b""), fields, publishing)
}

fn publish(
    writer: FillWriter<Meta>,
    (status, reason): (u16, &[u8]),
    fields: &impl Fields,
    publishing: Publishing<'_>,
) -> StoringBody {
    let Publishing {
        mut meta,
        length,
        via,
        secondary,
        piece,
    } = publishing;
    // A 206's Content-Range describes that message's content, not what is stored: each answer
    // from a piece writes its own.
    let partial = status == 206;
    let (status, reason) = if partial {
        (200, &b"OK"[..])
    } else {
        (status, reason)
    };
    meta.status = status;
    // The metadata parsed Cache-Control already, unless a targeted field governed.
    let cache_control = (meta.source == PolicySource::CacheControl).then_some(&meta.cache_control);
    let filter = StoredFieldFilter::knowing(fields, true, cache_control);
    let kept = filter.kept();
    let length = match length {
        BodyLength::Known(n) => StoredLength::Known(n),
        BodyLength::None => StoredLength::Known(0),
        BodyLength::Unknown => StoredLength::Unknown,
    };
    let room = match length {
        StoredLength::Known(n) if n <= BODY_WITH_HEAD_MAX => n as usize,
        StoredLength::Known(_) | StoredLength::Unknown => 0,
    };
    let (mut buf, layout) = if partial {
        let lines = || {
            kept.iter_with_ids()
                .filter(|&(id, _, _)| id != HeaderId::ContentRange)
        };
        stored_head::build_with_room(status, reason, lines, via, room)
    } else {
        stored_head::build_with_room(status, reason, || kept.iter_with_ids(), via, room)
    };
    let head = if room == 0 {
        std::mem::take(&mut buf).freeze()
    } else {
        buf.split().freeze()
    };
    let entry = Arc::new(Entry::new(meta, &head, layout).with_piece(piece));
    StoringBody {
        writer: writer.publish_head(head, entry, secondary, length),
        room: buf,
    }
}

/// A stored body's chunks, read back from its file on a blocking thread when it is kept in
/// one (a piece kept in a file can be megabytes).
pub async fn stored_body(obj: &Object<Meta>) -> io::Result<Vec<Bytes>> {
    match obj.body() {
        Body::Chunks(chunks) => Ok(chunks.to_vec()),
        Body::File(file) => {
            let file = Arc::clone(file);
            let read = tokio::task::spawn_blocking(move || file.read_all());
            Ok(vec![read.await.map_err(io::Error::other)??])
        }
    }
}

/// The stored head and entry of `obj` freshened by a 304 whose fields are `update` (RFC 9111
/// §4.3.4), its metadata rebuilt with the revalidation's request and response times.
pub fn freshened<U: Fields>(
    obj: &Object<Meta>,
    update: &U,
    (request_time, response_time): (u64, u64),
    key: &[u8],
    policy: &PolicyConfig,
    via: Option<&[u8]>,
) -> (Bytes, Meta) {
    let entry = obj.meta();
    let merged = freshen_headers(&entry.layout.fields(obj.head()), update);
    let meta = StoredMeta::from_response(
        entry.meta.status,
        &merged,
        request_time,
        response_time,
        key,
        policy,
    );
    let reason = entry.layout.reason(obj.head());
    let (head, layout) = stored_head::build(entry.meta.status, reason, || merged.lines(), via);
    let fresh = Arc::new(Entry::new(meta, &head, layout).with_piece(entry.piece));
    (head, fresh)
}

/// Completes a refresh fill after a 304 (RFC 9111 §4.3.4): the freshened `head` and `fresh`
/// metadata with the stored object's body, appended so that requests collapsed on the refresh
/// receive it too. A body kept in a file is read back for them (rare: a 304 for a large
/// object); if that fails the fill aborts.
pub fn republish(
    writer: FillWriter<Meta>,
    obj: &Object<Meta>,
    head: Bytes,
    fresh: Meta,
) -> Result<FinishOutcome<Meta>, &'static str> {
    let mut body = writer.publish_head(
        head,
        fresh,
        obj.secondary().clone(),
        StoredLength::Known(obj.body_len()),
    );
    let chunks = obj
        .body()
        .to_chunks()
        .map_err(|_| "reading the stored body back failed")?;
    for chunk in chunks.iter() {
        body.append(chunk.clone());
    }
    body.finish()
        .map_err(|_| "storing the freshened response failed")
}
