//! The client side of an HTTP/1.1 connection: read a request head, have the pipeline answer it,
//! and loop while the connection stays persistent (RFC 9112 §9.3). Pipelined requests are read
//! from the same buffer after the previous response, so they are answered in order (§9.3.2).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use sepia_http1::{Limits, ParseError, RequestDecoder, RequestHead};
use sepia_observe::metrics::IdleMark;

use super::client_io::ClientIo;
use super::exchange::H1Exchange;
use super::idle::{last_request, wait_for_request, IdleWait, Waited};
use crate::front::{burst, h2, Listener};
use crate::model::{ClientInfo, Outcome};
use crate::pipeline::{self, Buffers, ConnInfo};
use crate::state::shutdown::Shutdown;
use crate::state::State;
use crate::transport::io::read_by_deadline;
use crate::transport::Conn;

/// The read buffer of an active connection. When less than `HEAD_MIN_ROOM` is free it is
/// regrown; while nothing else references it (the previous request's slices are dropped after
/// each response) regrowing reclaims the same allocation, so a keep-alive hit allocates nothing.
const HEAD_BUFFER: usize = 8 * 1024;
const HEAD_MIN_ROOM: usize = 1024;
const HEAD_FIRST_BUFFER: usize = 2 * 1024;

/// How a session ended.
pub enum Served {
    /// The connection is finished (closed, failed, or the server is shutting down).
    Closed,
    /// Idle keep-alive connection with no unread bytes: park it until it becomes readable.
    Idle(Conn),
    /// The server is stopping and the connection is between requests, its client silent:
    /// close it gracefully (`server::parked::close_gracefully`).
    Stopped(Conn),
}

/// One client connection and what persists across its requests.
struct Session {
    io: ClientIo,
    shutdown: Arc<Shutdown>,
    /// A request began since the idle timer was last set (see `IdleWait`).
    active: bool,
}

enum HeadRead {
    Request,
    Closed,
    Idle,
    Stopped,
    TimedOut,
    Invalid(ParseError),
}

/// Serves one client connection until it closes, fails, the server shuts down, or it idles
/// long enough to be parked.
pub async fn serve(
    mut state: Arc<State>,
    conn: Conn,
    peer: SocketAddr,
    listener: Listener,
    shutdown: Arc<Shutdown>,
) -> Served {
    // TCP_NODELAY is inherited from the listening socket (server/mod.rs `bind`).
    let mut info = ConnInfo {
        client: ClientInfo::new(peer),
        allowed: ConnInfo::allowed_by(&state, listener.mode, peer.ip()),
        mode: listener.mode,
        divert: listener.divert,
        scheme: listener.scheme,
        listener: listener.index,
    };
    let mut session = Session {
        io: ClientIo::new(conn),
        shutdown,
        active: false,
    };
    let mut buffers = Buffers::default();
    // In the session's own future (no allocation of its own: 10,000 of those, freed when the
    // connections parked, left pages of the allocator half used, +115 B per idle client).
    let mut idle = std::pin::pin!(None::<IdleWait>);
    let limits = Limits {
        max_head_bytes: state.config.limits.max_request_head,
        max_headers: state.config.limits.max_headers,
    };
    let mut decoder = RequestDecoder::new(limits);
    let mut req = RequestHead::default();
    // No request was answered on this session yet: only then may the HTTP/2 preface come.
    let mut first = true;
    loop {
        let head = read_head(&state, &mut session, &mut decoder, &mut req, idle.as_mut()).await;
        let refusal = match head {
            HeadRead::Closed => return Served::Closed,
            HeadRead::Idle => return Served::Idle(session.io.into_conn()),
            HeadRead::Stopped => return Served::Stopped(session.io.into_conn()),
            HeadRead::TimedOut => Outcome::local(408, "the request head did not arrive in time"),
            HeadRead::Invalid(e) => {
                let h2c = first && h2c_allowed(&state, &info);
                if let Some(early) = h2c.then(|| h2c_preface(&req, &session.io.buf)).flatten() {
                    // Boxed: the h1 session's future stays as small as before.
                    Box::pin(hand_to_h2(state, session, info, early, peer)).await;
                    return Served::Closed;
                }
                Outcome::local(e.status(), e.reason())
            }
            HeadRead::Request => {
                // A reload since the last request: this one is served by the new
                // configuration (one atomic load when there was none).
                if let Some(newer) = State::newest(&state) {
                    state = newer;
                    // `[forward] allow` may have changed too.
                    info.allowed = ConnInfo::allowed_by(&state, info.mode, peer.ip());
                }
                burst::request_began();
                session.active = true;
                first = false;
                let mut exchange =
                    H1Exchange::new(&state, &mut session.io, &req, &session.shutdown);
                let outcome = pipeline::serve(&state, &info, &mut exchange, &req, &mut buffers);
                let outcome = outcome.await;
                let keep = exchange.keeps_connection(&outcome);
                // Drop this request's slices of the read buffer: with no other reference left,
                // the next read reuses the same allocation instead of allocating a new one.
                req.clear();
                // Even if shutdown began since: `read_head` then waits for one last request.
                if keep {
                    continue;
                }
                return Served::Closed;
            }
        };
        let mut exchange = H1Exchange::new(&state, &mut session.io, &req, &session.shutdown);
        pipeline::refuse(&state, &info, &mut exchange, &req, refusal.closing()).await;
        return Served::Closed;
    }
}

