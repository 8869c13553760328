//! One HTTP/2 stream as the pipeline sees it: the request content read off the stream
//! ([`Downstream`], flow-control window given back as each piece is consumed) and every
//! answer sent as HEADERS and DATA frames ([`Responder`]). Unlike an h1 exchange, nothing
//! here decides the connection's fate: a stream that cannot end cleanly is reset (RFC 9113
//! §8.1, RST_STREAM), and the other streams go on.

use std::future::poll_fn;
use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::{HeaderMap, Response};
use sepia_store::{slice_chunks, Body, BodyFile, Object};

use super::heads::{self, Head};
use super::request::H2Request;
use super::send::send;
use super::tunnel::pump;
use crate::cache::Meta;
use crate::h1::fields::received_trailers;
use crate::model::{
    BodyError, BodyLength, BodyPiece, Downstream, Gone, LocalAnswer, RequestView, ResponseView,
    Trailers,
};
use crate::pipeline::{Responder, StoredAnswer, Tunneled};
use crate::state::State;
use crate::transport::Conn;

/// One stream being answered.
pub struct H2Exchange<'s> {
    state: &'s State,
    req: &'s H2Request,
    body: RecvStream,
    respond: SendResponse<Bytes>,
    /// The response's DATA side, once its head is sent without END_STREAM.
    stream: Option<SendStream<Bytes>>,
    /// A started response's head, held until its first content or its end.
    head: Option<Response<()>>,
    /// END_STREAM was sent: the response is complete.
    ended: bool,
    continue_pending: bool,
    body_done: bool,
    /// Bytes of request content handed out and not yet given back to the client's window:
    /// given back when the next piece is asked for, i.e. once the origin took this one.
    unreleased: usize,
    received: u64,
    sent: u64,
}

impl<'s> H2Exchange<'s> {
    pub fn new(
        state: &'s State,
        req: &'s H2Request,
        body: RecvStream,
        respond: SendResponse<Bytes>,
    ) -> H2Exchange<'s> {
        H2Exchange {
            state,
            req,
            continue_pending: req.expects_continue(),
            body_done: req.body() == BodyLength::None,
            body,
            respond,
            stream: None,
            head: None,
            ended: false,
            unreleased: 0,
            received: 0,
            sent: 0,
        }
    }

    /// After the pipeline: a response that did not end cleanly (cut short, never started) is
    /// reset, so the client cannot take part of it for the whole (RFC 9113 §8.1).
    pub fn finish(mut self) {
        if self.ended {
            return;
        }
        match self.stream.as_mut() {
            Some(stream) => stream.send_reset(Reason::INTERNAL_ERROR),
            None => self.respond.send_reset(Reason::INTERNAL_ERROR),
        }
    }

    fn limit(&self) -> Duration {
        self.state.config.timeouts.client_idle
    }

    /// Sends `head`, ending the stream when `end`.
    fn send_head(&mut self, head: Response<()>, end: bool) -> Result<(), Gone> {
        let stream = self.respond.send_response(head, end).map_err(|_| Gone)?;
        self.ended = end;
        if !end {
            self.stream = Some(stream);
        }
        Ok(())
    }

    /// Sends the held head, if any, without END_STREAM.
    fn open(&mut self) -> Result<(), Gone> {
        match self.head.take() {
            Some(head) => self.send_head(head, false),
            None => Ok(()),
        }
    }

    /// Sends `data` on the open stream, ending it when `end`.
    async fn content(&mut self, data: Bytes, end: bool) -> Result<(), Gone> {
        let limit = self.limit();
        let Some(stream) = self.stream.as_mut() else {
            return Err(Gone);
        };
        let n = data.len() as u64;
        send(stream, data, end, limit).await?;
        self.sent += n;
        self.ended = end;
        Ok(())
    }

    /// Sends a complete answer: `head`, then `body` (possibly none).
    async fn answer(&mut self, head: Head, body: Bytes) -> Result<(), Gone> {
        self.sent += head.bytes;
        if body.is_empty() {
            return self.send_head(head.response, true);
        }
        self.send_head(head.response, false)?;
        self.content(body, true).await
    }

    /// Gives the client's window back for the content already consumed.
    fn release(&mut self) {
        if self.unreleased > 0 {
            let _ = self.body.flow_control().release_capacity(self.unreleased);
            self.unreleased = 0;
        }
    }

    /// The request content ended: it must have been as long as declared (RFC 9113 §8.1.1).
    async fn body_end(&mut self) -> Result<BodyPiece, BodyError> {
        if self
            .req
            .declared_length()
            .is_some_and(|n| n != self.received)
        {
            return Err(BodyError::Framing);
        }
        let limit = self.limit();
        let trailers = tokio::time::timeout(limit, self.body.trailers()).await;
        self.body_done = true;
        match trailers {
            Ok(Ok(map)) => Ok(BodyPiece::End(received_trailers(map))),
            Ok(Err(_)) | Err(_) => Err(BodyError::Gone),
        }
    }
}

