//! The client side of a connection: read a request head, dispatch it, write the answer, log,
//! and loop while the connection stays persistent (RFC 9112 §9.3). Pipelined requests are read
//! from the same buffer after the previous response, so they are answered in order (§9.3.2).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};
use sepia_config::{HostHeader, Mode};
use sepia_http1::{
    HeaderId, Method, ParseError, RequestDecoder, RequestHead, ResponseHead, Version,
};
use sepia_observe::{AccessRecord, Hierarchy, ResultCode};
use tokio::net::TcpStream;
use tokio::sync::futures::OwnedNotified;
use tokio::time::Instant;

use crate::access::{self, RuleTarget};
use crate::cache;
use crate::errors::{error_response, ERROR_CONTENT_TYPE};
use crate::exchange::{Origins, Outcome, Upstream};
use crate::heads::ClientInfo;
use crate::intercept::{self, Divert};
use crate::io::{read_by_deadline, write_parts_within};
use crate::shared::Shared;
use crate::shutdown::Shutdown;
use crate::target::{parse_absolute, split_authority, TargetError};
use crate::tunnel;

/// The read buffer of an active connection. When less than `HEAD_MIN_ROOM` is free it is
/// regrown; while nothing else references it (the previous request's slices are dropped after
/// each response) regrowing reclaims the same allocation, so a keep-alive hit allocates nothing.
const HEAD_BUFFER: usize = 8 * 1024;
const HEAD_MIN_ROOM: usize = 1024;
const HEAD_FIRST_BUFFER: usize = 2 * 1024;

/// How long an idle keep-alive connection keeps its buffers and task (one to two of these, see
/// `IdleWait`). A busy client sends its next request well within this; after it, the
/// connection is parked (see `server::Parked`): a socket and a small task, a few hundred bytes
/// instead of several KiB.
pub const IDLE_RELEASE: std::time::Duration = std::time::Duration::from_secs(1);

/// How a session ended.
pub enum Served {
    /// The connection is finished (closed, failed, or the server is shutting down).
    Closed,
    /// Idle keep-alive connection with no unread bytes: park it until it becomes readable.
    Idle(TcpStream),
}

/// The client connection and the buffers reused by every request on it.
pub struct ClientSide {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    pub info: ClientInfo,
    /// Bytes read from the client and not consumed yet (the next head, body bytes, pipelining).
    pub buf: BytesMut,
    /// Where outgoing heads are built.
    pub head_buf: BytesMut,
    /// The origin's response head, reused across requests.
    pub resp: ResponseHead,
    /// The user the current request authenticated as (`[auth]` and a `proxy_auth` ACL), for
    /// the access log's `%un`.
    pub user: Option<std::sync::Arc<str>>,
    /// The cache key of the current request, built in a reused buffer.
    pub key: Vec<u8>,
    /// Where a hit's Cache-Status value is written, reused.
    pub status_buf: Vec<u8>,
    /// The origin read buffer, reused by every exchange on this connection.
    pub obuf: BytesMut,
    /// Where an intercepted connection was going (`NotDiverted` on other listeners).
    pub divert: Divert,
    shutdown: Arc<Shutdown>,
    /// A request began since the idle timer was last set (see `IdleWait`).
    active: bool,
}

impl ClientSide {
    pub fn shutting_down(&self) -> bool {
        self.shutdown.has_begun()
    }
}

enum HeadRead {
    Request,
    Closed,
    Idle,
    TimedOut,
    Invalid(ParseError),
}

