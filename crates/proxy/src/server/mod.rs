//! Listeners, the accept loops, and graceful shutdown: on the shutdown signal, stop accepting,
//! let in-flight requests finish (idle keep-alive connections close at once, busy ones after
//! their current response) and give up after the configured grace period.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use sepia_config::{Config, Mode};
use sepia_observe::AccessLog;
use socket2::{Domain, Socket, Type};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;

use crate::shutdown::Shutdown;

use crate::client;
use crate::intercept::{self, Divert};
use crate::shared::Shared;

/// Pending connections the kernel queues per listener.
const BACKLOG: i32 = 4096;

/// The proxy: its listeners and what their sessions share.
///
/// The runtime that runs it must call [`crate::worker_parks`] from
/// `tokio::runtime::Builder::on_thread_park`, as the `sepia` binary does: it tells a busy
/// worker from an idle one (see `burst.rs`). Without it every response waits for one pass of
/// the scheduler once its worker has begun two requests.
pub struct Server {
    shared: Arc<Shared>,
    listeners: Vec<Bound>,
}

/// A listening socket and how its connections are served.
struct Bound {
    listener: TcpListener,
    mode: Mode,
    spoof_client: bool,
}

impl Server {
    /// Binds every configured listener. Must be called inside the tokio runtime.
    pub fn bind(config: Arc<Config>, log: AccessLog) -> io::Result<Server> {
        let mut listeners = Vec::with_capacity(config.listeners.len());
        for l in &config.listeners {
            let listener = bind(l.address, l.mode == Mode::Tproxy).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot listen on {}: {e}", l.address))
            })?;
            listeners.push(Bound {
                listener,
                mode: l.mode,
                spoof_client: l.spoof_client,
            });
        }
        Ok(Server {
            shared: Arc::new(Shared::new(config, log)?),
            listeners,
        })
    }

    /// The bound addresses (useful with port 0).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|b| b.listener.local_addr().ok())
            .collect()
    }

    /// Serves until `shutdown` completes, then drains.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let tracker = Arc::new(Tracker::new(Arc::default()));
        for bound in self.listeners {
            tokio::spawn(accept_loop(bound, self.shared.clone(), tracker.clone()));
        }
        shutdown.await;
        tracing::info!("shutting down: no new connections; finishing in-flight requests");
        tracker.shutdown.begin();
        let grace = self.shared.config.server.shutdown_grace;
        if tokio::time::timeout(grace, tracker.all_done())
            .await
            .is_err()
        {
            tracing::warn!(
                open = tracker.count.load(Ordering::Relaxed),
                "shutdown grace period over; closing remaining connections"
            );
        }
    }
}

fn bind(addr: SocketAddr, transparent: bool) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    // Restarting Sepia must not wait for old connections in TIME_WAIT.
    socket.set_reuse_address(true)?;
    if transparent {
        // TPROXY delivers connections addressed to other hosts only to IP_TRANSPARENT sockets
        // (needs CAP_NET_ADMIN). Linux accepts the IPv4-level option on IPv6 sockets too.
        socket.set_ip_transparent(true).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("IP_TRANSPARENT for a tproxy listener (needs CAP_NET_ADMIN): {e}"),
            )
        })?;
    }
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    // Responses are written whole, so Nagle would only delay their last segment. Linux copies
    // TCP_NODELAY from the listening socket into every connection it accepts (the child socket
    // is cloned from the listener): set here once, it saves a setsockopt per connection,
    // one of ~7 syscalls a connection-per-request client costs (bench/RESULTS.md, 2026-11-24).
    socket.set_nodelay(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    TcpListener::from_std(socket.into())
}

async fn accept_loop(bound: Bound, shared: Arc<Shared>, tracker: Arc<Tracker>) {
    let Bound {
        listener,
        mode,
        spoof_client,
    } = bound;
    let Ok(listen) = listener.local_addr() else {
        return;
    };
    let mut stop = std::pin::pin!(tracker.shutdown.waiter());
    if tracker.shutdown.has_begun() {
        return;
    }
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, peer)) => {
                    let divert = intercept::divert(&stream, mode, listen, spoof_client, peer);
                    let conn = Conn { shared: shared.clone(), mode, divert, guard: tracker.enter() };
                    spawn_session(conn, stream, peer);
                }
                Err(e) => {
                    // Out of descriptors or memory: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            },
            _ = &mut stop => return,
        }
    }
}

/// What a client connection carries between its session task and its parked state. Kept to
/// five words: the peer address is asked of the socket again when a parked connection wakes
/// (one syscall per resumption, at most once a second per client) and the shutdown signal is
/// cloned from the tracker, so neither is stored while the client is idle.
struct Conn {
    shared: Arc<Shared>,
    mode: Mode,
    divert: Divert,
    guard: Guard,
}

/// Runs a client session; if it goes idle, parks the connection in a separate small task so
/// the session's large future (buffers, request state) is freed while the client is silent.
fn spawn_session(conn: Conn, stream: TcpStream, peer: SocketAddr) {
    tokio::spawn(async move {
        let served = client::serve(
            conn.shared.clone(),
            stream,
            peer,
            conn.mode,
            conn.divert.clone(),
            conn.guard.0.shutdown.clone(),
        )
        .await;
        if let client::Served::Idle(stream) = served {
            tokio::spawn(Parked::new(conn, stream));
        }
    });
}

