//! One request forwarded to an origin and its response relayed back (the "pass" path).
//!
//! Steps: obtain an origin connection (pooled, or new with failover across the route's
//! origins) → send the head, and the body streamed from the client → await the response head
//! while watching for the client hanging up → relay the response body → return the origin
//! connection to the pool when both messages ended cleanly and it may be reused.

use std::io;
use std::net::IpAddr;

use bytes::{Bytes, BytesMut};
use sepia_http1::{
    BodyFraming, HeaderId, Method, RequestHead, ResponseDecoder, ResponseHead, Version,
};
use sepia_observe::ResultCode;
use tokio::io::AsyncReadExt;

use crate::client::ClientSide;
use crate::errors::CONTINUE_100;
use crate::heads::{self, Conditionals};
use crate::intercept::Diverted;
use crate::io::{read_by_deadline, write_parts_within};
use crate::pool::OriginConn;
use crate::relay::{relay_body, BodyIn, BodyOut, Deadlines, RelayError, Tee};
use crate::shared::{RouteState, Shared};

/// Room for an origin's response head (and the start of its body) in one read.
pub(crate) const ORIGIN_READ_ROOM: usize = 16 * 1024;

/// Where the request goes.
pub enum Origins<'a> {
    /// Reverse mode: a route's origins, round-robin with failover on connect errors.
    Route(&'a RouteState),
    /// Forward mode: the requested host (a name or an IP literal) and port. Names are
    /// resolved only when a connection is needed, so a cache hit never waits on DNS.
    Host { host: &'a str, port: u16 },
    /// Interception: the connection's original destination and nothing else, opened from the
    /// client's address when spoofing (see `intercept`). Borrowed, so that every future
    /// holding an `Upstream` stays as small as in the other modes.
    Diverted(&'a Diverted),
}

pub struct Upstream<'a> {
    /// The origin-form target to send.
    pub target: &'a [u8],
    /// The Host value to send; `None` sends the authority of the origin the route picked.
    pub host: Option<&'a [u8]>,
    pub origins: Origins<'a>,
}

/// How an exchange ended, for the client loop and the access log.
pub struct Outcome {
    pub status: u16,
    pub bytes_sent: u64,
    pub keep_client: bool,
    pub result: ResultCode,
    pub peer: Option<IpAddr>,
    /// The response's Content-Type, for the access log (`None` when the log is off).
    pub content_type: Option<Bytes>,
    /// The origin's response body was read to its end (what a cache fill may commit), even
    /// if the client stopped reading it.
    pub body_complete: bool,
    /// A response Sepia generates itself (an error, or a PURGE answer), written by the caller.
    pub local: Option<(u16, &'static str)>,
}

impl Outcome {
    pub fn error(status: u16, detail: &'static str, keep_client: bool) -> Outcome {
        Outcome {
            status,
            bytes_sent: 0,
            keep_client,
            result: ResultCode::TcpMiss,
            peer: None,
            content_type: None,
            local: Some((status, detail)),
            body_complete: false,
        }
    }

    fn client_gone() -> Outcome {
        Outcome {
            status: 0,
            bytes_sent: 0,
            keep_client: false,
            result: ResultCode::TcpMissAborted,
            peer: None,
            content_type: None,
            local: None,
            body_complete: false,
        }
    }
}

enum SendError {
    Origin,
    ClientGone,
    ClientFraming,
}

enum HeadError {
    /// Nothing at all came back: on a reused connection, likely the origin's idle close.
    NothingReceived,
    Invalid,
    TimedOut,
    ClientGone,
}

/// Passes a request through to the origin and relays the answer: no cache involved.
pub async fn forward(
    shared: &Shared,
    cs: &mut ClientSide,
    req: &RequestHead,
    up: Upstream<'_>,
) -> Outcome {
    match fetch(shared, cs, req, &up, &Conditionals::AS_RECEIVED).await {
        Ok(fetched) => relay_response(shared, cs, req, fetched, None, &[]).await,
        Err(outcome) => outcome,
    }
}

/// An origin connection whose response head is in `cs.resp`, with the bytes read past it.
pub struct Fetched {
    pub origin: OriginConn,
    pub obuf: BytesMut,
}

/// Sends the request (head edited by `cond`, body streamed from the client) and reads the
/// final response head into `cs.resp`. `Err` is the outcome to report instead.
pub async fn fetch(
    shared: &Shared,
    cs: &mut ClientSide,
    req: &RequestHead,
    up: &Upstream<'_>,
    cond: &Conditionals<'_>,
) -> Result<Fetched, Outcome> {
    let framing = req.body_framing();
    let has_body = !matches!(framing, BodyFraming::Empty | BodyFraming::Length(0));
    // Only a request that can be sent again may be retried (RFC 9112 §9.3.1): idempotent, and
    // with no body already consumed from the client.
    let retryable =
        !has_body && !matches!(req.method, Method::Post | Method::Patch | Method::Other);
    // With a body still unread on the client connection, an error answer must close it.
    let keep_on_error = !has_body && req.keep_alive;
    // A refused connection is a bad gateway; one that never completes is a gateway timeout.
    let unreachable = |e: io::Error| match e.kind() {
        io::ErrorKind::TimedOut => Outcome::error(
            504,
            "connecting to the origin server timed out",
            keep_on_error,
        ),
        io::ErrorKind::NotFound => Outcome::error(
            502,
            "the origin's host name could not be resolved",
            keep_on_error,
        ),
        _ => Outcome::error(502, "could not connect to the origin server", keep_on_error),
    };
    let (mut origin, picked) = obtain(shared, &up.origins).await.map_err(unreachable)?;
    cs.head_buf.clear();
    heads::origin_request(
        &mut cs.head_buf,
        req,
        up.target,
        up.host.or(picked.as_deref()).unwrap_or_default(),
        &shared.config.headers,
        &shared.via,
        &cs.info,
        cond,
    );
    // The connection's origin read buffer, reused across requests (its slices are dropped by
    // the end of each relay, so growing it reclaims the same allocation).
    let mut obuf = std::mem::take(&mut cs.obuf);
    obuf.clear();
    let mut retried = false;
    loop {
        let may_retry = origin.reused && retryable && !retried;
        match send_request(shared, cs, req, framing, &mut origin).await {
            Ok(()) => {}
            Err(SendError::Origin) if may_retry => {
                retried = true;
                origin = shared
                    .pool
                    .connect_from(&[origin.addr], origin.source)
                    .await
                    .map_err(unreachable)?;
                continue;
            }
            Err(SendError::Origin) => {
                return Err(Outcome::error(
                    502,
                    "the origin server closed the connection",
                    false,
                ))
            }
            Err(SendError::ClientFraming) => {
                return Err(Outcome::error(400, "invalid chunked request body", false))
            }
            Err(SendError::ClientGone) => return Err(Outcome::client_gone()),
        }
        match read_response_head(shared, cs, req, &mut origin, &mut obuf).await {
            Ok(()) => return Ok(Fetched { origin, obuf }),
            Err(HeadError::NothingReceived) if may_retry => {
                retried = true;
                obuf.clear();
                origin = shared
                    .pool
                    .connect_from(&[origin.addr], origin.source)
                    .await
                    .map_err(unreachable)?;
            }
            Err(HeadError::NothingReceived) => {
                return Err(Outcome::error(
                    502,
                    "the origin server closed the connection without answering",
                    false,
                ))
            }
            Err(HeadError::Invalid) => {
                return Err(Outcome::error(
                    502,
                    "the origin server sent an invalid response",
                    false,
                ))
            }
            Err(HeadError::TimedOut) => {
                return Err(Outcome::error(
                    504,
                    "the origin server did not answer in time",
                    false,
                ))
            }
            Err(HeadError::ClientGone) => return Err(Outcome::client_gone()),
        }
    }
}

/// A response the cache consumed instead of relaying (a 304 to a revalidation, an error
/// answered with a stale copy): the origin connection goes back to the pool only when the
/// response had no body left to read.
pub fn settle_unrelayed(shared: &Shared, req: &RequestHead, resp: &ResponseHead, fetched: Fetched) {
    let framing = resp.body_framing(req.method);
    if resp.keep_alive && framing == BodyFraming::Empty && fetched.obuf.is_empty() {
        shared.pool.checkin(fetched.origin);
    }
}

/// A connection to the route's next origin (failing over on connect errors) or to the host,
/// with the authority of the route's origin it reached (for `host_header = "origin"`).
pub(crate) async fn obtain(
    shared: &Shared,
    origins: &Origins<'_>,
) -> io::Result<(OriginConn, Option<Bytes>)> {
    match origins {
        Origins::Host { host, port } => {
            let addrs = shared.resolver.resolve(host, *port).await?;
            Ok((shared.pool.get(&addrs).await?, None))
        }
        Origins::Diverted(d) => Ok((shared.pool.get_from(&[d.dst], d.spoof_from).await?, None)),
        Origins::Route(route) => {
            let n = route.origins.len();
            let start = route.start();
            // The error is only built when every origin failed: an io::Error with a message
            // allocates, and this runs for every request that reaches an origin.
            let mut last = None;
            for i in 0..n {
                let origin = &route.origins[(start + i) % n];
                let addrs = match origin.addrs(&shared.resolver).await {
                    Ok(a) => a,
                    Err(e) => {
                        last = Some(e);
                        continue;
                    }
                };
                match shared.pool.get(addrs.as_slice()).await {
                    Ok(c) => return Ok((c, Some(origin.authority.clone()))),
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, "route without origins")
            }))
        }
    }
}