/// Serves one client connection until it closes, fails, the server shuts down, or it idles
/// long enough to be parked.
pub async fn serve(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    mode: Mode,
    divert: Divert,
    shutdown: Arc<Shutdown>,
) -> Served {
    // TCP_NODELAY is inherited from the listening socket (server.rs `bind`).
    let allowed = mode == Mode::Reverse || shared.config.forward.client_allowed(peer.ip());
    let mut cs = ClientSide {
        stream,
        peer,
        info: ClientInfo::new(peer.ip()),
        buf: BytesMut::new(),
        head_buf: BytesMut::new(),
        resp: ResponseHead::default(),
        key: Vec::new(),
        user: None,
        status_buf: Vec::new(),
        obuf: BytesMut::new(),
        divert,
        shutdown,
        active: false,
    };
    // In the session's own future (no allocation of its own: 10,000 of those, freed when the
    // connections parked, left pages of the allocator half used, +115 B per idle client).
    let mut idle = std::pin::pin!(None::<IdleWait>);
    let mut decoder = RequestDecoder::new(shared.limits);
    let mut req = RequestHead::default();
    loop {
        let head = read_head(&shared, &mut cs, &mut decoder, &mut req, idle.as_mut()).await;
        // The request's time starts when its head is complete (Squid's %tr), not while idle.
        // Read only for the access log: two clock reads are a visible share of a hit.
        let timing = shared
            .log
            .is_enabled()
            .then(|| (SystemTime::now(), Instant::now()));
        let outcome = match head {
            HeadRead::Closed => return Served::Closed,
            HeadRead::Idle => return Served::Idle(cs.stream),
            HeadRead::TimedOut => {
                local_error(408, "the request head did not arrive in time", false)
            }
            HeadRead::Invalid(e) => local_error(e.status(), e.reason(), false),
            HeadRead::Request => {
                crate::burst::request_began();
                cs.active = true;
                dispatch(&shared, &mut cs, &req, mode, allowed).await
            }
        };
        let mut outcome = outcome;
        if let Some((status, detail)) = outcome.local {
            let answer = error_response(
                status,
                detail,
                !outcome.keep_client,
                shared.via(),
                shared.challenge(),
            );
            outcome.bytes_sent = answer.len() as u64;
            outcome.content_type = Some(Bytes::from_static(ERROR_CONTENT_TYPE));
            if write_parts_within(
                &mut cs.stream,
                &[&answer],
                shared.config.timeouts.client_idle,
            )
            .await
            .is_err()
            {
                outcome.keep_client = false;
            }
        }
        if let Some((started, clock)) = timing {
            log(&shared, &cs, &req, mode, started, clock, &outcome);
        }
        // Drop this request's slices of the read buffer: with no other reference left, the
        // next read reuses the same allocation instead of allocating a new one.
        req.clear();
        cs.resp.clear();
        cs.user = None;
        if !outcome.keep_client || cs.shutting_down() {
            return Served::Closed;
        }
    }
}

/// An error Sepia answers itself before any origin is involved.
pub(crate) fn local_error(status: u16, detail: &'static str, keep_client: bool) -> Outcome {
    Outcome {
        status,
        bytes_sent: 0,
        keep_client,
        result: if status == 403 {
            ResultCode::TcpDenied
        } else {
            ResultCode::TagNone
        },
        peer: None,
        content_type: None,
        local: Some((status, detail)),
        body_complete: false,
    }
}

/// Reads until a complete request head is in `req`. A connection with nothing unread waits
/// for its next request (see `wait_for_request`, then it is parked); once a head has started it
/// must complete within `request_head` (408).
async fn read_head(
    shared: &Shared,
    cs: &mut ClientSide,
    decoder: &mut RequestDecoder,
    req: &mut RequestHead,
    mut idle: Pin<&mut Option<IdleWait>>,
) -> HeadRead {
    let t = &shared.config.timeouts;
    let mut deadline: Option<Instant> = None;
    loop {
        match decoder.decode(&mut cs.buf, req) {
            Ok(true) => return HeadRead::Request,
            Ok(false) => {}
            Err(e) => return HeadRead::Invalid(e),
        }
        if cs.buf.is_empty() {
            if cs.shutting_down() {
                return HeadRead::Closed;
            }
            match wait_for_request(cs, t.client_idle, idle.as_mut()).await {
                Waited::Readable => {}
                Waited::Idle => return HeadRead::Idle,
                Waited::Closed => return HeadRead::Closed,
            }
        }
        if !cs.buf.is_empty() && deadline.is_none() {
            // Part of a head is in: the rest must follow within `request_head`.
            deadline = Some(Instant::now() + t.request_head);
        }
        if cs.buf.capacity() - cs.buf.len() < HEAD_MIN_ROOM {
            // A new connection starts small (most heads are a few hundred bytes); one that
            // needs more room, or whose buffer is still referenced, gets the full size.
            let room = if cs.buf.capacity() == 0 {
                HEAD_FIRST_BUFFER
            } else {
                HEAD_BUFFER
            };
            cs.buf.reserve(room);
        }
        let read = read_by_deadline(
            &mut cs.stream,
            &mut cs.buf,
            HEAD_MIN_ROOM,
            &mut deadline,
            t.request_head,
        );
        match read.await {
            Ok(0) => return HeadRead::Closed,
            Ok(_) => {}
            // Readiness without data (or a client that never completes its head).
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut && !cs.buf.is_empty() => {
                return HeadRead::TimedOut
            }
            Err(_) => return HeadRead::Closed,
        }
    }
}