/// Sends `trailers` (RFC 9113 §8.1) as a HEADERS frame ending the stream.
fn trailer_map(trailers: &Trailers) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in trailers.iter() {
        let name = http::HeaderName::from_bytes(name);
        let value = http::HeaderValue::from_bytes(value);
        if let (Ok(n), Ok(v)) = (name, value) {
            if sepia_http1::allowed_in_trailers(n.as_str().as_bytes()) {
                map.append(n, v);
            }
        }
    }
    map
}

impl Downstream for H2Exchange<'_> {
    fn awaits_continue(&self) -> bool {
        self.continue_pending
    }

    async fn body_next(&mut self) -> Result<BodyPiece, BodyError> {
        self.release();
        if self.continue_pending {
            self.continue_pending = false;
            let mut go_on = Response::new(());
            *go_on.status_mut() = http::StatusCode::CONTINUE;
            self.respond
                .send_informational(go_on)
                .map_err(|_| BodyError::Gone)?;
        }
        if self.body_done {
            return Ok(BodyPiece::End(Trailers::default()));
        }
        let limit = self.limit();
        match tokio::time::timeout(limit, self.body.data()).await {
            Ok(Some(Ok(data))) => {
                self.unreleased = data.len();
                self.received += data.len() as u64;
                if self
                    .req
                    .declared_length()
                    .is_some_and(|n| self.received > n)
                {
                    return Err(BodyError::Framing);
                }
                Ok(BodyPiece::Data(data))
            }
            Ok(None) => self.body_end().await,
            // The h2 crate resets a stream whose DATA exceed its content-length (PROTOCOL_ERROR).
            Ok(Some(Err(e))) if e.reason() == Some(Reason::PROTOCOL_ERROR) => {
                Err(BodyError::Framing)
            }
            Ok(Some(Err(_))) | Err(_) => Err(BodyError::Gone),
        }
    }

    async fn interim(&mut self, head: &impl ResponseView) -> Result<(), Gone> {
        let head = heads::interim(head);
        self.sent += head.bytes;
        self.respond
            .send_informational(head.response)
            .map_err(|_| Gone)
    }

    async fn gone(&mut self) {
        // Completes when the client resets the stream or the connection fails.
        let respond = &mut self.respond;
        match self.stream.as_mut() {
            Some(stream) => poll_fn(|cx| stream.poll_reset(cx)).await.ok(),
            None => poll_fn(|cx| respond.poll_reset(cx)).await.ok(),
        };
    }
}

impl<'s> Responder for H2Exchange<'s> {
    type Request = H2Request;

