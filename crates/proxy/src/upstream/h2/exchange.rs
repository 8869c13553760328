//! One request sent to an origin on a stream of a shared HTTP/2 connection (RFC 9113 §8.1)
//! and its response read back.
//!
//! Steps: translate the head built as for HTTP/1.1 (`h1::for_h2`) → open the stream, the head ending it
//! when there is no content → send the content pulled from the client within the stream's
//! flow-control window (§6.9) → await the response head while watching for the client going
//! away → hand the head and the stream's body to the pipeline. A request the origin refused
//! (REFUSED_STREAM) or left unprocessed when going away (GOAWAY) is sent once more on a new
//! connection when no content was consumed (§8.7).

use std::future::poll_fn;
use std::io;
use std::time::Duration;

use bytes::Bytes;
use h2::{Reason, RecvStream, SendStream};
use http::Response;

use super::body::H2Body;
use super::conns::{H2Conn, H2Stream, Reached};
use crate::model::{BodyError, BodyLength, BodyPiece, Downstream};
use crate::upstream::fetch_error::FetchError;
use crate::upstream::h1::exchange::{Fetched, Scratch, Sending};
use crate::upstream::h1::for_h2;
use crate::upstream::pool::OriginKey;
use crate::upstream::upstreams::Upstreams;

/// Why an attempt failed, as far as sending the request again is concerned.
enum Failure {
    /// No stream was opened: the connection had ended. Nothing was consumed.
    NotSent,
    /// The origin did not process the request (RFC 9113 §8.7).
    Unprocessed,
    Fatal(FetchError),
}

/// Sends the head in `scratch.head` (HTTP/1.1-shaped) on `stream`, and the content pulled
/// from `client`, and reads the final response head.
pub async fn fetch<'s>(
    ups: &'s Upstreams,
    mut stream: H2Stream,
    sending: Sending,
    client: &mut impl Downstream,
    scratch: &'s mut Scratch,
) -> Result<Fetched<'s>, FetchError> {
    let mut retried = false;
    loop {
        let failure = match attempt(ups, &stream.conn, &scratch.head, sending, client).await {
            Ok(response) => return fetched(ups, stream, sending, response, scratch),
            Err(f) => f,
        };
        let again = match failure {
            Failure::NotSent => !retried,
            Failure::Unprocessed => !retried && sending.body == BodyLength::None,
            Failure::Fatal(e) => return Err(e),
        };
        if !again {
            return Err(FetchError::OriginClosed);
        }
        retried = true;
        stream = reopen(ups, &stream.conn.key).await?;
    }
}

/// One try: the request sent, the final response head received.
async fn attempt(
    ups: &Upstreams,
    conn: &H2Conn,
    head: &[u8],
    sending: Sending,
    client: &mut impl Downstream,
) -> Result<Response<RecvStream>, Failure> {
    let limit = ups.config.timeouts.origin_first_byte;
    let scheme = if conn.key.server_name.is_some() {
        "https"
    } else {
        "http"
    };
    let request =
        for_h2::request(head, scheme).map_err(|_| Failure::Fatal(FetchError::Untranslatable))?;
    let mut send = match tokio::time::timeout(limit, conn.send.clone().ready()).await {
        Ok(Ok(send)) => send,
        Ok(Err(_)) => {
            conn.retire();
            return Err(Failure::NotSent);
        }
        Err(_) => return Err(Failure::Fatal(FetchError::TimedOut)),
    };
    let no_content = sending.body == BodyLength::None;
    let (response, mut content) = send
        .send_request(request, no_content)
        .map_err(|e| classify(conn, sending, &e))?;
    if !no_content {
        send_content(&mut content, client, limit)
            .await
            .map_err(Failure::Fatal)?;
    }
    let waited = tokio::select! {
        r = tokio::time::timeout(limit, response) => r,
        () = client.gone() => return Err(Failure::Fatal(FetchError::ClientGone)),
    };
    match waited {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(e)) => Err(classify(conn, sending, &e)),
        Err(_) => Err(Failure::Fatal(FetchError::TimedOut)),
    }
}