pin_project_lite::pin_project! {
    /// The timer and shutdown waiter of a connection's waits for its next request, made once
    /// per connection rather than once per request: arming a timer for every wait (a clock
    /// read, an insertion into the timer wheel and a removal) and registering a shutdown
    /// waiter every time were a tenth of the user time of a keep-alive hit (perf, c=100).
    ///
    /// The timer is set `IDLE_RELEASE` ahead when armed. When it fires during a wait after
    /// requests were served since, it is set again from then: a connection is parked after
    /// one to two `IDLE_RELEASE`s without a request, which is all parking needs.
    struct IdleWait {
        #[pin]
        timer: tokio::time::Sleep,
        #[pin]
        stop: OwnedNotified,
    }
}

enum Waited {
    Readable,
    Idle,
    Closed,
}

/// Waits until the client sends its next request, the connection has been idle long enough to
/// be parked (or closed, when `client_idle` is shorter than `IDLE_RELEASE`), or the server
/// shuts down.
async fn wait_for_request(
    cs: &mut ClientSide,
    client_idle: std::time::Duration,
    mut idle: Pin<&mut Option<IdleWait>>,
) -> Waited {
    let wait = IDLE_RELEASE.min(client_idle);
    // Below IDLE_RELEASE, `client_idle` closes the connection: that limit is kept exactly,
    // from the start of each wait (a clock read per request, in this rare configuration only).
    let parks = wait < client_idle;
    if let (false, Some(armed)) = (parks, idle.as_mut().as_pin_mut()) {
        armed.project().timer.reset(Instant::now() + wait);
    }
    std::future::poll_fn(|cx| {
        match cs.stream.poll_read_ready(cx) {
            Poll::Ready(Ok(())) => return Poll::Ready(Waited::Readable),
            Poll::Ready(Err(_)) => return Poll::Ready(Waited::Closed),
            Poll::Pending => {}
        }
        if idle.is_none() {
            idle.set(Some(IdleWait {
                timer: tokio::time::sleep(wait),
                stop: cs.shutdown.waiter(),
            }));
            // Read after the waiter exists: a shutdown that began before is seen here, one
            // that begins after wakes the waiter.
            if cs.shutdown.has_begun() {
                return Poll::Ready(Waited::Closed);
            }
        }
        let Some(armed) = idle.as_mut().as_pin_mut() else {
            return Poll::Ready(Waited::Closed);
        };
        let mut armed = armed.project();
        if armed.stop.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Waited::Closed);
        }
        while armed.timer.as_mut().poll(cx).is_ready() {
            if !parks || !cs.active {
                return Poll::Ready(if parks { Waited::Idle } else { Waited::Closed });
            }
            cs.active = false;
            armed.timer.as_mut().reset(Instant::now() + wait);
        }
        Poll::Pending
    })
    .await
}

