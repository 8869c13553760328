//! An HTTP/2 client connection (RFC 9113): the h2 crate's server connection over the client's
//! socket, one task per stream running the same pipeline as an h1 request, and the limits
//! that keep one connection's memory and work bounded whatever its client sends.
//!
//! A stream is polled first on the connection's task and gets a task of its own only when
//! it must wait (see [`poll_once`]): a hit then costs no spawn, and the responses of a batch
//! of hits leave together. Streams that wait run on their own tasks rather than in a
//! `FuturesUnordered` polled by the connection's task: they then run on every worker (an h1
//! client's requests would, over as many connections), and one stream's CPU work does not
//! delay the others' frames. A `JoinSet` holds them; when the connection ends, the streams
//! left are detached, not cancelled: each sees its client gone (sends fail,
//! `Downstream::gone` completes), stops its origin work and still writes its access log
//! line, as an h1 request whose client left does.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use h2::server::{Builder, Connection, SendResponse};
use h2::{Reason, RecvStream};
use sepia_config::Mode;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::checks;
use super::exchange::H2Exchange;
use super::request::H2Request;
use super::wire::{sending, Sender, Wire};
use crate::front::Listener;
use crate::model::{ClientInfo, Outcome};
use crate::pipeline::{self, Buffers, ConnInfo};
use crate::state::shutdown::Shutdown;
use crate::state::State;
use crate::transport::Conn;

/// SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113 §6.5.2): the streams a client may have open at
/// once, as most servers advertise (nginx, Envoy: 100-128).
const MAX_CONCURRENT_STREAMS: u32 = 128;
/// SETTINGS_INITIAL_WINDOW_SIZE: request content a stream may have in flight before Sepia
/// consumes it (RFC 9113 §6.9.2), enough for one stream's upload at LAN speed.
const STREAM_WINDOW: u32 = 256 * 1024;
/// The connection's receive window: all request content of one connection buffered at most.
const CONNECTION_WINDOW: u32 = 1024 * 1024;
/// Response bytes queued per stream ahead of the client's window (the h2 crate's default,
/// 400 KiB, times 128 streams would be 50 MiB for a connection that does not read).
const SEND_BUFFER: usize = 64 * 1024;
/// Streams a client may reset before Sepia accepts them (the Rapid Reset attack,
/// CVE-2023-44487): past this the connection ends with GOAWAY ENHANCE_YOUR_CALM.
const PENDING_ACCEPT_RESETS: usize = 20;
/// Streams Sepia may reset for the client's errors (malformed requests, flow-control
/// violations) before it ends the connection with GOAWAY ENHANCE_YOUR_CALM.
const LOCAL_ERROR_RESETS: usize = 256;
/// Streams reset by Sepia whose late frames are still tolerated (RFC 9113 §5.4.2).
const CONCURRENT_RESETS: usize = 64;
/// Streams the client already closed (or reset) while their tasks still run are refused
/// with REFUSED_STREAM past `MAX_CONCURRENT_STREAMS` running tasks; a client refused this
/// often is not retrying but flooding, and its connection ends (ENHANCE_YOUR_CALM).
const REFUSALS_LIMIT: u32 = 256;
/// How long a connection told to go away (GOAWAY) may take to close once it has no stream
/// left (a client that never reads could otherwise hold it open). Streams still open are
/// bounded by their own limits (`client_idle` per write, the origin's timeouts).
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Serves an HTTP/2 connection until it closes, fails, stays idle for `client_idle` or the
/// server shuts down: a TLS connection whose ALPN chose `h2`.
pub async fn serve(
    state: Arc<State>,
    conn: Conn,
    peer: SocketAddr,
    listener: Listener,
    shutdown: Arc<Shutdown>,
) {
    run(
        state,
        Wire::new(Bytes::new(), conn),
        peer,
        listener,
        shutdown,
    )
    .await;
}

/// [`serve`] for a plain connection whose first bytes, `early`, were already read by the h1
/// session and are the start of the HTTP/2 preface (prior-knowledge h2c, RFC 9113 §3.3).
pub async fn serve_h2c(
    state: Arc<State>,
    conn: Conn,
    early: Bytes,
    peer: SocketAddr,
    listener: Listener,
    shutdown: Arc<Shutdown>,
) {
    run(state, Wire::new(early, conn), peer, listener, shutdown).await;
}