/// Sends the prepared head (in `cs.head_buf`) and streams the request body.
async fn send_request(
    shared: &Shared,
    cs: &mut ClientSide,
    req: &RequestHead,
    framing: BodyFraming,
    origin: &mut OriginConn,
) -> Result<(), SendError> {
    let t = &shared.config.timeouts;
    let Some(mut body) = BodyIn::new(framing) else {
        return write_parts_within(&mut origin.stream, &[&cs.head_buf], t.origin_first_byte)
            .await
            .map_err(|_| SendError::Origin);
    };
    let mut prefix: &[u8] = &cs.head_buf;
    if req.expect_continue && req.version == Version::Http11 && cs.buf.is_empty() {
        // The client waits for a go-ahead before sending its body (RFC 9110 §10.1.1). Sepia
        // forwards the head first, then invites the body, which it streams as it comes.
        write_parts_within(&mut origin.stream, &[prefix], t.origin_first_byte)
            .await
            .map_err(|_| SendError::Origin)?;
        prefix = &[];
        write_parts_within(&mut cs.stream, &[CONTINUE_100], t.client_idle)
            .await
            .map_err(|_| SendError::ClientGone)?;
    }
    let out = if framing == BodyFraming::Chunked {
        BodyOut::Chunked
    } else {
        BodyOut::Raw
    };
    let limits = Deadlines {
        read: t.client_idle,
        write: t.origin_first_byte,
    };
    match relay_body(
        &mut cs.stream,
        &mut cs.buf,
        &mut body,
        &mut origin.stream,
        out,
        prefix,
        limits,
        None,
    )
    .await
    {
        Ok(_) => Ok(()),
        Err(RelayError::Framing(_)) => Err(SendError::ClientFraming),
        Err(RelayError::SourceClosed | RelayError::Source(_)) => Err(SendError::ClientGone),
        Err(RelayError::Dest(_) | RelayError::DestAfterDrain(_)) => Err(SendError::Origin),
    }
}