/// Reads until a complete request head is in `req`. A connection with nothing unread waits
/// for its next request (see `wait_for_request`, then it is parked); once a head has started it
/// must complete within `request_head` (408).
async fn read_head(
    state: &State,
    session: &mut Session,
    decoder: &mut RequestDecoder,
    req: &mut RequestHead,
    mut idle: Pin<&mut Option<IdleWait>>,
) -> HeadRead {
    let t = &state.config.timeouts;
    let mut deadline = None;
    loop {
        let buf = &mut session.io.buf;
        match decoder.decode(buf, req) {
            Ok(true) => return HeadRead::Request,
            Ok(false) => {}
            Err(e) => return HeadRead::Invalid(e),
        }
        if buf.is_empty() {
            let waited = match session.shutdown.has_begun() {
                true => Waited::Stopping,
                false => {
                    let waiting = wait_for_request(
                        &mut session.io.conn,
                        &session.shutdown,
                        &mut session.active,
                        t.client_idle,
                        idle.as_mut(),
                    );
                    let idle_mark = state.metrics.then(IdleMark::enter);
                    let waited = waiting.await;
                    drop(idle_mark);
                    waited
                }
            };
            match waited {
                Waited::Readable => {}
                Waited::Idle => return HeadRead::Idle,
                Waited::Closed => return HeadRead::Closed,
                // Its answer carries `Connection: close` (shutdown has begun).
                Waited::Stopping if last_request(&mut session.io.conn).await => {}
                Waited::Stopping => return HeadRead::Stopped,
            }
        }
        let ClientIo { conn, buf, .. } = &mut session.io;
        if !buf.is_empty() && deadline.is_none() {
            // Part of a head is in: the rest must follow within `request_head`.
            deadline = Some(tokio::time::Instant::now() + t.request_head);
        }
        make_head_room(buf);
        let read = read_by_deadline(conn, buf, HEAD_MIN_ROOM, &mut deadline, t.request_head);
        match read.await {
            Ok(0) => return HeadRead::Closed,
            Ok(_) => {}
            // Readiness without data (or a client that never completes its head).
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut && !buf.is_empty() => {
                return HeadRead::TimedOut
            }
            Err(_) => return HeadRead::Closed,
        }
    }
}

/// A new connection starts small (most heads are a few hundred bytes); one that needs more
/// room, or whose buffer is still referenced, gets the full size.
///
/// An empty buffer that nothing else references any more (the last request's slices were
/// dropped by `req.clear()`) starts again at the front of its allocation, so a keep-alive
/// connection reads every head into the same few cache lines. Without this each head went
/// after the last one until the allocation ran out: with 100 busy connections their buffers
/// cycled through ~800 KB, more than this core's L2, and every head landed in a cold line.
fn make_head_room(buf: &mut BytesMut) {
    if buf.is_empty() {
        // Asking for one byte more than the view holds makes `bytes` take the front back
        // when the allocation is not shared (the view ends where the allocation does: only
        // `split_to` ever cuts this buffer); when it is shared, `try_reclaim` neither
        // allocates nor copies.
        let _ = buf.try_reclaim(buf.capacity() + 1);
    }
    if buf.capacity() - buf.len() < HEAD_MIN_ROOM {
        let room = if buf.capacity() == 0 {
            HEAD_FIRST_BUFFER
        } else {
            HEAD_BUFFER
        };
        buf.reserve(room);
    }
}

