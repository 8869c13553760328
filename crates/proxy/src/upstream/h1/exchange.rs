//! One request sent to an origin over HTTP/1.1 and its response read back.
//!
//! Steps: obtain an origin connection (pooled, or new with failover across the route's
//! origins) → send the head, and the content pulled from the client → await the response head
//! while watching for the client going away, passing interim responses on → hand the head and
//! a body reader to the pipeline → return the connection to the pool when both messages
//! ended cleanly ([`Fetched::release`], the one place that decides reuse).

use std::io;
use std::net::IpAddr;

use bytes::{Bytes, BytesMut};
use sepia_http1::{BodyFraming, ResponseDecoder, ResponseHead};

use super::request_head::{self, HeadParts};
use crate::h1::body::{write_end, write_piece, BodyDecoder, BodyOut, BodyReadError};
use crate::h1::fields::H1Fields;
use crate::h1::views;
use crate::model::{
    BodyError, BodyLength, BodyPiece, ClientInfo, Downstream, Method, RequestView, ResponseView,
    Scheme,
};
use crate::transport::io::{read_conn_by_deadline, write_parts_within};
use crate::upstream::fetch_error::FetchError;
use crate::upstream::h2::body::H2Body;
use crate::upstream::health::Tally;
use crate::upstream::pool::OriginConn;
use crate::upstream::request::{Conditionals, Upstream};
use crate::upstream::upstreams::Upstreams;

/// Room for an origin's response head (and the start of its body) in one read.
const ORIGIN_READ_ROOM: usize = 16 * 1024;

/// Buffers of an origin exchange, kept by the client connection across its requests (or made
/// for one background revalidation): the head sent, the bytes read, the response head.
#[derive(Default)]
pub struct Scratch {
    pub(in crate::upstream) head: BytesMut,
    /// Unallocated between requests (see `release_response`).
    pub(in crate::upstream) obuf: BytesMut,
    pub(in crate::upstream) resp: ResponseHead,
}

impl Scratch {
    /// Ends the request: drops the last response's head (a slice of the read buffer) and the
    /// read buffer's allocation. The next exchange takes a buffer only once its origin's
    /// connection is readable (`read_conn_by_deadline`; usually the answer, sometimes a TLS
    /// record before it), so a connection waiting on an origin, or between requests, holds
    /// none. And since jemalloc's thread cache (blocks up to 32 KiB) hands out the block freed
    /// last, the response is read into memory the core touched moments ago; kept per
    /// connection instead, 100 busy connections' buffers took turns through 1.6 MB, more than
    /// this core's L2. A body read past the head room grows the buffer beyond that cache: such
    /// a miss pays an arena allocation for it.
    pub fn release_response(&mut self) {
        self.resp.clear();
        self.obuf = BytesMut::new();
    }
}

/// A request for an origin: the client's request and what the cache or the route changes.
pub struct OriginRequest<'a, R> {
    pub req: &'a R,
    pub upstream: &'a Upstream<'a>,
    pub cond: &'a Conditionals<'a>,
    pub client: &'a ClientInfo,
    pub client_scheme: Scheme,
}

/// The head of a request that will be sent later, without the client (a background
/// revalidation): built now, while the request is at hand.
pub fn prepare(
    ups: &Upstreams,
    request: OriginRequest<'_, impl RequestView>,
    host: &[u8],
) -> Bytes {
    let mut head = BytesMut::with_capacity(512);
    build_head(&mut head, ups, &request, host);
    head.freeze()
}

/// Appends the head `request` is sent with, under the Host value `host`, to `out`.
pub(in crate::upstream) fn build_head<R: RequestView>(
    out: &mut BytesMut,
    ups: &Upstreams,
    request: &OriginRequest<'_, R>,
    host: &[u8],
) {
    let parts = HeadParts {
        target: request.upstream.target,
        host,
        policy: &ups.config.headers,
        via: &ups.via,
        client: request.client,
        client_scheme: request.client_scheme,
        cond: request.cond,
    };
    request_head::build(out, request.req, &parts);
}

/// What the request sent on an exchange is, for the retry and framing decisions.
#[derive(Clone, Copy)]
pub(in crate::upstream) struct Sending<'o> {
    pub method: Method,
    pub body: BodyLength,
    /// Whoever the response goes to can receive a body under a transfer coding other than
    /// chunked, with the Transfer-Encoding that names it: an HTTP/1.1 client.
    pub coded_ok: bool,
    /// Where the connection the retry opens is counted.
    pub tally: Tally<'o>,
}

impl Sending<'_> {
    /// Only a request that can be sent again may be retried (RFC 9112 §9.3.1): idempotent,
    /// and with no content already consumed from the client.
    pub fn retryable(self) -> bool {
        self.body == BodyLength::None
            && !matches!(self.method, Method::Post | Method::Patch | Method::Other)
    }
}

