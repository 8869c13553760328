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
use crate::upstream::health::Tally;
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
    sending: Sending<'_>,
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
        stream = reopen(ups, &stream.conn.key, sending.tally).await?;
    }
}

/// One try: the request sent, the final response head received.
async fn attempt(
    ups: &Upstreams,
    conn: &H2Conn,
    head: &[u8],
    sending: Sending<'_>,
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
fn classify(conn: &H2Conn, sending: Sending<'_>, e: &h2::Error) -> Failure {
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
async fn reopen(
    ups: &Upstreams,
    key: &OriginKey,
    tally: Tally<'_>,
) -> Result<H2Stream, FetchError> {
    let unreachable = |e: io::Error| FetchError::Unreachable(e.kind());
    let tls = match &key.server_name {
        None => None,
        Some(name) => Some(ups.tls.target(key.tls_client, name).map_err(unreachable)?),
    };
    match ups.h2.reopen(&ups.pool, key, tls.as_ref(), tally).await {
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
    sending: Sending<'_>,
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

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use bytes::BytesMut;
    use sepia_config::Config;
    use tokio::net::TcpListener;

    use super::*;
    use crate::model::{Method, ResponseView, Trailers};
    use crate::upstream::h2::conns::Reached;

    /// A client whose content is `pieces`, then the end.
    struct Client(Vec<Bytes>);

    impl Downstream for Client {
        fn awaits_continue(&self) -> bool {
            false
        }

        async fn body_next(&mut self) -> Result<BodyPiece, BodyError> {
            Ok(match self.0.pop() {
                Some(piece) => BodyPiece::Data(piece),
                None => BodyPiece::End(Trailers::default()),
            })
        }

        async fn interim(&mut self, _head: &impl ResponseView) -> Result<(), crate::model::Gone> {
            Ok(())
        }

        async fn gone(&mut self) {
            std::future::pending::<()>().await;
        }
    }

    /// What the test origin does with a request.
    #[derive(Clone, Copy)]
    enum Behaviour {
        /// REFUSED_STREAM for every stream of the first connection, then answers.
        RefuseFirstConnection,
        /// GOAWAY with last stream id 0 on the first connection (nothing processed), then
        /// answers.
        GoAwayFirstConnection,
        /// Answers `received N` (the length of the content) and a trailer.
        Answer,
        /// Sends part of the body, then resets the stream.
        CutShort,
    }

    /// An h2c origin; counts connections.
    async fn origin(behaviour: Behaviour) -> (SocketAddr, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let nth = count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(tcp, behaviour, nth));
            }
        });
        (addr, accepted)
    }

    async fn serve(tcp: tokio::net::TcpStream, behaviour: Behaviour, nth: usize) {
        let mut conn = h2::server::handshake(tcp).await.unwrap();
        if matches!(behaviour, Behaviour::GoAwayFirstConnection) && nth == 0 {
            conn.abrupt_shutdown(Reason::NO_ERROR);
            while conn.accept().await.is_some() {}
            return;
        }
        while let Some(Ok((request, mut respond))) = conn.accept().await {
            if matches!(behaviour, Behaviour::RefuseFirstConnection) && nth == 0 {
                respond.send_reset(Reason::REFUSED_STREAM);
                continue;
            }
            tokio::spawn(async move {
                let mut body = request.into_body();
                let mut received = 0;
                while let Some(Ok(data)) = body.data().await {
                    received += data.len();
                    let _ = body.flow_control().release_capacity(data.len());
                }
                let mut out = respond
                    .send_response(http::Response::new(()), false)
                    .unwrap();
                out.send_data(Bytes::from(format!("received {received}")), false)
                    .unwrap();
                if matches!(behaviour, Behaviour::CutShort) {
                    // After the head and the first piece have arrived.
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    out.send_reset(Reason::INTERNAL_ERROR);
                    return;
                }
                let mut trailers = http::HeaderMap::new();
                trailers.insert("x-checksum", http::HeaderValue::from_static("abc"));
                out.send_trailers(trailers).unwrap();
            });
        }
    }

    fn upstreams(addr: SocketAddr) -> Upstreams {
        let text = format!(
            "[[listen]]\naddress = \"127.0.0.1:1\"\nmode = \"reverse\"\n\n\
             [[route]]\nhost = \"*\"\norigins = [\"http://{addr}\"]\nhttp2 = true\n"
        );
        let config = Config::from_toml_str(&text, "t.toml").unwrap();
        Upstreams::new(Arc::new(config), Bytes::from_static(b"1.1 sepia"), None).unwrap()
    }

    /// A stream of an HTTP/2 connection to `addr`.
    async fn stream(ups: &Upstreams, addr: SocketAddr) -> H2Stream {
        let addrs = [addr];
        match ups
            .h2
            .reach(&ups.pool, &addrs, None, Tally::Direct)
            .await
            .unwrap()
        {
            Reached::H2(stream) => stream,
            Reached::H1(_) => panic!("h2c is spoken with prior knowledge"),
        }
    }

    /// Sends `method /` with `content` to `addr` and reads the whole response.
    async fn exchange(
        addr: SocketAddr,
        method: Method,
        content: Vec<Bytes>,
    ) -> Result<(u16, Vec<u8>, Option<Trailers>), FetchError> {
        let ups = upstreams(addr);
        let stream = stream(&ups, addr).await;
        let mut scratch = Scratch::default();
        let length: usize = content.iter().map(Bytes::len).sum();
        scratch.head = BytesMut::from(&b"POST / HTTP/1.1\r\nHost: origin.test\r\n\r\n"[..]);
        let body = if length > 0 {
            BodyLength::Unknown
        } else {
            BodyLength::None
        };
        let sending = Sending {
            method,
            body,
            coded_ok: true,
            tally: Tally::Direct,
        };
        let mut client = Client(content);
        let mut fetched = fetch(&ups, stream, sending, &mut client, &mut scratch).await?;
        let status = fetched.head().status();
        let mut received = Vec::new();
        loop {
            match fetched.next_body().await {
                Ok(BodyPiece::Data(d)) => received.extend_from_slice(&d),
                Ok(BodyPiece::End(t)) => return Ok((status, received, Some(t))),
                Err(_) => return Ok((status, received, None)),
            }
        }
    }

    #[tokio::test]
    async fn content_is_streamed_and_trailers_come_back() {
        let (addr, _) = origin(Behaviour::Answer).await;
        let pieces = vec![Bytes::from(vec![7u8; 300_000]), Bytes::from(vec![1u8; 5])];
        let (status, body, trailers) = exchange(addr, Method::Post, pieces).await.unwrap();
        assert_eq!((status, body.as_slice()), (200, &b"received 300005"[..]));
        let trailers = trailers.expect("a complete body");
        assert_eq!(
            trailers.iter().collect::<Vec<_>>(),
            [(&b"x-checksum"[..], &b"abc"[..])]
        );
    }

    #[tokio::test]
    async fn a_refused_stream_is_sent_again_on_a_new_connection() {
        let (addr, accepted) = origin(Behaviour::RefuseFirstConnection).await;
        let (status, body, _) = exchange(addr, Method::Get, Vec::new()).await.unwrap();
        assert_eq!((status, body.as_slice()), (200, &b"received 0"[..]));
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_request_left_unprocessed_by_goaway_is_sent_again() {
        let (addr, accepted) = origin(Behaviour::GoAwayFirstConnection).await;
        let (status, body, _) = exchange(addr, Method::Get, Vec::new()).await.unwrap();
        assert_eq!((status, body.as_slice()), (200, &b"received 0"[..]));
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_refused_stream_with_content_is_not_sent_again() {
        let (addr, accepted) = origin(Behaviour::RefuseFirstConnection).await;
        let failed = exchange(addr, Method::Post, vec![Bytes::from_static(b"x")]).await;
        assert!(failed.is_err());
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_released_response_has_no_more_body() {
        // Released, an HTTP/2 response gives its stream back: whatever of the body was not
        // read is not read any more (the stream is cancelled).
        let (addr, _) = origin(Behaviour::Answer).await;
        let ups = upstreams(addr);
        let stream = stream(&ups, addr).await;
        let mut scratch = Scratch {
            head: BytesMut::from(&b"GET / HTTP/1.1\r\nHost: origin.test\r\n\r\n"[..]),
            ..Scratch::default()
        };
        let sending = Sending {
            method: Method::Get,
            body: BodyLength::None,
            coded_ok: true,
            tally: Tally::Direct,
        };
        let mut client = Client(Vec::new());
        let mut fetched = fetch(&ups, stream, sending, &mut client, &mut scratch)
            .await
            .unwrap();
        assert_eq!(fetched.head().status(), 200);
        fetched.release();
        assert!(fetched.next_body().await.is_err());
    }

    #[tokio::test]
    async fn a_reset_stream_is_a_failed_body_never_an_end() {
        let (addr, _) = origin(Behaviour::CutShort).await;
        let (status, _, trailers) = exchange(addr, Method::Get, Vec::new()).await.unwrap();
        assert_eq!(status, 200);
        assert!(trailers.is_none(), "the body must not end cleanly");
    }
}