/// What an h2 error on a request means for it.
fn classify(conn: &H2Conn, sending: Sending, e: &h2::Error) -> Failure {
    tracing::debug!(origin = %conn.key.addr, "h2 request to the origin failed: {e}");
    // RFC 9113 §8.7: a refused stream was not processed.
    if e.is_remote() && e.reason() == Some(Reason::REFUSED_STREAM) {
        return Failure::Unprocessed;
    }
    if e.is_go_away() {
        // RFC 9113 §6.8: no new stream on a connection going away. A stream above its last
        // stream id was not processed; the error does not say which side of it this one
        // was, so only a request that may be repeated anyway is sent again.
        conn.retire();
        if e.is_remote() && sending.retryable() {
            return Failure::Unprocessed;
        }
    }
    Failure::Fatal(if e.is_io() || e.is_remote() {
        FetchError::OriginClosed
    } else {
        // The library refused what the origin sent (a malformed response, §8.1.1).
        FetchError::Invalid
    })
}

/// A new connection like `key`'s for the one retry (a stream on it, if it still speaks h2).
async fn reopen(ups: &Upstreams, key: &OriginKey) -> Result<H2Stream, FetchError> {
    let unreachable = |e: io::Error| FetchError::Unreachable(e.kind());
    let tls = match &key.server_name {
        None => None,
        Some(name) => Some(ups.tls.target(key.tls_client, name).map_err(unreachable)?),
    };
    match ups.h2.reopen(&ups.pool, key, tls.as_ref()).await {
        Ok(Reached::H2(stream)) => Ok(stream),
        Ok(Reached::H1(_)) => Err(FetchError::OriginClosed),
        Err(e) => Err(unreachable(e)),
    }
}

/// Sends the client's content on the stream, each piece within the window the origin grants
/// (RFC 9113 §6.9), then its end (with its trailers, §8.1).
async fn send_content(
    out: &mut SendStream<Bytes>,
    client: &mut impl Downstream,
    limit: Duration,
) -> Result<(), FetchError> {
    loop {
        match client.body_next().await {
            Ok(BodyPiece::Data(data)) => send_piece(out, data, limit).await?,
            Ok(BodyPiece::End(trailers)) => {
                let sent = if trailers.is_empty() {
                    out.send_data(Bytes::new(), true)
                } else {
                    out.send_trailers(for_h2::trailer_map(&trailers))
                };
                return sent.map_err(|_| FetchError::OriginClosed);
            }
            Err(e) => {
                out.send_reset(Reason::CANCEL);
                return Err(match e {
                    BodyError::Framing => FetchError::ClientFraming,
                    BodyError::Gone => FetchError::ClientGone,
                });
            }
        }
    }
}

async fn send_piece(
    out: &mut SendStream<Bytes>,
    mut data: Bytes,
    limit: Duration,
) -> Result<(), FetchError> {
    while !data.is_empty() {
        out.reserve_capacity(data.len());
        let granted = tokio::time::timeout(limit, poll_fn(|cx| out.poll_capacity(cx))).await;
        let room = match granted {
            Ok(Some(Ok(room))) => room,
            Ok(_) => return Err(FetchError::OriginClosed),
            Err(_) => return Err(FetchError::TimedOut),
        };
        if room > 0 {
            let piece = data.split_to(room.min(data.len()));
            out.send_data(piece, false)
                .map_err(|_| FetchError::OriginClosed)?;
        }
    }
    Ok(())
}

/// The response whose head was received, as the pipeline reads it.
fn fetched<'s>(
    ups: &'s Upstreams,
    stream: H2Stream,
    sending: Sending,
    response: Response<RecvStream>,
    scratch: &'s mut Scratch,
) -> Result<Fetched<'s>, FetchError> {
    let (parts, recv) = response.into_parts();
    // Interim responses are not passed on here; a 101 is never valid in HTTP/2 (§8.6).
    if parts.status.is_informational() {
        return Err(FetchError::Invalid);
    }
    let Scratch { obuf, resp, .. } = scratch;
    let head = (parts.status, &parts.headers, recv.is_end_stream());
    let length = for_h2::response(head, sending.method, obuf, resp).ok_or(FetchError::Invalid)?;
    let body = H2Body {
        recv,
        stream,
        limit: ups.config.timeouts.origin_first_byte,
    };
    Ok(Fetched::over_h2(ups, obuf, resp, body, length))
}