pin_project_lite::pin_project! {
    /// An idle keep-alive connection: holds only the socket until the client sends again (then a
    /// new session starts), the keep-alive idle timeout passes, or the server shuts down.
    ///
    /// This is what every idle client costs, so it is a hand-written future rather than an
    /// `async fn` with `select!`: readiness uses the socket's own waker slot
    /// (`poll_read_ready`, no waiter node as `readable()` adds), the shutdown signal is an owned
    /// `Notify` waiter (no borrow to keep alive), and nothing is stored twice. 10,000 parked
    /// connections measured in bench/RESULTS.md.
    struct Parked {
        conn: Option<Conn>,
        stream: Option<TcpStream>,
        #[pin]
        idle: tokio::time::Sleep,
        #[pin]
        stop: OwnedNotified,
    }
}

impl Parked {
    fn new(conn: Conn, stream: TcpStream) -> Parked {
        let rest = conn
            .shared
            .config
            .timeouts
            .client_idle
            .saturating_sub(client::IDLE_RELEASE);
        // Created before the first poll: a `notify_waiters` after this point is still seen.
        let stop = conn.guard.0.shutdown.waiter();
        Parked {
            idle: tokio::time::sleep(rest),
            stop,
            conn: Some(conn),
            stream: Some(stream),
        }
    }
}

impl Future for Parked {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        if this.stop.poll(cx).is_ready() || this.conn.as_ref().is_some_and(Conn::stopping) {
            return Poll::Ready(());
        }
        if let Some(stream) = this.stream.as_ref() {
            match stream.poll_read_ready(cx) {
                Poll::Ready(Ok(())) => {
                    if let (Some(conn), Some(stream)) = (this.conn.take(), this.stream.take()) {
                        // A peer that already reset the connection has nothing to serve.
                        if let Ok(peer) = stream.peer_addr() {
                            spawn_session(conn, stream, peer);
                        }
                    }
                    return Poll::Ready(());
                }
                Poll::Ready(Err(_)) => return Poll::Ready(()),
                Poll::Pending => {}
            }
        }
        if this.idle.poll(cx).is_ready() {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Conn {
    /// Whether shutdown began before this connection parked.
    fn stopping(&self) -> bool {
        self.guard.0.shutdown.has_begun()
    }
}

/// Counts open client connections so shutdown can wait for them, and tells them to close.
struct Tracker {
    count: AtomicUsize,
    zero: Notify,
    /// Begins when the server stops; every session and parked connection holds it.
    shutdown: Arc<Shutdown>,
}

struct Guard(Arc<Tracker>);

impl Tracker {
    fn new(shutdown: Arc<Shutdown>) -> Tracker {
        Tracker {
            count: AtomicUsize::new(0),
            zero: Notify::new(),
            shutdown,
        }
    }

    fn enter(self: &Arc<Self>) -> Guard {
        self.count.fetch_add(1, Ordering::AcqRel);
        Guard(self.clone())
    }

    async fn all_done(&self) {
        loop {
            let notified = self.zero.notified();
            if self.count.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.zero.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `measure` with a connected socket, its peer address, the built-in configuration's
    /// shared state and a shutdown signal, on a throwaway runtime.
    fn with_parts<T>(
        measure: impl FnOnce(TcpStream, SocketAddr, Arc<Shared>, Arc<Shutdown>) -> T,
    ) -> T {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let s = TcpStream::connect(addr).await.unwrap();
            let config = Arc::new(Config::builtin_default());
            let shared = Arc::new(Shared::new(config, AccessLog::disabled()).unwrap());
            measure(s, addr, shared, Arc::default())
        })
    }

    #[test]
    fn accepted_connections_inherit_nodelay() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            for addr in ["127.0.0.1:0", "[::1]:0"] {
                let Ok(listener) = bind(addr.parse().unwrap(), false) else {
                    continue; // no IPv6 loopback here
                };
                let to = listener.local_addr().unwrap();
                let _client = TcpStream::connect(to).await.unwrap();
                let (accepted, _) = listener.accept().await.unwrap();
                assert!(accepted.nodelay().unwrap(), "{addr}: Nagle is on");
            }
        });
    }

    #[test]
    fn a_parked_connection_is_small() {
        let serve = with_parts(|s, addr, shared, shutdown| {
            std::mem::size_of_val(&client::serve(
                shared,
                s,
                addr,
                Mode::Forward,
                Divert::NotDiverted,
                shutdown,
            ))
        });
        let park = with_parts(|s, _, shared, shutdown| {
            let tracker = Arc::new(Tracker::new(shutdown));
            let conn = Conn {
                shared,
                mode: Mode::Forward,
                divert: Divert::NotDiverted,
                guard: tracker.enter(),
            };
            std::mem::size_of_val(&Parked::new(conn, s))
        });
        eprintln!("serve future: {serve} bytes, parked connection: {park} bytes");
        // A parked connection must stay small: this is what 10,000 idle clients cost.
        assert!(park <= 256, "a parked connection grew to {park} bytes");
    }
}