async fn run(
    state: Arc<State>,
    (io, sender): (Wire, Sender),
    peer: SocketAddr,
    listener: Listener,
    shutdown: Arc<Shutdown>,
) {
    let info = Arc::new(ConnInfo {
        client: ClientInfo::new(peer),
        allowed: ConnInfo::allowed_by(&state, listener.mode, peer.ip()),
        mode: listener.mode,
        divert: listener.divert,
        scheme: listener.scheme,
        listener: listener.index,
    });
    // The preface and the client's SETTINGS must come as promptly as a request head would.
    // In a block of its own: once done, the handshake's space in this future is free for the
    // session's (the future is what an idle connection holds).
    let conn = {
        let handshake = pin!(builder(&state).handshake(io));
        let limit = state.config.timeouts.request_head;
        match tokio::time::timeout(limit, sending(handshake, &sender)).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return tracing::debug!("h2 handshake failed: {e}"),
            Err(_) => return tracing::debug!("h2 handshake timed out"),
        }
    };
    let mut streams = JoinSet::new();
    {
        let session = pin!(accept_streams(conn, &mut streams, &state, &info, &shutdown));
        sending(session, &sender).await;
    }
    streams.detach_all();
}

/// The server side's settings and limits, all explicit rather than the crate's defaults.
fn builder(state: &State) -> Builder {
    let mut b = Builder::new();
    let head_limit = u32::try_from(state.config.limits.max_request_head).unwrap_or(u32::MAX);
    b.max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .max_header_list_size(head_limit)
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_send_buffer_size(SEND_BUFFER)
        .max_pending_accept_reset_streams(PENDING_ACCEPT_RESETS)
        .max_local_error_reset_streams(Some(LOCAL_ERROR_RESETS))
        .max_concurrent_reset_streams(CONCURRENT_RESETS)
        .reset_stream_duration(Duration::from_secs(10));
    b
}

/// Accepts streams and runs them until the connection ends. A connection with no stream for
/// `client_idle` is told to go away (GOAWAY, RFC 9113 §6.8), as is every connection when
/// shutdown begins; its open streams finish first. Control frames alone (PING, SETTINGS)
/// do not keep a connection from being idle.
async fn accept_streams(
    mut conn: Connection<Wire, Bytes>,
    streams: &mut JoinSet<Buffers>,
    state: &Arc<State>,
    info: &Arc<ConnInfo>,
    shutdown: &Shutdown,
) {
    let idle_limit = state.config.timeouts.client_idle;
    let mut refused = 0u32;
    let mut stop = std::pin::pin!(shutdown.waiter());
    let idle = tokio::time::sleep(idle_limit);
    let mut idle = std::pin::pin!(idle);
    let mut closing = shutdown.has_begun();
    if closing {
        conn.graceful_shutdown();
    }
    // When the last stream answered on this task ended: such streams never join `streams`,
    // so the idle timer learns of them when it fires (one clock read per stream, not a
    // timer reset).
    let mut served_at: Option<Instant> = None;
    let mut spare: Option<Lent> = None;
    loop {
        tokio::select! {
            accepted = conn.accept() => match accepted {
                Some(Ok((req, mut respond))) => {
                    // Finished tasks not reaped yet are not running streams.
                    while streams.try_join_next().is_some() {}
                    if streams.len() >= MAX_CONCURRENT_STREAMS as usize {
                        respond.send_reset(Reason::REFUSED_STREAM);
                        refused += 1;
                        if refused > REFUSALS_LIMIT {
                            conn.abrupt_shutdown(Reason::ENHANCE_YOUR_CALM);
                        }
                        continue;
                    }
                    let buffers = spare.take().map_or_else(Buffers::default, Lent::buffers);
                    // Boxed here: the stream's future is not part of the session's.
                    let stream =
                        Box::pin(serve_stream(state.clone(), info.clone(), req, respond, buffers));
                    if let Some(used) = start(stream, streams).await {
                        (served_at, spare) = (Some(Instant::now()), Some(Lent::from(used)));
                    }
                }
                Some(Err(e)) => return tracing::debug!("h2 connection error: {e}"),
                None => return,
            },
            Some(_) = streams.join_next(), if !streams.is_empty() => {
                if streams.is_empty() {
                    // Idle from now; or, going away, the last stream's frames get the time
                    // to leave before the connection may be dropped.
                    let wait = if closing { CLOSE_GRACE } else { idle_limit };
                    idle.as_mut().reset(Instant::now() + wait);
                }
            }
            () = &mut idle, if streams.is_empty() => {
                // Idle (or the close grace) counts from the last stream answered inline.
                let wait = if closing { CLOSE_GRACE } else { idle_limit };
                if let Some(at) = served_at.take().filter(|&at| at + wait > Instant::now()) {
                    idle.as_mut().reset(at + wait);
                    continue;
                }
                if closing {
                    // Told to go away, no stream left, still not closed: a client that
                    // does not read (or never acknowledges the GOAWAY's PING).
                    return tracing::debug!("h2 connection did not close in time");
                }
                conn.graceful_shutdown();
                closing = true;
                idle.as_mut().reset(Instant::now() + CLOSE_GRACE);
            }
            () = &mut stop, if !closing => {
                // Open streams finish first, within the server's shutdown grace period.
                conn.graceful_shutdown();
                closing = true;
                idle.as_mut().reset(Instant::now() + CLOSE_GRACE);
            }
        }
    }
}