    async fn send_stored(
        &mut self,
        obj: &Object<Meta>,
        answer: &StoredAnswer<'_>,
    ) -> Result<(), Gone> {
        let (head, range) = heads::stored(obj, answer, self.state.via());
        self.sent += head.bytes;
        if range.is_empty() {
            return self.send_head(head.response, true);
        }
        self.send_head(head.response, false)?;
        match obj.body() {
            Body::Chunks(chunks) => {
                let mut pieces = slice_chunks(chunks, range.start, range.end).into_iter();
                let mut next = pieces.next();
                while let Some(piece) = next {
                    next = pieces.next();
                    self.content(piece, next.is_none()).await?;
                }
                Ok(())
            }
            Body::File(file) => self.send_file(file, range).await,
        }
    }

    async fn start_fill(
        &mut self,
        obj: &Object<Meta>,
        length: BodyLength,
        answer: &StoredAnswer<'_>,
    ) -> Result<(), Gone> {
        let head = heads::fill(obj, length, answer, self.state.via());
        self.sent += head.bytes;
        self.head = Some(head.response);
        Ok(())
    }

    async fn start_relayed(
        &mut self,
        head: &impl ResponseView,
        length: BodyLength,
        cache_status: &[u8],
    ) -> Result<(), Gone> {
        let method = self.req.method();
        let head = heads::relayed(head, length, method, self.state.via(), cache_status);
        self.sent += head.bytes;
        self.head = Some(head.response);
        Ok(())
    }

    async fn send_data(&mut self, data: &Bytes) -> Result<(), Gone> {
        self.open()?;
        // A reference, not a copy: the h2 crate queues it until the client's window opens.
        self.content(data.clone(), false).await
    }

    async fn send_end(&mut self, trailers: &Trailers) -> Result<(), Gone> {
        if let Some(head) = self.head.take() {
            if trailers.is_empty() {
                return self.send_head(head, true);
            }
            self.send_head(head, false)?;
        }
        if trailers.is_empty() {
            return self.content(Bytes::new(), true).await;
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err(Gone);
        };
        stream
            .send_trailers(trailer_map(trailers))
            .map_err(|_| Gone)?;
        self.ended = true;
        Ok(())
    }

    async fn send_local(&mut self, answer: LocalAnswer, _close: bool) -> Result<(), Gone> {
        // `close` is about an h1 connection's framing; an HTTP/2 stream ends on its own.
        let state = self.state;
        let (head, body) = heads::local(answer, state.via(), state.challenge());
        self.answer(head, body).await
    }

    async fn tunnel(&mut self, origin: Conn, idle: Duration) -> Result<Tunneled, Gone> {
        let mut established = Response::new(());
        *established.status_mut() = http::StatusCode::OK;
        self.sent += 9;
        self.send_head(established, false)?;
        let Some(stream) = self.stream.as_mut() else {
            return Err(Gone);
        };
        let tunneled = pump(&mut self.body, stream, origin, idle).await;
        // `ended` stays false: a stream both sides ended is closed and `finish` resets
        // nothing; one cut by the idle limit is reset (RFC 9113 §8.5).
        self.sent += tunneled.down;
        Ok(tunneled)
    }

    fn bytes_sent(&self) -> u64 {
        self.sent
    }
}

/// A stored body kept in a file goes out in pieces of this size, each read when the client's
/// window lets the previous one go: a large hit costs one piece of memory, not the body.
const FILE_PIECE: u64 = 64 * 1024;

impl H2Exchange<'_> {
    /// Bytes `range` of a body file, read back a piece at a time (HTTP/2 frames its content,
    /// so `sendfile` cannot send it). The reads are from the page cache of a file the store
    /// just wrote or keeps, as the h1 front end's TLS path reads it.
    async fn send_file(&mut self, file: &BodyFile, range: Range<u64>) -> Result<(), Gone> {
        let mut at = range.start;
        while at < range.end {
            let next = range.end.min(at + FILE_PIECE);
            let piece = file.read_range(at, next).map_err(|_| Gone)?;
            at = next;
            self.content(piece, at == range.end).await?;
        }
        Ok(())
    }
}