/// Sends the head in `scratch.head` on `origin` and reads the response head, once more on a
/// fresh connection when a reused one turns out closed.
pub(in crate::upstream) async fn exchange<'s>(
    ups: &'s Upstreams,
    mut origin: OriginConn,
    sending: Sending<'_>,
    client: &mut impl Downstream,
    scratch: &'s mut Scratch,
) -> Result<Fetched<'s>, FetchError> {
    let Scratch { head, obuf, resp } = scratch;
    obuf.clear();
    let mut retried = false;
    loop {
        let may_retry = origin.reused && sending.retryable() && !retried;
        let failed = match send(ups, &mut origin, head, sending.body, client).await {
            Ok(()) => read_head(ups, &mut origin, obuf, resp, client).await.err(),
            Err(e) => Some(e),
        };
        match failed {
            None => return fetched(ups, origin, sending, obuf, resp),
            Some(FetchError::OriginClosed | FetchError::NoAnswer) if may_retry => {
                retried = true;
                obuf.clear();
                origin = ups
                    .reconnect(&origin.key, sending.tally)
                    .await
                    .map_err(FetchError::unreachable)?;
            }
            Some(e) => return Err(e),
        }
    }
}

/// The response whose head was just read, with its body still to come; or why it cannot go to
/// the client.
///
/// A transfer coding other than chunked (`ResponseHead::transfer_coded`) is valid in a
/// response (RFC 9112 §6.1), but the content stays in a coding Sepia cannot remove. It goes to
/// an HTTP/1.1 client with its codings named (the front end writes them before its own
/// chunked); an HTTP/1.0 client, to whom a server "MUST NOT send a response containing
/// Transfer-Encoding" (§6.1), gets a 502 instead of bytes it could not interpret; and it is
/// never stored (`end_is_certain`), since the cache would keep as the content bytes that are
/// not the content, without the field that says how they are coded.
fn fetched<'s>(
    ups: &'s Upstreams,
    origin: OriginConn,
    sending: Sending<'_>,
    obuf: &'s mut BytesMut,
    resp: &'s ResponseHead,
) -> Result<Fetched<'s>, FetchError> {
    let framing = resp.body_framing(sending.method);
    let coded = resp.transfer_coded && framing != BodyFraming::Empty;
    if coded && !sending.coded_ok {
        return Err(FetchError::Unrelayable(CODED_FOR_HTTP10));
    }
    Ok(Fetched {
        end_is_certain: framing != BodyFraming::UntilClose && !coded,
        origin_ip: origin.addr().ip(),
        length: views::body_length(framing),
        body: BodyDecoder::new(framing),
        pool_rule: resp.reusable(sending.method),
        origin: Some(origin),
        h2: None,
        ups,
        obuf,
        resp,
    })
}

const CODED_FOR_HTTP10: &str = "the origin server's response has a transfer coding \
    (Transfer-Encoding) that Sepia cannot remove and an HTTP/1.0 client cannot receive";

/// Writes the head, then the content pulled from the client, framed as the client framed it
/// (a length stays a length, chunked stays chunked with its trailers).
async fn send(
    ups: &Upstreams,
    origin: &mut OriginConn,
    head: &[u8],
    body: BodyLength,
    client: &mut impl Downstream,
) -> Result<(), FetchError> {
    let limit = ups.config.timeouts.origin_first_byte;
    let conn = &mut origin.conn;
    if body == BodyLength::None {
        return write_parts_within(conn, &[head], limit)
            .await
            .map_err(|_| FetchError::OriginClosed);
    }
    let (out, _) = BodyOut::for_length(body, true);
    let mut prefix = head;
    if client.awaits_continue() {
        // The head goes first; the front end invites the content when it is first pulled.
        write_parts_within(conn, &[prefix], limit)
            .await
            .map_err(|_| FetchError::OriginClosed)?;
        prefix = &[];
    }
    loop {
        let written = match client.body_next().await {
            Ok(BodyPiece::Data(data)) => write_piece(conn, prefix, &data, out, limit).await,
            Ok(BodyPiece::End(trailers)) => {
                return write_end(conn, prefix, &trailers, out, limit)
                    .await
                    .map(drop)
                    .map_err(|_| FetchError::OriginClosed)
            }
            Err(BodyError::Framing) => return Err(FetchError::ClientFraming),
            Err(BodyError::Gone) => return Err(FetchError::ClientGone),
        };
        written.map_err(|_| FetchError::OriginClosed)?;
        prefix = &[];
    }
}

