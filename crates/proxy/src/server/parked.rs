//! Client connections between requests: a session runs while requests come; a connection idle
//! for `IDLE_RELEASE` is parked in a small task of its own until the client sends again.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use sepia_config::{AlpnProtocol, Mode};
use tokio::sync::futures::OwnedNotified;

use tokio::net::TcpStream;

use super::parking_lot::{Parkable, ParkingLot};
use super::tracker::Guard;
use crate::front::{h1, h2, Listener};
use crate::model::Scheme;
use crate::state::State;
use crate::transport::intercept::Divert;
use crate::transport::tls::TlsListener;
use crate::transport::Conn;

/// What a client connection carries between its session task and its parked state. Kept to
/// five words: the peer address is asked of the socket again when a parked connection wakes
/// (one syscall per resumption, at most once a second per client) and the shutdown signal is
/// cloned from the tracker, so neither is stored while the client is idle.
pub(super) struct Accepted {
    pub state: Arc<State>,
    pub mode: Mode,
    /// The listener's index in the configuration.
    pub listener: u16,
    pub divert: Divert,
    pub guard: Guard,
    /// While parked: the `IdleClock` second at which the connection closes. Kept here, in
    /// bytes this struct pads anyway, rather than in `Parked`: one more field there made its
    /// task a 384-byte allocation instead of 256 (tokio rounds tasks to 128 bytes).
    pub parked_until: u32,
    /// Where the connection waits when idle, if it is plain TCP.
    pub lot: Arc<ParkingLot<Accepted>>,
}

impl Parkable for Accepted {
    fn parked_until(&self) -> u32 {
        self.parked_until
    }

    fn resume(self, stream: TcpStream) {
        // A peer that already reset the connection has nothing to serve.
        if let Ok(peer) = stream.peer_addr() {
            spawn_session(self, Conn::Tcp(stream), peer);
        }
    }

    fn close(self, stream: TcpStream) {
        tokio::spawn(close_gracefully(Conn::Tcp(stream), self.guard));
    }
}

/// How long a connection closed by a shutdown keeps reading after its FIN (at most).
const LINGER: Duration = Duration::from_secs(2);

/// Closes an idle client connection when the server stops (RFC 9112 §9.6): our side first
/// (FIN, or TLS close_notify then FIN), then what the client still sends is read and
/// dropped until it closes too, for up to `LINGER`. Closing the socket with unread bytes in
/// it would answer a request that crossed our FIN with a reset, which can destroy what the
/// client had not read yet; this way it sees an orderly end of the connection. `guard`
/// keeps the drain waiting for it.
pub(super) async fn close_gracefully(mut conn: Conn, guard: Guard) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let drain = async {
        conn.shutdown().await?;
        let mut sink = [0u8; 512];
        while conn.read(&mut sink).await? > 0 {}
        std::io::Result::Ok(())
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
    drop(guard);
}

/// Runs a client session; if it goes idle, parks the connection in a separate small task so
/// the session's large future (buffers, request state) is freed while the client is silent.
pub(super) fn spawn_session(accepted: Accepted, conn: Conn, peer: SocketAddr) {
    tokio::spawn(run_session(accepted, conn, peer));
}

/// Runs the TLS handshake of an accepted connection in its own task (the accept loop goes on),
/// then its session: HTTP/2 when ALPN chose `h2` (RFC 9113 §3.2), else HTTP/1.1. A failed or
/// late handshake just closes the connection: there is no HTTP to answer on, and clients that
/// scan or give up are common.
pub(super) fn spawn_tls_session(
    accepted: Accepted,
    stream: TcpStream,
    peer: SocketAddr,
    tls: Arc<TlsListener>,
) {
    tokio::spawn(async move {
        let limit = accepted.state.config.timeouts.request_head;
        let conn = match tls.handshake(stream, limit).await {
            Ok(conn) => Conn::Tls(Box::new(conn)),
            Err(e) => return tracing::debug!(%peer, "TLS handshake failed: {e}"),
        };
        if conn.alpn() == Some(AlpnProtocol::H2.id()) {
            let listener = listener_of(&accepted, &conn);
            let shutdown = accepted.guard.shutdown();
            h2::serve(accepted.state.clone(), conn, peer, listener, shutdown).await;
        } else {
            run_session(accepted, conn, peer).await;
        }
    });
}

/// The listener as a front end sees it; origin-form requests over TLS are `https` ones.
fn listener_of(accepted: &Accepted, conn: &Conn) -> Listener {
    Listener {
        mode: accepted.mode,
        divert: accepted.divert.clone(),
        index: usize::from(accepted.listener),
        scheme: match conn {
            Conn::Tcp(_) => Scheme::Http,
            Conn::Tls(_) => Scheme::Https,
        },
    }
}