/// Reads the final response head into `cs.resp`, passing interim 1xx responses on to HTTP/1.1
/// clients (except 100, which Sepia already answered itself). Meanwhile it watches the client:
/// a client that hangs up cancels the request.
async fn read_response_head(
    shared: &Shared,
    cs: &mut ClientSide,
    req: &RequestHead,
    origin: &mut OriginConn,
    obuf: &mut BytesMut,
) -> Result<(), HeadError> {
    let t = &shared.config.timeouts;
    // The whole head (and any 1xx before it) within `origin_first_byte`, from the first read
    // that has to wait.
    let mut deadline = None;
    let mut decoder = ResponseDecoder::new(sepia_http1::Limits::default());
    let mut received_any = false;
    // Pipelined requests may arrive meanwhile; read them (bounded) so EOF is noticed.
    let watch_limit = shared.limits.max_head_bytes;
    loop {
        match decoder.decode(obuf, &mut cs.resp) {
            Ok(true) => match cs.resp.status {
                100 => continue,
                101 => return Err(HeadError::Invalid), // Sepia never forwards Upgrade
                102..=199 => {
                    if req.version == Version::Http11 {
                        let raw = cs.resp.raw().clone();
                        write_parts_within(&mut cs.stream, &[&raw], t.client_idle)
                            .await
                            .map_err(|_| HeadError::ClientGone)?;
                    }
                    continue;
                }
                _ => return Ok(()),
            },
            Ok(false) => {}
            Err(_) => return Err(HeadError::Invalid),
        }
        let watch_client = cs.buf.len() < watch_limit;
        tokio::select! {
            r = read_by_deadline(&mut origin.stream, obuf, ORIGIN_READ_ROOM, &mut deadline, t.origin_first_byte) => {
                match r {
                    Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(HeadError::TimedOut),
                    // A reset before any byte on a reused connection: the origin closed it idle.
                    Err(_) if !received_any => return Err(HeadError::NothingReceived),
                    Err(_) => return Err(HeadError::Invalid),
                    Ok(0) if !received_any => return Err(HeadError::NothingReceived),
                    Ok(0) => return Err(HeadError::Invalid),
                    Ok(_) => received_any = true,
                }
            }
            r = cs.stream.read_buf(&mut cs.buf), if watch_client => {
                if matches!(r, Ok(0) | Err(_)) {
                    return Err(HeadError::ClientGone);
                }
            }
        }
    }
}

