//! Revalidation in the background (RFC 5861 §3, stale-while-revalidate): the client that found
//! the stale copy is served at once, and this task asks the origin on its own, without a client
//! connection, then freshens or replaces the stored variant through the store's refresh fill
//! (so concurrent requests collapse onto it instead of each revalidating).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use sepia_cache_policy::{is_storable_stored, select_for_update, FieldList, Fields, StoredMeta};
use sepia_http1::{BodyFraming, Limits, Method, ResponseDecoder, ResponseHead};
use sepia_store::{FillWriter, Object};

use super::{freshened, publish_response, republish, unix_now, HeadFields, Meta};
use crate::exchange::{obtain, Origins, ORIGIN_READ_ROOM};
use crate::io::{read_by_deadline, write_parts_within};
use crate::relay::{relay_body, BodyIn, BodyOut, Deadlines};
use crate::shared::Shared;
use sepia_http1::HeaderId;

/// Where the revalidation goes, owned so the task can outlive the request.
pub enum Target {
    Route(usize),
    Host(String, u16),
    /// An intercepted connection's original destination, and the spoofed source if any.
    Diverted(crate::intercept::Diverted),
}

/// Starts the revalidation of `obj` with the prepared conditional request `head`.
pub fn spawn(
    shared: Arc<Shared>,
    key: Vec<u8>,
    head: Bytes,
    target: Target,
    obj: Arc<Object<Meta>>,
    writer: FillWriter<Meta>,
) {
    tokio::spawn(async move {
        if let Err(why) = revalidate(&shared, &key, &head, &target, &obj, writer).await {
            tracing::debug!("background revalidation gave up: {why}");
        }
    });
}

async fn revalidate(
    shared: &Shared,
    key: &[u8],
    head: &[u8],
    target: &Target,
    obj: &Arc<Object<Meta>>,
    writer: FillWriter<Meta>,
) -> Result<(), &'static str> {
    let cache = shared.cache.as_ref().ok_or("caching is off")?;
    let t = &shared.config.timeouts;
    let origins = match target {
        Target::Route(i) => Origins::Route(&shared.routes[*i]),
        Target::Host(host, port) => Origins::Host { host, port: *port },
        Target::Diverted(d) => Origins::Diverted(d),
    };
    // Dropping `writer` on any early return aborts the refresh; the stale copy stays stored.
    let (mut origin, _) = obtain(shared, &origins)
        .await
        .map_err(|_| "origin unreachable")?;
    let request_time = unix_now();
    write_parts_within(&mut origin.stream, &[head], t.origin_first_byte)
        .await
        .map_err(|_| "sending the request failed")?;
    let mut obuf = BytesMut::with_capacity(ORIGIN_READ_ROOM);
    let mut resp = ResponseHead::default();
    let mut decoder = ResponseDecoder::new(Limits::default());
    let mut deadline = None;
    loop {
        match decoder.decode(&mut obuf, &mut resp) {
            Ok(true) if (100..200).contains(&resp.status) => continue,
            Ok(true) => break,
            Ok(false) => {}
            Err(_) => return Err("invalid response"),
        }
        let room = ORIGIN_READ_ROOM;
        let limit = t.origin_first_byte;
        match read_by_deadline(&mut origin.stream, &mut obuf, room, &mut deadline, limit).await {
            Ok(n) if n > 0 => {}
            _ => return Err("no response"),
        }
    }
    let entry = obj.meta();
    let fields = HeadFields(resp.headers());
    let framing = resp.body_framing(Method::Get);
    if resp.status == 304 {
        if select_for_update(&[&entry.meta], &fields) != [0] {
            return Err("the 304 selects no stored response");
        }
        let times = (request_time, unix_now());
        let (head, fresh) = freshened(obj, &fields, times, key, &cache.policy, shared.via());
        republish(writer, obj, head, fresh)?;
        if resp.keep_alive && framing == BodyFraming::Empty && obuf.is_empty() {
            shared.pool.checkin(origin);
        }
        return Ok(());
    }
    // A new response replaces the stale one when it may be stored under the same variant: the
    // request that started this carried no body, no no-store (or it would not have been served
    // stale), and the same Vary-selected fields, so the stored secondary key still applies.
    let same_vary =
        fields.first(HeaderId::Vary) == entry.layout.fields(obj.head()).first(HeaderId::Vary);
    let meta = StoredMeta::from_response(
        resp.status,
        &fields,
        request_time,
        unix_now(),
        key,
        &cache.policy,
    );
    // Judged from the metadata just built: the response's fields are not parsed again.
    let storable =
        is_storable_stored(b"GET", &FieldList::new(), &meta, &cache.policy).is_storable();
    if !storable || !same_vary || !meta.is_worth_storing() || framing == BodyFraming::UntilClose {
        writer.release();
        return Ok(());
    }
    let secondary = obj.secondary().clone();
    let mut body = publish_response(writer, meta, &resp, framing, shared.via(), secondary);
    if let Some(mut incoming) = BodyIn::new(framing) {
        let mut tee = |data: &[u8]| body.append(data);
        let limits = Deadlines {
            read: t.origin_first_byte,
            write: t.origin_first_byte,
        };
        let mut nowhere = tokio::io::sink();
        relay_body(
            &mut origin.stream,
            &mut obuf,
            &mut incoming,
            &mut nowhere,
            BodyOut::Raw,
            b"",
            limits,
            Some(&mut tee),
        )
        .await
        .map_err(|_| "the new body did not arrive whole")?;
    }
    body.finish()
        .map_err(|_| "the new body did not match its length")?;
    if resp.keep_alive && obuf.is_empty() {
        shared.pool.checkin(origin);
    }
    Ok(())
}