async fn run_session(mut accepted: Accepted, conn: Conn, peer: SocketAddr) {
    // A parked connection that wakes after a reload lets go of the replaced state.
    if let Some(newer) = State::newest(&accepted.state) {
        accepted.state = newer;
    }
    let listener = listener_of(&accepted, &conn);
    let shutdown = accepted.guard.shutdown();
    match h1::serve(accepted.state.clone(), conn, peer, listener, shutdown).await {
        h1::Served::Idle(conn) => park(accepted, conn),
        h1::Served::Stopped(conn) => close_gracefully(conn, accepted.guard).await,
        h1::Served::Closed => {}
    }
}

/// A plain-TCP connection goes to the server's parking lot (its socket and 40 bytes); a TLS
/// one, or any when the lot no longer runs, to a small task of its own.
fn park(mut accepted: Accepted, conn: Conn) {
    accepted.parked_until = idle_deadline(&accepted);
    let (accepted, conn) = match conn {
        Conn::Tcp(stream) => match accepted.lot.clone().park(accepted, stream) {
            Ok(()) => return,
            Err((accepted, stream)) => (accepted, Conn::Tcp(stream)),
        },
        conn => (accepted, conn),
    };
    tokio::spawn(Parked::new(accepted, conn));
}

/// The `IdleClock` second at which a connection parked now closes: `client_idle` after its
/// last request, of which `IDLE_RELEASE` went by before it was parked.
fn idle_deadline(accepted: &Accepted) -> u32 {
    let timeouts = &accepted.state.config.timeouts;
    let rest = timeouts.client_idle.saturating_sub(h1::IDLE_RELEASE);
    accepted.guard.clock().deadline_after(rest)
}

pin_project_lite::pin_project! {
    /// An idle keep-alive connection: holds only the socket until the client sends again (then a
    /// new session starts), the keep-alive idle timeout passes, or the server shuts down.
    ///
    /// This is what every idle client costs, so it is a hand-written future rather than an
    /// `async fn` with `select!`: readiness uses the socket's own waker slot
    /// (`poll_read_ready`, no waiter node as `readable()` adds), the idle deadline is a second
    /// of the server's `IdleClock` (no timer of its own) whose owned `Notify` waiter also
    /// wakes at shutdown, and nothing is stored twice. 10,000 parked connections measured in
    /// bench/RESULTS.md.
    pub(super) struct Parked {
        accepted: Option<Accepted>,
        conn: Option<Conn>,
        #[pin]
        wake: OwnedNotified,
    }

    impl PinnedDrop for Parked {
        fn drop(this: Pin<&mut Self>) {
            // Still holding the connection: it closes without a session (counted out here;
            // a resumed one was counted out when it left).
            if let Some(accepted) = this.project().accepted.as_ref() {
                accepted.guard.parked_task(false);
            }
        }
    }
}

impl Parked {
    /// `accepted.parked_until` is set (`idle_deadline`).
    pub(super) fn new(accepted: Accepted, conn: Conn) -> Parked {
        // Created before the first poll: a shutdown's `notify_waiters` after this is still seen.
        let wake = accepted.guard.clock().waiter(accepted.parked_until);
        accepted.guard.parked_task(true);
        Parked {
            wake,
            accepted: Some(accepted),
            conn: Some(conn),
        }
    }
}

impl Future for Parked {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        let Some(accepted) = this.accepted.as_ref() else {
            return Poll::Ready(());
        };
        if accepted.guard.stopping() {
            return stop(this.accepted, this.conn);
        }
        // Woken by the clock (its second, or an early one: see `IdleClock::waiter`) or by
        // shutdown: close when due, else wait on the clock again.
        while this.wake.as_mut().poll(cx).is_ready() {
            let clock = accepted.guard.clock();
            if accepted.guard.stopping() {
                return stop(this.accepted, this.conn);
            }
            if clock.now() >= accepted.parked_until {
                return Poll::Ready(());
            }
            this.wake.set(clock.waiter(accepted.parked_until));
        }
        if let Some(conn) = this.conn.as_mut() {
            match conn.poll_read_ready(cx) {
                Poll::Ready(Ok(())) => {
                    if let (Some(accepted), Some(conn)) = (this.accepted.take(), this.conn.take()) {
                        accepted.guard.parked_task(false);
                        // A peer that already reset the connection has nothing to serve.
                        if let Ok(peer) = conn.peer_addr() {
                            spawn_session(accepted, conn, peer);
                        }
                    }
                    return Poll::Ready(());
                }
                Poll::Ready(Err(_)) => return Poll::Ready(()),
                Poll::Pending => {}
            }
        }
        Poll::Pending
    }
}

/// A parked connection at shutdown: closed gracefully, in a task of its own.
fn stop(accepted: &mut Option<Accepted>, conn: &mut Option<Conn>) -> Poll<()> {
    if let (Some(accepted), Some(conn)) = (accepted.take(), conn.take()) {
        tokio::spawn(close_gracefully(conn, accepted.guard));
    }
    Poll::Ready(())
}