/// Relays the response in `cs.resp` and its body to the client. `tee` sees every body byte
/// (the cache stores them); `extra` is a block of complete header lines to add.
pub async fn relay_response(
    shared: &Shared,
    cs: &mut ClientSide,
    req: &RequestHead,
    fetched: Fetched,
    tee: Option<Tee<'_>>,
    extra: &[u8],
) -> Outcome {
    let Fetched { origin, mut obuf } = fetched;
    let t = &shared.config.timeouts;
    let resp = &cs.resp;
    let framing = resp.body_framing(req.method);
    let (body_out, framing_keeps_client) = heads::client_body_out(framing, req.version);
    let keep_client = req.keep_alive && framing_keeps_client && !cs.shutting_down();
    let origin_reusable = resp.keep_alive && framing != BodyFraming::UntilClose;
    cs.head_buf.clear();
    heads::client_response(
        &mut cs.head_buf,
        resp,
        req.method,
        framing,
        body_out,
        req.version,
        keep_client,
        shared.via(),
        extra,
    );
    let mut outcome = Outcome {
        status: resp.status,
        bytes_sent: 0,
        keep_client,
        result: ResultCode::TcpMiss,
        peer: Some(origin.addr.ip()),
        content_type: shared.for_log(|| resp.headers().get_bytes(HeaderId::ContentType)),
        local: None,
        body_complete: false,
    };
    crate::burst::let_the_pass_finish().await;
    let mut origin = origin;
    let done = match BodyIn::new(framing) {
        None => write_parts_within(&mut cs.stream, &[&cs.head_buf], t.client_idle)
            .await
            .map(|()| cs.head_buf.len() as u64)
            .map_err(RelayError::Dest),
        Some(mut body) => {
            let limits = Deadlines {
                read: t.origin_first_byte,
                write: t.client_idle,
            };
            relay_body(
                &mut origin.stream,
                &mut obuf,
                &mut body,
                &mut cs.stream,
                body_out,
                &cs.head_buf,
                limits,
                tee,
            )
            .await
        }
    };
    match done {
        Ok(n) => {
            outcome.bytes_sent = n;
            outcome.body_complete = true;
            if origin_reusable && obuf.is_empty() {
                shared.pool.checkin(origin);
            }
        }
        Err(e @ RelayError::DestAfterDrain(_)) => {
            tracing::debug!("client gone; the fill read the body to its end: {e}");
            outcome.keep_client = false;
            outcome.result = ResultCode::TcpMissAborted;
            outcome.body_complete = true;
            if origin_reusable && obuf.is_empty() {
                shared.pool.checkin(origin);
            }
        }
        Err(e) => {
            // The origin failed mid-body or the client went away: either way the client must
            // not see a clean end, so its connection closes (and the origin's is dropped).
            tracing::debug!("response relay aborted: {e}");
            outcome.keep_client = false;
            outcome.result = ResultCode::TcpMissAborted;
        }
    }
    obuf.clear();
    cs.obuf = obuf;
    outcome
}