/// Reads the final response head into `resp`, passing interim responses to the client
/// (except 100, which the front end answered itself, and 101: Sepia forwards no Upgrade).
/// Meanwhile it watches the client: a client that goes away cancels the request.
async fn read_head(
    ups: &Upstreams,
    origin: &mut OriginConn,
    obuf: &mut BytesMut,
    resp: &mut ResponseHead,
    client: &mut impl Downstream,
) -> Result<(), FetchError> {
    let limit = ups.config.timeouts.origin_first_byte;
    // The whole head (and any 1xx before it) within `origin_first_byte`, from the first read
    // that has to wait.
    let mut deadline = None;
    let mut decoder = ResponseDecoder::new(sepia_http1::Limits::default());
    let mut received_any = false;
    loop {
        match decoder.decode(obuf, resp) {
            Ok(true) => match resp.status {
                100 => continue,
                101 => return Err(FetchError::Invalid),
                102..=199 => {
                    client
                        .interim(&*resp)
                        .await
                        .map_err(|_| FetchError::ClientGone)?;
                    continue;
                }
                _ => return Ok(()),
            },
            Ok(false) => {}
            Err(_) => return Err(FetchError::Invalid),
        }
        let read = read_conn_by_deadline(
            &mut origin.conn,
            obuf,
            ORIGIN_READ_ROOM,
            &mut deadline,
            limit,
        );
        tokio::select! {
            r = read => match r {
                Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(FetchError::TimedOut),
                // Nothing at all on a reused connection: likely the origin's idle close.
                Err(_) | Ok(0) if !received_any => return Err(FetchError::NoAnswer),
                Err(_) | Ok(0) => return Err(FetchError::Invalid),
                Ok(_) => received_any = true,
            },
            () = client.gone() => return Err(FetchError::ClientGone),
        }
    }
}

/// An origin's response whose head has been read, with its body still to come.
///
/// [`Fetched::release`] decides the connection's fate, in this one place for every caller: it
/// goes back to the pool only when the response said the connection persists, its body was
/// read to the end, and nothing more was received. Dropped without it, the connection closes.
pub struct Fetched<'s> {
    origin: Option<OriginConn>,
    /// The body of a response received over HTTP/2, in place of `origin` and `body`.
    h2: Option<Box<H2Body>>,
    ups: &'s Upstreams,
    obuf: &'s mut BytesMut,
    resp: &'s ResponseHead,
    body: BodyDecoder,
    length: BodyLength,
    end_is_certain: bool,
    origin_ip: IpAddr,
    /// The response allows reuse as far as its head says (RFC 9112 §9.3).
    pool_rule: bool,
}

impl Fetched<'_> {
    pub fn head(&self) -> &impl ResponseView {
        self.resp
    }

    /// How much content follows the head.
    pub fn body_length(&self) -> BodyLength {
        self.length
    }

    /// Whether the body, read to its end, is known to be the whole content, as a cache may
    /// keep it: false for a body delimited by the connection's close (RFC 9112 §8: its end
    /// cannot be told apart from the origin failing), which must never be stored as if
    /// complete, and for content under a transfer coding other than chunked (§6.1), which
    /// Sepia cannot remove: those bytes are not the content.
    pub fn end_is_certain(&self) -> bool {
        self.end_is_certain
    }

    pub fn origin_ip(&self) -> IpAddr {
        self.origin_ip
    }

    /// The next piece of the body.
    pub async fn next_body(&mut self) -> Result<BodyPiece, BodyReadError> {
        if let Some(body) = self.h2.as_mut() {
            return body.next().await;
        }
        let Some(origin) = self.origin.as_mut() else {
            return Err(BodyReadError::Closed);
        };
        let limit = self.ups.config.timeouts.origin_first_byte;
        let fields = H1Fields(self.resp.headers());
        self.body
            .next(&mut origin.conn, self.obuf, limit, &fields)
            .await
    }
}

impl<'s> Fetched<'s> {
    /// A response received over HTTP/2 (RFC 9113 §8.1): its end is END_STREAM, always
    /// certain; its stream is cancelled if dropped before that end, and the connection it
    /// shares is never the caller's to keep.
    pub(in crate::upstream) fn over_h2(
        ups: &'s Upstreams,
        obuf: &'s mut BytesMut,
        resp: &'s ResponseHead,
        body: H2Body,
        length: BodyLength,
    ) -> Fetched<'s> {
        Fetched {
            origin_ip: body.origin_ip(),
            origin: None,
            h2: Some(Box::new(body)),
            ups,
            obuf,
            resp,
            body: BodyDecoder::new(BodyFraming::Empty),
            length,
            end_is_certain: true,
            pool_rule: false,
        }
    }

    /// Done with the response: its connection goes back to the pool if it may carry another
    /// request (RFC 9112 §9.3), else it closes; over HTTP/2 its stream ends (cancelled if its
    /// body was not read to the end) and gives its place on the shared connection back. Once
    /// released, the response has neither: a second call does nothing, and no more body can be
    /// read.
    pub fn release(&mut self) {
        self.h2 = None;
        if let Some(origin) = self.origin.take() {
            if self.pool_rule && self.body.is_done() && self.obuf.is_empty() {
                self.ups.pool.checkin(origin);
            }
        }
    }
}