/// Polls a stream once (see [`poll_once`]): what it returns when answered at once, else
/// `None`, the stream now a task of `streams`.
async fn start<F>(mut stream: Pin<Box<F>>, streams: &mut JoinSet<Buffers>) -> Option<Buffers>
where
    F: Future<Output = Buffers> + Send + 'static,
{
    match poll_once(stream.as_mut()).await {
        Poll::Ready(used) => Some(used),
        Poll::Pending => {
            streams.spawn(stream);
            None
        }
    }
}

/// Polls `fut` once. A stream is first polled on the connection's task: a hit is answered
/// there whole, its frames go out with the batch (see `wire`), and costs no task; a stream
/// that must wait (an origin, the client's window) moves to a task of its own, where its next
/// poll registers that task's waker in place of the connection's.
async fn poll_once<F: Future + ?Sized>(mut fut: Pin<&mut F>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await
}

/// What a stream answered inline lends the next one: its cache key and Cache-Status
/// buffers, as an h1 connection lends its `Buffers` to each request, so that a hit allocates
/// neither (callgrind, `h2load -c 100 -m 32`: growing them was about 1,600 instructions per
/// 1 KiB hit). The origin's buffers are not kept: an idle connection would hold them.
struct Lent {
    key: Vec<u8>,
    cache_status: Vec<u8>,
}

impl Lent {
    /// A key longer than this (a long URL) is not kept for the next stream.
    const KEPT: usize = 1024;

    fn from(used: Buffers) -> Lent {
        let key = if used.key.capacity() <= Self::KEPT {
            used.key
        } else {
            Vec::new()
        };
        Lent {
            key,
            cache_status: used.cache_status,
        }
    }

    fn buffers(self) -> Buffers {
        Buffers {
            key: self.key,
            cache_status: self.cache_status,
            ..Buffers::default()
        }
    }
}

/// One stream: the request refused when it would be dangerous forwarded (see `checks`),
/// else answered by the pipeline, then reset if its response did not end cleanly. Returns
/// `buffers` for the next stream.
async fn serve_stream(
    state: Arc<State>,
    info: Arc<ConnInfo>,
    req: http::Request<RecvStream>,
    respond: SendResponse<Bytes>,
    mut buffers: Buffers,
) -> Buffers {
    let (parts, body) = req.into_parts();
    let ended = body.is_end_stream();
    let request = H2Request::new(&parts, info.mode == Mode::Forward, ended);
    let mut exchange = H2Exchange::new(&state, &request, body, respond);
    match checks::refusal(&parts) {
        None => {
            pipeline::serve(&state, &info, &mut exchange, &request, &mut buffers).await;
        }
        Some(why) => {
            let refusal = Outcome::local(400, why);
            pipeline::refuse(&state, &info, &mut exchange, &request, refusal).await;
        }
    }
    exchange.finish();
    buffers
}