/// Serves the rest of the connection in HTTP/2 (prior-knowledge h2c, RFC 9113 §3.3).
async fn hand_to_h2(
    state: Arc<State>,
    session: Session,
    info: ConnInfo,
    early: Bytes,
    peer: SocketAddr,
) {
    let ConnInfo {
        mode,
        divert,
        listener: index,
        scheme,
        ..
    } = info;
    let listener = Listener {
        mode,
        divert,
        index,
        scheme,
    };
    let (conn, shutdown) = (session.io.into_conn(), session.shutdown);
    h2::serve_h2c(state, conn, early, peer, listener, shutdown).await;
}

/// The part of the HTTP/2 preface that reads as an HTTP/1.x head: `PRI * HTTP/2.0` and an
/// empty line.
const PREFACE_HEAD: usize = 18;

/// Whether the connection's listener serves prior-knowledge h2c (`listen[].h2c`).
fn h2c_allowed(state: &State, info: &ConnInfo) -> bool {
    state
        .config
        .listeners
        .get(info.listener)
        .is_some_and(|l| l.h2c)
}

/// The bytes read so far when the head the decoder refused is the start of the HTTP/2
/// connection preface (RFC 9113 §3.4: `PRI * HTTP/2.0`, then `SM` after it), for the h2
/// front end to read again. Looked at only after a refusal, so an h1 request pays nothing.
fn h2c_preface(req: &RequestHead, unread: &BytesMut) -> Option<Bytes> {
    let head = req.raw();
    let (start, rest) = h2::PREFACE.split_at(PREFACE_HEAD);
    let seen = &unread[..unread.len().min(rest.len())];
    if head.as_ref() != start || !rest.starts_with(seen) {
        return None;
    }
    let mut early = BytesMut::with_capacity(head.len() + unread.len());
    early.extend_from_slice(head);
    early.extend_from_slice(unread);
    Some(early.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(raw: &[u8]) -> (RequestHead, BytesMut) {
        let mut decoder = RequestDecoder::new(Limits::default());
        let mut buf = BytesMut::from(raw);
        let mut req = RequestHead::default();
        assert!(
            decoder.decode(&mut buf, &mut req).is_err(),
            "{raw:?} parsed"
        );
        (req, buf)
    }

    #[test]
    fn an_empty_unshared_head_buffer_is_reused_from_its_front() {
        let mut buf = BytesMut::new();
        make_head_room(&mut buf);
        let front = buf.as_ptr();
        buf.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        let head = buf.split_to(buf.len()).freeze();
        // Still referenced: the buffer goes on after the head, where it is.
        make_head_room(&mut buf);
        assert_eq!(buf.as_ptr(), front.wrapping_add(head.len()));
        drop(head);
        make_head_room(&mut buf);
        assert_eq!(
            buf.as_ptr(),
            front,
            "back at the front of the same allocation"
        );
        assert_eq!(buf.capacity(), HEAD_FIRST_BUFFER);
        // Unread bytes are never moved, even where `bytes` would move them (they follow a
        // dropped head, at an offset at least their length).
        buf.extend_from_slice(b"GET / HTTP/1.1\r\n\r\nGET");
        let head = buf.split_to(buf.len() - 3);
        drop(head);
        let unread = buf.as_ptr();
        make_head_room(&mut buf);
        assert_eq!(&buf[..], b"GET");
        assert_eq!(buf.as_ptr(), unread);
    }

    #[test]
    fn the_preface_is_found_in_the_head_the_decoder_refused() {
        let mut whole = h2::PREFACE.to_vec();
        whole.extend_from_slice(b"\0\0\0\x04\0\0\0\0\0"); // and an empty SETTINGS
        let (req, unread) = refused(&whole);
        assert_eq!(h2c_preface(&req, &unread).as_deref(), Some(&whole[..]));
        // Only part of the rest arrived yet: still the preface.
        let (req, unread) = refused(&h2::PREFACE[..20]);
        assert_eq!(
            h2c_preface(&req, &unread).as_deref(),
            Some(&h2::PREFACE[..20])
        );
    }

    #[test]
    fn other_refused_heads_are_not_the_preface() {
        let cases: [&[u8]; 3] = [
            b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n",
            b"GET / HTTP/2.0\r\n\r\nSM\r\n\r\n",
            b"PRI * HTTP/3.0\r\n\r\nSM\r\n\r\n",
        ];
        for raw in cases {
            let (req, unread) = refused(raw);
            assert_eq!(h2c_preface(&req, &unread), None, "{raw:?}");
        }
    }
}