/// Decides where a request goes: the recv → route → pass/tunnel step of the state machine.
async fn dispatch(
    shared: &Arc<Shared>,
    cs: &mut ClientSide,
    req: &RequestHead,
    mode: Mode,
    allowed: bool,
) -> Outcome {
    let no_body_pending = req.keep_alive && req.body_framing() == sepia_http1::BodyFraming::Empty;
    // [[http_access]] rules replace forward.allow and govern every listener; they are applied
    // below, once the target is read, to every request whose target can be determined (the
    // others are answered with an error before any origin or cache work either way).
    let rules = shared.config.http_access.as_ref();
    if rules.is_none() && !allowed {
        return local_error(
            403,
            "access denied: this proxy does not serve your address",
            no_body_pending,
        );
    }
    if req.method == Method::Connect {
        if mode != Mode::Forward {
            return local_error(405, "CONNECT is not allowed here", false);
        }
        if let Some(rules) = rules {
            let target = RuleTarget::connect(req.target());
            let denied = access::enforce(shared, cs, req, target, rules, no_body_pending);
            if let Some(denied) = denied.await {
                return denied;
            }
        }
        return Box::pin(tunnel::connect(shared, cs, req)).await;
    }
    let absolute = match parse_absolute(req.raw(), req.target()) {
        Ok(t) => Some(t),
        Err(TargetError::NotAbsolute) => None,
        Err(TargetError::UnsupportedScheme) => {
            return local_error(501, "only http:// URLs are supported", no_body_pending)
        }
        Err(TargetError::BadAuthority) => {
            return local_error(400, "invalid host in the request URL", false)
        }
    };
    if let Some(rules) = rules {
        // Reverse and interception listeners receive origin-form requests with a Host.
        let target = match &absolute {
            Some(t) => RuleTarget::url(&t.authority, &t.origin_form),
            None if mode != Mode::Forward => req
                .host()
                .and_then(|host| RuleTarget::url(host, req.target())),
            None => None,
        };
        let denied = access::enforce(shared, cs, req, target, rules, no_body_pending);
        if let Some(denied) = denied.await {
            return denied;
        }
    }
    match mode {
        Mode::Forward => {
            let Some(target) = absolute else {
                return local_error(
                    400,
                    "a proxy request needs an absolute http:// URL",
                    no_body_pending,
                );
            };
            let Some(auth) = split_authority(&target.authority) else {
                return local_error(400, "invalid host in the request URL", false);
            };
            let Ok(host) = std::str::from_utf8(auth.host) else {
                return local_error(400, "invalid host in the request URL", false);
            };
            // With absolute-form, the target's authority replaces any Host received (RFC 9112 §3.2.2).
            let up = Upstream {
                target: &target.origin_form,
                host: Some(&target.authority),
                origins: Origins::Host {
                    host,
                    port: auth.port.unwrap_or(80),
                },
            };
            cache::handle(shared, cs, req, up, &target.authority, &target.origin_form).await
        }
        Mode::Reverse => {
            // Borrowed from the request head (or the parsed absolute target): a cache hit
            // takes no reference count on the head for them.
            let (host_value, origin_form): (&[u8], &[u8]) = match &absolute {
                Some(t) => (&t.authority, &t.origin_form),
                None => match req.host() {
                    Some(h) => (h, req.target()),
                    None => return local_error(400, "missing Host", false),
                },
            };
            let Some(auth) = split_authority(host_value) else {
                return local_error(400, "invalid Host", false);
            };
            let Some((route, state)) = shared.route(auth.host) else {
                return local_error(404, "no route for this host", no_body_pending);
            };
            let host: Option<&[u8]> = match &route.host_header {
                HostHeader::Pass => Some(host_value),
                HostHeader::Origin => None,
                HostHeader::Fixed(v) => Some(v.as_bytes()),
            };
            let up = Upstream {
                target: origin_form,
                host,
                origins: Origins::Route(state),
            };
            cache::handle(shared, cs, req, up, host_value, origin_form).await
        }
        Mode::Intercept | Mode::Tproxy => {
            let routed = intercept::route(shared, &cs.divert, req, absolute, no_body_pending);
            let (host_value, origin_form, diverted) = match routed.await {
                Ok(routed) => routed,
                Err(outcome) => return outcome,
            };
            let up = Upstream {
                target: &origin_form,
                host: Some(&host_value),
                origins: Origins::Diverted(&diverted),
            };
            cache::handle(shared, cs, req, up, &host_value, &origin_form).await
        }
    }
}

fn log(
    shared: &Shared,
    cs: &ClientSide,
    req: &RequestHead,
    mode: Mode,
    started: SystemTime,
    clock: Instant,
    o: &Outcome,
) {
    // Squid 5.7 logs a request it could not parse as `NONE error:invalid-request`, and one it
    // parsed but refused (e.g. `GET /x` to a forward proxy) with its method and target.
    let (method, target) = if !req.method_raw().is_empty() && !req.target().is_empty() {
        (
            req.raw().slice_ref(req.method_raw()),
            req.raw().slice_ref(req.target()),
        )
    } else {
        (
            Bytes::from_static(b"NONE"),
            Bytes::from_static(b"error:invalid-request"),
        )
    };
    let origin_form = target.first() == Some(&b'/');
    shared.log.log(AccessRecord {
        start: started,
        elapsed: clock.elapsed(),
        client: cs.peer,
        result: o.result,
        status: o.status,
        bytes_sent: o.bytes_sent,
        method,
        scheme_host: if origin_form && mode != Mode::Forward {
            req.headers().get_bytes(HeaderId::Host)
        } else {
            None
        },
        target,
        version_minor: u8::from(req.version == Version::Http11),
        // Copied only for authenticated requests, and only when logging.
        user: cs
            .user
            .as_deref()
            .map(|u| Bytes::copy_from_slice(u.as_bytes())),
        hierarchy: if o.peer.is_some() {
            Hierarchy::Direct
        } else {
            Hierarchy::None
        },
        peer: o.peer,
        content_type: o.content_type.clone(),
        referer: req.headers().get_bytes(HeaderId::Referer),
        user_agent: req.headers().get_bytes(HeaderId::UserAgent),
    });
}
